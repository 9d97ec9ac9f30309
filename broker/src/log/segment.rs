//! Segment files: names, the bookkeeping of a closed or active segment (shared by the appender
//! and recovery), and the Arrow IPC stream framing walk used by recovery and tests.
//!
//! A segment is an Arrow IPC *stream*: a schema message, then one record-batch message per
//! appended batch, then (only once the segment is closed) the end-of-stream marker. Every
//! message is `0xFFFFFFFF`, a little-endian u32 metadata length, the flatbuffer metadata
//! (padded to 8 bytes) and the body whose length the metadata declares. The walk below reads
//! only those headers, so it costs a few small reads per batch, not the batch bytes.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::SystemTime;

use arrow_ipc::MessageHeader;
use arrow_schema::SchemaRef;

use super::checksum::{CONTINUATION, MAX_METADATA_LEN};
use super::file::SegmentFile;

/// Segment files are `<base offset, 20 digits>.arrow`.
pub const SEGMENT_SUFFIX: &str = ".arrow";
const OFFSET_DIGITS: usize = 20;

/// The end-of-stream marker written when a segment is closed.
pub(crate) const END_OF_STREAM: [u8; 8] = [0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0];

/// A segment that is no longer appended to (or the active one, for its bookkeeping).
#[derive(Debug, Clone)]
pub(super) struct SegmentInfo {
    pub base_offset: u64,
    /// Exclusive end: base_offset + rows.
    pub end_offset: u64,
    /// When its newest row was appended (recovered segments: the file's mtime).
    pub last_append: SystemTime,
}

/// The segment being appended to.
pub(super) struct ActiveSegment<F> {
    pub file: Rc<F>,
    pub path: PathBuf,
    pub base_offset: u64,
    /// Bytes in the file = the position of the next write.
    pub len: u64,
    pub schema: SchemaRef,
    /// Bytes before this were handed to the kernel's writeback ([`super::SegmentFile::write_back`]).
    pub written_back: u64,
    /// Where the next write-back request starts: the start of the previous one, whose pages are
    /// clean by the time the next is due and are dropped with it.
    pub write_back_from: u64,
    /// File system blocks were requested up to here ([`super::SegmentFile::preallocate`]).
    pub preallocated_to: u64,
    /// The zeros written ahead of the end for cheaper fsyncs ([`super::SegmentFile::prewrite`]).
    pub prewrite: Rc<Prewrite>,
}

/// The prewrites of one active segment: shared with the task running the current one.
#[derive(Debug, Default)]
pub(super) struct Prewrite {
    /// Bytes `[.., done_to)` are appended or prewritten (the next prewrite starts here or at
    /// the segment's end, whichever is later).
    pub done_to: std::cell::Cell<u64>,
    /// `[start, end)` is being prewritten: no append may write into it until it is done.
    pub running: std::cell::Cell<Option<(u64, u64)>>,
    /// A prewrite of this file failed: none is started again.
    pub failed: std::cell::Cell<bool>,
    /// Notified when a prewrite ends.
    pub finished: super::group_commit::WaitList,
}

impl Prewrite {
    pub fn new(done_to: u64) -> Rc<Prewrite> {
        let prewrite = Prewrite::default();
        prewrite.done_to.set(done_to);
        Rc::new(prewrite)
    }

    /// Resolves once no running prewrite overlaps the bytes before `end`.
    pub async fn clear_below(&self, end: u64) {
        while let Some((start, _)) = self.running.get() {
            if start >= end {
                return;
            }
            let seen = self.finished.generation();
            self.finished.changed(seen).await;
        }
    }
}

/// A segment created by a roll is named `<base offset>.arrow.rolling` until the segment before
/// it is durable (fsync'd by the roll's background task), then renamed to its segment name.
pub const PENDING_SUFFIX: &str = ".arrow.rolling";

pub fn segment_file_name(base_offset: u64) -> String {
    format!("{base_offset:0width$}{SEGMENT_SUFFIX}", width = OFFSET_DIGITS)
}

/// The pending name of segment `base_offset` ([`PENDING_SUFFIX`]).
pub fn pending_segment_file_name(base_offset: u64) -> String {
    format!("{base_offset:0width$}{PENDING_SUFFIX}", width = OFFSET_DIGITS)
}

/// The base offset a pending segment name encodes, or None for any other name.
pub fn parse_pending_segment_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(PENDING_SUFFIX)?;
    parse_segment_file_name(&format!("{digits}{SEGMENT_SUFFIX}"))
}

