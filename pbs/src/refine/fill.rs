//! Parts with no box given one. A power cell can end a rebalancing with no box: where a few
//! boxes carry all the load, the cells meet their tolerance with room to spare and one of them
//! may be squeezed out (or, from a bisection's centroids, start shadowed by another); the
//! cells' own filling (`methods::power::empty`) gives up after a few trials. An empty part is
//! a thread, a rank or a consumer of the partition left with nothing, which code downstream
//! may not expect.

use super::State;
use crate::Problem;

/// [`State::fill_empty_parts`] on `owners` (valid for `problem`); one pass over them where no
/// part is empty.
pub(super) fn fill_empty(problem: &Problem, owners: &mut [u32], previous: Option<&[u32]>) -> usize {
    if crate::metrics::empty_parts(owners, problem.vcores()).is_empty() {
        return 0;
    }
    State::new(problem, owners).fill_empty_parts(previous)
}

impl State<'_, '_> {
    /// Gives every part with no box one box, taken from a part that keeps another and stays in
    /// as many pieces ([`State::may_leave`]): first a box the part held in `previous` (a
    /// migration undone), then one that carries no load (no charge changes), then the one whose
    /// move lengthens the cut least (fewest faces on its own part), then the lowest index. No
    /// charge passes the largest: the part that gets the box carries at most what the part
    /// that gave it did. Returns the boxes moved.
    pub(super) fn fill_empty_parts(&mut self, previous: Option<&[u32]>) -> usize {
        let mut moved = 0;
        for p in 0..self.count.len() {
            if self.count[p] > 0 {
                continue;
            }
            // No box may leave only where every part holds one (fewer boxes than parts, which a
            // problem refuses) or every box that could go sits on a ring of its part longer than
            // `may_leave` searches: the part then stays empty.
            let Some(k) = self.box_for(p as u32, previous) else { continue };
            self.move_box(k, p as u32);
            moved += 1;
        }
        moved
    }

    /// The box [`State::fill_empty_parts`] gives part `p`, `None` where no box may leave.
    fn box_for(&self, p: u32, previous: Option<&[u32]>) -> Option<usize> {
        // Smaller is better: (not p's before, carries load, faces on its own part).
        let key = |k: usize| {
            let own = self.owners[k];
            let mut faces = 0u8;
            self.grid.for_each_neighbour(k, |n| faces += u8::from(self.owners[n] == own));
            (previous.is_none_or(|before| before[k] != p), self.loads[k] != 0.0, faces)
        };
        // One pass; the search of `may_leave` only for a box that would beat the best so far.
        let mut best: Option<((bool, bool, u8), usize)> = None;
        for k in 0..self.owners.len() {
            let kk = key(k);
            if best.is_none_or(|(b, _)| kk < b) && self.may_leave(k) {
                best = Some((kk, k));
                if kk == (false, false, 0) {
                    break;
                }
            }
        }
        best.map(|(_, k)| k)
    }
}

#[cfg(test)]
mod tests {
    use super::fill_empty;
    use crate::{metrics, Grid, Problem};

    fn filled(grid: Grid, loads: &[f64], parts: usize, owners: &mut [u32], previous: Option<&[u32]>) -> usize {
        fill_empty(&Problem::new(grid, loads, parts).unwrap(), owners, previous)
    }

    /// Part 2 lost its boxes: it gets back one it held (box 4, with no load) rather than box 2,
    /// which carries no load either and would lengthen the cut less; parts stay whole.
    #[test]
    fn an_empty_part_gets_back_a_box_it_held() {
        let grid = Grid::new(6, 2).unwrap();
        let loads = [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0];
        let previous = [0, 0, 0, 1, 2, 2, 0, 0, 0, 1, 2, 2];
        let mut owners = [0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1];
        assert_eq!(filled(grid, &loads, 3, &mut owners, Some(&previous)), 1);
        assert_eq!(owners, [0, 0, 0, 1, 2, 1, 0, 0, 0, 1, 1, 1]);
        assert_eq!(metrics::disconnected_parts(&grid, &owners, 3), 0);
        // Without the previous owners: box 2, the first with no load and two faces on its part.
        let mut owners = [0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1];
        assert_eq!(filled(grid, &loads, 3, &mut owners, None), 1);
        assert_eq!(owners, [0, 0, 2, 1, 1, 1, 0, 0, 0, 1, 1, 1]);
    }

    /// Without a previous partition, a box with no load is preferred to a loaded one, then the
    /// box with the fewest faces on its own part, and a box whose part would fall apart without
    /// it never moves.
    #[test]
    fn without_a_previous_partition_an_unloaded_box_that_splits_nothing_goes() {
        let grid = Grid::new(5, 1).unwrap();
        // Part 0 is boxes 0..3; box 1 would split it, box 0 carries load, box 2 does not.
        let loads = [1.0, 0.0, 0.0, 1.0, 1.0];
        let mut owners = [0, 0, 0, 1, 1];
        assert_eq!(filled(grid, &loads, 3, &mut owners, None), 1);
        assert_eq!(owners, [0, 0, 2, 1, 1]);
        // Every box of a 1D strip but the ends would split its part; all loaded: an end goes.
        let mut owners = [0, 0, 0, 0, 0];
        assert_eq!(filled(grid, &[1.0; 5], 2, &mut owners, None), 1);
        assert_eq!(owners, [1, 0, 0, 0, 0]);
        // Boxes 0 and 1 have two faces on part 0, box 2 one on part 1: box 2 goes.
        let grid = Grid::new(3, 2).unwrap();
        let mut owners = [0, 0, 1, 0, 0, 1];
        assert_eq!(filled(grid, &[1.0; 6], 3, &mut owners, None), 1);
        assert_eq!(owners, [0, 0, 2, 0, 0, 1]);
    }

    /// As many boxes as parts: each empty part takes the spare box of a part of two.
    #[test]
    fn every_part_ends_with_a_box_when_there_are_as_many_boxes() {
        let grid = Grid::new(2, 2).unwrap();
        let mut owners = [0, 0, 1, 1];
        assert_eq!(filled(grid, &[1.0; 4], 4, &mut owners, None), 2);
        let mut held = owners.to_vec();
        held.sort();
        assert_eq!(held, [0, 1, 2, 3]);
        // Again: no part is empty, nothing moves.
        let before = owners;
        assert_eq!(filled(grid, &[1.0; 4], 4, &mut owners, None), 0);
        assert_eq!(owners, before);
    }
}
