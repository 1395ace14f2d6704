//! The balancer on a load map, as the simulator runs it: a load source (a static case, a
//! Perlin map that can drift or jump, a CSV file) plus the load painted by hand, a method, the
//! vCores and the history of every step.

use std::path::PathBuf;

use pbs::loadmap::{self, Case, PerlinMap};
use pbs::{metrics, Balancer, Grid, Point, Problem, StepRecord, VCores};

use crate::runner::{Command, Simulation};
use crate::scene::{History, Scene, SceneKind};

/// Where the loads come from.
#[derive(Debug, Clone, PartialEq)]
pub enum LoadKind {
    /// One of the paper's four static cases.
    Case(Case),
    /// A Perlin/fBm map (the paper's stress test); drift and rough transitions apply to it.
    Perlin,
    /// A CSV file of loads (`pbs::loadmap::read_csv`: 2D, or 3D with blank lines between
    /// layers); its own size replaces the grid size.
    Csv(PathBuf),
}

impl LoadKind {
    /// `uniform`, `line`, `disc`, `random`, `perlin`, or a path ending in `.csv`.
    pub fn parse(s: &str) -> Result<LoadKind, String> {
        if s == "perlin" {
            return Ok(LoadKind::Perlin);
        }
        if let Some(c) = Case::from_name(s) {
            return Ok(LoadKind::Case(c));
        }
        if s.ends_with(".csv") {
            return Ok(LoadKind::Csv(PathBuf::from(s)));
        }
        Err(format!("unknown load `{s}`: expected uniform, line, disc, random, perlin or a .csv file"))
    }

    /// The name `parse` accepts.
    pub fn name(&self) -> String {
        match self {
            LoadKind::Case(c) => c.name().to_string(),
            LoadKind::Perlin => "perlin".into(),
            LoadKind::Csv(p) => p.display().to_string(),
        }
    }
}

/// Everything that defines a run from scratch.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Boxes along x.
    pub nx: usize,
    /// Boxes along y.
    pub ny: usize,
    /// Boxes along z: 1 for a 2D grid; above, the Perlin map is 3D noise and the static cases
    /// the same on every layer.
    pub nz: usize,
    /// Number of vCores.
    pub vcores: usize,
    /// Method name (`pbs::methods::NAMES`).
    pub method: String,
    /// Fraction of each step's displacement that is applied (1 = the method's own step).
    pub step_fraction: f64,
    /// The load source.
    pub load: LoadKind,
    /// Seed of the starting vCore positions, of the random case and of the Perlin map.
    pub seed: u64,
    /// Whether the Perlin map drifts (a smooth transition before every step).
    pub drift: bool,
    /// Drift per step, in boxes.
    pub drift_speed: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            nx: 150,
            ny: 150,
            nz: 1,
            vcores: 72,
            method: pbs::methods::DEFAULT.into(),
            step_fraction: 1.0,
            load: LoadKind::Perlin,
            seed: 1,
            drift: false,
            drift_speed: 0.3,
        }
    }
}

/// Converged when `max_avg ≤ (1 + TOL) × lower bound`, as `pbs::StopRule::default()`.
const TOL: f64 = 0.05;

/// A Perlin map's loads on `grid`: 3D noise on a 3D grid, so that its layers differ.
fn perlin_loads(p: &PerlinMap, grid: &Grid) -> Vec<f64> {
    if grid.nz() > 1 {
        p.loads_3d(grid)
    } else {
        p.loads(grid)
    }
}

/// The running simulation.
pub struct Model {
    settings: Settings,
    grid: Grid,
    base: Vec<f64>,
    painted: Vec<f64>,
    loads: Vec<f64>,
    perlin: Option<PerlinMap>,
    method: Box<dyn Balancer + Send>,
    vcores: VCores,
    history: History,
    arrows: Vec<[f64; 2]>,
}

