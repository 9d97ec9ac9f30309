//! Connection placement. Every core accepts on its own `SO_REUSEPORT` listener, and the kernel
//! picks that core by a hash of the connection's addresses, so a few connections can all land
//! on one core while another serves none. A core that accepts a connection while it serves
//! more Kafka connections than some other core hands the accepted socket to the core serving
//! the fewest ([`least_loaded`], the rule that also places buckets) over the connection mesh,
//! and that core binds it to its own executor and serves it. A connection whose produce
//! requests keep appending on one other core moves there once its answers are written
//! (`kafka.connection.move-after`). Each connection is counted on the core that serves it from
//! the moment it is placed (or moved) until it closes.

use std::sync::atomic::{AtomicUsize, Ordering};

use glommio::net::AcceptedTcpStream;

use super::routing::least_loaded;
use crate::kafka::connection::Carried;

/// A connection that one core gives to another.
pub enum Handoff {
    /// Accepted by the sending core and never served there.
    Accepted {
        stream: AcceptedTcpStream,
        /// Index of the Kafka listener that accepted it (`Shared::kafka_listeners`).
        listener: usize,
    },
    /// Served by the sending core until every request it read was answered; it goes on where
    /// its requests append ([`crate::kafka::connection::Served::Move`]).
    Moved {
        socket: socket2::Socket,
        listener: usize,
        carried: Box<Carried>,
    },
}

/// The Kafka connections each core serves or is about to serve.
pub struct ConnectionLoad(Vec<AtomicUsize>);

impl ConnectionLoad {
    pub fn new(cores: usize) -> Self {
        Self((0..cores.max(1)).map(|_| AtomicUsize::new(0)).collect())
    }

    /// The core that serves a connection accepted by core `me`, counted there. Two cores
    /// placing at the same moment may both pick the same core; the next placements even out.
    pub fn place(&self, me: usize) -> usize {
        let load: Vec<usize> = self.0.iter().map(|n| n.load(Ordering::Relaxed)).collect();
        let core = least_loaded(&load, me);
        self.0[core].fetch_add(1, Ordering::Relaxed);
        core
    }

    /// Counts a connection on `core` whatever the load.
    pub fn place_on(&self, core: usize) {
        if let Some(count) = self.0.get(core) {
            count.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A connection of `core` closed (or was never served).
    pub fn closed(&self, core: usize) {
        if let Some(count) = self.0.get(core) {
            let _ = count.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        }
    }

    /// Connections counted on `core`.
    pub fn of(&self, core: usize) -> usize {
        self.0.get(core).map_or(0, |n| n.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_accepted_on_one_core_spread_over_all() {
        let load = ConnectionLoad::new(2);
        // The kernel hands every connection to core 0: every second one moves.
        let placed: Vec<usize> = (0..4).map(|_| load.place(0)).collect();
        assert_eq!(placed, vec![0, 1, 0, 1]);
        assert_eq!((load.of(0), load.of(1)), (2, 2));
        load.closed(1);
        load.closed(1);
        // Core 1 now serves none: core 0's next two connections go there.
        assert_eq!(load.place(0), 1);
        assert_eq!(load.place(0), 1);
        assert_eq!(load.place(1), 1, "a tie stays where it was accepted");
        load.closed(0);
        load.closed(0);
        load.closed(0);
        assert_eq!(load.of(0), 0, "never below zero");
    }
}
