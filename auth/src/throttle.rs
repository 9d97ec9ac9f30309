//! Slowing down password guessing: failed logins delay the next attempts of the same client
//! address and of the same user name, exponentially and bounded.
//!
//! Each key (an address, a user name) that has failed `n` times in a row must wait
//! `failure-delay × 2^(n-1)` (at most `max-failure-delay`) between attempts. An attempt first
//! takes its turn ([`LoginThrottle::hold`], [`LoginThrottle::try_now`]): it gets the time to
//! wait before its password may be checked, and moves the key's next turn on as if it will
//! fail: an attempt holding a turn whose outcome is not booked yet counts as a failure when the
//! next turn is spaced, so `n` parallel guesses for one user or from one address take as long
//! as `n` sequential ones (the delay doubles from one turn to the next), not one delay each.
//! The outcome is booked on the turn ([`HeldTurn::failed`], [`HeldTurn::succeeded`]); an
//! attempt that ends before that (its connection closed before its turn, or it was refused
//! before any password was checked) gives its turn back ([`HeldTurn`] dropped), and so does a
//! success, so attempts abandoned by the thousand cannot push a user's next login arbitrarily
//! far away. A success clears its user's key, and its address's key only when every failure
//! counted there was for that same user (someone mistyping their own password): an address
//! guessing other users' passwords keeps its delay however often it also logs in with an
//! account of its own. A key whose last failure is `6 × max-failure-delay` old is forgotten
//! (its next attempt neither waits nor takes a turn), however many attempts came since.
//!
//! At most `max-tracked` keys are kept. When the table is full of keys that failed recently, a
//! key that is not in it is not tracked on its own: its failures are booked on one entry shared
//! by every such key, which doubles its delay like any key, and while the table stays full an
//! attempt takes the turns of that shared entry for each of its keys that is not tracked (the
//! other key of the attempt keeps its own). Filling the table therefore does not switch the
//! delay off: guesses for users and from addresses it cannot hold are slowed together (logins
//! that succeed included, their turns given back), and memory stays `max-tracked` keys plus
//! one. `max-tracked` 0 tracks nothing and delays nothing.
//!
//! The clock is passed in, so the rules are tested without sleeping. No secret is ever held.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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

#[derive(Debug, Clone, Copy)]
struct Entry {
    failures: u32,
    /// Attempts that hold a turn of this key and whose outcome is not booked yet: each counts
    /// as a failure when the next turn is spaced.
    pending: u32,
    /// The earliest time the key's next attempt may be checked.
    next_turn: Instant,
    /// When the last failure was booked: no turn given back comes before its delay, and the
    /// key is forgotten `6 × max-failure-delay` after it.
    last_failure: Instant,
    /// Told apart from an entry of the same key made after this one was cleared.
    generation: u64,
    /// An address's failures: whose they were (a hash of the user name, so a key holds no
    /// client-chosen string).
    failed_users: FailedUsers,
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

/// A turn taken by [`LoginThrottle::reserve`]: how long the attempt waits before its password
/// may be checked, and, for each key whose next turn it moved, what it added (given back when
/// the attempt ends without a failure) and that it counts among the key's pending attempts.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Turn {
    wait: Duration,
    taken: Vec<(Key, u64, Duration)>,
}

/// An attempt's turn ([`LoginThrottle::hold`], [`LoginThrottle::try_now`]) until its outcome is
/// booked with [`HeldTurn::failed`] or [`HeldTurn::succeeded`]; dropped before that (the
/// attempt was abandoned, or refused before any password was checked), the turn is given back.
#[derive(Debug)]
pub struct HeldTurn {
    throttle: Arc<LoginThrottle>,
    address: IpAddr,
    user: String,
    turn: Option<Turn>,
}

impl HeldTurn {
    /// How long the attempt waits for its turn.
    pub fn wait(&self) -> Duration {
        self.turn.as_ref().map(|turn| turn.wait).unwrap_or_default()
    }

    /// The password was checked and was wrong (or the message malformed): both keys' failure
    /// counts grow, and so does their delay.
    pub fn failed(mut self, now: Instant) {
        if let Some(turn) = self.turn.take() {
            self.throttle
                .book(self.address, &self.user, Outcome::Failed(now), &turn);
        }
    }

    /// The password was right: the user's key is cleared, and the address's when every
    /// failure counted there was this user's (see the module documentation); what the turn
    /// added to a key that is kept is given back.
    pub fn succeeded(mut self) {
        if let Some(turn) = self.turn.take() {
            self.throttle
                .book(self.address, &self.user, Outcome::Succeeded, &turn);
        }
    }
}

