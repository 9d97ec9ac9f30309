//! Fluss types, Kafka-mapping validation, and conversion of Kafka records into Arrow columns.
//!
//! A table version is compiled once into a [`ConversionPlan`] (`Send + Sync`, shared by the
//! cores through `Arc`); each core converts the records of a partition batch with
//! [`ConversionPlan::convert_batch_with`] and its own [`JsonScratch`], without locks. A batch
//! converts all or nothing: the first failing record is reported as a [`ConvertError`] naming
//! the record, the JSON path and the reason.
//!
//! ```text
//! let plan = Arc::new(ConversionPlan::compile(&schema, &mapping)?);   // once per table version
//! let mut scratch = JsonScratch::default();                           // once per core
//! let batch: RecordBatch = plan.convert_batch_with(&mut scratch, records)?;
//! ```
//!
//! Rules where behaviour.md leaves a choice (each has a test):
//! - JSON nesting: at most [`MAX_JSON_DEPTH`] (64) containers below the root object, which does
//!   not count, as in the schema rule; so the deepest valid schema can always be filled.
//!   At most [`MAX_CONTAINER_MEMBERS`] members per object or array, the root included.
//! - Duplicate keys are invalid JSON anywhere in the value, also inside rescued members.
//! - Headers: a repeated name keeps its last value, at the place of its last occurrence;
//!   a record without headers stores an empty map.
//! - Flat layout: a member named like any system column is rescued (also with a null value);
//!   only a null `_kafka_rescue` member is ignored. Unknown members with a null value are
//!   rescued too (they are unknown all the same).
//! - DECIMAL strings accept `[+-]? (d+ [. d*] | . d+) ([eE] [+-]? d+)?`; trailing fraction
//!   zeros beyond the scale are accepted (`1.50` into scale 1) since nothing is rounded.
//! - TIME `HH:mm[:ss[.f{1,9}]]`; TIMESTAMP `yyyy-MM-ddTHH:mm[:ss[.f]]`; TIMESTAMP_LTZ adds `Z`
//!   or `±HH:MM[:SS]` (within ±18:00). More fraction digits than the precision are refused,
//!   never rounded; epoch milliseconds into TIMESTAMP_LTZ(p < 3) must be whole at p digits.
//! - BYTES/BINARY: standard Base64 with padding (RFC 4648 §4), canonical trailing bits.
//! - Rescue strings are re-escaped by serde_json (`\"`, `\\`, `\b \f \n \r \t`, other controls
//!   as `\u00xx`); numbers keep their source text.
//! - Error paths render ROW fields as `.name` (`["name"]` when not a plain word), array
//!   elements as `[i]` and map keys as `["key"]`; whole-value failures have no path.

pub mod calendar;
pub mod mapping;
pub mod types;

mod batch;
mod builders;
#[cfg(test)]
mod differential;
mod error;
mod json;
#[cfg(test)]
mod json_reference;
mod onepass;
mod path;
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
