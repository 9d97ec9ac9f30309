//! Round trips for every API and version, golden bytes for hand-checked frames, truncation and
//! garbage handling, and the error-response helpers.

mod common;

use bytes::{Bytes, BytesMut};
use kafluss_protocol::*;

fn round_trip<M: Message + PartialEq + std::fmt::Debug>(sample: impl Fn(i16) -> M) {
    for version in M::MIN_VERSION..=M::MAX_VERSION {
        let value = sample(version);
        let mut buf = BytesMut::new();
        value.encode(&mut buf, version).unwrap();
        let wire = buf.freeze();
        let decoded =
            M::decode(&wire, version).unwrap_or_else(|err| panic!("{} v{version}: {err}", M::API_KEY));
        assert_eq!(decoded, value, "{} v{version}", M::API_KEY);
        // Every strict prefix must fail cleanly, never panic or succeed.
        for cut in 0..wire.len() {
            assert!(
                M::decode(&wire.slice(..cut), version).is_err(),
                "{} v{version} decoded from {cut} of {} bytes",
                M::API_KEY,
                wire.len()
            );
        }
        let mut extra = BytesMut::from(&wire[..]);
        extra.extend_from_slice(&[0]);
        assert_eq!(
            M::decode(&extra.freeze(), version),
            Err(DecodeError::TrailingBytes(1)),
            "{} v{version}",
            M::API_KEY
        );
    }
}

#[test]
fn api_versions_round_trip_every_version() {
    round_trip(common::api_versions_request);
    round_trip(common::api_versions_response);
}

#[test]
fn metadata_round_trips_every_version() {
    round_trip(common::metadata_request);
    round_trip(common::metadata_response);
}

#[test]
fn sasl_round_trips_every_version() {
    round_trip(common::sasl_handshake_request);
    round_trip(common::sasl_handshake_response);
    round_trip(common::sasl_authenticate_request);
    round_trip(common::sasl_authenticate_response);
}

#[test]
fn init_producer_id_round_trips_every_version() {
    round_trip(common::init_producer_id_request);
    round_trip(common::init_producer_id_response);
}

#[test]
fn produce_round_trips_every_version() {
    round_trip(common::produce_request);
    round_trip(common::produce_response);
}

#[test]
fn topic_admin_round_trips_every_version() {
    round_trip(common::create_topics_request);
    round_trip(common::create_topics_response);
    round_trip(common::delete_topics_request);
    round_trip(common::delete_topics_response);
}

#[test]
fn unsupported_versions_are_typed_errors() {
    let body = Bytes::new();
    assert_eq!(
        ProduceRequest::decode(&body, 14),
        Err(DecodeError::UnsupportedVersion {
            api_key: ApiKey::PRODUCE,
            version: 14
        })
    );
    let mut buf = BytesMut::new();
    assert!(matches!(
        common::metadata_request(13).encode(&mut buf, 14),
        Err(EncodeError::UnsupportedVersion { .. })
    ));
    assert_eq!(
        InitProducerIdRequest::decode(&body, 7),
        Err(DecodeError::UnsupportedVersion {
            api_key: ApiKey::INIT_PRODUCER_ID,
            version: 7
        })
    );
}

/// Golden: ApiVersions v3 request as librdkafka 2.x sends it (header v2, compact strings).
#[test]
fn golden_api_versions_v3_request_frame() {
    let mut wire = vec![0, 0, 0, 0];
    wire.extend_from_slice(&[0, 18, 0, 3, 0, 0, 0, 1]);
    wire.extend_from_slice(&[0, 7]);
    wire.extend_from_slice(b"rdkafka");
    wire.push(0); // header tagged fields
    wire.push(11);
    wire.extend_from_slice(b"librdkafka");
    wire.push(6);
    wire.extend_from_slice(b"2.6.1");
    wire.push(0); // body tagged fields
    let size = (wire.len() - 4) as i32;
    wire[..4].copy_from_slice(&size.to_be_bytes());

    let mut splitter_buf = BytesMut::from(&wire[..]);
    let frame = FrameSplitter::new(1024)
        .split(&mut splitter_buf)
        .unwrap()
        .unwrap();
    let (header, request) = decode_request(&frame).unwrap();
    assert_eq!(header.client_id.as_deref(), Some("rdkafka"));
    let Request::ApiVersions(request) = request else {
        panic!("not ApiVersions")
    };
    assert_eq!(request.client_software_name, "librdkafka");
    assert_eq!(request.client_software_version, "2.6.1");
    assert!(request.has_valid_client_software());

    let mut encoded = BytesMut::new();
    encode_request_frame(&mut encoded, &header, &request).unwrap();
    assert_eq!(&encoded[..], &wire[..]);
}

