//! Diffusion from the current owners (Hu and Blake, Parallel Computing 1999; the adaptive
//! repartitioners of ParMETIS and Jostle): a partition that drifted out of balance is mended
//! by moving boxes across the borders it already has, as few bytes as the flow needs, instead
//! of cutting the grid again.
//!
//! 1. **How much crosses each border.** Parts that touch (two face-neighbouring boxes of
//!    theirs) form a graph with Laplacian `L`; with `b` each part's load minus the mean, the
//!    solution of `L λ = b` gives the flow `λ_i − λ_j` from part `i` to part `j`, the
//!    balancing flow of least 2-norm over the borders (conjugate gradients; `b` sums to zero
//!    and the graph of a grid's parts is connected).
//! 2. **Which boxes carry it.** Each flow, largest first, moves boxes of `i` that touch `j`,
//!    one at a time, while what remains of the flow is at least half the box's load: first
//!    the boxes with the most sides on `j` (filling notches keeps the border, and so the
//!    halo, short), among them the most load per byte (in molecular dynamics a box's work grows
//!    with the square of its particles and its bytes with their number, so dense boxes carry
//!    the flow in fewer bytes).
//! 3. Up to [`ROUNDS`] times, while a part is above `limit × mean`.
//!
//! Nothing makes a part disconnected on purpose, but nothing forbids it either; no part is
//! ever emptied, and a part that comes in empty is first given a box on the border of the most
//! loaded part.
//!
//! ```
//! use pbs::diffusion::diffuse;
//! let grid = pbs::Grid::new(8, 8)?;
//! // Two slabs; the left one's boxes became three times heavier.
//! let loads: Vec<f64> = (0..64).map(|k| if k % 8 < 4 { 3.0 } else { 1.0 }).collect();
//! let owners: Vec<u32> = (0..64).map(|k| u32::from(k % 8 >= 4)).collect();
//! let bytes = vec![100.0; 64];
//! let next = diffuse(&grid, &owners, &loads, &bytes, 2, 1.05)?;
//! let charges = pbs::metrics::charges(&next, &loads, 2);
//! assert!(pbs::metrics::max_avg(&charges) <= 1.05);
//! // Only the flow moved: 11 boxes of 3 carry the 32 above the mean.
//! assert_eq!(pbs::metrics::migrations(&owners, &next), 11);
//! # Ok::<(), pbs::Error>(())
//! ```

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Error, Result};
use crate::grid::Grid;
use crate::metrics;

/// Rounds of flows and moves at most: a round's moves are whole boxes, so a second one mends
/// what the first could not carry exactly.
pub const ROUNDS: usize = 16;

