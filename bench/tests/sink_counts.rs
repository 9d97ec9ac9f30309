//! Against the null sink: every record the harness counts as acknowledged was counted by the
//! sink, and the latency histograms hold exactly one sample per acknowledged request / record.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use kafluss_bench::sink::{self, SinkHandle};
use kafluss_bench::values::ValueKind;
use kafluss_bench::{producer, RunResult, StopAfter, Workload};
use kafluss_protocol::Compression;

fn workload(stop: StopAfter) -> Workload {
    Workload {
        topic: "bench.counts".into(),
        connections: 3,
        inflight: 4,
        batch_records: 100,
        linger: None,
        acks: 1,
        compression: Compression::None,
        value_kind: ValueKind::JsonFlat,
        message_size: 100,
        key_size: 8,
        headers: 1,
        rate: None,
        stop,
        sasl: None,
        distinct_requests: 4,
        idle_connections: 0,
        io_timeout: Duration::from_secs(10),
        progress: false,
        warmup: Duration::ZERO,
        slow_threshold: Duration::from_millis(50),
    }
}

fn start_sink(partitions: u32) -> SinkHandle {
    sink::start("127.0.0.1:0", partitions).expect("sink starts on loopback")
}

fn sink_records(sink: &SinkHandle) -> u64 {
    sink.stats().records.load(Ordering::SeqCst)
}

/// The invariants every acknowledged run must keep.
fn assert_accounting(result: &RunResult) {
    assert!(result.errors.is_empty(), "errors: {:?}", result.errors);
    assert_eq!(result.first_error, None);
    assert_eq!(result.request_latency.len(), result.requests_acked);
    assert_eq!(result.record_latency.len(), result.records_acked);
    assert_eq!(result.requests_acked, result.requests_sent);
    assert_eq!(result.records_acked, result.records_sent);
    let timeline_records: u64 = result.timeline.iter().map(|point| point.records).sum();
    assert_eq!(
        timeline_records, result.records_acked,
        "timeline covers every record"
    );
    let timeline_requests: u64 = result
        .timeline
        .iter()
        .filter_map(|point| point.latency)
        .map(|latency| latency.count)
        .sum();
    assert_eq!(
        timeline_requests, result.requests_acked,
        "timeline latency covers every request"
    );
    // This machine's /proc/stat has the steal field (Linux since 2.6.11): every run and every
    // second says how much of the machine a hypervisor took, so a tail can be told apart from
    // the server's own.
    assert!(result.steal_seconds.is_some_and(|steal| steal >= 0.0));
    assert!(result
        .timeline
        .iter()
        .all(|point| point.steal_ms.is_some_and(|steal| steal >= 0.0)));
}

#[test]
fn record_count_run_is_acknowledged_exactly_once_per_record() {
    let sink = start_sink(2);
    // 10,007 records over 3 connections: full requests of 100 plus a shorter tail on each.
    let result = producer::run(
        &sink.local_addr().to_string(),
        &workload(StopAfter::Records(10_007)),
        None,
    )
    .expect("run succeeds");
    assert_accounting(&result);
    assert_eq!(result.records_acked, 10_007);
    assert_eq!(sink_records(&sink), 10_007);
    assert_eq!(result.partitions, 2);
    assert_eq!(
        sink.stats().produce_requests.load(Ordering::SeqCst),
        result.requests_acked
    );
    assert!(result.payload_bytes_acked >= 10_007 * 100);
}

#[test]
fn duration_run_with_compression_and_sasl_matches_the_sink() {
    let sink = start_sink(1);
    let mut workload = workload(StopAfter::Duration(Duration::from_millis(700)));
    workload.compression = Compression::Zstd;
    workload.sasl = Some(("writer".into(), "secret".into()));
    workload.value_kind = ValueKind::Random;
    let started = Instant::now();
    let result = producer::run(&sink.local_addr().to_string(), &workload, None).expect("run succeeds");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_accounting(&result);
    assert!(result.records_acked > 0);
    assert_eq!(sink_records(&sink), result.records_acked);
}

#[test]
fn fixed_rate_run_keeps_its_schedule_and_measures_records_from_their_due_time() {
    let sink = start_sink(1);
    let mut workload = workload(StopAfter::Duration(Duration::from_secs(1)));
    workload.connections = 2;
    workload.rate = Some(4000.0);
    workload.linger = Some(Duration::from_millis(5));
    // 2000 records/s per connection, 5 ms linger: 10 records per request, 400 requests/s.
    assert_eq!(workload.records_per_request(), 10);
    let result = producer::run(&sink.local_addr().to_string(), &workload, None).expect("run succeeds");
    assert_accounting(&result);
    assert_eq!(result.records_acked, 4000, "one second at 4000 records/s");
    assert_eq!(sink_records(&sink), 4000);
    // A record waits for the batch to fill: the first of ten waited nine record spacings
    // (4.5 ms) more than its request, so record latency exceeds request latency.
    let min_record_wait = Duration::from_micros(4500).as_nanos() as u64;
    assert!(result.record_latency.max() >= min_record_wait);
    assert!(result.record_latency.mean() > result.request_latency.mean());
}

#[test]
fn acks_zero_counts_what_was_written_and_the_sink_sees_it_all() {
    let sink = start_sink(1);
    let mut workload = workload(StopAfter::Records(5_000));
    workload.acks = 0;
    let result = producer::run(&sink.local_addr().to_string(), &workload, None).expect("run succeeds");
    assert_eq!(result.records_sent, 5_000);
    assert_eq!(result.records_acked, 5_000);
    assert!(result.request_latency.is_empty(), "no answers, no latency");
    let deadline = Instant::now() + Duration::from_secs(10);
    while sink_records(&sink) < 5_000 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(sink_records(&sink), 5_000);
}

#[test]
fn idle_connections_stay_open_during_the_load() {
    let sink = start_sink(1);
    let mut workload = workload(StopAfter::Records(1_000));
    workload.idle_connections = 50;
    let result = producer::run(&sink.local_addr().to_string(), &workload, None).expect("run succeeds");
    assert_accounting(&result);
    assert_eq!(result.idle_connections_open, 50);
    assert_eq!(result.idle_connections_error, None);
    // The bootstrap look-up, the idle ones and the load connections.
    assert!(sink.stats().connections.load(Ordering::SeqCst) >= 1 + 50 + 3);
}

#[test]
fn server_cpu_is_measured_when_a_pid_is_given() {
    let sink = start_sink(1);
    let pid = std::process::id();
    let result = producer::run(
        &sink.local_addr().to_string(),
        &workload(StopAfter::Records(20_000)),
        Some(pid),
    )
    .expect("run succeeds");
    let server = result.server.expect("own pid is readable");
    assert_eq!(server.pid, pid);
    assert!(server.cpu_seconds >= 0.0);
    assert!(server.after.rss_kib > 0);
    assert!(result.server_cpu_per_million_records().is_some());
}

#[test]
fn an_unreachable_endpoint_is_an_error_not_a_hang() {
    // A port whose listener is gone refuses connections at once.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = listener.local_addr().unwrap();
    drop(listener);
    let started = Instant::now();
    let error = producer::run(&closed.to_string(), &workload(StopAfter::Records(10)), None)
        .expect_err("nothing listens there");
    assert!(error.to_string().contains(&closed.to_string()), "{error}");
    assert!(started.elapsed() < Duration::from_secs(10));
}
