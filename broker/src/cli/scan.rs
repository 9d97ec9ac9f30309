//! `kafluss scan TABLE [--server ..] [--bucket N] [--from OFFSET] [--limit N]
//! [--format jsonl|arrow] [--columns a,b] [--out FILE] [--user U --password P]`: reads rows back
//! over HTTP from a running server (`GET /v1/tables/{db}.{table}/scan`) and streams the body to
//! stdout or a file. Credentials as for `kafluss sql` ([`super::Credentials`]).
//!
//! One `ureq` request with a bounded header; the body (`Content-Length`, chunked or read to
//! close) is streamed as it arrives, never held whole.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::time::Duration;

use super::{Credentials, CredentialsError, OutputError};

/// The server when `--server` is not given (the Fluss listener of the default config).
pub const DEFAULT_SERVER: &str = "localhost:9123";
/// Error bodies are read up to this size for the message.
const MAX_ERROR_BODY_BYTES: u64 = 64 << 10;
/// Longest silence between two reads of the response.
const READ_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct ScanArgs {
    /// The table: `db.table`, or `table` in the server's `kafka.default.database`.
    pub table: String,
    /// The server's Fluss listener, HOST:PORT.
    #[arg(long, default_value = DEFAULT_SERVER)]
    pub server: String,
    /// Only this bucket (default: every bucket, in order).
    #[arg(long)]
    pub bucket: Option<u32>,
    /// First offset to read in each bucket.
    #[arg(long)]
    pub from: Option<u64>,
    /// At most this many rows in total.
    #[arg(long)]
    pub limit: Option<u64>,
    /// `jsonl` (one `{"bucket","offset","row"}` object per line) or `arrow` (an IPC stream).
    #[arg(long, default_value = "jsonl", value_parser = ["jsonl", "arrow"])]
    pub format: String,
    /// Comma-separated columns to read (default: all).
    #[arg(long)]
    pub columns: Option<String>,
    /// Write to this file instead of stdout.
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub credentials: Credentials,
}

#[derive(Debug, thiserror::Error)]
enum ScanCliError {
    #[error("cannot reach {server}: {source}")]
    Connect { server: String, source: ureq::Error },
    #[error("malformed HTTP response from {server}: {source}")]
    Protocol { server: String, source: ureq::Error },
    #[error("talking to {server}: {source}")]
    Io { server: String, source: io::Error },
    /// The answer ended before its end (a scan that met damage, or the server going away):
    /// with the scan's own error line when the rows sent before it end with one.
    #[error("the answer from {server} ended before it was complete: {}", reason.as_deref().unwrap_or("the server's log says why"))]
    CutShort {
        server: String,
        reason: Option<String>,
        #[source]
        source: io::Error,
    },
    #[error("{0}")]
    Server(String),
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    #[error(transparent)]
    Output(#[from] OutputError),
}

/// Runs the command; returns the process exit code (0 ok, 1 on any error, printed to stderr).
pub fn run(args: ScanArgs) -> i32 {
    match scan(&args) {
        Ok(()) => 0,
        Err(err) => {
            eprintln!("kafluss scan: {err}");
            1
        }
    }
}

/// The request path and query for `args`, with the table and parameters percent-encoded. A
/// table name without `db.` is sent as it is: the server resolves it with its
/// `kafka.default.database`, as SQL and the admin API do.
pub fn request_target(args: &ScanArgs) -> String {
    let mut query = vec![format!("format={}", args.format)];
    if let Some(bucket) = args.bucket {
        query.push(format!("bucket={bucket}"));
    }
    if let Some(from) = args.from {
        query.push(format!("from={from}"));
    }
    if let Some(limit) = args.limit {
        query.push(format!("limit={limit}"));
    }
    if let Some(columns) = &args.columns {
        query.push(format!("columns={}", percent_encode(columns)));
    }
    format!(
        "/v1/tables/{}/scan?{}",
        percent_encode(&args.table),
        query.join("&")
    )
}

fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~,".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn scan(args: &ScanArgs) -> Result<(), ScanCliError> {
    let server = args.server.clone();
    let authorization = args.credentials.authorization()?;
    let mut request = super::agent(READ_TIMEOUT)
        .get(super::url(&server, &request_target(args)))
        .header("Accept", "*/*")
        .header("Connection", "close");
    if let Some(authorization) = authorization {
        request = request.header("Authorization", authorization);
    }
    let response = request.call().map_err(|source| match source {
        ureq::Error::Protocol(_) => ScanCliError::Protocol {
            server: server.clone(),
            source,
        },
        _ => ScanCliError::Connect {
            server: server.clone(),
            source,
        },
    })?;
    let status = response.status().as_u16();
    // Unlimited: rows are copied through as they arrive, never held whole.
    let body: Box<dyn Read> = Box::new(response.into_body().into_reader());
    if status == 401 {
        return Err(ScanCliError::Server(args.credentials.refused_message()));
    }
    if status != 200 {
        return Err(ScanCliError::Server(error_message(status, body)));
    }
    copy_body(body, args.out.as_ref(), &server)
}

