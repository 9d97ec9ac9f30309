//! Property tests over whole messages and record batches: arbitrary records survive the
//! builder → parser trip for every codec, and arbitrary bytes never panic a decoder.

use bytes::{Bytes, BytesMut};
use kafluss_protocol::*;
use proptest::prelude::*;

type ArbitraryRecord = (
    i64,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(Vec<u8>, Option<Vec<u8>>)>,
);

fn arbitrary_record() -> impl Strategy<Value = ArbitraryRecord> {
    let bytes = || proptest::collection::vec(any::<u8>(), 0..64);
    (
        -1i64..4_000_000_000_000,
        proptest::option::of(bytes()),
        proptest::option::of(bytes()),
        proptest::collection::vec((bytes(), proptest::option::of(bytes())), 0..4),
    )
}

fn codec() -> impl Strategy<Value = Compression> {
    proptest::sample::select(Compression::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn record_batches_round_trip(records in proptest::collection::vec(arbitrary_record(), 1..40), codec in codec()) {
        let mut builder = RecordBatchBuilder::new(codec);
        for (timestamp, key, value, headers) in &records {
            let headers: Vec<(&[u8], Option<&[u8]>)> =
                headers.iter().map(|(k, v)| (k.as_slice(), v.as_deref())).collect();
            builder.append(*timestamp, key.as_deref(), value.as_deref(), &headers);
        }
        let batch = RecordBatch::parse(builder.build().unwrap()).unwrap();
        prop_assert_eq!(batch.record_count as usize, records.len());
        let decoded: Vec<Record> = batch.records(1 << 20).unwrap().collect::<Result<_, _>>().unwrap();
        for (record, (timestamp, key, value, headers)) in decoded.iter().zip(&records) {
            prop_assert_eq!(batch.base_timestamp.wrapping_add(record.timestamp_delta), *timestamp);
            prop_assert_eq!(record.key.as_deref(), key.as_deref());
            prop_assert_eq!(record.value.as_deref(), value.as_deref());
            let got: Vec<(Vec<u8>, Option<Vec<u8>>)> =
                record.headers.iter().map(|h| (h.key.to_vec(), h.value.as_ref().map(|v| v.to_vec()))).collect();
            prop_assert_eq!(&got, headers);
        }
    }

    #[test]
    fn corrupted_batches_never_panic(
        records in proptest::collection::vec(arbitrary_record(), 1..10),
        codec in codec(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut builder = RecordBatchBuilder::new(codec);
        for (timestamp, key, value, _) in &records {
            builder.append(*timestamp, key.as_deref(), value.as_deref(), &[]);
        }
        let mut bytes = BytesMut::from(&builder.build().unwrap()[..]);
        for (index, byte) in flips {
            let at = index.index(bytes.len());
            bytes[at] ^= byte;
        }
        // Reseal the CRC so that corruption reaches the record parser too.
        let crc = crc32c::crc32c(&bytes[21..]);
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
        for batch in RecordBatches::new(bytes.freeze()) {
            let Ok(batch) = batch else { break };
            if let Ok(records) = batch.records(1 << 16) {
                for record in records {
                    if record.is_err() {
                        break;
                    }
                }
            }
        }
    }

    #[test]
    fn request_decoding_never_panics(key in 0i16..40, version in -1i16..14, body in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut frame = BytesMut::new();
        frame.extend_from_slice(&key.to_be_bytes());
        frame.extend_from_slice(&version.to_be_bytes());
        frame.extend_from_slice(&7i32.to_be_bytes());
        frame.extend_from_slice(&body);
        let _ = decode_request(&frame.freeze());
    }

    #[test]
    fn produce_requests_round_trip(
        acks in -1i16..=1,
        topics in proptest::collection::vec(("[a-z.]{1,20}", proptest::collection::vec((0i32..100, proptest::option::of(proptest::collection::vec(any::<u8>(), 0..50))), 0..4)), 0..4),
        version in 3i16..=11,
    ) {
        let request = ProduceRequest {
            transactional_id: None,
            acks,
            timeout_ms: 1000,
            topics: topics
                .into_iter()
                .map(|(name, partitions)| ProduceTopicData {
                    name,
                    topic_id: Uuid::ZERO,
                    partitions: partitions
                        .into_iter()
                        .map(|(index, records)| ProducePartitionData { index, records: records.map(Bytes::from) })
                        .collect(),
                })
                .collect(),
            unknown_tagged_fields: Vec::new(),
        };
        let mut buf = BytesMut::new();
        request.encode(&mut buf, version).unwrap();
        prop_assert_eq!(ProduceRequest::decode(&buf.freeze(), version).unwrap(), request);
    }
}
