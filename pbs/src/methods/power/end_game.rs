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
