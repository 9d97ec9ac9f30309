//! RecordBatch (magic 2): the 61-byte header, CRC32C, attributes, the batch iterator over a
//! produce `records` field, and the lazy record iterator.
//!
//! The wire batch ([`RecordBatch`]) keeps its records section still compressed; [`Records`]
//! decompresses it once under a caller-given bound and yields records whose keys, values and
//! headers are slices of that (decompressed) buffer.

use bytes::Bytes;

use crate::compression::{decompress, Compression, CompressionError};
use crate::primitives::{short_unsigned_varint, varint, varlong, zigzag32};
use crate::ErrorCode;

/// Size of the fixed batch header.
pub const RECORD_BATCH_HEADER_LEN: usize = 61;
/// Bytes before `batch_length` counts: base_offset (8) + batch_length (4).
pub const BATCH_LENGTH_PREFIX: usize = 12;
/// Offset of the magic byte, the same for legacy message sets (offset, size, crc, magic).
const MAGIC_OFFSET: usize = 16;
/// Offset of the attributes field: the CRC covers everything from here to the end.
const CRC_START: usize = 21;

/// A record batch (or message set) could not be accepted. Each error maps to the Kafka code
/// `behaviour.md` assigns it, via [`RecordBatchError::error_code`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordBatchError {
    /// The `records` field was null or empty.
    #[error("no record batch in the records field")]
    Empty,
    /// The input ends inside a batch header or before the batch's announced end.
    #[error("record batch truncated: need {needed} bytes, have {available}")]
    Truncated {
        /// Bytes the batch needs.
        needed: usize,
        /// Bytes present.
        available: usize,
    },
    /// A magic 0 or 1 message set (pre-0.11 format).
    #[error("legacy message format (magic {0})")]
    LegacyMagic(i8),
    /// A magic byte other than 0, 1 or 2.
    #[error("unknown magic byte {0}")]
    UnknownMagic(i8),
    /// `batch_length` is too small to hold a batch header.
    #[error("invalid batch length {0}")]
    InvalidBatchLength(i32),
    /// The CRC32C over attributes..end does not match.
    #[error("CRC32C mismatch: batch says {expected:#010x}, data gives {computed:#010x}")]
    CrcMismatch {
        /// The CRC in the header.
        expected: u32,
        /// The CRC of the data.
        computed: u32,
    },
    /// The codec bits name no codec.
    #[error("unknown compression codec {0}")]
    UnknownCompression(u8),
    /// `record_count` is not positive or disagrees with `last_offset_delta`.
    #[error("record count {record_count} does not match last offset delta {last_offset_delta}")]
    InvalidRecordCount {
        /// Declared record count.
        record_count: i32,
        /// Declared last offset delta.
        last_offset_delta: i32,
    },
    /// The records section holds fewer records than declared.
    #[error("batch declares {declared} records but holds {found}")]
    RecordCountMismatch {
        /// Declared count.
        declared: i32,
        /// Records found.
        found: i32,
    },
    /// Bytes remain after the declared number of records.
    #[error("{0} bytes after the last declared record")]
    TrailingBytes(usize),
    /// A record's offset delta is not its index in the batch.
    #[error("record {index} has offset delta {offset_delta}")]
    BadOffsetDelta {
        /// Record index.
        index: i32,
        /// Its offset delta.
        offset_delta: i32,
    },
    /// A varint inside a record is malformed.
    #[error("record {index}: malformed varint")]
    MalformedVarint {
        /// Record index.
        index: i32,
    },
    /// A record ends before its fields do.
    #[error("record {index} is truncated")]
    TruncatedRecord {
        /// Record index.
        index: i32,
    },
    /// A record's length, key, value or header length is invalid, or its fields do not fill
    /// exactly its announced length.
    #[error("record {index}: invalid {field} length")]
    InvalidRecordLength {
        /// Record index.
        index: i32,
        /// Which length.
        field: &'static str,
    },
    /// Decompression failed or exceeded the bound.
    #[error(transparent)]
    Compression(#[from] CompressionError),
}

