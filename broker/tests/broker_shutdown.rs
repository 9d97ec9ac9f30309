//! Graceful shutdown under load: SIGTERM while a client pipelines produce requests and reads
//! the answers a little behind (as a busy client does). Every request the server read is
//! answered, and the connection ends with a FIN after the last answer, never with a reset: a
//! reset makes the client's kernel drop answers that arrived but were not read yet, so the
//! client would see a transport error for records that were stored. The test checks that the
//! acknowledged records are exactly the stored ones. A client that stops reading its answers
//! holds the shutdown for at most `kafka.shutdown-timeout`.

#[path = "broker_support.rs"]
mod support;

use std::collections::{BTreeSet, HashMap};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafluss_protocol::{
    decode_response_frame, encode_request_frame, Compression, ErrorCode, Message, ProduceRequest,
    ProduceResponse, RecordBatchBuilder, RequestHeader,
};
use support::Server;

const VERSION: i16 = 7;

fn produce_frame(correlation: i32, value: &str) -> BytesMut {
    let mut builder = RecordBatchBuilder::new(Compression::None);
    builder.append(1_700_000_000_000, None, Some(value.as_bytes()), &[]);
    let request = support::produce_request(1, "fluss.t", 0, builder.build().expect("batch"));
    let header = RequestHeader::new(ProduceRequest::API_KEY, VERSION, correlation, Some("t"));
    let mut frame = BytesMut::new();
    encode_request_frame(&mut frame, &header, &request).expect("encode");
    frame
}

fn read_frame(stream: &mut TcpStream) -> std::io::Result<Bytes> {
    let mut prefix = [0u8; 4];
    stream.read_exact(&mut prefix)?;
    let mut body = vec![0u8; i32::from_be_bytes(prefix) as usize];
    stream.read_exact(&mut body)?;
    Ok(Bytes::from(body))
}

#[test]
fn sigterm_under_load_answers_every_request_it_read() {
    let mut server = Server::start(2, &[]);
    server.sql_ok(
        "CREATE TABLE fluss.t (_kafka_value STRING) WITH ('table.kafka.enabled' = 'true', 'table.kafka.convert.value.type' = 'string')",
    );
    let stream = TcpStream::connect_timeout(&server.kafka, Duration::from_secs(10)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let done = Arc::new(AtomicBool::new(false));
    // correlation id → the value (an id) its record carries
    let sent: Arc<Mutex<HashMap<i32, u64>>> = Arc::default();

    let sender = {
        let mut stream = stream.try_clone().expect("clone");
        let (done, sent) = (done.clone(), sent.clone());
        std::thread::spawn(move || {
            let started = Instant::now();
            let mut id = 0u64;
            while !done.load(Ordering::SeqCst) && started.elapsed() < Duration::from_secs(60) {
                let correlation = i32::try_from(id + 1).expect("fits");
                sent.lock().unwrap().insert(correlation, id);
                if stream
                    .write_all(&produce_frame(correlation, &id.to_string()))
                    .is_err()
                {
                    break;
                }
                id += 1;
            }
            id
        })
    };
    let reader = {
        let mut stream = stream.try_clone().expect("clone");
        let (done, sent) = (done.clone(), sent.clone());
        std::thread::spawn(move || {
            let mut acked = BTreeSet::new();
            let end = loop {
                let frame = match read_frame(&mut stream) {
                    Ok(frame) => frame,
                    Err(e) => break e.kind(),
                };
                let (header, response) =
                    decode_response_frame::<ProduceResponse>(&frame, VERSION).expect("a produce response");
                let partition = &response.topics[0].partitions[0];
                if partition.error_code == ErrorCode::None {
                    acked.insert(sent.lock().unwrap()[&header.correlation_id]);
                }
                // A client that reads a little behind: answers queue up in its socket.
                if acked.len() % 64 == 0 {
                    std::thread::sleep(Duration::from_millis(2));
                }
            };
            done.store(true, Ordering::SeqCst);
            let _ = stream.shutdown(std::net::Shutdown::Both);
            (acked, end)
        })
    };

    // SIGTERM mid-stream.
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let (_, body) = server.get("/v1/tables/fluss.t");
        let rows = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["buckets"][0]["rows"].as_u64())
            .unwrap_or(0);
        if rows >= 5_000 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = server.terminate();
    assert!(
        status.is_some_and(|s| s.success()),
        "clean exit on SIGTERM: {status:?}"
    );
    let sent_count = sender.join().expect("sender");
    let (acked, end) = reader.join().expect("reader");
    assert_eq!(
        end,
        std::io::ErrorKind::UnexpectedEof,
        "the connection ends with a FIN after the last answer, not a reset ({} answers read, {sent_count} sent)",
        acked.len()
    );

    let restarted = Server::start_in(&server.data_dir.clone(), 1, &[]);
    let stored: BTreeSet<u64> = restarted
        .scan("fluss.t")
        .iter()
        .map(|r| {
            r["row"]["_kafka_value"]
                .as_str()
                .expect("value")
                .parse()
                .expect("an id")
        })
        .collect();
    assert!(stored.len() >= 5_000, "{} rows stored", stored.len());
    let lost: Vec<_> = acked.difference(&stored).take(5).collect();
    assert!(lost.is_empty(), "acknowledged but not stored: {lost:?}");
    let unanswered = stored.difference(&acked).count();
    assert_eq!(
        unanswered,
        0,
        "stored, but the client never read an answer ({} acknowledged, {} stored, {sent_count} sent)",
        acked.len(),
        stored.len()
    );
}

const SPREAD: &str = r#"
import sys
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "enable.idempotence": False, "acks": "1",
              "linger.ms": 5, "queue.buffering.max.messages": 1000000})
