//! Per-box and per-thread bookkeeping shared by the executors: who ran each box last (for the
//! affinity figure), sampled box times (the loads the balancer sees) and per-thread counts.
//!
//! Box times are sampled by iteration, not by box: one iteration in `stride` times its chunks
//! of boxes with one clock pair each and credits every box with its chunk's mean, summed over
//! the iteration's phases. Everything here is written with relaxed atomics: each box runs once
//! per phase, and the pool's barrier orders a phase's writes before the reads that follow it.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::clock;
use crate::executor::{PhaseStats, Task};
use crate::pool::Pool;

/// Fewest boxes per share for which [`Tracker::box_loads_on`] shares the reading out. On the
/// 2-core VM, shares of 32,768 boxes halved the reading and shares of 2,048 gained nothing;
/// with shares of 512 (md contraction, 32×32 boxes, 2 threads) pbs ran at 0.81–0.86 × static
/// in three rounds where the build before ran at 0.75–0.78 (with this bound, 0.76–0.80
/// against 0.73–0.84).
pub const PARALLEL_MIN_BOXES: usize = 8192;

/// The shares in which [`Tracker::box_loads_on`] reads the loads of `boxes` boxes on a pool of
/// `threads`: one per thread, each of at least [`PARALLEL_MIN_BOXES`] boxes, or a single one.
pub fn load_shares(boxes: usize, threads: usize) -> usize {
    if threads < 2 || boxes < 2 * PARALLEL_MIN_BOXES {
        1
    } else {
        threads.min(boxes / PARALLEL_MIN_BOXES)
    }
}

/// What the executor records per box execution.
///
/// Timing samples one box in `stride` (a power of two), rotating with the phase, so every box
/// is measured every `stride` phases at `1/stride` of the cost of timing them all; the clock is
/// the cheap [`crate::clock`]. `stride: 0` disables timing. Affinity is one relaxed load and
/// store per box.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoxTimer {
    /// Time one box in this many (a power of two), or 0 for none.
    pub stride: u32,
    /// Record which thread ran each box (for the affinity figure).
    pub affinity: bool,
}

impl Default for BoxTimer {
    fn default() -> Self {
        BoxTimer { stride: 8, affinity: true }
    }
}

impl BoxTimer {
    /// No timing, no affinity: the executor as a plain loop.
    pub const OFF: BoxTimer = BoxTimer { stride: 0, affinity: false };
}

/// Per-box and per-thread bookkeeping shared by the executors: who ran each box last, sampled
/// box times, per-thread counts.
pub struct Tracker {
    last_thread: Vec<AtomicU32>,
    /// Latest sampled time of each box, in clock ticks (`u64::MAX` = never measured).
    box_ticks: Vec<AtomicU64>,
    per_thread: Vec<CachePadded<ThreadCounters>>,
    timer: BoxTimer,
    phase: u32,
    /// Iterations ended so far (see [`Tracker::end_iteration`]), modulo 2^32: only its
    /// remainder by the stride is read.
    iteration: u32,
    /// Phases run in the current iteration.
    phase_in_iteration: u32,
    /// Two per-box sample buffers, alternating: sampled iteration `n` sums its chunk times,
    /// over all its phases, into `samples[n % 2]`. Loads are read from both only when the
    /// balancer asks, so no per-iteration pass over the boxes is needed.
    samples: [Vec<AtomicU64>; 2],
    /// Sampled iterations completed. 64 bits: a count of 32 would wrap within hours of
    /// microsecond iterations, and the loads and the executors' checks compare counts.
    completed: u64,
    /// `completed` when older samples were last declared stale ([`Tracker::forget_samples`]).
    fresh_from: u64,
    /// Boxes timed together, at most, in a sampled iteration (see [`Tracker::set_piece`]).
    piece: usize,
    /// Per phase of an iteration, each box's time in the last sampled iteration, when asked
    /// for ([`Tracker::record_phases`]); and the phases that iteration had.
    phase_samples: Vec<Vec<AtomicU64>>,
    phases_sampled: usize,
}

struct ThreadCounters {
    boxes: AtomicU64,
    busy_ticks: AtomicU64,
    same: AtomicU64,
    compared: AtomicU64,
    /// The phase's first start and last end of this thread's work, in ticks (`u64::MAX` and 0
    /// while it has none): where the phase's wall time went ([`PhaseStats::started`]).
    first_start: AtomicU64,
    last_end: AtomicU64,
}

impl Default for ThreadCounters {
    fn default() -> Self {
        ThreadCounters {
            boxes: AtomicU64::new(0),
            busy_ticks: AtomicU64::new(0),
            same: AtomicU64::new(0),
            compared: AtomicU64::new(0),
            first_start: AtomicU64::new(u64::MAX),
            last_end: AtomicU64::new(0),
        }
    }
}

/// The last thread of a box that has not run (for the affinity figure).
pub(crate) const NEVER: u32 = u32::MAX;

/// Bytes per box of a [`Tracker`] and an executor's box lists, at most: what the executors
/// ask [`pbs::check_memory`] for before they are built.
pub(crate) const EXECUTOR_BYTES_PER_BOX: usize = 40;

