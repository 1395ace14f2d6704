//! pbs beside rayon in one process: each iteration runs a pbs phase over a 64×64-box grid,
//! then a second loop over the boxes either as another pbs phase or as a rayon parallel
//! iterator on rayon's global pool (created after the executor, from the thread that drives
//! it). Rayon's idle workers yield while they look for work and soon sleep, pbs's spin 200 µs
//! yielding: neither should slow the other much. See docs/coexistence.md.
//!
//! `cargo run --release -p pbs-scheduler --example beside_rayon -- [rounds] [iterations]`
//!
//! Printed: the median milliseconds per iteration of each variant, and the median over rounds
//! of the ratio mixed / pure pbs, with the workers pinned (the caller during phases only) and
//! unpinned. Exit status 1 if a ratio is over 1.1.
use std::time::Instant;

use pbs::Grid;
use pbs_scheduler::pinning::Pinning;
use pbs_scheduler::runtime::Runtime;
use pbs_scheduler::Executor;
use rayon::prelude::*;

mod common;
use common::OrFail;

const LIMIT: f64 = 1.1;

/// About `units` × 0.04 µs of arithmetic that the optimiser cannot remove.
fn work(units: u32) -> f64 {
    let mut x = 1.0f64;
    for i in 0..units * 10 {
        x = std::hint::black_box(x * 1.000_000_1 + f64::from(i & 7) * 1e-9);
    }
    x
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Milliseconds per iteration of `iterations` iterations: a phase of `cost` units per box
/// (heavier in a band of rows), then the second loop through pbs or rayon.
fn run(exec: &mut dyn Executor, grid: &Grid, iterations: usize, with_rayon: bool) -> f64 {
    let sink: Vec<std::sync::atomic::AtomicU64> = (0..grid.len()).map(|_| Default::default()).collect();
    let start = Instant::now();
    for _ in 0..iterations {
        exec.run_phase(&|k| {
            let [_, y, _] = grid.coords(k);
            let units = if (16..37).contains(&y) { 90 } else { 30 };
            sink[k].store(work(units).to_bits(), std::sync::atomic::Ordering::Relaxed);
        });
        let second = |k: usize| {
            sink[k].fetch_add(work(10).to_bits() & 1, std::sync::atomic::Ordering::Relaxed);
        };
        if with_rayon {
            (0..grid.len()).into_par_iter().for_each(second);
        } else {
            exec.run_phase(&second);
        }
        exec.end_iteration();
    }
    start.elapsed().as_secs_f64() * 1e3 / iterations as f64
}

fn main() {
    const EXAMPLE: &str = "beside_rayon";
    let args = common::arguments(EXAMPLE, 2);
    let rounds = common::count(EXAMPLE, &args, 0, "rounds", 7, 1);
    let iterations = common::count(EXAMPLE, &args, 1, "iterations", 200, 1);
    let grid = Grid::new(64, 64).expect("a 64×64 grid");
    let mut failed = false;
    for pin in [Pinning::Off, Pinning::Workers] {
        let runtime = Runtime { pin, ..Runtime::detect().or_fail(EXAMPLE, "this machine") };
        let (mut exec, _) = runtime.executor("pbs", grid).or_fail(EXAMPLE, "a pbs executor");
        let (mut pure, mut mixed, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            // Alternate which goes first, so that a drift in machine speed hits both alike.
            let order = if round % 2 == 0 { [false, true] } else { [true, false] };
            let mut t = [0.0; 2];
            for with_rayon in order {
                t[usize::from(with_rayon)] = run(exec.as_mut(), &grid, iterations, with_rayon);
            }
            pure.push(t[0]);
            mixed.push(t[1]);
            ratios.push(t[1] / t[0]);
        }
        let ratio = median(&mut ratios);
        println!(
            "{pin:?}: pure pbs {:.3} ms/iteration, pbs + rayon {:.3}, mixed / pure {ratio:.3} (median of {rounds} rounds)",
            median(&mut pure),
            median(&mut mixed)
        );
        failed |= ratio > LIMIT;
    }
    if failed {
        println!("beside_rayon: a mixed run was over {LIMIT}x the pure-pbs one");
        std::process::exit(1);
    }
}
