//! CreateTopics (key 19) v0–7 (flexible from v5) and DeleteTopics (key 20) v0–6 (flexible from
//! v4). kafluss never creates or deletes topics, so these carry just enough to read the names and
//! answer each topic with an error code and message at the request's version.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{EncodeError, PResult};
use crate::message::impl_message;
use crate::primitives::{
    array, bool, i16, i32, i8, nullable_array, nullable_string, parse_tagged_field, put_array_len, put_bool,
    put_empty_tagged_fields, put_nullable_str, put_str, put_tagged_fields, skip_tagged_fields, string,
    tagged_fields, uuid, Uuid,
};
use crate::{ApiKey, ErrorCode};

/// A topic to create (only its name and shape; assignments and configs are read and dropped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatableTopic {
    /// Topic name.
    pub name: String,
    /// Requested partition count (-1: broker default).
    pub num_partitions: i32,
    /// Requested replication factor (-1: broker default).
    pub replication_factor: i16,
    /// Manual assignments: (partition, broker ids).
    pub assignments: Vec<(i32, Vec<i32>)>,
    /// Configs: (name, value).
    pub configs: Vec<(String, Option<String>)>,
}

/// CreateTopics request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateTopicsRequest {
    /// Topics to create.
    pub topics: Vec<CreatableTopic>,
    /// Timeout.
    pub timeout_ms: i32,
    /// Validate only (v1+).
    pub validate_only: bool,
}

impl CreateTopicsRequest {
    fn parse<'a>(_src: &Bytes, input: &'a [u8], version: i16) -> PResult<'a, Self> {
        let flexible = version >= 5;
        let (input, topics) = array(input, flexible, "topics", |input| {
            let (input, name) = string(input, flexible, "topics[].name")?;
            let (input, num_partitions) = i32(input)?;
            let (input, replication_factor) = i16(input)?;
            let (input, assignments) = array(input, flexible, "assignments", |input| {
                let (input, partition_index) = i32(input)?;
                let (input, broker_ids) = array(input, flexible, "broker_ids", i32)?;
                let (input, ()) = skip_tagged_fields(input, flexible)?;
                Ok((input, (partition_index, broker_ids)))
            })?;
            let (input, configs) = array(input, flexible, "configs", |input| {
                let (input, name) = string(input, flexible, "configs[].name")?;
                let (input, value) = nullable_string(input, flexible)?;
                let (input, ()) = skip_tagged_fields(input, flexible)?;
                Ok((input, (name, value)))
            })?;
            let (input, ()) = skip_tagged_fields(input, flexible)?;
            Ok((
                input,
                CreatableTopic {
                    name,
                    num_partitions,
                    replication_factor,
                    assignments,
                    configs,
                },
            ))
        })?;
        let (input, timeout_ms) = i32(input)?;
        let (input, validate_only) = if version >= 1 {
            bool(input)?
        } else {
            (input, false)
        };
        let (input, ()) = skip_tagged_fields(input, flexible)?;
        Ok((
            input,
            Self {
                topics,
                timeout_ms,
                validate_only,
            },
        ))
    }

    fn write(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {
        let flexible = version >= 5;
        put_array_len(buf, Some(self.topics.len()), flexible, "topics")?;
        for topic in &self.topics {
            put_str(buf, &topic.name, flexible, "topics[].name")?;
            buf.put_i32(topic.num_partitions);
            buf.put_i16(topic.replication_factor);
            put_array_len(buf, Some(topic.assignments.len()), flexible, "assignments")?;
            for (partition_index, broker_ids) in &topic.assignments {
                buf.put_i32(*partition_index);
                put_array_len(buf, Some(broker_ids.len()), flexible, "broker_ids")?;
                for id in broker_ids {
                    buf.put_i32(*id);
                }
                put_empty_tagged_fields(buf, flexible);
            }
            put_array_len(buf, Some(topic.configs.len()), flexible, "configs")?;
            for (name, value) in &topic.configs {
                put_str(buf, name, flexible, "configs[].name")?;
                put_nullable_str(buf, value.as_deref(), flexible, "configs[].value")?;
                put_empty_tagged_fields(buf, flexible);
            }
            put_empty_tagged_fields(buf, flexible);
        }
        buf.put_i32(self.timeout_ms);
        if version >= 1 {
            put_bool(buf, self.validate_only);
        }
        put_empty_tagged_fields(buf, flexible);
        Ok(())
    }

    /// The response refusing every requested topic with `error_code` and `error_message`.
    pub fn error_response(&self, error_code: ErrorCode, error_message: Option<&str>) -> CreateTopicsResponse {
        CreateTopicsResponse {
            throttle_time_ms: 0,
            topics: self
                .topics
                .iter()
                .map(|topic| CreatableTopicResult::error(&topic.name, error_code, error_message))
                .collect(),
        }
    }
}

impl_message!(CreateTopicsRequest, ApiKey::CREATE_TOPICS, 0..=7);

