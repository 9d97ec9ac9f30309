//! The idempotent-producer state of one bucket, on its owner core: for every producer id its
//! epoch and the last [`BATCHES_TO_RETAIN`] batches' sequence ranges and offsets (Kafka's
//! `ProducerStateEntry`). [`ProducerStates::check`] decides, before anything is appended,
//! whether a job's batches are new, a duplicate of a cached batch, or refused
//! (`ProducerAppendInfo.checkSequence`); [`ProducerStates::record`] updates the state once the
//! rows are in the log. Nothing changes for a job that is refused or fails to convert.
//!
//! Rules, as Kafka's broker (3.x/4.x) applies them to client appends:
//! - a batch whose epoch and exact (first, last) sequence match a cached batch is a duplicate:
//!   not appended again, answered with the cached batch's base offset and no error;
//! - an epoch older than the producer's current one: [`SequenceError::StaleEpoch`];
//! - a newer epoch must start at sequence 0 ([`SequenceError::NewEpochNotAtZero`]) and clears
//!   the cached batches;
//! - the same epoch must continue at last sequence + 1 (0 after `i32::MAX`), else
//!   [`SequenceError::OutOfOrder`];
//! - an unknown producer (never seen, expired or evicted) is accepted at any sequence: Kafka
//!   ≥ 2.5 no longer answers UNKNOWN_PRODUCER_ID for it either (KIP-360).
//!
//! Memory is bounded: an entry expires `kafka.producer.id.expiration` after its last append
//! (checked lazily, when the producer is looked up or a new one must make room), and at most
//! `kafka.producer.max-per-bucket` producers are kept; a new one evicts the expired ones, then
//! the one idle longest. There is no timer.
//!
//! Durability: each stored batch carries a tag ([`encode_tag`], custom metadata key
//! [`PRODUCERS_KEY`] of its Arrow IPC message) with the append time and, per Kafka batch of
//! the job, (producer id, epoch, first seq, last seq, rows). Recovery hands every tag to
//! [`ProducerStates::restore`], which replays the ones younger than the expiration.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

/// Batches remembered per producer (Kafka's `NUM_BATCHES_TO_RETAIN`; clients keep at most 5
/// requests in flight per connection when idempotent).
pub const BATCHES_TO_RETAIN: usize = 5;

/// The custom-metadata key of a stored batch's producer tag.
pub const PRODUCERS_KEY: &str = "kafluss.producers";

/// `kafka.producer.id.expiration` default: 1 day, as Kafka's `producer.id.expiration.ms`.
pub const DEFAULT_EXPIRATION: Duration = Duration::from_secs(24 * 3600);

/// `kafka.producer.max-per-bucket` default.
pub const DEFAULT_MAX_PER_BUCKET: usize = 1000;

/// The epoch of a producer with no state.
const NO_EPOCH: i16 = -1;

/// `sequence + by`, wrapping from `i32::MAX` to 0 (Kafka's `DefaultRecordBatch.incrementSequence`).
pub fn increment_sequence(sequence: i32, by: i32) -> i32 {
    if sequence > i32::MAX - by {
        by - (i32::MAX - sequence) - 1
    } else {
        sequence + by
    }
}

/// Batches of one check looked up pairwise; more are indexed by producer id.
const PAIRWISE_PENDING: usize = 16;

/// The producer fields of one Kafka record batch with a producer id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProducerBatch {
    pub producer_id: i64,
    pub epoch: i16,
    pub first_seq: i32,
    pub last_seq: i32,
    /// The batch came to its table through the topic name without a database (`orders` for
    /// `fluss.orders` in the default database). A client numbers its sequences per topic
    /// partition, and to it `orders` and `fluss.orders` are two topics: each name is a sequence
    /// of its own ([`ProducerKey`]).
    pub bare_topic: bool,
}

/// Whose sequence a batch continues: a producer id through one of its table's two names.
pub type ProducerKey = (i64, bool);

impl ProducerBatch {
    /// From the wire fields; `last_offset_delta` is the batch's record count - 1.
    pub fn new(producer_id: i64, epoch: i16, base_sequence: i32, last_offset_delta: i32) -> Self {
        let last_seq = if base_sequence < 0 || last_offset_delta < 0 {
            base_sequence
        } else {
            increment_sequence(base_sequence, last_offset_delta)
        };
        Self {
            producer_id,
            epoch,
            first_seq: base_sequence,
            last_seq,
            bare_topic: false,
        }
    }

