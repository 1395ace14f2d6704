//! Where pbs's per-iteration overhead goes on empty tasks (10^4 boxes, 2 threads): mean time
//! per iteration and rebalances for variants of the default.
//! `cargo run --release -p pbs-scheduler --example rebalances`
use std::sync::Arc;

use pbs::Grid;
use pbs_scheduler::criteria::Never;
use pbs_scheduler::executors::{Pbs, PbsOptions, StaticBlocks};
use pbs_scheduler::pool::Pool;
use pbs_scheduler::{BoxTimer, Executor};

fn run(name: &str, options: PbsOptions) {
    let grid = Grid::new(100, 100).unwrap();
    measure(name, &mut Pbs::new(grid, 2, options).unwrap());
}

fn measure(name: &str, e: &mut dyn Executor) {
    let (mut n, mut total, mut migr) = (0, 0.0, 0);
    let iters = 50_000;
    let t = std::time::Instant::now();
    for _ in 0..iters {
        e.run_phase(&|k| {
            std::hint::black_box(k);
        });
        let end = e.end_iteration();
        if end.rebalanced {
            n += 1;
            total += end.rebalance_time.as_secs_f64();
            migr += end.migrations;
        }
    }
    println!(
        "{name:32} mean {:6.2} us/iter, {n:4} rebalances of {:.3} ms, {} migrations each",
        t.elapsed().as_secs_f64() * 1e6 / iters as f64,
        total * 1e3 / n.max(1) as f64,
        migr / n.max(1)
    );
}

fn main() {
    run("default", PbsOptions::default());
    run("never rebalance", PbsOptions { criterion: Some(Box::new(Never)), ..Default::default() });
    run(
        "never rebalance, no timing",
        PbsOptions { criterion: Some(Box::new(Never)), timer: BoxTimer::OFF, ..Default::default() },
    );
    for stride in [8, 64] {
        let timer = BoxTimer { stride, ..BoxTimer::default() };
        run(
            &format!("never rebalance, stride {stride}"),
            PbsOptions { criterion: Some(Box::new(Never)), timer, ..Default::default() },
        );
    }
    let pool = Pool::new(2, Arc::new(|_| {})).unwrap();
    measure("static (plain loop), same harness", &mut StaticBlocks::with_pool(10_000, pool, BoxTimer::OFF).unwrap());
}
