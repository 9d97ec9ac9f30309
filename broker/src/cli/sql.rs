//! `kafluss sql [--server HOST:PORT] [--user U --password P] (-e SQL | -f FILE | stdin)`:
//! sends the statements to `POST /v1/sql` of a running server and prints each statement's
//! result as text (tables for SHOW, DESCRIBE and the list/get procedures). The server runs the
//! statements in order and stops at the first failure; the command then prints the results of
//! the statements before it, names the failed statement (number and first words) and says
//! which statements took effect and which were not run. Exit 0 on success, 1 with the server's
//! message on an error (or when the server cannot be reached, or stdout cannot be written), 2 for a usage problem
//! (unreadable file, incomplete credentials, a script that is only `USE`).
//!
//! One `ureq` request; the reply is read whole, up to `MAX_RESPONSE_BYTES`. Credentials for
//! a `sasl` Fluss listener: [`Credentials`].

use std::io::{self, IsTerminal, Read};
use std::path::PathBuf;
use std::time::Duration;

use kafluss_broker::catalog::{parse_script, Statement, StatementResult};
use serde_json::Value;

use super::Credentials;

/// The server when `--server` is not given.
pub const DEFAULT_SERVER: &str = "localhost:9123";
/// Largest script read from `-f FILE` or standard input.
const MAX_SCRIPT_BYTES: u64 = 64 * 1024 * 1024;
/// Largest response accepted.
const MAX_RESPONSE_BYTES: u64 = 64 * 1024 * 1024;
const TIMEOUT: Duration = Duration::from_secs(60);

/// Where the statements come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SqlSource {
    /// `-e "SQL"`.
    Text(String),
    /// `-f FILE`.
    File(PathBuf),
    /// Standard input, read to its end (neither `-e` nor `-f`).
    Stdin,
}

/// What `USE` alone answers: each run is one request, and `USE` lasts only for its request.
pub const USE_ALONE: &str = "USE only applies to the statements after it in the same script, and each \
kafluss sql run is a script of its own: put the statements in the same script, as in \
-e \"USE sales; SHOW TABLES\", or name the database (sales.orders)";

/// Runs the command; returns the process exit code.
pub fn run(server: &str, credentials: &Credentials, sql: SqlSource) -> i32 {
    let text = match read_source(&sql) {
        Ok(text) => text,
        Err(message) => {
            eprintln!("kafluss sql: {message}");
            return 2;
        }
    };
    if only_use(&text) {
        eprintln!("kafluss sql: {USE_ALONE}");
        return 2;
    }
    let authorization = match credentials.authorization() {
        Ok(header) => header,
        Err(error) => {
            eprintln!("kafluss sql: {error}");
            return 2;
        }
    };
    let reply = match post_sql(server, &text, authorization.as_deref()) {
        Ok(reply) => reply,
        Err(error) => {
            eprintln!("kafluss sql: cannot reach {server}: {error}");
            return 1;
        }
    };
    if reply.status == 401 {
        // What to do about it first, then the server's own words.
        eprintln!("kafluss sql: {}", credentials.refused_message());
        if let Some(message) = render_reply(reply.status, &reply.body).error {
            eprintln!("kafluss sql: the server said: {message}");
        }
        return 1;
    }
    let rendered = render_reply(reply.status, &reply.body);
    // A stdout that cannot take the results (a full disk, a closed pipe) is an error of its
    // own; the server's message, if any, still follows.
    let written = super::write_stdout(rendered.output.as_bytes());
    if let Err(error) = &written {
        eprintln!("kafluss sql: {error}");
    }
    match rendered.error {
        None if written.is_ok() => 0,
        None => 1,
        Some(message) => {
            for line in message.lines() {
                eprintln!("kafluss sql: {line}");
            }
            1
        }
    }
}

/// The script text, or why it cannot be read.
fn read_source(sql: &SqlSource) -> Result<String, String> {
    match sql {
        SqlSource::Text(text) => Ok(text.clone()),
        SqlSource::File(path) => std::fs::File::open(path)
            .and_then(read_script)
            .map_err(|error| format!("cannot read {}: {error}", path.display())),
        SqlSource::Stdin => {
            let stdin = io::stdin();
            if stdin.is_terminal() {
                eprintln!("kafluss sql: reading statements from standard input (end with Ctrl-D)");
            }
            read_script(stdin.lock()).map_err(|error| format!("cannot read standard input: {error}"))
        }
    }
}

/// Reads a script of at most `MAX_SCRIPT_BYTES` (the server refuses larger bodies anyway).
fn read_script(input: impl Read) -> io::Result<String> {
    let mut text = String::new();
    input.take(MAX_SCRIPT_BYTES + 1).read_to_string(&mut text)?;
    if text.len() as u64 > MAX_SCRIPT_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the script is larger than {MAX_SCRIPT_BYTES} bytes"),
        ));
    }
    Ok(text)
}

