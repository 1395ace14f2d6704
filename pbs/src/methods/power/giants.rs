//! Giants: boxes too heavy to share a vCore. A water-filling pass finds them once per run,
//! each gets a holder vCore that keeps it, and every trial's weights are projected so that the
//! holder owns it.

use super::{PowerCells, NO_BOX};
use crate::grid::{dist2, Grid, Point};
use crate::problem::Problem;
use crate::vcores::VCores;

impl PowerCells {
    /// Sets, once per run, `capacity` (target charge per vCore), `giant_of` (the giant box a vCore
    /// holds) and `held`.
    pub(super) fn capacities(&mut self, problem: &Problem, vcores: &VCores) {
        let n = vcores.len();
        if self.run.giant_of.len() == n {
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
            // In exact arithmetic every box above the threshold passes the share test (each
            // threshold is a share left, and each giant taken lowers it); in `f64` the test
            // decides the boxes within rounding of the share, as the documentation reads.
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
        self.run.giant_of.clear();
        self.run.giant_of.resize(n, NO_BOX);
        self.run.held.clear();
        self.run.held.resize(loads.len(), false);
        for &k in &giants {
            let o = vcores.owners()[k] as usize;
            let c = problem.grid().centre(k);
            let holder = if self.run.giant_of[o] == NO_BOX {
                o
            } else {
                (0..n)
                    .filter(|&i| self.run.giant_of[i] == NO_BOX)
                    .min_by(|&a, &b| dist2(&vcores.positions()[a], &c).total_cmp(&dist2(&vcores.positions()[b], &c)))
                    .expect("fewer giants than vCores")
            };
            self.run.giant_of[holder] = k;
            self.run.held[k] = true;
        }
        let kept: f64 = self.run.giant_of.iter().filter(|&&k| k != NO_BOX).map(|&k| loads[k]).sum();
        let sharing = self.run.giant_of.iter().filter(|&&k| k == NO_BOX).count();
        let share = if sharing > 0 { (total - kept) / sharing as f64 } else { 0.0 };
        self.run.capacity.clear();
        self.run.capacity.extend(self.run.giant_of.iter().map(|&k| if k == NO_BOX { share } else { loads[k] }));
    }
}

/// Raises the weight of each giant's holder just enough that it owns its giant (its power at
/// the giant's centre beats every other vCore's): a projection onto linear constraints in `w`,
/// applied to every trial so that no step hands a giant to a neighbour. One pass need not do:
/// squared distances break the triangle inequality, so a holder raised to beat a far vCore can
/// take a neighbouring holder's giant. Passes repeat while one raises a weight, at most one per
/// giant: holders that each sit nearer another's giant than their own may have no weights that
/// hold every giant, and then the last pass's weights stand.
pub(super) fn hold_giants(grid: &Grid, giant_of: &[usize], positions: &[Point], weights: &mut [f64]) {
    let holders = giant_of.iter().filter(|&&k| k != NO_BOX).count();
    for _ in 0..holders {
        let mut raised = false;
        for (i, &k) in giant_of.iter().enumerate() {
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
                raised = true;
            }
        }
        if !raised {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::Grid;

    /// 3 vCores, one box holding 10 of 19: it is a giant; the other two share 9, 4.5 each.
    #[test]
    fn water_filling_finds_the_giant_and_shares_the_rest() {
        let grid = Grid::new(10, 1).unwrap();
        let mut loads = vec![1.0; 10];
        loads[3] = 10.0;
        let problem = Problem::new(grid, &loads, 3).unwrap();
        let vcores =
            VCores::new(&problem, vec![[0.5, 0.5, 0.5], [3.5, 0.5, 0.5], [8.5, 0.5, 0.5]], vec![0.0; 3]).unwrap();
        let mut p = PowerCells::default();
        p.capacities(&problem, &vcores);
        assert_eq!(p.run.giant_of, vec![NO_BOX, 3, NO_BOX], "the owner of box 3 holds it");
        assert_eq!(p.run.capacity, vec![4.5, 10.0, 4.5]);
        assert!(p.run.held[3] && p.run.held.iter().filter(|&&x| x).count() == 1);
    }

    /// No box above the mean: everybody's capacity is the mean, no box is held.
    #[test]
    fn without_giants_every_capacity_is_the_mean() {
        let grid = Grid::new(4, 1).unwrap();
        let loads = [1.0, 2.0, 3.0, 2.0];
        let problem = Problem::new(grid, &loads, 2).unwrap();
        let vcores = VCores::random(&problem, 1);
        let mut p = PowerCells::default();
        p.capacities(&problem, &vcores);
        assert_eq!(p.run.capacity, vec![4.0, 4.0]);
        assert!(p.run.held.iter().all(|&x| !x));
    }

    /// Two giants owned by one vCore: the lighter one gets the nearest free vCore as holder.
    #[test]
    fn a_second_giant_in_one_cell_gets_its_own_holder() {
        let grid = Grid::new(6, 1).unwrap();
        let loads = [0.5, 9.0, 8.0, 0.5, 0.5, 0.5];
        let problem = Problem::new(grid, &loads, 3).unwrap();
        let vcores =
            VCores::new(&problem, vec![[1.5, 0.5, 0.5], [4.5, 0.5, 0.5], [5.9, 0.5, 0.5]], vec![0.0; 3]).unwrap();
        assert_eq!(&vcores.owners()[1..3], &[0, 0]);
        let mut p = PowerCells::default();
        p.capacities(&problem, &vcores);
        assert_eq!(p.run.giant_of[0], 1, "the owner keeps the heavier giant");
        assert_eq!(p.run.giant_of[1], 2, "vCore 1 is the nearest free one to box 2");
        assert_eq!(p.run.capacity, vec![9.0, 8.0, 2.0]);
    }

    #[test]
    fn holders_are_made_to_own_their_giant() {
        let grid = Grid::new(6, 1).unwrap();
        let positions = [[1.5, 0.5, 0.5], [2.5, 0.5, 0.5]];
        let mut w = vec![10.0, 0.0];
        // vCore 1 holds box 2 but vCore 0's weight wins it; the projection fixes that.
        hold_giants(&grid, &[NO_BOX, 2], &positions, &mut w);
        let c = grid.centre(2);
        assert!(dist2(&c, &positions[1]) - w[1] < dist2(&c, &positions[0]) - w[0]);
        assert!(w[1] > 9.0 && w[1] < 9.0 + 1e-6);
    }

    /// Two holders on neighbouring giants and a heavy vCore far away: vCore 0, raised first to
    /// beat the far one at box 11, loses box 11 to vCore 1, raised after it to beat the far one
    /// at box 10 (which is nearer it: 100 against 121). A second pass raises vCore 0 again.
    #[test]
    fn holders_raised_one_after_another_each_keep_their_giant() {
        let grid = Grid::new(12, 1).unwrap();
        let positions = [[11.5, 0.5, 0.5], [10.5, 0.5, 0.5], [0.5, 0.5, 0.5]];
        let mut w = vec![0.0, 0.0, 200.0];
        let giant_of = [11, 10, NO_BOX];
        hold_giants(&grid, &giant_of, &positions, &mut w);
        for (i, &k) in giant_of[..2].iter().enumerate() {
            let c = grid.centre(k);
            let power: Vec<f64> = (0..3).map(|j| dist2(&c, &positions[j]) - w[j]).collect();
            assert!((0..3).all(|j| j == i || power[i] < power[j]), "box {k}: powers {power:?}");
        }
        assert!((w[0] - 99.0).abs() < 1e-6 && (w[1] - 100.0).abs() < 1e-6, "{w:?}");
    }

    /// Six boxes at the share the two heavy ones leave (2.28 / 6 = 0.38) stay shared: the
    /// threshold lets them through once the heavy ones are taken, and the share test stops
    /// at the first that does not exceed the share left, which as computed in `f64` is the
    /// second (the first exceeds 0.37999999999999995 by rounding).
    #[test]
    fn boxes_at_the_share_left_stay_shared_but_for_rounding() {
        let loads = [0.38, 0.38, 0.38, 0.38, 0.38, 0.38, 0.75, 0.75];
        let problem = Problem::new(Grid::new(4, 2).unwrap(), &loads, 8).unwrap();
        for seed in 0..20 {
            let mut p = PowerCells::default();
            p.capacities(&problem, &VCores::random(&problem, seed));
            let held: Vec<usize> = (0..8).filter(|&k| p.run.held[k]).collect();
            assert_eq!(held, [0, 6, 7], "seed {seed}: {:?}", p.run.giant_of);
        }
    }

    /// Giants, holders and capacities as the water-filling documents them, the slow way: the
    /// heaviest boxes (lowest id among equals) each taken while its load exceeds an equal share
    /// of what is left among the vCores left, one vCore always left to share the rest; each
    /// giant, heaviest first, held by its owner if that one holds none yet, else by the
    /// nearest vCore that holds none (lowest id among equals). Also whether a load met the
    /// share it was compared with.
    fn by_hand(problem: &Problem, v: &VCores) -> (Vec<usize>, Vec<f64>, bool) {
        let (loads, n) = (problem.loads(), v.len());
        let mut order: Vec<usize> = (0..loads.len()).collect();
        order.sort_by(|&a, &b| loads[b].total_cmp(&loads[a]).then(a.cmp(&b)));
        let (mut rest, mut giants, mut tied) = (problem.total(), Vec::new(), false);
        for &k in &order[..n - 1] {
            let share = rest / (n - giants.len()) as f64;
            tied |= loads[k] == share;
            if loads[k] <= share {
                break;
            }
            rest -= loads[k];
            giants.push(k);
        }
        let mut giant_of = vec![NO_BOX; n];
        for &k in &giants {
            let c = problem.grid().centre(k);
            let o = v.owners()[k] as usize;
            let mut free = (0..n).filter(|&i| giant_of[i] == NO_BOX);
            let holder = if giant_of[o] == NO_BOX {
                o
            } else {
                let first = free.next().unwrap();
                free.fold(first, |h, i| if dist2(&v.positions()[i], &c) < dist2(&v.positions()[h], &c) { i } else { h })
            };
            giant_of[holder] = k;
        }
        let share = rest / (n - giants.len()) as f64;
        let capacity = giant_of.iter().map(|&k| if k == NO_BOX { share } else { loads[k] }).collect();
        (giant_of, capacity, tied)
    }

    /// The water-filling finds the giants, their holders and the capacities its documentation
    /// names on 4,000 random states, a few heavy boxes in most: half with whole loads (so that
    /// loads tie with shares), half with loads that meet shares within rounding.
    #[test]
    fn water_filling_matches_a_slow_reading_of_its_documentation() {
        let mut rng = crate::rng::SplitMix64::new(5);
        // States with a giant, with two or more, with a giant held by another than its owner,
        // with a box's load equal to a share it was compared with.
        let mut seen = [0; 4];
        for case in 0..4000 {
            let grid = Grid::new(2 + rng.below(8), 1 + rng.below(6)).unwrap();
            // Odd cases' loads are not whole: shares then meet loads within rounding, where
            // only the share test tells a giant from a box above the threshold.
            let (scale, offset, heavy) = if case % 2 == 0 { (1.0, 0.0, 1.0) } else { (0.37, 0.01, 1.13) };
            let mut loads: Vec<f64> = (0..grid.len()).map(|_| rng.below(3) as f64 * scale + offset).collect();
            for _ in 0..rng.below(4) {
                loads[rng.below(grid.len())] = rng.below(4 * grid.len()) as f64 * heavy;
            }
            if loads.iter().all(|&l| l == 0.0) {
                continue;
            }
            let n = 2 + rng.below(grid.len().min(8) - 1);
            let problem = Problem::new(grid, &loads, n).unwrap();
            let v = VCores::random(&problem, case);
            let mut p = PowerCells::default();
            p.capacities(&problem, &v);
            let (giant_of, capacity, tie) = by_hand(&problem, &v);
            assert_eq!(p.run.giant_of, giant_of, "case {case}: {loads:?} over {n}");
            for (a, b) in p.run.capacity.iter().zip(&capacity) {
                assert!(
                    (a - b).abs() <= 1e-12 * problem.total(),
                    "case {case}: {:?} against {capacity:?}",
                    p.run.capacity
                );
            }
            let held: Vec<usize> = (0..grid.len()).filter(|&k| p.run.held[k]).collect();
            let mut giants: Vec<usize> = giant_of.iter().copied().filter(|&k| k != NO_BOX).collect();
            giants.sort_unstable();
            assert_eq!(held, giants, "case {case}");
            let moved = giant_of.iter().enumerate().any(|(i, &k)| k != NO_BOX && v.owners()[k] as usize != i);
            for (count, yes) in seen.iter_mut().zip([!giants.is_empty(), giants.len() > 1, moved, tie]) {
                *count += usize::from(yes);
            }
        }
        assert!(seen.iter().all(|&x| x > 10), "{seen:?}");
    }
}
