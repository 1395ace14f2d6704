//! The paper's four static cases and Perlin maps: the default method reaches the criterion,
//! and our implementation of the paper's eq. 7 reproduces the paper's failure on the line.

use pbs::loadmap::{static_case, Case, PerlinMap};
use pbs::{balance, methods, Grid, Problem, StopRule, VCores};

fn run(method: &str, grid: Grid, loads: &[f64], vcores: usize, max_steps: usize) -> pbs::Outcome {
    let problem = Problem::new(grid, loads, vcores).unwrap();
    let mut vcores = VCores::random(&problem, 1);
    let mut m = methods::by_name(method).unwrap();
    balance(m.as_mut(), &problem, &mut vcores, StopRule { max_steps, tol: 0.05 }, |_| {})
}

#[test]
fn default_method_balances_the_four_static_cases() {
    let grid = Grid::new(50, 50).unwrap();
    for case in Case::ALL {
        let out = run(methods::DEFAULT, grid, &static_case(case, &grid, 1), 10, 500);
        assert!(out.converged, "{case:?}: {out:?}");
        assert!(out.max_avg <= 1.05 * out.lower_bound, "{case:?}: {out:?}");
        assert!(out.steps <= 50, "{case:?} took {} steps", out.steps);
    }
}

#[test]
fn default_method_balances_perlin_maps() {
    for (seed, (nx, ny), vcores) in
        [(1, (50, 50), 10), (7, (100, 60), 13), (42, (150, 150), 72), (3, (64, 64), 100), (3, (80, 80), 160)]
    {
        let grid = Grid::new(nx, ny).unwrap();
        let loads = PerlinMap::with_seed(seed).loads(&grid);
        let out = run(methods::DEFAULT, grid, &loads, vcores, 500);
        assert!(out.converged && out.max_avg <= 1.05 * out.lower_bound, "seed {seed}: {out:?}");
    }
}

/// The paper: "With the loaded-line, we never reach a good tasks scheduling: we are nearly 25%
/// to the optimal." Our eq. 7 shows the same stall, which is what `pbs` is measured against.
#[test]
fn paper_eq7_stalls_on_the_line_as_the_paper_reports() {
    let grid = Grid::new(50, 50).unwrap();
    let out = run("paper-eq7", grid, &static_case(Case::Line, &grid, 1), 10, 2000);
    assert!(!out.converged && out.max_avg > 1.25, "{out:?}");
    let uniform = run("paper-eq7", grid, &static_case(Case::Uniform, &grid, 1), 10, 2000);
    assert!(uniform.converged, "eq. 7 does balance the uniform case: {uniform:?}");
}
