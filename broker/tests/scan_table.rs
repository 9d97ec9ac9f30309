//! Scan: the row JSON encoding of every type, projection, bucket/from/limit, the high
//! watermark bound, torn tails, and the Arrow output.

mod log_support;

use std::io::Cursor;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, Int32Builder, MapBuilder, MapFieldNames, StringBuilder, StructBuilder,
};
use arrow_array::types::Int32Type;
use arrow_array::{
    ArrayRef, BooleanArray, Date32Array, Decimal128Array, FixedSizeBinaryArray, Float32Array, Float64Array,
    Int16Array, Int32Array, Int64Array, Int8Array, ListArray, RecordBatch, StringArray,
    Time32MillisecondArray, Time64MicrosecondArray, TimestampMicrosecondArray, TimestampMillisecondArray,
};
use arrow_ipc::reader::StreamReader;
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};
use kafluss_broker::log::{bucket_dir, ArrowCompression, BucketLog, FlushPolicy, LogConfig, LogRegistry};
use kafluss_broker::scan::reader::{on_disk_offsets, BucketOffsets};
use kafluss_broker::scan::{
    row_counts, scan_table, PreparedScan, ScanError, ScanFormat, ScanParams, ScanTarget,
};
use log_support::{batch, run_local, schema};

const TABLE_ID: u64 = 42;

fn config() -> LogConfig {
    LogConfig {
        segment_size: 1 << 20,
        writeback_size: 0,
        preallocate_size: 64 << 10,
        prewrite_size: 0,
        flush_policy: FlushPolicy::Ack,
        retention: None,
        // Scans decompress what the broker stores by default.
        compression: ArrowCompression::default(),
    }
}

/// Appends `batches[b]` to bucket `b` of a table under `table_dir`, registering stats.
fn write_buckets(table_dir: &Path, registry: &Arc<LogRegistry>, batches: Vec<Vec<RecordBatch>>) {
    let table_dir = table_dir.to_path_buf();
    let registry = registry.clone();
    run_local(async move {
        for (bucket, bucket_batches) in batches.into_iter().enumerate() {
            let bucket = bucket as u32;
            let stats = registry.register(TABLE_ID, bucket);
            let log = BucketLog::open(&bucket_dir(&table_dir, bucket), config(), stats)
                .await
                .unwrap();
            for batch in bucket_batches {
                log.append(&batch).await.unwrap();
            }
            log.close().await.unwrap();
        }
    });
}

