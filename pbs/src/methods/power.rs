//! `pbs`, the default method: vCores keep the paper's picture (points in the domain, cells
//! around them), but each carries a weight and owns a *power* cell
//! `{c : |c − x_i|² − w_i minimal}`. Plain Voronoi cells cannot represent every balanced split
//! (a thin line of load, a disc); power cells can, because a weight moves a cell's boundary
//! without moving its vCore.
//!
//! # Why it converges
//! For capacities `c_i` (the charge each vCore should get, `Σ c_i = total`) the function
//!
//! ```text
//! g(w) = Σ_i w_i c_i + Σ_k q_k · min_i (|c_k − x_i|² − w_i)
//! ```
//!
//! is concave in `w` (a sum of minima of affine functions) and its supergradient is
//! `c_i − Q_i(w)`: it is the dual of the semi-discrete transport of the loads onto the vCores,
//! and its maximum is the balanced power diagram. A fixed-step gradient ascent stalls (the
//! right step differs by orders of magnitude between a uniform map and a concentrated one),
//! so each step is built from the assignment's own geometry and then line-searched:
//!
//! 1. **Direction.** The assignment knows, for every box, its second-best vCore and the power
//!    gap to it: lowering `w_i` by more than a box's gap hands that box to its second-best
//!    vCore. An over-loaded cell sorts its boxes by gap and finds the shift that sheds just its
//!    excess; an under-loaded cell does the same with the boxes for which it is second best.
//!    This is a Newton step on the diagonal of the (piecewise-constant) Hessian, exact for one
//!    cell alone; all cells move at once, so it is damped by half.
//! 2. **Line search.** The step is halved until `g` increases (at most four times), starting
//!    from twice the last accepted length.
//! 3. **Compactness.** Before each weight step the vCores move a fraction of the way to the
//!    geometric centroid of their cells (Lloyd relaxation), and each weight is corrected so the
//!    power of that centroid is unchanged: cells stay round and the balance barely moves.
//!
//! Capacities are `m` for everybody unless single boxes outweigh the mean: then a water-filling
//! pass finds the boxes that must sit alone ("giants"), their owners' capacity is the giant's
//! load and the rest share the remainder, so the method converges to the lower bound
//! `max(1, q_max/m)` instead of chasing an impossible `m`.

use crate::assign::{assign, Assignment, NONE};
use crate::balancer::Balancer;
use crate::cells::Cells;
use crate::grid::{dist2, Point};
use crate::problem::Problem;

/// The power-cell balancer (method `pbs`).
#[derive(Debug, Clone)]
pub struct PowerCells {
    /// Fraction of the per-cell Newton shift applied before the line search (0, 1].
    pub damping: f64,
    /// Fraction of the way to its cell's centroid a vCore moves per step (0 disables).
    pub relax: f64,
    /// Times the step may be halved before it is accepted anyway.
    pub max_halvings: usize,
    last_t: f64,
    capacity: Vec<f64>,
    keep: Vec<usize>,
    direction: Vec<f64>,
    trial_w: Vec<f64>,
    trial: Assignment,
    lists: Vec<Vec<(f64, f64)>>,
    giant: Vec<bool>,
}

impl Default for PowerCells {
    fn default() -> Self {
        PowerCells {
            damping: 0.5,
            relax: 0.25,
            max_halvings: 4,
            last_t: 1.0,
            capacity: Vec::new(),
            keep: Vec::new(),
            direction: Vec::new(),
            trial_w: Vec::new(),
            trial: Assignment::default(),
            lists: Vec::new(),
            giant: Vec::new(),
        }
    }
}

const NO_BOX: usize = usize::MAX;

impl Balancer for PowerCells {
    fn name(&self) -> &str {
        "pbs"
    }

    fn reset(&mut self) {
        self.last_t = 1.0;
    }

    fn step(&mut self, problem: &Problem, cells: &mut Cells) {
        if self.relax > 0.0 {
            self.relax_positions(problem, cells);
        }
        self.capacities(problem, cells);
        self.newton_direction(problem, cells);
        self.line_search(problem, cells);
    }
}

