//! Record iteration throughput measured in CPU time of this thread, so that the figure stays
//! meaningful on a machine shared with other work (wall-clock benchmarks there are not).
//!
//! `cargo run --release -p kafluss-protocol --example record_throughput [iterations]`
//! Prints GB of batch iterated per CPU-second for a 1 MiB batch of 100-byte records.

use std::time::Duration;

use bytes::Bytes;
use kafluss_protocol::{Compression, RecordBatch, RecordBatchBuilder};

const BATCH_BYTES: usize = 1024 * 1024;
const VALUE_BYTES: usize = 100;

fn thread_cpu_time() -> Duration {
    // /proc/thread-self/stat fields 14 and 15: user and system time in clock ticks.
    let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("procfs");
    let after_name = &stat[stat.rfind(')').expect("stat format") + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    // USER_HZ is 100 on Linux.
    Duration::from_millis(ticks * 10)
}

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

fn iterate(bytes: &Bytes) -> (usize, usize) {
    let batch = RecordBatch::parse(bytes.clone()).expect("valid batch");
    let mut records = batch.records(64 << 20).expect("valid records");
    let (mut count, mut total) = (0, 0);
    while let Some(record) = records.next_ref() {
        count += 1;
        total += record.expect("valid record").value.map_or(0, <[u8]>::len);
    }
    (count, total)
}

/// The owned path (`Record` with `Bytes` slices), as the broker collects records.
fn iterate_owned(bytes: &Bytes) -> usize {
    let batch = RecordBatch::parse(bytes.clone()).expect("valid batch");
    batch
        .records(64 << 20)
        .expect("valid records")
        .map(|record| record.expect("valid record").value.map_or(0, |v| v.len()))
        .sum()
}

fn main() {
    let iterations: usize = std::env::args()
        .nth(1)
        .and_then(|arg| arg.parse().ok())
        .unwrap_or(2000);
    for codec in Compression::ALL {
        let bytes = batch(codec);
        let plain_len = batch(Compression::None).len();
        let (records, _) = iterate(&bytes);
        let runs = if codec == Compression::None {
            iterations
        } else {
            iterations / 10
        };
        let start = thread_cpu_time();
        let mut checksum = 0;
        for _ in 0..runs {
            checksum += iterate(&bytes).1;
        }
        let cpu = (thread_cpu_time() - start).as_secs_f64();
        let gb = (plain_len * runs) as f64 / 1e9;
        println!(
            "{:<6} {records} records/batch, {runs} batches: {:.2} GB/s of uncompressed batch per CPU-second, {:.1} ns/record (checksum {checksum})",
            codec.name(),
            gb / cpu,
            cpu * 1e9 / (records * runs) as f64
        );
    }
    let plain = batch(Compression::None);
    let records = iterate(&plain).0;
    let start = thread_cpu_time();
    let mut checksum = 0;
    for _ in 0..iterations {
        checksum += iterate_owned(&plain);
    }
    let cpu = (thread_cpu_time() - start).as_secs_f64();
    println!(
        "none, owned Record (Bytes slices): {:.2} GB/s per CPU-second, {:.1} ns/record (checksum {checksum})",
        (plain.len() * iterations) as f64 / 1e9 / cpu,
        cpu * 1e9 / (records * iterations) as f64
    );
}
