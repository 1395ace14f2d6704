//! Adapters for coupe's geometric partitioners (LIHPC, crates.io `coupe` 0.1): boxes are
//! points at their centres (2D points on a grid of one layer, 3D ones on more), weighted by
//! their loads, and coupe's parts become ours (numbered in the order of their first box, so
//! that runs repeat). coupe 0.1's Hilbert curve is 2D only.

use coupe::{Partition as _, PointND};
use pbs::{Grid, Problem};

use crate::{Error, Partitioner, Result};

/// The boxes' centres as coupe points of `D` coordinates (x, y, then z).
fn centres<const D: usize>(grid: &Grid) -> Vec<PointND<D>> {
    (0..grid.len())
        .map(|k| {
            let c = grid.centre(k);
            PointND::from(std::array::from_fn::<f64, D, _>(|a| c[a]))
        })
        .collect()
}

/// coupe's parts with our ids: checked to be below `parts` (a library bug must not become an
/// out-of-bounds index in the measures), then numbered in the order of each part's first box.
/// coupe 0.1's multi-jagged numbers the same parts differently from run to run (its parallel
/// recursion: 143 of 200 runs of one map, 2026-12-04); numbered this way, runs repeat.
fn to_u32(method: &str, ids: Vec<usize>, parts: usize) -> Result<Vec<u32>> {
    if let Some(&p) = ids.iter().find(|&&p| p >= parts) {
        return Err(coupe_error(method, format!("returned part id {p} for {parts} parts")));
    }
    let mut ours = vec![u32::MAX; parts];
    let mut next = 0;
    Ok(ids
        .into_iter()
        .map(|p| {
            if ours[p] == u32::MAX {
                ours[p] = next;
                next += 1;
            }
            ours[p]
        })
        .collect())
}

fn coupe_error(method: &str, e: impl std::fmt::Display) -> Error {
    Error::Coupe { method: method.to_string(), message: e.to_string() }
}

/// Whether a panic raised at `file` (a [`std::panic::Location`]'s) is one of coupe's, which the
/// coupe partitioners here catch and return as an error: a panic hook can leave those to the
/// error, which names the method, and report any other panic as the bug it is.
pub fn raised_in_coupe(file: &str) -> bool {
    // The crate's folder (`coupe-0.1.0` in Cargo's registry, `coupe` in a checkout) holding `src`.
    let names: Vec<&std::ffi::OsStr> = std::path::Path::new(file).iter().collect();
    names.windows(2).any(|w| {
        let folder = w[0].to_string_lossy();
        let version = folder.strip_prefix("coupe-").is_some_and(|v| v.starts_with(|d: char| d.is_ascii_digit()));
        (folder == "coupe" || version) && w[1] == "src"
    })
}

/// Runs a coupe call, turning a panic inside coupe into an error: coupe 0.1's multi-jagged
/// unwraps past the end of its prefix scan on some inputs (rounding in its thresholds).
fn guarded<T>(method: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into());
        Err(coupe_error(method, format!("coupe panicked: {what}")))
    })
}

/// The loads as coupe's weights. coupe 0.1's multi-jagged and Hilbert splits unwrap or index
/// past their prefix sums when the total is zero, or so small or large that its thresholds
/// round away (loads of 1e-300, subnormal, or summing past `f64::MAX`): a zero total becomes
/// unit weights (as METIS gets), and a total outside 1e-100..1e100 the loads over the largest.
/// Loads of any usual size pass as they are, so that the peers' tables do not move.
fn weights(loads: &[f64]) -> std::borrow::Cow<'_, [f64]> {
    let total: f64 = loads.iter().sum();
    if total == 0.0 {
        return vec![1.0; loads.len()].into();
    }
    if (1e-100..=1e100).contains(&total) {
        return loads.into();
    }
    let largest = loads.iter().copied().fold(0.0, f64::max);
    loads.iter().map(|q| q / largest).collect::<Vec<f64>>().into()
}

/// The boxes as coupe points: 2D on a grid of one layer, 3D on more.
enum Points {
    Plane(Vec<PointND<2>>),
    Space(Vec<PointND<3>>),
}

