//! Connection limits and the operational endpoints: `kafka.max-connections` refuses extra
//! connections across cores, `/healthz` answers once the ready line is printed, `/metrics`
//! counts requests by API; refused connections and connections closed for a bad frame are logged
//! a bounded number of times, with their count.

#[path = "broker_support.rs"]
mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::Bytes;
use kafluss_protocol::{Compression, RecordBatchBuilder, SaslAuthenticateRequest, SaslHandshakeRequest};
use support::{Raw, Server};

/// An ApiVersions v0 request frame.
const API_VERSIONS_V0: [u8; 18] = [0, 0, 0, 14, 0, 18, 0, 0, 0, 0, 0, 9, 0, 4, b't', b'e', b's', b't'];

/// Sends ApiVersions v0 and tells whether an answer came back (false: closed).
fn answers(stream: &mut TcpStream) -> bool {
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    if stream.write_all(&API_VERSIONS_V0).is_err() {
        return false;
    }
    let mut prefix = [0u8; 4];
    stream.read_exact(&mut prefix).is_ok()
}

#[test]
fn max_connections_health_and_metrics() {
    let server = Server::start(2, &["kafka.max-connections=3"]);
    let (status, _) = server.get("/healthz");
    assert_eq!(status, 200, "ready line printed, so every core serves");

    let mut open: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect(server.kafka).unwrap())
        .collect();
    for stream in &mut open {
        assert!(answers(stream));
    }
    let mut extra = TcpStream::connect(server.kafka).unwrap();
    assert!(!answers(&mut extra), "the fourth connection is refused");
    drop(open.pop());
    // The slot frees once the server notices the close.
    let mut admitted = false;
    for _ in 0..50 {
        let mut retry = TcpStream::connect(server.kafka).unwrap();
        if answers(&mut retry) {
            admitted = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(admitted, "a closed connection frees its slot");

    let (status, metrics) = server.get("/metrics");
    assert_eq!(status, 200);
    let value = |name: &str| -> u64 {
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(name).and_then(|rest| rest.trim().parse().ok()))
            .unwrap_or_else(|| panic!("{name} missing in\n{metrics}"))
    };
    assert!(value("kafluss_requests_total{api=\"api_versions\"}") >= 4);
    assert!(value("kafluss_connections_rejected_total") >= 1);
    assert!(value("kafluss_request_latency_seconds_count{api=\"api_versions\"}") >= 4);
}

/// The server's resident memory, from /proc.
fn rss_bytes(server: &Server) -> u64 {
    let pid = server.pid();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmRSS")
        * 1024
}

