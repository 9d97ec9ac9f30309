//! The admin HTTP server on the Fluss listener (shared/spec/interface.md "HTTP on the Fluss
//! listener"), on its own threads with `tiny_http`:
//!
//! | request | answer |
//! | --- | --- |
//! | `POST /v1/sql` | 200 `{"results":[...]}`, else 4xx/5xx `{"error":{"code","message"}}` |
//! | `GET /v1/tables/{db}.{table}` | schema, options, buckets and row counts, Kafka state |
//! | `GET /v1/tables/{db}.{table}/scan?...` | rows, streamed by the scan hook |
//! | `GET /metrics` | Prometheus text from the metrics hook |
//! | `GET /healthz` | 200 once the readiness flag is set, else 503 |
//!
//! When the listener is mapped to `sasl`, every request but `/healthz` needs HTTP Basic
//! credentials from the PLAIN credential store (401 with `WWW-Authenticate` otherwise); the
//! user becomes the principal for ACL checks. Unauthenticated listeners act as
//! `User:ANONYMOUS`. Request bodies are read up to `max_body_bytes` (413 beyond).

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use kafluss_auth::{CredentialStore, Operation, Principal};
use serde_json::{json, Value};
use thiserror::Error;
use tiny_http::{Header, Method, Request, Response, Server, StatusCode};

use super::stream::{self, Started};
use super::tables::table_json;
use crate::catalog::{Catalog, SqlError, TableInfo};

/// Default bound of a request body (`POST /v1/sql`), 1 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
/// Worker threads answering requests (a scan holds one while it streams).
pub const DEFAULT_WORKERS: usize = 4;
/// How often idle workers look at the stop flag.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

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

/// Writes a scan's output; runs on its own thread.
pub type ScanBody = Box<dyn FnOnce(&mut dyn Write) -> Result<(), HookError> + Send>;

/// What a scan answers: the content type, and the body producer (run on its own thread;
/// an error before any output becomes an error response).
pub struct ScanResponse {
    pub content_type: String,
    pub body: ScanBody,
}

/// `GET /v1/tables/{db}.{table}/scan?{query}`: given the table and the raw query string.
pub type ScanHook = Arc<dyn Fn(&TableInfo, &str) -> Result<ScanResponse, HookError> + Send + Sync>;

/// `GET /metrics`: the Prometheus text exposition.
pub type MetricsHook = Arc<dyn Fn() -> String + Send + Sync>;

/// Everything the admin server needs; hooks left `None` answer 503 (not available yet).
#[derive(Clone)]
pub struct AdminContext {
    pub catalog: Arc<Catalog>,
    /// Set once every core serves (`/healthz`).
    pub ready: Arc<AtomicBool>,
    /// `Some` when the Fluss listener is mapped to `sasl`: requests need Basic auth.
    pub credentials: Option<Arc<CredentialStore>>,
    pub row_counts: Option<RowCountsHook>,
    pub scan: Option<ScanHook>,
    pub metrics: Option<MetricsHook>,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    pub workers: usize,
}

impl AdminContext {
    /// A context with no hooks, no authentication and the default limits.
    pub fn new(catalog: Arc<Catalog>, ready: Arc<AtomicBool>) -> Self {
        Self {
            catalog,
            ready,
            credentials: None,
            row_counts: None,
            scan: None,
            metrics: None,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            workers: DEFAULT_WORKERS,
        }
    }
}

