//! What a request handler may know: the core it runs on ([`KafkaCore`]) and the connection
//! it came on ([`ConnectionContext`]).

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use glommio::sync::Semaphore;

use crate::append::Submit;
use crate::config::ServerConfig;
use crate::metrics::CoreMetrics;
use crate::runtime::{KafkaListener, Runtime, Shared, StopSignal};
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
    /// until the answer is written.
    pub request_memory: Rc<Semaphore>,
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
}

/// Everything a handler may need to know about the connection a request came on.
pub struct ConnectionContext {
    pub core: Rc<KafkaCore>,
    pub peer: SocketAddr,
    pub listener: Rc<KafkaListener>,
    /// The SASL state machine; also holds the principal once authenticated.
    pub sasl: RefCell<kafluss_auth::SaslSession>,
}

impl ConnectionContext {
    /// The principal every ACL check on this connection uses: the authenticated user, or
    /// `User:ANONYMOUS` on a plaintext listener.
    pub fn principal(&self) -> kafluss_auth::Principal {
        self.sasl
            .borrow()
            .principal()
            .cloned()
            .unwrap_or_else(kafluss_auth::Principal::anonymous)
    }
}
