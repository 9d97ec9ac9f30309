//! SaslHandshake (key 17) v0–1 and SaslAuthenticate (key 36) v0–2 (flexible from v2).
//!
//! After a v0 handshake the SASL tokens travel as bare length-prefixed frames, not as
//! SaslAuthenticate requests; that framing is the broker's business (see [`crate::frame`]).

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{EncodeError, PResult};
use crate::message::impl_message;
use crate::primitives::{
    array, bytes, i16, i64, nullable_string, put_array_len, put_empty_tagged_fields, put_nullable_bytes,
    put_nullable_str, put_str, skip_tagged_fields, string,
};
use crate::{ApiKey, ErrorCode};

/// SaslHandshake request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslHandshakeRequest {
    /// The mechanism the client wants, e.g. `PLAIN` (case-sensitive).
    pub mechanism: String,
}

impl SaslHandshakeRequest {
    fn parse<'a>(_src: &Bytes, input: &'a [u8], _version: i16) -> PResult<'a, Self> {
        let (input, mechanism) = string(input, false, "mechanism")?;
        Ok((input, Self { mechanism }))
    }

    fn write(&self, buf: &mut BytesMut, _version: i16) -> Result<(), EncodeError> {
        put_str(buf, &self.mechanism, false, "mechanism")
    }
}

impl_message!(SaslHandshakeRequest, ApiKey::SASL_HANDSHAKE, 0..=1);

/// SaslHandshake response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslHandshakeResponse {
    /// The handshake's outcome.
    pub error_code: ErrorCode,
    /// Mechanisms the broker enables.
    pub mechanisms: Vec<String>,
}

impl SaslHandshakeResponse {
    fn parse<'a>(_src: &Bytes, input: &'a [u8], _version: i16) -> PResult<'a, Self> {
        let (input, error_code) = i16(input)?;
        let (input, mechanisms) = array(input, false, "mechanisms", |input| {
            string(input, false, "mechanism")
        })?;
        Ok((
            input,
            Self {
                error_code: ErrorCode::from(error_code),
                mechanisms,
            },
        ))
    }

    fn write(&self, buf: &mut BytesMut, _version: i16) -> Result<(), EncodeError> {
        buf.put_i16(self.error_code.code());
        put_array_len(buf, Some(self.mechanisms.len()), false, "mechanisms")?;
        for mechanism in &self.mechanisms {
            put_str(buf, mechanism, false, "mechanism")?;
        }
        Ok(())
    }
}

impl_message!(SaslHandshakeResponse, ApiKey::SASL_HANDSHAKE, 0..=1);

/// SaslAuthenticate request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslAuthenticateRequest {
    /// The SASL token (for PLAIN: `[authzid] NUL user NUL password`), zero-copy.
    pub auth_bytes: Bytes,
}

impl SaslAuthenticateRequest {
    fn parse<'a>(src: &Bytes, input: &'a [u8], version: i16) -> PResult<'a, Self> {
        let flexible = version >= 2;
        let (input, auth_bytes) = bytes(src, input, flexible, "auth_bytes")?;
        let (input, ()) = skip_tagged_fields(input, flexible)?;
        Ok((input, Self { auth_bytes }))
    }

    fn write(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {
        let flexible = version >= 2;
        put_nullable_bytes(buf, Some(&self.auth_bytes), flexible, "auth_bytes")?;
        put_empty_tagged_fields(buf, flexible);
        Ok(())
    }
}

impl_message!(SaslAuthenticateRequest, ApiKey::SASL_AUTHENTICATE, 0..=2);

/// SaslAuthenticate response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslAuthenticateResponse {
    /// The authentication outcome.
    pub error_code: ErrorCode,
    /// A message for the client (never the secret).
    pub error_message: Option<String>,
    /// The server's SASL token (empty for PLAIN).
    pub auth_bytes: Bytes,
    /// Session lifetime (v1+); 0 means no re-authentication.
    pub session_lifetime_ms: i64,
}

impl SaslAuthenticateResponse {
    fn parse<'a>(src: &Bytes, input: &'a [u8], version: i16) -> PResult<'a, Self> {
        let flexible = version >= 2;
        let (input, error_code) = i16(input)?;
        let (input, error_message) = nullable_string(input, flexible)?;
        let (input, auth_bytes) = bytes(src, input, flexible, "auth_bytes")?;
        let (input, session_lifetime_ms) = if version >= 1 { i64(input)? } else { (input, 0) };
        let (input, ()) = skip_tagged_fields(input, flexible)?;
        Ok((
            input,
            Self {
                error_code: ErrorCode::from(error_code),
                error_message,
                auth_bytes,
                session_lifetime_ms,
            },
        ))
    }

    fn write(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {
        let flexible = version >= 2;
        buf.put_i16(self.error_code.code());
        put_nullable_str(buf, self.error_message.as_deref(), flexible, "error_message")?;
        put_nullable_bytes(buf, Some(&self.auth_bytes), flexible, "auth_bytes")?;
        if version >= 1 {
            buf.put_i64(self.session_lifetime_ms);
        }
        put_empty_tagged_fields(buf, flexible);
        Ok(())
    }
}

impl_message!(SaslAuthenticateResponse, ApiKey::SASL_AUTHENTICATE, 0..=2);
