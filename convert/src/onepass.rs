//! One pass from the bytes of a flat JSON object into the columns of its row, for the common
//! case: every member's key is one of the row's fields (each at most once, no escapes in the
//! key) and every value converts by its field's type rule without a refusal. Keys are matched
//! against the plan while scanning, each number is parsed once from its text by its column's
//! rule, strings without escapes are copied from the input, and each value is appended to its
//! column as soon as it is read; nothing is put on a tape.
//!
//! On anything else (an unknown or repeated member, an escape, a container value, a value its
//! rule refuses, any syntax error, invalid UTF-8) the values this record appended are taken
//! back (the scalar columns can be cut back: `Column::truncate_scalar`) and the caller converts
//! the record on the two-pass path (`json` parser, then `writer`), which produces the rows,
//! rescue JSON and errors of behaviour.md. A record accepted here is valid strict JSON whose
//! root has distinct known keys, for which the two-pass path stores the same values.

use crate::builders::{Column, Data, TemporalKind};
use crate::json::{number_end, skip_ws, string_stop, string_stop_ascii, MAX_CONTAINER_MEMBERS};
use crate::plan::{FieldShape, RowShape, Shape};
use crate::values::{self, digit_run, short_double, short_float, short_number, SHORT_DIGITS};

/// What the one-pass path knows of one field of a row, computed once per plan
/// (`RowShape::one_pass`): its key as the bytes a member's key starts with. Its type rule is
/// its column's (`Data`).
#[derive(Debug)]
pub(crate) struct FieldRule {
    key: Option<Key>,
}

/// A field's name and closing quote, when the name needs no escape in JSON (no `"`, `\`,
/// control characters): a key that starts with these bytes is that name. Names of up to 14
/// bytes compare as one masked 16-byte word (with the `:` that usually follows) when 16 bytes
/// of input are there.
#[derive(Debug)]
struct Key {
    bytes: Vec<u8>,
    /// `bytes` and `:`, little-endian, when they fit 16 bytes.
    word: u128,
    /// The bytes of `word` that hold `bytes`.
    mask: u128,
    /// The bytes of `word` that hold `bytes` and the `:`.
    colon_mask: u128,
}

impl Key {
    fn new(bytes: Vec<u8>) -> Self {
        let (mut word, mut mask, mut colon_mask) = (0u128, 0u128, 0u128);
        if bytes.len() < 16 {
            for (n, &c) in bytes.iter().chain(b":").enumerate() {
                word |= u128::from(c) << (8 * n);
                colon_mask |= 0xff << (8 * n);
                if n < bytes.len() {
                    mask |= 0xff << (8 * n);
                }
            }
        }
        Self {
            bytes,
            word,
            mask,
            colon_mask,
        }
    }

    /// Whether `b` holds this key (with its closing quote) at `at`: the index after it, and
    /// whether that is after a `:` right behind the quote.
    #[inline(always)]
    fn at(&self, b: &[u8], at: usize) -> Option<(usize, bool)> {
        let n = self.bytes.len();
        if n < 16 {
            if let Some(window) = b.get(at..at + 16) {
                let Ok(window) = <[u8; 16]>::try_from(window) else {
                    return None;
                };
                let x = u128::from_le_bytes(window) ^ self.word;
                if x & self.colon_mask == 0 {
                    return Some((at + n + 1, true));
                }
                return (x & self.mask == 0).then_some((at + n, false));
            }
        }
        (b.get(at..at + n) == Some(&self.bytes[..])).then_some((at + n, false))
    }
}

/// Per field of a row, what the one-pass path compares (`FieldRule`). `None` when the row has
/// a field of a type the one-pass path does not convert (containers, BINARY/BYTES). Computed
/// once per plan, not per batch.
pub(crate) fn one_pass_rules(names: &[String], fields: &[FieldShape]) -> Option<Vec<FieldRule>> {
    names
        .iter()
        .zip(fields)
        .map(|(name, field)| {
            match field.shape {
                Shape::Boolean
                | Shape::Int8
                | Shape::Int16
                | Shape::Int32
                | Shape::Int64
                | Shape::Float32
                | Shape::Float64
                | Shape::Decimal { .. }
                | Shape::Utf8 { .. }
                | Shape::Date32
                | Shape::Time { .. }
                | Shape::Timestamp { .. } => {}
                Shape::Binary
                | Shape::FixedBinary(_)
                | Shape::List { .. }
                | Shape::Map { .. }
                | Shape::Row(_) => return None,
            }
            let plain = name.bytes().all(|c| c >= 0x20 && c != b'"' && c != b'\\');
            let key = plain.then(|| Key::new([name.as_bytes(), b"\""].concat()));
            Some(FieldRule { key })
        })
        .collect()
}

