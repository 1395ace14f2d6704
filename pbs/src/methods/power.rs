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
use crate::laplacian::CellLaplacian;
use crate::metrics;
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
    radius0: f64,
    radius: f64,
    /// Steps without a new best merit before the end game starts.
    pub patience: usize,
    stuck: bool,
    endgame: bool,
    since_best: usize,
    best: Option<((f64, f64), Vec<Point>, Vec<f64>)>,
    capacity: Vec<f64>,
    keep: Vec<usize>,
    direction: Vec<f64>,
    trial_w: Vec<f64>,
    trial: Assignment,
    lists: Vec<Vec<(f64, f64)>>,
    /// Boxes a vCore must keep (its giant); they never flow.
    pinned: Vec<bool>,
    laplacian: CellLaplacian,
}

impl Default for PowerCells {
    fn default() -> Self {
        PowerCells {
            damping: 0.5,
            relax: 0.25,
            max_halvings: 4,
            radius0: 0.0,
            radius: 0.0,
            patience: 6,
            stuck: false,
            endgame: false,
            since_best: 0,
            best: None,
            capacity: Vec::new(),
            keep: Vec::new(),
            direction: Vec::new(),
            trial_w: Vec::new(),
            trial: Assignment::default(),
            lists: Vec::new(),
            pinned: Vec::new(),
            laplacian: CellLaplacian::default(),
        }
    }
}

const NO_BOX: usize = usize::MAX;

impl Balancer for PowerCells {
    fn name(&self) -> &str {
        "pbs"
    }

    fn reset(&mut self) {
        self.radius0 = 0.0;
        self.stuck = false;
        self.endgame = false;
        self.since_best = 0;
        self.best = None;
        self.keep.clear();
    }

    fn step(&mut self, problem: &Problem, cells: &mut Cells) {
        self.capacities(problem, cells);
        self.relax_positions(problem, cells);
        if self.endgame {
            self.stuck = !self.improve(problem, cells);
            return;
        }
        self.newton_direction(problem, cells);
        let accepted = self.line_search(problem, cells, Accept::DualIncrease);
        // Grow the trust region after a full step, shrink it after a short or failed one;
        // bounded so that a run of failures cannot freeze the method.
        let factor = match accepted {
            Some(t) if t == 1.0 => 2.0,
            Some(t) => t.max(0.25),
            None => 0.25,
        };
        self.radius = (self.radius * factor).clamp(self.radius0 / 64.0, self.radius0 * 64.0);
        if accepted.is_none() {
            // No ascent along the Newton direction: take the per-cell step, whatever it gives.
            self.cell_direction(problem, cells);
            self.line_search(problem, cells, Accept::Any);
        }
        // Watchdog: the Newton phase may worsen the balance on its way (that is how it leaves
        // bad basins), but near the end the smoothed model is blind to single boxes and can
        // cycle. After `patience` steps without a new best, return to the best state and
        // finish with moves that must each improve the merit.
        let now = merit(cells.charges(), &self.capacity);
        if self.best.as_ref().is_none_or(|b| now < b.0) {
            self.best = Some((now, cells.positions().to_vec(), cells.weights().to_vec()));
            self.since_best = 0;
        } else {
            self.since_best += 1;
            if self.since_best >= self.patience {
                let (_, positions, weights) = self.best.take().expect("checked above");
                cells.update(problem, |p, w| {
                    p.copy_from_slice(&positions);
                    w.copy_from_slice(&weights);
                });
                self.endgame = true;
            }
        }
    }

    fn is_stuck(&self) -> bool {
        self.stuck
    }
}

/// What a line search asks of a trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Accept {
    /// Anything: the shortest step is kept if no longer one was.
    Any,
    /// The concave dual objective increases (the Newton phase).
    DualIncrease,
    /// The merit `(max charge, squared excess)` decreases (the end game).
    MeritDecrease,
}

impl Accept {
    /// `Any` still prefers a longer step that increases the dual; the others are strict.
    fn strict(self) -> Accept {
        match self {
            Accept::Any => Accept::DualIncrease,
            other => other,
        }
    }
}

