//! Bucket log on real files through glommio: append, read back, offsets across segments and
//! restarts, schema-change rolls, retention, torn tails and corrupt segments.

mod log_support;

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arrow_schema::{DataType, Field, Schema};
use kafluss_broker::log::segment::{segment_file_name, SEGMENT_SUFFIX};
use kafluss_broker::log::{ArrowCompression, BucketLog, BucketStats, FlushPolicy, LogConfig, LogError};
use log_support::{batch, batch_with, ids_in_stream, run_local};

fn config(segment_size: u64) -> LogConfig {
    LogConfig {
        segment_size,
        writeback_size: 0,
        preallocate_size: 64 << 10,
        prewrite_size: 0,
        flush_policy: FlushPolicy::Ack,
        retention: None,
        compression: ArrowCompression::None,
    }
}

fn segment_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(SEGMENT_SUFFIX))
        .collect();
    names.sort();
    names
}

/// Every id in every segment of `dir`, in offset order; also checks that each segment's name
/// is the offset of its first row (ids equal offsets in these tests).
fn read_all_ids(dir: &Path) -> Vec<i64> {
    let mut all = Vec::new();
    for name in segment_names(dir) {
        let ids = ids_in_stream(&std::fs::read(dir.join(&name)).unwrap());
        if let Some(first) = ids.first() {
            assert_eq!(
                name,
                segment_file_name(*first as u64),
                "segment named by its base offset"
            );
        }
        all.extend(ids);
    }
    all
}

#[test]
fn appends_get_contiguous_offsets_and_read_back() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bucket-0");
    let stats = Arc::new(BucketStats::default());
    let seen = stats.clone();
    let d = dir.clone();
    run_local(async move {
        let log = BucketLog::open(&d, config(1 << 20), stats).await.unwrap();
        assert_eq!(log.next_offset(), 0);
        let first = log.append(&batch(0, 3)).await.unwrap();
        assert_eq!((first.base_offset, first.next_offset), (0, 3));
        let second = log.append(&batch(3, 5)).await.unwrap();
        assert_eq!((second.base_offset, second.next_offset), (3, 8));
        log.sync_to(8).await.unwrap();
        assert_eq!(log.durable_offset(), 8);
    });
    assert_eq!(seen.next_offset.load(Ordering::Acquire), 8);
    assert_eq!(segment_names(&dir), vec![segment_file_name(0)]);
    assert_eq!(read_all_ids(&dir), (0..8).collect::<Vec<_>>());
}

#[test]
fn offsets_stay_contiguous_across_size_rolls_and_restarts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bucket-1");
    // ~1 KiB segments: every couple of batches rolls.
    for round in 0..3i64 {
        let d = dir.clone();
        run_local(async move {
            let log = BucketLog::open(&d, config(1024), Arc::new(BucketStats::default()))
                .await
                .unwrap();
            let mut next = round * 40;
            assert_eq!(log.next_offset(), next as u64, "restart restores next offset");
            for _ in 0..8 {
                let outcome = log.append(&batch(next, 5)).await.unwrap();
                assert_eq!(outcome.base_offset, next as u64);
                next += 5;
            }
            log.close().await.unwrap();
        });
    }
    let names = segment_names(&dir);
    assert!(names.len() > 3, "size rolls made several segments: {names:?}");
    assert_eq!(read_all_ids(&dir), (0..120).collect::<Vec<_>>());
}

#[test]
fn a_schema_change_rolls_to_a_new_segment() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bucket-0");
    let d = dir.clone();
    run_local(async move {
        let log = BucketLog::open(&d, config(1 << 20), Arc::new(BucketStats::default()))
            .await
            .unwrap();
        log.append(&batch(0, 2)).await.unwrap();
        let wider = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("label", DataType::Utf8, true),
        ]));
        let outcome = log.append(&batch_with(wider, 2, 3)).await.unwrap();
        assert_eq!(outcome.base_offset, 2);
        assert_eq!(log.segment_count(), 2);
        // Back to the first schema: another roll.
        log.append(&batch(5, 1)).await.unwrap();
        assert_eq!(log.segment_count(), 3);
        // Waits for the last roll's background fsync and rename.
        log.close().await.unwrap();
    });
    assert_eq!(
        segment_names(&dir),
        vec![segment_file_name(0), segment_file_name(2), segment_file_name(5)]
    );
    assert_eq!(read_all_ids(&dir), (0..6).collect::<Vec<_>>());
    let second = std::fs::read(dir.join(segment_file_name(2))).unwrap();
    let reader = arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(second), None).unwrap();
    assert_eq!(reader.schema().field(1).name(), "label");
}

