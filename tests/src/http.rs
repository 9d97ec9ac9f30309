//! A small blocking HTTP/1.1 client for the Fluss listener's admin API (loopback only).
//!
//! Enough for `POST /v1/sql`, `GET /v1/tables/..` and scans: one request per connection
//! (`Connection: close`), Content-Length, chunked or read-to-close bodies, a deadline on every
//! read and a cap on the body size so a misbehaving server cannot hang or exhaust the suite.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use base64::Engine;

/// Largest response body the suite accepts (scans of the biggest test tables stay far below).
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;
/// Largest status or header line accepted.
const MAX_LINE_BYTES: usize = 16 * 1024;
/// Most header lines accepted.
const MAX_HEADERS: usize = 100;

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("HTTP {method} {path} on {addr}: {source}")]
    Io {
        method: String,
        path: String,
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("HTTP {method} {path}: malformed response: {reason}")]
    Malformed {
        method: String,
        path: String,
        reason: String,
    },
    #[error("HTTP {method} {path}: response did not finish within {timeout:?}")]
    Timeout {
        method: String,
        path: String,
        timeout: Duration,
    },
}

/// A complete response.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Basic credentials for a Fluss listener mapped to `sasl`.
#[derive(Debug, Clone)]
pub struct BasicAuth {
    pub username: String,
    pub password: String,
}

/// One request on a fresh connection, finished (or abandoned) within `timeout`.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &[u8],
    auth: Option<&BasicAuth>,
    timeout: Duration,
) -> Result<HttpResponse, HttpError> {
    let deadline = Instant::now() + timeout;
    let io = |source| HttpError::Io {
        method: method.to_owned(),
        path: path.to_owned(),
        addr,
        source,
    };
    let malformed = |reason: String| HttpError::Malformed {
        method: method.to_owned(),
        path: path.to_owned(),
        reason,
    };

    let stream = TcpStream::connect_timeout(&addr, timeout).map_err(io)?;
    stream.set_read_timeout(Some(timeout)).map_err(io)?;
    stream.set_write_timeout(Some(timeout)).map_err(io)?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(auth) = auth {
        let token =
            base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", auth.username, auth.password));
        head.push_str(&format!("Authorization: Basic {token}\r\n"));
    }
    head.push_str("\r\n");
    let mut writer = &stream;
    writer.write_all(head.as_bytes()).map_err(io)?;
    writer.write_all(body).map_err(io)?;

    let mut reader = BufReader::new(DeadlineReader {
        inner: &stream,
        deadline,
    });
    let status_line = read_line(&mut reader).map_err(io)?;
    let status =
        parse_status(&status_line).ok_or_else(|| malformed(format!("status line {status_line:?}")))?;

    let mut content_length = None;
    let mut chunked = false;
    for header_index in 0.. {
        if header_index >= MAX_HEADERS {
            return Err(malformed(format!("more than {MAX_HEADERS} headers")));
        }
        let line = read_line(&mut reader).map_err(io)?;
        if line.is_empty() {
            break;
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(malformed(format!("header line {line:?}")));
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            let length: usize = value
                .parse()
                .map_err(|_| malformed(format!("content-length {value:?}")))?;
            content_length = Some(length);
        } else if name.eq_ignore_ascii_case("transfer-encoding") && value.eq_ignore_ascii_case("chunked") {
            chunked = true;
        }
    }

    let body = if chunked {
        read_chunked(&mut reader).map_err(io)?
    } else if let Some(length) = content_length {
        if length > MAX_BODY_BYTES {
            return Err(malformed(format!(
                "content-length {length} over {MAX_BODY_BYTES}"
            )));
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).map_err(io)?;
        body
    } else {
        let mut body = Vec::new();
        reader
            .take(MAX_BODY_BYTES as u64 + 1)
            .read_to_end(&mut body)
            .map_err(io)?;
        body
    };
    if body.len() > MAX_BODY_BYTES {
        return Err(malformed(format!("body over {MAX_BODY_BYTES} bytes")));
    }
    if Instant::now() > deadline {
        return Err(HttpError::Timeout {
            method: method.to_owned(),
            path: path.to_owned(),
            timeout,
        });
    }
    Ok(HttpResponse { status, body })
}

/// Fails reads once the request's deadline has passed, whatever the socket timeout allows.
struct DeadlineReader<'a> {
    inner: &'a TcpStream,
    deadline: Instant,
}

impl Read for DeadlineReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "deadline passed",
            ));
        }
        self.inner.set_read_timeout(Some(left))?;
        self.inner.read(buf)
    }
}

fn parse_status(line: &str) -> Option<u16> {
    let mut parts = line.split(' ');
    let version = parts.next()?;
    if !version.starts_with("HTTP/1.") {
        return None;
    }
    parts.next()?.parse().ok()
}

fn read_line(reader: &mut impl BufRead) -> std::io::Result<String> {
    let mut line = Vec::new();
    reader.take(MAX_LINE_BYTES as u64).read_until(b'\n', &mut line)?;
    if line.last() != Some(&b'\n') {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "line too long or connection closed mid-line",
        ));
    }
    while matches!(line.last(), Some(b'\n' | b'\r')) {
        line.pop();
    }
    String::from_utf8(line).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

fn read_chunked(reader: &mut impl BufRead) -> std::io::Result<Vec<u8>> {
    let invalid = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
    let mut body = Vec::new();
    loop {
        let size_line = read_line(reader)?;
        let size_text = size_line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| invalid("chunk size"))?;
        if size == 0 {
            // Trailers, if any, end with an empty line.
            while !read_line(reader)?.is_empty() {}
            return Ok(body);
        }
        if body.len() + size > MAX_BODY_BYTES {
            return Err(invalid("chunked body too large"));
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        if !read_line(reader)?.is_empty() {
            return Err(invalid("chunk not followed by CRLF"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::thread;

    fn serve_once(response: &'static [u8]) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            stream.write_all(response).unwrap();
        });
        addr
    }

    #[test]
    fn reads_content_length_body() {
        let addr = serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
        let response = request(addr, "GET", "/x", b"", None, Duration::from_secs(5)).unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(response.body, b"hello");
    }

    #[test]
    fn reads_chunked_body() {
        let addr = serve_once(
            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        );
        let response = request(addr, "GET", "/x", b"", None, Duration::from_secs(5)).unwrap();
        assert_eq!(response.status, 404);
        assert_eq!(response.body, b"abcde");
    }

    #[test]
    fn reads_to_close_without_length() {
        let addr = serve_once(b"HTTP/1.0 200 OK\r\n\r\nall of it");
        let response = request(
            addr,
            "POST",
            "/v1/sql",
            b"SHOW DATABASES",
            None,
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(response.text(), "all of it");
    }

    #[test]
    fn rejects_garbage_status_line() {
        let addr = serve_once(b"SSH-2.0-nope\r\n\r\n");
        let error = request(addr, "GET", "/", b"", None, Duration::from_secs(5)).unwrap_err();
        assert!(matches!(error, HttpError::Malformed { .. }), "{error}");
    }

    #[test]
    fn a_silent_server_times_out() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let started = Instant::now();
        let error = request(addr, "GET", "/", b"", None, Duration::from_millis(300)).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5), "{error}");
        drop(listener);
    }
}
