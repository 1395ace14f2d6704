//! # pbs-mpi — pbs across MPI ranks, threads inside each
//!
//! Grid codes that outgrow one node run as MPI ranks, each running threads. `pbs-mpi` applies
//! the same method at both levels:
//!
//! | level | who decides | from what | file |
//! |---|---|---|---|
//! | box → rank | rank 0: the pbs balancer with one vCore per rank (or `rcb`, `diffusion`, `static`) | each rank's summed box times on their cores (`timed.rs`), every box's only before a rebalancing | `ranks.rs` |
//! | box → thread | each rank: the pbs executor, as in shared memory, over the rank's window (its boxes' bounding box grown by the halo) | its own boxes' times | `window.rs`, `pbs-scheduler` |
//!
//! A box's data moves with its box: apps implement [`pbs_apps::distributed::Distributed`]
//! (pack, unpack, halo depth), and after every iteration each rank sends the boxes it just
//! computed to their next owner and to the ranks whose tasks read them, each reader the part
//! it reads (the stencil's, the faces of its tiles next to its boxes; `exchange.rs`: one
//! `MPI_Alltoallv`). A rank holds only the boxes it computes or reads. The per-box computation
//! is the shared-memory one on the same data, so the final state, hashed on rank 0 a band of
//! rows (layers in 3D) at a time, has the shared-memory checksum for every rank and thread
//! count (`tests/mpirun.rs` checks 1–4 ranks × 1–2 threads, md and the stencil in 2D, the
//! stencil in 3D with `--nz`).
//!
//! When to rebalance across ranks is the pbs executor's rule (Boulmier et al.'s eq. 24 by
//! default, through [`pbs_scheduler::mapper::Mapper`]) on the ranks' summed box times, its
//! cost `C` the balancer's time plus the gathering of the box loads and the exchange that
//! moved the boxes.
//!
//! `replay.rs` replays the balances across ranks in one process on recorded box loads
//! (`examples/rank_replay.rs` on md's: many ranks without MPI or shared cores' noise).
//!
//! The binary is what a user runs: `run` for one run, `compare` for several balances side by
//! side in one job (`run.rs` is the loop, `summary.rs` the figures, `text.rs` their tables):
//!
//! ```text
//! mpirun --bind-to none -np 4 target/release/pbs-mpi run --app md --scenario gravity --threads 2 --iters 200 --json
//! mpirun --bind-to none -np 4 target/release/pbs-mpi compare --app md --balance pbs,rcb,diffusion,static --repeats 3
//! ```
//!
//! Failure ends the whole job: a rank whose run fails or panics prints its message and calls
//! `MPI_Abort`; a rank that exits makes `mpirun` end the others. `PBS_MPI_FAIL=rank:iteration`
//! (`:exit` to exit instead of panicking) injects such a failure, for the tests.

#![deny(missing_docs)]

pub mod exchange;
pub mod ranks;
pub mod replay;
pub mod run;
pub mod summary;
pub mod text;
pub mod timed;
pub mod window;

/// Busy-waits `d` on the wall clock: a heavy box of known length for tests (a summed range is
/// folded to a constant by an optimised build).
#[cfg(test)]
pub(crate) fn busy_wait(d: std::time::Duration) {
    let t = std::time::Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}
