//! The bucket actors of one core: one task per open bucket, fed by a bounded queue, so appends
//! to a bucket are serialized without locks, and a slow disk fills the queue, which stops the
//! senders, which stop reading sockets.
//!
//! [`Buckets`] is generic over where outcomes go ([`Reply`]): the runtime answers over the
//! cross-core mesh or a local channel; a test answers on a local channel and needs nothing else.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use glommio::channels::local_channel::{self, LocalSender};
use glommio::sync::Gate;

use super::pipeline::{close_bucket, Appender, BucketState, OwnerResult};
use super::{AppendError, AppendJob, Reply};
use crate::catalog::model::{CatalogSnapshot, TableInfo};
use crate::idhash::{IdMap, IdSet};

/// Capacity of one bucket's queue of pending appends.
pub const BUCKET_QUEUE: usize = 64;

/// At most this many queued jobs of a bucket are appended as one group (one file write).
pub const GROUP_JOBS: usize = BUCKET_QUEUE;

/// How often a core waiting for a dropped table's logs to close says so.
const CLOSE_WAIT_LOG_INTERVAL: Duration = Duration::from_secs(10);

type Queue<R> = Rc<LocalSender<(AppendJob, R)>>;

/// The bucket actors of one core.
pub struct Buckets<R: Reply> {
    appender: Rc<Appender>,
    queues: RefCell<IdMap<(u64, u32), Queue<R>>>,
    /// Buckets whose actor runs (until its log is closed).
    open: RefCell<IdSet<(u64, u32)>>,
    /// Tables dropped while this server runs: their buckets are never reopened.
    dropped: RefCell<IdSet<u64>>,
    /// Bucket actors enter it; shutdown waits for them to flush and close their logs.
    tasks: Gate,
}

impl<R: Reply> Buckets<R> {
    pub fn new(appender: Rc<Appender>) -> Rc<Self> {
        Rc::new(Self {
            appender,
            queues: RefCell::new(IdMap::default()),
            open: RefCell::new(IdSet::default()),
            dropped: RefCell::new(IdSet::default()),
            tasks: Gate::new(),
        })
    }

    pub fn appender(&self) -> &Rc<Appender> {
        &self.appender
    }

    /// Queues a job for its bucket's actor (started on first use); answers `reply` at once
    /// when the bucket cannot take it (table dropped, shutting down, actor gone).
    pub async fn submit(self: &Rc<Self>, job: AppendJob, reply: R) {
        let Some(queue) = self.actor(&job.table, job.bucket, None) else {
            let error = if self.dropped.borrow().contains(&job.table.id) {
                AppendError::TableDropped(job.table.path())
            } else {
                AppendError::ShuttingDown
            };
            reply.send(Err(error)).await;
            return;
        };
        // The actor is gone (table dropped while queued): answer so nobody waits forever.
        if let Err(glommio::GlommioError::Closed(glommio::ResourceType::Channel((_, reply)))) =
            queue.send((job, reply)).await
        {
            reply.send(Err(AppendError::BucketClosed)).await;
        }
    }

    /// Opens (recovering) every bucket of `snapshot` that `owns` says is this core's and that
    /// has data on disk, and starts its actor: scans then see every durable row at once.
    pub async fn open_existing(self: &Rc<Self>, snapshot: &CatalogSnapshot, owns: impl Fn(u64, u32) -> bool) {
        for table in snapshot.tables() {
            let table_dir = match table.relative_dir() {
                Ok(dir) => self.appender.config().data_dir.join(dir),
                Err(e) => {
                    tracing::error!("cannot recover the buckets of {}: {e}", table.path());
                    continue;
                }
            };
            for bucket in 0..table.bucket_count {
                if !owns(table.id, bucket) || !crate::log::bucket_dir(&table_dir, bucket).exists() {
                    continue;
                }
                // An actor already runs (and opened the log): a second recovery of the same
                // files would truncate what it appends meanwhile.
                if self.queues.borrow().contains_key(&(table.id, bucket)) {
                    continue;
                }
                match self.appender.open_bucket(table, bucket).await {
                    Ok(state) => {
                        let _ = self.actor(table, bucket, Some(state));
                    }
                    Err(e) => {
                        tracing::error!("cannot recover bucket {bucket} of {}: {e}", table.path())
                    }
                }
            }
        }
    }

