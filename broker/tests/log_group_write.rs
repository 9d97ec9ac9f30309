//! Group writes (`BucketLog::append_many`): the batches of one group reach the file with one
//! write while they fit in the active segment, each stays its own checksummed message with its
//! own offsets, a segment boundary splits the group, and a failed write fails the whole group
//! and leaves nothing of it visible.

mod log_support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;

use kafluss_broker::log::sim::{SimFaults, SimStore};
use kafluss_broker::log::{
    AppendItem, ArrowCompression, BucketLog, BucketStats, FlushPolicy, LogConfig, LogError,
};
use log_support::{batch, ids_in_stream, run_local};

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

/// Every id of every segment file under `dir`, segments in name order.
fn ids_on_disk(store: &SimStore, dir: &Path) -> Vec<i64> {
    let mut paths: Vec<PathBuf> = store
        .paths()
        .into_iter()
        .filter(|p| p.parent() == Some(dir) && p.to_string_lossy().ends_with(".arrow"))
        .collect();
    paths.sort();
    paths
        .iter()
        .flat_map(|p| ids_in_stream(&store.file_bytes(p).unwrap()))
        .collect()
}

/// One item per batch, each with `tags` and the log's compression.
fn items<'a>(batches: &'a [RecordBatch], tags: &'a [(&'a str, &'a str)]) -> Vec<AppendItem<'a>> {
    batches
        .iter()
        .map(|batch| AppendItem {
            batch,
            tags,
            compression: None,
        })
        .collect()
}

async fn open(store: &SimStore, dir: &Path, segment_size: u64) -> BucketLog<SimStore> {
    BucketLog::open_with_store(
        store.clone(),
        dir,
        config(segment_size),
        Arc::new(BucketStats::default()),
    )
    .await
    .unwrap()
}

#[test]
fn a_group_is_one_write_with_each_batch_at_its_own_offsets() {
    run_local(async {
        let store = SimStore::new(1);
        let dir = PathBuf::from("/sim/t-1/bucket-0");
        let log = open(&store, &dir, 1 << 20).await;
        log.append(&batch(0, 1)).await.unwrap();
        let batches: Vec<_> = (0..5).map(|i| batch(1 + 3 * i, 3)).collect();
        let tags = [("k", "v")];
        let items = items(&batches, &tags);
        let before = store.write_count();
        let outcomes = log.append_many(&items).await;
        assert_eq!(store.write_count() - before, 1, "five batches, one write");
        let offsets: Vec<(u64, u64)> = outcomes
            .iter()
            .map(|o| o.as_ref().map(|o| (o.base_offset, o.next_offset)).unwrap())
            .collect();
        assert_eq!(offsets, vec![(1, 4), (4, 7), (7, 10), (10, 13), (13, 16)]);
        assert!(outcomes.iter().all(|o| o.as_ref().unwrap().bytes > 0));
        assert_eq!(log.next_offset(), 16);
        assert_eq!(ids_on_disk(&store, &dir), (0..16).collect::<Vec<i64>>());
    });
}

#[test]
fn a_full_segment_splits_the_group_into_one_write_per_segment() {
    run_local(async {
        let store = SimStore::new(2);
        let dir = PathBuf::from("/sim/t-1/bucket-0");
        // Small segments: a few batches fill one.
        let log = open(&store, &dir, 2_000).await;
        let batches: Vec<_> = (0..12).map(|i| batch(4 * i, 4)).collect();
        let items = items(&batches, &[]);
        let outcomes = log.append_many(&items).await;
        assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
        assert!(log.segment_count() > 1, "the group spans segments");
        log.sync_to(48).await.unwrap();
        assert_eq!(ids_on_disk(&store, &dir), (0..48).collect::<Vec<i64>>());
        // Every segment starts where the one before it ended.
        let reopened = open(&store, &dir, 2_000).await;
        assert_eq!(reopened.next_offset(), 48);
    });
}

#[test]
fn a_failed_group_write_fails_every_batch_of_it_and_leaves_nothing() {
    run_local(async {
        let store = SimStore::new(3);
        let dir = PathBuf::from("/sim/t-1/bucket-0");
        let log = open(&store, &dir, 1 << 20).await;
        log.append(&batch(0, 2)).await.unwrap();
        let batches: Vec<_> = (0..3).map(|i| batch(2 + i, 1)).collect();
        let items = items(&batches, &[]);
        store.set_faults(SimFaults {
            fail_write: 1_000_000,
            ..SimFaults::default()
        });
        let outcomes = log.append_many(&items).await;
        assert_eq!(outcomes.len(), 3);
        for outcome in &outcomes {
            match outcome {
                Err(LogError::Io { op, source, .. }) => {
                    assert_eq!(*op, "write");
                    assert!(source.to_string().contains("injected write failure"), "{source}");
                }
                other => panic!("expected the write's error, got {other:?}"),
            }
        }
        assert_eq!(log.next_offset(), 2);
        store.set_faults(SimFaults::default());
        let outcomes = log.append_many(&items).await;
        assert!(outcomes.iter().all(Result::is_ok));
        assert_eq!(ids_on_disk(&store, &dir), vec![0, 1, 2, 3, 4]);
    });
}