/// One topic's outcome in a CreateTopics response. Configs (v5+) are always sent as null.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatableTopicResult {
    /// Topic name.
    pub name: String,
    /// Topic id (v7+).
    pub topic_id: Uuid,
    /// Outcome.
    pub error_code: ErrorCode,
    /// Message (v1+).
    pub error_message: Option<String>,
    /// Tagged field 0 (v5+), written only when non-zero.
    pub topic_config_error_code: i16,
    /// Partition count (v5+), -1 if unknown.
    pub num_partitions: i32,
    /// Replication factor (v5+), -1 if unknown.
    pub replication_factor: i16,
}

impl CreatableTopicResult {
    /// A refused topic.
    pub fn error(name: &str, error_code: ErrorCode, error_message: Option<&str>) -> Self {
        Self {
            name: name.to_owned(),
            topic_id: Uuid::ZERO,
            error_code,
            error_message: error_message.map(str::to_owned),
            topic_config_error_code: 0,
            num_partitions: -1,
            replication_factor: -1,
        }
    }
}

/// CreateTopics response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateTopicsResponse {
    /// Throttle time (v2+).
    pub throttle_time_ms: i32,
    /// Topics.
    pub topics: Vec<CreatableTopicResult>,
}

impl CreateTopicsResponse {
    fn parse<'a>(_src: &Bytes, input: &'a [u8], version: i16) -> PResult<'a, Self> {
        let flexible = version >= 5;
        let (input, throttle_time_ms) = if version >= 2 { i32(input)? } else { (input, 0) };
        let (input, topics) = array(input, flexible, "topics", |input| {
            let (input, name) = string(input, flexible, "topics[].name")?;
            let (input, topic_id) = if version >= 7 {
                uuid(input)?
            } else {
                (input, Uuid::ZERO)
            };
            let (input, error_code) = i16(input)?;
            let (input, error_message) = if version >= 1 {
                nullable_string(input, flexible)?
            } else {
                (input, None)
            };
            let (input, num_partitions, replication_factor) = if version >= 5 {
                let (input, num_partitions) = i32(input)?;
                let (input, replication_factor) = i16(input)?;
                let (input, _configs) = nullable_array(input, flexible, |input| {
                    let (input, _name) = string(input, flexible, "configs[].name")?;
                    let (input, _value) = nullable_string(input, flexible)?;
                    let (input, _read_only) = bool(input)?;
                    let (input, _config_source) = i8(input)?;
                    let (input, _is_sensitive) = bool(input)?;
                    skip_tagged_fields(input, flexible)
                })?;
                (input, num_partitions, replication_factor)
            } else {
                (input, -1, -1)
            };
            let mut topic_config_error_code = 0;
            let input = if flexible {
                let (input, fields) = tagged_fields(input)?;
                for (tag, data) in fields {
                    if tag == 0 {
                        topic_config_error_code = parse_tagged_field(tag, data, i16)?;
                    }
                }
                input
            } else {
                input
            };
            Ok((
                input,
                CreatableTopicResult {
                    name,
                    topic_id,
                    error_code: ErrorCode::from(error_code),
                    error_message,
                    topic_config_error_code,
                    num_partitions,
                    replication_factor,
                },
            ))
        })?;
        let (input, ()) = skip_tagged_fields(input, flexible)?;
        Ok((
            input,
            Self {
                throttle_time_ms,
                topics,
            },
        ))
    }

    fn write(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {
        let flexible = version >= 5;
        if version >= 2 {
            buf.put_i32(self.throttle_time_ms);
        }
        put_array_len(buf, Some(self.topics.len()), flexible, "topics")?;
        for topic in &self.topics {
            put_str(buf, &topic.name, flexible, "topics[].name")?;
            if version >= 7 {
                buf.put_slice(&topic.topic_id.0);
            }
            buf.put_i16(topic.error_code.code());
            if version >= 1 {
                put_nullable_str(buf, topic.error_message.as_deref(), flexible, "error_message")?;
            }
            if version >= 5 {
                buf.put_i32(topic.num_partitions);
                buf.put_i16(topic.replication_factor);
                put_array_len(buf, None, flexible, "configs")?;
            }
            if flexible {
                if topic.topic_config_error_code != 0 {
                    put_tagged_fields(buf, &[(0, &topic.topic_config_error_code.to_be_bytes())]);
                } else {
                    buf.put_u8(0);
                }
            }
        }
        put_empty_tagged_fields(buf, flexible);
        Ok(())
    }
}

impl_message!(CreateTopicsResponse, ApiKey::CREATE_TOPICS, 0..=7);

/// A topic to delete: by name (all versions) or by id (v6+).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteTopicState {
    /// Name; `None` only in v6+ for a deletion by id.
    pub name: Option<String>,
    /// Id (v6+), [`Uuid::ZERO`] when deleting by name.
    pub topic_id: Uuid,
}

/// DeleteTopics request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteTopicsRequest {
    /// Topics (v0–5 `topic_names`, v6+ `topics`).
    pub topics: Vec<DeleteTopicState>,
    /// Timeout.
    pub timeout_ms: i32,
}

