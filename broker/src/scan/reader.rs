//! Reads one bucket's segments with std::fs from any thread, never past the high watermark.

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use arrow_array::RecordBatch;

use crate::log::checksum::{is_checksum_error, VerifyingReader};
use crate::log::ipc::SegmentReader;
use crate::log::BucketStats;

use super::ScanError;
use crate::log::segment::{
    parse_pending_segment_file_name, parse_segment_file_name, pending_segment_path, segment_path,
};

/// Segment base offsets in `bucket_dir`, ascending, including a segment a roll created that
/// still has its pending name; a missing directory has none.
pub fn list_segments(bucket_dir: &Path) -> Result<Vec<u64>, ScanError> {
    let entries = match std::fs::read_dir(bucket_dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(ScanError::Io {
                path: bucket_dir.to_path_buf(),
                source,
            })
        }
    };
    let mut bases = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| ScanError::Io {
            path: bucket_dir.to_path_buf(),
            source,
        })?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if let Some(base) = parse_segment_file_name(&name).or_else(|| parse_pending_segment_file_name(&name))
        {
            bases.push(base);
        }
    }
    bases.sort_unstable();
    bases.dedup();
    Ok(bases)
}

/// Opens segment `base` under its segment name or, while its roll is finishing, its pending
/// name. The rename only goes from pending to final, so one of the three tries finds it unless
/// it is gone (retention). NotFound when it is.
fn open_segment(bucket_dir: &Path, base: u64) -> std::io::Result<File> {
    let path = segment_path(bucket_dir, base);
    match File::open(&path) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        opened => return opened,
    }
    match File::open(pending_segment_path(bucket_dir, base)) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        opened => return opened,
    }
    File::open(&path)
}

/// A batch of rows read back, with the offset of its first row.
pub struct OffsetBatch {
    pub first_offset: u64,
    pub batch: RecordBatch,
}

/// Calls `visit` for the rows `[from, high_watermark)` of one bucket, batch by batch, already
/// sliced to that range. `stats` are the bucket's published offsets: once a core opened the
/// bucket the scan starts at its log start offset when `from` is below it (retention moves it
/// before deleting a file) and ends at its high watermark. None, or stats not yet opened (the
/// bucket's recovery failed), reads what recovery keeps ([`on_disk_offsets`]) and then ends
/// with the damage recovery found. `visit` returns false to stop early (limit reached).
///
/// Files removed while the scan runs: a segment the scan has opened is read to its end (Unix
/// unlink semantics). One that is gone when the scan comes to it is skipped only while the scan
/// has given none of this bucket's rows (the scan then starts later, as it would have had it
/// begun a moment later: its rows are below the new log start). After rows were given, the
/// scan ends with an error instead of jumping over the missing rows:
/// [`ScanError::TableDropped`] when `stats` say the table was dropped,
/// [`ScanError::DeletedByRetention`] when the log start moved past the next row, and
/// [`ScanError::CorruptSegment`] otherwise (a file deleted by hand).
pub fn read_bucket(
    bucket_dir: &Path,
    from: u64,
    stats: Option<&BucketStats>,
    visit: &mut dyn FnMut(OffsetBatch) -> Result<bool, ScanError>,
) -> Result<(), ScanError> {
    // A bucket no core opened: read up to what recovery would keep, then say what ends it, so
    // the scan agrees with recovery and with the row count.
    let (from, high_watermark, damage) = match stats.and_then(BucketStats::offsets) {
        // Segments below the log start are being deleted: not looked at.
        Some((log_start, high_watermark)) => (from.max(log_start), high_watermark, None),
        None => {
            let offsets = on_disk_offsets(bucket_dir)?;
            (from, offsets.next_offset, offsets.damage)
        }
    };
    let bounds = Bounds {
        from,
        high_watermark,
        stats,
    };
    if !read_bucket_to(bucket_dir, &bounds, visit)? {
        return Ok(());
    }
    match damage {
        Some((path, reason)) => Err(ScanError::CorruptSegment {
            path,
            reason: format!("{reason}; the rows from offset {high_watermark} on are not readable"),
        }),
        None => Ok(()),
    }
}

