//! Record batches: builder → parser for every codec, both directions against `kafka-protocol`,
//! legacy formats, and every malformation the broker must map to a Kafka error code.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records as kp;
use kafluss_protocol::primitives::{put_varint, put_varlong};
use kafluss_protocol::*;

const LIMIT: usize = 16 * 1024 * 1024;

fn kp_codec(codec: Compression) -> kp::Compression {
    match codec {
        Compression::None => kp::Compression::None,
        Compression::Gzip => kp::Compression::Gzip,
        Compression::Snappy => kp::Compression::Snappy,
        Compression::Lz4 => kp::Compression::Lz4,
        Compression::Zstd => kp::Compression::Zstd,
    }
}

fn sample_builder(codec: Compression, count: usize) -> RecordBatchBuilder {
    let mut builder = RecordBatchBuilder::new(codec);
    for index in 0..count {
        let key = format!("key-{index}");
        let value = format!("{{\"order_id\":{index},\"amount\":\"12.30\"}}");
        let headers: Vec<(&[u8], Option<&[u8]>)> = if index.is_multiple_of(2) {
            vec![(b"trace", Some(b"abc")), (b"empty", None)]
        } else {
            Vec::new()
        };
        let key = (!index.is_multiple_of(3)).then_some(key.as_bytes());
        builder.append(
            1_700_000_000_000 + 10 * index as i64,
            key,
            Some(value.as_bytes()),
            &headers,
        );
    }
    builder
}

#[test]
fn builder_output_parses_for_every_codec() {
    for codec in Compression::ALL {
        let bytes = sample_builder(codec, 50).build().unwrap();
        let batch = RecordBatch::parse(bytes).unwrap();
        assert_eq!(batch.compression().unwrap(), codec);
        assert_eq!(batch.record_count, 50);
        assert_eq!(batch.last_offset_delta, 49);
        assert_eq!(batch.base_timestamp, 1_700_000_000_000);
        assert_eq!(batch.max_timestamp, 1_700_000_000_490);
        assert_eq!(batch.producer_id, -1);
        assert!(!batch.has_producer_id());
        assert_eq!(batch.attributes.timestamp_type(), TimestampType::CreateTime);
        let records: Vec<Record> = batch.records(LIMIT).unwrap().collect::<Result<_, _>>().unwrap();
        assert_eq!(records.len(), 50);
        for (index, record) in records.iter().enumerate() {
            assert_eq!(record.offset_delta, index as i32);
            assert_eq!(record.timestamp_delta, 10 * index as i64);
            let expected_key = (!index.is_multiple_of(3)).then(|| format!("key-{index}"));
            assert_eq!(record.key.as_deref(), expected_key.as_deref().map(str::as_bytes));
            assert_eq!(
                record.value.as_deref(),
                Some(format!("{{\"order_id\":{index},\"amount\":\"12.30\"}}").as_bytes())
            );
            if index.is_multiple_of(2) {
                assert_eq!(
                    record.headers,
                    vec![
                        Header {
                            key: Bytes::from_static(b"trace"),
                            value: Some(Bytes::from_static(b"abc"))
                        },
                        Header {
                            key: Bytes::from_static(b"empty"),
                            value: None
                        },
                    ]
                );
            } else {
                assert!(record.headers.is_empty());
            }
        }
    }
}

#[test]
fn borrowed_iteration_matches_owned() {
    let batch = RecordBatch::parse(sample_builder(Compression::Lz4, 20).build().unwrap()).unwrap();
    let owned: Vec<Record> = batch.records(LIMIT).unwrap().map(Result::unwrap).collect();
    let mut records = batch.records(LIMIT).unwrap();
    let mut index = 0;
    while let Some(record) = records.next_ref() {
        let record = record.unwrap();
        assert_eq!(record.key, owned[index].key.as_deref());
        assert_eq!(record.value, owned[index].value.as_deref());
        let headers: Vec<_> = record
            .headers
            .map(|h| (h.key.to_vec(), h.value.map(<[u8]>::to_vec)))
            .collect();
        let expected: Vec<_> = owned[index]
            .headers
            .iter()
            .map(|h| (h.key.to_vec(), h.value.as_ref().map(|v| v.to_vec())))
            .collect();
        assert_eq!(headers, expected);
        index += 1;
    }
    assert_eq!(index, 20);
}

