//! Metadata (api key 3, v0–12): topics are Kafka-enabled Fluss tables, partitions are buckets,
//! and this node leads every bucket (behaviour.md "Topics").
//!
//! Requested names are echoed as sent; an all-topics request lists every Kafka-enabled,
//! eligible table as `db.table`, sorted, minus those the principal may not DESCRIBE. A named
//! topic the principal may not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED, whether the table
//! exists or not (as Kafka does: the answer does not say whether it exists). A topic asked for
//! by a non-zero topic id is looked up by that id whatever name comes with it, as Kafka does,
//! and answers UNKNOWN_TOPIC_ID with a null name (so does a v10/v11 request's null name, which
//! Kafka refuses with INVALID_REQUEST instead). Topics are never auto-created.
//!
//! Authorized operations (v8+, when the request asks): the bit field of Kafka `AclOperation`s
//! the connection's principal may perform, derived from its Fluss ACLs through the authorizer
//! ([`TOPIC_OPERATIONS`], [`CLUSTER_OPERATIONS`]); without the authorizer every operation Kafka
//! lists for the resource. Not asked: -2147483648, as Kafka answers.

use bytes::Bytes;
use kafluss_protocol::encode_response_frame;
use kafluss_protocol::Uuid;
use kafluss_protocol::{ErrorCode, RequestHeader};
use kafluss_protocol::{
    MetadataBroker, MetadataPartition, MetadataRequest, MetadataRequestTopic, MetadataResponse,
    MetadataTopic, AUTHORIZED_OPERATIONS_OMITTED,
};

use kafluss_auth::{Operation, Resource};

use super::context::ConnectionContext;
use super::errors::{KafkaCode, TopicLookupRejection};
use super::{HandlerError, Response};
use crate::catalog::model::{CatalogSnapshot, TableInfo};
use crate::catalog::resolve::{resolve_topic, split_topic};

/// The only node: this server.
pub const NODE_ID: i32 = 0;

fn may_describe(context: &ConnectionContext, database: &str, table: &str) -> bool {
    let principal = context.principal();
    context.core.runtime().authorizer().authorize(
        &principal,
        context.peer.ip(),
        Operation::Describe,
        &Resource::table(database, table),
    )
}

/// Kafka's `AclOperation` codes (`org.apache.kafka.common.acl.AclOperation`): an operation is
/// bit `1 << code` of an authorized-operations field.
mod acl_operation {
    pub const READ: u8 = 3;
    pub const WRITE: u8 = 4;
    pub const CREATE: u8 = 5;
    pub const DELETE: u8 = 6;
    pub const ALTER: u8 = 7;
    pub const DESCRIBE: u8 = 8;
    pub const CLUSTER_ACTION: u8 = 9;
    pub const DESCRIBE_CONFIGS: u8 = 10;
    pub const ALTER_CONFIGS: u8 = 11;
    pub const IDEMPOTENT_WRITE: u8 = 12;
}

/// The operations Kafka 4.4 lists for a topic (3576 when all are granted), each with the Fluss
/// operation on the table that grants it.
pub const TOPIC_OPERATIONS: [(u8, Operation); 8] = [
    (acl_operation::READ, Operation::Read),
    (acl_operation::WRITE, Operation::Write),
    (acl_operation::CREATE, Operation::Create),
    (acl_operation::DELETE, Operation::Drop),
    (acl_operation::ALTER, Operation::Alter),
    (acl_operation::DESCRIBE, Operation::Describe),
    (acl_operation::DESCRIBE_CONFIGS, Operation::Describe),
    (acl_operation::ALTER_CONFIGS, Operation::Alter),
];

/// The operations Kafka 4.4 lists for the cluster (8096 when all are granted) but
/// IDEMPOTENT_WRITE, each with the Fluss operation on CLUSTER that grants it. CLUSTER_ACTION
/// (broker-to-broker requests) has no Fluss counterpart: only ALL grants it. IDEMPOTENT_WRITE
/// is granted as InitProducerId grants it: WRITE on some table, database or CLUSTER.
pub const CLUSTER_OPERATIONS: [(u8, Operation); 6] = [
    (acl_operation::CREATE, Operation::Create),
    (acl_operation::ALTER, Operation::Alter),
    (acl_operation::DESCRIBE, Operation::Describe),
    (acl_operation::CLUSTER_ACTION, Operation::All),
    (acl_operation::DESCRIBE_CONFIGS, Operation::Describe),
    (acl_operation::ALTER_CONFIGS, Operation::Alter),
];

/// The bit field of `operations` the principal may perform on `resource`.
fn authorized_operations(
    context: &ConnectionContext,
    resource: &Resource,
    operations: &[(u8, Operation)],
) -> i32 {
    let authorizer = context.core.runtime().authorizer();
    context.with_principal(|principal| {
        operations
            .iter()
            .filter(|(_, operation)| authorizer.authorize(principal, context.peer.ip(), *operation, resource))
            .fold(0, |bits, (code, _)| bits | 1 << code)
    })
}

/// The topic authorized-operations field of table `database`.`table`.
fn topic_operations(context: &ConnectionContext, database: &str, table: &str) -> i32 {
    authorized_operations(context, &Resource::table(database, table), &TOPIC_OPERATIONS)
}

/// The cluster authorized-operations field (v8–10).
fn cluster_operations(context: &ConnectionContext) -> i32 {
    let idempotent_write = context.with_principal(|principal| {
        context
            .core
            .runtime()
            .authorizer()
            .authorize_any(principal, context.peer.ip(), Operation::Write)
    });
    authorized_operations(context, &Resource::Cluster, &CLUSTER_OPERATIONS)
        | i32::from(idempotent_write) << acl_operation::IDEMPOTENT_WRITE
}

