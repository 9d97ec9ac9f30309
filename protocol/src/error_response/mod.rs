//! A minimal error response for any Kafka 4.4 API and version, written from a table of each
//! response's layout ([`LAYOUTS`], generated from Kafka's message definitions by
//! `protocol/gen/error_layouts.py`), for the APIs this crate has no codec for.
//!
//! The response is what a Kafka broker's `getErrorResponse` amounts to when nothing of the
//! request is known: every top-level `ErrorCode` carries the error, an `ErrorMessage` the given
//! message, `ThrottleTimeMs` 0; arrays are empty (also where nullable); strings, bytes, records
//! and structs are null where the version allows null, else empty (a struct: its own fields,
//! the same way); numbers and booleans take their JSON default (0, false when none); uuids are
//! zero; tagged fields are left out (an empty tagged-field section). The response header is v1
//! (with tagged fields) at the layout's flexible versions, else v0, and always v0 for
//! ApiVersions (which [`crate::encode_error_response`] answers with its own codec).

#[rustfmt::skip]
mod layouts;

use bytes::{BufMut, Bytes, BytesMut};

use crate::primitives::{put_array_len, put_nullable_bytes, put_nullable_str, put_unsigned_varint};
use crate::{ApiKey, EncodeError, ErrorCode};

pub use layouts::LAYOUTS;

/// An inclusive range of versions; [`Versions::NONE`] holds none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Versions {
    /// The first version.
    pub min: i16,
    /// The last version (`i16::MAX` for Kafka's `N+`).
    pub max: i16,
}

impl Versions {
    /// No version (Kafka's `none`).
    pub const NONE: Versions = Versions { min: 0, max: -1 };

    /// Whether `version` is in the range.
    pub const fn contains(self, version: i16) -> bool {
        self.min <= version && version <= self.max
    }
}

/// `min..=max` (the generated table's short form).
const fn v(min: i16, max: i16) -> Versions {
    Versions { min, max }
}

/// `min` and every later version (Kafka's `min+`).
const fn from(min: i16) -> Versions {
    Versions { min, max: i16::MAX }
}

const NONE: Versions = Versions::NONE;

/// A field (the generated table's short form).
const fn f(
    name: &'static str,
    ty: FieldType,
    versions: Versions,
    nullable_versions: Versions,
    tagged_versions: Versions,
    default: i64,
) -> Field {
    Field {
        name,
        ty,
        versions,
        nullable_versions,
        tagged_versions,
        default,
    }
}

/// A response's layout (the generated table's short form).
const fn layout(
    api_key: i16,
    name: &'static str,
    valid_versions: Versions,
    flexible_versions: Versions,
    fields: &'static [Field],
) -> ResponseLayout {
    ResponseLayout {
        api_key,
        name,
        valid_versions,
        flexible_versions,
        fields,
    }
}

/// The wire type of a field, as Kafka's message definitions name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    /// `bool`.
    Bool,
    /// `int8`.
    Int8,
    /// `int16`.
    Int16,
    /// `uint16`.
    Uint16,
    /// `int32`.
    Int32,
    /// `uint32`.
    Uint32,
    /// `int64`.
    Int64,
    /// `float64`.
    Float64,
    /// `uuid`.
    Uuid,
    /// `string`.
    String,
    /// `bytes`.
    Bytes,
    /// `records`.
    Records,
    /// An array of any element type (`[]T`); its elements are not described.
    Array,
    /// A struct that is not an array, with its fields.
    Struct(&'static [Field]),
}

/// One field of a response (or of one of its top-level structs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// The Kafka name, e.g. `ErrorCode`.
    pub name: &'static str,
    /// The type.
    pub ty: FieldType,
    /// The versions that have the field.
    pub versions: Versions,
    /// The versions in which it may be null.
    pub nullable_versions: Versions,
    /// The versions in which it is a tagged field (left out of an error response).
    pub tagged_versions: Versions,
    /// The JSON default of a number (a bool: 1 for true), else 0.
    pub default: i64,
}

/// The layout of one API's response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseLayout {
    /// The API key.
    pub api_key: i16,
    /// The Kafka name without `Response`, e.g. `ListOffsets`.
    pub name: &'static str,
    /// The versions Kafka defines.
    pub valid_versions: Versions,
    /// The versions that use the flexible encoding.
    pub flexible_versions: Versions,
    /// The top-level fields in wire order.
    pub fields: &'static [Field],
}

impl ResponseLayout {
    /// The layout of `api_key`'s response, or `None` for a key without versions in Kafka 4.4.
    pub fn of(api_key: ApiKey) -> Option<&'static ResponseLayout> {
        LAYOUTS
            .binary_search_by_key(&api_key.0, |layout| layout.api_key)
            .ok()
            .map(|index| &LAYOUTS[index])
    }

    /// Whether `version` uses the flexible encoding (compact lengths, tagged fields, response
    /// header v1).
    pub const fn is_flexible(&self, version: i16) -> bool {
        self.flexible_versions.contains(version)
    }

    /// The response header version at `version`: 1 (with tagged fields) when flexible, else 0;
    /// ApiVersions always 0, so that a client that does not know the broker's versions can
    /// read it.
    pub fn response_header_version(&self, version: i16) -> i16 {
        i16::from(self.is_flexible(version) && ApiKey(self.api_key) != ApiKey::API_VERSIONS)
    }

    /// Whether a top-level `ErrorCode` is in the response at `version`.
    pub fn has_error_code(&self, version: i16) -> bool {
        self.fields
            .iter()
            .any(|field| field.name == "ErrorCode" && is_written(field, version))
    }
}

