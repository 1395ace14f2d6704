//! Step 0 of the refinement, every part in one piece ([`State::mend`]), and the test that keeps
//! each later move from splitting a part ([`State::may_leave`]).

use super::State;

/// Boxes the search around a box that may split its part visits at most.
const SEARCH_LIMIT: usize = 4096;

impl State<'_, '_> {
    /// Given the pieces of the owners (from [`crate::metrics::connected_pieces`]), hands every
    /// piece of a part but its main one (the most charged, then the largest,
    /// then the first found) to the parts around it, box by box from the outside in, each box
    /// to the neighbouring part holding most of its faces (the least charged among equals,
    /// then the lowest id; that may be its own part, where boxes moved before it now join it to
    /// its part's main piece). A box only ever joins a main piece, so each part ends in one
    /// piece and none is emptied. Returns the boxes moved.
    pub(super) fn mend(&mut self, (piece, pieces): crate::metrics::Pieces) -> usize {
        let mut weight = vec![0.0; pieces.len()];
        piece.iter().zip(self.loads).for_each(|(&i, &q)| weight[i as usize] += q);
        let mut main = vec![u32::MAX; self.charge.len()];
        for (i, &(owner, size)) in pieces.iter().enumerate() {
            let m = &mut main[owner as usize];
            if *m == u32::MAX || (weight[i], size) > (weight[*m as usize], pieces[*m as usize].1) {
                *m = i as u32;
            }
        }
        let mut stray: Vec<bool> = piece.iter().zip(self.owners.iter()).map(|(&i, &p)| main[p as usize] != i).collect();
        let touches_main = |k: usize, stray: &[bool]| {
            let mut found = false;
            self.grid.for_each_neighbour(k, |n| found |= !stray[n]);
            found
        };
        // Each box queued has a face neighbour in a main piece, which is another part's: a box
        // beside its own part's main piece would be in that piece.
        let mut queue: std::collections::VecDeque<usize> =
            (0..stray.len()).filter(|&k| stray[k] && touches_main(k, &stray)).collect();
        let mut moves = 0;
        while let Some(k) = queue.pop_front() {
            if !stray[k] {
                continue;
            }
            let (near, len) = self.neighbour_parts_among(k, |n| !stray[n]);
            let charge = &self.charge;
            let (to, _) = *near[..len]
                .iter()
                .min_by(|x, y| {
                    y.1.cmp(&x.1).then(charge[x.0 as usize].total_cmp(&charge[y.0 as usize])).then(x.0.cmp(&y.0))
                })
                .expect("a queued box touches a main piece");
            // A box that another's move has joined to its own part's main piece stays.
            if to != self.owners[k] {
                self.move_box(k, to);
                moves += 1;
            }
            stray[k] = false;
            self.grid.for_each_neighbour(k, |n| {
                if stray[n] {
                    queue.push_back(n);
                }
            });
        }
        moves
    }

    /// Whether box `b` may leave its part: the part keeps another box, and the part's boxes
    /// among `b`'s face neighbours stay connected without it (then every path through `b` has
    /// a detour, so the part's pieces stay as many).
    pub(super) fn may_leave(&self, b: usize) -> bool {
        let p = self.owners[b];
        if self.count[p as usize] <= 1 {
            return false;
        }
        let [nx, ny, nz] = self.grid.dims();
        let [i, j, l] = self.grid.coords(b);
        // Slot s = (dl + 1) * 9 + (dj + 1) * 3 + (di + 1) of the block; the centre is 13.
        let mut inside = [false; 27];
        for (s, cell) in inside.iter_mut().enumerate() {
            let d = [(s % 3) as isize - 1, ((s / 3) % 3) as isize - 1, (s / 9) as isize - 1];
            let c = [i as isize + d[0], j as isize + d[1], l as isize + d[2]];
            let fits = (0..3).all(|a| c[a] >= 0 && (c[a] as usize) < [nx, ny, nz][a]);
            if s != 13 && fits {
                *cell = self.owners[self.grid.index(c[0] as usize, c[1] as usize, c[2] as usize)] == p;
            }
        }
        const FACES: [usize; 6] = [12, 14, 10, 16, 4, 22];
        let faces: Vec<usize> = FACES.iter().copied().filter(|&s| inside[s]).collect();
        if faces.is_empty() {
            // `b` is a piece of its own: taking it away leaves one piece fewer.
            return true;
        }
        if joined_in_block(&inside, &faces) {
            return true;
        }
        // Not joined around `b`: they may still be joined the long way (a ring).
        let target: Vec<usize> = faces.iter().map(|&s| self.box_at(b, s)).collect();
        self.joined_without(b, &target)
    }

    /// The box at slot `s` of the block around `b` (a slot inside the grid).
    fn box_at(&self, b: usize, s: usize) -> usize {
        let [i, j, l] = self.grid.coords(b);
        let at = |c: usize, d: usize| c + d - 1;
        self.grid.index(at(i, s % 3), at(j, (s / 3) % 3), at(l, s / 9))
    }

