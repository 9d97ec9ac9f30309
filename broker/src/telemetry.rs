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
        match self
            .repeat_log
            .borrow_mut()
            .check((table, reason), Instant::now())
        {
            Verdict::Log { suppressed } => Some(suppressed),
            Verdict::Suppress => None,
        }
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
