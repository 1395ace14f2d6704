//! `pbs-mpi`'s balances across ranks replayed on md's own work per box, without MPI and without
//! the timing noise of many ranks sharing a few cores:
//! `cargo run --release -p pbs-mpi --example rank_replay -- [SCENARIO] [NXxNYxNZ] [RANKS,...] [ITERS] [BALANCES] [CRITERION] [TIMELINE.png] [--work-scale X]`
//! (defaults: contraction 16x16x16 16,64 200 pbs,pbs-cells,rcb,diffusion boulmier). A balance
//! written `BALANCE@CRITERION` runs under that criterion instead, so that criteria can be
//! compared on the same loads (`pbs,pbs@boulmier-eq24`).
//!
//! md runs on one thread; after each iteration every box's load is its pair count
//! (`GridApp::box_work`) times the mean time per pair of the first iterations, in seconds, and
//! its size the bytes it packs to (`Distributed::packed_len`). Each balance is a
//! `pbs_mpi::replay::Lane`, which charges each iteration to the owners in force and hands it to
//! `RankBalancer::end_iteration`, the path rank 0 of `pbs-mpi run` takes (the same smoothing
//! and criterion: Boulmier's eq. 24 with its guard by default, its cost the balancer's measured
//! time, or any of `pbs-mpi`'s `--criterion`; no migration cost is added, as no data moves
//! here). Prints per balance and rank count: the ranks' max/mean on the loads of each iteration
//! with the owners it ran with (the median over the iterations, and the largest), the
//! work-weighted efficiency (Σ mean / Σ max), the rebalancings, the boxes moved, the balancer's
//! milliseconds, and the run's modelled time, Σ max plus the balancer's time: what a criterion
//! trades (the efficiency alone rewards every rebalancing, however dear). With `TIMELINE.png`,
//! also draws each rank count's ranks' max/mean iteration by iteration, a line per balance and a
//! dot at each rebalancing: where a balance loses, the picture shows whether it is the start,
//! a late rebalancing or one that does not hold. `--work-scale X` multiplies every box's load by
//! `X` (default 1): ranks whose boxes hold X times the work, as a bigger problem per rank would,
//! against the same balancers' times; at this replay's sizes a rank computes 30–200 µs an
//! iteration at 64 ranks, where a real code's ranks compute milliseconds.
use std::path::Path;
use std::time::Instant;

use pbs::{metrics, Grid};
use pbs_apps::distributed::build_holding;
use pbs_mpi::replay::Lane;
use pbs_scheduler::executors::StaticBlocks;
use pbs_scheduler::report::Recorder;

