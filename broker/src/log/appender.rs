//! `BucketLog`: the append-only Arrow log of one bucket, owned by one glommio core.
//!
//! Invariants:
//! - Offsets are contiguous: segment `k+1` starts where segment `k` ends, and row `o` of the
//!   bucket is row `o - base` of the segment named `base`.
//! - `next_offset` (here and in the shared [`BucketStats`]) moves only after a batch's bytes all
//!   reached the file, so no reader ever sees part of a batch; a failed write is truncated away.
//! - Appends are serialized by a one-permit semaphore (a batch is one `write_at`, plus a roll
//!   now and then); encoding happens under it too, so file order is offset order.
//! - A roll does not fsync under the semaphore: it writes the end-of-stream marker, creates the
//!   next segment under its pending name (`<base>.arrow.rolling`) and hands the closed
//!   segment's fsync to a background task, which then renames the new segment to its segment
//!   name and fsyncs the directory. Until that task is done no row is counted durable past
//!   the closed segment's end, nor any row of the new segment (group commit waits for it), and
//!   the next roll waits for it. So every file with a segment name but the last is complete
//!   and durable, as recovery requires; a pending segment is kept by recovery only when the
//!   segment before it is complete (see `super::recovery`).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::SystemTime;

use arrow_array::RecordBatch;
use arrow_ipc::writer::{DictionaryTracker, IpcDataGenerator, IpcWriteContext, StreamWriter};
use arrow_schema::SchemaRef;
use glommio::sync::Semaphore;

use super::compression::ArrowCompression;
use super::encode::{CodecHistory, Encoder, Unsupported};
use super::error::LogError;
use super::file::{sync_directory, GlommioStore, SegmentFile, SegmentStore};
use super::group_commit::CommitState;
use super::recovery::{recover, Recovered};
use super::segment::{
    pending_segment_path, segment_path, ActiveSegment, Prewrite, SegmentInfo, VisitedBatch, END_OF_STREAM,
    SYNCED_KEY,
};
use super::{AppendOutcome, BucketStats, FlushPolicy, LogConfig};

struct State<F> {
    /// Closed segments, oldest first (the active one is not in here).
    closed: VecDeque<SegmentInfo>,
    active: Option<ActiveSegment<F>>,
    /// Newest append time of the active segment.
    active_last_append: SystemTime,
    next_offset: u64,
    log_start_offset: u64,
    failed: bool,
    /// A roll's background fsync is not done yet: rows `[.., end)` are in the closed segment
    /// that task fsyncs, and the active segment (if any) still has its pending name.
    rolling: Option<PendingRoll>,
}

/// What one turn of [`BucketLog::enforce_retention`] does.
enum RetentionStep {
    /// Nothing (more) expired.
    Done,
    /// Roll the active segment, all of whose rows expired (with its schema).
    Roll(SchemaRef),
    /// Delete the oldest closed segment, first fsyncing the active one when asked.
    Delete { base_offset: u64, sync_active: bool },
}

#[derive(Debug, Clone, Copy)]
struct PendingRoll {
    /// The exclusive end offset of the closed segment being fsync'd.
    end: u64,
}

/// The durable Arrow log of one bucket. `!Send`: it lives on the core that owns the bucket.
/// Share it on that core as `Rc<BucketLog>`; every method takes `&self`.
pub struct BucketLog<S: SegmentStore = GlommioStore> {
    store: Rc<S>,
    dir: PathBuf,
    config: LogConfig,
    stats: Arc<BucketStats>,
    /// Shared with the background task that finishes a roll.
    state: Rc<RefCell<State<S::File>>>,
    append_permit: Semaphore,
    commit: Rc<CommitState>,
    /// Told the duration of every segment-file fsync of the write path (metrics).
    on_sync: Option<Rc<dyn Fn(std::time::Duration)>>,
    /// The compression of the next appended batch (`config.compression`, then
    /// [`BucketLog::set_compression`]).
    compression: Cell<ArrowCompression>,
    /// `table.log.ttl` in force (`config.retention`, then what [`BucketLog::set_retention`] set).
    retention: Cell<Option<std::time::Duration>>,
    /// The task finishing the last roll (fsync of the closed segment, rename, directory
    /// fsync). Dropping the log cancels it; recovery finishes such a roll on the next open.
    roll_task: RefCell<Option<glommio::Task<()>>>,
    /// Someone waits for this bucket's fsyncs (an acks=-1 append, [`BucketLog::expect_syncs`],
    /// or `log.flush.policy=always`): the active segment keeps zeros written ahead of its end
    /// ([`SegmentFile::prewrite`]) instead of only allocated blocks.
    syncs_expected: Cell<bool>,
    /// Which of this bucket's message buffers are stored without trying the codec, after it
    /// did not shrink them ([`CodecHistory`]).
    codec_history: RefCell<CodecHistory>,
    /// Time spent in rolls since [`BucketLog::take_roll_time`] last read it: in all, and of that
    /// waiting for the previous roll's task (so a slow write can be told apart from a slow roll).
    roll_time: Cell<RollTime>,
}

/// What the rolls of one or more appends took ([`BucketLog::take_roll_time`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RollTime {
    /// From the start of each roll until the new segment is ready, summed.
    pub total: std::time::Duration,
    /// The part of `total` spent waiting for the previous roll's fsync, rename and directory
    /// fsync to finish.
    pub waiting_for_previous: std::time::Duration,
}

/// The memory page size: write-back requests end on a multiple of it, so they never include
/// the page that appends are still filling, and preallocation requests end on one too.
pub fn page_size() -> u64 {
    static PAGE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| {
        nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
            .ok()
            .flatten()
            .and_then(|size| u64::try_from(size).ok())
            .filter(|&size| size > 0)
            .unwrap_or(4096)
    })
}

/// Receives the duration of each segment-file `fdatasync` (group commit, roll, close).
pub type SyncObserver = Box<dyn Fn(std::time::Duration)>;

impl BucketLog<GlommioStore> {
    /// Opens (creating if needed) the bucket directory with glommio files and recovers it.
    pub async fn open(dir: &Path, config: LogConfig, stats: Arc<BucketStats>) -> Result<Self, LogError> {
        Self::open_with_store(GlommioStore::default(), dir, config, stats).await
    }
}

/// The schema message that starts a segment's IPC stream.
fn schema_message(schema: &SchemaRef) -> Result<Vec<u8>, LogError> {
    let mut writer = StreamWriter::try_new(Vec::new(), schema).map_err(LogError::Encode)?;
    Ok(std::mem::take(writer.get_mut()))
}

