//! Damage to a stored batch's framing or metadata (the row count, a buffer's offset or length,
//! the continuation marker), not only to its body, is found: every record-batch message carries
//! a CRC32C of its first `8 + metadata length` bytes (`kafluss.crc32c.meta`, docs/storage.md).
//! Against the real binary, with one segment of six acknowledged batches:
//! - damage in a batch that complete batches follow closes the bucket (appends refused,
//!   nothing truncated) instead of cutting the later batches away as a torn tail;
//! - damage to the last batch's metadata is a torn tail: the server starts (arrow's decoder
//!   once panicked on a buffer length that was not a multiple of its type's width, and the
//!   process aborted at every start), the batch is cut and appends go on at its offset;
//! - a scan meets damaged metadata as it meets a damaged body: the rows before it, then
//!   `CORRUPT_SEGMENT`.

#[path = "broker_support.rs"]
mod support;

use std::path::PathBuf;

use kafluss_protocol::{Compression, ErrorCode, RecordBatchBuilder};
use support::{Raw, Server};

const BATCHES: usize = 6;
const ROWS: usize = 10;
const TABLE: &str = "CREATE TABLE fluss.t (id BIGINT, s STRING) WITH ('table.kafka.enabled' = 'true', \
                     'table.log.arrow.compression.type' = 'NONE')";

/// One acks=-1 batch of `ROWS` rows per call, ids from `first`; the answer's code and offset.
fn produce(server: &Server, first: usize) -> (ErrorCode, i64) {
    produce_acks(server, first, -1)
}

/// [`produce`] with `acks`.
fn produce_acks(server: &Server, first: usize, acks: i16) -> (ErrorCode, i64) {
    let mut raw = Raw::connect(server.kafka);
    let mut builder = RecordBatchBuilder::new(Compression::None);
    for id in first..first + ROWS {
        let value = format!(r#"{{"id":{id},"s":"row-{id}"}}"#);
        builder.append(1_700_000_000_000, None, Some(value.as_bytes()), &[]);
    }
    let request = support::produce_request(acks, "fluss.t", 0, builder.build().expect("batch"));
    let answer = raw.produce(9, &request).topics[0].partitions[0].clone();
    (answer.error_code, answer.base_offset)
}

/// A record-batch message of a segment file: where it starts, its metadata's length, and where
/// the length field of its buffer `3` (the `s` column's offsets) lies.
struct Message {
    start: usize,
    metadata_len: usize,
    offsets_length_at: usize,
}

/// The record-batch messages of an IPC stream, by walking its framing.
fn messages(bytes: &[u8]) -> Vec<Message> {
    let mut found = Vec::new();
    let mut pos = 0;
    while pos + 8 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[pos + 4..pos + 8].try_into().unwrap()) as usize;
        if len == 0 {
            break;
        }
        let metadata = &bytes[pos + 8..pos + 8 + len];
        let message = arrow_ipc::root_as_message(metadata).expect("message");
        if let Some(batch) = message.header_as_record_batch() {
            let buffer = batch.buffers().expect("buffers").get(3);
            let at = (buffer as *const arrow_ipc::Buffer as usize) - (metadata.as_ptr() as usize);
            assert_eq!(buffer.length(), (ROWS as i64 + 1) * 4);
            found.push(Message {
                start: pos,
                metadata_len: len,
                offsets_length_at: pos + 8 + at + 8,
            });
        }
        pos += 8 + len + message.bodyLength() as usize;
    }
    found
}

/// A stopped server's data dir with `BATCHES` acknowledged batches in one segment, and the
/// segment's path and bytes.
fn stored() -> (Server, PathBuf, Vec<u8>) {
    let mut server = Server::start(1, &[]);
    server.sql_ok(TABLE);
    for b in 0..BATCHES {
        assert_eq!(produce(&server, b * ROWS), (ErrorCode::None, (b * ROWS) as i64));
    }
    server.terminate();
    let mut files = server.segment_files("fluss", "t-");
    assert_eq!(files.len(), 1, "{files:?}");
    let path = files.pop().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(messages(&bytes).len(), BATCHES);
    (server, path, bytes)
}