impl RecordBatchError {
    /// The Kafka error code for this error, per `behaviour.md`: legacy magic →
    /// UNSUPPORTED_FOR_MESSAGE_FORMAT; CRC mismatch or a broken batch frame → CORRUPT_MESSAGE;
    /// decompressed size over the limit → MESSAGE_TOO_LARGE; anything malformed inside the batch
    /// (empty, counts, offset deltas, varints, truncated records, bad compressed data) →
    /// INVALID_RECORD.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            RecordBatchError::LegacyMagic(_) => ErrorCode::UnsupportedForMessageFormat,
            RecordBatchError::CrcMismatch { .. }
            | RecordBatchError::UnknownMagic(_)
            | RecordBatchError::InvalidBatchLength(_)
            | RecordBatchError::Truncated { .. } => ErrorCode::CorruptMessage,
            RecordBatchError::Compression(CompressionError::DecompressedTooLarge { .. }) => {
                ErrorCode::MessageTooLarge
            }
            _ => ErrorCode::InvalidRecord,
        }
    }
}

/// How record timestamps were assigned (attribute bit 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    /// Set by the producer.
    CreateTime,
    /// Set by the broker at append.
    LogAppendTime,
}

/// The batch attributes (`int16`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BatchAttributes(pub i16);

impl BatchAttributes {
    const CODEC_MASK: i16 = 0x07;
    const TIMESTAMP_TYPE: i16 = 0x08;
    const TRANSACTIONAL: i16 = 0x10;
    const CONTROL: i16 = 0x20;
    const DELETE_HORIZON: i16 = 0x40;

    /// Attributes with the given codec and flags.
    pub fn new(
        compression: Compression,
        timestamp_type: TimestampType,
        transactional: bool,
        control: bool,
    ) -> Self {
        let mut bits = i16::from(compression.id());
        if timestamp_type == TimestampType::LogAppendTime {
            bits |= Self::TIMESTAMP_TYPE;
        }
        if transactional {
            bits |= Self::TRANSACTIONAL;
        }
        if control {
            bits |= Self::CONTROL;
        }
        Self(bits)
    }

    /// The compression codec.
    pub fn compression(self) -> Result<Compression, RecordBatchError> {
        let id = (self.0 & Self::CODEC_MASK) as u8;
        Compression::try_from(id).map_err(|_| RecordBatchError::UnknownCompression(id))
    }

    /// The timestamp type.
    pub fn timestamp_type(self) -> TimestampType {
        if self.0 & Self::TIMESTAMP_TYPE != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    /// Part of a transaction.
    pub fn is_transactional(self) -> bool {
        self.0 & Self::TRANSACTIONAL != 0
    }

    /// A control batch (transaction markers).
    pub fn is_control(self) -> bool {
        self.0 & Self::CONTROL != 0
    }

    /// Carries a delete horizon in base_timestamp (compacted topics).
    pub fn has_delete_horizon(self) -> bool {
        self.0 & Self::DELETE_HORIZON != 0
    }
}

/// A magic-2 record batch as it came off the wire: header fields and the still-compressed
/// records section. The CRC has been verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordBatch {
    /// First offset (producers send 0).
    pub base_offset: i64,
    /// Bytes after the `batch_length` field.
    pub batch_length: i32,
    /// Partition leader epoch.
    pub partition_leader_epoch: i32,
    /// Always 2.
    pub magic: i8,
    /// CRC32C of attributes..end.
    pub crc: u32,
    /// Attributes.
    pub attributes: BatchAttributes,
    /// Offset delta of the last record.
    pub last_offset_delta: i32,
    /// Timestamp of the first record.
    pub base_timestamp: i64,
    /// Largest timestamp in the batch.
    pub max_timestamp: i64,
    /// Producer id; ≥ 0 means an idempotent or transactional producer.
    pub producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
    /// First sequence number.
    pub base_sequence: i32,
    /// Number of records.
    pub record_count: i32,
    /// The records section, still compressed (a slice of the input).
    pub records_data: Bytes,
    /// The whole batch, header included (a slice of the input).
    pub raw: Bytes,
}

