//! `pbs-bench report`: the standard matrix — apps × scenarios × schedulers — run `repeats`
//! times; a markdown report with medians and ratios from the same runs, a cache-miss table in
//! the spirit of the paper's Table 4, and PNG plots (iteration time over iterations, per-thread
//! busy time, pbs's owner maps at three iterations).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::run::{self, RunRow, RunSetup};
use crate::table::Table;
use crate::Stats;
use pbs_plot::panels::{self, OwnerMap, Panel, Series, Stroke};
use pbs_plot::progress;

/// How much to run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatrixSettings {
    /// Worker threads.
    pub threads: usize,
    /// Iterations per run.
    pub iters: usize,
    /// Runs per (app, scenario); medians are over these.
    pub repeats: usize,
    /// Pin workers.
    pub pin: bool,
    /// 2 (squares) or 3 (cubes: md and the stencil in 3D).
    pub dims: usize,
}

/// The cases: (app, scenario, nx, ny). The last one is the cache case, sized from the cache.
pub fn cases(cache_bytes: u64) -> [(&'static str, &'static str, usize, usize); 4] {
    let n = cache_case_side(cache_bytes, 2);
    [("md", "gravity", 32, 32), ("md", "contraction", 32, 32), ("stencil", "drift", 32, 32), ("stencil", "drift", n, n)]
}

/// The cases' grids, `[nx, ny, nz]`, for `dims` dimensions: [`cases`]' squares, or in 3D the
/// cube of about as many boxes as each square (`scaling`'s report grid: 32² becomes 10³) and a
/// cache case sized from the cache as a cube.
pub fn grids(cache_bytes: u64, dims: usize) -> [(&'static str, &'static str, [usize; 3]); 4] {
    let squares = cases(cache_bytes);
    std::array::from_fn(|i| {
        let (app, scenario, nx, ny) = squares[i];
        let grid = match (dims, i) {
            (3, 3) => [cache_case_side(cache_bytes, 3); 3],
            (3, _) => crate::scaling::Sizes::Report.grid(1, (nx, ny), 3),
            _ => [nx, ny, 1],
        };
        (app, scenario, grid)
    })
}

/// Side of the stencil grid for the cache table, a square (`dims` 2) or a cube (3): the smallest
/// whose data (a box is its tile in both buffers and a face of each neighbour: 4,608 bytes in 2D,
/// 11,264 in 3D) is over 1.1 × the cache, so the whole does not fit while a thread may hold up
/// to ~90 % of the boxes and still fit. A balancer that gives one thread more, lighter boxes
/// must not turn a fitting share into a thrashing one: with 14×14 boxes and a 512 KiB cache
/// (fits up to 65 % of the boxes), pbs's time-balanced split overflowed the cache on some maps.
pub fn cache_case_side(cache_bytes: u64, dims: usize) -> usize {
    let per_box = stencil_box_bytes(dims);
    let mut n: u64 = 2;
    while (n.pow(dims as u32) * per_box) as f64 <= 1.1 * cache_bytes as f64 {
        n += 1;
    }
    n as usize
}

/// A stencil box's data in `dims` dimensions, as the cache model counts it: its tile in both
/// buffers and a face of each of its `2 × dims` neighbours.
pub fn stencil_box_bytes(dims: usize) -> u64 {
    let layers = if dims == 3 { 2 } else { 1 };
    let app = pbs_apps::build_3d("stencil", "drift", 2, 2, layers, 1).expect("a 2 × 2 stencil builds");
    let f = app.footprint();
    f.box_bytes + 2 * dims as u64 * f.halo_bytes
}

