//! Waiting, in tests, for another thread to have done something.
//!
//! A bound of a few seconds on such a wait is a guess about the machine: on a loaded CI
//! machine a thread that panics prints its backtrace first, and one under `SCHED_BATCH` or
//! `SCHED_IDLE` waits for a core, each for as long as the machine makes it. The bound here only
//! turns a hang into a failure, so it is generous.

use std::time::{Duration, Instant};

/// How long a test waits before it calls the awaited event lost.
pub(crate) const PATIENCE: Duration = Duration::from_secs(120);

/// Calls `poll` every millisecond until it gives a value, and returns that value; panics
/// naming `what` when [`PATIENCE`] has passed first.
pub(crate) fn wait_for<T>(what: &str, mut poll: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(1));
        if let Some(v) = poll() {
            return v;
        }
        assert!(start.elapsed() < PATIENCE, "{what}: not within {PATIENCE:?}");
    }
}