fn scan_to_string(target: &ScanTarget, params: &ScanParams, registry: &LogRegistry) -> String {
    let mut out = Vec::new();
    scan_table(target, params, registry, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn all_types_schema() -> SchemaRef {
    let row_fields = Fields::from(vec![
        Field::new("a", DataType::Int32, true),
        Field::new("b", DataType::Utf8, true),
    ]);
    let map_entries = Field::new(
        "entries",
        DataType::Struct(Fields::from(vec![
            Field::new("key", DataType::Utf8, false),
            Field::new("value", DataType::Binary, true),
        ])),
        false,
    );
    Arc::new(Schema::new(vec![
        Field::new("bool", DataType::Boolean, true),
        Field::new("tiny", DataType::Int8, true),
        Field::new("small", DataType::Int16, true),
        Field::new("int", DataType::Int32, true),
        Field::new("big", DataType::Int64, true),
        Field::new("float", DataType::Float32, true),
        Field::new("double", DataType::Float64, true),
        Field::new("dec", DataType::Decimal128(18, 2), true),
        Field::new("str", DataType::Utf8, true),
        Field::new("bytes", DataType::Binary, true),
        Field::new("bin3", DataType::FixedSizeBinary(3), true),
        Field::new("date", DataType::Date32, true),
        Field::new(
            "time",
            DataType::Time32(arrow_schema::TimeUnit::Millisecond),
            true,
        ),
        Field::new(
            "time6",
            DataType::Time64(arrow_schema::TimeUnit::Microsecond),
            true,
        ),
        Field::new(
            "ts",
            DataType::Timestamp(arrow_schema::TimeUnit::Millisecond, None),
            true,
        ),
        Field::new(
            "ltz",
            DataType::Timestamp(arrow_schema::TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new_list("arr", Field::new("item", DataType::Int32, true), true),
        Field::new("map", DataType::Map(Arc::new(map_entries), false), true),
        Field::new("row", DataType::Struct(row_fields), true),
    ]))
}

fn all_types_batch() -> RecordBatch {
    let schema = all_types_schema();
    let mut map = MapBuilder::new(
        Some(MapFieldNames {
            entry: "entries".into(),
            key: "key".into(),
            value: "value".into(),
        }),
        StringBuilder::new(),
        BinaryBuilder::new(),
    );
    map.keys().append_value("h1");
    map.values().append_value(b"\x00\xff");
    map.keys().append_value("h2");
    map.values().append_null();
    map.append(true).unwrap();
    map.append(false).unwrap();
    let DataType::Struct(row_fields) = schema.field_with_name("row").unwrap().data_type().clone() else {
        unreachable!()
    };
    let mut row = StructBuilder::from_fields(row_fields, 2);
    row.field_builder::<Int32Builder>(0).unwrap().append_value(7);
    row.field_builder::<StringBuilder>(1)
        .unwrap()
        .append_value("x\"y");
    row.append(true);
    row.field_builder::<Int32Builder>(0).unwrap().append_null();
    row.field_builder::<StringBuilder>(1).unwrap().append_null();
    row.append(false);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(BooleanArray::from(vec![Some(true), None])),
        Arc::new(Int8Array::from(vec![Some(-128), None])),
        Arc::new(Int16Array::from(vec![Some(32767), None])),
        Arc::new(Int32Array::from(vec![Some(-2147483648), None])),
        Arc::new(Int64Array::from(vec![Some(9007199254740993), None])),
        Arc::new(Float32Array::from(vec![Some(1.1f32), None])),
        Arc::new(Float64Array::from(vec![Some(-2.5e-8), None])),
        Arc::new(
            Decimal128Array::from(vec![Some(1230), None])
                .with_precision_and_scale(18, 2)
                .unwrap(),
        ),
        Arc::new(StringArray::from(vec![Some("héllo\n\"q\""), None])),
        Arc::new(arrow_array::BinaryArray::from(vec![Some(&b"hi!"[..]), None])),
        Arc::new(
            FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                vec![Some(vec![1u8, 2, 3]), None].into_iter(),
                3,
            )
            .unwrap(),
        ),
        Arc::new(Date32Array::from(vec![Some(19_782), None])),
        Arc::new(Time32MillisecondArray::from(vec![Some(45_296_500), None])),
        Arc::new(Time64MicrosecondArray::from(vec![Some(1), None])),
        Arc::new(TimestampMillisecondArray::from(vec![
            Some(1_709_210_096_123),
            None,
        ])),
        Arc::new(TimestampMicrosecondArray::from(vec![Some(-1), None]).with_timezone("UTC")),
        Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
            Some(vec![Some(1), None, Some(3)]),
            None,
        ])),
        Arc::new(map.finish()),
        Arc::new(row.finish()),
    ];
    RecordBatch::try_new(schema, columns).unwrap()
}

