//! The [`Balancer`] trait, in the spirit of coupe's `Partition`: every method moves the same
//! [`VCores`] state, so any method can warm-start from any other's result, and one driver,
//! [`balance`], runs them all to convergence with the same criterion and the same records.

use std::time::{Duration, Instant};

use crate::metrics;
use crate::problem::Problem;
use crate::vcores::VCores;

/// A load-balancing method over vCores and their cells.
pub trait Balancer {
    /// The method's name, as accepted by [`crate::methods::by_name`].
    fn name(&self) -> &str;

    /// Moves the vCores one step. On entry `vcores` holds the assignment and charges of the
    /// current state for `problem`'s loads; on exit, those of the new state.
    fn step(&mut self, problem: &Problem, vcores: &mut VCores);

    /// Forgets adaptive state carried between steps, so that a run depends only on its input.
    fn reset(&mut self) {}

    /// True when the last step found no move that improves the mapping: further steps would
    /// change nothing, so [`balance`] stops (not converged) instead of spinning.
    fn is_stuck(&self) -> bool {
        false
    }

    /// Called by [`balance`] when a run ends, converged or not, to leave `vcores` in the
    /// method's best state rather than its last (a method that may worsen the balance on its
    /// way keeps its best) and to tidy it. Does nothing by default: the paper's methods end
    /// where they stop.
    fn finish(&mut self, _problem: &Problem, _vcores: &mut VCores) {}
}

/// When to stop.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StopRule {
    /// Give up after this many steps.
    pub max_steps: usize,
    /// Converged when `max_avg ≤ (1 + tol) × lower_bound` (no mapping beats the bound, so a
    /// negative or NaN tolerance never converges: the run ends stuck or at `max_steps`).
    pub tol: f64,
}

impl Default for StopRule {
    fn default() -> Self {
        StopRule { max_steps: 5000, tol: 0.05 }
    }
}

/// Boxes per vCore from which [`StopRule::for_problem`] asks for 1 % instead of 5 %, and
/// [`StopRule::before_refinement`] counts only the boxes that carry load; below it,
/// [`crate::refine::first_partition`] tries a refined bisection before the cells.
pub const TIGHT_FROM_BOXES_PER_VCORE: f64 = 250.0;

impl StopRule {
    /// The rule for a first balancing (a cold start): the default with the tolerance tightened
    /// to 0.01 where that is cheap, from [`TIGHT_FROM_BOXES_PER_VCORE`] boxes per vCore, where
    /// single boxes are small against a cell. From an RCB start on Perlin maps at 250 boxes per
    /// vCore, 0.01 took 1.4 × the time of 0.05 and every run reached it; at 100–160 it took
    /// 3–9 ×. Rebalancings from a warm start are better left at the default: on drifting maps
    /// 0.01 made each one 1.5–11 × longer (docs/peers.md).
    ///
    /// ```
    /// use pbs::{Grid, Problem, StopRule};
    /// let grid = Grid::new(100, 100)?;
    /// let loads = vec![1.0; grid.len()];
    /// assert_eq!(StopRule::for_problem(&Problem::new(grid, &loads, 16)?).tol, 0.01); // 625 per vCore
    /// assert_eq!(StopRule::for_problem(&Problem::new(grid, &loads, 72)?).tol, 0.05); // 139 per vCore
    /// # Ok::<(), pbs::Error>(())
    /// ```
    pub fn for_problem(problem: &Problem) -> StopRule {
        let per_vcore = problem.grid().len() as f64 / problem.vcores() as f64;
        let tol = if per_vcore >= TIGHT_FROM_BOXES_PER_VCORE { 0.01 } else { StopRule::default().tol };
        StopRule { tol, ..StopRule::default() }
    }

