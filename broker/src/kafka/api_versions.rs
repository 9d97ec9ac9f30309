//! ApiVersions (api key 18, v0–4), answered from the registry ([`super::apis`]).
//!
//! A version we do not know gets UNSUPPORTED_VERSION in v0 format with our ranges, and the
//! connection stays open so the client can retry with a version we support. A v3+ request
//! with invalid client software fields gets INVALID_REQUEST.

use bytes::Bytes;
use kafluss_protocol::{encode_response_frame, Message};
use kafluss_protocol::{ApiKey, ErrorCode, RequestHeader};
use kafluss_protocol::{ApiVersionRange, ApiVersionsRequest, ApiVersionsResponse};

use super::errors::INVALID_CLIENT_SOFTWARE;
use super::{HandlerError, Response};

/// The advertised ranges, by api key.
pub fn advertised_ranges() -> Vec<ApiVersionRange> {
    super::apis::advertised()
        .into_iter()
        .map(|(api_key, min_version, max_version)| ApiVersionRange {
            api_key: ApiKey(api_key),
            min_version,
            max_version,
        })
        .collect()
}

pub fn handle(header: &RequestHeader, body: Bytes) -> Result<Response, HandlerError> {
    let version = header.api_version;
    if !ApiVersionsRequest::supports_version(version) {
        let frame =
            ApiVersionsResponse::unsupported_version_frame(header.correlation_id, advertised_ranges());
        return Ok(Response::frame(frame, true));
    }
    let error_code = match super::decode_request::<ApiVersionsRequest>(&body, version) {
        Ok(request) if version < 3 || request.has_valid_client_software() => ErrorCode::None,
        Ok(_) => INVALID_CLIENT_SOFTWARE,
        Err(e) => return Err(HandlerError::undecodable("ApiVersions", version, e)),
    };
    let response = ApiVersionsResponse::new(error_code, advertised_ranges());
    let frame = encode_response_frame(header.correlation_id, version, &response)
        .map_err(HandlerError::encode("ApiVersions", version))?;
    Ok(Response::frame(frame, !error_code.is_none()))
}
