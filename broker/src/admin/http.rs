//! The admin HTTP API on the Fluss listener (interface.md "HTTP on the Fluss
//! listener"): what each request answers. The connections, limits and threads are in
//! `listener.rs`; everything here runs on the admin server's bounded blocking pool.
//!
//! | request | answer |
//! | --- | --- |
//! | `POST /v1/sql` | 200 `{"results":[...]}`, else 4xx/5xx `{"error":{"code","message"}}` |
//! | `GET /v1/tables/{db}.{table}` | schema, options, buckets and row counts, Kafka state |
//! | `GET /v1/tables/{db}.{table}/scan?...` | rows, streamed by the scan hook |
//! | `GET /metrics` | Prometheus text from the metrics hook |
//! | `GET /healthz` | 200 once the readiness flag is set, 503 before, and 503 once the stopping flag is set |
//!
//! The table name is one percent-decoded path segment (`fluss.a%20b` is `fluss.a b`; one that
//! does not decode is 400 `BAD_REQUEST`). Another method on one of these paths is 405
//! `METHOD_NOT_ALLOWED` with an `Allow` header naming the path's method; any other path
//! (`/v1/tables//scan`, `/v1/tables/t/scan/`, `/v1/tables/t/rows`) is 404 `NOT_FOUND`.
//!
//! When the listener is mapped to `sasl`, every request but `/healthz` needs HTTP Basic
//! credentials from the PLAIN credential store (401 with `WWW-Authenticate` otherwise: "required"
//! when none were sent, "failed" when the ones sent are not valid, logged at WARN with the
//! user and client address); the user becomes the principal for ACL checks. Unauthenticated
//! listeners act as `User:ANONYMOUS`. The listener checks the credentials (`authenticate`)
//! before it reads a request body, up to `max_body_bytes` (413 beyond).

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::Method;
use kafluss_auth::{parse_basic_authorization, CredentialStore, LoginThrottle, Operation, Principal};
use serde_json::{json, Value};
use thiserror::Error;

use super::tables::table_json;
use crate::catalog::{Catalog, SqlError, TableInfo};
use crate::scan::percent_decode;

/// Default bound of a request body (`POST /v1/sql`), 1 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

/// An error a hook reports before producing output.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message}")]
pub struct HookError {
    /// HTTP status: 4xx for the request's fault, 5xx for the server's.
    pub status: u16,
    /// Stable code for `{"error":{"code":...}}`, e.g. `BAD_SCAN_PARAMETER`.
    pub code: String,
    pub message: String,
}

impl HookError {
    pub fn new(status: u16, code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            status,
            code: code.into(),
            message: message.into(),
        }
    }
}

/// Rows per bucket of a table: `(bucket, row count)`.
pub type RowCountsHook = Arc<dyn Fn(&TableInfo) -> Vec<(u32, u64)> + Send + Sync>;

/// Writes a scan's output; runs on a thread of the admin server's blocking pool. A write
/// fails once the client has gone away: the producer should then stop.
pub type ScanBody = Box<dyn FnOnce(&mut dyn Write) -> Result<(), HookError> + Send>;

/// What a scan answers: the content type, and the body producer (an error before any
/// output becomes an error response).
pub struct ScanResponse {
    pub content_type: String,
    pub body: ScanBody,
}

/// `GET /v1/tables/{db}.{table}/scan?{query}`: given the table and the raw query string.
pub type ScanHook = Arc<dyn Fn(&TableInfo, &str) -> Result<ScanResponse, HookError> + Send + Sync>;

/// `GET /metrics`: the Prometheus text exposition.
pub type MetricsHook = Arc<dyn Fn() -> String + Send + Sync>;

