//! CPU per row of a bucket's whole path from Kafka record batches to the stored message, on one
//! core, without sockets or files: the request's records section (two uncompressed Kafka
//! batches of 500 records, no key, no headers, as kcat sends them) decoded
//! (`append::pipeline::decode_batches`), converted (`JobRecords` into a `BatchBuilder`, as
//! `Appender::convert` does) and encoded with the table's default codec, ZSTD level 3
//! (`log::encode::Encoder`, checksum included):
//! `cargo bench -p kafluss-broker --bench row_path [workload...]`. Workloads: the conversion
//! benches' (convert/benches/workloads), `text_100b` (100 B of letters into a BYTES column, as
//! `stock-client.sh` sends with `VALUE=binary`) and `load_json_flat` (the load generator's
//! flat JSON into its table). `KAFLUSS_BENCH_ROWS=N` makes a round (and a stored message) N rows.
//!
//! Each stage's CPU time is its thread's own (`/proc/thread-self/schedstat`), so the machine's
//! load falls on all alike. With `KAFLUSS_BENCH_BATCHES=N` it runs N rounds of 1,000 rows (after
//! 20 to warm up) and prints nothing timed, for an instruction counter: the instructions of
//! 10,000 rows are those of `N=11` less those of `N=1` under
//! `valgrind --tool=callgrind` (docs/benchmarks.md).

#[path = "../../convert/benches/cpu_time/mod.rs"]
mod cpu_time;
#[path = "../../convert/benches/workloads/mod.rs"]
#[allow(dead_code)]
mod workloads;

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use cpu_time::thread_cpu_ns;
use kafluss_broker::append::pipeline::{decode_batches, JobRecords};
use kafluss_broker::log::encode::{CodecHistory, Encoder};
use kafluss_broker::log::ArrowCompression;
use kafluss_convert::{BatchBuilder, JsonScratch};
use kafluss_protocol::{Compression, RecordBatchBuilder};

/// The server's allocator (broker/src/main.rs), so that allocations cost here what they cost
/// there.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// CPU time per workload when no batch count is given.
const RUN: Duration = Duration::from_secs(2);
const WARM_UP: usize = 20;
const RECORDS_PER_BATCH: usize = 500;

/// The records section of a Produce request holding `values`, in Kafka batches of 500.
fn records_section(values: &[Vec<u8>]) -> Bytes {
    let mut section = Vec::new();
    for chunk in values.chunks(RECORDS_PER_BATCH) {
        let mut builder = RecordBatchBuilder::new(Compression::None);
        for (i, value) in chunk.iter().enumerate() {
            builder.append(1_700_000_000_000 + i as i64, None, Some(value), &[]);
        }
        section.extend_from_slice(&builder.build().expect("a valid batch"));
    }
    Bytes::from(section)
}

/// Nanoseconds of this thread's CPU spent in each stage.
#[derive(Default)]
struct Stages {
    decode: u64,
    convert: u64,
    encode: u64,
}

fn main() {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let rounds: Option<usize> = std::env::var("KAFLUSS_BENCH_BATCHES")
        .ok()
        .and_then(|v| v.parse().ok());
    let mut all = workloads::all();
    all.push(("text_100b", workloads::text_100b));
    all.push(("load_json_flat", workloads::load_json_flat));
    let compression = ArrowCompression::Zstd { level: 3 };
    for (name, build) in all {
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let workload = build();
        let section = records_section(&workload.values);
        let mut scratch = JsonScratch::default();
        let mut encoder = Encoder::default();
        let mut history = CodecHistory::default();
        let mut out = Vec::new();
        let mut stages = Stages::default();
        let mut round = |stages: &mut Stages, timed: bool| -> usize {
            let now = || if timed { thread_cpu_ns().unwrap_or(0) } else { 0 };
            let t0 = now();
            let decoded =
                decode_batches(Some(&section), usize::MAX, usize::MAX).expect("the bench's batches decode");
            let t1 = now();
            let jobs = [(&decoded[..], 0, 0)];
            let records = JobRecords::new(&workload.plan, &jobs);
            let mut builder =
                BatchBuilder::with_value_bytes(&workload.plan, records.rows(), records.value_bytes());
            for record in records.iter() {
                builder
                    .push(&mut scratch, &record)
                    .expect("the bench's records convert");
            }
            let batch = builder.finish().expect("a record batch");
            let t2 = now();
            out.clear();
            encoder
                .encode_into(&mut out, &batch, compression, &[], &mut history)
                .expect("the encoder lays out the converter's batches")
                .expect("encodes");
            let t3 = now();
            black_box(&out);
            stages.decode += t1 - t0;
            stages.convert += t2 - t1;
            stages.encode += t3 - t2;
            batch.num_rows()
        };
        for _ in 0..WARM_UP {
            round(&mut Stages::default(), false);
        }
        if let Some(n) = rounds {
            for _ in 0..n {
                round(&mut stages, false);
            }
            continue;
        }
        if thread_cpu_ns().is_none() {
            eprintln!("row_path bench: no /proc/thread-self/schedstat (Linux only)");
            return;
        }
        let mut rows = 0usize;
        while stages.decode + stages.convert + stages.encode < RUN.as_nanos() as u64 {
            rows += round(&mut stages, true);
        }
        let per_row = |ns: u64| ns as f64 / rows as f64;
        let total = stages.decode + stages.convert + stages.encode;
        println!(
            "{name:<24} {:>5} B/value  {:>7.1} ns per row: decode {:.1}, convert {:.1}, encode (ZSTD 3) {:.1}; {:.3} CPU s per M rows, {} bytes per row stored",
            workload.average_value_len(),
            per_row(total),
            per_row(stages.decode),
            per_row(stages.convert),
            per_row(stages.encode),
            per_row(total) / 1000.0,
            out.len() / workload.values.len().max(1),
        );
    }
}
