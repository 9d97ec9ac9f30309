//! SASL/PLAIN on the Kafka listener and ACL checks on produce and metadata, through the real
//! binary: confluent-kafka and kcat authenticate, a wrong password fails, nothing is served
//! before authentication, and WRITE/DESCRIBE are enforced when the authorizer is on.

#[path = "broker_support.rs"]
mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kafluss_protocol::{ErrorCode, MetadataRequest, MetadataResponse};
use serde_json::{json, Value};
use support::{
    binary, http_as, kcat, kcat_produce, python_ok, run_with_timeout, sasl_plain_login, serve_with, Raw,
    Server,
};

const SASL: [&str; 3] = [
    "security.protocol.map=FLUSS:plaintext,KAFKA:sasl",
    "security.sasl.enabled.mechanisms=PLAIN",
    "security.sasl.plain.credentials=writer:change-me,admin:admin-secret",
];

const PRODUCE_AS: &str = r#"
import json, sys
from confluent_kafka import Producer
bootstrap, user, password, topic = sys.argv[1:5]
p = Producer({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
              "sasl.username": user, "sasl.password": password, "enable.idempotence": False, "acks": "all",
              "message.timeout.ms": 8000})
reports = []
p.produce(topic, json.dumps({"id": 1}).encode(), partition=0,
          on_delivery=lambda err, msg: reports.append({"error": err.name() if err else None, "offset": msg.offset()}))
p.flush(15)
print(json.dumps(reports))
"#;

fn produce_as(server: &Server, user: &str, password: &str, topic: &str) -> Value {
    let out = python_ok(PRODUCE_AS, &[&server.bootstrap(), user, password, topic]);
    serde_json::from_str(out.trim().lines().last().unwrap_or("[]")).expect("json")
}

/// SaslHandshake v0, then the raw PLAIN token: whether the broker answers the empty frame that
/// means authenticated (a refused login closes the connection).
fn raw_plain_login(server: &Server, user: &str, password: &str) -> bool {
    sasl_plain_login(server.kafka, user, password).1
}

#[test]
fn sasl_plain_authenticates_clients_and_refuses_everything_before() {
    let server = Server::start(1, &SASL);
    server.sql_ok("CREATE TABLE fluss.secure (id INT) WITH ('table.kafka.enabled' = 'true')");

    assert_eq!(
        produce_as(&server, "writer", "change-me", "secure"),
        json!([{"error": null, "offset": 0}])
    );
    let refused = produce_as(&server, "writer", "wrong", "secure");
    assert_ne!(
        refused[0]["error"],
        Value::Null,
        "a wrong password must not produce: {refused}"
    );

    let (ok, _, err) = run_with_timeout(
        Command::new(kcat()).args([
            "-P",
            "-b",
            &server.bootstrap(),
            "-t",
            "secure",
            "-p",
            "0",
            "-X",
            "security.protocol=SASL_PLAINTEXT",
            "-X",
            "sasl.mechanisms=PLAIN",
            "-X",
            "sasl.username=writer",
            "-X",
            "sasl.password=change-me",
        ]),
        b"{\"id\":2}\n",
        Duration::from_secs(30),
    );
    assert!(ok, "kcat over SASL_PLAINTEXT: {err}");

    // A Metadata request before authentication: closed without an answer.
    let mut stream = TcpStream::connect(server.kafka).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let frame: &[u8] = &[
        0, 0, 0, 14, 0, 3, 0, 1, 0, 0, 0, 1, 0, 4, b'r', b'a', b'w', b'!', 0, 0, 0, 0,
    ][..];
    let mut request = frame.to_vec();
    request[3] = (request.len() - 4) as u8;
    stream.write_all(&request).unwrap();
    let mut byte = [0u8; 1];
    assert_eq!(stream.read(&mut byte).unwrap_or(0), 0, "closed, no response");

    assert!(raw_plain_login(&server, "writer", "change-me"));
    assert!(!raw_plain_login(&server, "writer", "wrong"));

    let rows = server.scan("fluss.secure");
    assert_eq!(rows.len(), 2);
    let logs = server.logs();
    assert!(
        !logs.contains("change-me") && !logs.contains("wrong"),
        "secrets never logged"
    );
}

