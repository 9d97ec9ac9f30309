//! Every client-provokable error of behaviour.md, sent as raw Kafka requests (no client sends
//! most of these on purpose), with the exact code per partition and nothing appended.

#[path = "broker_support.rs"]
mod support;

use std::io::Write;
use std::time::Duration;

use bytes::Bytes;
use kafluss_protocol::{
    decode_response_frame, ApiKey, ApiVersionsRequest, ApiVersionsResponse, Compression, CreatableTopic,
    CreateTopicsRequest, CreateTopicsResponse, ErrorCode, InitProducerIdRequest, InitProducerIdResponse,
    MetadataRequest, MetadataRequestTopic, MetadataResponse, ProducePartitionData, ProduceRequest,
    ProduceResponse, ProduceTopicData, RecordBatchBuilder,
};
use serde_json::json;
use support::{Raw, Server};

fn batch(values: &[&str]) -> Bytes {
    let mut builder = RecordBatchBuilder::new(Compression::None);
    for value in values {
        builder.append(1_700_000_000_000, None, Some(value.as_bytes()), &[]);
    }
    builder.build().expect("batch")
}

/// (partition, records) pairs of one topic.
type Partitions = Vec<(i32, Option<Bytes>)>;

fn request(acks: i16, topics: Vec<(&str, Partitions)>) -> ProduceRequest {
    ProduceRequest {
        transactional_id: None,
        acks,
        timeout_ms: 5000,
        topics: topics
            .into_iter()
            .map(|(name, partitions)| ProduceTopicData {
                name: name.to_string(),
                topic_id: kafluss_protocol::Uuid::ZERO,
                partitions: partitions
                    .into_iter()
                    .map(|(index, records)| ProducePartitionData { index, records })
                    .collect(),
            })
            .collect(),
        unknown_tagged_fields: Vec::new(),
    }
}

/// (topic, partition, code, base_offset, message, record_errors) of one partition.
type Outcome = (String, i32, ErrorCode, i64, String, Vec<i32>);

fn outcomes(response: &ProduceResponse) -> Vec<Outcome> {
    response
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                (
                    t.name.clone(),
                    p.index,
                    p.error_code,
                    p.base_offset,
                    p.error_message.clone().unwrap_or_default(),
                    p.record_errors.iter().map(|e| e.batch_index).collect(),
                )
            })
        })
        .collect()
}

fn setup(server: &Server) {
    server.sql_ok(
        "CREATE TABLE fluss.good (id INT, _kafka_rescue STRING) WITH ('table.kafka.enabled' = 'true', 'bucket.num' = '2')",
    );
    server.sql_ok(
        "CREATE TABLE fluss.strict (id INT) WITH ('table.kafka.enabled' = 'true', 'bucket.num' = '2')",
    );
    server.sql_ok("CREATE TABLE fluss.disabled (id INT)");
}

