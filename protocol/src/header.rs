//! Request header v0/v1/v2 decode and encode; response header v0/v1 encode and decode.
//!
//! The request header version follows the API's flexibility ([`ApiKey::request_header_version`]);
//! the client id stays a classic nullable string even in v2. The response header is v1 for
//! flexible versions except for ApiVersions, always v0.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{DecodeError, EncodeError};
use crate::primitives::{
    i16, i32, nullable_string, put_nullable_str, put_tagged_fields_with_raw, skip_tagged_fields,
    unknown_tagged_fields, RawTaggedField,
};
use crate::ApiKey;

/// A decoded request header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeader {
    /// The API of the body.
    pub api_key: ApiKey,
    /// The version of the body.
    pub api_version: i16,
    /// Echoed in the response.
    pub correlation_id: i32,
    /// The client's id (v1+; `None` when null or for header v0).
    pub client_id: Option<String>,
    /// Unknown tagged fields of header v2, kept for re-encoding.
    pub unknown_tagged_fields: Vec<RawTaggedField>,
}

impl RequestHeader {
    /// A header for `api_key` at `api_version`.
    pub fn new(api_key: ApiKey, api_version: i16, correlation_id: i32, client_id: Option<&str>) -> Self {
        Self {
            api_key,
            api_version,
            correlation_id,
            client_id: client_id.map(str::to_owned),
            unknown_tagged_fields: Vec::new(),
        }
    }

    /// Decodes the header at the front of a frame body and returns it with the rest of the body
    /// (a zero-copy slice of `frame`).
    pub fn decode(frame: &Bytes) -> Result<(RequestHeader, Bytes), DecodeError> {
        let input = &frame[..];
        let (input, api_key) = i16(input)?;
        let (input, api_version) = i16(input)?;
        let (input, correlation_id) = i32(input)?;
        let api_key = ApiKey(api_key);
        let header_version = api_key.request_header_version(api_version);
        let (input, client_id) = if header_version >= 1 {
            nullable_string(input, false)?
        } else {
            (input, None)
        };
        let (input, unknown_tagged_fields) = if header_version >= 2 {
            unknown_tagged_fields(frame, input)?
        } else {
            (input, Vec::new())
        };
        let header = RequestHeader {
            api_key,
            api_version,
            correlation_id,
            client_id,
            unknown_tagged_fields,
        };
        Ok((header, frame.slice_ref(input)))
    }

    /// Decodes only the fixed 8-byte start (key, version, correlation id). Useful when the rest
    /// of the header cannot be trusted, e.g. to answer a request whose client id is malformed.
    pub fn peek(frame: &[u8]) -> Result<(ApiKey, i16, i32), DecodeError> {
        let (input, api_key) = i16(frame)?;
        let (input, api_version) = i16(input)?;
        let (_, correlation_id) = i32(input)?;
        Ok((ApiKey(api_key), api_version, correlation_id))
    }

    /// Appends this header in the version its API and version call for.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        buf.put_i16(self.api_key.0);
        buf.put_i16(self.api_version);
        buf.put_i32(self.correlation_id);
        let header_version = self.api_key.request_header_version(self.api_version);
        if header_version >= 1 {
            put_nullable_str(buf, self.client_id.as_deref(), false, "client_id")?;
        }
        if header_version >= 2 {
            put_tagged_fields_with_raw(buf, Vec::new(), &self.unknown_tagged_fields);
        }
        Ok(())
    }
}

/// A response header: the correlation id, plus an (empty) tagged-field section in v1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseHeader {
    /// The request's correlation id.
    pub correlation_id: i32,
}

impl ResponseHeader {
    /// Appends the header for a response of `api_key` at `api_version`.
    pub fn encode(&self, buf: &mut BytesMut, api_key: ApiKey, api_version: i16) {
        buf.put_i32(self.correlation_id);
        if api_key.response_header_version(api_version) >= 1 {
            buf.put_u8(0);
        }
    }

    /// Decodes the header of a response of `api_key` at `api_version`; returns the body.
    pub fn decode(
        frame: &Bytes,
        api_key: ApiKey,
        api_version: i16,
    ) -> Result<(ResponseHeader, Bytes), DecodeError> {
        let (input, correlation_id) = i32(&frame[..])?;
        let flexible = api_key.response_header_version(api_version) >= 1;
        let (input, ()) = skip_tagged_fields(input, flexible)?;
        Ok((ResponseHeader { correlation_id }, frame.slice_ref(input)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_versions_v3_request_header_is_v2() {
        // key 18, version 3, correlation 7, client id "ab", empty tagged fields, then the body.
        let frame = Bytes::from_static(&[0, 18, 0, 3, 0, 0, 0, 7, 0, 2, b'a', b'b', 0, 0xee]);
        let (header, body) = RequestHeader::decode(&frame).unwrap();
        assert_eq!(header.api_key, ApiKey::API_VERSIONS);
        assert_eq!(header.api_version, 3);
        assert_eq!(header.correlation_id, 7);
        assert_eq!(header.client_id.as_deref(), Some("ab"));
        assert_eq!(&body[..], &[0xee]);
        let mut buf = BytesMut::new();
        header.encode(&mut buf).unwrap();
        assert_eq!(&buf[..], &frame[..frame.len() - 1]);
    }

    #[test]
    fn produce_v8_header_is_v1_with_null_client_id() {
        let frame = Bytes::from_static(&[0, 0, 0, 8, 0, 0, 0, 1, 0xff, 0xff, 0xaa]);
        let (header, body) = RequestHeader::decode(&frame).unwrap();
        assert_eq!(header.client_id, None);
        assert_eq!(&body[..], &[0xaa]);
    }

    #[test]
    fn any_negative_client_id_length_is_a_null_client_id() {
        // Kafka's RequestHeaderData reads every negative length as null (-2 closed the
        // connection before).
        for len in [[0xff, 0xfe], [0x80, 0x00]] {
            let frame = Bytes::from([&[0, 0, 0, 8, 0, 0, 0, 1][..], &len[..], &[0xaa][..]].concat());
            let (header, body) = RequestHeader::decode(&frame).unwrap();
            assert_eq!(header.client_id, None);
            assert_eq!(&body[..], &[0xaa]);
        }
    }

    #[test]
    fn unknown_api_header_decodes_as_v1() {
        let frame = Bytes::from_static(&[0x03, 0xe7, 0, 1, 0, 0, 0, 9, 0, 0]);
        let (header, body) = RequestHeader::decode(&frame).unwrap();
        assert_eq!(header.api_key, ApiKey(999));
        assert_eq!(header.client_id.as_deref(), Some(""));
        assert!(body.is_empty());
    }

    #[test]
    fn truncated_header_is_an_error() {
        let frame = Bytes::from_static(&[0, 0, 0, 8, 0, 0, 0]);
        assert_eq!(RequestHeader::decode(&frame), Err(DecodeError::Truncated));
    }

    #[test]
    fn response_header_v0_for_api_versions_v3() {
        let mut buf = BytesMut::new();
        ResponseHeader { correlation_id: 5 }.encode(&mut buf, ApiKey::API_VERSIONS, 3);
        assert_eq!(&buf[..], &[0, 0, 0, 5]);
        buf.clear();
        ResponseHeader { correlation_id: 5 }.encode(&mut buf, ApiKey::METADATA, 9);
        assert_eq!(&buf[..], &[0, 0, 0, 5, 0]);
    }
}
