//! How CPU-heavy work on a core gives the core back to the connections it also serves, and the
//! core's waiting primitives ([`FairSemaphore`], [`AddressAllowances`], [`StopSignal`]).
//!
//! Everything on a core runs in glommio's one default task queue. glommio only polls for I/O
//! (sockets becoming readable, completions) between runs of its task queues, and a run ends
//! when the queue is empty or the preemption timer (100 ms) fires, so a task that merely
//! yields inside the queue (`yield_now`, `yield_if_needed`) keeps every waiting connection
//! unseen for up to 100 ms. [`yield_to_io`] instead waits on a 1 µs timer: the task is not
//! runnable until the reactor has polled, so the queue drains, glommio polls I/O, and the
//! readers that became ready run before the yielding task goes on.
//!
//! Separate task queues with `Latency::Matters` (which lower the preemption timer to their
//! latency), and a shorter preemption timer by itself, were tried and dropped: with either,
//! glommio 0.9 left a core parked in `io_uring_enter` with no wake-up to come, during
//! start-up (1 hang in 3–5 starts of `broker/tests/broker_shutdown.rs`, none in 16 without;
//! docs/benchmarks.md). The cause is in glommio 0.9's executor loop: `run_task_queues` stops
//! before running anything when the latency ring already holds a completion (`need_preempt`),
//! returns `false` as if no queue were runnable, and the loop parks with runnable queues and no
//! wake-up to come (fixed in the `glommio/glommio` fork, pull request 53, "do not park the
//! executor while a task queue is still runnable"; no release on crates.io carries it). A
//! shorter preemption timer puts a completion there far more often, hence the hangs; see
//! docs/architecture.md.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use glommio::sync::{Semaphore, StaticPermit};

/// The longest stretch of CPU work (decoding and converting the jobs of a bucket's group write)
/// that runs before the core polls its connections: 250 µs, so a big batch never keeps a
/// waiting connection unseen for long, while a request of a few hundred records (about 100 µs)
/// converts without a pause. Each pause is a trip through glommio's reactor and often a park
/// of the core; pausing every 256 records cost 5 % of the CPU per row at half rate
/// (docs/benchmarks.md).
pub const SLICE: Duration = Duration::from_micros(250);

/// Records converted between two looks at the clock (a 100-byte JSON record converts in about
/// 0.2 µs in a release build, so a check every 64 costs nothing measurable and overshoots
/// [`SLICE`] by a few microseconds).
pub const CHECK_EVERY_RECORDS: usize = 64;

/// The CPU work of one group write, measured in slices: [`Slice::check`] lets the core poll
/// its connections once the work since the start (or the last pause) has run [`SLICE`].
#[derive(Debug)]
pub struct Slice {
    since: Instant,
}

impl Slice {
    /// A slice that starts now.
    pub fn start() -> Self {
        Self {
            since: Instant::now(),
        }
    }

    /// Pauses ([`yield_to_io`]) when this slice has run [`SLICE`], then starts the next.
    pub async fn check(&mut self) {
        if self.since.elapsed() >= SLICE {
            yield_to_io().await;
            self.since = Instant::now();
        }
    }
}

/// Lets the core poll for I/O and run what became ready, then resumes.
pub async fn yield_to_io() {
    glommio::timer::sleep(Duration::from_micros(1)).await;
}

/// Logs at WARN when one stretch of work that never awaits (`what`) held the core longer than
/// `bound` (`server.stall-threshold`; 0: never). glommio's own detector (runtime/stall.rs)
/// only sees runs longer than its 100 ms preemption timer; this names the step.
pub fn held(what: std::fmt::Arguments<'_>, started: Instant, bound: Duration) {
    let took = started.elapsed();
    if !bound.is_zero() && took > bound {
        tracing::warn!(target: "kafluss::stall", "core held for {took:?} (server.stall-threshold {bound:?}) by {what}");
    }
}

