//! Model check of the pool's phase / barrier / sleep protocol (`src/pool.rs`): loom runs
//! every interleaving of the caller and the workers (up to its preemption bound) and fails
//! on a lost wake-up (deadlock), a data race, or a job that ran the wrong number of times.
//!
//! Built only with `RUSTFLAGS="--cfg pbs_loom"`, where the pool takes its atomics, locks and
//! threads from loom: `scripts/test.sh` runs it as
//! `RUSTFLAGS="--cfg pbs_loom" cargo test -p pbs-scheduler --test loom_pool`.
#![cfg(pbs_loom)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use pbs_scheduler::pool::Pool;

/// Runs `phases` phases on a pool of `threads` and checks that each worker ran each phase
/// once, before `run` returned; then the pool shuts down (its drop joins the workers).
fn phases(threads: usize, phases: usize, preemptions: usize) {
    let mut model = loom::model::Builder::new();
    // Bugs of this kind show within two or three preemptions (loom's documentation); the
    // full space of three threads is out of reach.
    model.preemption_bound = Some(preemptions);
    model.check(move || {
        let pool = Pool::new(threads, Arc::new(|_| {})).unwrap();
        let hits: Vec<AtomicUsize> = (0..threads).map(|_| AtomicUsize::new(0)).collect();
        for phase in 1..=phases {
            pool.run(&|id| {
                hits[id].fetch_add(1, Ordering::Relaxed);
            });
            for (id, h) in hits.iter().enumerate() {
                assert_eq!(h.load(Ordering::Relaxed), phase, "worker {id} after phase {phase}");
            }
        }
        drop(pool);
    });
}

#[test]
fn two_threads_three_phases_and_shutdown() {
    phases(2, 3, 3);
}

#[test]
fn three_threads_two_phases_and_shutdown() {
    phases(3, 2, 2);
}

#[test]
fn a_pool_dropped_without_a_phase_shuts_down() {
    phases(3, 0, 3);
}
