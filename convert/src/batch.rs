//! Converting the records of one partition batch into one Arrow `RecordBatch`.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::{BinaryBuilder, Int32Builder, StringBuilder, TimestampMillisecondBuilder};
use arrow_array::{ArrayRef, MapArray, RecordBatch, RecordBatchOptions, StructArray};
use arrow_buffer::{OffsetBuffer, ScalarBuffer};
use arrow_schema::{ArrowError, DataType as ArrowType, FieldRef, Fields};

use crate::builders::{offset, offsets_with_capacity, row_columns, Column, Data};
use crate::error::ConvertError;
use crate::json::JsonScratch;
use crate::onepass::OnePass;
use crate::path::Path;
use crate::plan::{ColumnSource, ConversionPlan, RowShape, ValuePlan};
use crate::record::{Header, KafkaRecord, NO_TIMESTAMP};
use crate::rescue::Rescue;
use crate::schema::LTZ_TIME_ZONE;
use crate::writer::{Refusal, ValueWriter};

/// Most payload bytes (keys, values, headers) in one batch. Rescue text can grow to about
/// 2.5× its input (array placeholders), so this keeps every 32-bit Arrow offset in range.
pub const MAX_BATCH_PAYLOAD: usize = 512 * 1024 * 1024;
/// Headers up to this count are deduplicated pairwise; more use a hash map.
const PAIRWISE_HEADER_DEDUP: usize = 16;

/// Builders of one partition batch. Push every record, then `finish`; after a failed push
/// the builder refuses to finish (the batch is all or nothing).
pub struct BatchBuilder<'p> {
    plan: &'p ConversionPlan,
    rows: usize,
    payload: usize,
    failed: Option<ConvertError>,
    key: Option<BinaryBuilder>,
    headers: Option<HeadersBuilder>,
    metadata: Option<MetadataBuilder>,
    rescue: Option<StringBuilder>,
    value: ValueColumns<'p>,
    rescue_text: String,
    bytes: Vec<u8>,
    /// The one-pass path's state (`onepass`), when the value row supports it.
    one_pass: Option<OnePass>,
}

enum ValueColumns<'p> {
    Binary(BinaryBuilder),
    String(StringBuilder),
    Flat {
        shape: &'p RowShape,
        columns: Vec<Column<'p>>,
    },
    Nested(Column<'p>),
}

impl<'p> BatchBuilder<'p> {
    pub fn new(plan: &'p ConversionPlan, capacity: usize) -> Self {
        Self::with_value_bytes(plan, capacity, 0)
    }

    /// [`BatchBuilder::new`] with room for `value_bytes` bytes of record values in a BYTES or
    /// STRING value column (JSON value plans ignore it), so copying the values in never moves
    /// the bytes already copied to a larger allocation.
    pub fn with_value_bytes(plan: &'p ConversionPlan, capacity: usize, value_bytes: usize) -> Self {
        let has = |source| plan.columns.contains(&source);
        let value = match &plan.value {
            ValuePlan::Binary => ValueColumns::Binary(BinaryBuilder::with_capacity(capacity, value_bytes)),
            ValuePlan::String => ValueColumns::String(StringBuilder::with_capacity(capacity, value_bytes)),
            ValuePlan::FlatJson(shape) => ValueColumns::Flat {
                shape,
                columns: row_columns(shape, capacity),
            },
            ValuePlan::NestedJson(shape) => ValueColumns::Nested(Column::new_row(shape, capacity)),
        };
        let one_pass = match &plan.value {
            ValuePlan::FlatJson(shape) | ValuePlan::NestedJson(shape) => OnePass::new(shape),
            _ => None,
        };
        Self {
            plan,
            rows: 0,
            payload: 0,
            failed: None,
            key: has(ColumnSource::Key).then(|| BinaryBuilder::with_capacity(capacity, 0)),
            headers: has(ColumnSource::Headers).then(|| HeadersBuilder::new(capacity)),
            metadata: has(ColumnSource::Metadata).then(|| MetadataBuilder::new(capacity)),
            rescue: has(ColumnSource::Rescue).then(|| StringBuilder::with_capacity(capacity, 0)),
            value,
            rescue_text: String::new(),
            bytes: Vec::new(),
            one_pass,
        }
    }

    /// Rows pushed so far.
    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Converts one record; `record_index` in errors is its position in this batch.
    pub fn push(&mut self, scratch: &mut JsonScratch, record: &KafkaRecord<'_>) -> Result<(), ConvertError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let result = self.push_unchecked(scratch, record);
        if let Err(error) = &result {
            self.failed = Some(error.clone());
        }
        result
    }