    /// The rule for a first balancing whose owners [`crate::refine::refine`] then finishes:
    /// [`StopRule::for_problem`] from [`TIGHT_FROM_BOXES_PER_VCORE`] boxes that carry load per
    /// vCore, below that a tolerance of 0.1. Where a cell holds few boxes, each box is a coarse
    /// step of its charge and the power cells' last steps towards 5 % are the slow ones, while
    /// the refinement moves single boxes: on dense 80×40 maps at 72 parts this took the cells from
    /// a median of 33 steps to 21 and the time from 48 to 30–32 × a k-way RCB's, as many maps
    /// ending balanced once refined (docs/peers.md, "Cells stopped early where parts are small").
    /// Only boxes with a load above zero count here: a box with no load is no step of a charge
    /// at all. On a map where 2 % of the boxes carry load, 1,000 boxes per vCore are 20 steps,
    /// and the cells crawled towards 0.01, which they could not reach, before the refinement
    /// balanced them anyway (`pbs-bench maps --large`'s 1000² map at 256 parts: 171 steps where
    /// 4 now do; docs/peers.md, "Boxes that carry load, and flows by phases"). Without the refinement after it ([`StopRule::for_problem`]) every box
    /// counts: there a tolerance the cells reach in a few steps is what the caller gets.
    ///
    /// ```
    /// use pbs::{Grid, Problem, StopRule};
    /// let grid = Grid::new(100, 100)?;
    /// let loads = vec![1.0; grid.len()];
    /// assert_eq!(StopRule::before_refinement(&Problem::new(grid, &loads, 16)?).tol, 0.01); // 625 per vCore
    /// assert_eq!(StopRule::before_refinement(&Problem::new(grid, &loads, 72)?).tol, 0.1); // 139 per vCore
    /// // One box in ten carries load: 62.5 such boxes per vCore.
    /// let sparse: Vec<f64> = (0..grid.len()).map(|k| if k % 10 == 0 { 1.0 } else { 0.0 }).collect();
    /// assert_eq!(StopRule::before_refinement(&Problem::new(grid, &sparse, 16)?).tol, 0.1);
    /// assert_eq!(StopRule::for_problem(&Problem::new(grid, &sparse, 16)?).tol, 0.01);
    /// # Ok::<(), pbs::Error>(())
    /// ```
    pub fn before_refinement(problem: &Problem) -> StopRule {
        let rule = StopRule::for_problem(problem);
        if !few_loaded_boxes_per_vcore(problem) {
            rule
        } else {
            StopRule { tol: 0.1, ..rule }
        }
    }

    /// Whether power cells can resolve this tolerance on `problem`: whether its boxes that
    /// carry load number at least `1 / tol` per vCore, so that such a box, on average, weighs
    /// at most `tol` of a vCore's mean charge. Below that, one box more or less moves a cell's
    /// charge by more than the tolerance, and the cells crawl to their stall limit: `pbs-bench
    /// maps --large`'s 500² map at 1,000 parts (7.5 loaded boxes per vCore) took 156 steps and
    /// 3.3–3.8 s towards 0.1, where a refinement of a k-way RCB's parts took 0.66 s and
    /// balanced better (docs/peers.md, "Cells skipped where a box outweighs the tolerance").
    ///
    /// ```
    /// use pbs::{Grid, Problem, StopRule};
    /// let grid = Grid::new(100, 100)?;
    /// // One box in a hundred carries load: 100 such boxes, 6.25 per vCore at 16 vCores.
    /// let sparse: Vec<f64> = (0..grid.len()).map(|k| if k % 100 == 0 { 1.0 } else { 0.0 }).collect();
    /// let problem = Problem::new(grid, &sparse, 16)?;
    /// assert!(!StopRule { tol: 0.1, ..StopRule::default() }.resolvable_by_cells(&problem));
    /// assert!(StopRule { tol: 0.2, ..StopRule::default() }.resolvable_by_cells(&problem));
    /// # Ok::<(), pbs::Error>(())
    /// ```
    pub fn resolvable_by_cells(&self, problem: &Problem) -> bool {
        loaded_boxes_per_vcore(problem) * self.tol >= 1.0
    }

