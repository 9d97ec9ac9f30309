//! Any bytes as a request frame body: header + body decode must never panic, and whatever
//! decodes must re-encode and decode to the same value.
#![no_main]

use bytes::{Bytes, BytesMut};
use kafluss_protocol::{decode_request, encode_request_frame, Request};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let frame = Bytes::copy_from_slice(data);
    let Ok((header, request)) = decode_request(&frame) else {
        return;
    };
    let mut buf = BytesMut::new();
    let encoded = match &request {
        Request::ApiVersions(body) => encode_request_frame(&mut buf, &header, body),
        Request::Metadata(body) => encode_request_frame(&mut buf, &header, body),
        Request::SaslHandshake(body) => encode_request_frame(&mut buf, &header, body),
        Request::SaslAuthenticate(body) => encode_request_frame(&mut buf, &header, body),
        Request::Produce(body) => encode_request_frame(&mut buf, &header, body),
        Request::CreateTopics(body) => encode_request_frame(&mut buf, &header, body),
        Request::DeleteTopics(body) => encode_request_frame(&mut buf, &header, body),
        Request::InitProducerId(body) => encode_request_frame(&mut buf, &header, body),
    };
    // A Produce body decodes the same under a bound it fits in, and fails with TooManyEntries
    // (never panics) under one it does not.
    if let Request::Produce(body) = &request {
        let entries: usize = body.topics.iter().map(|t| 1 + t.partitions.len()).sum();
        let (_, raw) = kafluss_protocol::RequestHeader::decode(&frame).expect("decoded above");
        match kafluss_protocol::ProduceRequest::decode_bounded(&raw, header.api_version, entries) {
            Ok(bounded) => assert_eq!(&bounded, body),
            Err(kafluss_protocol::DecodeError::TrailingBytes(_)) => {}
            Err(e) => panic!("bounded decode at its own entry count failed: {e}"),
        }
        if entries > 0 {
            assert!(kafluss_protocol::ProduceRequest::decode_bounded(&raw, header.api_version, entries - 1).is_err());
        }
    }
    if encoded.is_ok() {
        let again = buf.freeze().slice(4..);
        let (header2, request2) = decode_request(&again).expect("re-encoded request decodes");
        assert_eq!(header2, header);
        assert_eq!(request2, request);
    }
    // The error answer must always be encodable for a decoded request.
    let _ = request.error_response_frame(
        header.correlation_id,
        header.api_version,
        kafluss_protocol::ErrorCode::InvalidRequest,
        Some("x"),
    );
});
