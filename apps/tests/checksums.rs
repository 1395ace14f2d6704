//! The grid apps give the same checksum under every executor and thread count, and their loads
//! move through the domain.

use pbs_apps::md::{Md, Scenario};
use pbs_apps::stencil::Stencil;
use pbs_apps::GridApp;
use pbs_scheduler::pinning::Pinning;
use pbs_scheduler::report::Recorder;
use pbs_scheduler::runtime::{Runtime, EXECUTORS};
use pbs_scheduler::topology::Topology;
use pbs_scheduler::BoxTimer;

fn runtime(threads: usize) -> Runtime {
    Runtime { topology: Topology::detect(), threads, pin: Pinning::Off, timer: BoxTimer::default() }
}

fn checksum_under(make: &dyn Fn() -> Box<dyn GridApp>, executor: &str, threads: usize, iterations: usize) -> u64 {
    let mut app = make();
    let (mut exec, _) = runtime(threads).executor(executor, app.grid()).unwrap();
    let mut rec = Recorder::new(executor, threads);
    for _ in 0..iterations {
        app.iterate(exec.as_mut(), &mut rec, None);
    }
    app.checksum()
}

fn same_everywhere(name: &str, make: &dyn Fn() -> Box<dyn GridApp>, iterations: usize) {
    let reference = checksum_under(make, "static", 1, iterations);
    for executor in EXECUTORS {
        for threads in 1..=4 {
            let c = checksum_under(make, executor, threads, iterations);
            assert_eq!(c, reference, "{name}: {executor} on {threads} threads");
        }
    }
}

#[test]
fn md_checksums_agree_under_every_executor_and_thread_count() {
    for s in Scenario::ALL {
        same_everywhere(s.name(), &|| Box::new(Md::new(s, 10, 10, 3)), 15);
    }
}

/// md in 3D (27 boxes around each), in every scenario, one phase or two, under every executor
/// that runs 3D grids.
#[test]
fn md_3d_checksums_agree_under_every_executor_and_thread_count() {
    for s in Scenario::ALL {
        let make = || -> Box<dyn GridApp> { Box::new(Md::new_3d(s, 5, 4, 4, 3)) };
        same_everywhere(&format!("3D {}", s.name()), &make, 12);
        let split = || -> Box<dyn GridApp> { Box::new(Md::new_3d(s, 5, 4, 4, 3).split_phases()) };
        assert_eq!(checksum_under(&split, "pbs", 2, 12), checksum_under(&make, "static", 1, 12), "3D {}", s.name());
    }
}

#[test]
fn md_split_into_rebin_and_force_phases_is_bit_for_bit_md_under_every_executor() {
    for s in Scenario::ALL {
        let one_phase = checksum_under(&|| Box::new(Md::new(s, 10, 10, 3)), "static", 1, 15);
        let split = || -> Box<dyn GridApp> { Box::new(Md::new(s, 10, 10, 3).split_phases()) };
        assert_eq!(checksum_under(&split, "static", 1, 15), one_phase, "{}", s.name());
        same_everywhere(&format!("md-split {}", s.name()), &split, 15);
    }
}

#[test]
fn stencil_checksums_agree_under_every_executor_and_thread_count() {
    same_everywhere("stencil drift", &|| Box::new(Stencil::new(12, 10, 8, 0.3, None, 4).unwrap()), 12);
    same_everywhere("stencil rough", &|| Box::new(Stencil::new(12, 10, 8, 0.3, Some(4), 4).unwrap()), 12);
}

/// The 3D stencil too, under every executor that runs 3D grids; and its cost map moves through
/// the layers, so that a mapping that balanced one iteration does not balance the next.
#[test]
fn stencil_3d_checksums_agree_under_every_executor_and_thread_count() {
    let make = || -> Box<dyn GridApp> {
        let grid = pbs::Grid::new_3d(6, 5, 4).unwrap();
        Box::new(Stencil::on_grid(grid, 4, 0.3, None, 4, None).unwrap())
    };
    same_everywhere("stencil 3D drift", &make, 12);
    let mut app = make();
    let before = app.box_work();
    let (mut exec, _) = runtime(2).executor("static", app.grid()).unwrap();
    let mut rec = Recorder::new("static", 2);
    for _ in 0..8 {
        app.iterate(exec.as_mut(), &mut rec, None);
    }
    assert_ne!(app.box_work(), before, "the cost map drifts");
    let layer = |w: &[f64], z: usize| w[z * 30..(z + 1) * 30].to_vec();
    assert_ne!(layer(&before, 0), layer(&before, 3), "the layers' costs differ");
}