/// The admin listener's resource limits (the `admin.*` keys of docs/configuration.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminLimits {
    /// Open connections; one more is answered 503 and closed (`admin.max-connections`).
    pub max_connections: usize,
    /// Open connections from one client address; one more from it is answered 503 and closed
    /// (`admin.max-connections-per-address`).
    pub max_connections_per_address: usize,
    /// SQL, table and metrics requests being worked on at once; others queue
    /// (`admin.max-concurrent-requests`).
    pub max_concurrent_requests: usize,
    /// Scans producing rows at once; others queue (`admin.max-concurrent-scans`).
    pub max_concurrent_scans: usize,
    /// How long a request may wait in the queue before it is answered 503 (`admin.queue-timeout`).
    pub queue_timeout: Duration,
    /// From the moment the server waits for a request (new connection, or the previous
    /// response sent) until its headers have arrived (`admin.header-timeout`).
    pub header_timeout: Duration,
    /// From the headers until the whole body has arrived (`admin.body-timeout`).
    pub body_timeout: Duration,
    /// A response write that makes no progress for this long closes the connection
    /// (`admin.write-timeout`).
    pub write_timeout: Duration,
    /// Longest wait for requests in flight at shutdown (`admin.shutdown-timeout`).
    pub shutdown_timeout: Duration,
    /// Largest request head: request line plus headers (`admin.max-header-size`).
    pub max_header_bytes: usize,
}

/// Smallest `max_header_bytes` accepted (`admin.max-header-size`).
pub const MIN_HEADER_BYTES: usize = 1024;
/// Largest `max_header_bytes` accepted: below the HTTP implementation's read buffer (~400 KiB).
pub const MAX_HEADER_BYTES: usize = 256 * 1024;

impl Default for AdminLimits {
    fn default() -> Self {
        Self {
            max_connections: 64,
            max_connections_per_address: 16,
            max_concurrent_requests: 8,
            max_concurrent_scans: 4,
            queue_timeout: Duration::from_secs(10),
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
            shutdown_timeout: Duration::from_secs(5),
            max_header_bytes: 64 * 1024,
        }
    }
}

/// Everything the admin server needs; hooks left `None` answer 503 (not available yet).
#[derive(Clone)]
pub struct AdminContext {
    pub catalog: Arc<Catalog>,
    /// Set once every core serves (`/healthz`).
    pub ready: Arc<AtomicBool>,
    /// Set when shutdown begins (the signal handler's flag): `/healthz` answers 503 from then on.
    pub stopping: Arc<AtomicBool>,
    /// `Some` when the Fluss listener is mapped to `sasl`: requests need Basic auth.
    pub credentials: Option<Arc<CredentialStore>>,
    pub row_counts: Option<RowCountsHook>,
    pub scan: Option<ScanHook>,
    pub metrics: Option<MetricsHook>,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Connections, concurrency and timeouts.
    pub limits: AdminLimits,
    /// Failed Basic logins refuse the next attempts of their address and user for a while
    /// (shared with the Kafka listeners' SASL).
    pub login_throttle: Arc<LoginThrottle>,
}

impl AdminContext {
    /// A context with no hooks, no authentication and the default limits.
    pub fn new(catalog: Arc<Catalog>, ready: Arc<AtomicBool>) -> Self {
        Self {
            catalog,
            ready,
            stopping: Arc::new(AtomicBool::new(false)),
            credentials: None,
            row_counts: None,
            scan: None,
            metrics: None,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            limits: AdminLimits::default(),
            login_throttle: Arc::new(LoginThrottle::new(Default::default())),
        }
    }
}

/// A complete answer, built on a blocking thread and sent by the listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
    /// Close the connection after this answer (the request body was not read).
    pub close: bool,
}

impl Reply {
    fn text(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status,
            content_type,
            headers: Vec::new(),
            body: body.into(),
            close: false,
        }
    }

    fn json(status: u16, body: &Value) -> Self {
        let bytes = serde_json::to_vec(body).expect("JSON values serialize");
        Self::text(status, "application/json", bytes)
    }

    /// `{"error":{"code":...,"message":...}}`.
    pub fn error(status: u16, code: &str, message: &str) -> Self {
        Self::json(status, &json!({ "error": { "code": code, "message": message } }))
    }

    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    pub fn closing(mut self) -> Self {
        self.close = true;
        self
    }
}

