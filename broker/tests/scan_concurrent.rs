//! Scans from another thread while the owner core keeps appending and rolling: every scan sees
//! a gap-free prefix of the log up to the published high watermark, never a partial batch.

mod log_support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use kafluss_broker::log::{bucket_dir, ArrowCompression, BucketLog, FlushPolicy, LogConfig, LogRegistry};
use kafluss_broker::scan::{scan_table, ScanParams, ScanTarget};
use log_support::{batch, run_local, schema};

#[test]
fn scans_during_appends_see_a_gap_free_prefix() {
    let tmp = tempfile::tempdir().unwrap();
    let table_dir = tmp.path().join("db/t-1");
    let registry = Arc::new(LogRegistry::new());
    let stats = registry.register(1, 0);
    let done = Arc::new(AtomicBool::new(false));

    let writer = {
        let dir = bucket_dir(&table_dir, 0);
        let done = done.clone();
        thread::spawn(move || {
            run_local(async move {
                let config = LogConfig {
                    segment_size: 16 << 10,
                    writeback_size: 1 << 10,
                    preallocate_size: 64 << 10,
                    prewrite_size: 0,
                    flush_policy: FlushPolicy::Ack,
                    retention: None,
                    compression: ArrowCompression::None,
                };
                let log = BucketLog::open(&dir, config, stats).await.unwrap();
                let mut next = 0i64;
                for round in 0..400 {
                    let rows = 1 + round % 37;
                    log.append(&batch(next, rows)).await.unwrap();
                    next += rows as i64;
                }
                done.store(true, Ordering::Release);
                next as u64
            })
        })
    };

    let target = ScanTarget {
        table_id: 1,
        table_dir,
        bucket_count: 1,
        schema: schema(),
    };
    let mut scans = 0;
    let mut last_seen = 0usize;
    // Bounded: the writer finishes 400 appends; we scan until it is done (plus one final scan).
    for _ in 0..100_000 {
        let finished = done.load(Ordering::Acquire);
        let mut out = Vec::new();
        scan_table(&target, &ScanParams::default(), &registry, &mut out).unwrap();
        let ids: Vec<i64> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|line| {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                assert_eq!(v["offset"].as_i64(), v["row"]["id"].as_i64(), "offset = id");
                v["row"]["id"].as_i64().unwrap()
            })
            .collect();
        assert_eq!(ids, (0..ids.len() as i64).collect::<Vec<_>>(), "gap-free prefix");
        assert!(ids.len() >= last_seen, "a later scan never sees fewer rows");
        last_seen = ids.len();
        scans += 1;
        if finished {
            break;
        }
    }
    let total = writer.join().unwrap();
    assert_eq!(last_seen as u64, total, "the final scan sees every row");
    assert!(scans > 1, "scanned while appending");
}
