//! End to end through the real binary with real clients: kcat and confluent-kafka list
//! metadata and produce to `orders`, `fluss.orders` and `sales.orders`; every stored row and
//! offset comes back through scan; pyarrow reads a segment file; SIGTERM exits 0; the deepest
//! schemas the mapping allows scan back and survive a restart.

#[path = "broker_support.rs"]
mod support;

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use support::{kcat, kcat_produce, python_ok, run_with_timeout, Server};

fn create_tables(server: &Server) {
    server.sql_ok(kafluss_tests::seed_sql::SEED_CREATE);
    server.sql_ok(
        "CREATE TABLE fluss.orders (order_id BIGINT, item STRING, _kafka_metadata ROW<`timestamp` TIMESTAMP_LTZ(3), timestamp_type INT, `partition` INT>) WITH ('table.kafka.enabled' = 'true', 'bucket.num' = '2')",
    );
    server.sql_ok("CREATE TABLE fluss.disabled_table (v STRING)");
}

fn rows_of(server: &Server, table: &str) -> Vec<Value> {
    server.scan(table)
}

#[test]
fn kcat_lists_metadata_and_produces_to_every_topic_form() {
    let server = Server::start(1, &[]);
    create_tables(&server);

    let (ok, out, err) = run_with_timeout(
        Command::new(kcat()).args(["-L", "-J", "-b", &server.bootstrap()]),
        b"",
        Duration::from_secs(30),
    );
    assert!(ok, "kcat -L failed: {err}");
    let metadata: Value = serde_json::from_str(&out).expect("kcat -L -J output");
    let topics: Vec<(String, usize)> = metadata["topics"]
        .as_array()
        .expect("topics")
        .iter()
        .map(|t| {
            (
                t["topic"].as_str().unwrap().to_string(),
                t["partitions"].as_array().unwrap().len(),
            )
        })
        .collect();
    assert_eq!(
        topics,
        vec![("fluss.orders".to_string(), 2), ("sales.orders".to_string(), 1)],
        "all-topics lists Kafka-enabled tables only, sorted"
    );
    let broker = &metadata["brokers"][0];
    assert_eq!(broker["name"], json!(server.bootstrap()));

    // Bare name (default database), qualified name, other database.
    let (ok, _, err) = kcat_produce(
        &server,
        "orders",
        0,
        &[r#"{"order_id":1,"item":"a"}"#, r#"{"order_id":2,"item":"b"}"#],
        &[],
    );
    assert!(ok, "produce to orders: {err}");
    let (ok, _, err) = kcat_produce(&server, "fluss.orders", 1, &[r#"{"order_id":3,"item":"c"}"#], &[]);
    assert!(ok, "produce to fluss.orders: {err}");
    let (ok, _, err) = kcat_produce(
        &server,
        "sales.orders",
        0,
        &[
            r#"{"order_id":10,"amount":"12.30"}"#,
            r#"{"order_id":11,"amount":4.5}"#,
        ],
        &["-k", "key-1", "-H", "source=kcat"],
    );
    assert!(ok, "produce to sales.orders: {err}");

    let orders = rows_of(&server, "fluss.orders");
    let summary: Vec<(i64, i64, i64, String)> = orders
        .iter()
        .map(|r| {
            (
                r["bucket"].as_i64().unwrap(),
                r["offset"].as_i64().unwrap(),
                r["row"]["order_id"].as_i64().unwrap(),
                r["row"]["item"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (0, 0, 1, "a".into()),
            (0, 1, 2, "b".into()),
            (1, 0, 3, "c".into())
        ]
    );
    assert_eq!(orders[2]["row"]["_kafka_metadata"]["partition"], json!(1));
    assert_eq!(orders[2]["row"]["_kafka_metadata"]["timestamp_type"], json!(0));

    let sales = rows_of(&server, "sales.orders");
    assert_eq!(sales.len(), 2);
    assert_eq!(sales[0]["row"]["order_id"], json!(10));
    assert_eq!(sales[0]["row"]["amount"], json!("12.30"));
    assert_eq!(sales[1]["row"]["amount"], json!("4.50"));
    // "key-1" and "kcat" in base64.
    assert_eq!(sales[0]["row"]["_kafka_key"], json!("a2V5LTE="));
    assert_eq!(sales[0]["row"]["_kafka_headers"], json!({"source": "a2NhdA=="}));
}

const CONFLUENT_PRODUCE: &str = r#"
import json, sys
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
bootstrap, acks = sys.argv[1], sys.argv[2]
admin = AdminClient({"bootstrap.servers": bootstrap})
md = admin.list_topics(timeout=20)
topics = sorted((name, len(t.partitions), t.error.code() if t.error else 0) for name, t in md.topics.items())
p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False, "acks": acks, "linger.ms": 5})
reports = []
def cb(err, msg):
    reports.append({"topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset(), "error": str(err) if err else None})
for topic, part, value, key in [("orders", 0, {"order_id": 100, "item": "x"}, None), ("orders", 1, {"order_id": 101, "item": "y"}, b"k"),
                                ("fluss.orders", 0, {"order_id": 102, "item": "z"}, None), ("sales.orders", 0, {"order_id": 7, "amount": "1.25"}, b"key7")]:
    p.produce(topic, json.dumps(value).encode(), key=key, partition=part, headers=[("h", b"v")], on_delivery=cb)
left = p.flush(30)
print(json.dumps({"topics": topics, "reports": reports, "left": left}))
"#;

#[test]
fn confluent_kafka_lists_metadata_and_gets_offsets_back() {
    let server = Server::start(1, &[]);
    create_tables(&server);
    for (round, acks) in ["1", "all"].iter().enumerate() {
        let out = python_ok(CONFLUENT_PRODUCE, &[&server.bootstrap(), acks]);
        let result: Value = serde_json::from_str(out.trim().lines().last().unwrap()).expect("json");
        assert_eq!(
            result["topics"],
            json!([["fluss.orders", 2, 0], ["sales.orders", 1, 0]])
        );
        assert_eq!(result["left"], json!(0));
        let reports = result["reports"].as_array().unwrap();
        assert_eq!(reports.len(), 4, "{reports:?}");
        let round = round as i64;
        for report in reports {
            assert!(report["error"].is_null(), "{report}");
        }
        let offset_of = |topic: &str, partition: i64| {
            reports
                .iter()
                .find(|r| r["topic"] == json!(topic) && r["partition"] == json!(partition))
                .map(|r| r["offset"].as_i64().unwrap())
        };
        // orders and fluss.orders are one table: bucket 0 gets two rows per round.
        let orders_p0 = offset_of("orders", 0).unwrap();
        let fluss_p0 = offset_of("fluss.orders", 0).unwrap();
        let mut p0 = [orders_p0, fluss_p0];
        p0.sort();
        assert_eq!(p0, [2 * round, 2 * round + 1]);
        assert_eq!(offset_of("orders", 1), Some(round));
        assert_eq!(offset_of("sales.orders", 0), Some(round));
    }
    let orders = rows_of(&server, "fluss.orders");
    assert_eq!(orders.len(), 6);
    let sales = rows_of(&server, "sales.orders");
    assert_eq!(sales.len(), 2);
    assert_eq!(sales[1]["offset"], json!(1));
    assert_eq!(sales[1]["row"]["amount"], json!("1.25"));
    assert_eq!(sales[1]["row"]["_kafka_key"], json!("a2V5Nw=="));
    assert_eq!(sales[1]["row"]["_kafka_headers"], json!({"h": "dg=="}));
}

const PYARROW_READ: &str = r#"
import glob, json, sys
import pyarrow.ipc as ipc
paths = sorted(glob.glob(sys.argv[1] + "/sales/orders-*/bucket-0/*.arrow"))
table = ipc.open_stream(paths[0]).read_all()
print(json.dumps({"segments": len(paths), "rows": table.num_rows, "columns": table.column_names,
                  "order_ids": table.column("order_id").to_pylist(), "amounts": [str(a) for a in table.column("amount").to_pylist()]}))
"#;

/// The deepest schemas the Kafka mapping allows (a column nesting 64 levels of ROW, of ARRAY
/// and of MAP, each MAP level two Arrow levels) store a row that scans back as sent, and that a
/// restart recovers. Read with arrow-ipc's default flatbuffer bounds their segments did not
/// scan, and recovery took their schema for a torn tail and truncated the acknowledged row.
#[test]
fn the_deepest_schemas_allowed_scan_back_and_survive_a_restart() {
    let mut server = Server::start(1, &[]);
    let mut sent = Vec::new();
    for level in ["row", "array", "map"] {
        let (mut column, mut value) = ("INT".to_string(), "7".to_string());
        for _ in 0..kafluss_convert::mapping::MAX_NESTING_DEPTH {
            (column, value) = match level {
                "row" => (format!("ROW<x {column}>"), format!(r#"{{"x":{value}}}"#)),
                "array" => (format!("ARRAY<{column}>"), format!("[{value}]")),
                _ => (format!("MAP<STRING, {column}>"), format!(r#"{{"k":{value}}}"#)),
            };
        }
        server.sql_ok(&format!(
            "CREATE TABLE fluss.deep_{level} (r {column}) WITH ('table.kafka.enabled' = 'true')"
        ));
        let record = format!(r#"{{"r":{value}}}"#);
        let (ok, _, err) = kcat_produce(&server, &format!("deep_{level}"), 0, &[&record], &[]);
        assert!(ok, "{err}");
        sent.push((level, serde_json::from_str::<Value>(&value).unwrap()));
    }
    let check = |server: &Server, when: &str| {
        for (level, value) in &sent {
            let rows = rows_of(server, &format!("fluss.deep_{level}"));
            assert_eq!(rows.len(), 1, "{level} {when}: {rows:?}");
            assert_eq!(&rows[0]["row"]["r"], value, "{level} {when}");
        }
    };
    check(&server, "as stored");
    let status = server.terminate().expect("kafluss exits after SIGTERM");
    assert!(status.success(), "exit status {status:?}");
    let restarted = Server::start_in(&server.data_dir, 1, &[]);
    check(&restarted, "after a restart");
    assert!(!restarted.logs().contains("torn tail"), "{}", restarted.logs());
}

#[test]
fn pyarrow_reads_a_segment_and_sigterm_exits_cleanly() {
    let mut server = Server::start(1, &[]);
    create_tables(&server);
    let (ok, _, err) = kcat_produce(
        &server,
        "sales.orders",
        0,
        &[
            r#"{"order_id":1,"amount":"9.99"}"#,
            r#"{"order_id":2,"amount":"0.01"}"#,
        ],
        &[],
    );
    assert!(ok, "{err}");
    // Still being appended to: the stream must read without an end-of-stream marker.
    let out = python_ok(PYARROW_READ, &[&server.data_dir.display().to_string()]);
    let result: Value = serde_json::from_str(out.trim()).expect("json");
    assert_eq!(result["rows"], json!(2));
    assert_eq!(result["order_ids"], json!([1, 2]));
    assert_eq!(result["amounts"], json!(["9.99", "0.01"]));
    assert_eq!(
        result["columns"],
        json!(["order_id", "amount", "_kafka_key", "_kafka_headers"])
    );

    let status = server.terminate().expect("kafluss exits after SIGTERM");
    assert!(status.success(), "exit status {status:?}");
    let out = python_ok(PYARROW_READ, &[&server.data_dir.display().to_string()]);
    let result: Value = serde_json::from_str(out.trim()).expect("json");
    assert_eq!(result["rows"], json!(2));
}

#[test]
fn unknown_config_key_fails_start_up_naming_it() {
    let output = Command::new(support::binary())
        .args(["serve", "-D", "kafka.enabeld=true"])
        .output()
        .expect("run kafluss");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("kafka.enabeld"), "{stderr}");
}

const PRODUCE_CODECS: &str = r#"
import json, sys
from confluent_kafka import Producer
bootstrap = sys.argv[1]
reports = []
for n, codec in enumerate(["none", "gzip", "snappy", "lz4", "zstd"]):
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False, "acks": "all",
                  "compression.type": codec, "linger.ms": 10})
    for i in range(50):
        p.produce("sales.orders", json.dumps({"order_id": n * 100 + i, "amount": "1.00"}).encode(), partition=0,
                  on_delivery=lambda err, msg: reports.append(str(err) if err else None))
    p.flush(30)
print(json.dumps(reports))
"#;

#[test]
fn every_compression_codec_is_stored() {
    let server = Server::start(1, &[]);
    create_tables(&server);
    let out = python_ok(PRODUCE_CODECS, &[&server.bootstrap()]);
    let reports: Value = serde_json::from_str(out.trim().lines().last().unwrap()).expect("json");
    assert_eq!(reports.as_array().map(Vec::len), Some(250));
    assert!(
        reports.as_array().unwrap().iter().all(Value::is_null),
        "{reports}"
    );
    let rows = rows_of(&server, "sales.orders");
    let ids: Vec<i64> = rows
        .iter()
        .map(|r| r["row"]["order_id"].as_i64().unwrap())
        .collect();
    let expected: Vec<i64> = (0..5).flat_map(|n| (0..50).map(move |i| n * 100 + i)).collect();
    assert_eq!(ids, expected);
}

/// An ALTER of `table.log.ttl` applies to the buckets already open, without a restart: raised,
/// the rows stay (retention went on deleting them on the TTL the bucket was opened with);
/// lowered, the old segments go at the next check.
#[test]
fn an_altered_ttl_applies_to_open_buckets() {
    let server = Server::start(1, &["log.segment.size=64kb", "log.retention.check-interval=1s"]);
    server.sql_ok(
        "CREATE TABLE fluss.ttl (v STRING) WITH ('table.kafka.enabled' = 'true', 'table.log.ttl' = '3s', \
         'table.log.arrow.compression.type' = 'NONE')",
    );
    let pad = "x".repeat(200);
    for round in 0..6 {
        let lines: Vec<String> = (0..500)
            .map(|i| format!(r#"{{"v":"{round}-{i}-{pad}"}}"#))
            .collect();
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (ok, _, err) = kcat_produce(&server, "ttl", 0, &lines, &[]);
        assert!(ok, "{err}");
    }
    server.sql_ok("ALTER TABLE fluss.ttl SET ('table.log.ttl' = '7d')");
    // Past the old TTL and several checks.
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(rows_of(&server, "fluss.ttl").len(), 3000, "{}", server.logs());
    assert!(!server.logs().contains("retention deleted log segments"));

    server.sql_ok("ALTER TABLE fluss.ttl SET ('table.log.ttl' = '1s')");
    assert!(
        server.log_shows("retention deleted log segments", Duration::from_secs(15)),
        "{}",
        server.logs()
    );
    // Every row is past the 1 s TTL, those of the active segment too: the check that logged
    // the deletions rolled it and deleted it with the others.
    let left = rows_of(&server, "fluss.ttl").len();
    assert_eq!(left, 0, "{left} rows left");
}
