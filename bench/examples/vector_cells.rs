//! Can power cells balance md-split's two phases at once? A probe for issue 22's "pbs with a
//! vector-aware capacity": `cargo run --release -p pbs-bench --example vector_cells -- [SIDE]
//! [PARTS] [ROUNDS]` (64, 16, 60) records md-split's rebin and force costs on SIDE×SIDE boxes
//! (gravity and contraction) and prints, for PARTS parts, each phase's max_avg, the sum of the
//! phases' maxima over the sum of their means (the time of a phase-separated iteration over a
//! perfect one) and the edge cut of:
//!
//! - `scalar`: pbs's mapping, balanced on the summed cost (what the executor does);
//! - `strips`: a column-major prefix split of the summed cost (strips along the fall of
//!   gravity, which hold every density in the same proportion);
//! - `rebin×α`: pbs's mapping of `α · rebin + forces`, a weighted sum that asks more balance of
//!   the rebin phase (judged on the true costs);
//! - `drift N`: pbs's cells after N rounds in which every vCore steps towards the side of its
//!   cell that is rich in rebin cost (the rebin-weighted centroid minus the force-weighted
//!   one), by a quarter of its cell's radius times its rebin deficit, and the power-cell
//!   method (relaxation off) then rebalances the summed cost.
//!
//! docs/balancers.md reads it.
use pbs::grid::{dist2, Point};
use pbs::methods::{PowerCells, PowerCellsSettings};
use pbs::{balance, metrics, Grid, Problem, StopRule, VCores};
use pbs_bench::model::trace::Trace;

/// How far a vCore steps per round, in cell radii per unit of rebin deficit.
const STEP: f64 = 0.25;

/// The weights of the rebin cost in the `rebin×α` rows.
const WEIGHTS: [f64; 4] = [1.5, 2.0, 3.0, 6.0];

fn main() {
    pbs_bench::end_quietly_on_closed_pipe();
    let counts = pbs_bench::example_counts("vector_cells [SIDE] [PARTS] [ROUNDS]", &[Some(64), Some(16), Some(60)]);
    let (side, parts, rounds) = (counts[0], counts[1], counts[2]);
    let fail = |e: &dyn std::fmt::Display| -> ! { pbs_bench::example_failed("vector_cells", e) };
    let grid = Grid::new(side, side).unwrap_or_else(|e| fail(&e));
    println!("scenario     mapping    total  rebin  forces  Σmax/Σmean  edge cut");
    for scenario in ["gravity", "contraction"] {
        // The third recorded iteration: the first ones still carry the start's transients.
        let trace = Trace::record("md-split", scenario, side, side, 3, 1).unwrap_or_else(|e| fail(&e));
        let phases = &trace.costs[2];
        let (rebin, forces) = (&phases[0], &phases[1]);
        let total: Vec<f64> = rebin.iter().zip(forces).map(|(r, f)| r + f).collect();
        let problem = Problem::new(grid, &total, parts).unwrap_or_else(|e| fail(&e));
        let print = |label: &str, owners: &[u32]| {
            let max_avg = |loads: &[f64]| metrics::max_avg(&metrics::charges(owners, loads, parts));
            println!(
                "{scenario:<12} {label:<9} {:>6.3} {:>6.3} {:>7.3} {:>11.3} {:>9}",
                max_avg(&total),
                max_avg(rebin),
                max_avg(forces),
                metrics::vector_max_avg(owners, phases, parts),
                metrics::edge_cut(&grid, owners)
            );
        };
        let mut vcores = VCores::from_bisection(&problem);
        balance(&mut PowerCells::default(), &problem, &mut vcores, StopRule { max_steps: 200, tol: 0.01 }, |_| {});
        print("scalar", vcores.owners());
        print("strips", &column_strips(&grid, &total, parts));
        for alpha in WEIGHTS {
            let weighted: Vec<f64> = rebin.iter().zip(forces).map(|(r, f)| alpha * r + f).collect();
            let on = Problem::new(grid, &weighted, parts).unwrap_or_else(|e| fail(&e));
            let mut cells = VCores::from_bisection(&on);
            balance(&mut PowerCells::default(), &on, &mut cells, StopRule { max_steps: 200, tol: 0.01 }, |_| {});
            print(&format!("rebin×{alpha}"), cells.owners());
        }
        let mut held =
            PowerCells::new(PowerCellsSettings { relax: 0.0, ..Default::default() }).unwrap_or_else(|e| fail(&e));
        let mean_rebin = rebin.iter().sum::<f64>() / parts as f64;
        for round in 1..=rounds {
            let steps = rebin_side_steps(&grid, vcores.owners(), rebin, forces, parts, mean_rebin);
            vcores
                .update(&problem, |positions, weights| {
                    for (i, (step, centre)) in steps.iter().enumerate() {
                        let x = positions[i];
                        let moved: Point = std::array::from_fn(|a| x[a] + step[a]);
                        // The cell's centre keeps its power: the cell shifts instead of jumping.
                        weights[i] += dist2(centre, &moved) - dist2(centre, &x);
                        positions[i] = moved;
                    }
                })
                .unwrap_or_else(|e| fail(&e));
            balance(&mut held, &problem, &mut vcores, StopRule { max_steps: 20, tol: 0.01 }, |_| {});
            if round % 20 == 0 || round == rounds {
                print(&format!("drift {round}"), vcores.owners());
            }
        }
    }
}

/// Per vCore, its step towards the rebin-rich side of its cell and its cell's centre.
fn rebin_side_steps(
    grid: &Grid,
    owners: &[u32],
    rebin: &[f64],
    forces: &[f64],
    parts: usize,
    mean_rebin: f64,
) -> Vec<(Point, Point)> {
    // Per part: Σ rebin·x, Σ forces·x, Σ x, Σ rebin, Σ forces, boxes.
    let mut sums = vec![([0.0f64; 3], [0.0f64; 3], [0.0f64; 3], 0.0, 0.0, 0usize); parts];
    for (k, &o) in owners.iter().enumerate() {
        let c = grid.centre(k);
        let s = &mut sums[o as usize];
        for (a, &x) in c.iter().enumerate() {
            s.0[a] += rebin[k] * x;
            s.1[a] += forces[k] * x;
            s.2[a] += x;
        }
        s.3 += rebin[k];
        s.4 += forces[k];
        s.5 += 1;
    }
    sums.iter()
        .map(|(sr, sf, sc, r, f, n)| {
            let centre: Point = std::array::from_fn(|a| sc[a] / (*n).max(1) as f64);
            if *n == 0 || *r <= 0.0 || *f <= 0.0 {
                return ([0.0; 3], centre);
            }
            let towards: Point = std::array::from_fn(|a| sr[a] / r - sf[a] / f);
            let norm = dist2(&towards, &[0.0; 3]).sqrt();
            if norm < 1e-9 {
                return ([0.0; 3], centre);
            }
            let length = STEP * (mean_rebin - r) / mean_rebin * (*n as f64).sqrt();
            (std::array::from_fn(|a| length * towards[a] / norm), centre)
        })
        .collect()
}

/// A column-major prefix split of `loads` into `parts` runs of about equal load.
fn column_strips(grid: &Grid, loads: &[f64], parts: usize) -> Vec<u32> {
    let [nx, ny, _] = grid.dims();
    let order: Vec<usize> = (0..nx).flat_map(|x| (0..ny).map(move |y| grid.index(x, y, 0))).collect();
    pbs::bisection::split_order(&order, loads, parts)
}
