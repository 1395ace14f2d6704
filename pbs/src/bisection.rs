//! k-way recursive coordinate bisection (RCB; Berger & Bokhari, IEEE Trans. Computers 1987):
//! the compact cold start of the power-cell method ([`crate::VCores::from_bisection`]) and,
//! in `pbs-peers`, the partitioner users would pick instead.
//!
//! Each bisection splits the part count in two halves `⌊k/2⌋ + ⌈k/2⌉`, orders the boxes along
//! the longest side of their bounding box, the slowest-varying coordinate among equals (rows
//! broken by the other coordinates, so a cut may step once mid-row), and cuts where the
//! running load is nearest to the left half's share. A cut that would leave a side in two
//! pieces (a step that touches the next row only at a corner) is retried with the rows
//! ordered the other way, then moved to the nearest boundary between whole rows. Parts come
//! out in one piece on every 2D grid the property test tries. In 3D a cut in one piece stands
//! only where it lands within half the heaviest box of the share; else the nearest cut is
//! taken, in pieces, as RCB usually cuts (Berger and Bokhari; Zoltan): a 3D part may fall in
//! pieces, and each cut lands within half the heaviest box of its share unless that would
//! leave a side fewer boxes than parts.
//!
//! ```
//! let grid = pbs::Grid::new(9, 3)?;
//! let parts = pbs::bisection::kway_rcb(&grid, &vec![1.0; 27], 3)?;
//! assert_eq!(&parts[..9], &[0, 0, 0, 1, 1, 1, 2, 2, 2]); // three 3×3 blocks
//! # Ok::<(), pbs::Error>(())
//! ```
//!
//! [`kway_norcb`] is Boulmier et al.'s non-orthogonal RCB ("informed partitioning", 2022):
//! each cut of a part runs *parallel to the mean velocity* of the particles in it, so that
//! particles moving that way stay in their part for longer; a part whose mean speed is under
//! a threshold is cut as RCB cuts it. [`kway_vector_rcb`] chooses each cut's direction to
//! balance several phases' loads at once (Buch's vector loads). Both cut 2D grids along
//! lines and 3D grids along planes.

use crate::error::Result;
use crate::grid::Grid;
use crate::problem::Problem;

/// One part id in `0..parts` per box (the same checks as [`Problem::new`]: one load per box,
/// finite and ≥ 0, at most one part per box). Loads at extreme scales are cut as
/// [`Problem::new`] rescales them (by a power of two, exactly), so that their running sums
/// stay finite numbers: loads near `f64::MAX` are cut as the same loads brought down by a power
/// of two would be.
pub fn kway_rcb(grid: &Grid, loads: &[f64], parts: usize) -> Result<Vec<u32>> {
    let problem = Problem::new(*grid, loads, parts)?;
    let loads = problem.loads();
    let mut boxes = boxes_of(grid);
    let mut owners = vec![0; grid.len()];
    let mut pieces = Pieces { grid, stamp: vec![0; grid.len()], now: 0, stack: Vec::new(), scratch: Vec::new() };
    bisect(loads, &mut boxes, 0, parts as u32, &mut owners, &mut pieces, &Cutting::partition(&|_, _, _| Vec::new()));
    Ok(owners)
}

/// An oblique cut's directions, orthonormal: the normal (boxes are ordered along it and cut
/// across it), then the two directions in the cut by which boxes level along the normal are
/// ordered next (the second along `z` for a 2D cut).
type Frame = [[f64; 3]; 3];

/// The frame of a 2D cut along the unit direction `d`: its normal is `d` turned a quarter left.
fn line_frame(d: [f64; 2]) -> Frame {
    [[-d[1], d[0], 0.0], [d[0], d[1], 0.0], [0.0, 0.0, 1.0]]
}

/// The coordinate of box `b` along the unit vector `a`. A direction in the plane adds no
/// `0 · z` term, which would turn a −0.0 coordinate into +0.0 and move the box at the origin
/// in the sorts.
fn along(a: [f64; 3], b: &[u32; 4]) -> f64 {
    let s = a[0] * f64::from(b[0]) + a[1] * f64::from(b[1]);
    if a[2] == 0.0 {
        s
    } else {
        s + a[2] * f64::from(b[2])
    }
}

/// Sorts `boxes` across the cut of `frame` (by the coordinates along its three directions in
/// turn, then by index) and returns where that cut gives the first `left` of `parts` parts
/// their share of `loads` (each side keeping a box per part).
fn oblique_cut(loads: &[f64], boxes: &mut [[u32; 4]], frame: &Frame, left: u32, parts: u32) -> usize {
    // The keys once per box, not once per comparison.
    let mut keyed: Vec<([f64; 3], [u32; 4])> = boxes.iter().map(|b| (frame.map(|a| along(a, b)), *b)).collect();
    keyed.sort_unstable_by(|a, b| {
        let key = |i: usize| a.0[i].total_cmp(&b.0[i]);
        key(0).then(key(1)).then(key(2)).then(a.1[3].cmp(&b.1[3]))
    });
    boxes.iter_mut().zip(&keyed).for_each(|(b, k)| *b = k.1);
    let prefix = prefix_sums(boxes.iter().map(|b| loads[b[3] as usize]));
    let (min, max) = (left as usize, boxes.len() - (parts - left) as usize);
    nearest_cut(&prefix, prefix[boxes.len()] * f64::from(left) / f64::from(parts), min, max)
}

