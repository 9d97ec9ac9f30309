//! The admin listener's connections: hyper (HTTP/1.1) on a small tokio runtime owned by one
//! thread, `kafluss-admin`; the glommio cores are not involved. Every limit is an
//! [`AdminLimits`] field (the `admin.*` config keys):
//!
//! - at most `max_connections` connections, and at most `max_connections_per_address` from one
//!   client IP address (so one client cannot take them all); one more is answered 503 and
//!   closed;
//! - a request head must arrive within `header_timeout` of the server starting to wait for it
//!   (so an idle keep-alive connection is closed after that long too) and be at most
//!   `max_header_bytes` (431 otherwise); a body within `body_timeout` (408);
//! - a `Content-Length` over `max_body_bytes` is answered 413 before any body byte is read,
//!   and a chunked body is counted as it arrives (413 once over); with Basic auth required
//!   the credentials are checked first and a 401 closes the connection unread;
//! - work that may block (SQL, table descriptions, metrics, authentication) runs on the
//!   runtime's blocking pool behind a semaphore of `max_concurrent_requests` permits, scans
//!   behind their own `max_concurrent_scans`: requests queue in order, at most `queue_timeout`
//!   (503 after). `/healthz` needs no permit, so it answers whatever the rest is doing;
//! - a response write that makes no progress for `write_timeout` closes the connection, which
//!   stops a scan producing for it; so does a client going away;
//! - shutdown stops accepting, closes idle connections, lets requests in flight finish for at
//!   most `shutdown_timeout`, then drops everything that is left.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{HeaderMap, AUTHORIZATION, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;

use kafluss_auth::Principal;

use super::http::{
    answer, authenticate, health, prepare_scan, AdminContext, AdminLimits, Reply, RequestInfo, Route,
};
use super::stream::{self, AdminBody, Message, Produced, Started};

#[derive(Debug, Error)]
pub enum AdminError {
    #[error("cannot bind the admin HTTP server to {addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot start the admin HTTP server: {0}")]
    Thread(#[source] io::Error),
}

/// A running admin server; dropping it stops it too.
pub struct AdminHandle {
    local_addr: SocketAddr,
    listener: Option<ListenerHandle>,
}

impl AdminHandle {
    /// The bound address (the real port when started on port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting, lets requests in flight finish for at most `shutdown_timeout`, then
    /// closes every connection; never waits longer on a stuck client.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(listener) = self.listener.take() {
            listener.stop();
        }
    }
}

impl Drop for AdminHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Binds `addr` (e.g. `127.0.0.1:0`) and serves on the admin server's own thread.
pub fn start_admin_server(
    addr: impl ToSocketAddrs + std::fmt::Debug,
    ctx: AdminContext,
) -> Result<AdminHandle, AdminError> {
    let described = format!("{addr:?}");
    let socket = std::net::TcpListener::bind(addr).map_err(|source| AdminError::Bind {
        addr: described,
        source,
    })?;
    start_admin_server_on(socket, ctx)
}

/// Serves `socket`, already bound (by the runtime, which retries an address still held by a
/// server killed a moment ago), on the admin server's own thread.
pub fn start_admin_server_on(
    socket: std::net::TcpListener,
    ctx: AdminContext,
) -> Result<AdminHandle, AdminError> {
    let local_addr = socket.local_addr().map_err(|source| AdminError::Bind {
        addr: "the admin listener".to_string(),
        source,
    })?;
    let listener = start(socket, Arc::new(ctx)).map_err(AdminError::Thread)?;
    tracing::info!(%local_addr, "admin HTTP server listening");
    Ok(AdminHandle {
        local_addr,
        listener: Some(listener),
    })
}

