//! The one interface every executor implements, and the bookkeeping they share.
//!
//! A phase runs a task on every box exactly once and ends with a barrier. Tasks read their
//! neighbours' data from the previous phase and write only their own box ("owner computes"),
//! so results do not depend on the executor; [`for_each_box_mut`] enforces the write side by
//! handing each task a `&mut` to its own box only.

use std::ops::Range;
use std::time::Duration;

use crate::box_timing::{Local, Tracker};
use crate::clock;

/// What one phase did.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct PhaseStats {
    /// Wall time of the phase: the executor's whole `run_phase` call, its barrier and its
    /// bookkeeping before and after the threads' work included.
    pub wall: Duration,
    /// Boxes run by each thread.
    pub boxes: Vec<usize>,
    /// Task time of each thread, measured around its whole work in the phase (two clock reads
    /// per thread, or per rayon fold for `ws`): exact, up to the clock's resolution.
    pub busy: Vec<Duration>,
    /// Box executions that ran on the same thread as that box's previous execution.
    pub same_thread: usize,
    /// Box executions that had a previous execution to compare with.
    pub compared: usize,
    /// The threads' part of the phase: from handing the work out to its return to the
    /// executor, after every thread's work (`wall` less the executor's own work around it).
    pub pool_wall: Duration,
    /// When each thread began its work, counted from the start of `pool_wall` (0 for a thread
    /// that had none).
    pub started: Vec<Duration>,
    /// When each thread ended its work, counted likewise: between `started` and `ended` a
    /// thread was busy but for the time it spent looking for work (or, in pbs, balancing).
    pub ended: Vec<Duration>,
}

/// Where a phase's time went while threads were not running tasks, each part as the mean over
/// threads (so that `busy mean + the parts = wall`, up to the two clocks' agreement): see
/// [`PhaseStats::idle_parts`] and docs/design.md, "Idle time".
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct IdleParts {
    /// From the start of the threads' part to a thread's first work: waking up and being
    /// handed the phase.
    pub late_start: f64,
    /// Between a thread's first start and last end, outside its tasks: looking for work to
    /// steal, rayon's splitting between folds, pbs's balancing in idle time.
    pub between_tasks: f64,
    /// From a thread's last end to the last thread's: waiting at the barrier for the others.
    pub waiting: f64,
    /// From the last thread's end to the return of the threads' part: noticing that all are
    /// done.
    pub barrier: f64,
    /// The executor's own work before and after the threads' part (pbs's bookkeeping).
    pub executor: f64,
}

impl IdleParts {
    /// The parts' sum.
    pub fn total(&self) -> f64 {
        self.late_start + self.between_tasks + self.waiting + self.barrier + self.executor
    }

    /// Adds `other`'s parts, each times `scale`.
    pub fn add(&mut self, other: &IdleParts, scale: f64) {
        self.late_start += other.late_start * scale;
        self.between_tasks += other.between_tasks * scale;
        self.waiting += other.waiting * scale;
        self.barrier += other.barrier * scale;
        self.executor += other.executor * scale;
    }
}

impl PhaseStats {
    /// `(Σ busy / threads) / wall` of this phase (docs/design.md's efficiency); `None` for a phase
    /// that took no time.
    pub fn efficiency(&self) -> Option<f64> {
        let wall = self.wall.as_secs_f64();
        let busy: f64 = self.busy.iter().map(Duration::as_secs_f64).sum();
        (wall > 0.0).then(|| busy / self.busy.len().max(1) as f64 / wall)
    }

    /// Where the phase's time went while threads were not running tasks, in seconds (means
    /// over threads); zero for a phase with no per-thread spans.
    pub fn idle_parts(&self) -> IdleParts {
        let secs = Duration::as_secs_f64;
        let threads = self.busy.len().min(self.started.len()).min(self.ended.len());
        if threads == 0 {
            return IdleParts::default();
        }
        let last = self.ended.iter().map(secs).fold(0.0, f64::max);
        let mean = |f: &dyn Fn(usize) -> f64| (0..threads).map(f).sum::<f64>() / threads as f64;
        let (start, end, busy) = (|t| secs(&self.started[t]), |t| secs(&self.ended[t]), |t| secs(&self.busy[t]));
        IdleParts {
            late_start: mean(&|t| start(t)),
            between_tasks: mean(&|t| (end(t) - start(t) - busy(t)).max(0.0)),
            waiting: mean(&|t| last - end(t)),
            barrier: (secs(&self.pool_wall) - last).max(0.0),
            executor: (secs(&self.wall) - secs(&self.pool_wall)).max(0.0),
        }
    }

