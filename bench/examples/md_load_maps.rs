//! md's load maps as CSV files, for `pbs-bench peers --maps DIR` and the other readers of
//! load maps: `cargo run --release -p pbs-bench --example md_load_maps -- DIR [SIDE] [ITERS]
//! [SCENARIOS]`. Runs md on a cube of SIDE³ Verlet boxes (24) for ITERS iterations (100) in
//! each scenario of SCENARIOS (comma-separated; `gravity,contraction,expansion`), on one thread,
//! and writes each box's work then (its pair count, `GridApp::box_work`: no timing noise) as
//! `DIR/md3d-SCENARIO-SIDE.csv`, the cube's layers separated by blank lines. A SIDE of the form
//! `NXxNY` writes the 2D app's maps instead (`md-SCENARIO-NXxNY.csv`).
use std::path::PathBuf;

use pbs_scheduler::executors::StaticBlocks;
use pbs_scheduler::report::Recorder;

const USAGE: &str =
    "usage: md_load_maps DIR [SIDE (24) or NXxNY] [ITERS (100)] [SCENARIOS (gravity,contraction,expansion)]";

fn fail(e: &dyn std::fmt::Display) -> ! {
    eprintln!("md_load_maps: {e}\n{USAGE}");
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() || args.len() > 4 || args[0] == "--help" || args[0] == "-h" {
        eprintln!("{USAGE}");
        std::process::exit(if args.is_empty() || args.len() > 4 { 2 } else { 0 });
    }
    let dir = PathBuf::from(&args[0]);
    let side = args.get(1).map_or("24", String::as_str);
    let dims: Vec<usize> = side
        .split('x')
        .map(|n| n.parse().unwrap_or_else(|_| fail(&format!("SIDE {side:?} is not a number or NXxNY"))))
        .collect();
    let [nx, ny, nz] = match dims[..] {
        [n] => [n, n, n],
        [nx, ny] => [nx, ny, 1],
        _ => fail(&format!("SIDE {side:?} is not a number or NXxNY")),
    };
    let iters: usize =
        args.get(2).map_or(Ok(100), |s| s.parse()).unwrap_or_else(|_| fail(&"ITERS is not a whole number"));
    let scenarios = args.get(3).map_or("gravity,contraction,expansion", String::as_str);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| fail(&format!("cannot create {}: {e}", dir.display())));
    for scenario in scenarios.split(',') {
        let mut app = pbs_apps::build_3d("md", scenario, nx, ny, nz, 1).unwrap_or_else(|e| fail(&e));
        let grid = app.grid();
        let mut exec = StaticBlocks::new(grid.len(), 1).unwrap_or_else(|e| fail(&e));
        let mut rec = Recorder::new("static", 1);
        for _ in 0..iters {
            app.iterate(&mut exec, &mut rec, None);
        }
        let work = app.box_work();
        let name = if nz > 1 { format!("md3d-{scenario}-{nx}.csv") } else { format!("md-{scenario}-{nx}x{ny}.csv") };
        let path = dir.join(&name);
        std::fs::write(&path, pbs::loadmap::to_csv(&grid, &work))
            .unwrap_or_else(|e| fail(&format!("cannot write {}: {e}", path.display())));
        let loaded = work.iter().filter(|&&w| w > 0.0).count();
        println!(
            "{}: {grid}, {loaded} of {} boxes carry load, checksum {:016x}",
            path.display(),
            grid.len(),
            app.checksum()
        );
    }
}
