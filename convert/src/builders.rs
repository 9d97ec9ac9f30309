//! Arrow builders for JSON-converted values: one `Column` tree per partition batch, made from
//! the plan's shapes. A batch that fails is dropped whole. Scalar columns other than
//! BINARY/BYTES are kafluss's own (`Primitive`, TIME/TIMESTAMP included; `BooleanColumn`;
//! `Utf8Builder`) so that they can be cut back to a row count: the one-pass path appends each
//! member's value as it reads it, and takes the appended values back when it leaves a record to
//! the two-pass path.

use std::sync::Arc;

use arrow_array::builder::{BinaryBuilder, FixedSizeBinaryBuilder, StringBuilder};
use arrow_array::types::{
    ArrowPrimitiveType, Date32Type, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type,
    Int64Type, Int8Type,
};
use arrow_array::{
    ArrayRef, BooleanArray, ListArray, MapArray, PrimitiveArray, StringArray, StructArray,
    Time32MillisecondArray, Time64MicrosecondArray, Time64NanosecondArray, TimestampMicrosecondArray,
    TimestampMillisecondArray, TimestampNanosecondArray,
};
use arrow_buffer::{BooleanBufferBuilder, Buffer, NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::{ArrowError, DataType as ArrowType, FieldRef, TimeUnit};

use crate::plan::{FieldShape, RowShape, Shape};
use crate::schema::{time_unit, LTZ_TIME_ZONE};

/// Which temporal rule a `Data::Temporal` column applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TemporalKind {
    Time,
    Timestamp,
    TimestampLtz,
}

/// The builder of one value column (or ROW field, ARRAY element, MAP value).
pub(crate) struct Column<'p> {
    /// Fluss type name for messages (`INT`, `DECIMAL(18, 2)`, `ROW`, ...).
    pub type_name: &'p str,
    pub data: Data<'p>,
}

pub(crate) enum Data<'p> {
    Boolean(BooleanColumn),
    Int8(Primitive<Int8Type>),
    Int16(Primitive<Int16Type>),
    Int32(Primitive<Int32Type>),
    Int64(Primitive<Int64Type>),
    Float32(Primitive<Float32Type>),
    Float64(Primitive<Float64Type>),
    Decimal {
        builder: Primitive<Decimal128Type>,
        precision: u8,
        scale: u8,
    },
    Utf8 {
        builder: Utf8Builder,
        max_chars: Option<u32>,
    },
    Binary(BinaryBuilder),
    FixedBinary {
        builder: FixedSizeBinaryBuilder,
        width: u32,
    },
    Date32(Primitive<Date32Type>),
    /// TIME, TIMESTAMP and TIMESTAMP_LTZ: values in `unit`, typed at `finish`.
    Temporal {
        values: Primitive<Int64Type>,
        kind: TemporalKind,
        precision: u8,
        unit: TimeUnit,
    },
    List {
        offsets: Vec<i32>,
        nulls: NullBufferBuilder,
        element: Box<Column<'p>>,
        field: &'p FieldRef,
    },
    Map {
        offsets: Vec<i32>,
        nulls: NullBufferBuilder,
        keys: StringBuilder,
        values: Box<Column<'p>>,
        entries: &'p FieldRef,
    },
    Row {
        nulls: NullBufferBuilder,
        children: Vec<Column<'p>>,
        shape: &'p RowShape,
    },
}

impl<'p> Column<'p> {
    pub(crate) fn new(field: &'p FieldShape, capacity: usize) -> Self {
        let data = match &field.shape {
            Shape::Boolean => Data::Boolean(BooleanColumn::with_capacity(capacity)),
            Shape::Int8 => Data::Int8(Primitive::with_capacity(capacity)),
            Shape::Int16 => Data::Int16(Primitive::with_capacity(capacity)),
            Shape::Int32 => Data::Int32(Primitive::with_capacity(capacity)),
            Shape::Int64 => Data::Int64(Primitive::with_capacity(capacity)),
            Shape::Float32 => Data::Float32(Primitive::with_capacity(capacity)),
            Shape::Float64 => Data::Float64(Primitive::with_capacity(capacity)),
            Shape::Decimal { precision, scale } => Data::Decimal {
                builder: Primitive::with_capacity(capacity),
                precision: *precision,
                scale: *scale,
            },
            Shape::Utf8 { max_chars } => Data::Utf8 {
                builder: Utf8Builder::with_capacity(capacity, capacity * 8),
                max_chars: *max_chars,
            },
            Shape::Binary => Data::Binary(BinaryBuilder::with_capacity(capacity, capacity * 8)),
            Shape::FixedBinary(width) => Data::FixedBinary {
                // The plan admits only widths that fit i32.
                builder: FixedSizeBinaryBuilder::with_capacity(capacity, *width as i32),
                width: *width,
            },
            Shape::Date32 => Data::Date32(Primitive::with_capacity(capacity)),
            Shape::Time { precision } => temporal(TemporalKind::Time, *precision, capacity),
            Shape::Timestamp { precision, utc } => {
                let kind = if *utc {
                    TemporalKind::TimestampLtz
                } else {
                    TemporalKind::Timestamp
                };
                temporal(kind, *precision, capacity)
            }
            Shape::List { element, field } => Data::List {
                offsets: offsets_with_capacity(capacity),
                nulls: NullBufferBuilder::new(capacity),
                element: Box::new(Column::new(element, capacity)),
                field,
            },
            Shape::Map { value, entries } => Data::Map {
                offsets: offsets_with_capacity(capacity),
                nulls: NullBufferBuilder::new(capacity),
                // Sized like the values (`new` would reserve 1,024 keys whatever the batch).
                keys: StringBuilder::with_capacity(capacity, 0),
                values: Box::new(Column::new(value, capacity)),
                entries,
            },
            Shape::Row(shape) => Data::Row {
                nulls: NullBufferBuilder::new(capacity),
                children: row_columns(shape, capacity),
                shape,
            },
        };
        Column {
            type_name: &field.type_name,
            data,
        }
    }

