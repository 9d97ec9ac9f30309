//! Metadata (key 3) v0–13. Flexible from v9; topic ids from v10; request topic names nullable
//! from v10 and response names from v12; authorized-operations fields from v8 (cluster: v8–10);
//! a top-level error code in the response from v13 (the request is v12's).

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{EncodeError, PResult};
use crate::message::impl_message;
use crate::primitives::{
    array, bool, i16, i32, nullable_array, nullable_str, nullable_string, put_array_len, put_bool,
    put_empty_tagged_fields, put_nullable_str, put_str, put_tagged_fields_with_raw, skip_tagged_fields,
    string, unknown_tagged_fields, uuid, RawTaggedField, Uuid,
};
use crate::{ApiKey, ErrorCode};

/// "Not requested" value of the authorized-operations bit fields.
pub const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;

/// One requested topic: by name, or (v10+) by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataRequestTopic {
    /// Topic id (v10+); [`Uuid::ZERO`] when looked up by name.
    pub topic_id: Uuid,
    /// Topic name; `None` only from v10, for a lookup by id.
    pub name: Option<String>,
}

/// Metadata request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataRequest {
    /// `None` asks for all topics (v1+). In v0 an empty list means all topics and decodes as
    /// `None`; `None` encodes as an empty list there.
    pub topics: Option<Vec<MetadataRequestTopic>>,
    /// v4+; kafluss never auto-creates, whatever this says.
    pub allow_auto_topic_creation: bool,
    /// v8–10.
    pub include_cluster_authorized_operations: bool,
    /// v8+.
    pub include_topic_authorized_operations: bool,
    /// Unknown top-level tagged fields (v9+).
    pub unknown_tagged_fields: Vec<RawTaggedField>,
}

impl MetadataRequest {
    /// A request for the named topics (`None`: all topics).
    pub fn for_names(names: Option<&[&str]>) -> Self {
        Self {
            topics: names.map(|names| {
                names
                    .iter()
                    .map(|name| MetadataRequestTopic {
                        topic_id: Uuid::ZERO,
                        name: Some((*name).to_owned()),
                    })
                    .collect()
            }),
            allow_auto_topic_creation: false,
            include_cluster_authorized_operations: false,
            include_topic_authorized_operations: false,
            unknown_tagged_fields: Vec::new(),
        }
    }

    fn parse<'a>(src: &Bytes, input: &'a [u8], version: i16) -> PResult<'a, Self> {
        let flexible = version >= 9;
        let (input, topics) = nullable_array(input, flexible, |input| {
            let (input, topic_id) = if version >= 10 {
                uuid(input)?
            } else {
                (input, Uuid::ZERO)
            };
            let (input, name) = if version >= 10 {
                nullable_string(input, flexible)?
            } else {
                let (input, name) = string(input, flexible, "topics[].name")?;
                (input, Some(name))
            };
            let (input, ()) = skip_tagged_fields(input, flexible)?;
            Ok((input, MetadataRequestTopic { topic_id, name }))
        })?;
        if version == 0 && topics.is_none() {
            return crate::error::fail(crate::DecodeError::UnexpectedNull("topics"));
        }
        let topics = match topics {
            Some(topics) if version == 0 && topics.is_empty() => None,
            other => other,
        };
        let (input, allow_auto_topic_creation) = if version >= 4 { bool(input)? } else { (input, true) };
        let (input, include_cluster_authorized_operations) = if (8..=10).contains(&version) {
            bool(input)?
        } else {
            (input, false)
        };
        let (input, include_topic_authorized_operations) = if version >= 8 {
            bool(input)?
        } else {
            (input, false)
        };
        let (input, unknown_tagged_fields) = if flexible {
            unknown_tagged_fields(src, input)?
        } else {
            (input, Vec::new())
        };
        Ok((
            input,
            Self {
                topics,
                allow_auto_topic_creation,
                include_cluster_authorized_operations,
                include_topic_authorized_operations,
                unknown_tagged_fields,
            },
        ))
    }

    fn write(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {
        let flexible = version >= 9;
        match (&self.topics, version) {
            (None, 0) => put_array_len(buf, Some(0), false, "topics")?,
            (None, _) => put_array_len(buf, None, flexible, "topics")?,
            (Some(topics), _) => {
                put_array_len(buf, Some(topics.len()), flexible, "topics")?;
                for topic in topics {
                    if version >= 10 {
                        buf.put_slice(&topic.topic_id.0);
                        put_nullable_str(buf, topic.name.as_deref(), flexible, "topics[].name")?;
                    } else {
                        let name = topic.name.as_deref().ok_or(EncodeError::NotRepresentable {
                            field: "topics[].name",
                            version,
                            reason: "topic names are required before v10",
                        })?;
                        put_str(buf, name, flexible, "topics[].name")?;
                    }
                    put_empty_tagged_fields(buf, flexible);
                }
            }
        }
        if version >= 4 {
            put_bool(buf, self.allow_auto_topic_creation);
        }
        if (8..=10).contains(&version) {
            put_bool(buf, self.include_cluster_authorized_operations);
        }
        if version >= 8 {
            put_bool(buf, self.include_topic_authorized_operations);
        }
        if flexible {
            put_tagged_fields_with_raw(buf, Vec::new(), &self.unknown_tagged_fields);
        }
        Ok(())
    }
}

