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
