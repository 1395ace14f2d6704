//! Quality measures of a mapping, exactly as docs/design.md defines them: charges, `max_avg` and its
//! lower bound, distance to optimal load (DOL), edge cut and migrations.

use crate::grid::Grid;

/// Sum in index order. Every total in the crate goes through here so that the same loads
/// always give the same bits, whatever the caller.
pub fn ordered_sum(values: &[f64]) -> f64 {
    values.iter().sum()
}

/// Median of a sample (the mean of the two middle values for an even count; 0 when empty).
/// Reports give medians, never means of noisy timings.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut s = values.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        0.5 * (s[n / 2 - 1] + s[n / 2])
    }
}

/// Charge of every vCore: `Q_i = Σ_{owner(k)=i} q_k`.
///
/// Neighbouring boxes mostly share an owner, so one running sum per vCore makes every add
/// wait for the previous one; four sums over boxes `k mod 4`, added at the end in a fixed
/// order, run about four times faster (the balancer recharges after every step it tries).
///
/// # Panics
/// If `owner` and `loads` differ in length, or an owner is `vcores` or more.
pub fn charges(owner: &[u32], loads: &[f64], vcores: usize) -> Vec<f64> {
    assert_eq!(owner.len(), loads.len(), "charges need one owner per box load");
    const LANES: usize = 4;
    let mut lanes = vec![[0.0; LANES]; vcores];
    let mut owners = owner.chunks_exact(LANES);
    let mut values = loads.chunks_exact(LANES);
    for (o, l) in (&mut owners).zip(&mut values) {
        for lane in 0..LANES {
            lanes[o[lane] as usize][lane] += l[lane];
        }
    }
    for (&o, &l) in owners.remainder().iter().zip(values.remainder()) {
        lanes[o as usize][0] += l;
    }
    lanes.iter().map(|s| (s[0] + s[1]) + (s[2] + s[3])).collect()
}

/// `max_i Q_i / m`; 1.0 when all charges are zero (nothing to balance is perfectly balanced).
pub fn max_avg(charges: &[f64]) -> f64 {
    let mean = ordered_sum(charges) / charges.len() as f64;
    if mean <= 0.0 {
        return 1.0;
    }
    charges.iter().copied().fold(0.0, f64::max) / mean
}

/// `Σ_phase max_part load / Σ_phase mean part load` of `owner` for per-phase box loads
/// `phase_loads[p][k]` (Buch's vector loads: with a barrier after every phase, an iteration
/// costs the sum of each phase's largest part); 1.0 when nothing weighs anything.
///
/// ```
/// // Balanced in total, imbalanced in each phase: (3 + 3) / (2 + 2).
/// let owner = [0, 1];
/// assert_eq!(pbs::metrics::vector_max_avg(&owner, &[vec![3.0, 1.0], vec![1.0, 3.0]], 2), 1.5);
/// ```
pub fn vector_max_avg(owner: &[u32], phase_loads: &[Vec<f64>], parts: usize) -> f64 {
    let (mut max, mut mean) = (0.0, 0.0);
    for loads in phase_loads {
        let q = charges(owner, loads, parts);
        max += q.iter().copied().fold(0.0, f64::max);
        mean += ordered_sum(&q) / parts as f64;
    }
    if mean > 0.0 {
        max / mean
    } else {
        1.0
    }
}

/// `max(1, max_load / mean)`: no mapping can do better than this.
pub fn lower_bound_from(max_load: f64, mean: f64) -> f64 {
    if mean <= 0.0 {
        1.0
    } else {
        (max_load / mean).max(1.0)
    }
}

/// Extremes of the distance to optimal load `(Q_i − m)/m`: `(dol_max, dol_min)`.
pub fn dol_extremes(charges: &[f64]) -> (f64, f64) {
    let mean = ordered_sum(charges) / charges.len() as f64;
    if mean <= 0.0 {
        return (0.0, 0.0);
    }
    let hi = charges.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let lo = charges.iter().copied().fold(f64::INFINITY, f64::min);
    ((hi - mean) / mean, (lo - mean) / mean)
}

