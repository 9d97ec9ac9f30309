//! One job into rows of a bucket log, on the bucket's owner core: parse the batches
//! ([`decode_batches`]: CRC, magic, transactional and control bits, decompression under one
//! budget, record size), check idempotent producers' epochs and sequences against the
//! bucket's [`ProducerStates`] (a retried batch is answered with its stored offset and appends
//! nothing), convert with the table's cached plan, append to the bucket log (with the
//! producers' tag, from which the state is rebuilt when the bucket is opened), and answer after
//! the write (acks=0/1) or after group commit (acks=-1, or every append with
//! `log.flush.policy: always`). A failing partition appends nothing and changes no state.
//!
//! [`Appender`] holds exactly what this takes: the configuration, the log registry, the plan
//! cache and JSON scratch space, and the core's telemetry. It needs a glommio executor (the
//! log does I/O through it) but no mesh, no socket and no other core.

use std::cell::RefCell;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use kafluss_convert::{BatchBuilder, ConversionPlan, JsonScratch, KafkaRecord, TimestampType};
use kafluss_protocol::{
    CompressionError, RecordBatchError, RecordBatches, TimestampType as WireTimestampType,
};

use super::plan_cache::{PlanCache, PlanError};
use super::{AppendError, AppendJob, AppendOutcome, Appended, BatchRejection};
use crate::catalog::model::TableInfo;
use crate::config::ServerConfig;
use crate::idhash::IdMap;
use crate::log::checksum::custom_value;
use crate::log::segment::VisitedBatch;
use crate::log::{
    AppendItem, BucketLog, FlushPolicy, GlommioStore, LogConfig, LogError, LogRegistry, RollTime,
};
use crate::producer::state::{
    decode_tag, encode_tag, BatchMeta, ProducerBatch, ProducerLimits, ProducerStates, StoredTag, Verdict,
    PRODUCERS_KEY,
};
use crate::sched::{held, Slice, CHECK_EVERY_RECORDS};
use crate::telemetry::{CoreTelemetry, Repeats};

/// A bucket's state on its owner core: the open log and its idempotent producers' state.
pub struct BucketState {
    log: Rc<BucketLog>,
    producers: ProducerStates,
    /// Bytes appended since the last write-behind fsync was started.
    since_write_behind: std::cell::Cell<u64>,
    /// Bytes appended to the bucket since this core opened it.
    appended: std::cell::Cell<u64>,
    /// Write-behind fsyncs started and not yet seen done, oldest first: the rows each makes
    /// durable, and `appended` when it was started.
    behind: RefCell<std::collections::VecDeque<(u64, u64)>>,
    /// `appended` when the last write-behind fsync seen done was started.
    synced: std::cell::Cell<u64>,
}

impl BucketState {
    /// The idempotent producers' state (tests and diagnostics).
    pub fn producers(&self) -> &ProducerStates {
        &self.producers
    }

    /// Bytes appended and not known to be fsync'd: since the start of the last write-behind
    /// fsync seen done (after dropping those that are done now).
    pub fn unsynced_bytes(&self) -> u64 {
        let durable = self.log.durable_offset();
        let mut behind = self.behind.borrow_mut();
        while let Some(&(rows, at)) = behind.front() {
            if rows > durable {
                break;
            }
            self.synced.set(at);
            behind.pop_front();
        }
        self.appended.get() - self.synced.get()
    }

    /// The rows an acks=1 answer waits for under `log.unsynced.size` = `most` ([`pace`]).
    fn pace(&self, most: u64) -> Option<u64> {
        let unsynced = self.unsynced_bytes();
        pace(&self.behind.borrow(), self.appended.get(), unsynced, most)
    }
}

/// With more than `most` (not 0) bytes `unsynced` out of `appended`, the rows to wait for: those
/// of the oldest write-behind fsync in flight (`behind`: the rows each makes durable and
/// `appended` when it started, oldest first) after which at most `most` bytes are unsynced, else
/// those of the newest; none when nothing is in flight.
fn pace(
    behind: &std::collections::VecDeque<(u64, u64)>,
    appended: u64,
    unsynced: u64,
    most: u64,
) -> Option<u64> {
    if most == 0 || unsynced <= most {
        return None;
    }
    behind
        .iter()
        .find(|(_, at)| appended - at <= most)
        .or(behind.back())
        .map(|(rows, _)| *rows)
}

/// What the slow-write line adds about a roll among the appends' writes: nothing without one.
fn roll_note(rolled: RollTime) -> String {
    if rolled.total.is_zero() {
        return String::new();
    }
    format!(
        "; a segment roll took {:?} of it, {:?} of that waiting for the previous roll's fsync",
        rolled.total, rolled.waiting_for_previous
    )
}

/// The repeat-limit reason of acks=1 answers that waited for the disk (`log.unsynced.size`).
const DISK_PACED: &str = "disk-paced";

/// Logs an acks=1 answer of `bucket` of table `path` that waited `took` (over `bound`) for the
/// disk. Many answers wait for the same fsync: one line per table and
/// `server.log-repeat-interval` on this core, with the count and longest wait of those left out,
/// and one interval after such a line, a line for the answers that interval left out, if any.
fn log_paced_answer(telemetry: &Rc<CoreTelemetry>, path: &str, bucket: u32, took: Duration, bound: Duration) {
    let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
    telemetry.log_limited(
        path,
        DISK_PACED,
        micros,
        |Repeats { suppressed, largest, .. }| {
            tracing::warn!(
                target: "kafluss::stall",
                suppressed,
                longest_suppressed = ?Duration::from_micros(largest),
                "an acks=1 answer of bucket {bucket} of {path} waited {took:?} (server.stall-threshold {bound:?}) for the disk: more than log.unsynced.size unsynced",
            )
        },
        move |path,
              Repeats {
                  suppressed,
                  largest,
                  interval,
              }| {
            tracing::warn!(
                target: "kafluss::stall",
                suppressed,
                longest_suppressed = ?Duration::from_micros(largest),
                "{suppressed} more acks=1 answers of {path} waited over {bound:?} for the disk in the {interval:?} after the last such line",
            )
        },
    );
}

/// Wall-clock milliseconds since the Unix epoch.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Write-behind: after this many bytes appended to a bucket, a group-commit fsync of them is
/// started in the background (nobody waits for it). The page cache then never holds more than
/// about this much unsynced data of a bucket, so the fsync of a segment roll, which runs while
/// the bucket's appends wait, has little left to write (before: up to a whole 256 MiB segment,
/// 0.25–1.4 s).
pub const WRITE_BEHIND_BYTES: u64 = 16 << 20;

/// A group's converted batches are written together until they hold this many bytes of Arrow
/// data; then they are written and the group goes on with a new write.
pub const GROUP_WRITE_BYTES: usize = 4 << 20;

/// A job of a group that passed its checks and waits for the group's write.
struct Part {
    job: AppendJob,
    /// Per Kafka batch of the job: its producer fields and record count.
    batch_rows: Vec<(Option<ProducerBatch>, u64)>,
    idempotent: Vec<ProducerBatch>,
    append_time_ms: i64,
    /// What its decoded records hold of `kafka.max-append-memory`, given back once its rows
    /// are stored (or refused).
    _held: glommio::sync::StaticPermit,
}

