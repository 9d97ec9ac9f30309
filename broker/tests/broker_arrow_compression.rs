//! `table.log.arrow.compression.type` / `.zstd.level` end to end through the real binary: bad
//! values are refused at CREATE and ALTER naming the option; kcat produces the same rows into
//! a table of each codec (and the default, ZSTD); the segment files hold batches of exactly
//! that codec; pyarrow reads them straight from the files, and the HTTP scan and `kafluss
//! scan` give back every row; an ALTER switches the codec from the next batch on within the
//! same segment, which stays readable by all three.

#[path = "broker_support.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use arrow_ipc::CompressionType;
use serde_json::{json, Value};
use support::{binary, kcat_produce, python_ok, run_with_timeout, Server};

/// `(table, WITH options, expected codec of its batches)`.
const TABLES: [(&str, &str, Option<CompressionType>); 4] = [
    ("c_none", ", 'table.log.arrow.compression.type' = 'NONE'", None),
    (
        "c_lz4",
        ", 'table.log.arrow.compression.type' = 'lz4_frame'",
        Some(CompressionType::LZ4_FRAME),
    ),
    (
        "c_zstd",
        ", 'table.log.arrow.compression.type' = 'Zstd', 'table.log.arrow.compression.zstd.level' = '9'",
        Some(CompressionType::ZSTD),
    ),
    ("c_default", "", Some(CompressionType::ZSTD)),
];

const ROWS: i64 = 300;

fn create(server: &Server, table: &str, options: &str) -> (u16, String) {
    server.sql(&format!(
        "CREATE TABLE fluss.{table} (id BIGINT, name STRING, amount DECIMAL(18, 2)) \
         WITH ('table.kafka.enabled' = 'true'{options})"
    ))
}

fn document(id: i64) -> String {
    format!(
        r#"{{"id":{id},"name":"customer-{}","amount":"{}.50"}}"#,
        id % 7,
        id % 100
    )
}

fn produce(server: &Server, table: &str, ids: std::ops::Range<i64>) {
    let lines: Vec<String> = ids.map(document).collect();
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let (ok, _, err) = kcat_produce(server, &format!("fluss.{table}"), 0, &lines, &[]);
    assert!(ok, "kcat produce to {table}: {err}");
}

