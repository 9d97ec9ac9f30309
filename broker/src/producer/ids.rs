//! Producer ids, unique for the node's lifetime and across restarts.
//!
//! `data.dir/producer-ids.next` holds a bound: every id handed out is below the value it holds
//! durably, so a restart (or a crash) continues at the stored value and never hands an id out
//! twice. Ids below `end` (the last value written durably) are reserved; `next` is the next to
//! hand out. The file is written crash-safely (temp file, fsync, rename, fsync of the
//! directory: the catalog's `write_atomically`), [`BLOCK_SIZE`] ids at a time.
//!
//! - At start ([`ProducerIds::open`]) the first block is reserved, before any core runs.
//! - Afterwards a reservation runs on the blocking thread of the core whose InitProducerId
//!   started it (glommio's `spawn_blocking`, as segment unlinks and large decodes do), never on a
//!   core thread, and no lock that an allocation takes is held across it: the cores share one
//!   mutex over a few integers, held for an increment.
//! - It starts ahead, when at most half a block is left ([`ProducerIds::allocate`] hands out ids
//!   from the current reservation meanwhile), so InitProducerId normally never waits for a disk.
//!   A restart therefore skips at most one and a half blocks.
//! - At most one reservation is in flight. An allocation that finds every reserved id handed
//!   out waits (asynchronously, on any core) for the reservation in flight, or starts one. A
//!   reservation that fails is the error of every allocation waiting for it (the request is
//!   refused, KAFKA_STORAGE_ERROR, which clients retry); the next allocation that needs one
//!   starts it again. A reservation started ahead that fails, with nobody waiting, is logged
//!   once and not started ahead again for that block.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

use crate::catalog::store::{write_atomically, StoreError};

/// The file holding the first id of the next unreserved block (decimal, one line).
pub const IDS_FILE: &str = "producer-ids.next";

/// Ids reserved per durable write (as Kafka's producer id blocks).
pub const BLOCK_SIZE: i64 = 1000;

/// Writes `end` to the file at the path given, durably (on a blocking thread, never a core's).
/// The default is [`write_end`]; tests put a hook in its place.
pub type WriteEnd = Arc<dyn Fn(&Path, i64) -> Result<(), StoreError> + Send + Sync>;

/// The default [`WriteEnd`]: `end` in decimal and a newline, written crash-safely.
pub fn write_end(path: &Path, end: i64) -> Result<(), StoreError> {
    write_atomically(path, format!("{end}\n").as_bytes(), None)
}

#[derive(Debug, thiserror::Error)]
pub enum ProducerIdError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{} is corrupt: {content:?} is not a producer id", path.display())]
    Corrupt { path: PathBuf, content: String },
    #[error("cannot reserve producer ids: {0}")]
    Reserve(#[source] Arc<StoreError>),
    /// The task writing a reservation was dropped before it finished (its core is stopping).
    #[error("cannot reserve producer ids: the reservation was interrupted (the server is stopping)")]
    Interrupted,
    #[error("every producer id has been handed out")]
    Exhausted,
}

/// How a reservation ended: written, or the write's error.
type Outcome = Result<(), Arc<StoreError>>;

#[derive(Debug)]
struct State {
    /// The next id to hand out.
    next: i64,
    /// Ids below this are reserved on disk.
    end: i64,
    /// A reservation is in flight (at most one).
    reserving: bool,
    /// Allocations waiting for the reservation in flight (every reserved id is handed out);
    /// `None` when it was interrupted.
    waiters: Vec<oneshot::Sender<Option<Outcome>>>,
    /// The `end` at which a reservation started ahead failed: none is started ahead again
    /// until a reservation succeeds (the one an exhausted block needs is still tried).
    ahead_failed_at: Option<i64>,
}

/// The node's producer id source; shared by every core.
pub struct ProducerIds {
    path: PathBuf,
    block_size: i64,
    state: Mutex<State>,
    write: WriteEnd,
    /// The highest value this process wrote to the file. Taken only by reservations, on a
    /// blocking thread, around the write: a write never lowers the file, even if a reservation
    /// whose task was dropped is still writing when the next one starts.
    written: Mutex<i64>,
}

