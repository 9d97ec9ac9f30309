//! The row JSON encoding of interface.md, driven by Arrow types alone (every Fluss type maps to
//! a distinct Arrow type, so the segment's own schema is enough):
//! integers and floats as numbers; DECIMAL as a string with its scale (`"12.30"`); BYTES and
//! BINARY as standard base64; DATE `YYYY-MM-DD`; TIME `HH:MM:SS[.fff]`; TIMESTAMP
//! `YYYY-MM-DDTHH:MM:SS[.fff]`; TIMESTAMP_LTZ (an Arrow timestamp with a time zone) the same
//! with `Z`; MAP as an object; ARRAY as an array; ROW as an object; null as null.
//! Fractional seconds are printed only when non-zero, in groups of three digits (`.5` ms →
//! `.500`, 1 µs → `.000001`), like Java's `LocalTime.toString`.
//! A year outside 0000–9999 is printed signed, with at least four digits (ISO 8601's expanded
//! years: `+10000-01-01`, `-0001-12-31`). Conversion stores no such DATE, TIMESTAMP or
//! TIMESTAMP_LTZ value from JSON, but `_kafka_metadata.timestamp` holds the Kafka record's
//! timestamp, and Kafka accepts any CreateTime a producer sets.

use std::io::Write;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Date64Type, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type,
    Int8Type, Time32MillisecondType, Time32SecondType, Time64MicrosecondType, Time64NanosecondType,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
    UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, FieldRef, TimeUnit};
use base64::Engine;
use kafluss_convert::calendar::civil_from_days;

use super::ScanError;

/// Writes row `row` of `batch` as a JSON object `{"col":value,...}`.
pub fn write_row(out: &mut Vec<u8>, batch: &RecordBatch, row: usize) -> Result<(), ScanError> {
    write_columns(out, batch.schema().fields(), batch.columns(), row)
}

/// Writes row `row` of `columns` (named by `fields`) as a JSON object.
pub fn write_columns(
    out: &mut Vec<u8>,
    fields: &[FieldRef],
    columns: &[ArrayRef],
    row: usize,
) -> Result<(), ScanError> {
    out.push(b'{');
    for (index, (field, column)) in fields.iter().zip(columns).enumerate() {
        if index > 0 {
            out.push(b',');
        }
        write_string(out, field.name());
        out.push(b':');
        write_value(out, column, row)?;
    }
    out.push(b'}');
    Ok(())
}

fn write_string(out: &mut Vec<u8>, value: &str) {
    // serde_json's escaping is exact JSON; writing into a Vec cannot fail.
    serde_json::to_writer(&mut *out, value).expect("writing JSON into a Vec cannot fail");
}

fn write_display(out: &mut Vec<u8>, value: impl std::fmt::Display) {
    write!(out, "{value}").expect("writing into a Vec cannot fail");
}

fn write_float(out: &mut Vec<u8>, value: f64) {
    if value.is_finite() {
        serde_json::to_writer(&mut *out, &value).expect("writing JSON into a Vec cannot fail");
    } else {
        out.extend_from_slice(b"null");
    }
}

fn write_f32(out: &mut Vec<u8>, value: f32) {
    if value.is_finite() {
        // Shortest text that reads back as this f32 ("1.1", not "1.100000023841858").
        serde_json::to_writer(&mut *out, &value).expect("writing JSON into a Vec cannot fail");
    } else {
        out.extend_from_slice(b"null");
    }
}

/// Writes one value of `array` as JSON.
pub fn write_value(out: &mut Vec<u8>, array: &ArrayRef, row: usize) -> Result<(), ScanError> {
    write_value_dyn(out, array.as_ref(), row)
}