impl_message!(MetadataRequest, ApiKey::METADATA, 0..=13);

/// A broker in the Metadata response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataBroker {
    /// Node id.
    pub node_id: i32,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: i32,
    /// Rack (v1+).
    pub rack: Option<String>,
}

/// A partition in the Metadata response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataPartition {
    /// Partition error.
    pub error_code: ErrorCode,
    /// Partition number.
    pub partition_index: i32,
    /// Leader node.
    pub leader_id: i32,
    /// Leader epoch (v7+).
    pub leader_epoch: i32,
    /// All replicas.
    pub replica_nodes: Vec<i32>,
    /// In-sync replicas.
    pub isr_nodes: Vec<i32>,
    /// Offline replicas (v5+).
    pub offline_replicas: Vec<i32>,
}

impl MetadataPartition {
    /// A healthy partition whose only replica, and so its leader, is `node_id` (epoch 0).
    pub fn single_replica(partition_index: i32, node_id: i32) -> Self {
        Self {
            error_code: ErrorCode::None,
            partition_index,
            leader_id: node_id,
            leader_epoch: 0,
            replica_nodes: vec![node_id],
            isr_nodes: vec![node_id],
            offline_replicas: Vec::new(),
        }
    }
}

/// A topic in the Metadata response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataTopic {
    /// Topic error.
    pub error_code: ErrorCode,
    /// Topic name; null allowed from v12 (a failed lookup by id). Before v12 `None` encodes as
    /// an empty string, since the field is not nullable there.
    pub name: Option<String>,
    /// Topic id (v10+).
    pub topic_id: Uuid,
    /// Internal topic flag (v1+).
    pub is_internal: bool,
    /// Partitions.
    pub partitions: Vec<MetadataPartition>,
    /// Authorized operations bit field (v8+).
    pub topic_authorized_operations: i32,
}

impl MetadataTopic {
    /// A topic entry carrying only an error, as sent for missing or invalid topics.
    pub fn error(name: Option<String>, topic_id: Uuid, error_code: ErrorCode) -> Self {
        Self {
            error_code,
            name,
            topic_id,
            is_internal: false,
            partitions: Vec::new(),
            topic_authorized_operations: AUTHORIZED_OPERATIONS_OMITTED,
        }
    }
}

/// Metadata response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataResponse {
    /// Throttle time (v3+).
    pub throttle_time_ms: i32,
    /// Brokers.
    pub brokers: Vec<MetadataBroker>,
    /// Cluster id (v2+).
    pub cluster_id: Option<String>,
    /// Controller node (v1+).
    pub controller_id: i32,
    /// Topics.
    pub topics: Vec<MetadataTopic>,
    /// Cluster authorized operations (v8–10).
    pub cluster_authorized_operations: i32,
    /// Top-level error (v13+); not written before v13.
    pub error_code: ErrorCode,
}

impl MetadataResponse {
    fn parse<'a>(_src: &Bytes, input: &'a [u8], version: i16) -> PResult<'a, Self> {
        let flexible = version >= 9;
        let (input, throttle_time_ms) = if version >= 3 { i32(input)? } else { (input, 0) };
        let (input, brokers) = array(input, flexible, "brokers", |input| {
            let (input, node_id) = i32(input)?;
            let (input, host) = string(input, flexible, "brokers[].host")?;
            let (input, port) = i32(input)?;
            let (input, rack) = if version >= 1 {
                nullable_string(input, flexible)?
            } else {
                (input, None)
            };
            let (input, ()) = skip_tagged_fields(input, flexible)?;
            Ok((
                input,
                MetadataBroker {
                    node_id,
                    host,
                    port,
                    rack,
                },
            ))
        })?;
        let (input, cluster_id) = if version >= 2 {
            nullable_string(input, flexible)?
        } else {
            (input, None)
        };
        let (input, controller_id) = if version >= 1 { i32(input)? } else { (input, -1) };
        let (input, topics) = array(input, flexible, "topics", |input| parse_topic(input, version))?;
        let (input, cluster_authorized_operations) = if (8..=10).contains(&version) {
            i32(input)?
        } else {
            (input, AUTHORIZED_OPERATIONS_OMITTED)
        };
        let (input, error_code) = if version >= 13 { i16(input)? } else { (input, 0) };
        let (input, ()) = skip_tagged_fields(input, flexible)?;
        Ok((
            input,
            Self {
                throttle_time_ms,
                brokers,
                cluster_id,
                controller_id,
                topics,
                cluster_authorized_operations,
                error_code: ErrorCode::from(error_code),
            },
        ))
    }

    fn write(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {
        let flexible = version >= 9;
        if version >= 3 {
            buf.put_i32(self.throttle_time_ms);
        }
        put_array_len(buf, Some(self.brokers.len()), flexible, "brokers")?;
        for broker in &self.brokers {
            buf.put_i32(broker.node_id);
            put_str(buf, &broker.host, flexible, "brokers[].host")?;
            buf.put_i32(broker.port);
            if version >= 1 {
                put_nullable_str(buf, broker.rack.as_deref(), flexible, "brokers[].rack")?;
            }
            put_empty_tagged_fields(buf, flexible);
        }
        if version >= 2 {
            put_nullable_str(buf, self.cluster_id.as_deref(), flexible, "cluster_id")?;
        }
        if version >= 1 {
            buf.put_i32(self.controller_id);
        }
        put_array_len(buf, Some(self.topics.len()), flexible, "topics")?;
        for topic in &self.topics {
            write_topic(buf, topic, version)?;
        }
        if (8..=10).contains(&version) {
            buf.put_i32(self.cluster_authorized_operations);
        }
        if version >= 13 {
            buf.put_i16(self.error_code.code());
        }
        put_empty_tagged_fields(buf, flexible);
        Ok(())
    }
}