/// A core's memory budget (`kafka.max-request-memory`, `kafka.max-answer-memory`,
/// `kafka.max-append-memory`) whose waiters are served in arrival order.
///
/// glommio's semaphore, on each release, wakes every waiter that fits in what is free, in queue
/// order but skipping those that do not fit: while small requests keep arriving and releasing, a
/// large one behind them never sees enough free at once and waits for ever (its producer times
/// out and retries into the same queue). Here only the first waiter waits for units; the others
/// wait for their turn (one unit each of a second semaphore, so glommio serves them first come,
/// first served), and an acquisition that would not wait ([`FairSemaphore::try_acquire`]) fails
/// while anyone waits, so nothing overtakes the first waiter.
#[derive(Debug)]
pub struct FairSemaphore {
    units: Rc<Semaphore>,
    /// One unit, held by the waiter that waits on `units`.
    turn: Semaphore,
}

impl FairSemaphore {
    pub fn new(units: u64) -> Self {
        Self {
            units: Rc::new(Semaphore::new(units)),
            turn: Semaphore::new(1),
        }
    }

    /// `units`, now, if nobody waits and they are free.
    pub fn try_acquire(&self, units: u64) -> Option<StaticPermit> {
        // glommio's try refuses while its queue holds a waiter; the first waiter is in it from
        // its first poll on, and the turn's holder is first.
        if self.turn.available() == 0 {
            return None;
        }
        self.units.try_acquire_static_permit(units).ok()
    }

    /// `units`, after every earlier waiter got what it waits for. Fails only if the semaphore was
    /// closed (never, today).
    pub async fn acquire(&self, units: u64) -> Result<StaticPermit, glommio::GlommioError<()>> {
        if let Some(permit) = self.try_acquire(units) {
            return Ok(permit);
        }
        let _turn = self.turn.acquire_permit(1).await?;
        self.units.acquire_static_permit(units).await
    }
}

/// One [`FairSemaphore`] of `allowance` units per client address, on one core
/// (`kafka.max-request-memory-per-address`): what the connections of one address may hold at
/// once. A connection takes its address's [`AddressAllowance`] when it starts and keeps it for
/// its life; an address has an entry only while some connection of it holds one, so the map
/// never outgrows the core's connections, and a frame's reservation costs no map lookup.
#[derive(Debug)]
pub struct AddressAllowances {
    allowance: u64,
    addresses: RefCell<HashMap<IpAddr, Rc<FairSemaphore>>>,
}

impl AddressAllowances {
    pub fn new(allowance: u64) -> Self {
        Self {
            allowance,
            addresses: RefCell::new(HashMap::new()),
        }
    }

    /// `address`'s allowance, shared with the other connections of that address on this core.
    pub fn of(self: &Rc<Self>, address: IpAddr) -> AddressAllowance {
        let semaphore = self
            .addresses
            .borrow_mut()
            .entry(address)
            .or_insert_with(|| Rc::new(FairSemaphore::new(self.allowance)))
            .clone();
        AddressAllowance {
            allowances: self.clone(),
            address,
            semaphore,
        }
    }

    /// Addresses with a connection on this core now.
    pub fn addresses(&self) -> usize {
        self.addresses.borrow().len()
    }
}

/// One connection's hold on its address's allowance ([`AddressAllowances::of`]); the last one
/// of an address dropped forgets the address. The connection drops it only after every answer
/// it made is written, so its permits are given back before its address can be forgotten.
#[derive(Debug)]
pub struct AddressAllowance {
    allowances: Rc<AddressAllowances>,
    address: IpAddr,
    semaphore: Rc<FairSemaphore>,
}

impl AddressAllowance {
    /// `units` of the address's allowance, after every earlier waiter of that address got
    /// what it waits for (in arrival order, as [`FairSemaphore::acquire`]). `units` must not
    /// exceed the allowance (the caller's bound: the configuration keeps it at least one
    /// largest frame).
    pub async fn acquire(&self, units: u64) -> Result<StaticPermit, glommio::GlommioError<()>> {
        self.semaphore.acquire(units).await
    }
}

impl Drop for AddressAllowance {
    fn drop(&mut self) {
        // The map's reference and this one: no other connection of this address is left.
        if Rc::strong_count(&self.semaphore) == 2 {
            self.allowances.addresses.borrow_mut().remove(&self.address);
        }
    }
}

