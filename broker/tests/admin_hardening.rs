//! The admin (Fluss) HTTP listener under attack, against the real binary: each attack is held
//! open while another client gets `/healthz` and a SQL answer, and the attacker's own answer
//! is checked (413 / 431 / 408 / close / 503). Then a property test of the request-path
//! limits, and the 401 that says why.

#[path = "broker_support.rs"]
mod support;

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use kafluss_broker::admin::{start_admin_server, AdminContext};
use kafluss_broker::catalog::{Catalog, CatalogConfig};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use support::{kcat_produce, Server};

/// Client read timeout: far above every server timeout used here, so a read that ends
/// early was ended by the server.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

fn connect(server: &Server) -> TcpStream {
    connect_to(server.fluss)
}

fn connect_to(address: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect_timeout(&address, Duration::from_secs(10)).expect("connect");
    stream.set_read_timeout(Some(CLIENT_TIMEOUT)).expect("timeout");
    stream
}

/// A parsed answer read until the server closed the connection.
#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    body: String,
}

fn parse(bytes: &[u8]) -> Answer {
    let text = String::from_utf8_lossy(bytes).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Answer {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

/// Reads until the server closes (it closes after every refusal).
fn read_to_close(stream: &mut TcpStream) -> Answer {
    let mut bytes = Vec::new();
    if let Err(error) = stream.read_to_end(&mut bytes) {
        assert!(
            !matches!(error.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut),
            "the server neither answered nor closed within {CLIENT_TIMEOUT:?}; got {:?}",
            String::from_utf8_lossy(&bytes)
        );
    }
    parse(&bytes)
}

fn error_code(answer: &Answer) -> String {
    let json: serde_json::Value =
        serde_json::from_str(&answer.body).unwrap_or_else(|_| panic!("not a JSON error: {answer:?}"));
    json["error"]["code"].as_str().unwrap_or_default().to_string()
}

fn alive(server: &mut Server) -> bool {
    server.is_running()
}

/// Another client gets `/healthz` and a SQL answer, promptly.
fn assert_serving(server: &mut Server, during: &str) {
    assert!(
        alive(server),
        "{during}: the server exited\n{}",
        server.plain_logs()
    );
    let started = Instant::now();
    let (status, body) = server.get("/healthz");
    assert_eq!(status, 200, "{during}: /healthz answered {body}");
    let (status, body) = server.sql("SHOW DATABASES");
    assert_eq!(status, 200, "{during}: SQL answered {body}");
    assert!(body.contains("fluss"), "{during}: {body}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{during}: answered only after {:?}",
        started.elapsed()
    );
}

/// `Name:   value` of /proc/<pid>/status.
fn proc_status(server: &Server, name: &str) -> u64 {
    let pid = server.pid();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /proc/{pid}/status"))
}

/// Waits (bounded) until `needle` occurs `count` times in the log.
fn wait_for_log(server: &Server, needle: &str, count: usize, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if server.plain_logs().matches(needle).count() >= count {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn huge_declared_and_endless_chunked_bodies_are_refused_before_any_allocation() {
    let mut server = Server::start(1, &["admin.max-request-size=64kb"]);
    assert_serving(&mut server, "before");
    let rss_before = proc_status(&server, "VmRSS:");

    // The request that aborted the whole broker, and the one that killed its workers (one
    // each used to be enough): sent several times, answers not read yet.
    let mut held = Vec::new();
    for length in [i64::MAX as u64, u64::MAX].into_iter().cycle().take(10) {
        let mut stream = connect(&server);
        write!(
            stream,
            "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n"
        )
        .unwrap();
        held.push((length, stream));
    }
    // A SQL request announcing 100 MiB, body never sent.
    let mut sql = connect(&server);
    write!(
        sql,
        "POST /v1/sql HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        100u64 << 20
    )
    .unwrap();
    // A chunked body that never ends: counted as it arrives.
    let mut chunked = connect(&server);
    write!(
        chunked,
        "POST /v1/sql HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    .unwrap();
    let mut chunked_writer = chunked.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let chunk = format!("4000\r\n{}\r\n", " ".repeat(0x4000));
        // At most 16 MiB, until the server stops reading.
        for sent in 0..1024 {
            if chunked_writer.write_all(chunk.as_bytes()).is_err() {
                return sent;
            }
        }
        1024
    });

    assert_serving(&mut server, "while huge bodies are announced");

    for (length, mut stream) in held {
        let answer = read_to_close(&mut stream);
        if length == u64::MAX {
            // Beyond what HTTP/1.1 can frame: the parser refuses the header itself.
            assert_eq!(answer.status, 431, "{answer:?}");
        } else {
            assert_eq!(answer.status, 413, "{answer:?}");
            assert_eq!(error_code(&answer), "REQUEST_TOO_LARGE");
            assert!(answer.head.contains("Connection: close"), "{answer:?}");
        }
    }
    let answer = read_to_close(&mut sql);
    assert_eq!(answer.status, 413, "{answer:?}");
    assert!(answer.body.contains("admin.max-request-size"), "{answer:?}");
    let answer = read_to_close(&mut chunked);
    assert_eq!(answer.status, 413, "{answer:?}");
    let sent = writer.join().unwrap();
    assert!(
        sent < 1024,
        "the server stopped reading the chunked body ({sent} chunks taken)"
    );

    assert_serving(&mut server, "after");
    let rss_after = proc_status(&server, "VmRSS:");
    assert!(
        rss_after < rss_before + 64 * 1024,
        "memory grew from {rss_before} kB to {rss_after} kB"
    );
    assert!(
        !server.plain_logs().contains("panicked"),
        "{}",
        server.plain_logs()
    );
}

#[test]
fn bodies_and_heads_that_never_arrive_time_out() {
    let timeout = Duration::from_secs(4);
    // Every attacker connects from the address the checks come from: this test is about the
    // timeouts, not admin.max-connections-per-address.
    let mut server = Server::start(
        1,
        &[
            "admin.body-timeout=4s",
            "admin.header-timeout=4s",
            "admin.max-connections-per-address=64",
        ],
    );
    let started = Instant::now();
    // More stalled bodies than the old server had workers, and than SQL slots.
    let mut bodies: Vec<TcpStream> = (0..10)
        .map(|_| {
            let mut stream = connect(&server);
            write!(
                stream,
                "POST /v1/sql HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nSHOW DATAB"
            )
            .unwrap();
            stream
        })
        .collect();
    // Heads that never finish; two trickle a header line every 300 ms, so only a total
    // deadline ends them.
    let mut heads: Vec<TcpStream> = (0..6)
        .map(|_| {
            let mut stream = connect(&server);
            write!(stream, "GET /healthz HTTP/1.1\r\nHost: x\r\n").unwrap();
            stream
        })
        .collect();
    let tricklers: Vec<_> = heads
        .iter()
        .take(2)
        .map(|stream| {
            let mut stream = stream.try_clone().unwrap();
            std::thread::spawn(move || {
                for i in 0..40 {
                    if write!(stream, "X-Slow-{i}: 1\r\n").is_err() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(300));
                }
            })
        })
        .collect();

    assert_serving(&mut server, "while bodies and heads stall");
    assert!(
        started.elapsed() < timeout,
        "the check must run while the attack is held ({:?})",
        started.elapsed()
    );

    for stream in &mut bodies {
        let answer = read_to_close(stream);
        assert_eq!(answer.status, 408, "{answer:?}");
        assert_eq!(error_code(&answer), "REQUEST_TIMEOUT");
        assert!(answer.body.contains("admin.body-timeout"), "{answer:?}");
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed >= timeout - Duration::from_millis(500) && elapsed < Duration::from_secs(20),
        "bodies timed out after {elapsed:?}"
    );
    for stream in &mut heads {
        // Closed without an answer (hyper does not answer a head it never got).
        let answer = read_to_close(stream);
        assert_eq!(answer.status, 0, "{answer:?}");
    }
    assert!(started.elapsed() < Duration::from_secs(20));
    for trickler in tricklers {
        trickler.join().unwrap();
    }
    assert_serving(&mut server, "after");
}

#[test]
fn connections_over_the_cap_get_503_and_none_gets_a_thread() {
    let mut server = Server::start(
        1,
        &[
            "admin.max-connections=16",
            "admin.max-connections-per-address=16",
            "admin.header-timeout=3s",
        ],
    );
    assert_serving(&mut server, "before");
    let threads_before = proc_status(&server, "Threads:");

    // Fifteen idle connections: one slot is left for the checks.
    let mut idle: Vec<TcpStream> = (0..15).map(|_| connect(&server)).collect();
    // Each has been accepted once a request on a later connection is answered.
    assert_serving(&mut server, "with 15 of 16 connections idle");
    let threads_during = proc_status(&server, "Threads:");
    assert!(
        threads_during <= threads_before + 2,
        "threads grew with connections: {threads_before} -> {threads_during}"
    );

    idle.push(connect(&server));
    std::thread::sleep(Duration::from_millis(200));
    let refusals_started = Instant::now();
    for attempt in 0..100 {
        let mut extra = connect(&server);
        let _ = write!(extra, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
        let answer = read_to_close(&mut extra);
        assert_eq!(answer.status, 503, "attempt {attempt}: {answer:?}");
        assert_eq!(error_code(&answer), "TOO_MANY_CONNECTIONS");
        assert!(answer.head.contains("Retry-After"), "{answer:?}");
    }
    assert!(
        refusals_started.elapsed() < Duration::from_secs(10),
        "refusals are prompt: {:?}",
        refusals_started.elapsed()
    );
    assert!(alive(&mut server));
    assert!(proc_status(&server, "Threads:") <= threads_before + 2);
    assert!(
        server.plain_logs().contains("admin HTTP connection refused"),
        "{}",
        server.plain_logs()
    );

    // Idle connections are closed after admin.header-timeout, freeing their slots.
    for stream in &mut idle {
        let answer = read_to_close(stream);
        assert_eq!(answer.status, 0, "{answer:?}");
    }
    assert_serving(&mut server, "after the idle connections timed out");
}

/// A connection to `server` from the loopback address `source`.
fn connect_from(server: SocketAddr, source: [u8; 4]) -> TcpStream {
    let stream = support::connect_from(server, source);
    stream.set_read_timeout(Some(CLIENT_TIMEOUT)).unwrap();
    stream
}

/// `GET path` on `stream`, read until the server closes.
fn get_on(mut stream: TcpStream, path: &str) -> Answer {
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    read_to_close(&mut stream)
}

/// One address holding as many idle connections as it can leaves the listener to the others:
/// with admin.max-connections=8 and admin.max-connections-per-address=2, 127.0.0.1 holds two,
/// its next ones are answered 503, and /healthz from 127.0.0.2 is answered 200 (it was 503
/// when one address could take all eight).
#[test]
fn one_address_cannot_take_every_connection() {
    let server = Server::start(
        1,
        &[
            "admin.max-connections=8",
            "admin.max-connections-per-address=2",
            "admin.header-timeout=30s",
        ],
    );
    let attacker = [127, 0, 0, 1];
    let held: Vec<TcpStream> = (0..8).map(|_| connect_from(server.fluss, attacker)).collect();
    // Accepted in order: once this one is answered, the eight were accepted or refused.
    let answer = get_on(connect_from(server.fluss, [127, 0, 0, 2]), "/healthz");
    assert_eq!(
        answer.status, 200,
        "another address is served while one holds all it may: {answer:?}"
    );
    let answer = get_on(connect_from(server.fluss, attacker), "/healthz");
    assert_eq!(answer.status, 503, "{answer:?}");
    assert_eq!(error_code(&answer), "TOO_MANY_CONNECTIONS");
    assert!(answer.head.contains("Retry-After: 1"), "{answer:?}");
    assert!(
        answer.body.contains("admin.max-connections-per-address"),
        "{answer:?}"
    );
    assert!(
        server.plain_logs().contains(
            "admin HTTP connection refused: admin.max-connections-per-address connections from its address are open"
        ),
        "{}",
        server.plain_logs()
    );
    // Closed connections give their address's slots back.
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = get_on(connect_from(server.fluss, attacker), "/healthz");
        if answer.status == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the slots were not given back: {answer:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Rows of about 1 KiB, so a scan is larger than socket buffers and must wait for its reader.
const ROWS: usize = 12_000;

fn fill_wide_table(server: &Server) {
    server.sql_ok("CREATE TABLE fluss.wide (id BIGINT, pad STRING) WITH ('table.kafka.enabled' = 'true')");
    let pad = "p".repeat(1000);
    let lines: Vec<String> = (0..ROWS)
        .map(|i| format!(r#"{{"id":{i},"pad":"{pad}"}}"#))
        .collect();
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let (ok, _, err) = kcat_produce(server, "wide", 0, &refs, &[]);
    assert!(ok, "kcat: {err}");
}

/// Starts a scan of `fluss.wide` with a small receive buffer, reads its first bytes, then
/// stops reading (the socket stays open).
fn stalled_scan(server: &Server) -> TcpStream {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&server.fluss.into()).unwrap();
    let mut stream: TcpStream = socket.into();
    stream.set_read_timeout(Some(CLIENT_TIMEOUT)).unwrap();
    write!(
        stream,
        "GET /v1/tables/fluss.wide/scan?format=jsonl HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    .unwrap();
    let mut first = [0u8; 2048];
    let mut read = 0;
    while read < first.len() {
        match stream.read(&mut first[read..]) {
            Ok(0) => panic!("scan closed at once"),
            Ok(n) => read += n,
            Err(error) => panic!("scan read failed: {error}"),
        }
    }
    assert!(
        first.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&first)
    );
    stream
}

const CLIENT_GONE: &str = "scan stopped: the client went away";

#[test]
fn slow_or_vanished_scan_readers_stop_their_scans_and_block_nobody() {
    let mut server = Server::start(
        1,
        &[
            "admin.max-concurrent-scans=2",
            "admin.queue-timeout=1s",
            "admin.write-timeout=60s",
            "admin.shutdown-timeout=2s",
        ],
    );
    fill_wide_table(&server);

    // A reader that goes away: its scan stops producing (long before admin.write-timeout).
    let vanished = stalled_scan(&server);
    drop(vanished);
    assert!(
        wait_for_log(&server, CLIENT_GONE, 1, Duration::from_secs(10)),
        "the scan went on after its client left\n{}",
        server.plain_logs()
    );

    // Readers that stop reading hold both scan slots...
    let stalled = [stalled_scan(&server), stalled_scan(&server)];
    assert_serving(&mut server, "while two scans are not read");
    let (status, body) = server.get("/v1/tables/fluss.wide");
    assert_eq!(status, 200, "{body}");
    let (status, _) = server.get("/metrics");
    assert_eq!(status, 200);
    // ... so a third scan waits admin.queue-timeout in line, then is told the server is busy.
    let queued = Instant::now();
    let mut third = connect(&server);
    write!(
        third,
        "GET /v1/tables/fluss.wide/scan?format=jsonl HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let answer = read_to_close(&mut third);
    assert_eq!(answer.status, 503, "{answer:?}");
    assert_eq!(error_code(&answer), "SERVER_BUSY");
    assert!(
        queued.elapsed() >= Duration::from_millis(900),
        "{:?}",
        queued.elapsed()
    );

    // Shutdown does not wait on the stuck readers beyond admin.shutdown-timeout.
    let stopping = Instant::now();
    let status = server.terminate().expect("exited within 30s");
    assert!(status.success(), "{status:?}\n{}", server.plain_logs());
    assert!(
        stopping.elapsed() < Duration::from_secs(15),
        "{:?}",
        stopping.elapsed()
    );
    drop(stalled);

    // With a short write timeout, a reader that stops reading loses its connection and
    // its scan stops; then every row is still there for a reader that reads.
    let data_dir = server.data_dir.clone();
    let mut server = Server::start_in(
        &data_dir,
        1,
        &["admin.max-concurrent-scans=2", "admin.write-timeout=2s"],
    );
    let mut stalled = [stalled_scan(&server), stalled_scan(&server)];
    assert_serving(&mut server, "while two scans are not read");
    assert!(
        wait_for_log(&server, CLIENT_GONE, 2, Duration::from_secs(20)),
        "stalled scans were not stopped\n{}",
        server.plain_logs()
    );
    for stream in &mut stalled {
        let mut rest = Vec::new();
        let _ = stream.read_to_end(&mut rest);
        assert!(
            rest.len() < ROWS * 1000,
            "a stalled reader got the whole scan ({} bytes)",
            rest.len()
        );
        assert!(!rest.ends_with(b"0\r\n\r\n"), "a cut body must not look complete");
    }
    let rows = server.scan("fluss.wide");
    assert_eq!(rows.len(), ROWS);
    assert_serving(&mut server, "after");
}

#[test]
fn failed_logins_say_credentials_were_wrong_and_are_logged_without_the_password() {
    let mut server = Server::start(
        1,
        &[
            "security.protocol.map=FLUSS:sasl,KAFKA:plaintext",
            "security.sasl.plain.credentials=admin:admin-secret",
            // The answers' wording is under test here, not the login throttle
            // (broker_login_throttle.rs), which 0 turns off.
            "security.login.failure-delay=0",
        ],
    );
    let request = |auth: Option<&str>| -> Answer {
        let mut stream = connect(&server);
        let mut head =
            "POST /v1/sql HTTP/1.1\r\nHost: x\r\nContent-Length: 14\r\nConnection: close\r\n".to_string();
        if let Some(user_password) = auth {
            let token = base64::engine::general_purpose::STANDARD.encode(user_password);
            head.push_str(&format!("Authorization: Basic {token}\r\n"));
        }
        head.push_str("\r\nSHOW DATABASES");
        stream.write_all(head.as_bytes()).unwrap();
        read_to_close(&mut stream)
    };

    let missing = request(None);
    assert_eq!(missing.status, 401);
    assert!(missing.body.contains("authentication required"), "{missing:?}");
    assert!(
        missing
            .head
            .to_ascii_lowercase()
            .contains("www-authenticate: basic"),
        "{missing:?}"
    );

    let wrong = request(Some("admin:guess-123"));
    assert_eq!(wrong.status, 401);
    assert_eq!(error_code(&wrong), "AUTHENTICATION_FAILED");
    assert!(
        wrong
            .body
            .contains("authentication failed: invalid user name or password"),
        "{wrong:?}"
    );
    assert!(!wrong.body.contains("required"), "{wrong:?}");
    assert!(!wrong.body.contains("guess-123"), "{wrong:?}");

    let malformed = {
        let mut stream = connect(&server);
        write!(
            stream,
            "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer abc\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        read_to_close(&mut stream)
    };
    assert_eq!(malformed.status, 401, "{malformed:?}");
    assert!(
        malformed
            .body
            .contains("authentication failed: Authorization scheme is not Basic"),
        "{malformed:?}"
    );

    assert_eq!(request(Some("admin:admin-secret")).status, 200);

    assert!(wait_for_log(
        &server,
        "admin HTTP Basic authentication failed",
        2,
        Duration::from_secs(5)
    ));
    let log = server.plain_logs();
    let line = log
        .lines()
        .find(|line| line.contains("admin HTTP Basic authentication failed") && line.contains("\"admin\""))
        .unwrap_or_else(|| panic!("no failed-login line naming the user\n{log}"));
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("client=127.0.0.1:"), "{line}");
    assert!(!log.contains("guess-123"), "the password leaked into the log");
    assert!(alive(&mut server));
}

#[test]
fn bodies_of_clients_without_valid_credentials_are_never_read() {
    let mut server = Server::start(
        1,
        &[
            "security.protocol.map=FLUSS:sasl,KAFKA:plaintext",
            "security.sasl.plain.credentials=admin:admin-secret",
            "security.login.failure-delay=0",
            "admin.max-request-size=16mb",
            // Far beyond the client's read timeout: a server that waited for the body
            // would not answer before the client gives up.
            "admin.body-timeout=120s",
        ],
    );
    let basic = |user_password: &str| {
        let token = base64::engine::general_purpose::STANDARD.encode(user_password);
        format!("Authorization: Basic {token}\r\n")
    };
    // A 16 MB body of which only the first bytes are sent, in the head's segment.
    let refused = |authorization: &str, expect: &str| -> Answer {
        let mut stream = connect(&server);
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let started = Instant::now();
        write!(
            stream,
            "POST /v1/sql HTTP/1.1\r\nHost: x\r\nContent-Length: 16000000\r\n{authorization}{expect}\r\nSHOW DATABASES; SHOW"
        )
        .unwrap();
        let answer = read_to_close(&mut stream);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        answer
    };

    let missing = refused("", "");
    assert_eq!(missing.status, 401, "{missing:?}");
    assert!(missing.body.contains("authentication required"), "{missing:?}");
    assert!(
        missing.head.to_ascii_lowercase().contains("connection: close"),
        "{missing:?}"
    );

    let wrong = refused(&basic("admin:guess"), "");
    assert_eq!(wrong.status, 401, "{wrong:?}");
    assert!(wrong.body.contains("invalid user name or password"), "{wrong:?}");

    // A client that waits for 100 Continue is refused without being asked for the body.
    let waiting = refused("", "Expect: 100-continue\r\n");
    assert_eq!(waiting.status, 401, "{waiting:?}");
    assert!(!waiting.head.contains("100 Continue"), "{waiting:?}");

    // With valid credentials the body is still waited for and read.
    let mut stream = connect(&server);
    write!(
        stream,
        "POST /v1/sql HTTP/1.1\r\nHost: x\r\nContent-Length: 14\r\nConnection: close\r\n{}\r\nSHOW DATAB",
        basic("admin:admin-secret")
    )
    .unwrap();
    stream.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let mut early = [0u8; 64];
    let waited = stream.read(&mut early);
    assert!(
        matches!(&waited, Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)),
        "answered before the body arrived: {waited:?}"
    );
    stream.set_read_timeout(Some(CLIENT_TIMEOUT)).unwrap();
    stream.write_all(b"ASES").unwrap();
    let answer = read_to_close(&mut stream);
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(answer.body.contains("fluss"), "{answer:?}");
    assert!(alive(&mut server));
}

/// One request against the limits: what is sent, and what the server must answer.
#[derive(Debug, Clone)]
enum Probe {
    /// An honest `Content-Length` body of `n` bytes of valid SQL.
    Sized(usize),
    /// `Content-Length: declared`, then only `sent` bytes.
    Lying { declared: u64, sent: usize },
    /// A chunked body of valid SQL, `n` bytes in chunks of `chunk`.
    Chunked { n: usize, chunk: usize },
    /// A `/healthz` request with one extra header of `n` bytes.
    BigHead(usize),
}

const LIMIT: usize = 4096;
const HEAD_LIMIT: usize = 2048;

fn sql_of(n: usize) -> String {
    format!("SHOW DATABASES{}", " ".repeat(n - "SHOW DATABASES".len()))
}

fn probe_strategy() -> impl Strategy<Value = Probe> {
    prop_oneof![
        (14..=3 * LIMIT).prop_map(Probe::Sized),
        (
            prop_oneof![(LIMIT as u64 + 1)..=(u64::MAX - 2), 1..=LIMIT as u64],
            0..64usize
        )
            .prop_map(|(declared, sent)| Probe::Lying {
                declared,
                sent: sent.min(declared.saturating_sub(1) as usize),
            }),
        (14..=3 * LIMIT, 1..=2000usize).prop_map(|(n, chunk)| Probe::Chunked { n, chunk }),
        (0..=2 * HEAD_LIMIT).prop_map(Probe::BigHead),
    ]
}

fn run_probe(server: &Server, probe: &Probe) -> Result<(), TestCaseError> {
    let mut stream = connect(server);
    let head = "POST /v1/sql HTTP/1.1\r\nHost: x\r\nConnection: close\r\n";
    let mut request = Vec::new();
    let expected: &[u16] = match probe {
        Probe::Sized(n) => {
            request.extend_from_slice(format!("{head}Content-Length: {n}\r\n\r\n{}", sql_of(*n)).as_bytes());
            if *n > LIMIT {
                &[413]
            } else {
                &[200]
            }
        }
        Probe::Lying { declared, sent } => {
            request.extend_from_slice(format!("{head}Content-Length: {declared}\r\n\r\n").as_bytes());
            request.extend(std::iter::repeat_n(b' ', *sent));
            if *declared > LIMIT as u64 {
                &[413]
            } else {
                &[408]
            }
        }
        Probe::Chunked { n, chunk } => {
            request.extend_from_slice(format!("{head}Transfer-Encoding: chunked\r\n\r\n").as_bytes());
            for part in sql_of(*n).as_bytes().chunks(*chunk) {
                request.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
                request.extend_from_slice(part);
                request.extend_from_slice(b"\r\n");
            }
            request.extend_from_slice(b"0\r\n\r\n");
            if *n > LIMIT {
                &[413]
            } else {
                &[200]
            }
        }
        Probe::BigHead(n) => {
            let text = format!(
                "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: {}\r\n\r\n",
                "b".repeat(*n)
            );
            let length = text.len();
            request.extend_from_slice(text.as_bytes());
            // The exact count (which line ends are in) is the parser's: only clear cases.
            if length + 64 < HEAD_LIMIT {
                &[200]
            } else if length > HEAD_LIMIT + 64 {
                &[431]
            } else {
                &[200, 431]
            }
        }
    };
    // The server may answer and close before taking everything.
    let _ = stream.write_all(&request);
    let answer = read_to_close(&mut stream);
    prop_assert!(
        expected.contains(&answer.status),
        "{probe:?}: expected {expected:?}, got {} {}",
        answer.status,
        answer.body
    );
    let (status, _) = server.get("/healthz");
    prop_assert_eq!(status, 200, "{:?}: /healthz after it", probe);
    Ok(())
}

#[test]
fn request_path_limits_hold_for_any_length_framing_and_head_size() {
    let server = Server::start(
        1,
        &[
            "admin.max-request-size=4kb",
            "admin.max-header-size=2kb",
            "admin.body-timeout=300ms",
        ],
    );
    let mut runner = TestRunner::new(Config {
        cases: 64,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&probe_strategy(), |probe| run_probe(&server, &probe));
    if let Err(error) = result {
        panic!("{error}\n{}", server.plain_logs());
    }
}

/// A gate the test opens and closes; hooks wait at it (at most 30 s).
#[derive(Default)]
struct Gate {
    closed: Mutex<bool>,
    changed: Condvar,
    entered: AtomicUsize,
}

impl Gate {
    fn set_closed(&self, closed: bool) {
        *self.closed.lock().unwrap() = closed;
        self.changed.notify_all();
    }

    fn pass(&self) {
        self.entered.fetch_add(1, Ordering::SeqCst);
        let guard = self.closed.lock().unwrap();
        let _unused = self
            .changed
            .wait_timeout_while(guard, Duration::from_secs(30), |closed| *closed)
            .unwrap();
    }

    fn wait_entered(&self, count: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.entered.load(Ordering::SeqCst) < count {
            assert!(Instant::now() < deadline, "hooks did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn post_sql(address: SocketAddr, sql: &str) -> TcpStream {
    let mut stream = connect_to(address);
    write!(
        stream,
        "POST /v1/sql HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{sql}",
        sql.len()
    )
    .unwrap();
    stream
}

fn get(address: SocketAddr, path: &str) -> Answer {
    get_on(connect_to(address), path)
}

/// In process, with a metrics hook that blocks on a gate to hold the request slots: requests
/// queue, `/healthz` does not, a queued request whose client left never runs, and one whose
/// client waits runs once a slot frees.
#[test]
fn queued_requests_wait_for_a_slot_and_leave_the_line_when_their_client_goes() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Arc::new(Catalog::open(CatalogConfig::new(dir.path())).unwrap());
    let mut ctx = AdminContext::new(catalog, Arc::new(AtomicBool::new(true)));
    let gate = Arc::new(Gate::default());
    let hook_gate = Arc::clone(&gate);
    ctx.metrics = Some(Arc::new(move || {
        hook_gate.pass();
        "kafluss_up 1\n".to_string()
    }));
    ctx.limits.max_concurrent_requests = 2;
    ctx.limits.queue_timeout = Duration::from_secs(2);
    let server = start_admin_server("127.0.0.1:0", ctx).unwrap();
    let address = server.local_addr();

    let hold_slots = |first: usize| {
        gate.set_closed(true);
        let blockers: Vec<_> = (0..2)
            .map(|_| std::thread::spawn(move || get(address, "/metrics")))
            .collect();
        gate.wait_entered(first + 2);
        blockers
    };

    let blockers = hold_slots(0);
    assert_eq!(get(address, "/healthz").status, 200, "health needs no slot");
    let waited = Instant::now();
    let answer = read_to_close(&mut post_sql(address, "SHOW DATABASES"));
    assert_eq!(answer.status, 503, "{answer:?}");
    assert_eq!(error_code(&answer), "SERVER_BUSY");
    assert!(
        waited.elapsed() >= Duration::from_millis(1900),
        "{:?}",
        waited.elapsed()
    );
    // Sent whole, then the client leaves while it waits in line; the slots free well
    // within its admin.queue-timeout.
    drop(post_sql(address, "CREATE TABLE left_behind (x INT)"));
    std::thread::sleep(Duration::from_millis(300));
    gate.set_closed(false);
    for blocker in blockers {
        let answer = blocker.join().unwrap();
        assert_eq!((answer.status, answer.body.as_str()), (200, "kafluss_up 1\n"));
    }

    let blockers = hold_slots(2);
    let mut waiting = post_sql(address, "CREATE TABLE kept (x INT)");
    std::thread::sleep(Duration::from_millis(300));
    gate.set_closed(false);
    let answer = read_to_close(&mut waiting);
    assert_eq!(
        answer.status, 200,
        "a waiting request runs once a slot frees: {answer:?}"
    );
    for blocker in blockers {
        assert_eq!(blocker.join().unwrap().status, 200);
    }
    let tables = read_to_close(&mut post_sql(address, "SHOW TABLES")).body;
    assert!(tables.contains("kept"), "{tables}");
    assert!(
        !tables.contains("left_behind"),
        "the request of a client that left ran: {tables}"
    );
    server.stop();
}
