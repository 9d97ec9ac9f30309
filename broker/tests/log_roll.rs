//! A segment roll's fsync runs off the bucket's write slot: appends go on while it is pending,
//! and acks=-1 (`sync_to`) of any row after it waits for it. The disk is the simulated one with
//! the closed segment's fsync held (`SimStore::hold_syncs`), so nothing here is timed.

mod log_support;

use std::future::Future;
use std::path::PathBuf;
use std::pin::pin;
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

use kafluss_broker::log::segment::{pending_segment_path, segment_path};
use kafluss_broker::log::sim::SimStore;
use kafluss_broker::log::{ArrowCompression, FlushPolicy, LogConfig, RollTime};
use log_support::{batch, open_sim, run_local};

fn config() -> LogConfig {
    LogConfig {
        segment_size: 1_000,
        writeback_size: 0,
        preallocate_size: 64 << 10,
        prewrite_size: 0,
        flush_policy: FlushPolicy::Ack,
        retention: None,
        compression: ArrowCompression::None,
    }
}

/// Polls `future` once with the task's own waker.
async fn poll_once<F: Future>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    let mut future = future;
    std::future::poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await
}

#[test]
fn appends_go_on_during_a_roll_fsync_and_acks_wait_for_it() {
    run_local(async {
        let store = SimStore::new(3);
        let dir = PathBuf::from("/sim/t-1/bucket-0");
        let log = Rc::new(open_sim(&store, &dir, config()).await);
        let first = segment_path(&dir, 0);
        store.hold_syncs(&first);
        let mut next = 0i64;
        while log.roll_pending().is_none() {
            let outcome = log.append(&batch(next, 5)).await.unwrap();
            next = outcome.next_offset as i64;
        }
        let closed_end = log.roll_pending().unwrap();
        // The roll's task is inside the held fsync of the closed segment.
        glommio::yield_if_needed().await;
        for _ in 0..10 {
            glommio::executor().yield_task_queue_now().await;
        }
        assert_eq!(store.waiting_syncs(), 1, "the closed segment's fsync is held");
        assert!(!store.is_synced(&first));
        // An append into the bucket completes on its first poll while that fsync waits.
        let more = batch(next, 5);
        let mut append = pin!(log.append(&more));
        let appended = match poll_once(append.as_mut()).await {
            Poll::Ready(result) => result.unwrap(),
            Poll::Pending => panic!("an append waited for the pending roll fsync"),
        };
        assert_eq!(appended.base_offset, next as u64);
        assert!(log.roll_pending().is_some());
        assert!(store
            .file_bytes(&pending_segment_path(&dir, closed_end))
            .is_some());
        // acks=-1 of that row (and of a row of the closed segment) waits for the held fsync.
        let late = Rc::new(std::cell::Cell::new(None));
        let early = Rc::new(std::cell::Cell::new(None));
        let waiters: Vec<_> = [(appended.next_offset, late.clone()), (closed_end, early.clone())]
            .into_iter()
            .map(|(offset, done)| {
                let (log, store, first) = (log.clone(), store.clone(), first.clone());
                glommio::spawn_local(async move {
                    log.sync_to(offset).await.unwrap();
                    // Proof of order: when the ack resolves, the closed segment is fsync'd.
                    done.set(Some(store.is_synced(&first)));
                })
            })
            .collect();
        for _ in 0..50 {
            glommio::executor().yield_task_queue_now().await;
        }
        assert_eq!(
            late.get(),
            None,
            "an acks=-1 ack completed before the roll's fsync"
        );
        assert_eq!(
            early.get(),
            None,
            "a closed-segment row was durable before its fsync"
        );
        assert!(log.durable_offset() < closed_end);
        store.release_syncs();
        for waiter in waiters {
            waiter.await;
        }
        assert_eq!(late.get(), Some(true));
        assert_eq!(early.get(), Some(true));
        assert!(log.durable_offset() >= appended.next_offset);
        assert_eq!(log.roll_pending(), None);
        // The new segment has its segment name now.
        assert!(store
            .file_bytes(&pending_segment_path(&dir, closed_end))
            .is_none());
        assert!(store.file_bytes(&segment_path(&dir, closed_end)).is_some());
    });
}

