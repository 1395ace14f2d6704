//! Step 1 of the refinement: while the most charged part is above the target, hand one of its
//! boxes to a neighbour; when no single box can go, a chain of hops, a strip of empty boxes, or a
//! trade (the module documentation of [`super`] gives the order).

use super::{faces_in, trace_back, State};

/// Border boxes from which the balance pass makes several moves per search of a border.
const BATCH_FROM: usize = 512;

/// Empty boxes a strip of [`State::strip`] crosses at most.
const STRIP_DEPTH: usize = 16;

/// Strips of empty boxes [`State::move_path`] tries before it gives up on a part.
const PATH_TRIES: usize = 8;

/// Pairs of boxes [`State::move_swap`] tries before it gives up on a part.
const SWAP_TRIES: usize = 16;

/// A candidate move of the balance pass.
struct Candidate {
    tier: u8,
    key: (f64, f64),
    b: u32,
    to: u32,
}

impl State<'_, '_> {
    pub(super) fn balance(&mut self, target: f64, max_moves: usize) -> usize {
        let mut moves = 0;
        let mut candidates = Vec::new();
        while moves < max_moves {
            let p = self.heaviest();
            let cp = self.charge[p];
            if cp <= target || self.count[p] <= 1 {
                break;
            }
            candidates.clear();
            let border = self.border(p);
            for &b in &border {
                let q = self.loads[b as usize];
                if q <= 0.0 {
                    continue;
                }
                let (near, len) = self.neighbour_parts(b as usize);
                let own = faces_in(&near[..len], p as u32);
                for &(to, count) in &near[..len] {
                    let after = self.charge[to as usize] + q;
                    if to as usize == p || after >= cp {
                        continue;
                    }
                    // Edges this move adds to the cut (negative: removes).
                    let added = f64::from(own) - f64::from(count);
                    let pair = after.max(cp - q);
                    let (tier, key) = if after <= target { (0, (added, pair)) } else { (1, (pair, added)) };
                    candidates.push(Candidate { tier, key, b, to });
                }
            }
            let border_len = border.len();
            self.give_back(p, border);
            let order = |x: &Candidate, y: &Candidate| {
                (x.tier, x.key.0, x.key.1, x.b, x.to)
                    .partial_cmp(&(y.tier, y.key.0, y.key.1, y.b, y.to))
                    .expect("charges and loads are finite")
            };
            // The first move in that order that may go: the least, mostly.
            let mut batch = 0;
            let mut first_tier = 0;
            while let Some(i) = (0..candidates.len()).min_by(|&i, &j| order(&candidates[i], &candidates[j])) {
                let c = candidates.swap_remove(i);
                if self.may_leave(c.b as usize) {
                    self.move_box(c.b as usize, c.to);
                    (batch, first_tier) = (1, c.tier);
                    break;
                }
            }
            if batch == 1 && first_tier == 0 && border_len >= BATCH_FROM {
                // On a long border, while `p` stays above the target, the next moves that add
                // no cut edge and still leave their receiver within it: a search of a long
                // border per move made refining a 1000² grid take seconds (on short ones a
                // search after each move cuts fewer edges).
                candidates.retain(|c| c.tier == 0 && c.key.0 <= 0.0);
                candidates.sort_by(order);
                for c in &candidates {
                    let (b, to) = (c.b as usize, c.to as usize);
                    if !(self.charge[p] > target && moves + batch < max_moves) {
                        break;
                    }
                    let after = self.charge[to] + self.loads[b];
                    // Moves here only hand boxes of `p` to other parts, so a box still in `p`
                    // touches `to` as it did at the search, and `after <= target < charge[p]`.
                    let still = self.owners[b] as usize == p;
                    if still && after <= target && self.may_leave(b) {
                        self.move_box(b, c.to);
                        batch += 1;
                    }
                }
            }
            if batch > 0 {
                moves += batch;
            } else if let Some(chain) = self.move_chain(p, cp) {
                moves += chain;
            } else if let Some(path) = self.move_path(p, cp) {
                moves += path;
            } else if let Some(swap) = self.move_swap(p, cp, target) {
                moves += swap;
            } else {
                break;
            }
        }
        moves
    }

