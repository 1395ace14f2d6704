//! Step 3 of the refinement, second kind of split: a pair's border moved to the shortest cut
//! the balance allows near it, by a maximum flow.
//!
//! Where no straight cut shortens the border of parts `p` and `q` (pairs.rs), a border that
//! wanders through boxes with no load can still be short-cut: there the balance does not mind
//! where it runs (on the maps of sparse load METIS's cut was 0.2–0.8 × pbs's). The boxes
//! either part may hand over form a corridor along the border: from the border into `p`,
//! breadth first, as long as their load fits in what `q` may still gain under the pair's
//! ceiling, and likewise into `q`; boxes with no load always fit. Every cut between the rest of
//! `p` (the source) and the rest of `q` (the sink) through the corridor then keeps both parts
//! under the ceiling, and the shortest one is a minimum cut of the corridor's faces (unit
//! capacities), found by Dinic's phases of augmenting paths ([`max_flow`]); once as many paths
//! as the border has faces are found, no cut is shorter and the search stops. The source's side
//! is the boxes it still reaches. Only pairs with a box of no load are tried: elsewhere the room
//! under the ceiling is a few boxes deep and the flows found next to nothing that straight cuts
//! had not (52 cases of `pbs-bench peers --sequence 0`, 2026-11-30).

use super::pairs::{beside, neighbours, Marks, Pair};
use super::State;

/// No node.
const NONE: u32 = u32::MAX;
/// Across a node's face: a box of the source.
const SOURCE: u32 = u32::MAX - 1;
/// Across a node's face: a box of the sink.
const SINK: u32 = u32::MAX - 2;
/// Across a node's face: the grid's edge or another part.
const OUTSIDE: u32 = u32::MAX - 3;

/// Boxes of one part the corridor takes at most: a bound on a pair's cost where a part has
/// large stretches with no load.
const CORRIDOR_BOXES: usize = 1024;

/// Scratch reused from pair to pair.
pub(super) struct FlowScratch {
    /// Per box of the grid, its node in the corridor, or [`NONE`].
    node_of: Vec<u32>,
}

impl FlowScratch {
    pub(super) fn new(boxes: usize) -> Self {
        FlowScratch { node_of: vec![NONE; boxes] }
    }
}

/// A box of the corridor: its index, coordinates, and the part it is in today (0: `p`, 1: `q`).
struct Node {
    k: usize,
    x: [usize; 3],
    side: u8,
}

/// A minimum cut found: the boxes that change hands with their new part, and a box of each
/// part that stays (to check that both stay in one piece).
pub(super) struct Cut {
    pub(super) changes: Vec<(usize, usize)>,
    pub(super) kept: [usize; 2],
}

impl State<'_, '_> {
    /// The split of `pair` along the shortest cut through its corridor, if shorter than the
    /// pair's border.
    pub(super) fn flow_split(&mut self, marks: &mut Marks, scratch: &mut FlowScratch, pair: &Pair) -> Option<Cut> {
        let nodes = self.corridor(marks, scratch, pair);
        let cut = self.min_cut(scratch, pair, &nodes);
        for n in &nodes {
            scratch.node_of[n.k] = NONE;
        }
        cut
    }

