//! A rebalancing followed only as far as the balance needs: from the previous owners, the
//! boxes a rebalancing moved out of a part above the tolerance are moved, a border layer at a
//! time, until it is back within it; every other border stays where it was.

use super::hold::outwards;
use super::pairs::Marks;
use super::{check_owners, check_settings, target_charge, RefineSettings};
use crate::Problem;

/// Moves from `previous` towards `owners` (a rebalancing of the same loads) only as far as
/// the balance needs, and leaves the result in `owners`. While a part is above `tol` of the
/// lower bound (`(1 + tol)` × the bound × the mean), boxes that `owners` moved out of it go to
/// the part `owners` gave them, a face-connected group at a time (of the groups that leave the
/// part they go to within `tol`, if any, the one that sheds the excess in the fewest boxes)
/// and, where a group is more than the part must shed, its boxes nearest that part first, in
/// whole layers where one is enough; a part pushed over `tol` by what it took sheds in turn.
/// No box moves that `owners` did not move, no part is split or emptied, and the boxes a part
/// takes touch it. Where `previous` keeps every part within `tol`, `owners` become `previous`.
/// Where a part is left above `tol`, where the charge above `tol` is more than a quarter of the
/// load the rebalancing moved (loads far from the last ones, where most of it is needed), or
/// where most boxes it moved carry no load (wide stretches to search for little), `owners`
/// stay as they were: the rebalancing whole. Returns the boxes that end in another part than
/// in `previous`.
///
/// A rebalancing evens every part's charge and so moves every border; the loads ask far less:
/// on a drifting Perlin map the charge above 1.05 × the bound is 2–4 mean boxes a step where
/// the power cells moved 29–54 (docs/peers.md, "Following a rebalancing only as far as
/// needed").
///
/// ```
/// use pbs::{refine, Grid, Problem};
/// let grid = Grid::new(12, 1)?;
/// let problem = Problem::new(grid, &[1.0; 12], 3)?; // a mean of 4 a part
/// let previous = [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2]; // charges 6, 4, 2
/// let mut owners = [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]; // 4, 4, 4: four boxes moved
/// // Within 1.25 × the mean (5): part 0 sheds box 5, then part 1 (at 5) need shed nothing.
/// assert_eq!(refine::follow_within_tolerance(&problem, &mut owners, &previous, 0.25)?, 1);
/// assert_eq!(owners, [0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2]); // 5, 5, 2
/// # Ok::<(), pbs::Error>(())
/// ```
///
/// # Errors
/// [`crate::Error::Parameter`] if `owners` or `previous` does not hold one part id below the
/// vCore count per box, or `tol` is negative or not finite.
pub fn follow_within_tolerance(
    problem: &Problem,
    owners: &mut [u32],
    previous: &[u32],
    tol: f64,
) -> crate::Result<usize> {
    check_owners(problem, owners)?;
    check_owners(problem, previous)?;
    check_settings(RefineSettings { tol, ..Default::default() })?;
    let cap = target_charge(problem, tol);
    let charge = crate::metrics::charges(previous, problem.loads(), problem.vcores());
    if charge.iter().all(|&c| c <= cap) {
        owners.copy_from_slice(previous);
        return Ok(0);
    }
    let target = owners.to_vec();
    owners.copy_from_slice(previous);
    match follow(problem, owners, &target, (charge, cap)) {
        Some(moved) => Ok(moved),
        None => {
            owners.copy_from_slice(&target);
            Ok(crate::metrics::migrations(previous, owners))
        }
    }
}

/// The share of the load a rebalancing moves above which the charge over the tolerance
/// sends [`follow_within_tolerance`] to the rebalancing whole.
const FAR: f64 = 0.25;

