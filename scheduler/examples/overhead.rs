//! Per-phase overhead with empty tasks on 10^4 boxes:
//! `cargo run --release -p pbs-scheduler --example overhead -- [threads]`.
//! pbs measures box times as by default; the baselines run as plain loops (no bookkeeping), as
//! their users would write them. Medians of 2000 phases.
use std::sync::Arc;
use std::time::Instant;

use pbs::Grid;
use pbs_scheduler::executors::{EagerFifo, Pbs, PbsOptions, StaticBlocks, WorkStealing};
use pbs_scheduler::pool::Pool;
use pbs_scheduler::{BoxTimer, Executor};

fn main() {
    let threads: usize = std::env::args().nth(1).map_or(2, |s| s.parse().expect("thread count"));
    let grid = Grid::new(100, 100).unwrap();
    let n = grid.len();
    let plain = BoxTimer::OFF;
    let mut execs: Vec<Box<dyn Executor>> = vec![
        Box::new(Pbs::new(grid, threads, PbsOptions::default()).unwrap()),
        Box::new(Pbs::new(grid, threads, PbsOptions { timer: BoxTimer::OFF, ..PbsOptions::default() }).unwrap()),
        Box::new(Pbs::new(grid, threads, PbsOptions { steal: true, ..PbsOptions::default() }).unwrap()),
        Box::new(WorkStealing::with_start(n, threads, Arc::new(|_| {}), plain)),
        Box::new(EagerFifo::with_pool(n, Pool::new(threads, Arc::new(|_| {})), plain)),
        Box::new(StaticBlocks::with_pool(n, Pool::new(threads, Arc::new(|_| {})), plain)),
    ];
    for round in 0..3 {
        let mut medians = Vec::new();
        for e in execs.iter_mut() {
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
            medians.push((e.name(), times[times.len() / 2]));
        }
        let pbs = medians[0].1;
        let line: Vec<String> =
            medians.iter().map(|(n, m)| format!("{n} {m:.2} us (pbs/{n} {:.2})", pbs / m)).collect();
        println!("round {round}: {}", line.join(" | "));
    }
}
