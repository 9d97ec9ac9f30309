//! Group commit: many `sync_to` waiters share one `fdatasync`.
//!
//! No background task: the first waiter that finds no fsync in flight becomes the leader. It
//! notes how many rows are written at that moment (`target`), fsyncs the active segment, marks
//! `target` durable and wakes everyone. Waiters whose rows are now durable return; the rest
//! (rows written while the fsync ran) elect the next leader. So a burst of N acks=-1 appends
//! costs one or two fsyncs, not N, and an idle bucket costs none.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// Durability bookkeeping of one bucket (single core, so `Cell`s).
#[derive(Debug, Default)]
pub(crate) struct CommitState {
    /// Rows `[0, durable)` are fsync'd.
    pub durable: Cell<u64>,
    /// A leader is inside `fdatasync` right now.
    pub in_flight: Cell<bool>,
    /// A roll is closing the active segment (from the moment it has waited for the group
    /// fsync in flight until its background fsync is started): no group fsync starts, so no
    /// two fsyncs of one file descriptor run at once (Linux reports a writeback error to only
    /// one of them).
    pub closing: Cell<bool>,
    /// Number of fsyncs issued by group commit (exposed for tests and metrics).
    pub syncs: Cell<u64>,
    pub completions: WaitList,
}

/// Wakes every waiter when `notify_all` is called; a waiter registered at generation `g` is
/// woken by the first notification after `g`.
#[derive(Debug, Default)]
pub(crate) struct WaitList {
    generation: Cell<u64>,
    wakers: RefCell<Vec<Waker>>,
}

impl WaitList {
    pub fn generation(&self) -> u64 {
        self.generation.get()
    }

    pub fn notify_all(&self) {
        self.generation.set(self.generation.get().wrapping_add(1));
        let wakers = std::mem::take(&mut *self.wakers.borrow_mut());
        for waker in wakers {
            waker.wake();
        }
    }

    /// Resolves after the next `notify_all` following generation `seen`.
    pub fn changed(&self, seen: u64) -> Changed<'_> {
        Changed {
            list: self,
            seen,
            registered: false,
        }
    }
}

pub(crate) struct Changed<'a> {
    list: &'a WaitList,
    seen: u64,
    /// Our waker is in the list (it stays there until the next notification drains it).
    registered: bool,
}

impl Future for Changed<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.list.generation.get() != self.seen {
            return Poll::Ready(());
        }
        // One entry per waiter, so the list is bounded by the number of waiting requests. A
        // task on a glommio core keeps its waker, so a spurious re-poll needs no new entry.
        if !self.registered {
            self.list.wakers.borrow_mut().push(cx.waker().clone());
            self.registered = true;
        }
        Poll::Pending
    }
}
