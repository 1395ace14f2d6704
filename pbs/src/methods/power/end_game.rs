//! The end game of the power-cell method: moves that must each lower the merit (a Newton step,
//! the per-cell step, then one boundary box of the most loaded cell flipped), and the best
//! state seen, which a run returns to.

use super::newton::{merit, Accept};
use super::{PowerCells, NO_BOX};
use crate::assign::NONE;
use crate::problem::Problem;
use crate::vcores::VCores;

impl PowerCells {
    /// Keeps the state in `vcores` as the run's best if its merit is the lowest yet, else
    /// counts one more step since the best; returns whether it was kept.
    pub(super) fn track_best(&mut self, vcores: &VCores) -> bool {
        let now = merit(vcores.charges(), &self.run.capacity);
        let better = self.run.best.as_ref().is_none_or(|b| now < b.0);
        if better {
            self.run.best = Some((now, vcores.positions().to_vec(), vcores.weights().to_vec()));
            self.run.since_best = 0;
        } else {
            self.run.since_best += 1;
        }
        better
    }

    /// One end-game move that improves the merit: a Newton step, else the per-cell step, else
    /// a greedy move on the most loaded cell. Returns false if none improves.
    pub(super) fn improve(&mut self, problem: &Problem, vcores: &mut VCores) -> bool {
        let start = merit(vcores.charges(), &self.run.capacity);
        self.newton_direction(problem, vcores);
        // A first balancing keeps the full step: half steps there took more steps and left one
        // dense map more over 1.05 × its bound (docs/peers.md, "Half steps after the first").
        let t0 = if self.run.newton_taken && !self.run.cold { self.settings.later_step } else { 1.0 };
        if self.line_search_from(problem, vcores, Accept::MeritDecrease, t0).is_some() {
            self.run.newton_taken = true;
            self.run.flips_in_a_row = 0;
            return true;
        }
        self.cell_direction(problem, vcores);
        if self.line_search(problem, vcores, Accept::MeritDecrease).is_some() {
            self.run.flips_in_a_row = 0;
            return true;
        }
        let flipped = self.shed_from_max(problem, vcores, start);
        self.run.flips_in_a_row += usize::from(flipped);
        #[cfg(test)]
        {
            self.scratch.longest_flips = self.scratch.longest_flips.max(self.run.flips_in_a_row);
        }
        flipped
    }

