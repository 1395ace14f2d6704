//! `pbs-bench model`: how the schedulers would do on 16–256 threads and 1–8 NUMA nodes,
//! replayed from per-box costs recorded on this machine.
//!
//! In the spirit of the paper's simulator and of StarPU's simulated mode: a [`trace`] of real
//! box costs is replayed ([`mod@replay`]) on a modelled [`machine`] whose constants were fitted
//! to real measurements ([`calibration`]), with the real balancer making pbs's mappings.
//! What it models and what it leaves out is listed in [`mod@replay`]; the fit and its error on a
//! measurement it was not fitted to are printed by `pbs-bench model --calibration`.

pub mod calibration;
pub mod machine;
pub mod plan;
pub mod replay;
pub mod trace;

use crate::scaling::{grid_name, weak_capped, weak_grid};
use std::path::PathBuf;

use machine::Machine;
use plan::{plan_pbs, plan_remap};
use replay::{replay, Rebalancing, REMAPPERS, SCHEDULERS};
use trace::Trace;

/// The speeds fitted with the constants of [`Machine::fitted`]: the measured machine's time
/// per recorded second, for md and for the stencil.
pub const FITTED_SPEEDS: (f64, f64) = (2.0395, 1.6751);

/// The fitted machine for `app` (md's speed for md-split, the same boxes in two phases).
pub fn fitted_machine(app: &str) -> Machine {
    Machine::fitted(if app.starts_with("md") { FITTED_SPEEDS.0 } else { FITTED_SPEEDS.1 })
}

/// What to model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSettings {
    /// `md` or `stencil`.
    pub app: String,
    /// The app's scenario.
    pub scenario: String,
    /// Thread counts.
    pub threads: Vec<usize>,
    /// NUMA node counts.
    pub numa_nodes: Vec<usize>,
    /// A trace to replay at every thread count (strong scaling); `None` records one per
    /// thread count with `boxes_per_thread` boxes per thread (weak scaling).
    pub trace: Option<PathBuf>,
    /// Boxes per thread of the recorded traces.
    pub boxes_per_thread: usize,
    /// Dimensions of the recorded traces' grids: 2 (squares) or 3 (cubes).
    pub dims: usize,
    /// Iterations replayed (the recorded ones played forwards and backwards).
    pub iters: usize,
    /// Iterations recorded, when a trace is recorded.
    pub record_iters: usize,
    /// Where pbs's balancer runs.
    pub rebalancing: Rebalancing,
    /// Also replay the remappers ([`replay::REMAPPERS`]).
    pub remappers: bool,
    /// A balancer unit's cost per box and `1 + log2 vCores`, recorded seconds, instead of the
    /// fitted [`Machine::balancer_box`].
    pub balancer_box: Option<f64>,
    /// pbs's own serial work per phase and thread, seconds, instead of the fitted
    /// [`Machine::executor_thread`].
    pub executor_thread: Option<f64>,
    /// pbs's work between iterations per thread, seconds, instead of the fitted
    /// [`Machine::iteration_thread`].
    pub iteration_thread: Option<f64>,
}

/// One modelled run, with what it ran.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ModelRow {
    /// `md` or `stencil`.
    pub app: String,
    /// The app's scenario.
    pub scenario: String,
    /// Boxes along x of the replayed trace.
    pub nx: usize,
    /// Boxes along y.
    pub ny: usize,
    /// Layers of boxes along z (1 on a 2D grid).
    pub nz: usize,
    /// The replay's figures.
    #[serde(flatten)]
    pub modelled: replay::Modelled,
    /// pbs's row: the real time of a balancer unit while its mappings were planned, on this
    /// machine, over what the model charges for one ([`plan::PbsPlan::real_over_law`]):
    /// below 1 the model's balancer is dearer than the code's. `None` on the other rows, and
    /// where the model's units are free.
    pub balancer_real_over_law: Option<f64>,
}