    /// When no single box of `p` can go: a chain of hops through neighbouring parts, `p` to
    /// `x₁` to … to a part with room, each part passing on one loaded box (with the strip of
    /// empty boxes in front of it, if it has no loaded box on that border) for the one it
    /// receives, and staying under `cp` or no heavier than it was (a part tied with `p` at `cp`
    /// may pass on what it gets: `p` still leaves `cp` and no part joins it, so the sorted
    /// charges fall; on 5 × 11 boxes of 1 in stripes of 11, 12, 12, 9 and 11, the pass had
    /// stopped at 12 where every part can hold 11). Found breadth first over the parts (the
    /// shortest chain); towards each neighbour a part passes on the box that adds the fewest
    /// cut edges, else the shortest strip. Applied from its far end, each box only if it may leave and
    /// lands beside its new part, else undone whole. Returns the boxes moved, or `None`.
    fn move_chain(&mut self, p: usize, cp: f64) -> Option<usize> {
        let parts = self.charge.len();
        // For each part reached: the part it was reached from and the boxes it gets from there.
        let mut from: Vec<Option<(usize, Vec<usize>)>> = vec![None; parts];
        let mut queue = std::collections::VecDeque::from([p]);
        let mut visited = vec![false; parts];
        visited[p] = true;
        while let Some(x) = queue.pop_front() {
            let gained = from[x].as_ref().map_or(0.0, |(_, path)| path.iter().map(|&a| self.loads[a]).sum());
            for (y, path) in self.exits(x, &visited) {
                let q: f64 = path.iter().map(|&b| self.loads[b]).sum();
                // A part on the way ends under `cp`, or no heavier than it was (one tied with
                // `p` at `cp` passes on what it gets): `p` leaves `cp` and no part joins it.
                if x != p && self.charge[x] + gained - q >= cp && gained > q {
                    continue;
                }
                visited[y] = true;
                from[y] = Some((x, path));
                if self.charge[y] + q < cp {
                    if let Some(moves) = self.apply_chain(&from, y) {
                        return Some(moves);
                    }
                    continue;
                }
                queue.push_back(y);
            }
        }
        None
    }

    /// The ways out of part `x` towards each neighbouring part not `visited`, by part id: the
    /// loaded border box that adds the fewest cut edges, else the shortest strip of empty boxes
    /// (at most [`STRIP_DEPTH`] long) from that border to a loaded box, the border end first.
    fn exits(&mut self, x: usize, visited: &[bool]) -> Vec<(usize, Vec<usize>)> {
        // Loaded border boxes towards each neighbouring part: (part, edges added, box); and the
        // parts an empty border box touches.
        let mut loaded: Vec<(usize, f64, usize)> = Vec::new();
        let mut empty: Vec<usize> = Vec::new();
        let border = self.border(x);
        for &b in &border {
            let b = b as usize;
            let (near, len) = self.neighbour_parts(b);
            let own = faces_in(&near[..len], x as u32);
            for &(y, count) in &near[..len] {
                let y = y as usize;
                if visited[y] {
                    continue;
                }
                if self.loads[b] > 0.0 {
                    loaded.push((y, f64::from(own) - f64::from(count), b));
                } else if !empty.contains(&y) {
                    empty.push(y);
                }
            }
        }
        loaded.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
        let mut parts: Vec<usize> = loaded.iter().map(|e| e.0).chain(empty.iter().copied()).collect();
        parts.sort_unstable();
        parts.dedup();
        let mut exits = Vec::new();
        for y in parts {
            let single = loaded.iter().filter(|e| e.0 == y).map(|e| e.2).find(|&b| self.may_leave(b));
            if let Some(b) = single {
                exits.push((y, vec![b]));
            } else if let Some(path) = self.strip(x, y, &border).filter(|path| self.may_leave(path[0])) {
                exits.push((y, path));
            }
        }
        self.give_back(x, border);
        exits
    }

