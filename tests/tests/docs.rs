//! The documentation, run as written (see `kafluss_tests::docs`): the README's two-command
//! quick start, and each numbered step of docs/getting-started.md (a test per step, each playing
//! the steps before it first, as a reader would have). Each starts from a fresh empty working
//! directory with `kafluss serve` and its defaults; the tests take turns on the default ports.

use std::time::Duration;

use kafluss_tests::clients::{available, Client};
use kafluss_tests::docs::{blocks, default_ports_lock, read_doc, DocRun};
use kafluss_tests::server::run_cli;

#[test]
fn readme_quick_start() {
    if !available(Client::KcatDebian) {
        return;
    }
    let _ports = default_ports_lock();
    let readme = read_doc("README.md");
    let mut run = DocRun::new();
    // "The two commands": the first runs the server, with its embedded defaults.
    let serve = blocks(&readme)
        .into_iter()
        .find(|b| b.section == "The two commands" && b.text.contains("serve"))
        .expect("README: the command that runs the server");
    run.play_block(&serve);
    assert!(
        run.server().data_dir().starts_with(run.dir()),
        "the default data.dir is ./data"
    );
    run.play(&readme, |section| section == "Quick start");

    // The rows are where the README says: in ./data of the working directory.
    let rows = run
        .server()
        .scan_until("fluss.greetings", 2, Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("{e}\n{}", run.transcript()));
    let values: Vec<&str> = rows
        .iter()
        .filter_map(|r| r.row["_kafka_value"].as_str())
        .collect();
    assert_eq!(values, ["hello kafluss", "hello fluss"]);
    let data = run.dir().join("data").join("fluss");
    let table_dir = std::fs::read_dir(&data)
        .unwrap_or_else(|e| panic!("{}: {e}", data.display()))
        .filter_map(Result::ok)
        .find(|entry| entry.file_name().to_string_lossy().starts_with("greetings-"));
    assert!(table_dir.is_some(), "no greetings table under {}", data.display());
}

/// Plays docs/getting-started.md up to and including step `last` (sections `## N. ...`).
fn getting_started_through(last: u32) -> Option<DocRun> {
    if !available(Client::KcatDebian) {
        return None;
    }
    let doc = read_doc("docs/getting-started.md");
    let mut run = DocRun::new();
    run.play(&doc, |section| step_number(section).is_some_and(|n| n <= last));
    Some(run)
}

fn step_number(section: &str) -> Option<u32> {
    section.split_once(". ")?.0.parse().ok()
}

fn scanned(run: &DocRun, table: &str, wanted: usize) -> Vec<serde_json::Value> {
    run.server()
        .scan_until(table, wanted, Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("{e}\n{}", run.transcript()))
        .into_iter()
        .map(|r| r.row)
        .collect()
}

#[test]
fn getting_started_steps_are_numbered_one_to_eight() {
    let doc = read_doc("docs/getting-started.md");
    let numbers: Vec<u32> = doc
        .lines()
        .filter_map(|line| line.strip_prefix("## "))
        .filter_map(step_number)
        .collect();
    assert_eq!(
        numbers,
        (1..=8).collect::<Vec<_>>(),
        "the tests below cover steps 1-8"
    );
}

#[test]
fn getting_started_1_start_a_server() {
    let _ports = default_ports_lock();
    let Some(run) = getting_started_through(1) else {
        return;
    };
    let tables = run.server().sql("SHOW DATABASES").expect("SHOW DATABASES");
    assert!(tables.to_string().contains("fluss"), "{tables}");
    assert!(run.dir().join("server.yaml").is_file());
}

#[test]
fn getting_started_2_create_a_table() {
    let _ports = default_ports_lock();
    let Some(run) = getting_started_through(2) else {
        return;
    };
    let info = run
        .server()
        .table_info("sales.orders")
        .expect("sales.orders exists");
    assert!(info.to_string().contains("order_id"), "{info}");
    let bad = run.server().table_info("sales.bad");
    assert!(bad.is_err(), "the refused table must not exist: {bad:?}");
}

#[test]
fn getting_started_3_produce() {
    let _ports = default_ports_lock();
    let Some(run) = getting_started_through(3) else {
        return;
    };
    let rows = scanned(&run, "sales.orders", 3);
    let ids: Vec<i64> = rows.iter().filter_map(|r| r["order_id"].as_i64()).collect();
    assert_eq!(ids, [1, 2, 3]);
    assert_eq!(rows[1]["amount"], "99.99");
}

#[test]
fn getting_started_4_read_the_rows_back() {
    let _ports = default_ports_lock();
    let Some(run) = getting_started_through(4) else {
        return;
    };
    let arrow = std::fs::metadata(run.dir().join("orders.arrow")).expect("orders.arrow written");
    assert!(arrow.len() > 0);
}

#[test]
fn getting_started_5_enable_or_disable() {
    let _ports = default_ports_lock();
    let Some(run) = getting_started_through(5) else {
        return;
    };
    let info = run.server().table_info("sales.orders").expect("table info");
    assert!(info.to_string().contains("table.kafka.enabled"), "{info}");
}

#[test]
fn getting_started_7_conversion_and_system_columns() {
    let _ports = default_ports_lock();
    let Some(run) = getting_started_through(7) else {
        return;
    };
    let rows = scanned(&run, "fluss.events", 1);
    assert_eq!(rows[0]["_kafka_rescue"], r#"{"colour":"red"}"#);
    for table in ["fluss.raw", "fluss.lines"] {
        run.server().table_info(table).expect("created by step 7");
    }
}

#[test]
fn getting_started_8_sasl_plain() {
    let _ports = default_ports_lock();
    let Some(run) = getting_started_through(8) else {
        return;
    };
    // The step ends with both listeners protected: the admin API wants credentials now...
    let anonymous = run.server().table_info("sales.orders");
    assert!(
        anonymous.as_ref().is_err_and(|e| e.to_string().contains("401")),
        "the Fluss listener requires a login after step 8: {anonymous:?}"
    );
    // ...and the administrator's scan shows the rows the SASL producer sent: before the
    // authorizer, and after the administrator granted it WRITE with the authorizer on.
    let fluss = run.server().fluss_addr().to_string();
    let done = run_cli(
        &[
            "scan",
            "sales.orders",
            "--server",
            &fluss,
            "--user",
            "admin",
            "--password",
            "admin-secret",
        ],
        Duration::from_secs(60),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(done.status.success(), "{}", done.stderr_text());
    for row in [r#""order_id":4"#, r#""order_id":5"#] {
        assert!(
            done.stdout_text().contains(row),
            "the SASL producer's row {row}: {}",
            done.stdout_text()
        );
    }
}
