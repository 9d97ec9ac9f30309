//! Produce, owner side: what the core owning a bucket does with an [`AppendJob`] — parse the
//! batches ([`decode_batches`]: CRC, magic, idempotence and control bits, decompression under
//! one budget, record size), convert with the table's cached plan ([`PlanCache`]), append to the
//! bucket log, and answer after the write (acks=0/1) or after group commit (acks=-1, or every
//! append with `log.flush.policy: always`). A failing partition appends nothing.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use kafluss_convert::{ConversionPlan, KafkaRecord, TimestampType};
use kafluss_protocol::{ErrorCode, RecordBatches, TimestampType as WireTimestampType};

use super::produce::{AppendJob, PartitionOutcome};
use crate::catalog::model::TableInfo;
use crate::errors::{self, BatchRejection};
use crate::log::{BucketLog, FlushPolicy, LogConfig};
use crate::shard::Shard;

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
    let metrics = shard.shared.metrics.clone();
    let core = shard.id;
    let log = Rc::new(
        BucketLog::open(&dir, log_config, stats)
            .await?
            .with_sync_observer(Box::new(move |took| metrics.core(core).record_fsync(took))),
    );
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
                log_storage_error(
                    shard,
                    &job.table,
                    format_args!("cannot open bucket {}: {e}", job.bucket),
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
            outcome.convert_error = Some(Box::new(e));
            return OwnerResult::Done(outcome);
        }
    };
    let rows = arrow_batch.num_rows() as u64;
    let appended = match bucket.log.append(&arrow_batch).await {
        Ok(appended) => appended,
        Err(e) => {
            log_storage_error(shard, &job.table, format_args!("append failed: {e}"));
            return OwnerResult::Done(PartitionOutcome::error(errors::log_error_code(&e), e.to_string()));
        }
    };
    // Counted here, on the owner, once the rows are in the log: refused batches count nothing.
    shard.metrics().record_appended(rows);
    shard.with_table_metrics(&job.table, |series| {
        series.record_appended(shard.id, rows, appended.bytes)
    });
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
    let (shard, table) = (shard.clone(), job.table);
    OwnerResult::AfterSync(Box::pin(async move {
        match log.sync_to(appended.next_offset).await {
            Ok(()) => outcome,
            Err(e) => {
                log_storage_error(&shard, &table, format_args!("fsync failed: {e}"));
                PartitionOutcome::error(errors::log_error_code(&e), e.to_string())
            }
        }
    }))
}

/// Logs a storage failure of `table` at ERROR, at most once per `server.log-repeat-interval`
/// per table on this core (a failing disk fails every append).
fn log_storage_error(shard: &Shard, table: &TableInfo, what: std::fmt::Arguments<'_>) {
    let path = table.path();
    if let Some(suppressed) = shard.log_repeat(&path, "storage") {
        tracing::error!(table = %path, suppressed, "{what}");
    }
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
    use crate::handlers::produce::whole_request_error;
    use kafluss_protocol::ProduceRequest;

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
        assert_eq!(whole_request_error(&request(1, &[("a", 0), ("a", 1)]), 9), None);
        assert_eq!(
            whole_request_error(&request(2, &[("a", 0)]), 9).map(|e| e.0),
            Some(ErrorCode::InvalidRequiredAcks)
        );
        assert_eq!(
            whole_request_error(&request(-1, &[("a", 0), ("a", 0)]), 9).map(|e| e.0),
            Some(ErrorCode::InvalidRequest)
        );
        let mut transactional = request(1, &[("a", 0)]);
        transactional.transactional_id = Some("t".into());
        assert_eq!(
            whole_request_error(&transactional, 9).map(|e| e.0),
            Some(ErrorCode::InvalidRequest)
        );
        for old in 0..3 {
            assert_eq!(
                whole_request_error(&request(1, &[("a", 0)]), old).map(|e| e.0),
                Some(ErrorCode::UnsupportedForMessageFormat),
                "Produce v{old}"
            );
        }
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