    /// The corridor's boxes, breadth first from the border into each part.
    fn corridor(&mut self, marks: &mut Marks, scratch: &mut FlowScratch, pair: &Pair) -> Vec<Node> {
        let &Pair { p, q, ceiling, .. } = pair;
        let seen = marks.fresh();
        let mut nodes = Vec::new();
        for (side, (from, other)) in [(p, q), (q, p)].into_iter().enumerate() {
            // What `other` may still gain; a box of `from` stays out of the corridor at least.
            let mut room = ceiling - self.charge[other];
            let cap = CORRIDOR_BOXES.min(self.count[from].saturating_sub(1));
            let mut queue = std::collections::VecDeque::new();
            // The boxes of `from` on its border with `other`.
            let border = self.border(from);
            for &k in &border {
                let k = k as usize;
                if self.touches(k, other) {
                    marks.stamp[k] = seen;
                    queue.push_back((k, self.grid.coords(k)));
                }
            }
            self.give_back(from, border);
            let first = nodes.len();
            while let Some((k, x)) = queue.pop_front() {
                if nodes.len() - first >= cap {
                    break;
                }
                if self.loads[k] > room {
                    continue;
                }
                room -= self.loads[k];
                scratch.node_of[k] = nodes.len() as u32;
                nodes.push(Node { k, x, side: side as u8 });
                neighbours(&self.grid, k, x, |m, d, up| {
                    if self.owners[m] as usize == from && marks.stamp[m] != seen {
                        marks.stamp[m] = seen;
                        queue.push_back((m, beside(x, d, up)));
                    }
                });
            }
        }
        nodes
    }

    /// A minimum cut between the source and the sink through `nodes`, if its border is shorter
    /// than the pair's.
    fn min_cut(&self, scratch: &FlowScratch, pair: &Pair, nodes: &[Node]) -> Option<Cut> {
        let &Pair { p, q, border, .. } = pair;
        // What lies across each face of each node (face `2 d + up` along axis `d`), and a box of
        // the source and of the sink.
        let mut kept = [None, None];
        let across: Vec<[u32; 6]> = nodes
            .iter()
            .map(|n| {
                let mut out = [OUTSIDE; 6];
                neighbours(&self.grid, n.k, n.x, |m, d, up| {
                    out[2 * d + usize::from(up)] = match scratch.node_of[m] {
                        NONE => match self.owners[m] as usize {
                            o if o == p => {
                                kept[0] = Some(m);
                                SOURCE
                            }
                            o if o == q => {
                                kept[1] = Some(m);
                                SINK
                            }
                            _ => OUTSIDE,
                        },
                        v => v,
                    };
                });
                out
            })
            .collect();
        let kept = [kept[0]?, kept[1]?];
        let (reached, total) = max_flow(&across, border);
        if total >= border {
            return None;
        }
        // The nodes the source still reaches go to `p`, the others to `q`. The border before
        // and after, over the faces that touch the corridor (the others do not change).
        let side_now = |u: usize| u8::from(!reached[u]);
        let (mut before, mut after) = (0usize, 0usize);
        for (u, n) in nodes.iter().enumerate() {
            for &a in &across[u] {
                let (was, is) = match a {
                    SOURCE => (0, 0),
                    SINK => (1, 1),
                    OUTSIDE => continue,
                    v if v as usize > u => (nodes[v as usize].side, side_now(v as usize)),
                    _ => continue,
                };
                before += usize::from(was != n.side);
                after += usize::from(is != side_now(u));
            }
        }
        let changes: Vec<(usize, usize)> = nodes
            .iter()
            .enumerate()
            .filter(|&(u, n)| side_now(u) != n.side)
            .map(|(u, n)| (n.k, if side_now(u) == 0 { p } else { q }))
            .collect();
        (after < before && !changes.is_empty()).then_some(Cut { changes, kept })
    }

    /// Whether part `part` is in one piece, searched from its box `start`.
    pub(super) fn whole_from(&self, part: usize, start: usize, marks: &mut Marks) -> bool {
        let seen = marks.fresh();
        self.reach(start, seen, marks, |m, _| self.owners[m] as usize == part) == self.count[part]
    }
}

