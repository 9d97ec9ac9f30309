//! The null sink: a Kafka endpoint that answers ApiVersions, Metadata (any topic, N partitions,
//! itself the leader), SASL (any credentials) and Produce with success, storing nothing. What the
//! harness reaches against it is the ceiling of the protocol on this machine.
//!
//! One thread per connection over `std::net`; answers to all requests that arrived in one read
//! leave in one write, in request order.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use bytes::{Bytes, BytesMut};
use kafluss_protocol::{
    decode_request, encode_error_response, encode_response_frame, ApiKey, ApiVersionRange,
    ApiVersionsResponse, ErrorCode, FrameSplitter, MetadataBroker, MetadataPartition, MetadataResponse,
    MetadataTopic, ProducePartitionResponse, ProduceRequest, ProduceResponse, ProduceTopicResponse, Request,
    RequestHeader, SaslAuthenticateResponse, SaslHandshakeResponse, Uuid, AUTHORIZED_OPERATIONS_OMITTED,
};

use crate::error::BenchError;

/// Largest request accepted (kafluss's default `kafka.max-request-size`).
const MAX_REQUEST_FRAME: usize = 100 * 1024 * 1024;
/// Stack of a connection thread.
const CONNECTION_STACK: usize = 128 * 1024;
/// Bytes read per `read` call.
const READ_CHUNK: usize = 256 * 1024;
/// The sink's only node id.
const NODE_ID: i32 = 0;
/// Byte offsets inside a record batch (magic 2) used to walk batches without parsing them.
const BATCH_LENGTH_AT: usize = 8;
const BATCH_RECORD_COUNT_AT: usize = 57;
const BATCH_HEADER_LEN: usize = 61;

/// What the sink has acknowledged so far.
#[derive(Debug, Default)]
pub struct SinkStats {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Produce requests answered (or, for acks=0, taken).
    pub produce_requests: AtomicU64,
    /// Records in partitions answered with success.
    pub records: AtomicU64,
    /// Record batch bytes in those partitions.
    pub batch_bytes: AtomicU64,
    /// Partitions answered with an error (malformed batches).
    pub rejected_partitions: AtomicU64,
}

/// A running sink; dropping it stops accepting (open connections run until their peers close).
#[derive(Debug)]
pub struct SinkHandle {
    local_addr: SocketAddr,
    stats: Arc<SinkStats>,
    stopping: Arc<AtomicBool>,
}

impl SinkHandle {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Its counters.
    pub fn stats(&self) -> &SinkStats {
        &self.stats
    }
}

impl Drop for SinkHandle {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag; failure means it is gone already.
        let _ = TcpStream::connect(self.local_addr);
    }
}

/// Shared by every connection of one sink.
#[derive(Debug)]
struct SinkState {
    advertised: SocketAddr,
    partitions: i32,
    next_offset: AtomicI64,
    stats: Arc<SinkStats>,
}

/// Binds `listen` and serves in background threads.
pub fn start(listen: &str, partitions: u32) -> Result<SinkHandle, BenchError> {
    let listener =
        TcpListener::bind(listen).map_err(|source| BenchError::io(format!("binding {listen}"), source))?;
    let local_addr = listener
        .local_addr()
        .map_err(|source| BenchError::io(format!("binding {listen}"), source))?;
    let stats = Arc::new(SinkStats::default());
    let stopping = Arc::new(AtomicBool::new(false));
    let state = Arc::new(SinkState {
        advertised: local_addr,
        partitions: i32::try_from(partitions.max(1)).unwrap_or(i32::MAX),
        next_offset: AtomicI64::new(0),
        stats: Arc::clone(&stats),
    });
    let accept_stopping = Arc::clone(&stopping);
    thread::Builder::new()
        .name("sink-accept".into())
        .spawn(move || accept_loop(listener, state, accept_stopping))
        .map_err(|source| BenchError::io("starting the sink", source))?;
    Ok(SinkHandle {
        local_addr,
        stats,
        stopping,
    })
}

fn accept_loop(listener: TcpListener, state: Arc<SinkState>, stopping: Arc<AtomicBool>) {
    for stream in listener.incoming() {
        if stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        state.stats.connections.fetch_add(1, Ordering::Relaxed);
        let state = Arc::clone(&state);
        let spawned = thread::Builder::new()
            .name("sink-conn".into())
            .stack_size(CONNECTION_STACK)
            .spawn(move || serve_connection(stream, &state));
        if spawned.is_err() {
            // Out of threads: the stream was moved into the failed closure and is closed with it.
            continue;
        }
    }
}