pad = "x" * 300
for i in range(60000):
    while True:
        try:
            p.produce("big", ("{\"v\":\"%d-%s\"}" % (i, pad)).encode(), partition=i % 64)
            break
        except BufferError:
            p.poll(0.01)
assert p.flush(60) == 0
"#;

/// SIGTERM while a DROP TABLE of 64 buckets waits for the cores to close its logs: the DROP is
/// answered, its directory removed, and the server exits at once. The cores' DROP tasks were
/// left behind at shutdown, so the DROP waited until `admin.shutdown-timeout` (20 s here), its
/// client saw the connection end, and the directory stayed.
#[test]
fn sigterm_during_a_drop_answers_it_and_exits_promptly() {
    let mut server = Server::start(2, &["admin.shutdown-timeout=20s"]);
    server.sql_ok(
        "CREATE TABLE fluss.big (v STRING) WITH ('table.kafka.enabled' = 'true', 'bucket.num' = '64')",
    );
    support::python_ok(SPREAD, &[&server.bootstrap()]);
    let fluss = server.fluss;
    let table_dir = server.data_dir.join("fluss").join(
        server
            .table_dirs("fluss", "big-")
            .pop()
            .expect("the table's directory"),
    );
    let drop = std::thread::spawn(move || support::http(fluss, "POST", "/v1/sql", b"DROP TABLE fluss.big"));
    // The catalog publishes the DROP before the cores close the table's logs: SIGTERM then.
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.get("/v1/tables/fluss.big").0 != 404 {
        assert!(Instant::now() < deadline, "the DROP never reached the catalog");
        std::thread::sleep(Duration::from_millis(1));
    }
    let started = Instant::now();
    let status = server.terminate().expect("the server exits");
    let took = started.elapsed();
    assert!(status.success(), "{status:?}");
    let (code, body) = drop.join().unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(
        took < Duration::from_secs(10),
        "exited {took:?} after SIGTERM (admin.shutdown-timeout is 20 s)\n{}",
        server.logs()
    );
    assert!(!table_dir.exists(), "{} stays", table_dir.display());
}

/// A Kafka client that stops reading: DeleteTopics requests naming 4,000 topics (answers of
/// about 200 KB, every name echoed back) written into a connection with a 4 KiB receive buffer
/// until the server reads no more of them (its in-flight window full behind answers it cannot
/// write) for 2 s. The connection is returned open, its answers unread.
fn client_that_stopped_reading(kafka: SocketAddr) -> TcpStream {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&kafka.into()).unwrap();
    let mut stream: TcpStream = socket.into();
    stream.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    let request = {
        let header = RequestHeader::new(kafluss_protocol::ApiKey::DELETE_TOPICS, 5, 1, Some("stuck"));
        let topics = (0..4000)
            .map(|i| kafluss_protocol::DeleteTopicState {
                name: Some(format!("{}{i}", "n".repeat(40))),
                topic_id: kafluss_protocol::Uuid::ZERO,
            })
            .collect();
        let body = kafluss_protocol::DeleteTopicsRequest {
            topics,
            timeout_ms: 1000,
        };
        let mut frame = BytesMut::new();
        encode_request_frame(&mut frame, &header, &body).expect("encode");
        frame.freeze()
    };
    for _ in 0..200 {
        if stream.write_all(&request).is_err() {
            return stream;
        }
    }
    panic!("the server read 200 requests of a client that reads no answer");
}

/// SIGTERM while a client reads none of its answers: the server waits
/// `kafka.shutdown-timeout` (1 s here) for them, closes that connection (logged, with the count
/// of answers not written) and exits 0, though `kafka.connection.max-idle-time` is 10 min.
/// Before, the shutdown waited for the idle time: the server was killed 30 s after SIGTERM.
#[test]
fn a_client_that_reads_no_answers_holds_the_shutdown_for_the_kafka_shutdown_timeout() {
    let mut server = Server::start(1, &["kafka.shutdown-timeout=1s"]);
    let stuck = client_that_stopped_reading(server.kafka);
    let started = Instant::now();
    let status = server.terminate();
    let took = started.elapsed();
    let logs = server.logs();
    assert!(
        status.is_some_and(|s| s.success()),
        "exit 0 after SIGTERM: {status:?} after {took:?}\n{logs}"
    );
    assert!(
        took < Duration::from_secs(10),
        "exited {took:?} after SIGTERM\n{logs}"
    );
    assert!(
        logs.contains("closing Kafka connection at shutdown: its answers were not read within kafka.shutdown-timeout (1s)"),
        "{logs}"
    );
    assert!(
        logs.contains("shutdown closed 1 Kafka connections with"),
        "{logs}"
    );
    assert!(logs.contains("shutdown complete"), "{logs}");
    drop(stuck);
}

/// While the shutdown waits for a client that reads no answers (`kafka.shutdown-timeout=60s`
/// here; new Kafka connections are refused meanwhile), `/healthz` answers 503 "shutting down";
/// once that client goes away the server exits 0. Before, `/healthz` answered 200 throughout.
#[test]
fn healthz_answers_503_while_the_server_shuts_down() {
    let mut server = Server::start(1, &["kafka.shutdown-timeout=60s"]);
    assert_eq!(server.get("/healthz").0, 200);
    let stuck = client_that_stopped_reading(server.kafka);
    server.begin_terminate();
    assert!(
        server.log_shows("shutting down", Duration::from_secs(10)),
        "{}",
        server.logs()
    );
    assert_eq!(
        server.get("/healthz"),
        (503, "shutting down\n".to_string()),
        "{}",
        server.logs()
    );
    drop(stuck);
    let status = server.wait_exit(Duration::from_secs(30));
    assert!(
        status.is_some_and(|s| s.success()),
        "{status:?}\n{}",
        server.logs()
    );
}
