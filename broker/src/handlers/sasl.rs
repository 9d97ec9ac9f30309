//! SaslHandshake (17, v0–1), SaslAuthenticate (36, v0–2) and the raw PLAIN token that follows
//! a SaslHandshake v0. The decisions are `kafluss_auth::SaslSession`'s; this file only decodes,
//! asks, encodes, and closes the connection when the session says so.

use bytes::Bytes;
use kafluss_protocol::encode_response_frame;
use kafluss_protocol::{ErrorCode, RequestHeader};
use kafluss_protocol::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};

use crate::connection::ConnectionContext;

use super::{Dispatch, PendingResponse, Response};

pub fn handshake(
    context: &ConnectionContext,
    header: &RequestHeader,
    body: Bytes,
) -> Result<Response, String> {
    let version = header.api_version;
    let request = super::decode_request::<SaslHandshakeRequest>(&body, version)
        .map_err(|e| format!("undecodable SaslHandshake v{version} request: {e}"))?;
    let outcome = context
        .sasl
        .borrow_mut()
        .on_handshake(version, &request.mechanism);
    if let Err(failure) = outcome.result {
        tracing::info!(peer = %context.peer, "SASL handshake refused: {failure}");
    }
    let response = SaslHandshakeResponse {
        error_code: ErrorCode::from(outcome.error_code()),
        mechanisms: outcome.enabled_mechanisms.iter().map(|m| m.to_string()).collect(),
    };
    let frame = encode_response_frame(header.correlation_id, version, &response)
        .map_err(|e| format!("cannot encode SaslHandshake response: {e}"))?;
    Ok(Response {
        frame: Some(frame),
        close_after: outcome.close_after(),
        failed: outcome.result.is_err(),
    })
}

pub fn authenticate(
    context: &ConnectionContext,
    header: &RequestHeader,
    body: Bytes,
) -> Result<Response, String> {
    let version = header.api_version;
    let request = super::decode_request::<SaslAuthenticateRequest>(&body, version)
        .map_err(|e| format!("undecodable SaslAuthenticate v{version} request: {e}"))?;
    let result = context
        .sasl
        .borrow_mut()
        .on_authenticate(&request.auth_bytes, &context.shard.runtime().credentials);
    let (response, close_after) = match result {
        Ok(principal) => {
            tracing::debug!(peer = %context.peer, %principal, "SASL/PLAIN authenticated");
            (
                SaslAuthenticateResponse {
                    error_code: ErrorCode::None,
                    error_message: None,
                    auth_bytes: Bytes::new(),
                    session_lifetime_ms: kafluss_auth::sasl_state::SESSION_LIFETIME_MS,
                },
                false,
            )
        }
        Err(failure) => {
            tracing::info!(peer = %context.peer, "SASL authentication failed: {failure}");
            (
                SaslAuthenticateResponse {
                    error_code: ErrorCode::from(failure.code.code()),
                    error_message: Some(failure.message.to_string()),
                    auth_bytes: Bytes::new(),
                    session_lifetime_ms: 0,
                },
                failure.close_after,
            )
        }
    };
    let failed = !response.error_code.is_none();
    let frame = encode_response_frame(header.correlation_id, version, &response)
        .map_err(|e| format!("cannot encode SaslAuthenticate response: {e}"))?;
    Ok(Response {
        frame: Some(frame),
        close_after,
        failed,
    })
}

/// The frame after a SaslHandshake v0 is the PLAIN token itself. Success is answered with an
/// empty frame (as Kafka does); failure closes the connection without an answer.
pub fn raw_token(context: &ConnectionContext, token: &[u8]) -> Dispatch {
    let result = context
        .sasl
        .borrow_mut()
        .on_raw_token(token, &context.shard.runtime().credentials);
    match result {
        Ok(principal) => {
            tracing::debug!(peer = %context.peer, %principal, "SASL/PLAIN authenticated (v0)");
            Dispatch::Respond {
                api_key: kafluss_protocol::ApiKey::SASL_AUTHENTICATE.0,
                response: PendingResponse::Ready(Response::frame(super::framed(&[]), false)),
            }
        }
        Err(failure) => Dispatch::Close {
            why: format!("SASL authentication failed: {failure}"),
        },
    }
}
