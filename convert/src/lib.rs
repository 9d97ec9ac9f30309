//! Fluss types, Kafka-mapping validation, and conversion of Kafka records into Arrow columns.
//!
//! A table version is compiled once into a [`ConversionPlan`] (`Send + Sync`, shared by the
//! cores through `Arc`); each core converts the records of a partition batch with
//! [`ConversionPlan::convert_batch_with`] and its own [`JsonScratch`], without locks. A batch
//! converts all or nothing: the first failing record is reported as a [`ConvertError`] naming
//! the record, the JSON path and the reason.

pub mod mapping;
pub mod types;

mod batch;
mod builders;
mod error;
mod json;
mod plan;
mod record;
mod rescue;
mod scan;
mod schema;
mod values;
mod writer;

pub use mapping::{KafkaMapping, SystemColumns, ValueLayout, ValueType};
pub use types::{DataType, Field, FieldType, Schema};

pub use batch::{BatchBuilder, MAX_BATCH_PAYLOAD};
pub use error::{ConvertError, PlanError, MAX_MESSAGE_BYTES};
pub use json::{JsonScratch, MAX_CONTAINER_MEMBERS};
pub use plan::{ConversionPlan, MAX_SCHEMA_DEPTH};
pub use record::{Header, KafkaRecord, TimestampType, NO_TIMESTAMP};
pub use scan::MAX_JSON_DEPTH;
pub use schema::{
    arrow_field, arrow_schema, arrow_type, time_unit, LIST_ITEM_NAME, LTZ_TIME_ZONE, MAP_ENTRIES_NAME,
};
