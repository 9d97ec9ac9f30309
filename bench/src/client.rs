//! A blocking Kafka client connection over `std::net`: just enough to negotiate versions,
//! authenticate with SASL/PLAIN, look up a topic and then pipeline Produce requests.
//!
//! The connection splits into a [`FrameWriter`] and a [`FrameReader`] so that one thread can keep
//! a window of requests in flight while another reads the answers in order.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafluss_protocol::{
    decode_response_frame, encode_request_frame, ApiKey, ApiVersionsRequest, ApiVersionsResponse, ErrorCode,
    FrameSplitter, Message, MetadataRequest, MetadataResponse, RequestHeader, SaslAuthenticateRequest,
    SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};

use crate::error::BenchError;

/// The client id the harness sends in every request header.
pub const CLIENT_ID: &str = "kafluss-bench";
/// Largest answer frame accepted (Metadata of a big cluster stays far below).
const MAX_RESPONSE_FRAME: usize = 64 * 1024 * 1024;
/// Bytes read per `read` call at least (a hundred Produce answers fit).
const READ_CHUNK: usize = 8 * 1024;

/// The API versions both sides speak, highest first, as chosen after ApiVersions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NegotiatedVersions {
    /// Produce (the harness needs v3+: magic 2 record batches).
    pub produce: i16,
    /// Metadata (v1+: null topic list means all, leader ids).
    pub metadata: i16,
    /// SaslAuthenticate, when the broker offers it.
    pub sasl_authenticate: Option<i16>,
    /// SaslHandshake, when the broker offers it.
    pub sasl_handshake: Option<i16>,
}

/// Picks the highest version in both `ours` and the broker's range for `api`.
fn common_version(
    endpoint: &str,
    response: &ApiVersionsResponse,
    api: ApiKey,
    name: &'static str,
    ours: (i16, i16),
) -> Result<i16, BenchError> {
    optional_common_version(response, api, ours).ok_or_else(|| BenchError::NoCommonVersion {
        endpoint: endpoint.to_owned(),
        api: name,
        min: ours.0,
        max: ours.1,
    })
}

fn optional_common_version(response: &ApiVersionsResponse, api: ApiKey, ours: (i16, i16)) -> Option<i16> {
    let theirs = response.api_keys.iter().find(|range| range.api_key == api)?;
    let high = theirs.max_version.min(ours.1);
    (high >= ours.0.max(theirs.min_version)).then_some(high)
}

/// Reads whole response frames off a socket.
#[derive(Debug)]
pub struct FrameReader {
    stream: TcpStream,
    buf: BytesMut,
    chunk: Vec<u8>,
    splitter: FrameSplitter,
    endpoint: String,
}

impl FrameReader {
    /// Reads until one complete frame body (without its size prefix) is buffered and returns it.
    pub fn read_frame(&mut self) -> Result<Bytes, BenchError> {
        loop {
            let frame = self
                .splitter
                .split(&mut self.buf)
                .map_err(|source| BenchError::Frame {
                    context: self.endpoint.clone(),
                    source,
                })?;
            if let Some(frame) = frame {
                return Ok(frame);
            }
            if self.chunk.is_empty() {
                // Zeroed once per connection, not per read.
                self.chunk = vec![0u8; READ_CHUNK];
            }
            let read = self
                .stream
                .read(&mut self.chunk)
                .map_err(|source| BenchError::io(format!("reading from {}", self.endpoint), source))?;
            self.buf.extend_from_slice(&self.chunk[..read]);
            if read == 0 {
                return Err(BenchError::io(
                    format!("reading from {}", self.endpoint),
                    std::io::ErrorKind::UnexpectedEof.into(),
                ));
            }
        }
    }

    /// The peer this reader reads from.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }
}

/// Writes pre-encoded request frames to a socket.
#[derive(Debug)]
pub struct FrameWriter {
    stream: TcpStream,
    endpoint: String,
}

impl FrameWriter {
    /// Writes one whole frame (size prefix included).
    pub fn write_frame(&mut self, frame: &[u8]) -> Result<(), BenchError> {
        self.stream
            .write_all(frame)
            .map_err(|source| BenchError::io(format!("writing to {}", self.endpoint), source))
    }
}

/// One connection to a Kafka broker, before it is split for pipelining. It holds a single file
/// descriptor until split, so ten thousand idle connections fit under the usual limit of 20,000.
#[derive(Debug)]
pub struct KafkaConnection {
    reader: FrameReader,
    next_correlation_id: i32,
}

