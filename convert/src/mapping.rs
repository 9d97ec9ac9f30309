//! The Kafka mapping of a table: its `table.kafka.*` options and system columns, validated
//! against the schema at CREATE and ALTER (behaviour.md "Tables, validated ...").
//!
//! `validate_kafka_mapping` is the single place these rules live; the converter compiles its
//! plan from the `KafkaMapping` it returns, so it may rely on every rule below holding:
//! - the table is not partitioned, has no primary key and uses the `arrow` log format;
//! - every column, ROW field, ARRAY element and MAP value is nullable (MAP keys keep their
//!   non-null constraint and are STRING at every depth);
//! - business nesting depth is at most [`MAX_NESTING_DEPTH`];
//! - system columns, when declared, have exactly their documented types;
//! - the value columns match the value type and layout (see `ValueType`).
//!
//! Option keys and enum values are checked whenever `table.kafka.*` keys are present (a typo
//! must not silently leave a table unmapped; keys are matched ignoring ASCII case and
//! surrounding whitespace, so `'TABLE.KAFKA.ENABLED'` is refused as [`MisspelledOption`]);
//! the schema is checked only when the mapping is enabled ("Disabled tables are not subject
//! to Kafka schema validation").

use std::collections::BTreeMap;
use std::fmt;

use thiserror::Error;

use crate::types::{DataType, Field, FieldType, Schema};

/// `table.kafka.convert.value.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueType {
    Binary,
    String,
    ParseJson,
}

/// `table.kafka.convert.value.layout` (only meaningful for `ParseJson`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueLayout {
    Flat,
    Nested,
}

/// Column indices (into `Schema::columns`) of the system columns a table declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SystemColumns {
    pub key: Option<usize>,
    pub headers: Option<usize>,
    pub metadata: Option<usize>,
    pub rescue: Option<usize>,
    /// `_kafka_value`: BYTES for binary, STRING for string, ROW<...> for nested JSON.
    pub value: Option<usize>,
}

/// A validated Kafka mapping: the converter may rely on every rule of the spec holding.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KafkaMapping {
    pub value_type: ValueType,
    /// As configured (default `Flat`); ignored by the converter for binary and string.
    pub layout: ValueLayout,
    /// `table.kafka.convert.key.type = binary` was given (it requires `_kafka_key`).
    pub key_binary: bool,
    pub system: SystemColumns,
}

pub const KEY_COLUMN: &str = "_kafka_key";
pub const HEADERS_COLUMN: &str = "_kafka_headers";
pub const METADATA_COLUMN: &str = "_kafka_metadata";
pub const RESCUE_COLUMN: &str = "_kafka_rescue";
pub const VALUE_COLUMN: &str = "_kafka_value";

/// The reserved top-level names; inside business ROWs they are ordinary names.
pub const SYSTEM_COLUMNS: [&str; 5] = [
    KEY_COLUMN,
    HEADERS_COLUMN,
    METADATA_COLUMN,
    RESCUE_COLUMN,
    VALUE_COLUMN,
];

pub const ENABLED_OPTION: &str = "table.kafka.enabled";
pub const VALUE_TYPE_OPTION: &str = "table.kafka.convert.value.type";
pub const VALUE_LAYOUT_OPTION: &str = "table.kafka.convert.value.layout";
pub const KEY_TYPE_OPTION: &str = "table.kafka.convert.key.type";
/// Every `table.kafka.*` key that exists; any other key with that prefix is refused.
pub const KAFKA_OPTIONS: [&str; 4] = [
    ENABLED_OPTION,
    VALUE_TYPE_OPTION,
    VALUE_LAYOUT_OPTION,
    KEY_TYPE_OPTION,
];
const KAFKA_OPTION_PREFIX: &str = "table.kafka.";

/// A table option key that differs from a key kafluss reads only in ASCII case or in
/// surrounding whitespace (`'TABLE.KAFKA.ENABLED'`, `' bucket.num'`). Such a key is refused:
/// stored as given it would be an unknown option, and the one meant would silently not apply.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "option '{key}' must be written '{expected}': option keys are case-sensitive and take no \
     surrounding spaces"
)]
pub struct MisspelledOption {
    /// The key as given.
    pub key: String,
    /// The key it stands for, as it must be written.
    pub expected: &'static str,
}

impl MisspelledOption {
    /// `Err` when `key` is one of `known` but for ASCII case or surrounding whitespace; `Ok`
    /// when it is spelled exactly as one of them or is none of them.
    pub fn check(key: &str, known: &[&'static str]) -> Result<(), MisspelledOption> {
        let trimmed = key.trim();
        match known.iter().find(|option| option.eq_ignore_ascii_case(trimmed)) {
            Some(expected) if *expected != key => Err(MisspelledOption {
                key: key.to_string(),
                expected,
            }),
            _ => Ok(()),
        }
    }
}

/// Deepest allowed business nesting: a top-level business field (or a field of the nested
/// `_kafka_value` ROW) is depth 0; ROW fields, ARRAY elements and MAP values each add one.
pub const MAX_NESTING_DEPTH: usize = 64;

/// The log format Kafka mapping needs (`table.log.format`, default `arrow`).
pub const ARROW_LOG_FORMAT: &str = "arrow";

/// What the catalog knows about a table besides its schema and options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableShape<'a> {
    pub partitioned: bool,
    pub has_primary_key: bool,
    /// The effective `table.log.format` (the catalog resolves the default).
    pub log_format: &'a str,
}

