//! Slowing down password guessing: failed logins delay the next attempts of the same client
//! address and of the same user name, exponentially and bounded.
//!
//! Each key (an address, a user name) that has failed `n` times in a row must wait
//! `failure-delay × 2^(n-1)` (at most `max-failure-delay`) between attempts. An attempt first
//! *reserves* its turn ([`LoginThrottle::reserve`]): it gets the time to wait before its
//! password may be checked, and takes the key's next turn, so that many parallel connections
//! guessing for one user or from one address are serialised at the delay, not multiplied. An
//! attempt that ends before its turn came (its connection closed) gives the turn back
//! ([`HeldTurn`]), so attempts abandoned by the thousand cannot push a user's next login
//! arbitrarily far away. A success clears its user's key, and its address's key only when
//! every failure counted there was for that same user (someone mistyping their own password):
//! an address guessing other users' passwords keeps its delay however often it also logs in
//! with an account of its own. A key whose last failure is `6 × max-failure-delay` old is
//! forgotten (its next attempt neither waits nor takes a turn), however many attempts came
//! since; at most `max-tracked` keys are kept (when the table is full of keys that failed
//! recently, a new key is not tracked: the other key of the attempt still is).
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
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    failures: u32,
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
/// may be checked, and what it added to its keys' next turns (given back by
/// [`LoginThrottle::give_back`] when the attempt is abandoned before its turn).
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Turn {
    pub wait: Duration,
    taken: Vec<(Key, u64, Duration)>,
}

/// A waiting attempt's [`Turn`]: dropped before [`HeldTurn::come`], the turn is given back.
#[derive(Debug)]
pub struct HeldTurn {
    throttle: Arc<LoginThrottle>,
    turn: Option<Turn>,
}

impl HeldTurn {
    /// How long the attempt waits for its turn.
    pub fn wait(&self) -> Duration {
        self.turn.as_ref().map(|turn| turn.wait).unwrap_or_default()
    }

    /// The turn has come and the attempt is checked: nothing is given back.
    pub fn come(mut self) {
        self.turn = None;
    }
}

impl Drop for HeldTurn {
    fn drop(&mut self) {
        if let Some(turn) = self.turn.take() {
            self.throttle.give_back(&turn);
        }
    }
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