/// pbs with every rebalancing on the balancer thread, taken on at iteration boundaries while
/// the phases run: the same checksums, and rebalancings do happen. The thread's runs come back
/// when the OS lets it run: on a loaded machine 30 iterations of 60 µs were too few (CI,
/// 2026-11-25), so the app pauses a millisecond between iterations, as a real code's longer
/// iterations would let it run, and goes on until a run has been taken on.
#[test]
fn checksums_agree_with_the_balancer_on_its_own_thread() {
    use pbs_scheduler::criteria::Always;
    use pbs_scheduler::executors::{Overlap, Pbs, PbsOptions};
    type Make<'a> = &'a dyn Fn() -> Box<dyn GridApp>;
    let apps: [(&str, Make); 2] = [
        ("md contraction", &|| Box::new(Md::new(Scenario::Contraction, 12, 12, 3))),
        ("stencil rough", &|| Box::new(Stencil::new(12, 10, 8, 0.3, Some(4), 4).unwrap())),
    ];
    for (name, make) in apps {
        for threads in 2..=3 {
            let mut app = make();
            let options =
                PbsOptions { overlap: Overlap::Thread, criterion: Some(Box::new(Always)), ..Default::default() };
            let mut exec = Pbs::new(app.grid(), threads, options).unwrap();
            let mut rec = Recorder::new("pbs", threads);
            let mut iterations = 0;
            while iterations < 30 || (rec.report().rebalances == 0 && iterations < 3000) {
                app.iterate(&mut exec, &mut rec, None);
                iterations += 1;
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            let reference = checksum_under(make, "static", 1, iterations);
            assert_eq!(app.checksum(), reference, "{name} on {threads} threads after {iterations} iterations");
            let report = rec.report();
            assert!(report.rebalances > 0 && report.balancing_in_background_ms > 0.0, "{name}: {report:?}");
        }
    }
}

#[test]
fn md_loads_move_through_the_domain() {
    for s in [Scenario::Gravity, Scenario::Contraction, Scenario::Expansion] {
        let mut md = Md::new(s, 16, 16, 1);
        let n = md.particles();
        let before = md.box_work();
        let (mut exec, _) = runtime(2).executor("static", md.grid()).unwrap();
        let mut rec = Recorder::new("static", 2);
        for _ in 0..300 {
            md.iterate(exec.as_mut(), &mut rec, None);
        }
        assert_eq!(md.particles(), n, "{s:?}: particles are conserved");
        let after = md.box_work();
        let moved: f64 =
            before.iter().zip(&after).map(|(a, b)| (a - b).abs()).sum::<f64>() / before.iter().sum::<f64>();
        assert!(moved > 0.2, "{s:?}: the load map must change, relative change {moved:.3}");
    }
}

/// A grid whose state the machine cannot hold is an error naming it, before anything is
/// allocated (it aborted at the first allocation the system refused); md's particle ids are
/// 32-bit, and a grid with more boxes than they allow is refused first.
#[test]
fn an_app_too_large_for_memory_is_an_error() {
    for (app, what, side, boxes) in [
        ("stencil", "stencil tiles", 65535, "4294836225 boxes"),
        ("md", "md particles", 12000, "144000000 boxes"),
        ("md-split", "md particles", 12000, "144000000 boxes"),
    ] {
        let too_big = |e: String| assert!(e.starts_with(&format!("out of memory: {what} for {boxes}")), "{e}");
        too_big(pbs_apps::build(app, pbs_apps::default_scenario(app), side, side, 1).err().unwrap());
        too_big(pbs_apps::distributed::build(app, pbs_apps::default_scenario(app), side, side, 1).err().unwrap());
        let huge = pbs::Grid::new(side, side).unwrap();
        too_big(pbs_apps::distributed::initial_work(app, pbs_apps::default_scenario(app), huge, 1).err().unwrap());
        if app != "stencil" {
            let ids = pbs_apps::build(app, "gravity", 65535, 65535, 1).err().unwrap();
            assert!(ids.contains("4294836225 boxes, more than the 159072862 its 32-bit particle ids allow"), "{ids}");
        }
    }
    let e = pbs_apps::build_3d("md", "gravity", 600, 600, 400, 1).err().unwrap();
    assert!(e.starts_with("out of memory: md particles for 144000000 boxes"), "{e}");
    let e = pbs_apps::build_3d("stencil", "drift", 2048, 2048, 1023, 1).err().unwrap();
    assert!(e.starts_with("out of memory: stencil tiles for 4290772992 boxes"), "{e}");
}
