//! The log's record-batch messages, encoded straight into the write buffer.
//!
//! arrow-ipc's `IpcDataGenerator::encode` builds a message's body in a vector of its own (each
//! compressed buffer in a fresh vector first) and its flatbuffer metadata, which
//! [`super::checksum::seal_into`] then parses, rebuilds with the checksum and copies with the
//! body into the write buffer. For the arrays the converter makes (offset 0, every child exactly
//! as long as its parent's offsets say), [`Encoder`] writes the same bytes itself: it walks the
//! arrays' buffers as arrow-ipc does, compresses each into one reused scratch vector (or, with
//! no codec or when the codec's frame is not shorter, leaves it where it is), frames the
//! metadata once (`super::checksum::frame_sealed`, which then computes the body's CRC32C in one
//! pass over the bytes written) and copies each buffer once, into the write buffer.
//! A buffer of at least 1 KiB that its codec did not shrink makes the next messages of the same
//! bucket store the buffer at that position uncompressed without calling the codec, for 1, 3, 7,
//! … up to 63 messages after 1, 2, 3, … failures in a row ([`CodecHistory`]); one that shrinks
//! starts the count over.
//! A buffer of at most [`ALWAYS_RAW`] bytes, and, with LZ4 or ZSTD up to level 3, one of fewer
//! than 64 bytes in which no 4 bytes occur twice, is stored uncompressed without calling the
//! codec (`cannot_shrink`): arrow-ipc stores a buffer uncompressed when its 8-byte length prefix
//! and compressed frame are longer than it, which no frame of the codec can avoid there, so the
//! bytes are the same. Any other array (sliced, re-based offsets, a type the converter never makes) is
//! [`Unsupported`], and the caller encodes that batch with arrow-ipc. At zstd level 3 the frames
//! are made with a minimum match length of 5 (`LEVEL_3_MIN_MATCH`); every other codec and level
//! is zstd's or LZ4's own. Tests check every kind of column and codec against arrow-ipc plus
//! `seal_into`, byte for byte (level 3: read back to the same rows).

use arrow_array::cast::AsArray;
use arrow_array::{downcast_primitive_array, Array, RecordBatch};
use arrow_buffer::OffsetBuffer;
use arrow_ipc::{BodyCompressionMethod, CompressionType, FieldNode, MetadataVersion};
use arrow_schema::DataType;
use flatbuffers::FlatBufferBuilder;

use super::checksum::{frame_sealed, MessageParts};
use super::compression::ArrowCompression;

/// Padding of each body buffer, as arrow-ipc's default write options (64-byte alignment).
const BUFFER_ALIGNMENT: usize = 64;

/// A buffer this short is stored uncompressed without trying: arrow-ipc keeps a compressed
/// buffer only when its 8-byte length prefix plus the codec's frame is not longer than the
/// buffer, and the smallest frame either codec makes (zstd: 4-byte magic, frame header, block
/// header, one byte) is longer than 9 bytes.
pub const ALWAYS_RAW: usize = 17;

/// Under this many bytes, a buffer in which no 4 bytes occur twice is stored uncompressed
/// without calling a codec that cannot shrink it ([`cannot_shrink`]).
const SHORT: usize = 64;

/// Whether `compression` can be known to store `bytes` as they are without trying it: at most
/// [`ALWAYS_RAW`] bytes (see there), or, for LZ4 and for ZSTD at levels up to 3, fewer than
/// [`SHORT`] bytes in which no 4 bytes occur twice. Then neither codec finds a match (LZ4's
/// shortest is 4 bytes; zstd's match finders at these levels compare 4 bytes at least), zstd at
/// these levels (the fast and double-fast strategies) Huffman-codes literals only from 64 of
/// them on, and a frame of literals stored as they are is longer than the buffer, so arrow-ipc
/// would store the buffer uncompressed: the bytes are the same. (At higher zstd levels shorter
/// literals are Huffman-coded, and such a buffer may shrink: those are always tried.)
fn cannot_shrink(bytes: &[u8], compression: ArrowCompression) -> bool {
    if bytes.len() <= ALWAYS_RAW {
        return true;
    }
    let literal_only = match compression {
        ArrowCompression::None => return true,
        ArrowCompression::Lz4Frame => true,
        ArrowCompression::Zstd { level } => level <= 3,
    };
    literal_only && bytes.len() < SHORT && !repeats_4_bytes(bytes)
}

/// Whether some 4 consecutive bytes of `bytes` (fewer than [`SHORT`]) occur at two positions:
/// an open-addressing set of the 4-byte windows, stopping at the first repeat.
fn repeats_4_bytes(bytes: &[u8]) -> bool {
    const SLOTS: usize = 128;
    let mut table = [0u32; SLOTS];
    let mut used = 0u128;
    for window in bytes.windows(4) {
        let word = u32::from_le_bytes([window[0], window[1], window[2], window[3]]);
        let mut slot = (word.wrapping_mul(0x9e37_79b1) >> 25) as usize;
        loop {
            if used & (1 << slot) == 0 {
                used |= 1 << slot;
                table[slot] = word;
                break;
            }
            if table[slot] == word {
                return true;
            }
            slot = (slot + 1) % SLOTS;
        }
    }
    false
}

/// The compressed bytes of a larger message are not kept for the next one: 1 MiB.
const KEPT_SCRATCH: usize = 1 << 20;

/// arrow-ipc's marker, in place of the uncompressed length, of a buffer stored uncompressed.
const STORED_RAW: i64 = -1;

/// After this many failures in a row the codec is skipped for `2^MOST_FAILURES - 1` messages
/// between tries: 63, so an incompressible column costs the codec one message in 64.
const MOST_FAILURES: u8 = 6;

/// Buffers shorter than this are always handed to the codec and leave the history as it is: a
/// short buffer can fail on the frame's own bytes alone (a ZSTD frame of a 20-byte string is
/// longer than the string), which says nothing about the column's values.
const TRACKED: usize = 1024;