fn fail(e: String) -> ! {
    eprintln!("rank_replay: {e}");
    std::process::exit(2);
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let work_scale = match args.iter().position(|a| a == "--work-scale") {
        Some(i) => {
            let value = args.get(i + 1).and_then(|v| v.parse::<f64>().ok());
            let Some(x) = value.filter(|x| x.is_finite() && *x > 0.0) else {
                fail("--work-scale takes a finite number above 0".into())
            };
            args.drain(i..i + 2);
            x
        }
        None => 1.0,
    };
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.to_string());
    let scenario = arg(0, "contraction");
    let dims: Vec<usize> = arg(1, "16x16x16").split('x').map(|d| d.parse().unwrap_or(0)).collect();
    let ranks: Vec<usize> = arg(2, "16,64").split(',').map(|r| r.parse().unwrap_or(0)).collect();
    let iters: usize = arg(3, "200").parse().unwrap_or(0);
    let names: Vec<String> = arg(4, "pbs,pbs-cells,rcb,diffusion").split(',').map(String::from).collect();
    let criterion = arg(5, "boulmier");
    let timeline = args.get(6).cloned();
    let (nx, ny, nz) = match dims[..] {
        [nx, ny] => (nx, ny, 1),
        [nx, ny, nz] => (nx, ny, nz),
        _ => fail(format!("grid {:?}: NXxNY or NXxNYxNZ", arg(1, ""))),
    };
    let grid = Grid::new_3d(nx, ny, nz).unwrap_or_else(|e| fail(e.to_string()));
    if iters < 10 || ranks.iter().any(|&r| r < 2 || r > grid.len()) {
        fail(format!("at least 10 iterations and 2 to {} ranks", grid.len()));
    }
    let mut app = build_holding("md", &scenario, grid, 1, None).unwrap_or_else(|e| fail(e));
    let mut exec = StaticBlocks::new(grid.len(), 1).unwrap_or_else(|e| fail(e.to_string()));
    let mut rec = Recorder::new("static", 1);
    // Seconds per pair: md's own iterations timed against their pairs, before the replay.
    let (mut pairs, start) = (0.0, Instant::now());
    for _ in 0..5 {
        app.iterate(&mut exec, &mut rec, None);
        pairs += app.box_work().iter().sum::<f64>();
    }
    let per_pair = start.elapsed().as_secs_f64() / pairs.max(1.0);
    let iteration_ms = start.elapsed().as_secs_f64() * 1e3 / 5.0;
    let estimate = app.box_work();
    let mut lanes: Vec<Lane> = Vec::new();
    for &r in &ranks {
        for name in &names {
            lanes.push(Lane::new(name, &criterion, grid, r, &estimate).unwrap_or_else(|e| fail(e)));
        }
    }
    for _ in 0..iters {
        app.iterate(&mut exec, &mut rec, None);
        let loads: Vec<f64> = app.box_work().iter().map(|w| w * per_pair * work_scale).collect();
        let bytes: Vec<f64> = (0..grid.len()).map(|k| app.packed_len(k) as f64).collect();
        for lane in &mut lanes {
            lane.iteration(&loads, &bytes).unwrap_or_else(|e| fail(e));
        }
    }
    println!(
        "md {scenario}, {nx}x{ny}x{nz} boxes, {iters} iterations, {:.1} ns a pair (loads: pairs x that{}; \
         {iteration_ms:.1} ms an iteration on one thread), criterion {criterion}",
        per_pair * 1e9,
        if work_scale == 1.0 { String::new() } else { format!(" x {work_scale} (--work-scale)") }
    );
    println!(
        "{:<26} {:>5} {:>15} {:>8} {:>10} {:>12} {:>11} {:>11} {:>17}",
        "balance",
        "ranks",
        "max/mean median",
        "largest",
        "efficiency",
        "rebalancings",
        "boxes moved",
        "balancer ms",
        "Σ max + balancer"
    );
    for lane in &lanes {
        let (median, largest) = (metrics::median(&lane.ran_with), lane.ran_with.iter().copied().fold(0.0, f64::max));
        println!(
            "{:<26} {:>5} {:>15.3} {:>8.3} {:>10.3} {:>12} {:>11} {:>11.1} {:>14.1} ms",
            lane.name,
            lane.ranks,
            median,
            largest,
            lane.efficiency(),
            lane.rebalanced_after.len(),
            lane.moved,
            lane.seconds * 1e3,
            lane.modelled_seconds() * 1e3
        );
    }
    if let Some(path) = timeline {
        draw_timeline(Path::new(&path), &lanes, &ranks, &scenario, &criterion).unwrap_or_else(|e| fail(e));
        println!("timeline: {path}");
    }
}

/// One panel per rank count: each balance's ranks' max/mean over the iterations (the owners it
/// ran with), and a dot at the iteration after which each rebalancing changed them.
fn draw_timeline(path: &Path, lanes: &[Lane], ranks: &[usize], scenario: &str, criterion: &str) -> Result<(), String> {
    use pbs_plot::panels::{colour, line_panels, Panel, Series, Stroke};
    let panels: Vec<Panel> = ranks
        .iter()
        .map(|&r| {
            let mut series = Vec::new();
            for (i, lane) in lanes.iter().filter(|l| l.ranks == r).enumerate() {
                let line = lane.ran_with.iter().enumerate().map(|(it, &m)| (it as f64, m)).collect();
                let dots = lane.rebalanced_after.iter().map(|&it| (it as f64, lane.ran_with[it])).collect();
                let color = colour(i);
                series.push(Series { label: lane.name.clone(), points: line, color, stroke: Stroke::Solid });
                let label = format!("{}: rebalanced after", lane.name);
                series.push(Series { label, points: dots, color, stroke: Stroke::Points });
            }
            Panel {
                title: format!("md {scenario}, {r} ranks, criterion {criterion}"),
                x_label: "iteration".into(),
                y_label: "ranks' max / mean".into(),
                log_x: false,
                log_y: false,
                series,
            }
        })
        .collect();
    line_panels(path, 900, 380 * panels.len() as u32, 1, &panels)
}