/// What a request asks for, from its method and path alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Route {
    Health,
    Sql,
    Metrics,
    Table(String),
    Scan(String),
    /// A path that exists, asked with a method it does not take: the methods it takes (the
    /// `Allow` header of the 405, RFC 9110 section 15.5.6).
    MethodNotAllowed {
        path: String,
        allow: &'static str,
    },
    /// A table path whose name does not percent-decode (why: `reason`).
    BadTableName {
        path: String,
        reason: String,
    },
    NotFound(String),
}

impl Route {
    pub fn of(method: &Method, path: &str) -> Route {
        if path == "/healthz" {
            return Route::Health;
        }
        match (method, path) {
            (&Method::POST, "/v1/sql") => Route::Sql,
            (&Method::GET, "/metrics") => Route::Metrics,
            (_, "/v1/sql") => Route::MethodNotAllowed {
                path: path.to_string(),
                allow: "POST",
            },
            (_, "/metrics") => Route::MethodNotAllowed {
                path: path.to_string(),
                allow: "GET",
            },
            _ => match table_endpoint(path) {
                None => Route::NotFound(path.to_string()),
                Some(_) if method != Method::GET => Route::MethodNotAllowed {
                    path: path.to_string(),
                    allow: "GET",
                },
                Some((name, scan)) => match percent_decode(name, false) {
                    Ok(name) if scan => Route::Scan(name),
                    Ok(name) => Route::Table(name),
                    Err(error) => Route::BadTableName {
                        path: path.to_string(),
                        reason: error.to_string(),
                    },
                },
            },
        }
    }

    /// Whether the handler reads the request body.
    pub fn reads_body(&self) -> bool {
        matches!(self, Route::Sql)
    }
}

/// The still-encoded table name of `/v1/tables/{name}` (`false`) or `/v1/tables/{name}/scan`
/// (`true`), `name` being one non-empty path segment; `None` for any other path.
fn table_endpoint(path: &str) -> Option<(&str, bool)> {
    let rest = path.strip_prefix("/v1/tables/")?;
    let (name, scan) = match rest.split_once('/') {
        None => (rest, false),
        Some((name, "scan")) => (name, true),
        Some(_) => return None,
    };
    (!name.is_empty()).then_some((name, scan))
}

/// The parts of a request the handlers need, owned so they move to a blocking thread.
#[derive(Debug, Clone)]
pub(super) struct RequestInfo {
    pub route: Route,
    pub query: String,
    pub authorization: Option<String>,
    pub peer: SocketAddr,
}

/// `/healthz`: cheap, answered on the listener thread itself.
pub(super) fn health(ctx: &AdminContext) -> Reply {
    if ctx.stopping.load(Ordering::Acquire) {
        Reply::text(503, TEXT, "shutting down\n")
    } else if ctx.ready.load(Ordering::Acquire) {
        Reply::text(200, TEXT, "ok\n")
    } else {
        Reply::text(503, TEXT, "starting\n")
    }
}

const TEXT: &str = "text/plain; charset=UTF-8";

/// Answers every request but scans (and `/healthz`, answered before any queueing).
/// `principal` is the one [`authenticate`] found.
pub(super) fn answer(
    ctx: &AdminContext,
    request: &RequestInfo,
    principal: Principal,
    body: Vec<u8>,
) -> Reply {
    if request.route == Route::Health {
        return health(ctx);
    }
    let host = request.peer.ip();
    match &request.route {
        Route::Health => health(ctx),
        Route::Sql => match String::from_utf8(body) {
            Ok(sql) => execute_sql(ctx, &sql, principal, host),
            Err(_) => Reply::error(400, "BAD_REQUEST", "the SQL text must be UTF-8"),
        },
        Route::Metrics => match (
            &ctx.metrics,
            ctx.catalog
                .authorized_cluster(Operation::Describe, &principal, host),
        ) {
            (_, Err(error)) => sql_error_reply(&error),
            (Some(metrics), Ok(())) => Reply::text(200, "text/plain; version=0.0.4", metrics()),
            (None, Ok(())) => unavailable("metrics"),
        },
        Route::Table(name) => describe_table(ctx, name, &principal, host),
        // Scans stream: the listener runs them through prepare_scan, never here.
        Route::Scan(_) => Reply::error(500, "INTERNAL_ERROR", "scans are streamed, not answered whole"),
        Route::MethodNotAllowed { path, allow } => Reply::error(
            405,
            "METHOD_NOT_ALLOWED",
            &format!("{path} does not accept this method (it accepts {allow})"),
        )
        .with_header("Allow", *allow),
        Route::BadTableName { path, reason } => Reply::error(
            400,
            "BAD_REQUEST",
            &format!("the table name in {path} does not decode: {reason}"),
        ),
        Route::NotFound(path) => Reply::error(404, "NOT_FOUND", &format!("no such endpoint: {path}")),
    }
}

