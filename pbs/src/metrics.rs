//! Quality measures of a mapping, exactly as docs/design.md defines them: charges, `max_avg` and its
//! lower bound, distance to optimal load (DOL), edge cut and migrations.

use crate::grid::Grid;

/// Sum in a fixed order: eight running sums, of the values at indices 0, 8, 16, …, 1, 9, …
/// and so on, added pairwise at the end. Every total in the crate goes through here so that
/// the same loads always give the same bits, whatever the caller; eight independent sums do
/// not wait on each other's adds, where one running sum waited on every add (an executor
/// sums 65,536 box loads on the critical path before each rebalancing).
pub fn ordered_sum(values: &[f64]) -> f64 {
    let mut lanes = [0.0f64; 8];
    let mut chunks = values.chunks_exact(8);
    for c in &mut chunks {
        for (lane, v) in lanes.iter_mut().zip(c) {
            *lane += v;
        }
    }
    for (lane, v) in lanes.iter_mut().zip(chunks.remainder()) {
        *lane += v;
    }
    let [a, b, c, d, e, f, g, h] = lanes;
    ((a + b) + (c + d)) + ((e + f) + (g + h))
}

/// Median of a sample (the mean of the two middle values for an even count; 0 when empty).
/// Reports give medians, never means of noisy timings.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut s = values.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        0.5 * (s[n / 2 - 1] + s[n / 2])
    }
}

/// Charge of every vCore: `Q_i = Σ_{owner(k)=i} q_k`.
///
/// Neighbouring boxes mostly share an owner, so one running sum per vCore makes every add
/// wait for the previous one; four sums over boxes `k mod 4`, added at the end in a fixed
/// order, run about four times faster (the balancer recharges after every step it tries).
///
/// # Panics
/// If `owner` and `loads` differ in length, or an owner is `vcores` or more.
pub fn charges(owner: &[u32], loads: &[f64], vcores: usize) -> Vec<f64> {
    assert_eq!(owner.len(), loads.len(), "charges need one owner per box load");
    let mut sum = ChargeSum::new(vcores);
    sum.add(owner, loads);
    sum.finish()
}

/// [`charges`] taken in pieces: the boxes handed to [`ChargeSum::add`] one range after
/// another, in box order, give the same sums to the bit as all at once, and a lower bound of
/// every charge in between (loads are never negative, and rounding never makes a sum of them
/// smaller).
pub(crate) struct ChargeSum {
    /// Per vCore, the sums over boxes `k mod LANES`.
    lanes: Vec<[f64; LANES]>,
    /// Boxes handed over that do not yet fill a group of `LANES`: owners, loads, count.
    carry: ([u32; LANES], [f64; LANES], usize),
}

const LANES: usize = 4;

impl ChargeSum {
    pub(crate) fn new(vcores: usize) -> ChargeSum {
        ChargeSum { lanes: vec![[0.0; LANES]; vcores], carry: ([0; LANES], [0.0; LANES], 0) }
    }

    /// Adds the boxes that follow the ones added so far.
    pub(crate) fn add(&mut self, mut owner: &[u32], mut loads: &[f64]) {
        debug_assert_eq!(owner.len(), loads.len());
        let (o, l, n) = &mut self.carry;
        if *n > 0 {
            let take = (LANES - *n).min(owner.len());
            o[*n..*n + take].copy_from_slice(&owner[..take]);
            l[*n..*n + take].copy_from_slice(&loads[..take]);
            *n += take;
            (owner, loads) = (&owner[take..], &loads[take..]);
            if *n < LANES {
                return;
            }
            for lane in 0..LANES {
                self.lanes[o[lane] as usize][lane] += l[lane];
            }
            *n = 0;
        }
        let mut owners = owner.chunks_exact(LANES);
        let mut values = loads.chunks_exact(LANES);
        for (o, l) in (&mut owners).zip(&mut values) {
            for lane in 0..LANES {
                self.lanes[o[lane] as usize][lane] += l[lane];
            }
        }
        let rest = owners.remainder().len();
        o[..rest].copy_from_slice(owners.remainder());
        l[..rest].copy_from_slice(values.remainder());
        *n = rest;
    }

    /// The largest charge over the boxes added so far, at most the final one.
    pub(crate) fn largest_so_far(&self) -> f64 {
        self.lanes.iter().map(combine).fold(0.0, f64::max)
    }

    /// The charges: the last boxes that fill no group of `LANES` go to the first lane.
    pub(crate) fn finish(mut self) -> Vec<f64> {
        let (o, l, n) = self.carry;
        for (&o, &l) in o[..n].iter().zip(&l[..n]) {
            self.lanes[o as usize][0] += l;
        }
        self.lanes.iter().map(combine).collect()
    }
}

fn combine(s: &[f64; LANES]) -> f64 {
    (s[0] + s[1]) + (s[2] + s[3])
}

/// `max_i Q_i / m`; 1.0 when all charges are zero or there is none (nothing to balance is
/// perfectly balanced); NaN where a charge is NaN.
pub fn max_avg(charges: &[f64]) -> f64 {
    let mean = ordered_sum(charges) / charges.len() as f64;
    if charges.is_empty() || mean <= 0.0 {
        return 1.0;
    }
    charges.iter().copied().fold(0.0, f64::max) / mean
}