impl std::fmt::Debug for ProducerIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProducerIds")
            .field("path", &self.path)
            .field("block_size", &self.block_size)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl ProducerIds {
    /// Reads `data_dir/producer-ids.next` (0 when missing) and reserves the first block, on
    /// the calling thread (at start, before any core serves).
    pub fn open(data_dir: &Path) -> Result<Self, ProducerIdError> {
        Self::open_with(data_dir, BLOCK_SIZE, Arc::new(write_end))
    }

    /// [`ProducerIds::open`] with another block size and file writer (tests).
    pub fn open_with(data_dir: &Path, block_size: i64, write: WriteEnd) -> Result<Self, ProducerIdError> {
        let path = data_dir.join(IDS_FILE);
        let start = match std::fs::read_to_string(&path) {
            Ok(text) => text
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|id| *id >= 0)
                .ok_or_else(|| ProducerIdError::Corrupt {
                    path: path.clone(),
                    content: text.chars().take(64).collect(),
                })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(source) => return Err(ProducerIdError::Read { path, source }),
        };
        let block_size = block_size.max(1);
        let end = start.checked_add(block_size).ok_or(ProducerIdError::Exhausted)?;
        let ids = Self {
            path,
            block_size,
            state: Mutex::new(State {
                next: start,
                end: start,
                reserving: false,
                waiters: Vec::new(),
                ahead_failed_at: None,
            }),
            write,
            written: Mutex::new(start),
        };
        ids.write_durably(end)
            .map_err(|e| ProducerIdError::Reserve(Arc::new(e)))?;
        ids.lock().end = end;
        Ok(ids)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is a few integers, each update complete before any call that could
        // panic: a panic while holding the lock cannot leave them inconsistent.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Makes `end` durable unless a value at least as high already is (blocking).
    fn write_durably(&self, end: i64) -> Result<(), StoreError> {
        let mut written = self
            .written
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if *written >= end {
            return Ok(());
        }
        (self.write)(&self.path, end)?;
        *written = end;
        Ok(())
    }

    /// A producer id never handed out before by this data directory. Returns at once while the
    /// reservation has ids left; waits for the reservation in flight, without blocking the
    /// core, only when every reserved id is handed out. Must run on a glommio executor (the
    /// reservation it may start runs on the core's blocking thread).
    pub async fn allocate(self: &Arc<Self>) -> Result<i64, ProducerIdError> {
        loop {
            let (reserve, waiting) = {
                let mut state = self.lock();
                if state.next < state.end {
                    let id = state.next;
                    state.next += 1;
                    let ahead = if state.end - state.next <= self.block_size / 2
                        && !state.reserving
                        && state.ahead_failed_at != Some(state.end)
                    {
                        // Nobody waits for it. At the largest ids there may be no further
                        // block; the allocation that exhausts this one says so.
                        self.claim_reservation(&mut state).ok()
                    } else {
                        None
                    };
                    drop(state);
                    if let Some(end) = ahead {
                        self.spawn_reservation(end);
                    }
                    return Ok(id);
                }
                let reserve = match state.reserving {
                    true => None,
                    false => Some(self.claim_reservation(&mut state)?),
                };
                let (sender, receiver) = oneshot::channel();
                state.waiters.push(sender);
                (reserve, receiver)
            };
            if let Some(end) = reserve {
                self.spawn_reservation(end);
            }
            match waiting.await {
                Ok(Some(Ok(()))) => continue,
                Ok(Some(Err(error))) => return Err(ProducerIdError::Reserve(error)),
                Ok(None) | Err(_) => return Err(ProducerIdError::Interrupted),
            }
        }
    }

    /// Marks the reservation of the block after `state.end` in flight: its end.
    fn claim_reservation(&self, state: &mut State) -> Result<i64, ProducerIdError> {
        let end = state
            .end
            .checked_add(self.block_size)
            .ok_or(ProducerIdError::Exhausted)?;
        state.reserving = true;
        Ok(end)
    }

    /// Writes the reservation claimed up to `end` on this core's blocking thread, which also
    /// finishes it: its waiters (on any core) learn the outcome even if this core stops first.
    /// Called without the state's lock (finishing takes it).
    fn spawn_reservation(self: &Arc<Self>, end: i64) {
        let mut reservation = Reservation {
            ids: self.clone(),
            end,
            finished: false,
        };
        let write = glommio::executor().spawn_blocking(move || {
            let written = reservation.ids.write_durably(end).map_err(Arc::new);
            reservation.finish(written);
        });
        // The job runs whether or not this is polled; awaiting it lets glommio reclaim it.
        glommio::spawn_local(write).detach();
    }

    /// Ends the reservation in flight: its ids become usable, or its waiters get the error.
    fn finish_reservation(&self, end: i64, outcome: Option<Outcome>) {
        let (waiters, failed_ahead) = {
            let mut state = self.lock();
            state.reserving = false;
            if let Some(Ok(())) = outcome {
                state.end = state.end.max(end);
                state.ahead_failed_at = None;
            } else {
                state.ahead_failed_at = Some(state.end);
            }
            let waiters = std::mem::take(&mut state.waiters);
            let failed_ahead = waiters.is_empty();
            (waiters, failed_ahead)
        };
        match &outcome {
            Some(Err(error)) if failed_ahead => tracing::warn!(
                "cannot reserve producer ids ahead (up to {end}): {error}; InitProducerId tries \
                 again when the reserved ids are handed out"
            ),
            _ => {}
        }
        for waiter in waiters {
            // A waiter whose request was dropped is gone: nothing to tell.
            let _ = waiter.send(outcome.clone());
        }
    }

    /// Whether `id` may have been handed out by this data directory (it is below every id
    /// still to come).
    pub fn may_have_issued(&self, id: i64) -> bool {
        id >= 0 && id < self.lock().next
    }
}