impl Drop for HeldTurn {
    fn drop(&mut self) {
        if let Some(turn) = self.turn.take() {
            self.throttle.give_back(&turn);
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
    entries: Mutex<HashMap<Key, Entry>>,
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
            entries: Mutex::new(HashMap::new()),
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
    /// password may be checked ([`HeldTurn::wait`]); the keys' next turns move on as if it will
    /// fail (see the module documentation). Book its outcome on it; dropped unbooked, it gives
    /// the turn back.
    pub fn hold(self: &Arc<Self>, now: Instant, address: IpAddr, user: &str) -> HeldTurn {
        let turn = self.reserve(&mut self.lock(), now, address, user);
        self.held(address, user, turn)
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
        let turn = {
            let mut entries = self.lock();
            let keys = self.keys_of(&mut entries, now, address, user);
            let wait = keys
                .iter()
                .filter_map(|key| entries.get(key))
                .filter(|entry| entry.failures > 0)
                .map(|entry| entry.next_turn.saturating_duration_since(now))
                .max()
                .unwrap_or_default();
            if !wait.is_zero() {
                self.delayed.fetch_add(1, Ordering::Relaxed);
                return Err(wait);
            }
            self.reserve(&mut entries, now, address, user)
        };
        Ok(self.held(address, user, turn))
    }

    fn held(self: &Arc<Self>, address: IpAddr, user: &str, turn: Turn) -> HeldTurn {
        HeldTurn {
            throttle: Arc::clone(self),
            address,
            user: user.to_string(),
            turn: Some(turn),
        }
    }

    /// Takes the next turn of both keys of an attempt by `user` from `address`: it comes when
    /// the later of them does, and each key's next turn is then spaced by the delay of its
    /// failures plus its pending attempts, this one included.
    fn reserve(&self, entries: &mut HashMap<Key, Entry>, now: Instant, address: IpAddr, user: &str) -> Turn {
        let keys = self.keys_of(entries, now, address, user);
        let turn = keys
            .iter()
            .filter_map(|key| entries.get(key))
            .filter(|entry| entry.failures > 0)
            .map(|entry| entry.next_turn)
            .fold(now, Instant::max);
        let mut taken = Vec::new();
        for key in keys {
            if let Some(entry) = entries.get_mut(&key) {
                if entry.failures > 0 {
                    entry.pending = entry.pending.saturating_add(1);
                    let after = turn + self.delay(entry.failures.saturating_add(entry.pending));
                    taken.push((
                        key,
                        entry.generation,
                        after.saturating_duration_since(entry.next_turn),
                    ));
                    entry.next_turn = after;
                }
            }
        }
        let wait = turn.saturating_duration_since(now);
        if !wait.is_zero() {
            self.delayed.fetch_add(1, Ordering::Relaxed);
        }
        Turn { wait, taken }
    }

    /// Gives back what `turn` added to its keys' next turns (never earlier than a key's last
    /// failure plus its delay) and ends its pending attempt; keys cleared or forgotten since
    /// are left alone.
    fn give_back(&self, turn: &Turn) {
        self.give_back_locked(&mut self.lock(), turn);
    }

    fn give_back_locked(&self, entries: &mut HashMap<Key, Entry>, turn: &Turn) {
        for (key, generation, added) in &turn.taken {
            if let Some(entry) = entries.get_mut(key).filter(|e| e.generation == *generation) {
                entry.pending = entry.pending.saturating_sub(1);
                let floor = entry.last_failure + self.delay(entry.failures);
                let back = entry.next_turn.checked_sub(*added).unwrap_or(floor);
                entry.next_turn = back.max(floor);
            }
        }
    }

    /// Books the outcome of the attempt that held `turn`, under one lock, so that no other
    /// attempt sees it neither pending nor booked.
    fn book(&self, address: IpAddr, user: &str, outcome: Outcome, turn: &Turn) {
        let mut entries = self.lock();
        match outcome {
            Outcome::Failed(now) => {
                for (key, generation, _) in &turn.taken {
                    if let Some(entry) = entries.get_mut(key).filter(|e| e.generation == *generation) {
                        entry.pending = entry.pending.saturating_sub(1);
                    }
                }
                self.failed_locked(&mut entries, now, address, user);
            }
            Outcome::Succeeded => {
                self.succeeded_locked(&mut entries, address, user);
                self.give_back_locked(&mut entries, turn);
            }
        }
    }

    /// A failed attempt: both keys' failure counts grow, and so does their delay.
    fn failed_locked(&self, entries: &mut HashMap<Key, Entry>, now: Instant, address: IpAddr, user: &str) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        let whose = self.hasher.hash_one(user);
        let keys = [Key::Address(address), Key::User(user.to_string())];
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
                pending: 0,
                next_turn: now,
                last_failure: now,
                generation: self.generations.fetch_add(1, Ordering::Relaxed),
                failed_users: FailedUsers::One(whose),
            });
            entry.failed_users = entry.failed_users.with(whose);
            entry.failures = entry.failures.saturating_add(1);
            entry.next_turn = entry.next_turn.max(now + self.delay(entry.failures));
            entry.last_failure = now;
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

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Entry>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
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
        t.failed_locked(&mut t.lock(), now, address, user);
    }

    /// A success booked without a turn.
    fn succeed(t: &LoginThrottle, address: IpAddr, user: &str) {
        t.succeeded_locked(&mut t.lock(), address, user);
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
        assert_eq!(t.lock().len(), 5);
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
        assert!(t.lock().is_empty());
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
}
