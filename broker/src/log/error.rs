//! Storage errors. The broker maps every `LogError` to KAFKA_STORAGE_ERROR (in `kafka/errors.rs`).

use std::io;
use std::path::PathBuf;

use arrow_schema::ArrowError;

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// A file-system call failed; `path` names the file or directory it was about.
    #[error("storage I/O error on {path}: {op}: {source}")]
    Io {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: io::Error,
    },
    /// A closed (non-last) segment does not parse as an Arrow IPC stream, or a stored batch does
    /// not match its checksum. Recovery refuses to guess which rows are missing, so the bucket
    /// cannot open until an operator looks at it (docs/storage.md, "Damaged segments").
    #[error("corrupt log segment {path}: {reason}")]
    CorruptSegment { path: PathBuf, reason: String },
    /// A file name in a bucket directory looks like a segment but is not one we wrote.
    #[error("unexpected file in bucket directory: {path}")]
    UnexpectedFile { path: PathBuf },
    /// Encoding a batch as Arrow IPC failed (nothing was written).
    #[error("cannot encode batch as Arrow IPC: {0}")]
    Encode(#[source] ArrowError),
    /// Adding the batch checksum to the encoded message failed (nothing was written).
    #[error(transparent)]
    Seal(#[from] super::checksum::SealError),
    /// An earlier fsync or a failed write that could not be rolled back left the file in an
    /// unknown state; every later append and sync fails until the bucket is reopened
    /// (recovery then keeps only what reached the file intact).
    #[error("bucket log {dir} is failed after an earlier storage error; reopen it to recover")]
    Failed { dir: PathBuf },
    /// Opening the bucket failed earlier in this process with a failed fsync: it is not
    /// opened again before a restart. Linux reports a failed write-back once per open file, and
    /// the pages the disk did not take stay readable in the page cache, so a second recovery
    /// would read them and its own fsync would succeed: rows the disk lost would count as
    /// durable.
    #[error("bucket log {dir} stays closed until the server restarts: an fsync of it failed ({earlier}); check the disk first (rows the disk did not take can still be read from the page cache until the machine reboots)")]
    SyncFailedEarlier { dir: PathBuf, earlier: String },
    /// Offsets are u64 row counts; a batch that would overflow them is refused.
    #[error("offset overflow in bucket log {dir}")]
    OffsetOverflow { dir: PathBuf },
    /// A database or table name that is not one (`catalog::names::check_fluss_name`: a path
    /// separator, `..`, ...) names no storage directory: joined to `data.dir` it could name
    /// one outside it.
    #[error("table {database}.{table} has no storage directory: {reason}")]
    InvalidTableName {
        database: String,
        table: String,
        reason: &'static str,
    },
}

impl LogError {
    /// Whether this is a failed fsync (of a file or a directory).
    pub fn is_failed_sync(&self) -> bool {
        matches!(self, LogError::Io { op, .. } if op.starts_with("fsync"))
    }

    pub(crate) fn io(path: impl Into<PathBuf>, op: &'static str, source: io::Error) -> Self {
        LogError::Io {
            path: path.into(),
            op,
            source,
        }
    }

    /// An error naming the same thing as this one, for a second waiter on the same failure
    /// (an I/O error keeps its path, operation, kind and message; the source chain of an
    /// encoding error becomes its message).
    pub fn duplicate(&self) -> LogError {
        match self {
            LogError::Io { path, op, source } => LogError::io(
                path.clone(),
                op,
                io::Error::new(source.kind(), source.to_string()),
            ),
            LogError::Failed { dir } => LogError::Failed { dir: dir.clone() },
            LogError::SyncFailedEarlier { dir, earlier } => LogError::SyncFailedEarlier {
                dir: dir.clone(),
                earlier: earlier.clone(),
            },
            LogError::OffsetOverflow { dir } => LogError::OffsetOverflow { dir: dir.clone() },
            LogError::CorruptSegment { path, reason } => LogError::corrupt(path.clone(), reason.clone()),
            LogError::UnexpectedFile { path } => LogError::UnexpectedFile { path: path.clone() },
            LogError::Encode(e) => LogError::Encode(ArrowError::ExternalError(e.to_string().into())),
            LogError::Seal(e) => LogError::Seal(e.clone()),
            LogError::InvalidTableName {
                database,
                table,
                reason,
            } => LogError::InvalidTableName {
                database: database.clone(),
                table: table.clone(),
                reason,
            },
        }
    }

    pub(crate) fn corrupt(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        LogError::CorruptSegment {
            path: path.into(),
            reason: reason.into(),
        }
    }
}
