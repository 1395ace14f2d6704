//! A phase that writes several per-box arrays, and a reduction per phase that gives the same
//! bits under every executor.
//!
//! Particles on a ring of springs, one per box: each iteration a kick-drift phase updates
//! positions and velocities together ([`for_each_box_zip`]), then the total energy is summed
//! in box order ([`reduce_boxes`]), so the printed energy does not depend on the executor or
//! the thread count.
//!
//! `cargo run --release -p pbs-scheduler --example leapfrog -- [pbs|ws|eager|static]`

use pbs::Grid;
use pbs_scheduler::{for_each_box_mut, for_each_box_zip, reduce_boxes, runtime::Runtime};

mod common;

fn main() -> Result<(), common::Failure> {
    let executor = std::env::args().nth(1).unwrap_or_else(|| "pbs".into());
    let grid = Grid::new(256, 16)?;
    let n = grid.len();
    let (mut exec, _bindings) = Runtime::detect()?.executor(&executor, grid)?;

    let mut x: Vec<f64> = (0..n).map(|k| (k as f64 * 0.05).sin()).collect();
    let mut v = vec![0.0f64; n];
    let mut force = vec![0.0f64; n];
    let dt = 0.05;
    // Springs to the left and right neighbours along x (the ring closes each row).
    let neighbours = |k: usize| {
        let [i, j, _] = grid.coords(k);
        (grid.index((i + grid.nx() - 1) % grid.nx(), j, 0), grid.index((i + 1) % grid.nx(), j, 0))
    };
    let energy = |x: &[f64], v: &[f64], exec: &mut dyn pbs_scheduler::Executor| {
        reduce_boxes(
            exec,
            |k| {
                let (_, right) = neighbours(k);
                0.5 * v[k] * v[k] + 0.5 * (x[right] - x[k]).powi(2)
            },
            0.0,
            |a, b| a + b,
        )
        .0
    };
    let e0 = energy(&x, &v, exec.as_mut());
    for step in 1..=400 {
        // Phase 1: forces from the neighbours' positions (reads x, writes force).
        for_each_box_mut(exec.as_mut(), &mut force, |k, f| {
            let (left, right) = neighbours(k);
            *f = x[left] + x[right] - 2.0 * x[k];
        });
        // Phase 2: kick and drift, two arrays written by one task per box.
        for_each_box_zip(exec.as_mut(), (&mut x[..], &mut v[..]), |k, (x, v)| {
            *v += dt * force[k];
            *x += dt * *v;
        });
        exec.end_iteration();
        if step % 100 == 0 {
            let e = energy(&x, &v, exec.as_mut());
            println!("step {step:>3}: energy {e:.12} (drift {:+.2e})", (e - e0) / e0);
        }
    }
    Ok(())
}
