//! Writes one parsed JSON value into `Column` builders by the type rules, collecting what it
//! cannot store into the record's rescue tree (or refusing the record without `_kafka_rescue`).

use base64::Engine;

use crate::builders::{offset, Column, Data, TemporalKind};
use crate::error::{quote_truncated, ConvertError};
use crate::json::{Doc, JsonValue, Members};
use crate::mapping::RESCUE_COLUMN;
use crate::path::Path;
use crate::plan::RowShape;
use crate::rescue::{Rescue, RescueId};
use crate::values;

/// Why a value was not written.
pub(crate) enum Refusal {
    /// This value cannot be converted; a null was written in its place.
    Value(String),
    /// The record fails (no rescue column, or a failure below this value).
    Record(ConvertError),
}

/// `Ok(Some(id))`: written, with parts rescued in node `id`.
pub(crate) type Written = Result<Option<RescueId>, Refusal>;

/// Writes the values of one record.
pub(crate) struct ValueWriter<'d, 's> {
    pub doc: &'d Doc<'s>,
    /// `Some` when the table has `_kafka_rescue`.
    pub rescue: Option<Rescue<'d>>,
    pub record_index: usize,
    pub bytes: Vec<u8>,
    /// The flat layout: the root object's members map onto the table's top-level columns,
    /// where system column names are reserved. In the nested layout the root maps onto
    /// `_kafka_value`'s fields, where they are ordinary names (the seed: "reserved at the
    /// table's top level, but ordinary names inside business ROWs").
    pub reserved_names: bool,
}

impl<'d, 's> ValueWriter<'d, 's> {
    /// Writes the value at tape node `node` into `column`.
    pub(crate) fn write(&mut self, column: &mut Column<'_>, node: usize, path: &Path<'_>) -> Written {
        let doc = self.doc;
        let value = doc.value(node);
        if let JsonValue::Null = value {
            column.append_null();
            return Ok(None);
        }
        let type_name = column.type_name;
        let result: Result<(), String> = match (&mut column.data, value) {
            (Data::Boolean(b), JsonValue::Bool(v)) => {
                b.append_value(v);
                Ok(())
            }
            (Data::Int8(b), JsonValue::Number(t)) => {
                values::integer(t, i8::MIN.into(), i8::MAX.into(), type_name).map(|v| b.append_value(v as i8))
            }
            (Data::Int16(b), JsonValue::Number(t)) => {
                values::integer(t, i16::MIN.into(), i16::MAX.into(), type_name)
                    .map(|v| b.append_value(v as i16))
            }
            (Data::Int32(b), JsonValue::Number(t)) => {
                values::integer(t, i32::MIN.into(), i32::MAX.into(), type_name)
                    .map(|v| b.append_value(v as i32))
            }
            (Data::Int64(b), JsonValue::Number(t)) => {
                values::integer(t, i64::MIN, i64::MAX, type_name).map(|v| b.append_value(v))
            }
            (Data::Float32(b), JsonValue::Number(t)) => values::float(t).map(|v| b.append_value(v)),
            (Data::Float64(b), JsonValue::Number(t)) => values::double(t).map(|v| b.append_value(v)),
            (
                Data::Decimal {
                    builder,
                    precision,
                    scale,
                },
                value @ (JsonValue::Number(t) | JsonValue::String(t)),
            ) => values::decimal(t, *precision, *scale, matches!(value, JsonValue::String(_)))
                .map(|v| builder.append_value(v)),
            (Data::Utf8 { builder, max_chars }, JsonValue::String(s)) => match max_chars {
                Some(n) if s.chars().count() > *n as usize => Err(format!(
                    "string of {} code points is longer than {type_name}",
                    s.chars().count()
                )),
                _ => {
                    builder.append_value(s);
                    Ok(())
                }
            },
            (Data::Binary(b), JsonValue::String(s)) => {
                decode_base64(s, &mut self.bytes, type_name).map(|()| b.append_value(&self.bytes))
            }
            (Data::FixedBinary { builder, width }, JsonValue::String(s)) => {
                decode_base64(s, &mut self.bytes, type_name).and_then(|()| {
                    if self.bytes.len() != *width as usize {
                        return Err(format!(
                            "Base64 value has {} bytes, {type_name} needs exactly {width}",
                            self.bytes.len()
                        ));
                    }
                    builder
                        .append_value(&self.bytes)
                        .map_err(|e| format!("cannot store {type_name}: {e}"))
                })
            }
            (Data::Date32(b), JsonValue::String(s)) => values::date(s).map(|d| b.append_value(d)),
            (
                Data::Temporal {
                    values: out,
                    kind,
                    precision,
                    unit,
                },
                value @ (JsonValue::String(_) | JsonValue::Number(_)),
            ) => {
                let nanos = match (kind, value) {
                    (TemporalKind::Time, JsonValue::String(s)) => values::time(s, *precision).map(i128::from),
                    (TemporalKind::Timestamp, JsonValue::String(s)) => values::timestamp(s, *precision),
                    (TemporalKind::TimestampLtz, JsonValue::String(s)) => {
                        values::timestamp_ltz(s, *precision)
                    }
                    (TemporalKind::TimestampLtz, JsonValue::Number(t)) => values::epoch_millis(t, *precision),
                    (_, other) => Err(expected(type_name, other)),
                };
                nanos
                    .and_then(|n| values::nanos_to_unit(n, *unit, type_name))
                    .map(|v| out.append_value(v))
            }
            (Data::List { .. }, JsonValue::Array(array)) => return self.write_list(column, array, path),
            (Data::Map { .. }, JsonValue::Object(object)) => return self.write_map(column, object, path),
            (
                Data::Row {
                    nulls,
                    children,
                    shape,
                },
                JsonValue::Object(object),
            ) => {
                nulls.append_non_null();
                let root = matches!(path, Path::Root);
                return self.write_row(children, shape, object, path, root);
            }
            (_, other) => Err(expected(type_name, other)),
        };
        result.map(|()| None).map_err(|reason| {
            column.append_null();
            Refusal::Value(reason)
        })
    }

