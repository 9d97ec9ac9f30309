//! A CRC32C per stored batch, inside the segment's Arrow IPC stream.
//!
//! Arrow IPC has no checksum, so each record-batch message carries one in the message's own
//! `custom_metadata` (key [`CHECKSUM_KEY`], value: 8 lowercase hex digits of the CRC32C of the
//! message body). Readers that do not know it (pyarrow, arrow-rs) ignore it: a segment stays a
//! plain IPC stream. [`seal_into`] adds it while framing the parts the IPC encoder produced (the
//! log's writer); [`body_checksum`] reads it back from message metadata; [`VerifyingReader`]
//! checks every body as a stream of
//! segment bytes passes through it (scans), and recovery checks bodies while it walks the
//! framing (`segment::scan_segment`). Messages without the key (segments written before
//! checksums existed) are read unchecked.

use std::io::{self, Read};

use arrow_ipc::{
    BodyCompression, BodyCompressionArgs, BodyCompressionMethod, CompressionType, FieldNode, KeyValue,
    KeyValueArgs, Message, MessageArgs, MessageHeader, MetadataVersion, RecordBatchArgs,
};
use flatbuffers::FlatBufferBuilder;

/// The IPC continuation marker that starts every message.
pub(crate) const CONTINUATION: [u8; 4] = [0xFF; 4];
/// Flatbuffer metadata of one message is a few KiB even for wide nested schemas; anything
/// larger is garbage, and refusing it keeps recovery from allocating on a corrupt length.
pub(crate) const MAX_METADATA_LEN: u64 = 16 << 20;

/// What is wrong with a record-batch message whose custom metadata lacks the body checksum
/// while it is not one written before checksums ([`written_before_checksums`]).
pub const DAMAGED_KEYS: &str =
    "a record batch whose metadata lost its checksum (its custom metadata is damaged)";

/// What is wrong with a record-batch message whose custom metadata lacks the metadata checksum
/// while its bytes still hold the key's name ([`lost_metadata_checksum`]).
pub const DAMAGED_METADATA_KEY: &str =
    "a record batch whose metadata lost its metadata checksum (its custom metadata is damaged)";

/// The custom-metadata key of a record-batch message's body checksum.
pub const CHECKSUM_KEY: &str = "kafluss.crc32c";

/// The custom-metadata key of the checksum of a record-batch message's framing and metadata:
/// the CRC32C of its first `8 + metadata length` bytes (continuation marker, metadata length,
/// the metadata with its padding) as stored, with this value's own 8 digits taken as `0`s.
/// It covers what the body checksum does not: the row count, the buffers' offsets and lengths,
/// the body length, and the body checksum itself. Messages written before it are read without.
pub const METADATA_CHECKSUM_KEY: &str = "kafluss.crc32c.meta";

/// The padding of `prefix + metadata`, as the IPC writer's default (64-byte alignment).
const ALIGNMENT: usize = 64;

