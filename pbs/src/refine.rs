//! Box-level refinement of a partition: single boundary boxes handed to a neighbouring part,
//! first to make every part one piece, then to bring the largest charge down to a target, then
//! to shorten the borders.
//!
//! Power cells are convex, so a cell can only gain or lose whole slices of boxes along its
//! border, and near the bound its charge moves in steps of a boundary box's load: a balancing
//! stops within its tolerance, not at the bound, and its borders are straight lines drawn
//! across the grid's boxes. Refinement works on owners instead (as METIS's k-way refinement
//! does after its coarsening), one box at a time:
//!
//! 0. **Pieces.** A part in several pieces (the grid's boxes are a coarse sampling of a cell,
//!    and a thin cell can fall apart) keeps its most charged piece; the boxes of the others go
//!    to the parts around them, from the outside in, each to a part's main piece.
//! 1. **Balance.** While the most charged part `P` is above the target, move one of its boxes
//!    `b` to a face-neighbouring part `Q` with `charge(Q) + q_b < charge(P)`. Such a move lowers
//!    the sorted charges lexicographically, so the pass ends. Moves that leave `Q` within the
//!    target come first, fewest cut edges added first; only when there is none may `Q` go over
//!    it (a ripple the next moves carry on), most even pair of charges first. When no box of
//!    `P` can go, a chain of hops through neighbouring parts (each passing on a loaded box,
//!    or one behind a strip of empty boxes with the strip, for the one it gets) may reach a
//!    part with room; failing that, a loaded box of `P` behind a strip may go with the strip;
//!    failing that, a box of `P` may be traded for a lighter one of a neighbour, where the
//!    trade adds no cut edge.
//! 2. **Borders.** Sweeps over the boxes move a box to the neighbouring part holding more of its
//!    faces than its own part, where that part stays within the largest charge the first pass
//!    left. Each move shortens the cut by at least one edge, so the sweeps end.
//!
//! No move empties a part, and after the first step none splits one: a box leaves only if the
//! boxes of its part among its face neighbours stay connected without it: first looked
//! for in the 3×3 square (3×3×3 cube) around it, then, for a part shaped like a ring, over the
//! whole part. Every part that holds a box ends in one piece.
//! Ties go to the lowest box index and part id: the result is deterministic.
//!
//! Each move searches the border of the part it leaves, so the cost is the moves times a
//! border: after the power cells (within 1–5 % of the bound) a few milliseconds, 23 ms on a
//! 1000² map at 16 parts; from far away much more (1000 one-column parts of 1000 boxes at 1.75
//! × the mean: 97,000 moves, 2.3 s). Measurements: docs/peers.md, "Refined box by box".

use crate::grid::Grid;
use crate::problem::Problem;

/// How far [`refine`] goes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RefineSettings {
    /// The balance pass stops once the largest charge is within `(1 + tol)` × the lower bound
    /// (see [`Problem::lower_bound`]); `0` goes on until no move lowers it.
    pub tol: f64,
    /// Moves of the balance pass at most, in units of the grid's boxes (a guard: each move
    /// lowers the sorted charges, so the pass ends anyway).
    pub max_moves_per_box: f64,
    /// Sweeps of the border pass at most.
    pub border_sweeps: usize,
}

impl Default for RefineSettings {
    fn default() -> Self {
        RefineSettings { tol: 0.005, max_moves_per_box: 1.0, border_sweeps: 8 }
    }
}

/// What [`refine`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Refined {
    /// Boxes moved off the pieces of parts that were not in one piece.
    pub mend_moves: usize,
    /// Boxes moved by the balance pass.
    pub balance_moves: usize,
    /// Boxes moved by the border pass.
    pub border_moves: usize,
}