    /// The shortest strip of `x`'s empty boxes from a border box touching part `y` to a loaded
    /// box of `x`, the border end first: a breadth-first search at most [`STRIP_DEPTH`] deep.
    fn strip(&self, x: usize, y: usize, border: &[u32]) -> Option<Vec<usize>> {
        let mut before = std::collections::HashMap::new();
        let mut layer: Vec<usize> =
            border.iter().map(|&b| b as usize).filter(|&b| self.loads[b] <= 0.0 && self.touches(b, y)).collect();
        layer.iter().for_each(|&b| {
            before.insert(b, usize::MAX);
        });
        for _ in 0..STRIP_DEPTH {
            let mut next = Vec::new();
            for &k in &layer {
                let mut found = None;
                self.grid.for_each_neighbour(k, |n| {
                    if found.is_none() && self.owners[n] as usize == x && !before.contains_key(&n) {
                        if self.loads[n] > 0.0 {
                            found = Some(n);
                        } else {
                            before.insert(n, k);
                            next.push(n);
                        }
                    }
                });
                if let Some(end) = found {
                    before.insert(end, k);
                    return Some(trace_back(end, |b| before.get(&b).copied()));
                }
            }
            layer = next;
        }
        None
    }

    /// Applies the chain that [`State::move_chain`] found ending in part `end`, from that end
    /// back to its start: each box only if it may leave and touches the part it joins. On a
    /// box that may not go, undoes the moves made and returns `None`.
    fn apply_chain(&mut self, from: &[Option<(usize, Vec<usize>)>], end: usize) -> Option<usize> {
        let mut done: Vec<(usize, u32)> = Vec::new();
        let mut at = end;
        while let Some((x, path)) = &from[at] {
            for &b in path {
                if !(self.touches(b, at) && self.may_leave(b)) {
                    for &(back, owner) in done.iter().rev() {
                        self.move_box(back, owner);
                    }
                    return None;
                }
                done.push((b, self.owners[b]));
                self.move_box(b, at as u32);
            }
            at = *x;
        }
        Some(done.len())
    }

    /// When no single box of `p` can go, a loaded box behind a strip of empty ones may: the
    /// strip and the box move together to the part on the strip's other side, which must stay
    /// under `cp`. Searched breadth first through `p`'s empty boxes from its borders, so the
    /// shortest strip goes first; at most [`PATH_TRIES`] strips are tried. Returns the boxes
    /// moved, or `None` when none could.
    pub(super) fn move_path(&mut self, p: usize, cp: f64) -> Option<usize> {
        // For each box of `p` reached: the part the strip leads to and the box before it.
        let mut reached = std::collections::HashMap::new();
        let mut queue = std::collections::VecDeque::new();
        let border = self.border(p);
        for &b in &border {
            let b = b as usize;
            if self.loads[b] > 0.0 {
                continue;
            }
            let (near, len) = self.neighbour_parts(b);
            if let Some(&(to, _)) = near[..len]
                .iter()
                .filter(|e| e.0 as usize != p)
                .min_by(|x, y| self.charge[x.0 as usize].total_cmp(&self.charge[y.0 as usize]).then(x.0.cmp(&y.0)))
            {
                reached.insert(b, (to, usize::MAX));
                queue.push_back(b);
            }
        }
        self.give_back(p, border);
        let mut tries = 0;
        while let Some(k) = queue.pop_front() {
            let (to, _) = reached[&k];
            let mut next = Vec::new();
            self.grid.for_each_neighbour(k, |n| {
                if self.owners[n] as usize == p && !reached.contains_key(&n) {
                    next.push(n);
                }
            });
            for n in next {
                reached.insert(n, (to, k));
                if self.loads[n] <= 0.0 {
                    queue.push_back(n);
                    continue;
                }
                if self.charge[to as usize] + self.loads[n] >= cp {
                    continue;
                }
                // The border end first, so that each box joins `to` beside the one before it.
                let path = trace_back(n, |b| reached.get(&b).map(|e: &(u32, usize)| e.1));
                if self.move_all(&path, to) {
                    return Some(path.len());
                }
                tries += 1;
                if tries == PATH_TRIES {
                    return None;
                }
            }
        }
        None
    }

