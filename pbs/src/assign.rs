//! Cell assignment: the owner of every box, `owner(k) = argmin_i |c_k − x_i|² − w_i`, ties to
//! the lowest `i`. With all weights zero these are Voronoi cells; otherwise power cells.
//!
//! The paper scans every vCore for every box, O(vCores × boxes) per step, and names it its
//! bottleneck. [`assign`] instead splits the grid recursively (a kd split of box index
//! ranges) and carries down a candidate list: at each node it bounds every candidate's power
//! distance over the node's box centres (`lo_i ≤ s_i(c) ≤ hi_i`) and drops every site whose
//! `lo_i` exceeds the second-smallest `hi` — such a site can be neither the best nor the
//! second best for any box in the node. Interior regions end with two candidates after a few
//! levels, so the cost is about `O(boxes · c + vCores · log boxes)` with `c` the handful of
//! sites near a box. The result is bit-identical to [`assign_brute`], the test oracle: the
//! leaves evaluate the same expression in the same site order.
//!
//! The second-best site and the gap to it come for free and are what the power-cell balancer
//! uses to know how far each boundary is from flipping.
//!
//! [`assign_on`] cuts the grid into bands of rows and hands them to [`Workers`] (the
//! scheduler's pool, idle while it waits for a rebalancing), with the same result;
//! [`assign_by_bands`] assigns the same bands one after another and shows each to its caller
//! as soon as it is decided, so that a balancer's trial can be dropped before the rest.

use crate::grid::{dist2, Grid, Point};

/// Marks "no second site" (a single vCore).
pub const NONE: u32 = u32::MAX;

/// Per-box result of an assignment.
#[derive(Debug, Default, PartialEq)]
pub struct Assignment {
    /// Owner vCore of every box.
    pub owner: Vec<u32>,
    /// Power distance of every box to its owner.
    pub score: Vec<f64>,
    /// Second-best vCore of every box ([`NONE`] with a single vCore).
    pub second: Vec<u32>,
    /// Power-distance gap between the second best and the owner (≥ 0; infinite with one vCore).
    pub gap: Vec<f64>,
}

/// `clone_from` keeps the arrays' memory: an executor copies the vCores for every rebalancing
/// it hands to another thread.
impl Clone for Assignment {
    fn clone(&self) -> Assignment {
        let Assignment { owner, score, second, gap } = self;
        Assignment { owner: owner.clone(), score: score.clone(), second: second.clone(), gap: gap.clone() }
    }

    fn clone_from(&mut self, source: &Assignment) {
        let Assignment { owner, score, second, gap } = self;
        owner.clone_from(&source.owner);
        score.clone_from(&source.score);
        second.clone_from(&source.second);
        gap.clone_from(&source.gap);
    }
}

impl Assignment {
    /// Sizes the arrays for `n` boxes. Every entry is then overwritten, so arrays of the right
    /// size are left as they are: clearing them wrote every cache line twice, and in
    /// [`assign_on`] pulled every band's lines back to the calling thread before its worker
    /// wrote them.
    fn reset(&mut self, n: usize) {
        if self.owner.len() == n && self.score.len() == n && self.second.len() == n && self.gap.len() == n {
            return;
        }
        self.owner.clear();
        self.owner.resize(n, 0);
        self.score.clear();
        self.score.resize(n, 0.0);
        self.second.clear();
        self.second.resize(n, NONE);
        self.gap.clear();
        self.gap.resize(n, f64::INFINITY);
    }
}

/// Best and second best of one box over `sites`, in the given order (ties keep the earlier).
#[inline]
fn best_two(c: &Point, sites: &[Point], weights: &[f64], order: impl Iterator<Item = u32>) -> (u32, f64, u32, f64) {
    let (mut b, mut sb, mut s, mut ss) = (NONE, f64::INFINITY, NONE, f64::INFINITY);
    for i in order {
        let v = dist2(c, &sites[i as usize]) - weights[i as usize];
        if v < sb {
            s = b;
            ss = sb;
            b = i;
            sb = v;
        } else if v < ss {
            s = i;
            ss = v;
        }
    }
    (b, sb, s, ss)
}

/// The part of an [`Assignment`] that one call of the recursion writes: boxes `base..` of the
/// grid, as disjoint slices, so that bands of the grid can be assigned in parallel.
struct Out<'a> {
    base: usize,
    owner: &'a mut [u32],
    score: &'a mut [f64],
    second: &'a mut [u32],
    gap: &'a mut [f64],
}

impl<'a> Out<'a> {
    fn whole(a: &'a mut Assignment) -> Out<'a> {
        Out { base: 0, owner: &mut a.owner, score: &mut a.score, second: &mut a.second, gap: &mut a.gap }
    }

    /// Cuts off the first `len` boxes as their own part.
    fn split_front(&mut self, len: usize) -> Out<'a> {
        let owner = std::mem::take(&mut self.owner).split_at_mut(len);
        let score = std::mem::take(&mut self.score).split_at_mut(len);
        let second = std::mem::take(&mut self.second).split_at_mut(len);
        let gap = std::mem::take(&mut self.gap).split_at_mut(len);
        let front = Out { base: self.base, owner: owner.0, score: score.0, second: second.0, gap: gap.0 };
        (self.base, self.owner, self.score, self.second, self.gap) =
            (self.base + len, owner.1, score.1, second.1, gap.1);
        front
    }
}

