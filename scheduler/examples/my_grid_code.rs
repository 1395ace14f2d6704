//! Putting your own grid code on the scheduler, in a few lines.
//!
//! A 2D grid of boxes; each iteration, every box reads its neighbours' values from the last
//! iteration and writes its own (owner computes). The executor is chosen by name; pbs measures
//! the boxes' times itself and rebalances when its criterion says it pays.
//!
//! `cargo run --release -p pbs-scheduler --example my_grid_code -- [pbs|ws|eager|static]`

use pbs::Grid;
use pbs_scheduler::{for_each_box_mut, runtime::Runtime};

mod common;

fn main() -> Result<(), common::Failure> {
    let executor = std::env::args().nth(1).unwrap_or_else(|| "pbs".into());
    let grid = Grid::new(64, 64)?;

    // 1. The machine, pinned workers, and an executor: one line to switch.
    let runtime = Runtime::detect()?;
    let (mut exec, bindings) = runtime.executor(&executor, grid)?;
    println!("{} workers on {}: {:?}", runtime.threads, runtime.topology.source, bindings.report());

    // 2. Your data: one value per box (any `Send` type), double-buffered.
    let mut now: Vec<f64> = (0..grid.len()).map(|k| if k == grid.index(10, 10, 0) { 1e6 } else { 0.0 }).collect();
    let mut next = vec![0.0; grid.len()];

    // 3. The iteration loop: a phase runs every box once; the task writes only its own box.
    let start = std::time::Instant::now();
    exec.hint_iterations_left(500); // optional: pbs starts no rebalancing that could not repay itself
    for _ in 0..500 {
        for_each_box_mut(exec.as_mut(), &mut next, |k, out| {
            let mut sum = now[k];
            let mut n = 1.0;
            grid.for_each_neighbour(k, |j| {
                sum += now[j];
                n += 1.0;
            });
            // Some boxes cost more than others (here: the bottom third of the domain).
            let [_, j, _] = grid.coords(k);
            let extra = if j > 42 { 3000 } else { 300 };
            let mut x = 0.3;
            for _ in 0..extra {
                x = 3.9 * x * (1.0 - x);
            }
            *out = sum / n + 1e-300 * x;
        });
        std::mem::swap(&mut now, &mut next);
        exec.end_iteration(); // pbs: measured times → loads → criterion → maybe rebalance
    }
    let total: f64 = now.iter().sum();
    println!(
        "{executor}: 500 iterations in {:.1} ms; total {total:.6} (the same under every executor)",
        start.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}
