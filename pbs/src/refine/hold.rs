//! Boxes that carry no load handed back to the part that held them before: a rebalancing
//! moves the borders of power cells across stretches of boxes with no load, where no charge
//! pins them, and each such box moved is a migration that balances nothing.

use super::check_owners;
use super::pairs::Marks;
use crate::Problem;

/// Hands boxes that carry no load and changed owner since `previous` back to their previous
/// owner, one group at a time: a face-connected group of such boxes that left the same part for
/// the same part goes back where it touches that part, where the cut does not grow (its faces
/// on the part it goes back to at least as many as those on the part it leaves) and where the
/// part it leaves keeps a box and stays in one piece. Where the whole group would lengthen the
/// cut, its boxes nearest that part (breadth first from the boxes beside it) go back, as many
/// as leave the cut no longer. The charges do not change. Returns the boxes handed back.
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
    // Per box, the last group (`group_of`) and search (`reached`) that visited it, by number;
    // `marks` for ordering a group of which only a part may go back, made when one is first met.
    let (mut group_of, mut reached) = (vec![0u32; grid.len()], vec![0u32; grid.len()]);
    let mut marks: Option<Marks> = None;
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
        let (mut faces_to, mut faces_from) = (0, 0);
        for &k in &group {
            grid.for_each_neighbour(k, |m| {
                if group_of[m] != id {
                    faces_to += usize::from(owners[m] == to);
                    faces_from += usize::from(owners[m] == from);
                }
            });
        }
        // A group that touches no other box of its part is a piece of its own, left where it
        // is; one that does not touch its old part cannot go back to it.
        if faces_from == 0 || faces_to == 0 {
            continue;
        }
        // Where the whole group would lengthen the cut, the boxes of it nearest its old part.
        let back = if faces_from <= faces_to {
            group.len()
        } else {
            let marks = marks.get_or_insert_with(|| Marks::new(grid.len()));
            nearest_part(grid, owners, &mut group, (from, to), marks)
        };
        if back == 0 {
            continue;
        }
        // The rest of `from` in one piece, tried with those boxes handed back: a search from a
        // box of it beside them meets all of it.
        group[..back].iter().for_each(|&k| owners[k] = to);
        let mut beside = None;
        for &k in &group[..back] {
            grid.for_each_neighbour(k, |m| {
                if beside.is_none() && owners[m] == from {
                    beside = Some(m);
                }
            });
        }
        let left = count[from as usize] - back;
        let whole = beside.is_some_and(|first| {
            let mut met = 0;
            flood(grid, first, (&mut reached, id), &mut stack, |m| owners[m] == from, |_| met += 1);
            met >= left
        });
        if !whole {
            group[..back].iter().for_each(|&k| owners[k] = from);
            continue;
        }
        count[from as usize] = left;
        count[to as usize] += back;
        handed += back;
    }
    handed
}

/// Orders `group` (boxes of part `from` that were part `to`'s) outwards from `to`, breadth first
/// from the boxes beside it, and returns the most of the first boxes that go back to `to` with
/// the cut no longer (0: none), fewer than the whole group. A rebalancing whose cells swung
/// across stretches without load leaves wedges of them: where the whole wedge would lengthen
/// the cut, its side nearest the old part may still go back.
fn nearest_part(
    grid: &crate::Grid,
    owners: &[u32],
    group: &mut Vec<usize>,
    (from, to): (u32, u32),
    marks: &mut Marks,
) -> usize {
    let order = outwards(grid, owners, group, (from, to), marks);
    let back = order[..order.len() - 1].iter().rposition(|&(_, change)| change <= 0).map_or(0, |i| i + 1);
    group.clear();
    group.extend(order.iter().map(|&(k, _)| k));
    back
}

