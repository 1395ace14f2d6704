//! # pbs-scheduler — the runtime
//!
//! Runs each iteration of a grid code on a team of (optionally pinned) threads, with the
//! box → thread mapping of the [`pbs`] balancer, beside the baselines it must beat:
//!
//! | executor | who runs box `k` | file |
//! |---|---|---|
//! | [`executors::Pbs`] | its owner in the balancer's mapping (owner computes), idle threads steal boundary work | `executors/pbs/` (the loop in `mod.rs`; `stealing.rs`, `policy.rs`, `rebalancing.rs`, `overlap.rs`) |
//! | [`executors::WorkStealing`] | whichever rayon worker gets it | `executors/work_stealing.rs` |
//! | [`executors::EagerFifo`] | the next idle thread, in FIFO order (StarPU's eager) | `executors/eager.rs` |
//! | [`executors::StaticBlocks`] | thread `k·T/n` (OpenMP `static`) | `executors/static_blocks.rs` |
//! | [`executors::Remapping`] | its owner in a mapping another balancer remakes (the seed papers', and diffusion): `rcb`, `norcb` (Boulmier), `packsteal` (Freitas), `vector-rcb`, `vector-greedy`, `norm-greedy` (Buch's vector loads), `diffusion` (Hu and Blake) | `executors/remapping.rs` |
//!
//! All implement [`Executor`]: one phase = every box exactly once, then a barrier. The
//! owner-computes ones share their box lists (`executors/owner_lists.rs`), how densely they
//! time boxes (`executors/timing.rs`) and the check after a rebalancing (`executors/check.rs`).
//! Build one by name with [`runtime::Runtime`] (the machine, pinned workers), or directly;
//! switching is one line:
//!
//! ```
//! use pbs::Grid;
//! use pbs_scheduler::{executors::{Pbs, PbsOptions, StaticBlocks}, for_each_box_mut, Executor};
//!
//! let grid = Grid::new(64, 64).unwrap();
//! let mut exec: Box<dyn Executor> = Box::new(Pbs::new(grid, 2, PbsOptions::default()).unwrap());
//! // let mut exec: Box<dyn Executor> = Box::new(StaticBlocks::new(grid.len(), 2).unwrap());
//! let mut u = vec![1.0f64; grid.len()];
//! let mut next = vec![0.0f64; grid.len()];
//! exec.hint_iterations_left(10); // optional: no rebalancing at the last iteration's end
//! for _ in 0..10 {
//!     for_each_box_mut(exec.as_mut(), &mut next, |k, out| *out = 0.5 * u[k]);
//!     std::mem::swap(&mut u, &mut next);
//!     exec.end_iteration(); // pbs: loads → criterion → maybe rebalance
//! }
//! assert!((u[0] - 1.0 / 1024.0).abs() < 1e-12);
//! ```
//!
//! What a task may do in a phase: read anything from a previous phase, write its own box.
//! The safe entry points enforce the write side:
//!
//! | entry point | a phase that… | example |
//! |---|---|---|
//! | [`for_each_box_mut`] | writes one per-box array | `examples/my_grid_code.rs` |
//! | [`for_each_box_zip`] | writes two or three per-box arrays | `examples/leapfrog.rs` |
//! | [`reduce_boxes`] | sums (or folds) a value per box, in box order: the same bits under every executor | `examples/leapfrog.rs` |
//! | [`Executor::run_phase`], [`Executor::run_phase_ranges`] | calls your task per box or per range of boxes | `examples/range_tasks.rs` |
//! | [`Executor::vcores`] | (between phases) shows the balancer's cells | `examples/watch_vcores.rs` |
//!
//! A panicking task does not deadlock the pool: the phase finishes on every thread, the panic
//! reaches the caller, and the executor stays usable.
//!
//! Around the executors, one concept per module:
//!
//! | module | what |
//! |---|---|
//! | [`executor`] | the [`Executor`] trait and its safety contract, the safe entry points |
//! | [`pool`] | the team of workers, phase broadcast, barrier, panic propagation, wait policy |
//! | [`thread_budget`] | the threads of all pools of the process, and the most they may be |
//! | [`background`] | one more thread for a long job beside the workers (pbs's balancer thread) |
//! | [`box_timing`] | per-box bookkeeping: sampled box times (the loads), affinity, per-thread counts |
//! | [`clock`] | a cheap clock for per-box timing, and what timing costs on this machine |
//! | [`topology`] | packages, NUMA nodes, cores (hwloc, sysfs, synthetic), `PBS_NUM_THREADS` |
//! | [`fork`] | a team's threads after `fork()`: phases refused in the child, nothing joined |
//! | [`pinning`] | workers bound to their cores; the calling thread on worker 0's during its phases |
//! | [`coexistence`] | another runtime (OpenMP, rayon, TBB) in the same process: wait policies |
//! | [`placement`] | NUMA-aware starting vCores: one region of the domain per node |
//! | [`first_touch`] | box data allocated by the thread that owns it, moved when its box moves |
//! | [`runtime`] | detect, pin, and build any executor by name |
//! | [`stack`] | the workers' stack: the system's default for threads, or `PBS_STACKSIZE` |
//! | [`mapper`] | pbs's mapping decisions without its threads, for a runtime that runs the tasks (StarPU) |
//! | [`criteria`] | when to rebalance (Boulmier eq. 24 and its guard, Menon, Procassini, Marquez, periodic) and the DP oracle |
//! | [`counters`] | per-thread perf counters, hardware or software with the reason |
//! | [`cache_model`] | per-thread LRU over box footprints: modelled misses |
//! | [`report`] | busy/idle, `max_avg`, efficiency, affinity, migrations, serialisable |
//! | [`error`] | the typed [`Error`] of every constructor |

#![deny(missing_docs)]

pub mod background;
pub mod box_timing;
pub mod cache_model;
pub mod clock;
pub mod coexistence;
pub mod counters;
pub mod criteria;
pub mod error;
pub mod executor;
pub mod executors;
pub mod first_touch;
pub mod fork;
mod fp_env;
pub mod mapper;
pub mod pinning;
pub mod placement;
pub mod pool;
pub mod report;
pub mod runtime;
pub mod stack;
#[cfg(test)]
mod test_wait;
pub mod thread_budget;
pub mod topology;

pub use box_timing::BoxTimer;
pub use error::{Error, Result};
pub use executor::{
    current_worker, for_each_box_mut, for_each_box_zip, reduce_boxes, BoxArrays, Executor, IdleParts, IterationEnd,
    PhaseStats,
};
