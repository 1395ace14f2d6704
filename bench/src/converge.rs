//! `pbs-bench converge`: balance a load map from random vCore positions and report the
//! docs/design.md fields, one row per (map, method).

use std::path::PathBuf;

use pbs::loadmap::{self, Case, PerlinMap};
use pbs::{balance, methods, Grid, Problem, StepRecord, StopRule, VCores};

use crate::table::Table;

/// Where the loads come from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// One of the paper's static cases.
    Case(Case),
    /// A Perlin/fBm map with the run's seed.
    Perlin,
    /// A CSV load map (its own grid size).
    Csv(PathBuf),
    /// Loads given directly (used by tests and by the paper report).
    Loads {
        /// label for the `case` field
        name: String,
        /// the grid
        grid: Grid,
        /// one load per box
        loads: Vec<f64>,
    },
}

impl Source {
    /// The sources for a `--case` value (`all` = the four static cases and Perlin).
    pub fn from_case_name(name: &str) -> Result<Vec<Source>, String> {
        match name {
            "all" => Ok(Case::ALL.into_iter().map(Source::Case).chain([Source::Perlin]).collect()),
            "perlin" => Ok(vec![Source::Perlin]),
            other => Case::from_name(other)
                .map(|c| vec![Source::Case(c)])
                .ok_or_else(|| format!("unknown case {other:?}; expected uniform, line, disc, random, perlin or all")),
        }
    }

    /// Label and loads on a `nx × ny` grid (CSV maps bring their own grid). A generated map
    /// on a grid whose balancer state the system would refuse is refused before it is drawn.
    pub fn load(&self, nx: usize, ny: usize, seed: u64) -> pbs::Result<(String, Grid, Vec<f64>)> {
        if matches!(self, Source::Case(_) | Source::Perlin) {
            pbs::check_memory("balancer state", Grid::new(nx, ny)?.len(), pbs::BALANCER_BYTES_PER_BOX)?;
        }
        Ok(match self {
            Source::Case(c) => {
                let g = Grid::new(nx, ny)?;
                (c.name().to_string(), g, loadmap::static_case(*c, &g, seed))
            }
            Source::Perlin => {
                let g = Grid::new(nx, ny)?;
                ("perlin".to_string(), g, PerlinMap::with_seed(seed as u32).loads(&g))
            }
            Source::Csv(path) => {
                let (g, loads) = loadmap::read_csv(path)?;
                (path.display().to_string(), g, loads)
            }
            Source::Loads { name, grid, loads } => (name.clone(), *grid, loads.clone()),
        })
    }
}

/// One run, with the docs/design.md field names.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ConvergeRow {
    /// load map label
    pub case: String,
    /// method name
    pub method: String,
    /// grid width
    pub nx: usize,
    /// grid height
    pub ny: usize,
    /// vCores
    pub vcores: usize,
    /// steps taken
    pub steps: usize,
    /// whether `max_avg ≤ (1+tol) × lower_bound` was reached
    pub converged: bool,
    /// final max_avg
    pub max_avg: f64,
    /// `max(1, max_k q_k / m)`
    pub lower_bound: f64,
    /// final largest DOL
    pub dol_max: f64,
    /// final smallest DOL
    pub dol_min: f64,
    /// final edge cut
    pub edge_cut: usize,
    /// wall time of the run in milliseconds
    pub elapsed_ms: f64,
}

/// Balances `loads` with `method` from vCores at random positions drawn from `seed`, calling
/// `on_step` after every step.
#[allow(clippy::too_many_arguments)]
pub fn run_one(
    case: &str,
    grid: Grid,
    loads: &[f64],
    vcores: usize,
    method: &str,
    options: StopRule,
    seed: u64,
    on_step: impl FnMut(&StepRecord),
) -> pbs::Result<(ConvergeRow, VCores)> {
    let problem = Problem::new(grid, loads, vcores)?;
    let mut balancer = methods::by_name(method)?;
    let mut state = VCores::random(&problem, seed);
    let out = balance(balancer.as_mut(), &problem, &mut state, options, on_step);
    let row = ConvergeRow {
        case: case.to_string(),
        method: method.to_string(),
        nx: grid.nx(),
        ny: grid.ny(),
        vcores,
        steps: out.steps,
        converged: out.converged,
        max_avg: out.max_avg,
        lower_bound: out.lower_bound,
        dol_max: out.dol_max,
        dol_min: out.dol_min,
        edge_cut: pbs::metrics::edge_cut(&grid, state.owners()),
        elapsed_ms: out.elapsed.as_secs_f64() * 1e3,
    };
    Ok((row, state))
}

/// Every (source, method) pair, in order.
#[allow(clippy::too_many_arguments)]
pub fn converge(
    sources: &[Source],
    methods: &[String],
    nx: usize,
    ny: usize,
    vcores: usize,
    options: StopRule,
    seed: u64,
    mut progress: impl FnMut(),
) -> pbs::Result<Vec<ConvergeRow>> {
    let mut rows = Vec::new();
    for s in sources {
        let (name, grid, loads) = s.load(nx, ny, seed)?;
        for m in methods {
            rows.push(run_one(&name, grid, &loads, vcores, m, options, seed, |_| {})?.0);
            progress();
        }
    }
    Ok(rows)
}

/// The readable table of `converge`.
pub fn table(rows: &[ConvergeRow]) -> Table {
    let mut t = Table::new(&[
        "case",
        "method",
        "grid",
        "vcores",
        "steps",
        "converged",
        "max_avg",
        "bound",
        "dol_max",
        "dol_min",
        "edge_cut",
        "ms",
    ]);
    for r in rows {
        t.row(vec![
            r.case.clone(),
            r.method.clone(),
            format!("{}x{}", r.nx, r.ny),
            r.vcores.to_string(),
            r.steps.to_string(),
            if r.converged { "yes".into() } else { "NO".into() },
            format!("{:.4}", r.max_avg),
            format!("{:.4}", r.lower_bound),
            format!("{:+.4}", r.dol_max),
            format!("{:+.4}", r.dol_min),
            r.edge_cut.to_string(),
            format!("{:.2}", r.elapsed_ms),
        ]);
    }
    t
}
