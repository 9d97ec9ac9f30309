//! Fluss types → Arrow types. The log stores every row in the table's Arrow schema, so this
//! mapping is part of the storage format:
//!
//! | Fluss | Arrow |
//! | --- | --- |
//! | BOOLEAN, TINYINT, SMALLINT, INT, BIGINT | Boolean, Int8, Int16, Int32, Int64 |
//! | FLOAT, DOUBLE | Float32, Float64 |
//! | DECIMAL(p, s) | Decimal128(p, s) (Fluss precision ≤ 38) |
//! | CHAR(n), STRING | Utf8 |
//! | BINARY(n), BYTES | FixedSizeBinary(n), Binary |
//! | DATE | Date32 |
//! | TIME(p) | p ≤ 3: Time32(ms); p ≤ 6: Time64(µs); else Time64(ns) |
//! | TIMESTAMP(p) | Timestamp(unit, no zone), unit by p as for TIME (ms, µs, ns) |
//! | TIMESTAMP_LTZ(p) | Timestamp(unit, "UTC"), unit by p as for TIME |
//! | `ARRAY<T>` | List, item field named `element` |
//! | `MAP<K, V>` | Map, unsorted, entries struct `entries` (non-null) of `key` (non-null) and `value` |
//! | `ROW<...>` | Struct |
//!
//! Field nullability is the Fluss nullability, at every level.

use std::sync::Arc;

use arrow_schema::{DataType as ArrowType, Field as ArrowField, Fields, Schema as ArrowSchema};
use arrow_schema::{FieldRef, SchemaRef, TimeUnit};

use crate::types::{DataType, FieldType, Schema};

/// Name of the item field of every Arrow List made from a Fluss ARRAY.
pub const LIST_ITEM_NAME: &str = "element";
/// Name of the entries struct of every Arrow Map made from a Fluss MAP.
pub const MAP_ENTRIES_NAME: &str = "entries";
/// Time zone of every Arrow Timestamp made from a TIMESTAMP_LTZ.
pub const LTZ_TIME_ZONE: &str = "UTC";

/// The Arrow schema that stores rows of a Fluss table.
pub fn arrow_schema(schema: &Schema) -> SchemaRef {
    let fields: Vec<ArrowField> = schema
        .columns
        .iter()
        .map(|c| arrow_field(&c.name, &c.field_type))
        .collect();
    Arc::new(ArrowSchema::new(fields))
}

/// The Arrow field of a named Fluss column or ROW field.
pub fn arrow_field(name: &str, field_type: &FieldType) -> ArrowField {
    ArrowField::new(name, arrow_type(&field_type.data_type), field_type.nullable)
}

/// The Arrow unit that holds `precision` fractional-second digits exactly.
pub fn time_unit(precision: u8) -> TimeUnit {
    match precision {
        0..=3 => TimeUnit::Millisecond,
        4..=6 => TimeUnit::Microsecond,
        _ => TimeUnit::Nanosecond,
    }
}

/// The item field of the Arrow List of `ARRAY<element>`.
pub fn list_item_field(element: &FieldType) -> FieldRef {
    Arc::new(arrow_field(LIST_ITEM_NAME, element))
}

/// The entries field of the Arrow Map of `MAP<key, value>`; keys are never null.
pub fn map_entries_field(key: &FieldType, value: &FieldType) -> FieldRef {
    let entries = Fields::from(vec![
        ArrowField::new("key", arrow_type(&key.data_type), false),
        arrow_field("value", value),
    ]);
    Arc::new(ArrowField::new(
        MAP_ENTRIES_NAME,
        ArrowType::Struct(entries),
        false,
    ))
}