/// New owners near `owners` with no part's load above `limit × mean` where whole boxes across
/// the existing borders allow it (see the module documentation). `bytes[k]` is what moving
/// box `k` costs; `parts` the number of parts. An error names a bad length, load, owner or
/// limit.
pub fn diffuse(
    grid: &Grid,
    owners: &[u32],
    loads: &[f64],
    bytes: &[f64],
    parts: usize,
    limit: f64,
) -> Result<Vec<u32>> {
    crate::problem::validate_loads(grid, loads)?;
    // Rescaled as `Problem` rescales loads, so that the parts' sums stay finite.
    let loads = &crate::problem::rescaled_loads(loads)[..];
    let bad = |name: &'static str, value: String, reason: &'static str| Error::Parameter { name, value, reason };
    crate::problem::validate_owners(grid, owners, parts, crate::problem::Unit::Part)?;
    if bytes.len() != grid.len() {
        return Err(bad(
            "bytes",
            format!("{} sizes for {} boxes", bytes.len(), grid.len()),
            "one size per box is needed",
        ));
    }
    if let Some(k) = bytes.iter().position(|b| !(b.is_finite() && *b >= 0.0)) {
        return Err(bad("bytes", format!("{} at box {k}", bytes[k]), "sizes must be finite and ≥ 0"));
    }
    if !(limit >= 1.0 && limit.is_finite()) {
        return Err(bad("limit", limit.to_string(), "expected a max/mean of at least 1"));
    }
    let mut next = owners.to_vec();
    seed_empty_parts(grid, &mut next, loads, parts);
    for _ in 0..ROUNDS {
        let charges = metrics::charges(&next, loads, parts);
        let mean = charges.iter().sum::<f64>() / parts as f64;
        if mean == 0.0 || charges.iter().all(|&c| c <= limit * mean) {
            break;
        }
        let mut frontiers = frontiers(grid, &next);
        let borders: Vec<(u32, u32)> = frontiers.keys().copied().filter(|&(i, j)| i < j).collect();
        let b: Vec<f64> = charges.iter().map(|c| c - mean).collect();
        let lambda = solve(parts, &borders, &b);
        let mut flows: Vec<(f64, u32, u32)> = borders
            .iter()
            .map(|&(i, j)| {
                let f = lambda[i as usize] - lambda[j as usize];
                if f >= 0.0 {
                    (f, i, j)
                } else {
                    (-f, j, i)
                }
            })
            .collect();
        // Largest first; ties in the order of the borders, so the result is deterministic.
        flows.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut moved = false;
        let mut charges = charges;
        let mut sizes = vec![0usize; parts];
        next.iter().for_each(|&o| sizes[o as usize] += 1);
        for (amount, from, to) in flows {
            let frontier = frontiers.get_mut(&(from, to)).expect("every border has its two frontiers");
            let parts = Parts { owners: &mut next, charges: &mut charges, sizes: &mut sizes };
            moved |= carry(grid, parts, frontier, (loads, bytes), (from, to), (amount, limit * mean));
        }
        if !moved {
            break;
        }
    }
    Ok(next)
}

/// Gives every part that owns no box one box, the heaviest of the most loaded part's boxes
/// with a face on another part (of all its boxes if it touches none; ties to the lowest
/// index), so that it has a border for the flow to cross: an empty part would have none, the
/// flow could not reach it, and it would stay empty however loaded the others are. A donor
/// keeps a box at least.
fn seed_empty_parts(grid: &Grid, owners: &mut [u32], loads: &[f64], parts: usize) {
    let mut sizes = vec![0usize; parts];
    owners.iter().for_each(|&o| sizes[o as usize] += 1);
    let mut charges = metrics::charges(owners, loads, parts);
    for empty in 0..parts {
        if sizes[empty] > 0 {
            continue;
        }
        let Some(donor) =
            (0..parts).filter(|&p| sizes[p] > 1).max_by(|&a, &b| charges[a].total_cmp(&charges[b]).then(b.cmp(&a)))
        else {
            return;
        };
        let on_border = |k: usize| {
            let mut other = false;
            grid.for_each_neighbour(k, |n| other |= owners[n] as usize != donor);
            other
        };
        let heaviest = |border: bool| {
            (0..owners.len())
                .filter(|&k| owners[k] as usize == donor && (!border || on_border(k)))
                .max_by(|&a, &b| loads[a].total_cmp(&loads[b]).then(b.cmp(&a)))
        };
        let k = heaviest(true).or_else(|| heaviest(false)).expect("the donor owns boxes");
        owners[k] = empty as u32;
        sizes[donor] -= 1;
        sizes[empty] += 1;
        charges[donor] -= loads[k];
        charges[empty] += loads[k];
    }
}

/// For each ordered pair of touching parts `(i, j)`, the boxes of `i` with a face on `j`, in
/// one pass over the grid.
fn frontiers(grid: &Grid, owners: &[u32]) -> BTreeMap<(u32, u32), BTreeSet<usize>> {
    let mut out: BTreeMap<(u32, u32), BTreeSet<usize>> = BTreeMap::new();
    grid.for_each_neighbour_pair(|a, b| {
        let (i, j) = (owners[a], owners[b]);
        if i != j {
            out.entry((i, j)).or_default().insert(a);
            out.entry((j, i)).or_default().insert(b);
        }
    });
    out
}

/// The partition being mended: every box's part, each part's load and box count.
struct Parts<'a> {
    owners: &'a mut [u32],
    charges: &'a mut [f64],
    sizes: &'a mut [usize],
}

