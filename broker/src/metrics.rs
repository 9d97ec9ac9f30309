//! Prometheus metrics without locks on the hot path.
//!
//! Every core owns one [`CoreMetrics`] slot and is its only writer (relaxed atomic adds on its
//! own cache lines, so cores never contend); `GET /metrics` sums the slots when scraped.
//! Latency is a fixed-bucket histogram per API, so recording is one add per bucket search.
//!
//! Per-table series ([`TableSeries`]) follow the same rule: one cache-line-aligned slot per
//! core. A core finds a table's series in its own [`TableSeriesCache`] (no lock); only the
//! first time a core meets a table does it take the registry's mutex to create or fetch the
//! series. A dropped table's series leave the registry ([`Metrics::forget_table`]), so the
//! label set is bounded by the catalog.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafluss_protocol::ErrorCode;

/// The `api` label values and which one a request counts under: the Kafka API registry's.
use crate::idhash::{IdMap, IdSet};
use crate::kafka::apis::{metric_index, METRIC_LABELS as API_NAMES, METRIC_SERIES};

/// Upper bounds (seconds) of the latency histogram buckets; the last bucket is +Inf.
pub const LATENCY_BUCKETS_SECONDS: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.5,
];

/// Upper bounds (seconds) of the fsync latency histogram buckets; the last bucket is +Inf.
pub const FSYNC_BUCKETS_SECONDS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// The codes a produce partition is refused with (behaviour.md "Produce"); any other code
/// counts under `OTHER`. Fixed, so the `code` label has at most this many values + 1.
pub const REFUSAL_CODES: [ErrorCode; 13] = [
    ErrorCode::UnknownTopicOrPartition,
    ErrorCode::InvalidTopicException,
    ErrorCode::TopicAuthorizationFailed,
    ErrorCode::InvalidRequest,
    ErrorCode::InvalidRequiredAcks,
    ErrorCode::CorruptMessage,
    ErrorCode::InvalidRecord,
    ErrorCode::MessageTooLarge,
    ErrorCode::UnsupportedForMessageFormat,
    ErrorCode::KafkaStorageError,
    ErrorCode::InvalidTimestamp,
    ErrorCode::OutOfOrderSequenceNumber,
    ErrorCode::InvalidProducerEpoch,
];
const REFUSAL_SLOTS: usize = REFUSAL_CODES.len() + 1;

/// Index into [`REFUSAL_CODES`]; the last slot is `OTHER`.
fn refusal_index(code: ErrorCode) -> usize {
    REFUSAL_CODES
        .iter()
        .position(|known| *known == code)
        .unwrap_or(REFUSAL_CODES.len())
}

fn refusal_label(index: usize) -> &'static str {
    REFUSAL_CODES.get(index).map_or("OTHER", |code| code.name())
}

/// Why the server closed a connection on a request without answering it: the `reason` label of
/// `kafluss_connections_closed_unanswered_total`. A fixed set named by the code, never by a
/// client, so the label has at most [`Unanswered::ALL`]'s values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unanswered {
    /// An API advertised for librdkafka's feature detection but not served (Fetch,
    /// FindCoordinator, ...).
    NotServed,
    /// A request other than SASL's before SASL authentication completed.
    BeforeAuthentication,
    /// A frame over `kafka.max-request-size`, closed on its size prefix.
    TooLarge,
    /// A frame over the bound before SASL authentication, closed on its size prefix.
    TooLargeBeforeAuthentication,
    /// A request other than Produce over `kafka.max-other-request-size`.
    OtherTooLarge,
    /// A frame whose request header cannot be decoded.
    UndecodableHeader,
    /// A request whose body cannot be decoded.
    Undecodable,
    /// An unsupported API or version with no error response to give.
    NoErrorResponse,
    /// A response that could not be encoded.
    UnencodableResponse,
    /// `kafka.max-answer-memory` not given in time (or the server stopping).
    AnswerMemory,
}

impl Unanswered {
    pub const ALL: [Unanswered; 10] = [
        Unanswered::NotServed,
        Unanswered::BeforeAuthentication,
        Unanswered::TooLarge,
        Unanswered::TooLargeBeforeAuthentication,
        Unanswered::OtherTooLarge,
        Unanswered::UndecodableHeader,
        Unanswered::Undecodable,
        Unanswered::NoErrorResponse,
        Unanswered::UnencodableResponse,
        Unanswered::AnswerMemory,
    ];

