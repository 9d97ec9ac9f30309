//! Every client-provokable error of behaviour.md, sent as raw Kafka requests (no client sends
//! most of these on purpose), with the exact code per partition and nothing appended.

#[path = "broker_support.rs"]
mod support;

use std::io::Write;

use bytes::Bytes;
use kafluss_protocol::{
    decode_response_frame, ApiKey, ApiVersionsRequest, ApiVersionsResponse, Compression, CreatableTopic,
    CreateTopicsRequest, CreateTopicsResponse, ErrorCode, MetadataRequest, MetadataResponse,
    ProducePartitionData, ProduceRequest, ProduceResponse, ProduceTopicData, RecordBatchBuilder,
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
    let idempotent = {
        let mut builder = RecordBatchBuilder::new(Compression::None).producer(7, 0, 0);
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
                        (0, Some(batch(&[r#"{"id":1}"#, r#"{"id":"x"}"#, r#"{"id":3}"#]))),
                        (1, Some(idempotent)),
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
    assert_eq!(strict.5, vec![1], "record_errors names the failing record");
    assert!(
        strict.4.contains("record 1") && strict.4.contains("id"),
        "{}",
        strict.4
    );
    assert!(got[9].4.contains("enable.idempotence=false"), "{}", got[9].4);
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
    let big = format!(r#"{{"id":1,"pad":"{}"}}"#, "x".repeat(100));
    let got = outcomes(&raw.produce(
        7,
        &request(
            1,
            vec![(
                "good",
                vec![(0, Some(Bytes::from(legacy))), (1, Some(batch(&[&big])))],
            )],
        ),
    ));
    assert_eq!(got[0].2, ErrorCode::UnsupportedForMessageFormat);
    assert_eq!(got[1].2, ErrorCode::MessageTooLarge);

    // Produce v2 is not advertised: its own error response, UNSUPPORTED_VERSION.
    let got = outcomes(&raw.produce(
        2,
        &request(1, vec![("good", vec![(0, Some(batch(&[r#"{"id":1}"#])))])]),
    ));
    assert_eq!(got[0].2, ErrorCode::UnsupportedVersion);

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
        .any(|r| r.api_key == ApiKey::PRODUCE && r.max_version == 11));
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
            (0, 3, 11),
            (1, 4, 10),
            (3, 0, 12),
            (10, 0, 0),
            (17, 0, 1),
            (18, 0, 4),
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
