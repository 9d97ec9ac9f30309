//! One Kafka connection on the core that accepted it.
//!
//! Two tasks share the socket: the reader splits frames with the protocol crate's
//! [`FrameSplitter`] (checking the size prefix against `kafka.max-request-size` before reading a
//! body byte), hands each to [`super::dispatch`] and queues the pending response; the writer
//! sends responses strictly in request order. The queue is bounded by
//! `kafka.connection.max-inflight-requests`, so a slow disk or a slow consumer of responses
//! stops the reader, which stops reading the socket: memory per connection stays bounded and
//! TCP pushes back on the client. The reader also closes a connection idle for
//! `kafka.connection.max-idle-time`, and stops at shutdown after queued responses are written
//! (for at most `kafka.shutdown-timeout`: then the answers not written are given up).

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::channels::local_channel::{self, LocalReceiver};
use glommio::net::TcpStream;
use glommio::sync::StaticPermit;
use kafluss_protocol::{frame_len, FrameError, FrameSplitter, FRAME_PREFIX_LEN};

use super::context::{ConnectionContext, KafkaCore};
use super::{Dispatch, HandlerError, PendingResponse, Response};
use crate::metrics::Unanswered;
use crate::runtime::KafkaListener;
use crate::sched::{AddressAllowance, StopSignal};
use crate::telemetry::Repeats;

/// How many bytes the reader asks the socket for at most while waiting for a frame prefix
/// (pipelined small requests arrive together; big bodies are read to their exact end).
const READ_CHUNK: usize = 64 * 1024;

/// The read buffer of a connection with no partial frame: a waiting (idle) connection holds
/// only this much; a bigger buffer is allocated once bytes arrive.
const IDLE_READ: usize = 512;

/// Responses that are ready together are written with one socket write, up to this many bytes.
const COALESCE_BYTES: usize = 64 * 1024;

/// Why a connection ended (logged at debug level; errors at info).
#[derive(Debug)]
enum CloseReason {
    PeerClosed,
    Idle,
    Shutdown,
    FrameTooLarge(FrameError),
    /// A request other than Produce declared over `kafka.max-other-request-size`
    /// ([`HandlerError::OtherTooLarge`]), refused before its body is read.
    OtherTooLarge(HandlerError),
    Io(std::io::Error),
    Handler,
    /// Its requests append on core `.0`: it goes on there (see [`Served::Move`]).
    Moving(usize),
}

/// The socket shared by the reader and writer tasks. Each half borrows the stream only inside
/// one `poll_*` call, never across an await, and glommio keeps separate read and write wakers.
#[derive(Clone)]
struct SharedStream(Rc<RefCell<TcpStream>>);

impl futures_lite::AsyncRead for SharedStream {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut [u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let mut stream = self.0.borrow_mut();
        std::pin::Pin::new(&mut *stream).poll_read(cx, buf)
    }
}

impl futures_lite::AsyncWrite for SharedStream {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let mut stream = self.0.borrow_mut();
        std::pin::Pin::new(&mut *stream).poll_write(cx, buf)
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let mut stream = self.0.borrow_mut();
        std::pin::Pin::new(&mut *stream).poll_flush(cx)
    }

    fn poll_close(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let mut stream = self.0.borrow_mut();
        std::pin::Pin::new(&mut *stream).poll_close(cx)
    }
}

/// A queued response with what the metrics need about its request.
struct Queued {
    api_key: i16,
    received: Instant,
    request_bytes: usize,
    response: PendingResponse,
    /// The request's share of its address's and of the core's request memory, given back
    /// once its answer is written.
    memory: FrameMemory,
    /// What it holds of `kafka.max-answer-memory`, given back once its answer is written.
    held: Option<StaticPermit>,
}

/// A frame's reservation, taken whole once its size is known: first from its client address's
/// allowance (`kafka.max-request-memory-per-address`), then from the core's
/// `kafka.max-request-memory`; both are given back together when it is dropped (once the
/// frame's answer is written, or with the connection).
struct FrameMemory {
    _address: StaticPermit,
    _core: StaticPermit,
}

/// Outcome of waiting for the next frame.
enum FrameEvent {
    /// A frame body and its reservation of request memory.
    Frame(Bytes, FrameMemory),
    Closed(CloseReason),
}

/// Splits the byte stream into frames; holds at most one frame plus one read chunk, and only
/// [`IDLE_READ`] bytes while no frame is partly read.
struct FrameReader {
    buffer: BytesMut,
    splitter: FrameSplitter,
    /// The current frame's reservation, taken once its size prefix is known.
    reserved: Option<FrameMemory>,
    /// `kafka.max-other-request-size`: the bound of a frame whose API key is not Produce's.
    other_limit: usize,
    /// Whether the next frame starts with a request header (not a raw SASL v0 token), so its
    /// API key can be read before its body.
    headed: bool,
}

/// The size prefix and a request header's API key.
const PREFIX_AND_KEY: usize = FRAME_PREFIX_LEN + 2;

