//! Streaming a scan: the producer writes with `std::io::Write` on a blocking-pool thread and
//! hands chunks to the connection over a bounded channel, so memory stays bounded whatever
//! the scan size, a slow reader only slows its own producer, and a client that goes away
//! (or is dropped for not reading) stops the producer: its next write fails.

use std::io::{self, Write};
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame};
use tokio::sync::mpsc::{self, Receiver, Sender};

use super::http::{HookError, Reply, ScanBody};

/// Chunks in flight between a producer and its connection.
pub const CHANNEL_CHUNKS: usize = 4;
/// Producer output is sent in chunks of about this size.
pub const CHUNK_BYTES: usize = 64 * 1024;

/// What a scan's producer thread tells its connection.
#[derive(Debug)]
pub enum Message {
    /// Answered without rows (authentication, unknown table, bad parameter...).
    Reply(Reply),
    /// The scan was accepted: rows follow with this content type.
    Head(String),
    Chunk(Bytes),
    /// The producer finished; an error after output cuts the body short.
    Done(Result<(), HookError>),
}

pub fn channel() -> (Sender<Message>, Receiver<Message>) {
    mpsc::channel(CHANNEL_CHUNKS)
}

/// `Write` end: buffers up to `CHUNK_BYTES`, then sends (blocking: call it only from a
/// blocking-pool thread).
pub struct ChannelWriter {
    sender: Sender<Message>,
    buffer: Vec<u8>,
}

impl ChannelWriter {
    pub fn new(sender: Sender<Message>) -> Self {
        Self {
            sender,
            buffer: Vec::with_capacity(CHUNK_BYTES),
        }
    }

    fn send_buffer(&mut self) -> io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.buffer, Vec::with_capacity(CHUNK_BYTES));
        self.sender
            .blocking_send(Message::Chunk(Bytes::from(chunk)))
            .map_err(|_| gone())
    }
}

fn gone() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the client went away")
}

impl Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.sender.is_closed() {
            return Err(gone());
        }
        self.buffer.extend_from_slice(data);
        if self.buffer.len() >= CHUNK_BYTES {
            self.send_buffer()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send_buffer()
    }
}

/// How a producer ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Produced {
    Complete,
    Failed,
    /// The receiving connection went away before the end.
    ClientGone,
}

/// Runs a scan body on the current (blocking) thread: `Head`, chunks, then `Done`.
pub fn produce(sender: Sender<Message>, content_type: String, body: ScanBody) -> Produced {
    if sender.blocking_send(Message::Head(content_type)).is_err() {
        return Produced::ClientGone;
    }
    let mut writer = ChannelWriter::new(sender.clone());
    let result = body(&mut writer);
    let flushed = writer.send_buffer();
    if sender.is_closed() {
        return Produced::ClientGone;
    }
    let outcome = match (&result, flushed) {
        (Ok(()), Ok(())) => Produced::Complete,
        _ => Produced::Failed,
    };
    if sender.blocking_send(Message::Done(result)).is_err() {
        return Produced::ClientGone;
    }
    outcome
}

/// A response body: one buffer, or a scan's chunks.
pub enum AdminBody {
    Full(Option<Bytes>),
    Stream {
        first: Option<Bytes>,
        receiver: Receiver<Message>,
        finished: bool,
        /// The producer failed: fail the body on the next poll, after hyper has flushed what
        /// was sent before (a body error drops the connection with its unsent buffer).
        failing: Option<io::Error>,
    },
}

impl AdminBody {
    pub fn full(bytes: Vec<u8>) -> Self {
        AdminBody::Full(Some(Bytes::from(bytes)))
    }

    /// A scan's body: its first chunk, then what the producer sends on `receiver`.
    pub fn stream(first: Bytes, receiver: Receiver<Message>) -> Self {
        AdminBody::Stream {
            first: Some(first),
            receiver,
            finished: false,
            failing: None,
        }
    }
}

