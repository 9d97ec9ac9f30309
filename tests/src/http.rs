//! The blocking HTTP client of the tests, for the Fluss listener's admin API (loopback only):
//! `ureq` with one request per connection (`Connection: close`), a deadline on the whole exchange and a cap on the
//! body size, so a misbehaving server cannot hang or exhaust the suite.

use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine;

/// Largest response body the suite accepts (scans of the biggest test tables stay far below).
const MAX_BODY_BYTES: u64 = 64 * 1024 * 1024;
/// Largest response head (status line and headers) accepted.
const MAX_HEAD_BYTES: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("HTTP {method} {path} on {addr}: {source}")]
    Io {
        method: String,
        path: String,
        addr: SocketAddr,
        source: ureq::Error,
    },
    #[error("HTTP {method} {path}: malformed response: {source}")]
    Malformed {
        method: String,
        path: String,
        source: ureq::Error,
    },
    #[error("HTTP {method} {path}: response did not finish within {timeout:?}")]
    Timeout {
        method: String,
        path: String,
        timeout: Duration,
        source: ureq::Error,
    },
}

/// A complete response.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    /// Header names in lower case, values as sent (non-UTF-8 bytes replaced), in order.
    pub headers: Vec<(String, String)>,
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

impl BasicAuth {
    pub fn new(username: &str, password: &str) -> Self {
        BasicAuth {
            username: username.to_owned(),
            password: password.to_owned(),
        }
    }

    /// The `Authorization` header's value.
    pub fn header_value(&self) -> String {
        let token =
            base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", self.username, self.password));
        format!("Basic {token}")
    }
}

/// One request on a fresh connection, finished (or abandoned) within `timeout`. Any status is
/// an answer; only a failure to get one is an error.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &[u8],
    auth: Option<&BasicAuth>,
    timeout: Duration,
) -> Result<HttpResponse, HttpError> {
    let error = |source: ureq::Error| match source {
        ureq::Error::Timeout(_) => HttpError::Timeout {
            method: method.to_owned(),
            path: path.to_owned(),
            timeout,
            source,
        },
        ureq::Error::Protocol(_) | ureq::Error::BodyExceedsLimit(_) => HttpError::Malformed {
            method: method.to_owned(),
            path: path.to_owned(),
            source,
        },
        source => HttpError::Io {
            method: method.to_owned(),
            path: path.to_owned(),
            addr,
            source,
        },
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .max_redirects_will_error(false)
        .max_idle_connections(0)
        .max_response_header_size(MAX_HEAD_BYTES)
        .allow_non_standard_methods(true)
        .timeout_global(Some(timeout))
        .build()
        .into();
    // `Connection: close`: the server ends the connection once it has answered, so it no longer
    // counts against `admin.max-connections` when the next request comes.
    let mut request = ureq::http::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .header("Connection", "close");
    if let Some(auth) = auth {
        request = request.header("Authorization", auth.header_value());
    }
    let request = request.body(body).map_err(|e| error(ureq::Error::Http(e)))?;
    let mut response = agent.run(request).map_err(error)?;
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(name, value)| {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            (name.as_str().to_owned(), value)
        })
        .collect();
    let body = response
        .body_mut()
        .with_config()
        .limit(MAX_BODY_BYTES)
        .read_to_vec()
        .map_err(error)?;
    Ok(HttpResponse {
        status,
        headers,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;
    use std::thread;
    use std::time::Instant;

    /// Answers one request with `response`, after reading the whole request (head and
    /// `Content-Length` body): a server that closes with request bytes unread makes the kernel
    /// reset the connection, and the client may see the reset before the answer.
    fn serve_once(response: &'static [u8]) -> SocketAddr {
        serve_once_noting(response).0
    }

    /// [`serve_once`], also handing back the request's head (lower case).
    fn serve_once_noting(response: &'static [u8]) -> (SocketAddr, thread::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let handle = thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut reader = BufReader::new(&stream);
            let mut head = String::new();
            let mut length = 0usize;
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap() > 0 && line != "\r\n" {
                if let Some((name, value)) = line.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().unwrap();
                    }
                }
                head.push_str(&line.to_ascii_lowercase());
                line.clear();
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            (&stream).write_all(response).unwrap();
            head
        });
        (addr, handle)
    }

    #[test]
    fn asks_for_close_and_sends_basic_auth() {
        let (addr, head) = serve_once_noting(b"HTTP/1.1 204 No Content\r\n\r\n");
        let auth = BasicAuth::new("admin", "pw");
        let response = request(addr, "GET", "/x", b"", Some(&auth), Duration::from_secs(5)).unwrap();
        assert_eq!(response.status, 204);
        let head = head.join().unwrap();
        assert!(head.starts_with("get /x http/1.1\r\n"), "{head}");
        for line in ["connection: close", "authorization: basic ywrtaw46chc="] {
            assert!(head.contains(&format!("\r\n{line}\r\n")), "{line}: {head}");
        }
    }

    #[test]
    fn reads_content_length_body() {
        let addr = serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nRetry-After: 1\r\n\r\nhello");
        let response = request(addr, "GET", "/x", b"", None, Duration::from_secs(5)).unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(response.body, b"hello");
        assert!(
            response
                .headers
                .contains(&("retry-after".to_owned(), "1".to_owned())),
            "{:?}",
            response.headers
        );
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
        assert!(matches!(error, HttpError::Timeout { .. }), "{error}");
        assert!(started.elapsed() < Duration::from_secs(5), "{error}");
        drop(listener);
    }
}
