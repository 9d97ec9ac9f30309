//! A table version compiled once into what converting a record needs: where each Arrow
//! column comes from, and for JSON values a tree of field shapes (type rule, Arrow field,
//! member lookup). The plan is immutable, `Send + Sync`, and shared by the cores via `Arc`.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{FieldRef, Fields, SchemaRef};

use crate::batch::BatchBuilder;
use crate::error::{ConvertError, PlanError};
use crate::json::JsonScratch;
use crate::mapping::{KafkaMapping, ValueLayout, ValueType};
use crate::mapping::{HEADERS_COLUMN, KEY_COLUMN, METADATA_COLUMN, RESCUE_COLUMN, VALUE_COLUMN};
use crate::record::KafkaRecord;
use crate::schema::{arrow_schema, arrow_type, list_item_field, map_entries_field};
use crate::types::{DataType, Field, FieldType, Schema};
use crate::values::MAX_DECIMAL_PRECISION;

/// Deepest nesting of a business field (seed: "Nesting depth is at most 64").
pub const MAX_SCHEMA_DEPTH: usize = 64;

/// Where one output column of the table comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ColumnSource {
    Key,
    Headers,
    Metadata,
    Rescue,
    /// `_kafka_value` for binary, string and nested JSON.
    Value,
    /// The n-th business column of the flat JSON layout.
    FlatField(usize),
}

/// How record values become columns.
#[derive(Debug)]
pub(crate) enum ValuePlan {
    Binary,
    String,
    /// Flat layout: JSON members are the business columns, in `RowShape` order.
    FlatJson(Arc<RowShape>),
    /// Nested layout: JSON members are the fields of `_kafka_value`.
    NestedJson(Arc<RowShape>),
}

/// The type rule and Arrow shape of one JSON-converted value.
#[derive(Debug)]
pub(crate) enum Shape {
    Boolean,
    Int8,
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    Decimal {
        precision: u8,
        scale: u8,
    },
    /// CHAR(n) keeps `max_chars = Some(n)`.
    Utf8 {
        max_chars: Option<u32>,
    },
    Binary,
    FixedBinary(u32),
    Date32,
    Time {
        precision: u8,
    },
    Timestamp {
        precision: u8,
        utc: bool,
    },
    List {
        element: Box<FieldShape>,
        field: FieldRef,
    },
    Map {
        value: Box<FieldShape>,
        entries: FieldRef,
    },
    Row(Arc<RowShape>),
}

/// A shape with the Fluss type name used in messages (`DECIMAL(18, 2)`, `ARRAY`, ...).
#[derive(Debug)]
pub(crate) struct FieldShape {
    pub shape: Shape,
    pub type_name: String,
}

/// The fields of a ROW (or of the flat root), with a name lookup.
#[derive(Debug)]
pub(crate) struct RowShape {
    pub names: Vec<String>,
    pub fields: Vec<FieldShape>,
    pub arrow_fields: Fields,
    /// Only for wide rows; narrow ones compare names in order.
    by_name: Option<HashMap<String, usize>>,
    /// The keys and type rules of the one-pass path (`onepass::one_pass_rules`); `None`: it
    /// does not apply to this row.
    pub one_pass: Option<Vec<crate::onepass::FieldRule>>,
}

/// Rows narrower than this find members by comparing names.
const LINEAR_LOOKUP_MAX: usize = 12;

impl RowShape {
    /// Index of the field named `name`; `hint` is the member's position, tried first since
    /// producers usually write members in column order.
    #[inline]
    pub(crate) fn lookup(&self, name: &str, hint: usize) -> Option<usize> {
        if self.names.get(hint).is_some_and(|n| n == name) {
            return Some(hint);
        }
        match &self.by_name {
            Some(map) => map.get(name).copied(),
            None => self.names.iter().position(|n| n == name),
        }
    }
}

/// A compiled conversion plan for one table version.
#[derive(Debug)]
pub struct ConversionPlan {
    pub(crate) schema: SchemaRef,
    pub(crate) columns: Vec<ColumnSource>,
    pub(crate) value: ValuePlan,
    pub(crate) has_rescue: bool,
}

