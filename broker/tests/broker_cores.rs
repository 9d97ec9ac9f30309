//! Two cores: one client connection writes to every bucket of a 4-bucket table. The buckets
//! are spread over both cores, so some batches must cross the mesh to their owner and come back;
//! the metrics prove both paths ran, and every row is stored with contiguous offsets.

#[path = "broker_support.rs"]
mod support;

use kafluss_protocol::{ApiVersionsRequest, ApiVersionsResponse};
use serde_json::{json, Value};
use support::{python_ok, Raw, Server};

const PRODUCE_ALL_PARTITIONS: &str = r#"
import json, sys
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "enable.idempotence": False, "acks": "all", "linger.ms": 20})
reports = []
def cb(err, msg):
    reports.append([msg.partition(), msg.offset(), str(err) if err else None])
for i in range(400):
    p.produce("spread", json.dumps({"n": i}).encode(), partition=i % 4, on_delivery=cb)
left = p.flush(30)
print(json.dumps({"left": left, "reports": reports}))
"#;

fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no metric {name} in\n{text}"))
}

#[test]
fn batches_cross_to_the_owner_core_and_results_come_back_in_order() {
    let server = Server::start(2, &[]);
    server.sql_ok(
        "CREATE TABLE fluss.spread (n INT) WITH ('table.kafka.enabled' = 'true', 'bucket.num' = '4')",
    );
    let out = python_ok(PRODUCE_ALL_PARTITIONS, &[&server.bootstrap()]);
    let result: Value = serde_json::from_str(out.trim().lines().last().unwrap()).expect("json");
    assert_eq!(result["left"], json!(0));
    let reports = result["reports"].as_array().unwrap();
    assert_eq!(reports.len(), 400);
    let mut offsets: Vec<Vec<i64>> = vec![Vec::new(); 4];
    for report in reports {
        assert!(report[2].is_null(), "{report}");
        offsets[report[0].as_u64().unwrap() as usize].push(report[1].as_i64().unwrap());
    }
    for partition in &mut offsets {
        partition.sort();
        assert_eq!(*partition, (0..100).collect::<Vec<i64>>());
    }

    let rows = server.scan("fluss.spread");
    assert_eq!(rows.len(), 400);
    for row in &rows {
        let bucket = row["bucket"].as_i64().unwrap();
        let n = row["row"]["n"].as_i64().unwrap();
        assert_eq!(n % 4, bucket, "row {n} landed in bucket {bucket}");
    }
    // Within a bucket, rows keep the producer's order.
    for bucket in 0..4 {
        let ns: Vec<i64> = rows
            .iter()
            .filter(|r| r["bucket"].as_i64() == Some(bucket))
            .map(|r| r["row"]["n"].as_i64().unwrap())
            .collect();
        let mut sorted = ns.clone();
        sorted.sort();
        assert_eq!(ns, sorted);
    }

    let (status, metrics) = server.get("/metrics");
    assert_eq!(status, 200);
    assert_eq!(metric(&metrics, "kafluss_cores"), 2);
    assert!(
        metric(&metrics, "kafluss_cross_core_appends_total") > 0,
        "{metrics}"
    );
    assert!(metric(&metrics, "kafluss_local_appends_total") > 0, "{metrics}");
    assert_eq!(metric(&metrics, "kafluss_records_appended_total"), 400);
}

fn connections_per_core(server: &Server) -> Vec<u64> {
    let (status, metrics) = server.get("/metrics");
    assert_eq!(status, 200);
    (0..2)
        .map(|core| {
            metric(
                &metrics,
                &format!("kafluss_core_connections_open{{core=\"{core}\"}}"),
            )
        })
        .collect()
}

/// The kernel spreads connections over the cores by a hash of their ports; a core that gets
/// more than its share hands the extra ones to the other core, so ten connections opened one
/// after another are served five by each core (by chance alone: one time in four).
#[test]
fn connections_are_spread_evenly_over_the_cores() {
    let server = Server::start(2, &[]);
    let mut connections = Vec::new();
    for _ in 0..10 {
        let mut raw = Raw::connect(server.kafka);
        // Answered: the connection is being served by some core.
        let correlation = raw.send(0, &ApiVersionsRequest::default());
        let _: ApiVersionsResponse = raw.recv(0, correlation);
        connections.push(raw);
    }
    assert_eq!(connections_per_core(&server), vec![5, 5]);
    // Every handed-over connection works like any other.
    for raw in &mut connections {
        let correlation = raw.send(0, &ApiVersionsRequest::default());
        let _: ApiVersionsResponse = raw.recv(0, correlation);
    }
    drop(connections);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while connections_per_core(&server) != vec![0, 0] {
        assert!(
            std::time::Instant::now() < deadline,
            "closed connections still counted"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
