//! What one indirect call per box costs, against one per range of boxes with the task
//! inlined in the loop ([`Executor::run_phase_ranges`], which `for_each_box_mut` uses).
//!
//! Two tasks on 256×256 boxes: a tiny one (an axpy per box, ~1 ns) and an md-sized one
//! (~0.3 µs). For each executor and task, the two calling styles take turns in blocks of 50
//! phases; the figure is the median over blocks of `ranges / per box` (below 1: ranges are
//! faster).
//!
//! `cargo run --release -p pbs-scheduler --example range_tasks -- [threads] [blocks]`

use std::time::Instant;

use pbs::Grid;
use pbs_scheduler::executors::{Pbs, PbsOptions, StaticBlocks};
use pbs_scheduler::{for_each_box_mut, Executor};

mod common;
use common::OrFail;

const PHASES: usize = 50;

/// The base of the data, shared with the workers as `for_each_box_mut` shared it before it
/// took ranges.
struct Base(*mut f64);
// SAFETY: `f64` is `Send`; the workers derive `&mut` to different boxes only, because the
// `Executor` contract runs each box at most once per phase and returns after every task, and
// the vector `Base` points into (`x` in `main`) is not touched elsewhere while the phase runs.
unsafe impl Sync for Base {}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn work(units: usize, x: f64) -> f64 {
    let mut y = x.fract().abs() * 0.5 + 0.25;
    for _ in 0..units {
        y = 3.9 * y * (1.0 - y);
    }
    y
}

fn main() {
    const EXAMPLE: &str = "range_tasks";
    let args = common::arguments(EXAMPLE, 2);
    let threads = common::count(EXAMPLE, &args, 0, "threads", 2, 1);
    let blocks = common::count(EXAMPLE, &args, 1, "blocks", 40, 1);
    let grid = Grid::new(256, 256).unwrap();
    let n = grid.len();
    println!("{n} boxes, {threads} threads, {blocks} blocks of {PHASES} phases per style");
    println!("{:<8} {:<6} {:>14} {:>14} {:>16}", "executor", "task", "per box µs", "ranges µs", "ranges/per box");
    for (task, units) in [("tiny", 0usize), ("md", 60)] {
        for name in ["static", "pbs"] {
            let mut exec: Box<dyn Executor> = match name {
                "static" => Box::new(StaticBlocks::new(n, threads).or_fail(EXAMPLE, "the static executor")),
                _ => Box::new(Pbs::new(grid, threads, PbsOptions::default()).or_fail(EXAMPLE, "the pbs executor")),
            };
            let mut x: Vec<f64> = (0..n).map(|k| k as f64 * 1e-3).collect();
            let (mut per_box, mut ranges, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..blocks {
                let mut t = [0.0; 2];
                for (style, time) in t.iter_mut().enumerate() {
                    let start = Instant::now();
                    for _ in 0..PHASES {
                        if style == 0 {
                            // The per-box call the executor makes for a `run_phase` task.
                            let base = Base(x.as_mut_ptr());
                            let base = &base;
                            exec.run_phase(&|k| {
                                assert!(k < n);
                                // SAFETY: `k < n` = x.len(), and each box runs once per phase
                                // (the Executor contract), so the `&mut` are disjoint.
                                let v = unsafe { &mut *base.0.add(k) };
                                *v = 0.5 * *v + 1.0 + work(units, *v);
                            });
                        } else {
                            for_each_box_mut(exec.as_mut(), &mut x, |_, v| *v = 0.5 * *v + 1.0 + work(units, *v));
                        }
                        exec.end_iteration();
                    }
                    *time = start.elapsed().as_secs_f64() * 1e6 / PHASES as f64;
                }
                per_box.push(t[0]);
                ranges.push(t[1]);
                ratios.push(t[1] / t[0]);
            }
            println!(
                "{name:<8} {task:<6} {:>14.1} {:>14.1} {:>16.2}",
                median(&mut per_box),
                median(&mut ranges),
                median(&mut ratios)
            );
        }
    }
}
