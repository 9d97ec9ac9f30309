//! Shared harness of the `broker_*` integration tests: start the real `kafluss` binary on free
//! loopback ports, run SQL, scan rows back, drive kcat and confluent-kafka, and speak raw Kafka
//! for the error cases no client will send on purpose. Included by each test file with
//! `#[path = "broker_support.rs"] mod support;`.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kafluss_tests::server::{KaflussServer, ServerConfig, ServerError};

/// A running server, started by the end-to-end suite's launcher
/// (`kafluss_tests::server::KaflussServer`, with stderr in a file); killed on drop.
pub struct Server {
    server: KaflussServer,
    pub data_dir: PathBuf,
    pub fluss: SocketAddr,
    pub kafka: SocketAddr,
    /// Set by `kill` and `terminate`: the process is gone.
    stopped: bool,
}

pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_kafluss")
}

impl Server {
    /// Starts a server with a fresh data dir and `cores` cores.
    pub fn start(cores: usize, extra: &[&str]) -> Server {
        Server::launch(KaflussServer::start, cores, extra)
    }

    /// [`Server::start`] with the launch configuration adjusted by `adjust` (an environment
    /// variable, say).
    pub fn start_with(
        cores: usize,
        extra: &[&str],
        adjust: impl FnOnce(ServerConfig) -> ServerConfig,
    ) -> Server {
        Server::launch(|config| KaflussServer::start(adjust(config)), cores, extra)
    }

    /// Starts a server on an existing data dir (restart after a crash).
    pub fn start_in(data_dir: &Path, cores: usize, extra: &[&str]) -> Server {
        Server::launch(|config| KaflussServer::start_in(data_dir, config), cores, extra)
    }

    fn launch(
        start: impl FnOnce(ServerConfig) -> Result<KaflussServer, ServerError>,
        cores: usize,
        extra: &[&str],
    ) -> Server {
        let config = extra.iter().fold(
            ServerConfig::plaintext()
                // This test binary's own build of kafluss, whatever KAFLUSS_BIN says.
                .with_binary(Path::new(binary()))
                .with_stderr_log()
                .with("server.cores", &cores.to_string()),
            |config, entry| config.define(entry),
        );
        let server = start(config).unwrap_or_else(|error| panic!("{error}"));
        Server {
            data_dir: server.data_dir().to_path_buf(),
            fluss: server.fluss_addr(),
            kafka: server.kafka_addr(),
            server,
            stopped: false,
        }
    }

    pub fn bootstrap(&self) -> String {
        self.kafka.to_string()
    }

    /// The server's stderr so far (tracing logs).
    pub fn logs(&self) -> String {
        self.server.logs()
    }

