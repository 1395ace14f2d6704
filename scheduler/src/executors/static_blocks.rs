//! `static`: thread `t` runs the contiguous block `[t·n/T, (t+1)·n/T)`, like OpenMP
//! `schedule(static)`. No balancing at all; perfect affinity.

use std::sync::Arc;

use crate::box_timing::{BoxTimer, Tracker};
use crate::executor::{pool_phase, Executor, PhaseStats, Task};
use crate::pool::Pool;

/// Equal contiguous blocks.
pub struct StaticBlocks {
    pool: Pool,
    tracker: Tracker,
    boxes: usize,
}

impl StaticBlocks {
    /// `threads` workers over `boxes` boxes, unpinned.
    pub fn new(boxes: usize, threads: usize) -> crate::Result<Self> {
        Self::with_pool(boxes, Pool::new(threads, Arc::new(|_| {}))?, BoxTimer::default())
    }

    /// Over an existing pool (pinned or not).
    pub fn with_pool(boxes: usize, pool: Pool, timer: BoxTimer) -> crate::Result<Self> {
        pbs::check_memory("executor state", boxes, crate::box_timing::EXECUTOR_BYTES_PER_BOX)?;
        let tracker = Tracker::new(boxes, pool.threads(), timer)?;
        Ok(StaticBlocks { pool, tracker, boxes })
    }

    /// Block of thread `t`.
    pub fn block(boxes: usize, threads: usize, t: usize) -> std::ops::Range<usize> {
        (t * boxes / threads)..((t + 1) * boxes / threads)
    }
}

// SAFETY: the blocks `t·n/T..(t+1)·n/T` partition `0..n`, and the pool returns after every
// worker's job ended.
unsafe impl Executor for StaticBlocks {
    fn name(&self) -> &'static str {
        "static"
    }
    fn threads(&self) -> usize {
        self.pool.threads()
    }
    fn boxes(&self) -> usize {
        self.boxes
    }
    fn on_each_thread(&self, f: &(dyn Fn(usize) + Sync)) {
        self.pool.run(f)
    }
    fn run_phase(&mut self, task: &(dyn Fn(usize) + Sync)) -> PhaseStats {
        self.phase(Task::Each(task))
    }
    fn run_phase_ranges(&mut self, task: &(dyn Fn(std::ops::Range<usize>) + Sync)) -> PhaseStats {
        self.phase(Task::Ranges(task))
    }
    fn planned_owners(&self) -> Option<Vec<u32>> {
        Some(crate::first_touch::placement_owners_of_blocks(self.boxes, self.pool.threads()))
    }
}

impl StaticBlocks {
    fn phase(&mut self, task: Task<'_>) -> PhaseStats {
        let (n, threads) = (self.boxes, self.pool.threads());
        pool_phase(&self.pool, &mut self.tracker, &|t, tracker, local| {
            if tracker.timing() {
                tracker.run_sampling_boxes(Self::block(n, threads, t), t, local, task);
            } else {
                // Untimed, the block is a plain loop, as `schedule(static)` compiles to, in
                // pieces of 128 boxes, which ran faster than one long loop of calls
                // (docs/design-notes.md, "Static blocks"): the baseline gets the faster.
                let block = Self::block(n, threads, t);
                for start in block.clone().step_by(128) {
                    tracker.run_range(start..(start + 128).min(block.end), t, local, task);
                }
            }
        })
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    }
}