/// Whether `field` is on the wire (present and not tagged) at `version`.
fn is_written(field: &Field, version: i16) -> bool {
    field.versions.contains(version) && !field.tagged_versions.contains(version)
}

/// Encodes a complete frame (size prefix, response header, body) answering a request of
/// `api_key` at `version` with `error_code` in every top-level `ErrorCode` and `error_message`
/// in a top-level `ErrorMessage` (null when `None` and the version allows it, else empty), as
/// the module documentation describes. [`EncodeError::UnsupportedVersion`] when Kafka 4.4 does
/// not define the API, or not at `version`.
pub fn encode_layout_error_response(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    error_code: ErrorCode,
    error_message: Option<&str>,
) -> Result<Bytes, EncodeError> {
    let layout = ResponseLayout::of(api_key)
        .filter(|layout| layout.valid_versions.contains(version))
        .ok_or(EncodeError::UnsupportedVersion { api_key, version })?;
    let flexible = layout.is_flexible(version);
    let mut buf = BytesMut::with_capacity(64);
    buf.put_i32(0);
    buf.put_i32(correlation_id);
    if layout.response_header_version(version) == 1 {
        put_unsigned_varint(&mut buf, 0);
    }
    let top = TopLevel {
        error_code,
        error_message,
    };
    put_fields(&mut buf, layout.fields, version, flexible, Some(&top))?;
    let size = i32::try_from(buf.len() - 4).map_err(|_| EncodeError::TooLong {
        field: "frame",
        len: buf.len() - 4,
    })?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}

/// What the top level's `ErrorCode` and `ErrorMessage` carry.
struct TopLevel<'a> {
    error_code: ErrorCode,
    error_message: Option<&'a str>,
}

/// Writes `fields` at `version`, then (when flexible) an empty tagged-field section. `top` is
/// given for the response's own fields, not a struct's.
fn put_fields(
    buf: &mut BytesMut,
    fields: &'static [Field],
    version: i16,
    flexible: bool,
    top: Option<&TopLevel<'_>>,
) -> Result<(), EncodeError> {
    for field in fields.iter().filter(|field| is_written(field, version)) {
        let nullable = field.nullable_versions.contains(version);
        let name = field.name;
        match field.ty {
            FieldType::Int16 if name == "ErrorCode" && top.is_some() => {
                buf.put_i16(top.map_or(0, |top| top.error_code.code()));
            }
            FieldType::Int32 if name == "ThrottleTimeMs" && top.is_some() => buf.put_i32(0),
            FieldType::String if name == "ErrorMessage" && top.is_some() => {
                let message = top.and_then(|top| top.error_message);
                let message = message.or(if nullable { None } else { Some("") });
                put_nullable_str(buf, message, flexible, name)?;
            }
            // Defaults come from the definitions and fit their types (narrowed as written).
            FieldType::Bool => buf.put_u8(u8::from(field.default != 0)),
            FieldType::Int8 => buf.put_i8(field.default as i8),
            FieldType::Int16 => buf.put_i16(field.default as i16),
            FieldType::Uint16 => buf.put_u16(field.default as u16),
            FieldType::Int32 => buf.put_i32(field.default as i32),
            FieldType::Uint32 => buf.put_u32(field.default as u32),
            FieldType::Int64 => buf.put_i64(field.default),
            FieldType::Float64 => buf.put_f64(field.default as f64),
            FieldType::Uuid => buf.put_slice(&[0; 16]),
            FieldType::String => put_nullable_str(buf, (!nullable).then_some(""), flexible, name)?,
            FieldType::Bytes | FieldType::Records => {
                put_nullable_bytes(buf, (!nullable).then_some(&[]), flexible, name)?
            }
            FieldType::Array => put_array_len(buf, Some(0), flexible, name)?,
            FieldType::Struct(_) if nullable => buf.put_i8(-1),
            FieldType::Struct(inner) => put_fields(buf, inner, version, flexible, None)?,
        }
    }
    if flexible {
        put_unsigned_varint(buf, 0);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_within_kafka_versions() {
        assert!(LAYOUTS.windows(2).all(|w| w[0].api_key < w[1].api_key));
        for layout in LAYOUTS {
            assert!(
                layout.valid_versions.min <= layout.valid_versions.max,
                "{}",
                layout.name
            );
            assert_eq!(ResponseLayout::of(ApiKey(layout.api_key)), Some(layout));
        }
        assert_eq!(ResponseLayout::of(ApiKey(-1)), None);
        assert_eq!(ResponseLayout::of(ApiKey::LEADER_AND_ISR), None);
        assert_eq!(ResponseLayout::of(ApiKey(10_000)), None);
    }

    #[test]
    fn undefined_versions_and_keys_have_no_answer() {
        let code = ErrorCode::UnsupportedVersion;
        for (key, version) in [(2, 0), (2, 12), (2, -1), (60, 3), (4, 0), (999, 0), (-1, 0)] {
            assert_eq!(
                encode_layout_error_response(ApiKey(key), version, 1, code, None),
                Err(EncodeError::UnsupportedVersion {
                    api_key: ApiKey(key),
                    version
                })
            );
        }
    }
}
