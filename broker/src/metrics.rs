//! Prometheus metrics without locks on the hot path.
//!
//! Every core owns one [`CoreMetrics`] slot and is its only writer (relaxed atomic adds on its
//! own cache lines, so cores never contend); `GET /metrics` sums the slots when scraped.
//! Latency is a fixed-bucket histogram per API, so recording is one add per bucket search.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The APIs metrics are kept for; anything else counts as `other`.
pub const API_NAMES: [&str; 8] = [
    "produce",
    "metadata",
    "api_versions",
    "sasl_handshake",
    "sasl_authenticate",
    "create_topics",
    "delete_topics",
    "other",
];

/// Index into [`API_NAMES`] for a Kafka api key.
pub fn api_index(api_key: i16) -> usize {
    match api_key {
        0 => 0,
        3 => 1,
        18 => 2,
        17 => 3,
        36 => 4,
        19 => 5,
        20 => 6,
        _ => 7,
    }
}

/// Upper bounds (seconds) of the latency histogram buckets; the last bucket is +Inf.
pub const LATENCY_BUCKETS_SECONDS: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.5,
];

#[derive(Default)]
struct ApiMetrics {
    requests: AtomicU64,
    errors: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    latency_sum_micros: AtomicU64,
    /// Non-cumulative counts; `render` makes them cumulative as Prometheus expects.
    latency_buckets: [AtomicU64; LATENCY_BUCKETS_SECONDS.len() + 1],
}

/// The counters one core writes (only that core; the admin thread reads).
#[derive(Default)]
pub struct CoreMetrics {
    apis: [ApiMetrics; API_NAMES.len()],
    records_appended: AtomicU64,
    partition_errors: AtomicU64,
    local_appends: AtomicU64,
    cross_core_appends: AtomicU64,
    connections_open: AtomicU64,
    connections_total: AtomicU64,
    connections_rejected: AtomicU64,
}

fn add(counter: &AtomicU64, value: u64) {
    counter.fetch_add(value, Ordering::Relaxed);
}

impl CoreMetrics {
    /// One request of `api_key` finished: its frame sizes, latency and whether it failed.
    pub fn record_request(
        &self,
        api_key: i16,
        bytes_in: usize,
        bytes_out: usize,
        latency: Duration,
        failed: bool,
    ) {
        let api = &self.apis[api_index(api_key)];
        add(&api.requests, 1);
        add(&api.bytes_in, bytes_in as u64);
        add(&api.bytes_out, bytes_out as u64);
        if failed {
            add(&api.errors, 1);
        }
        add(&api.latency_sum_micros, latency.as_micros() as u64);
        let seconds = latency.as_secs_f64();
        let bucket = LATENCY_BUCKETS_SECONDS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(LATENCY_BUCKETS_SECONDS.len());
        add(&api.latency_buckets[bucket], 1);
    }

    pub fn record_appended(&self, rows: u64) {
        add(&self.records_appended, rows);
    }

    /// A partition batch was handed to a bucket owned by the connection's own core.
    pub fn record_local_append(&self) {
        add(&self.local_appends, 1);
    }

    /// A partition batch crossed the mesh to the core owning its bucket.
    pub fn record_cross_core_append(&self) {
        add(&self.cross_core_appends, 1);
    }

    pub fn record_partition_error(&self) {
        add(&self.partition_errors, 1);
    }

    pub fn connection_opened(&self) {
        add(&self.connections_total, 1);
        add(&self.connections_open, 1);
    }

    pub fn connection_closed(&self) {
        self.connections_open.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn connection_rejected(&self) {
        add(&self.connections_rejected, 1);
    }
}

/// One core's slot, aligned to its own cache lines so cores never write the same line.
#[derive(Default)]
#[repr(align(128))]
struct CoreSlot(CoreMetrics);

/// All cores' slots; shared as `Arc<Metrics>` with the admin thread.
pub struct Metrics {
    cores: Vec<CoreSlot>,
}

impl Metrics {
    pub fn new(cores: usize) -> Self {
        Self {
            cores: (0..cores.max(1)).map(|_| CoreSlot::default()).collect(),
        }
    }

    /// The slot core `core` writes to.
    pub fn core(&self, core: usize) -> &CoreMetrics {
        &self.cores[core % self.cores.len()].0
    }

    fn sum(&self, read: impl Fn(&CoreMetrics) -> &AtomicU64) -> u64 {
        self.cores
            .iter()
            .map(|c| read(&c.0).load(Ordering::Relaxed))
            .sum()
    }

