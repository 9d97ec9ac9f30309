//! Compiling plans: what the catalog validates compiles; what breaks the converter's
//! assumptions is refused with a named reason.

mod common;

use std::collections::BTreeMap;

use common::*;
use kafluss_convert::mapping::{validate_kafka_mapping, TableShape};
use kafluss_convert::{
    arrow_schema, ConversionPlan, DataType, Field, FieldType, KafkaRecord, PlanError, Schema, ValueLayout,
    ValueType,
};

fn compile(
    columns: Vec<Field>,
    value_type: ValueType,
    layout: ValueLayout,
) -> Result<ConversionPlan, PlanError> {
    let schema = Schema::new(columns);
    ConversionPlan::compile(&schema, &mapping(&schema, value_type, layout))
}

fn options(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const ARROW_TABLE: TableShape<'static> = TableShape {
    partitioned: false,
    has_primary_key: false,
    log_format: "arrow",
};

#[test]
fn the_seed_example_table_converts() {
    // sales.orders from the product documentation, with no conversion options.
    let schema = Schema::new(vec![
        col("order_id", DataType::BigInt),
        col(
            "amount",
            DataType::Decimal {
                precision: 18,
                scale: 2,
            },
        ),
        col("_kafka_key", DataType::Bytes),
        col("_kafka_headers", headers_type()),
    ]);
    let mapping = validate_kafka_mapping(&schema, &options(&[("table.kafka.enabled", "true")]), ARROW_TABLE)
        .unwrap()
        .expect("enabled");
    let plan = ConversionPlan::compile(&schema, &mapping).unwrap();
    assert_eq!(plan.arrow_schema(), arrow_schema(&schema));
    let headers: &[kafluss_convert::Header<'_>] = &[(b"source", Some(b"web"))];
    let record = KafkaRecord {
        key: Some(b"o-1"),
        headers,
        ..KafkaRecord::with_value(br#"{"order_id": 42, "amount": 19.9}"#)
    };
    let batch = plan.convert_batch([record]).unwrap();
    assert_eq!(
        render_row(&batch, 0),
        r#"{"order_id":42,"amount":"19.90","_kafka_key":b64:by0x,"_kafka_headers":{"source":b64:d2Vi}}"#
    );
}

#[test]
fn validated_mappings_of_every_kind_compile() {
    type Case = (Vec<Field>, Vec<(&'static str, &'static str)>);
    let cases: Vec<Case> = vec![
        (
            vec![
                col("_kafka_value", DataType::Bytes),
                col("_kafka_metadata", metadata_type()),
            ],
            vec![("table.kafka.convert.value.type", "binary")],
        ),
        (
            vec![
                col("_kafka_value", DataType::String),
                col("_kafka_rescue", DataType::String),
            ],
            vec![("table.kafka.convert.value.type", "STRING")],
        ),
        (
            vec![
                col("_kafka_key", DataType::Bytes),
                col("_kafka_value", row(vec![col("a", array(map(DataType::Int)))])),
            ],
            vec![
                ("table.kafka.convert.value.layout", "nested"),
                ("table.kafka.convert.key.type", "binary"),
            ],
        ),
    ];
    for (columns, extra) in cases {
        let schema = Schema::new(columns);
        let mut opts = vec![("table.kafka.enabled", "true")];
        opts.extend(extra);
        let mapping = validate_kafka_mapping(&schema, &options(&opts), ARROW_TABLE)
            .unwrap()
            .unwrap();
        ConversionPlan::compile(&schema, &mapping).unwrap();
    }
}

#[test]
fn refuses_what_the_converter_cannot_honour() {
    let flat = ValueLayout::Flat;
    let json = ValueType::ParseJson;
    let err = compile(
        vec![col("_kafka_value", DataType::String)],
        ValueType::Binary,
        flat,
    )
    .unwrap_err();
    assert!(matches!(err, PlanError::WrongType { .. }), "{err}");
    let err = compile(
        vec![col("_kafka_value", DataType::Int)],
        json,
        ValueLayout::Nested,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "_kafka_value: INT is not allowed here: nested JSON values need a ROW"
    );
    let err = compile(vec![col("_kafka_key", DataType::Bytes)], json, flat).unwrap_err();
    assert_eq!(err, PlanError::NoBusinessColumn);
    let err = compile(vec![col("_kafka_key", DataType::Bytes)], ValueType::Binary, flat).unwrap_err();
    assert!(matches!(err, PlanError::MissingValueColumn { .. }), "{err}");
    let err = compile(
        vec![Field::new("a", FieldType::not_null(DataType::Int))],
        json,
        flat,
    )
    .unwrap_err();
    assert_eq!(err, PlanError::NotNullable { path: "a".into() });
    let err = compile(
        vec![col(
            "r",
            row(vec![Field::new("x", FieldType::not_null(DataType::Int))]),
        )],
        json,
        flat,
    )
    .unwrap_err();
    assert_eq!(err, PlanError::NotNullable { path: "r.x".into() });
    let int_keys = DataType::Map {
        key: Box::new(FieldType::not_null(DataType::Int)),
        value: Box::new(n(DataType::Int)),
    };
    let err = compile(vec![col("m", int_keys)], json, flat).unwrap_err();
    assert!(matches!(err, PlanError::MapKey { .. }), "{err}");
    let err = compile(
        vec![
            col("a", DataType::Int),
            col("_kafka_metadata", row(vec![col("timestamp", DataType::BigInt)])),
        ],
        json,
        flat,
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("_kafka_metadata must be ROW<timestamp TIMESTAMP_LTZ(3)"),
        "{err}"
    );
    // A mapping whose indices do not point at the named columns.
    let schema = Schema::new(vec![col("a", DataType::Int), col("_kafka_key", DataType::Bytes)]);
    let mut m = mapping(&schema, json, flat);
    m.system.key = Some(0);
    let err = ConversionPlan::compile(&schema, &m).unwrap_err();
    assert!(matches!(err, PlanError::MissingColumn { .. }), "{err}");
}

#[test]
fn depth_64_compiles_and_65_does_not() {
    let nest = |levels: usize| {
        let mut t = DataType::Int;
        for _ in 0..levels {
            t = array(t);
        }
        t
    };
    compile(vec![col("a", nest(64))], ValueType::ParseJson, ValueLayout::Flat).unwrap();
    let err = compile(vec![col("a", nest(65))], ValueType::ParseJson, ValueLayout::Flat).unwrap_err();
    assert!(matches!(err, PlanError::TooDeep { .. }), "{err}");
    // A value of the deepest schema converts: 64 arrays below the root object.
    let plan = compile(vec![col("a", nest(64))], ValueType::ParseJson, ValueLayout::Flat).unwrap();
    let json = format!("{{\"a\":{}7{}}}", "[".repeat(64), "]".repeat(64));
    let batch = plan
        .convert_batch([KafkaRecord::with_value(json.as_bytes())])
        .unwrap();
    assert_eq!(
        render_row(&batch, 0),
        format!("{{\"a\":{}7{}}}", "[".repeat(64), "]".repeat(64))
    );
}