fn be_i64(bytes: &[u8], at: usize) -> i64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&bytes[at..at + 8]);
    i64::from_be_bytes(raw)
}

fn be_i32(bytes: &[u8], at: usize) -> i32 {
    let mut raw = [0u8; 4];
    raw.copy_from_slice(&bytes[at..at + 4]);
    i32::from_be_bytes(raw)
}

fn be_i16(bytes: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([bytes[at], bytes[at + 1]])
}

/// How many bytes of `records` follow its first record batch, read from that batch's length
/// field alone (nothing is parsed or checked: a malformed batch is the decoder's to refuse);
/// 0 when the bytes end with it or are too few to tell, and for a legacy message set (magic 0
/// or 1, which holds one message per record and is refused by its magic when decoded:
/// UNSUPPORTED_FOR_MESSAGE_FORMAT). Produce v3+ carries exactly one batch per partition
/// (Kafka's `ProduceRequest.validateRecords`).
pub fn bytes_after_first_batch(records: &[u8]) -> usize {
    if records.len() < BATCH_LENGTH_PREFIX || matches!(records.get(MAGIC_OFFSET), Some(0 | 1)) {
        return 0;
    }
    usize::try_from(be_i32(records, 8))
        .ok()
        .and_then(|len| len.checked_add(BATCH_LENGTH_PREFIX))
        .map_or(0, |end| records.len().saturating_sub(end))
}

impl RecordBatch {
    /// Parses exactly one batch; bytes after it are an error (use [`RecordBatches`] for a
    /// records field holding several).
    pub fn parse(bytes: Bytes) -> Result<RecordBatch, RecordBatchError> {
        let (batch, rest) = Self::split_first(&bytes)?;
        if rest.is_empty() {
            Ok(batch)
        } else {
            Err(RecordBatchError::TrailingBytes(rest.len()))
        }
    }

    /// Parses the first batch of `bytes` and returns it with the remaining bytes.
    pub fn split_first(bytes: &Bytes) -> Result<(RecordBatch, Bytes), RecordBatchError> {
        if bytes.is_empty() {
            return Err(RecordBatchError::Empty);
        }
        if bytes.len() <= MAGIC_OFFSET {
            return Err(RecordBatchError::Truncated {
                needed: MAGIC_OFFSET + 1,
                available: bytes.len(),
            });
        }
        let magic = bytes[MAGIC_OFFSET] as i8;
        match magic {
            0 | 1 => return Err(RecordBatchError::LegacyMagic(magic)),
            2 => {}
            other => return Err(RecordBatchError::UnknownMagic(other)),
        }
        let batch_length = be_i32(bytes, 8);
        let body_len = usize::try_from(batch_length)
            .ok()
            .filter(|len| *len >= RECORD_BATCH_HEADER_LEN - BATCH_LENGTH_PREFIX)
            .ok_or(RecordBatchError::InvalidBatchLength(batch_length))?;
        let total = BATCH_LENGTH_PREFIX + body_len;
        if bytes.len() < total {
            return Err(RecordBatchError::Truncated {
                needed: total,
                available: bytes.len(),
            });
        }
        let raw = bytes.slice(..total);
        let crc = be_i32(&raw, 17) as u32;
        let computed = crate::crc::crc32c(&raw[CRC_START..]);
        if computed != crc {
            return Err(RecordBatchError::CrcMismatch {
                expected: crc,
                computed,
            });
        }
        let batch = RecordBatch {
            base_offset: be_i64(&raw, 0),
            batch_length,
            partition_leader_epoch: be_i32(&raw, 12),
            magic,
            crc,
            attributes: BatchAttributes(be_i16(&raw, 21)),
            last_offset_delta: be_i32(&raw, 23),
            base_timestamp: be_i64(&raw, 27),
            max_timestamp: be_i64(&raw, 35),
            producer_id: be_i64(&raw, 43),
            producer_epoch: be_i16(&raw, 51),
            base_sequence: be_i32(&raw, 53),
            record_count: be_i32(&raw, 57),
            records_data: raw.slice(RECORD_BATCH_HEADER_LEN..),
            raw,
        };
        Ok((batch, bytes.slice(total..)))
    }