#[inline]
fn store(out: &mut Out, k: usize, (b, sb, s, ss): (u32, f64, u32, f64)) {
    let k = k - out.base;
    out.owner[k] = b;
    out.score[k] = sb;
    out.second[k] = s;
    out.gap[k] = if s == NONE { f64::INFINITY } else { ss - sb };
}

/// Reference assignment: every vCore for every box. O(vCores × boxes); the oracle for tests.
pub fn assign_brute(grid: &Grid, sites: &[Point], weights: &[f64], out: &mut Assignment) {
    assert_eq!(sites.len(), weights.len());
    assert!(!sites.is_empty(), "assignment needs at least one vCore");
    out.reset(grid.len());
    let mut out = Out::whole(out);
    for k in 0..grid.len() {
        let r = best_two(&grid.centre(k), sites, weights, 0..sites.len() as u32);
        store(&mut out, k, r);
    }
}

/// Nodes with at most this many boxes are evaluated directly. Halving the grid makes nodes of
/// 64, 32 and 16 boxes; 32 was the fastest of the three (7–10 % under 16 from 64² boxes over
/// 16 vCores to 256² over 256, `assign_probe`): below it a split's pruning costs more than the
/// candidates it drops.
const LEAF_BOXES: usize = 32;

/// [`LEAF_BOXES`] on a 3D grid. A 3D box has more sites near it than a 2D one (5.8 candidates a
/// box at 32-box leaves over 72 random sites on 26³ boxes, against 3.5 on 150²), so a leaf
/// prunes less per box and a split costs as much: leaves of 64 boxes took pbs's power cells on
/// drifting Perlin cubes (26³ boxes, 72 parts, `pbs-bench peers --dims 3 --sequence 20
/// --methods pbs-cells`) 0.94 × the time a warm step and 0.83 × a cold start against 32, and
/// were as fast as 48 and faster than 96 and 128 (three rounds each, in turn).
const LEAF_BOXES_3D: usize = 64;

/// Fast assignment, identical to [`assign_brute`]. See the module documentation.
pub fn assign(grid: &Grid, sites: &[Point], weights: &[f64], out: &mut Assignment) {
    let ctx = Ctx::new(grid, sites, weights);
    out.reset(grid.len());
    ctx.region([0, 0, 0], grid.dims(), &mut Out::whole(out));
}

/// Threads an assignment may share: runs `job(part)` for every `part` in `0..parts`
/// (`parts ≤ count()`), each part once, and returns when all have finished. The
/// scheduler's pool implements it, so a rebalancing's assignments run on the threads that
/// would otherwise wait for it.
pub trait Workers: Sync {
    /// Threads available.
    fn count(&self) -> usize;
    /// Runs `job(0)`, …, `job(parts − 1)`, possibly at the same time, and waits for them.
    fn run(&self, parts: usize, job: &(dyn Fn(usize) + Sync));
}

/// Least work worth a part of its own, in nanoseconds of serial assignment: handing a part
/// to another thread and waiting for it costs about a microsecond (an empty pool phase on 2
/// threads: 0.8 µs median), and its results must travel back to the caller's cache.
const MIN_PART_NS: f64 = 4000.0;

/// What a box's result (24 bytes) costs the caller when another core wrote it: the
/// balancer reads every owner and gap right after. With two sites a box is decided in about
/// as long, so sharing two-site grids does not pay (docs/design-notes.md, "Parallel
/// assignment").
const RETURN_NS: f64 = 3.0;

/// Serial assignment time per box, nanoseconds, on the low side of what was measured. It only
/// decides how many parts a grid is worth; the assignment is the same whatever it says.
fn box_ns(sites: usize) -> f64 {
    match sites {
        0..=2 => 3.5,
        3..=4 => 8.0,
        _ => 16.0,
    }
}

/// [`assign`], with the grid cut into bands of rows (layers in 3D) assigned by `workers` in
/// parallel; identical results (each band runs the same recursion, and every box is decided
/// by the same expression over the same sites in the same order). Without workers, or when
/// the work is too small to share (under about 4 µs a part), it is [`assign`].
pub fn assign_on(workers: Option<&dyn Workers>, grid: &Grid, sites: &[Point], weights: &[f64], out: &mut Assignment) {
    let parts = shared_parts(workers, grid, sites.len());
    let Some(workers) = workers.filter(|_| parts > 1) else {
        return assign(grid, sites, weights, out);
    };
    let ctx = Ctx::new(grid, sites, weights);
    out.reset(grid.len());
    let mut rest = Out::whole(out);
    let bands: Vec<([usize; 3], [usize; 3], std::sync::Mutex<Out>)> =
        bands(grid, parts).map(|(lo, hi, len)| (lo, hi, std::sync::Mutex::new(rest.split_front(len)))).collect();
    workers.run(parts, &|p| {
        let (lo, hi, out) = &bands[p];
        ctx.region(*lo, *hi, &mut out.lock().expect("each band is locked once"));
    });
}