/// The range one bucket's read covers, and its stats (for why a file went away).
struct Bounds<'a> {
    from: u64,
    high_watermark: u64,
    stats: Option<&'a BucketStats>,
}

impl Bounds<'_> {
    /// Why the segment at `base` is gone when the scan gave every row up to `end` and needs
    /// the next: the table was dropped, retention deleted the rows, or the file was removed
    /// by someone else (damage).
    fn vanished(&self, bucket_dir: &Path, base: u64, end: u64) -> ScanError {
        let log_start = self.stats.and_then(BucketStats::offsets).map(|(start, _)| start);
        match log_start {
            _ if self.stats.is_some_and(BucketStats::dropped) => ScanError::TableDropped {
                dir: bucket_dir.to_path_buf(),
                next_offset: end,
            },
            Some(log_start) if log_start > end => ScanError::DeletedByRetention {
                dir: bucket_dir.to_path_buf(),
                from: end,
                to: log_start - 1,
            },
            _ => ScanError::CorruptSegment {
                path: segment_path(bucket_dir, base),
                reason: format!(
                    "the segment was removed while the scan read the bucket (not by retention: \
                     the log start offset is below it); the rows from offset {end} on are not readable"
                ),
            },
        }
    }
}

/// [`read_bucket`] up to the high watermark: true when it read to the end of what it may read
/// (not stopped by `visit`).
fn read_bucket_to(
    bucket_dir: &Path,
    bounds: &Bounds<'_>,
    visit: &mut dyn FnMut(OffsetBatch) -> Result<bool, ScanError>,
) -> Result<bool, ScanError> {
    let Bounds {
        from, high_watermark, ..
    } = *bounds;
    let bases = list_segments(bucket_dir)?;
    // Start at the last segment whose base is <= from (earlier ones hold only smaller offsets).
    let first = bases.iter().rposition(|&base| base <= from).unwrap_or(0);
    // The offset after the last row read of this bucket, once one was given to `visit`.
    let mut given_to: Option<u64> = None;
    for (index, &base) in bases.iter().enumerate().skip(first) {
        if base >= high_watermark {
            return Ok(true);
        }
        let read = read_segment(bucket_dir, base, from, high_watermark, &mut |batch| {
            given_to = Some(batch.first_offset + batch.batch.num_rows() as u64);
            visit(batch)
        })?;
        let end = match read {
            SegmentRead::Stopped => return Ok(false),
            SegmentRead::Watermark => return Ok(true),
            // Deleted after the listing. Before any row of the bucket was given, the scan
            // starts after it, as if it had listed a moment later; after, skipping it would
            // hand the client rows with a hole, so the scan ends saying why.
            SegmentRead::Gone => match given_to {
                None => continue,
                Some(end) => return Err(bounds.vanished(bucket_dir, base, end)),
            },
            SegmentRead::Ended(end) => end,
        };
        // Each segment starts where the one before ends (recovery checks it too): a segment
        // missing or cut short in the middle is damage, not rows that never were.
        if let Some(next) = bases.get(index + 1).copied().filter(|&next| next != end) {
            return Err(ScanError::CorruptSegment {
                path: segment_path(bucket_dir, next),
                reason: format!(
                    "{}; the rows from offset {end} on are not readable",
                    crate::log::segment::gap(next, end)
                ),
            });
        }
    }
    Ok(true)
}

/// How reading one segment ended.
enum SegmentRead {
    /// `visit` asked to stop.
    Stopped,
    /// The high watermark was reached.
    Watermark,
    /// The file was removed after the listing (retention, DROP TABLE).
    Gone,
    /// Read to its end, below the high watermark: the offset after its last row.
    Ended(u64),
}