impl KafkaConnection {
    /// Connects (TCP_NODELAY, bounded connect time; reads time out after `io_timeout`).
    pub fn connect(endpoint: &str, io_timeout: Duration) -> Result<Self, BenchError> {
        let context = || format!("connecting to {endpoint}");
        let addr = endpoint
            .to_socket_addrs()
            .map_err(|source| BenchError::io(context(), source))?
            .next()
            .ok_or_else(|| BenchError::io(context(), std::io::ErrorKind::AddrNotAvailable.into()))?;
        let stream = TcpStream::connect_timeout(&addr, io_timeout)
            .map_err(|source| BenchError::io(context(), source))?;
        stream
            .set_nodelay(true)
            .and_then(|()| stream.set_read_timeout(Some(io_timeout)))
            .map_err(|source| BenchError::io(context(), source))?;
        Ok(Self {
            reader: FrameReader {
                stream,
                buf: BytesMut::new(),
                chunk: Vec::new(),
                splitter: FrameSplitter::new(MAX_RESPONSE_FRAME),
                endpoint: endpoint.to_owned(),
            },
            next_correlation_id: 1,
        })
    }

    /// The peer's address as given.
    pub fn endpoint(&self) -> &str {
        &self.reader.endpoint
    }

    /// The correlation id the next request will carry.
    pub fn next_correlation_id(&self) -> i32 {
        self.next_correlation_id
    }

    /// Sends one request and waits for its answer.
    fn call<Req: Message, Resp: Message>(&mut self, version: i16, request: &Req) -> Result<Resp, BenchError> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let header = RequestHeader::new(Req::API_KEY, version, correlation_id, Some(CLIENT_ID));
        let mut frame = BytesMut::new();
        encode_request_frame(&mut frame, &header, request).map_err(|source| BenchError::Encode {
            what: Req::API_KEY.name(),
            source,
        })?;
        (&self.reader.stream)
            .write_all(&frame)
            .map_err(|source| BenchError::io(format!("writing to {}", self.endpoint()), source))?;
        let answer = self.reader.read_frame()?;
        let (header, response) =
            decode_response_frame::<Resp>(&answer, version).map_err(|source| BenchError::Decode {
                context: format!("{} v{version} from {}", Req::API_KEY.name(), self.endpoint()),
                source,
            })?;
        if header.correlation_id != correlation_id {
            return Err(BenchError::OutOfOrder {
                endpoint: self.endpoint().to_owned(),
                expected: correlation_id,
                got: header.correlation_id,
            });
        }
        Ok(response)
    }

    /// ApiVersions (v3, falling back to the v0 answer a broker gives when it does not know v3),
    /// then the highest common version of each API the harness uses.
    pub fn negotiate(&mut self) -> Result<NegotiatedVersions, BenchError> {
        let request = ApiVersionsRequest {
            client_software_name: CLIENT_ID.to_owned(),
            client_software_version: env!("CARGO_PKG_VERSION").to_owned(),
            unknown_tagged_fields: Vec::new(),
        };
        let response = match self.call::<_, ApiVersionsResponse>(3, &request) {
            Ok(response) if response.error_code.is_none() => response,
            // A broker without v3 answers in v0 format (which v3 decoding may or may not accept).
            _ => {
                let response = self.call::<_, ApiVersionsResponse>(0, &ApiVersionsRequest::default())?;
                if !response.error_code.is_none() {
                    return Err(BenchError::Broker {
                        context: format!("ApiVersions to {}", self.endpoint()),
                        code: response.error_code,
                        message: None,
                    });
                }
                response
            }
        };
        let endpoint = self.endpoint().to_owned();
        Ok(NegotiatedVersions {
            produce: common_version(&endpoint, &response, ApiKey::PRODUCE, "Produce", (3, 11))?,
            metadata: common_version(&endpoint, &response, ApiKey::METADATA, "Metadata", (1, 12))?,
            sasl_handshake: optional_common_version(&response, ApiKey::SASL_HANDSHAKE, (1, 1)),
            sasl_authenticate: optional_common_version(&response, ApiKey::SASL_AUTHENTICATE, (0, 2)),
        })
    }

    /// SASL/PLAIN: SaslHandshake v1 then one SaslAuthenticate with `NUL user NUL password`.
    pub fn authenticate_plain(
        &mut self,
        versions: &NegotiatedVersions,
        user: &str,
        password: &str,
    ) -> Result<(), BenchError> {
        let endpoint = self.endpoint().to_owned();
        let missing = |api: &'static str, min, max| BenchError::NoCommonVersion {
            endpoint: endpoint.clone(),
            api,
            min,
            max,
        };
        let handshake_version = versions
            .sasl_handshake
            .ok_or_else(|| missing("SaslHandshake", 1, 1))?;
        let authenticate_version = versions
            .sasl_authenticate
            .ok_or_else(|| missing("SaslAuthenticate", 0, 2))?;
        let handshake: SaslHandshakeResponse = self.call(
            handshake_version,
            &SaslHandshakeRequest {
                mechanism: "PLAIN".to_owned(),
            },
        )?;
        if !handshake.error_code.is_none() {
            return Err(BenchError::Broker {
                context: format!("SaslHandshake PLAIN to {endpoint}"),
                code: handshake.error_code,
                message: Some(format!("broker offers {:?}", handshake.mechanisms)),
            });
        }
        let mut token = Vec::with_capacity(user.len() + password.len() + 2);
        token.push(0);
        token.extend_from_slice(user.as_bytes());
        token.push(0);
        token.extend_from_slice(password.as_bytes());
        let answer: SaslAuthenticateResponse = self.call(
            authenticate_version,
            &SaslAuthenticateRequest {
                auth_bytes: Bytes::from(token),
            },
        )?;
        if answer.error_code.is_none() {
            Ok(())
        } else {
            Err(BenchError::Broker {
                context: format!("SaslAuthenticate as {user} to {endpoint}"),
                code: answer.error_code,
                message: answer.error_message,
            })
        }
    }

    /// Metadata for one topic, allowing auto-creation (as the Java producer does; brokers that
    /// create topics on demand, such as librdkafka's mock cluster, need it; kafluss ignores it).
    ///
    /// An answer that does not decode is asked again at older versions: librdkafka's mock
    /// cluster writes a stray byte into flexible Metadata answers.
    pub fn metadata(&mut self, version: i16, topic: &str) -> Result<MetadataResponse, BenchError> {
        let mut request = MetadataRequest::for_names(Some(&[topic]));
        request.allow_auto_topic_creation = true;
        let mut first_error = None;
        let older = [8, 4, 1].into_iter().filter(|older| *older < version);
        for candidate in std::iter::once(version).chain(older) {
            match self.call(candidate, &request) {
                Ok(response) => return Ok(response),
                Err(error @ BenchError::Decode { .. }) => {
                    first_error.get_or_insert(error);
                }
                Err(other) => return Err(other),
            }
        }
        Err(first_error.expect("the negotiated version was tried"))
    }

    /// Frees the read buffer: ten thousand idle connections should cost the harness little.
    pub fn release_buffers(&mut self) {
        self.reader.buf = BytesMut::new();
        self.reader.chunk = Vec::new();
    }

    /// Splits into the writing and the reading half (a second descriptor for the writer).
    pub fn split(self) -> Result<(FrameWriter, FrameReader), BenchError> {
        let stream = self.reader.stream.try_clone().map_err(|source| {
            BenchError::io(format!("splitting the connection to {}", self.endpoint()), source)
        })?;
        let writer = FrameWriter {
            stream,
            endpoint: self.reader.endpoint.clone(),
        };
        Ok((writer, self.reader))
    }
}