/// `Σ_phase max_part load / Σ_phase mean part load` of `owner` for per-phase box loads
/// `phase_loads[p][k]` (Buch's vector loads: with a barrier after every phase, an iteration
/// costs the sum of each phase's largest part); 1.0 when nothing weighs anything.
///
/// # Panics
/// As [`charges`], for any phase: if its loads are not one per owner, or an owner is `parts`
/// or more.
///
/// ```
/// // Balanced in total, imbalanced in each phase: (3 + 3) / (2 + 2).
/// let owner = [0, 1];
/// assert_eq!(pbs::metrics::vector_max_avg(&owner, &[vec![3.0, 1.0], vec![1.0, 3.0]], 2), 1.5);
/// ```
pub fn vector_max_avg(owner: &[u32], phase_loads: &[Vec<f64>], parts: usize) -> f64 {
    let (mut max, mut mean) = (0.0, 0.0);
    for loads in phase_loads {
        let q = charges(owner, loads, parts);
        max += q.iter().copied().fold(0.0, f64::max);
        mean += ordered_sum(&q) / parts as f64;
    }
    if mean > 0.0 {
        max / mean
    } else {
        1.0
    }
}

/// `max(1, max_load / mean)`: no mapping can do better than this.
pub fn lower_bound_from(max_load: f64, mean: f64) -> f64 {
    if mean <= 0.0 {
        1.0
    } else {
        (max_load / mean).max(1.0)
    }
}

/// Extremes of the distance to optimal load `(Q_i − m)/m`: `(dol_max, dol_min)`; zeros when
/// all charges are zero or there is none (as [`max_avg`]'s 1.0).
pub fn dol_extremes(charges: &[f64]) -> (f64, f64) {
    let mean = ordered_sum(charges) / charges.len() as f64;
    if charges.is_empty() || mean <= 0.0 {
        return (0.0, 0.0);
    }
    let hi = charges.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let lo = charges.iter().copied().fold(f64::INFINITY, f64::min);
    ((hi - mean) / mean, (lo - mean) / mean)
}

/// Number of face-neighbour box pairs with different owners (the halo/communication proxy).
///
/// # Panics
/// If `owner` has fewer entries than `grid` has boxes.
pub fn edge_cut(grid: &Grid, owner: &[u32]) -> usize {
    let mut cut = 0;
    grid.for_each_neighbour_pair(|a, b| cut += usize::from(owner[a] != owner[b]));
    cut
}

/// Number of face-neighbour box pairs with different owners where both boxes carry load: the
/// faces a code whose empty boxes hold no data exchanges across (md's cell lists: a box
/// without particles sends nothing and needs nothing). [`edge_cut`] counts every face, which
/// is what a code whose every box holds data (a stencil) pays.
///
/// # Panics
/// If `owner` or `loads` has fewer entries than `grid` has boxes.
pub fn loaded_edge_cut(grid: &Grid, loads: &[f64], owner: &[u32]) -> usize {
    let mut cut = 0;
    grid.for_each_neighbour_pair(|a, b| cut += usize::from(owner[a] != owner[b] && loads[a] > 0.0 && loads[b] > 0.0));
    cut
}

/// The face-connected pieces of a mapping: per box, the index of its piece; per piece, its
/// owner and its number of boxes. Pieces are numbered in the order of their first box.
///
/// # Panics
/// If `owners` has fewer entries than `grid` has boxes (entries beyond are not looked at).
pub fn connected_pieces(grid: &Grid, owners: &[u32]) -> (Vec<u32>, Vec<(u32, usize)>) {
    JoinedRuns::new(grid, owners).pieces(grid, owners)
}

/// Whether no part of the mapping is in more than one face-connected piece: what
/// [`connected_pieces`] says without numbering every box.
///
/// # Panics
/// As [`connected_pieces`].
pub fn one_piece_each(grid: &Grid, owners: &[u32]) -> bool {
    !JoinedRuns::new(grid, owners).split(owners)
}

/// What [`connected_pieces`] returns: per box its piece, per piece its owner and box count.
pub(crate) type Pieces = (Vec<u32>, Vec<(u32, usize)>);

/// [`connected_pieces`] where some part is in more than one piece, `None` where none is: one
/// labelling for both answers.
pub(crate) fn pieces_if_split(grid: &Grid, owners: &[u32]) -> Option<Pieces> {
    let mut joined = JoinedRuns::new(grid, owners);
    joined.split(owners).then(|| joined.pieces(grid, owners))
}

/// The runs of one owner along each row of boxes, each joined to the runs of the same owner it
/// touches in the row and the layer below (union-find, each set's root its first run). A search
/// from box to box, finding each box's coordinates by division, took 4–6 times as long: 6 ns
/// a box.
struct JoinedRuns {
    /// Per run, its first box and the box after its last, in box order.
    runs: Vec<(usize, usize)>,
    parent: Vec<u32>,
}

