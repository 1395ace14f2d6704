//! NUMA-aware starting positions for the vCores: the domain is cut into one slab per NUMA
//! node (along its longer side, widths proportional to the node's workers) and each node's
//! vCores are laid out on a near-square sub-grid of its slab. Spatial neighbours then share a
//! node, and the boxes a node's threads own — and first-touch — form one region.

use pbs::{Grid, Point};

/// One starting position per worker; `numa[t]` is worker `t`'s node (workers of a node need
/// not be consecutive).
pub fn numa_positions(grid: &Grid, numa: &[usize]) -> Vec<Point> {
    let nodes = numa.iter().copied().max().map_or(0, |m| m + 1);
    let horizontal = grid.nx >= grid.ny;
    let (long, short) = if horizontal { (grid.nx as f64, grid.ny as f64) } else { (grid.ny as f64, grid.nx as f64) };
    let mut positions = vec![[0.0, 0.0, 0.5]; numa.len()];
    let total = numa.len() as f64;
    let mut start = 0.0;
    for node in 0..nodes {
        let members: Vec<usize> = (0..numa.len()).filter(|&t| numa[t] == node).collect();
        if members.is_empty() {
            continue;
        }
        let width = long * members.len() as f64 / total;
        // Near-square sub-grid of `members.len()` cells in a width × short slab.
        let k = members.len();
        let mut cols = ((k as f64 * width / short).sqrt().round() as usize).clamp(1, k);
        while k.div_ceil(cols) * cols < k {
            cols += 1;
        }
        let rows = k.div_ceil(cols);
        for (m, &t) in members.iter().enumerate() {
            let (c, r) = (m % cols, m / cols);
            // The last row may be short: spread its members over the full slab width.
            let in_row = if r == rows - 1 { k - r * cols } else { cols };
            let along = start + width * (c as f64 + 0.5) / in_row as f64;
            let across = short * (r as f64 + 0.5) / rows as f64;
            positions[t] = if horizontal { [along, across, 0.5] } else { [across, along, 0.5] };
        }
        start += width;
    }
    positions.into_iter().map(|p| grid.clamp(p)).collect()
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
}
