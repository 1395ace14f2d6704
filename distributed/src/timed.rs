//! An executor that also measures each box's CPU time: the loads a rank sends to rank 0.
//!
//! CPU time of the running thread (`CLOCK_THREAD_CPUTIME_ID`), not wall time: when ranks ×
//! threads exceed the cores (as on a laptop or a 2-core CI machine), a box's wall time counts
//! whatever the OS ran meanwhile, and the balancer would chase the OS scheduler. CPU time
//! still counts cache and memory stalls. Two clock reads per box cost 0.3–0.4 µs each on our
//! VM (a system call): what a pair of reads measures with nothing between them (calibrated
//! once, the median of 201 pairs) is taken off each box's time, or md's nearly empty boxes
//! would weigh as much as full ones.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use pbs_scheduler::{Executor, IterationEnd, PhaseStats};

/// The wrapped executor and every box's CPU nanoseconds since the last [`Timed::take_loads`].
pub struct Timed {
    inner: Box<dyn Executor + Send>,
    nanos: Vec<AtomicU64>,
    /// CPU nanoseconds a pair of clock reads measures by itself.
    overhead: u64,
}

/// The median CPU time two consecutive clock reads measure.
fn clock_overhead() -> u64 {
    let mut pairs: Vec<u64> = (0..201)
        .map(|_| {
            let a = thread_cpu_nanos();
            thread_cpu_nanos().saturating_sub(a)
        })
        .collect();
    pairs.sort_unstable();
    pairs[pairs.len() / 2]
}

fn thread_cpu_nanos() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant Linux knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl Timed {
    /// `inner`, timed.
    pub fn new(inner: Box<dyn Executor + Send>) -> Timed {
        let nanos = (0..inner.boxes()).map(|_| AtomicU64::new(0)).collect();
        Timed { inner, nanos, overhead: clock_overhead() }
    }

    /// Every box's CPU seconds since the last call, the counters reset.
    pub fn take_loads(&mut self) -> Vec<f64> {
        self.nanos.iter_mut().map(|n| std::mem::take(n.get_mut()) as f64 * 1e-9).collect()
    }
}

// SAFETY: `run_phase` and `run_phase_ranges` call `task` only from the inner executor's calls
// of the wrapper's closures, with the boxes the inner executor gives (a range split into its
// boxes, in order), so the inner executor's guarantees (each box at most once, only boxes
// below `boxes()`, no return while a task runs) hold for `task`; `boxes` is the inner's.
unsafe impl Executor for Timed {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn threads(&self) -> usize {
        self.inner.threads()
    }
    fn boxes(&self) -> usize {
        self.inner.boxes()
    }
    fn run_phase(&mut self, task: &(dyn Fn(usize) + Sync)) -> PhaseStats {
        let counters = Counters(&self.nanos, self.overhead);
        self.inner.run_phase(&|k| counters.timed(k, || task(k)))
    }
    fn run_phase_ranges(&mut self, task: &(dyn Fn(Range<usize>) + Sync)) -> PhaseStats {
        let counters = Counters(&self.nanos, self.overhead);
        self.inner.run_phase_ranges(&|ks| ks.for_each(|k| counters.timed(k, || task(k..k + 1))))
    }
    fn end_iteration(&mut self) -> IterationEnd {
        self.inner.end_iteration()
    }
    fn on_each_thread(&self, f: &(dyn Fn(usize) + Sync)) {
        self.inner.on_each_thread(f)
    }
    fn planned_owners(&self) -> Option<Vec<u32>> {
        self.inner.planned_owners()
    }
    fn vcores(&self) -> Option<&pbs::VCores> {
        self.inner.vcores()
    }
    fn hint_loads(&mut self, loads: &[f64]) -> pbs_scheduler::Result<bool> {
        self.inner.hint_loads(loads)
    }
}

/// The counters alone, borrowed while the inner executor runs a phase.
struct Counters<'a>(&'a [AtomicU64], u64);

impl Counters<'_> {
    fn timed(&self, k: usize, run: impl FnOnce()) {
        let start = thread_cpu_nanos();
        run();
        // Relaxed: the counters are read after the phase, whose end (the pool's barrier)
        // orders every task's writes before the caller's reads.
        let spent = thread_cpu_nanos().saturating_sub(start).saturating_sub(self.1);
        self.0[k].fetch_add(spent, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pbs_scheduler::executors::StaticBlocks;
    use pbs_scheduler::for_each_box_mut;

    #[test]
    fn a_box_that_works_longer_is_measured_longer_and_every_box_runs_once() {
        let mut exec = Timed::new(Box::new(StaticBlocks::new(8, 2).unwrap()));
        let mut runs = vec![0u32; 8];
        let spin = |n: u64| (0..n).fold(0u64, |a, i| std::hint::black_box(a.wrapping_mul(31).wrapping_add(i)));
        for_each_box_mut(&mut exec, &mut runs, |k, r| {
            *r += 1;
            std::hint::black_box(spin(if k == 5 { 20_000_000 } else { 1000 }));
        });
        assert_eq!(runs, vec![1; 8]);
        let loads = exec.take_loads();
        let others = loads.iter().enumerate().filter(|&(k, _)| k != 5).map(|(_, l)| *l).fold(0.0, f64::max);
        assert!(loads[5] > 10.0 * others, "{loads:?}");
        assert!(exec.take_loads().iter().all(|&l| l == 0.0), "taking resets");
    }
}