/// The running listener thread.
pub(super) struct ListenerHandle {
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl ListenerHandle {
    /// Signals the stop and waits for the thread, which ends within about `shutdown_timeout`.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let _ = self.stop.send(true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ListenerHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// State shared by the connections of one listener.
struct Shared {
    ctx: Arc<AdminContext>,
    requests: Arc<Semaphore>,
    scans: Arc<Semaphore>,
    http: http1::Builder,
}

/// Starts serving `socket` (already bound) on a new thread.
pub(super) fn start(socket: std::net::TcpListener, ctx: Arc<AdminContext>) -> io::Result<ListenerHandle> {
    let limits = ctx.limits.clone();
    let workers = limits.max_concurrent_requests.max(1) + limits.max_concurrent_scans.max(1);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .max_blocking_threads(workers)
        .thread_name("kafluss-admin-work")
        .build()?;
    socket.set_nonblocking(true)?;
    let listener = {
        let _entered = runtime.enter();
        TcpListener::from_std(socket)?
    };
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_header_size(limits.max_header_bytes)
        .title_case_headers(true)
        .keep_alive(true);
    let shared = Arc::new(Shared {
        requests: Arc::new(Semaphore::new(limits.max_concurrent_requests.max(1))),
        scans: Arc::new(Semaphore::new(limits.max_concurrent_scans.max(1))),
        ctx,
        http,
    });
    let (stop, stopped) = watch::channel(false);
    let thread = std::thread::Builder::new()
        .name("kafluss-admin".to_string())
        .spawn(move || {
            runtime.block_on(serve(listener, shared, stopped));
            // Whatever is still running (a stuck client, a producer) is dropped, not awaited.
            runtime.shutdown_background();
        })?;
    Ok(ListenerHandle {
        stop,
        thread: Some(thread),
    })
}

/// Accepts until stopped, then shuts down within `shutdown_timeout`.
async fn serve(listener: TcpListener, shared: Arc<Shared>, mut stopped: watch::Receiver<bool>) {
    let limits = shared.ctx.limits.clone();
    let max_connections = limits.max_connections.max(1);
    let per_address = limits.max_connections_per_address.clamp(1, max_connections);
    let connections = Arc::new(Semaphore::new(max_connections));
    let addresses = AddressSlots::new(per_address);
    // Connections over the cap being told so; beyond this many they are just closed.
    let rejections = Arc::new(Semaphore::new(max_connections));
    let (closing, closing_rx) = watch::channel(false);
    let mut refused = RefusalLog::default();
    let mut refused_per_address = RefusalLog::default();
    loop {
        let accepted = tokio::select! {
            _ = stopped.changed() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors and the like: do not spin, do not stop.
                tracing::warn!(%error, "admin HTTP accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let refusal = match Arc::clone(&connections).try_acquire_owned() {
            Ok(permit) => match addresses.take(peer.ip()) {
                Some(slot) => {
                    tokio::spawn(connection(
                        stream,
                        peer,
                        Arc::clone(&shared),
                        (permit, slot),
                        closing_rx.clone(),
                    ));
                    continue;
                }
                None => {
                    refused_per_address.note(
                        peer,
                        per_address,
                        "admin HTTP connection refused: admin.max-connections-per-address connections from its address are open",
                    );
                    format!(
                        "{per_address} connections from this address are open to the admin server (admin.max-connections-per-address)"
                    )
                }
            },
            Err(_) => {
                refused.note(
                    peer,
                    max_connections,
                    "admin HTTP connection refused: admin.max-connections connections are open",
                );
                format!("the admin server has {max_connections} connections open (admin.max-connections)")
            }
        };
        if let Ok(permit) = Arc::clone(&rejections).try_acquire_owned() {
            tokio::spawn(refuse(stream, refusal, limits.header_timeout, permit));
        }
    }
    drop(listener);
    let _ = closing.send(true);
    let all = u32::try_from(max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(limits.shutdown_timeout, connections.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!(
            timeout = ?limits.shutdown_timeout,
            "admin HTTP connections still open at shutdown are closed (admin.shutdown-timeout)"
        );
    }
}

/// Logs refused connections at WARN at most every ten seconds, with the count in between.
#[derive(Default)]
struct RefusalLog {
    last: Option<Instant>,
    since: u64,
}

impl RefusalLog {
    /// One refusal of `peer` by a cap of `limit` connections; `message` says which cap.
    fn note(&mut self, peer: SocketAddr, limit: usize, message: &'static str) {
        self.since += 1;
        if self
            .last
            .is_some_and(|last| last.elapsed() < Duration::from_secs(10))
        {
            return;
        }
        tracing::warn!(client = %peer, refused = self.since, limit, "{message}");
        self.last = Some(Instant::now());
        self.since = 0;
    }
}

/// The open connections of each client address, for `admin.max-connections-per-address`. An
/// address has an entry only while it has connections open, so there are at most
/// `admin.max-connections` entries.
#[derive(Clone)]
struct AddressSlots {
    limit: usize,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl AddressSlots {
    fn new(limit: usize) -> Self {
        Self {
            limit,
            open: Arc::default(),
        }
    }

    /// A slot of `address`, or `None` when it has `limit` connections open.
    fn take(&self, address: IpAddr) -> Option<AddressSlot> {
        let mut open = self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let count = open.entry(address).or_insert(0);
        if *count >= self.limit {
            return None;
        }
        *count += 1;
        Some(AddressSlot {
            slots: self.clone(),
            address,
        })
    }
}

/// One open connection of an address; dropping it frees the slot (and the address's entry
/// with its last one).
struct AddressSlot {
    slots: AddressSlots,
    address: IpAddr,
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut open = self
            .slots
            .open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(count) = open.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.address);
            }
        }
    }
}

/// Answers a connection over a cap with 503 (`message` says which), then closes it (reading
/// what the client sent meanwhile, so the close does not reset the answer away), all within
/// `timeout`.
async fn refuse(mut stream: TcpStream, message: String, timeout: Duration, _permit: OwnedSemaphorePermit) {
    let body = format!(
        "{{\"error\":{{\"code\":\"TOO_MANY_CONNECTIONS\",\"message\":\"{message}; try again later\"}}}}"
    );
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(timeout, async move {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        let mut drained = 0usize;
        while drained < 64 * 1024 {
            match stream.read(&mut sink).await? {
                0 => break,
                n => drained += n,
            }
        }
        Ok::<(), io::Error>(())
    })
    .await;
}

/// Serves one connection until it ends, or until shutdown lets its request finish.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    _slots: (OwnedSemaphorePermit, AddressSlot),
    mut closing: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let io = TokioIo::new(TimedStream::new(stream, shared.ctx.limits.write_timeout));
    let service_shared = Arc::clone(&shared);
    let service = service_fn(move |request| serve_request(request, Arc::clone(&service_shared), peer));
    let connection = shared.http.serve_connection(io, service);
    let mut connection = std::pin::pin!(connection);
    let result = tokio::select! {
        result = connection.as_mut() => result,
        _ = closing.changed() => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(error) = result {
        tracing::debug!(client = %peer, %error, "admin HTTP connection ended with an error");
    }
}

/// One request: limits first, then `/healthz` at once, everything else through a queue.
async fn serve_request(
    request: Request<Incoming>,
    shared: Arc<Shared>,
    peer: SocketAddr,
) -> Result<Response<AdminBody>, Infallible> {
    let ctx = &shared.ctx;
    let limit = ctx.max_body_bytes;
    let route = Route::of(request.method(), request.uri().path());
    if declared_length(request.headers()).is_some_and(|length| length > limit as u64) {
        return Ok(respond(too_large(limit)));
    }
    if route == Route::Health {
        return Ok(respond(health(ctx)));
    }
    let info = RequestInfo {
        query: request.uri().query().unwrap_or("").to_string(),
        authorization: request
            .headers()
            .get(AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .map(str::to_string),
        route,
        peer,
    };
    // Who asks is settled before any body byte is read: a client without valid credentials
    // never makes the server hold a body (the refusal closes the connection, whose body
    // was not read).
    let principal = match login(&shared, &info).await {
        Ok(principal) => principal,
        Err(reply) if info.route.reads_body() => return Ok(respond(reply.closing())),
        Err(reply) => return Ok(respond(reply)),
    };
    let body = if info.route.reads_body() {
        match read_body(request.into_body(), limit, ctx.limits.body_timeout).await {
            Ok(body) => body,
            Err(error) => return Ok(respond(error.reply(limit))),
        }
    } else {
        Vec::new()
    };
    if let Route::Scan(name) = &info.route {
        let name = name.clone();
        return Ok(scan(&shared, info, principal, name).await);
    }
    let reply = on_pool(&shared, move |ctx| answer(ctx, &info, principal, body)).await;
    Ok(respond(reply.unwrap_or_else(|refused| refused)))
}

/// The request's principal, or the reply that refuses it. With Basic auth required the check
/// (the login throttle, a password derivation) runs on the blocking pool behind a permit of
/// `admin.max-concurrent-requests`; otherwise everyone is `User:ANONYMOUS` at once.
async fn login(shared: &Arc<Shared>, info: &RequestInfo) -> Result<Principal, Reply> {
    if shared.ctx.credentials.is_none() {
        return Ok(Principal::anonymous());
    }
    let info = info.clone();
    on_pool(shared, move |ctx| authenticate(ctx, &info)).await?
}

/// Runs `work` on the blocking pool holding a permit of `admin.max-concurrent-requests`;
/// `Err` is the 503 when none frees within `admin.queue-timeout` (or a 500 when `work`
/// panicked).
async fn on_pool<T: Send + 'static>(
    shared: &Arc<Shared>,
    work: impl FnOnce(&AdminContext) -> T + Send + 'static,
) -> Result<T, Reply> {
    let ctx = &shared.ctx;
    let Some(permit) = queue(&shared.requests, ctx.limits.queue_timeout).await else {
        return Err(busy("admin.max-concurrent-requests", &ctx.limits));
    };
    let work_ctx = Arc::clone(ctx);
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        work(&work_ctx)
    })
    .await
    .map_err(|error| {
        tracing::error!(%error, "admin request handler failed");
        Reply::error(500, "INTERNAL_ERROR", "the request handler failed")
    })
}

