//! What sharing a rebalancing's assignments with the pool's threads gains: warm-started
//! rebalancings of a drifting Perlin map (the stencil's), each run
//! twice from the same cells, once on the calling thread alone and once with the pool as
//! [`pbs::assign::Workers`]; the owners must come out identical.
//!
//! `cargo run --release -p pbs-scheduler --example parallel_balancer -- [threads[:vcores] …]`
//! (default: `2 2:16`). vCores = threads unless given, as in the executor; 32×32 boxes (the
//! apps') and 64×64; the map drifts 2 boxes per transition, so that most need steps.
use std::sync::Arc;
use std::time::Instant;

use pbs::loadmap::PerlinMap;
use pbs::{balance, methods, Grid, Problem, StopRule, VCores};
use pbs_scheduler::pool::Pool;

mod common;
use common::OrFail;

/// Transitions per case; each is balanced once alone and once with the pool.
const TRANSITIONS: usize = 200;

fn main() {
    let mut cases: Vec<String> = std::env::args().skip(1).collect();
    if cases.is_empty() {
        cases = vec!["2".into(), "2:16".into()];
    }
    println!("threads  vCores  boxes  balance µs alone  with the pool  pool / alone  steps  (medians of {TRANSITIONS} rebalancings)");
    for case in &cases {
        const EXAMPLE: &str = "parallel_balancer";
        let number = |text: &str| text.parse::<usize>().ok().filter(|&n| n > 0);
        let parsed = match case.split_once(':') {
            Some((t, v)) => number(t).zip(number(v)),
            None => number(case).map(|t| (t, t)),
        };
        let (t, v) = parsed.unwrap_or_else(|| {
            common::fail(EXAMPLE, format!("a case is THREADS or THREADS:VCORES, each at least 1, got {case:?}"))
        });
        let pool = Pool::new(t, Arc::new(|_| {})).or_fail(EXAMPLE, "the pool");
        for side in [32usize, 64] {
            let grid = Grid::new(side, side).expect("a grid");
            // The stencil's map: few large features with sharp peaks.
            let mut map = PerlinMap { seed: 7, frequency: 1.5, octaves: 3, contrast: 4.0, ..Default::default() };
            let loads = map.loads(&grid);
            let problem = Problem::new(grid, &loads, v).or_fail(EXAMPLE, "the problem");
            let mut vcores = VCores::random(&problem, 1);
            let mut method = methods::by_name("power-cells").expect("the default method");
            let opts = StopRule { max_steps: 20, tol: 0.02 };
            balance(method.as_mut(), &problem, &mut vcores, StopRule { max_steps: 200, ..opts }, |_| {});
            let (mut alone, mut shared, mut steps) = (Vec::new(), Vec::new(), Vec::new());
            for i in 0..TRANSITIONS {
                map.offset[0] += 2.0;
                let loads = map.loads(&grid);
                let problem = Problem::new(grid, &loads, v).expect("valid loads");
                let mut serial = vcores.clone();
                // Alternate which goes first, so that neither always finds the caches warm.
                let order = if i % 2 == 0 { [false, true] } else { [true, false] };
                for with_pool in order {
                    let (problem, target) = if with_pool {
                        (problem.clone().with_workers(&pool), &mut vcores)
                    } else {
                        (problem.clone(), &mut serial)
                    };
                    let start = Instant::now();
                    let out = balance(method.as_mut(), &problem, target, opts, |_| {});
                    let us = start.elapsed().as_secs_f64() * 1e6;
                    if with_pool {
                        shared.push(us);
                        steps.push(out.steps as f64);
                    } else {
                        alone.push(us);
                    }
                }
                assert_eq!(serial.owners(), vcores.owners(), "the pool changed the result");
            }
            let median = |mut v: Vec<f64>| {
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            };
            let ratios: Vec<f64> = shared.iter().zip(&alone).map(|(s, a)| s / a).collect();
            println!(
                "{t:>7}  {v:>6}  {:>5}  {:>16.1}  {:>13.1}  {:>12.2}  {:>5.0}",
                grid.len(),
                median(alone),
                median(shared),
                median(ratios),
                median(steps)
            );
        }
    }
}