/// A scan's checks (table, ACL, parameters) for the principal [`authenticate`] found, and its
/// body producer, or the reply that answers instead.
pub(super) fn prepare_scan(
    ctx: &AdminContext,
    request: &RequestInfo,
    principal: &Principal,
    name: &str,
) -> Result<ScanResponse, Reply> {
    let Some(hook) = &ctx.scan else {
        return Err(unavailable("scan"));
    };
    let table = find_table(ctx, name, Operation::Read, principal, request.peer.ip())?;
    hook(&table, &request.query).map_err(|error| hook_reply(&error))
}

pub(super) fn hook_reply(error: &HookError) -> Reply {
    Reply::error(error.status, &error.code, &error.message)
}

fn unavailable(what: &str) -> Reply {
    Reply::error(
        503,
        "UNAVAILABLE",
        &format!("{what} is not available on this server"),
    )
}

fn unauthorized(message: &str) -> Reply {
    Reply::error(401, "AUTHENTICATION_FAILED", message)
        .with_header("WWW-Authenticate", "Basic realm=\"kafluss\"")
}

/// The request's principal, or the 401 to answer. Failed logins are logged at WARN with the
/// user and the client address, never the password.
pub(super) fn authenticate(ctx: &AdminContext, request: &RequestInfo) -> Result<Principal, Reply> {
    let Some(store) = &ctx.credentials else {
        return Ok(Principal::anonymous());
    };
    let Some(value) = request.authorization.as_deref() else {
        return Err(unauthorized(
            "authentication required: use HTTP Basic with a user of security.sasl.plain.credentials",
        ));
    };
    let parsed = parse_basic_authorization(value);
    let user = parsed.as_ref().map(|c| c.username.clone()).unwrap_or_default();
    let address = request.peer.ip();
    let turn = match ctx.login_throttle.try_now(Instant::now(), address, &user) {
        Ok(turn) => turn,
        Err(wait) => {
            let seconds = wait.as_secs_f64().ceil().max(1.0);
            return Err(Reply::error(
                429,
                "TOO_MANY_FAILED_LOGINS",
                &format!("too many failed logins for this user or client address: retry in {seconds} s"),
            )
            .with_header("Retry-After", format!("{seconds}")));
        }
    };
    if let Some(principal) = store.verify_basic(value) {
        turn.succeeded();
        return Ok(principal);
    }
    turn.failed(Instant::now());
    let (user, reason) = match parsed {
        Ok(credentials) => (
            Some(credentials.username),
            "invalid user name or password".to_string(),
        ),
        Err(error) => (None, error.to_string()),
    };
    tracing::warn!(
        user = ?user.as_deref().unwrap_or("-"),
        client = %request.peer,
        %reason,
        "admin HTTP Basic authentication failed"
    );
    Err(unauthorized(&format!("authentication failed: {reason}")))
}

