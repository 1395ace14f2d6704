//! Many threads on a machine of many NUMA nodes, as far as two cores can show it: the grid
//! apps give the single-thread checksum under every executor at 16, 64 and 256 threads, on the
//! detected machine and on a synthetic one of 8 nodes of 32 cores (pbs then starts each node's
//! vCores in one region and its thieves look on their own node first). The threads outnumber
//! the cores, so the OS interleaves them at every point of the protocols: claims, steals,
//! barriers, rebalancings taken on mid-run.

use pbs_apps::md::{Md, Scenario};
use pbs_apps::stencil::Stencil;
use pbs_apps::GridApp;
use pbs_scheduler::pinning::Pinning;
use pbs_scheduler::report::Recorder;
use pbs_scheduler::runtime::{Runtime, EXECUTORS};
use pbs_scheduler::topology::Topology;
use pbs_scheduler::BoxTimer;

type Make<'a> = &'a dyn Fn() -> Box<dyn GridApp>;

/// The app's checksum after `iterations` under `executor`, and the rebalancings it made.
fn run(make: Make, topology: &Topology, executor: &str, threads: usize, iterations: usize) -> (u64, usize) {
    let rt = Runtime { topology: topology.clone(), threads, pin: Pinning::Off, timer: BoxTimer::default() };
    let mut app = make();
    let (mut exec, _) = rt.executor(executor, app.grid()).unwrap();
    let mut rec = Recorder::new(executor, threads);
    for _ in 0..iterations {
        app.iterate(exec.as_mut(), &mut rec, None);
    }
    (app.checksum(), rec.report().rebalances)
}

#[test]
fn sixteen_to_256_threads_on_one_and_eight_nodes_give_the_one_thread_checksum() {
    let eight_nodes = Topology::synthetic("pack:8 numa:1 core:32 pu:1").unwrap();
    assert_eq!(eight_nodes.numa_of_workers(256).iter().max(), Some(&7), "256 workers over 8 nodes");
    let machines = [("this machine", Topology::detect()), ("8 nodes of 32 cores", eight_nodes)];
    let apps: [(&str, Make); 2] = [
        ("md gravity", &|| Box::new(Md::new(Scenario::Gravity, 32, 32, 3))),
        ("stencil rough", &|| Box::new(Stencil::new(32, 32, 8, 0.3, Some(4), 4).unwrap())),
    ];
    for (app, make) in apps {
        // pbs rebalances on measured times, which the OS's interleaving of the threads decides:
        // a run whose rebalancing was still out, or given up, after 12 iterations (a clean CI run
        // on 2026-12-07: md gravity, 16 threads, 8 nodes) runs again, longer, until one lands.
        let lengths = [12, 40, 120];
        // The one-thread checksums, each made the first time a length is run.
        let mut reference = [None; 3];
        for (machine, topology) in &machines {
            for threads in [16, 64, 256] {
                for executor in EXECUTORS {
                    for (n, &iterations) in lengths.iter().enumerate() {
                        let (checksum, rebalances) = run(make, topology, executor, threads, iterations);
                        let what =
                            format!("{app}: {executor} on {threads} threads, {machine}, {iterations} iterations");
                        let want =
                            *reference[n].get_or_insert_with(|| run(make, &machines[0].1, "static", 1, iterations).0);
                        assert_eq!(checksum, want, "{what}");
                        if executor != "pbs" || rebalances > 0 {
                            break;
                        }
                        assert!(n + 1 < lengths.len(), "{what}: pbs never rebalanced");
                    }
                }
            }
        }
    }
}
