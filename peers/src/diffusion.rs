//! `diffusion`: the repartitioner users reach for when a partition only has to follow a load
//! that drifts (the adaptive repartitioning of ParMETIS and Jostle; Hu and Blake, Parallel
//! Computing 1999): `pbs::diffusion::diffuse` moves boxes across the borders the parts already
//! have, as many as the balancing flow needs. A cold start, and a warm one more than
//! [`pbs::RESTART_FROM`] × the lower bound out of balance (a re-drawn map), is a k-way RCB whose
//! part ids are matched to the previous ones.

use pbs::{bisection::kway_rcb, metrics, Grid, Problem, RESTART_FROM};

use crate::{Partitioner, Result};

/// Diffusion from the previous call's parts, to within `1 + tol` of the lower bound.
///
/// ```
/// use pbs_peers::{Diffusion, Partitioner};
/// let grid = pbs::Grid::new(16, 16)?;
/// let mut d = Diffusion::default();
/// let before = d.partition(&grid, &vec![1.0; 256], 4)?; // a cold start: an RCB
/// // The left half becomes twice as heavy: the borders move, the parts keep their ids.
/// let loads: Vec<f64> = (0..256).map(|k| if k % 16 < 8 { 2.0 } else { 1.0 }).collect();
/// let after = d.partition(&grid, &loads, 4)?;
/// assert!(pbs::metrics::max_avg(&pbs::metrics::charges(&after, &loads, 4)) <= 1.05);
/// assert!(pbs::metrics::migrations(&before, &after) < 64);
/// # Ok::<(), pbs_peers::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Diffusion {
    /// The largest part may end at `1 + tol` × the lower bound (pbs's warm default, 0.05).
    pub tol: f64,
    previous: Option<(Grid, usize, Vec<u32>)>,
}

impl Default for Diffusion {
    fn default() -> Self {
        Diffusion { tol: 0.05, previous: None }
    }
}

impl Partitioner for Diffusion {
    fn name(&self) -> &str {
        "diffusion"
    }

    fn partition(&mut self, grid: &Grid, loads: &[f64], parts: usize) -> Result<Vec<u32>> {
        let next = match &self.previous {
            Some((g, p, owners)) if g == grid && *p == parts => {
                let problem = Problem::new(*grid, loads, parts)?;
                // Rescaled at extreme scales (see `pbs::Problem`), so that charges stay finite.
                let (bound, loads) = (problem.lower_bound(), problem.loads());
                let now = metrics::max_avg(&metrics::charges(owners, loads, parts));
                if now > RESTART_FROM * bound {
                    metrics::match_labels(owners, &kway_rcb(grid, loads, parts)?, parts)?
                } else {
                    // Every box moves at the same cost: the flow is carried by the fewest boxes.
                    let bytes = vec![1.0; grid.len()];
                    pbs::diffusion::diffuse(grid, owners, loads, &bytes, parts, (1.0 + self.tol) * bound)?
                }
            }
            // A cold start is an RCB, which checks the grid, loads and part count itself (so
            // that its time includes reading the loads once, as `rcb`'s does).
            _ => kway_rcb(grid, loads, parts)?,
        };
        self.previous = Some((*grid, parts, next.clone()));
        Ok(next)
    }

    fn warm_starts(&self) -> bool {
        true
    }

