//! Password guessing is slowed: failed SASL/PLAIN logins make the next attempts of the same
//! client address and of the same user wait, exponentially (`security.login.failure-delay`,
//! doubled per failure, at most `security.login.max-failure-delay`); parallel guesses are
//! serialised at that pace instead of multiplied; the right password still gets in once its
//! turn comes; failures are logged with user and address, never the password.

#[path = "broker_support.rs"]
mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafluss_protocol::{
    decode_response_frame, encode_request_frame, ErrorCode, Message, RequestHeader, SaslAuthenticateRequest,
    SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use support::Server;

const WRONG: &str = "not-the-password-1234";

fn exchange<M: Message, R: Message>(stream: &mut TcpStream, version: i16, request: &M) -> R {
    let header = RequestHeader::new(M::API_KEY, version, 7, Some("guesser"));
    let mut frame = BytesMut::new();
    encode_request_frame(&mut frame, &header, request).expect("encode");
    stream.write_all(&frame).expect("send");
    let mut prefix = [0u8; 4];
    stream.read_exact(&mut prefix).expect("an answer");
    let mut body = vec![0u8; i32::from_be_bytes(prefix) as usize];
    stream.read_exact(&mut body).expect("an answer");
    decode_response_frame::<R>(&Bytes::from(body), version)
        .expect("decode")
        .1
}

/// One login attempt on a fresh connection; the code and how long the answer took.
fn attempt(server: SocketAddr, password: &str) -> (ErrorCode, Duration) {
    let mut stream = TcpStream::connect_timeout(&server, Duration::from_secs(10)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let handshake: SaslHandshakeResponse = exchange(
        &mut stream,
        1,
        &SaslHandshakeRequest {
            mechanism: "PLAIN".into(),
        },
    );
    assert_eq!(handshake.error_code, ErrorCode::None);
    let started = Instant::now();
    let answer: SaslAuthenticateResponse = exchange(
        &mut stream,
        2,
        &SaslAuthenticateRequest {
            auth_bytes: Bytes::from(format!("\0writer\0{password}")),
        },
    );
    (answer.error_code, started.elapsed())
}

#[test]
fn failed_logins_slow_the_next_attempts() {
    let server = Server::start(
        2,
        &[
            "security.protocol.map=FLUSS:plaintext,KAFKA:sasl",
            "security.sasl.plain.credentials=writer:secret",
            "security.login.failure-delay=100ms",
            "security.login.max-failure-delay=300ms",
        ],
    );
    let kafka = server.kafka;
    // No failure yet: the first wrong attempt is answered without a wait... (no upper bound is
    // asserted on a shared machine; the waits below are lower bounds)
    let (code, _) = attempt(kafka, WRONG);
    assert_eq!(code, ErrorCode::SaslAuthenticationFailed);
    // ...the next ones wait 100 ms, then 200 ms, then the 300 ms bound.
    for expected in [100, 200, 300, 300] {
        let (code, took) = attempt(kafka, WRONG);
        assert_eq!(code, ErrorCode::SaslAuthenticationFailed);
        assert!(
            took >= Duration::from_millis(expected - 20),
            "after failures the attempt waited only {took:?} (expected {expected} ms)"
        );
    }

    // Eight guesses in parallel are served one per 300 ms, not all at once.
    let started = Instant::now();
    let guesses: Vec<_> = (0..8)
        .map(|_| std::thread::spawn(move || attempt(kafka, WRONG)))
        .collect();
    for guess in guesses {
        assert_eq!(
            guess.join().expect("guess").0,
            ErrorCode::SaslAuthenticationFailed
        );
    }
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(8 * 300 - 100),
        "8 parallel guesses took {took:?}: they must be serialised at the 300 ms delay"
    );

    // The right password waits its turn, then gets in, and clears the penalty.
    let (code, took) = attempt(kafka, "secret");
    assert_eq!(code, ErrorCode::None, "the right password still authenticates");
    assert!(took >= Duration::from_millis(250), "it waited its turn: {took:?}");
    let (code, _) = attempt(kafka, "secret");
    assert_eq!(code, ErrorCode::None);

    let logs = server.logs();
    assert!(
        logs.contains("SASL authentication failed") && logs.contains("writer"),
        "failures are logged with the user: {logs}"
    );
    assert!(!logs.contains(WRONG), "the password never reaches the log");

    let (_, metrics) = server.get("/metrics");
    let value = |name: &str| -> u64 {
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(name).and_then(|v| v.trim().parse().ok()))
            .unwrap_or_else(|| panic!("{name} missing:\n{metrics}"))
    };
    assert_eq!(
        value("kafluss_login_failures_total"),
        1 + 4 + 8,
        "every failed attempt counted"
    );
    assert!(
        value("kafluss_login_delayed_total") > 4 + 8,
        "the waiting attempts counted"
    );
}

/// `GET /metrics` with HTTP Basic credentials; the status code and the headers+body.
fn get_with_basic(server: SocketAddr, user: &str, password: &str) -> (u16, String) {
    let auth = kafluss_tests::http::BasicAuth::new(user, password);
    let response = kafluss_tests::http::request(
        server,
        "GET",
        "/metrics",
        b"",
        Some(&auth),
        Duration::from_secs(30),
    )
    .unwrap_or_else(|error| panic!("{error}"));
    let head: String = response
        .headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    (response.status, format!("{head}\r\n{}", response.text()))
}

#[test]
fn failed_basic_logins_are_refused_for_a_while() {
    let server = Server::start(
        1,
        &[
            "security.protocol.map=FLUSS:sasl,KAFKA:plaintext",
            "security.sasl.plain.credentials=admin:secret",
            "security.login.failure-delay=500ms",
            "security.login.max-failure-delay=2s",
        ],
    );
    let fluss = server.fluss;
    assert_eq!(get_with_basic(fluss, "admin", "secret").0, 200);
    let (status, _) = get_with_basic(fluss, "admin", WRONG);
    assert_eq!(status, 401);
    // Within the delay even the right password is not checked: 429 with Retry-After.
    let (status, answer) = get_with_basic(fluss, "admin", "secret");
    assert_eq!(status, 429, "{answer}");
    assert!(answer.to_lowercase().contains("retry-after: 1"), "{answer}");
    assert!(answer.contains("TOO_MANY_FAILED_LOGINS"), "{answer}");
    // Refused attempts do not extend the wait: once it passed, the right password works.
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(get_with_basic(fluss, "admin", "secret").0, 200);
    assert_eq!(
        get_with_basic(fluss, "admin", "secret").0,
        200,
        "success cleared the penalty"
    );
    assert!(
        !server.logs().contains(WRONG),
        "the password never reaches the log"
    );
}