/// Golden: the ApiVersions v3 response (header v0!) for one API.
#[test]
fn golden_api_versions_v3_response_frame() {
    let response = ApiVersionsResponse::new(
        ErrorCode::None,
        vec![ApiVersionRange {
            api_key: ApiKey::PRODUCE,
            min_version: 3,
            max_version: 11,
        }],
    );
    let frame = encode_response_frame(7, 3, &response).unwrap();
    let expected: &[u8] = &[
        0, 0, 0, 19, // size
        0, 0, 0, 7, // correlation id, header v0: no tagged fields
        0, 0, // error code
        2, // compact array of 1
        0, 0, 0, 3, 0, 11, 0, // produce 3..11, tagged fields
        0, 0, 0, 0, // throttle
        0, // tagged fields
    ];
    assert_eq!(&frame[..], expected);
}

#[test]
fn golden_unsupported_version_fallback_is_v0() {
    let frame = ApiVersionsResponse::unsupported_version_frame(
        9,
        vec![ApiVersionRange {
            api_key: ApiKey::API_VERSIONS,
            min_version: 0,
            max_version: 4,
        }],
    );
    let expected: &[u8] = &[0, 0, 0, 16, 0, 0, 0, 9, 0, 35, 0, 0, 0, 1, 0, 18, 0, 0, 0, 4];
    assert_eq!(&frame[..], expected);
    let (header, body) = decode_response_frame::<ApiVersionsResponse>(&frame.slice(4..), 0).unwrap();
    assert_eq!(header.correlation_id, 9);
    assert_eq!(body.error_code, ErrorCode::UnsupportedVersion);
}

/// Golden: Produce v3 request with one partition and null records.
#[test]
fn golden_produce_v3_request_body() {
    let request = ProduceRequest {
        transactional_id: None,
        acks: 1,
        timeout_ms: 1500,
        topics: vec![ProduceTopicData {
            name: "t".into(),
            topic_id: Uuid::ZERO,
            partitions: vec![ProducePartitionData {
                index: 2,
                records: None,
            }],
        }],
        unknown_tagged_fields: Vec::new(),
    };
    let mut buf = BytesMut::new();
    request.encode(&mut buf, 3).unwrap();
    let expected: &[u8] = &[
        0xff, 0xff, // null transactional id
        0, 1, // acks
        0, 0, 0x05, 0xdc, // timeout
        0, 0, 0, 1, 0, 1, b't', // one topic "t"
        0, 0, 0, 1, 0, 0, 0, 2, // one partition, index 2
        0xff, 0xff, 0xff, 0xff, // null records
    ];
    assert_eq!(&buf[..], expected);
}

