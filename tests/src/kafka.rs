//! Apache Kafka itself, from Maven Central, for the tests: a real broker ([`KafkaBroker`]) as the
//! reference a test compares kafluss with, and Kafka's own tools ([`run_tool`], e.g.
//! `kafka-producer-perf-test`). Everything goes through `tests/kafka/kafka.sh`, the one script
//! that installs and runs Kafka (the bench's `kafka` peer uses it too); `./test.sh --setup-only`
//! installs it. Java is `KAFLUSS_JAVA` (the script reads it), else `java` on PATH.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::clients::clients_required;
use crate::process::{run_with_timeout, tail, Finished, ProcessError};
use crate::server::workspace_root;

/// Bound on `kafka.sh start` (the script waits at most 120 s for the broker itself).
const START_TIMEOUT: Duration = Duration::from_secs(180);
/// Bound on `kafka.sh stop` (SIGKILL after 30 s) and `kafka.sh topic`.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(90);

#[derive(Debug, thiserror::Error)]
pub enum KafkaError {
    #[error("Apache Kafka is not installed: {0} (run ./test.sh --setup-only)")]
    Missing(String),
    #[error("kafka.sh {what}: {source}")]
    Process { what: String, source: ProcessError },
    #[error("kafka.sh {what} exited with {status}: {output}")]
    Failed {
        what: String,
        status: String,
        output: String,
    },
    #[error("could not make a directory for the broker: {0}")]
    TempDir(std::io::Error),
}

/// `tests/kafka/kafka.sh`.
pub fn kafka_sh() -> PathBuf {
    workspace_root().join("tests").join("kafka").join("kafka.sh")
}

fn kafka_sh_run(args: &[&str], timeout: Duration) -> Result<Finished, KafkaError> {
    let what = args.first().copied().unwrap_or_default().to_owned();
    let done = run_with_timeout(Command::new(kafka_sh()).args(args), b"", timeout).map_err(|source| {
        KafkaError::Process {
            what: what.clone(),
            source,
        }
    })?;
    if !done.status.success() {
        return Err(KafkaError::Failed {
            what,
            status: done.status.to_string(),
            output: tail(&(done.stdout_text() + &done.stderr_text()), 3000),
        });
    }
    Ok(done)
}

/// Whether Kafka can run here, for a test that needs it: true when it can; when it cannot, a
/// failure if clients are required (`KAFLUSS_REQUIRE_CLIENTS`, as `./test.sh` sets), else false
/// after saying on stderr that the test did not run.
pub fn available() -> bool {
    match kafka_sh_run(&["check"], ADMIN_TIMEOUT) {
        Ok(_) => true,
        Err(error) => {
            let error = match error {
                KafkaError::Failed { output, .. } => KafkaError::Missing(output.trim().to_owned()),
                other => other,
            };
            if clients_required() {
                panic!("{error}");
            }
            eprintln!("not run: {error} (set KAFLUSS_REQUIRE_CLIENTS=1 to make this a failure)");
            false
        }
    }
}

/// `kafka.sh run CLASS ARGS...`: one of Kafka's tools, to completion, bounded by `timeout`. A
/// non-zero exit is an error carrying the output's end.
pub fn run_tool(class: &str, args: &[&str], timeout: Duration) -> Result<Finished, KafkaError> {
    let mut all = vec!["run", class];
    all.extend_from_slice(args);
    kafka_sh_run(&all, timeout)
}

/// A single-node Apache Kafka broker (KRaft) on free loopback ports, data in a temporary
/// directory; stopped (and the directory removed) when dropped.
pub struct KafkaBroker {
    dir: tempfile::TempDir,
    bootstrap: String,
}

impl KafkaBroker {
    /// `kafka.sh start`: returns once the broker has said it started.
    pub fn start() -> Result<Self, KafkaError> {
        let dir = tempfile::Builder::new()
            .prefix("kafluss-kafka-")
            .tempdir()
            .map_err(KafkaError::TempDir)?;
        let broker_dir = dir.path().join("broker");
        let done = kafka_sh_run(&["start", &broker_dir.to_string_lossy()], START_TIMEOUT)?;
        let text = done.stdout_text();
        let bootstrap = text
            .lines()
            .find_map(|line| line.strip_prefix("kafka ready: bootstrap="))
            .and_then(|rest| rest.split_whitespace().next())
            .map(str::to_owned)
            .ok_or_else(|| KafkaError::Failed {
                what: "start".into(),
                status: "no ready line".into(),
                output: tail(&text, 2000),
            })?;
        Ok(Self { dir, bootstrap })
    }

    /// `127.0.0.1:PORT` of its PLAINTEXT listener.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// Creates a topic (`kafka-topics --create`; the broker never auto-creates).
    pub fn create_topic(&self, name: &str, partitions: u32) -> Result<(), KafkaError> {
        kafka_sh_run(
            &["topic", &self.bootstrap, name, &partitions.to_string()],
            ADMIN_TIMEOUT,
        )
        .map(|_| ())
    }

    /// The end of the broker's own log, for assertion messages.
    pub fn log_tail(&self) -> String {
        let log =
            std::fs::read_to_string(self.dir.path().join("broker").join("server.log")).unwrap_or_default();
        tail(&log, 3000)
    }
}

impl Drop for KafkaBroker {
    fn drop(&mut self) {
        let broker_dir = self.dir.path().join("broker");
        let _ = kafka_sh_run(&["stop", &broker_dir.to_string_lossy()], ADMIN_TIMEOUT);
    }
}