/// Runs the matrix and writes `report.md`, `results.json` and the PNGs into `out`; an error
/// after writing them if the schedulers of a run ended in different states.
pub fn write(out: &Path, s: &MatrixSettings) -> Result<PathBuf, String> {
    let cache_bytes = RunSetup::machine_cache_bytes();
    let cases = grids(cache_bytes, s.dims);
    // Every case's runs are kept for the report.
    let all = run::schedulers("all").expect("all is valid").len();
    run::check_records(s.iters, all, cases.len().saturating_mul(s.repeats))?;
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let bar = progress::bar(progress::units(&[cases.len(), s.repeats, 2, 4, s.iters]), "report");
    let mut measured = Vec::new();
    for &(app, scenario, [nx, ny, nz]) in &cases {
        bar.set_message(format!("{app} {scenario} {}", crate::scaling::grid_name([nx, ny, nz])));
        // Run r uses seed r + 1: the median is over load maps (the stencil's Perlin map,
        // md's initial velocities) as well as over timing noise, not over one chosen map.
        let setup = |r: usize| RunSetup {
            app: app.into(),
            scenario: scenario.into(),
            schedulers: run::schedulers("all").expect("all is valid"),
            threads: s.threads,
            iters: s.iters,
            nx,
            ny,
            nz,
            cache_bytes,
            pin: s.pin,
            seed: r as u64 + 1,
            turn_iters: run::TURN_ITERS,
        };
        let runs: Vec<Vec<RunRow>> =
            (0..s.repeats).map(|r| run::run(&setup(r), || bar.inc(1))).collect::<Result<_, _>>()?;
        measured.push(CaseRuns { app, scenario, grid: [nx, ny, nz], runs });
    }
    bar.finish_and_clear();
    let path = render(out, s, cache_bytes, &measured)?;
    check_cases(&measured, &path)?;
    Ok(path)
}

/// The first case whose schedulers ended a run in different states, as an error that points
/// to the report written at `path`.
fn check_cases(measured: &[CaseRuns], path: &Path) -> Result<(), String> {
    for case in measured {
        let what = format!("{} {} {}", case.app, case.scenario, crate::scaling::grid_name(case.grid));
        run::check_checksums(&what, &case.runs)
            .map_err(|e| format!("{e} (the report, {}, shows it)", path.display()))?;
    }
    Ok(())
}

/// One case of the matrix and its runs, each run a row per scheduler.
struct CaseRuns {
    app: &'static str,
    scenario: &'static str,
    /// `[nx, ny, nz]`.
    grid: [usize; 3],
    runs: Vec<Vec<RunRow>>,
}

