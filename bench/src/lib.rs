//! # pbs-bench — the measurements of the project
//!
//! The `pbs-bench` command line (`cargo run --release -p pbs-bench -- --help`), as a library so
//! that tests drive exactly what the command line runs. Every comparison runs side by side in
//! one process: balancers on the same load maps, executors taking turns on the same app.
//!
//! ```
//! use pbs_bench::run::{run, schedulers, RunSetup};
//! // `pbs-bench run --app stencil --scheduler all --threads 2 --iters 4 --nx 8 --ny 8`
//! let setup = RunSetup {
//!     app: "stencil".into(),
//!     scenario: "drift".into(),
//!     schedulers: schedulers("all").unwrap(),
//!     threads: 2,
//!     iters: 4,
//!     nx: 8,
//!     ny: 8,
//!     nz: 1,
//!     cache_bytes: 1 << 20,
//!     pin: false,
//!     seed: 1,
//!     turn_iters: 0,
//! };
//! let rows = run(&setup, || {}).unwrap();
//! assert_eq!(rows.len(), 11); // pbs, ws, eager, static and the seven remappers
//! assert!(rows.iter().all(|r| r.checksum == rows[0].checksum), "same result under every executor");
//! ```
//!
//! | command | module | what |
//! |---|---|---|
//! | `converge` | [`converge`] | balance static cases, Perlin maps or CSV load maps from scratch |
//! | `transitions` | [`transitions`] | rough / smooth Perlin transitions, warm-started (the paper's Tables 1–3) |
//! | `paper` | [`paper`] | the paper's Tables 1–3 and Fig. 5, our method and the paper's side by side, markdown + PNG |
//! | `shapes` | [`shapes`] | load maps of shapes the paper never named, for generality checks |
//! | `peers` | [`peers`] | pbs beside RCB, Hilbert, coupe and METIS on the same maps |
//! | `run` | [`run`] | one grid app under chosen executors, taking turns |
//! | `lifetime` | [`lifetime`] | how long each balancer's partition of md lasts at many parts (NoRCB's claim) |
//! | `report`, `scaling` | [`matrix`], [`scaling`] | every app × scenario × executor at one thread count, or several |
//!
//! The apps live in `pbs-apps`, the plots in `pbs-plot`; [`table`] prints aligned tables.

#![deny(missing_docs)]

pub mod assign_cost;
pub mod converge;
pub mod lifetime;
pub mod matrix;
pub mod model;
pub mod paper;
pub mod peers;
pub mod run;
pub mod scaling;
pub mod shapes;
pub mod starpu;
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

/// Lets output piped into `head` or a pager that quits end the program quietly, by SIGPIPE, as
/// C tools do: Rust ignores SIGPIPE, so the next print would get EPIPE and `println!` would
/// panic with a backtrace. For `pbs-bench` and the examples, first thing in `main`.
pub fn end_quietly_on_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: `signal` with `SIG_DFL`, a valid action for SIGPIPE, only sets the process's
    // disposition of that signal; it touches no memory of ours.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Ends an example that cannot go on: `name: e` on stderr and exit status 2, as a bad usage
/// does in [`example_counts`].
pub fn example_failed(name: &str, e: &dyn std::fmt::Display) -> ! {
    eprintln!("{name}: {e}");
    std::process::exit(2);
}

/// Positive integers from the command line, for the examples: one per entry of `defaults`
/// (`None`: required). Anything else prints `usage` and exits with status 2.
pub fn example_counts(usage: &str, defaults: &[Option<usize>]) -> Vec<usize> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    counts_of(usage, &args, defaults)
}

/// [`example_counts`] of the arguments `args`.
pub fn counts_of(usage: &str, args: &[String], defaults: &[Option<usize>]) -> Vec<usize> {
    let counts: Option<Vec<usize>> = (args.len() <= defaults.len())
        .then(|| {
            defaults
                .iter()
                .enumerate()
                .map(|(i, d)| match args.get(i) {
                    Some(a) => a.parse::<usize>().ok().filter(|&v| v > 0),
                    None => *d,
                })
                .collect()
        })
        .flatten();
    counts.unwrap_or_else(|| {
        eprintln!("usage: {usage}, each a positive integer");
        std::process::exit(2);
    })
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