/// The base offset a segment file name encodes, or None for any other name.
pub fn parse_segment_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(SEGMENT_SUFFIX)?;
    if digits.len() != OFFSET_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// What the framing walk found in one segment file.
#[derive(Debug, Clone)]
pub struct SegmentScan {
    /// The stream's schema; None when not even the schema message is complete.
    pub schema: Option<SchemaRef>,
    /// Rows in complete record-batch messages.
    pub rows: u64,
    /// Bytes up to the end of the last complete message (including an end-of-stream marker).
    pub valid_len: u64,
    pub file_len: u64,
    /// The end-of-stream marker was found: the segment was closed.
    pub closed: bool,
    /// Why the bytes after `valid_len` are not a complete message, if there are any.
    pub torn: Option<String>,
    /// Bytes at `valid_len` that are not a complete message (or a batch whose body does not
    /// match its checksum) while a later complete message says they were fsync'd, or was
    /// written before messages said so ([`SYNCED_KEY`]): damage, not a torn tail (checked
    /// walks only).
    pub damaged: Option<String>,
    /// Every byte after `valid_len` is zero: written ahead of the appends
    /// ([`super::SegmentFile::prewrite`]) and never overwritten. Not torn when the segment is
    /// closed (the marker came before the zeros were truncated away); torn otherwise.
    pub zero_tail: bool,
}

impl SegmentScan {
    fn torn(mut self, reason: impl Into<String>) -> Self {
        self.torn = Some(reason.into());
        self
    }

    fn damaged(mut self, reason: impl Into<String>) -> Self {
        self.damaged = Some(reason.into());
        self
    }
}

/// Bytes read at a time when checking a body.
const CHECK_CHUNK: u64 = 1 << 20;

/// Reads the body at `start` and decodes the record batch `message` describes: `Ok(Err(_))`
/// says why it does not decode.
async fn decode_batch<F: SegmentFile>(
    file: &F,
    message: &arrow_ipc::Message<'_>,
    start: u64,
    len: u64,
    schema: SchemaRef,
) -> std::io::Result<Result<(), String>> {
    let Some(batch) = message.header_as_record_batch() else {
        return Ok(Err("not a record batch".into()));
    };
    let mut body = Vec::with_capacity(len as usize);
    while (body.len() as u64) < len {
        let want = CHECK_CHUNK.min(len - body.len() as u64) as usize;
        let bytes = file.read_at(start + body.len() as u64, want).await?;
        if bytes.is_empty() {
            return Ok(Err("short read of its body".into()));
        }
        body.extend_from_slice(&bytes);
    }
    let decoded = arrow_ipc::reader::read_record_batch(
        &arrow_buffer::Buffer::from(body),
        batch,
        schema,
        &std::collections::HashMap::new(),
        None,
        &message.version(),
    );
    Ok(decoded.map(|_| ()).map_err(|e| e.to_string()))
}

/// Whether every byte of `[pos, file_len)` is zero (read [`CHECK_CHUNK`] bytes at a time).
async fn zeros_to_end<F: SegmentFile>(file: &F, mut pos: u64, file_len: u64) -> std::io::Result<bool> {
    while pos < file_len {
        let want = CHECK_CHUNK.min(file_len - pos) as usize;
        let bytes = file.read_at(pos, want).await?;
        if bytes.is_empty() {
            return Ok(false);
        }
        if bytes.iter().any(|&b| b != 0) {
            return Ok(false);
        }
        pos += bytes.len() as u64;
    }
    Ok(true)
}

/// Reads the body at `start` and compares it with the checksum in `message`: None when it
/// matches or there is none to compare with, else what is wrong.
async fn check_body<F: SegmentFile>(
    file: &F,
    message: &arrow_ipc::Message<'_>,
    start: u64,
    len: u64,
) -> std::io::Result<Option<String>> {
    let stored = match super::checksum::body_checksum(message) {
        None => return Ok(None),
        Some(Err(reason)) => return Ok(Some(reason)),
        Some(Ok(stored)) => stored,
    };
    let mut crc = 0;
    let mut pos = start;
    while pos < start + len {
        let want = CHECK_CHUNK.min(start + len - pos) as usize;
        let bytes = file.read_at(pos, want).await?;
        if bytes.is_empty() {
            return Ok(Some(format!("short read of a batch body at byte {pos}")));
        }
        crc = kafluss_protocol::crc::crc32c_append(crc, &bytes);
        pos += bytes.len() as u64;
    }
    Ok((crc != stored).then(|| super::checksum::mismatch(start, stored, crc)))
}