fn segments(data_dir: &Path, table: &str) -> Vec<PathBuf> {
    let db = data_dir.join("fluss");
    let table_dir = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.strip_prefix(&format!("{table}-"))
                .is_some_and(|id| id.chars().all(|c| c.is_ascii_digit()))
        })
        .unwrap_or_else(|| panic!("no directory of {table} in {}", db.display()));
    let mut paths: Vec<PathBuf> = std::fs::read_dir(table_dir.join("bucket-0"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    paths
}

/// The codec of every record-batch message of a segment, walking the IPC stream framing.
fn batch_codecs(path: &Path) -> Vec<Option<CompressionType>> {
    let bytes = std::fs::read(path).unwrap();
    let mut codecs = Vec::new();
    let mut pos = 0;
    while pos + 8 <= bytes.len() {
        if bytes[pos..pos + 4] == [0; 4] {
            break; // zeros written ahead of acks=-1 appends (log.prewrite.size), checked below
        }
        assert_eq!(bytes[pos..pos + 4], [0xFF; 4], "continuation marker at {pos}");
        let len = u32::from_le_bytes(bytes[pos + 4..pos + 8].try_into().unwrap()) as usize;
        if len == 0 {
            break; // end of stream
        }
        let message = arrow_ipc::root_as_message(&bytes[pos + 8..pos + 8 + len]).expect("message");
        if let Some(batch) = message.header_as_record_batch() {
            codecs.push(batch.compression().map(|c| c.codec()));
        }
        pos += 8 + len + message.bodyLength() as usize;
    }
    assert!(
        bytes[pos..].iter().all(|&b| b == 0),
        "{} ends on a message boundary, or zeros after it",
        path.display()
    );
    codecs
}

const PYARROW_READ: &str = r#"
import json, sys
import pyarrow.ipc as ipc
ids, amounts = [], []
for path in sys.argv[1:]:
    table = ipc.open_stream(path).read_all()
    ids += table.column("id").to_pylist()
    amounts += [str(a) for a in table.column("amount").to_pylist()]
print(json.dumps({"ids": ids, "amounts": amounts}))
"#;

fn check_readable(server: &Server, table: &str, rows: i64) {
    let expected_ids: Vec<i64> = (0..rows).collect();
    let expected_amounts: Vec<String> = (0..rows).map(|i| format!("{}.50", i % 100)).collect();

    let paths = segments(&server.data_dir, table);
    let args: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let read: Value = serde_json::from_str(python_ok(PYARROW_READ, &args).trim()).expect("json");
    assert_eq!(read["ids"], json!(expected_ids), "pyarrow reads {table}");
    assert_eq!(read["amounts"], json!(expected_amounts), "pyarrow reads {table}");

    let scanned = server.scan(&format!("fluss.{table}"));
    let ids: Vec<i64> = scanned.iter().map(|r| r["row"]["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, expected_ids, "HTTP scan of {table}");
    let offsets: Vec<i64> = scanned.iter().map(|r| r["offset"].as_i64().unwrap()).collect();
    assert_eq!(offsets, expected_ids, "row offsets of {table}");
    assert_eq!(
        scanned[1]["row"],
        json!({"id": 1, "name": "customer-1", "amount": "1.50"})
    );

    let (ok, out, err) = run_with_timeout(
        Command::new(binary()).args([
            "scan",
            &format!("fluss.{table}"),
            "--server",
            &server.fluss.to_string(),
        ]),
        b"",
        Duration::from_secs(60),
    );
    assert!(ok, "kafluss scan {table}: {err}");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("jsonl"))
        .collect();
    assert_eq!(lines, scanned, "kafluss scan and the HTTP scan of {table} agree");
}

#[test]
fn bad_compression_options_are_refused_naming_the_option() {
    let server = Server::start(1, &[]);
    let (status, body) = create(&server, "bad", ", 'table.log.arrow.compression.type' = 'gzip'");
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("'table.log.arrow.compression.type' must be one of NONE, LZ4_FRAME, ZSTD, got 'gzip'"),
        "{body}"
    );
    let (status, body) = create(&server, "bad", ", 'table.log.arrow.compression.zstd.level' = '0'");
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains(
            "'table.log.arrow.compression.zstd.level' must be an integer between 1 and 22, got '0'"
        ),
        "{body}"
    );
    let (status, body) = create(&server, "good", "");
    assert_eq!(status, 200, "{body}");
    let (status, body) =
        server.sql("ALTER TABLE fluss.good SET ('table.log.arrow.compression.zstd.level' = '23')");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("between 1 and 22, got '23'"), "{body}");
    let (status, body) =
        server.sql("ALTER TABLE fluss.good SET ('table.log.arrow.compression.type' = 'snappy')");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("got 'snappy'"), "{body}");
}

#[test]
fn every_codec_is_stored_as_asked_and_read_back_by_pyarrow_and_scan() {
    let server = Server::start(1, &[]);
    for (table, options, _) in TABLES {
        let (status, body) = create(&server, table, options);
        assert_eq!(status, 200, "{body}");
        produce(&server, table, 0..ROWS);
    }
    let mut sizes = Vec::new();
    for (table, _, codec) in TABLES {
        let paths = segments(&server.data_dir, table);
        let codecs: Vec<_> = paths.iter().flat_map(|p| batch_codecs(p)).collect();
        assert!(!codecs.is_empty(), "{table} has batches");
        assert!(codecs.iter().all(|c| *c == codec), "{table}: {codecs:?}");
        sizes.push(
            paths
                .iter()
                .map(|p| std::fs::metadata(p).unwrap().len())
                .sum::<u64>(),
        );
        check_readable(&server, table, ROWS);
    }
    // Repetitive rows: both codecs store them in less space than the uncompressed table.
    assert!(
        sizes[1] < sizes[0] && sizes[2] < sizes[0],
        "bytes on disk {sizes:?}"
    );

    // ALTER applies from the next batch on, in the same segment file.
    server.sql_ok("ALTER TABLE fluss.c_none SET ('table.log.arrow.compression.type' = 'ZSTD')");
    produce(&server, "c_none", ROWS..2 * ROWS);
    server.sql_ok("ALTER TABLE fluss.c_none RESET ('table.log.arrow.compression.type')");
    server.sql_ok("ALTER TABLE fluss.c_none SET ('table.log.arrow.compression.type' = 'LZ4_FRAME')");
    produce(&server, "c_none", 2 * ROWS..3 * ROWS);
    let paths = segments(&server.data_dir, "c_none");
    assert_eq!(paths.len(), 1, "one segment holds all three codecs");
    let codecs = batch_codecs(&paths[0]);
    assert_eq!(codecs.first(), Some(&None));
    assert!(codecs.contains(&Some(CompressionType::ZSTD)), "{codecs:?}");
    assert_eq!(codecs.last(), Some(&Some(CompressionType::LZ4_FRAME)));
    check_readable(&server, "c_none", 3 * ROWS);
}
