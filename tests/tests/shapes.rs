//! Load maps of shapes the paper never named, through the CSV path a user would take.

use pbs::loadmap::{parse_csv, to_csv};
use pbs::{balance, methods, Problem, StopRule, VCores};
use pbs_bench::shapes;

fn balance_csv(name: &str, vcores: usize) -> (pbs::Outcome, usize) {
    balance_csv_from(name, vcores, 1)
}

/// Balances shape `name` from random vCore positions drawn with `seed`.
fn balance_csv_from(name: &str, vcores: usize, seed: u64) -> (pbs::Outcome, usize) {
    let shape = shapes::all().into_iter().find(|s| s.name == name).expect("known shape");
    let (grid, loads) = parse_csv(&to_csv(&shape.grid, &shape.loads)).unwrap();
    assert_eq!(grid, shape.grid);
    let problem = Problem::new(grid, &loads, vcores).unwrap();
    let mut vcores = VCores::random(&problem, seed);
    let mut m = methods::by_name(methods::DEFAULT).unwrap();
    let max_steps = 1000;
    (balance(m.as_mut(), &problem, &mut vcores, StopRule { max_steps, tol: 0.05 }, |_| {}), max_steps)
}

#[test]
fn rings_gradients_hot_spots_empty_regions_stripes_and_sharp_noise_converge() {
    let runs = ["rings", "gradient", "hot-spots-80x40", "near-empty", "stripes", "sharp-perlin-90x45"]
        .iter()
        .flat_map(|n| [(*n, 10), (*n, 16)]);
    {
        for (name, vcores) in runs {
            let (out, _) = balance_csv(name, vcores);
            assert!(out.converged && out.max_avg <= 1.05 * out.lower_bound, "{name} with {vcores} vCores: {out:?}");
        }
    }
}

/// `sparse`: 100 loaded boxes, about 10 per vCore with 10 vCores, the largest 14 % of a share.
/// With so few boxes no convex cell need get within 5 % of the share: from 20 random starts
/// pbs does in 10 (it did in 7 before vCores settled off their centroids, and seed 1 happened
/// to be among them, so this was once asserted for seed 1 alone), and every start ends within
/// one box of the share.
#[test]
fn sparse_maps_end_within_one_box_of_the_share() {
    let shape = shapes::all().into_iter().find(|s| s.name == "sparse").expect("known shape");
    let share = shape.loads.iter().sum::<f64>() / 10.0;
    let one_box = shape.loads.iter().copied().fold(0.0, f64::max) / share;
    let mut within_5_percent = 0;
    for seed in 1..=20 {
        let (out, _) = balance_csv_from("sparse", 10, seed);
        assert!(out.max_avg <= (1.0 + one_box) * out.lower_bound, "seed {seed}: {out:?}");
        within_5_percent += usize::from(out.converged);
    }
    assert!(within_5_percent >= 8, "{within_5_percent} of 20 starts within 5 %");
}

/// One box holds half of the load: the bound is 5 with 10 vCores; the method must reach it
/// and stop, not chase the impossible mean.
#[test]
fn a_single_box_with_half_the_load_converges_to_the_bound_and_stops() {
    let (out, max_steps) = balance_csv("half-in-one-box", 10);
    assert!((out.lower_bound - 5.0).abs() < 1e-9, "{out:?}");
    assert!(out.converged && out.max_avg <= 1.05 * out.lower_bound, "{out:?}");
    assert!(out.max_avg >= out.lower_bound);
    assert!(out.steps < max_steps / 10, "{out:?}");
}

/// Known limitation: two adjacent giant boxes five boxes from a corner, with background load
/// behind them. A convex power cell around a vCore sitting on such a giant keeps the corner's
/// background unless another vCore moves into the corner, which centroid relaxation never
/// does; the power cells stop near 1.1 × the bound (refined box by box they reach it: the next
/// test). Run with `cargo test -- --ignored`.
#[test]
#[ignore = "known limitation: giants near a corner with background load behind them"]
fn three_giants_converge() {
    let (out, _) = balance_csv("three-giants", 10);
    assert!(out.converged, "{out:?}");
}