impl Local {
    /// Adds a stretch of a thread's work, from tick `started` to tick `ended` ([`clock::ticks`]): its
    /// length is busy time, and the earliest start and latest end are kept.
    pub fn add_span(&mut self, started: u64, ended: u64) {
        self.busy_ticks += ended.wrapping_sub(started);
        self.first_start = self.first_start.min(started);
        self.last_end = self.last_end.max(ended);
    }

    /// Adds runs counted by the executor itself for the affinity figure: `compared` box runs
    /// that had a run in the phase before, `same` of them on the same thread.
    pub(crate) fn count_affinity(&mut self, same: u64, compared: u64) {
        self.same += same;
        self.compared += compared;
    }

    /// `(same, compared)` so far.
    #[cfg(test)]
    pub(crate) fn affinity_counts(&self) -> (u64, u64) {
        (self.same, self.compared)
    }
}

/// A relaxed load-then-store: each box runs once per phase, so no read-modify-write is needed.
trait SwapRelaxed {
    fn swap_relaxed(&self, v: u32) -> u32;
}

impl SwapRelaxed for AtomicU32 {
    #[inline]
    fn swap_relaxed(&self, v: u32) -> u32 {
        let prev = self.load(Ordering::Relaxed);
        self.store(v, Ordering::Relaxed);
        prev
    }
}

/// Counters of one thread during one phase, flushed once at the end of its work.
pub struct Local {
    boxes: u64,
    busy_ticks: u64,
    same: u64,
    compared: u64,
    first_start: u64,
    last_end: u64,
}

impl Default for Local {
    fn default() -> Self {
        Local { boxes: 0, busy_ticks: 0, same: 0, compared: 0, first_start: u64::MAX, last_end: 0 }
    }
}

impl Tracker {
    /// Bookkeeping for `boxes` boxes and `threads` threads; an error when the timer's stride
    /// is neither 0 nor a power of two.
    pub fn new(boxes: usize, threads: usize, timer: BoxTimer) -> crate::Result<Tracker> {
        if timer.stride != 0 && !timer.stride.is_power_of_two() {
            let reason = "expected 0 (no timing) or a power of two";
            return Err(crate::error::parameter("timer.stride", timer.stride.to_string(), reason));
        }
        // The clock's rate is calibrated once per process: here, so that the first phase does
        // not pay for it.
        let _ = crate::clock::ns_per_tick();
        Ok(Tracker {
            last_thread: (0..boxes).map(|_| AtomicU32::new(NEVER)).collect(),
            box_ticks: (0..boxes).map(|_| AtomicU64::new(u64::MAX)).collect(),
            per_thread: (0..threads).map(|_| CachePadded::new(ThreadCounters::default())).collect(),
            timer,
            phase: 0,
            iteration: 0,
            phase_in_iteration: 0,
            samples: [(0..boxes).map(|_| AtomicU64::new(0)).collect(), (0..boxes).map(|_| AtomicU64::new(0)).collect()],
            completed: 0,
            fresh_from: 0,
            piece: usize::MAX,
            phase_samples: Vec::new(),
            phases_sampled: 0,
        })
    }

    /// Also keeps each box's time per phase, for the first `phases` phases of an iteration
    /// (for balancing vector loads: [`Tracker::phase_loads`]); one more store per timed box.
    pub fn record_phases(&mut self, phases: usize) {
        let boxes = self.box_ticks.len();
        self.phase_samples = (0..phases).map(|_| (0..boxes).map(|_| AtomicU64::new(0)).collect()).collect();
    }

    /// Each box's time in seconds in each phase of the last sampled iteration (at most the
    /// number of phases given to [`Tracker::record_phases`]); `None` before a sampled
    /// iteration completed or without `record_phases`.
    pub fn phase_loads(&self) -> Option<Vec<Vec<f64>>> {
        let to_s = clock::ticks_to_seconds();
        (self.phases_sampled > 0).then(|| {
            self.phase_samples[..self.phases_sampled]
                .iter()
                .map(|phase| phase.iter().map(|a| a.load(Ordering::Relaxed) as f64 * to_s).collect())
                .collect()
        })
    }

    /// Runs box `k` on thread `t`, recording affinity and (for sampled boxes) its time.
    #[inline]
    pub fn run(&self, k: usize, t: usize, local: &mut Local, task: Task<'_>) {
        self.note_affinity(k..k + 1, t, local);
        local.boxes += 1;
        let mask = self.timer.stride.wrapping_sub(1);
        if self.timer.stride != 0 && (k as u32).wrapping_add(self.phase) & mask == 0 {
            let start = clock::ticks();
            task.run_range(k..k + 1);
            let dt = clock::ticks().wrapping_sub(start);
            self.box_ticks[k].store(dt, Ordering::Relaxed);
        } else {
            task.run_range(k..k + 1);
        }
    }

    /// Runs the boxes `ks` on thread `t`, timing one box in `stride` on its own as
    /// [`Tracker::run`] does; the boxes between timed ones go to the task as whole ranges.
    #[inline]
    pub fn run_sampling_boxes(&self, ks: std::ops::Range<usize>, t: usize, local: &mut Local, task: Task<'_>) {
        if self.timer.stride == 0 {
            return self.run_untimed(ks, t, local, task);
        }
        let mask = self.timer.stride - 1;
        let mut k = ks.start;
        while k < ks.end {
            // The next box with (k + phase) & mask == 0, as `run` samples them.
            let skip = (0u32.wrapping_sub((k as u32).wrapping_add(self.phase)) & mask) as usize;
            let sampled = (k + skip).min(ks.end);
            self.run_untimed(k..sampled, t, local, task);
            if sampled < ks.end {
                self.run(sampled, t, local, task);
            }
            k = sampled + 1;
        }
    }

