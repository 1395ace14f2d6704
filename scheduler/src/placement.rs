//! NUMA-aware starting positions for the vCores: the domain is cut into one slab per NUMA
//! node (along its longer side, widths proportional to the node's workers) and each node's
//! vCores are laid out on a near-square sub-grid of its slab; on a 3D grid, on near-square
//! sub-grids in near-cubic layers of it, each moved by up to half a box. Spatial neighbours then share a node, and the boxes a
//! node's threads own — and first-touch — form one region.

use pbs::rng::SplitMix64;
use pbs::{Grid, Point};

/// One starting position per worker; `numa[t]` is worker `t`'s node (workers of a node need
/// not be consecutive).
pub fn numa_positions(grid: &Grid, numa: &[usize]) -> Vec<Point> {
    let nodes = numa.iter().copied().max().map_or(0, |m| m + 1);
    let horizontal = grid.nx() >= grid.ny();
    let (long, short) =
        if horizontal { (grid.nx() as f64, grid.ny() as f64) } else { (grid.ny() as f64, grid.nx() as f64) };
    let depth = grid.nz() as f64;
    let mut positions = vec![[0.0, 0.0, 0.5]; numa.len()];
    let total = numa.len() as f64;
    let mut start = 0.0;
    for node in 0..nodes {
        let members: Vec<usize> = (0..numa.len()).filter(|&t| numa[t] == node).collect();
        if members.is_empty() {
            continue;
        }
        let width = long * members.len() as f64 / total;
        let k = members.len();
        // Layers along z such that a vCore's share of the slab is about as deep as it is wide
        // (one on a 2D grid), the members spread over them as evenly as they go.
        let layers = if grid.nz() == 1 {
            1
        } else {
            let side = (width * short * depth / k as f64).cbrt();
            ((depth / side).round() as usize).clamp(1, k.min(grid.nz()))
        };
        let mut placed = 0;
        for layer in 0..layers {
            let in_layer = k / layers + usize::from(layer < k % layers);
            let z = depth * (layer as f64 + 0.5) / layers as f64;
            for (m, (along, across)) in sub_grid(in_layer, width, short).into_iter().enumerate() {
                let along = start + along;
                let t = members[placed + m];
                positions[t] = if horizontal { [along, across, z] } else { [across, along, z] };
                if grid.nz() > 1 {
                    // Off the lattice by up to half a box along each axis, the same for every
                    // run: cells of an exact lattice meet along whole planes of boxes, which a
                    // change of weight hands over only whole (docs/results.md, 2026-11-28).
                    let mut rng = SplitMix64::new(t as u64);
                    for c in &mut positions[t] {
                        *c += rng.next_f64() - 0.5;
                    }
                }
            }
            placed += in_layer;
        }
        start += width;
    }
    positions.into_iter().map(|p| grid.clamp(p)).collect()
}

/// `k` points on a near-square sub-grid of a `width × short` rectangle, as (along, across)
/// from its corner; a last row that is short spreads its points over the full width.
fn sub_grid(k: usize, width: f64, short: f64) -> Vec<(f64, f64)> {
    let cols = ((k as f64 * width / short).sqrt().round() as usize).clamp(1, k);
    let rows = k.div_ceil(cols);
    (0..k)
        .map(|m| {
            let (c, r) = (m % cols, m / cols);
            let in_row = if r == rows - 1 { k - r * cols } else { cols };
            (width * (c as f64 + 0.5) / in_row as f64, short * (r as f64 + 0.5) / rows as f64)
        })
        .collect()
}