#[derive(Debug, Error)]
pub enum AdminError {
    #[error("cannot bind the admin HTTP server to {addr}: {reason}")]
    Bind { addr: String, reason: String },
    #[error("cannot start the admin HTTP server: {0}")]
    Thread(#[source] io::Error),
}

/// A running admin server; dropping it stops it too.
pub struct AdminHandle {
    local_addr: SocketAddr,
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
}

impl AdminHandle {
    /// The bound address (the real port when started on port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting requests and waits for the workers (in-flight requests finish).
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}

impl Drop for AdminHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Binds `addr` (e.g. `127.0.0.1:0`) and serves on `ctx.workers` threads.
pub fn start_admin_server(
    addr: impl ToSocketAddrs + std::fmt::Debug,
    ctx: AdminContext,
) -> Result<AdminHandle, AdminError> {
    let described = format!("{addr:?}");
    let server = Server::http(addr).map_err(|e| AdminError::Bind {
        addr: described.clone(),
        reason: e.to_string(),
    })?;
    let local_addr = server.server_addr().to_ip().ok_or_else(|| AdminError::Bind {
        addr: described,
        reason: "not an IP listener".to_string(),
    })?;
    let server = Arc::new(server);
    let ctx = Arc::new(ctx);
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for index in 0..ctx.workers.max(1) {
        let (server, ctx, worker_stop) = (Arc::clone(&server), Arc::clone(&ctx), Arc::clone(&stop));
        let worker = std::thread::Builder::new()
            .name(format!("kafluss-admin-{index}"))
            .spawn(move || serve(&server, &ctx, &worker_stop));
        match worker {
            Ok(worker) => workers.push(worker),
            Err(error) => {
                stop.store(true, Ordering::SeqCst);
                for worker in workers {
                    let _ = worker.join();
                }
                return Err(AdminError::Thread(error));
            }
        }
    }
    tracing::info!(%local_addr, "admin HTTP server listening");
    Ok(AdminHandle {
        local_addr,
        stop,
        workers,
    })
}

fn serve(server: &Server, ctx: &AdminContext, stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        match server.recv_timeout(POLL_INTERVAL) {
            Ok(Some(request)) => {
                let method = request.method().clone();
                let url = request.url().to_string();
                if let Err(error) = handle(request, ctx) {
                    tracing::debug!(%method, %url, %error, "admin response not delivered");
                }
            }
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(%error, "admin HTTP accept failed");
                std::thread::sleep(POLL_INTERVAL);
            }
        }
    }
}

fn json_response(status: u16, body: &Value) -> Response<io::Cursor<Vec<u8>>> {
    let bytes = serde_json::to_vec(body).expect("JSON values serialize");
    Response::from_data(bytes)
        .with_status_code(StatusCode(status))
        .with_header(header("Content-Type", "application/json"))
}

fn error_response(status: u16, code: &str, message: &str) -> Response<io::Cursor<Vec<u8>>> {
    json_response(status, &json!({ "error": { "code": code, "message": message } }))
}

fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("static header is valid")
}

/// Answers one request.
fn handle(mut request: Request, ctx: &AdminContext) -> io::Result<()> {
    let url = request.url().to_string();
    let (path, query) = url.split_once('?').unwrap_or((&url, ""));
    let method = request.method().clone();

    if path == "/healthz" {
        return if ctx.ready.load(Ordering::Acquire) {
            request.respond(Response::from_string("ok\n"))
        } else {
            request.respond(Response::from_string("starting\n").with_status_code(503))
        };
    }

    let principal = match authenticate(&request, ctx) {
        Ok(principal) => principal,
        Err(response) => return request.respond(response),
    };
    let host = request
        .remote_addr()
        .map(|addr| addr.ip())
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));

    match (method, path) {
        (Method::Post, "/v1/sql") => {
            let body = match read_body(&mut request, ctx.max_body_bytes) {
                Ok(body) => body,
                Err(response) => return request.respond(response),
            };
            request.respond(execute_sql(ctx, &body, principal, host))
        }
        (Method::Get, "/metrics") => match &ctx.metrics {
            Some(metrics) => request.respond(
                Response::from_string(metrics())
                    .with_header(header("Content-Type", "text/plain; version=0.0.4")),
            ),
            None => request.respond(unavailable("metrics")),
        },
        (Method::Get, path) if path.starts_with("/v1/tables/") => {
            let rest = &path["/v1/tables/".len()..];
            match rest.strip_suffix("/scan") {
                Some(name) => scan(request, ctx, name, query, &principal, host),
                None => request.respond(describe_table(ctx, rest, &principal, host)),
            }
        }
        (_, "/v1/sql" | "/metrics" | "/healthz") => request.respond(error_response(
            405,
            "METHOD_NOT_ALLOWED",
            &format!("{path} does not accept this method"),
        )),
        _ => request.respond(error_response(
            404,
            "NOT_FOUND",
            &format!("no such endpoint: {path}"),
        )),
    }
}

fn unavailable(what: &str) -> Response<io::Cursor<Vec<u8>>> {
    error_response(
        503,
        "UNAVAILABLE",
        &format!("{what} is not available on this server"),
    )
}

