//! Client-controlled bytes into the converter: any bytes as the keys, values and headers of
//! one partition batch, converted with `convert_batch_with` under one of several table
//! plans (flat and nested JSON with every type, with and without `_kafka_rescue`, string and
//! binary values with all system columns; flat and nested JSON of scalar fields only, which
//! the one-pass path converts). It must never panic; a batch converts to as many rows as it
//! has records, or fails naming one of its records in a bounded message; and the default
//! conversion (one pass where it applies) gives exactly what the two-pass path
//! (`JsonScratch::two_pass()`: tape, then writer) gives, batch or error.
#![no_main]

use std::sync::OnceLock;

use kafluss_convert::mapping::{HEADERS_COLUMN, KEY_COLUMN, METADATA_COLUMN, RESCUE_COLUMN, VALUE_COLUMN};
use kafluss_convert::{
    ConversionPlan, DataType, Field, FieldType, JsonScratch, KafkaMapping, KafkaRecord, Schema,
    SystemColumns, TimestampType, ValueLayout, ValueType, MAX_MESSAGE_BYTES,
};
use libfuzzer_sys::fuzz_target;

/// Separates the records of one input (never valid UTF-8, so it cannot hide JSON text).
const RECORD_SEPARATOR: u8 = 0xFE;

fn n(data_type: DataType) -> FieldType {
    FieldType::nullable(data_type)
}

fn col(name: &str, data_type: DataType) -> Field {
    Field::new(name, n(data_type))
}

fn every_type() -> Vec<Field> {
    let item = DataType::Row(vec![col("s", DataType::String), col("q", DataType::Int)]);
    vec![
        col("bool", DataType::Boolean),
        col("i8", DataType::TinyInt),
        col("i16", DataType::SmallInt),
        col("i32", DataType::Int),
        col("i64", DataType::BigInt),
        col("f32", DataType::Float),
        col("f64", DataType::Double),
        col(
            "dec",
            DataType::Decimal {
                precision: 10,
                scale: 2,
            },
        ),
        col(
            "dec38",
            DataType::Decimal {
                precision: 38,
                scale: 10,
            },
        ),
        col("ch", DataType::Char(3)),
        col("s", DataType::String),
        col("bin", DataType::Binary(2)),
        col("bytes", DataType::Bytes),
        col("date", DataType::Date),
        col("time", DataType::Time(3)),
        col("ts", DataType::Timestamp(6)),
        col("ltz", DataType::TimestampLtz(0)),
        col(
            "xs",
            DataType::Array(Box::new(n(DataType::Array(Box::new(n(DataType::Int)))))),
        ),
        col(
            "m",
            DataType::Map {
                key: Box::new(FieldType::not_null(DataType::String)),
                value: Box::new(n(item.clone())),
            },
        ),
        col("r", item),
    ]
}

/// The fields of `every_type` that the one-pass path converts (scalars but BINARY/BYTES).
fn one_pass_types() -> Vec<Field> {
    every_type()
        .into_iter()
        .filter(|f| {
            !matches!(
                f.field_type.data_type,
                DataType::Binary(_) | DataType::Bytes | DataType::Array(_) | DataType::Map { .. } | DataType::Row(_)
            )
        })
        .collect()
}

fn system() -> Vec<Field> {
    vec![
        col(KEY_COLUMN, DataType::Bytes),
        col(
            HEADERS_COLUMN,
            DataType::Map {
                key: Box::new(FieldType::not_null(DataType::String)),
                value: Box::new(n(DataType::Bytes)),
            },
        ),
        col(
            METADATA_COLUMN,
            DataType::Row(vec![
                col("timestamp", DataType::TimestampLtz(3)),
                col("timestamp_type", DataType::Int),
                col("partition", DataType::Int),
            ]),
        ),
    ]
}

fn plan(columns: Vec<Field>, value_type: ValueType, layout: ValueLayout) -> ConversionPlan {
    let schema = Schema::new(columns);
    let find = |name: &str| schema.columns.iter().position(|c| c.name == name);
    let mapping = KafkaMapping {
        value_type,
        layout,
        key_binary: false,
        system: SystemColumns {
            key: find(KEY_COLUMN),
            headers: find(HEADERS_COLUMN),
            metadata: find(METADATA_COLUMN),
            rescue: find(RESCUE_COLUMN),
            value: find(VALUE_COLUMN),
        },
    };
    ConversionPlan::compile(&schema, &mapping).expect("fuzz plan compiles")
}