/// The boxes of `group` (face-connected boxes of part `from`) outwards from part `to`,
/// breadth first from those beside it (none where none is), each with the change of the cut
/// once it and the boxes before it go to `to`: a face to `to` or to a box gone before becomes
/// a face within `to`, one to a box staying in `from` a new cut. `marks` takes three stamps.
pub(super) fn outwards(
    grid: &crate::Grid,
    owners: &[u32],
    group: &[usize],
    (from, to): (u32, u32),
    marks: &mut Marks,
) -> Vec<(usize, isize)> {
    // Boxes of the group not yet ordered hold `unseen`; ordered ones `seen`, then `inside`
    // once counted in.
    let unseen = marks.fresh();
    group.iter().for_each(|&k| marks.stamp[k] = unseen);
    let seen = marks.fresh();
    let mut order = Vec::with_capacity(group.len());
    for &k in group {
        let mut beside_to = false;
        grid.for_each_neighbour(k, |m| beside_to |= owners[m] == to);
        if beside_to {
            marks.stamp[k] = seen;
            order.push(k);
        }
    }
    let mut next = 0;
    while next < order.len() {
        grid.for_each_neighbour(order[next], |m| {
            if marks.stamp[m] == unseen {
                marks.stamp[m] = seen;
                order.push(m);
            }
        });
        next += 1;
    }
    let inside = marks.fresh();
    let mut change = 0isize;
    order
        .into_iter()
        .map(|k| {
            grid.for_each_neighbour(k, |m| {
                if marks.stamp[m] == inside || owners[m] == to {
                    change -= 1;
                } else if owners[m] == from {
                    change += 1;
                }
            });
            marks.stamp[k] = inside;
            (k, change)
        })
        .collect()
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
pub(super) mod tests {
    use super::*;
    use crate::{bisection::kway_rcb, metrics, Grid};

    /// A random grid (2D in the first `first_3d` cases, then 2 to 4 layers of smaller boxes),
    /// 2 to 8 parts, loads in 0.5–1.5 with a share `empty.0 + empty.1 × r` of boxes without
    /// any (`r` uniform in 0–1), and those loads rolled by 1 to `1 + shifts` columns: the grid,
    /// the loads, the rolled loads and the part count.
    pub(in crate::refine) fn rolled_case(
        rng: &mut crate::rng::SplitMix64,
        case: usize,
        first_3d: usize,
        empty: (f64, f64),
        shifts: f64,
    ) -> (Grid, Vec<f64>, Vec<f64>, usize) {
        let (nx, ny) = (8 + (rng.next_f64() * 24.0) as usize, 8 + (rng.next_f64() * 24.0) as usize);
        let grid = if case < first_3d {
            Grid::new(nx, ny).unwrap()
        } else {
            Grid::new_3d(nx / 2, ny / 2, 2 + case % 3).unwrap()
        };
        let nx = grid.nx();
        let parts = 2 + (rng.next_f64() * 7.0) as usize;
        let empty = empty.0 + empty.1 * rng.next_f64();
        let loads: Vec<f64> =
            (0..grid.len()).map(|_| if rng.next_f64() < empty { 0.0 } else { 0.5 + rng.next_f64() }).collect();
        let shift = 1 + (rng.next_f64() * shifts) as usize;
        let rolled: Vec<f64> = (0..grid.len()).map(|k| loads[k - k % nx + (k % nx + nx - shift) % nx]).collect();
        (grid, loads, rolled, parts)
    }

    /// Two k-way RCBs of sparse maps, the second rolled: handing boxes back changes no charge,
    /// lengthens no cut, splits and empties no part, and never adds a migration. (1,100 2D
    /// cases: the first where only the part of a group nearest its old part could go back and
    /// that would split the part it leaves is case 1,084; then 300 in 3D.)
    #[test]
    fn handing_back_keeps_charges_cut_and_pieces_and_moves_fewer_boxes() {
        let mut rng = crate::rng::SplitMix64::new(42);
        let (mut handed_somewhere, mut handed_in_3d) = (0, 0);
        for case in 0..1400 {
            // The last 300 cases in 3D.
            let (grid, loads, rolled, parts) = rolled_case(&mut rng, case, 1100, (0.5, 0.45), 3.0);
            let Ok(problem) = Problem::new(grid, &rolled, parts) else { continue };
            let previous = kway_rcb(&grid, &loads, parts).unwrap();
            let mut owners = kway_rcb(&grid, &rolled, parts).unwrap();
            let before = owners.clone();
            let handed = hold_unloaded(&problem, &mut owners, &previous).unwrap();
            handed_somewhere += handed;
            handed_in_3d += if grid.nz() > 1 { handed } else { 0 };
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
        assert!(handed_somewhere > 0 && handed_in_3d > 0, "no case handed a box back: pick other maps");
    }

    /// A staircase of boxes without load that the border swept across (8 × 4 boxes, load in
    /// the outer columns only): handed back whole, the staircase would take the cut from 4 faces
    /// to 7; the column beside the old part goes back, the cut stays at 4.
    #[test]
    fn the_side_of_a_wedge_nearest_its_old_part_goes_back_where_the_whole_would_lengthen_the_cut() {
        let grid = Grid::new(8, 4).unwrap();
        let loads: Vec<f64> = (0..grid.len()).map(|k| if k % 8 == 0 || k % 8 == 7 { 1.0 } else { 0.0 }).collect();
        let problem = Problem::new(grid, &loads, 2).unwrap();
        let rows = |ends: [usize; 4]| -> Vec<u32> { (0..32).map(|k| u32::from(k % 8 > ends[k / 8])).collect() };
        // Part 0 reached column 5 in the first row, 4, 3 and 2 in the next; now column 1.
        let previous = rows([5, 4, 3, 2]);
        let mut owners = rows([1, 1, 1, 1]);
        assert_eq!(metrics::edge_cut(&grid, &previous), 7);
        assert_eq!(metrics::edge_cut(&grid, &owners), 4);
        assert_eq!(hold_unloaded(&problem, &mut owners, &previous).unwrap(), 4);
        assert_eq!(owners, rows([2, 2, 2, 2]));
        assert_eq!(metrics::edge_cut(&grid, &owners), 4);
        // Mirrored (the old part on the right), so that the wedge's boxes in index order start
        // far from it: the column beside it still goes back.
        let mirrored = |o: Vec<u32>| -> Vec<u32> { (0..32).map(|k| o[k - k % 8 + 7 - k % 8]).collect() };
        let previous = mirrored(rows([5, 4, 3, 2]));
        let mut owners = mirrored(rows([1, 1, 1, 1]));
        assert_eq!(hold_unloaded(&problem, &mut owners, &previous).unwrap(), 4);
        assert_eq!(owners, mirrored(rows([2, 2, 2, 2])));
    }

    /// On a row, part 0 first takes back boxes 4–5 from part 1, then hands boxes 8–9 back to
    /// part 2: its box count, kept in step (6, then 4), lets the second group go, the rest of
    /// part 0 still in one piece of four boxes.
    #[test]
    fn a_part_that_took_a_group_back_hands_another_on() {
        let grid = Grid::new(12, 1).unwrap();
        let loads = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
        let problem = Problem::new(grid, &loads, 3).unwrap();
        let previous = [1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 2, 2];
        let mut owners = [1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2];
        assert_eq!(hold_unloaded(&problem, &mut owners, &previous).unwrap(), 4);
        assert_eq!(owners, previous);
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
