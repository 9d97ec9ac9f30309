//! Request frames captured from real clients (librdkafka via confluent-kafka, kafka-python,
//! aiokafka, kafkajs) by `tests/capture/capture.py`: every codec decodes to the records the script sent.

use bytes::Bytes;
use kafluss_protocol::*;

const CLIENTS: [&str; 4] = ["librdkafka", "kafka-python", "aiokafka", "kafkajs"];
const LIMIT: usize = 1024 * 1024;

fn frame(name: &str) -> Bytes {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    Bytes::from(std::fs::read(&path).unwrap_or_else(|err| panic!("{path}: {err}")))
}

/// One record as capture.py sends it.
struct Expected {
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    timestamp: i64,
}

/// What capture.py produces for record `i`.
fn expected(i: usize) -> Expected {
    let note = "lorem ipsum dolor sit amet ".repeat(8);
    let key = (i != 3).then(|| format!("key-{i}").into_bytes());
    let value = (i != 4)
        .then(|| format!("{{\"order_id\":{i},\"amount\":\"12.30\",\"note\":\"{note}\"}}").into_bytes());
    let headers = if i.is_multiple_of(2) {
        vec![
            (b"trace".to_vec(), format!("t-{i}").into_bytes()),
            (b"kind".to_vec(), b"order".to_vec()),
        ]
    } else {
        Vec::new()
    };
    Expected {
        key,
        value,
        headers,
        timestamp: 1_700_000_000_000 + i as i64,
    }
}

#[test]
fn captured_produce_requests_decode_for_every_client_and_codec() {
    let mut xerial_seen = false;
    for client in CLIENTS {
        for codec in Compression::ALL {
            let context = format!("{client} {}", codec.name());
            let frame = frame(&format!("{client}-produce-{}.bin", codec.name()));
            let (header, request) = decode_request(&frame).unwrap_or_else(|err| panic!("{context}: {err}"));
            assert_eq!(header.api_key, ApiKey::PRODUCE, "{context}");
            let Request::Produce(request) = request else {
                panic!("{context}: not a produce request")
            };
            assert_eq!(request.transactional_id, None);
            assert_eq!(request.acks, 1, "{context}");
            assert_eq!(request.topics.len(), 1);
            assert_eq!(request.topics[0].name, "capture");
            let partition = &request.topics[0].partitions[0];
            assert_eq!(partition.index, 0);
            let mut index = 0;
            for batch in RecordBatches::new(partition.records.clone().unwrap()) {
                let batch = batch.unwrap_or_else(|err| panic!("{context}: {err}"));
                assert_eq!(batch.compression().unwrap(), codec, "{context}");
                assert!(!batch.has_producer_id(), "{context}: idempotence is off");
                if codec == Compression::Snappy && batch.records_data.starts_with(b"\x82SNAPPY\0") {
                    xerial_seen = true;
                }
                for record in batch.records(LIMIT).unwrap() {
                    let record = record.unwrap_or_else(|err| panic!("{context}: {err}"));
                    let Expected {
                        key,
                        value,
                        headers,
                        timestamp,
                    } = expected(index);
                    assert_eq!(record.key.as_deref(), key.as_deref(), "{context} #{index}");
                    assert_eq!(record.value.as_deref(), value.as_deref(), "{context} #{index}");
                    assert_eq!(
                        batch.base_timestamp + record.timestamp_delta,
                        timestamp,
                        "{context}"
                    );
                    let got: Vec<_> = record
                        .headers
                        .iter()
                        .map(|h| {
                            (
                                h.key.to_vec(),
                                h.value.as_ref().map(|v| v.to_vec()).unwrap_or_default(),
                            )
                        })
                        .collect();
                    assert_eq!(got, headers, "{context} #{index}");
                    index += 1;
                }
            }
            assert_eq!(index, 10, "{context}");
        }
    }
    assert!(xerial_seen, "no client sent xerial-framed snappy");
}

#[test]
fn captured_api_versions_and_metadata_requests_decode() {
    let names = [
        "librdkafka-api_versions-v3.bin",
        "librdkafka-metadata-v8.bin",
        "kafka-python-api_versions-v3.bin",
        "kafka-python-metadata-v8.bin",
        "aiokafka-api_versions-v0.bin",
        "aiokafka-metadata-v5.bin",
        "kafkajs-api_versions-v2.bin",
        "kafkajs-metadata-v6.bin",
    ];
    for name in names {
        let frame = frame(name);
        let (header, request) = decode_request(&frame).unwrap_or_else(|err| panic!("{name}: {err}"));
        match request {
            Request::ApiVersions(request) => {
                assert_eq!(header.api_key, ApiKey::API_VERSIONS);
                if header.api_version >= 3 {
                    assert!(request.has_valid_client_software(), "{name}: {request:?}");
                }
            }
            Request::Metadata(request) => {
                // aiokafka bootstraps with an empty list (no topics); the others name the topic.
                let topics = request
                    .topics
                    .unwrap_or_else(|| panic!("{name}: all-topics request"));
                assert!(topics.len() <= 1, "{name}");
                for topic in topics {
                    assert_eq!(topic.name.as_deref(), Some("capture"), "{name}");
                }
            }
            other => panic!("{name}: unexpected {other:?}"),
        }
    }
}
