//! The executors, one file each: [`Pbs`] (owner computes from the balancer's mapping),
//! [`WorkStealing`] (rayon), [`EagerFifo`] (one shared FIFO, StarPU's default) and
//! [`StaticBlocks`] (equal contiguous blocks, OpenMP `schedule(static)`), and [`Remapping`]
//! (owner computes from the seed papers' other balancers: RCB, NoRCB, PackStealLB, vector
//! RCB, vector and norm greedy).

pub(crate) mod check;
mod eager;
mod owner_lists;
mod pbs;
mod remap_policy;
mod remapping;
pub(crate) mod run_length;
mod static_blocks;
mod timing;
mod work_stealing;

pub use check::PAYBACK_ITERATIONS;
pub use eager::EagerFifo;
#[cfg(pbs_loom)]
pub use pbs::loom_claims;
pub(crate) use pbs::victim_order;
#[cfg(test)]
pub(crate) use pbs::PERSISTENT_ITERATIONS;
pub use pbs::{
    balancer_units, Lending, Observation, Overlap, Pbs, PbsOptions, RebalancePolicy, Standing, Stealing, RESTART_UNITS,
    STEAL_MIN_PHASE,
};
pub use remap_policy::RemapPolicy;
pub use remapping::{RemapInputs, RemapOptions, Remapper, Remapping};
pub use static_blocks::StaticBlocks;
pub use work_stealing::WorkStealing;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::Executor;
    use ::pbs::Grid;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Every executor but `pbs` (whose face its own module tests), over the boxes of `grid`.
    fn executors(grid: Grid, threads: usize) -> Vec<(&'static str, Box<dyn Executor>)> {
        let pool = || crate::pool::Pool::new(threads, std::sync::Arc::new(|_| {})).unwrap();
        let untimed = crate::box_timing::BoxTimer::OFF;
        vec![
            ("eager", Box::new(EagerFifo::new(grid.len(), threads).unwrap())),
            ("static", Box::new(StaticBlocks::new(grid.len(), threads).unwrap())),
            // Untimed, static runs its blocks as plain loops in pieces of 128.
            ("static", Box::new(StaticBlocks::with_pool(grid.len(), pool(), untimed).unwrap())),
            ("ws", Box::new(WorkStealing::new(grid.len(), threads).unwrap())),
            ("rcb", Box::new(Remapping::new(grid, threads, RemapOptions::new(Remapper::Rcb)).unwrap())),
        ]
    }

    fn counts(n: usize) -> Vec<AtomicUsize> {
        (0..n).map(|_| AtomicUsize::new(0)).collect()
    }

    fn taken(hits: &[AtomicUsize]) -> Vec<usize> {
        hits.iter().map(|h| h.swap(0, Ordering::Relaxed)).collect()
    }

    #[test]
    fn every_executor_answers_its_face_and_runs_each_box_once_per_phase() {
        // 300 boxes on 2 threads: blocks of 150, more than one chunk of 128 each.
        let grid = Grid::new(300, 1).unwrap();
        let n = grid.len();
        for (name, mut exec) in executors(grid, 2) {
            assert_eq!((exec.name(), exec.threads(), exec.boxes()), (name, 2, n));
            let per_thread = counts(2);
            exec.on_each_thread(&|t| {
                per_thread[t].fetch_add(1, Ordering::Relaxed);
            });
            assert_eq!(taken(&per_thread), [1, 1], "{name}: on_each_thread runs once on each thread");
            let hits = counts(n);
            // Sampled and unsampled iterations both, where the executor adapts its stride.
            for it in 0..6 {
                let stats = exec.run_phase(&|k| {
                    hits[k].fetch_add(1, Ordering::Relaxed);
                });
                assert!(taken(&hits).iter().all(|&h| h == 1), "{name}, iteration {it}: each box once");
                assert_eq!(
                    (stats.boxes.len(), stats.boxes.iter().sum::<usize>(), stats.busy.len()),
                    (2, n, 2),
                    "{name}"
                );
                let stats = exec.run_phase_ranges(&|r| {
                    r.for_each(|k| {
                        hits[k].fetch_add(1, Ordering::Relaxed);
                    })
                });
                assert!(taken(&hits).iter().all(|&h| h == 1), "{name}, iteration {it}: each box once in ranges");
                assert_eq!(stats.boxes.iter().sum::<usize>(), n, "{name}");
                exec.end_iteration();
            }
            // Where each box's data should be made: the mapping where the executor has one.
            match name {
                "static" => {
                    assert_eq!(exec.planned_owners(), Some(crate::first_touch::placement_owners_of_blocks(n, 2)))
                }
                "rcb" => {
                    let owners = exec.planned_owners().unwrap();
                    assert_eq!(owners.len(), n);
                    // RCB on a row: two contiguous parts, whatever the loads measured.
                    let cut = owners.iter().position(|&o| o != owners[0]).unwrap();
                    assert!(
                        owners[cut..].iter().all(|&o| o == owners[cut]) && owners.iter().all(|&o| o < 2),
                        "{owners:?}"
                    );
                }
                _ => assert_eq!(exec.planned_owners(), None, "{name}"),
            }
        }
        assert!(matches!(WorkStealing::new(4, 0), Err(crate::Error::NoThreads)));
    }
}
