//! # pbs-apps — grid mini-apps that drive the executors
//!
//! Two real codes, written owner-computes, deterministic under every executor:
//!
//! | app | what it computes | its load | file |
//! |---|---|---|---|
//! | [`md::Md`] | Lennard-Jones molecular dynamics with cell lists (one box = one cell of the list), in 2D or, on a 3D grid ([`build_3d`]), 3D; `md-split` runs it as two phases, rebin then forces ([`md::Md::split_phases`]) | particles per box, moved by the scenario (uniform, contraction, expansion, gravity) | `md.rs` |
//! | [`stencil::Stencil`] | a 5-point Jacobi stencil, one tile of cells per box; on a 3D grid ([`build_3d`]) a 7-point one on cubic tiles | an extra per-box cost from a drifting Perlin map (drift, rough) | `stencil.rs` |
//!
//! Every app keeps its state per box, runs each iteration as phases in which a box's task
//! reads its neighbours' data from a previous phase and writes only its own, and sums in a
//! fixed order within a box. Hence [`GridApp::checksum`] is the same under every executor and
//! thread count (`tests/checksums.rs`).
//!
//! ```
//! use pbs_scheduler::{executors::StaticBlocks, report::Recorder};
//! let mut app = pbs_apps::build("stencil", "drift", 16, 16, 1)?;
//! let mut exec = StaticBlocks::new(app.grid().len(), 2)?;
//! let mut rec = Recorder::new("static", 2);
//! for _ in 0..3 {
//!     app.iterate(&mut exec, &mut rec, None);
//! }
//! assert_eq!(rec.iteration_ms().len(), 3);
//! println!("checksum {:016x}", app.checksum());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]

pub mod distributed;
pub mod md;
mod memory;

pub use memory::fits_in_memory;
pub mod stencil;

use pbs::Grid;
use pbs_scheduler::cache_model::{CacheModel, Footprint};
use pbs_scheduler::report::Recorder;
use pbs_scheduler::Executor;

/// A grid code.
pub trait GridApp: Send {
    /// `md`, `md-split` or `stencil`.
    fn name(&self) -> &'static str;
    /// Its grid of boxes.
    fn grid(&self) -> Grid;
    /// What one box's task touches and writes, for the modelled cache.
    fn footprint(&self) -> Footprint;
    /// One iteration on `exec`; every phase is recorded, and if a cache model is given every
    /// box execution is fed to it.
    fn iterate(&mut self, exec: &mut dyn Executor, rec: &mut Recorder, cache: Option<&CacheModel>);
    /// A hash of the whole state, bit for bit.
    fn checksum(&self) -> u64;
    /// Work per box in the last iteration, for pictures of the load (arbitrary units).
    fn box_work(&self) -> Vec<f64>;
}

/// The apps by name.
pub const APPS: [&str; 3] = ["md", "md-split", "stencil"];

/// The scenario an app runs when none is named: `gravity` for md and md-split, `drift` for
/// the stencil.
pub fn default_scenario(app: &str) -> &'static str {
    if app.starts_with("md") {
        "gravity"
    } else {
        "drift"
    }
}

/// A fresh `app` (`md` or `stencil`) in `scenario` on `nx × ny` boxes, its randomness (md's
/// initial velocities, the stencil's cost map) drawn from `seed`. An error names what is
/// unknown or out of range.
pub fn build(app: &str, scenario: &str, nx: usize, ny: usize, seed: u64) -> Result<Box<dyn GridApp>, String> {
    build_3d(app, scenario, nx, ny, 1, seed)
}

/// [`build`] on `nx × ny × nz` boxes: with `nz` > 1 md runs in 3D ([`md::Md::new_3d`]) and the
/// stencil is a 7-point one on cubic tiles with a 3D cost map.
pub fn build_3d(
    app: &str,
    scenario: &str,
    nx: usize,
    ny: usize,
    nz: usize,
    seed: u64,
) -> Result<Box<dyn GridApp>, String> {
    let grid = Grid::new_3d(nx, ny, nz).map_err(|e| e.to_string())?;
    match app {
        "md" | "md-split" | "stencil" => Ok(distributed::build_holding(app, scenario, grid, seed, None)?),
        a => Err(format!("unknown app {a:?}; expected md, md-split or stencil")),
    }
}

/// Whether md's state fits on `grid` with `held` boxes holding particles: at most
/// [`md::MAX_BOXES`] boxes (32-bit particle ids), and the memory (2D on one layer, 3D on more).
pub(crate) fn md_fits(grid: &Grid, held: usize) -> Result<(), String> {
    memory::check_state("md particles", grid.len(), held, md_state_bytes(grid)?)
}

/// What md's state takes a box on `grid` (the 3D app's on more than one layer), or why md
/// cannot run there: more boxes than its 32-bit particle ids allow.
fn md_state_bytes(grid: &Grid) -> Result<memory::StateBytes, String> {
    if grid.len() > md::MAX_BOXES {
        return Err(format!(
            "md on {grid}: {} boxes, more than the {} its 32-bit particle ids allow",
            grid.len(),
            md::MAX_BOXES
        ));
    }
    Ok(if grid.nz() > 1 { md::Md::<3>::state_bytes() } else { md::Md::<2>::state_bytes() })
}

/// FNV-1a's starting state.
pub(crate) const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a over 64-bit words, in order, continued from the state `h` ([`FNV_START`], or the
/// hash of the words before these): the apps' checksums.
pub(crate) fn fnv_from(mut h: u64, words: impl Iterator<Item = u64>) -> u64 {
    for w in words {
        for b in w.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// md runs on up to `MAX_BOXES` boxes, exactly that many included, and sizes its state as
    /// the 3D app's wherever the grid has more than one layer.
    #[test]
    fn md_s_state_is_sized_by_the_grid_s_dimensions_up_to_its_box_limit() {
        let at_limit = Grid::new(md::MAX_BOXES, 1).unwrap();
        assert_eq!(md_state_bytes(&at_limit), Ok(md::Md::<2>::state_bytes()));
        let e = md_state_bytes(&Grid::new(md::MAX_BOXES + 1, 1).unwrap()).unwrap_err();
        assert!(e.contains("more than the 159072862 its 32-bit particle ids allow"), "{e}");
        assert_ne!(md::Md::<2>::state_bytes(), md::Md::<3>::state_bytes());
        for (nz, three) in [(1, false), (2, true), (5, true)] {
            let want = if three { md::Md::<3>::state_bytes() } else { md::Md::<2>::state_bytes() };
            assert_eq!(md_state_bytes(&Grid::new_3d(4, 4, nz).unwrap()), Ok(want), "{nz} layers");
        }
    }
}