impl Part {
    /// Its records (one row each).
    fn rows(&self) -> u64 {
        self.batch_rows.iter().map(|(_, rows)| rows).sum()
    }
}

/// A job waiting for the group's write, with its rows converted or still to be converted.
struct Pending {
    /// The job's position in the group.
    index: usize,
    part: Part,
    conversion: Conversion,
}

enum Conversion {
    Converted(arrow_array::RecordBatch),
    /// A job without idempotent batches and with at most [`MERGE_COLUMN_BYTES`] of decoded
    /// records: converted at the write, into one batch with the deferred jobs next to it
    /// ([`Appender::convert_pending`]).
    Deferred {
        plan: Arc<ConversionPlan>,
        batches: Vec<DecodedBatch>,
        bytes: usize,
    },
}

/// Consecutive jobs of a group whose rows are one converted batch: one job, or a run of
/// deferred ones converted together.
struct Unit {
    parts: Vec<(usize, Part)>,
    arrow_batch: arrow_array::RecordBatch,
}

enum Prepared {
    Done(OwnerResult),
    Ready(Pending),
}

/// What the bucket actor does with a job's result.
pub enum OwnerResult {
    Done(AppendOutcome),
    /// Answer once this future (group commit) resolves.
    AfterSync(Pin<Box<dyn Future<Output = AppendOutcome>>>),
}

/// What the append pipeline of one core uses.
pub struct Appender {
    config: ServerConfig,
    /// The live catalog, for what an open bucket must follow between appends (its table's
    /// `table.log.ttl`); None in tests that run the append path alone.
    catalog: Option<Arc<crate::catalog::Catalog>>,
    log_stats: Arc<LogRegistry>,
    telemetry: Rc<CoreTelemetry>,
    plans: RefCell<PlanCache>,
    json_scratch: RefCell<JsonScratch>,
    /// Buckets of this core whose open failed on an fsync: never opened again in this process
    /// ([`LogError::SyncFailedEarlier`]).
    sync_failed: RefCell<IdMap<(u64, u32), String>>,
    /// Bytes of this core's `kafka.max-append-memory`: what the partitions being appended hold
    /// from their decoding until their rows are stored ([`held_by_decoded`]).
    append_memory: crate::sched::FairSemaphore,
    /// Bucket logs this core has opened (recovered), for tests and diagnostics.
    opened: std::cell::Cell<u64>,
}

impl Appender {
    pub fn new(config: ServerConfig, log_stats: Arc<LogRegistry>, telemetry: Rc<CoreTelemetry>) -> Self {
        Self {
            append_memory: crate::sched::FairSemaphore::new(config.max_append_memory as u64),
            config,
            catalog: None,
            log_stats,
            telemetry,
            plans: RefCell::new(PlanCache::default()),
            json_scratch: RefCell::new(JsonScratch::default()),
            sync_failed: RefCell::new(IdMap::default()),
            opened: std::cell::Cell::new(0),
        }
    }

    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    pub fn telemetry(&self) -> &Rc<CoreTelemetry> {
        &self.telemetry
    }

    /// Open buckets follow `catalog`'s changes of their table between appends (the TTL).
    pub fn with_catalog(mut self, catalog: Arc<crate::catalog::Catalog>) -> Self {
        self.catalog = Some(catalog);
        self
    }

    /// The conversion plan of `table`'s current version (cached per core).
    pub fn plan_for(&self, table: &Arc<TableInfo>) -> Result<Arc<ConversionPlan>, PlanError> {
        self.plans.borrow_mut().get(table)
    }

    /// Tables whose conversion plan this core keeps (tests and diagnostics).
    pub fn cached_plans(&self) -> usize {
        self.plans.borrow().len()
    }

    /// Forgets what this core keeps of a dropped table: its conversion plan and whether its
    /// buckets' opens failed on an fsync (ids are never reused: they would stay for ever).
    pub fn forget_table(&self, table_id: u64) {
        self.plans.borrow_mut().forget(table_id);
        self.sync_failed.borrow_mut().retain(|(id, _), _| *id != table_id);
    }

    /// Opens (recovering) the log of `table`'s `bucket`, rebuilding its producers' state from
    /// the tags of the batches recovery keeps.
    pub async fn open_bucket(&self, table: &TableInfo, bucket: u32) -> Result<BucketState, LogError> {
        let config = &self.config;
        let table_dir = config.data_dir.join(table.relative_dir()?);
        let dir = crate::log::bucket_dir(&table_dir, bucket);
        if let Some(earlier) = self.sync_failed.borrow().get(&(table.id, bucket)) {
            return Err(LogError::SyncFailedEarlier {
                dir,
                earlier: earlier.clone(),
            });
        }
        let opened = self.open_bucket_dir(table, bucket, dir).await;
        match &opened {
            Ok(_) => self.opened.set(self.opened.get() + 1),
            Err(e) => self.note_open_failure(table.id, bucket, e),
        }
        opened
    }

    /// How many bucket logs this core has opened (each open recovers the log).
    pub fn opened_logs(&self) -> u64 {
        self.opened.get()
    }

    /// Remembers a failed fsync of `bucket`'s open, which is then not retried
    /// ([`LogError::SyncFailedEarlier`]); other failures are retried by the next job.
    pub(crate) fn note_open_failure(&self, table_id: u64, bucket: u32, error: &LogError) {
        if error.is_failed_sync() {
            self.sync_failed
                .borrow_mut()
                .insert((table_id, bucket), error.to_string());
        }
    }