    /// The compression codec.
    pub fn compression(&self) -> Result<Compression, RecordBatchError> {
        self.attributes.compression()
    }

    /// True for idempotent or transactional producers (`producer_id >= 0`).
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }

    /// Checks the record count against `last_offset_delta` (count ≥ 1, delta = count - 1).
    pub fn check_record_count(&self) -> Result<(), RecordBatchError> {
        if self.record_count < 1 || self.last_offset_delta != self.record_count - 1 {
            return Err(RecordBatchError::InvalidRecordCount {
                record_count: self.record_count,
                last_offset_delta: self.last_offset_delta,
            });
        }
        Ok(())
    }

    /// An iterator over the records, decompressing first (to at most `max_decompressed_size`
    /// bytes) when the batch is compressed. Also checks the record count.
    pub fn records(&self, max_decompressed_size: usize) -> Result<Records, RecordBatchError> {
        self.check_record_count()?;
        let data = match self.compression()? {
            Compression::None => self.records_data.clone(),
            codec => Bytes::from(decompress(codec, &self.records_data, max_decompressed_size)?),
        };
        Ok(Records::new(data, self.record_count))
    }
}

/// Iterator over the batches of a produce `records` field. Stops after the first error.
#[derive(Debug, Clone)]
pub struct RecordBatches {
    rest: Bytes,
    failed: bool,
    yielded: bool,
}

impl RecordBatches {
    /// Iterates the batches in `records`. An empty field yields one [`RecordBatchError::Empty`].
    pub fn new(records: Bytes) -> Self {
        Self {
            rest: records,
            failed: false,
            yielded: false,
        }
    }
}

impl Iterator for RecordBatches {
    type Item = Result<RecordBatch, RecordBatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || (self.rest.is_empty() && self.yielded) {
            return None;
        }
        self.yielded = true;
        match RecordBatch::split_first(&self.rest) {
            Ok((batch, rest)) => {
                self.rest = rest;
                Some(Ok(batch))
            }
            Err(err) => {
                self.failed = true;
                Some(Err(err))
            }
        }
    }
}

/// A record header, borrowed. The key is a string on the wire; it is not checked for UTF-8
/// here (conversion decides).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderRef<'a> {
    /// Header name bytes.
    pub key: &'a [u8],
    /// Header value; `None` for null.
    pub value: Option<&'a [u8]>,
}

/// A record header, zero-copy owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Header name bytes (a string on the wire, not checked for UTF-8 here).
    pub key: Bytes,
    /// Header value; `None` for null.
    pub value: Option<Bytes>,
}

/// The validated header section of a record, iterated lazily.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadersRef<'a> {
    data: &'a [u8],
    remaining: usize,
}

impl HeadersRef<'_> {
    /// Number of headers.
    pub fn len(&self) -> usize {
        self.remaining
    }

    /// True when the record has no headers.
    pub fn is_empty(&self) -> bool {
        self.remaining == 0
    }
}

impl<'a> Iterator for HeadersRef<'a> {
    type Item = HeaderRef<'a>;

    #[inline]
    fn next(&mut self) -> Option<HeaderRef<'a>> {
        if self.remaining == 0 {
            return None;
        }
        // The section was fully validated when the record was parsed.
        let (rest, header) = parse_header(self.data).ok()?;
        self.data = rest;
        self.remaining -= 1;
        Some(header)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

/// A record borrowed from its batch's records buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// Record attributes (unused by Kafka, always 0).
    pub attributes: i8,
    /// Timestamp minus the batch's base timestamp.
    pub timestamp_delta: i64,
    /// Offset minus the batch's base offset (equals the record's index).
    pub offset_delta: i32,
    /// Key; `None` for null.
    pub key: Option<&'a [u8]>,
    /// Value; `None` for null.
    pub value: Option<&'a [u8]>,
    /// Headers.
    pub headers: HeadersRef<'a>,
}

