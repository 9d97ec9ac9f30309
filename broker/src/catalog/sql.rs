//! The Flink SQL subset of shared/spec/interface.md, parsed by hand with `nom`.
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

use kafluss_convert::types::{DataType, Field, FieldType};
use nom::bytes::complete::take_while;
use nom::error::{ErrorKind, ParseError as NomParseError};
use nom::IResult;
use thiserror::Error;

/// Deepest type nesting the parser accepts (ARRAY/MAP/ROW levels). Kafka mapping allows 64
/// business levels below a column; the bound keeps hostile input from exhausting the stack.
pub const MAX_TYPE_NESTING: usize = 100;
/// Longest identifier or string literal, in bytes.
pub const MAX_TOKEN_LEN: usize = 64 * 1024;

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

/// A syntax error: where and what.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("syntax error at line {line}, column {column}: {message}")]
pub struct SyntaxError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// The nom error: where parsing stopped and what it wanted there. `or` keeps the error that
/// got furthest, which is the one that explains the input best.
#[derive(Debug, Clone, PartialEq)]
pub struct RawError<'a> {
    at: &'a str,
    message: Cow<'static, str>,
    /// The message already says what was found (a semantic check), don't append it.
    complete: bool,
}

impl<'a> NomParseError<&'a str> for RawError<'a> {
    fn from_error_kind(input: &'a str, kind: ErrorKind) -> Self {
        RawError {
            at: input,
            message: Cow::Owned(format!("unexpected input ({})", kind.description())),
            complete: false,
        }
    }

    fn append(_input: &'a str, _kind: ErrorKind, other: Self) -> Self {
        other
    }

    fn or(self, other: Self) -> Self {
        if other.at.len() <= self.at.len() {
            other
        } else {
            self
        }
    }
}

type PResult<'a, T> = IResult<&'a str, T, RawError<'a>>;

fn expected<'a, T>(at: &'a str, what: impl Into<Cow<'static, str>>) -> PResult<'a, T> {
    Err(nom::Err::Error(RawError {
        at,
        message: what.into(),
        complete: false,
    }))
}

/// A failure that stops the whole parse (no alternative can do better).
fn fail<'a, T>(at: &'a str, message: impl Into<Cow<'static, str>>) -> PResult<'a, T> {
    Err(nom::Err::Failure(RawError {
        at,
        message: message.into(),
        complete: true,
    }))
}

/// Skips whitespace and comments. An unterminated `/*` is a failure.
fn ws(mut input: &str) -> PResult<'_, ()> {
    loop {
        let trimmed = input.trim_start();
        if let Some(rest) = trimmed.strip_prefix("--") {
            input = rest.find('\n').map_or("", |end| &rest[end..]);
        } else if let Some(rest) = trimmed.strip_prefix("/*") {
            match rest.find("*/") {
                Some(end) => input = &rest[end + 2..],
                None => return fail(trimmed, "unterminated comment: '/*' without '*/'"),
            }
        } else {
            return Ok((trimmed, ()));
        }
    }
}

fn is_word_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// A bare word (`[A-Za-z_][A-Za-z0-9_]*`) after whitespace.
fn word(input: &str) -> PResult<'_, &str> {
    let (input, ()) = ws(input)?;
    if !input.starts_with(is_word_start) {
        return expected(input, "a word");
    }
    let (rest, text) = take_while(is_word_char)(input)?;
    if text.len() > MAX_TOKEN_LEN {
        return fail(input, format!("identifier longer than {MAX_TOKEN_LEN} bytes"));
    }
    Ok((rest, text))
}

/// The keyword `kw`, case-insensitively, as a whole word.
fn keyword(kw: &'static str) -> impl Fn(&str) -> PResult<'_, ()> {
    move |input| {
        let (start, ()) = ws(input)?;
        match word(start) {
            Ok((rest, text)) if text.eq_ignore_ascii_case(kw) => Ok((rest, ())),
            _ => expected(start, kw),
        }
    }
}

/// All of `kws` in sequence, or nothing (then `false`). Used for `IF NOT EXISTS`: once the
/// first keyword matched, the others are required.
fn optional_keywords<'a>(input: &'a str, kws: &[&'static str]) -> PResult<'a, bool> {
    let Some((first, others)) = kws.split_first() else {
        return Ok((input, false));
    };
    let Ok((mut input, ())) = keyword(first)(input) else {
        return Ok((input, false));
    };
    for kw in others {
        (input, ()) = keyword(kw)(input)?;
    }
    Ok((input, true))
}

/// `c` after whitespace.
fn symbol(c: char) -> impl Fn(&str) -> PResult<'_, ()> {
    move |input| {
        let (input, ()) = ws(input)?;
        match input.strip_prefix(c) {
            Some(rest) => Ok((rest, ())),
            None => expected(input, format!("'{c}'")),
        }
    }
}

/// An identifier: a bare word or a backquoted name.
fn identifier(input: &str) -> PResult<'_, String> {
    let (start, ()) = ws(input)?;
    if let Some(body) = start.strip_prefix('`') {
        return quoted(start, body, '`', "backquoted identifier").and_then(|(rest, name)| {
            if name.is_empty() {
                fail(start, "empty identifier")
            } else {
                Ok((rest, name))
            }
        });
    }
    match word(start) {
        Ok((rest, text)) => Ok((rest, text.to_string())),
        Err(nom::Err::Error(_)) => expected(start, "an identifier"),
        Err(other) => Err(other),
    }
}