impl Body for AdminBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match self.get_mut() {
            AdminBody::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            AdminBody::Stream {
                first,
                receiver,
                finished,
                failing,
            } => {
                if let Some(chunk) = first.take() {
                    return Poll::Ready(Some(Ok(Frame::data(chunk))));
                }
                if let Some(error) = failing.take() {
                    return Poll::Ready(Some(Err(error)));
                }
                if *finished {
                    return Poll::Ready(None);
                }
                loop {
                    let message = match receiver.poll_recv(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(message) => message,
                    };
                    match message {
                        Some(Message::Chunk(chunk)) => return Poll::Ready(Some(Ok(Frame::data(chunk)))),
                        Some(Message::Done(Ok(()))) => {
                            *finished = true;
                            return Poll::Ready(None);
                        }
                        // Too late for a status code: cut the body short so the client sees
                        // an incomplete (chunked) response rather than a silently truncated one.
                        Some(Message::Done(Err(error))) => {
                            tracing::warn!(%error, "streamed response failed midway");
                            *finished = true;
                            *failing = Some(io::Error::other(error.to_string()));
                            cx.waker().wake_by_ref();
                            return Poll::Pending;
                        }
                        Some(Message::Head(_) | Message::Reply(_)) => continue,
                        None => {
                            *finished = true;
                            return Poll::Ready(Some(Err(io::Error::other("the response producer stopped"))));
                        }
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            AdminBody::Full(bytes) => bytes.is_none(),
            AdminBody::Stream { .. } => false,
        }
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        match self {
            AdminBody::Full(Some(bytes)) => hyper::body::SizeHint::with_exact(bytes.len() as u64),
            AdminBody::Full(None) => hyper::body::SizeHint::with_exact(0),
            AdminBody::Stream { .. } => hyper::body::SizeHint::default(),
        }
    }
}

/// The start of a scan's answer, once its producer has sent its first chunk or finished, so
/// errors found before any output (bad bucket, unknown column) still get a status code.
#[derive(Debug)]
pub enum Started {
    /// Answer with this (an error, or the producer's end before any output).
    Reply(Reply),
    /// Stream: the content type, the first chunk, the rest.
    Body {
        content_type: String,
        first: Bytes,
        receiver: Receiver<Message>,
    },
    /// Finished with no output.
    Empty { content_type: String },
}

/// Waits for the first message(s) of a producer.
pub async fn start(mut receiver: Receiver<Message>) -> Started {
    let mut content_type = None;
    loop {
        match receiver.recv().await {
            Some(Message::Reply(reply)) => return Started::Reply(reply),
            Some(Message::Head(head)) => content_type = Some(head),
            Some(Message::Chunk(first)) => {
                return Started::Body {
                    content_type: content_type.unwrap_or_else(|| "application/octet-stream".into()),
                    first,
                    receiver,
                }
            }
            Some(Message::Done(Err(error))) => return Started::Reply(super::http::hook_reply(&error)),
            Some(Message::Done(Ok(()))) => {
                return Started::Empty {
                    content_type: content_type.unwrap_or_else(|| "application/octet-stream".into()),
                }
            }
            None => {
                return Started::Reply(Reply::error(
                    500,
                    "INTERNAL_ERROR",
                    "the scan stopped before answering",
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// Runs `body` as a producer on the blocking pool; returns how it started, and the
    /// whole streamed body (or its error).
    fn run(body: ScanBody) -> (Started, Option<io::Result<Vec<u8>>>, Produced) {
        runtime().block_on(async move {
            let (sender, receiver) = channel();
            let producer = tokio::task::spawn_blocking(move || produce(sender, "text/x".into(), body));
            let started = start(receiver).await;
            let (started, streamed) = match started {
                Started::Body {
                    content_type,
                    first,
                    receiver,
                } => {
                    let body = AdminBody::stream(first.clone(), receiver);
                    let collected = body.collect().await.map(|c| c.to_bytes().to_vec());
                    (Started::Empty { content_type }, Some(collected))
                }
                other => (other, None),
            };
            (started, streamed, producer.await.unwrap())
        })
    }

    #[test]
    fn early_failure_is_reported_before_the_body() {
        let (started, _, produced) = run(Box::new(|_out| Err(HookError::new(400, "BAD", "no such bucket"))));
        match started {
            Started::Reply(reply) => assert_eq!(reply.status, 400),
            other => panic!("must fail before the body: {other:?}"),
        }
        assert_eq!(produced, Produced::Failed);
    }

    #[test]
    fn large_output_streams_in_order() {
        let (_, streamed, produced) = run(Box::new(|out| {
            for i in 0..10_000u32 {
                writeln!(out, "line {i}").map_err(|e| HookError::new(500, "IO", e.to_string()))?;
            }
            Ok(())
        }));
        let text = String::from_utf8(streamed.unwrap().unwrap()).unwrap();
        assert_eq!(text.lines().count(), 10_000);
        assert!(text.ends_with("line 9999\n"));
        assert_eq!(produced, Produced::Complete);
    }

    #[test]
    fn failure_midway_cuts_the_body_with_an_error() {
        let (_, streamed, _) = run(Box::new(|out| {
            out.write_all(&vec![b'x'; CHUNK_BYTES + 1])
                .map_err(|e| HookError::new(500, "IO", e.to_string()))?;
            Err(HookError::new(500, "DISK", "disk gone"))
        }));
        assert!(streamed.unwrap().is_err());
    }

    #[test]
    fn empty_output_is_an_empty_body() {
        let (started, _, _) = run(Box::new(|_out| Ok(())));
        assert!(matches!(started, Started::Empty { .. }), "{started:?}");
    }

    #[test]
    fn a_dropped_receiver_stops_the_producer() {
        let produced = runtime().block_on(async {
            let (sender, receiver) = channel();
            let producer = tokio::task::spawn_blocking(move || {
                produce(
                    sender,
                    "text/x".into(),
                    Box::new(|out| {
                        // Endless output: only a failed write ends it.
                        loop {
                            out.write_all(&[b'y'; 1024])
                                .map_err(|e| HookError::new(500, "IO", e.to_string()))?;
                        }
                    }),
                )
            });
            let Started::Body { receiver, .. } = start(receiver).await else {
                panic!("body expected")
            };
            drop(receiver);
            producer.await.unwrap()
        });
        assert_eq!(produced, Produced::ClientGone);
    }
}
