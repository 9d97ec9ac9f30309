//! Metadata (api key 3, v0–12): topics are Kafka-enabled Fluss tables, partitions are buckets,
//! and this node leads every bucket (behaviour.md "Topics").
//!
//! Requested names are echoed as sent; an all-topics request lists every Kafka-enabled,
//! eligible table as `db.table`, sorted, minus those the principal may not DESCRIBE. A named
//! topic the principal may not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED, whether the table
//! exists or not (as Kafka does: the answer does not say whether it exists). Lookups by topic
//! id answer UNKNOWN_TOPIC_ID. Topics are never auto-created.

use bytes::Bytes;
use kafluss_protocol::encode_response_frame;
use kafluss_protocol::Uuid;
use kafluss_protocol::{ErrorCode, RequestHeader};
use kafluss_protocol::{
    MetadataBroker, MetadataPartition, MetadataRequest, MetadataResponse, MetadataTopic,
    AUTHORIZED_OPERATIONS_OMITTED,
};

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
        kafluss_auth::Operation::Describe,
        &kafluss_auth::Resource::table(database, table),
    )
}

/// The entry for a requested topic name.
fn named_topic(
    context: &ConnectionContext,
    snapshot: &CatalogSnapshot,
    name: String,
    default_db: &str,
) -> MetadataTopic {
    let error = |name, rejection: TopicLookupRejection| {
        MetadataTopic::error(Some(name), Uuid::ZERO, rejection.code())
    };
    match split_topic(&name, default_db) {
        Err(e) => error(name, TopicLookupRejection::Topic(e)),
        Ok((database, table)) if !may_describe(context, database, table) => {
            error(name, TopicLookupRejection::NotAuthorized)
        }
        Ok(_) => match resolve_topic(snapshot, &name, default_db) {
            Ok(table) => topic_entry(Some(name), &table),
            Err(e) => error(name, TopicLookupRejection::Topic(e)),
        },
    }
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
    let topics = match requested {
        None => snapshot
            .kafka_topics
            .iter()
            .filter(|topic| may_describe(context, &topic.table.database, &topic.table.name))
            .map(|topic| topic_entry(Some(topic.name.clone()), &topic.table))
            .collect(),
        // Each topic once, as Kafka answers (it takes the names as a set): a request repeating
        // a name must not get its buckets listed again for every repetition.
        Some(topics) => {
            let mut seen = std::collections::HashSet::with_capacity(topics.len());
            topics
                .into_iter()
                .filter(|topic| seen.insert((topic.name.clone(), topic.topic_id)))
                .map(|topic| match topic.name {
                    None => MetadataTopic::error(
                        None,
                        topic.topic_id,
                        TopicLookupRejection::UnknownTopicId.code(),
                    ),
                    Some(name) => named_topic(context, &snapshot, name, default_db),
                })
                .collect()
        }
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
        cluster_authorized_operations: AUTHORIZED_OPERATIONS_OMITTED,
        error_code: ErrorCode::None,
    };
    let failed = response.topics.iter().any(|t| !t.error_code.is_none());
    let frame = encode_response_frame(header.correlation_id, version, &response)
        .map_err(HandlerError::encode("Metadata", version))?;
    Ok(Response::frame(frame, failed))
}