#[test]
fn acls_gate_produce_and_metadata() {
    let mut extra = SASL.to_vec();
    extra.extend(["authorizer.enabled=true", "super.users=User:admin;User:ANONYMOUS"]);
    let server = Server::start(1, &extra);
    server.sql_ok("CREATE TABLE fluss.guarded (id INT) WITH ('table.kafka.enabled' = 'true')");

    // Without DESCRIBE, Metadata answers TOPIC_AUTHORIZATION_FAILED: the producer fails so.
    let hidden = produce_as(&server, "writer", "change-me", "guarded");
    assert_eq!(
        hidden[0]["error"],
        json!("TOPIC_AUTHORIZATION_FAILED"),
        "{hidden}"
    );
    // DESCRIBE but no WRITE: the partition is refused with TOPIC_AUTHORIZATION_FAILED.
    server.sql_ok(
        "CALL sys.add_acl(resource => 'fluss.guarded', permission => 'ALLOW', principal => 'User:writer', operation => 'DESCRIBE', host => '*')",
    );
    let denied = produce_as(&server, "writer", "change-me", "guarded");
    assert_eq!(
        denied[0]["error"],
        json!("TOPIC_AUTHORIZATION_FAILED"),
        "{denied}"
    );
    assert!(server.scan("fluss.guarded").is_empty());

    server.sql_ok(
        "CALL sys.add_acl(resource => 'fluss.guarded', permission => 'ALLOW', principal => 'User:writer', operation => 'WRITE', host => '*')",
    );
    assert_eq!(
        produce_as(&server, "writer", "change-me", "guarded"),
        json!([{"error": null, "offset": 0}])
    );
    assert_eq!(
        produce_as(&server, "admin", "admin-secret", "guarded"),
        json!([{"error": null, "offset": 1}])
    );
}

/// The topics of a Metadata v9 answer: (name, error, partitions).
fn metadata(raw: &mut Raw, names: Option<&[&str]>) -> Vec<(String, ErrorCode, usize)> {
    let correlation = raw.send(9, &MetadataRequest::for_names(names));
    let response: MetadataResponse = raw.recv(9, correlation);
    response
        .topics
        .into_iter()
        .map(|t| (t.name.unwrap_or_default(), t.error_code, t.partitions.len()))
        .collect()
}