/// Refines `owners` (one part id below `problem.vcores()` per box) in place: see the module
/// documentation.
///
/// ```
/// use pbs::{bisection::kway_rcb, metrics, refine, Grid, Problem};
/// let grid = Grid::new(40, 40)?;
/// let loads: Vec<f64> = (0..grid.len()).map(|k| 1.0 + (k % 7) as f64).collect();
/// let problem = Problem::new(grid, &loads, 10)?;
/// let mut owners = kway_rcb(&grid, &loads, 10)?;
/// let before = metrics::max_avg(&metrics::charges(&owners, &loads, 10));
/// refine::refine(&problem, &mut owners, refine::RefineSettings::default())?;
/// let after = metrics::max_avg(&metrics::charges(&owners, &loads, 10));
/// assert!(after <= before && after <= 1.005 * problem.lower_bound());
/// assert_eq!(metrics::disconnected_parts(&grid, &owners, 10), 0);
/// # Ok::<(), pbs::Error>(())
/// ```
///
/// # Errors
/// [`crate::Error::Parameter`] if `owners` does not hold one part id below the vCore count
/// per box, or a setting is negative or not finite.
pub fn refine(problem: &Problem, owners: &mut [u32], settings: RefineSettings) -> crate::Result<Refined> {
    check_owners(problem, owners)?;
    for (name, v) in [("tol", settings.tol), ("max_moves_per_box", settings.max_moves_per_box)] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(crate::Error::Parameter {
                name, value: v.to_string(), reason: "expected a finite number ≥ 0"
            });
        }
    }
    let pieces = crate::metrics::pieces_if_split(problem.grid(), owners);
    let mut state = State::new(problem, owners);
    let target = (1.0 + settings.tol) * problem.lower_bound() * problem.mean();
    let max_moves = (settings.max_moves_per_box * problem.grid().len() as f64) as usize;
    let mend_moves = pieces.map_or(0, |pieces| state.mend(pieces));
    let balance_moves = state.balance(target, max_moves);
    let border_moves = state.shorten_borders(settings.border_sweeps);
    Ok(Refined { mend_moves, balance_moves, border_moves })
}

/// The first step of [`refine`] alone: each part in pieces keeps its most charged piece and
/// the boxes of the others go to the parts around them, so that every part ends in one piece
/// (none is emptied). Returns the boxes moved. Where every part is in one piece it costs a
/// labelling of the parts and changes nothing: cheap enough for owners that are mostly whole,
/// as a warm start's power cells are.
///
/// ```
/// use pbs::{metrics, refine, Grid, Problem};
/// let grid = Grid::new(6, 1)?;
/// let problem = Problem::new(grid, &[1.0; 6], 2)?;
/// let mut owners = [0, 0, 1, 1, 0, 0]; // part 0 in two pieces
/// assert_eq!(refine::mend(&problem, &mut owners)?, 2);
/// assert_eq!(owners, [0, 0, 1, 1, 1, 1]);
/// assert_eq!(metrics::disconnected_parts(&grid, &owners, 2), 0);
/// # Ok::<(), pbs::Error>(())
/// ```
///
/// # Errors
/// [`crate::Error::Parameter`] if `owners` does not hold one part id below the vCore count
/// per box.
pub fn mend(problem: &Problem, owners: &mut [u32]) -> crate::Result<usize> {
    check_owners(problem, owners)?;
    Ok(crate::metrics::pieces_if_split(problem.grid(), owners)
        .map_or(0, |pieces| State::new(problem, owners).mend(pieces)))
}

/// An error naming the first part id out of range, or a length other than the grid's.
fn check_owners(problem: &Problem, owners: &[u32]) -> crate::Result<()> {
    let parts = problem.vcores();
    if owners.len() == problem.grid().len() && owners.iter().all(|&p| (p as usize) < parts) {
        return Ok(());
    }
    let bad = owners.iter().position(|&p| p as usize >= parts);
    Err(crate::Error::Parameter {
        name: "owners",
        value: match bad {
            Some(k) if owners.len() == problem.grid().len() => format!("part {} at box {k}", owners[k]),
            _ => format!("{} part ids", owners.len()),
        },
        reason: "expected one part id below the vCore count per box of the grid",
    })
}

/// Border boxes from which the balance pass makes several moves per search of a border.
const BATCH_FROM: usize = 512;

/// Boxes the search around a box that may split its part visits at most.
const SEARCH_LIMIT: usize = 4096;

