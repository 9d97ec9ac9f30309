//! SaslHandshake (17, v0–1), SaslAuthenticate (36, v0–2) and the raw PLAIN token that follows
//! a SaslHandshake v0. The decisions are `kafluss_auth::SaslSession`'s; this file only decodes,
//! asks, encodes, and closes the connection when the session says so.

use bytes::Bytes;
use kafluss_protocol::encode_response_frame;
use kafluss_protocol::{ErrorCode, RequestHeader};
use kafluss_protocol::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};

use std::rc::Rc;
use std::time::Instant;

use kafluss_auth::plain::PlainToken;
use kafluss_auth::sasl_state::{FailureReason, SaslFailure};
use kafluss_auth::{CredentialStore, HeldTurn, Principal, SaslSession};

use super::connection::log_close;
use super::context::ConnectionContext;
use super::errors::KafkaCode;
use super::{Dispatch, HandlerError, PendingResponse, Response};
use crate::sched::StopSignal;

pub fn handshake(
    context: &ConnectionContext,
    header: &RequestHeader,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let version = header.api_version;
    let request = super::decode_request::<SaslHandshakeRequest>(&body, version)
        .map_err(|e| HandlerError::undecodable("SaslHandshake", version, e))?;
    let outcome = context
        .sasl
        .borrow_mut()
        .on_handshake(version, &request.mechanism);
    if let Err(failure) = outcome.result {
        // Every refused SASL step closes the connection (`kafluss_auth::sasl_state`).
        let peer = context.peer;
        log_close(
            &context.core,
            close_kind(&failure.reason),
            |suppressed| tracing::info!(%peer, suppressed, "closing Kafka connection: SASL handshake refused: {failure}"),
        );
    }
    let response = SaslHandshakeResponse {
        error_code: outcome
            .result
            .err()
            .map_or(ErrorCode::None, |failure| KafkaCode::code(&failure.code)),
        mechanisms: outcome.enabled_mechanisms.iter().map(|m| m.to_string()).collect(),
    };
    let frame = encode_response_frame(header.correlation_id, version, &response)
        .map_err(HandlerError::encode("SaslHandshake", version))?;
    Ok(Response {
        frame: Some(frame),
        close_after: outcome.close_after(),
        failed: outcome.result.is_err(),
    })
}

pub fn authenticate(
    context: &Rc<ConnectionContext>,
    header: &RequestHeader,
    body: Bytes,
) -> Result<PendingResponse, HandlerError> {
    let version = header.api_version;
    let correlation_id = header.correlation_id;
    let request = super::decode_request::<SaslAuthenticateRequest>(&body, version)
        .map_err(|e| HandlerError::undecodable("SaslAuthenticate", version, e))?;
    let user = token_user(&request.auth_bytes);
    let answer = move |context: &ConnectionContext, turn: HeldTurn| {
        let result = checked(context, turn, &request.auth_bytes, |session, store| {
            session.on_authenticate(&request.auth_bytes, store)
        });
        let (response, close_after) = match result {
            Ok(_) => (
                SaslAuthenticateResponse {
                    error_code: ErrorCode::None,
                    error_message: None,
                    auth_bytes: Bytes::new(),
                    session_lifetime_ms: kafluss_auth::sasl_state::SESSION_LIFETIME_MS,
                },
                false,
            ),
            Err(failure) => (
                SaslAuthenticateResponse {
                    error_code: KafkaCode::code(&failure.code),
                    error_message: Some(failure.message.to_string()),
                    auth_bytes: Bytes::new(),
                    session_lifetime_ms: 0,
                },
                failure.close_after,
            ),
        };
        let failed = !response.error_code.is_none();
        let frame = encode_response_frame(correlation_id, version, &response);
        match frame {
            Ok(frame) => Response {
                frame: Some(frame),
                close_after,
                failed,
            },
            Err(e) => {
                tracing::warn!("cannot encode SaslAuthenticate response: {e}");
                Response {
                    frame: None,
                    close_after: true,
                    failed: true,
                }
            }
        }
    };
    Ok(after_turn(context, &user, answer))
}

/// The frame after a SaslHandshake v0 is the PLAIN token itself. Success is answered with an
/// empty frame (as Kafka does); failure closes the connection without an answer.
pub fn raw_token(context: &Rc<ConnectionContext>, token: &Bytes) -> Dispatch {
    let user = token_user(token);
    let token = token.clone();
    let answer = move |context: &ConnectionContext, turn: HeldTurn| {
        let result = checked(context, turn, &token, |session, store| {
            session.on_raw_token(&token, store)
        });
        match result {
            Ok(_) => Response::frame(super::framed(&[]), false),
            Err(_) => Response {
                frame: None,
                close_after: true,
                failed: true,
            },
        }
    };
    Dispatch::Respond {
        api_key: kafluss_protocol::ApiKey::SASL_AUTHENTICATE.0,
        response: after_turn(context, &user, answer),
        held: None,
    }
}