/// Whether the boxes owned by the workers of each node form one 4-connected region.
pub fn nodes_are_contiguous(grid: &Grid, owners: &[u32], numa: &[usize]) -> bool {
    let nodes = numa.iter().copied().max().map_or(0, |m| m + 1);
    (0..nodes).all(|node| {
        let mine: Vec<bool> = owners.iter().map(|&o| numa[o as usize] == node).collect();
        let Some(first) = mine.iter().position(|&m| m) else { return true };
        let mut seen = vec![false; owners.len()];
        let mut stack = vec![first];
        seen[first] = true;
        let mut count = 0;
        while let Some(k) = stack.pop() {
            count += 1;
            grid.for_each_neighbour(k, |n| {
                if mine[n] && !seen[n] {
                    seen[n] = true;
                    stack.push(n);
                }
            });
        }
        count == mine.iter().filter(|&&m| m).count()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_stay_in_their_node_slab() {
        let g = Grid::new(60, 30).unwrap();
        let numa = [0, 0, 0, 0, 1, 1, 1, 1];
        let p = numa_positions(&g, &numa);
        assert!(p[..4].iter().all(|x| x[0] < 30.0) && p[4..].iter().all(|x| x[0] > 30.0), "{p:?}");
        let mut sorted: Vec<(i64, i64)> = p.iter().map(|x| ((x[0] * 10.0) as i64, (x[1] * 10.0) as i64)).collect();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 8, "distinct positions");
    }

    /// A node's boxes in one 4-connected piece or not, on 4 × 2 boxes: two workers per node.
    #[test]
    fn a_node_in_two_pieces_is_not_contiguous() {
        let g = Grid::new(4, 2).unwrap();
        let numa = [0, 0, 1, 1];
        // Rows of four: node 0 holds columns 0-1 in both rows (workers 0 and 1), node 1 the rest.
        assert!(nodes_are_contiguous(&g, &[0, 1, 2, 3, 0, 1, 2, 3], &numa));
        // Node 0's boxes at the two ends of the first row: two pieces.
        assert!(!nodes_are_contiguous(&g, &[0, 2, 3, 1, 2, 2, 3, 3], &numa));
        // Node 1's at the two ends of the second.
        assert!(!nodes_are_contiguous(&g, &[0, 0, 1, 1, 2, 1, 0, 3], &numa));
        // Touching only at a corner is two pieces.
        assert!(!nodes_are_contiguous(&g, &[0, 2, 2, 2, 2, 1, 2, 2], &numa));
        // A node with no box, and one box alone, are each one region.
        assert!(nodes_are_contiguous(&g, &[2; 8], &numa));
        assert!(nodes_are_contiguous(&g, &[0, 2, 2, 2, 2, 2, 2, 2], &numa));
        // Three nodes, the last holding one column.
        assert!(nodes_are_contiguous(&g, &[0, 0, 1, 2, 0, 0, 1, 2], &[0, 1, 2]));
        assert!(!nodes_are_contiguous(&g, &[0, 0, 1, 2, 0, 2, 1, 1], &[0, 1, 2]));
    }

    /// On a 2D grid the positions are the centres of each slab's sub-grid, exactly: a short
    /// last row spread over the slab's width, a taller than wide grid cut along its height,
    /// the workers of a node found wherever they are in the list.
    #[test]
    fn on_a_2d_grid_the_positions_are_the_sub_grids_centres() {
        let xy = |p: Vec<Point>| p.into_iter().map(|q| (q[0], q[1], q[2])).collect::<Vec<_>>();
        let g = Grid::new(60, 30).unwrap();
        assert_eq!(
            xy(numa_positions(&g, &[0, 0, 0, 0, 1, 1, 1, 1])),
            [7.5, 22.5, 7.5, 22.5, 37.5, 52.5, 37.5, 52.5]
                .into_iter()
                .zip([7.5, 7.5, 22.5, 22.5, 7.5, 7.5, 22.5, 22.5])
                .map(|(x, y)| (x, y, 0.5))
                .collect::<Vec<_>>()
        );
        // Three on one node of 30 × 30: two in the first row, the third alone in the middle.
        assert_eq!(
            xy(numa_positions(&Grid::new(30, 30).unwrap(), &[0, 0, 0])),
            [(7.5, 7.5, 0.5), (22.5, 7.5, 0.5), (15.0, 22.5, 0.5)]
        );
        // 30 × 60, nodes interleaved in the list: node 0 (workers 0 and 2) takes the lower half.
        assert_eq!(
            xy(numa_positions(&Grid::new(30, 60).unwrap(), &[0, 1, 0, 1])),
            [(7.5, 15.0, 0.5), (7.5, 45.0, 0.5), (22.5, 15.0, 0.5), (22.5, 45.0, 0.5)]
        );
    }

    /// Five vCores on 16³ boxes take two layers, three and two, each off its lattice point by
    /// less than half a box on every axis (and by something on each), alike from run to run.
    #[test]
    fn uneven_layers_hold_every_vcore_off_the_lattice() {
        let g = Grid::new_3d(16, 16, 16).unwrap();
        let p = numa_positions(&g, &[0; 5]);
        assert_eq!(p, numa_positions(&g, &[0; 5]), "the same for every run");
        let near = |z: f64| p.iter().filter(|q| (q[2] - z).abs() < 0.5).count();
        assert_eq!((near(4.0), near(12.0)), (3, 2), "{p:?}");
        let lattice = |c: f64, side: f64, n: f64| {
            (0..n as usize).map(|i| side * (i as f64 + 0.5) / n).any(|l| (c - l).abs() < 0.5 && c != l)
        };
        // Layer 0: two in its first row, one in its second; layer 1: one in each of two rows.
        for (t, q) in p.iter().enumerate() {
            let in_row = if t < 2 { 2.0 } else { 1.0 };
            assert!(
                lattice(q[0], 16.0, in_row) && lattice(q[1], 16.0, 2.0) && lattice(q[2], 16.0, 2.0),
                "vCore {t} at {q:?}"
            );
        }
    }

    /// On a 3D grid the vCores start in layers, so that their cells are blocks, not columns:
    /// eight on 16³ boxes own eight blocks of about 8³ (the lattice is moved by up to half a
    /// box), four per node on two nodes included.
    #[test]
    fn on_a_3d_grid_the_cells_start_as_cubes() {
        let g = Grid::new_3d(16, 16, 16).unwrap();
        for numa in [vec![0; 8], vec![0, 0, 0, 0, 1, 1, 1, 1]] {
            let p = numa_positions(&g, &numa);
            let loads = vec![1.0; g.len()];
            let problem = pbs::Problem::new(g, &loads, 8).unwrap();
            let vcores = pbs::VCores::new(&problem, p.clone(), vec![0.0; 8]).unwrap();
            for v in 0..8u32 {
                let mine: Vec<[usize; 3]> =
                    (0..g.len()).filter(|&k| vcores.owners()[k] == v).map(|k| g.coords(k)).collect();
                let extent =
                    |a: usize| mine.iter().map(|c| c[a]).max().unwrap() - mine.iter().map(|c| c[a]).min().unwrap();
                let sides = [extent(0), extent(1), extent(2)];
                assert!(
                    (400..=630).contains(&mine.len()) && sides.iter().all(|&e| (6..=9).contains(&e)),
                    "{numa:?}, vCore {v} at {:?}: {} boxes, extents {sides:?}",
                    p[v as usize],
                    mine.len()
                );
            }
            if numa[7] == 1 {
                assert!(p[..4].iter().all(|x| x[0] < 8.0) && p[4..].iter().all(|x| x[0] > 8.0), "{p:?}");
            }
        }
        // One layer of boxes: no layers of vCores.
        let flat = numa_positions(&Grid::new(16, 16).unwrap(), &[0; 8]);
        assert!(flat.iter().all(|x| x[2] == 0.5));
    }
}