/// What a bucket's codec did lately with each body buffer of its messages, by the buffer's
/// position in the message (the column layout of the bucket's schema): after a buffer of at
/// least `TRACKED` bytes that the codec did not shrink, the buffer at that position is stored
/// uncompressed without trying (when it is at least that long) in the next 1, 3, 7, 15, 31 and
/// then 63 messages after 1, 2, 3, 4, 5 and 6 or more failures in a row; one it shrinks starts
/// the count over. Random or already compressed values so cost zstd one message in 64 once the
/// count is full, and a column that compresses is tried in every message. A message with
/// another number of buffers (another schema) starts every count over.
#[derive(Debug, Default)]
pub struct CodecHistory {
    buffers: Vec<Backoff>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Backoff {
    /// Failures in a row, at most [`MOST_FAILURES`].
    failures: u8,
    /// Messages left that store the buffer without trying.
    skip: u8,
}

impl Backoff {
    /// Whether this message hands the buffer to the codec; when not, one skip is used.
    fn try_now(&mut self) -> bool {
        if self.skip == 0 {
            return true;
        }
        self.skip -= 1;
        false
    }

    /// The codec shrank the buffer, or did not.
    fn record(&mut self, shrunk: bool) {
        if shrunk {
            *self = Backoff::default();
        } else {
            self.failures = (self.failures + 1).min(MOST_FAILURES);
            self.skip = (1u8 << self.failures) - 1;
        }
    }
}

/// At zstd level 3 (Fluss's default) every buffer is compressed with this minimum match length:
/// zstd's own choice for level 3 on inputs of 16–128 KiB and over 256 KiB, where for inputs up
/// to 16 KiB (a 500-row message's columns) and of 128–256 KiB it picks 4, which measured a
/// quarter slower on such buffers at the same size (docs/benchmarks.md, "ZSTD's parameters for
/// small buffers"). Every other parameter, and every other level, is zstd's.
const LEVEL_3_MIN_MATCH: u32 = 5;

const ZERO_OFFSET: [u8; 4] = [0; 4];

/// The batch has an array the encoder does not lay out itself (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsupported;

/// Where one body buffer's bytes are: the array's own bytes, a range of the scratch vector, or
/// the array's own bytes behind [`STORED_RAW`] (a buffer its codec did not shrink, which so is
/// copied once, into the output, and not first into the scratch vector).
enum Piece<'a> {
    Raw(&'a [u8]),
    Scratch(std::ops::Range<usize>),
    StoredRaw(&'a [u8]),
}

/// One core's reusable encoding state: the flatbuffer builder, the compressed bytes of the
/// message being encoded, and one zstd compressor per level in use.
#[derive(Default)]
pub struct Encoder {
    fbb: FlatBufferBuilder<'static>,
    scratch: Vec<u8>,
    zstd: Vec<(i32, zstd::bulk::Compressor<'static>)>,
    nodes: Vec<FieldNode>,
    buffers: Vec<arrow_ipc::Buffer>,
}

impl Encoder {
    /// Appends `batch` to `out` as one sealed record-batch message (the bytes arrow-ipc's
    /// encoder plus [`super::checksum::seal_into`] would append), its buffers compressed with
    /// `compression`, `tags` in its custom metadata after the checksum. `Err(Unsupported)`
    /// appends nothing; an I/O error of a codec (writing into memory: none expected) also
    /// appends nothing and is returned as such. `history` is the bucket's [`CodecHistory`]:
    /// which buffers are stored without trying the codec, updated with this message's results.
    pub fn encode_into(
        &mut self,
        out: &mut Vec<u8>,
        batch: &RecordBatch,
        compression: ArrowCompression,
        tags: &[(&str, &str)],
        history: &mut CodecHistory,
    ) -> Result<Result<(), std::io::Error>, Unsupported> {
        self.nodes.clear();
        let mut raw: Vec<&[u8]> = Vec::with_capacity(self.buffers.capacity());
        for column in batch.columns() {
            collect(column.as_ref(), &mut self.nodes, &mut raw)?;
        }
        self.scratch.clear();
        if history.buffers.len() != raw.len() {
            history.buffers.clear();
            history.buffers.resize(raw.len(), Backoff::default());
        }
        let mut pieces = Vec::with_capacity(raw.len());
        for (bytes, backoff) in raw.into_iter().zip(&mut history.buffers) {
            let tracked = bytes.len() >= TRACKED;
            let piece = match compression {
                ArrowCompression::None => Piece::Raw(bytes),
                _ if bytes.is_empty() => Piece::Raw(bytes),
                _ if tracked && !backoff.try_now() => Piece::StoredRaw(bytes),
                _ => match self.compress(bytes, compression) {
                    Ok(piece) => {
                        if tracked {
                            backoff.record(matches!(piece, Piece::Scratch(_)));
                        }
                        piece
                    }
                    Err(e) => return Ok(Err(e)),
                },
            };
            pieces.push(piece);
        }
        self.buffers.clear();
        let mut offset = 0usize;
        for p in &pieces {
            let (head, bytes) = piece(&self.scratch, p);
            let len = head.len() + bytes.len();
            self.buffers
                .push(arrow_ipc::Buffer::new(offset as i64, len as i64));
            offset += len.next_multiple_of(BUFFER_ALIGNMENT);
        }
        let parts = MessageParts {
            version: MetadataVersion::V5,
            length: batch.num_rows() as i64,
            nodes: &self.nodes,
            buffers: &self.buffers,
            compression: codec(compression).map(|c| (c, BodyCompressionMethod::BUFFER)),
            variadic: None,
            body_len: offset as i64,
        };
        frame_sealed(out, &mut self.fbb, &parts, tags, |out| {
            for p in &pieces {
                let (head, bytes) = piece(&self.scratch, p);
                out.extend_from_slice(head);
                out.extend_from_slice(bytes);
                let len = head.len() + bytes.len();
                out.extend_from_slice(&PADDING[..len.next_multiple_of(BUFFER_ALIGNMENT) - len]);
            }
        });
        drop(pieces);
        if self.scratch.capacity() > KEPT_SCRATCH {
            self.scratch = Vec::new();
        }
        Ok(Ok(()))
    }

    /// `bytes` as arrow-ipc stores a compressed buffer: the uncompressed length (i64) and the
    /// codec's frame, appended to the scratch vector, or -1 and the bytes themselves when that
    /// would not be shorter (or there is no codec).
    fn compress<'a>(
        &mut self,
        bytes: &'a [u8],
        compression: ArrowCompression,
    ) -> Result<Piece<'a>, std::io::Error> {
        let start = self.scratch.len();
        if !cannot_shrink(bytes, compression) && self.frame(bytes, compression)? {
            if self.scratch.len() - start <= bytes.len() {
                return Ok(Piece::Scratch(start..self.scratch.len()));
            }
            self.scratch.truncate(start);
        }
        Ok(Piece::StoredRaw(bytes))
    }

    /// Appends the uncompressed length of `bytes` and `compression`'s frame of them to the
    /// scratch vector; false, appending nothing, when there is no codec.
    fn frame(&mut self, bytes: &[u8], compression: ArrowCompression) -> Result<bool, std::io::Error> {
        let start = self.scratch.len();
        let length = (bytes.len() as i64).to_le_bytes();
        match compression {
            ArrowCompression::None => return Ok(false),
            ArrowCompression::Lz4Frame => {
                use std::io::Write;
                self.scratch.extend_from_slice(&length);
                let mut encoder = lz4_flex::frame::FrameEncoder::new(&mut self.scratch);
                encoder.write_all(bytes)?;
                encoder.finish().map_err(std::io::Error::other)?;
            }
            ArrowCompression::Zstd { level } => {
                self.scratch.extend_from_slice(&length);
                let compressor = match self.zstd.iter().position(|(l, _)| *l == level) {
                    Some(at) => &mut self.zstd[at].1,
                    None => {
                        self.zstd.push((level, compressor(level)?));
                        &mut self.zstd.last_mut().expect("just pushed").1
                    }
                };
                self.scratch.reserve(zstd::zstd_safe::compress_bound(bytes.len()));
                let mut cursor = std::io::Cursor::new(&mut self.scratch);
                cursor.set_position((start + 8) as u64);
                compressor.compress_to_buffer(bytes, &mut cursor)?;
            }
        }
        Ok(true)
    }
}

const PADDING: [u8; BUFFER_ALIGNMENT] = [0; BUFFER_ALIGNMENT];

/// The zstd compressor of `level`: zstd's parameters for the level, with
/// [`LEVEL_3_MIN_MATCH`] at level 3 (the parameter stays set for every buffer it compresses).
fn compressor(level: i32) -> std::io::Result<zstd::bulk::Compressor<'static>> {
    let mut compressor = zstd::bulk::Compressor::new(level)?;
    if level == 3 {
        compressor.set_parameter(zstd::zstd_safe::CParameter::MinMatch(LEVEL_3_MIN_MATCH))?;
    }
    Ok(compressor)
}