/// A plaintext Kafka listener (principal `User:ANONYMOUS`) and a `sasl` Fluss listener, the
/// authorizer on: Metadata and the admin API say "not authorized" rather than "missing".
#[test]
fn metadata_and_the_admin_api_answer_not_authorized() {
    let server = Server::start(
        1,
        &[
            "security.protocol.map=FLUSS:sasl,KAFKA:plaintext",
            "security.sasl.plain.credentials=admin:admin-secret,reader:reader-secret",
            "authorizer.enabled=true",
            "super.users=User:admin",
        ],
    );
    let admin = Some(("admin", "admin-secret"));
    let reader = Some(("reader", "reader-secret"));
    let sql_as = |user, sql: &str| http_as(server.fluss, "POST", "/v1/sql", sql.as_bytes(), user);
    let acl = |resource: &str, principal: &str, operation: &str| {
        let call = format!(
            "CALL sys.add_acl(resource => '{resource}', permission => 'ALLOW', principal => '{principal}', \
             operation => '{operation}', host => '*')"
        );
        let (status, body) = sql_as(admin, &call);
        assert_eq!(status, 200, "{body}");
    };
    let (status, body) = sql_as(
        admin,
        "CREATE TABLE fluss.guarded (id INT) WITH ('table.kafka.enabled' = 'true')",
    );
    assert_eq!(status, 200, "{body}");

    // Metadata: a named topic without DESCRIBE is TOPIC_AUTHORIZATION_FAILED whether it exists
    // or not; all-topics leaves it out; an invalid name is still INVALID_TOPIC_EXCEPTION.
    let mut raw = Raw::connect(server.kafka);
    assert_eq!(
        metadata(&mut raw, Some(&["guarded", "fluss.nosuch", "a..b"])),
        vec![
            ("guarded".to_string(), ErrorCode::TopicAuthorizationFailed, 0),
            ("fluss.nosuch".to_string(), ErrorCode::TopicAuthorizationFailed, 0),
            ("a..b".to_string(), ErrorCode::InvalidTopicException, 0),
        ]
    );
    assert_eq!(metadata(&mut raw, None), vec![]);
    acl("fluss", "User:ANONYMOUS", "DESCRIBE");
    assert_eq!(
        metadata(&mut raw, Some(&["guarded", "fluss.nosuch"])),
        vec![
            ("guarded".to_string(), ErrorCode::None, 1),
            ("fluss.nosuch".to_string(), ErrorCode::UnknownTopicOrPartition, 0),
        ]
    );
    assert_eq!(
        metadata(&mut raw, None),
        vec![("fluss.guarded".to_string(), ErrorCode::None, 1)]
    );

    // The admin API: SHOW TABLES, the table and its scan say 403 AUTHORIZATION_FAILED.
    let (status, body) = sql_as(reader, "SHOW TABLES FROM fluss");
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("AUTHORIZATION_FAILED"), "{body}");
    // So does USE, for a database that exists and one that does not.
    for database in ["fluss", "nosuch"] {
        let (status, body) = sql_as(reader, &format!("USE {database}"));
        assert_eq!(status, 403, "USE {database}: {body}");
        assert!(
            body.contains(&format!("not authorized to DESCRIBE database '{database}'")),
            "{body}"
        );
    }
    let (status, body) = sql_as(admin, "USE nosuch");
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("DATABASE_NOT_FOUND"), "{body}");
    // /metrics needs DESCRIBE on the cluster (a super user has it).
    let (status, body) = http_as(server.fluss, "GET", "/metrics", b"", reader);
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("principal User:reader is not authorized to DESCRIBE the cluster"),
        "{body}"
    );
    let (status, body) = http_as(server.fluss, "GET", "/metrics", b"", admin);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("kafluss_requests_total"), "{body}");
    let scan_path = "/v1/tables/fluss.guarded/scan";
    let scan = |user| http_as(server.fluss, "GET", scan_path, b"", user);
    let (status, body) = scan(reader);
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("principal User:reader is not authorized to DESCRIBE table 'fluss.guarded'"),
        "{body}"
    );
    let (status, body) = http_as(server.fluss, "GET", "/v1/tables/fluss.nosuch/scan", b"", reader);
    assert_eq!(status, 403, "a missing table is not revealed either: {body}");
    // kafluss scan as `reader`: (exit code, stderr).
    let kafluss_scan = |password: &str| {
        let output = Command::new(binary())
            .args(["scan", "fluss.guarded", "--server", &server.fluss.to_string()])
            .args(["--user", "reader", "--password", password])
            .env_remove("KAFLUSS_USER")
            .env_remove("KAFLUSS_PASSWORD")
            .output()
            .expect("run kafluss scan");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, stderr) = kafluss_scan("reader-secret");
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("server answered 403: principal User:reader is not authorized"),
        "{stderr}"
    );

    acl("fluss.guarded", "User:reader", "DESCRIBE");
    let (status, body) = sql_as(reader, "SHOW TABLES FROM fluss");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("guarded"), "{body}");
    let (status, body) = sql_as(reader, "USE fluss");
    assert_eq!(status, 200, "{body}");
    let (status, body) = scan(reader);
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("not authorized to READ table 'fluss.guarded'"),
        "{body}"
    );
    let (status, body) = http_as(server.fluss, "GET", "/v1/tables/fluss.nosuch/scan", b"", admin);
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("TABLE_NOT_FOUND"), "{body}");

    acl("fluss.guarded", "User:reader", "READ");
    let (status, body) = scan(reader);
    assert_eq!(status, 200, "{body}");
    let (code, stderr) = kafluss_scan("reader-secret");
    assert_eq!(code, Some(0), "{stderr}");
    acl("CLUSTER", "User:reader", "DESCRIBE");
    let (status, body) = http_as(server.fluss, "GET", "/metrics", b"", reader);
    assert_eq!(status, 200, "{body}");
    // Credentials given but wrong: the CLI says so.
    let (code, stderr) = kafluss_scan("nope");
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("refused the credentials of user 'reader'"),
        "{stderr}"
    );
}

