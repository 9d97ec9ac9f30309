//! Produce (api key 0, v3–11), as named steps:
//!
//! On the connection's core ([`dispatch`]): decode → [`whole_request_error`] (transactional
//! id, acks, duplicate partitions) → per partition [`prepare_partition`] (topic → table,
//! partition range, WRITE permission) → [`Shard::submit`] to the bucket's owner core, in
//! request order → a task joins the outcomes and encodes the response in request order
//! (none for acks=0).
//!
//! On the owner core: [`super::produce_owner`].

use std::collections::HashSet;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use kafluss_convert::ConvertError;
use kafluss_protocol::encode_response_frame;
use kafluss_protocol::{
    BatchIndexAndErrorMessage, ProducePartitionResponse, ProduceRequest, ProduceResponse,
    ProduceTopicResponse,
};
use kafluss_protocol::{ErrorCode, RequestHeader};

use crate::catalog::model::TableInfo;
use crate::catalog::resolve::TopicError;
use crate::connection::ConnectionContext;
use crate::errors;

use super::{Dispatch, PendingResponse, Response};

/// One partition's batch, owned, on its way to the bucket's owner core.
pub struct AppendJob {
    pub table: Arc<TableInfo>,
    pub bucket: u32,
    /// The Kafka partition as requested (= bucket); stored in `_kafka_metadata.partition`.
    pub partition: i32,
    /// The partition's `records` field, still compressed, sliced from the request frame.
    pub records: Option<Bytes>,
    /// -1 waits for group commit; 0 and 1 answer after the write.
    pub acks: i16,
}

/// The answer for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionOutcome {
    pub error: ErrorCode,
    pub error_message: Option<String>,
    pub base_offset: i64,
    pub log_start_offset: i64,
    /// (batch_index, message) of the records that failed conversion (v8+).
    pub record_errors: Vec<(i32, String)>,
    /// Rows appended.
    pub rows: u64,
    /// The conversion failure behind an INVALID_RECORD (its record index and JSON path are
    /// logged with the refusal).
    pub convert_error: Option<Box<ConvertError>>,
}

impl PartitionOutcome {
    pub fn error(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            error: code,
            error_message: Some(errors::bounded_message(message)),
            base_offset: -1,
            log_start_offset: -1,
            record_errors: Vec::new(),
            rows: 0,
            convert_error: None,
        }
    }

    pub fn storage_error(message: impl Into<String>) -> Self {
        Self::error(ErrorCode::KafkaStorageError, message)
    }

    pub(crate) fn appended(base_offset: u64, log_start_offset: u64, rows: u64) -> Self {
        Self {
            error: ErrorCode::None,
            error_message: None,
            base_offset: base_offset as i64,
            log_start_offset: log_start_offset as i64,
            record_errors: Vec::new(),
            rows,
            convert_error: None,
        }
    }
}

/// A request-level rejection: every partition of the request gets this code.
pub fn whole_request_error(request: &ProduceRequest, version: i16) -> Option<(ErrorCode, &'static str)> {
    if version < 3 {
        // Advertised from v0 because librdkafka enables gzip, snappy and lz4 only when the
        // Produce range starts at 0 (behaviour.md); v0-2 carry magic 0/1 message sets.
        return Some((
            ErrorCode::UnsupportedForMessageFormat,
            "Produce v0-2 (message sets of magic 0/1) is not supported: record batches (magic 2, Produce v3+) are",
        ));
    }
    if request.transactional_id.is_some() {
        return Some((
            ErrorCode::InvalidRequest,
            "transactions are not supported: set enable.idempotence=false and do not use a transactional.id",
        ));
    }
    if !matches!(request.acks, -1..=1) {
        return Some((ErrorCode::InvalidRequiredAcks, "acks must be -1 (all), 0 or 1"));
    }
    let mut seen = HashSet::new();
    for topic in &request.topics {
        for partition in &topic.partitions {
            if !seen.insert((topic.name.as_str(), partition.index)) {
                return Some((
                    ErrorCode::InvalidRequest,
                    "the request names the same topic partition twice",
                ));
            }
        }
    }
    None
}

