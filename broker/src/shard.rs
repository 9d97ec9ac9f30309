//! What one core owns: its Kafka listeners and connections, the bucket logs routed to it
//! (`routing::owner_core`), their converters, and its end of the mesh to the other cores.
//!
//! A produce partition whose bucket this core owns is appended here directly; any other goes to
//! its owner over the bounded `append` mesh as an owned [`AppendJob`] (the still-compressed
//! batch bytes and an `Arc` of the table), and the [`PartitionOutcome`] comes back over the
//! `reply` mesh to the connection's core. Requests and replies use separate meshes so that a
//! core blocked on a full request channel can always drain replies: no cycle can deadlock.
//! Each bucket has one writer task (its actor) fed by a bounded local queue, so appends to a
//! bucket are serialized without locks and a slow disk fills the queue, which stops the
//! senders, which stop reading sockets.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use glommio::channels::channel_mesh::{Full, MeshBuilder, Receivers, Senders};
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use glommio::net::TcpListener;
use glommio::sync::{Gate, Semaphore};

use crate::catalog::model::TableInfo;
use crate::config::ServerConfig;
use crate::handlers::produce::{AppendJob, PartitionOutcome};
use crate::handlers::produce_owner::{self as produce, BucketState, PlanCache};
use crate::metrics::{CoreMetrics, Metrics, TableSeries, TableSeriesCache};
use crate::repeat_log::{RepeatLimiter, Verdict};
use crate::server::Runtime;
use kafluss_convert::ConversionPlan;
use kafluss_convert::ConvertError;
use kafluss_convert::JsonScratch;
use kafluss_convert::KafkaRecord;

/// Capacity of each mesh channel between two cores, in jobs.
pub const MESH_CAPACITY: usize = 256;
/// Capacity of one bucket's queue of pending appends.
const BUCKET_QUEUE: usize = 64;

/// A Kafka listener as every core serves it.
#[derive(Debug, Clone)]
pub struct KafkaListener {
    pub name: String,
    /// The concrete bound address (the port is resolved when the config said 0).
    pub bound: std::net::SocketAddr,
    /// host and port clients are told to connect to (Metadata brokers).
    pub advertised_host: String,
    pub advertised_port: u16,
    pub security: kafluss_auth::ListenerSecurity,
}

/// Process-wide state every core reads; mutation happens through atomics and `ArcSwap`s
/// owned by the runtime pieces inside.
pub struct Shared {
    pub config: ServerConfig,
    pub metrics: Arc<Metrics>,
    pub runtime: Runtime,
    pub kafka_listeners: Vec<KafkaListener>,
    pub open_connections: AtomicUsize,
    /// Set by the signal handler: stop accepting, drain, flush, exit.
    pub shutdown: Arc<AtomicBool>,
    /// Cores that finished draining their connections (they keep serving the mesh until all
    /// have, so that cross-core appends in flight complete).
    pub drained_cores: AtomicUsize,
}

/// A message on the append mesh.
pub struct MeshAppend {
    pub request_id: u64,
    pub job: AppendJob,
}

/// A message on the reply mesh.
pub struct MeshReply {
    pub request_id: u64,
    pub outcome: PartitionOutcome,
}

type BucketQueue = Rc<LocalSender<(AppendJob, ReplyTo)>>;

/// Where a bucket actor sends an outcome.
enum ReplyTo {
    Local(LocalSender<PartitionOutcome>),
    Remote { core: usize, request_id: u64 },
}

/// One core's state; `Rc`-shared by the core's tasks.
pub struct Shard {
    pub id: usize,
    pub cores: usize,
    pub shared: Arc<Shared>,
    append_tx: Senders<MeshAppend>,
    reply_tx: Senders<MeshReply>,
    pending: RefCell<HashMap<u64, LocalSender<PartitionOutcome>>>,
    next_request_id: Cell<u64>,
    buckets: RefCell<HashMap<(u64, u32), BucketQueue>>,
    /// Buckets whose actor runs (until its log is closed).
    open_buckets: RefCell<HashSet<(u64, u32)>>,
    /// Tables dropped while this server runs: their buckets are never reopened.
    dropped_tables: RefCell<HashSet<u64>>,
    /// Bucket actors enter it; shutdown waits for them to flush and close their logs.
    bucket_tasks: Gate,
    plans: RefCell<PlanCache>,
    json_scratch: RefCell<JsonScratch>,
    /// Never has permits; closed at shutdown, which wakes everyone waiting in `stopping`.
    stop: Rc<Semaphore>,
    stopped: Cell<bool>,
    /// Connections enter it; shutdown waits for it to empty.
    connections: Gate,
    /// Units are bytes of Kafka requests held on this core (`kafka.max-request-memory`): a
    /// connection reserves a request's size before reading its body and keeps the reservation
    /// until the answer is written.
    pub request_memory: Rc<Semaphore>,
    /// This core's handles on the per-table metric series.
    table_series: TableSeriesCache,
    /// Rate limit of refusal and storage-error log lines (`server.log-repeat-interval`).
    repeat_log: RefCell<RepeatLimiter>,
}