impl FrameReader {
    fn new(max_frame: usize, other_limit: usize) -> Self {
        Self {
            buffer: BytesMut::new(),
            splitter: FrameSplitter::new(max_frame),
            reserved: None,
            other_limit,
            headed: true,
        }
    }

    /// A frame of a request other than Produce declared over `other_limit`, known from its
    /// first six bytes: refused before any memory is reserved for its body.
    fn other_too_large(&self, size: usize) -> Option<CloseReason> {
        let key = self.buffer.get(FRAME_PREFIX_LEN..PREFIX_AND_KEY)?;
        let api_key = i16::from_be_bytes([key[0], key[1]]);
        let over = self.headed && api_key != kafluss_protocol::ApiKey::PRODUCE.0 && size > self.other_limit;
        over.then_some(CloseReason::OtherTooLarge(HandlerError::OtherTooLarge {
            api_key,
            size,
            limit: self.other_limit,
        }))
    }

    /// Bytes still to read before the frame's reservation is decided: up to its size prefix
    /// and, for a request header, its API key (a frame too short to carry one: the prefix).
    fn undecided(&self) -> usize {
        let keyed = self.headed
            && self
                .buffer
                .first_chunk::<FRAME_PREFIX_LEN>()
                .is_none_or(|prefix| i32::from_be_bytes(*prefix) >= 2);
        let decides = if keyed { PREFIX_AND_KEY } else { FRAME_PREFIX_LEN };
        decides.saturating_sub(self.buffer.len())
    }

    /// The body size the buffered prefix declares, once its four bytes are here; checked
    /// against the limit before any body byte is read.
    fn declared_size(&self) -> Result<Option<usize>, CloseReason> {
        match self.buffer.first_chunk::<FRAME_PREFIX_LEN>() {
            None => Ok(None),
            Some(prefix) => frame_len(*prefix, self.splitter.max_frame_len())
                .map(Some)
                .map_err(CloseReason::FrameTooLarge),
        }
    }

    /// A complete frame body if the buffer holds one.
    fn take_frame(&mut self) -> Result<Option<Bytes>, CloseReason> {
        self.splitter
            .split(&mut self.buffer)
            .map_err(CloseReason::FrameTooLarge)
    }

    /// How many bytes to ask the socket for: the rest of the current frame when its size is
    /// known (so a huge frame is read to its end, not beyond), else one chunk.
    fn want(&self) -> usize {
        if self.buffer.is_empty() {
            return IDLE_READ;
        }
        // Until the frame's memory is reserved, only up to what decides the reservation (a
        // client sending a few bytes at a time must not get a chunk read unreserved).
        let undecided = self.undecided();
        if self.reserved.is_none() && undecided > 0 {
            return undecided;
        }
        self.splitter
            .bytes_needed(&self.buffer)
            .map_or(1, |needed| needed.clamp(1, READ_CHUNK))
    }

