//! Produce (key 0) v0–13 (kafluss advertises 0–12). Flexible from v9; record_errors and
//! error_message from v8; tagged current_leader / node_endpoints from v10; topics named by
//! topic id instead of name from v13.
//!
//! Each partition's `records` stays an `Option<Bytes>` slice of the request frame: no record
//! byte is copied while decoding. Parse them with [`crate::RecordBatches`].

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{fail, DecodeError, EncodeError, PResult};
use crate::message::{impl_message, Message};
use crate::primitives::{
    array, i16, i32, i64, nullable_bytes, nullable_string, parse_all, parse_tagged_field, put_array_len,
    put_empty_tagged_fields, put_nullable_bytes, put_nullable_str, put_str, put_tagged_fields,
    put_tagged_fields_with_raw, skip_tagged_fields, string, tagged_fields, unknown_tagged_fields, uuid,
    RawTaggedField, Uuid,
};
use crate::{ApiKey, ErrorCode};

/// One partition's data in a Produce request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducePartitionData {
    /// Partition number.
    pub index: i32,
    /// The record batches, still encoded (and possibly compressed); a slice of the frame.
    pub records: Option<Bytes>,
}

/// One topic's data in a Produce request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceTopicData {
    /// Topic name as sent (v0–12); empty from v13, which names the topic by id.
    pub name: String,
    /// Topic id (v13+); [`Uuid::ZERO`] before v13.
    pub topic_id: Uuid,
    /// Partitions.
    pub partitions: Vec<ProducePartitionData>,
}

/// Produce request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceRequest {
    /// Transactional id (v3+).
    pub transactional_id: Option<String>,
    /// Required acks: -1 all, 0 none, 1 leader.
    pub acks: i16,
    /// Timeout for the acks.
    pub timeout_ms: i32,
    /// Topics.
    pub topics: Vec<ProduceTopicData>,
    /// Unknown top-level tagged fields (v9+).
    pub unknown_tagged_fields: Vec<RawTaggedField>,
}

impl ProduceRequest {
    /// Decodes like [`Message::decode`], failing with [`DecodeError::TooManyEntries`] as soon
    /// as more than `max_entries` topics and partitions (each counts one) have been read, so a
    /// request of millions of empty partitions is refused before it is held in memory.
    pub fn decode_bounded(body: &Bytes, version: i16, max_entries: usize) -> Result<Self, DecodeError> {
        if !<Self as Message>::supports_version(version) {
            return Err(DecodeError::UnsupportedVersion {
                api_key: ApiKey::PRODUCE,
                version,
            });
        }
        parse_all(&body[..], |input| {
            Self::parse_bounded(body, input, version, max_entries)
        })
    }