#[test]
fn every_type_encodes_as_the_interface_says() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = Arc::new(LogRegistry::new());
    write_buckets(tmp.path(), &registry, vec![vec![all_types_batch()]]);
    let target = ScanTarget {
        table_id: TABLE_ID,
        table_dir: tmp.path().to_path_buf(),
        bucket_count: 1,
        schema: all_types_schema(),
    };
    let text = scan_to_string(&target, &ScanParams::default(), &registry);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(
        lines[0],
        concat!(
            r#"{"bucket":0,"offset":0,"row":{"bool":true,"tiny":-128,"small":32767,"int":-2147483648,"#,
            r#""big":9007199254740993,"float":1.1,"double":-2.5e-8,"dec":"12.30","str":"héllo\n\"q\"","#,
            r#""bytes":"aGkh","bin3":"AQID","date":"2024-02-29","time":"12:34:56.500","time6":"00:00:00.000001","#,
            r#""ts":"2024-02-29T12:34:56.123","ltz":"1969-12-31T23:59:59.999999Z","arr":[1,null,3],"#,
            r#""map":{"h1":"AP8=","h2":null},"row":{"a":7,"b":"x\"y"}}}"#
        )
    );
    let nulls: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
    assert_eq!(nulls["offset"], 1);
    for (name, value) in nulls["row"].as_object().unwrap() {
        assert!(value.is_null(), "{name} should be null, got {value}");
    }
    // Every line is valid JSON.
    let first: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(first["row"]["dec"], "12.30");
}

fn two_bucket_table(tmp: &Path) -> (ScanTarget, Arc<LogRegistry>) {
    let registry = Arc::new(LogRegistry::new());
    write_buckets(
        tmp,
        &registry,
        vec![vec![batch(0, 3), batch(3, 2)], vec![batch(100, 4)]],
    );
    let target = ScanTarget {
        table_id: TABLE_ID,
        table_dir: tmp.to_path_buf(),
        bucket_count: 2,
        schema: schema(),
    };
    (target, registry)
}

