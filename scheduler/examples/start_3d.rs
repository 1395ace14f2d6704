//! Where the runtime starts pbs's vCores on a 3D grid, against the columns it used to start
//! from: the edge cut (box faces between two cells) and the balancer's steps from either
//! start to the same tolerance, on 3D Perlin loads.
//!
//! The runtime lays the vCores out in near-cubic layers, moved by up to half a box
//! (`placement::numa_positions`); the columns are the same count of vCores on the 2D sub-grid
//! at mid-depth of the first layer, whose cells run through every layer.
//!
//! `cargo run --release -p pbs-scheduler --example start_3d`

use pbs::loadmap::PerlinMap;
use pbs::{balance, methods, Grid, Problem, StopRule, VCores};
use pbs_scheduler::placement::numa_positions;

mod common;

fn main() -> Result<(), common::Failure> {
    println!("grid        vCores  seed  start    cut at start  cut balanced  max_avg  steps  ms");
    for (n, nz, parts) in [(32, 32, 16), (32, 32, 64), (48, 24, 64), (64, 32, 256)] {
        let grid = Grid::new_3d(n, n, nz)?;
        for seed in 1..=3 {
            let map = PerlinMap { seed, frequency: 1.5, octaves: 3, contrast: 4.0, ..Default::default() };
            let loads: Vec<f64> = map.loads_3d(&grid).iter().map(|c| 1.0 + 4.0 * c).collect();
            let problem = Problem::new(grid, &loads, parts)?;
            let one_node = vec![0; parts];
            let layers = numa_positions(&grid, &one_node);
            let columns = numa_positions(&Grid::new(n, n)?, &one_node);
            for (name, start) in [("layers", layers), ("columns", columns)] {
                let mut vcores = VCores::new(&problem, start, vec![0.0; parts])?;
                let cut = pbs::metrics::edge_cut(&grid, vcores.owners());
                let mut method = methods::by_name("power-cells")?;
                let t = std::time::Instant::now();
                let outcome = balance(method.as_mut(), &problem, &mut vcores, StopRule::for_problem(&problem), |_| {});
                println!(
                    "{:<10}  {parts:>6}  {seed:>4}  {name:<7}  {cut:>12}  {:>12}  {:>7.3}  {:>5}  {:.0}",
                    format!("{n}x{n}x{nz}"),
                    pbs::metrics::edge_cut(&grid, vcores.owners()),
                    vcores.max_avg(),
                    outcome.steps,
                    t.elapsed().as_secs_f64() * 1e3
                );
            }
        }
    }
    Ok(())
}
