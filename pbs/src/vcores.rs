//! The vCores (positions and weights) and the cells they own: the state a balancer moves and
//! warm-starts from.

use crate::assign::{assign_on, Assignment};
use crate::error::{Error, Result};
use crate::grid::{Grid, Point};
use crate::metrics;
use crate::problem::Problem;
use crate::rng::SplitMix64;

/// vCores with their current assignment of boxes and their charges.
///
/// Invariant: after construction and after every balancer step, `owners()` is the assignment
/// of the current positions and weights, and `charges()` the charges of the loads it was
/// last given.
#[derive(Debug, Clone)]
pub struct VCores {
    grid: Grid,
    positions: Vec<Point>,
    weights: Vec<f64>,
    assignment: Assignment,
    charges: Vec<f64>,
}

impl VCores {
    /// vCores at the given positions (clamped into the domain) with the given weights
    /// (all zero gives plain Voronoi cells), assigned against `problem`'s loads.
    pub fn new(problem: &Problem, positions: Vec<Point>, weights: Vec<f64>) -> Result<VCores> {
        if positions.len() != weights.len() {
            return Err(Error::VCoreCount { positions: positions.len(), weights: weights.len() });
        }
        if positions.len() != problem.vcores() {
            return Err(Error::Parameter {
                name: "positions",
                value: positions.len().to_string(),
                reason: "must give exactly one position per vCore of the problem",
            });
        }
        for (index, p) in positions.iter().enumerate() {
            if let Some(&value) = p.iter().find(|v| !v.is_finite()) {
                return Err(Error::InvalidVCore { index, what: "position", value });
            }
        }
        if let Some((index, &value)) = weights.iter().enumerate().find(|(_, w)| !w.is_finite()) {
            return Err(Error::InvalidVCore { index, what: "weight", value });
        }
        let grid = *problem.grid();
        let positions = positions.into_iter().map(|p| grid.clamp(p)).collect();
        let mut vcores = VCores { grid, positions, weights, assignment: Assignment::default(), charges: Vec::new() };
        vcores.reassign(problem);
        Ok(vcores)
    }

    /// `problem.vcores()` vCores at uniformly random positions drawn from `seed`, zero weights
    /// (the paper's starting point).
    pub fn random(problem: &Problem, seed: u64) -> VCores {
        let grid = problem.grid();
        let e = grid.extent();
        let mut rng = SplitMix64::new(seed);
        let positions = (0..problem.vcores())
            .map(|_| [rng.next_f64() * e[0], rng.next_f64() * e[1], rng.next_f64() * e[2]])
            .collect();
        VCores::new(problem, positions, vec![0.0; problem.vcores()]).expect("random positions are finite")
    }

    /// vCores at the centroids of the parts of `owners` (one part id below
    /// `problem.vcores()` per box), weights zero; a part with no box puts its vCore at the
    /// domain's centre.
    pub fn at_centroids(problem: &Problem, owners: &[u32]) -> Result<VCores> {
        let n = problem.vcores();
        if owners.len() != problem.grid().len() || owners.iter().any(|&p| p as usize >= n) {
            return Err(Error::Parameter {
                name: "owners",
                value: format!("{} part ids", owners.len()),
                reason: "must give one part id below the vCore count per box",
            });
        }
        let mut sum = vec![[0.0f64; 4]; n];
        for (k, &p) in owners.iter().enumerate() {
            let c = problem.grid().centre(k);
            let s = &mut sum[p as usize];
            (0..3).for_each(|a| s[a] += c[a]);
            s[3] += 1.0;
        }
        let middle = problem.grid().extent().map(|e| e / 2.0);
        let positions =
            sum.iter().map(|s| if s[3] > 0.0 { [s[0] / s[3], s[1] / s[3], s[2] / s[3]] } else { middle }).collect();
        VCores::new(problem, positions, vec![0.0; n])
    }

    /// vCores at the centroids of a k-way recursive coordinate bisection of `problem`'s loads
    /// ([`crate::bisection::kway_rcb`]), weights zero: compact, nearly balanced cells for a
    /// method to finish, usually in fewer steps and with a lower edge cut than from random
    /// positions (docs/peers.md).
    pub fn from_bisection(problem: &Problem) -> VCores {
        let owners = crate::bisection::kway_rcb(problem.grid(), problem.loads(), problem.vcores())
            .expect("a valid problem is a valid bisection");
        VCores::at_centroids(problem, &owners).expect("one valid part id per box")
    }

    /// New vCores at the centroids of a k-way recursive coordinate bisection of `problem`'s
    /// loads (weights zero, as [`VCores::from_bisection`]), each part taking the id of the cell
    /// of these vCores it overlaps most ([`metrics::match_labels`]), so that as few boxes as
    /// possible change owner and each vCore stays where its thread's data is. A start over for
    /// cells far from balance, which a balancer would take more steps to move back
    /// ([`crate::rebalance`]).
    pub fn restarted_from_bisection(&self, problem: &Problem) -> VCores {
        self.check(problem);
        let n = self.len();
        let parts = crate::bisection::kway_rcb(problem.grid(), problem.loads(), n)
            .expect("a valid problem is a valid bisection");
        let ids =
            metrics::match_labels(self.owners(), &parts, n).expect("both give one id below the vCore count per box");
        VCores::at_centroids(problem, &ids).expect("one valid part id per box")
    }

