//! Rate limit for log lines that a client (or a failing disk) can repeat at will: refused
//! produce partitions, storage errors, acks=1 answers paced by the disk and refused
//! InitProducerId requests.
//!
//! One [`RepeatLimiter`] per core (no lock). Per key — `(table or topic, reason)` — the first
//! occurrence is logged; after that at most one line per `server.log-repeat-interval`, and
//! the occurrences in between are only counted: the next line that is logged says how many
//! were suppressed. The limiter keeps no timer; its caller, `CoreTelemetry::log_limited`, asks
//! once, an interval after each line (or at shutdown, if that comes first), for what was
//! suppressed since ([`RepeatLimiter::take_suppressed`]) and logs that as the burst's tail, so
//! a key that falls quiet is still counted in full. The overflow entry (below) has its tail
//! too: [`RepeatLimiter::check_with`] says which entry decided ([`Slot`]), and the caller asks
//! that entry.
//!
//! An occurrence may carry a magnitude (how long an answer waited): an entry keeps the largest
//! among its suppressed occurrences, and the next line of the key reports it with the count
//! ([`RepeatLimiter::check_with`]), so the worst of a burst is not lost with the rest.
//!
//! The map holds at most `server.log-repeat-keys` keys. When it is full, keys whose interval
//! has passed (and that have nothing suppressed) are dropped; if it is still full, a new key
//! shares one overflow entry with every other key that finds the map full: one line per interval
//! for all of them together, its `suppressed` counting what all of them left out.

use std::collections::HashMap;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
struct Entry {
    last_logged: Instant,
    suppressed: u64,
    /// The largest magnitude among the suppressed occurrences (0 when none had one).
    largest_suppressed: u64,
}

impl Entry {
    fn new(now: Instant) -> Self {
        Self {
            last_logged: now,
            suppressed: 0,
            largest_suppressed: 0,
        }
    }
}

/// What the caller should do with one occurrence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Log it; `suppressed` similar occurrences were not logged since the key's last line.
    Log { suppressed: u64 },
    /// Do not log it (counted).
    Suppress,
}

