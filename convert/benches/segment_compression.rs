//! Bytes on disk per row and the CPU they cost, for each Arrow IPC buffer compression a table
//! can ask for (`table.log.arrow.compression.type`, docs/storage.md):
//! `cargo bench -p kafluss-convert --bench segment_compression [workload...]`.
//!
//! Each workload's batch of `workloads::batch()` records (1000) is converted once; then, for NONE,
//! LZ4_FRAME and ZSTD at levels 1, 3 (the default) and 9, it is encoded as one IPC record-batch
//! message the way the broker's segment writer does (an arrow-ipc `StreamWriter` per segment,
//! one `write` per batch) and read back with a `StreamReader` (what scans and pyarrow do).
//! Printed per row: the message's bytes, and the CPU time of encoding and of decoding, from the
//! thread's own CPU time (`cpu_time/mod.rs`); per codec it runs `RUN`, or `KAFLUSS_BENCH_BATCHES`
//! batches when set (for an instruction counter).

mod cpu_time;
mod workloads;

use std::hint::black_box;
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use arrow_ipc::reader::StreamReader;
use arrow_ipc::writer::{IpcWriteOptions, StreamWriter};
use arrow_ipc::CompressionType;
use cpu_time::thread_cpu_ns;
use kafluss_convert::{JsonScratch, KafkaRecord};
use workloads::Workload;

const RUN: Duration = Duration::from_secs(2);

/// `(name, compression, zstd level)`.
const CODECS: [(&str, Option<CompressionType>, Option<i32>); 5] = [
    ("NONE", None, None),
    ("LZ4_FRAME", Some(CompressionType::LZ4_FRAME), None),
    ("ZSTD(1)", Some(CompressionType::ZSTD), Some(1)),
    ("ZSTD(3)", Some(CompressionType::ZSTD), Some(3)),
    ("ZSTD(9)", Some(CompressionType::ZSTD), Some(9)),
];

/// A BYTES-table workload named `name` of `workloads::batch()` values of `len` bytes, each
/// byte made by `byte` from the next SplitMix64 output (the seed is the load generator's).
fn generated(name: &'static str, len: usize, byte: fn(u64) -> u8) -> Workload {
    let base = workloads::binary_1k();
    let mut state = 0x006b_6166_6c75_7373_u64;
    let mut next = || {
        // SplitMix64.
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        byte(z ^ (z >> 31))
    };
    let values = (0..workloads::batch())
        .map(|_| (0..len).map(|_| next()).collect())
        .collect();
    Workload {
        name,
        plan: base.plan,
        values,
    }
}

/// Random bytes (incompressible), as the load generator's `--value random` sends.
fn random_binary(len: usize) -> Workload {
    let name = if len == 100 {
        "random_binary_100b"
    } else {
        "random_binary_1kib"
    };
    generated(name, len, |z| z as u8)
}

/// Text of the load generator's `--value text` alphabet (26 letters, spaces and four vowels
/// again: about five bits a byte), as kcat sends into a BYTES table in the end-to-end runs.
fn text_binary(len: usize) -> Workload {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz  eaio";
    let name = if len == 100 {
        "text_binary_100b"
    } else {
        "text_binary_1kib"
    };
    generated(name, len, |z| ALPHABET[(z % 32) as usize])
}

/// Runs `work` (which handles `rows` rows per call) for `RUN` or `KAFLUSS_BENCH_BATCHES`
/// calls; returns nanoseconds per row and the clock used.
fn per_row(rows: usize, mut work: impl FnMut()) -> (f64, &'static str) {
    for _ in 0..5 {
        work();
    }
    let batches: Option<usize> = std::env::var("KAFLUSS_BENCH_BATCHES")
        .ok()
        .and_then(|v| v.parse().ok());
    let cpu_start = thread_cpu_ns();
    let wall_start = Instant::now();
    let mut done = 0usize;
    while batches.map_or(wall_start.elapsed() < RUN, |n| done < n) {
        work();
        done += 1;
    }
    let wall = wall_start.elapsed();
    let (nanos, clock) = match (cpu_start, thread_cpu_ns()) {
        (Some(a), Some(b)) if b > a => ((b - a) as f64, "CPU"),
        _ => (wall.as_nanos() as f64, "wall"),
    };
    (nanos / (done * rows).max(1) as f64, clock)
}

fn measure(workload: &Workload) {
    let records: Vec<KafkaRecord<'_>> = workload.records();
    let batch: RecordBatch = workload
        .plan
        .convert_batch_with(&mut JsonScratch::default(), records.iter().copied())
        .expect("bench input converts");
    let rows = batch.num_rows();
    let value_bytes: usize = workload.values.iter().map(Vec::len).sum();
    for (name, codec, level) in CODECS {
        let options = IpcWriteOptions::default()
            .try_with_compression(codec)
            .and_then(|o| o.try_with_compression_level(level))
            .expect("codec compiled in");
        let mut writer = StreamWriter::try_new_with_options(Vec::new(), &batch.schema(), options).unwrap();
        let header = std::mem::take(writer.get_mut());
        writer.write(&batch).unwrap();
        let message = std::mem::take(writer.get_mut());
        let (encode_ns, clock) = per_row(rows, || {
            writer.write(black_box(&batch)).unwrap();
            writer.get_mut().clear();
        });
        let stream = [header.as_slice(), message.as_slice()].concat();
        let (decode_ns, _) = per_row(rows, || {
            let reader = StreamReader::try_new(black_box(stream.as_slice()), None).unwrap();
            for read in reader {
                black_box(read.unwrap());
            }
        });
        let read_back = StreamReader::try_new(stream.as_slice(), None)
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        assert_eq!(read_back, batch, "{name} round trip");
        println!(
            "{:<22} {:>4} B/value {:<9} {:>7.1} B/row on disk ({:>5.1} % of the values)  encode {:>6.1} ns/row  decode {:>6.1} ns/row ({clock} time)",
            workload.name,
            workload.average_value_len(),
            name,
            message.len() as f64 / rows as f64,
            100.0 * message.len() as f64 / value_bytes as f64,
            encode_ns,
            decode_ns,
        );
    }
}

fn main() {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let mut all: Vec<(&str, workloads::Build)> = workloads::all();
    all.push(("random_binary_100b", || random_binary(100)));
    all.push(("random_binary_1kib", || random_binary(1024)));
    all.push(("text_binary_100b", || text_binary(100)));
    all.push(("text_binary_1kib", || text_binary(1024)));
    for (name, build) in all {
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        measure(&build());
    }
}
