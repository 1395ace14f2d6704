//! `pbs-bench run` lets the schedulers take turns; taking turns must change no result.

use pbs_apps::md::{Md, Scenario};
use pbs_apps::GridApp;
use pbs_scheduler::executors::StaticBlocks;
use pbs_scheduler::report::Recorder;

#[test]
fn taking_turns_changes_no_result_and_loses_no_iteration() {
    let setup = |turn_iters| pbs_bench::run::RunSetup {
        app: "md".into(),
        scenario: "gravity".into(),
        schedulers: pbs_bench::run::schedulers("all").unwrap(),
        threads: 2,
        iters: 7, // turns of 3, 3 and 1
        nx: 6,
        ny: 6,
        nz: 1,
        cache_bytes: 64 * 1024,
        pin: false,
        seed: 3,
        turn_iters,
    };
    let alone = pbs_bench::run::run(&setup(0), || {}).unwrap();
    let mut ticks = 0;
    let turns = pbs_bench::run::run(&setup(3), || ticks += 1).unwrap();
    let schedulers = pbs_scheduler::runtime::EXECUTORS.len();
    assert_eq!(ticks, 2 * schedulers * 7, "one tick per iteration of each pass of each scheduler");
    let reference = {
        let mut md = Md::new(Scenario::Gravity, 6, 6, 3);
        let mut exec = StaticBlocks::new(md.grid().len(), 1).unwrap();
        let mut rec = Recorder::new("static", 1);
        (0..7).for_each(|_| md.iterate(&mut exec, &mut rec, None));
        md.checksum()
    };
    for (a, t) in alone.iter().zip(&turns) {
        assert_eq!(a.scheduler, t.scheduler);
        assert_eq!(t.checksum, format!("{reference:016x}"), "{}", t.scheduler);
        assert_eq!(a.checksum, t.checksum, "{}", t.scheduler);
        if t.scheduler == "static" {
            // The only scheduler whose mapping depends on neither timing nor thread races: the
            // lines it touches and misses are the same (the cache model applies a phase's writes
            // at its end, so the threads' interleaving does not count).
            assert_eq!((a.modelled_accesses, a.modelled_misses), (t.modelled_accesses, t.modelled_misses));
        }
        assert_eq!(t.iteration_ms.len(), 7, "{}", t.scheduler);
        if t.scheduler == "pbs" || t.scheduler == "static" {
            let at: Vec<usize> = t.snapshots.iter().map(|s| s.0).collect();
            assert_eq!(at, [0, 3, 6], "{}", t.scheduler);
        }
    }
}
