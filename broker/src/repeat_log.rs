//! Rate limit for log lines that a client (or a failing disk) can repeat at will: refused
//! produce partitions and storage errors.
//!
//! One [`RepeatLimiter`] per core (no lock). Per key — `(table or topic, reason)` — the first
//! occurrence is logged; after that at most one line per `server.log-repeat-interval`, and
//! the occurrences in between are only counted: the next line that is logged says how many
//! were suppressed. A quiet key logs nothing more (no timer), so the count of a burst's tail
//! shows up with the key's next line.
//!
//! The map holds at most `server.log-repeat-keys` keys. When it is full, keys whose interval
//! has passed (and that have nothing suppressed) are dropped; if it is still full, a new key
//! shares one overflow entry, so a client sending to ever new topic names is limited too.

use std::collections::HashMap;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
struct Entry {
    last_logged: Instant,
    suppressed: u64,
}

/// What the caller should do with one occurrence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Log it; `suppressed` similar occurrences were not logged since the key's last line.
    Log { suppressed: u64 },
    /// Do not log it (counted).
    Suppress,
}

#[derive(Debug)]
pub struct RepeatLimiter {
    interval: Duration,
    max_keys: usize,
    /// reason → table → entry (two levels so a lookup needs no allocation).
    entries: HashMap<&'static str, HashMap<String, Entry>>,
    keys: usize,
    /// Shared by every new key while `entries` is full.
    overflow: Option<Entry>,
}

impl RepeatLimiter {
    pub fn new(interval: Duration, max_keys: usize) -> Self {
        Self {
            interval,
            max_keys: max_keys.max(1),
            entries: HashMap::new(),
            keys: 0,
            overflow: None,
        }
    }

    /// Keys remembered (bounded by `max_keys`).
    pub fn len(&self) -> usize {
        self.keys
    }

    pub fn is_empty(&self) -> bool {
        self.keys == 0
    }

    /// Decides about one occurrence of `key` = `(table or topic, reason)` at `now`; the reason
    /// is a Kafka error code name or a storage step.
    pub fn check(&mut self, key: (&str, &'static str), now: Instant) -> Verdict {
        let interval = self.interval;
        let (table, reason) = key;
        if let Some(entry) = self.entries.get_mut(reason).and_then(|t| t.get_mut(table)) {
            return Self::decide(entry, interval, now);
        }
        if self.keys >= self.max_keys {
            let mut keys = 0;
            self.entries.retain(|_, tables| {
                tables.retain(|_, e| {
                    e.suppressed > 0 || now.saturating_duration_since(e.last_logged) < interval
                });
                keys += tables.len();
                !tables.is_empty()
            });
            self.keys = keys;
        }
        if self.keys >= self.max_keys {
            return match self.overflow.as_mut() {
                Some(entry) => Self::decide(entry, interval, now),
                None => {
                    self.overflow = Some(Entry {
                        last_logged: now,
                        suppressed: 0,
                    });
                    Verdict::Log { suppressed: 0 }
                }
            };
        }
        self.entries.entry(reason).or_default().insert(
            table.to_string(),
            Entry {
                last_logged: now,
                suppressed: 0,
            },
        );
        self.keys += 1;
        Verdict::Log { suppressed: 0 }
    }

    fn decide(entry: &mut Entry, interval: Duration, now: Instant) -> Verdict {
        if now.saturating_duration_since(entry.last_logged) >= interval {
            let suppressed = entry.suppressed;
            *entry = Entry {
                last_logged: now,
                suppressed: 0,
            };
            Verdict::Log { suppressed }
        } else {
            entry.suppressed += 1;
            Verdict::Suppress
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_occurrence_logs_then_one_line_per_interval_with_the_count() {
        let start = Instant::now();
        let mut limiter = RepeatLimiter::new(Duration::from_secs(10), 16);
        let key = ("fluss.t", "INVALID_RECORD");
        assert_eq!(limiter.check(key, start), Verdict::Log { suppressed: 0 });
        for i in 1..=5 {
            assert_eq!(
                limiter.check(key, start + Duration::from_secs(i)),
                Verdict::Suppress
            );
        }
        // Another reason of the same table is its own key.
        assert_eq!(
            limiter.check(("fluss.t", "CORRUPT_MESSAGE"), start),
            Verdict::Log { suppressed: 0 }
        );
        assert_eq!(
            limiter.check(key, start + Duration::from_secs(10)),
            Verdict::Log { suppressed: 5 }
        );
        assert_eq!(
            limiter.check(key, start + Duration::from_secs(11)),
            Verdict::Suppress
        );
    }

    #[test]
    fn the_key_map_is_bounded_and_new_keys_share_an_overflow_entry() {
        let start = Instant::now();
        let mut limiter = RepeatLimiter::new(Duration::from_secs(10), 4);
        let names: Vec<String> = (0..1000).map(|i| format!("topic-{i}")).collect();
        let mut logged = 0;
        for name in &names {
            if let Verdict::Log { .. } = limiter.check((name, "UNKNOWN_TOPIC_OR_PARTITION"), start) {
                logged += 1;
            }
        }
        assert_eq!(limiter.len(), 4);
        assert_eq!(logged, 5, "four keys and one overflow line");
        // Once the interval passed, quiet keys make room again.
        let later = start + Duration::from_secs(11);
        assert_eq!(
            limiter.check(("fresh", "INVALID_RECORD"), later),
            Verdict::Log { suppressed: 0 }
        );
        assert!(limiter.len() <= 4);
    }
}
