//! Boxes that carry no load handed back to the part that held them before: a rebalancing
//! moves the borders of power cells across stretches of boxes with no load, where no charge
//! pins them, and each such box moved is a migration that balances nothing.

use super::check_owners;
use crate::Problem;

/// Hands boxes that carry no load and changed owner since `previous` back to their previous
/// owner, one group at a time: a face-connected group of such boxes that left the same part for
/// the same part goes back where it touches that part, where the cut does not grow (its faces
/// on the part it goes back to at least as many as those on the part it leaves) and where the
/// part it leaves keeps a box and stays in one piece. The charges do not change. Returns the
/// boxes handed back.
///
/// ```
/// use pbs::{refine, Grid, Problem};
/// let grid = Grid::new(6, 1)?;
/// // Load only at the ends: the border between the two parts may lie anywhere between them.
/// let problem = Problem::new(grid, &[1.0, 0.0, 0.0, 0.0, 0.0, 1.0], 2)?;
/// let previous = [0, 0, 0, 0, 1, 1];
/// let mut owners = [0, 1, 1, 1, 1, 1]; // the border moved two boxes across empty ones
/// assert_eq!(refine::hold_unloaded(&problem, &mut owners, &previous)?, 3);
/// assert_eq!(owners, previous);
/// # Ok::<(), pbs::Error>(())
/// ```
///
/// # Errors
/// [`crate::Error::Parameter`] if `owners` or `previous` does not hold one part id below the
/// vCore count per box.
pub fn hold_unloaded(problem: &Problem, owners: &mut [u32], previous: &[u32]) -> crate::Result<usize> {
    check_owners(problem, owners)?;
    check_owners(problem, previous)?;
    Ok(hold(problem, owners, previous))
}

/// [`hold_unloaded`] on owners known to be valid.
pub(super) fn hold(problem: &Problem, owners: &mut [u32], previous: &[u32]) -> usize {
    let (grid, loads) = (problem.grid(), problem.loads());
    let moved = |k: usize, owners: &[u32]| loads[k] == 0.0 && owners[k] != previous[k];
    // Where every box carries load (a Perlin map) or none moved, one pass and nothing more.
    let Some(first_moved) = (0..grid.len()).find(|&k| moved(k, owners)) else { return 0 };
    let mut count = vec![0usize; problem.vcores()];
    owners.iter().for_each(|&p| count[p as usize] += 1);
    // Per box, the last group (`group_of`) and search (`reached`) that visited it, by number.
    let (mut group_of, mut reached) = (vec![0u32; grid.len()], vec![0u32; grid.len()]);
    let (mut group, mut stack) = (Vec::new(), Vec::new());
    let (mut handed, mut id) = (0, 0u32);
    for start in first_moved..grid.len() {
        if group_of[start] != 0 || !moved(start, owners) {
            continue;
        }
        // At most one group per box, and a grid holds at most 2^32 − 1 boxes.
        id += 1;
        let (from, to) = (owners[start], previous[start]);
        group.clear();
        let joins = |m: usize| moved(m, owners) && owners[m] == from && previous[m] == to;
        flood(grid, start, (&mut group_of, id), &mut stack, joins, |k| group.push(k));
        let (mut faces_to, mut faces_from, mut beside) = (0, 0, None);
        for &k in &group {
            grid.for_each_neighbour(k, |m| {
                if group_of[m] != id {
                    faces_to += usize::from(owners[m] == to);
                    if owners[m] == from {
                        faces_from += 1;
                        beside = Some(m);
                    }
                }
            });
        }
        // A group that touches no other box of its part is a piece of its own: left where it is.
        let Some(first) = beside else { continue };
        if faces_to == 0 || faces_from > faces_to {
            continue;
        }
        // The rest of `from` in one piece: a search from a box beside the group meets all of it.
        let left = count[from as usize] - group.len();
        let mut met = 0;
        let joins = |m: usize| group_of[m] != id && owners[m] == from;
        flood(grid, first, (&mut reached, id), &mut stack, joins, |_| met += 1);
        if met < left {
            continue;
        }
        for &k in &group {
            owners[k] = to;
        }
        count[from as usize] = left;
        count[to as usize] += group.len();
        handed += group.len();
    }
    handed
}

