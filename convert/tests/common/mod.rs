//! Helpers shared by the conversion tests: schemas, mappings, and a renderer that reads an
//! Arrow batch back as compact text (exact: decimals with their scale, floats shortest
//! round-trip, temporal values as their stored integers, bytes as Base64).

#![allow(dead_code)]

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType as ArrowType, TimeUnit};
use base64::Engine;
use kafluss_convert::mapping::{HEADERS_COLUMN, KEY_COLUMN, METADATA_COLUMN, RESCUE_COLUMN, VALUE_COLUMN};
use kafluss_convert::{
    ConversionPlan, ConvertError, DataType, Field, FieldType, KafkaMapping, KafkaRecord, Schema,
    SystemColumns, ValueLayout, ValueType,
};

pub fn n(data_type: DataType) -> FieldType {
    FieldType::nullable(data_type)
}

pub fn col(name: &str, data_type: DataType) -> Field {
    Field::new(name, n(data_type))
}

pub fn row(fields: Vec<Field>) -> DataType {
    DataType::Row(fields)
}

pub fn array(element: DataType) -> DataType {
    DataType::Array(Box::new(n(element)))
}

pub fn map(value: DataType) -> DataType {
    DataType::Map {
        key: Box::new(FieldType::not_null(DataType::String)),
        value: Box::new(n(value)),
    }
}

pub fn headers_type() -> DataType {
    map(DataType::Bytes)
}

pub fn metadata_type() -> DataType {
    row(vec![
        col("timestamp", DataType::TimestampLtz(3)),
        col("timestamp_type", DataType::Int),
        col("partition", DataType::Int),
    ])
}

/// The mapping the catalog would validate for `schema` (system columns found by name).
pub fn mapping(schema: &Schema, value_type: ValueType, layout: ValueLayout) -> KafkaMapping {
    let find = |name: &str| schema.columns.iter().position(|c| c.name == name);
    KafkaMapping {
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
    }
}

pub fn flat_plan(columns: Vec<Field>) -> ConversionPlan {
    let schema = Schema::new(columns);
    ConversionPlan::compile(
        &schema,
        &mapping(&schema, ValueType::ParseJson, ValueLayout::Flat),
    )
    .expect("plan compiles")
}

pub fn nested_plan(columns: Vec<Field>) -> ConversionPlan {
    let schema = Schema::new(columns);
    ConversionPlan::compile(
        &schema,
        &mapping(&schema, ValueType::ParseJson, ValueLayout::Nested),
    )
    .expect("plan compiles")
}

/// Converts one batch of JSON values.
pub fn convert(plan: &ConversionPlan, values: &[&str]) -> Result<RecordBatch, ConvertError> {
    plan.convert_batch(values.iter().map(|v| KafkaRecord::with_value(v.as_bytes())))
}

/// Converts one JSON value and renders its row.
pub fn convert_one(plan: &ConversionPlan, value: &str) -> Result<String, ConvertError> {
    convert(plan, &[value]).map(|batch| render_row(&batch, 0))
}

/// `{"col":value,...}` of one row.
pub fn render_row(batch: &RecordBatch, row: usize) -> String {
    let schema = batch.schema();
    let members: Vec<String> = schema
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(f, a)| format!("{}:{}", quote(f.name()), cell(a.as_ref(), row)))
        .collect();
    format!("{{{}}}", members.join(","))
}

