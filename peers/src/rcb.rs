//! `rcb`: k-way recursive coordinate bisection (Berger & Bokhari, IEEE Trans. Computers 1987),
//! for any part count. Each bisection splits the part count in two halves `⌊k/2⌋ + ⌈k/2⌉`,
//! orders the boxes along the longer side of their bounding box (rows broken by the other
//! coordinate, so a cut may step once mid-row) and cuts where the running load is nearest to
//! the left half's share. A cut that would leave a side in two pieces (a step that touches the
//! next row only at a corner) is retried with the rows ordered the other way, then moved to
//! the nearest boundary between whole rows.

use pbs::Grid;

use crate::cut::{nearest_cut, prefix_sums};
use crate::{check_input, Partitioner, Result};

/// k-way RCB. It has no settings: it cuts where the running load is nearest to the share.
///
/// ```
/// use pbs_peers::{KwayRcb, Partitioner};
/// let grid = pbs::Grid::new(9, 3)?;
/// let parts = KwayRcb.partition(&grid, &vec![1.0; 27], 3)?;
/// assert_eq!(&parts[..9], &[0, 0, 0, 1, 1, 1, 2, 2, 2]); // three 3×3 blocks
/// # Ok::<(), pbs_peers::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct KwayRcb;

impl Partitioner for KwayRcb {
    fn name(&self) -> &str {
        "rcb"
    }

    fn partition(&mut self, grid: &Grid, loads: &[f64], parts: usize) -> Result<Vec<u32>> {
        check_input(self.name(), grid, loads, parts)?;
        // Each box as (column, row, index): the sorts read coordinates without dividing.
        let mut boxes: Vec<[u32; 3]> = (0..grid.len())
            .map(|k| {
                let [i, j, _] = grid.coords(k);
                [i as u32, j as u32, k as u32]
            })
            .collect();
        let mut owners = vec![0; grid.len()];
        let mut pieces = Pieces { grid, stamp: vec![0; grid.len()], now: 0, stack: Vec::new() };
        bisect(loads, &mut boxes, 0, parts as u32, &mut owners, &mut pieces);
        Ok(owners)
    }
}

fn bisect(loads: &[f64], boxes: &mut [[u32; 3]], first: u32, parts: u32, owners: &mut [u32], pieces: &mut Pieces) {
    if parts == 1 {
        boxes.iter().for_each(|b| owners[b[2] as usize] = first);
        return;
    }
    let (mut lo, mut hi) = ([u32::MAX; 2], [0; 2]);
    for b in boxes.iter() {
        lo = [lo[0].min(b[0]), lo[1].min(b[1])];
        hi = [hi[0].max(b[0]), hi[1].max(b[1])];
    }
    let axis = usize::from(hi[1] - lo[1] > hi[0] - lo[0]);
    let left = parts / 2;
    // Each side keeps at least one box per part.
    let (min, max) = (left as usize, boxes.len() - (parts - left) as usize);
    let mut cut = 0;
    // A cut mid-row leaves a step; after earlier steps, the step may touch the next row only
    // diagonally in one direction along the row, so both directions are tried, then a cut
    // between whole rows.
    for reversed in [false, true] {
        boxes.sort_unstable_by_key(|b| (b[axis], if reversed { u32::MAX - b[1 - axis] } else { b[1 - axis] }));
        let prefix = prefix_sums(boxes.iter().map(|b| loads[b[2] as usize]));
        let share = prefix[boxes.len()] * f64::from(left) / f64::from(parts);
        cut = nearest_cut(&prefix, share, min, max);
        if pieces.is_connected(&boxes[..cut]) && pieces.is_connected(&boxes[cut..]) {
            break;
        }
        if reversed {
            let whole_rows = (min.max(1)..=max).filter(|&b| boxes[b - 1][axis] != boxes[b][axis]);
            if let Some(b) = whole_rows.min_by(|&a, &b| (prefix[a] - share).abs().total_cmp(&(prefix[b] - share).abs()))
            {
                cut = b;
            }
        }
    }
    let (l, r) = boxes.split_at_mut(cut);
    bisect(loads, l, first, left, owners, pieces);
    bisect(loads, r, first + left, parts - left, owners, pieces);
}

/// A flood fill restricted to a set of boxes, with a stamp per box so that nothing is
/// cleared between calls.
struct Pieces<'g> {
    grid: &'g Grid,
    stamp: Vec<u32>,
    now: u32,
    stack: Vec<usize>,
}

impl Pieces<'_> {
    /// Whether `boxes` form one 4-connected piece (an empty set does).
    fn is_connected(&mut self, boxes: &[[u32; 3]]) -> bool {
        let Some(&[_, _, start]) = boxes.first() else { return true };
        let start = start as usize;
        // Stamps: `now + 1` marks members, `now + 2` members reached.
        let (member, reached) = (self.now + 1, self.now + 2);
        self.now += 2;
        boxes.iter().for_each(|b| self.stamp[b[2] as usize] = member);
        self.stamp[start] = reached;
        self.stack.push(start);
        let mut count = 0;
        while let Some(b) = self.stack.pop() {
            count += 1;
            let (stamp, stack) = (&mut self.stamp, &mut self.stack);
            self.grid.for_each_neighbour(b, |n| {
                if stamp[n] == member {
                    stamp[n] = reached;
                    stack.push(n);
                }
            });
        }
        count == boxes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quality;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn parts_are_connected_non_empty_and_the_balance_is_bounded(
            nx in 1usize..30, ny in 1usize..30, parts in 1usize..40, seed in 0u64..1000,
        ) {
            let grid = Grid::new(nx, ny).unwrap();
            prop_assume!(parts <= grid.len());
            let mut rng = pbs::rng::SplitMix64::new(seed);
            let loads: Vec<f64> = (0..grid.len()).map(|_| rng.next_f64()).collect();
            let owners = KwayRcb.partition(&grid, &loads, parts).unwrap();
            let q = quality::measure(&grid, &loads, &owners, parts);
            prop_assert_eq!(q.empty_parts, 0);
            prop_assert_eq!(q.disconnected_parts, 0);
            // Each cut errs by at most one box's load: the part charges stay within
            // depth × max load of their share.
            let depth = (parts as f64).log2().ceil() + 1.0;
            let max = loads.iter().copied().fold(0.0, f64::max);
            let mean = loads.iter().sum::<f64>() / parts as f64;
            prop_assert!(q.max_avg * mean <= mean + depth * max + 1e-9, "{:?}", q);
        }
    }
}
