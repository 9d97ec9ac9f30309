//! Running a `;`-separated script: what `POST /v1/sql` answers.
//!
//! The whole script is parsed first (a syntax error anywhere, or more statements than
//! `admin.max-sql-statements`, runs nothing). Then the statements run in order, each
//! authorized when its turn comes and before it changes anything; the first failure stops the
//! script. Statements before it stay done (each one is stored when it completes), the ones
//! after it are not run. [`ScriptOutcome`] says which statement failed and carries the
//! results of those that ran.

use serde_json::{json, Map, Value};

use super::ddl::{Catalog, Session};
use super::error::SqlError;
use super::output::{describe, show_create_table, StatementResult};
use super::sql::{parse_script_limited, ScriptError, Statement};
use super::tables::AlterOptions;

/// What a script did.
#[derive(Debug)]
pub struct ScriptOutcome {
    /// Results of the statements that ran, in order (all of them when `failure` is `None`).
    pub results: Vec<StatementResult>,
    /// Statements in the script; 0 when it did not parse.
    pub statements: usize,
    /// The failure that stopped the script.
    pub failure: Option<ScriptFailure>,
}

/// Why a script stopped.
#[derive(Debug)]
pub struct ScriptFailure {
    /// 1-based index of the failed statement; `None` when the request as a whole was refused
    /// (too many statements).
    pub statement: Option<usize>,
    /// Line the failed statement starts on (the syntax error's line for a syntax error).
    pub line: Option<usize>,
    /// What the failed statement is, without literals: `CREATE TABLE sales.orders`.
    pub summary: Option<String>,
    /// The error; names the statement when the script has several.
    pub error: SqlError,
}

impl ScriptOutcome {
    fn failed(results: Vec<StatementResult>, statements: usize, failure: ScriptFailure) -> Self {
        ScriptOutcome {
            results,
            statements,
            failure: Some(failure),
        }
    }

    /// 200, or the failure's status.
    pub fn http_status(&self) -> u16 {
        self.failure
            .as_ref()
            .map_or(200, |failure| failure.error.http_status())
    }

    /// The body of `POST /v1/sql`: `{"results":[...]}`, or on failure
    /// `{"error":{"code","message","statement","line","summary"},"results":[...],"statements":N}`
    /// where `results` holds what the statements before the failed one returned.
    pub fn to_json(&self) -> Value {
        let results: Vec<Value> = self.results.iter().map(StatementResult::to_json).collect();
        let Some(failure) = &self.failure else {
            return json!({ "results": results });
        };
        let mut error = Map::new();
        error.insert("code".into(), json!(failure.error.code()));
        error.insert("message".into(), json!(failure.error.to_string()));
        if let Some(statement) = failure.statement {
            error.insert("statement".into(), json!(statement));
        }
        if let Some(line) = failure.line {
            error.insert("line".into(), json!(line));
        }
        if let Some(summary) = &failure.summary {
            error.insert("summary".into(), json!(summary));
        }
        json!({ "error": error, "results": results, "statements": self.statements })
    }

    /// The results, or the error that stopped the script.
    pub fn into_result(self) -> Result<Vec<StatementResult>, SqlError> {
        match self.failure {
            None => Ok(self.results),
            Some(failure) => Err(failure.error),
        }
    }
}

impl Catalog {
    /// Parses and runs a `;`-separated script in order. A syntax error anywhere runs
    /// nothing; an execution error stops the script there (earlier statements stay done) and
    /// names the statement when the script has several. [`Catalog::run_script`] also says
    /// which statement failed and what the earlier ones returned.
    pub fn execute(&self, script: &str, session: &mut Session) -> Result<Vec<StatementResult>, SqlError> {
        self.run_script(script, session).into_result()
    }

    /// Runs one parsed statement.
    pub fn execute_statement(
        &self,
        statement: Statement,
        session: &mut Session,
    ) -> Result<StatementResult, SqlError> {
        match statement {
            Statement::CreateDatabase { name, if_not_exists } => {
                self.create_database(&name, if_not_exists, session)
            }
            Statement::DropDatabase {
                name,
                if_exists,
                cascade,
            } => self.drop_database(&name, if_exists, cascade, session),
            Statement::ShowDatabases => Ok(self.show_databases(session)),
            Statement::CreateTable(create) => self.create_table(create, session),
            Statement::AlterTableSet { table, options } => {
                self.alter_table(&table, AlterOptions::Set(options), session)
            }
            Statement::AlterTableReset { table, keys } => {
                self.alter_table(&table, AlterOptions::Reset(keys), session)
            }
            Statement::DropTable { table, if_exists } => self.drop_table(&table, if_exists, session),
            Statement::ShowTables { database } => self.show_tables(database, session),
            Statement::Describe { table } => {
                let table = self.describable_table(&table, session)?;
                Ok(describe(&table))
            }
            Statement::ShowCreateTable { table } => {
                let table = self.describable_table(&table, session)?;
                Ok(StatementResult::rows(
                    &["create statement"],
                    vec![vec![show_create_table(&table)]],
                ))
            }
            Statement::Use { database } => self.use_database(database, session),
            Statement::Call {
                namespace,
                procedure,
                arguments,
            } => self.call_procedure(&namespace, &procedure, arguments, session),
        }
    }

    /// Parses and runs a script for `session` (see the module documentation); `USE` changes
    /// `session` for the statements after it.
    pub fn run_script(&self, script: &str, session: &mut Session) -> ScriptOutcome {
        let statements = match parse_script_limited(script, self.config().max_sql_statements) {
            Ok(statements) => statements,
            Err(ScriptError::Syntax { error, leading_words }) => {
                let failure = ScriptFailure {
                    statement: Some(error.statement),
                    line: Some(error.line),
                    summary: (!leading_words.is_empty()).then_some(leading_words),
                    error: SqlError::Syntax(error),
                };
                return ScriptOutcome::failed(Vec::new(), 0, failure);
            }
            Err(ScriptError::TooManyStatements { limit }) => {
                let failure = ScriptFailure {
                    statement: None,
                    line: None,
                    summary: None,
                    error: SqlError::TooManyStatements { limit },
                };
                return ScriptOutcome::failed(Vec::new(), 0, failure);
            }
        };
        let count = statements.len();
        let mut results = Vec::with_capacity(count);
        for (index, parsed) in statements.into_iter().enumerate() {
            // The summary never holds literals, so secrets of `set_cluster_configs` stay out
            // of the log.
            let summary = parsed.statement.summary();
            let principal = session.principal.to_string();
            match self.execute_statement(parsed.statement, session) {
                Ok(result) => {
                    tracing::info!(%principal, statement = %summary, "SQL statement done");
                    results.push(result);
                }
                Err(error) => {
                    tracing::info!(%principal, statement = %summary, %error, "SQL statement failed");
                    let error = if count > 1 {
                        SqlError::InStatement {
                            index: index + 1,
                            line: parsed.line,
                            source: Box::new(error),
                        }
                    } else {
                        error
                    };
                    let failure = ScriptFailure {
                        statement: Some(index + 1),
                        line: Some(parsed.line),
                        summary: Some(summary),
                        error,
                    };
                    return ScriptOutcome::failed(results, count, failure);
                }
            }
        }
        ScriptOutcome {
            results,
            statements: count,
            failure: None,
        }
    }
}