fn copy_body(mut body: Box<dyn Read>, out: Option<&PathBuf>, server: &str) -> Result<(), ScanCliError> {
    let (mut sink, name): (Box<dyn Write>, String) = match out {
        Some(path) => {
            let name = path.display().to_string();
            let file = File::create(path).map_err(|source| OutputError {
                path: name.clone(),
                source,
            })?;
            (Box::new(io::BufWriter::new(file)), name)
        }
        None => (
            Box::new(io::BufWriter::new(io::stdout().lock())),
            "stdout".to_string(),
        ),
    };
    let failed = |source| OutputError {
        path: name.clone(),
        source,
    };
    let mut buffer = vec![0u8; 64 << 10];
    // The last bytes written: a scan that meets damage ends its rows with an error line, then
    // stops without ending the answer.
    let mut tail: Vec<u8> = Vec::new();
    let mut written = 0u64;
    loop {
        let read = match body.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => read,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(source) if written > 0 => {
                return Err(ScanCliError::CutShort {
                    server: server.to_string(),
                    reason: last_error_line(&tail),
                    source,
                })
            }
            Err(source) => {
                return Err(ScanCliError::Io {
                    server: server.to_string(),
                    source,
                })
            }
        };
        written += read as u64;
        tail.extend_from_slice(&buffer[..read]);
        if tail.len() > TAIL_BYTES {
            tail.drain(..tail.len() - TAIL_BYTES);
        }
        sink.write_all(&buffer[..read]).map_err(&failed)?;
    }
    Ok(sink.flush().map_err(failed)?)
}

/// How many of the last bytes of a scan's answer are kept to find its error line.
const TAIL_BYTES: usize = 8 << 10;

/// `CODE: message` of the `{"error":{"code":..,"message":..}}` line that ends `tail`, if it
/// does.
fn last_error_line(tail: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(tail);
    let line = text.trim_end().rsplit('\n').next()?;
    let value: serde_json::Value = serde_json::from_str(line).ok()?;
    let error = value.get("error")?;
    let field = |name: &str| error.get(name).and_then(|v| v.as_str()).unwrap_or("");
    Some(format!("{}: {}", field("code"), field("message")))
}

/// The server's `{"error":{"message":..}}`, or the raw body, with the status.
fn error_message(status: u16, body: Box<dyn Read>) -> String {
    let mut text = String::new();
    let _ = body.take(MAX_ERROR_BODY_BYTES).read_to_string(&mut text);
    let message = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(|m| m.as_str())
                .map(str::to_string)
        })
        .unwrap_or_else(|| text.trim().to_string());
    format!("server answered {status}: {message}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scan_cut_short_says_the_error_line_it_ended_with() {
        let rows = br#"{"bucket":0,"offset":0,"row":{"id":1}}
{"error":{"code":"CORRUPT_SEGMENT","message":"corrupt log segment x: bad; the rows from offset 1 on are not readable"}}
"#;
        assert_eq!(
            last_error_line(rows).as_deref(),
            Some("CORRUPT_SEGMENT: corrupt log segment x: bad; the rows from offset 1 on are not readable")
        );
        assert_eq!(
            last_error_line(br#"{"bucket":0,"offset":0,"row":{"id":1}}"#),
            None
        );
        assert_eq!(last_error_line(b"ARROW1\0\0"), None);
    }

    fn args(table: &str) -> ScanArgs {
        ScanArgs {
            table: table.to_string(),
            server: DEFAULT_SERVER.to_string(),
            bucket: None,
            from: None,
            limit: None,
            format: "jsonl".to_string(),
            columns: None,
            out: None,
            credentials: Credentials::default(),
        }
    }

    #[test]
    fn request_target_leaves_a_bare_name_to_the_server_and_encodes() {
        assert_eq!(
            request_target(&args("orders")),
            "/v1/tables/orders/scan?format=jsonl"
        );
        let mut full = args("sales.orders");
        full.bucket = Some(2);
        full.from = Some(10);
        full.limit = Some(5);
        full.format = "arrow".to_string();
        full.columns = Some("order_id,a b".to_string());
        assert_eq!(
            request_target(&full),
            "/v1/tables/sales.orders/scan?format=arrow&bucket=2&from=10&limit=5&columns=order_id,a%20b"
        );
    }

    #[test]
    fn error_bodies_yield_the_server_message() {
        let body: Box<dyn Read> =
            Box::new(&br#"{"error":{"code":"NOT_FOUND","message":"table fluss.x does not exist"}}"#[..]);
        assert_eq!(
            error_message(404, body),
            "server answered 404: table fluss.x does not exist"
        );
    }
}