    /// The `_kafka_value` ROW of the nested JSON layout.
    pub(crate) fn new_row(shape: &'p RowShape, capacity: usize) -> Self {
        Column {
            type_name: "ROW",
            data: Data::Row {
                nulls: NullBufferBuilder::new(capacity),
                children: row_columns(shape, capacity),
                shape,
            },
        }
    }

    /// Values appended so far (nulls included).
    pub(crate) fn len(&self) -> usize {
        use arrow_array::builder::ArrayBuilder;
        match &self.data {
            Data::Boolean(b) => b.len(),
            Data::Int8(b) => b.len(),
            Data::Int16(b) => b.len(),
            Data::Int32(b) => b.len(),
            Data::Int64(b) => b.len(),
            Data::Float32(b) => b.len(),
            Data::Float64(b) => b.len(),
            Data::Decimal { builder, .. } => builder.len(),
            Data::Utf8 { builder, .. } => builder.len(),
            Data::Binary(b) => b.len(),
            Data::FixedBinary { builder, .. } => builder.len(),
            Data::Date32(b) => b.len(),
            Data::Temporal { values, .. } => values.len(),
            Data::List { nulls, .. } | Data::Map { nulls, .. } | Data::Row { nulls, .. } => nulls.len(),
        }
    }

    /// Cuts a scalar column back to `len` values. Only the one-pass path takes values back,
    /// and its rows hold only such columns (`one_pass_rules`); any other column is left as
    /// it is.
    pub(crate) fn truncate_scalar(&mut self, len: usize) {
        match &mut self.data {
            Data::Boolean(b) => b.truncate(len),
            Data::Int8(b) => b.truncate(len),
            Data::Int16(b) => b.truncate(len),
            Data::Int32(b) => b.truncate(len),
            Data::Int64(b) => b.truncate(len),
            Data::Float32(b) => b.truncate(len),
            Data::Float64(b) => b.truncate(len),
            Data::Decimal { builder, .. } => builder.truncate(len),
            Data::Utf8 { builder, .. } => builder.truncate(len),
            Data::Date32(b) => b.truncate(len),
            Data::Temporal { values, .. } => values.truncate(len),
            Data::Binary(_)
            | Data::FixedBinary { .. }
            | Data::List { .. }
            | Data::Map { .. }
            | Data::Row { .. } => {}
        }
    }

    pub(crate) fn append_null(&mut self) {
        match &mut self.data {
            Data::Boolean(b) => b.append_null(),
            Data::Int8(b) => b.append_null(),
            Data::Int16(b) => b.append_null(),
            Data::Int32(b) => b.append_null(),
            Data::Int64(b) => b.append_null(),
            Data::Float32(b) => b.append_null(),
            Data::Float64(b) => b.append_null(),
            Data::Decimal { builder, .. } => builder.append_null(),
            Data::Utf8 { builder, .. } => builder.append_null(),
            Data::Binary(b) => b.append_null(),
            Data::FixedBinary { builder, .. } => builder.append_null(),
            Data::Date32(b) => b.append_null(),
            Data::Temporal { values, .. } => values.append_null(),
            Data::List {
                offsets,
                nulls,
                element,
                ..
            } => {
                offsets.push(offset(element.len()));
                nulls.append_null();
            }
            Data::Map {
                offsets,
                nulls,
                values,
                ..
            } => {
                offsets.push(offset(values.len()));
                nulls.append_null();
            }
            Data::Row { nulls, children, .. } => {
                nulls.append_null();
                for child in children {
                    child.append_null();
                }
            }
        }
    }

