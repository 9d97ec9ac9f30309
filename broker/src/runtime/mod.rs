//! The runtime: start-up and shutdown ([`server`]), one core's executor and accept loop
//! ([`core`]), the cross-core mesh ([`mesh`]), which core owns a bucket ([`routing`]), which
//! core serves a connection ([`handoff`]).
//!
//! This file holds only leaf types the layers below read (shared state, listeners, control
//! messages); it imports nothing of `kafka/` or `append/`, so `kafka/` can use
//! these types without importing back up into the runtime's logic.

pub mod core;
pub mod data_dir_lock;
pub mod handoff;
pub mod mesh;
pub mod routing;
pub mod server;
pub mod stall;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::catalog::ddl::Catalog;
use crate::config::ServerConfig;
use crate::log::LogRegistry;
use crate::metrics::Metrics;
use crate::producer::ids::ProducerIds;

/// Capacity of each mesh channel between two cores, in jobs.
pub const MESH_CAPACITY: usize = 256;

/// A Kafka listener as every core serves it.
#[derive(Debug, Clone)]
pub struct KafkaListener {
    pub name: String,
    /// The concrete bound address (the port is resolved when the config said 0).
    pub bound: std::net::SocketAddr,
    /// host and port clients are told to connect to (Metadata brokers).
    pub advertised_host: String,
    pub advertised_port: u16,
    pub security: kafluss_auth::ListenerSecurity,
}

/// The runtime services every core consults: catalog snapshots, credentials, authorizer,
/// storage statistics. All lock-free to read on the produce path.
pub struct Runtime {
    pub catalog: Arc<Catalog>,
    pub credentials: Arc<kafluss_auth::CredentialStore>,
    pub security: kafluss_auth::SecurityConfig,
    pub log_stats: Arc<LogRegistry>,
    /// Failed logins slow the next attempts of their address and user (SASL and HTTP Basic).
    pub login_throttle: Arc<kafluss_auth::LoginThrottle>,
    /// Idempotent producers' ids, node-wide (InitProducerId on any core).
    pub producer_ids: Arc<ProducerIds>,
}

impl Runtime {
    /// The authorizer in force (a lock-free `ArcSwap` load).
    pub fn authorizer(&self) -> arc_swap::Guard<Arc<kafluss_auth::Authorizer>> {
        self.catalog.authorizer_cell().load()
    }
}

/// Process-wide state every core reads; mutation happens through atomics and `ArcSwap`s
/// owned by the runtime pieces inside.
pub struct Shared {
    pub config: ServerConfig,
    pub metrics: Arc<Metrics>,
    pub runtime: Runtime,
    pub kafka_listeners: Vec<KafkaListener>,
    pub open_connections: AtomicUsize,
    /// Set by the signal handler: stop accepting, drain, flush, exit.
    pub shutdown: Arc<AtomicBool>,
    /// Kafka connections per core, for placing new ones.
    pub connection_load: handoff::ConnectionLoad,
    /// Which core owns each bucket in use.
    pub bucket_owners: Arc<routing::BucketOwners>,
    /// Cores that finished draining their connections (they keep serving the mesh until all
    /// have, so that cross-core appends in flight complete).
    pub drained_cores: AtomicUsize,
}

/// Messages from the admin thread to every core.
#[derive(Debug, Clone)]
pub enum ControlMessage {
    /// A table was dropped: close its bucket logs (waiting as long as that takes), then
    /// acknowledge on `done`.
    DropTable {
        table_id: u64,
        done: crossbeam_channel::Sender<()>,
    },
}

/// Wakes one core's control task from any thread, with no polling: a glommio task's waker may
/// be woken from a foreign thread (glommio queues it and writes the core's eventfd).
#[derive(Debug, Default)]
pub struct Doorbell {
    rung: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Doorbell {
    /// Wakes the task waiting in [`Doorbell::wait`] (or makes its next wait return at once).
    pub fn ring(&self) {
        self.rung.store(true, Ordering::SeqCst);
        let waker = self.waker.lock().map(|mut slot| slot.take()).unwrap_or(None);
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Resolves once the bell has rung since the last wait returned.
    pub fn wait(&self) -> impl Future<Output = ()> + '_ {
        Rung(self)
    }
}

struct Rung<'a>(&'a Doorbell);

impl Future for Rung<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let bell = self.0;
        if bell.rung.swap(false, Ordering::SeqCst) {
            return Poll::Ready(());
        }
        if let Ok(mut slot) = bell.waker.lock() {
            *slot = Some(cx.waker().clone());
        }
        // A ring between the first check and storing the waker found no waker: check again.
        if bell.rung.swap(false, Ordering::SeqCst) {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

/// The sending end of one core's control queue (admin thread, main thread).
#[derive(Debug, Clone)]
pub struct ControlSender {
    queue: crossbeam_channel::Sender<ControlMessage>,
    bell: Arc<Doorbell>,
}

/// The core's end of its control queue.
pub struct ControlReceiver {
    pub queue: crossbeam_channel::Receiver<ControlMessage>,
    pub bell: Arc<Doorbell>,
}

/// A control queue of `capacity` messages and the doorbell that goes with it.
pub fn control_channel(capacity: usize) -> (ControlSender, ControlReceiver) {
    let (queue, receiver) = crossbeam_channel::bounded(capacity);
    let bell = Arc::new(Doorbell::default());
    (
        ControlSender {
            queue,
            bell: bell.clone(),
        },
        ControlReceiver {
            queue: receiver,
            bell,
        },
    )
}

impl ControlSender {
    /// Queues `message` (waiting at most `timeout` while the queue is full) and wakes the core.
    pub fn send_timeout(
        &self,
        message: ControlMessage,
        timeout: Duration,
    ) -> Result<(), crossbeam_channel::SendTimeoutError<ControlMessage>> {
        let sent = self.queue.send_timeout(message, timeout);
        if sent.is_ok() {
            self.bell.ring();
        }
        sent
    }

    /// Wakes the core to look at the shared state (shutdown).
    pub fn ring(&self) {
        self.bell.ring();
    }
}
