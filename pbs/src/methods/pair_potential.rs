//! The paper's method: vCores on plain Voronoi cells, moved by steepest descent under a pair
//! force (eq. 1, 4, 6 or 7, optionally with the §5.2 task attraction).
//!
//! Update (paper eq. 2 with the sign of its prose): `x_i += k Σ_j F_ij`, with `k` rescaled at
//! every step so that the largest displacement is `step_fraction` of a box.

use crate::balancer::Balancer;
use crate::error::{Error, Result};
use crate::forces::{add_pair_forces, add_task_attraction, ForceLaw};
use crate::grid::Point;
use crate::problem::Problem;
use crate::vcores::VCores;

/// Pair-potential steepest descent on Voronoi cells (weights stay as they are).
#[derive(Debug, Clone)]
pub struct PairPotential {
    name: String,
    /// The pair force.
    pub law: ForceLaw,
    /// Strength of the task attraction (0 disables it), at most [`PairPotential::MAX_ATTRACTION`].
    attraction: f64,
    /// Largest displacement per step, in boxes ([`PairPotential::with_step_fraction`]).
    step_fraction: f64,
    forces: Vec<Point>,
}

impl PairPotential {
    /// The largest displacement per step, in boxes, unless
    /// [`PairPotential::with_step_fraction`] says otherwise: a fifth of a box.
    pub const DEFAULT_STEP_FRACTION: f64 = 0.2;

    /// The largest [`PairPotential::with_step_fraction`]: the longest side a grid can have
    /// (2³² − 1 boxes). A step must keep the squared distances between vCores finite.
    pub const MAX_STEP_FRACTION: f64 = u32::MAX as f64;

    /// The largest task attraction [`PairPotential::new`] takes (the paper's is 1): far
    /// beyond any use, far below where the forces overflow (at 1e308 they do, and the method
    /// stands still).
    pub const MAX_ATTRACTION: f64 = 1e100;

    /// A method called `name` with the given force law and task attraction (0 disables it),
    /// moving at most [`PairPotential::DEFAULT_STEP_FRACTION`] of a box per step. An
    /// attraction outside 0..=[`PairPotential::MAX_ATTRACTION`] is an error (a NaN, infinite
    /// or 1e308 one leaves the vCores where they start).
    pub fn new(name: &str, law: ForceLaw, attraction: f64) -> Result<Self> {
        if !(0.0..=Self::MAX_ATTRACTION).contains(&attraction) {
            return Err(Error::Parameter {
                name: "attraction",
                value: attraction.to_string(),
                reason: "expected a strength from 0 (no task attraction) to 1e100",
            });
        }
        Ok(PairPotential {
            name: name.to_string(),
            law,
            attraction,
            step_fraction: Self::DEFAULT_STEP_FRACTION,
            forces: Vec::new(),
        })
    }

    /// The same method moving at most `boxes` boxes per step; an error unless `boxes` is above
    /// 0 and at most [`PairPotential::MAX_STEP_FRACTION`] (a negative one moves the vCores
    /// against the force; a NaN, infinite or 1e308 one not at all).
    pub fn with_step_fraction(mut self, boxes: f64) -> Result<Self> {
        if !(boxes > 0.0 && boxes <= Self::MAX_STEP_FRACTION) {
            return Err(Error::Parameter {
                name: "step_fraction",
                value: boxes.to_string(),
                reason: "expected a displacement per step above 0 and at most 2^32 − 1 boxes",
            });
        }
        self.step_fraction = boxes;
        Ok(self)
    }
}

impl Balancer for PairPotential {
    fn name(&self) -> &str {
        &self.name
    }

