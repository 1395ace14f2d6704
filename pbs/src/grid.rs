//! The grid of Verlet boxes: dimensions, box indices and box centres.
//!
//! Box `k = (l*ny + j)*nx + i` has centre `(i+0.5, j+0.5, l+0.5)` in box units. A 2D grid is
//! a grid with `nz = 1`: every centre and every vCore then sits at `z = 0.5`, so the same
//! code serves 2D and 3D.

use crate::error::{Error, Result};

/// A point of the domain, in box units.
pub type Point = [f64; 3];

/// Squared Euclidean distance.
#[inline]
pub fn dist2(a: &Point, b: &Point) -> f64 {
    let dx = a[0] - b[0];
    let dy = a[1] - b[1];
    let dz = a[2] - b[2];
    dx * dx + dy * dy + dz * dz
}

/// A regular grid of `nx × ny × nz` boxes: at least one along each axis, at most 2³² − 1 in
/// all (box indices are `u32` in owner lists and in the executors' claim words, which an
/// executor's promise to run each box at most once rests on). The dimensions are read through
/// [`Grid::nx`], [`Grid::ny`] and [`Grid::nz`], and set only by [`Grid::new`] and
/// [`Grid::new_3d`], which check them (deserializing checks them too), so that no grid
/// breaks those bounds.
///
/// ```compile_fail
/// // A grid of no box, or of more boxes than a u32 counts, cannot be written down:
/// let grid = pbs::Grid { nx: 0, ny: 1 << 20, nz: 1 << 20 };
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "Dims")]
pub struct Grid {
    nx: usize,
    ny: usize,
    nz: usize,
}

/// A grid's dimensions as they are serialized, checked by [`Grid::new_3d`] when read.
#[derive(serde::Deserialize)]
struct Dims {
    nx: usize,
    ny: usize,
    nz: usize,
}

impl TryFrom<Dims> for Grid {
    type Error = Error;
    fn try_from(d: Dims) -> Result<Grid> {
        Grid::new_3d(d.nx, d.ny, d.nz)
    }
}

/// `nx×ny` on one layer, `nx×ny×nz` on several: how messages and tables name a grid.
///
/// ```
/// assert_eq!(pbs::Grid::new(8, 4).unwrap().to_string(), "8×4");
/// assert_eq!(pbs::Grid::new_3d(8, 4, 2).unwrap().to_string(), "8×4×2");
/// ```
impl std::fmt::Display for Grid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.nz > 1 {
            write!(f, "{}×{}×{}", self.nx, self.ny, self.nz)
        } else {
            write!(f, "{}×{}", self.nx, self.ny)
        }
    }
}

impl Grid {
    /// A 2D grid of `nx × ny` boxes. Fails on a zero dimension.
    pub fn new(nx: usize, ny: usize) -> Result<Grid> {
        Grid::new_3d(nx, ny, 1)
    }

    /// A 3D grid of `nx × ny × nz` boxes. Fails on a zero dimension.
    pub fn new_3d(nx: usize, ny: usize, nz: usize) -> Result<Grid> {
        if nx == 0 || ny == 0 || nz == 0 {
            return Err(Error::EmptyGrid { nx, ny, nz });
        }
        // Box indices are u32 in owner lists and claim words.
        if nx.checked_mul(ny).and_then(|n| n.checked_mul(nz)).is_none_or(|n| n > u32::MAX as usize) {
            return Err(Error::Parameter {
                name: "grid",
                value: format!("{nx}×{ny}×{nz}"),
                reason: "more than 2^32 − 1 boxes",
            });
        }
        Ok(Grid { nx, ny, nz })
    }

    /// Boxes along x.
    #[inline]
    pub fn nx(&self) -> usize {
        self.nx
    }

    /// Boxes along y.
    #[inline]
    pub fn ny(&self) -> usize {
        self.ny
    }

    /// Boxes along z (1 for a 2D grid).
    #[inline]
    pub fn nz(&self) -> usize {
        self.nz
    }

    /// Number of boxes.
    pub fn len(&self) -> usize {
        self.nx * self.ny * self.nz
    }

    /// Always false: every `Grid` is checked non-empty when it is made.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Dimensions as an array `[nx, ny, nz]`.
    pub fn dims(&self) -> [usize; 3] {
        [self.nx, self.ny, self.nz]
    }

    /// Linear index of box `(i, j, l)`.
    #[inline]
    pub fn index(&self, i: usize, j: usize, l: usize) -> usize {
        (l * self.ny + j) * self.nx + i
    }

    /// Coordinates `(i, j, l)` of box `k`.
    #[inline]
    pub fn coords(&self, k: usize) -> [usize; 3] {
        let i = k % self.nx;
        let j = (k / self.nx) % self.ny;
        let l = k / (self.nx * self.ny);
        [i, j, l]
    }

    /// Centre of box `k` in box units.
    #[inline]
    pub fn centre(&self, k: usize) -> Point {
        let [i, j, l] = self.coords(k);
        [i as f64 + 0.5, j as f64 + 0.5, l as f64 + 0.5]
    }

    /// Upper corner of the domain `[nx, ny, nz]` as floats.
    pub fn extent(&self) -> Point {
        [self.nx as f64, self.ny as f64, self.nz as f64]
    }

    /// Clamps a point into the domain, a hair inside the walls so that it stays strictly inside.
    pub fn clamp(&self, p: Point) -> Point {
        let e = self.extent();
        let mut q = p;
        for d in 0..3 {
            let margin = 1e-6;
            q[d] = q[d].clamp(margin, e[d] - margin);
        }
        if self.nz == 1 {
            q[2] = 0.5;
        }
        q
    }