    /// Share of the box executions that ran on the thread of that box's previous execution;
    /// `None` when none had a previous execution to compare with.
    pub fn affinity(&self) -> Option<f64> {
        (self.compared > 0).then(|| self.same_thread as f64 / self.compared as f64)
    }
}

/// An executor: runs every box of a grid once per phase on a team of threads.
///
/// # Safety
///
/// [`for_each_box_mut`] hands the task of box `k` a `&mut` to `data[k]`, trusting the
/// executor's [`Executor::run_phase`] for what makes those references unique. An
/// implementation must, in every call of `run_phase(task)`:
/// - call `task(k)` at most once for each `k`, and only for `k < self.boxes()` (exactly once
///   for each, unless a task panics: then the others may be skipped); likewise, in every call
///   of `run_phase_ranges(task)`, pass `task` only ranges within `0..self.boxes()` that
///   cover each box at most once (exactly once unless a task panics);
/// - not return (nor unwind) while a call of `task` is still running on any thread (in
///   either method);
/// - report through [`Executor::boxes`] the same number for the executor's whole life.
///
/// Every executor of this crate is tested for it (`tests/executors.rs`); an executor
/// that wraps one of them and forwards `run_phase` to it keeps it.
///
/// Safe code cannot claim the contract: an executor that runs a box twice and one past the
/// end (which aliased `&mut` and wrote past a `Vec` when this trait was safe) does not compile
/// without `unsafe impl`:
///
/// ```compile_fail,E0200
/// use pbs_scheduler::{Executor, PhaseStats};
/// struct Twice;
/// impl Executor for Twice {
///     fn name(&self) -> &'static str { "twice" }
///     fn threads(&self) -> usize { 1 }
///     fn boxes(&self) -> usize { 4 }
///     fn run_phase(&mut self, task: &(dyn Fn(usize) + Sync)) -> PhaseStats {
///         task(3);
///         task(3);
///         task(4);
///         PhaseStats::default()
///     }
///     fn on_each_thread(&self, f: &(dyn Fn(usize) + Sync)) { f(0) }
/// }
/// ```
pub unsafe trait Executor {
    /// Short name: `pbs`, `ws`, `eager`, `static`, `rcb`, `norcb`, `packsteal`, `vector-rcb`,
    /// `vector-greedy`, `norm-greedy` or `diffusion`.
    fn name(&self) -> &'static str;
    /// Number of worker threads.
    fn threads(&self) -> usize;
    /// Number of boxes; it never changes.
    fn boxes(&self) -> usize;
    /// Runs `task(k)` exactly once for every box `k` and returns when all have run. A panic in
    /// a task is re-raised here after the phase ended on every thread; the executor stays
    /// usable. In a process forked since the executor started its threads it panics with
    /// [`crate::fork::FORKED`] and runs nothing.
    fn run_phase(&mut self, task: &(dyn Fn(usize) + Sync)) -> PhaseStats;
    /// [`Executor::run_phase`] with one call per range of boxes: `task(a..b)` runs boxes `a`
    /// to `b − 1`, the ranges together covering every box exactly once. One indirect call per
    /// range lets a generic loop inline its body ([`for_each_box_mut`] does). The default
    /// calls `task(k..k + 1)` for each box.
    fn run_phase_ranges(&mut self, task: &(dyn Fn(Range<usize>) + Sync)) -> PhaseStats {
        self.run_phase(&|k| task(k..k + 1))
    }
    /// Called between iterations. The PBS executor turns measured box times into loads and
    /// may rebalance here; the others have nothing to do.
    fn end_iteration(&mut self) -> IterationEnd {
        IterationEnd::default()
    }
    /// Runs `f(worker id)` once on every worker thread (to open or read per-thread counters,
    /// for instance), outside any phase.
    fn on_each_thread(&self, f: &(dyn Fn(usize) + Sync));
    /// Thread that will run each box in the next phase, where the executor decides it in
    /// advance (`pbs`, `static`); `None` for dynamic executors.
    fn planned_owners(&self) -> Option<Vec<u32>> {
        None
    }
    /// The balancer's vCores (positions, weights, owners, charges) where the executor has a
    /// balancer (`pbs`); `None` for the others. Reachable from an executor built by name
    /// ([`crate::runtime::Runtime::executor`]), to draw or log the cells.
    fn vcores(&self) -> Option<&pbs::VCores> {
        None
    }
    /// Cost hints: maps the boxes for these loads now, between phases, where the executor
    /// balances (`pbs`; returns `Ok(true)`), for loads known in advance (an obstacle map, a
    /// density) so that the first iterations do not run on a uniform guess. Executors that do
    /// not balance ignore it (`Ok(false)`). An error names a wrong length or a bad load.
    fn hint_loads(&mut self, loads: &[f64]) -> crate::Result<bool> {
        let _ = loads;
        Ok(false)
    }
    /// Whether the executor's balancer uses how the load moves ([`Executor::hint_motion`]):
    /// `norcb`. An app calls `hint_motion` only then, so the others cost it nothing.
    fn wants_motion(&self) -> bool {
        false
    }
    /// Motion hints, between iterations: per box, the sum of its particles' velocities
    /// (`momentum`, unit masses; x, y, z, with z 0 or ignored on a 2D grid) and their number
    /// (`particles`), for a balancer that cuts along the flow (`norcb`, which keeps the last
    /// hints until the next). Executors that do not use them ignore them (`Ok(false)`). An
    /// error names a wrong length or a bad value.
    fn hint_motion(&mut self, momentum: &[[f64; 3]], particles: &[f64]) -> crate::Result<bool> {
        let _ = (momentum, particles);
        Ok(false)
    }
    /// Run-length hint: the run ends after `iterations` more calls of
    /// [`Executor::end_iteration`] (0 forgets the hint). An executor that rebalances (`pbs`,
    /// the remappers) then decides nothing at the last one's end, where no iteration would run
    /// on the new owners: it starts no rebalancing and leaves one under way as it is (taken on
    /// later, should the run go on). Before that, `pbs` starts one only where what it wins per
    /// iteration, over the iterations left, repays its cost
    /// ([`RebalancePolicy::run_ends_in`](crate::executors::RebalancePolicy::run_ends_in)). The
    /// loads are measured and reported as ever. The others ignore it; without it an executor
    /// assumes the run goes on.
    fn hint_iterations_left(&mut self, iterations: u64) {
        let _ = iterations;
    }
}

