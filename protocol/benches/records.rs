//! Record iteration throughput: a 1 MiB uncompressed batch of 100-byte records, parsed and
//! iterated zero-copy; reported as bytes of batch per second.

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use kafluss_protocol::{
    decode_request, Compression, RecordBatch, RecordBatchBuilder, RecordBatches, Request,
};

const BATCH_BYTES: usize = 1024 * 1024;
const VALUE_BYTES: usize = 100;

/// A batch of 100-byte values (no key, no headers) filling about 1 MiB.
fn batch(compression: Compression) -> Bytes {
    let mut builder = RecordBatchBuilder::new(compression);
    let mut value = [b'x'; VALUE_BYTES];
    let mut index = 0u64;
    while builder.records_size() + VALUE_BYTES + 8 <= BATCH_BYTES {
        value[..8].copy_from_slice(&index.to_le_bytes());
        builder.append(1_700_000_000_000 + index as i64, None, Some(&value), &[]);
        index += 1;
    }
    builder.build().expect("encodable batch")
}

fn iterate_borrowed(bytes: &Bytes) -> usize {
    let batch = RecordBatch::parse(bytes.clone()).expect("valid batch");
    let mut records = batch.records(usize::MAX).expect("valid records");
    let mut total = 0;
    while let Some(record) = records.next_ref() {
        total += record.expect("valid record").value.map_or(0, <[u8]>::len);
    }
    total
}

fn iterate_owned(bytes: &Bytes) -> usize {
    let mut total = 0;
    for batch in RecordBatches::new(bytes.clone()) {
        for record in batch
            .expect("valid batch")
            .records(usize::MAX)
            .expect("valid records")
        {
            total += record.expect("valid record").value.map_or(0, |v| v.len());
        }
    }
    total
}

fn bench_records(c: &mut Criterion) {
    let plain = batch(Compression::None);
    let mut group = c.benchmark_group("record_batch_1MiB_100B");
    group.throughput(Throughput::Bytes(plain.len() as u64));
    group.bench_function("iterate_borrowed", |b| b.iter(|| iterate_borrowed(&plain)));
    group.bench_function("iterate_owned_bytes", |b| b.iter(|| iterate_owned(&plain)));
    for codec in [
        Compression::Lz4,
        Compression::Zstd,
        Compression::Snappy,
        Compression::Gzip,
    ] {
        let packed = batch(codec);
        // Throughput counted in uncompressed batch bytes, so codecs compare on equal work.
        group.bench_function(format!("decompress_iterate_{}", codec.name()), |b| {
            b.iter(|| iterate_borrowed(&packed))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("produce_request_1MiB");
    let request = produce_frame(&plain);
    group.throughput(Throughput::Bytes(request.len() as u64));
    group.bench_function("decode_request_and_iterate", |b| {
        b.iter_batched(
            || request.clone(),
            |frame| {
                let (_, request) = decode_request(&frame).expect("valid request");
                let Request::Produce(produce) = request else {
                    unreachable!("built as produce")
                };
                let records = produce.topics[0].partitions[0].records.clone().expect("records");
                iterate_borrowed(&records)
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

/// A Produce v9 request frame body carrying `records` for one partition.
fn produce_frame(records: &Bytes) -> Bytes {
    use kafluss_protocol::{
        encode_request_frame, ApiKey, ProducePartitionData, ProduceRequest, ProduceTopicData, RequestHeader,
        Uuid,
    };
    let request = ProduceRequest {
        transactional_id: None,
        acks: 1,
        timeout_ms: 30_000,
        topics: vec![ProduceTopicData {
            name: "bench".into(),
            topic_id: Uuid::ZERO,
            partitions: vec![ProducePartitionData {
                index: 0,
                records: Some(records.clone()),
            }],
        }],
        unknown_tagged_fields: Vec::new(),
    };
    let mut buf = bytes::BytesMut::new();
    let header = RequestHeader::new(ApiKey::PRODUCE, 9, 1, Some("bench"));
    encode_request_frame(&mut buf, &header, &request).expect("encodable");
    buf.freeze().slice(4..)
}

criterion_group!(benches, bench_records);
criterion_main!(benches);
