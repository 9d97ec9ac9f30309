//! Apache Kafka's own tools against kafluss: `kafka-producer-perf-test`
//! (`org.apache.kafka.tools.ProducerPerformance` from kafka-tools 4.4.0, Maven Central) with the
//! producer's default settings (idempotent, acks=all) completes, and kafluss then holds every
//! record, counted through the scan. The same command runs first against a real Apache Kafka
//! broker, so a failure against kafluss is kafluss's.

use std::time::Duration;

use kafluss_tests::kafka::{self, run_tool, KafkaBroker};
use kafluss_tests::process::tail;
use kafluss_tests::server::{KaflussServer, ServerConfig};
use kafluss_tests::tables::ValueMode;

/// Records the tool sends: a few batches per bucket at its defaults, small enough to scan.
const RECORDS: usize = 20_000;
const RECORD_SIZE: usize = 100;
const BUCKETS: u32 = 2;
/// Bound on one run of the tool (it takes a few seconds).
const TOOL_TIMEOUT: Duration = Duration::from_secs(180);
const ROWS_VISIBLE_TIMEOUT: Duration = Duration::from_secs(30);

/// `kafka-producer-perf-test --topic T --num-records N --record-size B --throughput -1
/// --command-property bootstrap.servers=...`: nothing but the bootstrap is set. Returns its last
/// line, the summary.
fn perf_test(bootstrap: &str, topic: &str) -> Result<String, String> {
    let records = RECORDS.to_string();
    let size = RECORD_SIZE.to_string();
    let bootstrap = format!("bootstrap.servers={bootstrap}");
    let done = run_tool(
        "org.apache.kafka.tools.ProducerPerformance",
        &[
            "--topic",
            topic,
            "--num-records",
            &records,
            "--record-size",
            &size,
            "--throughput",
            "-1",
            "--command-property",
            &bootstrap,
        ],
        TOOL_TIMEOUT,
    )
    .map_err(|error| error.to_string())?;
    let stdout = done.stdout_text();
    let summary = stdout.lines().last().unwrap_or_default().to_owned();
    if !summary.starts_with(&format!("{RECORDS} records sent")) {
        return Err(format!(
            "unexpected output:\n{}\nstderr:\n{}",
            tail(&stdout, 2000),
            tail(&done.stderr_text(), 2000)
        ));
    }
    Ok(summary)
}

#[test]
fn producer_perf_test_with_default_settings() {
    if !kafka::available() {
        return;
    }
    let broker = KafkaBroker::start().unwrap_or_else(|error| panic!("{error}"));
    broker
        .create_topic("perf", BUCKETS)
        .unwrap_or_else(|error| panic!("{error}"));
    let on_kafka = perf_test(broker.bootstrap(), "perf")
        .unwrap_or_else(|error| panic!("against Apache Kafka: {error}\n{}", broker.log_tail()));
    drop(broker);
    println!("Apache Kafka: {on_kafka}");

    let server = KaflussServer::start(ServerConfig::plaintext()).unwrap_or_else(|e| panic!("{e}"));
    let table = "perf.records";
    for sql in [
        "CREATE DATABASE perf".to_owned(),
        ValueMode::Binary.create_table_sql(table, BUCKETS),
    ] {
        server.sql(&sql).unwrap_or_else(|error| panic!("{error}"));
    }
    let on_kafluss = perf_test(&server.kafka_bootstrap(), table)
        .unwrap_or_else(|error| panic!("against kafluss: {error}\n{}", server.log_tail()));
    println!("kafluss: {on_kafluss}");
    let rows = server
        .scan_until(table, RECORDS, ROWS_VISIBLE_TIMEOUT)
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(rows.len(), RECORDS, "kafluss holds {} rows", rows.len());
    // Every bucket's offsets are contiguous from 0: nothing stored twice, nothing skipped.
    for bucket in 0..BUCKETS {
        let offsets: Vec<i64> = rows
            .iter()
            .filter(|row| row.bucket == bucket)
            .map(|row| row.offset)
            .collect();
        let expected: Vec<i64> = (0..offsets.len() as i64).collect();
        assert_eq!(offsets, expected, "bucket {bucket}'s offsets");
    }
}
