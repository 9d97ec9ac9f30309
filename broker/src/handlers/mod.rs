//! One module per Kafka API, and the one registry ApiVersions is built from.
//!
//! [`dispatch`] takes a frame from [`connection`](crate::connection): raw SASL token or
//! request header → SASL gate → the API's handler. Handlers answer synchronously when they
//! can (ApiVersions, Metadata, SASL); Produce hands its partitions to their owner cores before
//! `dispatch` returns (so request order is append order) and answers later.

pub mod api_versions;
pub mod metadata;
pub mod produce;
pub mod produce_owner;
pub mod sasl;
pub mod unsupported;

use std::rc::Rc;

use bytes::Bytes;
use kafluss_protocol::{ApiKey, DecodeError, Message, RequestHeader};

use crate::connection::ConnectionContext;

/// One advertised API and its version range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiRange {
    pub api_key: i16,
    pub min: i16,
    pub max: i16,
}

/// The APIs and versions of behaviour.md, plus Fetch and FindCoordinator for librdkafka;
/// ApiVersions answers from this list and `dispatch` refuses anything outside it, so the two
/// cannot drift.
///
/// librdkafka (kcat, confluent-kafka; 2.0.2 and 2.16 checked) derives its features from the
/// advertised APIs (`rdkafka_feature.c`), and producer-only brokers must list two it never
/// serves here:
/// - record batches (magic 2, `MsgVer2`) need Produce ≥ v3 AND Fetch ≥ v4: without Fetch it
///   falls back to magic 0 message sets, which behaviour.md refuses;
/// - zstd needs Fetch v10 (with Produce v7), lz4 needs FindCoordinator v0: without them it
///   silently sends lz4/zstd-configured batches uncompressed.
///
/// A Fetch or FindCoordinator request closes the connection with a log line: producers with
/// `enable.idempotence=false` send neither.
pub const SUPPORTED_APIS: &[ApiRange] = &[
    ApiRange {
        api_key: 0,
        min: 0,
        max: 12,
    }, // Produce: v0-2 answered UNSUPPORTED_FOR_MESSAGE_FORMAT (see produce.rs)
    ApiRange {
        api_key: 1,
        min: 4,
        max: 10,
    }, // Fetch: advertised for librdkafka (record batches, zstd), never served
    ApiRange {
        api_key: 3,
        min: 0,
        max: 12,
    }, // Metadata
    ApiRange {
        api_key: 10,
        min: 0,
        max: 0,
    }, // FindCoordinator: advertised for librdkafka (lz4), never served
    ApiRange {
        api_key: 17,
        min: 0,
        max: 1,
    }, // SaslHandshake
    ApiRange {
        api_key: 18,
        min: 0,
        max: 4,
    }, // ApiVersions
    ApiRange {
        api_key: 36,
        min: 0,
        max: 2,
    }, // SaslAuthenticate
];

/// The advertised range of `api_key`, if any.
pub fn supported_range(api_key: i16) -> Option<ApiRange> {
    SUPPORTED_APIS.iter().copied().find(|r| r.api_key == api_key)
}

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

/// A response now, or a task that yields it (produce waiting for its owner cores).
pub enum PendingResponse {
    Ready(Response),
    Later(glommio::Task<Response>),
}

impl PendingResponse {
    /// Whether the connection must stop reading after this request.
    pub fn closes_connection(&self) -> bool {
        matches!(self, PendingResponse::Ready(r) if r.close_after)
    }
}

/// What the connection does with a frame.
pub enum Dispatch {
    Respond {
        api_key: i16,
        response: PendingResponse,
    },
    /// Close without answering (undecodable frame, request refused before authentication).
    Close {
        why: String,
    },
}

/// Decodes a request body like the Java broker does: fields are read in order and bytes after
/// the last field are ignored. librdkafka relies on this: its Metadata v12 "all topics" request
/// carries three stray bytes after the tagged fields (its topic-count placeholder is not
/// shrunk), which a strict decoder refuses.
pub fn decode_request<M: Message>(body: &Bytes, version: i16) -> Result<M, DecodeError> {
    match M::decode(body, version) {
        Err(DecodeError::TrailingBytes(extra)) if extra < body.len() => {
            M::decode(&body.slice(..body.len() - extra), version)
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

/// Handles one frame; awaits only to hand produce partitions to their owners.
pub async fn dispatch(context: &Rc<ConnectionContext>, frame: Bytes) -> Dispatch {
    if context.sasl.borrow().expects_raw_token() {
        return sasl::raw_token(context, &frame);
    }
    let (header, body) = match RequestHeader::decode(&frame) {
        Ok(decoded) => decoded,
        Err(e) => {
            return Dispatch::Close {
                why: format!("undecodable request header: {e}"),
            }
        }
    };
    let gate = context.sasl.borrow_mut().on_request(header.api_key.0);
    if gate == kafluss_auth::Gate::CloseSilently {
        return Dispatch::Close {
            why: format!(
                "api key {} before SASL authentication completed",
                header.api_key.0
            ),
        };
    }
    let api_key = header.api_key.0;
    if header.api_key == ApiKey::API_VERSIONS {
        // ApiVersions answers any version (older format for unknown ones): clients use it
        // to negotiate, so it is exempt from the range check.
        return respond(api_key, api_versions::handle(&header, body));
    }
    match supported_range(api_key) {
        Some(range) if (range.min..=range.max).contains(&header.api_version) => {}
        _ => return respond(api_key, unsupported::handle(&header, body)),
    }
    let result = match header.api_key {
        ApiKey::PRODUCE => {
            return produce::dispatch(context, &header, body).await;
        }
        ApiKey::FETCH | ApiKey::FIND_COORDINATOR => {
            return Dispatch::Close {
                why: format!(
                    "API key {api_key} is advertised for librdkafka's feature detection but not served: \
                     kafluss accepts producers only"
                ),
            }
        }
        ApiKey::METADATA => metadata::handle(context, &header, body),
        ApiKey::SASL_HANDSHAKE => sasl::handshake(context, &header, body),
        ApiKey::SASL_AUTHENTICATE => {
            return match sasl::authenticate(context, &header, body) {
                Ok(response) => Dispatch::Respond { api_key, response },
                Err(why) => Dispatch::Close { why },
            }
        }
        _ => unsupported::handle(&header, body),
    };
    respond(api_key, result)
}

fn respond(api_key: i16, result: Result<Response, String>) -> Dispatch {
    match result {
        Ok(response) => Dispatch::Respond {
            api_key,
            response: PendingResponse::Ready(response),
        },
        Err(why) => Dispatch::Close { why },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_is_behaviour_md_plus_librdkafka_feature_apis() {
        let listed: Vec<(i16, i16, i16)> = SUPPORTED_APIS.iter().map(|r| (r.api_key, r.min, r.max)).collect();
        assert_eq!(
            listed,
            vec![
                (0, 0, 12),
                (1, 4, 10),
                (3, 0, 12),
                (10, 0, 0),
                (17, 0, 1),
                (18, 0, 4),
                (36, 0, 2)
            ]
        );
        assert!(supported_range(19).is_none());
        assert_eq!(supported_range(0).unwrap().max, 12);
    }

    #[test]
    fn frames_carry_their_size() {
        assert_eq!(&framed(b"abc")[..], &[0, 0, 0, 3, b'a', b'b', b'c']);
    }
}
