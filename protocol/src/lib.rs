//! Sans-IO Kafka wire protocol: bytes in, typed frames out, and back. No sockets, no async.
//!
//! # Public API (stable; other crates build on these names)
//!
//! **Framing** ([`frame`]): [`frame_len`]`(prefix: [u8; 4], max) -> Result<usize, FrameError>`
//! judges a length prefix alone ([`FrameError::TooLarge`] `{ size, max }`, `Negative`);
//! [`FrameSplitter::new(max)`](FrameSplitter::new) `.split(&mut BytesMut) -> Result<Option<Bytes>, _>`
//! cuts complete frame bodies off a read buffer, `.bytes_needed(&[u8])` says how much to read.
//!
//! **Headers** ([`header`]): [`RequestHeader::decode`]`(&Bytes) -> Result<(RequestHeader, Bytes /* body */), DecodeError>`
//! (v0/v1/v2 by [`ApiKey::request_header_version`]; any API key decodes),
//! [`RequestHeader::peek`] for just key/version/correlation id, [`ResponseHeader::encode`]
//! (v0/v1; ApiVersions always v0).
//!
//! **Requests and responses**: every body type implements [`Message`]
//! (`decode(&Bytes, version)`, `encode(&mut BytesMut, version)`, `API_KEY`, `MIN_VERSION`,
//! `MAX_VERSION`). [`decode_request`]`(&Bytes) -> Result<(RequestHeader, Request), DecodeError>`
//! decodes header + body into the [`Request`] enum; [`encode_response_frame`]`(correlation_id,
//! version, &body) -> Result<Bytes, EncodeError>` makes a complete frame (size prefix + header +
//! body) ready for the socket; [`encode_request_frame`] does the same for clients (bench);
//! [`decode_response_frame`] reads one back. Versions (from the Kafka JSON definitions):
//! ApiVersions 0–4, Metadata 0–13, SaslHandshake 0–1, SaslAuthenticate 0–2, InitProducerId 0–6, Produce 0–13
//! (v13 names topics by id), CreateTopics 0–7, DeleteTopics 0–6. What kafluss advertises is the
//! broker's choice (`kafluss-broker`'s API registry), not this list.
//!
//! **Error answers**: [`Request::error_response_frame`]`(correlation_id, version, ErrorCode,
//! Option<&str>)` fails a decoded request naming each topic/partition;
//! [`encode_error_response`]`(api_key, api_version, correlation_id, ErrorCode)` answers from the
//! header alone: with this crate's codec where it has one for the API and version, else from
//! the API's layout ([`encode_layout_error_response`]`(api_key, version, correlation_id,
//! ErrorCode, Option<&str>)`, [`error_response`]: a table of every Kafka 4.4 response generated
//! by `protocol/gen/error_layouts.py`); [`ApiVersionsResponse::unsupported_version_frame`] is the
//! v0-format UNSUPPORTED_VERSION fallback. Produce/CreateTopics/DeleteTopics requests also offer
//! `error_response(ErrorCode, Option<&str>)` returning the typed response.
//!
//! **Record batches** ([`record_batch`]): [`RecordBatches::new`]`(records: Bytes)` iterates the
//! batches of a produce `records` field; [`RecordBatch::parse`]`(Bytes)` /
//! [`RecordBatch::split_first`] parse one (61-byte header, CRC32C verified, magic 0/1 →
//! [`RecordBatchError::LegacyMagic`]); [`RecordBatch::records`]`(max_decompressed_size) ->
//! Result<Records, _>` decompresses under the bound and iterates [`Record`]s (owned zero-copy
//! `Bytes` slices) or, faster, [`Records::next_ref`] → [`RecordRef`] (borrowed slices).
//! [`RecordBatchBuilder`] encodes batches with any [`Compression`]; [`compression::decompress`]
//! / [`compression::compress`] are the codecs (snappy raw and xerial framing).
//! [`crc::crc32c`] / [`crc::crc32c_append`] are the one CRC32C of the project (the broker's
//! stored batches use it too).
//!
//! **Errors**: [`ErrorCode`] (Kafka wire codes, `From<i16>`, `.code()`) is apart from the
//! `thiserror` types [`DecodeError`], [`EncodeError`], [`FrameError`], [`RecordBatchError`],
//! [`CompressionError`]. Mapping to Kafka codes is the broker's job, except that
//! [`RecordBatchError::error_code`] gives the mapping `behaviour.md` fixes for batch
//! problems (CRC → CORRUPT_MESSAGE, legacy magic → UNSUPPORTED_FOR_MESSAGE_FORMAT, too large
//! after decompression → MESSAGE_TOO_LARGE, other malformations → INVALID_RECORD).

pub mod api_key;
pub mod api_versions;
pub mod compression;
pub mod crc;
pub mod error;
pub mod error_code;
pub mod error_response;
pub mod frame;
pub mod header;
pub mod init_producer_id;
pub mod message;
pub mod metadata;
pub mod primitives;
pub mod produce;
pub mod record_batch;
pub mod record_builder;
pub mod request;
pub mod sasl;
pub mod topics;

pub use api_key::{ApiInfo, ApiKey, API_TABLE};
pub use api_versions::{
    ApiVersionRange, ApiVersionsRequest, ApiVersionsResponse, FinalizedFeature, SupportedFeature,
};
pub use compression::{Compression, CompressionError};
pub use error::{DecodeError, EncodeError};
pub use error_code::ErrorCode;
pub use error_response::{encode_layout_error_response, ResponseLayout};
pub use frame::{frame_len, FrameError, FrameSplitter, FRAME_PREFIX_LEN};
pub use header::{RequestHeader, ResponseHeader};
pub use init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
pub use message::{decode_response_frame, encode_request_frame, encode_response_frame, Message};
pub use metadata::{
    MetadataBroker, MetadataPartition, MetadataRequest, MetadataRequestTopic, MetadataResponse,
    MetadataTopic, AUTHORIZED_OPERATIONS_OMITTED,
};
pub use primitives::{RawTaggedField, Uuid};
pub use produce::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, ProducePartitionData,
    ProducePartitionResponse, ProduceRequest, ProduceResponse, ProduceTopicData, ProduceTopicResponse,
};
pub use record_batch::{
    bytes_after_first_batch, BatchAttributes, Header, HeaderRef, HeadersRef, Record, RecordBatch,
    RecordBatchError, RecordBatches, RecordRef, Records, TimestampType, RECORD_BATCH_HEADER_LEN,
};
pub use record_builder::RecordBatchBuilder;
pub use request::{decode_request, encode_error_response, Request};
pub use sasl::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
pub use topics::{
    CreatableTopic, CreatableTopicResult, CreateTopicsRequest, CreateTopicsResponse, DeletableTopicResult,
    DeleteTopicState, DeleteTopicsRequest, DeleteTopicsResponse,
};