#[test]
fn recovery_finishes_a_roll_interrupted_by_a_process_crash() {
    run_local(async {
        let store = SimStore::new(4);
        let dir = PathBuf::from("/sim/t-1/bucket-0");
        let log = open_sim(&store, &dir, config()).await;
        store.hold_syncs(&segment_path(&dir, 0));
        let mut next = 0u64;
        while log.roll_pending().is_none() {
            next = log.append(&batch(next as i64, 5)).await.unwrap().next_offset;
        }
        let closed_end = log.roll_pending().unwrap();
        next = log.append(&batch(next as i64, 5)).await.unwrap().next_offset;
        // The process dies (the page cache survives): the roll's task never finishes.
        drop(log);
        store.release_syncs();
        assert!(store
            .file_bytes(&pending_segment_path(&dir, closed_end))
            .is_some());
        let log = open_sim(&store, &dir, config()).await;
        assert_eq!(log.next_offset(), next, "the pending segment's rows are kept");
        assert!(store
            .file_bytes(&pending_segment_path(&dir, closed_end))
            .is_none());
        assert!(store.file_bytes(&segment_path(&dir, closed_end)).is_some());
        assert_eq!(log.segment_count(), 2);
    });
}

#[test]
fn a_roll_reports_its_time_and_its_wait_for_the_previous_roll() {
    run_local(async {
        let store = SimStore::new(5);
        let dir = PathBuf::from("/sim/t-1/bucket-0");
        let log = Rc::new(open_sim(&store, &dir, config()).await);
        let mut next = 0i64;
        let outcome = log.append(&batch(next, 5)).await.unwrap();
        next = outcome.next_offset as i64;
        assert_eq!(log.take_roll_time(), RollTime::default(), "no roll yet");

        // The first roll: its fsync held, so its task stays pending.
        store.hold_syncs(&segment_path(&dir, 0));
        while log.roll_pending().is_none() {
            next = log.append(&batch(next, 5)).await.unwrap().next_offset as i64;
        }
        let first = log.take_roll_time();
        assert!(first.total > Duration::ZERO, "{first:?}");
        assert_eq!(
            first.waiting_for_previous,
            Duration::ZERO,
            "no roll before it: {first:?}"
        );
        assert_eq!(log.take_roll_time(), RollTime::default(), "taking starts anew");

        // Appends go on until one needs the next roll, which waits for the held one.
        let mut waiting = None;
        for _ in 0..100 {
            let (log, more) = (log.clone(), batch(next, 5));
            let mut append = Box::pin(async move { log.append(&more).await });
            match poll_once(append.as_mut()).await {
                Poll::Ready(result) => next = result.unwrap().next_offset as i64,
                Poll::Pending => {
                    waiting = Some(append);
                    break;
                }
            }
        }
        let append = waiting.expect("an append reached the next roll");
        const HELD: Duration = Duration::from_millis(30);
        glommio::timer::sleep(HELD).await;
        store.release_syncs();
        append.await.unwrap();
        let second = log.take_roll_time();
        assert!(second.waiting_for_previous >= HELD, "{second:?}");
        assert!(second.total >= second.waiting_for_previous, "{second:?}");
    });
}