/// What the settings leave out or change, one sentence each, for the user to read beside the
/// figures: NUMA node counts above a thread count (a node needs a thread), and weak-scaling
/// grids cut down to [`crate::scaling::MAX_SIDE`]² boxes. An error when nothing is left to replay.
pub fn notes(s: &ModelSettings) -> Result<Vec<String>, String> {
    let mut notes = Vec::new();
    let mut pairs = 0;
    for &threads in &s.threads {
        let over: Vec<String> = s.numa_nodes.iter().filter(|&&n| n > threads).map(|n| n.to_string()).collect();
        pairs += s.numa_nodes.len() - over.len();
        if !over.is_empty() {
            notes.push(format!("{threads} threads: {} NUMA nodes left out (a node needs a thread)", over.join(", ")));
        }
        let grid = weak_grid(s.boxes_per_thread, threads, s.dims);
        let recorded: usize = grid.iter().product();
        if s.trace.is_none() && weak_capped(s.boxes_per_thread, threads, s.dims) {
            notes.push(format!(
                "{threads} threads: {} boxes recorded, {} per thread instead of {}",
                grid_name(grid),
                recorded / threads,
                s.boxes_per_thread
            ));
        }
    }
    if pairs == 0 {
        return Err(format!(
            "every NUMA node count is above every thread count (threads {:?}, NUMA nodes {:?}): a node needs a thread",
            s.threads, s.numa_nodes
        ));
    }
    Ok(notes)
}

/// The most iterations a replay takes.
pub const MAX_ITERS: usize = 1_000_000;

/// Checks the settings and returns their [`notes`]: counts of at least 1, at most the
/// executor's thread limit, and something left to replay.
pub fn check(s: &ModelSettings) -> Result<Vec<String>, String> {
    if s.threads.is_empty() || s.numa_nodes.is_empty() || s.threads.contains(&0) || s.numa_nodes.contains(&0) {
        return Err("--threads and --numa-nodes need one or more counts, each at least 1".into());
    }
    if s.iters == 0 || s.record_iters == 0 || s.boxes_per_thread == 0 {
        return Err("--iters, --record-iters and --boxes-per-thread must be at least 1".into());
    }
    crate::scaling::check_dims(s.dims)?;
    // A plan keeps the owners of every rebalancing (256 KB each at 65,536 boxes): 10⁹
    // iterations at 256 threads grew by 2.5 MB a second, towards running out of memory.
    if s.iters > MAX_ITERS {
        return Err(format!("--iters {}: the model replays at most {MAX_ITERS} iterations", s.iters));
    }
    // A millisecond a box and unit is far past any balancer (nanoseconds are measured).
    if let Some(x) = s.balancer_box.filter(|x| !(x.is_finite() && (0.0..=1e-3).contains(x))) {
        return Err(format!("--balancer-ns-per-box {:?}: expected a time from 0 to 1,000,000 ns", x * 1e9));
    }
    for (flag, x) in
        [("--executor-us-per-thread", s.executor_thread), ("--iteration-us-per-thread", s.iteration_thread)]
    {
        // A second a thread is far past any executor (microseconds are measured); beyond it
        // the replay only prints times of hundreds of digits.
        if let Some(x) = x.filter(|x| !(x.is_finite() && (0.0..=1.0).contains(x))) {
            return Err(format!("{flag} {:?}: expected a time from 0 to 1,000,000 µs", x * 1e6));
        }
    }
    // The pool's own limit: `--threads 100000` (2 boxes per thread) still ran after 100 s with
    // nothing printed.
    if let Some(&threads) = s.threads.iter().find(|&&t| t > pbs_scheduler::pool::MAX_THREADS) {
        return Err(format!(
            "--threads {threads}: the model replays at most {} threads (the executor's limit)",
            pbs_scheduler::pool::MAX_THREADS
        ));
    }
    notes(s)
}