    /// Its sequence's key: the producer id and the form of the topic name it came through.
    pub fn key(&self) -> ProducerKey {
        (self.producer_id, self.bare_topic)
    }
}

/// A stored batch of a producer: its sequence range and the offsets its rows got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMeta {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: u64,
    pub last_offset: u64,
}

#[derive(Debug, Clone)]
struct Entry {
    epoch: i16,
    /// Oldest first, at most [`BATCHES_TO_RETAIN`].
    batches: VecDeque<BatchMeta>,
    /// Wall-clock milliseconds of the producer's last append to this bucket.
    last_append_ms: i64,
}

/// What to do with a job whose batches passed [`ProducerStates::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// New batches: append them, then [`ProducerStates::record`].
    Append,
    /// A retry of this stored batch: answer with its base offset, append nothing.
    Duplicate(BatchMeta),
}

/// Why an idempotent batch is refused (the Kafka code is chosen in `kafka::errors`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SequenceError {
    #[error("producer {producer_id}: epoch {epoch} is older than the current epoch {current}")]
    StaleEpoch {
        producer_id: i64,
        epoch: i16,
        current: i16,
    },
    #[error("producer {producer_id}: out of order sequence number {first_seq} (epoch {epoch}); the next expected is {expected}")]
    OutOfOrder {
        producer_id: i64,
        epoch: i16,
        first_seq: i32,
        expected: i32,
    },
    #[error("producer {producer_id}: the new epoch {epoch} (current {current}) must start at sequence 0, not {first_seq}")]
    NewEpochNotAtZero {
        producer_id: i64,
        epoch: i16,
        current: i16,
        first_seq: i32,
    },
    #[error("producer {producer_id}: invalid epoch {epoch} or base sequence {first_seq}")]
    Invalid {
        producer_id: i64,
        epoch: i16,
        first_seq: i32,
    },
}

/// The limits of [`ProducerStates`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerLimits {
    /// `kafka.producer.id.expiration`.
    pub expiration: Duration,
    /// `kafka.producer.max-per-bucket`.
    pub max_producers: usize,
}

impl Default for ProducerLimits {
    fn default() -> Self {
        Self {
            expiration: DEFAULT_EXPIRATION,
            max_producers: DEFAULT_MAX_PER_BUCKET,
        }
    }
}

/// The producer state of one bucket.
#[derive(Debug)]
pub struct ProducerStates {
    entries: HashMap<ProducerKey, Entry>,
    limits: ProducerLimits,
}

impl ProducerStates {
    pub fn new(limits: ProducerLimits) -> Self {
        Self {
            entries: HashMap::new(),
            limits,
        }
    }