#[test]
fn retention_deletes_old_closed_segments_but_never_the_last() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bucket-0");
    let stats = Arc::new(BucketStats::default());
    let seen = stats.clone();
    let d = dir.clone();
    run_local(async move {
        let config = LogConfig {
            segment_size: 512,
            writeback_size: 0,
            preallocate_size: 64 << 10,
            prewrite_size: 0,
            flush_policy: FlushPolicy::Ack,
            retention: Some(Duration::from_secs(3600)),
            compression: ArrowCompression::None,
        };
        let log = BucketLog::open(&d, config, stats).await.unwrap();
        for i in 0..6 {
            log.append(&batch(i * 10, 10)).await.unwrap();
        }
        // Retention keeps the newest closed segment while its roll's fsync runs: let it finish.
        log.sync_to(log.next_offset()).await.unwrap();
        let before = log.segment_count();
        assert!(before >= 3, "needs several segments, got {before}");
        // Nothing is old yet.
        assert_eq!(log.enforce_retention(SystemTime::now()).await.unwrap(), 0);
        // Two hours later every segment is expired: the active one is rolled and deleted too,
        // and a new empty segment carries the next offset.
        let later = SystemTime::now() + Duration::from_secs(7200);
        let deleted = log.enforce_retention(later).await.unwrap();
        assert_eq!(deleted, before);
        assert_eq!(log.log_start_offset(), 60);
        assert_eq!(log.segment_count(), 1);
        assert!(log.log_start_offset() > 0);
        // Appends continue at the right offset.
        assert_eq!(log.append(&batch(60, 1)).await.unwrap().base_offset, 60);
        log.close().await.unwrap();
        log.log_start_offset()
    });
    let start = seen.log_start_offset.load(Ordering::Acquire);
    assert!(start > 0);
    let names = segment_names(&dir);
    assert_eq!(names.first().unwrap(), &segment_file_name(start));
    assert_eq!(read_all_ids(&dir), (start as i64..61).collect::<Vec<_>>());
    // Recovery starts the log where retention left it.
    let d = dir.clone();
    let reopened_start = run_local(async move {
        let log = BucketLog::open(&d, config(512), Arc::new(BucketStats::default()))
            .await
            .unwrap();
        assert_eq!(log.next_offset(), 61);
        log.log_start_offset()
    });
    assert_eq!(reopened_start, start);
}

/// Tears the last segment at seeded random byte positions and checks recovery keeps exactly
/// the batches that were completely written, then continues at the right offset.
#[test]
fn torn_tails_at_random_points_keep_exactly_the_complete_batches() {
    let seed: u64 = std::env::var("KAFLUSS_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_1e55);
    let mut rng = kafluss_broker::log::sim::SimRng::new(seed);
    for case in 0..12 {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("bucket-0");
        // Write batches of random sizes; remember the file length after each one.
        let sizes: Vec<usize> = (0..6).map(|_| rng.range(1, 50) as usize).collect();
        let d = dir.clone();
        let batch_sizes = sizes.clone();
        let ends: Vec<u64> = run_local(async move {
            let log = BucketLog::open(&d, config(1 << 30), Arc::new(BucketStats::default()))
                .await
                .unwrap();
            let mut ends = Vec::new();
            let mut next = 0i64;
            for rows in batch_sizes {
                log.append(&batch(next, rows)).await.unwrap();
                next += rows as i64;
                ends.push(std::fs::metadata(d.join(segment_file_name(0))).unwrap().len());
            }
            ends
        });
        let path = dir.join(segment_file_name(0));
        let full = std::fs::metadata(&path).unwrap().len();
        let cut = rng.range(0, full);
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(cut).unwrap();
        drop(file);
        let complete = ends.iter().filter(|&&end| end <= cut).count();
        let expected_rows: usize = sizes[..complete].iter().sum();

        let d = dir.clone();
        let next = run_local(async move {
            let log = BucketLog::open(&d, config(1 << 30), Arc::new(BucketStats::default()))
                .await
                .unwrap();
            let next = log.next_offset();
            log.append(&batch(next as i64, 2)).await.unwrap();
            next
        });
        assert_eq!(
            next, expected_rows as u64,
            "seed {seed:#x} case {case}: cut at {cut} of {full}, batch ends {ends:?}"
        );
        assert_eq!(
            read_all_ids(&dir),
            (0..expected_rows as i64 + 2).collect::<Vec<_>>(),
            "seed {seed:#x} case {case}"
        );
    }
}

#[test]
fn a_corrupt_middle_segment_is_an_error_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bucket-0");
    let d = dir.clone();
    run_local(async move {
        let log = BucketLog::open(&d, config(256), Arc::new(BucketStats::default()))
            .await
            .unwrap();
        for i in 0..4 {
            log.append(&batch(i * 4, 4)).await.unwrap();
        }
        assert!(log.segment_count() >= 3);
    });
    let first = dir.join(segment_file_name(0));
    let len = std::fs::metadata(&first).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(&first).unwrap();
    file.set_len(len - 3).unwrap();
    drop(file);
    let d = dir.clone();
    let err = run_local(async move {
        BucketLog::open(&d, config(256), Arc::new(BucketStats::default()))
            .await
            .err()
            .expect("recovery must refuse a torn middle segment")
    });
    match &err {
        LogError::CorruptSegment { path, .. } => assert_eq!(path, &first),
        other => panic!("expected CorruptSegment, got {other:?}"),
    }
    assert!(err.to_string().contains(&segment_file_name(0)), "{err}");
}

