//! What one core records about its work: its slot of the process metrics, its handles on the
//! per-table series, and the rate limit of its repeatable log lines (refusals, storage errors,
//! answers paced by the disk), with their tails. Shared by the connection side (`kafka/`) and
//! the owner side (`append/`) of the same core.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use glommio::sync::Gate;

use crate::catalog::model::TableInfo;
use crate::metrics::{CoreMetrics, Metrics, TableSeries, TableSeriesCache};
use crate::repeat_log::{RepeatLimiter, Slot, Verdict};
use crate::sched::StopSignal;

/// One core's metrics and log limiter; `!Sync`, owned by its core.
pub struct CoreTelemetry {
    core: usize,
    metrics: Arc<Metrics>,
    table_series: TableSeriesCache,
    repeat_log: RefCell<RepeatLimiter>,
    /// The tasks that log a line's tail one interval after it ([`CoreTelemetry::log_limited`]).
    tails: Gate,
    /// Stopped at shutdown: the waiting tails log at once ([`CoreTelemetry::flush_tails`]).
    flush: StopSignal,
}

impl CoreTelemetry {
    /// The telemetry of core `core`; lines repeat at most once per `interval` per key, for at
    /// most `max_keys` keys (`server.log-repeat-interval`, `server.log-repeat-keys`).
    pub fn new(core: usize, metrics: Arc<Metrics>, interval: Duration, max_keys: usize) -> Self {
        Self {
            core,
            metrics,
            table_series: TableSeriesCache::default(),
            repeat_log: RefCell::new(RepeatLimiter::new(interval, max_keys)),
            tails: Gate::new(),
            flush: StopSignal::default(),
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

    /// One occurrence of a repeat-limited line about `(key, reason)` (a table or topic, and a Kafka
    /// error code name or a storage step), of magnitude `value` (0 when it has none). When the
    /// limiter lets it through (`server.log-repeat-interval`), `line` logs it with what the key
    /// left out since its last line; one interval later `tail` logs what that interval left out,
    /// if anything, so the end of a burst is reported even when the key logs nothing more (it is
    /// given the key, copied only for a logged line). At most one waiting tail per logged line,
    /// itself at most one per key and interval. A line let through by the overflow entry (all
    /// `server.log-repeat-keys` keys in use) gets `overflow_tail`'s line instead of `tail`: what
    /// its interval left out belongs to every key sharing that entry, not to this one. At
    /// shutdown the tails waiting log at once ([`CoreTelemetry::flush_tails`]); after it a line
    /// gets no tail.
    pub fn log_limited(
        self: &Rc<Self>,
        key: &str,
        reason: &'static str,
        value: u64,
        line: impl FnOnce(Repeats),
        tail: impl FnOnce(&str, Repeats) + 'static,
    ) {
        let verdict = self
            .repeat_log
            .borrow_mut()
            .check_with((key, reason), Instant::now(), value);
        let (Verdict::Log { suppressed }, largest, slot) = verdict else {
            return;
        };
        let max_keys = self.repeat_log.borrow().max_keys();
        let interval = self.repeat_interval();
        line(Repeats {
            suppressed,
            largest,
            interval,
        });
        let telemetry = Rc::clone(self);
        let key = key.to_string();
        let waiting = self.tails.spawn(async move {
            futures_lite::future::or(glommio::timer::sleep(interval), telemetry.flush.stopping()).await;
            let taken = telemetry
                .repeat_log
                .borrow_mut()
                .take_suppressed((&key, reason), slot);
            if let Some((suppressed, largest)) = taken {
                let repeats = Repeats {
                    suppressed,
                    largest,
                    interval,
                };
                match slot {
                    Slot::Key => tail(&key, repeats),
                    Slot::Overflow => overflow_tail(repeats, max_keys),
                }
            }
        });
        if let Ok(task) = waiting {
            task.detach();
        }
    }

    /// Logs every waiting tail at once, with what its interval left out so far, and waits until
    /// they are logged: the server stops before their interval ends, and a burst that ended
    /// is still counted in full.
    pub async fn flush_tails(&self) {
        self.flush.stop();
        let _ = self.tails.close().await;
    }

    /// `server.log-repeat-interval`.
    pub fn repeat_interval(&self) -> Duration {
        self.repeat_log.borrow().interval()
    }
}

/// The tail of a line let through by the overflow entry: how many occurrences of the keys that
/// share it (of any kind: refusals, storage errors, connection closes ...) the interval after
/// that line left out. At WARN: the entry is shared only while `server.log-repeat-keys` keys are
/// in use at once.
fn overflow_tail(
    Repeats {
        suppressed, interval, ..
    }: Repeats,
    max_keys: usize,
) {
    tracing::warn!(
        suppressed,
        "repeat-limited log lines: {suppressed} more left out in the {interval:?} after the last such line, of keys that found all server.log-repeat-keys ({max_keys}) in use and share one limit"
    )
}

/// What a repeat-limited line says of the occurrences it stands for
/// ([`CoreTelemetry::log_limited`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repeats {
    /// Occurrences not logged: since the key's last line (for a line), or in the interval after
    /// it (for a tail).
    pub suppressed: u64,
    /// The largest magnitude among them (0 when none had one).
    pub largest: u64,
    /// `server.log-repeat-interval`.
    pub interval: Duration,
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::{CoreTelemetry, Repeats};
    use crate::metrics::Metrics;

    #[test]
    fn a_logged_line_hears_of_what_its_interval_suppressed() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let interval = Duration::from_millis(50);
                let telemetry = Rc::new(CoreTelemetry::new(0, Arc::new(Metrics::new(1)), interval, 16));
                assert_eq!(telemetry.repeat_interval(), interval);
                let lines: Rc<RefCell<Vec<Repeats>>> = Rc::default();
                let tails: Rc<RefCell<Vec<(String, Repeats, Instant)>>> = Rc::default();
                let occur = |value: u64| {
                    let (lines, tails) = (lines.clone(), tails.clone());
                    telemetry.log_limited(
                        "fluss.t",
                        "disk-paced",
                        value,
                        move |r| lines.borrow_mut().push(r),
                        move |key, r| tails.borrow_mut().push((key.to_string(), r, Instant::now())),
                    );
                };
                let started = Instant::now();
                for value in [12, 261, 30] {
                    occur(value);
                }
                // Another key of the same table is limited on its own, and with nothing
                // suppressed it has no tail.
                telemetry.log_limited(
                    "fluss.t",
                    "storage",
                    0,
                    |r| assert_eq!(r.suppressed, 0),
                    |key, r| panic!("{key} suppressed nothing, so has no tail: {r:?}"),
                );
                let first = Repeats {
                    suppressed: 0,
                    largest: 0,
                    interval,
                };
                assert_eq!(*lines.borrow(), [first], "one line for three");
                assert!(tails.borrow().is_empty(), "no tail before the interval");
                glommio::timer::sleep(interval * 3).await;
                let tails = tails.borrow().clone();
                assert_eq!(tails.len(), 1, "{tails:?}");
                let (key, tail, at) = tails[0].clone();
                assert_eq!(key, "fluss.t");
                assert_eq!(
                    tail,
                    Repeats {
                        suppressed: 2,
                        largest: 261,
                        interval
                    }
                );
                assert!(
                    at.duration_since(started) >= interval,
                    "the tail waits an interval"
                );
                // Its interval has passed: the next occurrence is logged, counting from none
                // (the tail took what was suppressed).
                occur(7);
                assert_eq!(lines.borrow().len(), 2);
                assert_eq!(lines.borrow()[1], first);
            })
            .expect("executor")
            .join()
            .expect("test task");
    }

    #[test]
    fn waiting_tails_are_logged_at_once_when_flushed() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let interval = Duration::from_secs(3600);
                let telemetry = Rc::new(CoreTelemetry::new(0, Arc::new(Metrics::new(1)), interval, 16));
                let tails: Rc<RefCell<Vec<(String, Repeats)>>> = Rc::default();
                for (key, value) in [("fluss.t", 12), ("fluss.t", 261), ("fluss.t", 30), ("fluss.u", 1)] {
                    let tails = tails.clone();
                    telemetry.log_limited(
                        key,
                        "disk-paced",
                        value,
                        |_| {},
                        move |key, r| tails.borrow_mut().push((key.to_string(), r)),
                    );
                }
                let flushed = futures_lite::future::or(
                    async {
                        telemetry.flush_tails().await;
                        true
                    },
                    async {
                        glommio::timer::sleep(Duration::from_secs(10)).await;
                        false
                    },
                )
                .await;
                assert!(flushed, "the tails wait for their interval");
                let expected = Repeats {
                    suppressed: 2,
                    largest: 261,
                    interval,
                };
                // fluss.u suppressed nothing: no tail.
                assert_eq!(*tails.borrow(), [("fluss.t".to_string(), expected)]);
            })
            .expect("executor")
            .join()
            .expect("test task");
    }

    /// A `tracing` writer into a shared buffer (what the overflow's tail logs).
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Ten new keys against `server.log-repeat-keys=2`: two lines of their own, one let through
    /// by the overflow entry, and the 7 it left out are counted in the overflow's own tail (here
    /// at the flush), not in any key's (before: counted nowhere).
    #[test]
    fn the_keys_sharing_the_overflow_entry_are_counted_in_its_tail() {
        let captured = Captured::default();
        let writer = captured.clone();
        glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                let subscriber = tracing_subscriber::fmt()
                    .with_ansi(false)
                    .with_writer(move || writer.clone())
                    .finish();
                let _logging = tracing::subscriber::set_default(subscriber);
                let interval = Duration::from_secs(3600);
                let telemetry = Rc::new(CoreTelemetry::new(0, Arc::new(Metrics::new(1)), interval, 2));
                let lines: Rc<RefCell<Vec<(String, Repeats)>>> = Rc::default();
                let tails: Rc<RefCell<Vec<(String, Repeats)>>> = Rc::default();
                for i in 0..10 {
                    let (lines, tails) = (lines.clone(), tails.clone());
                    let key = format!("fluss.t{i}");
                    telemetry.log_limited(
                        &key.clone(),
                        "INVALID_RECORD",
                        0,
                        move |r| lines.borrow_mut().push((key, r)),
                        move |key, r| tails.borrow_mut().push((key.to_string(), r)),
                    );
                }
                let logged: Vec<String> = lines.borrow().iter().map(|(key, _)| key.clone()).collect();
                assert_eq!(logged, ["fluss.t0", "fluss.t1", "fluss.t2"]);
                telemetry.flush_tails().await;
                assert!(
                    tails.borrow().is_empty(),
                    "no key's own tail: {:?}",
                    tails.borrow()
                );
            })
            .expect("executor")
            .join()
            .expect("test task");
        let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        let tail: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("repeat-limited log lines"))
            .collect();
        assert_eq!(tail.len(), 1, "{log}");
        assert!(
            tail[0].contains(
                "7 more left out in the 3600s after the last such line, of keys that found all server.log-repeat-keys (2) in use"
            ) && tail[0].contains("WARN") && tail[0].contains("suppressed=7"),
            "{log}"
        );
    }
}
