//! `pbs-bench transitions`: the paper's dynamic experiment. A Perlin map is balanced once,
//! then changed `trials` times — *rough* (a new map) or *smooth* (the map translated by a
//! fraction of a box) — and after each change the method restarts from where it stopped
//! (a warm start). Steps and time are those of the re-balancing alone.

use pbs::loadmap::PerlinMap;
use pbs::{balance, methods, Grid, Problem, StopRule, VCores};

use crate::table::Table;
use crate::Stats;

/// Which change between two balancings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A completely new map (new noise seed).
    Rough,
    /// The same map translated by `drift` boxes.
    Smooth,
}

impl Kind {
    /// Parses `rough` or `smooth`.
    pub fn from_name(s: &str) -> Result<Kind, String> {
        match s {
            "rough" => Ok(Kind::Rough),
            "smooth" => Ok(Kind::Smooth),
            _ => Err(format!("unknown transition kind {s:?}; expected rough or smooth")),
        }
    }
}

/// Settings of a transitions run.
#[derive(Debug, Clone, PartialEq)]
pub struct Setup {
    /// rough or smooth
    pub kind: Kind,
    /// method name
    pub method: String,
    /// grid width
    pub nx: usize,
    /// grid height
    pub ny: usize,
    /// vCores
    pub vcores: usize,
    /// number of transitions
    pub trials: usize,
    /// seed of the first map and of the vCore positions
    pub seed: u64,
    /// translation per smooth transition, in boxes
    pub drift: f64,
    /// also balance every new map from scratch (fresh random vCores) and count how many boxes
    /// that mapping would have moved
    pub compare_scratch: bool,
    /// stopping rule
    pub options: StopRule,
}

impl Setup {
    /// `trials` transitions of `kind` with `method` on a `side × side` grid and `vcores`
    /// vCores, with the defaults the paper report uses: seed 1, drift 0.5 box, no scratch
    /// comparison, default stopping rule.
    pub fn square(kind: Kind, method: &str, side: usize, vcores: usize, trials: usize) -> Setup {
        Setup {
            kind,
            method: method.into(),
            nx: side,
            ny: side,
            vcores,
            trials,
            seed: 1,
            drift: 0.5,
            compare_scratch: false,
            options: StopRule::default(),
        }
    }
}

/// avg/max of a quantity.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct AvgMax {
    /// mean
    pub avg: f64,
    /// maximum
    pub max: f64,
}

/// avg/min/max of a quantity.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct AvgMinMax {
    /// mean
    pub avg: f64,
    /// minimum
    pub min: f64,
    /// maximum
    pub max: f64,
}

/// The docs/design.md object of `transitions`, plus medians and the optional scratch comparison.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TransitionsReport {
    /// rough or smooth
    pub kind: Kind,
    /// method name
    pub method: String,
    /// grid width
    pub nx: usize,
    /// grid height
    pub ny: usize,
    /// vCores
    pub vcores: usize,
    /// transitions run
    pub trials: usize,
    /// fraction of transitions that converged within `max_steps`
    pub converged_fraction: f64,
    /// steps per transition
    pub steps: AvgMinMax,
    /// milliseconds per transition
    pub ms: AvgMinMax,
    /// final max_avg per transition
    pub max_avg: AvgMax,
    /// boxes that changed owner per transition
    pub migrations: AvgMax,
    /// median steps
    pub steps_median: f64,
    /// median milliseconds
    pub ms_median: f64,
    /// boxes that a from-scratch balancing of the same map would have moved (if asked)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scratch_migrations: Option<AvgMax>,
}