    /// The next frame and its reservation of request memory (its client `address`'s and the
    /// core's), or why the connection ends: a bad prefix, the peer closing, an I/O error,
    /// `idle` without a complete frame, the core stopping, or the writer giving up (`closing`).
    async fn next(
        &mut self,
        stream: &mut SharedStream,
        idle: Duration,
        core: &KafkaCore,
        address: &AddressAllowance,
        closing: &StopSignal,
    ) -> FrameEvent {
        let idle_deadline = Instant::now() + idle;
        let stop = &core.stop;
        loop {
            // Reserve the frame's bytes before reading its body: first of its address's
            // allowance, so that one address's connections hold at most
            // `kafka.max-request-memory-per-address` of the core however many frames they
            // declare (a frame waits behind that address's earlier ones), then of the core's
            // `kafka.max-request-memory`. When either is held already, this connection waits
            // (and TCP pushes back on its client) until answers give memory back. Each frame
            // is reserved whole and always in this order: a frame holding the core's memory
            // waits for no more, one holding its address's allowance only for the core's, so
            // frames never wait on one another in a circle.
            let size = match self.declared_size() {
                Ok(size) => size,
                Err(reason) => return FrameEvent::Closed(reason),
            };
            // A header's API key is read first (two bytes more), so that a request other
            // than Produce over its own bound is refused before anything is reserved for it.
            let key_pending = size.is_some() && self.reserved.is_none() && self.undecided() > 0;
            if let (Some(size), None) = (size, self.reserved.as_ref()) {
                if let Some(reason) = self.other_too_large(size) {
                    return FrameEvent::Closed(reason);
                }
            }
            if let (Some(size), None, false) = (size, self.reserved.as_ref(), key_pending) {
                let remaining = idle_deadline.saturating_duration_since(Instant::now());
                let units = 4 + size as u64;
                let reserve = async {
                    let address = address.acquire(units).await?;
                    Ok::<_, glommio::GlommioError<()>>(FrameMemory {
                        _address: address,
                        _core: core.request_memory.acquire(units).await?,
                    })
                };
                let reserved = futures_lite::future::or(async { Some(reserve.await) }, async {
                    glommio::timer::sleep(remaining).await;
                    None
                })
                .await;
                match reserved {
                    Some(Ok(permit)) => self.reserved = Some(permit),
                    Some(Err(_)) => return FrameEvent::Closed(CloseReason::Shutdown),
                    None => return FrameEvent::Closed(CloseReason::Idle),
                }
            }
            match self.take_frame() {
                Ok(Some(frame)) => match self.reserved.take() {
                    Some(permit) => return FrameEvent::Frame(frame, permit),
                    None => return FrameEvent::Closed(CloseReason::Handler),
                },
                Ok(None) => {}
                Err(reason) => return FrameEvent::Closed(reason),
            }
            // At shutdown: every complete request already read was handed out above; read no
            // more (a client that keeps sending would otherwise keep the reader busy forever,
            // since a read that is ready wins the race below).
            if stop.is_stopping() {
                return FrameEvent::Closed(CloseReason::Shutdown);
            }
            if closing.is_stopping() {
                return FrameEvent::Closed(CloseReason::Handler);
            }
            let want = self.want();
            if self.buffer.is_empty() && self.buffer.capacity() > IDLE_READ {
                // Nothing partly read: give the big buffer back before waiting (idle memory).
                self.buffer = BytesMut::new();
            }
            if let Some(size) = size {
                // Room for the whole frame at once (its memory is reserved above), so the reads
                // that follow never move the bytes already read to a larger allocation.
                let frame = FRAME_PREFIX_LEN + size;
                if self.buffer.capacity() < frame {
                    self.buffer.reserve(frame - self.buffer.len());
                }
            }
            let remaining = idle_deadline.saturating_duration_since(Instant::now());
            let interrupted = futures_lite::future::or(
                glommio::timer::sleep(remaining),
                futures_lite::future::or(stop.stopping(), closing.stopping()),
            );
            match self.read_more(stream, want, interrupted).await {
                Some(Ok(())) => {}
                Some(Err(reason)) => return FrameEvent::Closed(reason),
                None => {
                    let reason = if stop.is_stopping() {
                        CloseReason::Shutdown
                    } else if closing.is_stopping() {
                        CloseReason::Handler
                    } else {
                        CloseReason::Idle
                    };
                    return FrameEvent::Closed(reason);
                }
            }
        }
    }
}

impl FrameReader {
    /// Reads up to `want` more bytes into the buffer, unless `interrupted` resolves first:
    /// `Some(Ok(()))` when bytes came, `Some(Err(_))` when the peer closed or the read failed,
    /// `None` when interrupted (nothing read: a pending glommio read consumes nothing, so losing
    /// the race loses no bytes).
    async fn read_more(
        &mut self,
        stream: &mut SharedStream,
        want: usize,
        interrupted: impl std::future::Future<Output = ()>,
    ) -> Option<Result<(), CloseReason>> {
        let start = self.buffer.len();
        self.buffer.resize(start + want, 0);
        let read = futures_lite::future::or(
            async { Some(stream.read(&mut self.buffer[start..]).await) },
            async {
                interrupted.await;
                None
            },
        )
        .await;
        let (kept, outcome) = match read {
            Some(Ok(0)) => (0, Some(Err(CloseReason::PeerClosed))),
            Some(Ok(n)) => (n, Some(Ok(()))),
            Some(Err(e)) => (0, Some(Err(CloseReason::Io(e)))),
            None => (0, None),
        };
        self.buffer.truncate(start + kept);
        outcome
    }

    /// Waits for `settled` (a login the throttle answers later), reading meanwhile what the
    /// client sends (kept for the frames that follow; no more than [`IDLE_READ`] bytes
    /// buffered, which needs no reservation), so that a client closing before its login's
    /// turn is noticed and the turn given back.
    async fn wait_reading(
        &mut self,
        stream: &mut SharedStream,
        settled: &StopSignal,
        stop: &StopSignal,
        closing: &StopSignal,
    ) -> Result<(), CloseReason> {
        let ended = || async {
            futures_lite::future::or(
                settled.stopping(),
                futures_lite::future::or(stop.stopping(), closing.stopping()),
            )
            .await
        };
        loop {
            if settled.is_stopping() {
                return Ok(());
            }
            if stop.is_stopping() {
                return Err(CloseReason::Shutdown);
            }
            if closing.is_stopping() {
                return Err(CloseReason::Handler);
            }
            let room = IDLE_READ.saturating_sub(self.buffer.len());
            if room == 0 {
                ended().await;
                continue;
            }
            if let Some(Err(reason)) = self.read_more(stream, room, ended()).await {
                return Err(reason);
            }
        }
    }
}

/// What a connection carries to the core it moves to: the bytes read but not yet split into
/// frames (the start of the next request) and its login. No memory reservation: it moves once
/// every frame it read is answered (their reservations given back here), and the next frame
/// reserves its bytes of the new core's budgets there.
pub struct Carried {
    pub buffered: BytesMut,
    pub sasl: kafluss_auth::SaslSession,
}