/// Visits `start` and every box reached from it through face neighbours that `joins` admits,
/// each once: `mark` holds, per box, the number of the last search that reached it, and this
/// search's number.
fn flood(
    grid: &crate::Grid,
    start: usize,
    (mark, id): (&mut [u32], u32),
    stack: &mut Vec<usize>,
    joins: impl Fn(usize) -> bool,
    mut visit: impl FnMut(usize),
) {
    mark[start] = id;
    stack.push(start);
    while let Some(k) = stack.pop() {
        visit(k);
        grid.for_each_neighbour(k, |m| {
            if mark[m] != id && joins(m) {
                mark[m] = id;
                stack.push(m);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{bisection::kway_rcb, metrics, Grid};

    /// Two k-way RCBs of sparse maps, the second rolled: handing boxes back changes no charge,
    /// lengthens no cut, splits and empties no part, and never adds a migration.
    #[test]
    fn handing_back_keeps_charges_cut_and_pieces_and_moves_fewer_boxes() {
        let mut rng = crate::rng::SplitMix64::new(42);
        let mut handed_somewhere = 0;
        for case in 0..60 {
            let (nx, ny) = (8 + (rng.next_f64() * 24.0) as usize, 8 + (rng.next_f64() * 24.0) as usize);
            let grid = Grid::new(nx, ny).unwrap();
            let parts = 2 + (rng.next_f64() * 7.0) as usize;
            let empty = 0.5 + 0.45 * rng.next_f64();
            let loads: Vec<f64> =
                (0..grid.len()).map(|_| if rng.next_f64() < empty { 0.0 } else { 0.5 + rng.next_f64() }).collect();
            let shift = 1 + (rng.next_f64() * 3.0) as usize;
            let rolled: Vec<f64> = (0..grid.len()).map(|k| loads[k - k % nx + (k % nx + nx - shift) % nx]).collect();
            let Ok(problem) = Problem::new(grid, &rolled, parts) else { continue };
            let previous = kway_rcb(&grid, &loads, parts).unwrap();
            let mut owners = kway_rcb(&grid, &rolled, parts).unwrap();
            let before = owners.clone();
            let handed = hold_unloaded(&problem, &mut owners, &previous).unwrap();
            handed_somewhere += handed;
            let charges = |o: &[u32]| metrics::charges(o, &rolled, parts);
            assert_eq!(charges(&owners), charges(&before), "case {case}");
            assert!(metrics::edge_cut(&grid, &owners) <= metrics::edge_cut(&grid, &before), "case {case}");
            let pieces = |o: &[u32]| metrics::disconnected_parts(&grid, o, parts);
            assert!(pieces(&owners) <= pieces(&before), "case {case}");
            let sizes = |o: &[u32]| (0..parts as u32).map(|p| o.iter().filter(|&&q| q == p).count()).min();
            assert!(sizes(&owners) > Some(0) || sizes(&before) == Some(0), "case {case}");
            let moved = |o: &[u32]| metrics::migrations(&previous, o);
            assert_eq!(moved(&owners) + handed, moved(&before), "case {case}");
        }
        assert!(handed_somewhere > 0, "no case handed a box back: pick other maps");
    }

    #[test]
    fn owners_of_another_length_or_part_count_are_an_error() {
        let grid = Grid::new(4, 1).unwrap();
        let problem = Problem::new(grid, &[1.0, 0.0, 0.0, 1.0], 2).unwrap();
        let mut owners = [0, 0, 1, 1];
        for previous in [&[0, 0, 1][..], &[0, 0, 2, 1]] {
            let e = hold_unloaded(&problem, &mut owners, previous);
            assert!(matches!(e, Err(crate::Error::Parameter { .. })), "{e:?}");
        }
        assert_eq!(owners, [0, 0, 1, 1]);
    }
}