/// [`follow_within_tolerance`] from `owners` (the previous owners, whose charges are `charge`)
/// towards `target`; the boxes moved where every part ended within `cap`.
fn follow(problem: &Problem, owners: &mut [u32], target: &[u32], (mut charge, cap): (Vec<f64>, f64)) -> Option<usize> {
    let (grid, loads, parts) = (problem.grid(), problem.loads(), problem.vcores());
    // The boxes the rebalancing moved, by the part they leave, in box order within it: part
    // `p`'s are `out_of[bounds[p]..bounds[p + 1]]` (one list: a list per part, grown box by
    // box, spent more on reallocating than the search did).
    let changed: Vec<usize> = (0..owners.len()).filter(|&k| owners[k] != target[k]).collect();
    let mut bounds = vec![0; parts + 1];
    changed.iter().for_each(|&k| bounds[owners[k] as usize + 1] += 1);
    (0..parts).for_each(|p| bounds[p + 1] += bounds[p]);
    let mut out_of = vec![0; changed.len()];
    let mut next = bounds.clone();
    for &k in &changed {
        let at = &mut next[owners[k] as usize];
        out_of[*at] = k;
        *at += 1;
    }
    let moving: f64 = changed.iter().map(|&k| loads[k]).sum();
    let unloaded = changed.iter().filter(|&&k| loads[k] == 0.0).count();
    // Far from the last loads most of what the rebalancing moves is needed, and finding out
    // box by box costs several times the rebalancing (on re-drawn Perlin maps the charge above
    // the tolerance was 0.28–0.72 of the load it moved, on drifting ones 0.01–0.2). Where most
    // boxes it moves carry no load, the groups to search are wide stretches of them, each box
    // of load behind many that shed nothing (a map 1 % loaded, rolled: 3–8 × the time).
    let excess: f64 = charge.iter().map(|&c| (c - cap).max(0.0)).sum();
    if excess > FAR * moving || 2 * unloaded > changed.len() {
        return None;
    }
    // Parts to bring within the cap, lowest id first; a part is queued again when what it
    // takes puts it over. Each box moves once at most, so the queue empties.
    let mut queue: std::collections::BTreeSet<u32> = (0..parts as u32).filter(|&p| charge[p as usize] > cap).collect();
    let mut marks = Marks::new(grid.len());
    // Per box, the first of a pair of marks where it stands around the boxes of the move last
    // tried, the second where also beside them in the part they leave; `marks` takes every
    // search's own.
    let mut near = Marks::new(grid.len());
    let (mut group, mut beside, mut stack) = (Vec::new(), Vec::new(), Vec::new());
    let mut moved = 0;
    // Per box, the mark of the round that last looked at its group; the boxes of groups found
    // to split their part in its turn (not tried again in it).
    let (mut seen, mut blocked) = (Marks::new(grid.len()), Vec::new());
    let mut best: Vec<usize> = Vec::new();
    while let Some(from) = queue.pop_first() {
        blocked.clear();
        while charge[from as usize] > cap {
            // Every group of `from` is looked at; of those that leave the part they go to
            // within the cap (else of all), the one that sheds the excess in the fewest boxes
            // goes.
            let round = seen.fresh();
            let need = charge[from as usize] - cap;
            let mut choice: Option<((bool, usize), u32)> = None;
            for &start in &out_of[bounds[from as usize]..bounds[from as usize + 1]] {
                if owners[start] != from || seen.stamp[start] == round {
                    continue;
                }
                let to = target[start];
                // The boxes of `from` that go to `to`, face-connected with `start`.
                group.clear();
                seen.stamp[start] = round;
                stack.push(start);
                while let Some(k) = stack.pop() {
                    group.push(k);
                    grid.for_each_neighbour(k, |m| {
                        if seen.stamp[m] != round && owners[m] == from && target[m] == to {
                            seen.stamp[m] = round;
                            stack.push(m);
                        }
                    });
                }
                // Boxes without load shed nothing: a group of them stays.
                if group.iter().all(|&k| loads[k] == 0.0) || group.iter().any(|k| blocked.contains(k)) {
                    continue;
                }
                let take = nearest_layers(grid, owners, &mut group, (from, to), &mut marks, (loads, need));
                if take == 0 {
                    continue;
                }
                let load: f64 = group[..take].iter().map(|&k| loads[k]).sum();
                let key = (charge[to as usize] + load > cap, take);
                if choice.is_none_or(|(best_key, _)| key < best_key) {
                    choice = Some((key, to));
                    best.clear();
                    best.extend_from_slice(&group[..take]);
                    // One box that leaves its new part within the cap: no group does better.
                    if key == (false, 1) {
                        break;
                    }
                }
            }
            let Some((_, to)) = choice else { break };
            // `from` split no further (as `hold` checks it): the boxes of `from` beside those
            // moved meet, first around them, then over the whole part.
            let (around, by) = near.fresh_pair();
            best.iter().for_each(|&k| owners[k] = to);
            stamp_around(grid, &best, (&mut near.stamp, around));
            beside.clear();
            for &k in &best {
                grid.for_each_neighbour(k, |m| {
                    if owners[m] == from && near.stamp[m] != by {
                        near.stamp[m] = by;
                        beside.push(m);
                    }
                });
            }
            let whole = beside.first().is_some_and(|&first| {
                let (counts, wanted) = (|m: usize| near.stamp[m] == by, beside.len());
                let in_from = |m: usize| owners[m] == from;
                let close = |m: usize| in_from(m) && near.stamp[m] >= around;
                let search = marks.fresh();
                meets(grid, first, (&mut marks.stamp, search), &mut stack, close, (counts, wanted)) || {
                    let search = marks.fresh();
                    meets(grid, first, (&mut marks.stamp, search), &mut stack, in_from, (counts, wanted))
                }
            });
            if !whole {
                best.iter().for_each(|&k| owners[k] = from);
                blocked.extend_from_slice(&best);
                continue;
            }
            moved += best.len();
            let load: f64 = best.iter().map(|&k| loads[k]).sum();
            charge[from as usize] -= load;
            charge[to as usize] += load;
            if charge[to as usize] > cap {
                queue.insert(to);
            }
        }
    }
    charge.iter().all(|&c| c <= cap).then_some(moved)
}