thread_local! {
    /// This thread's (one glommio core's) encoder of record-batch messages: the buckets of a
    /// core share it, and so one zstd compressor per level (about 0.9 MB each, docs/storage.md).
    static ENCODER: RefCell<Encoder> = RefCell::new(Encoder::default());
    /// arrow-ipc's write contexts, one per compression in use, for the batches the encoder
    /// does not lay out itself ([`Unsupported`]: none that the converter makes).
    static WRITE_CONTEXTS: RefCell<Vec<(ArrowCompression, IpcWriteContext)>> = const { RefCell::new(Vec::new()) };
}

/// `batch` as one sealed IPC record-batch message (continuation, metadata with the body's
/// checksum and `tags`, body), its buffers compressed with `compression`, appended to `out`:
/// by this core's [`Encoder`] (each buffer copied once, into `out`), or for a batch it does not
/// lay out, by arrow-ipc's encoder and `checksum::seal_into` (the same bytes; `history`, the
/// bucket's [`CodecHistory`], is used by the former only). No dictionary
/// types: a batch that needed dictionary messages is refused. On `Err` nothing was appended.
fn encode_message_into(
    out: &mut Vec<u8>,
    batch: &RecordBatch,
    compression: ArrowCompression,
    tags: &[(&str, &str)],
    history: &mut CodecHistory,
) -> Result<(), LogError> {
    match ENCODER.with_borrow_mut(|encoder| encoder.encode_into(out, batch, compression, tags, history)) {
        Ok(Ok(())) => return Ok(()),
        Ok(Err(e)) => return Err(LogError::Encode(arrow_schema::ArrowError::from(e))),
        Err(Unsupported) => {}
    }
    let options = compression.write_options();
    WRITE_CONTEXTS.with_borrow_mut(|contexts| {
        let at = match contexts.iter().position(|(c, _)| *c == compression) {
            Some(at) => at,
            None => {
                contexts.push((compression, IpcWriteContext::default()));
                contexts.len() - 1
            }
        };
        let (dictionaries, encoded) = IpcDataGenerator::default()
            .encode(
                batch,
                &mut DictionaryTracker::new(false),
                &options,
                &mut contexts[at].1,
            )
            .map_err(LogError::Encode)?;
        if !dictionaries.is_empty() {
            return Err(super::checksum::SealError::new("dictionary messages").into());
        }
        super::checksum::seal_into(out, &encoded.ipc_message, &encoded.arrow_data, tags)?;
        Ok(())
    })
}

