//! The `kafluss-bench` binary as docs/benchmarks.md shows it: the documented first run (the
//! table `table-sql` prints with its defaults, then `produce` with its defaults) against the real
//! kafluss binary, every acknowledged record scanned back as a row of that table; and the SVG
//! `--plot` of a real run against the null sink, whose axes carry titles with units.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kafluss_bench::plot::{LATENCY_AXIS_TITLE, THROUGHPUT_AXIS_TITLE, X_AXIS_TITLE};
use kafluss_bench::sink;
use kafluss_tests::process::{run_with_timeout, Finished};
use kafluss_tests::server::{workspace_root, KaflussServer, ServerConfig};
use serde_json::Value;

const BENCH: &str = env!("CARGO_BIN_EXE_kafluss-bench");
const RUN_TIMEOUT: Duration = Duration::from_secs(120);
const SCAN_TIMEOUT: Duration = Duration::from_secs(60);

fn bench(args: &[String]) -> Finished {
    let finished = run_with_timeout(Command::new(BENCH).args(args), b"", RUN_TIMEOUT)
        .expect("kafluss-bench runs to its end");
    assert!(
        finished.status.success(),
        "kafluss-bench {args:?}: {}\nstdout: {}\nstderr: {}",
        finished.status,
        finished.stdout_text(),
        finished.stderr_text()
    );
    finished
}

/// A fresh path in a fresh temporary directory (kept alive by the returned guard).
fn scratch(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join(name);
    (dir, path)
}

fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_owned).collect()
}

/// The two commands of the first-run example in docs/benchmarks.md: the arguments of
/// `kafluss-bench table-sql` inside `kafluss sql -e "$(...)"`, and those of `kafluss-bench produce`.
fn documented_first_run() -> (Vec<String>, Vec<String>) {
    let doc_path = workspace_root().join("docs").join("benchmarks.md");
    let doc = std::fs::read_to_string(&doc_path).expect("docs/benchmarks.md is readable");
    let create = doc
        .lines()
        .find_map(|line| line.strip_prefix("kafluss sql -e \"$(kafluss-bench "))
        .and_then(|rest| rest.strip_suffix(")\""))
        .expect("the doc creates the table with kafluss-bench table-sql");
    let produce = doc
        .lines()
        .find_map(|line| line.strip_prefix("kafluss-bench produce "))
        .expect("the doc runs kafluss-bench produce");
    let mut produce_args = vec!["produce".to_owned()];
    produce_args.extend(words(produce));
    (words(create), produce_args)
}

/// Replaces the value that follows `option` in `args`.
fn set_option(args: &mut [String], option: &str, value: &str) {
    let at = args
        .iter()
        .position(|arg| arg == option)
        .unwrap_or_else(|| panic!("{option} in {args:?}"));
    args[at + 1] = value.to_owned();
}

fn option_value<'a>(args: &'a [String], option: &str) -> &'a str {
    let at = args
        .iter()
        .position(|arg| arg == option)
        .unwrap_or_else(|| panic!("{option} in {args:?}"));
    &args[at + 1]
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).expect("JSON results written");
    serde_json::from_str(&text).expect("results are JSON")
}

