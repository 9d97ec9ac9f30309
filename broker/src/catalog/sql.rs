//! The Flink SQL subset of interface.md, parsed by hand with `nom`.
//!
//! Every token parser skips the whitespace and comments (`-- ...`, `/* ... */`) before it, so
//! an error points at the token itself. Keywords are case-insensitive; identifiers keep their
//! case and may be backquoted (`` `a b` ``, a doubled backquote escapes one). Keywords are not
//! reserved: a column may be called `timestamp`, as in `_kafka_metadata ROW<timestamp ...>`.
//! Errors carry the line and column (1-based, columns in characters) and say what was expected.
//!
//! The parser only builds the AST; range rules that need no catalog (DECIMAL precision, type
//! nesting) are checked here, everything else in `ddl.rs`.

use std::borrow::Cow;
use std::fmt;

use kafluss_convert::types::Field;
use thiserror::Error;

use super::sql_lexer::{
    expected, fail, identifier, is_invisible, keyword, optional_keywords, parenthesized, scanned,
    string_literal, symbol, syntax_error, word, ws, PResult, RawError,
};
pub use super::sql_lexer::{SyntaxError, MAX_TOKEN_LEN};
use super::sql_types::field_type;
pub use super::sql_types::{parse_type, MAX_TYPE_NESTING};

/// `[db.]name` as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectName {
    pub database: Option<String>,
    pub name: String,
}

/// One argument of `CALL sys.proc(...)`: `name => 'v'`, possibly followed by more bare values
/// (`config_pairs => 'k', 'v'`), or positional values only (`name` is then `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallArgument {
    pub name: Option<String>,
    pub values: Vec<String>,
}

/// A parsed statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Statement {
    CreateDatabase {
        name: String,
        if_not_exists: bool,
    },
    DropDatabase {
        name: String,
        if_exists: bool,
        cascade: bool,
    },
    ShowDatabases,
    CreateTable(CreateTable),
    AlterTableSet {
        table: ObjectName,
        options: Vec<(String, String)>,
    },
    AlterTableReset {
        table: ObjectName,
        keys: Vec<String>,
    },
    DropTable {
        table: ObjectName,
        if_exists: bool,
    },
    ShowTables {
        database: Option<String>,
    },
    Describe {
        table: ObjectName,
    },
    ShowCreateTable {
        table: ObjectName,
    },
    Use {
        database: String,
    },
    Call {
        /// `sys` in `sys.add_acl`.
        namespace: String,
        procedure: String,
        arguments: Vec<CallArgument>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateTable {
    pub table: ObjectName,
    pub if_not_exists: bool,
    pub columns: Vec<Field>,
    pub primary_key: Vec<String>,
    pub partition_keys: Vec<String>,
    /// In written order; duplicates are refused by `ddl.rs`.
    pub options: Vec<(String, String)>,
}

/// A statement with where it started in the script (1-based line) and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedStatement {
    pub statement: Statement,
    pub line: usize,
    pub text: String,
}

/// Why a script was refused before anything ran.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ScriptError {
    /// `leading_words`: how the statement starts, to name it (see [`leading_words`]).
    #[error("{error}")]
    Syntax {
        error: SyntaxError,
        leading_words: String,
    },
    /// More statements than the limit; parsing stopped at the first one over it.
    #[error("the script has more than {limit} statements")]
    TooManyStatements { limit: usize },
}

/// What `SELECT` answers: kafluss runs no queries, rows are read with a scan.
pub const SELECT_POINTER: &str = "SELECT is not supported: kafluss runs DDL and admin statements only; \
read rows with `kafluss scan DB.TABLE` or GET /v1/tables/DB.TABLE/scan on this listener";

fn object_name(input: &str) -> PResult<'_, ObjectName> {
    let (input, first) = identifier(input)?;
    match symbol('.')(input) {
        Ok((rest, ())) => {
            let (rest, name) = identifier(rest)?;
            Ok((
                rest,
                ObjectName {
                    database: Some(first),
                    name,
                },
            ))
        }
        Err(_) => Ok((
            input,
            ObjectName {
                database: None,
                name: first,
            },
        )),
    }
}