impl Model {
    /// A fresh run: loads from the source, vCores at random positions drawn from the seed.
    pub fn new(settings: Settings) -> Result<Model, String> {
        if !(settings.step_fraction > 0.0 && settings.step_fraction <= 1.0) {
            return Err(format!("step fraction must be in (0, 1], got {}", settings.step_fraction));
        }
        if !(settings.drift_speed.is_finite() && settings.drift_speed >= 0.0) {
            return Err(format!("drift speed must be finite and ≥ 0, got {}", settings.drift_speed));
        }
        let method = pbs::methods::by_name(&settings.method).map_err(|e| e.to_string())?;
        let (grid, base, perlin) = match &settings.load {
            LoadKind::Csv(path) => {
                let (g, l) = loadmap::read_csv(path).map_err(|e| e.to_string())?;
                (g, l, None)
            }
            kind => {
                let grid = Grid::new_3d(settings.nx, settings.ny, settings.nz).map_err(|e| e.to_string())?;
                pbs::check_memory("balancer state", grid.len(), pbs::BALANCER_BYTES_PER_BOX)
                    .map_err(|e| e.to_string())?;
                match kind {
                    LoadKind::Case(c) => (grid, loadmap::static_case(*c, &grid, settings.seed), None),
                    _ => {
                        let p = PerlinMap::with_seed(PerlinMap::noise_seed(settings.seed));
                        (grid, perlin_loads(&p, &grid), Some(p))
                    }
                }
            }
        };
        let problem = Problem::new(grid, &base, settings.vcores).map_err(|e| e.to_string())?;
        let vcores = VCores::random(&problem, settings.seed);
        let mut model = Model {
            painted: vec![0.0; grid.len()],
            loads: base.clone(),
            base,
            grid,
            perlin,
            method,
            vcores,
            history: History::default(),
            arrows: Vec::new(),
            settings,
        };
        model.record(0);
        Ok(model)
    }

    /// The settings the run started from (with later changes of method, drift and fraction).
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The vCores and their cells.
    pub fn vcores(&self) -> &VCores {
        &self.vcores
    }

    /// The current loads (source plus paint).
    pub fn loads(&self) -> &[f64] {
        &self.loads
    }

    /// The records of the last steps taken, [`crate::scene::HISTORY`] or more (step 0 = the
    /// start), and how many were taken ([`History`]).
    pub fn history(&self) -> &History {
        &self.history
    }

    /// Whether the current state meets the convergence criterion.
    pub fn converged(&self) -> bool {
        self.vcores.max_avg() <= (1.0 + TOL) * self.problem().lower_bound()
    }

