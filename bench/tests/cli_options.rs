//! The `kafluss-bench` binary refuses, before any run, the options it cannot honour (exit 1
//! naming the option), and reports a run without latency samples with no figures ("-" in the
//! text, null in the JSON), not zeros.

use std::process::Command;
use std::time::Duration;

use kafluss_bench::sink;
use kafluss_tests::process::{run_with_timeout, Finished};
use serde_json::Value;

const BENCH: &str = env!("CARGO_BIN_EXE_kafluss-bench");

fn bench(args: &[&str]) -> Finished {
    run_with_timeout(Command::new(BENCH).args(args), b"", Duration::from_secs(120))
        .expect("kafluss-bench runs to its end")
}

/// A Kafka address nothing listens on: a refusal must come before any connection (one that
/// did not would say `connection refused` instead).
fn nothing_listens() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

#[test]
fn options_it_cannot_honour_are_refused_before_any_run() {
    let address = nothing_listens();
    let missing_dir = tempfile::tempdir().unwrap().path().join("gone").join("r.json");
    let missing_dir = missing_dir.to_str().unwrap();
    let produce = |extra: &[&str]| {
        let mut args = vec!["produce", "--bootstrap", &address, "--topic", "t", "--quiet"];
        args.extend_from_slice(extra);
        bench(&args)
    };
    let cases: Vec<(Finished, &str)> = vec![
        (
            produce(&["--message-size", "50"]),
            "--message-size 50 is below the smallest json-flat value, 73 bytes: give at least 73",
        ),
        (
            produce(&["--value", "json-nested", "--message-size", "1"]),
            "--message-size 1 is below the smallest json-nested value",
        ),
        (
            produce(&["--duration", "2", "--warmup-s", "2"]),
            "--warmup-s 2 is not shorter than the run (--duration 2)",
        ),
        (
            produce(&["--warmup-s", "30"]),
            "--warmup-s 30 is not shorter than the run (--duration 10)",
        ),
        (
            produce(&["--warmup-s", "inf"]),
            "--warmup-s inf: expected a number, 0 or more",
        ),
        // Negative numbers written the usual way reach the check (clap took `-1` for an
        // option and exited 2 before).
        (
            produce(&["--duration", "-1"]),
            "--duration -1: expected a number, 0 or more",
        ),
        (
            produce(&["--warmup-s", "-1"]),
            "--warmup-s -1: expected a number, 0 or more",
        ),
        (
            produce(&["--rate", "1000", "--linger-ms", "-1"]),
            "--linger-ms -1: expected a number, 0 or more",
        ),
        (
            produce(&["--slow-ms", "-5"]),
            "--slow-ms -5: expected a number, 0 or more",
        ),
        (
            produce(&["--vs-name", "kafka"]),
            "--vs-name kafka names no endpoint: 1 --vs-name for 0 --vs",
        ),
        (
            produce(&["--vs", &address, "--vs-name", "b", "--vs-name", "c"]),
            "--vs-name c names no endpoint: 2 --vs-name for 1 --vs",
        ),
        (
            produce(&["--vs-server-pid", "1"]),
            "--vs-server-pid 1 belongs to no endpoint: 1 --vs-server-pid for 0 --vs",
        ),
        (
            // Above any pid_max (2^22 at most): no such process.
            produce(&["--server-pid", "2147483647"]),
            "--server-pid 2147483647: no such process",
        ),
        (produce(&["--json-out", missing_dir]), "the directory"),
        (produce(&["--plot", missing_dir]), "does not exist"),
        (
            bench(&["table-sql", "--table", "t", "--partitions", "0"]),
            "--partitions 0: a table has 1 to 1024 buckets",
        ),
        (
            bench(&["table-sql", "--table", "t", "--partitions", "1025"]),
            "--partitions 1025: a table has 1 to 1024 buckets",
        ),
        (
            bench(&["values", "--message-size", "10", "--count", "3"]),
            "--message-size 10 is below the smallest of 3 json-flat values",
        ),
    ];
    for (finished, message) in cases {
        let stderr = finished.stderr_text();
        assert_eq!(finished.status.code(), Some(1), "{message}: {stderr}");
        assert!(
            stderr.starts_with("kafluss-bench: invalid options: ") && stderr.contains(message),
            "{message}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert_eq!(finished.stdout_text(), "", "{message}");
    }
    // The bounds themselves are accepted.
    let sql = bench(&["table-sql", "--table", "t", "--partitions", "1024"]);
    assert!(sql.status.success(), "{}", sql.stderr_text());
    assert!(sql.stdout_text().contains("'bucket.num' = '1024'"));
    let values = bench(&["values", "--message-size", "71", "--count", "3"]);
    assert!(values.status.success(), "{}", values.stderr_text());
    assert!(values.stdout_text().lines().all(|line| line.len() == 71));
}

#[test]
fn a_run_without_latency_samples_reports_no_figures() {
    // acks=0: nothing is answered, so there is no latency to report.
    let sink = sink::start("127.0.0.1:0", 1).expect("null sink starts");
    let address = sink.local_addr().to_string();
    let dir = tempfile::tempdir().unwrap();
    let json_out = dir.path().join("r.json");
    let finished = bench(&[
        "produce",
        "--bootstrap",
        &address,
        "--name",
        "first",
        "--vs",
        &address,
        "--vs-name",
        "second",
        "--topic",
        "t",
        "--acks",
        "0",
        "--records",
        "2000",
        "--quiet",
        "--json-out",
        json_out.to_str().unwrap(),
    ]);
    let text = finished.stdout_text();
    assert!(finished.status.success(), "{text}{}", finished.stderr_text());
    let first = text.lines().find(|line| line.starts_with("first ")).unwrap();
    assert_eq!(
        first.split_whitespace().skip(4).take(6).collect::<Vec<_>>(),
        ["-"; 6],
        "p50 … max and rec p99: {text}"
    );
    assert!(
        text.contains("p50 - ms  p99 - ms  p99.9 - ms  p99.99 - ms  max - ms"),
        "{text}"
    );
    assert!(text.contains("p50 -  p99 -  cpu/record -"), "{text}");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&json_out).unwrap()).unwrap();
    let latency = &json["runs"][0]["request_latency"];
    assert_eq!(latency["count"], 0, "{latency}");
    assert!(
        latency["p50_us"].is_null() && latency["max_us"].is_null(),
        "{latency}"
    );
    assert!(
        json["comparison"][0]["request_p99"].is_null(),
        "{}",
        json["comparison"]
    );
    assert_eq!(json["runs"][0]["records_acked"], 2000);
}

