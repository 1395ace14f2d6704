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

    /// Moves the vCores one step. On entry `cells` holds the assignment and charges of the
    /// current state for `problem`'s loads; on exit, those of the new state.
    fn step(&mut self, problem: &Problem, vcores: &mut VCores);

    /// Forgets adaptive state carried between steps, so that a run depends only on its input.
    fn reset(&mut self) {}

    /// True when the last step found no move that improves the mapping: further steps would
    /// change nothing, so [`balance`] stops (not converged) instead of spinning.
    fn is_stuck(&self) -> bool {
        false
    }

    /// Called by [`balance`] when a run ends without converging, to leave `cells` in the
    /// method's best state rather than its last (a method that may worsen the balance on its
    /// way keeps its best). Does nothing by default: the paper's methods end where they stop.
    fn finish(&mut self, _problem: &Problem, _cells: &mut VCores) {}
}

/// When to stop.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StopRule {
    /// Give up after this many steps.
    pub max_steps: usize,
    /// Converged when `max_avg ≤ (1 + tol) × lower_bound`.
    pub tol: f64,
}

impl Default for StopRule {
    fn default() -> Self {
        StopRule { max_steps: 5000, tol: 0.05 }
    }
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
    /// Final edge cut.
    pub edge_cut: usize,
    /// Boxes whose owner differs between the start and the end of the run.
    pub migrations: usize,
    /// Wall time of the run.
    #[serde(serialize_with = "as_ms")]
    pub elapsed: Duration,
}

fn as_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

/// Whether `cells` meets the convergence criterion for `problem`.
pub fn is_converged(problem: &Problem, vcores: &VCores, tol: f64) -> bool {
    vcores.max_avg() <= (1.0 + tol) * problem.lower_bound()
}

/// Steps `balancer` from the state in `cells` until converged, stuck or `max_steps`, calling
/// `on_step` with the starting state and after every step (pass `|_| {}` to ignore).
///
/// `cells` must come from the same grid and vCore count; if the loads changed since it was
/// last assigned, it is recharged first (a warm start: owners depend only on the vCores).
///
/// ```
/// use pbs::{balance, methods, VCores, Grid, StopRule, Problem};
/// let grid = Grid::new(50, 50).unwrap();
/// let loads = pbs::loadmap::static_case(pbs::loadmap::Case::Disc, &grid, 0);
/// let problem = Problem::new(grid, &loads, 10).unwrap();
/// let mut vcores = VCores::random(&problem, 1);
/// let mut method = methods::by_name("power-cells").unwrap();
/// let out = balance(method.as_mut(), &problem, &mut vcores, StopRule::default(), |_| {});
/// assert!(out.converged && out.max_avg <= 1.05 * out.lower_bound);
/// assert_eq!(vcores.owners().len(), 2500); // the owner of every box
/// ```
pub fn balance(
    balancer: &mut dyn Balancer,
    problem: &Problem,
    vcores: &mut VCores,
    options: StopRule,
    mut on_step: impl FnMut(&StepRecord),
) -> Outcome {
    let start = Instant::now();
    balancer.reset();
    vcores.recharge(problem);
    let initial: Vec<u32> = vcores.owners().to_vec();
    let mut previous = initial.clone();
    let mut steps = 0;
    let record = |steps, vcores: &VCores, migrations| {
        let (dol_max, dol_min) = metrics::dol_extremes(vcores.charges());
        StepRecord { step: steps, max_avg: vcores.max_avg(), dol_max, dol_min, migrations }
    };
    on_step(&record(0, vcores, 0));
    let mut converged = is_converged(problem, vcores, options.tol);
    while !converged && steps < options.max_steps {
        balancer.step(problem, vcores);
        steps += 1;
        let moved = metrics::migrations(&previous, vcores.owners());
        previous.copy_from_slice(vcores.owners());
        on_step(&record(steps, vcores, moved));
        converged = is_converged(problem, vcores, options.tol);
        if !converged && balancer.is_stuck() {
            break;
        }
    }
    if !converged {
        balancer.finish(problem, vcores);
    }
    let elapsed = start.elapsed();
    let (dol_max, dol_min) = metrics::dol_extremes(vcores.charges());
    Outcome {
        steps,
        converged,
        max_avg: vcores.max_avg(),
        lower_bound: problem.lower_bound(),
        dol_max,
        dol_min,
        edge_cut: metrics::edge_cut(problem.grid(), vcores.owners()),
        migrations: metrics::migrations(&initial, vcores.owners()),
        elapsed,
    }
}