/// Non-orthogonal RCB (NoRCB; Boulmier, Raynaud, Abdennadher and Chopard, "On the benefits of
/// informed partitioning", 2022): one part id in `0..parts` per box.
///
/// `momentum[k]` is the sum of the velocities of the particles in box `k` (x, y, z; on a 2D
/// grid z is not read) and `particles[k]` their number (the mean velocity of a part is its
/// momentum over its particles). A part whose mean speed is at least `threshold` is cut
/// through its weighted median parallel to its mean velocity (boxes ordered across the cut,
/// then, in 3D, across the velocity within it, then along the velocity, then by index: a
/// cut's step runs along the velocity too); a slower part, or one that such a cut would leave
/// in two pieces, is cut as [`kway_rcb`] cuts it, except in 3D where that cut lands further
/// than half the heaviest box from the share: the cut along the flow is then taken in pieces,
/// as in the paper. The paper's threshold is `1e-3`.
///
/// On a 2D grid the cut is the line along the velocity. In 3D the planes that hold the
/// velocity turn about it, and the paper leaves which one open; here it is the plane across
/// the axis along which the part's bounding box, seen down the velocity, is longest (the
/// normal is that axis less its part along the velocity: RCB's choice among the planes NoRCB
/// allows), then the other axes in that order.
///
/// ```
/// let grid = pbs::Grid::new(8, 8)?;
/// // Everything moves along +x: the cuts run along x, into horizontal stripes.
/// let momentum = vec![[1.0, 0.0, 0.0]; 64];
/// let parts = pbs::bisection::kway_norcb(&grid, &vec![1.0; 64], &momentum, &vec![1.0; 64], 4, 1e-3)?;
/// assert!(parts[..8].iter().all(|&p| p == parts[0])); // the first row is in one part
/// assert_ne!(parts[0], parts[63]);
/// # Ok::<(), pbs::Error>(())
/// ```
pub fn kway_norcb(
    grid: &Grid,
    loads: &[f64],
    momentum: &[[f64; 3]],
    particles: &[f64],
    parts: usize,
    threshold: f64,
) -> Result<Vec<u32>> {
    // Rescaled as in `kway_rcb`.
    let problem = Problem::new(*grid, loads, parts)?;
    let loads = problem.loads();
    if !(threshold.is_finite() && threshold >= 0.0) {
        return Err(crate::Error::Parameter {
            name: "threshold",
            value: threshold.to_string(),
            reason: "a speed must be finite and ≥ 0",
        });
    }
    check_motion(grid.len(), momentum, particles)?;
    let flat = grid.nz() == 1;
    let direction = |part: &[[u32; 4]], _, _| {
        let (mut p, mut n) = ([0.0; 3], 0.0);
        for b in part {
            let k = b[3] as usize;
            for a in 0..3 {
                p[a] += momentum[k][a];
            }
            n += particles[k];
        }
        let v = [p[0] / n, p[1] / n, if flat { 0.0 } else { p[2] / n }];
        let speed = if flat { v[0].hypot(v[1]) } else { (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt() };
        if !(n > 0.0 && speed >= threshold && speed > 0.0) {
            return Vec::new();
        }
        let d = v.map(|c| c / speed);
        if flat {
            vec![line_frame([d[0], d[1]])]
        } else {
            planes_along(part, d)
        }
    };
    let mut boxes = boxes_of(grid);
    let mut owners = vec![0; grid.len()];
    let mut pieces = Pieces { grid, stamp: vec![0; grid.len()], now: 0, stack: Vec::new(), scratch: Vec::new() };
    bisect(loads, &mut boxes, 0, parts as u32, &mut owners, &mut pieces, &Cutting::partition(&direction));
    Ok(owners)
}

/// The grid's boxes as the bisections hold them, `[x, y, z, index]`: the sorts read
/// coordinates without dividing.
fn boxes_of(grid: &Grid) -> Vec<[u32; 4]> {
    (0..grid.len())
        .map(|k| {
            let [i, j, l] = grid.coords(k);
            [i as u32, j as u32, l as u32, k as u32]
        })
        .collect()
}

/// The frames of the planes through the unit velocity `d` that cut `part` across an axis
/// (each `[normal, normal × d, d]`), the axis along which the part's bounding box, seen down
/// `d`, is longest first (the last of equals, as in RCB); an axis along `d` gives none.
fn planes_along(part: &[[u32; 4]], d: [f64; 3]) -> Vec<Frame> {
    let (mut lo, mut hi) = ([u32::MAX; 3], [0; 3]);
    for b in part {
        for a in 0..3 {
            lo[a] = lo[a].min(b[a]);
            hi[a] = hi[a].max(b[a]);
        }
    }
    let mut planes: Vec<(f64, usize, Frame)> = (0..3)
        .filter_map(|a| {
            // The axis less its part along `d`, of length sin(axis, d).
            let mut n = d.map(|c| -d[a] * c);
            n[a] += 1.0;
            let sin = (n[0] * n[0] + n[1] * n[1] + n[2] * n[2]).sqrt();
            (sin > 1e-9).then(|| {
                let n = n.map(|c| c / sin);
                let across = [n[1] * d[2] - n[2] * d[1], n[2] * d[0] - n[0] * d[2], n[0] * d[1] - n[1] * d[0]];
                (f64::from(hi[a] - lo[a]) * sin, a, [n, across, d])
            })
        })
        .collect();
    planes.sort_by(|x, y| y.0.total_cmp(&x.0).then(y.1.cmp(&x.1)));
    planes.into_iter().map(|p| p.2).collect()
}

/// Vector RCB, for codes whose iterations run several phases with a barrier after each
/// (Buch's vector load balancing, 2023): one part id in `0..parts` per box, given each box's
/// load in every phase (`phase_loads[p][k]`).
///
/// An iteration then costs `Σ_phase max_part load`, which a mapping balanced on the summed
/// load can leave well above `Σ_phase mean` (one part heavy in one phase, light in another).
/// Each cut here is a straight line (a plane in 3D) at the summed load's weighted median, as
/// in RCB, but its direction is the one whose split leaves the least
/// `Σ_phase max_side load / side parts` (with two phases a line that halves both exists: the
/// ham-sandwich theorem), each costed in one pass over the part's boxes and the best three
/// again exactly. In 2D: eight directions, then halving steps around the best down to
/// `π / 64`. In 3D: the 13 normals of a cube's faces, edges and corners (one of each opposite
/// pair), then steps of `π / 8` down to `π / 64` in each spherical angle of the best. Near-ties
/// go to the smaller cut; a direction that would leave a side in two pieces gives way to the
/// next (where every one would, an RCB cut, or in 3D, where that cut lands further than half
/// the heaviest box from the share, the best direction in pieces). With one phase it cuts as
/// [`kway_rcb`] would balance, along the shortest line rather than across the longest side.
///
/// ```
/// let grid = pbs::Grid::new(8, 8)?;
/// // Phase 0 is all in the left half, phase 1 all in the bottom half.
/// let left: Vec<f64> = (0..64).map(|k| if k % 8 < 4 { 1.0 } else { 0.0 }).collect();
/// let bottom: Vec<f64> = (0..64).map(|k| if k < 32 { 1.0 } else { 0.0 }).collect();
/// let parts = pbs::bisection::kway_vector_rcb(&grid, &[left.clone(), bottom.clone()], 2)?;
/// for loads in [&left, &bottom] {
///     let charges = pbs::metrics::charges(&parts, loads, 2);
///     assert!(pbs::metrics::max_avg(&charges) <= 1.13, "{charges:?}"); // a diagonal cut
/// }
/// # Ok::<(), pbs::Error>(())
/// ```
pub fn kway_vector_rcb(grid: &Grid, phase_loads: &[Vec<f64>], parts: usize) -> Result<Vec<u32>> {
    if phase_loads.is_empty() {
        return Err(crate::Error::Parameter {
            name: "phase_loads",
            value: "[]".into(),
            reason: "at least one phase is needed",
        });
    }
    for loads in phase_loads {
        Problem::new(*grid, loads, parts)?;
    }
    // Rescaled as `kway_rcb`'s, every phase by the same power of two.
    let phase_loads = &crate::problem::rescaled_phases(phase_loads)[..];
    let total: Vec<f64> = (0..grid.len()).map(|k| phase_loads.iter().map(|l| l[k]).sum()).collect();
    let flat = grid.nz() == 1;
    let direction = |part: &[[u32; 4]], left: u32, parts: u32| {
        // A direction as its angles: in 2D the line's angle (and 0), in 3D the normal's polar
        // and azimuthal angles.
        let costed = |angles: [f64; 2]| {
            let frame = if flat { line_frame([angles[0].cos(), angles[0].sin()]) } else { sphere_frame(angles) };
            let (cost, size) = vector_split_cost(part, &total, phase_loads, &frame, left, parts);
            (cost, size, frame, angles)
        };
        let pi = std::f64::consts::PI;
        let (mut tried, steps): (Vec<_>, Vec<[f64; 2]>) = if flat {
            let tried = (0..8).map(|i| costed([pi * f64::from(i) / 8.0, 0.0])).collect();
            (tried, [pi / 16.0, pi / 32.0, pi / 64.0].iter().flat_map(|&s| [[-s, 0.0], [s, 0.0]]).collect())
        } else {
            let tried = cube_normals().into_iter().map(costed).collect();
            let steps = [pi / 8.0, pi / 16.0, pi / 32.0, pi / 64.0]
                .iter()
                .flat_map(|&s| [[-s, 0.0], [s, 0.0], [0.0, -s], [0.0, s]])
                .collect();
            (tried, steps)
        };
        let mut best = tried.iter().copied().min_by(|a, b| a.0.total_cmp(&b.0)).expect("directions tried");
        // Halving steps around the best so far, in pairs (one angle less and more) tried from
        // the same best, the better taken after both.
        for pair in steps.chunks(2) {
            let from = best.3;
            for step in pair {
                let c = costed([from[0] + step[0], from[1] + step[1]]);
                tried.push(c);
                if c.0 < best.0 {
                    best = c;
                }
            }
        }
        let mut ranked: Vec<(f64, f64, Frame)> = tried.into_iter().map(|t| (t.0, t.1, t.2)).collect();
        rank(&mut ranked);
        // The best few costed exactly, on the cut the bisection would make.
        let mut order = part.to_vec();
        for r in ranked.iter_mut().take(VECTOR_EXACT) {
            let cut = oblique_cut(&total, &mut order, &r.2, left, parts);
            r.0 = phase_loads
                .iter()
                .map(|loads| {
                    let l: f64 = order[..cut].iter().map(|b| loads[b[3] as usize]).sum();
                    let r: f64 = order[cut..].iter().map(|b| loads[b[3] as usize]).sum();
                    (l / f64::from(left)).max(r / f64::from(parts - left))
                })
                .sum();
        }
        let exact = VECTOR_EXACT.min(ranked.len());
        rank(&mut ranked[..exact]);
        ranked.into_iter().map(|r| r.2).collect()
    };
    let mut boxes = boxes_of(grid);
    let mut owners = vec![0; grid.len()];
    let mut pieces = Pieces { grid, stamp: vec![0; grid.len()], now: 0, stack: Vec::new(), scratch: Vec::new() };
    bisect(&total, &mut boxes, 0, parts as u32, &mut owners, &mut pieces, &Cutting::partition(&direction));
    Ok(owners)
}

/// The normals of a cube's faces, edges and corners, one of each opposite pair, as the polar
/// angle (from z) and azimuth of [`sphere_frame`]: 3 + 6 + 4.
fn cube_normals() -> [[f64; 2]; 13] {
    let (q, corner) = (std::f64::consts::FRAC_PI_4, 2f64.sqrt().atan());
    let faces = [[0.0, 0.0], [2.0 * q, 0.0], [2.0 * q, 2.0 * q]];
    let edges = [[2.0 * q, q], [2.0 * q, 3.0 * q], [q, 0.0], [q, 2.0 * q], [q, 4.0 * q], [q, 6.0 * q]];
    let corners = [1.0, 3.0, 5.0, 7.0].map(|i| [corner, i * q]);
    let all = [&faces[..], &edges[..], &corners[..]].concat();
    std::array::from_fn(|i| all[i])
}

/// The frame of a 3D cut whose normal has polar angle `θ` (from z) and azimuth `φ`: the
/// normal, then the unit vectors along which it turns with `φ` and with `θ`.
fn sphere_frame([theta, phi]: [f64; 2]) -> Frame {
    let (st, ct, sp, cp) = (theta.sin(), theta.cos(), phi.sin(), phi.cos());
    [[st * cp, st * sp, ct], [-sp, cp, 0.0], [ct * cp, ct * sp, -st]]
}

/// Directions of a vector bisection costed exactly (the best of the bucketed estimates).
const VECTOR_EXACT: usize = 3;

/// Orders `(cost, size, frame)` candidates: within a thousandth of the best cost, the
/// smaller cut first; then by cost.
fn rank(candidates: &mut [(f64, f64, Frame)]) {
    let best = candidates.iter().map(|r| r.0).fold(f64::INFINITY, f64::min);
    let near = |c: f64| c <= best * (1.0 + 1e-3);
    candidates.sort_by(|a, b| {
        near(b.0).cmp(&near(a.0)).then(if near(a.0) { a.1.total_cmp(&b.1) } else { a.0.total_cmp(&b.0) })
    });
}

/// For the cut of `part` across `frame`'s normal at the summed load's share of the first
/// `left` of `parts` parts: `Σ_phase max_side load / side parts`, and the cut's size near
/// enough (from the part's extents along the frame's other two directions: a line's length
/// in 2D, the boxes a plane crosses less one in 3D). In O(boxes): the boxes go into buckets a
/// quarter of a box wide along the normal, and the cut falls on the bucket boundary nearest the
/// share (the bisection then cuts exactly, along the direction chosen).
fn vector_split_cost(
    part: &[[u32; 4]],
    total: &[f64],
    phases: &[Vec<f64>],
    frame: &Frame,
    left: u32,
    parts: u32,
) -> (f64, f64) {
    let (mut lo, mut hi) = ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]);
    for b in part {
        for a in 0..3 {
            let at = along(frame[a], b);
            (lo[a], hi[a]) = (lo[a].min(at), hi[a].max(at));
        }
    }
    let buckets = 4 * ((hi[0] - lo[0]).ceil() as usize + 1);
    let stride = phases.len() + 1;
    let mut sums = vec![0.0; buckets * stride];
    for b in part {
        let at = ((along(frame[0], b) - lo[0]) * 4.0) as usize * stride;
        let k = b[3] as usize;
        sums[at] += total[k];
        for (p, loads) in phases.iter().enumerate() {
            sums[at + 1 + p] += loads[k];
        }
    }
    let whole: f64 = sums.iter().step_by(stride).sum();
    let share = whole * f64::from(left) / f64::from(parts);
    let (mut running, mut cut) = (0.0, buckets);
    for i in 0..buckets {
        let next = running + sums[i * stride];
        if next >= share {
            cut = if share - running <= next - share { i } else { i + 1 };
            break;
        }
        running = next;
    }
    let cost = (0..phases.len())
        .map(|p| {
            let l: f64 = (0..cut).map(|i| sums[i * stride + 1 + p]).sum();
            let r: f64 = (cut..buckets).map(|i| sums[i * stride + 1 + p]).sum();
            (l / f64::from(left)).max(r / f64::from(parts - left))
        })
        .sum();
    // (e1 + 1)(e2 + 1) − 1, written so that a 2D line's size is its length exactly.
    let (e1, e2) = (hi[1] - lo[1], hi[2] - lo[2]);
    (cost, e1 * (e2 + 1.0) + e2)
}

/// The checks of [`kway_norcb`]'s motion for `boxes` boxes: one momentum and one particle
/// count per box, momenta finite, counts finite and ≥ 0; an error names the first bad box.
pub fn check_motion(boxes: usize, momentum: &[[f64; 3]], particles: &[f64]) -> Result<()> {
    if momentum.len() != boxes || particles.len() != boxes {
        return Err(crate::Error::LoadCount { expected: boxes, got: momentum.len().min(particles.len()) });
    }
    let bad =
        |k: usize| !(momentum[k].iter().all(|m| m.is_finite()) && particles[k].is_finite() && particles[k] >= 0.0);
    match (0..boxes).find(|&k| bad(k)) {
        Some(k) => Err(crate::Error::Parameter {
            name: "momentum",
            value: format!("box {k}: momentum {:?}, particles {}", momentum[k], particles[k]),
            reason: "momenta must be finite and particle counts finite and ≥ 0",
        }),
        None => Ok(()),
    }
}

/// How a part of boxes, `left` of whose `parts` parts go to the first side, is cut: along
/// the first of these oblique cuts that leaves both sides in one piece, or (none left) across
/// its longest side.
type CutDirection<'a> = &'a dyn Fn(&[[u32; 4]], u32, u32) -> Vec<Frame>;