/// The request's principal, or the 401 to answer.
fn authenticate(request: &Request, ctx: &AdminContext) -> Result<Principal, Response<io::Cursor<Vec<u8>>>> {
    let Some(store) = &ctx.credentials else {
        return Ok(Principal::anonymous());
    };
    let authorization = request
        .headers()
        .iter()
        .find(|h| h.field.equiv("Authorization"))
        .map(|h| h.value.as_str());
    match authorization.and_then(|value| store.verify_basic(value)) {
        Some(principal) => Ok(principal),
        None => Err(error_response(
            401,
            "AUTHENTICATION_FAILED",
            "authentication required: use HTTP Basic with a user of security.sasl.plain.credentials",
        )
        .with_header(header("WWW-Authenticate", "Basic realm=\"kafluss\""))),
    }
}

/// Reads at most `limit` bytes of UTF-8; 413 or 400 otherwise.
fn read_body(request: &mut Request, limit: usize) -> Result<String, Response<io::Cursor<Vec<u8>>>> {
    if request.body_length().is_some_and(|length| length > limit) {
        return Err(too_large(limit));
    }
    let mut body = Vec::new();
    let read = request.as_reader().take(limit as u64 + 1).read_to_end(&mut body);
    if let Err(error) = read {
        return Err(error_response(
            400,
            "BAD_REQUEST",
            &format!("cannot read the request body: {error}"),
        ));
    }
    if body.len() > limit {
        return Err(too_large(limit));
    }
    String::from_utf8(body).map_err(|_| error_response(400, "BAD_REQUEST", "the SQL text must be UTF-8"))
}

fn too_large(limit: usize) -> Response<io::Cursor<Vec<u8>>> {
    error_response(
        413,
        "REQUEST_TOO_LARGE",
        &format!("request body over {limit} bytes (admin.max-request-size)"),
    )
}

fn execute_sql(
    ctx: &AdminContext,
    sql: &str,
    principal: Principal,
    host: IpAddr,
) -> Response<io::Cursor<Vec<u8>>> {
    let mut session = ctx.catalog.session(principal, host);
    let outcome = ctx.catalog.run_script(sql, &mut session);
    if let Some(failure) = outcome.failure.as_ref().filter(|f| f.error.http_status() >= 500) {
        tracing::error!(error = %failure.error, "SQL statement failed");
    }
    json_response(outcome.http_status(), &outcome.to_json())
}

fn sql_error_response(error: &SqlError) -> Response<io::Cursor<Vec<u8>>> {
    if error.http_status() >= 500 {
        tracing::error!(%error, "SQL statement failed");
    }
    error_response(error.http_status(), error.code(), &error.to_string())
}

/// The table for an endpoint, checked by [`Catalog::authorized_table`]: 403 without
/// DESCRIBE or `operation`, 404 when it does not exist.
fn find_table(
    ctx: &AdminContext,
    name: &str,
    operation: Operation,
    principal: &Principal,
    host: IpAddr,
) -> Result<Arc<TableInfo>, Response<io::Cursor<Vec<u8>>>> {
    ctx.catalog
        .authorized_table(name, operation, principal, host)
        .map_err(|error| sql_error_response(&error))
}

fn describe_table(
    ctx: &AdminContext,
    name: &str,
    principal: &Principal,
    host: IpAddr,
) -> Response<io::Cursor<Vec<u8>>> {
    match find_table(ctx, name, Operation::Describe, principal, host) {
        Ok(table) => {
            let row_counts = ctx.row_counts.as_ref().map(|hook| hook(&table));
            json_response(200, &table_json(&table, row_counts.as_deref()))
        }
        Err(response) => response,
    }
}

fn scan(
    request: Request,
    ctx: &AdminContext,
    name: &str,
    query: &str,
    principal: &Principal,
    host: IpAddr,
) -> io::Result<()> {
    let Some(hook) = &ctx.scan else {
        return request.respond(unavailable("scan"));
    };
    let table = match find_table(ctx, name, Operation::Read, principal, host) {
        Ok(table) => table,
        Err(response) => return request.respond(response),
    };
    let response = match hook(&table, query) {
        Ok(response) => response,
        Err(error) => return request.respond(error_response(error.status, &error.code, &error.message)),
    };
    match stream::start(response.body) {
        Started::Failed(error) => request.respond(error_response(error.status, &error.code, &error.message)),
        Started::Body(reader) => request.respond(Response::new(
            StatusCode(200),
            vec![header("Content-Type", &response.content_type)],
            reader,
            None,
            None,
        )),
    }
}
