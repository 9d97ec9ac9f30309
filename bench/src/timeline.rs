//! The per-second timeline of a run: a thread sampling the shared counters and the connections'
//! interval histograms each second, printing a progress line and keeping one point per second.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::error::BenchError;
use crate::histogram::{interval_histogram, ms, LatencySummary};
use crate::pipeline::{sleep_until, Counters};
use crate::proc_stat;

/// The last, partial interval is printed only when at least this long (a sliver's rate misleads).
const MIN_PRINTED_SPAN_S: f64 = 0.2;

/// One second (or the last, shorter stretch) of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelinePoint {
    /// Seconds since the start at the end of the interval.
    pub at_s: f64,
    /// Length of the interval in seconds.
    pub span_s: f64,
    /// Records acknowledged in the interval.
    pub records: u64,
    /// Payload bytes acknowledged in the interval.
    pub payload_bytes: u64,
    /// Request latency of the requests acknowledged in the interval (`None` when none was).
    pub latency: Option<LatencySummary>,
    /// The server's resident memory at the end of the interval, KiB (when its pid is given).
    pub server_rss_kib: Option<u64>,
    /// The machine's steal time in the interval, CPU milliseconds over all its CPUs
    /// ([`proc_stat::steal_seconds`]; 10 ms resolution).
    pub steal_ms: Option<f64>,
}

/// Samples the counters and interval histograms each second until the run ends; prints a line
/// per second when asked; returns the timeline.
pub(crate) fn spawn_progress(
    print: bool,
    server_pid: Option<u32>,
    start: Instant,
    counters: Arc<Counters>,
    intervals: Vec<Arc<Mutex<Histogram<u64>>>>,
    running: Arc<AtomicBool>,
) -> Result<JoinHandle<Vec<TimelinePoint>>, BenchError> {
    thread::Builder::new()
        .name("progress".into())
        .spawn(move || {
            sleep_until(start);
            let mut timeline = Vec::new();
            let mut previous = (start, 0u64, 0u64);
            let mut merged = interval_histogram();
            let mut steal_before = proc_stat::steal_seconds();
            loop {
                let tick = previous.0 + Duration::from_secs(1);
                // Wake at the tick, or early (in 10 ms steps) when the run ends.
                while running.load(Ordering::SeqCst) && Instant::now() < tick {
                    thread::sleep(
                        Duration::from_millis(10).min(tick.saturating_duration_since(Instant::now())),
                    );
                }
                let now = Instant::now();
                merged.reset();
                for interval in &intervals {
                    if let Ok(mut histogram) = interval.lock() {
                        merged.add(&*histogram).ok();
                        histogram.reset();
                    }
                }
                let records = counters.records_acked.load(Ordering::SeqCst);
                let bytes = counters.payload_bytes_acked.load(Ordering::SeqCst);
                let steal_now = proc_stat::steal_seconds();
                let point = TimelinePoint {
                    at_s: now.duration_since(start).as_secs_f64(),
                    span_s: now.duration_since(previous.0).as_secs_f64(),
                    records: records - previous.1,
                    payload_bytes: bytes - previous.2,
                    latency: LatencySummary::of(&merged),
                    server_rss_kib: server_pid
                        .and_then(proc_stat::sample)
                        .map(|sample| sample.rss_kib),
                    steal_ms: proc_stat::steal_between(steal_before, steal_now).map(|steal| steal * 1000.0),
                };
                steal_before = steal_now;
                if print && point.span_s >= MIN_PRINTED_SPAN_S {
                    eprintln!("{}", progress_line(&point));
                }
                let finished = !running.load(Ordering::SeqCst);
                if point.records > 0 || point.latency.is_some() || !finished {
                    timeline.push(point);
                }
                previous = (now, records, bytes);
                if finished {
                    return timeline;
                }
            }
        })
        .map_err(|source| BenchError::io("starting the progress thread", source))
}

/// `[  3.0s]   123456 rec/s   12.35 MB/s  p50 0.120 ms  p99 1.200 ms  max 3.400 ms`, then the
/// server's RSS (when its pid is given) and the machine's steal time in the second when there was
/// any (`steal 40 ms`).
pub fn progress_line(point: &TimelinePoint) -> String {
    let span = point.span_s.max(1e-9);
    let mut line = format!(
        "[{:6.1}s] {:>10.0} rec/s {:>9.2} MB/s  p50 {} ms  p99 {} ms  max {} ms",
        point.at_s,
        point.records as f64 / span,
        point.payload_bytes as f64 / 1e6 / span,
        ms(point.latency.as_ref(), |l| l.p50_us),
        ms(point.latency.as_ref(), |l| l.p99_us),
        ms(point.latency.as_ref(), |l| l.max_us),
    );
    if let Some(rss) = point.server_rss_kib {
        line.push_str(&format!("  server RSS {} MiB", rss / 1024));
    }
    if let Some(steal) = point.steal_ms.filter(|steal| *steal > 0.0) {
        line.push_str(&format!("  steal {steal:.0} ms"));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::{record, run_histogram};

    fn point(steal_ms: Option<f64>) -> TimelinePoint {
        let mut latency = run_histogram();
        record(&mut latency, 1_200_000, 100);
        TimelinePoint {
            at_s: 3.0,
            span_s: 1.0,
            records: 123_456,
            payload_bytes: 12_345_600,
            latency: LatencySummary::of(&latency),
            server_rss_kib: Some(20_480),
            steal_ms,
        }
    }

    #[test]
    fn progress_line_names_the_steal_of_a_second_that_had_any() {
        let line = progress_line(&point(Some(40.0)));
        assert!(
            line.starts_with("[   3.0s]     123456 rec/s     12.35 MB/s  p50 1.200 ms"),
            "{line}"
        );
        assert!(line.ends_with("server RSS 20 MiB  steal 40 ms"), "{line}");
        for quiet in [Some(0.0), None] {
            let line = progress_line(&point(quiet));
            assert!(line.ends_with("server RSS 20 MiB"), "{line}");
        }
        // A second without answers has no latency.
        let mut silent = point(None);
        silent.latency = None;
        let line = progress_line(&silent);
        assert!(line.contains("p50 - ms  p99 - ms  max - ms"), "{line}");
    }
}