impl PowerCells {
    /// Moves every vCore towards the centroid of its cell, keeping the centroid's power.
    fn relax_positions(&mut self, problem: &Problem, cells: &mut Cells) {
        let n = cells.len();
        let grid = *problem.grid();
        let mut sum = vec![[0.0; 3]; n];
        let mut count = vec![0usize; n];
        for (k, &o) in cells.owners().iter().enumerate() {
            let c = grid.centre(k);
            for a in 0..3 {
                sum[o as usize][a] += c[a];
            }
            count[o as usize] += 1;
        }
        let beta = self.relax;
        cells.update(problem, |positions, weights| {
            for i in 0..n {
                if count[i] == 0 {
                    continue;
                }
                let p: Point = std::array::from_fn(|a| sum[i][a] / count[i] as f64);
                let x = positions[i];
                let moved: Point = grid.clamp(std::array::from_fn(|a| x[a] + beta * (p[a] - x[a])));
                weights[i] += dist2(&p, &moved) - dist2(&p, &x);
                positions[i] = moved;
            }
        });
    }

    /// Sets `capacity` (target charge per vCore) and `keep` (the giant box a vCore must keep).
    fn capacities(&mut self, problem: &Problem, cells: &Cells) {
        let n = cells.len();
        let loads = problem.loads();
        let total = problem.total();
        // Water-filling: the heaviest boxes that exceed the share of what remains sit alone.
        let mut threshold = problem.mean();
        let mut giants: Vec<usize>;
        let mut level;
        let mut rounds = 0;
        loop {
            giants = (0..loads.len()).filter(|&k| loads[k] > threshold).collect();
            giants.sort_by(|&a, &b| loads[b].total_cmp(&loads[a]).then(a.cmp(&b)));
            let mut rest = total;
            let mut r = 0;
            while r < giants.len() && r + 1 < n && loads[giants[r]] > rest / (n - r) as f64 {
                rest -= loads[giants[r]];
                r += 1;
            }
            giants.truncate(r);
            level = rest / (n - r) as f64;
            rounds += 1;
            if level >= threshold || rounds == 8 {
                break;
            }
            threshold = level;
        }
        self.keep.clear();
        self.keep.resize(n, NO_BOX);
        self.giant.clear();
        self.giant.resize(loads.len(), false);
        for &k in &giants {
            self.giant[k] = true;
            let o = cells.owners()[k] as usize;
            if self.keep[o] == NO_BOX {
                self.keep[o] = k; // giants are sorted heaviest first
            }
        }
        let kept: f64 = self.keep.iter().filter(|&&k| k != NO_BOX).map(|&k| loads[k]).sum();
        let sharing = self.keep.iter().filter(|&&k| k == NO_BOX).count();
        let share = if sharing > 0 { (total - kept) / sharing as f64 } else { 0.0 };
        self.capacity.clear();
        self.capacity.extend(self.keep.iter().map(|&k| if k == NO_BOX { share } else { loads[k] }));
    }

    /// Per-cell weight shift that sheds (or captures) exactly the cell's excess (deficit).
    fn newton_direction(&mut self, problem: &Problem, cells: &Cells) {
        let n = cells.len();
        let loads = problem.loads();
        let a = cells.assignment();
        let excess: Vec<f64> = cells.charges().iter().zip(&self.capacity).map(|(q, c)| q - c).collect();
        self.lists.resize_with(n, Vec::new);
        for l in &mut self.lists {
            l.clear();
        }
        for (k, &q) in loads.iter().enumerate() {
            if q == 0.0 || a.second[k] == NONE {
                continue;
            }
            let (o, s, gap) = (a.owner[k] as usize, a.second[k] as usize, a.gap[k]);
            if excess[o] > 0.0 && self.keep[o] != k {
                self.lists[o].push((gap, q));
            }
            if excess[s] < 0.0 && !self.giant[k] {
                self.lists[s].push((gap, q));
            }
        }
        self.direction.clear();
        self.direction.resize(n, 0.0);
        for i in 0..n {
            let want = excess[i].abs();
            if want == 0.0 {
                continue;
            }
            let list = &mut self.lists[i];
            let shift = if list.is_empty() {
                if excess[i] > 0.0 {
                    continue; // nothing it may shed: it holds only its giant box
                }
                capture_distance(problem, cells, i, &self.giant)
            } else {
                list.sort_unstable_by(|x, y| x.0.total_cmp(&y.0).then(x.1.total_cmp(&y.1)));
                threshold_for(list, want)
            };
            let sign = if excess[i] > 0.0 { -1.0 } else { 1.0 };
            self.direction[i] = sign * self.damping * shift;
        }
    }