    fn step(&mut self, problem: &Problem, vcores: &mut VCores) {
        let n = vcores.len();
        self.forces.clear();
        self.forces.resize(n, [0.0; 3]);
        let mean = problem.mean();
        add_pair_forces(self.law, vcores.positions(), vcores.charges(), mean, &mut self.forces);
        if self.attraction != 0.0 {
            let (grid, loads) = (problem.grid(), problem.loads());
            add_task_attraction(
                grid,
                loads,
                vcores.owners(),
                vcores.positions(),
                mean,
                self.attraction,
                &mut self.forces,
            );
        }
        let largest = self.forces.iter().map(|f| (f[0] * f[0] + f[1] * f[1] + f[2] * f[2]).sqrt()).fold(0.0, f64::max);
        if !(largest > 0.0 && largest.is_finite()) {
            return; // at rest (or nothing to do): the state is already final
        }
        let k = self.step_fraction / largest;
        let forces = &self.forces;
        // Finite forces times a finite factor (the step is at most 2^32 boxes): a position that
        // is not finite cannot come of it, and would be refused with the vCores left as they were.
        let _ = vcores.update(problem, |positions, _| {
            for (x, f) in positions.iter_mut().zip(forces) {
                for a in 0..3 {
                    x[a] += k * f[a];
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forces::{add_pair_forces, add_task_attraction};
    use crate::{balance, metrics, Grid, StopRule};

    /// Settings that cannot move the vCores usefully are refused by name; before, public
    /// fields took them and a run stood still (NaN, ∞, 1e308) or went backwards (a negative
    /// step: max_avg 2.03 → 2.46–3.54 over 200 steps on this map).
    #[test]
    fn settings_that_cannot_move_the_vcores_usefully_are_refused() {
        for a in [f64::NAN, f64::INFINITY, 1e308, -1.0] {
            let e = PairPotential::new("paper-eq7-attract", ForceLaw::BalanceShortRange, a).unwrap_err();
            assert!(e.to_string().contains("attraction"), "{a}: {e}");
        }
        let method = || PairPotential::new("paper-eq7", ForceLaw::BalanceShortRange, 0.0).unwrap();
        for f in [f64::NAN, f64::INFINITY, 1e308, -1.0, 0.0] {
            let e = method().with_step_fraction(f).unwrap_err();
            assert!(e.to_string().contains("step_fraction"), "{f}: {e}");
        }
        // The largest settings taken still balance.
        let grid = Grid::new(16, 16).unwrap();
        let loads: Vec<f64> = (0..256).map(|k| if k % 16 < 8 { 2.0 } else { 1.0 }).collect();
        let problem = Problem::new(grid, &loads, 4).unwrap();
        let start = VCores::random(&problem, 1);
        let before = metrics::max_avg(start.charges());
        let mut m = PairPotential::new("paper-eq7-attract", ForceLaw::BalanceShortRange, 1.0).unwrap();
        let mut v = start.clone();
        let after = balance(&mut m, &problem, &mut v, StopRule { max_steps: 200, tol: 0.05 }, |_| {}).max_avg;
        assert!(after < before, "{before} → {after}");
        let mut far = method().with_step_fraction(PairPotential::MAX_STEP_FRACTION).unwrap();
        let mut v = start.clone();
        balance(&mut far, &problem, &mut v, StopRule { max_steps: 20, tol: 0.05 }, |_| {});
        assert!(v.positions().iter().flatten().all(|x| x.is_finite()));
    }

    /// A step moves every vCore along its force (the pair forces, plus the task attraction when
    /// set): the one with the largest force by exactly the step fraction, the others in
    /// proportion (eq. 2 with `k` rescaled), clamped into the domain, weights unchanged; where no
    /// force acts (a single vCore), nothing moves.
    #[test]
    fn a_step_moves_each_vcore_along_its_force_the_largest_by_the_step_fraction() {
        let grid = Grid::new(24, 16).unwrap();
        let loads: Vec<f64> = (0..grid.len()).map(|k| 1.0 + (k % 7) as f64).collect();
        let problem = Problem::new(grid, &loads, 6).unwrap();
        let norm = |f: &Point| (f[0] * f[0] + f[1] * f[1] + f[2] * f[2]).sqrt();
        let cases = [
            (ForceLaw::BalanceShortRange, 0.0, 0.2),
            (ForceLaw::Coulomb, 0.5, 1.5),
            (ForceLaw::InverseCharge, 0.0, 0.7),
            (ForceLaw::Balance, 1.0, 0.3),
        ];
        let (mut clamped, mut by_fraction) = (0, 0);
        for (law, attraction, fraction) in cases {
            for seed in 0..6 {
                let start = VCores::random(&problem, seed);
                let mut f = vec![[0.0; 3]; 6];
                add_pair_forces(law, start.positions(), start.charges(), problem.mean(), &mut f);
                let (owners, mean) = (start.owners(), problem.mean());
                add_task_attraction(&grid, &loads, owners, start.positions(), mean, attraction, &mut f);
                let largest = f.iter().map(norm).fold(0.0, f64::max);
                let mut method =
                    PairPotential::new("t", law, attraction).unwrap().with_step_fraction(fraction).unwrap();
                let mut v = start.clone();
                method.step(&problem, &mut v);
                assert_eq!(v.weights(), start.weights());
                for (i, (fi, &x)) in f.iter().zip(v.positions()).enumerate() {
                    let free: Point = std::array::from_fn(|a| start.positions()[i][a] + fraction * fi[a] / largest);
                    let expected = grid.clamp(free);
                    assert!((0..3).all(|a| (x[a] - expected[a]).abs() <= 1e-12), "{law:?}, seed {seed}, vCore {i}");
                    clamped += usize::from(expected != free);
                    if norm(fi) == largest && expected == free {
                        let moved = norm(&std::array::from_fn(|a| x[a] - start.positions()[i][a]));
                        assert!((moved - fraction).abs() <= 1e-12, "{law:?}, seed {seed}: moved {moved}");
                        by_fraction += 1;
                    }
                }
            }
        }
        assert!(clamped > 0 && by_fraction > 12, "{clamped} clamped, {by_fraction} moved by the fraction");
        let alone = Problem::new(grid, &loads, 1).unwrap();
        let start = VCores::random(&alone, 3);
        let mut v = start.clone();
        PairPotential::new("t", ForceLaw::Coulomb, 0.0).unwrap().step(&alone, &mut v);
        assert_eq!(v.positions(), start.positions());
    }
}
