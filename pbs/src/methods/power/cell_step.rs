//! The per-cell step: each cell's weight shift that sheds exactly its excess or captures
//! exactly its deficit, read from the power gaps of its boundary boxes.

use super::PowerCells;
use crate::assign::NONE;
use crate::grid::dist2;
use crate::problem::Problem;
use crate::vcores::VCores;

impl PowerCells {
    /// Per-cell weight shift that sheds (or captures) exactly the cell's excess (deficit).
    pub(super) fn cell_direction(&mut self, problem: &Problem, vcores: &VCores) {
        let n = vcores.len();
        let loads = problem.loads();
        let a = vcores.assignment();
        let excess: Vec<f64> = vcores.charges().iter().zip(&self.run.capacity).map(|(q, c)| q - c).collect();
        self.scratch.lists.resize_with(n, Vec::new);
        for l in &mut self.scratch.lists {
            l.clear();
        }
        for (k, &q) in loads.iter().enumerate() {
            if q == 0.0 || a.second[k] == NONE {
                continue;
            }
            let (o, s, gap) = (a.owner[k] as usize, a.second[k] as usize, a.gap[k]);
            if excess[o] > 0.0 && self.run.giant_of[o] != k {
                self.scratch.lists[o].push((gap, q));
            }
            if excess[s] < 0.0 && !self.run.held[k] {
                self.scratch.lists[s].push((gap, q));
            }
        }
        self.scratch.direction.clear();
        self.scratch.direction.resize(n, 0.0);
        let mut capturable = None;
        for (i, &e) in excess.iter().enumerate() {
            let want = e.abs();
            if want == 0.0 {
                continue;
            }
            let list = &mut self.scratch.lists[i];
            let shift = if list.is_empty() {
                if e > 0.0 {
                    continue; // nothing it may shed: it holds only its giant box
                }
                capturable.get_or_insert_with(|| Capturable::new(problem, &self.run.held)).distance(problem, vcores, i)
            } else {
                threshold_for(list, want)
            };
            let sign = if e > 0.0 { -1.0 } else { 1.0 };
            self.scratch.direction[i] = sign * self.settings.damping * shift;
        }
    }
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
        let (left_sum, left_max) =
            list[lo..mid].iter().fold((0.0, f64::NEG_INFINITY), |(s, m), x| (s + x.1, m.max(x.0)));
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

/// The loaded boxes that no giant's holder is bound to keep: where a vCore may capture a box.
/// Gathered once for all the vCores that need a capture distance in one step; a sweep over
/// every box for each of them cost `O(vCores × boxes)`, a third of a cold start on a map whose
/// load sits in 1 % of its boxes (`sparse`, 256 parts).
pub(super) struct Capturable {
    boxes: Vec<u32>,
}

impl Capturable {
    pub(super) fn new(problem: &Problem, held: &[bool]) -> Capturable {
        let loads = problem.loads();
        Capturable {
            boxes: (0..loads.len() as u32).filter(|&k| loads[k as usize] > 0.0 && !held[k as usize]).collect(),
        }
    }

