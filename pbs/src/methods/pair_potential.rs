//! The paper's method: vCores on plain Voronoi cells, moved by steepest descent under a pair
//! force (eq. 1, 4, 6 or 7, optionally with the §5.2 task attraction).
//!
//! Update (paper eq. 2 with the sign of its prose): `x_i += k Σ_j F_ij`, with `k` rescaled at
//! every step so that the largest displacement is `step_fraction` of a box.

use crate::balancer::Balancer;
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
    /// Strength of the task attraction (0 disables it).
    pub attraction: f64,
    /// Largest displacement per step, in boxes.
    pub step_fraction: f64,
    forces: Vec<Point>,
}

impl PairPotential {
    /// A method called `name` with the given force law and attraction, moving at most a fifth
    /// of a box per step.
    pub fn new(name: &str, law: ForceLaw, attraction: f64) -> Self {
        PairPotential { name: name.to_string(), law, attraction, step_fraction: 0.2, forces: Vec::new() }
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
        // Finite forces times a finite factor: a position that is not finite cannot come of
        // it, and would be refused with the vCores left as they were.
        let _ = vcores.update(problem, |positions, _| {
            for (x, f) in positions.iter_mut().zip(forces) {
                for a in 0..3 {
                    x[a] += k * f[a];
                }
            }
        });
    }
}