    /// Greedy end-game move on the most loaded cell: flip one of its eight cheapest boundary
    /// boxes (smallest gap) whose second-best vCore can take it, either by lowering the cell's
    /// weight or by raising the neighbour's; kept only if the merit improves. (Four made
    /// three-giants over 10 vCores stop at 1.087 × its bound instead of 1.082.)
    pub(super) fn shed_from_max(&mut self, problem: &Problem, vcores: &mut VCores, m0: (f64, f64)) -> bool {
        let q = vcores.charges();
        let Some(i) = (0..q.len()).max_by(|&a, &b| q[a].total_cmp(&q[b]).then(b.cmp(&a))) else {
            return false;
        };
        let (a, loads) = (vcores.assignment(), problem.loads());
        let mut moves: Vec<(f64, usize)> = (0..loads.len())
            .filter(|&k| a.owner[k] as usize == i && a.second[k] != NONE && loads[k] > 0.0 && !self.run.held[k])
            .filter(|&k| q[a.second[k] as usize] + loads[k] < q[i])
            // Not to a giant's holder: it is at or above its capacity already, and between two
            // adjacent holders the cheapest moves all go to the other one, each undone by the
            // projection that keeps the giants (three-giants over 16 vCores stuck at 1.125 ×
            // its bound trying them).
            .filter(|&k| self.run.giant_of[a.second[k] as usize] == NO_BOX)
            .map(|k| (a.gap[k], a.second[k] as usize))
            .collect();
        moves.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
        moves.dedup();
        for &(gap, s) in moves.iter().take(8) {
            let shift = gap + 1e-9 * (1.0 + gap.abs());
            for (v, sign) in [(i, -1.0), (s, 1.0)] {
                self.scratch.trial_w.clear();
                self.scratch.trial_w.extend_from_slice(vcores.weights());
                self.scratch.trial_w[v] += sign * shift;
                if self.try_trial(problem, vcores, Accept::MeritDecrease, None, m0) {
                    return true;
                }
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::super::{hold_giants, PowerCells, NO_BOX};
    use crate::assign::{assign_brute, Assignment, NONE};
    use crate::methods::power::newton::merit;
    use crate::rng::SplitMix64;
    use crate::{metrics, Grid, Problem, VCores};

    /// Each state is kept if its merit is below every one before it; a state that only ties the
    /// best is one more step since it.
    #[test]
    fn the_best_is_the_lowest_merit_and_a_tie_is_one_more_step_since_it() {
        let grid = Grid::new(6, 4).unwrap();
        let loads: Vec<f64> = (0..grid.len()).map(|k| 1.0 + (k % 5) as f64).collect();
        let problem = Problem::new(grid, &loads, 3).unwrap();
        let states: Vec<VCores> = (0..12).map(|seed| VCores::random(&problem, seed / 2)).collect();
        let mut p = PowerCells::default();
        p.capacities(&problem, &states[0]);
        let (mut lowest, mut since, mut kept) = ((f64::INFINITY, f64::INFINITY), 0, 0);
        for (i, v) in states.iter().enumerate() {
            let m = merit(v.charges(), &p.run.capacity);
            let better = m < lowest;
            assert_eq!(p.track_best(v), better, "state {i}: {m:?} against {lowest:?}");
            (lowest, since) = if better { (m, 0) } else { (lowest, since + 1) };
            kept += usize::from(better);
            assert_eq!(p.run.since_best, since, "state {i}");
            let best = p.run.best.as_ref().unwrap();
            assert_eq!(best.0, lowest);
            if better {
                assert_eq!((&best.1[..], &best.2[..]), (v.positions(), v.weights()));
            }
        }
        assert!(kept > 1 && kept < 6, "{kept} of 6 states kept: the test shows little");
    }

    /// What `shed_from_max` documents, the slow way: the boundary boxes of the most loaded cell
    /// (lowest id among equals) that a cell other than a giant's holder could take without
    /// reaching its charge, their (gap, taker) pairs from the smallest, the first eight each
    /// tried by lowering the cell's weight, then by raising the taker's, by the gap and a hair,
    /// with the giants' holders projected back onto their giants; the first trial with a lower
    /// merit, assigned box by box against every vCore, if any; the trials made; the pairs
    /// listed; and whether two boxes gave the same pair among those tried.
    fn shed_by_hand(p: &PowerCells, problem: &Problem, v: &VCores) -> (Option<Vec<f64>>, usize, usize, bool) {
        let (q, a, loads) = (v.charges(), v.assignment(), problem.loads());
        let top = q.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let Some(i) = q.iter().position(|&x| x == top) else {
            return (None, 0, 0, false);
        };
        let (mut pairs, mut boxes) = (std::collections::BTreeSet::new(), Vec::new());
        for (k, &load) in loads.iter().enumerate() {
            let s = a.second[k];
            let takes = s != NONE && q[s as usize] + load < top && p.run.giant_of[s as usize] == NO_BOX;
            if a.owner[k] as usize == i && load > 0.0 && !p.run.held[k] && takes {
                // Gaps are never negative: their bits sort as the numbers do.
                pairs.insert((a.gap[k].to_bits(), s as usize));
                boxes.push((a.gap[k].to_bits(), s as usize));
            }
        }
        boxes.sort_unstable();
        let repeats = |tried: usize| boxes.windows(2).take(tried).any(|w| w[0] == w[1]);
        let m0 = merit(q, &p.run.capacity);
        let mut trial = Assignment::default();
        for (n, &(bits, s)) in pairs.iter().take(8).enumerate() {
            let gap = f64::from_bits(bits);
            for (t, (cell, by)) in [(i, -1.0), (s, 1.0)].into_iter().enumerate() {
                let mut w = v.weights().to_vec();
                w[cell] += by * (gap + 1e-9 * (1.0 + gap));
                hold_giants(problem.grid(), &p.run.giant_of, v.positions(), &mut w);
                assign_brute(problem.grid(), v.positions(), &w, &mut trial);
                if merit(&metrics::charges(&trial.owner, loads, v.len()), &p.run.capacity) < m0 {
                    let tried = n + 1;
                    return (Some(w), 2 * n + t + 1, pairs.len(), repeats(tried));
                }
            }
        }
        (None, 2 * pairs.len().min(8), pairs.len(), repeats(8))
    }

    /// The end game's last resort takes the move its documentation names, after the trials it
    /// names, on 3,000 random small states (whole loads, so that charges tie; a heavy box in some,
    /// so that giants are held; the vCores on whole coordinates in every fourth, so that boxes
    /// tie in their gaps and pairs repeat).
    #[test]
    fn shedding_from_the_most_loaded_cell_takes_the_first_move_that_lowers_the_merit() {
        let mut rng = SplitMix64::new(41);
        let (mut shed, mut raised, mut past_first, mut with_giants, mut tied) = (0, 0, 0, 0, 0);
        // Failed after eight pairs with more listed; a pair repeated among those tried.
        let (mut past_eight, mut repeated) = (0, 0);
        for case in 0..3000 {
            let grid = Grid::new(4 + rng.below(6), 3 + rng.below(5)).unwrap();
            let mut loads: Vec<f64> = (0..grid.len()).map(|_| rng.below(4) as f64).collect();
            if case % 3 == 0 {
                loads[rng.below(grid.len())] = 12.0 + rng.below(20) as f64;
            }
            if loads.iter().all(|&l| l == 0.0) {
                continue;
            }
            let n = 2 + rng.below(5);
            let problem = Problem::new(grid, &loads, n).unwrap();
            let weights = (0..n).map(|_| 4.0 * rng.next_f64() - 2.0).collect();
            let mut positions = VCores::random(&problem, case).positions().to_vec();
            if case % 4 == 0 {
                positions.iter_mut().for_each(|x| (x[0], x[1]) = (x[0].floor(), x[1].floor()));
            }
            let mut v = VCores::new(&problem, positions, weights).unwrap();
            let mut p = PowerCells::default();
            p.capacities(&problem, &v);
            let q = v.charges().to_vec();
            let top = q.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            tied += usize::from(q.iter().filter(|&&x| x == top).count() > 1);
            with_giants += usize::from(p.run.held.contains(&true));
            let (expected, trials, pairs, repeats) = shed_by_hand(&p, &problem, &v);
            let before = v.weights().to_vec();
            let m0 = merit(v.charges(), &p.run.capacity);
            let moved = p.shed_from_max(&problem, &mut v, m0);
            assert_eq!(moved, expected.is_some(), "case {case}");
            assert_eq!(p.scratch.trials, trials, "case {case}: trials");
            past_eight += usize::from(expected.is_none() && pairs > 8);
            repeated += usize::from(repeats);
            match expected {
                Some(w) => {
                    assert_eq!(v.weights(), &w[..], "case {case}");
                    let mut check = Assignment::default();
                    assign_brute(&grid, v.positions(), &w, &mut check);
                    assert_eq!(v.owners(), &check.owner[..], "case {case}");
                    assert!(merit(v.charges(), &p.run.capacity) < m0, "case {case}");
                    shed += 1;
                    let i = q.iter().position(|&x| x == top).unwrap();
                    raised += usize::from(w[i] >= before[i]);
                    past_first += usize::from(trials > 1);
                }
                None => assert_eq!(v.weights(), &before[..], "case {case}: a failed move changed the state"),
            }
        }
        let seen = [shed, raised, past_first, tied, with_giants, past_eight, repeated];
        let names = "shed, raised, past the first trial, tied, with giants, failed with over 8 pairs, a pair repeated";
        assert!(seen.iter().all(|&x| x > 10), "{names}: {seen:?}");
    }
}
