//! InitProducerId (key 22) v0–6 (flexible from v2): an idempotent (or transactional) producer
//! asks for its producer id and epoch. v1 is v0; v3 adds the producer's current id and epoch
//! (KIP-360: a producer resumes with a bumped epoch after an error); v4 and v5 only allow new
//! error codes (PRODUCER_FENCED, TRANSACTION_ABORTABLE), their layout is v3's; v6 (KIP-939,
//! two-phase commit) adds `enable_2pc` and `keep_prepared_txn` to the request and the ongoing
//! transaction's producer id and epoch to the response.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{EncodeError, PResult};
use crate::message::impl_message;
use crate::primitives::{
    bool, i16, i32, i64, nullable_string, put_bool, put_empty_tagged_fields, put_nullable_str,
    skip_tagged_fields,
};
use crate::{ApiKey, ErrorCode};

/// InitProducerId request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitProducerIdRequest {
    /// The transactional id, or None for an idempotent (non-transactional) producer.
    pub transactional_id: Option<String>,
    /// Idle-transaction timeout; only meaningful with a transactional id.
    pub transaction_timeout_ms: i32,
    /// v3+: the producer id the client has (-1 for none), for an epoch bump.
    pub producer_id: i64,
    /// v3+: the producer's current epoch (-1 for none).
    pub producer_epoch: i16,
    /// v6+: whether the client asks for two-phase commit (false before v6).
    pub enable_2pc: bool,
    /// v6+: whether the client keeps its prepared transaction (false before v6).
    pub keep_prepared_txn: bool,
}

impl InitProducerIdRequest {
    fn parse<'a>(_src: &Bytes, input: &'a [u8], version: i16) -> PResult<'a, Self> {
        let flexible = version >= 2;
        let (input, transactional_id) = nullable_string(input, flexible)?;
        let (input, transaction_timeout_ms) = i32(input)?;
        let (input, producer_id, producer_epoch) = if version >= 3 {
            let (input, producer_id) = i64(input)?;
            let (input, producer_epoch) = i16(input)?;
            (input, producer_id, producer_epoch)
        } else {
            (input, -1, -1)
        };
        let (input, enable_2pc, keep_prepared_txn) = if version >= 6 {
            let (input, enable_2pc) = bool(input)?;
            let (input, keep_prepared_txn) = bool(input)?;
            (input, enable_2pc, keep_prepared_txn)
        } else {
            (input, false, false)
        };
        let (input, ()) = skip_tagged_fields(input, flexible)?;
        Ok((
            input,
            Self {
                transactional_id,
                transaction_timeout_ms,
                producer_id,
                producer_epoch,
                enable_2pc,
                keep_prepared_txn,
            },
        ))
    }

    fn write(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {
        let flexible = version >= 2;
        put_nullable_str(
            buf,
            self.transactional_id.as_deref(),
            flexible,
            "transactional_id",
        )?;
        buf.put_i32(self.transaction_timeout_ms);
        if version >= 3 {
            buf.put_i64(self.producer_id);
            buf.put_i16(self.producer_epoch);
        }
        if version >= 6 {
            put_bool(buf, self.enable_2pc);
            put_bool(buf, self.keep_prepared_txn);
        }
        put_empty_tagged_fields(buf, flexible);
        Ok(())
    }
}

impl_message!(InitProducerIdRequest, ApiKey::INIT_PRODUCER_ID, 0..=6);

/// InitProducerId response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitProducerIdResponse {
    pub throttle_time_ms: i32,
    pub error_code: ErrorCode,
    /// The producer id to use (-1 with an error).
    pub producer_id: i64,
    /// Its epoch (-1 with an error).
    pub producer_epoch: i16,
    /// v6+: the producer id of the transaction kept with `keep_prepared_txn`, else -1.
    pub ongoing_txn_producer_id: i64,
    /// v6+: that transaction's epoch, else -1.
    pub ongoing_txn_producer_epoch: i16,
}

impl InitProducerIdResponse {
    /// The answer that refuses the request with `error_code`.
    pub fn error(error_code: ErrorCode) -> Self {
        Self {
            throttle_time_ms: 0,
            error_code,
            producer_id: -1,
            producer_epoch: -1,
            ongoing_txn_producer_id: -1,
            ongoing_txn_producer_epoch: -1,
        }
    }

