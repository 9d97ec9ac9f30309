//! Running the documentation as written: the README's commands and each numbered step of
//! docs/getting-started.md, from a fresh empty working directory, with the defaults.
//!
//! A document is read as its fenced blocks, each under the `##` heading it sits in. A [`DocRun`]
//! plays blocks in order, as a user at a terminal would:
//! - `sh` blocks: each command (lines joined across a trailing `\` or `|`, or an open quote) runs
//!   in `bash` in the working directory, after the `alias`, `NAME=value` and `export NAME=value`
//!   lines seen so far (a terminal keeps them). The
//!   `# ...` lines after a command are its expected output (see [`check_output`]); without
//!   `(exit status N)` among them the command must exit 0.
//! - A `serve` command (`kafluss serve ...`, `$K serve`, `cargo run ... -- serve`) starts the
//!   server in the background and waits for its ready line, stopping a server started earlier
//!   first (the document's Ctrl-C).
//! - `cargo build --release -p kafluss-broker` is not run, and `cargo run --release -p
//!   kafluss-broker -- ARGS` runs `kafluss ARGS`: the binary under test is the one the suite
//!   built, linked at `target/release/kafluss` in the working directory so the documents'
//!   `./target/release/kafluss` and `$PWD/target/release/kafluss` find it.
//! - `yaml` blocks are written to `server.yaml`; a `sql` block is written to the `.sql` file the
//!   text before it names (`` `orders.sql` ``), else run with `kafluss sql -f`; `python` blocks
//!   run with the suite's Python, their trailing `# ...` lines being the expected output.
//!
//! The one liberty taken: when another process already holds the default ports (9092, 9123), the
//! server gets `-D bind.listeners=FLUSS://localhost:0,KAFKA://localhost:0` and every command
//! has the ports rewritten (`localhost:9092` → the real port, `kafluss sql`/`scan` get
//! `--server`). The run says so on stderr.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use regex::Regex;

use crate::process::{run_with_timeout, tail};
use crate::server::{kafluss_binary, workspace_root, KaflussServer};

/// How long one documented command may run.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);
/// The defaults the documents use.
const DEFAULT_FLUSS_PORT: u16 = 9123;
const DEFAULT_KAFKA_PORT: u16 = 9092;

/// One fenced block of a markdown document.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    /// The info string (`sh`, `sql`, `yaml`, `python`, or empty).
    pub lang: String,
    pub text: String,
    /// The `##` heading the block is under (without the `## `), empty before the first.
    pub section: String,
    /// The prose between the previous block (or the heading) and this one.
    pub before: String,
}

/// The fenced blocks of `markdown`, in order.
pub fn blocks(markdown: &str) -> Vec<Block> {
    let mut found = Vec::new();
    let mut section = String::new();
    let mut before = String::new();
    let mut open: Option<(String, String)> = None;
    for line in markdown.lines() {
        let fence = line.trim_start().starts_with("```");
        if let Some((lang, mut text)) = open.take() {
            if fence {
                found.push(Block {
                    lang,
                    text,
                    section: section.clone(),
                    before: std::mem::take(&mut before),
                });
            } else {
                text.push_str(line);
                text.push('\n');
                open = Some((lang, text));
            }
        } else if fence {
            let lang = line.trim_start().trim_start_matches('`').trim().to_string();
            open = Some((lang, String::new()));
        } else if let Some(heading) = line.strip_prefix("## ") {
            section = heading.trim().to_string();
            before.clear();
        } else {
            before.push_str(line);
            before.push('\n');
        }
    }
    found
}

/// One command of a `sh` block and the output the document shows for it.
#[derive(Debug, Clone, PartialEq)]
pub struct ShellCommand {
    pub text: String,
    /// The `# ` lines after it, without the `# `.
    pub expected: Vec<String>,
}

