//! `kafluss scan TABLE [--server ..] [--bucket N] [--from OFFSET] [--limit N]
//! [--format jsonl|arrow] [--columns a,b] [--out FILE] [--user U --password P]`: reads rows back
//! over HTTP from a running server (`GET /v1/tables/{db}.{table}/scan`) and streams the body to
//! stdout or a file. Credentials as for `kafluss sql` ([`super::Credentials`]).
//!
//! A plain std `TcpStream` HTTP/1.1 client: one request, `Connection: close`, a bounded header,
//! a body in `Content-Length`, chunked, or read-to-close framing.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use super::{Credentials, CredentialsError};

/// The server when `--server` is not given (the Fluss listener of the default config).
pub const DEFAULT_SERVER: &str = "localhost:9123";
/// Database used for a table name without a `db.` prefix (the default `kafka.default.database`).
pub const DEFAULT_DATABASE: &str = "fluss";
/// Status line plus headers larger than this are refused.
const MAX_HEADER_BYTES: usize = 64 << 10;
/// Error bodies are read up to this size for the message.
const MAX_ERROR_BODY_BYTES: u64 = 64 << 10;
/// Longest silence between two reads of the response.
const READ_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct ScanArgs {
    /// The table: `db.table`, or `table` in the `fluss` database.
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
    Connect { server: String, source: io::Error },
    #[error("talking to {server}: {source}")]
    Io { server: String, source: io::Error },
    #[error("malformed HTTP response from {server}: {reason}")]
    Protocol { server: String, reason: String },
    #[error("{0}")]
    Server(String),
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    #[error("cannot write {path}: {source}")]
    Output { path: String, source: io::Error },
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

/// The request path and query for `args`, with the table and parameters percent-encoded.
pub fn request_target(args: &ScanArgs) -> String {
    let table = if args.table.contains('.') {
        args.table.clone()
    } else {
        format!("{DEFAULT_DATABASE}.{}", args.table)
    };
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
    format!("/v1/tables/{}/scan?{}", percent_encode(&table), query.join("&"))
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
    let io_err = |source| ScanCliError::Io {
        server: server.clone(),
        source,
    };
    let authorization = args.credentials.header()?;
    let stream = connect(&server)?;
    stream.set_read_timeout(Some(READ_TIMEOUT)).map_err(io_err)?;
    let mut request = format!(
        "GET {} HTTP/1.1\r\nHost: {server}\r\nAccept: */*\r\nConnection: close\r\n",
        request_target(args)
    );
    request.push_str(&authorization);
    request.push_str("\r\n");
    (&stream).write_all(request.as_bytes()).map_err(io_err)?;

    let mut reader = BufReader::new(stream);
    let head = read_head(&mut reader, &server)?;
    let body: Box<dyn Read> = if head.chunked {
        Box::new(ChunkedReader::new(reader))
    } else if let Some(length) = head.content_length {
        Box::new(reader.take(length))
    } else {
        Box::new(reader)
    };
    if head.status == 401 {
        return Err(ScanCliError::Server(args.credentials.refused_message()));
    }
    if head.status != 200 {
        return Err(ScanCliError::Server(error_message(head.status, body)));
    }
    copy_body(body, args.out.as_ref(), &server)
}

fn connect(server: &str) -> Result<TcpStream, ScanCliError> {
    super::connect(server).map_err(|source| ScanCliError::Connect {
        server: server.to_string(),
        source,
    })
}

fn copy_body(mut body: Box<dyn Read>, out: Option<&PathBuf>, server: &str) -> Result<(), ScanCliError> {
    let (mut sink, name): (Box<dyn Write>, String) = match out {
        Some(path) => {
            let file = File::create(path).map_err(|source| ScanCliError::Output {
                path: path.display().to_string(),
                source,
            })?;
            (Box::new(io::BufWriter::new(file)), path.display().to_string())
        }
        None => (
            Box::new(io::BufWriter::new(io::stdout().lock())),
            "stdout".to_string(),
        ),
    };
    let mut buffer = vec![0u8; 64 << 10];
    loop {
        let read = match body.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => read,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(ScanCliError::Io {
                    server: server.to_string(),
                    source,
                })
            }
        };
        sink.write_all(&buffer[..read])
            .map_err(|source| ScanCliError::Output {
                path: name.clone(),
                source,
            })?;
    }
    sink.flush()
        .map_err(|source| ScanCliError::Output { path: name, source })
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

