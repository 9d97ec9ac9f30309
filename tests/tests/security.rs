//! Authentication and authorization end to end (issue 6), with the real binary and
//! confluent-kafka (librdkafka) driven by `tests/clients/security.py`:
//!
//! - `client_that_skips_sasl_is_disconnected`: on a SASL listener, Metadata or Produce as the
//!   first request closes the connection without a byte; SaslAuthenticate before a handshake is
//!   ILLEGAL_SASL_STATE; a PLAINTEXT producer delivers nothing; nothing is appended.
//! - `handshake_v0_raw_tokens`: kafka-python pinned to api_version 0.11 authenticates with
//!   SaslHandshake v0 and a raw token frame; a wrong password is refused.
//! - `credential_rotation`: connection A keeps producing after `set_cluster_configs` rotates the
//!   password; a new connection with the old password fails, with the new one succeeds;
//!   `get_cluster_configs` never shows a password; after a restart the rotation still holds.
//! - `acls`: undescribable tables look missing (named and all-topics), DESCRIBE without WRITE →
//!   TOPIC_AUTHORIZATION_FAILED, a database grant covers its tables, DENY beats ALLOW, the super
//!   user bypasses, `drop_acl` restores, procedures need ALTER on CLUSTER; scans prove exactly
//!   the allowed rows landed.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use kafluss_tests::clients::{available, Client};
use kafluss_tests::process::run_with_timeout;
use kafluss_tests::server::{KaflussServer, ServerConfig};
use serde_json::{json, Value};

/// Bound on one scenario run (each step inside is bounded much lower).
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(300);

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

fn python() -> PathBuf {
    std::env::var_os("KAFLUSS_PYTHON")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".venv").join("bin").join("python"))
}

/// Runs one scenario of `security.py`; panics with every failed step and the server's log.
fn run_scenario(server: &KaflussServer, scenario: &str, config: Value) {
    let dir = tempfile::tempdir().expect("temp dir");
    let config_file = dir.path().join("config.json");
    std::fs::write(&config_file, config.to_string()).expect("write config");
    let script = workspace_root().join("tests").join("clients").join("security.py");
    let done = run_with_timeout(
        Command::new(python()).arg(script).arg(scenario).arg(&config_file),
        b"",
        SCENARIO_TIMEOUT,
    )
    .expect("security.py runs");
    let stdout = done.stdout_text();
    let steps: Vec<Value> = stdout
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let failed: Vec<&Value> = steps.iter().filter(|s| s["ok"] != json!(true)).collect();
    assert!(
        !steps.is_empty() && failed.is_empty() && done.status.success(),
        "scenario {scenario}: {} of {} steps failed:\n{}\nstderr:\n{}\nserver log:\n{}",
        failed.len(),
        steps.len(),
        failed
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
        done.stderr_text(),
        server.log_tail()
    );
    println!("{scenario}: {} steps passed", steps.len());
}

fn base_config(server: &KaflussServer) -> Value {
    json!({
        "bootstrap": server.kafka_bootstrap(),
        "admin": format!("http://{}", server.fluss_addr()),
    })
}

