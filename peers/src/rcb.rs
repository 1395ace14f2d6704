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
        let mut boxes: Vec<usize> = (0..grid.len()).collect();
        let mut owners = vec![0; grid.len()];
        let mut pieces = Pieces { grid, stamp: vec![0; grid.len()], now: 0, stack: Vec::new() };
        bisect(grid, loads, &mut boxes, 0, parts as u32, &mut owners, &mut pieces);
        Ok(owners)
    }
}

fn bisect(
    grid: &Grid,
    loads: &[f64],
    boxes: &mut [usize],
    first: u32,
    parts: u32,
    owners: &mut [u32],
    pieces: &mut Pieces,
) {
    if parts == 1 {
        boxes.iter().for_each(|&k| owners[k] = first);
        return;
    }
    let (mut lo, mut hi) = ([usize::MAX; 2], [0; 2]);
    for &k in boxes.iter() {
        let [i, j, _] = grid.coords(k);
        lo = [lo[0].min(i), lo[1].min(j)];
        hi = [hi[0].max(i), hi[1].max(j)];
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
        boxes.sort_unstable_by_key(|&k| {
            let c = grid.coords(k);
            (c[axis], if reversed { usize::MAX - c[1 - axis] } else { c[1 - axis] })
        });
        let prefix = prefix_sums(boxes.iter().map(|&k| loads[k]));
        let share = prefix[boxes.len()] * f64::from(left) / f64::from(parts);
        cut = nearest_cut(&prefix, share, min, max);
        if pieces.is_connected(&boxes[..cut]) && pieces.is_connected(&boxes[cut..]) {
            break;
        }
        if reversed {
            let row = |b: usize| grid.coords(boxes[b])[axis];
            let whole_rows = (min.max(1)..=max).filter(|&b| row(b - 1) != row(b));
            if let Some(b) = whole_rows.min_by(|&a, &b| (prefix[a] - share).abs().total_cmp(&(prefix[b] - share).abs()))
            {
                cut = b;
            }
        }
    }
    let (l, r) = boxes.split_at_mut(cut);
    bisect(grid, loads, l, first, left, owners, pieces);
    bisect(grid, loads, r, first + left, parts - left, owners, pieces);
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
    fn is_connected(&mut self, boxes: &[usize]) -> bool {
        let Some(&start) = boxes.first() else { return true };
        // Stamps: `now + 1` marks members, `now + 2` members reached.
        let (member, reached) = (self.now + 1, self.now + 2);
        self.now += 2;
        boxes.iter().for_each(|&k| self.stamp[k] = member);
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
