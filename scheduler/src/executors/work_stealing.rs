//! `ws`: rayon work stealing, the way Rust users write this loop today:
//! `pool.install(|| (0..n).into_par_iter().for_each(task))`. Threads can be pinned through
//! rayon's `start_handler` (rayon itself never pins, rayon#783).

use std::mem::ManuallyDrop;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;

use crate::box_timing::{BoxTimer, Local, Tracker};
use crate::clock;
use crate::executor::{Executor, PhaseStats, Task};
use crate::fork::{Birth, FORKED};

/// Rayon work stealing.
pub struct WorkStealing {
    /// Dropped only in the process its threads run in (see [`crate::fork`]).
    pool: ManuallyDrop<rayon::ThreadPool>,
    born: Birth,
    tracker: Tracker,
    boxes: usize,
    threads: usize,
    /// The process's room for rayon's threads (see [`crate::thread_budget`]). Dropping a rayon
    /// pool tells its threads to stop without waiting for them, so they may outlive the room
    /// by the moment they take to exit.
    _room: crate::thread_budget::Reservation,
}

impl WorkStealing {
    /// A rayon pool of `threads` threads over `boxes` boxes, unpinned.
    pub fn new(boxes: usize, threads: usize) -> crate::Result<Self> {
        Self::with_start(boxes, threads, Arc::new(|_| {}), BoxTimer::default())
    }

    /// With `on_start(thread index)` run first on every rayon thread (pinning goes there).
    pub fn with_start(
        boxes: usize,
        threads: usize,
        on_start: Arc<dyn Fn(usize) + Send + Sync>,
        timer: BoxTimer,
    ) -> crate::Result<Self> {
        // Rayon reads 0 threads as "one per CPU": refuse it as the other executors do.
        if threads == 0 {
            return Err(crate::Error::NoThreads);
        }
        let room = crate::thread_budget::Reservation::take(threads)?;
        pbs::check_memory("executor state", boxes, crate::box_timing::EXECUTOR_BYTES_PER_BOX)?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .stack_size(crate::stack::worker_stack_bytes()?)
            .thread_name(|i| format!("pbs-ws-{i}"))
            .start_handler(move |i| on_start(i))
            .build()
            .map_err(|e| crate::Error::RayonPool { threads, reason: e.to_string() })?;
        let tracker = Tracker::new(boxes, threads, timer)?;
        Ok(WorkStealing { pool: ManuallyDrop::new(pool), born: Birth::now(), tracker, boxes, threads, _room: room })
    }

    /// Panics with [`FORKED`] in a process forked since rayon's threads started.
    fn check_process(&self) {
        if !self.born.is_here() {
            panic!("{FORKED}");
        }
    }
}

impl Drop for WorkStealing {
    fn drop(&mut self) {
        // In a forked child rayon's threads are not here to stop, and telling them would take
        // a lock one of them may have held at the fork: the pool is left as it is.
        if self.born.is_here() {
            // SAFETY: the pool is dropped once, here, and `self` is not used after `drop`.
            unsafe { ManuallyDrop::drop(&mut self.pool) };
        }
    }
}

// SAFETY: rayon's parallel iterator over `0..boxes` yields each index once, and `install` returns
// after all of them ran.
unsafe impl Executor for WorkStealing {
    fn name(&self) -> &'static str {
        "ws"
    }
    fn threads(&self) -> usize {
        self.threads
    }
    fn boxes(&self) -> usize {
        self.boxes
    }
    fn on_each_thread(&self, f: &(dyn Fn(usize) + Sync)) {
        self.check_process();
        let fp_modes = crate::fp_env::current();
        self.pool.broadcast(|ctx| {
            crate::fp_env::adopt(fp_modes);
            f(ctx.index())
        });
    }
    fn run_phase(&mut self, task: &(dyn Fn(usize) + Sync)) -> PhaseStats {
        self.check_process();
        let (start, began) = (Instant::now(), clock::ticks());
        let tracker = &self.tracker;
        // Each fold runs on one thread: it takes the caller's floating-point modes first.
        let fp_modes = crate::fp_env::current();
        // Rayon re-raises a task's panic in `install` once the loop has unwound; the phase's
        // counters are collected either way, so the next phase counts only its own.
        let done = panic::catch_unwind(AssertUnwindSafe(|| {
            self.pool.install(|| {
                (0..self.boxes).into_par_iter().for_each_init(
                    || {
                        crate::fp_env::adopt(fp_modes);
                        FlushOnDrop {
                            thread: rayon::current_thread_index().unwrap_or(0),
                            local: Local::default(),
                            tracker,
                            started: clock::ticks(),
                        }
                    },
                    |state, k| tracker.run(k, state.thread, &mut state.local, Task::Each(task)),
                )
            })
        }));
        let stats = self.tracker.finish(began, start.elapsed());
        match done {
            Ok(()) => stats,
            Err(p) => panic::resume_unwind(p),
        }
    }
}

/// Rayon creates one `init` state per split job; counters are flushed when it is dropped.
/// A thread's busy time is the sum of its folds' lifetimes: a fold runs its boxes in one
/// sequential loop on one thread, so this is exact (unless a task itself calls rayon).
struct FlushOnDrop<'a> {
    thread: usize,
    local: Local,
    tracker: &'a Tracker,
    started: u64,
}

impl Drop for FlushOnDrop<'_> {
    fn drop(&mut self) {
        self.local.add_span(self.started, clock::ticks());
        self.tracker.flush(self.thread, std::mem::take(&mut self.local));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn panic_message(run: impl FnOnce()) -> String {
        let payload = panic::catch_unwind(AssertUnwindSafe(run)).unwrap_err();
        payload.downcast_ref::<String>().cloned().unwrap_or_default()
    }

    #[test]
    fn a_forked_child_is_refused_the_parents_rayon_threads() {
        let mut exec = WorkStealing::new(4, 2).unwrap();
        exec.born = Birth::elsewhere();
        assert!(panic_message(|| {
            exec.run_phase(&|_| {});
        })
        .contains(FORKED));
        assert!(panic_message(|| exec.on_each_thread(&|_| {})).contains(FORKED));
        // Dropped without joining threads that, in a child, are not there (its pool leaks here).
        drop(exec);
    }

    /// Dropping the executor ends its rayon threads: each one's task directory goes.
    #[cfg(target_os = "linux")]
    #[test]
    fn dropping_the_executor_ends_its_threads() {
        let tids = Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = Arc::clone(&tids);
        let on_start = Arc::new(move |_| {
            // "/proc/thread-self" names "<pid>/task/<tid>".
            let own = std::fs::read_link("/proc/thread-self").unwrap();
            record.lock().unwrap().push(own.file_name().unwrap().to_owned());
        });
        let exec = WorkStealing::with_start(4, 2, on_start, BoxTimer::default()).unwrap();
        // A broadcast waits for every thread, so every start handler has run.
        exec.on_each_thread(&|_| {});
        let tids = tids.lock().unwrap().clone();
        assert_eq!(tids.len(), 2);
        let alive = || tids.iter().filter(|t| std::path::Path::new("/proc/self/task").join(t).exists()).count();
        assert_eq!(alive(), 2);
        drop(exec);
        crate::test_wait::wait_for("rayon's threads ending after the drop", || (alive() == 0).then_some(()));
    }
}
