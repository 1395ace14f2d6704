//! From a code's cells to the balancer's boxes: a domain of `cells_x × cells_y` cells cut into
//! tiles of `tile_x × tile_y` cells (or a 3D domain into boxes of cells, [`Tiling::new_3d`]),
//! one tile per box, the last tile of a row or column smaller when the tile size does not
//! divide the domain (ragged edges).
//!
//! Choosing the tile shape: a box is one task, so a tile should hold enough work to dwarf a
//! task's overhead (about a microsecond) and be a block of memory the task reads in long
//! runs. On a row-major array, tiles of whole rows (`tile_x = cells_x`) read contiguous
//! memory, square tiles read `tile_y` short runs; square tiles keep the halo small (the
//! cells a tile reads from its neighbours). Prefer whole-row or wide tiles for streaming
//! codes on row-major data, square tiles when the halo exchange or the balancer's freedom
//! (boxes in both directions) matter more, and at least a few boxes per thread.
//!
//! ```
//! use pbs::tiling::Tiling;
//! let t = Tiling::new(100, 30, 16, 8)?; // 100×30 cells in 16×8 tiles
//! assert_eq!((t.grid().nx(), t.grid().ny()), (7, 4)); // the last column and row are ragged
//! let k = t.box_of_cell(99, 29);
//! assert_eq!(t.cells_of_box(k), (96..100, 24..30));
//! # Ok::<(), pbs::Error>(())
//! ```

use std::ops::Range;

use crate::error::{Error, Result};
use crate::grid::Grid;

/// Cells cut into rectangular tiles (boxes of cells on a 3D domain), one tile per box of
/// [`Tiling::grid`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tiling {
    cells: [usize; 3],
    tile: [usize; 3],
    grid: Grid,
}

impl Tiling {
    /// `cells_x × cells_y` cells in tiles of `tile_x × tile_y`; an error names a zero size.
    pub fn new(cells_x: usize, cells_y: usize, tile_x: usize, tile_y: usize) -> Result<Tiling> {
        // The z sizes are 1, so their names are never given.
        let names = ["cells_x", "cells_y", "cells_z", "tile_x", "tile_y", "tile_z"];
        Tiling::checked(names, [cells_x, cells_y, 1], [tile_x, tile_y, 1])
    }

    /// `cells[0] × cells[1] × cells[2]` cells in tiles of `tile[0] × tile[1] × tile[2]`, the
    /// last tile along each axis smaller where the tile does not divide the domain; an error
    /// names a zero size.
    ///
    /// ```
    /// let t = pbs::tiling::Tiling::new_3d([64, 64, 30], [16, 16, 8])?;
    /// assert_eq!(t.grid().dims(), [4, 4, 4]); // the last layer of tiles is 6 cells deep
    /// assert_eq!(t.cells_of_box_3d(t.box_of_cell_3d([63, 0, 29])), [48..64, 0..16, 24..30]);
    /// # Ok::<(), pbs::Error>(())
    /// ```
    pub fn new_3d(cells: [usize; 3], tile: [usize; 3]) -> Result<Tiling> {
        Tiling::checked(["cells[0]", "cells[1]", "cells[2]", "tile[0]", "tile[1]", "tile[2]"], cells, tile)
    }

