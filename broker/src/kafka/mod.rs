//! The Kafka endpoint: a connection ([`connection`]: framing, pipelining, ordered responses),
//! the request context ([`context`]), the registry of APIs ([`apis`]), one handler module per
//! API, and the one place Kafka error codes are chosen ([`errors`]).
//!
//! [`dispatch`] takes a frame from the connection: raw SASL token or request header → SASL
//! gate → the registry's handler for the API. Handlers answer synchronously when they can
//! (ApiVersions, Metadata, SASL, InitProducerId); Produce hands its partitions to their owner
//! cores before `dispatch` returns (so request order is append order) and answers later.

pub mod api_versions;
pub mod apis;
pub mod connection;
pub mod context;
pub mod errors;
pub mod init_producer_id;
pub mod metadata;
pub mod produce;
pub mod sasl;
pub mod unsupported;

use std::rc::Rc;

use bytes::Bytes;
use kafluss_protocol::{DecodeError, EncodeError, Message, RequestHeader};

use apis::Handler;
use context::ConnectionContext;

use crate::metrics::Unanswered;

/// A finished response.
#[derive(Debug)]
pub struct Response {
    /// The whole frame including its 4-byte size prefix; None sends nothing (acks=0).
    pub frame: Option<Bytes>,
    /// Close the connection once this response is written.
    pub close_after: bool,
    /// Counted as an error in metrics.
    pub failed: bool,
}

impl Response {
    pub fn frame(frame: Bytes, failed: bool) -> Self {
        Self {
            frame: Some(frame),
            close_after: false,
            failed,
        }
    }

    pub fn none() -> Self {
        Self {
            frame: None,
            close_after: false,
            failed: false,
        }
    }
}

/// A response now, or a future that yields it (produce waiting for its owner cores). The
/// connection's writer polls it in request order; it is not a task of its own, so a request
/// costs no task spawn.
pub enum PendingResponse {
    Ready(Response),
    Later(futures_lite::future::BoxedLocal<Response>),
}

impl PendingResponse {
    /// Whether the connection must stop reading after this request.
    pub fn closes_connection(&self) -> bool {
        matches!(self, PendingResponse::Ready(r) if r.close_after)
    }
}

/// Why a request closes its connection without an answer.
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    #[error("undecodable request header: {0}")]
    Header(#[source] DecodeError),
    #[error("api key {0} before SASL authentication completed")]
    BeforeAuthentication(i16),
    #[error("api key {api_key} request of {size} bytes is over kafka.max-other-request-size ({limit} bytes); only Produce requests may be larger")]
    OtherTooLarge { api_key: i16, size: usize, limit: usize },
    #[error("undecodable {api} v{version} request: {source}{}", body_start.as_deref().map(|b| format!(" (body starts {b})")).unwrap_or_default())]
    Undecodable {
        api: &'static str,
        version: i16,
        #[source]
        source: DecodeError,
        /// The first bytes, for requests whose clients are known to vary (Metadata).
        body_start: Option<String>,
    },
    #[error("cannot encode {api} v{version} response: {source}")]
    Encode {
        api: &'static str,
        version: i16,
        #[source]
        source: EncodeError,
    },
    #[error("api key {api_key} v{version} is not supported and has no error response: {source}")]
    NoErrorResponse {
        api_key: i16,
        version: i16,
        #[source]
        source: EncodeError,
    },
    #[error("API key {0} is advertised for librdkafka's feature detection but not served: kafluss accepts producers only")]
    NotServed(i16),
    #[error("a request that needs {bytes} bytes of kafka.max-answer-memory waited {waited:?} for them (answers that this core's clients do not read hold it) or the server is stopping")]
    AnswerMemory {
        bytes: usize,
        waited: std::time::Duration,
    },
}

impl HandlerError {
    pub fn undecodable(api: &'static str, version: i16, source: DecodeError) -> Self {
        Self::Undecodable {
            api,
            version,
            source,
            body_start: None,
        }
    }