impl ConversionPlan {
    /// Compiles the plan of a table whose Kafka mapping the catalog validated.
    pub fn compile(schema: &Schema, mapping: &KafkaMapping) -> Result<Self, PlanError> {
        let system = &mapping.system;
        let expect = |index: Option<usize>, name: &'static str| -> Result<(), PlanError> {
            match index {
                Some(i) if schema.columns.get(i).is_none_or(|c| c.name != name) => {
                    Err(PlanError::MissingColumn {
                        column: name,
                        index: i,
                    })
                }
                _ => Ok(()),
            }
        };
        expect(system.key, KEY_COLUMN)?;
        expect(system.headers, HEADERS_COLUMN)?;
        expect(system.metadata, METADATA_COLUMN)?;
        expect(system.rescue, RESCUE_COLUMN)?;
        expect(system.value, VALUE_COLUMN)?;
        check_system_types(schema, mapping)?;

        let flat = mapping.value_type == ValueType::ParseJson && mapping.layout == ValueLayout::Flat;
        let mut columns = Vec::with_capacity(schema.columns.len());
        let mut business: Vec<&Field> = Vec::new();
        for (i, column) in schema.columns.iter().enumerate() {
            let source = if Some(i) == system.key {
                ColumnSource::Key
            } else if Some(i) == system.headers {
                ColumnSource::Headers
            } else if Some(i) == system.metadata {
                ColumnSource::Metadata
            } else if Some(i) == system.rescue {
                ColumnSource::Rescue
            } else if Some(i) == system.value && !flat {
                ColumnSource::Value
            } else if flat && !is_system_name(&column.name) {
                business.push(column);
                ColumnSource::FlatField(business.len() - 1)
            } else {
                return Err(PlanError::UnexpectedColumn {
                    column: column.name.clone(),
                    layout: layout_name(mapping),
                });
            };
            columns.push(source);
        }

        let value_column = || {
            system
                .value
                .and_then(|i| schema.columns.get(i))
                .ok_or(PlanError::MissingValueColumn {
                    value_type: layout_name(mapping),
                })
        };
        let value = match mapping.value_type {
            ValueType::Binary => {
                expect_type(value_column()?, &DataType::Bytes, "binary values need BYTES")?;
                ValuePlan::Binary
            }
            ValueType::String => {
                expect_type(value_column()?, &DataType::String, "string values need STRING")?;
                ValuePlan::String
            }
            ValueType::ParseJson if flat => {
                if business.is_empty() {
                    return Err(PlanError::NoBusinessColumn);
                }
                ValuePlan::FlatJson(Arc::new(compile_row(&business, "", 0)?))
            }
            ValueType::ParseJson => {
                let column = value_column()?;
                let DataType::Row(fields) = &column.field_type.data_type else {
                    return Err(PlanError::WrongType {
                        path: VALUE_COLUMN.into(),
                        data_type: column.field_type.to_string(),
                        rule: "nested JSON values need a ROW",
                    });
                };
                require_nullable(&column.field_type, VALUE_COLUMN)?;
                let fields: Vec<&Field> = fields.iter().collect();
                ValuePlan::NestedJson(Arc::new(compile_row(&fields, VALUE_COLUMN, 0)?))
            }
        };
        Ok(Self {
            schema: arrow_schema(schema),
            columns,
            value,
            has_rescue: system.rescue.is_some(),
        })
    }

    /// Whether the table has a `_kafka_headers` column: without one, a record's headers are
    /// not read (a caller may pass none).
    pub fn stores_headers(&self) -> bool {
        self.columns.contains(&ColumnSource::Headers)
    }

    /// The Arrow schema of every batch this plan produces.
    pub fn arrow_schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// Converts the records of one Kafka partition batch, all or nothing: the first record
    /// that fails is reported and nothing of the batch is kept.
    pub fn convert_batch<'a, I>(&self, records: I) -> Result<RecordBatch, ConvertError>
    where
        I: IntoIterator<Item = KafkaRecord<'a>>,
    {
        self.convert_batch_with(&mut JsonScratch::default(), records)
    }

    /// [`convert_batch`](Self::convert_batch) reusing a per-core scratch for JSON parsing.
    pub fn convert_batch_with<'a, I>(
        &self,
        scratch: &mut JsonScratch,
        records: I,
    ) -> Result<RecordBatch, ConvertError>
    where
        I: IntoIterator<Item = KafkaRecord<'a>>,
    {
        let records = records.into_iter();
        let mut batch = BatchBuilder::new(self, records.size_hint().0);
        for record in records {
            batch.push(scratch, &record)?;
        }
        batch.finish()
    }
}