    /// This rule with its tolerance widened, where [`StopRule::resolvable_by_cells`] says no,
    /// to the share of a vCore's mean charge that two boxes carrying load weigh on average
    /// (`2 × vCores / loaded boxes`): a tolerance the cells reach in a few steps, for a
    /// refinement to finish ([`crate::refine::refine`]). At one box's share they still crawl
    /// (warm rebalancings of `pbs-bench maps --large`'s 500² map at 1,000 parts, rolled a column
    /// a step: 2.9 s each at 0.05 and at one box's share, 0.37 s at two; docs/peers.md, "Warm
    /// cells stopped where they can resolve the load").
    ///
    /// ```
    /// use pbs::{Grid, Problem, StopRule};
    /// let grid = Grid::new(100, 100)?;
    /// // 100 boxes carry load, 6.25 per vCore at 16 vCores: two weigh 0.32 of a vCore's share.
    /// let sparse: Vec<f64> = (0..grid.len()).map(|k| if k % 100 == 0 { 1.0 } else { 0.0 }).collect();
    /// let problem = Problem::new(grid, &sparse, 16)?;
    /// assert_eq!(StopRule::default().coarsened_for_cells(&problem).tol, 0.32);
    /// let dense = vec![1.0; grid.len()];
    /// assert_eq!(StopRule::default().coarsened_for_cells(&Problem::new(grid, &dense, 16)?).tol, 0.05);
    /// # Ok::<(), pbs::Error>(())
    /// ```
    pub fn coarsened_for_cells(&self, problem: &Problem) -> StopRule {
        // A tolerance that is not a number never converges (see `tol`), widened or not.
        if self.resolvable_by_cells(problem) || self.tol.is_nan() {
            return *self;
        }
        StopRule { tol: 2.0 / loaded_boxes_per_vcore(problem), ..*self }
    }
}

/// Whether a vCore's share is under [`TIGHT_FROM_BOXES_PER_VCORE`] boxes that carry load: where
/// [`StopRule::before_refinement`] stops the cells at 0.1 and the refinement does the rest.
pub(crate) fn few_loaded_boxes_per_vcore(problem: &Problem) -> bool {
    loaded_boxes_per_vcore(problem) < TIGHT_FROM_BOXES_PER_VCORE
}

/// Boxes with a load above zero per vCore: a box with no load is no step of a charge.
fn loaded_boxes_per_vcore(problem: &Problem) -> f64 {
    problem.loads().iter().filter(|&&q| q > 0.0).count() as f64 / problem.vcores() as f64
}

/// The state after a step (step 0 is the starting state).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct StepRecord {
    /// Steps taken so far.
    pub step: usize,
    /// `max_i Q_i / m`.
    pub max_avg: f64,
    /// Largest `(Q_i − m)/m`.
    pub dol_max: f64,
    /// Smallest `(Q_i − m)/m`.
    pub dol_min: f64,
    /// Boxes whose owner changed in this step.
    pub migrations: usize,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Outcome {
    /// Steps taken.
    pub steps: usize,
    /// Whether the criterion was met.
    pub converged: bool,
    /// Final `max_avg`.
    pub max_avg: f64,
    /// `max(1, max_k q_k / m)`.
    pub lower_bound: f64,
    /// Final largest DOL.
    pub dol_max: f64,
    /// Final smallest DOL.
    pub dol_min: f64,
    /// Boxes whose owner differs between the start and the end of the run.
    pub migrations: usize,
    /// Whether the run started over from a bisection (see [`rebalance`]).
    pub restarted: bool,
    /// Time the run took, inside its own calls (not what `on_step` spends).
    #[serde(serialize_with = "as_ms")]
    pub elapsed: Duration,
}

#[cfg(test)]
impl Outcome {
    /// A run that found its start balanced and took no step, for tests.
    pub(crate) fn balanced_at_start(elapsed: Duration) -> Outcome {
        Outcome {
            steps: 0,
            converged: true,
            max_avg: 1.0,
            lower_bound: 1.0,
            dol_max: 0.0,
            dol_min: 0.0,
            migrations: 0,
            restarted: false,
            elapsed,
        }
    }
}

fn as_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

/// Whether `vcores` meets the convergence criterion for `problem`.
pub fn is_converged(problem: &Problem, vcores: &VCores, tol: f64) -> bool {
    vcores.max_avg() <= (1.0 + tol) * problem.lower_bound()
}

