//! Durable Arrow bucket logs: one append-only log per (table, bucket), owned by one core.
//!
//! Layout (interface.md "Storage"): `data.dir/<db>/<table>-<table_id>/bucket-<n>/` holds
//! segments `<base offset, 20 digits>.arrow`, each a valid Arrow IPC stream; row offset =
//! segment base offset + row index. See `docs/storage.md` for the whole story: rolling,
//! retention, recovery, fsync policy and the acks mapping.
//!
//! - [`appender::BucketLog`]: open, append, group-commit `sync_to`, retention, close.
//! - `recovery`: rebuilding a bucket from its files on open (torn tails, corrupt segments).
//! - [`file`](mod@file): the file-system seam (`SegmentFile`, `SegmentStore`) and the glommio store.
//! - [`segment`]: segment names and the IPC framing walk.
//! - [`registry`]: `(table_id, bucket) → BucketStats` for readers on other threads.
//! - [`sim`]: an in-memory, fault-injecting store for simulation tests.

pub mod appender;
pub mod checksum;
pub mod compression;
pub mod encode;
pub mod error;
pub mod file;
mod group_commit;
pub mod ipc;
mod recovery;
pub mod registry;
pub mod segment;
pub mod sim;

use std::path::{Path, PathBuf};
use std::rc::Weak;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

pub use appender::{AppendItem, BucketLog, RollTime, SyncObserver};
pub use compression::ArrowCompression;
pub use error::LogError;
pub use file::{GlommioStore, SegmentFile, SegmentStore};
pub use registry::LogRegistry;

/// Default `log.segment.size`: segments roll once they reach 256 MiB.
pub const DEFAULT_SEGMENT_SIZE: u64 = 256 << 20;
/// How often [`run_retention`] looks for expired segments.
pub const RETENTION_CHECK_INTERVAL: Duration = Duration::from_secs(60);

/// When the log calls `fdatasync` (server key `log.flush.policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FlushPolicy {
    /// Default: fsync only for callers that wait for durability (acks=-1 via `sync_to`),
    /// batched by group commit. acks=0/1 rows reach the page cache and the OS flushes them.
    #[default]
    Ack,
    /// Every append waits for a (group) fsync, whatever the acks.
    Always,
    /// Never fsync from the write path (`sync_to` returns once written); rolls and shutdown
    /// still fsync. For benchmarks and throwaway data.
    Never,
}

impl FlushPolicy {
    /// Parses the `log.flush.policy` value (`ack`, `always`, `never`; case-insensitive).
    pub fn parse(value: &str) -> Option<FlushPolicy> {
        match value.trim().to_ascii_lowercase().as_str() {
            "ack" => Some(FlushPolicy::Ack),
            "always" => Some(FlushPolicy::Always),
            "never" => Some(FlushPolicy::Never),
            _ => None,
        }
    }
}

/// Per-bucket log settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// Roll to a new segment once the active one holds this many bytes (`log.segment.size`).
    pub segment_size: u64,
    /// `log.writeback.size`: after every this many bytes appended to the active segment, the
    /// log asks the kernel to write them to disk and to drop the pages written back before
    /// ([`SegmentFile::write_back`]); 0 leaves the page cache to the kernel.
    pub writeback_size: u64,
    /// `log.preallocate.size`: the most bytes of file system blocks the active segment keeps
    /// allocated past its end ([`SegmentFile::preallocate`]); 0 never preallocates.
    pub preallocate_size: u64,
    /// `log.prewrite.size`: while someone waits for a bucket's fsyncs (acks=-1), the most bytes
    /// of zeros the active segment keeps written and synced past its end
    /// ([`SegmentFile::prewrite`]); 0 never writes any.
    pub prewrite_size: u64,
    pub flush_policy: FlushPolicy,
    /// `table.log.ttl`: segments whose newest row is older are deleted (an expired active
    /// segment is rolled first). None keeps all.
    pub retention: Option<Duration>,
    /// The table's `table.log.arrow.compression.*` ([`ArrowCompression`]; ZSTD level 3 by default).
    pub compression: ArrowCompression,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_size: DEFAULT_SEGMENT_SIZE,
            writeback_size: DEFAULT_WRITEBACK_SIZE,
            preallocate_size: DEFAULT_PREALLOCATE_SIZE,
            prewrite_size: DEFAULT_PREWRITE_SIZE,
            flush_policy: FlushPolicy::Ack,
            retention: Some(DEFAULT_TABLE_LOG_TTL),
            compression: ArrowCompression::default(),
        }
    }
}

