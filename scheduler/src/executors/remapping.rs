//! The remappers (`rcb`, `norcb`, `packsteal`, `vector-rcb`, `vector-greedy`, `norm-greedy`,
//! `diffusion`):
//! owner computes, with the mapping remade by a balancer of the seed papers instead of the
//! vCores' cells. Each thread runs its own boxes in index
//! order, timed as `pbs` times them; between iterations the threads' loads go to the same
//! [`Criterion`] as `pbs` (Boulmier's eq. 24 with its guard for loads that change once by
//! default, its cost `C` the measured time of the remapping), and when it asks, the [`Remapper`] maps the measured box loads anew:
//! - `rcb`: k-way recursive coordinate bisection from scratch ([`pbs::bisection::kway_rcb`]),
//!   what Zoltan's RCB does in the papers' comparisons;
//! - `norcb`: Boulmier's non-orthogonal bisection, each cut parallel to the mean velocity of
//!   its part ([`pbs::bisection::kway_norcb`]), from the app's [`Executor::hint_motion`];
//! - `packsteal`: Freitas's PackStealLB, packs of boxes stolen from the overloaded threads by
//!   the underloaded ones ([`pbs::pack_steal`]), the current mapping remapped in place;
//! - `vector-rcb`: for iterations of several phases (Buch's vector loads), RCB whose cut
//!   directions balance every phase at once ([`pbs::bisection::kway_vector_rcb`]), from each
//!   box's time in each phase. Its imbalance is `Σ_phase max_thread / Σ_phase mean_thread`;
//! - `vector-greedy`, `norm-greedy`: Buch's greedy placements on the same per-phase times,
//!   which balance every phase but scatter the boxes ([`pbs::greedy`]);
//! - `diffusion`: the current mapping mended across its own borders by a diffusion flow
//!   ([`pbs::diffusion`]; Hu and Blake, the adaptive repartitioners of ParMETIS and Jostle),
//!   every box weighing the same when it moves.
//!
//! Those that partition from scratch number their parts after the current parts they overlap
//! most ([`Remapper::remap`]), so that a part that stays keeps its thread.
//!
//! All start from RCB on uniform loads. As in `pbs`, the first measured iteration always
//! remaps, and so does a failed check a few iterations after a remapping (the loads it used
//! were off: `executors/check.rs`); a remapping the criterion asks for runs only when the
//! measured box loads put the current mapping over the trigger, and its owners are taken only
//! when they are better balanced on those loads. No stealing within a phase, no balancing in
//! idle time: the remapping runs between iterations, on the critical path, as in the papers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pbs::bisection::{kway_norcb, kway_rcb, kway_vector_rcb};
use pbs::pack_steal::{pack_steal, PackSteal};
use pbs::{metrics, Grid};

use super::owner_lists::OwnerLists;
use super::run_length::IterationsLeft;
use super::timing;
use super::RemapPolicy;
use crate::box_timing::{BoxTimer, Tracker};
use crate::criteria::{Boulmier, Criterion, Sample};
use crate::executor::{pool_phase, Executor, IterationEnd, PhaseStats, Task};
use crate::pool::Pool;

/// The partitioner that remaps the boxes.
#[derive(Debug, Clone, PartialEq)]
pub enum Remapper {
    /// k-way RCB from scratch.
    Rcb,
    /// NoRCB; parts slower than `threshold` (mean speed) are cut as RCB cuts them.
    NoRcb {
        /// The paper's `1e-3`.
        threshold: f64,
    },
    /// PackStealLB with these settings.
    PackSteal(PackSteal),
    /// Vector RCB on the per-phase box times (of at most this many phases).
    VectorRcb {
        /// Phases of an iteration whose box times are kept (4 by default).
        phases: usize,
    },
    /// Buch's vector greedy or (`norm: true`) norm greedy on the per-phase box times (of
    /// at most this many phases): balanced phases, scattered boxes ([`pbs::greedy`]).
    VectorGreedy {
        /// Norm greedy rather than vector greedy.
        norm: bool,
        /// Phases of an iteration whose box times are kept (4 by default).
        phases: usize,
    },
    /// Diffusion from the current owners, until no thread is above `limit × mean`.
    Diffusion {
        /// `max / mean` under which it stops moving boxes (1.02 by default).
        limit: f64,
    },
}

/// What a remapping sees: the current owners, the box loads (summed over the iteration's
/// phases and per phase), the motion hints, and a seed for the random draws.
#[derive(Debug, Clone, Copy)]
pub struct RemapInputs<'a> {
    /// The current owner of every box.
    pub owners: &'a [u32],
    /// Each box's load over the iteration.
    pub box_loads: &'a [f64],
    /// Each box's load per phase (`[phase][box]`), where measured.
    pub phase_loads: Option<&'a [Vec<f64>]>,
    /// Each box's momentum and particle count, where hinted.
    pub motion: Option<(&'a [[f64; 3]], &'a [f64])>,
    /// Seed of PackStealLB's draws.
    pub seed: u64,
}

