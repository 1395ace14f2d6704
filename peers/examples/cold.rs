use pbs::{balance, methods, Grid, Problem, StopRule, VCores};
use pbs_peers::{quality, KwayRcb, Partitioner};
use std::time::Instant;

fn main() {
    let mut maps: Vec<(String, Grid, Vec<f64>)> = Vec::new();
    for (i, side) in [(1u32, 40usize), (2, 85), (3, 64), (4, 150)] {
        let g = Grid::new(side, side).unwrap();
        maps.push((format!("perlin{side}"), g, pbs::loadmap::PerlinMap::with_seed(i).loads(&g)));
    }
    let g = Grid::new(80, 40).unwrap();
    let m = pbs::loadmap::PerlinMap { seed: 77, frequency: 7.0, octaves: 6, contrast: 4.0, ..Default::default() };
    maps.push(("sharp80x40".into(), g, m.loads(&g)));
    let tol: f64 = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(0.05);
    for (name, grid, loads) in &maps {
        for parts in [16usize, 72] {
            if grid.len() < parts * 20 {
                continue;
            }
            let problem = Problem::new(*grid, loads, parts).unwrap();
            for cold in ["random", "rcb"] {
                let t = Instant::now();
                let mut v = if cold == "random" {
                    VCores::random(&problem, 1)
                } else {
                    let owners = KwayRcb.partition(grid, loads, parts).unwrap();
                    let mut sum = vec![[0.0f64; 4]; parts];
                    for (k, &p) in owners.iter().enumerate() {
                        let c = grid.centre(k);
                        let s = &mut sum[p as usize];
                        s[0] += c[0];
                        s[1] += c[1];
                        s[2] += c[2];
                        s[3] += 1.0;
                    }
                    let pos = sum.iter().map(|s| [s[0] / s[3], s[1] / s[3], s[2] / s[3]]).collect();
                    VCores::new(&problem, pos, vec![0.0; parts]).unwrap()
                };
                let mut m = methods::by_name("power-cells").unwrap();
                let out = balance(m.as_mut(), &problem, &mut v, StopRule { max_steps: 5000, tol }, |_| {});
                let ms = t.elapsed().as_secs_f64() * 1e3;
                let q = quality::measure(grid, loads, v.owners(), parts);
                println!(
                    "{name:12} {parts:3} {cold:7} steps {:4} ms {:8.2} bound {:.4} cut {:5} disc {}",
                    out.steps,
                    ms,
                    q.max_avg / q.lower_bound,
                    q.edge_cut,
                    q.disconnected_parts
                );
            }
            let t = Instant::now();
            let o = KwayRcb.partition(grid, loads, parts).unwrap();
            let ms = t.elapsed().as_secs_f64() * 1e3;
            let q = quality::measure(grid, loads, &o, parts);
            println!(
                "{name:12} {parts:3} RCB     steps    - ms {:8.2} bound {:.4} cut {:5}",
                ms,
                q.max_avg / q.lower_bound,
                q.edge_cut
            );
        }
    }
}
