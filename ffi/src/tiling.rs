//! Cells to boxes from C: `pbs_tiling_grid` and `pbs_tiling_cells` (`pbs::tiling`).

use pbs::tiling::Tiling;

use crate::status::{invalid, null, status, Status};

/// The grid of boxes for `cells_x × cells_y` cells in tiles of `tile_x × tile_y`: `*nx × *ny`.
///
/// # Safety
/// `nx` and `ny` are NULL (refused) or writable.
#[no_mangle]
pub unsafe extern "C" fn pbs_tiling_grid(
    cells_x: usize,
    cells_y: usize,
    tile_x: usize,
    tile_y: usize,
    nx: *mut usize,
    ny: *mut usize,
) -> Status {
    status(|| {
        // SAFETY: NULL or writable (caller's contract); NULL is refused.
        let (nx, ny) = unsafe { (nx.as_mut().ok_or_else(|| null("nx"))?, ny.as_mut().ok_or_else(|| null("ny"))?) };
        let grid = Tiling::new(cells_x, cells_y, tile_x, tile_y)?.grid();
        (*nx, *ny) = (grid.nx, grid.ny);
        Ok(())
    })
}

/// The cells of box `k`'s tile: columns `[*x0, *x1)` and rows `[*y0, *y1)`.
///
/// # Safety
/// The four outputs are NULL (refused) or writable.
#[allow(clippy::too_many_arguments)]
#[no_mangle]
pub unsafe extern "C" fn pbs_tiling_cells(
    cells_x: usize,
    cells_y: usize,
    tile_x: usize,
    tile_y: usize,
    k: usize,
    x0: *mut usize,
    x1: *mut usize,
    y0: *mut usize,
    y1: *mut usize,
) -> Status {
    status(|| {
        let tiling = Tiling::new(cells_x, cells_y, tile_x, tile_y)?;
        let boxes = tiling.grid().len();
        if k >= boxes {
            return Err(invalid(format!("box {k} of {boxes} (boxes are 0 to {})", boxes - 1)));
        }
        let (xs, ys) = tiling.cells_of_box(k);
        for (out, v, what) in [(x0, xs.start, "x0"), (x1, xs.end, "x1"), (y0, ys.start, "y0"), (y1, ys.end, "y1")] {
            // SAFETY: NULL or writable (caller's contract); NULL is refused.
            *unsafe { out.as_mut() }.ok_or_else(|| null(what))? = v;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_from_c_match_the_rust_tiling_and_bad_input_is_named() {
        let (mut nx, mut ny) = (0, 0);
        // SAFETY: writable outputs.
        assert_eq!(unsafe { pbs_tiling_grid(100, 30, 16, 8, &mut nx, &mut ny) }, Status::Ok);
        assert_eq!((nx, ny), (7, 4));
        let mut r = [0usize; 4];
        let [a, b, c, d] = &mut r;
        // SAFETY: writable outputs.
        let s = unsafe { pbs_tiling_cells(100, 30, 16, 8, 27, a, b, c, d) };
        assert_eq!((s, r), (Status::Ok, [96, 100, 24, 30]));
        let [a, b, c, d] = &mut r;
        // SAFETY: as above.
        assert_eq!(unsafe { pbs_tiling_cells(100, 30, 16, 8, 28, a, b, c, d) }, Status::InvalidArgument);
        assert!(crate::status::last_error().unwrap().contains("box 28 of 28"));
        // SAFETY: NULL outputs are refused, zero sizes named.
        assert_eq!(unsafe { pbs_tiling_grid(10, 10, 0, 2, &mut nx, std::ptr::null_mut()) }, Status::NullPointer);
        // SAFETY: writable outputs.
        assert_eq!(unsafe { pbs_tiling_grid(10, 10, 0, 2, &mut nx, &mut ny) }, Status::InvalidArgument);
        assert!(crate::status::last_error().unwrap().contains("tile_x"));
    }
}