/// The bands [`assign_on`] shares among `workers` for a grid and a number of sites: as many as
/// the workers and the grid's slices allow, at most one per 4 µs or so of serial work;
/// 0 or 1 where it assigns alone.
pub(crate) fn shared_parts(workers: Option<&dyn Workers>, grid: &Grid, sites: usize) -> usize {
    let Some(workers) = workers else {
        return 0;
    };
    let slices = grid.dims()[band_axis(grid)];
    let worth = (grid.len() as f64 * (box_ns(sites) - RETURN_NS) / MIN_PART_NS) as usize;
    workers.count().min(slices).min(worth)
}

/// [`assign`] one band of rows (layers in 3D) after another, `parts` bands (fewer on a grid
/// with fewer rows), handing each band's box range and owners to `after` as soon as they are
/// decided. Stops when `after` returns false, the later bands' boxes then left as they were;
/// returns whether every band was assigned. The owners are those of [`assign`]: each band runs
/// the same recursion as [`assign_on`]'s.
pub fn assign_by_bands(
    grid: &Grid,
    sites: &[Point],
    weights: &[f64],
    out: &mut Assignment,
    parts: usize,
    mut after: impl FnMut(std::ops::Range<usize>, &[u32]) -> bool,
) -> bool {
    let ctx = Ctx::new(grid, sites, weights);
    out.reset(grid.len());
    let mut rest = Out::whole(out);
    for (lo, hi, len) in bands(grid, parts.clamp(1, grid.dims()[band_axis(grid)])) {
        let mut band = rest.split_front(len);
        ctx.region(lo, hi, &mut band);
        if !after(band.base..band.base + len, band.owner) {
            return false;
        }
    }
    true
}

/// The axis [`bands`] cut: the outermost with more than one slice, so that each band is a
/// contiguous range of box indices.
fn band_axis(grid: &Grid) -> usize {
    if grid.nz() > 1 {
        2
    } else {
        1
    }
}

/// `parts` bands of slices along [`band_axis`] (`1 ≤ parts ≤` its slices), in box order: each
/// band's index ranges per axis and its number of boxes.
fn bands(grid: &Grid, parts: usize) -> impl Iterator<Item = ([usize; 3], [usize; 3], usize)> + '_ {
    let axis = band_axis(grid);
    let slices = grid.dims()[axis];
    let per_slice = grid.len() / slices;
    (0..parts).map(move |p| {
        let (from, to) = (p * slices / parts, (p + 1) * slices / parts);
        let (mut lo, mut hi) = ([0, 0, 0], grid.dims());
        (lo[axis], hi[axis]) = (from, to);
        (lo, hi, (to - from) * per_slice)
    })
}

/// Buffers reused across the recursion: the candidate stack, per-candidate bounds, and the
/// leaf's candidates laid out contiguously (x, y, z, weight, id) for a tight inner loop.
#[derive(Default)]
struct Scratch {
    stack: Vec<u32>,
    bounds: Vec<(f64, f64)>,
    leaf: Vec<[f64; 4]>,
}

struct Ctx<'a> {
    grid: &'a Grid,
    sites: &'a [Point],
    weights: &'a [f64],
    flat: bool,
    /// Nodes with at most this many boxes are evaluated directly.
    leaf_boxes: usize,
}