/// Lexicographic merit: the largest charge first (that is `max_avg`), then the squared excess
/// over the capacities, so that ties at the maximum still rank progress.
fn merit(charges: &[f64], capacity: &[f64]) -> (f64, f64) {
    let max = charges.iter().copied().fold(0.0, f64::max);
    let excess = charges.iter().zip(capacity).map(|(q, c)| (q - c).max(0.0).powi(2)).sum();
    (max, excess)
}

impl PowerCells {
    /// Moves every vCore towards the centroid of its cell, keeping the centroid's power. A vCore
    /// that must keep a giant box moves onto it instead: its cell then shrinks around the giant
    /// and would lose it last.
    fn relax_positions(&mut self, problem: &Problem, cells: &mut Cells) {
        if self.relax <= 0.0 && self.keep.iter().all(|&k| k == NO_BOX) {
            return;
        }
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
        let keep = &self.keep;
        let relax = self.relax;
        cells.update(problem, |positions, weights| {
            for i in 0..n {
                let (p, beta): (Point, f64) = if keep[i] != NO_BOX {
                    (grid.centre(keep[i]), 1.0)
                } else if count[i] > 0 && relax > 0.0 {
                    (std::array::from_fn(|a| sum[i][a] / count[i] as f64), relax)
                } else {
                    continue;
                };
                let x = positions[i];
                let moved: Point = grid.clamp(std::array::from_fn(|a| x[a] + beta * (p[a] - x[a])));
                weights[i] += dist2(&p, &moved) - dist2(&p, &x);
                positions[i] = moved;
            }
            hold_giants(&grid, keep, positions, weights);
        });
    }

    /// Sets, once per run, `capacity` (target charge per vCore), `keep` (the giant box a vCore
    /// holds) and `pinned`.
    fn capacities(&mut self, problem: &Problem, cells: &Cells) {
        let n = cells.len();
        if self.keep.len() == n {
            return; // loads are fixed during a run
        }
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
        // Each giant gets a holder for the whole run: its owner if that vCore holds no heavier
        // giant, else the nearest free vCore. A role that followed ownership would hop between
        // vCores and stack several of them on one giant.
        self.keep.clear();
        self.keep.resize(n, NO_BOX);
        self.pinned.clear();
        self.pinned.resize(loads.len(), false);
        for &k in &giants {
            let o = cells.owners()[k] as usize;
            let c = problem.grid().centre(k);
            let holder = if self.keep[o] == NO_BOX {
                o
            } else {
                (0..n)
                    .filter(|&i| self.keep[i] == NO_BOX)
                    .min_by(|&a, &b| dist2(&cells.positions()[a], &c).total_cmp(&dist2(&cells.positions()[b], &c)))
                    .expect("fewer giants than vCores")
            };
            self.keep[holder] = k;
            self.pinned[k] = true;
        }
        let kept: f64 = self.keep.iter().filter(|&&k| k != NO_BOX).map(|&k| loads[k]).sum();
        let sharing = self.keep.iter().filter(|&&k| k == NO_BOX).count();
        let share = if sharing > 0 { (total - kept) / sharing as f64 } else { 0.0 };
        self.capacity.clear();
        self.capacity.extend(self.keep.iter().map(|&k| if k == NO_BOX { share } else { loads[k] }));
    }

