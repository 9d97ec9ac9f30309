//! The real Kafka clients the suite drives, where to find them, and running a plan through one.
//!
//! Tools are found through the variables `./test.sh` exports (`KAFLUSS_PYTHON`, `KAFLUSS_NODE`,
//! `KAFLUSS_KCAT`, `KAFLUSS_WHEEL_LIBRDKAFKA_DIR`, `KAFLUSS_NODE_MODULES`, `KAFLUSS_JAVA`,
//! `KAFLUSS_JAVA_PRODUCERS`, `KAFLUSS_GO_PRODUCER`), else in their usual places in the checkout
//! (`.venv`, `tests/clients/node_modules`, `tests/clients/java/target`, `tests/clients/go/bin`)
//! and on PATH. A missing tool
//! is an error; the tests turn it into a skip only when `KAFLUSS_REQUIRE_CLIENTS` is unset.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::process::{run_with_timeout, tail, ProcessError};
use crate::server::workspace_root;
use crate::tables::{Capabilities, WireRecord};

/// Bound on one driver run (a whole plan of cases); each case inside is bounded too.
pub const PLAN_TIMEOUT: Duration = Duration::from_secs(600);

/// The clients of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Client {
    /// Debian's kcat with Debian's librdkafka (2.0.2 on bookworm).
    KcatDebian,
    /// The same kcat loading the librdkafka shipped in the confluent-kafka wheel.
    KcatWheel,
    ConfluentKafka,
    KafkaPython,
    Aiokafka,
    Kafkajs,
    /// The Java client, kafka-clients 3.9 (`tests/clients/java`, built with `-P kafka-3.9`).
    Java39,
    /// The Java client, the newest kafka-clients 4.x (built with `-P kafka-4`).
    Java4,
    /// franz-go (`tests/clients/go`, `-client franz-go`).
    FranzGo,
    /// sarama (`tests/clients/go`, `-client sarama`).
    Sarama,
}

impl Client {
    pub const ALL: [Client; 10] = [
        Client::KcatDebian,
        Client::KcatWheel,
        Client::ConfluentKafka,
        Client::KafkaPython,
        Client::Aiokafka,
        Client::Kafkajs,
        Client::Java39,
        Client::Java4,
        Client::FranzGo,
        Client::Sarama,
    ];

    /// Stable identifier: results file name and the database the client's tables live in.
    pub fn slug(self) -> &'static str {
        match self {
            Client::KcatDebian => "kcat_debian",
            Client::KcatWheel => "kcat_wheel",
            Client::ConfluentKafka => "confluent_kafka",
            Client::KafkaPython => "kafka_python",
            Client::Aiokafka => "aiokafka",
            Client::Kafkajs => "kafkajs",
            Client::Java39 => "java_3_9",
            Client::Java4 => "java_4",
            Client::FranzGo => "franz_go",
            Client::Sarama => "sarama",
        }
    }

    /// What each client can express in a record.
    pub fn capabilities(self) -> Capabilities {
        match self {
            Client::KcatDebian | Client::KcatWheel => Capabilities {
                timestamps: false,
                null_header_values: false,
                binary_header_values: false,
                delimited_stdin: true,
            },
            Client::ConfluentKafka | Client::Java39 | Client::Java4 | Client::FranzGo | Client::Sarama => {
                Capabilities {
                    timestamps: true,
                    null_header_values: true,
                    binary_header_values: true,
                    delimited_stdin: false,
                }
            }
            Client::KafkaPython | Client::Aiokafka | Client::Kafkajs => Capabilities {
                timestamps: true,
                null_header_values: false,
                binary_header_values: true,
                delimited_stdin: false,
            },
        }
    }

    /// Compression codecs the client offers (all five, given the codec packages test.sh installs).
    pub fn codecs(self) -> &'static [&'static str] {
        &["gzip", "snappy", "lz4", "zstd"]
    }
}

