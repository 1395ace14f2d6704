//! `eager`: one shared FIFO of all the phase's boxes in index order; every idle worker pops the
//! next one. StarPU's default scheduler and the paper's comparator. The FIFO is an atomic
//! cursor over `0..n` — the cheapest FIFO there is, so the comparison is fair to eager.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_utils::CachePadded;

use crate::box_timing::{BoxTimer, Tracker};
use crate::executor::{pool_phase, Executor, PhaseStats, Task};
use crate::pool::Pool;

/// One shared FIFO.
pub struct EagerFifo {
    pool: Pool,
    tracker: Tracker,
    boxes: usize,
    next: CachePadded<AtomicUsize>,
}

impl EagerFifo {
    /// `threads` workers over `boxes` boxes, unpinned.
    pub fn new(boxes: usize, threads: usize) -> crate::Result<Self> {
        Self::with_pool(boxes, Pool::new(threads, Arc::new(|_| {}))?, BoxTimer::default())
    }

    /// Over an existing pool.
    pub fn with_pool(boxes: usize, pool: Pool, timer: BoxTimer) -> crate::Result<Self> {
        pbs::check_memory("executor state", boxes, crate::box_timing::EXECUTOR_BYTES_PER_BOX)?;
        let tracker = Tracker::new(boxes, pool.threads(), timer)?;
        Ok(EagerFifo { pool, tracker, boxes, next: CachePadded::new(AtomicUsize::new(0)) })
    }
}

// SAFETY: each box index comes from one `fetch_add` on the shared counter, so once, and only below
// `boxes`; the pool returns after every worker's job ended.
unsafe impl Executor for EagerFifo {
    fn name(&self) -> &'static str {
        "eager"
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
        self.next.store(0, Ordering::SeqCst);
        let (n, next) = (self.boxes, &self.next);
        pool_phase(&self.pool, &mut self.tracker, &|t, tracker, local| loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            if k >= n {
                break;
            }
            tracker.run(k, t, local, Task::Each(task));
        })
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    }
}