/// The body of a quoted token: `quote` ends it, a doubled `quote` stands for one.
fn quoted<'a>(start: &'a str, body: &'a str, quote: char, what: &'static str) -> PResult<'a, String> {
    let mut value = String::new();
    let mut rest = body;
    loop {
        let Some(end) = rest.find(quote) else {
            return fail(start, format!("unterminated {what}"));
        };
        value.push_str(&rest[..end]);
        rest = &rest[end + quote.len_utf8()..];
        if let Some(after) = rest.strip_prefix(quote) {
            value.push(quote);
            rest = after;
        } else {
            break;
        }
        if value.len() > MAX_TOKEN_LEN {
            return fail(start, format!("{what} longer than {MAX_TOKEN_LEN} bytes"));
        }
    }
    if value.len() > MAX_TOKEN_LEN {
        return fail(start, format!("{what} longer than {MAX_TOKEN_LEN} bytes"));
    }
    Ok((rest, value))
}

/// `'text'` with `''` for a quote.
fn string_literal(input: &str) -> PResult<'_, String> {
    let (start, ()) = ws(input)?;
    match start.strip_prefix('\'') {
        Some(body) => quoted(start, body, '\'', "string literal"),
        None => expected(start, "a string literal ('...')"),
    }
}

/// An unsigned integer of at most 10 digits that fits `u32`.
fn unsigned(input: &str) -> PResult<'_, u32> {
    let (start, ()) = ws(input)?;
    let (rest, digits) = take_while(|c: char| c.is_ascii_digit())(start)?;
    if digits.is_empty() {
        return expected(start, "a number");
    }
    match digits.parse::<u32>() {
        Ok(value) if digits.len() <= 10 => Ok((rest, value)),
        _ => fail(start, format!("number {digits} is too large")),
    }
}

/// `first (',' next)*` where each item is parsed by `item`.
fn comma_list<'a, T>(input: &'a str, mut item: impl FnMut(&'a str) -> PResult<'a, T>) -> PResult<'a, Vec<T>> {
    let (mut input, first) = item(input)?;
    let mut items = vec![first];
    while let Ok((rest, ())) = symbol(',')(input) {
        let (rest, next) = item(rest)?;
        items.push(next);
        input = rest;
    }
    Ok((input, items))
}

/// `'(' item (',' item)* ')'`.
fn parenthesized<'a, T>(input: &'a str, item: impl FnMut(&'a str) -> PResult<'a, T>) -> PResult<'a, Vec<T>> {
    let (input, ()) = symbol('(')(input)?;
    let (input, items) = comma_list(input, item)?;
    let (input, ()) = symbol(')')(input)?;
    Ok((input, items))
}

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
// Types

/// A type with its optional `NOT NULL` / `NULL`.
pub(crate) fn field_type(input: &str, depth: usize) -> PResult<'_, FieldType> {
    let (input, data_type) = data_type(input, depth)?;
    let (input, not_null) = optional_keywords(input, &["NOT", "NULL"])?;
    if not_null {
        return Ok((input, FieldType::not_null(data_type)));
    }
    let (input, _) = optional_keywords(input, &["NULL"])?;
    Ok((input, FieldType::nullable(data_type)))
}

/// `'(' n ')'` or nothing.
fn optional_length(input: &str) -> PResult<'_, Option<u32>> {
    match symbol('(')(input) {
        Ok((rest, ())) => {
            let (rest, value) = unsigned(rest)?;
            let (rest, ()) = symbol(')')(rest)?;
            Ok((rest, Some(value)))
        }
        Err(_) => Ok((input, None)),
    }
}

