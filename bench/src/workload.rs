//! What one run sends: the options of `kafluss-bench produce` as a plain struct, and the
//! pre-encoded Produce request frames each connection cycles through.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use kafluss_protocol::{
    encode_request_frame, ApiKey, Compression, ProducePartitionData, ProduceRequest, ProduceTopicData,
    RecordBatchBuilder, RequestHeader,
};

use crate::client::CLIENT_ID;
use crate::error::BenchError;
use crate::producer::VALUE_POOL;
use crate::values::{smallest_value_size, RecordPool, ValueKind};

/// Where the correlation id sits in an encoded request frame: after the 4-byte size, the api key
/// and the api version. Patched per send so pooled frames can be reused.
pub const CORRELATION_ID_AT: std::ops::Range<usize> = 8..12;
/// Upper bound on the memory all pooled request frames of a run may take.
const POOL_BUDGET_BYTES: usize = 256 * 1024 * 1024;

/// When a run stops sending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopAfter {
    /// After this long (requests already sent are still awaited).
    Duration(Duration),
    /// After this many records in total.
    Records(u64),
}

/// Every option of a produce run.
#[derive(Debug, Clone)]
pub struct Workload {
    /// The topic written to.
    pub topic: String,
    /// Connections carrying load (each to the leader of partition `index % partitions`).
    pub connections: usize,
    /// Requests in flight per connection.
    pub inflight: usize,
    /// Records per request (one batch, one partition).
    pub batch_records: usize,
    /// At a fixed rate, a batch leaves when full or when its first record is this old.
    pub linger: Option<Duration>,
    /// -1, 0 or 1.
    pub acks: i16,
    /// Batch codec.
    pub compression: Compression,
    /// What values look like.
    pub value_kind: ValueKind,
    /// Value size in bytes.
    pub message_size: usize,
    /// Key size in bytes (0: null keys).
    pub key_size: usize,
    /// Headers per record.
    pub headers: usize,
    /// Records per second over all connections (open loop); `None` sends as fast as acks allow.
    pub rate: Option<f64>,
    /// When to stop.
    pub stop: StopAfter,
    /// SASL/PLAIN user and password.
    pub sasl: Option<(String, String)>,
    /// Distinct request frames per connection (cycled; more costs memory, not time).
    pub distinct_requests: usize,
    /// Extra connections opened (ApiVersions + Metadata) and left idle during the load.
    pub idle_connections: usize,
    /// Bound on every socket read; also the Produce timeout sent to the broker.
    pub io_timeout: Duration,
    /// Print a progress line each second on stderr.
    pub progress: bool,
    /// Requests due (fixed rate) or sent (flat out) in the run's first stretch this long are
    /// left out of the latency figures (connections and caches warming up); the timeline and
    /// the throughput keep them.
    pub warmup: Duration,
    /// Every request slower than this is listed with its send time.
    pub slow_threshold: Duration,
}

impl Workload {
    /// Checks the options that cannot make a run.
    pub fn validate(&self) -> Result<(), BenchError> {
        let fail = |message: &str| Err(BenchError::Options(message.to_owned()));
        if self.connections == 0 {
            return fail("--connections must be at least 1");
        }
        if self.inflight == 0 {
            return fail("--inflight must be at least 1");
        }
        if self.batch_records == 0 {
            return fail("--batch-records must be at least 1");
        }
        if !matches!(self.acks, -1..=1) {
            return fail("--acks must be -1, 0 or 1");
        }
        if let Some(rate) = self.rate {
            if !(rate.is_finite() && rate > 0.0) {
                return fail("--rate must be a positive number of records per second");
            }
        }
        let smallest = smallest_value_size(self.value_kind, VALUE_POOL as u64);
        if self.message_size < smallest {
            return Err(BenchError::Options(format!(
                "--message-size {} is below the smallest {} value, {smallest} bytes: give at least {smallest} \
                 (smaller values would come out larger than asked)",
                self.message_size,
                self.value_kind.name()
            )));
        }
        match self.stop {
            StopAfter::Duration(duration) if duration.is_zero() => fail("--duration must be positive"),
            StopAfter::Duration(duration) if self.warmup >= duration => Err(BenchError::Options(format!(
                "--warmup-s {} is not shorter than the run (--duration {}): no request would be left \
                 for the latency figures",
                self.warmup.as_secs_f64(),
                duration.as_secs_f64()
            ))),
            StopAfter::Records(0) => fail("--records must be at least 1"),
            _ => Ok(()),
        }
    }

