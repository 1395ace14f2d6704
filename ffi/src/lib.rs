//! # pbs-ffi — pbs from C
//!
//! The C interface of `ffi/include/pbs.h`, built as `libpbs_ffi.so` and `libpbs_ffi.a`
//! (`cargo build --release -p pbs-ffi`). Two ways in, on plain data as between the Rust crates:
//!
//! | C functions | what | file |
//! |---|---|---|
//! | `pbs_partitioner_*` | the balancer alone: loads of every box in, owner of every box out, warm-started call after call | `partitioner.rs` |
//! | `pbs_executor_*`, `pbs_current_worker` | the runtime: a pinned pool runs a C task once per box and phase under `pbs`, `ws`, `eager` or `static` | `executor.rs` |
//! | `pbs_mapper_*` | the runtime's decisions without its threads, for a runtime that runs the tasks itself (the StarPU policy of `starpu/`): box loads in, owners and victims out | `mapper.rs` |
//! | `pbs_tiling_grid`, `pbs_tiling_cells`, `…_3d` | from a code's cells to boxes: tiles of any size, ragged edges included, in 2D and 3D | `tiling.rs` |
//! | `pbs_last_error`, `pbs_last_error_status`, `pbs_status` | errors: every call returns a status (constructors NULL) and the message names the bad input | `status.rs` |
//! | `pbs_version` | the library's version, beside the header's `PBS_VERSION_*` | `version.rs` |
//!
//! A heat-diffusion code in C, in full in `ffi/examples/heat.c`:
//!
//! ```c
//! pbs_executor *e = pbs_executor_new("pbs", nx, ny, 1, 0, 1); // all cores, pinned
//! if (!e) { fprintf(stderr, "%s\n", pbs_last_error()); return 1; }
//! pbs_executor_hint_iterations_left(e, iters);             // none at the last one's end
//! for (int it = 0; it < iters; it++) {
//!     if (pbs_executor_run_phase(e, jacobi_box, &field, NULL) != PBS_OK) // int jacobi_box(ctx, k):
//!         return fail(pbs_last_error());                             // writes box k only, 0 = ok
//!     swap(&field.old, &field.new);
//!     pbs_executor_end_iteration(e, NULL);                 // pbs may rebalance here
//! }
//! pbs_executor_free(e);
//! ```
//!
//! No call unwinds into C: a Rust panic inside one (a bug) is caught at the boundary and
//! returned as `PBS_INTERNAL_ERROR` with its message, and the handle stays usable, as the
//! executors themselves stay usable after a panicking task.
//!
//! The Rust functions below are the C symbols; Rust code should use the `pbs` and
//! `pbs-scheduler` crates directly.

#![deny(missing_docs)]

pub mod executor;
pub mod mapper;
pub mod partitioner;
pub mod status;
pub mod tiling;
pub mod version;

pub use executor::{
    pbs_current_worker, pbs_executor_end_iteration, pbs_executor_free, pbs_executor_hint_iterations_left,
    pbs_executor_hint_loads, pbs_executor_hint_motion, pbs_executor_new, pbs_executor_on_each_thread,
    pbs_executor_owners, pbs_executor_reduce_sum, pbs_executor_run_phase, pbs_executor_run_phase_ranges,
    pbs_executor_threads, IterationEnd, PhaseStats,
};
pub use mapper::{pbs_mapper_end_iteration, pbs_mapper_free, pbs_mapper_new, pbs_mapper_owners, pbs_mapper_victims};
pub use partitioner::{pbs_partitioner_balance, pbs_partitioner_free, pbs_partitioner_new, Outcome};
pub use status::{pbs_last_error, pbs_last_error_status, Status};
pub use tiling::{pbs_tiling_cells, pbs_tiling_cells_3d, pbs_tiling_grid, pbs_tiling_grid_3d};
pub use version::pbs_version;
