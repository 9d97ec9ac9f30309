//! Two cores: one client connection writes to every bucket of a 4-bucket table. The buckets
//! are spread over both cores, so some batches must cross the mesh to their owner and come back;
//! the metrics prove both paths ran, and every row is stored with contiguous offsets.

#[path = "broker_support.rs"]
mod support;

use kafluss_protocol::{
    ApiVersionsRequest, ApiVersionsResponse, Compression, ErrorCode, ProduceResponse, RecordBatchBuilder,
};
use serde_json::{json, Value};
use support::{http_as, produce_request, python_ok, sasl_plain_login, Raw, Server};

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

fn one_row(n: usize) -> bytes::Bytes {
    let mut builder = RecordBatchBuilder::new(Compression::None);
    builder.append(
        1_700_000_000_000,
        None,
        Some(format!("{{\"n\": {n}}}").as_bytes()),
        &[],
    );
    builder.build().expect("batch")
}

/// A connection served by one core whose produce requests keep appending on a bucket that the
/// other core owns moves to that core after `kafka.connection.move-after` (8) requests in a
/// row: the requests it had already sent (pipelined, partly read) are answered in order, the
/// rest append without crossing the mesh, and it goes on working. With the key at 0 it stays.
#[test]
fn a_connection_moves_to_the_core_its_requests_append_on() {
    for (move_after, moves) in [("8", true), ("0", false)] {
        let server = Server::start(2, &[&format!("kafka.connection.move-after={move_after}")]);
        server.sql_ok("CREATE TABLE fluss.moved (n INT) WITH ('table.kafka.enabled' = 'true')");
        // The first connection's core claims the bucket.
        let mut first = Raw::connect(server.kafka);
        let answer = first.produce(7, &produce_request(1, "fluss.moved", 0, one_row(0)));
        assert_eq!(answer.topics[0].partitions[0].error_code, ErrorCode::None);
        // The second is served by the other core (placement: one connection each).
        let mut second = Raw::connect(server.kafka);
        let correlation = second.send(0, &ApiVersionsRequest::default());
        let _: ApiVersionsResponse = second.recv(0, correlation);
        assert_eq!(connections_per_core(&server), vec![1, 1]);

        let sent: Vec<i32> = (1..=20)
            .map(|n| second.send(7, &produce_request(1, "fluss.moved", 0, one_row(n))))
            .collect();
        for (n, correlation) in (1..=20).zip(sent) {
            let answer: ProduceResponse = second.recv(7, correlation);
            let partition = &answer.topics[0].partitions[0];
            assert_eq!(partition.error_code, ErrorCode::None, "request {n}");
            assert_eq!(partition.base_offset, n, "request {n}");
        }
        let correlation = second.send(0, &ApiVersionsRequest::default());
        let _: ApiVersionsResponse = second.recv(0, correlation);

        let (_, metrics) = server.get("/metrics");
        let crossed = metric(&metrics, "kafluss_cross_core_appends_total");
        if moves {
            assert_eq!(
                metric(&metrics, "kafluss_connections_moved_total"),
                1,
                "{metrics}"
            );
            assert_eq!(crossed, 8, "the eight requests before the move crossed, no other");
            let mut per_core = connections_per_core(&server);
            per_core.sort();
            assert_eq!(per_core, vec![0, 2], "both connections on the bucket's core");
        } else {
            assert_eq!(
                metric(&metrics, "kafluss_connections_moved_total"),
                0,
                "{metrics}"
            );
            assert_eq!(crossed, 20);
            assert_eq!(connections_per_core(&server), vec![1, 1]);
        }
        let answer = first.produce(7, &produce_request(1, "fluss.moved", 0, one_row(21)));
        assert_eq!(answer.topics[0].partitions[0].base_offset, 21);
        let ns: Vec<i64> = server
            .scan("fluss.moved")
            .iter()
            .map(|row| row["row"]["n"].as_i64().unwrap())
            .collect();
        assert_eq!(ns, (0..=21).collect::<Vec<i64>>());
    }
}