    /// How long an attempt by `user` from `address` must wait before its password is checked;
    /// takes the keys' next turns (see the module documentation).
    pub fn reserve(&self, now: Instant, address: IpAddr, user: &str) -> Turn {
        let mut entries = self.lock();
        let keys = [Key::Address(address), Key::User(user.to_string())];
        self.forget_expired(&mut entries, &keys, now);
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
                    let after = turn + self.delay(entry.failures);
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

    /// [`reserve`](Self::reserve) for an attempt that waits: the turn is given back if the
    /// attempt is dropped before it comes.
    pub fn hold(self: &Arc<Self>, now: Instant, address: IpAddr, user: &str) -> HeldTurn {
        HeldTurn {
            throttle: Arc::clone(self),
            turn: Some(self.reserve(now, address, user)),
        }
    }

    /// Gives back what `turn` added to its keys' next turns (never earlier than a key's last
    /// failure plus its delay); keys cleared or forgotten since are left alone.
    pub fn give_back(&self, turn: &Turn) {
        let mut entries = self.lock();
        for (key, generation, added) in &turn.taken {
            if let Some(entry) = entries.get_mut(key).filter(|e| e.generation == *generation) {
                let floor = entry.last_failure + self.delay(entry.failures);
                let back = entry.next_turn.checked_sub(*added).unwrap_or(floor);
                entry.next_turn = back.max(floor);
            }
        }
    }

    /// For callers that refuse instead of waiting (HTTP answers 429): `Ok` when the attempt may
    /// be checked now (it takes the keys' turn, like [`reserve`](Self::reserve) with no wait),
    /// else `Err` with how long until it may; a refused attempt takes no turn, so refusals
    /// never push the next turn further away.
    pub fn try_now(&self, now: Instant, address: IpAddr, user: &str) -> Result<(), Duration> {
        let wait = {
            let mut entries = self.lock();
            let keys = [Key::Address(address), Key::User(user.to_string())];
            self.forget_expired(&mut entries, &keys, now);
            keys.iter()
                .filter_map(|key| entries.get(key))
                .filter(|entry| entry.failures > 0)
                .map(|entry| entry.next_turn.saturating_duration_since(now))
                .max()
                .unwrap_or_default()
        };
        if !wait.is_zero() {
            self.delayed.fetch_add(1, Ordering::Relaxed);
            return Err(wait);
        }
        let _taken = self.reserve(now, address, user);
        Ok(())
    }

    /// A failed attempt: both keys' failure counts grow, and so does their delay.
    pub fn failed(&self, now: Instant, address: IpAddr, user: &str) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        let whose = self.hasher.hash_one(user);
        let mut entries = self.lock();
        let keys = [Key::Address(address), Key::User(user.to_string())];
        self.forget_expired(&mut entries, &keys, now);
        for key in keys {
            if !entries.contains_key(&key) && !self.make_room(&mut entries, now) {
                continue;
            }
            let entry = entries.entry(key).or_insert_with(|| Entry {
                failures: 0,
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
    pub fn succeeded(&self, address: IpAddr, user: &str) {
        let whose = self.hasher.hash_one(user);
        let mut entries = self.lock();
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
            .values()
            .filter(|entry| !self.expired(entry, now))
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
    /// every tracked key failed recently (the new key is then not tracked).
    fn make_room(&self, entries: &mut HashMap<Key, Entry>, now: Instant) -> bool {
        if entries.len() < self.config.max_tracked {
            return true;
        }
        entries.retain(|_, entry| !self.expired(entry, now));
        entries.len() < self.config.max_tracked
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

    fn throttle() -> LoginThrottle {
        LoginThrottle::new(ThrottleConfig {
            failure_delay: 100 * MS,
            max_failure_delay: 800 * MS,
            max_tracked: 4,
        })
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn delays_double_per_failure_up_to_the_bound() {
        let t = throttle();
        let now = Instant::now();
        assert_eq!(
            t.reserve(now, ip(1), "u").wait,
            Duration::ZERO,
            "no failure, no wait"
        );
        let mut waits = Vec::new();
        let mut clock = now;
        for _ in 0..6 {
            t.failed(clock, ip(1), "u");
            let wait = t.reserve(clock, ip(1), "u").wait;
            waits.push(wait);
            clock += wait;
        }
        assert_eq!(
            waits,
            [100 * MS, 200 * MS, 400 * MS, 800 * MS, 800 * MS, 800 * MS]
        );
        assert_eq!(t.failures_total(), 6);
    }

    #[test]
    fn parallel_attempts_are_serialised_not_multiplied() {
        let t = throttle();
        let now = Instant::now();
        for _ in 0..3 {
            t.failed(now, ip(1), "admin");
        }
        // Three failures: 400 ms between turns. Ten parallel attempts wait 400, 800, ... ms.
        let waits: Vec<Duration> = (0..4).map(|_| t.reserve(now, ip(1), "admin").wait).collect();
        assert_eq!(waits, [400 * MS, 800 * MS, 1200 * MS, 1600 * MS]);
        // The user key holds even from another address; the address key for another user.
        assert_eq!(t.reserve(now, ip(2), "admin").wait, 2000 * MS);
        assert_eq!(t.reserve(now, ip(1), "other").wait, 2000 * MS);
        assert_eq!(t.reserve(now, ip(3), "other").wait, Duration::ZERO);
    }

    #[test]
    fn a_zero_delay_never_waits() {
        let t = LoginThrottle::new(ThrottleConfig {
            failure_delay: Duration::ZERO,
            ..ThrottleConfig::default()
        });
        let now = Instant::now();
        for _ in 0..5 {
            t.failed(now, ip(1), "u");
            assert_eq!(t.reserve(now, ip(1), "u").wait, Duration::ZERO);
            assert_eq!(t.try_now(now, ip(1), "u"), Ok(()));
        }
        assert_eq!(t.failures_total(), 5, "failures are still counted");
    }

    #[test]
    fn refusing_callers_do_not_push_the_turn() {
        let t = throttle();
        let now = Instant::now();
        assert_eq!(t.try_now(now, ip(1), "u"), Ok(()));
        t.failed(now, ip(1), "u");
        assert_eq!(t.try_now(now, ip(1), "u"), Err(100 * MS));
        assert_eq!(
            t.try_now(now + 50 * MS, ip(2), "u"),
            Err(50 * MS),
            "the user key holds"
        );
        assert_eq!(
            t.try_now(now + 100 * MS, ip(1), "u"),
            Ok(()),
            "refusals took no turn"
        );
        assert_eq!(
            t.try_now(now + 100 * MS, ip(1), "u"),
            Err(100 * MS),
            "that one did"
        );
    }

    #[test]
    fn success_clears_and_idle_keys_are_forgotten_when_full() {
        let t = throttle();
        let now = Instant::now();
        t.failed(now, ip(1), "a");
        t.succeeded(ip(1), "a");
        assert_eq!(t.reserve(now, ip(1), "a").wait, Duration::ZERO);
        t.failed(now, ip(1), "a");
        t.failed(now, ip(2), "b");
        assert_eq!(t.tracked(), 4);
        // Full of recent keys: a new pair is not tracked, the table stays bounded.
        t.failed(now, ip(3), "c");
        assert_eq!(t.tracked(), 4);
        assert_eq!(t.reserve(now, ip(3), "c").wait, Duration::ZERO);
        // Much later the old keys are forgotten to make room.
        let later = now + 800 * MS * 7;
        t.failed(later, ip(3), "c");
        assert_eq!(t.tracked(), 2);
        assert_eq!(t.reserve(later, ip(3), "c").wait, 100 * MS);
    }

    #[test]
    fn a_success_keeps_the_delay_of_an_address_guessing_other_users() {
        let t = throttle();
        let now = Instant::now();
        // Someone mistyping their own password: their success clears the address too.
        t.failed(now, ip(1), "alice");
        t.failed(now, ip(1), "alice");
        t.succeeded(ip(1), "alice");
        assert_eq!(t.reserve(now, ip(1), "carol").wait, Duration::ZERO);
        // Guesses for bob and carol between logins as alice: the address keeps its delay and
        // it keeps growing, while alice's own key is cleared.
        let mut clock = now;
        let mut waits = Vec::new();
        for victim in ["bob", "carol", "dave", "erin"] {
            let wait = t.reserve(clock, ip(2), victim).wait;
            waits.push(wait);
            clock += wait;
            t.failed(clock, ip(2), victim);
            t.succeeded(ip(2), "alice");
        }
        assert_eq!(waits, [Duration::ZERO, 100 * MS, 200 * MS, 400 * MS]);
        assert_eq!(t.reserve(clock, ip(3), "alice").wait, Duration::ZERO);
    }

    #[test]
    fn a_key_is_forgotten_six_max_delays_after_its_last_failure_whatever_came_since() {
        let t = throttle();
        let now = Instant::now();
        // Failures for two users from one address: a success does not clear the address.
        t.failed(now, ip(1), "x");
        t.failed(now, ip(1), "y");
        let mut clock = now;
        let mut waits = Vec::new();
        // Logins that succeed, one every 400 ms, for 6 x 800 ms: each waits for its turn.
        while clock < now + 6 * 800 * MS {
            let wait = t.reserve(clock, ip(1), "admin").wait;
            waits.push(wait);
            t.succeeded(ip(1), "admin");
            clock += 400 * MS;
        }
        assert!(waits.iter().any(|w| !w.is_zero()), "{waits:?}");
        // 6 x max-failure-delay after the last failure the address is forgotten: the logins
        // since did not keep it, and the next ones neither wait nor are refused.
        let later = now + 6 * 800 * MS;
        assert_eq!(t.reserve(later, ip(1), "admin").wait, Duration::ZERO);
        assert_eq!(t.reserve(later, ip(1), "admin").wait, Duration::ZERO);
        assert_eq!(t.try_now(later, ip(1), "admin"), Ok(()));
        assert_eq!(t.try_now(later, ip(1), "admin"), Ok(()));
        assert_eq!(t.tracked_at(later), 0, "the gauge counts no forgotten key");
        assert_eq!(t.reserve(later, ip(3), "x").wait, Duration::ZERO, "x's key too");
        assert_eq!(t.reserve(later, ip(3), "y").wait, Duration::ZERO, "y's key too");
        assert_eq!(t.tracked(), 0);
        // A failure after that starts again from the first delay.
        t.failed(later, ip(1), "x");
        assert_eq!(t.reserve(later, ip(1), "x").wait, 100 * MS);

        // A key that keeps failing is kept: its delay is never forgotten mid-guessing.
        let t = throttle();
        let mut clock = now;
        for _ in 0..20 {
            let wait = t.reserve(clock, ip(2), "victim").wait;
            clock += wait;
            t.failed(clock, ip(2), "victim");
        }
        assert_eq!(t.reserve(clock, ip(2), "victim").wait, 800 * MS);
    }

    #[test]
    fn abandoned_turns_are_given_back() {
        let t = Arc::new(throttle());
        let now = Instant::now();
        t.failed(now, ip(1), "admin");
        // Twenty attempts for admin from other addresses wait 100, 200, ... ms, then their
        // connections close before their turns: the next attempt waits as if they never were.
        let held: Vec<HeldTurn> = (0..20).map(|i| t.hold(now, ip(10 + i), "admin")).collect();
        assert_eq!(held[19].wait(), 2000 * MS);
        drop(held);
        assert_eq!(t.reserve(now, ip(2), "admin").wait, 100 * MS);

        // A turn that came is kept; one given back never goes below the last failure's delay.
        let first = t.hold(now, ip(3), "admin");
        assert_eq!(first.wait(), 200 * MS);
        first.come();
        assert_eq!(t.reserve(now, ip(4), "admin").wait, 300 * MS);
        let later = t.hold(now, ip(5), "admin");
        t.failed(now + 50 * MS, ip(6), "admin"); // 2 failures: 200 ms after this one
        drop(later);
        assert_eq!(t.reserve(now + 50 * MS, ip(7), "admin").wait, 400 * MS - 50 * MS);

        // A key cleared and made again is not shortened by a turn of the old one.
        let old = t.hold(now, ip(8), "admin");
        t.succeeded(ip(8), "admin");
        t.failed(now, ip(9), "admin");
        assert_eq!(t.reserve(now, ip(12), "admin").wait, 100 * MS);
        drop(old);
        assert_eq!(t.reserve(now, ip(11), "admin").wait, 200 * MS);

        // A failure booked while a turn waits sets a floor the give-back does not go under.
        let t = Arc::new(throttle());
        t.failed(now, ip(1), "u");
        let waiting = t.hold(now, ip(13), "u");
        assert_eq!(waiting.wait(), 100 * MS);
        t.failed(now + 50 * MS, ip(14), "u"); // 2 failures: not before now + 250 ms
        drop(waiting);
        assert_eq!(t.reserve(now + 50 * MS, ip(15), "u").wait, 200 * MS);
    }
}
