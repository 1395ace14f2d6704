//! What a partition is judged on, as docs/design.md defines it: balance (`max_avg` against its
//! lower bound `max(1, q_max/m)`), edge cut, parts that are not face-connected (4 neighbours
//! in 2D, 6 in 3D), empty parts; and,
//! between two partitions of the same grid, migrations after matching part ids by overlap
//! ([`pbs::metrics::match_labels`]).

use pbs::{metrics, Grid};

/// The measures of one partition.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Quality {
    /// Largest part charge over the mean.
    pub max_avg: f64,
    /// `max(1, q_max / m)`: no partition can do better.
    pub lower_bound: f64,
    /// Face-neighbour box pairs in different parts.
    pub edge_cut: usize,
    /// Those of them where both boxes carry load ([`metrics::loaded_edge_cut`]): the faces md
    /// exchanges across, where the edge cut also counts faces beside empty boxes.
    pub loaded_edge_cut: usize,
    /// Non-empty parts whose boxes form more than one face-connected piece.
    pub disconnected_parts: usize,
    /// Parts that own no box.
    pub empty_parts: usize,
}

/// The measures of `owners` (one part id below `parts` per box of `grid`).
///
/// # Panics
/// As [`metrics::charges`]: if `owners` and `loads` differ in length, or a part id is `parts`
/// or more.
pub fn measure(grid: &Grid, loads: &[f64], owners: &[u32], parts: usize) -> Quality {
    // Loads at extreme scales measured as `pbs::Problem` rescales them (by a power of two,
    // which leaves every ratio as it was), so that sums of loads near `f64::MAX` stay finite.
    // (The part count only has to be one `Problem` accepts: its loads are what is used.)
    let problem = pbs::Problem::new(*grid, loads, parts.min(grid.len()).max(1));
    // (Which boxes carry load is read from the loads as given: rescaling could round a tiny one to 0.)
    let loaded_edge_cut = metrics::loaded_edge_cut(grid, loads, owners);
    let loads = problem.as_ref().map_or(loads, |p| p.loads());
    let charges = metrics::charges(owners, loads, parts);
    let total: f64 = loads.iter().sum();
    let mean = total / parts as f64;
    let max_load = loads.iter().copied().fold(0.0, f64::max);
    let mut sizes = vec![0usize; parts];
    owners.iter().for_each(|&p| sizes[p as usize] += 1);
    Quality {
        max_avg: metrics::max_avg(&charges),
        lower_bound: metrics::lower_bound_from(max_load, mean),
        edge_cut: metrics::edge_cut(grid, owners),
        loaded_edge_cut,
        disconnected_parts: metrics::disconnected_parts(grid, owners, parts),
        empty_parts: sizes.iter().filter(|&&s| s == 0).count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_of_a_small_partition() {
        let g = Grid::new(3, 2).unwrap();
        // part 0: two boxes apart; part 1: a connected L; part 2: empty
        let owners = [0, 1, 0, 1, 1, 1];
        let q = measure(&g, &[1.0; 6], &owners, 3);
        assert_eq!(q.disconnected_parts, 1);
        assert_eq!(q.empty_parts, 1);
        assert_eq!(q.edge_cut, metrics::edge_cut(&g, &owners));
        assert_eq!(q.loaded_edge_cut, q.edge_cut); // every box carries load
        assert!((q.max_avg - 2.0).abs() < 1e-12); // 4 of 6 boxes where the mean is 2
        assert_eq!(q.lower_bound, 1.0);
        // One box of 12 where the mean part carries 6: no partition ends below 2 × the mean.
        let q = measure(&g, &[12.0, 1.0, 1.0, 1.0, 1.0, 2.0], &owners, 3);
        assert_eq!(q.lower_bound, 2.0);
        assert!((q.max_avg - 13.0 / 6.0).abs() < 1e-12, "{q:?}"); // part 0: boxes 0 and 2

        // Box 1 (part 1) empty: of the four cut faces, (0,1) and (1,2) no longer count.
        let q = measure(&g, &[1.0, 0.0, 1.0, 1.0, 1.0, 1.0], &owners, 3);
        assert_eq!((q.edge_cut, q.loaded_edge_cut), (4, 2));
    }
}
