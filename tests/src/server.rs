//! Starting the real `kafluss` binary on free loopback ports, talking to its admin API, stopping it.
//!
//! The server is started with `-D bind.listeners=FLUSS://127.0.0.1:0,KAFKA://127.0.0.1:0` and a
//! temporary `data.dir`; the ports it really bound are read from the line it prints once ready
//! (`kafluss ready: FLUSS=127.0.0.1:41234 KAFKA=127.0.0.1:41235`; see [`parse_ready_line`] for
//! the spellings accepted), then `/healthz` must answer 200. Dropping the handle sends SIGTERM and
//! kills the process if it has not exited within [`STOP_GRACE`].
//!
//! The one launcher of the end-to-end tests: this suite and the broker's integration tests
//! (`broker/tests/broker_support.rs`, a thin layer over [`KaflussServer`]) start servers here.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;

use crate::http::{self, BasicAuth, HttpError, HttpResponse};
use crate::process::{self, tail};

/// How long a server may take from spawn to its ready line and a healthy `/healthz`.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a server may take to exit after SIGTERM before it is killed.
pub const STOP_GRACE: Duration = Duration::from_secs(10);
/// Bound on one admin HTTP request.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(30);
/// How many of the server's most recent output lines are kept for error messages.
const LOG_LINES_KEPT: usize = 400;
/// Building the binary when the suite runs on its own (no `KAFLUSS_BIN`).
const BUILD_TIMEOUT: Duration = Duration::from_secs(1800);

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("building kafluss failed: {0}")]
    Build(String),
    #[error("running the kafluss client: {0}")]
    Cli(String),
    #[error("kafluss binary {0} does not exist (set KAFLUSS_BIN or build kafluss-broker)")]
    BinaryMissing(PathBuf),
    #[error("could not start {binary}: {source}")]
    Spawn { binary: PathBuf, source: std::io::Error },
    #[error("could not make a temporary data dir: {0}")]
    TempDir(std::io::Error),
    #[error("could not create the server's stderr log {path}: {source}")]
    StderrLog { path: PathBuf, source: std::io::Error },
    #[error(
        "kafluss did not become ready within {timeout:?} (no ready line naming the FLUSS and KAFKA \
         ports, or /healthz not 200); its output:\n{log_tail}"
    )]
    NotReady { timeout: Duration, log_tail: String },
    #[error("kafluss exited ({status}) before it was ready; its output:\n{log_tail}")]
    ExitedEarly { status: ExitStatus, log_tail: String },
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error("{what} answered HTTP {status}: {body}")]
    Rejected { what: String, status: u16, body: String },
    #[error("{what}: answer is not the JSON expected ({reason}): {body}")]
    BadAnswer {
        what: String,
        reason: String,
        body: String,
    },
    #[error("{table}: {wanted} rows expected, {seen} scanned after waiting {waited:?}")]
    RowsMissing {
        table: String,
        wanted: usize,
        seen: usize,
        waited: Duration,
    },
}

/// How to start a server: `-D key=value` settings on top of loopback listeners and a temp dir.
#[derive(Debug, Clone, Default)]
pub struct ServerConfig {
    /// `-D` arguments, `key=value`, in order.
    defines: Vec<String>,
    http_auth: Option<BasicAuth>,
    stderr_log: bool,
    binary: Option<PathBuf>,
    /// Environment variables set for the server process.
    env: Vec<(String, String)>,
}

impl ServerConfig {
    /// Plaintext on both listeners, everything else the embedded default.
    pub fn plaintext() -> Self {
        Self::default()
    }

    /// The seed's SASL/PLAIN set-up: the Kafka listener requires PLAIN with these credentials.
    pub fn sasl_plain(credentials: &[(&str, &str)]) -> Self {
        let credentials = credentials
            .iter()
            .map(|(user, password)| format!("{user}:{password}"))
            .collect::<Vec<_>>()
            .join(",");
        Self::default()
            .with("security.protocol.map", "FLUSS:plaintext,KAFKA:sasl")
            .with("security.sasl.enabled.mechanisms", "PLAIN")
            .with("security.sasl.plain.credentials", &credentials)
    }