pub fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One value read back from Arrow as text.
pub fn cell(array: &dyn Array, row: usize) -> String {
    if array.is_null(row) {
        return "null".into();
    }
    match array.data_type() {
        ArrowType::Boolean => array.as_boolean().value(row).to_string(),
        ArrowType::Int8 => array.as_primitive::<Int8Type>().value(row).to_string(),
        ArrowType::Int16 => array.as_primitive::<Int16Type>().value(row).to_string(),
        ArrowType::Int32 => array.as_primitive::<Int32Type>().value(row).to_string(),
        ArrowType::Int64 => array.as_primitive::<Int64Type>().value(row).to_string(),
        ArrowType::Float32 => format!("{:?}", array.as_primitive::<Float32Type>().value(row)),
        ArrowType::Float64 => format!("{:?}", array.as_primitive::<Float64Type>().value(row)),
        ArrowType::Decimal128(_, scale) => {
            let v = array.as_primitive::<Decimal128Type>().value(row);
            format!("\"{}\"", format_decimal(v, *scale))
        }
        ArrowType::Utf8 => quote(array.as_string::<i32>().value(row)),
        ArrowType::Binary => format!(
            "b64:{}",
            base64::engine::general_purpose::STANDARD.encode(array.as_binary::<i32>().value(row))
        ),
        ArrowType::FixedSizeBinary(_) => format!(
            "b64:{}",
            base64::engine::general_purpose::STANDARD.encode(array.as_fixed_size_binary().value(row))
        ),
        ArrowType::Date32 => format!("d{}", array.as_primitive::<Date32Type>().value(row)),
        ArrowType::Time32(TimeUnit::Millisecond) => {
            format!("t{}ms", array.as_primitive::<Time32MillisecondType>().value(row))
        }
        ArrowType::Time64(TimeUnit::Microsecond) => {
            format!("t{}us", array.as_primitive::<Time64MicrosecondType>().value(row))
        }
        ArrowType::Time64(TimeUnit::Nanosecond) => {
            format!("t{}ns", array.as_primitive::<Time64NanosecondType>().value(row))
        }
        ArrowType::Timestamp(unit, zone) => {
            let v = match unit {
                TimeUnit::Second => array.as_primitive::<TimestampSecondType>().value(row),
                TimeUnit::Millisecond => array.as_primitive::<TimestampMillisecondType>().value(row),
                TimeUnit::Microsecond => array.as_primitive::<TimestampMicrosecondType>().value(row),
                TimeUnit::Nanosecond => array.as_primitive::<TimestampNanosecondType>().value(row),
            };
            let unit = match unit {
                TimeUnit::Second => "s",
                TimeUnit::Millisecond => "ms",
                TimeUnit::Microsecond => "us",
                TimeUnit::Nanosecond => "ns",
            };
            let zone = zone.as_deref().map(|z| format!("@{z}")).unwrap_or_default();
            format!("ts{v}{unit}{zone}")
        }
        ArrowType::List(_) => {
            let list = array.as_list::<i32>();
            let values = list.value(row);
            let items: Vec<String> = (0..values.len()).map(|i| cell(values.as_ref(), i)).collect();
            format!("[{}]", items.join(","))
        }
        ArrowType::Map(_, _) => {
            let map = array.as_map();
            let entries = map.value(row);
            let keys = entries.column(0);
            let values = entries.column(1);
            let items: Vec<String> = (0..entries.len())
                .map(|i| format!("{}:{}", cell(keys.as_ref(), i), cell(values.as_ref(), i)))
                .collect();
            format!("{{{}}}", items.join(","))
        }
        ArrowType::Struct(fields) => {
            let s = array.as_struct();
            let items: Vec<String> = fields
                .iter()
                .zip(s.columns())
                .map(|(f, c)| format!("{}:{}", quote(f.name()), cell(c.as_ref(), row)))
                .collect();
            format!("{{{}}}", items.join(","))
        }
        other => panic!("unexpected Arrow type {other}"),
    }
}

pub fn format_decimal(v: i128, scale: i8) -> String {
    let negative = v < 0;
    let digits = v.unsigned_abs().to_string();
    let scale = scale as usize;
    let text = if scale == 0 {
        digits
    } else if digits.len() > scale {
        format!(
            "{}.{}",
            &digits[..digits.len() - scale],
            &digits[digits.len() - scale..]
        )
    } else {
        format!("0.{}{}", "0".repeat(scale - digits.len()), digits)
    };
    if negative {
        format!("-{text}")
    } else {
        text
    }
}
