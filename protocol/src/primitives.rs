//! Wire primitives, both directions: fixed-width big-endian integers, (unsigned) varints and
//! varlongs, classic and compact (nullable) strings, bytes and arrays, UUIDs and tagged fields.
//!
//! Decoders are hand-written `nom` parsers over `&[u8]`; fields that must stay zero-copy are cut
//! out of the owning [`Bytes`] with `slice_ref`. Every length is checked against the remaining
//! input before anything is allocated, so a hostile length prefix costs nothing.

use bytes::{BufMut, Bytes, BytesMut};
use nom::bytes::complete::take;
use nom::number::complete::{be_i16, be_i32, be_i64, be_i8, be_u8};

use crate::error::{fail, DecodeError, EncodeError, PResult};

/// Longest encoding of a 32-bit varint.
const MAX_VARINT_BYTES: usize = 5;
/// Longest encoding of a 64-bit varint.
const MAX_VARLONG_BYTES: usize = 10;

/// A tagged field this crate does not interpret, kept so that it can be re-encoded.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RawTaggedField {
    /// The tag number.
    pub tag: u32,
    /// The field's bytes, without the tag and size prefix.
    pub data: Bytes,
}

/// A 128-bit UUID as Kafka sends it (16 raw bytes); [`Uuid::ZERO`] means "no id".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    /// The all-zero id Kafka uses for "unset".
    pub const ZERO: Uuid = Uuid([0; 16]);
}

impl std::fmt::Display for Uuid {
    /// The hyphenated lower-case hex form, e.g. `01234567-89ab-cdef-0123-456789abcdef`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (index, byte) in self.0.iter().enumerate() {
            if matches!(index, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

pub(crate) fn i8(input: &[u8]) -> PResult<'_, i8> {
    be_i8(input)
}

pub(crate) fn i16(input: &[u8]) -> PResult<'_, i16> {
    be_i16(input)
}

pub(crate) fn i32(input: &[u8]) -> PResult<'_, i32> {
    be_i32(input)
}

pub(crate) fn i64(input: &[u8]) -> PResult<'_, i64> {
    be_i64(input)
}

/// A boolean byte; like the Java client, any non-zero value is true.
pub(crate) fn bool(input: &[u8]) -> PResult<'_, bool> {
    let (input, byte) = be_u8(input)?;
    Ok((input, byte != 0))
}

/// An unsigned LEB128 of one to three bytes at `input[at..]`, and how many bytes it takes;
/// `None` for a longer or truncated one, which [`unsigned_leb128`]'s loop reads or refuses. Most
/// lengths and deltas in a record fit (a record's offset and timestamp deltas pass 63 after its
/// 64th record, a 100-byte value's length is two bytes): the fast path of every varint here and
/// of the record reader (`record_batch::well_formed_record`), which reads at a position rather
/// than from a slice it would cut first.
#[inline(always)]
pub(crate) fn short_unsigned_varint(input: &[u8], at: usize) -> Option<(u32, usize)> {
    let first = *input.get(at)?;
    if first < 0x80 {
        return Some((u32::from(first), 1));
    }
    let second = *input.get(at + 1)?;
    if second < 0x80 {
        return Some((u32::from(first & 0x7f) | u32::from(second) << 7, 2));
    }
    let third = *input.get(at + 2)?;
    if third < 0x80 {
        let value = u32::from(first & 0x7f) | u32::from(second & 0x7f) << 7 | u32::from(third) << 14;
        return Some((value, 3));
    }
    None
}

/// The signed value of a zigzag-encoded 32-bit `raw`.
#[inline(always)]
pub(crate) fn zigzag32(raw: u32) -> i32 {
    ((raw >> 1) as i32) ^ -((raw & 1) as i32)
}

/// Unsigned LEB128 of at most 64 bits, with at most `max_bytes` (at least 3) bytes.
#[inline]
fn unsigned_leb128(input: &[u8], max_bytes: usize) -> PResult<'_, u64> {
    if let Some((value, len)) = short_unsigned_varint(input, 0) {
        return Ok((&input[len..], u64::from(value)));
    }
    let mut value: u64 = 0;
    for (index, &byte) in input.iter().enumerate().take(max_bytes) {
        value |= u64::from(byte & 0x7f) << (7 * index);
        if byte & 0x80 == 0 {
            return Ok((&input[index + 1..], value));
        }
    }
    if input.len() < max_bytes {
        fail(DecodeError::Truncated)
    } else {
        fail(DecodeError::MalformedVarint)
    }
}