#[test]
fn the_documented_first_run_writes_rows_of_the_table_it_creates() {
    let (create_args, mut produce_args) = documented_first_run();
    assert_eq!(create_args[0], "table-sql");
    assert!(
        !produce_args.iter().any(|arg| arg == "--value"),
        "the example relies on the default value generator: {produce_args:?}"
    );
    let table = option_value(&create_args, "--table").to_owned();
    let topic = option_value(&produce_args, "--topic").to_owned();
    assert_eq!(
        table.strip_prefix("fluss."),
        Some(topic.as_str()),
        "the topic names the created table"
    );

    let server = KaflussServer::start(ServerConfig::plaintext()).expect("kafluss starts");
    let create_sql = bench(&create_args).stdout_text();
    server
        .sql(create_sql.trim())
        .expect("the printed CREATE TABLE runs");

    // The documented command, on this server's port and for 1 s instead of 10.
    set_option(&mut produce_args, "--bootstrap", &server.kafka_bootstrap());
    set_option(&mut produce_args, "--duration", "1");
    let (_plot_dir, plot) = scratch("bench.svg");
    set_option(&mut produce_args, "--plot", &plot.display().to_string());
    let (_json_dir, json_out) = scratch("bench.json");
    produce_args.extend(["--quiet".to_owned(), "--json-out".to_owned()]);
    produce_args.push(json_out.display().to_string());
    bench(&produce_args);

    let results = read_json(&json_out);
    let run = &results["runs"][0];
    assert_eq!(run["errors"], Value::Object(Default::default()), "{run}");
    let acked = run["records_acked"].as_u64().expect("records_acked");
    assert!(acked > 0, "{run}");
    let rows = server
        .scan_until(&table, acked as usize, SCAN_TIMEOUT)
        .expect("every acknowledged record is stored");
    assert_eq!(rows.len() as u64, acked, "no more rows than acknowledged records");
    // The default values are flat JSON objects filling the table's columns.
    for row in rows.iter().take(50) {
        let row = &row.row;
        assert!(row["id"].is_i64(), "{row}");
        assert!(
            row["name"].as_str().is_some_and(|name| name.starts_with("user-")),
            "{row}"
        );
        assert!(row["amount"].is_f64(), "{row}");
        assert!(row["active"].is_boolean(), "{row}");
        assert!(row["note"].is_string(), "{row}");
    }
    assert!(plot.is_file(), "the example's --plot is written");
}

/// The texts of the elements `<text class="CLASS" ...>TEXT</text>`, in document order.
fn texts_of_class(svg: &str, class: &str) -> Vec<String> {
    let opening = format!(r#"<text class="{class}""#);
    svg.match_indices(&opening)
        .map(|(at, _)| {
            let rest = &svg[at..];
            let start = rest.find('>').expect("the element closes its tag") + 1;
            let end = rest.find("</text>").expect("the text element ends");
            rest[start..end].to_owned()
        })
        .collect()
}

#[test]
fn the_plot_of_a_real_run_has_titled_axes_with_units() {
    let sink = sink::start("127.0.0.1:0", 1).expect("null sink starts");
    let address = sink.local_addr().to_string();
    let (_dir, plot) = scratch("run.svg");
    let args = words(&format!(
        "produce --bootstrap {address} --name first --vs {address} --vs-name second \
         --topic t --duration 1.5 --quiet --plot {}",
        plot.display()
    ));
    bench(&args);
    let svg = std::fs::read_to_string(&plot).expect("the plot is written");
    assert_eq!(
        texts_of_class(&svg, "axis-title"),
        [
            X_AXIS_TITLE,
            THROUGHPUT_AXIS_TITLE,
            X_AXIS_TITLE,
            LATENCY_AXIS_TITLE
        ]
    );
    assert_eq!(X_AXIS_TITLE, "time since start (s)");
    assert_eq!(THROUGHPUT_AXIS_TITLE, "throughput (records/s)");
    assert_eq!(LATENCY_AXIS_TITLE, "request latency (ms)");
    // Two runs of 1.5 s end to end: the same seconds under each panel, from 0 to about 3.
    let ticks: Vec<f64> = texts_of_class(&svg, "x-tick")
        .iter()
        .map(|tick| {
            tick.parse()
                .unwrap_or_else(|_| panic!("x tick {tick:?} is a number"))
        })
        .collect();
    let (top, bottom) = ticks.split_at(ticks.len() / 2);
    assert_eq!(top, bottom, "both panels share the time axis");
    assert_eq!(top.first(), Some(&0.0), "{top:?}");
    assert!(top.windows(2).all(|pair| pair[0] < pair[1]), "{top:?}");
    assert!(top.last().is_some_and(|last| *last >= 2.5), "{top:?}");
    assert!(!texts_of_class(&svg, "y-tick").is_empty());
    // A throughput line and three latency lines per run.
    assert_eq!(svg.matches("<polyline").count(), 8, "{svg}");
}