/// `'key' = 'value'`.
fn property(input: &str) -> PResult<'_, (String, String)> {
    let (input, key) = string_literal(input)?;
    let (input, ()) = symbol('=')(input)?;
    let (input, value) = string_literal(input)?;
    Ok((input, (key, value)))
}

// ---------------------------------------------------------------------------------------
// Statements

fn statement(input: &str) -> PResult<'_, Statement> {
    let (start, ()) = ws(input)?;
    let Ok((rest, first)) = word(start) else {
        return expected(
            start,
            "a statement (CREATE, DROP, ALTER, SHOW, DESCRIBE, USE, CALL)",
        );
    };
    match first.to_ascii_uppercase().as_str() {
        "CREATE" => create(rest),
        "DROP" => drop(rest),
        "ALTER" => alter(rest),
        "SHOW" => show(rest),
        "DESCRIBE" | "DESC" => {
            let (rest, table) = object_name(rest)?;
            Ok((rest, Statement::Describe { table }))
        }
        "USE" => {
            let (rest, database) = identifier(rest)?;
            Ok((rest, Statement::Use { database }))
        }
        "CALL" => call(rest),
        "SELECT" => fail(start, SELECT_POINTER),
        _ => expected(
            start,
            "a statement (CREATE, DROP, ALTER, SHOW, DESCRIBE, USE, CALL)",
        ),
    }
}

fn create(input: &str) -> PResult<'_, Statement> {
    let (start, ()) = ws(input)?;
    if let Ok((rest, ())) = keyword("DATABASE")(start) {
        let (rest, if_not_exists) = optional_keywords(rest, &["IF", "NOT", "EXISTS"])?;
        let (rest, name) = identifier(rest)?;
        return Ok((rest, Statement::CreateDatabase { name, if_not_exists }));
    }
    if let Ok((rest, ())) = keyword("TABLE")(start) {
        return create_table(rest);
    }
    expected(start, "DATABASE or TABLE")
}

/// One element of the column list: a column or the primary key.
enum TableElement {
    Column(Field),
    PrimaryKey(Vec<String>),
}

fn table_element(input: &str) -> PResult<'_, TableElement> {
    let (start, ()) = ws(input)?;
    let mut after_constraint = start;
    if let Ok((rest, ())) = keyword("CONSTRAINT")(start) {
        (after_constraint, _) = identifier(rest)?;
        let (rest, ()) = keyword("PRIMARY")(after_constraint)?;
        return primary_key(rest);
    }
    if let Ok((rest, ())) = keyword("PRIMARY")(after_constraint) {
        if let Ok((rest, ())) = keyword("KEY")(rest) {
            return primary_key_columns(rest);
        }
    }
    let (rest, name) = identifier(start)?;
    let (rest, field_type) = field_type(rest, 0)?;
    Ok((rest, TableElement::Column(Field::new(name, field_type))))
}

fn primary_key(input: &str) -> PResult<'_, TableElement> {
    let (rest, ()) = keyword("KEY")(input)?;
    primary_key_columns(rest)
}

fn primary_key_columns(input: &str) -> PResult<'_, TableElement> {
    let (rest, columns) = parenthesized(input, identifier)?;
    let (rest, ()) = keyword("NOT")(rest)?;
    let (rest, ()) = keyword("ENFORCED")(rest)?;
    Ok((rest, TableElement::PrimaryKey(columns)))
}

