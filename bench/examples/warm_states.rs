//! Warm rebalancings of the same states under the power-cell method's default settings and
//! under one setting changed: `cargo run --release -p pbs-bench --example warm_states --
//! [SLOW_MS] [OTHER] [FIRST_SEED]`. OTHER 1 (the default) starts every end-game line search from
//! the full step (`later_step` 1; docs/peers.md, "Half steps after the first"); OTHER 2 lets a
//! rebalancing crawl a box a step for as long as that improves (`flip_steps` 0; docs/peers.md,
//! "Crawling end games").
//!
//! For each grid (64² / 16 to 256² / 256 parts) and Perlin seeds FIRST_SEED to FIRST_SEED + 3
//! (1): a cold start, then 60 drifting steps (half a box each, as `pbs-bench peers` drifts its
//! maps); each step's state is rebalanced with the default settings (which the sequence then
//! follows) and with the other ones (on a copy), in alternating order. Prints, for each, the
//! total time, steps, boxes moved and rebalancings over SLOW_MS milliseconds (30), and every
//! such rebalancing of the default: where it started and ended, and its steps.
use std::time::Instant;

use pbs::loadmap::PerlinMap;
use pbs::methods::{PowerCells, PowerCellsSettings};
use pbs::{balance, metrics, rebalance, Grid, Problem, StopRule, VCores};

/// Perlin seeds per grid.
const SEEDS: u32 = 4;

/// Drifting steps per seed, each one rebalancing on either side.
const STEPS: usize = 60;

/// Totals of one side over a grid's rebalancings.
#[derive(Default)]
struct Totals {
    ms: f64,
    steps: usize,
    moved: usize,
    slow: usize,
}

impl Totals {
    fn add(&mut self, ms: f64, steps: usize, moved: usize, slow_ms: f64) {
        self.ms += ms;
        self.steps += steps;
        self.moved += moved;
        self.slow += usize::from(ms > slow_ms);
    }

    fn show(&self, count: usize) -> String {
        let per = |v: usize| v as f64 / count as f64;
        format!(
            "{:.1} ms, {} steps, {:.1} boxes moved a step, {} slow",
            self.ms,
            self.steps,
            per(self.moved),
            self.slow
        )
    }
}

fn main() {
    pbs_bench::end_quietly_on_closed_pipe();
    let counts = pbs_bench::example_counts("warm_states [SLOW_MS] [OTHER] [FIRST_SEED]", &[Some(30), Some(1), Some(1)]);
    let (slow_ms, first_seed) = (counts[0] as f64, counts[2] as u32);
    let fail = |e: &dyn std::fmt::Display| -> ! { pbs_bench::example_failed("warm_states", e) };
    let (other_name, other) = match counts[1] {
        1 => ("later_step 1", PowerCellsSettings { later_step: 1.0, ..Default::default() }),
        2 => ("flip_steps 0", PowerCellsSettings { flip_steps: 0, ..Default::default() }),
        v => fail(&format!("OTHER is 1 (later_step 1) or 2 (flip_steps 0), not {v}")),
    };
    let method = |settings| PowerCells::new(settings).unwrap_or_else(|e| fail(&e));
    let seeds = first_seed..first_seed.saturating_add(SEEDS);
    for (side, parts) in [(64usize, 16usize), (96, 36), (128, 64), (150, 72), (200, 100), (256, 256)] {
        let grid = Grid::new(side, side).unwrap_or_else(|e| fail(&e));
        let (mut default, mut changed) = (Totals::default(), Totals::default());
        for seed in seeds.clone() {
            let mut map = PerlinMap::with_seed(seed);
            let loads = map.loads(&grid);
            let problem = Problem::new(grid, &loads, parts).unwrap_or_else(|e| fail(&e));
            let (mut method_default, mut method_other) = (method(PowerCellsSettings::default()), method(other));
            let mut vcores = VCores::from_bisection(&problem);
            balance(&mut method_default, &problem, &mut vcores, StopRule::before_refinement(&problem), |_| {});
            for step in 0..STEPS {
                map = map.smooth(0.5);
                let loads = map.loads(&grid);
                let problem = Problem::new(grid, &loads, parts).unwrap_or_else(|e| fail(&e));
                // The copy charged with the new loads (a rebalancing starts so anyway) gives
                // where the state starts.
                let mut copy = vcores.clone();
                copy.recharge(&problem);
                let start = copy.max_avg();
                let before = vcores.owners().to_vec();
                for pass in 0..2 {
                    let default_now = (pass == 0) == (step % 2 == 0);
                    let t = Instant::now();
                    if default_now {
                        let out = rebalance(&mut method_default, &problem, &mut vcores, StopRule::default());
                        let ms = t.elapsed().as_secs_f64() * 1e3;
                        default.add(ms, out.steps, metrics::migrations(&before, vcores.owners()), slow_ms);
                        if ms > slow_ms {
                            println!(
                                "  slow: {side}² / {parts}, seed {seed}, step {step}: {ms:.1} ms, {} steps, max_avg {start:.4} to {:.4}",
                                out.steps, out.max_avg
                            );
                        }
                    } else {
                        let out = rebalance(&mut method_other, &problem, &mut copy, StopRule::default());
                        let ms = t.elapsed().as_secs_f64() * 1e3;
                        changed.add(ms, out.steps, metrics::migrations(&before, copy.owners()), slow_ms);
                    }
                }
            }
        }
        let count = seeds.len() * STEPS;
        println!(
            "{side}² / {parts} parts, seeds {}–{}, {STEPS} steps each: default {}; {other_name} {}: time {:.3} ×",
            seeds.start,
            seeds.end - 1,
            default.show(count),
            changed.show(count),
            default.ms / changed.ms
        );
    }
}
