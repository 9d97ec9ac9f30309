//! Every type rule of behaviour.md "Conversion of one record", table-driven: each case is a
//! Fluss type, a JSON member value, and either the value read back from Arrow or a refusal.
//! A refusal is checked twice: with `_kafka_rescue` (field null, member rescued verbatim) and
//! without (the record fails, naming the path and a reason). Every case is converted on the
//! one-pass path and on the two-pass path, which must agree.

mod common;

use common::*;
use kafluss_convert::{ConversionPlan, ConvertError, DataType, Field, JsonScratch, KafkaRecord};

enum Want {
    Stored(&'static str),
    Refused(&'static str),
}
use Want::{Refused, Stored};

/// `value` converted on the one-pass path (where it applies) and on the two-pass path: the
/// row, or the error, which must be the same.
fn convert_both(plan: &ConversionPlan, value: &str) -> Result<String, ConvertError> {
    let one = convert_one(plan, value);
    let two = plan
        .convert_batch_with(
            &mut JsonScratch::two_pass(),
            [KafkaRecord::with_value(value.as_bytes())],
        )
        .map(|batch| render_row(&batch, 0));
    assert_eq!(one, two, "{value}: one-pass and two-pass paths differ");
    one
}

fn check(data_type: DataType, cases: &[(&str, Want)]) {
    let with_rescue = flat_plan(vec![
        col("v", data_type.clone()),
        col("_kafka_rescue", DataType::String),
    ]);
    let without_rescue = flat_plan(vec![col("v", data_type.clone())]);
    for (json, want) in cases {
        let value = format!(r#"{{"v":{json}}}"#);
        let got = convert_both(&with_rescue, &value).unwrap_or_else(|e| panic!("{data_type} {json}: {e}"));
        match want {
            Stored(cell) => {
                let expected = format!(r#"{{"v":{cell},"_kafka_rescue":null}}"#);
                assert_eq!(got, expected, "{data_type} {json}");
                let plain = convert_both(&without_rescue, &value)
                    .unwrap_or_else(|e| panic!("{data_type} {json}: {e}"));
                assert_eq!(plain, format!(r#"{{"v":{cell}}}"#), "{data_type} {json}");
            }
            Refused(reason) => {
                let rescue = quote(&format!(r#"{{"v":{json}}}"#));
                let expected = format!(r#"{{"v":null,"_kafka_rescue":{rescue}}}"#);
                assert_eq!(got, expected, "{data_type} {json}");
                let err = convert_both(&without_rescue, &value)
                    .expect_err(&format!("{data_type} {json} must be refused"));
                assert_eq!(err.record_index, 0);
                assert_eq!(err.path, "v", "{data_type} {json}");
                assert!(
                    err.reason.contains(reason),
                    "{data_type} {json}: reason {:?} lacks {reason:?}",
                    err.reason
                );
            }
        }
    }
}

#[test]
fn boolean() {
    check(
        DataType::Boolean,
        &[
            ("true", Stored("true")),
            ("false", Stored("false")),
            ("null", Stored("null")),
            ("1", Refused("expected BOOLEAN, got number 1")),
            ("\"true\"", Refused("expected BOOLEAN, got string \"true\"")),
            ("[]", Refused("got array")),
        ],
    );
}

#[test]
fn integers_with_limits() {
    check(
        DataType::TinyInt,
        &[
            ("127", Stored("127")),
            ("-128", Stored("-128")),
            ("-0", Stored("0")),
            ("128", Refused("out of range for TINYINT")),
            ("-129", Refused("out of range for TINYINT")),
            ("1.0", Refused("non-integer number 1.0")),
            ("1e2", Refused("non-integer")),
            ("\"1\"", Refused("expected TINYINT, got string \"1\"")),
        ],
    );
    check(
        DataType::SmallInt,
        &[
            ("32767", Stored("32767")),
            ("-32768", Stored("-32768")),
            ("32768", Refused("out of range for SMALLINT")),
            ("-32769", Refused("out of range")),
        ],
    );
    check(
        DataType::Int,
        &[
            ("2147483647", Stored("2147483647")),
            ("-2147483648", Stored("-2147483648")),
            ("2147483648", Refused("out of range for INT")),
            ("-2147483649", Refused("out of range for INT")),
            ("true", Refused("expected INT, got boolean true")),
        ],
    );
    check(
        DataType::BigInt,
        &[
            ("9223372036854775807", Stored("9223372036854775807")),
            ("-9223372036854775808", Stored("-9223372036854775808")),
            ("9223372036854775808", Refused("out of range for BIGINT")),
            ("-9223372036854775809", Refused("out of range")),
            ("123456789012345678901234567890", Refused("out of range")),
            ("0.5", Refused("non-integer")),
        ],
    );
}

#[test]
fn floating_point_from_token_text() {
    check(
        DataType::Float,
        &[
            ("1.5", Stored("1.5")),
            ("0.1", Stored("0.1")),
            ("1", Stored("1.0")),
            ("-0.0", Stored("-0.0")),
            ("3.4028235e38", Stored("3.4028235e38")),
            ("1e-50", Stored("0.0")),
            ("3.5e38", Refused("out of range for FLOAT")),
            ("\"1.5\"", Refused("expected FLOAT, got string")),
        ],
    );
    check(
        DataType::Double,
        &[
            ("0.1", Stored("0.1")),
            ("-0.0", Stored("-0.0")),
            ("-0", Stored("-0.0")),
            ("1.7976931348623157e308", Stored("1.7976931348623157e308")),
            ("5e-324", Stored("5e-324")),
            ("1e-400", Stored("0.0")),
            ("12345678901234567890123", Stored("1.2345678901234568e22")),
            ("1e309", Refused("number 1e309 is out of range for DOUBLE")),
            ("-1e309", Refused("out of range for DOUBLE")),
            ("false", Refused("expected DOUBLE, got boolean false")),
        ],
    );
}

#[test]
fn decimals_exact_never_rounded() {
    let d = |precision, scale| DataType::Decimal { precision, scale };
    check(
        d(5, 2),
        &[
            ("999.99", Stored("\"999.99\"")),
            ("-999.99", Stored("\"-999.99\"")),
            ("12.5", Stored("\"12.50\"")),
            ("\"12.5\"", Stored("\"12.50\"")),
            ("\"-0.01\"", Stored("\"-0.01\"")),
            ("1.10000", Stored("\"1.10\"")),
            ("1e2", Stored("\"100.00\"")),
            ("0", Stored("\"0.00\"")),
            ("1000", Refused("more than 3 integer digits")),
            ("0.001", Refused("more than 2 fraction digits")),
            ("\"1.005\"", Refused("never rounded")),
            ("\"abc\"", Refused("expected DECIMAL(5, 2)")),
            ("\"\"", Refused("expected DECIMAL(5, 2)")),
            ("true", Refused("expected DECIMAL(5, 2), got boolean true")),
        ],
    );
    check(
        d(38, 0),
        &[
            (
                "99999999999999999999999999999999999999",
                Stored("\"99999999999999999999999999999999999999\""),
            ),
            (
                "-99999999999999999999999999999999999999",
                Stored("\"-99999999999999999999999999999999999999\""),
            ),
            ("1e38", Refused("integer digits")),
            ("0.5", Refused("fraction digits")),
        ],
    );
    check(
        d(38, 38),
        &[
            ("0.1", Stored("\"0.10000000000000000000000000000000000000\"")),
            ("1", Refused("more than 0 integer digits")),
        ],
    );
}

#[test]
fn strings_and_chars() {
    check(
        DataType::String,
        &[
            ("\"x\"", Stored("\"x\"")),
            ("\"\"", Stored("\"\"")),
            ("\"\\u00e9\\ud83d\\ude00\"", Stored("\"é😀\"")),
            ("\"a\\\"b\"", Stored("\"a\\\"b\"")),
            ("1", Refused("expected STRING, got number 1")),
            ("{}", Refused("expected STRING, got object")),
        ],
    );
    check(
        DataType::Char(3),
        &[
            ("\"abc\"", Stored("\"abc\"")),
            ("\"äöü\"", Stored("\"äöü\"")),
            ("\"ab\"", Stored("\"ab\"")),
            ("\"abcd\"", Refused("4 code points is longer than CHAR(3)")),
        ],
    );
}

#[test]
fn bytes_and_binary_from_base64() {
    check(
        DataType::Bytes,
        &[
            ("\"AQID\"", Stored("b64:AQID")),
            ("\"AQ==\"", Stored("b64:AQ==")),
            ("\"\"", Stored("b64:")),
            ("\"AQI\"", Refused("standard Base64")),
            ("\"AQ-_\"", Refused("standard Base64")),
            ("\"!!\"", Refused("standard Base64")),
            ("1", Refused("expected BYTES")),
        ],
    );
    check(
        DataType::Binary(2),
        &[
            ("\"AQI=\"", Stored("b64:AQI=")),
            ("\"AQID\"", Refused("has 3 bytes, BINARY(2) needs exactly 2")),
            ("\"AQ==\"", Refused("has 1 bytes")),
        ],
    );
}

#[test]
fn dates_with_leap_days() {
    check(
        DataType::Date,
        &[
            ("\"1970-01-01\"", Stored("d0")),
            ("\"2024-02-29\"", Stored("d19782")),
            ("\"2000-02-29\"", Stored("d11016")),
            ("\"1969-12-31\"", Stored("d-1")),
            ("\"2023-02-29\"", Refused("expected DATE yyyy-MM-dd")),
            ("\"1900-02-29\"", Refused("expected DATE")),
            ("\"0000-01-01\"", Stored("d-719528")),
            ("\"9999-12-31\"", Stored("d2932896")),
            ("\"10000-01-01\"", Refused("expected DATE yyyy-MM-dd")),
            ("\"2024-02-29T00:00\"", Refused("expected DATE")),
            ("19782", Refused("expected DATE, got number")),
        ],
    );
}

#[test]
fn times_by_precision() {
    check(
        DataType::Time(0),
        &[
            ("\"12:00:00\"", Stored("t43200000ms")),
            ("\"12:00\"", Stored("t43200000ms")),
            ("\"23:59:59\"", Stored("t86399000ms")),
            ("\"12:00:00.5\"", Refused("1 fraction digits, TIME(0) keeps 0")),
            ("\"24:00:00\"", Refused("expected TIME(0)")),
            ("43200", Refused("expected TIME(0), got number")),
        ],
    );
    check(
        DataType::Time(3),
        &[
            ("\"12:00:00.123\"", Stored("t43200123ms")),
            ("\"12:00:00.1234\"", Refused("4 fraction digits")),
        ],
    );
    check(DataType::Time(6), &[("\"00:00:00.000001\"", Stored("t1us"))]);
    check(
        DataType::Time(9),
        &[("\"23:59:59.999999999\"", Stored("t86399999999999ns"))],
    );
}

#[test]
fn timestamps_without_zone() {
    check(
        DataType::Timestamp(3),
        &[
            ("\"2024-02-29T12:00:00.123\"", Stored("ts1709208000123ms")),
            ("\"1969-12-31T23:59:59.999\"", Stored("ts-1ms")),
            ("\"2024-02-29T12:00:00Z\"", Refused("without offset")),
            ("\"2024-02-29 12:00:00\"", Refused("expected TIMESTAMP(3)")),
            ("1709208000123", Refused("expected TIMESTAMP(3), got number")),
        ],
    );
    check(
        DataType::Timestamp(6),
        &[
            ("\"2024-02-29T12:00:00.000001\"", Stored("ts1709208000000001us")),
            ("\"0000-01-01T00:00:00\"", Stored("ts-62167219200000000us")),
            ("\"9999-12-31T23:59:59.999999\"", Stored("ts253402300799999999us")),
            ("\"10000-01-01T00:00:00\"", Refused("expected TIMESTAMP(6)")),
        ],
    );
    // Nanoseconds in an i64: 1677-09-21T00:12:43.145224192 to 2262-04-11T23:47:16.854775807.
    check(
        DataType::Timestamp(9),
        &[
            (
                "\"2024-02-29T12:00:00.000000001\"",
                Stored("ts1709208000000000001ns"),
            ),
            ("\"2262-04-12T00:00:00\"", Refused("out of the range")),
            (
                "\"2262-04-11T23:47:16.854775807\"",
                Stored("ts9223372036854775807ns"),
            ),
            (
                "\"2262-04-11T23:47:16.854775808\"",
                Refused("value is out of the range TIMESTAMP(9) can store"),
            ),
            (
                "\"1677-09-21T00:12:43.145224192\"",
                Stored("ts-9223372036854775808ns"),
            ),
            (
                "\"1677-09-21T00:12:43.145224191\"",
                Refused("value is out of the range TIMESTAMP(9) can store"),
            ),
        ],
    );
    check(
        DataType::Timestamp(7),
        &[
            (
                "\"2262-04-11T23:47:16.8547758\"",
                Stored("ts9223372036854775800ns"),
            ),
            (
                "\"2262-04-11T23:47:16.8547759\"",
                Refused("value is out of the range TIMESTAMP(7) can store"),
            ),
        ],
    );
}

#[test]
fn timestamps_with_local_time_zone() {
    check(
        DataType::TimestampLtz(3),
        &[
            ("\"2024-02-29T12:00:00Z\"", Stored("ts1709208000000ms@UTC")),
            ("\"2024-02-29T14:00:00+02:00\"", Stored("ts1709208000000ms@UTC")),
            ("\"2024-02-29T07:00:00.5-05:00\"", Stored("ts1709208000500ms@UTC")),
            ("\"2024-03-01T05:59:00+17:59\"", Stored("ts1709208000000ms@UTC")),
            ("1709208000123", Stored("ts1709208000123ms@UTC")),
            ("-1", Stored("ts-1ms@UTC")),
            (
                "\"2024-02-29T12:00:00\"",
                Refused("with offset or epoch milliseconds"),
            ),
            (
                "\"2024-02-29T12:00:00+19:00\"",
                Refused("expected TIMESTAMP_LTZ(3)"),
            ),
            ("1.5", Refused("non-integer")),
        ],
    );
    check(
        DataType::TimestampLtz(0),
        &[
            ("2000", Stored("ts2000ms@UTC")),
            ("1500", Refused("more fraction digits than TIMESTAMP_LTZ(0)")),
        ],
    );
    check(
        DataType::TimestampLtz(9),
        &[
            ("1", Stored("ts1000000ns@UTC")),
            ("\"1970-01-01T00:00:00.000000001Z\"", Stored("ts1ns@UTC")),
        ],
    );
}

/// An instant in 0000-01-01T00:00:00Z ..= 9999-12-31T23:59:59.999999999Z, however written;
/// in nanoseconds (precision 7 to 9) one an i64 holds.
#[test]
fn timestamps_with_local_time_zone_are_range_checked() {
    const YEARS: &str = "value is out of the range TIMESTAMP_LTZ(3) can store \
                         (0000-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z)";
    check(
        DataType::TimestampLtz(3),
        &[
            ("-62167219200000", Stored("ts-62167219200000ms@UTC")),
            ("-62167219200001", Refused(YEARS)),
            ("253402300799999", Stored("ts253402300799999ms@UTC")),
            ("253402300800000", Refused(YEARS)),
            ("9223372036854775807", Refused(YEARS)),
            ("-9223372036854775808", Refused(YEARS)),
            ("\"0000-01-01T00:00:00Z\"", Stored("ts-62167219200000ms@UTC")),
            ("\"0000-01-01T01:00:00+01:00\"", Stored("ts-62167219200000ms@UTC")),
            ("\"0000-01-01T00:59:59.999+01:00\"", Refused(YEARS)),
            ("\"0000-01-01T00:00:00+01:00\"", Refused(YEARS)),
            ("\"9999-12-31T23:59:59.999Z\"", Stored("ts253402300799999ms@UTC")),
            (
                "\"9999-12-31T05:59:59.999-18:00\"",
                Stored("ts253402300799999ms@UTC"),
            ),
            ("\"9999-12-31T06:00:00-18:00\"", Refused(YEARS)),
        ],
    );
    check(
        DataType::TimestampLtz(0),
        &[
            ("-62167219200000", Stored("ts-62167219200000ms@UTC")),
            ("253402300799000", Stored("ts253402300799000ms@UTC")),
            (
                "253402300800000",
                Refused("out of the range TIMESTAMP_LTZ(0) can store (0000-01-01T00:00:00Z to"),
            ),
        ],
    );
    check(
        DataType::TimestampLtz(6),
        &[
            (
                "\"9999-12-31T23:59:59.999999Z\"",
                Stored("ts253402300799999999us@UTC"),
            ),
            (
                "\"9999-12-31T23:59:59.999999-00:00:01\"",
                Refused("out of the range TIMESTAMP_LTZ(6) can store (0000-01-01T00:00:00Z to"),
            ),
        ],
    );
    const NANOS: &str = "value is out of the range TIMESTAMP_LTZ(9) can store \
                         (1677-09-21T00:12:43.145224192Z to 2262-04-11T23:47:16.854775807Z)";
    check(
        DataType::TimestampLtz(9),
        &[
            (
                "\"2262-04-11T23:47:16.854775807Z\"",
                Stored("ts9223372036854775807ns@UTC"),
            ),
            ("\"2262-04-11T23:47:16.854775808Z\"", Refused(NANOS)),
            (
                "\"1677-09-21T01:12:43.145224192+01:00\"",
                Stored("ts-9223372036854775808ns@UTC"),
            ),
            ("\"1677-09-21T00:12:43.145224191Z\"", Refused(NANOS)),
            ("9223372036854", Stored("ts9223372036854000000ns@UTC")),
            ("9223372036855", Refused(NANOS)),
            ("-9223372036854", Stored("ts-9223372036854000000ns@UTC")),
            ("-9223372036855", Refused(NANOS)),
            ("253402300800000", Refused(NANOS)),
        ],
    );
}

#[test]
fn arrays_maps_rows() {
    check(
        array(DataType::Int),
        &[
            ("[1,null,3]", Stored("[1,null,3]")),
            ("[]", Stored("[]")),
            ("\"x\"", Refused("expected ARRAY, got string")),
            ("{}", Refused("expected ARRAY, got object")),
        ],
    );
    check(
        map(DataType::Int),
        &[
            ("{\"a\":1,\"b\":null}", Stored("{\"a\":1,\"b\":null}")),
            ("{}", Stored("{}")),
            ("[]", Refused("expected MAP, got array")),
        ],
    );
    check(
        row(vec![
            col("a", DataType::Int),
            Field::new("b", n(array(DataType::String))),
        ]),
        &[
            ("{\"a\":1}", Stored("{\"a\":1,\"b\":null}")),
            ("{\"b\":[\"x\"],\"a\":2}", Stored("{\"a\":2,\"b\":[\"x\"]}")),
            ("{}", Stored("{\"a\":null,\"b\":null}")),
            ("1", Refused("expected ROW, got number 1")),
        ],
    );
}

/// A refusal names the value as it was written (a DECIMAL given as a JSON string is a string,
/// it was called a number), and a number cut to 64 characters ends with `…` (cut without a mark,
/// a 100-digit number read as a different, 64-digit one).
#[test]
fn refusals_name_the_value_as_written_and_mark_a_cut() {
    let d = |precision, scale| DataType::Decimal { precision, scale };
    let nines = "9".repeat(100);
    let ones = "1".repeat(100);
    let cases: Vec<(DataType, String, String)> = vec![
        (
            d(5, 2),
            r#""12.345""#.into(),
            r#"string "12.345" has more than 2 fraction digits"#.into(),
        ),
        (
            d(5, 2),
            r#""1e10""#.into(),
            r#"string "1e10" has more than 3 integer digits"#.into(),
        ),
        (
            d(5, 2),
            "12.345".into(),
            "number 12.345 has more than 2 fraction digits".into(),
        ),
        (
            d(5, 2),
            nines.clone(),
            format!("number {}… has more than 3 integer digits", "9".repeat(64)),
        ),
        (
            d(5, 2),
            format!("\"{nines}\""),
            format!("string \"{}…\" has more than 3 integer digits", "9".repeat(64)),
        ),
        (
            DataType::BigInt,
            ones.clone(),
            format!("number {}… is out of range for BIGINT", "1".repeat(64)),
        ),
        (
            DataType::Int,
            "2147483648".into(),
            "number 2147483648 is out of range for INT".into(),
        ),
        (
            DataType::Double,
            format!("1{}e400", "0".repeat(80)),
            format!("number 1{}… is out of range for DOUBLE", "0".repeat(63)),
        ),
    ];
    for (data_type, json, want) in cases {
        let plan = flat_plan(vec![col("v", data_type.clone())]);
        let err = convert_one(&plan, &format!(r#"{{"v":{json}}}"#)).expect_err(&json);
        assert!(
            err.reason.starts_with(&want),
            "{data_type} {json}: {:?} is not {want:?}…",
            err.reason
        );
    }
}
