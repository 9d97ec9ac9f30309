//! Catalog changes reaching the cores while the server runs: DROP TABLE closes the owner cores'
//! bucket logs and deletes the table directory; a re-created table starts at offset 0 with a
//! new topic id; ALTER that disables or re-enables the Kafka mapping applies to the next
//! request; connections idle past `kafka.connection.max-idle-time` are closed.

#[path = "broker_support.rs"]
mod support;

use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{kcat_produce, Server};

fn topic_id(server: &Server, table: &str) -> String {
    let (status, body) = server.get(&format!("/v1/tables/{table}"));
    assert_eq!(status, 200, "{body}");
    let info: Value = serde_json::from_str(&body).expect("json");
    info["kafka"]["topic_id"].as_str().unwrap_or_default().to_string()
}

#[test]
fn drop_recreate_and_alter_reach_the_cores() {
    let server = Server::start(2, &["kafka.connection.max-idle-time=2s"]);
    let create =
        "CREATE TABLE fluss.events (n INT) WITH ('table.kafka.enabled' = 'true', 'bucket.num' = '2')";
    server.sql_ok(create);
    let first_id = topic_id(&server, "fluss.events");
    for partition in 0..2 {
        let (ok, _, err) = kcat_produce(&server, "events", partition, &[r#"{"n":1}"#, r#"{"n":2}"#], &[]);
        assert!(ok, "{err}");
    }
    assert_eq!(server.scan("fluss.events").len(), 4);
    assert_eq!(server.table_dirs("fluss", "events-").len(), 1);

    server.sql_ok("DROP TABLE fluss.events");
    assert!(
        server.table_dirs("fluss", "events-").is_empty(),
        "the dropped table's directory is deleted"
    );
    let (ok, _, _) = kcat_produce(
        &server,
        "events",
        0,
        &[r#"{"n":3}"#],
        &["-X", "message.timeout.ms=3000"],
    );
    assert!(!ok, "a dropped table is no topic");

    server.sql_ok(create);
    assert_ne!(
        topic_id(&server, "fluss.events"),
        first_id,
        "a re-created table is a new topic"
    );
    let (ok, _, err) = kcat_produce(&server, "events", 1, &[r#"{"n":4}"#], &[]);
    assert!(ok, "{err}");
    let rows = server.scan("fluss.events");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["offset"].as_i64(), Some(0));
    assert_eq!(rows[0]["row"]["n"].as_i64(), Some(4));

    server.sql_ok("ALTER TABLE fluss.events SET ('table.kafka.enabled' = 'false')");
    let (ok, _, _) = kcat_produce(
        &server,
        "events",
        1,
        &[r#"{"n":5}"#],
        &["-X", "message.timeout.ms=3000"],
    );
    assert!(!ok, "a disabled mapping refuses produce");
    server.sql_ok("ALTER TABLE fluss.events SET ('table.kafka.enabled' = 'true')");
    let (ok, _, err) = kcat_produce(&server, "events", 1, &[r#"{"n":6}"#], &[]);
    assert!(ok, "{err}");
    let rows = server.scan("fluss.events");
    let ns: Vec<i64> = rows.iter().map(|r| r["row"]["n"].as_i64().unwrap()).collect();
    assert_eq!(ns, vec![4, 6]);
    assert_eq!(rows[1]["offset"].as_i64(), Some(1));

    // An idle connection is closed after kafka.connection.max-idle-time (2s here).
    let mut idle = TcpStream::connect(server.kafka).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let started = Instant::now();
    let mut byte = [0u8; 1];
    assert_eq!(idle.read(&mut byte).unwrap_or(0), 0);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(1500) && waited < Duration::from_secs(15),
        "{waited:?}"
    );
    // At the default log level, a line says why (it was a debug line, so nothing did).
    assert!(
        server.log_shows(
            "closing Kafka connection: no complete request within kafka.connection.max-idle-time (2s)",
            Duration::from_secs(10)
        ),
        "{}",
        server.logs()
    );
}

/// Copies `from` (a directory tree) to `to`.
fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A DROP whose directory removal never happened (the server stopped or crashed after the
/// catalog was saved): the next start removes the dropped table's directory, logged, and leaves
/// alone the live table's, a directory of an id not given yet and one that holds other files.
/// Staged by keeping a copy of the table's directory across a finished DROP and putting it back.
#[test]
fn a_start_removes_the_directory_a_drop_left_behind() {
    let mut server = Server::start(1, &[]);
    server.sql_ok("CREATE TABLE fluss.gone (v INT) WITH ('table.kafka.enabled' = 'true')");
    server.sql_ok("CREATE TABLE fluss.kept (v INT) WITH ('table.kafka.enabled' = 'true')");
    for topic in ["gone", "kept"] {
        let (ok, _, err) = kcat_produce(&server, topic, 0, &[r#"{"v": 1}"#, r#"{"v": 2}"#], &[]);
        assert!(ok, "{err}");
    }
    let gone = server
        .table_dirs("fluss", "gone-")
        .pop()
        .expect("the table's directory");
    let data = server.data_dir.clone();
    let keep = tempfile::tempdir().unwrap();
    assert!(server.terminate().expect("exits").success());
    copy_tree(&data.join("fluss").join(&gone), keep.path());

    let mut server = Server::start_in(&data, 1, &[]);
    server.sql_ok("DROP TABLE fluss.gone");
    assert!(server.table_dirs("fluss", "gone-").is_empty());
    assert!(server.terminate().expect("exits").success());
    copy_tree(keep.path(), &data.join("fluss").join(&gone));
    // Not dropped tables' directories: an id no table has had yet, and one with another file.
    std::fs::create_dir_all(data.join("fluss").join("future-999").join("bucket-0")).unwrap();
    std::fs::create_dir_all(data.join("fluss").join("other-1")).unwrap();
    std::fs::write(data.join("fluss").join("other-1").join("notes.txt"), "mine").unwrap();

    let server = Server::start_in(&data, 1, &[]);
    assert!(
        server.table_dirs("fluss", "gone-").is_empty(),
        "the dropped table's directory stays"
    );
    assert!(
        server.log_shows("removed the directory of a dropped table", Duration::from_secs(5)),
        "{}",
        server.logs()
    );
    assert_eq!(server.scan("fluss.kept").len(), 2);
    assert!(data.join("fluss").join("future-999").is_dir());
    assert!(data.join("fluss").join("other-1").join("notes.txt").is_file());
}

/// A data dir made before databases named like the ACL resource of the whole cluster were
/// refused may hold one: the server starts and serves it, and says at WARN how its ACLs are
/// written (`cluster.cluster[.t]`), since `cluster` alone names the whole cluster. Likewise an
/// ACL stored for a principal whose type is not `User`: it never matches, and the WARN says
/// how to drop it.
#[test]
fn a_start_warns_of_what_earlier_versions_let_in() {
    let mut server = Server::start(1, &[]);
    let data = server.data_dir.clone();
    assert!(server.terminate().expect("exits").success());
    let path = data.join("catalog.json");
    let mut stored: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let empty = stored["databases"]["fluss"].clone();
    stored["databases"]["cluster"] = empty;
    stored["acls"] = serde_json::json!([
        r#"resource="fluss";permission="ALLOW";principal="Group:ops";operation="ALL";host="*""#
    ]);
    std::fs::write(&path, serde_json::to_vec_pretty(&stored).unwrap()).unwrap();

    let server = Server::start_in(&data, 1, &[]);
    assert!(
        server.log_shows(
            "a database is named like the whole cluster's ACL resource",
            Duration::from_secs(5)
        ),
        "{}",
        server.logs()
    );
    assert!(server.logs().contains("'cluster.cluster.t'"), "{}", server.logs());
    assert!(server.sql_ok("SHOW DATABASES").contains("cluster"));
    assert!(
        server
            .logs()
            .contains("a stored ACL names a principal whose type is not User")
            && server
                .logs()
                .contains("CALL sys.drop_acl(principal => 'Group:ops')"),
        "{}",
        server.logs()
    );
}

/// A Produce v8 of `value` (key `k`) to partition 0 of `topic`: (error code, base offset).
fn produce_one(server: &Server, topic: &str, value: &str) -> (kafluss_protocol::ErrorCode, i64) {
    let mut builder = kafluss_protocol::RecordBatchBuilder::new(kafluss_protocol::Compression::None);
    builder.append(1_700_000_000_000, Some(b"k"), Some(value.as_bytes()), &[]);
    let records = builder.build().expect("batch");
    let mut raw = support::Raw::connect(server.kafka);
    let response = raw.produce(8, &support::produce_request(-1, topic, 0, records));
    let partition = &response.topics[0].partitions[0];
    (partition.error_code, partition.base_offset)
}

/// A table an earlier version stored with an option key it did not read (before such keys
/// were matched ignoring case and spaces, `'TABLE.KAFKA.KEY.TYPE'` was stored and ignored) has
/// its Kafka mapping in error now: its topic is refused. Start-up says so at WARN, once per
/// table and not per request, naming the table, the error and the statement that fixes it (the
/// RESET of every such key, in one statement, as ALTER refuses any result still in error; or,
/// for a mapping broken otherwise, turning it off as well); running that statement brings the topic
/// back. Before, nothing was logged anywhere.
#[test]
fn a_start_warns_of_tables_whose_stored_kafka_mapping_is_in_error() {
    let mut server = Server::start(1, &[]);
    for table in ["typo", "two", "strict"] {
        server.sql_ok(&format!(
            "CREATE TABLE fluss.{table} (_kafka_value STRING, _kafka_key BYTES) WITH \
             ('table.kafka.enabled' = 'true', 'table.kafka.convert.value.type' = 'string')"
        ));
    }
    assert_eq!(
        produce_one(&server, "typo", "one"),
        (kafluss_protocol::ErrorCode::None, 0)
    );
    let data = server.data_dir.clone();
    assert!(server.terminate().expect("exits").success());
    let path = data.join("catalog.json");
    let mut stored: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let tables = &mut stored["databases"]["fluss"]["tables"];
    tables["typo"]["options"]["TABLE.KAFKA.KEY.TYPE"] = "binary".into();
    tables["two"]["options"][" table.kafka.enabled"] = "true".into();
    tables["two"]["options"]["Table.Kafka.Convert.Value.Layout"] = "nested".into();
    // A mapping broken by a rule rather than a key: a column NOT NULL.
    tables["strict"]["columns"][0]["type"] = "STRING NOT NULL".into();
    std::fs::write(&path, serde_json::to_vec_pretty(&stored).unwrap()).unwrap();

    let server = Server::start_in(&data, 1, &[]);
    let fixes = [
        ("typo", "ALTER TABLE fluss.typo RESET ('TABLE.KAFKA.KEY.TYPE')"),
        (
            "two",
            "ALTER TABLE fluss.two RESET (' table.kafka.enabled', 'Table.Kafka.Convert.Value.Layout')",
        ),
        ("strict", "ALTER TABLE fluss.strict RESET ('table.kafka.enabled')"),
    ];
    let warnings = |table: &str| -> Vec<String> {
        server
            .plain_logs()
            .lines()
            .filter(|line| line.contains(&format!("table fluss.{table}: its Kafka mapping is in error")))
            .map(str::to_string)
            .collect()
    };
    for (table, fix) in fixes {
        let lines = warnings(table);
        assert_eq!(lines.len(), 1, "{table}: {}", server.plain_logs());
        assert!(lines[0].contains(" WARN "), "{}", lines[0]);
        assert!(lines[0].contains(&format!("Fix: {fix}")), "{}", lines[0]);
        assert!(lines[0].contains("INVALID_TOPIC"), "{}", lines[0]);
    }
    assert!(
        warnings("typo")[0].contains("Error: unknown table option 'TABLE.KAFKA.KEY.TYPE'"),
        "{}",
        warnings("typo")[0]
    );
    assert!(
        warnings("strict")[0].contains("Error: column '_kafka_value' must be nullable"),
        "{}",
        warnings("strict")[0]
    );

    // The topic is refused, with no further log line for it.
    for _ in 0..3 {
        let (code, _) = produce_one(&server, "typo", "two");
        assert_eq!(code, kafluss_protocol::ErrorCode::InvalidTopicException);
    }
    assert_eq!(warnings("typo").len(), 1);

    // The statements named fix the tables: the topics take records again.
    for (_, fix) in fixes {
        server.sql_ok(fix);
    }
    assert_eq!(
        produce_one(&server, "typo", "two"),
        (kafluss_protocol::ErrorCode::None, 1)
    );
    assert_eq!(
        produce_one(&server, "two", "one"),
        (kafluss_protocol::ErrorCode::None, 0)
    );
    assert_eq!(server.scan("fluss.typo").len(), 2);
    let (status, body) = server.get("/v1/tables/fluss.strict");
    assert_eq!(status, 200, "{body}");
    let info: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(info["kafka"]["enabled"], false, "{body}");
    assert_eq!(info["kafka"]["error"], Value::Null, "{body}");
}

/// The SQL error of an answer: (code, message).
fn sql_error(body: &str) -> (String, String) {
    let answer: Value = serde_json::from_str(body).expect("json");
    let text = |key: &str| answer["error"][key].as_str().unwrap_or_default().to_string();
    (text("code"), text("message"))
}

/// A name without a database always means the session's current database,
/// `kafka.default.database` (`fluss`) unless `USE` changed it, even once that database is gone:
/// after `USE sales; DROP DATABASE fluss CASCADE`, `DROP TABLE orders` used to drop
/// `analytics.orders` (the alphabetically first database) and delete the rows Kafka had
/// acknowledged; now it is DATABASE_NOT_FOUND naming `fluss`. The current database itself is
/// not dropped (DATABASE_IN_USE, as Flink), and a restart re-creates `fluss`.
#[test]
fn names_without_a_database_never_reach_another_database() {
    let mut server = Server::start(1, &[]);
    server.sql_ok(
        "CREATE DATABASE analytics; \
         CREATE TABLE analytics.orders (a INT) WITH ('table.kafka.enabled' = 'true'); \
         CREATE DATABASE sales; CREATE TABLE sales.orders (a INT); CREATE TABLE orders (a INT)",
    );
    let (ok, _, err) = kcat_produce(&server, "analytics.orders", 0, &[r#"{"a":1}"#, r#"{"a":2}"#], &[]);
    assert!(ok, "{err}");
    assert_eq!(server.scan("analytics.orders").len(), 2);

    // A request starts in `fluss`: it is the current database, which is not dropped.
    let (status, body) = server.sql("DROP DATABASE fluss CASCADE");
    assert_eq!(status, 409, "{body}");
    let (code, message) = sql_error(&body);
    assert_eq!(code, "DATABASE_IN_USE");
    assert!(
        message.contains("'fluss'") && message.contains("USE another database"),
        "{message}"
    );
    server.sql_ok("DESCRIBE fluss.orders");

    // Dropped from another current database, it stays the current database of new sessions.
    server.sql_ok("USE sales; DROP DATABASE fluss CASCADE");
    for sql in [
        "DROP TABLE orders",
        "DROP TABLE IF EXISTS orders",
        "CREATE TABLE events (a INT)",
        "ALTER TABLE orders SET ('table.log.ttl' = '1d')",
        "DESCRIBE orders",
        "SHOW TABLES",
    ] {
        let (status, body) = server.sql(sql);
        if sql.contains("IF EXISTS") {
            assert_eq!(status, 200, "{sql}: {body}");
            assert!(
                body.contains("Table fluss.orders does not exist"),
                "{sql}: {body}"
            );
            continue;
        }
        assert_eq!(status, 404, "{sql}: {body}");
        let (code, message) = sql_error(&body);
        assert_eq!(code, "DATABASE_NOT_FOUND", "{sql}: {message}");
        assert_eq!(message, "database 'fluss' does not exist", "{sql}");
    }
    assert_eq!(server.table_dirs("analytics", "orders-").len(), 1);
    assert_eq!(
        server.scan("analytics.orders").len(),
        2,
        "the acknowledged rows are kept"
    );
    for database in ["analytics", "sales"] {
        let body = server.sql_ok(&format!("SHOW TABLES FROM {database}"));
        let answer: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            answer["results"][0]["rows"],
            serde_json::json!([["orders"]]),
            "{database}"
        );
    }

    // Start-up re-creates the default database (Kafka enabled): unqualified names work again.
    let data = server.data_dir.clone();
    assert!(server.terminate().expect("exits").success());
    let server = Server::start_in(&data, 1, &[]);
    server.sql_ok("CREATE TABLE events (a INT)");
    server.sql_ok("DESCRIBE fluss.events");
    assert_eq!(server.scan("analytics.orders").len(), 2);
}
