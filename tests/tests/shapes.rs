//! Load maps of shapes the paper never named, through the CSV path a user would take.

use pbs::loadmap::{parse_csv, to_csv};
use pbs::{balance, methods, Cells, Options, Problem};
use pbs_bench::shapes;

fn balance_csv(name: &str, vcores: usize) -> (pbs::Outcome, usize) {
    let shape = shapes::all().into_iter().find(|s| s.name == name).expect("known shape");
    let (grid, loads) = parse_csv(&to_csv(&shape.grid, &shape.loads)).unwrap();
    assert_eq!(grid, shape.grid);
    let problem = Problem::new(grid, &loads, vcores).unwrap();
    let mut cells = Cells::random(&problem, 1);
    let mut m = methods::by_name(methods::DEFAULT).unwrap();
    let max_steps = 1000;
    (balance(m.as_mut(), &problem, &mut cells, Options { max_steps, tol: 0.05 }, |_| {}), max_steps)
}

#[test]
fn rings_gradients_hot_spots_empty_regions_stripes_sparse_and_sharp_noise_converge() {
    // `sparse` has 100 loaded boxes: with 16 vCores that is ~6 per vCore, each ~16% of a share,
    // where no convex partition need reach 5% of the bound; it runs with 10 vCores only.
    let runs = ["rings", "gradient", "hot-spots-80x40", "near-empty", "stripes", "sharp-perlin-90x45"]
        .iter()
        .flat_map(|n| [(*n, 10), (*n, 16)])
        .chain([("sparse", 10)]);
    {
        for (name, vcores) in runs {
            let (out, _) = balance_csv(name, vcores);
            assert!(out.converged && out.max_avg <= 1.05 * out.lower_bound, "{name} with {vcores} vCores: {out:?}");
        }
    }
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
