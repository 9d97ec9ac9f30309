//! Slowing down password guessing: failed logins delay the next attempts of the same client
//! address and of the same user name, exponentially and bounded.
//!
//! Each key (an address, a user name) that has failed `n` times in a row must wait
//! `failure-delay × 2^(n-1)` (at most `max-failure-delay`) between attempts. An attempt first
//! takes its turn ([`LoginThrottle::hold`], [`LoginThrottle::try_now`]): it joins the queue of
//! each of its keys, and its turn comes when the later of its keys' turns does. A key's queue
//! holds the attempts whose outcome is not booked yet, in the order they came, and each of them
//! counts as a failure when the key's next turn is spaced, so `n` parallel guesses for one user
//! or from one address take as long as `n` sequential ones (the delay doubles from one turn to
//! the next), not one delay each. The outcome is booked on the turn ([`HeldTurn::failed`],
//! [`HeldTurn::succeeded`]); an attempt that ends before that (its connection closed before its
//! turn, or it was refused before any password was checked) gives its turn back ([`HeldTurn`]
//! dropped), and so does a success: it leaves its keys' queues, and the turns of the attempts
//! queued behind it are worked out again without it. Those turns move earlier (never later: a
//! turn once given is a bound kept), and an attempt waiting for its turn learns of it
//! ([`HeldTurn::turn`], [`HeldTurn::poll_earlier`] wakes its waiter), so attempts abandoned by
//! the thousand push neither a user's next login nor the logins already waiting further away.
//! A success clears its user's key, and its address's key only when every failure counted there
//! was for that same user (someone mistyping their own password): an address guessing other
//! users' passwords keeps its delay however often it also logs in with an account of its own.
//! The attempts queued on a key that is cleared keep the turns that key gave them (a success
//! does not let the guesses waiting for its user through at once). A key whose last failure is
//! `6 × max-failure-delay` old is forgotten (its next attempt neither waits nor takes a turn),
//! however many attempts came since.
//!
//! At most `max-tracked` keys are kept. When the table is full of keys that failed recently, a
//! key that is not in it is not tracked on its own: its failures are booked on one entry shared
//! by every such key, which doubles its delay like any key, and while the table stays full an
//! attempt takes the turns of that shared entry for each of its keys that is not tracked (the
//! other key of the attempt keeps its own). Filling the table therefore does not switch the
//! delay off: guesses for users and from addresses it cannot hold are slowed together (logins
//! that succeed included, their turns given back), and memory stays `max-tracked` keys plus
//! one, plus a few words for each attempt waiting for its turn. `max-tracked` 0 tracks nothing
//! and delays nothing.
//!
//! The clock is passed in, so the rules are tested without sleeping. No secret is ever held.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// The limits of a [`LoginThrottle`] (server keys `security.login.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThrottleConfig {
    /// The wait after the first failure; doubled by each further one. Zero: no waits.
    pub failure_delay: Duration,
    /// The longest wait.
    pub max_failure_delay: Duration,
    /// How many addresses and user names are tracked at most.
    pub max_tracked: usize,
}

impl Default for ThrottleConfig {
    fn default() -> Self {
        Self {
            failure_delay: Duration::from_millis(100),
            max_failure_delay: Duration::from_secs(10),
            max_tracked: 10_000,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Address(IpAddr),
    User(String),
    /// Every address and user name that failed while the table was full of recent keys.
    Untracked,
}

#[derive(Debug, Clone)]
struct Entry {
    failures: u32,
    /// The earliest time an attempt may be checked after the failures booked: the last
    /// failure plus its delay (never moved earlier, so no turn given back comes before it).
    ready: Instant,
    /// The attempts holding a turn of this key whose outcome is not booked yet, in the order
    /// they took it: each counts as a failure when the next turn is spaced.
    queue: Vec<Queued>,
    /// When the last failure was booked: the key is forgotten `6 × max-failure-delay` after it.
    last_failure: Instant,
    /// Told apart from an entry of the same key made after this one was cleared (and from
    /// every other entry: generations are never reused).
    generation: u64,
    /// An address's failures: whose they were (a hash of the user name, so a key holds no
    /// client-chosen string).
    failed_users: FailedUsers,
}

/// An attempt in a key's queue.
#[derive(Debug, Clone, Copy)]
struct Queued {
    attempt: u64,
    /// When it took its turn: the key gives it no turn before.
    taken_at: Instant,
    /// The key's turn for it, as the queue stands now.
    turn: Instant,
}

/// An attempt holding turns of keys, until its outcome is booked or its turn given back.
#[derive(Debug)]
struct Waiting {
    /// When its turn comes: the latest of its keys' turns for it, only ever moved earlier.
    turn: Instant,
    /// The keys whose turns it took, each with its generation and its turn for the attempt (as
    /// it was last, once the key is cleared or forgotten).
    keys: Vec<(Key, u64, Instant)>,
    /// Woken when `turn` moves earlier ([`HeldTurn::poll_earlier`]).
    waker: Option<Waker>,
}

/// What the throttle's lock guards.
#[derive(Debug, Default)]
struct Table {
    entries: HashMap<Key, Entry>,
    /// The attempts holding turns, by the id their [`HeldTurn`] carries (looked up for each
    /// attempt a queue holds whenever it is worked out again, so hashed cheaply: the ids are
    /// the server's own sequence numbers, nothing a client chooses).
    waiting: HashMap<u64, Waiting, BuildHasherDefault<IdHasher>>,
    next_attempt: u64,
}

/// Hashes an attempt id (a sequence number) by one multiplication.
#[derive(Debug, Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*byte)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = id.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Whose failures an address key counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FailedUsers {
    One(u64),
    Several,
}

impl FailedUsers {
    fn with(self, user: u64) -> Self {
        match self {
            FailedUsers::One(only) if only == user => self,
            _ => FailedUsers::Several,
        }
    }
}

/// An attempt's turn ([`LoginThrottle::hold`], [`LoginThrottle::try_now`]) until its outcome is
/// booked with [`HeldTurn::failed`] or [`HeldTurn::succeeded`]; dropped before that (the
/// attempt was abandoned, or refused before any password was checked), the turn is given back
/// and the attempts queued behind it move up.
#[derive(Debug)]
pub struct HeldTurn {
    throttle: Arc<LoginThrottle>,
    address: IpAddr,
    user: String,
    /// The attempt in the throttle's table while it holds turns of keys; `None` when it took
    /// none (nothing to give back) or once its outcome is booked.
    attempt: Option<u64>,
    /// When the turn was taken.
    taken_at: Instant,
    /// The wait it was given then.
    wait: Duration,
}

impl HeldTurn {
    /// How long the attempt was to wait for its turn when it took it. Its turn may come
    /// earlier since ([`turn`](Self::turn)), never later.
    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// When the attempt's turn comes, as the queues of its keys stand now: earlier than when
    /// it took it once attempts queued ahead of it have given their turns back.
    pub fn turn(&self) -> Instant {
        self.attempt
            .and_then(|id| self.throttle.lock().waiting.get(&id).map(|waiting| waiting.turn))
            .unwrap_or(self.taken_at + self.wait)
    }