/// Unit flows from the source to the sink through the corridor's faces (`across`, as
/// [`State::min_cut`] builds it), until `limit` are found or none is left: Dinic's phases, each
/// a breadth-first labelling of the nodes by their distance from the source over faces with
/// room, then paths along labels rising by one, searched depth first, each node's faces tried
/// once per phase. On maps of sparse load a pair's border runs to 50-80 faces through a corridor
/// of 2,048 boxes, where a breadth-first search per path (Edmonds and Karp) took most of the
/// refinement's time. Any maximum flow leaves the same nodes reachable from the source (the
/// smallest minimum cut), so the cut is the one a search per path finds. Returns, per node,
/// whether the source still reaches it over faces with room (empty once `limit` is reached: the
/// caller wants no cut then), and the flow found.
fn max_flow(across: &[[u32; 6]], limit: usize) -> (Vec<bool>, usize) {
    let n = across.len();
    // The faces through which the source feeds a node (one unit each).
    let starts: Vec<(usize, usize)> =
        (0..n).flat_map(|u| (0..6).filter(move |&d| across[u][d] == SOURCE).map(move |d| (u, d))).collect();
    // Flow out of each node through each face: -1, 0 or 1 (a face carries one unit either way).
    let mut flow = vec![[0i8; 6]; n];
    let mut level = vec![u32::MAX; n];
    // Per node, the next face its depth-first search tries in this phase.
    let mut next = vec![0u8; n];
    let mut queue: Vec<u32> = Vec::with_capacity(n);
    let mut path: Vec<(u32, u8)> = Vec::new();
    let mut total = 0;
    loop {
        level.fill(u32::MAX);
        queue.clear();
        for &(u, d) in &starts {
            if flow[u][d] > -1 && level[u] == u32::MAX {
                level[u] = 0;
                queue.push(u as u32);
            }
        }
        let mut sink_seen = false;
        let mut head = 0;
        while let Some(&u) = queue.get(head) {
            head += 1;
            let u = u as usize;
            for (d, &v) in across[u].iter().enumerate() {
                if flow[u][d] >= 1 {
                    continue;
                }
                if v == SINK {
                    sink_seen = true;
                } else if v < OUTSIDE && level[v as usize] == u32::MAX {
                    level[v as usize] = level[u] + 1;
                    queue.push(v);
                }
            }
        }
        if !sink_seen {
            return (level.iter().map(|&l| l != u32::MAX).collect(), total);
        }
        next.fill(0);
        for &(s, into) in &starts {
            if flow[s][into] == -1 || level[s] != 0 || !find_path(across, &flow, &mut level, &mut next, s, &mut path) {
                continue;
            }
            flow[s][into] -= 1;
            for &(u, d) in &path {
                let (u, d) = (u as usize, d as usize);
                flow[u][d] += 1;
                let v = across[u][d];
                if v < OUTSIDE {
                    flow[v as usize][d ^ 1] -= 1;
                }
            }
            total += 1;
            if total >= limit {
                return (Vec::new(), total);
            }
        }
    }
}