impl Shard {
    pub fn config(&self) -> &ServerConfig {
        &self.shared.config
    }

    pub fn metrics(&self) -> &CoreMetrics {
        self.shared.metrics.core(self.id)
    }

    pub fn runtime(&self) -> &Runtime {
        &self.shared.runtime
    }

    /// Runs `f` on the metric series of `table` (this core writes slot `self.id` of it).
    pub fn with_table_metrics<R>(&self, table: &TableInfo, f: impl FnOnce(&TableSeries) -> R) -> R {
        self.table_series
            .with(&self.shared.metrics, table.id, || table.path(), f)
    }

    /// Whether to log one more occurrence of `(table, reason)` now: `Some(suppressed)` to log
    /// (with the count of lines not logged since the key's last one), `None` to stay quiet.
    pub fn log_repeat(&self, table: &str, reason: &'static str) -> Option<u64> {
        match self
            .repeat_log
            .borrow_mut()
            .check((table, reason), std::time::Instant::now())
        {
            Verdict::Log { suppressed } => Some(suppressed),
            Verdict::Suppress => None,
        }
    }

    pub fn is_stopping(&self) -> bool {
        self.stopped.get()
    }

    /// Resolves once shutdown has begun.
    pub async fn stopping(&self) {
        // `acquire` fails only when the semaphore is closed; it never has permits.
        let _ = self.stop.acquire(1).await;
    }

    /// Hands one partition batch to the core that owns its bucket and returns where its
    /// outcome will arrive. The job is queued when this returns, so calling it in request
    /// order appends in request order; it waits only while the owner's queue is full
    /// (backpressure).
    pub async fn submit(self: &Rc<Self>, job: AppendJob) -> LocalReceiver<PartitionOutcome> {
        let owner = crate::routing::owner_core(job.table.id, job.bucket, self.cores);
        let (tx, rx) = local_channel::new_bounded(1);
        if owner == self.id {
            self.metrics().record_local_append();
            self.submit_local(job, ReplyTo::Local(tx)).await;
        } else {
            self.metrics().record_cross_core_append();
            let request_id = self.next_request_id.get();
            self.next_request_id.set(request_id.wrapping_add(1));
            self.pending.borrow_mut().insert(request_id, tx);
            if self
                .append_tx
                .send_to(owner, MeshAppend { request_id, job })
                .await
                .is_err()
            {
                if let Some(tx) = self.pending.borrow_mut().remove(&request_id) {
                    let _ = tx.try_send(PartitionOutcome::storage_error("the owner core is not reachable"));
                }
            }
        }
        rx
    }

    /// The conversion plan of `table`'s current version (cached per core).
    pub fn plan_for(&self, table: &Arc<TableInfo>) -> Result<Arc<ConversionPlan>, String> {
        self.plans.borrow_mut().get(table)
    }