/// Unsigned 32-bit varint (lengths, counts and tags of the flexible encoding).
#[inline]
pub fn unsigned_varint(input: &[u8]) -> PResult<'_, u32> {
    let (rest, value) = unsigned_leb128(input, MAX_VARINT_BYTES)?;
    match u32::try_from(value) {
        Ok(value) => Ok((rest, value)),
        Err(_) => fail(DecodeError::MalformedVarint),
    }
}

/// Zigzag-encoded signed 32-bit varint (record fields).
#[inline]
pub fn varint(input: &[u8]) -> PResult<'_, i32> {
    let (rest, raw) = unsigned_varint(input)?;
    Ok((rest, zigzag32(raw)))
}

/// Zigzag-encoded signed 64-bit varint (record timestamp deltas).
#[inline]
pub fn varlong(input: &[u8]) -> PResult<'_, i64> {
    let (rest, raw) = unsigned_leb128(input, MAX_VARLONG_BYTES)?;
    // The tenth byte may only carry the top bit of a 64-bit value.
    if input.len() - rest.len() == MAX_VARLONG_BYTES && input[MAX_VARLONG_BYTES - 1] > 1 {
        return fail(DecodeError::MalformedVarint);
    }
    Ok((rest, ((raw >> 1) as i64) ^ -((raw & 1) as i64)))
}

/// A length prefix: `i16`/`i32` classic or compact (`unsigned varint` holding length + 1).
/// Returns `None` for null: any negative classic length (Kafka's generated readers take every
/// negative length of a string, bytes or array as null, not only -1), or compact 0.
fn length(input: &[u8], flexible: bool, classic_i16: bool) -> PResult<'_, Option<usize>> {
    let (rest, raw): (&[u8], i64) = if flexible {
        let (rest, raw) = unsigned_varint(input)?;
        (rest, i64::from(raw) - 1)
    } else if classic_i16 {
        let (rest, raw) = i16(input)?;
        (rest, i64::from(raw))
    } else {
        let (rest, raw) = i32(input)?;
        (rest, i64::from(raw))
    };
    match raw {
        n if n < 0 => Ok((rest, None)),
        // Cannot overflow: n ≤ u32::MAX.
        n => Ok((rest, Some(n as usize))),
    }
}

fn utf8(raw: &[u8]) -> Result<&str, nom::Err<DecodeError>> {
    std::str::from_utf8(raw).map_err(|_| nom::Err::Failure(DecodeError::InvalidUtf8))
}

/// A nullable string (`i16` length, or compact when `flexible`).
pub(crate) fn nullable_str(input: &[u8], flexible: bool) -> PResult<'_, Option<&str>> {
    let (input, len) = length(input, flexible, true)?;
    match len {
        None => Ok((input, None)),
        Some(len) => {
            let (input, raw) = take(len)(input)?;
            Ok((input, Some(utf8(raw)?)))
        }
    }
}

/// A non-nullable string; `field` names it in the error for a null.
pub(crate) fn str<'a>(input: &'a [u8], flexible: bool, field: &'static str) -> PResult<'a, &'a str> {
    let (input, value) = nullable_str(input, flexible)?;
    match value {
        Some(value) => Ok((input, value)),
        None => fail(DecodeError::UnexpectedNull(field)),
    }
}

/// A non-nullable string copied into a `String`.
pub(crate) fn string<'a>(input: &'a [u8], flexible: bool, field: &'static str) -> PResult<'a, String> {
    let (input, value) = str(input, flexible, field)?;
    Ok((input, value.to_owned()))
}

/// A nullable string copied into an `Option<String>`.
pub(crate) fn nullable_string(input: &[u8], flexible: bool) -> PResult<'_, Option<String>> {
    let (input, value) = nullable_str(input, flexible)?;
    Ok((input, value.map(str::to_owned)))
}

