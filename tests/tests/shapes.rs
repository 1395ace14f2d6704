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
/// does; pbs stops near 1.1 × the bound. Run with `cargo test -- --ignored`.
#[test]
#[ignore = "known limitation: giants near a corner with background load behind them"]
fn three_giants_converge() {
    let (out, _) = balance_csv("three-giants", 10);
    assert!(out.converged, "{out:?}");
}