#[derive(Debug, PartialEq, Eq)]
struct ResponseHead {
    status: u16,
    content_length: Option<u64>,
    chunked: bool,
}

fn read_head<R: BufRead>(reader: &mut R, server: &str) -> Result<ResponseHead, ScanCliError> {
    let protocol = |reason: String| ScanCliError::Protocol {
        server: server.to_string(),
        reason,
    };
    let mut total = 0usize;
    let mut line = String::new();
    let mut read_line = |reader: &mut R, line: &mut String| -> Result<(), ScanCliError> {
        line.clear();
        let read = reader
            .take((MAX_HEADER_BYTES - total.min(MAX_HEADER_BYTES)) as u64)
            .read_line(line)
            .map_err(|source| ScanCliError::Io {
                server: server.to_string(),
                source,
            })?;
        total += read;
        if read == 0 || !line.ends_with('\n') {
            return Err(ScanCliError::Protocol {
                server: server.to_string(),
                reason: "response header truncated or too large".to_string(),
            });
        }
        Ok(())
    };
    read_line(reader, &mut line)?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse::<u16>().ok())
        .filter(|_| line.starts_with("HTTP/1."))
        .ok_or_else(|| protocol(format!("bad status line {:?}", line.trim_end())))?;
    let mut head = ResponseHead {
        status,
        content_length: None,
        chunked: false,
    };
    loop {
        read_line(reader, &mut line)?;
        let header = line.trim_end();
        if header.is_empty() {
            return Ok(head);
        }
        let Some((name, value)) = header.split_once(':') else {
            return Err(protocol(format!("bad header line {header:?}")));
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            head.content_length = Some(
                value
                    .parse()
                    .map_err(|_| protocol(format!("bad Content-Length {value:?}")))?,
            );
        } else if name.eq_ignore_ascii_case("transfer-encoding")
            && value.to_ascii_lowercase().contains("chunked")
        {
            head.chunked = true;
        }
    }
}

/// Decodes `Transfer-Encoding: chunked` (chunk extensions and trailers ignored).
struct ChunkedReader<R> {
    inner: R,
    /// Bytes left in the current chunk; None before the first size line.
    left: u64,
    done: bool,
}

impl<R: BufRead> ChunkedReader<R> {
    fn new(inner: R) -> Self {
        ChunkedReader {
            inner,
            left: 0,
            done: false,
        }
    }

    fn read_size_line(&mut self) -> io::Result<u64> {
        let mut line = String::new();
        (&mut self.inner).take(1024).read_line(&mut line)?;
        let digits = line.trim().split(';').next().unwrap_or("").trim().to_string();
        u64::from_str_radix(&digits, 16).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad chunk size line {line:?}"),
            )
        })
    }

    fn skip_crlf(&mut self) -> io::Result<()> {
        let mut crlf = [0u8; 2];
        self.inner.read_exact(&mut crlf)?;
        if &crlf != b"\r\n" {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "chunk not followed by CRLF",
            ));
        }
        Ok(())
    }
}

impl<R: BufRead> Read for ChunkedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        if self.left == 0 {
            self.left = self.read_size_line()?;
            if self.left == 0 {
                self.done = true;
                return Ok(0);
            }
        }
        let want = buf.len().min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let read = self.inner.read(&mut buf[..want])?;
        if read == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "body ended inside a chunk",
            ));
        }
        self.left -= read as u64;
        if self.left == 0 {
            self.skip_crlf()?;
        }
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn request_target_adds_default_database_and_encodes() {
        assert_eq!(
            request_target(&args("orders")),
            "/v1/tables/fluss.orders/scan?format=jsonl"
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
    fn parses_head_and_chunked_body() {
        let response = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: x\r\n\r\n5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n";
        let mut reader = BufReader::new(&response[..]);
        let head = read_head(&mut reader, "s").unwrap();
        assert_eq!(
            head,
            ResponseHead {
                status: 200,
                content_length: None,
                chunked: true
            }
        );
        let mut body = String::new();
        ChunkedReader::new(reader).read_to_string(&mut body).unwrap();
        assert_eq!(body, "hello, world");
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

    #[test]
    fn truncated_head_is_an_error_not_a_hang() {
        let mut reader = BufReader::new(&b"HTTP/1.1 200 OK\r\nContent-Len"[..]);
        assert!(read_head(&mut reader, "s").is_err());
        let mut reader = BufReader::new(&b"SSH-2.0\r\n\r\n"[..]);
        assert!(read_head(&mut reader, "s").is_err());
    }
}