    fn parse<'a>(src: &Bytes, input: &'a [u8], version: i16) -> PResult<'a, Self> {
        Self::parse_bounded(src, input, version, usize::MAX)
    }

    fn parse_bounded<'a>(
        src: &Bytes,
        input: &'a [u8],
        version: i16,
        max_entries: usize,
    ) -> PResult<'a, Self> {
        let entries = std::cell::Cell::new(0usize);
        let count = || -> Result<(), nom::Err<DecodeError>> {
            entries.set(entries.get() + 1);
            if entries.get() > max_entries {
                return fail(DecodeError::TooManyEntries { limit: max_entries });
            }
            Ok(())
        };
        let flexible = version >= 9;
        let (input, transactional_id) = if version >= 3 {
            nullable_string(input, flexible)?
        } else {
            (input, None)
        };
        let (input, acks) = i16(input)?;
        let (input, timeout_ms) = i32(input)?;
        let (input, topics) = array(input, flexible, "topic_data", |input| {
            count()?;
            let (input, name, topic_id) = if version >= 13 {
                let (input, topic_id) = uuid(input)?;
                (input, String::new(), topic_id)
            } else {
                let (input, name) = string(input, flexible, "topic_data[].name")?;
                (input, name, Uuid::ZERO)
            };
            let (input, partitions) = array(input, flexible, "partition_data", |input| {
                count()?;
                let (input, index) = i32(input)?;
                let (input, records) = nullable_bytes(src, input, flexible)?;
                let (input, ()) = skip_tagged_fields(input, flexible)?;
                Ok((input, ProducePartitionData { index, records }))
            })?;
            let (input, ()) = skip_tagged_fields(input, flexible)?;
            Ok((
                input,
                ProduceTopicData {
                    name,
                    topic_id,
                    partitions,
                },
            ))
        })?;
        let (input, unknown_tagged_fields) = if flexible {
            unknown_tagged_fields(src, input)?
        } else {
            (input, Vec::new())
        };
        Ok((
            input,
            Self {
                transactional_id,
                acks,
                timeout_ms,
                topics,
                unknown_tagged_fields,
            },
        ))
    }

    fn write(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {
        let flexible = version >= 9;
        if version >= 3 {
            put_nullable_str(
                buf,
                self.transactional_id.as_deref(),
                flexible,
                "transactional_id",
            )?;
        } else if self.transactional_id.is_some() {
            return Err(EncodeError::NotRepresentable {
                field: "transactional_id",
                version,
                reason: "transactions need v3+",
            });
        }
        buf.put_i16(self.acks);
        buf.put_i32(self.timeout_ms);
        put_array_len(buf, Some(self.topics.len()), flexible, "topic_data")?;
        for topic in &self.topics {
            if version >= 13 {
                buf.put_slice(&topic.topic_id.0);
            } else {
                put_str(buf, &topic.name, flexible, "topic_data[].name")?;
            }
            put_array_len(buf, Some(topic.partitions.len()), flexible, "partition_data")?;
            for partition in &topic.partitions {
                buf.put_i32(partition.index);
                put_nullable_bytes(buf, partition.records.as_deref(), flexible, "records")?;
                put_empty_tagged_fields(buf, flexible);
            }
            put_empty_tagged_fields(buf, flexible);
        }
        if flexible {
            put_tagged_fields_with_raw(buf, Vec::new(), &self.unknown_tagged_fields);
        }
        Ok(())
    }

    /// The response giving every partition of this request `error_code` (offsets -1), as for a
    /// whole-request rejection (transactional id, acks, duplicates).
    pub fn error_response(&self, error_code: ErrorCode, error_message: Option<&str>) -> ProduceResponse {
        ProduceResponse {
            topics: self
                .topics
                .iter()
                .map(|topic| ProduceTopicResponse {
                    name: topic.name.clone(),
                    topic_id: topic.topic_id,
                    partitions: topic
                        .partitions
                        .iter()
                        .map(|partition| {
                            ProducePartitionResponse::error(partition.index, error_code, error_message)
                        })
                        .collect(),
                })
                .collect(),
            throttle_time_ms: 0,
            node_endpoints: Vec::new(),
        }
    }
}

impl_message!(ProduceRequest, ApiKey::PRODUCE, 0..=13);

/// A record-level error (v8+): which record of the batch failed and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchIndexAndErrorMessage {
    /// Index of the failed record in the batch.
    pub batch_index: i32,
    /// Why it failed.
    pub batch_index_error_message: Option<String>,
}

/// Current leader hint (tagged field 0 of a partition response, v10+).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderIdAndEpoch {
    /// Leader node id.
    pub leader_id: i32,
    /// Leader epoch.
    pub leader_epoch: i32,
}

/// A node endpoint (top-level tagged field 0, v10+).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEndpoint {
    /// Node id.
    pub node_id: i32,
    /// Host.
    pub host: String,
    /// Port.
    pub port: i32,
    /// Rack.
    pub rack: Option<String>,
}

/// One partition's outcome in a Produce response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducePartitionResponse {
    /// Partition number.
    pub index: i32,
    /// Outcome.
    pub error_code: ErrorCode,
    /// Offset of the first appended record, or -1.
    pub base_offset: i64,
    /// Append time for LogAppendTime topics, else -1 (v2+).
    pub log_append_time_ms: i64,
    /// First offset still in the log (v5+), -1 if unknown.
    pub log_start_offset: i64,
    /// Per-record errors (v8+).
    pub record_errors: Vec<BatchIndexAndErrorMessage>,
    /// Summary error message (v8+).
    pub error_message: Option<String>,
    /// Leader hint (v10+ tagged), written only when set.
    pub current_leader: Option<LeaderIdAndEpoch>,
}

