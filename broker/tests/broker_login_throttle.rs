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
    decode_response_frame, encode_request_frame, ErrorCode, Message, MetadataRequest, MetadataResponse,
    RequestHeader, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use support::Server;

const WRONG: &str = "not-the-password-1234";

/// Sends a SaslAuthenticate v2 request for user `writer` with `password` on `stream` (already
/// handshaken), without reading its answer.
fn send_login(stream: &mut TcpStream, correlation_id: i32, client_id: &str, password: &str) {
    let header = RequestHeader::new(
        SaslAuthenticateRequest::API_KEY,
        2,
        correlation_id,
        Some(client_id),
    );
    let mut frame = BytesMut::new();
    let login = SaslAuthenticateRequest {
        auth_bytes: Bytes::from(format!("\0writer\0{password}")),
    };
    encode_request_frame(&mut frame, &header, &login).expect("encode");
    stream.write_all(&frame).expect("send");
}

/// The value of the server's metric `name` (a counter or gauge line of `/metrics`).
fn metric(server: &Server, name: &str) -> u64 {
    let (_, metrics) = server.get("/metrics");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(name).and_then(|v| v.trim().parse().ok()))
        .unwrap_or_else(|| panic!("{name} missing:\n{metrics}"))
}

fn exchange<M: Message, R: Message>(stream: &mut TcpStream, version: i16, request: &M) -> R {
    let header = RequestHeader::new(M::API_KEY, version, 7, Some("guesser"));
    let mut frame = BytesMut::new();
    encode_request_frame(&mut frame, &header, request).expect("encode");
    stream.write_all(&frame).expect("send");
    read_answer(stream, version).1
}

/// One login attempt on a fresh connection: the code, when its SaslAuthenticate was sent and
/// when the answer came.
///
/// The throttle gives a key its next turn `delay` after a failure is checked, and a failure is
/// checked after its request was sent; so an answer can never come sooner than `delay` after
/// the *previous* attempt was sent, however slow the machine. The assertions below are such
/// lower bounds (the time an attempt itself took is not one: on a loaded machine the next
/// request may arrive after its turn has already come).
fn attempt(server: SocketAddr, password: &str) -> (ErrorCode, Instant, Instant) {
    let (_stream, code, sent) = login(server, password);
    (code, sent, Instant::now())
}

/// SaslHandshake v1 and SaslAuthenticate on a fresh connection: the connection, the code, and
/// when the SaslAuthenticate was sent.
fn login(server: SocketAddr, password: &str) -> (TcpStream, ErrorCode, Instant) {
    let (stream, answer, sent) = login_with(server, Bytes::from(format!("\0writer\0{password}")));
    (stream, answer.error_code, sent)
}

/// A fresh connection that has done SaslHandshake v1 for PLAIN.
fn handshaken(server: SocketAddr) -> TcpStream {
    handshake(TcpStream::connect_timeout(&server, Duration::from_secs(10)).expect("connect"))
}

/// [`handshaken`] from a given loopback address (any of 127.0.0.0/8).
fn handshaken_from(server: SocketAddr, source: std::net::IpAddr) -> TcpStream {
    handshake(support::connect_from(server, source))
}

/// SaslHandshake v1 for PLAIN on `stream`.
fn handshake(mut stream: TcpStream) -> TcpStream {
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
    stream
}

