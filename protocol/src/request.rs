//! Whole-request decoding (header + body by API key) and generic error responses.

use bytes::{BufMut, Bytes, BytesMut};

use crate::api_versions::{ApiVersionsRequest, ApiVersionsResponse};
use crate::error::{DecodeError, EncodeError};
use crate::error_response::encode_layout_error_response;
use crate::header::RequestHeader;
use crate::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use crate::message::{encode_response_frame, Message};
use crate::metadata::{MetadataRequest, MetadataResponse, MetadataTopic};
use crate::produce::{ProduceRequest, ProduceResponse};
use crate::sasl::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use crate::topics::{CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse};
use crate::{ApiKey, ErrorCode};

/// A decoded request body of one of the APIs this crate knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// ApiVersions (18).
    ApiVersions(ApiVersionsRequest),
    /// Metadata (3).
    Metadata(MetadataRequest),
    /// SaslHandshake (17).
    SaslHandshake(SaslHandshakeRequest),
    /// SaslAuthenticate (36).
    SaslAuthenticate(SaslAuthenticateRequest),
    /// Produce (0).
    Produce(ProduceRequest),
    /// CreateTopics (19).
    CreateTopics(CreateTopicsRequest),
    /// DeleteTopics (20).
    DeleteTopics(DeleteTopicsRequest),
    /// InitProducerId (22).
    InitProducerId(InitProducerIdRequest),
}

impl Request {
    /// Decodes the body of a request described by `header`.
    ///
    /// Errors with [`DecodeError::UnsupportedApi`] for other API keys and
    /// [`DecodeError::UnsupportedVersion`] outside the versions in the message definitions (for
    /// ApiVersions, answer those with [`ApiVersionsResponse::unsupported_version_frame`]).
    pub fn decode(header: &RequestHeader, body: &Bytes) -> Result<Request, DecodeError> {
        let version = header.api_version;
        Ok(match header.api_key {
            ApiKey::API_VERSIONS => Request::ApiVersions(ApiVersionsRequest::decode(body, version)?),
            ApiKey::METADATA => Request::Metadata(MetadataRequest::decode(body, version)?),
            ApiKey::SASL_HANDSHAKE => Request::SaslHandshake(SaslHandshakeRequest::decode(body, version)?),
            ApiKey::SASL_AUTHENTICATE => {
                Request::SaslAuthenticate(SaslAuthenticateRequest::decode(body, version)?)
            }
            ApiKey::PRODUCE => Request::Produce(ProduceRequest::decode(body, version)?),
            ApiKey::CREATE_TOPICS => Request::CreateTopics(CreateTopicsRequest::decode(body, version)?),
            ApiKey::DELETE_TOPICS => Request::DeleteTopics(DeleteTopicsRequest::decode(body, version)?),
            ApiKey::INIT_PRODUCER_ID => {
                Request::InitProducerId(InitProducerIdRequest::decode(body, version)?)
            }
            other => return Err(DecodeError::UnsupportedApi(other)),
        })
    }

    /// The API key of this body.
    pub fn api_key(&self) -> ApiKey {
        match self {
            Request::ApiVersions(_) => ApiKey::API_VERSIONS,
            Request::Metadata(_) => ApiKey::METADATA,
            Request::SaslHandshake(_) => ApiKey::SASL_HANDSHAKE,
            Request::SaslAuthenticate(_) => ApiKey::SASL_AUTHENTICATE,
            Request::Produce(_) => ApiKey::PRODUCE,
            Request::CreateTopics(_) => ApiKey::CREATE_TOPICS,
            Request::DeleteTopics(_) => ApiKey::DELETE_TOPICS,
            Request::InitProducerId(_) => ApiKey::INIT_PRODUCER_ID,
        }
    }

    /// Encodes the response that fails this whole request with `error_code` at `version`,
    /// naming each of its topics/partitions where the API has them (as the Java broker's
    /// `getErrorResponse`). A complete frame, ready to write.
    pub fn error_response_frame(
        &self,
        correlation_id: i32,
        version: i16,
        error_code: ErrorCode,
        error_message: Option<&str>,
    ) -> Result<Bytes, EncodeError> {
        match self {
            Request::Produce(request) => encode_response_frame(
                correlation_id,
                version,
                &request.error_response(error_code, error_message),
            ),
            Request::Metadata(request) => {
                let topics = request
                    .topics
                    .iter()
                    .flatten()
                    .map(|topic| MetadataTopic::error(topic.name.clone(), topic.topic_id, error_code))
                    .collect();
                let response = MetadataResponse {
                    topics,
                    ..empty_metadata_response(error_code)
                };
                encode_response_frame(correlation_id, version, &response)
            }
            Request::CreateTopics(request) => encode_response_frame(
                correlation_id,
                version,
                &request.error_response(error_code, error_message),
            ),
            Request::DeleteTopics(request) => encode_response_frame(
                correlation_id,
                version,
                &request.error_response(error_code, error_message),
            ),
            Request::SaslAuthenticate(_) => {
                let response = SaslAuthenticateResponse {
                    error_code,
                    error_message: error_message.map(str::to_owned),
                    auth_bytes: Bytes::new(),
                    session_lifetime_ms: 0,
                };
                encode_response_frame(correlation_id, version, &response)
            }
            Request::ApiVersions(_) | Request::SaslHandshake(_) | Request::InitProducerId(_) => {
                encode_error_response(self.api_key(), version, correlation_id, error_code, error_message)
            }
        }
    }
}