    /// Runs the boxes `ks` on thread `t` in one call of a range task, untimed.
    #[inline]
    fn run_untimed(&self, ks: std::ops::Range<usize>, t: usize, local: &mut Local, task: Task<'_>) {
        if ks.is_empty() {
            return;
        }
        self.note_affinity(ks.clone(), t, local);
        local.boxes += ks.len() as u64;
        task.run_range(ks);
    }

    /// Records that thread `t` ran the boxes `ks` (for the affinity figure).
    #[inline]
    fn note_affinity(&self, ks: impl Iterator<Item = usize>, t: usize, local: &mut Local) {
        if self.timer.affinity {
            for k in ks {
                let prev = self.last_thread[k].swap_relaxed(t as u32);
                if prev != NEVER {
                    local.compared += 1;
                    local.same += u64::from(prev == t as u32);
                }
            }
        }
    }

    /// Runs the boxes `ks` on thread `t` as one chunk. In the sampled iterations (one in
    /// `stride`) the chunk is timed with one clock pair and each box is credited with the
    /// chunk's mean, summed over the iteration's phases; otherwise it runs untimed. Call
    /// [`Tracker::begin_phase`] before and [`Tracker::end_iteration`] after as the executor's
    /// iterations go. The thread's busy time is measured around its whole work by the
    /// executor ([`Local::add_span`]), so it is exact every phase for two clock reads
    /// per thread.
    #[inline]
    pub fn run_chunk(&self, ks: &[u32], t: usize, local: &mut Local, task: Task<'_>) {
        if self.sampled_iteration() {
            for piece in ks.chunks(self.piece) {
                self.run_boxes(piece.iter().map(|&k| k as usize), t, local, || task.run_list(piece));
            }
        } else {
            self.run_boxes(ks.iter().map(|&k| k as usize), t, local, || task.run_list(ks))
        }
    }

    /// [`Tracker::run_chunk`] over a contiguous range of boxes: no index list to read, and a
    /// range task gets the whole range (or piece) in one call.
    #[inline]
    pub fn run_range(&self, ks: std::ops::Range<usize>, t: usize, local: &mut Local, task: Task<'_>) {
        if self.sampled_iteration() {
            let mut start = ks.start;
            while start < ks.end {
                let end = ks.end.min(start.saturating_add(self.piece));
                self.run_boxes(start..end, t, local, || task.run_range(start..end));
                start = end;
            }
        } else {
            self.run_boxes(ks.clone(), t, local, || task.run_range(ks))
        }
    }

    /// Runs `run` (which runs the boxes `ks`), with the bookkeeping of those boxes around it.
    #[inline]
    fn run_boxes(
        &self,
        ks: impl ExactSizeIterator<Item = usize> + Clone,
        t: usize,
        local: &mut Local,
        run: impl FnOnce(),
    ) {
        let timed = self.sampled_iteration();
        let start = if timed { clock::ticks() } else { 0 };
        self.note_affinity(ks.clone(), t, local);
        run();
        let len = ks.len();
        local.boxes += len as u64;
        if timed {
            // Every box runs exactly once per phase: the first phase of the iteration stores
            // its share (no clearing pass), later phases add theirs with a plain load and store.
            let each = clock::ticks().wrapping_sub(start) / len.max(1) as u64;
            if let Some(phase) = self.phase_samples.get((self.phase_in_iteration as usize).wrapping_sub(1)) {
                ks.clone().for_each(|k| phase[k].store(each, Ordering::Relaxed));
            }
            let buffer = &self.samples[(self.completed % 2) as usize];
            if self.phase_in_iteration == 1 {
                for k in ks {
                    buffer[k].store(each, Ordering::Relaxed);
                }
            } else {
                for k in ks {
                    let acc = &buffer[k];
                    acc.store(acc.load(Ordering::Relaxed) + each, Ordering::Relaxed);
                }
            }
        }
    }

    /// Whether this iteration's chunks are timed: one iteration in `stride`. Sampling by
    /// iteration, not by phase, makes a box's load the sum of all the phases it runs in.
    fn sampled_iteration(&self) -> bool {
        self.timer.stride != 0 && self.iteration & (self.timer.stride - 1) == 0
    }

    /// Call before each phase of an executor that uses [`Tracker::run_chunk`] (counts the
    /// phases of the iteration; a program that never ends one stops the count at its top).
    pub fn begin_phase(&mut self) {
        self.phase_in_iteration = self.phase_in_iteration.saturating_add(1);
    }

    /// Ends an iteration.
    pub fn end_iteration(&mut self) {
        if self.sampled_iteration() && self.phase_in_iteration > 0 {
            self.completed += 1;
            self.phases_sampled = (self.phase_in_iteration as usize).min(self.phase_samples.len());
        }
        self.phase_in_iteration = 0;
        self.iteration = self.iteration.wrapping_add(1);
    }

