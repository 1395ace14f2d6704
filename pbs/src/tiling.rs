//! From a code's cells to the balancer's boxes: a domain of `cells_x × cells_y` cells cut into
//! tiles of `tile_x × tile_y` cells, one tile per box, the last tile of a row or column
//! smaller when the tile size does not divide the domain (ragged edges).
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
//! assert_eq!((t.grid().nx, t.grid().ny), (7, 4)); // the last column and row are ragged
//! let k = t.box_of_cell(99, 29);
//! assert_eq!(t.cells_of_box(k), (96..100, 24..30));
//! # Ok::<(), pbs::Error>(())
//! ```

use std::ops::Range;

use crate::error::{Error, Result};
use crate::grid::Grid;

/// Cells cut into rectangular tiles, one tile per box of [`Tiling::grid`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tiling {
    cells: [usize; 2],
    tile: [usize; 2],
    grid: Grid,
}

impl Tiling {
    /// `cells_x × cells_y` cells in tiles of `tile_x × tile_y`; an error names a zero size.
    pub fn new(cells_x: usize, cells_y: usize, tile_x: usize, tile_y: usize) -> Result<Tiling> {
        for (name, v) in [("cells_x", cells_x), ("cells_y", cells_y), ("tile_x", tile_x), ("tile_y", tile_y)] {
            if v == 0 {
                return Err(Error::Parameter { name, value: "0".into(), reason: "must be at least 1 cell" });
            }
        }
        let grid = Grid::new(cells_x.div_ceil(tile_x), cells_y.div_ceil(tile_y))?;
        Ok(Tiling { cells: [cells_x, cells_y], tile: [tile_x, tile_y], grid })
    }

    /// The grid of boxes, one per tile.
    pub fn grid(&self) -> Grid {
        self.grid
    }

    /// The box whose tile holds cell `(x, y)`. Panics outside the domain.
    pub fn box_of_cell(&self, x: usize, y: usize) -> usize {
        assert!(x < self.cells[0] && y < self.cells[1], "cell ({x}, {y}) outside {:?}", self.cells);
        self.grid.index(x / self.tile[0], y / self.tile[1], 0)
    }

    /// The cells of box `k`'s tile: its columns and rows. Panics for a box outside the grid.
    pub fn cells_of_box(&self, k: usize) -> (Range<usize>, Range<usize>) {
        assert!(k < self.grid.len(), "box {k} of {}", self.grid.len());
        let [i, j, _] = self.grid.coords(k);
        let span = |a: usize, axis: usize| a * self.tile[axis]..((a + 1) * self.tile[axis]).min(self.cells[axis]);
        (span(i, 0), span(j, 1))
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

    #[test]
    fn a_zero_size_is_named() {
        assert!(Tiling::new(10, 10, 0, 4).unwrap_err().to_string().contains("tile_x"));
        assert!(Tiling::new(0, 10, 2, 4).unwrap_err().to_string().contains("cells_x"));
    }
}