#[test]
fn a_missing_offset_range_between_segments_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bucket-0");
    let d = dir.clone();
    run_local(async move {
        let log = BucketLog::open(&d, config(256), Arc::new(BucketStats::default()))
            .await
            .unwrap();
        for i in 0..4 {
            log.append(&batch(i * 4, 4)).await.unwrap();
        }
    });
    let names = segment_names(&dir);
    assert!(names.len() >= 3);
    std::fs::remove_file(dir.join(&names[1])).unwrap();
    let d = dir.clone();
    let err = run_local(async move {
        BucketLog::open(&d, config(256), Arc::new(BucketStats::default()))
            .await
            .err()
            .expect("a gap must be refused")
    });
    assert!(
        err.to_string().contains(&names[2]),
        "names the segment after the gap: {err}"
    );
}

#[test]
fn flush_policy_always_makes_every_append_durable() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bucket-0");
    run_local(async move {
        let config = LogConfig {
            flush_policy: FlushPolicy::Always,
            ..config(1 << 20)
        };
        let log = BucketLog::open(&dir, config, Arc::new(BucketStats::default()))
            .await
            .unwrap();
        log.append(&batch(0, 3)).await.unwrap();
        assert_eq!(log.durable_offset(), 3);
        assert_eq!(log.group_syncs(), 1);
    });
}

/// Two batches of 10 rows on the simulated disk, the first one's metadata (from its checksum on)
/// and body zeroed, as a crash that persisted a later page but not an earlier one leaves them:
/// the zeroed flatbuffer still parses, as a record batch of 0 rows without a checksum. With
/// `synced` the first batch was fsync'd before the second was written. What opening gives.
async fn open_with_first_of_two_zeroed(
    synced: bool,
) -> (
    Result<BucketLog<kafluss_broker::log::sim::SimStore>, LogError>,
    std::path::PathBuf,
) {
    let store = kafluss_broker::log::sim::SimStore::new(2);
    let dir = std::path::PathBuf::from("/sim/db/t-1/bucket-0");
    let log = log_support::open_sim(&store, &dir, config(1 << 20)).await;
    log.append(&batch(0, 10)).await.unwrap();
    if synced {
        log.sync_to(10).await.unwrap();
    }
    log.append(&batch(10, 10)).await.unwrap();
    drop(log);
    let segment = dir.join(segment_file_name(0));
    let mut bytes = store.file_bytes(&segment).unwrap();
    let mut writer = arrow_ipc::writer::StreamWriter::try_new(Vec::new(), &log_support::schema()).unwrap();
    let first = std::mem::take(writer.get_mut()).len();
    let metadata_len = u32::from_le_bytes(bytes[first + 4..first + 8].try_into().unwrap()) as usize;
    let metadata = &bytes[first + 8..first + 8 + metadata_len];
    let body_len = arrow_ipc::root_as_message(metadata).unwrap().bodyLength() as usize;
    let key_at = metadata.windows(14).position(|w| w == b"kafluss.crc32c").unwrap();
    for b in &mut bytes[first + 8 + key_at - 4..first + 8 + metadata_len + body_len] {
        *b = 0;
    }
    store.set_file_bytes(&segment, bytes);
    (
        log_support::try_open_sim(&store, &dir, config(1 << 20)).await,
        segment,
    )
}

/// Recovery must not take the zeroed metadata for a batch of 0 rows, which would hand the next
/// message's rows the earlier offsets (a batch of 0 rows is never one kafluss wrote). The
/// second batch says the first was fsync'd (`kafluss.synced`): damage, the bucket refused.
#[test]
fn a_middle_message_with_zeroed_metadata_that_was_fsynced_is_damage_not_zero_rows() {
    run_local(async {
        match open_with_first_of_two_zeroed(true).await {
            (Err(LogError::CorruptSegment { path, reason, .. }), segment) => {
                assert_eq!(path, segment);
                assert!(reason.contains("0 rows"), "{reason}");
                assert!(
                    reason.contains("after 10 rows of the segment were fsync'd"),
                    "{reason}"
                );
            }
            (Ok(log), _) => panic!(
                "recovered with next offset {} (20 rows written)",
                log.next_offset()
            ),
            (Err(other), _) => panic!("expected CorruptSegment, got {other:?}"),
        }
    });
}

