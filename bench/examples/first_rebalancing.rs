//! The executor's first rebalancing at many vCores: moving the cells back against starting
//! over (`pbs::rebalance`):
//! `cargo run --release -p pbs-bench --example first_rebalancing [-- SCENARIO ...]` (md;
//! default gravity and contraction).
//!
//! The executor starts from a mapping balanced on uniform loads and, at the first iteration
//! with measured loads, runs the balancer from there (20 steps at most). This prints, at 16,
//! 64 and 256 vCores (256 boxes each), what a run of that length reaches when it moves the
//! cells from where they are (`pbs::balance`) and when it starts over from the centroids of a
//! k-way RCB of the measured loads, the cells keeping the ids they overlap most
//! (`VCores::restarted_from_bisection`, which `pbs::rebalance` does from `RESTART_FROM` × the
//! lower bound): max_avg over the lower bound, steps, time and boxes moved; what the restart
//! itself costs, in ms and in steps of the run after it; and where the restart's cells would
//! start as plain Voronoi cells of the same centroids (weights zero) instead of cells sized to
//! the parts. docs/design-notes.md ("Starting over") reads it.
use std::time::Instant;

use pbs::{balance, methods, Grid, Problem, StopRule, VCores};
use pbs_bench::model::trace::Trace;

fn main() {
    pbs_bench::end_quietly_on_closed_pipe();
    let mut scenarios: Vec<String> = std::env::args().skip(1).collect();
    if scenarios.is_empty() {
        scenarios = vec!["gravity".into(), "contraction".into()];
    }
    let stop = StopRule { max_steps: 20, tol: 0.02 };
    println!("scenario      grid      vCores  start  | moved back: steps  reached  ms     moved  | started over: start  steps  reached  ms     moved  restart ms (steps)  | Voronoi start: start  steps  reached");
    for scenario in &scenarios {
        for (side, parts) in [(64usize, 16usize), (128, 64), (256, 256)] {
            let trace = match Trace::record("md", scenario, side, side, 2, 1) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("error: {e}");
                    std::process::exit(2);
                }
            };
            let grid = Grid::new(side, side).expect("a valid grid");
            let ones = vec![1.0; grid.len()];
            let uniform = Problem::new(grid, &ones, parts).expect("a valid problem");
            let mut balancer = methods::by_name(methods::DEFAULT).expect("the default method");
            // The executor's first mapping: random vCores balanced on uniform loads.
            let mut vcores = VCores::random(&uniform, 1);
            balance(balancer.as_mut(), &uniform, &mut vcores, StopRule { max_steps: 200, tol: 0.02 }, |_| {});
            let loads = trace.loads(1);
            let problem = Problem::new(grid, &loads, parts).expect("measured loads are valid");
            vcores.recharge(&problem);
            let before = vcores.owners().to_vec();
            let bound = problem.lower_bound();
            let moved = |o: &[u32]| o.iter().zip(&before).filter(|(a, b)| a != b).count();

            let mut warm = vcores.clone();
            let t = Instant::now();
            let w = balance(balancer.as_mut(), &problem, &mut warm, stop, |_| {});
            let warm_ms = t.elapsed().as_secs_f64() * 1e3;

            let t = Instant::now();
            let mut fresh = vcores.restarted_from_bisection(&problem);
            let restart_ms = t.elapsed().as_secs_f64() * 1e3;
            let fresh_start = fresh.max_avg() / bound;
            let mut voronoi = VCores::new(&problem, fresh.positions().to_vec(), vec![0.0; parts])
                .expect("the restart's positions are finite");
            let voronoi_start = voronoi.max_avg() / bound;
            let f = balance(balancer.as_mut(), &problem, &mut fresh, stop, |_| {});
            let fresh_ms = t.elapsed().as_secs_f64() * 1e3;
            let step_ms = (fresh_ms - restart_ms) / f.steps.max(1) as f64;
            let v = balance(balancer.as_mut(), &problem, &mut voronoi, stop, |_| {});
            println!(
                "{scenario:<13} {:<9} {parts:>6}  {:>5.3}  |             {:>5}  {:>7.3}  {warm_ms:>5.1}  {:>6}  |               {fresh_start:>5.3}  {:>5}  {:>7.3}  {fresh_ms:>5.1}  {:>6}  {restart_ms:>5.1} ({:.1})  |                {voronoi_start:>5.3}  {:>5}  {:>7.3}",
                format!("{side}×{side}"),
                vcores.max_avg() / bound,
                w.steps,
                w.max_avg / w.lower_bound,
                moved(warm.owners()),
                f.steps,
                f.max_avg / f.lower_bound,
                moved(fresh.owners()),
                restart_ms / step_ms,
                v.steps,
                v.max_avg / v.lower_bound,
            );
        }
    }
}
