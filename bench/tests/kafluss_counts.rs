//! Against the real kafluss binary (built by `kafluss_tests::server` when missing, or
//! `KAFLUSS_BIN`): every record the harness counts as acknowledged is a row a scan reads back,
//! and the latency histograms hold one sample per acknowledged request and record.

use std::collections::BTreeSet;
use std::time::Duration;

use kafluss_bench::values::{table_sql, ValueKind};
use kafluss_bench::{producer, StopAfter, Workload};
use kafluss_protocol::Compression;
use kafluss_tests::server::{KaflussServer, ServerConfig};

const SCAN_TIMEOUT: Duration = Duration::from_secs(60);

fn workload(topic: &str, value_kind: ValueKind, records: u64) -> Workload {
    Workload {
        topic: topic.into(),
        connections: 2,
        inflight: 4,
        batch_records: 50,
        linger: None,
        acks: 1,
        compression: Compression::Lz4,
        value_kind,
        message_size: 100,
        key_size: 8,
        headers: 1,
        rate: None,
        stop: StopAfter::Records(records),
        sasl: None,
        distinct_requests: 4,
        idle_connections: 0,
        io_timeout: Duration::from_secs(30),
        progress: false,
        warmup: Duration::ZERO,
        slow_threshold: Duration::from_millis(50),
    }
}

#[test]
fn every_acknowledged_flat_json_record_is_a_stored_row() {
    let server = KaflussServer::start(ServerConfig::plaintext()).expect("kafluss starts");
    server
        .sql(&table_sql("fluss.bench_flat", ValueKind::JsonFlat, 2, true, true))
        .expect("table created");
    let records = 1_037;
    let result = producer::run(
        &server.kafka_bootstrap(),
        &workload("bench_flat", ValueKind::JsonFlat, records),
        None,
    )
    .expect("run succeeds");
    assert!(
        result.errors.is_empty(),
        "{:?} {:?}",
        result.errors,
        result.first_error
    );
    assert_eq!(result.records_acked, records);
    assert_eq!(result.request_latency.len(), result.requests_acked);
    assert_eq!(result.record_latency.len(), result.records_acked);

    let rows = server
        .scan_until("fluss.bench_flat", records as usize, SCAN_TIMEOUT)
        .expect("rows stored");
    assert_eq!(
        rows.len() as u64,
        records,
        "no more rows than acknowledged records either"
    );
    let buckets: BTreeSet<u32> = rows.iter().map(|row| row.bucket).collect();
    assert_eq!(buckets, BTreeSet::from([0, 1]), "one connection per partition");
    for row in &rows {
        assert!(row.row.get("id").is_some_and(|id| id.is_i64()), "{:?}", row.row);
        assert!(row.row.get("_kafka_key").is_some_and(|key| key.is_string()));
    }
}

#[test]
fn every_acknowledged_binary_record_is_a_stored_row_with_acks_all() {
    let server = KaflussServer::start(ServerConfig::plaintext()).expect("kafluss starts");
    server
        .sql(&table_sql(
            "fluss.bench_binary",
            ValueKind::Random,
            1,
            false,
            false,
        ))
        .expect("table created");
    let mut workload = workload("bench_binary", ValueKind::Random, 2_000);
    workload.acks = -1;
    workload.key_size = 0;
    workload.headers = 0;
    workload.message_size = 1024;
    let result = producer::run(&server.kafka_bootstrap(), &workload, None).expect("run succeeds");
    assert!(
        result.errors.is_empty(),
        "{:?} {:?}",
        result.errors,
        result.first_error
    );
    assert_eq!(result.records_acked, 2_000);
    assert_eq!(result.request_latency.len(), result.requests_acked);
    let rows = server
        .scan_until("fluss.bench_binary", 2_000, SCAN_TIMEOUT)
        .expect("rows stored");
    assert_eq!(rows.len(), 2_000);
}

#[test]
fn sasl_plain_runs_authenticate_and_a_wrong_password_is_refused() {
    let server =
        KaflussServer::start(ServerConfig::sasl_plain(&[("writer", "change-me")])).expect("kafluss starts");
    server
        .sql(&table_sql(
            "fluss.bench_sasl",
            ValueKind::JsonFlat,
            1,
            false,
            false,
        ))
        .expect("table created");
    let mut workload = workload("bench_sasl", ValueKind::JsonFlat, 300);
    workload.key_size = 0;
    workload.headers = 0;
    workload.sasl = Some(("writer".into(), "change-me".into()));
    let result = producer::run(&server.kafka_bootstrap(), &workload, None).expect("authenticated run");
    assert!(
        result.errors.is_empty(),
        "{:?} {:?}",
        result.errors,
        result.first_error
    );
    assert_eq!(result.records_acked, 300);
    let rows = server
        .scan_until("fluss.bench_sasl", 300, SCAN_TIMEOUT)
        .expect("rows stored");
    assert_eq!(rows.len(), 300);

    workload.sasl = Some(("writer".into(), "wrong".into()));
    let error = producer::run(&server.kafka_bootstrap(), &workload, None).expect_err("bad password");
    assert!(
        error.to_string().contains("SASL_AUTHENTICATION_FAILED"),
        "{error}"
    );
}
