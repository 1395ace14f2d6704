//! `pbs`: owner computes. The balancer maps every box to a thread (its vCore); each thread
//! runs its own boxes in index order, so a box runs on the same thread iteration after
//! iteration and its data stays in that thread's cache and on its NUMA node. Box times, measured
//! per piece of the owner's runs and smoothed, become the loads. The first measured iteration
//! always rebalances (the starting mapping assumed uniform loads), and so does a rebalancing
//! that the next few measured iterations show to have left the threads imbalanced (a few
//! times at most); otherwise a [`Criterion`] decides whether the balancer runs (a few
//! warm-started steps, or a start over from a bisection when the cells are far from balance:
//! [`pbs::rebalance`]), and is skipped when the measured loads are already balanced. Optionally, a thread that runs dry steals from the *end* of a neighbouring
//! vCore's list, so the owner keeps the front it is working through.
//!
//! One concept per file: this one holds the executor loop (a phase, the end of an iteration);
//! [`stealing`] the claims at both ends of a list and the thief's search; [`affinity`] the
//! affinity figure, counted by the threads as they run the boxes; [`policy`] the rules
//! that decide whether to rebalance (clock-free, also the many-core model's); [`rebalancing`]
//! their application and where the balancer runs; [`overlap`] the balancer in idle time (or, when
//! its steps outlast that idle time, on the thread of [`crate::background`]); [`lending`] the
//! worker that gives that thread its core where no core is spare; [`options`] the settings and
//! their checks.
//! How densely boxes are timed is `executors/timing.rs`, shared with the remappers.

mod affinity;
mod lending;
mod options;
mod overlap;
mod policy;
mod rebalancing;
mod stealing;
mod thread_wide;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use pbs::{balance, methods, Balancer, Grid, Problem, StopRule, VCores};

use super::owner_lists::OwnerLists;
use super::run_length::IterationsLeft;
use super::timing;
use crate::background::Background;
use crate::box_timing::{BoxTimer, Tracker};
use crate::clock;
use crate::executor::{pool_phase, Executor, IterationEnd, PhaseStats, Task};
use crate::pool::Pool;
use affinity::LastRuns;
use lending::Lender;
pub use lending::Lending;
pub use options::{Overlap, PbsOptions};
use overlap::{Finish, Pending, Slack};
#[cfg(test)]
pub(crate) use policy::PERSISTENT_ITERATIONS;
pub use policy::{Observation, RebalancePolicy, Standing};
pub use rebalancing::{balancer_units, RESTART_UNITS};
pub(crate) use stealing::victim_order;
pub use stealing::Stealing;
pub use stealing::STEAL_MIN_PHASE;
use stealing::{claim_front, pack, steal_from, unpack, Lists, ThreadSteals};

/// The two sides of a list's claim word on loom's atomic, for the loom model of the protocol
/// (`tests/loom_claims.rs`; built only with `--cfg pbs_loom`): `claim_front(word, chunk)` as
/// an owner takes boxes, `claim_back(word, 2)` as a thief does (taking from an owner that has
/// not started too), and `pack(front, back)` for a fresh list.
#[cfg(pbs_loom)]
#[doc(hidden)]
pub mod loom_claims {
    use loom::sync::atomic::AtomicU64;
    use std::ops::Range;

    /// The word of a list whose owner will take from `front` and thieves from `back`.
    pub fn pack(front: u32, back: u32) -> u64 {
        super::stealing::pack(front, back)
    }

    /// The owner's claim.
    pub fn claim_front(word: &AtomicU64, chunk: u32) -> Option<Range<u32>> {
        super::stealing::claim_front(word, chunk)
    }

    /// A thief's claim (`None`: nothing left).
    pub fn claim_back(word: &AtomicU64, chunk: u32) -> Option<Range<u32>> {
        match super::stealing::claim_back(word, chunk, true) {
            super::stealing::Steal::Took(r) => Some(r),
            _ => None,
        }
    }
}

/// The PBS executor.
pub struct Pbs {
    pool: Pool,
    grid: Grid,
    options: PbsOptions,
    /// The balancer and the vCores it moves: who owns which box. The balancer is lent to a
    /// rebalancing running in the threads' idle time while one is under way.
    balancer: Option<Box<dyn Balancer + Send>>,
    /// A rebalancing run in the threads' idle time (see `overlap.rs`).
    slack: Slack,
    /// The balancer thread (see [`crate::background`]), and what the executor keeps of the
    /// run it has out.
    background: Background<Pending>,
    away: Option<Away>,
    /// The worker that lends its core to the balancer thread, if one does.
    lender: Lender,
    /// Shared with a run out until the run has copied them (see [`overlap::RunVCores`]).
    vcores: Arc<VCores>,
    /// The vCores a run took on replaced, whose memory the next run's copy reuses.
    spare_vcores: Option<VCores>,
    /// Each thread's boxes and whom it steals from (new after every rebalancing that moved
    /// a box).
    lists: ThreadLists,
    timing: Timing,
    rebalance: Rebalance,
    steal: Steal,
    /// Where each box ran last, for the affinity figure (see `affinity.rs`).
    last_runs: LastRuns,
}

/// A rebalancing out on the balancer thread.
struct Away {
    /// Iterations ended since it went out.
    age: usize,
    /// Given up: its result is dropped when it comes back.
    cancelled: bool,
}

/// Box timing and the owner loads of the iteration under way.
struct Timing {
    tracker: Tracker,
    /// Owner loads of the current iteration so far: each thread's busy time, minus what it
    /// spent on stolen boxes, plus what others spent on its boxes.
    iteration_busy: Vec<Duration>,
    /// Phases run in the current iteration.
    phases_in_iteration: usize,
    /// Wall time of the current iteration's phases so far, and of the last iteration's.
    wall_this_iteration: Duration,
    last_iteration_wall: Duration,
}

/// What decides the next rebalancing, and where it runs (see `policy.rs`, `rebalancing.rs`).
struct Rebalance {
    /// The rules that decide when to rebalance (see `policy.rs`).
    policy: RebalancePolicy,
    /// Balancer time in the threads' idle time, and its overrun, in this iteration so far.
    in_slack: Duration,
    overrun: Duration,
    /// Idle time of the first idle thread, summed over this iteration's phases so far, and
    /// per phase in the last iteration: what a balancer step must fit in to stay off the
    /// critical path.
    slack_this_iteration: f64,
    slack_per_phase: f64,
    /// Seconds one balancer unit (a step) took in the last rebalancing run in idle time or on
    /// the balancer thread (before the first, per unit of the initial balancing).
    unit_time: f64,
    /// Seconds the last rebalancing run in idle time or on the balancer thread took (before
    /// the first, a full run's units at `unit_time`).
    run_time: f64,
    /// Whether the balancer thread's time counts in a rebalancing's cost `C`: when the workers
    /// hold every CPU the process may use, the thread shares a worker's core, and the phases
    /// wait for that worker while the thread runs its time slice. On a 16-core machine at 16
    /// threads, md's mean iteration grew by about the balancer thread's time (docs/results.md,
    /// "Sixteen threads, 2026-11-26"); at 8 threads, with cores to spare, it did not.
    thread_time_is_wall_time: bool,
    /// The iterations the run has left, where the application said: none starts at the last.
    left: IterationsLeft,
}

