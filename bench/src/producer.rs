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
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use kafluss_protocol::{decode_response_frame, ProduceResponse};

use crate::client::{KafkaConnection, NegotiatedVersions, TopicLayout};
use crate::error::BenchError;
use crate::histogram::{interval_histogram, record, run_histogram, LatencySummary};
use crate::proc_stat::{self, ProcessSample};
use crate::values::{RecordPool, DEFAULT_SEED};
use crate::workload::{PooledFrame, RequestPool, StopAfter, Workload, CORRELATION_ID_AT};

/// Distinct values per run (cycled through all requests).
const VALUE_POOL: usize = 1024;
/// Stack of each writer/reader thread: they hold little.
const THREAD_STACK: usize = 256 * 1024;
/// The last, partial interval is printed only when at least this long (a sliver's rate misleads).
const MIN_PRINTED_SPAN_S: f64 = 0.2;
/// Metadata look-ups while a topic is being created, and the pause between them.
const METADATA_ATTEMPTS: u32 = 20;
const METADATA_RETRY_PAUSE: Duration = Duration::from_millis(250);
/// Time between set-up and the first send, so that every writer starts on the same clock.
const START_DELAY: Duration = Duration::from_millis(20);

/// One second (or the last, shorter stretch) of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelinePoint {
    /// Seconds since the start at the end of the interval.
    pub at_s: f64,
    /// Length of the interval in seconds.
    pub span_s: f64,
    /// Records acknowledged in the interval.
    pub records: u64,
    /// Payload bytes acknowledged in the interval.
    pub payload_bytes: u64,
    /// Request latency of the requests acknowledged in the interval.
    pub latency: LatencySummary,
    /// The server's resident memory at the end of the interval, KiB (when its pid is given).
    pub server_rss_kib: Option<u64>,
}

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
    /// Latency of every acknowledged request.
    pub request_latency: Histogram<u64>,
    /// Latency of every acknowledged record.
    pub record_latency: Histogram<u64>,
    /// One point per second.
    pub timeline: Vec<TimelinePoint>,
    /// The server's CPU and memory, when its pid was given.
    pub server: Option<ServerUsage>,
    /// This process's CPU seconds over the run (the harness shares the machine's cores).
    pub client_cpu_seconds: f64,
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

/// Counters shared by all threads of a run (read by the progress thread).
#[derive(Debug, Default)]
struct Counters {
    requests_acked: AtomicU64,
    records_acked: AtomicU64,
    payload_bytes_acked: AtomicU64,
    requests_sent: AtomicU64,
    records_sent: AtomicU64,
    wire_bytes_sent: AtomicU64,
}

/// A request written and not yet answered.
#[derive(Debug, Clone, Copy)]
struct InFlight {
    correlation_id: i32,
    intended: Instant,
    records: u64,
    payload_bytes: u64,
}

/// What a reader thread hands back.
struct ReaderOutcome {
    request_latency: Histogram<u64>,
    record_latency: Histogram<u64>,
    errors: BTreeMap<String, u64>,
    first_error: Option<String>,
    last_answer: Option<Instant>,
}

/// What a writer thread hands back.
struct WriterOutcome {
    last_write: Option<Instant>,
    failure: Option<String>,
}