/// A Metadata response without brokers or topics; `error_code` is carried from v13, which has
/// a top-level error code.
fn empty_metadata_response(error_code: ErrorCode) -> MetadataResponse {
    MetadataResponse {
        throttle_time_ms: 0,
        brokers: Vec::new(),
        cluster_id: None,
        controller_id: -1,
        topics: Vec::new(),
        cluster_authorized_operations: crate::metadata::AUTHORIZED_OPERATIONS_OMITTED,
        error_code,
    }
}

/// Decodes a whole request frame body (without its size prefix): header, then the body by API.
pub fn decode_request(frame: &Bytes) -> Result<(RequestHeader, Request), DecodeError> {
    let (header, body) = RequestHeader::decode(frame)?;
    let request = Request::decode(&header, &body)?;
    Ok((header, request))
}

/// Encodes a complete response frame answering a request with `error_code` when nothing but its
/// header is known: for APIs with a top-level error code (ApiVersions, SaslHandshake,
/// SaslAuthenticate, InitProducerId, Metadata from v13) the code is carried there; for the
/// others the response has no topics.
///
/// This crate's codecs answer ApiVersions (any version; unknown ones get the v0 layout),
/// Metadata v0–13, SaslHandshake v0–1, SaslAuthenticate v0–2, Produce v0–13, CreateTopics v0–7,
/// DeleteTopics v0–6 and InitProducerId v0–6. Any other API and version Kafka 4.4 defines is
/// answered from its layout ([`crate::error_response::encode_layout_error_response`], with
/// `error_message` where the response has a top-level error message; the codecs' answers carry
/// none, but SaslAuthenticate's). Anything else (a version or API key Kafka 4.4 does not define) is
/// [`EncodeError::UnsupportedVersion`]: the broker should close the connection then.
pub fn encode_error_response(
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    error_code: ErrorCode,
    error_message: Option<&str>,
) -> Result<Bytes, EncodeError> {
    match api_key {
        ApiKey::API_VERSIONS if !ApiVersionsResponse::supports_version(api_version) => {
            let mut buf = BytesMut::with_capacity(14);
            buf.put_i32(10);
            buf.put_i32(correlation_id);
            buf.put_i16(error_code.code());
            buf.put_i32(0);
            Ok(buf.freeze())
        }
        ApiKey::API_VERSIONS => encode_response_frame(
            correlation_id,
            api_version,
            &ApiVersionsResponse::new(error_code, Vec::new()),
        ),
        ApiKey::METADATA if MetadataResponse::supports_version(api_version) => {
            encode_response_frame(correlation_id, api_version, &empty_metadata_response(error_code))
        }
        ApiKey::SASL_HANDSHAKE if SaslHandshakeResponse::supports_version(api_version) => {
            encode_response_frame(
                correlation_id,
                api_version,
                &SaslHandshakeResponse {
                    error_code,
                    mechanisms: Vec::new(),
                },
            )
        }
        ApiKey::SASL_AUTHENTICATE if SaslAuthenticateResponse::supports_version(api_version) => {
            encode_response_frame(
                correlation_id,
                api_version,
                &SaslAuthenticateResponse {
                    error_code,
                    error_message: error_message.map(str::to_owned),
                    auth_bytes: Bytes::new(),
                    session_lifetime_ms: 0,
                },
            )
        }
        ApiKey::PRODUCE if ProduceResponse::supports_version(api_version) => encode_response_frame(
            correlation_id,
            api_version,
            &ProduceResponse {
                topics: Vec::new(),
                throttle_time_ms: 0,
                node_endpoints: Vec::new(),
            },
        ),
        ApiKey::CREATE_TOPICS if CreateTopicsResponse::supports_version(api_version) => {
            encode_response_frame(
                correlation_id,
                api_version,
                &CreateTopicsResponse {
                    throttle_time_ms: 0,
                    topics: Vec::new(),
                },
            )
        }
        ApiKey::DELETE_TOPICS if DeleteTopicsResponse::supports_version(api_version) => {
            encode_response_frame(
                correlation_id,
                api_version,
                &DeleteTopicsResponse {
                    throttle_time_ms: 0,
                    responses: Vec::new(),
                },
            )
        }
        ApiKey::INIT_PRODUCER_ID if InitProducerIdResponse::supports_version(api_version) => {
            encode_response_frame(
                correlation_id,
                api_version,
                &InitProducerIdResponse::error(error_code),
            )
        }
        other => encode_layout_error_response(other, api_version, correlation_id, error_code, error_message),
    }
}