    async fn open_bucket_dir(
        &self,
        table: &TableInfo,
        bucket: u32,
        dir: std::path::PathBuf,
    ) -> Result<BucketState, LogError> {
        let config = &self.config;
        let stats = self.log_stats.register(table.id, bucket);
        let retention = table_ttl(table, config.log_ttl);
        let log_config = LogConfig {
            segment_size: config.segment_size,
            writeback_size: config.writeback_size,
            preallocate_size: config.preallocate_size,
            prewrite_size: config.prewrite_size,
            flush_policy: config.flush_policy,
            retention: Some(retention),
            compression: table.compression,
        };
        let telemetry = self.telemetry.clone();
        let mut producers = ProducerStates::new(ProducerLimits {
            expiration: config.producer_id_expiration,
            max_producers: config.producer_max_per_bucket,
        });
        let now = now_ms();
        let mut unreadable = 0u64;
        let mut restore = |offset: u64, batch: &VisitedBatch<'_>| {
            let Some(text) = custom_value(batch.message, PRODUCERS_KEY) else {
                return;
            };
            match decode_tag(text) {
                Ok(tag) => producers.restore(offset, &tag, now),
                Err(_) => unreadable += 1,
            }
        };
        let store = GlommioStore::new(config.inline_write_size);
        let log = BucketLog::open_visiting(store, &dir, log_config, stats, &mut restore).await?;
        if unreadable > 0 {
            tracing::warn!(
                dir = %dir.display(),
                unreadable,
                "ignored unreadable producer tags: retries of those batches are not recognised as duplicates"
            );
        }
        let log =
            Rc::new(log.with_sync_observer(Box::new(move |took| telemetry.metrics().record_fsync(took))));
        // The table's TTL as the catalog has it now, not as the job that opened the bucket saw
        // it: an ALTER of `table.log.ttl` applies to open buckets at their next check.
        let (catalog, table_id, default_ttl) = (self.catalog.clone(), table.id, config.log_ttl);
        glommio::spawn_local(crate::log::run_retention(
            Rc::downgrade(&log),
            config.retention_check_interval,
            move || {
                let snapshot = catalog.as_ref()?.snapshot();
                snapshot
                    .table_by_id(table_id)
                    .map(|table| table_ttl(table, default_ttl))
            },
        ))
        .detach();
        Ok(BucketState {
            log,
            producers,
            since_write_behind: std::cell::Cell::new(0),
            appended: std::cell::Cell::new(0),
            behind: RefCell::default(),
            synced: std::cell::Cell::new(0),
        })
    }

    /// Parses, converts and appends one partition batch; opens the bucket first if it is not
    /// open (a failed open is retried by the next job).
    pub async fn append(self: &Rc<Self>, state: &mut Option<BucketState>, job: AppendJob) -> OwnerResult {
        self.append_group(state, vec![job])
            .await
            .pop()
            .unwrap_or(OwnerResult::Done(Err(AppendError::NotOpen)))
    }

    /// Appends a group of jobs of one bucket (those that queued while the previous write was
    /// in flight), one result per job in order. Each job is decoded and checked against the
    /// idempotent producers' state on its own, and converted with the same outcome as if it
    /// came alone (small jobs without idempotent batches together, at the write:
    /// `Appender::convert_pending`); the converted batches are then written with as few
    /// file writes as segment boundaries allow
    /// ([`BucketLog::append_many`]), which is where a burst of small requests saves its
    /// per-write cost. The producers' state learns of a job's batches once they are in the log;
    /// a later job of the group is checked as coming after the earlier ones, and a job retrying
    /// a batch that waits in the group has the group written first, so it is answered as the
    /// duplicate it is.
    pub async fn append_group(
        self: &Rc<Self>,
        state: &mut Option<BucketState>,
        jobs: Vec<AppendJob>,
    ) -> Vec<OwnerResult> {
        let Some(first) = jobs.first() else {
            return Vec::new();
        };
        if state.is_none() {
            match self.open_bucket(&first.table, first.bucket).await {
                Ok(opened) => *state = Some(opened),
                Err(e) => {
                    self.log_storage_error(
                        &first.table,
                        format_args!("cannot open bucket {}: {e}", first.bucket),
                    );
                    let mut results = Vec::with_capacity(jobs.len());
                    results.extend(
                        (1..jobs.len()).map(|_| OwnerResult::Done(Err(AppendError::Open(e.duplicate())))),
                    );
                    results.insert(0, OwnerResult::Done(Err(AppendError::Open(e))));
                    return results;
                }
            }
        }
        let Some(bucket) = state.as_mut() else {
            return jobs
                .iter()
                .map(|_| OwnerResult::Done(Err(AppendError::NotOpen)))
                .collect();
        };
        let mut results: Vec<Option<OwnerResult>> = jobs.iter().map(|_| None).collect();
        let mut ready: Vec<Pending> = Vec::new();
        let mut ready_bytes = 0usize;
        let mut slice = Slice::start();
        for (index, job) in jobs.into_iter().enumerate() {
            match self
                .prepare(index, bucket, job, &mut ready, &mut results, &mut slice)
                .await
            {
                Prepared::Done(result) => results[index] = Some(result),
                Prepared::Ready(prepared) => {
                    ready_bytes += match &prepared.conversion {
                        Conversion::Converted(batch) => batch.get_array_memory_size(),
                        Conversion::Deferred { bytes, .. } => *bytes,
                    };
                    ready.push(prepared);
                    // A group's batches are written with one copy into one buffer: bounded.
                    if ready_bytes >= GROUP_WRITE_BYTES {
                        self.commit(bucket, &mut ready, &mut results, &mut slice).await;
                        ready_bytes = 0;
                    }
                }
            }
        }
        self.commit(bucket, &mut ready, &mut results, &mut slice).await;
        results
            .into_iter()
            .map(|r| r.unwrap_or(OwnerResult::Done(Err(AppendError::NotOpen))))
            .collect()
    }

    /// Decodes, checks and converts (or defers the conversion of: [`Conversion::Deferred`]) job
    /// `index` of a group; `ready` holds the group's jobs that wait for their write (written
    /// first, into `results`, when this job retries one of them).
    async fn prepare(
        self: &Rc<Self>,
        index: usize,
        bucket: &mut BucketState,
        job: AppendJob,
        ready: &mut Vec<Pending>,
        results: &mut [Option<OwnerResult>],
        slice: &mut Slice,
    ) -> Prepared {
        let plan = match self.plan_for(&job.table) {
            Ok(plan) => plan,
            Err(e) => return Prepared::Done(OwnerResult::Done(Err(AppendError::Plan(e)))),
        };
        let config = &self.config;
        let append_time_ms = now_ms();
        let decode = || async {
            let mut batches = decode_on_core_or_blocking(
                job.records.as_ref(),
                config.max_request_size,
                config.max_record_size,
                &job.table,
                config.stall_threshold,
            )
            .await?;
            // Each of a table's two names is a sequence of its own (ProducerKey).
            for producer in batches.iter_mut().filter_map(|b| b.producer.as_mut()) {
                producer.bare_topic = job.bare_topic;
            }
            Ok(batches)
        };
        let mut batches = match decode().await {
            Ok(batches) => batches,
            Err(rejection) => {
                tracing::debug!(
                    table = %job.table.path(),
                    bucket = job.bucket,
                    "partition batch refused: {rejection}; first bytes {:02x?}",
                    job.records.as_ref().map(|r| &r[..r.len().min(24)])
                );
                return Prepared::Done(OwnerResult::Done(Err(AppendError::Batch(rejection))));
            }
        };
        // The decoded records count against the core's kafka.max-append-memory until they
        // are stored. When it is held by others, this job waits; the group's jobs that wait
        // for their write hold some of it too, so they are written first.
        // Twice: once for the records, once for the rows they are converted to, which are
        // about as large and live beside them while converting.
        let wanted = held_by_decoded(&batches, job.records.as_ref())
            .saturating_mul(2)
            .min(config.max_append_memory) as u64;
        let held = match self.append_memory.try_acquire(wanted) {
            Some(held) => held,
            None => {
                drop(batches);
                self.commit(bucket, ready, results, slice).await;
                let Ok(held) = self.append_memory.acquire(wanted).await else {
                    return Prepared::Done(OwnerResult::Done(Err(AppendError::ShuttingDown)));
                };
                // The same bytes decode to the same records.
                batches = match decode().await {
                    Ok(batches) => batches,
                    Err(rejection) => {
                        return Prepared::Done(OwnerResult::Done(Err(AppendError::Batch(rejection))))
                    }
                };
                held
            }
        };
        let idempotent: Vec<ProducerBatch> = batches.iter().filter_map(|b| b.producer).collect();
        if !idempotent.is_empty() {
            // The state does not know the group's waiting batches yet: check this job's
            // batches as the continuation of theirs.
            let mut checked: Vec<ProducerBatch> = ready
                .iter()
                .flat_map(|r| r.part.idempotent.iter().copied())
                .collect();
            let retried = if checked.len().saturating_mul(idempotent.len()) <= PAIRWISE_RETRY_CHECKS {
                idempotent.iter().any(|b| checked.contains(b))
            } else {
                let waiting: std::collections::HashSet<&ProducerBatch> = checked.iter().collect();
                idempotent.iter().any(|b| waiting.contains(b))
            };
            if retried {
                // A retry of a batch not yet written: write the group so far, then check.
                self.commit(bucket, ready, results, slice).await;
                checked.clear();
            }
            checked.extend_from_slice(&idempotent);
            match bucket.producers.check(&checked, append_time_ms) {
                Ok(Verdict::Append) => {}
                Ok(Verdict::Duplicate(stored)) => return Prepared::Done(self.duplicate(bucket, job, stored)),
                Err(e) => return Prepared::Done(OwnerResult::Done(Err(AppendError::Sequence(e)))),
            }
        }
        let batch_rows: Vec<(Option<ProducerBatch>, u64)> = batches
            .iter()
            .map(|b| (b.producer, b.records.len() as u64))
            .collect();
        let bytes = batches.iter().map(|b| b.data.len()).sum();
        // A small job without idempotent batches is converted at the write, with the small jobs
        // next to it: one set of builders and one batch for all of them, instead of one each
        // and a copy into one message. An idempotent job is converted here, so that a batch
        // that does not convert is refused before a later batch of its producer is checked as
        // its successor.
        let conversion = if idempotent.is_empty() && bytes <= MERGE_COLUMN_BYTES {
            Conversion::Deferred { plan, batches, bytes }
        } else {
            // Decoding a big batch takes a while: the core may poll its connections before converting.
            slice.check().await;
            let jobs = [(&batches[..], job.partition, append_time_ms)];
            match self.convert(&plan, &jobs, slice).await {
                Ok(batch) => Conversion::Converted(batch),
                Err(e) => {
                    let errors = self.record_errors(&plan, jobs[0], e, slice).await;
                    return Prepared::Done(OwnerResult::Done(Err(AppendError::Convert(Box::new(errors)))));
                }
            }
        };
        Prepared::Ready(Pending {
            index,
            part: Part {
                job,
                batch_rows,
                idempotent,
                append_time_ms,
                _held: held,
            },
            conversion,
        })
    }

    /// Converts the deferred jobs of `pending` ([`Conversion::Deferred`]), each run of
    /// consecutive ones with the same plan and codec into one batch while the run holds at most
    /// [`MERGE_COLUMN_BYTES`] of decoded records. A run that does not convert is converted job
    /// by job again, so each job gets the outcome (and the error, with its record index) it
    /// would have had alone; a job that does not convert gets its error in `results`.
    async fn convert_pending(
        &self,
        pending: Vec<Pending>,
        results: &mut [Option<OwnerResult>],
        slice: &mut Slice,
    ) -> Vec<Unit> {
        let mut units = Vec::with_capacity(pending.len());
        let mut pending = pending.into_iter().peekable();
        while let Some(first) = pending.next() {
            let (plan, mut run_bytes, first_batches) = match first.conversion {
                Conversion::Converted(arrow_batch) => {
                    units.push(Unit {
                        parts: vec![(first.index, first.part)],
                        arrow_batch,
                    });
                    continue;
                }
                Conversion::Deferred { plan, batches, bytes } => (plan, bytes, batches),
            };
            let compression = first.part.job.table.compression;
            let mut run = vec![(first.index, first.part, first_batches)];
            while let Some(next) = pending.next_if(|p| match &p.conversion {
                Conversion::Deferred {
                    plan: next_plan,
                    bytes,
                    ..
                } => {
                    Arc::ptr_eq(&plan, next_plan)
                        && p.part.job.table.compression == compression
                        && run_bytes + bytes <= MERGE_COLUMN_BYTES
                }
                Conversion::Converted(_) => false,
            }) {
                if let Conversion::Deferred { batches, bytes, .. } = next.conversion {
                    run_bytes += bytes;
                    run.push((next.index, next.part, batches));
                }
            }
            let jobs: Vec<_> = run
                .iter()
                .map(|(_, part, batches)| (&batches[..], part.job.partition, part.append_time_ms))
                .collect();
            let converted = self.convert(&plan, &jobs, slice).await;
            drop(jobs);
            match converted {
                Ok(arrow_batch) => units.push(Unit {
                    parts: run.into_iter().map(|(index, part, _)| (index, part)).collect(),
                    arrow_batch,
                }),
                Err(e) if run.len() == 1 => {
                    let (index, part, batches) = run.swap_remove(0);
                    let job = (&batches[..], part.job.partition, part.append_time_ms);
                    let errors = self.record_errors(&plan, job, e, slice).await;
                    results[index] = Some(OwnerResult::Done(Err(AppendError::Convert(Box::new(errors)))));
                }
                Err(_) => {
                    for (index, part, batches) in run {
                        let job = [(&batches[..], part.job.partition, part.append_time_ms)];
                        match self.convert(&plan, &job, slice).await {
                            Ok(arrow_batch) => units.push(Unit {
                                parts: vec![(index, part)],
                                arrow_batch,
                            }),
                            Err(e) => {
                                let errors = self.record_errors(&plan, job[0], e, slice).await;
                                results[index] =
                                    Some(OwnerResult::Done(Err(AppendError::Convert(Box::new(errors)))))
                            }
                        }
                    }
                }
            }
        }
        units
    }

    /// Writes the group's waiting jobs (`ready`, emptied) and puts each one's result into
    /// `results`.
    async fn commit(
        self: &Rc<Self>,
        bucket: &mut BucketState,
        ready: &mut Vec<Pending>,
        results: &mut [Option<OwnerResult>],
        slice: &mut Slice,
    ) {
        if ready.is_empty() {
            return;
        }
        let waiting = self.convert_pending(std::mem::take(ready), results, slice).await;
        if waiting.is_empty() {
            return;
        }
        // Runs of jobs with the same schema and codec are stored as one message: one IPC
        // encoding, one compression of each column, one checksum, instead of one per job.
        let (runs, messages): (Vec<_>, Vec<_>) = group_messages(&waiting).into_iter().unzip();
        let tags: Vec<Vec<(&str, &str)>> = messages
            .iter()
            .map(|m| m.tag.iter().map(|t| (PRODUCERS_KEY, t.as_str())).collect())
            .collect();
        let items: Vec<AppendItem<'_>> = messages
            .iter()
            .zip(&tags)
            .map(|(m, tags)| AppendItem {
                batch: &m.batch,
                tags,
                // An ALTER of the compression applies from the next batch on.
                compression: Some(m.compression),
            })
            .collect();
        let writing = std::time::Instant::now();
        let stored = bucket.log.append_many(&items).await;
        let bound = self.config.stall_threshold;
        let took = writing.elapsed();
        let rolled = bucket.log.take_roll_time();
        if !bound.is_zero() && took > bound {
            if let Some((_, first)) = waiting.first().and_then(|u| u.parts.first()) {
                tracing::warn!(
                    target: "kafluss::stall",
                    "appends to bucket {} of {} waited {took:?} (server.stall-threshold {bound:?}) for the write of {} messages ({} rows){}",
                    first.job.bucket,
                    first.job.table.path(),
                    items.len(),
                    waiting.iter().map(|u| u.arrow_batch.num_rows()).sum::<usize>(),
                    roll_note(rolled),
                );
            }
        }
        drop(items);
        drop(tags);
        drop(messages);
        if let Some((_, last)) = waiting.last().and_then(|u| u.parts.last()) {
            bucket.log.set_compression(last.job.table.compression);
        }
        let mut appended = Vec::with_capacity(waiting.len());
        for (run, stored) in runs.iter().zip(stored) {
            split_outcome(&waiting[run.clone()], stored, &mut appended);
        }
        let parts = waiting.into_iter().flat_map(|u| u.parts);
        for ((index, r), appended) in parts.zip(appended) {
            let appended = match appended {
                Ok(appended) => appended,
                Err(e) => {
                    self.log_storage_error(&r.job.table, format_args!("append failed: {e}"));
                    results[index] = Some(OwnerResult::Done(Err(AppendError::Storage(e))));
                    continue;
                }
            };
            let rows = r.rows();
            if !r.idempotent.is_empty() {
                // The rows are in the log: from now on a retry of these batches is a duplicate.
                let mut offset = appended.base_offset;
                let mut stored = Vec::with_capacity(r.idempotent.len());
                for &(producer, batch_rows) in &r.batch_rows {
                    if let (Some(producer), Some(last)) = (producer, batch_rows.checked_sub(1)) {
                        stored.push((producer, offset, offset + last));
                    }
                    offset += batch_rows;
                }
                bucket.producers.record(&stored, r.append_time_ms);
            }
            self.write_behind(bucket, &r.job.table, appended.bytes, appended.next_offset);
            // Counted here, on the owner, once the rows are in the log: refused batches count nothing.
            let telemetry = &self.telemetry;
            telemetry.metrics().record_appended(rows);
            telemetry.with_table(&r.job.table, |series| {
                series.record_appended(telemetry.core(), rows, appended.bytes)
            });
            let outcome = Appended {
                base_offset: appended.base_offset,
                log_start_offset: bucket.log.log_start_offset(),
                rows,
            };
            results[index] = Some(self.answer(bucket, r.job, outcome, appended.next_offset));
        }
    }

    /// A retry of a stored batch: nothing is appended; the answer is the stored batch's base
    /// offset, and for acks=-1 it waits until that batch is durable (its first append may still
    /// wait for its group commit).
    fn duplicate(self: &Rc<Self>, bucket: &BucketState, job: AppendJob, stored: BatchMeta) -> OwnerResult {
        tracing::debug!(
            table = %job.table.path(),
            bucket = job.bucket,
            base_offset = stored.first_offset,
            "duplicate idempotent batch (sequences {}..={}) answered with its stored offset",
            stored.first_seq,
            stored.last_seq
        );
        let outcome = Appended {
            base_offset: stored.first_offset,
            log_start_offset: bucket.log.log_start_offset(),
            rows: 0,
        };
        self.answer(bucket, job, outcome, stored.last_offset.saturating_add(1))
    }

    /// Answers now (acks=0/1) or once rows `[0, durable_end)` are durable.
    fn answer(
        self: &Rc<Self>,
        bucket: &BucketState,
        job: AppendJob,
        outcome: Appended,
        durable_end: u64,
    ) -> OwnerResult {
        let must_sync = match self.config.flush_policy {
            FlushPolicy::Always => true,
            FlushPolicy::Ack => job.acks == -1,
            FlushPolicy::Never => false,
        };
        if !must_sync {
            // acks=1 answers wait while the disk is far behind: `log.unsynced.size`.
            if let Some(rows) = (job.acks == 1)
                .then(|| bucket.pace(self.config.unsynced_size))
                .flatten()
            {
                let (log, bound, table) = (bucket.log.clone(), self.config.stall_threshold, job.table);
                let telemetry = self.telemetry.clone();
                return OwnerResult::AfterSync(Box::pin(async move {
                    let waiting = std::time::Instant::now();
                    // A failed fsync fails the bucket log and is reported by the write-behind
                    // task; these rows are written, as acks=1 promises.
                    let _ = log.sync_to(rows).await;
                    let took = waiting.elapsed();
                    if !bound.is_zero() && took > bound {
                        log_paced_answer(&telemetry, &table.path(), job.bucket, took, bound);
                    }
                    Ok(outcome)
                }));
            }
            return OwnerResult::Done(Ok(outcome));
        }
        let log = bucket.log.clone();
        log.expect_syncs();
        let (appender, table) = (self.clone(), job.table);
        OwnerResult::AfterSync(Box::pin(async move {
            match log.sync_to(durable_end).await {
                Ok(()) => Ok(outcome),
                Err(e) => {
                    appender.log_storage_error(&table, format_args!("fsync failed: {e}"));
                    Err(AppendError::Storage(e))
                }
            }
        }))
    }

    /// Starts a background group commit once [`WRITE_BEHIND_BYTES`] (or half of
    /// `log.unsynced.size`, if less) were appended to `bucket` since the last (not with
    /// `log.flush.policy: never`, which never fsyncs). acks=-1 appends waiting meanwhile share
    /// it, as they share any group commit.
    fn write_behind(
        self: &Rc<Self>,
        bucket: &BucketState,
        table: &Arc<TableInfo>,
        bytes: u64,
        next_offset: u64,
    ) {
        bucket.appended.set(bucket.appended.get() + bytes);
        // Drops the fsyncs done by now, so that the list stays short without acks=1 answers.
        bucket.unsynced_bytes();
        let since = bucket.since_write_behind.get() + bytes;
        let step = match self.config.unsynced_size {
            0 => WRITE_BEHIND_BYTES,
            most => WRITE_BEHIND_BYTES.min(most / 2).max(1),
        };
        if since < step || self.config.flush_policy == FlushPolicy::Never {
            bucket.since_write_behind.set(since);
            return;
        }
        bucket.since_write_behind.set(0);
        bucket
            .behind
            .borrow_mut()
            .push_back((next_offset, bucket.appended.get()));
        let (log, appender, table) = (bucket.log.clone(), self.clone(), table.clone());
        glommio::spawn_local(async move {
            if let Err(e) = log.sync_to(next_offset).await {
                appender.log_storage_error(&table, format_args!("write-behind fsync failed: {e}"));
            }
        })
        .detach();
    }

    /// Converts every record of `jobs` (each: its decoded batches, its partition and its append
    /// time), in order, into one batch, with this core's reusable JSON scratch space.
    async fn convert(
        &self,
        plan: &ConversionPlan,
        jobs: &[(&[DecodedBatch], i32, i64)],
        slice: &mut Slice,
    ) -> Result<arrow_array::RecordBatch, kafluss_convert::ConvertError> {
        let input = JobRecords::new(plan, jobs);
        let rows = input.rows();
        let mut records = input.iter();
        // Converted in runs of `CHECK_EVERY_RECORDS`, the core polling its connections between
        // two once the group's work has run a slice (`Slice::check`), so a big batch never holds
        // the core for long. The scratch space is borrowed per run: another bucket actor of this
        // core may convert while this one waits.
        let mut builder = BatchBuilder::with_value_bytes(plan, rows, input.value_bytes());
        let mut left = rows;
        while left > 0 {
            let run = left.min(CHECK_EVERY_RECORDS);
            left -= run;
            let converting = std::time::Instant::now();
            {
                let mut scratch = self.json_scratch.borrow_mut();
                for record in records.by_ref().take(run) {
                    builder.push(&mut scratch, &record)?;
                }
            }
            held(
                format_args!("converting {run} records to Arrow"),
                converting,
                self.config.stall_threshold,
            );
            slice.check().await;
        }
        builder.finish()
    }

    /// `first`, the record that refused `job`'s batch, with the records after it that do not
    /// convert either: each later record is converted again, into fresh builders (a new one
    /// after each failure and each run of [`CHECK_EVERY_RECORDS`], so what converts is not
    /// kept), until their paths and reasons take [`RECORD_ERRORS_BYTES`](super::RECORD_ERRORS_BYTES).
    /// Only a refused batch pays for this.
    async fn record_errors(
        &self,
        plan: &ConversionPlan,
        job: (&[DecodedBatch], i32, i64),
        first: kafluss_convert::ConvertError,
        slice: &mut Slice,
    ) -> super::RecordErrors {
        let jobs = [job];
        let input = JobRecords::new(plan, &jobs);
        let mut records = input.iter().enumerate().skip(first.record_index + 1).peekable();
        let mut more = Vec::new();
        let mut bytes = 0;
        while records.peek().is_some() && bytes < super::RECORD_ERRORS_BYTES {
            {
                let mut builder = BatchBuilder::new(plan, CHECK_EVERY_RECORDS);
                let mut scratch = self.json_scratch.borrow_mut();
                for (index, record) in records.by_ref().take(CHECK_EVERY_RECORDS) {
                    if let Err(mut error) = builder.push(&mut scratch, &record) {
                        // The builder counts its own rows; the batch's index is `index`.
                        error.record_index = index;
                        bytes += error.path.len() + error.reason.len();
                        more.push(error);
                        if bytes >= super::RECORD_ERRORS_BYTES {
                            break;
                        }
                        builder = BatchBuilder::new(plan, CHECK_EVERY_RECORDS);
                    }
                }
            }
            slice.check().await;
        }
        super::RecordErrors { first, more }
    }

    /// Logs a storage failure of `table` at ERROR, at most once per `server.log-repeat-interval`
    /// per table on this core (a failing disk fails every append).
    pub fn log_storage_error(&self, table: &TableInfo, what: std::fmt::Arguments<'_>) {
        let path = table.path();
        self.telemetry.log_limited(
            &path,
            "storage",
            0,
            |Repeats { suppressed, .. }| tracing::error!(table = %path, suppressed, "{what}"),
            |table,
             Repeats {
                 suppressed, interval, ..
             }| {
                tracing::error!(
                    table = %table,
                    suppressed,
                    "{suppressed} more storage errors of {table} in the {interval:?} after the last such line"
                )
            },
        );
    }
}