/// A fractional-seconds precision, 0..=9.
fn precision<'a>(at: &'a str, input: &'a str, default: u8) -> PResult<'a, u8> {
    let (rest, value) = optional_length(input)?;
    match value.unwrap_or(u32::from(default)) {
        p @ 0..=9 => Ok((rest, p as u8)),
        p => fail(at, format!("precision {p} out of range: must be between 0 and 9")),
    }
}

/// A length (CHAR/BINARY), at least 1.
fn length<'a>(at: &'a str, input: &'a str, type_name: &str) -> PResult<'a, u32> {
    let (rest, value) = optional_length(input)?;
    match value.unwrap_or(1) {
        0 => fail(at, format!("{type_name} length must be at least 1")),
        n if n > i32::MAX as u32 => fail(at, format!("{type_name} length {n} is too large")),
        n => Ok((rest, n)),
    }
}

fn data_type(input: &str, depth: usize) -> PResult<'_, DataType> {
    let (start, ()) = ws(input)?;
    if depth > MAX_TYPE_NESTING {
        return fail(start, format!("types nest deeper than {MAX_TYPE_NESTING} levels"));
    }
    let Ok((rest, name)) = word(start) else {
        return expected(start, "a type");
    };
    let name = name.to_ascii_uppercase();
    let simple = |data_type: DataType| -> PResult<'_, DataType> { Ok((rest, data_type)) };
    match name.as_str() {
        "BOOLEAN" => simple(DataType::Boolean),
        "TINYINT" => simple(DataType::TinyInt),
        "SMALLINT" => simple(DataType::SmallInt),
        "INT" | "INTEGER" => simple(DataType::Int),
        "BIGINT" => simple(DataType::BigInt),
        "FLOAT" => simple(DataType::Float),
        "DOUBLE" => {
            let (rest, _) = optional_keywords(rest, &["PRECISION"])?;
            Ok((rest, DataType::Double))
        }
        "DECIMAL" | "DEC" | "NUMERIC" => decimal(start, rest),
        "CHAR" => {
            let (rest, n) = length(start, rest, "CHAR")?;
            Ok((rest, DataType::Char(n)))
        }
        "VARCHAR" => {
            let (rest, _) = length(start, rest, "VARCHAR")?;
            Ok((rest, DataType::String))
        }
        "STRING" => simple(DataType::String),
        "BINARY" => {
            let (rest, n) = length(start, rest, "BINARY")?;
            Ok((rest, DataType::Binary(n)))
        }
        "VARBINARY" => {
            let (rest, _) = length(start, rest, "VARBINARY")?;
            Ok((rest, DataType::Bytes))
        }
        "BYTES" => simple(DataType::Bytes),
        "DATE" => simple(DataType::Date),
        "TIME" => {
            let (rest, p) = precision(start, rest, 0)?;
            let (rest, _) = optional_keywords(rest, &["WITHOUT", "TIME", "ZONE"])?;
            Ok((rest, DataType::Time(p)))
        }
        "TIMESTAMP" => {
            let (rest, p) = precision(start, rest, 6)?;
            let (rest, local) = optional_keywords(rest, &["WITH", "LOCAL", "TIME", "ZONE"])?;
            if local {
                return Ok((rest, DataType::TimestampLtz(p)));
            }
            let (rest, _) = optional_keywords(rest, &["WITHOUT", "TIME", "ZONE"])?;
            Ok((rest, DataType::Timestamp(p)))
        }
        "TIMESTAMP_LTZ" => {
            let (rest, p) = precision(start, rest, 6)?;
            Ok((rest, DataType::TimestampLtz(p)))
        }
        "ARRAY" => {
            let (rest, ()) = symbol('<')(rest)?;
            let (rest, element) = field_type(rest, depth + 1)?;
            let (rest, ()) = symbol('>')(rest)?;
            Ok((rest, DataType::Array(Box::new(element))))
        }
        "MAP" => {
            let (rest, ()) = symbol('<')(rest)?;
            let (rest, mut key) = field_type(rest, depth + 1)?;
            let (rest, ()) = symbol(',')(rest)?;
            let (rest, value) = field_type(rest, depth + 1)?;
            let (rest, ()) = symbol('>')(rest)?;
            // Fluss MAP keys are never null, whatever the declaration says.
            key.nullable = false;
            Ok((
                rest,
                DataType::Map {
                    key: Box::new(key),
                    value: Box::new(value),
                },
            ))
        }
        "ROW" => row_type(rest, depth),
        _ => expected(start, "a type"),
    }
}

