//! `md`: Lennard-Jones molecular dynamics with cell lists, in 2D (`Md<2>`, the default) or 3D
//! (`Md<3>`, on a grid of more than one layer). Boxes are Verlet boxes of side = the cutoff
//! (2.5 σ), so a particle interacts only with its own and the surrounding boxes: 3×3 in 2D,
//! 3×3×3 in 3D. Velocity Verlet in **one phase per iteration**: box `k`'s task computes the
//! forces on the particles now in `k` from its neighbourhood (in a fixed order), ends the step
//! (`v += ½ dt f`), starts the next (`v += ½ dt f`, `x += dt v`, reflecting walls) and sorts
//! its particles by where they drifted: those still inside `k` *stay*, the others *leave*
//! (each into a neighbouring box, since a step moves a particle less than a box side).
//!
//! Re-binning needs no pass of its own: in the next step the particles in box `n` are its
//! staying ones followed by those that left `n`'s neighbours for `n`, and any task that needs
//! them reads them so, in that order. Every task reads the previous step's lists and writes
//! its own box's next ones, so no barrier is needed between migration and forces, and the
//! balancer's one load per box is the whole iteration's work (separate rebin and force phases
//! scale differently with density, and a mapping balanced on their sum left each phase 5–15 %
//! imbalanced, idle time the barrier between them made real).
//!
//! Scenarios after Boulmier et al.: `uniform` (gas at rest), `contraction` (a disc or ball,
//! off the domain centre, pulled towards its centre), `expansion` (a dense disc or ball flying
//! apart), `gravity` (particles fall along the last axis, y or z, and pile up on the floor).
//! Loads move through the domain.

use pbs::rng::SplitMix64;
use pbs::Grid;
use pbs_scheduler::cache_model::{CacheModel, Footprint};
use pbs_scheduler::report::Recorder;
use pbs_scheduler::{for_each_box_mut, Executor};

use super::distributed::{check_mask, Distributed, Pack, Reader, WHOLE};
use super::{fnv_from, GridApp, FNV_START};

const CUTOFF: f64 = 2.5;
const DT: f64 = 0.004;
/// Squared pair distances are floored at `R_MIN²` in the whole force formula (a soft core):
/// closer, the force is that at `R_MIN` times `r / R_MIN`, so close encounters stay finite.
const R_MIN: f64 = 0.8;
/// Largest displacement per step, a fifth of a box, so particles never skip a box.
const MAX_STEP: f64 = 0.2 * CUTOFF;
/// Boxes a task reads in 3D (3 × 3 × 3); a 2D task uses the middle layer's 9.
const HOOD: usize = 27;
/// The slot of a box in its own neighbourhood ([`slot_of`]).
const MIDDLE: usize = 13;

/// A scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// A gas at rest filling the domain.
    Uniform,
    /// A disc (a ball in 3D) off the domain centre, pulled towards its own centre.
    Contraction,
    /// A dense disc (ball) in the middle with outward velocities.
    Expansion,
    /// Particles in the upper part falling onto the floor: along −y in 2D, −z in 3D.
    Gravity,
}

impl Scenario {
    /// All four.
    pub const ALL: [Scenario; 4] = [Scenario::Uniform, Scenario::Contraction, Scenario::Expansion, Scenario::Gravity];

    /// The lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Uniform => "uniform",
            Scenario::Contraction => "contraction",
            Scenario::Expansion => "expansion",
            Scenario::Gravity => "gravity",
        }
    }

    /// The scenario called `name`.
    pub fn from_name(name: &str) -> Result<Scenario, String> {
        Scenario::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| format!("unknown md scenario {name:?}; expected uniform, contraction, expansion or gravity"))
    }
}

/// A particle in `D` dimensions: 56 bytes in 2D, 80 in 3D.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Particle<const D: usize> {
    id: u32,
    /// The box its position lies in (set where it drifts).
    bin: u32,
    x: [f64; D],
    v: [f64; D],
    f: [f64; D],
}

/// One box's particles between steps. A cache line of its own: threads owning neighbouring
/// boxes of a row (a cut across the rows) reach them at the same time, and list headers
/// sharing a line made each push of one thread evict the other's (md on 2 pinned threads:
/// 1.23–1.26 × the time of whole-row ownership at equal balance, docs/balancers.md).
#[derive(Debug, Clone)]
#[repr(align(64))]
struct Bin<const D: usize> {
    /// Drifted and still inside the box.
    stay: Vec<Particle<D>>,
    /// Drifted into a neighbouring box (`bin` says which), which picks them up next step.
    leave: Vec<Particle<D>>,
    /// Sum of the velocities of `stay` and `leave`: the box's motion, for `norcb`.
    momentum: [f64; D],
}

// By hand: arrays of a generic length have no `Default`.
impl<const D: usize> Default for Bin<D> {
    fn default() -> Self {
        Bin { stay: Vec::new(), leave: Vec::new(), momentum: [0.0; D] }
    }
}

/// A box's particles gathered by md-split's rebin phase, a cache line of its own (as [`Bin`]).
#[derive(Debug, Clone, Default)]
#[repr(align(64))]
struct Gathered<const D: usize>(Vec<Particle<D>>);

/// A task's particles that arrived in each box of its neighbourhood (slot [`slot_of`]),
/// reused so that a step allocates nothing once they have grown.
type Arrived<const D: usize> = [Vec<Particle<D>>; HOOD];

thread_local! {
    /// [`Arrived`] lists for each dimension (a thread-local cannot be generic).
    static ARRIVED: std::cell::RefCell<(Arrived<2>, Arrived<3>)> = std::cell::RefCell::new(Default::default());
}

/// Calls `f` with this thread's [`Arrived`] lists for `D` dimensions.
fn with_arrived<const D: usize, R>(f: impl FnOnce(&mut Arrived<D>) -> R) -> R {
    ARRIVED.with_borrow_mut(|(two, three)| {
        let lists: &mut dyn std::any::Any = if D == 2 { two } else { three };
        f(lists.downcast_mut().expect("md runs in 2 or 3 dimensions"))
    })
}

/// Where a box `d = [di, dj, dl]` away sits in a box's neighbourhood: `9 (dl + 1) + 3 (dj + 1)
/// + di + 1`, if it is in it.
fn slot_of(d: [isize; 3]) -> Option<usize> {
    d.iter().all(|c| c.abs() <= 1).then(|| (9 * (d[2] + 1) + 3 * (d[1] + 1) + d[0] + 1) as usize)
}

/// The squared length of `v`, summed axis by axis from the first (the step's squared distances
/// and speeds depend on that order, bit for bit).
#[inline(always)]
fn squared<const D: usize>(v: &[f64; D]) -> f64 {
    let mut sum = v[0] * v[0];
    for c in &v[1..] {
        sum += c * c;
    }
    sum
}

/// The length of `v`; in 2D `hypot`, on which the 2D scenarios' placements (hence their
/// checksums) depend.
fn length<const D: usize>(v: [f64; D]) -> f64 {
    if D == 2 {
        v[0].hypot(v[1])
    } else {
        squared(&v).sqrt()
    }
}

/// `a − b`, axis by axis.
fn minus<const D: usize>(a: [f64; D], b: [f64; D]) -> [f64; D] {
    std::array::from_fn(|d| a[d] - b[d])
}

/// The MD app in `D` dimensions (2, the default, or 3).
pub struct Md<const D: usize = 2> {
    grid: Grid,
    scenario: Scenario,
    /// The domain's sides, `CUTOFF` × the boxes along each axis.
    extent: [f64; D],
    centre: [f64; D],
    boxes: Vec<Bin<D>>,
    next: Vec<Bin<D>>,
    /// With separate rebin and force phases ([`Md::split_phases`]): each box's particles
    /// after the rebin phase, in the order `members` gives them.
    current: Option<Vec<Gathered<D>>>,
    /// Each box's momentum (z 0 in 2D) and particle count, for executors that use motion
    /// hints (kept between iterations, so that a hint allocates nothing).
    motion: (Vec<[f64; 3]>, Vec<f64>),
    /// The boxes this process computes (`None`: all; see [`Distributed`]).
    local: Option<Vec<bool>>,
    /// md-split across processes: the boxes whose lists the rebin phase gathers, those within
    /// one box of `local` (`None`: all).
    gathered: Option<Vec<bool>>,
}