/// Whether the script is nothing but `USE` statements, which would have no effect. A script
/// that does not parse is left to the server, which says where.
pub fn only_use(script: &str) -> bool {
    parse_script(script).is_ok_and(|statements| {
        !statements.is_empty()
            && statements
                .iter()
                .all(|parsed| matches!(parsed.statement, Statement::Use { .. }))
    })
}

/// An HTTP reply: status and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpReply {
    pub status: u16,
    pub body: Vec<u8>,
}

/// `POST /v1/sql` with `sql` as the body; `authorization` is the `Authorization` header's
/// value, if any (see [`Credentials::authorization`]). The request says
/// `Expect: 100-continue`: the body is sent once the server asks for it, so a server that
/// refuses the request from its head (413 over `admin.max-request-size`, 401) is heard. Sent
/// at once, a body larger than the socket buffers failed its write ("Broken pipe") when that
/// server closed the connection, and its answer was lost. A server that says nothing for a
/// second gets the body anyway (`ureq`'s wait for 100 Continue).
pub fn post_sql(server: &str, sql: &str, authorization: Option<&str>) -> Result<HttpReply, ureq::Error> {
    let mut request = super::agent(TIMEOUT)
        .post(super::url(server, "/v1/sql"))
        .header("Content-Type", "text/plain; charset=utf-8")
        .header("Expect", "100-continue")
        .header("Connection", "close");
    if let Some(authorization) = authorization {
        request = request.header("Authorization", authorization);
    }
    let mut response = request.send(sql)?;
    let status = response.status().as_u16();
    let body = response
        .body_mut()
        .with_config()
        .limit(MAX_RESPONSE_BYTES)
        .read_to_vec()?;
    Ok(HttpReply { status, body })
}

/// What to print for a reply: the results of the statements that ran (stdout) and, when
/// the script failed, the message for exit code 1 (stderr).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub output: String,
    pub error: Option<String>,
}

impl Rendered {
    fn failed(output: String, message: String) -> Self {
        Rendered {
            output,
            error: Some(message),
        }
    }
}

/// Renders `POST /v1/sql`'s reply: `{"results":[...]}`, or `{"error":{...},"results":[...]}`
/// where the error may name the statement that failed.
pub fn render_reply(status: u16, body: &[u8]) -> Rendered {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        let text = String::from_utf8_lossy(&body[..body.len().min(1024)])
            .trim()
            .to_string();
        return Rendered::failed(String::new(), format!("HTTP {status}: {text}"));
    };
    let mut output = String::new();
    let results = value.get("results").and_then(Value::as_array);
    for result in results.into_iter().flatten() {
        match StatementResult::from_json(result) {
            Some(result) => output.push_str(&render_result(&result)),
            None => return Rendered::failed(output, "malformed reply: bad result".to_string()),
        }
    }
    if let Some(error) = value.get("error") {
        let ran = results.map_or(0, Vec::len);
        let total = value.get("statements").and_then(Value::as_u64).unwrap_or(0) as usize;
        return Rendered::failed(output, failure_message(error, ran, total));
    }
    if !(200..300).contains(&status) {
        return Rendered::failed(output, format!("HTTP {status}"));
    }
    if results.is_none() {
        return Rendered::failed(output, "malformed reply: no results".to_string());
    }
    Rendered { output, error: None }
}

/// `CODE: message`, then for a script of several statements which one failed, which took
/// effect and which were not run.
fn failure_message(error: &Value, ran: usize, total: usize) -> String {
    let code = error.get("code").and_then(Value::as_str).unwrap_or("ERROR");
    let message = error.get("message").and_then(Value::as_str).unwrap_or("");
    let mut text = format!("{code}: {message}");
    let Some(index) = error.get("statement").and_then(Value::as_u64).map(|i| i as usize) else {
        return text;
    };
    if total <= 1 && index <= 1 {
        return text;
    }
    let name = match error.get("summary").and_then(Value::as_str) {
        Some(summary) if !summary.is_empty() => format!("statement {index} ({summary})"),
        _ => format!("statement {index}"),
    };
    if total == 0 {
        // Refused before running (a syntax error): nothing took effect.
        text.push_str(&format!("\n{name} failed; nothing was run"));
        return text;
    }
    let before = match ran {
        0 => "no statement before it".to_string(),
        1 => "statement 1 before it took effect".to_string(),
        n => format!("statements 1-{n} before it took effect"),
    };
    let after = match total.saturating_sub(index) {
        0 => String::new(),
        1 => format!("; statement {} after it was not run", index + 1),
        _ => format!("; statements {}-{total} after it were not run", index + 1),
    };
    text.push_str(&format!("\n{name} failed; {before}{after}"));
    text
}