/// Replays every scheduler at every thread count and NUMA node count (see [`check`] for what
/// it refuses and [`notes`] for what it leaves out).
pub fn project(s: &ModelSettings, mut progress: impl FnMut(String)) -> Result<Vec<ModelRow>, String> {
    check(s)?;
    let given = s.trace.as_ref().map(|p| Trace::read(p)).transpose()?;
    let mut rows = Vec::new();
    for &threads in &s.threads {
        let recorded;
        let trace = match &given {
            Some(t) => t,
            None => {
                let grid = weak_grid(s.boxes_per_thread, threads, s.dims);
                progress(format!("recording {} {} on {} boxes", s.app, s.scenario, grid_name(grid)));
                recorded = Trace::record_3d(&s.app, &s.scenario, grid, s.record_iters, 1)?;
                &recorded
            }
        };
        if trace.boxes() < threads {
            return Err(format!("{threads} threads for a trace of {} boxes", trace.boxes()));
        }
        let mut machine = fitted_machine(&trace.header.app);
        if let Some(x) = s.balancer_box {
            machine.balancer_box = x;
        }
        if let Some(x) = s.executor_thread {
            machine.executor_thread = x;
        }
        if let Some(x) = s.iteration_thread {
            machine.iteration_thread = x;
        }
        let iterations = s.iters;
        for &nodes in &s.numa_nodes {
            if nodes > threads {
                continue;
            }
            progress(format!("pbs's mappings for {threads} threads on {nodes} NUMA nodes"));
            let plan = plan_pbs(trace, threads, nodes, iterations, &machine, s.rebalancing)?;
            let real_over_law = plan.real_over_law(machine.balancer_box, trace.boxes(), threads.min(trace.boxes()));
            let schedulers = SCHEDULERS.iter().chain(if s.remappers { &REMAPPERS[..] } else { &[] });
            for &scheduler in schedulers {
                progress(format!("{scheduler} on {threads} threads, {nodes} NUMA nodes"));
                let remap_plan;
                let plan = if REMAPPERS.contains(&scheduler) {
                    remap_plan = plan_remap(trace, scheduler, threads, iterations, machine.noise)?;
                    &remap_plan
                } else {
                    &plan
                };
                let modelled =
                    replay(trace, scheduler, threads, nodes, &machine, Some(plan), s.rebalancing, iterations)?;
                rows.push(ModelRow {
                    app: trace.header.app.clone(),
                    scenario: trace.header.scenario.clone(),
                    nx: trace.header.nx,
                    ny: trace.header.ny,
                    nz: trace.header.nz,
                    balancer_real_over_law: real_over_law.filter(|_| scheduler == "pbs"),
                    modelled,
                });
            }
        }
    }
    Ok(rows)
}

/// The readable table.
pub fn table(rows: &[ModelRow]) -> crate::table::Table {
    let mut t = crate::table::Table::new(&[
        "app",
        "scenario",
        "grid",
        "scheduler",
        "threads",
        "numa",
        "iter ms",
        "efficiency",
        crate::run::IDLE_TITLE,
        "affinity",
        "max_avg per phase",
        "rebalancing critical",
        "remote",
        "rebalances",
    ]);
    for r in rows {
        let m = &r.modelled;
        t.row(vec![
            r.app.clone(),
            r.scenario.clone(),
            pbs::Grid::new_3d(r.nx, r.ny, r.nz).map_or_else(|e| e.to_string(), |g| g.to_string()),
            m.scheduler.clone(),
            m.threads.to_string(),
            m.numa_nodes.to_string(),
            format!("{:.3}", m.iter_ms),
            format!("{:.3}", m.efficiency),
            crate::run::idle(&m.idle_shares),
            format!("{:.3}", m.affinity),
            m.phase_max_avg.iter().map(|v| format!("{v:.2}")).collect::<Vec<_>>().join("/"),
            format!("{:.2} %", 100.0 * m.rebalance_critical_fraction),
            format!("{:.3}", m.remote_fraction),
            m.rebalances.to_string(),
        ]);
    }
    t
}

/// What [`plot`] draws, one row of panels each: the title, the unit, whether the axis is
/// logarithmic, whether the figure exists on one NUMA node, and the figure of a row.
type Metric = (&'static str, &'static str, bool, bool, fn(&replay::Modelled) -> f64);

const PLOTTED: [Metric; 4] = [
    ("efficiency", "busy / (threads × wall)", false, true, |m| m.efficiency),
    ("iteration time", "ms", true, true, |m| m.iter_ms),
    ("critical-path balancing", "% of wall time", false, true, |m| 100.0 * m.rebalance_critical_fraction),
    ("remote box runs", "% of box runs", false, false, |m| 100.0 * m.remote_fraction),
];

