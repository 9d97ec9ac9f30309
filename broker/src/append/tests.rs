//! The append pipeline and the bucket actors on one glommio executor, with a real catalog
//! table and real bucket logs in a temporary directory: no mesh, no socket, no other core.

use std::net::{IpAddr, Ipv4Addr};
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use glommio::channels::local_channel::{self, LocalSender};
use glommio::{LocalExecutorBuilder, Placement};
use kafluss_auth::Principal;
use kafluss_protocol::{Compression, RecordBatchBuilder};

use super::bucket::Buckets;
use super::pipeline::{decode_batches, held_by_decoded, Appender, HeaderSpan, OwnerResult, RecordSpan};
use super::{AppendError, AppendJob, AppendOutcome, BatchRejection};
use crate::catalog::model::TableInfo;
use crate::catalog::{Catalog, CatalogConfig};
use crate::config::ServerConfig;
use crate::log::LogRegistry;
use crate::metrics::Metrics;
use crate::producer::state::{ProducerBatch, SequenceError};
use crate::telemetry::CoreTelemetry;

pub(crate) fn run_local<T: 'static>(future: impl std::future::Future<Output = T> + 'static) -> T {
    LocalExecutorBuilder::new(Placement::Unbound)
        .io_memory(1 << 20)
        .make()
        .expect("start glommio executor")
        .run(future)
}

/// A data dir holding table `fluss.t` (JSON values into `id`, `name`; two buckets).
pub(crate) fn fixture() -> (tempfile::TempDir, ServerConfig, Arc<TableInfo>) {
    fixture_with(
        "CREATE TABLE t (id BIGINT, name STRING) WITH ('table.kafka.enabled' = 'true', 'bucket.num' = '2')",
        "t",
    )
}

/// A data dir holding the table that `create` (SQL) makes, `fluss.<name>`.
fn fixture_with(create: &str, name: &str) -> (tempfile::TempDir, ServerConfig, Arc<TableInfo>) {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(CatalogConfig::new(dir.path())).unwrap();
    let mut session = catalog.session(Principal::anonymous(), IpAddr::V4(Ipv4Addr::LOCALHOST));
    catalog.execute(create, &mut session).unwrap();
    let table = catalog.snapshot().table("fluss", name).unwrap().clone();
    let mut config = ServerConfig::load(None, &[]).unwrap();
    config.data_dir = dir.path().to_path_buf();
    (dir, config, table)
}

pub(crate) fn appender(config: &ServerConfig, registry: &Arc<LogRegistry>) -> Rc<Appender> {
    let telemetry = Rc::new(CoreTelemetry::new(
        0,
        Arc::new(Metrics::new(1)),
        config.log_repeat_interval,
        config.log_repeat_keys,
    ));
    Rc::new(Appender::new(config.clone(), registry.clone(), telemetry))
}

pub(crate) fn batch(values: &[&str], compression: Compression) -> Bytes {
    let mut builder = RecordBatchBuilder::new(compression);
    for value in values {
        builder.append(5, Some(b"k"), Some(value.as_bytes()), &[(b"h", Some(b"v"))]);
    }
    builder.build().unwrap()
}

pub(crate) fn job(table: &Arc<TableInfo>, bucket: u32, records: Bytes, acks: i16) -> AppendJob {
    AppendJob {
        table: table.clone(),
        bucket,
        partition: bucket as i32,
        records: Some(records),
        acks,
        bare_topic: false,
    }
}

/// Submits one record `value` for `bucket` to `buckets` and waits for its outcome.
async fn submit_one(
    buckets: &Rc<Buckets<LocalSender<AppendOutcome>>>,
    table: &Arc<TableInfo>,
    bucket: u32,
    value: &str,
) -> AppendOutcome {
    let (tx, rx) = local_channel::new_bounded(1);
    buckets
        .submit(job(table, bucket, batch(&[value], Compression::None), 1), tx)
        .await;
    rx.recv().await.unwrap()
}

async fn outcome_of(result: OwnerResult) -> AppendOutcome {
    match result {
        OwnerResult::Done(outcome) => outcome,
        OwnerResult::AfterSync(wait) => wait.await,
    }
}