/// [`STORED_RAW`] as the 8 bytes before a buffer stored uncompressed.
const STORED_RAW_PREFIX: [u8; 8] = STORED_RAW.to_le_bytes();

/// A body buffer's bytes, in two parts written one after the other (the first often empty).
fn piece<'x>(scratch: &'x [u8], p: &'x Piece<'x>) -> (&'x [u8], &'x [u8]) {
    match p {
        Piece::Raw(bytes) => (&[], bytes),
        Piece::Scratch(range) => (&scratch[range.clone()], &[]),
        Piece::StoredRaw(bytes) => (&STORED_RAW_PREFIX, bytes),
    }
}

fn codec(compression: ArrowCompression) -> Option<CompressionType> {
    match compression {
        ArrowCompression::None => None,
        ArrowCompression::Lz4Frame => Some(CompressionType::LZ4_FRAME),
        ArrowCompression::Zstd { .. } => Some(CompressionType::ZSTD),
    }
}

/// The field nodes and body buffers of `array` and its children, depth first, in the order
/// arrow-ipc's `write_array_data` writes them, without copying a byte. The arrays are read
/// where they are (not through `Array::to_data`, which clones each array's `ArrayData`, its
/// buffer list and data type, and for a one-row message cost more than the layout itself).
fn collect<'a>(
    array: &'a dyn Array,
    nodes: &mut Vec<FieldNode>,
    raw: &mut Vec<&'a [u8]>,
) -> Result<(), Unsupported> {
    if array.offset() != 0 {
        return Err(Unsupported);
    }
    let len = array.len();
    let data_type = array.data_type();
    if matches!(data_type, DataType::Null) {
        nodes.push(FieldNode::new(len as i64, len as i64));
        return Ok(());
    }
    let null_count = array.null_count();
    nodes.push(FieldNode::new(len as i64, null_count as i64));
    // The validity bitmap: empty without nulls, else its bytes for `len` bits.
    match array.nulls() {
        Some(nulls) if null_count > 0 => {
            if nulls.offset() != 0 {
                return Err(Unsupported);
            }
            raw.push(prefix(nulls.buffer().as_slice(), len.div_ceil(8))?);
        }
        _ => raw.push(&[]),
    }
    match data_type {
        DataType::Binary => {
            let array = array.as_binary_opt::<i32>().ok_or(Unsupported)?;
            variable_size(array.offsets(), array.values().as_slice(), len, raw)?;
        }
        DataType::Utf8 => {
            let array = array.as_string_opt::<i32>().ok_or(Unsupported)?;
            variable_size(array.offsets(), array.values().as_slice(), len, raw)?;
        }
        DataType::Boolean => {
            let values = array.as_boolean_opt().ok_or(Unsupported)?.values();
            if values.offset() != 0 {
                return Err(Unsupported);
            }
            raw.push(prefix(values.inner().as_slice(), len.div_ceil(8))?);
        }
        DataType::List(_) => {
            let array = array.as_list_opt::<i32>().ok_or(Unsupported)?;
            nested(array.offsets(), array.values().as_ref(), len, nodes, raw)?;
        }
        DataType::Map(_, _) => {
            let array = array.as_map_opt().ok_or(Unsupported)?;
            nested(array.offsets(), array.entries(), len, nodes, raw)?;
        }
        DataType::Struct(_) => {
            for child in array.as_struct_opt().ok_or(Unsupported)?.columns() {
                if child.len() != len {
                    return Err(Unsupported);
                }
                collect(child.as_ref(), nodes, raw)?;
            }
        }
        DataType::FixedSizeBinary(width) => {
            let values = array.as_fixed_size_binary_opt().ok_or(Unsupported)?.value_data();
            let width = usize::try_from(*width).map_err(|_| Unsupported)?;
            raw.push(&values[..values.len().min(len * width)]);
        }
        t if t.is_numeric() || t.is_temporal() => {
            let values: &[u8] = downcast_primitive_array!(
                array => array.values().inner().as_slice(),
                _ => return Err(Unsupported)
            );
            raw.push(values);
        }
        _ => return Err(Unsupported),
    }
    Ok(())
}