    /// Samples one iteration in `stride` from the next iteration on (a power of two; call
    /// between iterations). An executor that knows its tasks' cost can afford to time coarse
    /// tasks more often than tiny ones.
    pub fn set_stride(&mut self, stride: u32) {
        assert!(stride.is_power_of_two(), "the timing stride must be a power of two");
        self.timer.stride = stride;
    }

    /// In sampled iterations, time the boxes of a chunk in pieces of at most `boxes` (each
    /// box is credited with its piece's mean; default: the whole chunk). Finer pieces cost a
    /// clock pair each but give the balancer sharper box times where the load varies within
    /// a chunk (a chunk of whole grid rows across a density gradient).
    pub fn set_piece(&mut self, boxes: usize) {
        self.piece = boxes.max(1);
    }

    /// Sampled iterations completed so far: box loads are fresh after a rebalancing once this
    /// has grown.
    pub fn samples_completed(&self) -> u64 {
        self.completed
    }

    /// Boxes timed together at most (see [`Tracker::set_piece`]), for tests.
    #[cfg(test)]
    pub(crate) fn piece(&self) -> usize {
        self.piece
    }

    /// Whether it records which thread ran each box, for tests.
    #[cfg(test)]
    pub(crate) fn records_affinity(&self) -> bool {
        self.timer.affinity
    }

    /// One iteration in this many is timed (0 = none).
    pub fn stride(&self) -> u32 {
        self.timer.stride
    }

    /// Whether box times are being measured at all.
    pub fn timing(&self) -> bool {
        self.timer.stride != 0
    }

    /// Adds a thread's counters for this phase (call once per thread per phase).
    pub fn flush(&self, t: usize, local: Local) {
        let c = &self.per_thread[t];
        c.boxes.fetch_add(local.boxes, Ordering::Relaxed);
        c.busy_ticks.fetch_add(local.busy_ticks, Ordering::Relaxed);
        c.same.fetch_add(local.same, Ordering::Relaxed);
        c.compared.fetch_add(local.compared, Ordering::Relaxed);
        if local.first_start <= local.last_end {
            c.first_start.fetch_min(local.first_start, Ordering::Relaxed);
            c.last_end.fetch_max(local.last_end, Ordering::Relaxed);
        }
    }

    /// Ends a phase that began at tick `began` (before any thread's work) and ends now, after
    /// every thread's: collects and resets the per-thread counters. Through `&mut`, with plain
    /// loads and stores: the threads are done (the pool's return orders their writes before
    /// this), and the misses of plain accesses to the other threads' lines can be under way at
    /// once, where locked swaps take them one after another (the executor's own work in a
    /// phase, which grows with the threads: docs/results.md, "a fifth lease").
    pub fn finish(&mut self, began: u64, wall: Duration) -> PhaseStats {
        let ns = clock::ns_per_tick();
        let since_began = |tick: u64| Duration::from_nanos((tick.saturating_sub(began) as f64 * ns) as u64);
        let threads = self.per_thread.len();
        let mut s = PhaseStats {
            wall,
            pool_wall: since_began(clock::ticks()),
            boxes: Vec::with_capacity(threads),
            busy: Vec::with_capacity(threads),
            started: Vec::with_capacity(threads),
            ended: Vec::with_capacity(threads),
            ..Default::default()
        };
        for c in &mut self.per_thread {
            s.boxes.push(std::mem::take(c.boxes.get_mut()) as usize);
            let busy = std::mem::take(c.busy_ticks.get_mut()) as f64 * ns;
            s.busy.push(Duration::from_nanos(busy as u64));
            let (first, last) =
                (std::mem::replace(c.first_start.get_mut(), u64::MAX), std::mem::take(c.last_end.get_mut()));
            // A thread with no work in the phase waited for it all: its span is empty at 0.
            let (first, last) = if first <= last { (first, last) } else { (began, began) };
            s.started.push(since_began(first));
            s.ended.push(since_began(last));
            s.same_thread += std::mem::take(c.same.get_mut()) as usize;
            s.compared += std::mem::take(c.compared.get_mut()) as usize;
        }
        self.phase = self.phase.wrapping_add(1);
        s
    }

    /// From now on, [`Tracker::box_loads`] uses only samples completed after this call (once
    /// there is one). For an executor whose mapping just changed: a box's time depends on
    /// where it ran too (a migrated box starts cold on its new thread, the first iteration of a
    /// run pays for page faults and growing buffers), and the mean of a sample from before
    /// with one from after is neither.
    pub fn forget_samples(&mut self) {
        self.fresh_from = self.completed;
    }

    /// The samples completed when [`Tracker::forget_samples`] was last called, for tests.
    #[cfg(test)]
    pub(crate) fn forgotten_up_to(&self) -> u64 {
        self.fresh_from
    }