fn plans() -> &'static [ConversionPlan] {
    static PLANS: OnceLock<Vec<ConversionPlan>> = OnceLock::new();
    PLANS.get_or_init(|| {
        let rescue = || col(RESCUE_COLUMN, DataType::String);
        let flat_rescue = [every_type(), vec![rescue()], system()].concat();
        let nested = [
            vec![col(VALUE_COLUMN, DataType::Row(every_type())), rescue()],
            system(),
        ]
        .concat();
        vec![
            plan(flat_rescue, ValueType::ParseJson, ValueLayout::Flat),
            plan(every_type(), ValueType::ParseJson, ValueLayout::Flat),
            plan(nested, ValueType::ParseJson, ValueLayout::Nested),
            plan(
                vec![col(VALUE_COLUMN, DataType::Row(every_type()))],
                ValueType::ParseJson,
                ValueLayout::Nested,
            ),
            plan(
                [one_pass_types(), vec![rescue()]].concat(),
                ValueType::ParseJson,
                ValueLayout::Flat,
            ),
            plan(one_pass_types(), ValueType::ParseJson, ValueLayout::Flat),
            plan(
                vec![col(VALUE_COLUMN, DataType::Row(one_pass_types())), rescue()],
                ValueType::ParseJson,
                ValueLayout::Nested,
            ),
            plan(
                [vec![col(VALUE_COLUMN, DataType::String)], system()].concat(),
                ValueType::String,
                ValueLayout::Flat,
            ),
            plan(
                [vec![col(VALUE_COLUMN, DataType::Bytes)], system()].concat(),
                ValueType::Binary,
                ValueLayout::Flat,
            ),
        ]
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    let plans = plans();
    let plan = &plans[usize::from(control) % plans.len()];
    // Bit 7: the first part of each record is its key; bit 6: its second part a header name
    // and the third that header's value. The last part is the value (`\xFF` alone: null).
    let with_key = control & 0x80 != 0;
    let with_header = control & 0x40 != 0;
    let chunks: Vec<&[u8]> = rest.split(|&b| b == RECORD_SEPARATOR).collect();
    let per_record = 1 + usize::from(with_key) + 2 * usize::from(with_header);
    let mut headers = Vec::new();
    let mut parts = Vec::new();
    for group in chunks.chunks(per_record) {
        let mut group = group.iter().copied();
        let key = if with_key { group.next() } else { None };
        let header = if with_header {
            let name = group.next().unwrap_or_default();
            let value = group.next().filter(|v| v != b"\xFF");
            Some((name, value))
        } else {
            None
        };
        let value = group.next().filter(|v| v != b"\xFF");
        headers.push(header);
        parts.push((key, value));
    }
    let header_lists: Vec<Vec<(&[u8], Option<&[u8]>)>> =
        headers.iter().map(|h| h.iter().copied().collect()).collect();
    let records: Vec<KafkaRecord<'_>> = parts
        .iter()
        .zip(&header_lists)
        .enumerate()
        .map(|(i, (&(key, value), headers))| KafkaRecord {
            key,
            value,
            headers,
            timestamp: if i % 3 == 2 { -1 } else { i as i64 },
            timestamp_type: if i % 2 == 0 {
                TimestampType::CreateTime
            } else {
                TimestampType::LogAppendTime
            },
            partition: i as i32,
        })
        .collect();
    let mut scratch = JsonScratch::default();
    let first = plan.convert_batch_with(&mut scratch, records.iter().copied());
    match &first {
        Ok(batch) => assert_eq!(batch.num_rows(), records.len()),
        Err(error) => {
            assert!(error.record_index < records.len(), "{error}");
            assert!(error.to_string().len() <= MAX_MESSAGE_BYTES, "{error}");
        }
    }
    // The broker reuses one scratch across batches: a second conversion must agree.
    let again = plan.convert_batch_with(&mut scratch, records.iter().copied());
    assert_eq!(first, again);
    // One pass and two passes must agree exactly (the two-pass path is the oracle).
    let two_pass = plan.convert_batch_with(&mut JsonScratch::two_pass(), records.iter().copied());
    assert_eq!(first, two_pass);
});