/// A one-way broadcast on one core: "shutdown has begun", "the client went away", "log what you
/// wait to log now". Every task waiting in [`StopSignal::stopping`] wakes when it is stopped.
pub struct StopSignal {
    /// Never has permits; closed by `stop`, which wakes everyone waiting in `stopping`.
    stop: Rc<Semaphore>,
    stopped: Cell<bool>,
}

impl Default for StopSignal {
    fn default() -> Self {
        Self {
            stop: Rc::new(Semaphore::new(0)),
            stopped: Cell::new(false),
        }
    }
}

impl StopSignal {
    pub fn is_stopping(&self) -> bool {
        self.stopped.get()
    }

    /// Resolves once stopped.
    pub async fn stopping(&self) {
        // `acquire` fails only when the semaphore is closed; it never has permits.
        let _ = self.stop.acquire(1).await;
    }

    /// Stops (once), waking every task waiting in [`StopSignal::stopping`].
    pub fn stop(&self) {
        if !self.stopped.replace(true) {
            self.stop.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// 10 units, 9 held as nine permits of one: a waiter for 5, then a stream of waiters for 1.
    /// Releasing one unit at a time, the waiter for 5 gets its units once 5 are free, before
    /// any later waiter: with glommio's semaphore alone, each freed unit went to a waiter for 1
    /// behind it, and the waiter for 5 was still waiting when all of them were served.
    #[test]
    fn a_large_waiter_is_served_before_small_ones_that_came_after_it() {
        let executor = glommio::LocalExecutorBuilder::default().make().unwrap();
        let order = executor.run(async {
            let memory = Rc::new(FairSemaphore::new(10));
            let mut held: Vec<StaticPermit> = (0..9).map(|_| memory.try_acquire(1).unwrap()).collect();
            let order = Rc::new(RefCell::new(Vec::new()));
            let mut waiters = Vec::new();
            for (name, units) in [
                ("large", 5),
                ("small-1", 1),
                ("small-2", 1),
                ("small-3", 1),
                ("small-4", 1),
            ] {
                let (memory, order) = (memory.clone(), order.clone());
                waiters.push(glommio::spawn_local(async move {
                    let permit = memory.acquire(units).await.unwrap();
                    order.borrow_mut().push(name);
                    permit
                }));
                // Each waiter queues before the next arrives.
                yield_to_io().await;
            }
            assert!(memory.try_acquire(1).is_none(), "a try overtakes the waiters");
            // What the waiters get stays held (in their tasks' output), as a request keeps its
            // memory until answered.
            while let Some(permit) = held.pop() {
                drop(permit);
                yield_to_io().await;
                yield_to_io().await;
            }
            let served = order.borrow().clone();
            drop(waiters);
            served
        });
        assert_eq!(order, ["large", "small-1", "small-2", "small-3", "small-4"]);
    }

    /// An address's second frame waits for its first (another address does not), and the map
    /// keeps an address only while a connection of it holds its allowance.
    #[test]
    fn an_address_waits_for_its_own_earlier_frames_and_is_forgotten_after_its_last() {
        let executor = glommio::LocalExecutorBuilder::default().make().unwrap();
        executor.run(async {
            let allowances = Rc::new(AddressAllowances::new(10));
            let one: IpAddr = [127, 0, 0, 1].into();
            let two: IpAddr = [127, 0, 0, 2].into();
            let (one_a, one_b, two_a) = (allowances.of(one), allowances.of(one), allowances.of(two));
            assert_eq!(allowances.addresses(), 2);
            let first = one_a.acquire(10).await.unwrap();
            let other = two_a.acquire(10).await.unwrap();
            let got = Rc::new(Cell::new(false));
            let second = glommio::spawn_local({
                let got = got.clone();
                async move {
                    let permit = one_b.acquire(1).await.unwrap();
                    got.set(true);
                    (one_b, permit)
                }
            });
            yield_to_io().await;
            assert!(
                !got.get(),
                "the address's allowance is held by its other connection"
            );
            drop((other, two_a));
            assert_eq!(allowances.addresses(), 1, "the other address had one connection");
            drop(first);
            let (one_b, second) = second.await;
            assert!(got.get());
            drop((one_a, second));
            assert_eq!(allowances.addresses(), 1, "a connection of the address is left");
            drop(one_b);
            assert_eq!(allowances.addresses(), 0);
        });
    }
}