/// The limit above, lifted by refining the owners box by box (`pbs::refine`): its parts need
/// not be convex, so the boxes around a giant can go to parts that wrap around it. From random
/// starts at 10 and 16 vCores: within 1.01 × the bound (1.000 and 1.002 from the RCB start in
/// the peers table), every part in one piece, none empty.
#[test]
fn three_giants_reach_the_bound_once_refined() {
    let shape = shapes::all().into_iter().find(|s| s.name == "three-giants").expect("known shape");
    for parts in [10, 16] {
        let problem = Problem::new(shape.grid, &shape.loads, parts).unwrap();
        let mut vcores = VCores::random(&problem, 1);
        let mut m = methods::by_name(methods::DEFAULT).unwrap();
        let out = balance(m.as_mut(), &problem, &mut vcores, StopRule { max_steps: 1000, tol: 0.05 }, |_| {});
        let mut owners = vcores.owners().to_vec();
        pbs::refine::refine(&problem, &mut owners, pbs::refine::RefineSettings::default()).unwrap();
        let max_avg = pbs::metrics::max_avg(&pbs::metrics::charges(&owners, &shape.loads, parts));
        assert!(max_avg <= 1.01 * problem.lower_bound(), "{parts} parts: {max_avg} (the cells: {})", out.max_avg);
        assert_eq!(pbs::metrics::disconnected_parts(&shape.grid, &owners, parts), 0);
        let mut held = vec![false; parts];
        owners.iter().for_each(|&o| held[o as usize] = true);
        assert!(held.iter().all(|&h| h), "{parts} parts: a part with no box");
    }
}

/// Issue 18's balance target as the peers' `pbs` row meets it on the shapes (power cells from
/// RCB's centroids, then the refinement): within 1.01 × the bound at 10 and 16 parts, but
/// where a peer shows no connected partition gets there (`sparse`; `near-empty` and `stripes`
/// at 16 parts, 1.013 there, within 0.005 of the best peer), never above the cells alone,
/// every part in one piece.
#[test]
fn the_refined_partition_of_every_shape_is_within_one_percent_of_its_bound() {
    use pbs_peers::quality;
    for shape in shapes::all().into_iter().filter(|s| s.name != "sparse") {
        for parts in [10, 16] {
            let mut pbs = pbs_peers::by_name("pbs").unwrap();
            let mut cells = pbs_peers::by_name("pbs-cells").unwrap();
            let refined = quality::measure(
                &shape.grid,
                &shape.loads,
                &pbs.partition(&shape.grid, &shape.loads, parts).unwrap(),
                parts,
            );
            let alone = quality::measure(
                &shape.grid,
                &shape.loads,
                &cells.partition(&shape.grid, &shape.loads, parts).unwrap(),
                parts,
            );
            let what = format!("{} at {parts} parts: {refined:?}", shape.name);
            assert!(refined.max_avg <= alone.max_avg, "{what}");
            assert_eq!(refined.disconnected_parts, 0, "{what}");
            let exempt = parts == 16 && (shape.name == "near-empty" || shape.name == "stripes");
            assert!(exempt || refined.max_avg <= 1.01 * refined.lower_bound, "{what}");
            assert!(refined.max_avg <= 1.015 * refined.lower_bound, "{what}");
        }
    }
}

/// The dense 80×40 maps over 72 vCores, from the RCB start `pbs-peers` uses, on the two shapes
/// that can be balanced there (rings, the md-like density): the end game of a run from far
/// away first holds its vCores still, where relaxing at every step undid much of what each
/// move gained. Median steps 70.5 → 31 over these twelve; before, the rings of seed 4 wandered
/// for 572 steps.
#[test]
fn dense_rings_and_densities_converge_in_a_few_dozen_steps() {
    let mut steps = Vec::new();
    for map in pbs_bench::peers::dense_maps(6) {
        if !(map.name.contains("rings") || map.name.contains("md-density")) {
            continue;
        }
        let problem = Problem::new(map.grid, &map.loads, 72).unwrap();
        let mut vcores = VCores::from_bisection(&problem);
        let mut m = methods::by_name(methods::DEFAULT).unwrap();
        let out = balance(m.as_mut(), &problem, &mut vcores, StopRule::for_problem(&problem), |_| {});
        assert!(out.converged, "{}: {out:?}", map.name);
        steps.push(out.steps);
    }
    steps.sort_unstable();
    assert_eq!(steps.len(), 12);
    let median = (steps[5] + steps[6]) as f64 / 2.0;
    assert!(median <= 40.0 && steps[11] <= 100, "steps {steps:?}");
}