/// Writes the report of `measured` (the last case is the cache case) into `out`.
fn render(out: &Path, s: &MatrixSettings, cache_bytes: u64, measured: &[CaseRuns]) -> Result<PathBuf, String> {
    let mut md = String::new();
    let _ = writeln!(md, "# Schedulers side by side on the grid apps\n");
    let _ = writeln!(
        md,
        "`pbs-bench report`: {} threads, {} iterations per run, {} runs per case, run r with seed r (the stencil's Perlin \
         map, md's initial velocities); within a run the schedulers take turns, {} iterations each, so that a drift in the machine's speed hits all alike; medians over runs; `pbs / this` is the median of the ratios within each run. Modelled cache: a per-thread LRU of {} KiB (this machine's per-core cache). Hardware counters: {}.\n",
        s.threads,
        s.iters,
        s.repeats,
        run::TURN_ITERS,
        cache_bytes / 1024,
        hw_line()
    );
    let bound = measured.iter().flat_map(|c| c.runs.iter().flatten()).map(|r| (r.threads, r.pinned_workers));
    let _ = writeln!(md, "Threads: {}.\n", run::pinning_note(bound));
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 16 {
        let _ = writeln!(
            md,
            "No machine with more cores was available for this report: the 2/4/8/16-thread table is not measured here \
             (`pbs-bench scaling` measures it on a machine that has them).\n"
        );
    }
    let mut all: Vec<Vec<RunRow>> = Vec::new();
    let mut panels = Vec::new();
    for (ci, case) in measured.iter().enumerate() {
        let CaseRuns { app, scenario, grid, ref runs } = *case;
        let name = crate::scaling::grid_name(grid);
        let last = runs.last().expect("repeats ≥ 1").clone();
        let med = |sched: &str, f: &dyn Fn(&RunRow) -> f64| median_over(runs, sched, f);
        let _ = writeln!(md, "## {app} · {scenario} · {name} boxes\n");
        let mut t = Table::new(&[
            "scheduler",
            "iter ms (median)",
            "pbs / this",
            "efficiency",
            "max_avg",
            "max_avg per phase",
            "affinity",
            "migrations / iter",
            "rebalances (critical % wall)",
            "effort ms",
            "modelled misses",
            "checksum",
        ]);
        for row in &last {
            let ms = med(&row.scheduler, &|r| r.iter_ms_median);
            t.row(vec![
                row.scheduler.clone(),
                format!("{ms:.3}"),
                format!("{:.2}", median_pbs_over(runs, &row.scheduler)),
                format!("{:.3}", med(&row.scheduler, &|r| r.efficiency)),
                format!("{:.3}", med(&row.scheduler, &|r| r.max_avg)),
                run::phases(
                    &(0..row.phase_max_avg.len())
                        .map(|i| med(&row.scheduler, &|r| r.phase_max_avg.get(i).copied().unwrap_or(1.0)))
                        .collect::<Vec<_>>(),
                ),
                row.affinity
                    .map_or("-".into(), |_| format!("{:.3}", med(&row.scheduler, &|r| r.affinity.unwrap_or(0.0)))),
                format!("{:.1}", med(&row.scheduler, &|r| r.migrations_per_iter)),
                run::rebalances(
                    med(&row.scheduler, &|r| r.rebalances as f64) as usize,
                    med(&row.scheduler, &|r| r.rebalance_critical_fraction),
                ),
                format!("{:.3}", med(&row.scheduler, &|r| r.effort_ms_median)),
                format!("{:.0}", med(&row.scheduler, &|r| r.modelled_misses as f64)),
                row.checksum.clone(),
            ]);
        }
        if ci + 1 == measured.len() {
            let _ = writeln!(
                md,
                "### Cache misses (in the spirit of the paper's Table 4)\n\n{name} boxes, {} KiB of data: an equal share per thread fits \
                 a {} KiB cache, the whole does not (sized from the cache, `cache_case_side`). {}\n",
                grid.iter().product::<usize>() as u64 * stencil_box_bytes(s.dims) / 1024,
                cache_bytes / 1024,
                if last.iter().any(|r| r.hw_counters.is_some()) {
                    "Hardware L1D/LLC read misses are in results.json; below, the modelled figure."
                } else {
                    "No hardware counters here: **modelled** per-thread LRU misses."
                }
            );
            let mut c = Table::new(&["scheduler", "modelled miss rate", "misses", "vs eager"]);
            let eager = med("eager", &|r| r.modelled_misses as f64);
            for row in &last {
                let m = med(&row.scheduler, &|r| r.modelled_misses as f64);
                let rate = med(&row.scheduler, &|r| r.modelled_misses as f64 / r.modelled_accesses.max(1) as f64);
                c.row(vec![
                    row.scheduler.clone(),
                    format!("{:.3} %", 100.0 * rate),
                    format!("{m:.0}"),
                    format!("{:.3}", m / eager),
                ]);
            }
            let _ = writeln!(md, "{}", c.markdown());
        }
        let differing: Vec<String> = (1..)
            .zip(runs)
            .filter(|(_, run)| run::checksum_mismatch(run).is_some())
            .map(|(r, _)| r.to_string())
            .collect();
        let verdict = if differing.is_empty() {
            "identical between schedulers in every run".to_string()
        } else {
            format!("**differ** between schedulers in run {} (of {})", differing.join(", "), runs.len())
        };
        let _ = writeln!(md, "{}\nChecksums {verdict}.\n", t.markdown());
        let mut per_run = Table::new(&["run (seed)", "static max_avg", "pbs / static", "pbs / ws", "pbs / eager"]);
        for (r, run) in runs.iter().enumerate() {
            let static_imbalance = row_of(run, "static").max_avg;
            per_run.row(vec![
                format!("{}", r + 1),
                format!("{static_imbalance:.3}"),
                format!("{:.2}", pbs_over(run, "static")),
                format!("{:.2}", pbs_over(run, "ws")),
                format!("{:.2}", pbs_over(run, "eager")),
            ]);
        }
        let _ = writeln!(md, "Per run:\n\n{}", per_run.markdown());
        panels.push(iteration_panel(case));
        if ci == 0 {
            owner_maps(out, &last, grid)?;
            busy_plot(out, &last)?;
        }
        all.push(last);
    }
    panels::line_panels(&out.join("iteration_time.png"), 1200, 900, 2, &panels)?;
    let _ = writeln!(
        md,
        "![iteration time](iteration_time.png)\n\n![busy time per thread](busy.png)\n\n![pbs owner maps](owners.png)\n\n\
         Owner maps of pbs on md gravity at the first, middle and last iteration{}; darker = more work.\n",
        if s.dims == 3 { " (each cube layer by layer, z = 0 at the top left)" } else { "" }
    );
    let flat: Vec<&RunRow> = all.iter().flatten().collect();
    std::fs::write(out.join("results.json"), serde_json::to_string_pretty(&flat).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let path = out.join("report.md");
    std::fs::write(&path, md).map_err(|e| e.to_string())?;
    Ok(path)
}

/// The row of `scheduler` in one run.
pub fn row_of<'a>(run: &'a [RunRow], scheduler: &str) -> &'a RunRow {
    run.iter().find(|x| x.scheduler == scheduler).unwrap_or_else(|| panic!("{scheduler} has no row in this run"))
}

