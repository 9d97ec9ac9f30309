//! CPU time of encoding one stored record-batch message (`log/encode.rs`) against what the log
//! did before it (arrow-ipc's `IpcDataGenerator::encode`, then `checksum::seal_into`), for the
//! conversion benches' workloads (convert/benches/workloads) at 1 and 500 rows per message, and
//! for 500 random 1 KiB values (which no codec shrinks), with no codec and with the default
//! ZSTD level 3:
//! `cargo bench -p kafluss-broker --bench encode [workload...]`.
//!
//! Both run in the same process, alternating in slices, each on its thread's own CPU time
//! (`/proc/thread-self/schedstat`), so the machine's load falls on both alike.

#[path = "../../convert/benches/cpu_time/mod.rs"]
mod cpu_time;
#[path = "../../convert/benches/workloads/mod.rs"]
#[allow(dead_code)]
mod workloads;

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::builder::BinaryBuilder;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_ipc::reader::StreamReader;
use arrow_ipc::writer::{DictionaryTracker, IpcDataGenerator, IpcWriteContext, StreamWriter};
use arrow_schema::{DataType, Field, Schema};
use cpu_time::thread_cpu_ns;
use kafluss_broker::log::checksum::seal_into;
use kafluss_broker::log::encode::{CodecHistory, Encoder};
use kafluss_broker::log::ArrowCompression;
use kafluss_convert::JsonScratch;

/// CPU time each way gets, in slices of [`SLICE`].
const RUN: Duration = Duration::from_secs(2);
const SLICE: Duration = Duration::from_millis(50);

fn main() {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let Some(_) = thread_cpu_ns() else {
        eprintln!("encode bench: no /proc/thread-self/schedstat (Linux only)");
        return;
    };
    println!(
        "{:<24} {:>5} {:<8} {:>14} {:>14} {:>7}",
        "workload", "rows", "codec", "arrow+seal ns", "encoder ns", "ratio"
    );
    let mut cases: Vec<(String, RecordBatch)> = Vec::new();
    for (name, build) in workloads::all() {
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let workload = build();
        let records = workload.records();
        for rows in [1usize, 500] {
            let batch = workload
                .plan
                .convert_batch_with(&mut JsonScratch::default(), records.iter().take(rows).copied())
                .expect("bench input converts");
            cases.push((name.to_string(), batch));
        }
    }
    if filter.is_empty() || filter.iter().any(|f| RANDOM_1KIB.contains(f.as_str())) {
        cases.push((RANDOM_1KIB.to_string(), random_values(500, 1024)));
    }
    for (name, batch) in &cases {
        let rows = batch.num_rows();
        for compression in [ArrowCompression::None, ArrowCompression::Zstd { level: 3 }] {
            let options = compression.write_options();
            let mut context = IpcWriteContext::default();
            let mut encoder = Encoder::default();
            // One bucket's history, kept across its messages as the log keeps it.
            let mut history = CodecHistory::default();
            let mut out = Vec::new();
            let mut arrow = |out: &mut Vec<u8>| {
                out.clear();
                let (_, encoded) = IpcDataGenerator::default()
                    .encode(batch, &mut DictionaryTracker::new(false), &options, &mut context)
                    .expect("encodes");
                seal_into(out, &encoded.ipc_message, &encoded.arrow_data, &[]).expect("seals");
            };
            let mut ours = |out: &mut Vec<u8>| {
                out.clear();
                encoder
                    .encode_into(out, batch, compression, &[], &mut history)
                    .expect("the encoder lays out the converter's batches")
                    .expect("encodes");
            };
            // The same message, or the comparison means nothing: the same bytes, except at
            // level 3, whose frames the encoder makes with its own minimum match length
            // (log/encode.rs): there the same rows read back.
            let mut a = Vec::new();
            let mut b = Vec::new();
            arrow(&mut a);
            ours(&mut b);
            if compression == (ArrowCompression::Zstd { level: 3 }) {
                assert_eq!(
                    &read_back(batch, &b),
                    batch,
                    "{name}: the encoder's message reads back to other rows"
                );
            } else {
                assert_eq!(
                    a, b,
                    "{name}: the encoder's bytes differ from arrow-ipc + seal_into"
                );
            }
            let (mut arrow_ns, mut arrow_n, mut ours_ns, mut ours_n) = (0u64, 0u64, 0u64, 0u64);
            while arrow_ns.min(ours_ns) < RUN.as_nanos() as u64 {
                let (ns, n) = slice(|| arrow(black_box(&mut out)));
                arrow_ns += ns;
                arrow_n += n;
                let (ns, n) = slice(|| ours(black_box(&mut out)));
                ours_ns += ns;
                ours_n += n;
            }
            let arrow_per = arrow_ns as f64 / arrow_n as f64;
            let ours_per = ours_ns as f64 / ours_n as f64;
            println!(
                "{name:<24} {rows:>5} {:<8} {arrow_per:>14.0} {ours_per:>14.0} {:>7.3}",
                match compression {
                    ArrowCompression::None => "NONE",
                    _ => "ZSTD(3)",
                },
                ours_per / arrow_per
            );
        }
    }
}

/// A case of its own: values no codec shrinks (random bytes), which are stored uncompressed
/// after the codec's attempt.
const RANDOM_1KIB: &str = "random_1kib";

/// `rows` values of `len` random bytes (xorshift) in one BYTES column.
fn random_values(rows: usize, len: usize) -> RecordBatch {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut values = BinaryBuilder::new();
    let mut value = vec![0u8; len];
    for _ in 0..rows {
        for byte in value.iter_mut() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            *byte = state as u8;
        }
        values.append_value(&value);
    }
    let schema = Schema::new(vec![Field::new("_kafka_value", DataType::Binary, false)]);
    RecordBatch::try_new(Arc::new(schema), vec![Arc::new(values.finish()) as ArrayRef])
        .expect("one binary column")
}

/// `message` (one sealed record-batch message of `like`'s schema) read back with arrow-ipc.
fn read_back(like: &RecordBatch, message: &[u8]) -> RecordBatch {
    let mut writer = StreamWriter::try_new(Vec::new(), &like.schema()).expect("schema message");
    let mut stream = std::mem::take(writer.get_mut());
    stream.extend_from_slice(message);
    let mut reader = StreamReader::try_new(std::io::Cursor::new(stream), None).expect("stream");
    reader.next().expect("one batch").expect("reads back")
}

/// Runs `f` for one slice of CPU time; returns (ns, calls).
fn slice(mut f: impl FnMut()) -> (u64, u64) {
    let start = thread_cpu_ns().unwrap_or(0);
    let mut calls = 0;
    loop {
        // Reading the CPU time costs a few microseconds: once per 32 calls.
        for _ in 0..32 {
            f();
        }
        calls += 32;
        let used = thread_cpu_ns().unwrap_or(0) - start;
        if used >= SLICE.as_nanos() as u64 {
            return (used, calls);
        }
    }
}