/// Steps `balancer` from the state in `vcores` until converged, stuck or `max_steps`, calling
/// `on_step` with the starting state and after every step (pass `|_| {}` to ignore).
///
/// `vcores` must come from the same grid and vCore count; if the loads changed since it was
/// last assigned, it is recharged first (a warm start: owners depend only on the vCores).
///
/// ```
/// use pbs::{balance, methods, Grid, Problem, StopRule, VCores};
/// let grid = Grid::new(50, 50).unwrap();
/// let loads = pbs::loadmap::static_case(pbs::loadmap::Case::Disc, &grid, 0);
/// let problem = Problem::new(grid, &loads, 10).unwrap();
/// let mut vcores = VCores::random(&problem, 1);
/// let mut method = methods::by_name("power-cells").unwrap();
/// let out = balance(method.as_mut(), &problem, &mut vcores, StopRule::default(), |_| {});
/// assert!(out.converged && out.max_avg <= 1.05 * out.lower_bound);
/// assert_eq!(vcores.owners().len(), 2500); // the owner of every box
/// ```
///
/// # Panics
/// If `vcores` have another grid or vCore count than `problem` ([`VCores::reassign`]); so do
/// [`rebalance`] and [`Run`]'s calls.
pub fn balance(
    balancer: &mut dyn Balancer,
    problem: &Problem,
    vcores: &mut VCores,
    stop: StopRule,
    mut on_step: impl FnMut(&StepRecord),
) -> Outcome {
    let (mut run, first) = Run::start(balancer, problem, vcores, stop);
    on_step(&first);
    while let Some(record) = run.step(balancer, problem, vcores) {
        on_step(&record);
    }
    run.finish(balancer, problem, vcores)
}

/// Imbalance, over the lower bound, from which [`rebalance`] starts over from a bisection
/// instead of moving the cells back (`1 +` the power-cell method's own line between a
/// rebalancing and a first balancing). On md's first rebalancings at 16–256 vCores a start
/// from there reached balance in fewer steps and moved fewer boxes; nearer to balance,
/// moving the cells was as good or better (docs/design-notes.md, "Starting over").
pub const RESTART_FROM: f64 = 1.5;

/// [`balance`] for a rebalancing: when `vcores` are more than [`RESTART_FROM`] × the lower
/// bound out of balance on `problem`'s loads (a jump in the loads, the first measured loads
/// after a start on uniform ones), the run starts over from the centroids of a k-way
/// recursive coordinate bisection of the loads ([`VCores::restarted_from_bisection`]), each
/// cell keeping the id of the old cell it overlaps most, if that start is better balanced;
/// otherwise it moves the cells from where they are. The outcome says which (`restarted`),
/// and counts migrations from the owners before the restart.
///
/// ```
/// use pbs::{rebalance, methods, Grid, Problem, StopRule, VCores};
/// let grid = Grid::new(64, 64)?;
/// let ones = vec![1.0; grid.len()];
/// let uniform = Problem::new(grid, &ones, 16)?;
/// let mut vcores = VCores::from_bisection(&uniform);
/// // All the load gathers in the lower left quarter: far from balance.
/// let loads: Vec<f64> = (0..grid.len()).map(|k| if k % 64 < 32 && k / 64 < 32 { 10.0 } else { 0.1 }).collect();
/// let problem = Problem::new(grid, &loads, 16)?;
/// let mut method = methods::by_name("power-cells")?;
/// let out = rebalance(method.as_mut(), &problem, &mut vcores, StopRule { max_steps: 50, tol: 0.05 });
/// assert!(out.restarted && out.converged);
/// # Ok::<(), pbs::Error>(())
/// ```
pub fn rebalance(balancer: &mut dyn Balancer, problem: &Problem, vcores: &mut VCores, stop: StopRule) -> Outcome {
    let (mut run, _) = Run::start_rebalancing(balancer, problem, vcores, stop);
    while run.step(balancer, problem, vcores).is_some() {}
    run.finish(balancer, problem, vcores)
}

/// One balancing run taken a step at a time, for a caller that interleaves it with other work
/// (the executor runs it in its threads' idle time): [`balance`] is `start`, `step` until it
/// returns `None`, then `finish`. Every call of one run must get the same balancer, problem
/// and vCores.
#[derive(Debug, Clone)]
pub struct Run {
    stop: StopRule,
    initial: Vec<u32>,
    previous: Vec<u32>,
    steps: usize,
    converged: bool,
    stuck: bool,
    restarted: bool,
    /// Time spent inside this run's calls.
    elapsed: Duration,
}

impl Run {
    /// Starts a run: resets the balancer, recharges `vcores` with `problem`'s loads, and
    /// returns the run with the record of its starting state (step 0).
    pub fn start(
        balancer: &mut dyn Balancer,
        problem: &Problem,
        vcores: &mut VCores,
        stop: StopRule,
    ) -> (Run, StepRecord) {
        Self::begin(balancer, problem, vcores, stop, false)
    }

