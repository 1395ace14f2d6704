//! The Newton step of the power-cell method and its line search: the direction from the cell
//! graph's Laplacian, capped by a trust region, and trials (full assignments) judged by the
//! dual objective in the Newton phase or by the merit in the end game.

use super::giants::hold_giants;
use super::{Capturable, PowerCells, NO_BOX};
use crate::assign::{assign_by_bands, assign_on, shared_parts};
use crate::metrics::{self, ChargeSum};
use crate::problem::Problem;
use crate::vcores::VCores;

/// Bands of rows a trial judged by its merit is assigned in, its charges checked after each.
/// On the drifting sequences (seed 7) a warm step at 150² / 72 and 256² / 256 took 0.95 and
/// 0.87 × the time of assigning whole, with 4 to 16 bands within noise of each other and 32
/// slower at 256².
const TRIAL_BANDS: usize = 8;
/// The fewest boxes a trial's band has: each band starts its assignment from every vCore.
const TRIAL_BAND_BOXES: usize = 2048;

/// What a line search asks of a trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Accept {
    /// Anything: the shortest step is kept if no longer one was.
    Any,
    /// The concave dual objective increases (the Newton phase).
    DualIncrease,
    /// The merit `(max charge, squared excess)` decreases (the end game).
    MeritDecrease,
}

impl Accept {
    /// `Any` still prefers a longer step that increases the dual; the others are strict.
    pub(super) fn strict(self) -> Accept {
        match self {
            Accept::Any => Accept::DualIncrease,
            other => other,
        }
    }
}

/// Lexicographic merit: the largest charge first (that is `max_avg`), then the squared excess
/// over the capacities, so that ties at the maximum still rank progress.
pub(super) fn merit(charges: &[f64], capacity: &[f64]) -> (f64, f64) {
    let max = charges.iter().copied().fold(0.0, f64::max);
    // A product rather than `powi(2)`, whose precision Rust leaves unspecified (Miri varies it
    // from call to call): the merit decides which trial a run keeps.
    let excess = charges
        .iter()
        .zip(capacity)
        .map(|(q, c)| {
            let over = (q - c).max(0.0);
            over * over
        })
        .sum();
    (max, excess)
}

/// The trust radius after a Newton line search that kept the step length `accepted` (`None`:
/// no ascent): doubled after a full step, scaled by the step kept after a short one (by a
/// quarter at least), quartered after none; always within 64 times the run's first radius
/// `radius0` either way, so that a run of failures cannot freeze the method.
pub(super) fn next_radius(radius: f64, radius0: f64, accepted: Option<f64>) -> f64 {
    let factor = match accepted {
        Some(1.0) => 2.0,
        Some(t) => t.max(0.25),
        None => 0.25,
    };
    (radius * factor).clamp(radius0 / 64.0, radius0 * 64.0)
}

impl PowerCells {
    /// Damped-Newton direction: solves `L Δw = c − Q` on the cell graph (see
    /// [`crate::laplacian`]). VCores with no loaded boundary get the stiffness implied by the
    /// distance to their nearest capturable box, so they still move.
    pub(super) fn newton_direction(&mut self, problem: &Problem, vcores: &VCores) {
        let n = vcores.len();
        self.scratch.laplacian.build(vcores.positions(), problem.loads(), vcores.assignment(), &self.run.held);
        let mut rhs: Vec<f64> = self.run.capacity.iter().zip(vcores.charges()).map(|(c, q)| c - q).collect();
        // A holder's weight is bounded below by its giant (see `hold_giants`): lowering it is
        // undone by the projection, so the Newton system keeps it fixed (a Dirichlet condition)
        // and lets the neighbours take its extra boxes.
        for (i, &k) in self.run.giant_of.iter().enumerate() {
            if k != NO_BOX && rhs[i] < 0.0 {
                rhs[i] = 0.0;
            }
        }
        let mean_degree = self.scratch.laplacian.degree.iter().sum::<f64>() / n as f64;
        let mut capturable = None;
        let reg: Vec<f64> = (0..n)
            .map(|i| {
                if self.run.giant_of[i] != NO_BOX && self.run.capacity[i] < vcores.charges()[i] {
                    1e6 * (self.scratch.laplacian.degree[i] + mean_degree).max(f64::MIN_POSITIVE)
                } else if self.scratch.laplacian.degree[i] > 0.0 {
                    1e-6 * mean_degree.max(f64::MIN_POSITIVE)
                } else if rhs[i] > 0.0 {
                    let d = capturable
                        .get_or_insert_with(|| Capturable::new(problem, &self.run.held))
                        .distance(problem, vcores, i);
                    if d > 0.0 {
                        rhs[i] / d
                    } else {
                        1.0
                    }
                } else {
                    1.0
                }
            })
            .collect();
        self.scratch.direction = self.scratch.laplacian.solve(&reg, &rhs, 1e-6, 4 * n + 20);
        // Trust region: far from balance the smoothed Hessian underestimates how much load a
        // boundary sweeps through, and an uncapped step overshoots by more than the line search
        // can halve. The radius starts at `spacing²` (a boundary moves about half a cell),
        // doubles after every full step and shrinks to what the line search accepted.
        if self.run.radius0 == 0.0 {
            let grid = problem.grid();
            // Boxes per vCore to the power 2 / dimension; in 2D that is the number itself, not
            // taken through `powf`, whose precision Rust leaves unspecified.
            let per_vcore = grid.len() as f64 / n as f64;
            self.run.radius0 = if grid.nz() == 1 { per_vcore } else { per_vcore.powf(2.0 / 3.0) };
            self.run.radius = self.run.radius0;
        }
        let largest = self.scratch.direction.iter().fold(0.0f64, |m, d| m.max(d.abs()));
        if largest > self.run.radius {
            let scale = self.run.radius / largest;
            self.scratch.direction.iter_mut().for_each(|d| *d *= scale);
        }
    }