/// How the suite configures a client's producer: the two variants of every client in the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Settings {
    /// Idempotence turned off explicitly (`enable.idempotence=false` or the client's equivalent).
    IdempotenceOff,
    /// Idempotent: the client's default settings where idempotence is its default (Java
    /// kafka-clients, kafka-python, franz-go: no idempotence line at all), else asked for
    /// (librdkafka `enable.idempotence=true`, aiokafka `enable_idempotence=True`, kafkajs
    /// `idempotent: true`, sarama `Producer.Idempotent = true`). Every produce case uses acks=-1,
    /// which idempotence requires.
    Idempotent,
}

impl Settings {
    pub const ALL: [Settings; 2] = [Settings::IdempotenceOff, Settings::Idempotent];

    /// A client's identifier under these settings: results file name and database name.
    pub fn slug(self, client: Client) -> String {
        match self {
            Settings::IdempotenceOff => client.slug().to_owned(),
            Settings::Idempotent => format!("{}_idempotent", client.slug()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{client:?} is not available: {reason} (run ./test.sh --setup-only)")]
    Missing { client: Client, reason: String },
    #[error("{client:?} driver: {source}")]
    Process { client: Client, source: ProcessError },
    #[error("{client:?} driver exited with {status}; stderr tail:\n{stderr}")]
    DriverFailed {
        client: Client,
        status: String,
        stderr: String,
    },
    #[error("{client:?} driver printed a line that is not a case outcome ({reason}): {line}")]
    BadOutput {
        client: Client,
        reason: String,
        line: String,
    },
    #[error("could not write the plan file: {0}")]
    PlanFile(std::io::Error),
}

/// SASL/PLAIN credentials a plan uses.
#[derive(Debug, Clone, Serialize)]
pub struct SaslUser {
    pub username: String,
    pub password: String,
}

/// One case for a driver script (see `tests/clients/produce.py` for the format).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CaseSpec {
    Metadata {
        name: String,
        topic: String,
        partitions: u32,
    },
    Produce {
        name: String,
        topic: String,
        compression: String,
        acks: i32,
        records: Vec<WireRecord>,
        expect_error: bool,
    },
}

/// What a driver run gets: where to connect, how to authenticate, whether the producer is
/// idempotent ([`Settings`]), which cases.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub bootstrap: String,
    pub sasl: Option<SaslUser>,
    pub idempotent: bool,
    pub cases: Vec<CaseSpec>,
}

/// One line of driver output.
#[derive(Debug, Clone, Deserialize)]
pub struct CaseOutcome {
    pub case: String,
    pub ok: bool,
    pub detail: String,
    /// Offsets the client reported (null where it learns none, as with acks=0).
    #[serde(default)]
    pub offsets: Vec<Option<i64>>,
    pub started_ms: i64,
    pub finished_ms: i64,
}

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// Whether a missing client must fail the suite (set by `./test.sh`).
pub fn clients_required() -> bool {
    std::env::var_os("KAFLUSS_REQUIRE_CLIENTS").is_some_and(|v| !v.is_empty() && v != "0")
}

/// Whether `client` can run here, for a test that needs it: true when it can; when it cannot,
/// a failure if clients are required (`KAFLUSS_REQUIRE_CLIENTS`, as `./test.sh` sets), else
/// false after saying on stderr that the test did not run.
pub fn available(client: Client) -> bool {
    match check_available(client) {
        Ok(_) => true,
        Err(error) if !clients_required() => {
            eprintln!("not run: {error} (set KAFLUSS_REQUIRE_CLIENTS=1 to make this a failure)");
            false
        }
        Err(error) => panic!("{error}"),
    }
}

fn clients_dir() -> PathBuf {
    workspace_root().join("tests").join("clients")
}

fn python() -> PathBuf {
    env_path("KAFLUSS_PYTHON").unwrap_or_else(|| workspace_root().join(".venv").join("bin").join("python"))
}

/// `program`'s path in a directory of PATH, if it is there.
pub fn on_path(program: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

fn kcat() -> Option<PathBuf> {
    env_path("KAFLUSS_KCAT").or_else(|| on_path("kcat"))
}

fn wheel_librdkafka_dir() -> PathBuf {
    env_path("KAFLUSS_WHEEL_LIBRDKAFKA_DIR")
        .unwrap_or_else(|| workspace_root().join(".venv").join("librdkafka-wheel"))
}

fn node() -> Option<PathBuf> {
    env_path("KAFLUSS_NODE").or_else(|| on_path("node"))
}

fn node_modules() -> PathBuf {
    env_path("KAFLUSS_NODE_MODULES").unwrap_or_else(|| clients_dir().join("node_modules"))
}

fn java() -> Option<PathBuf> {
    env_path("KAFLUSS_JAVA").or_else(|| on_path("java"))
}

/// The Java producer's jar for `line` (`kafka-3.9`, `kafka-4`: the Maven profile it was built with).
fn java_producer_jar(line: &str) -> PathBuf {
    env_path("KAFLUSS_JAVA_PRODUCERS")
        .unwrap_or_else(|| clients_dir().join("java").join("target"))
        .join(line)
        .join("kafluss-java-producer.jar")
}

fn go_producer() -> PathBuf {
    env_path("KAFLUSS_GO_PRODUCER")
        .unwrap_or_else(|| clients_dir().join("go").join("bin").join("kafluss-go-producer"))
}

/// `java -jar <the producer for client's line>` (no plan yet), after checking both exist.
fn java_command(client: Client) -> Result<Command, ClientError> {
    let missing = |reason: String| ClientError::Missing { client, reason };
    let java = java().ok_or_else(|| missing("no java on PATH or in KAFLUSS_JAVA".into()))?;
    let line = if client == Client::Java39 {
        "kafka-3.9"
    } else {
        "kafka-4"
    };
    let jar = java_producer_jar(line);
    if !jar.is_file() {
        return Err(missing(format!("no Java producer at {}", jar.display())));
    }
    let mut command = Command::new(java);
    command.arg("-jar").arg(jar);
    Ok(command)
}

/// The Go producer with `-client` set for `client` (no plan yet), after checking it exists.
fn go_command(client: Client) -> Result<Command, ClientError> {
    let binary = go_producer();
    if !binary.is_file() {
        return Err(ClientError::Missing {
            client,
            reason: format!("no Go producer at {}", binary.display()),
        });
    }
    let mut command = Command::new(binary);
    command.arg("-client").arg(if client == Client::FranzGo {
        "franz-go"
    } else {
        "sarama"
    });
    Ok(command)
}

/// What a built driver says with `--version` (`-version` for Go): the client's own version.
fn driver_version(client: Client, mut command: Command, flag: &str) -> Result<String, ClientError> {
    let done = run_with_timeout(command.arg(flag), b"", Duration::from_secs(60))
        .map_err(|source| ClientError::Process { client, source })?;
    if !done.status.success() {
        return Err(ClientError::Missing {
            client,
            reason: format!(
                "the driver's {flag} exited with {}: {}",
                done.status,
                tail(&done.stderr_text(), 300)
            ),
        });
    }
    Ok(done.stdout_text().trim().to_owned())
}

fn python_module_check(client: Client, module: &str) -> Result<(), ClientError> {
    let interpreter = python();
    if !interpreter.is_file() {
        return Err(ClientError::Missing {
            client,
            reason: format!("no Python at {}", interpreter.display()),
        });
    }
    let done = run_with_timeout(
        Command::new(&interpreter).args(["-c", &format!("import {module}")]),
        b"",
        Duration::from_secs(60),
    )
    .map_err(|source| ClientError::Process { client, source })?;
    if done.status.success() {
        Ok(())
    } else {
        Err(ClientError::Missing {
            client,
            reason: format!(
                "{} cannot import {module}: {}",
                interpreter.display(),
                tail(&done.stderr_text(), 300)
            ),
        })
    }
}

/// The command that runs `client`'s driver on a plan file, after checking the tools exist.
fn driver_command(client: Client, plan_file: &Path) -> Result<Command, ClientError> {
    let script = clients_dir().join("produce.py");
    let missing = |reason: String| ClientError::Missing { client, reason };
    let command = match client {
        Client::KcatDebian | Client::KcatWheel => {
            let kcat = kcat().ok_or_else(|| missing("no kcat on PATH or in KAFLUSS_KCAT".into()))?;
            let mut command = Command::new(python());
            command
                .arg(&script)
                .arg("kcat")
                .arg(plan_file)
                .env("KAFLUSS_KCAT", kcat);
            if client == Client::KcatWheel {
                let dir = wheel_librdkafka_dir();
                if !dir.join("librdkafka.so.1").exists() {
                    return Err(missing(format!("no librdkafka.so.1 in {}", dir.display())));
                }
                command.env("LD_LIBRARY_PATH", dir);
            } else {
                command.env_remove("LD_LIBRARY_PATH");
            }
            command
        }
        Client::ConfluentKafka | Client::KafkaPython | Client::Aiokafka => {
            let name = match client {
                Client::ConfluentKafka => "confluent-kafka",
                Client::KafkaPython => "kafka-python",
                _ => "aiokafka",
            };
            let mut command = Command::new(python());
            command.arg(&script).arg(name).arg(plan_file);
            command
        }
        Client::Kafkajs => {
            let node = node().ok_or_else(|| missing("no node on PATH or in KAFLUSS_NODE".into()))?;
            let modules = node_modules();
            if !modules.join("kafkajs").is_dir() {
                return Err(missing(format!("no kafkajs in {}", modules.display())));
            }
            let mut command = Command::new(node);
            command
                .arg(clients_dir().join("produce.mjs"))
                .arg(plan_file)
                .env("NODE_PATH", modules);
            command
        }
        Client::Java39 | Client::Java4 => {
            let mut command = java_command(client)?;
            command.arg(plan_file);
            command
        }
        Client::FranzGo | Client::Sarama => {
            let mut command = go_command(client)?;
            command.arg(plan_file);
            command
        }
    };
    Ok(command)
}

/// The exactly-once tests' producer for `client` (the Java client, 3.9 or 4, librdkafka through
/// confluent-kafka, kafka-python and franz-go; `None` for the others): idempotent, acks=all,
/// retrying, `count` records with the ids 0..count-1 as values to partition id % `partitions`,
/// paced; it prints one JSON line, `{"acked": [...], "failed": N, "errors": [...]}`.
pub fn exactly_once_command(
    client: Client,
    bootstrap: &str,
    topic: &str,
    partitions: u32,
    count: u32,
) -> Option<Result<Command, ClientError>> {
    let args = [
        bootstrap.to_owned(),
        topic.to_owned(),
        partitions.to_string(),
        count.to_string(),
    ];
    match client {
        Client::Java39 | Client::Java4 => Some(java_command(client).map(|mut command| {
            command.arg("--exactly-once").args(args);
            command
        })),
        Client::ConfluentKafka | Client::KafkaPython => {
            let mode = if client == Client::ConfluentKafka {
                "exactly-once"
            } else {
                "exactly-once-kafka-python"
            };
            let mut command = Command::new(python());
            command.arg(clients_dir().join("produce.py")).arg(mode).args(args);
            Some(Ok(command))
        }
        Client::FranzGo => Some(go_command(client).map(|mut command| {
            command.arg("-exactly-once").args(args);
            command
        })),
        _ => None,
    }
}

/// Checks that the client can run here; `Ok` carries its version text for the report.
pub fn check_available(client: Client) -> Result<String, ClientError> {
    match client {
        Client::KcatDebian | Client::KcatWheel => {
            // The driver for kcat is Python too.
            python_module_check(client, "json")?;
            let kcat = kcat().ok_or_else(|| ClientError::Missing {
                client,
                reason: "no kcat on PATH or in KAFLUSS_KCAT".into(),
            })?;
            let mut command = Command::new(kcat);
            command.arg("-V");
            if client == Client::KcatWheel {
                command.env("LD_LIBRARY_PATH", wheel_librdkafka_dir());
            } else {
                command.env_remove("LD_LIBRARY_PATH");
            }
            let done = run_with_timeout(&mut command, b"", Duration::from_secs(30))
                .map_err(|source| ClientError::Process { client, source })?;
            let text = done.stdout_text() + &done.stderr_text();
            let librdkafka = text
                .split_whitespace()
                .skip_while(|word| *word != "librdkafka")
                .nth(1)
                .map(str::to_owned)
                .ok_or_else(|| ClientError::Missing {
                    client,
                    reason: format!("kcat -V does not name its librdkafka: {}", tail(&text, 300)),
                })?;
            Ok(format!("kcat, librdkafka {librdkafka}"))
        }
        Client::ConfluentKafka => {
            python_module_check(client, "confluent_kafka")?;
            python_version(client, "import confluent_kafka as c; print(f'confluent-kafka {c.__version__}, librdkafka {c.libversion()[0]}')")
        }
        Client::KafkaPython => {
            python_module_check(client, "kafka")?;
            python_version(client, "import kafka; print(f'kafka-python {kafka.__version__}')")
        }
        Client::Aiokafka => {
            python_module_check(client, "aiokafka")?;
            python_version(
                client,
                "import aiokafka; print(f'aiokafka {aiokafka.__version__}')",
            )
        }
        Client::Kafkajs => {
            let node = node().ok_or_else(|| ClientError::Missing {
                client,
                reason: "no node on PATH or in KAFLUSS_NODE".into(),
            })?;
            let package = node_modules().join("kafkajs").join("package.json");
            let text = std::fs::read_to_string(&package).map_err(|error| ClientError::Missing {
                client,
                reason: format!("{}: {error}", package.display()),
            })?;
            let version = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v["version"].as_str().map(str::to_owned))
                .unwrap_or_else(|| "unknown".into());
            let done = run_with_timeout(Command::new(node).arg("--version"), b"", Duration::from_secs(30))
                .map_err(|source| ClientError::Process { client, source })?;
            Ok(format!("kafkajs {version}, node {}", done.stdout_text().trim()))
        }
        Client::Java39 | Client::Java4 => driver_version(client, java_command(client)?, "--version"),
        Client::FranzGo | Client::Sarama => driver_version(client, go_command(client)?, "-version"),
    }
}

fn python_version(client: Client, code: &str) -> Result<String, ClientError> {
    let done = run_with_timeout(
        Command::new(python()).args(["-c", code]),
        b"",
        Duration::from_secs(60),
    )
    .map_err(|source| ClientError::Process { client, source })?;
    Ok(done.stdout_text().trim().to_owned())
}

/// Runs `plan` through `client`'s driver; one outcome per case, in plan order.
pub fn run_plan(client: Client, plan: &Plan) -> Result<Vec<CaseOutcome>, ClientError> {
    let dir = tempfile::tempdir().map_err(ClientError::PlanFile)?;
    let plan_file = dir.path().join("plan.json");
    let text = serde_json::to_vec(plan).map_err(|error| ClientError::PlanFile(error.into()))?;
    std::fs::write(&plan_file, text).map_err(ClientError::PlanFile)?;
    let mut command = driver_command(client, &plan_file)?;
    let done = run_with_timeout(&mut command, b"", PLAN_TIMEOUT)
        .map_err(|source| ClientError::Process { client, source })?;
    let stdout = done.stdout_text();
    let outcomes = stdout
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            serde_json::from_str::<CaseOutcome>(line).map_err(|error| ClientError::BadOutput {
                client,
                reason: error.to_string(),
                line: tail(line, 500),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if !done.status.success() || outcomes.len() != plan.cases.len() {
        return Err(ClientError::DriverFailed {
            client,
            status: format!(
                "{} after {} of {} cases",
                done.status,
                outcomes.len(),
                plan.cases.len()
            ),
            stderr: tail(&done.stderr_text(), 3000),
        });
    }
    Ok(outcomes)
}
