//! How short a cut single-box moves can reach at a given balance, from pbs's cold start:
//! `cargo run --release -p pbs-bench --example cut_annealing -- SIDE|MAP.csv PARTS PERMILLE
//! [MOVES_PER_BOX] [RUNS] [SEED]` partitions a SIDE×SIDE Perlin map (seed SEED, 1 by default,
//! as `pbs-bench peers --perlin` draws its `-sSEED` maps) or a CSV map (`pbs-bench maps`
//! writes some) as the `pbs` row of `pbs-bench peers` does, then anneals its owners RUNS times
//! (3 by default, each with its own random stream): a box on a border is offered to a
//! neighbouring part, taken where that part stays within `1 + PERMILLE / 1000` times the lower
//! bound (or ends lighter than the part the box leaves was), no part is emptied or split, and
//! a move that lengthens the cut by `Δ` faces with probability `exp(−Δ / T)`, `T`
//! falling linearly from 2 to 0.05 over MOVES_PER_BOX × the boxes offers (20,000 by default).
//! Each run prints the shortest cut it met within the cap. A search, not a partitioner: it says
//! whether a shorter cut exists near pbs's partition at the balance asked, not how to find one
//! quickly (each offer checks the part left behind is in one piece by a walk over it, so keep
//! it to maps of a few thousand boxes).
use pbs::loadmap::{read_csv, PerlinMap};
use pbs::rng::SplitMix64;
use pbs::{methods, metrics, refine, Grid, Problem, StopRule};
use std::path::Path;
use std::time::Instant;

fn main() {
    pbs_bench::end_quietly_on_closed_pipe();
    const USAGE: &str = "cut_annealing SIDE|MAP.csv PARTS PERMILLE [MOVES_PER_BOX] [RUNS] [SEED]";
    let fail = |e: &dyn std::fmt::Display| -> ! { pbs_bench::example_failed("cut_annealing", e) };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let defaults = [None, None, Some(20_000), Some(3), Some(1)];
    let (map, counts) = match args.first() {
        Some(first) => (first.clone(), pbs_bench::counts_of(USAGE, &args[1..], &defaults)),
        None => (String::new(), pbs_bench::counts_of(USAGE, &[], &[None])),
    };
    let [parts, permille, moves_per_box, runs, seed] = counts[..] else { unreachable!("five counts") };
    let (grid, loads) = match map.parse::<usize>() {
        Ok(side) => {
            let grid = Grid::new(side, side).unwrap_or_else(|e| fail(&e));
            (grid, PerlinMap::with_seed(PerlinMap::noise_seed(seed as u64)).loads(&grid))
        }
        Err(_) => read_csv(Path::new(&map)).unwrap_or_else(|e| fail(&e)),
    };
    let problem = Problem::new(grid, &loads, parts).unwrap_or_else(|e| fail(&e));
    let mut method = methods::by_name(methods::DEFAULT).unwrap_or_else(|e| fail(&e));
    let first = refine::first_partition(method.as_mut(), &problem, StopRule::before_refinement(&problem), 0.005)
        .unwrap_or_else(|e| fail(&e));
    // Charges in the loads' units: the bound is a multiple of the mean charge.
    let bound = problem.lower_bound() * problem.mean();
    let largest = |owners: &[u32]| metrics::charges(owners, &loads, parts).into_iter().fold(0.0, f64::max) / bound;
    // Where a box heavier than the mean sets the bound, the other parts have room to be uneven.
    let lightest = |owners: &[u32]| {
        metrics::charges(owners, &loads, parts).into_iter().fold(f64::INFINITY, f64::min) / problem.mean()
    };
    let cap = bound * (1.0 + permille as f64 / 1000.0);
    println!(
        "{}x{} boxes, {parts} parts, cap {:.3} × the bound, {} offers a run",
        grid.nx(),
        grid.ny(),
        cap / bound,
        moves_per_box.saturating_mul(grid.len())
    );
    println!(
        "pbs cold start: cut {}, largest {:.4} × the bound, lightest {:.3} × the mean",
        metrics::edge_cut(&grid, &first.owners),
        largest(&first.owners),
        lightest(&first.owners)
    );
    for run in 1..=runs {
        let t = Instant::now();
        let best =
            anneal(&grid, &loads, parts, &first.owners, cap, moves_per_box.saturating_mul(grid.len()), run as u64);
        match best {
            Some(owners) => println!(
                "run {run}: cut {}, largest {:.4} × the bound, lightest {:.3} × the mean, {} parts in pieces ({:.1} s)",
                metrics::edge_cut(&grid, &owners),
                largest(&owners),
                lightest(&owners),
                metrics::disconnected_parts(&grid, &owners, parts),
                t.elapsed().as_secs_f64()
            ),
            None => println!("run {run}: no state within the cap met ({:.1} s)", t.elapsed().as_secs_f64()),
        }
    }
}