fn write_value_dyn(out: &mut Vec<u8>, array: &dyn Array, row: usize) -> Result<(), ScanError> {
    if array.is_null(row) {
        out.extend_from_slice(b"null");
        return Ok(());
    }
    match array.data_type() {
        DataType::Null => out.extend_from_slice(b"null"),
        DataType::Boolean => {
            let value = array.as_boolean().value(row);
            out.extend_from_slice(if value { b"true" } else { b"false" });
        }
        DataType::Int8 => write_display(out, array.as_primitive::<Int8Type>().value(row)),
        DataType::Int16 => write_display(out, array.as_primitive::<Int16Type>().value(row)),
        DataType::Int32 => write_display(out, array.as_primitive::<Int32Type>().value(row)),
        DataType::Int64 => write_display(out, array.as_primitive::<Int64Type>().value(row)),
        DataType::UInt8 => write_display(out, array.as_primitive::<UInt8Type>().value(row)),
        DataType::UInt16 => write_display(out, array.as_primitive::<UInt16Type>().value(row)),
        DataType::UInt32 => write_display(out, array.as_primitive::<UInt32Type>().value(row)),
        DataType::UInt64 => write_display(out, array.as_primitive::<UInt64Type>().value(row)),
        DataType::Float32 => write_f32(out, array.as_primitive::<Float32Type>().value(row)),
        DataType::Float64 => write_float(out, array.as_primitive::<Float64Type>().value(row)),
        DataType::Decimal128(_, scale) => {
            let value = array.as_primitive::<Decimal128Type>().value(row);
            out.push(b'"');
            write_decimal(out, value, *scale);
            out.push(b'"');
        }
        DataType::Utf8 => write_string(out, array.as_string::<i32>().value(row)),
        DataType::LargeUtf8 => write_string(out, array.as_string::<i64>().value(row)),
        DataType::Utf8View => write_string(out, array.as_string_view().value(row)),
        DataType::Binary => write_base64(out, array.as_binary::<i32>().value(row)),
        DataType::LargeBinary => write_base64(out, array.as_binary::<i64>().value(row)),
        DataType::BinaryView => write_base64(out, array.as_binary_view().value(row)),
        DataType::FixedSizeBinary(_) => write_base64(out, array.as_fixed_size_binary().value(row)),
        DataType::Date32 => {
            let days = array.as_primitive::<Date32Type>().value(row);
            out.push(b'"');
            write_date(out, i64::from(days));
            out.push(b'"');
        }
        DataType::Date64 => {
            let millis = array.as_primitive::<Date64Type>().value(row);
            out.push(b'"');
            write_date(out, millis.div_euclid(86_400_000));
            out.push(b'"');
        }
        DataType::Time32(TimeUnit::Second) => {
            let value = array.as_primitive::<Time32SecondType>().value(row);
            write_time_json(out, i64::from(value), 0);
        }
        DataType::Time32(TimeUnit::Millisecond) => {
            let value = array.as_primitive::<Time32MillisecondType>().value(row);
            write_time_json(out, i64::from(value), 3);
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            let value = array.as_primitive::<Time64MicrosecondType>().value(row);
            write_time_json(out, value, 6);
        }
        DataType::Time64(TimeUnit::Nanosecond) => {
            let value = array.as_primitive::<Time64NanosecondType>().value(row);
            write_time_json(out, value, 9);
        }
        DataType::Timestamp(unit, tz) => {
            let (value, digits) = match unit {
                TimeUnit::Second => (array.as_primitive::<TimestampSecondType>().value(row), 0),
                TimeUnit::Millisecond => (array.as_primitive::<TimestampMillisecondType>().value(row), 3),
                TimeUnit::Microsecond => (array.as_primitive::<TimestampMicrosecondType>().value(row), 6),
                TimeUnit::Nanosecond => (array.as_primitive::<TimestampNanosecondType>().value(row), 9),
            };
            out.push(b'"');
            write_timestamp(out, value, digits);
            if tz.is_some() {
                out.push(b'Z');
            }
            out.push(b'"');
        }
        DataType::List(_) => {
            let list = array.as_list::<i32>();
            write_array(out, list.value(row).as_ref())?;
        }
        DataType::LargeList(_) => {
            let list = array.as_list::<i64>();
            write_array(out, list.value(row).as_ref())?;
        }
        DataType::FixedSizeList(_, _) => {
            let list = array.as_fixed_size_list();
            write_array(out, list.value(row).as_ref())?;
        }
        DataType::Struct(fields) => {
            let row_array = array.as_struct();
            out.push(b'{');
            for (index, (field, column)) in fields.iter().zip(row_array.columns()).enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_string(out, field.name());
                out.push(b':');
                write_value_dyn(out, column.as_ref(), row)?;
            }
            out.push(b'}');
        }
        DataType::Map(_, _) => {
            let map = array.as_map();
            let offsets = map.value_offsets();
            let (start, end) = (offsets[row] as usize, offsets[row + 1] as usize);
            let keys = map.keys();
            let values = map.values();
            out.push(b'{');
            for (position, entry) in (start..end).enumerate() {
                if position > 0 {
                    out.push(b',');
                }
                write_map_key(out, keys.as_ref(), entry)?;
                out.push(b':');
                write_value_dyn(out, values.as_ref(), entry)?;
            }
            out.push(b'}');
        }
        other => return Err(ScanError::UnsupportedType(other.to_string())),
    }
    Ok(())
}