/// Draws the projection into a PNG: a column per NUMA node count, a row per figure (efficiency,
/// iteration time, balancing on the critical path, remote runs) against the thread count, a
/// line per scheduler.
pub fn plot(path: &std::path::Path, rows: &[ModelRow]) -> Result<(), String> {
    use pbs_plot::panels::{colour, line_panels, Panel, Series, Stroke};
    let mut nodes: Vec<usize> = rows.iter().map(|r| r.modelled.numa_nodes).collect();
    nodes.sort_unstable();
    nodes.dedup();
    let mut schedulers: Vec<&str> = Vec::new();
    for r in rows {
        if !schedulers.contains(&r.modelled.scheduler.as_str()) {
            schedulers.push(&r.modelled.scheduler);
        }
    }
    let Some(first) = rows.first() else { return Err("nothing to plot: the projection has no row".into()) };
    let case = format!("{} {}", first.app, first.scenario);
    let mut panels = Vec::new();
    for (title, unit, log_y, on_one_node, figure) in PLOTTED {
        for &n in &nodes {
            if n == 1 && !on_one_node {
                // Every box's data is on the one node: nothing to draw.
                panels.push(Panel {
                    title: format!("{case}, 1 NUMA node: no {title}"),
                    x_label: "threads".into(),
                    y_label: unit.into(),
                    log_x: false,
                    log_y: false,
                    series: Vec::new(),
                });
                continue;
            }
            let series = schedulers
                .iter()
                .enumerate()
                .map(|(i, &name)| {
                    let mut points: Vec<(f64, f64)> = rows
                        .iter()
                        .filter(|r| r.modelled.scheduler == name && r.modelled.numa_nodes == n)
                        .map(|r| (r.modelled.threads as f64, figure(&r.modelled)))
                        .collect();
                    points.sort_by(|a, b| a.0.total_cmp(&b.0));
                    Series { label: name.to_string(), points, color: colour(i), stroke: Stroke::LinePoints }
                })
                .filter(|s| !s.points.is_empty())
                .collect();
            let machine = if n == 1 { "1 NUMA node".to_string() } else { format!("{n} NUMA nodes") };
            panels.push(Panel {
                title: format!("{case}, {machine}: {title}"),
                x_label: "threads".into(),
                y_label: unit.into(),
                log_x: true,
                log_y,
                series,
            });
        }
    }
    let cols = nodes.len();
    line_panels(path, 480 * cols as u32, 300 * PLOTTED.len() as u32, cols, &panels)
}

/// The calibration check as a table.
pub fn calibration_table(rows: &[calibration::CalibrationRow]) -> crate::table::Table {
    let mut t =
        crate::table::Table::new(&["source", "case", "threads", "figure", "fitted", "measured", "modelled", "error"]);
    let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.3}"));
    for r in rows {
        let figure = match (r.measured_affinity, r.scheduler.as_str()) {
            (Some(_), scheduler) => format!("{scheduler} affinity"),
            (None, "pbs") => "pbs efficiency".to_string(),
            (None, other) => format!("pbs / {other}"),
        };
        t.row(vec![
            r.source.clone(),
            format!("{} {}", r.app, r.scenario),
            r.threads.to_string(),
            figure,
            if r.fitted { "yes" } else { "no" }.into(),
            f(r.measured_efficiency.or(r.measured_ratio).or(r.measured_affinity)),
            f(r.modelled_efficiency.or(r.modelled_ratio).or(r.modelled_affinity)),
            format!("{:+.1} %", 100.0 * r.error),
        ]);
    }
    t
}