/// Golden: a Produce v13 request names its topic by id (16 bytes where the name was), and the
/// error response for it names the same id and partition.
#[test]
fn golden_produce_v13_request_and_error_response() {
    let mut body = vec![0]; // null transactional id (compact)
    body.extend_from_slice(&[0xff, 0xff]); // acks -1
    body.extend_from_slice(&[0, 0, 0x03, 0xe8]); // timeout 1000
    body.push(2); // one topic
    body.extend_from_slice(&[0xab; 16]); // its topic id
    body.push(2); // one partition
    body.extend_from_slice(&[0, 0, 0, 4]); // index 4
    body.push(0); // null records
    body.push(0); // partition tags
    body.push(0); // topic tags
    body.push(0); // request tags
    let body = Bytes::from(body);
    let request = ProduceRequest::decode(&body, 13).unwrap();
    assert_eq!(
        request.topics,
        vec![ProduceTopicData {
            name: String::new(),
            topic_id: Uuid([0xab; 16]),
            partitions: vec![ProducePartitionData {
                index: 4,
                records: None,
            }],
        }]
    );
    let mut buf = BytesMut::new();
    request.encode(&mut buf, 13).unwrap();
    assert_eq!(&buf[..], &body[..]);

    let frame = Request::Produce(request)
        .error_response_frame(6, 13, ErrorCode::UnsupportedVersion, None)
        .unwrap();
    let mut expected = vec![0, 0, 0, 0]; // size, filled in below
    expected.extend_from_slice(&[0, 0, 0, 6, 0]); // correlation id, header tags
    expected.push(2); // one topic
    expected.extend_from_slice(&[0xab; 16]); // by id
    expected.push(2); // one partition
    expected.extend_from_slice(&[0, 0, 0, 4]); // index 4
    expected.extend_from_slice(&[0, 35]); // UNSUPPORTED_VERSION
    expected.extend_from_slice(&[0xff; 24]); // base offset, log append time, log start offset
    expected.push(1); // no record errors
    expected.push(0); // null error message
    expected.push(0); // partition tags
    expected.push(0); // topic tags
    expected.extend_from_slice(&[0, 0, 0, 0]); // throttle
    expected.push(0); // tags
    let size = (expected.len() - 4) as i32;
    expected[..4].copy_from_slice(&size.to_be_bytes());
    assert_eq!(&frame[..], &expected[..]);
}

/// Golden: Produce v9 response (flexible) with one successful partition.
#[test]
fn golden_produce_v9_response_body() {
    let response = ProduceResponse {
        topics: vec![ProduceTopicResponse {
            name: "t".into(),
            topic_id: Uuid::ZERO,
            partitions: vec![ProducePartitionResponse::success(0, 5, 0)],
        }],
        throttle_time_ms: 0,
        node_endpoints: Vec::new(),
    };
    let frame = encode_response_frame(1, 9, &response).unwrap();
    let expected: &[u8] = &[
        0, 0, 0, 48, // size
        0, 0, 0, 1, 0, // header v1
        2, 2, b't', // one topic "t"
        2,    // one partition
        0, 0, 0, 0, // index
        0, 0, // error
        0, 0, 0, 0, 0, 0, 0, 5, // base offset
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // log append time
        0, 0, 0, 0, 0, 0, 0, 0, // log start offset
        1, // empty record errors
        0, // null error message
        0, // partition tagged fields
        0, // topic tagged fields
        0, 0, 0, 0, // throttle
        0, // tagged fields
    ];
    assert_eq!(&frame[..], expected);
}

/// Golden: Metadata v0 request with an empty topic list means "all topics".
#[test]
fn golden_metadata_v0_all_topics() {
    let body = Bytes::from_static(&[0, 0, 0, 0]);
    let request = MetadataRequest::decode(&body, 0).unwrap();
    assert_eq!(request.topics, None);
    let mut buf = BytesMut::new();
    request.encode(&mut buf, 0).unwrap();
    assert_eq!(&buf[..], &body[..]);
    // v1+: null means all topics, empty means none.
    let v1_null = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff]);
    assert_eq!(MetadataRequest::decode(&v1_null, 1).unwrap().topics, None);
    let v1_empty = Bytes::from_static(&[0, 0, 0, 0]);
    assert_eq!(
        MetadataRequest::decode(&v1_empty, 1).unwrap().topics,
        Some(Vec::new())
    );
}

#[test]
fn produce_records_are_zero_copy_slices_of_the_frame() {
    let request = common::produce_request(9);
    let header = RequestHeader::new(ApiKey::PRODUCE, 9, 3, Some("bench"));
    let mut buf = BytesMut::new();
    encode_request_frame(&mut buf, &header, &request).unwrap();
    let frame = buf.freeze().slice(4..);
    let (decoded_header, decoded) = decode_request(&frame).unwrap();
    assert_eq!(decoded_header, header);
    let Request::Produce(decoded) = decoded else {
        panic!("not produce")
    };
    let records = decoded.topics[0].partitions[0].records.as_ref().unwrap();
    let frame_range = frame.as_ptr() as usize..frame.as_ptr() as usize + frame.len();
    assert!(
        frame_range.contains(&(records.as_ptr() as usize)),
        "records were copied"
    );
    assert_eq!(decoded, request);
}

