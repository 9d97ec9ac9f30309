//! ApiVersions (key 18) v0–4. Flexible from v3; the response header is always v0.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{EncodeError, PResult};
use crate::message::impl_message;
use crate::primitives::{
    array, i16, i32, i64, parse_tagged_field, put_array_len, put_bool, put_str, put_tagged_fields_with_raw,
    skip_tagged_fields, string, tagged_fields, unknown_tagged_fields, RawTaggedField,
};
use crate::{ApiKey, ErrorCode};

/// ApiVersions request. The client software fields exist from v3 and are empty before.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ApiVersionsRequest {
    /// Name of the client library (v3+).
    pub client_software_name: String,
    /// Version of the client library (v3+).
    pub client_software_version: String,
    /// Unknown tagged fields (v3+).
    pub unknown_tagged_fields: Vec<RawTaggedField>,
}

impl ApiVersionsRequest {
    /// Whether both client software fields match the pattern the Java broker enforces for v3+
    /// (`[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`); an invalid pair earns INVALID_REQUEST.
    pub fn has_valid_client_software(&self) -> bool {
        is_valid_software_field(&self.client_software_name)
            && is_valid_software_field(&self.client_software_version)
    }

    fn parse<'a>(src: &Bytes, input: &'a [u8], version: i16) -> PResult<'a, Self> {
        if version < 3 {
            return Ok((input, Self::default()));
        }
        let (input, client_software_name) = string(input, true, "client_software_name")?;
        let (input, client_software_version) = string(input, true, "client_software_version")?;
        let (input, unknown_tagged_fields) = unknown_tagged_fields(src, input)?;
        Ok((
            input,
            Self {
                client_software_name,
                client_software_version,
                unknown_tagged_fields,
            },
        ))
    }

    fn write(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {
        if version >= 3 {
            put_str(buf, &self.client_software_name, true, "client_software_name")?;
            put_str(
                buf,
                &self.client_software_version,
                true,
                "client_software_version",
            )?;
            put_tagged_fields_with_raw(buf, Vec::new(), &self.unknown_tagged_fields);
        }
        Ok(())
    }
}

fn is_valid_software_field(value: &str) -> bool {
    let bytes = value.as_bytes();
    let edge_ok = |b: Option<&u8>| b.is_some_and(u8::is_ascii_alphanumeric);
    edge_ok(bytes.first())
        && edge_ok(bytes.last())
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'.')
}

impl_message!(ApiVersionsRequest, ApiKey::API_VERSIONS, 0..=4);

/// One supported API and its version range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiVersionRange {
    /// The API.
    pub api_key: ApiKey,
    /// Lowest supported version.
    pub min_version: i16,
    /// Highest supported version.
    pub max_version: i16,
}

/// A feature the broker supports (tagged field 0, v3+).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupportedFeature {
    /// Feature name.
    pub name: String,
    /// Lowest supported level.
    pub min_version: i16,
    /// Highest supported level.
    pub max_version: i16,
}

/// A cluster-wide finalized feature (tagged field 2, v3+).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinalizedFeature {
    /// Feature name.
    pub name: String,
    /// Finalized maximum level.
    pub max_version_level: i16,
    /// Finalized minimum level.
    pub min_version_level: i16,
}

/// ApiVersions response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiVersionsResponse {
    /// Top-level error.
    pub error_code: ErrorCode,
    /// The supported APIs.
    pub api_keys: Vec<ApiVersionRange>,
    /// Throttle time (v1+).
    pub throttle_time_ms: i32,
    /// Tagged field 0 (v3+), written only when non-empty.
    pub supported_features: Vec<SupportedFeature>,
    /// Tagged field 1 (v3+), written only when not -1.
    pub finalized_features_epoch: i64,
    /// Tagged field 2 (v3+), written only when non-empty.
    pub finalized_features: Vec<FinalizedFeature>,
    /// Tagged field 3 (v3+), written only when true.
    pub zk_migration_ready: bool,
    /// Other tagged fields (v3+).
    pub unknown_tagged_fields: Vec<RawTaggedField>,
}

impl ApiVersionsResponse {
    /// A response listing `api_keys` with `error_code` and every optional field at its default.
    pub fn new(error_code: ErrorCode, api_keys: Vec<ApiVersionRange>) -> Self {
        Self {
            error_code,
            api_keys,
            throttle_time_ms: 0,
            supported_features: Vec::new(),
            finalized_features_epoch: -1,
            finalized_features: Vec::new(),
            zk_migration_ready: false,
            unknown_tagged_fields: Vec::new(),
        }
    }