    /// Writes the members of `object` into the fields of a row whose columns all hold
    /// the same number of values; fields without a member get null.
    pub(crate) fn write_row(
        &mut self,
        children: &mut [Column<'_>],
        shape: &RowShape,
        object: Members,
        path: &Path<'_>,
        root: bool,
    ) -> Written {
        let written = self.write_members(children, shape, object, path, root);
        if root {
            if let Err(Refusal::Record(_)) = &written {
                // A repeated root key makes the value invalid JSON, which outranks the
                // failure that stopped the loop before it reached the repetition.
                if let Err(key) = self.doc.check_duplicate_keys(object) {
                    return Err(self.record_error(&Path::Root, crate::json::duplicate_key(key, "$")));
                }
            }
        }
        written
    }

    fn write_members(
        &mut self,
        children: &mut [Column<'_>],
        shape: &RowShape,
        object: Members,
        path: &Path<'_>,
        root: bool,
    ) -> Written {
        let doc = self.doc;
        let mut written = FieldSet::new(children.len());
        let mut node: Option<RescueId> = None;
        let mut keys_checked = !root;
        for (position, (key, value)) in doc.members(object).enumerate() {
            let member_path = Path::Field(path, key);
            let field = shape.lookup(key, position);
            // The parser leaves the root's keys to this loop: a field written twice, or the
            // first unknown member (then all keys are compared once), reveals a repeated key.
            let repeated = field.is_some_and(|f| written.contains(f));
            if root && (repeated || (field.is_none() && !keys_checked)) {
                keys_checked = true;
                if let Err(key) = doc.check_duplicate_keys(object) {
                    return Err(self.record_error(&Path::Root, crate::json::duplicate_key(key, "$")));
                }
            }
            let Some(field) = field else {
                if root && key == RESCUE_COLUMN && matches!(doc.value(value), JsonValue::Null) {
                    // A null `_kafka_rescue` member carries nothing to rescue (in either
                    // layout: behaviour.md rescues one "with a non-null value").
                    continue;
                }
                let reason = unknown_member_reason(key, root && self.reserved_names);
                self.refuse_member(&mut node, key, value, &member_path, reason)?;
                continue;
            };
            written.insert(field);
            match self.write(&mut children[field], value, &member_path) {
                Ok(None) => {}
                Ok(Some(child)) => {
                    let at = self.object_node(&mut node);
                    if let (Some(rescue), Some(at)) = (self.rescue.as_mut(), at) {
                        rescue.add_nested(at, key, child);
                    }
                }
                Err(Refusal::Value(reason)) => {
                    self.refuse_member(&mut node, key, value, &member_path, reason)?
                }
                Err(record) => return Err(record),
            }
        }
        for (i, child) in children.iter_mut().enumerate() {
            if !written.contains(i) {
                child.append_null();
            }
        }
        Ok(node)
    }

    fn write_list(&mut self, column: &mut Column<'_>, array: Members, path: &Path<'_>) -> Written {
        let Data::List {
            offsets,
            nulls,
            element,
            ..
        } = &mut column.data
        else {
            return Ok(None);
        };
        let doc = self.doc;
        let mut node: Option<RescueId> = None;
        for (index, value) in doc.elements(array).enumerate() {
            let element_path = Path::Index(path, index);
            let child = match self.write(element, value, &element_path) {
                Ok(None) => continue,
                Ok(Some(child)) => Ok(child),
                Err(Refusal::Value(reason)) => Err(reason),
                Err(record) => return Err(record),
            };
            let Some(rescue) = self.rescue.as_mut() else {
                let reason = child.err().unwrap_or_default();
                return Err(self.record_error(&element_path, reason));
            };
            let at = *node.get_or_insert_with(|| rescue.new_array(array.len));
            match child {
                Ok(child) => rescue.set_nested(at, index, child),
                Err(_) => rescue.set_whole(at, index, value),
            }
        }
        offsets.push(offset(element.len()));
        nulls.append_non_null();
        Ok(node)
    }

    fn write_map(&mut self, column: &mut Column<'_>, object: Members, path: &Path<'_>) -> Written {
        let Data::Map {
            offsets,
            nulls,
            keys,
            values,
            ..
        } = &mut column.data
        else {
            return Ok(None);
        };
        let doc = self.doc;
        let mut node: Option<RescueId> = None;
        for (key, value) in doc.members(object) {
            let entry_path = Path::Key(path, key);
            keys.append_value(key);
            match self.write(values, value, &entry_path) {
                Ok(None) => {}
                Ok(Some(child)) => {
                    let at = self.object_node(&mut node);
                    if let (Some(rescue), Some(at)) = (self.rescue.as_mut(), at) {
                        rescue.add_nested(at, key, child);
                    }
                }
                Err(Refusal::Value(reason)) => {
                    self.refuse_member(&mut node, key, value, &entry_path, reason)?
                }
                Err(record) => return Err(record),
            }
        }
        offsets.push(offset(values.len()));
        nulls.append_non_null();
        Ok(node)
    }

    /// The rescue object node of the current container, made on first use.
    fn object_node(&mut self, node: &mut Option<RescueId>) -> Option<RescueId> {
        let rescue = self.rescue.as_mut()?;
        Some(*node.get_or_insert_with(|| rescue.new_object()))
    }

    /// Rescues member `key` whole, or fails the record when there is no rescue column.
    fn refuse_member(
        &mut self,
        node: &mut Option<RescueId>,
        key: &'d str,
        value: usize,
        path: &Path<'_>,
        reason: String,
    ) -> Result<(), Refusal> {
        match self.object_node(node) {
            Some(at) => {
                if let Some(rescue) = self.rescue.as_mut() {
                    rescue.add_whole(at, key, value);
                }
                Ok(())
            }
            None => Err(self.record_error(path, reason)),
        }
    }

    fn record_error(&self, path: &Path<'_>, reason: String) -> Refusal {
        Refusal::Record(ConvertError::new(self.record_index, path.render(), reason))
    }
}

/// The fields of one row written so far.
enum FieldSet {
    Narrow(u64),
    Wide(Vec<bool>),
}

impl FieldSet {
    fn new(fields: usize) -> Self {
        if fields <= 64 {
            FieldSet::Narrow(0)
        } else {
            FieldSet::Wide(vec![false; fields])
        }
    }

    fn insert(&mut self, field: usize) {
        match self {
            FieldSet::Narrow(bits) => *bits |= 1 << field,
            FieldSet::Wide(flags) => flags[field] = true,
        }
    }

    fn contains(&self, field: usize) -> bool {
        match self {
            FieldSet::Narrow(bits) => bits & (1 << field) != 0,
            FieldSet::Wide(flags) => flags[field],
        }
    }
}

fn unknown_member_reason(key: &str, reserved: bool) -> String {
    use crate::mapping::{HEADERS_COLUMN, KEY_COLUMN, METADATA_COLUMN, VALUE_COLUMN};
    if reserved
        && [
            KEY_COLUMN,
            HEADERS_COLUMN,
            METADATA_COLUMN,
            RESCUE_COLUMN,
            VALUE_COLUMN,
        ]
        .contains(&key)
    {
        format!("member name is reserved for the system column {key} and there is no _kafka_rescue column")
    } else {
        "unknown field and there is no _kafka_rescue column".to_string()
    }
}

/// `expected INT, got string "x"`.
pub(crate) fn expected(type_name: &str, got: JsonValue<'_>) -> String {
    format!("expected {type_name}, got {}", describe(got))
}

fn describe(value: JsonValue<'_>) -> String {
    match value {
        JsonValue::Null => "null".into(),
        JsonValue::Bool(b) => format!("boolean {b}"),
        JsonValue::Number(t) => {
            let short: String = t.chars().take(64).collect();
            let ellipsis = if short.len() < t.len() { "…" } else { "" };
            format!("number {short}{ellipsis}")
        }
        JsonValue::String(s) => format!("string {}", quote_truncated(s)),
        JsonValue::Array(_) => "array".into(),
        JsonValue::Object(_) => "object".into(),
    }
}

/// Standard Base64 with padding into `out` (cleared first).
fn decode_base64(text: &str, out: &mut Vec<u8>, type_name: &str) -> Result<(), String> {
    out.clear();
    base64::engine::general_purpose::STANDARD
        .decode_vec(text, out)
        .map_err(|e| format!("expected standard Base64 for {type_name}: {e}"))
}
