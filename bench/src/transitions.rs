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
    /// that mapping would have moved, its cells numbered after the current ones they overlap
    /// most (their own ids are random: unmatched, nearly every box would count as moved)
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
    /// boxes that a from-scratch balancing of the same map would have moved (if asked), its
    /// cells numbered after the current ones they overlap most
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scratch_migrations: Option<AvgMax>,
}

/// Runs the transitions, calling `progress` after each.
pub fn run(setup: &Setup, mut progress: impl FnMut()) -> pbs::Result<TransitionsReport> {
    let grid = Grid::new(setup.nx, setup.ny)?;
    pbs::check_memory("balancer state", grid.len(), pbs::BALANCER_BYTES_PER_BOX)?;
    let mut map = PerlinMap::with_seed(PerlinMap::noise_seed(setup.seed));
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
            // mapping would have replaced `before` by `fresh`, each cell on the thread that
            // holds most of it.
            let fresh = pbs::metrics::match_labels(&before, fresh.owners(), setup.vcores)?;
            scratch.push(pbs::metrics::migrations(&before, &fresh) as f64);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The report is the warm-started rebalancings of the changed maps, replayed here from the
    /// same pieces: each trial's steps, final max_avg and moved boxes, their averages, extremes
    /// and medians, the converged share, and (asked for) what a balancing from scratch would
    /// have moved.
    #[test]
    fn the_report_is_the_warm_started_rebalancings_of_the_changed_maps() {
        for kind in [Kind::Rough, Kind::Smooth] {
            let mut setup = Setup::square(kind, "power-cells", 14, 4, 5);
            (setup.seed, setup.drift, setup.compare_scratch) = (3, 0.7, true);
            setup.options = StopRule { max_steps: 60, tol: 0.02 };
            let mut calls = 0;
            let start = std::time::Instant::now();
            let report = run(&setup, || calls += 1).unwrap();
            let wall_ms = start.elapsed().as_secs_f64() * 1e3;

            let grid = Grid::new(14, 14).unwrap();
            let mut map = PerlinMap::with_seed(3);
            let mut balancer = methods::by_name("power-cells").unwrap();
            let first = map.loads(&grid);
            let problem = Problem::new(grid, &first, 4).unwrap();
            let mut vcores = VCores::random(&problem, 3);
            balance(balancer.as_mut(), &problem, &mut vcores, setup.options, |_| {});
            let (mut steps, mut max_avg, mut moved, mut scratch, mut converged) = (vec![], vec![], vec![], vec![], 0);
            let mut renamed = false;
            for trial in 0..5u64 {
                map = if kind == Kind::Rough { map.rough() } else { map.smooth(0.7) };
                let loads = map.loads(&grid);
                let problem = Problem::new(grid, &loads, 4).unwrap();
                let before = vcores.owners().to_vec();
                let out = balance(balancer.as_mut(), &problem, &mut vcores, setup.options, |_| {});
                assert_eq!(out.migrations, pbs::metrics::migrations(&before, vcores.owners()));
                steps.push(out.steps as f64);
                max_avg.push(out.max_avg);
                moved.push(out.migrations as f64);
                converged += usize::from(out.converged);
                let mut fresh = VCores::random(&problem, 3 + 1 + trial);
                balance(methods::by_name("power-cells").unwrap().as_mut(), &problem, &mut fresh, setup.options, |_| {});
                let matched = pbs::metrics::match_labels(&before, fresh.owners(), 4).unwrap();
                renamed |= matched != fresh.owners();
                scratch.push(pbs::metrics::migrations(&before, &matched) as f64);
            }
            assert!(renamed, "{kind:?}: the test needs a fresh balancing whose ids are not the current ones");
            let ctx = format!("{kind:?}: {report:?}");
            let (s, m, a, sc) = (Stats::of(&steps), Stats::of(&moved), Stats::of(&max_avg), Stats::of(&scratch));
            assert_eq!(calls, 5, "{ctx}");
            assert_eq!(
                (report.kind, report.method.as_str(), report.nx, report.ny, report.vcores, report.trials),
                (kind, "power-cells", 14, 14, 4, 5)
            );
            assert_eq!(report.converged_fraction, converged as f64 / 5.0, "{ctx}");
            assert_eq!(report.steps, AvgMinMax { avg: s.avg, min: s.min, max: s.max }, "{ctx}");
            assert_eq!(report.steps_median, s.median, "{ctx}");
            assert_eq!(report.max_avg, AvgMax { avg: a.avg, max: a.max }, "{ctx}");
            assert_eq!(report.migrations, AvgMax { avg: m.avg, max: m.max }, "{ctx}");
            assert_eq!(report.scratch_migrations, Some(AvgMax { avg: sc.avg, max: sc.max }), "{ctx}");
            assert!(report.ms.min <= report.ms_median && report.ms_median <= report.ms.max, "{ctx}");
            assert!(report.ms.min <= report.ms.avg && report.ms.avg <= report.ms.max && report.ms.min >= 0.0, "{ctx}");
            assert!(
                5.0 * report.ms.avg <= wall_ms && 5.0 * report.ms.avg > 1e-4 * wall_ms,
                "{ctx}: five rebalancings in milliseconds, within the {wall_ms} ms run"
            );
            assert!(s.max > 0.0 && m.max > 0.0, "{ctx}: the test needs trials that move boxes");
        }
    }

    /// No trial: nothing failed to converge; without the comparison there is no scratch
    /// column; bad names and sizes are errors that say what is wrong.
    #[test]
    fn edge_settings_and_the_table() {
        let none = run(&Setup::square(Kind::Smooth, "power-cells", 6, 2, 0), || {}).unwrap();
        assert_eq!((none.converged_fraction, none.scratch_migrations), (1.0, None));
        let err = run(&Setup::square(Kind::Smooth, "paper-eq9", 6, 2, 1), || {}).unwrap_err().to_string();
        assert!(err.contains("paper-eq9"), "{err}");
        assert!(run(&Setup::square(Kind::Smooth, "power-cells", 6, 40, 1), || {}).is_err(), "more vCores than boxes");
        assert!(run(&Setup::square(Kind::Smooth, "power-cells", 1 << 20, 2, 1), || {}).is_err(), "too large to hold");
        assert_eq!(Kind::from_name("rough"), Ok(Kind::Rough));
        assert_eq!(Kind::from_name("smooth"), Ok(Kind::Smooth));
        assert!(Kind::from_name("ragged").unwrap_err().contains("\"ragged\""));

        let mut setup = Setup::square(Kind::Rough, "power-cells", 8, 3, 2);
        let plain = run(&setup, || {}).unwrap();
        setup.compare_scratch = true;
        let with = run(&setup, || {}).unwrap();
        let t = table(std::slice::from_ref(&plain));
        assert_eq!(t.header.len(), 16);
        let both = table(&[plain.clone(), with.clone()]);
        assert_eq!(both.header.last().map(String::as_str), Some("from scratch avg"));
        assert_eq!(both.rows[0].last().map(String::as_str), Some("-"));
        assert_eq!(both.rows[1].last(), Some(&format!("{:.1}", with.scratch_migrations.unwrap().avg)));
        let amm = |avg: f64, min: f64, max: f64| AvgMinMax { avg, min, max };
        let known = TransitionsReport {
            kind: Kind::Smooth,
            method: "power-cells".into(),
            nx: 8,
            ny: 6,
            vcores: 3,
            trials: 4,
            converged_fraction: 0.75,
            steps: amm(2.5, 1.0, 6.0),
            ms: amm(0.125, 0.0625, 0.5),
            max_avg: AvgMax { avg: 1.015625, max: 1.03125 },
            migrations: AvgMax { avg: 3.25, max: 7.0 },
            steps_median: 2.0,
            ms_median: 0.1,
            scratch_migrations: None,
        };
        let cells = [
            "smooth",
            "power-cells",
            "8x6",
            "3",
            "4",
            "75.0%",
            "2.50",
            "1",
            "6",
            "0.125",
            "0.062",
            "0.500",
            "0.100",
            "1.0156",
            "1.0312",
            "3.2",
        ];
        assert_eq!(t.rows[0].len(), 16);
        assert_eq!(table(&[known]).rows[0], cells.map(String::from));
    }
}
