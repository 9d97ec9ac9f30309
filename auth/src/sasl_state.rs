//! The per-connection SASL state machine, sans-IO: the broker feeds it what arrived and
//! acts on what it decides (serve, answer with a code, close).
//!
//! ```text
//! plaintext listener:  Authenticated(User:ANONYMOUS) from the start
//! sasl listener:
//!   AwaitingHandshake --SaslHandshake v1 PLAIN--> AwaitingAuthenticate --SaslAuthenticate ok--> Authenticated
//!   AwaitingHandshake --SaslHandshake v0 PLAIN--> AwaitingRawToken     --raw token ok---------> Authenticated
//!   any failure -----------------------------------------------------------------------------> Failed (close)
//! ```
//!
//! How the broker drives it:
//! 1. Before decoding a frame, check [`SaslSession::expects_raw_token`]. If true, the frame
//!    body is a raw PLAIN token (handshake v0): call [`SaslSession::on_raw_token`]; on `Ok`
//!    write an empty length-prefixed frame (4 zero bytes, the empty server challenge), on
//!    `Err` close without writing anything (a raw exchange has no way to carry an error).
//!    Frames over [`MAX_PLAIN_TOKEN_LEN`] bytes can be refused unread (close).
//! 2. Otherwise decode the request header and call [`SaslSession::on_request`] with the API
//!    key. [`Gate::CloseSilently`]: close without a response and without touching the body.
//! 3. SaslHandshake (17): answer with [`SaslSession::on_handshake`]'s code and mechanisms;
//!    close after writing when `close_after()`.
//! 4. SaslAuthenticate (36): [`SaslSession::on_authenticate`]. `Ok(principal)`: error 0,
//!    empty auth_bytes, session_lifetime_ms [`SESSION_LIFETIME_MS`]. `Err(failure)`: its code
//!    and fixed message, then close when `failure.close_after`.
//! 5. Every later ACL check uses [`SaslSession::principal`].
//!
//! Kafka error codes (Kafka protocol guide), as returned by [`SaslErrorCode::code`]:
//! NONE 0, UNSUPPORTED_SASL_MECHANISM 33, ILLEGAL_SASL_STATE 34, UNSUPPORTED_VERSION 35,
//! SASL_AUTHENTICATION_FAILED 58.

use std::fmt;

use crate::config::{ListenerSecurity, SaslMechanism};
use crate::credentials::CredentialStore;
use crate::plain::{PlainToken, PlainTokenError};
use crate::principal::Principal;

pub use crate::plain::MAX_PLAIN_TOKEN_LEN;

pub const API_KEY_SASL_HANDSHAKE: i16 = 17;
pub const API_KEY_API_VERSIONS: i16 = 18;
pub const API_KEY_SASL_AUTHENTICATE: i16 = 36;

/// kafluss does not support re-authentication: SaslAuthenticate v1+ answers 0.
pub const SESSION_LIFETIME_MS: i64 = 0;

/// The largest frame read from a connection that has not authenticated yet: 16 KiB. The only
/// requests served before a login (ApiVersions, SaslHandshake, SaslAuthenticate with a PLAIN
/// token of at most 767 bytes) are far smaller, and a frame's size is reserved from
/// `kafka.max-request-memory` as soon as its prefix is read: at Kafka's 512 KiB
/// (`sasl.server.max.receive.size`) 512 connections that never log in held a core's 256 MiB.
pub const MAX_UNAUTHENTICATED_FRAME_LEN: usize = 16 * 1024;

/// Mechanisms a SASL listener lists in SaslHandshake responses.
const SASL_MECHANISMS: &[&str] = &[SaslMechanism::Plain.as_str()];

/// The Kafka error codes the SASL exchange produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslErrorCode {
    None,
    UnsupportedSaslMechanism,
    IllegalSaslState,
    UnsupportedVersion,
    SaslAuthenticationFailed,
}

impl SaslErrorCode {
    pub const fn code(self) -> i16 {
        match self {
            SaslErrorCode::None => 0,
            SaslErrorCode::UnsupportedSaslMechanism => 33,
            SaslErrorCode::IllegalSaslState => 34,
            SaslErrorCode::UnsupportedVersion => 35,
            SaslErrorCode::SaslAuthenticationFailed => 58,
        }
    }
}

/// What to do with a request before it is decoded further.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    Serve,
    /// Close the connection, answer nothing, process nothing.
    CloseSilently,
}

/// Why an exchange failed, for the broker's log line. Holds no secret and no token byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureReason {
    /// A SASL message arrived in a state that does not accept it.
    OutOfOrder {
        message: &'static str,
        state: &'static str,
    },
    PlaintextListener,
    UnsupportedMechanism,
    UnsupportedHandshakeVersion(i16),
    MalformedToken(PlainTokenError),
    InvalidCredentials,
}