    /// Damped-Newton direction: solves `L Δw = c − Q` on the cell graph (see
    /// [`crate::laplacian`]). Cells with no loaded boundary get the stiffness implied by the
    /// distance to their nearest capturable box, so they still move.
    fn newton_direction(&mut self, problem: &Problem, cells: &Cells) {
        let n = cells.len();
        self.laplacian.build(cells.positions(), problem.loads(), cells.assignment(), &self.pinned);
        let mut rhs: Vec<f64> = self.capacity.iter().zip(cells.charges()).map(|(c, q)| c - q).collect();
        // A holder's weight is bounded below by its giant (see `hold_giants`): lowering it is
        // undone by the projection, so the Newton system keeps it fixed (a Dirichlet condition)
        // and lets the neighbours take its extra boxes.
        for (i, &k) in self.keep.iter().enumerate() {
            if k != NO_BOX && rhs[i] < 0.0 {
                rhs[i] = 0.0;
            }
        }
        let mean_degree = self.laplacian.degree.iter().sum::<f64>() / n as f64;
        let reg: Vec<f64> = (0..n)
            .map(|i| {
                if self.keep[i] != NO_BOX && self.capacity[i] < cells.charges()[i] {
                    1e6 * (self.laplacian.degree[i] + mean_degree).max(f64::MIN_POSITIVE)
                } else if self.laplacian.degree[i] > 0.0 {
                    1e-6 * mean_degree.max(f64::MIN_POSITIVE)
                } else if rhs[i] > 0.0 {
                    let d = capture_distance(problem, cells, i, &self.pinned);
                    if d > 0.0 { rhs[i] / d } else { 1.0 }
                } else {
                    1.0
                }
            })
            .collect();
        self.direction = self.laplacian.solve(&reg, &rhs, 1e-6, 4 * n + 20);
        // Trust region: far from balance the smoothed Hessian underestimates how much load a
        // boundary sweeps through, and an uncapped step overshoots by more than the line search
        // can halve. The radius starts at `spacing²` (a boundary moves about half a cell),
        // doubles after every full step and shrinks to what the line search accepted.
        if self.radius0 == 0.0 {
            let grid = problem.grid();
            let dim = if grid.nz == 1 { 2.0 } else { 3.0 };
            self.radius0 = (grid.len() as f64 / n as f64).powf(2.0 / dim);
            self.radius = self.radius0;
        }
        let largest = self.direction.iter().fold(0.0f64, |m, d| m.max(d.abs()));
        if largest > self.radius {
            let scale = self.radius / largest;
            self.direction.iter_mut().for_each(|d| *d *= scale);
        }
    }