    fn push_unchecked(
        &mut self,
        scratch: &mut JsonScratch,
        record: &KafkaRecord<'_>,
    ) -> Result<(), ConvertError> {
        let index = self.rows;
        let fail = |reason: String| ConvertError::new(index, String::new(), reason);
        self.payload = self.payload.saturating_add(record.payload_len());
        if self.payload > MAX_BATCH_PAYLOAD {
            return Err(fail(format!(
                "the batch holds more than {MAX_BATCH_PAYLOAD} bytes of keys, values and headers"
            )));
        }
        if let Some(key) = &mut self.key {
            key.append_option(record.key);
        }
        if let Some(headers) = &mut self.headers {
            headers.append(record.headers).map_err(fail)?;
        }
        if let Some(metadata) = &mut self.metadata {
            metadata.append(record);
        }
        let one_pass = match (record.value, self.one_pass.as_mut()) {
            (Some(bytes), Some(state)) if scratch.one_pass() => match &mut self.value {
                ValueColumns::Flat { shape, columns } => state.write_row(bytes, shape, columns),
                ValueColumns::Nested(Column {
                    data:
                        Data::Row {
                            nulls,
                            children,
                            shape,
                        },
                    ..
                }) => {
                    let written = state.write_row(bytes, shape, children);
                    if written {
                        nulls.append_non_null();
                    }
                    written
                }
                _ => false,
            },
            _ => false,
        };
        let rescued = match &mut self.value {
            _ if one_pass => false,
            ValueColumns::Binary(b) => {
                b.append_option(record.value);
                false
            }
            ValueColumns::String(b) => {
                match record.value.map(std::str::from_utf8).transpose() {
                    Ok(text) => b.append_option(text),
                    Err(e) => return Err(fail(format!("the value is not valid UTF-8: {e}"))),
                }
                false
            }
            ValueColumns::Flat { shape, columns } => match record.value {
                None => {
                    columns.iter_mut().for_each(Column::append_null);
                    false
                }
                Some(bytes) => {
                    let doc = scratch.parse(bytes).map_err(fail)?;
                    let mut writer = ValueWriter {
                        doc: &doc,
                        rescue: self.plan.has_rescue.then(Rescue::default),
                        record_index: index,
                        bytes: std::mem::take(&mut self.bytes),
                        reserved_names: true,
                    };
                    let written = writer.write_row(columns, shape, doc.root(), &Path::Root, true);
                    finish_record(writer, written, &doc, &mut self.rescue_text, &mut self.bytes)?
                }
            },
            ValueColumns::Nested(column) => match record.value {
                None => {
                    column.append_null();
                    false
                }
                Some(bytes) => {
                    let doc = scratch.parse(bytes).map_err(fail)?;
                    let mut writer = ValueWriter {
                        doc: &doc,
                        rescue: self.plan.has_rescue.then(Rescue::default),
                        record_index: index,
                        bytes: std::mem::take(&mut self.bytes),
                        reserved_names: false,
                    };
                    let written = writer.write(column, 0, &Path::Root);
                    finish_record(writer, written, &doc, &mut self.rescue_text, &mut self.bytes)?
                }
            },
        };
        if let Some(rescue) = &mut self.rescue {
            if rescued {
                rescue.append_value(&self.rescue_text);
            } else {
                rescue.append_null();
            }
        }
        self.rows += 1;
        Ok(())
    }

    /// The batch in the plan's Arrow schema.
    pub fn finish(self) -> Result<RecordBatch, ConvertError> {
        if let Some(error) = self.failed {
            return Err(error);
        }
        let rows = self.rows;
        self.build().map_err(|e| {
            ConvertError::new(
                rows,
                String::new(),
                format!("internal error building Arrow batch: {e}"),
            )
        })
    }

    fn build(mut self) -> Result<RecordBatch, ArrowError> {
        let schema = self.plan.schema.clone();
        let mut flat: Vec<Option<Column<'p>>> = Vec::new();
        let mut value: Option<ArrayRef> = None;
        // Moved out, not replaced: a placeholder builder would allocate (BinaryBuilder::new
        // reserves 1,024 items) and be dropped at once.
        match self.value {
            ValueColumns::Binary(mut b) => value = Some(Arc::new(b.finish())),
            ValueColumns::String(mut b) => value = Some(Arc::new(b.finish())),
            ValueColumns::Flat { columns, .. } => flat = columns.into_iter().map(Some).collect(),
            ValueColumns::Nested(column) => value = Some(column.finish()?),
        }
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(self.plan.columns.len());
        for (i, source) in self.plan.columns.iter().enumerate() {
            let missing = || ArrowError::SchemaError(format!("no builder for column {i}"));
            let field = schema.field(i);
            let array: ArrayRef = match source {
                ColumnSource::Key => Arc::new(self.key.as_mut().ok_or_else(missing)?.finish()),
                ColumnSource::Rescue => Arc::new(self.rescue.as_mut().ok_or_else(missing)?.finish()),
                ColumnSource::Headers => self
                    .headers
                    .take()
                    .ok_or_else(missing)?
                    .finish(field.data_type())?,
                ColumnSource::Metadata => self
                    .metadata
                    .take()
                    .ok_or_else(missing)?
                    .finish(field.data_type())?,
                ColumnSource::Value => value.take().ok_or_else(missing)?,
                ColumnSource::FlatField(n) => flat
                    .get_mut(*n)
                    .and_then(Option::take)
                    .ok_or_else(missing)?
                    .finish()?,
            };
            arrays.push(array);
        }
        RecordBatch::try_new_with_options(
            schema,
            arrays,
            &RecordBatchOptions::new().with_row_count(Some(self.rows)),
        )
    }
}