impl fmt::Display for FailureReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailureReason::OutOfOrder { message, state } => write!(f, "{message} received while {state}"),
            FailureReason::PlaintextListener => f.write_str("SASL message on a plaintext listener"),
            FailureReason::UnsupportedMechanism => {
                f.write_str("client asked for a mechanism other than PLAIN")
            }
            FailureReason::UnsupportedHandshakeVersion(v) => write!(f, "SaslHandshake version {v}"),
            FailureReason::MalformedToken(e) => write!(f, "malformed PLAIN message: {e}"),
            FailureReason::InvalidCredentials => f.write_str("invalid user name or password"),
        }
    }
}

/// A refused SASL step: the code and fixed message to send, and whether to close after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaslFailure {
    pub code: SaslErrorCode,
    /// Fixed text for the response's error_message; never derived from client input.
    pub message: &'static str,
    pub close_after: bool,
    pub reason: FailureReason,
}

impl fmt::Display for SaslFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.reason)
    }
}

impl std::error::Error for SaslFailure {}

pub const MESSAGE_AUTHENTICATION_FAILED: &str = "Authentication failed: invalid username or password";
pub const MESSAGE_MALFORMED_PLAIN: &str = "Authentication failed: malformed SASL/PLAIN message";
pub const MESSAGE_ILLEGAL_STATE: &str = "Unexpected SASL request in the current authentication state";
pub const MESSAGE_PLAINTEXT_LISTENER: &str = "SASL is not enabled on this listener";
pub const MESSAGE_UNSUPPORTED_MECHANISM: &str = "Unsupported SASL mechanism; enabled mechanisms: PLAIN";
pub const MESSAGE_UNSUPPORTED_VERSION: &str = "Unsupported SaslHandshake version; supported: 0-1";

/// The answer to a SaslHandshake request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandshakeOutcome {
    pub result: Result<(), SaslFailure>,
    /// For the response's `mechanisms` field: `["PLAIN"]` on SASL listeners, empty otherwise.
    pub enabled_mechanisms: &'static [&'static str],
}

impl HandshakeOutcome {
    pub fn error_code(&self) -> i16 {
        self.result.err().map_or(SaslErrorCode::None, |f| f.code).code()
    }

    pub fn close_after(&self) -> bool {
        self.result.is_err_and(|f| f.close_after)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    AwaitingHandshake,
    AwaitingAuthenticate,
    AwaitingRawToken,
    Authenticated(Principal),
    Failed,
}

impl State {
    fn describe(&self) -> &'static str {
        match self {
            State::AwaitingHandshake => "awaiting SaslHandshake",
            State::AwaitingAuthenticate => "awaiting SaslAuthenticate",
            State::AwaitingRawToken => "awaiting a raw PLAIN token",
            State::Authenticated(_) => "already authenticated",
            State::Failed => "after a failed authentication",
        }
    }
}

/// One connection's authentication state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslSession {
    listener: ListenerSecurity,
    state: State,
}

impl SaslSession {
    /// A plaintext listener's session is authenticated as `User:ANONYMOUS` at once.
    pub fn new(listener: ListenerSecurity) -> Self {
        let state = match listener {
            ListenerSecurity::Plaintext => State::Authenticated(Principal::anonymous()),
            ListenerSecurity::Sasl => State::AwaitingHandshake,
        };
        Self { listener, state }
    }

    /// The identity for ACL checks, once authenticated.
    pub fn principal(&self) -> Option<&Principal> {
        match &self.state {
            State::Authenticated(principal) => Some(principal),
            _ => None,
        }
    }

    pub fn is_authenticated(&self) -> bool {
        self.principal().is_some()
    }

    /// True right after a SaslHandshake v0: the next frame is a raw PLAIN token, not a
    /// Kafka request.
    pub fn expects_raw_token(&self) -> bool {
        self.state == State::AwaitingRawToken
    }

    /// True once the connection must be closed (a failure was returned earlier).
    pub fn is_failed(&self) -> bool {
        self.state == State::Failed
    }

    /// Longest frame worth reading now: [`MAX_PLAIN_TOKEN_LEN`] for a raw token,
    /// [`MAX_UNAUTHENTICATED_FRAME_LEN`] before authentication, `None` (the broker's own
    /// limit) afterwards.
    pub fn max_frame_len(&self) -> Option<usize> {
        match self.state {
            State::AwaitingRawToken => Some(MAX_PLAIN_TOKEN_LEN),
            State::Authenticated(_) => None,
            _ => Some(MAX_UNAUTHENTICATED_FRAME_LEN),
        }
    }

