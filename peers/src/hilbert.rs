//! `hilbert`: a prefix split along a Hilbert curve (the space-filling-curve partitioning of
//! Pilkington & Baden, IEEE TPDS 1996). The boxes are ordered along the curve over the
//! smallest power-of-two square (cube, on a 3D grid) that holds the grid, and the order is cut
//! where the running load is nearest to each part's share. On a square or cubic power-of-two
//! grid consecutive boxes are neighbours, so parts are connected; on other grids the curve
//! leaves the grid and comes back, and a part may fall in two pieces (which the `disconnected`
//! column shows).

use pbs::bisection::split_order;
use pbs::Grid;

use crate::{Partitioner, Result};

/// The Hilbert-curve prefix split. It has no settings.
///
/// ```
/// use pbs_peers::{HilbertPrefix, Partitioner};
/// let grid = pbs::Grid::new(4, 4)?;
/// let parts = HilbertPrefix.partition(&grid, &vec![1.0; 16], 4)?;
/// // four 2×2 quadrants
/// assert_eq!(parts[0], parts[5]);
/// assert_ne!(parts[0], parts[2]);
/// # Ok::<(), pbs_peers::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct HilbertPrefix;

/// Position of cell `(x, y)` along the Hilbert curve that fills the `side × side` square
/// (`side` a power of two, `x, y < side`). Each level picks the quadrant in the curve's order
/// (0, 1, 2, 3 = lower left, upper left, upper right, lower right of the rotated frame) and
/// rotates the frame so that the sub-curve starts and ends where its neighbours need it.
pub fn hilbert_index(side: u64, mut x: u64, mut y: u64) -> u64 {
    debug_assert!(side.is_power_of_two() && x < side && y < side);
    let mut d = 0;
    let mut s = side / 2;
    while s > 0 {
        let rx = u64::from(x & s != 0);
        let ry = u64::from(y & s != 0);
        d += s * s * ((3 * rx) ^ ry);
        if ry == 0 {
            if rx == 1 {
                x = side - 1 - x;
                y = side - 1 - y;
            }
            std::mem::swap(&mut x, &mut y);
        }
        s /= 2;
    }
    d
}

/// Position of cell `p` along the Hilbert curve that fills the cube of `2^bits` cells a side
/// (`1 ≤ bits ≤ 32`, every coordinate below `2^bits`), by Skilling's transform ("Programming the
/// Hilbert curve", AIP Conf. Proc. 707, 2004): the coordinates are turned, level by level from
/// the coarsest, into the "transposed" index, whose bits interleaved (x's first) are the
/// position.
fn hilbert_index_3d(bits: u32, mut p: [u64; 3]) -> u128 {
    debug_assert!((1..=32).contains(&bits) && p.iter().all(|&c| c < 1 << bits));
    // Undo the rotations and reflections of the coarser levels.
    let mut q = 1u64 << (bits - 1);
    while q > 1 {
        let low = q - 1;
        for i in 0..3 {
            if p[i] & q != 0 {
                p[0] ^= low;
            } else {
                let t = (p[0] ^ p[i]) & low;
                p[0] ^= t;
                p[i] ^= t;
            }
        }
        q >>= 1;
    }
    // Gray-encode.
    p[1] ^= p[0];
    p[2] ^= p[1];
    let mut t = 0;
    let mut q = 1u64 << (bits - 1);
    while q > 1 {
        if p[2] & q != 0 {
            t ^= q - 1;
        }
        q >>= 1;
    }
    p.iter_mut().for_each(|c| *c ^= t);
    (0..bits).rev().fold(0, |d, b| p.iter().fold(d, |d, c| (d << 1) | u128::from((c >> b) & 1)))
}

impl Partitioner for HilbertPrefix {
    fn name(&self) -> &str {
        "hilbert"
    }

