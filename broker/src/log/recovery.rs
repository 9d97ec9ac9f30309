//! Recovery on open: rebuild a bucket's state from its segment files.
//!
//! 1. List the segment files (other files are ignored with a warning; a `.arrow` file whose name
//!    is not a segment name is refused).
//! 2. Walk each segment's IPC framing ([`scan_segment`]). Every segment but the last must be
//!    complete and start where the previous one ends, else `CorruptSegment` names the file.
//!    Each batch body is checked against its CRC32C (`checksum`): a mismatch with complete
//!    messages after it is damage (`CorruptSegment`, the bucket stays closed); in the file's
//!    final message it is a torn tail.
//! 3. The last segment's torn tail is truncated to its last complete message and the file is
//!    fsync'd (after a process crash its tail may still be dirty in the page cache); a last
//!    segment without even a complete schema message holds no rows and is removed.
//! 4. A pending segment (`<base>.arrow.rolling`: a roll's new segment whose rename had not
//!    happened) is renamed and recovered as the last segment when the last segment is complete
//!    (end-of-stream marker) and ends at its base: the roll is finished. Any other pending
//!    segment is removed: the segment before it never became durable, so no row in it was
//!    acknowledged with acks=-1.

use std::collections::VecDeque;
use std::path::Path;
use std::rc::Rc;
use std::time::SystemTime;

use super::error::LogError;
use super::file::{sync_directory, SegmentFile, SegmentStore};
use super::segment::{
    parse_pending_segment_file_name, parse_segment_file_name, pending_segment_path, scan_segment_visiting,
    segment_path, ActiveSegment, Prewrite, SegmentInfo, SegmentScan, VisitedBatch, SEGMENT_SUFFIX,
};

/// What recovery found.
pub(super) struct Recovered<F> {
    pub closed: VecDeque<SegmentInfo>,
    pub active: Option<ActiveSegment<F>>,
    pub active_last_append: SystemTime,
    pub next_offset: u64,
    pub log_start_offset: u64,
}

/// Directory levels a bucket's open may create: the bucket's, its table's and its database's.
const NEW_DIRECTORY_LEVELS: usize = 3;

