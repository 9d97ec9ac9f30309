//! `kafluss sql` through the real binary against a running `kafluss serve`: the seed's
//! statements from `-e` and `-f`, readable output, exit 1 with the server's message.

#[path = "broker_support.rs"]
mod support;

use std::process::{Command, Output};

use support::{binary, Server};

fn kafluss_sql(server: &Server, args: &[&str]) -> Output {
    Command::new(binary())
        .arg("sql")
        .arg("--server")
        .arg(server.fluss.to_string())
        .args(args)
        .output()
        .expect("run kafluss sql")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

const SEED_CREATE: &str = "CREATE DATABASE IF NOT EXISTS sales;

CREATE TABLE sales.orders (
    order_id BIGINT,
    amount DECIMAL(18, 2),
    _kafka_key BYTES,
    _kafka_headers MAP<STRING, BYTES>
) WITH (
    'table.kafka.enabled' = 'true'
);
";

const SEED_ALTER: &str = "ALTER TABLE sales.orders SET (
    'table.kafka.enabled' = 'true'
);";

#[test]
fn seed_statements_run_through_kafluss_sql() {
    let server = Server::start(1, &[]);
    let script = server.data_dir.with_extension("seed.sql");
    std::fs::write(&script, SEED_CREATE).unwrap();

    let output = kafluss_sql(&server, &["-f", script.to_str().unwrap()]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "Database sales created\nTable sales.orders created\n"
    );

    let output = kafluss_sql(&server, &["-e", SEED_ALTER]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "Table sales.orders altered\n");

    let output = kafluss_sql(&server, &["-e", "SHOW DATABASES; DESCRIBE sales.orders"]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("| database name |"), "{text}");
    assert!(text.contains("| sales         |"), "{text}");
    assert!(
        text.contains("| _kafka_headers | MAP<STRING NOT NULL, BYTES> | TRUE |"),
        "{text}"
    );

    // The table description over HTTP shows the served mapping.
    let (status, body) = server.get("/v1/tables/sales.orders");
    assert_eq!(status, 200, "{body}");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["kafka"]["served"], true);
    assert_eq!(json["bucket_count"], 1);

    // Errors: exit 1 with the server's message on stderr.
    let output = kafluss_sql(
        &server,
        &[
            "-e",
            "CREATE TABLE sales.bad (q INT NOT NULL) WITH ('table.kafka.enabled' = 'true')",
        ],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("INVALID_KAFKA_MAPPING") && stderr(&output).contains("'q' must be nullable"),
        "{}",
        stderr(&output)
    );
    let output = kafluss_sql(&server, &["-e", "SELECT 1"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("line 1, column 1"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn catalog_survives_a_server_restart() {
    let mut server = Server::start(1, &[]);
    let output = kafluss_sql(&server, &["-e", SEED_CREATE]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let data_dir = server.data_dir.clone();
    server.terminate();
    let server = Server::start_in(&data_dir, 1, &[]);
    let output = kafluss_sql(&server, &["-e", "SHOW TABLES FROM sales"]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert!(stdout(&output).contains("| orders     |"), "{}", stdout(&output));
}