    /// Records per request actually sent. At a fixed rate with a linger, a batch holds the records
    /// that arrive within the linger (the rate is constant, so that is a constant), at most
    /// `batch_records`; flat out, batches are always full.
    pub fn records_per_request(&self) -> usize {
        match (self.rate, self.linger) {
            (Some(rate), Some(linger)) => {
                let per_connection = rate / self.connections as f64;
                let arrived = (per_connection * linger.as_secs_f64()).floor() as usize;
                arrived.clamp(1, self.batch_records)
            }
            _ => self.batch_records,
        }
    }

    /// Records connection `index` sends when the run stops after a record count.
    pub fn records_for_connection(&self, index: usize, total: u64) -> u64 {
        let connections = self.connections as u64;
        total / connections + u64::from((index as u64) < total % connections)
    }
}

/// The request frames one connection sends, with their record counts and payload sizes.
#[derive(Debug, Clone)]
pub struct RequestPool {
    /// Full requests, cycled.
    pub frames: Vec<PooledFrame>,
    /// A last, shorter request when a record count does not divide into full ones.
    pub tail: Option<PooledFrame>,
}

/// One encoded Produce request.
#[derive(Debug, Clone)]
pub struct PooledFrame {
    /// The whole frame; bytes [`CORRELATION_ID_AT`] are overwritten before each send.
    pub bytes: BytesMut,
    /// Records in it.
    pub records: u64,
    /// Key + value + header bytes in it (before compression).
    pub payload_bytes: u64,
}

/// Encodes one Produce request of `records` records taken from `pool` starting at `first`.
pub fn encode_request(
    workload: &Workload,
    produce_version: i16,
    partition: i32,
    pool: &RecordPool,
    first: usize,
    records: usize,
) -> Result<PooledFrame, BenchError> {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64);
    let headers: Vec<(&[u8], Option<&[u8]>)> = pool
        .headers
        .iter()
        .map(|(name, value)| (name.as_slice(), Some(value.as_slice())))
        .collect();
    let mut batch = RecordBatchBuilder::new(workload.compression);
    let mut payload_bytes = 0u64;
    for n in first..first + records {
        let value = &pool.values[n % pool.values.len()];
        let key = (!pool.keys.is_empty()).then(|| pool.keys[n % pool.keys.len()].as_slice());
        batch.append(now_ms, key, Some(value), &headers);
        payload_bytes += pool.payload_len(n) as u64;
    }
    let request = ProduceRequest {
        transactional_id: None,
        acks: workload.acks,
        timeout_ms: i32::try_from(workload.io_timeout.as_millis()).unwrap_or(i32::MAX),
        topics: vec![ProduceTopicData {
            name: workload.topic.clone(),
            topic_id: kafluss_protocol::Uuid::ZERO,
            partitions: vec![ProducePartitionData {
                index: partition,
                records: Some(batch.build()?),
            }],
        }],
        unknown_tagged_fields: Vec::new(),
    };
    let header = RequestHeader::new(ApiKey::PRODUCE, produce_version, 0, Some(CLIENT_ID));
    let mut bytes = BytesMut::new();
    encode_request_frame(&mut bytes, &header, &request).map_err(|source| BenchError::Encode {
        what: "Produce",
        source,
    })?;
    Ok(PooledFrame {
        bytes,
        records: records as u64,
        payload_bytes,
    })
}