/// Orders `group` (boxes of `from` that the rebalancing gave `to`) outwards from `to`, breadth
/// first from the boxes beside it, and returns how many of the first go: the fewest whose load
/// reaches `need` and that leave the cut no longer (whole layers), else the fewest that reach
/// it, else all; 0 where none touches `to`.
fn nearest_layers(
    grid: &crate::Grid,
    owners: &[u32],
    group: &mut Vec<usize>,
    (from, to): (u32, u32),
    marks: &mut Marks,
    (loads, need): (&[f64], f64),
) -> usize {
    let order = outwards(grid, owners, group, (from, to), marks);
    group.clear();
    group.extend(order.iter().map(|&(k, _)| k));
    let (mut load, mut enough) = (0.0, None);
    for (i, &(k, change)) in order.iter().enumerate() {
        load += loads[k];
        if load >= need {
            enough.get_or_insert(i + 1);
            if change <= 0 {
                return i + 1;
            }
        }
    }
    enough.unwrap_or(order.len())
}

/// Searches breadth first from `start` through face neighbours that `joins` admits (marking
/// them as [`flood`] does) until it has met `wanted` boxes that `counts` admits (`start`
/// included), or none is left; returns whether it met them.
fn meets(
    grid: &crate::Grid,
    start: usize,
    (mark, id): (&mut [u32], u32),
    queue: &mut Vec<usize>,
    joins: impl Fn(usize) -> bool,
    (counts, wanted): (impl Fn(usize) -> bool, usize),
) -> bool {
    queue.clear();
    mark[start] = id;
    queue.push(start);
    let (mut head, mut met) = (0, usize::from(counts(start)));
    while head < queue.len() && met < wanted {
        let k = queue[head];
        head += 1;
        grid.for_each_neighbour(k, |m| {
            if mark[m] != id && joins(m) {
                mark[m] = id;
                met += usize::from(counts(m));
                queue.push(m);
            }
        });
    }
    queue.clear();
    met >= wanted
}