    /// [`Run::start`] for a rebalancing: starts over from a bisection when `vcores` are far
    /// from balance on `problem`'s loads (see [`rebalance`]).
    pub fn start_rebalancing(
        balancer: &mut dyn Balancer,
        problem: &Problem,
        vcores: &mut VCores,
        stop: StopRule,
    ) -> (Run, StepRecord) {
        Self::begin(balancer, problem, vcores, stop, true)
    }

    fn begin(
        balancer: &mut dyn Balancer,
        problem: &Problem,
        vcores: &mut VCores,
        stop: StopRule,
        may_restart: bool,
    ) -> (Run, StepRecord) {
        let start = Instant::now();
        balancer.reset();
        vcores.recharge(problem);
        let initial = vcores.owners().to_vec();
        let mut restarted = false;
        if may_restart && vcores.max_avg() > RESTART_FROM * problem.lower_bound() {
            // Taken only when better balanced than where the cells are: a run never starts
            // worse than it was asked to.
            let fresh = vcores.restarted_from_bisection(problem);
            if fresh.max_avg() < vcores.max_avg() {
                *vcores = fresh;
                restarted = true;
            }
        }
        let mut run = Run {
            stop,
            previous: vcores.owners().to_vec(),
            initial,
            steps: 0,
            converged: is_converged(problem, vcores, stop.tol),
            stuck: false,
            restarted,
            elapsed: Duration::ZERO,
        };
        let record = Self::record(0, vcores, 0);
        run.elapsed = start.elapsed();
        (run, record)
    }

    /// Whether the run has ended: converged, stuck, or out of steps.
    pub fn is_done(&self) -> bool {
        self.converged || self.stuck || self.steps >= self.stop.max_steps
    }

    /// Steps taken so far.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// Whether the run started over from a bisection ([`Run::start_rebalancing`]): its state
    /// after the start is then a new mapping already, which a caller may take on before any
    /// step (the executor does, when the run would otherwise land late).
    pub fn restarted(&self) -> bool {
        self.restarted
    }

    /// Time spent inside the run's calls so far.
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// One step, and its record; `None` (nothing done) once the run has ended.
    pub fn step(&mut self, balancer: &mut dyn Balancer, problem: &Problem, vcores: &mut VCores) -> Option<StepRecord> {
        if self.is_done() {
            return None;
        }
        let start = Instant::now();
        balancer.step(problem, vcores);
        self.steps += 1;
        let moved = metrics::migrations(&self.previous, vcores.owners());
        self.previous.copy_from_slice(vcores.owners());
        self.converged = is_converged(problem, vcores, self.stop.tol);
        self.stuck = !self.converged && balancer.is_stuck();
        self.elapsed += start.elapsed();
        Some(Self::record(self.steps, vcores, moved))
    }

    /// Ends the run (leaving `vcores` in the method's best state, see [`Balancer::finish`]) and
    /// says how it went.
    pub fn finish(mut self, balancer: &mut dyn Balancer, problem: &Problem, vcores: &mut VCores) -> Outcome {
        let start = Instant::now();
        balancer.finish(problem, vcores);
        let (dol_max, dol_min) = metrics::dol_extremes(vcores.charges());
        let migrations = metrics::migrations(&self.initial, vcores.owners());
        self.elapsed += start.elapsed();
        Outcome {
            steps: self.steps,
            converged: self.converged,
            max_avg: vcores.max_avg(),
            lower_bound: problem.lower_bound(),
            dol_max,
            dol_min,
            migrations,
            restarted: self.restarted,
            elapsed: self.elapsed,
        }
    }