/// Walks the IPC framing of a whole segment file. I/O errors are returned; malformed bytes are
/// not errors here but a `torn` reason, and the caller decides (truncate a last segment, refuse
/// a middle one). With `verify`, every record-batch body that carries a checksum
/// ([`super::checksum`]) is read and checked: a mismatch in the file's final message is a torn
/// tail like any other (it may be the unsynced end of a crash), one with complete messages
/// after it is `damaged`. Without `verify` bodies are skipped unread.
pub async fn scan_segment<F: SegmentFile>(file: &F, verify: bool) -> std::io::Result<SegmentScan> {
    scan_segment_visiting(file, verify, &mut |_| {}).await
}

/// What the framing walk shows a visitor of one complete record-batch message.
pub struct VisitedBatch<'a> {
    /// Rows of the segment before this batch (its first row's index in the segment).
    pub first_row: u64,
    pub rows: u64,
    /// The message's metadata, custom metadata included.
    pub message: &'a arrow_ipc::Message<'a>,
}

/// [`scan_segment`], calling `visit` with every complete record-batch message that passed its
/// checks (in file order; a torn or damaged message is not visited). Recovery reads the tags the
/// writer stored with each batch this way, without reading a body twice.
pub async fn scan_segment_visiting<F: SegmentFile>(
    file: &F,
    verify: bool,
    visit: &mut dyn FnMut(&VisitedBatch<'_>),
) -> std::io::Result<SegmentScan> {
    let file_len = file.size().await?;
    let mut scan = SegmentScan {
        schema: None,
        rows: 0,
        valid_len: 0,
        file_len,
        closed: false,
        torn: None,
        damaged: None,
        zero_tail: false,
    };
    let mut pos = 0u64;
    let mut window = ReadWindow::default();
    // Whether a record-batch message before this one carried a checksum, and one of its
    // framing and metadata.
    let mut checksummed = false;
    let mut meta_checksummed = false;
    loop {
        if pos == file_len {
            return Ok(scan);
        }
        let remaining = file_len - pos;
        if remaining < 8 {
            return Ok(scan.torn(format!("partial message header at byte {pos}")));
        }
        let header = window.read(file, pos, 8, file_len).await?;
        if header.len() < 8 {
            let reason = format!("short read of message header at byte {pos}");
            return torn_or_damaged(scan, reason, file, pos, verify).await;
        }
        if header[..4] != CONTINUATION {
            if zeros_to_end(file, pos, file_len).await? {
                scan.zero_tail = true;
                return Ok(scan.torn(format!("zeros written ahead of the appends from byte {pos}")));
            }
            let reason = format!("no IPC continuation marker at byte {pos}");
            return torn_or_damaged(scan, reason, file, pos, verify).await;
        }
        let metadata_len = u64::from(u32::from_le_bytes([header[4], header[5], header[6], header[7]]));
        if metadata_len == 0 {
            scan.closed = true;
            scan.valid_len = pos + 8;
            if scan.valid_len != file_len && zeros_to_end(file, scan.valid_len, file_len).await? {
                scan.zero_tail = true;
            } else if scan.valid_len != file_len {
                let reason = format!("bytes after the end-of-stream marker at byte {}", pos + 8);
                return torn_or_damaged(scan, reason, file, pos, verify).await;
            }
            return Ok(scan);
        }
        if metadata_len > MAX_METADATA_LEN || metadata_len > remaining - 8 {
            let reason = format!("partial message metadata at byte {pos}");
            return torn_or_damaged(scan, reason, file, pos, verify).await;
        }
        // Bounded by MAX_METADATA_LEN and by the file length checked just above.
        let metadata = window
            .read(file, pos + 8, metadata_len as usize, file_len)
            .await?;
        if (metadata.len() as u64) < metadata_len {
            let reason = format!("short read of message metadata at byte {pos}");
            return torn_or_damaged(scan, reason, file, pos, verify).await;
        }
        let message = match super::ipc::message(&metadata) {
            Ok(message) => message,
            Err(err) => {
                let reason = format!("invalid message metadata at byte {pos}: {err}");
                return torn_or_damaged(scan, reason, file, pos, verify).await;
            }
        };
        let body_len = message.bodyLength();
        let Ok(body_len) = u64::try_from(body_len) else {
            let reason = format!("negative body length at byte {pos}");
            return torn_or_damaged(scan, reason, file, pos, verify).await;
        };
        let end = pos + 8 + metadata_len;
        if body_len > file_len - end {
            // Its metadata says more than the file holds: torn, unless the metadata is what
            // is damaged and complete messages follow.
            let reason = match super::checksum::metadata_mismatch(&header, &metadata, &message) {
                Some(problem) if verify => format!("{problem} (message at byte {pos})"),
                _ => format!("partial message body at byte {pos}"),
            };
            return torn_or_damaged(scan, reason, file, pos, verify).await;
        }
        match message.header_type() {
            MessageHeader::Schema if scan.schema.is_none() => {
                let Some(fb_schema) = message.header_as_schema() else {
                    return Ok(scan.torn(format!("unreadable schema message at byte {pos}")));
                };
                match arrow_ipc::convert::try_fb_to_schema(fb_schema) {
                    Ok(schema) => scan.schema = Some(std::sync::Arc::new(schema)),
                    Err(err) => return Ok(scan.torn(format!("invalid schema at byte {pos}: {err}"))),
                }
            }
            MessageHeader::RecordBatch if scan.schema.is_some() => {
                if verify {
                    // kafluss writes no batch of no rows, and once a segment's batches carry
                    // checksums every later one does: metadata zeroed by a crash (which still
                    // parses, every field at its default) is damage, not a batch of 0 rows
                    // that would shift every later row's offset.
                    let has_checksum = super::checksum::body_checksum(&message).is_some();
                    let has_meta = super::checksum::has_metadata_checksum(&message);
                    // The framing and metadata first: with them damaged, nothing else they
                    // say (rows, body length, the body's checksum) can be trusted, and whether
                    // complete messages follow is found by looking for them.
                    if let Some(problem) = super::checksum::metadata_mismatch(&header, &metadata, &message) {
                        let reason = format!("{problem} (message at byte {pos})");
                        return torn_or_damaged(scan, reason, file, pos, verify).await;
                    }
                    if meta_checksummed && !has_meta {
                        let reason = format!(
                            "a record batch without the metadata checksum every earlier one has (message at byte {pos})"
                        );
                        return torn_or_damaged(scan, reason, file, pos, verify).await;
                    }
                    if super::checksum::lost_metadata_checksum(&metadata, &message) {
                        let reason = format!(
                            "{} (message at byte {pos})",
                            super::checksum::DAMAGED_METADATA_KEY
                        );
                        return torn_or_damaged(scan, reason, file, pos, verify).await;
                    }
                    meta_checksummed |= has_meta;
                    let rows = message.header_as_record_batch().map_or(0, |batch| batch.length());
                    let malformed = if rows <= 0 {
                        Some(format!("a record batch of {rows} rows"))
                    } else if checksummed && !has_checksum {
                        Some("a record batch without the checksum every earlier one has".to_string())
                    } else if !has_checksum && !super::checksum::written_before_checksums(&metadata, &message)
                    {
                        // The first batch of a segment too: custom metadata that a crash
                        // zeroed in part (the keys gone, the rest still parsing) is not a
                        // batch written before checksums, whose body would go unchecked.
                        Some(super::checksum::DAMAGED_KEYS.to_string())
                    } else {
                        match check_body(file, &message, end, body_len).await? {
                            // No checksum covers what its metadata says of the body (a batch
                            // written before the metadata checksum, or the first of a segment
                            // whose metadata lost it with no trace of the name): its buffers
                            // must at least fit the segment's schema and its body, or a crash
                            // zeroed them (no field nodes left) and readers could not decode it.
                            None if !has_meta => {
                                let schema = scan.schema.clone().expect("matched above");
                                decode_batch(file, &message, end, body_len, schema)
                                    .await?
                                    .err()
                                    .map(|problem| format!("a record batch that does not decode: {problem}"))
                            }
                            checked => checked,
                        }
                    };
                    checksummed |= has_checksum;
                    if let Some(problem) = malformed {
                        let reason = format!("{problem} (message at byte {pos})");
                        // The file's last message, unless only zeros written ahead follow it.
                        let last = end + body_len == file_len
                            || zeros_to_end(file, end + body_len, file_len).await?;
                        if last {
                            return Ok(scan.torn(reason));
                        }
                        // Its framing and metadata match their checksum: the next message
                        // starts at its end. Else (0 rows, or no checksums where every earlier
                        // batch has them or where its custom metadata is damaged: metadata
                        // zeroed) none of it is believed.
                        let from = if has_meta { end + body_len } else { pos + 1 };
                        let after = after_damage(file, from, file_len, scan.rows).await?;
                        return Ok(after.judge(scan, reason));
                    }
                }
                // The file's last batch (followed by nothing, or by nothing but zeros written
                // ahead) may be the one a crash tore: the bytes that reached the disk, then
                // zeros, in its metadata too, which no checksum covers. It is kept only if it
                // decodes.
                let next = end + body_len;
                let last = next == file_len
                    || (window.read(file, next, 8, file_len).await? == [0; 8]
                        && zeros_to_end(file, next, file_len).await?);
                // (A batch without a metadata checksum was decoded above.)
                if verify && last && super::checksum::has_metadata_checksum(&message) {
                    let schema = scan.schema.clone().expect("matched above");
                    if let Err(problem) = decode_batch(file, &message, end, body_len, schema).await? {
                        return Ok(scan.torn(format!(
                            "the last batch, at byte {pos}, does not decode: {problem}"
                        )));
                    }
                }
                let rows = message.header_as_record_batch().map(|batch| batch.length());
                match rows.and_then(|rows| u64::try_from(rows).ok()) {
                    Some(rows) => {
                        visit(&VisitedBatch {
                            first_row: scan.rows,
                            rows,
                            message: &message,
                        });
                        scan.rows += rows;
                    }
                    None => {
                        let reason = format!("invalid record batch length at byte {pos}");
                        return torn_or_damaged(scan, reason, file, pos, verify).await;
                    }
                }
            }
            other => {
                let reason = format!("unexpected {other:?} message at byte {pos}");
                return torn_or_damaged(scan, reason, file, pos, verify).await;
            }
        }
        pos = end + body_len;
        scan.valid_len = pos;
    }
}

/// A torn tail, unless `verify` finds that the bytes at `pos` were once fsync'd: a complete
/// record-batch message after them, whose framing and metadata match their checksum, says so
/// ([`after_damage`]). A crash tears only the end of what was being written, and a power loss
/// that wrote back later pages before earlier ones damages only bytes no fsync had covered; so
/// what was fsync'd and reads damaged is damage (recovery refuses the bucket), anything else a
/// torn tail (recovery cuts it).
async fn torn_or_damaged<F: SegmentFile>(
    scan: SegmentScan,
    reason: String,
    file: &F,
    pos: u64,
    verify: bool,
) -> std::io::Result<SegmentScan> {
    if !verify {
        return Ok(scan.torn(reason));
    }
    let after = after_damage(file, pos + 1, scan.file_len, scan.rows).await?;
    Ok(after.judge(scan, reason))
}

/// The custom-metadata key of every batch the log writes ([`super::BucketLog`]): how many rows
/// of its segment were fsync'd when it was written (decimal). A later batch so says which
/// earlier bytes were durable: damage in them is damage, not the unsynced tail of a power loss.
pub const SYNCED_KEY: &str = "kafluss.synced";

/// What follows damaged bytes of a segment.
#[derive(Debug, PartialEq, Eq)]
enum AfterDamage {
    /// No complete record-batch message whose framing and metadata match their checksum.
    Nothing,
    /// Such messages, starting at `first`, each saying (`SYNCED_KEY`) that no fsync had
    /// covered the damaged rows when it was written: the damage is in bytes never fsync'd (a
    /// power loss wrote later pages back before earlier ones).
    Unsynced { first: u64 },
    /// The message at `at` says the damaged rows were fsync'd (`synced` of its segment's rows
    /// were), or does not say (`None`: written before the key existed).
    Synced { at: u64, synced: Option<u64> },
}

impl AfterDamage {
    fn judge(self, scan: SegmentScan, reason: String) -> SegmentScan {
        match self {
            AfterDamage::Nothing => scan.torn(reason),
            AfterDamage::Unsynced { first } => scan.torn(format!(
                "{reason}; the complete batches from byte {first} on were written before any \
                 fsync covered these bytes (pages written back out of order)"
            )),
            AfterDamage::Synced {
                at,
                synced: Some(synced),
            } => scan.damaged(format!(
                "{reason}, and a complete batch follows at byte {at}, written after {synced} \
                 rows of the segment were fsync'd"
            )),
            AfterDamage::Synced { at, synced: None } => {
                scan.damaged(format!("{reason}, and a complete batch follows at byte {at}"))
            }
        }
    }
}

/// Walks the complete record-batch messages after damage at `from` (found by
/// [`Search::next_from`], each followed to its end, a search again past any further damage)
/// until one says that more than `rows_before` rows of the segment (the rows before the
/// damage) were fsync'd when it was written, or does not say: [`AfterDamage::Synced`]. The
/// key's values only grow along a segment, so all of them up to the file's end at most
/// `rows_before` is [`AfterDamage::Unsynced`]; none found, [`AfterDamage::Nothing`].
async fn after_damage<F: SegmentFile>(
    file: &F,
    from: u64,
    file_len: u64,
    rows_before: u64,
) -> std::io::Result<AfterDamage> {
    let mut search = Search::default();
    let mut first = None;
    let mut at = from;
    while let Some(found) = search.next_from(file, at, file_len).await? {
        first.get_or_insert(found.at);
        match found.synced {
            Some(synced) if synced <= rows_before => at = found.end,
            synced => return Ok(AfterDamage::Synced { at: found.at, synced }),
        }
    }
    Ok(match first {
        Some(first) => AfterDamage::Unsynced { first },
        None => AfterDamage::Nothing,
    })
}

/// Candidates of [`Search::next_from`] whose metadata runs past the chunk read with them, read
/// on their own at most this many times per search.
const FAR_CANDIDATES: usize = 64;

/// Bytes of candidates' metadata a [`Search`] verifies at most: bytes crafted to look like a
/// marker and a long length at every position (a value stored uncompressed can hold anything)
/// must not make a start-up walk take hours. Real messages' metadata is a few KiB, so the
/// messages after real damage are found long before this.
const SEARCH_METADATA_BYTES: u64 = 64 << 20;

/// A complete record-batch message found by [`Search::next_from`].
#[derive(Debug, Clone, Copy)]
struct Checked {
    at: u64,
    /// Where the message ends (its body fits in the file).
    end: u64,
    /// Its [`SYNCED_KEY`], when it has a readable one.
    synced: Option<u64>,
}

/// The search for complete messages after damage: one forward pass over the file, read
/// [`CHECK_CHUNK`] bytes at a time (a message's body skipped unread when the next search
/// starts past it), with one budget ([`SEARCH_METADATA_BYTES`], [`FAR_CANDIDATES`]).
#[derive(Default)]
struct Search {
    chunk_at: u64,
    chunk: Vec<u8>,
    far_reads: usize,
    verified: u64,
}

impl Search {
    /// The first record-batch message at or after `from` (at 8-byte boundaries, where the
    /// writer starts every message) whose framing and metadata match their checksum
    /// ([`super::checksum::METADATA_CHECKSUM_KEY`]) and whose body fits in the file; None when
    /// there is none, or the budget is spent.
    async fn next_from<F: SegmentFile>(
        &mut self,
        file: &F,
        from: u64,
        file_len: u64,
    ) -> std::io::Result<Option<Checked>> {
        let mut at = from.next_multiple_of(8);
        while at + 8 <= file_len {
            let chunk_end = self.chunk_at + self.chunk.len() as u64;
            if at < self.chunk_at || at + 8 > chunk_end {
                self.chunk = file.read_at(at, CHECK_CHUNK.min(file_len - at) as usize).await?;
                self.chunk_at = at;
                if self.chunk.len() < 8 {
                    return Ok(None);
                }
            }
            let offset = (at - self.chunk_at) as usize;
            let candidate = at;
            at += 8;
            let prefix = &self.chunk[offset..offset + 8];
            if prefix[..4] != CONTINUATION {
                continue;
            }
            let len = u64::from(u32::from_le_bytes([prefix[4], prefix[5], prefix[6], prefix[7]]));
            if len == 0 || len > MAX_METADATA_LEN || candidate + 8 + len > file_len {
                continue;
            }
            // Every candidate's metadata is verified as a flatbuffer: at most
            // SEARCH_METADATA_BYTES of it in all, then the search gives up (finds nothing).
            self.verified += len;
            if self.verified > SEARCH_METADATA_BYTES {
                return Ok(None);
            }
            // The metadata from the chunk when it lies there (a kafluss message's is a few KiB);
            // else read, at most FAR_CANDIDATES times a search: bytes crafted to look like a
            // marker and a long length at every position must not make it read the file
            // over and over.
            let start = offset + 8;
            let far;
            let metadata = match self.chunk.get(start..start + len as usize) {
                Some(inside) => inside,
                None if self.far_reads < FAR_CANDIDATES => {
                    self.far_reads += 1;
                    far = file.read_at(candidate + 8, len as usize).await?;
                    &far[..]
                }
                None => continue,
            };
            let Ok(message) = super::ipc::message(metadata) else {
                continue;
            };
            let body = u64::try_from(message.bodyLength())
                .ok()
                .filter(|&body| body <= file_len - (candidate + 8 + len));
            if let Some(body) = body.filter(|_| {
                message.header_type() == MessageHeader::RecordBatch
                    && super::checksum::has_metadata_checksum(&message)
                    && super::checksum::metadata_mismatch(prefix, metadata, &message).is_none()
            }) {
                let synced = super::checksum::custom_value(&message, SYNCED_KEY).and_then(|v| v.parse().ok());
                return Ok(Some(Checked {
                    at: candidate,
                    end: candidate + 8 + len + body,
                    synced,
                }));
            }
        }
        Ok(None)
    }
}

/// Read-ahead for the framing walk: message headers of small batches sit close together, so
/// one 1 MiB read serves many of them instead of two tiny reads per batch; large bodies are
/// skipped without being read.
#[derive(Default)]
struct ReadWindow {
    start: u64,
    bytes: Vec<u8>,
}

const READ_WINDOW: usize = 1 << 20;

impl ReadWindow {
    /// `len` bytes at `pos` (fewer only if the file is shorter than it said).
    async fn read<F: SegmentFile>(
        &mut self,
        file: &F,
        pos: u64,
        len: usize,
        file_len: u64,
    ) -> std::io::Result<Vec<u8>> {
        let end = pos + len as u64;
        let window_end = self.start + self.bytes.len() as u64;
        if pos < self.start || end > window_end {
            let want = (len.max(READ_WINDOW) as u64).min(file_len.saturating_sub(pos).max(len as u64));
            self.bytes = file.read_at(pos, want as usize).await?;
            self.start = pos;
        }
        let from = (pos - self.start) as usize;
        let to = (from + len).min(self.bytes.len());
        Ok(self.bytes[from.min(to)..to].to_vec())
    }
}

/// [`scan_segment`] over a std file, for threads without a glommio executor (the admin HTTP
/// thread). Std reads complete at once, so the future is ready on its first poll.
pub fn scan_segment_blocking(file: &std::fs::File) -> std::io::Result<SegmentScan> {
    scan_std_file(file, false)
}

/// [`scan_segment_blocking`] with every message checked (framing, metadata and body, and the
/// last batch decoded), as recovery walks a segment.
pub(crate) fn scan_segment_checked_blocking(file: &std::fs::File) -> std::io::Result<SegmentScan> {
    scan_std_file(file, true)
}

/// [`scan_segment`] of a std file, polled once: its reads never suspend.
fn scan_std_file(file: &std::fs::File, verify: bool) -> std::io::Result<SegmentScan> {
    let segment = StdSegment(file);
    let mut future = std::pin::pin!(scan_segment(&segment, verify));
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(result) => result,
        std::task::Poll::Pending => Err(std::io::Error::other(
            "segment scan did not complete synchronously",
        )),
    }
}

