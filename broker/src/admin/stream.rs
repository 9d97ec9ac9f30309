//! Streaming a response body produced by a writer-style producer (the scan) through
//! tiny_http, which pulls bodies with `Read`: the producer runs on its own thread and hands
//! chunks over a bounded channel, so memory stays bounded whatever the scan size, and a
//! client that goes away stops the producer (its next send fails).

use std::io::{self, Read, Write};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread;

/// Chunks in flight between producer and HTTP thread.
const CHANNEL_CHUNKS: usize = 4;
/// Producer output is sent in chunks of about this size.
const CHUNK_BYTES: usize = 64 * 1024;

enum Message<E> {
    Chunk(Vec<u8>),
    Done(Result<(), E>),
}

/// `Write` end: buffers up to `CHUNK_BYTES`, then sends.
struct ChannelWriter<E> {
    sender: SyncSender<Message<E>>,
    buffer: Vec<u8>,
}

impl<E> ChannelWriter<E> {
    fn send_buffer(&mut self) -> io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.buffer, Vec::with_capacity(CHUNK_BYTES));
        self.sender
            .send(Message::Chunk(chunk))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the client went away"))
    }
}

impl<E> Write for ChannelWriter<E> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
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

/// What the producer did before the response had to start.
pub enum Started<E> {
    /// It failed before writing anything: answer with an error status.
    Failed(E),
    /// It wrote output (or finished without any): stream this body.
    Body(ChannelReader<E>),
}

/// `Read` end, handed to tiny_http as the response body.
pub struct ChannelReader<E> {
    receiver: Receiver<Message<E>>,
    current: Vec<u8>,
    position: usize,
    finished: bool,
}

impl<E: std::fmt::Display> Read for ChannelReader<E> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.position < self.current.len() {
                let n = out.len().min(self.current.len() - self.position);
                out[..n].copy_from_slice(&self.current[self.position..self.position + n]);
                self.position += n;
                return Ok(n);
            }
            if self.finished {
                return Ok(0);
            }
            match self.receiver.recv() {
                Ok(Message::Chunk(chunk)) => {
                    self.current = chunk;
                    self.position = 0;
                }
                Ok(Message::Done(Ok(()))) => self.finished = true,
                // Too late for a status code: cut the body short so the client sees an
                // incomplete (chunked) response rather than a silently truncated one.
                Ok(Message::Done(Err(error))) => {
                    tracing::warn!(%error, "streamed response failed midway");
                    self.finished = true;
                    return Err(io::Error::other(error.to_string()));
                }
                Err(_) => {
                    self.finished = true;
                    return Err(io::Error::other("the response producer stopped"));
                }
            }
        }
    }
}

/// Runs `produce` on a new thread and waits until it has produced its first chunk or
/// finished, so errors found before any output (bad bucket, unknown column) still get a
/// proper status code.
pub fn start<E, F>(produce: F) -> Started<E>
where
    E: Send + 'static,
    F: FnOnce(&mut dyn Write) -> Result<(), E> + Send + 'static,
{
    let (sender, receiver) = sync_channel(CHANNEL_CHUNKS);
    let done_sender = sender.clone();
    let spawned = thread::Builder::new()
        .name("kafluss-admin-stream".to_string())
        .spawn(move || {
            let mut writer = ChannelWriter {
                sender,
                buffer: Vec::with_capacity(CHUNK_BYTES),
            };
            let result = produce(&mut writer);
            // A failed flush means the client went away; nobody is left to tell.
            let _ = writer.send_buffer();
            let _ = done_sender.send(Message::Done(result));
        });
    let mut reader = ChannelReader {
        receiver,
        current: Vec::new(),
        position: 0,
        finished: false,
    };
    if spawned.is_err() {
        reader.finished = true;
        return Started::Body(reader);
    }
    match reader.receiver.recv() {
        Ok(Message::Done(Err(error))) => Started::Failed(error),
        Ok(Message::Done(Ok(()))) => {
            reader.finished = true;
            Started::Body(reader)
        }
        Ok(Message::Chunk(chunk)) => {
            reader.current = chunk;
            Started::Body(reader)
        }
        Err(_) => {
            reader.finished = true;
            Started::Body(reader)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(reader: &mut ChannelReader<String>) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        reader.read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn early_failure_is_reported_before_the_body() {
        match start(|_out| Err::<(), String>("no such bucket".to_string())) {
            Started::Failed(error) => assert_eq!(error, "no such bucket"),
            Started::Body(_) => panic!("must fail before the body"),
        }
    }

    #[test]
    fn large_output_streams_in_order() {
        let Started::Body(mut reader) = start(|out| {
            for i in 0..10_000u32 {
                writeln!(out, "line {i}").map_err(|e| e.to_string())?;
            }
            Ok::<(), String>(())
        }) else {
            panic!("body expected")
        };
        let text = String::from_utf8(read_all(&mut reader).unwrap()).unwrap();
        assert_eq!(text.lines().count(), 10_000);
        assert!(text.ends_with("line 9999\n"));
    }

    #[test]
    fn failure_midway_cuts_the_body_with_an_error() {
        let Started::Body(mut reader) = start(|out| {
            out.write_all(&vec![b'x'; CHUNK_BYTES + 1])
                .map_err(|e| e.to_string())?;
            Err::<(), String>("disk gone".to_string())
        }) else {
            panic!("body expected")
        };
        assert!(read_all(&mut reader).is_err());
    }

    #[test]
    fn empty_output_is_an_empty_body() {
        let Started::Body(mut reader) = start(|_out| Ok::<(), String>(())) else {
            panic!("body expected")
        };
        assert!(read_all(&mut reader).unwrap().is_empty());
    }
}
