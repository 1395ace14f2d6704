//! Per-phase overhead with empty tasks on 10^4 boxes, every executor side by side:
//! `cargo run --release -p pbs-scheduler --example overhead -- [threads]`.
//! pbs measures its box times as by default; the baselines run as plain loops, as their users
//! would write them. Medians of 2000 phases, three rounds. The criterion bench
//! (`cargo bench -p pbs-scheduler --bench overhead`) measures the same thing.
use std::sync::Arc;
use std::time::Instant;

use pbs::Grid;
use pbs_scheduler::executors::{EagerFifo, Pbs, PbsOptions, StaticBlocks, WorkStealing};
use pbs_scheduler::pool::Pool;
use pbs_scheduler::{BoxTimer, Executor};

fn main() {
    let threads: usize = std::env::args().nth(1).map_or(2, |s| s.parse().expect("a thread count"));
    let grid = Grid::new(100, 100).unwrap();
    let n = grid.len();
    let plain = BoxTimer::OFF;
    let mut execs: Vec<(&str, Box<dyn Executor>)> = vec![
        ("pbs", Box::new(Pbs::new(grid, threads, PbsOptions::default()).unwrap())),
        ("pbs+steal", Box::new(Pbs::new(grid, threads, PbsOptions { steal: true, ..PbsOptions::default() }).unwrap())),
        ("ws", Box::new(WorkStealing::with_start(n, threads, Arc::new(|_| {}), plain))),
        ("eager", Box::new(EagerFifo::with_pool(n, Pool::new(threads, Arc::new(|_| {})), plain))),
        ("static", Box::new(StaticBlocks::with_pool(n, Pool::new(threads, Arc::new(|_| {})), plain))),
    ];
    println!("empty tasks, {n} boxes, {threads} threads: median µs per phase (pbs / executor)");
    for round in 0..3 {
        let mut medians = Vec::new();
        for (name, e) in execs.iter_mut() {
            let mut times: Vec<f64> = (0..2000)
                .map(|_| {
                    let t = Instant::now();
                    e.run_phase(&|k| {
                        std::hint::black_box(k);
                    });
                    e.end_iteration();
                    t.elapsed().as_secs_f64() * 1e6
                })
                .collect();
            times.sort_by(f64::total_cmp);
            medians.push((*name, times[times.len() / 2]));
        }
        let pbs = medians[0].1;
        let line: Vec<String> = medians.iter().map(|(n, m)| format!("{n} {m:.1} ({:.2})", pbs / m)).collect();
        println!("round {round}: {}", line.join("  "));
    }
}