/// A read-only [`SegmentFile`] over a std file whose calls never suspend.
struct StdSegment<'a>(&'a std::fs::File);

impl SegmentFile for StdSegment<'_> {
    async fn write_at(&self, _buf: Vec<u8>, _pos: u64) -> std::io::Result<usize> {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "read-only segment",
        ))
    }

    async fn read_at(&self, pos: u64, len: usize) -> std::io::Result<Vec<u8>> {
        use std::io::{Read, Seek, SeekFrom};
        let mut file = self.0;
        file.seek(SeekFrom::Start(pos))?;
        let mut bytes = Vec::with_capacity(len);
        file.take(len as u64).read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    async fn sync(&self) -> std::io::Result<()> {
        Ok(())
    }

    async fn truncate(&self, _len: u64) -> std::io::Result<()> {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "read-only segment",
        ))
    }

    async fn size(&self) -> std::io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }

    fn write_back(&self, _start: u64, _end: u64) -> bool {
        true // nothing is written through it
    }

    fn preallocate(&self, _start: u64, _end: u64) -> bool {
        true // nothing is written through it
    }

    async fn prewrite(&self, _start: u64, _end: u64) -> std::io::Result<()> {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "read-only segment",
        ))
    }
}

/// What is wrong with a bucket whose segment at `base` does not start where the one before it
/// ends (`previous_end`): recovery and scans say the same.
pub fn gap(base: u64, previous_end: u64) -> String {
    format!("segment starts at offset {base}, but the previous one ends at {previous_end}")
}

