//! What one core records about its work: its slot of the process metrics, its handles on the
//! per-table series, and the rate limit of its refusal and storage-error log lines. Shared by the
//! connection side (`kafka/`) and the owner side (`append/`) of the same core.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Instant;

use crate::catalog::model::TableInfo;
use crate::metrics::{CoreMetrics, Metrics, TableSeries, TableSeriesCache};
use crate::repeat_log::{RepeatLimiter, Verdict};

/// One core's metrics and log limiter; `!Sync`, owned by its core.
pub struct CoreTelemetry {
    core: usize,
    metrics: Arc<Metrics>,
    table_series: TableSeriesCache,
    repeat_log: RefCell<RepeatLimiter>,
}

impl CoreTelemetry {
    /// The telemetry of core `core`; lines repeat at most once per `interval` per key, for at
    /// most `max_keys` keys (`server.log-repeat-interval`, `server.log-repeat-keys`).
    pub fn new(core: usize, metrics: Arc<Metrics>, interval: std::time::Duration, max_keys: usize) -> Self {
        Self {
            core,
            metrics,
            table_series: TableSeriesCache::default(),
            repeat_log: RefCell::new(RepeatLimiter::new(interval, max_keys)),
        }
    }

    /// This core's index (its slot in every metric).
    pub fn core(&self) -> usize {
        self.core
    }

    /// The process-wide metrics.
    pub fn all(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// This core's slot of the process metrics.
    pub fn metrics(&self) -> &CoreMetrics {
        self.metrics.core(self.core)
    }

    /// Runs `f` on the metric series of `table` (this core writes slot `core()` of it).
    pub fn with_table<R>(&self, table: &TableInfo, f: impl FnOnce(&TableSeries) -> R) -> R {
        self.table_series
            .with(&self.metrics, table.id, || table.path(), f)
    }

    /// Forgets a dropped table's series on this core and in the registry.
    pub fn forget_table(&self, table_id: u64) {
        self.table_series.forget(table_id);
        self.metrics.forget_table(table_id);
    }

    /// Whether to log one more occurrence of `(table, reason)` now: `Some(suppressed)` to log
    /// (with the count of lines not logged since the key's last one), `None` to stay quiet.
    pub fn log_repeat(&self, table: &str, reason: &'static str) -> Option<u64> {
        self.log_repeat_largest(table, reason, 0)
            .map(|(suppressed, _)| suppressed)
    }

    /// After `wait`, the occurrences of `(table, reason)` suppressed since its last line and the
    /// largest magnitude among them (counted as reported); `None` when there were none. A line
    /// logged through [`CoreTelemetry::log_repeat_largest`] awaits this once, so the tail of a
    /// burst is reported even when the key logs nothing later.
    pub async fn suppressed_after(
        &self,
        table: &str,
        reason: &'static str,
        wait: std::time::Duration,
    ) -> Option<(u64, u64)> {
        glommio::timer::sleep(wait).await;
        self.repeat_log.borrow_mut().take_suppressed((table, reason))
    }

    /// `server.log-repeat-interval`.
    pub fn repeat_interval(&self) -> std::time::Duration {
        self.repeat_log.borrow().interval()
    }

    /// [`CoreTelemetry::log_repeat`] for an occurrence of magnitude `value`: `Some((suppressed,
    /// largest))` to log, where `largest` is the largest magnitude among the suppressed ones.
    pub fn log_repeat_largest(&self, table: &str, reason: &'static str, value: u64) -> Option<(u64, u64)> {
        match self
            .repeat_log
            .borrow_mut()
            .check_with((table, reason), Instant::now(), value)
        {
            (Verdict::Log { suppressed }, largest) => Some((suppressed, largest)),
            (Verdict::Suppress, _) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::CoreTelemetry;
    use crate::metrics::Metrics;

    #[test]
    fn a_logged_line_hears_of_what_its_interval_suppressed() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let interval = Duration::from_millis(50);
                let telemetry = CoreTelemetry::new(0, Arc::new(Metrics::new(1)), interval, 16);
                assert_eq!(telemetry.repeat_interval(), interval);
                assert_eq!(
                    telemetry.log_repeat_largest("fluss.t", "disk-paced", 12),
                    Some((0, 0))
                );
                assert_eq!(telemetry.log_repeat_largest("fluss.t", "disk-paced", 261), None);
                assert_eq!(telemetry.log_repeat_largest("fluss.t", "disk-paced", 30), None);
                let started = Instant::now();
                let tail = telemetry
                    .suppressed_after("fluss.t", "disk-paced", interval)
                    .await;
                assert!(started.elapsed() >= interval);
                assert_eq!(tail, Some((2, 261)));
                // Reported once; a quiet key then has nothing more to say.
                assert_eq!(
                    telemetry
                        .suppressed_after("fluss.t", "disk-paced", Duration::ZERO)
                        .await,
                    None
                );
                // Its interval has passed: the next occurrence is logged, counting from none.
                assert_eq!(
                    telemetry.log_repeat_largest("fluss.t", "disk-paced", 7),
                    Some((0, 0))
                );
            })
            .expect("executor")
            .join()
            .expect("test task");
    }
}