fn create_table(input: &str) -> PResult<'_, Statement> {
    let (rest, if_not_exists) = optional_keywords(input, &["IF", "NOT", "EXISTS"])?;
    let (rest, table) = object_name(rest)?;
    let (rest, elements) = parenthesized(rest, table_element)?;
    let mut columns = Vec::new();
    let mut primary_key = Vec::new();
    for element in elements {
        match element {
            TableElement::Column(field) => columns.push(field),
            TableElement::PrimaryKey(keys) if primary_key.is_empty() => primary_key = keys,
            TableElement::PrimaryKey(_) => return fail(rest, "more than one PRIMARY KEY"),
        }
    }
    if columns.is_empty() {
        return fail(rest, "a table needs at least one column");
    }
    let (rest, partitioned) = optional_keywords(rest, &["PARTITIONED", "BY"])?;
    let (rest, partition_keys) = if partitioned {
        parenthesized(rest, identifier)?
    } else {
        (rest, Vec::new())
    };
    let (rest, with) = optional_keywords(rest, &["WITH"])?;
    let (rest, options) = if with {
        parenthesized(rest, property)?
    } else {
        (rest, Vec::new())
    };
    Ok((
        rest,
        Statement::CreateTable(CreateTable {
            table,
            if_not_exists,
            columns,
            primary_key,
            partition_keys,
            options,
        }),
    ))
}

fn drop(input: &str) -> PResult<'_, Statement> {
    let (start, ()) = ws(input)?;
    if let Ok((rest, ())) = keyword("DATABASE")(start) {
        let (rest, if_exists) = optional_keywords(rest, &["IF", "EXISTS"])?;
        let (rest, name) = identifier(rest)?;
        let (rest, cascade) = optional_keywords(rest, &["CASCADE"])?;
        let rest = if cascade {
            rest
        } else {
            optional_keywords(rest, &["RESTRICT"])?.0
        };
        return Ok((
            rest,
            Statement::DropDatabase {
                name,
                if_exists,
                cascade,
            },
        ));
    }
    if let Ok((rest, ())) = keyword("TABLE")(start) {
        let (rest, if_exists) = optional_keywords(rest, &["IF", "EXISTS"])?;
        let (rest, table) = object_name(rest)?;
        return Ok((rest, Statement::DropTable { table, if_exists }));
    }
    expected(start, "DATABASE or TABLE")
}

fn alter(input: &str) -> PResult<'_, Statement> {
    let (rest, ()) = keyword("TABLE")(input)?;
    let (rest, table) = object_name(rest)?;
    let (start, ()) = ws(rest)?;
    if let Ok((rest, ())) = keyword("SET")(start) {
        let (rest, options) = parenthesized(rest, property)?;
        return Ok((rest, Statement::AlterTableSet { table, options }));
    }
    if let Ok((rest, ())) = keyword("RESET")(start) {
        let (rest, keys) = parenthesized(rest, string_literal)?;
        return Ok((rest, Statement::AlterTableReset { table, keys }));
    }
    expected(start, "SET or RESET")
}

fn show(input: &str) -> PResult<'_, Statement> {
    let (start, ()) = ws(input)?;
    if let Ok((rest, ())) = keyword("DATABASES")(start) {
        return Ok((rest, Statement::ShowDatabases));
    }
    if let Ok((rest, ())) = keyword("TABLES")(start) {
        let (from_start, ()) = ws(rest)?;
        let from = keyword("FROM")(from_start).or_else(|_| keyword("IN")(from_start));
        if let Ok((rest, ())) = from {
            let (rest, database) = identifier(rest)?;
            return Ok((
                rest,
                Statement::ShowTables {
                    database: Some(database),
                },
            ));
        }
        return Ok((rest, Statement::ShowTables { database: None }));
    }
    if let Ok((rest, ())) = keyword("CREATE")(start) {
        let (rest, ()) = keyword("TABLE")(rest)?;
        let (rest, table) = object_name(rest)?;
        return Ok((rest, Statement::ShowCreateTable { table }));
    }
    expected(start, "DATABASES, TABLES or CREATE TABLE")
}