/// The path of segment `base_offset` in `bucket_dir`.
pub fn segment_path(bucket_dir: &Path, base_offset: u64) -> std::path::PathBuf {
    bucket_dir.join(segment_file_name(base_offset))
}

/// The pending path of segment `base_offset` in `bucket_dir`.
pub fn pending_segment_path(bucket_dir: &Path, base_offset: u64) -> std::path::PathBuf {
    bucket_dir.join(pending_segment_file_name(base_offset))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An in-memory segment that counts what is read from it and refuses to read more than
    /// `limit` bytes in all.
    struct Counted {
        bytes: Vec<u8>,
        read: std::cell::Cell<u64>,
        limit: u64,
    }

    impl SegmentFile for Counted {
        async fn write_at(&self, _buf: Vec<u8>, _pos: u64) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::Unsupported.into())
        }

        async fn read_at(&self, pos: u64, len: usize) -> std::io::Result<Vec<u8>> {
            let start = (pos as usize).min(self.bytes.len());
            let end = start.saturating_add(len).min(self.bytes.len());
            self.read.set(self.read.get() + (end - start) as u64);
            if self.read.get() > self.limit {
                return Err(std::io::Error::other(format!(
                    "read more than {} bytes",
                    self.limit
                )));
            }
            Ok(self.bytes[start..end].to_vec())
        }

        async fn sync(&self) -> std::io::Result<()> {
            Ok(())
        }

        async fn truncate(&self, _len: u64) -> std::io::Result<()> {
            Err(std::io::ErrorKind::Unsupported.into())
        }

        async fn size(&self) -> std::io::Result<u64> {
            Ok(self.bytes.len() as u64)
        }

        fn write_back(&self, _start: u64, _end: u64) -> bool {
            true
        }

        fn preallocate(&self, _start: u64, _end: u64) -> bool {
            true
        }

        async fn prewrite(&self, _start: u64, _end: u64) -> std::io::Result<()> {
            Err(std::io::ErrorKind::Unsupported.into())
        }
    }

    /// Bytes that look like a continuation marker and a 16 MiB metadata length at every 8-byte
    /// position (a value stored uncompressed can hold them): the search for a complete message
    /// after damage gives up within a bounded read, finding none, where it read 16 MiB per
    /// position (terabytes for a segment of them, a start-up that never ended).
    #[test]
    fn the_search_for_a_message_after_damage_is_bounded_on_crafted_bytes() {
        let pattern = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x00];
        let file = Counted {
            bytes: pattern.repeat(4 << 20),
            read: std::cell::Cell::new(0),
            limit: 256 << 20,
        };
        let mut search = std::pin::pin!(after_damage(&file, 1, file.bytes.len() as u64, 0));
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        let found = match search.as_mut().poll(&mut context) {
            std::task::Poll::Ready(found) => found,
            std::task::Poll::Pending => panic!("reads of a Counted file never suspend"),
        };
        assert_eq!(found.unwrap(), AfterDamage::Nothing);
        assert!(
            file.read.get() <= (SEARCH_METADATA_BYTES + 2 * CHECK_CHUNK),
            "{}",
            file.read.get()
        );
    }

    #[test]
    fn names_round_trip_and_reject_others() {
        assert_eq!(segment_file_name(0), "00000000000000000000.arrow");
        assert_eq!(segment_file_name(1234), "00000000000000001234.arrow");
        assert_eq!(parse_segment_file_name("00000000000000001234.arrow"), Some(1234));
        assert_eq!(
            parse_segment_file_name(&segment_file_name(u64::MAX)),
            Some(u64::MAX)
        );
        assert_eq!(parse_segment_file_name("1234.arrow"), None);
        assert_eq!(parse_segment_file_name("0000000000000000123a.arrow"), None);
        assert_eq!(parse_segment_file_name("00000000000000001234.tmp"), None);
        assert_eq!(parse_segment_file_name("99999999999999999999.arrow"), None);
        assert_eq!(
            parse_pending_segment_file_name(&pending_segment_file_name(1234)),
            Some(1234)
        );
        assert_eq!(
            parse_pending_segment_file_name("00000000000000001234.arrow"),
            None
        );
        assert_eq!(
            parse_segment_file_name("00000000000000001234.arrow.rolling"),
            None
        );
        assert_eq!(parse_pending_segment_file_name("1234.arrow.rolling"), None);
    }
}
