//! kafluss-bench: a Kafka producer load generator with HDR latency, a null Kafka sink, and
//! side-by-side runs against two endpoints.
//!
//! # Public API
//! - [`producer::run`]`(bootstrap: &str, &Workload, server_pid: Option<u32>) -> Result<RunResult, BenchError>`
//!   runs one workload ([`workload::Workload`]) against one endpoint and returns counts,
//!   [`hdrhistogram::Histogram`]s of request and record latency (ns), a per-second timeline and
//!   the server's CPU/RSS.
//! - [`sink::start`]`(listen: &str, partitions: u32) -> Result<SinkHandle, BenchError>` starts the
//!   null sink in background threads; [`sink::SinkHandle::stats`] counts what it acknowledged.
//! - [`report`] turns runs into text, JSON and `--vs` ratios; [`plot::timeline_svg`] draws them.
//! - [`values::table_sql`] prints the Fluss table matching a value generator.

pub mod client;
pub mod error;
pub mod fsync_probe;
pub mod histogram;
mod pipeline;
pub mod plot;
pub mod proc_stat;
pub mod producer;
pub mod report;
pub mod sink;
mod timeline;
pub mod values;
pub mod workload;

pub use error::BenchError;
pub use pipeline::SlowRequest;
pub use producer::{run, RunResult};
pub use workload::{StopAfter, Workload};
