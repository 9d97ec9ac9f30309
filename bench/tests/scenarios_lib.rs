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

const NEED_DISK: &str = r#"
source "$LIB"
DURATION=10 ROUNDS=2
need_disk 1
echo "SMALL passed"
KAFKA_ADDR=127.0.0.1:1
need_disk $((1 << 50))
echo "HUGE passed"
"#;

#[test]
fn need_disk_stops_a_scenario_the_disk_cannot_hold() {
    let outside = tempfile::tempdir().expect("a directory outside the repository");
    let lib = workspace_root().join("bench").join("scenarios").join("lib.sh");
    let run = |extra: &[(&str, &str)]| {
        let mut command = Command::new("bash");
        command
            .args(["-c", NEED_DISK])
            .current_dir(outside.path())
            .env("LIB", &lib)
            .env("NO_BUILD", "1")
            .env("RESULTS", outside.path().join("results"))
            .env("TMPDIR", outside.path());
        for (key, value) in extra {
            command.env(key, value);
        }
        run_with_timeout(&mut command, b"", SCRIPT_TIMEOUT).expect("the script finishes")
    };

    // 1 byte/s fits; 2^50 bytes/s (1 PiB/s) for 10 s x 2 rounds x 2 writers does not.
    let refused = run(&[]);
    let (stdout, stderr) = (refused.stdout_text(), refused.stderr_text());
    assert!(!refused.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stdout.contains("SMALL passed") && !stdout.contains("HUGE passed"),
        "{stdout}"
    );
    assert!(
        stderr.contains(
            "2 endpoint(s) writing up to 1073741824 MiB/s for 10 s x 2 rounds may need 42949672960 MiB"
        ) && stderr.contains("DISK_CHECK=0 skips this check"),
        "the refusal names what it needs and the ways out:\n{stderr}"
    );

    // The overrides: a figure of the user's, or no check.
    for extra in [[("DISK_BYTES_PER_S", "1")], [("DISK_CHECK", "0")]] {
        let passed = run(&extra);
        let (stdout, stderr) = (passed.stdout_text(), passed.stderr_text());
        assert!(
            passed.status.success() && stdout.contains("HUGE passed"),
            "{extra:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
    }
}