/// How serving a connection on this core ended.
pub enum Served {
    /// The connection is closed.
    Closed,
    /// Every request read was answered, and the connection goes on on core `to`, which
    /// serves `socket` (a second descriptor of the connection; this core's is closed) from
    /// where this one stopped reading.
    Move {
        to: usize,
        socket: socket2::Socket,
        carried: Box<Carried>,
    },
}

/// Serves one connection until it closes or moves to another core; never panics on client
/// input. `carried` is what it brings from the core it was served by before (boxed: this
/// future is part of every connection's memory, idle or not).
pub async fn serve(
    core: Rc<KafkaCore>,
    stream: TcpStream,
    listener: Rc<KafkaListener>,
    carried: Option<Box<Carried>>,
) -> Served {
    let peer = match stream.peer_addr() {
        Ok(peer) => peer,
        Err(_) => return Served::Closed,
    };
    let _ = stream.set_nodelay(true);
    // The listener (glommio's) sets only SO_REUSEPORT, which accepted sockets inherit; without
    // SO_REUSEADDR too, the sockets this server closes first (at shutdown) keep the port in
    // FIN-WAIT-2 / TIME_WAIT for up to a minute against the next start's exclusive bind check,
    // and a restart failed with "Address already in use".
    let _ = socket2::SockRef::from(&stream).set_reuse_address(true);
    let config = core.config();
    let (buffered, sasl) = match carried.map(|carried| *carried) {
        Some(Carried { buffered, sasl }) => (buffered, sasl),
        None => (BytesMut::new(), kafluss_auth::SaslSession::new(listener.security)),
    };
    let context = Rc::new(ConnectionContext {
        core: core.clone(),
        peer,
        sasl: RefCell::new(sasl),
        writes: Default::default(),
        listener,
        client_gone: StopSignal::default(),
        login_pending: Cell::new(None),
        address_memory: core.address_memory.of(peer.ip().to_canonical()),
    });
    let stream = SharedStream(Rc::new(RefCell::new(stream)));
    let (queue, queued) = local_channel::new_bounded::<Queued>(config.max_inflight_requests);
    // Set by the writer when it stops writing (a response that closes, a broken socket): the
    // reader then stops reading, so the connection closes.
    let closing = Rc::new(StopSignal::default());
    let writer = glommio::spawn_local(write_responses(
        core.clone(),
        stream.clone(),
        peer,
        queued,
        closing.clone(),
    ));

    let mut reader = FrameReader::new(config.max_request_size, config.max_other_request_size);
    reader.buffer = buffered;
    let mut read_stream = stream.clone();
    let reason = loop {
        // A login answered later settles first: the next frame's bound, whether it is a raw
        // token, and whether it may be served at all depend on its outcome.
        if let Some(settled) = context.login_pending.take() {
            if let Err(reason) = reader
                .wait_reading(&mut read_stream, &settled, &core.stop, &closing)
                .await
            {
                break reason;
            }
        }
        // Before authentication frames are bounded much lower (a PLAIN token is small).
        reader.splitter = FrameSplitter::new(match context.sasl.borrow().max_frame_len() {
            Some(limit) => limit.min(config.max_request_size),
            None => config.max_request_size,
        });
        reader.headed = !context.sasl.borrow().expects_raw_token();
        let (frame, memory) = match reader
            .next(
                &mut read_stream,
                config.connection_max_idle_time,
                &core,
                &context.address_memory,
                &closing,
            )
            .await
        {
            FrameEvent::Frame(frame, memory) => (frame, memory),
            FrameEvent::Closed(reason) => break reason,
        };
        let request_bytes = frame.len() + 4;
        let received = Instant::now();
        match super::dispatch(&context, frame).await {
            Dispatch::Respond {
                api_key,
                response,
                mut held,
            } => {
                let close_after = response.closes_connection();
                if let (
                    PendingResponse::Ready(Response {
                        frame: Some(frame), ..
                    }),
                    None,
                ) = (&response, &held)
                {
                    // An answer is counted from its making until it is written: a client that
                    // pipelines small requests with large answers and never reads them holds
                    // no more than kafka.max-answer-memory of a core (this one answer beyond).
                    match core.hold_answer_memory(frame.len()).await {
                        Ok(permit) => held = Some(permit),
                        Err(why) => {
                            core.metrics().connection_closed_unanswered(why.unanswered());
                            log_close(
                                &core,
                                why.kind(),
                                |suppressed| tracing::info!(%peer, suppressed, "closing Kafka connection: {why}"),
                            );
                            break CloseReason::Handler;
                        }
                    }
                }
                let item = Queued {
                    api_key,
                    received,
                    request_bytes,
                    response,
                    memory,
                    held,
                };
                if queue.send(item).await.is_err() {
                    break CloseReason::Handler;
                }
                if close_after {
                    break CloseReason::Handler;
                }
                if let Some(to) = context
                    .writes
                    .move_to(core.telemetry.core(), config.connection_move_after)
                {
                    if !core.stop.is_stopping() {
                        break CloseReason::Moving(to);
                    }
                }
            }
            Dispatch::Close { why } => {
                core.metrics().connection_closed_unanswered(why.unanswered());
                log_close(
                    &core,
                    why.kind(),
                    |suppressed| tracing::info!(%peer, suppressed, "closing Kafka connection: {why}"),
                );
                break CloseReason::Handler;
            }
        }
    };
    if matches!(reason, CloseReason::PeerClosed | CloseReason::Io(_)) {
        context.client_gone.stop();
    }
    match &reason {
        CloseReason::FrameTooLarge(error) => {
            let (size, max) = match *error {
                FrameError::TooLarge { size, max } => (size as i64, max),
                FrameError::Negative(size) => (i64::from(size), reader.splitter.max_frame_len()),
            };
            if context.sasl.borrow().max_frame_len().is_some() {
                core.metrics()
                    .connection_closed_unanswered(Unanswered::TooLargeBeforeAuthentication);
                let why = "request larger than allowed before SASL authentication";
                log_close(
                    &core,
                    why,
                    |suppressed| tracing::info!(%peer, size, max, suppressed, "closing Kafka connection: {why}"),
                )
            } else {
                core.metrics().connection_closed_unanswered(Unanswered::TooLarge);
                let why = "request larger than kafka.max-request-size";
                log_close(
                    &core,
                    why,
                    |suppressed| tracing::info!(%peer, size, max, suppressed, "closing Kafka connection: {why}"),
                )
            }
        }
        CloseReason::OtherTooLarge(why) => {
            core.metrics().connection_closed_unanswered(why.unanswered());
            log_close(
                &core,
                why.kind(),
                |suppressed| tracing::info!(%peer, suppressed, "closing Kafka connection: {why}"),
            )
        }
        CloseReason::Idle => log_close(
            &core,
            "no complete request within kafka.connection.max-idle-time",
            |suppressed| {
                tracing::info!(
                    %peer,
                    suppressed,
                    "closing Kafka connection: no complete request within kafka.connection.max-idle-time ({:?})",
                    config.connection_max_idle_time
                )
            },
        ),
        CloseReason::Io(e) => log_close(
            &core,
            "I/O error",
            |suppressed| tracing::info!(%peer, suppressed, "Kafka connection I/O error: {e}"),
        ),
        CloseReason::Moving(_) => {}
        other => tracing::debug!(%peer, "Kafka connection closing: {other:?}"),
    }
    // What a moving connection has read but not yet split into frames goes with it; the
    // reader goes now (its memory is not held while the last answers are written).
    let moving = match reason {
        CloseReason::Moving(to) => Some((to, std::mem::take(&mut reader.buffer))),
        _ => None,
    };
    drop(reader);
    // Closing the queue lets the writer finish what is queued, then stop.
    drop(queue);
    let written = writer.await;
    drop(read_stream);
    let stream = match Rc::try_unwrap(stream.0) {
        Ok(stream) => stream.into_inner(),
        Err(shared) => {
            let _ = SharedStream(shared).close().await;
            return Served::Closed;
        }
    };
    // Every response is written (unless the writer stopped: then the connection closes).
    let mut stream = match moving {
        Some((to, buffered)) if !closing.is_stopping() => match move_out(stream, to, buffered, &context) {
            Ok(served) => return served,
            Err(stream) => stream,
        },
        _ => stream,
    };
    match written {
        // Its client reads nothing: neither a FIN nor what it still sends would change that.
        Written::CutOff => {
            let _ = stream.close().await;
        }
        Written::All => close_gracefully(stream, peer, false).await,
        Written::EndingAnswer => close_gracefully(stream, peer, true).await,
    }
    Served::Closed
}