    /// Number of vCores.
    pub fn len(&self) -> usize {
        self.positions.len()
    }
    /// Always false: a problem has at least one vCore.
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }
    /// The grid these cells cover.
    pub fn grid(&self) -> &Grid {
        &self.grid
    }
    /// vCore positions, in box units.
    pub fn positions(&self) -> &[Point] {
        &self.positions
    }
    /// vCore weights (power-cell offsets, in box² units).
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }
    /// Owner vCore of every box.
    pub fn owners(&self) -> &[u32] {
        &self.assignment.owner
    }
    /// The full assignment (owner, second best, gaps).
    pub fn assignment(&self) -> &Assignment {
        &self.assignment
    }
    /// Charge of every vCore.
    pub fn charges(&self) -> &[f64] {
        &self.charges
    }
    /// `max_i Q_i / m`.
    pub fn max_avg(&self) -> f64 {
        metrics::max_avg(&self.charges)
    }

    /// Moves vCores and changes weights, then reassigns. Positions are clamped into the domain.
    pub fn update(&mut self, problem: &Problem, f: impl FnOnce(&mut [Point], &mut [f64])) {
        f(&mut self.positions, &mut self.weights);
        for p in &mut self.positions {
            *p = self.grid.clamp(*p);
        }
        self.reassign(problem);
    }

    /// Replaces the assignment with one computed elsewhere for the current positions and
    /// weights (a balancer's trial), and recomputes charges.
    pub(crate) fn accept(&mut self, problem: &Problem, weights: &[f64], assignment: &mut Assignment) {
        self.weights.copy_from_slice(weights);
        std::mem::swap(&mut self.assignment, assignment);
        self.recharge(problem);
    }

    /// Recomputes the assignment from positions and weights, then the charges.
    pub fn reassign(&mut self, problem: &Problem) {
        self.check(problem);
        assign_on(problem.workers(), &self.grid, &self.positions, &self.weights, &mut self.assignment);
        self.recharge(problem);
    }

    /// Recomputes the charges for new loads on the same grid. Owners depend only on positions
    /// and weights, so a change of loads needs no reassignment: this is the warm start.
    pub fn recharge(&mut self, problem: &Problem) {
        self.check(problem);
        self.charges = metrics::charges(&self.assignment.owner, problem.loads(), self.len());
    }

    fn check(&self, problem: &Problem) {
        assert_eq!(*problem.grid(), self.grid, "vcores and problem must share a grid");
        assert_eq!(problem.vcores(), self.len(), "vcores and problem must have as many vCores");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_non_finite_vcores() {
        let g = Grid::new(4, 4).unwrap();
        let loads = [1.0; 16];
        let p = Problem::new(g, &loads, 2).unwrap();
        let e = VCores::new(&p, vec![[f64::NAN, 1.0, 0.5], [1.0, 1.0, 0.5]], vec![0.0; 2]).unwrap_err();
        assert!(matches!(e, Error::InvalidVCore { index: 0, what: "position", value } if value.is_nan()));
        let e = VCores::new(&p, vec![[1.0; 3]; 2], vec![0.0, f64::INFINITY]).unwrap_err();
        assert!(matches!(e, Error::InvalidVCore { index: 1, what: "weight", .. }));
        assert!(matches!(VCores::new(&p, vec![[1.0; 3]; 2], vec![0.0]), Err(Error::VCoreCount { .. })));
    }

    #[test]
    fn random_cells_are_reproducible_and_cover_the_grid() {
        let g = Grid::new(10, 10).unwrap();
        let loads = [1.0; 100];
        let p = Problem::new(g, &loads, 5).unwrap();
        let a = VCores::random(&p, 3);
        let b = VCores::random(&p, 3);
        assert_eq!(a.positions(), b.positions());
        assert_eq!(a.owners(), b.owners());
        // Every box has an owner among the 5 vCores, every vCore owns a box, and the charges
        // are the owners' loads.
        assert_eq!(a.owners().len(), 100);
        assert!(a.owners().iter().all(|&o| o < 5), "{:?}", a.owners());
        let mut counts = [0.0; 5];
        a.owners().iter().for_each(|&o| counts[o as usize] += 1.0);
        assert!(counts.iter().all(|&c| c > 0.0), "every vCore owns a box: {counts:?}");
        assert_eq!(a.charges(), counts);
        assert!(a.positions().iter().all(|p| (0.0..=10.0).contains(&p[0]) && (0.0..=10.0).contains(&p[1])));
    }

    #[test]
    fn centroid_starts_sit_in_their_parts_and_bad_owners_are_refused() {
        let g = Grid::new(8, 4).unwrap();
        let loads = vec![1.0; 32];
        let p = Problem::new(g, &loads, 2).unwrap();
        let v = VCores::at_centroids(&p, &(0..32).map(|k| u32::from(k % 8 >= 4)).collect::<Vec<_>>()).unwrap();
        assert_eq!(v.positions()[0][..2], [2.0, 2.0]);
        assert_eq!(v.positions()[1][..2], [6.0, 2.0]);
        assert!(VCores::at_centroids(&p, &[0; 31]).is_err());
        assert!(VCores::at_centroids(&p, &[2; 32]).is_err());
        // The bisection start of a uniform map is already balanced: two 4×4 halves.
        let b = VCores::from_bisection(&p);
        assert_eq!(b.max_avg(), 1.0);
    }
}
