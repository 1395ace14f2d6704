//! Per-phase overhead with empty tasks on 10^4 boxes, every kind of executor side by side:
//! `cargo run --release -p pbs-scheduler --example overhead -- [threads] [blocks]`.
//! pbs and the remappers (one loop for all six: `rcb` stands for them) measure their box times
//! as by default; the baselines run as plain loops, as their users would write them.
//!
//! On a shared VM the speed of the machine drifts over seconds (the same loop takes 9 µs in one
//! second and 16 µs in the next), which swamps a 10 % difference between executors measured
//! one after the other. So the executors take turns: in each *block* every executor runs 200
//! phases, the block's ratio pbs/executor compares medians taken within a few milliseconds
//! of each other, and the figure printed is the median of the block ratios. The criterion
//! bench (`cargo bench -p pbs-scheduler --bench overhead`) measures the same loops one
//! executor after the other.
use std::sync::Arc;
use std::time::Instant;

use pbs::Grid;
use pbs_scheduler::executors::{
    EagerFifo, Pbs, PbsOptions, RemapOptions, Remapper, Remapping, StaticBlocks, Stealing, WorkStealing,
};
use pbs_scheduler::pool::Pool;
use pbs_scheduler::{BoxTimer, Executor};

mod common;
use common::OrFail;

const PHASES_PER_BLOCK: usize = 200;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    const EXAMPLE: &str = "overhead";
    let args = common::arguments(EXAMPLE, 2);
    let threads = common::count(EXAMPLE, &args, 0, "threads", 2, 1);
    let blocks = common::count(EXAMPLE, &args, 1, "blocks", 200, 1);
    let grid = Grid::new(100, 100).unwrap();
    let n = grid.len();
    let plain = BoxTimer::OFF;
    let mut execs: Vec<(&str, Box<dyn Executor>)> = vec![
        ("pbs", Box::new(Pbs::new(grid, threads, PbsOptions::default()).or_fail(EXAMPLE, "an executor"))),
        (
            "pbs+steal",
            Box::new(
                Pbs::new(grid, threads, PbsOptions { steal: Stealing::Always, ..PbsOptions::default() })
                    .or_fail(EXAMPLE, "an executor"),
            ),
        ),
        ("ws", Box::new(WorkStealing::with_start(n, threads, Arc::new(|_| {}), plain).or_fail(EXAMPLE, "an executor"))),
        (
            "eager",
            Box::new(
                EagerFifo::with_pool(n, Pool::new(threads, Arc::new(|_| {})).or_fail(EXAMPLE, "an executor"), plain)
                    .or_fail(EXAMPLE, "an executor"),
            ),
        ),
        (
            "static",
            Box::new(
                StaticBlocks::with_pool(n, Pool::new(threads, Arc::new(|_| {})).or_fail(EXAMPLE, "an executor"), plain)
                    .or_fail(EXAMPLE, "an executor"),
            ),
        ),
        (
            "rcb",
            Box::new(Remapping::new(grid, threads, RemapOptions::new(Remapper::Rcb)).or_fail(EXAMPLE, "an executor")),
        ),
    ];
    println!(
        "empty tasks, {n} boxes, {threads} threads, {blocks} blocks of {PHASES_PER_BLOCK} phases per executor, taking turns"
    );
    let mut block_medians = vec![Vec::with_capacity(blocks); execs.len()];
    let mut times = vec![0.0; PHASES_PER_BLOCK];
    for _ in 0..blocks {
        for (i, (_, e)) in execs.iter_mut().enumerate() {
            for t in times.iter_mut() {
                let start = Instant::now();
                e.run_phase(&|k| {
                    std::hint::black_box(k);
                });
                e.end_iteration();
                *t = start.elapsed().as_secs_f64() * 1e6;
            }
            block_medians[i].push(median(&mut times));
        }
    }
    println!("{:<10} {:>12} {:>12} {:>22}", "executor", "median µs", "range µs", "pbs / executor (IQR)");
    for (i, (name, _)) in execs.iter().enumerate() {
        let mut ratios: Vec<f64> = block_medians[0].iter().zip(&block_medians[i]).map(|(p, x)| p / x).collect();
        ratios.sort_by(f64::total_cmp);
        let q = |f: f64| ratios[((ratios.len() - 1) as f64 * f).round() as usize];
        let own = &mut block_medians[i].clone();
        let m = median(own);
        let (lo, hi) = (own[0], own[own.len() - 1]);
        println!(
            "{name:<10} {m:>12.1} {:>12} {:>10.2} ({:.2}–{:.2})",
            format!("{lo:.1}–{hi:.1}"),
            q(0.5),
            q(0.25),
            q(0.75)
        );
    }
}