impl Md<2> {
    /// `nx × ny` Verlet boxes, particles placed from `seed`.
    ///
    /// # Panics
    /// If `nx` or `ny` is 0, or the grid has more boxes than a grid may hold; [`crate::build`]
    /// returns an error for those, and for a grid too large for the machine's memory.
    pub fn new(scenario: Scenario, nx: usize, ny: usize, seed: u64) -> Md<2> {
        Md::holding(scenario, Grid::new(nx, ny).expect("non-empty grid"), seed, None)
    }
}

impl Md<3> {
    /// `nx × ny × nz` Verlet boxes in 3D, particles placed from `seed`.
    ///
    /// # Panics
    /// As [`Md::new`]; [`crate::build_3d`] returns an error instead.
    pub fn new_3d(scenario: Scenario, nx: usize, ny: usize, nz: usize, seed: u64) -> Md<3> {
        Md::holding(scenario, Grid::new_3d(nx, ny, nz).expect("non-empty grid"), seed, None)
    }
}

/// md (`split`: md-split) on `grid`, in 3D where it has more than one layer, holding the boxes
/// `holds` marks ([`Md::holding`]).
pub(crate) fn on_grid(
    scenario: Scenario,
    grid: Grid,
    seed: u64,
    holds: Option<&[bool]>,
    split: bool,
) -> Box<dyn Distributed> {
    fn make<const D: usize>(md: Md<D>, split: bool) -> Box<dyn Distributed> {
        if split {
            Box::new(md.split_phases())
        } else {
            Box::new(md)
        }
    }
    if grid.nz() > 1 {
        make(Md::<3>::holding(scenario, grid, seed, holds), split)
    } else {
        make(Md::<2>::holding(scenario, grid, seed, holds), split)
    }
}

/// Boxes an md grid may have: a box holds at most 27 particles as placed (the densest lattice,
/// 1.1 apart, in a box of side 2.5), and particle ids are 32-bit.
pub const MAX_BOXES: usize = (u32::MAX / 27) as usize;

impl<const D: usize> Md<D> {
    /// [`Md::new`] or [`Md::new_3d`] on `grid`, holding only the boxes `holds` marks (`None`:
    /// all), for a process that computes some of them (`pbs-mpi`): the other boxes hold no
    /// particle, and a box whose neighbourhood two boxes deep is not all held (the initial
    /// step reads it) starts empty too, until its owner sends it. Particle ids are those of
    /// the whole grid.
    ///
    /// # Panics
    /// If `D` is not 2 or 3, a 2D md gets a grid of more than one layer, the grid has more
    /// than [`MAX_BOXES`] boxes, or `holds` has not one flag per box; [`crate::build_3d`] and
    /// [`crate::distributed::build_holding`] return an error for those.
    pub fn holding(scenario: Scenario, grid: Grid, seed: u64, holds: Option<&[bool]>) -> Md<D> {
        const { assert!(D == 2 || D == 3, "md runs in 2 or 3 dimensions") };
        assert!(D == 3 || grid.nz() == 1, "a 2D md on {grid}");
        assert!(grid.len() <= MAX_BOXES, "md on {grid}: more than {MAX_BOXES} boxes");
        assert!(holds.is_none_or(|h| h.len() == grid.len()), "flags for the boxes of {grid}");
        let dims = grid.dims();
        let extent: [f64; D] = std::array::from_fn(|d| dims[d] as f64 * CUTOFF);
        let centre = match scenario {
            Scenario::Contraction => extent.map(|e| 0.3 * e),
            _ => extent.map(|e| 0.5 * e),
        };
        let mut md = Md {
            grid,
            scenario,
            extent,
            centre,
            boxes: vec![Bin::default(); grid.len()],
            next: Vec::new(),
            current: None,
            motion: Default::default(),
            local: None,
            gathered: None,
        };
        let held = |k: usize| holds.is_none_or(|h| h[k]);
        let boxes = &mut md.boxes;
        initial_particles(scenario, (extent, centre), seed, |mut p| {
            p.bin = box_at(&grid, &p.x) as u32;
            if held(p.bin as usize) {
                boxes[p.bin as usize].stay.push(p);
            }
        });
        // The initial forces and the first half-kick and drift: the state every iteration
        // starts from.
        md.next = (0..grid.len())
            .map(|k| {
                let mut bin = Bin::default();
                if neighbourhood(&grid, k, 2).all(held) {
                    md.step_box(k, &mut bin, false);
                }
                bin
            })
            .collect();
        std::mem::swap(&mut md.boxes, &mut md.next);
        md
    }

    /// Bytes per box of md's state, from above: two bins, a gathered list and the motion hints
    /// for every box; for a box held, four lists of eight particles (the densest start,
    /// expansion's lattice near the soft core's spacing, puts about five in a 2D box and twelve
    /// in a 3D one; a list grows by doubling).
    pub(crate) fn state_bytes() -> crate::memory::StateBytes {
        crate::memory::StateBytes {
            fixed: 2 * std::mem::size_of::<Bin<D>>()
                + std::mem::size_of::<Gathered<D>>()
                + 3 * std::mem::size_of::<f64>(),
            held: 4 * if D == 2 { 8 } else { 16 } * std::mem::size_of::<Particle<D>>(),
        }
    }

    /// Every box's work at the start as [`GridApp::box_work`] estimates it after the initial
    /// step, but from the particles as placed, before it, and without holding them: what a
    /// process that holds only its own boxes balances on first.
    ///
    /// # Panics
    /// As [`Md::holding`]; [`crate::distributed::initial_work`] returns an error instead.
    pub fn initial_work(scenario: Scenario, grid: Grid, seed: u64) -> Vec<f64> {
        let md = Md::<D>::holding(scenario, grid, seed, Some(&vec![false; grid.len()]));
        let mut counts = vec![0usize; md.grid.len()];
        initial_particles(scenario, (md.extent, md.centre), seed, |p: Particle<D>| counts[md.box_of(&p.x)] += 1);
        md.pair_work(&counts)
    }

    /// Each box's particles times those of its neighbourhood, from every box's particle count:
    /// the pairs its task weighs.
    fn pair_work(&self, counts: &[usize]) -> Vec<f64> {
        (0..self.grid.len()).map(|k| (counts[k] * self.around(k).map(|n| counts[n]).sum::<usize>()) as f64).collect()
    }

    /// The same physics in two phases per iteration, `md-split`: a *rebin* phase gathers each
    /// box's particles (those that stayed, then those that arrived) into a list of its own,
    /// and a *force* phase steps them, reading the neighbours' lists. The sums run in the same
    /// order, so the state stays bit for bit that of the one-phase md; but the phases scale
    /// differently with density (rebin with the particles, forces with their pairs), so a
    /// mapping balanced on their sum leaves each phase imbalanced: the case of vector loads.
    pub fn split_phases(mut self) -> Md<D> {
        self.current = Some(vec![Gathered::default(); self.grid.len()]);
        self
    }

    /// Number of particles.
    pub fn particles(&self) -> usize {
        self.boxes.iter().map(|b| b.stay.len() + b.leave.len()).sum()
    }

