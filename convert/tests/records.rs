//! System columns, value types and layouts, null and empty values, batch atomicity, errors.

mod common;

use common::*;
use kafluss_convert::{
    ConversionPlan, DataType, KafkaRecord, Schema, TimestampType, ValueLayout, ValueType, MAX_MESSAGE_BYTES,
};

fn plan(columns: Vec<kafluss_convert::Field>, value_type: ValueType) -> ConversionPlan {
    let schema = Schema::new(columns);
    ConversionPlan::compile(&schema, &mapping(&schema, value_type, ValueLayout::Flat)).unwrap()
}

fn all_system_columns(value: DataType) -> Vec<kafluss_convert::Field> {
    vec![
        col("_kafka_key", DataType::Bytes),
        col("_kafka_value", value),
        col("_kafka_headers", headers_type()),
        col("_kafka_metadata", metadata_type()),
        col("_kafka_rescue", DataType::String),
    ]
}

#[test]
fn key_headers_metadata_binary_value() {
    let plan = plan(all_system_columns(DataType::Bytes), ValueType::Binary);
    let headers: &[kafluss_convert::Header<'_>] = &[
        (b"a", Some(b"1")),
        (b"b", None),
        (b"a", Some(b"2")),
        (b"c", Some(b"")),
    ];
    let records = [
        KafkaRecord {
            key: Some(b"k"),
            value: Some(&[0xff, 0x00]),
            headers,
            timestamp: 1_700_000_000_123,
            timestamp_type: TimestampType::CreateTime,
            partition: 3,
        },
        KafkaRecord {
            key: None,
            value: None,
            headers: &[],
            timestamp: -1,
            timestamp_type: TimestampType::CreateTime,
            partition: 0,
        },
        KafkaRecord {
            key: Some(b""),
            value: Some(b""),
            headers: &[],
            timestamp: 42,
            timestamp_type: TimestampType::LogAppendTime,
            partition: 7,
        },
    ];
    let batch = plan.convert_batch(records).unwrap();
    assert_eq!(batch.num_rows(), 3);
    assert_eq!(
        render_row(&batch, 0),
        r#"{"_kafka_key":b64:aw==,"_kafka_value":b64:/wA=,"_kafka_headers":{"b":null,"a":b64:Mg==,"c":b64:},"_kafka_metadata":{"timestamp":ts1700000000123ms@UTC,"timestamp_type":0,"partition":3},"_kafka_rescue":null}"#
    );
    assert_eq!(
        render_row(&batch, 1),
        r#"{"_kafka_key":null,"_kafka_value":null,"_kafka_headers":{},"_kafka_metadata":{"timestamp":null,"timestamp_type":-1,"partition":0},"_kafka_rescue":null}"#
    );
    assert_eq!(
        render_row(&batch, 2),
        r#"{"_kafka_key":b64:,"_kafka_value":b64:,"_kafka_headers":{},"_kafka_metadata":{"timestamp":ts42ms@UTC,"timestamp_type":1,"partition":7},"_kafka_rescue":null}"#
    );
    assert_eq!(batch.schema(), plan.arrow_schema());
}

/// Kafka accepts any CreateTime: `_kafka_metadata.timestamp` stores the record's timestamp
/// as it is, even outside the years 0000 to 9999 a TIMESTAMP_LTZ value from JSON must lie in.
#[test]
fn metadata_timestamps_are_never_refused() {
    let plan = plan(
        vec![
            col("_kafka_value", DataType::Bytes),
            col("_kafka_metadata", metadata_type()),
        ],
        ValueType::Binary,
    );
    let stamps = [253_402_300_800_000, -62_167_219_200_001, i64::MAX, i64::MIN];
    let batch = plan
        .convert_batch(stamps.map(|timestamp| KafkaRecord {
            timestamp,
            timestamp_type: TimestampType::CreateTime,
            ..KafkaRecord::with_value(b"")
        }))
        .unwrap();
    for (row, timestamp) in stamps.iter().enumerate() {
        assert_eq!(
            render_row(&batch, row),
            format!(
                r#"{{"_kafka_value":b64:,"_kafka_metadata":{{"timestamp":ts{timestamp}ms@UTC,"timestamp_type":0,"partition":0}}}}"#
            )
        );
    }
}