/// Stealing: the claim words of the lists and what thieves took (see `stealing.rs`).
struct Steal {
    /// Whether this iteration's phases steal (see [`Stealing`]).
    active: bool,
    /// Boxes an owner claims at a time when stealing is on (fewer when tasks are longer).
    claim: u32,
    /// Per thread: its list's claim word (`pack(0, len)` between phases), the time it spent on
    /// others' boxes in the current phase, and the time thieves spent on its boxes.
    threads: Vec<CachePadded<ThreadSteals>>,
}

impl Pbs {
    /// `threads` unpinned workers over `grid`.
    pub fn new(grid: Grid, threads: usize, options: PbsOptions) -> crate::Result<Self> {
        Self::with_pool(grid, Pool::new(threads, Arc::new(|_| {}))?, options)
    }

    /// Over an existing pool. Balances uniform loads once to start (its time is the initial
    /// cost estimate of the default criterion).
    pub fn with_pool(grid: Grid, pool: Pool, mut options: PbsOptions) -> crate::Result<Self> {
        let threads = pool.threads();
        options.check(threads)?;
        let per_box = crate::box_timing::EXECUTOR_BYTES_PER_BOX + pbs::BALANCER_BYTES_PER_BOX;
        pbs::check_memory("pbs executor state", grid.len(), per_box)?;
        // More threads than boxes: the extra threads own nothing and only steal.
        let vcores = threads.min(grid.len());
        let ones = vec![1.0; grid.len()];
        let problem = Problem::new(grid, &ones, vcores)?.with_workers(&pool);
        let mut balancer = methods::by_name(&options.method)?;
        let mut vcores = match options.positions.take() {
            Some(mut p) => {
                p.truncate(vcores);
                VCores::new(&problem, p, vec![0.0; vcores])?
            }
            None => VCores::random(&problem, options.seed),
        };
        if let Some(numa) = &options.numa {
            let n = vcores.len();
            vcores = vcores.with_groups(&numa[..n])?;
        }
        // Measured now rather than inside the first iteration.
        let _ = (clock::costs(), clock::ns_per_tick());
        let start = Instant::now();
        let first =
            balance(balancer.as_mut(), &problem, &mut vcores, StopRule { max_steps: 200, tol: options.tol }, |_| {});
        let cost = start.elapsed().as_secs_f64();
        // What a balancer unit costs, until a rebalancing measures it: it decides whether the
        // first one fits in a phase's idle time (on the pool's threads, it is an underestimate).
        let unit_time = cost / (first.steps + 2) as f64;
        let criterion = options.take_criterion(cost)?;
        let (active, claim) = (options.steal == Stealing::Always, options.chunk);
        let no_core_spare = std::thread::available_parallelism().map_or(true, |cpus| cpus.get() <= threads);
        let mut lender = Lender::new(options.lend, threads, no_core_spare, options.steal);
        let background = match lender.worker.and_then(|w| lending::bound_cpus(&pool, w)) {
            Some(cpus) => Background::for_lent_core(cpus),
            None => {
                lender.worker = None; // not bound: the balancer thread could not follow it
                Background::default()
            }
        };
        let mut pbs = Pbs {
            slack: Slack::new(threads),
            background,
            away: None,
            lender,
            pool,
            grid,
            balancer: Some(balancer),
            vcores: Arc::new(vcores),
            spare_vcores: None,
            lists: ThreadLists::default(),
            timing: Timing {
                tracker: Tracker::new(grid.len(), threads, BoxTimer { affinity: false, ..options.timer })?,
                iteration_busy: vec![Duration::ZERO; threads],
                phases_in_iteration: 0,
                wall_this_iteration: Duration::ZERO,
                last_iteration_wall: Duration::ZERO,
            },
            rebalance: Rebalance {
                policy: RebalancePolicy::new(criterion, options.tol, options.trigger, cost),
                in_slack: Duration::ZERO,
                overrun: Duration::ZERO,
                slack_this_iteration: 0.0,
                slack_per_phase: 0.0,
                unit_time,
                run_time: unit_time * (options.steps_per_rebalance + 2) as f64,
                thread_time_is_wall_time: no_core_spare,
                left: IterationsLeft::default(),
            },
            steal: Steal { active, claim, threads: (0..threads).map(|_| CachePadded::default()).collect() },
            last_runs: LastRuns::new(grid.len(), threads),
            options,
        };
        pbs.lists = pbs.list_shape().lists(&pbs.vcores);
        pbs.fresh_claims();
        // The balancer thread starts now rather than in the iteration of the first run there
        // (up to 0.12 ms on the 16-core lease).
        if threads > 1 && matches!(pbs.options.overlap, Overlap::IdleTimeOrThread | Overlap::Thread) {
            pbs.background.spawn();
        }
        Ok(pbs)
    }

    /// The balancer's current cells (positions, weights, owners).
    pub fn vcores(&self) -> &VCores {
        &self.vcores
    }

    /// Name of the criterion in use.
    pub fn criterion_name(&self) -> String {
        self.rebalance.policy.criterion_name()
    }

    /// How this executor's [`ThreadLists`] are built.
    fn list_shape(&self) -> ListShape {
        ListShape { threads: self.pool.threads(), chunk: self.options.chunk as usize, numa: self.options.numa.clone() }
    }
}

/// What each thread runs and whom it steals from, under one mapping. A run off the critical
/// path (on the balancer thread, or in idle time) builds them in its last unit: between
/// iterations they took 74–92 µs of a 100–120 µs take-on at 4,096 boxes on 16 threads
/// (docs/results.md, "Sixteen threads, a third lease").
#[derive(Debug, Default, PartialEq)]
struct ThreadLists {
    /// Each thread's boxes, as a list and as runs.
    owned: OwnerLists,
    /// Per thread, the other threads in the order its idle worker visits them (neighbouring
    /// vCores first).
    victims: Vec<Vec<u32>>,
}

/// What [`ThreadLists`] are built from besides the vCores: plain data a pending run carries.
#[derive(Clone)]
struct ListShape {
    threads: usize,
    chunk: usize,
    numa: Option<Vec<usize>>,
}

impl ListShape {
    /// The lists of the mapping of `vcores`.
    fn lists(&self, vcores: &VCores) -> ThreadLists {
        let owners = vcores.owners();
        ThreadLists {
            owned: OwnerLists::new(owners, self.threads, self.chunk),
            victims: stealing::victim_order(vcores, self.threads, owners.len(), self.numa.as_deref()),
        }
    }
}

