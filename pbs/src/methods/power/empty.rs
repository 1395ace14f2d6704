//! Cells with no box. A run stops once the largest charge is within its tolerance of the lower
//! bound, and where a giant box sets that bound the other cells have room to spare: a cell can
//! end with no box (one a random start placed away from every box, or one squeezed out on the
//! way), which leaves a thread, a rank or a part with nothing of its own. At the end of a run
//! each such cell is given a box, by one weight increase that captures its nearest free loaded
//! box, or else by moving its vCore onto one of the cheapest boundary boxes of the most loaded
//! cells, weighted to just win it. A trial is kept only if it leaves fewer cells empty, no more
//! parts in pieces, and no charge above the largest before.

use super::cell_step::Capturable;
use super::{hold_giants, PowerCells};
use crate::assign::assign_on;
use crate::grid::Point;
use crate::metrics;
use crate::problem::Problem;
use crate::vcores::VCores;

/// Most trials in one run's end (each is an assignment).
const MAX_TRIALS: usize = 32;
/// Boundary boxes tried per empty cell when its own capture does not do.
const MOVES_PER_CELL: usize = 8;

impl PowerCells {
    /// Gives the cells with no box one where that keeps the balance (see the module
    /// documentation); one pass over the owners when none is empty.
    pub(super) fn fill_empty_cells(&mut self, problem: &Problem, vcores: &mut VCores) {
        let n = vcores.len();
        let mut empty = metrics::empty_parts(vcores.owners(), n);
        if empty.is_empty() {
            return;
        }
        // A run that took no step has not looked for giants yet.
        self.capacities(problem, vcores);
        let mut trials = 0;
        while !empty.is_empty() && trials < MAX_TRIALS {
            let Some((positions, weights, after)) = self.first_filling(problem, vcores, &empty, &mut trials) else {
                return;
            };
            vcores.place(problem, &positions, &weights);
            empty = after;
        }
    }

