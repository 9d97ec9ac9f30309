//! The `kafluss scan` binary against a loopback HTTP server that serves a real scan with a
//! chunked body, and an error answer; and against the real server, which resolves a bare table
//! name, percent-decodes it, and routes only the exact table paths.

mod log_support;
#[path = "broker_support.rs"]
mod support;

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::thread;

use kafluss_broker::log::{bucket_dir, ArrowCompression, BucketLog, FlushPolicy, LogConfig, LogRegistry};
use kafluss_broker::scan::{PreparedScan, ScanTarget};
use log_support::{batch, run_local, schema};

/// Serves `requests` requests: scans of table `fluss.orders` (or `orders`, as a server whose
/// `kafka.default.database` is `fluss`), 404 for anything else.
fn serve(
    target: ScanTarget,
    registry: Arc<LogRegistry>,
    requests: usize,
) -> (String, thread::JoinHandle<Vec<String>>) {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let addr = server.server_addr().to_ip().unwrap().to_string();
    let handle = thread::spawn(move || {
        let mut urls = Vec::new();
        for _ in 0..requests {
            let request = server.recv().unwrap();
            let url = request.url().to_string();
            urls.push(url.clone());
            let (path, query) = url.split_once('?').unwrap_or((&url, ""));
            if path != "/v1/tables/fluss.orders/scan" && path != "/v1/tables/orders/scan" {
                let body =
                    r#"{"error":{"code":"TABLE_NOT_FOUND","message":"table fluss.missing does not exist"}}"#;
                request
                    .respond(tiny_http::Response::from_string(body).with_status_code(404))
                    .unwrap();
                continue;
            }
            let prepared = PreparedScan::new(target.clone(), query, registry.clone()).unwrap();
            let mut body = Vec::new();
            prepared.run(&mut body).unwrap();
            // No length given: tiny_http answers with Transfer-Encoding: chunked.
            let response =
                tiny_http::Response::new(tiny_http::StatusCode(200), vec![], Cursor::new(body), None, None);
            request.respond(response).unwrap();
        }
        urls
    });
    (addr, handle)
}

/// The options of one `kafluss scan` run.
struct ScanArgs {
    table: String,
    server: String,
    from: Option<u64>,
    limit: Option<u64>,
    format: String,
    columns: Option<String>,
    out: PathBuf,
}

fn args(table: &str, server: &str, out: &Path) -> ScanArgs {
    ScanArgs {
        table: table.to_string(),
        server: server.to_string(),
        from: None,
        limit: None,
        format: "jsonl".to_string(),
        columns: None,
        out: out.to_path_buf(),
    }
}

/// Runs `kafluss scan` with `args`; returns its exit code.
fn run(args: ScanArgs) -> i32 {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kafluss"));
    command
        .args([
            "scan",
            &args.table,
            "--server",
            &args.server,
            "--format",
            &args.format,
        ])
        .arg("--out")
        .arg(&args.out)
        .env_remove("KAFLUSS_USER")
        .env_remove("KAFLUSS_PASSWORD");
    if let Some(from) = args.from {
        command.args(["--from", &from.to_string()]);
    }
    if let Some(limit) = args.limit {
        command.args(["--limit", &limit.to_string()]);
    }
    if let Some(columns) = &args.columns {
        command.args(["--columns", columns]);
    }
    let output = command.output().unwrap();
    if !output.status.success() {
        eprintln!("kafluss scan: {}", String::from_utf8_lossy(&output.stderr));
    }
    output.status.code().unwrap_or(-1)
}

