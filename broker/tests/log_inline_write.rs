//! `log.inline-write.size`: segment writes of at most that many bytes are a `pwrite` on the core,
//! larger ones (and every one with 0) go through io_uring. On real files, with each setting,
//! appends of small and large groups land in order, survive a close and a reopen (recovery walks
//! and checks every batch), and the stream reads back whole.

mod log_support;

use std::sync::Arc;

use kafluss_broker::log::segment::segment_path;
use kafluss_broker::log::{ArrowCompression, BucketLog, BucketStats, FlushPolicy, GlommioStore, LogConfig};
use log_support::{batch, ids_in_stream, run_local};

fn config() -> LogConfig {
    LogConfig {
        segment_size: 64 << 20,
        writeback_size: 0,
        preallocate_size: 0,
        prewrite_size: 0,
        flush_policy: FlushPolicy::Ack,
        retention: None,
        compression: ArrowCompression::None,
    }
}

#[test]
fn small_and_large_writes_land_in_order_with_every_setting() {
    // 0: all through io_uring; 4 KiB and 256 KiB: small batches inline, the 20,000-row ones
    // (about 400 KiB of buffers each) through io_uring; 1 GiB: everything inline (as the 1 MiB default
    // writes these batches).
    for inline in [0u64, 4 << 10, 256 << 10, 1 << 30] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t-1").join("bucket-0");
        let dir2 = dir.clone();
        run_local(async move {
            let open = || {
                BucketLog::open_with_store(
                    GlommioStore::new(inline),
                    &dir2,
                    config(),
                    Arc::new(BucketStats::default()),
                )
            };
            let log = open().await.unwrap();
            let mut next = 0i64;
            // 1-row batches (well under 4 KiB) and 20,000-row ones (over 256 KiB), mixed.
            for rows in [1usize, 20_000, 3, 1, 20_000, 7] {
                let outcome = log.append(&batch(next, rows)).await.unwrap();
                assert_eq!(outcome.base_offset, next as u64, "inline {inline}");
                next = outcome.next_offset as i64;
            }
            log.sync_to(log.next_offset()).await.unwrap();
            log.close().await.unwrap();
            drop(log);
            let log = open().await.unwrap();
            assert_eq!(log.next_offset(), next as u64, "inline {inline}: after reopen");
            let ids = ids_in_stream(&std::fs::read(segment_path(&dir2, 0)).unwrap());
            assert_eq!(ids, (0..next).collect::<Vec<_>>(), "inline {inline}");
        });
        drop(tmp);
    }
}
