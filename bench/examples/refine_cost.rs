//! A cold start's cost, step by step, and the refinement's pass by pass:
//! `cargo run --release -p pbs-bench --example refine_cost -- SIDE|MAP.csv VCORES [REPEATS]`
//! balances the power cells of a SIDE×SIDE Perlin map (seed 1, as `pbs-bench peers --perlin`
//! draws it), or of a CSV map (`pbs-bench maps` writes some), from a k-way RCB's centroids to
//! the cold start's rule ([`StopRule::before_refinement`]), as `pbs`'s cold start does, then
//! refines their owners
//! ([`pbs::refine`]) with the passes added one at a time; each REPEATS times (5 by default), in
//! turn, and prints the medians: the RCB alone, the start (the RCB, its centroids and their
//! cells' owners, `VCores::from_bisection`), the balanced cells, and
//! each refinement setting with its cut and largest charge. A pass's cost is the difference
//! between two rows: later passes see what the earlier ones left.
use pbs::bisection::kway_rcb;
use pbs::loadmap::{read_csv, PerlinMap};
use pbs::refine::{refine, RefineSettings};
use pbs::{balance, methods, metrics, Grid, Problem, StopRule, VCores};
use pbs_bench::counts_of;
use std::path::Path;
use std::time::Instant;

fn main() {
    pbs_bench::end_quietly_on_closed_pipe();
    const USAGE: &str = "refine_cost SIDE|MAP.csv VCORES [REPEATS]";
    let fail = |e: &dyn std::fmt::Display| -> ! { pbs_bench::example_failed("refine_cost", e) };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ((grid, loads), counts) = match args.first().filter(|a| a.parse::<usize>().is_err()) {
        Some(map) => {
            (read_csv(Path::new(map)).unwrap_or_else(|e| fail(&e)), counts_of(USAGE, &args[1..], &[None, Some(5)]))
        }
        None => {
            let counts = counts_of(USAGE, &args, &[None, None, Some(5)]);
            let grid = Grid::new(counts[0], counts[0]).unwrap_or_else(|e| fail(&e));
            ((grid, PerlinMap::with_seed(1).loads(&grid)), counts[1..].to_vec())
        }
    };
    let (vcores, repeats) = (counts[0], counts[1]);
    let problem = Problem::new(grid, &loads, vcores).unwrap_or_else(|e| fail(&e));
    let none = RefineSettings { group_sweeps: 0, pair_sweeps: 0, border_sweeps: 0, ..RefineSettings::default() };
    let settings = [
        ("mend and balance", none),
        ("+ borders", RefineSettings { border_sweeps: RefineSettings::default().border_sweeps, ..none }),
        ("+ pairs", RefineSettings { group_sweeps: 0, ..RefineSettings::default() }),
        ("+ groups (default)", RefineSettings::default()),
    ];
    let mut rows: Vec<Row> = ["k-way RCB", "start (RCB, centroids, cells)", "power cells"]
        .into_iter()
        .chain(settings.iter().map(|s| s.0))
        .map(|name| Row { name, times: Vec::new(), left: None })
        .collect();
    let quality = |owners: &[u32]| {
        let largest = metrics::max_avg(&metrics::charges(owners, &loads, vcores)) / problem.lower_bound();
        Some((metrics::edge_cut(&grid, owners), largest))
    };
    let mut timed = |row: usize, run: &mut dyn FnMut() -> Vec<u32>| {
        let t = Instant::now();
        let owners = run();
        rows[row].times.push(t.elapsed().as_secs_f64() * 1e3);
        rows[row].left = quality(&owners);
        owners
    };
    for _ in 0..repeats {
        timed(0, &mut || kway_rcb(&grid, &loads, vcores).unwrap_or_else(|e| fail(&e)));
        let mut start = None;
        timed(1, &mut || {
            let v = VCores::from_bisection(&problem);
            let owners = v.owners().to_vec();
            start = Some(v);
            owners
        });
        let mut vcores_now = start.expect("the start ran");
        let cells = timed(2, &mut || {
            let mut method = methods::by_name(methods::DEFAULT).unwrap_or_else(|e| fail(&e));
            balance(method.as_mut(), &problem, &mut vcores_now, StopRule::before_refinement(&problem), |_| {});
            vcores_now.owners().to_vec()
        });
        for (i, (_, s)) in settings.iter().enumerate() {
            timed(3 + i, &mut || {
                let mut owners = cells.clone();
                refine(&problem, &mut owners, *s).unwrap_or_else(|e| fail(&e));
                owners
            });
        }
    }
    println!("{}x{} boxes, {vcores} parts; {repeats} runs each, in turn, medians", grid.nx(), grid.ny());
    for Row { name, times, left } in &mut rows {
        times.sort_by(f64::total_cmp);
        let (cut, largest) = left.expect("every row ran");
        println!("{name:<30} {:>9.3} ms   cut {cut:>7}   largest {largest:.4} × the bound", times[repeats / 2]);
    }
}

/// One row of the table: its times, and the cut and largest charge over the bound it leaves.
struct Row {
    name: &'static str,
    times: Vec<f64>,
    left: Option<(usize, f64)>,
}
