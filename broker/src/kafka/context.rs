//! What a request handler may know: the core it runs on ([`KafkaCore`]) and the connection
//! it came on ([`ConnectionContext`]).

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use glommio::sync::StaticPermit;

use crate::sched::{AddressAllowances, FairSemaphore, StopSignal};

use super::HandlerError;
use crate::append::Submit;
use crate::config::ServerConfig;
use crate::metrics::CoreMetrics;
use crate::runtime::{KafkaListener, Runtime, Shared};
use crate::telemetry::CoreTelemetry;

/// The Kafka side of one core: what its connections share.
pub struct KafkaCore {
    pub shared: Arc<Shared>,
    pub telemetry: Rc<CoreTelemetry>,
    /// Hands produce partitions to their bucket's owner core.
    pub router: Rc<dyn Submit>,
    pub stop: Rc<StopSignal>,
    /// Units are bytes of Kafka requests held on this core (`kafka.max-request-memory`): a
    /// connection reserves a request's size before reading its body and keeps the reservation
    /// until the answer is written. Waiters are served in arrival order.
    pub request_memory: Rc<FairSemaphore>,
    /// Each client address's share of `request_memory` (`kafka.max-request-memory-per-address`):
    /// a frame takes its bytes here first, then from `request_memory`, and gives both back
    /// together, so the frames of one address hold at most this allowance of the core.
    pub address_memory: Rc<AddressAllowances>,
    /// Units are bytes held beyond request frames (`kafka.max-answer-memory`): what a request
    /// costs from its decoding until its answer is written ([`KafkaCore::hold_answer_memory`]).
    pub answer_memory: Rc<FairSemaphore>,
    /// Shutdown's bound on the answers still to write (`kafka.shutdown-timeout`).
    pub cutoff: AnswerCutoff,
}

/// Shutdown's bound on the answers still to write: once `kafka.shutdown-timeout` has passed,
/// the core [`AnswerCutoff::cut`]s, and every connection whose answers are not written yet
/// stops waiting for its client to read them and closes at once, counting what it gave up.
#[derive(Default)]
pub struct AnswerCutoff {
    signal: StopSignal,
    connections: Cell<usize>,
    answers: Cell<u64>,
}

impl AnswerCutoff {
    /// Gives up every answer not written yet (once).
    pub fn cut(&self) {
        self.signal.stop();
    }

    /// Resolves once [`AnswerCutoff::cut`] was called.
    pub async fn reached(&self) {
        self.signal.stopping().await;
    }

    /// A connection closed by the cut, with `answers` of its answers not written.
    pub fn record(&self, answers: u64) {
        self.connections.set(self.connections.get() + 1);
        self.answers.set(self.answers.get() + answers);
    }

    /// Connections closed by the cut, and the answers they did not write.
    pub fn counts(&self) -> (usize, u64) {
        (self.connections.get(), self.answers.get())
    }
}

impl KafkaCore {
    pub fn config(&self) -> &ServerConfig {
        &self.shared.config
    }

    pub fn runtime(&self) -> &Runtime {
        &self.shared.runtime
    }

    pub fn metrics(&self) -> &CoreMetrics {
        self.telemetry.metrics()
    }

    /// Takes `bytes` of this core's `kafka.max-answer-memory` (all of it for a request that
    /// needs more), held until the request's answer is written. When answers not yet written
    /// hold it, this waits (the connection reads nothing more meanwhile, so its client is
    /// pushed back) until they give memory back: at most `kafka.connection.max-idle-time`, and
    /// not past the start of shutdown.
    pub async fn hold_answer_memory(&self, bytes: usize) -> Result<StaticPermit, HandlerError> {
        let bytes = (bytes as u64).min(self.config().max_answer_memory as u64);
        if let Some(permit) = self.answer_memory.try_acquire(bytes) {
            return Ok(permit);
        }
        let started = std::time::Instant::now();
        let limit = self.config().connection_max_idle_time;
        let waited =
            futures_lite::future::or(async { self.answer_memory.acquire(bytes).await.ok() }, async {
                futures_lite::future::or(glommio::timer::sleep(limit), self.stop.stopping()).await;
                None
            })
            .await;
        waited.ok_or_else(|| HandlerError::AnswerMemory {
            bytes: bytes as usize,
            waited: started.elapsed(),
        })
    }
}

