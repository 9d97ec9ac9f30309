//! The stall detector: glommio's own (`LocalExecutorBuilder::detect_stalls`). When one run of
//! a task queue holds the core longer than `server.stall-threshold`, a timer thread signals the
//! core (SIGUSR1), the signal handler records the core's stack, and when the run ends glommio
//! logs at WARN, target `glommio::executor::stall`: the executor, the task queue (the default
//! one, see [`crate::sched`]), by how much it went over, and the stack at the moment the bound
//! passed, which names what the core was doing (a conversion, an encode, a blocking file call).
//! glommio measures a run against its preemption timer (100 ms) plus a threshold;
//! [`handler`] asks for the bound minus that timer, so a run is reported once it passes
//! `max(bound, preemption timer)`.

use std::time::Duration;

use glommio::{StallDetectionHandler, TaskQueueHandle};

/// Reports runs longer than `bound` in total.
#[derive(Debug)]
struct Bound(Duration);

impl StallDetectionHandler for Bound {
    // glommio adds this to the time a run is expected to take (the preemption timer in force);
    // asking for the difference makes the bound absolute (never below the preemption timer).
    fn threshold(&self, _queue: TaskQueueHandle, max_expected_runtime: Duration) -> Option<Duration> {
        Some(self.0.saturating_sub(max_expected_runtime))
    }
}

/// The stall detector for `server.stall-threshold` (none when it is 0).
pub fn handler(bound: Duration) -> Option<Box<dyn StallDetectionHandler + 'static>> {
    (!bound.is_zero()).then(|| Box::new(Bound(bound)) as Box<dyn StallDetectionHandler>)
}
