//! `log.writeback.size`: the bucket log hands each `writeback_size` bytes it appends to the
//! kernel's writeback (`SegmentFile::write_back`), each request covering the one before it (whose
//! pages are clean by then and get dropped) and the new bytes; while a request is still running it
//! asks for nothing, and the next request covers everything appended meanwhile. Each request ends
//! on a page boundary, so the page appends are still filling is never under writeback because of
//! it. The simulated disk records the requests, so nothing here is timed.

mod log_support;

use std::path::PathBuf;

use kafluss_broker::log::appender::page_size;
use kafluss_broker::log::segment::segment_path;
use kafluss_broker::log::sim::SimStore;
use kafluss_broker::log::{ArrowCompression, FlushPolicy, LogConfig};
use log_support::{append_rows, ids_in_stream, open_sim, run_local, sim_file_len};

const STEP: u64 = 8_192;

fn config(writeback_size: u64, segment_size: u64) -> LogConfig {
    LogConfig {
        segment_size,
        writeback_size,
        preallocate_size: 0,
        prewrite_size: 0,
        flush_policy: FlushPolicy::Ack,
        retention: None,
        compression: ArrowCompression::None,
    }
}

/// The requests of one file: each starts where the request two before it ended (the one before
/// it is covered again, to drop its pages), ends at least `step` bytes after the previous one,
/// within the file, and on a page boundary.
fn assert_request_chain(requests: &[(u64, u64)], step: u64, file_len: u64) {
    let page = page_size();
    for (i, &(start, end)) in requests.iter().enumerate() {
        assert_eq!(end % page, 0, "request {i} of {requests:?} ends inside a page");
        let expected_start = if i < 2 { 0 } else { requests[i - 2].1 };
        assert_eq!(start, expected_start, "request {i} of {requests:?}");
        let previous_end = if i == 0 { 0 } else { requests[i - 1].1 };
        assert!(
            end >= previous_end + step,
            "request {i} of {requests:?}: under one step"
        );
        assert!(end <= file_len, "request {i} past the file's {file_len} bytes");
    }
}

#[test]
fn every_step_of_appended_bytes_is_handed_to_writeback_with_the_step_before() {
    run_local(async {
        let store = SimStore::new(1);
        let dir = PathBuf::from("/sim/t-1/bucket-0");
        let log = open_sim(&store, &dir, config(STEP, 1 << 20)).await;
        append_rows(&log, 0, 8_000).await;
        let path = segment_path(&dir, 0);
        let len = sim_file_len(&store, &path);
        let requests: Vec<(u64, u64)> = store
            .write_backs()
            .into_iter()
            .map(|(p, start, end)| {
                assert_eq!(p, path);
                (start, end)
            })
            .collect();
        assert!(
            requests.len() as u64 >= len / STEP / 2,
            "{} requests for {len} bytes in steps of {STEP}",
            requests.len()
        );
        assert_request_chain(&requests, STEP, len);
        // Less than a step (plus the last batch and the partly filled page) is left without
        // a request.
        let last_end = requests.last().unwrap().1;
        assert!(
            len - last_end < 2 * STEP + page_size(),
            "{len} bytes, the last request ends at {last_end}"
        );
        // The rows are all there, in order (the requests change no byte).
        let ids = ids_in_stream(&store.file_bytes(&path).unwrap());
        assert_eq!(ids, (0..ids.len() as i64).collect::<Vec<_>>());
        assert!(ids.len() >= 8_000);
    });
}

#[test]
fn while_a_request_runs_none_is_made_and_the_next_covers_what_was_appended_meanwhile() {
    run_local(async {
        let store = SimStore::new(2);
        let dir = PathBuf::from("/sim/t-1/bucket-0");
        let log = open_sim(&store, &dir, config(STEP, 1 << 20)).await;
        let next = append_rows(&log, 0, 2_000).await;
        let before = store.write_backs();
        assert!(before.len() >= 2, "{before:?}");
        let path = segment_path(&dir, 0);
        let len_at_busy = sim_file_len(&store, &path);

        store.set_write_back_busy(true);
        let next = append_rows(&log, next, 4_000).await;
        assert_eq!(
            store.write_backs(),
            before,
            "a request was made while one was running"
        );
        let len_when_free = sim_file_len(&store, &path);
        assert!(
            len_when_free - len_at_busy > 4 * STEP,
            "the busy stretch spans several steps"
        );

        store.set_write_back_busy(false);
        append_rows(&log, next, 20).await;
        let after = store.write_backs();
        assert_eq!(
            after.len(),
            before.len() + 1,
            "one request for the whole stretch: {after:?}"
        );
        let (_, start, end) = after.last().unwrap().clone();
        // It starts where the request before the last one ended, and covers every whole page
        // appended while busy.
        assert_eq!(start, before[before.len() - 2].2);
        assert!(
            end + page_size() > len_when_free,
            "{end} leaves whole pages of {len_when_free}"
        );
        let requests: Vec<(u64, u64)> = after.iter().map(|(_, s, e)| (*s, *e)).collect();
        assert_request_chain(&requests, STEP, sim_file_len(&store, &path));
    });
}

#[test]
fn a_rolled_segment_starts_its_own_chain_and_zero_makes_no_request() {
    run_local(async {
        let store = SimStore::new(3);
        let dir = PathBuf::from("/sim/t-1/bucket-0");
        let log = open_sim(&store, &dir, config(STEP, 80_000)).await;
        append_rows(&log, 0, 12_000).await;
        let requests = store.write_backs();
        let files: Vec<PathBuf> = {
            let mut files: Vec<PathBuf> = requests.iter().map(|(p, _, _)| p.clone()).collect();
            files.dedup();
            files
        };
        assert!(files.len() >= 2, "no roll in {requests:?}");
        for file in &files {
            let chain: Vec<(u64, u64)> = requests
                .iter()
                .filter(|(p, _, _)| p == file)
                .map(|(_, s, e)| (*s, *e))
                .collect();
            // The file as named now (a pending segment is renamed once its roll completes).
            let len = store
                .paths()
                .into_iter()
                .filter(|p| p.parent() == Some(&dir))
                .map(|p| sim_file_len(&store, &p))
                .max()
                .unwrap();
            assert_request_chain(&chain, STEP, len);
        }

        let off = SimStore::new(4);
        let log = open_sim(&off, &dir, config(0, 80_000)).await;
        append_rows(&log, 0, 12_000).await;
        assert!(off.write_backs().is_empty(), "{:?}", off.write_backs());
        assert!(sim_file_len(&off, &segment_path(&dir, 0)) > 5 * STEP);
    });
}