/// A record whose key, value and headers are slices of the (decompressed) batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Record attributes (unused by Kafka, always 0).
    pub attributes: i8,
    /// Timestamp minus the batch's base timestamp.
    pub timestamp_delta: i64,
    /// Offset minus the batch's base offset (equals the record's index).
    pub offset_delta: i32,
    /// Key; `None` for null.
    pub key: Option<Bytes>,
    /// Value; `None` for null.
    pub value: Option<Bytes>,
    /// Headers in wire order.
    pub headers: Vec<Header>,
}

/// Errors while parsing one record, before they get the record index.
enum RecordFault {
    Varint,
    Truncated,
    Length(&'static str),
}

fn fault(err: nom::Err<crate::DecodeError>) -> RecordFault {
    match err {
        nom::Err::Error(crate::DecodeError::MalformedVarint)
        | nom::Err::Failure(crate::DecodeError::MalformedVarint) => RecordFault::Varint,
        _ => RecordFault::Truncated,
    }
}

/// A varint length: -1 is null, other negatives are invalid.
fn nullable_slice<'a>(
    input: &'a [u8],
    field: &'static str,
) -> Result<(&'a [u8], Option<&'a [u8]>), RecordFault> {
    let (input, len) = varint(input).map_err(fault)?;
    match len {
        -1 => Ok((input, None)),
        len if len < 0 => Err(RecordFault::Length(field)),
        len => {
            let len = len as usize;
            if input.len() < len {
                return Err(RecordFault::Truncated);
            }
            Ok((&input[len..], Some(&input[..len])))
        }
    }
}

fn parse_header(input: &[u8]) -> Result<(&[u8], HeaderRef<'_>), RecordFault> {
    let (input, key) = nullable_slice(input, "header key")?;
    let key = key.ok_or(RecordFault::Length("header key"))?;
    let (input, value) = nullable_slice(input, "header value")?;
    Ok((input, HeaderRef { key, value }))
}

/// Parses one record body (after its length prefix), which must be consumed exactly.
fn parse_record_body(body: &[u8]) -> Result<RecordRef<'_>, RecordFault> {
    let (&attributes, input) = body.split_first().ok_or(RecordFault::Truncated)?;
    let (input, timestamp_delta) = varlong(input).map_err(fault)?;
    let (input, offset_delta) = varint(input).map_err(fault)?;
    let (input, key) = nullable_slice(input, "key")?;
    let (input, value) = nullable_slice(input, "value")?;
    let (mut input, header_count) = varint(input).map_err(fault)?;
    // Each header takes at least two bytes.
    let header_count = usize::try_from(header_count)
        .ok()
        .filter(|count| *count <= input.len() / 2)
        .ok_or(RecordFault::Length("header count"))?;
    let header_section = input;
    for _ in 0..header_count {
        let (rest, _) = parse_header(input)?;
        input = rest;
    }
    if !input.is_empty() {
        return Err(RecordFault::Length("record"));
    }
    Ok(RecordRef {
        attributes: attributes as i8,
        timestamp_delta,
        offset_delta,
        key,
        value,
        headers: HeadersRef {
            data: header_section,
            remaining: header_count,
        },
    })
}

/// A zigzag varint of at most three bytes at `*at`, which it moves past it; `None` for a longer
/// or truncated one (`primitives::short_unsigned_varint`). The values a record's varints take in
/// practice fit (lengths below 1 MiB, offset deltas below 1,048,576, timestamp deltas within 17
/// minutes), so [`well_formed_record`] reads them without the general parser's results.
#[inline(always)]
fn short_zigzag(input: &[u8], at: &mut usize) -> Option<i32> {
    let (raw, len) = short_unsigned_varint(input, *at)?;
    *at += len;
    Some(zigzag32(raw))
}