/// The steps every adapter shares: pbs's input checks, the boxes as coupe points, the loads
/// as weights coupe can take, the coupe call (`call`, guarded against panics), and coupe's part
/// ids checked and converted.
fn run(
    method: &str,
    grid: &Grid,
    loads: &[f64],
    parts: usize,
    call: impl FnOnce(&mut [usize], Points, &[f64]) -> Result<()>,
) -> Result<Vec<u32>> {
    Problem::new(*grid, loads, parts)?;
    if parts == 1 {
        // coupe's Hilbert split asserts two points or more.
        return Ok(vec![0; grid.len()]);
    }
    let mut ids = vec![0; grid.len()];
    let points = if grid.nz() == 1 { Points::Plane(centres(grid)) } else { Points::Space(centres(grid)) };
    let weights = weights(loads);
    guarded(method, || call(&mut ids, points, &weights))?;
    to_u32(method, ids, parts)
}

/// coupe's recursive coordinate bisection (`coupe::Rcb`): `log2(parts)` rounds of bisections
/// into equal halves, so only part counts that are powers of two.
#[derive(Debug, Clone, Copy, Default)]
pub struct CoupeRcb;

impl Partitioner for CoupeRcb {
    fn name(&self) -> &str {
        "coupe-rcb"
    }

    fn partition(&mut self, grid: &Grid, loads: &[f64], parts: usize) -> Result<Vec<u32>> {
        let name = self.name();
        run(name, grid, loads, parts, |ids, points, loads| {
            if !parts.is_power_of_two() {
                return Err(Error::PartCount {
                    method: name.to_string(),
                    parts,
                    reason: "coupe's RCB halves every part, so the count must be a power of two",
                });
            }
            let mut rcb = coupe::Rcb { iter_count: parts.trailing_zeros() as usize, tolerance: 0.0, fast: false };
            match points {
                Points::Plane(p) => rcb.partition(ids, (p, loads.to_vec())),
                Points::Space(p) => rcb.partition(ids, (p, loads.to_vec())),
            }
            .map_err(|e| coupe_error(name, e))
        })
    }
}

/// coupe's multi-jagged partitioner (Deveci et al., IEEE TPDS 2016): `parts^(1/rounds)` slabs
/// along one axis per round, each cut again in the next round.
#[derive(Debug, Clone, Copy)]
pub struct CoupeMultiJagged {
    /// Rounds of cuts (2 in 2D: slabs, then a jagged cut of each slab).
    pub rounds: usize,
}

impl Default for CoupeMultiJagged {
    fn default() -> Self {
        CoupeMultiJagged { rounds: 2 }
    }
}

impl Partitioner for CoupeMultiJagged {
    fn name(&self) -> &str {
        "coupe-multi-jagged"
    }

    fn partition(&mut self, grid: &Grid, loads: &[f64], parts: usize) -> Result<Vec<u32>> {
        let mut mj = coupe::MultiJagged { part_count: parts, max_iter: self.rounds.max(1) };
        run(self.name(), grid, loads, parts, |ids, points, loads| {
            // coupe's multi-jagged cannot fail (its error type is uninhabited); its panics are
            // `run`'s to catch.
            let done = match points {
                Points::Plane(p) => mj.partition(ids, (&p[..], loads)),
                Points::Space(p) => mj.partition(ids, (&p[..], loads)),
            };
            match done {
                Ok(metadata) => Ok(metadata),
                Err(never) => match never {},
            }
        })
    }
}

/// coupe's Hilbert-curve split (`coupe::HilbertCurve`), the curve at `order` bits per axis.
#[derive(Debug, Clone, Copy)]
pub struct CoupeHilbert {
    /// Bits per axis of the curve (coupe's default, 12, resolves 4096 positions per axis).
    pub order: u32,
}

impl Default for CoupeHilbert {
    fn default() -> Self {
        CoupeHilbert { order: 12 }
    }
}

impl Partitioner for CoupeHilbert {
    fn name(&self) -> &str {
        "coupe-hilbert"
    }