    /// Ready with the attempt's turn once it is earlier than `than`; else pending, and the
    /// task of `cx` is woken (from whichever thread gives a turn back) when it moves earlier.
    /// An attempt that took no turn of any key never moves: pending for ever.
    pub fn poll_earlier(&self, cx: &mut Context<'_>, than: Instant) -> Poll<Instant> {
        let Some(id) = self.attempt else {
            return Poll::Pending;
        };
        let mut table = self.throttle.lock();
        let Some(waiting) = table.waiting.get_mut(&id) else {
            return Poll::Pending;
        };
        if waiting.turn < than {
            return Poll::Ready(waiting.turn);
        }
        if !waiting
            .waker
            .as_ref()
            .is_some_and(|waker| waker.will_wake(cx.waker()))
        {
            waiting.waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    /// The password was checked and was wrong (or the message malformed): both keys' failure
    /// counts grow, and so does their delay.
    pub fn failed(mut self, now: Instant) {
        let attempt = self.attempt.take();
        self.throttle
            .book(self.address, &self.user, Outcome::Failed(now), attempt);
    }

    /// The password was right: the user's key is cleared, and the address's when every
    /// failure counted there was this user's (see the module documentation); the turn is given
    /// back to the keys that are kept.
    pub fn succeeded(mut self) {
        let attempt = self.attempt.take();
        self.throttle
            .book(self.address, &self.user, Outcome::Succeeded, attempt);
    }
}

impl Drop for HeldTurn {
    fn drop(&mut self) {
        if let Some(attempt) = self.attempt.take() {
            self.throttle.give_back(attempt);
        }
    }
}

/// What a checked attempt came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Booked at this time.
    Failed(Instant),
    Succeeded,
}

/// Failed-login bookkeeping shared by every listener of a server (SASL and HTTP Basic).
#[derive(Debug)]
pub struct LoginThrottle {
    config: ThrottleConfig,
    table: Mutex<Table>,
    failures: AtomicU64,
    delayed: AtomicU64,
    generations: AtomicU64,
    /// Hashes user names for [`FailedUsers`].
    hasher: std::collections::hash_map::RandomState,
}

impl LoginThrottle {
    pub fn new(config: ThrottleConfig) -> Self {
        Self {
            config,
            table: Mutex::new(Table::default()),
            failures: AtomicU64::new(0),
            delayed: AtomicU64::new(0),
            generations: AtomicU64::new(0),
            hasher: Default::default(),
        }
    }

    pub fn config(&self) -> ThrottleConfig {
        self.config
    }

    /// The turn of an attempt by `user` from `address` that waits for it: how long before its
    /// password may be checked ([`HeldTurn::wait`], then [`HeldTurn::turn`] as the attempts
    /// ahead of it end); it is queued on its keys and counts as a failure when their next turns
    /// are spaced (see the module documentation). Book its outcome on it; dropped unbooked, it
    /// gives the turn back.
    pub fn hold(self: &Arc<Self>, now: Instant, address: IpAddr, user: &str) -> HeldTurn {
        let (attempt, wait) = self.reserve(&mut self.lock(), now, address, user);
        self.held(now, address, user, attempt, wait)
    }

