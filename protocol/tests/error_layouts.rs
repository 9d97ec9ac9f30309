//! The layout-driven error responses (`error_response`): every API key and version of the
//! generated table is read by the `kafka-protocol` crate where it knows them, and written back
//! by it to the same bytes; golden bytes for two; the table is what the generator makes of
//! Kafka 4.4.0's definitions.

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey as TheirApiKey, ResponseHeader as TheirHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};
use kafluss_protocol::error_response::LAYOUTS;
use kafluss_protocol::*;

const CODE: ErrorCode = ErrorCode::UnsupportedVersion;

/// Reads `frame` (size prefix included) as kafka-protocol reads a response of `key` at
/// `version`, checks that it writes the same bytes back, and returns its reading.
fn read_back(frame: &Bytes, key: TheirApiKey, version: i16, what: &str) -> ResponseKind {
    assert_eq!(
        i32::from_be_bytes(frame[..4].try_into().unwrap()) as usize,
        frame.len() - 4,
        "{what}: size prefix"
    );
    let header_version = key.response_header_version(version);
    let mut input = frame.slice(4..);
    let header = TheirHeader::decode(&mut input, header_version).unwrap();
    assert_eq!(header.correlation_id, 1234, "{what}");
    let response = ResponseKind::decode(key, &mut input, version)
        .unwrap_or_else(|e| panic!("{what}: kafka-protocol cannot read it: {e}"));
    assert_eq!(input.remaining(), 0, "{what}: bytes left after the response");
    let mut again = BytesMut::new();
    header.encode(&mut again, header_version).unwrap();
    response.encode(&mut again, version).unwrap();
    assert_eq!(
        &again[..],
        &frame[4..],
        "{what}: kafka-protocol writes other bytes"
    );
    response
}

#[test]
fn every_layout_error_response_reads_and_writes_back_with_kafka_protocol() {
    let mut checked = 0;
    let mut with_error_code = 0;
    let mut unknown_to_them = Vec::new();
    for layout in LAYOUTS {
        let api_key = ApiKey(layout.api_key);
        for version in layout.valid_versions.min..=layout.valid_versions.max {
            let what = format!("{} ({}) v{version}", layout.name, layout.api_key);
            let frame = encode_layout_error_response(api_key, version, 1234, CODE, None).unwrap();
            let Some(key) = TheirApiKey::try_from(layout.api_key)
                .ok()
                .filter(|key| (key.valid_versions().min..=key.valid_versions().max).contains(&version))
            else {
                unknown_to_them.push(what);
                continue;
            };
            // Our response header versions (and so our flexible versions) are theirs.
            assert_eq!(
                key.response_header_version(version),
                layout.response_header_version(version),
                "{what}: response header version"
            );
            let response = read_back(&frame, key, version, &what);
            // The top-level fields are the second level of the enum's pretty Debug.
            let debug = format!("{response:#?}");
            let top_level_code = debug.contains("\n        error_code: 35,\n");
            assert_eq!(top_level_code, layout.has_error_code(version), "{what}: {debug}");
            assert_eq!(
                debug.matches("error_code: 35").count(),
                usize::from(top_level_code),
                "{what}"
            );
            with_error_code += usize::from(top_level_code);

            // With a message: in the top-level ErrorMessage where there is one.
            let frame =
                encode_layout_error_response(api_key, version, 1234, CODE, Some("kafluss says no")).unwrap();
            let debug = format!("{:#?}", read_back(&frame, key, version, &what));
            let has_message = layout.fields.iter().any(|f| {
                f.name == "ErrorMessage"
                    && f.versions.contains(version)
                    && !f.tagged_versions.contains(version)
            });
            assert_eq!(debug.contains("kafluss says no"), has_message, "{what}: {debug}");
            checked += 1;
        }
    }
    println!(
        "{checked} API versions read back, {with_error_code} with a top-level error code; unknown to kafka-protocol 0.18: {unknown_to_them:?}"
    );
    // Kafka 4.4 defines 91 response APIs with versions; kafka-protocol 0.18 knows all but the
    // newest (Streams groups, ListOffsets v11, ...).
    assert!(LAYOUTS.len() >= 90, "{}", LAYOUTS.len());
    assert!(checked >= 280, "only {checked} checked");
    assert!(unknown_to_them.len() <= 20, "{unknown_to_them:?}");
}

