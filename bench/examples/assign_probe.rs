//! The cost of one assignment on new diagrams: `cargo run --release -p pbs-bench --example
//! assign_probe -- SIDE VCORES [TIMINGS]` times `TIMINGS` (400) assignments of a SIDE×SIDE grid,
//! taking turns over 16 random diagrams so that the branch predictor cannot learn one
//! (docs/design-notes.md, "Branches in the assignment"), and prints the median.
use pbs::assign::{assign, Assignment};
use std::time::Instant;

fn main() {
    let counts = pbs_bench::example_counts("assign_probe SIDE VCORES [TIMINGS]", &[None, None, Some(400)]);
    let (side, vcores, timings) = (counts[0], counts[1], counts[2]);
    let grid = match pbs::Grid::new(side, side) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("assign_probe: {e}");
            std::process::exit(2);
        }
    };
    let diagrams: Vec<_> = (0..16u64).map(|d| pbs_bench::assign_cost::random_sites(&grid, vcores, 1000 + d)).collect();
    let mut out = Assignment::default();
    let mut times: Vec<f64> = (0..timings)
        .map(|r| {
            let (sites, weights) = &diagrams[r % diagrams.len()];
            let t = Instant::now();
            assign(&grid, sites, weights, &mut out);
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    times.sort_by(f64::total_cmp);
    let median = times[timings / 2];
    println!(
        "{side}x{side} boxes, {vcores} vCores, 16 diagrams in turn: median {median:.1} us, {:.1} ns per box",
        median * 1e3 / grid.len() as f64
    );
}