/// Why a table cannot be mapped to a Kafka topic. Messages name the column path
/// (`customer.items[].qty`, map values `tags{}`) and the rule.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MappingError {
    #[error("Kafka mapping requires a non-partitioned table, but the table is partitioned")]
    Partitioned,
    #[error("Kafka mapping requires a log table, but the table has a primary key")]
    PrimaryKey,
    #[error("Kafka mapping requires 'table.log.format' = 'arrow', but it is '{0}'")]
    LogFormat(String),
    #[error("unknown table option '{0}': the Kafka options are {list}", list = KAFKA_OPTIONS.join(", "))]
    UnknownOption(String),
    #[error(transparent)]
    MisspelledOption(#[from] MisspelledOption),
    #[error("invalid value '{value}' for '{key}': expected one of {expected}")]
    InvalidOptionValue {
        key: String,
        value: String,
        expected: &'static str,
    },
    #[error("column '{path}' must be nullable: Kafka mapping requires every column and nested field to be nullable (remove NOT NULL)")]
    NotNullable { path: String },
    #[error("MAP key of '{path}' must be STRING for Kafka mapping, found {found}")]
    MapKeyNotString { path: String, found: String },
    #[error("column '{path}' nests {depth} levels deep: Kafka mapping allows at most {max}", max = MAX_NESTING_DEPTH)]
    TooDeep { path: String, depth: usize },
    #[error("system column '{column}' must have type {expected}, found {found}")]
    SystemColumnType {
        column: &'static str,
        expected: &'static str,
        found: String,
    },
    #[error("value type '{value_type}' requires a column '{column}' {expected}", column = VALUE_COLUMN)]
    ValueColumnMissing {
        value_type: ValueKind,
        expected: &'static str,
    },
    #[error("column '{column}' must have type {expected} for value type '{value_type}', found {found}", column = VALUE_COLUMN)]
    ValueColumnType {
        value_type: ValueKind,
        expected: &'static str,
        found: String,
    },
    #[error("column '{column}' is not allowed with value type '{value_type}': only '{value}' and the system columns {system} may be declared", value = VALUE_COLUMN, system = "_kafka_key, _kafka_headers, _kafka_metadata, _kafka_rescue")]
    BusinessColumnNotAllowed { column: String, value_type: ValueKind },
    #[error("column '{column}' is not allowed with the flat JSON layout: flat JSON maps top-level business columns (use 'table.kafka.convert.value.layout' = 'nested' for a value ROW)", column = VALUE_COLUMN)]
    ValueColumnInFlatLayout,
    #[error("the flat JSON layout needs at least one business column besides the system columns")]
    NoBusinessColumns,
    #[error("'{option}' = 'binary' requires a column '{column}' BYTES", option = KEY_TYPE_OPTION, column = KEY_COLUMN)]
    KeyColumnMissing,
}

/// The value conversion as users name it in messages (`binary`, `string`, `parse_json` plus
/// layout), so errors read like the options that were set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueKind {
    pub value_type: ValueType,
    pub layout: ValueLayout,
}

impl fmt::Display for ValueKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.value_type, self.layout) {
            (ValueType::Binary, _) => f.write_str("binary"),
            (ValueType::String, _) => f.write_str("string"),
            (ValueType::ParseJson, ValueLayout::Flat) => f.write_str("parse_json (flat layout)"),
            (ValueType::ParseJson, ValueLayout::Nested) => f.write_str("parse_json (nested layout)"),
        }
    }
}

/// The conversion options, parsed and checked, independent of the schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KafkaOptions {
    pub enabled: bool,
    pub value_type: ValueType,
    pub layout: ValueLayout,
    pub key_binary: bool,
}

/// Parses the `table.kafka.*` options: unknown keys and bad enum values are refused, enum
/// values are case-insensitive. A key is one of them when it starts with `table.kafka.` but
/// for ASCII case and surrounding whitespace: a Kafka key so spelled is refused as
/// [`MisspelledOption`], another as unknown. Other options are ignored here.
pub fn parse_kafka_options(options: &BTreeMap<String, String>) -> Result<KafkaOptions, MappingError> {
    let mut parsed = KafkaOptions {
        enabled: false,
        value_type: ValueType::ParseJson,
        layout: ValueLayout::Flat,
        key_binary: false,
    };
    for (key, value) in options {
        if !is_kafka_key(key) {
            continue;
        }
        let normalized = value.trim().to_ascii_lowercase();
        let invalid = |expected: &'static str| MappingError::InvalidOptionValue {
            key: key.clone(),
            value: value.clone(),
            expected,
        };
        match key.as_str() {
            ENABLED_OPTION => {
                parsed.enabled = match normalized.as_str() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(invalid("'true', 'false'")),
                }
            }
            VALUE_TYPE_OPTION => {
                parsed.value_type = match normalized.as_str() {
                    "binary" => ValueType::Binary,
                    "string" => ValueType::String,
                    "parse_json" => ValueType::ParseJson,
                    _ => return Err(invalid("'binary', 'string', 'parse_json'")),
                }
            }
            VALUE_LAYOUT_OPTION => {
                parsed.layout = match normalized.as_str() {
                    "flat" => ValueLayout::Flat,
                    "nested" => ValueLayout::Nested,
                    _ => return Err(invalid("'flat', 'nested'")),
                }
            }
            KEY_TYPE_OPTION => {
                parsed.key_binary = match normalized.as_str() {
                    "binary" => true,
                    _ => return Err(invalid("'binary'")),
                }
            }
            _ => {
                MisspelledOption::check(key, &KAFKA_OPTIONS)?;
                return Err(MappingError::UnknownOption(key.clone()));
            }
        }
    }
    Ok(parsed)
}

