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
//! capacities), found by augmenting paths, breadth first; once as many paths as the border has
//! faces are found, no cut is shorter and the search stops. The source's side is the boxes it
//! still reaches. Only pairs with a box of no load are tried: elsewhere the room under the
//! ceiling is a few boxes deep and the flows found next to nothing that straight cuts had not
//! (52 cases of `pbs-bench peers --sequence 0`, 2026-11-30).

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
        let across_ref = &across;
        let starts: Vec<(usize, usize)> = (0..nodes.len())
            .flat_map(|u| (0..6).filter(move |&dir| across_ref[u][dir] == SOURCE).map(move |dir| (u, dir)))
            .collect();
        // Flow out of each node through each face: -1, 0 or 1 (unit capacities).
        let mut flow = vec![[0i8; 6]; nodes.len()];
        let mut parent = vec![(NONE, 0u8); nodes.len()];
        let mut visited = vec![0u32; nodes.len()];
        let (mut round, mut total) = (0, 0);
        let mut queue = std::collections::VecDeque::new();
        // Each round looks for a path; the last, which finds none, leaves the nodes the source
        // reaches marked with its number.
        loop {
            round += 1;
            queue.clear();
            for &(u, dir) in &starts {
                if visited[u] != round && flow[u][dir] > -1 {
                    visited[u] = round;
                    parent[u] = (NONE, dir as u8);
                    queue.push_back(u);
                }
            }
            let mut end = None;
            'search: while let Some(u) = queue.pop_front() {
                for dir in 0..6 {
                    if flow[u][dir] >= 1 {
                        continue;
                    }
                    match across[u][dir] {
                        SINK => {
                            end = Some((u, dir));
                            break 'search;
                        }
                        SOURCE | OUTSIDE => {}
                        v if visited[v as usize] != round => {
                            visited[v as usize] = round;
                            parent[v as usize] = (u as u32, dir as u8);
                            queue.push_back(v as usize);
                        }
                        _ => {}
                    }
                }
            }
            let Some((last, dir)) = end else { break };
            flow[last][dir] += 1;
            let mut v = last;
            loop {
                let (u, dir) = parent[v];
                if u == NONE {
                    flow[v][dir as usize] -= 1;
                    break;
                }
                let u = u as usize;
                flow[u][dir as usize] += 1;
                flow[v][dir as usize ^ 1] -= 1;
                v = u;
            }
            total += 1;
            if total >= border {
                return None;
            }
        }
        // The nodes the source still reaches go to `p`, the others to `q`. The border before
        // and after, over the faces that touch the corridor (the others do not change).
        let side_now = |u: usize| u8::from(visited[u] != round);
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
