//! Files deleted while a scan reads the table: retention overtaking a scan that is in the
//! middle of a bucket, and DROP TABLE. The scan either gives gap-free rows or ends with an
//! explicit error after the rows it sent; it never jumps over rows that went away.
//!
//! Deterministic: the scan's output blocks on its first write (64 KiB of jsonl, with a
//! segment open) until the test has run retention or the drop.

mod log_support;

use std::io::Write;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, SystemTime};

use kafluss_broker::log::{
    bucket_dir, remove_table_dir, ArrowCompression, BucketLog, FlushPolicy, LogConfig, LogRegistry,
};
use kafluss_broker::scan::{scan_table, ScanError, ScanParams, ScanSummary, ScanTarget};
use log_support::{batch, run_local, schema};

const TABLE_ID: u64 = 7;
/// Rows per appended batch, and batches per bucket: about 190 KiB of jsonl, so the scan's
/// first write (64 KiB) comes about a third of the way through.
const ROWS: usize = 50;
const BATCHES: usize = 60;

fn config(segment_size: u64) -> LogConfig {
    LogConfig {
        segment_size,
        writeback_size: 0,
        preallocate_size: 64 << 10,
        prewrite_size: 0,
        flush_policy: FlushPolicy::Ack,
        retention: Some(Duration::from_secs(60)),
        compression: ArrowCompression::None,
    }
}

fn target(table_dir: &Path, bucket_count: u32) -> ScanTarget {
    ScanTarget {
        table_id: TABLE_ID,
        table_dir: table_dir.to_path_buf(),
        bucket_count,
        schema: schema(),
    }
}

/// The scan's output: its first write tells `paused` and waits for `resume`, so the scan
/// stops with the segment it is reading open.
struct PausingWriter {
    bytes: Vec<u8>,
    paused: Option<mpsc::Sender<()>>,
    resume: mpsc::Receiver<()>,
}