/// A scan: checks and rows on a blocking thread holding a scan permit; the answer starts
/// once the first rows (or an error) are there.
async fn scan(shared: &Shared, info: RequestInfo, principal: Principal, name: String) -> Response<AdminBody> {
    let limits = &shared.ctx.limits;
    let Some(permit) = queue(&shared.scans, limits.queue_timeout).await else {
        return respond(busy("admin.max-concurrent-scans", limits));
    };
    let (sender, receiver) = stream::channel();
    let ctx = Arc::clone(&shared.ctx);
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        match prepare_scan(&ctx, &info, &principal, &name) {
            Err(reply) => {
                let _ = sender.blocking_send(Message::Reply(reply));
            }
            Ok(response) => {
                if stream::produce(sender, response.content_type, response.body) == Produced::ClientGone {
                    tracing::info!(table = %name, client = %info.peer, "scan stopped: the client went away");
                }
            }
        }
    });
    match stream::start(receiver).await {
        Started::Reply(reply) => respond(reply),
        Started::Empty { content_type } => with_content_type(200, &content_type, AdminBody::full(Vec::new())),
        Started::Body {
            content_type,
            first,
            receiver,
        } => with_content_type(200, &content_type, AdminBody::stream(first, receiver)),
    }
}

/// Waits in line for a permit, at most `timeout`.
async fn queue(semaphore: &Arc<Semaphore>, timeout: Duration) -> Option<OwnedSemaphorePermit> {
    tokio::time::timeout(timeout, Arc::clone(semaphore).acquire_owned())
        .await
        .ok()?
        .ok()
}