/// The same bytes when no fsync had covered the first batch as the second was written: what a
/// power loss that wrote back the later page first leaves. Neither was ever durable, so the log
/// is cut before the damage (it was refused as damage, closing the bucket after a power loss),
/// and appends go on from offset 0.
#[test]
fn a_middle_message_zeroed_before_any_fsync_covered_it_is_cut_with_what_follows() {
    run_local(async {
        let (opened, _) = open_with_first_of_two_zeroed(false).await;
        let log = opened.unwrap_or_else(|e| panic!("recovery refused an unsynced tail: {e}"));
        assert_eq!(log.next_offset(), 0);
        log.append(&batch(0, 3)).await.unwrap();
        assert_eq!(log.next_offset(), 3);
    });
}

/// A flipped byte in the body of the middle one of three batches: refused when the batch after
/// it was written once the damaged one was fsync'd, cut (with the batch after it) when it was
/// written before that fsync; a scan of the cut log reads the first batch only.
#[test]
fn a_damaged_body_is_refused_when_a_later_batch_says_it_was_fsynced_else_cut() {
    for synced in [true, false] {
        run_local(async move {
            let store = kafluss_broker::log::sim::SimStore::new(3);
            let dir = std::path::PathBuf::from("/sim/db/t-1/bucket-0");
            let log = log_support::open_sim(&store, &dir, config(1 << 20)).await;
            log.append(&batch(0, 10)).await.unwrap();
            // The first batch fsync'd before the middle one is written, or both after it.
            if !synced {
                log.sync_to(10).await.unwrap();
            }
            let middle_start = log.active_segment_len().unwrap() as usize;
            log.append(&batch(10, 10)).await.unwrap();
            let middle_end = log.active_segment_len().unwrap() as usize;
            if synced {
                log.sync_to(20).await.unwrap();
            }
            log.append(&batch(20, 10)).await.unwrap();
            drop(log);
            let segment = dir.join(segment_file_name(0));
            let mut bytes = store.file_bytes(&segment).unwrap();
            bytes[middle_end - 16] ^= 0x5a;
            store.set_file_bytes(&segment, bytes);
            let opened = log_support::try_open_sim(&store, &dir, config(1 << 20)).await;
            match (synced, opened) {
                (true, Err(LogError::CorruptSegment { reason, .. })) => {
                    assert!(reason.contains(&format!("at byte {middle_start}")), "{reason}");
                    assert!(
                        reason.contains("after 20 rows of the segment were fsync'd"),
                        "{reason}"
                    );
                    assert!(reason.contains("rows before offset 10 are intact"), "{reason}");
                }
                (false, Ok(log)) => {
                    assert_eq!(log.next_offset(), 10);
                    let bytes = store.file_bytes(&segment).unwrap();
                    assert_eq!(bytes.len(), middle_start);
                    assert_eq!(ids_in_stream(&bytes), (0..10).collect::<Vec<_>>());
                }
                (synced, Ok(log)) => panic!("synced {synced}: recovered to {}", log.next_offset()),
                (synced, Err(e)) => panic!("synced {synced}: {e}"),
            }
        });
    }
}

/// Opening a bucket whose directories do not exist creates the bucket's, the table's and the
/// database's directory and makes each new entry durable in its parent (the database's in the
/// data directory); reopening creates nothing and syncs no parent.
#[test]
fn new_bucket_directories_are_durable_in_their_parents() {
    run_local(async {
        let store = kafluss_broker::log::sim::SimStore::new(4);
        let data = std::path::PathBuf::from("/sim/data");
        let dir = data.join("db/t-1/bucket-0");
        let log = log_support::open_sim(&store, &dir, config(1 << 20)).await;
        log.append(&batch(0, 3)).await.unwrap();
        log.close().await.unwrap();
        drop(log);
        let synced = store.dir_syncs();
        for parent in [data.clone(), data.join("db"), data.join("db/t-1")] {
            assert!(synced.contains(&parent), "{parent:?} not synced: {synced:?}");
        }
        let before = store.dir_syncs().len();
        let log = log_support::open_sim(&store, &dir, config(1 << 20)).await;
        assert_eq!(log.next_offset(), 3);
        let again = &store.dir_syncs()[before..];
        assert!(
            !again.contains(&data) && !again.contains(&data.join("db")),
            "a reopen syncs no parent: {again:?}"
        );
    });
}