    /// One more `-D key=value`.
    pub fn with(self, key: &str, value: &str) -> Self {
        self.define(&format!("{key}={value}"))
    }

    /// One more `-D` argument as written (`key=value`).
    pub fn define(mut self, entry: &str) -> Self {
        self.defines.push(entry.to_owned());
        self
    }

    /// The server's stderr goes straight to a file, all of it, readable with
    /// [`KaflussServer::logs`] the moment the server has written it (no relay thread between);
    /// [`KaflussServer::log_tail`] then shows stdout's lines, then the end of that file.
    pub fn with_stderr_log(mut self) -> Self {
        self.stderr_log = true;
        self
    }

    /// One more environment variable for the server process.
    pub fn with_env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Runs this `kafluss` binary instead of [`kafluss_binary`]'s.
    pub fn with_binary(mut self, binary: &Path) -> Self {
        self.binary = Some(binary.to_path_buf());
        self
    }

    /// Credentials for the admin API when the Fluss listener itself is mapped to `sasl`.
    pub fn with_http_auth(mut self, username: &str, password: &str) -> Self {
        self.http_auth = Some(BasicAuth::new(username, password));
        self
    }
}

/// One row of a scan, as `GET /v1/tables/{db}.{table}/scan?format=jsonl` prints it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct ScanRow {
    pub bucket: u32,
    pub offset: i64,
    pub row: Value,
}

/// A running `kafluss serve`.
pub struct KaflussServer {
    child: Child,
    data_dir: PathBuf,
    // Removes the data dir when dropped (after the server stopped); moved on restart.
    temp: Option<tempfile::TempDir>,
    config: ServerConfig,
    fluss: SocketAddr,
    kafka: SocketAddr,
    http_auth: Option<BasicAuth>,
    log: Arc<Mutex<VecDeque<String>>>,
    /// Where stderr goes with [`ServerConfig::with_stderr_log`], in a directory of its own.
    stderr_log: Option<(PathBuf, tempfile::TempDir)>,
}

impl KaflussServer {
    /// Starts a server and waits (bounded) until it serves.
    pub fn start(config: ServerConfig) -> Result<Self, ServerError> {
        let temp = tempfile::Builder::new()
            .prefix("kafluss-suite-")
            .tempdir()
            .map_err(ServerError::TempDir)?;
        Self::spawn(config, temp)
    }

    /// Starts a server on an existing data dir (a restart after a crash), which the caller owns.
    pub fn start_in(data_dir: &Path, config: ServerConfig) -> Result<Self, ServerError> {
        let command = Self::serve_command(&config, data_dir)?;
        Self::launch(command, config, data_dir.to_path_buf(), None)
    }

    /// Stops this server (SIGTERM) and starts a new one on the same data dir and settings; the
    /// listeners get new ports.
    pub fn restart(mut self) -> Result<Self, ServerError> {
        self.terminate();
        let temp = self.temp.take().expect("a running server owns its data dir");
        Self::spawn(self.config.clone(), temp)
    }

    /// Starts `kafluss ARGS` exactly as given (no listener or data-dir overrides) in
    /// `work_dir`, as a user would type it there; `data_dir` is where that command keeps its
    /// data (for error messages). The caller owns `work_dir`.
    pub fn start_command(work_dir: &Path, args: &[String], data_dir: PathBuf) -> Result<Self, ServerError> {
        let binary = kafluss_binary()?;
        let mut command = Command::new(&binary);
        command.current_dir(work_dir).args(args);
        Self::launch(command, ServerConfig::default(), data_dir, None)
    }

    fn spawn(config: ServerConfig, temp: tempfile::TempDir) -> Result<Self, ServerError> {
        let data_dir = temp.path().join("data");
        let command = Self::serve_command(&config, &data_dir)?;
        Self::launch(command, config, data_dir, Some(temp))
    }