    fn partition(&mut self, grid: &Grid, loads: &[f64], parts: usize) -> Result<Vec<u32>> {
        let problem = pbs::Problem::new(*grid, loads, parts)?;
        let mut order: Vec<usize> = (0..grid.len()).collect();
        if grid.nz() == 1 {
            let side = (grid.nx().max(grid.ny()) as u64).next_power_of_two();
            order.sort_unstable_by_key(|&k| {
                let [i, j, _] = grid.coords(k);
                hilbert_index(side, i as u64, j as u64)
            });
        } else {
            // A side is below 2^32 (a grid holds at most 2^32 − 1 boxes): 96 bits of position.
            let side = grid.nx().max(grid.ny()).max(grid.nz()) as u64;
            let bits = side.next_power_of_two().trailing_zeros().max(1);
            order.sort_unstable_by_key(|&k| {
                let [i, j, l] = grid.coords(k);
                hilbert_index_3d(bits, [i as u64, j as u64, l as u64])
            });
        }
        // Rescaled at extreme scales (see `pbs::Problem`), so that the running sums are finite.
        Ok(split_order(&order, problem.loads(), parts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quality;

    #[test]
    fn the_curve_visits_every_cell_once_through_neighbours() {
        for side in [1u64, 2, 4, 8, 32] {
            let mut cells = vec![(0, 0); (side * side) as usize];
            for x in 0..side {
                for y in 0..side {
                    cells[hilbert_index(side, x, y) as usize] = (x, y);
                }
            }
            // It starts in the lower left corner and ends in the lower right one, through the
            // upper left quadrant second, as `hilbert_index` describes its order.
            let half = (side / 2).max(1);
            assert_eq!(cells[0], (0, 0));
            assert_eq!(cells[cells.len() - 1], (side - 1, 0), "side {side}");
            if side > 1 {
                let second = cells[cells.len() / 4];
                assert!(second.0 < half && second.1 >= half, "side {side}: {second:?}");
            }
            for w in cells.windows(2) {
                let (a, b) = (w[0], w[1]);
                assert_eq!(a.0.abs_diff(b.0) + a.1.abs_diff(b.1), 1, "side {side}: {a:?} -> {b:?}");
            }
        }
    }

    #[test]
    fn the_3d_curve_visits_every_cell_once_through_neighbours() {
        for bits in [1u32, 2, 3, 4] {
            let side = 1u64 << bits;
            let mut cells = vec![None; (side * side * side) as usize];
            for x in 0..side {
                for y in 0..side {
                    for z in 0..side {
                        let d = hilbert_index_3d(bits, [x, y, z]) as usize;
                        assert!(cells[d].is_none(), "bits {bits}: position {d} twice");
                        cells[d] = Some([x, y, z]);
                    }
                }
            }
            let cells: Vec<[u64; 3]> = cells.into_iter().map(|c| c.expect("every position once")).collect();
            assert_eq!(cells[0], [0, 0, 0]);
            for w in cells.windows(2) {
                let steps: u64 = (0..3).map(|a| w[0][a].abs_diff(w[1][a])).sum();
                assert_eq!(steps, 1, "bits {bits}: {:?} -> {:?}", w[0], w[1]);
            }
            // Each octant is one run of the curve (a part of an eighth is a cube).
            for run in cells.chunks(cells.len() / 8) {
                let octant = |c: &[u64; 3]| c.map(|v| v >= side / 2);
                assert!(run.iter().all(|c| octant(c) == octant(&run[0])), "bits {bits}");
            }
        }
        // The widest sides a grid may have: positions of up to 96 bits, none past the last.
        let top = (1u64 << 32) - 1;
        let corners = [[0, 0, 0], [top, 0, 0], [0, top, top], [top, top, top]];
        assert!(corners.iter().all(|&c| hilbert_index_3d(32, c) < 1 << 96));
    }

    #[test]
    fn square_and_cubic_power_of_two_grids_give_connected_balanced_parts() {
        let map = pbs::loadmap::PerlinMap::with_seed(9);
        let (square, cube) = (Grid::new(64, 64).unwrap(), Grid::new_3d(16, 16, 16).unwrap());
        for (grid, loads) in [(square, map.loads(&square)), (cube, map.loads_3d(&cube))] {
            for parts in [3, 10, 16, 72] {
                let owners = HilbertPrefix.partition(&grid, &loads, parts).unwrap();
                let q = quality::measure(&grid, &loads, &owners, parts);
                assert_eq!((q.disconnected_parts, q.empty_parts), (0, 0), "{grid}, {parts}");
                assert!(q.max_avg < 1.05, "{grid}, {parts}: {q:?}");
            }
        }
    }
}
