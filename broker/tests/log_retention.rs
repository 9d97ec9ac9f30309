//! Retention after recovery (segment age from the file's mtime), the periodic task, the core
//! left free while files are removed, and dropping a table's directory.

mod log_support;

use std::cell::{Cell, RefCell};
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use kafluss_broker::log::file::GlommioFile;
use kafluss_broker::log::sim::SimStore;
use kafluss_broker::log::{
    bucket_dir, remove_table_dir, run_retention, table_dir, ArrowCompression, BucketLog, BucketStats,
    FlushPolicy, GlommioStore, LogConfig, LogRegistry, SegmentStore,
};
use log_support::{batch, open_sim, run_local};

fn config(retention: Duration) -> LogConfig {
    LogConfig {
        segment_size: 400,
        writeback_size: 0,
        preallocate_size: 64 << 10,
        prewrite_size: 0,
        flush_policy: FlushPolicy::Ack,
        retention: Some(retention),
        compression: ArrowCompression::None,
    }
}

#[test]
fn recovered_segments_age_from_their_modification_time() {
    run_local(async {
        let store = SimStore::new(3);
        let dir = PathBuf::from("/sim/db/t-1/bucket-0");
        let ttl = Duration::from_secs(600);
        let log =
            BucketLog::open_with_store(store.clone(), &dir, config(ttl), Arc::new(BucketStats::default()))
                .await
                .unwrap();
        for i in 0..5 {
            log.append(&batch(i * 10, 10)).await.unwrap();
        }
        let segments = log.segment_count();
        assert!(segments >= 3);
        drop(log);
        // Ten minutes and one second after the writes, a restarted broker expires them.
        store.advance_clock(ttl + Duration::from_secs(1));
        let log =
            BucketLog::open_with_store(store.clone(), &dir, config(ttl), Arc::new(BucketStats::default()))
                .await
                .unwrap();
        assert_eq!(
            log.enforce_retention(store.now() - Duration::from_secs(2))
                .await
                .unwrap(),
            0
        );
        // Every segment: the active one is rolled first, and a new empty segment carries
        // the next offset.
        let deleted = log.enforce_retention(store.now()).await.unwrap();
        assert_eq!(deleted, segments, "every segment, the active one rolled first");
        assert_eq!((log.log_start_offset(), log.next_offset()), (50, 50));
        assert_eq!(store.paths(), [dir.join("00000000000000000050.arrow")]);
    });
}

/// The task takes the TTL in force from its `current_ttl` at every check: the log opened with
/// 60 s keeps its segments until the table's TTL (an ALTER) says 1 ms.
#[test]
fn the_periodic_task_deletes_expired_segments_and_stops_with_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bucket-0");
    run_local(async move {
        let log = Rc::new(
            BucketLog::open(
                &dir,
                config(Duration::from_secs(60)),
                Arc::new(BucketStats::default()),
            )
            .await
            .unwrap(),
        );
        for i in 0..5 {
            log.append(&batch(i * 10, 10)).await.unwrap();
        }
        let segments = log.segment_count();
        assert!(segments >= 3);
        let altered = Rc::new(std::cell::Cell::new(None));
        let ttl = altered.clone();
        let task = glommio::spawn_local(run_retention(
            Rc::downgrade(&log),
            Duration::from_millis(5),
            move || ttl.get(),
        ));
        glommio::timer::sleep(Duration::from_millis(100)).await;
        assert_eq!(log.segment_count(), segments, "the 60 s TTL keeps them");
        altered.set(Some(Duration::from_millis(1)));
        // Bounded wait: up to 2 s for the task to run.
        for _ in 0..200 {
            if log.segment_count() == 1 {
                break;
            }
            glommio::timer::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(log.segment_count(), 1);
        assert_eq!(
            log.log_start_offset(),
            log.stats()
                .log_start_offset
                .load(std::sync::atomic::Ordering::Acquire)
        );
        drop(log);
        // The task notices the log is gone and ends.
        glommio::timer::timeout(Duration::from_secs(2), async move {
            task.await;
            Ok(())
        })
        .await
        .expect("retention task ends when its log is dropped");
    });
}