impl JoinedRuns {
    fn new(grid: &Grid, owners: &[u32]) -> JoinedRuns {
        let [nx, ny, nz] = grid.dims();
        assert!(owners.len() >= grid.len(), "one owner per box");
        let rows = ny * nz;
        let mut runs: Vec<(usize, usize)> = Vec::new();
        let mut row_first = Vec::with_capacity(rows + 1);
        for r in 0..rows {
            row_first.push(runs.len());
            let row = &owners[r * nx..(r + 1) * nx];
            let mut from = 0;
            for i in 1..nx {
                if row[i] != row[i - 1] {
                    runs.push((r * nx + from, r * nx + i));
                    from = i;
                }
            }
            runs.push((r * nx + from, r * nx + nx));
        }
        row_first.push(runs.len());
        let mut joined = JoinedRuns { parent: (0..runs.len() as u32).collect(), runs };
        for r in 0..rows {
            let below = [(r % ny > 0).then(|| r - 1), (r / ny > 0).then(|| r - ny)];
            for b in below.into_iter().flatten() {
                // Two sorted lists of runs: walk both, joining overlapping runs of one owner.
                let (mut x, mut y) = (row_first[b], row_first[r]);
                while x < row_first[b + 1] && y < row_first[r + 1] {
                    let (xs, xe) = (joined.runs[x].0 - b * nx, joined.runs[x].1 - b * nx);
                    let (ys, ye) = (joined.runs[y].0 - r * nx, joined.runs[y].1 - r * nx);
                    if xs < ye && ys < xe && owners[joined.runs[x].0] == owners[joined.runs[y].0] {
                        joined.join(x, y);
                    }
                    if xe <= ye {
                        x += 1;
                    } else {
                        y += 1;
                    }
                }
            }
        }
        joined
    }

    /// Whether some owner has runs in two sets.
    fn split(&mut self, owners: &[u32]) -> bool {
        let mut seen = std::collections::HashSet::new();
        !(0..self.runs.len()).all(|i| self.find(i) != i || seen.insert(owners[self.runs[i].0]))
    }

    /// Per box the index of its piece, per piece its owner and box count (see
    /// [`connected_pieces`]).
    fn pieces(mut self, grid: &Grid, owners: &[u32]) -> Pieces {
        let mut piece = vec![u32::MAX; grid.len()];
        let mut pieces: Vec<(u32, usize)> = Vec::new();
        let mut piece_of_run = vec![0u32; self.runs.len()];
        for i in 0..self.runs.len() {
            let (from, to) = self.runs[i];
            let root = self.find(i);
            // The root is the set's first run, so its piece is numbered by now.
            let id = if root == i {
                pieces.push((owners[from], 0));
                (pieces.len() - 1) as u32
            } else {
                piece_of_run[root]
            };
            piece_of_run[i] = id;
            pieces[id as usize].1 += to - from;
            piece[from..to].fill(id);
        }
        (piece, pieces)
    }

    /// The root of run `x`'s set (halving the path on the way).
    fn find(&mut self, mut x: usize) -> usize {
        while self.parent[x] as usize != x {
            let up = self.parent[self.parent[x] as usize];
            self.parent[x] = up;
            x = up as usize;
        }
        x
    }

    /// Joins the sets of runs `x` and `y`, the higher root under the lower.
    fn join(&mut self, x: usize, y: usize) {
        let (rx, ry) = (self.find(x), self.find(y));
        if rx != ry {
            self.parent[rx.max(ry)] = rx.min(ry) as u32;
        }
    }
}

/// The parts (ids below `parts`) that hold no box of `owners`, in increasing order.
pub(crate) fn empty_parts(owners: &[u32], parts: usize) -> Vec<usize> {
    let mut holds = vec![false; parts];
    owners.iter().for_each(|&v| holds[v as usize] = true);
    (0..parts).filter(|&v| !holds[v]).collect()
}

/// Parts (ids below `parts`) whose boxes form more than one face-connected piece. Empty parts
/// do not count.
///
/// # Panics
/// If `owners` has fewer entries than `grid` has boxes, or an owner is `parts` or more.
pub fn disconnected_parts(grid: &Grid, owners: &[u32], parts: usize) -> usize {
    let mut count = vec![0usize; parts];
    connected_pieces(grid, owners).1.iter().for_each(|&(p, _)| count[p as usize] += 1);
    count.iter().filter(|&&c| c > 1).count()
}

/// Number of boxes whose owner differs between two mappings of the same grid.
///
/// # Panics
/// If the mappings differ in length.
pub fn migrations(before: &[u32], after: &[u32]) -> usize {
    assert_eq!(before.len(), after.len(), "migrations between mappings of one grid");
    before.iter().zip(after).filter(|(a, b)| a != b).count()
}

