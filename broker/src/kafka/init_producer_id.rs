//! InitProducerId (api key 22, v0–5): a producer id and epoch for an idempotent producer
//! (behaviour.md "Idempotent producers"). Any core answers, from the node-wide
//! [`ProducerIds`].
//!
//! - No transactional id: a new producer id, epoch 0. With the producer's current id and
//!   epoch (v3+, KIP-360, after a produce error): the same id with the epoch bumped, or a new
//!   id (epoch 0) when the bump would reach `i16::MAX` or the id was never handed out here.
//! - A transactional id: refused, transactions are not supported (the code is chosen in
//!   `errors.rs`; the response has no message field, so the server logs why).
//! - Authorizer on: WRITE on some table, database or the cluster, else
//!   CLUSTER_AUTHORIZATION_FAILED (Kafka ≥ 2.8 implies IDEMPOTENT_WRITE from WRITE).
//!
//! Before SASL authentication completes the request is refused like any other (`dispatch`).

use std::sync::Arc;

use bytes::Bytes;
use kafluss_protocol::{
    encode_response_frame, ErrorCode, InitProducerIdRequest, InitProducerIdResponse, RequestHeader,
};

use super::context::ConnectionContext;
use super::errors::{InitProducerIdRejection, KafkaCode};
use super::{HandlerError, Response};
use crate::producer::ids::ProducerIds;
use crate::telemetry::Repeats;

/// The highest epoch handed out: `i16::MAX` is never used, as Kafka and its clients treat it
/// as exhausted.
const MAX_EPOCH: i16 = i16::MAX - 1;

/// The producer id and epoch for `request`, or why none is given. Authorization is checked
/// by the caller.
pub async fn grant(
    ids: &Arc<ProducerIds>,
    request: &InitProducerIdRequest,
) -> Result<(i64, i16), InitProducerIdRejection> {
    if request.transactional_id.is_some() {
        return Err(InitProducerIdRejection::Transactional);
    }
    let (id, epoch) = (request.producer_id, request.producer_epoch);
    if id >= 0 && (0..MAX_EPOCH).contains(&epoch) && ids.may_have_issued(id) {
        return Ok((id, epoch + 1));
    }
    let id = ids.allocate().await.map_err(InitProducerIdRejection::Ids)?;
    Ok((id, 0))
}

/// Waits only when every reserved producer id is handed out and the next reservation is not
/// yet durable ([`ProducerIds::allocate`]); the core serves other connections meanwhile.
pub async fn handle(
    context: &ConnectionContext,
    header: &RequestHeader,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let version = header.api_version;
    let request = super::decode_request::<InitProducerIdRequest>(&body, version)
        .map_err(|e| HandlerError::undecodable("InitProducerId", version, e))?;
    let principal = context.principal();
    let runtime = context.core.runtime();
    let granted =
        if runtime
            .authorizer()
            .authorize_any(&principal, context.peer.ip(), kafluss_auth::Operation::Write)
        {
            grant(&runtime.producer_ids, &request).await
        } else {
            Err(InitProducerIdRejection::NotAuthorized {
                principal: principal.to_string(),
            })
        };
    let response = match granted {
        Ok((producer_id, producer_epoch)) => InitProducerIdResponse {
            throttle_time_ms: 0,
            error_code: ErrorCode::None,
            producer_id,
            producer_epoch,
            ongoing_txn_producer_id: -1,
            ongoing_txn_producer_epoch: -1,
        },
        Err(rejection) => {
            let reason = rejection.reason();
            context.core.telemetry.log_limited(
                "InitProducerId",
                reason,
                0,
                |Repeats { suppressed, .. }| {
                    tracing::warn!(peer = %context.peer, suppressed, "InitProducerId refused with {}: {rejection}", rejection.code().name());
                },
                move |_,
                      Repeats {
                          suppressed,
                          interval,
                          ..
                      }| {
                    tracing::warn!(
                        suppressed,
                        "InitProducerId refused: {suppressed} more requests ({reason}) in the {interval:?} after the last such line"
                    );
                },
            );
            InitProducerIdResponse::error(rejection.code())
        }
    };
    let failed = !response.error_code.is_none();
    let frame = encode_response_frame(header.correlation_id, version, &response)
        .map_err(HandlerError::encode("InitProducerId", version))?;
    Ok(Response::frame(frame, failed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(
        transactional_id: Option<&str>,
        producer_id: i64,
        producer_epoch: i16,
    ) -> InitProducerIdRequest {
        InitProducerIdRequest {
            transactional_id: transactional_id.map(str::to_string),
            transaction_timeout_ms: 60_000,
            producer_id,
            producer_epoch,
            enable_2pc: false,
            keep_prepared_txn: false,
        }
    }

    #[test]
    fn new_ids_epoch_bumps_and_transactions_refused() {
        crate::append::tests::run_local(new_ids_epoch_bumps_and_transactions_refused_on_a_core());
    }

    async fn new_ids_epoch_bumps_and_transactions_refused_on_a_core() {
        let dir = tempfile::tempdir().unwrap();
        let ids = Arc::new(ProducerIds::open(dir.path()).unwrap());
        assert_eq!(grant(&ids, &request(None, -1, -1)).await.unwrap(), (0, 0));
        assert_eq!(grant(&ids, &request(None, -1, -1)).await.unwrap(), (1, 0));
        // KIP-360: the same id, the next epoch.
        assert_eq!(grant(&ids, &request(None, 1, 0)).await.unwrap(), (1, 1));
        assert_eq!(grant(&ids, &request(None, 0, 41)).await.unwrap(), (0, 42));
        // The epoch would reach i16::MAX: a new id.
        assert_eq!(grant(&ids, &request(None, 1, MAX_EPOCH)).await.unwrap(), (2, 0));
        assert_eq!(
            grant(&ids, &request(None, 1, MAX_EPOCH - 1)).await.unwrap(),
            (1, MAX_EPOCH)
        );
        // An id this node never handed out is not taken over.
        assert_eq!(grant(&ids, &request(None, 500, 3)).await.unwrap(), (3, 0));
        let refused = grant(&ids, &request(Some("tx-1"), -1, -1)).await.unwrap_err();
        assert!(matches!(refused, InitProducerIdRejection::Transactional));
        assert!(
            refused.to_string().contains("transactions are not supported"),
            "{refused}"
        );
        assert_eq!(refused.code(), ErrorCode::InvalidTransactionTimeout);
        assert_eq!(
            InitProducerIdRejection::NotAuthorized {
                principal: "User:bob".into()
            }
            .code(),
            ErrorCode::ClusterAuthorizationFailed
        );
    }
}
