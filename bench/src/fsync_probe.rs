//! The disk's own fsync latency, for the acks=-1 target (p99 ≤ the disk's fsync p99 + 1 ms):
//! appends `write_bytes` to a fresh file in the given directory and `fdatasync`s it, again and
//! again, as a group commit of the broker does, and keeps every fsync's duration in an HDR
//! histogram. Run in the same invocation as the broker's acks=-1 run, on the file system that
//! holds its data, so both see the same disk.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::histogram::{ms, record, run_histogram, LatencySummary};
use crate::BenchError;

/// What one probe measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FsyncProbe {
    /// `write` + `fdatasync` rounds done.
    pub syncs: u64,
    /// Bytes appended before each fsync.
    pub write_bytes: usize,
    /// Durations of the `fdatasync` calls alone (`None` when none was made).
    pub latency: Option<LatencySummary>,
}

impl FsyncProbe {
    /// As a JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "syncs": self.syncs,
            "write_bytes": self.write_bytes,
            "fdatasync": LatencySummary::to_json(self.latency.as_ref()),
        })
    }

    /// One line for the report.
    pub fn text(&self, dir: &Path) -> String {
        let latency = self.latency.as_ref();
        format!(
            "fsync probe in {}: {} fdatasyncs of {} B appends: p50 {} ms  p99 {} ms  p99.9 {} ms  max {} ms",
            dir.display(),
            self.syncs,
            self.write_bytes,
            ms(latency, |l| l.p50_us),
            ms(latency, |l| l.p99_us),
            ms(latency, |l| l.p999_us),
            ms(latency, |l| l.max_us),
        )
    }
}

/// Probes `dir` for `duration` (at most `max_syncs` rounds); the probe file is removed after.
pub fn run(
    dir: &Path,
    duration: Duration,
    write_bytes: usize,
    max_syncs: u64,
) -> Result<FsyncProbe, BenchError> {
    let path = dir.join(format!("kafluss-bench-fsync-probe-{}", std::process::id()));
    let result = probe(&path, duration, write_bytes, max_syncs);
    let _ = std::fs::remove_file(&path);
    result
}

fn io_error(path: &Path, what: &str, source: std::io::Error) -> BenchError {
    BenchError::Io {
        context: format!("fsync probe: {what} {}", path.display()),
        source,
    }
}

fn probe(
    path: &Path,
    duration: Duration,
    write_bytes: usize,
    max_syncs: u64,
) -> Result<FsyncProbe, BenchError> {
    let mut file: File = OpenOptions::new()
        .create_new(true)
        .write(true)
        .open(path)
        .map_err(|e| io_error(path, "create", e))?;
    let chunk = vec![0x5a_u8; write_bytes];
    let mut histogram = run_histogram();
    let started = Instant::now();
    let mut syncs = 0u64;
    while syncs < max_syncs && started.elapsed() < duration {
        file.write_all(&chunk).map_err(|e| io_error(path, "write", e))?;
        let syncing = Instant::now();
        file.sync_data().map_err(|e| io_error(path, "fdatasync", e))?;
        record(&mut histogram, syncing.elapsed().as_nanos() as u64, 1);
        syncs += 1;
    }
    Ok(FsyncProbe {
        syncs,
        write_bytes,
        latency: LatencySummary::of(&histogram),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_counts_its_fsyncs_and_removes_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let probe = run(dir.path(), Duration::from_secs(30), 4096, 20).unwrap();
        assert_eq!(probe.syncs, 20);
        let latency = probe.latency.unwrap();
        assert_eq!(latency.count, 20);
        assert!(latency.max_us >= latency.p50_us && latency.p50_us > 0.0);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "probe file removed"
        );
        let json = probe.to_json();
        assert_eq!(json["syncs"], 20);
        assert!(probe.text(dir.path()).contains("20 fdatasyncs of 4096 B appends"));
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_it() {
        let error = run(
            Path::new("/nonexistent-kafluss-dir"),
            Duration::from_secs(1),
            10,
            1,
        )
        .unwrap_err();
        assert!(error.to_string().contains("/nonexistent-kafluss-dir"), "{error}");
    }
}