/// Nullable bytes (`i32` length, or compact when `flexible`), as a slice of the input.
pub(crate) fn nullable_bytes_slice(input: &[u8], flexible: bool) -> PResult<'_, Option<&[u8]>> {
    let (input, len) = length(input, flexible, false)?;
    match len {
        None => Ok((input, None)),
        Some(len) => {
            let (input, raw) = take(len)(input)?;
            Ok((input, Some(raw)))
        }
    }
}

/// Nullable bytes cut zero-copy out of `src`, which must own `input`.
pub(crate) fn nullable_bytes<'a>(src: &Bytes, input: &'a [u8], flexible: bool) -> PResult<'a, Option<Bytes>> {
    let (input, raw) = nullable_bytes_slice(input, flexible)?;
    Ok((input, raw.map(|raw| src.slice_ref(raw))))
}

/// Non-nullable bytes cut zero-copy out of `src`.
pub(crate) fn bytes<'a>(
    src: &Bytes,
    input: &'a [u8],
    flexible: bool,
    field: &'static str,
) -> PResult<'a, Bytes> {
    let (input, value) = nullable_bytes(src, input, flexible)?;
    match value {
        Some(value) => Ok((input, value)),
        None => fail(DecodeError::UnexpectedNull(field)),
    }
}

/// An array length (`i32`, or compact when `flexible`); `None` is null. The count is checked
/// against the remaining input: every element kafluss decodes takes at least one byte.
pub(crate) fn array_len(input: &[u8], flexible: bool) -> PResult<'_, Option<usize>> {
    let (input, count) = length(input, flexible, false)?;
    match count {
        Some(count) if count > input.len() => fail(DecodeError::ArrayTooLong {
            count,
            remaining: input.len(),
        }),
        other => Ok((input, other)),
    }
}

/// Most elements an array reserves room for before they are parsed; more grow the vector.
const PREALLOCATED_ELEMENTS: usize = 1024;

/// A nullable array whose elements are parsed by `element`.
pub(crate) fn nullable_array<'a, T>(
    input: &'a [u8],
    flexible: bool,
    mut element: impl FnMut(&'a [u8]) -> PResult<'a, T>,
) -> PResult<'a, Option<Vec<T>>> {
    let (mut input, count) = array_len(input, flexible)?;
    let Some(count) = count else {
        return Ok((input, None));
    };
    // Reserved up to a bound: the count is only known not to exceed the remaining bytes, and
    // an element may be far larger in memory than its one byte on the wire.
    let mut items = Vec::with_capacity(count.min(PREALLOCATED_ELEMENTS));
    for _ in 0..count {
        let (rest, item) = element(input)?;
        items.push(item);
        input = rest;
    }
    Ok((input, Some(items)))
}

/// A non-nullable array; `field` names it in the error for a null.
pub(crate) fn array<'a, T>(
    input: &'a [u8],
    flexible: bool,
    field: &'static str,
    element: impl FnMut(&'a [u8]) -> PResult<'a, T>,
) -> PResult<'a, Vec<T>> {
    let (input, items) = nullable_array(input, flexible, element)?;
    match items {
        Some(items) => Ok((input, items)),
        None => fail(DecodeError::UnexpectedNull(field)),
    }
}

/// A 16-byte UUID.
pub(crate) fn uuid(input: &[u8]) -> PResult<'_, Uuid> {
    let (input, raw) = take(16usize)(input)?;
    let mut out = [0u8; 16];
    out.copy_from_slice(raw);
    Ok((input, Uuid(out)))
}

/// The tagged-field section of a flexible struct, as raw `(tag, data)` slices in wire order.
/// Tags must be strictly increasing, as the Java client enforces.
pub(crate) fn tagged_fields(input: &[u8]) -> PResult<'_, Vec<(u32, &[u8])>> {
    let (mut input, count) = unsigned_varint(input)?;
    // Each field takes at least two bytes (tag and size).
    if count as usize > input.len() / 2 {
        return fail(DecodeError::ArrayTooLong {
            count: count as usize,
            remaining: input.len(),
        });
    }
    let mut fields = Vec::new();
    let mut previous: Option<u32> = None;
    for _ in 0..count {
        let (rest, tag) = unsigned_varint(input)?;
        if previous.is_some_and(|previous| tag <= previous) {
            return fail(DecodeError::TagOrder { tag });
        }
        previous = Some(tag);
        let (rest, size) = unsigned_varint(rest)?;
        let (rest, data) = take(size as usize)(rest)?;
        fields.push((tag, data));
        input = rest;
    }
    Ok((input, fields))
}