impl<S: SegmentStore + 'static> BucketLog<S> {
    /// Opens the bucket directory on `store` and recovers it (see `super::recovery`), then
    /// publishes `next_offset` and the log start offset in `stats`.
    pub async fn open_with_store(
        store: S,
        dir: &Path,
        config: LogConfig,
        stats: Arc<BucketStats>,
    ) -> Result<Self, LogError> {
        Self::open_visiting(store, dir, config, stats, &mut |_, _| {}).await
    }

    /// [`BucketLog::open_with_store`], showing `visit` every batch recovery keeps, oldest
    /// first, with the offset of its first row: how the layer above rebuilds what it stored
    /// in the batches' tags ([`BucketLog::append_tagged`]).
    pub async fn open_visiting(
        store: S,
        dir: &Path,
        config: LogConfig,
        stats: Arc<BucketStats>,
        visit: &mut dyn FnMut(u64, &VisitedBatch<'_>),
    ) -> Result<Self, LogError> {
        let Recovered {
            closed,
            active,
            active_last_append,
            next_offset,
            log_start_offset,
        } = recover(&store, dir, visit).await?;
        stats.log_start_offset.store(log_start_offset, Ordering::Release);
        stats.next_offset.store(next_offset, Ordering::Release);
        stats.opened.store(true, Ordering::Release);
        let commit = CommitState::default();
        let compression = Cell::new(config.compression);
        let retention = Cell::new(config.retention);
        // Every closed segment was fsync'd when it was rolled (or by recovery, which finishes
        // an interrupted roll), the last one just above.
        commit.durable.set(next_offset);
        Ok(Self {
            store: Rc::new(store),
            dir: dir.to_path_buf(),
            config,
            stats,
            state: Rc::new(RefCell::new(State {
                closed,
                active,
                active_last_append,
                next_offset,
                log_start_offset,
                failed: false,
                rolling: None,
            })),
            append_permit: Semaphore::new(1),
            commit: Rc::new(commit),
            on_sync: None,
            compression,
            retention,
            roll_task: RefCell::new(None),
            syncs_expected: Cell::new(false),
            codec_history: RefCell::default(),
            roll_time: Cell::default(),
        })
    }

    /// Reports the duration of every later segment-file fsync to `observer`.
    pub fn with_sync_observer(mut self, observer: SyncObserver) -> Self {
        self.on_sync = Some(Rc::from(observer));
        self
    }

    /// `file.sync()`, timed for the observer.
    async fn sync_file(&self, file: &S::File) -> std::io::Result<()> {
        timed_sync(file, self.on_sync.as_deref()).await
    }

    /// Batches appended from now on are compressed with `compression` (an ALTER of the table's
    /// `table.log.arrow.compression.*`); batches already written stay as they are.
    pub fn set_compression(&self, compression: ArrowCompression) {
        self.compression.set(compression);
    }

    /// Retention deletes segments older than `ttl` from the next check on (an ALTER of the
    /// table's `table.log.ttl`); None keeps every segment.
    pub fn set_retention(&self, ttl: Option<std::time::Duration>) {
        self.retention.set(ttl);
    }

    /// The store's clock (wall clock in production).
    pub fn now(&self) -> SystemTime {
        self.store.now()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// The offset the next appended row gets (= rows fully written so far).
    pub fn next_offset(&self) -> u64 {
        self.state.borrow().next_offset
    }

    /// The first offset still retained.
    pub fn log_start_offset(&self) -> u64 {
        self.state.borrow().log_start_offset
    }

    /// Rows `[0, durable_offset)` are fsync'd.
    pub fn durable_offset(&self) -> u64 {
        self.commit.durable.get()
    }

    /// How many fsyncs group commit has issued (rolls and `close` not counted).
    pub fn group_syncs(&self) -> u64 {
        self.commit.syncs.get()
    }

    /// The time rolls took since the last call (zero if none rolled), and starts counting anew.
    pub fn take_roll_time(&self) -> RollTime {
        self.roll_time.take()
    }

    /// Number of segment files (closed + active).
    pub fn segment_count(&self) -> usize {
        let state = self.state.borrow();
        state.closed.len() + usize::from(state.active.is_some())
    }

    /// The active segment's stream length in bytes (its file may be longer: zeros written
    /// ahead), and its base offset; None without an active segment.
    pub fn active_segment_len(&self) -> Option<u64> {
        self.state.borrow().active.as_ref().map(|a| a.len)
    }

    pub fn active_base_offset(&self) -> Option<u64> {
        self.state.borrow().active.as_ref().map(|a| a.base_offset)
    }

    pub fn stats(&self) -> &Arc<BucketStats> {
        &self.stats
    }

    /// The active segment's path (for error messages), or the bucket directory.
    fn active_path(&self) -> PathBuf {
        let state = self.state.borrow();
        state
            .active
            .as_ref()
            .map_or_else(|| self.dir.clone(), |a| a.path.clone())
    }

    fn check_not_failed(&self) -> Result<(), LogError> {
        if self.state.borrow().failed {
            return Err(LogError::Failed {
                dir: self.dir.clone(),
            });
        }
        Ok(())
    }

    fn fail(&self) {
        fail(&self.state, &self.commit);
    }

    /// While a roll's background fsync runs: the end offset of the segment it fsyncs (tests
    /// and diagnostics).
    pub fn roll_pending(&self) -> Option<u64> {
        self.state.borrow().rolling.map(|r| r.end)
    }

    /// Waits until no group fsync is running (or the log failed).
    async fn group_sync_finished(&self) -> Result<(), LogError> {
        self.wait_until(|log| !log.commit.in_flight.get()).await
    }

    /// Waits, woken by each group-commit or roll completion, until `done` holds (or the log
    /// failed).
    async fn wait_until(&self, done: impl Fn(&Self) -> bool) -> Result<(), LogError> {
        loop {
            self.check_not_failed()?;
            if done(self) {
                return Ok(());
            }
            let seen = self.commit.completions.generation();
            self.commit.completions.changed(seen).await;
        }
    }

    /// Waits until no roll's background fsync is running (or the log failed).
    async fn roll_finished(&self) -> Result<(), LogError> {
        self.wait_until(|log| log.state.borrow().rolling.is_none()).await
    }

    /// Waits for the bucket's single writer slot (appends, retention and close never overlap).
    /// The semaphore only fails once closed, which marks the bucket failed.
    async fn exclusive(&self) -> Result<glommio::sync::Permit<'_>, LogError> {
        self.append_permit
            .acquire_permit(1)
            .await
            .map_err(|_| LogError::Failed {
                dir: self.dir.clone(),
            })
    }

    /// Appends `batch` as the next contiguous rows. When it returns Ok, the whole batch is in
    /// the segment file (page cache): what acks=1 waits for. With `log.flush.policy=always` it
    /// is also fsync'd. On error nothing of the batch is visible.
    pub async fn append(&self, batch: &RecordBatch) -> Result<AppendOutcome, LogError> {
        self.append_tagged(batch, &[]).await
    }

    /// [`BucketLog::append`], storing `tags` as custom-metadata pairs of the batch's IPC
    /// message (beside its checksum); recovery shows them to [`BucketLog::open_visiting`]'s
    /// visitor. Readers that do not know them (pyarrow, arrow-rs) ignore them.
    pub async fn append_tagged(
        &self,
        batch: &RecordBatch,
        tags: &[(&str, &str)],
    ) -> Result<AppendOutcome, LogError> {
        let item = AppendItem {
            batch,
            tags,
            compression: None,
        };
        self.append_many(std::slice::from_ref(&item))
            .await
            .pop()
            .unwrap_or_else(|| {
                Err(LogError::Failed {
                    dir: self.dir.clone(),
                })
            })
    }

    /// Appends `items` in order as the next contiguous rows, each as its own IPC message (its
    /// own checksum and tags), with as few file writes as the segment boundaries allow: the
    /// messages of consecutive items that fit in the active segment are written with one
    /// `write_at` (a group write: the bucket actor hands over every job that queued while the
    /// previous write was in flight). One result per item, in order; what [`BucketLog::append`]
    /// promises holds for each `Ok` item. A failed write fails every item of that write and every
    /// later one; items before it stay appended.
    pub async fn append_many(&self, items: &[AppendItem<'_>]) -> Vec<Result<AppendOutcome, LogError>> {
        let mut results = Vec::with_capacity(items.len());
        {
            let _permit = match self.exclusive().await {
                Ok(permit) => permit,
                Err(e) => return fail_all(e, items.len()),
            };
            while results.len() < items.len() {
                match self.append_run(&items[results.len()..]).await {
                    Ok(outcomes) => results.extend(outcomes.into_iter().map(Ok)),
                    // Nothing was written and only this item is at fault: the others go on.
                    Err(e @ (LogError::Encode(_) | LogError::Seal(_) | LogError::OffsetOverflow { .. })) => {
                        results.push(Err(e))
                    }
                    Err(e) => {
                        let left = items.len() - results.len();
                        results.extend(fail_all(e, left));
                    }
                }
            }
        }
        if self.config.flush_policy == FlushPolicy::Always {
            let end = results
                .iter()
                .filter_map(|r| r.as_ref().ok())
                .map(|o| o.next_offset)
                .max();
            if let Some(end) = end {
                if let Err(e) = self.sync_to(end).await {
                    let failed = results.iter().filter(|r| r.is_ok()).count();
                    let mut errors = fail_all(e, failed).into_iter();
                    for result in results.iter_mut().filter(|r| r.is_ok()) {
                        if let Some(error) = errors.next() {
                            *result = error;
                        }
                    }
                }
            }
        }
        results
    }

    /// One write: the longest prefix of `items` (at least one) whose messages go into the same
    /// segment, rolling or creating the segment first when the first item needs it. An item
    /// whose encoding fails ends the prefix before it, or is the prefix's only (failed) item.
    async fn append_run(&self, items: &[AppendItem<'_>]) -> Result<Vec<AppendOutcome>, LogError> {
        self.check_not_failed()?;
        let Some(first) = items.first() else {
            return Ok(Vec::new());
        };
        if first.batch.num_rows() == 0 {
            let offset = self.state.borrow().next_offset;
            return Ok(vec![AppendOutcome {
                base_offset: offset,
                next_offset: offset,
                bytes: 0,
            }]);
        }
        let needs_roll = match &self.state.borrow().active {
            None => false,
            Some(active) => {
                !same_schema(&active.schema, first.batch.schema_ref())
                    || active.len >= self.config.segment_size
            }
        };
        if needs_roll {
            self.roll(first.batch.schema_ref()).await?;
        }
        if self.state.borrow().active.is_none() {
            let base_offset = self.state.borrow().next_offset;
            self.create_segment(base_offset, first.batch.schema_ref()).await?;
        }

        // Encode under a short borrow; never hold a RefCell borrow across an await.
        let (file, prewrite, pos, bytes, outcomes) = {
            let state = self.state.borrow();
            let active = state
                .active
                .as_ref()
                .expect("an active segment exists after create_segment");
            // Room for the messages up front (their Arrow buffers plus metadata: what they take
            // uncompressed, more than compressed), so encoding never moves what it wrote to a
            // larger allocation. Not past the segment's end, where this write stops.
            let room = self.config.segment_size.saturating_sub(active.len) as usize;
            let hint: usize = items.iter().map(|item| message_size_hint(item.batch)).sum();
            let mut bytes = Vec::with_capacity(hint.min(room.saturating_add(MESSAGE_METADATA_HINT)));
            let mut outcomes = Vec::with_capacity(items.len());
            // Each message says how many of the segment's rows were fsync'd when it was
            // written (`SYNCED_KEY`), after the item's own tags: what lets recovery tell damage
            // in fsync'd bytes from a power loss's unsynced pages.
            let synced = self
                .commit
                .durable
                .get()
                .saturating_sub(active.base_offset)
                .to_string();
            let mut tags: Vec<(&str, &str)> = Vec::new();
            let mut next_offset = state.next_offset;
            for (i, item) in items.iter().enumerate() {
                if i > 0
                    && (!same_schema(&active.schema, item.batch.schema_ref())
                        || active.len + bytes.len() as u64 >= self.config.segment_size)
                {
                    break;
                }
                let base_offset = next_offset;
                let rows = item.batch.num_rows() as u64;
                let start = bytes.len();
                let encoded = if rows == 0 {
                    Ok(())
                } else {
                    base_offset
                        .checked_add(rows)
                        .ok_or_else(|| LogError::OffsetOverflow {
                            dir: self.dir.clone(),
                        })
                        .and_then(|_| {
                            // Compression is per message: after an ALTER the same stream goes on
                            // with the other codec. A failure appends nothing to `bytes`.
                            let compression = item.compression.unwrap_or(self.compression.get());
                            tags.clear();
                            tags.extend_from_slice(item.tags);
                            tags.push((SYNCED_KEY, &synced));
                            encode_message_into(
                                &mut bytes,
                                item.batch,
                                compression,
                                &tags,
                                &mut self.codec_history.borrow_mut(),
                            )
                        })
                };
                match encoded {
                    Ok(()) => {}
                    Err(e) if i == 0 => return Err(e),
                    Err(_) => break, // this item fails alone, as the first of the next run
                }
                next_offset = base_offset + rows;
                outcomes.push(AppendOutcome {
                    base_offset,
                    next_offset,
                    bytes: (bytes.len() - start) as u64,
                });
            }
            (
                active.file.clone(),
                active.prewrite.clone(),
                active.len,
                bytes,
                outcomes,
            )
        };
        let written = bytes.len() as u64;
        if written > 0 {
            // Never into zeros still being written: they would land over these bytes.
            prewrite.clear_below(pos + written).await;
            if let Err(err) = write_all(&*file, bytes, pos).await {
                // Remove whatever part of the messages landed so the stream stays well-formed.
                if file.truncate(pos).await.is_err() {
                    self.fail();
                }
                return Err(LogError::io(self.active_path(), "write", err));
            }
        }
        let next_offset = outcomes.last().map_or(0, |o| o.next_offset);
        let now = self.store.now();
        {
            let mut state = self.state.borrow_mut();
            if let Some(active) = state.active.as_mut() {
                active.len = pos + written;
                self.write_back(active);
                if !self.prewrite(active) {
                    self.preallocate(active);
                }
            }
            state.next_offset = next_offset;
            if written > 0 {
                state.active_last_append = now;
            }
        }
        // Publish only after the bytes are in the file: readers on other threads never pass it.
        self.stats.next_offset.store(next_offset, Ordering::Release);
        Ok(outcomes)
    }

    /// Once `log.writeback.size` bytes were appended since the last write-back request, asks for
    /// the next one: from the start of the previous request (written back by now, so its pages
    /// are dropped) to the file's last whole page ([`page_size`]; its writeback
    /// starts). The partly filled page the next append writes into is left out: an append to a
    /// page under writeback waits for the disk to finish it. While the previous request is still
    /// running nothing changes, and a later append asks for the longer range.
    fn write_back(&self, active: &mut ActiveSegment<S::File>) {
        let step = self.config.writeback_size;
        let page = page_size();
        let end = active.len / page * page;
        if step > 0
            && end > active.written_back
            && active.len - active.written_back >= step
            && active.file.write_back(active.write_back_from, end)
        {
            active.write_back_from = active.written_back;
            active.written_back = end;
        }
    }

    /// Keeps file system blocks allocated ahead of the active segment's end
    /// ([`SegmentFile::preallocate`]): as many bytes as the segment holds, at least
    /// [`MIN_PREALLOCATE`] and at most `log.preallocate.size`, asked for again once less than
    /// half of that is left. A small or idle bucket so holds little; a busy one appends into
    /// allocated blocks. While the previous request is still running nothing changes, and a
    /// later append asks again.
    fn preallocate(&self, active: &mut ActiveSegment<S::File>) {
        let most = self.config.preallocate_size;
        if most == 0 {
            return;
        }
        let ahead = active.len.max(MIN_PREALLOCATE).min(most);
        if active.preallocated_to >= active.len.saturating_add(ahead / 2) {
            return;
        }
        let page = page_size();
        let start = active.preallocated_to.max(active.len);
        let end = active
            .len
            .saturating_add(ahead)
            .div_ceil(page)
            .saturating_mul(page);
        if active.file.preallocate(start, end) {
            active.preallocated_to = end;
        }
    }

    /// Appends from now on are followed by fsyncs that someone waits for (acks=-1): the active
    /// segment keeps zeros written ahead of its end, so that those fsyncs write no file system
    /// metadata (`log.prewrite.size`; [`SegmentFile::prewrite`]). Cheap to call per append.
    pub fn expect_syncs(&self) {
        self.syncs_expected.set(true);
    }

    /// Keeps zeros written and synced ahead of the active segment's end while fsyncs are
    /// expected ([`BucketLog::expect_syncs`]): as many bytes as the segment holds, at least
    /// [`MIN_PREALLOCATE`] and at most `log.prewrite.size`, started again once less than half
    /// of that is left, never past the segment size, one at a time, on a task of its own
    /// (appends wait only for a prewrite they would write into). True when prewriting is on
    /// for this segment (then blocks need no other preallocation), false otherwise.
    fn prewrite(&self, active: &mut ActiveSegment<S::File>) -> bool {
        let most = self.config.prewrite_size;
        let prewrite = &active.prewrite;
        let always = self.config.flush_policy == FlushPolicy::Always;
        if most == 0 || !(always || self.syncs_expected.get()) || prewrite.failed.get() {
            return false;
        }
        if prewrite.running.get().is_some() {
            return true;
        }
        let ahead = active.len.max(MIN_PREALLOCATE).min(most);
        let start = prewrite.done_to.get().max(active.len);
        if start >= active.len.saturating_add(ahead / 2) {
            return true;
        }
        let page = page_size();
        let last = self.config.segment_size.div_ceil(page).saturating_mul(page);
        let end = active
            .len
            .saturating_add(ahead)
            .div_ceil(page)
            .saturating_mul(page)
            .min(last);
        if end <= start {
            return true;
        }
        prewrite.running.set(Some((start, end)));
        let (file, prewrite, path) = (active.file.clone(), prewrite.clone(), active.path.clone());
        glommio::spawn_local(async move {
            let result = file.prewrite(start, end).await;
            prewrite.running.set(None);
            match result {
                Ok(()) => prewrite.done_to.set(prewrite.done_to.get().max(end)),
                Err(err) => {
                    // Appends go on into blocks they allocate themselves; the log is fine.
                    tracing::warn!(path = %path.display(), %err, start, end, "writing zeros ahead of a segment's end failed; not tried again for it");
                    prewrite.failed.set(true);
                }
            }
            prewrite.finished.notify_all();
        })
        .detach();
        true
    }

    /// Creates segment `base_offset`, writes its schema message and makes the new directory
    /// entry durable (a later acks=-1 fsync of the file alone would not cover the entry).
    async fn create_segment(&self, base_offset: u64, schema: &SchemaRef) -> Result<(), LogError> {
        // A segment name may only appear once every segment before it is durable.
        self.roll_finished().await?;
        let segment = self
            .new_segment_file(segment_path(&self.dir, base_offset), base_offset, schema)
            .await?;
        sync_directory(&*self.store, &self.dir).await?;
        self.state.borrow_mut().active = Some(segment);
        Ok(())
    }

    /// Creates the file `path` for segment `base_offset` and writes its schema message.
    async fn new_segment_file(
        &self,
        path: PathBuf,
        base_offset: u64,
        schema: &SchemaRef,
    ) -> Result<ActiveSegment<S::File>, LogError> {
        let header = schema_message(schema)?;
        let file = self
            .store
            .create(&path)
            .await
            .map_err(|e| LogError::io(&path, "create", e))?;
        let header_len = header.len() as u64;
        if let Err(err) = write_all(&file, header, 0).await {
            // Nothing references the file yet; remove it so recovery does not see a stray.
            drop(file);
            let _ = self.store.remove(&path).await;
            return Err(LogError::io(&path, "write schema", err));
        }
        Ok(ActiveSegment {
            file: Rc::new(file),
            path,
            base_offset,
            len: header_len,
            schema: schema.clone(),
            written_back: 0,
            write_back_from: 0,
            preallocated_to: header_len,
            prewrite: Prewrite::new(header_len),
        })
    }

    /// Closes the active segment and opens the next one without waiting for the disk: writes
    /// the end-of-stream marker, moves the segment to the closed list, creates the next segment
    /// (at `next_offset`, with `schema`) under its pending name, and spawns [`finish_roll`],
    /// which fsyncs the closed segment, renames the new one to its segment name and fsyncs the
    /// directory. Until it is done, group commit counts nothing durable past the closed
    /// segment's end. A roll while the previous roll's task still runs waits for it first.
    async fn roll(&self, schema: &SchemaRef) -> Result<(), LogError> {
        let started = std::time::Instant::now();
        let result = self.roll_from(schema, started).await;
        let mut time = self.roll_time.get();
        time.total += started.elapsed();
        self.roll_time.set(time);
        result
    }

    /// The work of [`BucketLog::roll`], which started at `started`.
    async fn roll_from(&self, schema: &SchemaRef, started: std::time::Instant) -> Result<(), LogError> {
        let pending = self.state.borrow().rolling.is_some();
        let waited = self.roll_finished().await;
        if pending {
            let mut time = self.roll_time.get();
            time.waiting_for_previous += started.elapsed();
            self.roll_time.set(time);
        }
        waited?;
        // The closed segment's fsync must not run beside a group fsync of the same descriptor:
        // wait for the one in flight, and start none until the roll's own is under way.
        self.group_sync_finished().await?;
        let _closing = Closing::enter(&self.commit);
        let (file, path, len, prewrite, empty) = {
            let state = self.state.borrow();
            let Some(active) = state.active.as_ref() else {
                return Ok(());
            };
            (
                active.file.clone(),
                active.path.clone(),
                active.len,
                active.prewrite.clone(),
                active.base_offset == state.next_offset,
            )
        };
        if empty {
            // A segment of no rows (its first append failed, or recovery cut a torn first
            // message) is not closed: the next segment would take its base offset, so its
            // name, and the closed list would hold a segment the file system no longer has
            // (retention would then delete the live one). The append that rolls creates the
            // segment afresh under the same name with its own schema (`create_segment`
            // truncates the file); nothing of it was acknowledged.
            prewrite.clear_below(u64::MAX).await;
            self.state.borrow_mut().active = None;
            return Ok(());
        }
        // No zeros may land after the marker once the segment is truncated to it.
        prewrite.clear_below(u64::MAX).await;
        if let Err(err) = write_all(&*file, END_OF_STREAM.to_vec(), len).await {
            if file.truncate(len).await.is_err() {
                self.fail();
            }
            return Err(LogError::io(&path, "write end-of-stream", err));
        }
        let base_offset = self.state.borrow().next_offset;
        // If this fails the bucket has no active segment; the next append creates one under
        // its segment name once this roll is finished (`create_segment`).
        let created = self
            .new_segment_file(pending_segment_path(&self.dir, base_offset), base_offset, schema)
            .await;
        let end = {
            let mut state = self.state.borrow_mut();
            let active = state.active.take().expect("checked above");
            let info = SegmentInfo {
                base_offset: active.base_offset,
                end_offset: state.next_offset,
                last_append: state.active_last_append,
            };
            state.closed.push_back(info);
            let end = state.next_offset;
            state.rolling = Some(PendingRoll { end });
            end
        };
        let created = created.map(|segment| {
            self.state.borrow_mut().active = Some(segment);
        });
        let task = glommio::spawn_local(finish_roll(FinishRoll {
            store: self.store.clone(),
            dir: self.dir.clone(),
            state: self.state.clone(),
            commit: self.commit.clone(),
            on_sync: self.on_sync.clone(),
            closed: file,
            closed_path: path,
            closed_len: len + END_OF_STREAM.len() as u64,
            end,
        }));
        // The previous roll's task is done (awaited above); dropping its handle is a no-op.
        *self.roll_task.borrow_mut() = Some(task);
        created
    }

    /// Resolves once rows `[0, offset)` are durable (fsync'd): what acks=-1 waits for. Pass the
    /// `next_offset` of an `AppendOutcome`. Concurrent callers share fsyncs (group commit).
    /// With `log.flush.policy=never` it resolves at once (the OS flushes when it likes).
    pub async fn sync_to(&self, offset: u64) -> Result<(), LogError> {
        if self.config.flush_policy == FlushPolicy::Never {
            return self.check_not_failed();
        }
        loop {
            self.check_not_failed()?;
            let written = self.state.borrow().next_offset;
            // Rows that are not written cannot be synced; callers pass an appended offset.
            let wanted = offset.min(written);
            if self.commit.durable.get() >= wanted {
                return Ok(());
            }
            // While a roll's background fsync runs, rows up to the closed segment's end become
            // durable only when it is done, and rows after it (in the new segment) only with
            // a later group fsync: the new segment's name is not durable before that task.
            if self.commit.in_flight.get()
                || self.commit.closing.get()
                || self.state.borrow().rolling.is_some()
            {
                let seen = self.commit.completions.generation();
                self.commit.completions.changed(seen).await;
                continue;
            }
            self.lead_sync(written).await?;
        }
    }

    /// One group fsync covering every row written before it started.
    async fn lead_sync(&self, target: u64) -> Result<(), LogError> {
        let active = {
            let state = self.state.borrow();
            state.active.as_ref().map(|a| (a.file.clone(), a.path.clone()))
        };
        let Some((file, path)) = active else {
            // No active segment: the last roll fsync'd everything written.
            self.commit.durable.set(self.commit.durable.get().max(target));
            return Ok(());
        };
        self.commit.in_flight.set(true);
        self.commit.syncs.set(self.commit.syncs.get() + 1);
        let result = self.sync_file(&file).await;
        self.commit.in_flight.set(false);
        match result {
            Ok(()) => {
                if self.commit.durable.get() < target {
                    self.commit.durable.set(target);
                }
                self.commit.completions.notify_all();
                Ok(())
            }
            Err(err) => {
                self.fail();
                Err(LogError::io(&path, "fsync", err))
            }
        }
    }

    /// Deletes segments, oldest first, whose newest row was appended more than `table.log.ttl`
    /// before `now`. Returns how many segments were deleted.
    ///
    /// The last segment file is never deleted (it carries the next offset across restarts).
    /// So when every closed segment is gone and the active segment holds rows, all older than
    /// the TTL, the active segment is rolled first (the roll of appends: end-of-stream marker,
    /// the next segment created empty at the next offset, its background fsync, rename and
    /// directory fsync, which this waits for) and is then deleted like any closed segment, as
    /// Kafka rolls its active segment when every segment is past `retention.ms`. An active
    /// segment of no rows is never rolled. Once per check: rows appended meanwhile wait for the
    /// next one. Before the last closed segment is deleted, the active segment's file (its
    /// schema message, at least) is fsync'd unless group commit already did: it is then the
    /// only file that says where the log goes on.
    ///
    /// One segment at a time: under the append permit it is chosen and taken off the log (the
    /// log start offset moves first, so scans stop looking at it), then the permit is given
    /// back and the file is removed by the store ([`GlommioStore`] unlinks on the core's
    /// blocking thread: freeing a large file's blocks takes a while), and the task yields
    /// before the next one, so neither this bucket's appends nor the core's other work wait
    /// for the files.
    pub async fn enforce_retention(&self, now: SystemTime) -> Result<usize, LogError> {
        let Some(ttl) = self.retention.get() else {
            return Ok(0);
        };
        let expired =
            |last_append: SystemTime| last_append.checked_add(ttl).is_some_and(|expiry| expiry <= now);
        let mut deleted = 0;
        let mut rolled = false;
        loop {
            let step = {
                let _permit = self.exclusive().await?;
                // A failed roll (its fsync, rename or directory fsync) left the next segment
                // under its pending name, which recovery removes: the segment before it must
                // stay. A log that failed while earlier files were being removed (the task
                // yields) keeps the rest; those removed stay removed and are counted.
                match self.check_not_failed() {
                    Err(err) if deleted == 0 => return Err(err),
                    Err(_) => break,
                    Ok(()) => {}
                }
                let step = {
                    let state = self.state.borrow();
                    // A later file with its segment name: not the active segment while a roll is
                    // finishing (it has its pending name until then).
                    let keeps_a_later_file =
                        state.closed.len() > 1 || (state.active.is_some() && state.rolling.is_none());
                    match (state.closed.front(), state.active.as_ref()) {
                        (Some(oldest), active) if keeps_a_later_file => {
                            if expired(oldest.last_append) {
                                // The active segment stays as the only file: its schema message
                                // (and its rows) must be durable before this one goes, unless a
                                // group fsync of it already made them so.
                                let sync_active = state.closed.len() == 1
                                    && active.is_some_and(|a| self.commit.durable.get() <= a.base_offset);
                                RetentionStep::Delete {
                                    base_offset: oldest.base_offset,
                                    sync_active,
                                }
                            } else {
                                RetentionStep::Done
                            }
                        }
                        (None, Some(active))
                            if !rolled
                                && active.base_offset < state.next_offset
                                && expired(state.active_last_append) =>
                        {
                            RetentionStep::Roll(active.schema.clone())
                        }
                        _ => RetentionStep::Done,
                    }
                };
                match step {
                    RetentionStep::Done => break,
                    RetentionStep::Roll(schema) => {
                        rolled = true;
                        // Not an append's roll: its time is not the appends' (`take_roll_time`).
                        let roll_time = self.roll_time.get();
                        let result = self.roll_from(&schema, std::time::Instant::now()).await;
                        self.roll_time.set(roll_time);
                        if let Err(err) = result {
                            if deleted == 0 {
                                return Err(err);
                            }
                            tracing::warn!(dir = %self.dir.display(), %err, "retention could not roll the expired active segment");
                            break;
                        }
                        tracing::info!(dir = %self.dir.display(), "retention rolled the active segment: all its rows expired");
                        None
                    }
                    RetentionStep::Delete {
                        base_offset,
                        sync_active,
                    } => {
                        if sync_active {
                            if let Err(err) = self.sync_active_segment().await {
                                if deleted == 0 {
                                    return Err(err);
                                }
                                break;
                            }
                        }
                        // Move the start first: scans stop looking at the segment before it
                        // disappears. The permit was held since the choice: still the oldest.
                        let mut state = self.state.borrow_mut();
                        let oldest = state.closed.pop_front().expect("chosen under the permit");
                        debug_assert_eq!(oldest.base_offset, base_offset);
                        state.log_start_offset = oldest.end_offset;
                        self.stats
                            .log_start_offset
                            .store(oldest.end_offset, Ordering::Release);
                        Some(base_offset)
                    }
                }
            };
            let Some(base_offset) = step else {
                // Rolled: the closed segment may go once its roll is finished (the new segment
                // has its name). A failure fails the log: the next turn says so.
                let _ = self.roll_finished().await;
                continue;
            };
            let path = segment_path(&self.dir, base_offset);
            self.store
                .remove(&path)
                .await
                .map_err(|e| LogError::io(&path, "remove", e))?;
            deleted += 1;
            // Between two files the core's other ready tasks run first (this bucket's appends
            // among them: the permit is free). Sockets were polled while the unlink ran on the
            // blocking thread. Not `sched::yield_to_io`: its 1 µs timer may have expired by its
            // first poll, and then it does not yield at all.
            futures_lite::future::yield_now().await;
        }
        if deleted > 0 {
            sync_directory(&*self.store, &self.dir).await?;
            tracing::info!(dir = %self.dir.display(), deleted, "retention deleted log segments");
        }
        Ok(deleted)
    }

    /// Fsyncs the active segment's file (retention, before it deletes the last closed
    /// segment), as a roll fsyncs the segment it closes: not beside a group fsync of the same
    /// descriptor, and none starts meanwhile. A failure fails the log.
    async fn sync_active_segment(&self) -> Result<(), LogError> {
        self.group_sync_finished().await?;
        let _closing = Closing::enter(&self.commit);
        let active = {
            let state = self.state.borrow();
            state.active.as_ref().map(|a| (a.file.clone(), a.path.clone()))
        };
        if let Some((file, path)) = active {
            if let Err(err) = self.sync_file(&file).await {
                self.fail();
                return Err(LogError::io(&path, "fsync", err));
            }
        }
        Ok(())
    }

    /// Makes everything written durable (graceful shutdown). The active segment stays open (no
    /// end-of-stream marker): a restart keeps appending to it.
    pub async fn close(&self) -> Result<(), LogError> {
        let _permit = self.exclusive().await?;
        self.roll_finished().await?;
        let active = self
            .state
            .borrow()
            .active
            .as_ref()
            .map(|a| (a.file.clone(), a.path.clone(), a.len, a.prewrite.clone()));
        if let Some((file, path, len, prewrite)) = &active {
            prewrite.clear_below(u64::MAX).await;
            release_preallocated(&**file, path, *len).await;
        }
        let written = self.state.borrow().next_offset;
        if self.commit.durable.get() >= written {
            return Ok(());
        }
        // Not beside a group fsync of the same descriptor (see `CommitState::closing`).
        self.group_sync_finished().await?;
        if self.commit.durable.get() >= written {
            return Ok(());
        }
        if let Some((file, path, _, _)) = active {
            self.sync_file(&file)
                .await
                .map_err(|e| LogError::io(&path, "fsync", e))?;
        }
        self.commit.durable.set(written);
        self.commit.completions.notify_all();
        Ok(())
    }
}

/// What a stored message adds to its Arrow buffers, about: metadata and padding.
const MESSAGE_METADATA_HINT: usize = 1 << 10;

/// About how many bytes `batch`'s message takes at most: its Arrow buffers and metadata.
fn message_size_hint(batch: &RecordBatch) -> usize {
    let buffers: usize = batch.columns().iter().map(|c| c.get_buffer_memory_size()).sum();
    buffers + MESSAGE_METADATA_HINT
}

/// The least `BucketLog::preallocate` asks for: 64 KiB.
pub const MIN_PREALLOCATE: u64 = 64 << 10;

/// Truncates a segment to its own length `len`, which releases the blocks preallocated past
/// it. A failure only keeps them (until the file is deleted): logged, never fatal.
async fn release_preallocated<F: SegmentFile>(file: &F, path: &Path, len: u64) {
    if let Err(err) = file.truncate(len).await {
        tracing::warn!(path = %path.display(), %err, "releasing a segment's preallocated blocks failed");
    }
}

/// `file.sync()`, its duration told to `observer`.
async fn timed_sync<F: SegmentFile>(
    file: &F,
    observer: Option<&dyn Fn(std::time::Duration)>,
) -> std::io::Result<()> {
    let started = std::time::Instant::now();
    let result = file.sync().await;
    if let Some(observer) = observer {
        observer(started.elapsed());
    }
    result
}

/// Marks the log failed and wakes every waiter (they then get `LogError::Failed`).
fn fail<F>(state: &RefCell<State<F>>, commit: &CommitState) {
    state.borrow_mut().failed = true;
    commit.completions.notify_all();
}

/// Marks a roll closing the active segment ([`CommitState::closing`]) while alive; waiters
/// for a group fsync are woken when it ends.
struct Closing<'a>(&'a CommitState);

impl<'a> Closing<'a> {
    fn enter(commit: &'a CommitState) -> Self {
        commit.closing.set(true);
        Closing(commit)
    }
}

impl Drop for Closing<'_> {
    fn drop(&mut self) {
        self.0.closing.set(false);
        self.0.completions.notify_all();
    }
}