/// The task of a phase as an executor holds it: one call per box, or one call per range of
/// boxes (see [`Executor::run_phase_ranges`]).
#[derive(Clone, Copy)]
pub enum Task<'a> {
    /// `f(k)` for each box.
    Each(&'a (dyn Fn(usize) + Sync)),
    /// `f(range)` for each range of boxes.
    Ranges(&'a (dyn Fn(Range<usize>) + Sync)),
}

impl Task<'_> {
    /// Runs the boxes `ks`.
    #[inline]
    pub fn run_range(self, ks: Range<usize>) {
        match self {
            Task::Each(f) => ks.for_each(f),
            Task::Ranges(f) => f(ks),
        }
    }

    /// Runs the boxes of `ks` (increasing box ids), a range task once per contiguous run.
    #[inline]
    pub fn run_list(self, ks: &[u32]) {
        match self {
            Task::Each(f) => ks.iter().for_each(|&k| f(k as usize)),
            Task::Ranges(f) => {
                let mut rest = ks;
                while let Some(&first) = rest.first() {
                    let len = rest.iter().enumerate().take_while(|&(i, &k)| k == first + i as u32).count();
                    f(first as usize..first as usize + len);
                    rest = &rest[len..];
                }
            }
        }
    }
}

/// What happened between two iterations.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct IterationEnd {
    /// Whether a rebalancing's new owners were taken on (they apply from the next phase).
    pub rebalanced: bool,
    /// The executor's time between the iteration's last phase and the next one: its
    /// bookkeeping, and deciding on, starting or taking on a rebalancing (with the balancer
    /// run here, when it runs here).
    pub rebalance_time: Duration,
    /// What rebalancing added to this iteration's wall time: `rebalance_time`, plus the time
    /// a balancer running in the threads' idle time ran past the last busy thread.
    pub rebalance_critical: Duration,
    /// Balancer time run in the threads' idle time during this iteration's phases.
    pub balancing_in_slack: Duration,
    /// Time the balancer thread spent on the rebalancing that came back at this iteration's
    /// end (it ran beside the workers, on a core they may have needed: see
    /// [`crate::background`]).
    pub balancing_in_background: Duration,
    /// Whether a rebalancing was given up (it would have ended too late, or failed).
    pub rebalance_abandoned: bool,
    /// Whether the rebalancing taken on started over from a bisection, the cells having been
    /// far from balance ([`pbs::rebalance`]).
    pub rebalance_restarted: bool,
    /// Boxes whose owner changed.
    pub migrations: usize,
    /// `max_avg` of the thread loads measured in the iteration that just ended.
    pub max_avg: f64,
    /// Whether a rebalancing is under way (in the threads' idle time or on the balancer
    /// thread) as the next iteration starts.
    pub under_way: bool,
    /// Of `under_way`: whether it runs in the threads' idle time (else on the balancer thread).
    pub under_way_in_idle_time: bool,
}

