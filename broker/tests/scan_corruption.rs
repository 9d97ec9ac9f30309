//! A stored batch that no longer matches its CRC32C (bit rot, an outside write) is found and
//! reported, never served as a shorter answer that looks complete: the scan says which file and
//! offset, `kafluss scan` exits non-zero, the rows before the damage stay readable with an
//! explicit range, the bucket refuses appends, and the documented repair (docs/storage.md,
//! "Damaged segments") brings it back.

#[path = "broker_support.rs"]
mod support;

use std::path::PathBuf;
use std::process::Command;

use kafluss_protocol::{Compression, ErrorCode, RecordBatchBuilder};
use support::{Raw, Server};

const BATCHES: usize = 24;
const ROWS_PER_BATCH: usize = 100;

fn produce(server: &Server, first: usize, batches: usize) -> Vec<ErrorCode> {
    let mut raw = Raw::connect(server.kafka);
    (0..batches)
        .map(|b| {
            let mut builder = RecordBatchBuilder::new(Compression::None);
            for r in 0..ROWS_PER_BATCH {
                let id = first + b * ROWS_PER_BATCH + r;
                builder.append(
                    1_700_000_000_000,
                    None,
                    Some(format!(r#"{{"id":{id}}}"#).as_bytes()),
                    &[],
                );
            }
            let request = support::produce_request(-1, "fluss.t", 0, builder.build().expect("batch"));
            raw.produce(9, &request).topics[0].partitions[0].error_code
        })
        .collect()
}

#[test]
fn a_damaged_batch_is_reported_not_served_short_and_the_repair_works() {
    let mut server = Server::start(1, &["log.segment.size=4kb"]);
    server.sql_ok("CREATE TABLE fluss.t (id BIGINT) WITH ('table.kafka.enabled' = 'true')");
    assert!(produce(&server, 0, BATCHES).iter().all(|c| *c == ErrorCode::None));
    let total = BATCHES * ROWS_PER_BATCH;
    assert_eq!(server.scan("fluss.t").len(), total);
    server.terminate();

    // Flip one byte in the last batch body of a middle segment (before its end marker).
    let files = server.segment_files("fluss", "t-");
    assert!(files.len() >= 3, "several segments: {files:?}");
    let damaged = &files[files.len() / 2];
    let mut bytes = std::fs::read(damaged).unwrap();
    let at = bytes.len() - 8 - 20;
    bytes[at] ^= 0x5a;
    std::fs::write(damaged, &bytes).unwrap();
    let name = damaged.file_name().unwrap().to_string_lossy().to_string();

    let data_dir = server.data_dir.clone();
    let server = Server::start_in(&data_dir, 1, &["log.segment.size=4kb"]);
    // Recovery names the file; the bucket stays closed.
    let logs = server.logs();
    assert!(
        logs.contains(&name) && logs.contains("checksum mismatch"),
        "{logs}"
    );
    let refused = produce(&server, total, 1);
    assert_eq!(
        refused,
        [ErrorCode::KafkaStorageError],
        "a damaged bucket refuses appends"
    );

    // The scan says where, and is visibly incomplete: an error line, no terminating chunk.
    let (status, body, terminated) = server.get_chunked("/v1/tables/fluss.t/scan?format=jsonl");
    assert_eq!(status, 200, "rows came before the damage");
    assert!(!terminated, "the body must not end like a complete answer");
    let last = body.lines().last().unwrap_or_default();
    let error: serde_json::Value = serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {last}"));
    assert_eq!(error["error"]["code"], "CORRUPT_SEGMENT", "{last}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains(&name), "{message}");
    let rows = body.lines().count() - 1;
    assert!(rows < total, "{rows} rows");
    let from_offset: usize = message
        .split("from offset ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no offset in {message}"));
    assert_eq!(
        from_offset % ROWS_PER_BATCH,
        0,
        "the damage is named at a batch start"
    );
    assert_eq!(
        rows,
        from_offset,
        "every row before the damaged batch was sent: {}",
        &body[..body.len().min(300)]
    );

    // The rows before the damage read back completely with an explicit range.
    let (status, body, terminated) = server.get_chunked(&format!(
        "/v1/tables/fluss.t/scan?format=jsonl&limit={from_offset}"
    ));
    assert_eq!(status, 200);
    assert!(terminated, "a range before the damage is a complete answer");
    assert_eq!(body.lines().count(), from_offset);
    assert!(!body.contains("\"error\""));

    // `kafluss scan` fails visibly.
    let done = Command::new(support::binary())
        .args(["scan", "fluss.t", "--server", &server.fluss.to_string()])
        .output()
        .unwrap();
    assert!(!done.status.success(), "kafluss scan must exit non-zero");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&done.stdout),
        String::from_utf8_lossy(&done.stderr)
    );
    assert!(
        said.contains("CORRUPT_SEGMENT") || said.contains("checksum"),
        "{said}"
    );
    // Its error names the damage (it said only "talking to ...: Peer disconnected"), and an
    // arrow scan, which has no error line, says it ended before it was complete.
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(
        stderr.contains("ended before it was complete: CORRUPT_SEGMENT: corrupt log segment"),
        "{stderr}"
    );
    let arrow = Command::new(support::binary())
        .args([
            "scan",
            "fluss.t",
            "--format",
            "arrow",
            "--server",
            &server.fluss.to_string(),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&arrow.stderr);
    assert!(
        !arrow.status.success() && stderr.contains("ended before it was complete: the server's log says why"),
        "{stderr}"
    );
    drop(server);

    // The documented repair: cut the damaged segment back to its intact bytes (the recovery
    // error says how many), move the later segments aside, restart.
    let intact: u64 = logs
        .split("the file's first ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no intact byte count in the log:\n{logs}"));
    std::fs::OpenOptions::new()
        .write(true)
        .open(damaged)
        .unwrap()
        .set_len(intact)
        .unwrap();
    let aside = data_dir.with_extension("damaged");
    std::fs::create_dir_all(&aside).unwrap();
    for later in files.iter().filter(|f| *f > damaged) {
        std::fs::rename(later, aside.join(later.file_name().unwrap())).unwrap();
    }
    let server = Server::start_in(&data_dir, 1, &["log.segment.size=4kb"]);
    assert!(
        produce(&server, 1_000_000, 1)
            .iter()
            .all(|c| *c == ErrorCode::None),
        "{}",
        server.logs()
    );
    let rows = server.scan("fluss.t");
    assert_eq!(rows.len(), from_offset + ROWS_PER_BATCH);
    let ids: Vec<i64> = rows.iter().map(|r| r["row"]["id"].as_i64().unwrap()).collect();
    assert!(ids[..from_offset]
        .iter()
        .enumerate()
        .all(|(i, id)| *id == i as i64));
    assert_eq!(
        ids[from_offset], 1_000_000,
        "appends continue at offset {from_offset}"
    );
}

