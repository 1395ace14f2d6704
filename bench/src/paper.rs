//! `pbs-bench paper`: the paper's Tables 1–3 and Fig. 5, with our method (`power-cells`) and the
//! paper's (`paper-eq7`, our implementation of its eq. 7 on Voronoi cells) side by side and the
//! paper's published figures beside both. Writes `report.md`, `results.json` and PNG plots.
//!
//! The paper's times were measured on an Intel Xeon E5-2650 (2012); ours on whatever runs this
//! command. Step counts compare across machines; times only roughly, which is why the same run
//! also times our implementation of the paper's method on the same machine.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use pbs::loadmap::{self, Case};
use pbs::{methods, Grid, StepRecord, StopRule};

use crate::assign_cost::{self, AssignCost};
use crate::converge::{run_one, ConvergeRow};
use crate::shapes;
use crate::table::Table;
use crate::transitions::{self, Kind, Setup, TransitionsReport};
use pbs_plot::panels::{self, OwnerMap, Panel, Series, Stroke, PALETTE};
use pbs_plot::progress;

/// Our implementation of the paper's final method.
pub const PAPER_METHOD: &str = "paper-eq7";

/// The two methods every part of the report runs, ours first: the order of its rows, its
/// curves (ours solid, the paper's dashed) and of cells.png's rows.
const METHODS: [&str; 2] = [methods::DEFAULT, PAPER_METHOD];

/// How much to run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// transitions per Table 1 row for `power-cells` (the paper ran 1000)
    pub trials: usize,
    /// transitions per Table 2/3 row for `power-cells`
    pub large_trials: usize,
    /// transitions per row for the paper's method, which is far slower
    pub paper_trials: usize,
    /// step limit for the paper's method
    pub paper_max_steps: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { trials: 1000, large_trials: 100, paper_trials: 30, paper_max_steps: 3000 }
    }
}

impl Settings {
    /// A few trials of everything: for CI and a first look (seconds, not minutes).
    pub fn quick() -> Self {
        Settings { trials: 8, large_trials: 2, paper_trials: 2, paper_max_steps: 200 }
    }

    /// Every count at least 1: a row of zero transitions would print as converged in 0 steps,
    /// "∞ × the paper".
    pub fn check(&self) -> Result<(), String> {
        for (name, value) in [
            ("--trials", self.trials),
            ("--large-trials", self.large_trials),
            ("--paper-trials", self.paper_trials),
            ("--paper-max-steps", self.paper_max_steps),
        ] {
            if value == 0 {
                return Err(format!("{name} must be at least 1: a row of zero transitions or steps measures nothing"));
            }
        }
        Ok(())
    }
}

/// One published row of the paper's Tables 1–3: (vCores, side, kind, steps avg/min/max, ms avg/min/max).
type Published = (usize, usize, Kind, [f64; 3], [f64; 3]);

/// The paper's Tables 1–3 as printed.
pub const PUBLISHED: [Published; 14] = [
    (10, 50, Kind::Rough, [432.7, 27.0, 5115.0], [32.674, 3.888, 755.744]),
    (10, 50, Kind::Smooth, [5.238, 2.0, 312.0], [0.151, 0.144, 70.847]),
    (13, 50, Kind::Rough, [578.81, 96.0, 1939.0], [138.871, 29.005, 599.621]),
    (13, 50, Kind::Smooth, [16.229, 2.0, 1188.0], [0.624, 0.304, 374.893]),
    (13, 100, Kind::Rough, [997.23, 238.0, 2544.0], [113.442, 268.578, 2271.62]),
    (13, 100, Kind::Smooth, [26.983, 2.0, 1331.0], [10.587, 1.306, 339.403]),
    (13, 150, Kind::Rough, [1146.04, 237.0, 1977.0], [279.07, 582.276, 4582.276]),
    (13, 150, Kind::Smooth, [101.386, 2.0, 1578.0], [68.887, 2.866, 1073.94]),
    (72, 50, Kind::Rough, [763.321, 5.0, 7784.0], [612.415, 130.01, 1097.75]),
    (72, 50, Kind::Smooth, [62.366, 2.0, 4942.0], [2.174, 2.068, 990.199]),
    (72, 100, Kind::Rough, [2310.15, 477.0, 4915.0], [1447.13, 301.027, 3245.29]),
    (72, 100, Kind::Smooth, [319.01, 2.0, 1988.0], [161.877, 6.289, 125.502]),
    (72, 150, Kind::Rough, [3152.6, 803.0, 4968.0], [4138.22, 1086.65, 6760.73]),
    (72, 150, Kind::Smooth, [414.26, 4.0, 1990.0], [173.868, 40.39, 269.675]),
];