    /// Halves the step, from the full step, until the trial passes `accept`, and keeps it.
    /// Returns the step length kept, or `None` (state unchanged) after `max_halvings`.
    pub(super) fn line_search(&mut self, problem: &Problem, vcores: &mut VCores, accept: Accept) -> Option<f64> {
        self.line_search_from(problem, vcores, accept, 1.0)
    }

    /// [`PowerCells::line_search`] from the step length `t0` instead of the full step.
    pub(super) fn line_search_from(
        &mut self,
        problem: &Problem,
        vcores: &mut VCores,
        accept: Accept,
        t0: f64,
    ) -> Option<f64> {
        if self.scratch.direction.iter().all(|&d| d == 0.0 || !d.is_finite()) {
            return None;
        }
        // The end game's line searches judge by merit alone: no pass over the boxes for a dual.
        let g0 = (accept != Accept::MeritDecrease)
            .then(|| dual(&self.run.capacity, vcores.weights(), problem.loads(), &vcores.assignment().score));
        let m0 = merit(vcores.charges(), &self.run.capacity);
        let mut t = t0;
        for attempt in 0..=self.settings.max_halvings {
            self.scratch.trial_w.clear();
            self.scratch.trial_w.extend(vcores.weights().iter().zip(&self.scratch.direction).map(|(w, d)| w + t * d));
            let last = attempt == self.settings.max_halvings;
            if self.try_trial(problem, vcores, if last { accept } else { accept.strict() }, g0, m0) {
                return Some(t);
            }
            t *= 0.5;
        }
        None
    }

    /// Assigns with `trial_w` (after securing giants) and keeps the result if it passes.
    pub(super) fn try_trial(
        &mut self,
        problem: &Problem,
        vcores: &mut VCores,
        accept: Accept,
        g0: Option<f64>,
        m0: (f64, f64),
    ) -> bool {
        #[cfg(test)]
        {
            self.scratch.trials += 1;
        }
        hold_giants(problem.grid(), &self.run.giant_of, vcores.positions(), &mut self.scratch.trial_w);
        let (grid, positions, loads) = (problem.grid(), vcores.positions(), problem.loads());
        // A trial judged by its merit, largest charge first, fails as soon as one charge
        // passes the start's largest: summed band by band while the boxes are assigned, the
        // charges tell most failing trials before the whole grid is (the charges being the
        // same to the bit, so is the verdict). Where workers share the grid, it is assigned
        // whole.
        let alone = shared_parts(problem.workers(), grid, positions.len()) <= 1;
        let early = if accept == Accept::MeritDecrease && alone {
            let mut sum = ChargeSum::new(vcores.len());
            let trial = &mut self.scratch.trial;
            let bands = (grid.len() / TRIAL_BAND_BOXES).clamp(1, TRIAL_BANDS);
            if !assign_by_bands(grid, positions, &self.scratch.trial_w, trial, bands, |boxes, owners| {
                sum.add(owners, &loads[boxes]);
                sum.largest_so_far() <= m0.0
            }) {
                #[cfg(test)]
                {
                    self.scratch.told_early += 1;
                }
                return false;
            }
            Some(sum.finish())
        } else {
            assign_on(problem.workers(), grid, positions, &self.scratch.trial_w, &mut self.scratch.trial);
            None
        };
        let charges = || metrics::charges(&self.scratch.trial.owner, loads, vcores.len());
        let (passes, q) = match accept {
            Accept::Any => (true, None),
            Accept::DualIncrease => {
                let g0 = g0.expect("a line search that may judge by the dual starts with it");
                let g = dual(&self.run.capacity, &self.scratch.trial_w, loads, &self.scratch.trial.score);
                (g > g0 + 1e-12 * g0.abs(), None)
            }
            Accept::MeritDecrease => {
                let q = early.unwrap_or_else(charges);
                (merit(&q, &self.run.capacity) < m0, Some(q))
            }
        };
        if passes {
            let q = q.unwrap_or_else(charges);
            let trial_w = std::mem::take(&mut self.scratch.trial_w);
            vcores.accept(problem, &trial_w, &mut self.scratch.trial, q);
            self.scratch.trial_w = trial_w;
        }
        passes
    }
}

