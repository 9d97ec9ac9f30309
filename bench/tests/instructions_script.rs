//! bench/instructions.sh's checks before it builds or runs anything: an unknown `BENCH` is
//! refused with the choices, and `BENCH=server` is refused without valgrind, or with a valgrind
//! older than 3.22 (which holds its lock inside `io_uring_enter`, so the server under it would
//! never finish starting), each with a message saying what is needed. The script itself runs:
//! the counts need valgrind and minutes, and are taken by hand (docs/benchmarks.md).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use kafluss_tests::clients::on_path;
use kafluss_tests::process::run_with_timeout;
use kafluss_tests::server::workspace_root;

/// Far longer than the checks take; a script that went on to build would run past it.
const TIMEOUT: Duration = Duration::from_secs(60);

/// Runs the script with `BENCH` set, from a directory outside the repository, with `path` as
/// PATH when given; (exit code, stderr).
fn run(bench: &str, path: Option<&Path>) -> (Option<i32>, String) {
    let outside = tempfile::tempdir().expect("a directory outside the repository");
    let script = workspace_root().join("bench").join("instructions.sh");
    let mut command = Command::new(on_path("bash").expect("bash on PATH"));
    command
        .arg(&script)
        .current_dir(outside.path())
        .env("BENCH", bench)
        .env("OUT", outside.path().join("out"));
    if let Some(path) = path {
        command.env("PATH", path);
    }
    let finished =
        run_with_timeout(&mut command, b"", TIMEOUT).expect("the script answers within the timeout");
    (finished.status.code(), finished.stderr_text())
}

/// The installed valgrind's (major, minor) version, if there is one on PATH.
fn valgrind_version() -> Option<(u32, u32)> {
    let output = Command::new("valgrind").arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let version = text.trim().strip_prefix("valgrind-")?;
    let mut parts = version.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

#[test]
fn an_unknown_bench_is_refused_with_the_choices() {
    let (code, stderr) = run("bogus", None);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("BENCH is row_path, convert or server, not bogus"),
        "{stderr}"
    );
}

#[test]
fn the_server_count_says_which_valgrind_it_needs() {
    // Without valgrind on PATH (a PATH of nothing but the `dirname` the script calls first).
    let bare = tempfile::tempdir().expect("a directory for PATH");
    std::os::unix::fs::symlink(
        on_path("dirname").expect("dirname on PATH"),
        bare.path().join("dirname"),
    )
    .expect("dirname linked");
    let (code, stderr) = run("server", Some(bare.path()));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("instructions.sh needs valgrind (Debian/Ubuntu: apt-get install valgrind)"),
        "{stderr}"
    );
    // With the valgrind installed here, when it is one that cannot count the server (Debian
    // 12's 3.19): refused before anything is built. A newer one would build and count, which
    // takes minutes and is the by-hand measurement, not this test.
    if let Some((major, minor)) = valgrind_version().filter(|&version| version < (3, 22)) {
        let (code, stderr) = run("server", None);
        assert_eq!(code, Some(2), "{stderr}");
        assert!(
            stderr.contains("BENCH=server needs valgrind 3.22 or later")
                && stderr.contains(&format!("valgrind-{major}.{minor}")),
            "{stderr}"
        );
    }
}