#[test]
fn scan_command_streams_rows_to_a_file_and_reports_server_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let table_dir = tmp.path().join("fluss/orders-1");
    let registry = Arc::new(LogRegistry::new());
    let (dir, reg) = (table_dir.clone(), registry.clone());
    run_local(async move {
        let config = LogConfig {
            segment_size: 1 << 20,
            writeback_size: 0,
            preallocate_size: 64 << 10,
            prewrite_size: 0,
            flush_policy: FlushPolicy::Ack,
            retention: None,
            compression: ArrowCompression::None,
        };
        let log = BucketLog::open(&bucket_dir(&dir, 0), config, reg.register(1, 0))
            .await
            .unwrap();
        log.append(&batch(0, 2000)).await.unwrap();
    });
    let target = ScanTarget {
        table_id: 1,
        table_dir,
        bucket_count: 1,
        schema: schema(),
    };
    let (server, handle) = serve(target, registry, 3);

    let jsonl = tmp.path().join("rows.jsonl");
    let mut scan = args("orders", &server, &jsonl);
    scan.from = Some(10);
    scan.limit = Some(1500);
    assert_eq!(run(scan), 0);
    let text = std::fs::read_to_string(&jsonl).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1500);
    assert_eq!(
        lines[0],
        r#"{"bucket":0,"offset":10,"row":{"id":10,"name":"row-10"}}"#
    );

    let arrow = tmp.path().join("rows.arrow");
    let mut scan = args("fluss.orders", &server, &arrow);
    scan.format = "arrow".to_string();
    scan.columns = Some("id".to_string());
    assert_eq!(run(scan), 0);
    // The Arrow output's third column is `id` (after _bucket and _offset).
    let reader =
        arrow_ipc::reader::StreamReader::try_new(std::fs::File::open(&arrow).unwrap(), None).unwrap();
    assert_eq!(reader.schema().field(2).name(), "id");
    let rows: usize = reader.map(|b| b.unwrap().num_rows()).sum();
    assert_eq!(rows, 2000);

    let missing = tmp.path().join("missing.jsonl");
    assert_eq!(run(args("missing", &server, &missing)), 1);
    assert!(!missing.exists(), "no output file on error");

    let urls = handle.join().unwrap();
    assert_eq!(
        urls,
        vec![
            "/v1/tables/orders/scan?format=jsonl&from=10&limit=1500",
            "/v1/tables/fluss.orders/scan?format=arrow&columns=id",
            "/v1/tables/missing/scan?format=jsonl",
        ]
    );
}

#[test]
fn scan_command_fails_cleanly_when_nothing_listens() {
    // Bind then drop: the port is (almost certainly) closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let tmp = tempfile::tempdir().unwrap();
    assert_eq!(
        run(args(
            "orders",
            &format!("127.0.0.1:{port}"),
            &tmp.path().join("x")
        )),
        1
    );
}

#[test]
fn a_bare_table_name_is_in_the_servers_default_database() {
    let server = support::Server::start(1, &["kafka.default.database=shop"]);
    server.sql_ok("CREATE TABLE shop.o (a INT)");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("o.jsonl");
    // `fluss.o` does not exist: a CLI that put `fluss.` before the name exited 1.
    assert_eq!(run(args("o", &server.fluss.to_string(), &out)), 0);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "");
    assert_eq!(run(args("shop.o", &server.fluss.to_string(), &out)), 0);
    let missing = tmp.path().join("missing.jsonl");
    assert_eq!(run(args("fluss.o", &server.fluss.to_string(), &missing)), 1);
}

#[test]
fn the_table_name_is_one_percent_decoded_segment() {
    let server = support::Server::start(1, &[]);
    server.sql_ok("CREATE TABLE fluss.o (a INT)");
    // `fluss.%6F` is `fluss.o`.
    let (status, body) = server.get("/v1/tables/fluss.%6F");
    assert_eq!(status, 200, "{body}");
    let (status, body) = server.get("/v1/tables/fluss.%6F/scan");
    assert_eq!(status, 200, "{body}");
    // The CLI encodes a space; the server names the table as given.
    let output = Command::new(env!("CARGO_BIN_EXE_kafluss"))
        .args(["scan", "a b", "--server", &server.fluss.to_string()])
        .env_remove("KAFLUSS_USER")
        .env_remove("KAFLUSS_PASSWORD")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("table 'fluss.a b' does not exist"), "{stderr}");
    let (status, body) = server.get("/v1/tables/fluss.%ZZ/scan");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("bad percent-encoding"), "{body}");
    // Only the exact shapes: anything else is no endpoint, named.
    for path in [
        "/v1/tables/fluss.o/scan/",
        "/v1/tables/fluss.o/extra",
        "/v1/tables//scan",
    ] {
        let (status, body) = server.get(path);
        assert_eq!(status, 404, "{path}: {body}");
        assert!(
            body.contains(&format!("no such endpoint: {path}")),
            "{path}: {body}"
        );
    }
}
