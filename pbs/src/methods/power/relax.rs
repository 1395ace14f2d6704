//! Compactness: before each step of the power-cell method the vCores move part of the way to
//! the centroids of their cells (or a spring force's target), each weight corrected so that
//! the target's power is unchanged; a giant box's holder moves onto it.

use super::giants::hold_giants;
use super::{Motion, PowerCells, NO_BOX};
use crate::grid::{dist2, Grid, Point};
use crate::problem::Problem;
use crate::vcores::VCores;

impl PowerCells {
    /// Moves every vCore towards the centroid of its cell (give or take [`off_centroid`]),
    /// keeping the target's power. A vCore that must keep a giant box moves onto it instead:
    /// its cell then shrinks around the giant and would lose it last.
    pub(super) fn relax_positions(&mut self, problem: &Problem, vcores: &mut VCores) {
        if self.settings.relax <= 0.0 && self.run.giant_of.iter().all(|&k| k == NO_BOX) {
            return;
        }
        let n = vcores.len();
        let grid = *problem.grid();
        let (sum, count) = centre_sums(&grid, vcores.owners(), n);
        let springs = (self.settings.motion == Motion::PairSprings).then(|| {
            let mut push = vec![[0.0; 3]; n];
            crate::forces::add_neighbour_springs(&grid, vcores.owners(), vcores.positions(), &count, &mut push);
            push
        });
        let giant_of = &self.run.giant_of;
        let relax = self.settings.relax;
        // Refused whole, the cells left where they are, if a weight would stop being a finite
        // number (only from weights near the largest `f64`, which a caller may set).
        let _ = vcores.update(problem, |positions, weights| {
            for i in 0..n {
                // The target, and the point whose power the move keeps (the centroid, for the
                // springs: the cell stays where it is while its vCore moves inside it).
                let (p, keep, beta): (Point, Point, f64) = if giant_of[i] != NO_BOX {
                    (grid.centre(giant_of[i]), grid.centre(giant_of[i]), 1.0)
                } else if count[i] > 0 && relax > 0.0 {
                    let off = off_centroid(i);
                    let centroid: Point = std::array::from_fn(|a| sum[i][a] / count[i] as f64 + off[a]);
                    match &springs {
                        None => (centroid, centroid, relax),
                        Some(push) => (std::array::from_fn(|a| positions[i][a] + push[i][a]), centroid, relax),
                    }
                } else {
                    continue;
                };
                let x = positions[i];
                let moved: Point = grid.clamp(std::array::from_fn(|a| x[a] + beta * (p[a] - x[a])));
                weights[i] += dist2(&keep, &moved) - dist2(&keep, &x);
                positions[i] = moved;
            }
            hold_giants(&grid, giant_of, positions, weights);
        });
    }
}

/// Per vCore, the sum of its boxes' centres and their count. A row is walked as runs of one
/// owner, each added in closed form: adding box by box makes every add wait for the previous
/// one (neighbours share an owner).
pub(super) fn centre_sums(grid: &Grid, owners: &[u32], n: usize) -> (Vec<Point>, Vec<usize>) {
    let mut sum = vec![[0.0; 3]; n];
    let mut count = vec![0usize; n];
    for (r, row) in owners.chunks_exact(grid.nx()).enumerate() {
        let (y, z) = ((r % grid.ny()) as f64 + 0.5, (r / grid.ny()) as f64 + 0.5);
        let mut start = 0;
        while start < row.len() {
            let o = row[start];
            let end = start + row[start..].iter().take_while(|&&x| x == o).count();
            let len = (end - start) as f64;
            // Σ_{i=start}^{end−1} (i + 0.5) = len · (start + end) / 2.
            let s = &mut sum[o as usize];
            s[0] += len * (start + end) as f64 * 0.5;
            s[1] += len * y;
            s[2] += len * z;
            count[o as usize] += end - start;
            start = end;
        }
    }
    (sum, count)
}

/// Where vCore `i` settles relative to its cell's centroid: a different spot within 1/40 of
/// a box for every vCore. Exactly at the centroids, symmetric cells put vCores level with
/// each other (two threads on a grid: both at the middle column), their boundary then runs
/// along a row of box centres, every box of the row has the same power gap, and the row can
/// only change hands as a whole (the balancer flips it back and forth). Off level, the
/// boundary is slightly tilted, the gaps along it differ, and boxes change hands one by one.
pub(super) fn off_centroid(i: usize) -> Point {
    // Additive recurrences with the plastic number's reciprocals: well spread for any count.
    let frac = |a: f64| (0.5 + a * (i + 1) as f64).fract() - 0.5;
    [0.05 * frac(0.754_877_666_246_692_7), 0.05 * frac(0.569_840_290_998_053_3), 0.05 * frac(0.430_159_709_001_946_7)]
}

#[cfg(test)]
mod tests {
    use super::super::PowerCellsSettings;
    use super::*;

    #[test]
    fn centre_sums_by_runs_equal_the_sums_box_by_box() {
        let grid = Grid::new_3d(7, 5, 3).unwrap();
        let mut rng = crate::rng::SplitMix64::new(9);
        // Runs of random length and owner, as cells make them.
        let mut owners = Vec::new();
        while owners.len() < grid.len() {
            let (o, len) = ((rng.next_f64() * 4.0) as u32, 1 + (rng.next_f64() * 6.0) as usize);
            owners.extend(std::iter::repeat_n(o, len));
        }
        owners.truncate(grid.len());
        let (sum, count) = centre_sums(&grid, &owners, 4);
        for i in 0..4u32 {
            let mine: Vec<usize> = (0..grid.len()).filter(|&k| owners[k] == i).collect();
            assert_eq!(count[i as usize], mine.len());
            for (a, by_runs) in sum[i as usize].iter().enumerate() {
                let direct: f64 = mine.iter().map(|&k| grid.centre(k)[a]).sum();
                assert!((by_runs - direct).abs() < 1e-9, "vCore {i} axis {a}");
            }
        }
    }