    pub fn encode(api: &'static str, version: i16) -> impl FnOnce(EncodeError) -> Self {
        move |source| Self::Encode { api, version, source }
    }

    /// The kind of reason, without its details: the key of the repeat-limited line that says a
    /// connection closes for it (`server.log-repeat-interval`).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Header(_) => "undecodable request header",
            Self::BeforeAuthentication(_) => "request before SASL authentication completed",
            Self::OtherTooLarge { .. } => "request over kafka.max-other-request-size",
            Self::Undecodable { .. } => "undecodable request",
            Self::Encode { .. } => "response that cannot be encoded",
            Self::NoErrorResponse { .. } => "unsupported request without an error response",
            Self::NotServed(_) => "API not served",
            Self::AnswerMemory { .. } => "kafka.max-answer-memory not given in time",
        }
    }

    /// The `reason` label the close counts under (`kafluss_connections_closed_unanswered_total`).
    pub fn unanswered(&self) -> Unanswered {
        match self {
            Self::Header(_) => Unanswered::UndecodableHeader,
            Self::BeforeAuthentication(_) => Unanswered::BeforeAuthentication,
            Self::OtherTooLarge { .. } => Unanswered::OtherTooLarge,
            Self::Undecodable { .. } => Unanswered::Undecodable,
            Self::Encode { .. } => Unanswered::UnencodableResponse,
            Self::NoErrorResponse { .. } => Unanswered::NoErrorResponse,
            Self::NotServed(_) => Unanswered::NotServed,
            Self::AnswerMemory { .. } => Unanswered::AnswerMemory,
        }
    }
}

/// What the connection does with a frame.
pub enum Dispatch {
    Respond {
        api_key: i16,
        response: PendingResponse,
        /// What the request holds of `kafka.max-answer-memory` until its answer is written
        /// (a Produce request's entries; the connection takes an answer's own size).
        held: Option<glommio::sync::StaticPermit>,
    },
    /// Close without answering (undecodable frame, request refused before authentication).
    Close { why: HandlerError },
}

/// Decodes a request body like the Java broker does: fields are read in order and bytes after
/// the last field are ignored. librdkafka relies on this: its Metadata v12 "all topics" request
/// carries three stray bytes after the tagged fields (its topic-count placeholder is not
/// shrunk), which a strict decoder refuses.
pub fn decode_request<M: Message>(body: &Bytes, version: i16) -> Result<M, DecodeError> {
    decode_lenient(body, |body| M::decode(body, version))
}

/// [`decode_request`] with the decoder given: bytes after the last field are ignored.
pub fn decode_lenient<M>(
    body: &Bytes,
    decode: impl Fn(&Bytes) -> Result<M, DecodeError>,
) -> Result<M, DecodeError> {
    match decode(body) {
        // A body of no fields (ApiVersions v0–2) is all trailing bytes: ignored too, as the
        // Java broker ignores them.
        Err(DecodeError::TrailingBytes(extra)) if extra <= body.len() => {
            decode(&body.slice(..body.len() - extra))
        }
        other => other,
    }
}

/// Prefixes `body` (header + response body) with its size, as a frame.
pub fn framed(body: &[u8]) -> Bytes {
    let mut frame = Vec::with_capacity(body.len() + 4);
    frame.extend_from_slice(&(body.len() as i32).to_be_bytes());
    frame.extend_from_slice(body);
    Bytes::from(frame)
}

/// Debug builds only: a request whose client id is the value of `KAFLUSS_DEBUG_PANIC_CLIENT_ID`
/// (read once) panics its core, so that tests can check what a core's panic does to the server.
#[cfg(debug_assertions)]
fn debug_panic(header: &RequestHeader) {
    static CLIENT_ID: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let wanted = CLIENT_ID.get_or_init(|| std::env::var("KAFLUSS_DEBUG_PANIC_CLIENT_ID").ok());
    if wanted.is_some() && header.client_id == *wanted {
        panic!("KAFLUSS_DEBUG_PANIC_CLIENT_ID: a request of client id {wanted:?} panics its core (debug builds only)");
    }
}