/// Why a message could not be sealed (it did not come from the IPC writer as expected).
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("cannot add a checksum to the IPC message: {0}")]
pub struct SealError(&'static str);

impl SealError {
    pub(crate) const fn new(reason: &'static str) -> Self {
        Self(reason)
    }
}

/// Re-frames one encoded record-batch message (`0xFFFFFFFF`, metadata length, metadata, body)
/// with the CRC32C of its body in its metadata. The body bytes are unchanged. For tests, which
/// build segments from framed messages; the log's writer seals the encoder's parts.
#[cfg(test)]
pub fn seal(message: &[u8]) -> Result<Vec<u8>, SealError> {
    seal_with(message, &[])
}

/// [`seal`], with `tags` as further custom-metadata pairs of the message (after the checksum).
#[cfg(test)]
pub fn seal_with(message: &[u8], tags: &[(&str, &str)]) -> Result<Vec<u8>, SealError> {
    if message.len() < 8 || message[..4] != CONTINUATION {
        return Err(SealError("no continuation marker"));
    }
    let metadata_len = u32::from_le_bytes([message[4], message[5], message[6], message[7]]) as usize;
    let metadata = message
        .get(8..8 + metadata_len)
        .ok_or(SealError("metadata shorter than its length"))?;
    let body = &message[8 + metadata_len..];
    let mut out = Vec::new();
    seal_into(&mut out, metadata, body, tags)?;
    Ok(out)
}

/// One record-batch message framed from the two parts the IPC encoder makes (`EncodedData`: the
/// message's flatbuffer metadata, possibly unpadded, and its body), with the CRC32C of its body
/// and `tags` as custom-metadata pairs (after the checksum: what the log's writer stores about a
/// batch besides its rows, `BucketLog::append_tagged`), appended to `out`: `0xFFFFFFFF`,
/// metadata length, metadata, padding, body. The body is copied once, straight into the bytes
/// to be written, and unchanged. On `Err` nothing was appended.
pub fn seal_into(
    out: &mut Vec<u8>,
    metadata: &[u8],
    body: &[u8],
    tags: &[(&str, &str)],
) -> Result<(), SealError> {
    let parsed = super::ipc::message(metadata).map_err(|_| SealError("invalid metadata"))?;
    if parsed.header_type() != MessageHeader::RecordBatch {
        return Err(SealError("not a record batch message"));
    }
    let batch = parsed
        .header_as_record_batch()
        .ok_or(SealError("no record batch header"))?;
    if usize::try_from(parsed.bodyLength()).ok() != Some(body.len()) {
        return Err(SealError("body length differs from the metadata's"));
    }

    let nodes: Vec<FieldNode> = batch
        .nodes()
        .map_or_else(Vec::new, |n| n.iter().copied().collect());
    let buffers: Vec<arrow_ipc::Buffer> = batch
        .buffers()
        .map_or_else(Vec::new, |b| b.iter().copied().collect());
    let variadic: Option<Vec<i64>> = batch.variadicBufferCounts().map(|c| c.iter().collect());
    let parts = MessageParts {
        version: parsed.version(),
        length: batch.length(),
        nodes: &nodes,
        buffers: &buffers,
        compression: batch.compression().map(|c| (c.codec(), c.method())),
        variadic: variadic.as_deref(),
        body_len: parsed.bodyLength(),
    };
    let mut fbb = FlatBufferBuilder::with_capacity(metadata.len() + 64);
    frame_sealed(out, &mut fbb, &parts, tags, |out| out.extend_from_slice(body));
    Ok(())
}

/// What the metadata of one record-batch message says besides its custom metadata: the parts
/// [`frame_sealed`] builds it from.
pub(crate) struct MessageParts<'a> {
    pub version: MetadataVersion,
    /// Rows.
    pub length: i64,
    pub nodes: &'a [FieldNode],
    pub buffers: &'a [arrow_ipc::Buffer],
    pub compression: Option<(CompressionType, BodyCompressionMethod)>,
    pub variadic: Option<&'a [i64]>,
    pub body_len: i64,
}

/// What the checksum's value holds until the body is written: 8 digits, as every value.
const CHECKSUM_PLACEHOLDER: &str = "00000000";