fn execute_sql(ctx: &AdminContext, sql: &str, principal: Principal, host: std::net::IpAddr) -> Reply {
    let mut session = ctx.catalog.session(principal, host);
    let outcome = ctx.catalog.run_script(sql, &mut session);
    if let Some(failure) = outcome.failure.as_ref().filter(|f| f.error.http_status() >= 500) {
        tracing::error!(error = %failure.error, "SQL statement failed");
    }
    Reply::json(outcome.http_status(), &outcome.to_json())
}

fn sql_error_reply(error: &SqlError) -> Reply {
    if error.http_status() >= 500 {
        tracing::error!(%error, "SQL statement failed");
    }
    Reply::error(error.http_status(), error.code(), &error.to_string())
}

/// The table for an endpoint, checked by [`Catalog::authorized_table`]: 403 without
/// DESCRIBE or `operation`, 404 when it does not exist.
fn find_table(
    ctx: &AdminContext,
    name: &str,
    operation: Operation,
    principal: &Principal,
    host: std::net::IpAddr,
) -> Result<Arc<TableInfo>, Reply> {
    ctx.catalog
        .authorized_table(name, operation, principal, host)
        .map_err(|error| sql_error_reply(&error))
}

fn describe_table(ctx: &AdminContext, name: &str, principal: &Principal, host: std::net::IpAddr) -> Reply {
    match find_table(ctx, name, Operation::Describe, principal, host) {
        Ok(table) => {
            let row_counts = ctx.row_counts.as_ref().map(|hook| hook(&table));
            Reply::json(200, &table_json(&table, row_counts.as_deref()))
        }
        Err(reply) => reply,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_follow_method_and_path() {
        assert_eq!(Route::of(&Method::GET, "/healthz"), Route::Health);
        assert_eq!(Route::of(&Method::POST, "/healthz"), Route::Health);
        assert_eq!(Route::of(&Method::POST, "/v1/sql"), Route::Sql);
        assert_eq!(
            Route::of(&Method::GET, "/v1/sql"),
            Route::MethodNotAllowed {
                path: "/v1/sql".into(),
                allow: "POST"
            }
        );
        assert_eq!(
            Route::of(&Method::POST, "/metrics"),
            Route::MethodNotAllowed {
                path: "/metrics".into(),
                allow: "GET"
            }
        );
        assert_eq!(
            Route::of(&Method::GET, "/v1/tables/a.b/scan"),
            Route::Scan("a.b".into())
        );
        assert_eq!(
            Route::of(&Method::GET, "/v1/tables/a.b"),
            Route::Table("a.b".into())
        );
        for path in ["/v1/tables/a.b", "/v1/tables/a.b/scan"] {
            assert_eq!(
                Route::of(&Method::DELETE, path),
                Route::MethodNotAllowed {
                    path: path.into(),
                    allow: "GET"
                }
            );
        }
        assert_eq!(
            Route::of(&Method::DELETE, "/v1/nope"),
            Route::NotFound("/v1/nope".into())
        );
        // The name is one percent-decoded segment; `+` is itself in a path.
        assert_eq!(
            Route::of(&Method::GET, "/v1/tables/fluss.a%20b/scan"),
            Route::Scan("fluss.a b".into())
        );
        assert_eq!(
            Route::of(&Method::GET, "/v1/tables/a+b"),
            Route::Table("a+b".into())
        );
        assert_eq!(
            Route::of(&Method::GET, "/v1/tables/fluss.%ZZ/scan"),
            Route::BadTableName {
                path: "/v1/tables/fluss.%ZZ/scan".into(),
                reason: "bad percent-encoding".into()
            }
        );
        // Only those exact shapes.
        for path in [
            "/v1/tables/",
            "/v1/tables//scan",
            "/v1/tables/a.b/scan/",
            "/v1/tables/a.b/extra",
            "/v1/tables/a.b/scan/x",
            "/v1/tables/a.b/",
        ] {
            assert_eq!(Route::of(&Method::GET, path), Route::NotFound(path.into()));
            assert_eq!(Route::of(&Method::POST, path), Route::NotFound(path.into()));
        }
        assert!(Route::Sql.reads_body());
        assert!(!Route::Health.reads_body());
    }
}