/// What the background task finishing a roll needs (all shared with the log).
struct FinishRoll<S: SegmentStore> {
    store: Rc<S>,
    dir: PathBuf,
    state: Rc<RefCell<State<S::File>>>,
    commit: Rc<CommitState>,
    on_sync: Option<Rc<dyn Fn(std::time::Duration)>>,
    /// The segment just closed, and its path.
    closed: Rc<S::File>,
    closed_path: PathBuf,
    /// Its length in bytes (end-of-stream marker included).
    closed_len: u64,
    /// Its exclusive end offset.
    end: u64,
}

/// Finishes a roll off the bucket's write slot: fsyncs the closed segment, renames the new
/// segment from its pending name to its segment name and fsyncs the directory; then rows up
/// to the closed segment's end are durable and group commit may fsync the new segment. A
/// failure fails the log (every waiter gets an error, never a false "durable").
async fn finish_roll<S: SegmentStore>(roll: FinishRoll<S>) {
    let result = finish_roll_io(&roll).await;
    roll.state.borrow_mut().rolling = None;
    match result {
        Ok(()) => {
            if roll.commit.durable.get() < roll.end {
                roll.commit.durable.set(roll.end);
            }
            roll.commit.completions.notify_all();
        }
        Err(err) => {
            tracing::error!(
                dir = %roll.dir.display(),
                %err,
                "finishing a segment roll failed; the bucket log refuses appends until reopened"
            );
            fail(&roll.state, &roll.commit);
        }
    }
}

