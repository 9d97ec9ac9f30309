//! Reading rows back from bucket logs: `GET /v1/tables/{db}.{table}/scan` and `kafluss scan`.
//!
//! Runs on any thread (the admin HTTP thread): plain std::fs reads of the segment files with
//! `log::ipc::SegmentReader` (arrow-ipc's record-batch decoding), bounded per bucket by the high watermark the owner core
//! publishes in the [`LogRegistry`], so half-written batches are never read.
//!
//! Output formats:
//! - `jsonl`: one line per row, `{"bucket":B,"offset":O,"row":{...}}`, row encoding in [`json`].
//! - `arrow`: one Arrow IPC stream. Its schema is `_bucket INT32 NOT NULL`, `_offset INT64 NOT
//!   NULL`, then the selected table columns; rows come bucket by bucket in offset order.
//!
//! Buckets are read in ascending order (all of them, or the one asked for); `from` applies to
//! each bucket; `limit` bounds the total rows; `columns` selects and orders columns.

pub mod json;
mod output;
mod params;
pub mod reader;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_schema::{ArrowError, DataType, SchemaRef};

use crate::log::{bucket_dir, BucketStats, LogRegistry};
use output::{ArrowSink, JsonlSink, Projection, RowSink};
pub use params::{percent_decode, PercentError, ScanFormat, ScanParams};

/// Name of the bucket column added to `arrow` output.
pub const BUCKET_COLUMN: &str = "_bucket";
/// Name of the offset column added to `arrow` output.
pub const OFFSET_COLUMN: &str = "_offset";

#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    /// A query parameter is malformed or unknown (HTTP 400).
    #[error("invalid scan parameter {name}: {reason}")]
    BadParameter { name: String, reason: String },
    #[error("bucket {bucket} does not exist (the table has {bucket_count} buckets)")]
    NoSuchBucket { bucket: u32, bucket_count: u32 },
    #[error("column {0} does not exist")]
    NoSuchColumn(String),
    #[error("column {column} is {found} in a segment but {expected} in the table schema")]
    SchemaMismatch {
        column: String,
        found: DataType,
        expected: DataType,
    },
    #[error("cannot encode type {0} as JSON")]
    UnsupportedType(String),
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("corrupt log segment {path}: {reason}")]
    CorruptSegment { path: PathBuf, reason: String },
    /// Retention deleted rows the scan had not read yet, after it had sent earlier rows of the
    /// bucket: skipping them would give a hole, so the scan ends here (Kafka's fetch below
    /// the log start is OFFSET_OUT_OF_RANGE the same way).
    #[error(
        "the rows from offset {from} to {to} of {dir} were deleted by retention (table.log.ttl) \
         during the scan; the bucket now starts at offset {next}: scan again with from={next}",
        dir = dir.display(),
        next = to + 1
    )]
    DeletedByRetention { dir: PathBuf, from: u64, to: u64 },
    /// The table was dropped while the scan read it: the rows not read yet are gone.
    #[error(
        "the table was dropped (DROP TABLE) during the scan; the rows of {dir} from offset \
         {next_offset} on, and of the buckets after it, were not read",
        dir = dir.display()
    )]
    TableDropped { dir: PathBuf, next_offset: u64 },
    #[error("cannot write Arrow output: {0}")]
    Arrow(#[source] ArrowError),
    /// Writing to the client failed (it went away): stop quietly.
    #[error("cannot write scan output: {0}")]
    Output(#[source] std::io::Error),
    /// The table's names name no storage directory ([`crate::log::table_dir`]).
    #[error(transparent)]
    TableDir(crate::log::LogError),
}

impl ScanError {
    fn corrupt(path: &Path, err: ArrowError) -> Self {
        ScanError::CorruptSegment {
            path: path.to_path_buf(),
            reason: err.to_string(),
        }
    }

    /// The HTTP status to answer with: 400 bad parameter or a column the table lacks (the
    /// `columns` parameter is wrong, the path is right), 404 unknown bucket, 500 storage
    /// trouble.
    pub fn http_status(&self) -> u16 {
        match self {
            ScanError::BadParameter { .. } | ScanError::NoSuchColumn(_) => 400,
            ScanError::NoSuchBucket { .. } | ScanError::TableDropped { .. } => 404,
            _ => 500,
        }
    }

    /// A stable code for `{"error":{"code":...}}`.
    pub fn code(&self) -> &'static str {
        match self {
            ScanError::BadParameter { .. } => "BAD_SCAN_PARAMETER",
            ScanError::NoSuchBucket { .. } => "NO_SUCH_BUCKET",
            ScanError::NoSuchColumn(_) => "NO_SUCH_COLUMN",
            ScanError::UnsupportedType(_) => "UNSUPPORTED_TYPE",
            ScanError::CorruptSegment { .. } => "CORRUPT_SEGMENT",
            ScanError::DeletedByRetention { .. } => "DELETED_BY_RETENTION",
            ScanError::TableDropped { .. } => "TABLE_DROPPED",
            ScanError::Io { .. }
            | ScanError::Arrow(_)
            | ScanError::SchemaMismatch { .. }
            | ScanError::TableDir(_) => "STORAGE_ERROR",
            ScanError::Output(_) => "OUTPUT_ERROR",
        }
    }

    /// True for errors caused by the request (answer 4xx), false for server-side ones (5xx).
    pub fn is_client_error(&self) -> bool {
        matches!(
            self,
            ScanError::BadParameter { .. } | ScanError::NoSuchBucket { .. } | ScanError::NoSuchColumn(_)
        )
    }
}