impl Pbs {
    /// After a phase a task panicked in: drops what its workers recorded (claims, time spent
    /// on others' boxes), so the next phase starts afresh and reports only itself, and compares
    /// the next phase's affinity with nothing.
    fn forget_phase(&mut self) {
        for s in &mut self.steal.threads {
            (*s.foreign.get_mut(), *s.lost.get_mut()) = (0, 0);
        }
        self.fresh_claims();
        self.last_runs.forget();
        let _ = self.slack.take_phase();
    }

    /// Every list's claim word at `pack(0, len)`, as between phases (after new lists, or a
    /// phase that did not claim every box).
    fn fresh_claims(&mut self) {
        for (s, l) in self.steal.threads.iter_mut().zip(&self.lists.owned.lists) {
            *s.claim.get_mut() = pack(0, l.len() as u32);
        }
    }
}

// SAFETY: each box is in exactly one thread's list: `OwnerLists::new` files every box under
// its one owner, whether the executor or a run's last unit (on the balancer thread, or in idle
// time on a copy) builds them, and they are installed only between phases (`&mut self`).
// Without stealing each thread walks only its own list; with stealing (always on while a worker
// lends its core, which then walks none) every box is claimed once through its list's atomic
// word, by the owner from the front or a thief from the back (stealing.rs; model-checked in
// tests/loom_claims.rs), never both, from a word that holds `pack(0, len)` of its list when a
// phase starts (`fresh_claims` with new lists and after a panic, and the pass after every
// stealing phase); and the pool returns after every worker's job ended. The word's `u32`
// halves hold any list's length and position: a `Grid` has at most 2^32 - 1 boxes
// (`Grid::new_3d` checks it, and its dimensions can be set no other way).
unsafe impl Executor for Pbs {
    fn name(&self) -> &'static str {
        "pbs"
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
        Some(self.vcores.owners().to_vec())
    }

    fn vcores(&self) -> Option<&VCores> {
        Some(&self.vcores)
    }

    fn hint_loads(&mut self, loads: &[f64]) -> crate::Result<bool> {
        self.balance_on_hints(loads)?;
        Ok(true)
    }

    fn hint_iterations_left(&mut self, iterations: u64) {
        self.rebalance.left.set(iterations);
    }
}

impl Pbs {
    /// One phase: each thread runs its own list (claiming chunks when stealing is on), then,
    /// stealing, takes boxes from its neighbours' lists.
    fn phase(&mut self, task: Task<'_>) -> PhaseStats {
        // The phase's wall time is the whole call: the bookkeeping before and after the
        // threads' work is on the critical path too.
        let entered = Instant::now();
        // A lender's boxes are run by the others, who steal them (see `lending.rs`).
        let lender = self.lender.now();
        let steal = self.steal.active || lender.is_some();
        self.timing.tracker.begin_phase();
        self.timing.phases_in_iteration += 1;
        self.slack.begin_phase(self.pool.threads());
        let (lists, runs, neighbours) = (&self.lists.owned.lists, &self.lists.owned.runs, &self.lists.victims);
        let (claim, steals, previous) = (self.steal.claim, &self.steal.threads, self.last_runs.previous());
        // Balancing in idle time costs a few atomic operations per thread and phase: only
        // while a rebalancing is under way.
        let slack = self.slack.active.then_some(&self.slack);
        let done = pool_phase(&self.pool, &mut self.timing.tracker, &|t, tracker, local| {
            let mut finish = slack.map(|slack| Finish { slack, t, done: false });
            if lender == Some(t) {
                return;
            }
            let mut balance_here = || {
                if let Some(f) = &mut finish {
                    f.done = f.slack.balance_while_others_work(t);
                }
            };
            let mine = &lists[t];
            if !steal {
                // Nobody else touches this list: walk its runs without claiming chunks (no
                // atomic read-modify-write per chunk); runs are the unit of box timing.
                previous.owner_ran(mine, 0..mine.len() as u32, t, local);
                for r in &runs[t] {
                    tracker.run_range(r.clone(), t, local, task);
                }
                balance_here();
            } else {
                while let Some(r) = claim_front(&steals[t].claim, claim) {
                    previous.owner_ran(mine, r.clone(), t, local);
                    tracker.run_chunk(&mine[r.start as usize..r.end as usize], t, local, task);
                }
                let at = Lists { lists, steals, previous, lender };
                let spent_abroad = steal_from(&neighbours[t], &at, t, tracker, local, task);
                if spent_abroad > 0 {
                    steals[t].foreign.store(spent_abroad, Ordering::Relaxed);
                }
                balance_here();
            }
        });
        let mut stats = match done {
            Ok(stats) => stats,
            Err(p) => {
                self.forget_phase();
                std::panic::resume_unwind(p)
            }
        };
        if self.slack.active {
            // Balancing in idle time is not task time: it leaves the busy times and loads.
            let (balancing, overrun) = self.slack.take_phase();
            for (b, spent) in stats.busy.iter_mut().zip(&balancing) {
                *b = b.saturating_sub(*spent);
            }
            self.rebalance.in_slack += balancing.iter().sum::<Duration>();
            self.rebalance.overrun += overrun;
        }
        // The lender's idle time is the balancer thread's, not a step's room.
        let working = stats.busy.iter().enumerate().filter(|&(t, _)| lender != Some(t));
        let least = working.map(|(_, b)| *b).min().unwrap_or_default();
        self.timing.wall_this_iteration += stats.wall;
        self.rebalance.slack_this_iteration += stats.wall.saturating_sub(least).as_secs_f64();
        // One pass over the threads, through `&mut` (the pool's return ordered their writes
        // before it): owner loads, each list's split for the affinity of the next phase, and
        // its claim word reset for that phase.
        let ns = clock::ns_per_tick();
        let per_thread = self.timing.iteration_busy.iter_mut().zip(&stats.busy).zip(&mut self.steal.threads);
        for (t, ((acc, b), s)) in per_thread.enumerate() {
            let len = self.lists.owned.lists[t].len() as u32;
            if !steal {
                *acc += *b;
                self.last_runs.set_split(t, len);
                continue;
            }
            let claim = s.claim.get_mut();
            let (front, back) = unpack(*claim);
            debug_assert_eq!(front, back, "list {t}: every box claimed");
            self.last_runs.set_split(t, front);
            *claim = pack(0, len);
            let abroad = std::mem::take(s.foreign.get_mut()) as f64 * ns;
            let lost = std::mem::take(s.lost.get_mut()) as f64 * ns;
            *acc += Duration::from_nanos((b.as_nanos() as f64 - abroad + lost).max(0.0) as u64);
        }
        self.last_runs.phase_ended();
        stats.wall = entered.elapsed();
        stats
    }