/// Runs `answer` once this attempt's turn under the login throttle has come: at once when the
/// client address and user have no recent failures, else when its turn comes (the password is
/// not checked before then, so parallel guesses are serialised, each waiting one counted as a
/// failure until `answer` books its outcome on the turn). An attempt whose client goes away
/// before its turn is dropped unanswered and gives its turn back, so closed connections push
/// neither the next logins of their address and user nor those already waiting further away:
/// the attempts queued behind it move up ([`turn_comes`]).
fn after_turn(
    context: &Rc<ConnectionContext>,
    user: &str,
    answer: impl FnOnce(&ConnectionContext, HeldTurn) -> Response + 'static,
) -> PendingResponse {
    let throttle = &context.core.runtime().login_throttle;
    let turn = throttle.hold(Instant::now(), context.peer.ip(), user);
    let wait = turn.wait();
    if wait.is_zero() {
        return PendingResponse::Ready(answer(context, turn));
    }
    // The connection dispatches nothing more until this attempt is answered or dropped.
    let settled = Rc::new(StopSignal::default());
    context.login_pending.set(Some(Rc::clone(&settled)));
    let settles = StopsOnDrop(settled);
    let context = Rc::clone(context);
    let gone = Rc::clone(&context);
    PendingResponse::Later(Box::pin(async move {
        let _settles = settles;
        futures_lite::future::or(
            async move {
                turn_comes(&turn).await;
                answer(&context, turn)
            },
            async move {
                gone.client_gone.stopping().await;
                Response {
                    frame: None,
                    close_after: true,
                    failed: true,
                }
            },
        )
        .await
    }))
}

/// Returns when `turn` comes: sleeps until its time, and wakes earlier when the attempts queued
/// ahead of it give their turns back (the throttle wakes this task, from whichever core the
/// connection that closed was on, and the sleep starts again for the earlier time), so an
/// attempt never waits for attempts that were dropped. Nothing runs while neither happens.
async fn turn_comes(turn: &HeldTurn) {
    let mut at = turn.turn();
    loop {
        let left = at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        at = futures_lite::future::or(
            async {
                glommio::timer::sleep(left).await;
                at
            },
            std::future::poll_fn(|cx| turn.poll_earlier(cx, at)),
        )
        .await;
    }
}

/// Stops its signal when dropped: when the future holding it ends, or is dropped unfinished.
struct StopsOnDrop(Rc<StopSignal>);

impl Drop for StopsOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// Runs one authentication step of the session and books its outcome on the attempt's turn (a
/// failure that checked no password, such as a request in the wrong state, gives the turn
/// back). A failed login (wrong password, malformed PLAIN message) is logged at WARN with the
/// user and address (never the password), each one: the login throttle paces them. Any other
/// refusal is a client's protocol mistake, logged as the connection close it is, repeat-limited
/// per kind ([`close_kind`]).
fn checked(
    context: &ConnectionContext,
    turn: HeldTurn,
    token: &[u8],
    step: impl FnOnce(&mut SaslSession, &CredentialStore) -> Result<Principal, SaslFailure>,
) -> Result<Principal, SaslFailure> {
    let user = token_user(token);
    let runtime = context.core.runtime();
    let result = step(&mut context.sasl.borrow_mut(), &runtime.credentials);
    match &result {
        Ok(principal) => {
            turn.succeeded();
            tracing::debug!(peer = %context.peer, %principal, "SASL/PLAIN authenticated");
        }
        Err(failure) => {
            let peer = context.peer;
            if matches!(
                failure.reason,
                FailureReason::InvalidCredentials | FailureReason::MalformedToken(_)
            ) {
                turn.failed(Instant::now());
                tracing::warn!(%peer, user = ?user, "SASL authentication failed: {failure}");
            } else {
                log_close(
                    &context.core,
                    close_kind(&failure.reason),
                    |suppressed| tracing::info!(%peer, user = ?user, suppressed, "closing Kafka connection: SASL authentication refused: {failure}"),
                );
            }
        }
    }
    result
}

/// The kind of a refused SASL step, as the key of its repeat-limited close line
/// (`server.log-repeat-interval`): what the client did wrong, without its details.
fn close_kind(reason: &FailureReason) -> &'static str {
    match reason {
        FailureReason::PlaintextListener => "SASL request on a plaintext listener",
        FailureReason::UnsupportedMechanism => "SASL mechanism other than PLAIN",
        FailureReason::UnsupportedHandshakeVersion(_) => "unsupported SaslHandshake version",
        FailureReason::OutOfOrder { .. } => "SASL request out of order",
        FailureReason::MalformedToken(_) => "malformed PLAIN message",
        FailureReason::InvalidCredentials => "invalid user name or password",
    }
}

/// The user name a PLAIN message claims (empty when it does not parse).
fn token_user(token: &[u8]) -> String {
    PlainToken::parse(token)
        .map(|t| t.username.to_string())
        .unwrap_or_default()
}
