//! pyarrow reads segment files directly: `pyarrow.ipc.open_stream(path).read_all()`, both a
//! closed segment (with the end-of-stream marker) and the active one (still open, no marker),
//! with batches that carry an idempotent producer's tag in their message metadata and without.
//!
//! Needs Python with pyarrow: `$KAFLUSS_PYTHON` (set by ./test.sh) or the workspace `.venv`
//! that `./test.sh --setup-only` creates. Without it this test FAILS (it never skips).

mod log_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use arrow_array::{Decimal128Array, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use kafluss_broker::log::segment::segment_file_name;
use kafluss_broker::log::{ArrowCompression, BucketLog, BucketStats, FlushPolicy, LogConfig};
use log_support::run_local;

fn python() -> PathBuf {
    if let Some(path) = std::env::var_os("KAFLUSS_PYTHON") {
        return PathBuf::from(path);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python")
}

fn batch(first: i64, rows: usize) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("amount", DataType::Decimal128(18, 2), true),
        Field::new("name", DataType::Utf8, true),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            true,
        ),
    ]));
    let ids: Vec<i64> = (first..first + rows as i64).collect();
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(ids.clone())),
            Arc::new(
                Decimal128Array::from_iter_values(ids.iter().map(|&i| i128::from(i) * 101))
                    .with_precision_and_scale(18, 2)
                    .unwrap(),
            ),
            Arc::new(StringArray::from_iter_values(ids.iter().map(|i| format!("n{i}")))),
            Arc::new(TimestampMillisecondArray::from(ids.clone()).with_timezone("UTC")),
        ],
    )
    .unwrap()
}

const SCRIPT: &str = r#"
import json, sys
import pyarrow.ipc
out = {}
for path in sys.argv[1:]:
    table = pyarrow.ipc.open_stream(path).read_all()
    out[path] = {
        "ids": table.column("id").to_pylist(),
        "amount": [str(v) for v in table.column("amount").to_pylist()[:2]],
        "schema": str(table.schema.field("ts").type),
    }
print(json.dumps(out))
"#;

#[test]
fn pyarrow_reads_closed_and_active_segments() {
    let python = python();
    assert!(
        python.exists(),
        "{} not found: run ./test.sh --setup-only (creates .venv with pyarrow) or set KAFLUSS_PYTHON",
        python.display()
    );
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bucket-0");
    let d = dir.clone();
    let bases = run_local(async move {
        let config = LogConfig {
            segment_size: 1500,
            writeback_size: 100,
            preallocate_size: 64 << 10,
            prewrite_size: 0,
            flush_policy: FlushPolicy::Ack,
            retention: None,
            compression: ArrowCompression::None,
        };
        let log = BucketLog::open(&d, config, Arc::new(BucketStats::default()))
            .await
            .unwrap();
        let mut bases = vec![0];
        let mut segments = 1;
        for first in (0..50).step_by(10) {
            // Every other batch carries an idempotent producer's tag beside its checksum, as
            // the append pipeline writes it: pyarrow ignores both.
            let tag = format!("1764770000000;7,0,{first},{},10", first + 9);
            let tags = [("kafluss.producers", tag.as_str())];
            let tags: &[(&str, &str)] = if first % 20 == 0 { &tags } else { &[] };
            log.append_tagged(&batch(first, 10), tags).await.unwrap();
            if log.segment_count() > segments {
                segments = log.segment_count();
                bases.push(first as u64);
            }
        }
        // No close(): the active segment is left exactly as a running server leaves it once
        // its rolls have finished in the background (sync_to waits for them: until then the
        // newest segment is still named `<base>.arrow.rolling`).
        log.sync_to(log.next_offset()).await.unwrap();
        bases
    });
    assert!(
        bases.len() >= 2,
        "needs a closed and an active segment: {bases:?}"
    );
    let paths: Vec<PathBuf> = bases.iter().map(|&b| dir.join(segment_file_name(b))).collect();
    let end_of_stream = [0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0];
    for (index, path) in paths.iter().enumerate() {
        let bytes = std::fs::read(path).unwrap();
        let closed = index + 1 < paths.len();
        assert_eq!(bytes.ends_with(&end_of_stream), closed, "{}", path.display());
    }
    let output = Command::new(&python)
        .arg("-c")
        .arg(SCRIPT)
        .args(&paths)
        .output()
        .expect("run python");
    assert!(
        output.status.success(),
        "pyarrow failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut ids = Vec::new();
    for (path, &base) in paths.iter().zip(&bases) {
        let segment = &result[path.to_str().unwrap()];
        let segment_ids: Vec<i64> = serde_json::from_value(segment["ids"].clone()).unwrap();
        assert_eq!(
            segment_ids.first().copied(),
            Some(base as i64),
            "row offset = base + index"
        );
        assert_eq!(segment["schema"], "timestamp[ms, tz=UTC]");
        ids.extend(segment_ids);
    }
    assert_eq!(ids, (0..50).collect::<Vec<i64>>());
    assert_eq!(
        result[paths[0].to_str().unwrap()]["amount"],
        serde_json::json!(["0.00", "1.01"])
    );
}