#[test]
fn error_response_frames_name_every_partition() {
    let request = Request::Produce(common::produce_request(9));
    let frame = request
        .error_response_frame(
            11,
            9,
            ErrorCode::InvalidRequiredAcks,
            Some("acks must be -1, 0 or 1"),
        )
        .unwrap();
    let (header, response) = decode_response_frame::<ProduceResponse>(&frame.slice(4..), 9).unwrap();
    assert_eq!(header.correlation_id, 11);
    let partitions: Vec<_> = response
        .topics
        .iter()
        .flat_map(|topic| {
            topic
                .partitions
                .iter()
                .map(move |p| (topic.name.as_str(), p.index, p.error_code))
        })
        .collect();
    assert_eq!(
        partitions,
        vec![
            ("sales.orders", 0, ErrorCode::InvalidRequiredAcks),
            ("sales.orders", 1, ErrorCode::InvalidRequiredAcks),
            ("events", 3, ErrorCode::InvalidRequiredAcks),
        ]
    );
    assert_eq!(response.topics[0].partitions[0].base_offset, -1);

    let create = Request::CreateTopics(common::create_topics_request(5));
    let frame = create
        .error_response_frame(12, 5, ErrorCode::PolicyViolation, Some("use Fluss SQL"))
        .unwrap();
    let (_, response) = decode_response_frame::<CreateTopicsResponse>(&frame.slice(4..), 5).unwrap();
    assert_eq!(response.topics[0].name, "new.topic");
    assert_eq!(response.topics[0].error_message.as_deref(), Some("use Fluss SQL"));
}

#[test]
fn generic_error_responses_for_each_known_api() {
    let cases = [
        (ApiKey::API_VERSIONS, 0..=4),
        (ApiKey::METADATA, 0..=13),
        (ApiKey::SASL_HANDSHAKE, 0..=1),
        (ApiKey::SASL_AUTHENTICATE, 0..=2),
        (ApiKey::PRODUCE, 0..=13),
        (ApiKey::INIT_PRODUCER_ID, 0..=6),
        (ApiKey::CREATE_TOPICS, 0..=7),
        (ApiKey::DELETE_TOPICS, 0..=6),
    ];
    for (api_key, versions) in cases {
        for version in versions {
            let frame =
                encode_error_response(api_key, version, 77, ErrorCode::UnsupportedVersion, None).unwrap();
            let size = i32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
            assert_eq!(size, frame.len() - 4, "{api_key} v{version}");
            assert_eq!(&frame[4..8], &77i32.to_be_bytes());
        }
    }
    let frame =
        encode_error_response(ApiKey::SASL_HANDSHAKE, 1, 1, ErrorCode::IllegalSaslState, None).unwrap();
    let (_, response) = decode_response_frame::<SaslHandshakeResponse>(&frame.slice(4..), 1).unwrap();
    assert_eq!(response.error_code, ErrorCode::IllegalSaslState);
    // An ApiVersions version we do not know still gets a v0-format answer.
    let frame =
        encode_error_response(ApiKey::API_VERSIONS, 9, 5, ErrorCode::UnsupportedVersion, None).unwrap();
    let (_, response) = decode_response_frame::<ApiVersionsResponse>(&frame.slice(4..), 0).unwrap();
    assert_eq!(response.error_code, ErrorCode::UnsupportedVersion);
    // An API without a codec here answers from its layout (tests/error_layouts.rs); an API
    // key Kafka 4.4 does not define has no answer.
    let frame = encode_error_response(ApiKey::FETCH, 4, 1, ErrorCode::UnsupportedVersion, None).unwrap();
    assert_eq!(&frame[..8], &[0, 0, 0, 12, 0, 0, 0, 1]);
    assert!(matches!(
        encode_error_response(ApiKey(999), 0, 1, ErrorCode::UnsupportedVersion, None),
        Err(EncodeError::UnsupportedVersion { .. })
    ));
    // Metadata v13 and InitProducerId v6 carry the code in their top-level error code.
    let frame = encode_error_response(ApiKey::METADATA, 13, 2, ErrorCode::UnsupportedVersion, None).unwrap();
    let (_, response) = decode_response_frame::<MetadataResponse>(&frame.slice(4..), 13).unwrap();
    assert_eq!(response.error_code, ErrorCode::UnsupportedVersion);
    let frame = encode_error_response(
        ApiKey::INIT_PRODUCER_ID,
        6,
        3,
        ErrorCode::UnsupportedVersion,
        None,
    )
    .unwrap();
    let (_, response) = decode_response_frame::<InitProducerIdResponse>(&frame.slice(4..), 6).unwrap();
    assert_eq!(response.error_code, ErrorCode::UnsupportedVersion);
    assert_eq!(response.ongoing_txn_producer_id, -1);
    // SaslHandshake v2 and SaslAuthenticate v3 do not exist in Kafka 4.4: nothing to encode.
    for (api_key, version) in [(ApiKey::SASL_HANDSHAKE, 2), (ApiKey::SASL_AUTHENTICATE, 3)] {
        assert!(matches!(
            encode_error_response(api_key, version, 1, ErrorCode::UnsupportedVersion, None),
            Err(EncodeError::UnsupportedVersion { .. })
        ));
    }
}

