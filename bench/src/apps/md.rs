//! `md`: 2D Lennard-Jones molecular dynamics with cell lists. Boxes are Verlet boxes of side
//! = the cutoff (2.5 σ), so a particle interacts only with its own and the 8 surrounding boxes.
//! Velocity Verlet, three phases per iteration, each writing only its own box:
//!
//! 1. **kick-drift**: `v += ½ dt f`, `x += dt v`, reflecting walls (in place);
//! 2. **rebin**: each box gathers, from itself and its neighbours, the particles now inside it,
//!    sorted by id (reads the old lists, writes the new one);
//! 3. **forces + kick**: forces from the 3×3 neighbourhood in a fixed order, then
//!    `v += ½ dt f` (reads positions, writes the box's own copy).
//!
//! Scenarios after Boulmier et al.: `uniform` (gas at rest), `contraction` (a disc, off the
//! domain centre, pulled towards its centre), `expansion` (a dense disc flying apart),
//! `gravity` (particles fall and pile up on the floor). Loads move through the domain.

use pbs::rng::SplitMix64;
use pbs::Grid;
use pbs_scheduler::cache_model::CacheModel;
use pbs_scheduler::report::Recorder;
use pbs_scheduler::{for_each_box_mut, Executor};

use super::{fnv, GridApp};

const CUTOFF: f64 = 2.5;
const DT: f64 = 0.004;
/// Pair distances are floored here (a soft core), so close encounters stay finite.
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
    x: f64,
    y: f64,
    vx: f64,
    vy: f64,
    fx: f64,
    fy: f64,
}

/// The MD app.
pub struct Md {
    grid: Grid,
    scenario: Scenario,
    width: f64,
    height: f64,
    centre: (f64, f64),
    boxes: Vec<Vec<Particle>>,
    next: Vec<Vec<Particle>>,
}

impl Md {
    /// `nx × ny` Verlet boxes, particles placed from `seed`.
    pub fn new(scenario: Scenario, nx: usize, ny: usize, seed: u64) -> Md {
        let grid = Grid::new(nx, ny).expect("non-empty grid");
        let (width, height) = (nx as f64 * CUTOFF, ny as f64 * CUTOFF);
        let mut rng = SplitMix64::new(seed);
        let mut particles = Vec::new();
        let centre = match scenario {
            Scenario::Contraction => (0.3 * width, 0.3 * height),
            _ => (0.5 * width, 0.5 * height),
        };
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
                        let id = particles.len() as u32;
                        particles.push(Particle { id, x: px, y: py, vx, vy, fx: 0.0, fy: 0.0 });
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
        let mut md =
            Md { grid, scenario, width, height, centre, boxes: vec![Vec::new(); grid.len()], next: Vec::new() };
        for p in particles {
            let k = md.box_of(p.x, p.y);
            md.boxes[k].push(p);
        }
        md.next = vec![Vec::new(); grid.len()];
        // Initial forces, so the first half-kick uses them.
        let forces: Vec<Vec<Particle>> = (0..grid.len()).map(|k| md.with_forces(k, false)).collect();
        md.boxes = forces;
        md
    }

    /// Number of particles.
    pub fn particles(&self) -> usize {
        self.boxes.iter().map(Vec::len).sum()
    }

    fn box_of(&self, x: f64, y: f64) -> usize {
        let i = ((x / CUTOFF) as usize).min(self.grid.nx - 1);
        let j = ((y / CUTOFF) as usize).min(self.grid.ny - 1);
        self.grid.index(i, j, 0)
    }

    /// The 3×3 neighbourhood of box `k` (itself included), in a fixed order.
    fn around(&self, k: usize) -> impl Iterator<Item = usize> + '_ {
        let [i, j, _] = self.grid.coords(k);
        (-1isize..=1)
            .flat_map(move |dj| (-1isize..=1).map(move |di| (i as isize + di, j as isize + dj)))
            .filter(move |&(a, b)| a >= 0 && b >= 0 && a < self.grid.nx as isize && b < self.grid.ny as isize)
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

    /// Box `k`'s particles with new forces (and, if `kick`, the second half-kick).
    fn with_forces(&self, k: usize, kick: bool) -> Vec<Particle> {
        let mut out = self.boxes[k].clone();
        for p in &mut out {
            let (mut fx, mut fy) = self.external(p);
            for n in self.around(k) {
                for q in &self.boxes[n] {
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
                    fx += f * dx;
                    fy += f * dy;
                }
            }
            p.fx = fx;
            p.fy = fy;
            if kick {
                p.vx += 0.5 * DT * fx;
                p.vy += 0.5 * DT * fy;
            }
        }
        out
    }
}

fn kick_drift(p: &mut Particle, width: f64, height: f64) {
    p.vx += 0.5 * DT * p.fx;
    p.vy += 0.5 * DT * p.fy;
    let speed = p.vx.hypot(p.vy);
    if speed * DT > MAX_STEP {
        let s = MAX_STEP / (speed * DT);
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

impl GridApp for Md {
    fn name(&self) -> &'static str {
        "md"
    }
    fn grid(&self) -> Grid {
        self.grid
    }
    fn footprint(&self) -> (u64, u64) {
        // A box holds ~ the mean number of particles; a neighbour's whole box is read.
        let mean = self.particles() as u64 / self.grid.len() as u64 + 1;
        let bytes = mean * std::mem::size_of::<Particle>() as u64;
        (bytes, bytes)
    }
    fn iterate(&mut self, exec: &mut dyn Executor, rec: &mut Recorder, cache: Option<&CacheModel>) {
        let (w, h) = (self.width, self.height);
        // 1. kick-drift, in place.
        let s = for_each_box_mut(exec, &mut self.boxes, |_, list| {
            for p in list.iter_mut() {
                kick_drift(p, w, h);
            }
        });
        rec.phase(&s);
        // 2. rebin: gather the particles that are now inside each box.
        let mut next = std::mem::take(&mut self.next);
        let this = &*self;
        let s = for_each_box_mut(exec, &mut next, |k, out| {
            out.clear();
            for n in this.around(k) {
                out.extend(this.boxes[n].iter().filter(|p| this.box_of(p.x, p.y) == k));
            }
            out.sort_unstable_by_key(|p| p.id);
        });
        rec.phase(&s);
        self.next = std::mem::replace(&mut self.boxes, next);
        // 3. forces and the second half-kick.
        let mut next = std::mem::take(&mut self.next);
        let this = &*self;
        let s = for_each_box_mut(exec, &mut next, |k, out| {
            if let Some(c) = cache {
                c.run_box(k);
            }
            *out = this.with_forces(k, true);
        });
        rec.phase(&s);
        self.next = std::mem::replace(&mut self.boxes, next);
        rec.iteration(&exec.end_iteration());
    }
    fn checksum(&self) -> u64 {
        fnv(self
            .boxes
            .iter()
            .flatten()
            .flat_map(|p| [u64::from(p.id), p.x.to_bits(), p.y.to_bits(), p.vx.to_bits(), p.vy.to_bits()]))
    }
    fn box_work(&self) -> Vec<f64> {
        (0..self.grid.len())
            .map(|k| (self.boxes[k].len() * self.around(k).map(|n| self.boxes[n].len()).sum::<usize>()) as f64)
            .collect()
    }
}