/// One message of a group write: the batches of a run of jobs, concatenated, with their tag.
struct GroupMessage {
    batch: arrow_array::RecordBatch,
    tag: Option<String>,
    compression: crate::log::ArrowCompression,
}

/// A run of jobs grows only while each of its columns holds at most this many bytes of Arrow
/// buffers, summed over the run's batches. Concatenating small batches saves a message, an
/// encoding and a compression per job; a batch larger than that is not copied once more (a
/// 500-row request of 1 KiB values is one message: docs/architecture.md, step 7). 512 KiB since
/// the log's encoder compresses level 3 with 5-byte matches at every size (`log/encode.rs`):
/// 128 KiB had kept columns out of the 128–256 KiB inputs where zstd's own level 3 looks for
/// 4-byte matches, five to seven times slower per byte on text of few letters; flat out the
/// larger runs carry 21–60 % more requests per second at the same CPU (docs/benchmarks.md,
/// "The merge bound again").
/// Comparisons of a job's idempotent batches with the group's waiting ones made pairwise;
/// more go through a set, so a job of many batches is checked in linear time.
const PAIRWISE_RETRY_CHECKS: usize = 256;

pub(crate) const MERGE_COLUMN_BYTES: usize = 512 << 10;

/// The Arrow buffer bytes of each column of `batch`.
fn column_bytes(batch: &arrow_array::RecordBatch) -> Vec<usize> {
    batch
        .columns()
        .iter()
        .map(|c| c.get_buffer_memory_size())
        .collect()
}

