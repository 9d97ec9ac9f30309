//! ApiVersions (api key 18, v0–4), answered from [`SUPPORTED_APIS`](super::SUPPORTED_APIS).
//!
//! A version we do not know gets UNSUPPORTED_VERSION in v0 format with our ranges, and the
//! connection stays open so the client can retry with a version we support. A v3+ request
//! with invalid client software fields gets INVALID_REQUEST.

use bytes::Bytes;
use kafluss_protocol::{encode_response_frame, Message};
use kafluss_protocol::{ApiKey, ErrorCode, RequestHeader};
use kafluss_protocol::{ApiVersionRange, ApiVersionsRequest, ApiVersionsResponse};

use super::{Response, SUPPORTED_APIS};

/// The advertised ranges, in registry order.
pub fn advertised_ranges() -> Vec<ApiVersionRange> {
    SUPPORTED_APIS
        .iter()
        .map(|range| ApiVersionRange {
            api_key: ApiKey(range.api_key),
            min_version: range.min,
            max_version: range.max,
        })
        .collect()
}

pub fn handle(header: &RequestHeader, body: Bytes) -> Result<Response, String> {
    let version = header.api_version;
    if !ApiVersionsRequest::supports_version(version) {
        let frame =
            ApiVersionsResponse::unsupported_version_frame(header.correlation_id, advertised_ranges());
        return Ok(Response::frame(frame, true));
    }
    let error_code = match super::decode_request::<ApiVersionsRequest>(&body, version) {
        Ok(request) if version < 3 || request.has_valid_client_software() => ErrorCode::None,
        Ok(_) => ErrorCode::InvalidRequest,
        Err(e) => return Err(format!("undecodable ApiVersions v{version} request: {e}")),
    };
    let response = ApiVersionsResponse::new(error_code, advertised_ranges());
    let frame = encode_response_frame(header.correlation_id, version, &response)
        .map_err(|e| format!("cannot encode ApiVersions v{version} response: {e}"))?;
    Ok(Response::frame(frame, !error_code.is_none()))
}