impl<'a> Ctx<'a> {
    fn new(grid: &'a Grid, sites: &'a [Point], weights: &'a [f64]) -> Ctx<'a> {
        assert_eq!(sites.len(), weights.len());
        assert!(!sites.is_empty(), "assignment needs at least one vCore");
        // On a 2D grid with every site in the plane z = 0.5 the z term is exactly zero.
        let flat = grid.nz() == 1 && sites.iter().all(|s| s[2] == 0.5);
        let leaf_boxes = if grid.nz() > 1 { LEAF_BOXES_3D } else { LEAF_BOXES };
        Ctx { grid, sites, weights, flat, leaf_boxes }
    }

    /// Assigns the boxes with index ranges `lo..hi` (per axis), every site a candidate.
    fn region(&self, lo: [usize; 3], hi: [usize; 3], out: &mut Out) {
        let n = self.sites.len();
        let mut scratch = Scratch { stack: (0..n as u32).collect(), ..Scratch::default() };
        self.node(lo, hi, 0..n, &mut scratch, out);
    }

    /// Assigns the boxes with index ranges `lo..hi` (per axis); `stack[cands]` holds, in
    /// ascending order, every site that can be first or second for one of them.
    fn node(
        &self,
        lo: [usize; 3],
        hi: [usize; 3],
        cands: std::ops::Range<usize>,
        scratch: &mut Scratch,
        out: &mut Out,
    ) {
        let nboxes = (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);
        let cands = if cands.len() > 2 && nboxes > self.leaf_boxes {
            self.prune(lo, hi, cands, &mut scratch.stack, &mut scratch.bounds)
        } else {
            cands
        };
        if cands.len() <= 2 || nboxes <= self.leaf_boxes {
            self.leaf(lo, hi, cands, scratch, out);
            return;
        }
        // Split the longest axis in two.
        let axis = (0..3).max_by_key(|&d| (hi[d] - lo[d], usize::MAX - d)).unwrap();
        let mid = (lo[axis] + hi[axis]) / 2;
        let (mut hi_a, mut lo_b) = (hi, lo);
        hi_a[axis] = mid;
        lo_b[axis] = mid;
        let keep = scratch.stack.len();
        self.node(lo, hi_a, cands.clone(), scratch, out);
        scratch.stack.truncate(keep);
        self.node(lo_b, hi, cands, scratch, out);
        scratch.stack.truncate(keep);
    }

    /// Appends to `stack` the candidates that survive for this node; returns their range.
    ///
    /// The difference of two power distances, `s_i(c) − s_a(c) = 2c·(x_a − x_i) + |x_i|² −
    /// |x_a|² − w_i + w_a`, is affine in `c`, so its minimum over the node's box centres (a
    /// rectangle) is exact: its value at the middle minus `|gradient|·half-width` per axis.
    /// Take the two sites `a`, `b` with the lowest power at the node's middle: a site above
    /// both at every box of the node is neither first nor second anywhere in it and is dropped.
    /// (A bound of each site's power alone, nearest against farthest corner, kept about twice
    /// as many sites: 5.5 per box with 16 vCores on 32×32 boxes.)
    fn prune(
        &self,
        lo: [usize; 3],
        hi: [usize; 3],
        cands: std::ops::Range<usize>,
        stack: &mut Vec<u32>,
        bounds: &mut Vec<(f64, f64)>,
    ) -> std::ops::Range<usize> {
        // Box centres of the node span [lo + 0.5, hi − 0.5] per axis.
        let mid: Point = std::array::from_fn(|d| (lo[d] + hi[d]) as f64 / 2.0);
        let half: Point = std::array::from_fn(|d| (hi[d] - lo[d] - 1) as f64 / 2.0);
        // (power at the middle, |x|² − w) per candidate; the two lowest powers, earlier first.
        bounds.clear();
        let (mut a, mut b) = (usize::MAX, usize::MAX);
        for (n, &i) in stack[cands.clone()].iter().enumerate() {
            let (x, w) = (&self.sites[i as usize], self.weights[i as usize]);
            let p = dist2(&mid, x) - w;
            bounds.push((p, x[0] * x[0] + x[1] * x[1] + x[2] * x[2] - w));
            if a == usize::MAX || p < bounds[a].0 {
                b = a;
                a = n;
            } else if b == usize::MAX || p < bounds[b].0 {
                b = n;
            }
        }
        let sites: [&Point; 2] =
            [&self.sites[stack[cands.start + a] as usize], &self.sites[stack[cands.start + b] as usize]];
        // Lowest value of s_i − s_r over the node (see above), and a rounding margin: only a
        // site clearly above both is dropped, so the result stays exactly the oracle's.
        let above = |x: &Point, c: (f64, f64), r: usize| {
            let (xr, cr) = (sites[r], bounds[[a, b][r]]);
            let spread: f64 = (0..3).map(|d| 2.0 * (xr[d] - x[d]).abs() * half[d]).sum();
            let low = c.0 - cr.0 - spread;
            low > 1e-9 * (1.0 + c.0.abs() + cr.0.abs() + spread + c.1.abs() + cr.1.abs())
        };
        // Every candidate is written and only the kept ones advance the end: whether a site
        // is dropped is data, not a pattern, and a branch on it was mispredicted often.
        let start = stack.len();
        stack.resize(start + cands.len(), 0);
        let mut end = start;
        for (n, idx) in cands.enumerate() {
            let i = stack[idx];
            let x = &self.sites[i as usize];
            let dropped = (n != a) & (n != b) & above(x, bounds[n], 0) & above(x, bounds[n], 1);
            stack[end] = i;
            end += usize::from(!dropped);
        }
        stack.truncate(end);
        start..end
    }

    /// Evaluates every box of the node against its candidates. Same expression and the same
    /// site order as [`best_two`], hence the same bits; z is skipped when every site lies in the
    /// plane of a 2D grid, where its term is exactly `0.0`. The updates are written as selects so that the compiler can
    /// avoid unpredictable branches.
    fn leaf(
        &self,
        lo: [usize; 3],
        hi: [usize; 3],
        cands: std::ops::Range<usize>,
        scratch: &mut Scratch,
        out: &mut Out,
    ) {
        let ids = &scratch.stack[cands];
        #[cfg(test)]
        tests::EVALUATED.with(|e| e.set(e.get() + ids.len() * (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2])));
        scratch.leaf.clear();
        scratch.leaf.extend(ids.iter().map(|&i| {
            let x = &self.sites[i as usize];
            [x[0], x[1], x[2], self.weights[i as usize]]
        }));
        let flat = self.flat;
        if let ([first, second], true) = (&scratch.leaf[..], flat) {
            // Two threads, or the interior of a larger diagram: the same expressions as below,
            // without the loop over candidates (the common case, twice as fast).
            let (id0, id1) = (ids[0], ids[1]);
            for j in lo[1]..hi[1] {
                let cy = j as f64 + 0.5;
                let row = self.grid.index(0, j, 0);
                for i in lo[0]..hi[0] {
                    let cx = i as f64 + 0.5;
                    let power = |site: &[f64; 4]| {
                        let (dx, dy) = (cx - site[0], cy - site[1]);
                        dx * dx + dy * dy - site[3]
                    };
                    let (v0, v1) = (power(first), power(second));
                    let swap = v1 < v0;
                    let best = if swap { (id1, v1, id0, v0) } else { (id0, v0, id1, v1) };
                    store(out, row + i, best);
                }
            }
            return;
        }
        // The boxes of a row in groups of LANES, each box's running best two in a lane of its
        // own: one box's comparisons form a chain from site to site, and independent lanes let
        // the processor work on four boxes at once. `best_two`'s branches are masks and min/max
        // here (which site wins a box is data the branch predictor cannot learn); together
        // 1.15–1.45 × faster than branching box after box (`assign_probe`). The same
        // expression per box and site, sites in the same order: the same bits.
        for l in lo[2]..hi[2] {
            let cz = l as f64 + 0.5;
            for j in lo[1]..hi[1] {
                let cy = j as f64 + 0.5;
                let row = self.grid.index(0, j, l);
                let mut i0 = lo[0];
                while i0 < hi[0] {
                    let m = (hi[0] - i0).min(LANES);
                    let cx: [f64; LANES] = std::array::from_fn(|t| (i0 + t) as f64 + 0.5);
                    let (mut b, mut sb, mut s, mut ss) =
                        ([NONE; LANES], [f64::INFINITY; LANES], [NONE; LANES], [f64::INFINITY; LANES]);
                    for (site, &id) in scratch.leaf.iter().zip(ids) {
                        let dy = cy - site[1];
                        let dz = cz - site[2];
                        for t in 0..LANES {
                            let dx = cx[t] - site[0];
                            let d2 = if flat { dx * dx + dy * dy } else { dx * dx + dy * dy + dz * dz };
                            let v = d2 - site[3];
                            let (first, second) = (v < sb[t], v < ss[t]);
                            let (mf, ms) = (0u32.wrapping_sub(first as u32), 0u32.wrapping_sub(second as u32));
                            s[t] = (b[t] & mf) | (id & ms & !mf) | (s[t] & !(mf | ms));
                            b[t] = (id & mf) | (b[t] & !mf);
                            // The old best if v beats it, else the lower of v and the old
                            // second (equal values keep the old second's, the same bits).
                            let low = if second { v } else { ss[t] };
                            ss[t] = if sb[t] < low { low } else { sb[t] };
                            sb[t] = if first { v } else { sb[t] };
                        }
                    }
                    for t in 0..m {
                        store(out, row + i0 + t, (b[t], sb[t], s[t], ss[t]));
                    }
                    i0 += m;
                }
            }
        }
    }
}

