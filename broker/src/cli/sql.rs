//! `kafluss sql [--server HOST:PORT] (-e SQL | -f FILE)`: sends the statements to
//! `POST /v1/sql` of a running server and prints the results as text (tables for SHOW,
//! DESCRIBE and the list/get procedures). Exit 0 on success, 1 with the server's message on
//! an error (or when the server cannot be reached), 2 for a usage problem (unreadable file).
//!
//! A plain std `TcpStream` HTTP/1.1 client: one request, `Connection: close`. When the server
//! wants Basic authentication, the credentials come from `KAFLUSS_USER` and
//! `KAFLUSS_PASSWORD` in the environment.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use base64::Engine;
use serde_json::Value;

use crate::catalog::StatementResult;

/// The server when `--server` is not given.
pub const DEFAULT_SERVER: &str = "localhost:9123";
/// Environment variables holding Basic-auth credentials for a `sasl` Fluss listener.
pub const USER_ENV: &str = "KAFLUSS_USER";
pub const PASSWORD_ENV: &str = "KAFLUSS_PASSWORD";
/// Largest script read from `-f FILE`.
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
}

/// Runs the command; returns the process exit code.
pub fn run(server: &str, sql: SqlSource) -> i32 {
    let text = match sql {
        SqlSource::Text(text) => text,
        SqlSource::File(path) => match read_script(&path) {
            Ok(text) => text,
            Err(error) => {
                eprintln!("kafluss sql: cannot read {}: {error}", path.display());
                return 2;
            }
        },
    };
    let credentials = match (std::env::var(USER_ENV), std::env::var(PASSWORD_ENV)) {
        (Ok(user), Ok(password)) => Some((user, password)),
        _ => None,
    };
    let auth = credentials.as_ref().map(|(u, p)| (u.as_str(), p.as_str()));
    match post_sql(server, &text, auth) {
        Ok(reply) => match render_reply(reply.status, &reply.body) {
            Ok(output) => {
                print!("{output}");
                0
            }
            Err(message) => {
                eprintln!("kafluss sql: {message}");
                1
            }
        },
        Err(error) => {
            eprintln!("kafluss sql: cannot reach {server}: {error}");
            1
        }
    }
}

/// Reads a script of at most `MAX_SCRIPT_BYTES` (the server refuses larger bodies anyway).
fn read_script(path: &std::path::Path) -> io::Result<String> {
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(MAX_SCRIPT_BYTES + 1)
        .read_to_string(&mut text)?;
    if text.len() as u64 > MAX_SCRIPT_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the script is larger than {MAX_SCRIPT_BYTES} bytes"),
        ));
    }
    Ok(text)
}

/// An HTTP reply: status and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpReply {
    pub status: u16,
    pub body: Vec<u8>,
}

/// `POST /v1/sql` with `sql` as the body.
pub fn post_sql(server: &str, sql: &str, auth: Option<(&str, &str)>) -> io::Result<HttpReply> {
    let mut stream = connect(server)?;
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    let mut head = format!(
        "POST /v1/sql HTTP/1.1\r\nHost: {server}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n",
        sql.len()
    );
    if let Some((user, password)) = auth {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        head.push_str(&format!("Authorization: Basic {token}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(sql.as_bytes())?;
    stream.flush()?;
    read_reply(BufReader::new(stream.take(MAX_RESPONSE_BYTES)))
}

/// Tries every address `server` resolves to (`localhost` may be `::1` or `127.0.0.1`).
fn connect(server: &str) -> io::Result<TcpStream> {
    let mut last_error = io::Error::new(io::ErrorKind::NotFound, "no address");
    for addr in server.to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(10)) {
            Ok(stream) => return Ok(stream),
            Err(error) => last_error = error,
        }
    }
    Err(last_error)
}

/// Reads an HTTP/1.1 response: Content-Length, chunked, or until close.
pub fn read_reply(mut reader: impl BufRead) -> io::Result<HttpReply> {
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| invalid("not an HTTP response"))?;
    let mut content_length = None;
    let mut chunked = false;
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Err(invalid("response headers cut short"));
        }
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                content_length = Some(value.parse::<u64>().map_err(|_| invalid("bad Content-Length"))?);
            } else if name.eq_ignore_ascii_case("transfer-encoding")
                && value.to_ascii_lowercase().contains("chunked")
            {
                chunked = true;
            }
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            line.clear();
            reader.read_line(&mut line)?;
            let size_text = line.trim().split(';').next().unwrap_or("");
            let size = u64::from_str_radix(size_text, 16).map_err(|_| invalid("bad chunk size"))?;
            if size == 0 {
                break;
            }
            (&mut reader).take(size).read_to_end(&mut body)?;
            line.clear();
            reader.read_line(&mut line)?;
        }
    } else if let Some(length) = content_length {
        (&mut reader).take(length).read_to_end(&mut body)?;
    } else {
        reader.read_to_end(&mut body)?;
    }
    Ok(HttpReply { status, body })
}

/// The text to print for a reply, or the error message for exit code 1.
pub fn render_reply(status: u16, body: &[u8]) -> Result<String, String> {
    let value: Value = serde_json::from_slice(body).map_err(|_| {
        format!(
            "HTTP {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(1024)]).trim()
        )
    })?;
    if let Some(error) = value.get("error") {
        let code = error.get("code").and_then(Value::as_str).unwrap_or("ERROR");
        let message = error.get("message").and_then(Value::as_str).unwrap_or("");
        return Err(format!("{code}: {message}"));
    }
    if !(200..300).contains(&status) {
        return Err(format!("HTTP {status}"));
    }
    let results = value
        .get("results")
        .and_then(Value::as_array)
        .ok_or_else(|| "malformed reply: no results".to_string())?;
    let mut output = String::new();
    for result in results {
        let result =
            StatementResult::from_json(result).ok_or_else(|| "malformed reply: bad result".to_string())?;
        output.push_str(&render_result(&result));
    }
    Ok(output)
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
            render_reply(404, body),
            Err("TABLE_NOT_FOUND: table 'a.b' does not exist".to_string())
        );
        assert_eq!(
            render_reply(502, b"bad gateway"),
            Err("HTTP 502: bad gateway".to_string())
        );
    }

    #[test]
    fn reads_chunked_and_sized_replies() {
        let sized = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello-extra";
        assert_eq!(
            read_reply(&sized[..]).unwrap(),
            HttpReply {
                status: 200,
                body: b"hello".to_vec()
            }
        );
        let chunked =
            b"HTTP/1.1 400 Bad\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        assert_eq!(
            read_reply(&chunked[..]).unwrap(),
            HttpReply {
                status: 400,
                body: b"abcde".to_vec()
            }
        );
        assert!(read_reply(&b"garbage\r\n"[..]).is_err());
    }
}