#[test]
fn dropping_a_table_removes_its_directory_and_stats() {
    let tmp = tempfile::tempdir().unwrap();
    let table = table_dir(tmp.path(), "sales", "orders", 9).unwrap();
    let registry = Arc::new(LogRegistry::new());
    let (t, r) = (table.clone(), registry.clone());
    run_local(async move {
        for bucket in 0..2 {
            let log = BucketLog::open(
                &bucket_dir(&t, bucket),
                config(Duration::from_secs(60)),
                r.register(9, bucket),
            )
            .await
            .unwrap();
            log.append(&batch(0, 3)).await.unwrap();
        }
    });
    assert!(table.join("bucket-1").is_dir());
    remove_table_dir(&table).unwrap();
    registry.remove_table(9);
    assert!(!table.exists());
    assert!(tmp.path().join("sales").is_dir(), "the database directory stays");
    assert_eq!(registry.row_counts(9), vec![]);
    // Dropping again (or a table that never stored rows) is fine.
    remove_table_dir(&table).unwrap();
}

/// A roll whose fsync fails leaves the next segment under its pending name (recovery removes
/// it): retention of the failed log must not delete the segment before it, the last one that
/// holds the rows.
#[test]
fn a_failed_roll_keeps_retention_from_deleting_the_last_complete_segment() {
    run_local(async {
        let store = SimStore::new(5);
        let dir = PathBuf::from("/sim/db/t-1/bucket-0");
        let ttl = Duration::from_secs(600);
        let log = open_sim(&store, &dir, config(ttl)).await;
        log.append(&batch(0, 10)).await.unwrap();
        log.sync_to(log.next_offset()).await.unwrap();
        store.set_faults(kafluss_broker::log::sim::SimFaults {
            fail_sync: 1_000_000,
            ..Default::default()
        });
        // Rolls (400-byte segments): the roll's background fsync fails.
        let _ = log.append(&batch(10, 10)).await;
        assert!(
            log.sync_to(log.next_offset()).await.is_err(),
            "the failed roll fails the log"
        );
        store.set_faults(kafluss_broker::log::sim::SimFaults::default());
        store.advance_clock(ttl + Duration::from_secs(1));
        assert!(log.enforce_retention(store.now()).await.is_err());
        drop(log);
        store.crash();
        let log = open_sim(&store, &dir, config(ttl)).await;
        assert!(
            log.next_offset() >= 10,
            "rows of the first segment lost: {}",
            log.next_offset()
        );
    });
}

/// The production store, noting for each file it removes whether the core ran another task
/// while the removal was under way (`during`), and whether it ran one since the previous
/// removal ended (`between`): each removal queues a task that sets a flag when it runs.
struct Watched {
    inner: GlommioStore,
    /// `(during, between)` per removal, in order.
    removals: Rc<RefCell<Vec<(bool, bool)>>>,
    since_last: Rc<Cell<bool>>,
}

/// Sets `ran` once the core runs other tasks: glommio polls a spawned task at once, up to its
/// first await, so it first yields (back in the queue behind the spawning task).
async fn ran_when_the_core_is_free(ran: Rc<Cell<bool>>) {
    futures_lite::future::yield_now().await;
    ran.set(true);
}

impl SegmentStore for Watched {
    type File = GlommioFile;

    async fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir).await
    }

    async fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.inner.list(dir).await
    }

    async fn open(&self, path: &Path) -> io::Result<GlommioFile> {
        self.inner.open(path).await
    }

    async fn create(&self, path: &Path) -> io::Result<GlommioFile> {
        self.inner.create(path).await
    }

    async fn remove(&self, path: &Path) -> io::Result<()> {
        let between = self.since_last.get();
        let during = Rc::new(Cell::new(false));
        let ran = during.clone();
        glommio::spawn_local(ran_when_the_core_is_free(ran)).detach();
        let removed = self.inner.remove(path).await;
        assert!(!path.exists(), "{} removed when remove returns", path.display());
        self.removals.borrow_mut().push((during.get(), between));
        self.since_last.set(false);
        glommio::spawn_local(ran_when_the_core_is_free(self.since_last.clone())).detach();
        removed
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to).await
    }

    async fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.sync_dir(dir).await
    }

    async fn modified(&self, path: &Path) -> io::Result<SystemTime> {
        self.inner.modified(path).await
    }

    fn now(&self) -> SystemTime {
        self.inner.now()
    }
}