    /// Producers with state (expired ones not yet dropped included).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn expired(&self, entry: &Entry, now_ms: i64) -> bool {
        let expiration = i64::try_from(self.limits.expiration.as_millis()).unwrap_or(i64::MAX);
        now_ms.saturating_sub(entry.last_append_ms) >= expiration
    }

    /// The state of `key` unless it expired.
    fn live(&self, key: ProducerKey, now_ms: i64) -> Option<&Entry> {
        self.entries
            .get(&key)
            .filter(|entry| !self.expired(entry, now_ms))
    }

    /// The epoch and cached batches of `producer_id` through its table's full name (tests and
    /// diagnostics).
    pub fn batches(&self, producer_id: i64, now_ms: i64) -> Option<(i16, Vec<BatchMeta>)> {
        self.live((producer_id, false), now_ms)
            .map(|entry| (entry.epoch, entry.batches.iter().copied().collect()))
    }

    /// Checks a job's idempotent batches, in order, against the state; changes nothing. The
    /// first batch that duplicates a cached one makes the whole job a duplicate (a job from a
    /// Produce request carries one batch: the Kafka layer refuses more, as Kafka does).
    pub fn check(&self, batches: &[ProducerBatch], now_ms: i64) -> Result<Verdict, SequenceError> {
        // (producer id, epoch, last seq) of the job's earlier batches; past
        // `PAIRWISE_PENDING` of them, the index of each producer's latest in a map, so a job
        // of many batches is checked in linear time.
        let mut pending: Vec<(ProducerKey, i16, i32)> = Vec::new();
        let mut latest: HashMap<ProducerKey, usize> = HashMap::new();
        for batch in batches {
            if batch.epoch < 0 || batch.first_seq < 0 {
                return Err(SequenceError::Invalid {
                    producer_id: batch.producer_id,
                    epoch: batch.epoch,
                    first_seq: batch.first_seq,
                });
            }
            let entry = self.live(batch.key(), now_ms);
            if let Some(entry) = entry.filter(|entry| entry.epoch == batch.epoch) {
                let duplicate = entry
                    .batches
                    .iter()
                    .find(|m| m.first_seq == batch.first_seq && m.last_seq == batch.last_seq);
                if let Some(meta) = duplicate {
                    return Ok(Verdict::Duplicate(*meta));
                }
            }
            let stored_epoch = entry.map_or(NO_EPOCH, |entry| entry.epoch);
            let earlier = if pending.len() <= PAIRWISE_PENDING {
                pending.iter().rev().find(|p| p.0 == batch.key())
            } else {
                latest.get(&batch.key()).map(|&i| &pending[i])
            };
            let (epoch, last_seq) = match earlier {
                Some(&(_, epoch, last_seq)) => (epoch, Some(last_seq)),
                None => (
                    stored_epoch,
                    entry.and_then(|entry| entry.batches.back()).map(|m| m.last_seq),
                ),
            };
            if batch.epoch < epoch {
                return Err(SequenceError::StaleEpoch {
                    producer_id: batch.producer_id,
                    epoch: batch.epoch,
                    current: epoch,
                });
            }
            if batch.epoch != epoch {
                if batch.first_seq != 0 && epoch != NO_EPOCH {
                    return Err(SequenceError::NewEpochNotAtZero {
                        producer_id: batch.producer_id,
                        epoch: batch.epoch,
                        current: epoch,
                        first_seq: batch.first_seq,
                    });
                }
            } else if stored_epoch != NO_EPOCH || earlier.is_some() {
                // Without stored state (a producer new to this bucket) its first batch may
                // start at any sequence; every later one, stored or still in this job,
                // continues the one before.
                let expected = last_seq.map_or(0, |last| increment_sequence(last, 1));
                if batch.first_seq != expected {
                    return Err(SequenceError::OutOfOrder {
                        producer_id: batch.producer_id,
                        epoch: batch.epoch,
                        first_seq: batch.first_seq,
                        expected,
                    });
                }
            }
            pending.push((batch.key(), batch.epoch, batch.last_seq));
            if pending.len() > PAIRWISE_PENDING {
                if latest.is_empty() {
                    // Later entries overwrite earlier ones: each id maps to its latest batch.
                    latest.extend(pending.iter().enumerate().map(|(i, p)| (p.0, i)));
                } else {
                    latest.insert(batch.key(), pending.len() - 1);
                }
            }
        }
        Ok(Verdict::Append)
    }

    /// Remembers appended batches: each with the offsets of its first and last row.
    pub fn record(&mut self, batches: &[(ProducerBatch, u64, u64)], now_ms: i64) {
        for &(batch, first_offset, last_offset) in batches {
            let fresh = self.live(batch.key(), now_ms).is_none();
            if fresh {
                self.entries.remove(&batch.key());
                self.make_room(now_ms);
            }
            let entry = self.entries.entry(batch.key()).or_insert_with(|| Entry {
                epoch: batch.epoch,
                batches: VecDeque::with_capacity(BATCHES_TO_RETAIN),
                last_append_ms: now_ms,
            });
            if entry.epoch != batch.epoch {
                entry.batches.clear();
                entry.epoch = batch.epoch;
            }
            if entry.batches.len() == BATCHES_TO_RETAIN {
                entry.batches.pop_front();
            }
            entry.batches.push_back(BatchMeta {
                first_seq: batch.first_seq,
                last_seq: batch.last_seq,
                first_offset,
                last_offset,
            });
            entry.last_append_ms = entry.last_append_ms.max(now_ms);
        }
    }

    /// Before a new producer is added: drop the expired ones, then, while still full, the one
    /// whose last append is oldest. O(producers), only when a new producer arrives at a full
    /// table.
    fn make_room(&mut self, now_ms: i64) {
        if self.entries.len() < self.limits.max_producers {
            return;
        }
        let expiration = i64::try_from(self.limits.expiration.as_millis()).unwrap_or(i64::MAX);
        self.entries
            .retain(|_, entry| now_ms.saturating_sub(entry.last_append_ms) < expiration);
        while self.entries.len() >= self.limits.max_producers.max(1) {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(id, entry)| (entry.last_append_ms, **id))
                .map(|(id, _)| *id);
            match oldest {
                Some(id) => {
                    self.entries.remove(&id);
                }
                None => break,
            }
        }
    }

    /// Replays one stored batch's tag (recovery, in log order): `base_offset` is the offset of
    /// its first row. Tags older than the expiration (against `now_ms`) are skipped.
    pub fn restore(&mut self, base_offset: u64, tag: &StoredTag, now_ms: i64) {
        let expiration = i64::try_from(self.limits.expiration.as_millis()).unwrap_or(i64::MAX);
        if now_ms.saturating_sub(tag.append_ms) >= expiration {
            return;
        }
        let mut offset = base_offset;
        let mut appended = Vec::with_capacity(tag.batches.len());
        for &(batch, rows) in &tag.batches {
            if rows == 0 {
                continue;
            }
            let last = offset.saturating_add(rows - 1);
            if let Some(batch) = batch {
                appended.push((batch, offset, last));
                if tag.before_names {
                    // Written before the names were told apart: the batch may have come
                    // through either, so a retry through either is recognised.
                    let bare = ProducerBatch {
                        bare_topic: true,
                        ..batch
                    };
                    appended.push((bare, offset, last));
                }
            }
            offset = last.saturating_add(1);
        }
        self.record(&appended, tag.append_ms);
    }
}

