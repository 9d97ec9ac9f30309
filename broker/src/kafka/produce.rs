//! Produce (api key 0, v3–12), on the connection's core, as named steps:
//!
//! decode → [`whole_request_error`] (transactional id, acks, duplicate partitions) → per
//! partition [`prepare_partition`] (topic → table, partition range, WRITE permission) →
//! [`Submit::submit`](crate::append::Submit) to the bucket's owner core, in request order → a
//! task joins the outcomes and encodes the response in request order. acks=0 sends nothing when
//! every partition was stored, and closes the connection when one was not (as Kafka does, so
//! the client notices).
//!
//! On the owner core: [`crate::append`].

use std::collections::HashSet;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use kafluss_protocol::encode_response_frame;
use kafluss_protocol::{
    BatchIndexAndErrorMessage, ProducePartitionResponse, ProduceRequest, ProduceResponse,
    ProduceTopicResponse,
};
use kafluss_protocol::{ErrorCode, RequestHeader, Uuid};

use super::context::ConnectionContext;
use super::errors::{
    bounded_message, char_floor, KafkaCode, MessageBudget, PartitionRejection, RequestRejection,
};
use super::{Dispatch, HandlerError, PendingResponse, Response};
use crate::append::{AppendError, AppendJob, AppendOutcome};
use crate::catalog::model::TableInfo;
use crate::catalog::resolve::TopicError;
use crate::catalog::resolve::MAX_TOPIC_NAME_LEN;
use crate::telemetry::Repeats;

/// The answer for one partition, as the response carries it.
#[derive(Debug)]
pub struct PartitionAnswer {
    pub error: ErrorCode,
    pub error_message: Option<String>,
    pub base_offset: i64,
    pub log_start_offset: i64,
    /// (batch_index, message) of the records that failed conversion (v8+).
    pub record_errors: Vec<(i32, String)>,
    /// The failure behind an error (a conversion failure's record index and JSON path are
    /// logged with the refusal).
    pub cause: Option<AppendError>,
}

impl PartitionAnswer {
    fn refused(code: ErrorCode, message: String) -> Self {
        Self {
            error: code,
            error_message: Some(bounded_message(message)),
            base_offset: -1,
            log_start_offset: -1,
            record_errors: Vec::new(),
            cause: None,
        }
    }

    /// A partition refused on this core.
    pub fn rejected<R: KafkaCode + std::fmt::Display>(rejection: &R) -> Self {
        Self::refused(rejection.code(), rejection.to_string())
    }

    /// What the owner core answered.
    pub fn from_outcome(outcome: AppendOutcome) -> Self {
        match outcome {
            Ok(appended) => Self {
                error: ErrorCode::None,
                error_message: None,
                base_offset: appended.base_offset as i64,
                log_start_offset: appended.log_start_offset as i64,
                record_errors: Vec::new(),
                cause: None,
            },
            Err(error) => {
                let mut answer = Self::refused(error.code(), error.to_string());
                if let AppendError::Convert(errors) = &error {
                    answer.record_errors = std::iter::once(&errors.first)
                        .chain(&errors.more)
                        .map(|e| (e.record_index as i32, bounded_message(e.to_string())))
                        .collect();
                }
                answer.cause = Some(error);
                answer
            }
        }
    }
}

/// A request-level rejection: every partition of the request gets it.
pub fn whole_request_error(request: &ProduceRequest, version: i16) -> Option<RequestRejection> {
    if version < 3 {
        // Advertised from v0 because librdkafka enables gzip, snappy and lz4 only when the
        // Produce range starts at 0 (behaviour.md); v0-2 carry magic 0/1 message sets.
        return Some(RequestRejection::LegacyVersion);
    }
    if request.transactional_id.is_some() {
        return Some(RequestRejection::Transactional);
    }
    if !matches!(request.acks, -1..=1) {
        return Some(RequestRejection::InvalidAcks);
    }
    named_twice(request).then_some(RequestRejection::DuplicatePartition)
}

/// What one topic or partition of a Produce request is counted in `kafka.max-answer-memory`
/// from its decoding until the answer is written: its decoded entry, its slot (an owner's
/// reply channel), its result and its part of the answer (a bound of what they take: a request
/// of 100,000 partitions held about 330 bytes per entry until it was answered).
pub const ENTRY_BYTES: usize = 512;