fn layout_name(mapping: &KafkaMapping) -> &'static str {
    match (mapping.value_type, mapping.layout) {
        (ValueType::Binary, _) => "binary",
        (ValueType::String, _) => "string",
        (ValueType::ParseJson, ValueLayout::Flat) => "parse_json flat",
        (ValueType::ParseJson, ValueLayout::Nested) => "parse_json nested",
    }
}

fn is_system_name(name: &str) -> bool {
    [
        KEY_COLUMN,
        HEADERS_COLUMN,
        METADATA_COLUMN,
        RESCUE_COLUMN,
        VALUE_COLUMN,
    ]
    .contains(&name)
}

fn expect_type(column: &Field, want: &DataType, rule: &'static str) -> Result<(), PlanError> {
    if &column.field_type.data_type != want {
        return Err(PlanError::WrongType {
            path: column.name.clone(),
            data_type: column.field_type.to_string(),
            rule,
        });
    }
    require_nullable(&column.field_type, &column.name)
}

fn require_nullable(field_type: &FieldType, path: &str) -> Result<(), PlanError> {
    if field_type.nullable {
        Ok(())
    } else {
        Err(PlanError::NotNullable { path: path.into() })
    }
}

/// The system columns the converter writes must have exactly the Arrow shape it builds.
fn check_system_types(schema: &Schema, mapping: &KafkaMapping) -> Result<(), PlanError> {
    let system = &mapping.system;
    let headers = DataType::Map {
        key: Box::new(FieldType::not_null(DataType::String)),
        value: Box::new(FieldType::nullable(DataType::Bytes)),
    };
    let metadata = DataType::Row(vec![
        Field::new("timestamp", FieldType::nullable(DataType::TimestampLtz(3))),
        Field::new("timestamp_type", FieldType::nullable(DataType::Int)),
        Field::new("partition", FieldType::nullable(DataType::Int)),
    ]);
    let checks = [
        (system.key, DataType::Bytes, "_kafka_key must be BYTES"),
        (system.rescue, DataType::String, "_kafka_rescue must be STRING"),
    ];
    for (index, want, rule) in checks {
        if let Some(column) = index.and_then(|i| schema.columns.get(i)) {
            expect_type(column, &want, rule)?;
        }
    }
    // Compare through Arrow so that the map key's declared nullability does not matter.
    let arrow_checks = [
        (
            system.headers,
            headers,
            "_kafka_headers must be MAP<STRING, BYTES>",
        ),
        (
            system.metadata,
            metadata,
            "_kafka_metadata must be ROW<timestamp TIMESTAMP_LTZ(3), timestamp_type INT, partition INT>",
        ),
    ];
    for (index, want, rule) in arrow_checks {
        if let Some(column) = index.and_then(|i| schema.columns.get(i)) {
            if arrow_type(&column.field_type.data_type) != arrow_type(&want) {
                return Err(PlanError::WrongType {
                    path: column.name.clone(),
                    data_type: column.field_type.to_string(),
                    rule,
                });
            }
            require_nullable(&column.field_type, &column.name)?;
        }
    }
    Ok(())
}

fn child_path(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}.{name}")
    }
}