thread_local! {
    static WORKER: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

/// Id of the worker the calling thread is, inside a phase of any executor (`None` outside).
pub fn current_worker() -> Option<usize> {
    let id = WORKER.with(|w| w.get());
    if id != usize::MAX {
        return Some(id);
    }
    rayon::current_thread_index()
}

/// Marks the calling thread as worker `id` until the guard is dropped.
pub(crate) fn as_worker(id: usize) -> impl Drop {
    struct Reset(usize);
    impl Drop for Reset {
        fn drop(&mut self) {
            WORKER.with(|w| w.set(self.0));
        }
    }
    let before = WORKER.with(|w| w.replace(id));
    Reset(before)
}

/// One phase on a pool: `body(worker, tracker, counters)` runs on every worker, timed around
/// its whole work, then each worker's counters are flushed and the phase's statistics
/// collected. The scaffolding shared by the pool-based executors; `body` is what differs (a
/// block, a FIFO, an owner list). A panic in a task is re-raised after the counters are
/// collected, so the next phase counts only its own boxes.
pub(crate) fn pool_phase(
    pool: &crate::pool::Pool,
    tracker: &mut Tracker,
    body: &(dyn Fn(usize, &Tracker, &mut Local) + Sync),
) -> std::thread::Result<PhaseStats> {
    let (start, began) = (std::time::Instant::now(), clock::ticks());
    let tr: &Tracker = tracker;
    let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pool.run(&|t| {
            // Flushed on unwind too: a worker whose task panicked still ran boxes.
            let mut flush = FlushAtEnd { t, tracker: tr, local: Local::default(), started: clock::ticks() };
            body(t, tr, &mut flush.local);
        })
    }));
    let stats = tracker.finish(began, start.elapsed());
    done.map(|()| stats)
}

/// Adds a worker's busy time and flushes its counters when its part of the phase ends.
struct FlushAtEnd<'a> {
    t: usize,
    tracker: &'a Tracker,
    local: Local,
    started: u64,
}

impl Drop for FlushAtEnd<'_> {
    fn drop(&mut self) {
        self.local.add_span(self.started, clock::ticks());
        self.tracker.flush(self.t, std::mem::take(&mut self.local));
    }
}