/// `λ` with `L λ = b` on the graph of `borders` (unit weights), by conjugate gradients from 0.
fn solve(parts: usize, borders: &[(u32, u32)], b: &[f64]) -> Vec<f64> {
    let apply = |x: &[f64]| {
        let mut y = vec![0.0; parts];
        for &(i, j) in borders {
            let d = x[i as usize] - x[j as usize];
            y[i as usize] += d;
            y[j as usize] -= d;
        }
        y
    };
    let dot = |x: &[f64], y: &[f64]| x.iter().zip(y).map(|(a, b)| a * b).sum::<f64>();
    let mut x = vec![0.0; parts];
    let mut r = b.to_vec();
    let mut p = r.clone();
    let mut rr = dot(&r, &r);
    let stop = 1e-24 * rr;
    for _ in 0..4 * parts + 20 {
        if rr <= stop {
            break;
        }
        let q = apply(&p);
        let pq = dot(&p, &q);
        if pq <= 0.0 {
            break;
        }
        let alpha = rr / pq;
        x.iter_mut().zip(&p).for_each(|(x, p)| *x += alpha * p);
        r.iter_mut().zip(&q).for_each(|(r, q)| *r -= alpha * q);
        let next = dot(&r, &r);
        p.iter_mut().zip(&r).for_each(|(p, r)| *p = r + next / rr * *p);
        rr = next;
    }
    x
}