/// Empty boxes a strip of [`State::strip`] crosses at most.
const STRIP_DEPTH: usize = 16;

/// Strips of empty boxes [`State::move_path`] tries before it gives up on a part.
const PATH_TRIES: usize = 8;

/// Pairs of boxes [`State::move_swap`] tries before it gives up on a part.
const SWAP_TRIES: usize = 16;

/// Owners with each part's charge, box count and border boxes, kept in step move by move.
struct State<'p, 'o> {
    grid: Grid,
    loads: &'p [f64],
    owners: &'o mut [u32],
    charge: Vec<f64>,
    count: Vec<usize>,
    /// Per part, every box of it with a face neighbour in another part, and maybe boxes that
    /// have left or no longer border (dropped by [`State::border`]): a move only pushes.
    borders: Vec<Vec<u32>>,
    /// Scratch of [`State::border`]: the pass that last kept each box.
    kept: Vec<u32>,
    pass: u32,
}

/// A candidate move of the balance pass.
struct Candidate {
    tier: u8,
    key: (f64, f64),
    b: u32,
    to: u32,
}

impl<'p, 'o> State<'p, 'o> {
    fn new(problem: &'p Problem, owners: &'o mut [u32]) -> Self {
        let parts = problem.vcores();
        let loads = problem.loads();
        let mut charge = vec![0.0; parts];
        let mut count = vec![0; parts];
        for (k, &p) in owners.iter().enumerate() {
            charge[p as usize] += loads[k];
            count[p as usize] += 1;
        }
        let mut state = State {
            grid: *problem.grid(),
            loads,
            owners,
            charge,
            count,
            borders: vec![Vec::new(); parts],
            kept: vec![0; loads.len()],
            pass: 0,
        };
        // As `on_border` for every box, the coordinates counted rather than divided out: a
        // tenth of the refinement's time on a 1000² grid went to the divisions.
        let [nx, ny, nz] = state.grid.dims();
        let o = &*state.owners;
        let mut k = 0;
        for l in 0..nz {
            for j in 0..ny {
                for i in 0..nx {
                    let p = o[k];
                    let other = (i > 0 && o[k - 1] != p)
                        || (i + 1 < nx && o[k + 1] != p)
                        || (j > 0 && o[k - nx] != p)
                        || (j + 1 < ny && o[k + nx] != p)
                        || (l > 0 && o[k - nx * ny] != p)
                        || (l + 1 < nz && o[k + nx * ny] != p);
                    if other {
                        state.borders[p as usize].push(k as u32);
                    }
                    k += 1;
                }
            }
        }
        state
    }

    /// Whether box `k` has a face neighbour in another part.
    fn on_border(&self, k: usize) -> bool {
        let mut other = false;
        self.grid.for_each_neighbour(k, |n| other |= self.owners[n] != self.owners[k]);
        other
    }

    /// Part `p`'s border boxes, each once, in the order they were found (taken out of
    /// `borders`; give them back with [`State::give_back`]).
    fn border(&mut self, p: usize) -> Vec<u32> {
        if self.pass == u32::MAX {
            // Every pass number has been used: start the marks over rather than wrap.
            self.kept.fill(0);
            self.pass = 0;
        }
        self.pass += 1;
        let mut list = std::mem::take(&mut self.borders[p]);
        list.retain(|&k| {
            let k = k as usize;
            let keep = self.owners[k] as usize == p && self.kept[k] != self.pass && self.on_border(k);
            if keep {
                self.kept[k] = self.pass;
            }
            keep
        });
        list
    }

    fn give_back(&mut self, p: usize, list: Vec<u32>) {
        let pushed = std::mem::replace(&mut self.borders[p], list);
        self.borders[p].extend(pushed);
    }

    fn move_box(&mut self, b: usize, to: u32) {
        let from = self.owners[b] as usize;
        self.owners[b] = to;
        self.count[from] -= 1;
        self.count[to as usize] += 1;
        self.charge[from] -= self.loads[b];
        self.charge[to as usize] += self.loads[b];
        self.borders[to as usize].push(b as u32);
        let (owners, borders) = (&*self.owners, &mut self.borders);
        self.grid.for_each_neighbour(b, |n| {
            if owners[n] as usize == from {
                borders[from].push(n as u32);
            }
        });
    }

