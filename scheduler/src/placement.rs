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
    let mut cols = ((k as f64 * width / short).sqrt().round() as usize).clamp(1, k);
    while k.div_ceil(cols) * cols < k {
        cols += 1;
    }
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
