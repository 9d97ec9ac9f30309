//! The admin HTTP server against `start_admin_server` on 127.0.0.1:0, with test hooks, and
//! the `kafluss sql` client functions against it.

use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kafluss_auth::Principal;
use kafluss_broker::admin::{start_admin_server, AdminContext, HookError, ScanResponse};
use kafluss_broker::catalog::{Catalog, CatalogConfig, TableInfo};
use kafluss_tests::http::BasicAuth;
use serde_json::Value;

struct Reply {
    status: u16,
    /// Names in lower case.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&self.body)))
    }
}

/// One request; `auth` is `user:password`.
fn request(addr: SocketAddr, method: &str, path: &str, body: &[u8], auth: Option<&str>) -> Reply {
    let auth = auth.map(|user_password| {
        let (user, password) = user_password.split_once(':').unwrap_or((user_password, ""));
        BasicAuth::new(user, password)
    });
    let reply =
        kafluss_tests::http::request(addr, method, path, body, auth.as_ref(), Duration::from_secs(30))
            .unwrap();
    Reply {
        status: reply.status,
        headers: reply.headers,
        body: reply.body,
    }
}

fn sql(addr: SocketAddr, text: &str) -> Reply {
    request(addr, "POST", "/v1/sql", text.as_bytes(), None)
}

fn catalog(dir: &std::path::Path) -> Arc<Catalog> {
    Arc::new(Catalog::open(CatalogConfig::new(dir)).unwrap())
}

#[test]
fn sql_endpoint_answers_results_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = AdminContext::new(catalog(dir.path()), Arc::new(AtomicBool::new(true)));
    let server = start_admin_server("127.0.0.1:0", ctx).unwrap();
    let addr = server.local_addr();
    assert_ne!(addr.port(), 0);

    let reply = sql(addr, "CREATE DATABASE sales; SHOW DATABASES");
    assert_eq!(reply.status, 200);
    let json = reply.json();
    assert_eq!(json["results"][0]["kind"], "done");
    assert_eq!(json["results"][1]["kind"], "rows");
    assert_eq!(
        json["results"][1]["rows"],
        serde_json::json!([["fluss"], ["sales"]])
    );

    let reply = sql(addr, "CREATE DATABASE sales");
    assert_eq!(reply.status, 409);
    assert_eq!(reply.json()["error"]["code"], "DATABASE_ALREADY_EXISTS");
    assert!(reply.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("sales"));

    let reply = sql(addr, "CREATE TABLE t (a INTT)");
    assert_eq!(reply.status, 400);
    assert_eq!(reply.json()["error"]["code"], "SYNTAX_ERROR");
    assert!(reply.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("line 1, column 19"));

    let reply = request(addr, "GET", "/v1/sql", b"", None);
    assert_eq!(reply.status, 405);
    let reply = request(addr, "GET", "/nope", b"", None);
    assert_eq!(reply.status, 404);
    assert_eq!(reply.json()["error"]["code"], "NOT_FOUND");
    server.stop();
}

#[test]
fn a_method_a_path_does_not_take_is_405_with_allow() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = AdminContext::new(catalog(dir.path()), Arc::new(AtomicBool::new(true)));
    let server = start_admin_server("127.0.0.1:0", ctx).unwrap();
    let addr = server.local_addr();
    assert_eq!(sql(addr, "CREATE TABLE t (a INT)").status, 200);
    for (method, path, allow) in [
        ("GET", "/v1/sql", "POST"),
        ("PUT", "/v1/sql", "POST"),
        ("POST", "/metrics", "GET"),
        // The table exists: DELETE is a method it does not take, not a missing path.
        ("DELETE", "/v1/tables/fluss.t", "GET"),
        ("POST", "/v1/tables/fluss.t/scan", "GET"),
    ] {
        let reply = request(addr, method, path, b"", None);
        assert_eq!(reply.status, 405, "{method} {path}");
        assert_eq!(reply.json()["error"]["code"], "METHOD_NOT_ALLOWED");
        let allowed: Vec<&str> = reply
            .headers
            .iter()
            .filter(|(name, _)| name == "allow")
            .map(|(_, value)| value.as_str())
            .collect();
        assert_eq!(allowed, [allow], "{method} {path}: {:?}", reply.headers);
    }
    let reply = request(addr, "DELETE", "/v1/nope", b"", None);
    assert_eq!(reply.status, 404);
    server.stop();
}

