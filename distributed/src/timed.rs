//! An executor that also measures each box's time: the loads a rank shares with the others.
//!
//! A box's load is its wall time scaled by the share of a span of its thread's boxes during
//! which the thread really ran: a wall clock between boxes (the executors' tick counter,
//! [`pbs_scheduler::clock::ticks`], a few nanoseconds a read against ~25 for `Instant`; with
//! `Instant` this timing was 12–15 % of md's compute on one thread) and the thread's
//! CPU clock (`CLOCK_THREAD_CPUTIME_ID`, a system call of ~0.4 µs here, more under
//! oversubscription) at the start and end of spans of at least `CPU_SPAN_NS` (the last one of
//! a phase at its end). When ranks × threads exceed the cores (a laptop, a 2-core CI machine),
//! a preempted box's wall time counts what the OS ran meanwhile, and the balancer would chase
//! the OS scheduler; the scale takes that out, so a rank's loads sum to its CPU time. Timing
//! each box with the CPU clock instead cost 0.74 µs per box, more than an md box with a few
//! particles computes, and the calibrated overhead taken off left each rank ~10 % off. Where
//! the node has a core for every thread, the CPU clock is not read ([`Timed::preempted`]).

use pbs_scheduler::{clock, Executor, IterationEnd, PhaseStats};
use std::cell::RefCell;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

/// The wrapped executor and every box's nanoseconds since the last [`Timed::take_loads`].
pub struct Timed<E: Executor + ?Sized> {
    inner: Box<E>,
    nanos: Vec<AtomicU64>,
    /// The boxes timed (`None`: all); see [`Timed::time_only`].
    timed: Option<Vec<bool>>,
    /// Whether wall times are scaled by the thread's CPU clock; see [`Timed::preempted`].
    cpu_clock: bool,
}

fn thread_cpu_nanos() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant Linux knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    nanos(&ts)
}