    /// The particles in box `k` now, in the order every task reads them: those that stayed,
    /// then those that arrived from each neighbour in turn.
    fn members(&self, k: usize) -> impl Iterator<Item = &Particle<D>> + '_ {
        self.boxes[k].stay.iter().chain(self.arrivals(k))
    }

    fn arrivals(&self, k: usize) -> impl Iterator<Item = &Particle<D>> + '_ {
        self.around(k).flat_map(move |m| self.boxes[m].leave.iter().filter(move |p| p.bin as usize == k))
    }

    fn box_of(&self, x: &[f64; D]) -> usize {
        box_at(&self.grid, x)
    }

    /// Whether box `k` is another process's (see [`Distributed`]); then its next state here is
    /// empty until that process sends it.
    fn elsewhere(&self, k: usize, out: &mut Bin<D>) -> bool {
        let elsewhere = self.local.as_ref().is_some_and(|l| !l[k]);
        if elsewhere {
            out.stay.clear();
            out.leave.clear();
        }
        elsewhere
    }

    /// The neighbourhood of box `k` (itself included), in a fixed order.
    fn around(&self, k: usize) -> impl Iterator<Item = usize> + '_ {
        neighbourhood(&self.grid, k, 1)
    }

    fn external(&self, p: &Particle<D>) -> [f64; D] {
        match self.scenario {
            Scenario::Contraction => {
                let dx = minus(p.x, self.centre);
                let d = length(dx).max(1e-9);
                dx.map(|c| -0.6 * c / d)
            }
            Scenario::Gravity => std::array::from_fn(|d| if d == D - 1 { -0.6 } else { 0.0 }),
            _ => [0.0; D],
        }
    }

    /// Where box `n` sits in the neighbourhood of box `k` ([`slot_of`]), if it is in it.
    fn slot(&self, k: usize, n: usize) -> Option<usize> {
        let (a, b) = (self.grid.coords(k), self.grid.coords(n));
        slot_of(std::array::from_fn(|d| b[d] as isize - a[d] as isize))
    }

    /// One step of box `k` into `out`: forces on its particles, with `finish` the half-kick
    /// that ends the step, then the half-kick and drift that start the next, each particle
    /// filed as staying or leaving. Reads the neighbourhood's lists, writes only `out`.
    fn step_box(&self, k: usize, out: &mut Bin<D>, finish: bool) {
        with_arrived(|arrived: &mut Arrived<D>| {
            self.gather_arrivals(k, arrived);
            let own = self.boxes[k].stay.iter().chain(&arrived[MIDDLE]);
            self.advance(k, out, finish, own, |n, slot| [&self.boxes[n].stay, &arrived[slot]]);
        });
    }

    /// The arrivals of the neighbourhood of `k`, in one pass over the leavers of the boxes
    /// within two of it in index order: each slot gets its box's arrivals in the order
    /// `members` gives them (by source box, then list order).
    fn gather_arrivals(&self, k: usize, arrived: &mut Arrived<D>) {
        arrived.iter_mut().for_each(Vec::clear);
        each_near(&self.grid, k, 2, |m, _| {
            for p in &self.boxes[m].leave {
                if let Some(slot) = self.slot(k, p.bin as usize) {
                    arrived[slot].push(*p);
                }
            }
        });
    }

    /// The step of [`Md::step_box`] for the particles `own` of box `k`, the particles of
    /// neighbour `n` (at `slot`) being the two lists `lists(n, slot)` in turn.
    #[inline(always)]
    fn advance<'a>(
        &self,
        k: usize,
        out: &mut Bin<D>,
        finish: bool,
        own: impl Iterator<Item = &'a Particle<D>>,
        lists: impl Fn(usize, usize) -> [&'a [Particle<D>]; 2],
    ) {
        out.stay.clear();
        out.leave.clear();
        out.momentum = [0.0; D];
        let mut hood = [(0usize, 0usize); HOOD]; // (box, slot)
        let mut count = 0;
        each_near(&self.grid, k, 1, |n, d| {
            hood[count] = (n, slot_of(d).expect("a neighbour is in the neighbourhood"));
            count += 1;
        });
        let hood = &hood[..count];
        for &p in own {
            let mut p = p;
            let mut f = self.external(&p);
            for &(n, slot) in hood {
                // Two plain slice loops: a chained iterator here is markedly slower.
                let [first, then] = lists(n, slot);
                pair_forces(&p, first, &mut f);
                pair_forces(&p, then, &mut f);
            }
            p.f = f;
            if finish {
                half_kick(&mut p.v, &f);
            }
            kick_drift(&mut p, &self.extent);
            for d in 0..D {
                out.momentum[d] += p.v[d];
            }
            p.bin = self.box_of(&p.x) as u32;
            if p.bin as usize == k {
                out.stay.push(p);
            } else {
                out.leave.push(p);
            }
        }
    }
}

/// The boxes of `grid` within `reach` of box `k` along every axis (diagonals and `k` itself
/// included), the last axis slowest, the first fastest: index order.
fn neighbourhood(grid: &Grid, k: usize, reach: usize) -> impl Iterator<Item = usize> + '_ {
    let [xs, ys, zs] = spans(grid, k, reach);
    zs.flat_map(move |l| {
        let xs = xs.clone();
        ys.clone().flat_map(move |j| xs.clone().map(move |i| grid.index(i, j, l)))
    })
}

/// The ranges of coordinates within `reach` of box `k` along each axis, inside the grid.
fn spans(grid: &Grid, k: usize, reach: usize) -> [std::ops::Range<usize>; 3] {
    let (c, dims) = (grid.coords(k), grid.dims());
    std::array::from_fn(|axis| c[axis].saturating_sub(reach)..(c[axis] + reach + 1).min(dims[axis]))
}

/// Calls `f` with each box of `grid` within `reach` of box `k` along every axis and its offset
/// from `k`, in [`neighbourhood`]'s order. Plain loops: `neighbourhood`'s nested flat maps,
/// walked for every box of a step, slowed the whole step (docs/results.md, "md's neighbourhoods
/// walked in plain loops").
#[inline(always)]
fn each_near(grid: &Grid, k: usize, reach: usize, mut f: impl FnMut(usize, [isize; 3])) {
    let (c, [xs, ys, zs]) = (grid.coords(k), spans(grid, k, reach));
    let off = |at: usize, axis: usize| at as isize - c[axis] as isize;
    for l in zs {
        for j in ys.clone() {
            for i in xs.clone() {
                f(grid.index(i, j, l), [off(i, 0), off(j, 1), off(l, 2)]);
            }
        }
    }
}

/// Adds the Lennard-Jones forces of `qs` on `p` (within the cutoff, soft core) in order.
#[inline(always)]
fn pair_forces<const D: usize>(p: &Particle<D>, qs: &[Particle<D>], f: &mut [f64; D]) {
    for q in qs {
        if q.id == p.id {
            continue;
        }
        let dx = minus(p.x, q.x);
        let r2 = squared(&dx);
        if r2 >= CUTOFF * CUTOFF {
            continue;
        }
        let r2 = r2.max(R_MIN * R_MIN);
        let inv6 = 1.0 / (r2 * r2 * r2);
        let s = 24.0 * inv6 * (2.0 * inv6 - 1.0) / r2;
        for d in 0..D {
            f[d] += s * dx[d];
        }
    }
}

/// `v += ½ dt f`.
fn half_kick<const D: usize>(v: &mut [f64; D], f: &[f64; D]) {
    for (v, f) in v.iter_mut().zip(f) {
        *v += 0.5 * DT * f;
    }
}

fn kick_drift<const D: usize>(p: &mut Particle<D>, extent: &[f64; D]) {
    half_kick(&mut p.v, &p.f);
    // Squared speeds: libm's `hypot` on every particle cost 8 % of a step.
    let speed2 = squared(&p.v);
    if speed2 * DT * DT > MAX_STEP * MAX_STEP {
        let s = MAX_STEP / (speed2.sqrt() * DT);
        p.v.iter_mut().for_each(|c| *c *= s);
    }
    for ((x, v), &limit) in p.x.iter_mut().zip(&mut p.v).zip(extent) {
        *x += DT * *v;
        reflect(x, v, limit);
    }
}

/// A reflecting wall at 0 and at `limit` along one axis.
fn reflect(pos: &mut f64, vel: &mut f64, limit: f64) {
    if *pos < 0.0 {
        *pos = -*pos;
        *vel = -*vel;
    } else if *pos >= limit {
        *pos = 2.0 * limit - *pos - 1e-9;
        *vel = -*vel;
    }
}