/// Draws the calibration check into a PNG: the model's figure against the measured one, a dot
/// each, beside the line where they agree and the ±15 % band; a panel each for pbs / the other
/// schedulers, pbs's efficiency, and the affinity of pbs, ws and eager.
pub fn calibration_plot(path: &std::path::Path, rows: &[calibration::CalibrationRow]) -> Result<(), String> {
    use pbs_plot::panels::{colour, line_panels, Panel, Series, Stroke, PALETTE};
    type Pick = fn(&calibration::CalibrationRow) -> Option<(f64, f64)>;
    let panels: [(&str, Pick, &[&str]); 3] = [
        ("pbs / each scheduler", |r| r.measured_ratio.zip(r.modelled_ratio), &calibration::OTHERS),
        ("pbs efficiency", |r| r.measured_efficiency.zip(r.modelled_efficiency), &["pbs"]),
        ("affinity", |r| r.measured_affinity.zip(r.modelled_affinity), &calibration::AFFINITY_OF),
    ];
    let grey = PALETTE[7];
    let drawn: Vec<Panel> = panels
        .iter()
        .map(|&(title, pick, schedulers)| {
            let mut series: Vec<Series> = schedulers
                .iter()
                .enumerate()
                .map(|(i, &name)| Series {
                    label: name.to_string(),
                    points: rows.iter().filter(|r| r.scheduler == name).filter_map(pick).collect(),
                    color: colour(i),
                    stroke: Stroke::Points,
                })
                .filter(|s| !s.points.is_empty())
                .collect();
            let measured = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
            let (lo, hi) = measured.fold((f64::INFINITY, 0.0f64), |(lo, hi), x| (lo.min(x), hi.max(x)));
            let line = |label: &str, k: f64, stroke| Series {
                label: label.into(),
                points: vec![(lo, k * lo), (hi, k * hi)],
                color: grey,
                stroke,
            };
            if lo.is_finite() {
                series.push(line("model = measured", 1.0, Stroke::Solid));
                series.push(line("+15 %", 1.15, Stroke::Dashed));
                series.push(line("−15 %", 0.85, Stroke::Dashed));
            }
            Panel {
                title: title.into(),
                x_label: "measured".into(),
                y_label: "modelled".into(),
                log_x: false,
                log_y: false,
                series,
            }
        })
        .collect();
    line_panels(path, 1440, 480, 3, &drawn)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scaling::MAX_SIDE;

    fn settings(threads: &[usize], numa_nodes: &[usize]) -> ModelSettings {
        ModelSettings {
            app: "md".into(),
            scenario: "gravity".into(),
            threads: threads.to_vec(),
            numa_nodes: numa_nodes.to_vec(),
            trace: None,
            boxes_per_thread: 256,
            dims: 2,
            iters: 10,
            record_iters: 2,
            rebalancing: Rebalancing::IdleTimeOrThread,
            remappers: false,
            balancer_box: None,
            executor_thread: None,
            iteration_thread: None,
        }
    }

    /// What the settings leave out is said, not silently skipped; nothing left is an error.
    #[test]
    fn node_counts_above_the_threads_and_cut_grids_are_noted() {
        assert!(notes(&settings(&[16, 64], &[1, 4, 8])).unwrap().is_empty());
        let n = notes(&settings(&[4, 16], &[1, 8])).unwrap();
        assert_eq!(n, vec!["4 threads: 8 NUMA nodes left out (a node needs a thread)".to_string()]);
        let n = notes(&settings(&[2048], &[1])).unwrap();
        assert_eq!(n, vec!["2048 threads: 512×512 boxes recorded, 128 per thread instead of 256".to_string()]);
        let e = project(&settings(&[4], &[8]), |_| {}).unwrap_err();
        assert!(e.contains("a node needs a thread"), "{e}");
        let e = project(&settings(&[16, 100_000], &[1]), |_| {}).unwrap_err();
        assert!(e.contains("--threads 100000") && e.contains("at most 4096"), "{e}");
    }

    /// Each count is checked on its own, at its limits: an empty or zero count, zero
    /// iterations or boxes are refused alone; `MAX_ITERS` iterations are accepted and one more
    /// is refused; a node count equal to the threads and a weak-scaling grid of exactly
    /// `MAX_SIDE` a side are kept without a note.
    #[test]
    fn the_settings_are_checked_one_by_one_at_their_limits() {
        let counts = "need one or more counts";
        for s in [settings(&[], &[1]), settings(&[2], &[]), settings(&[2, 0], &[1]), settings(&[2], &[1, 0])] {
            assert!(check(&s).unwrap_err().contains(counts), "{s:?}");
        }
        let base = settings(&[8], &[8]);
        for s in [
            ModelSettings { iters: 0, ..base.clone() },
            ModelSettings { record_iters: 0, ..base.clone() },
            ModelSettings { boxes_per_thread: 0, ..base.clone() },
        ] {
            assert!(check(&s).unwrap_err().contains("must be at least 1"), "{s:?}");
        }
        let most = pbs_scheduler::pool::MAX_THREADS;
        assert!(check(&settings(&[most], &[1])).is_ok());
        assert!(check(&settings(&[most + 1], &[1])).unwrap_err().contains("at most"));
        assert_eq!(check(&ModelSettings { iters: MAX_ITERS, ..base.clone() }), Ok(vec![]));
        let e = check(&ModelSettings { iters: MAX_ITERS + 1, ..base.clone() }).unwrap_err();
        assert!(e.contains("at most 1000000 iterations"), "{e}");
        assert_eq!(check(&settings(&[8], &[9, 8])).unwrap().len(), 1, "9 nodes noted, 8 kept");
        let side = MAX_SIDE * MAX_SIDE;
        assert_eq!(notes(&ModelSettings { boxes_per_thread: side / 1024, ..settings(&[1024], &[1]) }), Ok(vec![]));
        assert_eq!(
            notes(&ModelSettings { boxes_per_thread: side / 1024 + 8, ..settings(&[1024], &[1]) }).unwrap().len(),
            1
        );
        // Cubes: at most 64³ = MAX_SIDE² boxes, a count of dimensions other than 2 or 3 refused.
        let cubes = |bpt, threads| ModelSettings { dims: 3, boxes_per_thread: bpt, ..settings(&[threads], &[1]) };
        assert_eq!(notes(&cubes(1024, 256)), Ok(vec![]));
        assert_eq!(
            notes(&cubes(2048, 256)),
            Ok(vec!["256 threads: 64×64×64 boxes recorded, 1024 per thread instead of 2048".to_string()])
        );
        for dims in [0, 1, 4] {
            let e = check(&ModelSettings { dims, ..base.clone() }).unwrap_err();
            assert!(e.contains(&format!("--dims {dims}: the grids are squares (2) or cubes (3)")), "{e}");
        }
    }

    /// `project` replays every scheduler, and with `remappers` every remapper, on 2D and 3D
    /// traces, at each thread count on each node count up to it; a thread count above the
    /// trace's boxes is refused.
    #[test]
    fn the_projection_replays_what_the_settings_ask_for() {
        let dir = std::env::temp_dir().join(format!("pbs-model-project-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (flat, deep) = (dir.join("flat.trace"), dir.join("deep.trace"));
        Trace::record("stencil", "drift", 4, 4, 2, 1).unwrap().write(&flat).unwrap();
        Trace::record_3d("stencil", "drift", [4, 2, 2], 2, 1).unwrap().write(&deep).unwrap();
        let run = |trace: &PathBuf, threads: &[usize], nodes: &[usize]| {
            let s = ModelSettings { iters: 4, trace: Some(trace.clone()), remappers: true, ..settings(threads, nodes) };
            project(&s, |_| {}).map(|rows| {
                rows.iter().map(|r| (r.modelled.threads, r.modelled.numa_nodes, r.modelled.scheduler.clone())).collect()
            })
        };
        let every: Vec<&str> = SCHEDULERS.iter().chain(&REMAPPERS).copied().collect();
        let rows: Vec<(usize, usize, String)> = run(&flat, &[2, 16], &[2, 4]).unwrap();
        let expected: Vec<(usize, usize, String)> = [(2, 2), (16, 2), (16, 4)]
            .iter()
            .flat_map(|&(t, n)| every.iter().map(move |s| (t, n, s.to_string())))
            .collect();
        assert_eq!(rows, expected);
        let rows: Vec<(usize, usize, String)> = run(&deep, &[2], &[1]).unwrap();
        assert_eq!(rows, every.iter().map(|s| (2, 1, s.to_string())).collect::<Vec<_>>());
        assert_eq!(run(&flat, &[17], &[1]), Err("17 threads for a trace of 16 boxes".to_string()));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The names of `--rebalancing`, and no other.
    #[test]
    fn where_pbs_rebalances_is_chosen_by_name() {
        let named = ["overlap", "idle", "thread", "stop", "lend"].map(Rebalancing::by_name);
        let expected = [
            Rebalancing::IdleTimeOrThread,
            Rebalancing::IdleTime,
            Rebalancing::Thread,
            Rebalancing::Stop,
            Rebalancing::LentCore,
        ];
        assert_eq!(named, expected.map(Some));
        assert_eq!(Rebalancing::by_name("stop-serial"), None);
    }

    /// `--executor-us-per-thread` and `--iteration-us-per-thread` reach pbs's replay (a free
    /// executor makes its iterations shorter and its executor share nil) and refuse a negative
    /// or unknown time.
    #[test]
    fn the_executor_cost_per_thread_is_the_settings_when_given() {
        // One recorded trace for both replays: a trace recorded for each would time other boxes.
        let path = std::env::temp_dir().join(format!("pbs-model-executor-{}.trace", std::process::id()));
        Trace::record("md", "gravity", 16, 16, 2, 1).unwrap().write(&path).unwrap();
        let mut s = ModelSettings { iters: 6, trace: Some(path.clone()), ..settings(&[16], &[1]) };
        let pbs = |s: &ModelSettings| {
            let rows = project(s, |_| {}).unwrap();
            rows.into_iter().find(|r| r.modelled.scheduler == "pbs").unwrap().modelled
        };
        let fitted = pbs(&s);
        s.executor_thread = Some(0.0);
        let free = pbs(&s);
        let (was, now) = (fitted.idle_shares.in_phases.executor, free.idle_shares.in_phases.executor);
        assert!(was > 0.0 && now == 0.0, "executor share {was} fitted, {now} free");
        assert!(free.iter_ms < fitted.iter_ms, "iterations {} ms free, {} fitted", free.iter_ms, fitted.iter_ms);
        for bad in [-1e-6, f64::NAN, 1e294] {
            s.executor_thread = Some(bad);
            assert!(check(&s).unwrap_err().contains("--executor-us-per-thread"));
        }
        // The work between iterations per thread, likewise: none makes the iterations shorter.
        s.executor_thread = None;
        s.iteration_thread = Some(0.0);
        let between_free = pbs(&s);
        assert!(between_free.iter_ms < fitted.iter_ms, "{} ms, fitted {} ms", between_free.iter_ms, fitted.iter_ms);
        s.iteration_thread = Some(-1e-6);
        assert!(check(&s).unwrap_err().contains("--iteration-us-per-thread"));
        let _ = std::fs::remove_file(path);
    }

    /// `--balancer-ns-per-box` prices pbs's balancer units (a free one costs the critical path
    /// nothing), pbs's row says how the code's units compare with the price, the other rows
    /// say nothing, and a negative or unknown price is refused.
    #[test]
    fn the_balancer_cost_per_box_is_the_settings_when_given() {
        let path = std::env::temp_dir().join(format!("pbs-model-balancer-{}.trace", std::process::id()));
        Trace::record("md", "gravity", 16, 16, 2, 1).unwrap().write(&path).unwrap();
        let mut s = ModelSettings {
            iters: 40,
            trace: Some(path.clone()),
            rebalancing: Rebalancing::Stop,
            ..settings(&[16], &[1])
        };
        let rows = project(&s, |_| {}).unwrap();
        for r in &rows {
            let ratio = r.balancer_real_over_law;
            match r.modelled.scheduler.as_str() {
                "pbs" => assert!(ratio.is_some_and(|x| x.is_finite() && x > 0.0), "{ratio:?}"),
                _ => assert_eq!(ratio, None, "{}", r.modelled.scheduler),
            }
        }
        let pbs = |s: &ModelSettings| {
            let rows = project(s, |_| {}).unwrap();
            rows.into_iter().find(|r| r.modelled.scheduler == "pbs").unwrap()
        };
        let fitted = pbs(&s);
        s.balancer_box = Some(0.0);
        let free = pbs(&s);
        // Per rebalancing: a free balancer repays its cost in any iteration left, and so may
        // rebalance more often near the end.
        let critical = |r: &ModelRow| r.modelled.rebalance_critical_fraction / r.modelled.rebalances as f64;
        assert!(critical(&fitted) > 0.0, "the first balancing stops the iteration: {}", critical(&fitted));
        assert!(critical(&free) < critical(&fitted), "{} free, {} fitted", critical(&free), critical(&fitted));
        assert_eq!(free.balancer_real_over_law, None, "no ratio to a free unit");
        for bad in [-1e-9, f64::NAN, 1.0] {
            s.balancer_box = Some(bad);
            assert!(check(&s).unwrap_err().contains("--balancer-ns-per-box"));
        }
        let _ = std::fs::remove_file(path);
    }
}