    fn reset(&mut self) {
        self.previous = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pbs::loadmap::PerlinMap;

    /// A Perlin map drifting by half a box per call: diffusion keeps the largest part within
    /// its tolerance and moves fewer boxes than a k-way RCB recomputed each time (ids matched).
    #[test]
    fn a_drifting_map_is_followed_within_tolerance_by_fewer_moves_than_rcb_from_scratch() {
        let grid = Grid::new(48, 48).unwrap();
        let parts = 9;
        let mut map = PerlinMap::with_seed(3);
        let mut d = Diffusion::default();
        let mut prev_d = d.partition(&grid, &map.loads(&grid), parts).unwrap();
        let mut prev_rcb = prev_d.clone();
        let (mut moved_d, mut moved_rcb) = (0, 0);
        for _ in 0..20 {
            map = map.smooth(0.5);
            let loads = map.loads(&grid);
            let bound = pbs::Problem::new(grid, &loads, parts).unwrap().lower_bound();
            let next = d.partition(&grid, &loads, parts).unwrap();
            let max_avg = metrics::max_avg(&metrics::charges(&next, &loads, parts));
            assert!(max_avg <= 1.05 * bound + 1e-9, "{max_avg} over {bound}");
            let rcb = metrics::match_labels(&prev_rcb, &kway_rcb(&grid, &loads, parts).unwrap(), parts).unwrap();
            moved_d += metrics::migrations(&prev_d, &next);
            moved_rcb += metrics::migrations(&prev_rcb, &rcb);
            (prev_d, prev_rcb) = (next, rcb);
        }
        assert!(moved_d > 0 && moved_d < moved_rcb, "diffusion moved {moved_d}, RCB {moved_rcb}");
    }

    /// Where one box outweighs a part's share, "far from balance" is measured against the
    /// lower bound: a warm call diffuses to `1 + tol` × the bound up to `RESTART_FROM` × the
    /// bound, and starts over above it. Both maps have a box of 150 in the first call's first
    /// part; in the second, that part's other boxes weigh 3.
    #[test]
    fn the_restart_threshold_and_the_target_scale_with_the_lower_bound() {
        let (grid, parts) = (Grid::new(16, 16).unwrap(), 4);
        let mut d = Diffusion::default();
        let first = d.partition(&grid, &vec![1.0; grid.len()], parts).unwrap();
        let hot = first.iter().position(|&p| p == 0).unwrap();
        let hot_part = |rest: f64| -> Vec<f64> {
            (0..grid.len())
                .map(|k| {
                    if k == hot {
                        150.0
                    } else if first[k] == 0 {
                        rest
                    } else {
                        1.0
                    }
                })
                .collect()
        };
        for (rest, restarts) in [(1.0, false), (3.0, true)] {
            let loads = hot_part(rest);
            let bound = Problem::new(grid, &loads, parts).unwrap().lower_bound();
            let now = metrics::max_avg(&metrics::charges(&first, &loads, parts));
            // Where the threshold's scaling matters: off by the bound's factor either way.
            if restarts {
                assert!(bound > 1.1 && now > RESTART_FROM * bound && now < RESTART_FROM + bound, "{now} {bound}");
            } else {
                assert!(bound > 1.1 && now <= RESTART_FROM * bound && now > RESTART_FROM / bound, "{now} {bound}");
            }
            let restart = metrics::match_labels(&first, &kway_rcb(&grid, &loads, parts).unwrap(), parts).unwrap();
            let ones = vec![1.0; grid.len()];
            let diffused = pbs::diffusion::diffuse(&grid, &first, &loads, &ones, parts, 1.05 * bound).unwrap();
            assert_ne!(restart, diffused, "the test needs the two branches to differ");
            d.previous = Some((grid, parts, first.clone()));
            let next = d.partition(&grid, &loads, parts).unwrap();
            assert_eq!(next, if restarts { restart } else { diffused }, "rest {rest}");
        }
    }

    /// Far from balance (a new map), a warm call starts over from an RCB, ids matched; a new
    /// part count is a cold start.
    #[test]
    fn a_map_far_from_balance_starts_over_from_rcb() {
        let grid = Grid::new(32, 32).unwrap();
        let mut d = Diffusion::default();
        let first = d.partition(&grid, &vec![1.0; grid.len()], 4).unwrap();
        let corner: Vec<f64> = (0..grid.len()).map(|k| if k % 32 < 8 && k / 32 < 8 { 50.0 } else { 1.0 }).collect();
        let next = d.partition(&grid, &corner, 4).unwrap();
        let expected = metrics::match_labels(&first, &kway_rcb(&grid, &corner, 4).unwrap(), 4).unwrap();
        assert_eq!(next, expected);
        assert_eq!(d.partition(&grid, &corner, 5).unwrap(), kway_rcb(&grid, &corner, 5).unwrap());
    }
}