/// A key or value of a well-formed record: a short varint length, -1 for null.
#[inline(always)]
fn short_nullable<'a>(body: &'a [u8], at: &mut usize) -> Option<Option<&'a [u8]>> {
    match short_zigzag(body, at)? {
        -1 => Some(None),
        len if len < 0 => None,
        len => {
            let part = body.get(*at..*at + len as usize)?;
            *at += len as usize;
            Some(Some(part))
        }
    }
}

/// The record at the start of `input`, the `index`th of its batch, when it is well formed and
/// its varints are short (every record a client sends, in practice), with the bytes it takes:
/// one pass over the bytes with plain indexing. `None` for any other record, which
/// [`next_record`] then parses field by field: the same record, or the fault, as before this
/// path existed (`well_formed_records_read_as_the_field_parser_reads_them` checks both).
#[inline(always)]
fn well_formed_record(input: &[u8], index: i32) -> Option<(usize, RecordRef<'_>)> {
    let mut at = 0;
    let len = short_zigzag(input, &mut at)?;
    let body = input.get(at..at + usize::try_from(len).ok()?)?;
    let consumed = at + body.len();
    let attributes = *body.first()?;
    let mut at = 1;
    let timestamp_delta = i64::from(short_zigzag(body, &mut at)?);
    if short_zigzag(body, &mut at)? != index {
        return None;
    }
    let key = short_nullable(body, &mut at)?;
    let value = short_nullable(body, &mut at)?;
    let header_count = short_zigzag(body, &mut at)?;
    let header_section = &body[at..];
    let remaining = match header_count {
        0 if header_section.is_empty() => 0,
        0 => return None,
        count => {
            let count = usize::try_from(count)
                .ok()
                .filter(|c| *c <= header_section.len() / 2)?;
            let mut rest = header_section;
            for _ in 0..count {
                rest = parse_header(rest).ok()?.0;
            }
            if !rest.is_empty() {
                return None;
            }
            count
        }
    };
    Some((
        consumed,
        RecordRef {
            attributes: attributes as i8,
            timestamp_delta,
            offset_delta: index,
            key,
            value,
            headers: HeadersRef {
                data: header_section,
                remaining,
            },
        },
    ))
}

/// The record at the start of `input`, field by field, with the bytes it takes.
fn parse_record(input: &[u8]) -> Result<(usize, RecordRef<'_>), RecordFault> {
    let (rest, len) = varint(input).map_err(fault)?;
    let len = usize::try_from(len).map_err(|_| RecordFault::Length("record"))?;
    let body = rest.get(..len).ok_or(RecordFault::Truncated)?;
    let consumed = input.len() - rest.len() + len;
    Ok((consumed, parse_record_body(body)?))
}

/// Where a [`Records`] iteration stands.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    position: usize,
    index: i32,
    declared: i32,
    finished: bool,
}

/// Parses the record at the cursor in `data` and advances the cursor.
#[inline]
fn next_record<'a>(data: &'a [u8], cursor: &mut Cursor) -> Option<Result<RecordRef<'a>, RecordBatchError>> {
    if cursor.finished {
        return None;
    }
    let index = cursor.index;
    let input = &data[cursor.position..];
    if index == cursor.declared {
        cursor.finished = true;
        return if input.is_empty() {
            None
        } else {
            Some(Err(RecordBatchError::TrailingBytes(input.len())))
        };
    }
    if input.is_empty() {
        cursor.finished = true;
        return Some(Err(RecordBatchError::RecordCountMismatch {
            declared: cursor.declared,
            found: index,
        }));
    }
    if let Some((consumed, record)) = well_formed_record(input, index) {
        cursor.position += consumed;
        cursor.index += 1;
        return Some(Ok(record));
    }
    // Anything else (a long varint, a bad length or offset delta, a truncated record) is
    // parsed again field by field, which finds the same record or names the fault.
    let result = match parse_record(input) {
        Ok((consumed, record)) if record.offset_delta == index => {
            cursor.position += consumed;
            cursor.index += 1;
            return Some(Ok(record));
        }
        Ok((_, record)) => RecordBatchError::BadOffsetDelta {
            index,
            offset_delta: record.offset_delta,
        },
        Err(RecordFault::Varint) => RecordBatchError::MalformedVarint { index },
        Err(RecordFault::Truncated) => RecordBatchError::TruncatedRecord { index },
        Err(RecordFault::Length(field)) => RecordBatchError::InvalidRecordLength { index, field },
    };
    cursor.finished = true;
    Some(Err(result))
}