fn table_name(vcores: usize) -> &'static str {
    match vcores {
        10 => "Table 1",
        13 => "Table 2",
        _ => "Table 3",
    }
}

/// Everything measured, as written to `results.json`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Results {
    /// settings used
    pub trials: usize,
    /// settings used
    pub large_trials: usize,
    /// settings used
    pub paper_trials: usize,
    /// settings used
    pub paper_max_steps: usize,
    /// Fig. 5 runs (static cases)
    pub static_cases: Vec<ConvergeRow>,
    /// Tables 1–3
    pub transitions: Vec<TransitionsReport>,
    /// smooth transitions: warm-started migrations vs a from-scratch balancing
    pub smooth_migrations: Option<TransitionsReport>,
    /// assignment cost, fast vs brute force
    pub assign_cost: Vec<AssignCost>,
    /// maps of shapes nobody named
    pub shapes: Vec<ConvergeRow>,
}

/// Runs everything and writes `report.md`, `results.json` and the PNGs into `out`; returns the
/// report's path.
pub fn write_report(out: &Path, s: &Settings) -> Result<PathBuf, String> {
    s.check()?;
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let configs: Vec<(usize, usize)> =
        [(10, 50)].into_iter().chain([13, 72].into_iter().flat_map(|v| [50, 100, 150].map(|side| (v, side)))).collect();
    let shape_list = shapes::all();
    let per_config = |v: usize| if v == 10 { s.trials } else { s.large_trials };
    // Saturating: absurd trial counts give a full-width bar, not an overflow.
    let transition_units = configs.iter().fold(0u64, |n, &(v, _)| {
        n.saturating_add(progress::units(&[2, per_config(v)])).saturating_add(progress::units(&[2, s.paper_trials]))
    });
    let total = transition_units.saturating_add(s.trials as u64).saturating_add(16 + 2 * shape_list.len() as u64);
    let bar = progress::bar(total, "paper report");
    let tick = || bar.inc(1);

    // Fig. 5: the four static cases, both methods, DOL against steps.
    bar.set_message("Fig. 5 static cases");
    let grid = Grid::new(50, 50).map_err(|e| e.to_string())?;
    let mut static_rows = Vec::new();
    let mut fig5_panels = Vec::new();
    // Each method's final cells, the default's first: the top and bottom rows of cells.png.
    let mut finals = [Vec::new(), Vec::new()];
    for case in Case::ALL {
        let loads = loadmap::static_case(case, &grid, 1);
        let mut runs = [Vec::new(), Vec::new()];
        for (ci, method) in METHODS.into_iter().enumerate() {
            let opts = options_for(method, s);
            let (row, cells) = run_one(case.name(), grid, &loads, 10, method, opts, 1, |r| runs[ci].push(*r))
                .map_err(|e| e.to_string())?;
            static_rows.push(row);
            finals[ci].push((case, loads.clone(), cells));
            tick();
        }
        fig5_panels.push(Panel {
            title: format!("{} (50x50, 10 vCores)", case.name()),
            x_label: "step + 1".into(),
            y_label: "distance to optimal load".into(),
            log_x: true,
            log_y: false,
            series: dol_series([&runs[0], &runs[1]]),
        });
    }
    panels::line_panels(&out.join("fig5.png"), 1200, 900, 2, &fig5_panels)?;
    let maps: Vec<OwnerMap> = finals
        .iter()
        .zip(METHODS)
        .flat_map(|(runs, method)| {
            runs.iter().map(move |(case, loads, cells)| OwnerMap {
                title: format!("{} · {} · max_avg {:.3}", case.name(), method, cells.max_avg()),
                grid,
                loads,
                owners: cells.owners(),
                positions: cells.positions(),
            })
        })
        .collect();
    panels::owner_maps(&out.join("cells.png"), 4, 300, &maps)?;

    // Tables 1–3.
    let mut reports = Vec::new();
    for &(vcores, side) in &configs {
        for kind in [Kind::Rough, Kind::Smooth] {
            for method in METHODS {
                bar.set_message(format!("{} {vcores} vCores {side}² {method}", table_name(vcores)));
                let trials = if method == methods::DEFAULT { per_config(vcores) } else { s.paper_trials };
                let setup =
                    Setup { options: options_for(method, s), ..Setup::square(kind, method, side, vcores, trials) };
                reports.push(transitions::run(&setup, tick).map_err(|e| e.to_string())?);
            }
        }
    }

    // Smooth transitions: boxes moved by a warm start vs by balancing from scratch.
    bar.set_message("smooth migrations vs scratch");
    let scratch_setup =
        Setup { seed: 2, compare_scratch: true, ..Setup::square(Kind::Smooth, methods::DEFAULT, 50, 10, s.trials) };
    let smooth_migrations = transitions::run(&scratch_setup, tick).map_err(|e| e.to_string())?;

    // Assignment cost.
    bar.set_message("assignment cost");
    let reps = if s.trials >= 100 { 21 } else { 5 };
    let mut costs = Vec::new();
    for vcores in ASSIGN_VCORES {
        for side in [50, 100, 150, 300] {
            costs.push(assign_cost::measure(side, vcores, reps));
            tick();
        }
    }
    let cost_panel = Panel {
        title: "one assignment: time per box".into(),
        x_label: "boxes".into(),
        y_label: "ns per box".into(),
        log_x: true,
        log_y: true,
        series: cost_series(&costs, ASSIGN_VCORES),
    };
    panels::line_panels(&out.join("assign_cost.png"), 800, 500, 1, &[cost_panel])?;

    // Shapes nobody named.
    bar.set_message("other shapes");
    let mut shape_rows = Vec::new();
    for sh in &shape_list {
        for method in METHODS {
            shape_rows.push(
                run_one(sh.name, sh.grid, &sh.loads, 10, method, options_for(method, s), 1, |_| {})
                    .map_err(|e| e.to_string())?
                    .0,
            );
            tick();
        }
    }
    bar.finish_and_clear();

    let results = Results {
        trials: s.trials,
        large_trials: s.large_trials,
        paper_trials: s.paper_trials,
        paper_max_steps: s.paper_max_steps,
        static_cases: static_rows,
        transitions: reports,
        smooth_migrations: Some(smooth_migrations),
        assign_cost: costs,
        shapes: shape_rows,
    };
    std::fs::write(out.join("results.json"), serde_json::to_string_pretty(&results).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let path = out.join("report.md");
    std::fs::write(&path, markdown(&results, &shape_list)).map_err(|e| e.to_string())?;
    Ok(path)
}

/// The vCore counts of the assignment-cost table.
const ASSIGN_VCORES: [usize; 2] = [72, 1000];

/// Fig. 5's curves of one case: the distance to optimal load of the most and least loaded
/// vCore per step (`dol_max`, `dol_min`), of the default method (solid) and of the paper's
/// (dashed), against `step + 1` for the log axis.
fn dol_series(runs: [&[StepRecord]; 2]) -> Vec<Series> {
    let mut series = Vec::new();
    for (ci, (method, rec)) in METHODS.into_iter().zip(runs).enumerate() {
        for (which, pick) in [("dol_max", 0usize), ("dol_min", 1)] {
            series.push(Series {
                label: format!("{method} {which}"),
                points: rec
                    .iter()
                    .map(|r| ((r.step + 1) as f64, if pick == 0 { r.dol_max } else { r.dol_min }))
                    .collect(),
                color: PALETTE[2 * ci + pick],
                stroke: if ci == 1 { Stroke::Dashed } else { Stroke::Solid },
            });
        }
    }
    series
}

/// The assignment-cost plot: nanoseconds per box against boxes, fast (solid) and brute force
/// (dashed), one pair of curves per vCore count.
fn cost_series(costs: &[AssignCost], vcores: [usize; 2]) -> Vec<Series> {
    vcores
        .iter()
        .enumerate()
        .flat_map(|(i, &v)| {
            let pts = |f: fn(&AssignCost) -> f64| {
                costs.iter().filter(|c| c.vcores == v).map(|c| (c.boxes as f64, f(c))).collect()
            };
            [
                Series {
                    label: format!("fast, {v} vCores"),
                    points: pts(|c| c.fast_ns_per_box),
                    color: PALETTE[2 * i],
                    stroke: Stroke::Solid,
                },
                Series {
                    label: format!("brute force, {v} vCores"),
                    points: pts(|c| c.brute_us * 1e3 / c.boxes as f64),
                    color: PALETTE[2 * i + 1],
                    stroke: Stroke::Dashed,
                },
            ]
        })
        .collect()
}

fn options_for(method: &str, s: &Settings) -> StopRule {
    if method == methods::DEFAULT {
        StopRule::default()
    } else {
        StopRule { max_steps: s.paper_max_steps, ..StopRule::default() }
    }
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

fn converge_table(rows: &[ConvergeRow]) -> Table {
    let mut t = Table::new(&[
        "map",
        "grid",
        "method",
        "steps",
        "converged",
        "max_avg",
        "bound",
        "max_avg / bound",
        "edge cut",
        "ms",
    ]);
    for r in rows {
        t.row(vec![
            r.case.clone(),
            format!("{}x{}", r.nx, r.ny),
            r.method.clone(),
            r.steps.to_string(),
            if r.converged { "yes".into() } else { "**no**".into() },
            format!("{:.4}", r.max_avg),
            format!("{:.3}", r.lower_bound),
            format!("{:.4}", r.max_avg / r.lower_bound),
            r.edge_cut.to_string(),
            format!("{:.2}", r.elapsed_ms),
        ]);
    }
    t
}

fn markdown(r: &Results, shape_list: &[shapes::Shape]) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# pbs (method power-cells) against the paper (Papin et al. 2014)\n");
    let _ = writeln!(
        md,
        "Generated by `pbs-bench paper` (trials: {} for Table 1, {} per Table 2/3 row, {} per row for `{PAPER_METHOD}`, \
         which stops after {} steps). Machine: {}, {} hardware threads; the balancer is single-threaded. The paper's \
         times are from an Intel Xeon E5-2650. Converged means `max_avg ≤ 1.05 × max(1, q_max/m)`.\n",
        r.trials,
        r.large_trials,
        r.paper_trials,
        r.paper_max_steps,
        cpu_model(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let _ = writeln!(
        md,
        "`power-cells` is power cells whose weights follow damped Newton steps on the dual of the balance problem; \
        `{PAPER_METHOD}` is the paper's eq. 7 on Voronoi cells, steepest descent with the step rescaled to 0.2 box.\n"
    );

    let _ = writeln!(md, "## Fig. 5: the four static cases (50x50, 10 vCores)\n");
    let _ = writeln!(md, "{}", converge_table(&r.static_cases).markdown());
    let _ = writeln!(md, "![DOL against steps](fig5.png)\n\nDistance to optimal load of the most and least loaded vCore per step \
        (solid: power-cells, dashed: {PAPER_METHOD}; log step axis).\n\n![final cells](cells.png)\n\nFinal cells, top row power-cells, bottom row \
        {PAPER_METHOD}; darker = more load, dots = vCores.\n");

    let _ = writeln!(md, "## Tables 1–3: rough and smooth Perlin transitions\n");
    let _ = writeln!(md, "Each transition changes the map (rough: a new map; smooth: translated by 0.5 box) and the method restarts \
        from where it stopped. Steps and time are per transition. 'vs paper' divides the paper's published average by ours.\n");
    let mut t = Table::new(&[
        "table",
        "vCores",
        "grid",
        "kind",
        "method",
        "trials",
        "converged",
        "steps avg (min–max)",
        "ms avg (min–max)",
        "ms median",
        "paper steps avg",
        "paper ms avg",
        "steps vs paper",
        "time vs paper",
    ]);
    for rep in &r.transitions {
        let published =
            PUBLISHED.iter().find(|p| p.0 == rep.vcores && p.1 == rep.nx && p.2 == rep.kind).expect("a published row");
        t.row(vec![
            table_name(rep.vcores).into(),
            rep.vcores.to_string(),
            format!("{}x{}", rep.nx, rep.ny),
            format!("{:?}", rep.kind).to_lowercase(),
            rep.method.clone(),
            rep.trials.to_string(),
            format!("{:.0}%", 100.0 * rep.converged_fraction),
            format!("{:.2} ({}–{})", rep.steps.avg, rep.steps.min, rep.steps.max),
            format!("{:.3} ({:.3}–{:.3})", rep.ms.avg, rep.ms.min, rep.ms.max),
            format!("{:.3}", rep.ms_median),
            format!("{}", published.3[0]),
            format!("{}", published.4[0]),
            ratio(published.3[0], rep.steps.avg),
            ratio(published.4[0], rep.ms.avg),
        ]);
    }
    let _ = writeln!(md, "{}", t.markdown());
    if let Some(m) = &r.smooth_migrations {
        let _ = writeln!(md, "## Smooth transitions move few boxes\n");
        let scratch = m.scratch_migrations.expect("asked for");
        let _ = writeln!(
            md,
            "50x50, 10 vCores, {} smooth transitions with pbs: a warm start moves **{:.1} boxes** on average (max {}), \
             balancing the same map from fresh random vCores would move **{:.1}** (max {}) of the {} boxes, its cells \
             numbered after the current ones they overlap most — {} fewer.\n",
            m.trials,
            m.migrations.avg,
            m.migrations.max,
            scratch.avg,
            scratch.max,
            m.nx * m.ny,
            ratio(scratch.avg, m.migrations.avg)
        );
    }
    let _ = writeln!(md, "## Cell assignment cost\n");
    let _ = writeln!(md, "The paper assigns boxes by scanning every vCore, O(vCores × boxes), and names it its bottleneck. Ours prunes \
        candidates down a kd split of the grid; both give identical owners (tested). Median of repeated runs, random power diagrams.\n");
    let mut t = Table::new(&["vCores", "boxes", "fast µs", "brute µs", "brute / fast", "fast ns per box"]);
    for c in &r.assign_cost {
        t.row(vec![
            c.vcores.to_string(),
            c.boxes.to_string(),
            format!("{:.1}", c.fast_us),
            format!("{:.1}", c.brute_us),
            format!("{:.1}×", c.speedup),
            format!("{:.1}", c.fast_ns_per_box),
        ]);
    }
    let _ = writeln!(md, "{}\n![assignment cost](assign_cost.png)\n", t.markdown());
    let _ = writeln!(md, "## Maps of shapes nobody named (10 vCores)\n");
    for sh in shape_list {
        let _ = writeln!(md, "- `{}` ({}x{}): {}", sh.name, sh.grid.nx(), sh.grid.ny(), sh.description);
    }
    let _ = writeln!(md, "\n{}", converge_table(&r.shapes).markdown());
    md
}

fn ratio(theirs: f64, ours: f64) -> String {
    if ours > 0.0 {
        format!("{:.1}×", theirs / ours)
    } else {
        "∞".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(case: &str, converged: bool, max_avg: f64, lower_bound: f64) -> ConvergeRow {
        ConvergeRow {
            case: case.into(),
            method: "power-cells".into(),
            nx: 50,
            ny: 40,
            nz: 1,
            vcores: 10,
            steps: 17,
            converged,
            max_avg,
            lower_bound,
            dol_max: 0.1,
            dol_min: -0.1,
            edge_cut: 321,
            loaded_edge_cut: 321,
            elapsed_ms: 4.25,
        }
    }

    fn report(vcores: usize, side: usize, kind: Kind, steps_avg: f64, ms_avg: f64) -> TransitionsReport {
        let amm = |avg: f64| transitions::AvgMinMax { avg, min: avg / 2.0, max: avg * 3.0 };
        TransitionsReport {
            kind,
            method: "power-cells".into(),
            nx: side,
            ny: side,
            vcores,
            trials: 8,
            converged_fraction: 0.875,
            steps: amm(steps_avg),
            ms: amm(ms_avg),
            max_avg: transitions::AvgMax { avg: 1.02, max: 1.04 },
            migrations: transitions::AvgMax { avg: 12.5, max: 40.0 },
            steps_median: steps_avg,
            ms_median: 0.5,
            scratch_migrations: None,
        }
    }

    /// Fig. 5's four curves of a case: each method's `dol_max` and `dol_min` against `step + 1`,
    /// in its own colour, the paper's dashed.
    #[test]
    fn fig5_draws_each_method_s_extremes_against_the_step_after() {
        let rec = |d: f64| {
            (0..3)
                .map(|step| StepRecord {
                    step,
                    max_avg: 1.0,
                    dol_max: d + step as f64,
                    dol_min: -d - step as f64,
                    migrations: 0,
                })
                .collect::<Vec<_>>()
        };
        let (ours, theirs) = (rec(0.5), rec(0.25));
        let series = dol_series([&ours, &theirs]);
        let labels: Vec<&str> = series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["power-cells dol_max", "power-cells dol_min", "paper-eq7 dol_max", "paper-eq7 dol_min"]);
        assert_eq!(series[0].points, [(1.0, 0.5), (2.0, 1.5), (3.0, 2.5)]);
        assert_eq!(series[1].points, [(1.0, -0.5), (2.0, -1.5), (3.0, -2.5)]);
        assert_eq!(series[3].points, [(1.0, -0.25), (2.0, -1.25), (3.0, -2.25)]);
        let strokes: Vec<Stroke> = series.iter().map(|s| s.stroke).collect();
        assert_eq!(strokes, [Stroke::Solid, Stroke::Solid, Stroke::Dashed, Stroke::Dashed]);
        assert!(series.iter().map(|s| s.color).eq(PALETTE[..4].iter().copied()), "a colour per curve, in order");
    }

    /// The assignment-cost plot: per vCore count, the fast assignment's and the brute force's
    /// nanoseconds per box against the boxes, the brute force dashed.
    #[test]
    fn the_cost_plot_gives_nanoseconds_per_box_for_both_assignments() {
        let cost = |side: usize, vcores: usize, brute_us: f64| AssignCost {
            side,
            boxes: side * side,
            vcores,
            fast_us: 1.0,
            brute_us,
            speedup: brute_us,
            fast_ns_per_box: 1e3 / (side * side) as f64,
        };
        let costs = [cost(10, 72, 50.0), cost(20, 72, 400.0), cost(10, 1000, 800.0)];
        let series = cost_series(&costs, [72, 1000]);
        let labels: Vec<&str> = series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            ["fast, 72 vCores", "brute force, 72 vCores", "fast, 1000 vCores", "brute force, 1000 vCores"]
        );
        assert_eq!(series[0].points, [(100.0, 10.0), (400.0, 2.5)]);
        assert_eq!(series[1].points, [(100.0, 500.0), (400.0, 1000.0)]);
        assert_eq!(series[3].points, [(100.0, 8000.0)]);
        let strokes: Vec<Stroke> = series.iter().map(|s| s.stroke).collect();
        assert_eq!(strokes, [Stroke::Solid, Stroke::Dashed, Stroke::Solid, Stroke::Dashed]);
        assert!(series.iter().map(|s| s.color).eq(PALETTE[..4].iter().copied()), "a colour per curve, in order");
    }

    /// The page's cells from the results: each transition row beside its published row (the
    /// table chosen by the vCores), `vs paper` as the paper's average over ours (∞ for a zero
    /// of ours), the convergence tables with `max_avg / bound`, the warm-start sentence, the
    /// assignment costs and the shapes listed.
    #[test]
    fn the_page_sets_each_row_beside_its_published_row() {
        let smooth = TransitionsReport {
            scratch_migrations: Some(transitions::AvgMax { avg: 250.0, max: 600.0 }),
            ..report(10, 50, Kind::Smooth, 3.0, 0.2)
        };
        let results = Results {
            trials: 8,
            large_trials: 2,
            paper_trials: 2,
            paper_max_steps: 200,
            static_cases: vec![row("disc", true, 1.02, 1.0), row("line", false, 1.5, 1.2)],
            transitions: vec![
                report(10, 50, Kind::Rough, 43.27, 3.2674),
                report(13, 100, Kind::Smooth, 0.0, 0.0),
                report(72, 150, Kind::Rough, 315.26, 1000.0),
            ],
            smooth_migrations: Some(smooth),
            assign_cost: vec![AssignCost {
                side: 50,
                boxes: 2500,
                vcores: 72,
                fast_us: 12.5,
                brute_us: 250.0,
                speedup: 20.0,
                fast_ns_per_box: 5.0,
            }],
            shapes: vec![row("ring", true, 1.01, 1.0)],
        };
        let shape_list = shapes::all();
        let md = markdown(&results, &shape_list[..2]);
        for line in [
            "| Table 1 | 10 | 50x50 | rough | power-cells | 8 | 88% | 43.27 (21.635–129.81) | 3.267 (1.634–9.802) | 0.500 | 432.7 | 32.674 | 10.0× | 10.0× |",
            "| Table 2 | 13 | 100x100 | smooth | power-cells | 8 | 88% | 0.00 (0–0) | 0.000 (0.000–0.000) | 0.500 | 26.983 | 10.587 | ∞ | ∞ |",
            "| Table 3 | 72 | 150x150 | rough | power-cells | 8 | 88% | 315.26 (157.63–945.78) | 1000.000 (500.000–3000.000) | 0.500 | 3152.6 | 4138.22 | 10.0× | 4.1× |",
            "| disc | 50x40 | power-cells | 17 | yes | 1.0200 | 1.000 | 1.0200 | 321 | 4.25 |",
            "| line | 50x40 | power-cells | 17 | **no** | 1.5000 | 1.200 | 1.2500 | 321 | 4.25 |",
            "| ring | 50x40 | power-cells | 17 | yes | 1.0100 | 1.000 | 1.0100 | 321 | 4.25 |",
            "| 72 | 2500 | 12.5 | 250.0 | 20.0× | 5.0 |",
            "a warm start moves **12.5 boxes** on average (max 40), balancing the same map from fresh random vCores would \
             move **250.0** (max 600) of the 2500 boxes, its cells numbered after the current ones they overlap most — \
             20.0× fewer.",
            "(trials: 8 for Table 1, 2 per Table 2/3 row, 2 per row for `paper-eq7`, which stops after 200 steps)",
        ] {
            assert_eq!(md.matches(line).count(), 1, "{line} in\n{md}");
        }
        for sh in &shape_list[..2] {
            let item = format!("- `{}` ({}x{}): {}", sh.name, sh.grid.nx(), sh.grid.ny(), sh.description);
            assert!(md.contains(&item), "{item}");
        }
        assert!(!md.contains(&format!("`{}`", shape_list[2].name)), "only the shapes given are listed");
        let without = markdown(&Results { smooth_migrations: None, ..results.clone() }, &[]);
        assert!(
            !without.contains("Smooth transitions move few boxes") && md.contains("Smooth transitions move few boxes")
        );
    }

    #[test]
    fn a_count_of_zero_is_refused_before_anything_is_written() {
        assert!(Settings::default().check().is_ok());
        assert!(Settings::quick().check().is_ok());
        // Our method runs to the default rule; the paper's stops at its own step limit.
        assert_eq!(options_for(methods::DEFAULT, &Settings::quick()), StopRule::default());
        let paper = options_for(PAPER_METHOD, &Settings::quick());
        assert_eq!(paper, StopRule { max_steps: 200, ..StopRule::default() });
        let (quick, full) = (Settings::quick(), Settings::default());
        assert!(quick.trials < full.trials && quick.large_trials < full.large_trials, "quick is the smaller run");
        assert!(quick.paper_trials < full.paper_trials && quick.paper_max_steps < full.paper_max_steps);
        let zeroed = [
            ("--trials", Settings { trials: 0, ..Settings::quick() }),
            ("--large-trials", Settings { large_trials: 0, ..Settings::quick() }),
            ("--paper-trials", Settings { paper_trials: 0, ..Settings::quick() }),
            ("--paper-max-steps", Settings { paper_max_steps: 0, ..Settings::quick() }),
        ];
        let out = std::env::temp_dir().join(format!("pbs-paper-zero-{}", std::process::id()));
        for (name, settings) in zeroed {
            let err = write_report(&out, &settings).unwrap_err();
            assert!(err.starts_with(name), "{name}: {err}");
            assert!(!out.exists(), "{name}: the report folder was created");
        }
    }
}
