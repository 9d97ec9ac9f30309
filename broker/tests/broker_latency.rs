//! Scheduling on a core, proven by order and by counts, never by timing: a big batch's
//! conversion gives the core to a waiting connection; an idle server's cores park (their
//! threads are not switched in over a quiet interval, counted by
//! `kafluss_core_context_switches_total`); a cross-core append after such a quiet interval is
//! answered, so the owner core was woken by the mesh and not by a ticker.

#[path = "broker_support.rs"]
mod support;

use std::io::Read;
use std::time::Duration;

use kafluss_protocol::{ApiVersionsRequest, ApiVersionsResponse, Compression, ErrorCode, RecordBatchBuilder};
use support::{produce_request, Raw, Server};

/// Records in the big batch (a 100,000-record batch converts for a long while, even in a
/// release build, compared to an ApiVersions round trip).
const BIG_BATCH: usize = 100_000;

/// How long the tests watch an idle server. Not a bound on anything: a core that parks shows
/// no context switch over any interval; one with a ticker shows one per tick.
const QUIET: Duration = Duration::from_secs(2);

fn batch(records: usize) -> bytes::Bytes {
    let mut builder = RecordBatchBuilder::new(Compression::None);
    for n in 0..records {
        let value = format!("{{\"n\": {n}}}");
        builder.append(1_700_000_000_000, None, Some(value.as_bytes()), &[]);
    }
    builder.build().expect("batch")
}

/// The core threads' context switches once two readings 200 ms apart agree (at most 5 s): an
/// append is answered before the helpers it started are done (a segment's preallocation and
/// write-back requests run on the blocking thread and wake the core once when they finish), so
/// a core may still wake for them just after the answers. A ticker of a shorter period never
/// settles, and one of a longer period fires within the quiet interval that follows.
fn settled_context_switches(server: &Server, cores: usize) -> Vec<u64> {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut last = context_switches(server, cores);
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let now = context_switches(server, cores);
        if now == last || std::time::Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

/// `kafluss_core_context_switches_total` of each core.
fn context_switches(server: &Server, cores: usize) -> Vec<u64> {
    let (status, metrics) = server.get("/metrics");
    assert_eq!(status, 200);
    (0..cores)
        .map(|core| {
            let prefix = format!("kafluss_core_context_switches_total{{core=\"{core}\"}} ");
            metrics
                .lines()
                .find_map(|line| line.strip_prefix(&prefix))
                .and_then(|value| value.trim().parse().ok())
                .unwrap_or_else(|| panic!("no {prefix}in\n{metrics}"))
        })
        .collect()
}

fn metric(server: &Server, name: &str) -> u64 {
    let (_, metrics) = server.get("/metrics");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{metrics}"))
}

/// Whether `raw` has bytes to read right now (without waiting).
fn has_answer(raw: &mut Raw) -> bool {
    raw.stream.set_nonblocking(true).expect("nonblocking");
    let mut byte = [0u8; 1];
    let ready = match raw.stream.peek(&mut byte) {
        Ok(n) => n > 0,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
        Err(e) => panic!("peek: {e}"),
    };
    raw.stream.set_nonblocking(false).expect("blocking");
    ready
}

#[test]
fn api_versions_is_answered_while_a_big_batch_converts() {
    let server = Server::start(1, &[]);
    server.sql_ok("CREATE TABLE fluss.big (n INT) WITH ('table.kafka.enabled' = 'true')");
    let mut producer = Raw::connect(server.kafka);
    let mut other = Raw::connect(server.kafka);
    // Opens the bucket, so the big batch below only converts and appends.
    let warm = producer.produce(7, &produce_request(1, "fluss.big", 0, batch(1)));
    assert_eq!(warm.topics[0].partitions[0].error_code, ErrorCode::None);

    let big = producer.send(7, &produce_request(1, "fluss.big", 0, batch(BIG_BATCH)));
    // The whole request is in the server's socket (or read) once `send` returns; ask the other
    // connection until the produce is answered, counting the answers that came before it.
    let mut answered_before = 0;
    for _ in 0..100_000 {
        let correlation = other.send(0, &ApiVersionsRequest::default());
        let versions: ApiVersionsResponse = other.recv(0, correlation);
        assert_eq!(versions.error_code, ErrorCode::None);
        if has_answer(&mut producer) {
            break;
        }
        answered_before += 1;
    }
    let response: kafluss_protocol::ProduceResponse = producer.recv(7, big);
    assert_eq!(response.topics[0].partitions[0].error_code, ErrorCode::None);
    assert!(
        answered_before >= 1,
        "ApiVersions on another connection waited for the whole conversion of {BIG_BATCH} records"
    );
    let mut rest = Vec::new();
    producer
        .stream
        .set_read_timeout(Some(Duration::from_millis(1)))
        .unwrap();
    let _ = producer.stream.read_to_end(&mut rest);
    assert!(rest.is_empty(), "one answer per request");
    assert_eq!(
        metric(&server, "kafluss_records_appended_total"),
        1 + BIG_BATCH as u64
    );
}

#[test]
fn an_idle_server_parks_and_a_cross_core_append_wakes_its_owner() {
    let server = Server::start(2, &[]);
    server.sql_ok(
        "CREATE TABLE fluss.spread (n INT) WITH ('table.kafka.enabled' = 'true', 'bucket.num' = '4')",
    );
    let mut raw = Raw::connect(server.kafka);
    for partition in 0..4 {
        let response = raw.produce(7, &produce_request(1, "fluss.spread", partition, batch(10)));
        assert_eq!(response.topics[0].partitions[0].error_code, ErrorCode::None);
    }
    // An open, idle connection and open buckets on both cores: once the work the appends left
    // behind is done, nothing is due and nothing runs.
    let before = settled_context_switches(&server, 2);
    std::thread::sleep(QUIET);
    let after = context_switches(&server, 2);
    assert_eq!(before, after, "an idle core was woken (a ticker?) over {QUIET:?}");

    let crossed = metric(&server, "kafluss_cross_core_appends_total");
    for partition in 0..4 {
        let response = raw.produce(7, &produce_request(1, "fluss.spread", partition, batch(10)));
        assert_eq!(response.topics[0].partitions[0].error_code, ErrorCode::None);
    }
    assert!(
        metric(&server, "kafluss_cross_core_appends_total") > crossed,
        "some batch crossed to its owner core, which was parked"
    );
    assert_eq!(metric(&server, "kafluss_records_appended_total"), 80);
}