/// A segment holding only its schema (a torn first message cut by recovery) that a schema
/// change would roll: it is not closed (the next segment would take its base offset, so its
/// file name, and retention would later delete the live segment through the phantom closed
/// one). The new schema's segment replaces it under the same name; after the TTL, retention
/// rolls it and removes exactly that file, and the offsets survive a reopen. Real files:
/// the simulated store refuses a rename onto an existing name, so it cannot show this.
#[test]
fn an_empty_segment_is_replaced_not_rolled() {
    run_local(async {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("bucket-0");
        std::fs::create_dir_all(&dir).unwrap();
        let ttl = Duration::from_secs(600);
        let config = LogConfig {
            segment_size: 1 << 20,
            retention: Some(ttl),
            ..config()
        };
        let mut writer =
            arrow_ipc::writer::StreamWriter::try_new(Vec::new(), &log_support::schema()).unwrap();
        std::fs::write(segment_path(&dir, 0), std::mem::take(writer.get_mut())).unwrap();
        let stats = std::sync::Arc::new(kafluss_broker::log::BucketStats::default());
        let log = kafluss_broker::log::BucketLog::open(&dir, config.clone(), stats.clone())
            .await
            .unwrap();
        assert_eq!(log.next_offset(), 0);
        let wider = std::sync::Arc::new(arrow_schema::Schema::new(vec![
            arrow_schema::Field::new("id", arrow_schema::DataType::Int64, true),
            arrow_schema::Field::new("name", arrow_schema::DataType::Utf8, true),
            arrow_schema::Field::new("extra", arrow_schema::DataType::Utf8, true),
        ]));
        // `batch(first, rows)` with a third column.
        let wide = |first: i64, rows: usize| {
            let narrow = batch(first, rows);
            let extra = arrow_array::StringArray::from_iter_values((0..rows).map(|i| format!("x{i}")));
            arrow_array::RecordBatch::try_new(
                wider.clone(),
                vec![
                    narrow.column(0).clone(),
                    narrow.column(1).clone(),
                    std::sync::Arc::new(extra),
                ],
            )
            .unwrap()
        };
        let rows = wide(0, 10);
        let appended = log.append(&rows).await.unwrap();
        log.sync_to(appended.next_offset).await.unwrap();
        assert_eq!(
            log.segment_count(),
            1,
            "the empty segment was replaced, not closed"
        );
        let files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        // Past the TTL the active segment is rolled and deleted: exactly that one file. A
        // phantom closed segment named like it would have had retention delete the live file
        // first (and then fail to remove it again).
        let removed = log
            .enforce_retention(std::time::SystemTime::now() + ttl + Duration::from_secs(1))
            .await
            .unwrap();
        assert_eq!(removed, 1, "the expired active segment, rolled first");
        assert_eq!((log.log_start_offset(), log.next_offset()), (10, 10));
        let files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(files, [segment_path(&dir, 10).file_name().unwrap()]);
        assert_eq!(log.append(&wide(10, 5)).await.unwrap().base_offset, 10);
        log.close().await.unwrap();
        drop(log);
        let reopened = kafluss_broker::log::BucketLog::open(&dir, config, stats)
            .await
            .unwrap();
        assert_eq!((reopened.log_start_offset(), reopened.next_offset()), (10, 15));
        let ids = log_support::ids_in_stream(&std::fs::read(segment_path(&dir, 10)).unwrap());
        assert_eq!(ids, (10..15).collect::<Vec<i64>>());
    });
}

/// A roll does not start while a group fsync of the active segment runs: the closed segment's
/// fsync would run beside it on the same descriptor, and Linux reports a writeback error to
/// only one of two such fsyncs (the other could then acknowledge rows that were not written).
/// With the group fsync held, the append that must roll waits; released, both complete and the
/// roll's fsync follows.
#[test]
fn a_roll_waits_for_the_group_fsync_in_flight() {
    run_local(async {
        let store = SimStore::new(5);
        let dir = PathBuf::from("/sim/t-1/bucket-0");
        let log = Rc::new(open_sim(&store, &dir, config()).await);
        let first = segment_path(&dir, 0);
        let appended = log.append(&batch(0, 5)).await.unwrap();
        store.hold_syncs(&first);
        let acked = {
            let log = log.clone();
            glommio::spawn_local(async move { log.sync_to(appended.next_offset).await })
        };
        for _ in 0..10 {
            glommio::executor().yield_task_queue_now().await;
        }
        assert_eq!(store.waiting_syncs(), 1, "the group fsync is held");
        // Appends until one must roll (segment_size 1,000 bytes).
        let mut next = appended.next_offset as i64;
        let rolled = loop {
            let rows = batch(next, 5);
            let mut append = pin!(log.append(&rows));
            match poll_once(append.as_mut()).await {
                Poll::Ready(outcome) => next = outcome.unwrap().next_offset as i64,
                Poll::Pending => {
                    for _ in 0..20 {
                        glommio::executor().yield_task_queue_now().await;
                    }
                    assert_eq!(
                        log.roll_pending(),
                        None,
                        "the roll started beside the group fsync"
                    );
                    assert_eq!(store.waiting_syncs(), 1, "only the group fsync runs");
                    store.release_syncs();
                    break append.await.unwrap();
                }
            }
            assert!(next < 10_000, "no append ever had to roll");
        };
        acked.await.unwrap();
        assert!(rolled.base_offset > 0);
        log.sync_to(rolled.next_offset).await.unwrap();
        assert_eq!(log.roll_pending(), None);
        assert!(store.is_synced(&first));
    });
}