    /// The most charged part (lowest id among equals).
    fn heaviest(&self) -> usize {
        let mut best = 0;
        for (p, &c) in self.charge.iter().enumerate() {
            if c > self.charge[best] {
                best = p;
            }
        }
        best
    }

    /// Face neighbours of `b` counted by part: `(part, count)` pairs, at most six.
    fn neighbour_parts(&self, b: usize) -> ([(u32, u8); 6], usize) {
        self.neighbour_parts_among(b, |_| true)
    }

    /// [`State::neighbour_parts`] over the neighbours `n` with `keep(n)` only.
    fn neighbour_parts_among(&self, b: usize, keep: impl Fn(usize) -> bool) -> ([(u32, u8); 6], usize) {
        let mut out = [(0u32, 0u8); 6];
        let mut len = 0;
        self.grid.for_each_neighbour(b, |n| {
            if !keep(n) {
                return;
            }
            let p = self.owners[n];
            match out[..len].iter_mut().find(|e| e.0 == p) {
                Some(e) => e.1 += 1,
                None => {
                    out[len] = (p, 1);
                    len += 1;
                }
            }
        });
        (out, len)
    }

    /// Given the pieces of the owners (from [`crate::metrics::connected_pieces`]), hands every
    /// piece of a part but its main one (the most charged, then the largest,
    /// then the first found) to the parts around it, box by box from the outside in, each box
    /// to the neighbouring part holding most of its faces (the least charged among equals,
    /// then the lowest id; that may be its own part, where boxes moved before it now join it to
    /// its part's main piece). A box only ever joins a main piece, so each part ends in one
    /// piece and none is emptied. Returns the boxes moved.
    fn mend(&mut self, (piece, pieces): crate::metrics::Pieces) -> usize {
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

    fn balance(&mut self, target: f64, max_moves: usize) -> usize {
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
                    let still = self.owners[b] as usize == p && self.touches(b, to);
                    if still && after <= target && after < self.charge[p] && self.may_leave(b) {
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
    /// receives, and staying under `cp`. Found breadth first over the parts (the shortest
    /// chain); towards each neighbour a part passes on the box that adds the fewest cut edges,
    /// else the shortest strip. Applied from its far end, each box only if it may leave and
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
                if x != p && self.charge[x] + gained - q >= cp {
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

    /// Whether box `b` has a face neighbour in part `x`.
    fn touches(&self, b: usize, x: usize) -> bool {
        let mut found = false;
        self.grid.for_each_neighbour(b, |n| found |= self.owners[n] as usize == x);
        found
    }

    /// When no single box of `p` can go, a loaded box behind a strip of empty ones may: the
    /// strip and the box move together to the part on the strip's other side, which must stay
    /// under `cp`. Searched breadth first through `p`'s empty boxes from its borders, so the
    /// shortest strip goes first; at most [`PATH_TRIES`] strips are tried. Returns the boxes
    /// moved, or `None` when none could.
    fn move_path(&mut self, p: usize, cp: f64) -> Option<usize> {
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

    fn shorten_borders(&mut self, sweeps: usize) -> usize {
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

    /// Whether box `b` may leave its part: the part keeps another box, and the part's boxes
    /// among `b`'s face neighbours stay connected without it (then every path through `b` has
    /// a detour, so the part's pieces stay as many).
    fn may_leave(&self, b: usize) -> bool {
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
        let Some(&start) = faces.first() else {
            // `b` is a piece of its own: taking it away leaves one piece fewer.
            return true;
        };
        let mut seen = [false; 27];
        let mut stack = vec![start];
        seen[start] = true;
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
        if faces.iter().all(|&s| seen[s]) {
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

/// The faces that part `part` holds among `near` (from [`State::neighbour_parts`]).
fn faces_in(near: &[(u32, u8)], part: u32) -> u8 {
    near.iter().find(|e| e.0 == part).map_or(0, |e| e.1)
}

/// The strip of boxes that ends at `end`, its border end first: `before` gives each box's
/// predecessor, `usize::MAX` at the border end.
fn trace_back(end: usize, before: impl Fn(usize) -> Option<usize>) -> Vec<usize> {
    let mut path = vec![end];
    while let Some(b) = before(*path.last().expect("not empty")).filter(|&b| b != usize::MAX) {
        path.push(b);
    }
    path.reverse();
    path
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bisection::kway_rcb;
    use crate::loadmap::PerlinMap;
    use crate::metrics;
    use proptest::prelude::*;

    fn refined(grid: Grid, loads: &[f64], parts: usize, owners: &[u32]) -> (Vec<u32>, Refined) {
        let problem = Problem::new(grid, loads, parts).unwrap();
        let mut out = owners.to_vec();
        let r = refine(&problem, &mut out, RefineSettings::default()).unwrap();
        (out, r)
    }

    #[test]
    fn a_lopsided_split_of_a_strip_is_evened_out() {
        // 10 × 1 boxes, part 0 holds 7 of them: two must move, one at a time from the border.
        let grid = Grid::new(10, 1).unwrap();
        let loads = vec![1.0; 10];
        let owners = [0, 0, 0, 0, 0, 0, 0, 1, 1, 1];
        let (out, r) = refined(grid, &loads, 2, &owners);
        assert_eq!(out, [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]);
        assert_eq!(r, Refined { mend_moves: 0, balance_moves: 2, border_moves: 0 });
    }

    #[test]
    fn a_part_in_two_pieces_hands_the_smaller_one_to_its_neighbour() {
        // Part 0's second piece (boxes 4 and 5) goes to part 1 around it; then part 1, now the
        // larger, hands its border box back.
        let grid = Grid::new(6, 1).unwrap();
        let loads = vec![1.0; 6];
        let (out, r) = refined(grid, &loads, 2, &[0, 0, 1, 1, 0, 0]);
        assert_eq!(out, [0, 0, 0, 1, 1, 1]);
        assert_eq!(r, Refined { mend_moves: 2, balance_moves: 1, border_moves: 0 });
    }

    #[test]
    fn pieces_inside_other_pieces_are_mended_from_the_outside_in() {
        // Part 1's ring (8 boxes, its main piece the 10 on the right) encloses part 2's box:
        // the box has no main piece beside it until the ring has gone to part 0 around it.
        let grid = Grid::new(8, 5).unwrap();
        let loads = vec![1.0; 40];
        #[rustfmt::skip]
        let owners = [
            0, 0, 0, 0, 0, 1, 1, 2,
            0, 1, 1, 1, 0, 1, 1, 2,
            0, 1, 2, 1, 0, 1, 1, 2,
            0, 1, 1, 1, 0, 1, 1, 2,
            0, 0, 0, 0, 0, 1, 1, 2,
        ];
        let problem = Problem::new(grid, &loads, 3).unwrap();
        let mut mended = owners;
        assert_eq!(mend(&problem, &mut mended).unwrap(), 9);
        #[rustfmt::skip]
        assert_eq!(mended, [
            0, 0, 0, 0, 0, 1, 1, 2,
            0, 0, 0, 0, 0, 1, 1, 2,
            0, 0, 0, 0, 0, 1, 1, 2,
            0, 0, 0, 0, 0, 1, 1, 2,
            0, 0, 0, 0, 0, 1, 1, 2,
        ]);
        let (out, r) = refined(grid, &loads, 3, &owners);
        assert_eq!(r.mend_moves, 9);
        assert_eq!(metrics::disconnected_parts(&grid, &out, 3), 0, "{out:?}");
    }

    #[test]
    fn a_swap_lowers_a_part_no_single_move_can() {
        // 2 × 2 boxes, rows as parts, 5 against 4: any one box of part 0 takes part 1 to 6 or
        // more, but its 3 for part 1's 2.5 leaves both at 4.5, with the same two cut edges.
        let grid = Grid::new(2, 2).unwrap();
        let loads = [3.0, 2.0, 1.5, 2.5];
        let (out, r) = refined(grid, &loads, 2, &[0, 0, 1, 1]);
        assert_eq!(out, [1, 0, 1, 0]);
        assert_eq!(r.balance_moves, 2);
        assert_eq!(metrics::charges(&out, &loads, 2), vec![4.5, 4.5]);
    }

    #[test]
    fn a_chain_through_a_full_part_reaches_the_one_with_room() {
        // Charges 4, 3, 2 on a strip: part 1 cannot take a box from part 0 (it would reach 4),
        // but it can pass one on to part 2.
        let grid = Grid::new(9, 1).unwrap();
        let (out, r) = refined(grid, &[1.0; 9], 3, &[0, 0, 0, 0, 1, 1, 1, 2, 2]);
        assert_eq!(out, [0, 0, 0, 1, 1, 1, 2, 2, 2]);
        assert_eq!(r.balance_moves, 2);
    }

    #[test]
    fn a_chain_hop_may_carry_a_strip_of_empty_boxes() {
        // Charges 4, 3, 0: part 1 can pass on to part 2 only the loaded box 6 behind the empty
        // box 7, and does, strip and all, for the box it gets from part 0.
        let grid = Grid::new(10, 1).unwrap();
        let loads = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0];
        let (out, _) = refined(grid, &loads, 3, &[0, 0, 0, 0, 1, 1, 1, 1, 2, 2]);
        assert_eq!(&out[..8], [0, 0, 0, 1, 1, 1, 2, 2]);
        assert_eq!(metrics::charges(&out, &loads, 3), [3.0, 3.0, 1.0]);
    }

    #[test]
    fn a_loaded_box_behind_empty_ones_goes_with_them() {
        // Part 0's only border box is empty: the loaded box behind it goes with it.
        let grid = Grid::new(7, 1).unwrap();
        let loads = [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0];
        let (out, r) = refined(grid, &loads, 2, &[0, 0, 0, 0, 1, 1, 1]);
        assert_eq!(out, [0, 0, 1, 1, 1, 1, 1]);
        assert_eq!(r.balance_moves, 2);
    }

    #[test]
    fn a_border_longer_than_the_batch_threshold_still_reaches_the_target() {
        // 40 × 600 boxes split at column 24: a border of 600 boxes, longer than BATCH_FROM.
        let grid = Grid::new(40, 600).unwrap();
        let loads: Vec<f64> = (0..grid.len()).map(|k| 1.0 + (k % 3) as f64).collect();
        let start: Vec<u32> = (0..grid.len()).map(|k| u32::from(grid.coords(k)[0] >= 24)).collect();
        let (out, r) = refined(grid, &loads, 2, &start);
        let charges = metrics::charges(&out, &loads, 2);
        assert!(metrics::max_avg(&charges) <= 1.005, "{charges:?}");
        assert_eq!(metrics::disconnected_parts(&grid, &out, 2), 0);
        assert!(r.balance_moves >= 2000, "{r:?}");
    }

    #[test]
    fn the_strip_fallback_moves_a_loaded_box_with_the_empty_ones_in_front() {
        // `move_path` on its own (the chains find this strip first in `refine`).
        let grid = Grid::new(7, 1).unwrap();
        let loads = [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0];
        let problem = Problem::new(grid, &loads, 2).unwrap();
        let mut owners = [0, 0, 0, 0, 1, 1, 1];
        let mut state = State::new(&problem, &mut owners);
        assert_eq!(state.move_path(0, 3.0), Some(2));
        assert_eq!(state.charge, [2.0, 1.0]);
        assert_eq!(state.move_path(0, 1.0), None, "part 1 would reach 2, not under 1");
        assert_eq!(owners, [0, 0, 1, 1, 1, 1, 1]);
    }

    #[test]
    fn a_box_that_would_split_its_part_stays() {
        // Part 0 is a ring of 8 boxes around part 1's single box; part 2 the column beside.
        // Every ring box but the corners holds the ring together only through its corners.
        let grid = Grid::new(4, 3).unwrap();
        let loads = vec![1.0; 12];
        #[rustfmt::skip]
        let owners = [
            0, 0, 0, 2,
            0, 1, 0, 2,
            0, 0, 0, 2,
        ];
        let (out, _) = refined(grid, &loads, 3, &owners);
        assert_eq!(metrics::disconnected_parts(&grid, &out, 3), 0, "{out:?}");
        assert!(
            metrics::max_avg(&metrics::charges(&out, &loads, 3))
                < metrics::max_avg(&metrics::charges(&owners, &loads, 3))
        );
    }

    #[test]
    fn the_local_test_knows_a_thin_wall_from_a_corner() {
        let grid = Grid::new(3, 3).unwrap();
        let loads = vec![1.0; 9];
        let problem = Problem::new(grid, &loads, 2).unwrap();
        // A vertical wall of part 0 in the middle column: its centre joins top and bottom.
        let mut wall = [1, 0, 1, 1, 0, 1, 1, 0, 1];
        let state = State::new(&problem, &mut wall);
        assert!(!state.may_leave(4));
        assert!(state.may_leave(1), "an end of the wall");
        // An L of part 0: the corner joins its two arms only through itself... and through
        // the diagonal box, which is part 0 too: it may leave.
        let mut ell = [0, 0, 1, 0, 0, 1, 1, 1, 1];
        let state = State::new(&problem, &mut ell);
        assert!(state.may_leave(0));
        let mut bare = [0, 0, 1, 0, 1, 1, 1, 1, 1];
        let state = State::new(&problem, &mut bare);
        assert!(!state.may_leave(0), "the corner of an L is its only link");
    }

    #[test]
    fn the_3d_test_sees_the_third_axis() {
        let grid = Grid::new_3d(1, 1, 3).unwrap();
        let loads = vec![1.0; 3];
        let problem = Problem::new(grid, &loads, 2).unwrap();
        let mut column = [0, 0, 0];
        let state = State::new(&problem, &mut column);
        assert!(!state.may_leave(1) && state.may_leave(0) && state.may_leave(2));
    }

    #[test]
    fn bad_owners_and_settings_are_named() {
        let grid = Grid::new(4, 4).unwrap();
        let loads = vec![1.0; 16];
        let problem = Problem::new(grid, &loads, 2).unwrap();
        let err = refine(&problem, &mut [0u32; 15], RefineSettings::default()).unwrap_err();
        assert!(err.to_string().contains("owners"), "{err}");
        let err = refine(&problem, &mut [2u32; 16], RefineSettings::default()).unwrap_err();
        assert!(err.to_string().contains("part 2 at box 0"), "{err}");
        let bad = RefineSettings { tol: f64::NAN, ..RefineSettings::default() };
        let err = refine(&problem, &mut [0u32; 16], bad).unwrap_err();
        assert!(err.to_string().contains("tol"), "{err}");
    }

    #[test]
    fn zero_and_extreme_loads_refine_without_trouble() {
        let grid = Grid::new(12, 9).unwrap();
        let start = kway_rcb(&grid, &[1.0; 108], 5).unwrap();
        let zeros = [0.0; 108];
        let (out, r) = refined(grid, &zeros, 5, &start);
        assert_eq!(r.balance_moves, 0, "nothing to balance");
        assert!(metrics::edge_cut(&grid, &out) <= metrics::edge_cut(&grid, &start));
        let extreme: Vec<f64> = (0..108).map(|k| if k % 5 == 0 { 1e300 } else { 1e-300 * k as f64 }).collect();
        let problem = Problem::new(grid, &extreme, 5).unwrap();
        let mut owners = start.clone();
        refine(&problem, &mut owners, RefineSettings { tol: 0.0, ..RefineSettings::default() }).unwrap();
        let max = |o: &[u32]| metrics::max_avg(&metrics::charges(o, problem.loads(), 5));
        assert!(max(&owners) <= max(&start));
        assert_eq!(metrics::disconnected_parts(&grid, &owners, 5), metrics::disconnected_parts(&grid, &start, 5));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// On Perlin maps from a k-way RCB, whole or with boxes scattered: every part ends in
        /// one piece and none is emptied; from whole parts the largest charge never rises; the
        /// border pass never lengthens the cut; the run is deterministic.
        #[test]
        fn refinement_only_improves(
            seed in 0u32..1000,
            side in 8usize..40,
            parts in 2usize..20,
            nz in 1usize..3,
            scattered in proptest::bool::ANY,
        ) {
            let grid = Grid::new_3d(side, side, nz).unwrap();
            prop_assume!(grid.len() >= 4 * parts);
            let loads = PerlinMap::with_seed(seed).loads_3d(&grid);
            let mut start = kway_rcb(&grid, &loads, parts).unwrap();
            if scattered {
                // One box in 13 handed to some part: parts in pieces to start from.
                for k in (seed as usize % 13..grid.len()).step_by(13) {
                    start[k] = ((k * 7 + seed as usize) % parts) as u32;
                }
            }
            let (out, r) = refined(grid, &loads, parts, &start);
            let whole = metrics::disconnected_parts(&grid, &start, parts) == 0;
            prop_assert_eq!(r.mend_moves == 0, whole);
            let max = |o: &[u32]| metrics::charges(o, &loads, parts).into_iter().fold(0.0, f64::max);
            prop_assert!(!whole || max(&out) <= max(&start) * (1.0 + 1e-12));
            prop_assert_eq!(metrics::disconnected_parts(&grid, &out, parts), 0, "{:?}", out);
            let mut count = vec![0usize; parts];
            out.iter().for_each(|&p| count[p as usize] += 1);
            prop_assert!(count.iter().all(|&c| c > 0) || start.iter().collect::<std::collections::BTreeSet<_>>().len() < parts);
            // Replaying the balance pass alone, then the borders: the second only shortens.
            let problem = Problem::new(grid, &loads, parts).unwrap();
            let mut balanced = start.clone();
            refine(&problem, &mut balanced, RefineSettings { border_sweeps: 0, ..RefineSettings::default() }).unwrap();
            prop_assert!(metrics::edge_cut(&grid, &out) + r.border_moves <= metrics::edge_cut(&grid, &balanced));
            prop_assert_eq!(refined(grid, &loads, parts, &start).0, out);
        }

        /// From owners drawn at random (most parts in many pieces) on small 1D, 2D and 3D
        /// grids, with uniform, integer, sparse or fractional loads: every part ends in one
        /// piece, none is emptied, and the run is deterministic.
        #[test]
        fn random_owners_end_in_one_piece_each(
            nx in 1usize..12,
            ny in 1usize..12,
            nz in 1usize..3,
            parts in 1usize..12,
            kind in 0u8..4,
            seed in 0u64..u64::MAX,
        ) {
            let grid = Grid::new_3d(nx, ny, nz).unwrap();
            let n = grid.len();
            prop_assume!(parts <= n);
            let mut rng = crate::rng::SplitMix64::new(seed);
            let loads: Vec<f64> = (0..n)
                .map(|_| {
                    let r = rng.next_u64();
                    match kind {
                        0 => 1.0,
                        1 => (r % 5) as f64,
                        2 => if r % 10 == 0 { 100.0 } else { 0.0 },
                        _ => (r % 1000) as f64 * 1e-3,
                    }
                })
                .collect();
            let Ok(problem) = Problem::new(grid, &loads, parts) else { return Ok(()) };
            let start: Vec<u32> = (0..n).map(|_| (rng.next_u64() % parts as u64) as u32).collect();
            let mut out = start.clone();
            refine(&problem, &mut out, RefineSettings::default()).unwrap();
            prop_assert_eq!(metrics::disconnected_parts(&grid, &out, parts), 0, "{:?} -> {:?}", start, out);
            let held = |o: &[u32]| o.iter().copied().collect::<std::collections::BTreeSet<u32>>();
            prop_assert_eq!(held(&start), held(&out));
            let mut again = start.clone();
            refine(&problem, &mut again, RefineSettings::default()).unwrap();
            prop_assert_eq!(again, out);
        }
    }
}
