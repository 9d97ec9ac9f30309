//! One server per data directory: the lock on `data.dir/.lock`.
//!
//! Two servers on one directory would each keep their own catalog in memory and rewrite
//! `catalog.json` whole (the last save wins: the other's acknowledged DDL vanishes), and both
//! would append to the same segment files (each overwriting rows the other acknowledged). So
//! `serve` takes an exclusive lock on `data.dir/.lock` (`flock`, through [`File::try_lock`])
//! before it reads or writes anything else there, and holds it for as long as the process runs.
//! A second server finds it held and refuses to start, naming the directory (Kafka does the
//! same with the `.lock` file of each of its `log.dirs`).
//!
//! The kernel releases the lock when the process exits, however it exits (SIGKILL and an abort
//! too), so a lock file left behind never blocks a restart: only a running process holds the
//! lock. The file keeps the process id of the last server that held it, which the refusal
//! names. Nothing else takes the lock: `kafluss sql` and `kafluss scan` talk to the server over
//! HTTP and never open the data dir.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The lock file's name in `data.dir` (no database is named so: names cannot hold a `.`).
pub const LOCK_FILE: &str = ".lock";

/// The most bytes of the lock file read for the holder's process id.
const MAX_PID_TEXT: u64 = 32;

/// Held for the life of the server: dropping it (or the process exiting) releases the lock.
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

#[derive(Debug, thiserror::Error)]
pub enum DataDirLockError {
    #[error(
        "data dir {dir} is in use by another kafluss server{holder}, which holds the lock on \
         {lock}: stop that server first, or give this one another data.dir"
    )]
    InUse {
        dir: PathBuf,
        lock: PathBuf,
        /// ` (pid N)` when the lock file names the holder, else empty.
        holder: String,
    },
    #[error("cannot lock data dir {dir}: {action} {lock}: {source}")]
    Io {
        dir: PathBuf,
        lock: PathBuf,
        action: &'static str,
        #[source]
        source: io::Error,
    },
}

/// Takes the lock of `data_dir` (which exists), or says who holds it.
pub fn lock_data_dir(data_dir: &Path) -> Result<DataDirLock, DataDirLockError> {
    let lock = data_dir.join(LOCK_FILE);
    let io_error = |action| {
        let (dir, lock) = (data_dir.to_path_buf(), lock.clone());
        move |source| DataDirLockError::Io {
            dir,
            lock,
            action,
            source,
        }
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock)
        .map_err(io_error("open"))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let holder = holder_pid(&mut file).map_or_else(String::new, |pid| format!(" (pid {pid})"));
            return Err(DataDirLockError::InUse {
                dir: data_dir.to_path_buf(),
                lock,
                holder,
            });
        }
        Err(TryLockError::Error(source)) => return Err(io_error("lock")(source)),
    }
    // The pid only makes the refusal of a second server more helpful: a failure to write it
    // (a full disk) does not stop this one.
    let pid = format!("{}\n", std::process::id());
    let _ = file
        .set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(pid.as_bytes()));
    Ok(DataDirLock { _file: file })
}

/// The process id the holder wrote in the lock file, if it has written one.
fn holder_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.take(MAX_PID_TEXT).read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_until_the_first_is_released() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock_data_dir(dir.path()).unwrap();
        let error = lock_data_dir(dir.path()).unwrap_err();
        let message = error.to_string();
        assert!(matches!(error, DataDirLockError::InUse { .. }), "{message}");
        assert!(
            message.contains(&format!("data dir {} is in use", dir.path().display())),
            "{message}"
        );
        assert!(
            message.contains(&format!("(pid {})", std::process::id())),
            "{message}"
        );
        drop(first);
        let again = lock_data_dir(dir.path()).expect("released with its holder");
        drop(again);
        assert!(dir.path().join(LOCK_FILE).is_file(), "the file stays, unlocked");
        lock_data_dir(dir.path()).expect("a file left behind does not block");
    }
}