/// The entry that decided an occurrence, and that its tail is taken from
/// ([`RepeatLimiter::take_suppressed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// The key's own entry.
    Key,
    /// The overflow entry, shared by the keys that found the map full.
    Overflow,
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

    /// The shortest time between two lines of a key.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// `server.log-repeat-keys`: the most keys remembered.
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// Keys remembered (bounded by `max_keys`).
    pub fn len(&self) -> usize {
        self.keys
    }

    pub fn is_empty(&self) -> bool {
        self.keys == 0
    }

    /// Decides about one occurrence of `key` = `(table or topic, reason)` at `now`; the reason
    /// is a Kafka error code name or a storage step. (The server calls
    /// [`RepeatLimiter::check_with`]; this is its form without a magnitude, for the tests.)
    #[cfg(test)]
    pub fn check(&mut self, key: (&str, &'static str), now: Instant) -> Verdict {
        self.check_with(key, now, 0).0
    }

    /// Decides about one occurrence of `key` at `now`, of magnitude `value`; with a `Log`
    /// verdict, also the largest magnitude among the occurrences it reports as suppressed (0 if
    /// none). The [`Slot`] says which entry decided: the key's own, or the overflow entry (when
    /// the map is full and the key is not in it).
    pub fn check_with(
        &mut self,
        key: (&str, &'static str),
        now: Instant,
        value: u64,
    ) -> (Verdict, u64, Slot) {
        let interval = self.interval;
        let (table, reason) = key;
        if let Some(entry) = self.entries.get_mut(reason).and_then(|t| t.get_mut(table)) {
            let (verdict, largest) = Self::decide(entry, interval, now, value);
            return (verdict, largest, Slot::Key);
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
            let (verdict, largest) = match self.overflow.as_mut() {
                Some(entry) => Self::decide(entry, interval, now, value),
                None => {
                    self.overflow = Some(Entry::new(now));
                    (Verdict::Log { suppressed: 0 }, 0)
                }
            };
            return (verdict, largest, Slot::Overflow);
        }
        self.entries
            .entry(reason)
            .or_default()
            .insert(table.to_string(), Entry::new(now));
        self.keys += 1;
        (Verdict::Log { suppressed: 0 }, 0, Slot::Key)
    }

    /// The occurrences suppressed since the last line of `key` (with [`Slot::Key`]) or of the
    /// overflow entry (with [`Slot::Overflow`]; `key` is then not looked at), and the largest
    /// magnitude among them, counted as reported (the next line starts from none); `None` when
    /// there are none. The entry's interval is left as it is, so its next occurrence is decided
    /// as before.
    pub fn take_suppressed(&mut self, key: (&str, &'static str), slot: Slot) -> Option<(u64, u64)> {
        let (table, reason) = key;
        let entry = match slot {
            Slot::Key => self.entries.get_mut(reason)?.get_mut(table)?,
            Slot::Overflow => self.overflow.as_mut()?,
        };
        if entry.suppressed == 0 {
            return None;
        }
        let taken = (entry.suppressed, entry.largest_suppressed);
        entry.suppressed = 0;
        entry.largest_suppressed = 0;
        Some(taken)
    }

    fn decide(entry: &mut Entry, interval: Duration, now: Instant, value: u64) -> (Verdict, u64) {
        if now.saturating_duration_since(entry.last_logged) >= interval {
            let (suppressed, largest) = (entry.suppressed, entry.largest_suppressed);
            *entry = Entry::new(now);
            (Verdict::Log { suppressed }, largest)
        } else {
            entry.suppressed += 1;
            entry.largest_suppressed = entry.largest_suppressed.max(value);
            (Verdict::Suppress, 0)
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
    fn a_line_reports_the_largest_of_the_occurrences_it_left_out() {
        let start = Instant::now();
        let mut limiter = RepeatLimiter::new(Duration::from_secs(10), 16);
        let key = ("fluss.t", "disk-paced");
        let at = |s: u64| start + Duration::from_secs(s);
        assert_eq!(
            limiter.check_with(key, at(0), 500),
            (Verdict::Log { suppressed: 0 }, 0, Slot::Key)
        );
        for (s, value) in [(1, 30), (2, 261), (3, 12)] {
            assert_eq!(
                limiter.check_with(key, at(s), value),
                (Verdict::Suppress, 0, Slot::Key)
            );
        }
        // The logged occurrence's own value is the caller's; the largest left out is 261.
        assert_eq!(
            limiter.check_with(key, at(10), 40),
            (Verdict::Log { suppressed: 3 }, 261, Slot::Key)
        );
        // A new interval starts from nothing.
        assert_eq!(
            limiter.check_with(key, at(11), 7),
            (Verdict::Suppress, 0, Slot::Key)
        );
        assert_eq!(
            limiter.check_with(key, at(20), 1),
            (Verdict::Log { suppressed: 1 }, 7, Slot::Key)
        );
    }

    #[test]
    fn the_suppressed_tail_is_taken_once_and_the_interval_stays() {
        let start = Instant::now();
        let mut limiter = RepeatLimiter::new(Duration::from_secs(10), 16);
        let key = ("fluss.t", "disk-paced");
        let at = |s: u64| start + Duration::from_secs(s);
        assert_eq!(limiter.take_suppressed(key, Slot::Key), None, "unknown key");
        assert_eq!(
            limiter.check_with(key, at(0), 5).0,
            Verdict::Log { suppressed: 0 }
        );
        assert_eq!(
            limiter.take_suppressed(key, Slot::Key),
            None,
            "nothing suppressed"
        );
        limiter.check_with(key, at(1), 261);
        limiter.check_with(key, at(2), 30);
        assert_eq!(limiter.take_suppressed(key, Slot::Key), Some((2, 261)));
        assert_eq!(limiter.take_suppressed(key, Slot::Key), None, "taken once");
        // Still inside the interval: suppressed, and counted from none.
        assert_eq!(
            limiter.check_with(key, at(3), 9),
            (Verdict::Suppress, 0, Slot::Key)
        );
        assert_eq!(
            limiter.check_with(key, at(10), 1),
            (Verdict::Log { suppressed: 1 }, 9, Slot::Key)
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

    /// The keys past the limit are counted on the overflow entry, and that entry's tail is taken
    /// like a key's: 1000 new topics at once against 4 keys are 4 lines, one overflow line and
    /// 995 counted in the overflow's tail (before: the overflow's count had no tail, so a burst
    /// that ended was never counted).
    #[test]
    fn the_overflow_entry_has_a_tail_of_its_own() {
        let start = Instant::now();
        let mut limiter = RepeatLimiter::new(Duration::from_secs(10), 4);
        let names: Vec<String> = (0..1000).map(|i| format!("topic-{i}")).collect();
        let (mut logged, mut overflow_lines) = (0, 0);
        for name in &names {
            let key = (name.as_str(), "UNKNOWN_TOPIC_OR_PARTITION");
            match limiter.check_with(key, start, 0) {
                (Verdict::Log { suppressed: 0 }, 0, Slot::Key) => logged += 1,
                (Verdict::Log { suppressed: 0 }, 0, Slot::Overflow) => overflow_lines += 1,
                (Verdict::Suppress, 0, Slot::Overflow) => {}
                other => panic!("{name}: {other:?}"),
            }
        }
        assert_eq!((logged, overflow_lines), (4, 1));
        // A key's own entry knows nothing of them; the overflow's tail counts them, once.
        assert_eq!(
            limiter.take_suppressed(("topic-999", "UNKNOWN_TOPIC_OR_PARTITION"), Slot::Key),
            None
        );
        assert_eq!(
            limiter.take_suppressed(("topic-999", "UNKNOWN_TOPIC_OR_PARTITION"), Slot::Overflow),
            Some((995, 0))
        );
        assert_eq!(
            limiter.take_suppressed(("", ""), Slot::Overflow),
            None,
            "taken once"
        );
        // Still inside the interval: suppressed, and counted from none.
        let at = |s: u64| start + Duration::from_secs(s);
        assert_eq!(
            limiter.check_with(("other", "INVALID_RECORD"), at(1), 0),
            (Verdict::Suppress, 0, Slot::Overflow)
        );
        assert_eq!(limiter.take_suppressed(("", ""), Slot::Overflow), Some((1, 0)));
    }
}