/// Golden: a Metadata v13 request (v12's layout) for one topic by name, answered with the
/// error response: the topic with UNSUPPORTED_VERSION and the top-level error code (v13+)
/// before the final tagged fields.
#[test]
fn golden_metadata_v13_error_response() {
    let mut body = vec![2]; // one topic (compact array)
    body.extend_from_slice(&[0; 16]); // topic id zero
    body.push(2); // compact string "t"
    body.push(b't');
    body.push(0); // topic tags
    body.extend_from_slice(&[0, 1, 0]); // no auto-creation, topic authorized ops, no tags
    let body = Bytes::from(body);
    let request = MetadataRequest::decode(&body, 13).unwrap();
    assert_eq!(request, MetadataRequest::decode(&body, 12).unwrap());
    assert!(request.include_topic_authorized_operations);
    let frame = Request::Metadata(request)
        .error_response_frame(9, 13, ErrorCode::UnsupportedVersion, None)
        .unwrap();
    let mut expected = vec![0, 0, 0, 0]; // size, filled in below
    expected.extend_from_slice(&[0, 0, 0, 9, 0]); // correlation id, header tags
    expected.extend_from_slice(&[0, 0, 0, 0]); // throttle
    expected.push(1); // no brokers
    expected.push(0); // cluster id null
    expected.extend_from_slice(&(-1i32).to_be_bytes()); // controller
    expected.push(2); // one topic
    expected.extend_from_slice(&[0, 35]); // UNSUPPORTED_VERSION
    expected.extend_from_slice(&[2, b't']);
    expected.extend_from_slice(&[0; 16]);
    expected.push(0); // not internal
    expected.push(1); // no partitions
    expected.extend_from_slice(&i32::MIN.to_be_bytes()); // authorized operations omitted
    expected.push(0); // topic tags
    expected.extend_from_slice(&[0, 35]); // top-level error code (v13+)
    expected.push(0); // tags
    let size = (expected.len() - 4) as i32;
    expected[..4].copy_from_slice(&size.to_be_bytes());
    assert_eq!(&frame[..], &expected[..]);
    // v12 has no top-level error code: the same answer two bytes shorter.
    let v12 = Request::Metadata(MetadataRequest::decode(&body, 12).unwrap())
        .error_response_frame(9, 12, ErrorCode::UnsupportedVersion, None)
        .unwrap();
    assert_eq!(v12.len(), frame.len() - 2);
}

#[test]
fn unknown_api_keys_decode_header_only() {
    let header = RequestHeader::new(ApiKey::FETCH, 12, 4, Some("c"));
    let mut buf = BytesMut::new();
    header.encode(&mut buf).unwrap();
    buf.extend_from_slice(&[1, 2, 3]);
    let frame = buf.freeze();
    let (decoded, body) = RequestHeader::decode(&frame).unwrap();
    assert_eq!(decoded, header);
    assert_eq!(&body[..], &[1, 2, 3]);
    assert_eq!(
        decode_request(&frame),
        Err(DecodeError::UnsupportedApi(ApiKey::FETCH))
    );
}

#[test]
fn api_versions_client_software_validation() {
    let mut request = common::api_versions_request(3);
    assert!(request.has_valid_client_software());
    for bad in ["", "-lead", "trail.", "sp ace", "ünï"] {
        request.client_software_name = bad.into();
        assert!(!request.has_valid_client_software(), "{bad:?}");
    }
}
