//! Reading the log's Arrow IPC messages.
//!
//! arrow-ipc verifies a message's flatbuffer metadata with flatbuffers' default bounds, 64
//! tables deep, which a schema message passes only while its fields nest about 60 levels. A
//! table may nest 64 levels (behaviour.md, "Nesting depth ≤ 64"), below a top-level column or
//! `_kafka_value`, and each MAP level is two Arrow levels (the map's entries struct and its
//! value): its schema message is 131 to 134 tables deep. Read with the defaults, such a segment
//! could not be scanned, and recovery took its schema for a torn tail and truncated the rows
//! it had acknowledged. So the log reads its own messages through [`message`], bounded at
//! [`MAX_DEPTH`], and scans segments with [`SegmentReader`] instead of arrow-ipc's
//! `StreamReader`.

use std::collections::HashMap;
use std::io::{ErrorKind, Read};

use arrow_array::RecordBatch;
use arrow_ipc::MessageHeader;
use arrow_schema::{ArrowError, SchemaRef};

/// How deep a message's flatbuffer tables may nest: above the deepest schema a table may have
/// (a column of 64 MAP levels needs between 131 and 134; `broker/tests/broker_e2e.rs` writes
/// the deepest of each kind and reads them back), far below what the verifier's recursion
/// could make of the stack.
pub const MAX_DEPTH: usize = 512;

/// Verifies and opens one message's flatbuffer metadata (a segment's schema or a batch).
pub fn message(metadata: &[u8]) -> Result<arrow_ipc::Message<'_>, flatbuffers::InvalidFlatbuffer> {
    let options = flatbuffers::VerifierOptions {
        max_depth: MAX_DEPTH,
        ..Default::default()
    };
    flatbuffers::root_with_opts::<arrow_ipc::Message>(&options, metadata)
}

/// The record batches of an IPC stream (a segment file): its schema message first, then
/// record-batch messages, to an end-of-stream marker or the end of the bytes. Errors are
/// arrow-ipc's, and a failed read is the reader's own `io::Error` (so a checksum mismatch
/// of [`super::checksum::VerifyingReader`] stays recognisable).
pub struct SegmentReader<R> {
    reader: R,
    schema: SchemaRef,
    /// The current message's metadata (reused).
    metadata: Vec<u8>,
    finished: bool,
}

impl<R: Read> SegmentReader<R> {
    /// Reads the schema message.
    pub fn try_new(mut reader: R) -> Result<Self, ArrowError> {
        let mut metadata = Vec::new();
        if !read_metadata(&mut reader, &mut metadata)? {
            return Err(ArrowError::IpcError(
                "Expected schema message, found empty stream.".into(),
            ));
        }
        let parsed = message(&metadata).map_err(invalid_metadata)?;
        read_body(&mut reader, parsed.bodyLength())?;
        let schema = parsed
            .header_as_schema()
            .ok_or_else(|| ArrowError::IpcError("Expected a schema as the first message".into()))?;
        let schema = std::sync::Arc::new(arrow_ipc::convert::try_fb_to_schema(schema)?);
        Ok(Self {
            reader,
            schema,
            metadata,
            finished: false,
        })
    }

    fn next_batch(&mut self) -> Result<Option<RecordBatch>, ArrowError> {
        if !read_metadata(&mut self.reader, &mut self.metadata)? {
            return Ok(None);
        }
        let parsed = message(&self.metadata).map_err(invalid_metadata)?;
        let body = read_body(&mut self.reader, parsed.bodyLength())?;
        match parsed.header_type() {
            MessageHeader::RecordBatch => {
                let batch = parsed.header_as_record_batch().ok_or_else(|| {
                    ArrowError::IpcError("Unable to read IPC message as record batch".into())
                })?;
                arrow_ipc::reader::read_record_batch(
                    &arrow_buffer::Buffer::from(body),
                    batch,
                    self.schema.clone(),
                    &HashMap::new(),
                    None,
                    &parsed.version(),
                )
                .map(Some)
            }
            other => Err(ArrowError::IpcError(format!(
                "Expected a record batch, found a {other:?} message"
            ))),
        }
    }
}

impl<R: Read> Iterator for SegmentReader<R> {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        let next = self.next_batch();
        if !matches!(next, Ok(Some(_))) {
            self.finished = true;
        }
        next.transpose()
    }
}

fn invalid_metadata(error: flatbuffers::InvalidFlatbuffer) -> ArrowError {
    ArrowError::ParseError(format!("Unable to get root as message: {error:?}"))
}

/// Reads the next message's metadata into `metadata` (verified by the caller); false at an
/// end-of-stream marker or at the end of the bytes before a message. The declared length is
/// not allocated up front: the buffer grows as bytes arrive.
fn read_metadata<R: Read>(reader: &mut R, metadata: &mut Vec<u8>) -> Result<bool, ArrowError> {
    let mut prefix = [0u8; 4];
    match reader.read_exact(&mut prefix) {
        Ok(()) => {}
        Err(error) if error.kind() == ErrorKind::UnexpectedEof => return Ok(false),
        Err(error) => return Err(error.into()),
    }
    if prefix == [0xFF; 4] {
        reader.read_exact(&mut prefix)?;
    }
    let len = i32::from_le_bytes(prefix);
    if len == 0 {
        return Ok(false);
    }
    let len = usize::try_from(len)
        .map_err(|_| ArrowError::ParseError(format!("Invalid metadata length: {len}")))?;
    metadata.clear();
    let read = reader.by_ref().take(len as u64).read_to_end(metadata)?;
    if read != len {
        return Err(ArrowError::ParseError(format!(
            "Unexpected end of stream: expected {len} metadata bytes, got {read}"
        )));
    }
    Ok(true)
}

/// Reads a message body of the length its metadata declares, growing as bytes arrive.
fn read_body<R: Read>(reader: &mut R, body_len: i64) -> Result<Vec<u8>, ArrowError> {
    let body_len = u64::try_from(body_len)
        .map_err(|_| ArrowError::ParseError(format!("Invalid IPC message body length: {body_len}")))?;
    let mut body = Vec::new();
    let read = reader.by_ref().take(body_len).read_to_end(&mut body)?;
    if read as u64 != body_len {
        return Err(ArrowError::ParseError(format!(
            "Unexpected end of stream: expected {body_len} body bytes, got {read}"
        )));
    }
    Ok(body)
}