impl RequestPool {
    /// Builds connection `index`'s frames: up to `distinct_requests` full ones (fewer when they
    /// would pass the memory budget) and, when `records_total` is not a multiple of a request,
    /// the shorter last one.
    pub fn build(
        workload: &Workload,
        produce_version: i16,
        partition: i32,
        index: usize,
        pool: &RecordPool,
        records_total: Option<u64>,
    ) -> Result<Self, BenchError> {
        let per_request = workload.records_per_request();
        let first_record = index * workload.distinct_requests * per_request;
        let first = encode_request(
            workload,
            produce_version,
            partition,
            pool,
            first_record,
            per_request,
        )?;
        let budget_per_connection = POOL_BUDGET_BYTES / workload.connections;
        let affordable = (budget_per_connection / first.bytes.len().max(1)).max(1);
        let count = workload.distinct_requests.clamp(1, affordable);
        let mut frames = Vec::with_capacity(count);
        frames.push(first);
        for k in 1..count {
            let start = first_record + k * per_request;
            frames.push(encode_request(
                workload,
                produce_version,
                partition,
                pool,
                start,
                per_request,
            )?);
        }
        let tail = match records_total.map(|total| total % per_request as u64) {
            Some(rest) if rest > 0 => Some(encode_request(
                workload,
                produce_version,
                partition,
                pool,
                first_record,
                rest as usize,
            )?),
            _ => None,
        };
        Ok(Self { frames, tail })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use kafluss_protocol::{decode_request, Request};

    fn workload() -> Workload {
        Workload {
            topic: "t".into(),
            connections: 2,
            inflight: 4,
            batch_records: 10,
            linger: None,
            acks: 1,
            compression: Compression::Lz4,
            value_kind: ValueKind::JsonFlat,
            message_size: 100,
            key_size: 4,
            headers: 1,
            rate: None,
            stop: StopAfter::Records(25),
            sasl: None,
            distinct_requests: 3,
            idle_connections: 0,
            io_timeout: Duration::from_secs(5),
            progress: false,
            warmup: Duration::ZERO,
            slow_threshold: Duration::from_millis(50),
        }
    }

    #[test]
    fn pooled_frames_decode_as_produce_requests_with_their_record_counts() {
        let workload = workload();
        let pool = RecordPool::new(ValueKind::JsonFlat, 100, 4, 1, 16, 1);
        let requests = RequestPool::build(&workload, 9, 1, 0, &pool, Some(25)).unwrap();
        assert_eq!(requests.frames.len(), 3);
        let tail = requests.tail.as_ref().unwrap();
        assert_eq!(tail.records, 5);
        for frame in requests.frames.iter().chain(Some(tail)) {
            let body = Bytes::copy_from_slice(&frame.bytes[4..]);
            let (header, request) = decode_request(&body).unwrap();
            assert_eq!(header.api_version, 9);
            let Request::Produce(produce) = request else {
                panic!("not a produce request")
            };
            assert_eq!(produce.acks, 1);
            let partition = &produce.topics[0].partitions[0];
            assert_eq!(partition.index, 1);
            let batches: Vec<_> = kafluss_protocol::RecordBatches::new(partition.records.clone().unwrap())
                .collect::<Result<_, _>>()
                .unwrap();
            assert_eq!(batches.len(), 1);
            let records = batches[0].records(1 << 20).unwrap().count();
            assert_eq!(records as u64, frame.records);
        }
    }

    #[test]
    fn options_that_cannot_make_the_run_asked_are_refused() {
        assert!(workload().validate().is_ok());
        let mut small = workload();
        small.message_size = 72;
        let error = small.validate().unwrap_err().to_string();
        assert!(
            error.contains("--message-size 72 is below the smallest json-flat value, 73 bytes"),
            "{error}"
        );
        small.message_size = 73;
        assert!(small.validate().is_ok());
        small.value_kind = ValueKind::Random;
        small.message_size = 0;
        assert!(small.validate().is_ok());
        let mut timed = workload();
        timed.stop = StopAfter::Duration(Duration::from_secs(2));
        timed.warmup = Duration::from_secs(2);
        let error = timed.validate().unwrap_err().to_string();
        assert!(
            error.contains("--warmup-s 2 is not shorter than the run (--duration 2)"),
            "{error}"
        );
        timed.warmup = Duration::from_millis(1999);
        assert!(timed.validate().is_ok());
    }

    #[test]
    fn linger_at_a_fixed_rate_caps_the_batch() {
        let mut workload = workload();
        workload.rate = Some(2000.0);
        workload.linger = Some(Duration::from_millis(2));
        // 1000 records/s per connection, 2 ms linger: 2 records per request.
        assert_eq!(workload.records_per_request(), 2);
        workload.linger = Some(Duration::from_secs(1));
        assert_eq!(workload.records_per_request(), 10);
        workload.linger = Some(Duration::from_micros(1));
        assert_eq!(workload.records_per_request(), 1);
    }

    #[test]
    fn record_counts_split_exactly_over_connections() {
        let mut workload = workload();
        workload.connections = 3;
        let total: u64 = (0..3).map(|i| workload.records_for_connection(i, 10)).sum();
        assert_eq!(total, 10);
        assert_eq!(workload.records_for_connection(0, 10), 4);
    }

    #[test]
    fn bad_options_are_refused() {
        let mut workload = workload();
        workload.acks = 2;
        assert!(workload.validate().is_err());
        let mut workload = self::workload();
        workload.rate = Some(0.0);
        assert!(workload.validate().is_err());
        assert!(self::workload().validate().is_ok());
    }
}