    /// When no single box, chain or strip can go: a loaded border box `a` of `p` traded for a
    /// lighter loaded box `b` of a neighbouring part `x` that also borders `p`, both parts
    /// ending under `cp` (on maps with few loaded boxes no part may have room for a whole one).
    /// Only trades that add no cut edge: the others bought a little balance for a longer cut
    /// (docs/peers.md). Pairs that keep `x` within the target first, then the
    /// fewest cut edges, then the most even pair of charges; at most [`SWAP_TRIES`] are tried.
    /// Returns the boxes moved (two), or `None`.
    fn move_swap(&mut self, p: usize, cp: f64, target: f64) -> Option<usize> {
        let border = self.border(p);
        let mut theirs: std::collections::HashMap<u32, Vec<u32>> = std::collections::HashMap::new();
        let mut pairs = Vec::new();
        for &a in &border {
            let qa = self.loads[a as usize];
            if qa <= 0.0 {
                continue;
            }
            let (near, len) = self.neighbour_parts(a as usize);
            let own_a = faces_in(&near[..len], p as u32);
            for &(x, x_a) in &near[..len] {
                if x as usize == p {
                    continue;
                }
                let boxes = theirs.entry(x).or_insert_with(|| {
                    let list = self.border(x as usize);
                    let copy = list.clone();
                    self.give_back(x as usize, list);
                    copy
                });
                for &b in boxes.iter() {
                    let qb = self.loads[b as usize];
                    let after = self.charge[x as usize] + qa - qb;
                    if qb <= 0.0 || qb >= qa || after >= cp || !self.touches(b as usize, p) {
                        continue;
                    }
                    // Cut edges the pair adds: `a`'s move, then `b`'s (next to `a`, the face
                    // between them stays cut but changes sides).
                    let (near_b, len_b) = self.neighbour_parts(b as usize);
                    let mut next = 0;
                    self.grid.for_each_neighbour(a as usize, |n| next |= i32::from(n == b as usize));
                    let added = i32::from(own_a) - i32::from(x_a) + (i32::from(faces_in(&near_b[..len_b], x)) + next)
                        - (i32::from(faces_in(&near_b[..len_b], p as u32)) - next);
                    if added > 0 {
                        continue;
                    }
                    let pair = after.max(cp - qa + qb);
                    let tier = u8::from(after > target);
                    pairs.push((tier, f64::from(added), pair, a, b, x));
                }
            }
        }
        self.give_back(p, border);
        pairs.sort_by(|x, y| x.partial_cmp(y).expect("charges and loads are finite"));
        for &(_, _, _, a, b, x) in pairs.iter().take(SWAP_TRIES) {
            let (a, b) = (a as usize, b as usize);
            if !self.may_leave(a) {
                continue;
            }
            self.move_box(a, x);
            if self.touches(b, p) && self.may_leave(b) {
                self.move_box(b, p as u32);
                return Some(2);
            }
            // `a` back where it was: its old part and `x` are as before.
            self.move_box(a, p as u32);
        }
        None
    }

