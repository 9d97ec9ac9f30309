//! One produce run against one endpoint: set-up (ApiVersions → SASL → Metadata on every
//! connection), then per connection a writer thread keeping up to `inflight` requests in flight
//! and a reader thread matching answers in order, plus a progress thread sampling each second.
//!
//! Latency is measured from the *intended* send time. Flat out, that is when the writer got a
//! window slot; at a fixed rate it is the request's slot on the schedule, so a stalled broker
//! (or a full window) shows as latency instead of silently lowering the rate (coordinated
//! omission correction). A record's latency runs from when it was due, earlier than its request
//! by the time the batch took to fill.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::client::{KafkaConnection, NegotiatedVersions, TopicLayout};
use crate::error::BenchError;
use crate::histogram::{interval_histogram, run_histogram};
use crate::pipeline::{spawn_connection, Counters, LoadConnection, SlowRequest};
use crate::proc_stat::{self, ProcessSample};
use crate::timeline::spawn_progress;
pub use crate::timeline::{progress_line, TimelinePoint};
use crate::values::{RecordPool, DEFAULT_SEED};
use crate::workload::{RequestPool, StopAfter, Workload};

/// Distinct values per run (cycled through all requests).
pub const VALUE_POOL: usize = 1024;
/// Metadata look-ups while a topic is being created, and the pause between them.
const METADATA_ATTEMPTS: u32 = 20;
const METADATA_RETRY_PAUSE: Duration = Duration::from_millis(250);
/// Time between set-up and the first send, so that every writer starts on the same clock.
const START_DELAY: Duration = Duration::from_millis(20);

/// Resource use of the server process over the run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServerUsage {
    /// The pid measured.
    pub pid: u32,
    /// CPU seconds (user + system, all threads) spent between the first send and the last ack.
    pub cpu_seconds: f64,
    /// Reading before any connection of the run was opened.
    pub at_start: ProcessSample,
    /// Reading just before the first send (after set-up and idle connections).
    pub before: ProcessSample,
    /// Reading after the last answer.
    pub after: ProcessSample,
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// The bootstrap endpoint.
    pub endpoint: String,
    /// Versions used.
    pub versions: NegotiatedVersions,
    /// Partitions of the topic.
    pub partitions: usize,
    /// Records in each full request.
    pub records_per_request: usize,
    /// From the first send to the last answer (or last write for acks=0).
    pub elapsed: Duration,
    /// Requests written.
    pub requests_sent: u64,
    /// Records written.
    pub records_sent: u64,
    /// Requests answered with no partition error (for acks=0: written).
    pub requests_acked: u64,
    /// Records in those requests.
    pub records_acked: u64,
    /// Key + value + header bytes in those requests.
    pub payload_bytes_acked: u64,
    /// Bytes written to the sockets.
    pub wire_bytes_sent: u64,
    /// Partition errors by Kafka error name.
    pub errors: BTreeMap<String, u64>,
    /// The first error seen (a failed partition or a broken connection).
    pub first_error: Option<String>,
    /// Latency of every acknowledged request sent after the warm-up.
    pub request_latency: Histogram<u64>,
    /// The warm-up left out of the latency figures.
    pub warmup: Duration,
    /// The slow-request threshold.
    pub slow_threshold: Duration,
    /// Requests slower than `slow_threshold` (warm-up included), in send order; at most
    /// `MAX_SLOW_LISTED` (1,000) per connection.
    pub slow_requests: Vec<SlowRequest>,
    /// How many requests were slower than `slow_threshold`, listed or not.
    pub slow_requests_total: u64,
    /// Latency of every acknowledged record.
    pub record_latency: Histogram<u64>,
    /// One point per second.
    pub timeline: Vec<TimelinePoint>,
    /// The server's CPU and memory, when its pid was given.
    pub server: Option<ServerUsage>,
    /// This process's CPU seconds over the run (the harness shares the machine's cores).
    pub client_cpu_seconds: f64,
    /// The machine's steal time over the run (first send to last answer), CPU seconds summed
    /// over its CPUs: time a hypervisor kept them from running work they had
    /// ([`proc_stat::steal_seconds`]); `None` where `/proc/stat` does not say.
    pub steal_seconds: Option<f64>,
    /// Idle connections that were open during the load.
    pub idle_connections_open: usize,
    /// Why opening idle connections stopped early, if it did.
    pub idle_connections_error: Option<String>,
}