/// Splits a `sh` block into commands: a line continues onto the next when it ends with `\` or
/// `|`, or while a quote is open; `#` lines after a command are its expected output.
pub fn shell_commands(block: &str) -> Vec<ShellCommand> {
    let mut commands: Vec<ShellCommand> = Vec::new();
    let mut current = String::new();
    for line in block.lines() {
        if current.is_empty() {
            let trimmed = line.trim_start();
            if let Some(comment) = trimmed.strip_prefix('#') {
                if let Some(last) = commands.last_mut() {
                    let comment = comment.strip_prefix(' ').unwrap_or(comment);
                    last.expected.push(comment.to_string());
                }
                continue;
            }
            if trimmed.is_empty() {
                continue;
            }
        }
        current.push_str(line);
        current.push('\n');
        let trimmed = line.trim_end();
        let continues = trimmed.ends_with('\\') || trimmed.ends_with('|') || quote_open(&current);
        if !continues {
            commands.push(ShellCommand {
                text: std::mem::take(&mut current).trim_end().to_string(),
                expected: Vec::new(),
            });
        }
    }
    if !current.trim().is_empty() {
        commands.push(ShellCommand {
            text: current.trim_end().to_string(),
            expected: Vec::new(),
        });
    }
    commands
}

/// Whether `text` ends inside a single- or double-quoted string (shell rules, no `$'..'`).
fn quote_open(text: &str) -> bool {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in text.chars() {
        match quote {
            Some('\'') if c == '\'' => quote = None,
            Some('\'') => {}
            Some(_) if escaped => escaped = false,
            Some(_) if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if escaped => escaped = false,
            None if c == '\\' => escaped = true,
            None if c == '\'' || c == '"' => quote = Some(c),
            None => {}
        }
    }
    quote.is_some()
}

/// What a document says a command prints, and how it must exit.
#[derive(Debug, Clone, PartialEq)]
pub struct Expectation {
    /// Pieces that must appear, in this order, in the output (whitespace ignored); `...` in
    /// the document separates pieces.
    pub pieces: Vec<String>,
    pub exit_status: i32,
}

/// Reads the `# ` lines of a command: `(exit status N)` sets the exit status, the rest (joined,
/// as they are wrapped lines of one output) is the output to find.
pub fn expectation(lines: &[String]) -> Expectation {
    let exit = Regex::new(r"\(exit status (\d+)\)").expect("a valid pattern");
    let mut exit_status = 0;
    let mut text = String::new();
    for line in lines {
        let mut line = line.clone();
        if let Some(found) = exit.captures(&line) {
            exit_status = found[1].parse().unwrap_or(1);
            line = exit.replace(&line, "").into_owned();
        }
        text.push_str(&line);
    }
    let squeezed: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let pieces = squeezed
        .split("...")
        .filter(|piece| !piece.is_empty())
        .map(str::to_string)
        .collect();
    Expectation { pieces, exit_status }
}

