//! `ws`: rayon work stealing, the way Rust users write this loop today:
//! `pool.install(|| (0..n).into_par_iter().for_each(task))`. Threads can be pinned through
//! rayon's `start_handler` (rayon itself never pins, rayon#783).

use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;

use crate::executor::{BoxTimer, Executor, Local, PhaseStats, Tracker};

/// Rayon work stealing.
pub struct WorkStealing {
    pool: rayon::ThreadPool,
    tracker: Tracker,
    boxes: usize,
    threads: usize,
}

impl WorkStealing {
    /// A rayon pool of `threads` threads over `boxes` boxes, unpinned.
    pub fn new(boxes: usize, threads: usize) -> Self {
        Self::with_start(boxes, threads, Arc::new(|_| {}), BoxTimer::default())
    }

    /// With `on_start(thread index)` run first on every rayon thread (pinning goes there).
    pub fn with_start(
        boxes: usize,
        threads: usize,
        on_start: Arc<dyn Fn(usize) + Send + Sync>,
        timer: BoxTimer,
    ) -> Self {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("pbs-ws-{i}"))
            .start_handler(move |i| on_start(i))
            .build()
            .expect("build the rayon pool");
        WorkStealing { pool, tracker: Tracker::new(boxes, threads, timer), boxes, threads }
    }
}

impl Executor for WorkStealing {
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
        self.pool.broadcast(|ctx| f(ctx.index()));
    }
    fn run_phase(&mut self, task: &(dyn Fn(usize) + Sync)) -> PhaseStats {
        let start = Instant::now();
        let tracker = &self.tracker;
        // Rayon re-raises a task's panic in `install` once the loop has unwound.
        self.pool.install(|| {
            (0..self.boxes).into_par_iter().for_each_init(
                || FlushOnDrop(rayon::current_thread_index().unwrap_or(0), Local::default(), tracker),
                |state, k| tracker.run(k, state.0, &mut state.1, task),
            )
        });
        self.tracker.finish(start.elapsed())
    }
}

/// Rayon creates one `init` state per split job; counters are flushed when it is dropped.
struct FlushOnDrop<'a>(usize, Local, &'a Tracker);

impl Drop for FlushOnDrop<'_> {
    fn drop(&mut self) {
        self.2.flush(self.0, std::mem::take(&mut self.1));
    }
}