/// The key of the repeat-limited lines about closing connections.
const CLOSING: &str = "Kafka connections";

/// Logs, with `line`, that a connection closes for a reason of kind `kind` that its client
/// caused: at most one line per kind and `server.log-repeat-interval` on each core (given the
/// occurrences left out since the kind's last line), and one interval later one line counting
/// those that interval left out, so one client opening connection after connection does not
/// grow the log at its own pace. The first of a burst names its client. Every close a client
/// causes is logged through here, also by the handlers that decide it (a failed acks=0
/// Produce request, a refused SASL step).
pub(super) fn log_close(core: &KafkaCore, kind: &'static str, line: impl FnOnce(u64)) {
    core.telemetry.log_limited(
        CLOSING,
        kind,
        0,
        |Repeats { suppressed, .. }| line(suppressed),
        move |_, Repeats { suppressed, interval, .. }| {
            tracing::info!(
                suppressed,
                "closing Kafka connections: {suppressed} more closed for {kind} in the {interval:?} after the last such line"
            )
        },
    );
}

/// The connection as it leaves for core `to`: a second descriptor of its socket (this core's
/// closes with `stream`), the bytes read but not split into frames, and its login. Gives the
/// stream back when the socket cannot be duplicated (the connection then closes here).
fn move_out(
    stream: TcpStream,
    to: usize,
    buffered: BytesMut,
    context: &ConnectionContext,
) -> Result<Served, TcpStream> {
    let peer = context.peer;
    match socket2::SockRef::from(&stream).try_clone() {
        Ok(socket) => {
            tracing::debug!(%peer, to, "Kafka connection moves to the core its requests append on");
            let sasl = context
                .sasl
                .replace(kafluss_auth::SaslSession::new(context.listener.security));
            Ok(Served::Move {
                to,
                socket,
                carried: Box::new(Carried { buffered, sasl }),
            })
        }
        Err(e) => {
            tracing::info!(%peer, "closing Kafka connection: cannot duplicate its socket to move it: {e}");
            Err(stream)
        }
    }
}