#[test]
fn many_repeated_headers_keep_the_last_value() {
    let plan = plan(
        vec![
            col("_kafka_value", DataType::Bytes),
            col("_kafka_headers", headers_type()),
        ],
        ValueType::Binary,
    );
    let names: Vec<String> = (0..40).map(|i| format!("h{}", i % 20)).collect();
    let values: Vec<String> = (0..40).map(|i| i.to_string()).collect();
    let headers: Vec<kafluss_convert::Header<'_>> = names
        .iter()
        .zip(&values)
        .map(|(n, v)| (n.as_bytes(), Some(v.as_bytes())))
        .collect();
    let mut record = KafkaRecord::with_value(b"v");
    record.headers = &headers;
    let batch = plan.convert_batch([record]).unwrap();
    let text = render_row(&batch, 0);
    // h0 appeared as values 0 and 20: the last (20, "MjA=") wins, once.
    assert_eq!(text.matches("\"h0\":").count(), 1, "{text}");
    assert!(text.contains("\"h0\":b64:MjA="), "{text}");
    assert!(text.contains("\"h19\":b64:Mzk="), "{text}");
}

#[test]
fn non_utf8_header_name_fails_only_when_headers_are_stored() {
    let headers: &[kafluss_convert::Header<'_>] = &[(b"ok", None), (b"\xff", Some(b"x"))];
    let mut record = KafkaRecord::with_value(b"v");
    record.headers = headers;
    let stored = plan(
        vec![
            col("_kafka_value", DataType::Bytes),
            col("_kafka_headers", headers_type()),
        ],
        ValueType::Binary,
    );
    let err = stored.convert_batch([record]).unwrap_err();
    assert_eq!(err.record_index, 0);
    assert!(
        err.to_string()
            .starts_with("record 0: header 1 name is not valid UTF-8"),
        "{err}"
    );
    let ignored = plan(vec![col("_kafka_value", DataType::Bytes)], ValueType::Binary);
    assert_eq!(ignored.convert_batch([record]).unwrap().num_rows(), 1);
}

#[test]
fn string_values_are_strict_utf8() {
    let plan = plan(all_system_columns(DataType::String), ValueType::String);
    let batch = plan
        .convert_batch([
            KafkaRecord::with_value("héllo".as_bytes()),
            KafkaRecord::with_value(b""),
            KafkaRecord {
                value: None,
                ..KafkaRecord::with_value(b"")
            },
            KafkaRecord::with_value(b"{\"not\":\"parsed\"}"),
        ])
        .unwrap();
    let cells: Vec<String> = (0..4).map(|r| cell(batch.column(1).as_ref(), r)).collect();
    assert_eq!(
        cells,
        ["\"héllo\"", "\"\"", "null", "\"{\\\"not\\\":\\\"parsed\\\"}\""]
    );
    // The rescue column is null for string conversion.
    assert_eq!(batch.column(4).null_count(), 4);
    let err = plan
        .convert_batch([
            KafkaRecord::with_value(b"ok"),
            KafkaRecord::with_value(b"\xc3\x28"),
        ])
        .unwrap_err();
    assert_eq!(err.record_index, 1);
    assert!(err.reason.contains("not valid UTF-8"), "{err}");
}

#[test]
fn json_null_and_empty_values() {
    let flat = flat_plan(vec![
        col("a", DataType::Int),
        col("b", DataType::String),
        col("_kafka_rescue", DataType::String),
    ]);
    let null_value = KafkaRecord {
        value: None,
        ..KafkaRecord::with_value(b"")
    };
    let batch = flat.convert_batch([null_value]).unwrap();
    assert_eq!(
        render_row(&batch, 0),
        r#"{"a":null,"b":null,"_kafka_rescue":null}"#
    );
    let err = flat.convert_batch([KafkaRecord::with_value(b"")]).unwrap_err();
    assert!(err.reason.starts_with("invalid JSON"), "{err}");
    assert_eq!(
        convert_one(&flat, "{}").unwrap(),
        r#"{"a":null,"b":null,"_kafka_rescue":null}"#
    );
    assert_eq!(
        convert_one(&flat, r#"{"a":null,"b":null}"#).unwrap(),
        r#"{"a":null,"b":null,"_kafka_rescue":null}"#
    );

    let nested = nested_plan(vec![
        col("_kafka_value", row(vec![col("a", DataType::Int)])),
        col("_kafka_rescue", DataType::String),
    ]);
    let batch = nested.convert_batch([null_value]).unwrap();
    assert_eq!(
        render_row(&batch, 0),
        r#"{"_kafka_value":null,"_kafka_rescue":null}"#
    );
    assert_eq!(
        convert_one(&nested, "{}").unwrap(),
        r#"{"_kafka_value":{"a":null},"_kafka_rescue":null}"#
    );
}

#[test]
fn invalid_json_and_non_objects_fail_even_with_rescue() {
    let plan = flat_plan(vec![
        col("a", DataType::Int),
        col("_kafka_rescue", DataType::String),
    ]);
    let cases = [
        ("", "invalid JSON"),
        ("{", "invalid JSON"),
        (r#"{"a":1} {}"#, "invalid JSON"),
        (r#"{"a":1,"a":2}"#, "invalid JSON: duplicate key \"a\""),
        (r#"{"a":"\udc00"}"#, "invalid JSON: unpaired UTF-16 surrogate"),
        (r#"{"b":[1,]}"#, "invalid JSON"),
        ("[1]", "the JSON value must be an object, got an array"),
        ("1", "the JSON value must be an object, got a number"),
        ("null", "the JSON value must be an object, got null"),
        ("\"{}\"", "the JSON value must be an object, got a string"),
    ];
    for (json, reason) in cases {
        let err = convert_one(&plan, json).expect_err(json);
        assert!(err.reason.starts_with(reason), "{json}: {err}");
        assert_eq!(err.path, "");
    }
    let err = plan
        .convert_batch([KafkaRecord::with_value(b"{\"a\":\"\xff\"}")])
        .unwrap_err();
    assert!(err.reason.starts_with("invalid JSON"), "{err}");
    // Duplicates deep inside a rescued member are still invalid JSON.
    let err = convert_one(&plan, r#"{"zz":{"k":1,"k":2}}"#).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"record 0: invalid JSON: duplicate key "k" in the object at $.zz"#
    );
}

#[test]
fn a_failing_record_fails_the_whole_batch() {
    let plan = flat_plan(vec![col("a", DataType::Int)]);
    let err = convert(&plan, &[r#"{"a":1}"#, r#"{"a":2}"#, r#"{"a":"x"}"#, r#"{"a":4}"#]).unwrap_err();
    assert_eq!(err.record_index, 2);
    assert_eq!(err.to_string(), r#"record 2: $.a: expected INT, got string "x""#);
    // The plan is unaffected: the next batch converts from scratch.
    let batch = convert(&plan, &[r#"{"a":5}"#]).unwrap();
    assert_eq!(batch.num_rows(), 1);
    assert_eq!(render_row(&batch, 0), r#"{"a":5}"#);
}

#[test]
fn errors_name_record_path_and_reason() {
    let plan = nested_plan(vec![col(
        "_kafka_value",
        row(vec![col(
            "customer",
            row(vec![col("items", array(row(vec![col("qty", DataType::Int)])))]),
        )]),
    )]);
    let ok = r#"{"customer":{"items":[{"qty":1}]}}"#;
    let bad = r#"{"customer":{"items":[{"qty":1},{"qty":2},{"qty":"x"}]}}"#;
    let err = convert(&plan, &[ok, ok, ok, bad]).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"record 3: $.customer.items[2].qty: expected INT, got string "x""#
    );
    let err = convert_one(&plan, r#"{"customer":{"items":[],"zz":1}}"#).unwrap_err();
    assert_eq!(
        err.to_string(),
        "record 0: $.customer.zz: unknown field and there is no _kafka_rescue column"
    );
    let maps = flat_plan(vec![col("m", map(DataType::Int))]);
    let err = convert_one(&maps, r#"{"m":{"a b":"x"}}"#).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"record 0: $.m["a b"]: expected INT, got string "x""#
    );
}

#[test]
fn error_messages_stay_under_one_kib() {
    let long_name = "n".repeat(5000);
    let long_value = "v".repeat(5000);
    let plan = flat_plan(vec![col("m", map(row(vec![col("x", DataType::Int)])))]);
    let json = format!(r#"{{"m":{{"{long_name}":{{"x":"{long_value}"}}}}}}"#);
    let err = convert_one(&plan, &json).unwrap_err();
    let text = err.to_string();
    assert!(text.len() <= MAX_MESSAGE_BYTES, "{} bytes", text.len());
    assert!(text.starts_with("record 0: $.m[\"nnnn"), "{text}");
    assert!(text.ends_with("vvv…\""), "{text}");
    let huge_number = format!(r#"{{"m":{{"k":{{"x":{}}}}}}}"#, "9".repeat(5000));
    let text = convert_one(&plan, &huge_number).unwrap_err().to_string();
    assert!(text.len() <= MAX_MESSAGE_BYTES, "{} bytes", text.len());
}

#[test]
fn flat_layout_orders_columns_as_declared() {
    let plan = flat_plan(vec![
        col("_kafka_metadata", metadata_type()),
        col("b", DataType::String),
        col("_kafka_key", DataType::Bytes),
        col("a", DataType::BigInt),
    ]);
    let record = KafkaRecord {
        key: Some(b"\x01"),
        timestamp: 5,
        partition: 2,
        ..KafkaRecord::with_value(br#"{"a":1,"b":"x"}"#)
    };
    let batch = plan.convert_batch([record]).unwrap();
    assert_eq!(
        render_row(&batch, 0),
        r#"{"_kafka_metadata":{"timestamp":ts5ms@UTC,"timestamp_type":0,"partition":2},"b":"x","_kafka_key":b64:AQ==,"a":1}"#
    );
}

#[test]
fn system_names_are_ordinary_inside_business_rows() {
    let nested = nested_plan(vec![col(
        "_kafka_value",
        row(vec![
            col("_kafka_key", DataType::String),
            col("inner", row(vec![col("_kafka_rescue", DataType::Int)])),
        ]),
    )]);
    assert_eq!(
        convert_one(&nested, r#"{"_kafka_key":"k","inner":{"_kafka_rescue":1}}"#).unwrap(),
        r#"{"_kafka_value":{"_kafka_key":"k","inner":{"_kafka_rescue":1}}}"#
    );
    let flat = flat_plan(vec![col("r", row(vec![col("_kafka_metadata", DataType::Int)]))]);
    assert_eq!(
        convert_one(&flat, r#"{"r":{"_kafka_metadata":7}}"#).unwrap(),
        r#"{"r":{"_kafka_metadata":7}}"#
    );
}

#[test]
fn batches_reuse_a_scratch() {
    let plan = flat_plan(vec![col("a", DataType::Int)]);
    let mut scratch = kafluss_convert::JsonScratch::default();
    for n in 0..3 {
        let json = format!(r#"{{"a":{n}}}"#);
        let batch = plan
            .convert_batch_with(&mut scratch, [KafkaRecord::with_value(json.as_bytes())])
            .unwrap();
        assert_eq!(render_row(&batch, 0), format!(r#"{{"a":{n}}}"#));
    }
}

#[test]
fn plan_is_send_and_sync() {
    fn shared<T: Send + Sync>() {}
    shared::<ConversionPlan>();
    shared::<std::sync::Arc<ConversionPlan>>();
    // A core's scratch may be made anywhere and moved to its core.
    fn movable<T: Send>() {}
    movable::<kafluss_convert::JsonScratch>();
}

#[test]
fn repeated_root_keys_are_invalid_json_in_both_layouts() {
    let flat_rescue = flat_plan(vec![
        col("a", DataType::Int),
        col("_kafka_rescue", DataType::String),
    ]);
    let flat = flat_plan(vec![col("a", DataType::Int)]);
    let nested = nested_plan(vec![
        col("_kafka_value", row(vec![col("a", DataType::Int)])),
        col("_kafka_rescue", DataType::String),
    ]);
    for plan in [&flat_rescue, &flat, &nested] {
        for json in [
            r#"{"a":1,"a":2}"#,
            r#"{"a":"x","a":2}"#,
            r#"{"a":null,"a":null}"#,
            r#"{"z":1,"b":2,"z":3}"#,
            r#"{"a":1,"z":1,"z":3}"#,
            r#"{"z":1,"a":1,"a":3}"#,
        ] {
            let err = convert_one(plan, json).expect_err(json);
            assert!(
                err.reason.starts_with("invalid JSON: duplicate key"),
                "{json}: {err}"
            );
            assert_eq!(err.path, "", "{json}");
        }
    }
}

#[test]
fn wide_rows_fill_missing_fields_and_find_members_by_name() {
    // 70 columns: more than one 64-bit field set, and a hashed name lookup.
    let columns: Vec<_> = (0..70).map(|i| col(&format!("c{i}"), DataType::Int)).collect();
    let plan = flat_plan(columns.clone());
    let batch = convert(&plan, &[r#"{"c69":69,"c0":0,"c64":64}"#, "{}"]).unwrap();
    let first = render_row(&batch, 0);
    assert!(first.starts_with(r#"{"c0":0,"c1":null,"#), "{first}");
    assert!(first.contains(r#""c63":null,"c64":64,"c65":null"#), "{first}");
    assert!(first.ends_with(r#""c69":69}"#), "{first}");
    assert_eq!(render_row(&batch, 1).matches("null").count(), 70);
    let err = convert_one(&plan, r#"{"c65":1,"c1":2,"c65":3}"#).unwrap_err();
    assert_eq!(
        err.reason,
        r#"invalid JSON: duplicate key "c65" in the object at $"#
    );
    let nested = nested_plan(vec![col("_kafka_value", row(columns))]);
    let batch = convert(&nested, &[r#"{"c66":6}"#]).unwrap();
    assert!(render_row(&batch, 0).contains(r#""c65":null,"c66":6,"c67":null"#));
}

#[test]
fn an_empty_batch_has_the_schema_and_no_rows() {
    let plan = flat_plan(vec![
        col("a", DataType::Int),
        col("_kafka_metadata", metadata_type()),
    ]);
    let batch = plan.convert_batch(std::iter::empty()).unwrap();
    assert_eq!(batch.num_rows(), 0);
    assert_eq!(batch.schema(), plan.arrow_schema());
}

#[test]
fn malformed_utf8_is_refused_in_json_and_string_values() {
    let json = flat_plan(vec![
        col("s", DataType::String),
        col("_kafka_rescue", DataType::String),
    ]);
    let string = {
        let schema = Schema::new(vec![col("_kafka_value", DataType::String)]);
        ConversionPlan::compile(&schema, &mapping(&schema, ValueType::String, ValueLayout::Flat)).unwrap()
    };
    let bad: [&[u8]; 5] = [
        b"\xc0\xaf",         // overlong '/'
        b"\xed\xa0\x80",     // a UTF-16 surrogate encoded in UTF-8
        b"\xe2\x82",         // truncated sequence
        b"\xf4\x90\x80\x80", // beyond U+10FFFF
        b"\x80",             // lone continuation byte
    ];
    for bytes in bad {
        let mut value = br#"{"s":""#.to_vec();
        value.extend_from_slice(bytes);
        value.extend_from_slice(br#""}"#);
        let err = json.convert_batch([KafkaRecord::with_value(&value)]).unwrap_err();
        assert!(err.reason.starts_with("invalid JSON"), "{bytes:?}: {err}");
        let err = string
            .convert_batch([KafkaRecord::with_value(bytes)])
            .unwrap_err();
        assert!(err.reason.contains("not valid UTF-8"), "{bytes:?}: {err}");
    }
    // Valid multi-byte text passes both ways.
    let text = "ü€😀".as_bytes();
    assert_eq!(
        string
            .convert_batch([KafkaRecord::with_value(text)])
            .unwrap()
            .num_rows(),
        1
    );
}