impl ProducePartitionResponse {
    /// A failed partition: offsets -1, no record errors.
    pub fn error(index: i32, error_code: ErrorCode, error_message: Option<&str>) -> Self {
        Self {
            index,
            error_code,
            base_offset: -1,
            log_append_time_ms: -1,
            log_start_offset: -1,
            record_errors: Vec::new(),
            error_message: error_message.map(str::to_owned),
            current_leader: None,
        }
    }

    /// A successful append at `base_offset`.
    pub fn success(index: i32, base_offset: i64, log_start_offset: i64) -> Self {
        Self {
            index,
            error_code: ErrorCode::None,
            base_offset,
            log_append_time_ms: -1,
            log_start_offset,
            record_errors: Vec::new(),
            error_message: None,
            current_leader: None,
        }
    }
}

/// One topic's outcome in a Produce response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceTopicResponse {
    /// Topic name as requested (v0–12); empty from v13.
    pub name: String,
    /// Topic id as requested (v13+); [`Uuid::ZERO`] before v13.
    pub topic_id: Uuid,
    /// Partitions.
    pub partitions: Vec<ProducePartitionResponse>,
}

/// Produce response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceResponse {
    /// Topics.
    pub topics: Vec<ProduceTopicResponse>,
    /// Throttle time (v1+).
    pub throttle_time_ms: i32,
    /// Node endpoints (v10+ tagged), written only when non-empty.
    pub node_endpoints: Vec<NodeEndpoint>,
}

fn parse_partition_response(input: &[u8], version: i16) -> PResult<'_, ProducePartitionResponse> {
    let flexible = version >= 9;
    let (input, index) = i32(input)?;
    let (input, error_code) = i16(input)?;
    let (input, base_offset) = i64(input)?;
    let (input, log_append_time_ms) = if version >= 2 { i64(input)? } else { (input, -1) };
    let (input, log_start_offset) = if version >= 5 { i64(input)? } else { (input, -1) };
    let (input, record_errors) = if version >= 8 {
        array(input, flexible, "record_errors", |input| {
            let (input, batch_index) = i32(input)?;
            let (input, batch_index_error_message) = nullable_string(input, flexible)?;
            let (input, ()) = skip_tagged_fields(input, flexible)?;
            Ok((
                input,
                BatchIndexAndErrorMessage {
                    batch_index,
                    batch_index_error_message,
                },
            ))
        })?
    } else {
        (input, Vec::new())
    };
    let (input, error_message) = if version >= 8 {
        nullable_string(input, flexible)?
    } else {
        (input, None)
    };
    let mut current_leader = None;
    let input = if flexible {
        let (input, fields) = tagged_fields(input)?;
        for (tag, data) in fields {
            if tag == 0 && version >= 10 {
                current_leader = Some(parse_tagged_field(tag, data, |input| {
                    let (input, leader_id) = i32(input)?;
                    let (input, leader_epoch) = i32(input)?;
                    let (input, ()) = skip_tagged_fields(input, true)?;
                    Ok((
                        input,
                        LeaderIdAndEpoch {
                            leader_id,
                            leader_epoch,
                        },
                    ))
                })?);
            }
        }
        input
    } else {
        input
    };
    Ok((
        input,
        ProducePartitionResponse {
            index,
            error_code: ErrorCode::from(error_code),
            base_offset,
            log_append_time_ms,
            log_start_offset,
            record_errors,
            error_message,
            current_leader,
        },
    ))
}