/// `three-giants` from the RCB start. Over 10 vCores no convex partition reaches the bound
/// (docs/peers.md), but pbs ends no worse than the k-way RCB it starts from (1.093 × the
/// bound); it ended at 1.173 when its end game relaxed at every step. Over 16 it ended at
/// 1.194 × the bound, then 1.125, while its end game tried to shed boxes to the other giant's
/// holder (a move the holder's projection undoes); 1.058 now (RCB: 1.025).
#[test]
fn three_giants_end_no_worse_than_rcb_over_10_and_near_the_bound_over_16() {
    let shape = shapes::all().into_iter().find(|s| s.name == "three-giants").expect("known shape");
    for parts in [10, 16] {
        let problem = Problem::new(shape.grid, &shape.loads, parts).unwrap();
        let rcb = pbs::bisection::kway_rcb(&shape.grid, &shape.loads, parts).unwrap();
        let q = pbs::metrics::charges(&rcb, &shape.loads, parts);
        let rcb_max = q.iter().copied().fold(0.0, f64::max) / problem.mean();
        let mut vcores = VCores::from_bisection(&problem);
        let mut m = methods::by_name(methods::DEFAULT).unwrap();
        let out = balance(m.as_mut(), &problem, &mut vcores, StopRule::for_problem(&problem), |_| {});
        if parts == 10 {
            assert!(out.max_avg <= rcb_max, "pbs {} against RCB {rcb_max}: {out:?}", out.max_avg);
        } else {
            assert!(out.max_avg <= 1.06 * out.lower_bound, "{out:?}");
        }
    }
}

/// `three-giants` rolled a column a step, warm-started by the `pbs` partitioner: where a giant
/// crosses a border, the cells start over or crawl, and they ended at up to 1.188 × the bound
/// (10 parts) and 1.143 (16) with 572 and 505 boxes moved a step, until a warm start whose cells
/// end above the tolerance took the last owners refined where those reach it (1.050 at most;
/// 305 and 331 boxes a step; docs/peers.md, "Warm cells that end above the tolerance").
#[test]
fn rolled_three_giants_stay_within_the_tolerance_warm() {
    use pbs_peers::Partitioner;
    let shape = shapes::all().into_iter().find(|s| s.name == "three-giants").expect("known shape");
    let (grid, nx) = (shape.grid, shape.grid.nx());
    for parts in [10, 16] {
        let mut pbs = pbs_peers::Pbs::default();
        let mut worst = (0.0f64, 0);
        for step in 0..=30 {
            let loads: Vec<f64> =
                (0..grid.len()).map(|k| shape.loads[k - k % nx + (k % nx + nx - step) % nx]).collect();
            let owners = pbs.partition(&grid, &loads, parts).unwrap();
            let problem = Problem::new(grid, &loads, parts).unwrap();
            let to_bound =
                pbs::metrics::max_avg(&pbs::metrics::charges(&owners, &loads, parts)) / problem.lower_bound();
            if to_bound > worst.0 {
                worst = (to_bound, step);
            }
            assert_eq!(pbs::metrics::disconnected_parts(&grid, &owners, parts), 0, "{parts} parts, step {step}");
        }
        assert!(worst.0 <= 1.05 + 1e-9, "{parts} parts: {:.4} × the bound at step {}", worst.0, worst.1);
    }
}

/// `hot-spots-80x40` rolled a column a step at 72 parts: the warm cells, which crawled 40–190
/// steps a call (60–70 ms, where RCB from scratch takes 0.3 ms) and stalled at 1.137 × the
/// bound, stop after `pbs::refine::CRAWL_STEPS`, and the passes after them keep every step
/// within 1.14 × the bound (1.082 at the median step over 30) with every part in one piece.
#[test]
fn rolled_hot_spots_warm_cells_stop_at_the_crawl_limit() {
    use pbs_peers::Partitioner;
    let shape = shapes::all().into_iter().find(|s| s.name == "hot-spots-80x40").expect("known shape");
    let (grid, nx, parts) = (shape.grid, shape.grid.nx(), 72);
    let mut pbs = pbs_peers::Pbs::default();
    for step in 0..=8 {
        let loads: Vec<f64> = (0..grid.len()).map(|k| shape.loads[k - k % nx + (k % nx + nx - step) % nx]).collect();
        let owners = pbs.partition(&grid, &loads, parts).unwrap();
        if step > 0 {
            let steps = pbs.last_steps().unwrap();
            assert!(steps <= pbs::refine::CRAWL_STEPS, "step {step}: the cells took {steps} steps");
        }
        let problem = Problem::new(grid, &loads, parts).unwrap();
        let to_bound = pbs::metrics::max_avg(&pbs::metrics::charges(&owners, &loads, parts)) / problem.lower_bound();
        assert!(to_bound <= 1.14, "step {step}: {to_bound:.4} × the bound");
        assert_eq!(pbs::metrics::disconnected_parts(&grid, &owners, parts), 0, "step {step}");
    }
}