    pub(crate) fn finish(self) -> Result<ArrayRef, ArrowError> {
        Ok(match self.data {
            Data::Boolean(b) => Arc::new(b.finish()?),
            Data::Int8(b) => Arc::new(b.finish()?),
            Data::Int16(b) => Arc::new(b.finish()?),
            Data::Int32(b) => Arc::new(b.finish()?),
            Data::Int64(b) => Arc::new(b.finish()?),
            Data::Float32(b) => Arc::new(b.finish()?),
            Data::Float64(b) => Arc::new(b.finish()?),
            Data::Decimal {
                builder,
                precision,
                scale,
            } => Arc::new(
                builder
                    .finish()?
                    .with_precision_and_scale(precision, scale as i8)?,
            ),
            Data::Utf8 { builder, .. } => Arc::new(builder.finish()?),
            Data::Binary(mut b) => Arc::new(b.finish()),
            Data::FixedBinary { mut builder, .. } => Arc::new(builder.finish()),
            Data::Date32(b) => Arc::new(b.finish()?),
            Data::Temporal {
                values, kind, unit, ..
            } => {
                let (values, nulls) = values.into_parts();
                finish_temporal(values, nulls, kind, unit)
            }
            Data::List {
                offsets,
                mut nulls,
                element,
                field,
            } => Arc::new(ListArray::try_new(
                field.clone(),
                OffsetBuffer::new(ScalarBuffer::from(offsets)),
                element.finish()?,
                nulls.finish(),
            )?),
            Data::Map {
                offsets,
                mut nulls,
                mut keys,
                values,
                entries,
            } => {
                let ArrowType::Struct(fields) = entries.data_type() else {
                    return Err(ArrowError::SchemaError("map entries must be a struct".into()));
                };
                let entry_array = StructArray::try_new(
                    fields.clone(),
                    vec![Arc::new(keys.finish()), values.finish()?],
                    None,
                )?;
                Arc::new(MapArray::try_new(
                    entries.clone(),
                    OffsetBuffer::new(ScalarBuffer::from(offsets)),
                    entry_array,
                    nulls.finish(),
                    false,
                )?)
            }
            Data::Row {
                mut nulls,
                children,
                shape,
            } => {
                let len = nulls.len();
                let arrays = children
                    .into_iter()
                    .map(Column::finish)
                    .collect::<Result<Vec<_>, _>>()?;
                Arc::new(StructArray::try_new_with_length(
                    shape.arrow_fields.clone(),
                    arrays,
                    nulls.finish(),
                    len,
                )?)
            }
        })
    }
}

/// The builder of a column of fixed-width values (integers, floats, DECIMAL, DATE).
pub(crate) struct Primitive<T: ArrowPrimitiveType> {
    values: Vec<T::Native>,
    nulls: NullBufferBuilder,
}

impl<T: ArrowPrimitiveType> Primitive<T> {
    fn with_capacity(capacity: usize) -> Self {
        Self {
            values: Vec::with_capacity(capacity),
            nulls: NullBufferBuilder::new(capacity),
        }
    }

    #[inline]
    pub(crate) fn append_value(&mut self, value: T::Native) {
        self.values.push(value);
        self.nulls.append_non_null();
    }

    pub(crate) fn append_null(&mut self) {
        self.values.push(T::Native::default());
        self.nulls.append_null();
    }

    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }

    fn truncate(&mut self, len: usize) {
        self.values.truncate(len);
        self.nulls.truncate(len);
    }

    fn finish(self) -> Result<PrimitiveArray<T>, ArrowError> {
        let (values, nulls) = self.into_parts();
        PrimitiveArray::try_new(ScalarBuffer::from(values), nulls)
    }

    fn into_parts(mut self) -> (Vec<T::Native>, Option<arrow_buffer::NullBuffer>) {
        let nulls = self.nulls.finish();
        (self.values, nulls)
    }
}

/// The builder of a BOOLEAN column.
pub(crate) struct BooleanColumn {
    values: BooleanBufferBuilder,
    nulls: NullBufferBuilder,
}

impl BooleanColumn {
    fn with_capacity(capacity: usize) -> Self {
        Self {
            values: BooleanBufferBuilder::new(capacity),
            nulls: NullBufferBuilder::new(capacity),
        }
    }

    #[inline]
    pub(crate) fn append_value(&mut self, value: bool) {
        self.values.append(value);
        self.nulls.append_non_null();
    }

    pub(crate) fn append_null(&mut self) {
        self.values.append(false);
        self.nulls.append_null();
    }

    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }

    fn truncate(&mut self, len: usize) {
        self.values.truncate(len);
        self.nulls.truncate(len);
    }

    fn finish(mut self) -> Result<BooleanArray, ArrowError> {
        let nulls = self.nulls.finish();
        // `BooleanArray::new` panics on a length mismatch, which the appends above rule out.
        if nulls.as_ref().is_some_and(|n| n.len() != self.values.len()) {
            return Err(ArrowError::InvalidArgumentError(
                "BOOLEAN column: values and validity differ in length".into(),
            ));
        }
        Ok(BooleanArray::new(self.values.finish(), nulls))
    }
}

