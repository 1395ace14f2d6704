//! `md`: 2D Lennard-Jones molecular dynamics with cell lists. Boxes are Verlet boxes of side
//! = the cutoff (2.5 σ), so a particle interacts only with its own and the 8 surrounding boxes.
//! Velocity Verlet in **one phase per iteration**: box `k`'s task computes the forces on the
//! particles now in `k` from the 3×3 neighbourhood (in a fixed order), ends the step
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
//! Scenarios after Boulmier et al.: `uniform` (gas at rest), `contraction` (a disc, off the
//! domain centre, pulled towards its centre), `expansion` (a dense disc flying apart),
//! `gravity` (particles fall and pile up on the floor). Loads move through the domain.

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

/// A scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// A gas at rest filling the domain.
    Uniform,
    /// A disc off the domain centre, pulled towards its own centre.
    Contraction,
    /// A dense disc in the middle with outward velocities.
    Expansion,
    /// Particles in the upper part falling onto the floor.
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

#[derive(Debug, Clone, Copy, PartialEq)]
struct Particle {
    id: u32,
    /// The box its position lies in (set where it drifts).
    bin: u32,
    x: f64,
    y: f64,
    vx: f64,
    vy: f64,
    fx: f64,
    fy: f64,
}

/// One box's particles between steps. A cache line of its own: threads owning neighbouring
/// boxes of a row (a cut across the rows) reach them at the same time, and list headers
/// sharing a line made each push of one thread evict the other's (md on 2 pinned threads:
/// 1.23–1.26 × the time of whole-row ownership at equal balance, docs/balancers.md).
#[derive(Debug, Clone, Default)]
#[repr(align(64))]
struct Bin {
    /// Drifted and still inside the box.
    stay: Vec<Particle>,
    /// Drifted into a neighbouring box (`bin` says which), which picks them up next step.
    leave: Vec<Particle>,
    /// Sum of the velocities of `stay` and `leave`: the box's motion, for `norcb`.
    momentum: [f64; 2],
}

/// A box's particles gathered by md-split's rebin phase, a cache line of its own (as [`Bin`]).
#[derive(Debug, Clone, Default)]
#[repr(align(64))]
struct Gathered(Vec<Particle>);

thread_local! {
    /// A task's particles that arrived in each box of its 3×3 neighbourhood (slot
    /// `3 (dj + 1) + di + 1`): reused, so that a step allocates nothing once they have grown.
    static ARRIVED: std::cell::RefCell<[Vec<Particle>; 9]> = std::cell::RefCell::new(Default::default());
}

/// The MD app.
pub struct Md {
    grid: Grid,
    scenario: Scenario,
    width: f64,
    height: f64,
    centre: (f64, f64),
    boxes: Vec<Bin>,
    next: Vec<Bin>,
    /// With separate rebin and force phases ([`Md::split_phases`]): each box's particles
    /// after the rebin phase, in the order `members` gives them.
    current: Option<Vec<Gathered>>,
    /// Each box's momentum and particle count, for executors that use motion hints (kept
    /// between iterations, so that a hint allocates nothing).
    motion: (Vec<[f64; 2]>, Vec<f64>),
    /// The boxes this process computes (`None`: all; see [`Distributed`]).
    local: Option<Vec<bool>>,
    /// md-split across processes: the boxes whose lists the rebin phase gathers, those within
    /// one box of `local` (`None`: all).
    gathered: Option<Vec<bool>>,
}

impl Md {
    /// `nx × ny` Verlet boxes, particles placed from `seed`.
    ///
    /// # Panics
    /// If `nx` or `ny` is 0, or the grid has more boxes than a grid may hold; [`crate::build`]
    /// returns an error for those, and for a grid too large for the machine's memory.
    pub fn new(scenario: Scenario, nx: usize, ny: usize, seed: u64) -> Md {
        Md::holding(scenario, nx, ny, seed, None)
    }