/// Marks with `id` every box within one step of `boxes` along each axis (diagonals included).
fn stamp_around(grid: &crate::Grid, boxes: &[usize], (mark, id): (&mut [u32], u32)) {
    let dims = grid.dims();
    let span = |c: usize, d: usize| c.saturating_sub(1)..(c + 2).min(dims[d]);
    for &k in boxes {
        let [i, j, l] = grid.coords(k);
        for z in span(l, 2) {
            for y in span(j, 1) {
                for x in span(i, 0) {
                    mark[grid.index(x, y, z)] = id;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::hold::tests::rolled_case;
    use super::*;
    use crate::{bisection::kway_rcb, metrics, Grid};

    /// Two k-way RCBs, of a map and of the map rolled by a few columns, and a tolerance the
    /// second keeps on the rolled map and the first does not: the followed owners are the
    /// rolled map's RCB whole, or every part within the tolerance, each box with its part in
    /// one of the two, no part split or emptied, and fewer boxes moved. (600 cases in 2D, 200
    /// in 3D; loads in 0.5–1.5 with a share of boxes without any.)
    #[test]
    fn followed_owners_stay_within_the_tolerance_and_move_fewer_boxes() {
        let mut rng = crate::rng::SplitMix64::new(7);
        let (mut followed, mut saved) = (0, 0);
        for case in 0..800 {
            let (grid, loads, rolled, parts) = rolled_case(&mut rng, case, 600, (0.0, 0.3), 2.0);
            let Ok(problem) = Problem::new(grid, &rolled, parts) else { continue };
            let previous = kway_rcb(&grid, &loads, parts).unwrap();
            let target = kway_rcb(&grid, &rolled, parts).unwrap();
            let charges = |o: &[u32]| metrics::charges(o, &rolled, parts);
            let largest =
                |o: &[u32]| charges(o).into_iter().fold(0.0, f64::max) / (problem.lower_bound() * problem.mean());
            // A tolerance the rolled map's RCB keeps and the last owners do not.
            let (now, then) = (largest(&target), largest(&previous));
            if then < now + 0.01 {
                continue;
            }
            let tol = (now + then) / 2.0 - 1.0;
            let mut owners = target.clone();
            let moved = follow_within_tolerance(&problem, &mut owners, &previous, tol).unwrap();
            assert_eq!(moved, metrics::migrations(&previous, &owners), "case {case}");
            if owners == target {
                continue;
            }
            followed += 1;
            saved += metrics::migrations(&previous, &target) - moved;
            assert!(largest(&owners) <= 1.0 + tol, "case {case}: {} over {}", largest(&owners), 1.0 + tol);
            assert!(owners.iter().zip(&previous).zip(&target).all(|((o, p), t)| o == p || o == t), "case {case}");
            assert!(moved < metrics::migrations(&previous, &target), "case {case}");
            let pieces = |o: &[u32]| metrics::disconnected_parts(&grid, o, parts);
            assert!(pieces(&owners) <= pieces(&previous), "case {case}");
            let sizes = |o: &[u32]| (0..parts as u32).map(|p| o.iter().filter(|&&q| q == p).count()).min();
            assert!(sizes(&owners) > Some(0) || sizes(&previous) == Some(0), "case {case}");
        }
        assert!(followed > 100 && saved > 0, "{followed} cases followed, {saved} boxes saved: pick other maps");
    }

    /// [`follow_within_tolerance`] on a row of boxes with `loads` in `parts` parts, from
    /// `previous` towards `rebalanced`: the boxes it says moved, and the owners it leaves.
    fn follow_row(loads: &[f64], parts: usize, previous: &[u32], rebalanced: &[u32], tol: f64) -> (usize, Vec<u32>) {
        let problem = Problem::new(Grid::new(loads.len(), 1).unwrap(), loads, parts).unwrap();
        let mut owners = rebalanced.to_vec();
        let moved = follow_within_tolerance(&problem, &mut owners, previous, tol).unwrap();
        (moved, owners)
    }

    /// A row of `boxes` in parts 0, 1 and 2, each part's boxes from where it starts.
    fn three_parts(boxes: usize, first_of_1: usize, first_of_2: usize) -> Vec<u32> {
        (0..boxes).map(|k| u32::from(k >= first_of_1) + u32::from(k >= first_of_2)).collect()
    }

    /// Owners within the tolerance before anything moves: they stay, nothing moved.
    #[test]
    fn previous_owners_within_the_tolerance_are_kept() {
        let previous = [0, 0, 0, 1, 1, 1, 1, 1]; // 3 and 5: 1.25 × the mean
        let (moved, owners) = follow_row(&[1.0; 8], 2, &previous, &[0, 0, 0, 0, 1, 1, 1, 1], 0.25);
        assert_eq!(moved, 0);
        assert_eq!(owners, previous);
        // Even where the rebalancing moved only boxes without load (which alone would send
        // a search to the rebalancing whole).
        let (loads, previous) = ([1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0], [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]);
        assert_eq!(follow_row(&loads, 2, &previous, &[0, 0, 0, 1, 1, 1, 1, 1, 1, 1], 0.0), (0, previous.to_vec()));
    }

    /// Part 0 holds 13 of 16 unit loads, 1 over 1.5 × the mean (12), a quarter of the 4 the
    /// rebalancing moves (not more, so the search runs): it sheds box 12 and, at 12, no more.
    #[test]
    fn a_part_sheds_down_to_the_tolerance_and_no_further() {
        let previous: Vec<u32> = (0..16).map(|k| u32::from(k > 12)).collect();
        let rebalanced: Vec<u32> = (0..16).map(|k| u32::from(k > 8)).collect();
        let expected: Vec<u32> = (0..16).map(|k| u32::from(k > 11)).collect();
        assert_eq!(follow_row(&[1.0; 16], 2, &previous, &rebalanced, 0.5), (1, expected));
    }

    /// Loads far from the last ones: part 0 holds 7 of 8 unit loads, and the charge above
    /// 1.5 × the mean (1) is more than a quarter of what the rebalancing moves (3): its owners
    /// whole, where box 6 alone would have done.
    #[test]
    fn far_loads_keep_the_rebalancing_whole() {
        let rebalanced = [0, 0, 0, 0, 1, 1, 1, 1];
        let (moved, owners) = follow_row(&[1.0; 8], 2, &[0, 0, 0, 0, 0, 0, 0, 1], &rebalanced, 0.5);
        assert_eq!(moved, 3);
        assert_eq!(owners, rebalanced);
    }

    /// Near the last loads the search runs; where most boxes the rebalancing moved carry no
    /// load, it does not (the same row, its middle boxes emptied: the rebalancing whole).
    #[test]
    fn the_search_runs_near_the_last_loads_and_not_through_stretches_without_load() {
        let previous = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1];
        let rebalanced = [0, 0, 0, 1, 1, 1, 1, 1, 1, 1];
        // 8 and 2.6 over a mean of 5.3, within 1.3 × it (6.89): the excess, 1.11, is under a
        // quarter of the 5 the rebalancing moves, and boxes 7 and 6 shed it.
        let loads = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.3, 1.3];
        assert_eq!(follow_row(&loads, 2, &previous, &rebalanced, 0.3), (2, vec![0, 0, 0, 0, 0, 0, 1, 1, 1, 1]));
        // Boxes 4–6 without load: 5 and 2.6 over 3.8, within 1.25 × it (4.75); box 7 alone
        // would do, but three of the five boxes moved carry nothing.
        let loads = [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.3, 1.3];
        assert_eq!(follow_row(&loads, 2, &previous, &rebalanced, 0.25), (5, rebalanced.to_vec()));
        // Half of them without load (boxes 4 and 5 of the four moved, 4–7; 6 and 2.6 over a
        // mean of 4.3, within 1.3 × it, 5.59): box 7 goes.
        let loads = [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.3, 1.3];
        let half_unloaded = [0, 0, 0, 0, 1, 1, 1, 1, 1, 1];
        assert_eq!(follow_row(&loads, 2, &previous, &half_unloaded, 0.3), (1, vec![0, 0, 0, 0, 0, 0, 0, 1, 1, 1]));
    }

    /// Part 1 (6 of a mean of 4.27, over 1.25 × it, 5.33) may shed box 2 to part 0 or box 7
    /// to part 2, one box either way: box 7, since part 0 (4.8) would go over.
    #[test]
    fn a_part_sheds_where_the_part_that_takes_stays_within_the_tolerance() {
        let loads = [2.4, 2.4, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
        let (previous, rebalanced) = ([0, 0, 1, 1, 1, 1, 1, 1, 2, 2], [0, 0, 0, 1, 1, 1, 2, 2, 2, 2]);
        assert_eq!(follow_row(&loads, 3, &previous, &rebalanced, 0.25), (1, vec![0, 0, 1, 1, 1, 1, 1, 2, 2, 2]));
    }

    /// A part that ends at the tolerance exactly is within it: part 1 (11.5 over 1.5 × a mean
    /// of 7, 10.5) sheds box 8 (2) to part 0, which reaches 10.5, in one box, rather than
    /// boxes 18 and 17 (0.5 each) to part 2.
    #[test]
    fn a_part_that_takes_up_to_the_tolerance_exactly_stays_within_it() {
        let mut loads = vec![1.0; 20];
        [(0, 1.5), (8, 2.0), (16, 1.5), (17, 0.5), (18, 0.5)].iter().for_each(|&(k, q)| loads[k] = q);
        // Parts 0, 1 and 2: boxes 0–7 (8.5), 8–18 (11.5), 19 (1); the rebalancing gives box 8
        // to part 0 and boxes 16–18 to part 2.
        let (previous, rebalanced) = (three_parts(20, 8, 19), three_parts(20, 9, 16));
        assert_eq!(follow_row(&loads, 3, &previous, &rebalanced, 0.5), (1, three_parts(20, 9, 19)));
    }

    /// Of two groups that shed the excess in as many boxes, each leaving its new part within
    /// the tolerance, the first in box order goes: part 1 (11 over 10) sheds boxes 8 and 9
    /// (0.75 each) to part 0, not boxes 19 and 18 to part 2.
    #[test]
    fn of_two_groups_that_shed_alike_the_first_goes() {
        let mut loads = vec![1.0; 21];
        [8, 9, 18, 19].iter().for_each(|&k| loads[k] = 0.75);
        // Parts 0, 1 and 2: boxes 0–7 (8), 8–19 (11), 20 (1); the rebalancing gives boxes
        // 8–10 to part 0 and 17–19 to part 2.
        let (previous, rebalanced) = (three_parts(21, 8, 20), three_parts(21, 11, 17));
        assert_eq!(follow_row(&loads, 3, &previous, &rebalanced, 0.5), (2, three_parts(21, 10, 20)));
    }

    /// Where every prefix that sheds the excess lengthens the cut, the fewest boxes that shed
    /// it go: part 0 (15 of 20 unit loads on 5 × 4 boxes, over 1.45 × the mean, 14.5) sheds
    /// the top box of the column the rebalancing gave part 1 (the row above), not the column.
    #[test]
    fn where_no_layer_keeps_the_cut_the_fewest_boxes_that_shed_the_excess_go() {
        let problem = Problem::new(Grid::new(5, 4).unwrap(), &[1.0; 20], 2).unwrap();
        let previous: Vec<u32> = (0..20).map(|k| u32::from(k >= 15)).collect();
        let mut owners = previous.clone();
        [2, 7, 12].iter().for_each(|&k| owners[k] = 1);
        assert_eq!(follow_within_tolerance(&problem, &mut owners, &previous, 0.45).unwrap(), 1);
        let mut expected = previous.clone();
        expected[12] = 1;
        assert_eq!(owners, expected);
    }

    /// A move whose part stays whole only around its far side is taken: part 0, a ring around
    /// part 1 on 5 × 3 boxes (12 of 15 unit loads, over 1.5 × the mean, 11.25), sheds the
    /// bottom row's boxes 1 and 2 to part 1 above them; boxes 0 and 3, beside them, meet only
    /// through the top row.
    #[test]
    fn a_move_that_leaves_the_part_whole_through_its_far_side_is_taken() {
        let problem = Problem::new(Grid::new(5, 3).unwrap(), &[1.0; 15], 2).unwrap();
        let previous = [0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0];
        let mut owners = [0, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0];
        assert_eq!(follow_within_tolerance(&problem, &mut owners, &previous, 0.5).unwrap(), 2);
        assert_eq!(owners, [0, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0]);
    }

    /// Part 0 (5 over 1.3 × a mean of 3.83, 4.98) sheds box 4 to part 1, which goes over (5.5)
    /// and sheds box 7 of the two the rebalancing gave part 2: two boxes move, not three.
    #[test]
    fn a_part_pushed_over_sheds_in_turn() {
        let loads = [1.0, 1.0, 1.0, 1.0, 1.0, 1.5, 1.5, 1.5, 1.0, 1.0];
        let (previous, rebalanced) = ([0, 0, 0, 0, 0, 1, 1, 1, 2, 2], [0, 0, 0, 0, 1, 1, 2, 2, 2, 2]);
        assert_eq!(follow_row(&loads, 3, &previous, &rebalanced, 0.3), (2, vec![0, 0, 0, 0, 1, 1, 1, 2, 2, 2]));
    }

    #[test]
    fn owners_of_another_length_or_part_count_or_a_bad_tolerance_are_an_error() {
        let grid = Grid::new(4, 1).unwrap();
        let problem = Problem::new(grid, &[1.0; 4], 2).unwrap();
        let mut owners = [0, 0, 1, 1];
        for previous in [&[0, 0, 1][..], &[0, 0, 2, 1]] {
            let e = follow_within_tolerance(&problem, &mut owners, previous, 0.05);
            assert!(matches!(e, Err(crate::Error::Parameter { .. })), "{e:?}");
        }
        for tol in [-0.1, f64::NAN, f64::INFINITY] {
            let e = follow_within_tolerance(&problem, &mut owners, &[0, 1, 1, 1], tol);
            assert!(matches!(e, Err(crate::Error::Parameter { .. })), "{tol}: {e:?}");
        }
        assert_eq!(owners, [0, 0, 1, 1]);
    }
}