/// Checks `output` against `expected`: each piece, in order, with whitespace ignored on both
/// sides. What the document shows from a particular run (ISO timestamps, `cores=N`) matches any
/// value of the same form.
pub fn check_output(expected: &Expectation, output: &str) -> Result<(), String> {
    let squeezed: String = output.chars().filter(|c| !c.is_whitespace()).collect();
    let volatile = Regex::new(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z|cores=\d+").expect("a valid pattern");
    let mut from = 0;
    for piece in &expected.pieces {
        let mut pattern = String::new();
        let mut last = 0;
        for found in volatile.find_iter(piece) {
            pattern.push_str(&regex::escape(&piece[last..found.start()]));
            pattern.push_str(if found.as_str().starts_with("cores=") {
                r"cores=\d+"
            } else {
                r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"
            });
            last = found.end();
        }
        pattern.push_str(&regex::escape(&piece[last..]));
        let regex = Regex::new(&pattern).map_err(|e| format!("pattern {pattern}: {e}"))?;
        match regex.find_at(&squeezed, from) {
            Some(found) => from = found.end(),
            None => {
                return Err(format!(
                    "the output does not show {piece:?} (after what matched before)"
                ))
            }
        }
    }
    Ok(())
}

/// Tests that use the default ports take turns (tests of one binary run on several threads).
pub fn default_ports_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A markdown file of the repository.
pub fn read_doc(relative: &str) -> String {
    let path = workspace_root().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The Fluss and Kafka ports in use, and whether they are the documents' defaults.
#[derive(Debug, Clone, Copy)]
struct Ports {
    fluss: u16,
    kafka: u16,
}

impl Ports {
    fn defaults() -> Self {
        Self {
            fluss: DEFAULT_FLUSS_PORT,
            kafka: DEFAULT_KAFKA_PORT,
        }
    }

    fn are_defaults(&self) -> bool {
        self.fluss == DEFAULT_FLUSS_PORT && self.kafka == DEFAULT_KAFKA_PORT
    }
}

fn port_free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// A user's terminal session over a document: a fresh empty working directory, the aliases and
/// variables set so far, and the server started by the document's `serve`.
pub struct DocRun {
    work: tempfile::TempDir,
    prelude: Vec<String>,
    server: Option<KaflussServer>,
    ports: Ports,
    python: PathBuf,
    /// What ran, for failure messages.
    transcript: Vec<String>,
}

impl DocRun {
    /// A fresh empty working directory with `target/release/kafluss` linked to the binary.
    pub fn new() -> Self {
        let work = tempfile::Builder::new()
            .prefix("kafluss-doc-")
            .tempdir()
            .expect("a temporary working directory");
        let binary = kafluss_binary().unwrap_or_else(|e| panic!("{e}"));
        let release = work.path().join("target").join("release");
        std::fs::create_dir_all(&release).expect("target/release in the working directory");
        std::os::unix::fs::symlink(&binary, release.join("kafluss")).expect("link target/release/kafluss");
        let python = std::env::var_os("KAFLUSS_PYTHON")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("python3"));
        Self {
            work,
            prelude: Vec::new(),
            server: None,
            ports: Ports::defaults(),
            python,
            transcript: Vec::new(),
        }
    }

    /// The working directory.
    pub fn dir(&self) -> &Path {
        self.work.path()
    }

    /// The running server (the document's last `serve`).
    pub fn server(&self) -> &KaflussServer {
        self.server
            .as_ref()
            .unwrap_or_else(|| panic!("the document started no server\n{}", self.transcript()))
    }

    /// What ran so far, one command a line.
    pub fn transcript(&self) -> String {
        self.transcript.join("\n")
    }

    /// Plays every block of the sections `sections` selects, in document order.
    pub fn play(&mut self, markdown: &str, sections: impl Fn(&str) -> bool) {
        for block in blocks(markdown).into_iter().filter(|b| sections(&b.section)) {
            self.play_block(&block);
        }
    }

    /// Plays one block (see the module documentation).
    pub fn play_block(&mut self, block: &Block) {
        match block.lang.as_str() {
            "sh" | "bash" | "shell" => {
                for command in shell_commands(&block.text) {
                    self.run_shell(&command);
                }
            }
            "yaml" => self.write_file("server.yaml", &block.text),
            "sql" => {
                let named = Regex::new(r"`([A-Za-z0-9_.-]+\.sql)`").expect("a valid pattern");
                match named.captures(&block.before) {
                    Some(name) => self.write_file(&name[1], &block.text),
                    None => {
                        self.write_file("statements.sql", &block.text);
                        self.run_shell(&ShellCommand {
                            text: "kafluss sql -f statements.sql".into(),
                            expected: Vec::new(),
                        });
                    }
                }
            }
            "python" | "py" => self.run_python(&block.text),
            _ => {}
        }
    }

    fn write_file(&mut self, name: &str, text: &str) {
        self.transcript.push(format!("(write {name})"));
        std::fs::write(self.dir().join(name), text).unwrap_or_else(|e| panic!("writing {name}: {e}"));
    }

    fn run_shell(&mut self, command: &ShellCommand) {
        let text = command.text.trim();
        let cargo_run = Regex::new(r"^cargo run --release -p kafluss-broker --\s*").expect("a valid pattern");
        if text.starts_with("cargo build") {
            self.transcript
                .push(format!("(not run: {text}; the suite built the binary)"));
            return;
        }
        let text = cargo_run.replace(text, "kafluss ").into_owned();
        let assignment = Regex::new(
            r"^(alias [A-Za-z_]+=\S+|(export\s+)?[A-Za-z_][A-Za-z0-9_]*=\S+(\s+[A-Za-z_][A-Za-z0-9_]*=\S+)*)$",
        )
        .expect("a valid pattern");
        if assignment.is_match(&text) {
            self.transcript.push(text.clone());
            self.prelude.push(text);
            return;
        }
        let serve = Regex::new(r"^(kafluss|\$K|\S*/kafluss)\s+serve\b\s*([^#]*)").expect("a valid pattern");
        if let Some(found) = serve.captures(&text) {
            let args: Vec<String> = std::iter::once("serve".to_string())
                .chain(found[2].split_whitespace().map(str::to_string))
                .collect();
            self.serve(args, command);
            return;
        }
        let text = self.rewrite_ports(&text);
        self.transcript.push(text.clone());
        let script = format!("shopt -s expand_aliases\n{}\n{text}\n", self.prelude.join("\n"));
        let done = run_with_timeout(
            Command::new("bash")
                .arg("-c")
                .arg(&script)
                .current_dir(self.dir()),
            b"",
            COMMAND_TIMEOUT,
        )
        .unwrap_or_else(|e| panic!("{text}: {e}\n{}", self.context()));
        let output = format!("{}{}", done.stdout_text(), done.stderr_text());
        self.check(&text, &command.expected, done.status.code(), &output);
    }

    fn run_python(&mut self, code: &str) {
        let lines: Vec<&str> = code.lines().collect();
        let code_end = lines
            .iter()
            .rposition(|line| !line.trim().is_empty() && !line.trim_start().starts_with('#'))
            .map_or(0, |last| last + 1);
        let expected: Vec<String> = lines[code_end..]
            .iter()
            .filter_map(|line| line.trim_start().strip_prefix('#'))
            .map(|line| line.strip_prefix(' ').unwrap_or(line).to_string())
            .collect();
        let script = self.rewrite_ports(&lines[..code_end].join("\n"));
        self.transcript.push(format!("python: {}", tail(&script, 200)));
        let done = run_with_timeout(
            Command::new(&self.python)
                .arg("-c")
                .arg(&script)
                .current_dir(self.dir()),
            b"",
            COMMAND_TIMEOUT,
        )
        .unwrap_or_else(|e| panic!("python block: {e}\n{}", self.context()));
        let output = format!("{}{}", done.stdout_text(), done.stderr_text());
        self.check("python block", &expected, done.status.code(), &output);
    }

    fn check(&self, what: &str, expected: &[String], status: Option<i32>, output: &str) {
        let expected = self.rewrite_expected(expected);
        let expectation = expectation(&expected);
        assert_eq!(
            status,
            Some(expectation.exit_status),
            "`{what}` exited {status:?}, the document says {}; it printed:\n{}\n{}",
            expectation.exit_status,
            tail(output, 3000),
            self.context()
        );
        if let Err(reason) = check_output(&expectation, output) {
            panic!(
                "`{what}`: {reason}; the document shows:\n{}\nit printed:\n{}\n{}",
                expected.join("\n"),
                tail(output, 3000),
                self.context()
            );
        }
    }

    fn serve(&mut self, mut args: Vec<String>, command: &ShellCommand) {
        if let Some(previous) = self.server.take() {
            self.transcript.push("(Ctrl-C: the server stops)".into());
            let status = previous.stop();
            assert!(
                status.is_some_and(|s| s.success()),
                "the previous server did not stop cleanly: {status:?}"
            );
        }
        self.ports = if port_free(DEFAULT_FLUSS_PORT) && port_free(DEFAULT_KAFKA_PORT) {
            Ports::defaults()
        } else {
            eprintln!(
                "the default ports {DEFAULT_FLUSS_PORT}/{DEFAULT_KAFKA_PORT} are busy here: the server gets free ports and the commands are rewritten to them"
            );
            args.push("-D".into());
            args.push("bind.listeners=FLUSS://localhost:0,KAFKA://localhost:0".into());
            Ports { fluss: 0, kafka: 0 }
        };
        self.transcript.push(format!("kafluss {}", args.join(" ")));
        let server = KaflussServer::start_command(self.dir(), &args, self.dir().join("data"))
            .unwrap_or_else(|e| panic!("kafluss {}: {e}\n{}", args.join(" "), self.context()));
        if !self.ports.are_defaults() {
            self.ports = Ports {
                fluss: server.fluss_addr().port(),
                kafka: server.kafka_addr().port(),
            };
        }
        let ready = format!(
            "kafluss ready: FLUSS={} KAFKA={}",
            server.fluss_addr(),
            server.kafka_addr()
        );
        let shown = self.rewrite_expected(&command.expected);
        if !shown.is_empty() {
            let expectation = expectation(&shown);
            let log = server.log_tail();
            if let Err(reason) = check_output(&expectation, &log) {
                panic!(
                    "serve: {reason}; the document shows:\n{}\nthe server printed:\n{log}\n(ready: {ready})",
                    shown.join("\n")
                );
            }
        }
        self.server = Some(server);
    }

    /// A command with the default ports replaced by the ports in use (only when they differ).
    fn rewrite_ports(&self, text: &str) -> String {
        if self.ports.are_defaults() {
            return text.to_string();
        }
        let text = text
            .replace(
                &format!("localhost:{DEFAULT_KAFKA_PORT}"),
                &format!("localhost:{}", self.ports.kafka),
            )
            .replace(
                &format!("localhost:{DEFAULT_FLUSS_PORT}"),
                &format!("localhost:{}", self.ports.fluss),
            );
        let client = Regex::new(r"(kafluss|\$K) (sql|scan)\b").expect("a valid pattern");
        client
            .replace_all(&text, format!("$1 $2 --server localhost:{}", self.ports.fluss))
            .into_owned()
    }

    fn rewrite_expected(&self, lines: &[String]) -> Vec<String> {
        if self.ports.are_defaults() {
            return lines.to_vec();
        }
        lines
            .iter()
            .map(|line| {
                line.replace(
                    &format!(":{DEFAULT_KAFKA_PORT}"),
                    &format!(":{}", self.ports.kafka),
                )
                .replace(
                    &format!(":{DEFAULT_FLUSS_PORT}"),
                    &format!(":{}", self.ports.fluss),
                )
            })
            .collect()
    }

    fn context(&self) -> String {
        let log = self
            .server
            .as_ref()
            .map(KaflussServer::log_tail)
            .unwrap_or_default();
        format!(
            "---- commands run ----\n{}\n---- server output ----\n{}",
            self.transcript(),
            tail(&log, 4000)
        )
    }
}

impl Default for DocRun {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_carry_their_section_and_prose() {
        let doc = "# T\n## 1. Start\nWrite `a.sql`:\n```sql\nSELECT 1;\n```\n## 2. Next\n```sh\nls\n```\n";
        let found = blocks(doc);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].lang, "sql");
        assert_eq!(found[0].section, "1. Start");
        assert!(found[0].before.contains("`a.sql`"));
        assert_eq!(found[0].text, "SELECT 1;\n");
        assert_eq!(found[1].section, "2. Next");
    }

    #[test]
    fn commands_join_continuations_and_collect_output() {
        let block = "printf '%s\\n' \\\n  'a|b' |\nkcat -P -t x\n# line one\n#   line two\nkafluss sql -e \"A;\nB\"\n# (exit status 1)\n";
        let found = shell_commands(block);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].text, "printf '%s\\n' \\\n  'a|b' |\nkcat -P -t x");
        assert_eq!(found[0].expected, vec!["line one", "  line two"]);
        assert_eq!(found[1].text, "kafluss sql -e \"A;\nB\"");
        assert_eq!(expectation(&found[1].expected).exit_status, 1);
    }

    #[test]
    fn output_pieces_match_in_order_with_volatile_values() {
        let shown = vec![
            r#"{"a":1, "t":"2026-12-02T17:01:08.769Z"}"#.to_string(),
            "...".to_string(),
        ];
        let expected = expectation(&shown);
        assert!(check_output(&expected, "x {\"a\":1,\"t\":\"2020-01-01T00:00:00.001Z\"}\nmore").is_ok());
        assert!(check_output(&expected, "{\"a\":2,\"t\":\"2020-01-01T00:00:00Z\"}").is_err());
        let ready = expectation(&["kafluss ready: FLUSS=127.0.0.1:9123 cores=2".to_string()]);
        assert!(check_output(&ready, "kafluss ready: FLUSS=127.0.0.1:9123 cores=16").is_ok());
        assert!(check_output(&ready, "kafluss ready: FLUSS=127.0.0.1:9124 cores=16").is_err());
        let pieces = expectation(&["[{'a': 1}, ...]".to_string()]);
        assert_eq!(pieces.pieces, vec!["[{'a':1},", "]"]);
    }
}