    /// The queue of the actor of `table`'s `bucket`, started (and its log opened) on first
    /// use. None for a dropped table or while shutting down.
    fn actor(
        self: &Rc<Self>,
        table: &Arc<TableInfo>,
        bucket: u32,
        opened: Option<BucketState>,
    ) -> Option<Queue<R>> {
        let key = (table.id, bucket);
        if let Some(queue) = self.queues.borrow().get(&key) {
            return Some(queue.clone());
        }
        if self.dropped.borrow().contains(&table.id) {
            return None;
        }
        let pass = self.tasks.enter().ok()?;
        let (tx, rx) = local_channel::new_bounded::<(AppendJob, R)>(BUCKET_QUEUE);
        let tx = Rc::new(tx);
        self.queues.borrow_mut().insert(key, tx.clone());
        self.open.borrow_mut().insert(key);
        let buckets = self.clone();
        let table = table.clone();
        glommio::spawn_local(async move {
            let _pass = pass;
            let appender = buckets.appender.clone();
            let opened = match opened {
                Some(state) => Ok(state),
                None => appender.open_bucket(&table, bucket).await,
            };
            let mut state: Option<BucketState> = match opened {
                Ok(state) => Some(state),
                Err(e) => {
                    // Retried by the next append; each failing append answers KAFKA_STORAGE_ERROR.
                    appender.log_storage_error(&table, format_args!("cannot open bucket {bucket}: {e}"));
                    None
                }
            };
            while let Some(first) = rx.recv().await {
                // Every job that queued meanwhile (while the previous group was written) joins
                // this group: one file write for all of them.
                let mut jobs = vec![first];
                while jobs.len() < GROUP_JOBS {
                    match futures_lite::future::poll_once(rx.recv()).await {
                        Some(Some(next)) => jobs.push(next),
                        _ => break,
                    }
                }
                let (jobs, replies): (Vec<AppendJob>, Vec<R>) = jobs.into_iter().unzip();
                let outcomes = appender.append_group(&mut state, jobs).await;
                for (outcome, reply) in outcomes.into_iter().zip(replies) {
                    match outcome {
                        OwnerResult::Done(outcome) => reply.send(outcome).await,
                        // acks=-1 waits for group commit in its own task, so the next append
                        // of this bucket is not held behind the fsync and shares the next one.
                        OwnerResult::AfterSync(wait) => {
                            glommio::spawn_local(async move {
                                let outcome = wait.await;
                                reply.send(outcome).await;
                            })
                            .detach();
                        }
                    }
                }
            }
            if let Some(state) = state {
                close_bucket(state).await;
            }
            buckets.open.borrow_mut().remove(&key);
        })
        .detach();
        Some(tx)
    }

    /// Whether `table_id` was dropped while this server runs (this core has seen the DROP).
    pub fn is_dropped(&self, table_id: u64) -> bool {
        self.dropped.borrow().contains(&table_id)
    }

    /// Whether some bucket log of `table_id` is still open on this core.
    pub fn has_open_logs(&self, table_id: u64) -> bool {
        self.open.borrow().iter().any(|(id, _)| *id == table_id)
    }

    /// Closes every bucket actor of `table_id` on this core and waits, as long as that takes,
    /// until their queued jobs finished and their logs are closed, logging every
    /// `CLOSE_WAIT_LOG_INTERVAL` while it waits. The table id is remembered so that a job
    /// still carrying the dropped table cannot reopen (and re-create) its bucket; ids are never
    /// reused, so the set only grows by one id per dropped table.
    pub async fn close_table(&self, table_id: u64) {
        self.dropped.borrow_mut().insert(table_id);
        self.queues.borrow_mut().retain(|(id, _), _| *id != table_id);
        self.appender.telemetry().forget_table(table_id);
        let started = Instant::now();
        let mut next_log = started + CLOSE_WAIT_LOG_INTERVAL;
        while self.has_open_logs(table_id) {
            if Instant::now() >= next_log {
                tracing::warn!(
                    "bucket logs of dropped table {table_id} still open after {:?}; waiting for them to close",
                    started.elapsed()
                );
                next_log += CLOSE_WAIT_LOG_INTERVAL;
            }
            glommio::timer::sleep(Duration::from_millis(5)).await;
        }
        // Its actors are done: nothing of the table is converted here again.
        self.appender.forget_table(table_id);
    }

    /// Shutdown: closing every queue ends each actor after its queued jobs, which flushes and
    /// closes its log; resolves once all have.
    pub async fn close_all(&self) {
        let queues: Vec<_> = self.queues.borrow_mut().drain().collect();
        drop(queues);
        let _ = self.tasks.close().await;
    }
}