    /// The tiling, each size checked under its name (cells, then tiles, x to z).
    fn checked(names: [&'static str; 6], cells: [usize; 3], tile: [usize; 3]) -> Result<Tiling> {
        if let Some((name, _)) = names.into_iter().zip(cells.into_iter().chain(tile)).find(|&(_, v)| v == 0) {
            return Err(Error::Parameter { name, value: "0".into(), reason: "must be at least 1 cell" });
        }
        let [nx, ny, nz] = [0, 1, 2].map(|a| cells[a].div_ceil(tile[a]));
        let grid = Grid::new_3d(nx, ny, nz)?;
        Ok(Tiling { cells, tile, grid })
    }

    /// The grid of boxes, one per tile.
    pub fn grid(&self) -> Grid {
        self.grid
    }

    /// The box whose tile holds cell `(x, y)` of the first layer of cells. Panics outside
    /// the domain.
    pub fn box_of_cell(&self, x: usize, y: usize) -> usize {
        self.box_of_cell_3d([x, y, 0])
    }

    /// The box whose tile holds cell `c`. Panics outside the domain.
    pub fn box_of_cell_3d(&self, c: [usize; 3]) -> usize {
        assert!((0..3).all(|a| c[a] < self.cells[a]), "cell {c:?} outside {:?}", self.cells);
        self.grid.index(c[0] / self.tile[0], c[1] / self.tile[1], c[2] / self.tile[2])
    }

    /// The cells of box `k`'s tile: its columns and rows (on a 3D tiling,
    /// [`Tiling::cells_of_box_3d`] gives its layers too). Panics for a box outside the grid.
    pub fn cells_of_box(&self, k: usize) -> (Range<usize>, Range<usize>) {
        let [xs, ys, _] = self.cells_of_box_3d(k);
        (xs, ys)
    }

    /// The cells of box `k`'s tile along x, y and z. Panics for a box outside the grid.
    pub fn cells_of_box_3d(&self, k: usize) -> [Range<usize>; 3] {
        assert!(k < self.grid.len(), "box {k} of {}", self.grid.len());
        let b = self.grid.coords(k);
        // A tile starts inside the domain, so its start does not overflow; its end may, with
        // tiles of more than half of `usize::MAX` cells, and is cut to the domain.
        [0, 1, 2].map(|a| {
            let start = b[a] * self.tile[a];
            start..start.saturating_add(self.tile[a]).min(self.cells[a])
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every cell is in exactly one tile, and the tile of its box.
        #[test]
        fn tiles_partition_the_cells(cx in 1usize..40, cy in 1usize..40, tx in 1usize..50, ty in 1usize..50) {
            let t = Tiling::new(cx, cy, tx, ty).unwrap();
            let mut seen = vec![0u8; cx * cy];
            for k in 0..t.grid().len() {
                let (xs, ys) = t.cells_of_box(k);
                prop_assert!(!xs.is_empty() && !ys.is_empty());
                for y in ys.clone() {
                    for x in xs.clone() {
                        seen[y * cx + x] += 1;
                        prop_assert_eq!(t.box_of_cell(x, y), k);
                    }
                }
            }
            prop_assert!(seen.iter().all(|&s| s == 1));
        }
    }

    proptest! {
        /// In 3D too: every cell in exactly one tile, the tile of its box, none empty.
        #[test]
        fn tiles_partition_the_cells_in_3d(
            cells in prop::array::uniform3(1usize..12), tile in prop::array::uniform3(1usize..15),
        ) {
            let t = Tiling::new_3d(cells, tile).unwrap();
            let mut seen = vec![0u8; cells.iter().product()];
            for k in 0..t.grid().len() {
                let [xs, ys, zs] = t.cells_of_box_3d(k);
                prop_assert!(!xs.is_empty() && !ys.is_empty() && !zs.is_empty());
                for z in zs {
                    for y in ys.clone() {
                        for x in xs.clone() {
                            seen[(z * cells[1] + y) * cells[0] + x] += 1;
                            prop_assert_eq!(t.box_of_cell_3d([x, y, z]), k);
                        }
                    }
                }
            }
            prop_assert!(seen.iter().all(|&s| s == 1));
        }
    }

    #[test]
    fn a_zero_size_is_named() {
        assert!(Tiling::new(10, 10, 0, 4).unwrap_err().to_string().contains("tile_x"));
        assert!(Tiling::new(0, 10, 2, 4).unwrap_err().to_string().contains("cells_x"));
        assert!(Tiling::new_3d([4, 4, 0], [2, 2, 2]).unwrap_err().to_string().contains("cells[2]"));
        assert!(Tiling::new_3d([4, 4, 4], [2, 0, 2]).unwrap_err().to_string().contains("tile[1]"));
        assert_eq!(Tiling::new(7, 5, 2, 2).unwrap(), Tiling::new_3d([7, 5, 1], [2, 2, 1]).unwrap());
    }

    /// Tiles of more than half the cells a `usize` counts: the second one's end does not wrap.
    #[test]
    fn the_largest_sizes_do_not_overflow() {
        let half = usize::MAX / 2 + 1;
        let t = Tiling::new(usize::MAX, 1, half, 1).unwrap();
        assert_eq!(t.grid().nx(), 2);
        assert_eq!(t.cells_of_box(1), (half..usize::MAX, 0..1));
        assert_eq!(t.box_of_cell(usize::MAX - 1, 0), 1);
    }
}