/// Median over runs of `f` of `scheduler`'s row.
pub fn median_over(runs: &[Vec<RunRow>], scheduler: &str, f: &dyn Fn(&RunRow) -> f64) -> f64 {
    Stats::of(&runs.iter().map(|r| f(row_of(r, scheduler))).collect::<Vec<_>>()).median
}

/// pbs's `time` over `scheduler`'s within one run (same seed, same machine state).
fn pbs_ratio(run: &[RunRow], scheduler: &str, time: fn(&RunRow) -> f64) -> f64 {
    time(row_of(run, "pbs")) / time(row_of(run, scheduler))
}

/// pbs's median iteration time over `scheduler`'s within one run.
pub fn pbs_over(run: &[RunRow], scheduler: &str) -> f64 {
    pbs_ratio(run, scheduler, |r| r.iter_ms_median)
}

/// `pbs / scheduler` on `time` as reports give it: the median over runs of the ratio within
/// each run, not a ratio of medians.
pub fn median_pbs_ratio(runs: &[Vec<RunRow>], scheduler: &str, time: fn(&RunRow) -> f64) -> f64 {
    Stats::of(&runs.iter().map(|run| pbs_ratio(run, scheduler, time)).collect::<Vec<_>>()).median
}

/// [`median_pbs_ratio`] on median iteration times.
pub fn median_pbs_over(runs: &[Vec<RunRow>], scheduler: &str) -> f64 {
    median_pbs_ratio(runs, scheduler, |r| r.iter_ms_median)
}

fn hw_line() -> String {
    match pbs_scheduler::counters::ThreadCounters::open() {
        Ok(c) if c.hardware() => "available (L1D and LLC read misses in results.json)".into(),
        Ok(c) => {
            format!("unavailable — {}; the miss figures are modelled", c.unavailable_reason().unwrap_or("unknown"))
        }
        Err(e) => format!("unavailable — {e}; the miss figures are modelled"),
    }
}

/// The iteration times of the last run of `case`, a line per scheduler.
fn iteration_panel(case: &CaseRuns) -> Panel {
    Panel {
        title: format!("{} {} {}: iteration time", case.app, case.scenario, crate::scaling::grid_name(case.grid)),
        x_label: "iteration".into(),
        y_label: "ms".into(),
        log_x: false,
        log_y: false,
        series: per_scheduler(case.runs.last().expect("repeats ≥ 1"), |r| &r.iteration_ms, Stroke::Solid),
    }
}

/// A line per scheduler of `rows`, in their order and colours, through `values` at 0, 1, 2, ….
fn per_scheduler(rows: &[RunRow], values: fn(&RunRow) -> &[f64], stroke: Stroke) -> Vec<Series> {
    rows.iter()
        .enumerate()
        .map(|(i, r)| Series {
            label: r.scheduler.clone(),
            points: values(r).iter().enumerate().map(|(k, &v)| (k as f64, v)).collect(),
            color: panels::colour(i),
            stroke,
        })
        .collect()
}

fn busy_plot(out: &Path, rows: &[RunRow]) -> Result<(), String> {
    let panel = Panel {
        title: "busy time per thread (md gravity, whole run)".into(),
        x_label: "thread".into(),
        y_label: "ms".into(),
        log_x: false,
        log_y: false,
        series: per_scheduler(rows, |r| &r.busy_ms, Stroke::LinePoints),
    };
    panels::line_panels(&out.join("busy.png"), 800, 500, 1, &[panel])
}