/// The reservation in flight, owned by the blocking job that writes it: finished with the
/// write's outcome, or, if the job is dropped unrun (its executor stops), with an error, so
/// that no allocation waits for it forever and the next one can start another.
struct Reservation {
    ids: Arc<ProducerIds>,
    end: i64,
    finished: bool,
}

impl Reservation {
    fn finish(&mut self, outcome: Outcome) {
        self.finished = true;
        self.ids.finish_reservation(self.end, Some(outcome));
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.finished {
            self.ids.finish_reservation(self.end, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use glommio::{ExecutorJoinHandle, LocalExecutorBuilder, Placement};
    use std::sync::mpsc;

    /// What an allocation answers.
    type Answer = Result<i64, ProducerIdError>;

    /// A request for an id, served by a [`Core`].
    struct Allocate {
        /// The answer at the allocation's first poll; `None` when it waits.
        now: oneshot::Sender<Option<Answer>>,
        /// The answer of an allocation that waited.
        later: oneshot::Sender<Answer>,
    }

    /// A glommio executor on its own thread (a core), allocating on request.
    struct Core {
        commands: tokio::sync::mpsc::UnboundedSender<Allocate>,
        handle: ExecutorJoinHandle<()>,
    }

    impl Core {
        fn start(ids: &Arc<ProducerIds>) -> Core {
            let ids = ids.clone();
            let (commands, mut received) = tokio::sync::mpsc::unbounded_channel::<Allocate>();
            let handle = LocalExecutorBuilder::new(Placement::Unbound)
                .io_memory(1 << 20)
                .spawn(move || async move {
                    while let Some(Allocate { now, later }) = received.recv().await {
                        let ids = ids.clone();
                        let mut allocation = Box::pin(async move { ids.allocate().await });
                        match futures_lite::future::poll_once(&mut allocation).await {
                            Some(result) => {
                                let _ = now.send(Some(result));
                            }
                            None => {
                                let _ = now.send(None);
                                glommio::spawn_local(async move {
                                    let _ = later.send(allocation.await);
                                })
                                .detach();
                            }
                        }
                    }
                })
                .unwrap();
            Core { commands, handle }
        }

        fn request(&self) -> (Option<Answer>, oneshot::Receiver<Answer>) {
            let (now, now_answer) = oneshot::channel();
            let (later, later_answer) = oneshot::channel();
            self.commands.send(Allocate { now, later }).unwrap();
            (now_answer.blocking_recv().unwrap(), later_answer)
        }

        /// An id handed out at once: the allocation must not wait.
        fn now(&self) -> i64 {
            match self.request().0 {
                Some(result) => result.unwrap(),
                None => panic!("the allocation waited, with reserved ids left"),
            }
        }

        /// An allocation that must wait (every reserved id is handed out): its answer.
        fn waiting(&self) -> oneshot::Receiver<Answer> {
            let (now, later) = self.request();
            assert!(now.is_none(), "answered at once: {now:?}");
            later
        }

        fn stop(self) {
            drop(self.commands);
            self.handle.join().unwrap();
        }
    }

    /// A file writer that tells each write's value, then blocks until the test decides it:
    /// written (true) or failed (false).
    struct Disk {
        entered: mpsc::Receiver<i64>,
        decide: mpsc::Sender<bool>,
    }

    impl Disk {
        fn new() -> (WriteEnd, Disk) {
            let (entered, entered_answer) = mpsc::channel();
            let (decide, decided) = mpsc::channel::<bool>();
            let (entered, decided) = (Mutex::new(entered), Mutex::new(decided));
            let write: WriteEnd = Arc::new(move |path: &Path, end: i64| {
                let _ = entered.lock().unwrap().send(end);
                match decided.lock().unwrap().recv() {
                    Ok(true) => write_end(path, end),
                    _ => Err(StoreError::Io {
                        action: "write (test: the disk refuses)",
                        path: path.to_path_buf(),
                        source: io::Error::other("refused"),
                    }),
                }
            });
            (
                write,
                Disk {
                    entered: entered_answer,
                    decide,
                },
            )
        }

        /// A write of `end` is under way (and blocked).
        fn expect(&self, end: i64) {
            let entered = self
                .entered
                .recv_timeout(std::time::Duration::from_secs(60))
                .expect("a reservation was started");
            assert_eq!(entered, end);
        }
    }

    fn file(dir: &Path) -> String {
        std::fs::read_to_string(dir.join(IDS_FILE)).unwrap()
    }

    fn later(answer: oneshot::Receiver<Answer>) -> Answer {
        answer.blocking_recv().unwrap()
    }

    #[test]
    fn reservations_run_ahead_off_the_cores_and_no_id_is_handed_out_twice() {
        let dir = tempfile::tempdir().unwrap();
        let (write, disk) = Disk::new();
        disk.decide.send(true).unwrap();
        let ids = Arc::new(ProducerIds::open_with(dir.path(), 4, write).unwrap());
        // The first block is reserved at open, before any id is handed out.
        disk.expect(4);
        assert_eq!(file(dir.path()), "4\n");
        let (a, b) = (Core::start(&ids), Core::start(&ids));
        let mut handed = vec![a.now(), a.now()];
        // Half the block is handed out: core a started the next reservation, on its blocking
        // thread, which stays blocked in the write. Both cores, a included, go on handing out
        // the ids left meanwhile.
        disk.expect(8);
        handed.push(b.now());
        handed.push(a.now());
        assert_eq!(handed, vec![0, 1, 2, 3]);
        // Every reserved id is handed out: allocations on both cores wait (asynchronously:
        // the cores answered the request at once with "waiting") for the write in flight,
        // and start no second one (counted at the end).
        let (wait_b, wait_a) = (b.waiting(), a.waiting());
        assert_eq!(file(dir.path()), "4\n");
        assert!(ids.may_have_issued(3) && !ids.may_have_issued(4) && !ids.may_have_issued(-1));
        // The write ends: the waiters get ids of the new block.
        disk.decide.send(true).unwrap();
        let mut woken = vec![later(wait_a).unwrap(), later(wait_b).unwrap()];
        woken.sort_unstable();
        assert_eq!(woken, vec![4, 5]);
        handed.extend(woken);
        assert_eq!(file(dir.path()), "8\n");
        // Half of it is handed out: the next reservation starts ahead.
        disk.expect(12);
        handed.push(b.now());
        handed.push(b.now());
        let wait = a.waiting();
        // It fails: the allocation waiting for it gets the error...
        disk.decide.send(false).unwrap();
        let error = later(wait).unwrap_err();
        assert!(matches!(error, ProducerIdError::Reserve(_)), "{error}");
        assert!(error.to_string().contains("the disk refuses"), "{error}");
        assert_eq!(file(dir.path()), "8\n");
        // ...and the next one tries again.
        let wait = b.waiting();
        disk.expect(12);
        disk.decide.send(true).unwrap();
        handed.push(later(wait).unwrap());
        assert_eq!(file(dir.path()), "12\n");
        // One more ahead, failing with nobody waiting for it: logged, and not tried again
        // ahead for this block; the allocation that exhausts the block tries it.
        handed.push(a.now());
        disk.expect(16);
        disk.decide.send(false).unwrap();
        while ids.lock().reserving {
            std::thread::yield_now();
        }
        handed.push(b.now());
        handed.push(a.now());
        let wait = b.waiting();
        disk.expect(16);
        disk.decide.send(true).unwrap();
        handed.push(later(wait).unwrap());
        assert_eq!(handed, (0..=12).collect::<Vec<_>>());
        // A write that is neither expected nor decided fails, once the test stops deciding.
        drop(disk.decide);
        a.stop();
        b.stop();
        // Every reservation was one the test expected: no second one was in flight.
        assert!(disk.entered.try_recv().is_err());
        // A restart (or a crash: nothing else is written) continues above every id handed
        // out: the durable value was above each of them before they were.
        let durable: i64 = file(dir.path()).trim().parse().unwrap();
        assert_eq!(durable, 16);
        drop(ids);
        let ids = Arc::new(ProducerIds::open(dir.path()).unwrap());
        let core = Core::start(&ids);
        assert_eq!(core.now(), 16);
        core.stop();
        assert!(!dir.path().join(format!("{IDS_FILE}.tmp")).exists());
    }

    #[test]
    fn ids_are_unique_across_cores_and_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let mut all = Vec::new();
        for _start in 0..2 {
            let ids = Arc::new(ProducerIds::open_with(dir.path(), 3, Arc::new(write_end)).unwrap());
            // The cores serve until every one is done, as a server's do: a core that stops
            // drops the reservation it started (its waiters get `Interrupted`).
            let done = Arc::new(tokio::sync::Barrier::new(4));
            let cores: Vec<_> = (0..4)
                .map(|_| {
                    let (ids, done) = (ids.clone(), done.clone());
                    LocalExecutorBuilder::new(Placement::Unbound)
                        .io_memory(1 << 20)
                        .spawn(move || async move {
                            let mut got = Vec::new();
                            for _ in 0..25 {
                                got.push(ids.allocate().await.unwrap());
                            }
                            done.wait().await;
                            got
                        })
                        .unwrap()
                })
                .collect();
            let got: Vec<i64> = cores.into_iter().flat_map(|core| core.join().unwrap()).collect();
            let durable: i64 = file(dir.path()).trim().parse().unwrap();
            assert!(
                got.iter().all(|id| *id < durable),
                "{got:?} not all below {durable}"
            );
            all.extend(got);
        }
        let count = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), count, "an id was handed out twice");
    }

    #[test]
    fn a_corrupt_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(IDS_FILE), "banana").unwrap();
        let error = ProducerIds::open(dir.path()).unwrap_err();
        assert!(
            error.to_string().contains("producer-ids.next is corrupt"),
            "{error}"
        );
        std::fs::write(dir.path().join(IDS_FILE), "-5\n").unwrap();
        assert!(ProducerIds::open(dir.path()).is_err());
    }
}