/// The offsets and values of a variable-size array of `len` items (offsets from 0).
fn variable_size<'a>(
    offsets: &'a OffsetBuffer<i32>,
    values: &'a [u8],
    len: usize,
    raw: &mut Vec<&'a [u8]>,
) -> Result<(), Unsupported> {
    if len == 0 {
        raw.push(&ZERO_OFFSET);
        raw.push(&[]);
        return Ok(());
    }
    let end = offsets_end(offsets, len)?;
    raw.push(prefix(offsets.inner().inner().as_slice(), (len + 1) * 4)?);
    raw.push(prefix(values, end)?);
    Ok(())
}

/// The offsets of a list or map array of `len` items, then its one child (`child`, exactly as
/// long as the offsets say).
fn nested<'a>(
    offsets: &'a OffsetBuffer<i32>,
    child: &'a dyn Array,
    len: usize,
    nodes: &mut Vec<FieldNode>,
    raw: &mut Vec<&'a [u8]>,
) -> Result<(), Unsupported> {
    if len == 0 {
        if !child.is_empty() {
            return Err(Unsupported);
        }
        raw.push(&ZERO_OFFSET);
    } else {
        let end = offsets_end(offsets, len)?;
        if child.len() != end {
            return Err(Unsupported);
        }
        raw.push(prefix(offsets.inner().inner().as_slice(), (len + 1) * 4)?);
    }
    collect(child, nodes, raw)
}

/// The first `len` bytes of `bytes` (a buffer shorter than its array needs is not laid out here).
fn prefix(bytes: &[u8], len: usize) -> Result<&[u8], Unsupported> {
    bytes.get(..len).ok_or(Unsupported)
}