    fn problem(&self) -> Problem<'_> {
        Problem::new(self.grid, &self.loads, self.vcores.len()).expect("loads and vCore count were validated")
    }

    fn record(&mut self, migrations: usize) {
        let (dol_max, dol_min) = metrics::dol_extremes(self.vcores.charges());
        let step = self.history.steps();
        self.history.push(StepRecord { step, max_avg: self.vcores.max_avg(), dol_max, dol_min, migrations });
    }

    /// Rebuilds the loads from the source and the paint, and recharges the cells.
    fn refresh_loads(&mut self) -> Result<(), String> {
        let loads: Vec<f64> = self.base.iter().zip(&self.painted).map(|(b, p)| b + p).collect();
        pbs::problem::validate_loads(&self.grid, &loads).map_err(|e| e.to_string())?;
        self.loads = loads;
        // New loads start a new balancing problem: the method's adaptive state (step sizes,
        // stuck detection) belongs to the old one, as in `pbs::balance`.
        self.method.reset();
        let problem = Problem::new(self.grid, &self.loads, self.vcores.len()).map_err(|e| e.to_string())?;
        self.vcores.recharge(&problem);
        Ok(())
    }

    /// One balancer step, with the step fraction applied; records it.
    pub fn step(&mut self) {
        let before_owners = self.vcores.owners().to_vec();
        let before_pos = self.vcores.positions().to_vec();
        let before_w = self.vcores.weights().to_vec();
        let problem = Problem::new(self.grid, &self.loads, self.vcores.len()).expect("validated");
        self.method.step(&problem, &mut self.vcores);
        let f = self.settings.step_fraction;
        if f < 1.0 {
            // Between two finite states: finite, or refused with the step's own state kept.
            let _ = self.vcores.update(&problem, |pos, w| {
                for (p, b) in pos.iter_mut().zip(&before_pos) {
                    for d in 0..3 {
                        p[d] = b[d] + f * (p[d] - b[d]);
                    }
                }
                for (x, b) in w.iter_mut().zip(&before_w) {
                    *x = b + f * (*x - b);
                }
            });
        }
        self.arrows =
            self.vcores.positions().iter().zip(&before_pos).map(|(a, b)| [a[0] - b[0], a[1] - b[1]]).collect();
        let moved = metrics::migrations(&before_owners, self.vcores.owners());
        self.record(moved);
    }

    /// A new vCore at `p`, splitting the cell it lands in (it takes that cell's weight).
    fn add_vcore(&mut self, p: Point) -> Result<(), String> {
        let k = crate::scene::box_at(&self.grid, p)
            .ok_or_else(|| format!("({:.1}, {:.1}, {:.1}) is outside the domain", p[0], p[1], p[2]))?;
        let host = self.vcores.owners()[k] as usize;
        let mut positions = self.vcores.positions().to_vec();
        let mut weights = self.vcores.weights().to_vec();
        positions.push(self.on_grid(p));
        weights.push(weights[host]);
        let problem = Problem::new(self.grid, &self.loads, positions.len()).map_err(|e| e.to_string())?;
        self.vcores = VCores::new(&problem, positions, weights).map_err(|e| e.to_string())?;
        self.settings.vcores = self.vcores.len();
        self.method.reset();
        self.arrows.clear();
        Ok(())
    }

    fn move_vcore(&mut self, i: usize, p: Point) -> Result<(), String> {
        if i >= self.vcores.len() {
            return Err(format!("no vCore {i}: there are {}", self.vcores.len()));
        }
        // On a 2D grid a vCore keeps its depth within the one layer.
        let keep_depth = self.grid.nz() == 1;
        let problem = Problem::new(self.grid, &self.loads, self.vcores.len()).expect("validated");
        self.vcores
            .update(&problem, |pos, _| pos[i] = [p[0], p[1], if keep_depth { pos[i][2] } else { p[2] }])
            .map_err(|e| e.to_string())?;
        self.method.reset();
        Ok(())
    }

    /// `p` with its depth at the middle of a 2D grid's one layer.
    fn on_grid(&self, p: Point) -> Point {
        if self.grid.nz() == 1 {
            [p[0], p[1], 0.5]
        } else {
            p
        }
    }

    fn paint(&mut self, at: Point, radius: f64, amount: f64) -> Result<(), String> {
        if !(radius.is_finite() && radius > 0.0 && amount.is_finite()) {
            return Err(format!("paint needs a finite radius > 0 and a finite amount (got {radius}, {amount})"));
        }
        let at = self.on_grid(at);
        for k in 0..self.grid.len() {
            let c = self.grid.centre(k);
            let d2 = (0..3).map(|d| (c[d] - at[d]).powi(2)).sum::<f64>();
            if d2 <= radius * radius {
                self.painted[k] = (self.painted[k] + amount).max(-self.base[k]);
            }
        }
        self.refresh_loads()
    }

    fn drift(&mut self) -> Result<(), String> {
        if let Some(p) = self.perlin {
            let next = p.smooth(self.settings.drift_speed);
            self.base = perlin_loads(&next, &self.grid);
            self.perlin = Some(next);
            self.refresh_loads()?;
        }
        Ok(())
    }

    fn rough(&mut self) -> Result<(), String> {
        let p = self.perlin.ok_or("a rough transition needs the Perlin load")?;
        let next = p.rough();
        self.base = perlin_loads(&next, &self.grid);
        self.perlin = Some(next);
        self.refresh_loads()
    }
}

impl Simulation for Model {
    fn tick(&mut self) -> Result<bool, String> {
        let drifting = self.settings.drift && self.perlin.is_some();
        if drifting {
            self.drift()?;
        }
        let work = drifting || !self.converged();
        if work {
            self.step();
        }
        Ok(work)
    }