fn write_partition_response(
    buf: &mut BytesMut,
    partition: &ProducePartitionResponse,
    version: i16,
) -> Result<(), EncodeError> {
    let flexible = version >= 9;
    buf.put_i32(partition.index);
    buf.put_i16(partition.error_code.code());
    buf.put_i64(partition.base_offset);
    if version >= 2 {
        buf.put_i64(partition.log_append_time_ms);
    }
    if version >= 5 {
        buf.put_i64(partition.log_start_offset);
    }
    if version >= 8 {
        put_array_len(
            buf,
            Some(partition.record_errors.len()),
            flexible,
            "record_errors",
        )?;
        for error in &partition.record_errors {
            buf.put_i32(error.batch_index);
            put_nullable_str(
                buf,
                error.batch_index_error_message.as_deref(),
                flexible,
                "batch_index_error_message",
            )?;
            put_empty_tagged_fields(buf, flexible);
        }
        put_nullable_str(buf, partition.error_message.as_deref(), flexible, "error_message")?;
    }
    if flexible {
        match partition.current_leader {
            Some(leader) if version >= 10 => {
                let mut field = [0u8; 9];
                field[..4].copy_from_slice(&leader.leader_id.to_be_bytes());
                field[4..8].copy_from_slice(&leader.leader_epoch.to_be_bytes());
                put_tagged_fields(buf, &[(0, &field)]);
            }
            _ => buf.put_u8(0),
        }
    }
    Ok(())
}

impl ProduceResponse {
    fn parse<'a>(_src: &Bytes, input: &'a [u8], version: i16) -> PResult<'a, Self> {
        let flexible = version >= 9;
        let (input, topics) = array(input, flexible, "responses", |input| {
            let (input, name, topic_id) = if version >= 13 {
                let (input, topic_id) = uuid(input)?;
                (input, String::new(), topic_id)
            } else {
                let (input, name) = string(input, flexible, "responses[].name")?;
                (input, name, Uuid::ZERO)
            };
            let (input, partitions) = array(input, flexible, "partition_responses", |input| {
                parse_partition_response(input, version)
            })?;
            let (input, ()) = skip_tagged_fields(input, flexible)?;
            Ok((
                input,
                ProduceTopicResponse {
                    name,
                    topic_id,
                    partitions,
                },
            ))
        })?;
        let (input, throttle_time_ms) = if version >= 1 { i32(input)? } else { (input, 0) };
        let mut node_endpoints = Vec::new();
        let input = if flexible {
            let (input, fields) = tagged_fields(input)?;
            for (tag, data) in fields {
                if tag == 0 && version >= 10 {
                    node_endpoints = parse_tagged_field(tag, data, |input| {
                        array(input, true, "node_endpoints", |input| {
                            let (input, node_id) = i32(input)?;
                            let (input, host) = string(input, true, "host")?;
                            let (input, port) = i32(input)?;
                            let (input, rack) = nullable_string(input, true)?;
                            let (input, ()) = skip_tagged_fields(input, true)?;
                            Ok((
                                input,
                                NodeEndpoint {
                                    node_id,
                                    host,
                                    port,
                                    rack,
                                },
                            ))
                        })
                    })?;
                }
            }
            input
        } else {
            input
        };
        Ok((
            input,
            Self {
                topics,
                throttle_time_ms,
                node_endpoints,
            },
        ))
    }

    fn write(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {
        let flexible = version >= 9;
        put_array_len(buf, Some(self.topics.len()), flexible, "responses")?;
        for topic in &self.topics {
            if version >= 13 {
                buf.put_slice(&topic.topic_id.0);
            } else {
                put_str(buf, &topic.name, flexible, "responses[].name")?;
            }
            put_array_len(buf, Some(topic.partitions.len()), flexible, "partition_responses")?;
            for partition in &topic.partitions {
                write_partition_response(buf, partition, version)?;
            }
            put_empty_tagged_fields(buf, flexible);
        }
        if version >= 1 {
            buf.put_i32(self.throttle_time_ms);
        }
        if flexible {
            if version >= 10 && !self.node_endpoints.is_empty() {
                let mut field = BytesMut::new();
                put_array_len(
                    &mut field,
                    Some(self.node_endpoints.len()),
                    true,
                    "node_endpoints",
                )?;
                for endpoint in &self.node_endpoints {
                    field.put_i32(endpoint.node_id);
                    put_str(&mut field, &endpoint.host, true, "host")?;
                    field.put_i32(endpoint.port);
                    put_nullable_str(&mut field, endpoint.rack.as_deref(), true, "rack")?;
                    field.put_u8(0);
                }
                put_tagged_fields(buf, &[(0, &field)]);
            } else {
                buf.put_u8(0);
            }
        }
        Ok(())
    }
}

impl_message!(ProduceResponse, ApiKey::PRODUCE, 0..=13);