/// A stored batch's producer tag: when it was appended and, per Kafka batch of the job in
/// order, its producer fields (None for a batch without a producer id) and row count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredTag {
    pub append_ms: i64,
    pub batches: Vec<(Option<ProducerBatch>, u64)>,
    /// Written before a batch's tag said which of its table's names it came through (no
    /// `,f`/`,b`): recovery takes it as either's.
    pub before_names: bool,
}

/// A tag that does not parse (recovery logs it and ignores the tag).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unreadable producer tag {0:?}")]
pub struct TagError(pub String);

/// `<append ms>;<producer id>,<epoch>,<first seq>,<last seq>,<rows>,<f|b>;…`, one group per
/// Kafka batch (`-1,-1,-1,-1,<rows>` for a batch without a producer id); `b` for a batch that
/// came through its table's name without a database ([`ProducerBatch::bare_topic`]), `f`
/// through the full name. Tags written before had no `f`/`b` ([`StoredTag::before_names`]).
pub fn encode_tag(tag: &StoredTag) -> String {
    use std::fmt::Write;
    let mut out = tag.append_ms.to_string();
    for (batch, rows) in &tag.batches {
        let _ = match batch {
            None => write!(out, ";-1,-1,-1,-1,{rows}"),
            Some(b) => write!(
                out,
                ";{},{},{},{},{rows},{}",
                b.producer_id,
                b.epoch,
                b.first_seq,
                b.last_seq,
                if b.bare_topic { 'b' } else { 'f' }
            ),
        };
    }
    out
}