/// Damage that complete batches follow: the continuation marker of the second batch, its
/// row count's neighbourhood and its `s` offsets buffer's length (each on its own). Each time
/// recovery refuses the bucket (before: a torn tail, and three acknowledged batches were cut;
/// or the rows were shifted), the file is left as it was and appends are refused.
#[test]
fn damaged_metadata_that_complete_batches_follow_closes_the_bucket() {
    let (server, path, bytes) = stored();
    let second = &messages(&bytes)[1];
    let cases: Vec<(&str, usize)> = vec![
        ("continuation marker", second.start + 1),
        ("metadata length", second.start + 5),
        ("a metadata byte", second.start + 8 + second.metadata_len / 2),
        ("the offsets buffer's length", second.offsets_length_at),
    ];
    for (what, at) in cases {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x01;
        std::fs::write(&path, &damaged).unwrap();
        let mut restarted = Server::start_in(&server.data_dir, 1, &[]);
        let logs = restarted.logs();
        assert!(
            logs.contains("a complete batch follows at byte"),
            "{what}: {logs}"
        );
        assert_eq!(
            produce(&restarted, 1000).0,
            ErrorCode::KafkaStorageError,
            "{what}: appends are refused"
        );
        // A scan of the refused bucket reads what recovery keeps, the first batch, then says
        // why it ends (before: the last segment's damage ended it silently, exit 0, 60 or 10
        // rows), and the row count is those rows (before: every row the files claimed).
        let (status, body, terminated) = restarted.get_chunked("/v1/tables/fluss.t/scan?format=jsonl");
        let lines: Vec<&str> = body.lines().collect();
        assert!(status == 200 && !terminated, "{what}: {status} {body}");
        assert_eq!(lines.len(), ROWS + 1, "{what}: {body}");
        assert!(lines[ROWS].contains("CORRUPT_SEGMENT"), "{what}: {body}");
        let (_, table) = restarted.get("/v1/tables/fluss.t");
        let table: serde_json::Value = serde_json::from_str(&table).unwrap();
        assert_eq!(table["row_count"], ROWS as u64, "{what}: {table}");
        restarted.terminate();
        assert_eq!(
            std::fs::read(&path).unwrap(),
            damaged,
            "{what}: nothing was truncated"
        );
    }
}

/// Six batches acknowledged with acks=1 (none fsync'd), the process killed, then the second
/// batch's bytes zeroed, as a power loss that wrote back the later pages and not that one
/// leaves them. The batches after it say no fsync had covered it (`kafluss.synced`): the
/// server starts with the bucket open, cuts the damage and what follows as an unsynced tail,
/// and appends go on at offset 10 (the bucket was refused before, every produce answered
/// KAFKA_STORAGE_ERROR until an operator repaired it).
#[test]
fn unsynced_batches_after_a_hole_are_cut_and_the_bucket_stays_open() {
    let mut server = Server::start(1, &[]);
    server.sql_ok(TABLE);
    for b in 0..BATCHES {
        assert_eq!(
            produce_acks(&server, b * ROWS, 1),
            (ErrorCode::None, (b * ROWS) as i64)
        );
    }
    server.kill();
    let path = server.segment_files("fluss", "t-").pop().unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let found = messages(&bytes);
    assert_eq!(found.len(), BATCHES);
    for b in &mut bytes[found[1].start..found[2].start] {
        *b = 0;
    }
    std::fs::write(&path, &bytes).unwrap();
    let restarted = Server::start_in(&server.data_dir, 1, &[]);
    let logs = restarted.logs();
    assert!(
        logs.contains("truncating torn tail")
            && logs.contains("written before any fsync covered these bytes"),
        "{logs}"
    );
    assert_eq!(produce(&restarted, 1000), (ErrorCode::None, ROWS as i64));
    let ids: Vec<i64> = restarted
        .scan("fluss.t")
        .iter()
        .map(|row| row["row"]["id"].as_i64().unwrap())
        .collect();
    let expected: Vec<i64> = (0..ROWS as i64).chain(1000..1000 + ROWS as i64).collect();
    assert_eq!(ids, expected);
}

/// The last batch's `s` offsets buffer declares 45 bytes instead of 44: the server starts,
/// cuts that batch as a torn tail (its metadata does not match its checksum), keeps the five
/// before it, and the next append takes its offset.
#[test]
fn damaged_metadata_of_the_last_batch_is_a_torn_tail_and_the_server_starts() {
    let (server, path, mut bytes) = stored();
    let last = &messages(&bytes)[BATCHES - 1];
    bytes[last.offsets_length_at] += 1;
    std::fs::write(&path, &bytes).unwrap();
    let restarted = Server::start_in(&server.data_dir, 1, &[]);
    let logs = restarted.logs();
    assert!(
        logs.contains("truncating torn tail") && logs.contains("do not match their checksum"),
        "{logs}"
    );
    let rows = restarted.scan("fluss.t");
    assert_eq!(rows.len(), (BATCHES - 1) * ROWS);
    assert_eq!(
        produce(&restarted, 1000),
        (ErrorCode::None, ((BATCHES - 1) * ROWS) as i64)
    );
}

/// A scan of a segment whose second batch's row count neighbourhood was changed after recovery
/// accepted it (an outside write while the server runs): the first batch's rows, then
/// `CORRUPT_SEGMENT` naming the batch, never rows read through damaged metadata.
#[test]
fn a_scan_meets_damaged_metadata_as_corrupt_segment() {
    let (server, path, bytes) = stored();
    let restarted = Server::start_in(&server.data_dir, 1, &[]);
    assert_eq!(restarted.scan("fluss.t").len(), BATCHES * ROWS);
    let second = &messages(&bytes)[1];
    let mut damaged = bytes.clone();
    damaged[second.offsets_length_at] += 8;
    std::fs::write(&path, &damaged).unwrap();
    let (status, body, terminated) = restarted.get_chunked("/v1/tables/fluss.t/scan?format=jsonl");
    assert_eq!(status, 200, "{body}");
    assert!(!terminated, "a damaged scan does not end like a complete one");
    let lines: Vec<&str> = body.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), ROWS + 1, "{body}");
    assert!(lines[ROWS].contains("CORRUPT_SEGMENT"), "{body}");
    assert!(lines[ROWS].contains("do not match their checksum"), "{body}");
}