fn merge(mut base: Value, extra: Value) -> Value {
    if let (Some(base), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
        base.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    base
}

/// Secrets must not appear in the server's log or in `/metrics`.
fn assert_no_secret(server: &KaflussServer, secrets: &[&str]) {
    let log = server.log_tail();
    let metrics = server.metrics().expect("metrics");
    for secret in secrets {
        assert!(
            !log.contains(secret),
            "server log shows a password ({secret}):\n{log}"
        );
        assert!(!metrics.contains(secret), "/metrics shows a password ({secret})");
    }
}

fn row_count(server: &KaflussServer, table: &str) -> usize {
    server
        .scan(table)
        .unwrap_or_else(|e| panic!("scan {table}: {e}"))
        .len()
}

const JSON_TABLE: &str = "(tag STRING, n INT) WITH ('table.kafka.enabled' = 'true')";

#[test]
fn client_that_skips_sasl_is_disconnected() {
    if !available(Client::ConfluentKafka) {
        return;
    }
    let server =
        KaflussServer::start(ServerConfig::sasl_plain(&[("writer", "change-me")])).expect("server starts");
    server
        .sql(&format!("CREATE TABLE fluss.gate {JSON_TABLE}"))
        .expect("create table");
    let config = merge(
        base_config(&server),
        json!({"topic": "gate", "password": "change-me"}),
    );
    run_scenario(&server, "gate", config);
    assert_eq!(
        row_count(&server, "fluss.gate"),
        0,
        "nothing may be appended without SASL"
    );
}

#[test]
fn handshake_v0_raw_tokens() {
    if !available(Client::ConfluentKafka) {
        return;
    }
    let server =
        KaflussServer::start(ServerConfig::sasl_plain(&[("writer", "change-me")])).expect("server starts");
    server
        .sql(&format!("CREATE TABLE fluss.v0 {JSON_TABLE}"))
        .expect("create table");
    let config = merge(
        base_config(&server),
        json!({"topic": "v0", "password": "change-me"}),
    );
    run_scenario(&server, "handshake-v0", config);
    assert_eq!(
        row_count(&server, "fluss.v0"),
        1,
        "only the authenticated record landed"
    );
}

#[test]
fn credential_rotation() {
    if !available(Client::ConfluentKafka) {
        return;
    }
    let server =
        KaflussServer::start(ServerConfig::sasl_plain(&[("writer", "old-secret")])).expect("server starts");
    server
        .sql(&format!("CREATE TABLE fluss.rotation {JSON_TABLE}"))
        .expect("create table");
    let passwords = json!({"topic": "rotation", "old_password": "old-secret", "new_password": "new-secret"});
    run_scenario(&server, "rotate", merge(base_config(&server), passwords.clone()));
    assert_eq!(row_count(&server, "fluss.rotation"), 15);
    assert_no_secret(&server, &["old-secret", "new-secret", "Leak3dPw", "orphanLeak"]);

    let server = server.restart().expect("server restarts");
    run_scenario(&server, "after-restart", merge(base_config(&server), passwords));
    assert_eq!(row_count(&server, "fluss.rotation"), 20);
    assert_no_secret(&server, &["old-secret", "new-secret"]);
}

#[test]
fn acls() {
    if !available(Client::ConfluentKafka) {
        return;
    }
    let users = [
        ("admin", "admin-secret"),
        ("writer", "writer-secret"),
        ("reader", "reader-secret"),
    ];
    let config = ServerConfig::sasl_plain(&users)
        .with("security.protocol.map", "FLUSS:sasl,KAFKA:sasl")
        .with("authorizer.enabled", "true")
        .with("super.users", "User:admin")
        .with_http_auth("admin", "admin-secret");
    let server = KaflussServer::start(config).expect("server starts");
    server
        .sql(&format!(
            "CREATE DATABASE acl; CREATE DATABASE hidden; CREATE TABLE acl.guarded {JSON_TABLE}; \
             CREATE TABLE acl.other {JSON_TABLE}; CREATE TABLE hidden.secret {JSON_TABLE}"
        ))
        .expect("create tables");
    let scenario = merge(
        base_config(&server),
        json!({
            "admin_auth": ["admin", "admin-secret"],
            "admin_password": "admin-secret",
            "writer_password": "writer-secret",
            "reader_password": "reader-secret",
        }),
    );
    run_scenario(&server, "acl", scenario);
    // Exactly the allowed produce steps landed: 4 (database grant) + 1 (after drop_acl).
    assert_eq!(row_count(&server, "acl.guarded"), 5);
    assert_eq!(row_count(&server, "acl.other"), 3);
    assert_eq!(row_count(&server, "hidden.secret"), 2);
    assert_no_secret(&server, &["admin-secret", "writer-secret", "reader-secret"]);
}