/// The dual objective `Σ w_i c_i + Σ_k q_k score_k` (see the module docs).
pub(super) fn dual(capacity: &[f64], weights: &[f64], loads: &[f64], score: &[f64]) -> f64 {
    let a: f64 = capacity.iter().zip(weights).map(|(c, w)| c * w).sum();
    let b: f64 = loads.iter().zip(score).map(|(q, s)| q * s).sum();
    a + b
}

#[cfg(test)]
mod tests {
    use super::super::PowerCellsSettings;
    use super::*;
    use crate::grid::Grid;
    use crate::laplacian::CellLaplacian;

    /// The trust radius doubles after a full step, follows a short one (by a quarter at
    /// least), is quartered after none, and stays within 64 times the run's first radius.
    #[test]
    fn the_trust_radius_follows_the_step_kept_within_64_times_the_first() {
        let r0 = 3.0;
        assert_eq!(next_radius(r0, r0, Some(1.0)), 6.0);
        assert_eq!(next_radius(r0, r0, Some(0.5)), 1.5);
        assert_eq!(next_radius(r0, r0, Some(0.125)), 0.75);
        assert_eq!(next_radius(r0, r0, None), 0.75);
        assert_eq!(next_radius(150.0, r0, Some(1.0)), 64.0 * r0);
        assert_eq!(next_radius(0.06, r0, None), r0 / 64.0);
        let (mut up, mut down) = (r0, r0);
        for _ in 0..20 {
            (up, down) = (next_radius(up, r0, Some(1.0)), next_radius(down, r0, None));
        }
        assert_eq!((up, down), (64.0 * r0, r0 / 64.0));
    }

    /// A random state on a 12×9 map with its capacities set.
    fn state(seed: u64) -> (Problem<'static>, VCores, PowerCells) {
        let grid = Grid::new(12, 9).unwrap();
        let mut rng = crate::rng::SplitMix64::new(seed);
        let loads: Vec<f64> = (0..grid.len()).map(|_| rng.below(4) as f64 + 0.5).collect();
        let problem = Problem::new(grid, &loads, 5).unwrap().into_owned();
        let positions = (0..5).map(|_| [rng.next_f64() * 12.0, rng.next_f64() * 9.0, 0.5]).collect();
        let v = VCores::new(&problem, positions, vec![0.0; 5]).unwrap();
        let mut p = PowerCells::new(PowerCellsSettings::default()).unwrap();
        p.capacities(&problem, &v);
        (problem, v, p)
    }

    /// A direction of zeros or with no finite entry is no step: no trial, the state kept,
    /// whatever the line search would accept.
    #[test]
    fn a_line_search_along_no_direction_makes_no_trial() {
        for direction in [vec![0.0; 5], vec![f64::NAN; 5], vec![0.0, f64::INFINITY, 0.0, f64::NAN, 0.0]] {
            for accept in [Accept::Any, Accept::DualIncrease, Accept::MeritDecrease] {
                let (problem, mut v, mut p) = state(4);
                let before = v.clone();
                p.scratch.direction = direction.clone();
                assert_eq!(p.line_search(&problem, &mut v, accept), None, "{direction:?} {accept:?}");
                assert_eq!(p.scratch.trials, 0);
                assert_eq!(v.weights(), before.weights());
            }
        }
    }