    /// Halves the step until the dual objective increases, then keeps it.
    fn line_search(&mut self, problem: &Problem, cells: &mut Cells) {
        if self.direction.iter().all(|&d| d == 0.0) {
            return;
        }
        let g0 = dual(&self.capacity, cells.weights(), problem.loads(), &cells.assignment().score);
        let mut t = (2.0 * self.last_t).min(1.0);
        for attempt in 0..=self.max_halvings {
            self.trial_w.clear();
            self.trial_w.extend(cells.weights().iter().zip(&self.direction).map(|(w, d)| w + t * d));
            assign(problem.grid(), cells.positions(), &self.trial_w, &mut self.trial);
            let g1 = dual(&self.capacity, &self.trial_w, problem.loads(), &self.trial.score);
            if g1 > g0 + 1e-12 * g0.abs() || attempt == self.max_halvings {
                break;
            }
            t *= 0.5;
        }
        self.last_t = t;
        let trial_w = std::mem::take(&mut self.trial_w);
        cells.accept(problem, &trial_w, &mut self.trial);
        self.trial_w = trial_w;
    }
}

/// The dual objective `Σ w_i c_i + Σ_k q_k score_k` (see the module docs).
fn dual(capacity: &[f64], weights: &[f64], loads: &[f64], score: &[f64]) -> f64 {
    let a: f64 = capacity.iter().zip(weights).map(|(c, w)| c * w).sum();
    let b: f64 = loads.iter().zip(score).map(|(q, s)| q * s).sum();
    a + b
}

/// Smallest gap threshold whose boxes carry about `want` load (`list` sorted by gap): stops at
/// the box that crosses `want`, or just before it when that lands closer.
fn threshold_for(list: &[(f64, f64)], want: f64) -> f64 {
    let just_past = |g: f64| g + 1e-9 * (1.0 + g.abs());
    let mut acc = 0.0;
    for (idx, &(gap, q)) in list.iter().enumerate() {
        let before = acc;
        acc += q;
        if acc >= want {
            if acc - want <= want - before || idx == 0 {
                return just_past(gap);
            }
            return 0.5 * (list[idx - 1].0 + gap);
        }
    }
    just_past(list.last().map_or(0.0, |x| x.0))
}

/// Weight increase that lets vCore `i` capture its nearest loaded, non-giant box (used when
/// it is second best for no loaded box, e.g. an empty cell far from the load).
fn capture_distance(problem: &Problem, cells: &Cells, i: usize, giant: &[bool]) -> f64 {
    let (grid, loads, a) = (problem.grid(), problem.loads(), cells.assignment());
    let (x, w) = (cells.positions()[i], cells.weights()[i]);
    let mut best = f64::INFINITY;
    for k in 0..grid.len() {
        if loads[k] > 0.0 && !giant[k] && a.owner[k] as usize != i {
            best = best.min(dist2(&grid.centre(k), &x) - w - a.score[k]);
        }
    }
    if best.is_finite() {
        best.max(0.0) + 1e-9 * (1.0 + best.abs())
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threshold_picks_the_closest_cumulative_load() {
        let list = [(1.0, 1.0), (2.0, 1.0), (3.0, 5.0)];
        assert!((threshold_for(&list, 2.0) - 2.0).abs() < 1e-6); // two boxes, exactly
        assert_eq!(threshold_for(&list, 2.5), 2.5); // 2 is closer than 7: stop before box 3
        assert!(threshold_for(&list, 6.0) > 3.0); // 7 is closer than 2
        assert!(threshold_for(&list, 100.0) > 3.0); // everything
    }
}