#[test]
fn per_partition_errors_are_isolated_and_append_nothing() {
    let server = Server::start(1, &[]);
    setup(&server);
    let mut raw = Raw::connect(server.kafka);

    let mut corrupt = batch(&[r#"{"id":1}"#]).to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff; // CRC32C covers the records
    let transactional_producer = {
        let mut builder = RecordBatchBuilder::new(Compression::None)
            .producer(7, 0, 0)
            .flags(true, false);
        builder.append(1, None, Some(br#"{"id":1}"#), &[]);
        builder.build().unwrap()
    };
    let transactional = {
        let mut builder = RecordBatchBuilder::new(Compression::None).flags(true, false);
        builder.append(1, None, Some(br#"{"id":1}"#), &[]);
        builder.build().unwrap()
    };
    let response = raw.produce(
        8,
        &request(
            1,
            vec![
                (
                    "good",
                    vec![(0, Some(batch(&[r#"{"id":1}"#, r#"{"id":2,"extra":true}"#])))],
                ),
                ("nosuch", vec![(0, Some(batch(&[r#"{"id":1}"#])))]),
                ("nodb.t", vec![(0, Some(batch(&[r#"{"id":1}"#])))]),
                ("a.b.c", vec![(0, Some(batch(&[r#"{"id":1}"#])))]),
                ("fluss.disabled", vec![(0, Some(batch(&[r#"{"id":1}"#])))]),
                (
                    "fluss.good",
                    vec![
                        (2, Some(batch(&[r#"{"id":1}"#]))),
                        (-1, Some(batch(&[r#"{"id":1}"#]))),
                        (1, Some(Bytes::from(corrupt))),
                    ],
                ),
                (
                    "strict",
                    vec![
                        (
                            0,
                            Some(batch(&[r#"{"id":1}"#, r#"{"id":"x"}"#, r#"{"id":3}"#, "nope"])),
                        ),
                        (1, Some(transactional_producer)),
                    ],
                ),
                ("fluss.strict", vec![(1, None)]),
                ("sales.none", vec![(0, Some(transactional))]),
            ],
        ),
    );
    let got = outcomes(&response);
    let codes: Vec<(&str, i32, ErrorCode)> = got.iter().map(|o| (o.0.as_str(), o.1, o.2)).collect();
    assert_eq!(
        codes,
        vec![
            ("good", 0, ErrorCode::None),
            ("nosuch", 0, ErrorCode::UnknownTopicOrPartition),
            ("nodb.t", 0, ErrorCode::UnknownTopicOrPartition),
            ("a.b.c", 0, ErrorCode::InvalidTopicException),
            ("fluss.disabled", 0, ErrorCode::InvalidTopicException),
            ("fluss.good", 2, ErrorCode::UnknownTopicOrPartition),
            ("fluss.good", -1, ErrorCode::InvalidRequest),
            ("fluss.good", 1, ErrorCode::CorruptMessage),
            ("strict", 0, ErrorCode::InvalidRecord),
            ("strict", 1, ErrorCode::InvalidRequest),
            ("fluss.strict", 1, ErrorCode::InvalidRecord),
            ("sales.none", 0, ErrorCode::UnknownTopicOrPartition),
        ]
    );
    assert_eq!(got[0].3, 0, "base offset of the first stored row");
    let strict = &got[8];
    assert_eq!(strict.3, -1);
    assert_eq!(
        strict.5,
        vec![1, 3],
        "record_errors names every record that does not convert"
    );
    assert!(
        strict.4.contains("record 1") && strict.4.contains("id"),
        "{}",
        strict.4
    );
    assert!(
        got[9].4.contains("transactional batches are not supported"),
        "{}",
        got[9].4
    );
    for outcome in &got {
        assert!(outcome.4.len() <= 1024);
    }

    let good = server.scan("fluss.good");
    assert_eq!(good.len(), 2, "only the valid partition was appended: {good:?}");
    assert_eq!(good[1]["row"]["_kafka_rescue"], json!(r#"{"extra":true}"#));
    assert!(
        server.scan("fluss.strict").is_empty(),
        "a failing batch appends nothing"
    );
}

/// A Produce partition of more than one record batch is refused INVALID_RECORD, as Kafka
/// refuses it from v3, and none of its batches is stored (kafluss took them as one job: a
/// retry of an idempotent batch beside a new one answered both as the retry and stored
/// neither). A partition of one batch beside it is stored.
#[test]
fn a_partition_of_several_batches_is_refused_and_stores_nothing() {
    let server = Server::start(1, &[]);
    setup(&server);
    let mut raw = Raw::connect(server.kafka);
    let two = Bytes::from([batch(&[r#"{"id":1}"#]), batch(&[r#"{"id":2}"#])].concat());
    let response = raw.produce(
        8,
        &request(
            1,
            vec![("good", vec![(0, Some(two)), (1, Some(batch(&[r#"{"id":3}"#])))])],
        ),
    );
    let got = outcomes(&response);
    assert_eq!(got[0].2, ErrorCode::InvalidRecord, "{got:?}");
    assert!(got[0].4.contains("exactly one record batch"), "{}", got[0].4);
    assert_eq!(got[1].2, ErrorCode::None, "{got:?}");
    let rows = server.scan("fluss.good");
    let ids: Vec<i64> = rows.iter().map(|r| r["row"]["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, [3], "{rows:?}");
}

#[test]
fn whole_request_rejections_give_every_partition_the_code() {
    let server = Server::start(1, &[]);
    setup(&server);
    let mut raw = Raw::connect(server.kafka);
    let both = |acks| {
        request(
            acks,
            vec![(
                "good",
                vec![
                    (0, Some(batch(&[r#"{"id":1}"#]))),
                    (1, Some(batch(&[r#"{"id":2}"#]))),
                ],
            )],
        )
    };
    let mut transactional = both(1);
    transactional.transactional_id = Some("tx".into());
    let duplicate = request(
        1,
        vec![
            ("good", vec![(0, Some(batch(&[r#"{"id":1}"#])))]),
            ("good", vec![(0, Some(batch(&[r#"{"id":1}"#])))]),
        ],
    );
    for (request, code) in [
        (transactional, ErrorCode::InvalidRequest),
        (both(2), ErrorCode::InvalidRequiredAcks),
        (duplicate, ErrorCode::InvalidRequest),
    ] {
        let got = outcomes(&raw.produce(9, &request));
        assert_eq!(got.len(), 2);
        for outcome in got {
            assert_eq!(outcome.2, code, "{outcome:?}");
            assert_eq!(outcome.3, -1);
        }
    }
    assert!(server.scan("fluss.good").is_empty());
}

#[test]
fn legacy_magic_oversized_records_and_unsupported_versions() {
    let server = Server::start(1, &["kafka.max-record-size=64", "kafka.max-request-size=4kb"]);
    setup(&server);
    let mut raw = Raw::connect(server.kafka);

    // A magic 1 message set: offset, size, crc, magic 1, attributes, timestamp, key -1, value.
    let value = br#"{"id":1}"#;
    let mut message = vec![1u8, 0];
    message.extend_from_slice(&0i64.to_be_bytes());
    message.extend_from_slice(&(-1i32).to_be_bytes());
    message.extend_from_slice(&(value.len() as i32).to_be_bytes());
    message.extend_from_slice(value);
    let mut legacy = 0i64.to_be_bytes().to_vec();
    legacy.extend_from_slice(&((message.len() + 4) as i32).to_be_bytes());
    legacy.extend_from_slice(&[0, 0, 0, 0]);
    legacy.extend_from_slice(&message);
    // A set of two such messages (a legacy set holds one message per record): refused by its
    // magic too, not as a partition of several record batches (INVALID_RECORD before).
    let two = [&legacy[..], &legacy[..]].concat();
    let big = format!(r#"{{"id":1,"pad":"{}"}}"#, "x".repeat(100));
    let got = outcomes(&raw.produce(
        7,
        &request(
            1,
            vec![
                (
                    "good",
                    vec![(0, Some(Bytes::from(legacy))), (1, Some(batch(&[&big])))],
                ),
                ("strict", vec![(0, Some(Bytes::from(two)))]),
            ],
        ),
    ));
    assert_eq!(got[0].2, ErrorCode::UnsupportedForMessageFormat);
    assert_eq!(got[1].2, ErrorCode::MessageTooLarge);
    assert_eq!(got[2].2, ErrorCode::UnsupportedForMessageFormat);

    // Produce v0-2 are advertised (librdkafka compresses only when the range starts at 0) and
    // answered UNSUPPORTED_FOR_MESSAGE_FORMAT: they carry magic 0/1 message sets.
    for version in 0..=2 {
        let got = outcomes(&raw.produce(
            version,
            &request(1, vec![("good", vec![(0, Some(batch(&[r#"{"id":1}"#])))])]),
        ));
        assert_eq!(
            got[0].2,
            ErrorCode::UnsupportedForMessageFormat,
            "Produce v{version}"
        );
    }

    // Produce v13 (topics named by id; Kafka 4.4 defines it, kafluss never advertises it):
    // every topic id and partition is answered UNSUPPORTED_VERSION (before: an empty answer
    // carrying no error at all), and nothing is stored, even for the id of an existing table.
    let correlation = raw.send(12, &MetadataRequest::for_names(Some(&["fluss.good"])));
    let metadata: MetadataResponse = raw.recv(12, correlation);
    let good_id = metadata.topics[0].topic_id;
    assert_ne!(good_id, kafluss_protocol::Uuid::ZERO);
    let by_id = ProduceRequest {
        topics: vec![
            ProduceTopicData {
                name: String::new(),
                topic_id: good_id,
                partitions: vec![
                    ProducePartitionData {
                        index: 0,
                        records: Some(batch(&[r#"{"id":1}"#])),
                    },
                    ProducePartitionData {
                        index: 2,
                        records: None,
                    },
                ],
            },
            ProduceTopicData {
                name: String::new(),
                topic_id: kafluss_protocol::Uuid([9; 16]),
                partitions: vec![ProducePartitionData {
                    index: 1,
                    records: None,
                }],
            },
        ],
        ..request(-1, Vec::new())
    };
    let response = raw.produce(13, &by_id);
    let answered: Vec<_> = response
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.topic_id, p.index, p.error_code))
        })
        .collect();
    let other_id = kafluss_protocol::Uuid([9; 16]);
    assert_eq!(
        answered,
        vec![
            (good_id, 0, ErrorCode::UnsupportedVersion),
            (good_id, 2, ErrorCode::UnsupportedVersion),
            (other_id, 1, ErrorCode::UnsupportedVersion),
        ]
    );
    assert!(server.scan("fluss.good").is_empty());

    // Produce above v13, negative, or a v13 body that does not decode: the v13 (or v0) error
    // layout with no partition, in request order, and the connection stays open.
    for version in [13i16, 14, -1] {
        raw.correlation += 1;
        let correlation = raw.correlation;
        let mut frame = vec![0, 0];
        frame.extend_from_slice(&version.to_be_bytes());
        frame.extend_from_slice(&correlation.to_be_bytes());
        frame.extend_from_slice(&[0, 3, b'r', b'a', b'w', 0, 0xde, 0xad]);
        let mut framed = (frame.len() as i32).to_be_bytes().to_vec();
        framed.extend_from_slice(&frame);
        raw.stream.write_all(&framed).unwrap();
        let frame = raw.read_frame().expect("an answer, not a closed connection");
        let layout = version.clamp(0, 13);
        let (header, response) =
            decode_response_frame::<ProduceResponse>(&frame, layout).expect("the nearest layout");
        assert_eq!(header.correlation_id, correlation, "Produce v{version}");
        assert!(response.topics.is_empty());
    }

    // Metadata v13 and InitProducerId v6 are not advertised but exist in Kafka 4.4: each gets
    // its own error response with UNSUPPORTED_VERSION (Metadata: its top-level error code and
    // every named topic), and the connection stays open.
    let metadata = MetadataRequest::for_names(Some(&["good", "nosuch"]));
    let correlation = raw.send(13, &metadata);
    let response: MetadataResponse = raw.recv(13, correlation);
    assert_eq!(response.error_code, ErrorCode::UnsupportedVersion);
    let topics: Vec<_> = response
        .topics
        .iter()
        .map(|t| (t.name.as_deref(), t.error_code, t.partitions.len()))
        .collect();
    assert_eq!(
        topics,
        vec![
            (Some("good"), ErrorCode::UnsupportedVersion, 0),
            (Some("nosuch"), ErrorCode::UnsupportedVersion, 0),
        ]
    );
    let init = InitProducerIdRequest {
        transactional_id: None,
        transaction_timeout_ms: 60_000,
        producer_id: -1,
        producer_epoch: -1,
        enable_2pc: false,
        keep_prepared_txn: false,
    };
    let correlation = raw.send(6, &init);
    let response: InitProducerIdResponse = raw.recv(6, correlation);
    assert_eq!(response.error_code, ErrorCode::UnsupportedVersion);
    assert_eq!((response.producer_id, response.producer_epoch), (-1, -1));

    // An unknown ApiVersions version: v0-format UNSUPPORTED_VERSION listing our ranges, and the
    // connection stays open for the retry.
    // (The encoder refuses v9, so the frame is written by hand: header v2, a v3-shaped body.)
    raw.correlation += 1;
    let correlation = raw.correlation;
    let mut frame = vec![0, 18, 0, 9];
    frame.extend_from_slice(&correlation.to_be_bytes());
    frame.extend_from_slice(&[
        0, 3, b'r', b'a', b'w', 0, 4, b'r', b'a', b'w', 4, b'1', b'.', b'0', 0,
    ]);
    let mut framed = (frame.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&frame);
    raw.stream.write_all(&framed).unwrap();
    let frame = raw.read_frame().expect("ApiVersions answer");
    let (header, response) = decode_response_frame::<ApiVersionsResponse>(&frame, 0).expect("v0 layout");
    assert_eq!(header.correlation_id, correlation);
    assert_eq!(response.error_code, ErrorCode::UnsupportedVersion);
    assert!(response
        .api_keys
        .iter()
        .any(|r| r.api_key == ApiKey::PRODUCE && r.min_version == 0 && r.max_version == 12));
    let correlation = raw.send(
        3,
        &ApiVersionsRequest {
            client_software_name: "raw".into(),
            client_software_version: "1.0".into(),
            unknown_tagged_fields: Vec::new(),
        },
    );
    let response: ApiVersionsResponse = raw.recv(3, correlation);
    assert_eq!(response.error_code, ErrorCode::None);
    let listed: Vec<(i16, i16, i16)> = response
        .api_keys
        .iter()
        .map(|r| (r.api_key.0, r.min_version, r.max_version))
        .collect();
    assert_eq!(
        listed,
        vec![
            (0, 0, 12),
            (1, 4, 10),
            (3, 0, 12),
            (10, 0, 0),
            (17, 0, 1),
            (18, 0, 4),
            (22, 0, 5),
            (36, 0, 2)
        ]
    );

    // CreateTopics answers with its own response: tables are created through Fluss SQL.
    let create = CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: "fresh".into(),
            num_partitions: 1,
            replication_factor: 1,
            assignments: Vec::new(),
            configs: Vec::new(),
        }],
        timeout_ms: 1000,
        validate_only: false,
    };
    let correlation = raw.send(4, &create);
    let response: CreateTopicsResponse = raw.recv(4, correlation);
    assert_eq!(response.topics[0].name, "fresh");
    assert_eq!(response.topics[0].error_code, ErrorCode::PolicyViolation);
    assert!(response.topics[0]
        .error_message
        .as_deref()
        .unwrap_or("")
        .contains("Fluss SQL"));
    let (status, _) = server.get("/v1/tables/fluss.fresh");
    assert_eq!(status, 404, "no topic is ever created by Kafka");

    // A version Kafka 4.4 does not define has no layout (ListOffsets v0: header v1, replica id
    // -1, no topics): no error response, the connection is closed with a log line naming it,
    // and the other connections go on (`raw` below). (ListOffsets v1 is answered:
    // `apis_without_a_codec_answer_unsupported_version_in_their_layout`.)
    let mut unknown = Raw::connect(server.kafka);
    let mut frame = vec![0, 2, 0, 0];
    frame.extend_from_slice(&7i32.to_be_bytes());
    frame.extend_from_slice(&[0, 3, b'r', b'a', b'w', 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
    let mut framed = (frame.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&frame);
    unknown.stream.write_all(&framed).unwrap();
    assert!(unknown.is_closed());
    let logs = server.logs();
    assert!(
        logs.contains("closing Kafka connection: api key 2 v0 is not supported and has no error response"),
        "{logs}"
    );

    // SaslHandshake v2 does not exist in Kafka 4.4 (nor in the protocol crate): no layout to
    // answer in, so the connection is closed too.
    let mut handshake = Raw::connect(server.kafka);
    let mut frame = vec![0, 17, 0, 2];
    frame.extend_from_slice(&8i32.to_be_bytes());
    frame.extend_from_slice(&[0, 3, b'r', b'a', b'w', 0, 5, b'P', b'L', b'A', b'I', b'N']);
    let mut framed = (frame.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&frame);
    handshake.stream.write_all(&framed).unwrap();
    assert!(handshake.is_closed());

    // A size prefix over kafka.max-request-size closes the connection before the body.
    let mut big = Raw::connect(server.kafka);
    big.stream.write_all(&(8192i32).to_be_bytes()).unwrap();
    assert!(big.is_closed());
    assert!(server.scan("fluss.good").is_empty());

    // Metadata of a missing, an invalid and a disabled topic, as sent.
    let metadata = MetadataRequest::for_names(Some(&["good", "nosuch", "a..b", "fluss.disabled"]));
    let correlation = raw.send(9, &metadata);
    let response: MetadataResponse = raw.recv(9, correlation);
    let topics: Vec<(Option<String>, ErrorCode, usize)> = response
        .topics
        .iter()
        .map(|t| (t.name.clone(), t.error_code, t.partitions.len()))
        .collect();
    assert_eq!(
        topics,
        vec![
            (Some("good".into()), ErrorCode::None, 2),
            (Some("nosuch".into()), ErrorCode::UnknownTopicOrPartition, 0),
            (Some("a..b".into()), ErrorCode::InvalidTopicException, 0),
            (Some("fluss.disabled".into()), ErrorCode::InvalidTopicException, 0),
        ]
    );
}

/// Writes a request of `api_key` at `version` as raw bytes: header v1, or v2 when `flexible`
/// (client id "raw"), then `body`. Returns its correlation id.
fn send_raw(raw: &mut Raw, api_key: i16, version: i16, flexible: bool, body: &[u8]) -> i32 {
    raw.correlation += 1;
    let mut frame = api_key.to_be_bytes().to_vec();
    frame.extend_from_slice(&version.to_be_bytes());
    frame.extend_from_slice(&raw.correlation.to_be_bytes());
    frame.extend_from_slice(&[0, 3, b'r', b'a', b'w']);
    if flexible {
        frame.push(0); // no tagged fields
    }
    frame.extend_from_slice(body);
    let mut framed = (frame.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&frame);
    raw.stream.write_all(&framed).unwrap();
    raw.correlation
}

/// APIs the protocol crate has no codec for, at versions Kafka 4.4 defines, get their error
/// response with UNSUPPORTED_VERSION in their own layout (the code in the top-level error code
/// where the response has one, arrays empty), and the connection stays open; Fetch and
/// FindCoordinator still close it at any version.
#[test]
fn apis_without_a_codec_answer_unsupported_version_in_their_layout() {
    let server = Server::start(1, &[]);
    let mut raw = Raw::connect(server.kafka);

    // ListOffsets v1 (replica id -1, no topics): header v0, an empty topics array (v1 has no
    // top-level error code nor throttle time).
    let correlation = send_raw(&mut raw, 2, 1, false, &[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
    let frame = raw
        .read_frame()
        .expect("a ListOffsets v1 answer, not a closed connection");
    let mut expected = correlation.to_be_bytes().to_vec();
    expected.extend_from_slice(&[0, 0, 0, 0]);
    assert_eq!(&frame[..], &expected[..], "ListOffsets v1");

    // DescribeConfigs v4 (flexible; no resources, no synonyms, no documentation): header v1,
    // throttle time 0, an empty results array, no tagged fields.
    let correlation = send_raw(&mut raw, 32, 4, true, &[1, 0, 0, 0]);
    let frame = raw.read_frame().expect("a DescribeConfigs v4 answer");
    let mut expected = correlation.to_be_bytes().to_vec();
    expected.extend_from_slice(&[0, 0, 0, 0, 0, 1, 0]);
    assert_eq!(&frame[..], &expected[..], "DescribeConfigs v4");

    // DescribeCluster v0 (flexible): its top-level error code is UNSUPPORTED_VERSION (35),
    // its error message says so.
    let correlation = send_raw(&mut raw, 60, 0, true, &[0, 0]);
    let frame = raw.read_frame().expect("a DescribeCluster v0 answer");
    let mut expected = correlation.to_be_bytes().to_vec();
    #[rustfmt::skip]
    expected.extend_from_slice(&[
        0,                      // no tagged fields (header v1)
        0, 0, 0, 0,             // ThrottleTimeMs
        0, 35,                  // ErrorCode UNSUPPORTED_VERSION
        24,                     // ErrorMessage: 23 bytes (compact length + 1)
    ]);
    expected.extend_from_slice(b"unsupported API version");
    #[rustfmt::skip]
    expected.extend_from_slice(&[
        1,                      // ClusterId ""
        0xff, 0xff, 0xff, 0xff, // ControllerId -1
        1,                      // Brokers: empty
        0x80, 0, 0, 0,          // ClusterAuthorizedOperations: Kafka's default
        0,                      // no tagged fields
    ]);
    assert_eq!(&frame[..], &expected[..], "DescribeCluster v0");

    // The connection is still open: ApiVersions on it is answered.
    let correlation = raw.send(
        3,
        &ApiVersionsRequest {
            client_software_name: "raw".into(),
            client_software_version: "1.0".into(),
            unknown_tagged_fields: Vec::new(),
        },
    );
    let response: ApiVersionsResponse = raw.recv(3, correlation);
    assert_eq!(response.error_code, ErrorCode::None);

    // Fetch and FindCoordinator close the connection, at an advertised version (Fetch v4) or
    // not (Fetch v12, FindCoordinator v3), though Kafka 4.4 defines their layouts.
    for (api_key, version, flexible) in [(1, 4, false), (1, 12, true), (10, 3, true)] {
        let mut fetch = Raw::connect(server.kafka);
        send_raw(&mut fetch, api_key, version, flexible, &[0, 0, 0, 0]);
        assert!(fetch.is_closed(), "api key {api_key} v{version}");
    }
    // (Further lines of the same reason are held back by server.log-repeat-interval.)
    let line =
        "closing Kafka connection: API key 1 is advertised for librdkafka's feature detection but not served";
    assert!(
        server.log_shows(line, Duration::from_secs(10)),
        "{}",
        server.logs()
    );
}

/// A Metadata request asking for authorized operations, without the authorizer (every
/// principal may do all): each topic's and the cluster's bit field of every operation Kafka
/// 4.4 lists for it.
#[test]
fn metadata_answers_authorized_operations_without_the_authorizer() {
    let server = Server::start(1, &[]);
    setup(&server);
    let mut raw = Raw::connect(server.kafka);
    let ask = |names: &[&str], operations: bool| MetadataRequest {
        include_cluster_authorized_operations: operations,
        include_topic_authorized_operations: operations,
        ..MetadataRequest::for_names(Some(names))
    };
    // READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: 3576, as
    // Kafka 4.4 answers; an unknown table the principal may DESCRIBE too; an invalid name none.
    let correlation = raw.send(10, &ask(&["good", "fluss.nosuch", "a..b"], true));
    let response: MetadataResponse = raw.recv(10, correlation);
    let operations: Vec<_> = response
        .topics
        .iter()
        .map(|t| (t.error_code, t.topic_authorized_operations))
        .collect();
    assert_eq!(
        operations,
        vec![
            (ErrorCode::None, 3576),
            (ErrorCode::UnknownTopicOrPartition, 3576),
            (ErrorCode::InvalidTopicException, i32::MIN),
        ]
    );
    // CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE.
    assert_eq!(response.cluster_authorized_operations, 8096);
    // All topics, v12 (no cluster field there): the same bits per topic.
    let all = MetadataRequest {
        include_topic_authorized_operations: true,
        ..MetadataRequest::for_names(None)
    };
    let correlation = raw.send(12, &all);
    let response: MetadataResponse = raw.recv(12, correlation);
    assert_eq!(response.topics.len(), 2, "{response:?}");
    assert!(response
        .topics
        .iter()
        .all(|t| t.topic_authorized_operations == 3576));
    // Not asked: -2147483648.
    let correlation = raw.send(10, &ask(&["good"], false));
    let response: MetadataResponse = raw.recv(10, correlation);
    assert_eq!(response.topics[0].topic_authorized_operations, i32::MIN);
    assert_eq!(response.cluster_authorized_operations, i32::MIN);
}

#[test]
fn metadata_looks_up_a_nonzero_topic_id_by_id_whatever_its_name() {
    let server = Server::start(1, &[]);
    setup(&server);
    let mut raw = Raw::connect(server.kafka);
    let correlation = raw.send(12, &MetadataRequest::for_names(Some(&["good"])));
    let response: MetadataResponse = raw.recv(12, correlation);
    let good_id = response.topics[0].topic_id;
    assert_ne!(good_id, kafluss_protocol::Uuid::ZERO);

    // A non-zero topic id is the lookup, whatever name comes with it, as Kafka answers: no
    // topic is known by id, so UNKNOWN_TOPIC_ID with a null name, even for an existing
    // table's own id and name. A zero id with the name is looked up by name.
    let by_id = |topic_id, name: Option<&str>| MetadataRequestTopic {
        topic_id,
        name: name.map(str::to_owned),
    };
    let request = MetadataRequest {
        topics: Some(vec![
            by_id(good_id, Some("good")),
            by_id(kafluss_protocol::Uuid([5; 16]), Some("fluss.good")),
            by_id(kafluss_protocol::Uuid::ZERO, Some("good")),
        ]),
        ..MetadataRequest::for_names(None)
    };
    let correlation = raw.send(12, &request);
    let response: MetadataResponse = raw.recv(12, correlation);
    let topics: Vec<_> = response
        .topics
        .iter()
        .map(|t| (t.name.as_deref(), t.topic_id, t.error_code))
        .collect();
    assert_eq!(
        topics,
        vec![
            (None, good_id, ErrorCode::UnknownTopicId),
            (None, kafluss_protocol::Uuid([5; 16]), ErrorCode::UnknownTopicId),
            (Some("good"), good_id, ErrorCode::None),
        ]
    );
    // v10/v11 have no null topic name in the answer: a null-name lookup is UNKNOWN_TOPIC_ID
    // with an empty name (Kafka refuses such a request with INVALID_REQUEST).
    let request = MetadataRequest {
        topics: Some(vec![by_id(kafluss_protocol::Uuid::ZERO, None)]),
        ..MetadataRequest::for_names(None)
    };
    let correlation = raw.send(11, &request);
    let response: MetadataResponse = raw.recv(11, correlation);
    assert_eq!(response.topics[0].error_code, ErrorCode::UnknownTopicId);
    assert_eq!(response.topics[0].name.as_deref(), Some(""));
}

#[test]
fn acks_zero_is_silent_and_pipelined_responses_keep_request_order() {
    let server = Server::start(2, &[]);
    setup(&server);
    let mut raw = Raw::connect(server.kafka);
    // acks=0: appended, no response; the next response is the next request's.
    raw.send(
        8,
        &request(0, vec![("good", vec![(0, Some(batch(&[r#"{"id":0}"#])))])]),
    );
    let mut correlations = Vec::new();
    for i in 1..=20 {
        let value = format!(r#"{{"id":{i}}}"#);
        correlations.push(raw.send(
            9,
            &request(-1, vec![("good", vec![(i % 2, Some(batch(&[&value])))])]),
        ));
    }
    let mut next = [1i64, 0];
    for (i, correlation) in correlations.into_iter().enumerate() {
        let response: ProduceResponse = raw.recv(9, correlation);
        let partition = (i + 1) % 2;
        let got = outcomes(&response);
        assert_eq!(got[0].2, ErrorCode::None);
        assert_eq!(got[0].3, next[partition], "offsets are contiguous per bucket");
        next[partition] += 1;
    }
    let rows = server.scan("fluss.good");
    assert_eq!(rows.len(), 21);
    assert_eq!(rows[0]["row"]["id"], json!(0));
}

#[test]
fn a_failing_acks_zero_request_closes_the_connection() {
    let server = Server::start(2, &[]);
    setup(&server);
    // The bucket exists first (opening a new bucket log, with its directory syncs, is the slow
    // part on a loaded machine, and `is_closed` waits a bounded time).
    let mut raw = Raw::connect(server.kafka);
    let got = outcomes(&raw.produce(
        9,
        &request(1, vec![("strict", vec![(0, Some(batch(&[r#"{"id":6}"#])))])]),
    ));
    assert_eq!(got[0].2, ErrorCode::None, "{got:?}");
    // A record that does not convert, sent with acks=0: no answer can say so, so the
    // connection closes (as Kafka does) and the client notices.
    raw.send(
        9,
        &request(0, vec![("strict", vec![(0, Some(batch(&[r#"{"id":"x"}"#])))])]),
    );
    assert!(
        raw.is_closed(),
        "a failed acks=0 request closes its connection; server log:\n{}",
        server.logs()
    );
    // Refused on the connection's core (no such topic): the same.
    let mut raw = Raw::connect(server.kafka);
    raw.send(
        9,
        &request(0, vec![("nosuch", vec![(0, Some(batch(&[r#"{"id":1}"#])))])]),
    );
    assert!(
        raw.is_closed(),
        "an acks=0 request to an unknown topic closes its connection"
    );
    // A new connection is served, and nothing of the refused batch was stored.
    let mut raw = Raw::connect(server.kafka);
    let got = outcomes(&raw.produce(
        9,
        &request(1, vec![("strict", vec![(0, Some(batch(&[r#"{"id":7}"#])))])]),
    ));
    assert_eq!(got[0].2, ErrorCode::None, "{got:?}");
    let rows = server.scan("fluss.strict");
    let ids: Vec<_> = rows.iter().map(|row| row["row"]["id"].clone()).collect();
    assert_eq!(ids, vec![json!(6), json!(7)], "{rows:?}");
}

#[test]
fn log_append_time_batches_store_the_append_time() {
    let server = Server::start(1, &[]);
    server.sql_ok(
        "CREATE TABLE fluss.stamped (id INT, _kafka_metadata ROW<`timestamp` TIMESTAMP_LTZ(3), timestamp_type INT, `partition` INT>) WITH ('table.kafka.enabled' = 'true')",
    );
    let mut raw = Raw::connect(server.kafka);
    let mut builder = RecordBatchBuilder::new(Compression::Lz4)
        .timestamp_type(kafluss_protocol::TimestampType::LogAppendTime);
    builder.append(1_000, None, Some(br#"{"id":1}"#), &[]);
    let create_time = batch(&[r#"{"id":2}"#]);
    let got = outcomes(&raw.produce(
        9,
        &request(1, vec![("stamped", vec![(0, Some(builder.build().unwrap()))])]),
    ));
    assert_eq!(got[0].2, ErrorCode::None);
    let got = outcomes(&raw.produce(9, &request(1, vec![("stamped", vec![(0, Some(create_time))])])));
    assert_eq!(got[0].3, 1);
    let rows = server.scan("fluss.stamped");
    let metadata = &rows[0]["row"]["_kafka_metadata"];
    assert_eq!(metadata["timestamp_type"], json!(1));
    assert_eq!(metadata["partition"], json!(0));
    let stamp = metadata["timestamp"].as_str().expect("timestamp");
    assert!(
        !stamp.starts_with("1970"),
        "append time, not the batch's 1970 timestamp: {stamp}"
    );
    let metadata = &rows[1]["row"]["_kafka_metadata"];
    assert_eq!(metadata["timestamp_type"], json!(0));
    assert_eq!(metadata["timestamp"], json!("2023-11-14T22:13:20Z"));
}

/// The server's log lines about refused produce partitions of `table` (or topic).
fn refusal_lines(server: &Server, table: &str) -> Vec<String> {
    let key = format!("table={table} ");
    server
        .logs()
        .lines()
        .filter(|l| l.contains("produce refused") && l.contains(&key))
        .map(str::to_string)
        .collect()
}

/// The `suppressed=N` count of a refusal line.
fn suppressed(line: &str) -> u64 {
    line.split_whitespace()
        .find_map(|part| part.strip_prefix("suppressed="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no suppressed= in {line}"))
}

/// Whether a refusal line is the tail of a burst (what an interval after a line left out).
fn is_tail(line: &str) -> bool {
    line.contains(" more partitions of ")
}

/// The refusals a line stands for: itself and those it counts as suppressed, or for a tail,
/// those it counts.
fn accounts_for(line: &str) -> u64 {
    suppressed(line) + u64::from(!is_tail(line))
}

#[test]
fn a_burst_of_refusals_is_counted_one_interval_after_its_line_though_none_follows() {
    let interval = Duration::from_secs(2);
    let server = Server::start(1, &["server.log-repeat-interval=2s"]);
    setup(&server);
    let mut raw = Raw::connect(server.kafka);
    let bad = request(1, vec![("strict", vec![(0, Some(batch(&[r#"{"id":"x"}"#])))])]);
    let started = std::time::Instant::now();
    for _ in 0..20 {
        assert_eq!(outcomes(&raw.produce(9, &bad))[0].2, ErrorCode::InvalidRecord);
    }
    let burst = started.elapsed();
    // No later refusal: the tail is logged by itself, one interval after the first line.
    let deadline = std::time::Instant::now() + interval * 5;
    let lines = loop {
        let lines = refusal_lines(&server, "fluss.strict");
        if lines.iter().any(|l| is_tail(l)) || std::time::Instant::now() > deadline {
            break lines;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let accounted: u64 = lines.iter().map(|l| accounts_for(l)).sum();
    assert_eq!(
        accounted,
        20,
        "every refusal is a line or counted in one:\n{}",
        lines.join("\n")
    );
    if burst < interval {
        // The burst fitted in one interval: one line, then its tail with the other 19.
        assert_eq!(lines.len(), 2, "{}", lines.join("\n"));
        let tail = &lines[1];
        for part in [
            " WARN ",
            "suppressed=19",
            "code=INVALID_RECORD",
            "produce refused: 19 more partitions of fluss.strict with INVALID_RECORD in the 2s",
        ] {
            assert!(tail.contains(part), "{part:?} missing from {tail}");
        }
    }
}

/// A server that stops inside `server.log-repeat-interval` (1 h here) still counts a burst in
/// full: the tail is logged at shutdown, before `shutdown complete`. Before, the log had the
/// first line and then `shutting down` / `shutdown complete`: 19 refusals counted nowhere.
#[test]
fn a_burst_of_refusals_is_counted_at_shutdown_inside_its_interval() {
    let mut server = Server::start(1, &["server.log-repeat-interval=1h"]);
    setup(&server);
    let mut raw = Raw::connect(server.kafka);
    let bad = request(1, vec![("strict", vec![(0, Some(batch(&[r#"{"id":"x"}"#])))])]);
    for _ in 0..20 {
        assert_eq!(outcomes(&raw.produce(9, &bad))[0].2, ErrorCode::InvalidRecord);
    }
    drop(raw);
    let status = server.terminate();
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    let lines = refusal_lines(&server, "fluss.strict");
    let accounted: u64 = lines.iter().map(|l| accounts_for(l)).sum();
    assert_eq!(
        accounted,
        20,
        "every refusal is a line or counted in one:\n{}",
        server.logs()
    );
    assert_eq!(lines.len(), 2, "{}", lines.join("\n"));
    assert!(
        lines[1].contains("produce refused: 19 more partitions of fluss.strict with INVALID_RECORD"),
        "{}",
        lines[1]
    );
    let logs = server.logs();
    let (tail, complete) = (
        logs.find(" more partitions of fluss.strict").unwrap(),
        logs.find("shutdown complete").expect("shutdown complete"),
    );
    assert!(tail < complete, "the tail comes before the end:\n{logs}");
}

/// Refusals of topics that name no table are limited per code, not per name: the name is the
/// client's to choose, without end. One Produce naming 300 new unknown topics and 100 invalid
/// names, with `server.log-repeat-interval=1h`, logs one line per code (naming its topic) and at
/// shutdown one line per code counting the rest; a disabled table's refusal, with the same
/// code as the invalid names, keeps a line of its own (its key is the table). Before: one line
/// per name (401 lines).
#[test]
fn refusals_of_ever_new_topic_names_are_logged_once_per_code_with_their_count() {
    let mut server = Server::start(1, &["server.log-repeat-interval=1h"]);
    setup(&server);
    let mut topics: Vec<String> = (0..300).map(|i| format!("nosuch_{i}")).collect();
    topics.extend((0..100).map(|i| format!("bad name {i}")));
    topics.push("fluss.disabled".to_string());
    let record = batch(&[r#"{"id":1}"#]);
    let produce = request(
        1,
        topics
            .iter()
            .map(|topic| (topic.as_str(), vec![(0, Some(record.clone()))]))
            .collect(),
    );
    let mut raw = Raw::connect(server.kafka);
    let got = outcomes(&raw.produce(9, &produce));
    let count = |code: ErrorCode| got.iter().filter(|o| o.2 == code).count();
    assert_eq!(count(ErrorCode::UnknownTopicOrPartition), 300, "{got:?}");
    assert_eq!(count(ErrorCode::InvalidTopicException), 101, "{got:?}");
    drop(raw);
    let refusals = |log: &str| -> Vec<String> {
        log.lines()
            .filter(|l| l.contains("produce refused"))
            .map(str::to_string)
            .collect()
    };
    let lines = refusals(&server.logs());
    assert_eq!(
        lines.len(),
        3,
        "one line per code and one for the table:\n{}",
        lines.join("\n")
    );
    for (line, parts) in lines.iter().zip([
        ["table=nosuch_0 ", "code=UNKNOWN_TOPIC_OR_PARTITION"],
        ["table=bad name 0 ", "code=INVALID_TOPIC_EXCEPTION"],
        ["table=fluss.disabled ", "code=INVALID_TOPIC_EXCEPTION"],
    ]) {
        for part in parts {
            assert!(line.contains(part), "{part:?} missing from {line}");
        }
        assert_eq!(suppressed(line), 0, "{line}");
    }
    assert!(server.terminate().is_some_and(|status| status.success()));
    let lines = refusals(&server.logs());
    assert_eq!(
        lines.len(),
        5,
        "and at shutdown one count per code:\n{}",
        lines.join("\n")
    );
    for tail in [
        "produce refused: 299 more partitions of topics naming no table with UNKNOWN_TOPIC_OR_PARTITION in the 3600s",
        "produce refused: 99 more partitions of topics naming no table with INVALID_TOPIC_EXCEPTION in the 3600s",
    ] {
        assert!(lines.iter().any(|l| l.contains(tail)), "{tail:?} missing:\n{}", lines.join("\n"));
    }
    let accounted: u64 = lines.iter().map(|l| accounts_for(l)).sum();
    assert_eq!(
        accounted,
        401,
        "every refusal is a line or counted in one:\n{}",
        lines.join("\n")
    );
}

#[test]
fn a_refused_record_logs_one_warn_line_and_a_retry_flood_stays_under_the_rate_limit() {
    let server = Server::start(1, &["server.log-repeat-interval=1s"]);
    setup(&server);
    let mut raw = Raw::connect(server.kafka);
    let client = raw.stream.local_addr().unwrap();
    let bad = || {
        request(
            1,
            vec![(
                "strict",
                vec![(0, Some(batch(&[r#"{"id":1}"#, r#"{"id":"x"}"#])))],
            )],
        )
    };
    let got = outcomes(&raw.produce(9, &bad()));
    assert_eq!(got[0].2, ErrorCode::InvalidRecord);
    let lines = refusal_lines(&server, "fluss.strict");
    assert_eq!(lines.len(), 1, "one line for one refusal:\n{}", server.logs());
    let line = &lines[0];
    for part in [
        " WARN ",
        "code=INVALID_RECORD ",
        "partition=0 ",
        "record=1 ",
        "path=$.id ",
        "reason=expected INT",
        "principal=User:ANONYMOUS ",
        &format!("client={client} "),
        "suppressed=0",
    ] {
        assert!(line.contains(part), "{part:?} missing from {line}");
    }
    let mentions = server
        .logs()
        .lines()
        .filter(|l| l.contains("fluss.strict") && (l.contains(" WARN ") || l.contains(" ERROR ")))
        .count();
    assert_eq!(mentions, 1, "{}", server.logs());

    // A client retrying as fast as it can: at most one line per interval.
    let started = std::time::Instant::now();
    for _ in 0..200 {
        assert_eq!(outcomes(&raw.produce(9, &bad()))[0].2, ErrorCode::InvalidRecord);
    }
    let elapsed = started.elapsed();
    let lines = refusal_lines(&server, "fluss.strict");
    let (tails, lines): (Vec<_>, Vec<_>) = lines.into_iter().partition(|l| is_tail(l));
    let bound = 2 + elapsed.as_secs() as usize;
    assert!(
        lines.len() <= bound && tails.len() <= lines.len(),
        "{} lines and {} tails for 201 refusals in {elapsed:?} (bound {bound}):\n{}",
        lines.len(),
        tails.len(),
        lines.join("\n")
    );
    // Another reason of the same table has its own key: logged at once.
    let mut corrupt = batch(&[r#"{"id":1}"#]).to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let got = outcomes(&raw.produce(
        9,
        &request(1, vec![("strict", vec![(1, Some(Bytes::from(corrupt)))])]),
    ));
    assert_eq!(got[0].2, ErrorCode::CorruptMessage);
    assert!(refusal_lines(&server, "fluss.strict")
        .iter()
        .any(|l| l.contains("code=CORRUPT_MESSAGE ") && l.contains("partition=1 ")));

    // After the interval the next refusal is logged with the count of those that were not.
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(outcomes(&raw.produce(9, &bad()))[0].2, ErrorCode::InvalidRecord);
    let lines: Vec<String> = refusal_lines(&server, "fluss.strict")
        .into_iter()
        .filter(|l| l.contains("code=INVALID_RECORD "))
        .collect();
    let accounted: u64 = lines.iter().map(|l| accounts_for(l)).sum();
    assert_eq!(
        accounted,
        202,
        "every refusal is a line or counted in one:\n{}",
        lines.join("\n")
    );
    assert!(!server.logs().contains('\x1b'), "no ANSI codes in a log file");
    assert!(server.scan("fluss.strict").is_empty());
}

#[test]
fn a_disabled_table_tells_a_v9_producer_that_table_kafka_enabled_is_false() {
    let server = Server::start(1, &[]);
    setup(&server);
    let mut raw = Raw::connect(server.kafka);
    let produce = request(
        1,
        vec![("fluss.disabled", vec![(0, Some(batch(&[r#"{"id":1}"#])))])],
    );
    let got = outcomes(&raw.produce(9, &produce));
    assert_eq!(got[0].2, ErrorCode::InvalidTopicException);
    assert!(
        got[0]
            .4
            .contains("'table.kafka.enabled' is false for table 'fluss.disabled'"),
        "{}",
        got[0].4
    );
    let lines = refusal_lines(&server, "fluss.disabled");
    assert_eq!(lines.len(), 1, "{}", server.logs());
    assert!(lines[0].contains("code=INVALID_TOPIC_EXCEPTION "), "{}", lines[0]);
    assert!(
        lines[0].contains("'table.kafka.enabled' is false"),
        "{}",
        lines[0]
    );
    assert!(server.scan("fluss.disabled").is_empty());
}

/// The value of one sample (`name{labels}`) in a Prometheus text scrape; 0 when absent.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|rest| rest.strip_prefix(' ')))
        .map_or(0.0, |v| v.trim().parse().expect("sample value"))
}

fn scrape(server: &Server) -> String {
    let (status, body) = server.get("/metrics");
    assert_eq!(status, 200, "{body}");
    body
}

/// Requests the server closes the connection on without answering them count, by a fixed
/// reason, in `kafluss_connections_closed_unanswered_total`, and in no per-API series (before,
/// they appeared in no metric at all).
#[test]
fn connections_closed_without_an_answer_count_by_reason() {
    let server = Server::start(2, &[]);
    let name = "kafluss_connections_closed_unanswered_total";
    let before = scrape(&server);
    let per_api = |text: &str, series: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with(&format!("{series}{{api=")))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
            .sum()
    };
    // Fetch v4 (advertised) and FindCoordinator v3: not served.
    for (api_key, version, flexible) in [(1, 4, false), (10, 3, true)] {
        let mut raw = Raw::connect(server.kafka);
        send_raw(&mut raw, api_key, version, flexible, &[0, 0, 0, 0]);
        assert!(raw.is_closed(), "api key {api_key} v{version}");
    }
    // A size prefix over kafka.max-request-size (closed on it); a Metadata frame over
    // kafka.max-other-request-size (closed on its first six bytes); a frame too short for a
    // request header.
    let frames: [&[u8]; 3] = [
        &[0x7f, 0xff, 0xff, 0xff, 0, 0],
        &[0, 0x20, 0, 0, 0, 3],
        &[0, 0, 0, 3, 0, 3, 0],
    ];
    for frame in frames {
        let mut raw = Raw::connect(server.kafka);
        raw.stream.write_all(frame).unwrap();
        assert!(raw.is_closed(), "{frame:?}");
    }
    let after = scrape(&server);
    for (reason, count) in [
        ("not_served", 2.0),
        ("too_large", 1.0),
        ("other_too_large", 1.0),
        ("undecodable_header", 1.0),
        ("before_authentication", 0.0),
    ] {
        let series = format!("{name}{{reason=\"{reason}\"}}");
        assert_eq!(
            sample(&after, &series) - sample(&before, &series),
            count,
            "{series}:\n{after}"
        );
    }
    // A fixed set of reasons, each a series from the start.
    let reasons = |text: &str| {
        text.lines()
            .filter(|l| l.starts_with(&format!("{name}{{")))
            .count()
    };
    assert_eq!(reasons(&before), 10, "{before}");
    assert_eq!(reasons(&after), 10, "{after}");
    for series in ["kafluss_requests_total", "kafluss_request_bytes_total"] {
        assert_eq!(per_api(&before, series), per_api(&after, series), "{series}");
    }
}

#[test]
fn labelled_metrics_move_by_exactly_what_was_appended_and_refused() {
    let server = Server::start(2, &[]);
    setup(&server);
    let before = scrape(&server);
    let mut raw = Raw::connect(server.kafka);
    // k = 5 rows: acks=0 (no answer), acks=1 and acks=-1 (one group fsync), in two buckets.
    raw.send(
        8,
        &request(0, vec![("good", vec![(1, Some(batch(&[r#"{"id":3}"#])))])]),
    );
    let ok = |raw: &mut Raw, acks, partition, values: &[&str]| {
        let got = outcomes(&raw.produce(
            9,
            &request(acks, vec![("good", vec![(partition, Some(batch(values)))])]),
        ));
        assert_eq!(got[0].2, ErrorCode::None, "{got:?}");
    };
    ok(&mut raw, 1, 0, &[r#"{"id":1}"#, r#"{"id":2}"#]);
    // Same bucket as the acks=0 batch, queued behind it: answered once both are written.
    ok(&mut raw, -1, 1, &[r#"{"id":4}"#, r#"{"id":5}"#]);
    // m = 8 refused batches.
    let mut corrupt = batch(&[r#"{"id":1}"#]).to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let corrupt = Bytes::from(corrupt);
    let got = outcomes(&raw.produce(
        9,
        &request(
            1,
            vec![
                (
                    "strict",
                    vec![
                        (0, Some(batch(&[r#"{"id":"x"}"#]))),
                        (1, Some(batch(&[r#"{"id":1}"#, r#"{"id":[]}"#]))),
                    ],
                ),
                (
                    "good",
                    vec![(0, Some(corrupt.clone())), (1, Some(corrupt)), (7, None)],
                ),
                ("nosuch", vec![(0, Some(batch(&[r#"{"id":1}"#])))]),
                ("fluss.disabled", vec![(0, Some(batch(&[r#"{"id":1}"#])))]),
            ],
        ),
    ));
    assert!(got.iter().all(|o| o.2 != ErrorCode::None), "{got:?}");
    let got = outcomes(&raw.produce(
        9,
        &request(
            1,
            vec![("fluss.strict", vec![(0, Some(batch(&[r#"{"id":"y"}"#])))])],
        ),
    ));
    assert_eq!(got[0].2, ErrorCode::InvalidRecord);
    let after = scrape(&server);
    let delta = |series: &str| sample(&after, series) - sample(&before, series);

    assert_eq!(delta("kafluss_records_appended_total"), 5.0);
    assert_eq!(
        delta(r#"kafluss_table_rows_appended_total{table="fluss.good"}"#),
        5.0
    );
    assert_eq!(
        delta(r#"kafluss_table_rows_appended_total{table="fluss.strict"}"#),
        0.0
    );
    let bytes = delta(r#"kafluss_table_bytes_appended_total{table="fluss.good"}"#);
    let on_disk: u64 = walk_files(&server.data_dir.join("fluss"))
        .iter()
        .filter(|p| p.to_string_lossy().contains("/good-") && p.extension().is_some_and(|e| e == "arrow"))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    assert!(
        bytes > 0.0 && bytes < on_disk as f64,
        "{bytes} bytes appended, {on_disk} in the segment files (schema headers included)"
    );
    for (code, n) in [
        ("INVALID_RECORD", 3.0),
        ("CORRUPT_MESSAGE", 2.0),
        ("UNKNOWN_TOPIC_OR_PARTITION", 2.0),
        ("INVALID_TOPIC_EXCEPTION", 1.0),
        ("KAFKA_STORAGE_ERROR", 0.0),
    ] {
        assert_eq!(
            delta(&format!(
                r#"kafluss_produce_batches_refused_total{{code="{code}"}}"#
            )),
            n,
            "{code}"
        );
    }
    assert_eq!(delta("kafluss_produce_partition_errors_total"), 8.0);
    assert_eq!(
        delta(r#"kafluss_table_batches_refused_total{table="fluss.strict",code="INVALID_RECORD"}"#),
        3.0
    );
    assert_eq!(
        delta(r#"kafluss_table_batches_refused_total{table="fluss.good",code="CORRUPT_MESSAGE"}"#),
        2.0
    );
    assert_eq!(
        delta(r#"kafluss_table_batches_refused_total{table="fluss.good",code="UNKNOWN_TOPIC_OR_PARTITION"}"#),
        1.0,
        "partition 7 of a 2-bucket table"
    );
    // Batches routed to a bucket, on this core or across the mesh: the 3 appended and the 5
    // the owner refused (records that do not convert, a CRC that does not match); not the 3
    // refused before routing (no such partition, unknown topic, disabled table). The HELP text
    // says routed, not appended.
    assert_eq!(
        delta("kafluss_local_appends_total") + delta("kafluss_cross_core_appends_total"),
        8.0
    );
    for series in ["kafluss_local_appends_total", "kafluss_cross_core_appends_total"] {
        let help = after
            .lines()
            .find(|l| l.starts_with(&format!("# HELP {series} ")))
            .unwrap_or_else(|| panic!("no HELP for {series}"));
        assert!(help.contains(" routed ") && !help.contains("appended"), "{help}");
    }
    // One acks=-1 request, one group fsync; acks=0/1 do not fsync under log.flush.policy=ack.
    assert_eq!(delta("kafluss_fsync_seconds_count"), 1.0);
    assert_eq!(delta(r#"kafluss_fsync_seconds_bucket{le="+Inf"}"#), 1.0);
    assert!(delta("kafluss_fsync_seconds_sum") > 0.0);

    // A dropped table's series leave the scrape.
    server.sql_ok("DROP TABLE fluss.good");
    let dropped = scrape(&server);
    assert!(!dropped.contains(r#"table="fluss.good""#), "{dropped}");
    assert!(dropped.contains(r#"table="fluss.strict""#));
}

/// Every file below `dir`.
fn walk_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
}

#[test]
fn logs_written_to_a_pipe_carry_no_ansi_colour_codes() {
    let temp = tempfile::tempdir().unwrap();
    // `serve` runs until killed: run_with_timeout stops it and hands back what it wrote.
    let (_, stdout, stderr) = support::run_with_timeout(
        std::process::Command::new(support::binary())
            .arg("serve")
            .arg("-D")
            .arg(format!("data.dir={}", temp.path().join("data").display()))
            .arg("-D")
            .arg("bind.listeners=FLUSS://127.0.0.1:0,KAFKA://127.0.0.1:0")
            .arg("-D")
            .arg("server.cores=1")
            .env("RUST_LOG", "info")
            .env_remove("NO_COLOR"),
        b"",
        Duration::from_secs(8),
    );
    assert!(
        stdout.contains("kafluss ready:"),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stderr.contains(" INFO "), "{stderr}");
    assert!(
        !stderr.contains('\x1b'),
        "ANSI escape in piped stderr:\n{stderr:?}"
    );
}

#[test]
fn a_failing_bucket_logs_its_storage_error_once_per_interval() {
    let server = Server::start(1, &["server.log-repeat-interval=1h"]);
    server.sql_ok("CREATE TABLE fluss.broken (id INT) WITH ('table.kafka.enabled' = 'true')");
    let (status, info) = server.get("/v1/tables/fluss.broken");
    assert_eq!(status, 200, "{info}");
    let id = serde_json::from_str::<serde_json::Value>(&info).unwrap()["id"]
        .as_u64()
        .expect("table id");
    // A plain file where the bucket directory belongs: every open of the bucket fails.
    let table_dir = server.data_dir.join("fluss").join(format!("broken-{id}"));
    std::fs::create_dir_all(&table_dir).unwrap();
    std::fs::write(table_dir.join("bucket-0"), b"not a directory").unwrap();
    let mut raw = Raw::connect(server.kafka);
    for _ in 0..100 {
        let got = outcomes(&raw.produce(
            9,
            &request(1, vec![("broken", vec![(0, Some(batch(&[r#"{"id":1}"#])))])]),
        ));
        assert_eq!(got[0].2, ErrorCode::KafkaStorageError, "{got:?}");
    }
    let logs = server.logs();
    let errors: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains(" ERROR ") && l.contains("table=fluss.broken"))
        .collect();
    assert_eq!(
        errors.len(),
        1,
        "one storage error line for 100 failures:\n{logs}"
    );
    assert!(errors[0].contains("cannot open bucket 0"), "{}", errors[0]);
    let refusals = refusal_lines(&server, "fluss.broken");
    assert_eq!(refusals.len(), 1, "{logs}");
    assert!(
        refusals[0].contains("code=KAFKA_STORAGE_ERROR "),
        "{}",
        refusals[0]
    );
    let metrics = scrape(&server);
    assert_eq!(
        sample(
            &metrics,
            r#"kafluss_table_batches_refused_total{table="fluss.broken",code="KAFKA_STORAGE_ERROR"}"#
        ),
        100.0
    );
    assert_eq!(
        sample(
            &metrics,
            r#"kafluss_table_rows_appended_total{table="fluss.broken"}"#
        ),
        0.0
    );
}