/// The inverse of [`encode_tag`].
pub fn decode_tag(text: &str) -> Result<StoredTag, TagError> {
    let bad = || TagError(text.chars().take(64).collect());
    let mut parts = text.split(';');
    let append_ms = parts.next().and_then(|t| t.parse().ok()).ok_or_else(bad)?;
    let mut batches = Vec::new();
    let mut before_names = false;
    for part in parts {
        let fields: Vec<&str> = part.split(',').collect();
        let (pid, epoch, first, last, rows, bare_topic) = match fields[..] {
            [pid, epoch, first, last, rows] => {
                before_names |= !pid.starts_with('-');
                (pid, epoch, first, last, rows, false)
            }
            [pid, epoch, first, last, rows, "f"] => (pid, epoch, first, last, rows, false),
            [pid, epoch, first, last, rows, "b"] => (pid, epoch, first, last, rows, true),
            _ => return Err(bad()),
        };
        let producer_id: i64 = pid.parse().map_err(|_| bad())?;
        let epoch: i16 = epoch.parse().map_err(|_| bad())?;
        let first_seq: i32 = first.parse().map_err(|_| bad())?;
        let last_seq: i32 = last.parse().map_err(|_| bad())?;
        let rows: u64 = rows.parse().map_err(|_| bad())?;
        let batch = (producer_id >= 0).then_some(ProducerBatch {
            producer_id,
            epoch,
            first_seq,
            last_seq,
            bare_topic,
        });
        batches.push((batch, rows));
    }
    Ok(StoredTag {
        append_ms,
        batches,
        before_names,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PID: i64 = 7;
    const NOW: i64 = 1_000_000;

    fn batch(epoch: i16, first_seq: i32, records: i32) -> ProducerBatch {
        ProducerBatch::new(PID, epoch, first_seq, records - 1)
    }

    fn states() -> ProducerStates {
        ProducerStates::new(ProducerLimits::default())
    }

    /// Appends batches of `records` rows each at contiguous offsets from `offset`.
    fn append(states: &mut ProducerStates, batches: &[ProducerBatch], offset: &mut u64, now: i64) {
        assert_eq!(states.check(batches, now), Ok(Verdict::Append), "{batches:?}");
        let mut recorded = Vec::new();
        for b in batches {
            let rows = (b.last_seq.wrapping_sub(b.first_seq) as u32 as u64) + 1;
            recorded.push((*b, *offset, *offset + rows - 1));
            *offset += rows;
        }
        states.record(&recorded, now);
    }

    #[test]
    fn sequences_wrap_like_kafka() {
        assert_eq!(increment_sequence(5, 1), 6);
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
        assert_eq!(ProducerBatch::new(1, 0, i32::MAX - 1, 2).last_seq, 0);
    }

    #[test]
    fn each_of_the_last_five_batches_is_a_duplicate_with_its_offsets() {
        let mut s = states();
        let mut offset = 100;
        for i in 0..7 {
            append(&mut s, &[batch(0, i * 2, 2)], &mut offset, NOW);
        }
        // Batches 2..=6 are cached (first seqs 4, 6, 8, 10, 12), at offsets 104.. two by two.
        for i in 2..7 {
            let verdict = s.check(&[batch(0, i * 2, 2)], NOW).unwrap();
            let first_offset = 100 + 2 * i as u64;
            assert_eq!(
                verdict,
                Verdict::Duplicate(BatchMeta {
                    first_seq: i * 2,
                    last_seq: i * 2 + 1,
                    first_offset,
                    last_offset: first_offset + 1,
                })
            );
        }
        // The sixth-newest is forgotten: an old sequence that is no duplicate is out of order.
        assert!(matches!(
            s.check(&[batch(0, 2, 2)], NOW),
            Err(SequenceError::OutOfOrder { expected: 14, .. })
        ));
        // Same start, different length: not a duplicate, out of order.
        assert!(matches!(
            s.check(&[batch(0, 12, 1)], NOW),
            Err(SequenceError::OutOfOrder { .. })
        ));
        assert_eq!(s.check(&[batch(0, 14, 3)], NOW), Ok(Verdict::Append));
    }

    #[test]
    fn gaps_and_old_epochs_are_refused_and_change_nothing() {
        let mut s = states();
        let mut offset = 0;
        append(&mut s, &[batch(3, 0, 5)], &mut offset, NOW);
        assert_eq!(
            s.check(&[batch(3, 6, 1)], NOW),
            Err(SequenceError::OutOfOrder {
                producer_id: PID,
                epoch: 3,
                first_seq: 6,
                expected: 5
            })
        );
        assert_eq!(
            s.check(&[batch(2, 5, 1)], NOW),
            Err(SequenceError::StaleEpoch {
                producer_id: PID,
                epoch: 2,
                current: 3
            })
        );
        // A duplicate under an older epoch is refused too, not answered as a duplicate.
        assert!(matches!(
            s.check(&[batch(2, 0, 5)], NOW),
            Err(SequenceError::StaleEpoch { .. })
        ));
        assert_eq!(s.batches(PID, NOW).unwrap().1.len(), 1);
        append(&mut s, &[batch(3, 5, 1)], &mut offset, NOW);
    }

    #[test]
    fn a_new_epoch_restarts_at_zero_and_forgets_the_old_batches() {
        let mut s = states();
        let mut offset = 0;
        append(&mut s, &[batch(0, 0, 3)], &mut offset, NOW);
        assert_eq!(
            s.check(&[batch(1, 3, 1)], NOW),
            Err(SequenceError::NewEpochNotAtZero {
                producer_id: PID,
                epoch: 1,
                current: 0,
                first_seq: 3
            })
        );
        append(&mut s, &[batch(1, 0, 2)], &mut offset, NOW);
        let (epoch, batches) = s.batches(PID, NOW).unwrap();
        assert_eq!((epoch, batches.len()), (1, 1));
        // The old epoch's batch is no duplicate any more: its epoch is stale.
        assert!(matches!(
            s.check(&[batch(0, 0, 3)], NOW),
            Err(SequenceError::StaleEpoch { .. })
        ));
    }

    #[test]
    fn unknown_producers_start_anywhere_as_kafka_accepts() {
        let s = states();
        assert_eq!(s.check(&[batch(4, 1234, 1)], NOW), Ok(Verdict::Append));
        assert!(matches!(
            s.check(&[batch(0, -1, 1)], NOW),
            Err(SequenceError::Invalid { .. })
        ));
        assert!(matches!(
            s.check(&[ProducerBatch::new(PID, -1, 0, 0)], NOW),
            Err(SequenceError::Invalid { .. })
        ));
    }

    #[test]
    fn the_sequence_continues_at_zero_after_i32_max() {
        let mut s = states();
        let mut offset = 0;
        append(&mut s, &[batch(0, i32::MAX - 1, 2)], &mut offset, NOW);
        assert!(matches!(
            s.check(&[batch(0, i32::MAX, 1)], NOW),
            Err(SequenceError::OutOfOrder { expected: 0, .. })
        ));
        append(&mut s, &[batch(0, 0, 1)], &mut offset, NOW);
        assert!(matches!(
            s.check(&[batch(0, i32::MAX - 1, 2)], NOW),
            Ok(Verdict::Duplicate(_))
        ));
        // A batch that itself wraps: MAX-1, MAX, 0.
        let mut s = states();
        append(&mut s, &[batch(0, 5, 1)], &mut offset, NOW);
        assert_eq!(s.check(&[batch(0, 6, 3)], NOW), Ok(Verdict::Append));
        let wrapping = ProducerBatch::new(PID, 1, 0, 0);
        append(&mut s, &[wrapping], &mut offset, NOW);
        let across = ProducerBatch::new(PID + 1, 0, i32::MAX - 1, 2);
        s.record(&[(across, 0, 2)], NOW);
        assert_eq!(across.last_seq, 0, "MAX-1, MAX, 0");
        assert_eq!(
            s.check(&[ProducerBatch::new(PID + 1, 0, 1, 0)], NOW),
            Ok(Verdict::Append)
        );
        assert!(matches!(
            s.check(&[ProducerBatch::new(PID + 1, 0, 2, 0)], NOW),
            Err(SequenceError::OutOfOrder { expected: 1, .. })
        ));
    }

    #[test]
    fn several_batches_of_one_job_are_checked_in_order() {
        let mut s = states();
        let mut offset = 0;
        append(&mut s, &[batch(0, 0, 2)], &mut offset, NOW);
        assert_eq!(
            s.check(&[batch(0, 2, 2), batch(0, 4, 1)], NOW),
            Ok(Verdict::Append)
        );
        assert!(matches!(
            s.check(&[batch(0, 2, 2), batch(0, 5, 1)], NOW),
            Err(SequenceError::OutOfOrder { expected: 4, .. })
        ));
        // A duplicate anywhere in the job makes it a duplicate.
        assert!(matches!(
            s.check(&[batch(0, 0, 2), batch(0, 2, 1)], NOW),
            Ok(Verdict::Duplicate(_))
        ));
    }

    /// A producer new to the bucket: its first batch may start anywhere, the next one in the
    /// same job must continue it (a gap or an overlap was taken, and an overlapping retry
    /// stored twice, when the continuity check waited for stored state).
    #[test]
    fn a_new_producers_later_batches_continue_its_first() {
        let s = states();
        assert_eq!(s.check(&[batch(0, 40, 2)], NOW), Ok(Verdict::Append));
        assert_eq!(
            s.check(&[batch(0, 0, 2), batch(0, 2, 1)], NOW),
            Ok(Verdict::Append)
        );
        assert!(matches!(
            s.check(&[batch(0, 0, 2), batch(0, 7, 1)], NOW),
            Err(SequenceError::OutOfOrder { expected: 2, .. })
        ));
        assert!(matches!(
            s.check(&[batch(0, 0, 2), batch(0, 0, 1)], NOW),
            Err(SequenceError::OutOfOrder { expected: 2, .. })
        ));
    }

    /// Past `PAIRWISE_PENDING` batches a job's earlier batches are found through a map: the
    /// same verdicts as pairwise, for 3 producers interleaved over 300 batches, with a gap,
    /// a stale epoch and a new epoch placed after the switch.
    #[test]
    fn a_job_of_many_batches_is_checked_as_a_few_are() {
        let mut s = states();
        let mut offset = 0;
        let of = |pid: i64, epoch: i16, first: i32| ProducerBatch::new(pid, epoch, first, 0);
        append(&mut s, &[of(1, 0, 0), of(2, 0, 0), of(3, 0, 0)], &mut offset, NOW);
        // Producer p's n-th batch of this job continues at sequence n + 1.
        let mut job: Vec<ProducerBatch> = (0..300).map(|i| of(1 + i % 3, 0, 1 + (i / 3) as i32)).collect();
        assert_eq!(s.check(&job, NOW), Ok(Verdict::Append));
        job[250] = of(job[250].producer_id, 0, job[250].first_seq + 1);
        assert!(
            matches!(s.check(&job, NOW), Err(SequenceError::OutOfOrder { expected, .. }) if expected == job[250].first_seq - 1),
            "{:?}",
            s.check(&job, NOW)
        );
        job[250] = of(job[250].producer_id, 0, job[250].first_seq - 1);
        job[200] = of(job[200].producer_id, 1, 0);
        job[203] = of(job[200].producer_id, 0, job[203].first_seq);
        assert!(
            matches!(
                s.check(&job, NOW),
                Err(SequenceError::StaleEpoch {
                    epoch: 0,
                    current: 1,
                    ..
                })
            ),
            "{:?}",
            s.check(&job, NOW)
        );
        // The new epoch's batches go on from 0.
        job[203] = of(job[200].producer_id, 1, 1);
        for k in (206..300).step_by(3) {
            job[k] = of(job[200].producer_id, 1, job[k - 3].first_seq + 1);
        }
        assert_eq!(s.check(&job, NOW), Ok(Verdict::Append));
    }

    #[test]
    fn state_expires_lazily() {
        let limits = ProducerLimits {
            expiration: Duration::from_secs(10),
            max_producers: 10,
        };
        let mut s = ProducerStates::new(limits);
        let mut offset = 0;
        append(&mut s, &[batch(0, 0, 1)], &mut offset, NOW);
        let later = NOW + 9_999;
        assert!(matches!(
            s.check(&[batch(0, 0, 1)], later),
            Ok(Verdict::Duplicate(_))
        ));
        let expired = NOW + 10_000;
        assert!(s.batches(PID, expired).is_none());
        // Expired: unknown again, so a retry is accepted (as Kafka after expiry) and the state
        // starts over.
        assert_eq!(s.check(&[batch(0, 0, 1)], expired), Ok(Verdict::Append));
        append(&mut s, &[batch(0, 0, 1)], &mut offset, expired);
        assert_eq!(s.batches(PID, expired).unwrap().1.len(), 1);
    }

    #[test]
    fn a_full_table_evicts_expired_then_the_longest_idle() {
        let limits = ProducerLimits {
            expiration: Duration::from_secs(100),
            max_producers: 3,
        };
        let mut s = ProducerStates::new(limits);
        let one = |pid: i64| ProducerBatch::new(pid, 0, 0, 0);
        s.record(&[(one(1), 0, 0)], NOW);
        s.record(&[(one(2), 1, 1)], NOW + 10);
        s.record(&[(one(3), 2, 2)], NOW + 20);
        // Producer 1 appends again: producer 2 is now the one idle longest.
        s.record(&[(ProducerBatch::new(1, 0, 1, 0), 3, 3)], NOW + 30);
        s.record(&[(one(4), 4, 4)], NOW + 40);
        assert_eq!(s.len(), 3);
        assert!(s.batches(2, NOW + 40).is_none());
        for pid in [1, 3, 4] {
            assert!(s.batches(pid, NOW + 40).is_some(), "{pid}");
        }
        // Later, 1, 3 and 4 have expired except 4: a new producer drops every expired one.
        let later = NOW + 40 + 100_000 - 5;
        s.record(&[(one(5), 5, 5)], later);
        assert_eq!(s.len(), 2);
        assert!(s.batches(4, later).is_some() && s.batches(5, later).is_some());
    }

    /// A producer writing one bucket through both names of its table (`orders` and
    /// `fluss.orders`) numbers each name's batches from 0, as a client does per topic: they are
    /// two sequences, and the first batch through the second name is new, not a duplicate of
    /// the first name's (which answered it with the other's offset and stored nothing). The
    /// tag keeps which name a batch came through, so the state after a restart does the same.
    #[test]
    fn each_name_of_a_table_is_a_sequence_of_its_own() {
        let mut s = states();
        let mut offset = 0;
        let bare = |first_seq, records| ProducerBatch {
            bare_topic: true,
            ..batch(0, first_seq, records)
        };
        append(&mut s, &[batch(0, 0, 2)], &mut offset, NOW);
        append(&mut s, &[bare(0, 2)], &mut offset, NOW);
        append(&mut s, &[batch(0, 2, 1)], &mut offset, NOW);
        append(&mut s, &[bare(2, 1)], &mut offset, NOW);
        assert_eq!(offset, 6);
        // Retries are recognised per name, with their own offsets.
        assert_eq!(
            s.check(&[bare(0, 2)], NOW),
            Ok(Verdict::Duplicate(BatchMeta {
                first_seq: 0,
                last_seq: 1,
                first_offset: 2,
                last_offset: 3
            }))
        );
        assert!(matches!(s.check(&[batch(0, 2, 1)], NOW), Ok(Verdict::Duplicate(m)) if m.first_offset == 4));
        assert!(matches!(
            s.check(&[bare(5, 1)], NOW),
            Err(SequenceError::OutOfOrder { expected: 3, .. })
        ));
        let tag = StoredTag {
            append_ms: NOW,
            batches: vec![(Some(batch(0, 0, 2)), 2), (Some(bare(0, 2)), 2)],
            before_names: false,
        };
        let text = encode_tag(&tag);
        assert_eq!(text, "1000000;7,0,0,1,2,f;7,0,0,1,2,b");
        assert_eq!(decode_tag(&text), Ok(tag.clone()));
        let mut restored = states();
        restored.restore(0, &tag, NOW);
        assert!(
            matches!(restored.check(&[bare(0, 2)], NOW), Ok(Verdict::Duplicate(m)) if m.first_offset == 2)
        );
        assert!(
            matches!(restored.check(&[batch(0, 0, 2)], NOW), Ok(Verdict::Duplicate(m)) if m.first_offset == 0)
        );
        // A tag written before the names were told apart (no f/b): its batches are taken as
        // either name's, so a producer that wrote through the bare name (most clients do) has
        // its retry recognised after the upgrade, not stored twice.
        let old = decode_tag("1000000;7,0,0,1,2").unwrap();
        assert!(old.before_names);
        let mut restored = states();
        restored.restore(10, &old, NOW);
        for batch in [batch(0, 0, 2), bare(0, 2)] {
            assert!(
                matches!(restored.check(&[batch], NOW), Ok(Verdict::Duplicate(m)) if m.first_offset == 10),
                "{batch:?}"
            );
        }
    }

    #[test]
    fn tags_round_trip_and_restore_the_state() {
        let tag = StoredTag {
            append_ms: NOW,
            batches: vec![(Some(batch(2, 10, 3)), 3), (None, 4), (Some(batch(2, 13, 2)), 2)],
            before_names: false,
        };
        let text = encode_tag(&tag);
        assert_eq!(text, "1000000;7,2,10,12,3,f;-1,-1,-1,-1,4;7,2,13,14,2,f");
        assert_eq!(decode_tag(&text), Ok(tag.clone()));
        for bad in [
            "",
            "x",
            "1;1,2,3",
            "1;a,2,3,4,5",
            "1;1,2,3,4,5,6",
            "1;1,2,3,4,5,b,b",
        ] {
            assert!(decode_tag(bad).is_err(), "{bad:?}");
        }
        let mut s = states();
        s.restore(50, &tag, NOW + 1);
        let (epoch, batches) = s.batches(PID, NOW + 1).unwrap();
        assert_eq!(epoch, 2);
        assert_eq!(
            batches,
            vec![
                BatchMeta {
                    first_seq: 10,
                    last_seq: 12,
                    first_offset: 50,
                    last_offset: 52
                },
                BatchMeta {
                    first_seq: 13,
                    last_seq: 14,
                    first_offset: 57,
                    last_offset: 58
                },
            ]
        );
        // Tags older than the expiration are not replayed.
        let mut s = states();
        s.restore(0, &tag, NOW + DEFAULT_EXPIRATION.as_millis() as i64);
        assert!(s.is_empty());
    }
}