/// `next` relabelled so that its parts keep the ids of the `previous` parts they overlap most
/// (both give one part id below `parts` per box), for a partition computed from scratch,
/// whose ids are arbitrary: without it every box would change owner. Greedy on the largest
/// overlaps (ties to the lower ids; parts left over take the ids left over in order), then
/// pairs of ids swapped while a swap keeps more boxes in place, and never worse than keeping
/// `next`'s own ids. An error names a length or an id out of range.
///
/// ```
/// // The same two halves, named the other way round: nothing moved.
/// let before = [0, 0, 1, 1];
/// let after = pbs::metrics::match_labels(&before, &[1, 1, 0, 0], 2)?;
/// assert_eq!(after, vec![0, 0, 1, 1]);
/// # Ok::<(), pbs::Error>(())
/// ```
pub fn match_labels(previous: &[u32], next: &[u32], parts: usize) -> crate::Result<Vec<u32>> {
    let label = matched_ids(previous, next, parts)?;
    Ok(next.iter().map(|&p| label[p as usize]).collect())
}

/// Old ids for new parts `0..parts`, by part, greedily: the pairs of `overlaps` (`((new, old),
/// boxes in both)`, each pair once, `old < parts`) with the most boxes first (ties: the lowest
/// new part, then the lowest old id), each new part and old id once; new parts left over take
/// the ids left over, in order. Sorts `overlaps` in that order. A permutation of `0..parts`.
pub(crate) fn largest_overlaps_first(overlaps: &mut [((u32, u32), usize)], parts: usize) -> Vec<u32> {
    overlaps.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut label = vec![u32::MAX; parts];
    let mut taken = vec![false; parts];
    for &((new, old), _) in overlaps.iter() {
        if label[new as usize] == u32::MAX && !taken[old as usize] {
            label[new as usize] = old;
            taken[old as usize] = true;
        }
    }
    let mut free = (0..parts as u32).filter(|&id| !taken[id as usize]);
    for l in &mut label {
        if *l == u32::MAX {
            *l = free.next().expect("as many free ids as unlabelled parts");
        }
    }
    label
}