/// Lazy iterator over a batch's records. After the declared count it checks that nothing is
/// left; the first error ends the iteration.
#[derive(Debug, Clone)]
pub struct Records {
    data: Bytes,
    cursor: Cursor,
}

impl Records {
    /// Iterates `data`, an uncompressed records section declaring `declared` records.
    pub fn new(data: Bytes, declared: i32) -> Self {
        Self {
            data,
            cursor: Cursor {
                position: 0,
                index: 0,
                declared,
                finished: false,
            },
        }
    }

    /// The (decompressed) records section the records point into.
    pub fn data(&self) -> &Bytes {
        &self.data
    }

    /// Number of records the batch declares.
    pub fn declared_count(&self) -> i32 {
        self.cursor.declared
    }

    /// The next record borrowed from [`Records::data`], without reference counting: the fastest
    /// way through a batch. `None` after the last record or the first error.
    #[inline]
    pub fn next_ref(&mut self) -> Option<Result<RecordRef<'_>, RecordBatchError>> {
        next_record(&self.data, &mut self.cursor)
    }
}

impl Iterator for Records {
    type Item = Result<Record, RecordBatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        let record = match next_record(&self.data, &mut self.cursor)? {
            Ok(record) => record,
            Err(err) => return Some(Err(err)),
        };
        let slice = |part: &[u8]| self.data.slice_ref(part);
        Some(Ok(Record {
            attributes: record.attributes,
            timestamp_delta: record.timestamp_delta,
            offset_delta: record.offset_delta,
            key: record.key.map(slice),
            value: record.value.map(slice),
            headers: record
                .headers
                .map(|header| Header {
                    key: slice(header.key),
                    value: header.value.map(slice),
                })
                .collect(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::primitives::{put_varint, put_varlong};
    use proptest::prelude::*;

    #[test]
    fn the_bytes_after_the_first_batch_are_counted_from_its_length() {
        let mut builder = crate::RecordBatchBuilder::new(crate::Compression::None);
        builder.append(0, None, Some(b"v"), &[]);
        let one = builder.build().unwrap();
        assert_eq!(bytes_after_first_batch(&one), 0);
        let two = [&one[..], &one[..]].concat();
        assert_eq!(bytes_after_first_batch(&two), one.len());
        assert_eq!(bytes_after_first_batch(&two[..one.len() + 3]), 3);
        assert_eq!(bytes_after_first_batch(&one[..one.len() - 1]), 0, "truncated");
        assert_eq!(bytes_after_first_batch(&one[..11]), 0, "no length yet");
        let mut negative = one.to_vec();
        negative[8..12].copy_from_slice(&(-1i32).to_be_bytes());
        assert_eq!(bytes_after_first_batch(&negative), 0);
        // A legacy message set (magic 0 or 1 at the same place) holds one message per record:
        // its later messages are not counted; its magic refuses it when decoded.
        for magic in [0u8, 1] {
            let mut legacy = two.clone();
            legacy[16] = magic;
            assert_eq!(bytes_after_first_batch(&legacy), 0, "magic {magic}");
        }
    }

    /// A record's bytes as a client lays them out; `offset_delta` need not be its index, and
    /// the length prefix says `misstated` bytes more than the body has.
    fn record_bytes(
        misstated: i32,
        timestamp_delta: i64,
        offset_delta: i32,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(Vec<u8>, Option<Vec<u8>>)],
    ) -> Vec<u8> {
        let mut body = vec![0u8];
        put_varlong(&mut body, timestamp_delta);
        put_varint(&mut body, offset_delta);
        for part in [key, value] {
            match part {
                None => put_varint(&mut body, -1),
                Some(bytes) => {
                    put_varint(&mut body, bytes.len() as i32);
                    body.extend_from_slice(bytes);
                }
            }
        }
        put_varint(&mut body, headers.len() as i32);
        for (key, value) in headers {
            put_varint(&mut body, key.len() as i32);
            body.extend_from_slice(key);
            match value {
                None => put_varint(&mut body, -1),
                Some(value) => {
                    put_varint(&mut body, value.len() as i32);
                    body.extend_from_slice(value);
                }
            }
        }
        let mut record = Vec::new();
        put_varint(&mut record, body.len() as i32 + misstated);
        record.extend_from_slice(&body);
        record
    }

    fn part() -> impl Strategy<Value = Option<Vec<u8>>> {
        prop_oneof![
            1 => Just(None),
            4 => proptest::collection::vec(any::<u8>(), 0..200).prop_map(Some),
            1 => proptest::collection::vec(any::<u8>(), 8_000..9_000).prop_map(Some),
        ]
    }

    fn header() -> impl Strategy<Value = (Vec<u8>, Option<Vec<u8>>)> {
        (proptest::collection::vec(any::<u8>(), 0..20), part())
    }

    fn delta() -> impl Strategy<Value = i64> {
        prop_oneof![-70i64..70, -2_000_000i64..2_000_000, any::<i64>()]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        /// Whatever the one-pass reader accepts, the field-by-field parser reads the same way
        /// (the record, the bytes it takes, the index as its offset delta); it accepts every
        /// well-formed record whose varints take at most three bytes; and bytes changed
        /// anywhere never make them differ.
        #[test]
        fn well_formed_records_read_as_the_field_parser_reads_them(
            timestamp_delta in delta(),
            index in 0i32..3,
            offset_delta in prop_oneof![3 => Just(None), 1 => (0i32..3).prop_map(Some), 1 => any::<i32>().prop_map(Some)],
            key in part(),
            value in part(),
            headers in proptest::collection::vec(header(), 0..4),
            trailing in proptest::collection::vec(any::<u8>(), 0..3),
            misstated in prop_oneof![2 => Just(0), 1 => -2i32..3],
            changes in prop_oneof![
                2 => Just(Vec::new()),
                1 => proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..3),
            ],
        ) {
            // None: the record's index, as a client writes it.
            let offset_delta = offset_delta.unwrap_or(index);
            let mut bytes = record_bytes(misstated, timestamp_delta, offset_delta, key.as_deref(), value.as_deref(), &headers);
            let record_len = bytes.len();
            bytes.extend_from_slice(&trailing);
            let short = |v: i64| (-(1 << 20)..1 << 20).contains(&v);
            let long_lengths = [&key, &value].iter().any(|p| p.as_ref().is_some_and(|p| p.len() >= 1 << 13))
                || headers.iter().any(|(_, v)| v.as_ref().is_some_and(|v| v.len() >= 1 << 13));
            if changes.is_empty() && misstated == 0 && offset_delta == index && short(timestamp_delta) && !long_lengths
                && (record_len as i64) < 1 << 20
            {
                let (consumed, record) = well_formed_record(&bytes, index).expect("a well-formed short record");
                prop_assert_eq!(consumed, record_len);
                prop_assert_eq!(record.timestamp_delta, timestamp_delta);
                prop_assert_eq!(record.key, key.as_deref());
                prop_assert_eq!(record.value, value.as_deref());
                prop_assert_eq!(record.headers.len(), headers.len());
            }
            for (at, byte) in changes {
                let at = at.index(bytes.len());
                bytes[at] = byte;
            }
            for end in [bytes.len(), record_len.min(bytes.len()), bytes.len() / 2] {
                let input = &bytes[..end];
                if let Some((consumed, record)) = well_formed_record(input, index) {
                    let Ok((general_consumed, general)) = parse_record(input) else {
                        panic!("the field parser refused what the one-pass reader read");
                    };
                    prop_assert_eq!(consumed, general_consumed);
                    prop_assert_eq!(record, general);
                    prop_assert_eq!(general.offset_delta, index);
                }
            }
        }
    }
}
