//! Rows per second of CPU time on one thread, for each bench workload:
//! `cargo bench -p kafluss-convert --bench rows_per_cpu_second`.
//!
//! Criterion measures wall time, which other processes on a shared machine inflate; this
//! reads the thread's own CPU time from `/proc/thread-self/schedstat` (Linux), so the figure
//! is per core whatever else runs. Elsewhere it falls back to wall time and says so.

mod cpu_time;
mod workloads;

use std::hint::black_box;
use std::time::{Duration, Instant};

use cpu_time::thread_cpu_ns;
use kafluss_convert::JsonScratch;

/// How long each workload runs.
const RUN: Duration = Duration::from_secs(3);

fn main() {
    // `cargo bench` passes `--bench`; any other argument filters workloads by name.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    for (name, build) in workloads::all() {
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let workload = build();
        let mut scratch = JsonScratch::default();
        let records = workload.records();
        let convert = |scratch: &mut JsonScratch| {
            let batch = workload
                .plan
                .convert_batch_with(scratch, black_box(records.iter().copied()))
                .expect("bench input converts");
            black_box(batch.num_rows())
        };
        // Warm up caches and allocator.
        for _ in 0..20 {
            convert(&mut scratch);
        }
        let cpu_start = thread_cpu_ns();
        let wall_start = Instant::now();
        let mut rows = 0usize;
        // A fixed number of batches makes runs comparable under an instruction counter
        // (e.g. `valgrind --tool=callgrind`); by default the run lasts `RUN`.
        let batches: Option<usize> = std::env::var("KAFLUSS_BENCH_BATCHES")
            .ok()
            .and_then(|v| v.parse().ok());
        let mut done = 0usize;
        while batches.map_or(wall_start.elapsed() < RUN, |n| done < n) {
            rows += convert(&mut scratch);
            done += 1;
        }
        let wall = wall_start.elapsed();
        let (seconds, clock) = match (cpu_start, thread_cpu_ns()) {
            (Some(a), Some(b)) if b > a => ((b - a) as f64 / 1e9, "CPU"),
            _ => (wall.as_secs_f64(), "wall"),
        };
        let rate = rows as f64 / seconds;
        println!(
            "{:<24} {:>5} B/value  {:>6.2} M rows/s per core ({clock} time; {rows} rows in {seconds:.2} s, {:.0} MB/s of values)",
            workload.name,
            workload.average_value_len(),
            rate / 1e6,
            rate * workload.average_value_len() as f64 / 1e6,
        );
    }
}