/// Appends one framed record-batch message to `out`: `0xFFFFFFFF`, metadata length, the
/// metadata built from `parts` with the body's CRC32C and `tags` as custom-metadata pairs
/// (checksum first), padding to 64 bytes, then the body, which `write_body` appends
/// (`parts.body_len` bytes). The checksum is computed once, over the body as appended, and
/// written into its 8-digit value in the metadata already in `out` (one CRC32C pass over
/// contiguous bytes instead of one per buffer, padding and prefix). The one place a stored
/// message's metadata is made: the log's encoder ([`super::encode`]) and [`seal_into`] both
/// frame through it. `fbb` is reset first.
pub(crate) fn frame_sealed(
    out: &mut Vec<u8>,
    fbb: &mut FlatBufferBuilder<'_>,
    parts: &MessageParts<'_>,
    tags: &[(&str, &str)],
    write_body: impl FnOnce(&mut Vec<u8>),
) {
    fbb.reset();
    let nodes = fbb.create_vector(parts.nodes);
    let buffers = fbb.create_vector(parts.buffers);
    let variadic = parts.variadic.map(|counts| fbb.create_vector(counts));
    let compression = parts
        .compression
        .map(|(codec, method)| BodyCompression::create(fbb, &BodyCompressionArgs { codec, method }));
    let header = arrow_ipc::RecordBatch::create(
        fbb,
        &RecordBatchArgs {
            length: parts.length,
            nodes: Some(nodes),
            buffers: Some(buffers),
            compression,
            variadicBufferCounts: variadic,
        },
    );
    // Custom-metadata pairs, the two checksums first (their values placeholders until the
    // bytes are written); each gives back its value's offset.
    let mut pairs = Vec::with_capacity(2 + tags.len());
    let mut pair = |key: &str, value: &str| {
        let key = fbb.create_string(key);
        let value = fbb.create_string(value);
        pairs.push(KeyValue::create(
            fbb,
            &KeyValueArgs {
                key: Some(key),
                value: Some(value),
            },
        ));
        value
    };
    let value = pair(CHECKSUM_KEY, CHECKSUM_PLACEHOLDER);
    let meta_value = pair(METADATA_CHECKSUM_KEY, CHECKSUM_PLACEHOLDER);
    for (key, value) in tags {
        pair(key, value);
    }
    let custom_metadata = fbb.create_vector(&pairs);
    let root = Message::create(
        fbb,
        &MessageArgs {
            version: parts.version,
            header_type: MessageHeader::RecordBatch,
            header: Some(header.as_union_value()),
            bodyLength: parts.body_len,
            custom_metadata: Some(custom_metadata),
        },
    );
    fbb.finish(root, None);
    let metadata = fbb.finished_data();
    // A flatbuffer offset counts from the end of the buffer; a string is its u32 length, then
    // its bytes.
    let value_at = metadata.len() - value.value() as usize + 4;
    let meta_at = metadata.len() - meta_value.value() as usize + 4;
    debug_assert_eq!(
        metadata.get(value_at..value_at + 8),
        Some(CHECKSUM_PLACEHOLDER.as_bytes())
    );
    debug_assert_eq!(
        metadata.get(meta_at..meta_at + 8),
        Some(CHECKSUM_PLACEHOLDER.as_bytes())
    );
    let padded = (8 + metadata.len()).next_multiple_of(ALIGNMENT) - 8;
    let start = out.len();
    out.reserve(8 + padded + usize::try_from(parts.body_len).unwrap_or(0));
    out.extend_from_slice(&CONTINUATION);
    out.extend_from_slice(&(padded as u32).to_le_bytes());
    out.extend_from_slice(metadata);
    out.resize(start + 8 + padded, 0);
    let body = out.len();
    write_body(out);
    let crc = kafluss_protocol::crc::crc32c(&out[body..]);
    write_hex(&mut out[start + 8 + value_at..][..8], crc);
    // Then the framing and metadata, the body's checksum included, with this one's digits as
    // the placeholder's zeros.
    let crc = kafluss_protocol::crc::crc32c(&out[start..body]);
    write_hex(&mut out[start + 8 + meta_at..][..8], crc);
}

/// `value` as 8 lowercase hex digits into `digits`.
fn write_hex(digits: &mut [u8], value: u32) {
    for (i, digit) in digits.iter_mut().enumerate() {
        *digit = b"0123456789abcdef"[(value >> (28 - 4 * i) & 0xf) as usize];
    }
}

