//! SASL/PLAIN on the Kafka listener and ACL checks on produce and metadata, through the real
//! binary: confluent-kafka and kcat authenticate, a wrong password fails, nothing is served
//! before authentication, and WRITE/DESCRIBE are enforced when the authorizer is on.

#[path = "broker_support.rs"]
mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use kafluss_protocol::{ErrorCode, MetadataRequest, MetadataResponse};
use serde_json::{json, Value};
use support::{binary, http_as, kcat, python_ok, run_with_timeout, Raw, Server};

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

    // SaslHandshake v0, then the raw PLAIN token: an empty frame means authenticated.
    let mut stream = TcpStream::connect(server.kafka).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut handshake = vec![0, 17, 0, 0, 0, 0, 0, 7, 0, 3, b'r', b'a', b'w', 0, 5];
    handshake.extend_from_slice(b"PLAIN");
    let mut framed = (handshake.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&handshake);
    stream.write_all(&framed).unwrap();
    let mut prefix = [0u8; 4];
    stream.read_exact(&mut prefix).unwrap();
    let mut body = vec![0u8; i32::from_be_bytes(prefix) as usize];
    stream.read_exact(&mut body).unwrap();
    assert_eq!(&body[..6], &[0, 0, 0, 7, 0, 0], "correlation 7, error NONE");
    let token = b"\0writer\0change-me";
    let mut framed = (token.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(token);
    stream.write_all(&framed).unwrap();
    stream.read_exact(&mut prefix).unwrap();
    assert_eq!(
        i32::from_be_bytes(prefix),
        0,
        "empty frame after a good raw token"
    );

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
    // Credentials given but wrong: the CLI says so.
    let (code, stderr) = kafluss_scan("nope");
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("refused the credentials of user 'reader'"),
        "{stderr}"
    );
}