fn compile_row(fields: &[&Field], path: &str, depth: usize) -> Result<RowShape, PlanError> {
    let mut shapes = Vec::with_capacity(fields.len());
    for field in fields {
        let field_path = child_path(path, &field.name);
        shapes.push(compile_field(&field.field_type, &field_path, depth)?);
    }
    let names: Vec<String> = fields.iter().map(|f| f.name.clone()).collect();
    let by_name = (names.len() > LINEAR_LOOKUP_MAX)
        .then(|| names.iter().enumerate().map(|(i, n)| (n.clone(), i)).collect());
    let arrow_fields = fields
        .iter()
        .map(|f| crate::schema::arrow_field(&f.name, &f.field_type))
        .collect();
    let one_pass = crate::onepass::one_pass_rules(&names, &shapes);
    Ok(RowShape {
        names,
        fields: shapes,
        arrow_fields,
        by_name,
        one_pass,
    })
}

fn compile_field(field_type: &FieldType, path: &str, depth: usize) -> Result<FieldShape, PlanError> {
    if depth > MAX_SCHEMA_DEPTH {
        return Err(PlanError::TooDeep {
            path: path.into(),
            limit: MAX_SCHEMA_DEPTH,
        });
    }
    require_nullable(field_type, path)?;
    let data_type = &field_type.data_type;
    let shape = match data_type {
        DataType::Boolean => Shape::Boolean,
        DataType::TinyInt => Shape::Int8,
        DataType::SmallInt => Shape::Int16,
        DataType::Int => Shape::Int32,
        DataType::BigInt => Shape::Int64,
        DataType::Float => Shape::Float32,
        DataType::Double => Shape::Float64,
        DataType::Decimal { precision, scale } => {
            if *precision == 0 || *precision > MAX_DECIMAL_PRECISION || scale > precision {
                return Err(PlanError::WrongType {
                    path: path.into(),
                    data_type: data_type.to_string(),
                    rule: "DECIMAL needs 1 <= precision <= 38 and scale <= precision",
                });
            }
            Shape::Decimal {
                precision: *precision,
                scale: *scale,
            }
        }
        DataType::Char(n) => Shape::Utf8 { max_chars: Some(*n) },
        DataType::String => Shape::Utf8 { max_chars: None },
        DataType::Binary(n) => {
            if i32::try_from(*n).is_err() || *n == 0 {
                return Err(PlanError::WrongType {
                    path: path.into(),
                    data_type: data_type.to_string(),
                    rule: "BINARY length must be between 1 and 2^31-1",
                });
            }
            Shape::FixedBinary(*n)
        }
        DataType::Bytes => Shape::Binary,
        DataType::Date => Shape::Date32,
        DataType::Time(p) => Shape::Time {
            precision: (*p).min(9),
        },
        DataType::Timestamp(p) => Shape::Timestamp {
            precision: (*p).min(9),
            utc: false,
        },
        DataType::TimestampLtz(p) => Shape::Timestamp {
            precision: (*p).min(9),
            utc: true,
        },
        DataType::Array(element) => {
            let field = list_item_field(element);
            let element = compile_field(element, &format!("{path}[]"), depth + 1)?;
            Shape::List {
                element: Box::new(element),
                field,
            }
        }
        DataType::Map { key, value } => {
            if key.data_type != DataType::String {
                return Err(PlanError::MapKey {
                    path: path.into(),
                    data_type: key.to_string(),
                });
            }
            let entries = map_entries_field(key, value);
            let value = compile_field(value, &format!("{path}{{}}"), depth + 1)?;
            Shape::Map {
                value: Box::new(value),
                entries,
            }
        }
        DataType::Row(fields) => {
            let fields: Vec<&Field> = fields.iter().collect();
            Shape::Row(Arc::new(compile_row(&fields, path, depth + 1)?))
        }
    };
    let type_name = match data_type {
        DataType::Array(_) => "ARRAY".to_string(),
        DataType::Map { .. } => "MAP".to_string(),
        DataType::Row(_) => "ROW".to_string(),
        scalar => scalar.to_string(),
    };
    Ok(FieldShape { shape, type_name })
}
