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
