//! The worker threads of this process's pools, all pools together, and the most they may be.
//!
//! Every thread costs the system several memory maps (its stack and guard page, the standard
//! library's signal stack and its guard). Past Linux's `vm.max_map_count` (65,530 by default)
//! a new thread fails to map its signal stack, and the standard library then aborts the
//! process inside that thread, where no error can be returned. The maps are the process's, so
//! the limit must be too: `pbs-bench run --threads 3000` builds its eleven executors side by side,
//! each under the per-pool limit, and aborted at the fifth pool's 1,364th thread (13,364 in
//! all) on the 2-core VM. So every pool, and the work-stealing executor's rayon pool, reserves
//! its threads here before it starts one, and no reservation takes the process past
//! [`MAX_THREADS`].
//!
//! A process forked from one holding threads holds none of them (only the thread that
//! forked): its count starts over at 0, and the reservations it inherited give nothing back.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::Error;
use crate::fork::Birth;
use crate::pool::MAX_THREADS;

/// Threads reserved by the live reservations. Relaxed is enough: the count publishes no other
/// data, and each change is one read-modify-write, so two pools starting at once cannot both
/// see room that only one of them has.
static HELD: AtomicUsize = AtomicUsize::new(0);

/// Threads the pools of this process hold now.
pub fn held() -> usize {
    HELD.load(Ordering::Relaxed)
}

/// In a child just forked, before any other thread exists there: none of the threads counted
/// came with it. Async-signal-safe (one atomic store), as `fork.rs`'s handler must be.
#[cfg_attr(any(miri, not(unix)), allow(dead_code))]
pub(crate) fn start_over_in_child() {
    HELD.store(0, Ordering::Relaxed);
}

/// Room for `threads` threads, given back when dropped (after the pool has joined them) in the
/// process that reserved it. A pool counts its caller, worker 0, among its threads, as its own
/// limit always did.
#[derive(Debug)]
pub(crate) struct Reservation {
    threads: usize,
    birth: Birth,
}

impl Reservation {
    /// Reserves `threads`, or names how many the other pools hold if that is past the limit.
    pub(crate) fn take(threads: usize) -> Result<Reservation, Error> {
        // First, so that the fork handler that starts the count over is registered before
        // anything is counted.
        let birth = Birth::now();
        // A compare-and-swap loop rather than `fetch_update`, which newer toolchains deprecate.
        let mut held = HELD.load(Ordering::Relaxed);
        loop {
            let Some(all) = held.checked_add(threads).filter(|&all| all <= MAX_THREADS) else {
                return Err(Error::TooManyThreads { threads, held, max: MAX_THREADS });
            };
            match HELD.compare_exchange_weak(held, all, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Ok(Reservation { threads, birth }),
                Err(now) => held = now,
            }
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.birth.is_here() {
            HELD.fetch_sub(self.threads, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Other tests of this binary start pools at the same time, so this one reserves only past
    // the limit (refused whatever they hold) and a few threads (granted while they hold less
    // than the limit, as they always do), and cannot see the count fall back. The whole budget
    // across pools, given back on drop, is tested in tests/thread_budget.rs, a process of its own.
    #[test]
    fn a_reservation_past_the_limit_is_refused_and_one_within_is_counted() {
        let e = Reservation::take(MAX_THREADS + 1).unwrap_err();
        assert!(matches!(e, Error::TooManyThreads { threads, max: MAX_THREADS, .. } if threads == MAX_THREADS + 1));
        let e = Reservation::take(usize::MAX).unwrap_err();
        assert!(e.to_string().contains(&usize::MAX.to_string()), "{e}");
        let r = Reservation::take(3).expect("3 threads fit");
        assert!(held() >= 3);
        drop(r);
    }

    /// A forked child holds none of its parent's threads (only the one that forked), so it may
    /// start a full budget of its own: the parent's count, copied at the fork, would have
    /// refused it room for threads that do not exist there.
    #[test]
    #[cfg(all(unix, not(pbs_loom), not(miri)))]
    fn a_forked_child_starts_with_no_thread_held() {
        let r = Reservation::take(10).expect("10 threads fit");
        // SAFETY: the child only touches atomics and calls `_exit`, all async-signal-safe, so
        // the locks other test threads may hold at the fork are never touched in it.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let fresh = held() == 0;
            let whole = Reservation::take(MAX_THREADS).map(|all| {
                drop(all);
                held() == 0
            });
            // The parent's reservation, dropped here, gives back nothing here.
            drop(r);
            let code = if fresh && matches!(whole, Ok(true)) && held() == 0 { 0 } else { 1 };
            // SAFETY: ends the child without running the parent's atexit handlers or destructors.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waits for our own child; `status` is a valid place for its status.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child status {status}");
        assert!(held() >= 10, "the parent still holds its reservation");
        drop(r);
    }
}
