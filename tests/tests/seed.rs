//! The product document's own examples, end to end (the README and getting-started run in
//! `tests/docs.rs`).
//!
//! - `sales_orders_as_in_the_seed`: the seed's `sales.orders` SQL verbatim, JSON orders with keys
//!   and headers produced by confluent-kafka, read back; `ALTER TABLE ... SET` off and on again;
//!   the rows survive a restart; the server exits 0 on SIGTERM.
//! - `topic_names_map_to_tables`: the seed's topic-to-table mapping table (`orders` and
//!   `fluss.orders` both land in `fluss.orders`; `warehouse.events` in its own database).

use std::time::Duration;

use kafluss_tests::clients::{available, run_plan, CaseOutcome, CaseSpec, Client, Plan};
use kafluss_tests::seed_sql::{SEED_CREATE, SEED_ENABLE};
use kafluss_tests::server::{KaflussServer, ServerConfig};
use kafluss_tests::tables::Record;
use serde_json::{json, Value};

const SEED_DISABLE: &str = "ALTER TABLE sales.orders SET ('table.kafka.enabled' = 'false')";

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn order(id: i64, amount: &str, key: &str) -> Record {
    Record {
        key: Some(key.as_bytes().to_vec()),
        value: Some(format!("{{\"order_id\":{id},\"amount\":{amount}}}").into_bytes()),
        headers: vec![("source".into(), Some(b"web".to_vec()))],
        timestamp: Some(1_735_689_600_000 + id),
        partition: None,
    }
}

fn order_row(id: i64, amount: &str, key: &str) -> Value {
    json!({
        "order_id": id,
        "amount": amount,
        "_kafka_key": b64(key.as_bytes()),
        "_kafka_headers": {"source": b64(b"web")},
    })
}

fn produce(
    server: &KaflussServer,
    name: &str,
    topic: &str,
    records: &[Record],
    expect_error: bool,
) -> CaseOutcome {
    let plan = Plan {
        bootstrap: server.kafka_bootstrap(),
        sasl: None,
        idempotent: false,
        cases: vec![CaseSpec::Produce {
            name: name.into(),
            topic: topic.into(),
            compression: "none".into(),
            acks: -1,
            records: records.iter().map(Record::to_wire).collect(),
            expect_error,
        }],
    };
    let outcome = run_plan(Client::ConfluentKafka, &plan)
        .unwrap_or_else(|error| panic!("{error}"))
        .remove(0);
    assert!(outcome.ok, "{name}: {}", outcome.detail);
    outcome
}

fn scanned_rows(server: &KaflussServer, table: &str, wanted: usize) -> Vec<Value> {
    let rows = server
        .scan_until(table, wanted, Duration::from_secs(15))
        .unwrap_or_else(|error| panic!("{error}"));
    for (index, row) in rows.iter().enumerate() {
        assert_eq!(
            (row.bucket, row.offset),
            (0, index as i64),
            "{table}: offsets are contiguous from 0"
        );
    }
    rows.into_iter().map(|row| row.row).collect()
}

#[test]
fn sales_orders_as_in_the_seed() {
    if !available(Client::ConfluentKafka) {
        return;
    }
    let server = KaflussServer::start(ServerConfig::plaintext()).unwrap_or_else(|error| panic!("{error}"));
    server.sql(SEED_CREATE).unwrap_or_else(|error| panic!("{error}"));

    let first = [order(1, "12.30", "order-1"), order(2, "\"99.99\"", "order-2")];
    produce(&server, "seed orders", "sales.orders", &first, false);
    let expected = vec![order_row(1, "12.30", "order-1"), order_row(2, "99.99", "order-2")];
    assert_eq!(scanned_rows(&server, "sales.orders", 2), expected);

    // Disabled: the topic refuses records and nothing is appended.
    server.sql(SEED_DISABLE).unwrap_or_else(|error| panic!("{error}"));
    let refused = produce(
        &server,
        "disabled",
        "sales.orders",
        &[order(3, "1.00", "order-3")],
        true,
    );
    assert!(!refused.detail.is_empty());
    assert_eq!(
        server
            .scan("sales.orders")
            .unwrap_or_else(|error| panic!("{error}"))
            .len(),
        2
    );

    // Enabled again with the seed's ALTER: records flow again.
    server.sql(SEED_ENABLE).unwrap_or_else(|error| panic!("{error}"));
    produce(
        &server,
        "re-enabled",
        "sales.orders",
        &[order(4, "0.05", "order-4")],
        false,
    );
    let mut expected = expected;
    expected.push(order_row(4, "0.05", "order-4"));
    assert_eq!(scanned_rows(&server, "sales.orders", 3), expected);

    // The rows are durable: a restart on the same data dir shows them, and appends continue.
    let server = server.restart().unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(scanned_rows(&server, "sales.orders", 3), expected);
    produce(
        &server,
        "after restart",
        "sales.orders",
        &[order(5, "5", "order-5")],
        false,
    );
    expected.push(order_row(5, "5.00", "order-5"));
    assert_eq!(scanned_rows(&server, "sales.orders", 4), expected);

    let status = server.stop();
    assert!(
        status.is_some_and(|status| status.success()),
        "SIGTERM must end kafluss with status 0, got {status:?}"
    );
}

#[test]
fn topic_names_map_to_tables() {
    if !available(Client::ConfluentKafka) {
        return;
    }
    let server = KaflussServer::start(ServerConfig::plaintext()).unwrap_or_else(|error| panic!("{error}"));
    let ddl = "CREATE TABLE fluss.orders (order_id BIGINT, amount DECIMAL(18, 2)) WITH ('table.kafka.enabled' = 'true');
CREATE DATABASE IF NOT EXISTS warehouse;
CREATE TABLE warehouse.events (kind STRING) WITH ('table.kafka.enabled' = 'true')";
    server.sql(ddl).unwrap_or_else(|error| panic!("{error}"));

    let record = |value: &str| Record {
        key: None,
        value: Some(value.as_bytes().to_vec()),
        headers: vec![],
        timestamp: None,
        partition: None,
    };
    produce(
        &server,
        "bare name",
        "orders",
        &[record("{\"order_id\":1,\"amount\":1.5}")],
        false,
    );
    produce(
        &server,
        "default db",
        "fluss.orders",
        &[record("{\"order_id\":2,\"amount\":2.5}")],
        false,
    );
    produce(
        &server,
        "own db",
        "warehouse.events",
        &[record("{\"kind\":\"arrived\"}")],
        false,
    );

    assert_eq!(
        scanned_rows(&server, "fluss.orders", 2),
        vec![
            json!({"order_id": 1, "amount": "1.50"}),
            json!({"order_id": 2, "amount": "2.50"})
        ]
    );
    assert_eq!(
        scanned_rows(&server, "warehouse.events", 1),
        vec![json!({"kind": "arrived"})]
    );
}