/// Which table to read: resolved by the admin server from the catalog.
#[derive(Debug, Clone)]
pub struct ScanTarget {
    pub table_id: u64,
    /// `data.dir/<db>/<table>-<table_id>` (see [`crate::log::table_dir`]).
    pub table_dir: PathBuf,
    pub bucket_count: u32,
    /// The table's current Arrow schema (the converter's `arrow_schema`).
    pub schema: SchemaRef,
}

/// How many rows a scan wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanSummary {
    pub rows: u64,
}

/// A scan whose parameters were checked against the table (bucket range, column names), so
/// the HTTP layer can answer 4xx before sending a 200 and streaming [`PreparedScan::run`].
#[derive(Debug, Clone)]
pub struct PreparedScan {
    target: ScanTarget,
    params: ScanParams,
    registry: Arc<LogRegistry>,
}

impl PreparedScan {
    /// Parses the raw query string and validates it against `target`.
    pub fn new(target: ScanTarget, query: &str, registry: Arc<LogRegistry>) -> Result<Self, ScanError> {
        let params = ScanParams::from_query(query)?;
        check_bucket(&target, params.bucket)?;
        Projection::new(&target.schema, params.columns.as_deref())?;
        Ok(PreparedScan {
            target,
            params,
            registry,
        })
    }

    pub fn params(&self) -> &ScanParams {
        &self.params
    }

    pub fn content_type(&self) -> &'static str {
        self.params.format.content_type()
    }

    /// Streams the rows (may run on another thread: everything here is `Send`).
    pub fn run(self, out: &mut dyn Write) -> Result<ScanSummary, ScanError> {
        scan_table(&self.target, &self.params, &self.registry, out)
    }
}

fn check_bucket(target: &ScanTarget, bucket: Option<u32>) -> Result<(), ScanError> {
    match bucket {
        Some(bucket) if bucket >= target.bucket_count => Err(ScanError::NoSuchBucket {
            bucket,
            bucket_count: target.bucket_count,
        }),
        _ => Ok(()),
    }
}

/// Rows per bucket for a table description: the published stats of buckets a core opened,
/// the segment files of the others (`(bucket, rows)` for every bucket `0..bucket_count`).
pub fn row_counts(target: &ScanTarget, registry: &LogRegistry) -> Vec<(u32, u64)> {
    (0..target.bucket_count)
        .map(|bucket| {
            let rows = match registry
                .get(target.table_id, bucket)
                .and_then(|stats| stats.offsets())
            {
                Some((start, next)) => next.saturating_sub(start),
                None => reader::on_disk_offsets(&bucket_dir(&target.table_dir, bucket))
                    .map(|offsets| offsets.rows())
                    .unwrap_or(0),
            };
            (bucket, rows)
        })
        .collect()
}

/// Streams the rows `params` selects to `out` in the requested format.
pub fn scan_table(
    target: &ScanTarget,
    params: &ScanParams,
    registry: &LogRegistry,
    out: &mut dyn Write,
) -> Result<ScanSummary, ScanError> {
    check_bucket(target, params.bucket)?;
    let buckets: Vec<u32> = match params.bucket {
        Some(bucket) => vec![bucket],
        None => (0..target.bucket_count).collect(),
    };
    let projection = Projection::new(&target.schema, params.columns.as_deref())?;
    let mut sink: Box<dyn RowSink + '_> = match params.format {
        ScanFormat::Jsonl => Box::new(JsonlSink::new(out, &projection)),
        ScanFormat::Arrow => Box::new(ArrowSink::new(out, &projection)?),
    };
    let mut remaining = params.limit.unwrap_or(u64::MAX);
    let mut rows = 0u64;
    // Every bucket's stats as the scan starts: a DROP marks them (before it deletes the
    // files), so the scan can tell that its table went away, whichever bucket it is reading.
    let stats: Vec<Option<Arc<BucketStats>>> = (0..target.bucket_count)
        .map(|bucket| registry.get(target.table_id, bucket))
        .collect();
    let dropped = || stats.iter().flatten().any(|stats| stats.dropped());
    for bucket in buckets {
        if remaining == 0 {
            break;
        }
        let dir = bucket_dir(&target.table_dir, bucket);
        let bucket_stats = stats.get(bucket as usize).cloned().flatten();
        // The offset after the last row of this bucket sent.
        let mut sent_to = None;
        let read = reader::read_bucket(&dir, params.from, bucket_stats.as_deref(), &mut |read| {
            let take = remaining.min(read.batch.num_rows() as u64);
            sent_to = Some(read.first_offset + take);
            let batch = read.batch.slice(0, take as usize);
            let columns = projection.apply(&batch)?;
            sink.write(bucket, read.first_offset, &columns, take as usize)?;
            remaining -= take;
            rows += take;
            Ok(remaining > 0)
        });
        // A DROP during the read deletes files the read did not open yet, or the whole bucket
        // directory before it was listed: what was read may be short, so the scan ends with
        // the drop (checked after the read: the stats are marked before any file goes).
        let cut_short = match &read {
            Ok(()) => remaining > 0,
            Err(error) => !matches!(error, ScanError::Output(_)),
        };
        let read = match read {
            _ if cut_short && dropped() => Err(ScanError::TableDropped {
                dir,
                next_offset: sent_to.unwrap_or(params.from),
            }),
            read => read,
        };
        if let Err(error) = read {
            // Before any row the HTTP layer still answers with an error status; after, the
            // output itself must say it is incomplete.
            if rows > 0 && !matches!(error, ScanError::Output(_)) {
                sink.fail(&error);
            }
            return Err(error);
        }
    }
    sink.finish()?;
    Ok(ScanSummary { rows })
}