async fn finish_roll_io<S: SegmentStore>(roll: &FinishRoll<S>) -> Result<(), LogError> {
    release_preallocated(&*roll.closed, &roll.closed_path, roll.closed_len).await;
    timed_sync(&*roll.closed, roll.on_sync.as_deref())
        .await
        .map_err(|e| LogError::io(&roll.closed_path, "fsync", e))?;
    // The roll's new segment, unless creating it failed (then there is nothing to rename).
    let pending = {
        let state = roll.state.borrow();
        state
            .active
            .as_ref()
            .filter(|a| a.base_offset == roll.end && a.path == pending_segment_path(&roll.dir, roll.end))
            .map(|a| a.path.clone())
    };
    let Some(pending) = pending else {
        return Ok(());
    };
    let final_path = segment_path(&roll.dir, roll.end);
    roll.store
        .rename(&pending, &final_path)
        .await
        .map_err(|e| LogError::io(&pending, "rename", e))?;
    if let Some(active) = roll.state.borrow_mut().active.as_mut() {
        if active.base_offset == roll.end {
            active.path = final_path;
        }
    }
    sync_directory(&*roll.store, &roll.dir).await
}

/// One batch for [`BucketLog::append_many`].
pub struct AppendItem<'a> {
    pub batch: &'a RecordBatch,
    /// Custom-metadata pairs stored with the batch's IPC message (see
    /// [`BucketLog::append_tagged`]).
    pub tags: &'a [(&'a str, &'a str)],
    /// The batch's compression; `None`: the log's current one ([`BucketLog::set_compression`]).
    pub compression: Option<ArrowCompression>,
}

