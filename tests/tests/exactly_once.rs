//! Exactly-once under faults: an idempotent acks=all producer that retries (the Java client,
//! franz-go and kafka-python with their default settings; librdkafka through confluent-kafka with
//! `enable.idempotence=true`)
//! sends numbered records to a 3-bucket table through the wire tap, which drops every 7th
//! Produce request's connection (alternately after forwarding the request whole, so kafluss
//! appends a batch whose answer the client never gets and must retry, and half-way through
//! it); mid-run the server is SIGKILLed and started again on the same data directory. Then
//! every acknowledged record must be stored exactly once, each bucket holding its ids in the
//! order they were sent. The test counts duplicates and asserts there are none. It runs once
//! through the table's full name, and once through both its names record by record (the table
//! `eos.<client>` is also `<client>` with `kafka.default.database=eos`).

use std::collections::BTreeMap;
use std::thread;
use std::time::{Duration, Instant};

use serde::Deserialize;

use kafluss_tests::clients::{self, exactly_once_command, Client};
use kafluss_tests::process::{run_with_timeout, tail};
use kafluss_tests::server::{KaflussServer, ServerConfig};
use kafluss_tests::tables::ValueMode;
use kafluss_tests::wire_tap::WireTap;

const PARTITIONS: u32 = 3;
/// Records sent; the producer paces them at 1,000/s, so the run lasts a few seconds.
const RECORDS: u32 = 4_000;
/// Every n-th Produce request loses its connection.
const CUT_EVERY: u64 = 7;
/// The server is killed once this many Produce requests went through the tap: 40 for the
/// Java client and librdkafka, 20 for franz-go and kafka-python, which put more records in a
/// request (their whole runs made 45-94 requests; one that ends before the kill fails).
fn kill_after_requests(client: Client) -> u64 {
    match client {
        Client::FranzGo | Client::KafkaPython => 20,
        _ => 40,
    }
}
/// Bounds: the whole producer run, and waiting for the run to reach the kill point.
const PRODUCER_TIMEOUT: Duration = Duration::from_secs(300);
const MID_RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// What the producer printed.
#[derive(Debug, Deserialize)]
struct Outcome {
    acked: Vec<u64>,
    failed: u64,
    errors: Vec<String>,
}

/// Which topic names the producer writes the table through.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Names {
    /// `eos.<client>` only.
    Full,
    /// Record by record, `eos.<client>` and `<client>` (the server's `kafka.default.database`
    /// is `eos`): to the client two topics, each with its own idempotent sequences and its own
    /// topic id, into the same buckets.
    Both,
}

