//! Step 4 of the refinement: sweeps that move a box to the neighbouring part holding more of its
//! faces than its own, each move shortening the cut by at least one edge.

use super::{faces_in, State};

impl State<'_, '_> {
    pub(super) fn shorten_borders(&mut self, sweeps: usize) -> usize {
        let ceiling = self.charge[self.heaviest()];
        let mut moves = 0;
        for _ in 0..sweeps {
            let before = moves;
            let mut boxes = Vec::new();
            for p in 0..self.charge.len() {
                let border = self.border(p);
                boxes.extend_from_slice(&border);
                self.give_back(p, border);
            }
            boxes.sort_unstable();
            for b in boxes {
                let b = b as usize;
                let p = self.owners[b];
                let (near, len) = self.neighbour_parts(b);
                let own = faces_in(&near[..len], p);
                let q = self.loads[b];
                let best = near[..len]
                    .iter()
                    .filter(|e| e.0 != p && e.1 > own && self.charge[e.0 as usize] + q <= ceiling)
                    .fold(None::<(u32, u8)>, |acc, &e| match acc {
                        Some(a) if (a.1, std::cmp::Reverse(a.0)) >= (e.1, std::cmp::Reverse(e.0)) => Some(a),
                        _ => Some(e),
                    });
                if let Some((to, _)) = best {
                    if self.may_leave(b) {
                        self.move_box(b, to);
                        moves += 1;
                    }
                }
            }
            if moves == before {
                break;
            }
        }
        moves
    }
}

#[cfg(test)]
mod tests {
    use super::super::State;
    use crate::{Grid, Problem};

    /// Shortens the borders of `rows` (part ids, one string a row) with unit loads but a load
    /// of 0 at `light`; returns the moves and the owners after, as rows.
    fn shortened(rows: &[&str], light: usize, parts: usize) -> (usize, Vec<String>) {
        let (nx, ny) = (rows[0].len(), rows.len());
        let mut owners: Vec<u32> = rows.iter().flat_map(|r| r.bytes().map(|c| u32::from(c - b'0'))).collect();
        let loads: Vec<f64> = (0..nx * ny).map(|k| if k == light { 0.0 } else { 1.0 }).collect();
        let problem = Problem::new(Grid::new(nx, ny).unwrap(), &loads, parts).unwrap();
        let moves = State::new(&problem, &mut owners).shorten_borders(8);
        let text = owners.chunks(nx).map(|r| r.iter().map(|p| char::from(b'0' + *p as u8)).collect()).collect();
        (moves, text)
    }

    /// A box of part 2 with no face on its part goes to the neighbouring part holding most of
    /// its faces (3 to part 1 against 1 to part 0), or, between two with as many, to the lower
    /// id; part 2 keeps its column. Nothing else shortens the cut.
    #[test]
    fn a_box_goes_to_the_part_holding_most_of_its_faces_the_lower_id_on_a_tie() {
        assert_eq!(
            shortened(&["00002", "12112", "11112"], 6, 3),
            (1, vec!["00002".into(), "11112".into(), "11112".into()])
        );
        assert_eq!(
            shortened(&["00002", "12002", "11112"], 6, 3),
            (1, vec!["00002".into(), "10002".into(), "11112".into()])
        );
    }

    /// Part 0's column of two boxes at the left: the lower one (two faces on part 1) goes in
    /// the first sweep, after the upper one was met with one face there; the next sweep moves
    /// the upper one too.
    #[test]
    fn a_box_a_later_move_lets_go_moves_in_the_next_sweep() {
        let after = vec!["00000".into(), "11220".into(), "11220".into(), "11110".into()];
        assert_eq!(shortened(&["00000", "01220", "01220", "11110"], 12, 3), (2, after));
    }
}
