//! Latency histograms (HDR, nanoseconds) and their percentile summary.

use hdrhistogram::Histogram;

/// Longest latency kept exactly; longer ones are clamped (and show as this maximum).
pub const MAX_TRACKED_NANOS: u64 = 300 * 1_000_000_000;

/// A histogram for a whole run: 1 ns to 300 s at 3 significant digits.
pub fn run_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_TRACKED_NANOS, 3).expect("constant bounds are valid")
}

/// A histogram for one second of the timeline: 2 significant digits keep it small.
pub fn interval_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_TRACKED_NANOS, 2).expect("constant bounds are valid")
}

/// Records `nanos` (clamped into range) `count` times.
pub fn record(histogram: &mut Histogram<u64>, nanos: u64, count: u64) {
    histogram.saturating_record_n(nanos.clamp(1, MAX_TRACKED_NANOS), count);
}

/// Percentiles of one histogram, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencySummary {
    /// Number of samples.
    pub count: u64,
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// 99.99th percentile.
    pub p9999_us: f64,
    /// Largest sample.
    pub max_us: f64,
}

impl LatencySummary {
    /// Summarises `histogram`; `None` when it holds no sample (all requests failed, acks=0, a
    /// warm-up as long as the run): no figure, rather than zeros that read as latencies.
    pub fn of(histogram: &Histogram<u64>) -> Option<Self> {
        let us = |nanos: u64| nanos as f64 / 1000.0;
        if histogram.is_empty() {
            return None;
        }
        Some(Self {
            count: histogram.len(),
            mean_us: histogram.mean() / 1000.0,
            p50_us: us(histogram.value_at_quantile(0.50)),
            p90_us: us(histogram.value_at_quantile(0.90)),
            p99_us: us(histogram.value_at_quantile(0.99)),
            p999_us: us(histogram.value_at_quantile(0.999)),
            p9999_us: us(histogram.value_at_quantile(0.9999)),
            max_us: us(histogram.max()),
        })
    }

    /// `summary` as a JSON object: `count` and the figures in µs; without samples `count` is 0
    /// and every figure `null`.
    pub fn to_json(summary: Option<&Self>) -> serde_json::Value {
        let figure = |pick: fn(&Self) -> f64| summary.map(|summary| round3(pick(summary)));
        serde_json::json!({
            "count": summary.map_or(0, |summary| summary.count),
            "mean_us": figure(|s| s.mean_us),
            "p50_us": figure(|s| s.p50_us),
            "p90_us": figure(|s| s.p90_us),
            "p99_us": figure(|s| s.p99_us),
            "p999_us": figure(|s| s.p999_us),
            "p9999_us": figure(|s| s.p9999_us),
            "max_us": figure(|s| s.max_us),
        })
    }
}

/// The figure `pick` of `summary` in milliseconds with three decimals, or `-` without samples.
pub fn ms(summary: Option<&LatencySummary>, pick: fn(&LatencySummary) -> f64) -> String {
    summary.map_or_else(
        || "-".to_owned(),
        |summary| format!("{:.3}", pick(summary) / 1000.0),
    )
}

/// Rounds to three decimals (keeps JSON readable).
pub fn round3(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_follow_the_samples() {
        let mut histogram = run_histogram();
        for micros in 1..=1000u64 {
            record(&mut histogram, micros * 1000, 1);
        }
        let summary = LatencySummary::of(&histogram).unwrap();
        assert_eq!(summary.count, 1000);
        assert_eq!(ms(Some(&summary), |s| s.p50_us), "0.500");
        assert!((summary.p50_us - 500.0).abs() < 1.0, "{summary:?}");
        assert!((summary.p99_us - 990.0).abs() < 1.0, "{summary:?}");
        assert!((summary.max_us - 1000.0).abs() < 1.0, "{summary:?}");
    }

    #[test]
    fn out_of_range_samples_are_clamped_not_lost() {
        let mut histogram = interval_histogram();
        record(&mut histogram, 0, 1);
        record(&mut histogram, u64::MAX, 2);
        assert_eq!(histogram.len(), 3);
        assert!(LatencySummary::of(&histogram).unwrap().max_us >= 299_000_000.0);
    }

    #[test]
    fn an_empty_histogram_has_no_figures() {
        assert_eq!(LatencySummary::of(&run_histogram()), None);
        let json = LatencySummary::to_json(None);
        assert_eq!(json["count"], 0);
        for figure in [
            "mean_us", "p50_us", "p90_us", "p99_us", "p999_us", "p9999_us", "max_us",
        ] {
            assert!(json[figure].is_null(), "{figure}: {json}");
        }
        assert_eq!(ms(None, |s| s.p50_us), "-");
    }
}
