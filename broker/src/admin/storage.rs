//! The admin server's storage hooks, built from the log registry and the scan module:
//! row counts for `GET /v1/tables/...` and streamed scans for `.../scan`.

use std::path::PathBuf;
use std::sync::Arc;

use kafluss_convert::arrow_schema;

use super::http::{HookError, RowCountsHook, ScanHook, ScanResponse};
use crate::catalog::TableInfo;
use crate::log::{table_dir, LogRegistry};
use crate::scan::{row_counts, PreparedScan, ScanError, ScanTarget};

/// What the scan module needs to read `table` under `data_dir`.
pub fn scan_target(data_dir: &std::path::Path, table: &TableInfo) -> Result<ScanTarget, ScanError> {
    Ok(ScanTarget {
        table_id: table.id,
        table_dir: table_dir(data_dir, &table.database, &table.name, table.id)
            .map_err(ScanError::TableDir)?,
        bucket_count: table.bucket_count,
        schema: arrow_schema(&table.schema),
    })
}

fn hook_error(error: &ScanError) -> HookError {
    HookError::new(error.http_status(), error.code(), error.to_string())
}

/// Row counts per bucket: published stats of open buckets, segment files of the others.
pub fn row_counts_hook(data_dir: PathBuf, registry: Arc<LogRegistry>) -> RowCountsHook {
    Arc::new(move |table: &TableInfo| {
        scan_target(&data_dir, table)
            .map(|target| row_counts(&target, &registry))
            .unwrap_or_default()
    })
}

/// Scans: parameters are checked before the response starts (4xx), rows then stream.
pub fn scan_hook(data_dir: PathBuf, registry: Arc<LogRegistry>) -> ScanHook {
    Arc::new(move |table: &TableInfo, query: &str| {
        let prepared = scan_target(&data_dir, table)
            .and_then(|target| PreparedScan::new(target, query, Arc::clone(&registry)))
            .map_err(|error| hook_error(&error))?;
        Ok(ScanResponse {
            content_type: prepared.content_type().to_string(),
            body: Box::new(move |out| prepared.run(out).map(|_| ()).map_err(|error| hook_error(&error))),
        })
    })
}