    /// Weight increase that lets vCore `i` capture its nearest capturable box that it does not
    /// own (used when it is second best for no loaded box, e.g. an empty cell far from the load).
    pub(super) fn distance(&self, problem: &Problem, vcores: &VCores, i: usize) -> f64 {
        let (grid, a) = (problem.grid(), vcores.assignment());
        let (x, w) = (vcores.positions()[i], vcores.weights()[i]);
        let mut best = f64::INFINITY;
        for &k in &self.boxes {
            let k = k as usize;
            if a.owner[k] as usize != i {
                best = best.min(dist2(&grid.centre(k), &x) - w - a.score[k]);
            }
        }
        if best.is_finite() {
            best.max(0.0) + 1e-9 * (1.0 + best.abs())
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Capture distance by a sweep over every box, boxes `skip` left out.
    fn swept(problem: &Problem, vcores: &VCores, i: usize, skip: &[bool]) -> f64 {
        let (grid, loads, a) = (problem.grid(), problem.loads(), vcores.assignment());
        let (x, w) = (vcores.positions()[i], vcores.weights()[i]);
        let mut best = f64::INFINITY;
        for k in 0..grid.len() {
            if loads[k] > 0.0 && !skip[k] && a.owner[k] as usize != i {
                best = best.min(dist2(&grid.centre(k), &x) - w - a.score[k]);
            }
        }
        if best.is_finite() {
            best.max(0.0) + 1e-9 * (1.0 + best.abs())
        } else {
            0.0
        }
    }

    /// The gathered boxes give every vCore the distance a sweep over every box gives: the
    /// nearest loaded box it does not own, held boxes left out, on a map with most boxes empty.
    #[test]
    fn capture_distances_from_the_gathered_boxes_equal_a_sweep_over_all() {
        let grid = crate::Grid::new(30, 20).unwrap();
        let loads: Vec<f64> =
            (0..grid.len()).map(|k| if k % 7 == 0 || k % 11 == 3 { 1.0 + (k % 5) as f64 } else { 0.0 }).collect();
        let problem = Problem::new(grid, &loads, 9).unwrap();
        // Weights of both signs, so that a capture distance that took the weight the wrong
        // way round would differ.
        let weights = (0..9).map(|i| 0.7 * (i as f64 - 4.0)).collect();
        let vcores = VCores::new(&problem, VCores::random(&problem, 4).positions().to_vec(), weights).unwrap();
        let none = vec![false; grid.len()];
        // Held: every loaded box some vCore would capture first, so that leaving them out matters.
        let mut held = none.clone();
        let a = vcores.assignment();
        for i in 0..vcores.len() {
            let (x, w) = (vcores.positions()[i], vcores.weights()[i]);
            let nearest = (0..grid.len()).filter(|&k| loads[k] > 0.0 && a.owner[k] as usize != i).min_by(|&k, &l| {
                let s = |k: usize| dist2(&grid.centre(k), &x) - w - a.score[k];
                s(k).total_cmp(&s(l))
            });
            if let Some(k) = nearest.filter(|_| i % 2 == 0) {
                held[k] = true;
            }
        }
        let capturable = Capturable::new(&problem, &held);
        let mut differ = 0;
        for i in 0..vcores.len() {
            let d = capturable.distance(&problem, &vcores, i);
            assert_eq!(d.to_bits(), swept(&problem, &vcores, i, &held).to_bits(), "vCore {i}");
            differ += usize::from(d != swept(&problem, &vcores, i, &none));
        }
        assert!(differ > 0, "the held boxes must change some distance for the test to see them");
    }

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

    /// The threshold by a plain sort and scan: the gap of the box whose load crosses `want`
    /// (just past it), or halfway to the gap before where stopping short lands closer; past
    /// the last gap where the whole list carries less.
    fn threshold_by_sorting(list: &[(f64, f64)], want: f64) -> f64 {
        let mut sorted = list.to_vec();
        sorted.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.total_cmp(&y.1)));
        let just_past = |g: f64| g + 1e-9 * (1.0 + g.abs());
        let mut acc = 0.0;
        for (i, &(g, q)) in sorted.iter().enumerate() {
            let before = acc;
            acc += q;
            if acc >= want {
                return if acc - want <= want - before || i == 0 { just_past(g) } else { 0.5 * (sorted[i - 1].0 + g) };
            }
        }
        just_past(sorted.last().unwrap().0)
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
                let expected = threshold_by_sorting(&list, want);
                assert_eq!(threshold_for(&mut list.clone(), want), expected, "n={n} frac={frac}");
            }
        }
    }

    /// Each cell's shift is what the method documents, read box by box: an over-loaded cell
    /// lowers its weight (times `damping`) by the threshold over its loaded boundary boxes but
    /// its giant, an under-loaded one raises it by the threshold over the loaded boxes it is
    /// second best for and no holder keeps, or by its capture distance where it is second for
    /// none; a cell at its capacity stays. On 1,500 random states, 2D and 3D, with giants and
    /// with load on part of the map. (A cell over its capacity with nothing to shed stays too;
    /// no random state has one, a holder's capacity being its giant's load.)
    #[test]
    fn every_cell_shifts_by_its_documented_threshold() {
        use super::super::PowerCellsSettings;
        let mut rng = crate::rng::SplitMix64::new(17);
        // Shedding, capturing from a list, capturing by distance.
        let mut seen = [0; 3];
        for case in 0..1500 {
            let grid = if case % 5 == 0 {
                crate::Grid::new_3d(3 + rng.below(4), 3 + rng.below(4), 2 + rng.below(3)).unwrap()
            } else {
                crate::Grid::new(3 + rng.below(14), 3 + rng.below(10)).unwrap()
            };
            let cut = grid.len() / 3 + rng.below(2 * grid.len() / 3);
            let mut loads: Vec<f64> =
                (0..grid.len()).map(|k| if k < cut { rng.below(4) as f64 } else { 0.0 }).collect();
            if case % 3 == 0 {
                loads[rng.below(cut)] = 2.0 * grid.len() as f64;
            }
            if loads.iter().all(|&q| q == 0.0) {
                loads[0] = 1.0;
            }
            let n = 2 + rng.below(grid.len().min(10) - 1);
            let problem = Problem::new(grid, &loads, n).unwrap();
            let [nx, ny, nz] = grid.dims();
            let positions: Vec<_> = (0..n)
                .map(|_| [rng.next_f64() * nx as f64, rng.next_f64() * ny as f64, rng.next_f64() * nz as f64])
                .collect();
            let weights = (0..n).map(|_| 4.0 * rng.next_f64() - 1.0).collect();
            let v = VCores::new(&problem, positions, weights).unwrap();
            let damping = [1.0, 0.7, 0.25][case % 3];
            let mut p = PowerCells::new(PowerCellsSettings { damping, ..Default::default() }).unwrap();
            p.capacities(&problem, &v);
            p.cell_direction(&problem, &v);
            let (a, q) = (v.assignment(), v.charges());
            let loads = problem.loads();
            for (i, (&charge, &capacity)) in q.iter().zip(&p.run.capacity).enumerate() {
                let e = charge - capacity;
                let boundary: Vec<(f64, f64)> = (0..grid.len())
                    .filter(|&k| loads[k] != 0.0 && a.second[k] != NONE)
                    .filter(|&k| {
                        if e > 0.0 {
                            a.owner[k] as usize == i && p.run.giant_of[i] != k
                        } else {
                            a.second[k] as usize == i && !p.run.held[k]
                        }
                    })
                    .map(|k| (a.gap[k], loads[k]))
                    .collect();
                // At its capacity, or over it with nothing to shed: no step.
                let expected = if e == 0.0 || e > 0.0 && boundary.is_empty() {
                    0.0
                } else if boundary.is_empty() {
                    seen[2] += 1;
                    damping * Capturable::new(&problem, &p.run.held).distance(&problem, &v, i)
                } else {
                    seen[usize::from(e < 0.0)] += 1;
                    -e.signum() * damping * threshold_by_sorting(&boundary, e.abs())
                };
                assert_eq!(p.scratch.direction[i], expected, "case {case}: vCore {i}, excess {e}");
            }
        }
        assert!(seen.iter().all(|&c| c > 20), "{seen:?}");
    }
}
