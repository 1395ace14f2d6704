//! The fast assignment equals the brute-force oracle at the sizes the paper struggled with.

use pbs::assign::{assign, assign_brute, Assignment};
use pbs::Grid;
use pbs_bench::assign_cost::random_sites;

#[test]
fn fast_equals_brute_at_72_and_1000_vcores_on_150x150() {
    let grid = Grid::new(150, 150).unwrap();
    for n in [72, 1000] {
        let (sites, weights) = random_sites(&grid, n, n as u64);
        let (mut fast, mut brute) = (Assignment::default(), Assignment::default());
        assign(&grid, &sites, &weights, &mut fast);
        assign_brute(&grid, &sites, &weights, &mut brute);
        assert!(fast == brute, "{n} vCores: assignments differ");
    }
}

/// A balancing whose assignments run on the pool's threads ends exactly where one on the
/// calling thread alone does, step for step: sharing changes how fast, never what.
#[test]
fn a_balancing_shared_with_the_pool_ends_where_one_alone_does() {
    use pbs::loadmap::PerlinMap;
    use pbs::{balance, methods, Problem, StopRule, VCores};
    use pbs_scheduler::pool::Pool;
    use std::sync::Arc;

    for (side, vcores, threads) in [(32, 16, 2), (64, 4, 3), (50, 72, 4), (100, 13, 2)] {
        let pool = Pool::new(threads, Arc::new(|_| {})).unwrap();
        let grid = Grid::new(side, side).unwrap();
        let mut map = PerlinMap::with_seed(vcores as u32);
        let loads = map.loads(&grid);
        let problem = Problem::new(grid, &loads, vcores).unwrap();
        let (mut alone, mut shared) = (VCores::random(&problem, 3), VCores::random(&problem, 3));
        let (mut m1, mut m2) = (methods::by_name("power-cells").unwrap(), methods::by_name("power-cells").unwrap());
        // A first balancing from random vCores, then warm-started transitions.
        for transition in 0..4 {
            map.offset[0] += 1.5;
            let loads = map.loads(&grid);
            let problem = Problem::new(grid, &loads, vcores).unwrap();
            let opts = StopRule { max_steps: 30, tol: 0.02 };
            let (mut trace1, mut trace2) = (Vec::new(), Vec::new());
            let a = balance(m1.as_mut(), &problem, &mut alone, opts, |r| trace1.push(r.max_avg));
            let b = balance(m2.as_mut(), &problem.clone().with_workers(&pool), &mut shared, opts, |r| {
                trace2.push(r.max_avg)
            });
            let case = format!("{side}x{side}, {vcores} vCores, {threads} threads, transition {transition}");
            assert_eq!(trace1, trace2, "{case}: the runs took different steps");
            assert_eq!(a.steps, b.steps, "{case}");
            assert_eq!(alone.owners(), shared.owners(), "{case}");
            assert_eq!(alone.weights(), shared.weights(), "{case}");
        }
    }
}