/// The Arrow type of a Fluss type.
pub fn arrow_type(data_type: &DataType) -> ArrowType {
    match data_type {
        DataType::Boolean => ArrowType::Boolean,
        DataType::TinyInt => ArrowType::Int8,
        DataType::SmallInt => ArrowType::Int16,
        DataType::Int => ArrowType::Int32,
        DataType::BigInt => ArrowType::Int64,
        DataType::Float => ArrowType::Float32,
        DataType::Double => ArrowType::Float64,
        DataType::Decimal { precision, scale } => {
            // Fluss scales are never negative and never above 38, so the cast is lossless.
            ArrowType::Decimal128(*precision, (*scale).min(38) as i8)
        }
        DataType::Char(_) | DataType::String => ArrowType::Utf8,
        DataType::Binary(n) => ArrowType::FixedSizeBinary(i32::try_from(*n).unwrap_or(i32::MAX)),
        DataType::Bytes => ArrowType::Binary,
        DataType::Date => ArrowType::Date32,
        DataType::Time(p) => match time_unit(*p) {
            TimeUnit::Millisecond => ArrowType::Time32(TimeUnit::Millisecond),
            unit => ArrowType::Time64(unit),
        },
        DataType::Timestamp(p) => ArrowType::Timestamp(time_unit(*p), None),
        DataType::TimestampLtz(p) => ArrowType::Timestamp(time_unit(*p), Some(Arc::from(LTZ_TIME_ZONE))),
        DataType::Array(element) => ArrowType::List(list_item_field(element)),
        DataType::Map { key, value } => ArrowType::Map(map_entries_field(key, value), false),
        DataType::Row(fields) => ArrowType::Struct(
            fields
                .iter()
                .map(|f| arrow_field(&f.name, &f.field_type))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Field;

    fn t(data_type: DataType) -> ArrowType {
        arrow_type(&data_type)
    }

    #[test]
    fn scalar_types_map_as_documented() {
        assert_eq!(t(DataType::Boolean), ArrowType::Boolean);
        assert_eq!(t(DataType::TinyInt), ArrowType::Int8);
        assert_eq!(t(DataType::SmallInt), ArrowType::Int16);
        assert_eq!(t(DataType::Int), ArrowType::Int32);
        assert_eq!(t(DataType::BigInt), ArrowType::Int64);
        assert_eq!(t(DataType::Float), ArrowType::Float32);
        assert_eq!(t(DataType::Double), ArrowType::Float64);
        assert_eq!(
            t(DataType::Decimal {
                precision: 38,
                scale: 10
            }),
            ArrowType::Decimal128(38, 10)
        );
        assert_eq!(t(DataType::Char(3)), ArrowType::Utf8);
        assert_eq!(t(DataType::String), ArrowType::Utf8);
        assert_eq!(t(DataType::Binary(16)), ArrowType::FixedSizeBinary(16));
        assert_eq!(t(DataType::Bytes), ArrowType::Binary);
        assert_eq!(t(DataType::Date), ArrowType::Date32);
    }

    #[test]
    fn temporal_units_follow_precision() {
        let cases = [
            (0, TimeUnit::Millisecond),
            (3, TimeUnit::Millisecond),
            (4, TimeUnit::Microsecond),
            (6, TimeUnit::Microsecond),
            (7, TimeUnit::Nanosecond),
            (9, TimeUnit::Nanosecond),
        ];
        for (p, unit) in cases {
            let time = t(DataType::Time(p));
            if unit == TimeUnit::Millisecond {
                assert_eq!(time, ArrowType::Time32(unit));
            } else {
                assert_eq!(time, ArrowType::Time64(unit));
            }
            assert_eq!(t(DataType::Timestamp(p)), ArrowType::Timestamp(unit, None));
            assert_eq!(
                t(DataType::TimestampLtz(p)),
                ArrowType::Timestamp(unit, Some("UTC".into()))
            );
        }
    }

    #[test]
    fn nested_types_and_nullability() {
        let schema = Schema::new(vec![
            Field::new(
                "tags",
                FieldType::nullable(DataType::Array(Box::new(FieldType::not_null(DataType::Int)))),
            ),
            Field::new(
                "_kafka_headers",
                FieldType::nullable(DataType::Map {
                    key: Box::new(FieldType::not_null(DataType::String)),
                    value: Box::new(FieldType::nullable(DataType::Bytes)),
                }),
            ),
            Field::new(
                "r",
                FieldType::not_null(DataType::Row(vec![Field::new(
                    "a",
                    FieldType::nullable(DataType::Date),
                )])),
            ),
        ]);
        let arrow = arrow_schema(&schema);
        let tags = arrow.field(0);
        assert!(tags.is_nullable());
        let ArrowType::List(item) = tags.data_type() else {
            panic!("{tags:?}")
        };
        assert_eq!(item.name(), "element");
        assert!(!item.is_nullable());
        let ArrowType::Map(entries, sorted) = arrow.field(1).data_type() else {
            panic!()
        };
        assert!(!sorted);
        assert_eq!(entries.name(), "entries");
        assert!(!entries.is_nullable());
        let ArrowType::Struct(kv) = entries.data_type() else {
            panic!()
        };
        assert_eq!((kv[0].name().as_str(), kv[0].is_nullable()), ("key", false));
        assert_eq!(kv[0].data_type(), &ArrowType::Utf8);
        assert_eq!((kv[1].name().as_str(), kv[1].is_nullable()), ("value", true));
        assert_eq!(kv[1].data_type(), &ArrowType::Binary);
        let r = arrow.field(2);
        assert!(!r.is_nullable());
        assert_eq!(
            r.data_type(),
            &ArrowType::Struct(Fields::from(vec![ArrowField::new("a", ArrowType::Date32, true)]))
        );
    }
}
