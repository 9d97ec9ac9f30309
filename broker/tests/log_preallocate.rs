//! `log.preallocate.size`: the bucket log keeps file system blocks allocated ahead of the active
//! segment's end (`SegmentFile::preallocate`, `fallocate` with `FALLOC_FL_KEEP_SIZE` on a real
//! disk), as many bytes as the segment holds (at least `MIN_PREALLOCATE`, at most the setting),
//! asked for again once less than half of that is left; the file's size never includes them.
//! A roll, a close and recovery truncate a segment to its own length, which releases them. The
//! simulated disk records the requests and the blocks, so nothing here is timed; the last test
//! runs on a real file.

mod log_support;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kafluss_broker::log::appender::{page_size, MIN_PREALLOCATE};
use kafluss_broker::log::segment::segment_path;
use kafluss_broker::log::sim::SimStore;
use kafluss_broker::log::{ArrowCompression, BucketLog, BucketStats, FlushPolicy, LogConfig};
use log_support::{
    append_rows, assert_requests_ahead_in_order, batch, ids_in_stream, open_sim, run_local, sim_file_len,
};

const MOST: u64 = 256 << 10;

fn config(preallocate_size: u64, segment_size: u64) -> LogConfig {
    LogConfig {
        segment_size,
        writeback_size: 0,
        preallocate_size,
        prewrite_size: 0,
        flush_policy: FlushPolicy::Ack,
        retention: None,
        compression: ArrowCompression::None,
    }
}

#[test]
fn appends_keep_blocks_allocated_ahead_of_the_segment_end() {
    run_local(async {
        let store = SimStore::new(1);
        let dir = PathBuf::from("/sim/t-1/bucket-0");
        let log = open_sim(&store, &dir, config(MOST, 8 << 20)).await;
        let path = segment_path(&dir, 0);
        let page = page_size();
        // One small append first: a new segment asks for the least, not for the most.
        log.append(&batch(0, 20)).await.unwrap();
        let first = store.preallocations();
        assert_eq!(first.len(), 1, "{first:?}");
        let (p, start, end) = first[0].clone();
        assert_eq!(p, path);
        let len = sim_file_len(&store, &path);
        assert!(
            start <= len,
            "the first request starts at {start}, past the file's {len} bytes"
        );
        assert_eq!(
            end,
            (len + MIN_PREALLOCATE).div_ceil(page) * page,
            "{first:?} for {len} bytes"
        );

        append_rows(&log, 20, 30_000).await;
        let len = sim_file_len(&store, &path);
        assert!(
            len > 4 * MOST,
            "{len} bytes: the test wants several requests at the most"
        );
        let requests = store.preallocations();
        assert!(requests.len() >= 5, "{} requests for {len} bytes", requests.len());
        assert_requests_ahead_in_order(&requests, &path, "preallocation");
        // Ahead by at least half the most, and by no more than the most plus a page.
        let allocated = store.allocated(&path).unwrap();
        assert!(
            allocated >= len + MOST / 2,
            "{allocated} allocated for {len} bytes"
        );
        assert!(
            allocated <= len + MOST + page,
            "{allocated} allocated for {len} bytes"
        );
        // The file's size and bytes are the rows', nothing of the blocks ahead.
        let ids = ids_in_stream(&store.file_bytes(&path).unwrap());
        assert_eq!(ids, (0..ids.len() as i64).collect::<Vec<_>>());
        assert!(ids.len() >= 30_000);
    });
}

#[test]
fn while_a_request_runs_none_is_made_and_the_next_append_asks_again() {
    run_local(async {
        let store = SimStore::new(2);
        let dir = PathBuf::from("/sim/t-1/bucket-0");
        let log = open_sim(&store, &dir, config(MOST, 8 << 20)).await;
        let path = segment_path(&dir, 0);
        store.set_preallocate_busy(true);
        let next = append_rows(&log, 0, 2_000).await;
        assert!(store.preallocations().is_empty());
        assert_eq!(store.allocated(&path), Some(sim_file_len(&store, &path)));
        store.set_preallocate_busy(false);
        log.append(&batch(next, 20)).await.unwrap();
        let len = sim_file_len(&store, &path);
        let requests = store.preallocations();
        assert_eq!(requests.len(), 1, "{requests:?}");
        let (_, start, end) = requests[0];
        // None was asked for so far: from the segment's end (the bytes written have their
        // blocks) to a full lead past it.
        assert_eq!(start, len, "{requests:?}");
        let ahead = len.clamp(MIN_PREALLOCATE, MOST);
        assert!(
            end >= len + ahead && end < len + ahead + page_size(),
            "{requests:?} for {len} bytes"
        );
    });
}

