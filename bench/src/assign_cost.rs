//! Cost of one cell assignment, fast (kd split with candidate pruning) against the
//! brute-force oracle, on random power diagrams. Medians of repeated timings.

use std::time::Instant;

use pbs::assign::{assign, assign_brute, Assignment};
use pbs::rng::SplitMix64;
use pbs::{Grid, Point};

use crate::Stats;

/// One measurement.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AssignCost {
    /// grid side (square grids)
    pub side: usize,
    /// boxes
    pub boxes: usize,
    /// vCores
    pub vcores: usize,
    /// median microseconds per fast assignment
    pub fast_us: f64,
    /// median microseconds per brute-force assignment
    pub brute_us: f64,
    /// brute / fast
    pub speedup: f64,
    /// fast nanoseconds per box (flat when the cost is linear in boxes)
    pub fast_ns_per_box: f64,
}

/// Random positions in the domain and weights of a few box² (like a balanced state).
pub fn random_sites(grid: &Grid, n: usize, seed: u64) -> (Vec<Point>, Vec<f64>) {
    let mut r = SplitMix64::new(seed);
    let e = grid.extent();
    let sites = (0..n).map(|_| grid.clamp([r.next_f64() * e[0], r.next_f64() * e[1], 0.5])).collect();
    let spacing2 = grid.len() as f64 / n as f64;
    let w = (0..n).map(|_| (r.next_f64() - 0.5) * 0.5 * spacing2).collect();
    (sites, w)
}

/// Different diagrams the timings take turns on: timing one diagram over and over lets the
/// branch predictor learn its boxes' outcomes (one 150×150, 72-vCore diagram timed repeatedly
/// took 0.15 ms; the balancer's own assignments of such a grid, each new, 0.22–0.27 ms).
pub const DIAGRAMS: u64 = 16;

/// Median microseconds of `f(i)` over `reps` calls, `i` cycling through the diagrams.
fn median_us(reps: usize, mut f: impl FnMut(usize)) -> f64 {
    f(DIAGRAMS as usize - 1); // warm-up, on another diagram than the first timing's
    let times: Vec<f64> = (0..reps)
        .map(|r| {
            let t = Instant::now();
            f(r % DIAGRAMS as usize);
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    Stats::of(&times).median
}

/// Measures one (side, vCores) point; `reps` timings each, median kept, each timing on the
/// next of [`DIAGRAMS`] random diagrams.
pub fn measure(side: usize, vcores: usize, reps: usize) -> AssignCost {
    let grid = Grid::new(side, side).expect("non-empty");
    let diagrams: Vec<(Vec<Point>, Vec<f64>)> =
        (0..DIAGRAMS).map(|d| random_sites(&grid, vcores, (side as u64 * 31 + vcores as u64) * DIAGRAMS + d)).collect();
    let mut a = Assignment::default();
    let fast_us = median_us(reps, |i| assign(&grid, &diagrams[i].0, &diagrams[i].1, &mut a));
    let brute_reps = (reps / 4).max(3);
    let brute_us = median_us(brute_reps, |i| assign_brute(&grid, &diagrams[i].0, &diagrams[i].1, &mut a));
    AssignCost {
        side,
        boxes: grid.len(),
        vcores,
        fast_us,
        brute_us,
        speedup: brute_us / fast_us,
        fast_ns_per_box: fast_us * 1e3 / grid.len() as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The derived figures are the measured ones' ratios; the sites lie in the grid with
    /// weights of a fraction of the spacing squared, the same for a seed.
    #[test]
    fn a_measurement_derives_its_ratios_from_its_timings() {
        let start = Instant::now();
        let c = measure(12, 5, 3);
        let wall_us = start.elapsed().as_secs_f64() * 1e6;
        // Medians of timings within the call, in microseconds.
        assert!(c.fast_us + c.brute_us <= wall_us && c.fast_us > 1e-6 * wall_us, "{c:?} in {wall_us} µs");
        assert_eq!((c.side, c.boxes, c.vcores), (12, 144, 5));
        assert!(c.fast_us > 0.0 && c.brute_us > 0.0, "{c:?}");
        assert_eq!(c.speedup, c.brute_us / c.fast_us);
        assert_eq!(c.fast_ns_per_box, c.fast_us * 1e3 / 144.0);
        let grid = Grid::new(12, 9).unwrap();
        let (sites, weights) = random_sites(&grid, 40, 7);
        assert_eq!((sites.len(), weights.len()), (40, 40));
        assert!(sites.iter().all(|p| (0.0..=12.0).contains(&p[0]) && (0.0..=9.0).contains(&p[1])));
        let spacing2 = 108.0 / 40.0;
        assert!(weights.iter().all(|w| w.abs() <= 0.25 * spacing2), "{weights:?}");
        assert!(weights.iter().any(|w| *w > 0.0) && weights.iter().any(|w| *w < 0.0));
        // Spread over the grid and over the weights' range, not stuck at an edge or near 0.
        for (axis, side) in [(0, 12.0), (1, 9.0)] {
            assert!(sites.iter().any(|p| p[axis] < side / 3.0) && sites.iter().any(|p| p[axis] > 2.0 * side / 3.0));
        }
        assert!(weights.iter().any(|w| w.abs() > 0.1 * spacing2), "{weights:?}");
        assert_eq!(random_sites(&grid, 40, 7), (sites, weights));
        assert_ne!(random_sites(&grid, 40, 8).0, random_sites(&grid, 40, 7).0);
    }
}