/// Reads frames until the peer closes or sends something undecodable.
fn serve_connection(mut stream: TcpStream, state: &SinkState) {
    // Nagle would hold small answers back; a failure only costs latency.
    let _ = stream.set_nodelay(true);
    let splitter = FrameSplitter::new(MAX_REQUEST_FRAME);
    let mut buf = BytesMut::new();
    // Zeroed once: growing `buf` for every read would clear the whole chunk each time.
    let mut chunk = vec![0u8; READ_CHUNK];
    let mut out = BytesMut::new();
    loop {
        let read = match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        buf.extend_from_slice(&chunk[..read]);
        loop {
            match splitter.split(&mut buf) {
                Ok(Some(frame)) => match answer(&frame, state) {
                    Ok(Some(response)) => out.extend_from_slice(&response),
                    Ok(None) => {}
                    Err(()) => return,
                },
                Ok(None) => break,
                Err(_) => return,
            }
        }
        if !out.is_empty() {
            if stream.write_all(&out).is_err() {
                return;
            }
            out.clear();
        }
    }
}

/// The answer to one request frame; `Ok(None)` for acks=0 Produce; `Err` closes the connection.
fn answer(frame: &Bytes, state: &SinkState) -> Result<Option<Bytes>, ()> {
    let (header, request) = match decode_request(frame) {
        Ok(decoded) => decoded,
        Err(_) => return unsupported(frame).map(Some),
    };
    let version = header.api_version;
    let correlation_id = header.correlation_id;
    let encoded = match request {
        Request::ApiVersions(_) => encode_response_frame(
            correlation_id,
            version,
            &ApiVersionsResponse::new(ErrorCode::None, ranges()),
        ),
        Request::Metadata(request) => {
            let names: Vec<String> = match request.topics {
                Some(topics) => topics.into_iter().filter_map(|topic| topic.name).collect(),
                None => vec!["bench".to_owned()],
            };
            encode_response_frame(correlation_id, version, &metadata(state, names))
        }
        Request::SaslHandshake(_) => encode_response_frame(
            correlation_id,
            version,
            &SaslHandshakeResponse {
                error_code: ErrorCode::None,
                mechanisms: vec!["PLAIN".to_owned()],
            },
        ),
        Request::SaslAuthenticate(_) => encode_response_frame(
            correlation_id,
            version,
            &SaslAuthenticateResponse {
                error_code: ErrorCode::None,
                error_message: None,
                auth_bytes: Bytes::new(),
                session_lifetime_ms: 0,
            },
        ),
        Request::Produce(request) => {
            let response = produce(state, &request);
            if request.acks == 0 {
                return Ok(None);
            }
            encode_response_frame(correlation_id, version, &response)
        }
        Request::CreateTopics(_) | Request::DeleteTopics(_) | Request::InitProducerId(_) => {
            encode_error_response(
                header.api_key,
                version,
                correlation_id,
                ErrorCode::UnsupportedVersion,
                None,
            )
        }
    };
    encoded.map(Some).map_err(|_| ())
}

/// Answers a request this sink does not decode with UNSUPPORTED_VERSION from its header alone.
fn unsupported(frame: &Bytes) -> Result<Bytes, ()> {
    let (api_key, version, correlation_id) = RequestHeader::peek(frame).map_err(|_| ())?;
    if api_key == ApiKey::API_VERSIONS {
        return Ok(ApiVersionsResponse::unsupported_version_frame(
            correlation_id,
            ranges(),
        ));
    }
    encode_error_response(
        api_key,
        version,
        correlation_id,
        ErrorCode::UnsupportedVersion,
        None,
    )
    .map_err(|_| ())
}

/// The versions the sink answers (the same ranges kafluss advertises).
fn ranges() -> Vec<ApiVersionRange> {
    let range = |api_key, min_version, max_version| ApiVersionRange {
        api_key,
        min_version,
        max_version,
    };
    vec![
        range(ApiKey::PRODUCE, 3, 11),
        range(ApiKey::METADATA, 0, 12),
        range(ApiKey::SASL_HANDSHAKE, 0, 1),
        range(ApiKey::API_VERSIONS, 0, 4),
        range(ApiKey::SASL_AUTHENTICATE, 0, 2),
    ]
}

