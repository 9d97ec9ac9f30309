//! bench/scenarios/lib.sh as the scenarios use it, started from a directory outside the
//! repository: it starts the real kafluss and the references it can find (the null sink and
//! librdkafka's mock cluster, both shipped here; Apache Kafka, installed by
//! `tests/kafka/kafka.sh setup`; tansu named by a path that does not exist, so it must be left
//! out with a message), runs one tiny `compare` against all of them, writes the result files,
//! and on exit stops every process it started and removes its data directory.

use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use kafluss_tests::process::run_with_timeout;
use kafluss_tests::server::{kafluss_binary, workspace_root};
use serde_json::Value;

const BENCH: &str = env!("CARGO_BIN_EXE_kafluss-bench");
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(180);
const EXIT_TIMEOUT: Duration = Duration::from_secs(10);
const RECORDS: u64 = 200;

const SCRIPT: &str = r#"
source "$LIB"
start_kafluss
kafluss_sql "$("$BENCH" table-sql --table fluss.lib_check)"
start_peers 1 lib_check
compare lib-check --topic lib_check --records 200 --batch-records 50 --quiet
echo "ROWS $(kafluss_rows fluss.lib_check)"
echo "WORK $WORK"
echo "PIDS ${STARTED_PIDS[*]} ${KAFKA_PID:-}"
"#;

/// The value after `prefix ` on the line that starts with it.
fn line_value<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.lines()
        .find_map(|line| line.strip_prefix(prefix)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {prefix} line in:\n{text}"))
}

fn alive(pid: &str) -> bool {
    Path::new("/proc").join(pid).join("stat").exists()
}

#[test]
fn lib_sh_starts_the_references_it_ships_and_cleans_up() {
    let kafluss = kafluss_binary().expect("kafluss binary");
    // Apache Kafka is a peer when its jars are installed (a failure when clients are required).
    let with_kafka = kafluss_tests::kafka::available();
    let outside = tempfile::tempdir().expect("a directory outside the repository");
    let results = outside.path().join("results");
    let lib = workspace_root().join("bench").join("scenarios").join("lib.sh");
    let finished = run_with_timeout(
        Command::new("bash")
            .args(["-c", SCRIPT])
            .current_dir(outside.path())
            .env("LIB", &lib)
            .env("NO_BUILD", "1")
            .env("KAFLUSS", &kafluss)
            .env("BENCH", BENCH)
            .env("RESULTS", &results)
            .env("ROUNDS", "1")
            .env("PEERS", "sink mock tansu kafka")
            .env("TANSU", outside.path().join("no-tansu-here"))
            .env("TMPDIR", outside.path()),
        b"",
        SCRIPT_TIMEOUT,
    )
    .expect("the script finishes");
    let (stdout, stderr) = (finished.stdout_text(), finished.stderr_text());
    assert!(
        finished.status.success(),
        "{}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        finished.status
    );
    assert!(
        stderr.contains("tansu not found") && stderr.contains("set TANSU=/path/to/tansu; left out"),
        "a missing peer is named with a way to provide it:\n{stderr}"
    );

    let json: Value = serde_json::from_str(
        &std::fs::read_to_string(results.join("lib-check.json")).expect("lib-check.json written"),
    )
    .expect("results are JSON");
    let runs = json["runs"].as_array().expect("runs");
    let names: Vec<&str> = runs.iter().filter_map(|run| run["name"].as_str()).collect();
    let mut expected = vec!["kafluss", "sink", "rdkafka-mock"];
    if with_kafka {
        expected.push("kafka");
    }
    assert_eq!(names, expected, "{json}");
    for run in runs {
        assert_eq!(run["records_acked"].as_u64(), Some(RECORDS), "{run}");
    }
    for extension in ["txt", "svg", "cmd"] {
        let path = results.join(format!("lib-check.{extension}"));
        assert!(path.is_file(), "{} written", path.display());
    }
    assert_eq!(
        line_value(&stdout, "ROWS"),
        RECORDS.to_string(),
        "kafluss stored every record"
    );

    // The EXIT trap stopped what lib.sh started and removed kafluss's data.
    let work = line_value(&stdout, "WORK").to_owned();
    assert!(
        work.starts_with(&outside.path().display().to_string()),
        "{work} is under TMPDIR"
    );
    let pids: Vec<String> = line_value(&stdout, "PIDS")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    assert_eq!(
        pids.len(),
        3 + usize::from(with_kafka),
        "kafluss, sink, mock (and Kafka) were started: {pids:?}"
    );
    let started = Instant::now();
    while pids.iter().any(|pid| alive(pid)) && started.elapsed() < EXIT_TIMEOUT {
        thread::sleep(Duration::from_millis(50));
    }
    assert!(!pids.iter().any(|pid| alive(pid)), "still running: {pids:?}");
    assert!(!Path::new(&work).exists(), "{work} removed");
}
