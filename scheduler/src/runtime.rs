//! One entry point: detect the machine, start pinned workers, build any executor by name.
//!
//! ```
//! use pbs::Grid;
//! use pbs_scheduler::runtime::Runtime;
//! let rt = Runtime::detect().unwrap();          // hwloc/sysfs topology, PBS_NUM_THREADS, pinned
//! let grid = Grid::new(64, 64).unwrap();
//! let (mut exec, bindings) = rt.executor("pbs", grid).unwrap();
//! exec.run_phase(&|_k| {});
//! for (t, b) in bindings.report().iter().enumerate() {
//!     println!("worker {t}: {b:?}");             // the CPUs each worker is actually bound to
//! }
//! ```

use std::sync::Arc;

use pbs::Grid;

use crate::box_timing::BoxTimer;
use crate::executor::Executor;
use crate::executors::{EagerFifo, Pbs, PbsOptions, RemapOptions, Remapper, Remapping, StaticBlocks, WorkStealing};
use crate::pinning::{pinning, Bindings, CallerPin, Pinning, SavedMask};
use crate::placement::numa_positions;
use crate::pool::{Pool, WaitPolicy};
use crate::topology::Topology;

/// The executors by name: pbs, the baselines, and the seed papers' other balancers.
pub const EXECUTORS: [&str; 11] = [
    "pbs",
    "ws",
    "eager",
    "static",
    "rcb",
    "norcb",
    "packsteal",
    "vector-rcb",
    "vector-greedy",
    "norm-greedy",
    "diffusion",
];

/// A machine, a thread count and which threads to pin.
#[derive(Debug, Clone)]
pub struct Runtime {
    /// The machine.
    pub topology: Topology,
    /// Worker threads.
    pub threads: usize,
    /// Pin worker `t` to the PUs of `topology.core_of_worker(t)` ([`Pinning`]; the calling
    /// thread, worker 0, runs its phases on that core by default).
    pub pin: Pinning,
    /// Bookkeeping of the baselines (pbs always measures its boxes).
    pub timer: BoxTimer,
}

impl Runtime {
    /// This machine, `PBS_NUM_THREADS` or one worker per core, workers pinned.
    pub fn detect() -> crate::Result<Runtime> {
        let topology = Topology::detect();
        let threads = topology.default_threads().map_err(crate::Error::Topology)?;
        Ok(Runtime { topology, threads, pin: Pinning::default(), timer: BoxTimer::default() })
    }

    /// What each worker runs as it starts (pinning itself, or nothing), and the bindings it
    /// records. Every pool and executor starts here, so this is where a machine of no core,
    /// which no worker can be placed on, is refused (`topology`'s fields are public;
    /// [`Topology::detect`] and [`Topology::synthetic`] always find one).
    fn start_hook(&self) -> crate::Result<(crate::pool::StartHook, Bindings)> {
        if self.topology.cores.is_empty() {
            return Err(crate::Error::Topology(format!("the topology {:?} has no core", self.topology.source)));
        }
        Ok(if self.pin == Pinning::Off {
            (Arc::new(|_| {}), Bindings::default())
        } else {
            pinning(&self.topology, self.threads)
        })
    }

    /// A pool of pinned (or not) workers, waiting between phases as `PBS_WAIT_POLICY` says.
    pub fn pool(&self) -> crate::Result<(Pool, Bindings)> {
        let policy = WaitPolicy::from_env()?;
        let (hook, bindings) = self.start_hook()?;
        let mut pool = Pool::new(self.threads, std::sync::Arc::clone(&hook))?;
        pool.set_wait_policy(policy);
        // The caller is worker 0: pinned as OpenMP pins its master thread, for good or for
        // its phases only (see crate::pinning). Its binding is recorded either way.
        match self.pin {
            Pinning::Off => {}
            Pinning::WorkersAndCaller => hook(0),
            Pinning::Workers => {
                let own = SavedMask::of_this_thread();
                hook(0);
                drop(own);
                if let Ok(pin) = CallerPin::new(&self.topology.core_of_worker(0).pus) {
                    pool.pin_caller_in_phases(pin);
                }
            }
        }
        Ok((pool, bindings))
    }

    /// Executor `name` (one of [`EXECUTORS`]) over `grid`. pbs starts from
    /// NUMA-aware vCore positions, with the settings of the environment
    /// ([`PbsOptions::with_env`]: `PBS_TOL`, `PBS_STEAL`, …). Executors are `Send`: one can be
    /// built on one thread and driven from another, which becomes worker 0 (and runs its
    /// phases on worker 0's core). Under [`Pinning::WorkersAndCaller`] the building thread stays on
    /// worker 0's core, and on Linux every thread it spawns afterwards inherits that core.
    /// The bindings are complete on return: every worker has started (and pinned itself).
    pub fn executor(&self, name: &str, grid: Grid) -> crate::Result<(Box<dyn Executor + Send>, Bindings)> {
        self.executor_with_settings(name, grid, &|_| None)
    }