impl Remapper {
    /// The new owner of every box of `grid`, in `parts` parts: RCB stands in for NoRCB without
    /// motion and for the vector remappers without per-phase loads. A partition computed from
    /// scratch numbers its parts afresh, so its ids are matched to the current owners'
    /// ([`metrics::match_labels`], as Zoltan's `REMAP` parameter renumbers parts): a part that
    /// stays where it was keeps its thread rather than moving whole to another. An error names
    /// a bad load or hint, or current owners that are not one id below `parts` per box.
    pub fn remap(&self, grid: &Grid, parts: usize, x: &RemapInputs<'_>) -> pbs::Result<Vec<u32>> {
        let fresh = self.partition(grid, parts, x)?;
        match self {
            Remapper::PackSteal(_) | Remapper::Diffusion { .. } => Ok(fresh),
            _ => metrics::match_labels(x.owners, &fresh, parts),
        }
    }

    /// Each remapper's partition with its parts numbered as it numbers them: the remappers that
    /// move boxes of the current owners (PackStealLB, diffusion) keep their ids already.
    fn partition(&self, grid: &Grid, parts: usize, x: &RemapInputs<'_>) -> pbs::Result<Vec<u32>> {
        match (self, x.phase_loads, x.motion) {
            (Remapper::NoRcb { threshold }, _, Some((momentum, particles))) => {
                kway_norcb(grid, x.box_loads, momentum, particles, parts, *threshold)
            }
            (Remapper::PackSteal(settings), _, _) => {
                let mut owners = x.owners.to_vec();
                pack_steal(grid, x.box_loads, &mut owners, parts, settings, x.seed)?;
                Ok(owners)
            }
            (Remapper::VectorRcb { .. }, Some(phases), _) => kway_vector_rcb(grid, phases, parts),
            (Remapper::VectorGreedy { norm: false, .. }, Some(phases), _) => pbs::greedy::vector_greedy(phases, parts),
            (Remapper::VectorGreedy { norm: true, .. }, Some(phases), _) => pbs::greedy::norm_greedy(phases, parts),
            (Remapper::Diffusion { limit }, _, _) => {
                pbs::diffusion::diffuse(grid, x.owners, x.box_loads, &vec![1.0; grid.len()], parts, *limit)
            }
            _ => kway_rcb(grid, x.box_loads, parts),
        }
    }

    /// Whether it balances per-phase loads (its imbalance is `metrics::vector_max_avg`).
    pub fn is_vector(&self) -> bool {
        matches!(self, Remapper::VectorRcb { .. } | Remapper::VectorGreedy { .. })
    }

    /// The executor name: `rcb`, `norcb`, `packsteal`, `vector-rcb`, `vector-greedy`,
    /// `norm-greedy` or `diffusion`.
    pub fn name(&self) -> &'static str {
        match self {
            Remapper::Rcb => "rcb",
            Remapper::NoRcb { .. } => "norcb",
            Remapper::PackSteal(_) => "packsteal",
            Remapper::VectorRcb { .. } => "vector-rcb",
            Remapper::VectorGreedy { norm: false, .. } => "vector-greedy",
            Remapper::VectorGreedy { norm: true, .. } => "norm-greedy",
            Remapper::Diffusion { .. } => "diffusion",
        }
    }

    /// The remapper called `name` with the papers' settings, if there is one.
    pub fn by_name(name: &str) -> Option<Remapper> {
        match name {
            "rcb" => Some(Remapper::Rcb),
            "norcb" => Some(Remapper::NoRcb { threshold: 1e-3 }),
            "packsteal" => Some(Remapper::PackSteal(PackSteal::default())),
            "vector-rcb" => Some(Remapper::VectorRcb { phases: 4 }),
            "vector-greedy" => Some(Remapper::VectorGreedy { norm: false, phases: 4 }),
            "norm-greedy" => Some(Remapper::VectorGreedy { norm: true, phases: 4 }),
            "diffusion" => Some(Remapper::Diffusion { limit: 1.02 }),
            _ => None,
        }
    }
}

/// Settings of the [`Remapping`] executor.
pub struct RemapOptions {
    /// Who remaps.
    pub remapper: Remapper,
    /// `max_avg` of the measured box loads under the current mapping at or under which a
    /// remapping the criterion asked for is skipped (timing noise must not move boxes).
    pub trigger: f64,
    /// Boxes run (and timed) in one go at most.
    pub chunk: u32,
    /// When to remap; `None` = Boulmier's eq. 24 with the cost of the first mapping.
    pub criterion: Option<Box<dyn Criterion>>,
    /// Largest box-timing stride (see [`crate::executors::PbsOptions::timer`]).
    pub timer: BoxTimer,
    /// Seed of PackStealLB's random draws (each remapping draws from its own stream).
    pub seed: u64,
}

impl RemapOptions {
    /// The defaults for `remapper`: the trigger and chunk of `pbs`.
    pub fn new(remapper: Remapper) -> RemapOptions {
        RemapOptions { remapper, trigger: 0.05, chunk: 128, criterion: None, timer: BoxTimer::default(), seed: 1 }
    }
}

