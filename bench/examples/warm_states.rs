//! Warm rebalancings of the same states under two values of the power-cell method's
//! `later_step` (where a rebalancing's later end-game line searches start; docs/peers.md, "Half
//! steps after the first"): `cargo run --release -p pbs-bench --example warm_states -- [SLOW_MS]`.
//!
//! For each grid (64² / 16 to 256² / 256 parts) and Perlin seeds 1–4: a cold start, then 60
//! drifting steps (half a box each, as `pbs-bench peers` drifts its maps); each step's state is
//! rebalanced with `later_step` 0.5 (the default, which the sequence then follows) and 1 (the
//! full step every time, on a copy), in alternating order. Prints the total time and steps of
//! each, and every rebalancing of the default that took over SLOW_MS milliseconds (30): where
//! it started and ended, and its steps.
use std::time::Instant;

use pbs::loadmap::PerlinMap;
use pbs::methods::{PowerCells, PowerCellsSettings};
use pbs::{balance, rebalance, Grid, Problem, StopRule, VCores};

fn main() {
    let counts = pbs_bench::example_counts("warm_states [SLOW_MS]", &[Some(30)]);
    let slow_ms = counts[0] as f64;
    let fail = |e: &dyn std::fmt::Display| -> ! {
        eprintln!("warm_states: {e}");
        std::process::exit(2);
    };
    let method = |later_step| {
        PowerCells::new(PowerCellsSettings { later_step, ..Default::default() }).unwrap_or_else(|e| fail(&e))
    };
    for (side, parts) in [(64usize, 16usize), (96, 36), (128, 64), (150, 72), (200, 100), (256, 256)] {
        let grid = Grid::new(side, side).unwrap_or_else(|e| fail(&e));
        // (milliseconds, balancer steps) of the default and of the full step.
        let (mut half, mut full) = ((0.0, 0), (0.0, 0));
        for seed in 1..=4 {
            let mut map = PerlinMap::with_seed(seed);
            let loads = map.loads(&grid);
            let problem = Problem::new(grid, &loads, parts).unwrap_or_else(|e| fail(&e));
            let (mut default, mut whole) = (method(0.5), method(1.0));
            let mut vcores = VCores::from_bisection(&problem);
            balance(&mut default, &problem, &mut vcores, StopRule::before_refinement(&problem), |_| {});
            for step in 0..60 {
                map = map.smooth(0.5);
                let loads = map.loads(&grid);
                let problem = Problem::new(grid, &loads, parts).unwrap_or_else(|e| fail(&e));
                // The copy charged with the new loads (a rebalancing starts so anyway) gives
                // where the state starts.
                let mut copy = vcores.clone();
                copy.recharge(&problem);
                let start = copy.max_avg();
                for pass in 0..2 {
                    let default_now = (pass == 0) == (step % 2 == 0);
                    let t = Instant::now();
                    if default_now {
                        let out = rebalance(&mut default, &problem, &mut vcores, StopRule::default());
                        let ms = t.elapsed().as_secs_f64() * 1e3;
                        (half.0, half.1) = (half.0 + ms, half.1 + out.steps);
                        if ms > slow_ms {
                            println!(
                                "  slow: {side}² / {parts}, seed {seed}, step {step}: {ms:.1} ms, {} steps, max_avg {start:.4} to {:.4}",
                                out.steps, out.max_avg
                            );
                        }
                    } else {
                        let out = rebalance(&mut whole, &problem, &mut copy, StopRule::default());
                        (full.0, full.1) = (full.0 + t.elapsed().as_secs_f64() * 1e3, full.1 + out.steps);
                    }
                }
            }
        }
        println!(
            "{side}² / {parts} parts, 4 seeds × 60 steps: later_step 0.5 {:.1} ms ({} steps), 1 {:.1} ms ({} steps): {:.3} ×",
            half.0,
            half.1,
            full.0,
            full.1,
            half.0 / full.0
        );
    }
}
