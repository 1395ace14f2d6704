//! Property tests of the balancer's invariants (proptest).

use pbs::assign::{assign, assign_brute, Assignment};
use pbs::forces::{add_pair_forces, ForceLaw};
use pbs::{balance, methods, metrics, refine, Grid, Point, Problem, Run, StopRule, VCores, RESTART_FROM};
use proptest::prelude::*;

/// One load per box: mostly moderate, a fifth zero, a fifth up to 1,000.
fn loads_strategy(n: usize) -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(prop_oneof![3 => 0.0..10.0f64, 1 => Just(0.0), 1 => 0.0..1000.0f64], n)
}

/// A grid, loads (with exact zeros and a few heavy boxes) and a vCore count.
fn problem_strategy() -> impl Strategy<Value = (Grid, Vec<f64>, usize)> {
    (1usize..30, 1usize..30).prop_flat_map(|(nx, ny)| {
        let n = nx * ny;
        (Just(Grid::new(nx, ny).unwrap()), loads_strategy(n), 1..=n.min(24))
    })
}

/// A problem whose vCores fall in 2 to 4 groups of one size (NUMA nodes): the grid, its
/// loads, the group count and the group size, at most 24 vCores and no more than boxes. (Drawn
/// so rather than rejected: a vCore count with no divisor in 2..5 had been a third of the
/// draws, past proptest's global reject limit from about 3,000 cases.)
fn grouped_problem_strategy() -> impl Strategy<Value = (Grid, Vec<f64>, usize, usize)> {
    (1usize..30, 2usize..30).prop_flat_map(|(nx, ny)| {
        let n = nx * ny;
        (2..=n.min(4)).prop_flat_map(move |groups| {
            (Just(Grid::new(nx, ny).unwrap()), loads_strategy(n), Just(groups), 1..=(n / groups).min(24 / groups))
        })
    })
}