/// Calls `f` with every particle `scenario` places from `seed` in a domain of sides `extent`
/// (centred on `centre`), in id order (`bin` 0): jittered lattices, the first axis fastest,
/// each point's jitter drawn axis by axis.
fn initial_particles<const D: usize>(
    scenario: Scenario,
    (extent, centre): ([f64; D], [f64; D]),
    seed: u64,
    mut f: impl FnMut(Particle<D>),
) {
    let mut rng = SplitMix64::new(seed);
    let mut id = 0u32;
    let radius = 0.3 * extent.iter().copied().fold(f64::INFINITY, f64::min);
    // Jittered lattices: no two particles start closer than the soft core.
    let mut lattice = |spacing: f64, keep: &dyn Fn(&[f64; D]) -> bool, velocity: &dyn Fn(&[f64; D]) -> [f64; D]| {
        // Each coordinate advances by adding the spacing, which fixes the points' rounding (and
        // with it every scenario's checksum).
        let mut point = [0.5 * spacing; D];
        loop {
            let x: [f64; D] = std::array::from_fn(|d| point[d] + 0.1 * spacing * (rng.next_f64() - 0.5));
            if keep(&x) {
                f(Particle { id, bin: 0, x, v: velocity(&x), f: [0.0; D] });
                id += 1;
            }
            let mut axis = 0;
            loop {
                point[axis] += spacing;
                if point[axis] < extent[axis] {
                    break;
                }
                if axis + 1 == D {
                    return;
                }
                point[axis] = 0.5 * spacing;
                axis += 1;
            }
        }
    };
    let inside = move |x: &[f64; D]| minus(*x, centre).iter().map(|c| c.powi(2)).sum::<f64>() < radius * radius;
    match scenario {
        Scenario::Uniform => lattice(1.6, &|_| true, &|_| [0.0; D]),
        Scenario::Contraction => lattice(1.2, &inside, &|_| [0.0; D]),
        Scenario::Expansion => {
            lattice(1.1, &|x| length(minus(*x, centre)) < 0.5 * radius, &|x| minus(*x, centre).map(|c| 0.3 * c))
        }
        Scenario::Gravity => lattice(1.3, &|x| x[D - 1] > 0.35 * extent[D - 1], &|_| [0.0; D]),
    }
}

/// The box of a point of the domain of `grid` (boxes of side `CUTOFF`).
fn box_at<const D: usize>(grid: &Grid, x: &[f64; D]) -> usize {
    let dims = grid.dims();
    let at = |d: usize| if d < D { ((x[d] / CUTOFF) as usize).min(dims[d] - 1) } else { 0 };
    grid.index(at(0), at(1), at(2))
}

impl<const D: usize> GridApp for Md<D> {
    fn name(&self) -> &'static str {
        if self.current.is_some() {
            "md-split"
        } else {
            "md"
        }
    }
    fn grid(&self) -> Grid {
        self.grid
    }
    fn footprint(&self) -> Footprint {
        // A box holds ~ the mean number of particles; a neighbour's whole box is read. The
        // footprint is the buffer a task reads, which the box's previous task wrote (every
        // task, md-split's rebin included, writes a box's worth: its particles or their copy):
        // a copy elsewhere is wholly stale after one run.
        let mean = self.particles() as u64 / self.grid.len() as u64 + 1;
        let bytes = mean * std::mem::size_of::<Particle<D>>() as u64;
        Footprint { box_bytes: bytes, halo_bytes: bytes, written_bytes: bytes }
    }
    fn iterate(&mut self, exec: &mut dyn Executor, rec: &mut Recorder, cache: Option<&CacheModel>) {
        let mut next = std::mem::take(&mut self.next);
        if let Some(mut current) = self.current.take() {
            let this = &*self;
            let s = for_each_box_mut(exec, &mut current, |k, list| {
                list.0.clear();
                // Across processes the lists of the 3×3 around a process's boxes, which its
                // force tasks read, are gathered here too (from its halo).
                if this.gathered.as_ref().is_some_and(|g| !g[k]) {
                    return;
                }
                if let Some(c) = cache {
                    c.run_box(k);
                }
                list.0.extend(this.members(k));
            });
            rec.phase(&s);
            if let Some(c) = cache {
                c.end_phase();
            }
            let lists = &current;
            let s = for_each_box_mut(exec, &mut next, |k, out| {
                if this.elsewhere(k, out) {
                    return;
                }
                if let Some(c) = cache {
                    c.run_box(k);
                }
                this.advance(k, out, true, lists[k].0.iter(), |n, _| [&lists[n].0, &[]]);
            });
            rec.phase(&s);
            if let Some(c) = cache {
                c.end_phase();
            }
            self.current = Some(current);
        } else {
            let this = &*self;
            let s = for_each_box_mut(exec, &mut next, |k, out| {
                if this.elsewhere(k, out) {
                    return;
                }
                if let Some(c) = cache {
                    c.run_box(k);
                }
                this.step_box(k, out, true);
            });
            rec.phase(&s);
            if let Some(c) = cache {
                c.end_phase();
            }
        }
        self.next = std::mem::replace(&mut self.boxes, next);
        if exec.wants_motion() {
            let (momentum, particles) = &mut self.motion;
            momentum.clear();
            momentum
                .extend(self.boxes.iter().map(|b| std::array::from_fn(|a| if a < D { b.momentum[a] } else { 0.0 })));
            particles.clear();
            particles.extend(self.boxes.iter().map(|b| (b.stay.len() + b.leave.len()) as f64));
            // Speeds are capped in every step, so the sums are finite.
            exec.hint_motion(momentum, particles).expect("finite momenta, one per box");
        }
        rec.iteration(&exec.end_iteration());
    }
    fn checksum(&self) -> u64 {
        self.checksum_from(0..self.grid.len(), FNV_START)
    }
    fn box_work(&self) -> Vec<f64> {
        let counts: Vec<usize> = (0..self.grid.len()).map(|k| self.members(k).count()).collect();
        self.pair_work(&counts)
    }
}

impl<const D: usize> Particle<D> {
    /// Packed: id, box, then position, velocity and force; 56 bytes in 2D, 80 in 3D.
    const BYTES: usize = 4 + 4 + 3 * D * 8;
}

/// A box's particles: how many stayed and left, its momentum, then the particles.
impl<const D: usize> Pack for Bin<D> {
    fn pack(&self, out: &mut Vec<u8>) {
        pack_lists(&self.stay, &self.leave, self.momentum, out);
    }
    fn unpack(bytes: &[u8]) -> Result<Self, String> {
        let mut r = Reader::new(bytes);
        let stay = r.u64()?;
        let leave = r.len(Particle::<D>::BYTES)?;
        let mut momentum = [0.0; D];
        for m in &mut momentum {
            *m = r.f64()?;
        }
        let stay = usize::try_from(stay).map_err(|_| format!("{stay} staying particles"))?;
        let mut particle = || -> Result<Particle<D>, String> {
            let (id, bin) = (r.u32()?, r.u32()?);
            let mut p = Particle { id, bin, x: [0.0; D], v: [0.0; D], f: [0.0; D] };
            for c in p.x.iter_mut().chain(&mut p.v).chain(&mut p.f) {
                *c = r.f64()?;
            }
            Ok(p)
        };
        // Counts checked against the bytes as they are read: a corrupt count fails here.
        let stay = (0..stay).map(|_| particle()).collect::<Result<Vec<_>, _>>()?;
        let leave = (0..leave).map(|_| particle()).collect::<Result<Vec<_>, _>>()?;
        r.end()?;
        Ok(Bin { stay, leave, momentum })
    }
}

/// A [`Bin`] of these lists, packed as [`Bin::pack`] packs one.
fn pack_lists<const D: usize>(stay: &[Particle<D>], leave: &[Particle<D>], momentum: [f64; D], out: &mut Vec<u8>) {
    out.extend_from_slice(&(stay.len() as u64).to_le_bytes());
    out.extend_from_slice(&(leave.len() as u64).to_le_bytes());
    momentum.iter().for_each(|m| out.extend_from_slice(&m.to_le_bytes()));
    for p in stay.iter().chain(leave) {
        out.extend_from_slice(&p.id.to_le_bytes());
        out.extend_from_slice(&p.bin.to_le_bytes());
        p.x.iter().chain(&p.v).chain(&p.f).for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    }
}

