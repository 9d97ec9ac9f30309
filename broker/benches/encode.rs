//! CPU time of encoding one stored record-batch message (`log/encode.rs`) against what the log
//! did before it (arrow-ipc's `IpcDataGenerator::encode`, then `checksum::seal_into`), for the
//! conversion benches' workloads (convert/benches/workloads) at 1 and 500 rows per message,
//! with no codec and with the default ZSTD level 3:
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
use std::time::Duration;

use arrow_ipc::writer::{DictionaryTracker, IpcDataGenerator, IpcWriteContext};
use cpu_time::thread_cpu_ns;
use kafluss_broker::log::checksum::seal_into;
use kafluss_broker::log::encode::Encoder;
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
            for compression in [ArrowCompression::None, ArrowCompression::Zstd { level: 3 }] {
                let options = compression.write_options();
                let mut context = IpcWriteContext::default();
                let mut encoder = Encoder::default();
                let mut out = Vec::new();
                let mut arrow = |out: &mut Vec<u8>| {
                    out.clear();
                    let (_, encoded) = IpcDataGenerator::default()
                        .encode(&batch, &mut DictionaryTracker::new(false), &options, &mut context)
                        .expect("encodes");
                    seal_into(out, &encoded.ipc_message, &encoded.arrow_data, &[]).expect("seals");
                };
                let mut ours = |out: &mut Vec<u8>| {
                    out.clear();
                    encoder
                        .encode_into(out, &batch, compression, &[])
                        .expect("the encoder lays out the converter's batches")
                        .expect("encodes");
                };
                // Same bytes, or the comparison means nothing.
                let mut a = Vec::new();
                let mut b = Vec::new();
                arrow(&mut a);
                ours(&mut b);
                assert_eq!(
                    a, b,
                    "{name}: the encoder's bytes differ from arrow-ipc + seal_into"
                );
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