/// The last of the `len + 1` offsets of a variable-size array whose first offset is 0 (a
/// non-zero first offset is re-based by arrow-ipc: not laid out here).
fn offsets_end(offsets: &OffsetBuffer<i32>, len: usize) -> Result<usize, Unsupported> {
    let offsets: &[i32] = offsets;
    let (first, last) = (offsets.first(), offsets.get(len));
    if first != Some(&0) {
        return Err(Unsupported);
    }
    usize::try_from(*last.ok_or(Unsupported)?).map_err(|_| Unsupported)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::builder::{
        BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, FixedSizeBinaryBuilder,
        Float64Builder, Int32Builder, Int64Builder, ListBuilder, MapBuilder, StringBuilder, StructBuilder,
        TimestampMillisecondBuilder,
    };
    use arrow_array::{ArrayRef, RecordBatch};
    use arrow_ipc::writer::{DictionaryTracker, IpcDataGenerator, IpcWriteContext};
    use arrow_schema::{DataType, Field, Fields, Schema};

    use super::*;
    use crate::log::checksum::seal_into;

    /// A small deterministic generator (xorshift), so every run checks the same batches.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
        /// A value is null with probability `nulls` in 1/4 steps (0: never).
        fn null(&mut self, nulls: u64) -> bool {
            self.below(4) < nulls
        }
        fn text(&mut self, max: u64) -> String {
            let len = self.below(max + 1);
            // Few letters, so zstd and LZ4 find something to compress in longer columns.
            (0..len).map(|_| (b'a' + self.below(4) as u8) as char).collect()
        }
    }

    /// A batch with every kind of column the converter makes: flat scalars, bytes (of any and
    /// of a fixed length), decimals, dates, timestamps, lists, maps and structs (nested), with
    /// `rows` rows and nulls as `nulls`.
    fn batch(rng: &mut Rng, rows: usize, nulls: u64) -> RecordBatch {
        let mut id = Int64Builder::new();
        let mut name = StringBuilder::new();
        let mut amount = Decimal128Builder::new().with_precision_and_scale(18, 2).unwrap();
        let mut quantity = Int32Builder::new();
        let mut active = BooleanBuilder::new();
        let mut score = Float64Builder::new();
        let mut at = TimestampMillisecondBuilder::new().with_timezone("UTC");
        let mut bytes = BinaryBuilder::new();
        let mut code = FixedSizeBinaryBuilder::new(4);
        let mut day = Date32Builder::new();
        let mut tags = ListBuilder::new(StringBuilder::new());
        let mut attrs = MapBuilder::new(None, StringBuilder::new(), Float64Builder::new());
        let item_fields = Fields::from(vec![
            Field::new("sku", DataType::Utf8, true),
            Field::new("qty", DataType::Int32, true),
        ]);
        let mut items = ListBuilder::new(StructBuilder::from_fields(item_fields.clone(), 0));
        for _ in 0..rows {
            let v = rng.next();
            if rng.null(nulls) {
                id.append_null()
            } else {
                id.append_value(v as i64 >> rng.below(60))
            }
            if rng.null(nulls) {
                name.append_null()
            } else {
                name.append_value(rng.text(40))
            }
            if rng.null(nulls) {
                amount.append_null()
            } else {
                amount.append_value(i128::from(v as i32))
            }
            if rng.null(nulls) {
                quantity.append_null()
            } else {
                quantity.append_value(rng.below(100) as i32)
            }
            if rng.null(nulls) {
                active.append_null()
            } else {
                active.append_value(v & 1 == 0)
            }
            if rng.null(nulls) {
                score.append_null()
            } else {
                score.append_value(rng.below(1000) as f64 / 8.0)
            }
            if rng.null(nulls) {
                at.append_null()
            } else {
                at.append_value(1_700_000_000_000 + rng.below(1 << 20) as i64)
            }
            if rng.null(nulls) {
                bytes.append_null()
            } else {
                bytes.append_value(rng.text(200).as_bytes())
            }
            if rng.null(nulls) {
                code.append_null()
            } else {
                code.append_value((v as u32).to_le_bytes()).unwrap()
            }
            if rng.null(nulls) {
                day.append_null()
            } else {
                day.append_value(19_000 + rng.below(1000) as i32)
            }
            if rng.null(nulls) {
                tags.append(false);
            } else {
                for _ in 0..rng.below(4) {
                    tags.values().append_value(rng.text(8));
                }
                tags.append(true);
            }
            if rng.null(nulls) {
                attrs.append(false).unwrap();
            } else {
                for k in 0..rng.below(3) {
                    attrs.keys().append_value(format!("k{k}"));
                    attrs.values().append_value(rng.below(50) as f64);
                }
                attrs.append(true).unwrap();
            }
            if rng.null(nulls) {
                items.append(false);
            } else {
                for _ in 0..rng.below(3) {
                    let item = items.values();
                    item.field_builder::<StringBuilder>(0)
                        .unwrap()
                        .append_value(rng.text(6));
                    item.field_builder::<Int32Builder>(1)
                        .unwrap()
                        .append_value(rng.below(9) as i32);
                    item.append(true);
                }
                items.append(true);
            }
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(id.finish()),
            Arc::new(name.finish()),
            Arc::new(amount.finish()),
            Arc::new(quantity.finish()),
            Arc::new(active.finish()),
            Arc::new(score.finish()),
            Arc::new(at.finish()),
            Arc::new(bytes.finish()),
            Arc::new(code.finish()),
            Arc::new(day.finish()),
            Arc::new(tags.finish()),
            Arc::new(attrs.finish()),
            Arc::new(items.finish()),
        ];
        let fields: Vec<Field> = [
            "id", "name", "amount", "quantity", "active", "score", "at", "bytes", "code", "day", "tags",
            "attrs", "items",
        ]
        .iter()
        .zip(&columns)
        .map(|(name, column)| Field::new(*name, column.data_type().clone(), true))
        .collect();
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
    }

    /// What the log wrote before this encoder: arrow-ipc's encoder, then `seal_into`.
    fn with_arrow(batch: &RecordBatch, compression: ArrowCompression, tags: &[(&str, &str)]) -> Vec<u8> {
        let (dictionaries, encoded) = IpcDataGenerator::default()
            .encode(
                batch,
                &mut DictionaryTracker::new(false),
                &compression.write_options(),
                &mut IpcWriteContext::default(),
            )
            .unwrap();
        assert!(dictionaries.is_empty());
        let mut out = Vec::new();
        seal_into(&mut out, &encoded.ipc_message, &encoded.arrow_data, tags).unwrap();
        out
    }

    const CODECS: [ArrowCompression; 5] = [
        ArrowCompression::None,
        ArrowCompression::Lz4Frame,
        ArrowCompression::Zstd { level: 1 },
        ArrowCompression::Zstd { level: 3 },
        ArrowCompression::Zstd { level: 9 },
    ];

    #[test]
    fn every_column_kind_and_codec_gives_arrow_ipc_s_bytes() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut encoder = Encoder::default();
        let mut compared = 0;
        let mut level_3_differs = 0;
        for rows in [0usize, 1, 2, 3, 7, 8, 9, 63, 64, 65, 500, 2_000] {
            for nulls in 0..=4 {
                let batch = batch(&mut rng, rows, nulls);
                for compression in CODECS {
                    for tags in [&[][..], &[("kafluss.producers", "1764770000000;7,0,0,9,10")][..]] {
                        let mut ours = b"before".to_vec();
                        encoder
                            .encode_into(&mut ours, &batch, compression, tags, &mut CodecHistory::default())
                            .unwrap()
                            .unwrap();
                        assert_eq!(&ours[..6], b"before", "the encoder appends");
                        let theirs = with_arrow(&batch, compression, tags);
                        if compression == (ArrowCompression::Zstd { level: 3 }) {
                            // Level 3 frames are made with LEVEL_3_MIN_MATCH: other bytes, the
                            // same rows.
                            assert_eq!(
                                read_back(&batch, &ours[6..]),
                                batch,
                                "{rows} rows, nulls {nulls}/4, level 3, tags {tags:?}"
                            );
                            level_3_differs += usize::from(ours[6..] != theirs[..]);
                        } else {
                            assert!(
                                ours[6..] == theirs[..],
                                "{rows} rows, nulls {nulls}/4, {compression:?}, tags {tags:?}: \
                                 {} bytes against arrow-ipc's {}",
                                ours.len() - 6,
                                theirs.len()
                            );
                        }
                        compared += 1;
                    }
                }
            }
        }
        assert_eq!(compared, 12 * 5 * 5 * 2);
        assert!(
            level_3_differs > 0,
            "level 3 is compressed with its own minimum match length"
        );
    }

    /// `message` (one sealed record-batch message of `like`'s schema) read back with arrow-ipc.
    fn read_back(like: &RecordBatch, message: &[u8]) -> RecordBatch {
        let mut writer = arrow_ipc::writer::StreamWriter::try_new(Vec::new(), &like.schema()).unwrap();
        let mut stream = std::mem::take(writer.get_mut());
        stream.extend_from_slice(message);
        let mut reader =
            arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(stream), None).unwrap();
        let batch = reader.next().expect("one batch").unwrap();
        assert!(reader.next().is_none());
        batch
    }

    /// Level 3's minimum match length is set on its compressor (and on no other level's): a
    /// frame of it decompresses to the input, and on a buffer whose repeats are 4 bytes long
    /// it differs from zstd's own level 3 frame.
    #[test]
    fn level_3_compresses_with_its_own_minimum_match_length() {
        // "key=" and one scattered byte, 2,000 times: matches of exactly 4 bytes.
        let words: Vec<u8> = (0u32..2_000)
            .flat_map(|i| {
                let mut word = *b"key=_";
                word[4] = (i.wrapping_mul(2_654_435_761) >> 24) as u8;
                word
            })
            .collect();
        let ours = compressor(3).unwrap().compress(&words).unwrap();
        let zstds = zstd::bulk::Compressor::new(3).unwrap().compress(&words).unwrap();
        assert_ne!(ours, zstds);
        assert_eq!(zstd::bulk::decompress(&ours, words.len()).unwrap(), words);
        for level in [1, 2, 4, 9] {
            assert_eq!(
                compressor(level).unwrap().compress(&words).unwrap(),
                zstd::bulk::Compressor::new(level)
                    .unwrap()
                    .compress(&words)
                    .unwrap(),
                "level {level} is zstd's own"
            );
        }
    }

    /// Recovery keeps a segment's last batch only if it decodes (`segment::decode_batch`): every
    /// kind of column with every codec, as the last batch, with or without zeros written ahead
    /// after it, decodes and is kept; with the end of its metadata zeroed (a torn append before
    /// zeros) it is a torn tail.
    #[test]
    fn the_last_batch_of_every_column_kind_and_codec_is_kept_by_the_checked_walk() {
        use crate::log::segment::scan_segment_checked_blocking;
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let mut encoder = Encoder::default();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("segment");
        let walk = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            scan_segment_checked_blocking(&std::fs::File::open(&path).unwrap()).unwrap()
        };
        let mut walked = 0;
        for rows in [1usize, 9, 500] {
            for nulls in [0, 2, 4] {
                let batch = batch(&mut rng, rows, nulls);
                let mut writer =
                    arrow_ipc::writer::StreamWriter::try_new(Vec::new(), &batch.schema()).unwrap();
                let schema = std::mem::take(writer.get_mut());
                for compression in CODECS {
                    let mut bytes = schema.clone();
                    encoder
                        .encode_into(&mut bytes, &batch, compression, &[], &mut CodecHistory::default())
                        .unwrap()
                        .unwrap();
                    let end = bytes.len() as u64;
                    for zeros in [0usize, 4096] {
                        let mut file = bytes.clone();
                        file.resize(bytes.len() + zeros, 0);
                        let scan = walk(&file);
                        let what = format!("{rows} rows, nulls {nulls}/4, {compression:?}, {zeros} zeros");
                        assert_eq!(scan.rows, rows as u64, "{what}: {scan:?}");
                        assert_eq!(scan.valid_len, end, "{what}");
                        assert_eq!(scan.zero_tail, zeros > 0, "{what}");
                        assert!(scan.damaged.is_none(), "{what}: {scan:?}");
                        walked += 1;
                    }
                    // A crash kept the first `kept` bytes of the append and the zeros after
                    // them: inside the metadata (which no checksum covers) or inside the body.
                    let at = schema.len();
                    let metadata_len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
                    let body = bytes.len() - at - 8 - metadata_len;
                    for kept in [
                        8,
                        8 + 16,
                        8 + metadata_len / 2,
                        8 + metadata_len - 8,
                        8 + metadata_len,
                        8 + metadata_len + body / 2,
                    ] {
                        if bytes[at + kept..].iter().all(|&b| b == 0) {
                            continue; // the lost bytes were zeros: the batch is whole
                        }
                        let mut torn = bytes.clone();
                        torn[at + kept..].fill(0);
                        torn.resize(bytes.len() + 4096, 0);
                        let scan = walk(&torn);
                        let what =
                            format!("{rows} rows, nulls {nulls}/4, {compression:?}, {kept} bytes kept");
                        assert_eq!(scan.rows, 0, "{what}: {scan:?}");
                        assert_eq!(scan.valid_len, at as u64, "{what}");
                        assert!(scan.torn.is_some(), "{what}");
                    }
                }
            }
        }
        assert_eq!(walked, 3 * 3 * 5 * 2);
    }

    #[test]
    fn short_buffers_are_stored_raw_as_arrow_ipc_stores_them() {
        // One row whose text value is 1..=40 bytes, around ALWAYS_RAW, of one repeated letter
        // (compressible) or of varied ones: with every codec the message is arrow-ipc's, so
        // skipping the codec for short buffers changes no byte.
        let mut encoder = Encoder::default();
        let mut compared = 0;
        for len in 1..=40usize {
            for varied in [false, true] {
                let value: String = (0..len)
                    .map(|i| {
                        if varied {
                            (b'a' + (i * 7 % 26) as u8) as char
                        } else {
                            'q'
                        }
                    })
                    .collect();
                let text: ArrayRef = Arc::new(arrow_array::StringArray::from(vec![value]));
                let numbers: ArrayRef = Arc::new(arrow_array::Int64Array::from(vec![len as i64]));
                let batch = RecordBatch::try_from_iter([("text", text), ("numbers", numbers)]).unwrap();
                for compression in CODECS {
                    let mut ours = Vec::new();
                    encoder
                        .encode_into(&mut ours, &batch, compression, &[], &mut CodecHistory::default())
                        .unwrap()
                        .unwrap();
                    assert_eq!(
                        ours,
                        with_arrow(&batch, compression, &[]),
                        "{len} bytes, {compression:?}"
                    );
                    compared += 1;
                }
            }
        }
        assert_eq!(compared, 40 * 2 * 5);
    }

    /// `repeats_4_bytes` against the obvious quadratic search.
    #[test]
    fn repeated_4_byte_windows_are_found_exactly() {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        for round in 0..20_000 {
            let len = 4 + rng.below(60) as usize;
            let alphabet = [2u64, 3, 4, 27, 256][round % 5];
            let bytes: Vec<u8> = (0..len).map(|_| rng.below(alphabet) as u8).collect();
            let windows: Vec<&[u8]> = bytes.windows(4).collect();
            let naive = (0..windows.len()).any(|i| windows[i + 1..].contains(&windows[i]));
            assert_eq!(repeats_4_bytes(&bytes), naive, "{bytes:?}");
        }
    }

    /// Where `cannot_shrink` says a buffer is stored as is without trying, trying would not
    /// have shrunk it: the codec's frame and its 8-byte length are longer than the buffer, for
    /// every length up to the bound, alphabets from 2 symbols to all 256 and every codec it
    /// covers; higher zstd levels are always tried.
    #[test]
    fn buffers_skipped_as_unshrinkable_do_not_shrink() {
        let mut encoder = Encoder::default();
        let mut rng = Rng(0x0fed_cba9_8765_4321);
        let mut skipped = 0;
        for round in 0..6_000 {
            let len = ALWAYS_RAW + 1 + round % (SHORT - ALWAYS_RAW - 1);
            let alphabet = [3u64, 4, 8, 27, 64, 256][round % 6];
            let bytes: Vec<u8> = (0..len)
                .map(|_| b'a'.wrapping_add(rng.below(alphabet) as u8))
                .collect();
            for compression in [
                ArrowCompression::Lz4Frame,
                ArrowCompression::Zstd { level: 1 },
                ArrowCompression::Zstd { level: 2 },
                ArrowCompression::Zstd { level: 3 },
                ArrowCompression::Zstd { level: 4 },
            ] {
                if !cannot_shrink(&bytes, compression) {
                    continue;
                }
                assert!(
                    matches!(
                        compression,
                        ArrowCompression::Lz4Frame | ArrowCompression::Zstd { level: ..=3 }
                    ),
                    "{compression:?} is always tried"
                );
                encoder.scratch.clear();
                assert!(encoder.frame(&bytes, compression).unwrap());
                assert!(
                    encoder.scratch.len() > bytes.len(),
                    "{compression:?} shrank {bytes:?} to {} bytes with its length",
                    encoder.scratch.len()
                );
                skipped += 1;
            }
        }
        // Most buffers of the larger alphabets have no repeated 4 bytes: the rule applies.
        assert!(skipped > 6_000, "{skipped}");
        // A short buffer with a repeat is tried, and may shrink.
        let repeated = b"SHIPPEDSHIPPEDSHIPPEDSHIPPEDSHIPPEDSHIPPED";
        assert!(!cannot_shrink(repeated, ArrowCompression::Zstd { level: 3 }));
        encoder.scratch.clear();
        assert!(encoder
            .frame(repeated, ArrowCompression::Zstd { level: 3 })
            .unwrap());
        assert!(encoder.scratch.len() < repeated.len());
    }

    #[test]
    fn a_buffer_compressed_with_no_codec_is_stored_raw() {
        let mut encoder = Encoder::default();
        let bytes = [7u8; 100];
        let stored = encoder.compress(&bytes, ArrowCompression::None).unwrap();
        let (head, tail) = piece(&encoder.scratch, &stored);
        assert_eq!(head, &STORED_RAW.to_le_bytes());
        assert_eq!(tail, &bytes[..]);
    }

    /// A buffer no codec shrinks (random bytes) is stored raw, as arrow-ipc stores it, straight
    /// from the array's bytes: the scratch vector keeps none of it.
    #[test]
    fn an_incompressible_buffer_is_stored_raw_without_a_scratch_copy() {
        let mut rng = Rng(11);
        let random: Vec<u8> = (0..64 * 1024).map(|_| rng.next() as u8).collect();
        let mut encoder = Encoder::default();
        for compression in CODECS {
            if compression == ArrowCompression::None {
                continue;
            }
            let stored = encoder.compress(&random, compression).unwrap();
            assert!(matches!(stored, Piece::StoredRaw(_)), "{compression:?}");
            let (head, tail) = piece(&encoder.scratch, &stored);
            assert_eq!(head, &STORED_RAW.to_le_bytes());
            assert_eq!(tail, &random[..]);
            assert!(encoder.scratch.is_empty(), "{compression:?}");
        }
        // Whole messages of random values (in one column with a compressible offsets buffer):
        // arrow-ipc's bytes, and (level 3) the same rows read back.
        let mut values = BinaryBuilder::new();
        for row in 0..256 {
            values.append_value(&random[row * 200..row * 200 + 100 + row % 100]);
        }
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("bytes", DataType::Binary, false)])),
            vec![Arc::new(values.finish()) as ArrayRef],
        )
        .unwrap();
        for compression in CODECS {
            let mut ours = Vec::new();
            encoder
                .encode_into(
                    &mut ours,
                    &batch,
                    compression,
                    &[("k", "v")],
                    &mut CodecHistory::default(),
                )
                .unwrap()
                .unwrap();
            if compression == (ArrowCompression::Zstd { level: 3 }) {
                assert_eq!(read_back(&batch, &ours), batch);
            } else {
                assert_eq!(
                    ours,
                    with_arrow(&batch, compression, &[("k", "v")]),
                    "{compression:?}"
                );
            }
        }
    }

    #[test]
    fn a_failed_buffer_skips_the_codec_for_1_3_7_up_to_63_messages() {
        let mut backoff = Backoff::default();
        let mut tried = Vec::new();
        for message in 0..400 {
            if backoff.try_now() {
                tried.push(message);
                // Fails until message 200, then shrinks.
                backoff.record(message >= 200);
            }
        }
        // Tries at 0, then after 1, 3, 7, 15, 31 and 63 skipped messages; the first try from
        // 200 on (254) shrinks, and from then on every message is tried.
        let expected: Vec<i32> = [0, 2, 6, 14, 30, 62, 126, 190, 254]
            .into_iter()
            .chain(255..400)
            .collect();
        assert_eq!(tried, expected);
        assert_eq!(backoff, Backoff::default());
    }

    /// A bucket's messages with a column of random values and one of text: the random value
    /// buffer goes to the codec only at the tries of the schedule above, and each message is
    /// still arrow-ipc's bytes (which store the random buffer uncompressed too). Values that
    /// compress again are compressed from the next try on.
    #[test]
    fn a_bucket_s_incompressible_buffer_is_tried_on_that_schedule_and_compressed_once_it_shrinks() {
        let mut rng = Rng(5);
        let message = |rng: &mut Rng, random: bool| {
            let mut values = BinaryBuilder::new();
            let mut text = StringBuilder::new();
            for _ in 0..64 {
                // 256 bytes each way: random, or four letters (which both codecs shrink).
                let value: Vec<u8> = if random {
                    (0..256).map(|_| rng.next() as u8).collect()
                } else {
                    (0..256).map(|_| b'a' + rng.below(4) as u8).collect()
                };
                values.append_value(&value);
                text.append_value(rng.text(40));
            }
            RecordBatch::try_new(
                Arc::new(Schema::new(vec![
                    Field::new("v", DataType::Binary, false),
                    Field::new("t", DataType::Utf8, false),
                ])),
                vec![Arc::new(values.finish()) as ArrayRef, Arc::new(text.finish())],
            )
            .unwrap()
        };
        for compression in [ArrowCompression::Lz4Frame, ArrowCompression::Zstd { level: 1 }] {
            let mut encoder = Encoder::default();
            let mut history = CodecHistory::default();
            let mut value_tries = Vec::new();
            for n in 0..200 {
                let batch = message(&mut rng, true);
                // The value buffer of column `v`: after its validity and offsets buffers.
                if history.buffers.get(2).is_none_or(|b| b.skip == 0) {
                    value_tries.push(n);
                }
                let mut ours = Vec::new();
                encoder
                    .encode_into(&mut ours, &batch, compression, &[], &mut history)
                    .unwrap()
                    .unwrap();
                assert_eq!(
                    ours,
                    with_arrow(&batch, compression, &[]),
                    "{compression:?} message {n}"
                );
            }
            assert_eq!(value_tries, [0, 2, 6, 14, 30, 62, 126, 190], "{compression:?}");
            // Compressible values from now on: the next try (254) finds that they shrink, and
            // every message after it compresses them.
            let mut sizes = Vec::new();
            for _ in 200..300 {
                let batch = message(&mut rng, false);
                let mut ours = Vec::new();
                encoder
                    .encode_into(&mut ours, &batch, compression, &[], &mut history)
                    .unwrap()
                    .unwrap();
                sizes.push(ours.len());
            }
            // A message holding the 64 x 256 value bytes uncompressed is longer than that.
            let values = 64 * 256;
            assert!(
                sizes[..54].iter().all(|&len| len > values),
                "{compression:?}: {sizes:?}"
            );
            assert!(
                sizes[54..].iter().all(|&len| len < values),
                "{compression:?}: {sizes:?}"
            );
        }
        // Random value buffers under 1 KiB (3 x 256 bytes) are tried in every message and
        // leave the history as it was.
        let short = |rng: &mut Rng| {
            let mut values = BinaryBuilder::new();
            for _ in 0..3 {
                values.append_value((0..256).map(|_| rng.next() as u8).collect::<Vec<u8>>());
            }
            RecordBatch::try_new(
                Arc::new(Schema::new(vec![Field::new("v", DataType::Binary, false)])),
                vec![Arc::new(values.finish()) as ArrayRef],
            )
            .unwrap()
        };
        let mut encoder = Encoder::default();
        let mut history = CodecHistory::default();
        for _ in 0..10 {
            let batch = short(&mut rng);
            let mut ours = Vec::new();
            let compression = ArrowCompression::Zstd { level: 1 };
            encoder
                .encode_into(&mut ours, &batch, compression, &[], &mut history)
                .unwrap()
                .unwrap();
            assert_eq!(ours, with_arrow(&batch, compression, &[]));
            assert!(history.buffers.iter().all(|b| *b == Backoff::default()));
        }
    }

    #[test]
    fn sliced_or_unknown_arrays_are_left_to_arrow_ipc() {
        let mut rng = Rng(7);
        let mut encoder = Encoder::default();
        let whole = batch(&mut rng, 100, 1);
        let mut out = Vec::new();
        assert_eq!(
            encoder
                .encode_into(
                    &mut out,
                    &whole.slice(10, 50),
                    ArrowCompression::None,
                    &[],
                    &mut CodecHistory::default()
                )
                .err(),
            Some(Unsupported)
        );
        let keys = arrow_array::Int32Array::from(vec![0, 1, 0]);
        let values = arrow_array::StringArray::from(vec!["a", "b"]);
        let dictionary: ArrayRef = Arc::new(arrow_array::DictionaryArray::new(keys, Arc::new(values)));
        let batch = RecordBatch::try_from_iter([("d", dictionary)]).unwrap();
        assert_eq!(
            encoder
                .encode_into(
                    &mut out,
                    &batch,
                    ArrowCompression::None,
                    &[],
                    &mut CodecHistory::default()
                )
                .err(),
            Some(Unsupported)
        );
        assert!(out.is_empty(), "nothing appended for a batch left to arrow-ipc");
        // And the same encoder goes on encoding whole batches after them.
        encoder
            .encode_into(
                &mut out,
                &whole,
                ArrowCompression::Zstd { level: 9 },
                &[],
                &mut CodecHistory::default(),
            )
            .unwrap()
            .unwrap();
        assert_eq!(out, with_arrow(&whole, ArrowCompression::Zstd { level: 9 }, &[]));
    }
}
