//! Per-iteration overhead of each executor with empty tasks: 10^4 boxes, 2 threads, one run.
//! pbs measures box times as by default; the baselines run as plain loops, as their users
//! write them. `cargo bench -p pbs-scheduler --bench overhead`; the ratios to read are
//! pbs/static (target ≤ 1.2) and pbs/ws (target ≤ 0.8).

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use pbs::Grid;
use pbs_scheduler::executors::{EagerFifo, Pbs, PbsOptions, StaticBlocks, WorkStealing};
use pbs_scheduler::pool::Pool;
use pbs_scheduler::{BoxTimer, Executor};

fn empty_tasks(c: &mut Criterion) {
    let grid = Grid::new(100, 100).unwrap();
    let (n, threads) = (grid.len(), 2);
    let plain = BoxTimer::OFF;
    let mut execs: Vec<Box<dyn Executor>> = vec![
        Box::new(Pbs::new(grid, threads, PbsOptions::default()).unwrap()),
        Box::new(WorkStealing::with_start(n, threads, Arc::new(|_| {}), plain).unwrap()),
        Box::new(EagerFifo::with_pool(n, Pool::new(threads, Arc::new(|_| {})).unwrap(), plain).unwrap()),
        Box::new(StaticBlocks::with_pool(n, Pool::new(threads, Arc::new(|_| {})).unwrap(), plain).unwrap()),
    ];
    let mut group = c.benchmark_group("empty_tasks_10k_boxes_2_threads");
    for exec in execs.iter_mut() {
        group.bench_function(exec.name(), |b| {
            b.iter(|| {
                exec.run_phase(&|k| {
                    std::hint::black_box(k);
                });
                exec.end_iteration();
            })
        });
    }
    group.finish();
}

criterion_group!(benches, empty_tasks);
criterion_main!(benches);