    /// [`Runtime::executor`] with pbs's settings looked up by `settings` before the environment
    /// (by the names [`PbsOptions::with_env`] reads: `PBS_TOL`, `PBS_CRITERION`, …): a program
    /// sets them in code, the environment fills in the rest. They are checked whichever the
    /// executor; only pbs uses them.
    pub fn executor_with_settings(
        &self,
        name: &str,
        grid: Grid,
        settings: &dyn Fn(&str) -> Option<String>,
    ) -> crate::Result<(Box<dyn Executor + Send>, Bindings)> {
        PbsOptions::default().with_settings(settings)?;
        let (exec, bindings) = self.build(name, grid, settings)?;
        // Workers pin themselves as they start, which a freshly spawned thread may not have
        // done yet: one empty round on every worker waits for all of them.
        exec.on_each_thread(&|_| {});
        Ok((exec, bindings))
    }

    /// pbs's default options on this machine, before the environment's settings: the vCores
    /// at NUMA-aware positions over `grid` (`placement::numa_positions`), each worker's node
    /// its group. The many-core model starts its plans from the same placement.
    ///
    /// # Panics
    /// If the topology has no core (as [`Topology::numa_of_workers`]).
    pub fn pbs_start(&self, grid: &Grid) -> PbsOptions {
        let numa = self.topology.numa_of_workers(self.threads);
        PbsOptions { positions: Some(numa_positions(grid, &numa)), numa: Some(numa), ..PbsOptions::default() }
    }

    fn build(
        &self,
        name: &str,
        grid: Grid,
        settings: &dyn Fn(&str) -> Option<String>,
    ) -> crate::Result<(Box<dyn Executor + Send>, Bindings)> {
        Ok(match name {
            "pbs" => {
                let (pool, b) = self.pool()?;
                let options = self.pbs_start(&grid).with_settings(|n| settings(n).or_else(|| std::env::var(n).ok()))?;
                (Box::new(Pbs::with_pool(grid, pool, options)?), b)
            }
            "ws" => {
                let (hook, b) = self.start_hook()?;
                (Box::new(WorkStealing::with_start(grid.len(), self.threads, hook, self.timer)?), b)
            }
            "eager" => {
                let (pool, b) = self.pool()?;
                (Box::new(EagerFifo::with_pool(grid.len(), pool, self.timer)?), b)
            }
            "static" => {
                let (pool, b) = self.pool()?;
                (Box::new(StaticBlocks::with_pool(grid.len(), pool, self.timer)?), b)
            }
            other => match Remapper::by_name(other) {
                Some(remapper) => {
                    let (pool, b) = self.pool()?;
                    (Box::new(Remapping::with_pool(grid, pool, RemapOptions::new(remapper))?), b)
                }
                None => return Err(crate::Error::UnknownExecutor { name: other.to_string() }),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::parse_synthetic;

    #[test]
    fn pbs_starts_from_the_numa_placement_of_its_topology() {
        let topology = parse_synthetic("pack:2 numa:1 core:2 pu:1").unwrap();
        let rt = Runtime { topology, threads: 4, pin: Pinning::Off, timer: BoxTimer::default() };
        let grid = Grid::new(40, 20).unwrap();
        let numa = rt.topology.numa_of_workers(4);
        assert_eq!(numa.iter().filter(|&&n| n == 0).count(), 2, "two workers on each node: {numa:?}");
        let options = rt.pbs_start(&grid);
        assert_eq!(options.numa.as_ref(), Some(&numa));
        assert_eq!(options.positions, Some(numa_positions(&grid, &numa)));
        let default = PbsOptions::default();
        assert_eq!((options.method, options.tol, options.seed), (default.method, default.tol, default.seed));
    }

    /// Unpinned workers bind nothing; pinned ones each report their core; a topology of no
    /// core is refused by name before any thread starts.
    #[test]
    fn workers_are_pinned_only_when_asked_and_a_machine_needs_a_core() {
        std::thread::spawn(|| {
            let mut rt = Runtime::detect().unwrap();
            rt.threads = 2;
            let grid = Grid::new(8, 8).unwrap();
            rt.pin = Pinning::Off;
            let (_, bindings) = rt.executor("static", grid).unwrap();
            assert!(bindings.report().is_empty(), "{:?}", bindings.report());
            rt.pin = Pinning::Workers;
            let (_, bindings) = rt.executor("static", grid).unwrap();
            let report = bindings.report();
            assert_eq!(report.len(), 2);
            for (t, b) in report.iter().enumerate() {
                let cpus = b.clone().expect("started").expect("pinned");
                assert_eq!(cpus, rt.topology.core_of_worker(t).pus, "worker {t}");
            }
            rt.topology.cores.clear();
            let e = rt.executor("static", grid).err().unwrap().to_string();
            assert!(e.contains("has no core"), "{e}");
        })
        .join()
        .unwrap();
    }
}