    /// Prometheus text exposition format (version 0.0.4).
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(8 * 1024);
        let per_api = |out: &mut String, name: &str, help: &str, read: &dyn Fn(&ApiMetrics) -> &AtomicU64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for (index, api) in API_NAMES.iter().enumerate() {
                let value = self.sum(|c| read(&c.apis[index]));
                let _ = writeln!(out, "{name}{{api=\"{api}\"}} {value}");
            }
        };
        per_api(
            &mut out,
            "kafluss_requests_total",
            "Kafka requests handled, by API.",
            &|a| &a.requests,
        );
        per_api(
            &mut out,
            "kafluss_request_errors_total",
            "Kafka requests answered with an error, by API.",
            &|a| &a.errors,
        );
        per_api(
            &mut out,
            "kafluss_request_bytes_total",
            "Bytes of Kafka request frames received, by API.",
            &|a| &a.bytes_in,
        );
        per_api(
            &mut out,
            "kafluss_response_bytes_total",
            "Bytes of Kafka response frames sent, by API.",
            &|a| &a.bytes_out,
        );
        let name = "kafluss_request_latency_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Time from a request's arrival to its response being ready, by API.\n# TYPE {name} histogram"
        );
        for (index, api) in API_NAMES.iter().enumerate() {
            let mut cumulative = 0;
            for (bucket, bound) in LATENCY_BUCKETS_SECONDS.iter().enumerate() {
                cumulative += self.sum(|c| &c.apis[index].latency_buckets[bucket]);
                let _ = writeln!(out, "{name}_bucket{{api=\"{api}\",le=\"{bound}\"}} {cumulative}");
            }
            cumulative += self.sum(|c| &c.apis[index].latency_buckets[LATENCY_BUCKETS_SECONDS.len()]);
            let _ = writeln!(out, "{name}_bucket{{api=\"{api}\",le=\"+Inf\"}} {cumulative}");
            let micros = self.sum(|c| &c.apis[index].latency_sum_micros);
            let _ = writeln!(out, "{name}_sum{{api=\"{api}\"}} {}", micros as f64 / 1_000_000.0);
            let _ = writeln!(out, "{name}_count{{api=\"{api}\"}} {cumulative}");
        }
        for (name, kind, help, value) in [
            (
                "kafluss_records_appended_total",
                "counter",
                "Rows appended to bucket logs.",
                self.sum(|c| &c.records_appended),
            ),
            (
                "kafluss_produce_partition_errors_total",
                "counter",
                "Produce partitions answered with an error code.",
                self.sum(|c| &c.partition_errors),
            ),
            (
                "kafluss_local_appends_total",
                "counter",
                "Partition batches appended on the core that read them.",
                self.sum(|c| &c.local_appends),
            ),
            (
                "kafluss_cross_core_appends_total",
                "counter",
                "Partition batches sent over the mesh to the core owning their bucket.",
                self.sum(|c| &c.cross_core_appends),
            ),
            (
                "kafluss_connections_open",
                "gauge",
                "Open Kafka connections.",
                self.sum(|c| &c.connections_open),
            ),
            (
                "kafluss_connections_total",
                "counter",
                "Kafka connections accepted.",
                self.sum(|c| &c.connections_total),
            ),
            (
                "kafluss_connections_rejected_total",
                "counter",
                "Kafka connections refused by kafka.max-connections.",
                self.sum(|c| &c.connections_rejected),
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
        }
        let _ = writeln!(
            out,
            "# HELP kafluss_cores Executor cores serving Kafka.\n# TYPE kafluss_cores gauge\nkafluss_cores {}",
            self.cores.len()
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_cores_and_renders_cumulative_histograms() {
        let metrics = Metrics::new(2);
        metrics
            .core(0)
            .record_request(0, 100, 20, Duration::from_micros(50), false);
        metrics
            .core(1)
            .record_request(0, 300, 20, Duration::from_millis(3), true);
        metrics.core(1).record_appended(7);
        let text = metrics.render();
        assert!(
            text.contains("kafluss_requests_total{api=\"produce\"} 2"),
            "{text}"
        );
        assert!(text.contains("kafluss_request_errors_total{api=\"produce\"} 1"));
        assert!(text.contains("kafluss_request_bytes_total{api=\"produce\"} 400"));
        assert!(text.contains("kafluss_request_latency_seconds_bucket{api=\"produce\",le=\"0.0001\"} 1"));
        assert!(text.contains("kafluss_request_latency_seconds_bucket{api=\"produce\",le=\"0.005\"} 2"));
        assert!(text.contains("kafluss_request_latency_seconds_count{api=\"produce\"} 2"));
        assert!(text.contains("kafluss_records_appended_total 7"));
        assert!(text.contains("kafluss_requests_total{api=\"metadata\"} 0"));
    }
}