fn write_array(out: &mut Vec<u8>, elements: &dyn Array) -> Result<(), ScanError> {
    out.push(b'[');
    for index in 0..elements.len() {
        if index > 0 {
            out.push(b',');
        }
        write_value_dyn(out, elements, index)?;
    }
    out.push(b']');
    Ok(())
}

/// MAP keys are STRING in every Kafka-mapped table; any other key type is written as the JSON
/// text of the key, quoted, so the object stays valid JSON.
fn write_map_key(out: &mut Vec<u8>, keys: &dyn Array, entry: usize) -> Result<(), ScanError> {
    match keys.data_type() {
        DataType::Utf8 => write_string(out, keys.as_string::<i32>().value(entry)),
        DataType::LargeUtf8 => write_string(out, keys.as_string::<i64>().value(entry)),
        DataType::Utf8View => write_string(out, keys.as_string_view().value(entry)),
        _ => {
            let mut text = Vec::new();
            write_value_dyn(&mut text, keys, entry)?;
            write_string(out, &String::from_utf8_lossy(&text));
        }
    }
    Ok(())
}

fn write_base64(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
    out.extend_from_slice(encoded.as_bytes());
    out.push(b'"');
}

/// `unscaled × 10^-scale` as exact decimal text with exactly `scale` fraction digits.
pub fn write_decimal(out: &mut Vec<u8>, unscaled: i128, scale: i8) {
    if scale <= 0 {
        write_display(out, unscaled);
        for _ in 0..scale.unsigned_abs() {
            out.push(b'0');
        }
        return;
    }
    let scale = scale as usize;
    let digits = unscaled.unsigned_abs().to_string();
    if unscaled < 0 {
        out.push(b'-');
    }
    if digits.len() <= scale {
        out.extend_from_slice(b"0.");
        out.extend(std::iter::repeat_n(b'0', scale - digits.len()));
        out.extend_from_slice(digits.as_bytes());
    } else {
        let (whole, fraction) = digits.split_at(digits.len() - scale);
        out.extend_from_slice(whole.as_bytes());
        out.push(b'.');
        out.extend_from_slice(fraction.as_bytes());
    }
}

/// `YYYY-MM-DD`, or `±YYYYY-MM-DD` for a year outside 0000–9999.
fn write_date(out: &mut Vec<u8>, days: i64) {
    let (year, month, day) = civil_from_days(days);
    if (0..=9999).contains(&year) {
        write!(out, "{year:04}-{month:02}-{day:02}")
    } else {
        write!(out, "{year:+05}-{month:02}-{day:02}")
    }
    .expect("writing into a Vec cannot fail");
}