/// A non-negative `timespec` in nanoseconds.
fn nanos(ts: &libc::timespec) -> u64 {
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Wall time, in nanoseconds, over which a thread's CPU clock is read once where threads may
/// lose their core. The pbs executor hands out md's boxes in pieces of about 16 (8 µs), and two
/// reads of the CPU clock (system calls) per piece made a rank of md 256 × 256 over 8 ranks on
/// 2 cores spend two thirds of its compute in them; over 200 µs the reads cost under 1 %.
const CPU_SPAN_NS: f64 = 200_000.0;

/// The boxes a thread timed since its CPU clock was last read, to be scaled together.
#[derive(Default)]
struct Span {
    /// Each box with its wall time in ticks.
    walls: Vec<(usize, u64)>,
    /// The thread's CPU clock and the tick counter when the span began; `None`: none open.
    start: Option<(u64, u64)>,
    /// The tick counter at the end of the span's last range.
    last: u64,
}

impl Span {
    /// Adds the span's boxes to `nanos`, their wall times scaled by the share of the span's
    /// wall time during which the thread ran (read from its CPU clock now), and closes it.
    fn close(&mut self, nanos: &[AtomicU64]) {
        let Some((cpu0, t0)) = self.start.take() else { return };
        let ns_per_tick = clock::ns_per_tick();
        let cpu = thread_cpu_nanos().saturating_sub(cpu0) as f64;
        let wall = self.last.wrapping_sub(t0) as f64 * ns_per_tick;
        // Under 1 when the thread was off its core during the span; never over (the CPU
        // clock's coarser updates, and what the thread ran between its last box and this
        // read, can make it read a little more than the wall clock).
        let scale = if wall > 0.0 { (cpu / wall).min(1.0) } else { 1.0 };
        for &(k, ticks) in &self.walls {
            add(nanos, k, ticks as f64 * ns_per_tick * scale);
        }
        self.walls.clear();
    }
}

thread_local! {
    /// The thread's open span: reused, so that timing allocates nothing once grown.
    static SPAN: RefCell<Span> = RefCell::new(Span::default());
}

/// Adds `ns` nanoseconds to box `k`'s. Relaxed: the counters are read after the phase, whose
/// end (the pool's barrier) orders every task's writes before the caller's reads.
fn add(nanos: &[AtomicU64], k: usize, ns: f64) {
    nanos[k].fetch_add(ns as u64, Ordering::Relaxed);
}

impl<E: Executor + ?Sized> Timed<E> {
    /// `inner`, timed.
    pub fn new(inner: Box<E>) -> Timed<E> {
        let nanos = (0..inner.boxes()).map(|_| AtomicU64::new(0)).collect();
        Timed { inner, nanos, timed: None, cpu_clock: true }
    }

    /// The wrapped executor.
    pub fn inner(&self) -> &E {
        &self.inner
    }

    /// The wrapped executor (its box count must stay the same).
    pub fn inner_mut(&mut self) -> &mut E {
        &mut self.inner
    }

    /// Whether threads may lose their core while they run boxes (more threads on the node than
    /// cores; the default): then the wall times are scaled by the thread's CPU clock, read
    /// around spans of boxes (`CPU_SPAN_NS`), and each phase ends with a round on the threads
    /// that closes their spans. With a core per thread that scale is 1, and both are saved.
    pub fn preempted(&mut self, may_be: bool) {
        self.cpu_clock = may_be;
    }

    /// From now on, times only the boxes marked `true` (`None`: all); the others still run,
    /// untimed, and their load reads 0. A rank's executor runs every box of the grid, the other
    /// ranks' as tasks that return at once, whose timing would cost more than they do. An
    /// error if the mask's length is not the box count.
    pub fn time_only(&mut self, timed: Option<Vec<bool>>) -> Result<(), String> {
        match &timed {
            Some(m) if m.len() != self.nanos.len() => Err(format!("{} flags for {} boxes", m.len(), self.nanos.len())),
            _ => {
                self.timed = timed;
                Ok(())
            }
        }
    }

    /// Closes every thread's open [`Span`], so that the phase's boxes are counted in the phase:
    /// one more round on the threads, only where the CPU clock is read.
    fn close_spans(&self) {
        if self.cpu_clock {
            let nanos = &self.nanos;
            self.inner.on_each_thread(&|_| SPAN.with_borrow_mut(|span| span.close(nanos)));
        }
    }

    /// Every box's seconds since the last call, the counters reset.
    pub fn take_loads(&mut self) -> Vec<f64> {
        self.nanos.iter_mut().map(|n| std::mem::take(n.get_mut()) as f64 * 1e-9).collect()
    }

    /// The seconds of the boxes `boxes` since the last call, in their order, their counters
    /// reset: [`Timed::take_loads`] for a rank that times only its own boxes (the others' read
    /// 0), without a pass over the whole grid.
    pub fn take_loads_of(&mut self, boxes: &[usize]) -> Vec<f64> {
        boxes.iter().map(|&k| std::mem::take(self.nanos[k].get_mut()) as f64 * 1e-9).collect()
    }
}

/// Runs the boxes `ks` with `task` and adds the wall time of each one that `timed` marks (all
/// without a mask) to `nanos`; with `cpu_clock`, through the thread's [`Span`], closed once it
/// lasts `CPU_SPAN_NS` (the rest at the phase's end, [`Timed::close_spans`]).
fn run_timed(nanos: &[AtomicU64], (timed, cpu_clock): (Option<&[bool]>, bool), ks: Range<usize>, task: impl Fn(usize)) {
    let is_timed = |k: usize| timed.is_none_or(|t| t[k]);
    if !ks.clone().any(is_timed) {
        ks.for_each(task);
        return;
    }
    let ns_per_tick = clock::ns_per_tick();
    if !cpu_clock {
        // One clock read per box: each box ends where the next begins.
        let mut last = clock::ticks();
        for k in ks {
            task(k);
            let now = clock::ticks();
            if is_timed(k) {
                add(nanos, k, now.wrapping_sub(last) as f64 * ns_per_tick);
            }
            last = now;
        }
        return;
    }
    SPAN.with_borrow_mut(|span| {
        let (_, t0) = *span.start.get_or_insert_with(|| (thread_cpu_nanos(), clock::ticks()));
        let mut last = clock::ticks();
        for k in ks {
            task(k);
            let now = clock::ticks();
            if is_timed(k) {
                span.walls.push((k, now.wrapping_sub(last)));
            }
            last = now;
        }
        span.last = last;
        if last.wrapping_sub(t0) as f64 * ns_per_tick >= CPU_SPAN_NS {
            span.close(nanos);
        }
    });
}

// SAFETY: `run_phase` and `run_phase_ranges` call `task` only from the inner executor's calls
// of the wrapper's closures, with the boxes the inner executor gives (a range split into its
// boxes, in order), so the inner executor's guarantees (each box at most once, only boxes
// below `boxes()`, no return while a task runs) hold for `task`; `boxes` is the inner's.
unsafe impl<E: Executor + ?Sized> Executor for Timed<E> {
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
        let (nanos, how) = (&self.nanos, (self.timed.as_deref(), self.cpu_clock));
        let stats = self.inner.run_phase(&|k| run_timed(nanos, how, k..k + 1, task));
        self.close_spans();
        stats
    }
    fn run_phase_ranges(&mut self, task: &(dyn Fn(Range<usize>) + Sync)) -> PhaseStats {
        let (nanos, how) = (&self.nanos, (self.timed.as_deref(), self.cpu_clock));
        let stats = self.inner.run_phase_ranges(&|ks| run_timed(nanos, how, ks, |k| task(k..k + 1)));
        self.close_spans();
        stats
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
    fn hint_iterations_left(&mut self, iterations: u64) {
        self.inner.hint_iterations_left(iterations)
    }
    fn wants_motion(&self) -> bool {
        self.inner.wants_motion()
    }
    fn hint_motion(&mut self, momentum: &[[f64; 3]], particles: &[f64]) -> pbs_scheduler::Result<bool> {
        self.inner.hint_motion(momentum, particles)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pbs_scheduler::executors::StaticBlocks;
    use pbs_scheduler::for_each_box_mut;

    fn spin(n: u64) -> u64 {
        (0..n).fold(0u64, |a, i| std::hint::black_box(a.wrapping_mul(31).wrapping_add(i)))
    }

    #[test]
    fn a_timespec_counts_its_seconds_as_a_billion_nanoseconds() {
        // Under a second (every test thread's CPU time) the seconds' scale cannot show.
        assert_eq!(nanos(&libc::timespec { tv_sec: 3, tv_nsec: 250 }), 3_000_000_250);
        assert_eq!(nanos(&libc::timespec { tv_sec: 0, tv_nsec: 999_999_999 }), 999_999_999);
    }

    /// The long box measures longest in a run where no short box of its range lost its core
    /// (a short box preempted for a time slice would read as long as the long one: the best of
    /// a few runs is compared).
    #[test]
    fn a_box_that_works_longer_is_measured_longer_and_every_box_runs_once() {
        let mut exec = Timed::new(Box::new(StaticBlocks::new(8, 2).unwrap()));
        let mut best_ratio = 0.0f64;
        for _ in 0..5 {
            let mut runs = vec![0u32; 8];
            for_each_box_mut(&mut exec, &mut runs, |k, r| {
                *r += 1;
                std::hint::black_box(spin(if k == 5 { 20_000_000 } else { 1000 }));
            });
            assert_eq!(runs, vec![1; 8]);
            let loads = exec.take_loads();
            let others = loads.iter().enumerate().filter(|&(k, _)| k != 5).map(|(_, l)| *l).fold(0.0, f64::max);
            best_ratio = best_ratio.max(loads[5] / others);
            assert!(exec.take_loads().iter().all(|&l| l == 0.0), "taking resets");
        }
        assert!(best_ratio > 10.0, "the long box measured {best_ratio} × the longest short one at best");
    }

    /// Boxes outside the mask still run, once each, but are not timed.
    #[test]
    fn only_the_boxes_marked_are_timed() {
        let mut exec = Timed::new(Box::new(StaticBlocks::new(6, 2).unwrap()));
        assert!(exec.time_only(Some(vec![true; 5])).unwrap_err().contains("5 flags for 6 boxes"));
        exec.time_only(Some(vec![true, false, true, false, false, false])).unwrap();
        let mut runs = vec![0u32; 6];
        for_each_box_mut(&mut exec, &mut runs, |_, r| {
            *r += 1;
            std::hint::black_box(spin(100_000));
        });
        assert_eq!(runs, vec![1; 6]);
        let loads = exec.take_loads();
        assert!(loads[0] > 0.0 && loads[2] > 0.0, "{loads:?}");
        assert!([1, 3, 4, 5].iter().all(|&k| loads[k] == 0.0), "{loads:?}");
        // Taken box by box: the same, and reset.
        for_each_box_mut(&mut exec, &mut runs, |_, _| {
            std::hint::black_box(spin(100_000));
        });
        let some = exec.take_loads_of(&[2, 0]);
        assert!(some[0] > 0.0 && some[1] > 0.0, "{some:?}");
        assert_eq!(exec.take_loads_of(&[0, 2]), vec![0.0; 2]);
    }

    /// Boxes handed out one by one on a node with a core per thread (md's case) are timed by
    /// two reads of the tick counter each, in seconds (read whole or box by box): each at
    /// least the wall time the task itself measured (the ticks enclose it), and about that
    /// much in a run where the thread kept its core. Only the timing's own window is compared:
    /// against the phase's wall time, or against another box's, the check failed when tests
    /// ran side by side and the OS took the core away during one box (a CI run timed a 200
    /// k-spin box at 3.1 ms); no box outlasts its phase, though.
    #[test]
    fn boxes_handed_out_one_by_one_are_timed_in_seconds() {
        let mut exec = Timed::new(Box::new(StaticBlocks::new(4, 1).unwrap()));
        exec.preempted(false);
        exec.time_only(Some(vec![true, true, false, true])).unwrap();
        let mut best_excess = f64::INFINITY;
        // Preemption only adds to the ticks' window; the best of a few runs shows the timing
        // itself adds next to nothing.
        for round in 0..6 {
            let inside: Vec<AtomicU64> = (0..4).map(|_| AtomicU64::new(0)).collect();
            let phase = std::time::Instant::now();
            exec.run_phase(&|k| {
                let start = std::time::Instant::now();
                std::hint::black_box(spin(if k == 1 { 4_000_000 } else { 200_000 }));
                inside[k].store(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
            });
            let phase = phase.elapsed().as_secs_f64();
            // Both readings, in seconds: no box outlasts its phase (a margin for the tick
            // counter's calibration against `Instant`).
            let loads = if round % 2 == 0 { exec.take_loads() } else { exec.take_loads_of(&[0, 1, 2, 3]) };
            assert!(loads.iter().all(|&l| l <= 1.1 * phase + 1e-3), "{loads:?} s in a phase of {phase} s");
            assert_eq!(loads[2], 0.0, "an untimed box has no load: {loads:?}");
            let mut excess = 0.0f64;
            for k in [0, 1, 3] {
                let own = inside[k].load(Ordering::Relaxed) as f64 * 1e-9;
                assert!(loads[k] >= 0.95 * own, "box {k}: {} s timed for a box of {own} s", loads[k]);
                excess = excess.max(loads[k] / own);
            }
            best_excess = best_excess.min(excess);
        }
        assert!(best_excess <= 1.25, "timed {best_excess} × the boxes' own wall time at best");
    }

    /// Where the CPU clock is read, boxes shorter than a span together are still counted in
    /// their phase (their span is closed when the phase ends), and a sleep inside a span is
    /// taken out of the boxes around it too.
    #[test]
    fn short_boxes_are_counted_in_their_phase_and_their_span_scaled() {
        let mut exec = Timed::new(Box::new(StaticBlocks::new(40, 1).unwrap()));
        exec.run_phase(&|_| {
            std::hint::black_box(spin(1000));
        });
        let loads = exec.take_loads();
        assert!(loads.iter().all(|&l| l > 0.0), "boxes of an open span were not counted: {loads:?}");
        assert!(loads.iter().sum::<f64>() < 0.01, "{loads:?}");
        exec.run_phase(&|k| {
            std::hint::black_box(spin(1000));
            if k == 20 {
                std::thread::sleep(std::time::Duration::from_millis(30));
            }
        });
        let loads = exec.take_loads();
        assert!(loads.iter().sum::<f64>() < 0.015, "30 ms asleep counted: {}", loads.iter().sum::<f64>());
    }

    /// Time a thread spends off its core (asleep here, preempted in an oversubscribed run) is
    /// not load: the boxes of its range sum to what they computed, their CPU time. (Within the
    /// range, the box that was preempted still takes more than its share.)
    #[test]
    fn time_off_the_core_is_not_load() {
        let mut exec = Timed::new(Box::new(StaticBlocks::new(2, 1).unwrap()));
        let mut out = vec![0u64; 2];
        let cpu: Vec<AtomicU64> = (0..2).map(|_| AtomicU64::new(0)).collect();
        let start = std::time::Instant::now();
        for_each_box_mut(&mut exec, &mut out, |k, o| {
            let cpu0 = thread_cpu_nanos();
            *o = spin(2_000_000);
            if k == 1 {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            cpu[k].store(thread_cpu_nanos() - cpu0, Ordering::Relaxed);
        });
        let wall = start.elapsed().as_secs_f64();
        let loads = exec.take_loads();
        // The range's loads sum to its CPU time (the thread's, read by the boxes themselves;
        // the span adds the few microseconds between them and around).
        let cpu: f64 = cpu.iter().map(|c| c.load(Ordering::Relaxed) as f64 * 1e-9).sum();
        let sum = loads[0] + loads[1];
        assert!((sum - cpu).abs() <= 0.05 * cpu + 2e-4, "loads {loads:?} for {cpu} s of CPU");
        // Counted, the sleep would leave the loads at about the phase's wall time; not counted,
        // 50 ms below it, however long the spins take (35 ms under ThreadSanitizer, where a
        // bound of 25 ms failed).
        assert!(loads[0] + loads[1] < wall - 0.04, "50 ms asleep counted: {loads:?} in {wall} s");
        assert!(loads[0] > 0.0 && loads[1] > 0.0, "{loads:?}");
        // Told that no thread loses its core, the wrapper reads the wall clock alone.
        exec.preempted(false);
        for_each_box_mut(&mut exec, &mut out, |k, _| {
            if k == 1 {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        });
        assert!(exec.take_loads()[1] >= 0.05);
    }
}