    /// Converts records with this core's reusable JSON scratch space.
    pub fn convert<'a>(
        &self,
        plan: &ConversionPlan,
        records: Vec<KafkaRecord<'a>>,
    ) -> Result<arrow_array::RecordBatch, ConvertError> {
        let mut scratch = self.json_scratch.borrow_mut();
        plan.convert_batch_with(&mut scratch, records)
    }

    /// The queue of the actor of `table`'s `bucket` on this core, started (and its log opened)
    /// on first use. None while shutting down.
    fn bucket_actor(
        self: &Rc<Self>,
        table: &Arc<TableInfo>,
        bucket: u32,
        opened: Option<BucketState>,
    ) -> Option<BucketQueue> {
        let key = (table.id, bucket);
        if let Some(queue) = self.buckets.borrow().get(&key) {
            return Some(queue.clone());
        }
        if self.dropped_tables.borrow().contains(&table.id) {
            return None;
        }
        let pass = self.bucket_tasks.enter().ok()?;
        let (tx, rx) = local_channel::new_bounded::<(AppendJob, ReplyTo)>(BUCKET_QUEUE);
        let tx = Rc::new(tx);
        self.buckets.borrow_mut().insert(key, tx.clone());
        self.open_buckets.borrow_mut().insert(key);
        let shard = self.clone();
        let table = table.clone();
        glommio::spawn_local(async move {
            let _pass = pass;
            let opened = match opened {
                Some(state) => Ok(state),
                None => produce::open_bucket(&shard, &table, bucket).await,
            };
            let mut state: Option<BucketState> = match opened {
                Ok(state) => Some(state),
                Err(e) => {
                    // Retried by the next append; each failing append answers KAFKA_STORAGE_ERROR.
                    if let Some(suppressed) = shard.log_repeat(&table.path(), "storage") {
                        tracing::error!(
                            table = %table.path(),
                            suppressed,
                            "cannot open bucket {bucket}: {e}"
                        );
                    }
                    None
                }
            };
            while let Some((job, reply)) = rx.recv().await {
                match produce::append_on_owner(&shard, &mut state, job).await {
                    produce::OwnerResult::Done(outcome) => shard.reply(reply, outcome).await,
                    // acks=-1 waits for group commit in its own task, so the next append of
                    // this bucket is not held behind the fsync and shares the next one.
                    produce::OwnerResult::AfterSync(wait) => {
                        let shard = shard.clone();
                        glommio::spawn_local(async move {
                            let outcome = wait.await;
                            shard.reply(reply, outcome).await;
                        })
                        .detach();
                    }
                }
            }
            if let Some(state) = state {
                produce::close_bucket(state).await;
            }
            shard.open_buckets.borrow_mut().remove(&key);
        })
        .detach();
        Some(tx)
    }

    /// Opens (recovering) every bucket this core owns that has data on disk and starts its
    /// actor, before the core reports ready: scans then see every durable row at once.
    pub async fn open_existing_buckets(self: &Rc<Self>) {
        let snapshot = self.runtime().catalog.snapshot();
        for table in snapshot.tables() {
            let table_dir = self.config().data_dir.join(table.relative_dir());
            for bucket in 0..table.bucket_count {
                let owner = crate::routing::owner_core(table.id, bucket, self.cores);
                if owner != self.id || !crate::log::bucket_dir(&table_dir, bucket).exists() {
                    continue;
                }
                match produce::open_bucket(self, table, bucket).await {
                    Ok(state) => {
                        let _ = self.bucket_actor(table, bucket, Some(state));
                    }
                    Err(e) => {
                        tracing::error!("cannot recover bucket {bucket} of {}: {e}", table.path())
                    }
                }
            }
        }
    }

    /// Queues a job for its local bucket actor.
    async fn submit_local(self: &Rc<Self>, job: AppendJob, reply: ReplyTo) {
        let Some(queue) = self.bucket_actor(&job.table, job.bucket, None) else {
            let outcome = if self.dropped_tables.borrow().contains(&job.table.id) {
                PartitionOutcome::error(
                    kafluss_protocol::ErrorCode::UnknownTopicOrPartition,
                    format!("table {} was dropped", job.table.path()),
                )
            } else {
                PartitionOutcome::storage_error("the server is shutting down")
            };
            self.reply(reply, outcome).await;
            return;
        };
        // The actor is gone (table dropped while queued): answer so nobody waits forever.
        if let Err(glommio::GlommioError::Closed(glommio::ResourceType::Channel((_, reply)))) =
            queue.send((job, reply)).await
        {
            self.reply(reply, PartitionOutcome::storage_error("the bucket was closed"))
                .await;
        }
    }

    async fn reply(&self, reply: ReplyTo, outcome: PartitionOutcome) {
        match reply {
            ReplyTo::Local(tx) => {
                let _ = tx.try_send(outcome);
            }
            ReplyTo::Remote { core, request_id } => {
                let _ = self
                    .reply_tx
                    .send_to(core, MeshReply { request_id, outcome })
                    .await;
            }
        }
    }

    /// Closes every bucket actor of `table_id` on this core and waits (at most 10 s) until
    /// their queued jobs finished and their logs are closed. The table id is remembered so
    /// that a job still carrying the dropped table cannot reopen (and re-create) its bucket;
    /// ids are never reused, so the set only grows by one id per dropped table.
    pub async fn close_table(&self, table_id: u64) {
        self.dropped_tables.borrow_mut().insert(table_id);
        self.buckets.borrow_mut().retain(|(id, _), _| *id != table_id);
        self.table_series.forget(table_id);
        self.shared.metrics.forget_table(table_id);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while self.open_buckets.borrow().iter().any(|(id, _)| *id == table_id) {
            if std::time::Instant::now() > deadline {
                tracing::warn!("bucket logs of dropped table {table_id} still open after 10s");
                return;
            }
            glommio::timer::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// Everything a core needs to start, moved into its executor thread.
pub struct CoreStart {
    pub shared: Arc<Shared>,
    pub append_mesh: MeshBuilder<MeshAppend, Full>,
    pub reply_mesh: MeshBuilder<MeshReply, Full>,
    pub ready: crossbeam_channel::Sender<Result<usize, String>>,
    /// Told the core's index when `run_core` returns (or unwinds), so the main thread notices
    /// a core that died.
    pub exited: crossbeam_channel::Sender<usize>,
    pub control: crossbeam_channel::Receiver<crate::server::ControlMessage>,
}

/// Runs one core until shutdown: bind, join the meshes, serve, drain, flush.
pub async fn run_core(start: CoreStart) {
    let CoreStart {
        shared,
        append_mesh,
        reply_mesh,
        ready,
        exited,
        control,
    } = start;
    let _exit_notice = ExitNotice(exited, std::cell::Cell::new(usize::MAX));
    let mut listeners = Vec::new();
    for listener in &shared.kafka_listeners {
        match TcpListener::bind(listener.bound) {
            Ok(bound) => listeners.push((bound, Rc::new(listener.clone()))),
            Err(e) => {
                let _ = ready.send(Err(format!(
                    "cannot bind Kafka listener {} on {}: {e}",
                    listener.name, listener.bound
                )));
                return;
            }
        }
    }
    // glommio's mesh join can miss a cross-core wake-up and leave every core asleep (seen as a
    // start-up hang roughly once in twenty starts on a loaded 2-CPU machine). A reactor that
    // wakes up re-checks its shared channels, so a short ticker during the join makes a lost
    // notification cost milliseconds instead of forever. After start-up `watch_control` ticks.
    let join_ticker = glommio::spawn_local(async {
        loop {
            glommio::timer::sleep(Duration::from_millis(5)).await;
        }
    });
    tracing::debug!("core listeners bound; joining the append mesh");
    let (append_tx, append_rx) = match append_mesh.join().await {
        Ok(pair) => pair,
        Err(_) => {
            let _ = ready.send(Err("cannot join the core mesh".into()));
            return;
        }
    };
    tracing::debug!(
        core = append_tx.peer_id(),
        "joined the append mesh; joining the reply mesh"
    );
    let (reply_tx, reply_rx) = match reply_mesh.join().await {
        Ok(pair) => pair,
        Err(_) => {
            let _ = ready.send(Err("cannot join the core mesh".into()));
            return;
        }
    };
    join_ticker.cancel().await;
    let shard = Rc::new(Shard {
        id: append_tx.peer_id(),
        cores: append_tx.nr_consumers(),
        shared: shared.clone(),
        append_tx,
        reply_tx,
        pending: RefCell::new(HashMap::new()),
        next_request_id: Cell::new(0),
        buckets: RefCell::new(HashMap::new()),
        open_buckets: RefCell::new(HashSet::new()),
        dropped_tables: RefCell::new(HashSet::new()),
        bucket_tasks: Gate::new(),
        plans: RefCell::new(PlanCache::default()),
        json_scratch: RefCell::new(JsonScratch::default()),
        stop: Rc::new(Semaphore::new(0)),
        stopped: Cell::new(false),
        connections: Gate::new(),
        request_memory: Rc::new(Semaphore::new(shared.config.max_request_memory as u64)),
        table_series: TableSeriesCache::default(),
        repeat_log: RefCell::new(RepeatLimiter::new(
            shared.config.log_repeat_interval,
            shared.config.log_repeat_keys,
        )),
    });
    let mesh_tasks = spawn_mesh_receivers(&shard, append_rx, reply_rx);
    shard.open_existing_buckets().await;
    let control_task = glommio::spawn_local(watch_control(shard.clone(), control));
    let mut accept_tasks = Vec::new();
    for (listener, info) in listeners {
        accept_tasks.push(glommio::spawn_local(accept_loop(shard.clone(), listener, info)));
    }
    _exit_notice.1.set(shard.id);
    let _ = ready.send(Ok(shard.id));

    shard.stopping().await;
    for task in accept_tasks {
        task.await;
    }
    let _ = shard.connections.close().await;
    shared.drained_cores.fetch_add(1, Ordering::SeqCst);
    // Keep serving appends from cores still draining; bounded by their own drain.
    while shared.drained_cores.load(Ordering::SeqCst) < shard.cores {
        glommio::timer::sleep(Duration::from_millis(5)).await;
    }
    control_task.cancel().await;
    // Closing the bucket queues ends each actor after its queued jobs, which flushes the log.
    let queues: Vec<_> = shard.buckets.borrow_mut().drain().collect();
    drop(queues);
    let _ = shard.bucket_tasks.close().await;
    for task in mesh_tasks {
        task.cancel().await;
    }
}

fn spawn_mesh_receivers(
    shard: &Rc<Shard>,
    append_rx: Receivers<MeshAppend>,
    reply_rx: Receivers<MeshReply>,
) -> Vec<glommio::Task<()>> {
    let mut tasks = Vec::new();
    let append_rx = Rc::new(append_rx);
    let reply_rx = Rc::new(reply_rx);
    for peer in 0..shard.cores {
        if peer == shard.id {
            continue;
        }
        let (s, rx) = (shard.clone(), append_rx.clone());
        tasks.push(glommio::spawn_local(async move {
            while let Ok(Some(message)) = rx.recv_from(peer).await {
                s.submit_local(
                    message.job,
                    ReplyTo::Remote {
                        core: peer,
                        request_id: message.request_id,
                    },
                )
                .await;
            }
        }));
        let (s, rx) = (shard.clone(), reply_rx.clone());
        tasks.push(glommio::spawn_local(async move {
            while let Ok(Some(reply)) = rx.recv_from(peer).await {
                if let Some(tx) = s.pending.borrow_mut().remove(&reply.request_id) {
                    let _ = tx.try_send(reply.outcome);
                }
            }
        }));
    }
    tasks
}

/// Polls the control channel from the admin thread and the shutdown flag.
async fn watch_control(
    shard: Rc<Shard>,
    control: crossbeam_channel::Receiver<crate::server::ControlMessage>,
) {
    loop {
        while let Ok(message) = control.try_recv() {
            crate::server::handle_control(&shard, message).await;
        }
        if shard.shared.shutdown.load(Ordering::Relaxed) && !shard.stopped.get() {
            shard.stopped.set(true);
            shard.stop.close();
        }
        glommio::timer::sleep(Duration::from_millis(20)).await;
    }
}

async fn accept_loop(shard: Rc<Shard>, listener: TcpListener, info: Rc<KafkaListener>) {
    loop {
        let accepted = futures_lite::future::or(async { Some(listener.accept().await) }, async {
            shard.stopping().await;
            None
        })
        .await;
        let stream = match accepted {
            None => return,
            Some(Ok(stream)) => stream,
            Some(Err(e)) => {
                tracing::warn!("accept failed on {}: {e}", info.bound);
                glommio::timer::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let limit = shard.config().max_connections;
        if shard.shared.open_connections.fetch_add(1, Ordering::SeqCst) >= limit {
            shard.shared.open_connections.fetch_sub(1, Ordering::SeqCst);
            shard.metrics().connection_rejected();
            tracing::warn!("refusing a Kafka connection: kafka.max-connections ({limit}) reached");
            drop(stream);
            continue;
        }
        let pass = match shard.connections.enter() {
            Ok(pass) => pass,
            Err(_) => {
                shard.shared.open_connections.fetch_sub(1, Ordering::SeqCst);
                return;
            }
        };
        shard.metrics().connection_opened();
        let (s, info) = (shard.clone(), info.clone());
        glommio::spawn_local(async move {
            crate::connection::serve(s.clone(), stream, info).await;
            s.metrics().connection_closed();
            s.shared.open_connections.fetch_sub(1, Ordering::SeqCst);
            drop(pass);
        })
        .detach();
    }
}

/// Sends the core index on drop, including during a panic unwind.
struct ExitNotice(crossbeam_channel::Sender<usize>, Cell<usize>);

impl Drop for ExitNotice {
    fn drop(&mut self) {
        let _ = self.0.try_send(self.1.get());
    }
}