/// Writes `HH:MM:SS` plus the non-zero fraction of `subsecond` (which has `digits` digits).
fn write_clock(out: &mut Vec<u8>, seconds_of_day: i64, subsecond: i64, digits: u32) {
    let (hours, minutes, seconds) = (
        seconds_of_day / 3_600,
        seconds_of_day / 60 % 60,
        seconds_of_day % 60,
    );
    write!(out, "{hours:02}:{minutes:02}:{seconds:02}").expect("writing into a Vec cannot fail");
    if subsecond == 0 || digits == 0 {
        return;
    }
    // Scale to nanoseconds, then drop trailing zero groups of three digits.
    let mut nanos = subsecond * 10i64.pow(9 - digits);
    let mut width = 9;
    while width > 3 && nanos % 1_000 == 0 {
        nanos /= 1_000;
        width -= 3;
    }
    write!(out, ".{nanos:0width$}").expect("writing into a Vec cannot fail");
}

fn write_time_json(out: &mut Vec<u8>, value: i64, digits: u32) {
    let per_second = 10i64.pow(digits);
    out.push(b'"');
    write_clock(
        out,
        value.div_euclid(per_second),
        value.rem_euclid(per_second),
        digits,
    );
    out.push(b'"');
}

/// `value` units of 10^-digits seconds since the epoch → `YYYY-MM-DDTHH:MM:SS[.fff]`.
fn write_timestamp(out: &mut Vec<u8>, value: i64, digits: u32) {
    let per_second = 10i64.pow(digits);
    let seconds = value.div_euclid(per_second);
    let subsecond = value.rem_euclid(per_second);
    write_date(out, seconds.div_euclid(86_400));
    out.push(b'T');
    write_clock(out, seconds.rem_euclid(86_400), subsecond, digits);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decimal(unscaled: i128, scale: i8) -> String {
        let mut out = Vec::new();
        write_decimal(&mut out, unscaled, scale);
        String::from_utf8(out).unwrap()
    }

    fn timestamp(value: i64, digits: u32) -> String {
        let mut out = Vec::new();
        write_timestamp(&mut out, value, digits);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn decimals_keep_their_scale() {
        assert_eq!(decimal(1230, 2), "12.30");
        assert_eq!(decimal(-5, 3), "-0.005");
        assert_eq!(decimal(0, 2), "0.00");
        assert_eq!(decimal(42, 0), "42");
        assert_eq!(decimal(i128::MAX, 38), "1.70141183460469231731687303715884105727");
    }

    #[test]
    fn dates_cover_leap_years_and_pre_epoch() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(civil_from_days(-719_528), (0, 1, 1));
    }

    #[test]
    fn timestamps_print_fractions_in_groups_of_three() {
        assert_eq!(timestamp(0, 3), "1970-01-01T00:00:00");
        assert_eq!(timestamp(1_500, 3), "1970-01-01T00:00:01.500");
        assert_eq!(timestamp(-1, 3), "1969-12-31T23:59:59.999");
        assert_eq!(timestamp(1_000_001, 6), "1970-01-01T00:00:01.000001");
        assert_eq!(timestamp(123_456_789, 9), "1970-01-01T00:00:00.123456789");
        assert_eq!(timestamp(1_709_210_096_000, 3), "2024-02-29T12:34:56");
    }

    #[test]
    fn years_outside_0000_to_9999_are_signed() {
        assert_eq!(timestamp(-62_167_219_200_000, 3), "0000-01-01T00:00:00");
        assert_eq!(timestamp(-62_167_219_200_001, 3), "-0001-12-31T23:59:59.999");
        assert_eq!(timestamp(253_402_300_799_999, 3), "9999-12-31T23:59:59.999");
        assert_eq!(timestamp(253_402_300_800_000, 3), "+10000-01-01T00:00:00");
        assert_eq!(timestamp(i64::MIN, 3), "-292275055-05-16T16:47:04.192");
        assert_eq!(timestamp(i64::MAX, 3), "+292278994-08-17T07:12:55.807");
    }
}
