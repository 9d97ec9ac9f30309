//! `log.prewrite.size`: once someone waits for a bucket's fsyncs (`BucketLog::expect_syncs`,
//! which acks=-1 appends call), the active segment keeps zeros written and synced ahead of its
//! end (`SegmentFile::prewrite`), as many bytes as it holds (at least `MIN_PREALLOCATE`, at most
//! the setting), started again once less than half is left, never past the segment size. The
//! file is longer than the stream while appending; a roll, a close and recovery truncate the
//! zeros away, and a crash that leaves part of an append before the zeros loses only unsynced
//! rows. Nothing here is timed: the simulated disk records each prewrite.

mod log_support;

use std::path::PathBuf;

use kafluss_broker::log::appender::MIN_PREALLOCATE;
use kafluss_broker::log::segment::segment_path;
use kafluss_broker::log::sim::SimStore;
use kafluss_broker::log::{ArrowCompression, FlushPolicy, LogConfig};
use log_support::{
    append_rows, assert_requests_ahead_in_order, ids_in_stream, open_sim, run_local, sim_file_len,
};

const MOST: u64 = 256 << 10;

fn config(prewrite_size: u64, segment_size: u64) -> LogConfig {
    LogConfig {
        segment_size,
        writeback_size: 0,
        preallocate_size: 0,
        prewrite_size,
        flush_policy: FlushPolicy::Ack,
        retention: None,
        compression: ArrowCompression::None,
    }
}

/// The rows the stream of `path` holds: its ids, which must be `0..n`.
fn rows_in(store: &SimStore, path: &std::path::Path) -> i64 {
    let ids = ids_in_stream(&store.file_bytes(path).unwrap());
    assert_eq!(ids, (0..ids.len() as i64).collect::<Vec<_>>());
    ids.len() as i64
}

#[test]
fn zeros_are_written_ahead_only_once_syncs_are_expected() {
    run_local(async {
        let store = SimStore::new(11);
        let dir = PathBuf::from("/sim/t-1/bucket-0");
        let log = open_sim(&store, &dir, config(MOST, 64 << 20)).await;
        let path = segment_path(&dir, 0);
        // acks=1 appends: nothing is written ahead, the file is the stream.
        let next = append_rows(&log, 0, 2_000).await;
        assert!(store.prewrites().is_empty(), "{:?}", store.prewrites());
        assert_eq!(sim_file_len(&store, &path), log.active_segment_len().unwrap());

        log.expect_syncs();
        let next = append_rows(&log, next, 30_000).await;
        log.sync_to(log.next_offset()).await.unwrap();
        let requests = store.prewrites();
        assert!(requests.len() >= 5, "{requests:?}");
        assert_requests_ahead_in_order(&requests, &path, "prewrite");
        for (i, (_, start, end)) in requests.iter().enumerate() {
            assert!(
                end - start <= MOST,
                "prewrite {i} of {requests:?} is over the most"
            );
        }
        // The first starts at the stream's end as it was then, at least the least ahead.
        assert!(
            requests[0].2 - requests[0].1 >= MIN_PREALLOCATE / 2,
            "{requests:?}"
        );
        // The file runs past the stream by zeros; the stream holds every row, in order.
        let len = log.active_segment_len().unwrap();
        let file = store.file_bytes(&path).unwrap();
        assert!(
            file.len() as u64 > len,
            "{} bytes for a {len}-byte stream",
            file.len()
        );
        assert!(file[len as usize..].iter().all(|&b| b == 0));
        assert_eq!(rows_in(&store, &path), next);
    });
}

#[test]
fn a_roll_a_close_and_recovery_truncate_the_zeros() {
    run_local(async {
        let store = SimStore::new(12);
        let dir = PathBuf::from("/sim/t-1/bucket-0");
        let log = open_sim(&store, &dir, config(MOST, 200 << 10)).await;
        log.expect_syncs();
        let next = append_rows(&log, 0, 12_000).await;
        assert!(log.segment_count() >= 3, "{} segments", log.segment_count());
        log.sync_to(log.next_offset()).await.unwrap();
        let longer = |store: &SimStore| {
            store
                .paths()
                .into_iter()
                .filter(|p| {
                    let bytes = store.file_bytes(p).unwrap();
                    // A closed segment ends with its end-of-stream marker, not with zeros.
                    bytes.ends_with(&[0; 16])
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            longer(&store),
            vec![segment_path(&dir, log.active_base_offset().unwrap())]
        );
        log.close().await.unwrap();
        assert!(longer(&store).is_empty(), "{:?}", longer(&store));

        // A crash with zeros ahead: reopening truncates them and keeps every synced row.
        let log = open_sim(&store, &dir, config(MOST, 200 << 10)).await;
        log.expect_syncs();
        let next = append_rows(&log, next, 2_000).await;
        log.sync_to(log.next_offset()).await.unwrap();
        append_rows(&log, next, 500).await;
        assert_eq!(longer(&store).len(), 1, "{:?}", longer(&store));
        drop(log);
        store.crash();
        let log = open_sim(&store, &dir, config(MOST, 200 << 10)).await;
        assert!(longer(&store).is_empty(), "{:?}", longer(&store));
        assert!(log.next_offset() >= next as u64, "{} < {next}", log.next_offset());
    });
}

#[test]
fn size_zero_writes_no_zeros() {
    run_local(async {
        let store = SimStore::new(13);
        let dir = PathBuf::from("/sim/t-1/bucket-0");
        let log = open_sim(&store, &dir, config(0, 64 << 20)).await;
        log.expect_syncs();
        append_rows(&log, 0, 5_000).await;
        log.sync_to(log.next_offset()).await.unwrap();
        assert!(store.prewrites().is_empty(), "{:?}", store.prewrites());
        assert_eq!(
            sim_file_len(&store, &segment_path(&dir, 0)),
            log.active_segment_len().unwrap()
        );
    });
}

/// On a real disk: the file grows by zeros ahead of the stream while acks=-1 appends run, and
/// `close` leaves exactly the stream, which arrow-ipc reads back whole.
#[test]
fn on_a_real_disk_zeros_run_ahead_and_close_truncates_them() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-1").join("bucket-0");
    let dir2 = dir.clone();
    run_local(async move {
        let log = kafluss_broker::log::BucketLog::open(
            &dir2,
            config(MOST, 64 << 20),
            std::sync::Arc::new(kafluss_broker::log::BucketStats::default()),
        )
        .await
        .unwrap();
        log.expect_syncs();
        let mut next = 0;
        let mut longest = 0u64;
        for _ in 0..50 {
            next = append_rows(&log, next, 200).await;
            log.sync_to(log.next_offset()).await.unwrap();
            let size = std::fs::metadata(segment_path(&dir2, 0)).unwrap().len();
            longest = longest.max(size.saturating_sub(log.active_segment_len().unwrap()));
        }
        assert!(longest > 0, "no zeros were ever ahead of the stream");
        log.close().await.unwrap();
        let bytes = std::fs::read(segment_path(&dir2, 0)).unwrap();
        assert_eq!(bytes.len() as u64, log.active_segment_len().unwrap());
        let ids = ids_in_stream(&bytes);
        assert_eq!(ids, (0..next).collect::<Vec<_>>());
    });
    drop(tmp);
}