    /// Moves `path` to part `to` box by box, each only if it may leave; undoes them all and
    /// returns false if one may not.
    fn move_all(&mut self, path: &[usize], to: u32) -> bool {
        let from = self.owners[path[0]];
        for (done, &b) in path.iter().enumerate() {
            if !self.may_leave(b) {
                for &back in path[..done].iter().rev() {
                    self.move_box(back, from);
                }
                return false;
            }
            self.move_box(b, to);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::State;
    use crate::metrics::{edge_cut, one_piece_each};
    use crate::rng::SplitMix64;
    use crate::{Grid, Problem};

    /// Owners of `parts` face-connected parts on `grid`, grown at random from distinct seed
    /// boxes: each box joins a part it touches.
    fn grown_parts(grid: &Grid, parts: usize, rng: &mut SplitMix64) -> Vec<u32> {
        let mut owners = vec![u32::MAX; grid.len()];
        let mut seeded = 0;
        while seeded < parts {
            let k = rng.below(grid.len());
            if owners[k] == u32::MAX {
                owners[k] = seeded as u32;
                seeded += 1;
            }
        }
        while owners.contains(&u32::MAX) {
            let k = rng.below(grid.len());
            let mut near = Vec::new();
            grid.for_each_neighbour(k, |n| near.extend((owners[n] != u32::MAX).then_some(owners[n])));
            if owners[k] == u32::MAX && !near.is_empty() {
                owners[k] = near[rng.below(near.len())];
            }
        }
        owners
    }

    /// Whether box `b` has a face neighbour owned by `part`.
    fn beside(grid: &Grid, owners: &[u32], b: usize, part: u32) -> bool {
        let mut found = false;
        grid.for_each_neighbour(b, |n| found |= owners[n] == part);
        found
    }

    /// What the documentation of [`State::move_swap`] says it does, worked out from whole
    /// owners: every loaded border box `a` of `p` against every lighter loaded box `b` of a part
    /// `x` beside `a` that touches `p`, both parts ending under `cp`; the cut edges a trade adds
    /// counted on the owners after it, trades that add any left out; the rest ordered by
    /// receiver over `target`, edges added, the larger charge of the pair, then ids; the first
    /// of the first [`super::SWAP_TRIES`] whose boxes may each leave (their parts stay in one
    /// piece) and where `b` still touches `p` once `a` has gone.
    fn swap_as_documented(
        grid: &Grid,
        loads: &[f64],
        owners: &[u32],
        p: u32,
        cp: f64,
        target: f64,
    ) -> Option<Vec<u32>> {
        let charges = crate::metrics::charges(owners, loads, 1 + *owners.iter().max().unwrap() as usize);
        let cut = edge_cut(grid, owners);
        let mut trades = Vec::new();
        for a in (0..grid.len()).filter(|&a| owners[a] == p && loads[a] > 0.0) {
            let mut xs = Vec::new();
            grid.for_each_neighbour(a, |n| {
                xs.extend((owners[n] != p && !xs.contains(&owners[n])).then_some(owners[n]))
            });
            for &x in &xs {
                for b in (0..grid.len()).filter(|&b| owners[b] == x && beside(grid, owners, b, p)) {
                    let (qa, qb) = (loads[a], loads[b]);
                    let after = charges[x as usize] + qa - qb;
                    if qb <= 0.0 || qb >= qa || after >= cp {
                        continue;
                    }
                    let mut traded = owners.to_vec();
                    (traded[a], traded[b]) = (x, p);
                    let added = edge_cut(grid, &traded) as f64 - cut as f64;
                    if added <= 0.0 {
                        trades.push((u8::from(after > target), added, after.max(cp - qa + qb), a, b, x));
                    }
                }
            }
        }
        trades.sort_by(|x, y| x.partial_cmp(y).unwrap());
        let count = |o: &[u32], part: u32| o.iter().filter(|&&q| q == part).count();
        for &(_, _, _, a, b, x) in trades.iter().take(super::SWAP_TRIES) {
            let mut out = owners.to_vec();
            out[a] = x;
            if count(owners, p) <= 1 || !one_piece_each(grid, &out) {
                continue;
            }
            if beside(grid, &out, b, p) && count(&out, x) > 1 {
                out[b] = p;
                if one_piece_each(grid, &out) {
                    return Some(out);
                }
            }
        }
        None
    }

    /// On 3,000 small maps with parts grown at random (whole, loads 0 to 4, a third of the
    /// boxes empty), from every part at its own charge and a target around the mean: the trade
    /// [`State::move_swap`] makes is the one its documentation names, worked out from whole
    /// owners (the cut counted, not reckoned box by box), and no trade lengthens the cut.
    #[test]
    fn a_trade_is_the_first_its_documentation_names_and_never_lengthens_the_cut() {
        let mut rng = SplitMix64::new(7);
        let mut traded = 0;
        for _ in 0..3000 {
            let grid = Grid::new(2 + rng.below(5), 2 + rng.below(4)).unwrap();
            let parts = 2 + rng.below(3.min(grid.len() - 2));
            let loads: Vec<f64> =
                (0..grid.len()).map(|_| if rng.below(3) == 0 { 0.0 } else { 1.0 + rng.below(4) as f64 }).collect();
            let owners = grown_parts(&grid, parts, &mut rng);
            let Ok(problem) = Problem::new(grid, &loads, parts) else { continue };
            let charges = crate::metrics::charges(&owners, &loads, parts);
            let target = problem.mean() * (0.9 + 0.05 * rng.below(5) as f64);
            for (p, &cp) in charges.iter().enumerate() {
                let expected = swap_as_documented(&grid, &loads, &owners, p as u32, cp, target);
                let mut out = owners.clone();
                let made = State::new(&problem, &mut out).move_swap(p, cp, target);
                assert_eq!(made, expected.as_ref().map(|_| 2), "{grid:?} {loads:?} {owners:?} part {p}");
                assert_eq!(out, expected.unwrap_or_else(|| owners.clone()), "{grid:?} {loads:?} {owners:?} part {p}");
                if made.is_some() {
                    assert!(edge_cut(&grid, &out) <= edge_cut(&grid, &owners));
                    traded += 1;
                }
            }
        }
        assert!(traded > 300, "only {traded} trades made: the maps do not exercise the pass");
    }

    /// The strip fallback gives up after [`super::PATH_TRIES`] strips that could not move. On
    /// `width` × 4 boxes: part 1 the top row, part 0 the empty second row (a spine, every box of
    /// it a start) with a loaded box below each even column and the last, part 2 the rest.
    /// Each strip from an even column's spine box to the box below fails (that spine box holds
    /// part 0 together); the one at the last column would go. With 16 columns it comes after
    /// 8 failures and is not tried; with 14, after 7, and goes, unless its receiver would not
    /// end under `cp` (1: parts 1 and 2 are empty, every box of part 0 weighs 1).
    #[test]
    fn the_strip_fallback_gives_up_after_eight_strips_that_could_not_move() {
        let strip = |width: usize, cp: Option<f64>| {
            let grid = Grid::new(width, 4).unwrap();
            let hanging = |k: usize| k / width == 2 && (k % 2 == 0 || k % width == width - 1);
            let owners: Vec<u32> = (0..grid.len())
                .map(|k| match k / width {
                    0 => 1,
                    1 => 0,
                    _ if hanging(k) => 0,
                    _ => 2,
                })
                .collect();
            assert!(one_piece_each(&grid, &owners));
            let loads: Vec<f64> = (0..grid.len()).map(|k| if hanging(k) { 1.0 } else { 0.0 }).collect();
            let problem = Problem::new(grid, &loads, 3).unwrap();
            let mut out = owners.clone();
            let cp = cp.unwrap_or(crate::metrics::charges(&owners, &loads, 3)[0]);
            let made = State::new(&problem, &mut out).move_path(0, cp);
            (made, (0..grid.len()).filter(|&k| out[k] != owners[k]).collect::<Vec<usize>>())
        };
        assert_eq!(strip(16, None), (None, vec![]));
        assert_eq!(strip(14, None), (Some(2), vec![14 + 13, 2 * 14 + 13]));
        assert_eq!(strip(14, Some(1.0)), (None, vec![]));
    }

    /// A strip longer than a chain's ([`super::STRIP_DEPTH`]) is what only the strip fallback
    /// moves, and the pass counts every box of it: on 22 × 1 boxes, part 0 holds boxes 0–19
    /// (loads 1, 1, then 18 empty ones), part 1 the two empty boxes after; the strip from box
    /// 19 back to box 1 (19 boxes) goes to part 1, and the pass returns 19.
    #[test]
    fn the_pass_counts_every_box_of_a_strip() {
        let mut loads = [0.0; 22];
        (loads[0], loads[1]) = (1.0, 1.0);
        let problem = Problem::new(Grid::new(22, 1).unwrap(), &loads, 2).unwrap();
        let mut owners: Vec<u32> = (0..22).map(|k| u32::from(k >= 20)).collect();
        assert_eq!(State::new(&problem, &mut owners).balance(1.0, 100), 19);
        let expected: Vec<u32> = (0..22).map(|k| u32::from(k >= 1)).collect();
        assert_eq!(owners, expected);
    }

    /// Where no move brings its receiver within the target, the balance pass takes the move
    /// whose two parts end with the lower larger charge: part 0 (charge 10) hands its box of 3
    /// to part 2 (charge 2: 7 and 5 after) rather than its box of 1 to part 1 (charge 5: 9 and
    /// 6 after).
    #[test]
    fn above_the_target_everywhere_the_move_that_leaves_the_pair_lightest_goes() {
        let problem = Problem::new(Grid::new(5, 1).unwrap(), &[5.0, 1.0, 6.0, 3.0, 2.0], 3).unwrap();
        let mut owners = [1, 0, 0, 0, 2];
        assert_eq!(State::new(&problem, &mut owners).balance(4.0, 1), 1);
        assert_eq!(owners, [1, 0, 0, 2, 2]);
    }

    /// A border of 520 boxes, over [`super::BATCH_FROM`], so that the pass makes several moves
    /// per search: 520 × 3 boxes, part 0 the top row (load 1.5) and every other box of the
    /// middle row (1,040 in all), part 1 the rest (load 1, 780 in all). Each middle box of part
    /// 0 has one face on its part and three on part 1: they go, each taking two faces off the
    /// cut, until part 0 is within the target (126 of them for 1.005 times the mean; 120 for a
    /// target of exactly 920, where part 0 stops at it) or the move budget is spent (10 of 10).
    /// Below the mean (900) they go until part 1 would pass the target (120), then searches one
    /// move at a time even the two parts out above it: 8 more of them and a box of the top row
    /// (1.5), whose move neither adds nor removes a cut edge. With a budget of 121, that box of
    /// the top row is the last move: the batch stopped where part 1 reached the target. Each
    /// batch takes one search of the border (16 below the mean with no budget: the batch, the 9
    /// single moves, then the chains, strips and trades that find nothing).
    #[test]
    fn on_a_long_border_the_pass_moves_a_batch_that_shortens_the_cut() {
        let (nx, ny) = (520, 3);
        let grid = Grid::new(nx, ny).unwrap();
        let loads: Vec<f64> = (0..grid.len()).map(|k| if k < nx { 1.5 } else { 1.0 }).collect();
        let problem = Problem::new(grid, &loads, 2).unwrap();
        let start: Vec<u32> = (0..grid.len()).map(|k| u32::from(k >= 2 * nx || (k >= nx && k % 2 == 1))).collect();
        let cut = |o: &[u32]| crate::metrics::edge_cut(&grid, o);
        let mean = 1.005 * problem.mean();
        let runs: Vec<_> = [(mean, grid.len()), (920.0, grid.len()), (mean, 10), (900.0, grid.len()), (900.0, 121)]
            .into_iter()
            .map(|(target, max_moves)| {
                let mut owners = start.clone();
                let mut state = State::new(&problem, &mut owners);
                let moves = state.balance(target, max_moves);
                // Border lists taken, one per search (`pass` counts them).
                let searches = state.pass;
                let moved: Vec<usize> = (0..grid.len()).filter(|&k| owners[k] != start[k]).collect();
                assert!(moved.iter().all(|&k| start[k] == 0), "{target}: {moved:?}");
                let middle = moved.iter().filter(|&&k| k / nx == 1).count();
                (
                    moves,
                    searches,
                    crate::metrics::charges(&owners, &loads, 2),
                    moved.len(),
                    middle,
                    cut(&start) - cut(&owners),
                )
            })
            .collect();
        assert_eq!(
            runs,
            [
                (126, 1, vec![914.0, 906.0], 126, 126, 2 * 126),
                (120, 1, vec![920.0, 900.0], 120, 120, 2 * 120),
                (10, 1, vec![1030.0, 790.0], 10, 10, 2 * 10),
                (129, 16, vec![910.5, 909.5], 129, 128, 2 * 128),
                (121, 2, vec![918.5, 901.5], 121, 120, 2 * 120),
            ]
        );
    }

    /// A strip starts at an empty border box touching the part it goes to: on 4 × 2 boxes,
    /// part 0's box 6 (empty, beside part 1) and the loaded box 5 behind it, not at the loaded
    /// border box 1, found first, which touches part 1 too.
    #[test]
    fn a_strip_starts_at_an_empty_box_beside_the_part_it_goes_to() {
        let loads = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0];
        let problem = Problem::new(Grid::new(4, 2).unwrap(), &loads, 2).unwrap();
        let mut owners = [0, 0, 1, 1, 0, 0, 0, 1];
        let mut state = State::new(&problem, &mut owners);
        let border = state.border(0);
        assert_eq!(border, [1, 6]);
        assert_eq!(state.strip(0, 1, &border), Some(vec![6, 5]));
    }
}