/// Per-partition checks on the connection's core: topic → table, partition range, WRITE.
pub fn prepare_partition(
    context: &ConnectionContext,
    snapshot: &crate::catalog::model::CatalogSnapshot,
    topic: &str,
    partition: i32,
) -> Result<(Arc<TableInfo>, u32), PartitionOutcome> {
    let runtime = context.shard.runtime();
    let default_db = &context.shard.config().kafka_default_database;
    let table = crate::catalog::resolve::resolve_topic(snapshot, topic, default_db).map_err(|e| {
        PartitionOutcome::error(errors::topic_error_code(&e), errors::topic_error_message(&e))
    })?;
    if partition < 0 {
        return Err(PartitionOutcome::error(
            ErrorCode::InvalidRequest,
            format!("partition {partition} is negative"),
        ));
    }
    if partition as u32 >= table.bucket_count {
        return Err(PartitionOutcome::error(
            ErrorCode::UnknownTopicOrPartition,
            format!(
                "topic {topic} has {} partitions (the table's buckets); partition {partition} does not exist",
                table.bucket_count
            ),
        ));
    }
    let principal = context.principal();
    let resource = kafluss_auth::Resource::Table {
        database: table.database.clone(),
        table: table.name.clone(),
    };
    if !runtime.authorizer().authorize(
        &principal,
        context.peer.ip(),
        kafluss_auth::Operation::Write,
        &resource,
    ) {
        return Err(PartitionOutcome::error(
            ErrorCode::TopicAuthorizationFailed,
            format!("{principal} may not WRITE to {}.{}", table.database, table.name),
        ));
    }
    Ok((table, partition as u32))
}

/// Decodes the request, runs the checks, hands every valid partition to its owner core (in
/// request order) and returns the pending response.
pub async fn dispatch(context: &Rc<ConnectionContext>, header: &RequestHeader, body: Bytes) -> Dispatch {
    let api_key = header.api_key.0;
    let version = header.api_version;
    let correlation_id = header.correlation_id;
    let request = match super::decode_request::<ProduceRequest>(&body, version) {
        Ok(request) => request,
        Err(e) => {
            return Dispatch::Close {
                why: format!("undecodable Produce v{version} request: {e}"),
            }
        }
    };
    let acks = request.acks;
    // Slots in request order: either an immediate outcome or a receiver from the owner.
    enum Slot {
        Done(PartitionOutcome),
        Waiting(glommio::channels::local_channel::LocalReceiver<PartitionOutcome>),
    }
    let mut topics: Vec<(String, Vec<(i32, Slot)>)> = Vec::with_capacity(request.topics.len());
    if let Some((code, message)) = whole_request_error(&request, version) {
        for topic in &request.topics {
            let slots = topic
                .partitions
                .iter()
                .map(|p| (p.index, Slot::Done(PartitionOutcome::error(code, message))))
                .collect();
            topics.push((topic.name.clone(), slots));
        }
    } else {
        let snapshot = context.shard.runtime().catalog.snapshot();
        for topic in request.topics {
            let mut slots = Vec::with_capacity(topic.partitions.len());
            for partition in topic.partitions {
                let slot = match prepare_partition(context, &snapshot, &topic.name, partition.index) {
                    Err(outcome) => Slot::Done(outcome),
                    Ok((table, bucket)) => Slot::Waiting(
                        context
                            .shard
                            .submit(AppendJob {
                                table,
                                bucket,
                                partition: partition.index,
                                records: partition.records,
                                acks,
                            })
                            .await,
                    ),
                };
                slots.push((partition.index, slot));
            }
            topics.push((topic.name, slots));
        }
    }
    let context = context.clone();
    let task = glommio::spawn_local(async move {
        let mut failed = false;
        let mut responses = Vec::with_capacity(topics.len());
        for (name, slots) in topics {
            let mut partitions = Vec::with_capacity(slots.len());
            for (index, slot) in slots {
                let outcome = match slot {
                    Slot::Done(outcome) => outcome,
                    Slot::Waiting(receiver) => receiver
                        .recv()
                        .await
                        .unwrap_or_else(|| PartitionOutcome::storage_error("the bucket writer stopped")),
                };
                if outcome.error != ErrorCode::None {
                    failed = true;
                    refused(&context, &name, index, &outcome);
                }
                partitions.push(to_wire(index, outcome));
            }
            responses.push(ProduceTopicResponse { name, partitions });
        }
        if acks == 0 {
            return Response {
                frame: None,
                close_after: false,
                failed,
            };
        }
        let response = ProduceResponse {
            topics: responses,
            throttle_time_ms: 0,
            node_endpoints: Vec::new(),
        };
        match encode_response_frame(correlation_id, version, &response) {
            Ok(frame) => Response::frame(frame, failed),
            Err(e) => {
                tracing::error!("cannot encode Produce v{version} response: {e}");
                Response {
                    frame: None,
                    close_after: true,
                    failed: true,
                }
            }
        }
    });
    Dispatch::Respond {
        api_key,
        response: PendingResponse::Later(task),
    }
}