/// A connection ready to carry load.
struct LoadConnection {
    connection: KafkaConnection,
    versions: NegotiatedVersions,
    requests: RequestPool,
    records_total: Option<u64>,
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
    for reader in readers {
        let outcome = reader.join().map_err(|_| BenchError::ThreadPanicked("reader"))?;
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
    let server_after = server_pid.and_then(proc_stat::sample);
    let client_after = proc_stat::sample_self();
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
        record_latency,
        timeline,
        server,
        client_cpu_seconds,
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

type Threads = (JoinHandle<WriterOutcome>, Option<JoinHandle<ReaderOutcome>>);

/// Starts the writer (and, unless acks=0, the reader) of one connection.
fn spawn_connection(
    index: usize,
    load: LoadConnection,
    workload: &Workload,
    start: Instant,
    counters: &Arc<Counters>,
    interval: Arc<Mutex<Histogram<u64>>>,
) -> Result<Threads, BenchError> {
    let LoadConnection {
        connection,
        versions,
        requests,
        records_total,
    } = load;
    let first_correlation_id = connection.next_correlation_id();
    let (frame_writer, frame_reader) = connection.split()?;
    let expects_answers = workload.acks != 0;
    // Window slots: the writer takes one per request, the reader gives it back per answer.
    let (slot_return, slots) = mpsc::sync_channel::<()>(workload.inflight);
    for _ in 0..workload.inflight {
        slot_return
            .send(())
            .expect("the channel holds exactly the window");
    }
    let (in_flight_tx, in_flight_rx) = mpsc::channel::<InFlight>();
    let schedule = Schedule::new(workload, index, start);
    let writer_state = WriterState {
        writer: frame_writer,
        requests,
        records_total,
        schedule,
        slots,
        in_flight: expects_answers.then_some(in_flight_tx),
        counters: Arc::clone(counters),
        correlation_id: first_correlation_id,
    };
    let writer = thread::Builder::new()
        .name(format!("writer-{index}"))
        .stack_size(THREAD_STACK)
        .spawn(move || writer_state.run())
        .map_err(|source| BenchError::io("starting a writer thread", source))?;
    let reader = if expects_answers {
        let reader_state = ReaderState {
            reader: frame_reader,
            produce_version: versions.produce,
            in_flight: in_flight_rx,
            slot_return,
            counters: Arc::clone(counters),
            interval,
            record_spacing: workload
                .rate
                .map(|rate| Duration::from_secs_f64(workload.connections as f64 / rate)),
        };
        Some(
            thread::Builder::new()
                .name(format!("reader-{index}"))
                .stack_size(THREAD_STACK)
                .spawn(move || reader_state.run())
                .map_err(|source| BenchError::io("starting a reader thread", source))?,
        )
    } else {
        drop((frame_reader, slot_return));
        None
    };
    Ok((writer, reader))
}

/// When each request of one connection is due.
#[derive(Debug, Clone, Copy)]
struct Schedule {
    start: Instant,
    /// Fixed rate: offset of this connection's first request and the spacing of its requests.
    paced: Option<(Duration, Duration)>,
    stop_at: Option<Instant>,
}

impl Schedule {
    fn new(workload: &Workload, index: usize, start: Instant) -> Self {
        let paced = workload.rate.map(|rate| {
            let per_connection = rate / workload.connections as f64;
            let spacing = Duration::from_secs_f64(workload.records_per_request() as f64 / per_connection);
            // Stagger connections across one spacing so they do not fire together.
            let offset = spacing.mul_f64(index as f64 / workload.connections as f64);
            (offset, spacing)
        });
        let stop_at = match workload.stop {
            StopAfter::Duration(duration) => Some(start + duration),
            StopAfter::Records(_) => None,
        };
        Self {
            start,
            paced,
            stop_at,
        }
    }

    /// The intended send time of request `n` (fixed rate), or `None` flat out.
    fn due(&self, n: u64) -> Option<Instant> {
        let (offset, spacing) = self.paced?;
        Some(self.start + offset + spacing.mul_f64(n as f64))
    }
}

struct WriterState {
    writer: crate::client::FrameWriter,
    requests: RequestPool,
    records_total: Option<u64>,
    schedule: Schedule,
    slots: Receiver<()>,
    in_flight: Option<Sender<InFlight>>,
    counters: Arc<Counters>,
    correlation_id: i32,
}

impl WriterState {
    fn run(mut self) -> WriterOutcome {
        let mut last_write = None;
        let mut records_left = self.records_total;
        let mut failure = None;
        sleep_until(self.schedule.start);
        for n in 0u64.. {
            let frame = match records_left {
                Some(0) => break,
                Some(left) if left < self.requests.frames[0].records => {
                    self.requests.tail.as_mut().expect("a remainder has a tail frame")
                }
                _ => {
                    let slot = (n % self.requests.frames.len() as u64) as usize;
                    &mut self.requests.frames[slot]
                }
            };
            let due = self.schedule.due(n);
            if let (Some(stop_at), Some(due)) = (self.schedule.stop_at, due) {
                if due >= stop_at {
                    break;
                }
            }
            if let Some(due) = due {
                sleep_until(due);
            }
            // acks=0 has no answers to wait for, so no window: the socket's buffer paces it.
            if self.in_flight.is_some() && self.slots.recv().is_err() {
                // The reader stopped: the connection broke; it has said why.
                break;
            }
            let now = Instant::now();
            if self
                .schedule
                .stop_at
                .is_some_and(|stop_at| due.is_none() && now >= stop_at)
            {
                break;
            }
            frame.bytes[CORRELATION_ID_AT].copy_from_slice(&self.correlation_id.to_be_bytes());
            let sent = InFlight {
                correlation_id: self.correlation_id,
                intended: due.unwrap_or(now),
                records: frame.records,
                payload_bytes: frame.payload_bytes,
            };
            if let Err(error) = self.writer.write_frame(&frame.bytes) {
                failure = Some(error.to_string());
                break;
            }
            last_write = Some(Instant::now());
            self.correlation_id = self.correlation_id.wrapping_add(1);
            account_sent(&self.counters, frame, self.in_flight.is_none());
            if let Some(left) = records_left.as_mut() {
                *left -= frame.records;
            }
            if let Some(in_flight) = &self.in_flight {
                if in_flight.send(sent).is_err() {
                    break;
                }
            }
        }
        // No half-close here: some brokers (librdkafka's mock) drop answers still owed once
        // they see end of stream. The socket closes when the reader is done too.
        drop(self.writer);
        WriterOutcome { last_write, failure }
    }
}

/// Counts a written request; with acks=0 writing it is all the acknowledgement there is.
fn account_sent(counters: &Counters, frame: &PooledFrame, counts_as_acked: bool) {
    counters.requests_sent.fetch_add(1, Ordering::Relaxed);
    counters.records_sent.fetch_add(frame.records, Ordering::Relaxed);
    counters
        .wire_bytes_sent
        .fetch_add(frame.bytes.len() as u64, Ordering::Relaxed);
    if counts_as_acked {
        counters.requests_acked.fetch_add(1, Ordering::Relaxed);
        counters.records_acked.fetch_add(frame.records, Ordering::Relaxed);
        counters
            .payload_bytes_acked
            .fetch_add(frame.payload_bytes, Ordering::Relaxed);
    }
}

fn sleep_until(when: Instant) {
    let now = Instant::now();
    if when > now {
        thread::sleep(when - now);
    }
}

struct ReaderState {
    reader: crate::client::FrameReader,
    produce_version: i16,
    in_flight: Receiver<InFlight>,
    slot_return: SyncSender<()>,
    counters: Arc<Counters>,
    interval: Arc<Mutex<Histogram<u64>>>,
    /// Fixed rate: time between two records of one connection.
    record_spacing: Option<Duration>,
}

impl ReaderState {
    fn run(mut self) -> ReaderOutcome {
        let mut outcome = ReaderOutcome {
            request_latency: run_histogram(),
            record_latency: run_histogram(),
            errors: BTreeMap::new(),
            first_error: None,
            last_answer: None,
        };
        while let Ok(sent) = self.in_flight.recv() {
            let answer = self
                .reader
                .read_frame()
                .and_then(|frame| self.check_answer(&frame, &sent));
            let now = Instant::now();
            match answer {
                Ok(None) => self.account_ack(&mut outcome, &sent, now),
                Ok(Some((name, message))) => {
                    *outcome.errors.entry(name).or_insert(0) += 1;
                    outcome.first_error.get_or_insert(message);
                }
                Err(error) => {
                    outcome.first_error.get_or_insert(error.to_string());
                    break;
                }
            }
            outcome.last_answer = Some(now);
            // Never blocks: at most `inflight` slots exist. Fails only once the writer is done,
            // and the answers still in flight must be read all the same.
            let _ = self.slot_return.send(());
        }
        outcome
    }

    /// `Ok(None)` when every partition succeeded, else the first partition error's name and a
    /// message.
    fn check_answer(&self, frame: &Bytes, sent: &InFlight) -> Result<Option<(String, String)>, BenchError> {
        let (header, response) = decode_response_frame::<ProduceResponse>(frame, self.produce_version)
            .map_err(|source| BenchError::Decode {
                context: format!(
                    "Produce v{} from {}",
                    self.produce_version,
                    self.reader.endpoint()
                ),
                source,
            })?;
        if header.correlation_id != sent.correlation_id {
            return Err(BenchError::OutOfOrder {
                endpoint: self.reader.endpoint().to_owned(),
                expected: sent.correlation_id,
                got: header.correlation_id,
            });
        }
        let failed = response
            .topics
            .iter()
            .flat_map(|topic| topic.partitions.iter().map(move |partition| (topic, partition)))
            .find(|(_, partition)| !partition.error_code.is_none());
        Ok(failed.map(|(topic, partition)| {
            let message = format!(
                "{} partition {} from {}: {}{}",
                topic.name,
                partition.index,
                self.reader.endpoint(),
                partition.error_code,
                partition
                    .error_message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            );
            (partition.error_code.name().to_owned(), message)
        }))
    }

    fn account_ack(&self, outcome: &mut ReaderOutcome, sent: &InFlight, now: Instant) {
        let latency = now.saturating_duration_since(sent.intended).as_nanos() as u64;
        record(&mut outcome.request_latency, latency, 1);
        match self.record_spacing {
            Some(spacing) => record_spread(&mut outcome.record_latency, latency, sent.records, spacing),
            None => record(&mut outcome.record_latency, latency, sent.records),
        }
        if let Ok(mut interval) = self.interval.lock() {
            record(&mut interval, latency, 1);
        }
        self.counters.requests_acked.fetch_add(1, Ordering::Relaxed);
        self.counters
            .records_acked
            .fetch_add(sent.records, Ordering::Relaxed);
        self.counters
            .payload_bytes_acked
            .fetch_add(sent.payload_bytes, Ordering::Relaxed);
    }
}

/// Groups per request when recording spread record latencies: bounds the harness's cost per
/// request while keeping each record's error under a 128th of the batch's fill time.
const RECORD_LATENCY_GROUPS: u64 = 64;

/// Records the latencies of `records` records sent together `request_latency` after the last
/// was due, record k of n having been due (n-1-k) `spacing`s before the request. Large batches
/// are recorded in [`RECORD_LATENCY_GROUPS`] groups, each at its middle record's latency.
fn record_spread(histogram: &mut Histogram<u64>, request_latency: u64, records: u64, spacing: Duration) {
    let spacing = spacing.as_nanos() as u64;
    let groups = records.min(RECORD_LATENCY_GROUPS);
    for group in 0..groups {
        let first = group * records / groups;
        let end = (group + 1) * records / groups;
        // Records first..end waited (records-1-k) spacings for k in that range; take the middle.
        let middle_wait = (2 * records - 1 - first - end) * spacing / 2;
        record(
            histogram,
            request_latency.saturating_add(middle_wait),
            end - first,
        );
    }
}

/// Samples the counters and interval histograms each second until the run ends; prints a line
/// per second when asked; returns the timeline.
fn spawn_progress(
    print: bool,
    server_pid: Option<u32>,
    start: Instant,
    counters: Arc<Counters>,
    intervals: Vec<Arc<Mutex<Histogram<u64>>>>,
    running: Arc<AtomicBool>,
) -> Result<JoinHandle<Vec<TimelinePoint>>, BenchError> {
    thread::Builder::new()
        .name("progress".into())
        .spawn(move || {
            sleep_until(start);
            let mut timeline = Vec::new();
            let mut previous = (start, 0u64, 0u64);
            let mut merged = interval_histogram();
            loop {
                let tick = previous.0 + Duration::from_secs(1);
                // Wake at the tick, or early (in 10 ms steps) when the run ends.
                while running.load(Ordering::SeqCst) && Instant::now() < tick {
                    thread::sleep(
                        Duration::from_millis(10).min(tick.saturating_duration_since(Instant::now())),
                    );
                }
                let now = Instant::now();
                merged.reset();
                for interval in &intervals {
                    if let Ok(mut histogram) = interval.lock() {
                        merged.add(&*histogram).ok();
                        histogram.reset();
                    }
                }
                let records = counters.records_acked.load(Ordering::SeqCst);
                let bytes = counters.payload_bytes_acked.load(Ordering::SeqCst);
                let point = TimelinePoint {
                    at_s: now.duration_since(start).as_secs_f64(),
                    span_s: now.duration_since(previous.0).as_secs_f64(),
                    records: records - previous.1,
                    payload_bytes: bytes - previous.2,
                    latency: LatencySummary::of(&merged),
                    server_rss_kib: server_pid
                        .and_then(proc_stat::sample)
                        .map(|sample| sample.rss_kib),
                };
                if print && point.span_s >= MIN_PRINTED_SPAN_S {
                    eprintln!("{}", progress_line(&point));
                }
                let finished = !running.load(Ordering::SeqCst);
                if point.records > 0 || point.latency.count > 0 || !finished {
                    timeline.push(point);
                }
                previous = (now, records, bytes);
                if finished {
                    return timeline;
                }
            }
        })
        .map_err(|source| BenchError::io("starting the progress thread", source))
}

/// `[  3.0s]   123456 rec/s   12.35 MB/s  p50 0.120 ms  p99 1.200 ms  max 3.400 ms`
pub fn progress_line(point: &TimelinePoint) -> String {
    let span = point.span_s.max(1e-9);
    let mut line = format!(
        "[{:6.1}s] {:>10.0} rec/s {:>9.2} MB/s  p50 {:.3} ms  p99 {:.3} ms  max {:.3} ms",
        point.at_s,
        point.records as f64 / span,
        point.payload_bytes as f64 / 1e6 / span,
        point.latency.p50_us / 1000.0,
        point.latency.p99_us / 1000.0,
        point.latency.max_us / 1000.0,
    );
    if let Some(rss) = point.server_rss_kib {
        line.push_str(&format!("  server RSS {} MiB", rss / 1024));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_records_cover_every_record_with_their_waits() {
        let mut histogram = run_histogram();
        // Ten records 1 ms apart, answered 2 ms after the last was due.
        record_spread(&mut histogram, 2_000_000, 10, Duration::from_millis(1));
        assert_eq!(histogram.len(), 10);
        assert_eq!(histogram.min(), histogram.lowest_equivalent(2_000_000));
        assert_eq!(histogram.max(), histogram.highest_equivalent(11_000_000));
    }

    #[test]
    fn large_batches_are_recorded_in_groups_that_keep_the_count_and_the_mean() {
        let mut histogram = run_histogram();
        record_spread(&mut histogram, 1_000_000, 1000, Duration::from_micros(5));
        assert_eq!(histogram.len(), 1000);
        // True mean: 1 ms + 999/2 * 5 us = 3.4975 ms.
        assert!(
            (histogram.mean() - 3_497_500.0).abs() < 5_000.0,
            "{}",
            histogram.mean()
        );
    }
}