/// With the authorizer on, Metadata's authorized operations are those the principal's Fluss
/// ACLs grant: WRITE and DESCRIBE on a table are Kafka's WRITE, DESCRIBE and DESCRIBE_CONFIGS
/// on the topic, and WRITE on some table is IDEMPOTENT_WRITE on the cluster.
#[test]
fn metadata_authorized_operations_follow_the_acls() {
    let server = Server::start(
        1,
        &[
            "security.protocol.map=FLUSS:sasl,KAFKA:plaintext",
            "security.sasl.plain.credentials=admin:admin-secret",
            "authorizer.enabled=true",
            "super.users=User:admin",
        ],
    );
    let admin = Some(("admin", "admin-secret"));
    let sql = |sql: &str| {
        let (status, body) = http_as(server.fluss, "POST", "/v1/sql", sql.as_bytes(), admin);
        assert_eq!(status, 200, "{body}");
    };
    sql("CREATE TABLE fluss.guarded (id INT) WITH ('table.kafka.enabled' = 'true')");
    sql("CREATE TABLE fluss.other (id INT) WITH ('table.kafka.enabled' = 'true')");
    for operation in ["WRITE", "DESCRIBE"] {
        sql(&format!(
            "CALL sys.add_acl(resource => 'fluss.guarded', permission => 'ALLOW', \
             principal => 'User:ANONYMOUS', operation => '{operation}', host => '*')"
        ));
    }
    let mut raw = Raw::connect(server.kafka);
    let request = MetadataRequest {
        include_cluster_authorized_operations: true,
        include_topic_authorized_operations: true,
        ..MetadataRequest::for_names(Some(&["guarded", "other"]))
    };
    let correlation = raw.send(10, &request);
    let response: MetadataResponse = raw.recv(10, correlation);
    let topics: Vec<_> = response
        .topics
        .iter()
        .map(|t| (t.error_code, t.topic_authorized_operations))
        .collect();
    // WRITE (4), DESCRIBE (8), DESCRIBE_CONFIGS (10); `other` is not described at all.
    let write_describe = 1 << 4 | 1 << 8 | 1 << 10;
    assert_eq!(write_describe, 1296);
    assert_eq!(
        topics,
        vec![
            (ErrorCode::None, write_describe),
            (ErrorCode::TopicAuthorizationFailed, i32::MIN),
        ]
    );
    // Nothing granted on CLUSTER: IDEMPOTENT_WRITE (12) alone, from WRITE on a table.
    assert_eq!(response.cluster_authorized_operations, 1 << 12);
}

/// Both listeners on SASL, the authorizer on, `admin` the super user.
const SECURED: [&str; 6] = [
    "security.protocol.map=FLUSS:sasl,KAFKA:sasl",
    "security.sasl.enabled.mechanisms=PLAIN",
    "security.sasl.plain.credentials=admin:admin-secret",
    "authorizer.enabled=true",
    "super.users=User:admin",
    // Wrong and right passwords back to back; the throttle is tested in broker_login_throttle.rs.
    "security.login.failure-delay=0",
];

/// Every file under `dir` that contains `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if std::fs::read(&path)
                .unwrap()
                .windows(needle.len())
                .any(|window| window == needle.as_bytes())
            {
                found.push(path);
            }
        }
    }
    found
}

fn sql_as(server: &Server, user: (&str, &str), sql: &str) -> (u16, String) {
    http_as(server.fluss, "POST", "/v1/sql", sql.as_bytes(), Some(user))
}

/// kcat over SASL/PLAIN as `user`: one JSON message to partition 0 of `topic`.
fn kcat_produce_as(server: &Server, user: &str, password: &str, topic: &str, line: &str) -> (bool, String) {
    let username = format!("sasl.username={user}");
    let password = format!("sasl.password={password}");
    let sasl = [
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        "sasl.mechanisms=PLAIN",
        "-X",
        &username,
        "-X",
        &password,
    ];
    let (ok, _, err) = kcat_produce(server, topic, 0, &[line], &sasl);
    (ok, err)
}