/// Splits a group's waiting jobs into runs stored as one message each: consecutive jobs with
/// the same schema and codec (an ALTER between two jobs starts a new run) while every column
/// of the run holds at most [`MERGE_COLUMN_BYTES`]; a batch with a larger column is a run of
/// its own.
fn message_runs(waiting: &[Unit]) -> Vec<std::ops::Range<usize>> {
    let mut runs: Vec<(std::ops::Range<usize>, Vec<usize>)> = Vec::new();
    for (i, r) in waiting.iter().enumerate() {
        let bytes = column_bytes(&r.arrow_batch);
        match runs.last_mut() {
            Some((run, run_bytes))
                if {
                    let first = &waiting[run.start];
                    first.compression() == r.compression()
                        // `Arc<Schema>` equality compares pointers first.
                        && first.arrow_batch.schema_ref() == r.arrow_batch.schema_ref()
                        && run_bytes
                            .iter()
                            .zip(&bytes)
                            .all(|(run, job)| run + job <= MERGE_COLUMN_BYTES)
                } =>
            {
                run.end = i + 1;
                run_bytes
                    .iter_mut()
                    .zip(&bytes)
                    .for_each(|(run, job)| *run += job);
            }
            _ => runs.push((i..i + 1, bytes)),
        }
    }
    runs.into_iter().map(|(run, _)| run).collect()
}