/// The remapping executor.
pub struct Remapping {
    pool: Pool,
    grid: Grid,
    options: RemapOptions,
    /// Thread of each box (below the part count, the smaller of threads and boxes).
    owners: Vec<u32>,
    lists: OwnerLists,
    tracker: Tracker,
    /// When to remap.
    policy: RemapPolicy,
    /// Each thread's task time in the iteration under way, and per phase the largest, mean
    /// and smallest thread time (seconds).
    iteration_busy: Vec<Duration>,
    phase_busy: Vec<[f64; 3]>,
    phases_in_iteration: usize,
    /// The last motion hints: momentum and particles per box.
    motion: Option<(Vec<[f64; 3]>, Vec<f64>)>,
    /// Remappings computed so far (PackStealLB's stream).
    remaps: u64,
    /// Affinity without per-box bookkeeping: with no stealing a box changes thread only when
    /// its owner changes, so a phase after the first compares every box and finds `moved` of
    /// them elsewhere (the boxes the last remapping moved, if it came since).
    ran_before: bool,
    moved: usize,
    /// The iterations the run has left, where the application said: no remapping at the last.
    left: IterationsLeft,
}

impl Remapping {
    /// `threads` unpinned workers over `grid`.
    pub fn new(grid: Grid, threads: usize, options: RemapOptions) -> crate::Result<Self> {
        Self::with_pool(grid, Pool::new(threads, Arc::new(|_| {}))?, options)
    }

    /// Over an existing pool. Maps uniform loads by RCB to start (its time is the initial
    /// cost estimate of the default criterion).
    pub fn with_pool(grid: Grid, pool: Pool, mut options: RemapOptions) -> crate::Result<Self> {
        let bad = crate::error::parameter;
        if options.chunk == 0 {
            return Err(bad("chunk", "0".into(), "a chunk must hold at least one box"));
        }
        if !(options.trigger.is_finite() && options.trigger >= 0.0) {
            return Err(bad("trigger", options.trigger.to_string(), "expected a finite fraction ≥ 0"));
        }
        pbs::check_memory("remapping executor state", grid.len(), crate::box_timing::EXECUTOR_BYTES_PER_BOX)?;
        let threads = pool.threads();
        let start = Instant::now();
        let owners = kway_rcb(&grid, &vec![1.0; grid.len()], threads.min(grid.len()))?;
        let cost = start.elapsed().as_secs_f64();
        let criterion = options.criterion.take().unwrap_or_else(|| Box::new(Boulmier::new(cost)));
        let policy = RemapPolicy::new(criterion, options.trigger, cost);
        let lists = OwnerLists::new(&owners, threads, options.chunk as usize);
        let mut tracker = Tracker::new(grid.len(), threads, BoxTimer { affinity: false, ..options.timer })?;
        if let Remapper::VectorRcb { phases } | Remapper::VectorGreedy { phases, .. } = options.remapper {
            pbs::check_memory("per-phase box times", grid.len(), phases.saturating_mul(8))?;
            tracker.record_phases(phases);
        }
        Ok(Remapping {
            tracker,
            pool,
            grid,
            options,
            owners,
            lists,
            policy,
            iteration_busy: vec![Duration::ZERO; threads],
            phase_busy: Vec::new(),
            phases_in_iteration: 0,
            motion: None,
            remaps: 0,
            ran_before: false,
            moved: 0,
            left: IterationsLeft::default(),
        })
    }

    /// The current owner of every box.
    pub fn owners(&self) -> &[u32] {
        &self.owners
    }

    fn phase(&mut self, task: Task<'_>) -> PhaseStats {
        let entered = std::time::Instant::now();
        self.tracker.begin_phase();
        self.phases_in_iteration += 1;
        let runs = &self.lists.runs;
        let mut stats = pool_phase(&self.pool, &mut self.tracker, &|t, tracker, local| {
            for r in &runs[t] {
                tracker.run_range(r.clone(), t, local, task);
            }
        })
        .unwrap_or_else(|p| std::panic::resume_unwind(p));
        if std::mem::replace(&mut self.ran_before, true) {
            stats.compared = self.grid.len();
            stats.same_thread = self.grid.len() - std::mem::take(&mut self.moved);
        }
        for (acc, b) in self.iteration_busy.iter_mut().zip(&stats.busy) {
            *acc += *b;
        }
        let busy: Vec<f64> = stats.busy.iter().map(Duration::as_secs_f64).collect();
        let mean = busy.iter().sum::<f64>() / busy.len().max(1) as f64;
        self.phase_busy.push([
            busy.iter().copied().fold(0.0, f64::max),
            mean,
            busy.iter().copied().fold(f64::INFINITY, f64::min),
        ]);
        stats.wall = entered.elapsed();
        stats
    }