    /// Gate for a request with this API key. Before authentication only ApiVersions,
    /// SaslHandshake and SaslAuthenticate pass; anything else fails the session.
    pub fn on_request(&mut self, api_key: i16) -> Gate {
        let allowed = match self.state {
            State::Authenticated(_) => true,
            State::AwaitingHandshake | State::AwaitingAuthenticate => matches!(
                api_key,
                API_KEY_API_VERSIONS | API_KEY_SASL_HANDSHAKE | API_KEY_SASL_AUTHENTICATE
            ),
            // A Kafka request where a raw token was due, or anything after a failure.
            State::AwaitingRawToken | State::Failed => false,
        };
        if allowed {
            Gate::Serve
        } else {
            self.state = State::Failed;
            Gate::CloseSilently
        }
    }

    /// A SaslHandshake request of `version` asking for `mechanism`.
    pub fn on_handshake(&mut self, version: i16, mechanism: &str) -> HandshakeOutcome {
        let enabled_mechanisms = match self.listener {
            ListenerSecurity::Sasl => SASL_MECHANISMS,
            ListenerSecurity::Plaintext => &[],
        };
        let result = self.handshake(version, mechanism);
        if result.is_err() {
            self.state = State::Failed;
        }
        HandshakeOutcome {
            result,
            enabled_mechanisms,
        }
    }

    fn handshake(&mut self, version: i16, mechanism: &str) -> Result<(), SaslFailure> {
        if self.listener == ListenerSecurity::Plaintext {
            return Err(failure(
                SaslErrorCode::IllegalSaslState,
                MESSAGE_PLAINTEXT_LISTENER,
                FailureReason::PlaintextListener,
            ));
        }
        if self.state != State::AwaitingHandshake {
            return Err(self.out_of_order("SaslHandshake"));
        }
        let next = match version {
            0 => State::AwaitingRawToken,
            1 => State::AwaitingAuthenticate,
            v => {
                return Err(failure(
                    SaslErrorCode::UnsupportedVersion,
                    MESSAGE_UNSUPPORTED_VERSION,
                    FailureReason::UnsupportedHandshakeVersion(v),
                ))
            }
        };
        // Mechanism names are case-sensitive (Kafka).
        if mechanism != SaslMechanism::Plain.as_str() {
            return Err(failure(
                SaslErrorCode::UnsupportedSaslMechanism,
                MESSAGE_UNSUPPORTED_MECHANISM,
                FailureReason::UnsupportedMechanism,
            ));
        }
        self.state = next;
        Ok(())
    }

    /// A SaslAuthenticate request carrying `auth_bytes` (the PLAIN message).
    pub fn on_authenticate(
        &mut self,
        auth_bytes: &[u8],
        store: &CredentialStore,
    ) -> Result<Principal, SaslFailure> {
        self.authenticate_in(State::AwaitingAuthenticate, "SaslAuthenticate", auth_bytes, store)
    }

    /// The raw PLAIN token frame that follows a SaslHandshake v0.
    pub fn on_raw_token(&mut self, token: &[u8], store: &CredentialStore) -> Result<Principal, SaslFailure> {
        self.authenticate_in(State::AwaitingRawToken, "a raw SASL token", token, store)
    }

    fn authenticate_in(
        &mut self,
        expected: State,
        message: &'static str,
        token: &[u8],
        store: &CredentialStore,
    ) -> Result<Principal, SaslFailure> {
        let outcome = if self.listener == ListenerSecurity::Plaintext {
            Err(failure(
                SaslErrorCode::IllegalSaslState,
                MESSAGE_PLAINTEXT_LISTENER,
                FailureReason::PlaintextListener,
            ))
        } else if self.state != expected {
            Err(self.out_of_order(message))
        } else {
            verify_plain(token, store)
        };
        self.state = match &outcome {
            Ok(principal) => State::Authenticated(principal.clone()),
            Err(_) => State::Failed,
        };
        outcome
    }

    fn out_of_order(&self, message: &'static str) -> SaslFailure {
        failure(
            SaslErrorCode::IllegalSaslState,
            MESSAGE_ILLEGAL_STATE,
            FailureReason::OutOfOrder {
                message,
                state: self.state.describe(),
            },
        )
    }
}

fn verify_plain(token: &[u8], store: &CredentialStore) -> Result<Principal, SaslFailure> {
    let token = PlainToken::parse(token).map_err(|e| {
        failure(
            SaslErrorCode::SaslAuthenticationFailed,
            MESSAGE_MALFORMED_PLAIN,
            FailureReason::MalformedToken(e),
        )
    })?;
    store.verify(token.username, token.password).ok_or_else(|| {
        failure(
            SaslErrorCode::SaslAuthenticationFailed,
            MESSAGE_AUTHENTICATION_FAILED,
            FailureReason::InvalidCredentials,
        )
    })
}

/// Every SASL failure closes the connection (behaviour.md "SASL/PLAIN").
fn failure(code: SaslErrorCode, message: &'static str, reason: FailureReason) -> SaslFailure {
    SaslFailure {
        code,
        message,
        close_after: true,
        reason,
    }
}