#[test]
fn the_pipeline_appends_rows_and_refuses_without_appending() {
    let (dir, config, table) = fixture();
    let registry = Arc::new(LogRegistry::new());
    let bucket_dir = crate::log::bucket_dir(&dir.path().join(table.relative_dir().unwrap()), 1);
    run_local(async move {
        let appender = appender(&config, &registry);
        let mut state = None;
        let rows = batch(
            &[r#"{"id": 1, "name": "a"}"#, r#"{"id": 2, "name": "b"}"#],
            Compression::Zstd,
        );
        let first = outcome_of(appender.append(&mut state, job(&table, 1, rows, 1)).await).await;
        let first = first.expect("appended");
        assert_eq!((first.base_offset, first.rows), (0, 2));

        // A record that does not convert: nothing of its batch is appended, and every record
        // of the batch that does not convert is named (Kafka's `record_errors`).
        let values = [
            r#"{"id": 3}"#,
            r#"{"id": "not a number"}"#,
            r#"{"id": 4}"#,
            "not JSON",
            r#"{"id": 5.5}"#,
            r#"{"id": 6}"#,
        ];
        let bad = batch(&values, Compression::None);
        match outcome_of(appender.append(&mut state, job(&table, 1, bad, 1)).await).await {
            Err(AppendError::Convert(e)) => {
                assert_eq!(e.first.record_index, 1);
                let more: Vec<_> = e.more.iter().map(|e| e.record_index).collect();
                assert_eq!(more, [3, 4], "{e:?}");
                assert!(e.more[0].to_string().starts_with("record 3: "), "{}", e.more[0]);
            }
            other => panic!("expected a conversion failure, got {other:?}"),
        }
        // The same from an idempotent producer (converted before its sequence is taken).
        let mut idempotent = RecordBatchBuilder::new(Compression::None).producer(7, 0, 0);
        for value in values {
            idempotent.append(0, None, Some(value.as_bytes()), &[]);
        }
        let refused = appender.append(&mut state, job(&table, 1, idempotent.build().unwrap(), 1));
        match outcome_of(refused.await).await {
            Err(AppendError::Convert(e)) => {
                let all: Vec<_> = std::iter::once(&e.first)
                    .chain(&e.more)
                    .map(|e| e.record_index)
                    .collect();
                assert_eq!(all, [1, 3, 4], "{e:?}");
            }
            other => panic!("expected a conversion failure, got {other:?}"),
        }
        let mut transactional = RecordBatchBuilder::new(Compression::None)
            .producer(1, 0, 0)
            .flags(true, false);
        transactional.append(0, None, Some(br#"{"id": 4}"#), &[]);
        let refused = appender
            .append(&mut state, job(&table, 1, transactional.build().unwrap(), 1))
            .await;
        assert!(matches!(
            outcome_of(refused).await,
            Err(AppendError::Batch(BatchRejection::Transactional))
        ));

        // acks=-1 answers after group commit, at the next offset: the refusals took none.
        let synced = batch(&[r#"{"id": 5, "name": "e"}"#], Compression::Gzip);
        let result = appender.append(&mut state, job(&table, 1, synced, -1)).await;
        assert!(
            matches!(result, OwnerResult::AfterSync(_)),
            "acks=-1 waits for the fsync"
        );
        let synced = outcome_of(result).await.expect("appended");
        assert_eq!((synced.base_offset, synced.rows), (2, 1));
        super::pipeline::close_bucket(state.take().unwrap()).await;

        // Reopened (recovered) by a fresh pipeline, the log goes on after the stored rows.
        let reopened = self::appender(&config, &Arc::new(LogRegistry::new()));
        let mut state = None;
        let again = batch(&[r#"{"id": 6, "name": "f"}"#], Compression::None);
        let again = outcome_of(reopened.append(&mut state, job(&table, 1, again, 1)).await).await;
        assert_eq!(again.expect("appended").base_offset, 3);
        super::pipeline::close_bucket(state.take().unwrap()).await;
    });
    assert!(bucket_dir.exists(), "{}", bucket_dir.display());
}

#[test]
fn bucket_actors_answer_in_order_and_a_dropped_table_stays_closed() {
    let (dir, config, table) = fixture();
    let registry = Arc::new(LogRegistry::new());
    let table_dir = dir.path().join(table.relative_dir().unwrap());
    run_local(async move {
        let buckets: Rc<Buckets<LocalSender<AppendOutcome>>> = Buckets::new(appender(&config, &registry));
        let mut receivers = Vec::new();
        for i in 0..5 {
            let (tx, rx) = local_channel::new_bounded(1);
            let value = format!(r#"{{"id": {i}, "name": "n"}}"#);
            buckets
                .submit(job(&table, 0, batch(&[&value], Compression::None), 1), tx)
                .await;
            receivers.push(rx);
        }
        for (i, rx) in receivers.into_iter().enumerate() {
            let appended = rx.recv().await.unwrap().expect("appended");
            assert_eq!(appended.base_offset, i as u64, "request order is append order");
        }
        assert!(buckets.has_open_logs(table.id));

        assert_eq!(buckets.appender().cached_plans(), 1);
        buckets.close_table(table.id).await;
        assert!(
            !buckets.has_open_logs(table.id),
            "close_table returns once the logs are closed"
        );
        assert_eq!(buckets.appender().cached_plans(), 0, "the plan is forgotten");
        let outcome = submit_one(&buckets, &table, 0, r#"{"id": 9}"#).await;
        assert!(matches!(outcome, Err(AppendError::TableDropped(_))));
        let outcome = submit_one(&buckets, &table, 1, r#"{"id": 9}"#).await;
        assert!(matches!(outcome, Err(AppendError::TableDropped(_))));
        buckets.close_all().await;
    });
    assert!(
        !crate::log::bucket_dir(&table_dir, 1).exists(),
        "a dropped table's bucket is never created"
    );
}

#[test]
fn existing_buckets_reopen_before_the_first_job() {
    let (dir, config, table) = fixture();
    let registry = Arc::new(LogRegistry::new());
    let _dir = dir;
    run_local(async move {
        let first: Rc<Buckets<LocalSender<AppendOutcome>>> = Buckets::new(appender(&config, &registry));
        submit_one(&first, &table, 1, r#"{"id": 1}"#)
            .await
            .expect("appended");
        first.close_all().await;

        let registry = Arc::new(LogRegistry::new());
        let second: Rc<Buckets<LocalSender<AppendOutcome>>> = Buckets::new(appender(&config, &registry));
        let catalog = Catalog::open(CatalogConfig::new(&config.data_dir)).unwrap();
        second
            .open_existing(&catalog.snapshot(), |_, bucket| bucket == 1)
            .await;
        assert!(
            second.has_open_logs(table.id),
            "bucket 1 has data: opened at start"
        );
        second.close_all().await;
        assert!(!second.has_open_logs(table.id));
    });
}

/// What decoded records count against `kafka.max-append-memory`: the records a compressed batch
/// decompressed to, and the index of every record and header; an uncompressed batch's records
/// are the frame's own bytes (counted with the frame) and are not counted again.
#[test]
fn decoded_records_hold_their_decompressed_bytes_and_their_index() {
    assert_eq!(
        (
            std::mem::size_of::<RecordSpan>(),
            std::mem::size_of::<HeaderSpan>()
        ),
        (72, 40),
        "docs/configuration.md (kafka.max-append-memory) quotes these"
    );
    let value = vec![b'v'; 100_000];
    let mut plain = RecordBatchBuilder::new(Compression::None);
    plain.append(0, None, Some(&value), &[(b"h", Some(b"x"))]);
    let frame = plain.build().unwrap();
    let decoded = decode_batches(Some(&frame), 1 << 20, 1 << 20).unwrap();
    let index = decoded[0].records.capacity() * 72 + decoded[0].headers.capacity() * 40;
    assert_eq!(held_by_decoded(&decoded, Some(&frame)), index);

    let mut zstd = RecordBatchBuilder::new(Compression::Zstd);
    zstd.append(0, None, Some(&value), &[(b"h", Some(b"x"))]);
    let frame = zstd.build().unwrap();
    assert!(frame.len() < 1_000);
    let decoded = decode_batches(Some(&frame), 1 << 20, 1 << 20).unwrap();
    let index = decoded[0].records.capacity() * 72 + decoded[0].headers.capacity() * 40;
    let held = held_by_decoded(&decoded, Some(&frame));
    assert_eq!(held, decoded[0].data.len() + index);
    assert!(held > 100_000, "{held}");
}

#[test]
fn decodes_several_batches_and_refuses_what_behaviour_md_refuses() {
    let mut two = batch(&["a", "b"], Compression::None).to_vec();
    two.extend_from_slice(&batch(&["c"], Compression::Zstd));
    let decoded = decode_batches(Some(&Bytes::from(two)), 1 << 20, 1 << 10).unwrap();
    let values: Vec<&[u8]> = decoded
        .iter()
        .flat_map(|b| b.records.iter().map(|r| b.optional_part(&r.value).unwrap()))
        .collect();
    assert_eq!(values, vec![&b"a"[..], b"b", b"c"]);
    assert_eq!(decoded[0].base_timestamp, 5);
    // Keys and headers are spans of the records section too.
    let mut keyed = RecordBatchBuilder::new(Compression::None);
    keyed.append(0, Some(b"k1"), Some(b"v1"), &[(b"h1", Some(b"x")), (b"h2", None)]);
    keyed.append(1, None, None, &[]);
    let decoded = decode_batches(Some(&keyed.build().unwrap()), 1 << 20, 1 << 10).unwrap();
    let (keyed, first, second) = (&decoded[0], &decoded[0].records[0], &decoded[0].records[1]);
    assert_eq!(keyed.optional_part(&first.key), Some(&b"k1"[..]));
    assert_eq!(keyed.optional_part(&first.value), Some(&b"v1"[..]));
    let headers: Vec<_> = keyed.headers[first.headers.clone()]
        .iter()
        .map(|h| (keyed.part(&h.key), keyed.optional_part(&h.value)))
        .collect();
    assert_eq!(headers, vec![(&b"h1"[..], Some(&b"x"[..])), (&b"h2"[..], None)]);
    assert_eq!(
        (second.key.clone(), second.value.clone(), second.headers.len()),
        (None, None, 0)
    );
    assert_eq!(second.timestamp_delta, 1);

    assert_eq!(
        decode_batches(None, 1 << 20, 1 << 10).unwrap_err(),
        BatchRejection::Empty
    );
    assert_eq!(
        decode_batches(Some(&Bytes::new()), 1 << 20, 1 << 10).unwrap_err(),
        BatchRejection::Empty
    );
    let mut idempotent = RecordBatchBuilder::new(Compression::None).producer(1, 2, 3);
    idempotent.append(0, None, Some(b"x"), &[]);
    idempotent.append(0, None, Some(b"y"), &[]);
    let decoded = decode_batches(Some(&idempotent.build().unwrap()), 1 << 20, 1 << 10).unwrap();
    assert_eq!(decoded[0].producer, Some(ProducerBatch::new(1, 2, 3, 1)));
    assert_eq!(decoded[0].producer.unwrap().last_seq, 4);
    let mut transactional = RecordBatchBuilder::new(Compression::None)
        .producer(1, 0, 0)
        .flags(true, false);
    transactional.append(0, None, Some(b"x"), &[]);
    assert_eq!(
        decode_batches(Some(&transactional.build().unwrap()), 1 << 20, 1 << 10).unwrap_err(),
        BatchRejection::Transactional
    );
    let mut control = RecordBatchBuilder::new(Compression::None).flags(false, true);
    control.append(0, None, Some(b"x"), &[]);
    assert_eq!(
        decode_batches(Some(&control.build().unwrap()), 1 << 20, 1 << 10).unwrap_err(),
        BatchRejection::Control
    );
    let big = "x".repeat(2000);
    assert!(matches!(
        decode_batches(Some(&batch(&[&big], Compression::None)), 1 << 20, 1 << 10),
        Err(BatchRejection::RecordTooLarge { limit: 1024, .. })
    ));
}

/// Empty headers are two bytes each on the wire and 40 of index: they count two bytes each in
/// a record's size, and a partition's index (records and headers) is bounded like its records
/// (a 3 KB zstd request of 52 million empty headers held a core for a minute and took 2.7 GB).
#[test]
fn empty_headers_and_tiny_records_are_bounded() {
    let empty: Vec<(&[u8], Option<&[u8]>)> = vec![(b"", Some(b"")); 600];
    let mut many_headers = RecordBatchBuilder::new(Compression::Zstd);
    many_headers.append(0, None, Some(b"x"), &empty);
    let many_headers = many_headers.build().unwrap();
    // 600 headers of nothing: 1,201 bytes with the value, over a 1,024-byte record bound.
    assert!(matches!(
        decode_batches(Some(&many_headers), 1 << 20, 1 << 10),
        Err(BatchRejection::RecordTooLarge {
            size: 1201,
            limit: 1024
        })
    ));
    // Under the record bound, over the index bound: 600 × 40 bytes of header spans > 16 KiB,
    // while the records themselves are 1.2 KB.
    match decode_batches(Some(&many_headers), 1 << 14, 1 << 20) {
        Err(e @ BatchRejection::IndexTooLarge { limit: 16384, .. }) => {
            assert!(e.to_string().contains("kafka.max-request-size"), "{e}");
        }
        other => panic!("expected the index bound, got {other:?}"),
    }
    // Tiny records alike: 300 one-byte records without headers are 72 bytes of index each.
    let mut tiny = RecordBatchBuilder::new(Compression::Lz4);
    for _ in 0..300 {
        tiny.append(0, None, Some(b"x"), &[]);
    }
    let tiny = tiny.build().unwrap();
    assert!(matches!(
        decode_batches(Some(&tiny), 1 << 14, 1 << 20),
        Err(BatchRejection::IndexTooLarge { headers: 0, .. })
    ));
    // Within both bounds, the same batches decode.
    assert_eq!(
        decode_batches(Some(&many_headers), 1 << 20, 1 << 20).unwrap()[0]
            .headers
            .len(),
        600
    );
    assert_eq!(
        decode_batches(Some(&tiny), 1 << 20, 1 << 20).unwrap()[0]
            .records
            .len(),
        300
    );
}

#[test]
fn the_decompression_budget_covers_all_batches_of_a_partition() {
    let value = "y".repeat(600);
    let one = batch(&[&value], Compression::Gzip);
    let inflated_one = decode_batches(Some(&one), 1 << 20, 1 << 20).unwrap();
    assert_eq!(inflated_one[0].records.len(), 1);
    let mut two = one.to_vec();
    two.extend_from_slice(&one);
    // Each batch inflates to ~620 bytes: one fits in 1000, two do not.
    assert!(decode_batches(Some(&one), 1000, 1 << 20).is_ok());
    let err = decode_batches(Some(&Bytes::from(two)), 1000, 1 << 20).unwrap_err();
    assert!(
        matches!(err, BatchRejection::Wire(ref e) if e.error_code() == kafluss_protocol::ErrorCode::MessageTooLarge),
        "{err:?}"
    );
}

fn idempotent(producer_id: i64, epoch: i16, first_seq: i32, ids: &[i64]) -> Bytes {
    let mut builder = RecordBatchBuilder::new(Compression::Lz4).producer(producer_id, epoch, first_seq);
    for id in ids {
        let value = format!(r#"{{"id": {id}, "name": "p"}}"#);
        builder.append(5, None, Some(value.as_bytes()), &[]);
    }
    builder.build().unwrap()
}

/// The `id` column of every row of `bucket_dir`, in offset order (pyarrow-free: the scan
/// reader the HTTP scans use).
fn stored_ids(config: &ServerConfig, table: &TableInfo, bucket: u32) -> Vec<i64> {
    stored_messages(config, table, bucket).concat()
}

/// Each stored IPC record-batch message of the bucket, in log order (pyarrow-free: the
/// segments read with arrow-ipc's stream reader).
fn stored_batches(config: &ServerConfig, table: &TableInfo, bucket: u32) -> Vec<arrow_array::RecordBatch> {
    let dir = crate::log::bucket_dir(&config.data_dir.join(table.relative_dir().unwrap()), bucket);
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "arrow"))
        .collect();
    names.sort();
    let mut batches = Vec::new();
    for path in names {
        let file = std::fs::File::open(&path).unwrap();
        for batch in arrow_ipc::reader::StreamReader::try_new(file, None).unwrap() {
            batches.push(batch.unwrap());
        }
    }
    batches
}

/// The `id`s of each stored IPC record-batch message of the bucket, in log order.
fn stored_messages(config: &ServerConfig, table: &TableInfo, bucket: u32) -> Vec<Vec<i64>> {
    stored_batches(config, table, bucket)
        .iter()
        .map(|batch| {
            let ids = batch
                .column_by_name("id")
                .unwrap()
                .as_any()
                .downcast_ref::<arrow_array::Int64Array>()
                .unwrap();
            ids.iter().map(|v| v.unwrap()).collect()
        })
        .collect()
}

#[test]
fn idempotent_retries_are_answered_with_their_offsets_and_survive_a_reopen() {
    let (dir, config, table) = fixture();
    let registry = Arc::new(LogRegistry::new());
    let _dir = dir;
    let check = config.clone();
    let check_table = table.clone();
    run_local(async move {
        let appender = appender(&config, &registry);
        let mut state = None;
        let plain = batch(&[r#"{"id": 100}"#], Compression::None);
        assert_eq!(
            outcome_of(appender.append(&mut state, job(&table, 0, plain, 1)).await)
                .await
                .unwrap()
                .base_offset,
            0
        );
        let first = idempotent(42, 0, 0, &[1, 2]);
        let stored = outcome_of(
            appender
                .append(&mut state, job(&table, 0, first.clone(), -1))
                .await,
        )
        .await
        .unwrap();
        assert_eq!((stored.base_offset, stored.rows), (1, 2));
        let second = idempotent(42, 0, 2, &[3]);
        let stored2 = outcome_of(
            appender
                .append(&mut state, job(&table, 0, second.clone(), 1))
                .await,
        )
        .await
        .unwrap();
        assert_eq!(stored2.base_offset, 3);

        // The same batches again: their original offsets, nothing appended (acks=-1 still
        // answers through group commit).
        let retried = appender
            .append(&mut state, job(&table, 0, first.clone(), -1))
            .await;
        assert!(matches!(retried, OwnerResult::AfterSync(_)));
        let retried = outcome_of(retried).await.unwrap();
        assert_eq!((retried.base_offset, retried.rows), (1, 0));
        let retried2 = outcome_of(
            appender
                .append(&mut state, job(&table, 0, second.clone(), 1))
                .await,
        )
        .await
        .unwrap();
        assert_eq!((retried2.base_offset, retried2.rows), (3, 0));

        // A gap, an old epoch and a new epoch not at 0 are refused and append nothing.
        let gap = appender
            .append(&mut state, job(&table, 0, idempotent(42, 0, 5, &[9]), 1))
            .await;
        assert!(matches!(
            outcome_of(gap).await,
            Err(AppendError::Sequence(SequenceError::OutOfOrder {
                expected: 3,
                ..
            }))
        ));
        let bumped = appender
            .append(&mut state, job(&table, 0, idempotent(42, 1, 3, &[9]), 1))
            .await;
        assert!(matches!(
            outcome_of(bumped).await,
            Err(AppendError::Sequence(SequenceError::NewEpochNotAtZero { .. }))
        ));
        // A batch that fails conversion does not advance the sequence.
        let mut bad = RecordBatchBuilder::new(Compression::None).producer(42, 0, 3);
        bad.append(5, None, Some(br#"{"id": "not a number"}"#), &[]);
        let bad = appender
            .append(&mut state, job(&table, 0, bad.build().unwrap(), 1))
            .await;
        assert!(matches!(outcome_of(bad).await, Err(AppendError::Convert(_))));
        let next = outcome_of(
            appender
                .append(&mut state, job(&table, 0, idempotent(42, 0, 3, &[4]), 1))
                .await,
        )
        .await
        .unwrap();
        assert_eq!(next.base_offset, 4);
        // Another bucket knows nothing of producer 42: it starts anywhere there.
        let mut other_state = None;
        let other = appender
            .append(&mut other_state, job(&table, 1, idempotent(42, 0, 7, &[5]), 1))
            .await;
        assert_eq!(outcome_of(other).await.unwrap().base_offset, 0);
        super::pipeline::close_bucket(other_state.take().unwrap()).await;
        super::pipeline::close_bucket(state.take().unwrap()).await;

        // Reopened by a fresh pipeline (as after a restart), the state comes back from the log.
        let reopened = self::appender(&config, &Arc::new(LogRegistry::new()));
        let mut state = None;
        let retried = outcome_of(reopened.append(&mut state, job(&table, 0, first, -1)).await)
            .await
            .unwrap();
        assert_eq!((retried.base_offset, retried.rows), (1, 0));
        let producers = state.as_ref().unwrap().producers();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let (epoch, cached) = producers.batches(42, now).expect("rebuilt");
        let ranges: Vec<_> = cached
            .iter()
            .map(|b| (b.first_seq, b.last_seq, b.first_offset))
            .collect();
        assert_eq!((epoch, ranges), (0, vec![(0, 1, 1), (2, 2, 3), (3, 3, 4)]));
        let retried = outcome_of(reopened.append(&mut state, job(&table, 0, second, 1)).await)
            .await
            .unwrap();
        assert_eq!((retried.base_offset, retried.rows), (3, 0));
        let stale = reopened
            .append(&mut state, job(&table, 0, idempotent(42, 1, 0, &[6]), 1))
            .await;
        let stale = outcome_of(stale).await.unwrap();
        assert_eq!(
            (stale.base_offset, stale.rows),
            (5, 1),
            "a new epoch at 0 is taken"
        );
        let stale = reopened
            .append(&mut state, job(&table, 0, idempotent(42, 0, 4, &[7]), 1))
            .await;
        assert!(matches!(
            outcome_of(stale).await,
            Err(AppendError::Sequence(SequenceError::StaleEpoch { .. }))
        ));
        super::pipeline::close_bucket(state.take().unwrap()).await;
    });
    assert_eq!(stored_ids(&check, &check_table, 0), vec![100, 1, 2, 3, 4, 6]);
}

/// Appended offsets and rows of a group's results (errors as their message).
async fn group_outcomes(results: Vec<OwnerResult>) -> Vec<Result<(u64, u64), String>> {
    let mut out = Vec::new();
    for result in results {
        out.push(
            outcome_of(result)
                .await
                .map(|a| (a.base_offset, a.rows))
                .map_err(|e| e.to_string()),
        );
    }
    out
}

#[test]
fn a_group_of_jobs_is_written_together_and_answered_as_if_each_came_alone() {
    let (dir, config, table) = fixture();
    let registry = Arc::new(LogRegistry::new());
    let _dir = dir;
    let check = config.clone();
    let check_table = table.clone();
    run_local(async move {
        let appender = appender(&config, &registry);
        let mut state = None;
        // Plain rows, two batches of producer 7 in sequence, a refused record, a retry of the
        // producer's first batch (still waiting in the group), and an out-of-order batch.
        let jobs = vec![
            job(
                &table,
                0,
                batch(&[r#"{"id": 1}"#, r#"{"id": 2}"#], Compression::None),
                1,
            ),
            job(&table, 0, idempotent(7, 0, 0, &[3]), 1),
            job(&table, 0, idempotent(7, 0, 1, &[4, 5]), -1),
            job(&table, 0, batch(&[r#"{"id": "x"}"#], Compression::None), 1),
            job(&table, 0, idempotent(7, 0, 0, &[3]), 1),
            job(&table, 0, idempotent(7, 0, 9, &[6]), 1),
            job(&table, 0, batch(&[r#"{"id": 7}"#], Compression::Zstd), 1),
        ];
        let results = group_outcomes(appender.append_group(&mut state, jobs).await).await;
        assert_eq!(results[0], Ok((0, 2)));
        assert_eq!(results[1], Ok((2, 1)));
        assert_eq!(results[2], Ok((3, 2)));
        assert!(
            results[3].as_ref().is_err_and(|e| e.contains("id")),
            "{:?}",
            results[3]
        );
        // The retry is answered with the stored batch's offset and appends nothing.
        assert_eq!(results[4], Ok((2, 0)));
        assert!(
            results[5].as_ref().is_err_and(|e| e.contains("sequence")),
            "{:?}",
            results[5]
        );
        assert_eq!(results[6], Ok((5, 1)));
        // The producer's state knows both batches: the next sequence is 3.
        let next = group_outcomes(
            appender
                .append_group(&mut state, vec![job(&table, 0, idempotent(7, 0, 3, &[8]), 1)])
                .await,
        )
        .await;
        assert_eq!(next, vec![Ok((6, 1))]);
        super::pipeline::close_bucket(state.take().unwrap()).await;

        // Reopened (as after a restart), the producer's state comes back from the one tag of
        // the message that holds its two batches: each retry gets its own batch's offset.
        let reopened = self::appender(&config, &Arc::new(LogRegistry::new()));
        let mut state = None;
        let retries = vec![
            job(&table, 0, idempotent(7, 0, 0, &[3]), 1),
            job(&table, 0, idempotent(7, 0, 1, &[4, 5]), 1),
            job(&table, 0, idempotent(7, 0, 4, &[9]), 1),
        ];
        let results = group_outcomes(reopened.append_group(&mut state, retries).await).await;
        assert_eq!(results, vec![Ok((2, 0)), Ok((3, 0)), Ok((7, 1))]);
        super::pipeline::close_bucket(state.take().unwrap()).await;
    });
    // The jobs written together went into one IPC message (until the retry had the group
    // written); each later write is its own.
    assert_eq!(
        stored_messages(&check, &check_table, 0),
        vec![vec![1, 2, 3, 4, 5], vec![7], vec![8], vec![9]]
    );
}

#[test]
fn a_run_of_small_jobs_converted_together_still_refuses_only_the_job_that_does_not_convert() {
    let (dir, config, table) = fixture();
    let _dir = dir;
    let check = config.clone();
    let check_table = table.clone();
    run_local(async move {
        let appender = appender(&config, &Arc::new(LogRegistry::new()));
        let mut state = None;
        // Plain jobs are converted at the write, consecutive ones into one batch; the third
        // fails at its second record, so the run is converted job by job again.
        let jobs = vec![
            job(&table, 0, batch(&[r#"{"id": 1}"#], Compression::None), 1),
            job(
                &table,
                0,
                batch(&[r#"{"id": 2}"#, r#"{"id": 3}"#], Compression::Zstd),
                1,
            ),
            job(
                &table,
                0,
                batch(
                    &[r#"{"id": 4}"#, r#"{"id": "x"}"#, r#"{"id": 8}"#, "[]"],
                    Compression::None,
                ),
                1,
            ),
            job(&table, 0, batch(&[r#"{"id": 5}"#], Compression::None), -1),
        ];
        let results = appender.append_group(&mut state, jobs).await;
        let mut outcomes = Vec::new();
        for result in results {
            outcomes.push(outcome_of(result).await);
        }
        let rows: Vec<_> = outcomes
            .iter()
            .map(|o| o.as_ref().map(|a| (a.base_offset, a.rows)).ok())
            .collect();
        assert_eq!(rows, vec![Some((0, 1)), Some((1, 2)), None, Some((3, 1))]);
        match &outcomes[2] {
            // The record's index in its own batch, as if the job had come alone, and the
            // later ones that do not convert either.
            Err(AppendError::Convert(e)) => {
                assert_eq!(e.first.record_index, 1);
                assert_eq!(e.more.iter().map(|e| e.record_index).collect::<Vec<_>>(), [3]);
            }
            other => panic!("expected a conversion failure, got {other:?}"),
        }
        // Without a failure the run is one batch: the same rows as the jobs one by one.
        let jobs = vec![
            job(&table, 0, batch(&[r#"{"id": 6}"#], Compression::None), 1),
            job(
                &table,
                0,
                batch(&[r#"{"id": 7}"#, r#"{"id": 8}"#], Compression::Lz4),
                1,
            ),
        ];
        let results = group_outcomes(appender.append_group(&mut state, jobs).await).await;
        assert_eq!(results, vec![Ok((4, 1)), Ok((5, 2))]);
        super::pipeline::close_bucket(state.take().unwrap()).await;
    });
    assert_eq!(
        stored_messages(&check, &check_table, 0),
        vec![vec![1, 2, 3, 5], vec![6, 7, 8]]
    );
}

/// Every row of a bucket as text: `id`, key, headers and metadata (pyarrow-free, as above).
fn stored_rows(config: &ServerConfig, table: &TableInfo, bucket: u32) -> Vec<String> {
    use arrow_array::{Array, BinaryArray, Int32Array, MapArray, StringArray, StructArray};
    use arrow_array::{Int64Array, TimestampMillisecondArray};
    let mut rows = Vec::new();
    for batch in stored_batches(config, table, bucket) {
        let column = |name: &str| batch.column_by_name(name).unwrap().clone();
        let ids = column("id");
        let ids = ids.as_any().downcast_ref::<Int64Array>().unwrap();
        let keys = column("_kafka_key");
        let keys = keys.as_any().downcast_ref::<BinaryArray>().unwrap();
        let headers = column("_kafka_headers");
        let headers = headers.as_any().downcast_ref::<MapArray>().unwrap();
        let metadata = column("_kafka_metadata");
        let metadata = metadata.as_any().downcast_ref::<StructArray>().unwrap();
        let timestamps = metadata
            .column(0)
            .as_any()
            .downcast_ref::<TimestampMillisecondArray>();
        let partitions = metadata.column(2).as_any().downcast_ref::<Int32Array>().unwrap();
        for row in 0..batch.num_rows() {
            let entries = headers.value(row);
            let names = entries.column(0).as_any().downcast_ref::<StringArray>().unwrap();
            let values = entries.column(1).as_any().downcast_ref::<BinaryArray>().unwrap();
            let pairs: Vec<String> = (0..entries.len())
                .map(|i| {
                    let value = values
                        .is_valid(i)
                        .then(|| String::from_utf8_lossy(values.value(i)));
                    format!("{}={}", names.value(i), value.as_deref().unwrap_or("null"))
                })
                .collect();
            let key = keys
                .is_valid(row)
                .then(|| String::from_utf8_lossy(keys.value(row)));
            rows.push(format!(
                "{} key={} [{}] ts={} p={}",
                ids.value(row),
                key.as_deref().unwrap_or("null"),
                pairs.join(","),
                timestamps.unwrap().value(row),
                partitions.value(row),
            ));
        }
    }
    rows
}

#[test]
fn rows_converted_together_keep_their_own_keys_headers_and_timestamps() {
    let (dir, config, table) = fixture_with(
        "CREATE TABLE h (id BIGINT, _kafka_key BYTES, _kafka_headers MAP<STRING, BYTES>, \
         _kafka_metadata ROW<timestamp TIMESTAMP_LTZ(3), timestamp_type INT, partition INT>) \
         WITH ('table.kafka.enabled' = 'true', 'bucket.num' = '1')",
        "h",
    );
    let _dir = dir;
    let check = config.clone();
    let check_table = table.clone();
    // Two Kafka batches in the first job, one in the second; records with no header, one, and
    // several (a null value among them), so each record's headers are a different range of
    // its own batch's.
    let mut first = RecordBatchBuilder::new(Compression::None);
    first.append(1000, Some(b"a"), Some(br#"{"id": 1}"#), &[]);
    first.append(1001, None, Some(br#"{"id": 2}"#), &[(b"x", Some(b"1"))]);
    let mut second = RecordBatchBuilder::new(Compression::Zstd);
    second.append(
        2000,
        Some(b"c"),
        Some(br#"{"id": 3}"#),
        &[(b"y", Some(b"2")), (b"z", None)],
    );
    second.append(2005, Some(b"d"), Some(br#"{"id": 4}"#), &[]);
    let two_batches = [first.build().unwrap(), second.build().unwrap()].concat();
    let mut third = RecordBatchBuilder::new(Compression::None);
    third.append(3000, None, Some(br#"{"id": 5}"#), &[(b"w", Some(b"3"))]);
    run_local(async move {
        let appender = appender(&config, &Arc::new(LogRegistry::new()));
        let mut state = None;
        let jobs = vec![
            job(&table, 0, Bytes::from(two_batches), 1),
            job(&table, 0, third.build().unwrap(), 1),
        ];
        let results = group_outcomes(appender.append_group(&mut state, jobs).await).await;
        assert_eq!(results, vec![Ok((0, 4)), Ok((4, 1))]);
        super::pipeline::close_bucket(state.take().unwrap()).await;
    });
    assert_eq!(
        stored_rows(&check, &check_table, 0),
        vec![
            "1 key=a [] ts=1000 p=0",
            "2 key=null [x=1] ts=1001 p=0",
            "3 key=c [y=2,z=null] ts=2000 p=0",
            "4 key=d [] ts=2005 p=0",
            "5 key=null [w=3] ts=3000 p=0",
        ]
    );
    // The jobs were converted together: one stored message.
    assert_eq!(
        stored_messages(&check, &check_table, 0),
        vec![vec![1, 2, 3, 4, 5]]
    );
}

#[test]
fn large_batches_of_a_group_are_not_concatenated() {
    let (dir, config, table) = fixture();
    let registry = Arc::new(LogRegistry::new());
    let _dir = dir;
    let check = config.clone();
    let check_table = table.clone();
    // Each of these batches holds more than MERGE_COLUMN_BYTES in its name column, so it is a run of
    // its own; the small ones around them still share a message.
    let name = "n".repeat(super::pipeline::MERGE_COLUMN_BYTES + 1);
    let large = move |id: i64| format!(r#"{{"id": {id}, "name": "{name}"}}"#);
    run_local(async move {
        let appender = appender(&config, &registry);
        let mut state = None;
        let jobs = vec![
            job(&table, 0, batch(&[r#"{"id": 1}"#], Compression::None), 1),
            job(&table, 0, batch(&[r#"{"id": 2}"#], Compression::None), 1),
            job(&table, 0, batch(&[&large(3)], Compression::None), 1),
            job(&table, 0, batch(&[&large(4)], Compression::None), 1),
            job(&table, 0, batch(&[r#"{"id": 5}"#], Compression::None), 1),
            job(&table, 0, batch(&[r#"{"id": 6}"#], Compression::None), 1),
        ];
        let results = group_outcomes(appender.append_group(&mut state, jobs).await).await;
        let offsets: Vec<_> = (0..6).map(|i| Ok((i, 1))).collect();
        assert_eq!(results, offsets);
        super::pipeline::close_bucket(state.take().unwrap()).await;
    });
    assert_eq!(
        stored_messages(&check, &check_table, 0),
        vec![vec![1, 2], vec![3], vec![4], vec![5, 6]]
    );
}

#[test]
fn a_run_of_small_batches_ends_where_a_column_would_pass_the_merge_bound() {
    let (dir, config, table) = fixture();
    let _dir = dir;
    let check = config.clone();
    let check_table = table.clone();
    // A name of 3/8 of MERGE_COLUMN_BYTES each: two of them fit in one run's name column, a
    // third does not.
    const NAME: usize = super::pipeline::MERGE_COLUMN_BYTES * 3 / 8;
    const {
        assert!(3 * NAME > super::pipeline::MERGE_COLUMN_BYTES);
        assert!(2 * NAME + 4096 < super::pipeline::MERGE_COLUMN_BYTES);
    }
    let name = "n".repeat(NAME);
    let value = move |id: i64| format!(r#"{{"id": {id}, "name": "{name}"}}"#);
    run_local(async move {
        let appender = appender(&config, &Arc::new(LogRegistry::new()));
        let mut state = None;
        let jobs = (1..=5)
            .map(|id| job(&table, 0, batch(&[&value(id)], Compression::None), 1))
            .collect();
        let results = group_outcomes(appender.append_group(&mut state, jobs).await).await;
        assert_eq!(results, (0..5).map(|i| Ok((i, 1))).collect::<Vec<_>>());
        super::pipeline::close_bucket(state.take().unwrap()).await;
    });
    assert_eq!(
        stored_messages(&check, &check_table, 0),
        vec![vec![1, 2], vec![3, 4], vec![5]]
    );
}

#[test]
fn an_idempotent_batch_stored_alone_keeps_its_offsets_across_a_reopen() {
    let (dir, config, table) = fixture();
    let _dir = dir;
    let check = config.clone();
    let check_table = table.clone();
    // Producer 7's second batch is over MERGE_COLUMN_BYTES: the group is stored as three messages, so
    // its producers' tags are split three ways too.
    let large = {
        let value = format!(
            r#"{{"id": 2, "name": "{}"}}"#,
            "n".repeat(super::pipeline::MERGE_COLUMN_BYTES + 1)
        );
        let mut builder = RecordBatchBuilder::new(Compression::None).producer(7, 0, 1);
        builder.append(5, None, Some(value.as_bytes()), &[]);
        builder.build().unwrap()
    };
    let jobs = vec![
        job(&table, 0, idempotent(7, 0, 0, &[1]), 1),
        job(&table, 0, large.clone(), 1),
        job(&table, 0, idempotent(7, 0, 2, &[3, 4]), 1),
    ];
    let retries = vec![
        job(&table, 0, idempotent(7, 0, 0, &[1]), 1),
        job(&table, 0, large, 1),
        job(&table, 0, idempotent(7, 0, 2, &[3, 4]), 1),
        job(&table, 0, idempotent(7, 0, 4, &[5]), 1),
    ];
    run_local(async move {
        let appender = appender(&config, &Arc::new(LogRegistry::new()));
        let mut state = None;
        let results = group_outcomes(appender.append_group(&mut state, jobs).await).await;
        assert_eq!(results, vec![Ok((0, 1)), Ok((1, 1)), Ok((2, 2))]);
        super::pipeline::close_bucket(state.take().unwrap()).await;

        // Reopened, each retry is answered with its own batch's offset and appends nothing.
        let reopened = self::appender(&config, &Arc::new(LogRegistry::new()));
        let mut state = None;
        let results = group_outcomes(reopened.append_group(&mut state, retries).await).await;
        assert_eq!(results, vec![Ok((0, 0)), Ok((1, 0)), Ok((2, 0)), Ok((4, 1))]);
        super::pipeline::close_bucket(state.take().unwrap()).await;
    });
    assert_eq!(
        stored_messages(&check, &check_table, 0),
        vec![vec![1], vec![2], vec![3, 4], vec![5]]
    );
}

/// `log.unsynced.size`: acks=1 answers leave at most that many bytes of a bucket unsynced
/// (here 64 KiB, so write-behind every 32 KiB), and never wait with 0 or for acks=0.
#[test]
fn acks_1_answers_leave_at_most_log_unsynced_size_behind_the_disk() {
    for (most, acks) in [(64u64 << 10, 1i16), (0, 1), (64 << 10, 0)] {
        let (_dir, mut config, table) = fixture();
        config.unsynced_size = most;
        let registry = Arc::new(LogRegistry::new());
        run_local(async move {
            let appender = appender(&config, &registry);
            let mut state = None;
            let mut seed = 1u64;
            let mut waited = 0;
            for i in 0..100u64 {
                // Names no codec shrinks much: about 10 KiB stored per batch.
                let values: Vec<String> = (0..40)
                    .map(|j| {
                        let name: String = (0..200)
                            .map(|_| {
                                seed ^= seed << 13;
                                seed ^= seed >> 7;
                                seed ^= seed << 17;
                                (b'a' + (seed % 26) as u8) as char
                            })
                            .collect();
                        format!(r#"{{"id": {}, "name": "{name}"}}"#, i * 40 + j)
                    })
                    .collect();
                let values: Vec<&str> = values.iter().map(String::as_str).collect();
                let result = appender
                    .append(
                        &mut state,
                        job(&table, 1, batch(&values, Compression::None), acks),
                    )
                    .await;
                waited += usize::from(matches!(result, OwnerResult::AfterSync(_)));
                outcome_of(result).await.expect("appended");
                let unsynced = state.as_ref().unwrap().unsynced_bytes();
                if most > 0 && acks == 1 {
                    assert!(unsynced <= most, "{unsynced} bytes unsynced after answer {i}");
                }
            }
            if most == 0 || acks == 0 {
                assert_eq!(waited, 0, "most {most}, acks {acks}");
            }
            super::pipeline::close_bucket(state.take().unwrap()).await;
        });
    }
}

/// A bucket whose open failed on an fsync is not opened again in this process (a second
/// recovery would read the pages the disk lost from the page cache, and its own fsync would
/// succeed); any other failed open is retried by the next job.
#[test]
fn a_bucket_whose_open_failed_on_an_fsync_stays_closed() {
    let (dir, config, table) = fixture();
    let registry = Arc::new(LogRegistry::new());
    let _dir = dir;
    run_local(async move {
        let appender = appender(&config, &registry);
        let eio = || std::io::Error::from_raw_os_error(5);
        appender.note_open_failure(table.id, 0, &crate::log::LogError::io("/x/seg", "read", eio()));
        assert!(
            appender.open_bucket(&table, 0).await.is_ok(),
            "a failed read is retried"
        );
        appender.note_open_failure(table.id, 1, &crate::log::LogError::io("/x/seg", "fsync", eio()));
        match appender.open_bucket(&table, 1).await {
            Err(crate::log::LogError::SyncFailedEarlier { earlier, .. }) => {
                assert!(earlier.contains("fsync"), "{earlier}")
            }
            Err(other) => panic!("expected SyncFailedEarlier, got {other}"),
            Ok(_) => panic!("opened again after a failed fsync"),
        }
        assert!(
            appender.open_bucket(&table, 2).await.is_ok(),
            "other buckets open"
        );
    });
}

/// `open_existing` leaves alone a bucket whose actor already runs (it opened the log itself):
/// no second recovery of the same files, and appends go on at the right offsets.
#[test]
fn open_existing_skips_a_bucket_that_already_has_an_actor() {
    let (dir, config, table) = fixture();
    let registry = Arc::new(LogRegistry::new());
    let _dir = dir;
    run_local(async move {
        let first: Rc<Buckets<LocalSender<AppendOutcome>>> = Buckets::new(appender(&config, &registry));
        submit_one(&first, &table, 1, r#"{"id": 1}"#)
            .await
            .expect("appended");
        first.close_all().await;

        let registry = Arc::new(LogRegistry::new());
        let second: Rc<Buckets<LocalSender<AppendOutcome>>> = Buckets::new(appender(&config, &registry));
        assert_eq!(
            submit_one(&second, &table, 1, r#"{"id": 2}"#)
                .await
                .expect("appended")
                .base_offset,
            1
        );
        let before = second.appender().opened_logs();
        assert_eq!(before, 1);
        let catalog = Catalog::open(CatalogConfig::new(&config.data_dir)).unwrap();
        second
            .open_existing(&catalog.snapshot(), |_, bucket| bucket == 1)
            .await;
        assert_eq!(
            second.appender().opened_logs(),
            before,
            "the running bucket was not opened again"
        );
        assert_eq!(
            submit_one(&second, &table, 1, r#"{"id": 3}"#)
                .await
                .expect("appended")
                .base_offset,
            2
        );
        second.close_all().await;
    });
}