/// The `--flags` of `kafluss-bench <command> --help`.
fn help_options(command: &str) -> Vec<String> {
    let help = bench(&[command, "--help"]).stdout_text();
    help.lines()
        .filter_map(|line| line.trim_start().strip_prefix("--"))
        .filter_map(|rest| rest.split([' ', ',']).next())
        .filter(|name| *name != "help")
        .map(|name| format!("--{name}"))
        .collect()
}

#[test]
fn the_documented_list_names_every_command_and_option() {
    let doc_path = kafluss_tests::server::workspace_root()
        .join("docs")
        .join("benchmarks.md");
    let doc = std::fs::read_to_string(doc_path).expect("docs/benchmarks.md is readable");
    let list = doc
        .split_once("Every command and option")
        .and_then(|(_, rest)| rest.split_once("```\n"))
        .and_then(|(_, rest)| rest.split_once("```"))
        .map(|(list, _)| list)
        .expect("docs/benchmarks.md lists every command and option in a code block");
    // `kafluss-bench <command>` starts each command's lines; the continuation lines are its.
    let mut commands: Vec<(String, String)> = Vec::new();
    for line in list.lines() {
        match line.strip_prefix("kafluss-bench ") {
            Some(rest) => {
                let (command, options) = rest.split_once(' ').unwrap_or((rest, ""));
                commands.push((command.to_owned(), options.to_owned()));
            }
            None => commands.last_mut().expect("a command first").1.push_str(line),
        }
    }
    let top = bench(&["--help"]).stdout_text();
    let listed: Vec<&str> = top
        .split_once("Commands:")
        .unwrap()
        .1
        .split_once("Options:")
        .unwrap()
        .0
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|command| *command != "help")
        .collect();
    let documented: Vec<&str> = commands.iter().map(|(command, _)| command.as_str()).collect();
    let mut sorted = documented.clone();
    sorted.sort_unstable();
    let mut expected = listed.clone();
    expected.sort_unstable();
    assert_eq!(sorted, expected, "the commands of kafluss-bench --help");
    for (command, options) in &commands {
        let words: Vec<&str> = options
            .split(|c: char| c.is_whitespace() || "[]|".contains(c))
            .collect();
        for option in help_options(command) {
            assert!(
                words.contains(&option.as_str()),
                "docs/benchmarks.md lists no {option} for {command}: {options}"
            );
        }
    }
}

/// What `kafluss-bench` prints on stdout into a stdout that cannot take it (`/dev/full`): exit 1
/// with a line naming stdout, not a panic of `print!` (exit 101).
#[test]
fn a_stdout_that_cannot_be_written_is_exit_1_not_a_panic() {
    for args in [
        &["table-sql", "--table", "fluss.t", "--value", "json-flat"][..],
        &[
            "values",
            "--value",
            "text",
            "--message-size",
            "100",
            "--count",
            "10",
        ],
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let output = Command::new(BENCH)
            .args(args)
            .stdout(full)
            .output()
            .expect("kafluss-bench runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains("writing"), "{args:?}: {stderr}");
        assert!(stderr.contains("stdout"), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
