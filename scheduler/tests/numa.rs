//! NUMA-aware placement on a synthetic two-socket machine.

use pbs::loadmap::PerlinMap;
use pbs::{balance, methods, Grid, Problem, StopRule, VCores};
use pbs_scheduler::placement::{nodes_are_contiguous, numa_positions};
use pbs_scheduler::topology::Topology;

/// `pack:2 numa:1 core:4 pu:1`: the four threads of each node own one contiguous region, at
/// the start and after balancing measured-like loads.
#[test]
fn threads_of_a_numa_node_own_one_contiguous_region() {
    let topo = Topology::synthetic("pack:2 numa:1 core:4 pu:1").unwrap();
    let numa = topo.numa_of_workers(8);
    assert_eq!(numa, vec![0, 0, 0, 0, 1, 1, 1, 1]);
    for (nx, ny) in [(64, 64), (100, 40), (30, 90)] {
        let grid = Grid::new(nx, ny).unwrap();
        let mut vcores = started_on_nodes(grid, &numa, StopRule::default());
        let mut m = methods::by_name("power-cells").unwrap();
        for seed in 1..4 {
            let loads = PerlinMap::with_seed(seed).loads(&grid);
            let p = Problem::new(grid, &loads, 8).unwrap();
            let out = balance(m.as_mut(), &p, &mut vcores, StopRule::default(), |_| {});
            assert!(out.converged, "{nx}x{ny} seed {seed}: {out:?}");
            assert!(nodes_are_contiguous(&grid, vcores.owners(), &numa), "{nx}x{ny} Perlin seed {seed}");
        }
    }
}

/// The model's machines, 4 nodes of 4 workers and 8 of 8: every node's boxes in one region
/// at the start, on square and oblong grids.
#[test]
fn every_node_starts_with_one_region_on_four_and_eight_nodes() {
    for (topology, workers) in [("pack:4 numa:1 core:4 pu:1", 16), ("pack:8 numa:1 core:8 pu:1", 64)] {
        let numa = Topology::synthetic(topology).unwrap().numa_of_workers(workers);
        assert_eq!(numa.len(), workers);
        for (nx, ny) in [(64, 64), (128, 64), (40, 120)] {
            started_on_nodes(Grid::new(nx, ny).unwrap(), &numa, StopRule { max_steps: 200, tol: 0.02 });
        }
    }
}

/// The vCores of workers on nodes `numa` at their NUMA-aware positions over `grid`, balanced
/// on uniform loads by `stop`: checked converged, each node's boxes in one region.
fn started_on_nodes(grid: Grid, numa: &[usize], stop: StopRule) -> VCores {
    let uniform = vec![1.0; grid.len()];
    let problem = Problem::new(grid, &uniform, numa.len()).unwrap();
    let mut vcores = VCores::new(&problem, numa_positions(&grid, numa), vec![0.0; numa.len()]).unwrap();
    let mut m = methods::by_name("power-cells").unwrap();
    let out = balance(m.as_mut(), &problem, &mut vcores, stop, |_| {});
    let (nx, ny, nodes) = (grid.nx(), grid.ny(), numa.iter().max().map_or(0, |m| m + 1));
    assert!(out.converged, "{nx}x{ny} on {nodes} nodes: {out:?}");
    assert!(nodes_are_contiguous(&grid, vcores.owners(), numa), "{nx}x{ny} on {nodes} nodes, uniform");
    vcores
}