/// Closes a moved connection that its new core does not serve (it arrived as the core
/// stopped): what its client has sent is read and discarded first, without waiting, then a FIN
/// is sent, so the close is not a reset (closing a socket with unread bytes sends an RST, which
/// a client reports as a connection reset instead of a closed connection). Its unanswered
/// requests are the client's to retry. A client that sends more after the FIN can still be
/// reset.
pub fn close_unserved(socket: socket2::Socket) {
    use std::io::Read;
    if socket.set_nonblocking(true).is_ok() {
        let mut discard = [0u8; 4096];
        // Bounded: at most what the socket's receive buffer holds now, plus what arrives
        // meanwhile, up to 1 MiB.
        for _ in 0..256 {
            match (&socket).read(&mut discard) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    }
    let _ = socket.shutdown(std::net::Shutdown::Write);
}

/// How long a closing connection keeps reading (and discarding) what the client still sends.
const CLOSE_LINGER: Duration = Duration::from_secs(1);

/// Closes after every response was written: half-closes (FIN after the last response), then
/// reads and discards whatever the client still sends until it closes too, for at most
/// [`CLOSE_LINGER`]. Closing a socket with unread bytes in its receive queue makes the kernel
/// send a reset, and a reset makes the client's kernel drop responses it has received but not
/// yet read: at shutdown under load clients then saw transport errors for records that were
/// stored and answered. After a FIN, a client reads every answer, then sees the end.
///
/// `client_closes_first`: the last response was an answer that ends the session (a refused
/// login, say), which the client must read before it sees the end. The FIN then waits until the
/// client has closed (it does once it has read the error), for at most [`CLOSE_LINGER`]: a
/// client that reads the answer and the end of the stream in one go (kafka-python 3.0) reports
/// only "socket disconnected" and never the error it was sent.
async fn close_gracefully(mut stream: TcpStream, peer: SocketAddr, client_closes_first: bool) {
    let mut client_closed = false;
    if client_closes_first {
        client_closed = discard_until_closed(&mut stream, peer).await;
    }
    if stream.shutdown(std::net::Shutdown::Write).await.is_ok() && !client_closed {
        discard_until_closed(&mut stream, peer).await;
    }
    let _ = stream.close().await;
}

/// Reads and discards what the client sends until it closes (true) or [`CLOSE_LINGER`] passes
/// or the read fails (false).
async fn discard_until_closed(stream: &mut TcpStream, peer: SocketAddr) -> bool {
    let deadline = Instant::now() + CLOSE_LINGER;
    // On the heap: an array here would be part of every connection's future, idle or not.
    let mut discard = vec![0u8; 4096];
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            tracing::debug!(%peer, "client still connected {CLOSE_LINGER:?} after its last answer");
            return false;
        }
        let read = futures_lite::future::or(async { Some(stream.read(&mut discard).await) }, async {
            glommio::timer::sleep(remaining).await;
            None
        })
        .await;
        match read {
            Some(Ok(0)) => return true,
            Some(Ok(_)) => continue,
            _ => return false,
        }
    }
}

/// How the writer ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Written {
    /// Every answer was written, or given up with the connection for a reason of its own (a
    /// failed write, answers not read within `kafka.connection.max-idle-time`, a response that
    /// closes it silently).
    All,
    /// The last response was an answer that ends the session, written whole: the client
    /// closes first (see [`close_gracefully`]).
    EndingAnswer,
    /// Shutdown's `kafka.shutdown-timeout` passed with answers not written
    /// ([`super::context::AnswerCutoff`]): the connection closes at once.
    CutOff,
}