/// Where each partition of a topic is led, from a Metadata answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicLayout {
    /// `host:port` of the leader of partition `i` at index `i`.
    pub leaders: Vec<String>,
}

impl TopicLayout {
    /// Reads the layout of `topic` from a Metadata answer.
    pub fn from_metadata(
        endpoint: &str,
        topic: &str,
        metadata: &MetadataResponse,
    ) -> Result<Self, BenchError> {
        let fail = |reason: String| BenchError::Metadata {
            endpoint: endpoint.to_owned(),
            topic: topic.to_owned(),
            reason,
        };
        let entry = metadata
            .topics
            .iter()
            .find(|entry| entry.name.as_deref() == Some(topic))
            .ok_or_else(|| fail("not in the answer".into()))?;
        if entry.error_code != ErrorCode::None {
            return Err(fail(format!("error {}", entry.error_code)));
        }
        if entry.partitions.is_empty() {
            return Err(fail("no partitions".into()));
        }
        let mut leaders = vec![String::new(); entry.partitions.len()];
        for partition in &entry.partitions {
            let index = usize::try_from(partition.partition_index)
                .ok()
                .filter(|index| *index < leaders.len())
                .ok_or_else(|| {
                    fail(format!(
                        "partition index {} out of range",
                        partition.partition_index
                    ))
                })?;
            let broker = metadata
                .brokers
                .iter()
                .find(|broker| broker.node_id == partition.leader_id)
                .ok_or_else(|| fail(format!("partition {index} has no known leader")))?;
            leaders[index] = format_endpoint(&broker.host, broker.port);
        }
        if let Some(index) = leaders.iter().position(String::is_empty) {
            return Err(fail(format!("partition {index} missing")));
        }
        Ok(Self { leaders })
    }
}

/// `host:port`, bracketing IPv6 literals.
pub fn format_endpoint(host: &str, port: i32) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}