/// Handles one frame; awaits only to hand produce partitions to their owners.
pub async fn dispatch(context: &Rc<ConnectionContext>, frame: Bytes) -> Dispatch {
    if context.sasl.borrow().expects_raw_token() {
        return sasl::raw_token(context, &frame);
    }
    let (header, body) = match RequestHeader::decode(&frame) {
        Ok(decoded) => decoded,
        Err(e) => {
            return Dispatch::Close {
                why: HandlerError::Header(e),
            }
        }
    };
    #[cfg(debug_assertions)]
    debug_panic(&header);
    let api_key = header.api_key.0;
    let gate = context.sasl.borrow_mut().on_request(api_key);
    if gate == kafluss_auth::Gate::CloseSilently {
        return Dispatch::Close {
            why: HandlerError::BeforeAuthentication(api_key),
        };
    }
    let handler = match apis::find(api_key) {
        // ApiVersions answers any version (older format for unknown ones): clients use it
        // to negotiate, so it is exempt from the range check.
        Some(api) if api.handler == Handler::ApiVersions => Handler::ApiVersions,
        Some(api) if apis::is_advertised(api, header.api_version) => api.handler,
        _ => Handler::Unsupported,
    };
    // Only Produce carries records: every other request is small, and answering one costs
    // memory in proportion to its entries (topics named), so it is bounded on its own.
    let limit = context.core.config().max_other_request_size;
    if handler != Handler::Produce && frame.len() > limit {
        return Dispatch::Close {
            why: HandlerError::OtherTooLarge {
                api_key,
                size: frame.len(),
                limit,
            },
        };
    }
    let result = match handler {
        Handler::Produce => return produce::dispatch(context, &header, body).await,
        Handler::NotServed => {
            return Dispatch::Close {
                why: HandlerError::NotServed(api_key),
            }
        }
        Handler::SaslAuthenticate => {
            return match sasl::authenticate(context, &header, body) {
                Ok(response) => Dispatch::Respond {
                    api_key,
                    response,
                    held: None,
                },
                Err(why) => Dispatch::Close { why },
            }
        }
        Handler::ApiVersions => api_versions::handle(&header, body),
        Handler::Metadata => metadata::handle(context, &header, body),
        Handler::SaslHandshake => sasl::handshake(context, &header, body),
        Handler::InitProducerId => init_producer_id::handle(context, &header, body).await,
        Handler::Unsupported => unsupported::handle(&header, body),
    };
    match result {
        Ok(response) => Dispatch::Respond {
            api_key,
            response: PendingResponse::Ready(response),
            held: None,
        },
        Err(why) => Dispatch::Close { why },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_after_a_body_of_no_fields_are_ignored() {
        use kafluss_protocol::ApiVersionsRequest;
        for version in 0..=2 {
            for body in [&b"\0"[..], b"abc"] {
                let request = decode_request::<ApiVersionsRequest>(&Bytes::copy_from_slice(body), version);
                assert!(request.is_ok(), "v{version} {body:?}: {request:?}");
            }
        }
    }

    #[test]
    fn frames_carry_their_size() {
        assert_eq!(&framed(b"abc")[..], &[0, 0, 0, 3, b'a', b'b', b'c']);
    }

    #[test]
    fn close_reasons_read_as_before() {
        let why = HandlerError::NotServed(1);
        assert!(why
            .to_string()
            .contains("not served: kafluss accepts producers only"));
        let why = HandlerError::Undecodable {
            api: "Metadata",
            version: 12,
            source: DecodeError::TrailingBytes(3),
            body_start: Some("[00, 01]".into()),
        };
        assert!(
            why.to_string().starts_with("undecodable Metadata v12 request: "),
            "{why}"
        );
        assert!(why.to_string().ends_with(" (body starts [00, 01])"), "{why}");
    }
}