/// The messages of a group: one per run ([`message_runs`]) with the run's jobs.
fn group_messages(waiting: &[Unit]) -> Vec<(std::ops::Range<usize>, GroupMessage)> {
    let mut messages = Vec::new();
    for run in message_runs(waiting) {
        match run_batch(&waiting[run.clone()]) {
            Some(batch) => messages.push((run.clone(), run_message(&waiting[run], batch))),
            // Not concatenated (32-bit offsets would overflow): each unit is its own message.
            None => messages.extend(run.map(|i| {
                let one = &waiting[i..i + 1];
                (i..i + 1, run_message(one, one[0].arrow_batch.clone()))
            })),
        }
    }
    messages
}

/// The rows of a run's units in order, as one batch (None: they do not concatenate).
fn run_batch(run: &[Unit]) -> Option<arrow_array::RecordBatch> {
    let first = &run[0].arrow_batch;
    if run.len() == 1 {
        return Some(first.clone());
    }
    arrow_select::concat::concat_batches(first.schema_ref(), run.iter().map(|r| &r.arrow_batch)).ok()
}

/// The message of one run holding `batch` and, when any job has idempotent batches, one
/// producers' tag listing every Kafka batch of the run with its rows (so each keeps its offsets).
fn run_message(run: &[Unit], batch: arrow_array::RecordBatch) -> GroupMessage {
    let tag = parts(run).any(|r| !r.idempotent.is_empty()).then(|| {
        encode_tag(&StoredTag {
            append_ms: parts(run).map(|r| r.append_time_ms).max().unwrap_or(0),
            batches: parts(run).flat_map(|r| r.batch_rows.iter().copied()).collect(),
            before_names: false,
        })
    });
    GroupMessage {
        batch,
        tag,
        compression: run[0].compression(),
    }
}

