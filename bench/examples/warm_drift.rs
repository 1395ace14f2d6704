//! Warm rebalancings on a drifting Perlin map, as `pbs-bench peers` sequences them:
//! `cargo run --release -p pbs-bench --example warm_drift -- SIDE VCORES [STEPS]` partitions a
//! SIDE×SIDE map with the `pbs` partitioner of `pbs-peers` (a cold start, then warm starts),
//! drifts it by half a box per step (STEPS, 60 by default), and prints the median time and
//! the balancer steps per rebalancing.
use pbs::loadmap::PerlinMap;
use pbs::Grid;
use pbs_peers::{Partitioner, Pbs};
use std::time::Instant;

fn main() {
    pbs_bench::end_quietly_on_closed_pipe();
    let counts = pbs_bench::example_counts("warm_drift SIDE VCORES [STEPS]", &[None, None, Some(60)]);
    let (side, vcores, steps) = (counts[0], counts[1], counts[2]);
    let fail = |e: &dyn std::fmt::Display| -> ! { pbs_bench::example_failed("warm_drift", e) };
    let grid = Grid::new(side, side).unwrap_or_else(|e| fail(&e));
    let mut map = PerlinMap::with_seed(7);
    let mut pbs = Pbs::default();
    pbs.partition(&grid, &map.loads(&grid), vcores).unwrap_or_else(|e| fail(&e));
    // The maps are drawn before the first rebalancing, so that a profile of this example
    // shows the balancer rather than the Perlin noise.
    let drifted: Vec<Vec<f64>> = (0..steps)
        .map(|_| {
            map = map.smooth(0.5);
            map.loads(&grid)
        })
        .collect();
    let (mut times, mut taken) = (Vec::new(), Vec::new());
    for loads in &drifted {
        let t = Instant::now();
        pbs.partition(&grid, loads, vcores).unwrap_or_else(|e| fail(&e));
        times.push(t.elapsed().as_secs_f64() * 1e3);
        taken.push(pbs.last_steps().unwrap_or(0));
    }
    times.sort_by(f64::total_cmp);
    taken.sort_unstable();
    println!(
        "{side}x{side} boxes, {vcores} vCores, {steps} warm rebalancings: median {:.3} ms, balancer steps median {} (max {})",
        times[steps / 2],
        taken[steps / 2],
        taken[steps - 1]
    );
}
