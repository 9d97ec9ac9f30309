//! Produce (api key 0, v3–11), as named steps:
//!
//! On the connection's core ([`dispatch`]): decode → [`whole_request_error`] (transactional
//! id, acks, duplicate partitions) → per partition [`prepare_partition`] (topic → table,
//! partition range, WRITE permission) → [`Shard::submit`] to the bucket's owner core, in
//! request order → a task joins the outcomes and encodes the response in request order
//! (none for acks=0).
//!
//! On the owner core ([`append_on_owner`]): [`decode_batches`] (CRC, magic, idempotence and
//! control bits, decompression under the limit, record size) → convert with the table's cached
//! plan → append → answer after the write (acks=1/0) or after group commit (acks=-1, or every
//! append with `log.flush.policy: always`). A failing partition appends nothing.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use kafluss_convert::ConversionPlan;
use kafluss_convert::{KafkaRecord, TimestampType};
use kafluss_protocol::encode_response_frame;
use kafluss_protocol::{
    BatchIndexAndErrorMessage, ProducePartitionResponse, ProduceRequest, ProduceResponse,
    ProduceTopicResponse,
};
use kafluss_protocol::{ErrorCode, RequestHeader};
use kafluss_protocol::{RecordBatches, TimestampType as WireTimestampType};

use crate::catalog::model::TableInfo;
use crate::connection::ConnectionContext;
use crate::errors::{self, BatchRejection};
use crate::log::{BucketLog, FlushPolicy, LogConfig};
use crate::shard::Shard;

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
    /// Rows appended (metrics).
    pub rows: u64,
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
        }
    }

    pub fn storage_error(message: impl Into<String>) -> Self {
        Self::error(ErrorCode::KafkaStorageError, message)
    }

    fn appended(base_offset: u64, log_start_offset: u64, rows: u64) -> Self {
        Self {
            error: ErrorCode::None,
            error_message: None,
            base_offset: base_offset as i64,
            log_start_offset: log_start_offset as i64,
            record_errors: Vec::new(),
            rows,
        }
    }
}