    /// Measured time of every box in seconds: chunk-timed samples where there are any (the
    /// smaller of the last two, or the last one alone when only it is newer than
    /// [`Tracker::forget_samples`]), else per-box samples from [`Tracker::run`]; boxes never
    /// measured get the mean of the measured ones (1 if none is). The smaller, not the mean:
    /// noise only ever adds time (a thread preempted while it timed a piece charges the
    /// preemption to the piece's boxes), and with another process taking a core every other
    /// iteration the mean of two moves boxes away from that core and back again; a load that
    /// really grows shows in both samples one iteration later.
    pub fn box_loads(&self) -> Vec<f64> {
        let mut loads = vec![0.0; self.box_ticks.len()];
        let (sum, measured) = self.loads_into(0, &mut loads);
        Tracker::fill_unmeasured(&mut loads, sum, measured);
        loads
    }

    /// [`Tracker::box_loads`], each of `pool`'s threads reading a share of the boxes where
    /// the shares are large enough to outweigh a phase ([`PARALLEL_MIN_BOXES`] each). The
    /// executor asks between iterations, on its critical path; read by one thread, 65,536
    /// boxes took 220–540 µs on the 2-core VM. The mean given to unmeasured boxes is summed
    /// share by share, so it may differ from [`Tracker::box_loads`]'s in its last bits.
    pub fn box_loads_on(&self, pool: &Pool) -> Vec<f64> {
        let n = self.box_ticks.len();
        let shares = load_shares(n, pool.threads());
        if shares == 1 {
            return self.box_loads();
        }
        let mut loads = vec![0.0; n];
        let share = n.div_ceil(shares);
        // Each share behind its own lock, taken once by the one thread that fills it.
        struct Share<'a> {
            start: usize,
            out: &'a mut [f64],
            sum: f64,
            measured: usize,
        }
        let shares: Vec<Mutex<Share>> = loads
            .chunks_mut(share)
            .enumerate()
            .map(|(i, out)| Mutex::new(Share { start: i * share, out, sum: 0.0, measured: 0 }))
            .collect();
        pool.run(&|t| {
            if let Some(s) = shares.get(t) {
                let s = &mut *s.lock().unwrap_or_else(|e| e.into_inner());
                (s.sum, s.measured) = self.loads_into(s.start, s.out);
            }
        });
        let (sum, measured) = shares.into_iter().fold((0.0, 0), |(sum, measured), s| {
            let s = s.into_inner().unwrap_or_else(|e| e.into_inner());
            (sum + s.sum, measured + s.measured)
        });
        Tracker::fill_unmeasured(&mut loads, sum, measured);
        loads
    }

    /// The times of boxes `start..start + out.len()` into `out`, in seconds, a negative mark
    /// where a box has none; returns the sum of the measured ones, in index order, and their
    /// count.
    fn loads_into(&self, start: usize, out: &mut [f64]) -> (f64, usize) {
        let to_s = clock::ticks_to_seconds();
        let latest_only = self.completed.wrapping_sub(self.fresh_from) == 1;
        let ticks = |k: usize| -> Option<u64> {
            match self.completed {
                0 => Some(self.box_ticks[k].load(Ordering::Relaxed)).filter(|&v| v != u64::MAX),
                n if n == 1 || latest_only => Some(self.samples[((n - 1) % 2) as usize][k].load(Ordering::Relaxed)),
                _ => Some(self.samples[0][k].load(Ordering::Relaxed).min(self.samples[1][k].load(Ordering::Relaxed))),
            }
        };
        let (mut sum, mut measured) = (0.0, 0usize);
        for (q, k) in out.iter_mut().zip(start..) {
            *q = match ticks(k) {
                Some(v) => {
                    let seconds = v as f64 * to_s;
                    sum += seconds;
                    measured += 1;
                    seconds
                }
                None => -1.0,
            };
        }
        (sum, measured)
    }

    /// Gives the boxes marked unmeasured the mean of the `measured` others (summing to `sum`),
    /// or 1 if none is.
    fn fill_unmeasured(loads: &mut [f64], sum: f64, measured: usize) {
        if measured < loads.len() {
            let fill = if measured == 0 { 1.0 } else { sum / measured as f64 };
            loads.iter_mut().filter(|q| **q < 0.0).for_each(|q| *q = fill);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One share per thread, each of at least `PARALLEL_MIN_BOXES` boxes, or one share.
    #[test]
    fn load_shares_are_one_per_thread_of_enough_boxes() {
        let m = PARALLEL_MIN_BOXES;
        for (boxes, threads, shares) in [
            (0, 4, 1),
            (2 * m - 1, 4, 1),
            (2 * m, 1, 1),
            (2 * m, 2, 2),
            (2 * m, 4, 2),
            (5 * m + 7, 4, 4),
            (5 * m + 7, 8, 5),
            (64 * m, 3, 3),
        ] {
            assert_eq!(load_shares(boxes, threads), shares, "{boxes} boxes, {threads} threads");
        }
    }

    /// Every way of running boxes counts each run against the thread of the box's last run,
    /// and nothing without the affinity figure.
    #[test]
    fn runs_count_affinity_against_each_boxs_last_thread() {
        let task = Task::Each(&|_| ());
        for affinity in [true, false] {
            let tracker = Tracker::new(8, 2, BoxTimer { stride: 2, affinity }).unwrap();
            let mut first = Local::default();
            tracker.run_range(0..4, 0, &mut first, task);
            tracker.run_chunk(&[4, 5], 1, &mut first, task);
            assert_eq!(first.affinity_counts(), (0, 0), "no run before");
            let (mut zero, mut one) = (Local::default(), Local::default());
            tracker.run(0, 0, &mut zero, task);
            tracker.run_sampling_boxes(1..3, 0, &mut zero, task);
            tracker.run_chunk(&[3, 4, 6], 0, &mut zero, task);
            tracker.run(5, 1, &mut one, task);
            tracker.run_range(7..8, 1, &mut one, task);
            // Thread 0 ran boxes 0–2 again (same), 3 (same), 4 (thread 1's), 6 (new).
            let expected = if affinity { [(4, 5), (1, 1)] } else { [(0, 0), (0, 0)] };
            assert_eq!([zero.affinity_counts(), one.affinity_counts()], expected, "affinity {affinity}");
            assert_eq!((first.boxes, zero.boxes, one.boxes), (6, 6, 2), "every box run counted");
        }
    }

    /// Without timing nothing is timed, whatever the phase or the iteration.
    #[test]
    fn a_stride_of_zero_times_nothing() {
        let mut tracker = Tracker::new(4, 1, BoxTimer::OFF).unwrap();
        assert!(!tracker.timing());
        assert_eq!(tracker.stride(), 0);
        let mut local = Local::default();
        for _ in 0..2 {
            tracker.begin_phase();
            tracker.run(0, 0, &mut local, Task::Each(&|_| ()));
            tracker.run_sampling_boxes(1..2, 0, &mut local, Task::Each(&|_| ()));
            tracker.run_chunk(&[2], 0, &mut local, Task::Each(&|_| ()));
            tracker.run_range(3..4, 0, &mut local, Task::Each(&|_| ()));
            tracker.end_iteration();
        }
        assert!(tracker.box_ticks.iter().all(|t| t.load(Ordering::Relaxed) == u64::MAX), "no box timed on its own");
        assert_eq!(tracker.samples_completed(), 0);
        assert_eq!(tracker.box_loads(), vec![1.0; 4]);
        assert!(Tracker::new(4, 1, BoxTimer::default()).unwrap().timing());
        assert!(Tracker::new(4, 1, BoxTimer { stride: 3, affinity: true }).is_err(), "not a power of two");
    }

    /// One iteration in `stride` is sampled, and only one that ran a phase; a box's sample
    /// is the sum of its chunk's shares over the iteration's phases, each share the chunk's
    /// time over its boxes; `phase_loads` keeps them phase by phase.
    #[test]
    #[cfg_attr(miri, ignore = "times sleeps, which Miri runs far slower")]
    fn a_sample_sums_each_boxs_share_of_its_chunk_over_the_phases() {
        let sleep = |ms: u64| std::thread::sleep(Duration::from_millis(ms));
        let mut tracker = Tracker::new(6, 1, BoxTimer { stride: 2, affinity: false }).unwrap();
        tracker.record_phases(2);
        assert_eq!(tracker.phase_loads(), None, "no sampled iteration yet");
        tracker.end_iteration(); // an iteration that ran no phase samples nothing
        assert_eq!(tracker.samples_completed(), 0);
        tracker.iteration = 0; // back to an iteration the stride samples
        let mut local = Local::default();
        let wall = std::time::Instant::now();
        for phase in 0..3 {
            tracker.begin_phase();
            // Boxes 0–3 one chunk, asleep 8 ms in all in each of the first two phases; box 4
            // asleep 2 ms in the second phase only; box 5 never.
            tracker.run_chunk(
                &[0, 1, 2, 3],
                0,
                &mut local,
                Task::Each(&|k| {
                    if k == 0 && phase < 2 {
                        sleep(8)
                    }
                }),
            );
            tracker.run_range(
                4..6,
                0,
                &mut local,
                Task::Each(&|k| {
                    if k == 4 && phase == 1 {
                        sleep(2)
                    }
                }),
            );
        }
        tracker.end_iteration();
        let wall = wall.elapsed().as_secs_f64();
        assert_eq!(tracker.samples_completed(), 1);
        let loads = tracker.box_loads();
        // Two phases of 8 ms over 4 boxes: 4 ms each at least; the three phases took `wall`.
        assert!(loads[..4].iter().all(|&l| l >= 4e-3 && l <= wall / 4.0 * 1.5), "{loads:?} in {wall} s");
        assert!(loads[4] >= 1e-3 && loads[4] <= wall / 2.0 * 1.5 && loads[5] == loads[4], "{loads:?}");
        let phases = tracker.phase_loads().unwrap();
        assert_eq!(phases.len(), 2, "the phases recorded, not the three run");
        assert!(phases[0][0] >= 2e-3 && phases[1][0] >= 2e-3 && phases[0][0] < 1.0, "{phases:?}");
        assert!(phases[0][4] < 1e-3 && phases[1][4] >= 1e-3, "{phases:?}");
        // The next iteration is not sampled: box 5's long sleep is not seen.
        tracker.begin_phase();
        tracker.run_range(
            4..6,
            0,
            &mut local,
            Task::Each(&|k| {
                if k == 5 {
                    sleep(20)
                }
            }),
        );
        tracker.end_iteration();
        assert_eq!(tracker.samples_completed(), 1);
        assert_eq!(tracker.box_loads(), loads);
        assert_eq!(local.boxes, 20);
    }

    /// A box measured at no time at all keeps its 0; only unmeasured boxes get the mean.
    #[test]
    fn a_box_measured_at_zero_is_not_unmeasured() {
        let tracker = Tracker::new(3, 1, BoxTimer { stride: 1, affinity: false }).unwrap();
        [0, 400, u64::MAX].iter().zip(&tracker.box_ticks).for_each(|(&t, a)| a.store(t, Ordering::Relaxed));
        let loads = tracker.box_loads();
        assert_eq!(loads[0], 0.0);
        assert_eq!(loads[2], loads[1] / 2.0, "{loads:?}");
    }

    /// A phase's counters: each thread's boxes, busy time, first start and last end from the
    /// phase's start (0 and 0 for a thread with no work), the affinity counts summed; and all
    /// of them reset for the next phase.
    #[test]
    fn finishing_a_phase_collects_and_resets_every_threads_counters() {
        let mut tracker = Tracker::new(4, 3, BoxTimer::OFF).unwrap();
        let ns = clock::ns_per_tick();
        let d = |ticks: u64| Duration::from_nanos((ticks as f64 * ns) as u64);
        let began = clock::ticks().saturating_sub(1_000_000);
        let mut zero = Local::default();
        zero.add_span(began + 1000, began + 3000);
        zero.add_span(began + 5000, began + 5500);
        zero.count_affinity(3, 4);
        zero.boxes = 5;
        let mut one = Local::default();
        one.count_affinity(1, 2);
        tracker.flush(0, zero);
        tracker.flush(1, one);
        tracker.flush(2, Local::default());
        let s = tracker.finish(began, Duration::from_secs(1));
        assert_eq!(s.boxes, [5, 0, 0]);
        assert_eq!(s.busy, [d(2500), d(0), d(0)]);
        assert_eq!((s.started[0], s.ended[0]), (d(1000), d(5500)));
        assert_eq!((&s.started[1..], &s.ended[1..]), (&[d(0); 2][..], &[d(0); 2][..]), "no work: an empty span at 0");
        assert_eq!((s.same_thread, s.compared), (4, 6));
        assert!(s.pool_wall >= d(1_000_000), "{:?}", s.pool_wall);
        assert_eq!(s.wall, Duration::from_secs(1));
        let next = tracker.finish(began, Duration::ZERO);
        assert_eq!((next.boxes, next.busy, next.ended), (vec![0; 3], vec![d(0); 3], vec![d(0); 3]));
        assert_eq!((next.same_thread, next.compared), (0, 0));
    }

    /// Sampling within a range times the boxes `run` would time, one by one, and hands the
    /// boxes between them to a range task in whole runs, each box once.
    #[test]
    fn sampling_a_range_times_the_boxes_run_would() {
        for phase in 0..4u32 {
            let mut tracker = Tracker::new(40, 1, BoxTimer { stride: 4, affinity: true }).unwrap();
            tracker.phase = phase;
            let calls = std::sync::Mutex::new(Vec::new());
            let mut local = Local::default();
            tracker.run_sampling_boxes(3..37, 0, &mut local, Task::Ranges(&|r| calls.lock().unwrap().push(r)));
            let calls = calls.into_inner().unwrap();
            let covered: Vec<usize> = calls.iter().cloned().flatten().collect();
            assert_eq!(covered, (3..37).collect::<Vec<_>>(), "phase {phase}: {calls:?}");
            assert_eq!(local.boxes, 34);
            assert_eq!(tracker.box_ticks.len(), 40);
            for (k, ticks) in tracker.box_ticks.iter().enumerate() {
                let sampled = (3..37).contains(&k) && (k as u32 + phase) % 4 == 0;
                let timed = ticks.load(Ordering::Relaxed) != u64::MAX;
                assert_eq!(timed, sampled, "phase {phase} box {k}");
                if sampled {
                    assert!(calls.contains(&(k..k + 1)), "box {k} timed on its own");
                }
            }
            // Runs between timed boxes are whole: at most stride − 1 boxes, never split.
            assert!(calls.len() <= 2 * (34 / 4 + 2), "{calls:?}");
        }
    }

    /// Read by a pool's threads, share by share, the box loads are the ones read by one
    /// thread: from each kind of sample, the unmeasured boxes given the measured ones' mean.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "reads 40,967 boxes ten times: over 20 minutes under Miri; safe code over the pool, which Miri checks in its own tests"
    )]
    fn box_loads_read_by_a_pool_are_those_read_by_one_thread() {
        let n = 5 * PARALLEL_MIN_BOXES + 7;
        let set = |v: &[AtomicU64], f: &dyn Fn(usize) -> u64| {
            v.iter().enumerate().for_each(|(k, a)| a.store(f(k), Ordering::Relaxed))
        };
        let mut tracker = Tracker::new(n, 1, BoxTimer { stride: 1, affinity: false }).unwrap();
        set(&tracker.box_ticks, &|k| if k % 3 == 0 { u64::MAX } else { 1000 + (k as u64 * 37) % 500 });
        for threads in [1, 2, 3, 4, 8] {
            let pool = Pool::new(threads, std::sync::Arc::new(|_| {})).unwrap();
            let close = |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-12 * x.abs());
            tracker.completed = 0;
            let (one, all) = (tracker.box_loads(), tracker.box_loads_on(&pool));
            assert!(close(&one, &all), "{threads} threads, per-box samples");
            assert!(all.iter().all(|&q| q > 0.0), "every unmeasured box filled");
            set(&tracker.samples[0], &|k| 10 + k as u64);
            set(&tracker.samples[1], &|k| 5 + 2 * (k as u64 % 9));
            tracker.completed = 2;
            assert_eq!(tracker.box_loads(), tracker.box_loads_on(&pool), "{threads} threads, two samples");
        }
    }

    /// Which counters `box_loads` reads, and what a box never measured gets: the mean of the
    /// measured ones, 1 when none is.
    #[test]
    fn box_loads_take_the_right_sample_and_fill_the_unmeasured_with_the_mean() {
        let to_s = clock::ticks_to_seconds();
        let set =
            |v: &[AtomicU64], ticks: &[u64]| v.iter().zip(ticks).for_each(|(a, &t)| a.store(t, Ordering::Relaxed));
        let mut tracker = Tracker::new(4, 1, BoxTimer { stride: 1, affinity: false }).unwrap();
        assert_eq!(tracker.box_loads(), vec![1.0; 4], "nothing measured");
        set(&tracker.box_ticks, &[100, u64::MAX, 300, u64::MAX]);
        let mean = (100.0 * to_s + 300.0 * to_s) / 2.0;
        assert_eq!(tracker.box_loads(), vec![100.0 * to_s, mean, 300.0 * to_s, mean], "per-box samples");
        set(&tracker.samples[0], &[10, 20, 30, 40]);
        set(&tracker.samples[1], &[5, 25, 35, 1]);
        tracker.completed = 1;
        assert_eq!(tracker.box_loads(), [10.0, 20.0, 30.0, 40.0].map(|t| t * to_s), "the one sample");
        tracker.completed = 2;
        assert_eq!(tracker.box_loads(), [5.0, 20.0, 30.0, 1.0].map(|t| t * to_s), "the smaller of two");
        tracker.forget_samples();
        tracker.completed = 3; // the third sample went into the first buffer
        assert_eq!(
            tracker.box_loads(),
            [10.0, 20.0, 30.0, 40.0].map(|t| t * to_s),
            "the latest, alone since forgotten"
        );
    }

    /// A long run counts past 2^32 sampled iterations (twelve hours of 10 µs iterations timed
    /// every time): the count goes on, and the loads are those of the latest sample, not the
    /// per-box fallback of a run that has none.
    #[test]
    fn the_sample_count_goes_on_past_two_to_the_thirty_second() {
        let mut tracker = Tracker::new(2, 1, BoxTimer { stride: 1, affinity: false }).unwrap();
        tracker.completed = u32::MAX.into(); // a 32-bit count overflowed here
        tracker.fresh_from = tracker.completed;
        for _ in 0..3 {
            tracker.begin_phase();
            let mut local = Local::default();
            tracker.run_chunk(&[0], 0, &mut local, Task::Each(&|_| std::thread::sleep(Duration::from_millis(2))));
            tracker.run_chunk(&[1], 0, &mut local, Task::Each(&|_| ()));
            tracker.end_iteration();
            // Box 0's 2 ms sleep above box 1's nothing (a 32-bit count read 1.0 for both here).
            let loads = tracker.box_loads();
            assert!(loads[0] >= 2e-3 && loads[0] > loads[1], "{loads:?} after {} samples", tracker.samples_completed());
        }
        assert_eq!(tracker.samples_completed(), u64::from(u32::MAX) + 3);
    }

    /// One sampled iteration over a 16-box chunk whose first half sleeps 2 ms a box.
    fn loads_with_piece(piece: Option<usize>) -> Vec<f64> {
        let mut tracker = Tracker::new(16, 1, BoxTimer { stride: 1, affinity: false }).unwrap();
        if let Some(p) = piece {
            tracker.set_piece(p);
        }
        tracker.begin_phase();
        let mut local = Local::default();
        tracker.run_range(
            0..16,
            0,
            &mut local,
            Task::Each(&|k| {
                if k < 8 {
                    std::thread::sleep(Duration::from_millis(2));
                }
            }),
        );
        tracker.end_iteration();
        tracker.box_loads()
    }

    #[test]
    #[cfg_attr(miri, ignore = "times sleeps against empty calls, which Miri runs 1000× slower")]
    fn pieces_separate_heavy_and_light_boxes_within_a_chunk() {
        let whole = loads_with_piece(None);
        assert!(whole.windows(2).all(|w| w[0] == w[1]), "one mean for the whole chunk: {whole:?}");
        // Sleeping boxes measure ≥ 2 ms; the others measure what four empty calls take. Noise
        // only adds time (a preempted thread), so the least of three runs, box by box.
        let pieces =
            (0..3).map(|_| loads_with_piece(Some(4))).reduce(|a, b| a.iter().zip(&b).map(|(x, y)| x.min(*y)).collect());
        let pieces = pieces.unwrap();
        assert!(pieces[..8].iter().all(|&l| l >= 2e-3), "{pieces:?}");
        assert!(pieces[8..].iter().all(|&l| l < 1e-4), "{pieces:?}");
    }
}