    /// [`Md::new`] holding only the boxes `holds` marks (`None`: all), for a process that
    /// computes some of them (`pbs-mpi`): the other boxes hold no particle, and a box whose
    /// 5 × 5 neighbourhood is not all held (the initial step reads it) starts empty too, until
    /// its owner sends it. Particle ids are those of the whole grid.
    pub fn holding(scenario: Scenario, nx: usize, ny: usize, seed: u64, holds: Option<&[bool]>) -> Md {
        let grid = Grid::new(nx, ny).expect("non-empty grid");
        let (width, height) = (nx as f64 * CUTOFF, ny as f64 * CUTOFF);
        let centre = match scenario {
            Scenario::Contraction => (0.3 * width, 0.3 * height),
            _ => (0.5 * width, 0.5 * height),
        };
        let mut md = Md {
            grid,
            scenario,
            width,
            height,
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
        initial_particles(scenario, (width, height, centre), seed, |mut p| {
            p.bin = box_at(&grid, p.x, p.y) as u32;
            if held(p.bin as usize) {
                boxes[p.bin as usize].stay.push(p);
            }
        });
        // The initial forces and the first half-kick and drift: the state every iteration
        // starts from.
        let computable = |k: usize| {
            let [i, j, _] = grid.coords(k);
            (j.saturating_sub(2)..(j + 3).min(ny))
                .all(|b| (i.saturating_sub(2)..(i + 3).min(nx)).all(|a| held(grid.index(a, b, 0))))
        };
        md.next = (0..grid.len())
            .map(|k| {
                let mut bin = Bin::default();
                if computable(k) {
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
    /// expansion's lattice near the soft core's spacing, puts about five in a box; a list grows
    /// by doubling).
    pub(crate) fn state_bytes() -> crate::memory::StateBytes {
        crate::memory::StateBytes {
            fixed: 2 * std::mem::size_of::<Bin>() + std::mem::size_of::<Gathered>() + 3 * std::mem::size_of::<f64>(),
            held: 4 * 8 * std::mem::size_of::<Particle>(),
        }
    }

    /// Every box's work at the start as [`GridApp::box_work`] estimates it after the initial
    /// step, but from the particles as placed, before it, and without holding them: what a
    /// process that holds only its own boxes balances on first.
    pub fn initial_work(scenario: Scenario, nx: usize, ny: usize, seed: u64) -> Vec<f64> {
        let md = Md::holding(scenario, nx, ny, seed, Some(&vec![false; nx * ny]));
        let mut counts = vec![0usize; md.grid.len()];
        initial_particles(scenario, (md.width, md.height, md.centre), seed, |p| counts[md.box_of(p.x, p.y)] += 1);
        md.pair_work(&counts)
    }

    /// Each box's particles times those of its 3×3 neighbourhood, from every box's particle
    /// count: the pairs its task weighs.
    fn pair_work(&self, counts: &[usize]) -> Vec<f64> {
        (0..self.grid.len()).map(|k| (counts[k] * self.around(k).map(|n| counts[n]).sum::<usize>()) as f64).collect()
    }

    /// The same physics in two phases per iteration, `md-split`: a *rebin* phase gathers each
    /// box's particles (those that stayed, then those that arrived) into a list of its own,
    /// and a *force* phase steps them, reading the neighbours' lists. The sums run in the same
    /// order, so the state stays bit for bit that of the one-phase md; but the phases scale
    /// differently with density (rebin with the particles, forces with their pairs), so a
    /// mapping balanced on their sum leaves each phase imbalanced: the case of vector loads.
    pub fn split_phases(mut self) -> Md {
        self.current = Some(vec![Gathered::default(); self.grid.len()]);
        self
    }

    /// Number of particles.
    pub fn particles(&self) -> usize {
        self.boxes.iter().map(|b| b.stay.len() + b.leave.len()).sum()
    }

    /// The particles in box `k` now, in the order every task reads them: those that stayed,
    /// then those that arrived from each neighbour in turn.
    fn members(&self, k: usize) -> impl Iterator<Item = &Particle> + '_ {
        self.boxes[k].stay.iter().chain(self.arrivals(k))
    }

    fn arrivals(&self, k: usize) -> impl Iterator<Item = &Particle> + '_ {
        self.around(k).flat_map(move |m| self.boxes[m].leave.iter().filter(move |p| p.bin as usize == k))
    }

    fn box_of(&self, x: f64, y: f64) -> usize {
        box_at(&self.grid, x, y)
    }

    /// Whether box `k` is another process's (see [`Distributed`]); then its next state here is
    /// empty until that process sends it.
    fn elsewhere(&self, k: usize, out: &mut Bin) -> bool {
        let elsewhere = self.local.as_ref().is_some_and(|l| !l[k]);
        if elsewhere {
            out.stay.clear();
            out.leave.clear();
        }
        elsewhere
    }

    /// The 3×3 neighbourhood of box `k` (itself included), in a fixed order.
    fn around(&self, k: usize) -> impl Iterator<Item = usize> + '_ {
        let [i, j, _] = self.grid.coords(k);
        (-1isize..=1)
            .flat_map(move |dj| (-1isize..=1).map(move |di| (i as isize + di, j as isize + dj)))
            .filter(move |&(a, b)| a >= 0 && b >= 0 && a < self.grid.nx() as isize && b < self.grid.ny() as isize)
            .map(move |(a, b)| self.grid.index(a as usize, b as usize, 0))
    }

    fn external(&self, p: &Particle) -> (f64, f64) {
        match self.scenario {
            Scenario::Contraction => {
                let (dx, dy) = (p.x - self.centre.0, p.y - self.centre.1);
                let d = dx.hypot(dy).max(1e-9);
                (-0.6 * dx / d, -0.6 * dy / d)
            }
            Scenario::Gravity => (0.0, -0.6),
            _ => (0.0, 0.0),
        }
    }

    /// Where box `n` sits in the 3×3 neighbourhood of box `k` (`3 (dj + 1) + di + 1`), if it
    /// is in it.
    fn slot(&self, k: usize, n: usize) -> Option<usize> {
        let ([i, j, _], [a, b, _]) = (self.grid.coords(k), self.grid.coords(n));
        let (di, dj) = (a as isize - i as isize, b as isize - j as isize);
        (di.abs() <= 1 && dj.abs() <= 1).then(|| (3 * (dj + 1) + di + 1) as usize)
    }

    /// One step of box `k` into `out`: forces on its particles, with `finish` the half-kick
    /// that ends the step, then the half-kick and drift that start the next, each particle
    /// filed as staying or leaving. Reads the neighbourhood's lists, writes only `out`.
    fn step_box(&self, k: usize, out: &mut Bin, finish: bool) {
        ARRIVED.with_borrow_mut(|arrived| {
            self.gather_arrivals(k, arrived);
            let own = self.boxes[k].stay.iter().chain(&arrived[4]);
            self.advance(k, out, finish, own, |n, slot| [&self.boxes[n].stay, &arrived[slot]]);
        });
    }

    /// The arrivals of the 3×3 neighbourhood of `k`, in one pass over the leavers of the 5×5
    /// boxes around it in index order: each slot (`3 (dj + 1) + di + 1`) gets its box's
    /// arrivals in the order `members` gives them (by source box, then list order).
    fn gather_arrivals(&self, k: usize, arrived: &mut [Vec<Particle>; 9]) {
        let [i, j, _] = self.grid.coords(k);
        let (nx, ny) = (self.grid.nx() as isize, self.grid.ny() as isize);
        arrived.iter_mut().for_each(Vec::clear);
        for b in (j as isize - 2).max(0)..(j as isize + 3).min(ny) {
            for a in (i as isize - 2).max(0)..(i as isize + 3).min(nx) {
                for p in &self.boxes[self.grid.index(a as usize, b as usize, 0)].leave {
                    if let Some(slot) = self.slot(k, p.bin as usize) {
                        arrived[slot].push(*p);
                    }
                }
            }
        }
    }

    /// The step of [`Md::step_box`] for the particles `own` of box `k`, the particles of
    /// neighbour `n` (at `slot`) being the two lists `lists(n, slot)` in turn.
    #[inline(always)]
    fn advance<'a>(
        &self,
        k: usize,
        out: &mut Bin,
        finish: bool,
        own: impl Iterator<Item = &'a Particle>,
        lists: impl Fn(usize, usize) -> [&'a [Particle]; 2],
    ) {
        out.stay.clear();
        out.leave.clear();
        out.momentum = [0.0, 0.0];
        let mut hood = [(0usize, 0usize); 9]; // (box, slot)
        let mut count = 0;
        for n in self.around(k) {
            hood[count] = (n, self.slot(k, n).expect("a neighbour is in the neighbourhood"));
            count += 1;
        }
        let hood = &hood[..count];
        for &p in own {
            let mut p = p;
            let (mut fx, mut fy) = self.external(&p);
            for &(n, slot) in hood {
                // Two plain slice loops: a chained iterator here is markedly slower.
                let [first, then] = lists(n, slot);
                pair_forces(&p, first, &mut fx, &mut fy);
                pair_forces(&p, then, &mut fx, &mut fy);
            }
            p.fx = fx;
            p.fy = fy;
            if finish {
                p.vx += 0.5 * DT * fx;
                p.vy += 0.5 * DT * fy;
            }
            kick_drift(&mut p, self.width, self.height);
            out.momentum[0] += p.vx;
            out.momentum[1] += p.vy;
            p.bin = self.box_of(p.x, p.y) as u32;
            if p.bin as usize == k {
                out.stay.push(p);
            } else {
                out.leave.push(p);
            }
        }
    }
}

/// Adds the Lennard-Jones forces of `qs` on `p` (within the cutoff, soft core) in order.
#[inline(always)]
fn pair_forces(p: &Particle, qs: &[Particle], fx: &mut f64, fy: &mut f64) {
    for q in qs {
        if q.id == p.id {
            continue;
        }
        let (dx, dy) = (p.x - q.x, p.y - q.y);
        let r2 = dx * dx + dy * dy;
        if r2 >= CUTOFF * CUTOFF {
            continue;
        }
        let r2 = r2.max(R_MIN * R_MIN);
        let inv6 = 1.0 / (r2 * r2 * r2);
        let f = 24.0 * inv6 * (2.0 * inv6 - 1.0) / r2;
        *fx += f * dx;
        *fy += f * dy;
    }
}

fn kick_drift(p: &mut Particle, width: f64, height: f64) {
    p.vx += 0.5 * DT * p.fx;
    p.vy += 0.5 * DT * p.fy;
    // Squared speeds: libm's `hypot` on every particle cost 8 % of a step.
    let speed2 = p.vx * p.vx + p.vy * p.vy;
    if speed2 * DT * DT > MAX_STEP * MAX_STEP {
        let s = MAX_STEP / (speed2.sqrt() * DT);
        p.vx *= s;
        p.vy *= s;
    }
    p.x += DT * p.vx;
    p.y += DT * p.vy;
    reflect(&mut p.x, &mut p.vx, width);
    reflect(&mut p.y, &mut p.vy, height);
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

/// Calls `f` with every particle `scenario` places from `seed` in a domain of `width ×
/// height` (centred on `centre`), in id order (`bin` 0).
fn initial_particles(
    scenario: Scenario,
    (width, height, centre): (f64, f64, (f64, f64)),
    seed: u64,
    mut f: impl FnMut(Particle),
) {
    let mut rng = SplitMix64::new(seed);
    let mut id = 0u32;
    let radius = 0.3 * width.min(height);
    // Jittered lattices: no two particles start closer than the soft core.
    let mut lattice = |spacing: f64, keep: &dyn Fn(f64, f64) -> bool, velocity: &dyn Fn(f64, f64) -> (f64, f64)| {
        let mut y = 0.5 * spacing;
        while y < height {
            let mut x = 0.5 * spacing;
            while x < width {
                let (jx, jy) = (0.1 * spacing * (rng.next_f64() - 0.5), 0.1 * spacing * (rng.next_f64() - 0.5));
                let (px, py) = (x + jx, y + jy);
                if keep(px, py) {
                    let (vx, vy) = velocity(px, py);
                    f(Particle { id, bin: 0, x: px, y: py, vx, vy, fx: 0.0, fy: 0.0 });
                    id += 1;
                }
                x += spacing;
            }
            y += spacing;
        }
    };
    let inside = move |x: f64, y: f64| (x - centre.0).powi(2) + (y - centre.1).powi(2) < radius * radius;
    match scenario {
        Scenario::Uniform => lattice(1.6, &|_, _| true, &|_, _| (0.0, 0.0)),
        Scenario::Contraction => lattice(1.2, &inside, &|_, _| (0.0, 0.0)),
        Scenario::Expansion => lattice(1.1, &|x, y| (x - centre.0).hypot(y - centre.1) < 0.5 * radius, &|x, y| {
            let (dx, dy) = (x - centre.0, y - centre.1);
            (0.3 * dx, 0.3 * dy)
        }),
        Scenario::Gravity => lattice(1.3, &|_, y| y > 0.35 * height, &|_, _| (0.0, 0.0)),
    }
}

/// The box of a point of the domain of `grid` (boxes of side `CUTOFF`).
fn box_at(grid: &Grid, x: f64, y: f64) -> usize {
    let i = ((x / CUTOFF) as usize).min(grid.nx() - 1);
    let j = ((y / CUTOFF) as usize).min(grid.ny() - 1);
    grid.index(i, j, 0)
}

impl GridApp for Md {
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
        let bytes = mean * std::mem::size_of::<Particle>() as u64;
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
            momentum.extend(self.boxes.iter().map(|b| b.momentum));
            particles.clear();
            particles.extend(self.boxes.iter().map(|b| (b.stay.len() + b.leave.len()) as f64));
            // Speeds are capped in every step, so the sums are finite.
            exec.hint_motion(momentum, particles).expect("finite momenta of a 2D grid");
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

/// A particle: id, box, then position, velocity and force, 56 bytes.
const PARTICLE_BYTES: usize = 4 + 4 + 6 * 8;

/// A box's particles: how many stayed and left, its momentum, then the particles.
impl Pack for Bin {
    fn pack(&self, out: &mut Vec<u8>) {
        pack_lists(&self.stay, &self.leave, self.momentum, out);
    }
    fn unpack(bytes: &[u8]) -> Result<Self, String> {
        let mut r = Reader::new(bytes);
        let stay = r.u64()?;
        let leave = r.len(PARTICLE_BYTES)?;
        let momentum = [r.f64()?, r.f64()?];
        let stay = usize::try_from(stay).map_err(|_| format!("{stay} staying particles"))?;
        let mut particle = || -> Result<Particle, String> {
            Ok(Particle {
                id: r.u32()?,
                bin: r.u32()?,
                x: r.f64()?,
                y: r.f64()?,
                vx: r.f64()?,
                vy: r.f64()?,
                fx: r.f64()?,
                fy: r.f64()?,
            })
        };
        // Counts checked against the bytes as they are read: a corrupt count fails here.
        let stay = (0..stay).map(|_| particle()).collect::<Result<Vec<_>, _>>()?;
        let leave = (0..leave).map(|_| particle()).collect::<Result<Vec<_>, _>>()?;
        r.end()?;
        Ok(Bin { stay, leave, momentum })
    }
}

/// A [`Bin`] of these lists, packed as [`Bin::pack`] packs one.
fn pack_lists(stay: &[Particle], leave: &[Particle], momentum: [f64; 2], out: &mut Vec<u8>) {
    out.extend_from_slice(&(stay.len() as u64).to_le_bytes());
    out.extend_from_slice(&(leave.len() as u64).to_le_bytes());
    momentum.iter().for_each(|m| out.extend_from_slice(&m.to_le_bytes()));
    for p in stay.iter().chain(leave) {
        out.extend_from_slice(&p.id.to_le_bytes());
        out.extend_from_slice(&p.bin.to_le_bytes());
        [p.x, p.y, p.vx, p.vy, p.fx, p.fy].iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    }
}

/// The part code of a box's leave list alone (see [`Distributed::reader_part`]).
pub(crate) const LEAVERS: u64 = 1;

impl Md {
    /// Box `k`'s data from another process: its particles must be filed in boxes of the grid.
    fn receive(&mut self, k: usize, bin: Bin) -> Result<(), String> {
        let n = self.grid.len();
        if let Some(p) = bin.stay.iter().chain(&bin.leave).find(|p| p.bin as usize >= n) {
            return Err(format!("particle {} of box {k} is filed in box {} of {n}", p.id, p.bin));
        }
        self.boxes[k] = bin;
        Ok(())
    }
}

impl Distributed for Md {
    fn halo(&self) -> usize {
        // A task reads its 3×3 neighbourhood's particles, and those that arrive there come
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
        4 * 8 + (b.stay.len() + b.leave.len()) * PARTICLE_BYTES
    }
    fn unpack_box(&mut self, k: usize, bytes: &[u8]) -> Result<(), String> {
        self.receive(k, Bin::unpack(bytes)?)
    }
    fn checksum_from(&self, boxes: std::ops::Range<usize>, hash: u64) -> u64 {
        fnv_from(
            hash,
            boxes
                .flat_map(|k| self.members(k))
                .flat_map(|p| [u64::from(p.id), p.x.to_bits(), p.y.to_bits(), p.vx.to_bits(), p.vy.to_bits()]),
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
        // A task reads the particles of its 3×3 neighbourhood and the leavers of its 5×5 (those
        // that arrive in the 3×3): a process whose nearest box is two away reads only the
        // leave list.
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
    fn reference_step(md: &Md, ps: &mut [Particle], finish: bool) {
        let old = ps.to_vec();
        for p in ps.iter_mut() {
            let (mut fx, mut fy) = md.external(p);
            pair_forces(p, &old, &mut fx, &mut fy);
            p.fx = fx;
            p.fy = fy;
            if finish {
                p.vx += 0.5 * DT * fx;
                p.vy += 0.5 * DT * fy;
            }
            kick_drift(p, md.width, md.height);
        }
    }

    fn by_id(md: &Md) -> Vec<Particle> {
        let mut ps: Vec<Particle> = (0..md.grid.len()).flat_map(|k| md.members(k).copied()).collect();
        ps.sort_by_key(|p| p.id);
        ps
    }

    /// A particle at `(x, y)` with velocity `v` and force `f`.
    fn particle(id: u32, (x, y): (f64, f64), v: (f64, f64), f: (f64, f64)) -> Particle {
        Particle { id, bin: 0, x, y, vx: v.0, vy: v.1, fx: f.0, fy: f.1 }
    }

    /// The pair force is minus the gradient of the Lennard-Jones potential `4 (r⁻¹² − r⁻⁶)`
    /// (a central difference of the potential, not the code's formula) from `R_MIN` to the
    /// cutoff, nothing from the cutoff on or from the particle itself; below `R_MIN` the squared
    /// distance is floored in the whole formula, so the force is that at `R_MIN` times
    /// `r / R_MIN`. Forces of several particles add; the pair's forces are opposite.
    #[test]
    fn the_pair_force_is_the_lennard_jones_gradient_within_the_cutoff() {
        let potential = |r: f64| 4.0 * (r.powi(-12) - r.powi(-6));
        let slope = |r: f64| (potential(r + 1e-6) - potential(r - 1e-6)) / 2e-6;
        let p = particle(0, (5.0, 5.0), (0.0, 0.0), (0.0, 0.0));
        let force = |qs: &[Particle]| {
            let (mut fx, mut fy) = (0.0, 0.0);
            pair_forces(&p, qs, &mut fx, &mut fy);
            (fx, fy)
        };
        let mut all = Vec::new();
        let mut sum = (0.0, 0.0);
        for (n, r) in [0.3, 0.79, 0.8, 0.9, 1.0, 1.12, 1.5, 2.0, 2.49, 2.5, 2.7].into_iter().enumerate() {
            // At the cutoff exactly, along a row (no rounding in the distance).
            let angle = if r == CUTOFF { 0.0 } else { 0.7 + n as f64 };
            let q = particle(n as u32 + 1, (5.0 + r * angle.cos(), 5.0 + r * angle.sin()), (0.0, 0.0), (0.0, 0.0));
            let r = (p.x - q.x).hypot(p.y - q.y);
            let (ux, uy) = ((p.x - q.x) / r, (p.y - q.y) / r);
            let magnitude = match r {
                r if r >= CUTOFF => 0.0,
                r if r < R_MIN => -slope(R_MIN) * r / R_MIN,
                r => -slope(r),
            };
            let (fx, fy) = force(std::slice::from_ref(&q));
            let tolerance = 1e-6 * (1.0 + magnitude.abs());
            assert!((fx - magnitude * ux).abs() <= tolerance && (fy - magnitude * uy).abs() <= tolerance, "r = {r}");
            let mut back = (0.0, 0.0);
            pair_forces(&q, std::slice::from_ref(&p), &mut back.0, &mut back.1);
            assert_eq!((back.0, back.1), (-fx, -fy), "r = {r}");
            sum = (sum.0 + fx, sum.1 + fy);
            all.push(q);
        }
        // Itself, wherever its copy stands: no force.
        all.push(particle(0, (5.5, 5.0), (0.0, 0.0), (0.0, 0.0)));
        let (fx, fy) = force(&all);
        assert!((fx - sum.0).abs() <= 1e-9 * sum.0.abs() && (fy - sum.1).abs() <= 1e-9 * sum.1.abs());
    }

    /// Half a kick, a drift of `dt` at a speed capped at a fifth of a box per step, and walls
    /// that reflect the position and the velocity's component across them (the far wall's
    /// position itself to a hair inside, so that it stays in the last box).
    #[test]
    fn a_step_kicks_drifts_caps_the_speed_and_reflects_at_the_walls() {
        let (w, h) = (20.0, 10.0);
        let mut p = particle(0, (5.0, 5.0), (1.0, -2.0), (3.0, 4.0));
        kick_drift(&mut p, w, h);
        let (vx, vy) = (1.0 + 0.5 * DT * 3.0, -2.0 + 0.5 * DT * 4.0);
        assert_eq!((p.vx, p.vy, p.x, p.y), (vx, vy, 5.0 + DT * vx, 5.0 + DT * vy));
        // Fast: moves a fifth of a box along its velocity.
        let mut p = particle(0, (5.0, 5.0), (3000.0, 4000.0), (0.0, 0.0));
        kick_drift(&mut p, w, h);
        let moved = (p.x - 5.0).hypot(p.y - 5.0);
        assert!((moved - MAX_STEP).abs() <= 1e-12 && ((p.y - 5.0) / (p.x - 5.0) - 4.0 / 3.0).abs() <= 1e-12);
        // Across the wall at 0 and across the one at the height.
        let mut p = particle(0, (0.001, 9.999), (-10.0, 10.0), (0.0, 0.0));
        kick_drift(&mut p, w, h);
        let (x, y) = (0.001 - DT * 10.0, 9.999 + DT * 10.0);
        assert_eq!((p.x, p.vx), (-x, 10.0));
        assert!((p.y - (2.0 * h - y)).abs() <= 1e-8 && p.y < h && p.vy == -10.0);
        // On a wall: 0 is inside the domain; the far wall is not, and a hair short of it is.
        let (mut x, mut v) = (0.0, -1.0);
        reflect(&mut x, &mut v, w);
        assert_eq!((x, v), (0.0, -1.0));
        let (mut x, mut v) = (w, 1.0);
        reflect(&mut x, &mut v, w);
        assert_eq!((x, v), (w - 1e-9, -1.0));
    }

    /// The scenarios' placements: jittered square lattices (uniform 1.6 apart over the whole
    /// domain; contraction 1.2 apart in a disc of radius 0.3 × the shorter side around 0.3 × the
    /// sides; expansion 1.1 apart within half that radius of the middle, flying out at 0.3 ×
    /// the distance to it; gravity 1.3 apart above 0.35 × the height), each particle within a
    /// twentieth of the spacing of its own lattice point, ids in order; the same seed the same
    /// particles, another seed other jitter.
    #[test]
    fn the_scenarios_place_jittered_lattices_in_their_regions() {
        let (nx, ny) = (12, 8);
        let (w, h) = (nx as f64 * CUTOFF, ny as f64 * CUTOFF);
        for scenario in Scenario::ALL {
            let md = Md::new(scenario, nx, ny, 3);
            let centre = if scenario == Scenario::Contraction { (0.3 * w, 0.3 * h) } else { (0.5 * w, 0.5 * h) };
            assert_eq!(md.centre, centre);
            let radius = 0.3 * w.min(h);
            let from_centre = |x: f64, y: f64| (x - centre.0).hypot(y - centre.1);
            let (spacing, inside): (f64, &dyn Fn(f64, f64) -> bool) = match scenario {
                Scenario::Uniform => (1.6, &|_, _| true),
                Scenario::Contraction => (1.2, &|x, y| from_centre(x, y) < radius),
                Scenario::Expansion => (1.1, &|x, y| from_centre(x, y) < 0.5 * radius),
                Scenario::Gravity => (1.3, &|_, y| y > 0.35 * h),
            };
            let place = |seed| {
                let mut placed = Vec::new();
                initial_particles(scenario, (w, h, centre), seed, |p| placed.push(p));
                placed
            };
            let placed = place(3);
            let mut points = std::collections::BTreeSet::new();
            for (n, p) in placed.iter().enumerate() {
                assert_eq!((p.id as usize, p.bin, p.fx, p.fy), (n, 0, 0.0, 0.0), "{scenario:?}");
                assert!(inside(p.x, p.y) && (0.0..w).contains(&p.x) && (0.0..h).contains(&p.y), "{scenario:?}");
                let (i, j) = ((p.x / spacing - 0.5).round(), (p.y / spacing - 0.5).round());
                let (lx, ly) = ((i + 0.5) * spacing, (j + 0.5) * spacing);
                assert!((p.x - lx).abs() <= 0.05 * spacing && (p.y - ly).abs() <= 0.05 * spacing, "{scenario:?}");
                assert!(points.insert((i as i64, j as i64)), "{scenario:?}: two particles on one point");
                let v = if scenario == Scenario::Expansion {
                    (0.3 * (p.x - centre.0), 0.3 * (p.y - centre.1))
                } else {
                    (0.0, 0.0)
                };
                assert_eq!((p.vx, p.vy), v, "{scenario:?}");
            }
            // Every lattice point whose jitter cannot take it out of the region holds a particle.
            let jitter = 0.05 * spacing * std::f64::consts::SQRT_2;
            let (columns, rows) = ((w / spacing) as i64, (h / spacing) as i64);
            for (i, j) in (0..rows).flat_map(|j| (0..columns).map(move |i| (i, j))) {
                let (lx, ly) = ((i as f64 + 0.5) * spacing, (j as f64 + 0.5) * spacing);
                let surely = (0..8).all(|a| {
                    let angle = a as f64 * std::f64::consts::FRAC_PI_4;
                    inside(lx + jitter * angle.cos(), ly + jitter * angle.sin())
                }) && lx + jitter < w
                    && ly + jitter < h;
                assert!(!surely || points.contains(&(i, j)), "{scenario:?}: point ({i}, {j}) empty");
            }
            assert!(placed.len() > 20, "{scenario:?}: {} particles", placed.len());
            if scenario == Scenario::Uniform {
                // The jitter: the seed's first two draws, across then up, on the first point.
                let mut rng = SplitMix64::new(3);
                let (dx, dy) = (rng.next_f64() - 0.5, rng.next_f64() - 0.5);
                assert_eq!(
                    (placed[0].x, placed[0].y),
                    (0.5 * spacing + 0.1 * spacing * dx, 0.5 * spacing + 0.1 * spacing * dy)
                );
            }
            assert_eq!(md.particles(), placed.len());
            let (again, other) = (place(3), place(4));
            assert!(again.iter().zip(&placed).all(|(a, b)| (a.x, a.y) == (b.x, b.y)));
            assert!(other.iter().zip(&placed).all(|(a, b)| (a.x, a.y) != (b.x, b.y)));
        }
    }

    /// The fields of the scenarios: a pull of 0.6 towards the disc's centre in contraction, 0.6
    /// downwards in gravity, none in the others.
    #[test]
    fn the_external_fields_are_those_of_the_scenarios() {
        let p = particle(0, (9.0, 4.0), (0.0, 0.0), (0.0, 0.0));
        for scenario in Scenario::ALL {
            let md = Md::new(scenario, 6, 4, 1);
            let (fx, fy) = md.external(&p);
            match scenario {
                Scenario::Contraction => {
                    let (dx, dy) = (md.centre.0 - p.x, md.centre.1 - p.y);
                    assert!(dx < 0.0 && dy < 0.0 && (md.centre.0, md.centre.1) == (0.3 * 15.0, 0.3 * 10.0));
                    assert!((fx.hypot(fy) - 0.6).abs() <= 1e-12 && (fx * dy - fy * dx).abs() <= 1e-12 && fx * dx > 0.0);
                }
                Scenario::Gravity => assert_eq!((fx, fy), (0.0, -0.6)),
                _ => assert_eq!((fx, fy), (0.0, 0.0), "{scenario:?}"),
            }
        }
    }

    /// The estimate a process balances on first, without holding any particle, is
    /// `box_work` of the particles as placed (the whole state before its initial step).
    #[test]
    fn the_initial_work_counts_the_particles_as_placed() {
        for scenario in [Scenario::Gravity, Scenario::Contraction] {
            let mut md = Md::new(scenario, 9, 7, 2);
            std::mem::swap(&mut md.boxes, &mut md.next);
            let placed = md.box_work();
            assert!(placed.iter().any(|&w| w > 0.0) && placed.contains(&0.0));
            assert_eq!(Md::initial_work(scenario, 9, 7, 2), placed);
        }
    }

    /// Why md's halo is two boxes deep: a particle that just left box 2 for box 1 (in box 2's
    /// leave list) pulls on a particle of box 0, so box 0's task reads box 2.
    #[test]
    fn a_box_two_away_acts_through_its_leavers() {
        let mut md = Md::new(Scenario::Uniform, 3, 1, 1);
        let at = |id, bin, x| Particle { id, bin, x, y: 1.0, vx: 0.0, vy: 0.0, fx: 0.0, fy: 0.0 };
        md.boxes = vec![Bin::default(); 3];
        md.boxes[0].stay.push(at(0, 0, 2.45));
        md.boxes[2].leave.push(at(1, 1, 4.6));
        let (mut with, mut without) = (Bin::default(), Bin::default());
        md.step_box(0, &mut with, true);
        md.boxes[2].leave.clear();
        md.step_box(0, &mut without, true);
        assert_ne!(with.stay[0].fx, without.stay[0].fx);
        assert_eq!(md.halo(), 2);
    }

    /// So a process whose nearest box is two away from a box gets its leave list, and that is
    /// all it reads of it: box 0's step in a process holding box 2's leave list alone is its
    /// step where all boxes are whole.
    #[test]
    fn a_process_two_boxes_away_gets_the_leave_list_it_reads() {
        let at = |id, bin, x| Particle { id, bin, x, y: 1.0, vx: 0.0, vy: 0.0, fx: 0.0, fy: 0.0 };
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
        assert_eq!(bytes.len(), whole.packed_len(2) - PARTICLE_BYTES, "the staying particle stays");
        let mut here = Md::new(Scenario::Uniform, 3, 1, 1);
        here.boxes = vec![Bin::default(); 3];
        here.boxes[0] = whole.boxes[0].clone();
        here.unpack_part(2, LEAVERS, &bytes).unwrap();
        let (mut a, mut b) = (Bin::default(), Bin::default());
        whole.step_box(0, &mut a, true);
        here.step_box(0, &mut b, true);
        assert_eq!(a.stay[0].fx.to_bits(), b.stay[0].fx.to_bits());
        assert_ne!(a.stay[0].fx, 0.0, "the leaver pulls");
        let mut stay = Vec::new();
        whole.pack_box(0, &mut stay);
        assert!(here.unpack_part(2, LEAVERS, &stay).unwrap_err().contains("staying particles"));
    }

    /// After a step every box holds the momentum of the particles its task stepped (those it
    /// keeps and those it sends on: unit masses), the motion hint `norcb` cuts along; a point at
    /// the domain's far edges files into the last row or column; a box another process computes
    /// is left empty here.
    #[test]
    fn boxes_carry_their_momentum_edges_file_inward_and_others_boxes_stay_empty() {
        let mut md = Md::new(Scenario::Gravity, 8, 6, 2);
        let mut exec = Pbs::new(md.grid, 2, PbsOptions::default()).unwrap();
        let mut rec = Recorder::new("pbs", 2);
        for _ in 0..3 {
            md.iterate(&mut exec, &mut rec, None);
        }
        let mut moving = 0;
        for b in &md.boxes {
            let sum = b.stay.iter().chain(&b.leave).fold([0.0, 0.0], |m, p| [m[0] + p.vx, m[1] + p.vy]);
            assert!(
                (0..2).all(|a| (b.momentum[a] - sum[a]).abs() <= 1e-12 * (1.0 + sum[a].abs())),
                "{:?} against {sum:?}",
                b.momentum
            );
            moving += usize::from(sum[0] != 0.0 && sum[1] != 0.0);
        }
        assert!(moving > 4, "{moving} boxes in motion");
        let (w, h) = (md.width, md.height);
        assert_eq!([md.box_of(w, h), md.box_of(w, 0.0), md.box_of(0.0, h)], [47, 7, 40]);
        // Half the grid is another process's: its boxes are empty after a step here.
        let mut md = Md::new(Scenario::Uniform, 8, 6, 2);
        let local: Vec<bool> = (0..md.grid.len()).map(|k| k % 8 < 4).collect();
        md.compute_only(Some(local.clone())).unwrap();
        md.iterate(&mut exec, &mut rec, None);
        for (k, b) in md.boxes.iter().enumerate() {
            let held = b.stay.len() + b.leave.len();
            assert_eq!(held == 0, !local[k], "box {k}: {held} particles");
        }
    }

    /// Boxes, migration through the leave lists, and one phase per step against the plain
    /// all-pairs integration: every particle where it should be (to rounding, since the sums
    /// run in another order), each in the box its position lies in, none lost or doubled.
    #[test]
    fn the_boxed_step_follows_the_all_pairs_integration() {
        for scenario in Scenario::ALL {
            let mut md = Md::new(scenario, 10, 8, 4);
            // The constructor's state is the reference's first half-step from the placement.
            let mut reference = by_id(&md);
            let mut exec = Pbs::new(md.grid, 2, PbsOptions::default()).unwrap();
            let mut rec = Recorder::new("pbs", 2);
            let mut migrated = 0;
            for _ in 0..300 {
                let before: Vec<u32> = by_id(&md).iter().map(|p| p.bin).collect();
                md.iterate(&mut exec, &mut rec, None);
                reference_step(&md, &mut reference, true);
                let now = by_id(&md);
                assert_eq!(now.len(), reference.len(), "{scenario:?}: particles lost or doubled");
                migrated += now.iter().zip(&before).filter(|(p, &b)| p.bin != b).count();
                for (p, r) in now.iter().zip(&reference) {
                    assert_eq!(p.id, r.id);
                    let err =
                        (p.x - r.x).abs().max((p.y - r.y).abs()).max((p.vx - r.vx).abs()).max((p.vy - r.vy).abs());
                    assert!(err < 1e-9, "{scenario:?}: particle {} off by {err}", p.id);
                    assert_eq!(p.bin as usize, md.box_of(p.x, p.y), "{scenario:?}: particle {} filed wrongly", p.id);
                }
            }
            eprintln!("{scenario:?}: {migrated} migrations, {} particles", reference.len());
            assert!(migrated > 0, "{scenario:?}: no particle changed box, the migration went untested");
        }
    }
}