#[test]
fn uncompressed_records_point_into_the_input() {
    let bytes = sample_builder(Compression::None, 3).build().unwrap();
    let range = bytes.as_ptr() as usize..bytes.as_ptr() as usize + bytes.len();
    let batch = RecordBatch::parse(bytes.clone()).unwrap();
    for record in batch.records(LIMIT).unwrap() {
        let value = record.unwrap().value.unwrap();
        assert!(range.contains(&(value.as_ptr() as usize)), "value was copied");
    }
}

#[test]
fn kafka_protocol_batches_decode_for_every_codec() {
    for codec in Compression::ALL {
        let records: Vec<kp::Record> = (0..10)
            .map(|index| {
                let mut headers = IndexMap::new();
                headers.insert(
                    StrBytes::from_static_str("h"),
                    Some(Bytes::from(format!("v{index}"))),
                );
                kp::Record {
                    transactional: false,
                    control: false,
                    delete_horizon: false,
                    partition_leader_epoch: -1,
                    producer_id: -1,
                    producer_epoch: -1,
                    timestamp_type: kp::TimestampType::Creation,
                    offset: index,
                    sequence: -1,
                    timestamp: 1_000 + index,
                    key: Some(Bytes::from(format!("k{index}"))),
                    value: (index != 4).then(|| Bytes::from(format!("value {index}"))),
                    headers,
                }
            })
            .collect();
        let mut buf = BytesMut::new();
        let options = kp::RecordEncodeOptions {
            version: 2,
            compression: kp_codec(codec),
        };
        kp::RecordBatchEncoder::encode(&mut buf, &records, &options).unwrap();
        // kafka-protocol may split the records over several batches; read them all.
        let mut decoded = Vec::new();
        let mut firsts = Vec::new();
        for batch in RecordBatches::new(buf.freeze()) {
            let batch = batch.unwrap();
            assert_eq!(batch.compression().unwrap(), codec);
            for record in batch.records(LIMIT).unwrap() {
                decoded.push(record.unwrap());
                firsts.push((batch.base_timestamp, batch.base_offset));
            }
        }
        assert_eq!(decoded.len(), records.len(), "{codec:?}");
        for ((ours, theirs), (base_timestamp, base_offset)) in decoded.iter().zip(&records).zip(firsts) {
            assert_eq!(base_timestamp + ours.timestamp_delta, theirs.timestamp);
            assert_eq!(base_offset + i64::from(ours.offset_delta), theirs.offset);
            assert_eq!(ours.key, theirs.key);
            assert_eq!(ours.value, theirs.value);
            let (name, value) = theirs.headers.first().unwrap();
            assert_eq!(&ours.headers[0].key[..], name.as_bytes());
            assert_eq!(&ours.headers[0].value, value);
        }
    }
}

#[test]
fn our_batches_decode_with_kafka_protocol() {
    for codec in Compression::ALL {
        let bytes = sample_builder(codec, 25).build().unwrap();
        let mut wire = bytes.clone();
        let set = kp::RecordBatchDecoder::decode(&mut wire).unwrap();
        assert_eq!(set.records.len(), 25, "{codec:?}");
        let ours: Vec<Record> = RecordBatch::parse(bytes)
            .unwrap()
            .records(LIMIT)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        for (theirs, ours) in set.records.iter().zip(&ours) {
            assert_eq!(theirs.key, ours.key);
            assert_eq!(theirs.value, ours.value);
            assert_eq!(theirs.offset, i64::from(ours.offset_delta));
            assert_eq!(theirs.timestamp, 1_700_000_000_000 + ours.timestamp_delta);
            assert_eq!(theirs.headers.len(), ours.headers.len());
        }
    }
}

/// A legacy (magic 0 or 1) message set entry as pre-0.11 clients send it.
fn legacy_message(magic: i8, value: &[u8]) -> Bytes {
    let mut message = BytesMut::new();
    message.put_i8(magic);
    message.put_i8(0); // attributes
    if magic == 1 {
        message.put_i64(1_000); // timestamp
    }
    message.put_i32(-1); // null key
    message.put_i32(value.len() as i32);
    message.put_slice(value);
    let crc = crc32fast_ieee(&message);
    let mut out = BytesMut::new();
    out.put_i64(0);
    out.put_i32((4 + message.len()) as i32);
    out.put_u32(crc);
    out.put_slice(&message);
    out.freeze()
}