fn offsets_and_ids(text: &str) -> Vec<(u64, u64, i64)> {
    text.lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            (
                v["bucket"].as_u64().unwrap(),
                v["offset"].as_u64().unwrap(),
                v["row"]["id"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn buckets_from_and_limit_select_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let (target, registry) = two_bucket_table(tmp.path());
    let all = scan_to_string(&target, &ScanParams::default(), &registry);
    assert_eq!(
        offsets_and_ids(&all),
        vec![
            (0, 0, 0),
            (0, 1, 1),
            (0, 2, 2),
            (0, 3, 3),
            (0, 4, 4),
            (1, 0, 100),
            (1, 1, 101),
            (1, 2, 102),
            (1, 3, 103)
        ]
    );
    let params = ScanParams {
        bucket: Some(0),
        from: 2,
        limit: Some(2),
        ..ScanParams::default()
    };
    assert_eq!(
        offsets_and_ids(&scan_to_string(&target, &params, &registry)),
        vec![(0, 2, 2), (0, 3, 3)]
    );
    let params = ScanParams {
        from: 3,
        limit: Some(3),
        ..ScanParams::default()
    };
    assert_eq!(
        offsets_and_ids(&scan_to_string(&target, &params, &registry)),
        vec![(0, 3, 3), (0, 4, 4), (1, 3, 103)]
    );
    let err = scan_table(
        &target,
        &ScanParams {
            bucket: Some(2),
            ..ScanParams::default()
        },
        &registry,
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(matches!(
        err,
        ScanError::NoSuchBucket {
            bucket: 2,
            bucket_count: 2
        }
    ));
    assert!(err.is_client_error());
}

#[test]
fn projection_selects_and_orders_columns() {
    let tmp = tempfile::tempdir().unwrap();
    let (target, registry) = two_bucket_table(tmp.path());
    let params = ScanParams {
        bucket: Some(1),
        limit: Some(1),
        columns: Some(vec!["name".into(), "id".into()]),
        ..ScanParams::default()
    };
    assert_eq!(
        scan_to_string(&target, &params, &registry),
        "{\"bucket\":1,\"offset\":0,\"row\":{\"name\":\"row-100\",\"id\":100}}\n"
    );
    let params = ScanParams {
        columns: Some(vec!["nope".into()]),
        ..ScanParams::default()
    };
    let err = scan_table(&target, &params, &registry, &mut Vec::new()).unwrap_err();
    assert!(matches!(&err, ScanError::NoSuchColumn(c) if c == "nope"), "{err}");
}

#[test]
fn scans_never_pass_the_high_watermark_or_read_a_torn_tail() {
    let tmp = tempfile::tempdir().unwrap();
    let (target, registry) = two_bucket_table(tmp.path());
    // Bytes of a batch being written after the watermark: a partial message.
    let segment = bucket_dir(tmp.path(), 0).join(kafluss_broker::log::segment::segment_file_name(0));
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes.extend_from_slice(&[0xFF, 0xFF, 0xFF, 0xFF, 0x80, 0x00, 0x00, 0x00, 1, 2, 3]);
    std::fs::write(&segment, &bytes).unwrap();
    // The owner core has published only the first batch (3 rows) of bucket 0.
    registry
        .get(TABLE_ID, 0)
        .unwrap()
        .next_offset
        .store(3, Ordering::Release);
    let params = ScanParams {
        bucket: Some(0),
        ..ScanParams::default()
    };
    assert_eq!(
        offsets_and_ids(&scan_to_string(&target, &params, &registry)),
        vec![(0, 0, 0), (0, 1, 1), (0, 2, 2)]
    );
    // Without a published watermark (bucket not opened since start), complete messages only.
    let cold = LogRegistry::new();
    assert_eq!(offsets_and_ids(&scan_to_string(&target, &params, &cold)).len(), 5);
}

#[test]
fn arrow_output_is_one_stream_with_bucket_and_offset_columns() {
    let tmp = tempfile::tempdir().unwrap();
    let (target, registry) = two_bucket_table(tmp.path());
    let params = ScanParams {
        format: ScanFormat::Arrow,
        from: 1,
        columns: Some(vec!["id".into()]),
        ..ScanParams::default()
    };
    let mut out = Vec::new();
    let summary = scan_table(&target, &params, &registry, &mut out).unwrap();
    assert_eq!(summary.rows, 7);
    let reader = StreamReader::try_new(Cursor::new(out), None).unwrap();
    let names: Vec<String> = reader
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names, vec!["_bucket", "_offset", "id"]);
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch.unwrap();
        let buckets = batch.column(0).as_any().downcast_ref::<Int32Array>().unwrap();
        let offsets = batch.column(1).as_any().downcast_ref::<Int64Array>().unwrap();
        let ids = batch.column(2).as_any().downcast_ref::<Int64Array>().unwrap();
        for i in 0..batch.num_rows() {
            rows.push((buckets.value(i), offsets.value(i), ids.value(i)));
        }
    }
    assert_eq!(
        rows,
        vec![
            (0, 1, 1),
            (0, 2, 2),
            (0, 3, 3),
            (0, 4, 4),
            (1, 1, 101),
            (1, 2, 102),
            (1, 3, 103)
        ]
    );
    // An empty result is still a valid stream.
    let params = ScanParams {
        format: ScanFormat::Arrow,
        from: 1000,
        ..ScanParams::default()
    };
    let mut out = Vec::new();
    scan_table(&target, &params, &registry, &mut out).unwrap();
    let reader = StreamReader::try_new(Cursor::new(out), None).unwrap();
    assert_eq!(reader.count(), 0);
}

#[test]
fn query_strings_parse_and_refuse_typos() {
    let params = ScanParams::from_query("bucket=1&from=5&limit=10&format=arrow&columns=a%20b,c").unwrap();
    assert_eq!(
        params,
        ScanParams {
            bucket: Some(1),
            from: 5,
            limit: Some(10),
            columns: Some(vec!["a b".into(), "c".into()]),
            format: ScanFormat::Arrow,
        }
    );
    assert_eq!(ScanParams::from_query("").unwrap(), ScanParams::default());
    assert_eq!(
        ScanParams::from_query("bucket=&format=jsonl").unwrap(),
        ScanParams::default()
    );
    for bad in [
        "bucket=x",
        "from=-1",
        "limit=1.5",
        "format=csv",
        "offset=3",
        "columns=%zz",
        "columns=a,b,a",
    ] {
        let err = ScanParams::from_query(bad).unwrap_err();
        assert!(err.is_client_error(), "{bad}: {err}");
    }
    let twice = ScanParams::from_query("columns=a,%20a").unwrap_err().to_string();
    assert!(twice.contains("column 'a' is named twice"), "{twice}");
    // A repeated parameter is refused, naming it (the last value won).
    for repeated in [
        "bucket=0&bucket=1",
        "limit=1&from=2&limit=1",
        "format=jsonl&format=",
    ] {
        let err = ScanParams::from_query(repeated).unwrap_err();
        assert_eq!(err.http_status(), 400, "{repeated}: {err}");
        let message = err.to_string();
        let name = repeated.split('=').next().unwrap();
        assert!(
            message.contains(&format!("parameter {name}:")) && message.contains("more than once"),
            "{repeated}: {message}"
        );
    }
}

#[test]
fn on_disk_offsets_match_what_the_log_published() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, registry) = two_bucket_table(tmp.path());
    for bucket in 0..2 {
        let offsets = on_disk_offsets(&bucket_dir(tmp.path(), bucket)).unwrap();
        let stats = registry.get(TABLE_ID, bucket).unwrap();
        assert_eq!(offsets.next_offset, stats.next_offset.load(Ordering::Acquire));
        assert_eq!(offsets.log_start_offset, 0);
    }
    // A torn tail does not count; a missing bucket is empty.
    let segment = bucket_dir(tmp.path(), 1).join(kafluss_broker::log::segment::segment_file_name(0));
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes.extend_from_slice(&[0xFF, 0xFF, 0xFF]);
    std::fs::write(&segment, &bytes).unwrap();
    assert_eq!(on_disk_offsets(&bucket_dir(tmp.path(), 1)).unwrap().rows(), 4);
    assert_eq!(
        on_disk_offsets(&bucket_dir(tmp.path(), 9)).unwrap(),
        BucketOffsets::default()
    );
}