    fn apply(&mut self, command: Command) -> Result<(), String> {
        match command {
            Command::Step => self.step(),
            Command::Rough => self.rough()?,
            Command::Drift { on, speed } => {
                if !(speed.is_finite() && speed >= 0.0) {
                    return Err(format!("drift speed must be finite and ≥ 0, got {speed}"));
                }
                self.settings.drift = on;
                self.settings.drift_speed = speed;
            }
            Command::Method(name) => {
                self.method = pbs::methods::by_name(&name).map_err(|e| e.to_string())?;
                self.settings.method = name;
            }
            Command::StepFraction(f) => {
                if !(f > 0.0 && f <= 1.0) {
                    return Err(format!("step fraction must be in (0, 1], got {f}"));
                }
                self.settings.step_fraction = f;
            }
            Command::AddVCore(p) => self.add_vcore(p)?,
            Command::MoveVCore(i, p) => self.move_vcore(i, p)?,
            Command::Paint { at, radius, amount } => self.paint(at, radius, amount)?,
            Command::ClearPaint => {
                self.painted.iter_mut().for_each(|p| *p = 0.0);
                self.refresh_loads()?;
            }
        }
        Ok(())
    }

    fn scene(&self) -> Scene {
        Scene {
            kind: SceneKind::Balancer,
            grid: self.grid,
            loads: self.loads.clone(),
            owners: self.vcores.owners().to_vec(),
            markers: self.vcores.positions().to_vec(),
            arrows: self.arrows.clone(),
            history: self.history.recent(),
            bars: self.vcores.charges().to_vec(),
            bars_label: "charge per vCore",
            status: format!(
                "{} · step {} · max_avg {:.4} (bound {:.4}) · {}{}",
                self.settings.method,
                self.history.steps() - 1,
                self.vcores.max_avg(),
                self.problem().lower_bound(),
                if self.converged() { "converged" } else { "balancing" },
                crate::raster::layers_note(&self.grid).map_or(String::new(), |n| format!(" · {n}"))
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Settings {
        Settings { nx: 40, ny: 30, vcores: 6, ..Settings::default() }
    }

    #[test]
    fn a_run_converges_and_records_every_step() {
        let mut m = Model::new(small()).unwrap();
        let mut ticks = 0;
        while m.tick().unwrap() {
            ticks += 1;
            assert!(ticks < 200, "did not converge");
        }
        assert!(m.converged());
        assert_eq!(m.history().steps(), ticks + 1);
        let s = m.scene();
        assert_eq!(s.owners, m.vcores().owners());
        assert_eq!(s.markers.len(), 6);
        assert!((s.bars.iter().sum::<f64>() - m.loads().iter().sum::<f64>()).abs() < 1e-6);
    }

    /// Where one box outweighs a vCore's share, the criterion is relative to the lower bound
    /// that box sets (3.25 here), not to 1: the run still ends converged, within 5 % of it.
    #[test]
    fn a_hot_box_map_converges_to_its_lower_bound() {
        let path = std::env::temp_dir().join(format!("pbs-visual-hot-{}.csv", std::process::id()));
        let rows: Vec<String> = (0..4)
            .map(|j| (0..6).map(|i| if (i, j) == (2, 1) { "100" } else { "1" }).collect::<Vec<_>>().join(","))
            .collect();
        std::fs::write(&path, rows.join("\n") + "\n").unwrap();
        let mut m = Model::new(Settings { vcores: 4, load: LoadKind::Csv(path.clone()), ..small() }).unwrap();
        std::fs::remove_file(&path).ok();
        assert_eq!(m.problem().lower_bound(), 100.0 / (123.0 / 4.0));
        let mut ticks = 0;
        while m.tick().unwrap() {
            ticks += 1;
            assert!(ticks < 200, "did not converge");
        }
        assert!(m.converged() && m.vcores().max_avg() <= 1.05 * 3.25 + 1e-12, "max_avg {}", m.vcores().max_avg());
    }

    #[test]
    fn same_settings_same_run() {
        let run = || {
            let mut m = Model::new(Settings { drift: true, ..small() }).unwrap();
            for _ in 0..5 {
                m.tick().unwrap();
            }
            (m.vcores().owners().to_vec(), m.history().clone())
        };
        assert_eq!(run(), run());
    }

    #[test]
    fn drift_keeps_the_balancer_working_and_changes_the_map() {
        let mut m = Model::new(Settings { drift: true, drift_speed: 1.0, ..small() }).unwrap();
        let first = m.loads().to_vec();
        for _ in 0..3 {
            assert!(m.tick().unwrap(), "a drifting map is worked on every tick");
        }
        assert_ne!(first, m.loads());
    }

    /// A 3D grid: Perlin loads that differ from layer to layer, balanced to convergence;
    /// vCores added and moved in depth; paint a ball; a CSV map of layers read as a cube.
    #[test]
    fn a_3d_grid_balances_and_takes_vcores_and_paint_in_depth() {
        let mut m = Model::new(Settings { nx: 12, ny: 10, nz: 6, vcores: 8, ..Settings::default() }).unwrap();
        let layer = 120;
        assert_eq!(m.loads().len(), 6 * layer);
        let perlin = PerlinMap::with_seed(PerlinMap::noise_seed(1));
        assert_eq!(m.loads(), perlin.loads_3d(&m.grid), "3D noise");
        let flat = Model::new(Settings { nx: 12, ny: 10, ..Settings::default() }).unwrap();
        assert_eq!(flat.loads(), perlin.loads(&flat.grid), "2D noise on a 2D grid, as every other tool draws it");
        assert_ne!(m.loads()[..layer], m.loads()[layer..2 * layer], "3D noise: the layers differ");
        let mut ticks = 0;
        while m.tick().unwrap() {
            ticks += 1;
            assert!(ticks < 300, "did not converge");
        }
        m.apply(Command::AddVCore([3.5, 4.5, 4.5])).unwrap();
        assert_eq!(m.scene().markers[8], [3.5, 4.5, 4.5]);
        assert_eq!(m.vcores().owners()[m.grid.index(3, 4, 4)], 8, "the new vCore owns the box it was put on");
        m.apply(Command::MoveVCore(8, [6.0, 2.0, 1.25])).unwrap();
        assert_eq!(m.scene().markers[8], [6.0, 2.0, 1.25], "a move in 3D takes the depth too");
        assert!(m.apply(Command::AddVCore([3.5, 4.5, 6.0])).unwrap_err().contains("outside"));
        let before = m.loads().to_vec();
        m.apply(Command::Paint { at: [5.5, 5.5, 2.5], radius: 1.0, amount: 1.0 }).unwrap();
        let changed: Vec<usize> = (0..before.len()).filter(|&k| m.loads()[k] != before[k]).collect();
        let ball: Vec<usize> = (0..before.len())
            .filter(|&k| {
                let c = m.grid.centre(k);
                (c[0] - 5.5).powi(2) + (c[1] - 5.5).powi(2) + (c[2] - 2.5).powi(2) <= 1.0
            })
            .collect();
        assert_eq!((changed.len(), &changed), (7, &ball), "the box at the centre and its six neighbours");
        // A CSV map of layers brings its own cube, whatever the settings' size.
        let path = std::env::temp_dir().join(format!("pbs-visual-cube-{}.csv", std::process::id()));
        std::fs::write(&path, "1,2,3\n4,5,6\n\n7,8,9\n1,1,1\n").unwrap();
        let csv = Model::new(Settings { vcores: 3, load: LoadKind::Csv(path.clone()), ..small() }).unwrap();
        std::fs::remove_file(&path).ok();
        assert_eq!(([csv.grid.nx(), csv.grid.ny(), csv.grid.nz()], csv.loads()[9]), ([3, 2, 2], 1.0));
    }

    #[test]
    fn vcores_can_be_added_moved_and_load_painted() {
        let mut m = Model::new(small()).unwrap();
        m.apply(Command::AddVCore([10.5, 10.5, 0.5])).unwrap();
        assert_eq!(m.vcores().len(), 7);
        assert_eq!(m.scene().markers[6], [10.5, 10.5, 0.5]);
        let k = Grid::new(40, 30).unwrap().index(10, 10, 0);
        assert_eq!(m.vcores().owners()[k], 6, "the new vCore owns the box it was put on");
        m.apply(Command::MoveVCore(6, [30.25, 5.75, 0.5])).unwrap();
        assert_eq!(m.scene().markers[6], [30.25, 5.75, 0.5]);
        let before: f64 = m.loads().iter().sum();
        m.apply(Command::Paint { at: [20.0, 15.0, 0.5], radius: 3.0, amount: 2.0 }).unwrap();
        let after: f64 = m.loads().iter().sum();
        assert!(after > before + 20.0, "{before} → {after}");
        m.apply(Command::Paint { at: [20.0, 15.0, 0.5], radius: 3.0, amount: -100.0 }).unwrap();
        assert!(m.loads().iter().all(|q| *q >= 0.0), "erasing never makes a load negative");
        let erased = (0..m.grid.len()).filter(|&k| m.loads()[k] == 0.0).count();
        assert_eq!(
            erased, 32,
            "erasing leaves exactly nothing on the 32 boxes whose centres lie within 3 of the corner"
        );
        m.apply(Command::ClearPaint).unwrap();
        assert!((m.loads().iter().sum::<f64>() - before).abs() < 1e-9);
        assert!((m.vcores().charges().iter().sum::<f64>() - before).abs() < 1e-6);
    }

    /// With a step fraction f, a step moves every vCore and weight f of the way the method's own
    /// step would: the run with f = 1 from the same start gives the whole way. The arrows are
    /// the moves, the record counts the boxes whose owner changed.
    #[test]
    fn a_fraction_of_a_step_goes_that_fraction_of_the_way() {
        let start = || Model::new(Settings { load: LoadKind::Case(Case::Disc), ..small() }).unwrap();
        let (mut whole, mut half) = (start(), start());
        // One whole step each first, so that the fraction applies to weights away from zero.
        whole.step();
        half.step();
        assert!(half.vcores().weights().iter().any(|&x| x != 0.0));
        half.apply(Command::StepFraction(0.5)).unwrap();
        assert_eq!(half.settings().step_fraction, 0.5);
        for refused in [0.0, -0.5, 1.5, f64::NAN] {
            assert!(half.apply(Command::StepFraction(refused)).unwrap_err().contains("(0, 1]"), "{refused}");
        }
        assert_eq!(half.settings().step_fraction, 0.5, "a refused fraction leaves the last one");
        let (pos, w, owners) =
            (half.vcores().positions().to_vec(), half.vcores().weights().to_vec(), half.vcores().owners().to_vec());
        whole.step();
        half.step();
        let (full_pos, full_w) = (whole.vcores().positions(), whole.vcores().weights());
        assert_ne!(full_pos, &pos[..], "the whole step moves");
        for i in 0..pos.len() {
            for d in 0..2 {
                let want = pos[i][d] + 0.5 * (full_pos[i][d] - pos[i][d]);
                assert!((half.vcores().positions()[i][d] - want).abs() < 1e-9, "vCore {i}, axis {d}");
                let arrow = half.vcores().positions()[i][d] - pos[i][d];
                assert!((half.scene().arrows[i][d] - arrow).abs() < 1e-12);
            }
            assert!((half.vcores().weights()[i] - (w[i] + 0.5 * (full_w[i] - w[i]))).abs() < 1e-9);
        }
        let moved = metrics::migrations(&owners, half.vcores().owners());
        assert_eq!(half.history().records().last().unwrap().migrations, moved);
        assert_eq!(half.history().steps(), 3);
    }

    /// A converged run that nothing drives is not stepped by a tick; a command steps it anyway;
    /// the status line says where it stands.
    #[test]
    fn ticks_stop_at_convergence_and_the_status_says_so() {
        let mut m = Model::new(small()).unwrap();
        assert!(m.scene().status.ends_with("balancing"), "{}", m.scene().status);
        for tick in 0.. {
            assert!(tick < 200, "did not converge");
            if !m.tick().unwrap() {
                break;
            }
        }
        let steps = m.history().steps();
        assert!(!m.tick().unwrap());
        assert_eq!(m.history().steps(), steps, "a tick after convergence does nothing");
        let bound = m.problem().lower_bound();
        assert!(m.vcores().max_avg() <= (1.0 + TOL) * bound);
        let status = m.scene().status;
        let want = format!(
            "{} · step {} · max_avg {:.4} (bound {bound:.4}) · converged",
            pbs::methods::DEFAULT,
            steps - 1,
            m.vcores().max_avg()
        );
        assert_eq!(status, want);
        m.apply(Command::Step).unwrap();
        assert_eq!(m.history().steps(), steps + 1);
        // Drift turned on drives it again, at the speed asked for.
        m.apply(Command::Drift { on: true, speed: 2.5 }).unwrap();
        assert_eq!((m.settings().drift, m.settings().drift_speed), (true, 2.5));
        assert!(m.tick().unwrap());
        assert_eq!(m.history().steps(), steps + 2);
        assert!(m.apply(Command::Drift { on: true, speed: -1.0 }).unwrap_err().contains("drift speed"));
        // A method by name.
        let other = pbs::methods::NAMES.iter().find(|n| **n != pbs::methods::DEFAULT).unwrap();
        m.apply(Command::Method(other.to_string())).unwrap();
        assert_eq!(m.settings().method, *other);
        assert!(m.scene().status.starts_with(other));
        assert!(m.apply(Command::Method("metis".into())).unwrap_err().contains("metis"));
    }

    /// Paint adds its amount to exactly the boxes whose centre is within the radius; a vCore is
    /// added only inside the domain.
    #[test]
    fn paint_reaches_the_boxes_within_its_radius() {
        let mut m = Model::new(small()).unwrap();
        let before = m.loads().to_vec();
        m.apply(Command::Paint { at: [20.5, 15.5, 0.5], radius: 2.0, amount: 2.0 }).unwrap();
        let grid = Grid::new(40, 30).unwrap();
        let painted: Vec<usize> = (0..grid.len()).filter(|&k| m.loads()[k] != before[k]).collect();
        // Box (20, 15) and the 12 whose centres are 1, √2 or 2 boxes from its own: the circle's
        // edge included.
        let mut want: Vec<usize> = (18..=22)
            .flat_map(|i: i64| (13..=17).map(move |j: i64| (i, j)))
            .filter(|(i, j)| (i - 20).pow(2) + (j - 15).pow(2) <= 4)
            .map(|(i, j)| grid.index(i as usize, j as usize, 0))
            .collect();
        want.sort();
        assert_eq!(want.len(), 13);
        assert_eq!(painted, want);
        assert!(painted.iter().all(|&k| (m.loads()[k] - before[k] - 2.0).abs() < 1e-12));
        assert!(m.apply(Command::Paint { at: [1.0, 1.0, 0.5], radius: 0.0, amount: 1.0 }).is_err());
        assert!(m.apply(Command::Paint { at: [1.0, 1.0, 0.5], radius: 1.0, amount: f64::INFINITY }).is_err());
        assert!(m.apply(Command::AddVCore([40.0, 5.0, 0.5])).unwrap_err().contains("outside"));
        m.apply(Command::AddVCore([39.9, 29.9, 0.5])).unwrap();
        assert_eq!(m.settings().vcores, 7);
    }

    #[test]
    fn load_names_are_read_back() {
        for name in ["uniform", "line", "disc", "random", "perlin", "maps/x.csv"] {
            assert_eq!(LoadKind::parse(name).unwrap().name(), name);
        }
        assert_eq!(LoadKind::parse("perlin"), Ok(LoadKind::Perlin));
        assert_eq!(LoadKind::parse("disc"), Ok(LoadKind::Case(Case::Disc)));
        let e = LoadKind::parse("x.txt").unwrap_err();
        assert!(e.contains("unknown load `x.txt`"), "{e}");
    }

    #[test]
    fn bad_input_is_refused_with_a_reason() {
        let e = |s: Settings| Model::new(s).err().unwrap();
        assert!(e(Settings { vcores: 0, ..small() }).contains("vCore"));
        assert!(e(Settings { vcores: 5000, ..small() }).contains("5000"));
        assert!(e(Settings { nx: 0, ..small() }).to_lowercase().contains("empty"));
        assert!(e(Settings { method: "metis".into(), ..small() }).contains("metis"));
        assert!(e(Settings { step_fraction: 0.0, ..small() }).contains("step fraction"));
        assert!(e(Settings { load: LoadKind::Csv("/nonexistent.csv".into()), ..small() }).contains("nonexistent"));
        assert!(LoadKind::parse("bogus").is_err());
        let mut m = Model::new(Settings { load: LoadKind::Case(Case::Disc), ..small() }).unwrap();
        assert!(m.apply(Command::Rough).unwrap_err().contains("Perlin"));
        assert!(m.apply(Command::AddVCore([-1.0, 2.0, 0.5])).unwrap_err().contains("outside"));
        assert!(m.apply(Command::MoveVCore(99, [1.0, 1.0, 0.5])).unwrap_err().contains("99"));
        assert!(m.apply(Command::Paint { at: [1.0, 1.0, 0.5], radius: f64::NAN, amount: 1.0 }).is_err());
        assert!(m.apply(Command::StepFraction(1.5)).is_err());
    }
}