    /// Against the supergradient `c − Q` every step lowers the concave dual: a search that
    /// accepts anything still tries the strict test first, so it keeps the shortest step
    /// after halving `max_halvings` times, not the full one; a search for an increase keeps
    /// none.
    #[test]
    fn a_line_search_that_accepts_anything_keeps_the_shortest_step_when_none_ascends() {
        for seed in 0..20 {
            let (problem, mut v, mut p) = state(seed);
            let descent: Vec<f64> = p.run.capacity.iter().zip(v.charges()).map(|(c, q)| q - c).collect();
            p.scratch.direction = descent.clone();
            let before = v.clone();
            assert_eq!(p.line_search(&problem, &mut v.clone(), Accept::DualIncrease), None, "seed {seed}");
            let shortest = 0.5f64.powi(p.settings.max_halvings as i32);
            assert_eq!(p.line_search(&problem, &mut v, Accept::Any), Some(shortest), "seed {seed}");
            let expected: Vec<f64> = before.weights().iter().zip(&descent).map(|(w, d)| w + shortest * d).collect();
            assert_eq!(v.weights(), expected, "seed {seed}");
        }
    }

    /// An increase of the dual within `1e-12` of its size is rounding, not progress: a step
    /// raising it by `1e-13 ×` is refused, one raising it by `1e-10 ×` kept.
    #[test]
    fn a_dual_increase_within_rounding_is_not_an_ascent() {
        let (problem, v, mut p) = state(7);
        let ascent: Vec<f64> = p.run.capacity.iter().zip(v.charges()).map(|(c, q)| c - q).collect();
        let g0 = dual(&p.run.capacity, v.weights(), problem.loads(), &v.assignment().score);
        assert!(g0.abs() > 10.0, "{g0}");
        // A step too small to move a box raises the dual by its squared length.
        let squared: f64 = ascent.iter().map(|x| x * x).sum();
        for (relative, kept) in [(1e-13, false), (1e-10, true)] {
            let eps = relative * g0.abs() / squared;
            p.scratch.direction = ascent.iter().map(|x| eps * x).collect();
            let mut w = v.clone();
            let got = p.line_search_from(&problem, &mut w, Accept::DualIncrease, 1.0);
            assert_eq!(w.owners(), v.owners());
            assert_eq!(got.is_some(), kept, "a rise of {relative} × the dual");
        }
    }

    /// The merit ranks ties at the largest charge by the squared excess, not the plain one:
    /// excesses of 1, 0.5 and 0.5 (squares 1.5, plain 2) before 1, 0.9 and 0 (1.81, 1.9).
    #[test]
    fn the_merit_ranks_ties_at_the_largest_charge_by_the_squared_excess() {
        let capacity = [1.0; 3];
        let (a, b) = (merit(&[2.0, 1.5, 1.5], &capacity), merit(&[2.0, 1.9, 1.0], &capacity));
        assert_eq!(a, (2.0, 1.5));
        assert_eq!(b.0, 2.0);
        assert!((b.1 - 1.81).abs() < 1e-12, "{b:?}");
        assert!(a < b);
        // Charges under their capacities add nothing.
        assert_eq!(merit(&[0.5, 3.0], &[1.0, 1.0]), (3.0, 4.0));
    }

