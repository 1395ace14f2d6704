//! The refinement's cost on a large map, pass by pass:
//! `cargo run --release -p pbs-bench --example refine_cost -- SIDE VCORES [REPEATS]` balances
//! the power cells of a SIDE×SIDE Perlin map (seed 1, as `pbs-bench peers --perlin` draws it)
//! from a k-way RCB's centroids, as `pbs`'s cold start does, then refines their owners
//! ([`pbs::refine`]) REPEATS times (5 by default) with the passes added one at a time, in
//! turn, and prints each setting's median time, cut and largest charge. A pass's cost is the
//! difference between two rows: later passes see what the earlier ones left.
use pbs::loadmap::PerlinMap;
use pbs::refine::{refine, RefineSettings};
use pbs::{balance, methods, metrics, Grid, Problem, StopRule, VCores};
use std::time::Instant;

fn main() {
    pbs_bench::end_quietly_on_closed_pipe();
    let counts = pbs_bench::example_counts("refine_cost SIDE VCORES [REPEATS]", &[None, None, Some(5)]);
    let (side, vcores, repeats) = (counts[0], counts[1], counts[2].max(1));
    let fail = |e: &dyn std::fmt::Display| -> ! {
        eprintln!("refine_cost: {e}");
        std::process::exit(2);
    };
    let grid = Grid::new(side, side).unwrap_or_else(|e| fail(&e));
    let loads = PerlinMap::with_seed(1).loads(&grid);
    let problem = Problem::new(grid, &loads, vcores).unwrap_or_else(|e| fail(&e));
    let mut cells = VCores::from_bisection(&problem);
    let mut method = methods::by_name(methods::DEFAULT).unwrap_or_else(|e| fail(&e));
    balance(method.as_mut(), &problem, &mut cells, StopRule::before_refinement(&problem), |_| {});
    let cells = cells.owners().to_vec();
    let none = RefineSettings { group_sweeps: 0, pair_sweeps: 0, border_sweeps: 0, ..RefineSettings::default() };
    let settings = [
        ("mend and balance", none),
        ("+ borders", RefineSettings { border_sweeps: RefineSettings::default().border_sweeps, ..none }),
        ("+ pairs", RefineSettings { group_sweeps: 0, ..RefineSettings::default() }),
        ("+ groups (default)", RefineSettings::default()),
    ];
    let mut times = vec![Vec::new(); settings.len()];
    let mut last = vec![(0, 0.0); settings.len()];
    for _ in 0..repeats {
        for (i, (_, s)) in settings.iter().enumerate() {
            let mut owners = cells.clone();
            let t = Instant::now();
            refine(&problem, &mut owners, *s).unwrap_or_else(|e| fail(&e));
            times[i].push(t.elapsed().as_secs_f64() * 1e3);
            let bound = problem.lower_bound();
            last[i] = (
                metrics::edge_cut(&grid, &owners),
                metrics::max_avg(&metrics::charges(&owners, &loads, vcores)) / bound,
            );
        }
    }
    println!(
        "{side}x{side} boxes, {vcores} parts: the cells' cut {}, largest charge {:.4} × the bound; {repeats} runs each, in turn",
        metrics::edge_cut(&grid, &cells),
        metrics::max_avg(&metrics::charges(&cells, &loads, vcores)) / problem.lower_bound()
    );
    for (i, (name, _)) in settings.iter().enumerate() {
        times[i].sort_by(f64::total_cmp);
        println!(
            "{name:<20} {:>9.2} ms   cut {:>7}   largest {:.4} × the bound",
            times[i][repeats / 2],
            last[i].0,
            last[i].1
        );
    }
}
