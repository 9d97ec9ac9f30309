//! CPU time and memory of a process from `/proc` (Linux), for "server CPU seconds per million
//! records" and the RSS of idle connections; and the machine's steal time (`/proc/stat`), the
//! CPU time a hypervisor gave to others while this machine's CPUs had work to run.

use std::fs;

/// `USER_HZ`: the unit of the CPU times in `/proc/PID/stat`. The kernel fixes it at 100 for
/// user space on every architecture Linux supports, whatever the internal tick rate.
const TICKS_PER_SECOND: f64 = 100.0;

/// One reading of a process's resource use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessSample {
    /// User + system CPU seconds so far, all threads.
    pub cpu_seconds: f64,
    /// Resident set size, KiB.
    pub rss_kib: u64,
    /// Peak resident set size, KiB.
    pub peak_rss_kib: u64,
}

/// Reads `/proc/<pid>/stat` and `/proc/<pid>/status`; `None` when the process is gone or the
/// files do not parse (non-Linux).
pub fn sample(pid: u32) -> Option<ProcessSample> {
    sample_path(&format!("/proc/{pid}"))
}

/// Reads this process's own use.
pub fn sample_self() -> Option<ProcessSample> {
    sample_path("/proc/self")
}

fn sample_path(dir: &str) -> Option<ProcessSample> {
    let stat = fs::read_to_string(format!("{dir}/stat")).ok()?;
    let status = fs::read_to_string(format!("{dir}/status")).ok()?;
    Some(ProcessSample {
        cpu_seconds: parse_cpu_seconds(&stat)?,
        rss_kib: parse_status_kib(&status, "VmRSS:")?,
        peak_rss_kib: parse_status_kib(&status, "VmHWM:")?,
    })
}

/// utime + stime (fields 14 and 15) in seconds. The command name (field 2) may hold spaces and
/// parentheses, so fields are counted after its last `)`.
fn parse_cpu_seconds(stat: &str) -> Option<f64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace();
    // After the name come field 3 (state) onwards: utime is field 14, the 12th here.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / TICKS_PER_SECOND)
}

/// The machine's steal time so far, in CPU seconds summed over its CPUs (`/proc/stat`, the
/// `cpu` line's eighth value); `None` where the file does not have it (non-Linux).
pub fn steal_seconds() -> Option<f64> {
    parse_steal_seconds(&fs::read_to_string("/proc/stat").ok()?)
}

/// The steal time between two [`steal_seconds`] readings, CPU seconds (never negative); `None`
/// when either reading is missing.
pub fn steal_between(before: Option<f64>, after: Option<f64>) -> Option<f64> {
    before.zip(after).map(|(before, after)| (after - before).max(0.0))
}

fn parse_steal_seconds(stat: &str) -> Option<f64> {
    let line = stat.lines().find(|line| line.starts_with("cpu "))?;
    // user nice system idle iowait irq softirq steal ...
    let steal: u64 = line.split_whitespace().nth(8)?.parse().ok()?;
    Some(steal as f64 / TICKS_PER_SECOND)
}

fn parse_status_kib(status: &str, key: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_fields_are_counted_after_the_command_name() {
        let stat = "4242 (a (weird) name) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 4 0 100 200 300";
        assert_eq!(parse_cpu_seconds(stat), Some(3.0));
    }

    #[test]
    fn status_values_are_read_in_kib() {
        let status = "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n";
        assert_eq!(parse_status_kib(status, "VmRSS:"), Some(1024));
        assert_eq!(parse_status_kib(status, "VmHWM:"), Some(2048));
        assert_eq!(parse_status_kib(status, "VmSwap:"), None);
    }

    #[test]
    fn steal_is_the_eighth_value_of_the_all_cpus_line() {
        let stat = "cpu  1026190 132701 196170 577885 268531 0 11813 12779 0 0\n\
                    cpu0 513095 66350 98085 288942 134265 0 5906 6390 0 0\n\
                    intr 1 2 3\n";
        assert_eq!(parse_steal_seconds(stat), Some(127.79));
        // A kernel without the field (before 2.6.11) or a file without the line: no figure.
        assert_eq!(parse_steal_seconds("cpu  1 2 3 4 5 6 7\n"), None);
        assert_eq!(parse_steal_seconds("cpu0 1 2 3 4 5 6 7 8\n"), None);
        assert!(steal_seconds().is_some_and(|steal| steal >= 0.0));
        assert_eq!(steal_between(Some(1.25), Some(1.5)), Some(0.25));
        assert_eq!(steal_between(Some(1.5), Some(1.25)), Some(0.0));
        assert_eq!(steal_between(None, Some(1.5)), None);
    }

    #[test]
    fn own_process_is_readable_and_uses_cpu() {
        let sample = sample_self().expect("/proc/self on Linux");
        assert!(sample.rss_kib > 0);
        assert!(sample.peak_rss_kib >= sample.rss_kib);
        assert!(sample.cpu_seconds >= 0.0);
    }
}