/// Tagged fields none of which this struct knows: all kept raw for re-encoding.
pub(crate) fn unknown_tagged_fields<'a>(src: &Bytes, input: &'a [u8]) -> PResult<'a, Vec<RawTaggedField>> {
    let (input, fields) = tagged_fields(input)?;
    let raw = fields
        .into_iter()
        .map(|(tag, data)| RawTaggedField {
            tag,
            data: src.slice_ref(data),
        })
        .collect();
    Ok((input, raw))
}

/// Skips a tagged-field section when `flexible`; nothing otherwise.
pub(crate) fn skip_tagged_fields(input: &[u8], flexible: bool) -> PResult<'_, ()> {
    if flexible {
        let (input, _) = tagged_fields(input)?;
        Ok((input, ()))
    } else {
        Ok((input, ()))
    }
}

/// Runs `parser` over the whole of `data` (a known tagged field's bytes), failing if it does
/// not consume everything.
pub(crate) fn parse_tagged_field<'a, T>(
    tag: u32,
    data: &'a [u8],
    parser: impl FnOnce(&'a [u8]) -> PResult<'a, T>,
) -> Result<T, nom::Err<DecodeError>> {
    match parser(data) {
        Ok(([], value)) => Ok(value),
        _ => Err(nom::Err::Failure(DecodeError::MalformedTaggedField { tag })),
    }
}