/// The jobs of a run's units, in order.
fn parts(run: &[Unit]) -> impl Iterator<Item = &Part> {
    run.iter().flat_map(|u| u.parts.iter().map(|(_, part)| part))
}

impl Unit {
    /// The codec of its table (every job of a unit has the same).
    fn compression(&self) -> crate::log::ArrowCompression {
        self.parts[0].1.job.table.compression
    }
}

/// Each job's share of its run's stored message: its own offsets, and the message's bytes
/// shared by rows (the last job takes the remainder, so the bytes add up).
fn split_outcome(
    run: &[Unit],
    stored: Result<crate::log::AppendOutcome, LogError>,
    out: &mut Vec<Result<crate::log::AppendOutcome, LogError>>,
) {
    let jobs = run.iter().map(|u| u.parts.len()).sum::<usize>();
    let stored = match stored {
        Ok(stored) => stored,
        Err(e) => {
            out.extend((1..jobs).map(|_| Err(e.duplicate())));
            out.push(Err(e));
            return;
        }
    };
    let total_rows = stored.next_offset - stored.base_offset;
    let mut base_offset = stored.base_offset;
    let mut bytes_left = stored.bytes;
    for (i, r) in parts(run).enumerate() {
        let rows = r.rows();
        let bytes = if i + 1 == jobs || total_rows == 0 {
            bytes_left
        } else {
            (u128::from(stored.bytes) * u128::from(rows) / u128::from(total_rows)) as u64
        };
        bytes_left -= bytes.min(bytes_left);
        out.push(Ok(crate::log::AppendOutcome {
            base_offset,
            next_offset: base_offset + rows,
            bytes,
        }));
        base_offset += rows;
    }
}

/// Flushes and closes a bucket log (shutdown, table drop).
pub async fn close_bucket(state: BucketState) {
    if let Err(e) = state.log.close().await {
        tracing::error!("closing {} failed: {e}", state.log.dir().display());
    }
}

/// The records of a run of jobs (each: its decoded batches, its partition and its append
/// time) as the converter takes them, in order, borrowed from their batches: none collected
/// first. Headers are resolved only where the table stores them, once per Kafka batch (a
/// record's are a range of its batch's).
pub struct JobRecords<'a> {
    jobs: &'a [(&'a [DecodedBatch], i32, i64)],
    headers: Vec<Vec<kafluss_convert::Header<'a>>>,
}

impl<'a> JobRecords<'a> {
    pub fn new(plan: &ConversionPlan, jobs: &'a [(&'a [DecodedBatch], i32, i64)]) -> Self {
        let headers = if plan.stores_headers() {
            Self::batches_of(jobs)
                .map(|batch| {
                    batch
                        .headers
                        .iter()
                        .map(|h| (batch.part(&h.key), batch.optional_part(&h.value)))
                        .collect()
                })
                .collect()
        } else {
            Vec::new()
        };
        Self { jobs, headers }
    }

    fn batches_of(jobs: &'a [(&'a [DecodedBatch], i32, i64)]) -> impl Iterator<Item = &'a DecodedBatch> + 'a {
        jobs.iter().flat_map(|(batches, ..)| batches.iter())
    }

    /// How many records.
    pub fn rows(&self) -> usize {
        Self::batches_of(self.jobs).map(|batch| batch.records.len()).sum()
    }

    /// The bytes of their values.
    pub fn value_bytes(&self) -> usize {
        Self::batches_of(self.jobs)
            .flat_map(|batch| batch.records.iter())
            .map(|r| r.value.as_ref().map_or(0, |v| v.len()))
            .sum()
    }

    /// Each record, with its timestamp (the batch's for LogAppendTime: the job's append time)
    /// and partition.
    pub fn iter(&self) -> impl Iterator<Item = KafkaRecord<'_>> + '_ {
        self.jobs
            .iter()
            .flat_map(|&(batches, partition, append_time_ms)| {
                batches
                    .iter()
                    .map(move |batch| (batch, partition, append_time_ms))
            })
            .enumerate()
            .flat_map(|(b, (batch, partition, append_time_ms))| {
                let headers = self.headers.get(b).map_or(&[][..], |h| &h[..]);
                batch.records.iter().map(move |record| {
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
                    KafkaRecord {
                        key: batch.optional_part(&record.key),
                        value: batch.optional_part(&record.value),
                        headers: headers.get(record.headers.clone()).unwrap_or_default(),
                        timestamp,
                        timestamp_type: batch.timestamp_type,
                        partition,
                    }
                })
            })
    }
}

/// One decoded Kafka batch: its producer fields, timestamp facts and records. The records'
/// keys, values and headers stay in the (decompressed) records section `data` and are held as
/// ranges of it: no reference-counted handle per record (`Records::next_ref`).
#[derive(Debug)]
pub struct DecodedBatch {
    /// The idempotent producer's id, epoch and sequence range; None without a producer id.
    pub producer: Option<ProducerBatch>,
    pub timestamp_type: TimestampType,
    pub base_timestamp: i64,
    /// The records section the ranges below point into.
    pub data: Bytes,
    pub records: Vec<RecordSpan>,
    /// The headers of every record, in order; each record's are a range of these.
    pub headers: Vec<HeaderSpan>,
}

/// A record of a [`DecodedBatch`]: its parts as ranges of the batch's `data`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordSpan {
    /// Timestamp minus the batch's base timestamp.
    pub timestamp_delta: i64,
    /// `None` for a null key.
    pub key: Option<Range<usize>>,
    /// `None` for a null value.
    pub value: Option<Range<usize>>,
    /// Its headers: a range of the batch's `headers`.
    pub headers: Range<usize>,
}

/// A header of a record of a [`DecodedBatch`], as ranges of the batch's `data`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderSpan {
    pub key: Range<usize>,
    /// `None` for a null value.
    pub value: Option<Range<usize>>,
}

impl DecodedBatch {
    /// The bytes of `range` (one of this batch's spans).
    pub fn part(&self, range: &Range<usize>) -> &[u8] {
        self.data.get(range.clone()).unwrap_or_default()
    }

    pub fn optional_part(&self, range: &Option<Range<usize>>) -> Option<&[u8]> {
        range.as_ref().map(|r| self.part(r))
    }
}

/// Where `part`, a slice of `whole`, lies in it.
fn range_in(whole: &[u8], part: &[u8]) -> Range<usize> {
    let start = (part.as_ptr() as usize).wrapping_sub(whole.as_ptr() as usize);
    start..start.wrapping_add(part.len())
}

/// A table's `table.log.ttl`, or `default` (the server's) when it sets none.
fn table_ttl(table: &TableInfo, default: Duration) -> Duration {
    table
        .options
        .get("table.log.ttl")
        .and_then(|v| crate::log::parse_ttl(v))
        .unwrap_or(default)
}

/// What a partition's decoded batches hold beyond the frame their `records` came in: the
/// records decompressed from compressed batches (an uncompressed batch's are the frame's own
/// bytes) and the index of every record and header.
pub fn held_by_decoded(batches: &[DecodedBatch], records: Option<&Bytes>) -> usize {
    let in_frame = |data: &Bytes| {
        records.is_some_and(|frame| {
            let at = range_in(frame, data);
            at.start <= at.end && at.end <= frame.len()
        })
    };
    batches
        .iter()
        .map(|batch| {
            let inflated = if in_frame(&batch.data) {
                0
            } else {
                batch.data.len()
            };
            inflated
                + batch.records.capacity() * std::mem::size_of::<RecordSpan>()
                + batch.headers.capacity() * std::mem::size_of::<HeaderSpan>()
        })
        .sum()
}

