//! Everything outside the registry: unadvertised APIs and versions, and CreateTopics /
//! DeleteTopics, which answer with their own response saying that tables are managed through
//! Fluss SQL (error POLICY_VIOLATION). Any other request gets its API's error response with
//! UNSUPPORTED_VERSION: from the protocol crate's codec where it has one for the API and
//! version (naming the request's topics when its body decodes), else from the API's layout in
//! the protocol crate's table of Kafka 4.4's responses (`kafluss_protocol::error_response`:
//! empty arrays, the code in a top-level error code where the response has one). The
//! connection is closed for Fetch and FindCoordinator at any version (advertised for
//! librdkafka, never served) and when not even an error response can be encoded (an API key
//! or a version Kafka 4.4 does not define, as SaslHandshake v2, SaslAuthenticate v3 or
//! ListOffsets v0).

use bytes::Bytes;
use kafluss_protocol::{encode_error_response, Request};
use kafluss_protocol::{encode_response_frame, Message};
use kafluss_protocol::{ApiKey, RequestHeader};
use kafluss_protocol::{CreateTopicsRequest, DeleteTopicsRequest, ProduceResponse};

use super::apis::{self, Handler};
use super::errors::{MessageBudget, TOPIC_ADMIN_REFUSED, UNSUPPORTED_VERSION};
use super::{HandlerError, Response};

pub const CREATE_TOPICS_MESSAGE: &str = "Kafka CreateTopics is not supported: create a Fluss table with CREATE TABLE ... WITH ('table.kafka.enabled' = 'true') through Fluss SQL";
pub const DELETE_TOPICS_MESSAGE: &str =
    "Kafka DeleteTopics is not supported: drop the table with DROP TABLE through Fluss SQL";

/// The version whose layout answers a request whose body no codec here decodes. Produce above
/// v13 gets the v13 layout (its topic-free error answer is the same bytes from v9 on), below v0
/// the v0 one. Other APIs keep the version (none in Kafka 4.4's layouts either: close).
fn nearest_known_version(api_key: ApiKey, version: i16) -> i16 {
    match api_key {
        ApiKey::PRODUCE => version.clamp(ProduceResponse::MIN_VERSION, ProduceResponse::MAX_VERSION),
        _ => version,
    }
}

/// Sets `message` on each topic's message slot while one answer's message budget lasts.
fn with_message<'a>(slots: impl Iterator<Item = &'a mut Option<String>>, message: &str) {
    let mut budget = MessageBudget::default();
    for slot in slots {
        *slot = budget.admit(Some(message.to_owned()));
        if slot.is_none() {
            break;
        }
    }
}

pub fn handle(header: &RequestHeader, body: Bytes) -> Result<Response, HandlerError> {
    let version = header.api_version;
    let correlation_id = header.correlation_id;
    // Fetch and FindCoordinator are never served, at an advertised version or not.
    if apis::find(header.api_key.0).is_some_and(|api| api.handler == Handler::NotServed) {
        return Err(HandlerError::NotServed(header.api_key.0));
    }
    let frame = match header.api_key {
        ApiKey::CREATE_TOPICS if CreateTopicsRequest::supports_version(version) => {
            let request = super::decode_request::<CreateTopicsRequest>(&body, version)
                .map_err(|e| HandlerError::undecodable("CreateTopics", version, e))?;
            let mut response = request.error_response(TOPIC_ADMIN_REFUSED, None);
            with_message(
                response.topics.iter_mut().map(|t| &mut t.error_message),
                CREATE_TOPICS_MESSAGE,
            );
            encode_response_frame(correlation_id, version, &response)
        }
        ApiKey::DELETE_TOPICS if DeleteTopicsRequest::supports_version(version) => {
            let request = super::decode_request::<DeleteTopicsRequest>(&body, version)
                .map_err(|e| HandlerError::undecodable("DeleteTopics", version, e))?;
            let mut response = request.error_response(TOPIC_ADMIN_REFUSED, None);
            with_message(
                response.responses.iter_mut().map(|t| &mut t.error_message),
                DELETE_TOPICS_MESSAGE,
            );
            encode_response_frame(correlation_id, version, &response)
        }
        api_key => match Request::decode(header, &body) {
            // A known API at an unadvertised version: its own error response, naming its
            // topics and partitions where it has them.
            Ok(request) => request.error_response_frame(
                correlation_id,
                version,
                UNSUPPORTED_VERSION,
                Some("unsupported API version"),
            ),
            // Nothing decodes the body: the codec's or the layout's answer from the header.
            Err(_) => encode_error_response(
                api_key,
                nearest_known_version(api_key, version),
                correlation_id,
                UNSUPPORTED_VERSION,
                Some("unsupported API version"),
            ),
        },
    };
    frame
        .map(|frame| Response::frame(frame, true))
        .map_err(|source| HandlerError::NoErrorResponse {
            api_key: header.api_key.0,
            version,
            source,
        })
}