#[test]
fn dynamic_credentials_are_stored_hashed_and_work_after_a_restart() {
    let mut server = Server::start(1, &SECURED);
    let admin = ("admin", "admin-secret");
    let set = "CALL sys.set_cluster_configs(config_pairs => 'security.sasl.plain.credentials', \
               'admin:admin-new-pw,writer:writer-new-pw')";
    let (status, body) = sql_as(&server, admin, set);
    assert_eq!(status, 200, "{body}");
    let (status, body) = sql_as(
        &server,
        ("admin", "admin-new-pw"),
        "CREATE TABLE fluss.hashed (id INT) WITH ('table.kafka.enabled' = 'true'); \
         CALL sys.add_acl(resource => 'fluss.hashed', permission => 'ALLOW', principal => 'User:writer', \
         operation => 'ALL', host => '*')",
    );
    assert_eq!(status, 200, "{body}");
    let data_dir = server.data_dir.clone();
    for secret in ["admin-new-pw", "writer-new-pw"] {
        assert_eq!(
            files_containing(&data_dir, secret),
            Vec::<PathBuf>::new(),
            "{secret} on disk"
        );
    }
    let catalog = std::fs::read_to_string(data_dir.join("catalog.json")).unwrap();
    assert!(catalog.contains("admin:pbkdf2-sha256$4096$"), "{catalog}");
    assert!(catalog.contains("writer:pbkdf2-sha256$4096$"), "{catalog}");
    // get_cluster_configs shows neither a password nor a hash.
    let (status, shown) = sql_as(
        &server,
        ("admin", "admin-new-pw"),
        "CALL sys.get_cluster_configs()",
    );
    assert_eq!(status, 200, "{shown}");
    assert!(
        shown.contains("[\"security.sasl.plain.credentials\",\"******\",\"DYNAMIC\"]"),
        "{shown}"
    );
    assert!(!shown.contains("pbkdf2") && !shown.contains("new-pw"), "{shown}");
    server.terminate();

    let server = Server::start_in(&data_dir, 1, &SECURED);
    // HTTP Basic: the new password, on every request (the first derives, the rest are
    // remembered); the configured one is refused.
    for _ in 0..3 {
        let (status, body) = sql_as(&server, ("admin", "admin-new-pw"), "SHOW TABLES");
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("hashed"), "{body}");
    }
    let (status, body) = sql_as(&server, admin, "SHOW TABLES");
    assert_eq!(status, 401, "{body}");
    let (status, _) = sql_as(&server, ("admin", "pbkdf2-sha256$4096$"), "SHOW TABLES");
    assert_eq!(status, 401);
    // SASL/PLAIN: kcat produces as writer; a raw login with the old or a wrong password fails.
    let (ok, err) = kcat_produce_as(&server, "writer", "writer-new-pw", "hashed", "{\"id\":1}");
    assert!(ok, "kcat as writer: {err}");
    assert!(raw_plain_login(&server, "writer", "writer-new-pw"));
    assert!(!raw_plain_login(&server, "writer", "writer-new-p"));
    assert!(!raw_plain_login(&server, "admin", "admin-secret"));
    let (status, rows) = http_as(
        server.fluss,
        "GET",
        "/v1/tables/fluss.hashed/scan?format=jsonl",
        b"",
        Some(("writer", "writer-new-pw")),
    );
    assert_eq!(status, 200, "{rows}");
    assert_eq!(rows.trim(), "{\"bucket\":0,\"offset\":0,\"row\":{\"id\":1}}");
    let logs = server.logs();
    assert!(!logs.contains("new-pw"), "secrets never logged");
}

/// A catalog.json written by the previous version, with plaintext dynamic credentials.
const PLAINTEXT_FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/plaintext-credentials/catalog.json"
);

#[test]
fn a_plaintext_catalog_of_an_earlier_version_loads_is_hashed_and_its_passwords_work() {
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    std::fs::create_dir_all(&data_dir).unwrap();
    std::fs::copy(PLAINTEXT_FIXTURE, data_dir.join("catalog.json")).unwrap();
    let server = Server::start_in(&data_dir, 1, &SECURED);
    assert!(
        server
            .logs()
            .contains("held plaintext passwords (written by an earlier version): rewritten as salted hashes"),
        "{}",
        server.logs()
    );
    for secret in ["old-admin-secret", "old-writer-secret"] {
        assert_eq!(
            files_containing(&data_dir, secret),
            Vec::<PathBuf>::new(),
            "{secret} on disk"
        );
    }
    let admin = ("admin", "old-admin-secret");
    let (status, body) = sql_as(&server, admin, "SHOW TABLES FROM sales");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("orders"), "the tables load too: {body}");
    // The fixture lets writer WRITE sales.orders; kcat needs DESCRIBE for its metadata.
    let grant = "CALL sys.add_acl(resource => 'sales.orders', permission => 'ALLOW', \
                 principal => 'User:writer', operation => 'DESCRIBE', host => '*')";
    let (status, body) = sql_as(&server, admin, grant);
    assert_eq!(status, 200, "{body}");
    let (ok, err) = kcat_produce_as(
        &server,
        "writer",
        "old-writer-secret",
        "sales.orders",
        "{\"order_id\":7}",
    );
    assert!(ok, "kcat as writer: {err}");
    assert!(!raw_plain_login(&server, "writer", "wrong"));
    let (status, rows) = http_as(
        server.fluss,
        "GET",
        "/v1/tables/sales.orders/scan?format=jsonl",
        b"",
        Some(admin),
    );
    assert_eq!(status, 200, "{rows}");
    assert!(rows.contains("\"order_id\":7"), "{rows}");
}