/// Boxes of a row evaluated side by side in a leaf (see [`Ctx::leaf`]); 2 and 8 were slower.
const LANES: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;
    use std::cell::Cell;

    thread_local! {
        /// Box × candidate evaluations in the leaves of this thread's assignments.
        pub(super) static EVALUATED: Cell<usize> = const { Cell::new(0) };
    }

    fn random_sites(grid: &Grid, n: usize, seed: u64, wscale: f64) -> (Vec<Point>, Vec<f64>) {
        let mut r = SplitMix64::new(seed);
        let e = grid.extent();
        let sites =
            (0..n).map(|_| grid.clamp([r.next_f64() * e[0], r.next_f64() * e[1], r.next_f64() * e[2]])).collect();
        let w = (0..n).map(|_| (r.next_f64() - 0.5) * wscale).collect();
        (sites, w)
    }

    #[test]
    fn fast_equals_brute_on_random_power_diagrams() {
        for (seed, (nx, ny, nz), n, ws) in [
            (1, (50, 50, 1), 10, 0.0),
            (2, (37, 23, 1), 72, 40.0),
            (3, (12, 9, 7), 30, 10.0),
            (4, (80, 40, 1), 1, 0.0),
            (5, (64, 64, 1), 300, 200.0),
            (6, (32, 32, 1), 2, 30.0),
            (7, (33, 17, 1), 3, 5.0),
        ] {
            let g = Grid::new_3d(nx, ny, nz).unwrap();
            let (s, w) = random_sites(&g, n, seed, ws);
            let (mut a, mut b) = (Assignment::default(), Assignment::default());
            assign(&g, &s, &w, &mut a);
            assign_brute(&g, &s, &w, &mut b);
            assert_eq!(a, b, "grid {nx}x{ny}x{nz}, {n} sites");
        }
    }

    /// Runs the parts on scoped threads, all at once.
    struct Threads(usize);
    impl Workers for Threads {
        fn count(&self) -> usize {
            self.0
        }
        fn run(&self, parts: usize, job: &(dyn Fn(usize) + Sync)) {
            assert!(parts <= self.0);
            std::thread::scope(|s| {
                for p in 0..parts {
                    s.spawn(move || job(p));
                }
            });
        }
    }

    #[test]
    fn bands_on_threads_equal_brute() {
        for (seed, (nx, ny, nz), n, ws, threads) in [
            (1, (50, 50, 1), 10, 0.0, 2),
            (2, (37, 23, 1), 72, 40.0, 3),
            (3, (12, 9, 7), 30, 10.0, 4),
            (4, (400, 100, 1), 1, 0.0, 4),
            (5, (64, 64, 1), 300, 200.0, 16),
            (6, (300, 300, 1), 2, 30.0, 2),
            (7, (33, 17, 1), 3, 5.0, 5),
            (8, (16, 16, 4), 16, 5.0, 3),
        ] {
            let g = Grid::new_3d(nx, ny, nz).unwrap();
            let (s, w) = random_sites(&g, n, seed, ws);
            let (mut a, mut b) = (Assignment::default(), Assignment::default());
            assign_on(Some(&Threads(threads)), &g, &s, &w, &mut a);
            assign_brute(&g, &s, &w, &mut b);
            assert_eq!(a, b, "grid {nx}x{ny}x{nz}, {n} sites, {threads} threads");
        }
    }

    /// Band after band, the owners of the whole assignment, the bands' box ranges in order and
    /// covering the grid; stopped after a band, the later boxes are not touched.
    #[test]
    fn bands_in_turn_equal_brute_and_stop_when_asked() {
        for (seed, (nx, ny, nz), n, ws, parts) in [
            (1, (50, 50, 1), 10, 0.0, 8),
            (2, (37, 23, 1), 72, 40.0, 5),
            (3, (12, 9, 7), 30, 10.0, 3),
            (5, (64, 64, 1), 300, 200.0, 16),
            (7, (33, 17, 1), 3, 5.0, 40),
            (8, (16, 16, 4), 16, 5.0, 1),
        ] {
            let g = Grid::new_3d(nx, ny, nz).unwrap();
            let (s, w) = random_sites(&g, n, seed, ws);
            let (mut a, mut b) = (Assignment::default(), Assignment::default());
            let mut seen = Vec::new();
            let whole = assign_by_bands(&g, &s, &w, &mut a, parts, |boxes, owners| {
                assert_eq!(boxes.len(), owners.len());
                seen.push(boxes);
                true
            });
            assign_brute(&g, &s, &w, &mut b);
            assert!(whole);
            assert_eq!(a, b, "grid {nx}x{ny}x{nz}, {n} sites, {parts} bands");
            assert_eq!(seen.len(), parts.min(if nz > 1 { nz } else { ny }));
            assert!(seen.windows(2).all(|p| p[0].end == p[1].start) && seen[0].start == 0);
            assert_eq!(seen.last().unwrap().end, g.len());
            // Stopped after the first band: the boxes after it keep what they held.
            let mut c = Assignment::default();
            assign_by_bands(&g, &s, &w, &mut c, parts, |_, _| true);
            c.owner.iter_mut().for_each(|o| *o = u32::MAX);
            let first = seen[0].clone();
            assert!(!assign_by_bands(&g, &s, &w, &mut c, parts, |_, _| false));
            assert_eq!(c.owner[first.clone()], b.owner[first.clone()]);
            assert!(c.owner[first.end..].iter().all(|&o| o == u32::MAX));
        }
    }

    /// Parts are cut as asked: as many as the workers and the grid allow, each once.
    #[test]
    fn every_band_is_run_once_and_small_grids_stay_serial() {
        struct Count(usize, std::sync::Mutex<Vec<usize>>);
        impl Workers for Count {
            fn count(&self) -> usize {
                self.0
            }
            fn run(&self, parts: usize, job: &(dyn Fn(usize) + Sync)) {
                for p in (0..parts).rev() {
                    self.1.lock().unwrap().push(p);
                    job(p);
                }
            }
        }
        let g = Grid::new(32, 32).unwrap();
        let (s, w) = random_sites(&g, 16, 1, 3.0);
        let mut a = Assignment::default();
        // 1024 boxes over 16 sites: ~16 µs, three parts' worth.
        for (threads, parts) in [(1, 0), (2, 2), (3, 3), (4, 3), (16, 3)] {
            let workers = Count(threads, Default::default());
            assign_on(Some(&workers), &g, &s, &w, &mut a);
            let mut ran = workers.1.into_inner().unwrap();
            ran.sort();
            assert_eq!(ran, (0..parts).collect::<Vec<_>>(), "{threads} threads");
        }
        let small = Grid::new(15, 15).unwrap();
        let workers = Count(4, Default::default());
        assign_on(Some(&workers), &small, &s[..4], &w[..4], &mut a);
        assert!(workers.1.into_inner().unwrap().is_empty(), "225 boxes: not worth sharing");
        let workers = Count(2, Default::default());
        assign_on(Some(&workers), &Grid::new(64, 64).unwrap(), &s[..2], &w[..2], &mut a);
        assert!(workers.1.into_inner().unwrap().is_empty(), "4096 boxes over two sites: not worth it");
        // Three or four sites are cheaper per box than more: 1024 boxes are one part's worth.
        let count = Count(4, Default::default());
        for (sites, parts) in [(3, 1), (4, 1), (5, 3)] {
            assert_eq!(shared_parts(Some(&count), &g, sites), parts, "{sites} sites");
        }
    }

    /// Sites on a lattice of box centres, no weights: boxes halfway between two or four
    /// sites tie exactly, in 2D (the two-candidate leaves and the lanes) and in 3D. The owner
    /// and the second are the lowest indices among the tied, as the oracle has them.
    #[test]
    fn exact_ties_on_a_lattice_go_to_the_lowest_index() {
        for (dims, step) in [([24, 24, 1], 6), ([30, 18, 1], 4), ([12, 12, 12], 4)] {
            let g = Grid::new_3d(dims[0], dims[1], dims[2]).unwrap();
            let z: Vec<usize> = if dims[2] > 1 { (step / 2..dims[2]).step_by(step).collect() } else { vec![0] };
            let mut sites = Vec::new();
            // Rows in reverse, so that the lowest index is not always the lowest position.
            for &l in &z {
                for j in (step / 2..dims[1]).step_by(step).rev() {
                    for i in (step / 2..dims[0]).step_by(step) {
                        sites.push([i as f64 + 0.5, j as f64 + 0.5, l as f64 + 0.5]);
                    }
                }
            }
            let w = vec![0.0; sites.len()];
            let (mut a, mut b) = (Assignment::default(), Assignment::default());
            assign(&g, &sites, &w, &mut a);
            assign_brute(&g, &sites, &w, &mut b);
            assert_eq!(a, b, "{dims:?}, a site every {step} boxes");
            let mut ties = 0;
            for k in 0..g.len() {
                let d: Vec<f64> = sites.iter().map(|x| dist2(&g.centre(k), x)).collect();
                let low = d.iter().copied().fold(f64::INFINITY, f64::min);
                let owner = d.iter().position(|&v| v == low).unwrap();
                let second = (0..d.len()).filter(|&i| i != owner).min_by(|&i, &j| d[i].total_cmp(&d[j])).unwrap();
                assert_eq!((b.owner[k] as usize, b.second[k] as usize), (owner, second), "{dims:?}, box {k}");
                ties += usize::from(d[second] == low);
            }
            assert!(ties > g.len() / 10, "{dims:?}: {ties} boxes tie");
        }
    }

    /// The candidates a node keeps are exactly those not above both of the two best sites at
    /// its middle at every box of the node (its bound is exact on a grid of box centres):
    /// every site that can be first or second there, and no other. Nodes whose answer sits
    /// within rounding of a tie are skipped.
    #[test]
    fn a_node_keeps_exactly_the_sites_that_can_come_first_or_second_in_it() {
        let mut checked = 0;
        for seed in 0..40u64 {
            let dims = if seed % 4 == 3 { [12, 10, 6] } else { [40, 30, 1] };
            let g = Grid::new_3d(dims[0], dims[1], dims[2]).unwrap();
            let (sites, w) = random_sites(&g, 12 + seed as usize % 20, seed, if seed % 2 == 0 { 0.0 } else { 30.0 });
            let ctx = Ctx::new(&g, &sites, &w);
            let mut r = SplitMix64::new(seed + 1000);
            let mut pick = |n: usize| {
                let a = (r.next_f64() * n as f64) as usize;
                let b = (r.next_f64() * n as f64) as usize;
                (a.min(b), a.max(b) + 1)
            };
            let ((x0, x1), (y0, y1), (z0, z1)) = (pick(dims[0]), pick(dims[1]), pick(dims[2]));
            let (lo, hi) = ([x0, y0, z0], [x1, y1, z1]);
            let n = sites.len();
            let (mut stack, mut bounds) = ((0..n as u32).collect::<Vec<u32>>(), Vec::new());
            let kept = ctx.prune(lo, hi, 0..n, &mut stack, &mut bounds);
            let kept: Vec<usize> = stack[kept].iter().map(|&i| i as usize).collect();
            // The oracle: the two lowest powers at the middle, then every box centre.
            let power = |i: usize, c: &Point| dist2(c, &sites[i]) - w[i];
            let mid: Point = std::array::from_fn(|d| (lo[d] + hi[d]) as f64 / 2.0);
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_by(|&i, &j| power(i, &mid).total_cmp(&power(j, &mid)));
            let (a, b) = (order[0], order[1]);
            let centres: Vec<Point> = (lo[2]..hi[2])
                .flat_map(|l| (lo[1]..hi[1]).flat_map(move |j| (lo[0]..hi[0]).map(move |i| (i, j, l))))
                .map(|(i, j, l)| [i as f64 + 0.5, j as f64 + 0.5, l as f64 + 0.5])
                .collect();
            let lowest =
                |i: usize, r: usize| centres.iter().map(|c| power(i, c) - power(r, c)).fold(f64::INFINITY, f64::min);
            let near_tie = (0..n).any(|i| i != a && i != b && (lowest(i, a).abs() < 1e-6 || lowest(i, b).abs() < 1e-6));
            if near_tie || power(a, &mid) == power(b, &mid) {
                continue;
            }
            let expected: Vec<usize> =
                (0..n).filter(|&i| i == a || i == b || lowest(i, a) <= 0.0 || lowest(i, b) <= 0.0).collect();
            assert_eq!(kept, expected, "seed {seed}, node {lo:?}..{hi:?}");
            checked += 1;
        }
        assert!(checked >= 30, "{checked} nodes checked");
    }

    /// The recursion's work, which is its reason to be: with 16 sites over 64×64 boxes the
    /// leaves (nodes of at most 32 boxes, or of two sites) evaluate 3.25–3.77 candidates per
    /// box over 30 seeds, where the paper's scan evaluates all 16, and 7.2 on 16³ boxes (leaves
    /// of at most 64 boxes in 3D; 5.1 with 32).
    /// Splitting further, or pruning less, moves the mean out of its band; a grid of one leaf
    /// is evaluated whole.
    #[test]
    fn the_leaves_evaluate_a_few_candidates_per_box() {
        let per_box = |g: &Grid, n: usize, seed: u64| {
            let (s, w) = random_sites(g, n, seed, 10.0);
            EVALUATED.with(|e| e.set(0));
            assign(g, &s, &w, &mut Assignment::default());
            EVALUATED.with(Cell::get) as f64 / g.len() as f64
        };
        let g = Grid::new(64, 64).unwrap();
        let mean = (0..10).map(|seed| per_box(&g, 16, seed)).sum::<f64>() / 10.0;
        assert!((3.3..3.7).contains(&mean), "{mean} candidates per box");
        let cube = Grid::new_3d(16, 16, 16).unwrap();
        let mean = (0..10).map(|seed| per_box(&cube, 16, seed)).sum::<f64>() / 10.0;
        assert!((6.9..7.5).contains(&mean), "in 3D: {mean} candidates per box");
        assert_eq!(per_box(&Grid::new(8, 4).unwrap(), 16, 1), 16.0, "one leaf, every site");
        assert_eq!(per_box(&g, 2, 1), 2.0, "two sites: nothing to prune");
    }

    #[test]
    fn clones_and_mismatched_arrays_are_whole() {
        let g = Grid::new(20, 10).unwrap();
        let (s, w) = random_sites(&g, 7, 3, 5.0);
        let mut a = Assignment::default();
        assign(&g, &s, &w, &mut a);
        assert_eq!(a.clone(), a);
        let mut c = Assignment { owner: vec![9; 3], ..Assignment::default() };
        c.clone_from(&a);
        assert_eq!(c, a);
        // Arrays a caller left with different lengths are all sized again.
        for lens in [[200, 0, 0, 0], [200, 200, 200, 0], [0, 200, 200, 200], [5, 200, 200, 200]] {
            let mut m = Assignment {
                owner: vec![9; lens[0]],
                score: vec![-1.0; lens[1]],
                second: vec![9; lens[2]],
                gap: vec![-1.0; lens[3]],
            };
            assign(&g, &s, &w, &mut m);
            assert_eq!(m, a, "{lens:?}");
        }
    }

    #[test]
    fn ties_go_to_the_lowest_index() {
        let g = Grid::new(2, 1).unwrap();
        // Two coincident sites: every box ties; site 0 must win and site 1 is second, gap 0.
        let s = vec![[1.0, 0.5, 0.5], [1.0, 0.5, 0.5]];
        let mut a = Assignment::default();
        assign(&g, &s, &[0.0, 0.0], &mut a);
        assert_eq!(a.owner, vec![0, 0]);
        assert_eq!(a.second, vec![1, 1]);
        assert_eq!(a.gap, vec![0.0, 0.0]);
        // Three coincident sites, in the oracle too: the first two, in order.
        let mut b = Assignment::default();
        assign_brute(&g, &[s[0], s[0], s[0]], &[0.0; 3], &mut b);
        assert_eq!((b.owner, b.second), (vec![0, 0], vec![1, 1]));
    }

    #[test]
    fn a_heavy_weight_takes_the_whole_grid() {
        let g = Grid::new(20, 20).unwrap();
        let s = vec![[1.0, 1.0, 0.5], [19.0, 19.0, 0.5]];
        let mut a = Assignment::default();
        assign(&g, &s, &[1e6, 0.0], &mut a);
        assert!(a.owner.iter().all(|&o| o == 0));
    }
}