/// Everything a handler may need to know about the connection a request came on.
pub struct ConnectionContext {
    pub core: Rc<KafkaCore>,
    pub peer: SocketAddr,
    pub listener: Rc<KafkaListener>,
    /// The SASL state machine; also holds the principal once authenticated.
    pub sasl: RefCell<kafluss_auth::SaslSession>,
    /// Which core this connection's appends went to, request after request.
    pub writes: WriteAffinity,
    /// Set when the client has closed its side or the socket failed: a wait only the client
    /// cares about (a login waiting for its turn) ends then instead of running on.
    pub client_gone: StopSignal,
    /// A login held back by the login throttle, stopped once it is answered (or dropped): the
    /// connection dispatches no further request before then, so a request pipelined after a
    /// login is served in the state that login leaves (authenticated or closed).
    pub login_pending: Cell<Option<Rc<StopSignal>>>,
    /// This connection's hold on its client address's share of the core's request memory
    /// (`kafka.max-request-memory-per-address`); dropped with the context, after the last
    /// answer is written.
    pub address_memory: crate::sched::AddressAllowance,
}

impl ConnectionContext {
    /// The principal every ACL check on this connection uses: the authenticated user, or
    /// `User:ANONYMOUS` on a plaintext listener.
    pub fn principal(&self) -> kafluss_auth::Principal {
        self.with_principal(kafluss_auth::Principal::clone)
    }

    /// [`ConnectionContext::principal`] lent to `f` instead of cloned: for the checks every
    /// produced partition makes.
    pub fn with_principal<T>(&self, f: impl FnOnce(&kafluss_auth::Principal) -> T) -> T {
        static ANONYMOUS: std::sync::LazyLock<kafluss_auth::Principal> =
            std::sync::LazyLock::new(kafluss_auth::Principal::anonymous);
        match self.sasl.borrow().principal() {
            Some(principal) => f(principal),
            None => f(&ANONYMOUS),
        }
    }
}

/// Which core a connection's produce requests append on, request after request: a connection
/// whose requests keep writing buckets of one other core is better served there
/// (`kafka.connection.move-after`; docs/architecture.md, "A produce request", step 6).
#[derive(Debug, Default)]
pub struct WriteAffinity {
    /// The core every partition of the last requests went to, and how many requests in a row.
    streak: Cell<Option<(usize, u32)>>,
}

impl WriteAffinity {
    /// A produce request was routed: `owner` is the core every one of its routed partitions
    /// went to, or None when they went to several cores or none was routed.
    pub fn record(&self, owner: Option<usize>) {
        self.streak.set(match (owner, self.streak.get()) {
            (Some(core), Some((last, n))) if core == last => Some((core, n.saturating_add(1))),
            (Some(core), _) => Some((core, 1)),
            (None, _) => None,
        });
    }

    /// The core this connection should move to when it is served by core `me`: the one the
    /// last `after` requests in a row wrote to, when that is another core (never when `after`
    /// is 0).
    pub fn move_to(&self, me: usize, after: u32) -> Option<usize> {
        match self.streak.get() {
            Some((core, n)) if after > 0 && core != me && n >= after => Some(core),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::WriteAffinity;

    #[test]
    fn a_connection_moves_after_requests_in_a_row_to_one_other_core() {
        let writes = WriteAffinity::default();
        for _ in 0..7 {
            writes.record(Some(1));
        }
        assert_eq!(writes.move_to(0, 8), None, "seven requests are not enough");
        writes.record(Some(1));
        assert_eq!(writes.move_to(0, 8), Some(1));
        assert_eq!(writes.move_to(1, 8), None, "already served by the owner");
        assert_eq!(writes.move_to(0, 0), None, "0: connections never move");
        writes.record(None);
        assert_eq!(
            writes.move_to(0, 1),
            None,
            "a request to several cores ends the streak"
        );
        writes.record(Some(1));
        writes.record(Some(0));
        assert_eq!(writes.move_to(1, 1), Some(0), "only the last core counts");
        assert_eq!(writes.move_to(1, 2), None);
    }
}
