//! Cells to boxes from C: `pbs_tiling_grid`, `pbs_tiling_cells` and their 3D forms (`pbs::tiling`).

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
        (*nx, *ny) = (grid.nx(), grid.ny());
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

/// The three sizes at `p`, or an error naming it where it is NULL.
///
/// # Safety
/// `p` is NULL or points to three readable `size_t`.
unsafe fn three(p: *const usize, what: &str) -> Result<[usize; 3], crate::status::Failure> {
    // SAFETY: NULL or three readable, aligned `size_t` (caller's contract); NULL is refused.
    unsafe { p.cast::<[usize; 3]>().as_ref() }.copied().ok_or_else(|| null(what))
}

/// The 3D tiling of `cells[0] × cells[1] × cells[2]` cells in tiles of `tile[0] × tile[1] ×
/// tile[2]`, from C's arrays.
///
/// # Safety
/// `cells` and `tile` are NULL (refused) or point to three readable `size_t` each.
unsafe fn tiling_3d(cells: *const usize, tile: *const usize) -> Result<Tiling, crate::status::Failure> {
    // SAFETY: passed on from the caller's contract.
    let (cells, tile) = unsafe { (three(cells, "cells")?, three(tile, "tile")?) };
    Ok(Tiling::new_3d(cells, tile)?)
}

/// The grid of boxes for a 3D domain of `cells[0..3]` cells in tiles of `tile[0..3]`, written
/// into `grid[0..3]` (boxes along x, y and z).
///
/// # Safety
/// `cells` and `tile` are NULL (refused) or point to three readable `size_t` each; `grid` is
/// NULL (refused) or points to three writable ones.
#[no_mangle]
pub unsafe extern "C" fn pbs_tiling_grid_3d(cells: *const usize, tile: *const usize, grid: *mut usize) -> Status {
    status(|| {
        if grid.is_null() {
            return Err(null("grid"));
        }
        // SAFETY: the caller's contract for `cells` and `tile`.
        let dims = unsafe { tiling_3d(cells, tile) }?.grid().dims();
        // SAFETY: not NULL (checked), so three writable, aligned `size_t` (caller's contract);
        // written through the pointer, no reference made.
        unsafe { grid.cast::<[usize; 3]>().write(dims) };
        Ok(())
    })
}

/// The cells of box `k`'s tile in a 3D tiling: `lo[a] <= c < hi[a]` along each axis `a`.
///
/// # Safety
/// `cells` and `tile` are NULL (refused) or point to three readable `size_t` each; `lo` and
/// `hi` are NULL (refused) or point to three writable ones each.
#[no_mangle]
pub unsafe extern "C" fn pbs_tiling_cells_3d(
    cells: *const usize,
    tile: *const usize,
    k: usize,
    lo: *mut usize,
    hi: *mut usize,
) -> Status {
    status(|| {
        if let Some((_, what)) = [(lo, "lo"), (hi, "hi")].into_iter().find(|(p, _)| p.is_null()) {
            return Err(null(what));
        }
        // SAFETY: the caller's contract for `cells` and `tile`.
        let tiling = unsafe { tiling_3d(cells, tile) }?;
        let boxes = tiling.grid().len();
        if k >= boxes {
            return Err(invalid(format!("box {k} of {boxes} (boxes are 0 to {})", boxes - 1)));
        }
        let ranges = tiling.cells_of_box_3d(k);
        // SAFETY: neither is NULL (checked), so each is three writable, aligned `size_t`
        // (caller's contract); written through the pointers, no references made, so one array
        // given twice is no aliasing of references (it ends holding `hi`).
        unsafe {
            lo.cast::<[usize; 3]>().write([0, 1, 2].map(|a| ranges[a].start));
            hi.cast::<[usize; 3]>().write([0, 1, 2].map(|a| ranges[a].end));
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

    #[test]
    fn tiles_in_3d_from_c_match_the_rust_tiling_and_bad_input_is_named() {
        let (cells, tile) = ([64usize, 64, 30], [16usize, 16, 8]);
        let mut grid = [0usize; 3];
        // SAFETY: three readable sizes each, three writable.
        assert_eq!(unsafe { pbs_tiling_grid_3d(cells.as_ptr(), tile.as_ptr(), grid.as_mut_ptr()) }, Status::Ok);
        assert_eq!(grid, [4, 4, 4]);
        let (mut lo, mut hi) = ([0usize; 3], [0usize; 3]);
        let cells_of = |k: usize, lo: &mut [usize; 3], hi: &mut [usize; 3]| {
            // SAFETY: as above.
            unsafe { pbs_tiling_cells_3d(cells.as_ptr(), tile.as_ptr(), k, lo.as_mut_ptr(), hi.as_mut_ptr()) }
        };
        let tiling = Tiling::new_3d(cells, tile).unwrap();
        for k in [0, 17, 63] {
            assert_eq!(cells_of(k, &mut lo, &mut hi), Status::Ok);
            let ranges = tiling.cells_of_box_3d(k);
            assert_eq!((lo, hi), ([0, 1, 2].map(|a| ranges[a].start), [0, 1, 2].map(|a| ranges[a].end)), "box {k}");
        }
        assert_eq!((lo, hi), ([48, 48, 24], [64, 64, 30]), "the last box is ragged along z");
        assert_eq!(cells_of(64, &mut lo, &mut hi), Status::InvalidArgument);
        assert!(crate::status::last_error().unwrap().contains("box 64 of 64"));
        let null = std::ptr::null_mut();
        // SAFETY: NULL pointers are refused, each by its name.
        unsafe {
            assert_eq!(pbs_tiling_grid_3d(std::ptr::null(), tile.as_ptr(), grid.as_mut_ptr()), Status::NullPointer);
            assert!(crate::status::last_error().unwrap().contains("cells"));
            assert_eq!(pbs_tiling_grid_3d(cells.as_ptr(), tile.as_ptr(), null), Status::NullPointer);
            assert!(crate::status::last_error().unwrap().contains("grid"));
            assert_eq!(
                pbs_tiling_cells_3d(cells.as_ptr(), tile.as_ptr(), 0, lo.as_mut_ptr(), null),
                Status::NullPointer
            );
            assert!(crate::status::last_error().unwrap().contains("hi"));
        }
        let flat = [8usize, 8, 0];
        // SAFETY: three readable sizes each, three writable.
        let s = unsafe { pbs_tiling_grid_3d(flat.as_ptr(), tile.as_ptr(), grid.as_mut_ptr()) };
        assert_eq!(s, Status::InvalidArgument);
        assert!(crate::status::last_error().unwrap().contains("cells[2]"));
    }
}
