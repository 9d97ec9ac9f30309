//! Running a helper program (a client driver, `kafluss sql`) with a deadline and bounded output.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Output beyond this many bytes per stream is dropped (the tail of a runaway log is not needed).
const MAX_CAPTURE_BYTES: u64 = 8 * 1024 * 1024;
/// How often a running child is polled for exit.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("could not start {program}: {source}")]
    Spawn { program: String, source: std::io::Error },
    #[error("{program} did not finish within {timeout:?} and was killed; stderr tail:\n{stderr_tail}")]
    Timeout {
        program: String,
        timeout: Duration,
        stderr_tail: String,
    },
    #[error("waiting for {program}: {source}")]
    Wait { program: String, source: std::io::Error },
}

/// What a finished program printed.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Finished {
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

/// The last `max_chars` characters of `text`, for error messages.
pub fn tail(text: &str, max_chars: usize) -> String {
    let count = text.chars().count();
    text.chars().skip(count.saturating_sub(max_chars)).collect()
}

/// Runs `command` to completion, feeding it `stdin`, killing it once `timeout` has passed.
pub fn run_with_timeout(
    command: &mut Command,
    stdin: &[u8],
    timeout: Duration,
) -> Result<Finished, ProcessError> {
    let program = format!("{:?}", command.get_program());
    let mut child = command
        // Its own process group, so a timeout also ends what it started (kcat under python).
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| ProcessError::Spawn {
            program: program.clone(),
            source,
        })?;

    let mut child_stdin = child.stdin.take();
    let input = stdin.to_vec();
    let feeder = thread::spawn(move || {
        if let Some(pipe) = child_stdin.as_mut() {
            // A child that exits without reading its input is not an error here.
            let _ = pipe.write_all(&input);
        }
        drop(child_stdin);
    });
    let stdout = collect(child.stdout.take());
    let stderr = collect(child.stderr.take());

    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                kill_group(&mut child);
                let _ = feeder.join();
                let stderr = stderr.join().unwrap_or_default();
                return Err(ProcessError::Timeout {
                    program,
                    timeout,
                    stderr_tail: tail(&String::from_utf8_lossy(&stderr), 2000),
                });
            }
            Ok(None) => thread::sleep(POLL_INTERVAL),
            Err(source) => return Err(ProcessError::Wait { program, source }),
        }
    };
    let _ = feeder.join();
    Ok(Finished {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

/// Kills the child's whole process group (it leads it: see `process_group(0)` above).
pub fn kill_group(child: &mut Child) {
    let group = format!("-{}", child.id());
    let _ = Command::new("kill")
        .args(["-KILL", "--", &group])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let _ = child.kill();
    let _ = child.wait();
}

/// Drains a pipe on its own thread so a chatty child never blocks on a full pipe.
fn collect<R: Read + Send + 'static>(pipe: Option<R>) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(pipe) = pipe {
            let mut limited = pipe.take(MAX_CAPTURE_BYTES);
            let _ = limited.read_to_end(&mut bytes);
            // Keep draining past the cap so the child is never blocked writing.
            let mut rest = limited.into_inner();
            let _ = std::io::copy(&mut rest, &mut std::io::sink());
        }
        bytes
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_output_and_status() {
        let done = run_with_timeout(
            Command::new("sh").args(["-c", "cat; echo err >&2; exit 3"]),
            b"from stdin",
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(done.status.code(), Some(3));
        assert_eq!(done.stdout_text(), "from stdin");
        assert_eq!(done.stderr_text(), "err\n");
    }

    #[test]
    fn kills_a_program_past_its_deadline() {
        let started = Instant::now();
        let error = run_with_timeout(
            Command::new("sh").args(["-c", "echo started >&2; sleep 30"]),
            b"",
            Duration::from_millis(300),
        )
        .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(10));
        match error {
            ProcessError::Timeout { stderr_tail, .. } => assert!(stderr_tail.contains("started")),
            other => panic!("expected a timeout, got {other}"),
        }
    }

    #[test]
    fn tail_keeps_the_end() {
        assert_eq!(tail("abcdef", 3), "def");
        assert_eq!(tail("ab", 3), "ab");
    }
}