    fn parse<'a>(_src: &Bytes, input: &'a [u8], version: i16) -> PResult<'a, Self> {
        let flexible = version >= 2;
        let (input, throttle_time_ms) = i32(input)?;
        let (input, error_code) = i16(input)?;
        let (input, producer_id) = i64(input)?;
        let (input, producer_epoch) = i16(input)?;
        let (input, ongoing_txn_producer_id, ongoing_txn_producer_epoch) = if version >= 6 {
            let (input, id) = i64(input)?;
            let (input, epoch) = i16(input)?;
            (input, id, epoch)
        } else {
            (input, -1, -1)
        };
        let (input, ()) = skip_tagged_fields(input, flexible)?;
        Ok((
            input,
            Self {
                throttle_time_ms,
                error_code: ErrorCode::from(error_code),
                producer_id,
                producer_epoch,
                ongoing_txn_producer_id,
                ongoing_txn_producer_epoch,
            },
        ))
    }

    fn write(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {
        let flexible = version >= 2;
        buf.put_i32(self.throttle_time_ms);
        buf.put_i16(self.error_code.code());
        buf.put_i64(self.producer_id);
        buf.put_i16(self.producer_epoch);
        if version >= 6 {
            buf.put_i64(self.ongoing_txn_producer_id);
            buf.put_i16(self.ongoing_txn_producer_epoch);
        }
        put_empty_tagged_fields(buf, flexible);
        Ok(())
    }
}

impl_message!(InitProducerIdResponse, ApiKey::INIT_PRODUCER_ID, 0..=6);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;

    fn encoded<M: Message>(message: &M, version: i16) -> Vec<u8> {
        let mut buf = BytesMut::new();
        message.encode(&mut buf, version).unwrap();
        buf.to_vec()
    }

    #[test]
    fn golden_bytes_v0_and_v4() {
        let idempotent = InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: 60_000,
            producer_id: -1,
            producer_epoch: -1,
            enable_2pc: false,
            keep_prepared_txn: false,
        };
        // v0: nullable string -1 (i16), timeout 60000.
        assert_eq!(encoded(&idempotent, 0), [0xFF, 0xFF, 0x00, 0x00, 0xEA, 0x60]);
        // v4: compact nullable string 0 (null), timeout, producer id -1, epoch -1, no tags.
        let mut v4 = vec![0x00, 0x00, 0x00, 0xEA, 0x60];
        v4.extend_from_slice(&[0xFF; 8]);
        v4.extend_from_slice(&[0xFF, 0xFF, 0x00]);
        assert_eq!(encoded(&idempotent, 4), v4);

        let granted = InitProducerIdResponse {
            throttle_time_ms: 0,
            error_code: ErrorCode::None,
            producer_id: 1000,
            producer_epoch: 0,
            ongoing_txn_producer_id: -1,
            ongoing_txn_producer_epoch: -1,
        };
        assert_eq!(
            encoded(&granted, 0),
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x03, 0xE8, 0, 0]
        );
        assert_eq!(
            encoded(&granted, 2),
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x03, 0xE8, 0, 0, 0]
        );
    }

    #[test]
    fn versions_below_three_carry_no_producer_id() {
        let resume = InitProducerIdRequest {
            transactional_id: Some("tx".into()),
            transaction_timeout_ms: 1,
            producer_id: 7,
            producer_epoch: 3,
            enable_2pc: false,
            keep_prepared_txn: false,
        };
        let v2 = encoded(&resume, 2);
        let decoded = InitProducerIdRequest::decode(&Bytes::from(v2), 2).unwrap();
        assert_eq!(decoded.producer_id, -1);
        assert_eq!(decoded.producer_epoch, -1);
        assert_eq!(decoded.transactional_id.as_deref(), Some("tx"));
        let v3 = encoded(&resume, 3);
        assert_eq!(
            InitProducerIdRequest::decode(&Bytes::from(v3), 3).unwrap(),
            resume
        );
        assert!(InitProducerIdRequest::decode(&Bytes::new(), 7).is_err());
    }

    #[test]
    fn golden_bytes_v6() {
        // KIP-939: two booleans after the epoch, then no tags.
        let request = InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: 60_000,
            producer_id: -1,
            producer_epoch: -1,
            enable_2pc: true,
            keep_prepared_txn: false,
        };
        let mut v6 = vec![0x00, 0x00, 0x00, 0xEA, 0x60];
        v6.extend_from_slice(&[0xFF; 10]);
        v6.extend_from_slice(&[0x01, 0x00, 0x00]);
        assert_eq!(encoded(&request, 6), v6);
        assert_eq!(
            InitProducerIdRequest::decode(&Bytes::from(v6), 6).unwrap(),
            request
        );
        // The response's ongoing transaction id and epoch follow the producer epoch.
        let refused = InitProducerIdResponse::error(ErrorCode::UnsupportedVersion);
        let mut v6 = vec![0, 0, 0, 0, 0x00, 0x23];
        v6.extend_from_slice(&[0xFF; 10]);
        v6.extend_from_slice(&[0xFF; 10]);
        v6.push(0x00);
        assert_eq!(encoded(&refused, 6), v6);
        assert_eq!(
            InitProducerIdResponse::decode(&Bytes::from(v6), 6).unwrap(),
            refused
        );
    }
}