fn metadata(state: &SinkState, names: Vec<String>) -> MetadataResponse {
    let topics = names
        .into_iter()
        .map(|name| MetadataTopic {
            error_code: ErrorCode::None,
            topic_id: topic_id(&name),
            name: Some(name),
            is_internal: false,
            partitions: (0..state.partitions)
                .map(|partition_index| MetadataPartition::single_replica(partition_index, NODE_ID))
                .collect(),
            topic_authorized_operations: AUTHORIZED_OPERATIONS_OMITTED,
        })
        .collect();
    MetadataResponse {
        throttle_time_ms: 0,
        brokers: vec![MetadataBroker {
            node_id: NODE_ID,
            host: state.advertised.ip().to_string(),
            port: i32::from(state.advertised.port()),
            rack: None,
        }],
        cluster_id: Some("kafluss-null-sink".to_owned()),
        controller_id: NODE_ID,
        topics,
        cluster_authorized_operations: AUTHORIZED_OPERATIONS_OMITTED,
        error_code: ErrorCode::None,
    }
}

/// A stable, non-zero topic id from the name (FNV-1a, twice).
fn topic_id(name: &str) -> Uuid {
    let fnv = |seed: u64| {
        name.bytes().fold(seed, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3)
        })
    };
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&fnv(0xcbf2_9ce4_8422_2325).to_be_bytes());
    id[8..].copy_from_slice(&fnv(0x8422_2325_cbf2_9ce4).to_be_bytes());
    Uuid(id)
}

fn produce(state: &SinkState, request: &ProduceRequest) -> ProduceResponse {
    state.stats.produce_requests.fetch_add(1, Ordering::Relaxed);
    let topics = request
        .topics
        .iter()
        .map(|topic| ProduceTopicResponse {
            name: topic.name.clone(),
            topic_id: topic.topic_id,
            partitions: topic
                .partitions
                .iter()
                .map(|partition| {
                    let records = partition.records.as_deref().unwrap_or_default();
                    match count_records(records) {
                        Some(count) if count > 0 && (0..state.partitions).contains(&partition.index) => {
                            state.stats.records.fetch_add(count, Ordering::Relaxed);
                            state
                                .stats
                                .batch_bytes
                                .fetch_add(records.len() as u64, Ordering::Relaxed);
                            let base = state.next_offset.fetch_add(count as i64, Ordering::Relaxed);
                            ProducePartitionResponse::success(partition.index, base, 0)
                        }
                        _ => {
                            state.stats.rejected_partitions.fetch_add(1, Ordering::Relaxed);
                            ProducePartitionResponse::error(
                                partition.index,
                                ErrorCode::InvalidRecord,
                                Some("null sink: no well-formed record batch"),
                            )
                        }
                    }
                })
                .collect(),
        })
        .collect();
    ProduceResponse {
        topics,
        throttle_time_ms: 0,
        node_endpoints: Vec::new(),
    }
}

/// Sums the record counts of the batches in `records` by their headers alone (no CRC check,
/// no decompression: the sink stores nothing). `None` when the batches do not tile the input.
pub fn count_records(mut records: &[u8]) -> Option<u64> {
    let mut total = 0u64;
    while !records.is_empty() {
        let header = records.get(..BATCH_HEADER_LEN)?;
        let length = i32::from_be_bytes(header[BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4].try_into().ok()?);
        let count = i32::from_be_bytes(
            header[BATCH_RECORD_COUNT_AT..BATCH_RECORD_COUNT_AT + 4]
                .try_into()
                .ok()?,
        );
        let end = usize::try_from(length).ok()?.checked_add(BATCH_LENGTH_AT + 4)?;
        if end < BATCH_HEADER_LEN || end > records.len() {
            return None;
        }
        total += u64::try_from(count).ok()?;
        records = &records[end..];
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafluss_protocol::{Compression, RecordBatchBuilder};

    fn batch(records: usize) -> Bytes {
        let mut builder = RecordBatchBuilder::new(Compression::Zstd);
        for _ in 0..records {
            builder.append(1, None, Some(b"v"), &[]);
        }
        builder.build().unwrap()
    }

    #[test]
    fn counts_records_over_several_batches() {
        let mut both = batch(3).to_vec();
        both.extend_from_slice(&batch(4));
        assert_eq!(count_records(&both), Some(7));
        assert_eq!(count_records(&[]), Some(0));
    }

    #[test]
    fn malformed_batches_do_not_count() {
        let whole = batch(3);
        assert_eq!(count_records(&whole[..whole.len() - 1]), None);
        assert_eq!(count_records(&whole[..20]), None);
        let mut negative = whole.to_vec();
        negative[8..12].copy_from_slice(&(-5i32).to_be_bytes());
        assert_eq!(count_records(&negative), None);
    }

    #[test]
    fn topic_ids_are_stable_and_distinct() {
        assert_eq!(topic_id("a"), topic_id("a"));
        assert_ne!(topic_id("a"), topic_id("b"));
        assert_ne!(topic_id("a"), Uuid::ZERO);
    }
}