/// What the one-pass path keeps across the records of a batch.
pub(crate) struct OnePass {
    /// One bit per field: whether the record being read has appended its value. All clear
    /// between records.
    seen: Vec<u64>,
}

impl OnePass {
    /// The state for rows of `shape`, if every field has a type this path converts (scalars
    /// other than BINARY/BYTES); rows with containers or binary values take the two-pass path.
    pub(crate) fn new(shape: &RowShape) -> Option<Self> {
        shape.one_pass.as_ref()?;
        Some(Self {
            seen: vec![0; shape.fields.len().div_ceil(64)],
        })
    }

    /// Writes the flat JSON object `input` into `columns` (one per field of `shape`) in one
    /// pass. `false`: nothing was appended; convert the record on the two-pass path.
    pub(crate) fn write_row(&mut self, input: &[u8], shape: &RowShape, columns: &mut [Column<'_>]) -> bool {
        let Some(rules) = shape.one_pass.as_deref() else {
            return false;
        };
        let seen = &mut self.seen;
        if seen.len() != columns.len().div_ceil(64) {
            seen.clear();
            seen.resize(columns.len().div_ceil(64), 0);
        }
        let members = scan(input, shape, rules, columns, seen);
        match members {
            // Every field has its value (the members are distinct fields).
            Some(n) if n == columns.len() => {}
            // The fields without a member are null.
            Some(_) => {
                for (field, column) in columns.iter_mut().enumerate() {
                    if !is_set(seen, field) {
                        column.append_null();
                    }
                }
            }
            // Take back the values this record appended: one per field seen.
            None => {
                for (field, column) in columns.iter_mut().enumerate() {
                    if is_set(seen, field) {
                        column.truncate_scalar(column.len() - 1);
                    }
                }
            }
        }
        seen.fill(0);
        members.is_some()
    }
}

fn is_set(bits: &[u64], n: usize) -> bool {
    bits.get(n / 64).is_some_and(|w| w & (1 << (n % 64)) != 0)
}

/// A JSON number at `i` that is an integer of at most 18 digits (`-?(0|[1-9][0-9]*)` not
/// followed by a fraction or exponent), and the index after it; `None` for anything else,
/// which the caller parses the general way. The integer case of `values::short_number`, kept
/// apart because it is the hot one: built on `short_number` the flat row counts 1,505
/// instructions instead of 1,483.
#[inline(always)]
fn short_integer(b: &[u8], i: usize) -> Option<(i64, usize)> {
    let negative = b.get(i) == Some(&b'-');
    let start = i + usize::from(negative);
    let (magnitude, j) = digit_run(b, start, 0, SHORT_DIGITS)?;
    let len = j - start;
    if len == 0 || (len > 1 && b.get(start) == Some(&b'0')) {
        return None;
    }
    if let Some(b'.' | b'e' | b'E') = b.get(j) {
        return None;
    }
    // At most 18 digits: below 10^18, so it fits an i64.
    let magnitude = magnitude as i64;
    Some((if negative { -magnitude } else { magnitude }, j))
}

/// A short number with no more fraction digits than `scale` and no more integer digits than
/// `precision - scale`: its unscaled value and the index after it (the short rule of
/// `values::decimal`, applied while scanning). `None` for anything else, which the caller
/// parses the general way.
#[inline(always)]
fn short_decimal(b: &[u8], i: usize, precision: u8, scale: u8) -> Option<(i128, usize)> {
    let n = short_number(b, i)?;
    if n.fraction_digits > u32::from(scale) || n.integer_digits + u32::from(scale) > u32::from(precision) {
        return None;
    }
    let unscaled = i128::from(n.digits) * 10i128.pow(u32::from(scale) - n.fraction_digits);
    Some((if n.negative { -unscaled } else { unscaled }, n.end))
}

/// The members of the root object into `columns`, marking in `seen` each field whose value
/// was appended: the number of members, or `None` at the first thing this path leaves to the
/// two-pass one. Every byte it accepts outside strings is ASCII, and it checks that each
/// string (key or value) is UTF-8, so an accepted value is UTF-8 as a whole.
#[inline]
fn scan(
    b: &[u8],
    shape: &RowShape,
    rules: &[FieldRule],
    columns: &mut [Column<'_>],
    seen: &mut [u64],
) -> Option<usize> {
    u32::try_from(b.len()).ok()?;
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(b, i + 1);
    let mut position = 0usize;
    if b.get(i) == Some(&b'}') {
        i += 1;
    } else {
        // Whitespace between tokens is rare: each step reads the next byte once and skips
        // whitespace only where it finds some.
        'members: loop {
            if position >= MAX_CONTAINER_MEMBERS {
                return None;
            }
            if b.get(i) != Some(&b'"') {
                i = skip_ws(b, i);
                if b.get(i) != Some(&b'"') {
                    return None;
                }
            }
            let start = i + 1;
            // Producers usually write members in column order: try the field at this
            // position by its bytes first, then scan the key and look it up.
            let (field, after, colon) = match rules
                .get(position)
                .and_then(|rule| rule.key.as_ref()?.at(b, start))
            {
                Some((after, colon)) => (position, after, colon),
                None => {
                    let stop = string_stop(b, start);
                    if b.get(stop) != Some(&b'"') {
                        return None;
                    }
                    let key = std::str::from_utf8(b.get(start..stop)?).ok()?;
                    (shape.lookup(key, position)?, stop + 1, false)
                }
            };
            let bits = seen.get_mut(field / 64)?;
            let bit = 1u64 << (field % 64);
            if *bits & bit != 0 {
                return None;
            }
            i = after;
            if !colon {
                i = skip_ws(b, i);
                if b.get(i) != Some(&b':') {
                    return None;
                }
                i += 1;
            }
            i = value(b, i, columns.get_mut(field)?)?;
            *bits |= bit;
            position += 1;
            loop {
                match b.get(i) {
                    Some(b',') => {
                        i += 1;
                        continue 'members;
                    }
                    Some(b'}') => {
                        i += 1;
                        break 'members;
                    }
                    Some(b' ' | b'\n' | b'\r' | b'\t') => i = skip_ws(b, i),
                    _ => return None,
                }
            }
        }
    }
    (skip_ws(b, i) == b.len()).then_some(position)
}

/// The value at `i` (after any whitespace) converted by `column`'s rule and appended to it,
/// and the index after it; `None` (nothing appended) when this path leaves it to the other.
#[inline(always)]
fn value(b: &[u8], i: usize, column: &mut Column<'_>) -> Option<usize> {
    match b.get(i)? {
        b' ' | b'\n' | b'\r' | b'\t' => spaced_value(b, i, column),
        b'n' => {
            let end = literal(b, i, b"null")?;
            column.append_null();
            Some(end)
        }
        b't' => match &mut column.data {
            Data::Boolean(c) => {
                let end = literal(b, i, b"true")?;
                c.append_value(true);
                Some(end)
            }
            _ => None,
        },
        b'f' => match &mut column.data {
            Data::Boolean(c) => {
                let end = literal(b, i, b"false")?;
                c.append_value(false);
                Some(end)
            }
            _ => None,
        },
        b'"' => {
            let start = i + 1;
            let (stop, ascii) = string_stop_ascii(b, start);
            if b.get(stop) != Some(&b'"') {
                return None;
            }
            let body = b.get(start..stop)?;
            match &mut column.data {
                Data::Utf8 { builder, max_chars } => {
                    // An ASCII body is UTF-8, of one character per byte.
                    let chars = if ascii {
                        body.len()
                    } else {
                        std::str::from_utf8(body).ok()?.chars().count()
                    };
                    if max_chars.is_some_and(|n| chars > n as usize) {
                        return None;
                    }
                    builder.append_utf8(body);
                }
                _ => string_value(std::str::from_utf8(body).ok()?, column)?,
            }
            Some(stop + 1)
        }
        b'-' | b'0'..=b'9' => {
            // `Some(end)`: read in its short form (`Some(None)`: and refused by its range);
            // `None`: to be read the general way.
            let short = match &mut column.data {
                Data::Int8(c) => short_integer(b, i).map(|(v, end)| {
                    c.append_value(i8::try_from(v).ok()?);
                    Some(end)
                }),
                Data::Int16(c) => short_integer(b, i).map(|(v, end)| {
                    c.append_value(i16::try_from(v).ok()?);
                    Some(end)
                }),
                Data::Int32(c) => short_integer(b, i).map(|(v, end)| {
                    c.append_value(i32::try_from(v).ok()?);
                    Some(end)
                }),
                Data::Int64(c) => short_integer(b, i).map(|(v, end)| {
                    c.append_value(v);
                    Some(end)
                }),
                Data::Decimal {
                    builder,
                    precision,
                    scale,
                } => short_decimal(b, i, *precision, *scale).map(|(v, end)| {
                    builder.append_value(v);
                    Some(end)
                }),
                Data::Float64(c) => short_double(b, i).map(|(v, end)| {
                    c.append_value(v);
                    Some(end)
                }),
                Data::Float32(c) => short_float(b, i).map(|(v, end)| {
                    c.append_value(v);
                    Some(end)
                }),
                _ => None,
            };
            match short {
                Some(end) => end,
                None => number_value(b, i, column),
            }
        }
        _ => None,
    }
}

/// `value` after whitespace (out of line: rare, and it breaks the recursion; after the
/// skipped whitespace comes another byte, so it is one call deep at most).
#[inline(never)]
fn spaced_value(b: &[u8], i: usize, column: &mut Column<'_>) -> Option<usize> {
    value(b, skip_ws(b, i), column)
}

/// A string's body `s` converted by a rule other than STRING/CHAR and appended.
#[inline(never)]
fn string_value(s: &str, column: &mut Column<'_>) -> Option<()> {
    match &mut column.data {
        Data::Decimal {
            builder,
            precision,
            scale,
        } => builder.append_value(values::decimal(s, *precision, *scale, true).ok()?),
        Data::Date32(c) => c.append_value(values::date(s).ok()?),
        Data::Temporal {
            values: column_values,
            kind,
            precision,
            unit,
        } => {
            let nanos = match kind {
                TemporalKind::Time => values::time(s, *precision).map(i128::from),
                TemporalKind::Timestamp => values::timestamp(s, *precision),
                TemporalKind::TimestampLtz => values::timestamp_ltz(s, *precision),
            }
            .ok()?;
            // The type name is only part of the message of a refusal, which is dropped here.
            column_values.append_value(values::nanos_to_unit(nanos, *unit, "").ok()?);
        }
        _ => return None,
    }
    Some(())
}

/// The number at `i` converted the general way (its token's text by the type rule) and
/// appended, and the index after it.
#[inline(never)]
fn number_value(b: &[u8], i: usize, column: &mut Column<'_>) -> Option<usize> {
    let end = number_end(b, i)?;
    let t = std::str::from_utf8(b.get(i..end)?).ok()?;
    // Type names are only part of the messages of refusals, which are dropped here.
    match &mut column.data {
        Data::Int8(c) => c.append_value(values::integer(t, i8::MIN.into(), i8::MAX.into(), "").ok()? as i8),
        Data::Int16(c) => {
            c.append_value(values::integer(t, i16::MIN.into(), i16::MAX.into(), "").ok()? as i16)
        }
        Data::Int32(c) => {
            c.append_value(values::integer(t, i32::MIN.into(), i32::MAX.into(), "").ok()? as i32)
        }
        Data::Int64(c) => c.append_value(values::integer(t, i64::MIN, i64::MAX, "").ok()?),
        Data::Float32(c) => c.append_value(values::float(t).ok()?),
        Data::Float64(c) => c.append_value(values::double(t).ok()?),
        Data::Decimal {
            builder,
            precision,
            scale,
        } => builder.append_value(values::decimal(t, *precision, *scale, false).ok()?),
        Data::Temporal {
            values: column_values,
            kind: TemporalKind::TimestampLtz,
            precision,
            unit,
        } => {
            let nanos = values::epoch_millis(t, *precision).ok()?;
            column_values.append_value(values::nanos_to_unit(nanos, *unit, "").ok()?);
        }
        _ => return None,
    }
    Some(end)
}

/// The index after `word` if `b` holds it at `i`.
#[inline]
fn literal(b: &[u8], i: usize, word: &[u8]) -> Option<usize> {
    (b.get(i..i + word.len())? == word).then_some(i + word.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::row_columns;
    use crate::mapping::{KafkaMapping, SystemColumns, ValueLayout, ValueType};
    use crate::plan::{ConversionPlan, ValuePlan};
    use crate::{DataType, Field, FieldType, Schema};

    fn plan() -> ConversionPlan {
        let col = |name: &str, t| Field::new(name, FieldType::nullable(t));
        let schema = Schema::new(vec![
            col("id", DataType::BigInt),
            col("name", DataType::String),
            col(
                "amount",
                DataType::Decimal {
                    precision: 18,
                    scale: 2,
                },
            ),
            col("ok", DataType::Boolean),
            col("code", DataType::Char(2)),
            col("day", DataType::Date),
            col("at", DataType::TimestampLtz(3)),
            col("small", DataType::TinyInt),
            col("ratio", DataType::Double),
        ]);
        let mapping = KafkaMapping {
            value_type: ValueType::ParseJson,
            layout: ValueLayout::Flat,
            key_binary: false,
            system: SystemColumns::default(),
        };
        ConversionPlan::compile(&schema, &mapping).expect("plan")
    }

    /// Whether `value` is written in one pass, and the number of rows each column then has.
    fn one_pass(value: &str) -> (bool, Vec<usize>) {
        let plan = plan();
        let ValuePlan::FlatJson(shape) = &plan.value else {
            panic!("flat plan")
        };
        let mut state = OnePass::new(shape).expect("one-pass types");
        let mut columns = row_columns(shape, 4);
        let written = state.write_row(value.as_bytes(), shape, &mut columns);
        (written, columns.iter().map(Column::len).collect())
    }

    #[test]
    fn the_common_case_is_written_in_one_pass() {
        for value in [
            r#"{"id":1,"name":"x","amount":1.50,"ok":true,"code":"ab","day":"2024-02-29","at":5,"small":-128,"ratio":1e2}"#,
            r#" { "ratio" : -0.5 , "id" : -9223372036854775808 , "name" : "é😀" } "#,
            r#"{"amount":"12.3","at":"2024-02-29T12:00:00Z","ok":false,"name":null}"#,
            "{}",
            "\t{\"id\":null}\r\n",
        ] {
            assert_eq!(one_pass(value), (true, vec![1; 9]), "{value}");
        }
    }

    #[test]
    fn a_refused_record_takes_back_what_it_appended() {
        use arrow_array::cast::AsArray;
        use arrow_array::types::{Int64Type, Int8Type};
        use arrow_array::Array;
        let plan = plan();
        let ValuePlan::FlatJson(shape) = &plan.value else {
            panic!("flat plan")
        };
        let mut state = OnePass::new(shape).expect("one-pass types");
        let mut columns = row_columns(shape, 4);
        assert!(state.write_row(br#"{"id":1,"name":"a","ok":true,"small":1}"#, shape, &mut columns));
        // Refused at its last member, after four values were appended.
        let refused = br#"{"id":2,"name":"bb","ok":false,"small":2,"code":"abc"}"#;
        assert!(!state.write_row(refused, shape, &mut columns));
        assert!(state.write_row(br#"{"name":"c","id":3}"#, shape, &mut columns));
        let arrays: Vec<_> = columns.into_iter().map(|c| c.finish().expect("finish")).collect();
        assert!(arrays.iter().all(|a| a.len() == 2));
        let ids: Vec<_> = arrays[0].as_primitive::<Int64Type>().iter().collect();
        assert_eq!(ids, [Some(1), Some(3)]);
        let names: Vec<_> = arrays[1].as_string::<i32>().iter().collect();
        assert_eq!(names, [Some("a"), Some("c")]);
        let oks: Vec<_> = arrays[3].as_boolean().iter().collect();
        assert_eq!(oks, [Some(true), None]);
        let small: Vec<_> = arrays[7].as_primitive::<Int8Type>().iter().collect();
        assert_eq!(small, [Some(1), None]);
        assert_eq!(arrays[4].null_count(), 2);
    }

    #[test]
    fn everything_else_is_left_to_the_two_pass_path() {
        for value in [
            // Unknown, repeated or escaped keys.
            r#"{"id":1,"other":2}"#,
            r#"{"id":1,"id":1}"#,
            r#"{"i\u0064":1}"#,
            // Values the rules refuse (rescued or failing on the two-pass path).
            r#"{"id":1.5}"#,
            r#"{"small":128}"#,
            r#"{"amount":1.555}"#,
            r#"{"code":"abc"}"#,
            r#"{"ok":1}"#,
            r#"{"name":5}"#,
            r#"{"day":"2023-02-29"}"#,
            r#"{"ratio":1e309}"#,
            // Escapes in values and containers.
            r#"{"name":"a\nb"}"#,
            r#"{"name":["a"]}"#,
            r#"{"name":{}}"#,
            // Syntax, roots and bytes.
            r#"{"id":1,}"#,
            r#"{"id":01}"#,
            r#"{"id":1} x"#,
            r#"{"id":tru}"#,
            "[1]",
            "",
            "{\"name\":\"\u{1}\"}",
        ] {
            assert_eq!(one_pass(value), (false, vec![0; 9]), "{value}");
        }
        let plan = plan();
        let ValuePlan::FlatJson(shape) = &plan.value else {
            panic!("flat plan")
        };
        let mut columns = row_columns(shape, 1);
        let mut state = OnePass::new(shape).expect("one-pass types");
        assert!(!state.write_row(b"{\"name\":\"\xff\"}", shape, &mut columns));
    }
}