/// Runs `f(k, &mut data[k])` once for every box under `exec`.
///
/// ```
/// use pbs_scheduler::{for_each_box_mut, executors::StaticBlocks, Executor};
/// let mut exec = StaticBlocks::new(1000, 2).unwrap();
/// let old: Vec<f64> = (0..1000).map(|k| k as f64).collect();
/// let mut new = vec![0.0; 1000];
/// for_each_box_mut(&mut exec, &mut new, |k, out| *out = old[k] + old[(k + 1) % 1000]);
/// assert_eq!(new[999], 999.0);
/// ```
pub fn for_each_box_mut<T: Send>(
    exec: &mut dyn Executor,
    data: &mut [T],
    f: impl Fn(usize, &mut T) + Sync,
) -> PhaseStats {
    assert_eq!(data.len(), exec.boxes(), "one datum per box");
    let (base, len) = (SendPtr(data.as_mut_ptr()), data.len());
    // One indirect call per range, and `f` inlined in the loop over it.
    exec.run_phase_ranges(&|r: Range<usize>| {
        let p = base;
        // A cheap guard: the contract already excludes it.
        assert!(r.end <= len, "the executor ran boxes {r:?} of {len}");
        for k in r {
            // SAFETY: `Executor` is an unsafe trait whose implementations cover each box at
            // most once per phase and return only after every call ended, so the `&mut`
            // handed out are disjoint and do not outlive the borrow of `data`; `k < len` by
            // the check above.
            let slot = unsafe { &mut *p.0.add(k) };
            f(k, slot)
        }
    })
}