/// A bucket whose segments do not follow each other (a middle segment deleted or emptied, a
/// stray empty segment far past the end): recovery refuses it, and a scan reads the rows up to
/// the gap and then ends with `CORRUPT_SEGMENT` naming the segment after the gap, never an
/// answer that looks complete with offsets jumping (before: exit 0 and a hole); the table's row
/// count is the rows readable from the start (before: 10,000 for a stray segment named 10000).
#[test]
fn a_gap_between_segments_ends_the_scan_as_damage() {
    let mut server = Server::start(1, &["log.segment.size=4kb"]);
    server.sql_ok("CREATE TABLE fluss.t (id BIGINT) WITH ('table.kafka.enabled' = 'true')");
    assert!(produce(&server, 0, BATCHES).iter().all(|c| *c == ErrorCode::None));
    server.terminate();
    let data_dir = server.data_dir.clone();
    let files = server.segment_files("fluss", "t-");
    assert!(files.len() >= 3, "several segments: {files:?}");
    let base = |file: &PathBuf| -> usize { file.file_stem().unwrap().to_string_lossy().parse().unwrap() };
    let middle = files[files.len() / 2].clone();
    let after = files[files.len() / 2 + 1].clone();
    let kept = std::fs::read(&middle).unwrap();
    let stray = middle.with_file_name(format!("{:020}.arrow", 10_000));
    for damage in ["deleted", "emptied", "stray"] {
        match damage {
            "deleted" => std::fs::remove_file(&middle).unwrap(),
            "emptied" => std::fs::write(&middle, b"").unwrap(),
            _ => {
                std::fs::write(&middle, &kept).unwrap();
                std::fs::write(&stray, b"").unwrap();
            }
        }
        let (gap_at, named) = match damage {
            "stray" => (BATCHES * ROWS_PER_BATCH, stray.clone()),
            _ => (base(&middle), after.clone()),
        };
        let server = Server::start_in(&data_dir, 1, &["log.segment.size=4kb"]);
        let (status, body, terminated) = server.get_chunked("/v1/tables/fluss.t/scan?format=jsonl");
        assert_eq!(status, 200, "{damage}: {body}");
        assert!(
            !terminated,
            "{damage}: the answer does not end like a complete one"
        );
        let lines: Vec<&str> = body.lines().collect();
        assert_eq!(
            lines.len(),
            gap_at + 1,
            "{damage}: the rows before the gap, then the error"
        );
        let last = lines[gap_at];
        assert!(last.contains("CORRUPT_SEGMENT"), "{damage}: {last}");
        assert!(
            last.contains(&*named.file_name().unwrap().to_string_lossy()),
            "{damage}: {last}"
        );
        let (status, table) = server.get("/v1/tables/fluss.t");
        assert_eq!(status, 200, "{table}");
        let table: serde_json::Value = serde_json::from_str(&table).unwrap();
        assert_eq!(table["row_count"], gap_at as u64, "{damage}: {table}");
    }
}
