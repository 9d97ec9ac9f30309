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