    /// The Newton direction solves `(L + diag(reg)) Δw = rhs` as its comments set them up
    /// (a holder over its capacity pinned, its `c − Q` clamped at 0; a vCore on
    /// a loaded boundary barely regularised; a cell with no loaded boundary given the stiffness
    /// of its nearest capturable box, or 1), then scaled down to the trust radius (boxes per
    /// vCore, to the power 2/3 in 3D) where it reaches past it. Checked by its residual, so
    /// that the test does not depend on how the system is conditioned: 1,200 random states,
    /// 2D and 3D, with giants and with cells far from the load.
    #[test]
    fn the_newton_direction_solves_the_system_its_comments_describe() {
        let mut rng = crate::rng::SplitMix64::new(21);
        // Holders pinned, cells far from the load, directions capped, uncapped.
        let mut seen = [0; 4];
        for case in 0..1200 {
            let grid = if case % 5 == 0 {
                Grid::new_3d(3 + rng.below(5), 3 + rng.below(5), 2 + rng.below(3)).unwrap()
            } else {
                Grid::new(4 + rng.below(14), 3 + rng.below(10)).unwrap()
            };
            // Load on the lower part of the grid only, so that some cells see none of it; a
            // giant now and then; loads in the thousands now and then, so that degrees are
            // far from 1.
            let scale = if case % 4 == 1 { 5000.0 } else { 1.0 };
            let cut = grid.len() / 2 + rng.below(grid.len() / 2);
            let mut loads: Vec<f64> =
                (0..grid.len()).map(|k| if k < cut { scale * (rng.below(4) as f64 + 0.5) } else { 0.0 }).collect();
            if case % 3 == 0 {
                loads[rng.below(cut)] = scale * 2.0 * grid.len() as f64;
            }
            let n = 2 + rng.below(grid.len().min(12) - 1);
            let problem = Problem::new(grid, &loads, n).unwrap();
            let [nx, ny, nz] = grid.dims();
            let positions: Vec<_> = (0..n)
                .map(|_| [rng.next_f64() * nx as f64, rng.next_f64() * ny as f64, rng.next_f64() * nz as f64])
                .collect();
            let weights = (0..n).map(|_| 6.0 * rng.next_f64() - 1.0).collect();
            let v = VCores::new(&problem, positions, weights).unwrap();
            let mut p = PowerCells::new(PowerCellsSettings::default()).unwrap();
            p.capacities(&problem, &v);
            p.newton_direction(&problem, &v);
            let d = p.scratch.direction.clone();
            // The system, written out from the comments.
            let mut lap = CellLaplacian::default();
            lap.build(v.positions(), problem.loads(), v.assignment(), &p.run.held);
            let q = v.charges();
            let mean = lap.degree.iter().sum::<f64>() / n as f64;
            let capturable = Capturable::new(&problem, &p.run.held);
            let (mut rhs, mut reg) = (vec![0.0; n], vec![0.0; n]);
            for i in 0..n {
                let holder = p.run.giant_of[i] != NO_BOX;
                rhs[i] = p.run.capacity[i] - q[i];
                if holder && rhs[i] < 0.0 {
                    rhs[i] = 0.0;
                }
                reg[i] = if holder && p.run.capacity[i] < q[i] {
                    seen[0] += 1;
                    1e6 * (lap.degree[i] + mean).max(f64::MIN_POSITIVE)
                } else if lap.degree[i] > 0.0 {
                    1e-6 * mean.max(f64::MIN_POSITIVE)
                } else if rhs[i] > 0.0 {
                    seen[1] += 1;
                    let dist = capturable.distance(&problem, &v, i);
                    if dist > 0.0 {
                        rhs[i] / dist
                    } else {
                        1.0
                    }
                } else {
                    1.0
                };
            }
            let apply = |x: &[f64]| -> Vec<f64> {
                (0..n)
                    .map(|i| {
                        (lap.degree[i] + reg[i]) * x[i]
                            - lap.edges[i].iter().map(|&(j, c)| c * x[j as usize]).sum::<f64>()
                    })
                    .collect()
            };
            let norm = |x: &[f64]| x.iter().map(|v| v * v).sum::<f64>().sqrt();
            if norm(&rhs) == 0.0 {
                assert!(d.iter().all(|&x| x == 0.0), "case {case}: {d:?}");
                continue;
            }
            // The direction is the solution scaled by at most 1: the factor back to the solution
            // that fits best, then the solution's residual.
            let ad = apply(&d);
            let s = ad.iter().zip(&rhs).map(|(a, b)| a * b).sum::<f64>() / ad.iter().map(|a| a * a).sum::<f64>();
            assert!(s.is_finite() && s >= 1.0 - 1e-6, "case {case}: scaled by 1 / {s}");
            let x: Vec<f64> = d.iter().map(|v| v * s).collect();
            let residual: Vec<f64> = apply(&x).iter().zip(&rhs).map(|(a, b)| a - b).collect();
            assert!(norm(&residual) <= 1e-4 * norm(&rhs), "case {case}: residual {residual:?} of {rhs:?}");
            let per_vcore = grid.len() as f64 / n as f64;
            let radius = if nz == 1 { per_vcore } else { per_vcore.powf(2.0 / 3.0) };
            assert_eq!(p.run.radius0, radius, "case {case}");
            let largest = |x: &[f64]| x.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            if largest(&x) > radius * (1.0 + 1e-6) {
                assert!((largest(&d) - radius).abs() <= 1e-9 * radius, "case {case}: {} for {radius}", largest(&d));
                seen[2] += 1;
            } else {
                assert!((s - 1.0).abs() <= 1e-6, "case {case}: scaled by {s} within the radius");
                seen[3] += 1;
            }
        }
        assert!(seen.iter().all(|&c| c > 20), "{seen:?}");
    }
}