/// Checks a record-batch message's framing and metadata against the checksum its metadata
/// declares ([`METADATA_CHECKSUM_KEY`]): None when it matches or the message has none (written
/// before it), else what is wrong. `prefix` is the message's first 8 bytes (continuation marker
/// and metadata length), `metadata` the bytes after them up to the body (padding included),
/// and `message` is parsed from `metadata`.
pub fn metadata_mismatch(prefix: &[u8], metadata: &[u8], message: &Message<'_>) -> Option<String> {
    let value = custom_value(message, METADATA_CHECKSUM_KEY)?;
    let at = (value.as_ptr() as usize).wrapping_sub(metadata.as_ptr() as usize);
    let stored = match (value.len(), u32::from_str_radix(value, 16)) {
        (8, Ok(stored)) if at.checked_add(8).is_some_and(|end| end <= metadata.len()) => stored,
        _ => return Some(format!("unreadable metadata checksum {value:?}")),
    };
    let mut crc = kafluss_protocol::crc::crc32c_append(0, prefix);
    crc = kafluss_protocol::crc::crc32c_append(crc, &metadata[..at]);
    crc = kafluss_protocol::crc::crc32c_append(crc, CHECKSUM_PLACEHOLDER.as_bytes());
    crc = kafluss_protocol::crc::crc32c_append(crc, &metadata[at + 8..]);
    (crc != stored).then(|| {
        format!(
            "the framing and metadata do not match their checksum (stored {stored:08x}, computed {crc:08x})"
        )
    })
}

/// Whether a message declares a [`METADATA_CHECKSUM_KEY`] checksum.
pub fn has_metadata_checksum(message: &Message<'_>) -> bool {
    custom_value(message, METADATA_CHECKSUM_KEY).is_some()
}

/// Whether a record-batch message without a readable [`METADATA_CHECKSUM_KEY`] lost it to
/// damage: its metadata bytes still hold the key's name. A message written before the metadata
/// checksum existed holds no trace of it; one whose key-value tables a crash zeroed in part
/// (the pair's offset gone, the name's bytes still there) parses with the key absent, and
/// nothing else it says (buffers, rows, body length) can be believed. `metadata` is the bytes
/// `message` was parsed from.
pub fn lost_metadata_checksum(metadata: &[u8], message: &Message<'_>) -> bool {
    !has_metadata_checksum(message) && holds_name(metadata, METADATA_CHECKSUM_KEY)
}

/// Whether a message's metadata bytes still hold `key`'s name anywhere (a trace that a crash
/// zeroed the key-value pair naming it, not that it was never written).
fn holds_name(metadata: &[u8], key: &str) -> bool {
    metadata.windows(key.len()).any(|window| window == key.as_bytes())
}

/// The body checksum a message's metadata declares: None when it has none (written before
/// checksums), `Err` when the value is not 8 hex digits.
pub fn body_checksum(message: &Message<'_>) -> Option<Result<u32, String>> {
    let value = custom_value(message, CHECKSUM_KEY)?;
    Some(if value.len() == 8 {
        u32::from_str_radix(value, 16).map_err(|_| format!("unreadable checksum {value:?}"))
    } else {
        Err(format!("unreadable checksum {value:?}"))
    })
}

/// Whether a record-batch message without a [`CHECKSUM_KEY`] is one written before checksums
/// existed, and so is read unchecked: it has no custom metadata at all (this log wrote none
/// before the checksum, and every message since carries it) and its metadata bytes hold no
/// trace of the key's name. A message whose custom metadata is there but lacks the key, or
/// whose bytes still hold the name, had its metadata damaged (a crash that zeroed part of it
/// still leaves a flatbuffer that parses, the key-value tables or the field's slot read as
/// absent): it is not believed, whatever its body holds. `metadata` is the bytes `message` was
/// parsed from.
pub fn written_before_checksums(metadata: &[u8], message: &Message<'_>) -> bool {
    message.custom_metadata().is_none() && !holds_name(metadata, CHECKSUM_KEY)
}

/// The value of custom-metadata `key` of a message (`""` when the pair has no value).
pub fn custom_value<'a>(message: &Message<'a>, key: &str) -> Option<&'a str> {
    let pairs = message.custom_metadata()?;
    Some(
        pairs
            .iter()
            .find(|pair| pair.key() == Some(key))?
            .value()
            .unwrap_or_default(),
    )
}

/// A batch that fails its checksum, as the source of the `InvalidData` error a
/// [`VerifyingReader`] returns.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ChecksumError(pub String);

fn invalid(reason: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, ChecksumError(reason))
}