/// Turns the writer's outcome into "rescued or not", leaving rescue JSON in `rescue_text`.
fn finish_record(
    writer: ValueWriter<'_, '_>,
    written: Result<Option<usize>, Refusal>,
    doc: &crate::json::Doc<'_>,
    rescue_text: &mut String,
    bytes: &mut Vec<u8>,
) -> Result<bool, ConvertError> {
    let index = writer.record_index;
    *bytes = writer.bytes;
    match written {
        Ok(None) => Ok(false),
        Ok(Some(root)) => {
            rescue_text.clear();
            if let Some(rescue) = &writer.rescue {
                rescue.write(doc, root, rescue_text);
            }
            Ok(true)
        }
        Err(Refusal::Record(error)) => Err(error),
        Err(Refusal::Value(reason)) => Err(ConvertError::new(index, String::new(), reason)),
    }
}

/// `_kafka_headers`: MAP<STRING, BYTES>, last value wins for a repeated name.
struct HeadersBuilder {
    offsets: Vec<i32>,
    keys: StringBuilder,
    values: BinaryBuilder,
}

impl HeadersBuilder {
    fn new(capacity: usize) -> Self {
        Self {
            offsets: offsets_with_capacity(capacity),
            // Room for one header a row to start with (`new` would reserve 1,024 whatever the
            // batch).
            keys: StringBuilder::with_capacity(capacity, 0),
            values: BinaryBuilder::with_capacity(capacity, 0),
        }
    }

    /// Appends one record's headers, each name at the place of its last occurrence.
    fn append(&mut self, headers: &[Header<'_>]) -> Result<(), String> {
        let mut names = Vec::with_capacity(headers.len());
        for (i, (key, _)) in headers.iter().enumerate() {
            let name =
                std::str::from_utf8(key).map_err(|e| format!("header {i} name is not valid UTF-8: {e}"))?;
            names.push(name);
        }
        let last_at: Option<HashMap<&str, usize>> = (names.len() > PAIRWISE_HEADER_DEDUP)
            .then(|| names.iter().enumerate().map(|(i, n)| (*n, i)).collect());
        for (i, (_, value)) in headers.iter().enumerate() {
            let is_last = match &last_at {
                Some(last_at) => last_at.get(names[i]) == Some(&i),
                None => !names[i + 1..].contains(&names[i]),
            };
            if is_last {
                self.keys.append_value(names[i]);
                self.values.append_option(*value);
            }
        }
        self.offsets
            .push(offset(arrow_array::builder::ArrayBuilder::len(&self.keys)));
        Ok(())
    }

    fn finish(mut self, data_type: &ArrowType) -> Result<ArrayRef, ArrowError> {
        let ArrowType::Map(entries, _) = data_type else {
            return Err(ArrowError::SchemaError("_kafka_headers must be a MAP".into()));
        };
        let fields = struct_fields(entries)?;
        let entry_array = StructArray::try_new(
            fields,
            vec![Arc::new(self.keys.finish()), Arc::new(self.values.finish())],
            None,
        )?;
        Ok(Arc::new(MapArray::try_new(
            entries.clone(),
            OffsetBuffer::new(ScalarBuffer::from(self.offsets)),
            entry_array,
            None,
            false,
        )?))
    }
}

fn struct_fields(field: &FieldRef) -> Result<Fields, ArrowError> {
    match field.data_type() {
        ArrowType::Struct(fields) => Ok(fields.clone()),
        other => Err(ArrowError::SchemaError(format!("expected a struct, got {other}"))),
    }
}

/// `_kafka_metadata`: ROW<timestamp TIMESTAMP_LTZ(3), timestamp_type INT, partition INT>.
struct MetadataBuilder {
    timestamp: TimestampMillisecondBuilder,
    timestamp_type: Int32Builder,
    partition: Int32Builder,
}

impl MetadataBuilder {
    fn new(capacity: usize) -> Self {
        Self {
            timestamp: TimestampMillisecondBuilder::with_capacity(capacity).with_timezone(LTZ_TIME_ZONE),
            timestamp_type: Int32Builder::with_capacity(capacity),
            partition: Int32Builder::with_capacity(capacity),
        }
    }

    fn append(&mut self, record: &KafkaRecord<'_>) {
        if record.timestamp == NO_TIMESTAMP {
            self.timestamp.append_null();
            self.timestamp_type.append_value(-1);
        } else {
            self.timestamp.append_value(record.timestamp);
            self.timestamp_type.append_value(record.timestamp_type.code());
        }
        self.partition.append_value(record.partition);
    }

    fn finish(mut self, data_type: &ArrowType) -> Result<ArrayRef, ArrowError> {
        let ArrowType::Struct(fields) = data_type else {
            return Err(ArrowError::SchemaError("_kafka_metadata must be a ROW".into()));
        };
        Ok(Arc::new(StructArray::try_new(
            fields.clone(),
            vec![
                Arc::new(self.timestamp.finish()),
                Arc::new(self.timestamp_type.finish()),
                Arc::new(self.partition.finish()),
            ],
            None,
        )?))
    }
}