#[test]
fn a_roll_a_close_and_recovery_release_the_blocks_past_the_end() {
    run_local(async {
        let store = SimStore::new(3);
        let dir = PathBuf::from("/sim/t-1/bucket-0");
        let log = open_sim(&store, &dir, config(MOST, 200 << 10)).await;
        let next = append_rows(&log, 0, 12_000).await;
        assert!(log.segment_count() >= 3, "{} segments", log.segment_count());
        let held = |store: &SimStore| {
            store
                .paths()
                .into_iter()
                .filter(|p| store.allocated(p).unwrap() > sim_file_len(store, p))
                .collect::<Vec<_>>()
        };
        // Only the active segment holds blocks past its end once the rolls have finished.
        log.sync_to(log.next_offset()).await.unwrap();
        assert_eq!(held(&store).len(), 1, "{:?}", held(&store));
        log.close().await.unwrap();
        assert!(held(&store).is_empty(), "{:?}", held(&store));

        // A crash with blocks held: reopening truncates the last segment to its length.
        let log = open_sim(&store, &dir, config(MOST, 200 << 10)).await;
        append_rows(&log, next, 2_000).await;
        assert_eq!(held(&store).len(), 1, "{:?}", held(&store));
        drop(log);
        store.crash();
        let log = open_sim(&store, &dir, config(MOST, 200 << 10)).await;
        assert!(held(&store).is_empty(), "{:?}", held(&store));
        assert!(log.next_offset() >= next as u64);
    });
}

#[test]
fn size_zero_preallocates_nothing() {
    run_local(async {
        let store = SimStore::new(4);
        let dir = PathBuf::from("/sim/t-1/bucket-0");
        let log = open_sim(&store, &dir, config(0, 8 << 20)).await;
        append_rows(&log, 0, 5_000).await;
        assert!(store.preallocations().is_empty(), "{:?}", store.preallocations());
        let path = segment_path(&dir, 0);
        assert_eq!(store.allocated(&path), Some(sim_file_len(&store, &path)));
    });
}

/// Whether this file system allocates blocks past a file's end with `FALLOC_FL_KEEP_SIZE`.
fn keep_size_fallocate_works(dir: &Path) -> bool {
    use std::os::fd::AsRawFd;
    let probe = std::fs::File::create(dir.join("probe")).unwrap();
    let done = nix::fcntl::fallocate(
        probe.as_raw_fd(),
        nix::fcntl::FallocateFlags::FALLOC_FL_KEEP_SIZE,
        0,
        1 << 20,
    )
    .is_ok();
    let metadata = probe.metadata().unwrap();
    done && metadata.len() == 0 && metadata.blocks() * 512 >= 1 << 20
}

/// Bytes of blocks the file at `path` holds.
fn blocks_bytes(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().blocks() * 512
}

#[test]
fn on_a_real_disk_blocks_are_held_ahead_while_appending_and_released_by_close() {
    let tmp = tempfile::tempdir().unwrap();
    let preallocates = keep_size_fallocate_works(tmp.path());
    let dir = tmp.path().join("bucket-0");
    let path = segment_path(&dir, 0);
    let (len, ahead) = run_local({
        let dir = dir.clone();
        let path = path.clone();
        async move {
            let log = BucketLog::open(&dir, config(MOST, 8 << 20), Arc::new(BucketStats::default()))
                .await
                .unwrap();
            let mut next = 0;
            while std::fs::metadata(&path).map_or(0, |m| m.len()) < 2 * MOST {
                next = log.append(&batch(next, 50)).await.unwrap().next_offset as i64;
                // Small writes are a pwrite on the core (`log.inline-write.size`) and do not
                // suspend: let the core poll for the blocking thread's answers between appends,
                // as a server core does between requests.
                glommio::timer::sleep(std::time::Duration::from_micros(100)).await;
            }
            // The request runs on the core's blocking thread: wait for its blocks (bounded).
            let len = std::fs::metadata(&path).unwrap().len();
            let mut ahead = 0;
            for _ in 0..200 {
                ahead = blocks_bytes(&path).saturating_sub(len);
                if ahead >= MOST / 2 {
                    break;
                }
                glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
            }
            log.close().await.unwrap();
            (len, ahead)
        }
    });
    let after = blocks_bytes(&path);
    let size = std::fs::metadata(&path).unwrap().len();
    assert_eq!(size, len, "close changes no byte");
    if preallocates {
        assert!(
            ahead >= MOST / 2,
            "{ahead} bytes of blocks past the segment's {len} bytes"
        );
    } else {
        assert!(
            ahead < MOST / 2,
            "no fallocate here, yet {ahead} bytes of blocks past {len}"
        );
    }
    assert!(
        after < size + 64 * 1024,
        "{after} bytes of blocks for a closed {size}-byte segment"
    );
    let ids = ids_in_stream(&std::fs::read(&path).unwrap());
    assert_eq!(ids, (0..ids.len() as i64).collect::<Vec<_>>());
}