    /// Per-cell weight shift that sheds (or captures) exactly the cell's excess (deficit).
    fn cell_direction(&mut self, problem: &Problem, cells: &Cells) {
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
            if excess[s] < 0.0 && !self.pinned[k] {
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
                capture_distance(problem, cells, i, &self.pinned)
            } else {
                threshold_for(list, want)
            };
            let sign = if excess[i] > 0.0 { -1.0 } else { 1.0 };
            self.direction[i] = sign * self.damping * shift;
        }
    }

    /// Halves the step, from the full step, until the trial passes `accept`, and keeps it.
    /// Returns the step length kept, or `None` (state unchanged) after `max_halvings`.
    fn line_search(&mut self, problem: &Problem, cells: &mut Cells, accept: Accept) -> Option<f64> {
        if self.direction.iter().all(|&d| d == 0.0 || !d.is_finite()) {
            return None;
        }
        let g0 = dual(&self.capacity, cells.weights(), problem.loads(), &cells.assignment().score);
        let m0 = merit(cells.charges(), &self.capacity);
        let mut t = 1.0;
        for attempt in 0..=self.max_halvings {
            self.trial_w.clear();
            self.trial_w.extend(cells.weights().iter().zip(&self.direction).map(|(w, d)| w + t * d));
            let last = attempt == self.max_halvings;
            if self.try_trial(problem, cells, if last { accept } else { accept.strict() }, g0, m0) {
                return Some(t);
            }
            t *= 0.5;
        }
        None
    }

    /// Assigns with `trial_w` (after securing giants) and keeps the result if it passes.
    fn try_trial(&mut self, problem: &Problem, cells: &mut Cells, accept: Accept, g0: f64, m0: (f64, f64)) -> bool {
        hold_giants(problem.grid(), &self.keep, cells.positions(), &mut self.trial_w);
        assign(problem.grid(), cells.positions(), &self.trial_w, &mut self.trial);
        let passes = match accept {
            Accept::Any => true,
            Accept::DualIncrease => {
                dual(&self.capacity, &self.trial_w, problem.loads(), &self.trial.score) > g0 + 1e-12 * g0.abs()
            }
            Accept::MeritDecrease => {
                let q = metrics::charges(&self.trial.owner, problem.loads(), cells.len());
                merit(&q, &self.capacity) < m0
            }
        };
        if passes {
            let trial_w = std::mem::take(&mut self.trial_w);
            cells.accept(problem, &trial_w, &mut self.trial);
            self.trial_w = trial_w;
        }
        passes
    }

    /// One end-game move that improves the merit: a Newton step, else the per-cell step, else
    /// a greedy move on the most loaded cell. Returns false if none improves.
    fn improve(&mut self, problem: &Problem, cells: &mut Cells) -> bool {
        let start = merit(cells.charges(), &self.capacity);
        self.newton_direction(problem, cells);
        if self.line_search(problem, cells, Accept::MeritDecrease).is_some() {
            return true;
        }
        self.cell_direction(problem, cells);
        if self.line_search(problem, cells, Accept::MeritDecrease).is_some() {
            return true;
        }
        self.shed_from_max(problem, cells, start)
    }

    /// Greedy end-game move on the most loaded cell: flip its cheapest boundary box (smallest
    /// gap) whose second-best vCore can take it, either by lowering the cell's weight or by
    /// raising the neighbour's; kept only if the merit improves.
    fn shed_from_max(&mut self, problem: &Problem, cells: &mut Cells, m0: (f64, f64)) -> bool {
        let q = cells.charges();
        let Some(i) = (0..q.len()).max_by(|&a, &b| q[a].total_cmp(&q[b]).then(b.cmp(&a))) else {
            return false;
        };
        let (a, loads) = (cells.assignment(), problem.loads());
        let mut moves: Vec<(f64, usize)> = (0..loads.len())
            .filter(|&k| a.owner[k] as usize == i && a.second[k] != NONE && loads[k] > 0.0 && !self.pinned[k])
            .filter(|&k| q[a.second[k] as usize] + loads[k] < q[i])
            .map(|k| (a.gap[k], a.second[k] as usize))
            .collect();
        moves.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
        moves.dedup();
        let g0 = f64::NAN; // unused by MeritDecrease
        for &(gap, s) in moves.iter().take(4) {
            let shift = gap + 1e-9 * (1.0 + gap.abs());
            for (v, sign) in [(i, -1.0), (s, 1.0)] {
                self.trial_w.clear();
                self.trial_w.extend_from_slice(cells.weights());
                self.trial_w[v] += sign * shift;
                if self.try_trial(problem, cells, Accept::MeritDecrease, g0, m0) {
                    return true;
                }
            }
        }
        false
    }
}

/// Raises the weight of each giant's holder just enough that it owns its giant (its power at
/// the giant's centre beats every other vCore's): a projection onto linear constraints in `w`,
/// applied to every trial so that no step hands a giant to a neighbour.
fn hold_giants(grid: &crate::grid::Grid, keep: &[usize], positions: &[Point], weights: &mut [f64]) {
    for (i, &k) in keep.iter().enumerate() {
        if k == NO_BOX {
            continue;
        }
        let c = grid.centre(k);
        let rival = (0..positions.len())
            .filter(|&j| j != i)
            .map(|j| dist2(&c, &positions[j]) - weights[j])
            .fold(f64::INFINITY, f64::min);
        let mine = dist2(&c, &positions[i]) - weights[i];
        if mine >= rival {
            weights[i] += mine - rival + 1e-9 * (1.0 + rival.abs());
        }
    }
}

/// The dual objective `Σ w_i c_i + Σ_k q_k score_k` (see the module docs).
fn dual(capacity: &[f64], weights: &[f64], loads: &[f64], score: &[f64]) -> f64 {
    let a: f64 = capacity.iter().zip(weights).map(|(c, w)| c * w).sum();
    let b: f64 = loads.iter().zip(score).map(|(q, s)| q * s).sum();
    a + b
}

