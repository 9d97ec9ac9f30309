//! Group commit: concurrent acks=-1 waiters share fsyncs; failures reach every waiter.

mod log_support;

use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use kafluss_broker::log::sim::{SimFaults, SimStore};
use kafluss_broker::log::{ArrowCompression, BucketLog, BucketStats, FlushPolicy, LogConfig, LogError};
use log_support::{batch, open_sim, run_local};

fn config() -> LogConfig {
    LogConfig {
        segment_size: 1 << 20,
        writeback_size: 0,
        preallocate_size: 64 << 10,
        prewrite_size: 0,
        flush_policy: FlushPolicy::Ack,
        retention: None,
        compression: ArrowCompression::None,
    }
}

#[test]
fn many_waiters_for_written_rows_share_one_fsync() {
    run_local(async {
        let store = SimStore::new(7);
        let dir = PathBuf::from("/sim/t-1/bucket-0");
        let log = Rc::new(open_sim(&store, &dir, config()).await);
        for i in 0..10 {
            log.append(&batch(i * 2, 2)).await.unwrap();
        }
        let before = store.sync_count();
        let waiters: Vec<_> = (1..=10u64)
            .map(|i| {
                let log = log.clone();
                glommio::spawn_local(async move { log.sync_to(i * 2).await })
            })
            .collect();
        for waiter in waiters {
            waiter.await.unwrap();
        }
        assert_eq!(store.sync_count() - before, 1, "ten waiters, one fsync");
        assert_eq!(log.group_syncs(), 1);
        assert_eq!(log.durable_offset(), 20);
        // Already durable: no more fsyncs.
        log.sync_to(20).await.unwrap();
        assert_eq!(log.group_syncs(), 1);
    });
}

#[test]
fn appends_during_an_fsync_are_covered_by_at_most_one_more() {
    run_local(async {
        let store = SimStore::new(8);
        let dir = PathBuf::from("/sim/t-1/bucket-0");
        let log = Rc::new(open_sim(&store, &dir, config()).await);
        let producers: Vec<_> = (0..20i64)
            .map(|i| {
                let log = log.clone();
                glommio::spawn_local(async move {
                    let outcome = log.append(&batch(i, 1)).await.unwrap();
                    log.sync_to(outcome.next_offset).await.unwrap();
                    outcome.next_offset
                })
            })
            .collect();
        for producer in producers {
            let acked = producer.await;
            assert!(
                log.durable_offset() >= acked,
                "acked {acked} before it was durable"
            );
        }
        assert_eq!(log.durable_offset(), 20);
        assert!(
            log.group_syncs() <= 2,
            "20 acks=-1 appends took {} fsyncs",
            log.group_syncs()
        );
    });
}

#[test]
fn real_files_group_commit_under_concurrency() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bucket-0");
    run_local(async move {
        let log = Rc::new(
            BucketLog::open(&dir, config(), Arc::new(BucketStats::default()))
                .await
                .unwrap(),
        );
        let producers: Vec<_> = (0..50i64)
            .map(|i| {
                let log = log.clone();
                glommio::spawn_local(async move {
                    let outcome = log.append(&log_support::batch(i, 1)).await.unwrap();
                    log.sync_to(outcome.next_offset).await.unwrap();
                })
            })
            .collect();
        for producer in producers {
            producer.await;
        }
        assert_eq!(log.durable_offset(), 50);
        assert!(
            log.group_syncs() < 50,
            "50 waiters took {} fsyncs",
            log.group_syncs()
        );
    });
}

#[test]
fn a_failed_fsync_fails_every_waiter_and_the_log_until_reopened() {
    run_local(async {
        let store = SimStore::new(9);
        let dir = PathBuf::from("/sim/t-1/bucket-0");
        let log = Rc::new(open_sim(&store, &dir, config()).await);
        log.append(&batch(0, 4)).await.unwrap();
        store.set_faults(SimFaults {
            fail_sync: 1_000_000,
            ..SimFaults::default()
        });
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let log = log.clone();
                glommio::spawn_local(async move { log.sync_to(4).await })
            })
            .collect();
        for waiter in waiters {
            let result = waiter.await;
            assert!(
                result.is_err(),
                "a waiter was told its rows are durable after a failed fsync"
            );
        }
        assert!(matches!(
            log.append(&batch(4, 1)).await,
            Err(LogError::Failed { .. })
        ));
        store.set_faults(SimFaults::default());
        drop(log);
        // Reopening recovers what reached the file.
        let log = open_sim(&store, &dir, config()).await;
        assert_eq!(log.next_offset(), 4);
        assert_eq!(log.append(&batch(4, 1)).await.unwrap().base_offset, 4);
    });
}

/// A disk that fills up in the middle of a batch: the error says why (it said only
/// `short write: X of Y bytes`), and the partial batch is truncated away as for any short
/// write.
/// A bucket log on `store` holding one batch of rows 0..3: the log, its stats, its segment's
/// path and bytes.
async fn three_rows(store: &SimStore) -> (BucketLog<SimStore>, Arc<BucketStats>, PathBuf, Vec<u8>) {
    let dir = PathBuf::from("/sim/t-1/bucket-0");
    let stats = Arc::new(BucketStats::default());
    let log = BucketLog::open_with_store(store.clone(), &dir, config(), stats.clone())
        .await
        .unwrap();
    log.append(&batch(0, 3)).await.unwrap();
    let path = dir.join(kafluss_broker::log::segment::segment_file_name(0));
    let good = store.file_bytes(&path).unwrap();
    (log, stats, path, good)
}

#[test]
fn a_full_disk_is_reported_as_no_space_left() {
    run_local(async {
        let store = SimStore::new(11);
        let (log, _, path, good) = three_rows(&store).await;
        store.set_faults(SimFaults {
            space_left: Some(100),
            ..SimFaults::default()
        });
        let err = log.append(&batch(3, 50)).await.unwrap_err();
        let message = err.to_string();
        assert!(matches!(err, LogError::Io { .. }), "{err:?}");
        assert!(message.contains("short write"), "{message}");
        assert!(message.contains("No space left on device"), "{message}");
        assert_eq!(log.next_offset(), 3);
        assert_eq!(
            store.file_bytes(&path).unwrap(),
            good,
            "partial batch truncated away"
        );
        store.set_faults(SimFaults::default());
        assert_eq!(log.append(&batch(3, 5)).await.unwrap().base_offset, 3);
    });
}

#[test]
fn a_failed_or_short_write_leaves_nothing_visible() {
    run_local(async {
        let store = SimStore::new(10);
        let (log, stats, path, good) = three_rows(&store).await;
        for faults in [
            SimFaults {
                fail_write: 1_000_000,
                ..SimFaults::default()
            },
            SimFaults {
                short_write: 1_000_000,
                ..SimFaults::default()
            },
        ] {
            store.set_faults(faults);
            let err = log.append(&batch(3, 5)).await.unwrap_err();
            assert!(matches!(err, LogError::Io { .. }), "{err:?}");
            assert_eq!(log.next_offset(), 3);
            assert_eq!(stats.next_offset.load(std::sync::atomic::Ordering::Acquire), 3);
            assert_eq!(
                store.file_bytes(&path).unwrap(),
                good,
                "partial batch truncated away"
            );
        }
        store.set_faults(SimFaults::default());
        assert_eq!(log.append(&batch(3, 5)).await.unwrap().base_offset, 3);
        assert_eq!(
            log_support::ids_in_stream(&store.file_bytes(&path).unwrap()),
            (0..8).collect::<Vec<_>>()
        );
    });
}