    /// Whether the boxes `ends` (of `b`'s part) are joined by a path of that part avoiding `b`:
    /// a breadth-first search from the first, which stops once it has met them all, or says
    /// no after [`SEARCH_LIMIT`] boxes (a thin part whose ends meet only far away keeps `b`).
    fn joined_without(&self, b: usize, ends: &[usize]) -> bool {
        let p = self.owners[b];
        let mut seen = std::collections::HashSet::with_capacity(64);
        seen.insert(b);
        seen.insert(ends[0]);
        let mut queue = std::collections::VecDeque::from([ends[0]]);
        let mut missing = ends.len() - 1;
        while let Some(k) = queue.pop_front() {
            self.grid.for_each_neighbour(k, |n| {
                if self.owners[n] == p && seen.insert(n) {
                    missing -= usize::from(ends.contains(&n));
                    queue.push_back(n);
                }
            });
            if missing == 0 {
                return true;
            }
            if seen.len() > SEARCH_LIMIT {
                return false;
            }
        }
        false
    }
}

/// Whether the slots `faces` of a 3 × 3 × 3 block (slot `s` at `x = s % 3`, `y = s / 3 % 3`,
/// `z = s / 9`) are joined by face steps through the slots marked `inside`: a depth-first
/// search from the first. `faces` are inside and not empty.
fn joined_in_block(inside: &[bool; 27], faces: &[usize]) -> bool {
    let mut seen = [false; 27];
    let mut stack = vec![faces[0]];
    seen[faces[0]] = true;
    while let Some(s) = stack.pop() {
        let (x, y, z) = (s % 3, (s / 3) % 3, s / 9);
        let steps = [
            (x > 0).then(|| s - 1),
            (x < 2).then(|| s + 1),
            (y > 0).then(|| s - 3),
            (y < 2).then(|| s + 3),
            (z > 0).then(|| s - 9),
            (z < 2).then(|| s + 9),
        ];
        for t in steps.into_iter().flatten() {
            if inside[t] && !seen[t] {
                seen[t] = true;
                stack.push(t);
            }
        }
    }
    faces.iter().all(|&s| seen[s])
}

#[cfg(test)]
mod tests {
    use super::joined_in_block;
    use crate::{refine, Grid, Problem};

    /// The piece a part keeps is its most charged, not its largest: on a row, part 0's one
    /// box of load 5 stays and its three boxes of load 1 go to part 1.
    #[test]
    fn a_part_in_pieces_keeps_its_most_charged_piece() {
        let problem = Problem::new(Grid::new(6, 1).unwrap(), &[5.0, 1.0, 1.0, 1.0, 1.0, 1.0], 2).unwrap();
        let mut owners = [0, 1, 1, 0, 0, 0];
        assert_eq!(refine::mend(&problem, &mut owners).unwrap(), 3);
        assert_eq!(owners, [0, 1, 1, 1, 1, 1]);
    }

    /// A block with the slots `on` inside.
    fn block(on: &[usize]) -> [bool; 27] {
        let mut inside = [false; 27];
        on.iter().for_each(|&s| inside[s] = true);
        inside
    }

    /// Two face slots at right angles are joined through the edge slot they share (reached
    /// from either, so that each of the six steps is taken), and not without it: the centre
    /// is never inside.
    #[test]
    fn faces_at_right_angles_join_through_their_shared_edge_only() {
        let faces = [12, 14, 10, 16, 4, 22];
        let mut pairs = 0;
        for &a in &faces {
            for &b in &faces {
                // Opposite faces sum to 26; a face and itself are no pair.
                if a == b || a + b == 26 {
                    continue;
                }
                let edge = a + b - 13;
                assert!(joined_in_block(&block(&[a, b, edge]), &[a, b]), "{a} and {b} through {edge}");
                assert!(!joined_in_block(&block(&[a, b]), &[a, b]), "{a} and {b} alone");
                // Every slot but the centre and the edge: joined the long way round the block.
                let rest: Vec<usize> = (0..27).filter(|&s| s != 13 && s != edge).collect();
                assert!(joined_in_block(&block(&rest), &[a, b]), "{a} and {b} round the block");
                pairs += 1;
            }
        }
        assert_eq!(pairs, 24);
    }

    /// Opposite faces need a path of five slots in the block (a step aside, two across, one
    /// back); a path that leaves it is not seen here.
    #[test]
    fn opposite_faces_join_only_around_the_centre() {
        assert!(!joined_in_block(&block(&[12, 14]), &[12, 14]));
        assert!(joined_in_block(&block(&[12, 9, 10, 11, 14]), &[12, 14]));
        assert!(!joined_in_block(&block(&[12, 9, 11, 14]), &[12, 14]));
        assert!(joined_in_block(&block(&[4, 1, 10, 19, 22]), &[4, 22]));
        // Three faces: all must be met.
        assert!(!joined_in_block(&block(&[12, 9, 10, 16]), &[12, 10, 16]));
        assert!(joined_in_block(&block(&[12, 9, 10, 16, 15]), &[12, 10, 16]));
        // One face is joined to itself.
        assert!(joined_in_block(&block(&[22]), &[22]));
    }
}