/// Partitions a request may name before [`named_twice`] sets them apart with a hash set
/// rather than by comparing each with the ones before it.
const FEW_PARTITIONS: usize = 16;

/// Whether `request` names some topic partition twice. Most requests name a few partitions
/// (one, from a client sending as records come): those are compared pairwise, without
/// allocating; longer lists (chosen by the client) go through a hash set, so a request's
/// check stays linear in its length.
fn named_twice(request: &ProduceRequest) -> bool {
    let named = || {
        request.topics.iter().flat_map(|topic| {
            topic
                .partitions
                .iter()
                .map(move |p| (topic.name.as_str(), p.index))
        })
    };
    let count: usize = request.topics.iter().map(|topic| topic.partitions.len()).sum();
    if count <= FEW_PARTITIONS {
        return named()
            .enumerate()
            .any(|(at, pair)| named().take(at).any(|earlier| earlier == pair));
    }
    let mut seen = HashSet::with_capacity(count);
    named().any(|pair| !seen.insert(pair))
}

/// Per-partition checks on the connection's core: topic name, WRITE on the table it names,
/// then table, partition range, and one record batch (as Kafka checks, in this order). WRITE
/// comes before the table is looked up, as Kafka checks authorization first: a principal
/// without it learns nothing of whether the table exists, how many buckets it has or whether
/// it is mapped.
pub fn prepare_partition(
    context: &ConnectionContext,
    snapshot: &crate::catalog::model::CatalogSnapshot,
    topic: &str,
    partition: i32,
    records: Option<&Bytes>,
) -> Result<(Arc<TableInfo>, u32), PartitionRejection> {
    let runtime = context.core.runtime();
    let default_db = &context.core.config().kafka_default_database;
    let (database, name) =
        crate::catalog::resolve::split_topic(topic, default_db).map_err(PartitionRejection::Topic)?;
    let allowed = context.with_principal(|principal| {
        runtime.authorizer().authorize_table(
            principal,
            context.peer.ip(),
            kafluss_auth::Operation::Write,
            database,
            name,
        )
    });
    if !allowed {
        return Err(PartitionRejection::NotAuthorized {
            principal: context.principal().to_string(),
            database: database.to_string(),
            table: name.to_string(),
        });
    }
    let table = crate::catalog::resolve::resolve_names(snapshot, database, name)
        .map_err(PartitionRejection::Topic)?;
    if partition < 0 {
        return Err(PartitionRejection::NegativePartition(partition));
    }
    if partition as u32 >= table.bucket_count {
        return Err(PartitionRejection::NoSuchPartition {
            topic: topic.to_string(),
            partitions: table.bucket_count,
            partition,
        });
    }
    match records.map_or(0, |records| kafluss_protocol::bytes_after_first_batch(records)) {
        0 => Ok((table, partition as u32)),
        extra => Err(PartitionRejection::SeveralBatches(extra)),
    }
}