/// Runs the transitions, calling `progress` after each.
pub fn run(setup: &Setup, mut progress: impl FnMut()) -> pbs::Result<TransitionsReport> {
    let grid = Grid::new(setup.nx, setup.ny)?;
    pbs::check_memory("balancer state", grid.len(), pbs::BALANCER_BYTES_PER_BOX)?;
    let mut map = PerlinMap::with_seed(setup.seed as u32);
    let mut balancer = methods::by_name(&setup.method)?;
    let first = map.loads(&grid);
    let problem = Problem::new(grid, &first, setup.vcores)?;
    let mut vcores = VCores::random(&problem, setup.seed);
    balance(balancer.as_mut(), &problem, &mut vcores, setup.options, |_| {});
    let (mut steps, mut ms, mut max_avg, mut migr, mut scratch) = (vec![], vec![], vec![], vec![], vec![]);
    let mut converged = 0usize;
    for trial in 0..setup.trials {
        map = match setup.kind {
            Kind::Rough => map.rough(),
            Kind::Smooth => map.smooth(setup.drift),
        };
        let loads = map.loads(&grid);
        let problem = Problem::new(grid, &loads, setup.vcores)?;
        let before = if setup.compare_scratch { vcores.owners().to_vec() } else { Vec::new() };
        let out = balance(balancer.as_mut(), &problem, &mut vcores, setup.options, |_| {});
        converged += usize::from(out.converged);
        steps.push(out.steps as f64);
        ms.push(out.elapsed.as_secs_f64() * 1e3);
        max_avg.push(out.max_avg);
        migr.push(out.migrations as f64);
        if setup.compare_scratch {
            let mut fresh = VCores::random(&problem, setup.seed.wrapping_add(1 + trial as u64));
            let mut b = methods::by_name(&setup.method)?;
            balance(b.as_mut(), &problem, &mut fresh, setup.options, |_| {});
            // The warm start moved `out.migrations` boxes away from `before`; a from-scratch
            // mapping would have replaced `before` by `fresh`.
            scratch.push(pbs::metrics::migrations(&before, fresh.owners()) as f64);
        }
        progress();
    }
    let amm = |xs: &[f64]| {
        let s = Stats::of(xs);
        AvgMinMax { avg: s.avg, min: s.min, max: s.max }
    };
    let am = |xs: &[f64]| {
        let s = Stats::of(xs);
        AvgMax { avg: s.avg, max: s.max }
    };
    Ok(TransitionsReport {
        kind: setup.kind,
        method: setup.method.clone(),
        nx: setup.nx,
        ny: setup.ny,
        vcores: setup.vcores,
        trials: setup.trials,
        converged_fraction: if setup.trials == 0 { 1.0 } else { converged as f64 / setup.trials as f64 },
        steps: amm(&steps),
        ms: amm(&ms),
        max_avg: am(&max_avg),
        migrations: am(&migr),
        steps_median: Stats::of(&steps).median,
        ms_median: Stats::of(&ms).median,
        scratch_migrations: setup.compare_scratch.then(|| am(&scratch)),
    })
}

/// The readable table of one or more reports (with the from-scratch comparison if measured).
pub fn table(reports: &[TransitionsReport]) -> Table {
    let scratch = reports.iter().any(|r| r.scratch_migrations.is_some());
    let mut header = vec![
        "kind",
        "method",
        "grid",
        "vcores",
        "trials",
        "converged",
        "steps avg",
        "min",
        "max",
        "ms avg",
        "min",
        "max",
        "ms median",
        "max_avg avg",
        "max",
        "migrations avg",
    ];
    if scratch {
        header.push("from scratch avg");
    }
    let mut t = Table::new(&header);
    for r in reports {
        let mut row = vec![
            format!("{:?}", r.kind).to_lowercase(),
            r.method.clone(),
            format!("{}x{}", r.nx, r.ny),
            r.vcores.to_string(),
            r.trials.to_string(),
            format!("{:.1}%", 100.0 * r.converged_fraction),
            format!("{:.2}", r.steps.avg),
            format!("{}", r.steps.min),
            format!("{}", r.steps.max),
            format!("{:.3}", r.ms.avg),
            format!("{:.3}", r.ms.min),
            format!("{:.3}", r.ms.max),
            format!("{:.3}", r.ms_median),
            format!("{:.4}", r.max_avg.avg),
            format!("{:.4}", r.max_avg.max),
            format!("{:.1}", r.migrations.avg),
        ];
        if scratch {
            row.push(r.scratch_migrations.map_or("-".into(), |m| format!("{:.1}", m.avg)));
        }
        t.row(row);
    }
    t
}