    fn parse<'a>(src: &Bytes, input: &'a [u8], version: i16) -> PResult<'a, Self> {
        let flexible = version >= 3;
        let (input, error_code) = i16(input)?;
        let (input, api_keys) = array(input, flexible, "api_keys", |input| {
            let (input, api_key) = i16(input)?;
            let (input, min_version) = i16(input)?;
            let (input, max_version) = i16(input)?;
            let (input, ()) = skip_tagged_fields(input, flexible)?;
            Ok((
                input,
                ApiVersionRange {
                    api_key: ApiKey(api_key),
                    min_version,
                    max_version,
                },
            ))
        })?;
        let (input, throttle_time_ms) = if version >= 1 { i32(input)? } else { (input, 0) };
        let mut response = Self::new(ErrorCode::from(error_code), api_keys);
        response.throttle_time_ms = throttle_time_ms;
        if !flexible {
            return Ok((input, response));
        }
        let (input, fields) = tagged_fields(input)?;
        for (tag, data) in fields {
            match tag {
                0 => {
                    response.supported_features = parse_tagged_field(tag, data, |input| {
                        array(input, true, "supported_features", |input| {
                            let (input, name) = string(input, true, "name")?;
                            let (input, min_version) = i16(input)?;
                            let (input, max_version) = i16(input)?;
                            let (input, ()) = skip_tagged_fields(input, true)?;
                            Ok((
                                input,
                                SupportedFeature {
                                    name,
                                    min_version,
                                    max_version,
                                },
                            ))
                        })
                    })?
                }
                1 => response.finalized_features_epoch = parse_tagged_field(tag, data, i64)?,
                2 => {
                    response.finalized_features = parse_tagged_field(tag, data, |input| {
                        array(input, true, "finalized_features", |input| {
                            let (input, name) = string(input, true, "name")?;
                            let (input, max_version_level) = i16(input)?;
                            let (input, min_version_level) = i16(input)?;
                            let (input, ()) = skip_tagged_fields(input, true)?;
                            Ok((
                                input,
                                FinalizedFeature {
                                    name,
                                    max_version_level,
                                    min_version_level,
                                },
                            ))
                        })
                    })?
                }
                3 => response.zk_migration_ready = parse_tagged_field(tag, data, crate::primitives::bool)?,
                _ => response.unknown_tagged_fields.push(RawTaggedField {
                    tag,
                    data: src.slice_ref(data),
                }),
            }
        }
        Ok((input, response))
    }

    fn write(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {
        let flexible = version >= 3;
        buf.put_i16(self.error_code.code());
        put_array_len(buf, Some(self.api_keys.len()), flexible, "api_keys")?;
        for range in &self.api_keys {
            buf.put_i16(range.api_key.0);
            buf.put_i16(range.min_version);
            buf.put_i16(range.max_version);
            if flexible {
                buf.put_u8(0);
            }
        }
        if version >= 1 {
            buf.put_i32(self.throttle_time_ms);
        }
        if !flexible {
            return Ok(());
        }
        let mut known: Vec<(u32, Vec<u8>)> = Vec::new();
        if !self.supported_features.is_empty() {
            let mut field = BytesMut::new();
            put_array_len(
                &mut field,
                Some(self.supported_features.len()),
                true,
                "supported_features",
            )?;
            for feature in &self.supported_features {
                put_str(&mut field, &feature.name, true, "name")?;
                field.put_i16(feature.min_version);
                field.put_i16(feature.max_version);
                field.put_u8(0);
            }
            known.push((0, field.to_vec()));
        }
        if self.finalized_features_epoch != -1 {
            known.push((1, self.finalized_features_epoch.to_be_bytes().to_vec()));
        }
        if !self.finalized_features.is_empty() {
            let mut field = BytesMut::new();
            put_array_len(
                &mut field,
                Some(self.finalized_features.len()),
                true,
                "finalized_features",
            )?;
            for feature in &self.finalized_features {
                put_str(&mut field, &feature.name, true, "name")?;
                field.put_i16(feature.max_version_level);
                field.put_i16(feature.min_version_level);
                field.put_u8(0);
            }
            known.push((2, field.to_vec()));
        }
        if self.zk_migration_ready {
            let mut field = BytesMut::new();
            put_bool(&mut field, true);
            known.push((3, field.to_vec()));
        }
        put_tagged_fields_with_raw(buf, known, &self.unknown_tagged_fields);
        Ok(())
    }

    /// Encodes the UNSUPPORTED_VERSION fallback for an ApiVersions request of a version this
    /// broker does not know: a complete frame in v0 format (header v0) listing `api_keys`, as
    /// clients expect before they renegotiate.
    pub fn unsupported_version_frame(correlation_id: i32, api_keys: Vec<ApiVersionRange>) -> Bytes {
        let response = Self::new(ErrorCode::UnsupportedVersion, api_keys);
        let mut buf = BytesMut::with_capacity(16 + 6 * response.api_keys.len());
        buf.put_i32(0);
        buf.put_i32(correlation_id);
        buf.put_i16(response.error_code.code());
        buf.put_i32(response.api_keys.len() as i32);
        for range in &response.api_keys {
            buf.put_i16(range.api_key.0);
            buf.put_i16(range.min_version);
            buf.put_i16(range.max_version);
        }
        let size = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&size.to_be_bytes());
        buf.freeze()
    }
}

impl_message!(ApiVersionsResponse, ApiKey::API_VERSIONS, 0..=4);