/// Writes responses in request order as each becomes ready; records metrics. Responses that
/// are ready together (pipelined requests answered in one wake-up) go out in one write.
async fn write_responses(
    core: Rc<KafkaCore>,
    mut stream: SharedStream,
    peer: SocketAddr,
    queued: LocalReceiver<Queued>,
    closing: Rc<StopSignal>,
) -> Written {
    let mut closed_on_answer = false;
    let mut broken = false;
    // Answers in `out` (responses with a frame), and those given up by the shutdown's cut.
    let mut framed = 0u64;
    let mut cut_off: Option<u64> = None;
    let mut out: Vec<u8> = Vec::new();
    // The memory permits of the answers in `out`: given back once `out` is written (a client
    // that reads slowly holds them while its answers wait in the socket's way).
    let mut permits: Vec<(FrameMemory, Option<StaticPermit>)> = Vec::new();
    let mut next: Option<Queued> = None;
    loop {
        let item = match next.take() {
            Some(item) => item,
            None => match queued.recv().await {
                Some(item) => item,
                None => break,
            },
        };
        let mut close_after = answer(&core, item, &mut out, &mut permits, &mut framed, broken).await;
        // Gather every further response that is ready now, without waiting.
        while close_after == Close::No && out.len() < COALESCE_BYTES {
            let Some(Some(mut item)) = futures_lite::future::poll_once(queued.recv()).await else {
                break;
            };
            if let PendingResponse::Later(later) = &mut item.response {
                match futures_lite::future::poll_once(later).await {
                    Some(response) => item.response = PendingResponse::Ready(response),
                    None => {
                        next = Some(item);
                        break;
                    }
                }
            }
            close_after = answer(&core, item, &mut out, &mut permits, &mut framed, broken).await;
        }
        if !broken && !out.is_empty() {
            match write_within(&mut stream, peer, &out, &core).await {
                Write::Whole => {}
                Write::Failed => {
                    broken = true;
                    closing.stop();
                }
                Write::CutOff => {
                    broken = true;
                    closing.stop();
                    cut_off = Some(0);
                }
            }
        }
        if let Some(lost) = cut_off.as_mut() {
            *lost += framed;
        }
        framed = 0;
        out.clear();
        permits.clear();
        if out.capacity() > COALESCE_BYTES {
            out = Vec::new();
        }
        if close_after != Close::No && !broken {
            closed_on_answer = close_after == Close::AfterAnswer;
            broken = true;
            closing.stop();
        }
        // Once broken: keep awaiting in-flight work so nothing is abandoned half-done.
    }
    if !broken {
        let _ = stream.flush().await;
    }
    if let Some(lost) = cut_off {
        core.cutoff.record(lost);
        tracing::info!(
            %peer,
            answers = lost,
            "closing Kafka connection at shutdown: its answers were not read within kafka.shutdown-timeout ({:?}); {lost} not written",
            core.config().kafka_shutdown_timeout
        );
        return Written::CutOff;
    }
    if closed_on_answer {
        Written::EndingAnswer
    } else {
        Written::All
    }
}

/// How a write ended.
enum Write {
    Whole,
    /// The write failed, or did not finish within `kafka.connection.max-idle-time`.
    Failed,
    /// Shutdown gave up the answers not written yet (`kafka.shutdown-timeout`).
    CutOff,
}

/// Writes `bytes` whole, unless the write fails or does not finish within
/// `kafka.connection.max-idle-time` (a client that stops reading must not hold its answers, and
/// the request memory they count against, for ever) or, at shutdown, before
/// `kafka.shutdown-timeout` has passed. The timer is armed only when the write does not finish
/// at once (the socket buffer full).
async fn write_within(stream: &mut SharedStream, peer: SocketAddr, bytes: &[u8], core: &KafkaCore) -> Write {
    let write = stream.write_all(bytes);
    futures_lite::pin!(write);
    let done = |result: std::io::Result<()>| {
        if result.is_ok() {
            Write::Whole
        } else {
            Write::Failed
        }
    };
    if let Some(result) = futures_lite::future::poll_once(write.as_mut()).await {
        return done(result);
    }
    let limit = core.config().connection_max_idle_time;
    let idle = async {
        glommio::timer::sleep(limit).await;
        log_close(
            core,
            "answers not read within kafka.connection.max-idle-time",
            |suppressed| {
                tracing::info!(
                    %peer,
                    suppressed,
                    "closing Kafka connection: its answers were not read within kafka.connection.max-idle-time ({limit:?})"
                )
            },
        );
        Write::Failed
    };
    let cut = async {
        core.cutoff.reached().await;
        Write::CutOff
    };
    futures_lite::future::or(async { done(write.await) }, futures_lite::future::or(cut, idle)).await
}

/// Whether the connection closes after a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Close {
    No,
    /// After a response that sends nothing (an acks=0 failure, an unencodable answer).
    Silently,
    /// After a response with an answer the client must read (a refused login).
    AfterAnswer,
}

