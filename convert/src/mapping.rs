//! The Kafka mapping of a table: its `table.kafka.*` options and system columns, validated
//! against the schema at CREATE and ALTER (shared/spec/behaviour.md "Tables, validated ...").
//!
//! `validate_kafka_mapping` is the single place these rules live; the converter compiles its
//! plan from the `KafkaMapping` it returns.

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