#[test]
fn encode_error_response_falls_back_to_the_layouts() {
    // An API without a codec here.
    let frame = encode_error_response(ApiKey::LIST_OFFSETS, 1, 1234, CODE, None).unwrap();
    assert_eq!(
        frame,
        encode_layout_error_response(ApiKey::LIST_OFFSETS, 1, 1234, CODE, None).unwrap()
    );
    // A codec's own versions keep the codec's answer; Kafka 4.4's others come from the layout
    // (CreateTopics v0-1 are the codec's though Kafka 4.4 defines v2-7 only).
    let frame = encode_error_response(ApiKey::CREATE_TOPICS, 0, 1234, CODE, None).unwrap();
    assert_eq!(&frame[..], &[0, 0, 0, 8, 0, 0, 4, 210, 0, 0, 0, 0]);
    // Not defined by Kafka 4.4: no answer.
    for (key, version) in [
        (ApiKey::LIST_OFFSETS, 0),
        (ApiKey::LEADER_AND_ISR, 0),
        (ApiKey(999), 0),
    ] {
        assert!(matches!(
            encode_error_response(key, version, 1, CODE, None),
            Err(EncodeError::UnsupportedVersion { .. })
        ));
    }
}

/// Golden: ListOffsets v1 (not flexible): header v0, then an empty topics array (v1 has no
/// throttle time and no top-level error code).
#[test]
fn golden_list_offsets_v1() {
    let frame = encode_error_response(ApiKey::LIST_OFFSETS, 1, 1234, CODE, None).unwrap();
    #[rustfmt::skip]
    let expected = [
        0, 0, 0, 8,    // size
        0, 0, 4, 210,  // correlation id 1234 (header v0)
        0, 0, 0, 0,    // Topics: empty
    ];
    assert_eq!(&frame[..], &expected);
}

/// Golden: DescribeCluster v0 (flexible): header v1, then every field of the layout.
#[test]
fn golden_describe_cluster_v0() {
    let frame = encode_error_response(ApiKey::DESCRIBE_CLUSTER, 0, 1234, CODE, None).unwrap();
    #[rustfmt::skip]
    let expected = [
        0, 0, 0, 23,           // size
        0, 0, 4, 210, 0,       // correlation id 1234, no tagged fields (header v1)
        0, 0, 0, 0,            // ThrottleTimeMs 0
        0, 35,                 // ErrorCode UNSUPPORTED_VERSION
        0,                     // ErrorMessage null (compact)
        1,                     // ClusterId "" (compact, not nullable)
        255, 255, 255, 255,    // ControllerId: default -1
        1,                     // Brokers: empty (compact)
        128, 0, 0, 0,          // ClusterAuthorizedOperations: default -2147483648
        0,                     // no tagged fields
    ];
    assert_eq!(&frame[..], &expected);
    let frame = encode_layout_error_response(ApiKey::DESCRIBE_CLUSTER, 0, 1234, CODE, Some("no")).unwrap();
    assert_eq!(&frame[15..18], &[3, b'n', b'o'], "ErrorMessage \"no\" (compact)");
}

/// Golden: DescribeConfigs v4 (flexible, no top-level error code).
#[test]
fn golden_describe_configs_v4() {
    let frame = encode_error_response(ApiKey::DESCRIBE_CONFIGS, 4, 1234, CODE, None).unwrap();
    #[rustfmt::skip]
    let expected = [
        0, 0, 0, 11,        // size
        0, 0, 4, 210, 0,    // correlation id 1234, no tagged fields (header v1)
        0, 0, 0, 0,         // ThrottleTimeMs 0
        1,                  // Results: empty (compact)
        0,                  // no tagged fields
    ];
    assert_eq!(&frame[..], &expected);
}

/// The checked-in table is what `protocol/gen/error_layouts.py` makes of kafka-clients 4.4.0,
/// which `./test.sh` installs (tests/kafka/kafka.sh setup) at tests/kafka/target/lib/. Without
/// the jar the test says so and passes, unless KAFLUSS_REQUIRE_CLIENTS is set (test.sh sets it).
#[test]
fn generated_table_is_up_to_date() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let jar = root.join("../tests/kafka/target/lib/kafka-clients-4.4.0.jar");
    if !jar.exists() {
        let why = format!(
            "{} is missing (./test.sh --setup-only installs it)",
            jar.display()
        );
        assert!(std::env::var_os("KAFLUSS_REQUIRE_CLIENTS").is_none(), "{why}");
        eprintln!("generated_table_is_up_to_date: not checked: {why}");
        return;
    }
    let output = std::process::Command::new("python3")
        .arg(root.join("gen/error_layouts.py"))
        .arg(&jar)
        .output()
        .expect("python3 runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let checked_in = std::fs::read_to_string(root.join("src/error_response/layouts.rs")).unwrap();
    assert!(
        String::from_utf8(output.stdout).unwrap() == checked_in,
        "protocol/src/error_response/layouts.rs is not what protocol/gen/error_layouts.py makes of {}: run it again",
        jar.display()
    );
}