fn parse_topic(input: &[u8], version: i16) -> PResult<'_, MetadataTopic> {
    let flexible = version >= 9;
    let (input, error_code) = i16(input)?;
    let (input, name) = if version >= 12 {
        let (input, name) = nullable_str(input, flexible)?;
        (input, name.map(str::to_owned))
    } else {
        let (input, name) = string(input, flexible, "topics[].name")?;
        (input, Some(name))
    };
    let (input, topic_id) = if version >= 10 {
        uuid(input)?
    } else {
        (input, Uuid::ZERO)
    };
    let (input, is_internal) = if version >= 1 {
        bool(input)?
    } else {
        (input, false)
    };
    let (input, partitions) = array(input, flexible, "partitions", |input| {
        let (input, error_code) = i16(input)?;
        let (input, partition_index) = i32(input)?;
        let (input, leader_id) = i32(input)?;
        let (input, leader_epoch) = if version >= 7 { i32(input)? } else { (input, -1) };
        let (input, replica_nodes) = array(input, flexible, "replica_nodes", i32)?;
        let (input, isr_nodes) = array(input, flexible, "isr_nodes", i32)?;
        let (input, offline_replicas) = if version >= 5 {
            array(input, flexible, "offline_replicas", i32)?
        } else {
            (input, Vec::new())
        };
        let (input, ()) = skip_tagged_fields(input, flexible)?;
        Ok((
            input,
            MetadataPartition {
                error_code: ErrorCode::from(error_code),
                partition_index,
                leader_id,
                leader_epoch,
                replica_nodes,
                isr_nodes,
                offline_replicas,
            },
        ))
    })?;
    let (input, topic_authorized_operations) = if version >= 8 {
        i32(input)?
    } else {
        (input, AUTHORIZED_OPERATIONS_OMITTED)
    };
    let (input, ()) = skip_tagged_fields(input, flexible)?;
    Ok((
        input,
        MetadataTopic {
            error_code: ErrorCode::from(error_code),
            name,
            topic_id,
            is_internal,
            partitions,
            topic_authorized_operations,
        },
    ))
}

fn write_i32_array(
    buf: &mut BytesMut,
    values: &[i32],
    flexible: bool,
    field: &'static str,
) -> Result<(), EncodeError> {
    put_array_len(buf, Some(values.len()), flexible, field)?;
    for value in values {
        buf.put_i32(*value);
    }
    Ok(())
}

fn write_topic(buf: &mut BytesMut, topic: &MetadataTopic, version: i16) -> Result<(), EncodeError> {
    let flexible = version >= 9;
    buf.put_i16(topic.error_code.code());
    if version >= 12 {
        put_nullable_str(buf, topic.name.as_deref(), flexible, "topics[].name")?;
    } else {
        put_str(
            buf,
            topic.name.as_deref().unwrap_or(""),
            flexible,
            "topics[].name",
        )?;
    }
    if version >= 10 {
        buf.put_slice(&topic.topic_id.0);
    }
    if version >= 1 {
        put_bool(buf, topic.is_internal);
    }
    put_array_len(buf, Some(topic.partitions.len()), flexible, "partitions")?;
    for partition in &topic.partitions {
        buf.put_i16(partition.error_code.code());
        buf.put_i32(partition.partition_index);
        buf.put_i32(partition.leader_id);
        if version >= 7 {
            buf.put_i32(partition.leader_epoch);
        }
        write_i32_array(buf, &partition.replica_nodes, flexible, "replica_nodes")?;
        write_i32_array(buf, &partition.isr_nodes, flexible, "isr_nodes")?;
        if version >= 5 {
            write_i32_array(buf, &partition.offline_replicas, flexible, "offline_replicas")?;
        }
        put_empty_tagged_fields(buf, flexible);
    }
    if version >= 8 {
        buf.put_i32(topic.topic_authorized_operations);
    }
    put_empty_tagged_fields(buf, flexible);
    Ok(())
}

impl_message!(MetadataResponse, ApiKey::METADATA, 0..=13);