/// `DECIMAL [(p [, s])]`, default (10, 0) as in Flink.
fn decimal<'a>(at: &'a str, input: &'a str) -> PResult<'a, DataType> {
    let (mut rest, mut precision, mut scale) = (input, 10u32, 0u32);
    if let Ok((after, ())) = symbol('(')(input) {
        let (after, p) = unsigned(after)?;
        precision = p;
        rest = after;
        if let Ok((after, ())) = symbol(',')(rest) {
            let (after, s) = unsigned(after)?;
            scale = s;
            rest = after;
        }
        (rest, ()) = symbol(')')(rest)?;
    }
    if !(1..=38).contains(&precision) {
        return fail(
            at,
            format!("DECIMAL precision {precision} out of range: must be between 1 and 38"),
        );
    }
    if scale > precision {
        return fail(
            at,
            format!("DECIMAL scale {scale} out of range: must be between 0 and the precision {precision}"),
        );
    }
    Ok((
        rest,
        DataType::Decimal {
            precision: precision as u8,
            scale: scale as u8,
        },
    ))
}

/// `ROW<name type, ...>` or `ROW(name type, ...)`.
fn row_type(input: &str, depth: usize) -> PResult<'_, DataType> {
    let (after_ws, ()) = ws(input)?;
    let close = match after_ws.chars().next() {
        Some('<') => '>',
        Some('(') => ')',
        _ => return expected(after_ws, "'<' after ROW"),
    };
    let rest = &after_ws[1..];
    let (rest, fields) = comma_list(rest, |i| {
        let (i, name) = identifier(i)?;
        let (i, field_type) = field_type(i, depth + 1)?;
        Ok((i, Field::new(name, field_type)))
    })?;
    let (rest, ()) = symbol(close)(rest)?;
    Ok((rest, DataType::Row(fields)))
}

/// Parses a type written alone (what the catalog persists): `parse(display(t)) == t`.
pub fn parse_type(text: &str) -> Result<FieldType, SyntaxError> {
    let result = field_type(text, 0).and_then(|(rest, t)| {
        let (rest, ()) = ws(rest)?;
        if rest.is_empty() {
            Ok((rest, t))
        } else {
            expected(rest, "end of type")
        }
    });
    result.map(|(_, t)| t).map_err(|e| syntax_error(text, e))
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
    let mut statements = Vec::new();
    let mut input = script;
    loop {
        let (start, ()) = ws(input).map_err(|e| syntax_error(script, e))?;
        if start.is_empty() {
            return Ok(statements);
        }
        if let Some(rest) = start.strip_prefix(';') {
            input = rest;
            continue;
        }
        let (rest, statement) = statement(start).map_err(|e| syntax_error(script, e))?;
        let (after, ()) = ws(rest).map_err(|e| syntax_error(script, e))?;
        let rest = match after.strip_prefix(';') {
            Some(rest) => rest,
            None if after.is_empty() => after,
            None => {
                let error = RawError {
                    at: after,
                    message: Cow::Borrowed("';' or end of input"),
                    complete: false,
                };
                return Err(syntax_error(script, nom::Err::Error(error)));
            }
        };
        let (line, _) = position(script, start);
        statements.push(ParsedStatement {
            statement,
            line,
            text: start[..start.len() - after.len()].trim().to_string(),
        });
        input = rest;
    }
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
        }),
    }
}

/// 1-based line and column (in characters) of `at`, a suffix of `script`.
fn position(script: &str, at: &str) -> (usize, usize) {
    let offset = script.len().saturating_sub(at.len());
    let before = &script[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// What the input holds at `at`, for "expected X, found Y".
fn found(at: &str) -> String {
    if at.is_empty() {
        return "end of input".to_string();
    }
    let token: String = if at.starts_with(is_word_char) {
        at.chars().take_while(|c| is_word_char(*c)).take(40).collect()
    } else {
        at.chars().take(1).collect()
    };
    format!("'{token}'")
}

fn syntax_error(script: &str, error: nom::Err<RawError<'_>>) -> SyntaxError {
    let raw = match error {
        nom::Err::Error(raw) | nom::Err::Failure(raw) => raw,
        nom::Err::Incomplete(_) => RawError {
            at: "",
            message: Cow::Borrowed("more input"),
            complete: false,
        },
    };
    let (line, column) = position(script, raw.at);
    let message = if raw.complete {
        raw.message.into_owned()
    } else {
        format!("expected {}, found {}", raw.message, found(raw.at))
    };
    SyntaxError {
        line,
        column,
        message,
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