fn exactly_once_under_faults(client: Client, names: Names) {
    if !clients::available(client) {
        return;
    }
    let tap = WireTap::start().unwrap_or_else(|error| panic!("wire tap: {error}"));
    let data = tempfile::tempdir().unwrap_or_else(|error| panic!("{error}"));
    // Every connection of the producer goes through the tap: it is the advertised listener.
    let config = ServerConfig::plaintext()
        .with("advertised.listeners", &format!("KAFKA://{}", tap.addr()))
        .with("kafka.default.database", "eos");
    let mut server = KaflussServer::start_in(data.path(), config.clone()).unwrap_or_else(|e| panic!("{e}"));
    tap.set_upstream(server.kafka_addr());
    let table = format!("eos.{}", client.slug());
    let topics = match names {
        Names::Full => table.clone(),
        Names::Both => format!("{table},{}", client.slug()),
    };
    let name_count = if names == Names::Both { 2 } else { 1 };
    for sql in [
        "CREATE DATABASE IF NOT EXISTS eos".to_owned(),
        ValueMode::String.create_table_sql(&table, PARTITIONS),
    ] {
        server.sql(&sql).unwrap_or_else(|error| panic!("{error}"));
    }

    tap.cut_produce_every(CUT_EVERY);
    let mut command = exactly_once_command(client, &tap.addr().to_string(), &topics, PARTITIONS, RECORDS)
        .expect("a producer for this client")
        .unwrap_or_else(|error| panic!("{error}"));
    let producer = thread::spawn(move || run_with_timeout(&mut command, b"", PRODUCER_TIMEOUT));

    // Mid-run: once requests flow (and some connections were cut), a crash and a restart.
    let started = Instant::now();
    let kill_after = kill_after_requests(client);
    while tap.produce_requests() < kill_after
        && !producer.is_finished()
        && started.elapsed() < MID_RUN_TIMEOUT
    {
        thread::sleep(Duration::from_millis(5));
    }
    if producer.is_finished() {
        let early = match producer.join().expect("the producer thread") {
            Ok(done) => format!(
                "exit {}:\n{}\n{}",
                done.status,
                tail(&done.stdout_text(), 2000),
                tail(&done.stderr_text(), 3000)
            ),
            Err(error) => error.to_string(),
        };
        panic!(
            "the producer ended after {} Produce requests, before the server was killed: {early}",
            tap.produce_requests()
        );
    }
    assert!(
        tap.produce_requests() >= kill_after,
        "only {} Produce requests in {MID_RUN_TIMEOUT:?}\n{}",
        tap.produce_requests(),
        server.log_tail()
    );
    server.kill();
    let killed_at = tap.produce_requests();
    server = KaflussServer::start_in(data.path(), config).unwrap_or_else(|e| panic!("{e}"));
    tap.set_upstream(server.kafka_addr());

    let done = producer
        .join()
        .expect("the producer thread")
        .unwrap_or_else(|error| panic!("{error}"));
    let stdout = done.stdout_text();
    assert!(
        done.status.success(),
        "producer exited with {}:\n{}\n{}",
        done.status,
        tail(&stdout, 2000),
        tail(&done.stderr_text(), 3000)
    );
    let outcome: Outcome = stdout
        .lines()
        .last()
        .and_then(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| panic!("no outcome line from the producer:\n{}", tail(&stdout, 2000)));
    assert!(tap.cuts() > 0, "no connection was cut");

    let rows = server.scan(&table).unwrap_or_else(|error| panic!("{error}"));
    // Each id with how often it is stored, and each bucket's ids in offset order.
    let mut stored: BTreeMap<u64, usize> = BTreeMap::new();
    // Ids in send order per bucket and name (two names are two topics to the client: their
    // batches may interleave in any order).
    let mut buckets: BTreeMap<(u32, u64), Vec<(i64, u64)>> = BTreeMap::new();
    for row in &rows {
        let id: u64 = row.row["_kafka_value"]
            .as_str()
            .and_then(|text| text.parse().ok())
            .unwrap_or_else(|| panic!("a row that is not one of the producer's: {row:?}"));
        assert!(id < u64::from(RECORDS), "an id never sent: {row:?}");
        assert_eq!(
            row.bucket,
            u32::try_from(id % u64::from(PARTITIONS)).unwrap(),
            "id {id} in the wrong bucket"
        );
        *stored.entry(id).or_default() += 1;
        buckets
            .entry((row.bucket, id % name_count))
            .or_default()
            .push((row.offset, id));
    }
    let duplicates: usize = stored.values().map(|count| count - 1).sum();
    let twice: Vec<u64> = stored
        .iter()
        .filter(|(_, count)| **count > 1)
        .map(|(id, _)| *id)
        .take(20)
        .collect();
    let missing: Vec<u64> = outcome
        .acked
        .iter()
        .filter(|id| !stored.contains_key(id))
        .copied()
        .collect();
    println!(
        "{client:?} ({names:?} names): {} acknowledged, {} failed, {} rows stored, {duplicates} \
         duplicates, {} missing; {} connections cut, server killed after {killed_at} of {} Produce \
         requests",
        outcome.acked.len(),
        outcome.failed,
        rows.len(),
        missing.len(),
        tap.cuts(),
        tap.produce_requests()
    );
    assert_eq!(
        duplicates, 0,
        "{duplicates} duplicate rows, ids stored more than once (first 20): {twice:?}"
    );
    assert!(
        missing.is_empty(),
        "{} acknowledged records are not stored, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(20)]
    );
    for ((bucket, _), mut ids) in buckets {
        ids.sort_unstable();
        let out_of_order = ids.windows(2).find(|pair| pair[0].1 >= pair[1].1);
        assert!(
            out_of_order.is_none(),
            "bucket {bucket} holds ids out of send order: (offset, id) {out_of_order:?}"
        );
    }
    assert!(
        outcome.failed == 0 && outcome.acked.len() == RECORDS as usize,
        "{} of {RECORDS} acknowledged, {} failed: {:?}",
        outcome.acked.len(),
        outcome.failed,
        outcome.errors
    );
}

#[test]
fn java_idempotent_producer_under_faults() {
    exactly_once_under_faults(Client::Java4, Names::Full);
}

#[test]
fn librdkafka_idempotent_producer_under_faults() {
    exactly_once_under_faults(Client::ConfluentKafka, Names::Full);
}

#[test]
fn franz_go_idempotent_producer_under_faults() {
    exactly_once_under_faults(Client::FranzGo, Names::Full);
}

#[test]
fn kafka_python_idempotent_producer_under_faults() {
    exactly_once_under_faults(Client::KafkaPython, Names::Full);
}

/// The same through both names of the table, record by record. Before, the second name's
/// batches matched the first name's cached ones (the client numbers each topic from 0): half
/// the records were acknowledged and never stored, and the Java client's sender stopped on
/// one topic id for two names.
#[test]
fn java_idempotent_producer_through_both_names_under_faults() {
    exactly_once_under_faults(Client::Java4, Names::Both);
}

#[test]
fn librdkafka_idempotent_producer_through_both_names_under_faults() {
    exactly_once_under_faults(Client::ConfluentKafka, Names::Both);
}

#[test]
fn franz_go_idempotent_producer_through_both_names_under_faults() {
    exactly_once_under_faults(Client::FranzGo, Names::Both);
}

#[test]
fn kafka_python_idempotent_producer_through_both_names_under_faults() {
    exactly_once_under_faults(Client::KafkaPython, Names::Both);
}