/// A path from `s` to the sink over faces with room and labels rising by one, as the faces it
/// takes into `path` (the last one into the sink); a node found to lead nowhere loses its label
/// for the rest of the phase.
fn find_path(
    across: &[[u32; 6]],
    flow: &[[i8; 6]],
    level: &mut [u32],
    next: &mut [u8],
    s: usize,
    path: &mut Vec<(u32, u8)>,
) -> bool {
    path.clear();
    let mut u = s;
    'nodes: loop {
        while let Some(&v) = across[u].get(next[u] as usize) {
            let d = next[u] as usize;
            if flow[u][d] < 1 {
                if v == SINK {
                    path.push((u as u32, d as u8));
                    return true;
                }
                if v < OUTSIDE && level[v as usize] == level[u] + 1 {
                    path.push((u as u32, d as u8));
                    u = v as usize;
                    continue 'nodes;
                }
            }
            next[u] += 1;
        }
        // A dead end: out of this phase, and back one face.
        level[u] = u32::MAX;
        let Some((from, _)) = path.pop() else { return false };
        u = from as usize;
        next[u] += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{metrics, Grid, Problem};

    /// Parts 0 and 1, 30 boxes each, meet along stairs (12 faces) through the 6 middle columns,
    /// whose boxes have load `middle_load` (the others 1).
    fn stairs(middle_load: f64) -> (Grid, Vec<f64>, Vec<u32>) {
        let grid = Grid::new(10, 6).unwrap();
        let mut loads = vec![1.0; 60];
        let mut owners = vec![1u32; 60];
        for j in 0..6 {
            for i in 0..10 {
                let k = grid.index(i, j, 0);
                if (2..8).contains(&i) {
                    loads[k] = middle_load;
                }
                if i < [2, 3, 5, 6, 6, 8][j] {
                    owners[k] = 0;
                }
            }
        }
        (grid, loads, owners)
    }

    fn pair_of(state: &State<'_, '_>, grid: &Grid, ceiling: f64) -> Pair {
        let border = metrics::edge_cut(grid, state.owners);
        Pair { p: 0, q: 1, bb: ([0; 3], [9, 5, 0]), border, ceiling }
    }

    /// The corridor of a `w`×`h` grid whose boxes are, by `kinds` (read cyclically), a node (0,
    /// 1), the source (2), the sink (3) or outside (4): `across` as `min_cut` builds it.
    fn corridor_of(w: usize, h: usize, kinds: &[u8]) -> Vec<[u32; 6]> {
        let kind = |i: usize, j: usize| kinds[(j * w + i) % kinds.len()];
        let mut node = vec![NONE; w * h];
        let mut count = 0;
        for (k, n) in node.iter_mut().enumerate() {
            if kind(k % w, k / w) <= 1 {
                *n = count;
                count += 1;
            }
        }
        let mut across = Vec::new();
        for k in (0..w * h).filter(|&k| node[k] != NONE) {
            let (i, j) = ((k % w) as isize, (k / w) as isize);
            let mut out = [OUTSIDE; 6];
            for (d, (di, dj)) in [(-1, 0), (1, 0), (0, -1), (0, 1)].into_iter().enumerate() {
                let (a, b) = (i + di, j + dj);
                if a < 0 || b < 0 || a >= w as isize || b >= h as isize {
                    continue;
                }
                let m = b as usize * w + a as usize;
                out[d] = match kind(a as usize, b as usize) {
                    0 | 1 => node[m],
                    2 => SOURCE,
                    3 => SINK,
                    _ => OUTSIDE,
                };
            }
            across.push(out);
        }
        across
    }

    /// The search this module used before Dinic's phases: a breadth-first search from the
    /// source per path (Edmonds and Karp), as the reference.
    fn one_path_at_a_time(across: &[[u32; 6]], limit: usize) -> (Vec<bool>, usize) {
        let n = across.len();
        let mut flow = vec![[0i8; 6]; n];
        let (mut total, mut round) = (0, 0u32);
        let mut seen = vec![0u32; n];
        loop {
            round += 1;
            let mut parent = vec![(NONE, 0usize); n];
            let mut queue = std::collections::VecDeque::new();
            for u in 0..n {
                for d in 0..6 {
                    if across[u][d] == SOURCE && flow[u][d] > -1 && seen[u] != round {
                        seen[u] = round;
                        parent[u] = (NONE, d);
                        queue.push_back(u);
                    }
                }
            }
            let mut end = None;
            'search: while let Some(u) = queue.pop_front() {
                for d in 0..6 {
                    let v = across[u][d];
                    if flow[u][d] >= 1 {
                        continue;
                    }
                    if v == SINK {
                        end = Some((u, d));
                        break 'search;
                    }
                    if v < OUTSIDE && seen[v as usize] != round {
                        seen[v as usize] = round;
                        parent[v as usize] = (u as u32, d);
                        queue.push_back(v as usize);
                    }
                }
            }
            let Some((mut v, d)) = end else { return (seen.iter().map(|&s| s == round).collect(), total) };
            flow[v][d] += 1;
            loop {
                let (u, d) = parent[v];
                if u == NONE {
                    flow[v][d] -= 1;
                    break;
                }
                flow[u as usize][d] += 1;
                flow[v][d ^ 1] -= 1;
                v = u as usize;
            }
            total += 1;
            if total >= limit {
                return (Vec::new(), total);
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// Dinic's phases find as many paths as a search per path and leave the same nodes on
        /// the source's side: the smallest minimum cut, whatever the maximum flow.
        #[test]
        fn the_phases_find_the_cut_a_search_per_path_finds(
            w in 2usize..14,
            h in 2usize..14,
            kinds in proptest::collection::vec(0u8..5, 1..64),
            limit in 1usize..40,
        ) {
            let across = corridor_of(w, h, &kinds);
            for limit in [limit, usize::MAX] {
                proptest::prop_assert_eq!(max_flow(&across, limit), one_path_at_a_time(&across, limit));
            }
        }
    }

    #[test]
    fn a_border_through_boxes_with_no_load_takes_the_shortest_cut() {
        let (grid, loads, mut owners) = stairs(0.0);
        assert_eq!(metrics::edge_cut(&grid, &owners), 12);
        let problem = Problem::new(grid, &loads, 2).unwrap();
        let mut state = State::new(&problem, &mut owners);
        let mut marks = Marks::new(60);
        let mut scratch = FlowScratch::new(60);
        let pair = pair_of(&state, &grid, 12.0);
        assert_eq!(state.charge, [12.0, 12.0]);
        let cut = state.flow_split(&mut marks, &mut scratch, &pair).expect("a shorter cut");
        for &(b, to) in &cut.changes {
            state.move_box(b, to as u32);
        }
        assert_eq!(metrics::edge_cut(&grid, state.owners), 6, "six faces across the rows");
        assert_eq!(state.charge, [12.0, 12.0], "only boxes with no load moved");
        assert!(state.whole_from(0, cut.kept[0], &mut marks) && state.whole_from(1, cut.kept[1], &mut marks));
        assert!(scratch.node_of.iter().all(|&n| n == NONE), "the scratch is left clean");
    }

    /// With room for every box, each part's corridor takes all of its boxes but one (a part
    /// keeps a box out of the flow), the second part's as many as the first's.
    #[test]
    fn each_corridor_keeps_one_box_of_its_part_out() {
        let (grid, loads, mut owners) = stairs(0.0);
        let problem = Problem::new(grid, &loads, 2).unwrap();
        let mut state = State::new(&problem, &mut owners);
        let mut marks = Marks::new(60);
        let mut scratch = FlowScratch::new(60);
        let pair = pair_of(&state, &grid, 100.0);
        let nodes = state.corridor(&mut marks, &mut scratch, &pair);
        let per_side = [0, 1].map(|side| nodes.iter().filter(|n| n.side == side).count());
        assert_eq!(per_side, [29, 29]);
        assert!(nodes.iter().all(|n| state.owners[n.k] == u32::from(n.side)));
    }

    #[test]
    fn the_corridor_holds_no_more_load_than_the_ceiling_leaves_room_for() {
        // Loaded stairs, both parts at 30 and the ceiling at 30: no box may change hands.
        let (grid, loads, mut owners) = stairs(1.0);
        let problem = Problem::new(grid, &loads, 2).unwrap();
        let mut state = State::new(&problem, &mut owners);
        assert_eq!(state.charge, [30.0, 30.0]);
        let mut marks = Marks::new(60);
        let mut scratch = FlowScratch::new(60);
        assert!(state.flow_split(&mut marks, &mut scratch, &pair_of(&state, &grid, 30.0)).is_none());
        // Room for 4 boxes either way: a shorter cut, neither part over 34.
        let cut = state.flow_split(&mut marks, &mut scratch, &pair_of(&state, &grid, 34.0)).expect("a shorter cut");
        for &(b, to) in &cut.changes {
            state.move_box(b, to as u32);
        }
        assert!(state.charge[0] <= 34.0 && state.charge[1] <= 34.0, "{:?}", state.charge);
        assert!(metrics::edge_cut(&grid, state.owners) < 12);
    }
}
