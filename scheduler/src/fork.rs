//! Teams of threads and `fork()`.
//!
//! A process forked from a program whose pools or executors have started their threads holds
//! only the thread that called `fork`: the workers, rayon's threads and the balancer thread stay
//! in the parent. A phase in the child would wait for them for ever, and stopping them there
//! (joining them, or waking them through a lock one of them may have held at the fork) could
//! hang as well. So each team records the [`Birth`] of its threads: a phase in a forked child
//! is refused with [`FORKED`] (a panic in Rust, as a second caller's [`crate::pool::BUSY`] is;
//! `PBS_UNSUPPORTED` from C), and dropping the team there leaves its threads' state alone (the
//! memory goes with the child process). A team created in the child works as any other.
//!
//! Each child's generation is one more than its parent's: a `pthread_atfork` handler,
//! registered when the first team starts, counts it in the child, so telling the processes
//! apart costs one relaxed load per phase (where `getpid()` would cost a system call).

use std::sync::atomic::{AtomicU64, Ordering};

/// Why a phase was refused in a forked child.
pub const FORKED: &str = "this process was forked after the executor's threads started: they \
                          stay in the parent, so no phase can run here; create a new executor in \
                          the child, or fork before creating one";

/// How many forks separate this process from the one that started the program's first team (0
/// there); counted only in a child, by the thread that called `fork`, before any other thread
/// exists there.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The `pthread_atfork` child handler. Async-signal-safe, as a handler run after `fork` in a
/// multithreaded program must be: an atomic add, and the thread budget's store. (Not under
/// Miri, which cannot fork.)
#[cfg(all(unix, not(miri)))]
extern "C" fn count_in_child() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
    crate::thread_budget::start_over_in_child();
}

/// The process a team of threads started in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Birth(u64);

impl Birth {
    /// This process, for a team starting its threads now.
    pub fn now() -> Birth {
        #[cfg(all(unix, not(miri)))]
        {
            static REGISTER: std::sync::Once = std::sync::Once::new();
            // SAFETY: `count_in_child` is an `extern "C" fn()` that lives for the whole program
            // and does only an atomic add and an atomic store; the other two handlers are none.
            REGISTER.call_once(|| unsafe {
                libc::pthread_atfork(None, None, Some(count_in_child));
            });
        }
        Birth(GENERATION.load(Ordering::Relaxed))
    }

    /// Whether this is still the process the team's threads started in (and not a child
    /// forked from it since). Relaxed: the count changes only in a new child, on the thread
    /// that reads it next.
    pub fn is_here(self) -> bool {
        GENERATION.load(Ordering::Relaxed) == self.0
    }

    /// A process other than this one, as a forked child sees its parent: for tests of what
    /// a child does with threads it did not inherit.
    #[cfg(test)]
    pub(crate) fn elsewhere() -> Birth {
        Birth(GENERATION.load(Ordering::Relaxed).wrapping_add(1))
    }
}

#[cfg(all(test, unix, not(pbs_loom), not(miri)))]
mod tests {
    use super::*;

    #[test]
    fn a_forked_child_is_not_the_process_a_team_started_in() {
        let birth = Birth::now();
        assert!(birth.is_here());
        // SAFETY: the child only reads atomics and calls `_exit`, all async-signal-safe, so
        // the locks other test threads may hold at the fork are never touched in it.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let code = if !birth.is_here() && Birth::now().is_here() { 0 } else { 1 };
            // SAFETY: ends the child without running the parent's atexit handlers or destructors.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waits for our own child; `status` is a valid place for its status.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child status {status}");
        assert!(birth.is_here(), "the parent is the same process");
    }
}