/// Unlinking a large segment frees its blocks in the call (about 0.2 s for 256 MiB on ext4):
/// retention removes files on the core's blocking thread, so the core runs its other tasks
/// while each removal is under way, and yields between two files. Countable without timing:
/// a task queued at each removal has run by the time it returns (it ran none before: the
/// unlink was a plain call on the core, and the loop went on without yielding).
#[test]
fn retention_removes_files_off_the_core_and_yields_between_them() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bucket-0");
    run_local(async move {
        let removals = Rc::new(RefCell::new(Vec::new()));
        let store = Watched {
            inner: GlommioStore::default(),
            removals: removals.clone(),
            since_last: Rc::new(Cell::new(true)),
        };
        let ttl = Duration::from_secs(60);
        let log = BucketLog::open_with_store(store, &dir, config(ttl), Arc::new(BucketStats::default()))
            .await
            .unwrap();
        for i in 0..8 {
            log.append(&batch(i * 10, 10)).await.unwrap();
        }
        let segments = log.segment_count();
        let deleted = log.enforce_retention(SystemTime::now() + ttl * 2).await.unwrap();
        assert!(deleted >= 3 && deleted + 2 >= segments, "{deleted} of {segments}");
        let removals = removals.borrow().clone();
        assert_eq!(removals.len(), deleted);
        for (index, &(during, between)) in removals.iter().enumerate() {
            assert!(
                during,
                "removal {index}: the core ran nothing while the file was removed"
            );
            assert!(
                between,
                "removal {index}: the core ran nothing since the previous removal"
            );
        }
        let files = std::fs::read_dir(&dir).unwrap().count();
        assert_eq!(files, log.segment_count(), "one file per segment left");
        assert!(log.log_start_offset() > 0);
    });
}

/// The offsets a whole-table jsonl scan of bucket 0 returns (`scan_table`, as the HTTP
/// endpoint runs it), checking that each row's id is its offset.
fn scanned_offsets(table_dir: &Path, registry: &Arc<LogRegistry>) -> Vec<u64> {
    let target = kafluss_broker::scan::ScanTarget {
        table_id: 11,
        table_dir: table_dir.to_path_buf(),
        bucket_count: 1,
        schema: log_support::schema(),
    };
    let mut out = Vec::new();
    kafluss_broker::scan::scan_table(
        &target,
        &kafluss_broker::scan::ScanParams::default(),
        registry,
        &mut out,
    )
    .unwrap();
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|line| {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            let offset = value["offset"].as_u64().unwrap();
            assert_eq!(value["row"]["id"].as_u64(), Some(offset), "offset = id");
            offset
        })
        .collect()
}

/// The file names in `dir`, sorted.
fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A slowly written bucket never fills its active segment (1 MiB here, 256 MiB by default),
/// so it never rolls by size: one check past the TTL rolls the active segment and deletes it
/// (Kafka rolls too when every segment is past `retention.ms`). The log then starts at its
/// next offset, in a new empty segment that carries it across a restart; an empty active
/// segment is not rolled again; rows newer than the TTL are untouched.
#[test]
fn an_expired_active_segment_is_rolled_and_deleted() {
    let tmp = tempfile::tempdir().unwrap();
    let table = tmp.path().join("db/slow-11");
    let dir = bucket_dir(&table, 0);
    let registry = Arc::new(LogRegistry::new());
    let ttl = Duration::from_secs(3600);
    let config = LogConfig {
        segment_size: 1 << 20,
        ..config(ttl)
    };
    let (t, r, d, c) = (table.clone(), registry.clone(), dir.clone(), config.clone());
    run_local(async move {
        let stats = r.register(11, 0);
        let log = BucketLog::open(&d, c, stats.clone()).await.unwrap();
        for i in 0..3 {
            log.append(&batch(i, 1)).await.unwrap();
        }
        assert_eq!(log.segment_count(), 1, "one active segment, never rolled by size");
        // Rows newer than the TTL: nothing changes.
        assert_eq!(log.enforce_retention(SystemTime::now()).await.unwrap(), 0);
        assert_eq!(file_names(&d), ["00000000000000000000.arrow"]);
        assert_eq!((log.log_start_offset(), log.next_offset()), (0, 3));
        assert_eq!(scanned_offsets(&t, &r), [0, 1, 2]);

        // Past the TTL: one check rolls the active segment and deletes it.
        let later = SystemTime::now() + ttl * 2;
        assert_eq!(log.enforce_retention(later).await.unwrap(), 1);
        assert_eq!((log.log_start_offset(), log.next_offset()), (3, 3));
        assert_eq!(
            stats.log_start_offset.load(std::sync::atomic::Ordering::Acquire),
            3
        );
        assert_eq!(log.active_base_offset(), Some(3));
        assert_eq!(
            file_names(&d),
            ["00000000000000000003.arrow"],
            "the old file is gone"
        );
        assert_eq!(scanned_offsets(&t, &r), Vec::<u64>::new());

        // An empty active segment has nothing to expire: it is not rolled, check after check.
        for _ in 0..3 {
            assert_eq!(log.enforce_retention(later).await.unwrap(), 0);
        }
        assert_eq!(file_names(&d), ["00000000000000000003.arrow"]);
        assert_eq!(log.active_base_offset(), Some(3));

        // The next append lands at the next offset; a scan sees it and nothing before it.
        assert_eq!(log.append(&batch(3, 1)).await.unwrap().base_offset, 3);
        assert_eq!(scanned_offsets(&t, &r), [3]);
        log.close().await.unwrap();
    });
    // A restart keeps the offsets.
    let (r, d) = (registry.clone(), dir.clone());
    run_local(async move {
        let log = BucketLog::open(&d, config, r.register(11, 0)).await.unwrap();
        assert_eq!((log.log_start_offset(), log.next_offset()), (3, 4));
        assert_eq!(log.append(&batch(4, 1)).await.unwrap().base_offset, 4);
    });
    assert_eq!(scanned_offsets(&table, &registry), [3, 4]);
}