    /// [`Server::logs`] without ANSI colour codes.
    pub fn plain_logs(&self) -> String {
        let raw = self.logs();
        let mut out = String::with_capacity(raw.len());
        let mut chars = raw.chars();
        while let Some(c) = chars.next() {
            if c == '\u{1b}' {
                for next in chars.by_ref() {
                    if next.is_ascii_alphabetic() {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    /// Waits up to `within` for `needle` in the server's log.
    pub fn log_shows(&self, needle: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            if self.logs().contains(needle) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The names of `database`'s table directories in the data dir that start with `prefix`
    /// (a table's is `<table>-<id>`).
    pub fn table_dirs(&self, database: &str, prefix: &str) -> Vec<String> {
        std::fs::read_dir(self.data_dir.join(database))
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().to_string())
                    .filter(|name| name.starts_with(prefix))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The segment files of bucket 0 of the one table of `database` whose directory starts
    /// with `prefix`, in offset order.
    pub fn segment_files(&self, database: &str, prefix: &str) -> Vec<PathBuf> {
        let dirs = self.table_dirs(database, prefix);
        let [table] = &dirs[..] else {
            panic!("one table directory {prefix}* in {database}: {dirs:?}");
        };
        let bucket = self.data_dir.join(database).join(table).join("bucket-0");
        let mut files: Vec<PathBuf> = std::fs::read_dir(bucket)
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "arrow"))
            .collect();
        files.sort();
        files
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.server.pid()
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        !self.stopped && self.server.is_running()
    }

    /// SIGKILL, as a crash.
    pub fn kill(&mut self) {
        if !std::mem::replace(&mut self.stopped, true) {
            self.server.kill();
        }
    }

    /// SIGTERM and wait (bounded) for the exit status.
    pub fn terminate(&mut self) -> Option<std::process::ExitStatus> {
        if std::mem::replace(&mut self.stopped, true) {
            return None;
        }
        self.server.terminate_within(Duration::from_secs(30))
    }

    /// SIGTERM, returning at once: the server is shutting down (see [`Server::wait_exit`]).
    pub fn begin_terminate(&self) {
        self.server.begin_terminate();
    }

    /// Waits (bounded) for the exit a [`Server::begin_terminate`] began, without a second signal
    /// (which would exit at once with status 1); `None` when it had to be killed.
    pub fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        self.stopped = true;
        self.server.wait_within(within)
    }

    /// Runs SQL through `POST /v1/sql`; returns (status, body).
    pub fn sql(&self, sql: &str) -> (u16, String) {
        http(self.fluss, "POST", "/v1/sql", sql.as_bytes())
    }

    /// Runs SQL and panics unless it succeeds.
    pub fn sql_ok(&self, sql: &str) -> String {
        let (status, body) = self.sql(sql);
        assert_eq!(status, 200, "SQL failed: {sql}\n{body}");
        body
    }

    /// Every row of a table via the scan endpoint, as parsed jsonl lines.
    pub fn scan(&self, table: &str) -> Vec<serde_json::Value> {
        let (status, body) = http(
            self.fluss,
            "GET",
            &format!("/v1/tables/{table}/scan?format=jsonl"),
            b"",
        );
        assert_eq!(status, 200, "scan {table} failed: {body}");
        body.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).expect("jsonl line"))
            .collect()
    }

    /// GET with the raw answer: (status, body with chunk framing removed, whether the chunked
    /// body ended with its terminating chunk).
    pub fn get_chunked(&self, path: &str) -> (u16, String, bool) {
        let mut stream = TcpStream::connect(self.fluss).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        let text = String::from_utf8_lossy(&answer).to_string();
        let (head, mut rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        if !head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
            return (status, rest.to_string(), true);
        }
        let mut body = String::new();
        let mut terminated = false;
        while let Some((size, after)) = rest.split_once("\r\n") {
            let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
                break;
            };
            if size == 0 {
                terminated = true;
                break;
            }
            if after.len() < size {
                body.push_str(after);
                break;
            }
            body.push_str(&after[..size]);
            rest = after[size..].trim_start_matches("\r\n");
        }
        (status, body, terminated)
    }