impl RunResult {
    /// Acknowledged records per second.
    pub fn records_per_second(&self) -> f64 {
        self.records_acked as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Acknowledged requests per second.
    pub fn requests_per_second(&self) -> f64 {
        self.requests_acked as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Acknowledged payload megabytes (10^6 bytes) per second.
    pub fn megabytes_per_second(&self) -> f64 {
        self.payload_bytes_acked as f64 / 1e6 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Server CPU seconds per million acknowledged records.
    pub fn server_cpu_per_million_records(&self) -> Option<f64> {
        let server = self.server?;
        (self.records_acked > 0).then(|| server.cpu_seconds * 1e6 / self.records_acked as f64)
    }

    /// Server CPU microseconds per acknowledged request.
    pub fn server_cpu_us_per_request(&self) -> Option<f64> {
        let server = self.server?;
        (self.requests_acked > 0).then(|| server.cpu_seconds * 1e6 / self.requests_acked as f64)
    }
}

/// Opens, negotiates and authenticates one connection.
fn open(endpoint: &str, workload: &Workload) -> Result<(KafkaConnection, NegotiatedVersions), BenchError> {
    let mut connection = KafkaConnection::connect(endpoint, workload.io_timeout)?;
    let versions = connection.negotiate()?;
    if let Some((user, password)) = &workload.sasl {
        connection.authenticate_plain(&versions, user, password)?;
    }
    Ok((connection, versions))
}

/// Runs `workload` against `bootstrap`, measuring `server_pid` if given.
pub fn run(bootstrap: &str, workload: &Workload, server_pid: Option<u32>) -> Result<RunResult, BenchError> {
    workload.validate()?;
    let server_at_start = server_pid.and_then(proc_stat::sample);
    let (mut first, versions) = open(bootstrap, workload)?;
    let layout = look_up_topic(&mut first, bootstrap, versions.metadata, &workload.topic)?;
    drop(first);

    let (idle, idle_connections_error) = open_idle_connections(bootstrap, workload);

    let pool = RecordPool::new(
        workload.value_kind,
        workload.message_size,
        workload.key_size,
        workload.headers,
        VALUE_POOL,
        DEFAULT_SEED,
    );
    let mut connections = Vec::with_capacity(workload.connections);
    for index in 0..workload.connections {
        let partition = index % layout.leaders.len();
        let (connection, versions) = open(&layout.leaders[partition], workload)?;
        let records_total = match workload.stop {
            StopAfter::Records(total) => Some(workload.records_for_connection(index, total)),
            StopAfter::Duration(_) => None,
        };
        let requests = RequestPool::build(
            workload,
            versions.produce,
            partition as i32,
            index,
            &pool,
            records_total,
        )?;
        connections.push(LoadConnection {
            connection,
            versions,
            requests,
            records_total,
        });
    }

    let counters = Arc::new(Counters::default());
    let server_before = server_pid.and_then(proc_stat::sample);
    let client_before = proc_stat::sample_self();
    let steal_before = proc_stat::steal_seconds();
    let start = Instant::now() + START_DELAY;
    let running = Arc::new(AtomicBool::new(true));
    // Stops the progress thread on every way out of this function, errors included.
    let _stop_progress = ClearOnDrop(Arc::clone(&running));
    let mut interval_histograms = Vec::new();
    let mut writers = Vec::new();
    let mut readers = Vec::new();
    for (index, load) in connections.into_iter().enumerate() {
        let interval = Arc::new(Mutex::new(interval_histogram()));
        interval_histograms.push(Arc::clone(&interval));
        let (writer, reader) = spawn_connection(index, load, workload, start, &counters, interval)?;
        writers.push(writer);
        readers.extend(reader);
    }
    let progress = spawn_progress(
        workload.progress,
        server_pid,
        start,
        Arc::clone(&counters),
        interval_histograms,
        Arc::clone(&running),
    )?;

    let mut first_error = None;
    let mut last_event = None;
    for writer in writers {
        let outcome = writer.join().map_err(|_| BenchError::ThreadPanicked("writer"))?;
        if first_error.is_none() {
            first_error = outcome.failure;
        }
        last_event = last_event.max(outcome.last_write);
    }
    let mut request_latency = run_histogram();
    let mut record_latency = run_histogram();
    let mut errors = BTreeMap::new();
    let mut slow_requests = Vec::new();
    let mut slow_requests_total = 0;
    for reader in readers {
        let outcome = reader.join().map_err(|_| BenchError::ThreadPanicked("reader"))?;
        slow_requests.extend(outcome.slow);
        slow_requests_total += outcome.slow_total;
        request_latency.add(&outcome.request_latency).ok();
        record_latency.add(&outcome.record_latency).ok();
        for (name, count) in outcome.errors {
            *errors.entry(name).or_insert(0) += count;
        }
        if first_error.is_none() {
            first_error = outcome.first_error;
        }
        last_event = last_event.max(outcome.last_answer);
    }
    slow_requests.sort_by(|a, b| a.sent_at_s.total_cmp(&b.sent_at_s));
    let server_after = server_pid.and_then(proc_stat::sample);
    let client_after = proc_stat::sample_self();
    let steal_after = proc_stat::steal_seconds();
    running.store(false, Ordering::SeqCst);
    let timeline = progress
        .join()
        .map_err(|_| BenchError::ThreadPanicked("progress"))?;
    let idle_connections_open = idle.len();
    drop(idle);

    let server = match (server_pid, server_at_start, server_before, server_after) {
        (Some(pid), Some(at_start), Some(before), Some(after)) => Some(ServerUsage {
            pid,
            at_start,
            cpu_seconds: after.cpu_seconds - before.cpu_seconds,
            before,
            after,
        }),
        _ => None,
    };
    let client_cpu_seconds = match (client_before, client_after) {
        (Some(before), Some(after)) => after.cpu_seconds - before.cpu_seconds,
        _ => 0.0,
    };
    let load = |counter: &AtomicU64| counter.load(Ordering::SeqCst);
    Ok(RunResult {
        endpoint: bootstrap.to_owned(),
        versions,
        partitions: layout.leaders.len(),
        records_per_request: workload.records_per_request(),
        elapsed: last_event.map_or(Duration::ZERO, |last| last.saturating_duration_since(start)),
        requests_sent: load(&counters.requests_sent),
        records_sent: load(&counters.records_sent),
        requests_acked: load(&counters.requests_acked),
        records_acked: load(&counters.records_acked),
        payload_bytes_acked: load(&counters.payload_bytes_acked),
        wire_bytes_sent: load(&counters.wire_bytes_sent),
        errors,
        first_error,
        request_latency,
        warmup: workload.warmup,
        slow_threshold: workload.slow_threshold,
        slow_requests,
        slow_requests_total,
        record_latency,
        timeline,
        server,
        client_cpu_seconds,
        steal_seconds: proc_stat::steal_between(steal_before, steal_after),
        idle_connections_open,
        idle_connections_error,
    })
}

/// Clears a flag when dropped.
struct ClearOnDrop(Arc<AtomicBool>);

impl Drop for ClearOnDrop {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// Asks for the topic's layout; a topic being auto-created answers "unknown" or "no leader"
/// for a moment, so those are asked again (bounded).
fn look_up_topic(
    connection: &mut KafkaConnection,
    bootstrap: &str,
    version: i16,
    topic: &str,
) -> Result<TopicLayout, BenchError> {
    let mut attempts = 0;
    loop {
        let metadata = connection.metadata(version, topic)?;
        match TopicLayout::from_metadata(bootstrap, topic, &metadata) {
            Err(BenchError::Metadata { .. }) if attempts < METADATA_ATTEMPTS => {
                attempts += 1;
                thread::sleep(METADATA_RETRY_PAUSE);
            }
            other => return other,
        }
    }
}

/// Opens the idle connections (ApiVersions and Metadata each, then silence); stops at the first
/// failure and says why.
fn open_idle_connections(bootstrap: &str, workload: &Workload) -> (Vec<KafkaConnection>, Option<String>) {
    let mut idle = Vec::with_capacity(workload.idle_connections);
    for _ in 0..workload.idle_connections {
        let opened = open(bootstrap, workload).and_then(|(mut connection, versions)| {
            connection.metadata(versions.metadata, &workload.topic)?;
            connection.release_buffers();
            Ok(connection)
        });
        match opened {
            Ok(connection) => idle.push(connection),
            Err(error) => return (idle, Some(error.to_string())),
        }
    }
    (idle, None)
}