/// Whether an IPC reader's error is a [`VerifyingReader`]'s checksum failure (not, say, the
/// torn end of a segment still being written).
pub fn is_checksum_error(error: &arrow_schema::ArrowError) -> bool {
    match error {
        arrow_schema::ArrowError::IoError(_, source) => {
            source.get_ref().is_some_and(|inner| inner.is::<ChecksumError>())
        }
        arrow_schema::ArrowError::ExternalError(inner) => inner
            .downcast_ref::<io::Error>()
            .and_then(|e| e.get_ref())
            .is_some_and(|inner| inner.is::<ChecksumError>()),
        _ => false,
    }
}

/// The explanation of a body whose CRC32C differs from the stored one.
pub fn mismatch(position: u64, stored: u32, computed: u32) -> String {
    format!(
        "checksum mismatch in the batch at byte {position}: stored CRC32C {stored:08x}, the bytes give {computed:08x}"
    )
}

/// Where a [`VerifyingReader`] is in the IPC framing.
#[derive(Debug)]
enum Part {
    /// Collecting the 8-byte prefix of the message starting at `start`.
    Prefix { start: u64, got: Vec<u8> },
    /// Collecting `len` bytes of metadata after the 8-byte `prefix`.
    Metadata {
        start: u64,
        prefix: [u8; 8],
        len: usize,
        got: Vec<u8>,
    },
    /// `left` body bytes to come, checked against `expected` when known.
    Body {
        start: u64,
        left: u64,
        expected: Option<u32>,
        crc: u32,
    },
    /// After the end-of-stream marker, or after something that is not IPC framing: pass bytes
    /// through unchecked (the IPC reader reports what is wrong with them).
    Unchecked,
}

/// A `Read` over segment bytes that checks each record-batch body against the checksum in its
/// message metadata as the bytes pass, in one pass and without copying the bodies. A mismatch
/// is an `InvalidData` error from the `read` that completes the bad body, so the bytes of that
/// batch never reach the IPC reader.
pub struct VerifyingReader<R> {
    inner: R,
    position: u64,
    part: Part,
}

impl<R: Read> VerifyingReader<R> {
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            position: 0,
            part: Part::Prefix {
                start: 0,
                got: Vec::with_capacity(8),
            },
        }
    }

    /// Advances the framing state over `bytes` (the next bytes of the stream).
    fn track(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            let taken = match &mut self.part {
                Part::Unchecked => bytes.len(),
                Part::Prefix { got, .. } => {
                    let take = (8 - got.len()).min(bytes.len());
                    got.extend_from_slice(&bytes[..take]);
                    take
                }
                Part::Metadata { len, got, .. } => {
                    let take = (*len - got.len()).min(bytes.len());
                    got.extend_from_slice(&bytes[..take]);
                    take
                }
                Part::Body {
                    left, expected, crc, ..
                } => {
                    let take = (*left).min(bytes.len() as u64) as usize;
                    if expected.is_some() {
                        *crc = kafluss_protocol::crc::crc32c_append(*crc, &bytes[..take]);
                    }
                    *left -= take as u64;
                    take
                }
            };
            self.position += taken as u64;
            bytes = &bytes[taken..];
            self.advance()?;
        }
        Ok(())
    }

    /// Moves to the next part once the current one is complete; checks a completed body.
    fn advance(&mut self) -> io::Result<()> {
        loop {
            let next = match &self.part {
                Part::Prefix { start, got } if got.len() == 8 => {
                    let len = u32::from_le_bytes([got[4], got[5], got[6], got[7]]) as usize;
                    if got[..4] != CONTINUATION || len == 0 || len as u64 > MAX_METADATA_LEN {
                        Part::Unchecked
                    } else {
                        Part::Metadata {
                            start: *start,
                            prefix: [got[0], got[1], got[2], got[3], got[4], got[5], got[6], got[7]],
                            len,
                            got: Vec::with_capacity(len),
                        }
                    }
                }
                Part::Metadata {
                    start,
                    prefix,
                    len,
                    got,
                } if got.len() == *len => {
                    let start = *start;
                    match super::ipc::message(got) {
                        Ok(message) => {
                            if message.header_type() == MessageHeader::RecordBatch {
                                // Before the IPC reader sees the metadata: damage there (a
                                // buffer's length or offset, the row count) must not reach
                                // arrow's decoder, which trusts it.
                                if let Some(reason) = metadata_mismatch(prefix, got, &message) {
                                    self.part = Part::Unchecked;
                                    return Err(invalid(format!("the batch at byte {start}: {reason}")));
                                }
                            }
                            let expected = match message.header_type() {
                                MessageHeader::RecordBatch => match body_checksum(&message) {
                                    Some(Ok(crc)) => Some(crc),
                                    Some(Err(reason)) => {
                                        self.part = Part::Unchecked;
                                        return Err(invalid(format!("the batch at byte {start}: {reason}")));
                                    }
                                    // Written before checksums, or its keys damaged:
                                    // only the first is read unchecked.
                                    None if written_before_checksums(got, &message) => None,
                                    None => {
                                        self.part = Part::Unchecked;
                                        return Err(invalid(format!(
                                            "the batch at byte {start}: {DAMAGED_KEYS}"
                                        )));
                                    }
                                },
                                _ => None,
                            };
                            Part::Body {
                                start,
                                left: u64::try_from(message.bodyLength()).unwrap_or(0),
                                expected,
                                crc: 0,
                            }
                        }
                        Err(_) => Part::Unchecked,
                    }
                }
                Part::Body {
                    start,
                    left: 0,
                    expected,
                    crc,
                } => {
                    if let Some(stored) = *expected {
                        if stored != *crc {
                            let error = mismatch(*start, stored, *crc);
                            self.part = Part::Unchecked;
                            return Err(invalid(error));
                        }
                    }
                    Part::Prefix {
                        start: self.position,
                        got: Vec::with_capacity(8),
                    }
                }
                _ => return Ok(()),
            };
            self.part = next;
        }
    }
}