    /// `GET path` on the Fluss listener.
    pub fn get(&self, path: &str) -> (u16, String) {
        http(self.fluss, "GET", path, b"")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One HTTP request to the Fluss listener (the tests' one client, `kafluss_tests::http`),
/// bounded by a 60 s deadline; returns (status, body). Panics when no answer comes.
/// A connection to `server` from the loopback address `source` (any of 127.0.0.0/8: another
/// client address for the per-address bounds), connected within 10 s; no timeouts set.
pub fn connect_from(server: SocketAddr, source: impl Into<std::net::IpAddr>) -> TcpStream {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    socket
        .bind(&SocketAddr::new(source.into(), 0).into())
        .expect("bind the source address");
    socket
        .connect_timeout(&server.into(), Duration::from_secs(10))
        .expect("connect");
    socket.into()
}

pub fn http(address: SocketAddr, method: &str, path: &str, body: &[u8]) -> (u16, String) {
    http_as(address, method, path, body, None)
}

/// [`http`] with HTTP Basic credentials (user, password) for a `sasl` Fluss listener.
pub fn http_as(
    address: SocketAddr,
    method: &str,
    path: &str,
    body: &[u8],
    user: Option<(&str, &str)>,
) -> (u16, String) {
    let auth = user.map(|(user, password)| kafluss_tests::http::BasicAuth::new(user, password));
    let response = kafluss_tests::http::request(
        address,
        method,
        path,
        body,
        auth.as_ref(),
        Duration::from_secs(60),
    )
    .unwrap_or_else(|error| panic!("{error}"));
    (response.status, response.text())
}

/// The settings of a server whose listeners both want SASL/PLAIN, with ACLs on: users `admin`
/// (password `admin-secret`, a super user) and `writer` (`change-me`, no ACL yet).
pub const SASL_ACL_SERVER: &[&str] = &[
    "security.protocol.map=FLUSS:sasl,KAFKA:sasl",
    "security.sasl.enabled.mechanisms=PLAIN",
    "security.sasl.plain.credentials=admin:admin-secret,writer:change-me",
    "authorizer.enabled=true",
    "super.users=User:admin",
];

/// A Produce request of one batch to one partition.
pub fn produce_request(
    acks: i16,
    topic: &str,
    partition: i32,
    records: bytes::Bytes,
) -> kafluss_protocol::ProduceRequest {
    kafluss_protocol::ProduceRequest {
        transactional_id: None,
        acks,
        timeout_ms: 5000,
        topics: vec![kafluss_protocol::ProduceTopicData {
            name: topic.to_string(),
            topic_id: kafluss_protocol::Uuid::ZERO,
            partitions: vec![kafluss_protocol::ProducePartitionData {
                index: partition,
                records: Some(records),
            }],
        }],
        unknown_tagged_fields: Vec::new(),
    }
}

/// SaslHandshake v0 (PLAIN), then the raw PLAIN token: the connection, and whether the broker
/// answered the empty frame that means authenticated (a refused login closes the connection).
pub fn sasl_plain_login(kafka: SocketAddr, user: &str, password: &str) -> (TcpStream, bool) {
    let mut stream = TcpStream::connect(kafka).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut handshake = vec![0, 17, 0, 0, 0, 0, 0, 7, 0, 3, b'r', b'a', b'w', 0, 5];
    handshake.extend_from_slice(b"PLAIN");
    let mut framed = (handshake.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&handshake);
    stream.write_all(&framed).unwrap();
    let mut prefix = [0u8; 4];
    stream.read_exact(&mut prefix).unwrap();
    let mut body = vec![0u8; i32::from_be_bytes(prefix) as usize];
    stream.read_exact(&mut body).unwrap();
    assert_eq!(&body[..6], &[0, 0, 0, 7, 0, 0], "correlation 7, error NONE");
    let token = format!("\0{user}\0{password}");
    let mut framed = (token.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(token.as_bytes());
    stream.write_all(&framed).unwrap();
    let authenticated = stream.read_exact(&mut prefix).is_ok() && i32::from_be_bytes(prefix) == 0;
    (stream, authenticated)
}

/// A blocking Kafka connection speaking whatever we encode.
pub struct Raw {
    pub stream: TcpStream,
    pub correlation: i32,
}

impl Raw {
    pub fn connect(address: SocketAddr) -> Raw {
        let stream = TcpStream::connect_timeout(&address, Duration::from_secs(10)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        Raw {
            stream,
            correlation: 0,
        }
    }

    pub fn send<M: kafluss_protocol::Message>(&mut self, version: i16, body: &M) -> i32 {
        self.correlation += 1;
        let header =
            kafluss_protocol::RequestHeader::new(M::API_KEY, version, self.correlation, Some("raw-test"));
        let mut buf = bytes::BytesMut::new();
        kafluss_protocol::encode_request_frame(&mut buf, &header, body).expect("encode request");
        self.stream.write_all(&buf).expect("send");
        self.correlation
    }

    /// Reads one frame body; None when the server closed the connection.
    pub fn read_frame(&mut self) -> Option<bytes::Bytes> {
        let mut prefix = [0u8; 4];
        if self.stream.read_exact(&mut prefix).is_err() {
            return None;
        }
        let mut body = vec![0u8; i32::from_be_bytes(prefix) as usize];
        self.stream.read_exact(&mut body).ok()?;
        Some(bytes::Bytes::from(body))
    }

    pub fn recv<M: kafluss_protocol::Message>(&mut self, version: i16, correlation: i32) -> M {
        let frame = self.read_frame().expect("a response, not a closed connection");
        let (header, body) =
            kafluss_protocol::decode_response_frame::<M>(&frame, version).expect("decode response");
        assert_eq!(
            header.correlation_id, correlation,
            "responses come in request order"
        );
        body
    }

    pub fn produce(
        &mut self,
        version: i16,
        request: &kafluss_protocol::ProduceRequest,
    ) -> kafluss_protocol::ProduceResponse {
        let correlation = self.send(version, request);
        self.recv(version, correlation)
    }

    /// True when the server closes the connection within 10 s without sending anything.
    pub fn is_closed(&mut self) -> bool {
        self.stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut byte = [0u8; 1];
        match self.stream.read(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

/// Runs a command with a timeout; returns (exit ok, stdout, stderr).
pub fn run_with_timeout(command: &mut Command, stdin: &[u8], timeout: Duration) -> (bool, String, String) {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    let mut input = child.stdin.take().expect("stdin");
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out_thread = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err_thread = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = writer.join();
    let out = out_thread.join().unwrap_or_default();
    let err = err_thread.join().unwrap_or_default();
    (status.is_some_and(|s| s.success()), out, err)
}

/// The Python interpreter with confluent-kafka and pyarrow: `KAFLUSS_PYTHON`, else the repo's
/// `.venv`. Missing is a test failure, not a skip.
pub fn python() -> PathBuf {
    if let Ok(path) = std::env::var("KAFLUSS_PYTHON") {
        return PathBuf::from(path);
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python");
    assert!(
        venv.exists(),
        "no Python with confluent-kafka: set KAFLUSS_PYTHON or run ./test.sh (makes .venv)"
    );
    venv
}

/// Runs `kafluss serve` with `defines` on a fresh data dir and one core, for at most 20 s (a
/// configuration error ends it at once); returns (exit code, stdout, stderr).
pub fn serve_with(defines: &[&str]) -> (Option<i32>, String, String) {
    let temp = tempfile::tempdir().expect("temp dir");
    serve_in(&temp.path().join("data"), defines)
}

/// [`serve_with`] on `data_dir`, which may hold (or be in use by) another server's data.
pub fn serve_in(data_dir: &Path, defines: &[&str]) -> (Option<i32>, String, String) {
    let data_dir = format!("data.dir={}", data_dir.display());
    let mut command = Command::new(binary());
    command.args(["serve", "-D", &data_dir, "-D", "server.cores=1"]);
    for define in defines {
        command.args(["-D", define]);
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start kafluss");
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().expect("output");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Runs a Python script with arguments; panics with its output unless it exits 0.
pub fn python_ok(script: &str, args: &[&str]) -> String {
    let (ok, out, err) = run_with_timeout(
        Command::new(python()).arg("-c").arg(script).args(args),
        b"",
        Duration::from_secs(120),
    );
    assert!(ok, "python failed:\nstdout:\n{out}\nstderr:\n{err}");
    out
}

/// kcat's path; missing is a failure.
pub fn kcat() -> &'static str {
    assert!(
        Command::new("kcat").arg("-V").output().is_ok(),
        "kcat is not installed (apt-get install -y kcat, or ./test.sh)"
    );
    "kcat"
}

/// Produces `lines` (one message each) with kcat; returns (ok, stdout, stderr).
pub fn kcat_produce(
    server: &Server,
    topic: &str,
    partition: i32,
    lines: &[&str],
    extra: &[&str],
) -> (bool, String, String) {
    let mut input = lines.join("\n");
    input.push('\n');
    let mut command = Command::new(kcat());
    command
        .args([
            "-P",
            "-b",
            &server.bootstrap(),
            "-t",
            topic,
            "-p",
            &partition.to_string(),
        ])
        .args(["-X", "enable.idempotence=false", "-X", "acks=all"])
        .args(extra);
    run_with_timeout(&mut command, input.as_bytes(), Duration::from_secs(60))
}