fn busy(key: &str, limits: &AdminLimits) -> Reply {
    Reply::error(
        503,
        "SERVER_BUSY",
        &format!(
            "the admin server is busy: no free slot ({key}) within {:?} (admin.queue-timeout); try again later",
            limits.queue_timeout
        ),
    )
    .with_header("Retry-After", "1")
}

fn too_large(limit: usize) -> Reply {
    Reply::error(
        413,
        "REQUEST_TOO_LARGE",
        &format!("request body over {limit} bytes (admin.max-request-size)"),
    )
    .closing()
}

/// The request's `Content-Length`, when it has one (hyper has already refused a malformed
/// or contradictory one).
fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse().ok())
}

#[derive(Debug, Error)]
enum BodyError {
    #[error("request body over the limit")]
    TooLarge,
    #[error("the request body did not arrive within {0:?}")]
    TimedOut(Duration),
    #[error("cannot read the request body: {0}")]
    Read(#[source] hyper::Error),
}

impl BodyError {
    fn reply(&self, limit: usize) -> Reply {
        match self {
            BodyError::TooLarge => too_large(limit),
            BodyError::TimedOut(_) => {
                Reply::error(408, "REQUEST_TIMEOUT", &format!("{self} (admin.body-timeout)")).closing()
            }
            BodyError::Read(_) => Reply::error(400, "BAD_REQUEST", &self.to_string()).closing(),
        }
    }
}

/// Reads a body of at most `limit` bytes within `timeout`, counting as it arrives.
async fn read_body(mut body: Incoming, limit: usize, timeout: Duration) -> Result<Vec<u8>, BodyError> {
    let read = async move {
        let mut out = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(BodyError::Read)?;
            if let Ok(data) = frame.into_data() {
                if out.len() + data.len() > limit {
                    return Err(BodyError::TooLarge);
                }
                out.extend_from_slice(&data);
            }
        }
        Ok(out)
    };
    tokio::time::timeout(timeout, read)
        .await
        .unwrap_or(Err(BodyError::TimedOut(timeout)))
}