/// What a partition's records may decompress to, and take of index, when they are decoded on
/// the core: 1 MiB, about a millisecond of work. Larger ones are decoded again on the core's
/// blocking thread with the full bounds, so a big (or hugely compressed) batch never holds the
/// core for long.
pub const ON_CORE_DECODE_BYTES: usize = 1 << 20;

/// [`decode_batches`] on the core while the records stay within [`ON_CORE_DECODE_BYTES`], else
/// (the on-core attempt stops at that bound) again on the core's blocking thread with the full
/// bounds. The on-core part is reported by the stall warning (`server.stall-threshold`).
async fn decode_on_core_or_blocking(
    records: Option<&Bytes>,
    max_decompressed: usize,
    max_record_size: usize,
    table: &TableInfo,
    stall_threshold: Duration,
) -> Result<Vec<DecodedBatch>, BatchRejection> {
    let decoding = std::time::Instant::now();
    let on_core = decode_batches(
        records,
        max_decompressed.min(ON_CORE_DECODE_BYTES),
        max_record_size,
    );
    held(
        format_args!(
            "decoding {} bytes of batches for {}",
            records.map_or(0, |r| r.len()),
            table.display_path()
        ),
        decoding,
        stall_threshold,
    );
    let over_on_core_bound = matches!(
        &on_core,
        Err(BatchRejection::IndexTooLarge { .. })
            | Err(BatchRejection::Wire(RecordBatchError::Compression(
                CompressionError::DecompressedTooLarge { .. }
            )))
    );
    if !over_on_core_bound || max_decompressed <= ON_CORE_DECODE_BYTES {
        return on_core;
    }
    let records = records.cloned();
    glommio::executor()
        .spawn_blocking(move || decode_batches(records.as_ref(), max_decompressed, max_record_size))
        .await
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
    // The spans of the records and headers of all batches of the partition, bounded like the
    // records they index: an empty header is two bytes of a (compressed) batch and 40 bytes of
    // index, a minimal record about eight and 72.
    let mut index_budget = max_decompressed;
    let (mut indexed_records, mut indexed_headers) = (0usize, 0usize);
    let index_too_large = |records, headers| BatchRejection::IndexTooLarge {
        records,
        headers,
        limit: max_decompressed,
        record_bytes: std::mem::size_of::<RecordSpan>(),
        header_bytes: std::mem::size_of::<HeaderSpan>(),
    };
    for batch in RecordBatches::new(bytes) {
        let batch = batch.map_err(BatchRejection::Wire)?;
        if batch.attributes.is_transactional() {
            return Err(BatchRejection::Transactional);
        }
        if batch.attributes.is_control() {
            return Err(BatchRejection::Control);
        }
        let producer = batch.has_producer_id().then(|| {
            ProducerBatch::new(
                batch.producer_id,
                batch.producer_epoch,
                batch.base_sequence,
                batch.last_offset_delta,
            )
        });
        let timestamp_type = match batch.attributes.timestamp_type() {
            WireTimestampType::LogAppendTime => TimestampType::LogAppendTime,
            WireTimestampType::CreateTime => TimestampType::CreateTime,
        };
        let mut records = Vec::with_capacity(batch.record_count.clamp(0, 4096) as usize);
        let mut headers = Vec::new();
        // One budget for all batches of the partition, so several batches cannot each
        // decompress up to the limit.
        let mut inflated = batch.records(decompress_budget).map_err(BatchRejection::Wire)?;
        decompress_budget = decompress_budget.saturating_sub(inflated.data().len());
        let data = inflated.data().clone();
        while let Some(record) = inflated.next_ref() {
            let record = record.map_err(BatchRejection::Wire)?;
            let first_header = headers.len();
            let mut size = record.key.map_or(0, <[u8]>::len) + record.value.map_or(0, <[u8]>::len);
            indexed_records += 1;
            index_budget = index_budget
                .checked_sub(std::mem::size_of::<RecordSpan>())
                .ok_or_else(|| index_too_large(indexed_records, indexed_headers))?;
            for header in record.headers {
                // A header counts its two length prefixes too (at least a byte each), so that
                // empty headers cannot make a record of any size.
                size += header.key.len() + header.value.map_or(0, <[u8]>::len) + 2;
                indexed_headers += 1;
                index_budget = index_budget
                    .checked_sub(std::mem::size_of::<HeaderSpan>())
                    .ok_or_else(|| index_too_large(indexed_records, indexed_headers))?;
                headers.push(HeaderSpan {
                    key: range_in(&data, header.key),
                    value: header.value.map(|v| range_in(&data, v)),
                });
            }
            if size > max_record_size {
                return Err(BatchRejection::RecordTooLarge {
                    size,
                    limit: max_record_size,
                });
            }
            records.push(RecordSpan {
                timestamp_delta: record.timestamp_delta,
                key: record.key.map(|k| range_in(&data, k)),
                value: record.value.map(|v| range_in(&data, v)),
                headers: first_header..headers.len(),
            });
        }
        total_records += records.len();
        decoded.push(DecodedBatch {
            producer,
            timestamp_type,
            base_timestamp: batch.base_timestamp,
            data,
            records,
            headers,
        });
    }
    if total_records == 0 {
        return Err(BatchRejection::Empty);
    }
    Ok(decoded)
}

#[cfg(test)]
mod pace_tests {
    use std::collections::VecDeque;

    use super::pace;

    #[test]
    fn an_acks_1_answer_waits_for_the_oldest_fsync_that_brings_the_backlog_under_the_bound() {
        // Write-behind fsyncs started at 100, 200 and 300 bytes appended (rows 10, 20, 30).
        let behind: VecDeque<(u64, u64)> = [(10, 100), (20, 200), (30, 300)].into();
        // 350 appended, 350 unsynced (nothing synced yet), at most 200: after the fsync of rows
        // 20 (started at 200) 150 are left; after that of rows 10, 250.
        assert_eq!(pace(&behind, 350, 350, 200), Some(20));
        assert_eq!(pace(&behind, 350, 350, 100), Some(30));
        // Even the newest leaves more: wait for it.
        assert_eq!(pace(&behind, 450, 450, 100), Some(30));
        // Under the bound, with the bound off, or nothing in flight: no wait.
        assert_eq!(pace(&behind, 350, 200, 200), None);
        assert_eq!(pace(&behind, 350, 350, 0), None);
        assert_eq!(pace(&VecDeque::new(), 350, 350, 100), None);
    }
}

#[cfg(test)]
mod roll_note_tests {
    use std::time::Duration;

    use super::{roll_note, RollTime};

    #[test]
    fn the_slow_write_line_names_a_roll_and_its_wait_only_when_there_was_one() {
        assert_eq!(roll_note(RollTime::default()), "");
        let rolled = RollTime {
            total: Duration::from_millis(42),
            waiting_for_previous: Duration::from_millis(40),
        };
        assert_eq!(
            roll_note(rolled),
            "; a segment roll took 42ms of it, 40ms of that waiting for the previous roll's fsync"
        );
    }
}
