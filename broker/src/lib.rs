//! kafluss broker: thread-per-core Kafka produce endpoint writing Fluss log tables as Arrow.
//!
//! Folders are concepts, and dependencies point one way (docs/architecture.md):
//! `runtime/` (start-up, cores, mesh, routing) → `kafka/` (connections, one handler per API,
//! the one place Kafka error codes are chosen) → `append/` (jobs, bucket actors, the append
//! pipeline) → `log/` (durable Arrow bucket logs), `kafluss-convert`, `kafluss-protocol`.
//! Beside them: `producer/` (idempotent producers' ids and per-bucket sequence state),
//! `catalog/` (databases, tables, SQL), `scan/` (reading rows back), `admin/`
//! (HTTP on the Fluss listener). The `sql` and `scan` client commands are the binary's own
//! (`src/cli/`), not the library's.

pub mod admin;
pub mod append;
pub mod catalog;
pub mod config;
pub mod idhash;
pub mod kafka;
pub mod log;
pub mod metrics;
pub mod producer;
pub mod repeat_log;
pub mod runtime;
pub mod scan;
pub mod sched;
pub mod telemetry;
pub mod units;

#[cfg(test)]
mod layers_tests;