/// The default `log.writeback.size`: 1 MiB.
pub const DEFAULT_WRITEBACK_SIZE: u64 = 1 << 20;

/// The default `log.preallocate.size`: 8 MiB.
pub const DEFAULT_PREALLOCATE_SIZE: u64 = 8 << 20;

/// The default `log.prewrite.size`: 1 MiB.
pub const DEFAULT_PREWRITE_SIZE: u64 = 1 << 20;

/// Fluss's default `table.log.ttl`: 7 days.
pub const DEFAULT_TABLE_LOG_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// Parses a `table.log.ttl` value: a duration in the one grammar of sizes and durations
/// ([`crate::units`]) that is not zero; None otherwise.
pub fn parse_ttl(value: &str) -> Option<Duration> {
    crate::units::parse_duration(value)
        .ok()
        .filter(|ttl| !ttl.is_zero())
}

/// What an append did: rows got offsets `[base_offset, next_offset)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendOutcome {
    pub base_offset: u64,
    pub next_offset: u64,
    /// Arrow IPC bytes written to the segment file for the batch (segment headers and
    /// end-of-stream markers not counted).
    pub bytes: u64,
}

/// Read-side state of one bucket, shared with other threads (HTTP scans and row counts).
#[derive(Debug, Default)]
pub struct BucketStats {
    /// High watermark: rows `[log_start_offset, next_offset)` are fully written. Published with
    /// `Release` after the write returns; readers load with `Acquire`.
    pub next_offset: AtomicU64,
    /// The first retained offset (moves when retention deletes segments).
    pub log_start_offset: AtomicU64,
    /// Set once recovery published the offsets above; until then they mean nothing and readers
    /// fall back to the segment files.
    pub opened: AtomicBool,
    /// Set by [`LogRegistry::remove_table`] when the table is dropped, before its directory is
    /// deleted: a scan that holds these stats then knows why its files went away.
    pub dropped: AtomicBool,
}

impl BucketStats {
    /// `(log_start_offset, next_offset)` once the bucket was opened, else None.
    pub fn offsets(&self) -> Option<(u64, u64)> {
        if !self.opened.load(Ordering::Acquire) {
            return None;
        }
        Some((
            self.log_start_offset.load(Ordering::Acquire),
            self.next_offset.load(Ordering::Acquire),
        ))
    }

    /// Whether the table of this bucket was dropped ([`LogRegistry::remove_table`]).
    pub fn dropped(&self) -> bool {
        self.dropped.load(Ordering::Acquire)
    }
}

/// `data.dir/<db>/<table>-<table_id>`, for a database and a table name that are names (the
/// rule of SQL, `catalog::names::check_fluss_name`): anything else, such as `..` or a name
/// holding a `/`, is refused, so the directory is always one inside `data_dir`.
pub fn table_dir(data_dir: &Path, database: &str, table: &str, table_id: u64) -> Result<PathBuf, LogError> {
    for name in [database, table] {
        crate::catalog::names::check_fluss_name(name).map_err(|reason| LogError::InvalidTableName {
            database: database.to_string(),
            table: table.to_string(),
            reason,
        })?;
    }
    Ok(data_dir.join(database).join(format!("{table}-{table_id}")))
}

/// A directory named as [`table_dir`] names them, found in a data dir by [`table_dirs`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundTableDir {
    /// `data.dir/<database>/<table>-<id>`.
    pub path: PathBuf,
    /// The database directory's name, as the file system gives it.
    pub database: std::ffi::OsString,
    pub table: String,
    pub id: u64,
}

/// The entries `data.dir/<database>/<table>-<id>` (an id of digits) of `data_dir`, whatever
/// their names and kinds otherwise: each caller judges what it found. Unreadable directories
/// and table entries whose names are not UTF-8 are skipped.
pub fn table_dirs(data_dir: &Path) -> Vec<FoundTableDir> {
    let mut found = Vec::new();
    let Ok(databases) = std::fs::read_dir(data_dir) else {
        return found;
    };
    for database in databases.filter_map(Result::ok) {
        let Ok(tables) = std::fs::read_dir(database.path()) else {
            continue;
        };
        let database_name = database.file_name();
        for table in tables.filter_map(Result::ok) {
            let file_name = table.file_name();
            let Some((name, id)) = file_name
                .to_str()
                .and_then(|name| name.rsplit_once('-'))
                .and_then(|(name, id)| Some((name, crate::units::digits(id)?)))
            else {
                continue;
            };
            found.push(FoundTableDir {
                path: table.path(),
                database: database_name.clone(),
                table: name.to_string(),
                id,
            });
        }
    }
    found
}

