//! The [`Message`] trait every request and response body implements, and the helpers that frame
//! a whole request or response (size prefix + header + body).

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{DecodeError, EncodeError};
use crate::header::{RequestHeader, ResponseHeader};
use crate::ApiKey;

/// A request or response body of one API, decodable and encodable at a range of versions.
pub trait Message: Sized {
    /// The API this body belongs to.
    const API_KEY: ApiKey;
    /// Lowest version this crate encodes and decodes.
    const MIN_VERSION: i16;
    /// Highest version this crate encodes and decodes.
    const MAX_VERSION: i16;

    /// Decodes a body (the bytes after the header) at `version`; the whole input must be used.
    /// Byte fields (records, SASL tokens) are zero-copy slices of `body`.
    fn decode(body: &Bytes, version: i16) -> Result<Self, DecodeError>;

    /// Appends the body at `version`.
    fn encode(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError>;

    /// Whether `version` is within this crate's range for the message.
    fn supports_version(version: i16) -> bool {
        (Self::MIN_VERSION..=Self::MAX_VERSION).contains(&version)
    }
}

/// Implements [`Message`] from inherent `parse(src, input, version)` and
/// `write(&self, buf, version)` functions, adding the version check.
macro_rules! impl_message {
    ($ty:ty, $key:expr, $min:literal ..= $max:literal) => {
        impl $crate::message::Message for $ty {
            const API_KEY: $crate::ApiKey = $key;
            const MIN_VERSION: i16 = $min;
            const MAX_VERSION: i16 = $max;

            fn decode(body: &bytes::Bytes, version: i16) -> Result<Self, $crate::DecodeError> {
                if !<Self as $crate::message::Message>::supports_version(version) {
                    return Err($crate::DecodeError::UnsupportedVersion {
                        api_key: $key,
                        version,
                    });
                }
                $crate::primitives::parse_all(&body[..], |input| Self::parse(body, input, version))
            }

            fn encode(&self, buf: &mut bytes::BytesMut, version: i16) -> Result<(), $crate::EncodeError> {
                if !<Self as $crate::message::Message>::supports_version(version) {
                    return Err($crate::EncodeError::UnsupportedVersion {
                        api_key: $key,
                        version,
                    });
                }
                self.write(buf, version)
            }
        }
    };
}
pub(crate) use impl_message;

/// Reserves the 4-byte size prefix at the end of `buf`; returns its position.
fn begin_frame(buf: &mut BytesMut) -> usize {
    let start = buf.len();
    buf.put_i32(0);
    start
}

/// Fills in the size prefix reserved at `start`.
fn finish_frame(buf: &mut BytesMut, start: usize) -> Result<(), EncodeError> {
    let body = buf.len() - start - 4;
    let size = i32::try_from(body).map_err(|_| EncodeError::TooLong {
        field: "frame",
        len: body,
    })?;
    buf[start..start + 4].copy_from_slice(&size.to_be_bytes());
    Ok(())
}

/// Appends a complete request frame (size prefix, header, body) to `buf`. The header's API key
/// must match the body's; its version is the one the body is encoded at.
pub fn encode_request_frame<M: Message>(
    buf: &mut BytesMut,
    header: &RequestHeader,
    body: &M,
) -> Result<(), EncodeError> {
    if header.api_key != M::API_KEY {
        return Err(EncodeError::NotRepresentable {
            field: "api_key",
            version: header.api_version,
            reason: "header and body belong to different APIs",
        });
    }
    let start = begin_frame(buf);
    let result = header
        .encode(buf)
        .and_then(|()| body.encode(buf, header.api_version));
    match result {
        Ok(()) => finish_frame(buf, start),
        Err(err) => {
            buf.truncate(start);
            Err(err)
        }
    }
}

/// Encodes a complete response frame (size prefix, response header, body) at `version`.
pub fn encode_response_frame<M: Message>(
    correlation_id: i32,
    version: i16,
    body: &M,
) -> Result<Bytes, EncodeError> {
    let mut buf = BytesMut::with_capacity(64);
    let start = begin_frame(&mut buf);
    ResponseHeader { correlation_id }.encode(&mut buf, M::API_KEY, version);
    body.encode(&mut buf, version)?;
    finish_frame(&mut buf, start)?;
    Ok(buf.freeze())
}

/// Decodes a response frame body (without its size prefix) of `M` at `version`.
pub fn decode_response_frame<M: Message>(
    frame: &Bytes,
    version: i16,
) -> Result<(ResponseHeader, M), DecodeError> {
    let (header, body) = ResponseHeader::decode(frame, M::API_KEY, version)?;
    Ok((header, M::decode(&body, version)?))
}