/// Whether `key` is in the `table.kafka.` options' space: it starts with that prefix but
/// for ASCII case and leading whitespace.
fn is_kafka_key(key: &str) -> bool {
    let prefix = key.trim_start().get(..KAFKA_OPTION_PREFIX.len());
    prefix.is_some_and(|prefix| prefix.eq_ignore_ascii_case(KAFKA_OPTION_PREFIX))
}

/// The keys of `options` that [`parse_kafka_options`] refuses as keys (whatever their values):
/// in the `table.kafka.` space but not one of [`KAFKA_OPTIONS`] as written. CREATE and ALTER
/// refuse them; a table an earlier version stored may hold some (before such keys were
/// matched ignoring case and spaces, `'TABLE.KAFKA.ENABLED'` was stored and not read).
pub fn unreadable_kafka_keys(options: &BTreeMap<String, String>) -> Vec<&str> {
    options
        .keys()
        .map(String::as_str)
        .filter(|key| is_kafka_key(key) && !KAFKA_OPTIONS.contains(key))
        .collect()
}

/// Validates a table's Kafka mapping. `Ok(None)` when `table.kafka.enabled` is absent or
/// false (the schema is then not checked); `Ok(Some(mapping))` when the table can be served.
pub fn validate_kafka_mapping(
    schema: &Schema,
    options: &BTreeMap<String, String>,
    shape: TableShape<'_>,
) -> Result<Option<KafkaMapping>, MappingError> {
    let options = parse_kafka_options(options)?;
    if !options.enabled {
        return Ok(None);
    }
    if shape.partitioned {
        return Err(MappingError::Partitioned);
    }
    if shape.has_primary_key {
        return Err(MappingError::PrimaryKey);
    }
    if !shape.log_format.eq_ignore_ascii_case(ARROW_LOG_FORMAT) {
        return Err(MappingError::LogFormat(shape.log_format.to_string()));
    }
    let kind = ValueKind {
        value_type: options.value_type,
        layout: options.layout,
    };

    let mut system = SystemColumns::default();
    let mut business_columns = 0usize;
    for (index, column) in schema.columns.iter().enumerate() {
        match column.name.as_str() {
            KEY_COLUMN => {
                check_system_type(column, &key_type(), "BYTES")?;
                system.key = Some(index);
            }
            HEADERS_COLUMN => {
                check_system_type(column, &headers_type(), "MAP<STRING, BYTES>")?;
                system.headers = Some(index);
            }
            METADATA_COLUMN => {
                check_system_type(
                    column,
                    &metadata_type(),
                    "ROW<timestamp TIMESTAMP_LTZ(3), timestamp_type INT, partition INT>",
                )?;
                system.metadata = Some(index);
            }
            RESCUE_COLUMN => {
                check_system_type(column, &rescue_type(), "STRING")?;
                system.rescue = Some(index);
            }
            VALUE_COLUMN => {
                check_value_column(column, kind)?;
                system.value = Some(index);
            }
            _ => {
                if kind.value_type != ValueType::ParseJson || kind.layout != ValueLayout::Flat {
                    return Err(MappingError::BusinessColumnNotAllowed {
                        column: column.name.clone(),
                        value_type: kind,
                    });
                }
                check_business_field(&column.field_type, &column.name, 0)?;
                business_columns += 1;
            }
        }
    }

    match (kind.value_type, kind.layout) {
        (ValueType::ParseJson, ValueLayout::Flat) => {
            if business_columns == 0 {
                return Err(MappingError::NoBusinessColumns);
            }
        }
        (value_type, _) => {
            if system.value.is_none() {
                let expected = match value_type {
                    ValueType::Binary => "BYTES",
                    ValueType::String => "STRING",
                    ValueType::ParseJson => "ROW<...>",
                };
                return Err(MappingError::ValueColumnMissing {
                    value_type: kind,
                    expected,
                });
            }
        }
    }
    if options.key_binary && system.key.is_none() {
        return Err(MappingError::KeyColumnMissing);
    }

    Ok(Some(KafkaMapping {
        value_type: options.value_type,
        layout: options.layout,
        key_binary: options.key_binary,
        system,
    }))
}

/// `_kafka_value`: its type follows the value conversion; the column itself must be nullable.
fn check_value_column(column: &Field, kind: ValueKind) -> Result<(), MappingError> {
    let found = || column.field_type.to_string();
    let (expected, type_ok) = match (kind.value_type, kind.layout) {
        (ValueType::ParseJson, ValueLayout::Flat) => return Err(MappingError::ValueColumnInFlatLayout),
        (ValueType::Binary, _) => ("BYTES", column.field_type.data_type == DataType::Bytes),
        (ValueType::String, _) => ("STRING", column.field_type.data_type == DataType::String),
        (ValueType::ParseJson, ValueLayout::Nested) => (
            "ROW<...>",
            matches!(column.field_type.data_type, DataType::Row(_)),
        ),
    };
    if !type_ok {
        return Err(MappingError::ValueColumnType {
            value_type: kind,
            expected,
            found: found(),
        });
    }
    if !column.field_type.nullable {
        return Err(MappingError::NotNullable {
            path: VALUE_COLUMN.to_string(),
        });
    }
    if let DataType::Row(fields) = &column.field_type.data_type {
        // The `_kafka_value` container does not count: its fields start at depth zero.
        for field in fields {
            let path = format!("{VALUE_COLUMN}.{}", field.name);
            check_business_field(&field.field_type, &path, 0)?;
        }
    }
    Ok(())
}