    /// Ends an iteration: turns the measured times into loads, adapts timing and stealing,
    /// and rebalances when due.
    fn end_of_iteration(&mut self) -> IterationEnd {
        let entered = Instant::now();
        self.timing.tracker.end_iteration();
        let loads: Vec<f64> = self.timing.iteration_busy.iter().map(|d| d.as_secs_f64()).collect();
        let boxes_run = self.grid.len() * self.timing.phases_in_iteration.max(1);
        let (max_stride, chunk) = (self.options.timer.stride, self.options.chunk);
        if let Some(piece) = timing::adapt(&mut self.timing.tracker, &loads, boxes_run, chunk, max_stride) {
            // Claims cost about a clock pair each: as many boxes per claim as per timed piece.
            self.steal.claim = piece as u32;
        }
        let stole = self.steal.active;
        self.steal.active = match self.options.steal {
            Stealing::Never => false,
            Stealing::Always => true,
            Stealing::Auto => {
                let phase_per_thread =
                    loads.iter().sum::<f64>() / (loads.len() * self.timing.phases_in_iteration.max(1)) as f64;
                phase_per_thread >= STEAL_MIN_PHASE
            }
        };
        let phases = self.timing.phases_in_iteration.max(1) as f64;
        self.rebalance.slack_per_phase = std::mem::take(&mut self.rebalance.slack_this_iteration) / phases;
        if self.steal.active && !stole {
            // Idle time measured without stealing says little of the iterations that steal:
            // after an imbalanced first iteration it promised room for the first
            // rebalancing's steps that stealing then took, and they overran every phase
            // (docs/design-notes.md, "Stealing"). Count none: such a run goes to the
            // balancer thread.
            self.rebalance.slack_per_phase = 0.0;
        }
        self.timing.phases_in_iteration = 0;
        self.timing.last_iteration_wall = std::mem::take(&mut self.timing.wall_this_iteration);
        self.timing.iteration_busy.iter_mut().for_each(|d| *d = Duration::ZERO);
        // This bookkeeping is the executor's time between iterations too.
        let bookkeeping = entered.elapsed();
        let mut end = self.rebalance_if_due(&loads);
        end.rebalance_time += bookkeeping;
        end.rebalance_critical += bookkeeping;
        let in_slack = self.slack.pending.get_mut().unwrap_or_else(|e| e.into_inner()).as_ref();
        end.under_way_in_idle_time = in_slack.is_some_and(|p| !p.is_done());
        end.under_way = self.away.is_some() || end.under_way_in_idle_time;
        end
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    /// The default method, each step 20 ms (or as given, or as the shared micros say) slower:
    /// a run on the balancer thread stays out.
    pub(in crate::executors::pbs) struct SlowSteps(Box<dyn Balancer + Send>, Arc<AtomicU64>);

    impl Default for SlowSteps {
        fn default() -> Self {
            SlowSteps::new(Duration::from_millis(20))
        }
    }

    impl SlowSteps {
        fn new(each: Duration) -> SlowSteps {
            SlowSteps::gated(Arc::new(AtomicU64::new(each.as_micros() as u64)))
        }

        /// Each step as slow as `micros` says when it starts.
        fn gated(micros: Arc<AtomicU64>) -> SlowSteps {
            SlowSteps(methods::by_name(methods::DEFAULT).unwrap(), micros)
        }
    }

    impl Balancer for SlowSteps {
        fn name(&self) -> &str {
            "slow"
        }
        fn step(&mut self, problem: &Problem, vcores: &mut VCores) {
            std::thread::sleep(Duration::from_micros(self.1.load(Ordering::Relaxed)));
            self.0.step(problem, vcores);
        }
        fn reset(&mut self) {
            self.0.reset();
        }
        fn is_stuck(&self) -> bool {
            self.0.is_stuck()
        }
        fn finish(&mut self, problem: &Problem, vcores: &mut VCores) {
            self.0.finish(problem, vcores);
        }
    }

    /// While a rebalancing runs on the balancer thread, the last worker lends it its core: it
    /// runs none of its boxes, the others do, every box still runs once per phase, the thread
    /// runs under `SCHED_IDLE`, and the core comes back with the run.
    #[test]
    #[cfg(target_os = "linux")]
    #[cfg_attr(miri, ignore = "waits for a balancer thread whose steps sleep 20 ms")]
    fn a_lender_runs_none_of_its_boxes_and_every_box_still_runs_once() {
        let grid = Grid::new(16, 16).unwrap();
        let options = PbsOptions {
            overlap: Overlap::Thread,
            lend: Lending::Always,
            steal: Stealing::Always,
            chunk: 4,
            restart_lands_at_once: false,
            // Two slow steps: the run stays out for about 40 ms.
            steps_per_rebalance: 2,
            ..PbsOptions::default()
        };
        // Bound workers: a core is lent only by a worker the balancer thread can follow. The
        // lender (worker 2) alone on the last CPU, the others on the first.
        let cpus = crate::pinning::cpus_of_this_thread().unwrap();
        if cpus.len() < 2 {
            return; // one CPU: nothing to lend
        }
        let (first, last) = (cpus[0], cpus[cpus.len() - 1]);
        let bind = move |t: usize| {
            crate::pinning::pin_this_thread(&[if t == 2 { last } else { first }]).unwrap();
        };
        let mut pool = Pool::new(3, Arc::new(bind)).unwrap();
        pool.pin_caller_in_phases(crate::pinning::CallerPin::new(&[first]).unwrap());
        let mut exec = Pbs::with_pool(grid, pool, options).unwrap();
        assert_eq!(exec.lender.worker, Some(2));
        exec.balancer = Some(Box::new(SlowSteps::default()));
        exec.rebalance.run_time = 1.0; // a long run: lending pays (`lending::pays`)
        let hits: Vec<AtomicU64> = (0..grid.len()).map(|_| AtomicU64::new(0)).collect();
        let ran_on: Vec<AtomicU64> = (0..grid.len()).map(|_| AtomicU64::new(u64::MAX)).collect();
        let (mut lent_phases, mut taken_on) = (0, false);
        let start = Instant::now();
        for it in 1u64.. {
            let lent = exec.lender.now();
            exec.run_phase(&|k| {
                // The lower left quarter is heavy: the first measured iteration rebalances.
                if k % 16 < 8 && k / 16 < 8 {
                    crate::clock::busy_wait(Duration::from_micros(5));
                }
                hits[k].fetch_add(1, Ordering::Relaxed);
                ran_on[k].store(crate::executor::current_worker().unwrap() as u64, Ordering::Relaxed);
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == it), "iteration {it}: every box once");
            if let Some(l) = lent {
                assert_eq!(l, 2);
                assert!(ran_on.iter().all(|w| w.load(Ordering::Relaxed) != 2), "the lender ran a box");
                assert!(exec.background.on_lent_core(), "lent to a bound SCHED_IDLE thread only");
                lent_phases += 1;
            }
            if exec.end_iteration().rebalanced && lent_phases > 0 {
                taken_on = true;
                break;
            }
            // Light on the machine: other tests run beside this one.
            std::thread::sleep(Duration::from_millis(1));
            let patience = crate::test_wait::PATIENCE;
            assert!(start.elapsed() < patience, "the run came back within {patience:?}");
        }
        assert!(taken_on && lent_phases > 0);
        assert_eq!(exec.lender.now(), None, "the core comes back with the run");
    }

    /// What construction sets up: a balancer unit's first estimate (the start's cost over its
    /// units), a run's (its steps' worth), box timing without the tracker's affinity record
    /// (the executor keeps its own), whether the balancer thread's time is wall time (the
    /// workers hold every CPU), and the balancer thread started only where a run may go there.
    #[test]
    fn construction_estimates_a_unit_and_starts_the_thread_only_where_it_may_serve() {
        let grid = Grid::new(16, 8).unwrap();
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        for (threads, overlap, started) in [
            (1, Overlap::Thread, false),
            (2, Overlap::IdleTime, false),
            (2, Overlap::Stop, false),
            (2, Overlap::Thread, true),
            (2, Overlap::IdleTimeOrThread, true),
        ] {
            let case = format!("{threads} threads, {overlap:?}");
            let options = PbsOptions { overlap, steps_per_rebalance: 7, ..PbsOptions::default() };
            let exec = Pbs::new(grid, threads, options).unwrap();
            assert_eq!(exec.background.has_thread(), started, "{case}");
            assert_eq!(exec.rebalance.thread_time_is_wall_time, cpus <= threads, "{case}");
            let r = &exec.rebalance;
            let units = r.policy.last_cost() / r.unit_time;
            assert!(units >= 2.0 && (units - units.round()).abs() < 1e-6, "{case}: {units} units");
            assert!((r.run_time / r.unit_time - 9.0).abs() < 1e-9, "{case}: 7 steps, a start and an end");
            assert!(!exec.timing.tracker.records_affinity(), "{case}");
        }
    }

    /// The `Executor` face: its name and sizes, a closure on each thread, a phase of ranges
    /// covering every box once, the cells and their owners.
    #[test]
    fn the_executor_interface_answers_for_this_executor() {
        let grid = Grid::new(13, 9).unwrap();
        let mut exec = Pbs::new(grid, 2, PbsOptions::default()).unwrap();
        assert_eq!((exec.name(), Executor::threads(&exec), exec.boxes()), ("pbs", 2, grid.len()));
        let seen = std::sync::Mutex::new(Vec::new());
        exec.on_each_thread(&|t| seen.lock().unwrap().push(t));
        let mut seen = seen.into_inner().unwrap();
        seen.sort();
        assert_eq!(seen, [0, 1]);
        let hits: Vec<AtomicU64> = (0..grid.len()).map(|_| AtomicU64::new(0)).collect();
        for _ in 0..3 {
            exec.run_phase_ranges(&|r| {
                for k in r {
                    hits[k].fetch_add(1, Ordering::Relaxed);
                }
            });
            exec.end_iteration();
        }
        assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 3));
        let owners = Executor::vcores(&exec).expect("pbs has cells").owners().to_vec();
        assert_eq!(Some(owners), exec.planned_owners());
    }

    /// A task that panics in a phase that steals: the claims it left half taken are reset, so
    /// the next phase runs every box once.
    #[test]
    fn a_panic_in_a_stealing_phase_leaves_every_box_to_the_next() {
        let grid = Grid::new(16, 16).unwrap();
        let options = PbsOptions { steal: Stealing::Always, chunk: 4, ..PbsOptions::default() };
        let mut exec = Pbs::new(grid, 2, options).unwrap();
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            exec.run_phase(&|k| {
                if k == 0 {
                    panic!("box 0 failed");
                }
                std::thread::sleep(Duration::from_micros(20));
            })
        }));
        assert!(panicked.is_err());
        let hits: Vec<AtomicU64> = (0..grid.len()).map(|_| AtomicU64::new(0)).collect();
        exec.run_phase(&|k| {
            hits[k].fetch_add(1, Ordering::Relaxed);
        });
        assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
    }

    /// Two threads over `grid` whose criterion asks every iteration, with no stealing and
    /// every box timed every iteration.
    fn asking_every_iteration(grid: Grid, overlap: Overlap) -> Pbs {
        let options = PbsOptions {
            criterion: Some(Box::new(crate::criteria::Always)),
            steal: Stealing::Never,
            overlap,
            ..PbsOptions::default()
        };
        let mut exec = Pbs::new(grid, 2, options).unwrap();
        exec.timing.tracker.set_stride(1);
        exec
    }

    /// An iteration's bookkeeping: its phases counted, the idle time per phase measured
    /// against the least busy thread (little on an even load, most of the phase on an uneven
    /// one), a rebalancing in idle time reported under way, its balancing reported as such and
    /// not as the idle thread's task time, and the critical path never shorter than the time
    /// between iterations.
    #[test]
    #[cfg_attr(miri, ignore = "compares wall-clock times of sleeping tasks")]
    fn idle_time_is_measured_per_phase_and_balancing_in_it_is_reported_apart() {
        let grid = Grid::new(16, 8).unwrap();
        let mut exec = asking_every_iteration(grid, Overlap::IdleTime);
        let iteration = |exec: &mut Pbs, micros: &(dyn Fn(usize) -> u64 + Sync)| {
            let task = |k: usize| std::thread::sleep(Duration::from_micros(micros(k)));
            let busy: Vec<Vec<Duration>> = (0..2).map(|_| exec.run_phase(&task).busy).collect();
            assert_eq!(exec.timing.phases_in_iteration, 2);
            let end = exec.end_iteration();
            assert!(end.rebalance_critical >= end.rebalance_time, "{end:?}");
            let phase = exec.timing.last_iteration_wall.as_secs_f64() / 2.0;
            (end, busy, exec.rebalance.slack_per_phase / phase)
        };
        // Even: each thread sleeps 64 × 50 µs a phase; idle time is what is left of a phase
        // (once whatever the first measurement started has settled).
        let settled = (0..10).find_map(|_| {
            let (end, _, slack) = iteration(&mut exec, &|_| 50);
            (!end.rebalanced && !end.under_way).then_some(slack)
        });
        settled.expect("a uniform load settles");
        // The least of five: a thread woken late on a busy machine idles the other a while.
        let slack = (0..5).map(|_| iteration(&mut exec, &|_| 50).2).fold(f64::INFINITY, f64::min);
        assert!(slack < 0.5, "idle {slack} of a phase");
        // All the work on one thread's boxes: the other idles nearly all of each phase, and
        // once that has lasted a rebalancing starts in idle time (a unit measured fast so far
        // fits there). Its steps take 60 ms, three of them after a start over: a step outlasts
        // the loaded thread's 13 ms a phase (20 ms steps did not, once in fifteen runs beside
        // the other tests).
        assert!(exec.balancer.is_some(), "home: nothing under way");
        exec.balancer = Some(Box::new(SlowSteps::new(Duration::from_millis(60))));
        (exec.options.steps_per_rebalance, exec.options.restart_lands_at_once) = (3, false);
        let owners = exec.vcores.owners().to_vec();
        let heavy = move |k: usize| if owners[k] == 0 { 200 } else { 0 };
        let (mut started, mut balanced, mut overran) = (false, Duration::ZERO, false);
        for _ in 0..30 {
            let (end, busy, slack) = iteration(&mut exec, &heavy);
            if !started {
                assert!((0.5..=1.0).contains(&slack), "idle {slack} of a phase");
                assert!(!end.rebalanced, "{end:?}");
                started = end.under_way;
                assert_eq!(end.under_way, end.under_way_in_idle_time, "{end:?}");
                continue;
            }
            balanced += end.balancing_in_slack;
            // A unit past the last busy thread is on the critical path.
            overran |= end.rebalance_critical >= end.rebalance_time + Duration::from_millis(1);
            if end.rebalanced {
                assert!(!end.under_way && !end.under_way_in_idle_time, "{end:?}");
                assert!(balanced >= Duration::from_millis(20), "a step at least in idle time: {end:?}");
                assert!(overran, "no unit outlasted a phase");
                return;
            }
            assert!(end.under_way && end.under_way_in_idle_time, "{end:?}");
            // The idle thread's busy time is its empty boxes, not its 60 ms steps.
            for b in &busy {
                let (light, heavy) = (b.iter().min().unwrap(), b.iter().max().unwrap());
                assert!(light.as_secs_f64() < 0.75 * heavy.as_secs_f64(), "{b:?}");
            }
        }
        panic!("not started and taken on within 30 iterations (started: {started})");
    }

    #[test]
    fn the_stride_follows_the_measured_task_time() {
        let grid = Grid::new(8, 8).unwrap();
        let mut exec = Pbs::new(grid, 2, PbsOptions::default()).unwrap();
        // Empty tasks: a preempted thread can make one iteration look slow (the stride then
        // stays lower for it), so up to 30 iterations for one that measured them as they are.
        for _ in 0..30 {
            exec.run_phase(&|k| {
                std::hint::black_box(k);
            });
            exec.end_iteration();
            if exec.timing.tracker.stride() == 8 {
                break;
            }
        }
        assert_eq!(exec.timing.tracker.stride(), 8, "empty tasks");
        for _ in 0..3 {
            exec.run_phase(&|_| std::thread::sleep(Duration::from_micros(20)));
            exec.end_iteration();
        }
        assert_eq!(exec.timing.tracker.stride(), 1, "20 µs tasks");
    }

    #[test]
    fn every_box_runs_once_through_the_runs_after_rebalancing() {
        let grid = Grid::new(13, 9).unwrap();
        // Rebalancings between iterations: one sent to the balancer thread could still be out
        // after the 20 iterations of a busy machine (a clean-clone CI run saw no migration).
        let options = PbsOptions { chunk: 5, overlap: Overlap::Stop, ..PbsOptions::default() };
        let mut exec = Pbs::new(grid, 3, options).unwrap();
        let hits: Vec<AtomicU64> = (0..grid.len()).map(|_| AtomicU64::new(0)).collect();
        let mut migrations = 0;
        for it in 0..20u64 {
            // A heavy corner moves ownership around between iterations.
            exec.run_phase(&|k| {
                if k < 20 {
                    crate::clock::busy_wait(Duration::from_micros(3));
                }
                hits[k].fetch_add(1, Ordering::Relaxed);
            });
            migrations += exec.end_iteration().migrations;
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == it + 1));
        }
        assert!(migrations > 0, "the heavy corner should have moved some boxes");
    }

    /// Idle time measured in an iteration that did not steal is not counted for one that
    /// will: `Auto` turns stealing on after a first iteration of 80 µs per thread, and the
    /// first rebalancing of that imbalanced start goes to the balancer thread instead of into
    /// idle time that stealing then takes.
    #[test]
    fn idle_time_measured_without_stealing_is_not_counted_once_stealing_starts() {
        let grid = Grid::new(8, 8).unwrap();
        let mut exec = Pbs::new(grid, 2, PbsOptions::default()).unwrap();
        assert!(!exec.steal.active, "Auto waits for a measurement");
        let owners = exec.vcores().owners().to_vec();
        // Thread 0's boxes take 5 µs each (160 µs), thread 1's nothing: 80 µs per thread on
        // average, and thread 1 idle for most of the phase.
        exec.run_phase(&|k| {
            if owners[k] == 0 {
                clock::busy_wait(Duration::from_micros(5));
            }
        });
        exec.end_iteration();
        assert!(exec.steal.active, "80 µs per thread: stealing from now on");
        assert_eq!(exec.rebalance.slack_per_phase, 0.0);
        assert!(exec.slack.pending.get_mut().unwrap().is_none(), "no rebalancing in idle time");
        assert!(exec.away.is_some(), "the first rebalancing runs on the balancer thread");
    }

    /// One phase in which thread 0's boxes spin 200 µs each and thread 1's `own` each, the
    /// first of thread 0's boxes to run waiting (yielding its core) up to 20 ms for another
    /// thread to run one of them: the busy times, and whether another thread ran one of
    /// thread 0's boxes. On a loaded machine thread 1 can miss many phases in a row (a CI run
    /// with two builds beside it saw it steal in none of twelve; so did a mutation sweep's
    /// builds), hence the wait.
    fn phase_where_thread_1_may_steal(exec: &mut Pbs, own: Duration) -> (Vec<f64>, bool) {
        let owners = exec.vcores().owners().to_vec();
        let first = std::sync::OnceLock::new();
        let stolen = std::sync::atomic::AtomicBool::new(false);
        let waited = std::sync::atomic::AtomicBool::new(false);
        let stats = exec.run_phase(&|k| {
            if owners[k] != 0 {
                return clock::busy_wait(own);
            }
            let me = std::thread::current().id();
            if *first.get_or_init(|| me) != me {
                stolen.store(true, Ordering::Relaxed);
            } else if !waited.swap(true, Ordering::Relaxed) {
                let t = Instant::now();
                while !stolen.load(Ordering::Relaxed) && t.elapsed() < Duration::from_millis(20) {
                    std::thread::yield_now();
                }
            }
            clock::busy_wait(Duration::from_micros(200));
        });
        (stats.busy.iter().map(Duration::as_secs_f64).collect(), stolen.into_inner())
    }

    /// A stealing executor on 8×8 boxes, claims of 4 (with the default 128 the owner would
    /// claim its 32 boxes at once), rebalancing between iterations (in idle time, thread 1
    /// would balance instead of stealing while a rebalancing is under way).
    fn stealing_executor() -> Pbs {
        let options = PbsOptions { steal: Stealing::Always, chunk: 4, overlap: Overlap::Stop, ..PbsOptions::default() };
        Pbs::new(Grid::new(8, 8).unwrap(), 2, options).unwrap()
    }

    /// Thread 1 owns only empty boxes and steals thread 0's: the threads' busy times come out
    /// even, but the iteration's owner loads, which the criterion sees, still put all the work
    /// on thread 0.
    #[test]
    fn stolen_time_counts_for_the_owner() {
        let mut exec = stealing_executor();
        // A worker kept off its core by the machine steals nothing, and one preempted while it
        // searches for victims counts that wall time as its own (1 in 30 single phases here
        // measured 1.36): judge the clearest of up to twelve phases in which thread 1 stole,
        // of up to a hundred; more judged phases would give a broken count more chances to
        // look clear.
        let (mut clearest, mut judged): (Option<f64>, usize) = (None, 0);
        for _ in 0..100 {
            if judged == 12 {
                break;
            }
            // Thread 1 stole a good share: its busy time over a quarter of thread 0's.
            let (busy, _) = phase_where_thread_1_may_steal(&mut exec, Duration::ZERO);
            let end = exec.end_iteration();
            if busy[1] > 0.25 * busy[0] {
                judged += 1;
                clearest = Some(clearest.map_or(end.max_avg, |m: f64| m.max(end.max_avg)));
                if end.max_avg > 1.6 {
                    break;
                }
            }
        }
        // All the work is thread 0's: 2.0, less the thief's own search and wait for victims,
        // which count as its busy time (measured 1.76-1.99); busy times would give about 1.2.
        let clearest = clearest.expect("thread 1 never stole in a hundred phases");
        assert!(clearest > 1.6, "owner loads: all the work is thread 0's, max_avg at most {clearest}");
    }

    /// Moving stolen time from the thief to the owner keeps the total: the owner loads of a
    /// phase in which thread 1 stole add up to the threads' busy times (the thief's time on
    /// others' boxes and the owners' time lost to thieves are the same clock ticks). Thread 1's
    /// own boxes take 50 µs each, so that its own load stands well above zero.
    #[test]
    fn moving_stolen_time_to_its_owner_keeps_the_total() {
        let mut exec = stealing_executor();
        let busy = (0..100)
            .find_map(|_| {
                let (busy, stolen) = phase_where_thread_1_may_steal(&mut exec, Duration::from_micros(50));
                let owner_loads: Vec<f64> = exec.timing.iteration_busy.iter().map(Duration::as_secs_f64).collect();
                exec.end_iteration();
                stolen.then_some((busy, owner_loads))
            })
            .expect("thread 1 never stole in a hundred phases");
        let (busy, owner) = busy;
        let (total, owned) = (busy.iter().sum::<f64>(), owner.iter().sum::<f64>());
        assert!((owned - total).abs() <= 1e-6 + 1e-3 * total, "owner loads {owner:?}, busy {busy:?}");
        assert!(owner[0] > busy[0] && owner[1] < busy[1], "moved to the owner: {owner:?} from {busy:?}");
    }

    /// A task panicking while a rebalancing runs in idle time: the panic reaches the caller,
    /// the balancing thread does not wait for the thread that unwound, and the executor goes
    /// on running every box once and takes the rebalancing on.
    #[test]
    fn a_panic_during_a_rebalancing_in_idle_time_leaves_the_executor_usable() {
        let grid = Grid::new(16, 16).unwrap();
        let options = PbsOptions { steal: Stealing::Never, ..PbsOptions::default() };
        let mut exec = Pbs::new(grid, 2, options).unwrap();
        let heavy = |k: usize| {
            if k < 64 {
                clock::busy_wait(Duration::from_micros(20));
            }
        };
        exec.run_phase(&heavy);
        exec.end_iteration();
        assert!(exec.slack.pending.get_mut().unwrap().is_some(), "a rebalancing started in idle time");
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            exec.run_phase(&|k| {
                heavy(k);
                assert!(k != 200, "task 200 fails");
            })
        }));
        assert!(caught.is_err(), "the panic reaches the caller");
        let hits: Vec<AtomicU64> = (0..grid.len()).map(|_| AtomicU64::new(0)).collect();
        let mut rebalanced = false;
        for it in 0..40u64 {
            exec.run_phase(&|k| {
                heavy(k);
                hits[k].fetch_add(1, Ordering::Relaxed);
            });
            rebalanced |= exec.end_iteration().rebalanced;
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == it + 1));
        }
        assert!(rebalanced, "the rebalancing was taken on");
    }

    #[test]
    fn every_setting_reads_from_the_environment_and_bad_values_are_named() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|p| p.0 == name).map(|p| p.1.to_string())
        };
        let o = PbsOptions::default()
            .with_settings(env(&[
                ("PBS_METHOD", "paper-eq7"),
                ("PBS_TOL", "0.01"),
                ("PBS_TRIGGER", " 0.1 "),
                ("PBS_STEPS", "7"),
                ("PBS_STEAL", "always"),
                ("PBS_OVERLAP", "off"),
                ("PBS_LEND", "never"),
                ("PBS_CRITERION", " periodic:3 "),
            ]))
            .unwrap();
        assert_eq!((o.method.as_str(), o.tol, o.trigger, o.steps_per_rebalance), ("paper-eq7", 0.01, 0.1, 7));
        assert_eq!((o.steal, o.overlap, o.lend), (Stealing::Always, Overlap::Stop, Lending::Never));
        assert_eq!(o.criterion_name.as_deref(), Some("periodic:3"));
        // The executor runs by the criterion named.
        let exec = Pbs::new(Grid::new(6, 6).unwrap(), 2, o).unwrap();
        assert_eq!(exec.criterion_name(), "periodic(3)");
        assert_eq!(
            Pbs::new(Grid::new(6, 6).unwrap(), 2, PbsOptions::default()).unwrap().criterion_name(),
            "boulmier-eq24+once"
        );
        // `SETTINGS` names exactly what `with_settings` reads (the C interface checks names by it).
        let asked = std::cell::RefCell::new(Vec::new());
        PbsOptions::default().with_settings(|n| (asked.borrow_mut().push(n.to_string()), None).1).unwrap();
        assert_eq!(asked.into_inner(), PbsOptions::SETTINGS);
        let named = |name: &str| PbsOptions { criterion_name: Some(name.into()), ..PbsOptions::default() };
        let e = Pbs::new(Grid::new(6, 6).unwrap(), 2, named("periodic:0")).err().unwrap().to_string();
        assert!(e.contains("periodic:0") && e.contains("criterion"), "{e}");
        for (value, overlap) in [
            ("on", Overlap::IdleTimeOrThread),
            ("idle", Overlap::IdleTime),
            ("thread", Overlap::Thread),
            ("0", Overlap::Stop),
        ] {
            let o = PbsOptions::default().with_settings(|n| (n == "PBS_OVERLAP").then(|| value.into())).unwrap();
            assert_eq!(o.overlap, overlap, "{value}");
        }
        for (name, value) in [
            ("PBS_METHOD", "metis"),
            ("PBS_TOL", "2"),
            ("PBS_TOL", "0"),
            ("PBS_TRIGGER", "1"),
            ("PBS_TRIGGER", "nan"),
            ("PBS_STEPS", "0"),
            ("PBS_STEAL", "sometimes"),
            ("PBS_OVERLAP", "yes"),
            ("PBS_LEND", "sometimes"),
            ("PBS_CRITERION", "metis"),
            ("PBS_CRITERION", "periodic:0"),
        ] {
            let e = PbsOptions::default().with_settings(|n| (n == name).then(|| value.to_string())).err().unwrap();
            let text = e.to_string();
            assert!(text.contains(value) && (text.contains(name) || name == "PBS_METHOD"), "{name}: {text}");
        }
    }

    /// Told how many iterations the run has left, pbs starts no rebalancing at the last one's
    /// end, where the same first measurement rebalances an executor not told, and reports the
    /// iteration's imbalance as ever; nor one that its gain over the iterations left cannot
    /// repay (a second's cost, one iteration left), which a run not told starts all the same.
    /// A run that goes on past the hint rebalances again; with the default criterion, which
    /// asks about an imbalance present from the start only at the first measurement, at once:
    /// that question, put off at the hinted last iteration, is asked by the next.
    #[test]
    fn no_rebalancing_starts_at_the_last_iteration_of_a_hinted_run() {
        let grid = Grid::new(16, 16).unwrap();
        let heavy = |k: usize| {
            if k % 16 < 8 && k / 16 < 8 {
                crate::clock::busy_wait(Duration::from_micros(5));
            }
        };
        // (iterations left, the last rebalancing's cost) → rebalanced or moved a box.
        let cases = [(None, None), (Some(1), None), (None, Some(1.0)), (Some(2), Some(1.0))];
        let mut ends = Vec::new();
        for (hint, cost) in cases {
            let mut exec = asking_every_iteration(grid, Overlap::Stop);
            if let Some(left) = hint {
                exec.hint_iterations_left(left);
            }
            if let Some(cost) = cost {
                exec.rebalance.policy.set_last_cost(cost);
            }
            let before = exec.vcores().owners().to_vec();
            exec.run_phase(&heavy);
            let end = exec.end_iteration();
            let moved = exec.vcores().owners() != &before[..];
            assert!(end.max_avg > 1.2, "{hint:?} {cost:?}: the imbalance is reported: {end:?}");
            ends.push(end.rebalanced || end.under_way || moved);
            if hint == Some(1) {
                let again = (0..20).any(|_| {
                    exec.run_phase(&heavy);
                    exec.end_iteration().rebalanced
                });
                assert!(again, "a run that goes on past the hint rebalances");
            }
        }
        assert_eq!(ends, [true, false, true, false], "{cases:?}");
        let options = PbsOptions { steal: Stealing::Never, overlap: Overlap::Stop, ..PbsOptions::default() };
        let mut exec = Pbs::new(grid, 2, options).unwrap();
        exec.timing.tracker.set_stride(1);
        exec.hint_iterations_left(1);
        exec.run_phase(&heavy);
        assert!(!exec.end_iteration().rebalanced, "the hinted last iteration");
        exec.run_phase(&heavy);
        let end = exec.end_iteration();
        assert!(end.rebalanced && end.migrations > 0, "the next one answers the first measurement: {end:?}");
    }

    /// Hints map the boxes for loads known in advance; a wrong length or a bad load is an
    /// error; executors that do not balance ignore them.
    #[test]
    fn cost_hints_map_the_boxes_before_the_first_iteration() {
        let grid = Grid::new(16, 16).unwrap();
        let mut exec = Pbs::new(grid, 3, PbsOptions::default()).unwrap();
        let hints: Vec<f64> = (0..grid.len()).map(|k| if grid.coords(k)[0] < 4 { 9.0 } else { 1.0 }).collect();
        let before = exec.vcores().owners().to_vec();
        assert!(exec.hint_loads(&hints).unwrap());
        assert_ne!(exec.vcores().owners(), &before[..], "the hints moved boxes");
        let charges = pbs::metrics::charges(exec.vcores().owners(), &hints, 3);
        assert!(pbs::metrics::max_avg(&charges) <= 1.0 + exec.options.tol + 1e-9, "{charges:?}");
        assert_eq!(exec.planned_owners().unwrap(), exec.vcores().owners(), "the lists follow");
        assert!(exec.hint_loads(&hints[1..]).is_err(), "one load short");
        let mut nan = hints.clone();
        nan[5] = f64::NAN;
        assert!(exec.hint_loads(&nan).unwrap_err().to_string().contains("NaN"));
        let mut st = crate::executors::StaticBlocks::new(grid.len(), 2).unwrap();
        assert!(!st.hint_loads(&hints).unwrap(), "static blocks do not balance");
    }

    /// Hints given while a rebalancing is under way, in idle time or on the balancer thread,
    /// give that run up and take its balancer back (without it the hints had no balancer to
    /// run): the call balances the hinted loads and leaves nothing under way.
    #[test]
    #[cfg_attr(miri, ignore = "sleeping tasks and balancer steps")]
    fn hints_while_a_rebalancing_is_under_way_take_its_balancer_back() {
        let grid = Grid::new(16, 8).unwrap();
        for overlap in [Overlap::IdleTime, Overlap::Thread] {
            let mut exec = asking_every_iteration(grid, overlap);
            let even = |_: usize| std::thread::sleep(Duration::from_micros(50));
            // Until the first measurement's rebalancing is over, so that the slow balancer
            // below is the one the next run takes.
            let settled = (0..20).any(|_| {
                exec.run_phase(&even);
                !exec.end_iteration().under_way
            });
            assert!(settled && exec.balancer.is_some(), "{overlap:?}: home, nothing under way");
            let micros = Arc::new(AtomicU64::new(60_000));
            exec.balancer = Some(Box::new(SlowSteps::gated(micros.clone())));
            (exec.options.steps_per_rebalance, exec.options.restart_lands_at_once) = (3, false);
            let owners = exec.vcores.owners().to_vec();
            let heavy = move |k: usize| std::thread::sleep(Duration::from_micros(if owners[k] == 0 { 200 } else { 0 }));
            let under_way = (0..30).any(|_| {
                exec.run_phase(&heavy);
                let end = exec.end_iteration();
                assert!(!end.rebalanced, "{overlap:?}: 60 ms steps end no run so soon: {end:?}");
                end.under_way
            });
            assert!(under_way, "{overlap:?}: no rebalancing started in 30 iterations");
            micros.store(0, Ordering::Relaxed);
            let hints: Vec<f64> = (0..grid.len()).map(|k| if grid.coords(k)[1] < 2 { 6.0 } else { 1.0 }).collect();
            assert!(exec.hint_loads(&hints).unwrap(), "{overlap:?}");
            assert!(exec.balancer.is_some() && exec.away.is_none(), "{overlap:?}: the balancer is home");
            assert!(exec.slack.pending.get_mut().unwrap().is_none(), "{overlap:?}: nothing left in idle time");
            let charges = pbs::metrics::charges(exec.vcores().owners(), &hints, 2);
            assert!(pbs::metrics::max_avg(&charges) <= 1.0 + exec.options.tol + 1e-9, "{overlap:?}: {charges:?}");
            exec.run_phase(&even);
            exec.end_iteration();
        }
    }
}