    fn partition(&mut self, grid: &Grid, loads: &[f64], parts: usize) -> Result<Vec<u32>> {
        let mut h = coupe::HilbertCurve { part_count: parts, order: self.order };
        let name = self.name();
        run(name, grid, loads, parts, |ids, points, loads| match points {
            Points::Plane(p) => h.partition(ids, (p, loads)).map_err(|e| coupe_error(name, e)),
            // coupe 0.1 has its curve for 2D points only.
            Points::Space(_) => Err(Error::NotPlanar { method: name.to_string(), nz: grid.nz() }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_ids_out_of_range_are_an_error_not_a_panic() {
        assert_eq!(to_u32("m", vec![0, 2, 1], 3).unwrap(), vec![0, 1, 2]);
        let e = to_u32("m", vec![0, 3], 3).unwrap_err();
        assert!(e.to_string().contains("returned part id 3 for 3 parts"), "{e}");
    }

    /// Parts are numbered in the order of their first box, whatever ids coupe gave them; a
    /// part coupe left empty takes no id, so the ids in use are the first ones.
    #[test]
    fn parts_are_numbered_in_the_order_of_their_first_box() {
        assert_eq!(to_u32("m", vec![3, 3, 1, 0, 1, 3], 5).unwrap(), vec![0, 0, 1, 2, 1, 0]);
        assert_eq!(to_u32("m", vec![], 2).unwrap(), Vec::<u32>::new());
        let grid = Grid::new(48, 32).unwrap();
        let loads = pbs::loadmap::PerlinMap::with_seed(4).loads(&grid);
        let first = CoupeMultiJagged::default().partition(&grid, &loads, 8).unwrap();
        for _ in 0..50 {
            assert_eq!(CoupeMultiJagged::default().partition(&grid, &loads, 8).unwrap(), first);
        }
    }

    /// A panic's file inside coupe's crate, from the registry or a checkout, is coupe's; this
    /// crate's own coupe adapter and other crates are not.
    #[test]
    fn coupe_s_panics_are_told_by_their_file() {
        for file in [
            "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/coupe-0.1.0/src/algorithms/multi_jagged.rs",
            "/home/u/src/coupe/src/algorithms/hilbert_curve.rs",
        ] {
            assert!(raised_in_coupe(file), "{file}");
        }
        for file in [
            "peers/src/coupe_methods.rs",
            "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/sprs-0.11.6/src/lib.rs",
            "/tmp/coupe-like/src/lib.rs",
            "/home/coupe/pbs/bench/src/bin/pbs-bench.rs",
            "bench/src/bin/pbs-bench.rs",
        ] {
            assert!(!raised_in_coupe(file), "{file}");
        }
    }

    /// Loads coupe 0.1 panicked on (a zero total, 1e-300 loads, subnormal ones, a total past
    /// `f64::MAX`) and one part of one box are partitioned; usual loads reach coupe as they are.
    #[test]
    fn loads_coupe_cannot_sum_are_given_to_it_rescaled() {
        let usual = [0.5, 2.0, 1.0];
        assert!(matches!(weights(&usual), std::borrow::Cow::Borrowed(w) if w == usual));
        assert_eq!(&*weights(&[0.0, 0.0]), &[1.0, 1.0]);
        assert_eq!(&*weights(&[f64::MAX, f64::MAX / 2.0]), &[1.0, 0.5]);
        let grid = Grid::new(8, 8).unwrap();
        let cases: [&dyn Fn(usize) -> f64; 4] =
            [&|_| 0.0, &|k| 1e-300 * (1 + k % 3) as f64, &|k| if k % 2 == 0 { 5e-324 } else { 0.0 }, &|_| f64::MAX];
        for loads in cases {
            let loads: Vec<f64> = (0..grid.len()).map(loads).collect();
            let mut methods: [Box<dyn Partitioner>; 2] =
                [Box::new(CoupeMultiJagged::default()), Box::new(CoupeHilbert::default())];
            for m in &mut methods {
                let owners = m.partition(&grid, &loads, 4).unwrap_or_else(|e| panic!("{}: {e}", m.name()));
                assert!(owners.iter().all(|&p| p < 4));
            }
        }
        let one = Grid::new(1, 1).unwrap();
        assert_eq!(CoupeHilbert::default().partition(&one, &[1.0], 1).unwrap(), vec![0]);
    }
}