    /// The remapper's owners for `box_loads` (and the per-phase loads, the motion).
    fn remap(&mut self, box_loads: &[f64], phase_loads: Option<&[Vec<f64>]>) -> crate::Result<Vec<u32>> {
        let parts = self.pool.threads().min(self.grid.len());
        self.remaps += 1;
        let seed = stream_seed(self.options.seed, self.remaps);
        let motion = self.motion.as_ref().map(|(m, p)| (&m[..], &p[..]));
        let inputs = RemapInputs { owners: &self.owners, box_loads, phase_loads, motion, seed };
        Ok(self.options.remapper.remap(&self.grid, parts, &inputs)?)
    }

    fn end_of_iteration(&mut self) -> IterationEnd {
        let start = Instant::now();
        self.tracker.end_iteration();
        let loads: Vec<f64> = self.iteration_busy.iter().map(Duration::as_secs_f64).collect();
        let boxes_run = self.grid.len() * self.phases_in_iteration.max(1);
        timing::adapt(&mut self.tracker, &loads, boxes_run, self.options.chunk, self.options.timer.stride);
        self.phases_in_iteration = 0;
        self.iteration_busy.iter_mut().for_each(|d| *d = Duration::ZERO);
        let vector = self.options.remapper.is_vector();
        let phases = std::mem::take(&mut self.phase_busy);
        // What the criterion and the check see: the threads' loads over the iteration, or for
        // vector loads the sum over phases of each phase's largest, mean and smallest.
        let sample = if vector {
            let sum = |i: usize| phases.iter().map(|p| p[i]).sum::<f64>();
            Sample { max: sum(0), mean: sum(1), min: sum(2) }
        } else {
            Sample {
                max: loads.iter().copied().fold(0.0, f64::max),
                mean: loads.iter().sum::<f64>() / loads.len() as f64,
                min: loads.iter().copied().fold(f64::INFINITY, f64::min),
            }
        };
        let seen = self.policy.observe(sample, self.tracker.samples_completed());
        let mut end = IterationEnd { max_avg: seen.max_avg, ..Default::default() };
        // At the run's last iteration no iteration would run on a remapping: its question is
        // put off, for a run that goes on after all.
        let last = self.left.end_one();
        if last {
            self.policy.hold(seen);
        }
        if last || !seen.asked {
            end.rebalance_time = start.elapsed();
            end.rebalance_critical = end.rebalance_time;
            return end;
        }
        let parts = self.pool.threads().min(self.grid.len());
        let box_loads = self.tracker.box_loads();
        let phase_loads = self.tracker.phase_loads();
        let imbalance = |owners: &[u32]| imbalance(vector, owners, &box_loads, phase_loads.as_deref(), parts);
        let now = imbalance(&self.owners);
        if self.policy.decide(seen, now) {
            // Measured times are finite and ≥ 0, the motion hints were checked on arrival.
            let owners = self.remap(&box_loads, phase_loads.as_deref()).expect("a remapping of checked inputs");
            let taken = imbalance(&owners) < now;
            if taken {
                end.migrations = metrics::migrations(&self.owners, &owners);
                self.moved += end.migrations;
                if end.migrations > 0 {
                    self.owners = owners;
                    self.lists = OwnerLists::new(&self.owners, self.pool.threads(), self.options.chunk as usize);
                    self.tracker.forget_samples();
                }
                end.rebalanced = true;
            }
            let samples = self.tracker.samples_completed();
            self.policy.remapped(seen, taken, start.elapsed().as_secs_f64(), samples);
        }
        end.rebalance_time = start.elapsed();
        end.rebalance_critical = end.rebalance_time;
        end
    }
}

/// What a remapper minimises over `owners`: the threads' max_avg of the box loads, or, for a
/// vector remapper given per-phase loads, its sum over the phases.
fn imbalance(vector: bool, owners: &[u32], box_loads: &[f64], phase_loads: Option<&[Vec<f64>]>, parts: usize) -> f64 {
    match phase_loads {
        Some(phases) if vector => metrics::vector_max_avg(owners, phases, parts),
        _ => metrics::max_avg(&metrics::charges(owners, box_loads, parts)),
    }
}

