//! The rebalancing policy's work in an iteration whose criterion asks, at 2–256 threads: the
//! owner loads seen, then whether an imbalance over the tolerance has stayed on one thread
//! over the last iterations (`RebalancePolicy::reads_box_loads`), then the decision on the
//! mapping's standing. One thread 3 % heavier than the others, the last one (the check
//! visits the threads in order), every thread 0–1 % of noise; the criterion asks in every
//! iteration, as it does in the 3–16 % of md's iterations where the imbalance it counts has
//! added up (the many-core model's replays of md, 128 × 128 boxes, 16–256 threads). Medians
//! over 20,000 iterations: `cargo run --release -p pbs-scheduler --example policy_check`.
//!
//! Then the mapping's standing on box loads just read (`RebalancePolicy::standing`), on the
//! critical path of every iteration that reads them: the vCores recharged with the loads,
//! their bound and mean, and whether the change since the last rebalancing is thread-wide, on
//! 512 × 512 boxes (the largest grids of `pbs-bench scaling`) at 16–256 threads, one thread's
//! boxes 10 % slower; beside it the same without the thread-wide test. Medians over 30
//! readings.
use pbs::{Grid, Problem, VCores};
use pbs_scheduler::criteria::Always;
use pbs_scheduler::executors::{RebalancePolicy, Standing};
use std::time::Instant;

fn main() {
    for threads in [2usize, 16, 64, 256] {
        // Tolerance 2 %, trigger 5 %: the mapping below stands between them.
        let mut policy = RebalancePolicy::new(Box::new(Always), 0.02, 0.05, 1e-3);
        let mut state = 1u64;
        let mut noise = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 40) as f64 / (1u64 << 24) as f64
        };
        let mut micros = Vec::with_capacity(20_000);
        for i in 0..20_000u64 {
            let loads: Vec<f64> = (0..threads)
                .map(|t| 1e-4 * (1.0 + if t + 1 == threads { 0.03 } else { 0.0 } + 0.01 * noise()))
                .collect();
            let start = Instant::now();
            let seen = policy.observe(&loads, i + 1);
            let standing = policy.reads_box_loads(seen).then_some(Standing {
                max_avg: 1.03,
                bound: 1.0,
                mean: 1e-4,
                thread_wide: false,
            });
            let due = seen.asked && policy.decide(seen, standing);
            micros.push(start.elapsed().as_secs_f64() * 1e6);
            std::hint::black_box(due);
        }
        micros.sort_by(f64::total_cmp);
        let q = |f: f64| micros[((micros.len() - 1) as f64 * f) as usize];
        println!(
            "{threads} threads: the policy's work in an asking iteration, median {:.2} µs, p90 {:.2}",
            q(0.5),
            q(0.9)
        );
    }
    let grid = Grid::new(512, 512).expect("a valid grid");
    for threads in [16usize, 64, 256] {
        let mut policy = RebalancePolicy::new(Box::new(Always), 0.02, 0.05, 1e-3);
        let even = vec![1e-6; grid.len()];
        let uniform = Problem::new(grid, &even, threads).expect("valid loads");
        let mut vcores = VCores::from_bisection(&uniform);
        policy.balanced_on(uniform.loads());
        let last = (threads - 1) as u32;
        let slow: Vec<f64> = vcores.owners().iter().map(|&o| if o == last { 1.1e-6 } else { 1e-6 }).collect();
        let problem = Problem::new(grid, &slow, threads).expect("valid loads");
        let (mut standing_ms, mut without_ms) = (Vec::new(), Vec::new());
        for _ in 0..30 {
            let start = Instant::now();
            vcores.recharge(&problem);
            let without = Standing {
                max_avg: vcores.max_avg(),
                bound: problem.lower_bound(),
                mean: problem.mean(),
                thread_wide: false,
            };
            without_ms.push(start.elapsed().as_secs_f64() * 1e3);
            std::hint::black_box(without);
            let start = Instant::now();
            vcores.recharge(&problem);
            let standing = policy.standing(&vcores, &problem);
            standing_ms.push(start.elapsed().as_secs_f64() * 1e3);
            assert!(standing.thread_wide, "one thread 10 % slower throughout: {standing:?}");
        }
        println!(
            "{threads} threads, 512 × 512 boxes: the standing on box loads just read, median {:.3} ms ({:.3} without the thread-wide test)",
            pbs::metrics::median(&standing_ms),
            pbs::metrics::median(&without_ms)
        );
    }
}
