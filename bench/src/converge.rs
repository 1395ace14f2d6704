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
                ("perlin".to_string(), g, PerlinMap::with_seed(PerlinMap::noise_seed(seed)).loads(&g))
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
    /// grid depth: 1 but for a CSV map of layers
    pub nz: usize,
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
    /// final cut between loaded boxes ([`pbs::metrics::loaded_edge_cut`]: the faces md
    /// exchanges across)
    pub loaded_edge_cut: usize,
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
        nz: grid.nz(),
        vcores,
        steps: out.steps,
        converged: out.converged,
        max_avg: out.max_avg,
        lower_bound: out.lower_bound,
        dol_max: out.dol_max,
        dol_min: out.dol_min,
        edge_cut: pbs::metrics::edge_cut(&grid, state.owners()),
        loaded_edge_cut: pbs::metrics::loaded_edge_cut(&grid, loads, state.owners()),
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
        "loaded_cut",
        "ms",
    ]);
    for r in rows {
        t.row(vec![
            r.case.clone(),
            r.method.clone(),
            if r.nz > 1 { format!("{}x{}x{}", r.nx, r.ny, r.nz) } else { format!("{}x{}", r.nx, r.ny) },
            r.vcores.to_string(),
            r.steps.to_string(),
            if r.converged { "yes".into() } else { "NO".into() },
            format!("{:.4}", r.max_avg),
            format!("{:.4}", r.lower_bound),
            format!("{:+.4}", r.dol_max),
            format!("{:+.4}", r.dol_min),
            r.edge_cut.to_string(),
            r.loaded_edge_cut.to_string(),
            format!("{:.2}", r.elapsed_ms),
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row's figures are those of the partition the run ends with, recomputed here from its
    /// owners: max_avg, the bound, the DOLs, the edge cut; `converged` is the tolerance test on
    /// them, and `on_step` saw the start and then each of the `steps` steps.
    #[test]
    fn a_row_is_the_partition_it_ends_with() {
        let grid = Grid::new(12, 9).unwrap();
        let loads = loadmap::static_case(Case::Disc, &grid, 3);
        for (method, tol, max_steps) in [("power-cells", 0.05, 500), ("paper-eq7", 0.05, 40), ("paper-eq7", -1.0, 7)] {
            let mut seen = Vec::new();
            let rule = StopRule { max_steps, tol };
            let start = std::time::Instant::now();
            let (row, state) = run_one("disc", grid, &loads, 5, method, rule, 9, |s| seen.push(s.step)).unwrap();
            let wall_ms = start.elapsed().as_secs_f64() * 1e3;
            let charges = pbs::metrics::charges(state.owners(), &loads, 5);
            let mean = loads.iter().sum::<f64>() / 5.0;
            let bound = pbs::metrics::lower_bound_from(loads.iter().cloned().fold(0.0, f64::max), mean);
            let (dol_max, dol_min) = pbs::metrics::dol_extremes(&charges);
            let ctx = format!("{method} tol {tol}: {row:?}");
            assert_eq!(
                (row.case.as_str(), row.method.as_str(), row.nx, row.ny, row.vcores),
                ("disc", method, 12, 9, 5)
            );
            assert!((row.max_avg - pbs::metrics::max_avg(&charges)).abs() < 1e-9, "{ctx}");
            assert!((row.lower_bound - bound).abs() < 1e-9, "{ctx}");
            assert!((row.dol_max - dol_max).abs() < 1e-9 && (row.dol_min - dol_min).abs() < 1e-9, "{ctx}");
            assert_eq!(row.edge_cut, pbs::metrics::edge_cut(&grid, state.owners()), "{ctx}");
            assert_eq!(row.loaded_edge_cut, pbs::metrics::loaded_edge_cut(&grid, &loads, state.owners()), "{ctx}");
            assert_eq!(row.converged, row.max_avg <= (1.0 + tol) * row.lower_bound, "{ctx}");
            assert_eq!(seen, (0..=row.steps).collect::<Vec<_>>(), "{ctx}: the start, then every step");
            assert!(row.steps <= max_steps, "{ctx}");
            // The balancing is most of run_one's time, in milliseconds.
            assert!(row.elapsed_ms <= wall_ms && row.elapsed_ms > 1e-3 * wall_ms, "{ctx}: {wall_ms} ms in all");
            if tol < 0.0 {
                assert!(!row.converged && row.steps > 0, "{ctx}");
            }
            // The same seed, the same run.
            let again = run_one("disc", grid, &loads, 5, method, rule, 9, |_| {}).unwrap();
            assert_eq!((again.0.steps, again.1.owners()), (row.steps, state.owners()), "{ctx}");
        }
        assert!(run_one("disc", grid, &loads, 5, "paper-eq9", StopRule::default(), 9, |_| {}).is_err());
    }

    /// Every (source, method) pair in order, each map drawn as its source says, progress once
    /// a row; the table's cells as their titles say.
    #[test]
    fn converge_runs_every_source_with_every_method_in_order() {
        let dir = std::env::temp_dir().join(format!("pbs-converge-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let csv = dir.join("map.csv");
        let csv_grid = Grid::new(4, 3).unwrap();
        let csv_loads: Vec<f64> = (0..12).map(|i| 1.0 + i as f64).collect();
        std::fs::write(&csv, loadmap::to_csv(&csv_grid, &csv_loads)).unwrap();
        let given = Grid::new(5, 5).unwrap();
        let sources = [
            Source::Case(Case::Line),
            Source::Perlin,
            Source::Csv(csv.clone()),
            Source::Loads { name: "given".into(), grid: given, loads: vec![2.0; 25] },
        ];
        let grid = Grid::new(10, 8).unwrap();
        assert_eq!(
            sources[0].load(10, 8, 4).unwrap(),
            ("line".into(), grid, loadmap::static_case(Case::Line, &grid, 4))
        );
        assert_eq!(sources[1].load(10, 8, 4).unwrap(), ("perlin".into(), grid, PerlinMap::with_seed(4).loads(&grid)));
        assert_eq!(sources[2].load(10, 8, 4).unwrap(), (csv.display().to_string(), csv_grid, csv_loads.clone()));
        let methods = ["power-cells".to_string(), "paper-eq7".to_string()];
        let rule = StopRule { max_steps: 30, tol: 0.05 };
        let mut calls = 0;
        let rows = converge(&sources, &methods, 10, 8, 3, rule, 4, || calls += 1).unwrap();
        assert_eq!(calls, 8);
        let order: Vec<(String, &str, usize)> =
            rows.iter().map(|r| (r.case.clone(), r.method.as_str(), r.nx * r.ny)).collect();
        let csv_name = csv.display().to_string();
        let expected: Vec<(String, &str, usize)> =
            [("line".to_string(), 80), ("perlin".into(), 80), (csv_name, 12), ("given".into(), 25)]
                .into_iter()
                .flat_map(|(c, n)| [(c.clone(), "power-cells", n), (c, "paper-eq7", n)])
                .collect();
        assert_eq!(order, expected);
        // Each row is run_one's on that map from the same seed.
        let (line_row, _) =
            run_one("line", grid, &loadmap::static_case(Case::Line, &grid, 4), 3, "paper-eq7", rule, 4, |_| {})
                .unwrap();
        assert_eq!(
            (rows[1].steps, rows[1].edge_cut, rows[1].max_avg),
            (line_row.steps, line_row.edge_cut, line_row.max_avg)
        );
        assert!(rows.iter().all(|r| r.vcores == 3));
        // A map too large to hold is refused before it is drawn, and a bad CSV names its file.
        assert!(converge(&sources[..1], &methods, 1 << 20, 1 << 20, 3, rule, 4, || {}).is_err());
        let missing = Source::Csv(dir.join("absent.csv")).load(1, 1, 0).unwrap_err().to_string();
        assert!(missing.contains("absent.csv"), "{missing}");
        std::fs::remove_dir_all(dir).ok();

        let known = ConvergeRow {
            case: "line".into(),
            method: "power-cells".into(),
            nx: 10,
            ny: 8,
            nz: 1,
            vcores: 3,
            steps: 42,
            converged: true,
            max_avg: 1.03125,
            lower_bound: 1.0,
            dol_max: 0.25,
            dol_min: -0.125,
            edge_cut: 17,
            loaded_edge_cut: 9,
            elapsed_ms: 3.5,
        };
        let cells = [
            "line",
            "power-cells",
            "10x8",
            "3",
            "42",
            "yes",
            "1.0312",
            "1.0000",
            "+0.2500",
            "-0.1250",
            "17",
            "9",
            "3.50",
        ];
        assert_eq!(table(std::slice::from_ref(&known)).rows[0], cells.map(String::from));
        assert_eq!(table(&[ConvergeRow { converged: false, ..known.clone() }]).rows[0][5], "NO");
        assert_eq!(table(&[ConvergeRow { nz: 6, ..known }]).rows[0][2], "10x8x6", "a CSV map of layers");
    }

    /// `--case` names: `all` is the four static cases and Perlin; an unknown name lists them.
    #[test]
    fn case_names_resolve_to_their_sources() {
        assert_eq!(Source::from_case_name("all").unwrap().len(), Case::ALL.len() + 1);
        assert_eq!(Source::from_case_name("perlin").unwrap(), vec![Source::Perlin]);
        assert_eq!(Source::from_case_name("disc").unwrap(), vec![Source::Case(Case::Disc)]);
        let err = Source::from_case_name("ring").unwrap_err();
        assert!(err.contains("\"ring\"") && err.contains("perlin or all"), "{err}");
    }
}