/// The part code of a box's leave list alone (see [`Distributed::reader_part`]).
pub(crate) const LEAVERS: u64 = 1;

impl<const D: usize> Md<D> {
    /// Box `k`'s data from another process: its particles must be filed in boxes of the grid.
    fn receive(&mut self, k: usize, bin: Bin<D>) -> Result<(), String> {
        let n = self.grid.len();
        if let Some(p) = bin.stay.iter().chain(&bin.leave).find(|p| p.bin as usize >= n) {
            return Err(format!("particle {} of box {k} is filed in box {} of {n}", p.id, p.bin));
        }
        self.boxes[k] = bin;
        Ok(())
    }
}

impl<const D: usize> Distributed for Md<D> {
    fn halo(&self) -> usize {
        // A task reads its neighbourhood's particles, and those that arrive there come
        // from one box further.
        2
    }
    fn compute_only(&mut self, local: Option<Vec<bool>>) -> Result<(), String> {
        check_mask(&local, self.grid.len())?;
        if let Some(l) = &local {
            // The boxes its tasks read (within the halo of its own) stay; the others are
            // dropped at once: a process's executor may no longer run their tasks, which
            // empty them (`pbs-mpi`'s runs only the rank's window).
            let near = crate::distributed::within(&self.grid, self.halo(), |k| l[k]);
            for k in (0..self.grid.len()).filter(|&k| !near[k]) {
                self.release(k);
            }
        }
        self.gathered = match (&local, &self.current) {
            (Some(l), Some(_)) => Some((0..self.grid.len()).map(|k| self.around(k).any(|n| l[n])).collect()),
            _ => None,
        };
        self.local = local;
        Ok(())
    }
    fn pack_box(&self, k: usize, out: &mut Vec<u8>) {
        self.boxes[k].pack(out);
    }
    fn packed_len(&self, k: usize) -> usize {
        let b = &self.boxes[k];
        // The two counts and the momentum, then the particles (`Bin::pack`).
        (2 + D) * 8 + (b.stay.len() + b.leave.len()) * Particle::<D>::BYTES
    }
    fn unpack_box(&mut self, k: usize, bytes: &[u8]) -> Result<(), String> {
        self.receive(k, Bin::unpack(bytes)?)
    }
    fn checksum_from(&self, boxes: std::ops::Range<usize>, hash: u64) -> u64 {
        fnv_from(
            hash,
            boxes
                .flat_map(|k| self.members(k))
                .flat_map(|p| std::iter::once(u64::from(p.id)).chain(p.x.iter().chain(&p.v).map(|c| c.to_bits()))),
        )
    }
    fn release(&mut self, k: usize) {
        // Both buffers: the other one becomes the state at the next iteration's end.
        self.boxes[k] = Bin::default();
        if let Some(b) = self.next.get_mut(k) {
            *b = Bin::default();
        }
        if let Some(list) = self.current.as_mut().and_then(|c| c.get_mut(k)) {
            list.0 = Vec::new();
        }
    }
    fn reader_part(&self, owners: &[u32], k: usize, process: u32) -> Option<u64> {
        // A task reads the particles of its neighbourhood and the leavers of the boxes within
        // two (those that arrive in the neighbourhood): a process whose nearest box is two away
        // reads only the leave list.
        let next_to = self.around(k).any(|n| owners[n] == process);
        Some(if next_to { WHOLE } else { LEAVERS })
    }
    fn pack_part(&self, k: usize, part: u64, out: &mut Vec<u8>) -> Result<(), String> {
        let b = &self.boxes[k];
        match part {
            WHOLE => pack_lists(&b.stay, &b.leave, b.momentum, out),
            LEAVERS => pack_lists(&[], &b.leave, b.momentum, out),
            other => return Err(format!("part {other:#x} of box {k}: md sends whole boxes or leave lists")),
        }
        Ok(())
    }
    fn unpack_part(&mut self, k: usize, part: u64, bytes: &[u8]) -> Result<(), String> {
        let bin = Bin::unpack(bytes)?;
        match part {
            WHOLE => {}
            LEAVERS if bin.stay.is_empty() => {}
            LEAVERS => return Err(format!("the leave list of box {k} came with {} staying particles", bin.stay.len())),
            other => return Err(format!("part {other:#x} of box {k}: md sends whole boxes or leave lists")),
        }
        // A box two away from every box here: nothing here reads its staying particles.
        self.receive(k, bin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pbs_scheduler::executors::{Pbs, PbsOptions};

    /// The same physics without boxes: all pairs, one list, velocity Verlet step by step.
    fn reference_step<const D: usize>(md: &Md<D>, ps: &mut [Particle<D>], finish: bool) {
        let old = ps.to_vec();
        for p in ps.iter_mut() {
            let mut f = md.external(p);
            pair_forces(p, &old, &mut f);
            p.f = f;
            if finish {
                half_kick(&mut p.v, &f);
            }
            kick_drift(p, &md.extent);
        }
    }

    fn by_id<const D: usize>(md: &Md<D>) -> Vec<Particle<D>> {
        let mut ps: Vec<Particle<D>> = (0..md.grid.len()).flat_map(|k| md.members(k).copied()).collect();
        ps.sort_by_key(|p| p.id);
        ps
    }

    /// A particle at `x` with velocity `v` and force `f`.
    fn particle<const D: usize>(id: u32, x: [f64; D], v: [f64; D], f: [f64; D]) -> Particle<D> {
        Particle { id, bin: 0, x, v, f }
    }

    /// The pair force is minus the gradient of the Lennard-Jones potential `4 (r⁻¹² − r⁻⁶)`
    /// (a central difference of the potential, not the code's formula) from `R_MIN` to the
    /// cutoff, nothing from the cutoff on or from the particle itself; below `R_MIN` the squared
    /// distance is floored in the whole formula, so the force is that at `R_MIN` times
    /// `r / R_MIN`. Forces of several particles add; the pair's forces are opposite. In 3D as
    /// in 2D, along the separation.
    #[test]
    fn the_pair_force_is_the_lennard_jones_gradient_within_the_cutoff() {
        fn check<const D: usize>(direction: impl Fn(f64) -> [f64; D]) {
            let potential = |r: f64| 4.0 * (r.powi(-12) - r.powi(-6));
            let slope = |r: f64| (potential(r + 1e-6) - potential(r - 1e-6)) / 2e-6;
            let p = particle(0, [5.0; D], [0.0; D], [0.0; D]);
            let force = |qs: &[Particle<D>]| {
                let mut f = [0.0; D];
                pair_forces(&p, qs, &mut f);
                f
            };
            let mut all = Vec::new();
            let mut sum = [0.0; D];
            for (n, r) in [0.3, 0.79, 0.8, 0.9, 1.0, 1.12, 1.5, 2.0, 2.49, 2.5, 2.7].into_iter().enumerate() {
                // At the cutoff exactly, along a row (no rounding in the distance).
                let u = if r == CUTOFF {
                    std::array::from_fn(|d| if d == 0 { 1.0 } else { 0.0 })
                } else {
                    direction(n as f64)
                };
                let q = particle(n as u32 + 1, std::array::from_fn(|d| 5.0 + r * u[d]), [0.0; D], [0.0; D]);
                let sep = minus(p.x, q.x);
                let r = length(sep);
                let magnitude = match r {
                    r if r >= CUTOFF => 0.0,
                    r if r < R_MIN => -slope(R_MIN) * r / R_MIN,
                    r => -slope(r),
                };
                let f = force(std::slice::from_ref(&q));
                let tolerance = 1e-6 * (1.0 + magnitude.abs());
                assert!((0..D).all(|d| (f[d] - magnitude * sep[d] / r).abs() <= tolerance), "{D}D, r = {r}");
                let mut back = [0.0; D];
                pair_forces(&q, std::slice::from_ref(&p), &mut back);
                assert_eq!(back, f.map(|c| -c), "{D}D, r = {r}");
                (0..D).for_each(|d| sum[d] += f[d]);
                all.push(q);
            }
            // Itself, wherever its copy stands: no force.
            all.push(particle(0, std::array::from_fn(|d| if d == 0 { 5.5 } else { 5.0 }), [0.0; D], [0.0; D]));
            let f = force(&all);
            assert!((0..D).all(|d| (f[d] - sum[d]).abs() <= 1e-9 * sum[d].abs()), "{D}D");
        }
        check::<2>(|n| {
            let angle = 0.7 + n;
            [angle.cos(), angle.sin()]
        });
        check::<3>(|n| {
            let (theta, phi) = (0.3 + 0.5 * n, 0.7 + n);
            [theta.sin() * phi.cos(), theta.sin() * phi.sin(), theta.cos()]
        });
    }

    /// Half a kick, a drift of `dt` at a speed capped at a fifth of a box per step, and walls
    /// that reflect the position and the velocity's component across them (the far wall's
    /// position itself to a hair inside, so that it stays in the last box); in 3D along z too.
    #[test]
    fn a_step_kicks_drifts_caps_the_speed_and_reflects_at_the_walls() {
        let (w, h) = (20.0, 10.0);
        let mut p = particle(0, [5.0, 5.0], [1.0, -2.0], [3.0, 4.0]);
        kick_drift(&mut p, &[w, h]);
        let (vx, vy) = (1.0 + 0.5 * DT * 3.0, -2.0 + 0.5 * DT * 4.0);
        assert_eq!((p.v, p.x), ([vx, vy], [5.0 + DT * vx, 5.0 + DT * vy]));
        // Fast: moves a fifth of a box along its velocity.
        let mut p = particle(0, [5.0, 5.0], [3000.0, 4000.0], [0.0, 0.0]);
        kick_drift(&mut p, &[w, h]);
        let moved = (p.x[0] - 5.0).hypot(p.x[1] - 5.0);
        assert!((moved - MAX_STEP).abs() <= 1e-12 && ((p.x[1] - 5.0) / (p.x[0] - 5.0) - 4.0 / 3.0).abs() <= 1e-12);
        let mut p = particle(0, [5.0, 5.0, 5.0], [2000.0, 3000.0, 6000.0], [0.0; 3]);
        kick_drift(&mut p, &[w, h, h]);
        let moved = length(minus(p.x, [5.0; 3]));
        assert!((moved - MAX_STEP).abs() <= 1e-12 && ((p.x[2] - 5.0) / (p.x[0] - 5.0) - 3.0).abs() <= 1e-12);
        // Across the wall at 0 and across the one at the height.
        let mut p = particle(0, [0.001, 9.999], [-10.0, 10.0], [0.0, 0.0]);
        kick_drift(&mut p, &[w, h]);
        let (x, y) = (0.001 - DT * 10.0, 9.999 + DT * 10.0);
        assert_eq!((p.x[0], p.v[0]), (-x, 10.0));
        assert!((p.x[1] - (2.0 * h - y)).abs() <= 1e-8 && p.x[1] < h && p.v[1] == -10.0);
        // And across the walls of the third axis, the others untouched.
        let mut p = particle(0, [5.0, 5.0, 0.001], [0.0, 0.0, -10.0], [0.0; 3]);
        kick_drift(&mut p, &[w, h, h]);
        assert_eq!((p.x, p.v), ([5.0, 5.0, -x], [0.0, 0.0, 10.0]));
        let mut p = particle(0, [5.0, 5.0, 9.999], [0.0, 0.0, 10.0], [0.0; 3]);
        kick_drift(&mut p, &[w, h, h]);
        assert!((p.x[2] - (2.0 * h - y)).abs() <= 1e-8 && p.x[2] < h && p.v == [0.0, 0.0, -10.0]);
        // On a wall: 0 is inside the domain; the far wall is not, and a hair short of it is.
        let (mut x, mut v) = (0.0, -1.0);
        reflect(&mut x, &mut v, w);
        assert_eq!((x, v), (0.0, -1.0));
        let (mut x, mut v) = (w, 1.0);
        reflect(&mut x, &mut v, w);
        assert_eq!((x, v), (w - 1e-9, -1.0));
    }

    /// The scenarios' placements: jittered square (cubic) lattices (uniform 1.6 apart over the
    /// whole domain; contraction 1.2 apart in a disc or ball of radius 0.3 × the shortest side
    /// around 0.3 × the sides; expansion 1.1 apart within half that radius of the middle, flying
    /// out at 0.3 × the distance to it; gravity 1.3 apart above 0.35 × the height, y in 2D and z
    /// in 3D), each particle
    /// within a twentieth of the spacing of its own lattice point along each axis, ids in order;
    /// the same seed the same particles, another seed other jitter.
    #[test]
    fn the_scenarios_place_jittered_lattices_in_their_regions() {
        fn check<const D: usize>(grid: Grid) {
            let dims = grid.dims();
            let extent: [f64; D] = std::array::from_fn(|d| dims[d] as f64 * CUTOFF);
            for scenario in Scenario::ALL {
                let md = Md::<D>::holding(scenario, grid, 3, None);
                let centre = extent.map(|e| if scenario == Scenario::Contraction { 0.3 * e } else { 0.5 * e });
                assert_eq!(md.centre, centre);
                let radius = 0.3 * extent.iter().copied().fold(f64::INFINITY, f64::min);
                let from_centre = |x: &[f64; D]| length(minus(*x, centre));
                type Region<'a, const D: usize> = &'a dyn Fn(&[f64; D]) -> bool;
                let (spacing, inside): (f64, Region<D>) = match scenario {
                    Scenario::Uniform => (1.6, &|_| true),
                    Scenario::Contraction => (1.2, &|x| from_centre(x) < radius),
                    Scenario::Expansion => (1.1, &|x| from_centre(x) < 0.5 * radius),
                    Scenario::Gravity => (1.3, &|x| x[D - 1] > 0.35 * extent[D - 1]),
                };
                let place = |seed| {
                    let mut placed = Vec::new();
                    initial_particles(scenario, (extent, centre), seed, |p| placed.push(p));
                    placed
                };
                let placed = place(3);
                let mut points = std::collections::BTreeSet::new();
                let in_domain = |x: &[f64; D]| (0..D).all(|d| (0.0..extent[d]).contains(&x[d]));
                for (n, p) in placed.iter().enumerate() {
                    assert_eq!((p.id as usize, p.bin, p.f), (n, 0, [0.0; D]), "{D}D {scenario:?}");
                    assert!(inside(&p.x) && in_domain(&p.x), "{D}D {scenario:?}");
                    let point = p.x.map(|c| (c / spacing - 0.5).round());
                    assert!((0..D).all(|d| (p.x[d] - (point[d] + 0.5) * spacing).abs() <= 0.05 * spacing));
                    assert!(points.insert(point.map(|c| c as i64)), "{D}D {scenario:?}: two particles on one point");
                    let v =
                        if scenario == Scenario::Expansion { minus(p.x, centre).map(|c| 0.3 * c) } else { [0.0; D] };
                    assert_eq!(p.v, v, "{D}D {scenario:?}");
                }
                // Every lattice point whose jitter cannot take it out of the region (all corners
                // of its jitter box inside: the regions are convex) holds a particle.
                let jitter = 0.05 * spacing;
                let counts: [i64; D] = std::array::from_fn(|d| (extent[d] / spacing) as i64);
                let total: i64 = counts.iter().product();
                for n in 0..total {
                    let mut rest = n;
                    let point: [i64; D] = std::array::from_fn(|d| {
                        let c = rest % counts[d];
                        rest /= counts[d];
                        c
                    });
                    let centre_of = point.map(|c| (c as f64 + 0.5) * spacing);
                    let surely = (0..1 << D).all(|corner: usize| {
                        let x: [f64; D] =
                            std::array::from_fn(|d| centre_of[d] + if corner >> d & 1 == 1 { jitter } else { -jitter });
                        inside(&x) && in_domain(&x)
                    });
                    assert!(!surely || points.contains(&point), "{D}D {scenario:?}: point {point:?} empty");
                }
                assert!(placed.len() > 20, "{D}D {scenario:?}: {} particles", placed.len());
                if scenario == Scenario::Uniform {
                    // The jitter: the seed's first draws, one per axis in order, on the first point.
                    let mut rng = SplitMix64::new(3);
                    let first: [f64; D] =
                        std::array::from_fn(|_| 0.5 * spacing + 0.1 * spacing * (rng.next_f64() - 0.5));
                    assert_eq!(placed[0].x, first);
                }
                assert_eq!(md.particles(), placed.len());
                let (again, other) = (place(3), place(4));
                assert!(again.iter().zip(&placed).all(|(a, b)| a.x == b.x));
                assert!(other.iter().zip(&placed).all(|(a, b)| a.x != b.x));
            }
        }
        check::<2>(Grid::new(12, 8).unwrap());
        check::<3>(Grid::new_3d(9, 8, 8).unwrap());
    }

    /// The fields of the scenarios: a pull of 0.6 towards the disc's (ball's) centre in
    /// contraction, 0.6 downwards (−y in 2D, −z in 3D) in gravity, none in the others.
    #[test]
    fn the_external_fields_are_those_of_the_scenarios() {
        fn check<const D: usize>(grid: Grid, at: [f64; D]) {
            let p = particle(0, at, [0.0; D], [0.0; D]);
            for scenario in Scenario::ALL {
                let md = Md::<D>::holding(scenario, grid, 1, None);
                let f = md.external(&p);
                match scenario {
                    Scenario::Contraction => {
                        let towards = minus(md.centre, p.x);
                        assert_eq!(md.centre, md.extent.map(|e| 0.3 * e));
                        assert!((length(f) - 0.6).abs() <= 1e-12, "{D}D");
                        let scale = length(towards) / 0.6;
                        assert!((0..D).all(|d| (f[d] * scale - towards[d]).abs() <= 1e-12), "{D}D: {f:?}");
                    }
                    Scenario::Gravity => {
                        assert_eq!(f, std::array::from_fn(|d| if d == D - 1 { -0.6 } else { 0.0 }), "{D}D")
                    }
                    _ => assert_eq!(f, [0.0; D], "{D}D {scenario:?}"),
                }
            }
        }
        check::<2>(Grid::new(6, 4).unwrap(), [9.0, 4.0]);
        check::<3>(Grid::new_3d(6, 4, 5).unwrap(), [9.0, 4.0, 1.0]);
    }

    /// The estimate a process balances on first, without holding any particle, is
    /// `box_work` of the particles as placed (the whole state before its initial step); a 3D
    /// box weighs the particles of its 27 neighbours.
    #[test]
    fn the_initial_work_counts_the_particles_as_placed() {
        fn check<const D: usize>(grid: Grid) {
            for scenario in [Scenario::Gravity, Scenario::Contraction] {
                let mut md = Md::<D>::holding(scenario, grid, 2, None);
                std::mem::swap(&mut md.boxes, &mut md.next);
                let placed = md.box_work();
                assert!(placed.iter().any(|&w| w > 0.0) && placed.contains(&0.0));
                assert_eq!(Md::<D>::initial_work(scenario, grid, 2), placed);
            }
        }
        check::<2>(Grid::new(9, 7).unwrap());
        check::<3>(Grid::new_3d(6, 7, 5).unwrap());
        // The middle box of a 3D grid with one particle in each box: 27 pairs.
        let md = Md::new_3d(Scenario::Uniform, 3, 3, 3, 1);
        let work = md.pair_work(&[1; 27]);
        assert_eq!((work[13], work[0], work[4]), (27.0, 8.0, 18.0), "middle, corner, middle of a face");
    }

    /// The loops of the step's hot path visit the boxes `neighbourhood` gives, in its order,
    /// each with its offset, at the grid's edges and corners too, in 2D and 3D.
    #[test]
    fn each_near_walks_the_neighbourhood_in_order_with_offsets() {
        for grid in [Grid::new(5, 4).unwrap(), Grid::new_3d(4, 5, 6).unwrap(), Grid::new(1, 1).unwrap()] {
            for k in 0..grid.len() {
                for reach in [1, 2] {
                    let mut seen = Vec::new();
                    each_near(&grid, k, reach, |n, d| seen.push((n, d)));
                    let expected: Vec<_> = neighbourhood(&grid, k, reach)
                        .map(|n| {
                            let (a, b) = (grid.coords(k), grid.coords(n));
                            (n, std::array::from_fn(|x| b[x] as isize - a[x] as isize))
                        })
                        .collect();
                    assert_eq!(seen, expected, "box {k}, reach {reach}");
                    // And apart from `spans`, which both share: every box within reach, in index order.
                    let c = grid.coords(k);
                    let near = |n: &usize| grid.coords(*n).iter().zip(c).all(|(&b, a)| b.abs_diff(a) <= reach);
                    let all: Vec<usize> = (0..grid.len()).filter(near).collect();
                    assert_eq!(seen.iter().map(|&(n, _)| n).collect::<Vec<_>>(), all, "box {k}, reach {reach}");
                    assert!(seen.iter().all(|(_, d)| d.iter().all(|c| c.unsigned_abs() <= reach)));
                }
            }
        }
    }

    /// Why md's halo is two boxes deep: a particle that just left box 2 for box 1 (in box 2's
    /// leave list) pulls on a particle of box 0, so box 0's task reads box 2.
    #[test]
    fn a_box_two_away_acts_through_its_leavers() {
        let mut md = Md::new(Scenario::Uniform, 3, 1, 1);
        let at = |id, bin, x| Particle { id, bin, x: [x, 1.0], v: [0.0; 2], f: [0.0; 2] };
        md.boxes = vec![Bin::default(); 3];
        md.boxes[0].stay.push(at(0, 0, 2.45));
        md.boxes[2].leave.push(at(1, 1, 4.6));
        let (mut with, mut without) = (Bin::default(), Bin::default());
        md.step_box(0, &mut with, true);
        md.boxes[2].leave.clear();
        md.step_box(0, &mut without, true);
        assert_ne!(with.stay[0].f[0], without.stay[0].f[0]);
        assert_eq!(md.halo(), 2);
    }

    /// So a process whose nearest box is two away from a box gets its leave list, and that is
    /// all it reads of it: box 0's step in a process holding box 2's leave list alone is its
    /// step where all boxes are whole.
    #[test]
    fn a_process_two_boxes_away_gets_the_leave_list_it_reads() {
        let at = |id, bin, x| Particle { id, bin, x: [x, 1.0], v: [0.0; 2], f: [0.0; 2] };
        let mut whole = Md::new(Scenario::Uniform, 3, 1, 1);
        whole.boxes = vec![Bin::default(); 3];
        whole.boxes[0].stay.push(at(0, 0, 2.45));
        whole.boxes[2].stay.push(at(2, 2, 6.5));
        whole.boxes[2].leave.push(at(1, 1, 4.6));
        let owners = [0, 1, 1];
        let part = crate::distributed::part_for(&whole, &owners, 2, 0);
        assert_eq!(part, Some(LEAVERS));
        let mut bytes = Vec::new();
        whole.pack_part(2, LEAVERS, &mut bytes).unwrap();
        assert_eq!(bytes.len(), whole.packed_len(2) - Particle::<2>::BYTES, "the staying particle stays");
        let mut here = Md::new(Scenario::Uniform, 3, 1, 1);
        here.boxes = vec![Bin::default(); 3];
        here.boxes[0] = whole.boxes[0].clone();
        here.unpack_part(2, LEAVERS, &bytes).unwrap();
        let (mut a, mut b) = (Bin::default(), Bin::default());
        whole.step_box(0, &mut a, true);
        here.step_box(0, &mut b, true);
        assert_eq!(a.stay[0].f[0].to_bits(), b.stay[0].f[0].to_bits());
        assert_ne!(a.stay[0].f[0], 0.0, "the leaver pulls");
        let mut stay = Vec::new();
        whole.pack_box(0, &mut stay);
        assert!(here.unpack_part(2, LEAVERS, &stay).unwrap_err().contains("staying particles"));
    }

    /// The checksum hashes every particle's id, position and velocity along every axis: a
    /// change to any one of them, in 2D or 3D, changes it.
    #[test]
    fn the_checksum_sees_every_coordinate() {
        fn check<const D: usize>(grid: Grid) {
            let md = Md::<D>::holding(Scenario::Uniform, grid, 1, None);
            let k = (0..md.grid.len()).find(|&k| !md.boxes[k].stay.is_empty()).unwrap();
            let before = md.checksum();
            let nudged = |change: &dyn Fn(&mut Particle<D>)| {
                let mut md = Md::<D>::holding(Scenario::Uniform, grid, 1, None);
                change(&mut md.boxes[k].stay[0]);
                md.checksum()
            };
            assert_ne!(nudged(&|p| p.id += 1), before, "{D}D id");
            for d in 0..D {
                assert_ne!(nudged(&|p| p.x[d] += 1e-12), before, "{D}D position {d}");
                assert_ne!(nudged(&|p| p.v[d] += 1e-12), before, "{D}D velocity {d}");
            }
            assert_eq!(nudged(&|p| p.f[0] += 1.0), before, "forces are recomputed, not hashed");
        }
        check::<2>(Grid::new(4, 3).unwrap());
        check::<3>(Grid::new_3d(3, 3, 3).unwrap());
    }

    /// A 3D box packs to its counts, its three momenta and 80 bytes a particle, and unpacks to
    /// itself; bytes cut short or in excess are refused.
    #[test]
    fn a_3d_box_packs_and_unpacks_to_itself() {
        let mut md = Md::new_3d(Scenario::Expansion, 5, 5, 5, 2);
        let mut exec = Pbs::new(md.grid, 2, PbsOptions::default()).unwrap();
        let mut rec = Recorder::new("pbs", 2);
        let both =
            |md: &Md<3>| (0..md.grid.len()).find(|&k| !md.boxes[k].leave.is_empty() && !md.boxes[k].stay.is_empty());
        while both(&md).is_none() {
            assert!(rec.iteration_ms().len() < 500, "no box with staying and leaving particles");
            md.iterate(&mut exec, &mut rec, None);
        }
        let k = both(&md).unwrap();
        let b = &md.boxes[k];
        let mut bytes = Vec::new();
        md.pack_box(k, &mut bytes);
        assert_eq!(Particle::<3>::BYTES, 80);
        assert_eq!(bytes.len(), md.packed_len(k));
        assert_eq!(bytes.len(), 5 * 8 + (b.stay.len() + b.leave.len()) * 80);
        let back = Bin::<3>::unpack(&bytes).unwrap();
        assert_eq!((&back.stay, &back.leave, back.momentum), (&b.stay, &b.leave, b.momentum));
        assert!(Bin::<3>::unpack(&bytes[..bytes.len() - 1]).is_err());
        bytes.push(0);
        assert!(Bin::<3>::unpack(&bytes).is_err());
    }

    /// After a step every box holds the momentum of the particles its task stepped (those it
    /// keeps and those it sends on: unit masses), the motion hint `norcb` cuts along; a point at
    /// the domain's far edges files into the last row, column or layer; a box another process
    /// computes is left empty here.
    #[test]
    fn boxes_carry_their_momentum_edges_file_inward_and_others_boxes_stay_empty() {
        fn check<const D: usize>(grid: Grid) {
            let mut md = Md::<D>::holding(Scenario::Gravity, grid, 2, None);
            let mut exec = Pbs::new(md.grid, 2, PbsOptions::default()).unwrap();
            let mut rec = Recorder::new("pbs", 2);
            for _ in 0..3 {
                md.iterate(&mut exec, &mut rec, None);
            }
            let mut moving = 0;
            for b in &md.boxes {
                let sum = b.stay.iter().chain(&b.leave).fold([0.0; D], |mut m, p| {
                    (0..D).for_each(|d| m[d] += p.v[d]);
                    m
                });
                assert!(
                    (0..D).all(|a| (b.momentum[a] - sum[a]).abs() <= 1e-12 * (1.0 + sum[a].abs())),
                    "{:?} against {sum:?}",
                    b.momentum
                );
                moving += usize::from(sum[0] != 0.0 && sum[1] != 0.0);
            }
            assert!(moving > 4, "{D}D: {moving} boxes in motion");
            let [nx, ny, nz] = md.grid.dims();
            let last = |d: usize| [nx, ny, nz][d] - 1;
            let corner = |far: [bool; 3]| {
                md.grid.index(far[0] as usize * last(0), far[1] as usize * last(1), far[2] as usize * last(2))
            };
            let point =
                |far: [bool; 3]| -> [f64; D] { std::array::from_fn(|d| if far[d] { md.extent[d] } else { 0.0 }) };
            for far in [[true, true, true], [true, false, false], [false, true, true], [false, false, true]] {
                let far = std::array::from_fn(|d| far[d] && d < D);
                assert_eq!(md.box_of(&point(far)), corner(far), "{D}D: {far:?}");
            }
            // Half the grid is another process's: its boxes are empty after a step here.
            let mut md = Md::<D>::holding(Scenario::Uniform, grid, 2, None);
            let local: Vec<bool> = (0..md.grid.len()).map(|k| md.grid.coords(k)[0] < nx / 2).collect();
            md.compute_only(Some(local.clone())).unwrap();
            md.iterate(&mut exec, &mut rec, None);
            for (k, b) in md.boxes.iter().enumerate() {
                let held = b.stay.len() + b.leave.len();
                assert_eq!(held == 0, !local[k], "{D}D box {k}: {held} particles");
            }
        }
        check::<2>(Grid::new(8, 6).unwrap());
        check::<3>(Grid::new_3d(6, 5, 4).unwrap());
    }

    /// Boxes, migration through the leave lists, and one phase per step against the plain
    /// all-pairs integration: every particle where it should be (to rounding, since the sums
    /// run in another order), each in the box its position lies in, none lost or doubled; in
    /// 2D and in 3D.
    #[test]
    fn the_boxed_step_follows_the_all_pairs_integration() {
        fn check<const D: usize>(grid: Grid, steps: usize) {
            for scenario in Scenario::ALL {
                let mut md = Md::<D>::holding(scenario, grid, 4, None);
                // The constructor's state is the reference's first half-step from the placement.
                let mut reference = by_id(&md);
                let mut exec = Pbs::new(md.grid, 2, PbsOptions::default()).unwrap();
                let mut rec = Recorder::new("pbs", 2);
                let mut migrated = 0;
                for _ in 0..steps {
                    let before: Vec<u32> = by_id(&md).iter().map(|p| p.bin).collect();
                    md.iterate(&mut exec, &mut rec, None);
                    reference_step(&md, &mut reference, true);
                    let now = by_id(&md);
                    assert_eq!(now.len(), reference.len(), "{D}D {scenario:?}: particles lost or doubled");
                    migrated += now.iter().zip(&before).filter(|(p, &b)| p.bin != b).count();
                    for (p, r) in now.iter().zip(&reference) {
                        assert_eq!(p.id, r.id);
                        let err =
                            (0..D).map(|d| (p.x[d] - r.x[d]).abs().max((p.v[d] - r.v[d]).abs())).fold(0.0, f64::max);
                        assert!(err < 1e-9, "{D}D {scenario:?}: particle {} off by {err}", p.id);
                        assert_eq!(
                            p.bin as usize,
                            md.box_of(&p.x),
                            "{D}D {scenario:?}: particle {} filed wrongly",
                            p.id
                        );
                    }
                }
                eprintln!("{D}D {scenario:?}: {migrated} migrations, {} particles", reference.len());
                assert!(migrated > 0, "{D}D {scenario:?}: no particle changed box, the migration went untested");
            }
        }
        check::<2>(Grid::new(10, 8).unwrap(), 300);
        check::<3>(Grid::new_3d(5, 4, 3).unwrap(), 300);
    }
}