/// Recovers `dir`; `visit` sees every complete batch that stays in the log, with the bucket
/// offset of its first row (batches of a torn tail that is cut are not visited; when recovery
/// fails, what was visited means nothing).
pub(super) async fn recover<S: SegmentStore>(
    store: &S,
    dir: &Path,
    visit: &mut dyn FnMut(u64, &VisitedBatch<'_>),
) -> Result<Recovered<S::File>, LogError> {
    // The bucket directory and the table and database directories above it that do not exist
    // yet: each new entry is made durable in its parent, or a power loss could take the
    // directory, and the rows acknowledged in it, away.
    // An existing bucket directory's listing is the one recovery reads.
    let mut missing = Vec::new();
    let mut listed = None;
    let mut level = Some(dir);
    while let Some(path) = level.filter(|_| missing.len() < NEW_DIRECTORY_LEVELS) {
        if let Ok(names) = store.list(path).await {
            if path == dir {
                listed = Some(names);
            }
            break;
        }
        missing.push(path.to_path_buf());
        level = path.parent().filter(|parent| !parent.as_os_str().is_empty());
    }
    store
        .create_dir_all(dir)
        .await
        .map_err(|e| LogError::io(dir, "create directory", e))?;
    for created in missing.iter().rev() {
        if let Some(parent) = created.parent() {
            sync_directory(store, parent).await?;
        }
    }
    let names = match listed {
        Some(names) => names,
        None => store.list(dir).await.map_err(|e| LogError::io(dir, "list", e))?,
    };
    let (bases, mut pending) = segments_in(dir, names)?;
    let mut recovered = Recovered {
        closed: VecDeque::new(),
        active: None,
        active_last_append: store.now(),
        next_offset: bases.first().copied().unwrap_or(0),
        log_start_offset: bases.first().copied().unwrap_or(0),
    };
    // The pending segment whose roll recovery finishes (the last segment is complete and ends
    // where it starts).
    let mut adopt = None;
    for (index, &base_offset) in bases.iter().enumerate() {
        let path = segment_path(dir, base_offset);
        if base_offset != recovered.next_offset {
            return Err(LogError::corrupt(
                &path,
                super::segment::gap(base_offset, recovered.next_offset),
            ));
        }
        let is_last = index + 1 == bases.len();
        let (file, scan, last_append) = open_and_scan(store, &path, base_offset, visit).await?;
        if !is_last {
            // Every segment but the last was fsync'd whole before the next one got its name:
            // anything torn in it is damage.
            if let Some(reason) = &scan.torn {
                return Err(damage(&path, base_offset, &scan, reason));
            }
            if scan.schema.is_none() {
                return Err(LogError::corrupt(&path, "no schema message"));
            }
            if scan.zero_tail {
                // Closed, and the zeros written ahead of its end were not truncated away yet
                // (a crash inside the roll): they go now.
                file.truncate(scan.valid_len)
                    .await
                    .map_err(|e| LogError::io(&path, "truncate", e))?;
                file.sync().await.map_err(|e| LogError::io(&path, "fsync", e))?;
            }
            recovered.next_offset = checked_end(dir, base_offset, scan.rows)?;
            recovered.closed.push_back(SegmentInfo {
                base_offset,
                end_offset: recovered.next_offset,
                last_append,
            });
            continue;
        }
        recover_last(
            store,
            dir,
            &path,
            base_offset,
            file,
            scan,
            last_append,
            &mut recovered,
        )
        .await?;
        // A roll was interrupted between writing this segment's end-of-stream marker and
        // renaming the next one: the next one holds the rows after it only if this segment is
        // complete (closed) and ends where the pending one starts; it was fsync'd just above.
        if recovered.active.is_none()
            && recovered
                .closed
                .back()
                .is_some_and(|c| c.base_offset == base_offset)
            && pending.contains(&recovered.next_offset)
        {
            adopt = Some(recovered.next_offset);
        }
    }
    pending.retain(|&base| Some(base) != adopt);
    if !pending.is_empty() {
        // Created by a roll whose closed segment did not become durable (a crash before its
        // fsync): no row in it was acknowledged as durable, and it does not follow the log.
        for &base in &pending {
            let path = pending_segment_path(dir, base);
            tracing::warn!(
                path = %path.display(),
                "removing the segment of an unfinished roll: the segment before it is not complete"
            );
            store
                .remove(&path)
                .await
                .map_err(|e| LogError::io(&path, "remove", e))?;
        }
        sync_directory(store, dir).await?;
    }
    if let Some(base_offset) = adopt {
        let from = pending_segment_path(dir, base_offset);
        let path = segment_path(dir, base_offset);
        tracing::info!(path = %path.display(), "finishing an interrupted segment roll");
        store
            .rename(&from, &path)
            .await
            .map_err(|e| LogError::io(&from, "rename", e))?;
        sync_directory(store, dir).await?;
        let (file, scan, last_append) = open_and_scan(store, &path, base_offset, visit).await?;
        recover_last(
            store,
            dir,
            &path,
            base_offset,
            file,
            scan,
            last_append,
            &mut recovered,
        )
        .await?;
    }
    Ok(recovered)
}

/// Opens and walks one segment file (checking every body), refusing damage.
async fn open_and_scan<S: SegmentStore>(
    store: &S,
    path: &Path,
    base_offset: u64,
    visit: &mut dyn FnMut(u64, &VisitedBatch<'_>),
) -> Result<(S::File, SegmentScan, SystemTime), LogError> {
    let file = store
        .open(path)
        .await
        .map_err(|e| LogError::io(path, "open", e))?;
    let scan = scan_segment_visiting(&file, true, &mut |batch| {
        visit(base_offset.saturating_add(batch.first_row), batch)
    })
    .await
    .map_err(|e| LogError::io(path, "read", e))?;
    let last_append = store
        .modified(path)
        .await
        .map_err(|e| LogError::io(path, "stat", e))?;
    if let Some(reason) = &scan.damaged {
        // Bytes that a later batch says were fsync'd do not read back: rot or an outside
        // write, not a crash. Nothing is guessed: the bucket stays closed (every append is
        // refused) until an operator repairs it (docs/storage.md).
        return Err(damage(path, base_offset, &scan, reason));
    }
    Ok((file, scan, last_append))
}

/// The error that keeps a bucket closed over damage in its segment at `path`: what is wrong,
/// and how much of the file before it is intact (what a repair keeps).
fn damage(path: &Path, base_offset: u64, scan: &SegmentScan, reason: &str) -> LogError {
    let offset = base_offset.saturating_add(scan.rows);
    LogError::corrupt(
        path,
        format!(
            "{reason}; rows before offset {offset} are intact (the file's first {} bytes)",
            scan.valid_len
        ),
    )
}

/// The last segment: a torn tail is truncated, the file fsync'd; it becomes the active
/// segment, a closed one, or (without a complete schema message) is removed.
#[allow(clippy::too_many_arguments)]
async fn recover_last<S: SegmentStore>(
    store: &S,
    dir: &Path,
    path: &Path,
    base_offset: u64,
    file: S::File,
    scan: SegmentScan,
    last_append: SystemTime,
    recovered: &mut Recovered<S::File>,
) -> Result<(), LogError> {
    if scan.zero_tail {
        // Zeros written ahead of the appends (`log.prewrite.size`), not damage.
        tracing::info!(
            path = %path.display(), kept_bytes = scan.valid_len, file_bytes = scan.file_len,
            "truncating the zeros written ahead of the last log segment's end"
        );
    } else if let Some(reason) = &scan.torn {
        tracing::warn!(
            path = %path.display(), %reason, kept_bytes = scan.valid_len, file_bytes = scan.file_len,
            "truncating torn tail of the last log segment"
        );
    }
    // Also when nothing is torn: a truncate to the file's own length releases the blocks a
    // crash left preallocated past its end (`log.preallocate.size`).
    file.truncate(scan.valid_len)
        .await
        .map_err(|e| LogError::io(path, "truncate", e))?;
    // After a process crash the tail may still sit unsynced in the page cache; fsync it
    // so that everything recovery reports as present is durable.
    file.sync().await.map_err(|e| LogError::io(path, "fsync", e))?;
    let Some(schema) = scan.schema else {
        // Torn before its schema was complete: it holds no rows. Remove it; the next
        // append recreates it under the same name.
        drop(file);
        store
            .remove(path)
            .await
            .map_err(|e| LogError::io(path, "remove", e))?;
        sync_directory(store, dir).await?;
        return Ok(());
    };
    recovered.next_offset = checked_end(dir, base_offset, scan.rows)?;
    if scan.closed {
        recovered.closed.push_back(SegmentInfo {
            base_offset,
            end_offset: recovered.next_offset,
            last_append,
        });
    } else {
        recovered.active_last_append = last_append;
        recovered.active = Some(ActiveSegment {
            file: Rc::new(file),
            path: path.to_path_buf(),
            base_offset,
            len: scan.valid_len,
            schema,
            written_back: 0,
            write_back_from: 0,
            preallocated_to: scan.valid_len,
            prewrite: Prewrite::new(scan.valid_len),
        });
    }
    Ok(())
}

fn checked_end(dir: &Path, base_offset: u64, rows: u64) -> Result<u64, LogError> {
    base_offset
        .checked_add(rows)
        .ok_or_else(|| LogError::OffsetOverflow {
            dir: dir.to_path_buf(),
        })
}

/// Segment base offsets in `dir`, ascending, and those of pending segments (a roll's new
/// segment before its rename). Other files are ignored with a warning, except `*.arrow` files
/// whose name is not a segment name, which are refused.
fn segments_in(dir: &Path, names: Vec<String>) -> Result<(Vec<u64>, Vec<u64>), LogError> {
    let mut bases = Vec::with_capacity(names.len());
    let mut pending = Vec::new();
    for name in names {
        if let Some(base) = parse_pending_segment_file_name(&name) {
            pending.push(base);
            continue;
        }
        match parse_segment_file_name(&name) {
            Some(base) => bases.push(base),
            None if name.ends_with(SEGMENT_SUFFIX) => {
                return Err(LogError::UnexpectedFile { path: dir.join(name) });
            }
            None => tracing::warn!(dir = %dir.display(), file = %name, "ignoring non-segment file"),
        }
    }
    bases.sort_unstable();
    pending.sort_unstable();
    Ok((bases, pending))
}