impl Write for PausingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(paused) = self.paused.take() {
            paused.send(()).unwrap();
            self.resume.recv().unwrap();
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

type ScanResult = (Result<ScanSummary, ScanError>, Vec<u8>);

/// Starts a whole-table jsonl scan on another thread; returns once it is paused at its first
/// write, with the sender that lets it go on and the thread to join.
fn start_paused_scan(
    target: ScanTarget,
    registry: Arc<LogRegistry>,
) -> (mpsc::Sender<()>, thread::JoinHandle<ScanResult>) {
    let (paused_tx, paused_rx) = mpsc::channel();
    let (resume_tx, resume_rx) = mpsc::channel();
    let scan = thread::spawn(move || {
        let mut out = PausingWriter {
            bytes: Vec::new(),
            paused: Some(paused_tx),
            resume: resume_rx,
        };
        let result = scan_table(&target, &ScanParams::default(), &registry, &mut out);
        (result, out.bytes)
    });
    paused_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the scan reaches its first write");
    (resume_tx, scan)
}

/// Opens bucket `bucket` of the table and appends `BATCHES` batches of `ROWS` rows (ids
/// 0, 1, ...: each row's id is its offset).
async fn filled_bucket(
    table_dir: &Path,
    registry: &LogRegistry,
    bucket: u32,
    segment_size: u64,
) -> BucketLog {
    let stats = registry.register(TABLE_ID, bucket);
    let log = BucketLog::open(&bucket_dir(table_dir, bucket), config(segment_size), stats)
        .await
        .unwrap();
    for i in 0..BATCHES {
        log.append(&batch((i * ROWS) as i64, ROWS)).await.unwrap();
    }
    log
}

/// `(bucket, offset)` of every row line, checking `offset = id`, and the error line if any.
fn parse(bytes: &[u8]) -> (Vec<(u64, u64)>, Option<serde_json::Value>) {
    let mut rows = Vec::new();
    let mut error = None;
    for line in String::from_utf8(bytes.to_vec()).unwrap().lines() {
        let value: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(error.is_none(), "nothing follows the error line: {line}");
        if value.get("error").is_some() {
            error = Some(value["error"].clone());
            continue;
        }
        let offset = value["offset"].as_u64().unwrap();
        assert_eq!(value["row"]["id"].as_u64(), Some(offset), "offset = id");
        rows.push((value["bucket"].as_u64().unwrap(), offset));
    }
    (rows, error)
}

/// Asserts that `rows` of `bucket` are the offsets `0..rows.len()` with no hole.
fn assert_gap_free(rows: &[(u64, u64)], bucket: u64) {
    let offsets: Vec<u64> = rows
        .iter()
        .filter(|(b, _)| *b == bucket)
        .map(|(_, o)| *o)
        .collect();
    let expected: Vec<u64> = (0..offsets.len() as u64).collect();
    assert!(
        offsets == expected,
        "bucket {bucket}: offsets jump ({} rows, first jump after {:?})",
        offsets.len(),
        offsets.windows(2).find(|pair| pair[1] != pair[0] + 1)
    );
}

#[test]
fn retention_that_overtakes_a_scan_ends_it_with_an_error_not_a_hole() {
    let tmp = tempfile::tempdir().unwrap();
    let table_dir = tmp.path().join("db/t-7");
    let registry = Arc::new(LogRegistry::new());
    let (result, bytes, log_start, segments_before) = {
        let (table_dir, registry) = (table_dir.clone(), registry.clone());
        run_local(async move {
            // 4 KiB segments: about 20 of them.
            let log = filled_bucket(&table_dir, &registry, 0, 4 << 10).await;
            let segments_before = log.segment_count();
            let (resume, scan) = start_paused_scan(target(&table_dir, 1), registry.clone());
            // The scan is in the middle of the bucket with one segment open: every closed
            // segment but the last expires.
            let far = SystemTime::now() + Duration::from_secs(3600);
            let deleted = log.enforce_retention(far).await.unwrap();
            assert!(
                deleted + 2 >= segments_before,
                "{deleted} of {segments_before} deleted"
            );
            resume.send(()).unwrap();
            let (result, bytes) = scan.join().unwrap();
            (result, bytes, log.log_start_offset(), segments_before)
        })
    };
    assert!(segments_before >= 10, "{segments_before} segments");
    let (rows, error) = parse(&bytes);
    assert_gap_free(&rows, 0);
    let sent = rows.len() as u64;
    assert!(
        sent > 0 && sent < log_start,
        "{sent} rows sent, log start {log_start}"
    );
    match result {
        Err(ScanError::DeletedByRetention { dir, from, to }) => {
            assert_eq!(dir, bucket_dir(&table_dir, 0));
            assert_eq!((from, to), (sent, log_start - 1), "the rows not read");
        }
        other => panic!("expected DeletedByRetention after {sent} rows, got {other:?}"),
    }
    let error = error.expect("an error line ends the rows");
    assert_eq!(error["code"], "DELETED_BY_RETENTION");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("the rows from offset {sent} to {}", log_start - 1))
            && message.contains("retention (table.log.ttl)")
            && message.contains(&format!("from={log_start}")),
        "{message}"
    );
}

#[test]
fn a_scan_starts_at_the_log_start_even_while_the_files_below_it_remain() {
    // Retention moves the log start before it removes the file: a scan that starts in between
    // reads from the log start, never the rows being deleted.
    let tmp = tempfile::tempdir().unwrap();
    let table_dir = tmp.path().join("db/t-7");
    let registry = Arc::new(LogRegistry::new());
    {
        let (table_dir, registry) = (table_dir.clone(), registry.clone());
        run_local(async move {
            let log = filled_bucket(&table_dir, &registry, 0, 4 << 10).await;
            log.close().await.unwrap();
        });
    }
    let stats = registry.get(TABLE_ID, 0).unwrap();
    stats.log_start_offset.store(1234, Ordering::Release);
    for (query, first) in [("", 1234), ("from=1000", 1234), ("from=2000", 2000)] {
        let mut out = Vec::new();
        let params = ScanParams::from_query(query).unwrap();
        scan_table(&target(&table_dir, 1), &params, &registry, &mut out).unwrap();
        let (rows, error) = parse(&out);
        assert!(error.is_none());
        let offsets: Vec<u64> = rows.iter().map(|(_, offset)| *offset).collect();
        let expected: Vec<u64> = (first..(BATCHES * ROWS) as u64).collect();
        assert!(offsets == expected, "{query:?}: first {:?}", offsets.first());
    }
}