fn owner_maps(out: &Path, rows: &[RunRow], [nx, ny, nz]: [usize; 3]) -> Result<(), String> {
    let grid = pbs::Grid::new_3d(nx, ny, nz).map_err(|e| e.to_string())?;
    let pbs = rows.iter().find(|r| r.scheduler == "pbs").expect("pbs ran");
    let maps: Vec<OwnerMap> = pbs
        .snapshots
        .iter()
        .map(|(it, owners, work)| OwnerMap {
            title: format!("iteration {it}"),
            grid,
            loads: work,
            owners,
            positions: &[],
        })
        .collect();
    panels::owner_maps(&out.join("owners.png"), maps.len().max(1), 320, &maps)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reports' `pbs / x` is the median over runs of the ratio within each run, not the
    /// ratio of the medians: runs at 0.5, 1.5 and 0.2 read 0.5 where the medians' ratio is 1.
    #[test]
    fn a_ratio_is_the_median_of_the_ratios_within_each_run() {
        let setup = crate::run::md_gravity(vec!["pbs".into(), "static".into()], 1, 1, 4);
        let template = crate::run::run(&setup, || {}).unwrap();
        let with = |pbs: f64, other: f64| {
            let mut run = template.clone();
            (run[0].iter_ms_median, run[1].iter_ms_median) = (pbs, other);
            (run[0].iter_ms_mean, run[1].iter_ms_mean) = (2.0 * pbs, other);
            run
        };
        let runs = [with(1.0, 2.0), with(3.0, 2.0), with(2.0, 10.0)];
        assert_eq!(pbs_over(&runs[1], "static"), 1.5);
        assert_eq!(median_pbs_over(&runs, "static"), 0.5);
        assert_eq!(median_pbs_ratio(&runs, "static", |r| r.iter_ms_mean), 1.0);
        assert_eq!(median_over(&runs, "pbs", &|r| r.iter_ms_median), 2.0);
        assert_eq!(median_over(&runs, "static", &|r| r.iter_ms_median), 2.0);
        assert_eq!(row_of(&runs[2], "static").iter_ms_median, 10.0);
        let missing = std::panic::catch_unwind(|| row_of(&runs[0], "ws").scheduler.clone()).unwrap_err();
        assert_eq!(missing.downcast_ref::<String>().map(String::as_str), Some("ws has no row in this run"));
    }

    /// `report`'s page reads every cell from the runs: each column the median over runs of that
    /// scheduler's figure (the runs scale every figure by 1, 1.2 and 1.9, so the median, the
    /// mean and the last run all differ), `pbs / this` the median of the ratios within each
    /// run, the cache table only under the last case, one checksum line per case, a row per
    /// run; results.json holds each case's last run.
    #[test]
    fn the_report_reads_its_cells_from_the_runs() {
        let names = ["pbs", "static", "ws", "eager"].map(String::from).to_vec();
        let template = crate::run::run(&crate::run::md_gravity(names, 2, 2, 4), || {}).unwrap();
        let k = |name: &str| 1.0 + template.iter().position(|r| r.scheduler == name).unwrap() as f64;
        let scale = [1.0, 1.2, 1.9];
        let iter_ms = |name: &str, r: usize| match name {
            "pbs" => [1.0, 3.0, 2.0][r],
            "static" => [2.0, 2.0, 10.0][r],
            "ws" => 4.0,
            _ => 1.0,
        };
        let runs = |differ: bool| -> Vec<Vec<RunRow>> {
            (0..3)
                .map(|r| {
                    let mut run = template.clone();
                    for row in &mut run {
                        let (f, b) = (scale[r], k(&row.scheduler));
                        row.iter_ms_median = iter_ms(&row.scheduler, r);
                        row.efficiency = 0.1 * b * f;
                        row.max_avg = b * f;
                        row.phase_max_avg = vec![b * f, 1.5 * b * f];
                        row.affinity = (row.scheduler != "eager").then_some(0.2 * b * f);
                        row.migrations_per_iter = 2.0 * b * f;
                        row.rebalances = (10.0 * b * f).round() as usize;
                        row.rebalance_critical_fraction = 0.01 * b * f;
                        row.effort_ms_median = 3.0 * b * f;
                        row.modelled_misses = (1000.0 * b * f).round() as u64;
                        row.modelled_accesses = 100_000;
                        row.checksum = if differ && r == 1 && row.scheduler == "ws" { "1".into() } else { "0".into() };
                        if row.scheduler != "pbs" {
                            // The owner maps are pbs's: no other row has one to draw.
                            row.snapshots.clear();
                        }
                        if differ {
                            // Other pictures for the second case: its owners and busy times turned round.
                            row.snapshots
                                .iter_mut()
                                .for_each(|(_, owners, _)| owners.iter_mut().for_each(|o| *o = 1 - *o));
                            row.busy_ms.reverse();
                        }
                    }
                    run
                })
                .collect()
        };
        let cache_side = cache_case_side(64 * 1024, 2);
        let measured = [
            CaseRuns { app: "md", scenario: "gravity", grid: [4, 4, 1], runs: runs(false) },
            CaseRuns { app: "stencil", scenario: "drift", grid: [cache_side, cache_side, 1], runs: runs(true) },
        ];
        let out = std::env::temp_dir().join(format!("pbs-matrix-render-{}", std::process::id()));
        std::fs::create_dir_all(&out).unwrap();
        let settings = MatrixSettings { threads: 2, iters: 2, repeats: 3, pin: false, dims: 2 };
        let path = render(&out, &settings, 64 * 1024, &measured).unwrap();
        let md = std::fs::read_to_string(&path).unwrap();
        assert!(md.contains("`pbs-bench report`: 2 threads, 2 iterations per run, 3 runs per case"), "{md}");
        assert!(md.contains("a per-thread LRU of 64 KiB"), "{md}");
        let heading = format!("## stencil · drift · {cache_side}×{cache_side} boxes");
        let (first, second) = md.split_once(&heading).expect("the second case's heading");
        assert!(first.contains("## md · gravity · 4×4 boxes"), "{md}");
        assert!(!first.contains("Cache misses") && second.contains("### Cache misses"), "{md}");
        assert!(
            second.contains("4×4 boxes, 72 KiB of data: an equal share per thread fits a 64 KiB cache"),
            "{second}"
        );
        assert!(first.contains("Checksums identical between schedulers in every run."), "{first}");
        assert!(second.contains("Checksums **differ** between schedulers in run 2 (of 3)."), "{second}");
        let err = check_cases(&measured, &path).unwrap_err();
        assert!(err.starts_with("stencil drift 4×4, run 2 (seed 1): ws ended with checksum 1, "), "{err}");
        assert!(err.ends_with(&format!("(the report, {}, shows it)", path.display())), "{err}");
        assert_eq!(check_cases(&measured[..1], &path), Ok(()));
        let ratio = |name: &str| match name {
            "pbs" => 1.0,
            "eager" => 2.0,
            _ => 0.5,
        };
        for row in &template {
            let (name, b) = (row.scheduler.as_str(), k(&row.scheduler) * 1.2);
            let affinity = if name == "eager" { "-".into() } else { format!("{:.3}", 0.2 * b) };
            let line = format!(
                "| {name} | {:.3} | {:.2} | {:.3} | {:.3} | {:.2}/{:.2} | {affinity} | {:.1} | {} ({:.1} %) | {:.3} | {:.0} | 0 |",
                Stats::of(&[iter_ms(name, 0), iter_ms(name, 1), iter_ms(name, 2)]).median,
                ratio(name),
                0.1 * b,
                b,
                b,
                1.5 * b,
                2.0 * b,
                (10.0 * b).round(),
                b,
                3.0 * b,
                (1000.0 * b).round(),
            );
            assert_eq!(first.matches(&line).count(), 1, "{line} in\n{first}");
            let eager = 1000.0 * k("eager") * 1.2;
            let cache = format!(
                "| {name} | {:.3} % | {:.0} | {:.3} |",
                100.0 * 1000.0 * b / 100_000.0,
                1000.0 * b,
                1000.0 * b / eager
            );
            assert!(second.contains(&cache) && !first.contains(&cache), "{cache} in\n{second}");
        }
        for (r, (st, ws, eager)) in [(0.5, 0.25, 1.0), (1.5, 0.75, 3.0), (0.2, 0.5, 2.0)].into_iter().enumerate() {
            let line = format!("| {} | {:.3} | {st:.2} | {ws:.2} | {eager:.2} |", r + 1, k("static") * scale[r]);
            assert!(first.contains(&line) && second.contains(&line), "{line} in\n{md}");
        }
        let json: Vec<serde_json::Value> =
            serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
        assert_eq!(json.len(), 2 * template.len(), "the last run of each case");
        for r in &json {
            let expected = 1.9 * k(r["scheduler"].as_str().unwrap());
            assert!((r["max_avg"].as_f64().unwrap() - expected).abs() < 1e-12, "{r}");
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(md.contains("No machine with more cores was available"), cores < 16, "{md}");
        let hardware = pbs_scheduler::counters::ThreadCounters::open().is_ok_and(|c| c.hardware());
        let counters = if hardware { "Hardware counters: available (" } else { "Hardware counters: unavailable — " };
        assert!(md.contains(counters), "{md}");
        // The pictures are those of the runs: owner maps and busy times of the first case,
        // iteration times of every case's last run.
        let drawn = out.join("expected");
        std::fs::create_dir_all(&drawn).unwrap();
        let first_last = &measured[0].runs[2];
        owner_maps(&drawn, first_last, [4, 4, 1]).unwrap();
        busy_plot(&drawn, first_last).unwrap();
        let panels: Vec<Panel> = measured.iter().map(iteration_panel).collect();
        panels::line_panels(&drawn.join("iteration_time.png"), 1200, 900, 2, &panels).unwrap();
        for png in ["iteration_time.png", "busy.png", "owners.png"] {
            assert_eq!(&std::fs::read(out.join(png)).unwrap()[1..4], b"PNG", "{png}");
            assert!(std::fs::read(out.join(png)).unwrap() == std::fs::read(drawn.join(png)).unwrap(), "{png}");
        }
        owner_maps(&drawn, &measured[1].runs[2], [4, 4, 1]).unwrap();
        busy_plot(&drawn, &measured[1].runs[2]).unwrap();
        for png in ["busy.png", "owners.png"] {
            let second = std::fs::read(drawn.join(png)).unwrap();
            assert!(std::fs::read(out.join(png)).unwrap() != second, "{png}: the test needs cases drawn apart");
        }
        let lines = &panels[1].series;
        assert_eq!(lines.len(), template.len());
        for (i, (line, row)) in lines.iter().zip(&template).enumerate() {
            assert_eq!(
                (line.label.as_str(), line.color, line.stroke),
                (row.scheduler.as_str(), panels::colour(i), Stroke::Solid)
            );
            let expected: Vec<(f64, f64)> = row.iteration_ms.iter().enumerate().map(|(k, &v)| (k as f64, v)).collect();
            assert_eq!(line.points, expected);
        }
        std::fs::remove_dir_all(out).ok();
    }

    /// The stencil's box as the cache model counts it: 16² cells in both buffers and four
    /// 16-cell faces in 2D, 8³ cells and six 8² faces in 3D.
    #[test]
    fn the_cache_case_overflows_the_cache_only_as_a_whole() {
        assert_eq!(stencil_box_bytes(2), 2 * 16 * 16 * 8 + 4 * 16 * 8);
        assert_eq!(stencil_box_bytes(3), 2 * 8 * 8 * 8 * 8 + 6 * 8 * 8 * 8);
        assert_eq!(cache_case_side(512 * 1024, 2), 12);
        for dims in [2u32, 3] {
            let per_box = stencil_box_bytes(dims as usize);
            for kib in [256u64, 512, 1024, 2048, 32 * 1024] {
                let n = cache_case_side(kib * 1024, dims as usize) as u64;
                let (whole, less) = (n.pow(dims) * per_box, (n - 1).pow(dims) * per_box);
                assert!(whole > kib * 1024, "{kib} KiB: the whole ({whole} B) must not fit");
                assert!(less as f64 <= 1.1 * (kib * 1024) as f64, "{kib} KiB, {dims}D: the smallest side that does");
                if dims == 2 {
                    assert!(whole * 8 / 10 <= kib * 1024 + per_box * n, "{kib} KiB: 80 % of the boxes must fit");
                }
            }
        }
    }

    /// In 3D the report's cases are cubes of about the squares' boxes (10³ for 32²), the cache
    /// case a cube sized from the cache; in 2D its squares.
    #[test]
    fn the_cases_are_squares_or_cubes() {
        let cache = 1 << 20;
        let flat = grids(cache, 2);
        let side = cache_case_side(cache, 2);
        assert_eq!(flat.map(|c| c.2), [[32, 32, 1], [32, 32, 1], [32, 32, 1], [side, side, 1]]);
        let cubes = grids(cache, 3);
        let cube = cache_case_side(cache, 3);
        assert_eq!(cubes.map(|c| c.2), [[10, 10, 10], [10, 10, 10], [10, 10, 10], [cube, cube, cube]]);
        assert_eq!(cubes.map(|c| (c.0, c.1)), flat.map(|c| (c.0, c.1)));
        assert!(cube < side, "{cube} against {side}");
    }
}
