//! The CPU time of the calling thread, shared by the CPU-time benches.

/// Nanoseconds of CPU time this thread has used (`/proc/thread-self/schedstat`, Linux); None
/// elsewhere, where the benches fall back to wall time and say so.
pub fn thread_cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}