/// A request-level rejection: every partition of the request gets this code.
pub fn whole_request_error(request: &ProduceRequest) -> Option<(ErrorCode, &'static str)> {
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
    let table = crate::catalog::resolve::resolve_topic(snapshot, topic, default_db)
        .map_err(|e| PartitionOutcome::error(errors::topic_error_code(&e), e.to_string()))?;
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
    let principal = context
        .sasl
        .borrow()
        .principal()
        .cloned()
        .unwrap_or_else(kafluss_auth::Principal::anonymous);
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
    if let Some((code, message)) = whole_request_error(&request) {
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
    let shard = context.shard.clone();
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
                    shard.metrics().record_partition_error();
                } else {
                    shard.metrics().record_appended(outcome.rows);
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

// ---------------------------------------------------------------------------------------------
// Owner side.

/// A bucket's state on its owner core: the open log.
pub struct BucketState {
    log: Rc<BucketLog>,
}

/// What the bucket actor does with an owner-side result.
pub enum OwnerResult {
    Done(PartitionOutcome),
    /// Answer once this future (group commit) resolves.
    AfterSync(Pin<Box<dyn Future<Output = PartitionOutcome>>>),
}

/// Opens (recovering) the log of `table`'s `bucket` on this core.
pub async fn open_bucket(
    shard: &Shard,
    table: &TableInfo,
    bucket: u32,
) -> Result<BucketState, crate::log::LogError> {
    let config = shard.config();
    let table_dir = config.data_dir.join(table.relative_dir());
    let dir = crate::log::bucket_dir(&table_dir, bucket);
    let stats = shard.runtime().log_stats.register(table.id, bucket);
    let retention = table
        .options
        .get("table.log.ttl")
        .and_then(|v| crate::log::parse_ttl(v))
        .unwrap_or(config.log_ttl);
    let log_config = LogConfig {
        segment_size: config.segment_size,
        flush_policy: config.flush_policy,
        retention: Some(retention),
    };
    let log = Rc::new(BucketLog::open(&dir, log_config, stats).await?);
    glommio::spawn_local(crate::log::run_retention(
        Rc::downgrade(&log),
        config.retention_check_interval,
    ))
    .detach();
    Ok(BucketState { log })
}

/// Parses, converts and appends one partition batch on the bucket's owner core.
pub async fn append_on_owner(
    shard: &Rc<Shard>,
    state: &mut Option<BucketState>,
    job: AppendJob,
) -> OwnerResult {
    if state.is_none() {
        match open_bucket(shard, &job.table, job.bucket).await {
            Ok(opened) => *state = Some(opened),
            Err(e) => {
                tracing::error!(
                    "cannot open bucket {} of {}.{}: {e}",
                    job.bucket,
                    job.table.database,
                    job.table.name
                );
                return OwnerResult::Done(PartitionOutcome::error(errors::log_error_code(&e), e.to_string()));
            }
        }
    }
    let Some(bucket) = state.as_ref() else {
        return OwnerResult::Done(PartitionOutcome::storage_error("bucket not open"));
    };
    let plan = match shard.plan_for(&job.table) {
        Ok(plan) => plan,
        Err(message) => {
            return OwnerResult::Done(PartitionOutcome::error(ErrorCode::InvalidTopicException, message))
        }
    };
    let config = shard.config();
    let append_time_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let batches = match decode_batches(
        job.records.as_ref(),
        config.max_request_size,
        config.max_record_size,
    ) {
        Ok(batches) => batches,
        Err(rejection) => {
            tracing::debug!(
                table = %job.table.path(),
                bucket = job.bucket,
                "partition batch refused: {rejection}; first bytes {:02x?}",
                job.records.as_ref().map(|r| &r[..r.len().min(24)])
            );
            return OwnerResult::Done(PartitionOutcome::error(
                errors::batch_error_code(&rejection),
                rejection.to_string(),
            ));
        }
    };
    // Decompression and conversion run without awaiting; let other tasks of this core (reads
    // of other connections, group commits) run between the two CPU-heavy steps.
    glommio::yield_if_needed().await;
    let converted = {
        let mut headers_storage: Vec<Vec<kafluss_convert::Header<'_>>> = Vec::new();
        for batch in &batches {
            for record in &batch.records {
                headers_storage.push(
                    record
                        .headers
                        .iter()
                        .map(|h| (&h.key[..], h.value.as_deref()))
                        .collect(),
                );
            }
        }
        let mut headers = headers_storage.iter();
        let mut records = Vec::with_capacity(headers_storage.len());
        for batch in &batches {
            for record in &batch.records {
                let timestamp = match batch.timestamp_type {
                    TimestampType::LogAppendTime => append_time_ms,
                    TimestampType::CreateTime => {
                        if batch.base_timestamp == -1 && record.timestamp_delta == 0 {
                            -1
                        } else {
                            batch.base_timestamp.saturating_add(record.timestamp_delta)
                        }
                    }
                };
                records.push(KafkaRecord {
                    key: record.key.as_deref(),
                    value: record.value.as_deref(),
                    headers: headers.next().map_or(&[][..], |h| &h[..]),
                    timestamp,
                    timestamp_type: batch.timestamp_type,
                    partition: job.partition,
                });
            }
        }
        shard.convert(&plan, records)
    };
    let arrow_batch = match converted {
        Ok(batch) => batch,
        Err(e) => {
            let mut outcome = PartitionOutcome::error(errors::convert_error_code(&e), e.to_string());
            outcome.record_errors = vec![(e.record_index as i32, errors::bounded_message(e.to_string()))];
            return OwnerResult::Done(outcome);
        }
    };
    let rows = arrow_batch.num_rows() as u64;
    let appended = match bucket.log.append(&arrow_batch).await {
        Ok(appended) => appended,
        Err(e) => {
            tracing::error!("append failed in {}: {e}", bucket.log.dir().display());
            return OwnerResult::Done(PartitionOutcome::error(errors::log_error_code(&e), e.to_string()));
        }
    };
    let outcome = PartitionOutcome::appended(appended.base_offset, bucket.log.log_start_offset(), rows);
    let must_sync = match config.flush_policy {
        FlushPolicy::Always => true,
        FlushPolicy::Ack => job.acks == -1,
        FlushPolicy::Never => false,
    };
    if !must_sync {
        return OwnerResult::Done(outcome);
    }
    let log = bucket.log.clone();
    OwnerResult::AfterSync(Box::pin(async move {
        match log.sync_to(appended.next_offset).await {
            Ok(()) => outcome,
            Err(e) => {
                tracing::error!("fsync failed in {}: {e}", log.dir().display());
                PartitionOutcome::error(errors::log_error_code(&e), e.to_string())
            }
        }
    }))
}

/// Flushes and closes a bucket log (shutdown, table drop).
pub async fn close_bucket(state: BucketState) {
    if let Err(e) = state.log.close().await {
        tracing::error!("closing {} failed: {e}", state.log.dir().display());
    }
}

/// One decoded Kafka batch: its timestamp facts and records.
#[derive(Debug)]
pub struct DecodedBatch {
    pub timestamp_type: TimestampType,
    pub base_timestamp: i64,
    pub records: Vec<kafluss_protocol::Record>,
}

/// Parses every batch of a partition's `records`, all-or-nothing.
pub fn decode_batches(
    records: Option<&Bytes>,
    max_decompressed: usize,
    max_record_size: usize,
) -> Result<Vec<DecodedBatch>, BatchRejection> {
    let bytes = match records {
        Some(bytes) if !bytes.is_empty() => bytes.clone(),
        _ => return Err(BatchRejection::Empty),
    };
    let mut decoded = Vec::new();
    let mut total_records = 0usize;
    let mut decompress_budget = max_decompressed;
    for batch in RecordBatches::new(bytes) {
        let batch = batch.map_err(BatchRejection::Wire)?;
        if batch.has_producer_id() || batch.attributes.is_transactional() {
            return Err(BatchRejection::Idempotent);
        }
        if batch.attributes.is_control() {
            return Err(BatchRejection::Control);
        }
        let timestamp_type = match batch.attributes.timestamp_type() {
            WireTimestampType::LogAppendTime => TimestampType::LogAppendTime,
            WireTimestampType::CreateTime => TimestampType::CreateTime,
        };
        let mut records = Vec::with_capacity(batch.record_count.clamp(0, 4096) as usize);
        // One budget for all batches of the partition, so several batches cannot each
        // decompress up to the limit.
        let inflated = batch.records(decompress_budget).map_err(BatchRejection::Wire)?;
        decompress_budget = decompress_budget.saturating_sub(inflated.data().len());
        for record in inflated {
            let record = record.map_err(BatchRejection::Wire)?;
            let size = record.key.as_ref().map_or(0, |k| k.len())
                + record.value.as_ref().map_or(0, |v| v.len())
                + record
                    .headers
                    .iter()
                    .map(|h| h.key.len() + h.value.as_ref().map_or(0, |v| v.len()))
                    .sum::<usize>();
            if size > max_record_size {
                return Err(BatchRejection::RecordTooLarge {
                    size,
                    limit: max_record_size,
                });
            }
            records.push(record);
        }
        total_records += records.len();
        decoded.push(DecodedBatch {
            timestamp_type,
            base_timestamp: batch.base_timestamp,
            records,
        });
    }
    if total_records == 0 {
        return Err(BatchRejection::Empty);
    }
    Ok(decoded)
}

/// Per-core conversion-plan cache, keyed by table id and valid for one table revision (an
/// ALTER publishes a new revision; the plan recompiles only if schema or mapping changed).
#[derive(Default)]
pub struct PlanCache {
    plans: HashMap<u64, (Arc<TableInfo>, Arc<ConversionPlan>)>,
}

impl PlanCache {
    pub fn get(&mut self, table: &Arc<TableInfo>) -> Result<Arc<ConversionPlan>, String> {
        if let Some((cached_table, plan)) = self.plans.get_mut(&table.id) {
            if cached_table.revision == table.revision {
                return Ok(plan.clone());
            }
            if cached_table.schema == table.schema && cached_table.kafka == table.kafka {
                *cached_table = table.clone();
                return Ok(plan.clone());
            }
        }
        let mapping = table
            .kafka
            .as_ref()
            .ok_or_else(|| format!("Kafka mapping of {}.{} is disabled", table.database, table.name))?;
        let plan = Arc::new(ConversionPlan::compile(&table.schema, mapping).map_err(|e| {
            format!(
                "table {}.{} cannot be written from Kafka: {e}",
                table.database, table.name
            )
        })?);
        self.plans.insert(table.id, (table.clone(), plan.clone()));
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use kafluss_protocol::{Compression, ProducePartitionData, ProduceTopicData, RecordBatchBuilder};

    use super::*;

    fn batch(values: &[&str], compression: Compression) -> Bytes {
        let mut builder = RecordBatchBuilder::new(compression);
        for value in values {
            builder.append(5, Some(b"k"), Some(value.as_bytes()), &[(b"h", Some(b"v"))]);
        }
        builder.build().unwrap()
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
        assert_eq!(whole_request_error(&request(1, &[("a", 0), ("a", 1)])), None);
        assert_eq!(
            whole_request_error(&request(2, &[("a", 0)])).map(|e| e.0),
            Some(ErrorCode::InvalidRequiredAcks)
        );
        assert_eq!(
            whole_request_error(&request(-1, &[("a", 0), ("a", 0)])).map(|e| e.0),
            Some(ErrorCode::InvalidRequest)
        );
        let mut transactional = request(1, &[("a", 0)]);
        transactional.transactional_id = Some("t".into());
        assert_eq!(
            whole_request_error(&transactional).map(|e| e.0),
            Some(ErrorCode::InvalidRequest)
        );
    }

    #[test]
    fn decodes_several_batches_and_refuses_what_behaviour_md_refuses() {
        let mut two = batch(&["a", "b"], Compression::None).to_vec();
        two.extend_from_slice(&batch(&["c"], Compression::Zstd));
        let decoded = decode_batches(Some(&Bytes::from(two)), 1 << 20, 1 << 10).unwrap();
        let values: Vec<&[u8]> = decoded
            .iter()
            .flat_map(|b| b.records.iter().map(|r| r.value.as_deref().unwrap()))
            .collect();
        assert_eq!(values, vec![&b"a"[..], b"b", b"c"]);
        assert_eq!(decoded[0].base_timestamp, 5);

        assert_eq!(
            decode_batches(None, 1 << 20, 1 << 10).unwrap_err(),
            BatchRejection::Empty
        );
        assert_eq!(
            decode_batches(Some(&Bytes::new()), 1 << 20, 1 << 10).unwrap_err(),
            BatchRejection::Empty
        );
        let mut idempotent = RecordBatchBuilder::new(Compression::None).producer(1, 0, 0);
        idempotent.append(0, None, Some(b"x"), &[]);
        assert_eq!(
            decode_batches(Some(&idempotent.build().unwrap()), 1 << 20, 1 << 10).unwrap_err(),
            BatchRejection::Idempotent
        );
        let mut control = RecordBatchBuilder::new(Compression::None).flags(false, true);
        control.append(0, None, Some(b"x"), &[]);
        assert_eq!(
            decode_batches(Some(&control.build().unwrap()), 1 << 20, 1 << 10).unwrap_err(),
            BatchRejection::Control
        );
        let big = "x".repeat(2000);
        assert!(matches!(
            decode_batches(Some(&batch(&[&big], Compression::None)), 1 << 20, 1 << 10),
            Err(BatchRejection::RecordTooLarge { limit: 1024, .. })
        ));
    }

    #[test]
    fn the_decompression_budget_covers_all_batches_of_a_partition() {
        let value = "y".repeat(600);
        let one = batch(&[&value], Compression::Gzip);
        let inflated_one = decode_batches(Some(&one), 1 << 20, 1 << 20).unwrap();
        assert_eq!(inflated_one[0].records.len(), 1);
        let mut two = one.to_vec();
        two.extend_from_slice(&one);
        // Each batch inflates to ~620 bytes: one fits in 1000, two do not.
        assert!(decode_batches(Some(&one), 1000, 1 << 20).is_ok());
        let err = decode_batches(Some(&Bytes::from(two)), 1000, 1 << 20).unwrap_err();
        assert_eq!(errors::batch_error_code(&err), ErrorCode::MessageTooLarge);
    }
}