/// The dense hot-box maps (a 3×3 block of boxes each 300 × the background) over 72 vCores, from
/// the RCB start: the start is balanced within 5 % and the run takes no step, but the thin
/// cells around the block left 1–3 parts in pieces on four of the six maps. The end of a first
/// balancing mends them without raising the largest charge and without emptying a part: until
/// 2026-11-29 it mended two of the maps by handing a whole small part to its neighbours (one
/// part with no box, which this test did not look at); one of those keeps a part in pieces now
/// (a lone box diagonal to its block).
#[test]
fn dense_hot_boxes_end_with_every_part_in_one_piece_but_one_and_none_empty() {
    let mut in_pieces = 0;
    for map in pbs_bench::peers::dense_maps(6).into_iter().filter(|m| m.name.contains("hot-box")) {
        let problem = Problem::new(map.grid, &map.loads, 72).unwrap();
        let mut vcores = VCores::from_bisection(&problem);
        let start = vcores.max_avg();
        let mut m = methods::by_name(methods::DEFAULT).unwrap();
        let out = balance(m.as_mut(), &problem, &mut vcores, StopRule::for_problem(&problem), |_| {});
        in_pieces += pbs::metrics::disconnected_parts(&map.grid, vcores.owners(), 72);
        let mut holds = [false; 72];
        vcores.owners().iter().for_each(|&v| holds[v as usize] = true);
        assert!(holds.iter().all(|&h| h), "{}: a part with no box", map.name);
        assert!(out.converged && out.max_avg <= start, "{}: {out:?}", map.name);
    }
    assert!(in_pieces <= 1, "{in_pieces} parts in pieces over the six maps");
}

/// The 30 dense 80×40 maps over 72 parts, as `pbs-peers`'s `pbs` partitions them (power cells
/// to 1.1 × the bound, then `pbs::refine`): every part in one piece, none empty, within 1.05 ×
/// the lower bound but on one disc, a median of at most 30 power-cell steps (issue 18's
/// target; 21 on 2026-11-30). The cells alone leave a part in pieces on at least one of the
/// maps (on 2026-11-30 `dense-rings-s2`), which the refinement mends.
#[test]
fn refined_dense_partitions_have_every_part_in_one_piece() {
    use pbs_peers::quality;
    let (mut cells_in_pieces, mut over, mut steps) = (0, Vec::new(), Vec::new());
    for map in pbs_bench::peers::dense_maps(6) {
        let mut pbs = pbs_peers::by_name("pbs").unwrap();
        let mut cells = pbs_peers::by_name("pbs-cells").unwrap();
        let refined = quality::measure(&map.grid, &map.loads, &pbs.partition(&map.grid, &map.loads, 72).unwrap(), 72);
        steps.push(pbs.last_steps().unwrap());
        let alone = quality::measure(&map.grid, &map.loads, &cells.partition(&map.grid, &map.loads, 72).unwrap(), 72);
        cells_in_pieces += alone.disconnected_parts;
        assert_eq!((refined.disconnected_parts, refined.empty_parts), (0, 0), "{}: {refined:?}", map.name);
        if refined.max_avg > 1.05 * refined.lower_bound {
            over.push(map.name.clone());
        }
    }
    assert!(cells_in_pieces > 0, "no map left to mend: pick a harder family for this test");
    assert!(over.len() <= 1 && over.iter().all(|n| n.contains("disc")), "over 1.05 × the bound: {over:?}");
    steps.sort_unstable();
    let median = (steps[14] + steps[15]) as f64 / 2.0;
    assert!(median <= 30.0, "median power-cell steps {median}: {steps:?}");
}
