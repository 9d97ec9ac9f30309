//! kafluss broker: thread-per-core Kafka produce endpoint writing Fluss log tables as Arrow.
//!
//! Folders are concepts: `catalog/` (databases, tables, SQL), `log/` (durable Arrow bucket logs),
//! `scan/` (reading rows back), `admin/` (HTTP on the Fluss listener), `handlers/` (one file per
//! Kafka API). The runtime lives in `server.rs`
//! (executors), `shard.rs` (what one core owns), `connection.rs` and `routing.rs`.
//! The `sql` and `scan` client commands are the binary's own (`src/cli/`), not the library's.

pub mod admin;
pub mod catalog;
pub mod config;
pub mod connection;
pub mod errors;
pub mod handlers;
pub mod log;
pub mod metrics;
pub mod repeat_log;
pub mod routing;
pub mod scan;
pub mod server;
pub mod shard;
pub mod units;