/// One result as text: a message line, or a boxed table (cells with line breaks, such as
/// `SHOW CREATE TABLE`, are printed as they are).
pub fn render_result(result: &StatementResult) -> String {
    match result {
        StatementResult::Done { message } => format!("{message}\n"),
        StatementResult::Rows { rows, .. } if rows.iter().flatten().any(|cell| cell.contains('\n')) => {
            rows.iter().map(|row| format!("{}\n", row.join("\t"))).collect()
        }
        StatementResult::Rows { columns, rows } => {
            let mut widths: Vec<usize> = columns.iter().map(|c| c.chars().count()).collect();
            for row in rows {
                for (i, cell) in row.iter().enumerate() {
                    if let Some(width) = widths.get_mut(i) {
                        *width = (*width).max(cell.chars().count());
                    }
                }
            }
            let border: String = widths
                .iter()
                .map(|w| format!("+{}", "-".repeat(w + 2)))
                .collect::<String>()
                + "+\n";
            let line = |cells: &[String]| -> String {
                widths
                    .iter()
                    .enumerate()
                    .map(|(i, w)| {
                        let cell = cells.get(i).map(String::as_str).unwrap_or("");
                        format!("| {cell}{} ", " ".repeat(w - cell.chars().count()))
                    })
                    .collect::<String>()
                    + "|\n"
            };
            let mut text = border.clone();
            text.push_str(&line(columns));
            text.push_str(&border);
            for row in rows {
                text.push_str(&line(row));
            }
            if !rows.is_empty() {
                text.push_str(&border);
            }
            let count = rows.len();
            text.push_str(&format!(
                "{count} row{} in set\n",
                if count == 1 { "" } else { "s" }
            ));
            text
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_tables_and_messages() {
        let rows = StatementResult::rows(
            &["database name"],
            vec![vec!["fluss".into()], vec!["sales".into()]],
        );
        assert_eq!(
            render_result(&rows),
            "+---------------+\n| database name |\n+---------------+\n| fluss         |\n| sales         |\n+---------------+\n2 rows in set\n"
        );
        assert_eq!(
            render_result(&StatementResult::done("Database a created")),
            "Database a created\n"
        );
        let create = StatementResult::rows(
            &["create statement"],
            vec![vec!["CREATE TABLE x (\n  a INT\n)".into()]],
        );
        assert_eq!(render_result(&create), "CREATE TABLE x (\n  a INT\n)\n");
    }

    #[test]
    fn error_replies_become_the_message() {
        let body = br#"{"error":{"code":"TABLE_NOT_FOUND","message":"table 'a.b' does not exist"}}"#;
        assert_eq!(
            render_reply(404, body).error.as_deref(),
            Some("TABLE_NOT_FOUND: table 'a.b' does not exist")
        );
        assert_eq!(
            render_reply(502, b"bad gateway").error.as_deref(),
            Some("HTTP 502: bad gateway")
        );
    }

    #[test]
    fn a_failed_script_prints_what_ran_and_names_the_failed_statement() {
        let body = br#"{"error":{"code":"TABLE_ALREADY_EXISTS","message":"statement 2 (line 2): table 'fluss.t' already exists","statement":2,"line":2,"summary":"CREATE TABLE t"},"results":[{"kind":"done","message":"Database d created"}],"statements":4}"#;
        let rendered = render_reply(409, body);
        assert_eq!(rendered.output, "Database d created\n");
        assert_eq!(
            rendered.error.as_deref(),
            Some(
                "TABLE_ALREADY_EXISTS: statement 2 (line 2): table 'fluss.t' already exists\n\
                 statement 2 (CREATE TABLE t) failed; statement 1 before it took effect; \
                 statements 3-4 after it were not run"
            )
        );
        let syntax = br#"{"error":{"code":"SYNTAX_ERROR","message":"syntax error at line 3, column 1: x","statement":3,"line":3,"summary":"CREAT TABLE"},"results":[],"statements":0}"#;
        assert_eq!(
            render_reply(400, syntax).error.as_deref(),
            Some("SYNTAX_ERROR: syntax error at line 3, column 1: x\nstatement 3 (CREAT TABLE) failed; nothing was run")
        );
    }

    #[test]
    fn use_alone_is_detected() {
        assert!(only_use("USE sales"));
        assert!(only_use("USE sales; use `other`;"));
        assert!(!only_use("USE sales; SHOW TABLES"));
        assert!(!only_use(""));
        assert!(!only_use("USE"), "a syntax error is the server's to report");
    }
}
