//! Fluss types, Kafka-mapping validation, and conversion of Kafka records into Arrow columns.

pub mod types;

pub use types::{DataType, Field, FieldType, Schema};