/// The entry for a requested topic name, with its authorized operations when `with_operations`
/// and the principal may DESCRIBE it (whether it exists or not, as Kafka answers).
fn named_topic(
    context: &ConnectionContext,
    snapshot: &CatalogSnapshot,
    name: String,
    default_db: &str,
    with_operations: bool,
) -> MetadataTopic {
    let error = |name, rejection: TopicLookupRejection| {
        MetadataTopic::error(Some(name), Uuid::ZERO, rejection.code())
    };
    let operations = match split_topic(&name, default_db) {
        Err(e) => return error(name, TopicLookupRejection::Topic(e)),
        Ok((database, table)) if !may_describe(context, database, table) => {
            return error(name, TopicLookupRejection::NotAuthorized)
        }
        Ok((database, table)) => with_operations.then(|| topic_operations(context, database, table)),
    };
    let mut entry = match resolve_topic(snapshot, &name, default_db) {
        Ok(table) => topic_entry(Some(name), &table),
        Err(e) => error(name, TopicLookupRejection::Topic(e)),
    };
    if let Some(operations) = operations {
        entry.topic_authorized_operations = operations;
    }
    entry
}

fn topic_entry(name: Option<String>, table: &TableInfo) -> MetadataTopic {
    // The name without a database is a topic of its own, with an id of its own.
    let bare = name.as_deref().is_some_and(crate::catalog::resolve::is_bare);
    MetadataTopic {
        error_code: ErrorCode::None,
        topic_id: Uuid(if bare {
            crate::catalog::model::bare_topic_id(table.topic_id)
        } else {
            table.topic_id
        }),
        name,
        is_internal: false,
        partitions: (0..table.bucket_count)
            .map(|bucket| MetadataPartition::single_replica(bucket as i32, NODE_ID))
            .collect(),
        topic_authorized_operations: AUTHORIZED_OPERATIONS_OMITTED,
    }
}

pub fn handle(
    context: &ConnectionContext,
    header: &RequestHeader,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let version = header.api_version;
    let request = super::decode_request::<MetadataRequest>(&body, version).map_err(|source| {
        HandlerError::Undecodable {
            api: "Metadata",
            version,
            source,
            body_start: Some(format!("{:02x?}", &body[..body.len().min(48)])),
        }
    })?;
    let runtime = context.core.runtime();
    let snapshot = runtime.catalog.snapshot();
    let default_db = &context.core.config().kafka_default_database;
    // v0 has no "all topics" null: an empty list means all there.
    let requested = match request.topics {
        Some(topics) if !(version == 0 && topics.is_empty()) => Some(topics),
        _ => None,
    };
    let with_operations = request.include_topic_authorized_operations;
    let topics = match requested {
        None => snapshot
            .kafka_topics
            .iter()
            .filter(|topic| may_describe(context, &topic.table.database, &topic.table.name))
            .map(|topic| {
                let mut entry = topic_entry(Some(topic.name.clone()), &topic.table);
                if with_operations {
                    entry.topic_authorized_operations =
                        topic_operations(context, &topic.table.database, &topic.table.name);
                }
                entry
            })
            .collect(),
        // Each topic once, as Kafka answers (it takes the names as a set): a request repeating
        // a name must not get its buckets listed again for every repetition.
        Some(topics) => {
            let mut seen = std::collections::HashSet::with_capacity(topics.len());
            topics
                .into_iter()
                // A non-zero topic id is the lookup, whatever name comes with it (Kafka ignores
                // the name then): no topic is known by id.
                .map(|topic| match topic.topic_id {
                    Uuid::ZERO => topic,
                    _ => MetadataRequestTopic { name: None, ..topic },
                })
                .filter(|topic| seen.insert((topic.name.clone(), topic.topic_id)))
                .map(|topic| match topic.name {
                    None => MetadataTopic::error(
                        None,
                        topic.topic_id,
                        TopicLookupRejection::UnknownTopicId.code(),
                    ),
                    Some(name) => named_topic(context, &snapshot, name, default_db, with_operations),
                })
                .collect()
        }
    };
    let cluster_authorized_operations = if request.include_cluster_authorized_operations {
        cluster_operations(context)
    } else {
        AUTHORIZED_OPERATIONS_OMITTED
    };
    let listener = &context.listener;
    let response = MetadataResponse {
        throttle_time_ms: 0,
        brokers: vec![MetadataBroker {
            node_id: NODE_ID,
            host: listener.advertised_host.clone(),
            port: i32::from(listener.advertised_port),
            rack: None,
        }],
        cluster_id: Some(snapshot.cluster_id.clone()),
        controller_id: NODE_ID,
        topics,
        cluster_authorized_operations,
        error_code: ErrorCode::None,
    };
    let failed = response.topics.iter().any(|t| !t.error_code.is_none());
    let frame = encode_response_frame(header.correlation_id, version, &response)
        .map_err(HandlerError::encode("Metadata", version))?;
    Ok(Response::frame(frame, failed))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With every operation granted, the fields are Kafka 4.4's without an authorizer.
    #[test]
    fn all_operations_are_kafkas_bit_fields() {
        let all =
            |operations: &[(u8, Operation)]| operations.iter().fold(0i32, |bits, (code, _)| bits | 1 << code);
        assert_eq!(all(&TOPIC_OPERATIONS), 3576);
        assert_eq!(
            all(&CLUSTER_OPERATIONS) | 1 << acl_operation::IDEMPOTENT_WRITE,
            8096
        );
    }
}