/// A moved connection keeps its login: after the move, a SASL/PLAIN user's produce requests are
/// still checked against its own ACLs (an unauthenticated session would be closed instead).
#[test]
fn a_moved_connection_keeps_its_login_and_acls() {
    let server = Server::start(2, support::SASL_ACL_SERVER);
    let sql = |statement: &str| {
        let admin = Some(("admin", "admin-secret"));
        let (status, body) = http_as(server.fluss, "POST", "/v1/sql", statement.as_bytes(), admin);
        assert_eq!(status, 200, "{body}");
    };
    sql("CREATE TABLE fluss.granted (n INT) WITH ('table.kafka.enabled' = 'true')");
    sql("CREATE TABLE fluss.other (n INT) WITH ('table.kafka.enabled' = 'true')");
    sql(
        "CALL sys.add_acl(resource => 'fluss.granted', permission => 'ALLOW', principal => 'User:writer', \
         operation => 'WRITE', host => '*')",
    );
    let login = |user: &str, password: &str| -> Raw {
        let (stream, authenticated) = sasl_plain_login(server.kafka, user, password);
        assert!(authenticated, "{user} logs in");
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        Raw {
            stream,
            correlation: 0,
        }
    };
    let mut admin = login("admin", "admin-secret");
    let answer = admin.produce(7, &produce_request(1, "fluss.granted", 0, one_row(0)));
    assert_eq!(answer.topics[0].partitions[0].error_code, ErrorCode::None);
    let mut writer = login("writer", "change-me");
    for n in 1..=12 {
        let answer = writer.produce(7, &produce_request(1, "fluss.granted", 0, one_row(n)));
        assert_eq!(
            answer.topics[0].partitions[0].error_code,
            ErrorCode::None,
            "request {n}"
        );
    }
    let (_, metrics) = http_as(
        server.fluss,
        "GET",
        "/metrics",
        b"",
        Some(("admin", "admin-secret")),
    );
    assert_eq!(
        metric(&metrics, "kafluss_connections_moved_total"),
        1,
        "{metrics}"
    );
    let refused = writer.produce(7, &produce_request(1, "fluss.other", 0, one_row(13)));
    assert_eq!(
        refused.topics[0].partitions[0].error_code,
        ErrorCode::TopicAuthorizationFailed,
        "the moved connection is still User:writer"
    );
    let answer = writer.produce(7, &produce_request(1, "fluss.granted", 0, one_row(13)));
    assert_eq!(answer.topics[0].partitions[0].base_offset, 13);
}

/// A server started under a narrowed affinity mask (as `taskset -c N kafluss serve` or a
/// container's cpuset starts it) pins every core thread inside that mask, not to the machine's
/// first CPUs: here the mask is the highest CPU this test may use, and both cores run there.
#[test]
fn core_threads_stay_within_the_affinity_mask_they_start_with() {
    let mask = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).unwrap();
    let highest = (0..nix::sched::CpuSet::count())
        .rev()
        .find(|&cpu| mask.is_set(cpu).unwrap())
        .unwrap();
    // The child inherits the mask of the thread that spawns it.
    let server = std::thread::spawn(move || {
        let mut one = nix::sched::CpuSet::new();
        one.set(highest).unwrap();
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &one).unwrap();
        Server::start(2, &[])
    })
    .join()
    .unwrap();
    let tasks = std::path::PathBuf::from(format!("/proc/{}/task", server.pid()));
    let mut cores = Vec::new();
    for task in std::fs::read_dir(&tasks).unwrap() {
        let task = task.unwrap().path();
        let comm = std::fs::read_to_string(task.join("comm")).unwrap_or_default();
        if !comm.starts_with("kafluss-core") {
            continue;
        }
        let status = std::fs::read_to_string(task.join("status")).unwrap();
        let allowed = status
            .lines()
            .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
            .unwrap()
            .trim()
            .to_string();
        cores.push((comm.trim().to_string(), allowed));
    }
    assert!(
        cores.iter().any(|(name, _)| name.starts_with("kafluss-core-0"))
            && cores.iter().any(|(name, _)| name.starts_with("kafluss-core-1")),
        "{cores:?}"
    );
    for (name, allowed) in &cores {
        assert_eq!(
            allowed,
            &highest.to_string(),
            "{name} runs on {allowed}: {cores:?}"
        );
    }
    // And it serves: a table is created through the admin listener.
    server.sql_ok("CREATE TABLE fluss.pinned (n INT) WITH ('table.kafka.enabled' = 'true')");
}