/// Checks nullability, MAP key types and depth of a business field at `depth`, recursively.
/// The recursion is bounded: it stops with `TooDeep` past `MAX_NESTING_DEPTH`.
fn check_business_field(field_type: &FieldType, path: &str, depth: usize) -> Result<(), MappingError> {
    if depth > MAX_NESTING_DEPTH {
        return Err(MappingError::TooDeep {
            path: path.to_string(),
            depth,
        });
    }
    if !field_type.nullable {
        return Err(MappingError::NotNullable {
            path: path.to_string(),
        });
    }
    match &field_type.data_type {
        DataType::Row(fields) => {
            for field in fields {
                check_business_field(&field.field_type, &format!("{path}.{}", field.name), depth + 1)?;
            }
        }
        DataType::Array(element) => {
            check_business_field(element, &format!("{path}[]"), depth + 1)?;
        }
        DataType::Map { key, value } => {
            // MAP keys keep Fluss's non-null constraint, so only their type is checked.
            if key.data_type != DataType::String {
                return Err(MappingError::MapKeyNotString {
                    path: path.to_string(),
                    found: key.data_type.to_string(),
                });
            }
            check_business_field(value, &format!("{path}{{}}"), depth + 1)?;
        }
        _ => {}
    }
    Ok(())
}

/// System columns must match their documented type exactly, every level nullable except MAP
/// keys (whose nullability Fluss fixes). A NOT NULL anywhere is reported as a nullability
/// error naming the path, the rest as a type mismatch.
fn check_system_type(
    column: &Field,
    expected: &FieldType,
    expected_text: &'static str,
) -> Result<(), MappingError> {
    if !same_type_ignoring_nullability(&column.field_type, expected) {
        return Err(MappingError::SystemColumnType {
            column: system_name(&column.name),
            expected: expected_text,
            found: column.field_type.to_string(),
        });
    }
    check_all_nullable(&column.field_type, &column.name)
}

fn system_name(name: &str) -> &'static str {
    SYSTEM_COLUMNS
        .iter()
        .find(|candidate| **candidate == name)
        .copied()
        .unwrap_or("system column")
}

fn check_all_nullable(field_type: &FieldType, path: &str) -> Result<(), MappingError> {
    if !field_type.nullable {
        return Err(MappingError::NotNullable {
            path: path.to_string(),
        });
    }
    match &field_type.data_type {
        DataType::Row(fields) => {
            for field in fields {
                check_all_nullable(&field.field_type, &format!("{path}.{}", field.name))?;
            }
        }
        DataType::Array(element) => check_all_nullable(element, &format!("{path}[]"))?,
        DataType::Map { value, .. } => check_all_nullable(value, &format!("{path}{{}}"))?,
        _ => {}
    }
    Ok(())
}

/// Structural equality that ignores nullability (checked separately) but not names or order.
fn same_type_ignoring_nullability(actual: &FieldType, expected: &FieldType) -> bool {
    match (&actual.data_type, &expected.data_type) {
        (DataType::Row(actual_fields), DataType::Row(expected_fields)) => {
            actual_fields.len() == expected_fields.len()
                && actual_fields.iter().zip(expected_fields).all(|(a, e)| {
                    a.name == e.name && same_type_ignoring_nullability(&a.field_type, &e.field_type)
                })
        }
        (DataType::Array(a), DataType::Array(e)) => same_type_ignoring_nullability(a, e),
        (DataType::Map { key: ak, value: av }, DataType::Map { key: ek, value: ev }) => {
            same_type_ignoring_nullability(ak, ek) && same_type_ignoring_nullability(av, ev)
        }
        (a, e) => a == e,
    }
}

/// `_kafka_key BYTES`.
pub fn key_type() -> FieldType {
    FieldType::nullable(DataType::Bytes)
}

/// `_kafka_headers MAP<STRING, BYTES>` (keys non-null, as Fluss MAP keys always are).
pub fn headers_type() -> FieldType {
    FieldType::nullable(DataType::Map {
        key: Box::new(FieldType::not_null(DataType::String)),
        value: Box::new(FieldType::nullable(DataType::Bytes)),
    })
}

/// `_kafka_metadata ROW<timestamp TIMESTAMP_LTZ(3), timestamp_type INT, partition INT>`.
pub fn metadata_type() -> FieldType {
    FieldType::nullable(DataType::Row(vec![
        Field::new("timestamp", FieldType::nullable(DataType::TimestampLtz(3))),
        Field::new("timestamp_type", FieldType::nullable(DataType::Int)),
        Field::new("partition", FieldType::nullable(DataType::Int)),
    ]))
}