#[test]
fn a_credential_update_that_locks_out_the_super_users_is_refused_even_across_a_restart() {
    let mut server = Server::start(1, &SECURED);
    let admin = ("admin", "admin-secret");
    let path = server.data_dir.join("catalog.json");
    let before = std::fs::read(&path).unwrap();
    let lock_out = "CALL sys.set_cluster_configs(config_pairs => 'security.sasl.plain.credentials', \
                    'writer:only-writer')";
    let (status, body) = sql_as(&server, admin, lock_out);
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains(
            "refused, nothing changed: after this change no super user could log in: \
             none of super.users (User:admin) has a password in security.sasl.plain.credentials"
        ),
        "{body}"
    );
    assert!(!body.contains("only-writer"), "{body}");
    assert_eq!(std::fs::read(&path).unwrap(), before, "nothing stored");
    assert!(
        !raw_plain_login(&server, "writer", "only-writer"),
        "nothing applied"
    );
    let (status, body) = sql_as(&server, admin, "SHOW DATABASES");
    assert_eq!(status, 200, "{body}");

    let keep = "CALL sys.set_cluster_configs(config_pairs => 'security.sasl.plain.credentials', \
                'admin:admin-2,writer:only-writer')";
    let (status, body) = sql_as(&server, admin, keep);
    assert_eq!(status, 200, "{body}");
    let data_dir = server.data_dir.clone();
    server.terminate();

    // Restarted with configured credentials that name no super user: the stored ones still
    // let admin in, and going back to the configured ones is refused.
    let mut extra = SECURED.to_vec();
    extra[2] = "security.sasl.plain.credentials=writer:configured";
    let server = Server::start_in(&data_dir, 1, &extra);
    assert!(
        !server.logs().contains("no super user could log in"),
        "{}",
        server.logs()
    );
    let reset = "CALL sys.reset_cluster_configs(config_keys => 'security.sasl.plain.credentials')";
    let (status, body) = sql_as(&server, ("admin", "admin-2"), reset);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("no super user could log in"), "{body}");
    let (status, body) = sql_as(&server, ("admin", "admin-2"), "SHOW DATABASES");
    assert_eq!(status, 200, "{body}");
    drop(server);

    // A data dir that would lock them out (here: configured so) says so loudly at start-up.
    let locked = Server::start(1, &extra);
    let logs = locked.logs();
    let line = logs
        .lines()
        .find(|line| line.contains("no super user could log in"))
        .unwrap_or_else(|| panic!("{logs}"));
    assert!(
        line.contains("ERROR") && line.contains("Fix: set super.users"),
        "{line}"
    );
    assert!(!logs.contains("writer:configured"), "{line}");
}