/// Counts a refused partition (by code, and by table when the topic resolves to one) and logs
/// it at WARN, rate-limited per (table, code) by `server.log-repeat-interval`. The topic is
/// resolved again here, on the error path, so the append path carries no extra reference.
fn refused(context: &ConnectionContext, topic: &str, partition: i32, outcome: &PartitionOutcome) {
    let shard = &context.shard;
    let code = outcome.error;
    shard.metrics().record_refused(code);
    let snapshot = shard.runtime().catalog.snapshot();
    let table =
        crate::catalog::resolve::resolve_topic(&snapshot, topic, &shard.config().kafka_default_database);
    let label = match table {
        Ok(table) => {
            shard.with_table_metrics(&table, |series| series.record_refused(shard.id, code));
            table.path()
        }
        Err(TopicError::MappingDisabled(path) | TopicError::Ineligible { table: path, .. }) => path,
        // Unknown or invalid topics: the name as sent (the limiter's key map is bounded).
        Err(_) => topic.to_string(),
    };
    let Some(suppressed) = shard.log_repeat(&label, code.name()) else {
        return;
    };
    let principal = context.principal();
    let message = outcome.error_message.as_deref().unwrap_or("");
    match &outcome.convert_error {
        Some(e) => tracing::warn!(
            table = %label,
            partition,
            client = %context.peer,
            principal = %principal,
            code = %code.name(),
            record = e.record_index,
            path = %json_path(&e.path),
            reason = %e.reason,
            suppressed,
            "produce refused"
        ),
        None => tracing::warn!(
            table = %label,
            partition,
            client = %context.peer,
            principal = %principal,
            code = %code.name(),
            reason = %message,
            suppressed,
            "produce refused"
        ),
    }
}

/// A converter path (`a.b[2]`, or `[0]` for an array value) as JSONPath from `$`.
fn json_path(path: &str) -> String {
    if path.is_empty() || path.starts_with('[') {
        format!("${path}")
    } else {
        format!("$.{path}")
    }
}

fn to_wire(index: i32, outcome: PartitionOutcome) -> ProducePartitionResponse {
    ProducePartitionResponse {
        index,
        error_code: outcome.error,
        base_offset: outcome.base_offset,
        log_append_time_ms: -1,
        log_start_offset: outcome.log_start_offset,
        record_errors: outcome
            .record_errors
            .into_iter()
            .map(|(batch_index, message)| BatchIndexAndErrorMessage {
                batch_index,
                batch_index_error_message: Some(message),
            })
            .collect(),
        error_message: outcome.error_message,
        current_leader: None,
    }
}