/// The seed of the `remap`-th remapping's draws, from the executor's `seed`: a stream of its
/// own for each remapping and each seed.
fn stream_seed(seed: u64, remap: u64) -> u64 {
    seed ^ remap.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

// SAFETY: every box is in exactly one thread's runs: `OwnerLists::new` files each box under its
// one owner, and every remapper returns part ids below the part count, at most the thread
// count (an id out of range would panic in `OwnerLists::new`, before any phase). Each thread
// walks only its own runs; the lists change only between phases (`&mut self`); the grid, and
// so `boxes()`, is fixed at construction; and the pool returns after every worker's job ended.
unsafe impl Executor for Remapping {
    fn name(&self) -> &'static str {
        self.options.remapper.name()
    }
    fn threads(&self) -> usize {
        self.pool.threads()
    }
    fn boxes(&self) -> usize {
        self.grid.len()
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
    fn end_iteration(&mut self) -> IterationEnd {
        self.end_of_iteration()
    }
    fn planned_owners(&self) -> Option<Vec<u32>> {
        Some(self.owners.clone())
    }
    fn hint_loads(&mut self, loads: &[f64]) -> crate::Result<bool> {
        pbs::Problem::new(self.grid, loads, 1)?;
        let owners = self.remap(loads, None)?;
        self.moved += metrics::migrations(&self.owners, &owners);
        self.owners = owners;
        self.lists = OwnerLists::new(&self.owners, self.pool.threads(), self.options.chunk as usize);
        self.tracker.forget_samples();
        self.policy.given_loads();
        Ok(true)
    }
    fn hint_iterations_left(&mut self, iterations: u64) {
        self.left.set(iterations);
    }
    fn wants_motion(&self) -> bool {
        matches!(self.options.remapper, Remapper::NoRcb { .. })
    }
    fn hint_motion(&mut self, momentum: &[[f64; 3]], particles: &[f64]) -> crate::Result<bool> {
        if !self.wants_motion() {
            return Ok(false);
        }
        // The bisection's checks now rather than at the next remapping, and the hints into
        // the same buffers every iteration: a hint allocates nothing.
        pbs::bisection::check_motion(self.grid.len(), momentum, particles)?;
        let (m, p) = self.motion.get_or_insert_with(Default::default);
        m.clear();
        m.extend_from_slice(momentum);
        p.clear();
        p.extend_from_slice(particles);
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// The largest thread's busy time over the mean, in a phase.
    fn busy_max_avg(stats: &PhaseStats) -> f64 {
        let busy: Vec<f64> = stats.busy.iter().map(Duration::as_secs_f64).collect();
        let mean = busy.iter().sum::<f64>() / busy.len() as f64;
        busy.iter().copied().fold(0.0, f64::max) / mean
    }

    /// Busy-waits `micros` microseconds.
    fn spin(micros: u64) {
        crate::clock::busy_wait(Duration::from_micros(micros));
    }

    #[test]
    fn every_remapper_runs_each_box_once_and_moves_a_heavy_corner() {
        for name in ["rcb", "norcb", "packsteal", "vector-rcb", "vector-greedy", "norm-greedy", "diffusion"] {
            let grid = Grid::new(12, 12).unwrap();
            let options = RemapOptions::new(Remapper::by_name(name).unwrap());
            let mut exec = Remapping::new(grid, 2, options).unwrap();
            assert_eq!(exec.name(), name);
            let start = exec.owners().to_vec();
            let hits: Vec<AtomicU64> = (0..grid.len()).map(|_| AtomicU64::new(0)).collect();
            let (mut migrations, mut moved) = (0, 0);
            for it in 0..12u64 {
                // The lowest three rows, all thread 0's under RCB's first cut, are heavy.
                let stats = exec.run_phase(&|k| {
                    if k < 36 {
                        spin(20);
                    }
                    hits[k].fetch_add(1, Ordering::Relaxed);
                });
                // Affinity: every box stayed but those the last remapping moved.
                let stayed = (it > 0).then(|| (grid.len() - moved) as f64 / grid.len() as f64);
                assert_eq!(stats.affinity(), stayed, "{name}, iteration {it}");
                let end = exec.end_iteration();
                // The iteration's max_avg is its one phase's: largest over mean thread time.
                assert_eq!(end.max_avg, busy_max_avg(&stats), "{name}, iteration {it}");
                moved = end.migrations;
                migrations += end.migrations;
                assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == it + 1), "{name}");
            }
            assert!(migrations > 0, "{name}: the heavy rows should have moved boxes");
            let heavy_owners: std::collections::BTreeSet<u32> = exec.owners()[..36].iter().copied().collect();
            assert_eq!(heavy_owners.len(), 2, "{name}: both threads share the heavy rows: {:?}", exec.owners());
            assert_ne!(exec.owners(), start);
        }
    }

    /// The heavy rows of the test above, each iteration told it is the run's last: no
    /// remapper moves a box, though the iterations measured the imbalance it moves them for
    /// (their median: on a loaded machine a preempted light thread can hide one iteration's).
    /// Told nothing at the next, each remaps: the first measurement's question, put off, is
    /// asked again.
    #[test]
    fn no_remapper_moves_a_box_at_the_last_iteration_of_a_hinted_run() {
        let heavy_rows = |k: usize| {
            if k < 36 {
                spin(20);
            }
        };
        for name in ["rcb", "norcb", "packsteal", "vector-rcb", "vector-greedy", "norm-greedy", "diffusion"] {
            let grid = Grid::new(12, 12).unwrap();
            let mut exec = Remapping::new(grid, 2, RemapOptions::new(Remapper::by_name(name).unwrap())).unwrap();
            let start = exec.owners().to_vec();
            let mut measured = Vec::new();
            for it in 0..12 {
                exec.hint_iterations_left(1);
                exec.run_phase(&heavy_rows);
                let end = exec.end_iteration();
                assert!(!end.rebalanced && end.migrations == 0, "{name}, iteration {it}: {end:?}");
                measured.push(end.max_avg);
            }
            let median = pbs::metrics::median(&measured);
            assert!(median > 1.2, "{name}: the imbalance is measured: {measured:?}");
            assert_eq!(exec.owners(), start, "{name}");
            exec.run_phase(&heavy_rows);
            let end = exec.end_iteration();
            assert!(end.rebalanced && end.migrations > 0, "{name}: a run that goes on past its hint: {end:?}");
        }
    }

    #[test]
    fn each_remapper_calls_its_partitioner_and_rcb_stands_in_without_its_inputs() {
        let grid = Grid::new(12, 8).unwrap();
        let n = grid.len();
        // A heavy left third in one phase, a heavy top half in the other.
        let phases: Vec<Vec<f64>> = vec![
            (0..n).map(|k| if k % 12 < 4 { 5.0 } else { 1.0 }).collect(),
            (0..n).map(|k| if k / 12 >= 4 { 3.0 } else { 0.5 }).collect(),
        ];
        let loads: Vec<f64> = (0..n).map(|k| phases[0][k] + phases[1][k]).collect();
        let owners: Vec<u32> = (0..n).map(|k| u32::from(k % 12 >= 6)).collect();
        let momentum = vec![[0.0, 1.0, 0.0]; n];
        let particles = vec![2.0; n];
        let x = RemapInputs {
            owners: &owners,
            box_loads: &loads,
            phase_loads: Some(&phases),
            motion: Some((&momentum, &particles)),
            seed: 9,
        };
        let bare = RemapInputs { phase_loads: None, motion: None, ..x };
        let rcb = kway_rcb(&grid, &loads, 3).unwrap();
        let remap = |name: &str, x: &RemapInputs| Remapper::by_name(name).unwrap().remap(&grid, 3, x).unwrap();
        let mut stolen = owners.clone();
        pack_steal(&grid, &loads, &mut stolen, 3, &PackSteal::default(), 9).unwrap();
        let expected = [
            ("rcb", rcb.clone()),
            ("norcb", kway_norcb(&grid, &loads, &momentum, &particles, 3, 1e-3).unwrap()),
            ("packsteal", stolen),
            ("vector-rcb", kway_vector_rcb(&grid, &phases, 3).unwrap()),
            ("vector-greedy", pbs::greedy::vector_greedy(&phases, 3).unwrap()),
            ("norm-greedy", pbs::greedy::norm_greedy(&phases, 3).unwrap()),
            ("diffusion", pbs::diffusion::diffuse(&grid, &owners, &loads, &vec![1.0; n], 3, 1.02).unwrap()),
        ];
        for (name, partition) in expected {
            // A partition from scratch comes with its ids matched to the current owners'.
            let want = match name {
                "packsteal" | "diffusion" => partition,
                _ => pbs::metrics::match_labels(&owners, &partition, 3).unwrap(),
            };
            assert_eq!(remap(name, &x), want, "{name}");
            let vector = matches!(name, "vector-rcb" | "vector-greedy" | "norm-greedy");
            assert_eq!(Remapper::by_name(name).unwrap().is_vector(), vector, "{name}");
            if name != "rcb" {
                assert_ne!(want, remap("rcb", &x), "{name}: the test needs an answer other than RCB's");
            }
            // Without motion or per-phase loads, the remappers that need them cut as RCB.
            if vector || name == "norcb" {
                assert_eq!(remap(name, &bare), remap("rcb", &bare), "{name}");
            }
        }
    }

    /// Where the loads have not moved, RCB from scratch cuts the same parts, and each keeps the
    /// thread that holds it, whatever ids RCB gives them: nothing moves. Where a load moved,
    /// each part keeps the id of the current part it overlaps most.
    #[test]
    fn a_partition_from_scratch_keeps_the_ids_of_the_parts_it_overlaps() {
        let grid = Grid::new(16, 12).unwrap();
        let n = grid.len();
        let loads: Vec<f64> = (0..n).map(|k| 1.0 + (k % 7) as f64).collect();
        let rcb = kway_rcb(&grid, &loads, 5).unwrap();
        // The same parts held by other threads: ids 0..5 reversed.
        let held: Vec<u32> = rcb.iter().map(|&p| 4 - p).collect();
        assert_ne!(held, rcb);
        let x = RemapInputs { owners: &held, box_loads: &loads, phase_loads: None, motion: None, seed: 1 };
        for name in ["rcb", "norcb", "vector-rcb"] {
            let owners = Remapper::by_name(name).unwrap().remap(&grid, 5, &x).unwrap();
            assert_eq!(owners, held, "{name}: a part that stays keeps its thread");
        }
        // A heavier right edge: the cuts move, and the boxes that change thread are exactly
        // those RCB's new parts, named after the parts they overlap most, take from others.
        let shifted: Vec<f64> =
            loads.iter().enumerate().map(|(k, q)| if k % 16 >= 13 { 4.0 * q } else { *q }).collect();
        let x = RemapInputs { box_loads: &shifted, ..x };
        let owners = Remapper::Rcb.remap(&grid, 5, &x).unwrap();
        let fresh = kway_rcb(&grid, &shifted, 5).unwrap();
        assert_eq!(owners, pbs::metrics::match_labels(&held, &fresh, 5).unwrap());
        assert!(pbs::metrics::migrations(&held, &owners) < pbs::metrics::migrations(&held, &fresh));
        // Current owners that do not fit the grid are named.
        let short = RemapInputs { owners: &held[1..], ..x };
        assert!(Remapper::Rcb.remap(&grid, 5, &short).is_err());
    }

    #[test]
    fn what_a_remapping_minimises_is_the_scalar_or_the_vector_imbalance() {
        // Thread 0 carries phase 0, thread 1 phase 1: balanced summed, 2 × the mean per phase.
        let owners = [0, 0, 1, 1];
        let phases = vec![vec![1.0, 1.0, 0.0, 0.0], vec![0.0, 0.0, 1.0, 1.0]];
        let sums = [1.0; 4];
        assert_eq!(imbalance(false, &owners, &sums, Some(&phases), 2), 1.0);
        assert_eq!(imbalance(true, &owners, &sums, Some(&phases), 2), 2.0);
        assert_eq!(imbalance(true, &owners, &sums, None, 2), 1.0, "no phases measured: the sums");
    }

    #[test]
    fn each_remapping_and_each_seed_draw_their_own_stream() {
        let seeds: std::collections::BTreeSet<u64> =
            (0..4).flat_map(|seed| (1..=50).map(move |remap| stream_seed(seed, remap))).collect();
        assert_eq!(seeds.len(), 200);
        assert!((0..4).all(|seed| !seeds.contains(&seed)), "a remapping's stream is not the seed itself");
        // The executor counts its remappings.
        let mut exec = Remapping::new(Grid::new(8, 8).unwrap(), 2, RemapOptions::new(Remapper::Rcb)).unwrap();
        exec.hint_loads(&[1.0; 64]).unwrap();
        exec.hint_loads(&[2.0; 64]).unwrap();
        assert_eq!(exec.remaps, 2);
    }

    #[test]
    fn a_remapping_that_changes_nothing_is_not_taken() {
        // Diffusion that stops at 10 × the mean moves nothing: no better mapping, no rebalancing,
        // even where the criterion and a first measured iteration ask for one.
        let grid = Grid::new(8, 8).unwrap();
        let options = RemapOptions {
            trigger: 0.0,
            criterion: Some(Box::new(crate::criteria::Always)),
            ..RemapOptions::new(Remapper::Diffusion { limit: 10.0 })
        };
        let mut exec = Remapping::new(grid, 2, options).unwrap();
        let start = exec.owners().to_vec();
        for _ in 0..10 {
            exec.run_phase(&|k| spin(if k < 16 { 20 } else { 1 }));
            let end = exec.end_iteration();
            assert!(!end.rebalanced && end.migrations == 0, "{end:?}");
        }
        assert_eq!(exec.owners(), start);
    }

    #[test]
    fn nothing_remaps_when_nothing_asks() {
        // A criterion that never asks, and loads given up front (no first measured iteration
        // to check): the heavy corner stays where it is, however imbalanced.
        let grid = Grid::new(12, 12).unwrap();
        let options =
            RemapOptions { criterion: Some(Box::new(crate::criteria::Never)), ..RemapOptions::new(Remapper::Rcb) };
        let mut exec = Remapping::new(grid, 2, options).unwrap();
        exec.hint_loads(&[1.0; 144]).unwrap();
        let start = exec.owners().to_vec();
        let mut imbalanced = 0;
        for _ in 0..10 {
            exec.run_phase(&|k| spin(if k < 36 { 20 } else { 0 }));
            let end = exec.end_iteration();
            assert!(!end.rebalanced, "{end:?}");
            imbalanced += usize::from(end.max_avg > 1.2);
        }
        assert!(imbalanced >= 5, "the test needs a lasting imbalance: {imbalanced} of 10 iterations");
        assert_eq!(exec.owners(), start);
    }

    #[test]
    fn timing_adapts_to_the_boxes_run_in_all_the_iteration_s_phases() {
        let grid = Grid::new(16, 16).unwrap();
        // Boxes long enough for a piece of about 12 on this machine's clock (timing costs
        // at most 0.5 % of the work).
        let each = Duration::from_secs_f64(crate::clock::costs().clock_pair / (0.005 * 12.0));
        // A thread preempted for long stretches a box's mean to a piece of 1, where counting
        // the boxes wrong would not show: a few tries for one that can show it.
        for _ in 0..5 {
            let mut exec = Remapping::new(grid, 2, RemapOptions::new(Remapper::Rcb)).unwrap();
            assert!(!exec.tracker.records_affinity(), "affinity is counted from the remappings instead");
            let mut busy = [0.0; 2];
            for _ in 0..2 {
                let stats = exec.run_phase(&|_| crate::clock::busy_wait(each));
                busy.iter_mut().zip(&stats.busy).for_each(|(b, d)| *b += d.as_secs_f64());
            }
            assert_eq!(exec.phases_in_iteration, 2);
            exec.end_iteration();
            assert_eq!(exec.phases_in_iteration, 0);
            // The piece a tracker gets for this busy time over 2 × 256 boxes run: with one
            // phase's boxes counted, or four, the mean box would be twice or half as long.
            let mut fresh = Tracker::new(grid.len(), 2, BoxTimer::default()).unwrap();
            let piece = timing::adapt(&mut fresh, &busy, 2 * grid.len(), 128, 8).unwrap();
            assert_eq!(exec.tracker.piece(), piece);
            if piece > 1 && piece < 128 {
                return;
            }
        }
        panic!("no try gave a piece inside its bounds, where the count of boxes shows");
    }

    #[test]
    fn norcb_takes_motion_hints_and_refuses_bad_ones() {
        let grid = Grid::new(16, 4).unwrap();
        let mut exec = Remapping::new(grid, 2, RemapOptions::new(Remapper::by_name("norcb").unwrap())).unwrap();
        assert!(exec.wants_motion());
        // Motion along x: the remapping cuts along it, into a bottom and a top half.
        assert!(exec.hint_motion(&[[1.0, 0.0, 0.0]; 64], &[1.0; 64]).unwrap());
        exec.hint_loads(&[1.0; 64]).unwrap();
        assert!(exec.owners()[..32].iter().all(|&o| o == exec.owners()[0]));
        assert!(exec.owners()[32..].iter().all(|&o| o != exec.owners()[0]));
        assert!(exec.hint_motion(&[[1.0, 0.0, 0.0]; 63], &[1.0; 64]).is_err());
        let mut nan = [[1.0, 0.0, 0.0]; 64];
        nan[7][0] = f64::NAN;
        assert!(exec.hint_motion(&nan, &[1.0; 64]).unwrap_err().to_string().contains("box 7"));
        // In 3D, motion along z on 4 × 4 × 8 boxes: where RCB cuts across z, the longest side,
        // each line of boxes along z stays in one part.
        let tall = Grid::new_3d(4, 4, 8).unwrap();
        let mut exec = Remapping::new(tall, 2, RemapOptions::new(Remapper::by_name("norcb").unwrap())).unwrap();
        assert!(exec.owners()[..16].iter().all(|&o| o != exec.owners()[127]), "RCB first");
        assert!(exec.hint_motion(&[[0.0, 0.0, 1.0]; 128], &[1.0; 128]).unwrap());
        exec.hint_loads(&[1.0; 128]).unwrap();
        let o = exec.owners();
        assert!((0..16).all(|k| (1..8).all(|l| o[k + 16 * l] == o[k])), "{o:?}");
        assert!(o.contains(&0) && o.contains(&1));
        // The others ignore hints.
        let mut rcb = Remapping::new(grid, 2, RemapOptions::new(Remapper::Rcb)).unwrap();
        assert!(!rcb.wants_motion());
        assert!(!rcb.hint_motion(&[[1.0, 0.0, 0.0]; 64], &[1.0; 64]).unwrap());
    }

    #[test]
    fn affinity_counts_the_boxes_a_remapping_moved() {
        let grid = Grid::new(8, 8).unwrap();
        let mut exec = Remapping::new(grid, 2, RemapOptions::new(Remapper::Rcb)).unwrap();
        let phase = |exec: &mut Remapping| exec.run_phase(&|_| {}).affinity();
        assert_eq!(phase(&mut exec), None, "nothing to compare with yet");
        assert_eq!(phase(&mut exec), Some(1.0));
        // The first row weighs as much as the rest: RCB moves the cut.
        let before = exec.owners().to_vec();
        let loads: Vec<f64> = (0..64).map(|k| if k < 8 { 7.0 } else { 1.0 }).collect();
        exec.hint_loads(&loads).unwrap();
        let moved = pbs::metrics::migrations(&before, exec.owners());
        assert!(moved > 0);
        assert_eq!(phase(&mut exec), Some(1.0 - moved as f64 / 64.0));
        assert_eq!(phase(&mut exec), Some(1.0));
    }

    #[test]
    fn bad_settings_are_errors() {
        let grid = Grid::new(4, 4).unwrap();
        let options = RemapOptions { chunk: 0, ..RemapOptions::new(Remapper::Rcb) };
        assert!(Remapping::new(grid, 2, options).err().unwrap().to_string().contains("chunk"));
        for trigger in [f64::NAN, f64::INFINITY, -0.1] {
            let options = RemapOptions { trigger, ..RemapOptions::new(Remapper::Rcb) };
            assert!(Remapping::new(grid, 2, options).err().unwrap().to_string().contains("trigger"), "{trigger}");
        }
        let options = RemapOptions { trigger: 0.0, ..RemapOptions::new(Remapper::Rcb) };
        assert!(Remapping::new(grid, 2, options).is_ok());
        assert!(Remapper::by_name("zoltan").is_none());
        // More threads than boxes: the extra threads own nothing.
        let mut exec = Remapping::new(Grid::new(2, 1).unwrap(), 3, RemapOptions::new(Remapper::Rcb)).unwrap();
        let stats = exec.run_phase(&|_| {});
        assert_eq!(stats.boxes, vec![1, 1, 0]);
    }
}