/// Runs a top-level parser and requires it to consume the whole input.
pub(crate) fn parse_all<'a, T>(
    input: &'a [u8],
    parser: impl FnOnce(&'a [u8]) -> PResult<'a, T>,
) -> Result<T, DecodeError> {
    let (rest, value) = parser(input)?;
    if rest.is_empty() {
        Ok(value)
    } else {
        Err(DecodeError::TrailingBytes(rest.len()))
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------------

/// Unsigned LEB128.
pub fn put_unsigned_varint(buf: &mut impl BufMut, mut value: u64) {
    while value >= 0x80 {
        buf.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

/// Zigzag signed 32-bit varint.
pub fn put_varint(buf: &mut impl BufMut, value: i32) {
    put_unsigned_varint(buf, u64::from(((value << 1) ^ (value >> 31)) as u32));
}

/// Zigzag signed 64-bit varint.
pub fn put_varlong(buf: &mut impl BufMut, value: i64) {
    put_unsigned_varint(buf, ((value << 1) ^ (value >> 63)) as u64);
}

/// Encoded size of a zigzag 32-bit varint.
pub fn varint_len(value: i32) -> usize {
    unsigned_varint_len(u64::from(((value << 1) ^ (value >> 31)) as u32))
}

/// Encoded size of a zigzag 64-bit varint.
pub fn varlong_len(value: i64) -> usize {
    unsigned_varint_len(((value << 1) ^ (value >> 63)) as u64)
}

/// Encoded size of an unsigned LEB128.
pub fn unsigned_varint_len(value: u64) -> usize {
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

pub(crate) fn put_bool(buf: &mut BytesMut, value: bool) {
    buf.put_u8(u8::from(value));
}

/// Writes a length prefix for a string (`i16` classic), bytes or array (`i32` classic); compact
/// when `flexible`. `None` writes null.
fn put_length(
    buf: &mut BytesMut,
    len: Option<usize>,
    flexible: bool,
    classic_i16: bool,
    field: &'static str,
) -> Result<(), EncodeError> {
    let limit = if classic_i16 {
        i16::MAX as usize
    } else {
        i32::MAX as usize
    };
    match len {
        Some(len) if len > limit => Err(EncodeError::TooLong { field, len }),
        Some(len) if flexible => {
            put_unsigned_varint(buf, len as u64 + 1);
            Ok(())
        }
        Some(len) if classic_i16 => {
            buf.put_i16(len as i16);
            Ok(())
        }
        Some(len) => {
            buf.put_i32(len as i32);
            Ok(())
        }
        None if flexible => {
            buf.put_u8(0);
            Ok(())
        }
        None if classic_i16 => {
            buf.put_i16(-1);
            Ok(())
        }
        None => {
            buf.put_i32(-1);
            Ok(())
        }
    }
}

pub(crate) fn put_nullable_str(
    buf: &mut BytesMut,
    value: Option<&str>,
    flexible: bool,
    field: &'static str,
) -> Result<(), EncodeError> {
    put_length(buf, value.map(str::len), flexible, true, field)?;
    if let Some(value) = value {
        buf.put_slice(value.as_bytes());
    }
    Ok(())
}

pub(crate) fn put_str(
    buf: &mut BytesMut,
    value: &str,
    flexible: bool,
    field: &'static str,
) -> Result<(), EncodeError> {
    put_nullable_str(buf, Some(value), flexible, field)
}

pub(crate) fn put_nullable_bytes(
    buf: &mut BytesMut,
    value: Option<&[u8]>,
    flexible: bool,
    field: &'static str,
) -> Result<(), EncodeError> {
    put_length(buf, value.map(<[u8]>::len), flexible, false, field)?;
    if let Some(value) = value {
        buf.put_slice(value);
    }
    Ok(())
}

pub(crate) fn put_array_len(
    buf: &mut BytesMut,
    len: Option<usize>,
    flexible: bool,
    field: &'static str,
) -> Result<(), EncodeError> {
    put_length(buf, len, flexible, false, field)
}

/// Writes a tagged-field section from `(tag, bytes)` pairs, which must be sorted by tag.
pub(crate) fn put_tagged_fields(buf: &mut BytesMut, fields: &[(u32, &[u8])]) {
    put_unsigned_varint(buf, fields.len() as u64);
    for (tag, data) in fields {
        put_unsigned_varint(buf, u64::from(*tag));
        put_unsigned_varint(buf, data.len() as u64);
        buf.put_slice(data);
    }
}

/// Writes an empty tagged-field section when `flexible`.
pub(crate) fn put_empty_tagged_fields(buf: &mut BytesMut, flexible: bool) {
    if flexible {
        buf.put_u8(0);
    }
}

/// Writes known tagged fields merged with raw unknown ones, in tag order.
pub(crate) fn put_tagged_fields_with_raw(
    buf: &mut BytesMut,
    known: Vec<(u32, Vec<u8>)>,
    raw: &[RawTaggedField],
) {
    let mut all: Vec<(u32, &[u8])> = known.iter().map(|(tag, data)| (*tag, data.as_slice())).collect();
    all.extend(raw.iter().map(|field| (field.tag, field.data.as_ref())));
    all.sort_by_key(|(tag, _)| *tag);
    all.dedup_by_key(|(tag, _)| *tag);
    put_tagged_fields(buf, &all);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_golden_bytes() {
        let cases: [(i32, &[u8]); 6] = [
            (0, &[0x00]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (63, &[0x7e]),
            (-64, &[0x7f]),
            (64, &[0x80, 0x01]),
        ];
        for (value, wire) in cases {
            let mut buf = BytesMut::new();
            put_varint(&mut buf, value);
            assert_eq!(&buf[..], wire, "{value}");
            assert_eq!(varint(wire).unwrap(), (&[][..], value));
            assert_eq!(varint_len(value), wire.len());
        }
        let mut buf = BytesMut::new();
        put_varint(&mut buf, i32::MIN);
        assert_eq!(&buf[..], &[0xff, 0xff, 0xff, 0xff, 0x0f]);
    }

    /// Every value of one to three bytes (all read by `short_unsigned_varint`, the fast path)
    /// reads back with the bytes after it left alone, signed and unsigned.
    #[test]
    fn short_varints_read_back_exactly() {
        for value in 0..=(1u32 << 15) {
            let mut buf = BytesMut::new();
            put_unsigned_varint(&mut buf, u64::from(value));
            buf.extend_from_slice(&[0x80, 0x01]);
            assert_eq!(unsigned_varint(&buf), Ok((&[0x80, 0x01][..], value)), "{value}");
            let signed = value as i32 - (1 << 14);
            let mut buf = BytesMut::new();
            put_varint(&mut buf, signed);
            put_varlong(&mut buf, i64::from(signed));
            let (rest, read) = varint(&buf).unwrap();
            assert_eq!(read, signed);
            assert_eq!(varlong(rest), Ok((&[][..], i64::from(signed))));
        }
    }

    #[test]
    fn varint_rejects_overlong_and_truncated() {
        assert_eq!(
            varint(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
            Err(nom::Err::Failure(DecodeError::MalformedVarint))
        );
        // Five bytes whose value exceeds 32 bits.
        assert_eq!(
            unsigned_varint(&[0xff, 0xff, 0xff, 0xff, 0x7f]),
            Err(nom::Err::Failure(DecodeError::MalformedVarint))
        );
        assert_eq!(varint(&[0x80]), Err(nom::Err::Failure(DecodeError::Truncated)));
        assert_eq!(
            varint(&[0xff, 0xff]),
            Err(nom::Err::Failure(DecodeError::Truncated))
        );
        assert_eq!(varint(&[]), Err(nom::Err::Failure(DecodeError::Truncated)));
        assert_eq!(
            varlong(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]),
            Err(nom::Err::Failure(DecodeError::MalformedVarint))
        );
    }

    #[test]
    fn varlong_extremes_round_trip() {
        for value in [i64::MIN, i64::MAX, 0, -1, 1_700_000_000_000] {
            let mut buf = BytesMut::new();
            put_varlong(&mut buf, value);
            assert_eq!(buf.len(), varlong_len(value));
            assert_eq!(varlong(&buf).unwrap(), (&[][..], value));
        }
    }

    #[test]
    fn strings_classic_and_compact() {
        assert_eq!(nullable_str(&[0xff, 0xff], false).unwrap().1, None);
        assert_eq!(nullable_str(&[0x00], true).unwrap().1, None);
        assert_eq!(
            nullable_str(&[0x00, 0x02, b'h', b'i'], false).unwrap().1,
            Some("hi")
        );
        assert_eq!(nullable_str(&[0x03, b'h', b'i'], true).unwrap().1, Some("hi"));
        // Any negative classic length is null, as Kafka's generated readers take it; for a
        // field that may not be null that is the null error.
        assert_eq!(nullable_str(&[0xff, 0xfe], false).unwrap(), (&[][..], None));
        assert_eq!(
            nullable_str(&[0x80, 0x00, b'x'], false).unwrap(),
            (&[b'x'][..], None)
        );
        assert_eq!(
            str(&[0xff, 0xfe], false, "name"),
            Err(nom::Err::Failure(DecodeError::UnexpectedNull("name")))
        );
        assert_eq!(array_len(&[0xff, 0xff, 0xff, 0xfe], false).unwrap().1, None);
        assert_eq!(
            nullable_str(&[0x00, 0x01, 0xff], false),
            Err(nom::Err::Failure(DecodeError::InvalidUtf8))
        );
        assert_eq!(
            str(&[0xff, 0xff], false, "name"),
            Err(nom::Err::Failure(DecodeError::UnexpectedNull("name")))
        );
        assert!(matches!(
            nullable_str(&[0x00, 0x05, b'h'], false),
            Err(nom::Err::Error(DecodeError::Truncated))
        ));
    }

    #[test]
    fn array_count_is_bounded_by_input() {
        let input = [0x7f, 0xff, 0xff, 0xff, 0x00];
        assert_eq!(
            array_len(&input, false),
            Err(nom::Err::Failure(DecodeError::ArrayTooLong {
                count: i32::MAX as usize,
                remaining: 1
            }))
        );
        assert_eq!(array_len(&[0x00], true).unwrap().1, None);
        assert_eq!(array_len(&[0xff, 0xff, 0xff, 0xff], false).unwrap().1, None);
    }

    #[test]
    fn tagged_fields_in_order_only() {
        let ok = [0x02, 0x00, 0x01, 0xaa, 0x03, 0x00];
        let (rest, fields) = tagged_fields(&ok).unwrap();
        assert!(rest.is_empty());
        assert_eq!(fields, vec![(0, &[0xaa][..]), (3, &[][..])]);
        let bad = [0x02, 0x03, 0x00, 0x01, 0x00];
        assert_eq!(
            tagged_fields(&bad),
            Err(nom::Err::Failure(DecodeError::TagOrder { tag: 1 }))
        );
    }

    #[test]
    fn put_length_rejects_overlong_strings() {
        let long = "x".repeat(i16::MAX as usize + 1);
        let mut buf = BytesMut::new();
        assert!(matches!(
            put_str(&mut buf, &long, false, "client_id"),
            Err(EncodeError::TooLong {
                field: "client_id",
                ..
            })
        ));
        assert!(put_str(&mut buf, &long[1..], false, "client_id").is_ok());
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn varint_round_trips(value in any::<i32>()) {
                let mut buf = BytesMut::new();
                put_varint(&mut buf, value);
                prop_assert_eq!(buf.len(), varint_len(value));
                prop_assert_eq!(varint(&buf).unwrap(), (&[][..], value));
            }

            #[test]
            fn varlong_round_trips(value in any::<i64>()) {
                let mut buf = BytesMut::new();
                put_varlong(&mut buf, value);
                prop_assert_eq!(buf.len(), varlong_len(value));
                prop_assert_eq!(varlong(&buf).unwrap(), (&[][..], value));
            }

            #[test]
            fn unsigned_varint_round_trips(value in any::<u32>()) {
                let mut buf = BytesMut::new();
                put_unsigned_varint(&mut buf, u64::from(value));
                prop_assert_eq!(buf.len(), unsigned_varint_len(u64::from(value)));
                prop_assert_eq!(unsigned_varint(&buf).unwrap(), (&[][..], value));
            }

            #[test]
            fn strings_round_trip(value in proptest::option::of(".{0,300}"), flexible in any::<bool>()) {
                let mut buf = BytesMut::new();
                put_nullable_str(&mut buf, value.as_deref(), flexible, "s").unwrap();
                let (rest, decoded) = nullable_str(&buf, flexible).unwrap();
                prop_assert!(rest.is_empty());
                prop_assert_eq!(decoded, value.as_deref());
            }

            #[test]
            fn bytes_round_trip(value in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300)), flexible in any::<bool>()) {
                let mut buf = BytesMut::new();
                put_nullable_bytes(&mut buf, value.as_deref(), flexible, "b").unwrap();
                let src = buf.freeze();
                let (rest, decoded) = nullable_bytes(&src, &src, flexible).unwrap();
                prop_assert!(rest.is_empty());
                prop_assert_eq!(decoded.as_deref(), value.as_deref());
            }

            #[test]
            fn int_arrays_round_trip(values in proptest::collection::vec(any::<i32>(), 0..100), flexible in any::<bool>()) {
                let mut buf = BytesMut::new();
                put_array_len(&mut buf, Some(values.len()), flexible, "a").unwrap();
                for value in &values {
                    buf.put_i32(*value);
                }
                let (rest, decoded) = array(&buf, flexible, "a", i32).unwrap();
                prop_assert!(rest.is_empty());
                prop_assert_eq!(decoded, values);
            }

            #[test]
            fn tagged_fields_round_trip(tags in proptest::collection::btree_map(any::<u32>(), proptest::collection::vec(any::<u8>(), 0..20), 0..8)) {
                let fields: Vec<(u32, &[u8])> = tags.iter().map(|(tag, data)| (*tag, data.as_slice())).collect();
                let mut buf = BytesMut::new();
                put_tagged_fields(&mut buf, &fields);
                let (rest, decoded) = tagged_fields(&buf).unwrap();
                prop_assert!(rest.is_empty());
                prop_assert_eq!(decoded, fields);
            }

            #[test]
            fn decoders_never_panic_on_garbage(input in proptest::collection::vec(any::<u8>(), 0..64), flexible in any::<bool>()) {
                let _ = varint(&input);
                let _ = varlong(&input);
                let _ = unsigned_varint(&input);
                let _ = nullable_str(&input, flexible);
                let _ = nullable_bytes_slice(&input, flexible);
                let _ = array_len(&input, flexible);
                let _ = tagged_fields(&input);
                let _ = array(&input, flexible, "a", i32);
            }
        }
    }
}