/// How [`bisect`] cuts.
struct Cutting<'a> {
    /// The oblique cuts to try first (none: RCB's).
    direction: CutDirection<'a>,
    /// Whether, in 3D, a cut in one piece that lands further than half the heaviest box from
    /// the share gives way to the nearest cut, in pieces (the partitions); not where the
    /// caller keeps only parts in one piece (the refinement's groups).
    balance_over_pieces: bool,
}

impl<'a> Cutting<'a> {
    /// The partitioners' cuts: along `direction` first, balance over pieces in 3D.
    fn partition(direction: CutDirection<'a>) -> Self {
        Cutting { direction, balance_over_pieces: true }
    }
}

fn bisect(
    loads: &[f64],
    boxes: &mut [[u32; 4]],
    first: u32,
    parts: u32,
    owners: &mut [u32],
    pieces: &mut Pieces,
    cutting: &Cutting,
) {
    if parts == 1 {
        boxes.iter().for_each(|b| owners[b[3] as usize] = first);
        return;
    }
    let left = parts / 2;
    // Each side keeps at least one box per part.
    let (min, max) = (left as usize, boxes.len() - (parts - left) as usize);
    let frames = (cutting.direction)(boxes, left, parts);
    for frame in &frames {
        let cut = oblique_cut(loads, boxes, frame, left, parts);
        if pieces.is_connected(&boxes[..cut]) && pieces.is_connected(&boxes[cut..]) {
            let (l, r) = boxes.split_at_mut(cut);
            bisect(loads, l, first, left, owners, pieces, cutting);
            bisect(loads, r, first + left, parts - left, owners, pieces, cutting);
            return;
        }
    }
    let (mut lo, mut hi) = ([u32::MAX; 3], [0; 3]);
    for b in boxes.iter() {
        for a in 0..3 {
            lo[a] = lo[a].min(b[a]);
            hi[a] = hi[a].max(b[a]);
        }
    }
    // The longest side, the last of equals: on a square part the cut runs across the
    // slowest-varying index, so each side keeps whole rows, one range of consecutive boxes.
    let axis = (0..3).fold(0, |best, a| if hi[a] - lo[a] >= hi[best] - lo[best] { a } else { best });
    let (second, third) = ((axis + 1) % 3, (axis + 2) % 3);
    let (mut cut, mut connected) = (0, false);
    for reversed in [false, true] {
        sort_by_coordinates(boxes, [axis, third, second], reversed, (lo, hi), &mut pieces.scratch);
        let prefix = prefix_sums(boxes.iter().map(|b| loads[b[3] as usize]));
        let share = prefix[boxes.len()] * f64::from(left) / f64::from(parts);
        cut = nearest_cut(&prefix, share, min, max);
        if pieces.is_connected(&boxes[..cut]) && pieces.is_connected(&boxes[cut..]) {
            connected = true;
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
    // The loop checked the nearest cuts; the whole-rows cut it may have chosen is unchecked.
    if !connected
        && boxes.len() <= SEARCH_MAX_BOXES
        && !(pieces.is_connected(&boxes[..cut]) && pieces.is_connected(&boxes[cut..]))
    {
        // No cut near the share nor between whole rows keeps both sides in one piece (small
        // parts of ragged shapes, a box or two per part): every cut allowed, in both orders,
        // nearest the share first.
        cut = connected_cut(loads, boxes, axis, (lo, hi), left, parts, pieces).unwrap_or(cut);
    }
    // In 3D, where no oblique cut kept both sides in one piece and the cut across the longest
    // side is further off the share than half the heaviest box (it went looking for a cut in
    // one piece), the nearest cut is taken after all, in pieces, as the papers cut: along the
    // first oblique frame, else across the longest side. The pieces of slanted parts are
    // slivers, and keeping them whole cost md's NoRCB 1.21 × the mean right after a remapping
    // on 24³ boxes and 64 parts (1.05 this way), RCB 1.59 on md's contraction at 16³ (1.15).
    if cutting.balance_over_pieces && !connected && pieces.grid.nz() > 1 {
        let prefix = prefix_sums(boxes.iter().map(|b| loads[b[3] as usize]));
        let share = prefix[boxes.len()] * f64::from(left) / f64::from(parts);
        let heaviest = boxes.iter().map(|b| loads[b[3] as usize]).fold(0.0, f64::max);
        if (prefix[cut] - share).abs() > heaviest / 2.0 {
            cut = match frames.first() {
                Some(frame) => oblique_cut(loads, boxes, frame, left, parts),
                None => {
                    sort_by_coordinates(boxes, [axis, third, second], false, (lo, hi), &mut pieces.scratch);
                    let prefix = prefix_sums(boxes.iter().map(|b| loads[b[3] as usize]));
                    nearest_cut(&prefix, share, min, max)
                }
            };
        }
    }
    let (l, r) = boxes.split_at_mut(cut);
    bisect(loads, l, first, left, owners, pieces, cutting);
    bisect(loads, r, first + left, parts - left, owners, pieces, cutting);
}

/// Parts of at most this many boxes are searched cut by cut when the quick cuts leave a side
/// in pieces: a check per cut is linear, so the search is quadratic in the part's boxes.
const SEARCH_MAX_BOXES: usize = 1024;

/// The cut of `boxes`, sorted along `axis` either way, that leaves both sides in one piece
/// nearest to `left / parts` of the load, each side keeping a box per part; `boxes` is left in
/// the order the cut is for. `None` when no cut does (a side must then be in pieces), with
/// `boxes` sorted the reversed way, as the caller's last pass left them.
fn connected_cut(
    loads: &[f64],
    boxes: &mut [[u32; 4]],
    axis: usize,
    extent: ([u32; 3], [u32; 3]),
    left: u32,
    parts: u32,
    pieces: &mut Pieces,
) -> Option<usize> {
    let (second, third) = ((axis + 1) % 3, (axis + 2) % 3);
    let (min, max) = (left as usize, boxes.len() - (parts - left) as usize);
    let mut best: Option<(f64, bool, usize)> = None;
    for reversed in [false, true] {
        sort_by_coordinates(boxes, [axis, third, second], reversed, extent, &mut pieces.scratch);
        let prefix = prefix_sums(boxes.iter().map(|b| loads[b[3] as usize]));
        let share = prefix[boxes.len()] * f64::from(left) / f64::from(parts);
        for c in min..=max {
            let off = (prefix[c] - share).abs();
            if best.is_none_or(|(o, _, _)| off < o)
                && pieces.is_connected(&boxes[..c])
                && pieces.is_connected(&boxes[c..])
            {
                best = Some((off, reversed, c));
            }
        }
    }
    let (_, reversed, c) = best?;
    sort_by_coordinates(boxes, [axis, third, second], reversed, extent, &mut pieces.scratch);
    Some(c)
}

/// Sorts `boxes` by their coordinates along `keys` (most significant first), the last two
/// descending when `reversed`: the order of `sort_by_key(|b| (b[k0], flip(b[k1]),
/// flip(b[k2])))`, the boxes' coordinates being all distinct. Counting sorts on one
/// coordinate at a time, least significant first, each stable and over the part's extent
/// `lo..=hi` along that coordinate: linear in the boxes, where a comparison sort took two
/// thirds of RCB's time.
pub(crate) fn sort_by_coordinates(
    boxes: &mut [[u32; 4]],
    keys: [usize; 3],
    reversed: bool,
    (lo, hi): ([u32; 3], [u32; 3]),
    scratch: &mut Vec<[u32; 4]>,
) {
    // A part cut along the same axis as its parent is in this order already.
    let flip = |v: u32| if reversed { u32::MAX - v } else { v };
    if boxes.is_sorted_by_key(|b| (b[keys[0]], flip(b[keys[1]]), flip(b[keys[2]]))) {
        return;
    }
    let mut counts = Vec::new();
    scratch.clear();
    scratch.extend_from_slice(boxes);
    let mut in_scratch = true;
    for (rank, &a) in keys.iter().enumerate().rev() {
        if lo[a] == hi[a] {
            continue;
        }
        let descending = reversed && rank > 0;
        let slot = |b: &[u32; 4]| (if descending { hi[a] - b[a] } else { b[a] - lo[a] }) as usize;
        counts.clear();
        counts.resize((hi[a] - lo[a]) as usize + 2, 0usize);
        let (from, to): (&[[u32; 4]], &mut [[u32; 4]]) =
            if in_scratch { (&scratch[..], &mut *boxes) } else { (&*boxes, &mut scratch[..]) };
        from.iter().for_each(|b| counts[slot(b) + 1] += 1);
        for i in 1..counts.len() {
            counts[i] += counts[i - 1];
        }
        for b in from {
            let s = slot(b);
            to[counts[s]] = *b;
            counts[s] += 1;
        }
        in_scratch = !in_scratch;
    }
    if in_scratch {
        boxes.copy_from_slice(scratch);
    }
}

/// The boxes of `order` (each box of the grid once) cut into `parts` consecutive runs of about
/// equal load, each at least one box long: one part id per box. A prefix split along an
/// order (a space-filling curve, columns).
///
/// # Panics
/// Unless `1 ≤ parts ≤ order.len()`, or if `order` names a box `loads` does not have.
///
/// ```
/// // Boxes 3, 1, 0, 2 in that order; box 3 carries half the load.
/// let owners = pbs::bisection::split_order(&[3, 1, 0, 2], &[1.0, 1.0, 1.0, 3.0], 2);
/// assert_eq!(owners, vec![1, 1, 1, 0]);
/// ```
pub fn split_order(order: &[usize], loads: &[f64], parts: usize) -> Vec<u32> {
    assert!((1..=order.len()).contains(&parts), "{parts} parts of an order of {} boxes", order.len());
    let prefix = prefix_sums(order.iter().map(|&k| loads[k]));
    let (n, total) = (order.len(), prefix[order.len()]);
    let mut owners = vec![0; n];
    let mut start = 0;
    for p in 0..parts {
        // Leave at least one box for each part still to come.
        let end = if p + 1 == parts {
            n
        } else {
            let share = total * (p + 1) as f64 / parts as f64;
            nearest_cut(&prefix, share, start + 1, n - (parts - p - 1))
        };
        order[start..end].iter().for_each(|&k| owners[k] = p as u32);
        start = end;
    }
    owners
}

/// Running sums of `weights` with a leading zero (`n + 1` values, non-decreasing). If the
/// weights sum to zero, every box counts 1 instead, so that an empty region is still split
/// into parts of equal box counts rather than all into one.
pub fn prefix_sums(weights: impl Iterator<Item = f64> + Clone) -> Vec<f64> {
    let unit = weights.clone().sum::<f64>() <= 0.0;
    let mut sums = Vec::with_capacity(weights.size_hint().0 + 1);
    let mut s = 0.0;
    sums.push(s);
    for w in weights {
        s += if unit { 1.0 } else { w };
        sums.push(s);
    }
    sums
}

/// The position `b` in `lo..=hi` whose running sum `prefix[b]` is nearest to `target` (the
/// lower one on a tie).
///
/// # Panics
/// Unless `lo ≤ hi < prefix.len()`.
pub fn nearest_cut(prefix: &[f64], target: f64, lo: usize, hi: usize) -> usize {
    assert!(lo <= hi && hi < prefix.len(), "cut bounds {lo}..={hi} outside 0..{}", prefix.len());
    let above = lo + prefix[lo..=hi].partition_point(|&s| s < target);
    if above > hi {
        return hi;
    }
    if above > lo && target - prefix[above - 1] <= prefix[above] - target {
        above - 1
    } else {
        above
    }
}

/// Whether `boxes` of a 2D grid, in their order, are runs of boxes that share coordinate `a`
/// and step by one along the other, each run one step along `a` from the run before and
/// sharing a position along the other with it. Each run is then a line of boxes, and each
/// touches the one before: one piece. A sufficient test only (`false` says nothing).
pub(crate) fn rows_touch(boxes: &[[u32; 4]], a: usize) -> bool {
    let b = 1 - a;
    let mut before: Option<(u32, u32, u32)> = None; // the last run: its `a`, and its span along `b`
    let mut i = 0;
    while i < boxes.len() {
        let row = boxes[i][a];
        let (mut lo, mut hi) = (boxes[i][b], boxes[i][b]);
        let mut j = i + 1;
        while j < boxes.len() && boxes[j][a] == row {
            if boxes[j][b].abs_diff(boxes[j - 1][b]) != 1 {
                return false;
            }
            lo = lo.min(boxes[j][b]);
            hi = hi.max(boxes[j][b]);
            j += 1;
        }
        if let Some((last, last_lo, last_hi)) = before {
            if row.abs_diff(last) != 1 || hi < last_lo || lo > last_hi {
                return false;
            }
        }
        before = Some((row, lo, hi));
        i = j;
    }
    true
}

/// k-way RCB of some of the grid's boxes (the refinement's groups of parts), its buffers kept
/// between calls.
pub(crate) struct SubsetRcb {
    grid: Grid,
    stamp: Vec<u32>,
    now: u32,
    boxes: Vec<[u32; 4]>,
    owners: Vec<u32>,
}

impl SubsetRcb {
    pub(crate) fn new(grid: &Grid) -> Self {
        SubsetRcb { grid: *grid, stamp: vec![0; grid.len()], now: 0, boxes: Vec::new(), owners: vec![0; grid.len()] }
    }

    /// Part ids `0..parts` for the boxes of `subset` (`[x, y, z, index]` of boxes of the grid
    /// this was made for, at least `parts` of them, in any order) into `out`, in `subset`'s
    /// order: the subset cut as [`kway_rcb`] cuts a grid.
    pub(crate) fn split(&mut self, loads: &[f64], subset: &[[u32; 4]], parts: usize, out: &mut Vec<u32>) {
        self.boxes.clear();
        self.boxes.extend_from_slice(subset);
        let stamp = std::mem::take(&mut self.stamp);
        let mut pieces = Pieces { grid: &self.grid, stamp, now: self.now, stack: Vec::new(), scratch: Vec::new() };
        let whole = Cutting { direction: &|_, _, _| Vec::new(), balance_over_pieces: false };
        bisect(loads, &mut self.boxes, 0, parts as u32, &mut self.owners, &mut pieces, &whole);
        (self.stamp, self.now) = (pieces.stamp, pieces.now);
        out.clear();
        out.extend(subset.iter().map(|b| self.owners[b[3] as usize]));
    }
}

/// A flood fill restricted to a set of boxes, with a stamp per box so that nothing is
/// cleared between calls.
struct Pieces<'g> {
    grid: &'g Grid,
    stamp: Vec<u32>,
    now: u32,
    stack: Vec<[u32; 4]>,
    /// The sorts' buffer (see `sort_by_coordinates`), kept between calls.
    scratch: Vec<[u32; 4]>,
}

impl Pieces<'_> {
    /// Whether `boxes` form one face-connected piece (an empty set does).
    fn is_connected(&mut self, boxes: &[[u32; 4]]) -> bool {
        // The sorts leave most parts in rows that touch: a sequential pass says so without
        // the fill's scattered reads.
        if self.grid.nz() == 1 && (rows_touch(boxes, 0) || rows_touch(boxes, 1)) {
            return true;
        }
        let Some(&start) = boxes.first() else { return true };
        // Stamps: `now + 1` marks members, `now + 2` members reached.
        if self.now > u32::MAX - 2 {
            // Every stamp has been used: start them over rather than wrap.
            self.stamp.fill(0);
            self.now = 0;
        }
        let (member, reached) = (self.now + 1, self.now + 2);
        self.now += 2;
        boxes.iter().for_each(|b| self.stamp[b[3] as usize] = member);
        self.stamp[start[3] as usize] = reached;
        self.stack.push(start);
        // The stack holds coordinates beside the index, so a neighbour costs no division.
        let (nx, ny, nz) = (self.grid.nx() as u32, self.grid.ny() as u32, self.grid.nz() as u32);
        let mut count = 0;
        while let Some([i, j, l, k]) = self.stack.pop() {
            count += 1;
            let mut visit = |n: [u32; 4]| {
                if self.stamp[n[3] as usize] == member {
                    self.stamp[n[3] as usize] = reached;
                    self.stack.push(n);
                }
            };
            if i > 0 {
                visit([i - 1, j, l, k - 1]);
            }
            if i + 1 < nx {
                visit([i + 1, j, l, k + 1]);
            }
            if j > 0 {
                visit([i, j - 1, l, k - nx]);
            }
            if j + 1 < ny {
                visit([i, j + 1, l, k + nx]);
            }
            if l > 0 {
                visit([i, j, l - 1, k - nx * ny]);
            }
            if l + 1 < nz {
                visit([i, j, l + 1, k + nx * ny]);
            }
        }
        count == boxes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics;
    use proptest::prelude::*;

    /// Loads near the largest float (their sum past it) and near the smallest normal one are
    /// cut as the same loads at scale 1: the scaling by a power of two is exact. Before the
    /// bisections rescaled their loads, the running sums at 2^1015 went infinite and RCB cut
    /// blindly (a corner for a half, on a uniform map).
    #[test]
    fn loads_at_extreme_scales_are_cut_as_at_scale_one() {
        let grid = Grid::new(60, 40).unwrap();
        let loads = crate::loadmap::PerlinMap::with_seed(3).loads(&grid);
        let momentum: Vec<[f64; 3]> = (0..grid.len()).map(|k| [1.0, (k % 7) as f64 - 3.0, 0.0]).collect();
        let particles = vec![1.0; grid.len()];
        let other: Vec<f64> = loads.iter().rev().copied().collect();
        for e in [1015, -900] {
            let scaled: Vec<f64> = loads.iter().map(|q| q * 2f64.powi(e)).collect();
            let other_scaled: Vec<f64> = other.iter().map(|q| q * 2f64.powi(e)).collect();
            assert!(e < 0 || scaled.iter().sum::<f64>().is_infinite(), "the test needs a sum past f64::MAX");
            for parts in [2, 7, 16] {
                let rcb = kway_rcb(&grid, &scaled, parts).unwrap() == kway_rcb(&grid, &loads, parts).unwrap();
                assert!(rcb, "RCB, loads × 2^{e}, {parts} parts");
                let norcb = kway_norcb(&grid, &scaled, &momentum, &particles, parts, 1e-3).unwrap()
                    == kway_norcb(&grid, &loads, &momentum, &particles, parts, 1e-3).unwrap();
                assert!(norcb, "NoRCB, loads × 2^{e}, {parts} parts");
                let vector = kway_vector_rcb(&grid, &[scaled.clone(), other_scaled.clone()], parts).unwrap()
                    == kway_vector_rcb(&grid, &[loads.clone(), other.clone()], parts).unwrap();
                assert!(vector, "vector RCB, loads × 2^{e}, {parts} parts");
            }
        }
    }

    #[test]
    fn cuts_land_nearest_to_the_target_within_bounds() {
        let p = prefix_sums([1.0, 1.0, 5.0, 1.0].into_iter());
        assert_eq!(p, vec![0.0, 1.0, 2.0, 7.0, 8.0]);
        assert_eq!(nearest_cut(&p, 4.0, 0, 4), 2); // 2 is 2 away, 7 is 3 away
        assert_eq!(nearest_cut(&p, 5.0, 0, 4), 3);
        assert_eq!(nearest_cut(&p, 4.0, 3, 4), 3); // bounded from below
        assert_eq!(nearest_cut(&p, 100.0, 0, 2), 2); // bounded from above
        assert_eq!(nearest_cut(&p, 1.5, 0, 4), 1); // a tie goes low
        assert_eq!(nearest_cut(&p, 1.2, 0, 2), 1); // bounded from above, the sum below nearer
        assert_eq!(nearest_cut(&[0.0, 1.0, 1.0, 1.0, 2.0], 1.0, 0, 4), 1); // equal sums: the lowest
        assert_eq!(prefix_sums([0.0, 0.0].into_iter()), vec![0.0, 1.0, 2.0]);
    }

    #[test]
    fn an_order_splits_into_runs_of_about_equal_load_each_a_box_at_least() {
        // Ten boxes visited backwards, three parts: cuts nearest 10/3 and 20/3.
        let order: Vec<usize> = (0..10).rev().collect();
        let owners = split_order(&order, &[1.0; 10], 3);
        assert_eq!(owners, [2, 2, 2, 1, 1, 1, 1, 0, 0, 0]);
        // All the load in one box: the parts before and after it still get a box each.
        assert_eq!(split_order(&[0, 1, 2, 3, 4], &[0.0, 0.0, 0.0, 10.0, 0.0], 3), [0, 0, 0, 1, 2]);
        assert_eq!(split_order(&[2, 0, 1], &[5.0, 1.0, 1.0], 3), [1, 2, 0]);
        assert_eq!(split_order(&[0, 1, 2], &[10.0, 1.0, 1.0], 3), [0, 1, 2]);
        // The last part takes every box left, those without load too.
        assert_eq!(split_order(&[0, 1, 2], &[1.0, 1.0, 0.0], 2), [0, 1, 1]);
        assert_eq!(split_order(&[1, 0], &[1.0, 1.0], 1), [0, 0]);
        for parts in [0, 3] {
            let panicked = std::panic::catch_unwind(|| split_order(&[0, 1], &[1.0; 2], parts)).unwrap_err();
            let message = panicked.downcast_ref::<String>().unwrap();
            assert_eq!(message, &format!("{parts} parts of an order of 2 boxes"));
        }
    }

    #[test]
    fn pieces_start_their_stamps_over_rather_than_wrap() {
        let grid = Grid::new(4, 4).unwrap();
        let all = boxes_of(&grid);
        // Two opposite corners: in pieces, whatever the stamps left before.
        let corners = [all[0], all[15]];
        for now in [0, u32::MAX - 3, u32::MAX - 2, u32::MAX - 1, u32::MAX] {
            let mut pieces = Pieces { grid: &grid, stamp: vec![now; 16], now, stack: Vec::new(), scratch: Vec::new() };
            for _ in 0..3 {
                assert!(pieces.is_connected(&all));
                assert!(!pieces.is_connected(&corners), "from stamp {now}");
            }
        }
        // In 3D, boxes in touching rows of different layers are not neighbours.
        let cube = Grid::new_3d(2, 2, 2).unwrap();
        let mut pieces = Pieces { grid: &cube, stamp: vec![0; 8], now: 0, stack: Vec::new(), scratch: Vec::new() };
        let layers = boxes_of(&cube);
        assert!(!pieces.is_connected(&[layers[0], layers[5]]));
        assert!(pieces.is_connected(&[layers[0], layers[1], layers[5]]));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// The rows' test never calls a set in pieces connected, in any order, and calls
        /// whole rows connected.
        #[test]
        fn touching_rows_are_one_piece(
            nx in 1u32..12, ny in 1u32..12, keep in 1u64..100, seed in 0u64..1000, shuffled in proptest::bool::ANY,
        ) {
            let grid = Grid::new(nx as usize, ny as usize).unwrap();
            let mut rng = crate::rng::SplitMix64::new(seed);
            let mut boxes: Vec<[u32; 4]> =
                (0..nx * ny).map(|k| [k % nx, k / nx, 0, k]).filter(|_| rng.next_u64() % 100 < keep).collect();
            if shuffled {
                for i in (1..boxes.len()).rev() {
                    boxes.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
                }
            }
            let pieces = |grid| Pieces { grid, stamp: vec![0; grid.len()], now: 0, stack: Vec::new(), scratch: Vec::new() };
            // The fill alone: the same boxes in the first layer of a 3D grid skip the rows' test.
            let grid3 = Grid::new_3d(nx as usize, ny as usize, 2).unwrap();
            let filled = |set: &[[u32; 4]]| pieces(&grid3).is_connected(set);
            for a in 0..2 {
                if rows_touch(&boxes, a) {
                    prop_assert!(filled(&boxes), "{boxes:?} called one piece along {a}");
                }
            }
            prop_assert_eq!(pieces(&grid).is_connected(&boxes), filled(&boxes));
            // And the fill agrees with the metrics' count of parts in pieces (the set is part
            // 0, every other box a part of its own).
            let mut owners: Vec<u32> = (1..=nx * ny).collect();
            boxes.iter().for_each(|b| owners[b[3] as usize] = 0);
            let parts = (nx * ny + 1) as usize;
            prop_assert_eq!(filled(&boxes), metrics::disconnected_parts(&grid, &owners, parts) == 0);
            // A whole rectangle, row by row, and any prefix of it, pass.
            let all: Vec<[u32; 4]> = (0..nx * ny).map(|k| [k % nx, k / nx, 0, k]).collect();
            let cut = (seed % u64::from(nx * ny)) as usize + 1;
            prop_assert!(rows_touch(&all[..cut], 1) && rows_touch(&all[cut - 1..], 1));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// The counting sorts give the comparison sort's order on any set of distinct boxes.
        #[test]
        fn counting_sorts_order_boxes_as_the_comparison_sort_does(
            nx in 1u32..20, ny in 1u32..20, nz in 1u32..4, keep in 1u64..100, seed in 0u64..1000,
            axis in 0usize..3, reversed in proptest::bool::ANY,
        ) {
            let mut rng = crate::rng::SplitMix64::new(seed);
            let mut boxes: Vec<[u32; 4]> = (0..nx * ny * nz)
                .map(|k| [k % nx, k / nx % ny, k / (nx * ny), k])
                .filter(|_| rng.next_u64() % 100 < keep)
                .collect();
            // A shuffled part, as a parent's cut leaves it along another axis.
            for i in (1..boxes.len()).rev() {
                boxes.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
            }
            let (mut lo, mut hi) = ([u32::MAX; 3], [0; 3]);
            for b in &boxes {
                for a in 0..3 {
                    lo[a] = lo[a].min(b[a]);
                    hi[a] = hi[a].max(b[a]);
                }
            }
            let keys = [axis, (axis + 2) % 3, (axis + 1) % 3];
            let flip = |v: u32| if reversed { u32::MAX - v } else { v };
            let mut expected = boxes.clone();
            expected.sort_unstable_by_key(|b| (b[keys[0]], flip(b[keys[1]]), flip(b[keys[2]])));
            sort_by_coordinates(&mut boxes, keys, reversed, (lo, hi), &mut Vec::new());
            prop_assert_eq!(boxes, expected);
        }

        #[test]
        fn parts_are_connected_non_empty_and_the_balance_is_bounded(
            nx in 1usize..30, ny in 1usize..30, nz in 1usize..3, parts in 1usize..40, seed in 0u64..1000,
        ) {
            let grid = Grid::new_3d(nx, ny, nz).unwrap();
            prop_assume!(parts <= grid.len());
            let mut rng = crate::rng::SplitMix64::new(seed);
            let loads: Vec<f64> = (0..grid.len()).map(|_| rng.next_f64()).collect();
            let owners = kway_rcb(&grid, &loads, parts).unwrap();
            // In 2D the retries keep every part in one piece; in 3D a part falls in pieces
            // where a cut in one piece would miss its share by over half a box, but none is empty.
            let split = metrics::disconnected_parts(&grid, &owners, parts);
            if nz == 1 {
                prop_assert_eq!(split, 0);
            }
            non_empty_and_within_a_box_per_cut(&owners, &loads, parts)?;
        }

        /// In 3D each cut errs by at most half the heaviest box, so the charges stay within
        /// half a box per level of the mean: a tighter bound than the one above. On these random
        /// maps the cuts in one piece land that near too (the test passes without the
        /// half-a-box rule); the U and the ball below are the cases where only the rule does.
        #[test]
        fn rcb_in_3d_cuts_within_half_a_box_of_each_share(
            nx in 1usize..12, ny in 1usize..12, nz in 2usize..6, parts in 1usize..24, seed in 0u64..1000,
            empty in 0.0f64..0.9,
        ) {
            let grid = Grid::new_3d(nx, ny, nz).unwrap();
            prop_assume!(4 * parts <= grid.len());
            let mut rng = crate::rng::SplitMix64::new(seed);
            // Scattered empty boxes leave few cuts in one piece near the share.
            let loads: Vec<f64> =
                (0..grid.len()).map(|_| if rng.next_f64() < empty { 0.0 } else { rng.next_f64() }).collect();
            let owners = kway_rcb(&grid, &loads, parts).unwrap();
            let levels = (parts as f64).log2().ceil();
            let max = loads.iter().copied().fold(0.0, f64::max);
            let mean = loads.iter().sum::<f64>() / parts as f64;
            let charges = metrics::charges(&owners, &loads, parts);
            let worst = charges.iter().copied().fold(0.0, f64::max);
            prop_assert!(worst <= mean + levels * max / 2.0 + 1e-9, "{} against {} + {} × {} / 2", worst, mean, levels, max);
        }
    }

    /// No part is empty, and each cut errs by about one box's load: the charges stay within
    /// depth × max load of their share.
    fn non_empty_and_within_a_box_per_cut(
        owners: &[u32],
        loads: &[f64],
        parts: usize,
    ) -> std::result::Result<(), TestCaseError> {
        let mut sizes = vec![0; parts];
        owners.iter().for_each(|&p| sizes[p as usize] += 1);
        prop_assert!(sizes.iter().all(|&s| s > 0));
        let depth = (parts as f64).log2().ceil() + 1.0;
        let max = loads.iter().copied().fold(0.0, f64::max);
        let mean = loads.iter().sum::<f64>() / parts as f64;
        let charges = metrics::charges(owners, loads, parts);
        prop_assert!(metrics::max_avg(&charges) * mean <= mean + depth * max + 1e-9);
        Ok(())
    }

    #[test]
    fn bad_input_is_refused() {
        let grid = Grid::new(4, 4).unwrap();
        assert!(kway_rcb(&grid, &[1.0; 16], 17).is_err());
        assert!(kway_rcb(&grid, &[1.0; 15], 2).is_err());
        let (ones, still) = (vec![1.0; 16], vec![[0.0; 3]; 16]);
        assert!(kway_norcb(&grid, &ones, &still[..15], &ones, 2, 1e-3).is_err());
        assert!(kway_norcb(&grid, &ones, &still, &ones, 2, f64::NAN).is_err());
        let mut nan = still.clone();
        nan[3][1] = f64::NAN;
        let e = kway_norcb(&grid, &ones, &nan, &ones, 2, 1e-3).unwrap_err();
        assert!(e.to_string().contains("box 3"), "{e}");
        // z is checked on a 2D grid too, though not read.
        nan[3] = [0.0, 0.0, f64::INFINITY];
        let e = kway_norcb(&grid, &ones, &nan, &ones, 2, 1e-3).unwrap_err();
        assert!(e.to_string().contains("box 3"), "{e}");
    }

    #[test]
    fn norcb_cuts_along_the_flow_where_rcb_cuts_across_it() {
        // A long domain, everything moving along x: RCB cuts across the long side, NoRCB
        // into stripes that particles moving along x never leave.
        let grid = Grid::new(32, 8).unwrap();
        let (loads, count) = (vec![1.0; 256], vec![2.0; 256]);
        let rcb = kway_rcb(&grid, &loads, 4).unwrap();
        let norcb = kway_norcb(&grid, &loads, &vec![[0.5, 0.0, 0.0]; 256], &count, 4, 1e-3).unwrap();
        assert!(crossings_along(&grid, &rcb, 0) >= 24, "{}", crossings_along(&grid, &rcb, 0));
        assert_eq!(crossings_along(&grid, &norcb, 0), 0);
        assert_eq!(metrics::charges(&norcb, &loads, 4), vec![64.0; 4]);
        // At rest (or under the threshold) it is RCB.
        let slow = kway_norcb(&grid, &loads, &vec![[1e-4, 0.0, 0.0]; 256], &count, 4, 1e-3).unwrap();
        assert_eq!(slow, rcb);
        // Opposite velocities cancel: the mean is what counts, as in the paper.
        let mut opposed = vec![[1.0, 0.0, 0.0]; 256];
        opposed[128..].iter_mut().for_each(|m| m[0] = -1.0);
        assert_eq!(kway_norcb(&grid, &loads, &opposed, &count, 4, 1e-3).unwrap(), rcb);
    }

    #[test]
    fn vector_rcb_balances_phases_that_rcb_on_their_sum_leaves_apart() {
        // md-like: phase 0 (rebin) grows with the particles, phase 1 (forces) with their
        // square; a dense disc off the centre.
        let grid = Grid::new(40, 40).unwrap();
        let density: Vec<f64> = (0..1600)
            .map(|k| {
                let [i, j, _] = grid.coords(k);
                let r = (i as f64 - 12.0).hypot(j as f64 - 14.0);
                if r < 9.0 {
                    6.0
                } else {
                    1.0
                }
            })
            .collect();
        let phases = vec![density.iter().map(|d| 2.0 * d).collect::<Vec<_>>(), density.iter().map(|d| d * d).collect()];
        let sum: Vec<f64> = (0..1600).map(|k| phases[0][k] + phases[1][k]).collect();
        for parts in [2, 3, 8] {
            let scalar = kway_rcb(&grid, &sum, parts).unwrap();
            let vector = kway_vector_rcb(&grid, &phases, parts).unwrap();
            let (s, v) =
                (metrics::vector_max_avg(&scalar, &phases, parts), metrics::vector_max_avg(&vector, &phases, parts));
            assert!(v <= s + 1e-9, "{parts} parts: vector {v} > scalar {s}");
            // Measured: 2 parts 1.088 → 1.007, 3: 1.082 → 1.006, 8: 1.322 → 1.068.
            assert!(v < if parts < 8 { 1.02 } else { 1.08 }, "{parts} parts: vector {v}, scalar {s}");
            assert_eq!(metrics::disconnected_parts(&grid, &vector, parts), 0);
        }
        // One phase: as balanced as RCB.
        let one = kway_vector_rcb(&grid, &phases[..1], 4).unwrap();
        assert!(metrics::max_avg(&metrics::charges(&one, &phases[0], 4)) < 1.02);
        assert!(kway_vector_rcb(&grid, &[], 2).is_err());
        assert!(kway_vector_rcb(&grid, &[vec![1.0; 3]], 2).is_err());
    }

    #[test]
    fn oblique_cuts_order_boxes_across_then_along_the_direction() {
        // Along the four axis directions the keys are exact: across the direction first
        // (its normal, `d` turned a quarter left), then along it.
        let grid = Grid::new(4, 3).unwrap();
        let loads = vec![1.0; 12];
        type Key = fn(&[u32; 4]) -> (i64, i64);
        let cases: [([f64; 2], Key); 4] = [
            ([1.0, 0.0], |b| (i64::from(b[1]), i64::from(b[0]))),
            ([-1.0, 0.0], |b| (-i64::from(b[1]), -i64::from(b[0]))),
            ([0.0, 1.0], |b| (-i64::from(b[0]), i64::from(b[1]))),
            ([0.0, -1.0], |b| (i64::from(b[0]), -i64::from(b[1]))),
        ];
        for (d, key) in cases {
            let mut boxes = boxes_of(&grid);
            let cut = oblique_cut(&loads, &mut boxes, &line_frame(d), 1, 2);
            let mut want = boxes_of(&grid);
            want.sort_by_key(key);
            assert_eq!(boxes, want, "direction {d:?}");
            assert_eq!(cut, 6);
        }
        // A third of the load to the first side; the heavy box 0 moves it.
        let mut heavy = loads.clone();
        heavy[0] = 5.0;
        assert_eq!(oblique_cut(&heavy, &mut boxes_of(&grid), &line_frame([1.0, 0.0]), 1, 3), 1);
    }

    #[test]
    fn norcb_cuts_through_the_median_parallel_to_the_mean_velocity() {
        // Moving along the diagonal: the boxes below it, then the lower half of it, are one
        // side (ordered across the velocity, then along it).
        let grid = Grid::new(8, 8).unwrap();
        let (loads, count) = (vec![1.0; 64], vec![1.0; 64]);
        let owners = kway_norcb(&grid, &loads, &vec![[2.0, 2.0, 0.0]; 64], &count, 2, 1e-3).unwrap();
        for (k, &o) in owners.iter().enumerate() {
            let [x, y, _] = grid.coords(k);
            assert_eq!(o == 0, y < x || (y == x && x < 4), "box ({x}, {y}): {owners:?}");
        }
    }

    #[test]
    fn norcb_cuts_along_the_flow_from_the_threshold_up_and_as_rcb_without_particles() {
        // 8 × 4 boxes: RCB cuts across x, into left and right; the flow along x into bottom
        // and top. The mean velocity is the momentum over the particles: 16 / 32,000.
        let grid = Grid::new(8, 4).unwrap();
        let loads = vec![1.0; 32];
        let rcb = kway_rcb(&grid, &loads, 2).unwrap();
        assert_eq!(rcb[..8], [0, 0, 0, 0, 1, 1, 1, 1]);
        let (momentum, crowd) = (vec![[0.5, 0.0, 0.0]; 32], vec![1000.0; 32]);
        let stripes: Vec<u32> = (0..32).map(|k| u32::from(k >= 16)).collect();
        assert_eq!(kway_norcb(&grid, &loads, &momentum, &crowd, 2, 5e-4).unwrap(), stripes);
        assert_eq!(kway_norcb(&grid, &loads, &momentum, &crowd, 2, 5.1e-4).unwrap(), rcb);
        // Momentum without particles, or no motion under a zero threshold: no direction.
        assert_eq!(kway_norcb(&grid, &loads, &momentum, &[0.0; 32], 2, 0.0).unwrap(), rcb);
        assert_eq!(kway_norcb(&grid, &loads, &[[0.0; 3]; 32], &crowd, 2, 0.0).unwrap(), rcb);
        for threshold in [-1e-3, f64::INFINITY] {
            let e = kway_norcb(&grid, &loads, &momentum, &crowd, 2, threshold).unwrap_err();
            assert!(e.to_string().contains("threshold"), "{e}");
        }
    }

    #[test]
    fn a_large_part_whose_nearest_cuts_leave_pieces_is_cut_between_whole_rows() {
        // 40 × 41 boxes less the bottom row's ends and all the top row but boxes 1 and 39:
        // 1,600 boxes (over SEARCH_MAX_BOXES, so nothing is searched cut by cut). The two top
        // boxes are heavy, so that half the load falls in row 39, two boxes in: cut there, in
        // either order, a top box is left alone. The nearest boundary between whole rows is
        // below row 39 (a search would find a cut one box nearer, in one order only).
        let grid = Grid::new(40, 41).unwrap();
        let kept = |[x, y, _]: [usize; 3]| match y {
            0 => (1..39).contains(&x),
            40 => x == 1 || x == 39,
            _ => true,
        };
        let subset: Vec<[u32; 4]> = boxes_of(&grid).into_iter().filter(|b| kept(grid.coords(b[3] as usize))).collect();
        assert!(subset.len() > SEARCH_MAX_BOXES);
        let loads: Vec<f64> = (0..grid.len()).map(|k| if grid.coords(k)[1] == 40 { 761.0 } else { 1.0 }).collect();
        let mut out = Vec::new();
        SubsetRcb::new(&grid).split(&loads, &subset, 2, &mut out);
        for (b, &o) in subset.iter().zip(&out) {
            assert_eq!(o, u32::from(b[1] >= 39), "box ({}, {})", b[0], b[1]);
        }
    }

    #[test]
    fn a_cut_in_pieces_in_one_order_is_tried_in_the_other() {
        // 40 full lines of 40 boxes and one box beyond the first of them, which carries as
        // much as 1,560 boxes: half the load falls halfway along the last full line. Cut
        // there along the lines' order, the box beyond is left alone; in the other order it
        // is not. Over SEARCH_MAX_BOXES, so the order tried matters. Both ways round: rows
        // (cut across y) and columns (across x).
        for transposed in [false, true] {
            let (w, h) = if transposed { (41, 40) } else { (40, 41) };
            let grid = Grid::new(w, h).unwrap();
            // (along the lines, across them)
            let at = |b: &[u32; 4]| if transposed { (b[1], b[0]) } else { (b[0], b[1]) };
            let subset: Vec<[u32; 4]> = boxes_of(&grid).into_iter().filter(|b| at(b).1 < 40 || at(b).0 == 0).collect();
            assert!(subset.len() > SEARCH_MAX_BOXES);
            let loads: Vec<f64> = boxes_of(&grid).iter().map(|b| if at(b).1 == 40 { 1560.0 } else { 1.0 }).collect();
            let mut out = Vec::new();
            SubsetRcb::new(&grid).split(&loads, &subset, 2, &mut out);
            for (b, &o) in subset.iter().zip(&out) {
                let (along, across) = at(b);
                assert_eq!(o == 0, across < 39 || (across == 39 && along >= 20), "box {b:?}, transposed {transposed}");
            }
        }
    }

    #[test]
    fn a_small_part_whose_quick_cuts_leave_pieces_is_searched_cut_by_cut() {
        // Three full rows of a 4 × 4 grid and boxes 1 and 3 of the top row, which carry 5
        // each, so that half the load (11 of 22) falls three boxes into row 2. Cut there, in
        // either order, a top box is left alone; so is it between whole rows nearest the half
        // (below the top row). Searched, the nearest cut in one piece takes one box of row 2,
        // in x order only (the other way, box 3 of the top row would be alone).
        let grid = Grid::new(4, 4).unwrap();
        let subset: Vec<[u32; 4]> = boxes_of(&grid).into_iter().filter(|b| b[1] < 3 || b[0] % 2 == 1).collect();
        let loads: Vec<f64> = (0..16).map(|k| if k >= 12 { 5.0 } else { 1.0 }).collect();
        let mut out = Vec::new();
        SubsetRcb::new(&grid).split(&loads, &subset, 2, &mut out);
        for (b, &o) in subset.iter().zip(&out) {
            assert_eq!(o == 0, b[1] < 2 || (b[1] == 2 && b[0] == 0), "box ({}, {})", b[0], b[1]);
        }
    }

    #[test]
    fn vector_rcb_breaks_near_ties_for_the_shorter_cut() {
        // One uniform phase on 16 × 4 boxes: every direction halves it exactly; the shortest
        // line is the vertical one, into left and right halves (the right one first: the
        // normal of the direction π / 2 points to −x).
        let grid = Grid::new(16, 4).unwrap();
        let owners = kway_vector_rcb(&grid, &[vec![1.0; 64]], 2).unwrap();
        let halves: Vec<u32> = (0..64).map(|k| u32::from(k % 16 < 8)).collect();
        assert_eq!(owners, halves);
        // In 3D, 16 × 4 × 6 boxes: every plane of the search halves them alike, and the one
        // crossing fewest boxes is across x (24 boxes; across z 64, across y 96).
        let slab = Grid::new_3d(16, 4, 6).unwrap();
        let owners = kway_vector_rcb(&slab, &[vec![1.0; 384]], 2).unwrap();
        let x_halves = |k: usize| slab.coords(k)[0] < 8;
        assert!((0..384).all(|k| x_halves(k) == (owners[k] == owners[0])), "{owners:?}");
        // A wall one box thick, 1 × 4 × 8: across z the cut crosses a row of 4, across y a
        // column of 8.
        let wall = Grid::new_3d(1, 4, 8).unwrap();
        let owners = kway_vector_rcb(&wall, &[vec![1.0; 32]], 2).unwrap();
        assert!((0..32).all(|k| (wall.coords(k)[2] < 4) == (owners[k] == owners[0])), "{owners:?}");
    }

    /// `Σ_phase max_side load / side parts` of a first cut into `sides` (0 for the first
    /// `parts / 2` parts' side, 1 for the rest).
    fn first_cut_cost(sides: &[u32], phases: &[Vec<f64>], parts: u32) -> f64 {
        let left = f64::from(parts / 2);
        phases
            .iter()
            .map(|l| {
                let q = metrics::charges(sides, l, 2);
                (q[0] / left).max(q[1] / (f64::from(parts) - left))
            })
            .sum()
    }

    /// The sides of the first cut of `parts` parts across `frame`'s normal, as
    /// [`first_cut_cost`] reads them.
    fn sides_of_cut(grid: &Grid, total: &[f64], frame: &Frame, parts: u32) -> Vec<u32> {
        let mut order = boxes_of(grid);
        let cut = oblique_cut(total, &mut order, frame, parts / 2, parts);
        let mut sides = vec![1; grid.len()];
        order[..cut].iter().for_each(|b| sides[b[3] as usize] = 0);
        sides
    }

    #[test]
    fn vector_rcb_finds_the_best_straight_cut_within_its_angular_step() {
        // Two phases heavy in different places, two to five parts: the first cut chosen costs
        // (Σ_phase max_side load / side parts) no more than the best of 720 directions costed
        // exactly, within what a step of π / 64 can miss; the best of eight directions alone
        // misses by more.
        let grid = Grid::new(24, 24).unwrap();
        let bump = |cx: f64, cy: f64| -> Vec<f64> {
            (0..grid.len())
                .map(|k| {
                    let [i, j, _] = grid.coords(k);
                    0.05 + (-((i as f64 - cx).powi(2) + (j as f64 - cy).powi(2)) / 12.0).exp()
                })
                .collect()
        };
        let straight = |angle: f64, total: &[f64], phases: &[Vec<f64>], parts: u32| {
            let frame = line_frame([angle.cos(), angle.sin()]);
            first_cut_cost(&sides_of_cut(&grid, total, &frame, parts), phases, parts)
        };
        let pi = std::f64::consts::PI;
        let bumps = [
            ((4.0, 5.0), (18.0, 6.0)),
            ((3.0, 20.0), (12.0, 4.0)),
            ((20.0, 19.0), (6.0, 12.0)),
            ((5.0, 12.0), (19.0, 12.0)),
            ((12.0, 3.0), (12.0, 20.0)),
        ];
        let (mut found, mut eight) = (Vec::new(), Vec::new());
        for parts in [2, 3, 4, 5] {
            for (a, b) in bumps {
                let phases = vec![bump(a.0, a.1), bump(b.0, b.1)];
                let total: Vec<f64> = (0..grid.len()).map(|k| phases[0][k] + phases[1][k]).collect();
                let best_of = |n: u32| {
                    (0..n)
                        .map(|i| straight(pi * f64::from(i) / f64::from(n), &total, &phases, parts))
                        .fold(f64::INFINITY, f64::min)
                };
                let best = best_of(720);
                let owners = kway_vector_rcb(&grid, &phases, parts as usize).unwrap();
                let sides: Vec<u32> = owners.iter().map(|&o| u32::from(o >= parts / 2)).collect();
                found.push(first_cut_cost(&sides, &phases, parts) / best);
                eight.push(best_of(8) / best);
            }
        }
        // Measured: at most 1.046, 1.012 on average; the best of eight directions 1.067.
        let mean = |r: &[f64]| r.iter().sum::<f64>() / r.len() as f64;
        assert!(found.iter().all(|&r| r <= 1.05) && mean(&found) <= 1.02, "{found:?}");
        assert!(mean(&eight) >= 1.04, "the cases need a fine search: {eight:?}");
    }

    /// Boxes next to each other along `axis` in different parts: where particles moving along
    /// it change part.
    fn crossings_along(grid: &Grid, owners: &[u32], axis: usize) -> usize {
        let step = [1, grid.nx(), grid.nx() * grid.ny()][axis];
        let size = [grid.nx(), grid.ny(), grid.nz()][axis];
        (0..grid.len()).filter(|&k| grid.coords(k)[axis] + 1 < size && owners[k] != owners[k + step]).count()
    }

    #[test]
    fn norcb_cuts_3d_grids_along_the_flow_in_planes() {
        // Flows along each axis of a box of 16 × 8 × 12: no part boundary crosses the flow
        // where each cut halves whole lines of boxes along it (2 and 8 parts), and a cut's
        // step crosses it once where one does not (3 parts: a third is 5⅓ layers); RCB's
        // first cut (across x, the longest side) crosses a flow along x.
        let grid = Grid::new_3d(16, 8, 12).unwrap();
        let (loads, count) = (vec![1.0; grid.len()], vec![3.0; grid.len()]);
        let rcb = kway_rcb(&grid, &loads, 8).unwrap();
        assert!(crossings_along(&grid, &rcb, 0) >= 96, "{}", crossings_along(&grid, &rcb, 0));
        for axis in 0..3 {
            let mut v = [0.0; 3];
            v[axis] = -0.7;
            for (parts, steps) in [(2, 0), (3, 2), (8, 0)] {
                let owners = kway_norcb(&grid, &loads, &vec![v; grid.len()], &count, parts, 1e-3).unwrap();
                let crossings = crossings_along(&grid, &owners, axis);
                assert!(crossings <= steps, "flow along axis {axis}, {parts} parts: {crossings}");
                non_empty_and_within_a_box_per_cut(&owners, &loads, parts).unwrap();
                assert_eq!(metrics::disconnected_parts(&grid, &owners, parts), 0);
            }
        }
        // An oblique flow in the xy plane: the 2D cut on every layer, stacked.
        let slab = Grid::new_3d(8, 8, 3).unwrap();
        let flat = Grid::new(8, 8).unwrap();
        let owners = kway_norcb(&slab, &[1.0; 192], &[[2.0, 2.0, 0.0]; 192], &[1.0; 192], 2, 1e-3).unwrap();
        let layer = kway_norcb(&flat, &[1.0; 64], &[[2.0, 2.0, 0.0]; 64], &[1.0; 64], 2, 1e-3).unwrap();
        assert_eq!(owners[..64], layer[..]);
        assert!(owners.chunks(64).all(|l| l == &owners[..64]), "{owners:?}");
        // On a 2D grid z is not read.
        let lifted = kway_norcb(&flat, &[1.0; 64], &[[2.0, 2.0, 9.0]; 64], &[1.0; 64], 2, 1e-3).unwrap();
        assert_eq!(lifted, layer);
        // Under the threshold in 3D too, RCB.
        let slow = kway_norcb(&grid, &loads, &vec![[0.0, 0.0, 1e-4]; grid.len()], &count, 8, 1e-3).unwrap();
        assert_eq!(slow, rcb);
    }

    /// A U of boxes in 3D, its two prongs along x: every cut across x near the share leaves
    /// the prongs' ends in two pieces, and the only cuts in one piece take a prong's tip or
    /// a corner of the base alone. The partitions take the nearest cut, in pieces, within half a box of the share;
    /// the refinement's groups keep both sides whole, however far off.
    #[test]
    fn rcb_in_3d_gives_up_whole_parts_where_they_cost_more_than_half_a_box() {
        let grid = Grid::new_3d(8, 4, 2).unwrap();
        let u: Vec<[u32; 4]> = boxes_of(&grid).into_iter().filter(|b| b[0] == 0 || b[1] == 0 || b[1] == 3).collect();
        let loads = vec![1.0; grid.len()];
        let cut = |cutting: &Cutting, parts: u32| {
            let mut pieces =
                Pieces { grid: &grid, stamp: vec![0; grid.len()], now: 0, stack: Vec::new(), scratch: Vec::new() };
            let (mut boxes, mut owners) = (u.clone(), vec![9; grid.len()]);
            bisect(&loads, &mut boxes, 0, parts, &mut owners, &mut pieces, cutting);
            let mut whole =
                Pieces { grid: &grid, stamp: vec![0; grid.len()], now: 0, stack: Vec::new(), scratch: Vec::new() };
            let side = |p: u32| u.iter().copied().filter(|b| owners[b[3] as usize] == p).collect::<Vec<_>>();
            let sizes: Vec<usize> = (0..parts).map(|p| side(p).len()).collect();
            (sizes, (0..parts).all(|p| whole.is_connected(&side(p))))
        };
        // 36 boxes: 18 a side, 9 a part of four.
        assert_eq!(u.len(), 36);
        let partition = Cutting::partition(&|_, _, _| Vec::new());
        assert_eq!(cut(&partition, 2), (vec![18, 18], false));
        assert_eq!(cut(&partition, 4).0, vec![9; 4]);
        let (sizes, connected) = cut(&Cutting { direction: &|_, _, _| Vec::new(), balance_over_pieces: false }, 2);
        assert!(connected && sizes[0].abs_diff(18) >= 12, "{sizes:?} boxes");
    }

    /// A ball of load in 3D with nothing outside it: at 64 and 72 parts RCB's cuts in one piece
    /// land far off their shares (1.119 and 1.186 × the mean with every part whole), and the
    /// nearest cuts taken in pieces leave 1.071 and 1.066 (one and two parts in pieces). On a
    /// ball whose load falls smoothly to the grid's edge every part stays whole, as before.
    #[test]
    fn rcb_in_3d_takes_balance_over_whole_parts_on_a_ball_with_nothing_outside() {
        let grid = Grid::new_3d(24, 24, 24).unwrap();
        for empty_outside in [false, true] {
            let loads: Vec<f64> = (0..grid.len())
                .map(|k| {
                    let r2: f64 = grid.coords(k).map(|c| (c as f64 - 11.7).powi(2)).iter().sum();
                    let n = if empty_outside && r2 >= 81.0 { 0.0 } else { 1.0 + 12.0 * (-r2 / 30.0).exp() };
                    n * n
                })
                .collect();
            for parts in [64, 72] {
                let owners = kway_rcb(&grid, &loads, parts).unwrap();
                let balance = metrics::max_avg(&metrics::charges(&owners, &loads, parts));
                let split = metrics::disconnected_parts(&grid, &owners, parts);
                let mut whole = Vec::new();
                SubsetRcb::new(&grid).split(&loads, &boxes_of(&grid), parts, &mut whole);
                let kept = metrics::max_avg(&metrics::charges(&whole, &loads, parts));
                assert_eq!(metrics::disconnected_parts(&grid, &whole, parts), 0);
                if empty_outside {
                    assert!(split > 0 && balance < 1.08 && kept > 1.1, "{balance} ({split} in pieces), whole {kept}");
                } else {
                    assert!(
                        split == 0 && balance < 1.06 && kept == balance,
                        "{balance} ({split} in pieces), whole {kept}"
                    );
                }
            }
        }
    }

    /// A contracting ball in 3D, 64 parts, where the slanted parts' oblique cuts often leave a
    /// sliver. On a ball whose load falls smoothly the cuts across the longest side that keep
    /// both sides whole land within half a box of the share and are kept: every part in one
    /// piece, 1.036 × the mean (RCB 1.029). With no load outside the ball they land far off it
    /// (1.31 × the mean when kept), and the cuts along the flow are taken in pieces: 1.062 ×
    /// the mean, 3 parts in pieces (RCB 1.071), each cut within a box of its share.
    #[test]
    fn norcb_in_3d_keeps_parts_whole_only_where_that_costs_no_more_than_half_a_box() {
        let grid = Grid::new_3d(24, 24, 24).unwrap();
        for empty_outside in [false, true] {
            let (mut loads, mut momentum, mut count) = (Vec::new(), Vec::new(), Vec::new());
            for k in 0..grid.len() {
                let p = grid.coords(k).map(|c| c as f64 - 11.7);
                let r2: f64 = p.iter().map(|c| c * c).sum();
                let n = if empty_outside && r2 >= 81.0 { 0.0 } else { 1.0 + 12.0 * (-r2 / 30.0).exp() };
                loads.push(n * n);
                count.push(n);
                momentum.push(p.map(|c| -0.01 * c * n));
            }
            let owners = kway_norcb(&grid, &loads, &momentum, &count, 64, 1e-3).unwrap();
            let balance = metrics::max_avg(&metrics::charges(&owners, &loads, 64));
            let pieces = metrics::disconnected_parts(&grid, &owners, 64);
            if empty_outside {
                assert!(pieces > 0 && balance < 1.1, "{balance}, {pieces} parts in pieces");
            } else {
                assert!(pieces == 0 && balance < 1.05, "{balance}, {pieces} parts in pieces");
            }
            non_empty_and_within_a_box_per_cut(&owners, &loads, 64).unwrap();
        }
    }

    #[test]
    fn the_planes_along_a_velocity_hold_it_longest_seen_down_it_first() {
        // A part of 16 × 8 × 4 boxes.
        let part: Vec<[u32; 4]> = boxes_of(&Grid::new_3d(16, 8, 4).unwrap());
        let dot = |a: [f64; 3], b: [f64; 3]| a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
        let h = 0.5f64.sqrt();
        for (d, normals) in [
            // Along y: across x (15 long), then z (3); y holds no plane.
            ([0.0, 1.0, 0.0], vec![[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]),
            // Along the xy diagonal: x seen down it 15 / √2 long, y 7 / √2, z 3.
            ([h, h, 0.0], vec![[h, -h, 0.0], [-h, h, 0.0], [0.0, 0.0, 1.0]]),
            // Along x: y and z seen whole (7 and 3).
            ([-1.0, 0.0, 0.0], vec![[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]),
        ] {
            let planes = planes_along(&part, d);
            assert_eq!(planes.len(), normals.len(), "{d:?}");
            for (frame, n) in planes.iter().zip(&normals) {
                assert!(frame[0].iter().zip(n).all(|(a, b)| (a - b).abs() < 1e-12), "{d:?}: {frame:?}");
                assert_eq!(frame[2], d);
                for (a, b) in [(0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2)] {
                    let want = if a == b { 1.0 } else { 0.0 };
                    assert!((dot(frame[a], frame[b]) - want).abs() < 1e-12, "{d:?}: {frame:?}");
                }
            }
        }
        // Ties go to the last axis, as RCB's: a cube seen down x.
        let cube = boxes_of(&Grid::new_3d(4, 4, 4).unwrap());
        assert_eq!(planes_along(&cube, [1.0, 0.0, 0.0])[0][0], [0.0, 0.0, 1.0]);
        // A part away from the origin (x 0..16, y 20..28, z 0..4): extents, not coordinates,
        // and seen down the flow: nearly along x, x's 15 boxes look 2.1 long, y's 7 whole.
        let away: Vec<[u32; 4]> =
            boxes_of(&Grid::new_3d(16, 28, 4).unwrap()).into_iter().filter(|b| b[1] >= 20).collect();
        let first = |d: [f64; 3]| planes_along(&away, d)[0][0].map(|c| (c * 1e9).round() / 1e9);
        assert_eq!(first([0.0, 0.0, 1.0]), [1.0, 0.0, 0.0]);
        assert_eq!(first([0.99, 0.0, 0.0199f64.sqrt()]), [0.0, 1.0, 0.0]);
        // Any flow: frames orthonormal, the flow last.
        for d in [[0.6, 0.48, 0.64], [-0.48, 0.6, -0.64], [0.0, 0.8, -0.6]] {
            for frame in planes_along(&away, d) {
                assert_eq!(frame[2], d);
                for (a, b) in [(0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2)] {
                    let want = if a == b { 1.0 } else { 0.0 };
                    assert!((dot(frame[a], frame[b]) - want).abs() < 1e-12, "{d:?}: {frame:?}");
                }
            }
        }
    }

    /// The 13 starting normals are the cube's 3 face, 6 edge and 4 corner directions, one of
    /// each opposite pair.
    #[test]
    fn the_starting_normals_are_a_cubes_faces_edges_and_corners() {
        let mut got: Vec<[i64; 3]> = cube_normals()
            .iter()
            .map(|&angles| {
                let n = sphere_frame(angles)[0];
                // Scaled to integer steps: ±1 and 0 in each component.
                let largest = n.iter().fold(0.0f64, |m, c| m.max(c.abs()));
                let v = n.map(|c| (c / largest).round() as i64);
                assert!(n.iter().zip(&v).all(|(c, &i)| (c / largest - i as f64).abs() < 1e-9), "{n:?}");
                // One of each opposite pair: the first non-zero component positive.
                let sign = v.iter().copied().find(|&c| c != 0).unwrap().signum();
                v.map(|c| c * sign)
            })
            .collect();
        got.sort();
        let mut want: Vec<[i64; 3]> = (-1..=1i64)
            .flat_map(|x| (-1..=1i64).flat_map(move |y| (-1..=1i64).map(move |z| [x, y, z])))
            .filter(|v| v.iter().copied().find(|&c| c != 0).is_some_and(|c| c > 0))
            .collect();
        want.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn sphere_frames_are_orthonormal_with_the_normal_at_the_angles() {
        let dot = |a: [f64; 3], b: [f64; 3]| a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
        for (i, j) in (0..12).flat_map(|i| (0..24).map(move |j| (i, j))) {
            let (theta, phi) = (f64::from(i) * 0.3 - 0.4, f64::from(j) * 0.29 - 1.0);
            let f = sphere_frame([theta, phi]);
            assert!((f[0][2] - theta.cos()).abs() < 1e-12 && (f[0][1].atan2(f[0][0]) - phi).sin().abs() < 1e-9);
            for (a, b) in [(0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2)] {
                let want = if a == b { 1.0 } else { 0.0 };
                assert!((dot(f[a], f[b]) - want).abs() < 1e-12, "θ {theta}, φ {phi}: {f:?}");
            }
        }
    }

    /// Two bumps of load on `grid`, one per phase, centred at `a` and `b`, over a floor of 0.05.
    fn two_phase_bumps(grid: &Grid, a: [f64; 3], b: [f64; 3]) -> Vec<Vec<f64>> {
        [a, b]
            .iter()
            .map(|c| {
                (0..grid.len())
                    .map(|k| {
                        let p = grid.coords(k);
                        let r2: f64 = (0..3).map(|i| (p[i] as f64 - c[i]).powi(2)).sum();
                        0.05 + (-r2 / 10.0).exp()
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn vector_rcb_in_3d_finds_a_plane_near_the_best_of_many() {
        // The first cut's Σ_phase max_side load / side parts against the best of 2,000 planes
        // spread over the half sphere of normals (a Fibonacci lattice), each costed exactly;
        // and the whole mapping no worse than RCB on the summed load.
        let grid = Grid::new_3d(12, 12, 12).unwrap();
        let centres = [
            ([2.0, 3.0, 2.0], [9.0, 8.0, 9.0]),
            ([2.0, 9.0, 5.0], [9.0, 2.0, 6.0]),
            ([6.0, 6.0, 1.0], [6.0, 5.0, 10.0]),
            ([1.0, 6.0, 9.0], [10.0, 6.0, 3.0]),
        ];
        let (mut found, mut coarse) = (Vec::new(), Vec::new());
        for parts in [2u32, 3, 5] {
            for (a, b) in centres {
                let phases = two_phase_bumps(&grid, a, b);
                let total: Vec<f64> = (0..grid.len()).map(|k| phases[0][k] + phases[1][k]).collect();
                let plane = |angles: [f64; 2]| {
                    first_cut_cost(&sides_of_cut(&grid, &total, &sphere_frame(angles), parts), &phases, parts)
                };
                let golden = std::f64::consts::PI * (3.0 - 5f64.sqrt());
                let best = (0..2000)
                    .map(|i| plane([(1.0 - f64::from(i) / 2000.0).acos(), golden * f64::from(i)]))
                    .fold(f64::INFINITY, f64::min);
                coarse.push(cube_normals().into_iter().map(plane).fold(f64::INFINITY, f64::min) / best);
                let owners = kway_vector_rcb(&grid, &phases, parts as usize).unwrap();
                let sides: Vec<u32> = owners.iter().map(|&o| u32::from(o >= parts / 2)).collect();
                found.push(first_cut_cost(&sides, &phases, parts) / best);
                let scalar = kway_rcb(&grid, &total, parts as usize).unwrap();
                let (s, v) = (
                    metrics::vector_max_avg(&scalar, &phases, parts as usize),
                    metrics::vector_max_avg(&owners, &phases, parts as usize),
                );
                assert!(v <= s + 1e-9, "{parts} parts, {a:?} {b:?}: vector {v} > scalar {s}");
            }
        }
        let mean = |r: &[f64]| r.iter().sum::<f64>() / r.len() as f64;
        assert!(found.iter().all(|&r| r <= 1.05) && mean(&found) <= 1.02, "{found:?}");
        // Measured: at most 1.025, 1.010 on average; the best of the 13 normals 1.033.
        assert!(mean(&coarse) >= 1.025, "the cases need a fine search: {coarse:?}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn norcb_parts_are_non_empty_and_as_balanced_as_rcb_bounds_them(
            nx in 1usize..30, ny in 1usize..30, parts in 1usize..40, seed in 0u64..1000,
        ) {
            let grid = Grid::new(nx, ny).unwrap();
            prop_assume!(parts <= grid.len());
            let mut rng = crate::rng::SplitMix64::new(seed);
            let loads: Vec<f64> = (0..grid.len()).map(|_| rng.next_f64()).collect();
            let momentum: Vec<[f64; 3]> =
                (0..grid.len()).map(|_| [rng.next_f64() - 0.3, rng.next_f64() - 0.6, rng.next_f64()]).collect();
            let count: Vec<f64> = (0..grid.len()).map(|_| (rng.next_f64() * 4.0).floor()).collect();
            let owners = kway_norcb(&grid, &loads, &momentum, &count, parts, 1e-3).unwrap();
            prop_assert_eq!(metrics::disconnected_parts(&grid, &owners, parts), 0);
            non_empty_and_within_a_box_per_cut(&owners, &loads, parts)?;
        }

        /// In 3D, parts may fall in pieces (as RCB's), but none is empty and each cut is
        /// within a box of its share.
        #[test]
        fn norcb_and_vector_rcb_parts_in_3d_are_non_empty_and_as_balanced_as_rcb_bounds_them(
            nx in 1usize..12, ny in 1usize..12, nz in 2usize..6, parts in 1usize..24, seed in 0u64..1000,
        ) {
            let grid = Grid::new_3d(nx, ny, nz).unwrap();
            prop_assume!(parts <= grid.len());
            let mut rng = crate::rng::SplitMix64::new(seed);
            let loads: Vec<f64> = (0..grid.len()).map(|_| rng.next_f64()).collect();
            let other: Vec<f64> = (0..grid.len()).map(|_| rng.next_f64() * rng.next_f64()).collect();
            let momentum: Vec<[f64; 3]> = (0..grid.len())
                .map(|_| [rng.next_f64() - 0.3, rng.next_f64() - 0.6, rng.next_f64() - 0.2])
                .collect();
            let count: Vec<f64> = (0..grid.len()).map(|_| (rng.next_f64() * 4.0).floor()).collect();
            let owners = kway_norcb(&grid, &loads, &momentum, &count, parts, 1e-3).unwrap();
            non_empty_and_within_a_box_per_cut(&owners, &loads, parts)?;
            let vector = kway_vector_rcb(&grid, &[loads.clone(), other.clone()], parts).unwrap();
            let total: Vec<f64> = loads.iter().zip(&other).map(|(a, b)| a + b).collect();
            non_empty_and_within_a_box_per_cut(&vector, &total, parts)?;
        }
    }
}
