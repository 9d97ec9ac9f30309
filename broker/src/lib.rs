//! kafluss broker: thread-per-core Kafka produce endpoint writing Fluss log tables as Arrow.
//!
//! Folders are concepts: `catalog/` (databases, tables, SQL), `log/` (durable Arrow bucket logs),
//! `scan/` (reading rows back), `admin/` (HTTP on the Fluss listener), `handlers/` (one file per
//! Kafka API), `cli/` (the `sql` and `scan` client commands). The runtime lives in `server.rs`
//! (executors), `shard.rs` (what one core owns), `connection.rs` and `routing.rs`.

pub mod admin;
pub mod catalog;
pub mod cli;
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