#[test]
fn request_bodies_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let mut ctx = AdminContext::new(catalog(dir.path()), Arc::new(AtomicBool::new(true)));
    ctx.max_body_bytes = 64;
    let server = start_admin_server("127.0.0.1:0", ctx).unwrap();
    let big = format!("SHOW DATABASES; {}", "-- padding\n".repeat(100));
    let reply = sql(server.local_addr(), &big);
    assert_eq!(reply.status, 413);
    assert_eq!(reply.json()["error"]["code"], "REQUEST_TOO_LARGE");
    assert_eq!(sql(server.local_addr(), "SHOW DATABASES").status, 200);
    let reply = request(server.local_addr(), "POST", "/v1/sql", &[0xff, 0xfe], None);
    assert_eq!(reply.status, 400);
}

#[test]
fn healthz_follows_the_readiness_and_stopping_flags() {
    let dir = tempfile::tempdir().unwrap();
    let ready = Arc::new(AtomicBool::new(false));
    let context = AdminContext::new(catalog(dir.path()), Arc::clone(&ready));
    let stopping = Arc::clone(&context.stopping);
    let server = start_admin_server("127.0.0.1:0", context).unwrap();
    let health = || {
        let reply = request(server.local_addr(), "GET", "/healthz", b"", None);
        (reply.status, String::from_utf8_lossy(&reply.body).to_string())
    };
    assert_eq!(health(), (503, "starting\n".to_string()));
    ready.store(true, Ordering::Release);
    assert_eq!(health(), (200, "ok\n".to_string()));
    stopping.store(true, Ordering::Release);
    assert_eq!(health(), (503, "shutting down\n".to_string()));
}

#[test]
fn table_endpoint_describes_schema_mapping_and_row_counts() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = catalog(dir.path());
    let mut ctx = AdminContext::new(Arc::clone(&catalog), Arc::new(AtomicBool::new(true)));
    ctx.row_counts = Some(Arc::new(|table: &TableInfo| {
        (0..table.bucket_count).map(|b| (b, u64::from(b) * 10)).collect()
    }));
    let server = start_admin_server("127.0.0.1:0", ctx).unwrap();
    let addr = server.local_addr();
    let reply = sql(
        addr,
        "CREATE DATABASE sales; CREATE TABLE sales.orders (order_id BIGINT, _kafka_key BYTES) \
         WITH ('table.kafka.enabled' = 'true', 'bucket.num' = '3'); CREATE TABLE plain (x INT NOT NULL)",
    );
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));

    let json = request(addr, "GET", "/v1/tables/sales.orders", b"", None).json();
    assert_eq!(json["database"], "sales");
    assert_eq!(json["table"], "orders");
    assert_eq!(json["bucket_count"], 3);
    assert_eq!(json["columns"][0]["name"], "order_id");
    assert_eq!(json["columns"][0]["type"], "BIGINT");
    assert_eq!(json["options"]["table.kafka.enabled"], "true");
    assert_eq!(json["kafka"]["served"], true);
    assert_eq!(json["kafka"]["topic"], "sales.orders");
    assert_eq!(json["kafka"]["value_type"], "parse_json");
    assert_eq!(json["kafka"]["system_columns"], serde_json::json!(["_kafka_key"]));
    assert_eq!(
        json["buckets"],
        serde_json::json!([{"bucket":0,"rows":0},{"bucket":1,"rows":10},{"bucket":2,"rows":20}])
    );
    assert_eq!(json["row_count"], 30);

    let json = request(addr, "GET", "/v1/tables/plain", b"", None).json();
    assert_eq!(json["database"], "fluss", "bare names use the default database");
    assert_eq!(json["kafka"]["enabled"], false);
    assert_eq!(json["kafka"]["served"], false);

    let reply = request(addr, "GET", "/v1/tables/sales.none", b"", None);
    assert_eq!(reply.status, 404);
    assert_eq!(reply.json()["error"]["code"], "TABLE_NOT_FOUND");
}