#[test]
fn partial_requests_cannot_grow_memory_past_the_request_budget() {
    // 10 clients each announce a 40 MB request and send all of it but the last byte: without a
    // budget the server buffered all of them (+400 MB); with `kafka.max-request-memory` one
    // core holds at most that much of requests, and the other clients wait (TCP pushes back).
    // The stall detector is off: reading a 40 MB body into a zero-filled buffer can hold a
    // debug build's core past 100 ms, and glommio's stall report then resolves the stack's
    // symbols, which loads the binary's debug information into memory (once per process).
    // That is not request memory: the runs that failed here (1 of 4, growth 269-272 MB) were
    // the ones whose log held a stall report.
    let server = Server::start(
        1,
        &[
            "kafka.max-request-size=40mb",
            "kafka.max-request-memory=48mb",
            "server.stall-threshold=0",
        ],
    );
    let before = rss_bytes(&server);
    let size: usize = 40 << 20;
    let attackers: Vec<_> = (0..10)
        .map(|_| {
            let address = server.kafka;
            std::thread::spawn(move || {
                let mut stream = TcpStream::connect(address).expect("connect");
                stream.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
                let _ = stream.write_all(&(size as i32).to_be_bytes());
                let chunk = vec![0u8; 1 << 20];
                for _ in 0..39 {
                    if stream.write_all(&chunk).is_err() {
                        break;
                    }
                }
                let _ = stream.write_all(&chunk[..(1 << 20) - 1]);
                stream // held open, the request never completes
            })
        })
        .collect();
    let streams: Vec<TcpStream> = attackers
        .into_iter()
        .map(|t| t.join().expect("attacker"))
        .collect();
    let during = rss_bytes(&server);
    let grown = during.saturating_sub(before);
    assert!(
        grown < 100 << 20,
        "10 partial 40 MB requests grew the server by {} MB (budget 48 MB)",
        grown >> 20
    );
    // The server still serves others meanwhile.
    let (status, _) = server.get("/healthz");
    assert_eq!(status, 200);
    drop(streams);
    // Once they are gone, the memory is free again for a real request.
    let mut admitted = false;
    for _ in 0..50 {
        let mut client = TcpStream::connect(server.kafka).unwrap();
        if answers(&mut client) {
            admitted = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(admitted, "a request is served after the partial ones closed");
}

/// The lines of `log` that report an occurrence (they contain `line`, and `suppressed=N` when they
/// stand for N more), and those that count occurrences left out (`tail` followed by the count, and `about`): how
/// many of each, and how many occurrences they stand for together.
fn repeat_limited(log: &str, line: &str, tail: &str, about: &str) -> (usize, usize, u64) {
    let (mut lines, mut tails, mut occurrences) = (0, 0, 0);
    for text in log.lines() {
        let counted = text
            .split_once(tail)
            .filter(|(_, rest)| rest.starts_with(|c: char| c.is_ascii_digit()) && rest.contains(about));
        if let Some((_, rest)) = counted {
            let count: String = rest.chars().take_while(char::is_ascii_digit).collect();
            tails += 1;
            occurrences += count
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("no count in {text}"));
        } else if text.contains(line) {
            let left_out = text
                .split_once("suppressed=")
                .map(|(_, rest)| rest.chars().take_while(char::is_ascii_digit).collect::<String>());
            lines += 1;
            occurrences += 1 + left_out.map_or(0, |n| n.parse::<u64>().unwrap());
        }
    }
    (lines, tails, occurrences)
}

/// `kafluss_connections_rejected_total`, once it reaches `at_least` (bounded wait).
fn wait_rejected(server: &Server, at_least: u64) -> u64 {
    let mut rejected = 0;
    for _ in 0..200 {
        let (status, metrics) = server.get("/metrics");
        assert_eq!(status, 200);
        rejected = metrics
            .lines()
            .find_map(|line| line.strip_prefix("kafluss_connections_rejected_total"))
            .and_then(|rest| rest.trim().parse().ok())
            .unwrap_or(0);
        if rejected >= at_least {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    rejected
}

/// A client connecting in a loop to a server at kafka.max-connections does not grow the log at
/// its pace: with server.log-repeat-interval=1h, each of the two cores logs the first refusal
/// (naming the client) and, at shutdown, one line counting the rest, so 4 lines at most stand
/// for 200 refusals (one line each before).
#[test]
fn refused_connections_are_logged_a_bounded_number_of_times_with_their_count() {
    const CONNECTIONS: u64 = 200;
    let mut server = Server::start(2, &["kafka.max-connections=0", "server.log-repeat-interval=1h"]);
    for _ in 0..CONNECTIONS {
        drop(TcpStream::connect(server.kafka).unwrap());
    }
    assert_eq!(wait_rejected(&server, CONNECTIONS), CONNECTIONS);
    let line = "refusing a Kafka connection: kafka.max-connections (0) reached";
    let tail = "refusing a Kafka connection: ";
    let about = "kafka.max-connections (0) reached";
    let log = server.plain_logs();
    let (lines, tails, _) = repeat_limited(&log, line, tail, about);
    assert!((1..=2).contains(&lines), "one line per core:\n{log}");
    assert_eq!(tails, 0, "the count waits for the interval (or shutdown):\n{log}");
    assert!(
        log.contains("client=127.0.0.1:"),
        "the first line names the client:\n{log}"
    );
    assert!(server.terminate().is_some_and(|status| status.success()));
    let log = server.plain_logs();
    let (lines, tails, occurrences) = repeat_limited(&log, line, tail, about);
    assert!(lines + tails <= 4, "{lines} lines and {tails} counts:\n{log}");
    assert!(tails >= 1, "no line counts what was left out:\n{log}");
    assert_eq!(occurrences, CONNECTIONS, "the lines count every refusal:\n{log}");
    assert!(log.contains(" more refused on 127.0.0.1:"), "{log}");
}

/// Connections closed for a request over kafka.max-request-size are logged like the refusals
/// above: per reason, the first on each core and one line counting the rest.
#[test]
fn connections_closed_for_bad_frames_are_logged_a_bounded_number_of_times_with_their_count() {
    const CONNECTIONS: u64 = 200;
    let mut server = Server::start(2, &["server.log-repeat-interval=1h"]);
    // A Produce frame of 2^31-1 bytes: closed once its size prefix and API key are read.
    let frame = [0x7f, 0xff, 0xff, 0xff, 0, 0];
    for _ in 0..CONNECTIONS {
        let mut stream = TcpStream::connect(server.kafka).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        stream.write_all(&frame).unwrap();
        let mut rest = Vec::new();
        let _ = stream.read_to_end(&mut rest);
        assert!(rest.is_empty(), "closed unanswered");
    }
    let line = "closing Kafka connection: request larger than kafka.max-request-size";
    let tail = "closing Kafka connections: ";
    let about = "closed for request larger than kafka.max-request-size";
    let log = server.plain_logs();
    let (lines, _, _) = repeat_limited(&log, line, tail, about);
    assert!((1..=2).contains(&lines), "one line per core:\n{log}");
    assert!(server.terminate().is_some_and(|status| status.success()));
    let log = server.plain_logs();
    let (lines, tails, occurrences) = repeat_limited(&log, line, tail, about);
    assert!(lines + tails <= 4, "{lines} lines and {tails} counts:\n{log}");
    assert_eq!(occurrences, CONNECTIONS, "the lines count every close:\n{log}");
    assert!(
        log.contains(" more closed for request larger than kafka.max-request-size in the 3600s"),
        "{log}"
    );
}

/// Sends one request with `send` on a new connection to `address` and waits for the server's
/// verdict (bounded by the connection's read timeout): the answer, which the server sends once
/// it has logged (or counted) the close and after which it waits for the client to close first
/// (a refused SASL step), or, with `answered` false, the close itself (a failed acks=0 request).
fn closed_after(address: std::net::SocketAddr, answered: bool, send: impl FnOnce(&mut Raw)) {
    let mut raw = Raw::connect(address);
    send(&mut raw);
    if answered {
        assert!(raw.read_frame().is_some(), "an answer before the close");
    } else {
        let mut rest = Vec::new();
        raw.stream
            .read_to_end(&mut rest)
            .expect("the server closes the connection");
        assert!(rest.is_empty(), "closed unanswered");
    }
}

/// Counts, in the log of a server stopped by SIGTERM, the lines of one close kind: `line` is
/// what its first lines say, `kind` what its count lines name; at most one line and one count per
/// core (2), standing for `sent` closes together, all at INFO.
fn assert_counted_per_kind(log: &str, line: &str, kind: &str, sent: u64) {
    let about = format!("closed for {kind} in the 3600s after the last such line");
    let (lines, tails, occurrences) = repeat_limited(log, line, "closing Kafka connections: ", &about);
    assert!(
        (1..=2).contains(&lines) && tails <= 2,
        "{kind}: {lines} lines and {tails} counts:\n{log}"
    );
    assert_eq!(occurrences, sent, "{kind}: the lines count every close:\n{log}");
    for text in log.lines().filter(|l| l.contains(line) || l.contains(&about)) {
        assert!(
            text.contains(" INFO "),
            "{kind}: a client's mistake is INFO: {text}"
        );
    }
}

/// Connections that a request handler closes for its client's mistake are logged per kind
/// like the bad frames above: a failed acks=0 Produce request (to an unknown topic), SaslHandshake
/// and SaslAuthenticate on a plaintext listener (one kind), and on a SASL listener a mechanism
/// other than PLAIN and a SaslAuthenticate before any handshake. Before, each close was a line
/// of its own (three of the kinds at WARN): 200 lines here.
#[test]
fn connections_closed_by_handlers_for_client_mistakes_are_logged_a_bounded_number_of_times() {
    const CONNECTIONS: u64 = 40;
    let mut plaintext = Server::start(2, &["server.log-repeat-interval=1h"]);
    let mut builder = RecordBatchBuilder::new(Compression::None);
    builder.append(1_700_000_000_000, None, Some(b"{}"), &[]);
    let records = builder.build().expect("batch");
    let produce = support::produce_request(0, "nosuch", 0, records);
    let login = SaslAuthenticateRequest {
        auth_bytes: Bytes::from_static(b"\0writer\0wrong"),
    };
    let handshake = |mechanism: &str| SaslHandshakeRequest {
        mechanism: mechanism.to_string(),
    };
    for _ in 0..CONNECTIONS {
        closed_after(plaintext.kafka, false, |raw| {
            raw.send(9, &produce);
        });
        closed_after(plaintext.kafka, true, |raw| {
            raw.send(1, &handshake("PLAIN"));
        });
        closed_after(plaintext.kafka, true, |raw| {
            raw.send(2, &login);
        });
    }
    assert!(plaintext.terminate().is_some_and(|status| status.success()));
    let log = plaintext.plain_logs();
    assert_counted_per_kind(
        &log,
        "closing Kafka connection: an acks=0 Produce request failed",
        "failed acks=0 Produce request",
        CONNECTIONS,
    );
    assert_counted_per_kind(
        &log,
        "closing Kafka connection: SASL ",
        "SASL request on a plaintext listener",
        2 * CONNECTIONS,
    );

    let mut sasl = Server::start(
        2,
        &[
            "server.log-repeat-interval=1h",
            "security.protocol.map=FLUSS:plaintext,KAFKA:sasl",
            "security.sasl.plain.credentials=writer:secret",
        ],
    );
    for _ in 0..CONNECTIONS {
        closed_after(sasl.kafka, true, |raw| {
            raw.send(1, &handshake("SCRAM-SHA-512"));
        });
        closed_after(sasl.kafka, true, |raw| {
            raw.send(2, &login);
        });
    }
    assert!(sasl.terminate().is_some_and(|status| status.success()));
    let log = sasl.plain_logs();
    assert_counted_per_kind(
        &log,
        "closing Kafka connection: SASL handshake refused",
        "SASL mechanism other than PLAIN",
        CONNECTIONS,
    );
    assert_counted_per_kind(
        &log,
        "closing Kafka connection: SASL authentication refused",
        "SASL request out of order",
        CONNECTIONS,
    );
    assert!(
        !log.contains("SASL authentication failed"),
        "no password was checked, so no failed login:\n{log}"
    );
}