/// Reads the rows of the segment at `base` below `high_watermark` (which is above `base`).
fn read_segment(
    bucket_dir: &Path,
    base: u64,
    from: u64,
    high_watermark: u64,
    visit: &mut dyn FnMut(OffsetBatch) -> Result<bool, ScanError>,
) -> Result<SegmentRead, ScanError> {
    let path = &segment_path(bucket_dir, base);
    let file = match open_segment(bucket_dir, base) {
        Ok(file) => file,
        // Removed after we listed it (retention, DROP TABLE): the caller decides what that means.
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(SegmentRead::Gone),
        Err(source) => {
            return Err(ScanError::Io {
                path: path.clone(),
                source,
            })
        }
    };
    // Every batch body is checked against its stored CRC32C as it is read.
    let reader = SegmentReader::try_new(VerifyingReader::new(BufReader::new(file)))
        .map_err(|err| ScanError::corrupt(path, err))?;
    let mut offset = base;
    for batch in reader {
        // Never ask the reader for a message that starts at or past the high watermark: it may
        // be half written.
        if offset >= high_watermark {
            return Ok(SegmentRead::Watermark);
        }
        let batch = match batch {
            Ok(batch) => batch,
            Err(err) if is_checksum_error(&err) => {
                return Err(ScanError::CorruptSegment {
                    path: path.clone(),
                    reason: format!("{err}; the rows from offset {offset} on are not readable"),
                })
            }
            Err(err) => return Err(ScanError::corrupt(path, err)),
        };
        let rows = batch.num_rows() as u64;
        let end = offset + rows;
        let wanted_start = from.max(offset);
        let wanted_end = high_watermark.min(end);
        if wanted_start < wanted_end {
            let slice = batch.slice(
                (wanted_start - offset) as usize,
                (wanted_end - wanted_start) as usize,
            );
            let keep_going = visit(OffsetBatch {
                first_offset: wanted_start,
                batch: slice,
            })?;
            if !keep_going {
                return Ok(SegmentRead::Stopped);
            }
        }
        offset = end;
    }
    Ok(if offset >= high_watermark {
        SegmentRead::Watermark
    } else {
        SegmentRead::Ended(offset)
    })
}

/// Offsets of a bucket read from its files, for buckets no core has opened since start (the
/// registry has no stats for them: their recovery failed).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BucketOffsets {
    pub log_start_offset: u64,
    /// The offset after the last row readable without a gap or damage from the first.
    pub next_offset: u64,
    /// The damage that ends the readable rows short of the files, as recovery found it:
    /// the segment and what is wrong. None when the files end there.
    pub damage: Option<(std::path::PathBuf, String)>,
}

impl BucketOffsets {
    pub fn rows(&self) -> u64 {
        self.next_offset.saturating_sub(self.log_start_offset)
    }
}

/// The first offset and the offset after the last row readable from the first without a gap
/// or damage, walking every segment as recovery does (framing, metadata and body checksums,
/// each segment starting where the one before ends; a torn tail of the last segment is not
/// damage). A missing or empty bucket is `0..0`. Only for buckets no core opened, which are
/// those whose recovery failed, so the full read is paid where it finds something.
pub fn on_disk_offsets(bucket_dir: &Path) -> Result<BucketOffsets, ScanError> {
    let bases = list_segments(bucket_dir)?;
    let Some(&first) = bases.first() else {
        return Ok(BucketOffsets::default());
    };
    let mut offsets = BucketOffsets {
        log_start_offset: first,
        next_offset: first,
        damage: None,
    };
    for (index, &base) in bases.iter().enumerate() {
        let path = segment_path(bucket_dir, base);
        if base != offsets.next_offset {
            let end = offsets.next_offset;
            offsets.damage = Some((path, crate::log::segment::gap(base, end)));
            break;
        }
        let io_error = |source| ScanError::Io {
            path: path.clone(),
            source,
        };
        let file = open_segment(bucket_dir, base).map_err(io_error)?;
        let scan = crate::log::segment::scan_segment_checked_blocking(&file).map_err(io_error)?;
        offsets.next_offset = base.saturating_add(scan.rows);
        let last = index + 1 == bases.len();
        let problem = scan.damaged.or(scan.torn.filter(|_| !last));
        if let Some(reason) = problem {
            offsets.damage = Some((path, reason));
            break;
        }
    }
    Ok(offsets)
}