/// `CALL ns.proc(arg, ...)`: `name => 'v' [, 'v']...` or bare `'v'`.
fn call(input: &str) -> PResult<'_, Statement> {
    let (rest, namespace) = identifier(input)?;
    let (rest, ()) = symbol('.')(rest)?;
    let (rest, procedure) = identifier(rest)?;
    let (rest, ()) = symbol('(')(rest)?;
    let mut arguments: Vec<CallArgument> = Vec::new();
    let mut rest = rest;
    if let Ok((after, ())) = symbol(')')(rest) {
        return Ok((
            after,
            Statement::Call {
                namespace,
                procedure,
                arguments,
            },
        ));
    }
    loop {
        let (after, argument) = call_argument(rest)?;
        match (argument.name, arguments.last_mut()) {
            // `config_pairs => 'k', 'v'`: bare values continue the named argument before.
            (None, Some(previous)) if previous.name.is_some() => previous.values.extend(argument.values),
            (name, _) => arguments.push(CallArgument {
                name,
                values: argument.values,
            }),
        }
        rest = after;
        match symbol(',')(rest) {
            Ok((after, ())) => rest = after,
            Err(_) => break,
        }
    }
    let (rest, ()) = symbol(')')(rest)?;
    Ok((
        rest,
        Statement::Call {
            namespace,
            procedure,
            arguments,
        },
    ))
}

fn call_argument(input: &str) -> PResult<'_, CallArgument> {
    let (start, ()) = ws(input)?;
    if start.starts_with('\'') {
        let (rest, value) = string_literal(start)?;
        return Ok((
            rest,
            CallArgument {
                name: None,
                values: vec![value],
            },
        ));
    }
    let (rest, name) = identifier(start)?;
    let (rest, ()) = ws(rest)?;
    let Some(rest) = rest.strip_prefix("=>") else {
        return expected(rest, "'=>'");
    };
    let (rest, value) = string_literal(rest)?;
    Ok((
        rest,
        CallArgument {
            name: Some(name),
            values: vec![value],
        },
    ))
}

/// Parses a `;`-separated script. Empty statements (`;;`) are skipped; the last statement
/// needs no `;`. Nothing is returned unless the whole script parses.
pub fn parse_script(script: &str) -> Result<Vec<ParsedStatement>, SyntaxError> {
    parse_script_limited(script, usize::MAX).map_err(|error| match error {
        ScriptError::Syntax { error, .. } => error,
        ScriptError::TooManyStatements { limit } => SyntaxError {
            line: 1,
            column: 1,
            message: format!("more than {limit} statements"),
            statement: limit.saturating_add(1),
            unsupported: false,
        },
    })
}

/// [`parse_script`] that stops, refusing the script, at statement `limit + 1`.
///
/// One leading byte order mark (U+FEFF, as editors that save "UTF-8 with BOM" write) is
/// skipped, and lines and columns count from after it.
///
/// Linear in the script's length: each token is read once (alternatives re-read at most a
/// word), and statement lines are counted from the previous statement, not from the start.
pub fn parse_script_limited(script: &str, limit: usize) -> Result<Vec<ParsedStatement>, ScriptError> {
    let script = script.strip_prefix(BYTE_ORDER_MARK).unwrap_or(script);
    let mut statements = Vec::new();
    let mut input = script;
    // Line of `script[counted..]`'s first byte: advanced, never recounted from the start.
    let mut line = 1;
    let mut counted = 0;
    loop {
        let index = statements.len() + 1;
        let (start, ()) = ws(input).map_err(|error| ScriptError::Syntax {
            error: statement_error(script, error, index),
            leading_words: String::new(),
        })?;
        let in_statement = |error| ScriptError::Syntax {
            error: statement_error(script, error, index),
            leading_words: leading_words(start),
        };
        if start.is_empty() {
            return Ok(statements);
        }
        if let Some(rest) = start.strip_prefix(';') {
            input = rest;
            continue;
        }
        if statements.len() >= limit {
            return Err(ScriptError::TooManyStatements { limit });
        }
        let (rest, statement) = statement(start).map_err(in_statement)?;
        let (after, ()) = ws(rest).map_err(in_statement)?;
        let rest = match after.strip_prefix(';') {
            Some(rest) => rest,
            None if after.is_empty() => after,
            None => {
                let error = RawError {
                    at: after,
                    message: Cow::Borrowed("';' or end of input"),
                    complete: false,
                };
                return Err(in_statement(nom::Err::Error(error)));
            }
        };
        let offset = script.len() - start.len();
        line += count_newlines(&script[counted..offset]);
        counted = offset;
        statements.push(ParsedStatement {
            statement,
            line,
            text: start[..start.len() - after.len()].trim().to_string(),
        });
        input = rest;
    }
}

