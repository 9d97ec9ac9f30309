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
    /// Summarises `histogram` (all zero when empty).
    pub fn of(histogram: &Histogram<u64>) -> Self {
        let us = |nanos: u64| nanos as f64 / 1000.0;
        if histogram.is_empty() {
            return Self {
                count: 0,
                mean_us: 0.0,
                p50_us: 0.0,
                p90_us: 0.0,
                p99_us: 0.0,
                p999_us: 0.0,
                p9999_us: 0.0,
                max_us: 0.0,
            };
        }
        Self {
            count: histogram.len(),
            mean_us: histogram.mean() / 1000.0,
            p50_us: us(histogram.value_at_quantile(0.50)),
            p90_us: us(histogram.value_at_quantile(0.90)),
            p99_us: us(histogram.value_at_quantile(0.99)),
            p999_us: us(histogram.value_at_quantile(0.999)),
            p9999_us: us(histogram.value_at_quantile(0.9999)),
            max_us: us(histogram.max()),
        }
    }

    /// As a JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "count": self.count,
            "mean_us": round3(self.mean_us),
            "p50_us": round3(self.p50_us),
            "p90_us": round3(self.p90_us),
            "p99_us": round3(self.p99_us),
            "p999_us": round3(self.p999_us),
            "p9999_us": round3(self.p9999_us),
            "max_us": round3(self.max_us),
        })
    }
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
        let summary = LatencySummary::of(&histogram);
        assert_eq!(summary.count, 1000);
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
        assert!(LatencySummary::of(&histogram).max_us >= 299_000_000.0);
    }

    #[test]
    fn empty_histogram_summarises_to_zero() {
        let summary = LatencySummary::of(&run_histogram());
        assert_eq!(summary.count, 0);
        assert_eq!(summary.max_us, 0.0);
    }
}
