//! The power-cell method on seeded random maps where a few heavy boxes set the lower bound (or,
//! with `plain`, the same maps without them), from a random start (the executor's and the C
//! partitioner's) and from the bisection start (the `pbs` peer's), against a k-way recursive
//! coordinate bisection of the same loads:
//! `cargo run --release -p pbs-bench --example giant_maps -- [MAPS] [giants|plain]`.
//! Grids up to 54 × 51 boxes, from two parts to an eighth of the boxes, box loads `u⁴` (most
//! near zero), and, with giants, three boxes of up to three mean shares each. Prints, per
//! start, the runs that end with a part holding no box, that end unconverged and more than
//! 0.005 above the bisection's largest part, and that end over 1.05, 1.2 and 1.5 × it
//! (docs/peers.md, "Parts with no box" and "Stuck far from the bound").
use pbs::{balance, bisection, methods, metrics, Grid, Problem, StopRule, VCores};

fn main() {
    pbs_bench::end_quietly_on_closed_pipe();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let giants = match args.get(1).map(String::as_str) {
        None => true,
        Some("plain") if args.len() == 2 => false,
        Some(_) => pbs_bench::example_failed("giant_maps", &"usage: giant_maps [COUNT] [plain]"),
    };
    let count = pbs_bench::counts_of("giant_maps [COUNT] [plain]", &args[..args.len().min(1)], &[Some(1500)])[0];
    let mut rng = pbs::rng::SplitMix64::new(11);
    let (mut maps, mut empty, mut behind) = (0, [0usize; 2], [0usize; 2]);
    let mut over = [[0usize; 3]; 2];
    while maps < count {
        let grid = Grid::new(4 + (rng.next_f64() * 50.0) as usize, 1 + (rng.next_f64() * 50.0) as usize).unwrap();
        let n = 2 + (rng.next_f64() * (grid.len() as f64 / 8.0)) as usize;
        if n > grid.len() / 4 {
            continue;
        }
        let mut loads: Vec<f64> = (0..grid.len()).map(|_| rng.next_f64().powi(4)).collect();
        let total: f64 = loads.iter().sum();
        if giants {
            for _ in 0..3 {
                let k = (rng.next_f64() * grid.len() as f64) as usize;
                loads[k] = 3.0 * rng.next_f64() * total / n as f64;
            }
        }
        let problem = Problem::new(grid, &loads, n).unwrap();
        let rcb = bisection::kway_rcb(&grid, &loads, n).unwrap();
        let rcb_max = metrics::max_avg(&metrics::charges(&rcb, &loads, n));
        let starts = [VCores::random(&problem, maps as u64), VCores::from_bisection(&problem)];
        for (s, mut vcores) in starts.into_iter().enumerate() {
            let mut method = methods::by_name(methods::DEFAULT).unwrap();
            let out = balance(method.as_mut(), &problem, &mut vcores, StopRule::for_problem(&problem), |_| {});
            let mut holds = vec![false; n];
            vcores.owners().iter().for_each(|&o| holds[o as usize] = true);
            empty[s] += usize::from(holds.contains(&false));
            behind[s] += usize::from(!out.converged && out.max_avg > rcb_max + 0.005);
            for (i, limit) in [1.05, 1.2, 1.5].into_iter().enumerate() {
                over[s][i] += usize::from(out.max_avg > limit * rcb_max);
            }
        }
        maps += 1;
    }
    println!("{maps} maps {}:", if giants { "with giants" } else { "without giants" });
    for (s, name) in ["random start", "bisection start"].into_iter().enumerate() {
        println!(
            "  {name:<15}  a part with no box {:>4}   unconverged and over RCB + 0.005 {:>4}   over 1.05 / 1.2 / 1.5 x RCB {} / {} / {}",
            empty[s], behind[s], over[s][0], over[s][1], over[s][2]
        );
    }
}