/// Several per-box arrays written by one phase: a tuple of two or three `&'s mut [T]` of one
/// length each, handed to [`for_each_box_zip`]. Sealed: the tuples below are all there is.
pub trait BoxArrays<'s>: sealed::Sealed {
    /// What the task of box `k` gets: a tuple of `&'s mut` to element `k` of each array
    /// (unique, as `iter_mut` hands them out: each box runs once per phase).
    type Refs;
    /// The arrays' raw base pointers, shareable between workers.
    #[doc(hidden)]
    type Raw: Copy + Send + Sync;
    /// The common length, or the lengths if they differ.
    #[doc(hidden)]
    fn length(&self) -> Result<usize, Vec<usize>>;
    #[doc(hidden)]
    fn raw(self) -> Self::Raw;
    /// # Safety
    /// `k` is below the length, `raw` comes from arrays mutably borrowed for `'s`, and no
    /// other reference to element `k` of any of them is made during `'s`.
    #[doc(hidden)]
    unsafe fn at(raw: Self::Raw, k: usize) -> Self::Refs;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! box_arrays {
    ($($t:ident $v:ident $i:tt),+) => {
        impl<$($t),+> sealed::Sealed for ($(&mut [$t],)+) {}
        impl<'s, $($t: Send),+> BoxArrays<'s> for ($(&'s mut [$t],)+) {
            type Refs = ($(&'s mut $t,)+);
            type Raw = ($(SendPtr<$t>,)+);
            fn length(&self) -> Result<usize, Vec<usize>> {
                let lengths = vec![$(self.$i.len()),+];
                if lengths.iter().all(|&l| l == lengths[0]) { Ok(lengths[0]) } else { Err(lengths) }
            }
            fn raw(self) -> Self::Raw {
                ($(SendPtr(self.$i.as_mut_ptr()),)+)
            }
            unsafe fn at(raw: Self::Raw, k: usize) -> Self::Refs {
                let ($($v,)+) = raw;
                // SAFETY: the caller's contract: `k` is in bounds of every array, which stay
                // mutably borrowed for 's, and element `k` is referenced nowhere else.
                unsafe { ($(&mut *$v.0.add(k),)+) }
            }
        }
    };
}
box_arrays!(A a 0, B b 1);
box_arrays!(A a 0, B b 1, C c 2);

/// Runs `f(k, (&mut a[k], &mut b[k], …))` once for every box under `exec`: a phase that
/// writes several per-box arrays (two or three, of one length each).
///
/// ```
/// use pbs_scheduler::{for_each_box_zip, executors::StaticBlocks};
/// let mut exec = StaticBlocks::new(100, 2).unwrap();
/// let (mut position, mut velocity) = (vec![0.0f64; 100], vec![1.0f64; 100]);
/// for_each_box_zip(&mut exec, (&mut position[..], &mut velocity[..]), |k, (x, v)| {
///     *v -= 0.1 * k as f64;
///     *x += *v;
/// });
/// assert_eq!((position[10], velocity[10]), (0.0, 0.0));
/// ```
pub fn for_each_box_zip<'s, D: BoxArrays<'s>>(
    exec: &mut dyn Executor,
    arrays: D,
    f: impl Fn(usize, D::Refs) + Sync,
) -> PhaseStats {
    let len = match arrays.length() {
        Ok(len) => len,
        Err(lengths) => panic!("for_each_box_zip: arrays of different lengths {lengths:?}"),
    };
    assert_eq!(len, exec.boxes(), "one datum per box in every array");
    let raw = arrays.raw();
    exec.run_phase_ranges(&|r: Range<usize>| {
        assert!(r.end <= len, "the executor ran boxes {r:?} of {len}");
        for k in r {
            // SAFETY: as in `for_each_box_mut`: the unsafe `Executor` contract covers each
            // box at most once per phase and returns after every task ended, so the
            // references are disjoint; `k < len` by the check above.
            f(k, unsafe { D::at(raw, k) })
        }
    })
}

/// Runs `map(k)` once for every box under `exec` and folds the results **in box order**
/// with `combine`, starting from `identity`: a per-phase reduction whose result, floating
/// point included, is the same under every executor and thread count.
///
/// ```
/// use pbs_scheduler::{reduce_boxes, executors::StaticBlocks};
/// let mut exec = StaticBlocks::new(1000, 2).unwrap();
/// let heat: Vec<f64> = (0..1000).map(|k| 0.1 * k as f64).collect();
/// let (total, _stats) = reduce_boxes(&mut exec, |k| heat[k], 0.0, |a, b| a + b);
/// assert_eq!(total, heat.iter().fold(0.0, |a, b| a + b)); // bit for bit
/// ```
pub fn reduce_boxes<R: Send>(
    exec: &mut dyn Executor,
    map: impl Fn(usize) -> R + Sync,
    identity: R,
    combine: impl FnMut(R, R) -> R,
) -> (R, PhaseStats) {
    let mut each: Vec<Option<R>> = (0..exec.boxes()).map(|_| None).collect();
    let stats = for_each_box_mut(exec, &mut each, |k, slot| *slot = Some(map(k)));
    let total = each.into_iter().map(|r| r.expect("the executor ran every box")).fold(identity, combine);
    (total, stats)
}

/// A raw pointer shared between workers, each of which derives `&mut` to different elements
/// (only this module makes one).
#[doc(hidden)]
pub struct SendPtr<T>(*mut T);
impl<T> Clone for SendPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SendPtr<T> {}
// SAFETY: the pointer field is private, so moving or sharing a `SendPtr` does nothing by
// itself: only this module dereferences it (`for_each_box_mut`, and `BoxArrays::at`, an
// unsafe fn), each time to derive a `&mut T` to a box no other thread touches in that phase.
// Such a `&mut T` may end up on another thread, hence `T: Send`.
unsafe impl<T: Send> Send for SendPtr<T> {}
// SAFETY: as for `Send`: shared between workers only to derive disjoint `&mut T`.
unsafe impl<T: Send> Sync for SendPtr<T> {}

#[cfg(test)]
mod tests {
    #[test]
    fn a_phase_reports_its_efficiency_and_affinity() {
        let ms = std::time::Duration::from_millis;
        let s = super::PhaseStats {
            wall: ms(10),
            boxes: vec![3, 1],
            busy: vec![ms(9), ms(6)],
            same_thread: 3,
            compared: 4,
            ..Default::default()
        };
        assert!((s.efficiency().unwrap() - 0.75).abs() < 1e-12);
        assert_eq!(s.affinity(), Some(0.75));
        let empty = super::PhaseStats::default();
        assert_eq!((empty.efficiency(), empty.affinity()), (None, None));
        assert_eq!(empty.idle_parts(), super::IdleParts::default());
    }

    /// A range task runs a list of boxes once per contiguous run of ids.
    #[test]
    fn a_list_runs_as_its_contiguous_runs() {
        let ranges = std::sync::Mutex::new(Vec::new());
        let record = |r: std::ops::Range<usize>| ranges.lock().unwrap().push(r);
        super::Task::Ranges(&record).run_list(&[0, 1, 2, 5, 6, 9]);
        assert_eq!(ranges.into_inner().unwrap(), [0..3, 5..7, 9..10]);
    }

    /// The worker id is set for the guard's life and put back after, also when nested.
    #[test]
    fn a_worker_id_lasts_as_long_as_its_guard() {
        assert_eq!(super::current_worker(), None);
        {
            let _outer = super::as_worker(3);
            {
                let _inner = super::as_worker(5);
                assert_eq!(super::current_worker(), Some(5));
            }
            assert_eq!(super::current_worker(), Some(3));
        }
        assert_eq!(super::current_worker(), None);
    }

    /// What an executor that does not balance answers by default.
    #[test]
    fn an_executor_that_does_not_balance_answers_the_defaults() {
        use super::Executor;
        let mut e = crate::executors::EagerFifo::new(8, 2).unwrap();
        assert_eq!(e.planned_owners(), None);
        assert!(e.vcores().is_none() && !e.wants_motion());
        assert!(!e.hint_loads(&[1.0; 8]).unwrap());
        assert!(!e.hint_motion(&[[0.0; 3]; 8], &[1.0; 8]).unwrap());
        assert_eq!(e.end_iteration(), super::IterationEnd::default());
    }

    /// Parts add up part by part, each scaled (a run's share of phases, `report.rs`).
    #[test]
    fn idle_parts_add_part_by_part_scaled() {
        let parts = |x: f64| super::IdleParts {
            late_start: x,
            between_tasks: 2.0 * x,
            waiting: 3.0 * x,
            barrier: 4.0 * x,
            executor: 5.0 * x,
        };
        let mut sum = parts(1.0);
        sum.add(&parts(2.0), 0.5);
        sum.add(&parts(3.0), 1.0);
        assert_eq!(sum, parts(5.0));
        assert_eq!(sum.total(), 75.0);
    }

    /// Thread 0 starts at 1 ms and ends at 9 having been busy 7 (1 ms looking for work);
    /// thread 1 runs from 2 to 5; the threads' part returns at 9.5 and the call at 10.
    #[test]
    fn a_phase_s_idle_time_is_split_by_cause_and_adds_up_to_its_wall_time() {
        let ms = |x: f64| std::time::Duration::from_secs_f64(x * 1e-3);
        let s = super::PhaseStats {
            wall: ms(10.0),
            pool_wall: ms(9.5),
            busy: vec![ms(7.0), ms(3.0)],
            started: vec![ms(1.0), ms(2.0)],
            ended: vec![ms(9.0), ms(5.0)],
            ..Default::default()
        };
        let p = s.idle_parts();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(p.late_start, 1.5e-3), "{p:?}");
        assert!(close(p.between_tasks, 0.5e-3), "{p:?}");
        assert!(close(p.waiting, 2.0e-3), "{p:?}");
        assert!(close(p.barrier, 0.5e-3), "{p:?}");
        assert!(close(p.executor, 0.5e-3), "{p:?}");
        assert!(close(p.total() / 10e-3 + s.efficiency().unwrap(), 1.0), "{p:?}");
    }

    /// The safe entry points over both range paths: an executor's own ranges (`static`) and
    /// the default one box per range. Run under Miri by scripts/sanitize.sh.
    #[test]
    fn the_safe_entry_points_write_each_box_once() {
        use crate::executors::{EagerFifo, StaticBlocks};
        let mut execs: Vec<Box<dyn super::Executor>> =
            vec![Box::new(StaticBlocks::new(10, 2).unwrap()), Box::new(EagerFifo::new(10, 2).unwrap())];
        for exec in &mut execs {
            let mut a = vec![0u32; 10];
            super::for_each_box_mut(exec.as_mut(), &mut a, |k, x| *x += k as u32);
            let (mut b, mut c) = (vec![0u8; 10], vec![0u64; 10]);
            super::for_each_box_zip(exec.as_mut(), (&mut b[..], &mut c[..]), |k, (b, c)| {
                *b += 1;
                *c += a[k] as u64;
            });
            let (sum, _) = super::reduce_boxes(exec.as_mut(), |k| c[k], 0, |x, y| x + y);
            assert_eq!((a[9], b, sum), (9, vec![1; 10], 45), "{}", exec.name());
        }
    }
}