/// The id [`match_labels`] gives each part of `next`, by part: a permutation of `0..parts`.
pub(crate) fn matched_ids(previous: &[u32], next: &[u32], parts: usize) -> crate::Result<Vec<u32>> {
    let bad = |name, value: String, reason| Err(crate::Error::Parameter { name, value, reason });
    if previous.len() != next.len() {
        return bad("next", format!("{} part ids", next.len()), "must give one part id per box of `previous`");
    }
    for (name, ids) in [("previous", previous), ("next", next)] {
        if let Some(&p) = ids.iter().find(|&&p| p as usize >= parts) {
            return bad(name, format!("part id {p}"), "must be below the part count");
        }
    }
    // Counted by runs of boxes that share both ids (rows of one part in both partitions), one
    // map entry a run rather than one a box.
    let mut overlap = std::collections::HashMap::<(u32, u32), usize>::new();
    let mut pairs = previous.iter().zip(next).map(|(&old, &new)| (new, old));
    if let Some(mut run) = pairs.next() {
        let mut len = 1;
        for pair in pairs {
            if pair == run {
                len += 1;
            } else {
                *overlap.entry(run).or_default() += len;
                (run, len) = (pair, 1);
            }
        }
        *overlap.entry(run).or_default() += len;
    }
    let kept = |new: usize, old: u32| overlap.get(&(new as u32, old)).copied().unwrap_or(0);
    let mut pairs: Vec<((u32, u32), usize)> = overlap.iter().map(|(&k, &v)| (k, v)).collect();
    let mut label = largest_overlaps_first(&mut pairs, parts);
    // Per new part the old ids it overlaps, per old id the new parts overlapping it.
    let (mut olds, mut news) = (vec![Vec::new(); parts], vec![Vec::new(); parts]);
    for &((new, old), _) in &pairs {
        olds[new as usize].push(old);
        news[old as usize].push(new as usize);
    }
    let mut holder = vec![0usize; parts]; // the new part that has each id
    for (new, &old) in label.iter().enumerate() {
        holder[old as usize] = new;
    }
    // Greedy can lose to other pairings (one large overlap taken first can leave two parts
    // with none): swap pairs of ids, in the order (a, b > a), while that keeps more boxes, a
    // few passes at most. A swap can only gain where `a` overlaps `b`'s id or `b` overlaps
    // `a`'s, so only those `b` are visited: the same swaps as visiting every pair, in
    // O(overlaps) instead of O(parts²).
    for _ in 0..8 {
        let mut improved = false;
        for a in 0..parts {
            let mut b = a;
            loop {
                let candidates =
                    olds[a].iter().map(|&o| holder[o as usize]).chain(news[label[a] as usize].iter().copied());
                let Some(c) = candidates.filter(|&c| c > b).min() else { break };
                b = c;
                if kept(a, label[b]) + kept(b, label[a]) > kept(a, label[a]) + kept(b, label[b]) {
                    label.swap(a, b);
                    holder[label[a] as usize] = a;
                    holder[label[b] as usize] = b;
                    improved = true;
                }
            }
        }
        if !improved {
            break;
        }
    }
    let total = |l: &dyn Fn(usize) -> u32| (0..parts).map(|p| kept(p, l(p))).sum::<usize>();
    if total(&|p| p as u32) > total(&|p| label[p]) {
        return Ok((0..parts as u32).collect());
    }
    Ok(label)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// No charge at all reads balanced, as charges that are all zero do (before: NaN); a NaN
    /// charge still shows.
    #[test]
    fn no_charge_reads_balanced_and_a_nan_charge_does_not() {
        assert_eq!(max_avg(&[]), 1.0);
        assert_eq!(dol_extremes(&[]), (0.0, 0.0));
        assert!(max_avg(&[f64::NAN, 1.0]).is_nan());
    }

    /// Mappings of different lengths are not of one grid (before: the boxes past the shorter
    /// went uncounted, 0 migrations here).
    #[test]
    #[should_panic(expected = "migrations between mappings of one grid")]
    fn migrations_between_mappings_of_different_lengths_panic() {
        migrations(&[0, 1], &[0]);
    }

    /// An order cut into no part (before: every box in part 0).
    #[test]
    #[should_panic(expected = "0 parts of an order of 3 boxes")]
    fn an_order_cut_into_no_part_panics() {
        crate::bisection::split_order(&[0, 1, 2], &[1.0; 3], 0);
    }

    #[test]
    fn charges_and_imbalance() {
        let q = charges(&[0, 1, 1, 0], &[1.0, 2.0, 3.0, 2.0], 2);
        assert_eq!(q, vec![3.0, 5.0]);
        assert_eq!(max_avg(&q), 1.25);
        assert_eq!(dol_extremes(&q), (0.25, -0.25));
        assert_eq!(max_avg(&[0.0, 0.0]), 1.0);
        // Seven boxes: one chunk of four lanes and a remainder of three.
        let owner = [2, 2, 0, 1, 1, 2, 0];
        let loads = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];
        assert_eq!(charges(&owner, &loads, 3), vec![68.0, 24.0, 35.0]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        /// Boxes handed over in ranges of any lengths give the charges of all at once, to the
        /// bit, and never more than them on the way.
        #[test]
        fn charges_in_pieces_are_charges_at_once(
            loads in proptest::collection::vec(0.0f64..1e6, 0..60),
            cuts in proptest::collection::vec(0usize..60, 0..8),
            parts in 1u32..5,
        ) {
            let owner: Vec<u32> = (0..loads.len() as u32).map(|k| (k * 7 + k / 3) % parts).collect();
            let want = charges(&owner, &loads, parts as usize);
            // The order of the sums, spelled out: box k in lane k mod 4, the boxes after the
            // last group of four in lane 0, the lanes added pairwise.
            let mut lanes = vec![[0.0f64; 4]; parts as usize];
            let grouped = loads.len() / 4 * 4;
            for k in 0..loads.len() {
                lanes[owner[k] as usize][if k < grouped { k % 4 } else { 0 }] += loads[k];
            }
            let spelled: Vec<f64> = lanes.iter().map(|s| (s[0] + s[1]) + (s[2] + s[3])).collect();
            prop_assert_eq!(want.iter().map(|q| q.to_bits()).collect::<Vec<_>>(), spelled.iter().map(|q| q.to_bits()).collect::<Vec<_>>());
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(loads.len())).collect();
            cuts.push(0);
            cuts.push(loads.len());
            cuts.sort_unstable();
            let mut sum = ChargeSum::new(parts as usize);
            for c in cuts.windows(2) {
                sum.add(&owner[c[0]..c[1]], &loads[c[0]..c[1]]);
                let largest = want.iter().copied().fold(0.0, f64::max);
                prop_assert!(sum.largest_so_far() <= largest);
            }
            let got = sum.finish();
            prop_assert_eq!(got.iter().map(|q| q.to_bits()).collect::<Vec<_>>(), want.iter().map(|q| q.to_bits()).collect::<Vec<_>>());
        }
    }

    #[test]
    #[should_panic(expected = "one owner per box load")]
    fn charges_refuse_a_load_without_an_owner() {
        charges(&[0, 1], &[1.0, 2.0, 3.0], 2);
    }

    #[test]
    fn edge_cut_counts_boundary_pairs() {
        let g = Grid::new(2, 2).unwrap();
        // left column owner 0, right column owner 1: two horizontal pairs are cut.
        assert_eq!(edge_cut(&g, &[0, 1, 0, 1]), 2);
        assert_eq!(edge_cut(&g, &[0, 0, 0, 0]), 0);
        assert_eq!(edge_cut(&g, &[0, 1, 1, 0]), 4);
    }

    /// Only the faces between two boxes that both carry load count; on a map where every box
    /// does, the loaded cut is the edge cut.
    #[test]
    fn loaded_edge_cut_counts_faces_between_loaded_boxes() {
        // 3 × 2 boxes, loads
        //   1 0 2
        //   3 4 0
        // owners
        //   0 1 1
        //   0 0 1
        let g = Grid::new(3, 2).unwrap();
        let (loads, owners) = ([1.0, 0.0, 2.0, 3.0, 4.0, 0.0], [0, 1, 1, 0, 0, 1]);
        // The three cut faces, (0,1), (1,4) and (4,5), each have an empty box on one side.
        assert_eq!(edge_cut(&g, &owners), 3);
        assert_eq!(loaded_edge_cut(&g, &loads, &owners), 0);
        // Box 1 loaded now: (0,1) and (1,4) join the loaded cut; (4,5) stays out.
        let loads = [1.0, 5.0, 2.0, 3.0, 4.0, 0.0];
        assert_eq!(loaded_edge_cut(&g, &loads, &owners), 2);
        assert_eq!(loaded_edge_cut(&g, &[1.0; 6], &owners), edge_cut(&g, &owners));
        // In 3D the faces across layers count too.
        let g = Grid::new_3d(1, 1, 3).unwrap();
        assert_eq!(loaded_edge_cut(&g, &[1.0, 1.0, 0.0], &[0, 1, 0]), 1);
    }

    #[test]
    fn median_of_odd_even_and_empty_samples() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[7.0]), 7.0);
        assert_eq!(median(&[5.0, 3.0, 9.0, 1.0, 4.0]), 4.0);
    }

    /// The sum of exact values, and the documented order where the order shows: the values at
    /// 0 and 8 share a lane and 1e16 + 1 rounds back to 1e16, so the 1 at index 8 is lost,
    /// where a sum from left to right cancels the 1e16s first and keeps both ones.
    #[test]
    fn ordered_sums_add_in_eight_lanes_then_pairwise() {
        let exact: Vec<f64> = (1..=19).map(f64::from).collect();
        assert_eq!(ordered_sum(&exact), 190.0);
        assert_eq!(ordered_sum(&[]), 0.0);
        let mut values = vec![0.0; 9];
        (values[0], values[1], values[2], values[8]) = (1e16, -1e16, 1.0, 1.0);
        assert_eq!(values.iter().sum::<f64>(), 2.0);
        assert_eq!(ordered_sum(&values), 1.0);
        // Each lane's total enters once: eight lanes of distinct powers of two.
        let powers: Vec<f64> = (0..8).map(|i| f64::from(1u32 << i)).collect();
        assert_eq!(ordered_sum(&powers), 255.0);
    }

    /// A charge sum taken in groups of four boxes knows the largest charge so far exactly.
    #[test]
    fn the_largest_charge_so_far_is_the_largest_of_the_boxes_added() {
        let mut sum = ChargeSum::new(3);
        sum.add(&[0, 0, 1, 1], &[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(sum.largest_so_far(), 7.0);
        sum.add(&[2, 2, 2, 0], &[5.0, 5.0, 5.0, 1.0]);
        assert_eq!(sum.largest_so_far(), 15.0);
        assert_eq!(sum.finish(), vec![4.0, 7.0, 15.0]);
    }

    /// Buch's vector imbalance: the sum over phases of the largest part over the sum of the
    /// means, which one scalar charge per part cannot see.
    #[test]
    fn vector_max_avg_sums_each_phase_s_largest_part() {
        let owner = [0, 1, 2, 2];
        // Phase 1: parts 4, 2, 0 (max 4, mean 2); phase 2: parts 0, 1, 5 (max 5, mean 2).
        let phases = [vec![4.0, 2.0, 0.0, 0.0], vec![0.0, 1.0, 2.0, 3.0]];
        assert_eq!(vector_max_avg(&owner, &phases, 3), 9.0 / 4.0);
        // The same totals in one phase: parts 4, 3, 5, max 5 over a mean of 4.
        let total: Vec<f64> = (0..4).map(|k| phases[0][k] + phases[1][k]).collect();
        assert_eq!(vector_max_avg(&owner, &[total], 3), 5.0 / 4.0);
        assert_eq!(vector_max_avg(&owner, &[vec![0.0; 4]], 3), 1.0);
        assert_eq!(vector_max_avg(&owner, &[], 3), 1.0);
    }

    #[test]
    fn the_lower_bound_is_the_heaviest_box_or_balance() {
        assert_eq!(lower_bound_from(3.0, 2.0), 1.5);
        assert_eq!(lower_bound_from(1.0, 2.0), 1.0);
        assert_eq!(lower_bound_from(5.0, 0.0), 1.0);
    }

    #[test]
    fn empty_parts_are_the_ids_no_box_has() {
        assert_eq!(empty_parts(&[0, 2, 2], 4), vec![1, 3]);
        assert_eq!(empty_parts(&[1, 0], 2), Vec::<usize>::new());
        assert_eq!(empty_parts(&[], 2), vec![0, 1]);
    }

    /// Pieces only where some part is split, and then the pieces [`connected_pieces`] gives.
    #[test]
    fn pieces_if_split_answers_only_for_split_parts() {
        let g = Grid::new(3, 2).unwrap();
        assert_eq!(pieces_if_split(&g, &[0, 0, 0, 1, 1, 1]), None);
        let split = [0, 1, 0, 1, 1, 1];
        assert_eq!(pieces_if_split(&g, &split), Some(connected_pieces(&g, &split)));
        assert_eq!(connected_pieces(&g, &split).1, vec![(0, 1), (1, 4), (0, 1)]);
    }

    #[test]
    fn parts_in_pieces_are_counted_once_each() {
        let g = Grid::new(3, 2).unwrap();
        // part 0: two boxes apart; part 1: a connected L; part 2: empty
        assert_eq!(disconnected_parts(&g, &[0, 1, 0, 1, 1, 1], 3), 1);
        assert_eq!(disconnected_parts(&g, &[0, 0, 0, 1, 1, 1], 2), 0);
        // a checkerboard: each part in three pieces counts once
        assert_eq!(disconnected_parts(&g, &[0, 1, 0, 1, 0, 1], 2), 2);
        // the pieces of the first mapping, numbered by their first box (rows of 3)
        let (piece, pieces) = connected_pieces(&g, &[0, 1, 0, 1, 1, 1]);
        assert_eq!(piece, vec![0, 1, 2, 1, 1, 1]);
        assert_eq!(pieces, vec![(0, 1), (1, 4), (0, 1)]);
    }

    #[test]
    fn migrations_count_changed_owners() {
        assert_eq!(migrations(&[0, 1, 2], &[0, 2, 2]), 1);
    }

    #[test]
    fn matching_beats_the_greedy_trap() {
        // Overlaps new0/old0 = 5, new1/old1 = 5, new0/old1 = 6: greedy alone pairs new0 with
        // old1 first and keeps 6 boxes; keeping the ids keeps 10.
        let before: Vec<u32> = [vec![0; 5], vec![1; 5], vec![1; 6]].concat();
        let next: Vec<u32> = [vec![0; 5], vec![1; 5], vec![0; 6]].concat();
        let m = match_labels(&before, &next, 2).unwrap();
        assert_eq!(migrations(&before, &m), 6);
    }

    #[test]
    fn matching_undoes_a_renaming_and_counts_real_moves_only() {
        let before = [0, 0, 1, 1, 2, 2];
        let renamed = [2, 2, 0, 0, 1, 1];
        assert_eq!(match_labels(&before, &renamed, 3).unwrap(), before.to_vec());
        // one box moved from the first part to the second, and all renamed
        let moved = [2, 0, 0, 0, 1, 1];
        let m = match_labels(&before, &moved, 3).unwrap();
        assert_eq!(migrations(&before, &m), 1);
    }

    /// Where the largest overlaps first, and no swap of two ids after them, keep fewer boxes than
    /// `next`'s own ids do (a renaming of three ids in a cycle), its own ids are kept: overlaps
    /// (new, old) of 10 boxes (0, 1) and 9 (1, 2) win the greedy pairing, 19 boxes in place,
    /// where the diagonal keeps 24.
    #[test]
    fn matching_never_keeps_fewer_boxes_than_the_ids_as_they_are() {
        let runs = [((0, 1), 10), ((1, 2), 9), ((0, 0), 8), ((1, 1), 8), ((2, 2), 8)];
        let (mut before, mut next) = (Vec::new(), Vec::new());
        for ((new, old), n) in runs {
            before.extend(std::iter::repeat_n(old, n));
            next.extend(std::iter::repeat_n(new, n));
        }
        let m = match_labels(&before, &next, 3).unwrap();
        assert_eq!(m, next);
        assert_eq!(before.len() - migrations(&before, &m), 24);
    }

    /// A swap that pays only after an earlier one: the first pass over the pairs leaves 4 of
    /// the 9 boxes in place, a second finds the best renaming, 5 (no other keeps more).
    #[test]
    fn matching_swaps_until_a_pass_finds_nothing() {
        let before = [2, 0, 2, 1, 0, 1, 2, 0, 0];
        let next = [1, 1, 0, 1, 0, 2, 0, 1, 0];
        let m = match_labels(&before, &next, 3).unwrap();
        assert_eq!(m, vec![0, 0, 2, 0, 2, 1, 2, 0, 2]);
        assert_eq!(migrations(&before, &m), 4);
    }

    #[test]
    fn matching_names_bad_input() {
        let e = match_labels(&[0, 1], &[0], 2).unwrap_err().to_string();
        assert!(e.contains("next") && e.contains("1 part ids"), "{e}");
        let e = match_labels(&[0, 2], &[0, 1], 2).unwrap_err().to_string();
        assert!(e.contains("previous") && e.contains("part id 2"), "{e}");
        let e = match_labels(&[0, 1], &[0, 5], 2).unwrap_err().to_string();
        assert!(e.contains("next") && e.contains("part id 5"), "{e}");
    }

    /// The swap passes over every pair (a, b > a), as `match_labels` ran before it visited only
    /// the pairs that overlap: the reference the faster pass must agree with.
    fn swaps_over_every_pair(previous: &[u32], next: &[u32], parts: usize) -> Vec<u32> {
        let mut overlap = std::collections::HashMap::<(u32, u32), usize>::new();
        for (&old, &new) in previous.iter().zip(next) {
            *overlap.entry((new, old)).or_default() += 1;
        }
        let kept = |new: usize, old: u32| overlap.get(&(new as u32, old)).copied().unwrap_or(0);
        let mut pairs: Vec<((u32, u32), usize)> = overlap.iter().map(|(&k, &v)| (k, v)).collect();
        pairs.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let (mut label, mut taken) = (vec![u32::MAX; parts], vec![false; parts]);
        for ((new, old), _) in pairs {
            if label[new as usize] == u32::MAX && !taken[old as usize] {
                label[new as usize] = old;
                taken[old as usize] = true;
            }
        }
        let mut free = (0..parts as u32).filter(|&id| !taken[id as usize]);
        label.iter_mut().filter(|l| **l == u32::MAX).for_each(|l| *l = free.next().unwrap());
        for _ in 0..8 {
            let mut improved = false;
            for a in 0..parts {
                for b in a + 1..parts {
                    if kept(a, label[b]) + kept(b, label[a]) > kept(a, label[a]) + kept(b, label[b]) {
                        label.swap(a, b);
                        improved = true;
                    }
                }
            }
            if !improved {
                break;
            }
        }
        let total = |l: &dyn Fn(usize) -> u32| (0..parts).map(|p| kept(p, l(p))).sum::<usize>();
        if total(&|p| p as u32) > total(&|p| label[p]) {
            return next.to_vec();
        }
        next.iter().map(|&p| label[p as usize]).collect()
    }

    /// The pieces by a search from box to box (the implementation before the runs): the
    /// oracle of the property test below.
    fn pieces_by_search(grid: &Grid, owners: &[u32]) -> (Vec<u32>, Vec<(u32, usize)>) {
        let mut piece = vec![u32::MAX; owners.len()];
        let mut pieces = Vec::new();
        let mut stack = Vec::new();
        for k in 0..owners.len() {
            if piece[k] != u32::MAX {
                continue;
            }
            let (id, owner) = (pieces.len() as u32, owners[k]);
            piece[k] = id;
            stack.push(k);
            let mut size = 0;
            while let Some(b) = stack.pop() {
                size += 1;
                grid.for_each_neighbour(b, |n| {
                    if piece[n] == u32::MAX && owners[n] == owner {
                        piece[n] = id;
                        stack.push(n);
                    }
                });
            }
            pieces.push((owner, size));
        }
        (piece, pieces)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(96))]
        /// The runs' labelling is the search's, piece for piece, and `one_piece_each` says what
        /// it says, on 1D, 2D and 3D grids with owners drawn from a few ids (many pieces; with
        /// two ids, shapes whose runs meet only far from where they start).
        #[test]
        fn pieces_by_runs_are_the_pieces_by_search(
            nx in 1usize..20,
            ny in 1usize..20,
            nz in 1usize..4,
            ids in 1u32..5,
            seed in 0u64..u64::MAX,
        ) {
            let grid = Grid::new_3d(nx, ny, nz).unwrap();
            let mut rng = crate::rng::SplitMix64::new(seed);
            let owners: Vec<u32> = (0..grid.len()).map(|_| (rng.next_u64() % u64::from(ids)) as u32).collect();
            let (by_runs, by_search) = (connected_pieces(&grid, &owners), pieces_by_search(&grid, &owners));
            let mut parts = std::collections::HashSet::new();
            proptest::prop_assert_eq!(one_piece_each(&grid, &owners), by_search.1.iter().all(|&(p, _)| parts.insert(p)));
            proptest::prop_assert_eq!(by_runs, by_search);
        }

        /// Matching renames whole parts only (a bijection on ids: the part sizes are kept),
        /// never counts more moves than no matching would, and swaps exactly as a pass over
        /// every pair of parts would.
        #[test]
        fn matching_is_a_renaming_that_never_adds_moves(
            parts in 1usize..24,
            seed in 0u64..1000,
            boxes in 1usize..200,
            spread in 1usize..4,
            run in 1usize..8,
        ) {
            let mut rng = crate::rng::SplitMix64::new(seed);
            // Each old part split between two new ids (`spread` 1: anywhere instead), as
            // repartitions that shift every boundary do: chains of overlaps in which the
            // greedy pairing can lose and the swaps matter. Old parts come in runs of `run`
            // boxes, as rows of a part do, which the overlaps are counted by.
            let before: Vec<u32> = (0..boxes)
                .scan(0, |part, k| {
                    if k % run == 0 {
                        *part = (rng.next_f64() * parts as f64) as u32;
                    }
                    Some(*part)
                })
                .collect();
            let mut draw = |n: usize| (rng.next_f64() * n as f64) as u32;
            let (first, second, share): (Vec<u32>, Vec<u32>, Vec<u32>) =
                ((0..parts).map(|_| draw(parts)).collect(), (0..parts).map(|_| draw(parts)).collect(), (0..parts).map(|_| draw(10)).collect());
            let next: Vec<u32> = before
                .iter()
                .map(|&p| match (spread, draw(10) < share[p as usize]) {
                    (1, _) => draw(parts),
                    (_, true) => first[p as usize],
                    _ => second[p as usize],
                })
                .collect();
            let m = match_labels(&before, &next, parts).unwrap();
            let sizes = |o: &[u32]| {
                let mut s = vec![0usize; parts];
                o.iter().for_each(|&p| s[p as usize] += 1);
                s.sort_unstable();
                s
            };
            proptest::prop_assert_eq!(sizes(&m), sizes(&next));
            // The same grouping: boxes together in `next` are together in `m`.
            for a in 0..boxes {
                for b in 0..boxes {
                    proptest::prop_assert_eq!(next[a] == next[b], m[a] == m[b]);
                }
            }
            proptest::prop_assert!(migrations(&before, &m) <= migrations(&before, &next));
            proptest::prop_assert_eq!(&m, &swaps_over_every_pair(&before, &next, parts));
        }
    }
}
