//! Connection limits and the operational endpoints: `kafka.max-connections` refuses extra
//! connections across cores, `/healthz` answers once the ready line is printed, `/metrics`
//! counts requests by API.

#[path = "broker_support.rs"]
mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::Server;

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
