//! The admin HTTP API on the Fluss listener: SQL, table descriptions, scans, metrics and
//! health (see `http.rs`). It runs on its own threads and reaches the cores only through
//! the catalog's published snapshots and the hooks in [`AdminContext`].

pub mod http;
pub mod storage;
mod stream;
pub mod tables;

pub use http::{
    start_admin_server, AdminContext, AdminError, AdminHandle, HookError, MetricsHook, RowCountsHook,
    ScanBody, ScanHook, ScanResponse, DEFAULT_MAX_BODY_BYTES,
};