    #[test]
    fn every_vcore_settles_at_its_own_offset() {
        let offsets: Vec<Point> = (0..64).map(off_centroid).collect();
        for (i, a) in offsets.iter().enumerate() {
            assert!(a.iter().all(|c| c.abs() <= 0.025), "{a:?}");
            for b in &offsets[..i] {
                assert!((a[0] - b[0]).abs() > 1e-4 && (a[1] - b[1]).abs() > 1e-4, "vCores level: {a:?} {b:?}");
            }
        }
    }

    /// Every vCore moves `relax` of the way to its cell's centroid plus its offset (or along its
    /// springs), clamped into the domain, keeping its power at the centroid; a giant's holder
    /// moves onto its giant and wins it; a vCore with no box stays; nothing moves with `relax`
    /// 0 and no giant. On 600 random states, both motions.
    #[test]
    fn vcores_move_towards_their_centroids_keeping_the_power_there() {
        let mut rng = crate::rng::SplitMix64::new(3);
        // Moves checked, by holders, by springs, of empty cells kept, untouched states.
        let mut seen = [0; 5];
        for case in 0..600 {
            let grid = if case % 4 == 0 {
                Grid::new_3d(2 + rng.below(6), 2 + rng.below(6), 2 + rng.below(3)).unwrap()
            } else {
                Grid::new(2 + rng.below(10), 1 + rng.below(8)).unwrap()
            };
            let mut loads: Vec<f64> = (0..grid.len()).map(|_| rng.below(3) as f64 + 0.5).collect();
            if case % 3 == 0 {
                loads[rng.below(grid.len())] = 4.0 * grid.len() as f64;
            }
            let n = 2 + rng.below(grid.len().min(9) - 1);
            let problem = Problem::new(grid, &loads, n).unwrap();
            let weights = (0..n).map(|_| 8.0 * rng.next_f64() - 4.0).collect();
            let mut v = VCores::new(&problem, VCores::random(&problem, case).positions().to_vec(), weights).unwrap();
            let motion = if case % 2 == 0 { Motion::Centroid } else { Motion::PairSprings };
            let relax = [0.0, 0.3, 1.0][(case / 4) as usize % 3];
            let mut p = PowerCells::new(PowerCellsSettings { relax, motion, ..Default::default() }).unwrap();
            p.capacities(&problem, &v);
            let before = v.clone();
            p.relax_positions(&problem, &mut v);
            let giant_of = &p.run.giant_of;
            if relax == 0.0 && giant_of.iter().all(|&k| k == NO_BOX) {
                assert_eq!((v.positions(), v.weights()), (before.positions(), before.weights()), "case {case}");
                seen[4] += 1;
                continue;
            }
            let mut push = vec![[0.0; 3]; n];
            let counts: Vec<usize> =
                (0..n).map(|i| before.owners().iter().filter(|&&o| o as usize == i).count()).collect();
            crate::forces::add_neighbour_springs(&grid, before.owners(), before.positions(), &counts, &mut push);
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * (1.0 + a.abs().max(b.abs()));
            for i in 0..n {
                let (x, w, now) = (before.positions()[i], before.weights()[i], v.positions()[i]);
                if giant_of[i] != NO_BOX {
                    let c = grid.centre(giant_of[i]);
                    assert!((0..3).all(|a| close(now[a], c[a])), "case {case}: holder {i} at {now:?}, not {c:?}");
                    assert_eq!(v.owners()[giant_of[i]] as usize, i, "case {case}: holder {i} lost its giant");
                    seen[1] += 1;
                    continue;
                }
                let mine: Vec<usize> = (0..grid.len()).filter(|&k| before.owners()[k] as usize == i).collect();
                if mine.is_empty() || relax == 0.0 {
                    assert_eq!(now, x, "case {case}: vCore {i} moved");
                    seen[3] += usize::from(mine.is_empty());
                    continue;
                }
                let off = off_centroid(i);
                let centroid: Point = std::array::from_fn(|a| {
                    mine.iter().map(|&k| grid.centre(k)[a]).sum::<f64>() / mine.len() as f64 + off[a]
                });
                let target: Point = match motion {
                    Motion::Centroid => centroid,
                    Motion::PairSprings => std::array::from_fn(|a| x[a] + push[i][a]),
                };
                let want = grid.clamp(std::array::from_fn(|a| x[a] + relax * (target[a] - x[a])));
                assert!((0..3).all(|a| close(now[a], want[a])), "case {case}: vCore {i} at {now:?}, not {want:?}");
                // Its power at the centroid is kept, unless a holder's projection raised it.
                let (was, is) = (dist2(&centroid, &x) - w, dist2(&centroid, &now) - v.weights()[i]);
                assert!(close(was, is) || is < was && giant_of.iter().any(|&k| k != NO_BOX), "case {case}: vCore {i}");
                seen[0] += 1;
                seen[2] += usize::from(motion == Motion::PairSprings);
            }
        }
        assert!(seen.iter().all(|&x| x > 10), "{seen:?}");
    }
}