    /// For callers that refuse instead of waiting (HTTP answers 429): the attempt's turn when
    /// it may be checked now (as [`hold`](Self::hold) with no wait), else `Err` with how long
    /// until it may; a refused attempt takes no turn, so refusals never push the next turn
    /// further away.
    pub fn try_now(
        self: &Arc<Self>,
        now: Instant,
        address: IpAddr,
        user: &str,
    ) -> Result<HeldTurn, Duration> {
        let (attempt, wait) = {
            let mut table = self.lock();
            let keys = self.keys_of(&mut table.entries, now, address, user);
            let wait = keys
                .iter()
                .filter_map(|key| table.entries.get(key))
                .filter(|entry| entry.failures > 0)
                .map(|entry| self.next_turn(entry, now).saturating_duration_since(now))
                .max()
                .unwrap_or_default();
            if !wait.is_zero() {
                self.delayed.fetch_add(1, Ordering::Relaxed);
                return Err(wait);
            }
            self.reserve(&mut table, now, address, user)
        };
        Ok(self.held(now, address, user, attempt, wait))
    }

    fn held(
        self: &Arc<Self>,
        now: Instant,
        address: IpAddr,
        user: &str,
        attempt: Option<u64>,
        wait: Duration,
    ) -> HeldTurn {
        HeldTurn {
            throttle: Arc::clone(self),
            address,
            user: user.to_string(),
            attempt,
            taken_at: now,
            wait,
        }
    }

    /// Queues an attempt by `user` from `address` on each of its keys that has failures: it
    /// gets each key's next turn, and its own comes when the later of them does. Its id in
    /// [`Table::waiting`] (`None` when it took no turn), and how long it waits.
    fn reserve(
        &self,
        table: &mut Table,
        now: Instant,
        address: IpAddr,
        user: &str,
    ) -> (Option<u64>, Duration) {
        let keys = self.keys_of(&mut table.entries, now, address, user);
        let id = table.next_attempt;
        let mut taken = Vec::new();
        for key in keys {
            if let Some(entry) = table.entries.get_mut(&key).filter(|entry| entry.failures > 0) {
                let turn = self.next_turn(entry, now);
                entry.queue.push(Queued {
                    attempt: id,
                    taken_at: now,
                    turn,
                });
                taken.push((key, entry.generation, turn));
            }
        }
        let turn = taken.iter().map(|(_, _, turn)| *turn).fold(now, Instant::max);
        let wait = turn.saturating_duration_since(now);
        if !wait.is_zero() {
            self.delayed.fetch_add(1, Ordering::Relaxed);
        }
        if taken.is_empty() {
            return (None, wait);
        }
        table.next_attempt = id.wrapping_add(1);
        table.waiting.insert(
            id,
            Waiting {
                turn,
                keys: taken,
                waker: None,
            },
        );
        (Some(id), wait)
    }

    /// The turn `entry` gives an attempt queued on it at `now`: after its last failure's delay,
    /// and spaced after the last attempt queued by the delay of its failures plus its queued
    /// attempts, the new one included.
    fn next_turn(&self, entry: &Entry, now: Instant) -> Instant {
        let at = now.max(entry.ready);
        match entry.queue.last() {
            Some(last) => {
                at.max(last.turn + self.delay(entry.failures.saturating_add(len_u32(&entry.queue))))
            }
            None => at,
        }
    }

    /// Works out again the turns `key` gives the attempts queued on it from position `from` on
    /// (after an attempt left its queue there, or from 0 after a failure was booked on it), as
    /// [`next_turn`](Self::next_turn) gave them in order; an attempt whose own turn comes
    /// earlier than it did is moved and its waker pushed on `wakers` (never later: the turn it
    /// had stays a bound).
    fn requeue(&self, table: &mut Table, key: &Key, from: usize, wakers: &mut Vec<Waker>) {
        let Table { entries, waiting, .. } = table;
        let Some(entry) = entries.get_mut(key) else {
            return;
        };
        let mut previous = from
            .checked_sub(1)
            .and_then(|before| entry.queue.get(before))
            .map(|queued| queued.turn);
        for (position, queued) in entry.queue.iter_mut().enumerate().skip(from) {
            let mut at = queued.taken_at.max(entry.ready);
            if let Some(previous) = previous {
                let ahead = u32::try_from(position).unwrap_or(u32::MAX);
                at = at.max(previous + self.delay(entry.failures.saturating_add(ahead)));
            }
            previous = Some(at);
            queued.turn = at;
            let Some(attempt) = waiting.get_mut(&queued.attempt) else {
                continue;
            };
            // A generation is never reused, whatever the key: it alone names this entry.
            for (_, generation, turn) in &mut attempt.keys {
                if *generation == entry.generation {
                    *turn = at;
                }
            }
            let latest = attempt.keys.iter().map(|(_, _, turn)| *turn).max().unwrap_or(at);
            if latest < attempt.turn {
                attempt.turn = latest;
                wakers.extend(attempt.waker.take());
            }
        }
    }

    /// Takes attempt `id` out of the queues of the keys it took (`taken`; keys cleared or
    /// forgotten since are left alone): each key it left, and where it was in its queue.
    fn leave_queues(table: &mut Table, id: u64, taken: Vec<(Key, u64, Instant)>) -> Vec<(Key, usize)> {
        let mut left = Vec::with_capacity(taken.len());
        for (key, generation, _) in taken {
            if let Some(entry) = table.entries.get_mut(&key).filter(|e| e.generation == generation) {
                if let Some(position) = entry.queue.iter().position(|queued| queued.attempt == id) {
                    entry.queue.remove(position);
                    left.push((key, position));
                }
            }
        }
        left
    }

