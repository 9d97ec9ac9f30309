//! The admin HTTP API on the Fluss listener: SQL, table descriptions, scans, metrics and
//! health. `http.rs` answers the requests (and holds the leaf types: context, hooks, limits),
//! `listener.rs` starts the server and owns the connections (hyper on a small tokio runtime of
//! its own thread, bounded in connections, time and concurrency),
//! `stream.rs` streams scans. It reaches the cores only through the catalog's published
//! snapshots and the hooks in [`AdminContext`].

pub mod http;
mod listener;
pub mod storage;
mod stream;
pub mod tables;

pub use http::{
    AdminContext, AdminLimits, HookError, MetricsHook, RowCountsHook, ScanBody, ScanHook, ScanResponse,
    DEFAULT_MAX_BODY_BYTES, MAX_HEADER_BYTES, MIN_HEADER_BYTES,
};
pub use listener::{start_admin_server, start_admin_server_on, AdminError, AdminHandle};
