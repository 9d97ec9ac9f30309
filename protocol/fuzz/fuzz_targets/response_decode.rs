//! Any bytes as a response body of each known API at each version: never panics.
#![no_main]

use bytes::Bytes;
use kafluss_protocol::*;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let body = Bytes::copy_from_slice(rest);
    let version = i16::from(selector & 0x0f);
    match selector >> 4 {
        0 => drop(ApiVersionsResponse::decode(&body, version)),
        1 => drop(MetadataResponse::decode(&body, version)),
        2 => drop(SaslHandshakeResponse::decode(&body, version)),
        3 => drop(SaslAuthenticateResponse::decode(&body, version)),
        4 => drop(ProduceResponse::decode(&body, version)),
        5 => drop(CreateTopicsResponse::decode(&body, version)),
        6 => drop(DeleteTopicsResponse::decode(&body, version)),
        _ => drop(ResponseHeader::decode(&body, ApiKey::METADATA, version)),
    }
});