/// Number of face-neighbour box pairs with different owners (the halo/communication proxy).
pub fn edge_cut(grid: &Grid, owner: &[u32]) -> usize {
    let mut cut = 0;
    grid.for_each_neighbour_pair(|a, b| cut += usize::from(owner[a] != owner[b]));
    cut
}

/// Parts (ids below `parts`) whose boxes form more than one face-connected piece: a flood fill
/// from each part's first box must reach all of its boxes. Empty parts do not count.
pub fn disconnected_parts(grid: &Grid, owners: &[u32], parts: usize) -> usize {
    let mut sizes = vec![0usize; parts];
    owners.iter().for_each(|&p| sizes[p as usize] += 1);
    let mut seen = vec![false; owners.len()];
    let mut started = vec![false; parts];
    let mut stack = Vec::new();
    let mut disconnected = 0;
    for k in 0..owners.len() {
        let p = owners[k] as usize;
        if started[p] {
            continue;
        }
        started[p] = true;
        let mut reached = 0;
        seen[k] = true;
        stack.push(k);
        while let Some(b) = stack.pop() {
            reached += 1;
            grid.for_each_neighbour(b, |n| {
                if !seen[n] && owners[n] as usize == p {
                    seen[n] = true;
                    stack.push(n);
                }
            });
        }
        disconnected += usize::from(reached < sizes[p]);
    }
    disconnected
}

/// Number of boxes whose owner differs between two mappings of the same grid.
pub fn migrations(before: &[u32], after: &[u32]) -> usize {
    before.iter().zip(after).filter(|(a, b)| a != b).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_and_imbalance() {
        let q = charges(&[0, 1, 1, 0], &[1.0, 2.0, 3.0, 2.0], 2);
        assert_eq!(q, vec![3.0, 5.0]);
        assert_eq!(max_avg(&q), 1.25);
        assert_eq!(dol_extremes(&q), (0.25, -0.25));
        assert_eq!(max_avg(&[0.0, 0.0]), 1.0);
        // Seven boxes: one chunk of four lanes and a remainder of three.
        let owner = [2, 2, 0, 1, 1, 2, 0];
        let loads = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];
        assert_eq!(charges(&owner, &loads, 3), vec![68.0, 24.0, 35.0]);
    }

    #[test]
    #[should_panic(expected = "one owner per box load")]
    fn charges_refuse_a_load_without_an_owner() {
        charges(&[0, 1], &[1.0, 2.0, 3.0], 2);
    }

    #[test]
    fn edge_cut_counts_boundary_pairs() {
        let g = Grid::new(2, 2).unwrap();
        // left column owner 0, right column owner 1: two horizontal pairs are cut.
        assert_eq!(edge_cut(&g, &[0, 1, 0, 1]), 2);
        assert_eq!(edge_cut(&g, &[0, 0, 0, 0]), 0);
        assert_eq!(edge_cut(&g, &[0, 1, 1, 0]), 4);
    }

    #[test]
    fn median_of_odd_even_and_empty_samples() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn parts_in_pieces_are_counted_once_each() {
        let g = Grid::new(3, 2).unwrap();
        // part 0: two boxes apart; part 1: a connected L; part 2: empty
        assert_eq!(disconnected_parts(&g, &[0, 1, 0, 1, 1, 1], 3), 1);
        assert_eq!(disconnected_parts(&g, &[0, 0, 0, 1, 1, 1], 2), 0);
        // a checkerboard: each part in three pieces counts once
        assert_eq!(disconnected_parts(&g, &[0, 1, 0, 1, 0, 1], 2), 2);
    }

    #[test]
    fn migrations_count_changed_owners() {
        assert_eq!(migrations(&[0, 1, 2], &[0, 2, 2]), 1);
    }
}