    /// The `reason` label.
    pub fn label(self) -> &'static str {
        match self {
            Unanswered::NotServed => "not_served",
            Unanswered::BeforeAuthentication => "before_authentication",
            Unanswered::TooLarge => "too_large",
            Unanswered::TooLargeBeforeAuthentication => "too_large_before_authentication",
            Unanswered::OtherTooLarge => "other_too_large",
            Unanswered::UndecodableHeader => "undecodable_header",
            Unanswered::Undecodable => "undecodable",
            Unanswered::NoErrorResponse => "no_error_response",
            Unanswered::UnencodableResponse => "unencodable_response",
            Unanswered::AnswerMemory => "answer_memory",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// A fixed-bucket histogram; `N` = bounds + 1 (the +Inf bucket).
struct Histogram<const N: usize> {
    sum_micros: AtomicU64,
    /// Non-cumulative counts; `render` makes them cumulative as Prometheus expects.
    buckets: [AtomicU64; N],
}

impl<const N: usize> Default for Histogram<N> {
    fn default() -> Self {
        Self {
            sum_micros: AtomicU64::new(0),
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl<const N: usize> Histogram<N> {
    fn record(&self, bounds: &[f64], value: Duration) {
        add(&self.sum_micros, value.as_micros() as u64);
        let seconds = value.as_secs_f64();
        let bucket = bounds
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(bounds.len());
        add(&self.buckets[bucket.min(N - 1)], 1);
    }
}

#[derive(Default)]
struct ApiMetrics {
    requests: AtomicU64,
    errors: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    latency: Histogram<{ LATENCY_BUCKETS_SECONDS.len() + 1 }>,
}

/// One per-core figure of the metrics page, read from a core's counters (None: not known).
type CoreValue = fn(&CoreMetrics) -> Option<u64>;

/// The counters one core writes (only that core; the admin thread reads).
#[derive(Default)]
pub struct CoreMetrics {
    apis: [ApiMetrics; METRIC_SERIES],
    records_appended: AtomicU64,
    partition_errors: AtomicU64,
    refused: [AtomicU64; REFUSAL_SLOTS],
    fsync: Histogram<{ FSYNC_BUCKETS_SECONDS.len() + 1 }>,
    local_appends: AtomicU64,
    cross_core_appends: AtomicU64,
    connections_open: AtomicU64,
    connections_total: AtomicU64,
    connections_rejected: AtomicU64,
    connections_handed_over: AtomicU64,
    connections_moved: AtomicU64,
    /// Connections closed on a request without an answer, by [`Unanswered`] reason.
    unanswered: [AtomicU64; Unanswered::ALL.len()],
    /// The core's executor thread (Linux thread id), 0 until the core has started.
    thread_id: AtomicU64,
}

fn add(counter: &AtomicU64, value: u64) {
    counter.fetch_add(value, Ordering::Relaxed);
}

impl CoreMetrics {
    /// One request of `api_key` finished: its frame sizes, latency and whether it failed.
    pub fn record_request(
        &self,
        api_key: i16,
        bytes_in: usize,
        bytes_out: usize,
        latency: Duration,
        failed: bool,
    ) {
        let api = &self.apis[metric_index(api_key)];
        add(&api.requests, 1);
        add(&api.bytes_in, bytes_in as u64);
        add(&api.bytes_out, bytes_out as u64);
        if failed {
            add(&api.errors, 1);
        }
        api.latency.record(&LATENCY_BUCKETS_SECONDS, latency);
    }

    /// Rows written to a bucket log (counted on the core owning the bucket, after the write).
    pub fn record_appended(&self, rows: u64) {
        add(&self.records_appended, rows);
    }

    /// One `fdatasync` of a segment file took `latency`.
    pub fn record_fsync(&self, latency: Duration) {
        self.fsync.record(&FSYNC_BUCKETS_SECONDS, latency);
    }

    /// A partition batch was handed to a bucket owned by the connection's own core (counted
    /// when routed: the owner may still refuse it).
    pub fn record_local_append(&self) {
        add(&self.local_appends, 1);
    }

    /// A partition batch crossed the mesh to the core owning its bucket (counted when routed:
    /// the owner may still refuse it).
    pub fn record_cross_core_append(&self) {
        add(&self.cross_core_appends, 1);
    }

    /// A produce partition was answered with error `code` (appended nothing, or its acks=-1
    /// fsync failed).
    pub fn record_refused(&self, code: ErrorCode) {
        add(&self.partition_errors, 1);
        add(&self.refused[refusal_index(code)], 1);
    }

    pub fn connection_opened(&self) {
        add(&self.connections_total, 1);
        add(&self.connections_open, 1);
    }

    pub fn connection_closed(&self) {
        self.connections_open.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn connection_rejected(&self) {
        add(&self.connections_rejected, 1);
    }

    /// A connection this core accepted went to another core to be served.
    pub fn connection_handed_over(&self) {
        add(&self.connections_handed_over, 1);
    }

    /// A connection that was served before (on another core, or here before a move that
    /// failed) goes on here: open again, not a new one.
    pub fn connection_resumed(&self) {
        add(&self.connections_open, 1);
    }

    /// A connection this core served moved to the core its requests append on.
    pub fn connection_moved(&self) {
        add(&self.connections_moved, 1);
    }

    /// A connection was closed on a request without answering it, for `reason` (the request
    /// counts in no per-API series: those count answered requests).
    pub fn connection_closed_unanswered(&self, reason: Unanswered) {
        add(&self.unanswered[reason.index()], 1);
    }

    /// The core's executor thread, whose context switches are its wake-ups.
    pub fn set_thread_id(&self, tid: u64) {
        self.thread_id.store(tid, Ordering::Relaxed);
    }

    /// How often the core's thread gave up or lost its CPU (`voluntary_ctxt_switches` +
    /// `nonvoluntary_ctxt_switches` of `/proc/self/task/<tid>/status`). A core that parks
    /// with nothing to do adds one per wake-up, and an idle core none. None before it started.
    pub fn context_switches(&self) -> Option<u64> {
        let tid = self.thread_id.load(Ordering::Relaxed);
        if tid == 0 {
            return None;
        }
        let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).ok()?;
        let count = |key: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(key))
                .and_then(|rest| rest.trim().parse::<u64>().ok())
        };
        Some(count("voluntary_ctxt_switches:")? + count("nonvoluntary_ctxt_switches:")?)
    }
}

/// One core's slot, aligned to its own cache lines so cores never write the same line.
#[derive(Default)]
#[repr(align(128))]
struct CoreSlot(CoreMetrics);

/// One core's counters of one table, on their own cache lines.
#[derive(Default)]
#[repr(align(128))]
struct TableSlot {
    rows: AtomicU64,
    bytes: AtomicU64,
    refused: [AtomicU64; REFUSAL_SLOTS],
}

/// The counters of one table: a slot per core, each written only by its core.
pub struct TableSeries {
    /// `db.table`, the `table` label.
    label: String,
    cores: Box<[TableSlot]>,
}

impl TableSeries {
    fn new(label: String, cores: usize) -> Self {
        Self {
            label,
            cores: (0..cores.max(1)).map(|_| TableSlot::default()).collect(),
        }
    }

    fn slot(&self, core: usize) -> &TableSlot {
        &self.cores[core % self.cores.len()]
    }

    /// Core `core` wrote `rows` rows (`bytes` Arrow IPC bytes) of this table to its log.
    pub fn record_appended(&self, core: usize, rows: u64, bytes: u64) {
        let slot = self.slot(core);
        add(&slot.rows, rows);
        add(&slot.bytes, bytes);
    }

    /// Core `core` answered a partition batch of this table with error `code`.
    pub fn record_refused(&self, core: usize, code: ErrorCode) {
        add(&self.slot(core).refused[refusal_index(code)], 1);
    }

    fn sum(&self, read: impl Fn(&TableSlot) -> &AtomicU64) -> u64 {
        self.cores
            .iter()
            .map(|slot| read(slot).load(Ordering::Relaxed))
            .sum()
    }
}

#[derive(Default)]
struct TableRegistry {
    series: IdMap<u64, Arc<TableSeries>>,
    /// Dropped table ids (never reused): a job still carrying a dropped table cannot bring
    /// its series back. One id per dropped table, as the cores' own dropped-table sets.
    dropped: IdSet<u64>,
}

/// A core's own map of table id → series, so the produce path takes no lock. `!Sync`: one per
/// core.
#[derive(Default)]
pub struct TableSeriesCache {
    tables: RefCell<IdMap<u64, Arc<TableSeries>>>,
}

impl TableSeriesCache {
    /// Runs `f` on the series of table `id` (`label` = `db.table`), registering it on first
    /// use. Borrowed, not cloned: the `Arc`'s count is shared by all cores and stays untouched.
    pub fn with<R>(
        &self,
        metrics: &Metrics,
        id: u64,
        label: impl FnOnce() -> String,
        f: impl FnOnce(&TableSeries) -> R,
    ) -> R {
        if let Some(series) = self.tables.borrow().get(&id) {
            return f(series);
        }
        let series = metrics.table_series(id, label);
        let result = f(&series);
        self.tables.borrow_mut().insert(id, series);
        result
    }

    /// Forgets a dropped table on this core.
    pub fn forget(&self, id: u64) {
        self.tables.borrow_mut().remove(&id);
    }
}

/// All cores' slots; shared as `Arc<Metrics>` with the admin thread.
pub struct Metrics {
    cores: Vec<CoreSlot>,
    tables: Mutex<TableRegistry>,
    /// The server's failed-login bookkeeping, rendered as `kafluss_login_*`.
    login: Option<Arc<kafluss_auth::LoginThrottle>>,
}

impl Metrics {
    pub fn new(cores: usize) -> Self {
        Self {
            cores: (0..cores.max(1)).map(|_| CoreSlot::default()).collect(),
            tables: Mutex::new(TableRegistry::default()),
            login: None,
        }
    }

    /// Also renders the login throttle's counters.
    pub fn with_login_throttle(mut self, throttle: Arc<kafluss_auth::LoginThrottle>) -> Self {
        self.login = Some(throttle);
        self
    }

    /// The slot core `core` writes to.
    pub fn core(&self, core: usize) -> &CoreMetrics {
        &self.cores[core % self.cores.len()].0
    }

    /// The series of table `id`, created on first use. A dropped table gets a series that is
    /// never rendered.
    fn table_series(&self, id: u64, label: impl FnOnce() -> String) -> Arc<TableSeries> {
        let mut registry = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        if registry.dropped.contains(&id) {
            return Arc::new(TableSeries::new(label(), 1));
        }
        let cores = self.cores.len();
        registry
            .series
            .entry(id)
            .or_insert_with(|| Arc::new(TableSeries::new(label(), cores)))
            .clone()
    }

    /// Drops the series of a dropped table (each core also calls
    /// [`TableSeriesCache::forget`]).
    pub fn forget_table(&self, id: u64) {
        let mut registry = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        registry.series.remove(&id);
        registry.dropped.insert(id);
    }

    fn render_histogram<const N: usize>(
        &self,
        out: &mut String,
        name: &str,
        labels: &str,
        bounds: &[f64],
        read: impl Fn(&CoreMetrics) -> &Histogram<N>,
    ) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (bucket, bound) in bounds.iter().enumerate() {
            cumulative += self.sum(|c| &read(c).buckets[bucket]);
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{bound}\"}} {cumulative}");
        }
        cumulative += self.sum(|c| &read(c).buckets[bounds.len()]);
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {cumulative}");
        let micros = self.sum(|c| &read(c).sum_micros);
        let braces = |labels: &str| {
            if labels.is_empty() {
                String::new()
            } else {
                format!("{{{labels}}}")
            }
        };
        let _ = writeln!(
            out,
            "{name}_sum{} {}",
            braces(labels),
            micros as f64 / 1_000_000.0
        );
        let _ = writeln!(out, "{name}_count{} {cumulative}", braces(labels));
    }

    fn render_tables(&self, out: &mut String) {
        let tables: BTreeMap<String, Arc<TableSeries>> = {
            let registry = self.tables.lock().unwrap_or_else(|e| e.into_inner());
            registry
                .series
                .values()
                .map(|s| (s.label.clone(), s.clone()))
                .collect()
        };
        for (name, help, read) in [
            (
                "kafluss_table_rows_appended_total",
                "Rows written to the table's bucket logs, by table.",
                (|s: &TableSlot| &s.rows) as fn(&TableSlot) -> &AtomicU64,
            ),
            (
                "kafluss_table_bytes_appended_total",
                "Arrow IPC bytes written to the table's segment files, by table.",
                |s: &TableSlot| &s.bytes,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for (label, series) in &tables {
                let _ = writeln!(out, "{name}{{table=\"{label}\"}} {}", series.sum(read));
            }
        }
        let name = "kafluss_table_batches_refused_total";
        let _ = writeln!(
            out,
            "# HELP {name} Produce partition batches of the table answered with an error, by table and Kafka error code (codes never seen are omitted).\n# TYPE {name} counter"
        );
        for (label, series) in &tables {
            for index in 0..REFUSAL_SLOTS {
                let value = series.sum(|s| &s.refused[index]);
                if value > 0 {
                    let code = refusal_label(index);
                    let _ = writeln!(out, "{name}{{table=\"{label}\",code=\"{code}\"}} {value}");
                }
            }
        }
    }

    fn sum(&self, read: impl Fn(&CoreMetrics) -> &AtomicU64) -> u64 {
        self.cores
            .iter()
            .map(|c| read(&c.0).load(Ordering::Relaxed))
            .sum()
    }

    /// Prometheus text exposition format (version 0.0.4).
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(8 * 1024);
        let per_api = |out: &mut String, name: &str, help: &str, read: &dyn Fn(&ApiMetrics) -> &AtomicU64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for (index, api) in API_NAMES.iter().enumerate() {
                let value = self.sum(|c| read(&c.apis[index]));
                let _ = writeln!(out, "{name}{{api=\"{api}\"}} {value}");
            }
        };
        per_api(
            &mut out,
            "kafluss_requests_total",
            "Kafka requests handled, by API.",
            &|a| &a.requests,
        );
        per_api(
            &mut out,
            "kafluss_request_errors_total",
            "Kafka requests answered with an error, by API.",
            &|a| &a.errors,
        );
        per_api(
            &mut out,
            "kafluss_request_bytes_total",
            "Bytes of Kafka request frames received, by API.",
            &|a| &a.bytes_in,
        );
        per_api(
            &mut out,
            "kafluss_response_bytes_total",
            "Bytes of Kafka response frames sent, by API.",
            &|a| &a.bytes_out,
        );
        let name = "kafluss_request_latency_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Time from a request's arrival to its response being ready, by API.\n# TYPE {name} histogram"
        );
        for (index, api) in API_NAMES.iter().enumerate() {
            self.render_histogram(
                &mut out,
                name,
                &format!("api=\"{api}\""),
                &LATENCY_BUCKETS_SECONDS,
                |c| &c.apis[index].latency,
            );
        }
        let name = "kafluss_fsync_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Duration of each fdatasync of a segment file (group commit, segment roll, close).\n# TYPE {name} histogram"
        );
        self.render_histogram(&mut out, name, "", &FSYNC_BUCKETS_SECONDS, |c| &c.fsync);
        let name = "kafluss_produce_batches_refused_total";
        let _ = writeln!(
            out,
            "# HELP {name} Produce partition batches answered with an error, by Kafka error code (unknown topics included).\n# TYPE {name} counter"
        );
        for index in 0..REFUSAL_SLOTS {
            let value = self.sum(|c| &c.refused[index]);
            let _ = writeln!(out, "{name}{{code=\"{}\"}} {value}", refusal_label(index));
        }
        self.render_tables(&mut out);
        for (name, kind, help, value) in [
            (
                "kafluss_records_appended_total",
                "counter",
                "Rows written to bucket logs (counted after the write; refused batches count nothing).",
                self.sum(|c| &c.records_appended),
            ),
            (
                "kafluss_produce_partition_errors_total",
                "counter",
                "Produce partitions answered with an error code.",
                self.sum(|c| &c.partition_errors),
            ),
            (
                "kafluss_local_appends_total",
                "counter",
                "Partition batches routed to a bucket of the core that read them, whatever its answer.",
                self.sum(|c| &c.local_appends),
            ),
            (
                "kafluss_cross_core_appends_total",
                "counter",
                "Partition batches routed over the mesh to the core owning their bucket, whatever its answer.",
                self.sum(|c| &c.cross_core_appends),
            ),
            (
                "kafluss_connections_open",
                "gauge",
                "Open Kafka connections.",
                self.sum(|c| &c.connections_open),
            ),
            (
                "kafluss_connections_total",
                "counter",
                "Kafka connections accepted.",
                self.sum(|c| &c.connections_total),
            ),
            (
                "kafluss_connections_rejected_total",
                "counter",
                "Kafka connections refused by kafka.max-connections.",
                self.sum(|c| &c.connections_rejected),
            ),
            (
                "kafluss_connections_handed_over_total",
                "counter",
                "Kafka connections accepted by one core and served by another with fewer connections.",
                self.sum(|c| &c.connections_handed_over),
            ),
            (
                "kafluss_connections_moved_total",
                "counter",
                "Kafka connections moved to the core their produce requests append on (kafka.connection.move-after).",
                self.sum(|c| &c.connections_moved),
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
        }
        let name = "kafluss_connections_closed_unanswered_total";
        let _ = writeln!(
            out,
            "# HELP {name} Kafka connections closed on a request without answering it, by reason (such requests count in no per-API series).\n# TYPE {name} counter"
        );
        for reason in Unanswered::ALL {
            let value = self.sum(|c| &c.unanswered[reason.index()]);
            let _ = writeln!(out, "{name}{{reason=\"{}\"}} {value}", reason.label());
        }
        let _ = writeln!(
            out,
            "# HELP kafluss_cores Executor cores serving Kafka.\n# TYPE kafluss_cores gauge\nkafluss_cores {}",
            self.cores.len()
        );
        let per_core: [(&str, &str, &str, CoreValue); 2] = [
            (
                "kafluss_core_context_switches_total",
                "counter",
                "Context switches of each core's executor thread (from /proc): an idle core that parks adds none.",
                CoreMetrics::context_switches,
            ),
            (
                "kafluss_core_connections_open",
                "gauge",
                "Open Kafka connections each core serves.",
                |core| Some(core.connections_open.load(Ordering::Relaxed)),
            ),
        ];
        for (name, kind, help, value) in per_core {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (index, slot) in self.cores.iter().enumerate() {
                if let Some(value) = value(&slot.0) {
                    let _ = writeln!(out, "{name}{{core=\"{index}\"}} {value}");
                }
            }
        }
        if let Some(login) = &self.login {
            for (name, kind, help, value) in [
                (
                    "kafluss_login_failures_total",
                    "counter",
                    "Failed logins (SASL/PLAIN and HTTP Basic).",
                    login.failures_total(),
                ),
                (
                    "kafluss_login_delayed_total",
                    "counter",
                    "Login attempts held back or refused because of earlier failures.",
                    login.delayed_total(),
                ),
                (
                    "kafluss_login_tracked",
                    "gauge",
                    "Client addresses and user names with recent failed logins.",
                    login.tracked() as u64,
                ),
            ] {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_cores_and_renders_cumulative_histograms() {
        let metrics = Metrics::new(2);
        metrics
            .core(0)
            .record_request(0, 100, 20, Duration::from_micros(50), false);
        metrics
            .core(1)
            .record_request(0, 300, 20, Duration::from_millis(3), true);
        metrics.core(1).record_appended(7);
        let text = metrics.render();
        assert!(
            text.contains("kafluss_requests_total{api=\"produce\"} 2"),
            "{text}"
        );
        assert!(text.contains("kafluss_request_errors_total{api=\"produce\"} 1"));
        assert!(text.contains("kafluss_request_bytes_total{api=\"produce\"} 400"));
        assert!(text.contains("kafluss_request_latency_seconds_bucket{api=\"produce\",le=\"0.0001\"} 1"));
        assert!(text.contains("kafluss_request_latency_seconds_bucket{api=\"produce\",le=\"0.005\"} 2"));
        assert!(text.contains("kafluss_request_latency_seconds_count{api=\"produce\"} 2"));
        assert!(text.contains("kafluss_records_appended_total 7"));
        assert!(text.contains("kafluss_requests_total{api=\"metadata\"} 0"));
    }

    #[test]
    fn unanswered_closes_count_by_a_fixed_set_of_reasons() {
        let metrics = Metrics::new(2);
        metrics
            .core(0)
            .connection_closed_unanswered(Unanswered::NotServed);
        metrics
            .core(1)
            .connection_closed_unanswered(Unanswered::NotServed);
        metrics.core(1).connection_closed_unanswered(Unanswered::TooLarge);
        let text = metrics.render();
        let name = "kafluss_connections_closed_unanswered_total";
        assert!(
            text.contains(&format!("{name}{{reason=\"not_served\"}} 2\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!("{name}{{reason=\"too_large\"}} 1\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!("{name}{{reason=\"answer_memory\"}} 0\n")),
            "{text}"
        );
        // Every reason is a series, each once, and there are no others.
        let series = text
            .lines()
            .filter(|l| l.starts_with(&format!("{name}{{")))
            .count();
        assert_eq!(series, Unanswered::ALL.len());
        let labels: std::collections::BTreeSet<_> = Unanswered::ALL.iter().map(|r| r.label()).collect();
        assert_eq!(labels.len(), Unanswered::ALL.len());
        for (index, reason) in Unanswered::ALL.iter().enumerate() {
            assert_eq!(reason.index(), index);
        }
        // The closes count in no per-API series.
        assert!(!text
            .lines()
            .any(|l| l.starts_with("kafluss_requests_total{") && !l.ends_with(" 0")));
    }

    #[test]
    fn table_series_sum_cores_and_vanish_when_dropped() {
        let metrics = Metrics::new(2);
        let (cache0, cache1) = (TableSeriesCache::default(), TableSeriesCache::default());
        cache0.with(&metrics, 7, || "fluss.t".into(), |s| s.record_appended(0, 3, 100));
        cache1.with(
            &metrics,
            7,
            || "fluss.t".into(),
            |s| {
                s.record_appended(1, 2, 50);
                s.record_refused(1, ErrorCode::InvalidRecord);
                s.record_refused(1, ErrorCode::NotLeaderOrFollower);
            },
        );
        // Core 1 found the series core 0 registered: the label closure is not called again.
        cache1.with(&metrics, 7, || unreachable!("cached"), |_| ());
        metrics.core(1).record_refused(ErrorCode::InvalidRecord);
        metrics.core(0).record_fsync(Duration::from_millis(3));
        let text = metrics.render();
        assert!(
            text.contains("kafluss_table_rows_appended_total{table=\"fluss.t\"} 5"),
            "{text}"
        );
        assert!(text.contains("kafluss_table_bytes_appended_total{table=\"fluss.t\"} 150"));
        assert!(
            text.contains("kafluss_table_batches_refused_total{table=\"fluss.t\",code=\"INVALID_RECORD\"} 1")
        );
        assert!(text.contains("kafluss_table_batches_refused_total{table=\"fluss.t\",code=\"OTHER\"} 1"));
        assert!(
            !text.contains("code=\"CORRUPT_MESSAGE\"} 0\nkafluss_table"),
            "{text}"
        );
        assert!(text.contains("kafluss_produce_batches_refused_total{code=\"INVALID_RECORD\"} 1"));
        assert!(text.contains("kafluss_produce_batches_refused_total{code=\"CORRUPT_MESSAGE\"} 0"));
        assert!(text.contains("kafluss_produce_partition_errors_total 1"));
        assert!(text.contains("kafluss_fsync_seconds_bucket{le=\"0.0025\"} 0"));
        assert!(text.contains("kafluss_fsync_seconds_bucket{le=\"0.005\"} 1"));
        assert!(text.contains("kafluss_fsync_seconds_count 1"));

        metrics.forget_table(7);
        cache0.forget(7);
        cache0.with(&metrics, 7, || "fluss.t".into(), |s| s.record_appended(0, 1, 1));
        let text = metrics.render();
        assert!(
            !text.contains("table=\"fluss.t\""),
            "a dropped table's series are gone: {text}"
        );
    }
}