/// `<table_dir>/bucket-<n>`.
pub fn bucket_dir(table_dir: &Path, bucket: u32) -> PathBuf {
    table_dir.join(format!("bucket-{bucket}"))
}

/// Deletes a dropped table's directory with every bucket in it. Call it after the owner cores
/// dropped their `BucketLog`s (open files would keep the space until closed). Missing is fine.
/// Plain std::fs, so any thread may call it.
pub fn remove_table_dir(table_dir: &Path) -> Result<(), LogError> {
    match std::fs::remove_dir_all(table_dir) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(LogError::io(table_dir, "remove table directory", err)),
    }
}

/// The periodic retention task of one bucket: every `interval`, take the table's `table.log.ttl`
/// from `current_ttl` (None: keep the one in force) and delete expired segments. Spawn it on
/// the owner core (`glommio::spawn_local(run_retention(Rc::downgrade(&log), ..))`); it ends
/// when the log is dropped. Errors are logged, not fatal.
pub async fn run_retention<S: SegmentStore + 'static>(
    log: Weak<BucketLog<S>>,
    interval: Duration,
    current_ttl: impl Fn() -> Option<Duration>,
) {
    loop {
        glommio::timer::sleep(interval).await;
        let Some(log) = log.upgrade() else {
            return;
        };
        if let Some(ttl) = current_ttl() {
            log.set_retention(Some(ttl));
        }
        if let Err(err) = log.enforce_retention(log.now()).await {
            tracing::warn!(dir = %log.dir().display(), %err, "log retention failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_values_parse_like_fluss_durations() {
        assert_eq!(parse_ttl("7d"), Some(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_ttl("7 days"), Some(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_ttl("2h"), Some(Duration::from_secs(7_200)));
        assert_eq!(parse_ttl("30 min"), Some(Duration::from_secs(1_800)));
        assert_eq!(parse_ttl("10s"), Some(Duration::from_secs(10)));
        assert_eq!(parse_ttl("1500"), Some(Duration::from_millis(1_500)));
        assert_eq!(parse_ttl("0s"), None);
        assert_eq!(parse_ttl("-1"), None);
        assert_eq!(parse_ttl("7 weeks"), None);
        assert_eq!(parse_ttl("99999999999999999999d"), None);
    }

    #[test]
    fn flush_policy_parses_case_insensitively() {
        assert_eq!(FlushPolicy::parse("ACK"), Some(FlushPolicy::Ack));
        assert_eq!(FlushPolicy::parse("always"), Some(FlushPolicy::Always));
        assert_eq!(FlushPolicy::parse("never"), Some(FlushPolicy::Never));
        assert_eq!(FlushPolicy::parse("sometimes"), None);
    }

    #[test]
    fn paths_follow_the_storage_layout() {
        let dir = table_dir(Path::new("/data"), "sales", "orders", 7).unwrap();
        assert_eq!(dir, PathBuf::from("/data/sales/orders-7"));
        assert_eq!(
            bucket_dir(&dir, 3),
            PathBuf::from("/data/sales/orders-7/bucket-3")
        );
    }

    /// A name that is not a database or table name never becomes a path: before, a table
    /// named `../../victim` in catalog.json made DROP TABLE delete a directory outside data.dir.
    #[test]
    fn names_that_are_not_names_have_no_directory() {
        for (database, table) in [
            ("fluss", "../../victim"),
            ("fluss", ".."),
            ("..", "t"),
            ("fluss", "a/b"),
            ("/etc", "t"),
            ("fluss", ""),
        ] {
            let error = table_dir(Path::new("/data"), database, table, 7).unwrap_err();
            assert!(
                matches!(&error, LogError::InvalidTableName { database: d, table: t, .. } if d == database && t == table),
                "{database}.{table}: {error}"
            );
            assert!(
                error
                    .to_string()
                    .starts_with(&format!("table {database}.{table} has no storage directory: ")),
                "{error}"
            );
        }
    }
}