    /// The first trial that fills one of the `empty` cells within the rules: its vCores, weights
    /// and the cells it leaves empty.
    fn first_filling(
        &mut self,
        problem: &Problem,
        vcores: &VCores,
        empty: &[usize],
        trials: &mut usize,
    ) -> Option<(Vec<Point>, Vec<f64>, Vec<usize>)> {
        let (grid, loads, n) = (*problem.grid(), problem.loads(), vcores.len());
        let charges = vcores.charges();
        let largest = charges.iter().copied().fold(0.0, f64::max);
        let broken = metrics::disconnected_parts(&grid, vcores.owners(), n);
        let a = vcores.assignment();
        // The cheapest boundary boxes of the most loaded cells, for the moves. (Every box has a
        // second vCore: a single vCore owns every box and leaves no cell empty.)
        let mut spots: Vec<usize> = (0..grid.len()).filter(|&k| !self.run.held[k] && loads[k] > 0.0).collect();
        let cheapest_of_most_loaded = |&x: &usize, &y: &usize| {
            let (ox, oy) = (a.owner[x] as usize, a.owner[y] as usize);
            charges[oy].total_cmp(&charges[ox]).then(ox.cmp(&oy)).then(a.gap[x].total_cmp(&a.gap[y])).then(x.cmp(&y))
        };
        if spots.len() > MOVES_PER_CELL {
            spots.select_nth_unstable_by(MOVES_PER_CELL - 1, cheapest_of_most_loaded);
            spots.truncate(MOVES_PER_CELL);
        }
        spots.sort_unstable_by(cheapest_of_most_loaded);
        let capturable = Capturable::new(problem, &self.run.held);
        for &e in empty {
            let capture = capturable.distance(problem, vcores, e);
            let own = (capture > 0.0).then(|| (vcores.positions()[e], vcores.weights()[e] + capture));
            // Sitting on box k and weighted just past its owner's power there, it wins k.
            let moves = spots.iter().map(|&k| (grid.centre(k), -a.score[k] + 1e-9 * (1.0 + a.score[k].abs())));
            for (at, weight) in own.into_iter().chain(moves) {
                if *trials == MAX_TRIALS {
                    return None;
                }
                *trials += 1;
                let mut positions = vcores.positions().to_vec();
                positions[e] = at;
                self.scratch.trial_w.clear();
                self.scratch.trial_w.extend_from_slice(vcores.weights());
                self.scratch.trial_w[e] = weight;
                hold_giants(&grid, &self.run.giant_of, &positions, &mut self.scratch.trial_w);
                assign_on(problem.workers(), &grid, &positions, &self.scratch.trial_w, &mut self.scratch.trial);
                let owners = &self.scratch.trial.owner;
                let after = metrics::empty_parts(owners, n);
                if after.len() < empty.len()
                    && metrics::charges(owners, loads, n).iter().all(|&q| q <= largest)
                    && metrics::disconnected_parts(&grid, owners, n) <= broken
                {
                    return Some((positions, self.scratch.trial_w.clone(), after));
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::super::cell_step::Capturable;
    use super::super::{hold_giants, PowerCells};
    use crate::assign::{assign_brute, Assignment};
    use crate::rng::SplitMix64;
    use crate::{balance, methods, metrics, Grid, Problem, StopRule, VCores};

    /// A giant box sets the bound, the start is within the tolerance of it, and one vCore sits
    /// on another (ties go to the lower index): the run takes no step, and its end gives the
    /// shadowed cell a box without raising the largest charge. Its own capture, weighted where
    /// it sits, would take every box of the vCore under it and empty that cell: it moves onto
    /// the cheapest boundary box of the most loaded cell, the giant's, at box 2, weighted just
    /// past that cell's power there.
    #[test]
    fn a_cell_with_no_box_gets_one_when_a_giant_sets_the_bound() {
        let grid = Grid::new(10, 10).unwrap();
        let mut loads = vec![1.0; 100];
        loads[0] = 200.0;
        let problem = Problem::new(grid, &loads, 4).unwrap();
        let sites = vec![[0.5, 0.5, 0.5], [3.0, 3.0, 0.5], [7.0, 7.0, 0.5], [7.0, 7.0, 0.5]];
        let mut vcores = VCores::new(&problem, sites, vec![0.0; 4]).unwrap();
        assert!(!vcores.owners().contains(&3));
        let before = vcores.max_avg();
        // Box 2's owner's power there: the weight that wins it.
        let score = vcores.assignment().score[2];
        let mut method = methods::by_name(methods::DEFAULT).unwrap();
        let out = balance(method.as_mut(), &problem, &mut vcores, StopRule::default(), |_| {});
        assert_eq!(out.steps, 0, "{out:?}");
        assert!(vcores.owners().contains(&3), "{:?}", vcores.charges());
        assert_eq!(vcores.positions()[3], grid.centre(2), "moved onto the giant cell's boundary");
        assert_eq!(vcores.owners()[2], 3);
        let over = vcores.weights()[3] + score;
        assert!(over > 0.0 && over <= 1e-8 * (1.0 + score.abs()), "weighted just past {}: {over}", -score);
        assert!(out.converged && out.max_avg <= before, "{out:?}");
    }

    /// What `fill_empty_cells` documents, the slow way, from `v` with `p`'s giants: while a
    /// cell is empty, the eight boundary boxes (loaded, not held) of the most loaded cells (by
    /// charge, then id), cheapest first; for each empty cell in turn, its own capture (if it has
    /// one), then a move onto each of those boxes weighted just past its owner's power there;
    /// the first trial (holders projected onto their giants, assigned box by box) that leaves
    /// fewer cells empty, no charge above the largest and no more parts in pieces is kept; at
    /// most `limit` trials in all (32 in the code). The state it ends in and the trials made.
    fn fill_by_hand(p: &PowerCells, problem: &Problem, v: &VCores, limit: usize) -> (VCores, usize) {
        let (grid, loads, n) = (*problem.grid(), problem.loads(), v.len());
        let (mut now, mut trials) = (v.clone(), 0);
        let mut trial = Assignment::default();
        'fill: loop {
            let empty = metrics::empty_parts(now.owners(), n);
            if empty.is_empty() {
                break;
            }
            let (a, q) = (now.assignment(), now.charges());
            let largest = q.iter().copied().fold(0.0, f64::max);
            let broken = metrics::disconnected_parts(&grid, now.owners(), n);
            let mut spots: Vec<usize> = (0..grid.len()).filter(|&k| !p.run.held[k] && loads[k] > 0.0).collect();
            // Charges and gaps are never negative: their bits sort as the numbers do.
            let owner = |k: usize| a.owner[k] as usize;
            spots.sort_by_key(|&k| (std::cmp::Reverse(q[owner(k)].to_bits()), owner(k), a.gap[k].to_bits(), k));
            spots.truncate(8);
            for &e in &empty {
                let capture = Capturable::new(problem, &p.run.held).distance(problem, &now, e);
                let mut tries = Vec::new();
                if capture > 0.0 {
                    tries.push((now.positions()[e], now.weights()[e] + capture));
                }
                for &k in &spots {
                    tries.push((grid.centre(k), -a.score[k] + 1e-9 * (1.0 + a.score[k].abs())));
                }
                for (at, weight) in tries {
                    if trials == limit {
                        break 'fill;
                    }
                    trials += 1;
                    let (mut positions, mut weights) = (now.positions().to_vec(), now.weights().to_vec());
                    (positions[e], weights[e]) = (at, weight);
                    hold_giants(&grid, &p.run.giant_of, &positions, &mut weights);
                    assign_brute(&grid, &positions, &weights, &mut trial);
                    let charges = metrics::charges(&trial.owner, loads, n);
                    if metrics::empty_parts(&trial.owner, n).len() < empty.len()
                        && charges.iter().all(|&c| c <= largest)
                        && metrics::disconnected_parts(&grid, &trial.owner, n) <= broken
                    {
                        now = VCores::new(problem, positions, weights).unwrap();
                        continue 'fill;
                    }
                }
            }
            break;
        }
        (now, trials)
    }

    /// The filling of empty cells ends where its documentation says, trial for trial, on 3,000
    /// random small states with cells left empty by their weights (whole loads; a heavy box in
    /// some, so that giants are held).
    #[test]
    fn empty_cells_are_filled_by_the_first_trial_within_the_rules() {
        let mut rng = SplitMix64::new(7);
        // States with a cell empty, filled whole, filled in part, by a move, out of trials where
        // one more would fill a cell, with giants.
        let mut seen = [0; 6];
        for case in 0..3000 {
            let grid = Grid::new(5 + rng.below(6), 4 + rng.below(5)).unwrap();
            let mut loads: Vec<f64> = (0..grid.len()).map(|_| rng.below(4) as f64).collect();
            if case % 3 == 0 {
                loads[rng.below(grid.len())] = 15.0 + rng.below(20) as f64;
            }
            if loads.iter().all(|&l| l == 0.0) {
                continue;
            }
            // Every other state crowded: more vCores than can all be given a box in 32 trials.
            let n = if case % 2 == 0 { 3 + rng.below(7) } else { 8 + rng.below(10) };
            let problem = Problem::new(grid, &loads, n).unwrap();
            let weights = (0..n).map(|_| 12.0 * rng.next_f64() - 6.0).collect();
            let mut v = VCores::new(&problem, VCores::random(&problem, case).positions().to_vec(), weights).unwrap();
            let before = metrics::empty_parts(v.owners(), n).len();
            if before == 0 {
                continue;
            }
            let mut p = PowerCells::default();
            p.capacities(&problem, &v);
            let (expected, trials) = fill_by_hand(&p, &problem, &v, 32);
            let (one_more, ..) = fill_by_hand(&p, &problem, &v, 33);
            let positions = v.positions().to_vec();
            p.fill_empty_cells(&problem, &mut v);
            assert_eq!(v.positions(), expected.positions(), "case {case}");
            assert_eq!(v.weights(), expected.weights(), "case {case}");
            assert_eq!(v.owners(), expected.owners(), "case {case}");
            let after = metrics::empty_parts(v.owners(), n).len();
            let moved = (0..n).any(|i| v.positions()[i] != positions[i]);
            let filled = [
                true,
                after == 0,
                after > 0 && after < before,
                moved,
                trials == 32 && one_more.owners() != v.owners(),
                p.run.held.contains(&true),
            ];
            for (count, yes) in seen.iter_mut().zip(filled) {
                *count += usize::from(yes);
            }
        }
        assert!(seen.iter().all(|&x| x > 0), "{seen:?}");
    }
}