/// Produce checks WRITE before it looks the table up, as Kafka checks authorization first: a
/// principal without WRITE gets TOPIC_AUTHORIZATION_FAILED for an existing table at a partition
/// it does not have, for a missing table and for a missing database alike (the answer says
/// nothing of what exists); an invalid name is still INVALID_TOPIC_EXCEPTION.
#[test]
fn produce_without_write_learns_nothing_of_what_exists() {
    let server = Server::start(
        1,
        &[
            "security.protocol.map=FLUSS:sasl,KAFKA:plaintext",
            "security.sasl.plain.credentials=admin:admin-secret",
            "authorizer.enabled=true",
            "super.users=User:admin",
        ],
    );
    let (status, body) = sql_as(
        &server,
        ("admin", "admin-secret"),
        "CREATE TABLE fluss.guarded (id INT) WITH ('table.kafka.enabled' = 'true', 'bucket.num' = '3')",
    );
    assert_eq!(status, 200, "{body}");
    let mut builder = kafluss_protocol::RecordBatchBuilder::new(kafluss_protocol::Compression::None);
    builder.append(1_700_000_000_000, None, Some(br#"{"id": 1}"#.as_slice()), &[]);
    let records = builder.build().unwrap();
    let mut raw = Raw::connect(server.kafka);
    for (topic, partition, expected) in [
        ("guarded", 7, ErrorCode::TopicAuthorizationFailed),
        ("guarded", 0, ErrorCode::TopicAuthorizationFailed),
        ("fluss.nosuch", 0, ErrorCode::TopicAuthorizationFailed),
        ("nodb.x", 0, ErrorCode::TopicAuthorizationFailed),
        ("a..b", 0, ErrorCode::InvalidTopicException),
    ] {
        let response = raw.produce(9, &support::produce_request(1, topic, partition, records.clone()));
        let answer = &response.topics[0].partitions[0];
        assert_eq!(
            answer.error_code, expected,
            "{topic} p{partition}: {:?}",
            answer.error_message
        );
        if expected == ErrorCode::TopicAuthorizationFailed {
            let message = answer.error_message.as_deref().unwrap_or("");
            assert!(
                !message.contains("partition") && !message.contains("does not exist"),
                "{topic} p{partition}: {message}"
            );
        }
    }
}

/// `super.users` names users: a principal of another type (`user:bob`, `Group:ops`) could never
/// match a connection (each is `User:<name>`), and a wildcard is no user. Start-up refuses
/// them, naming the value, instead of running with a super user that never applies; the
/// message no longer offers `ALL` for the value it refuses.
#[test]
fn super_users_that_can_never_match_stop_the_start() {
    for (super_users, named, says) in [
        ("User:admin;user:bob", "user:bob", "the type must be `User`"),
        ("Group:ops", "Group:ops", "the type must be `User`"),
        ("ALL", "ALL", "is a wildcard"),
        ("*", "*", "is a wildcard"),
        ("User:*", "User:*", "is a wildcard"),
    ] {
        let define = format!("super.users={super_users}");
        let (code, stdout, stderr) = serve_with(&["authorizer.enabled=true", &define]);
        assert_eq!(code, Some(1), "{define}: stdout {stdout} stderr {stderr}");
        assert!(!stdout.contains("kafluss ready"), "{define}: {stdout}");
        assert!(
            stderr.contains("super.users") && stderr.contains(&format!("`{named}`")) && stderr.contains(says),
            "{define}: {stderr}"
        );
        assert!(!stderr.contains("or ALL"), "{define}: {stderr}");
    }
}

/// With the authorizer on and the Fluss listener plaintext, every SQL request is
/// `User:ANONYMOUS`: unless it is a super user nobody can administer the server there. Start-up
/// says so at WARN with both ways out, and the authorizer is not weakened: `add_acl` is still
/// refused. With `User:ANONYMOUS` in super.users there is no warning and it is allowed.
#[test]
fn a_plaintext_fluss_listener_with_the_authorizer_on_is_warned_about() {
    let server = Server::start(1, &["authorizer.enabled=true", "super.users=User:admin"]);
    assert!(
        server.log_shows(
            "authorizer.enabled is true and Fluss listener FLUSS is plaintext",
            Duration::from_secs(5)
        ),
        "{}",
        server.logs()
    );
    let logs = server.logs();
    assert!(
        logs.contains("map FLUSS to sasl") && logs.contains("add User:ANONYMOUS to super.users"),
        "{logs}"
    );
    let grant = "CALL sys.add_acl(resource => 'CLUSTER', permission => 'ALLOW', principal => 'User:ANONYMOUS', operation => 'ALL')";
    let (status, body) = server.sql(grant);
    assert_eq!(status, 403, "{body}");

    let server = Server::start(1, &["authorizer.enabled=true", "super.users=User:ANONYMOUS"]);
    assert_eq!(server.sql(grant).0, 200);
    assert!(!server.logs().contains("WARN"), "{}", server.logs());
}
