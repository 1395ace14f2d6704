//! pbs's own work in a phase, before and after the threads' part (`PhaseStats::wall` less
//! `pool_wall`: the threads' counters, each list's claim word and stolen times), and
//! the threads' wait at the phase's barrier for the last of them, on 64 boxes a thread with
//! stealing on and a third of the boxes twice as heavy, so that thieves steal in every phase:
//! `cargo run --release -p pbs-scheduler --example executor_sweep -- [threads] [phases]
//! [boxes a thread]`. On the fifth 16-core lease the first grew by about 0.9 µs a thread on md,
//! and the second was 5–7 % of md's time (docs/results.md, "a fifth lease"); this measures them
//! alone, medians over phases, for builds in turn. It also times `end_iteration` (one phase an
//! iteration, never a rebalancing): the many-core model's work between iterations, whose slope
//! the lease could not tell between threads and boxes (vary the third argument to tell them
//! apart).
use std::time::{Duration, Instant};

use pbs::Grid;
use pbs_scheduler::criteria::Never;
use pbs_scheduler::executors::{Pbs, PbsOptions, Stealing};
use pbs_scheduler::Executor;

mod common;
use common::OrFail;

fn main() {
    const EXAMPLE: &str = "executor_sweep";
    let args = common::arguments(EXAMPLE, 3);
    let threads = common::count(EXAMPLE, &args, 0, "threads", 2, 1);
    let phases = common::count(EXAMPLE, &args, 1, "phases", 20_000, 1);
    let per_thread = common::count(EXAMPLE, &args, 2, "boxes a thread", 64, 1);
    let boxes =
        per_thread.checked_mul(threads).unwrap_or_else(|| common::fail(EXAMPLE, "more boxes than a usize holds"));
    let side = (boxes as f64).sqrt().ceil() as usize;
    let grid = Grid::new(side, side).or_fail(EXAMPLE, "the grid");
    let n = grid.len();
    // Never rebalance: the sweep alone, over the same owners in every phase.
    let options = PbsOptions { steal: Stealing::Always, criterion: Some(Box::new(Never)), ..PbsOptions::default() };
    let mut pbs = Pbs::new(grid, threads, options).or_fail(EXAMPLE, "the executor");
    let spin = |d: Duration| {
        let start = Instant::now();
        while start.elapsed() < d {
            std::hint::spin_loop();
        }
    };
    let (mut own, mut waiting) = (Vec::with_capacity(phases), Vec::with_capacity(phases));
    let mut between = Vec::with_capacity(phases);
    let mut stolen = 0usize;
    for p in 0..phases {
        let stats = pbs.run_phase(&|k| spin(Duration::from_nanos(if k < n / 3 { 400 } else { 200 })));
        if p >= phases / 10 {
            own.push(stats.wall.saturating_sub(stats.pool_wall).as_secs_f64() * 1e6);
            waiting.push(stats.idle_parts().waiting * 1e6);
            stolen += stats.compared - stats.same_thread;
        }
        let ended = Instant::now();
        pbs.end_iteration();
        if p >= phases / 10 {
            between.push(ended.elapsed().as_secs_f64() * 1e6);
        }
    }
    let phases = own.len();
    let quantiles = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let q = |f: f64| v[((v.len() - 1) as f64 * f) as usize];
        format!("median {:.2} µs, p10 {:.2}, p90 {:.2}", q(0.5), q(0.1), q(0.9))
    };
    println!(
        "pbs's own work in a phase, {threads} threads, {n} boxes, {phases} phases: {}; waiting at the barrier (mean over threads): {}; boxes away from their last thread per phase {:.1}; end_iteration: {}",
        quantiles(own),
        quantiles(waiting),
        stolen as f64 / phases as f64,
        quantiles(between)
    );
}
