//! Fluss types, Kafka-mapping validation, and conversion of Kafka records into Arrow columns.

pub mod mapping;
pub mod types;

pub use mapping::{KafkaMapping, SystemColumns, ValueLayout, ValueType};
pub use types::{DataType, Field, FieldType, Schema};