fn same_schema(a: &SchemaRef, b: &SchemaRef) -> bool {
    Arc::ptr_eq(a, b) || **a == **b
}

/// `error` for the first of `count` items, and for each other one an error naming the same
/// thing (an I/O error keeps its path, operation, kind and message).
fn fail_all(error: LogError, count: usize) -> Vec<Result<AppendOutcome, LogError>> {
    let mut out: Vec<Result<AppendOutcome, LogError>> = (1..count).map(|_| Err(error.duplicate())).collect();
    if count > 0 {
        out.insert(0, Err(error));
    }
    out
}

/// Writes all of `bytes` at `pos` in one call. A short write (only seen when the disk is full
/// or a quota is hit) is an error: the caller truncates the partial message away, which is
/// cheaper than keeping a copy of every batch around to retry the remainder. Its cause is
/// what writing on answers: one byte at the first position not written (within what the
/// caller truncates); its error (`No space left on device`) is reported with the short write,
/// of its kind.
async fn write_all<F: SegmentFile>(file: &F, bytes: Vec<u8>, pos: u64) -> std::io::Result<()> {
    let len = bytes.len();
    let written = file.write_at(bytes, pos).await?;
    if written != len {
        let short = format!("short write: {written} of {len} bytes");
        return Err(match file.write_at(vec![0], pos + written as u64).await {
            Err(cause) => std::io::Error::new(cause.kind(), format!("{short}, then: {cause}")),
            Ok(_) => std::io::Error::new(std::io::ErrorKind::WriteZero, short),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int32Array, Int64Array, StringArray};
    use arrow_ipc::writer::{write_message, DictionaryTracker, IpcDataGenerator, IpcWriteContext};
    use arrow_schema::{DataType, Field, Schema};

    /// What a writer of the batch's own schema frames: one fresh encoder, one message.
    fn expected(batch: &RecordBatch, compression: ArrowCompression, tags: &[(&str, &str)]) -> Vec<u8> {
        let options = compression.write_options();
        let (_, encoded) = IpcDataGenerator::default()
            .encode(
                batch,
                &mut DictionaryTracker::new(false),
                &options,
                &mut IpcWriteContext::default(),
            )
            .unwrap();
        let mut message = Vec::new();
        write_message(&mut message, encoded, &options).unwrap();
        super::super::checksum::seal_with(&message, tags).unwrap()
    }

    #[test]
    fn the_shared_write_contexts_frame_batches_of_any_schema_as_their_own_writer_would() {
        let ids = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)])),
            vec![Arc::new(Int64Array::from_iter_values(0..300))],
        )
        .unwrap();
        let names = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("name", DataType::Utf8, true),
                Field::new("n", DataType::Int32, true),
            ])),
            vec![
                Arc::new(StringArray::from_iter(
                    (0..200).map(|i| (i % 3 != 0).then(|| format!("name {i}"))),
                )),
                Arc::new(Int32Array::from_iter((0..200).map(|i| (i % 5 != 0).then_some(i)))),
            ],
        )
        .unwrap();
        let tags = [("kafluss.producer", "7:0:3")];
        // Level 3's frames are the encoder's own (minimum match 5): `log/encode.rs` reads them
        // back; the other levels are zstd's, byte for byte.
        for compression in [
            ArrowCompression::None,
            ArrowCompression::Lz4Frame,
            ArrowCompression::Zstd { level: 1 },
            ArrowCompression::Zstd { level: 9 },
        ] {
            for batch in [&ids, &names, &ids.slice(10, 20), &names] {
                let mut out = b"before".to_vec();
                encode_message_into(&mut out, batch, compression, &tags, &mut CodecHistory::default())
                    .unwrap();
                assert_eq!(&out[..6], b"before");
                assert_eq!(
                    &out[6..],
                    &expected(batch, compression, &tags)[..],
                    "{compression:?}"
                );
            }
        }
    }
}