    fn record(step: usize, vcores: &VCores, migrations: usize) -> StepRecord {
        let (dol_max, dol_min) = metrics::dol_extremes(vcores.charges());
        StepRecord { step, max_avg: vcores.max_avg(), dol_max, dol_min, migrations }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{methods, Grid};

    /// 64 × 64 boxes, 16 vCores balanced on uniform loads, then loads gathered in the lower
    /// left quarter (10 against 0.1): the cells are far from balance.
    fn far_case() -> (Grid, Vec<f64>, VCores) {
        let grid = Grid::new(64, 64).unwrap();
        let ones = vec![1.0; grid.len()];
        let uniform = Problem::new(grid, &ones, 16).unwrap();
        let mut vcores = VCores::random(&uniform, 3);
        let mut method = methods::by_name(methods::DEFAULT).unwrap();
        balance(method.as_mut(), &uniform, &mut vcores, StopRule { max_steps: 200, tol: 0.02 }, |_| {});
        let loads = (0..grid.len()).map(|k| if k % 64 < 32 && k / 64 < 32 { 10.0 } else { 0.1 }).collect();
        (grid, loads, vcores)
    }

    #[test]
    fn a_rebalancing_far_from_balance_starts_over_and_keeps_the_ids_it_can() {
        let (grid, loads, start) = far_case();
        let problem = Problem::new(grid, &loads, 16).unwrap();
        let stop = StopRule { max_steps: 20, tol: 0.05 };
        let mut method = methods::by_name(methods::DEFAULT).unwrap();
        let (mut warm, mut fresh) = (start.clone(), start.clone());
        let moved_back = balance(method.as_mut(), &problem, &mut warm, stop, |_| {});
        let restarted = rebalance(method.as_mut(), &problem, &mut fresh, stop);
        assert!(restarted.restarted && !moved_back.restarted);
        // A run says so from its start, before any step.
        let (run, _) = Run::start_rebalancing(method.as_mut(), &problem, &mut start.clone(), stop);
        assert!(run.restarted() && run.steps() == 0);
        assert_eq!(restarted.migrations, metrics::migrations(start.owners(), fresh.owners()), "counted from before");
        // Starting over converges in fewer steps than moving the cells back (5 against 14;
        // before the end game of a run from far away held its vCores, more than 20).
        assert!(restarted.converged && restarted.steps < moved_back.steps, "{restarted:?}\n{moved_back:?}");
        // The ids: the bisection's own would move more boxes than the matched ones, for the
        // same cells.
        let matched = start.restarted_from_bisection(&problem);
        let parts = crate::bisection::kway_rcb(&grid, &loads, 16).unwrap();
        let own_ids = VCores::sized_to_parts(&problem, &parts);
        let sorted = |v: &VCores| {
            let mut p: Vec<[u64; 3]> = v.positions().iter().map(|p| p.map(f64::to_bits)).collect();
            p.sort_unstable();
            p
        };
        assert_eq!(sorted(&matched), sorted(&own_ids));
        assert!(
            metrics::migrations(start.owners(), matched.owners())
                < metrics::migrations(start.owners(), own_ids.owners())
        );
    }

    #[test]
    fn a_restart_sizes_its_cells_to_the_bisection_s_parts() {
        let (grid, loads, start) = far_case();
        let problem = Problem::new(grid, &loads, 16).unwrap();
        let parts = crate::bisection::kway_rcb(&grid, &loads, 16).unwrap();
        let sized = VCores::sized_to_parts(&problem, &parts);
        let plain = VCores::at_centroids(&problem, &parts).unwrap();
        let off = |v: &VCores| v.owners().iter().zip(&parts).filter(|(a, b)| a != b).count();
        // Small parts in the loaded quarter, large ones around it: cells of their sizes follow
        // the parts more closely, and are better balanced, than plain Voronoi cells.
        assert!(off(&sized) * 2 < off(&plain), "{} against {}", off(&sized), off(&plain));
        assert!(sized.max_avg() < plain.max_avg(), "{} against {}", sized.max_avg(), plain.max_avg());
        // What a restart lands.
        let fresh = start.restarted_from_bisection(&problem);
        assert!((fresh.max_avg() - sized.max_avg()).abs() < 1e-9 * sized.max_avg());
    }

    /// A method that never moves anything, says it is stuck when told to, and takes 1 ms a step.
    struct Idle {
        stuck: bool,
    }

    impl Balancer for Idle {
        fn name(&self) -> &str {
            "idle"
        }
        fn step(&mut self, _: &Problem, _: &mut VCores) {
            std::thread::sleep(Duration::from_millis(1));
        }
        fn is_stuck(&self) -> bool {
            self.stuck
        }
    }

    /// A method that keeps the trait's defaults for `is_stuck` and `finish`.
    struct Plain;

    impl Balancer for Plain {
        fn name(&self) -> &str {
            "plain"
        }
        fn step(&mut self, _: &Problem, _: &mut VCores) {}
    }

    /// Two vCores on a 4 × 1 line: vCore 0 at `x0` with weight `w0` (power distance d² − w),
    /// vCore 1 at the right end.
    fn line(problem: &Problem, x0: f64, w0: f64) -> VCores {
        VCores::new(problem, vec![[x0, 0.5, 0.5], [3.9, 0.5, 0.5]], vec![w0, 0.0]).unwrap()
    }

    #[test]
    fn a_run_ends_at_max_steps_stuck_or_converged_and_counts_what_it_did() {
        let grid = Grid::new(4, 1).unwrap();
        let problem = Problem::new(grid, &[1.0; 4], 2).unwrap();
        // Three boxes against one: max_avg 1.5, never converged at 5 %.
        let start = line(&problem, 2.9, 0.0);
        assert_eq!(start.max_avg(), 1.5);
        let stop = StopRule { max_steps: 3, tol: 0.05 };
        // A method that is never stuck runs to the step limit: the default `is_stuck` is false.
        let out = balance(&mut Plain, &problem, &mut start.clone(), stop, |_| {});
        assert_eq!((out.steps, out.converged), (3, false));
        // One that is stuck stops after its first step, however many are allowed.
        let mut records = Vec::new();
        let many = StopRule { max_steps: 1000, ..stop };
        let out = balance(&mut Idle { stuck: true }, &problem, &mut start.clone(), many, |r| records.push(*r));
        assert_eq!((out.steps, out.converged), (1, false));
        assert_eq!(records.iter().map(|r| r.step).collect::<Vec<_>>(), [0, 1]);
        // A run taken a step at a time says how far it is and how long it took.
        let mut vcores = start.clone();
        let mut idle = Idle { stuck: false };
        let (mut run, first) = Run::start(&mut idle, &problem, &mut vcores, stop);
        assert_eq!((first.step, first.max_avg, run.steps(), run.restarted(), run.is_done()), (0, 1.5, 0, false, false));
        assert!(run.step(&mut idle, &problem, &mut vcores).is_some());
        assert!(run.step(&mut idle, &problem, &mut vcores).is_some());
        assert_eq!(run.steps(), 2);
        assert!(run.elapsed() >= Duration::from_millis(2), "{:?}", run.elapsed());
        assert!(run.step(&mut idle, &problem, &mut vcores).is_some());
        assert!(run.is_done() && run.step(&mut idle, &problem, &mut vcores).is_none(), "out of steps");
        let out = run.finish(&mut idle, &problem, &mut vcores);
        assert_eq!(out.steps, 3);
        assert!(out.elapsed >= Duration::from_millis(3), "{:?}", out.elapsed);
        // A state that meets the tolerance is done before its first step.
        let balanced = line(&problem, 1.0, 0.0);
        assert_eq!(balanced.max_avg(), 1.0);
        let (run, _) = Run::start(&mut idle, &problem, &mut balanced.clone(), stop);
        assert!(run.is_done());
        let out = balance(&mut idle, &problem, &mut balanced.clone(), stop, |_| {});
        assert_eq!((out.steps, out.converged), (0, true));
    }

    #[test]
    fn a_rebalancing_starts_over_from_one_and_a_half_times_the_lower_bound() {
        let grid = Grid::new(4, 1).unwrap();
        let stop = StopRule { max_steps: 0, tol: 0.0 };
        let restarted = |problem: &Problem, start: &VCores| {
            let (run, _) = Run::start_rebalancing(&mut Plain, problem, &mut start.clone(), stop);
            run.restarted()
        };
        let fresh_is_better =
            |problem: &Problem, start: &VCores| start.restarted_from_bisection(problem).max_avg() < start.max_avg();
        // Uniform loads (lower bound 1): three boxes against one is 1.5 exactly, not above.
        let uniform = Problem::new(grid, &[1.0; 4], 2).unwrap();
        let at_line = line(&uniform, 2.9, 0.0);
        assert_eq!((at_line.max_avg(), uniform.lower_bound()), (1.5, 1.0));
        assert!(fresh_is_better(&uniform, &at_line));
        assert!(!restarted(&uniform, &at_line));
        // One heavy box (5 against 1, 1, 1; mean 4): the lower bound is 1.25 and the line 1.875.
        let heavy = Problem::new(grid, &[5.0, 1.0, 1.0, 1.0], 2).unwrap();
        assert_eq!(heavy.lower_bound(), 1.25);
        // Two boxes each: 1.5, under the line, so the cells move from where they are although a
        // bisection's start would be better.
        let under = line(&heavy, 1.0, 0.0);
        assert_eq!(under.max_avg(), 1.5);
        assert!(fresh_is_better(&heavy, &under));
        assert!(!restarted(&heavy, &under));
        // All four on vCore 0: 2.0, over the line.
        let over = line(&heavy, 0.5, 100.0);
        assert_eq!(over.max_avg(), 2.0);
        assert!(restarted(&heavy, &over));
        // A plain start never restarts.
        let (run, _) = Run::start(&mut Plain, &heavy, &mut over.clone(), stop);
        assert!(!run.restarted());
    }

    #[test]
    fn an_outcome_serialises_its_time_in_milliseconds() {
        let outcome = Outcome::balanced_at_start(Duration::from_millis(250));
        let json = serde_json::to_value(&outcome).unwrap();
        assert_eq!(json["elapsed"], 250.0);
    }

    #[test]
    fn stop_rules_follow_the_boxes_that_carry_load_per_vcore() {
        // 100 × 40 boxes at 16 vCores: 250 per vCore exactly, the first count that is tight.
        let grid = Grid::new(100, 40).unwrap();
        let ones = vec![1.0; grid.len()];
        let at = Problem::new(grid, &ones, 16).unwrap();
        assert_eq!((StopRule::for_problem(&at).tol, StopRule::before_refinement(&at).tol), (0.01, 0.01));
        assert_eq!(StopRule::for_problem(&at).max_steps, StopRule::default().max_steps);
        // One vCore more: under 250, the default, and 0.1 before a refinement.
        let under = Problem::new(grid, &ones, 17).unwrap();
        assert_eq!((StopRule::for_problem(&under).tol, StopRule::before_refinement(&under).tol), (0.05, 0.1));
        // Widening keeps the step limit, and keeps a rule the cells resolve, or one that is NaN.
        let sparse: Vec<f64> = (0..grid.len()).map(|k| if k % 100 == 0 { 1.0 } else { 0.0 }).collect();
        let sparse = Problem::new(grid, &sparse, 16).unwrap(); // 2.5 loaded boxes per vCore
        let rule = StopRule { max_steps: 7, tol: 0.05 };
        assert_eq!(rule.coarsened_for_cells(&sparse), StopRule { max_steps: 7, tol: 0.8 });
        let wide = StopRule { max_steps: 7, tol: 0.5 };
        assert!(wide.resolvable_by_cells(&sparse));
        assert_eq!(wide.coarsened_for_cells(&sparse), wide);
        assert_eq!(rule.coarsened_for_cells(&at), rule);
        let nan = StopRule { max_steps: 7, tol: f64::NAN }.coarsened_for_cells(&sparse);
        assert!(nan.tol.is_nan() && nan.max_steps == 7);
    }

    #[test]
    fn a_rebalancing_near_balance_is_a_plain_run() {
        let (grid, loads, _) = far_case();
        let problem = Problem::new(grid, &loads, 16).unwrap();
        let mut method = methods::by_name(methods::DEFAULT).unwrap();
        let mut vcores = VCores::from_bisection(&problem);
        balance(method.as_mut(), &problem, &mut vcores, StopRule { max_steps: 200, tol: 0.02 }, |_| {});
        // The loads drift a little: 1.3 × more in one column of boxes.
        let drifted: Vec<f64> =
            loads.iter().enumerate().map(|(k, &l)| if k % 64 == 10 { 1.3 * l } else { l }).collect();
        let problem = Problem::new(grid, &drifted, 16).unwrap();
        let stop = StopRule { max_steps: 20, tol: 0.005 };
        let (mut a, mut b) = (vcores.clone(), vcores);
        let plain = balance(method.as_mut(), &problem, &mut a, stop, |_| {});
        let re = rebalance(method.as_mut(), &problem, &mut b, stop);
        assert!(!re.restarted);
        assert_eq!((plain.steps, plain.max_avg, plain.migrations), (re.steps, re.max_avg, re.migrations));
        assert_eq!(a.owners(), b.owners());
    }
}