fn respond(reply: Reply) -> Response<AdminBody> {
    let mut builder = Response::builder()
        .status(reply.status)
        .header(CONTENT_TYPE, reply.content_type);
    for (name, value) in &reply.headers {
        builder = builder.header(*name, value.as_str());
    }
    if reply.close {
        builder = builder.header(CONNECTION, "close");
    }
    builder
        .body(AdminBody::full(reply.body))
        .unwrap_or_else(|_| internal_error())
}

fn with_content_type(status: u16, content_type: &str, body: AdminBody) -> Response<AdminBody> {
    Response::builder()
        .status(status)
        .header(CONTENT_TYPE, content_type)
        .body(body)
        .unwrap_or_else(|_| internal_error())
}

fn internal_error() -> Response<AdminBody> {
    let mut response = Response::new(AdminBody::full(b"internal error\n".to_vec()));
    *response.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
    response
}

/// A TCP stream whose writes fail once they have made no progress for `write_timeout`: a
/// client that stops reading loses its connection instead of holding it forever.
struct TimedStream {
    inner: TcpStream,
    write_timeout: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl TimedStream {
    fn new(inner: TcpStream, write_timeout: Duration) -> Self {
        Self {
            inner,
            write_timeout,
            stalled: None,
        }
    }

    /// Called when a write is pending: arms the timer once, fails when it has run out.
    fn poll_stalled<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let timeout = self.write_timeout;
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client read nothing for admin.write-timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn progress<T>(&mut self, poll: Poll<io::Result<T>>, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        match poll {
            Poll::Pending => self.poll_stalled(cx),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }
}

impl AsyncRead for TimedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for TimedStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, data);
        self.progress(poll, cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, data);
        self.progress(poll, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.progress(poll, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.progress(poll, cx)
    }
}