/// The roll of an expired active segment, the deletion and a power loss right after, on the
/// simulated disk (several seeds: the loss keeps a random part of what was not fsync'd). The
/// new empty segment, the only file left, was fsync'd before the old one went: recovery
/// keeps the next offset, and appends go on there.
#[test]
fn the_next_offset_survives_a_power_loss_after_the_active_segment_expired() {
    for seed in 1..=20 {
        run_local(async move {
            let store = SimStore::new(seed);
            let dir = PathBuf::from("/sim/db/t-1/bucket-0");
            let ttl = Duration::from_secs(600);
            let config = LogConfig {
                segment_size: 1 << 20,
                ..config(ttl)
            };
            let log = open_sim(&store, &dir, config.clone()).await;
            for i in 0..4 {
                log.append(&batch(i * 2, 2)).await.unwrap();
            }
            store.advance_clock(ttl - Duration::from_secs(1));
            assert_eq!(log.enforce_retention(store.now()).await.unwrap(), 0);
            store.advance_clock(Duration::from_secs(1));
            assert_eq!(
                log.enforce_retention(store.now()).await.unwrap(),
                1,
                "seed {seed}"
            );
            let new = dir.join("00000000000000000008.arrow");
            assert_eq!(store.paths(), std::slice::from_ref(&new), "seed {seed}");
            assert!(
                store.is_synced(&new),
                "seed {seed}: the last file's schema is durable"
            );
            drop(log);
            store.crash();
            let log = open_sim(&store, &dir, config.clone()).await;
            assert_eq!((log.log_start_offset(), log.next_offset()), (8, 8), "seed {seed}");
            // A second restart without appends: still there.
            drop(log);
            store.crash();
            let log = open_sim(&store, &dir, config).await;
            assert_eq!((log.log_start_offset(), log.next_offset()), (8, 8), "seed {seed}");
            assert_eq!(log.append(&batch(8, 1)).await.unwrap().base_offset, 8);
        });
    }
}

/// Retention rolls under the bucket's append permit and gives it back while the roll's fsync
/// runs: an append then lands in the new segment, and only the expired segment is deleted.
#[test]
fn an_append_while_retention_rolls_the_active_segment_stays() {
    run_local(async {
        let store = SimStore::new(9);
        let dir = PathBuf::from("/sim/db/t-1/bucket-0");
        let ttl = Duration::from_secs(600);
        let config = LogConfig {
            segment_size: 1 << 20,
            ..config(ttl)
        };
        let log = Rc::new(open_sim(&store, &dir, config.clone()).await);
        log.append(&batch(0, 3)).await.unwrap();
        store.advance_clock(ttl + Duration::from_secs(1));
        store.hold_syncs(&dir.join("00000000000000000000.arrow"));
        let retention = {
            let log = log.clone();
            let now = store.now();
            glommio::spawn_local(async move { log.enforce_retention(now).await })
        };
        for _ in 0..1000 {
            if store.waiting_syncs() > 0 {
                break;
            }
            futures_lite::future::yield_now().await;
        }
        assert_eq!(
            store.waiting_syncs(),
            1,
            "the roll's fsync of the closed segment waits"
        );
        assert_eq!(log.roll_pending(), Some(3));
        assert_eq!(log.append(&batch(3, 2)).await.unwrap().base_offset, 3);
        store.release_syncs();
        assert_eq!(retention.await.unwrap(), 1);
        assert_eq!((log.log_start_offset(), log.next_offset()), (3, 5));
        assert_eq!(store.paths(), [dir.join("00000000000000000003.arrow")]);
        log.sync_to(5).await.unwrap();
        drop(log);
        let log = open_sim(&store, &dir, config).await;
        assert_eq!((log.log_start_offset(), log.next_offset()), (3, 5));
    });
}