/// U+FEFF: skipped at the start of a script, elsewhere an invisible character (`found`).
const BYTE_ORDER_MARK: char = '\u{FEFF}';

fn count_newlines(text: &str) -> usize {
    scanned(text.len());
    text.bytes().filter(|&b| b == b'\n').count()
}

/// A syntax error of statement `index` (SELECT marked unsupported).
fn statement_error(script: &str, error: nom::Err<RawError<'_>>, index: usize) -> SyntaxError {
    let mut error = syntax_error(script, error);
    error.statement = index;
    error.unsupported = error.message == SELECT_POINTER;
    error
}

/// How a statement starts, to name it in messages: at most six words, cut before the first
/// string literal, quoted name, parenthesis, comment or `;` (literals may be secrets, such as
/// the passwords of `CALL sys.set_cluster_configs`). Invisible characters separate words, as
/// spaces do, so that none is printed raw (a stray byte order mark, say).
pub fn leading_words(statement: &str) -> String {
    const MAX_WORDS: usize = 6;
    const MAX_CHARS: usize = 80;
    let end = statement
        .find(['\'', '`', '"', '(', ';', '<'])
        .into_iter()
        .chain(statement.find("--"))
        .chain(statement.find("/*"))
        .min()
        .unwrap_or(statement.len());
    let mut text = String::new();
    let mut cut = false;
    let words = statement[..end]
        .split(is_invisible)
        .filter(|word| !word.is_empty());
    for (index, word) in words.enumerate() {
        if index == MAX_WORDS || text.chars().count() + word.chars().count() > MAX_CHARS {
            cut = true;
            break;
        }
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(word);
    }
    let rest = statement[end..].trim_start();
    if cut || !(rest.is_empty() || rest.starts_with(';')) {
        text.push_str(" ...");
    }
    text
}

/// Parses exactly one statement (a trailing `;` is allowed).
pub fn parse_statement(text: &str) -> Result<Statement, SyntaxError> {
    let mut statements = parse_script(text)?;
    match statements.len() {
        1 => Ok(statements.remove(0).statement),
        n => Err(SyntaxError {
            line: 1,
            column: 1,
            message: format!("expected one statement, found {n}"),
            statement: 2.min(n.max(1)),
            unsupported: false,
        }),
    }
}

impl Statement {
    /// What the statement does, without any literal (option values, procedure arguments may
    /// be secrets): `CREATE TABLE sales.orders`, `CALL sys.set_cluster_configs`.
    pub fn summary(&self) -> String {
        match self {
            Statement::CreateDatabase { name, .. } => format!("CREATE DATABASE {name}"),
            Statement::DropDatabase { name, .. } => format!("DROP DATABASE {name}"),
            Statement::ShowDatabases => "SHOW DATABASES".to_string(),
            Statement::CreateTable(create) => format!("CREATE TABLE {}", create.table),
            Statement::AlterTableSet { table, .. } => format!("ALTER TABLE {table} SET"),
            Statement::AlterTableReset { table, .. } => format!("ALTER TABLE {table} RESET"),
            Statement::DropTable { table, .. } => format!("DROP TABLE {table}"),
            Statement::ShowTables { database: Some(db) } => format!("SHOW TABLES FROM {db}"),
            Statement::ShowTables { database: None } => "SHOW TABLES".to_string(),
            Statement::Describe { table } => format!("DESCRIBE {table}"),
            Statement::ShowCreateTable { table } => format!("SHOW CREATE TABLE {table}"),
            Statement::Use { database } => format!("USE {database}"),
            Statement::Call {
                namespace, procedure, ..
            } => format!("CALL {namespace}.{procedure}"),
        }
    }
}

impl fmt::Display for ObjectName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.database {
            Some(database) => write!(f, "{database}.{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

#[cfg(test)]
#[path = "sql_tests.rs"]
mod tests;