/// Smallest gap threshold whose boxes carry about `want` load: stops at the box that crosses
/// `want`, or just before it when that lands closer. Reorders `list`; expected O(len), a
/// weighted quickselect, because sorting every cell's boundary each step cost more than the
/// assignment itself.
fn threshold_for(list: &mut [(f64, f64)], want: f64) -> f64 {
    let just_past = |g: f64| g + 1e-9 * (1.0 + g.abs());
    let by_gap = |x: &(f64, f64), y: &(f64, f64)| x.0.total_cmp(&y.0).then(x.1.total_cmp(&y.1));
    // Invariant: every element of list[..lo] sorts before list[lo..hi], their loads sum to
    // `acc < want`, and the largest of their gaps is `below`.
    let (mut lo, mut hi, mut acc, mut below) = (0, list.len(), 0.0, f64::NAN);
    while hi - lo > 16 {
        let mid = lo + (hi - lo) / 2;
        list[lo..hi].select_nth_unstable_by(mid - lo, by_gap);
        let (left_sum, left_max) = list[lo..mid].iter().fold((0.0, f64::NEG_INFINITY), |(s, m), x| (s + x.1, m.max(x.0)));
        if acc + left_sum >= want {
            hi = mid;
        } else {
            acc += left_sum;
            below = if below.is_nan() { left_max } else { below.max(left_max) };
            lo = mid;
        }
    }
    list[lo..].sort_unstable_by(by_gap);
    for idx in lo..list.len() {
        let (gap, q) = list[idx];
        let before = acc;
        acc += q;
        if acc >= want {
            let previous = if idx > lo { list[idx - 1].0 } else { below };
            if acc - want <= want - before || previous.is_nan() {
                return just_past(gap);
            }
            return 0.5 * (previous + gap);
        }
    }
    just_past(list.last().map_or(0.0, |x| x.0))
}

/// Weight increase that lets vCore `i` capture its nearest loaded box that is not pinned (used
/// when it is second best for no loaded box, e.g. an empty cell far from the load).
fn capture_distance(problem: &Problem, cells: &Cells, i: usize, pinned: &[bool]) -> f64 {
    let (grid, loads, a) = (problem.grid(), problem.loads(), cells.assignment());
    let (x, w) = (cells.positions()[i], cells.weights()[i]);
    let mut best = f64::INFINITY;
    for k in 0..grid.len() {
        if loads[k] > 0.0 && !pinned[k] && a.owner[k] as usize != i {
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
        let list = [(3.0, 5.0), (1.0, 1.0), (2.0, 1.0)];
        let t = |want| threshold_for(&mut list.clone(), want);
        assert!((t(2.0) - 2.0).abs() < 1e-6); // two boxes, exactly
        assert_eq!(t(2.5), 2.5); // 2 is closer than 7: stop before box 3
        assert!(t(6.0) > 3.0); // 7 is closer than 2
        assert!(t(100.0) > 3.0); // everything
        assert!(t(0.4) > 1.0); // the first box even if it overshoots
    }

    /// The quickselect must agree with a plain sort-and-scan on long lists.
    #[test]
    fn threshold_matches_the_sorted_scan() {
        let mut rng = crate::rng::SplitMix64::new(9);
        for n in [1, 5, 17, 100, 1000] {
            let list: Vec<(f64, f64)> = (0..n).map(|_| ((rng.next_f64() * 50.0).floor(), rng.next_f64())).collect();
            let total: f64 = list.iter().map(|x| x.1).sum();
            for frac in [0.01, 0.3, 0.5, 0.99, 1.5] {
                let want = frac * total;
                let mut sorted = list.clone();
                sorted.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.total_cmp(&y.1)));
                let mut acc = 0.0;
                let mut expected = sorted.last().unwrap().0 + 1e-9 * (1.0 + sorted.last().unwrap().0);
                for (i, &(g, q)) in sorted.iter().enumerate() {
                    let before = acc;
                    acc += q;
                    if acc >= want {
                        expected = if acc - want <= want - before || i == 0 { g + 1e-9 * (1.0 + g) } else { 0.5 * (sorted[i - 1].0 + g) };
                        break;
                    }
                }
                assert_eq!(threshold_for(&mut list.clone(), want), expected, "n={n} frac={frac}");
            }
        }
    }
}