/// Drops the table the way the DROP hook does: logs closed, stats forgotten (marked
/// dropped), then the directory deleted.
async fn drop_table(logs: Vec<BucketLog>, registry: &LogRegistry, table_dir: &Path) {
    for log in logs {
        log.close().await.unwrap();
    }
    registry.remove_table(TABLE_ID);
    remove_table_dir(table_dir).unwrap();
}

#[test]
fn a_drop_during_a_scan_ends_it_with_table_dropped() {
    let tmp = tempfile::tempdir().unwrap();
    let table_dir = tmp.path().join("db/t-7");
    let registry = Arc::new(LogRegistry::new());
    let (result, bytes) = {
        let (table_dir, registry) = (table_dir.clone(), registry.clone());
        run_local(async move {
            let logs = vec![
                filled_bucket(&table_dir, &registry, 0, 4 << 10).await,
                filled_bucket(&table_dir, &registry, 1, 4 << 10).await,
            ];
            let (resume, scan) = start_paused_scan(target(&table_dir, 2), registry.clone());
            drop_table(logs, &registry, &table_dir).await;
            resume.send(()).unwrap();
            scan.join().unwrap()
        })
    };
    let (rows, error) = parse(&bytes);
    assert_gap_free(&rows, 0);
    assert!(
        rows.iter().all(|(bucket, _)| *bucket == 0),
        "bucket 1 is not read"
    );
    let sent = rows.len() as u64;
    assert!(sent > 0 && sent < (BATCHES * ROWS) as u64, "{sent} rows");
    match result {
        Err(ScanError::TableDropped { dir, next_offset }) => {
            assert_eq!((dir, next_offset), (bucket_dir(&table_dir, 0), sent));
        }
        other => panic!("expected TableDropped after {sent} rows, got {other:?}"),
    }
    let error = error.expect("an error line ends the rows");
    assert_eq!(error["code"], "TABLE_DROPPED");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("dropped (DROP TABLE) during the scan"),
        "{error}"
    );
}

#[test]
fn a_drop_between_two_buckets_of_a_scan_ends_it_with_table_dropped() {
    // Bucket 0 is one segment, which the scan has open when the table goes: it reads it to its
    // end, and bucket 1's directory is gone by the time the scan would list it. Without the
    // check the scan ended as complete with bucket 0's rows only.
    let tmp = tempfile::tempdir().unwrap();
    let table_dir = tmp.path().join("db/t-7");
    let registry = Arc::new(LogRegistry::new());
    let (result, bytes) = {
        let (table_dir, registry) = (table_dir.clone(), registry.clone());
        run_local(async move {
            let logs = vec![
                filled_bucket(&table_dir, &registry, 0, 16 << 20).await,
                filled_bucket(&table_dir, &registry, 1, 16 << 20).await,
            ];
            let (resume, scan) = start_paused_scan(target(&table_dir, 2), registry.clone());
            drop_table(logs, &registry, &table_dir).await;
            resume.send(()).unwrap();
            scan.join().unwrap()
        })
    };
    let (rows, error) = parse(&bytes);
    assert_gap_free(&rows, 0);
    let rows_per_bucket = (BATCHES * ROWS) as u64;
    assert_eq!(
        rows.len() as u64,
        rows_per_bucket,
        "bucket 0 whole, nothing of bucket 1"
    );
    match result {
        // Found when bucket 0's read ends (the drop came before it): nothing after it is read.
        Err(ScanError::TableDropped { dir, next_offset }) => {
            assert_eq!((dir, next_offset), (bucket_dir(&table_dir, 0), rows_per_bucket));
        }
        other => panic!("expected TableDropped, got {other:?}"),
    }
    assert_eq!(
        error.expect("an error line ends the rows")["code"],
        "TABLE_DROPPED"
    );
}