    /// Calls `f(n)` for each face neighbour `n` of box `k` (up to 4 in 2D, 6 in 3D).
    pub fn for_each_neighbour(&self, k: usize, mut f: impl FnMut(usize)) {
        let [i, j, l] = self.coords(k);
        if i > 0 {
            f(k - 1);
        }
        if i + 1 < self.nx {
            f(k + 1);
        }
        if j > 0 {
            f(k - self.nx);
        }
        if j + 1 < self.ny {
            f(k + self.nx);
        }
        if l > 0 {
            f(k - self.nx * self.ny);
        }
        if l + 1 < self.nz {
            f(k + self.nx * self.ny);
        }
    }

    /// Calls `f(a, b)` once for each pair of face-neighbouring boxes (4 neighbours in 2D, 6 in 3D).
    pub fn for_each_neighbour_pair(&self, mut f: impl FnMut(usize, usize)) {
        for l in 0..self.nz {
            for j in 0..self.ny {
                for i in 0..self.nx {
                    let k = self.index(i, j, l);
                    if i + 1 < self.nx {
                        f(k, k + 1);
                    }
                    if j + 1 < self.ny {
                        f(k, k + self.nx);
                    }
                    if l + 1 < self.nz {
                        f(k, k + self.nx * self.ny);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dimensions_read_back_and_any_zero_one_is_refused() {
        let g = Grid::new_3d(3, 4, 5).unwrap();
        assert_eq!((g.nx(), g.ny(), g.nz(), g.len(), g.is_empty()), (3, 4, 5, 60, false));
        for (nx, ny, nz) in [(0, 4, 5), (3, 0, 5), (3, 4, 0)] {
            assert_eq!(Grid::new_3d(nx, ny, nz), Err(Error::EmptyGrid { nx, ny, nz }));
        }
        assert_eq!(dist2(&[1.0, 2.0, 3.0], &[4.0, 6.0, 15.0]), 9.0 + 16.0 + 144.0);
    }

    #[test]
    fn index_and_coords_round_trip() {
        let g = Grid::new_3d(3, 4, 5).unwrap();
        for k in 0..g.len() {
            let [i, j, l] = g.coords(k);
            assert_eq!(g.index(i, j, l), k);
        }
        assert_eq!(g.centre(g.index(2, 1, 0)), [2.5, 1.5, 0.5]);
    }

    #[test]
    fn empty_grid_is_rejected() {
        assert_eq!(Grid::new(0, 5), Err(Error::EmptyGrid { nx: 0, ny: 5, nz: 1 }));
    }

    #[test]
    fn a_grid_too_large_to_index_is_rejected() {
        let e = Grid::new_3d(usize::MAX / 2, 3, 1).unwrap_err();
        assert!(e.to_string().contains("more than 2^32 − 1 boxes"), "{e}");
        assert!(Grid::new(65536, 65536).is_err());
        assert_eq!(Grid::new(65535, 65537).map(|g| g.len()), Ok(u32::MAX as usize));
    }

    /// A grid read back is checked as a grid made is (before, its public fields took any
    /// dimensions, from serde or in code: a grid of no box, or of 2³² boxes whose indices the
    /// executors' `u32` claim words would have cut short).
    #[test]
    fn a_grid_read_back_is_checked_as_one_made() {
        let g = Grid::new_3d(3, 4, 5).unwrap();
        let text = serde_json::to_string(&g).unwrap();
        assert_eq!(text, r#"{"nx":3,"ny":4,"nz":5}"#);
        assert_eq!(serde_json::from_str::<Grid>(&text).unwrap(), g);
        let empty = serde_json::from_str::<Grid>(r#"{"nx":0,"ny":4,"nz":1}"#).unwrap_err();
        assert!(empty.to_string().contains("empty grid"), "{empty}");
        let large = serde_json::from_str::<Grid>(r#"{"nx":65536,"ny":65536,"nz":1}"#).unwrap_err();
        assert!(large.to_string().contains("more than 2^32 − 1 boxes"), "{large}");
    }

    #[test]
    fn neighbour_pairs_are_counted_once() {
        let mut n = 0;
        Grid::new(4, 3).unwrap().for_each_neighbour_pair(|_, _| n += 1);
        assert_eq!(n, 3 * 3 + 4 * 2);
        let mut n3 = 0;
        Grid::new_3d(2, 2, 2).unwrap().for_each_neighbour_pair(|_, _| n3 += 1);
        assert_eq!(n3, 12);
    }

    #[test]
    fn neighbours_of_a_box_match_the_pairs() {
        let g = Grid::new_3d(4, 3, 2).unwrap();
        let mut from_pairs = vec![Vec::new(); g.len()];
        g.for_each_neighbour_pair(|a, b| {
            from_pairs[a].push(b);
            from_pairs[b].push(a);
        });
        for (k, expected) in from_pairs.iter_mut().enumerate() {
            let mut got = Vec::new();
            g.for_each_neighbour(k, |n| got.push(n));
            got.sort();
            expected.sort();
            assert_eq!(&got, expected, "box {k}");
        }
    }

    #[test]
    fn clamp_keeps_points_inside_and_flat_in_2d() {
        let g = Grid::new(10, 5).unwrap();
        let p = g.clamp([-3.0, 7.0, 9.0]);
        assert!(p[0] > 0.0 && p[1] < 5.0);
        assert_eq!(p[2], 0.5);
    }
}