/// CRC-32 (IEEE), bitwise: legacy messages use it instead of CRC32C.
fn crc32fast_ieee(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for byte in data {
        crc ^= u32::from(*byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn legacy_message_sets_are_typed_errors() {
    for magic in [0i8, 1] {
        let err = RecordBatches::new(legacy_message(magic, b"old"))
            .next()
            .unwrap()
            .unwrap_err();
        assert_eq!(err, RecordBatchError::LegacyMagic(magic));
        assert_eq!(err.error_code(), ErrorCode::UnsupportedForMessageFormat);
    }
}

#[test]
fn several_batches_in_one_records_field() {
    let mut field = BytesMut::new();
    for codec in [Compression::None, Compression::Gzip, Compression::Zstd] {
        field.extend_from_slice(&sample_builder(codec, 4).build().unwrap());
    }
    let batches: Vec<RecordBatch> = RecordBatches::new(field.clone().freeze())
        .map(Result::unwrap)
        .collect();
    assert_eq!(batches.len(), 3);
    assert_eq!(batches[1].compression().unwrap(), Compression::Gzip);
    // A torn last batch is an error after the good ones.
    field.truncate(field.len() - 3);
    let results: Vec<_> = RecordBatches::new(field.freeze()).collect();
    assert_eq!(results.len(), 3);
    assert!(matches!(results[2], Err(RecordBatchError::Truncated { .. })));
    assert_eq!(
        results[2].as_ref().unwrap_err().error_code(),
        ErrorCode::CorruptMessage
    );
}

#[test]
fn empty_records_are_invalid_record() {
    let err = RecordBatches::new(Bytes::new()).next().unwrap().unwrap_err();
    assert_eq!(err, RecordBatchError::Empty);
    assert_eq!(err.error_code(), ErrorCode::InvalidRecord);
}

#[test]
fn crc_mismatch_is_corrupt_message() {
    let mut bytes = BytesMut::from(&sample_builder(Compression::None, 3).build().unwrap()[..]);
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    let err = RecordBatch::parse(bytes.freeze()).unwrap_err();
    assert!(matches!(err, RecordBatchError::CrcMismatch { .. }), "{err:?}");
    assert_eq!(err.error_code(), ErrorCode::CorruptMessage);
}

#[test]
fn every_truncation_fails_cleanly() {
    let bytes = sample_builder(Compression::Snappy, 5).build().unwrap();
    for cut in 0..bytes.len() {
        assert!(RecordBatch::parse(bytes.slice(..cut)).is_err(), "cut at {cut}");
    }
}

#[test]
fn flags_and_producer_fields_are_exposed() {
    let mut builder = RecordBatchBuilder::new(Compression::None)
        .producer(7, 1, 100)
        .flags(true, true)
        .timestamp_type(TimestampType::LogAppendTime);
    builder.append(5, None, Some(b"x"), &[]);
    let batch = RecordBatch::parse(builder.build().unwrap()).unwrap();
    assert!(batch.has_producer_id());
    assert_eq!(
        (batch.producer_id, batch.producer_epoch, batch.base_sequence),
        (7, 1, 100)
    );
    assert!(batch.attributes.is_transactional());
    assert!(batch.attributes.is_control());
    assert_eq!(batch.attributes.timestamp_type(), TimestampType::LogAppendTime);
}

#[test]
fn decompressed_size_over_the_limit_is_message_too_large() {
    let mut builder = RecordBatchBuilder::new(Compression::Zstd);
    let value = vec![b'a'; 1 << 20];
    builder.append(0, None, Some(&value), &[]);
    let batch = RecordBatch::parse(builder.build().unwrap()).unwrap();
    assert!(batch.raw.len() < 4096);
    let err = batch.records(64 * 1024).unwrap_err();
    assert_eq!(err.error_code(), ErrorCode::MessageTooLarge);
    assert!(batch.records(2 << 20).is_ok());
}

/// Writes a batch around a hand-made records section, with a correct CRC.
fn raw_batch(records: &[u8], record_count: i32, last_offset_delta: i32, attributes: i16) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i64(0);
    out.put_i32((49 + records.len()) as i32);
    out.put_i32(-1);
    out.put_i8(2);
    out.put_u32(0);
    out.put_i16(attributes);
    out.put_i32(last_offset_delta);
    out.put_i64(1000);
    out.put_i64(1000);
    out.put_i64(-1);
    out.put_i16(-1);
    out.put_i32(-1);
    out.put_i32(record_count);
    out.put_slice(records);
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

/// One record: attributes 0, given deltas, key, value, no headers.
fn raw_record(offset_delta: i32, value: &[u8]) -> Vec<u8> {
    let mut body = BytesMut::new();
    body.put_i8(0);
    put_varlong(&mut body, 0);
    put_varint(&mut body, offset_delta);
    put_varint(&mut body, -1);
    put_varint(&mut body, value.len() as i32);
    body.put_slice(value);
    put_varint(&mut body, 0);
    let mut out = BytesMut::new();
    put_varint(&mut out, body.len() as i32);
    out.put_slice(&body);
    out.to_vec()
}

fn first_error(bytes: Bytes) -> RecordBatchError {
    let batch = RecordBatch::parse(bytes).unwrap();
    match batch.records(LIMIT) {
        Err(err) => err,
        Ok(records) => records
            .filter_map(Result::err)
            .next()
            .expect("expected a record error"),
    }
}

#[test]
fn malformed_records_are_invalid_record() {
    let good = [raw_record(0, b"a"), raw_record(1, b"b")].concat();
    let batch = RecordBatch::parse(raw_batch(&good, 2, 1, 0)).unwrap();
    assert_eq!(batch.records(LIMIT).unwrap().filter(Result::is_ok).count(), 2);

    let cases: Vec<(Bytes, RecordBatchError)> = vec![
        (
            raw_batch(&good, 3, 2, 0),
            RecordBatchError::RecordCountMismatch {
                declared: 3,
                found: 2,
            },
        ),
        (
            raw_batch(&good, 1, 0, 0),
            RecordBatchError::TrailingBytes(good.len() / 2),
        ),
        (
            raw_batch(&good, 2, 5, 0),
            RecordBatchError::InvalidRecordCount {
                record_count: 2,
                last_offset_delta: 5,
            },
        ),
        (
            raw_batch(&[], 0, -1, 0),
            RecordBatchError::InvalidRecordCount {
                record_count: 0,
                last_offset_delta: -1,
            },
        ),
        (
            raw_batch(&[raw_record(0, b"a"), raw_record(0, b"b")].concat(), 2, 1, 0),
            RecordBatchError::BadOffsetDelta {
                index: 1,
                offset_delta: 0,
            },
        ),
        (
            raw_batch(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff], 1, 0, 0),
            RecordBatchError::MalformedVarint { index: 0 },
        ),
        (
            raw_batch(&good[..good.len() - 1], 2, 1, 0),
            RecordBatchError::TruncatedRecord { index: 1 },
        ),
        (
            raw_batch(&[0x01], 1, 0, 0),
            RecordBatchError::InvalidRecordLength {
                index: 0,
                field: "record",
            },
        ),
        (raw_batch(&good, 2, 1, 6), RecordBatchError::UnknownCompression(6)),
    ];
    for (bytes, expected) in cases {
        let err = first_error(bytes);
        assert_eq!(err, expected);
        assert_eq!(err.error_code(), ErrorCode::InvalidRecord, "{err}");
    }

    // A record whose body is longer than its fields.
    let mut padded = raw_record(0, b"a");
    padded[0] += 2; // zigzag: +1 byte of declared length
    padded.push(0);
    assert_eq!(
        first_error(raw_batch(&padded, 1, 0, 0)),
        RecordBatchError::InvalidRecordLength {
            index: 0,
            field: "record"
        }
    );
    // A negative key length other than -1.
    let mut body = BytesMut::new();
    body.put_i8(0);
    put_varlong(&mut body, 0);
    put_varint(&mut body, 0);
    put_varint(&mut body, -2);
    let mut record = BytesMut::new();
    put_varint(&mut record, body.len() as i32);
    record.put_slice(&body);
    assert_eq!(
        first_error(raw_batch(&record, 1, 0, 0)),
        RecordBatchError::InvalidRecordLength {
            index: 0,
            field: "key"
        }
    );
}

#[test]
fn magic_and_batch_length_checks() {
    let mut bytes = BytesMut::from(&sample_builder(Compression::None, 1).build().unwrap()[..]);
    bytes[16] = 3;
    let err = RecordBatch::parse(bytes.clone().freeze()).unwrap_err();
    assert_eq!(err, RecordBatchError::UnknownMagic(3));
    bytes[16] = 2;
    bytes[8..12].copy_from_slice(&10i32.to_be_bytes());
    assert_eq!(
        RecordBatch::parse(bytes.clone().freeze()).unwrap_err(),
        RecordBatchError::InvalidBatchLength(10)
    );
    bytes[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
    assert!(matches!(
        RecordBatch::parse(bytes.freeze()).unwrap_err(),
        RecordBatchError::Truncated { .. }
    ));
}