/// Waits for `item`'s response, records its metrics, appends its frame to `out` (unless the
/// connection is `broken`) and its memory permits to `permits`, which the caller gives back
/// once `out` is written, and counts it in `framed` when it has a frame; returns whether the
/// connection closes after it.
async fn answer(
    core: &KafkaCore,
    item: Queued,
    out: &mut Vec<u8>,
    permits: &mut Vec<(FrameMemory, Option<StaticPermit>)>,
    framed: &mut u64,
    broken: bool,
) -> Close {
    permits.push((item.memory, item.held));
    let response: Response = match item.response {
        PendingResponse::Ready(response) => response,
        PendingResponse::Later(later) => later.await,
    };
    let bytes_out = response.frame.as_ref().map_or(0, |f| f.len());
    core.metrics().record_request(
        item.api_key,
        item.request_bytes,
        bytes_out,
        item.received.elapsed(),
        response.failed,
    );
    if let Some(frame) = &response.frame {
        *framed += 1;
        if !broken {
            out.extend_from_slice(frame);
        }
    }
    match (response.close_after, response.frame.is_some()) {
        (false, _) => Close::No,
        (true, false) => Close::Silently,
        (true, true) => Close::AfterAnswer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A moved connection closed unserved at shutdown ends with a FIN its client reads as the
    /// end of the stream, though the client had sent requests the server never read (dropped
    /// with them unread, the socket sent a reset: `ConnectionResetError` in the audit's
    /// clients).
    #[test]
    fn a_connection_closed_unserved_ends_with_a_fin_not_a_reset() {
        use std::io::{Read, Write};
        for close in [true, false] {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (server, _) = listener.accept().unwrap();
            // Requests in flight that the server has not read.
            client.write_all(&[7u8; 20_000]).unwrap();
            std::thread::sleep(Duration::from_millis(50));
            let socket = socket2::Socket::from(server);
            if close {
                close_unserved(socket);
            } else {
                drop(socket);
            }
            client.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut buf = [0u8; 16];
            let read = client.read(&mut buf);
            if close {
                assert_eq!(read.unwrap(), 0, "a FIN: the end of the stream");
            } else {
                // The contrast that makes the first case mean something: the plain drop resets.
                assert_eq!(
                    read.unwrap_err().kind(),
                    std::io::ErrorKind::ConnectionReset,
                    "dropped with unread bytes"
                );
            }
        }
    }

    #[test]
    fn frame_reader_checks_the_prefix_before_the_body() {
        let mut reader = FrameReader::new(10, 10);
        reader.buffer.extend_from_slice(&11i32.to_be_bytes());
        assert!(matches!(
            reader.take_frame(),
            Err(CloseReason::FrameTooLarge(FrameError::TooLarge {
                size: 11,
                max: 10
            }))
        ));
        assert!(reader.declared_size().is_err());
        let mut reader = FrameReader::new(10, 10);
        reader.buffer.extend_from_slice(&(-1i32).to_be_bytes());
        assert!(reader.take_frame().is_err());
    }

    #[test]
    fn a_request_other_than_produce_is_bounded_from_its_api_key() {
        let frame = |api_key: i16| {
            let mut reader = FrameReader::new(10_000, 100);
            reader.buffer.extend_from_slice(&1000i32.to_be_bytes());
            reader.buffer.extend_from_slice(&api_key.to_be_bytes()[..1]);
            assert!(reader.other_too_large(1000).is_none(), "the key is not read yet");
            reader.buffer.extend_from_slice(&api_key.to_be_bytes()[1..]);
            reader
        };
        let metadata = frame(3);
        assert!(matches!(
            metadata.other_too_large(1000),
            Some(CloseReason::OtherTooLarge(HandlerError::OtherTooLarge {
                api_key: 3,
                size: 1000,
                limit: 100
            }))
        ));
        assert!(metadata.other_too_large(100).is_none(), "at the bound");
        assert!(
            frame(0).other_too_large(1000).is_none(),
            "Produce has its own bound"
        );
        let mut raw_token = frame(3);
        raw_token.headed = false;
        assert!(
            raw_token.other_too_large(1000).is_none(),
            "a raw SASL token has no key"
        );
    }

    #[test]
    fn frame_reader_splits_pipelined_frames() {
        let mut reader = FrameReader::new(100, 100);
        for body in [&b"abc"[..], b"", b"defg"] {
            reader
                .buffer
                .extend_from_slice(&(body.len() as i32).to_be_bytes());
            reader.buffer.extend_from_slice(body);
        }
        reader.buffer.extend_from_slice(&5i32.to_be_bytes()[..3]);
        assert_eq!(reader.take_frame().unwrap().unwrap(), Bytes::from_static(b"abc"));
        assert_eq!(reader.take_frame().unwrap().unwrap(), Bytes::new());
        assert_eq!(reader.take_frame().unwrap().unwrap(), Bytes::from_static(b"defg"));
        assert!(reader.take_frame().unwrap().is_none());
        assert_eq!(reader.want(), 3, "up to the prefix and the API key, unreserved");
        reader.headed = false;
        assert_eq!(reader.want(), 1, "a raw SASL token: up to the prefix");
        reader.headed = true;
        let empty = FrameReader::new(100, 100);
        assert_eq!(
            empty.want(),
            IDLE_READ,
            "an idle connection reads into a small buffer"
        );
        reader.buffer.extend_from_slice(&[5, b'x']);
        assert_eq!(reader.declared_size().unwrap(), Some(5));
        assert_eq!(reader.want(), 1, "the API key's second byte");
        reader.buffer.extend_from_slice(b"y");
        assert_eq!(
            reader.want(),
            3,
            "the key is read: the rest of the frame (reserved first)"
        );
    }
}