impl DeleteTopicsRequest {
    fn parse<'a>(_src: &Bytes, input: &'a [u8], version: i16) -> PResult<'a, Self> {
        let flexible = version >= 4;
        let (input, topics) = if version >= 6 {
            array(input, flexible, "topics", |input| {
                let (input, name) = nullable_string(input, flexible)?;
                let (input, topic_id) = uuid(input)?;
                let (input, ()) = skip_tagged_fields(input, flexible)?;
                Ok((input, DeleteTopicState { name, topic_id }))
            })?
        } else {
            array(input, flexible, "topic_names", |input| {
                let (input, name) = string(input, flexible, "topic_names[]")?;
                Ok((
                    input,
                    DeleteTopicState {
                        name: Some(name),
                        topic_id: Uuid::ZERO,
                    },
                ))
            })?
        };
        let (input, timeout_ms) = i32(input)?;
        let (input, ()) = skip_tagged_fields(input, flexible)?;
        Ok((input, Self { topics, timeout_ms }))
    }

    fn write(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {
        let flexible = version >= 4;
        put_array_len(buf, Some(self.topics.len()), flexible, "topics")?;
        for topic in &self.topics {
            if version >= 6 {
                put_nullable_str(buf, topic.name.as_deref(), flexible, "topics[].name")?;
                buf.put_slice(&topic.topic_id.0);
                put_empty_tagged_fields(buf, flexible);
            } else {
                let name = topic.name.as_deref().ok_or(EncodeError::NotRepresentable {
                    field: "topic_names[]",
                    version,
                    reason: "deletion by id needs v6+",
                })?;
                put_str(buf, name, flexible, "topic_names[]")?;
            }
        }
        buf.put_i32(self.timeout_ms);
        put_empty_tagged_fields(buf, flexible);
        Ok(())
    }

    /// The response refusing every requested topic with `error_code` and `error_message`.
    pub fn error_response(&self, error_code: ErrorCode, error_message: Option<&str>) -> DeleteTopicsResponse {
        DeleteTopicsResponse {
            throttle_time_ms: 0,
            responses: self
                .topics
                .iter()
                .map(|topic| DeletableTopicResult {
                    name: topic.name.clone(),
                    topic_id: topic.topic_id,
                    error_code,
                    error_message: error_message.map(str::to_owned),
                })
                .collect(),
        }
    }
}

impl_message!(DeleteTopicsRequest, ApiKey::DELETE_TOPICS, 0..=6);

/// One topic's outcome in a DeleteTopics response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeletableTopicResult {
    /// Name (nullable from v6; `None` before v6 encodes as an empty string).
    pub name: Option<String>,
    /// Id (v6+).
    pub topic_id: Uuid,
    /// Outcome.
    pub error_code: ErrorCode,
    /// Message (v5+).
    pub error_message: Option<String>,
}

/// DeleteTopics response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteTopicsResponse {
    /// Throttle time (v1+).
    pub throttle_time_ms: i32,
    /// Topics.
    pub responses: Vec<DeletableTopicResult>,
}

impl DeleteTopicsResponse {
    fn parse<'a>(_src: &Bytes, input: &'a [u8], version: i16) -> PResult<'a, Self> {
        let flexible = version >= 4;
        let (input, throttle_time_ms) = if version >= 1 { i32(input)? } else { (input, 0) };
        let (input, responses) = array(input, flexible, "responses", |input| {
            let (input, name) = if version >= 6 {
                nullable_string(input, flexible)?
            } else {
                let (input, name) = string(input, flexible, "responses[].name")?;
                (input, Some(name))
            };
            let (input, topic_id) = if version >= 6 {
                uuid(input)?
            } else {
                (input, Uuid::ZERO)
            };
            let (input, error_code) = i16(input)?;
            let (input, error_message) = if version >= 5 {
                nullable_string(input, flexible)?
            } else {
                (input, None)
            };
            let (input, ()) = skip_tagged_fields(input, flexible)?;
            Ok((
                input,
                DeletableTopicResult {
                    name,
                    topic_id,
                    error_code: ErrorCode::from(error_code),
                    error_message,
                },
            ))
        })?;
        let (input, ()) = skip_tagged_fields(input, flexible)?;
        Ok((
            input,
            Self {
                throttle_time_ms,
                responses,
            },
        ))
    }

    fn write(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {
        let flexible = version >= 4;
        if version >= 1 {
            buf.put_i32(self.throttle_time_ms);
        }
        put_array_len(buf, Some(self.responses.len()), flexible, "responses")?;
        for topic in &self.responses {
            if version >= 6 {
                put_nullable_str(buf, topic.name.as_deref(), flexible, "responses[].name")?;
                buf.put_slice(&topic.topic_id.0);
            } else {
                put_str(
                    buf,
                    topic.name.as_deref().unwrap_or(""),
                    flexible,
                    "responses[].name",
                )?;
            }
            buf.put_i16(topic.error_code.code());
            if version >= 5 {
                put_nullable_str(buf, topic.error_message.as_deref(), flexible, "error_message")?;
            }
            put_empty_tagged_fields(buf, flexible);
        }
        put_empty_tagged_fields(buf, flexible);
        Ok(())
    }
}

impl_message!(DeleteTopicsResponse, ApiKey::DELETE_TOPICS, 0..=6);
