//! Shared helpers of the `log_*` and `scan_*` tests.
#![allow(dead_code)]

use std::future::Future;
use std::io::Cursor;
use std::sync::Arc;

use arrow_array::{Array, Int64Array, RecordBatch, StringArray};
use arrow_ipc::reader::StreamReader;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use glommio::{LocalExecutorBuilder, Placement};

/// Runs `future` on a fresh single-threaded glommio executor (small io memory: the test
/// machine's memlock limit is 8 MiB).
pub fn run_local<T: 'static>(future: impl Future<Output = T> + 'static) -> T {
    LocalExecutorBuilder::new(Placement::Unbound)
        .io_memory(1 << 20)
        .make()
        .expect("start glommio executor")
        .run(future)
}

pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
    ]))
}

/// A batch whose `id` column holds `first..first+rows` (so offsets can be checked by value).
pub fn batch(first: i64, rows: usize) -> RecordBatch {
    batch_with(schema(), first, rows)
}

pub fn batch_with(schema: SchemaRef, first: i64, rows: usize) -> RecordBatch {
    let ids = Int64Array::from_iter_values(first..first + rows as i64);
    let names = StringArray::from_iter_values((0..rows).map(|i| format!("row-{}", first + i as i64)));
    RecordBatch::try_new(schema, vec![Arc::new(ids), Arc::new(names)]).expect("valid batch")
}

/// Every `id` value in an IPC stream, in order (panics on a malformed stream).
pub fn ids_in_stream(bytes: &[u8]) -> Vec<i64> {
    let reader = StreamReader::try_new(Cursor::new(bytes), None).expect("stream header");
    let mut ids = Vec::new();
    for batch in reader {
        let batch = batch.expect("complete batch");
        let column = batch
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("id column");
        ids.extend(column.values().iter().copied());
    }
    ids
}

/// Opens (recovering) the bucket log of `dir` on the simulated disk `store`.
pub async fn open_sim(
    store: &kafluss_broker::log::sim::SimStore,
    dir: &std::path::Path,
    config: kafluss_broker::log::LogConfig,
) -> kafluss_broker::log::BucketLog<kafluss_broker::log::sim::SimStore> {
    try_open_sim(store, dir, config).await.unwrap()
}

/// [`open_sim`], with what recovery said when it refuses the bucket.
pub async fn try_open_sim(
    store: &kafluss_broker::log::sim::SimStore,
    dir: &std::path::Path,
    config: kafluss_broker::log::LogConfig,
) -> Result<kafluss_broker::log::BucketLog<kafluss_broker::log::sim::SimStore>, kafluss_broker::log::LogError>
{
    kafluss_broker::log::BucketLog::open_with_store(
        store.clone(),
        dir,
        config,
        Arc::new(kafluss_broker::log::BucketStats::default()),
    )
    .await
}

/// Appends batches of 20 rows (ids from `from`) until `rows` rows are in; returns the next id.
pub async fn append_rows<S: kafluss_broker::log::file::SegmentStore + 'static>(
    log: &kafluss_broker::log::BucketLog<S>,
    from: i64,
    rows: i64,
) -> i64 {
    let mut next = from;
    while next < from + rows {
        next = log.append(&batch(next, 20)).await.unwrap().next_offset as i64;
    }
    next
}

/// The length of the simulated file at `path` (0 when there is none).
pub fn sim_file_len(store: &kafluss_broker::log::sim::SimStore, path: &std::path::Path) -> u64 {
    store.file_bytes(path).map_or(0, |b| b.len() as u64)
}

/// Checks requests a file recorded ahead of a segment's end (preallocations, prewrites), in
/// order: each for the file at `path`, not empty, ending on a page boundary, none covering
/// bytes an earlier one covered. `what` names them in messages.
pub fn assert_requests_ahead_in_order(
    requests: &[(std::path::PathBuf, u64, u64)],
    path: &std::path::Path,
    what: &str,
) {
    let page = kafluss_broker::log::appender::page_size();
    let mut previous_end = 0;
    for (i, (p, start, end)) in requests.iter().enumerate() {
        assert_eq!(p, path);
        assert_eq!(end % page, 0, "{what} {i} of {requests:?} ends inside a page");
        assert!(
            *start >= previous_end,
            "{what} {i} of {requests:?} covers bytes an earlier one covered"
        );
        assert!(end > start, "{what} {i} of {requests:?} is empty");
        previous_end = *end;
    }
}