    /// Gives back the turn of attempt `id`: it leaves its keys' queues and the attempts queued
    /// behind it move up (never before a key's last failure plus its delay).
    fn give_back(&self, id: u64) {
        let mut wakers = Vec::new();
        {
            let mut table = self.lock();
            let Some(attempt) = table.waiting.remove(&id) else {
                return;
            };
            for (key, position) in Self::leave_queues(&mut table, id, attempt.keys) {
                self.requeue(&mut table, &key, position, &mut wakers);
            }
        }
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Books the outcome of an attempt by `user` from `address` (holding turns as `attempt`,
    /// if any), under one lock, so that no other attempt sees it neither queued nor booked.
    fn book(&self, address: IpAddr, user: &str, outcome: Outcome, attempt: Option<u64>) {
        let mut wakers = Vec::new();
        {
            let mut table = self.lock();
            let left = match attempt.and_then(|id| table.waiting.remove(&id).map(|w| (id, w.keys))) {
                Some((id, taken)) => Self::leave_queues(&mut table, id, taken),
                None => Vec::new(),
            };
            // A failure requeues the keys it is booked on from their first attempt (their
            // delay changed); the keys the attempt left are requeued from where it was.
            match outcome {
                Outcome::Failed(now) => self.failed_locked(&mut table, now, address, user, &mut wakers),
                Outcome::Succeeded => self.succeeded_locked(&mut table.entries, address, user),
            }
            for (key, position) in left {
                self.requeue(&mut table, &key, position, &mut wakers);
            }
        }
        wakers.into_iter().for_each(Waker::wake);
    }

    /// A failed attempt: both keys' failure counts grow, and so does their delay.
    fn failed_locked(
        &self,
        table: &mut Table,
        now: Instant,
        address: IpAddr,
        user: &str,
        wakers: &mut Vec<Waker>,
    ) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        let whose = self.hasher.hash_one(user);
        let keys = [Key::Address(address), Key::User(user.to_string())];
        let entries = &mut table.entries;
        self.forget_expired(entries, &keys, now);
        let mut booked = Vec::with_capacity(keys.len());
        for key in keys {
            let key = if entries.contains_key(&key) || self.make_room(entries, now) {
                key
            } else if self.config.max_tracked == 0 {
                continue;
            } else {
                self.forget_expired(entries, &[Key::Untracked], now);
                Key::Untracked
            };
            if booked.contains(&key) {
                continue;
            }
            booked.push(key.clone());
            let entry = entries.entry(key).or_insert_with(|| Entry {
                failures: 0,
                ready: now,
                queue: Vec::new(),
                last_failure: now,
                generation: self.generations.fetch_add(1, Ordering::Relaxed),
                failed_users: FailedUsers::One(whose),
            });
            entry.failed_users = entry.failed_users.with(whose);
            entry.failures = entry.failures.saturating_add(1);
            entry.ready = entry.ready.max(now + self.delay(entry.failures));
            entry.last_failure = now;
        }
        for key in &booked {
            self.requeue(table, key, 0, wakers);
        }
    }

    /// A successful login clears its user's key, and its address's key when every failure
    /// counted there was this user's (see the module documentation).
    fn succeeded_locked(&self, entries: &mut HashMap<Key, Entry>, address: IpAddr, user: &str) {
        let whose = self.hasher.hash_one(user);
        let address = Key::Address(address);
        if entries
            .get(&address)
            .is_some_and(|entry| entry.failed_users == FailedUsers::One(whose))
        {
            entries.remove(&address);
        }
        entries.remove(&Key::User(user.to_string()));
    }

    /// Failed attempts counted since start.
    pub fn failures_total(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// Attempts that had to wait for their turn.
    pub fn delayed_total(&self) -> u64 {
        self.delayed.load(Ordering::Relaxed)
    }

    /// Keys tracked now.
    pub fn tracked(&self) -> usize {
        self.tracked_at(Instant::now())
    }

    /// Keys whose last failure is recent at `now` (forgotten ones not yet removed are not
    /// counted: they are removed when next looked up or when the table is full).
    pub fn tracked_at(&self, now: Instant) -> usize {
        self.lock()
            .entries
            .iter()
            .filter(|(key, entry)| **key != Key::Untracked && !self.expired(entry, now))
            .count()
    }
    fn delay(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(30);
        self.config
            .failure_delay
            .saturating_mul(1u32 << doublings)
            .min(self.config.max_failure_delay)
    }

    /// Whether `entry`'s last failure is old enough for the key to be forgotten.
    fn expired(&self, entry: &Entry, now: Instant) -> bool {
        now.saturating_duration_since(entry.last_failure) >= self.config.max_failure_delay.saturating_mul(6)
    }

    /// Forgets those of `keys` whose last failure is `6 × max-failure-delay` old.
    fn forget_expired(&self, entries: &mut HashMap<Key, Entry>, keys: &[Key], now: Instant) {
        for key in keys {
            if entries.get(key).is_some_and(|entry| self.expired(entry, now)) {
                entries.remove(key);
            }
        }
    }

    /// Makes room for one more key: forgets expired keys when the table is full. False when
    /// every tracked key failed recently (the new key is then not tracked: its failures are
    /// booked on [`Key::Untracked`]).
    fn make_room(&self, entries: &mut HashMap<Key, Entry>, now: Instant) -> bool {
        if !self.full(entries) {
            return true;
        }
        entries.retain(|_, entry| !self.expired(entry, now));
        !self.full(entries)
    }

    /// Whether `max-tracked` addresses and user names are tracked ([`Key::Untracked`] is not
    /// one of them; expired keys not removed yet are).
    fn full(&self, entries: &HashMap<Key, Entry>) -> bool {
        let untracked = usize::from(entries.contains_key(&Key::Untracked));
        entries.len() - untracked >= self.config.max_tracked
    }

    /// The keys whose turns an attempt by `user` from `address` takes: each of the two that is
    /// tracked, and for those that are not, while the table is full, the one entry of the keys
    /// that could not be tracked (once, when both are not). Forgets the expired ones first.
    fn keys_of(
        &self,
        entries: &mut HashMap<Key, Entry>,
        now: Instant,
        address: IpAddr,
        user: &str,
    ) -> Vec<Key> {
        let keys = [Key::Address(address), Key::User(user.to_string()), Key::Untracked];
        self.forget_expired(entries, &keys, now);
        let [address, user, untracked] = keys;
        let overflow = entries.contains_key(&untracked) && self.full(entries);
        let mut taken = Vec::with_capacity(2);
        for key in [address, user] {
            if entries.contains_key(&key) {
                taken.push(key);
            } else if overflow && !taken.contains(&untracked) {
                taken.push(untracked.clone());
            }
        }
        taken
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The length of a queue as a failure count.
fn len_u32(queue: &[Queued]) -> u32 {
    u32::try_from(queue.len()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn throttle() -> Arc<LoginThrottle> {
        tracking(4)
    }

    fn tracking(max_tracked: usize) -> Arc<LoginThrottle> {
        Arc::new(LoginThrottle::new(ThrottleConfig {
            failure_delay: 100 * MS,
            max_failure_delay: 800 * MS,
            max_tracked,
        }))
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    /// A failure booked without a turn (an attempt that did not wait).
    fn fail(t: &LoginThrottle, now: Instant, address: IpAddr, user: &str) {
        t.book(address, user, Outcome::Failed(now), None);
    }

    /// A success booked without a turn.
    fn succeed(t: &LoginThrottle, address: IpAddr, user: &str) {
        t.book(address, user, Outcome::Succeeded, None);
    }

    /// How long an attempt would wait now (its turn is given back at once).
    fn wait(t: &Arc<LoginThrottle>, now: Instant, address: IpAddr, user: &str) -> Duration {
        t.hold(now, address, user).wait()
    }

    #[test]
    fn delays_double_per_failure_up_to_the_bound() {
        let t = throttle();
        let now = Instant::now();
        let mut waits = Vec::new();
        let mut clock = now;
        for _ in 0..7 {
            let turn = t.hold(clock, ip(1), "u");
            waits.push(turn.wait());
            clock += turn.wait();
            turn.failed(clock);
        }
        assert_eq!(
            waits,
            [
                Duration::ZERO,
                100 * MS,
                200 * MS,
                400 * MS,
                800 * MS,
                800 * MS,
                800 * MS
            ],
            "no failure, no wait; then each failure doubles it"
        );
        assert_eq!(t.failures_total(), 7);
    }

    /// Sequential attempts that all fail: when each one's turn comes, from the first on.
    fn sequential_turns(t: &Arc<LoginThrottle>, now: Instant, attempts: usize) -> Vec<Duration> {
        let mut clock = now;
        let mut turns = Vec::new();
        for _ in 0..attempts {
            let turn = t.hold(clock, ip(1), "admin");
            clock += turn.wait();
            turns.push(clock - now);
            turn.failed(clock);
        }
        turns
    }

    #[test]
    fn parallel_attempts_take_as_long_as_sequential_ones() {
        let now = Instant::now();
        // One failure, then six attempts one after another: 100, 200, 400, 800, 800, 800 ms
        // between turns.
        let sequential = throttle();
        fail(&sequential, now, ip(1), "admin");
        let expected = sequential_turns(&sequential, now, 6);
        assert_eq!(
            expected,
            [100 * MS, 300 * MS, 700 * MS, 1500 * MS, 2300 * MS, 3100 * MS]
        );
        // The same six sent at once, each failing at its turn: the same turns, each waiting
        // attempt counted as a failure when the next turn is spaced (not 100 ms apart).
        let t = throttle();
        fail(&t, now, ip(1), "admin");
        let held: Vec<HeldTurn> = (0..6).map(|_| t.hold(now, ip(1), "admin")).collect();
        let waits: Vec<Duration> = held.iter().map(HeldTurn::wait).collect();
        assert_eq!(waits, expected);
        for turn in held {
            let at = now + turn.wait();
            turn.failed(at);
        }
        // After them, both keys are where six sequential failures leave them.
        assert_eq!(wait(&t, now, ip(1), "admin"), 3900 * MS);
        assert_eq!(wait(&sequential, now, ip(1), "admin"), 3900 * MS);
        // The user key holds even from another address; the address key for another user.
        let t = throttle();
        for _ in 0..3 {
            fail(&t, now, ip(1), "admin");
        }
        let held: Vec<HeldTurn> = (0..4).map(|_| t.hold(now, ip(1), "admin")).collect();
        let waits: Vec<Duration> = held.iter().map(HeldTurn::wait).collect();
        assert_eq!(waits, [400 * MS, 1200 * MS, 2000 * MS, 2800 * MS]);
        assert_eq!(wait(&t, now, ip(2), "admin"), 3600 * MS);
        assert_eq!(wait(&t, now, ip(1), "other"), 3600 * MS);
        assert_eq!(wait(&t, now, ip(3), "other"), Duration::ZERO);
    }

    #[test]
    fn a_zero_delay_never_waits() {
        let t = Arc::new(LoginThrottle::new(ThrottleConfig {
            failure_delay: Duration::ZERO,
            ..ThrottleConfig::default()
        }));
        let now = Instant::now();
        for _ in 0..5 {
            let turn = t.hold(now, ip(1), "u");
            assert_eq!(turn.wait(), Duration::ZERO);
            turn.failed(now);
            assert!(t.try_now(now, ip(1), "u").is_ok());
        }
        assert_eq!(t.failures_total(), 5, "failures are still counted");
    }

    #[test]
    fn refusing_callers_do_not_push_the_turn() {
        let t = throttle();
        let now = Instant::now();
        t.try_now(now, ip(1), "u").expect("no failure yet").failed(now);
        assert_eq!(t.try_now(now, ip(1), "u").err(), Some(100 * MS));
        assert_eq!(
            t.try_now(now + 50 * MS, ip(2), "u").err(),
            Some(50 * MS),
            "the user key holds"
        );
        let checked = t
            .try_now(now + 100 * MS, ip(1), "u")
            .expect("refusals took no turn");
        assert_eq!(
            t.try_now(now + 100 * MS, ip(1), "u").err(),
            Some(200 * MS),
            "that one did, counted as a failure until it is booked"
        );
        checked.failed(now + 100 * MS);
        assert_eq!(t.try_now(now + 100 * MS, ip(1), "u").err(), Some(200 * MS));
        // A turn dropped unbooked (its password was never checked) is given back.
        drop(t.try_now(now + 300 * MS, ip(1), "u").expect("its turn"));
        assert!(t.try_now(now + 300 * MS, ip(1), "u").is_ok());
    }

    #[test]
    fn success_clears_and_idle_keys_are_forgotten_when_full() {
        let t = throttle();
        let now = Instant::now();
        fail(&t, now, ip(1), "a");
        t.hold(now, ip(1), "a").succeeded();
        assert_eq!(wait(&t, now, ip(1), "a"), Duration::ZERO);
        fail(&t, now, ip(1), "a");
        fail(&t, now, ip(2), "b");
        assert_eq!(t.tracked(), 4);
        // Full of recent keys: a new pair is not tracked on its own, the table stays bounded,
        // and the pair's next attempt still waits (the keys not tracked share one entry).
        fail(&t, now, ip(3), "c");
        assert_eq!(t.tracked(), 4);
        assert_eq!(wait(&t, now, ip(3), "c"), 100 * MS);
        // Much later the old keys are forgotten to make room.
        let later = now + 800 * MS * 7;
        fail(&t, later, ip(3), "c");
        assert_eq!(t.tracked(), 2);
        assert_eq!(wait(&t, later, ip(3), "c"), 100 * MS);
    }

    #[test]
    fn keys_a_full_table_cannot_hold_are_slowed_together() {
        let t = throttle();
        let now = Instant::now();
        fail(&t, now, ip(1), "a");
        fail(&t, now, ip(2), "b");
        // The table is full of recent keys. Guesses for admin from a fifth address: neither
        // key is tracked, and their shared entry doubles its delay like any key's.
        let mut clock = now;
        let mut waits = Vec::new();
        for _ in 0..5 {
            let turn = t.hold(clock, ip(5), "admin");
            waits.push(turn.wait());
            clock += turn.wait();
            turn.failed(clock);
        }
        assert_eq!(waits, [Duration::ZERO, 100 * MS, 200 * MS, 400 * MS, 800 * MS]);
        // Any user or address not tracked waits for the same turns; a tracked key keeps its
        // own (ip 1's delay has passed), and adds the shared one's for the other key.
        assert_eq!(wait(&t, clock, ip(6), "root"), 800 * MS);
        assert_eq!(wait(&t, clock, ip(1), "a"), Duration::ZERO);
        assert_eq!(wait(&t, clock, ip(1), "root"), 800 * MS);
        // Parallel guesses take its turns as they take a key's.
        let held: Vec<HeldTurn> = (0..3)
            .map(|i| t.hold(clock, ip(20 + i), &format!("user{i}")))
            .collect();
        let parallel: Vec<Duration> = held.iter().map(HeldTurn::wait).collect();
        assert_eq!(parallel, [800 * MS, 1600 * MS, 2400 * MS]);
        drop(held);
        // Bounded: four keys and the shared entry.
        assert_eq!(t.tracked_at(clock), 4);
        assert_eq!(t.lock().entries.len(), 5);
        // Once the table has room, a key that is not in it is tracked on its own again.
        succeed(&t, ip(1), "a");
        assert_eq!(wait(&t, clock, ip(6), "root"), Duration::ZERO);
        fail(&t, clock, ip(6), "root");
        assert_eq!(t.tracked_at(clock), 4);
        assert_eq!(wait(&t, clock, ip(6), "root"), 100 * MS);

        // max-tracked 0 tracks nothing, shared or not: failures are never delayed.
        let t = Arc::new(LoginThrottle::new(ThrottleConfig {
            max_tracked: 0,
            ..ThrottleConfig::default()
        }));
        for _ in 0..3 {
            fail(&t, now, ip(1), "u");
        }
        assert_eq!(wait(&t, now, ip(1), "u"), Duration::ZERO);
        assert!(t.lock().entries.is_empty());
    }

    #[test]
    fn a_success_keeps_the_delay_of_an_address_guessing_other_users() {
        let t = tracking(64);
        let now = Instant::now();
        // Someone mistyping their own password: their success clears the address too.
        fail(&t, now, ip(1), "alice");
        fail(&t, now, ip(1), "alice");
        succeed(&t, ip(1), "alice");
        assert_eq!(wait(&t, now, ip(1), "carol"), Duration::ZERO);
        // Guesses for bob and carol between logins as alice: the address keeps its delay and
        // it keeps growing, while alice's own key is cleared.
        let mut clock = now;
        let mut waits = Vec::new();
        for victim in ["bob", "carol", "dave", "erin"] {
            let turn = t.hold(clock, ip(2), victim);
            waits.push(turn.wait());
            clock += turn.wait();
            turn.failed(clock);
            succeed(&t, ip(2), "alice");
        }
        assert_eq!(waits, [Duration::ZERO, 100 * MS, 200 * MS, 400 * MS]);
        assert_eq!(wait(&t, clock, ip(3), "alice"), Duration::ZERO);
        // A success's turn does not space the address's next one: it is given back.
        let own = t.hold(clock + 800 * MS, ip(2), "alice");
        assert_eq!(own.wait(), Duration::ZERO);
        own.succeeded();
        assert_eq!(wait(&t, clock + 800 * MS, ip(2), "frank"), Duration::ZERO);
    }

    #[test]
    fn a_key_is_forgotten_six_max_delays_after_its_last_failure_whatever_came_since() {
        let t = throttle();
        let now = Instant::now();
        // Failures for two users from one address: a success does not clear the address.
        fail(&t, now, ip(1), "x");
        fail(&t, now, ip(1), "y");
        let mut clock = now;
        let mut waits = Vec::new();
        // Logins that succeed, one every 400 ms, for 6 x 800 ms: each waits for its turn.
        while clock < now + 6 * 800 * MS {
            let turn = t.hold(clock, ip(1), "admin");
            waits.push(turn.wait());
            turn.succeeded();
            clock += 400 * MS;
        }
        assert!(waits.iter().any(|w| !w.is_zero()), "{waits:?}");
        // 6 x max-failure-delay after the last failure the address is forgotten: the logins
        // since did not keep it, and the next ones neither wait nor are refused.
        let later = now + 6 * 800 * MS;
        assert_eq!(wait(&t, later, ip(1), "admin"), Duration::ZERO);
        assert_eq!(wait(&t, later, ip(1), "admin"), Duration::ZERO);
        assert!(t.try_now(later, ip(1), "admin").is_ok());
        assert!(t.try_now(later, ip(1), "admin").is_ok());
        assert_eq!(t.tracked_at(later), 0, "the gauge counts no forgotten key");
        assert_eq!(wait(&t, later, ip(3), "x"), Duration::ZERO, "x's key too");
        assert_eq!(wait(&t, later, ip(3), "y"), Duration::ZERO, "y's key too");
        assert_eq!(t.tracked(), 0);
        // A failure after that starts again from the first delay.
        fail(&t, later, ip(1), "x");
        assert_eq!(wait(&t, later, ip(1), "x"), 100 * MS);

        // A key that keeps failing is kept: its delay is never forgotten mid-guessing.
        let t = throttle();
        let mut clock = now;
        for _ in 0..20 {
            let turn = t.hold(clock, ip(2), "victim");
            clock += turn.wait();
            turn.failed(clock);
        }
        assert_eq!(wait(&t, clock, ip(2), "victim"), 800 * MS);
    }

    #[test]
    fn abandoned_turns_are_given_back() {
        let t = tracking(64);
        let now = Instant::now();
        fail(&t, now, ip(1), "admin");
        // Twenty attempts for admin from other addresses wait 100, 300, 700, 1500, ... ms,
        // then their connections close before their turns: the next attempt waits as if they
        // never were.
        let held: Vec<HeldTurn> = (0..20).map(|i| t.hold(now, ip(10 + i), "admin")).collect();
        assert_eq!(held[19].wait(), 14_300 * MS);
        drop(held);
        assert_eq!(wait(&t, now, ip(2), "admin"), 100 * MS);

        // A turn that came is kept; one given back never goes below the last failure's delay.
        let first = t.hold(now, ip(3), "admin");
        assert_eq!(first.wait(), 100 * MS);
        first.failed(now + 100 * MS);
        assert_eq!(wait(&t, now, ip(4), "admin"), 300 * MS);
        let later = t.hold(now, ip(5), "admin");
        assert_eq!(later.wait(), 300 * MS);
        fail(&t, now + 50 * MS, ip(6), "admin"); // 3 failures: 400 ms after this one
        drop(later);
        assert_eq!(wait(&t, now + 50 * MS, ip(7), "admin"), 400 * MS);

        // A key cleared and made again is not shortened by a turn of the old one.
        let old = t.hold(now, ip(8), "admin");
        succeed(&t, ip(8), "admin");
        fail(&t, now, ip(9), "admin");
        let queued = t.hold(now, ip(12), "admin");
        assert_eq!(queued.wait(), 100 * MS);
        drop(old);
        assert_eq!(wait(&t, now, ip(11), "admin"), 300 * MS);
        drop(queued);

        // A failure booked while a turn waits sets a floor the give-back does not go under.
        let t = throttle();
        fail(&t, now, ip(1), "u");
        let waiting = t.hold(now, ip(13), "u");
        assert_eq!(waiting.wait(), 100 * MS);
        fail(&t, now + 50 * MS, ip(14), "u"); // 2 failures: not before now + 250 ms
        drop(waiting);
        assert_eq!(wait(&t, now + 50 * MS, ip(15), "u"), 200 * MS);
    }

    /// Counts the wakes of the waker it makes.
    #[derive(Default)]
    struct Wakes(AtomicU64);

    impl std::task::Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    impl Wakes {
        fn count(&self) -> u64 {
            self.0.load(Ordering::Relaxed)
        }
    }

    /// `turn` as a waiter polls it: pending (its waker registered) until it is earlier than
    /// `than`.
    fn poll(turn: &HeldTurn, wakes: &Arc<Wakes>, than: Instant) -> Poll<Instant> {
        let waker = Waker::from(Arc::clone(wakes));
        turn.poll_earlier(&mut Context::from_waker(&waker), than)
    }

    #[test]
    fn a_waiting_turn_moves_earlier_when_turns_ahead_of_it_are_given_back() {
        let t = tracking(64);
        let now = Instant::now();
        fail(&t, now, ip(1), "admin");
        // Five guesses for admin queued (100, 300, 700, 1,500, 2,300 ms), then the right
        // password from another address behind them.
        let mut guesses: Vec<Option<HeldTurn>> =
            (0..5).map(|i| Some(t.hold(now, ip(10 + i), "admin"))).collect();
        let good = t.hold(now, ip(2), "admin");
        assert_eq!(good.wait(), 3100 * MS);
        let wakes = Arc::new(Wakes::default());
        let first = good.turn();
        assert_eq!(first, now + 3100 * MS);
        assert_eq!(poll(&good, &wakes, first), Poll::Pending);
        // Two of them in the middle close: the turns behind them move up (the first two keep
        // theirs), and the waiter is woken.
        guesses[2] = None;
        guesses[3] = None;
        assert_eq!(wakes.count(), 1, "the waiter is woken");
        let turns: Vec<Duration> = guesses.iter().flatten().map(|turn| turn.turn() - now).collect();
        assert_eq!(turns, [100 * MS, 300 * MS, 700 * MS]);
        assert_eq!(good.turn(), now + 1500 * MS);
        assert_eq!(poll(&good, &wakes, first), Poll::Ready(now + 1500 * MS));
        assert_eq!(poll(&good, &wakes, now + 1500 * MS), Poll::Pending);
        // The rest close: the right password's turn is the last failure's delay, as if none
        // had been queued.
        guesses.clear();
        assert_eq!(wakes.count(), 2);
        assert_eq!(good.turn(), now + 100 * MS);
        // A new attempt queues behind it, as behind one attempt.
        assert_eq!(wait(&t, now, ip(3), "admin"), 300 * MS);
        good.succeeded();

        // A turn never moves later: the attempt ahead fails late, its failure's delay does
        // not push the waiting turn past the one it was given.
        let t = tracking(64);
        fail(&t, now, ip(1), "u");
        let ahead = t.hold(now, ip(10), "u");
        let behind = t.hold(now, ip(11), "u");
        assert_eq!(behind.turn(), now + 300 * MS);
        ahead.failed(now + 1000 * MS);
        assert_eq!(behind.turn(), now + 300 * MS);
        drop(behind);
        assert_eq!(wait(&t, now + 1000 * MS, ip(12), "u"), 200 * MS);

        // A success that clears the user's key does not let the guesses queued for that user
        // through at once: they keep the turns the key gave them.
        let t = tracking(64);
        fail(&t, now, ip(1), "alice");
        let queued: Vec<HeldTurn> = (0..3).map(|i| t.hold(now, ip(20 + i), "alice")).collect();
        t.hold(now + 100 * MS, ip(1), "alice").succeeded();
        let turns: Vec<Duration> = queued.iter().map(|turn| turn.turn() - now).collect();
        assert_eq!(turns, [100 * MS, 300 * MS, 700 * MS]);
        drop(queued);

        // With the table full, a flood of guesses queued on the entry shared by the keys it
        // cannot hold, then the right password for a user of its own from an address of its
        // own: once the flood's connections close, its turn is that entry's first.
        let t = tracking(2);
        fail(&t, now, ip(1), "filler");
        fail(&t, now, ip(20), "u0");
        let flood: Vec<HeldTurn> = (1..40)
            .map(|i| t.hold(now, ip(20 + i), &format!("u{i}")))
            .collect();
        let good = t.hold(now, ip(9), "alice");
        assert_eq!(good.wait(), 100 * MS + 200 * MS + 400 * MS + 37 * 800 * MS);
        assert_eq!(poll(&good, &wakes, good.turn()), Poll::Pending);
        drop(flood);
        assert_eq!(good.turn(), now + 100 * MS);
        assert_eq!(wakes.count(), 3);
    }
}