#[test]
fn prepared_scans_refuse_bad_requests_before_streaming() {
    let tmp = tempfile::tempdir().unwrap();
    let (target, registry) = two_bucket_table(tmp.path());
    for (query, status, code) in [
        ("bucket=5", 404, "NO_SUCH_BUCKET"),
        ("columns=id,nope", 400, "NO_SUCH_COLUMN"),
        ("bucket=0&bucket=1", 400, "BAD_SCAN_PARAMETER"),
        ("format=csv", 400, "BAD_SCAN_PARAMETER"),
        ("limit=many", 400, "BAD_SCAN_PARAMETER"),
        ("columns=id,id", 400, "BAD_SCAN_PARAMETER"),
    ] {
        let err = PreparedScan::new(target.clone(), query, registry.clone()).unwrap_err();
        assert_eq!((err.http_status(), err.code()), (status, code), "{query}: {err}");
    }
    let prepared =
        PreparedScan::new(target.clone(), "bucket=1&limit=2&format=jsonl", registry.clone()).unwrap();
    assert_eq!(prepared.content_type(), "application/x-ndjson");
    let mut out = Vec::new();
    assert_eq!(prepared.run(&mut out).unwrap().rows, 2);
    assert_eq!(
        offsets_and_ids(&String::from_utf8(out).unwrap()),
        vec![(1, 0, 100), (1, 1, 101)]
    );
}

#[test]
fn row_counts_use_published_stats_or_the_files() {
    let tmp = tempfile::tempdir().unwrap();
    let (target, registry) = two_bucket_table(tmp.path());
    assert_eq!(row_counts(&target, &registry), vec![(0, 5), (1, 4)]);
    // After a restart no core has opened the buckets yet: the files answer.
    assert_eq!(row_counts(&target, &LogRegistry::new()), vec![(0, 5), (1, 4)]);
    let wider = ScanTarget {
        bucket_count: 3,
        ..target
    };
    assert_eq!(row_counts(&wider, &registry), vec![(0, 5), (1, 4), (2, 0)]);
}