/// Sites anywhere in (or on the edge of) the domain, on box centres (ties) or coincident.
fn sites_strategy(grid: Grid, n: usize) -> impl Strategy<Value = (Vec<Point>, Vec<f64>)> {
    let (nx, ny) = (grid.nx() as f64, grid.ny() as f64);
    let site = prop_oneof![
        (0.0..=nx, 0.0..=ny).prop_map(|(x, y)| [x, y, 0.5]),
        (0..grid.nx(), 0..grid.ny()).prop_map(|(i, j)| [i as f64 + 0.5, j as f64 + 0.5, 0.5]),
        Just([nx / 2.0, ny / 2.0, 0.5]),
    ];
    (
        prop::collection::vec(site, n),
        prop::collection::vec(prop_oneof![2 => Just(0.0), 1 => -50.0..50.0f64, 1 => (-3i32..3).prop_map(f64::from)], n),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// The fast assignment is the brute-force oracle, bit for bit, ties and seconds included.
    #[test]
    fn fast_assignment_equals_brute_force(
        (grid, sites, weights) in (1usize..40, 1usize..40, 1usize..60)
            .prop_flat_map(|(nx, ny, n)| {
                let g = Grid::new(nx, ny).unwrap();
                (Just(g), sites_strategy(g, n.min(nx * ny)))
            })
            .prop_map(|(g, (s, w))| (g, s, w))
    ) {
        let (mut fast, mut brute) = (Assignment::default(), Assignment::default());
        assign(&grid, &sites, &weights, &mut fast);
        assign_brute(&grid, &sites, &weights, &mut brute);
        prop_assert_eq!(fast, brute);
    }

    /// The same on 3D grids.
    #[test]
    fn fast_assignment_equals_brute_force_in_3d(
        dims in (1usize..9, 1usize..9, 1usize..9),
        raw in prop::collection::vec((0.0..1.0f64, 0.0..1.0f64, 0.0..1.0f64, -5.0..5.0f64), 1..20),
    ) {
        let grid = Grid::new_3d(dims.0, dims.1, dims.2).unwrap();
        let e = grid.extent();
        let sites: Vec<Point> = raw.iter().map(|r| [r.0 * e[0], r.1 * e[1], r.2 * e[2]]).collect();
        let weights: Vec<f64> = raw.iter().map(|r| r.3).collect();
        let (mut fast, mut brute) = (Assignment::default(), Assignment::default());
        assign(&grid, &sites, &weights, &mut fast);
        assign_brute(&grid, &sites, &weights, &mut brute);
        prop_assert_eq!(fast, brute);
    }

    /// After balancing with any method: every box has exactly one owner, the one the definition
    /// names, and the charges sum to the total load.
    #[test]
    fn every_box_owned_once_and_charges_sum_to_total(
        (grid, loads, n) in problem_strategy(),
        seed in 0u64..1000,
        method in prop::sample::select(methods::NAMES.to_vec()),
    ) {
        let problem = Problem::new(grid, &loads, n).unwrap();
        let mut vcores = VCores::random(&problem, seed);
        let mut m = methods::by_name(method).unwrap();
        let out = balance(m.as_mut(), &problem, &mut vcores, StopRule { max_steps: 30, tol: 0.05 }, |_| {});
        prop_assert_eq!(vcores.owners().len(), grid.len());
        prop_assert!(vcores.owners().iter().all(|&o| (o as usize) < n));
        // Each box belongs to exactly the vCore the definition names: argmin of the power
        // distance, ties to the lowest index (recomputed by brute force from the final state).
        let mut oracle = Assignment::default();
        assign_brute(&grid, vcores.positions(), vcores.weights(), &mut oracle);
        prop_assert_eq!(vcores.owners(), &oracle.owner[..]);
        let recomputed = metrics::charges(vcores.owners(), &loads, n);
        prop_assert_eq!(&recomputed, &vcores.charges().to_vec());
        let sum: f64 = vcores.charges().iter().sum();
        prop_assert!((sum - problem.total()).abs() <= 1e-9 * problem.total().max(1.0), "{} vs {}", sum, problem.total());
        prop_assert!(out.max_avg.is_finite() && out.max_avg >= 1.0 - 1e-12);
        prop_assert!(out.max_avg >= out.lower_bound * (1.0 - 1e-12), "below the lower bound: {:?}", out);
        prop_assert!(vcores.positions().iter().flatten().all(|v| v.is_finite()));
        prop_assert!(vcores.weights().iter().all(|v| v.is_finite()));
    }

    /// Coincident vCores never produce NaN or infinity, in the forces or in a full step.
    #[test]
    fn coincident_vcores_stay_finite(
        n in 2usize..12,
        charges in prop::collection::vec(0.0..5.0f64, 12),
        method in prop::sample::select(methods::NAMES.to_vec()),
    ) {
        let same = vec![[3.0, 3.0, 0.5]; n];
        for law in [ForceLaw::Coulomb, ForceLaw::InverseCharge, ForceLaw::Balance, ForceLaw::BalanceShortRange] {
            let mut f = vec![[0.0; 3]; n];
            add_pair_forces(law, &same, &charges[..n], 1.0, &mut f);
            prop_assert!(f.iter().flatten().all(|v| v.is_finite()), "{:?}: {:?}", law, f);
        }
        let grid = Grid::new(8, 8).unwrap();
        let loads: Vec<f64> = (0..64).map(|k| (k % 5) as f64).collect();
        let problem = Problem::new(grid, &loads, n).unwrap();
        let mut vcores = VCores::new(&problem, same, vec![0.0; n]).unwrap();
        let mut m = methods::by_name(method).unwrap();
        let out = balance(m.as_mut(), &problem, &mut vcores, StopRule { max_steps: 20, tol: 0.05 }, |_| {});
        prop_assert!(out.max_avg.is_finite());
        prop_assert!(vcores.positions().iter().flatten().all(|v| v.is_finite()));
    }

    /// The same input and seed give the same result, bit for bit.
    #[test]
    fn same_seed_same_result((grid, loads, n) in problem_strategy(), seed in 0u64..1000) {
        let problem = Problem::new(grid, &loads, n).unwrap();
        let run = || {
            let mut vcores = VCores::random(&problem, seed);
            let mut m = methods::by_name("power-cells").unwrap();
            let out = balance(m.as_mut(), &problem, &mut vcores, StopRule { max_steps: 50, tol: 0.05 }, |_| {});
            (vcores.owners().to_vec(), vcores.positions().to_vec(), vcores.weights().to_vec(), out.steps, out.max_avg)
        };
        prop_assert_eq!(run(), run());
    }

    /// A restart with groups of equal size (NUMA nodes) gives the vCores the same positions
    /// as without groups (the centroids of the bisection's parts), only perhaps to other
    /// vCores: when it does, each group sits on one run of the bisection's depth-first part
    /// ids, and the groups' regions are in fewer pieces than without.
    #[test]
    fn a_restart_with_groups_moves_no_cell_and_splits_no_more_groups((grid, loads, groups, size) in grouped_problem_strategy(), seed in 0u64..1000) {
        let n = groups * size;
        let problem = Problem::new(grid, &loads, n).unwrap();
        let vcores = VCores::random(&problem, seed);
        let plain = vcores.restarted_from_bisection(&problem);
        // Equal sizes, the labels shuffled: v * 7 mod groups cycles through them (7 is prime to 2, 3 and 4).
        let group: Vec<usize> = (0..n).map(|v| (v * 7 + seed as usize) % groups).collect();
        let grouped = vcores.with_groups(&group).unwrap().restarted_from_bisection(&problem);
        let bits = |p: &[f64; 3]| p.map(f64::to_bits);
        let sorted = |v: &VCores| {
            let mut p: Vec<[u64; 3]> = v.positions().iter().map(bits).collect();
            p.sort_unstable();
            p
        };
        prop_assert_eq!(sorted(&grouped), sorted(&plain));
        // Which part each vCore sits at the centroid of (parts with one centroid: skipped).
        let parts = pbs::bisection::kway_rcb(&grid, &loads, n).unwrap();
        let centroids = VCores::at_centroids(&problem, &parts).unwrap();
        let mut part_at = std::collections::HashMap::new();
        for (p, c) in centroids.positions().iter().enumerate() {
            prop_assume!(part_at.insert(bits(c), p).is_none());
        }
        let group_of_part = |v: &VCores| {
            let mut g = vec![0u32; n];
            v.positions().iter().enumerate().for_each(|(i, c)| g[part_at[&bits(c)]] = group[i] as u32);
            g
        };
        let pieces = |g: &[u32]| {
            let regions: Vec<u32> = parts.iter().map(|&p| g[p as usize]).collect();
            metrics::disconnected_parts(&grid, &regions, groups)
        };
        let (with, without) = (group_of_part(&grouped), group_of_part(&plain));
        prop_assert!(pieces(&with) <= pieces(&without));
        if with != without {
            prop_assert!(pieces(&with) < pieces(&without));
            for run in with.chunks(size) {
                prop_assert!(run.iter().all(|&g| g == run[0]), "a run shared: {:?}", run);
            }
        }
    }

    /// A rebalancing never starts worse than the cells it is given: it starts over from a
    /// bisection only from `RESTART_FROM` × the lower bound and only to a better start, and
    /// says so; every box keeps one owner.
    #[test]
    fn a_rebalancing_never_starts_worse_than_its_cells((grid, loads, n) in problem_strategy(), seed in 0u64..1000) {
        let problem = Problem::new(grid, &loads, n).unwrap();
        // Random sites: often far from balance.
        let mut vcores = VCores::random(&problem, seed);
        let given = vcores.max_avg();
        let mut m = methods::by_name("power-cells").unwrap();
        let (mut run, first) =
            Run::start_rebalancing(m.as_mut(), &problem, &mut vcores, StopRule { max_steps: 5, tol: 0.05 });
        prop_assert!(first.max_avg <= given, "{} > {}", first.max_avg, given);
        while run.step(m.as_mut(), &problem, &mut vcores).is_some() {}
        let out = run.finish(m.as_mut(), &problem, &mut vcores);
        prop_assert_eq!(out.restarted, first.max_avg < given);
        if out.restarted {
            prop_assert!(given > RESTART_FROM * problem.lower_bound());
        }
        prop_assert!(vcores.owners().len() == grid.len() && vcores.owners().iter().all(|&o| (o as usize) < n));
    }
}

/// A grid, loads of which a drawn share carry none (a fifth, seven tenths or nineteen twentieths:
/// few loaded boxes per part is where cells are squeezed out), and a part count up to 40.
fn sparse_problem_strategy() -> impl Strategy<Value = (Grid, Vec<f64>, usize)> {
    (1usize..30, 1usize..30, prop_oneof![Just(0.2), Just(0.7), Just(0.95)]).prop_flat_map(|(nx, ny, zeros)| {
        let n = nx * ny;
        let load = (0.0..1.0f64, 0.0..1.0f64).prop_map(move |(u, q)| if u < zeros { 0.0 } else { q + 0.01 });
        (Just(Grid::new(nx, ny).unwrap()), prop::collection::vec(load, n), 1..=n.min(40))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The partitioners' path (`refine::first_partition`, then `refine::rebalance_mended` given
    /// the last owners, as `pbs-bench peers`'s `pbs` row and the C partitioner call them) on a
    /// map rolled by one to three columns a call, and a first partition from random vCores
    /// (`refine::first_partition_from`, as the C partitioner's paper methods start): every part
    /// ends with a box and in one piece, call after call, and the same inputs give the same
    /// owners. (Before 2026-12-01 a warm call could return a part with no box on maps where few
    /// boxes carry load, 53 of 1,500 scratch cases, and a start from random vCores on maps with
    /// nearly as many parts as boxes, 299 of 5,000.) A shift of 0 is a map far from the last
    /// one (the loads in reverse order), after which a warm call ends within the tolerance or
    /// within it of a k-way RCB refined by the same passes (it had ended at up to 2 × the bound
    /// where the RCB reached it).
    #[test]
    fn the_partitioners_leave_no_part_empty_or_in_pieces(
        (grid, loads, n) in sparse_problem_strategy(),
        shifts in prop::collection::vec(0usize..4, 1..4),
        seed in 0u64..1000,
    ) {
        let problem = Problem::new(grid, &loads, n).unwrap();
        let mut m = methods::by_name("power-cells").unwrap();
        let first = refine::first_partition(m.as_mut(), &problem, StopRule::before_refinement(&problem), 0.005).unwrap();
        let whole_and_full = |owners: &[u32]| {
            let mut held = vec![false; n];
            owners.iter().for_each(|&o| held[o as usize] = true);
            held.iter().all(|&h| h) && metrics::disconnected_parts(&grid, owners, n) == 0
        };
        prop_assert!(whole_and_full(&first.owners), "first: {:?}", first.owners);
        let random = VCores::random(&problem, seed);
        let scattered = refine::first_partition_from(m.as_mut(), &problem, random, StopRule::before_refinement(&problem), 0.005).unwrap();
        prop_assert!(whole_and_full(&scattered.owners), "from random vCores: {:?}", scattered.owners);
        let (mut vcores, mut last, mut whole, mut rolled) = (first.vcores, first.owners, true, loads.clone());
        let nx = grid.nx();
        for shift in shifts {
            rolled = match shift {
                0 => rolled.iter().rev().copied().collect(),
                _ => (0..grid.len()).map(|k| rolled[k - k % nx + (k % nx + shift) % nx]).collect(),
            };
            let problem = Problem::new(grid, &rolled, n).unwrap();
            let mut again = vcores.clone();
            let stop = StopRule::default();
            let done = refine::rebalance_mended(m.as_mut(), &problem, &mut vcores, stop, whole, Some(&last)).unwrap();
            prop_assert!(whole_and_full(&done.owners), "shift {}: {:?}", shift, done.owners);
            let largest = |o: &[u32]| metrics::charges(o, problem.loads(), n).into_iter().fold(0.0, f64::max);
            let mut rcb = pbs::bisection::kway_rcb(&grid, &rolled, n).unwrap();
            let passes = refine::RefineSettings { tol: stop.tol, group_sweeps: 0, pair_sweeps: 0, ..Default::default() };
            refine::refine(&problem, &mut rcb, passes).unwrap();
            let target = (1.0 + stop.tol) * problem.lower_bound() * problem.mean();
            let allowed = target.max((1.0 + stop.tol) * largest(&rcb)) * (1.0 + 1e-9);
            prop_assert!(largest(&done.owners) <= allowed, "shift {}: {} against {}", shift, largest(&done.owners), allowed);
            let mut m2 = methods::by_name("power-cells").unwrap();
            let twin = refine::rebalance_mended(m2.as_mut(), &problem, &mut again, StopRule::default(), whole, Some(&last)).unwrap();
            prop_assert_eq!(&twin.owners, &done.owners);
            (last, whole) = (done.owners, done.cells_whole);
        }
    }
}

/// Seeded maps where a few heavy boxes set the lower bound: grids up to 44 × 41 boxes, from two
/// vCores to an eighth of the boxes, loads `u⁴` and three boxes of up to three shares each.
fn maps_with_giants(count: usize) -> Vec<Problem<'static>> {
    let mut rng = pbs::rng::SplitMix64::new(11);
    let mut maps = Vec::with_capacity(count);
    while maps.len() < count {
        let grid = Grid::new(4 + (rng.next_f64() * 40.0) as usize, 1 + (rng.next_f64() * 40.0) as usize).unwrap();
        let n = 2 + (rng.next_f64() * (grid.len() as f64 / 8.0)) as usize;
        if n > grid.len() / 4 {
            continue;
        }
        let mut loads: Vec<f64> = (0..grid.len()).map(|_| rng.next_f64().powi(4)).collect();
        let total: f64 = loads.iter().sum();
        for _ in 0..3 {
            let k = (rng.next_f64() * grid.len() as f64) as usize;
            loads[k] = 3.0 * rng.next_f64() * total / n as f64;
        }
        maps.push(Problem::from_vec(grid, loads, n).unwrap());
    }
    maps
}

/// Where a few heavy boxes set the lower bound, the other cells have room to spare and a run
/// could end with a cell holding no box (142 of 1,500 runs from random starts and 25 from the
/// bisection start on maps like these before 2026-11-29: `cargo run --release -p pbs-bench
/// --example giant_maps`): a thread, rank or part with nothing of its own. A run's end now
/// gives each such cell a box.
#[test]
fn no_cell_ends_a_run_with_no_box_on_maps_with_giants() {
    for (i, problem) in maps_with_giants(300).iter().enumerate() {
        let n = problem.vcores();
        for mut vcores in [VCores::random(problem, i as u64), VCores::from_bisection(problem)] {
            let mut m = methods::by_name("power-cells").unwrap();
            let out = balance(m.as_mut(), problem, &mut vcores, StopRule::for_problem(problem), |_| {});
            let mut holds = vec![false; n];
            vcores.owners().iter().for_each(|&o| holds[o as usize] = true);
            let empty = holds.iter().filter(|&&h| !h).count();
            let g = problem.grid();
            assert_eq!(empty, 0, "{}x{} boxes, {n} cells, map {i}: {out:?}", g.nx(), g.ny());
        }
    }
}

/// On the same maps a run from a random start could end stuck at twice the bound where a k-way
/// recursive coordinate bisection sat at it (over 1.5 × the bisection's largest part in 6 of
/// 1,500 runs of `giant_maps`, over 1.2 × in 38); one stuck that far from the bound now starts
/// over from the bisection once. Every run here ends within 1.3 × the bisection's largest part.
#[test]
fn no_run_ends_stuck_far_above_a_bisection_on_maps_with_giants() {
    for (i, problem) in maps_with_giants(300).iter().enumerate() {
        let n = problem.vcores();
        let rcb = pbs::bisection::kway_rcb(problem.grid(), problem.loads(), n).unwrap();
        let rcb_max = metrics::max_avg(&metrics::charges(&rcb, problem.loads(), n));
        let mut vcores = VCores::random(problem, i as u64);
        let mut m = methods::by_name("power-cells").unwrap();
        let out = balance(m.as_mut(), problem, &mut vcores, StopRule::for_problem(problem), |_| {});
        let g = problem.grid();
        assert!(
            out.max_avg <= 1.3 * rcb_max,
            "{}x{} boxes, {n} cells, map {i}: RCB {rcb_max}, {out:?}",
            g.nx(),
            g.ny()
        );
    }
}