/// `_kafka_rescue STRING`.
pub fn rescue_type() -> FieldType {
    FieldType::nullable(DataType::String)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, field_type: FieldType) -> Field {
        Field::new(name, field_type)
    }
    fn n(data_type: DataType) -> FieldType {
        FieldType::nullable(data_type)
    }
    fn nn(data_type: DataType) -> FieldType {
        FieldType::not_null(data_type)
    }
    fn row(fields: Vec<Field>) -> DataType {
        DataType::Row(fields)
    }
    fn array(element: FieldType) -> DataType {
        DataType::Array(Box::new(element))
    }
    fn map(key: FieldType, value: FieldType) -> DataType {
        DataType::Map {
            key: Box::new(key),
            value: Box::new(value),
        }
    }
    fn opts(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        let mut options: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        options
            .entry(ENABLED_OPTION.to_string())
            .or_insert_with(|| "true".to_string());
        options
    }
    const LOG: TableShape<'static> = TableShape {
        partitioned: false,
        has_primary_key: false,
        log_format: "arrow",
    };

    fn validate(columns: Vec<Field>, options: &[(&str, &str)]) -> Result<KafkaMapping, MappingError> {
        validate_kafka_mapping(&Schema::new(columns), &opts(options), LOG)
            .map(|mapping| mapping.expect("enabled"))
    }
    fn message(columns: Vec<Field>, options: &[(&str, &str)]) -> String {
        validate(columns, options)
            .expect_err("must be refused")
            .to_string()
    }

    /// The seed's `sales.orders` example.
    fn seed_orders() -> Vec<Field> {
        vec![
            col("order_id", n(DataType::BigInt)),
            col(
                "amount",
                n(DataType::Decimal {
                    precision: 18,
                    scale: 2,
                }),
            ),
            col("_kafka_key", key_type()),
            col("_kafka_headers", headers_type()),
        ]
    }

    #[test]
    fn seed_example_is_flat_json_with_key_and_headers() {
        let mapping = validate(seed_orders(), &[]).unwrap();
        assert_eq!(mapping.value_type, ValueType::ParseJson);
        assert_eq!(mapping.layout, ValueLayout::Flat);
        assert!(!mapping.key_binary);
        assert_eq!(mapping.system.key, Some(2));
        assert_eq!(mapping.system.headers, Some(3));
        assert_eq!(mapping.system.value, None);
    }

    #[test]
    fn disabled_or_absent_skips_schema_validation() {
        let bad = Schema::new(vec![col("x", nn(DataType::Int))]);
        let none = BTreeMap::new();
        assert_eq!(validate_kafka_mapping(&bad, &none, LOG), Ok(None));
        let mut off = BTreeMap::new();
        off.insert(ENABLED_OPTION.to_string(), "FALSE".to_string());
        let partitioned = TableShape {
            partitioned: true,
            ..LOG
        };
        assert_eq!(validate_kafka_mapping(&bad, &off, partitioned), Ok(None));
    }

    #[test]
    fn eligibility_partitioned_primary_key_log_format() {
        let schema = Schema::new(seed_orders());
        let options = opts(&[]);
        let partitioned = TableShape {
            partitioned: true,
            ..LOG
        };
        let err = validate_kafka_mapping(&schema, &options, partitioned).unwrap_err();
        assert!(err.to_string().contains("non-partitioned"), "{err}");
        let keyed = TableShape {
            has_primary_key: true,
            ..LOG
        };
        let err = validate_kafka_mapping(&schema, &options, keyed).unwrap_err();
        assert!(err.to_string().contains("primary key"), "{err}");
        let indexed = TableShape {
            log_format: "indexed",
            ..LOG
        };
        let err = validate_kafka_mapping(&schema, &options, indexed).unwrap_err();
        assert!(err.to_string().contains("'table.log.format' = 'arrow'"), "{err}");
        assert!(err.to_string().contains("indexed"), "{err}");
        let upper = TableShape {
            log_format: "ARROW",
            ..LOG
        };
        assert!(validate_kafka_mapping(&schema, &options, upper).is_ok());
    }

    #[test]
    fn unknown_kafka_option_is_refused_even_when_disabled() {
        let schema = Schema::new(seed_orders());
        let mut options = BTreeMap::new();
        options.insert("table.kafka.enable".to_string(), "true".to_string());
        let err = validate_kafka_mapping(&schema, &options, LOG).unwrap_err();
        assert_eq!(err, MappingError::UnknownOption("table.kafka.enable".to_string()));
        assert!(err.to_string().contains("table.kafka.enabled"), "{err}");
        // Other options are not ours to judge.
        options.clear();
        options.insert("bucket.num".to_string(), "4".to_string());
        assert_eq!(validate_kafka_mapping(&schema, &options, LOG), Ok(None));
    }

    /// A Kafka key differing only in case or surrounding spaces was stored as an unknown
    /// option, leaving the table silently unmapped: it is refused naming the key as given and
    /// as it must be written, enabled or not.
    #[test]
    fn kafka_keys_in_another_case_or_with_spaces_are_refused() {
        let schema = Schema::new(seed_orders());
        for (key, expected) in [
            ("TABLE.KAFKA.ENABLED", ENABLED_OPTION),
            ("Table.Kafka.Enabled", ENABLED_OPTION),
            (" table.kafka.enabled", ENABLED_OPTION),
            ("table.kafka.enabled\t", ENABLED_OPTION),
            ("table.kafka.CONVERT.value.type", VALUE_TYPE_OPTION),
        ] {
            for value in ["true", "false"] {
                let options = BTreeMap::from([(key.to_string(), value.to_string())]);
                let err = validate_kafka_mapping(&schema, &options, LOG).unwrap_err();
                assert_eq!(
                    err,
                    MappingError::MisspelledOption(MisspelledOption {
                        key: key.to_string(),
                        expected
                    })
                );
                let text = err.to_string();
                assert!(text.contains(&format!("'{key}'")), "{text}");
                assert!(text.contains(&format!("must be written '{expected}'")), "{text}");
            }
        }
        // Beside the right spelling, whichever sorts first.
        let options = BTreeMap::from([
            (ENABLED_OPTION.to_string(), "false".to_string()),
            ("TABLE.KAFKA.ENABLED".to_string(), "true".to_string()),
        ]);
        assert!(matches!(
            validate_kafka_mapping(&schema, &options, LOG),
            Err(MappingError::MisspelledOption(_))
        ));
        // The prefix in another case with an unknown rest is an unknown Kafka option.
        let options = BTreeMap::from([("Table.Kafka.Enable".to_string(), "true".to_string())]);
        assert_eq!(
            validate_kafka_mapping(&schema, &options, LOG),
            Err(MappingError::UnknownOption("Table.Kafka.Enable".to_string()))
        );
        assert_eq!(
            MisspelledOption::check("bucket.num", &["bucket.num"]),
            Ok(()),
            "spelled right"
        );
        assert_eq!(MisspelledOption::check("other", &["bucket.num"]), Ok(()));
    }

    /// The keys a table stored by an earlier version may hold that fail the mapping as keys:
    /// removed, the same options parse.
    #[test]
    fn unreadable_kafka_keys_are_the_ones_refused_as_keys() {
        let options = BTreeMap::from(
            [
                (ENABLED_OPTION, "true"),
                (VALUE_TYPE_OPTION, "bogus"),
                ("TABLE.KAFKA.KEY.TYPE", "binary"),
                (" table.kafka.enabled", "true"),
                ("Table.Kafka.Convert.Value.Layout", "nested"),
                ("table.kafka", "x"),
                ("table.log.ttl", "1d"),
                ("BUCKET.NUM", "3"),
            ]
            .map(|(key, value)| (key.to_string(), value.to_string())),
        );
        assert_eq!(
            unreadable_kafka_keys(&options),
            [
                " table.kafka.enabled",
                "TABLE.KAFKA.KEY.TYPE",
                "Table.Kafka.Convert.Value.Layout"
            ]
        );
        let mut rest = options.clone();
        for key in unreadable_kafka_keys(&options) {
            rest.remove(key);
        }
        // What is left fails on a value, not a key.
        assert!(matches!(
            parse_kafka_options(&rest),
            Err(MappingError::InvalidOptionValue { .. })
        ));
        rest.remove(VALUE_TYPE_OPTION);
        assert!(parse_kafka_options(&rest).unwrap().enabled);
        assert!(unreadable_kafka_keys(&rest).is_empty());
    }

    #[test]
    fn enum_values_are_case_insensitive_and_bad_values_refused() {
        let mapping = validate(
            vec![
                col("_kafka_value", n(DataType::Bytes)),
                col("_kafka_key", key_type()),
            ],
            &[
                (ENABLED_OPTION, "TRUE"),
                (VALUE_TYPE_OPTION, "Binary"),
                (KEY_TYPE_OPTION, "BINARY"),
            ],
        )
        .unwrap();
        assert_eq!(mapping.value_type, ValueType::Binary);
        assert!(mapping.key_binary);
        for (key, value, expected) in [
            (ENABLED_OPTION, "yes", "'true', 'false'"),
            (VALUE_TYPE_OPTION, "json", "'binary', 'string', 'parse_json'"),
            (VALUE_LAYOUT_OPTION, "deep", "'flat', 'nested'"),
            (KEY_TYPE_OPTION, "string", "'binary'"),
        ] {
            let text = message(seed_orders(), &[(key, value)]);
            assert!(
                text.contains(key) && text.contains(value) && text.contains(expected),
                "{text}"
            );
        }
    }

    #[test]
    fn top_level_column_must_be_nullable() {
        let text = message(vec![col("order_id", nn(DataType::BigInt))], &[]);
        assert!(text.contains("'order_id' must be nullable"), "{text}");
    }

    #[test]
    fn nested_row_field_array_element_and_map_value_must_be_nullable() {
        let customer = |qty: FieldType| {
            col(
                "customer",
                n(row(vec![col("items", n(array(n(row(vec![col("qty", qty)])))))])),
            )
        };
        assert!(validate(vec![customer(n(DataType::Int))], &[]).is_ok());
        let text = message(vec![customer(nn(DataType::Int))], &[]);
        assert!(text.contains("'customer.items[].qty' must be nullable"), "{text}");

        let text = message(vec![col("xs", n(array(nn(DataType::Int))))], &[]);
        assert!(text.contains("'xs[]' must be nullable"), "{text}");

        let text = message(
            vec![col("tags", n(map(nn(DataType::String), nn(DataType::String))))],
            &[],
        );
        assert!(text.contains("'tags{}' must be nullable"), "{text}");
    }

    #[test]
    fn map_keys_keep_non_null_and_must_be_string_at_every_depth() {
        let ok = col("tags", n(map(nn(DataType::String), n(DataType::Int))));
        assert!(validate(vec![ok], &[]).is_ok());
        let nullable_key = col("tags", n(map(n(DataType::String), n(DataType::Int))));
        assert!(validate(vec![nullable_key], &[]).is_ok());

        let text = message(vec![col("m", n(map(nn(DataType::Int), n(DataType::Int))))], &[]);
        assert!(
            text.contains("MAP key of 'm' must be STRING") && text.contains("INT"),
            "{text}"
        );

        let inner = n(map(nn(DataType::BigInt), n(DataType::Int)));
        let outer = col("m", n(map(nn(DataType::String), n(array(inner)))));
        let text = message(vec![outer], &[]);
        assert!(text.contains("MAP key of 'm{}[]' must be STRING"), "{text}");
    }

    /// A field nested `levels` ROWs deep below a top-level column named `c`.
    fn nested_rows(levels: usize) -> FieldType {
        let mut field_type = n(DataType::Int);
        for _ in 0..levels {
            field_type = n(row(vec![col("f", field_type)]));
        }
        field_type
    }

    #[test]
    fn depth_64_is_allowed_65_is_refused() {
        assert!(validate(vec![col("c", nested_rows(64))], &[]).is_ok());
        let text = message(vec![col("c", nested_rows(65))], &[]);
        assert!(
            text.contains("65 levels deep") && text.contains("at most 64"),
            "{text}"
        );
        assert!(text.contains(&format!("'c{}'", ".f".repeat(65))), "{text}");
    }

    #[test]
    fn depth_counts_arrays_and_map_values_too() {
        let mut field_type = n(DataType::Int);
        for level in 0..64 {
            field_type = match level % 3 {
                0 => n(array(field_type)),
                1 => n(map(nn(DataType::String), field_type)),
                _ => n(row(vec![col("f", field_type)])),
            };
        }
        assert!(validate(vec![col("c", field_type.clone())], &[]).is_ok());
        let deeper = n(array(field_type));
        let text = message(vec![col("c", deeper)], &[]);
        assert!(
            text.contains("65 levels") && text.starts_with("column 'c[][].f{}[].f{}"),
            "{text}"
        );
    }

    #[test]
    fn nested_value_container_does_not_count_towards_depth() {
        let options = [(VALUE_LAYOUT_OPTION, "nested")];
        let value = |levels| col("_kafka_value", n(row(vec![col("c", nested_rows(levels))])));
        assert!(validate(vec![value(64)], &options).is_ok());
        let text = message(vec![value(65)], &options);
        assert!(
            text.contains("'_kafka_value.c.f") && text.contains("65 levels"),
            "{text}"
        );
    }

    #[test]
    fn system_columns_have_exact_types() {
        let cases = [
            (col("_kafka_key", n(DataType::String)), "BYTES"),
            (
                col(
                    "_kafka_headers",
                    n(map(nn(DataType::String), n(DataType::String))),
                ),
                "MAP<STRING, BYTES>",
            ),
            (col("_kafka_rescue", n(DataType::Bytes)), "STRING"),
            (
                col(
                    "_kafka_metadata",
                    n(row(vec![
                        col("timestamp_type", n(DataType::Int)),
                        col("timestamp", n(DataType::TimestampLtz(3))),
                        col("partition", n(DataType::Int)),
                    ])),
                ),
                "ROW<timestamp TIMESTAMP_LTZ(3), timestamp_type INT, partition INT>",
            ),
            (
                col(
                    "_kafka_metadata",
                    n(row(vec![
                        col("timestamp", n(DataType::TimestampLtz(6))),
                        col("timestamp_type", n(DataType::Int)),
                        col("partition", n(DataType::Int)),
                    ])),
                ),
                "ROW<timestamp",
            ),
        ];
        for (system_column, expected) in cases {
            let name = system_column.name.clone();
            let text = message(vec![col("a", n(DataType::Int)), system_column], &[]);
            assert!(
                text.contains(&format!("system column '{name}' must have type")) && text.contains(expected),
                "{text}"
            );
        }
        let all = vec![
            col("a", n(DataType::Int)),
            col("_kafka_key", key_type()),
            col("_kafka_headers", headers_type()),
            col("_kafka_metadata", metadata_type()),
            col("_kafka_rescue", rescue_type()),
        ];
        let mapping = validate(all, &[]).unwrap();
        assert_eq!(
            mapping.system,
            SystemColumns {
                key: Some(1),
                headers: Some(2),
                metadata: Some(3),
                rescue: Some(4),
                value: None
            }
        );
    }

    #[test]
    fn system_columns_must_be_nullable_at_every_level() {
        let text = message(
            vec![col("a", n(DataType::Int)), col("_kafka_key", nn(DataType::Bytes))],
            &[],
        );
        assert!(text.contains("'_kafka_key' must be nullable"), "{text}");
        let headers = col(
            "_kafka_headers",
            n(map(nn(DataType::String), nn(DataType::Bytes))),
        );
        let text = message(vec![col("a", n(DataType::Int)), headers], &[]);
        assert!(text.contains("'_kafka_headers{}' must be nullable"), "{text}");
        let metadata = col(
            "_kafka_metadata",
            n(row(vec![
                col("timestamp", n(DataType::TimestampLtz(3))),
                col("timestamp_type", nn(DataType::Int)),
                col("partition", n(DataType::Int)),
            ])),
        );
        let text = message(vec![col("a", n(DataType::Int)), metadata], &[]);
        assert!(
            text.contains("'_kafka_metadata.timestamp_type' must be nullable"),
            "{text}"
        );
        let text = message(
            vec![
                col("a", n(DataType::Int)),
                col("_kafka_rescue", nn(DataType::String)),
            ],
            &[],
        );
        assert!(text.contains("'_kafka_rescue' must be nullable"), "{text}");
    }

    #[test]
    fn binary_needs_bytes_value_and_only_system_columns() {
        let options = [(VALUE_TYPE_OPTION, "binary")];
        let mapping = validate(
            vec![
                col("_kafka_value", n(DataType::Bytes)),
                col("_kafka_metadata", metadata_type()),
            ],
            &options,
        )
        .unwrap();
        assert_eq!(mapping.system.value, Some(0));
        let text = message(vec![col("_kafka_key", key_type())], &options);
        assert!(
            text.contains("'binary' requires a column '_kafka_value' BYTES"),
            "{text}"
        );
        let text = message(vec![col("_kafka_value", n(DataType::String))], &options);
        assert!(
            text.contains("must have type BYTES for value type 'binary', found STRING"),
            "{text}"
        );
        let text = message(
            vec![
                col("_kafka_value", n(DataType::Bytes)),
                col("order_id", n(DataType::BigInt)),
            ],
            &options,
        );
        assert!(
            text.contains("column 'order_id' is not allowed with value type 'binary'"),
            "{text}"
        );
        let text = message(vec![col("_kafka_value", nn(DataType::Bytes))], &options);
        assert!(text.contains("'_kafka_value' must be nullable"), "{text}");
    }

    #[test]
    fn string_needs_string_value_and_ignores_layout() {
        let options = [(VALUE_TYPE_OPTION, "string"), (VALUE_LAYOUT_OPTION, "nested")];
        assert!(validate(vec![col("_kafka_value", n(DataType::String))], &options).is_ok());
        let text = message(vec![col("_kafka_value", n(DataType::Bytes))], &options);
        assert!(
            text.contains("must have type STRING for value type 'string'"),
            "{text}"
        );
        let text = message(vec![col("_kafka_rescue", rescue_type())], &options);
        assert!(
            text.contains("'string' requires a column '_kafka_value' STRING"),
            "{text}"
        );
        let text = message(
            vec![
                col("_kafka_value", n(DataType::String)),
                col("x", n(DataType::Int)),
            ],
            &options,
        );
        assert!(text.contains("column 'x' is not allowed"), "{text}");
    }

    #[test]
    fn flat_json_needs_business_columns_and_no_value_column() {
        let text = message(vec![col("_kafka_key", key_type())], &[]);
        assert!(text.contains("at least one business column"), "{text}");
        let text = message(
            vec![
                col("a", n(DataType::Int)),
                col("_kafka_value", n(DataType::Bytes)),
            ],
            &[(VALUE_TYPE_OPTION, "parse_json")],
        );
        assert!(
            text.contains("'_kafka_value' is not allowed with the flat JSON layout"),
            "{text}"
        );
    }

    #[test]
    fn nested_json_needs_value_row_and_only_system_columns() {
        let options = [(VALUE_LAYOUT_OPTION, "nested")];
        let value = col("_kafka_value", n(row(vec![col("order_id", n(DataType::BigInt))])));
        assert!(validate(vec![value.clone(), col("_kafka_rescue", rescue_type())], &options).is_ok());
        let text = message(vec![col("_kafka_key", key_type())], &options);
        assert!(
            text.contains("requires a column '_kafka_value' ROW<...>"),
            "{text}"
        );
        let text = message(vec![col("_kafka_value", n(DataType::String))], &options);
        assert!(
            text.contains("must have type ROW<...> for value type 'parse_json (nested layout)'"),
            "{text}"
        );
        let text = message(vec![value, col("b", n(DataType::Int))], &options);
        assert!(
            text.contains("column 'b' is not allowed with value type 'parse_json (nested layout)'"),
            "{text}"
        );
        let inner_not_null = col("_kafka_value", n(row(vec![col("id", nn(DataType::BigInt))])));
        let text = message(vec![inner_not_null], &options);
        assert!(text.contains("'_kafka_value.id' must be nullable"), "{text}");
    }

    #[test]
    fn key_type_binary_requires_key_column() {
        let options = [(KEY_TYPE_OPTION, "binary")];
        let text = message(vec![col("a", n(DataType::Int))], &options);
        assert!(
            text.contains("'table.kafka.convert.key.type' = 'binary' requires a column '_kafka_key' BYTES"),
            "{text}"
        );
        let mapping = validate(
            vec![col("a", n(DataType::Int)), col("_kafka_key", key_type())],
            &options,
        )
        .unwrap();
        assert!(mapping.key_binary);
    }

    #[test]
    fn system_names_are_ordinary_inside_business_rows() {
        let customer = col(
            "customer",
            n(row(vec![
                col("_kafka_key", n(DataType::Int)),
                col("_kafka_value", nn(DataType::Int)),
            ])),
        );
        let text = message(vec![customer], &[]);
        // Not a system-type error: the inner `_kafka_value` is a business field.
        assert!(
            text.contains("'customer._kafka_value' must be nullable"),
            "{text}"
        );
    }
}
