//! The threads of one connection under load: a writer keeping up to `inflight` requests in flight
//! (on a schedule at a fixed rate) and a reader matching answers in order, recording latency
//! from each request's intended send time.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use kafluss_protocol::{decode_response_frame, ProduceResponse};

use crate::client::{FrameReader, FrameWriter, KafkaConnection, NegotiatedVersions};
use crate::error::BenchError;
use crate::histogram::{record, run_histogram};
use crate::workload::{PooledFrame, RequestPool, StopAfter, Workload, CORRELATION_ID_AT};

/// Stack of each writer/reader thread: they hold little.
const THREAD_STACK: usize = 256 * 1024;

/// Counters shared by all threads of a run (read by the progress thread).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) requests_acked: AtomicU64,
    pub(crate) records_acked: AtomicU64,
    pub(crate) payload_bytes_acked: AtomicU64,
    pub(crate) requests_sent: AtomicU64,
    pub(crate) records_sent: AtomicU64,
    pub(crate) wire_bytes_sent: AtomicU64,
}

/// A request written and not yet answered.
#[derive(Debug, Clone, Copy)]
struct InFlight {
    correlation_id: i32,
    intended: Instant,
    records: u64,
    payload_bytes: u64,
}

/// Slow requests listed per connection at most (the rest are only counted).
pub const MAX_SLOW_LISTED: usize = 1000;

/// A request slower than the run's threshold.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SlowRequest {
    /// When it was due (fixed rate) or written (flat out), seconds since the run's start.
    pub sent_at_s: f64,
    /// From then until its answer, milliseconds.
    pub latency_ms: f64,
    /// The connection (0-based) that sent it.
    pub connection: usize,
    /// Records in it.
    pub records: u64,
}

/// What a reader thread hands back.
pub(crate) struct ReaderOutcome {
    pub(crate) slow: Vec<SlowRequest>,
    pub(crate) slow_total: u64,
    pub(crate) request_latency: Histogram<u64>,
    pub(crate) record_latency: Histogram<u64>,
    pub(crate) errors: BTreeMap<String, u64>,
    pub(crate) first_error: Option<String>,
    pub(crate) last_answer: Option<Instant>,
}

/// What a writer thread hands back.
pub(crate) struct WriterOutcome {
    pub(crate) last_write: Option<Instant>,
    pub(crate) failure: Option<String>,
}

/// A connection ready to carry load.
pub(crate) struct LoadConnection {
    pub(crate) connection: KafkaConnection,
    pub(crate) versions: NegotiatedVersions,
    pub(crate) requests: RequestPool,
    pub(crate) records_total: Option<u64>,
}

pub(crate) type Threads = (JoinHandle<WriterOutcome>, Option<JoinHandle<ReaderOutcome>>);

/// Starts the writer (and, unless acks=0, the reader) of one connection.
pub(crate) fn spawn_connection(
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
            index,
            start,
            warmup: workload.warmup,
            slow_threshold: workload.slow_threshold,
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
    writer: FrameWriter,
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

pub(crate) fn sleep_until(when: Instant) {
    let now = Instant::now();
    if when > now {
        thread::sleep(when - now);
    }
}

struct ReaderState {
    index: usize,
    start: Instant,
    warmup: Duration,
    slow_threshold: Duration,
    reader: FrameReader,
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
            slow: Vec::new(),
            slow_total: 0,
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
        let took = now.saturating_duration_since(sent.intended);
        let latency = took.as_nanos() as u64;
        let sent_at = sent.intended.saturating_duration_since(self.start);
        if sent_at >= self.warmup {
            record(&mut outcome.request_latency, latency, 1);
            match self.record_spacing {
                Some(spacing) => record_spread(&mut outcome.record_latency, latency, sent.records, spacing),
                None => record(&mut outcome.record_latency, latency, sent.records),
            }
        }
        if took > self.slow_threshold {
            outcome.slow_total += 1;
            if outcome.slow.len() < MAX_SLOW_LISTED {
                outcome.slow.push(SlowRequest {
                    sent_at_s: sent_at.as_secs_f64(),
                    latency_ms: took.as_secs_f64() * 1000.0,
                    connection: self.index,
                    records: sent.records,
                });
            }
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
