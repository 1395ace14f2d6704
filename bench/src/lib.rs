//! `pbs-bench`: the measurements of the project, as a library so that tests drive exactly what
//! the command line runs.
//!
//! - [`converge`]: balance static cases, Perlin maps or CSV load maps from scratch.
//! - [`transitions`]: rough / smooth Perlin transitions, warm-started (the paper's Tables 1–3).
//! - [`paper`]: the paper's Tables 1–3 and Fig. 5 with our method and the paper's side by side,
//!   as a markdown report with PNG plots.
//! - [`shapes`]: load maps of shapes the paper never named, for generality checks.
//! - [`matrix`] and [`scaling`]: the grid apps under every scheduler, side by side, at one
//!   thread count (`report`) or several (`scaling`).

#![deny(missing_docs)]

pub mod assign_cost;
pub mod converge;
pub mod matrix;
pub mod paper;
pub mod run;
pub mod scaling;
pub mod shapes;
pub mod table;
pub mod transitions;

/// Summary statistics of a sample.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Stats {
    /// mean
    pub avg: f64,
    /// minimum
    pub min: f64,
    /// maximum
    pub max: f64,
    /// median
    pub median: f64,
}

impl Stats {
    /// Statistics of `xs` (all zero for an empty sample).
    pub fn of(xs: &[f64]) -> Stats {
        if xs.is_empty() {
            return Stats { avg: 0.0, min: 0.0, max: 0.0, median: 0.0 };
        }
        let n = xs.len();
        let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Stats { avg: xs.iter().sum::<f64>() / n as f64, min, max, median: pbs::metrics::median(xs) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_of_a_sample() {
        let s = Stats::of(&[3.0, 1.0, 2.0, 10.0]);
        assert_eq!((s.avg, s.min, s.max, s.median), (4.0, 1.0, 10.0, 2.5));
        assert_eq!(Stats::of(&[]).avg, 0.0);
    }
}