#[test]
fn scan_and_metrics_go_to_their_hooks() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = catalog(dir.path());
    let mut ctx = AdminContext::new(Arc::clone(&catalog), Arc::new(AtomicBool::new(true)));
    let server_without_hooks = start_admin_server("127.0.0.1:0", ctx.clone()).unwrap();
    ctx.metrics = Some(Arc::new(|| "kafluss_requests_total 7\n".to_string()));
    ctx.scan = Some(Arc::new(|table: &TableInfo, query: &str| {
        if query.contains("bucket=9") {
            return Err(HookError::new(
                400,
                "BAD_SCAN_PARAMETER",
                "bucket 9 does not exist",
            ));
        }
        let (name, late_error) = (table.path(), query.contains("fail=late"));
        Ok(ScanResponse {
            content_type: "application/x-ndjson".to_string(),
            body: Box::new(move |out: &mut dyn Write| {
                if late_error {
                    return Err(HookError::new(400, "NO_SUCH_COLUMN", "column z does not exist"));
                }
                for offset in 0..50_000 {
                    writeln!(
                        out,
                        "{{\"bucket\":0,\"offset\":{offset},\"row\":{{\"t\":\"{name}\"}}}}"
                    )
                    .map_err(|e| HookError::new(500, "IO", e.to_string()))?;
                }
                Ok(())
            }),
        })
    }));
    let server = start_admin_server("127.0.0.1:0", ctx).unwrap();
    let addr = server.local_addr();
    assert_eq!(sql(addr, "CREATE TABLE t (x INT)").status, 200);

    let reply = request(addr, "GET", "/v1/tables/fluss.t/scan?from=0", b"", None);
    assert_eq!(reply.status, 200);
    let text = String::from_utf8(reply.body).unwrap();
    assert_eq!(text.lines().count(), 50_000, "streamed in full");
    assert!(text.ends_with("{\"bucket\":0,\"offset\":49999,\"row\":{\"t\":\"fluss.t\"}}\n"));

    let reply = request(addr, "GET", "/v1/tables/fluss.t/scan?bucket=9", b"", None);
    assert_eq!(reply.status, 400);
    assert_eq!(reply.json()["error"]["code"], "BAD_SCAN_PARAMETER");
    let reply = request(addr, "GET", "/v1/tables/fluss.t/scan?fail=late", b"", None);
    assert_eq!(
        reply.status, 400,
        "an error before any output still gets a status"
    );
    assert_eq!(reply.json()["error"]["code"], "NO_SUCH_COLUMN");
    assert_eq!(
        request(addr, "GET", "/v1/tables/fluss.x/scan", b"", None).status,
        404
    );

    let reply = request(addr, "GET", "/metrics", b"", None);
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, b"kafluss_requests_total 7\n");

    let other = server_without_hooks.local_addr();
    assert_eq!(request(other, "GET", "/metrics", b"", None).status, 503);
    assert_eq!(
        request(other, "GET", "/v1/tables/fluss.t/scan", b"", None).status,
        503
    );
}

#[test]
fn sasl_listener_needs_basic_auth_and_acls_apply() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = CatalogConfig::new(dir.path());
    config.authorizer_enabled = true;
    config.super_users = vec![Principal::user("admin")];
    config.plain_credentials = Some("admin:pw,reader:rpw".to_string());
    let catalog = Arc::new(Catalog::open(config).unwrap());
    let mut ctx = AdminContext::new(Arc::clone(&catalog), Arc::new(AtomicBool::new(true)));
    ctx.credentials = Some(catalog.credential_store());
    // Authentication and ACLs are under test here, not the login throttle (which would answer
    // 429 to the right password right after a wrong one; broker_login_throttle.rs tests it).
    ctx.login_throttle = Arc::new(kafluss_auth::LoginThrottle::new(kafluss_auth::ThrottleConfig {
        failure_delay: std::time::Duration::ZERO,
        ..Default::default()
    }));
    let server = start_admin_server("127.0.0.1:0", ctx).unwrap();
    let addr = server.local_addr();

    let reply = request(addr, "POST", "/v1/sql", b"SHOW DATABASES", None);
    assert_eq!(reply.status, 401);
    assert_eq!(reply.json()["error"]["code"], "AUTHENTICATION_FAILED");
    let reply = request(addr, "POST", "/v1/sql", b"SHOW DATABASES", Some("admin:wrong"));
    assert_eq!(reply.status, 401);
    assert!(!String::from_utf8_lossy(&reply.body).contains("wrong"));
    assert_eq!(
        request(addr, "GET", "/healthz", b"", None).status,
        200,
        "health is open"
    );

    let reply = request(
        addr,
        "POST",
        "/v1/sql",
        b"CREATE TABLE secret (x INT)",
        Some("admin:pw"),
    );
    assert_eq!(reply.status, 200);
    let reply = request(addr, "POST", "/v1/sql", b"DROP TABLE secret", Some("reader:rpw"));
    assert_eq!(reply.status, 403);
    assert_eq!(reply.json()["error"]["code"], "AUTHORIZATION_FAILED");
    // A table the principal may not describe is refused as not authorized, whether it exists
    // or not (the answer does not say which); one it may describe but that is missing is 404.
    for table in ["secret", "missing"] {
        let reply = request(
            addr,
            "GET",
            &format!("/v1/tables/fluss.{table}"),
            b"",
            Some("reader:rpw"),
        );
        assert_eq!(reply.status, 403, "{table}");
        assert_eq!(reply.json()["error"]["code"], "AUTHORIZATION_FAILED");
        assert_eq!(
            reply.json()["error"]["message"].as_str().unwrap(),
            format!("principal User:reader is not authorized to DESCRIBE table 'fluss.{table}'")
        );
    }
    let reply = request(addr, "GET", "/v1/tables/fluss.secret", b"", Some("admin:pw"));
    assert_eq!(reply.status, 200);
    let reply = request(addr, "GET", "/v1/tables/fluss.missing", b"", Some("admin:pw"));
    assert_eq!(reply.status, 404);
    assert_eq!(reply.json()["error"]["code"], "TABLE_NOT_FOUND");
    // SHOW TABLES where the principal may describe nothing: refused, not an empty list.
    let reply = request(addr, "POST", "/v1/sql", b"SHOW TABLES", Some("reader:rpw"));
    assert_eq!(reply.status, 403, "{}", String::from_utf8_lossy(&reply.body));
    assert_eq!(
        reply.json()["error"]["message"],
        "principal User:reader is not authorized to DESCRIBE database 'fluss'"
    );

    // Credentials changed by SQL apply to the next request.
    let reply = request(
        addr,
        "POST",
        "/v1/sql",
        b"CALL sys.set_cluster_configs(config_pairs => 'security.sasl.plain.credentials', 'admin:pw2')",
        Some("admin:pw"),
    );
    assert_eq!(reply.status, 200);
    assert_eq!(
        request(addr, "POST", "/v1/sql", b"SHOW DATABASES", Some("admin:pw")).status,
        401
    );
    assert_eq!(
        request(addr, "POST", "/v1/sql", b"SHOW DATABASES", Some("admin:pw2")).status,
        200
    );
}