/// The builder of a STRING/CHAR column. Arrow's `StringBuilder` takes only `&str`; this one
/// also takes the bytes of a string that its caller has checked are UTF-8 (the one-pass scan
/// checks each JSON string body as it finds its end, and its other bytes are ASCII), so the
/// value is not checked a second time per row. `finish` builds the array with
/// `StringArray::try_new`, which checks the whole buffer once: bytes that were not UTF-8 would
/// fail the batch there, never make an invalid array.
pub(crate) struct Utf8Builder {
    values: Vec<u8>,
    offsets: Vec<i32>,
    nulls: NullBufferBuilder,
}

impl Utf8Builder {
    fn with_capacity(items: usize, bytes: usize) -> Self {
        Self {
            values: Vec::with_capacity(bytes),
            offsets: offsets_with_capacity(items),
            nulls: NullBufferBuilder::new(items),
        }
    }

    pub(crate) fn append_value(&mut self, value: &str) {
        self.append_utf8(value.as_bytes());
    }

    /// Appends `value`, which the caller has checked is UTF-8.
    #[inline]
    pub(crate) fn append_utf8(&mut self, value: &[u8]) {
        self.values.extend_from_slice(value);
        self.offsets.push(offset(self.values.len()));
        self.nulls.append_non_null();
    }

    pub(crate) fn append_null(&mut self) {
        self.offsets.push(offset(self.values.len()));
        self.nulls.append_null();
    }

    pub(crate) fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    fn truncate(&mut self, len: usize) {
        if len < self.len() {
            self.offsets.truncate(len + 1);
            let end = self.offsets.last().map_or(0, |&o| o as usize);
            self.values.truncate(end);
            self.nulls.truncate(len);
        }
    }

    fn finish(mut self) -> Result<StringArray, ArrowError> {
        StringArray::try_new(
            OffsetBuffer::new(ScalarBuffer::from(self.offsets)),
            Buffer::from_vec(self.values),
            self.nulls.finish(),
        )
    }
}

/// One builder per field of `shape`, in field order.
pub(crate) fn row_columns(shape: &RowShape, capacity: usize) -> Vec<Column<'_>> {
    shape.fields.iter().map(|f| Column::new(f, capacity)).collect()
}

fn temporal<'p>(kind: TemporalKind, precision: u8, capacity: usize) -> Data<'p> {
    Data::Temporal {
        values: Primitive::with_capacity(capacity),
        kind,
        precision,
        unit: time_unit(precision),
    }
}

fn finish_temporal(
    values: Vec<i64>,
    nulls: Option<arrow_buffer::NullBuffer>,
    kind: TemporalKind,
    unit: TimeUnit,
) -> ArrayRef {
    let zone = (kind == TemporalKind::TimestampLtz).then_some(LTZ_TIME_ZONE);
    match (kind, unit) {
        (TemporalKind::Time, TimeUnit::Millisecond | TimeUnit::Second) => {
            // Milliseconds of a day always fit i32.
            let millis: Vec<i32> = values.iter().map(|&v| v as i32).collect();
            Arc::new(Time32MillisecondArray::new(millis.into(), nulls))
        }
        (TemporalKind::Time, TimeUnit::Microsecond) => {
            Arc::new(Time64MicrosecondArray::new(values.into(), nulls))
        }
        (TemporalKind::Time, TimeUnit::Nanosecond) => {
            Arc::new(Time64NanosecondArray::new(values.into(), nulls))
        }
        (_, TimeUnit::Millisecond | TimeUnit::Second) => {
            Arc::new(TimestampMillisecondArray::new(values.into(), nulls).with_timezone_opt(zone))
        }
        (_, TimeUnit::Microsecond) => {
            Arc::new(TimestampMicrosecondArray::new(values.into(), nulls).with_timezone_opt(zone))
        }
        (_, TimeUnit::Nanosecond) => {
            Arc::new(TimestampNanosecondArray::new(values.into(), nulls).with_timezone_opt(zone))
        }
    }
}

pub(crate) fn offsets_with_capacity(capacity: usize) -> Vec<i32> {
    let mut offsets = Vec::with_capacity(capacity + 1);
    offsets.push(0);
    offsets
}

/// An Arrow offset. The batch payload limit keeps every child far below `i32::MAX`; were it
/// ever exceeded, the saturated offset makes Arrow refuse the array instead of wrapping.
pub(crate) fn offset(len: usize) -> i32 {
    i32::try_from(len).unwrap_or(i32::MAX)
}