/// Decodes the request, runs the checks, hands every valid partition to its owner core (in
/// request order) and returns the pending response.
pub async fn dispatch(context: &Rc<ConnectionContext>, header: &RequestHeader, body: Bytes) -> Dispatch {
    let api_key = header.api_key.0;
    let version = header.api_version;
    let correlation_id = header.correlation_id;
    let max_entries = context.core.config().max_request_partitions;
    let request = match super::decode_lenient(&body, |body| {
        ProduceRequest::decode_bounded(body, version, max_entries)
    }) {
        Ok(request) => request,
        Err(e) => {
            return Dispatch::Close {
                why: HandlerError::undecodable("Produce", version, e),
            }
        }
    };
    // What the request holds until its answer is written, counted before anything is routed:
    // per topic and partition named, its slot, result and answer (ENTRY_BYTES).
    let entries = request.topics.len() + request.topics.iter().map(|t| t.partitions.len()).sum::<usize>();
    let held = match context
        .core
        .hold_answer_memory(entries.saturating_mul(ENTRY_BYTES))
        .await
    {
        Ok(held) => held,
        Err(why) => return Dispatch::Close { why },
    };
    let acks = request.acks;
    // Slots in request order: either an immediate answer or a receiver from the owner.
    enum Slot {
        Done(PartitionAnswer),
        Waiting(glommio::channels::local_channel::LocalReceiver<AppendOutcome>),
    }
    let mut topics: Vec<(String, Vec<(i32, Slot)>)> = Vec::with_capacity(request.topics.len());
    if let Some(rejection) = whole_request_error(&request, version) {
        for topic in &request.topics {
            let slots = topic
                .partitions
                .iter()
                .map(|p| (p.index, Slot::Done(PartitionAnswer::rejected(&rejection))))
                .collect();
            topics.push((topic.name.clone(), slots));
        }
    } else {
        let snapshot = context.core.runtime().catalog.snapshot();
        // The core every routed partition went to: None before the first, Some(None) once
        // they went to more than one (or an owner is unknown).
        let mut owner: Option<Option<usize>> = None;
        for topic in request.topics {
            let mut slots = Vec::with_capacity(topic.partitions.len());
            for partition in topic.partitions {
                // A request of many refused partitions awaits nothing else: let the core's other
                // connections run when its time slice is used up.
                glommio::yield_if_needed().await;
                let slot = match prepare_partition(
                    context,
                    &snapshot,
                    &topic.name,
                    partition.index,
                    partition.records.as_ref(),
                ) {
                    Err(rejection) => Slot::Done(PartitionAnswer::rejected(&rejection)),
                    Ok((table, bucket)) => {
                        let table_id = table.id;
                        let router = &context.core.router;
                        let receiver = router
                            .submit(AppendJob {
                                table,
                                bucket,
                                partition: partition.index,
                                records: partition.records,
                                acks,
                                bare_topic: crate::catalog::resolve::is_bare(&topic.name),
                            })
                            .await;
                        let this = router.owner_of(table_id, bucket);
                        owner = Some(match owner {
                            Some(seen) if seen != this => None,
                            _ => this,
                        });
                        Slot::Waiting(receiver)
                    }
                };
                slots.push((partition.index, slot));
            }
            topics.push((topic.name, slots));
        }
        context.writes.record(owner.flatten());
    }
    let context = context.clone();
    let answers = Box::pin(async move {
        let mut failed = false;
        let mut budget = MessageBudget::default();
        let mut responses = Vec::with_capacity(topics.len());
        for (name, slots) in topics {
            let mut partitions = Vec::with_capacity(slots.len());
            for (index, slot) in slots {
                glommio::yield_if_needed().await;
                let answer = match slot {
                    Slot::Done(answer) => answer,
                    Slot::Waiting(receiver) => PartitionAnswer::from_outcome(
                        receiver.recv().await.unwrap_or(Err(AppendError::WriterStopped)),
                    ),
                };
                if answer.error != ErrorCode::None {
                    failed = true;
                    refused(&context, &name, index, &answer);
                }
                partitions.push(to_wire(index, answer, &mut budget));
            }
            responses.push(ProduceTopicResponse {
                name,
                topic_id: Uuid::ZERO,
                partitions,
            });
        }
        if acks == 0 {
            // Nothing is sent back; a failure closes the connection, as Kafka does, so the
            // client notices (it reconnects and its next sends report the error).
            if failed {
                let peer = context.peer;
                super::connection::log_close(
                    &context.core,
                    "failed acks=0 Produce request",
                    |suppressed| tracing::info!(%peer, suppressed, "closing Kafka connection: an acks=0 Produce request failed"),
                );
            }
            return Response {
                frame: None,
                close_after: failed,
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
        response: PendingResponse::Later(answers),
        held: Some(held),
    }
}

/// The repeat-limit key of the refusals whose topic names no table (unknown or invalid): its
/// name is the client's to choose, without end, so those refusals are limited per code alone.
/// (No table's path: a path has a `.`.)
const NO_TABLE: &str = "topics naming no table";

/// Counts a refused partition (by code, and by table when the topic resolves to one) and logs
/// it at WARN, rate-limited by `server.log-repeat-interval` per (table, code) when the topic
/// names a table (Kafka enabled or not: bounded by the catalog), else per code alone
/// ([`NO_TABLE`]): a client sending to ever new names gets one line per code and interval on
/// each core, naming the topic of that line. The topic is resolved again here, on the error
/// path, so the append path carries no extra reference.
fn refused(context: &ConnectionContext, topic: &str, partition: i32, answer: &PartitionAnswer) {
    let core = &context.core;
    let telemetry = &core.telemetry;
    let code = answer.error;
    core.metrics().record_refused(code);
    let snapshot = core.runtime().catalog.snapshot();
    let table =
        crate::catalog::resolve::resolve_topic(&snapshot, topic, &core.config().kafka_default_database);
    // The line's `table`, and the repeat-limit key: the table's path, or for a topic naming no
    // table the name as sent, cut to the longest valid name, and the one key of such topics.
    let (label, names_table) = match table {
        Ok(table) => {
            telemetry.with_table(&table, |series| series.record_refused(telemetry.core(), code));
            (table.path(), true)
        }
        Err(TopicError::MappingDisabled(path) | TopicError::Ineligible { table: path, .. }) => (path, true),
        Err(_) => (shown_topic(topic), false),
    };
    let key = if names_table { label.as_str() } else { NO_TABLE };
    let line = |Repeats { suppressed, .. }: Repeats| {
        let principal = context.principal();
        let message = answer.error_message.as_deref().unwrap_or("");
        match &answer.cause {
            Some(AppendError::Convert(e)) => tracing::warn!(
                table = %label,
                partition,
                client = %context.peer,
                principal = %principal,
                code = %code.name(),
                record = e.first.record_index,
                path = %json_path(&e.first.path),
                reason = %e.first.reason,
                more_records = e.more.len(),
                suppressed,
                "produce refused"
            ),
            _ => tracing::warn!(
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
    };
    let tail = move |key: &str,
                     Repeats {
                         suppressed, interval, ..
                     }: Repeats| {
        if key == NO_TABLE {
            tracing::warn!(
                code = %code.name(),
                suppressed,
                "produce refused: {suppressed} more partitions of {NO_TABLE} with {} in the {interval:?} after the last such line",
                code.name()
            )
        } else {
            tracing::warn!(
                table = %key,
                code = %code.name(),
                suppressed,
                "produce refused: {suppressed} more partitions of {key} with {} in the {interval:?} after the last such line",
                code.name()
            )
        }
    };
    telemetry.log_limited(key, code.name(), 0, line, tail);
}

/// A converter path (`a.b[2]`, or `[0]` for an array value) as JSONPath from `$`.
fn json_path(path: &str) -> String {
    if path.is_empty() || path.starts_with('[') {
        format!("${path}")
    } else {
        format!("$.{path}")
    }
}

/// A topic name as logged: at most [`MAX_TOPIC_NAME_LEN`] bytes (cut on a character
/// boundary, `...` appended), so a client's 100 MB "name" is neither stored nor written whole,
/// and escaped.
fn shown_topic(topic: &str) -> String {
    let cut = char_floor(topic, MAX_TOPIC_NAME_LEN);
    // Escaped (`\n`, `\u{1b}`, ...): an invalid name cannot start a log line of its own.
    let shown = topic[..cut].escape_debug().to_string();
    if cut < topic.len() {
        format!("{shown}...")
    } else {
        shown
    }
}

/// The wire form of a partition's answer; its messages while `budget` lasts.
fn to_wire(index: i32, answer: PartitionAnswer, budget: &mut MessageBudget) -> ProducePartitionResponse {
    ProducePartitionResponse {
        index,
        error_code: answer.error,
        base_offset: answer.base_offset,
        log_append_time_ms: -1,
        log_start_offset: answer.log_start_offset,
        record_errors: answer
            .record_errors
            .into_iter()
            .map(|(batch_index, message)| BatchIndexAndErrorMessage {
                batch_index,
                batch_index_error_message: budget.admit(Some(message)),
            })
            .collect(),
        error_message: budget.admit(answer.error_message),
        current_leader: None,
    }
}

#[cfg(test)]
mod tests {
    use kafluss_protocol::{ProducePartitionData, ProduceTopicData};

    use super::*;

    /// Refused topic names are logged escaped and cut: a newline cannot start a line of its
    /// own, and a huge name is kept as its first 249 bytes (on a character boundary).
    #[test]
    fn refused_topic_names_are_shown_escaped_and_cut() {
        assert_eq!(shown_topic("orders"), "orders");
        assert_eq!(shown_topic("a\nINFO forged"), "a\\nINFO forged");
        let long = "é".repeat(200);
        let shown = shown_topic(&long);
        assert!(shown.ends_with("..."), "{shown}");
        assert_eq!(shown.len(), 248 + 3, "124 two-byte characters, then the ellipsis");
    }

    fn request(acks: i16, partitions: &[(&str, i32)]) -> ProduceRequest {
        ProduceRequest {
            transactional_id: None,
            acks,
            timeout_ms: 1000,
            topics: partitions
                .iter()
                .map(|(name, index)| ProduceTopicData {
                    name: name.to_string(),
                    topic_id: Uuid::ZERO,
                    partitions: vec![ProducePartitionData {
                        index: *index,
                        records: None,
                    }],
                })
                .collect(),
            unknown_tagged_fields: Vec::new(),
        }
    }

    #[test]
    fn whole_request_checks() {
        let code = |rejection: Option<RequestRejection>| rejection.map(|r| r.code());
        assert_eq!(whole_request_error(&request(1, &[("a", 0), ("a", 1)]), 9), None);
        assert_eq!(
            code(whole_request_error(&request(2, &[("a", 0)]), 9)),
            Some(ErrorCode::InvalidRequiredAcks)
        );
        assert_eq!(
            code(whole_request_error(&request(-1, &[("a", 0), ("a", 0)]), 9)),
            Some(ErrorCode::InvalidRequest)
        );
        let mut transactional = request(1, &[("a", 0)]);
        transactional.transactional_id = Some("t".into());
        assert_eq!(
            code(whole_request_error(&transactional, 9)),
            Some(ErrorCode::InvalidRequest)
        );
        for old in 0..3 {
            assert_eq!(
                code(whole_request_error(&request(1, &[("a", 0)]), old)),
                Some(ErrorCode::UnsupportedForMessageFormat),
                "Produce v{old}"
            );
        }
    }

    #[test]
    fn a_partition_named_twice_is_found_in_short_and_long_requests() {
        let names = ["a", "b", "c"];
        for count in [
            1,
            2,
            3,
            FEW_PARTITIONS - 1,
            FEW_PARTITIONS,
            FEW_PARTITIONS + 1,
            200,
        ] {
            // `count` distinct (topic, partition) pairs: never named twice.
            let pairs: Vec<(&str, i32)> = (0..count).map(|i| (names[i % 3], (i / 3) as i32)).collect();
            assert!(!named_twice(&request(1, &pairs)), "{count} distinct");
            // The same partition number under another topic is another partition.
            for (first, second) in [(0, count - 1), (count / 2, count - 1), (0, count / 2)] {
                if first == second {
                    continue;
                }
                let mut twice = pairs.clone();
                twice[second] = twice[first];
                assert!(
                    named_twice(&request(1, &twice)),
                    "{count}: #{first} again at #{second}"
                );
                let mut other_topic = pairs.clone();
                other_topic[second] = ("d", twice[first].1);
                assert!(!named_twice(&request(1, &other_topic)), "{count}: topic d");
            }
        }
    }

    #[test]
    fn answers_carry_the_owner_cores_outcome() {
        let stored = PartitionAnswer::from_outcome(Ok(crate::append::Appended {
            base_offset: 7,
            log_start_offset: 2,
            rows: 3,
        }));
        assert_eq!(
            (stored.error, stored.base_offset, stored.log_start_offset),
            (ErrorCode::None, 7, 2)
        );
        let dropped = PartitionAnswer::from_outcome(Err(AppendError::TableDropped("fluss.t".into())));
        assert_eq!(dropped.error, ErrorCode::UnknownTopicOrPartition);
        assert_eq!(
            dropped.error_message.as_deref(),
            Some("table fluss.t was dropped")
        );
        assert_eq!(dropped.base_offset, -1);
    }
}