/// Moves boxes of `from` touching `to` into `to` while at least half a box's load of `amount`
/// remains, or the box leaves `to` under `cap` (a box heavier than the flow can still mend a
/// part above the cap) (module documentation, step 2). `frontier` holds the boxes of `from`
/// that touched `to` when the round began; the moves of other flows may have taken some, so
/// each is checked again. Whether it moved any.
fn carry(
    grid: &Grid,
    p: Parts<'_>,
    frontier: &mut BTreeSet<usize>,
    (loads, bytes): (&[f64], &[f64]),
    (from, to): (u32, u32),
    (amount, cap): (f64, f64),
) -> bool {
    let Parts { owners, charges, sizes } = p;
    let touching = |owners: &[u32], k: usize| {
        let mut sides = 0;
        grid.for_each_neighbour(k, |n| sides += usize::from(owners[n] == to));
        sides
    };
    let (f, t) = (from as usize, to as usize);
    let mut remaining = amount;
    let mut moved = false;
    while sizes[f] > 1 {
        // (sides on `to`, load per byte, -k): the largest wins.
        let best = frontier
            .iter()
            .filter(|&&k| {
                let l = loads[k];
                owners[k] == from
                    && l > 0.0
                    && (l <= 2.0 * remaining || (remaining > 0.0 && charges[t] + l <= cap && charges[f] > cap))
            })
            .map(|&k| (touching(owners, k), k))
            .filter(|&(sides, _)| sides > 0)
            .map(|(sides, k)| (sides, loads[k] / bytes[k].max(1.0), k))
            .max_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)).then(b.2.cmp(&a.2)));
        let Some((_, _, k)) = best else { break };
        owners[k] = to;
        remaining -= loads[k];
        charges[f] -= loads[k];
        charges[t] += loads[k];
        sizes[f] -= 1;
        sizes[t] += 1;
        moved = true;
        frontier.remove(&k);
        grid.for_each_neighbour(k, |n| {
            if owners[n] == from {
                frontier.insert(n);
            }
        });
    }
    moved
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bisection::kway_rcb;
    use crate::rng::SplitMix64;

    /// A Gaussian hot spot at `(cx, cy)` on a light background.
    fn spot(grid: &Grid, cx: f64, cy: f64) -> Vec<f64> {
        (0..grid.len())
            .map(|k| {
                let c = grid.centre(k);
                1.0 + 20.0 * (-((c[0] - cx).powi(2) + (c[1] - cy).powi(2)) / 40.0).exp()
            })
            .collect()
    }

    #[test]
    fn a_drifting_spot_stays_balanced_with_fewer_moves_than_bisection_from_scratch() {
        let grid = Grid::new(48, 48).unwrap();
        let bytes = vec![1.0; grid.len()];
        for parts in [2, 4, 9, 16] {
            let first = spot(&grid, 10.0, 10.0);
            let mut owners = kway_rcb(&grid, &first, parts).unwrap();
            let mut rcb = owners.clone();
            let (mut moved, mut rcb_moved) = (0, 0);
            for step in 1..=30 {
                let loads = spot(&grid, 10.0 + step as f64, 10.0 + 0.8 * step as f64);
                let next = diffuse(&grid, &owners, &loads, &bytes, parts, 1.05).unwrap();
                let imbalance = metrics::max_avg(&metrics::charges(&next, &loads, parts));
                assert!(imbalance <= 1.05, "{parts} parts, step {step}: {imbalance}");
                moved += metrics::migrations(&owners, &next);
                owners = next;
                let again = kway_rcb(&grid, &loads, parts).unwrap();
                rcb_moved += metrics::migrations(&rcb, &again);
                rcb = again;
            }
            assert!(moved < rcb_moved, "{parts} parts: {moved} moves against RCB's {rcb_moved}");
            let counts = metrics::charges(&owners, &vec![1.0; grid.len()], parts);
            assert!(counts.iter().all(|&c| c > 0.0));
        }
    }

    #[test]
    fn dense_boxes_carry_the_flow_in_fewer_bytes() {
        // Two slabs; in the left one, every other column is twice as loaded per byte.
        let grid = Grid::new(12, 6).unwrap();
        let loads: Vec<f64> = (0..grid.len()).map(|k| if grid.coords(k)[0] < 6 { 2.0 } else { 1.0 }).collect();
        let owners: Vec<u32> = (0..grid.len()).map(|k| u32::from(grid.coords(k)[0] >= 6)).collect();
        let plain = vec![10.0; grid.len()];
        let cheap_rows: Vec<f64> =
            (0..grid.len()).map(|k| if grid.coords(k)[1] % 2 == 0 { 5.0 } else { 10.0 }).collect();
        let moved_bytes = |sizes: &[f64]| {
            let next = diffuse(&grid, &owners, &loads, sizes, 2, 1.05).unwrap();
            assert!(metrics::max_avg(&metrics::charges(&next, &loads, 2)) <= 1.05);
            (0..grid.len()).filter(|&k| next[k] != owners[k]).map(|k| sizes[k]).sum::<f64>()
        };
        let plain_bytes = moved_bytes(&plain);
        let cheap_bytes = moved_bytes(&cheap_rows);
        // The same load (9 boxes of 2, the left slab's 18 above the mean) moves either way;
        // the cheap boxes go first.
        assert_eq!(plain_bytes, 90.0);
        assert!(cheap_bytes < plain_bytes, "{cheap_bytes} against {plain_bytes}");
    }

    #[test]
    fn random_maps_end_balanced_or_unchanged_and_no_part_is_emptied() {
        let mut rng = SplitMix64::new(5);
        for case in 0..40 {
            let (nx, ny) = (3 + (rng.next_u64() % 20) as usize, 3 + (rng.next_u64() % 20) as usize);
            let grid = Grid::new(nx, ny).unwrap();
            let parts = 1 + (rng.next_u64() % 8) as usize;
            let start: Vec<f64> = (0..grid.len()).map(|_| rng.next_f64()).collect();
            let owners = kway_rcb(&grid, &start, parts).unwrap();
            let loads: Vec<f64> = (0..grid.len()).map(|_| 0.5 + rng.next_f64()).collect();
            let bytes: Vec<f64> = (0..grid.len()).map(|_| 1.0 + 100.0 * rng.next_f64()).collect();
            let next = diffuse(&grid, &owners, &loads, &bytes, parts, 1.1).unwrap();
            assert_eq!(next, diffuse(&grid, &owners, &loads, &bytes, parts, 1.1).unwrap(), "deterministic");
            let counts = metrics::charges(&next, &vec![1.0; grid.len()], parts);
            assert!(counts.iter().all(|&c| c > 0.0), "case {case}: a part emptied");
            let before = metrics::max_avg(&metrics::charges(&owners, &loads, parts));
            let after = metrics::max_avg(&metrics::charges(&next, &loads, parts));
            assert!(after <= before.max(1.1) + 1e-12, "case {case}: {before} → {after}");
        }
    }

    /// A part that owns no box is given one, the heaviest on the border of the most loaded
    /// part, and the flow then fills it like any other.
    #[test]
    fn an_empty_part_is_seeded_and_filled() {
        let grid = Grid::new(12, 12).unwrap();
        let loads = vec![1.0; grid.len()];
        let bytes = vec![1.0; grid.len()];
        // Parts 0 and 1 split the grid in two slabs; parts 2 and 3 own nothing.
        let owners: Vec<u32> = (0..grid.len()).map(|k| u32::from(grid.coords(k)[0] >= 6)).collect();
        let next = diffuse(&grid, &owners, &loads, &bytes, 4, 1.05).unwrap();
        let charges = metrics::charges(&next, &loads, 4);
        assert!(metrics::max_avg(&charges) <= 1.05, "{charges:?}");
        assert_eq!(metrics::disconnected_parts(&grid, &next, 4), 0, "{next:?}");
        // One part owning everything: the others are seeded one after the other.
        let next = diffuse(&grid, &vec![0; grid.len()], &loads, &bytes, 3, 1.05).unwrap();
        let charges = metrics::charges(&next, &loads, 3);
        assert!(metrics::max_avg(&charges) <= 1.05, "{charges:?}");
    }

    #[test]
    fn bad_input_is_named() {
        let grid = Grid::new(4, 4).unwrap();
        let (owners, loads, bytes) = (vec![0u32; 16], vec![1.0; 16], vec![1.0; 16]);
        assert!(diffuse(&grid, &owners[..3], &loads, &bytes, 1, 1.05).is_err());
        assert!(diffuse(&grid, &owners, &loads, &bytes[..15], 1, 1.05).unwrap_err().to_string().contains("15 sizes"));
        assert!(diffuse(&grid, &owners, &loads, &bytes, 0, 1.05).is_err());
        assert!(diffuse(&grid, &[2u32; 16], &loads, &bytes, 2, 1.05).unwrap_err().to_string().contains("part"));
        let mut nan = bytes.clone();
        nan[3] = f64::NAN;
        assert!(diffuse(&grid, &owners, &loads, &nan, 1, 1.05).unwrap_err().to_string().contains("bytes"));
        for bad in [-1.0, f64::INFINITY] {
            let mut sizes = bytes.clone();
            sizes[3] = bad;
            assert!(diffuse(&grid, &owners, &loads, &sizes, 1, 1.05).is_err(), "{bad}");
        }
        assert!(diffuse(&grid, &owners, &loads, &bytes, 1, 0.9).unwrap_err().to_string().contains("limit"));
        assert_eq!(diffuse(&grid, &owners, &loads, &bytes, 1, 1.05).unwrap(), owners);
    }

    /// An empty part gets the heaviest box on the border of the most loaded part that can
    /// spare one; a second empty part is seeded after the first's box has been counted.
    #[test]
    fn empty_parts_are_seeded_from_the_most_loaded_parts_border() {
        let grid = Grid::new(5, 1).unwrap();
        // Parts 0 (12) and 1 (7); part 2 gets box 2, the heaviest of part 0 touching another
        // part (box 0 is heavier, but inside); part 0 is then at 6 and part 1, at 7, gives
        // part 3 box 3, its box on a border.
        let mut owners = [0, 0, 0, 1, 1];
        seed_empty_parts(&grid, &mut owners, &[5.0, 1.0, 6.0, 3.0, 4.0], 4);
        assert_eq!(owners, [0, 0, 2, 3, 1]);
        // A part left with one box gives no other: part 3 stays empty.
        let grid = Grid::new(3, 1).unwrap();
        let mut owners = [0, 0, 1];
        seed_empty_parts(&grid, &mut owners, &[1.0, 9.0, 2.0], 4);
        assert_eq!(owners, [0, 2, 1]);
    }

    /// The balancing flow solves `L λ = b` to rounding on a path of 50 parts, whose Laplacian
    /// is badly conditioned (about 1,000): conjugate gradients need their conjugate
    /// directions there to finish within their iterations.
    #[test]
    fn the_flow_solves_the_laplacian_on_a_long_path() {
        let parts = 50;
        let borders: Vec<(u32, u32)> = (0..parts as u32 - 1).map(|i| (i, i + 1)).collect();
        let b: Vec<f64> = (0..parts).map(|i| if i < 10 { 4.0 } else { -1.0 }).collect();
        let lambda = solve(parts, &borders, &b);
        let mut residual = b.clone();
        for &(i, j) in &borders {
            let d = lambda[i as usize] - lambda[j as usize];
            residual[i as usize] -= d;
            residual[j as usize] += d;
        }
        let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
        assert!(norm(&residual) < 1e-9 * norm(&b), "residual {}", norm(&residual));
    }

    /// A part is never emptied, even where the flow out of it is worth its only box: part 0's
    /// one box of 10 next to two parts of 1 (mean 4, a flow of 6 towards part 1).
    #[test]
    fn a_part_keeps_its_last_box() {
        let grid = Grid::new(5, 1).unwrap();
        let next = diffuse(&grid, &[0, 1, 1, 2, 2], &[10.0, 0.5, 0.5, 0.5, 0.5], &[1.0; 5], 3, 1.05).unwrap();
        assert_eq!(next[0], 0);
        assert!((0..3).all(|p| next.contains(&p)), "{next:?}");
    }

    /// Among boxes with as many sides on the receiving part, the one with the most load per
    /// byte carries the flow (fewer bytes for the same load); a box that weighs nothing
    /// carries none.
    #[test]
    fn the_densest_box_carries_the_flow_and_weightless_ones_stay() {
        // 2 × 2: part 0 the lower row (two boxes of 3, box 0 in 1 byte, box 1 in 10), part 1
        // the upper (two of 1). A flow of 2: box 0 moves, then box 3 comes back for the 1 left.
        let grid = Grid::new(2, 2).unwrap();
        let next = diffuse(&grid, &[0, 0, 1, 1], &[3.0, 3.0, 1.0, 1.0], &[1.0, 10.0, 1.0, 1.0], 2, 1.05).unwrap();
        assert_eq!(next, [1, 0, 1, 0]);
        // 4 × 1: part 0's only box on the border weighs nothing, and nothing moves.
        let grid = Grid::new(4, 1).unwrap();
        let next = diffuse(&grid, &[0, 0, 0, 1], &[0.0, 4.0, 0.0, 1.0], &[1.0; 4], 2, 1.05).unwrap();
        assert_eq!(next, [0, 0, 0, 1]);
    }

    /// One flow carried by hand on 5 × 1 unit boxes, part 0 the first four: while at least half
    /// a box of the flow remains, and with the parts' loads and sizes kept up to date for the
    /// flows after it. A box heavier than twice the flow moves only where its part is above the
    /// cap and the receiver stays within it (`cap` exactly included), and not for a flow of 0.
    #[test]
    fn a_flow_moves_boxes_while_half_a_box_of_it_remains() {
        let grid = Grid::new(5, 1).unwrap();
        let run = |amount: f64, cap: f64, charges: [f64; 2]| {
            let (mut owners, mut charges, mut sizes) = ([0, 0, 0, 0, 1], charges, [4, 1]);
            let mut frontier = BTreeSet::from([3]);
            let parts = Parts { owners: &mut owners, charges: &mut charges, sizes: &mut sizes };
            let moved = carry(&grid, parts, &mut frontier, (&[1.0; 5], &[1.0; 5]), (0, 1), (amount, cap));
            (moved, owners, charges, sizes)
        };
        // 1.5: box 3 (0.5 left), then box 2 (half a box left: it goes), not box 1.
        assert_eq!(run(1.5, 100.0, [4.0, 1.0]), (true, [0, 0, 1, 1, 1], [2.0, 3.0], [2, 3]));
        // 0.2 with part 0 above a cap of 6 and part 1 at 5: one box, to exactly the cap.
        assert_eq!(run(0.2, 6.0, [10.0, 5.0]), (true, [0, 0, 0, 1, 1], [9.0, 6.0], [3, 2]));
        // Not for a flow of 0, nor with part 0 at the cap exactly.
        assert!(!run(0.0, 6.0, [10.0, 5.0]).0);
        assert!(!run(0.2, 10.0, [10.0, 5.0]).0);
    }
}