    /// `kafluss serve` on loopback port 0 with `data_dir`, then the config's `-D` arguments.
    fn serve_command(config: &ServerConfig, data_dir: &Path) -> Result<Command, ServerError> {
        let binary = match &config.binary {
            Some(binary) => binary.clone(),
            None => kafluss_binary()?,
        };
        let mut command = Command::new(binary);
        command
            .arg("serve")
            .arg("-D")
            .arg("bind.listeners=FLUSS://127.0.0.1:0,KAFKA://127.0.0.1:0")
            .arg("-D")
            .arg(format!("data.dir={}", data_dir.display()));
        for entry in &config.defines {
            command.arg("-D").arg(entry);
        }
        Ok(command)
    }

    fn launch(
        mut command: Command,
        config: ServerConfig,
        data_dir: PathBuf,
        temp: Option<tempfile::TempDir>,
    ) -> Result<Self, ServerError> {
        let binary = PathBuf::from(command.get_program());
        // The server prints plain log lines whenever stderr is not a terminal (a pipe, a file).
        command
            .env(
                "RUST_LOG",
                std::env::var("KAFLUSS_SUITE_RUST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .envs(config.env.iter().map(|(key, value)| (key, value)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        let stderr_log = if config.stderr_log {
            let dir = tempfile::Builder::new()
                .prefix("kafluss-stderr-")
                .tempdir()
                .map_err(ServerError::TempDir)?;
            let path = dir.path().join("stderr.log");
            let file = File::create(&path).map_err(|source| ServerError::StderrLog {
                path: path.clone(),
                source,
            })?;
            command.stderr(file);
            Some((path, dir))
        } else {
            command.stderr(Stdio::piped());
            None
        };
        let mut child = command.spawn().map_err(|source| ServerError::Spawn {
            binary: binary.clone(),
            source,
        })?;

        let log = Arc::new(Mutex::new(VecDeque::new()));
        let (ready_tx, ready_rx) = mpsc::channel();
        forward_lines(child.stdout.take(), Arc::clone(&log), ready_tx.clone());
        forward_lines(child.stderr.take(), Arc::clone(&log), ready_tx);

        let mut server = Self {
            child,
            data_dir,
            temp,
            fluss: SocketAddr::from(([127, 0, 0, 1], 0)),
            kafka: SocketAddr::from(([127, 0, 0, 1], 0)),
            http_auth: config.http_auth.clone(),
            config,
            log,
            stderr_log,
        };
        server.wait_until_ready(&ready_rx)?;
        Ok(server)
    }

    fn wait_until_ready(
        &mut self,
        ready: &mpsc::Receiver<(SocketAddr, SocketAddr)>,
    ) -> Result<(), ServerError> {
        let deadline = Instant::now() + START_TIMEOUT;
        let (fluss, kafka) = loop {
            if let Some(status) = self.child.try_wait().ok().flatten() {
                // Let the forwarders catch the last lines before reporting them.
                thread::sleep(Duration::from_millis(100));
                return Err(ServerError::ExitedEarly {
                    status,
                    log_tail: self.log_tail(),
                });
            }
            match ready.recv_timeout(Duration::from_millis(100)) {
                Ok(addresses) => break addresses,
                Err(_) if Instant::now() >= deadline => {
                    return Err(ServerError::NotReady {
                        timeout: START_TIMEOUT,
                        log_tail: self.log_tail(),
                    })
                }
                Err(_) => {}
            }
        };
        self.fluss = fluss;
        self.kafka = kafka;
        while Instant::now() < deadline {
            if let Ok(response) = self.get("/healthz") {
                if response.status == 200 {
                    return Ok(());
                }
            }
            if let Some(status) = self.child.try_wait().ok().flatten() {
                return Err(ServerError::ExitedEarly {
                    status,
                    log_tail: self.log_tail(),
                });
            }
            thread::sleep(Duration::from_millis(100));
        }
        Err(ServerError::NotReady {
            timeout: START_TIMEOUT,
            log_tail: self.log_tail(),
        })
    }

    /// The Kafka listener, as a `bootstrap.servers` value.
    pub fn kafka_bootstrap(&self) -> String {
        self.kafka.to_string()
    }

    /// The Kafka listener as bound (what the ready line said).
    pub fn kafka_addr(&self) -> SocketAddr {
        self.kafka
    }

    /// The Fluss listener (admin HTTP and `kafluss sql --server`).
    pub fn fluss_addr(&self) -> SocketAddr {
        self.fluss
    }

    /// `data.dir` of this server.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The most recent lines the server printed (stdout and stderr interleaved; with
    /// [`ServerConfig::with_stderr_log`], stdout's lines and then the end of stderr).
    pub fn log_tail(&self) -> String {
        let log = self.log.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut lines: Vec<&str> = log.iter().map(String::as_str).collect();
        let stderr = self.stderr_log.as_ref().map(|_| self.logs());
        lines.extend(stderr.as_deref());
        tail(&lines.join("\n"), 8000)
    }

    /// Everything the server wrote to stderr so far, with [`ServerConfig::with_stderr_log`];
    /// else the lines kept for [`KaflussServer::log_tail`].
    pub fn logs(&self) -> String {
        match &self.stderr_log {
            Some((path, _)) => std::fs::read_to_string(path).unwrap_or_default(),
            None => {
                let log = self.log.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                log.iter().map(String::as_str).collect::<Vec<_>>().join("\n")
            }
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process has not exited yet.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGKILL, as a crash, and wait for the process.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn get(&self, path: &str) -> Result<HttpResponse, HttpError> {
        http::request(
            self.fluss,
            "GET",
            path,
            b"",
            self.http_auth.as_ref(),
            HTTP_TIMEOUT,
        )
    }

    /// Runs `;`-separated SQL through `POST /v1/sql`; any status but 200 is an error.
    pub fn sql(&self, sql: &str) -> Result<Value, ServerError> {
        json_answer(self.sql_response(sql)?, format!("SQL {sql:?}"))
    }

    /// Runs SQL and returns the raw answer, for tests that expect a rejection.
    pub fn sql_response(&self, sql: &str) -> Result<HttpResponse, ServerError> {
        Ok(http::request(
            self.fluss,
            "POST",
            "/v1/sql",
            sql.as_bytes(),
            self.http_auth.as_ref(),
            HTTP_TIMEOUT,
        )?)
    }

    /// `GET /v1/tables/{db}.{table}`.
    pub fn table_info(&self, table: &str) -> Result<Value, ServerError> {
        let response = self.get(&format!("/v1/tables/{table}"))?;
        json_answer(response, format!("table info of {table}"))
    }

    /// `GET /metrics` (Prometheus text).
    pub fn metrics(&self) -> Result<String, ServerError> {
        Ok(ok_answer(self.get("/metrics")?, "metrics")?.text())
    }

    /// Every row of `db.table`, all buckets, through the JSON-lines scan.
    pub fn scan(&self, table: &str) -> Result<Vec<ScanRow>, ServerError> {
        let what = format!("scan of {table}");
        let response = ok_answer(self.get(&format!("/v1/tables/{table}/scan?format=jsonl"))?, &what)?;
        parse_jsonl_rows(&response.text()).map_err(|reason| ServerError::BadAnswer {
            what,
            reason,
            body: tail(&response.text(), 2000),
        })
    }

    /// Scans until at least `wanted` rows are there (acks=0 answers before rows land), bounded.
    pub fn scan_until(
        &self,
        table: &str,
        wanted: usize,
        timeout: Duration,
    ) -> Result<Vec<ScanRow>, ServerError> {
        let started = Instant::now();
        loop {
            let rows = self.scan(table)?;
            if rows.len() >= wanted || started.elapsed() >= timeout {
                if rows.len() < wanted {
                    return Err(ServerError::RowsMissing {
                        table: table.to_owned(),
                        wanted,
                        seen: rows.len(),
                        waited: started.elapsed(),
                    });
                }
                return Ok(rows);
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Sends SIGTERM, waits up to [`STOP_GRACE`], kills if needed; returns how it exited.
    pub fn stop(mut self) -> Option<ExitStatus> {
        self.terminate()
    }

    fn terminate(&mut self) -> Option<ExitStatus> {
        self.terminate_within(STOP_GRACE)
    }

    /// Sends SIGTERM and waits up to `grace` for the exit status; kills it after that (`None`).
    pub fn terminate_within(&mut self, grace: Duration) -> Option<ExitStatus> {
        if let Some(status) = self.child.try_wait().ok().flatten() {
            return Some(status);
        }
        self.begin_terminate();
        self.wait_within(grace)
    }

    /// Sends SIGTERM and returns at once, while the server shuts down (its Fluss listener
    /// answers until its cores are done); [`KaflussServer::wait_within`] waits for the exit. A
    /// second SIGTERM would make it exit at once with status 1.
    pub fn begin_terminate(&self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    /// Waits up to `grace` for the exit status, sending nothing; kills it after that (`None`).
    pub fn wait_within(&mut self, grace: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().ok().flatten() {
                return Some(status);
            }
            thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        self.child.wait().ok();
        None
    }
}

impl Drop for KaflussServer {
    fn drop(&mut self) {
        let status = self.terminate();
        if thread::panicking() {
            eprintln!(
                "---- kafluss server output (exit {status:?}, data dir {}) ----\n{}\n---- end of server output ----",
                self.data_dir.display(),
                self.log_tail()
            );
        }
    }
}

/// Runs the `kafluss` binary as a client (`sql`, `scan`), bounded by `timeout`.
pub fn run_cli(args: &[&str], timeout: Duration) -> Result<process::Finished, ServerError> {
    let binary = kafluss_binary()?;
    process::run_with_timeout(Command::new(&binary).args(args), b"", timeout)
        .map_err(|error| ServerError::Cli(format!("{} {args:?}: {error}", binary.display())))
}

/// Parses a JSON-lines scan body.
pub fn parse_jsonl_rows(body: &str) -> Result<Vec<ScanRow>, String> {
    body.lines()
        .filter(|line| !line.trim().is_empty())
        .enumerate()
        .map(|(index, line)| {
            serde_json::from_str(line).map_err(|error| format!("line {}: {error}", index + 1))
        })
        .collect()
}

/// Finds the bound FLUSS and KAFKA addresses in a ready line.
///
/// Accepted: `FLUSS=127.0.0.1:1 KAFKA=127.0.0.1:2`, `FLUSS://127.0.0.1:1,KAFKA://127.0.0.1:2`,
/// `FLUSS: 127.0.0.1:1`, with anything around them; IPv6 as `[::1]:1`. Port 0 (the requested,
/// not yet bound, listener that a configuration echo may print) never counts.
pub fn parse_ready_line(line: &str) -> Option<(SocketAddr, SocketAddr)> {
    Some((listener_address(line, "FLUSS")?, listener_address(line, "KAFKA")?))
}

fn listener_address(line: &str, name: &str) -> Option<SocketAddr> {
    line.match_indices(name).find_map(|(at, _)| {
        let rest = &line[at + name.len()..];
        let rest = rest
            .strip_prefix("://")
            .or_else(|| rest.strip_prefix('='))
            .or_else(|| rest.strip_prefix(':'))?
            .trim_start();
        let token: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | ':' | '[' | ']'))
            .collect();
        let token = token.trim_end_matches(['.', ':']);
        let address: SocketAddr = token.parse().ok()?;
        (address.port() != 0).then_some(address)
    })
}

/// Copies a child's output lines into the shared log and reports the first ready line.
fn forward_lines<R: Read + Send + 'static>(
    pipe: Option<R>,
    log: Arc<Mutex<VecDeque<String>>>,
    ready: mpsc::Sender<(SocketAddr, SocketAddr)>,
) {
    let Some(pipe) = pipe else { return };
    thread::spawn(move || {
        let mut reader = BufReader::new(pipe);
        let mut line = Vec::new();
        let mut announced = false;
        loop {
            line.clear();
            // Lines are capped so a runaway line cannot grow without bound.
            match (&mut reader).take(64 * 1024).read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let text = String::from_utf8_lossy(&line).trim_end().to_owned();
            let addresses = (!announced).then(|| parse_ready_line(&text)).flatten();
            // Into the log before the ready line is announced, so that whoever waited for it
            // finds it in `log_tail` (the docs tests compare the serve output with it).
            {
                let mut log = log.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                if log.len() == LOG_LINES_KEPT {
                    log.pop_front();
                }
                log.push_back(text);
            }
            if let Some(addresses) = addresses {
                announced = ready.send(addresses).is_ok();
            }
        }
    });
}

/// The `kafluss` binary: `KAFLUSS_BIN`, else the workspace's debug build, built once if needed.
pub fn kafluss_binary() -> Result<PathBuf, ServerError> {
    if let Some(path) = std::env::var_os("KAFLUSS_BIN") {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(ServerError::BinaryMissing(path))
        };
    }
    // Built at most once per test process, even when many tests start servers at once.
    static BUILD_RESULT: OnceLock<Result<(), String>> = OnceLock::new();
    if let Err(message) = BUILD_RESULT.get_or_init(build_kafluss) {
        return Err(ServerError::Build(message.clone()));
    }
    let path = target_dir().join("debug").join("kafluss");
    if path.is_file() {
        Ok(path)
    } else {
        Err(ServerError::BinaryMissing(path))
    }
}

/// The workspace root (this crate lives in `<root>/tests`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// Cargo's target dir for this workspace.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

fn build_kafluss() -> Result<(), String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(workspace_root())
        .args(["build", "-p", "kafluss-broker", "--bin", "kafluss"]);
    let done =
        process::run_with_timeout(&mut command, b"", BUILD_TIMEOUT).map_err(|error| error.to_string())?;
    if done.status.success() {
        Ok(())
    } else {
        Err(tail(&done.stderr_text(), 4000))
    }
}

/// The answer if its status is 200, else `Rejected` naming `what` with the body.
fn ok_answer(response: HttpResponse, what: &str) -> Result<HttpResponse, ServerError> {
    if response.status != 200 {
        return Err(ServerError::Rejected {
            what: what.to_owned(),
            status: response.status,
            body: response.text(),
        });
    }
    Ok(response)
}

/// A 200 answer's body as JSON.
fn json_answer(response: HttpResponse, what: String) -> Result<Value, ServerError> {
    let response = ok_answer(response, &what)?;
    serde_json::from_slice(&response.body).map_err(|error| ServerError::BadAnswer {
        what,
        reason: error.to_string(),
        body: response.text(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_proposed_ready_line() {
        let (fluss, kafka) =
            parse_ready_line("kafluss ready: FLUSS=127.0.0.1:41234 KAFKA=127.0.0.1:41235").unwrap();
        assert_eq!(fluss, "127.0.0.1:41234".parse().unwrap());
        assert_eq!(kafka, "127.0.0.1:41235".parse().unwrap());
    }

    #[test]
    fn reads_listener_url_spellings_and_ipv6() {
        let line =
            "2026-12-02T16:00:00Z INFO kafluss: listening on FLUSS://[::1]:9123,KAFKA://127.0.0.1:9092.";
        let (fluss, kafka) = parse_ready_line(line).unwrap();
        assert_eq!(fluss, "[::1]:9123".parse().unwrap());
        assert_eq!(kafka, "127.0.0.1:9092".parse().unwrap());
    }

    #[test]
    fn ignores_requested_port_zero_and_unrelated_lines() {
        assert_eq!(
            parse_ready_line("config: bind.listeners=FLUSS://127.0.0.1:0,KAFKA://127.0.0.1:0"),
            None
        );
        assert_eq!(parse_ready_line("KAFKA listener starting"), None);
        assert_eq!(parse_ready_line("FLUSS=127.0.0.1:1 only"), None);
    }

    #[test]
    fn parses_scan_lines() {
        let rows = parse_jsonl_rows(
            "{\"bucket\":0,\"offset\":0,\"row\":{\"a\":1}}\n\n{\"bucket\":1,\"offset\":7,\"row\":{\"a\":null}}\n",
        )
        .unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].bucket, 1);
        assert_eq!(rows[1].offset, 7);
        assert!(parse_jsonl_rows("{\"bucket\":0}").is_err());
    }
}