/// `kafluss sql --server TARGET ARGS`.
fn kafluss_sql(target: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kafluss"))
        .args(["sql", "--server", target])
        .args(args)
        .env_remove("KAFLUSS_USER")
        .env_remove("KAFLUSS_PASSWORD")
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap()
}

#[test]
fn sql_client_prints_results_and_fails_with_the_server_message() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = AdminContext::new(catalog(dir.path()), Arc::new(AtomicBool::new(true)));
    let server = start_admin_server("127.0.0.1:0", ctx).unwrap();
    let target = server.local_addr().to_string();

    let done = kafluss_sql(&target, &["-e", "CREATE DATABASE sales; SHOW DATABASES"]);
    assert_eq!(done.status.code(), Some(0), "{}", text(&done.stderr));
    assert_eq!(text(&done.stderr), "");
    assert_eq!(
        text(&done.stdout),
        "Database sales created\n+---------------+\n| database name |\n+---------------+\n| fluss         |\n| sales         |\n+---------------+\n2 rows in set\n"
    );
    let failed = kafluss_sql(&target, &["-e", "DROP TABLE nope"]);
    assert_eq!(failed.status.code(), Some(1));
    assert_eq!(
        text(&failed.stderr),
        "kafluss sql: TABLE_NOT_FOUND: table 'fluss.nope' does not exist\n"
    );

    assert_eq!(
        kafluss_sql(&target, &["-e", "SHOW TABLES"]).status.code(),
        Some(0)
    );
    assert_eq!(
        kafluss_sql(&target, &["-e", "SHOW TABLES FROM nowhere"])
            .status
            .code(),
        Some(1)
    );
    let file = dir.path().join("script.sql");
    std::fs::write(&file, "CREATE TABLE sales.t (x INT);\nDESCRIBE sales.t;\n").unwrap();
    let file = file.to_str().unwrap();
    assert_eq!(kafluss_sql(&target, &["-f", file]).status.code(), Some(0));
    let missing = dir.path().join("missing.sql");
    assert_eq!(
        kafluss_sql(&target, &["-f", missing.to_str().unwrap()])
            .status
            .code(),
        Some(2)
    );
    server.stop();
    let unreachable = kafluss_sql(&target, &["-e", "SHOW TABLES"]);
    assert_eq!(unreachable.status.code(), Some(1), "unreachable");
    assert!(
        text(&unreachable.stderr).starts_with(&format!("kafluss sql: cannot reach {target}: ")),
        "{}",
        text(&unreachable.stderr)
    );
}