impl<R: Read> Read for VerifyingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.track(&buf[..n])?;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int64Array, RecordBatch, StringArray};
    use arrow_ipc::reader::StreamReader;
    use arrow_ipc::writer::StreamWriter;
    use arrow_schema::{DataType, Field, Schema};

    use super::*;

    fn batch(first: i64, rows: usize) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
        ]));
        let ids = Int64Array::from_iter_values(first..first + rows as i64);
        let names = StringArray::from_iter_values((0..rows).map(|i| format!("row-{i}")));
        RecordBatch::try_new(schema, vec![Arc::new(ids), Arc::new(names)]).unwrap()
    }

    /// A stream of `batches` whose record-batch messages are sealed (or not), with the
    /// positions where each batch message starts.
    fn stream(batches: &[RecordBatch], sealed: bool) -> (Vec<u8>, Vec<usize>) {
        let mut writer = StreamWriter::try_new(Vec::new(), batches[0].schema_ref()).unwrap();
        let mut out = std::mem::take(writer.get_mut());
        let mut starts = Vec::new();
        for batch in batches {
            writer.write(batch).unwrap();
            let message = std::mem::take(writer.get_mut());
            starts.push(out.len());
            out.extend(if sealed { seal(&message).unwrap() } else { message });
        }
        writer.finish().unwrap();
        out.extend(std::mem::take(writer.get_mut()));
        (out, starts)
    }

    fn read_all(bytes: &[u8], chunk: usize) -> Result<Vec<RecordBatch>, String> {
        struct Chunked<'a>(&'a [u8], usize);
        impl Read for Chunked<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let n = self.0.len().min(buf.len()).min(self.1);
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let reader = StreamReader::try_new(VerifyingReader::new(Chunked(bytes, chunk)), None)
            .map_err(|e| e.to_string())?;
        reader.map(|b| b.map_err(|e| e.to_string())).collect()
    }

    #[test]
    fn sealed_streams_read_back_equal_with_any_read_sizes() {
        let batches = [batch(0, 3), batch(3, 100), batch(103, 1)];
        let (bytes, _) = stream(&batches, true);
        for chunk in [1, 7, 64, 4096, usize::MAX] {
            assert_eq!(
                read_all(&bytes, chunk).unwrap(),
                batches,
                "reads of {chunk} bytes"
            );
        }
        // A plain reader (pyarrow's view) ignores the metadata.
        let plain: Vec<RecordBatch> = StreamReader::try_new(&bytes[..], None)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(plain, batches);
    }

    #[test]
    fn a_flipped_body_byte_is_reported_with_its_position() {
        let batches = [batch(0, 3), batch(3, 50), batch(53, 4)];
        let (mut bytes, starts) = stream(&batches, true);
        let flip = bytes.len() - 200; // inside the middle or last batch's body
        let batch_start = starts.iter().rev().find(|&&s| s < flip).copied().unwrap();
        bytes[flip] ^= 0x40;
        let reader = StreamReader::try_new(VerifyingReader::new(&bytes[..]), None).unwrap();
        let failure = reader.filter_map(Result::err).next().expect("an error");
        assert!(is_checksum_error(&failure), "{failure:?}");
        let error = read_all(&bytes, 4096).unwrap_err();
        assert!(error.contains("checksum mismatch"), "{error}");
        assert!(error.contains(&format!("at byte {batch_start}")), "{error}");
        // The unchecked reader would have accepted (or misread) it silently.
        let flipped_metadata = {
            let mut copy = bytes.clone();
            copy[starts[0] + 20] ^= 0x01;
            copy
        };
        assert!(read_all(&flipped_metadata, 4096).is_err());
    }

    /// The checksum written into the metadata after the body is the CRC32C of the body, with
    /// and without further custom-metadata pairs around it, for bodies of any size.
    #[test]
    fn the_declared_checksum_is_the_crc32c_of_the_body() {
        let many = [("a", "1"), ("kafluss.producer", "7:0:3"), ("z", "")];
        for rows in [0, 1, 37, 1000] {
            for tags in [&[][..], &many[..1], &many[..]] {
                let mut writer = StreamWriter::try_new(Vec::new(), batch(0, 1).schema_ref()).unwrap();
                std::mem::take(writer.get_mut());
                writer.write(&batch(5, rows)).unwrap();
                let plain = std::mem::take(writer.get_mut());
                let sealed = seal_with(&plain, tags).unwrap();
                let metadata_len = u32::from_le_bytes(sealed[4..8].try_into().unwrap()) as usize;
                let message = arrow_ipc::root_as_message(&sealed[8..8 + metadata_len]).unwrap();
                let body = &sealed[8 + metadata_len..];
                assert_eq!(body.len() as i64, message.bodyLength());
                let declared = body_checksum(&message).expect("a checksum").unwrap();
                assert_eq!(
                    declared,
                    kafluss_protocol::crc::crc32c(body),
                    "{rows} rows, tags {tags:?}"
                );
                for (key, value) in tags {
                    assert_eq!(custom_value(&message, key), Some(*value));
                }
            }
        }
    }

    /// The framing and metadata checksum covers every byte before the body: any one byte
    /// changed there (the marker, the length, the row count, a buffer's offset or length, the
    /// body's checksum, a tag, the padding) is a mismatch or no longer parses, and the sealed
    /// bytes as written match. Its own digits are what it leaves out.
    #[test]
    fn any_byte_of_the_framing_and_metadata_changed_is_found() {
        let mut writer = StreamWriter::try_new(Vec::new(), batch(0, 1).schema_ref()).unwrap();
        std::mem::take(writer.get_mut());
        writer.write(&batch(5, 20)).unwrap();
        let plain = std::mem::take(writer.get_mut());
        let sealed = seal_with(&plain, &[("kafluss.producers", "1;7,0,0,19,20")]).unwrap();
        let metadata_len = u32::from_le_bytes(sealed[4..8].try_into().unwrap()) as usize;
        let check = |bytes: &[u8]| -> Option<String> {
            let len = u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize;
            let Some(metadata) = bytes.get(8..8 + len) else {
                return Some("shorter than its length".into());
            };
            let Ok(message) = super::super::ipc::message(metadata) else {
                return Some("does not parse".into());
            };
            if !has_metadata_checksum(&message) {
                return Some("no metadata checksum".into());
            }
            metadata_mismatch(&bytes[..8], metadata, &message)
        };
        let message = arrow_ipc::root_as_message(&sealed[8..8 + metadata_len]).unwrap();
        let digits = custom_value(&message, METADATA_CHECKSUM_KEY).unwrap();
        let digits_at = digits.as_ptr() as usize - sealed.as_ptr() as usize;
        assert_eq!(check(&sealed), None);
        for at in 0..8 + metadata_len {
            let mut changed = sealed.clone();
            changed[at] ^= 0x04;
            if (digits_at..digits_at + 8).contains(&at) {
                // Its own digits: a different value, which the bytes no longer give.
                assert!(check(&changed).is_some(), "byte {at}");
                continue;
            }
            assert!(
                check(&changed).is_some(),
                "byte {at} of {} changed and not found",
                8 + metadata_len
            );
        }
    }

    #[test]
    fn unsealed_segments_are_read_unchecked() {
        let batches = [batch(0, 10)];
        let (bytes, _) = stream(&batches, false);
        assert_eq!(read_all(&bytes, 13).unwrap(), batches);
    }

    /// The first batch of a sealed stream whose keys were zeroed (as a crash that lost a block
    /// of its metadata leaves them: the flatbuffer still parses, the keys read as other names)
    /// is not taken for a batch written before checksums and read unchecked.
    #[test]
    fn a_first_batch_whose_keys_were_zeroed_is_not_read_unchecked() {
        let batches = [batch(0, 10), batch(10, 5)];
        let (mut bytes, starts) = stream(&batches, true);
        let key = CHECKSUM_KEY.as_bytes();
        let mut zeroed = 0;
        for at in starts[0]..starts[1] - key.len() {
            if &bytes[at..at + key.len()] == key {
                bytes[at..at + key.len()].fill(0);
                zeroed += 1;
            }
        }
        assert_eq!(zeroed, 2, "the body and the metadata checksums' keys");
        let error = read_all(&bytes, 13).unwrap_err();
        assert!(error.contains(DAMAGED_KEYS), "{error}");
        assert!(
            error.contains(&format!("the batch at byte {}", starts[0])),
            "{error}"
        );
    }

    #[test]
    fn sealing_the_encoders_parts_gives_the_bytes_of_sealing_its_message() {
        use arrow_ipc::writer::{
            write_message, DictionaryTracker, IpcDataGenerator, IpcWriteContext, IpcWriteOptions,
        };
        let tags = [("kafluss.producer", "7:0:3")];
        for options in [
            IpcWriteOptions::default(),
            IpcWriteOptions::default()
                .try_with_compression(Some(arrow_ipc::CompressionType::ZSTD))
                .unwrap(),
        ] {
            for rows in [1, 100] {
                let encode = || {
                    IpcDataGenerator::default()
                        .encode(
                            &batch(0, rows),
                            &mut DictionaryTracker::new(false),
                            &options,
                            &mut IpcWriteContext::default(),
                        )
                        .unwrap()
                        .1
                };
                let mut message = Vec::new();
                write_message(&mut message, encode(), &options).unwrap();
                let expected = seal_with(&message, &tags).unwrap();
                // Appended after what `out` holds already, which stays as it was.
                let mut out = b"earlier".to_vec();
                let parts = encode();
                seal_into(&mut out, &parts.ipc_message, &parts.arrow_data, &tags).unwrap();
                assert_eq!(&out[..7], b"earlier");
                assert_eq!(&out[7..], &expected[..], "{rows} rows");
                // And a refusal appends nothing.
                let before = out.len();
                assert!(seal_into(&mut out, b"junk", &parts.arrow_data, &tags).is_err());
                assert_eq!(out.len(), before);
            }
        }
    }

    #[test]
    fn seal_refuses_what_is_not_a_batch_message() {
        assert!(seal(b"nope").is_err());
        let schema_only = {
            let mut writer = StreamWriter::try_new(Vec::new(), batch(0, 1).schema_ref()).unwrap();
            std::mem::take(writer.get_mut())
        };
        assert_eq!(seal(&schema_only), Err(SealError("not a record batch message")));
    }
}