/// The owners with the shortest cut met within `cap` over `offers` offers, starting from
/// `start` (`None` where no state met was within it).
fn anneal(
    grid: &Grid,
    loads: &[f64],
    parts: usize,
    start: &[u32],
    cap: f64,
    offers: usize,
    run: u64,
) -> Option<Vec<u32>> {
    let mut owners = start.to_vec();
    let mut charge = metrics::charges(&owners, loads, parts);
    let mut count = vec![0usize; parts];
    owners.iter().for_each(|&o| count[o as usize] += 1);
    let mut cut = metrics::edge_cut(grid, &owners) as i64;
    let within = |charge: &[f64]| charge.iter().all(|&c| c <= cap);
    let mut best = within(&charge).then(|| (cut, owners.clone()));
    let mut rng = SplitMix64::new(run);
    let mut walk = Walk { seen: vec![0; owners.len()], mark: 0, stack: Vec::new() };
    let n = owners.len();
    for i in 0..offers {
        let temperature = 2.0 * (1.0 - i as f64 / offers as f64) + 0.05;
        let k = rng.below(n);
        let p = owners[k];
        let mut near = [0u32; 6];
        let mut len = 0;
        grid.for_each_neighbour(k, |m| {
            near[len] = owners[m];
            len += 1;
        });
        let others = near[..len].iter().filter(|&&q| q != p).count();
        if others == 0 || count[p as usize] == 1 {
            continue;
        }
        let q = *near[..len].iter().filter(|&&q| q != p).nth(rng.below(others)).expect("one of the others");
        if charge[q as usize] + loads[k] > cap && charge[q as usize] + loads[k] > charge[p as usize] {
            continue;
        }
        let faces = |r: u32| near[..len].iter().filter(|&&o| o == r).count() as i64;
        let delta = faces(p) - faces(q);
        if delta > 0 && rng.next_f64() > (-(delta as f64) / temperature).exp() {
            continue;
        }
        owners[k] = q;
        if !walk.connected_without(grid, &owners, k, p, count[p as usize] - 1) {
            owners[k] = p;
            continue;
        }
        charge[p as usize] -= loads[k];
        charge[q as usize] += loads[k];
        count[p as usize] -= 1;
        count[q as usize] += 1;
        cut += delta;
        if best.as_ref().is_none_or(|b| cut < b.0) && within(&charge) {
            best = Some((cut, owners.clone()));
        }
    }
    best.map(|b| b.1)
}

/// A walk over one part, its marks reused from walk to walk.
struct Walk {
    seen: Vec<u32>,
    mark: u32,
    stack: Vec<usize>,
}

impl Walk {
    /// Whether the `left` boxes of part `p`, which box `k` has just left, are in one piece.
    fn connected_without(&mut self, grid: &Grid, owners: &[u32], k: usize, p: u32, left: usize) -> bool {
        let mut from = None;
        grid.for_each_neighbour(k, |m| {
            if owners[m] == p {
                from.get_or_insert(m);
            }
        });
        let Some(from) = from else { return left == 0 };
        if self.mark == u32::MAX {
            // Marks are compared for equality only: starting over keeps them apart.
            self.seen.fill(0);
            self.mark = 0;
        }
        self.mark += 1;
        let mark = self.mark;
        self.seen[from] = mark;
        self.stack.clear();
        self.stack.push(from);
        let mut reached = 1;
        while let Some(b) = self.stack.pop() {
            grid.for_each_neighbour(b, |m| {
                if owners[m] == p && self.seen[m] != mark {
                    self.seen[m] = mark;
                    reached += 1;
                    self.stack.push(m);
                }
            });
        }
        reached == left
    }
}