/// [`login`] with any PLAIN message: the connection, the answer, and when it was sent.
fn login_with(server: SocketAddr, auth_bytes: Bytes) -> (TcpStream, SaslAuthenticateResponse, Instant) {
    let mut stream = handshaken(server);
    let sent = Instant::now();
    let answer: SaslAuthenticateResponse = exchange(&mut stream, 2, &SaslAuthenticateRequest { auth_bytes });
    (stream, answer, sent)
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
    // No failure yet: the first wrong attempt is answered without a wait (no upper bound is
    // asserted on a shared machine; the waits below are lower bounds, see `attempt`).
    let (code, mut previous_sent, _) = attempt(kafka, WRONG);
    assert_eq!(code, ErrorCode::SaslAuthenticationFailed);
    // The next ones wait 100 ms, then 200 ms, then the 300 ms bound.
    for expected in [100, 200, 300, 300] {
        let (code, sent, answered) = attempt(kafka, WRONG);
        assert_eq!(code, ErrorCode::SaslAuthenticationFailed);
        let since_previous = answered - previous_sent;
        assert!(
            since_previous >= Duration::from_millis(expected),
            "after failures the attempt was answered {since_previous:?} after the previous one was sent (expected at least {expected} ms)"
        );
        previous_sent = sent;
    }

    // Eight guesses in parallel are served one per 300 ms, not all at once: the last of them
    // is answered no sooner than 8 turns after the last sequential attempt was sent.
    let guesses: Vec<_> = (0..8)
        .map(|_| std::thread::spawn(move || attempt(kafka, WRONG)))
        .collect();
    let mut last_answer = previous_sent;
    for guess in guesses {
        let (code, _, answered) = guess.join().expect("guess");
        assert_eq!(code, ErrorCode::SaslAuthenticationFailed);
        last_answer = last_answer.max(answered);
    }
    let took = last_answer - previous_sent;
    assert!(
        took >= Duration::from_millis(8 * 300),
        "8 parallel guesses were all answered {took:?} after the last sequential attempt: they must be serialised at the 300 ms delay"
    );

    // The right password waits its turn (the ninth after that attempt), then gets in, and
    // clears the penalty.
    let (code, _, answered) = attempt(kafka, "secret");
    assert_eq!(code, ErrorCode::None, "the right password still authenticates");
    let waited = answered - previous_sent;
    assert!(
        waited >= Duration::from_millis(9 * 300),
        "it waited its turn: answered {waited:?} after the last sequential attempt"
    );
    let (code, _, _) = attempt(kafka, "secret");
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

/// Guesses sent at once wait as long as the same guesses one after another: each waiting
/// guess counts as a failure when the next turn is spaced, so the delay doubles from one turn
/// to the next (30, 60, 120, ... ms), not 30 ms each. Every connection has done its handshake
/// before the first guess is sent, so the six are waiting together. A lower bound, as in
/// `failed_logins_slow_the_next_attempts`: the six turns follow the first failure, which came
/// after its attempt was sent.
#[test]
fn parallel_guesses_take_as_long_as_sequential_ones() {
    let server = Server::start(
        2,
        &[
            "security.protocol.map=FLUSS:plaintext,KAFKA:sasl",
            "security.sasl.plain.credentials=writer:secret",
            "security.login.failure-delay=30ms",
            "security.login.max-failure-delay=10s",
        ],
    );
    let kafka = server.kafka;
    let mut streams: Vec<TcpStream> = (0..6).map(|_| handshaken(kafka)).collect();
    let (code, first_sent, _) = attempt(kafka, WRONG);
    assert_eq!(code, ErrorCode::SaslAuthenticationFailed);
    for stream in &mut streams {
        send_login(stream, 9, "guesser", WRONG);
    }
    let mut answers = Vec::new();
    for stream in &mut streams {
        let mut prefix = [0u8; 4];
        stream.read_exact(&mut prefix).expect("an answer");
        let mut body = vec![0u8; i32::from_be_bytes(prefix) as usize];
        stream.read_exact(&mut body).expect("an answer");
        let answer: SaslAuthenticateResponse =
            decode_response_frame(&Bytes::from(body), 2).expect("decode").1;
        assert_eq!(answer.error_code, ErrorCode::SaslAuthenticationFailed);
        answers.push(first_sent.elapsed());
    }
    let last = answers.iter().max().copied().unwrap_or_default();
    let sequential = Duration::from_millis(30 + 60 + 120 + 240 + 480 + 960);
    assert!(
        last >= sequential,
        "6 parallel guesses were all answered within {last:?} of the first failure's attempt \
         ({answers:?}); one after another they take at least {sequential:?}"
    );
}

/// When the throttle's table is full of recent failures (`security.login.max-tracked=2`: one
/// wrong login of `filler` from 127.0.0.1 fills it), guesses for a user from an address that
/// are neither tracked are still slowed: such keys share one entry whose delay doubles (50,
/// 100, 200, 400 ms before the second to fifth guess), and the table holds no more than 2.
#[test]
fn guesses_the_full_table_cannot_hold_are_still_slowed() {
    let server = Server::start(
        1,
        &[
            "security.protocol.map=FLUSS:plaintext,KAFKA:sasl",
            "security.sasl.plain.credentials=writer:secret",
            "security.login.failure-delay=50ms",
            "security.login.max-failure-delay=10s",
            "security.login.max-tracked=2",
        ],
    );
    let kafka = server.kafka;
    let (_filler, answer, _) = login_with(kafka, Bytes::from(format!("\0filler\0{WRONG}")));
    assert_eq!(answer.error_code, ErrorCode::SaslAuthenticationFailed);
    let source = std::net::IpAddr::from([127, 0, 0, 2]);
    let mut first_sent = None;
    for _ in 0..5 {
        let mut stream = handshaken_from(kafka, source);
        first_sent.get_or_insert_with(Instant::now);
        let answer: SaslAuthenticateResponse = exchange(
            &mut stream,
            2,
            &SaslAuthenticateRequest {
                auth_bytes: Bytes::from(format!("\0writer\0{WRONG}")),
            },
        );
        assert_eq!(answer.error_code, ErrorCode::SaslAuthenticationFailed);
    }
    let took = first_sent.map(|sent| sent.elapsed()).unwrap_or_default();
    assert!(
        took >= Duration::from_millis(50 + 100 + 200 + 400),
        "5 guesses for writer from 127.0.0.2 took {took:?} with the table full: they were not slowed"
    );
    let (_, metrics) = server.get("/metrics");
    assert!(
        metrics.lines().any(|line| line == "kafluss_login_tracked 2"),
        "the table holds 2 keys:\n{metrics}"
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
            "security.login.failure-delay=3s",
            "security.login.max-failure-delay=6s",
        ],
    );
    let fluss = server.fluss;
    assert_eq!(get_with_basic(fluss, "admin", "secret").0, 200);
    let (status, _) = get_with_basic(fluss, "admin", WRONG);
    assert_eq!(status, 401);
    // Within the delay even the right password is not checked: 429 with Retry-After (the 3 s
    // delay is far longer than the time between two requests, even on a loaded machine).
    let (status, answer) = get_with_basic(fluss, "admin", "secret");
    assert_eq!(status, 429, "{answer}");
    let retry_after: u64 = answer
        .to_lowercase()
        .lines()
        .find_map(|line| {
            line.strip_prefix("retry-after: ")
                .map(|v| v.trim().parse().expect("seconds"))
        })
        .unwrap_or_else(|| panic!("no Retry-After: {answer}"));
    assert!(
        (1..=3).contains(&retry_after),
        "Retry-After: the rest of the 3 s wait, rounded up: {answer}"
    );
    assert!(answer.contains("TOO_MANY_FAILED_LOGINS"), "{answer}");
    // Refused attempts do not extend the wait: once it passed, the right password works.
    std::thread::sleep(Duration::from_millis(3100));
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

/// An address that failed for two users keeps its delay through the successes of a third
/// (`a_success_keeps_the_delay_of_an_address_guessing_other_users` in the throttle's tests),
/// but only until 6 x `security.login.max-failure-delay` after its last failure: then it is
/// forgotten and the right password is checked at once, every time (the address was never
/// forgotten while the throttle's table had room: its own logins kept it).
#[test]
fn an_address_is_forgotten_six_max_delays_after_its_last_failure() {
    let server = Server::start(
        1,
        &[
            "security.protocol.map=FLUSS:sasl,KAFKA:plaintext",
            "security.sasl.plain.credentials=admin:secret,x:x-password,y:y-password",
            "security.login.failure-delay=200ms",
            "security.login.max-failure-delay=300ms",
        ],
    );
    let fluss = server.fluss;
    assert_eq!(get_with_basic(fluss, "x", WRONG).0, 401);
    // The address waits 200 ms after that failure before the next password is checked.
    std::thread::sleep(Duration::from_millis(400));
    let failed = Instant::now();
    assert_eq!(get_with_basic(fluss, "y", WRONG).0, 401);
    // 6 x 300 ms after the last failure (and a margin): nothing counts against 127.0.0.1.
    std::thread::sleep(Duration::from_millis(2_500).saturating_sub(failed.elapsed()));
    let statuses: Vec<u16> = (0..5)
        .map(|_| get_with_basic(fluss, "admin", "secret").0)
        .collect();
    assert_eq!(statuses, [200; 5], "{}", server.logs());
}

/// A refused login's answer is not followed at once by the end of the stream: the server waits
/// for the client to close first (clients do once they have read the error), for at most 1 s.
/// kafka-python 3.0 drops an answer that arrives together with the end of the stream and then
/// reports only "socket disconnected". The server writes its answer after the attempt was sent,
/// so a client that keeps the connection open sees the end no sooner than 1 s after sending:
/// a lower bound that holds on any machine.
#[test]
fn a_refused_login_is_answered_before_the_connection_ends() {
    let server = Server::start(
        1,
        &[
            "security.protocol.map=FLUSS:plaintext,KAFKA:sasl",
            "security.sasl.plain.credentials=writer:secret",
        ],
    );
    for client_closes in [false, true] {
        let (mut stream, code, sent) = login(server.kafka, WRONG);
        assert_eq!(code, ErrorCode::SaslAuthenticationFailed);
        if client_closes {
            stream.shutdown(std::net::Shutdown::Write).expect("half-close");
        }
        let mut byte = [0u8; 1];
        assert_eq!(
            stream
                .read(&mut byte)
                .expect("the server closes within the read timeout"),
            0,
            "nothing follows the refusal"
        );
        if !client_closes {
            assert!(
                sent.elapsed() >= Duration::from_millis(1000),
                "the end of the stream came {:?} after the attempt, before the 1 s the server waits for the client",
                sent.elapsed()
            );
        }
    }
}

/// A user name is logged escaped: a client's PLAIN message cannot write a line of its own into
/// the server's log (a name holding a newline and a fake "authenticated" line).
#[test]
fn a_user_name_cannot_forge_a_log_line() {
    let server = Server::start(
        1,
        &[
            "security.protocol.map=FLUSS:plaintext,KAFKA:sasl",
            "security.sasl.plain.credentials=writer:secret",
        ],
    );
    let forged = "\0eve\n2026-12-07T07:50:00Z  INFO kafluss_broker::kafka::sasl: FORGED user=admin\0pw";
    let (_stream, answer, _) = login_with(server.kafka, Bytes::from(forged));
    assert_eq!(answer.error_code, ErrorCode::SaslAuthenticationFailed);
    assert!(
        server.log_shows("SASL authentication failed", Duration::from_secs(10)),
        "{}",
        server.logs()
    );
    let logs = server.logs();
    assert!(
        !logs.lines().any(|line| line.starts_with("2026-12-07T07:50:00Z")),
        "a log line began with the client's text:\n{logs}"
    );
}

/// Before a login the largest frame read is 16 KiB: a size prefix over it closes the
/// connection at once (nothing of the body read, no request memory held while it waits),
/// logged as such; a login still fits.
#[test]
fn a_large_frame_before_login_closes_the_connection() {
    let server = Server::start(
        1,
        &[
            "security.protocol.map=FLUSS:plaintext,KAFKA:sasl",
            "security.sasl.plain.credentials=writer:secret",
        ],
    );
    let mut stream = TcpStream::connect_timeout(&server.kafka, Duration::from_secs(10)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    stream
        .write_all(&(16 * 1024 + 1i32).to_be_bytes())
        .expect("prefix");
    let mut byte = [0u8; 1];
    let closed = match stream.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    };
    assert!(closed, "a 16 KiB + 1 frame before login is refused");
    assert!(
        server.log_shows(
            "larger than allowed before SASL authentication",
            Duration::from_secs(10)
        ),
        "{}",
        server.logs()
    );
    let (_stream, code, _) = login(server.kafka, "secret");
    assert_eq!(code, ErrorCode::None, "a login still fits");
}

/// Attempts whose clients close before their turn give the turn back, unchecked: twenty
/// connections that send a guess for `writer` and go away at once do not push the next
/// login of `writer` twenty turns (20 s here) away, and are not counted as failures.
#[test]
fn attempts_abandoned_before_their_turn_give_it_back() {
    let server = Server::start(
        1,
        &[
            "security.protocol.map=FLUSS:plaintext,KAFKA:sasl",
            "security.sasl.plain.credentials=writer:secret",
            "security.login.failure-delay=1s",
            "security.login.max-failure-delay=1s",
        ],
    );
    let kafka = server.kafka;
    let (code, _, _) = attempt(kafka, WRONG);
    assert_eq!(code, ErrorCode::SaslAuthenticationFailed);
    for _ in 0..20 {
        send_login(&mut handshaken(kafka), 8, "guesser", WRONG);
        // Closed without waiting for the answer.
    }
    // Every guess took a turn (each waited), then its connection closed.
    let deadline = Instant::now() + Duration::from_secs(30);
    while metric(&server, "kafluss_login_delayed_total") < 20 {
        assert!(
            Instant::now() < deadline,
            "the 20 guesses never waited for their turns"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));

    let (code, sent, answered) = attempt(kafka, "secret");
    assert_eq!(code, ErrorCode::None);
    let waited = answered - sent;
    assert!(
        waited < Duration::from_secs(8),
        "the right password was answered {waited:?} after it was sent: the abandoned guesses kept their turns"
    );
    assert_eq!(
        metric(&server, "kafluss_login_failures_total"),
        1,
        "the abandoned guesses were never checked"
    );
}

/// Reads one response frame and decodes it as `R` of `version`: its correlation id and body.
fn read_answer<R: Message>(stream: &mut TcpStream, version: i16) -> (i32, R) {
    let mut prefix = [0u8; 4];
    stream.read_exact(&mut prefix).expect("an answer");
    let mut body = vec![0u8; i32::from_be_bytes(prefix) as usize];
    stream.read_exact(&mut body).expect("an answer");
    let (header, answer) = decode_response_frame::<R>(&Bytes::from(body), version).expect("decode");
    (header.correlation_id, answer)
}

/// A client that sends its requests right behind a login the throttle holds back is served
/// once the login is answered, as an authenticated connection: the requests are not dispatched
/// in the state before it (a Metadata request there closed the connection unanswered, a second
/// SaslAuthenticate was refused with ILLEGAL_SASL_STATE).
#[test]
fn requests_pipelined_behind_a_held_back_login_are_served_after_it() {
    let server = Server::start(
        1,
        &[
            "security.protocol.map=FLUSS:plaintext,KAFKA:sasl",
            "security.sasl.plain.credentials=writer:secret",
            "security.login.failure-delay=300ms",
            "security.login.max-failure-delay=300ms",
        ],
    );
    let kafka = server.kafka;
    let (code, _, _) = attempt(kafka, WRONG);
    assert_eq!(code, ErrorCode::SaslAuthenticationFailed);

    let mut stream = handshaken(kafka);
    let mut frames = BytesMut::new();
    let login = SaslAuthenticateRequest {
        auth_bytes: Bytes::from_static(b"\0writer\0secret"),
    };
    let header = RequestHeader::new(SaslAuthenticateRequest::API_KEY, 2, 8, Some("pipeliner"));
    encode_request_frame(&mut frames, &header, &login).expect("encode");
    let metadata = MetadataRequest {
        topics: None,
        allow_auto_topic_creation: false,
        include_cluster_authorized_operations: false,
        include_topic_authorized_operations: false,
        unknown_tagged_fields: Vec::new(),
    };
    let header = RequestHeader::new(MetadataRequest::API_KEY, 9, 9, Some("pipeliner"));
    encode_request_frame(&mut frames, &header, &metadata).expect("encode");
    stream.write_all(&frames).expect("send both at once");

    let (correlation, answer) = read_answer::<SaslAuthenticateResponse>(&mut stream, 2);
    assert_eq!(correlation, 8);
    assert_eq!(answer.error_code, ErrorCode::None, "{:?}", answer.error_message);
    let (correlation, answer) = read_answer::<MetadataResponse>(&mut stream, 9);
    assert_eq!(
        correlation, 9,
        "the Metadata request behind the login is answered"
    );
    assert_eq!(answer.brokers.len(), 1, "{answer:?}");
}

/// A login waiting behind guesses whose clients close before their turns moves up: its turn
/// is worked out again without them and its waiter is woken, instead of sleeping the wait it
/// was given when it was queued. Six connections from one address send a wrong password for
/// `writer` after one failure (their turns 1, 3, 7, 11, 15, 19 s after it with
/// `security.login.failure-delay=1s` and `max-failure-delay=4s`), the right password is
/// queued behind them (23 s), then the six close: the right password is answered within 6 s
/// of being sent (a wait of about 23 s when a queued attempt keeps the turn it was given).
#[test]
fn a_login_queued_behind_closed_guesses_moves_up() {
    let server = Server::start(
        2,
        &[
            "security.protocol.map=FLUSS:plaintext,KAFKA:sasl",
            "security.sasl.plain.credentials=writer:secret",
            "security.login.failure-delay=1s",
            "security.login.max-failure-delay=4s",
        ],
    );
    let kafka = server.kafka;
    let delayed_reach = |count: u64| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while metric(&server, "kafluss_login_delayed_total") < count {
            assert!(
                Instant::now() < deadline,
                "fewer than {count} logins waited for their turns"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let mut guesses: Vec<TcpStream> = (0..6).map(|_| handshaken(kafka)).collect();
    let mut good = handshaken(kafka);
    let (code, _, _) = attempt(kafka, WRONG);
    assert_eq!(code, ErrorCode::SaslAuthenticationFailed);
    let send = |stream: &mut TcpStream, password: &str| send_login(stream, 8, "queued", password);
    for stream in &mut guesses {
        send(stream, WRONG);
    }
    delayed_reach(6);
    send(&mut good, "secret");
    let sent = Instant::now();
    delayed_reach(7);
    drop(guesses);

    let (_, answer) = read_answer::<SaslAuthenticateResponse>(&mut good, 2);
    let waited = sent.elapsed();
    assert_eq!(answer.error_code, ErrorCode::None, "{:?}", answer.error_message);
    assert!(
        waited < Duration::from_secs(6),
        "the right password was answered {waited:?} after it was sent: it kept the turn it was \
         given behind the six guesses that closed (23 s)"
    );
}
