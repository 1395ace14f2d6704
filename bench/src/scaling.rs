//! `pbs-bench scaling`: the side-by-side table of `report` at several thread counts (2, 4, 8
//! and 16 by default): per case and thread count, pbs's iteration time, its ratio to static,
//! ws and eager (medians of within-run ratios, of median iterations and of whole runs' mean
//! iterations), its efficiency and the affinity of pbs, ws and eager; a PNG of iteration time
//! against threads per scheduler.
//!
//! The grid is the report's 32×32 by default; [`Sizes::Weak`] keeps the boxes per thread
//! constant (the grid grows with the threads, up to [`MAX_SIDE`]² boxes), [`Sizes::Strong`]
//! fixes a larger grid for every thread count. md keeps its particles per box and the stencil
//! its cells per box at every size, so a box costs the same at every size.
//!
//! Timings with more threads than cores measure the operating system's time slicing, not a
//! scheduler, so thread counts above the machine's cores are refused unless asked for.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::matrix::{cases, median_over, median_pbs_over, median_pbs_ratio};
use crate::run::{self, RunRow, RunSetup};
use crate::table::Table;
use pbs_plot::panels::{self, Panel, Series, Stroke};
use pbs_plot::progress;

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalingSettings {
    /// Thread counts, in order.
    pub threads: Vec<usize>,
    /// Iterations per run.
    pub iters: usize,
    /// Runs per case and thread count (medians are over these).
    pub repeats: usize,
    /// Pin workers.
    pub pin: bool,
    /// How the grid grows with the threads.
    pub sizes: Sizes,
    /// The grids' dimensions: 2 (squares, one layer) or 3 (cubes: md and the stencil in 3D).
    pub dims: usize,
    /// The schedulers run (`run::schedulers`' names); pbs and the three it is compared with,
    /// static, ws and eager, among them.
    pub schedulers: Vec<String>,
}

/// The schedulers every scaling row compares: pbs and the three of its ratios.
pub const COMPARED: [&str; 4] = ["pbs", "static", "ws", "eager"];

/// `run::schedulers(spec)`, refused unless it holds every one of [`COMPARED`].
pub fn schedulers(spec: &str) -> Result<Vec<String>, String> {
    let names = run::schedulers(spec)?;
    match COMPARED.iter().find(|c| !names.iter().any(|n| n == *c)) {
        Some(missing) => Err(format!(
            "--schedulers {spec}: scaling compares pbs with static, ws and eager, so it needs all four ({missing} is missing)"
        )),
        None => Ok(names),
    }
}

/// The largest grid side `scaling` runs: 512×512 boxes.
pub const MAX_SIDE: usize = 512;

/// How the grid grows with the threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sizes {
    /// The report's grids (32×32) at every thread count.
    Report,
    /// Weak scaling: about this many boxes per thread, on the nearest square grid (at most
    /// [`MAX_SIDE`]²).
    Weak {
        /// Boxes per thread.
        boxes_per_thread: usize,
    },
    /// Strong scaling: this square grid at every thread count.
    Strong {
        /// Boxes along each side.
        side: usize,
    },
}

/// The side of the square grid nearest to `boxes_per_thread × threads` boxes (at least 2), before
/// [`MAX_SIDE`] caps it.
pub fn weak_side(boxes_per_thread: usize, threads: usize) -> usize {
    ((boxes_per_thread.saturating_mul(threads) as f64).sqrt().round() as usize).max(2)
}

/// The side of the cube nearest to `boxes_per_thread × threads` boxes (at least 2), before
/// [`MAX_CUBE_SIDE`] caps it.
pub fn weak_cube_side(boxes_per_thread: usize, threads: usize) -> usize {
    ((boxes_per_thread.saturating_mul(threads) as f64).cbrt().round() as usize).max(2)
}

/// The largest cube side: 64³ boxes, as many as [`MAX_SIDE`]².
pub const MAX_CUBE_SIDE: usize = 64;

/// The weak-scaling grid for `threads` threads at `boxes_per_thread` boxes each: a square
/// (`dims` 2) of at most [`MAX_SIDE`] a side or a cube (`dims` 3) of at most [`MAX_CUBE_SIDE`].
pub fn weak_grid(boxes_per_thread: usize, threads: usize, dims: usize) -> [usize; 3] {
    if dims == 3 {
        [weak_cube_side(boxes_per_thread, threads).min(MAX_CUBE_SIDE); 3]
    } else {
        let side = weak_side(boxes_per_thread, threads).min(MAX_SIDE);
        [side, side, 1]
    }
}

/// Whether a weak-scaling grid is capped: the side asked for is over the largest.
pub fn weak_capped(boxes_per_thread: usize, threads: usize, dims: usize) -> bool {
    if dims == 3 {
        weak_cube_side(boxes_per_thread, threads) > MAX_CUBE_SIDE
    } else {
        weak_side(boxes_per_thread, threads) > MAX_SIDE
    }
}

/// `nx×ny`, or `nx×ny×nz` with more than one layer (as a [`pbs::Grid`] prints itself).
pub fn grid_name([nx, ny, nz]: [usize; 3]) -> String {
    pbs::Grid::new_3d(nx, ny, nz).map_or_else(|e| e.to_string(), |g| g.to_string())
}

/// An error unless `dims` is 2 or 3.
pub fn check_dims(dims: usize) -> Result<(), String> {
    match dims {
        2 | 3 => Ok(()),
        d => Err(format!("--dims {d}: the grids are squares (2) or cubes (3)")),
    }
}

impl Sizes {
    /// Checks the sizes for grids of `dims` dimensions: a side of 2 to [`MAX_SIDE`] boxes (a
    /// cube's to [`MAX_CUBE_SIDE`]), at least one box per thread.
    pub fn checked(self, dims: usize) -> Result<Sizes, String> {
        check_dims(dims)?;
        let most = if dims == 3 { MAX_CUBE_SIDE } else { MAX_SIDE };
        match self {
            Sizes::Weak { boxes_per_thread: 0 } => Err("--weak needs at least 1 box per thread".into()),
            Sizes::Strong { side } if !(2..=most).contains(&side) => {
                Err(format!("--strong {side}: the side must be 2 to {most} boxes"))
            }
            s => Ok(s),
        }
    }

    /// The grid at `threads` threads for a case whose report grid is `report`, in `dims`
    /// dimensions (the report's grid in 3D: the cube of about as many boxes).
    pub fn grid(self, threads: usize, report: (usize, usize), dims: usize) -> [usize; 3] {
        match (self, dims) {
            (Sizes::Report, 3) => [weak_cube_side(report.0 * report.1, 1); 3],
            (Sizes::Report, _) => [report.0, report.1, 1],
            (Sizes::Weak { boxes_per_thread }, _) => weak_grid(boxes_per_thread, threads, dims),
            (Sizes::Strong { side }, 3) => [side; 3],
            (Sizes::Strong { side }, _) => [side, side, 1],
        }
    }

    /// Under weak scaling, a note naming the thread counts whose grid the largest caps (fewer
    /// boxes per thread there than asked); `None` when none is capped.
    pub fn capped(self, threads: &[usize], dims: usize) -> Option<String> {
        let Sizes::Weak { boxes_per_thread } = self else { return None };
        let capped: Vec<String> =
            threads.iter().filter(|&&t| weak_capped(boxes_per_thread, t, dims)).map(|t| t.to_string()).collect();
        let largest = grid_name(if dims == 3 { [MAX_CUBE_SIDE; 3] } else { [MAX_SIDE, MAX_SIDE, 1] });
        (!capped.is_empty()).then(|| {
            format!(
                "note: --weak {boxes_per_thread}: at {} threads the grid is capped at {largest} boxes, \
                 fewer boxes per thread than asked (the rows' nx, ny and nz say how many)",
                capped.join(", ")
            )
        })
    }

    /// How a case is named: with its grid, except under weak scaling where the grid changes.
    fn case(self, app: &str, scenario: &str, grid: [usize; 3]) -> String {
        match self {
            Sizes::Weak { boxes_per_thread } => format!("{app} {scenario}, {boxes_per_thread} boxes/thread"),
            _ => format!("{app} {scenario} {}", grid_name(grid)),
        }
    }
}

/// One line of the table: a case at one thread count.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ScalingRow {
    /// `app scenario nx×ny`, or `app scenario, N boxes/thread` under weak scaling
    pub case: String,
    /// worker threads
    pub threads: usize,
    /// boxes along x and y at this thread count
    pub nx: usize,
    /// boxes along y
    pub ny: usize,
    /// layers of boxes along z (1 on a 2D grid)
    pub nz: usize,
    /// median iteration time of each scheduler run, ms, in the order they ran
    pub iter_ms: Vec<(String, f64)>,
    /// pbs / static, pbs / ws, pbs / eager (medians of within-run ratios of median iterations)
    pub pbs_over: Vec<(String, f64)>,
    /// The same ratios of mean iterations (whole runs' wall times over their iterations):
    /// these count the long iterations that medians leave out
    pub pbs_over_mean: Vec<(String, f64)>,
    /// pbs's efficiency (median)
    pub efficiency: f64,
    /// where the rest of pbs's wall time went, each share's median (`pbs-bench run`'s
    /// `idle_shares`)
    pub idle_pbs: pbs_scheduler::report::IdleShares,
    /// affinity of pbs, ws and eager (medians)
    pub affinity: Vec<(String, f64)>,
    /// the final checksum, the same for every scheduler of every run at this thread count
    pub checksum: String,
    /// `(threads, pinned_workers)` of every run and scheduler (see [`run::pinning_note`])
    #[serde(skip)]
    pub pinned: Vec<(usize, usize)>,
}

/// Refuses thread counts that are zero or, unless `oversubscribe`, above `cores`.
pub fn check_threads(threads: &[usize], cores: usize, oversubscribe: bool) -> Result<(), String> {
    if threads.is_empty() || threads.contains(&0) {
        return Err("--threads needs one or more thread counts, each at least 1".into());
    }
    match threads.iter().find(|&&t| t > cores) {
        Some(t) if !oversubscribe => Err(format!(
            "{t} threads on a machine with {cores} cores: the timings would measure the operating system's time \
             slicing, not the schedulers; run it on a machine with at least {t} cores, or pass --oversubscribe"
        )),
        _ => Ok(()),
    }
}

/// An error where the records of a case's runs would not fit in the memory
/// ([`run::check_records`]; a case's runs are kept until its row is made).
pub fn check_records(s: &ScalingSettings) -> Result<(), String> {
    run::check_records(s.iters, s.schedulers.len(), s.repeats)
}

/// Runs every case of the report (without the cache case) at every thread count.
pub fn measure(s: &ScalingSettings) -> Result<Vec<ScalingRow>, String> {
    check_records(s)?;
    let cases = &cases(RunSetup::machine_cache_bytes())[..3];
    let schedulers = &s.schedulers;
    let units = progress::units(&[s.threads.len(), cases.len(), s.repeats, 2, schedulers.len(), s.iters]);
    let bar = progress::bar(units, "scaling");
    let mut rows = Vec::new();
    for &(app, scenario, report_nx, report_ny) in cases {
        for &threads in &s.threads {
            let [nx, ny, nz] = s.sizes.grid(threads, (report_nx, report_ny), s.dims);
            bar.set_message(format!("{app} {scenario}, {threads} threads"));
            let setup = |r: usize| RunSetup {
                app: app.into(),
                scenario: scenario.into(),
                schedulers: schedulers.clone(),
                threads,
                iters: s.iters,
                nx,
                ny,
                nz,
                cache_bytes: RunSetup::machine_cache_bytes(),
                pin: s.pin,
                seed: r as u64 + 1,
                turn_iters: run::TURN_ITERS,
            };
            let runs: Vec<Vec<RunRow>> =
                (0..s.repeats).map(|r| run::run(&setup(r), || bar.inc(1))).collect::<Result<_, _>>()?;
            // Within a run every scheduler must reach the same state (runs differ in seed).
            run::check_checksums(&format!("{app} {scenario}, {threads} threads"), &runs)?;
            let checksum = runs[0][0].checksum.clone();
            let others = ["static", "ws", "eager"];
            rows.push(ScalingRow {
                case: s.sizes.case(app, scenario, [nx, ny, nz]),
                threads,
                nx,
                ny,
                nz,
                iter_ms: schedulers.iter().map(|x| (x.clone(), median_over(&runs, x, &|r| r.iter_ms_median))).collect(),
                pbs_over: others.iter().map(|x| (x.to_string(), median_pbs_over(&runs, x))).collect(),
                pbs_over_mean: others
                    .iter()
                    .map(|x| (x.to_string(), median_pbs_ratio(&runs, x, |r| r.iter_ms_mean)))
                    .collect(),
                efficiency: median_over(&runs, "pbs", &|r| r.efficiency),
                idle_pbs: run::median_idle(runs.iter().map(|r| crate::matrix::row_of(r, "pbs"))),
                affinity: ["pbs", "ws", "eager"]
                    .iter()
                    .map(|x| (x.to_string(), median_over(&runs, x, &|r| r.affinity.unwrap_or(f64::NAN))))
                    .collect(),
                checksum,
                pinned: runs.iter().flatten().map(|r| (r.threads, r.pinned_workers)).collect(),
            });
        }
    }
    bar.finish_and_clear();
    Ok(rows)
}

/// The value of `name` in a list of pairs.
fn of(pairs: &[(String, f64)], name: &str) -> f64 {
    pairs.iter().find(|(n, _)| n == name).map_or(f64::NAN, |p| p.1)
}

/// The table, one row per case and thread count.
pub fn table(rows: &[ScalingRow]) -> Table {
    let mut t = Table::new(&[
        "case",
        "threads",
        "grid",
        "pbs ms",
        "pbs / static",
        "pbs / ws",
        "pbs / eager",
        "means: pbs / static, ws, eager",
        "efficiency pbs",
        &format!("pbs {}", run::IDLE_TITLE),
        "affinity pbs / ws / eager",
        "checksum",
    ]);
    for r in rows {
        t.row(vec![
            r.case.clone(),
            r.threads.to_string(),
            grid_name([r.nx, r.ny, r.nz]),
            format!("{:.3}", of(&r.iter_ms, "pbs")),
            format!("{:.2}", of(&r.pbs_over, "static")),
            format!("{:.2}", of(&r.pbs_over, "ws")),
            format!("{:.2}", of(&r.pbs_over, "eager")),
            format!(
                "{:.2} / {:.2} / {:.2}",
                of(&r.pbs_over_mean, "static"),
                of(&r.pbs_over_mean, "ws"),
                of(&r.pbs_over_mean, "eager")
            ),
            format!("{:.3}", r.efficiency),
            run::idle(&r.idle_pbs),
            format!("{:.3} / {:.3} / {:.3}", of(&r.affinity, "pbs"), of(&r.affinity, "ws"), of(&r.affinity, "eager")),
            r.checksum.clone(),
        ]);
    }
    t
}

/// Writes `scaling.md`, `scaling.json` and `scaling.png` into `out`.
pub fn write(out: &Path, s: &ScalingSettings, rows: &[ScalingRow], cores: usize) -> Result<PathBuf, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let mut md = String::new();
    let _ = writeln!(md, "# Schedulers side by side at {} threads\n", join(&s.threads));
    let _ = writeln!(
        md,
        "`pbs-bench scaling`: {} iterations per run, {} runs per case and thread count, run r with seed r; within a run \
         the schedulers take turns; medians over runs, `pbs / x` the median of the ratios within each run (of median \
         iterations; under *means*, of whole runs' mean iterations, which count the long ones). Machine: {cores} cores{}; {}.\n",
        s.iters,
        s.repeats,
        if s.threads.iter().any(|&t| t > cores) { " — **oversubscribed**: thread counts above it time the OS's time slicing" } else { "" },
        run::pinning_note(rows.iter().flat_map(|r| r.pinned.iter().copied()))
    );
    let _ = writeln!(
        md,
        "{}\nChecksums (run 1) {} across thread counts for each case, and identical across schedulers in every run.\n\n\
         ![iteration time against threads](scaling.png)\n",
        table(rows).markdown(),
        match (s.sizes, same_across_threads(rows)) {
            (Sizes::Weak { .. }, _) => "change with the grid (weak scaling)",
            (_, true) => "identical",
            (_, false) => "**differ**",
        }
    );
    plot_scaling(&out.join("scaling.png"), rows)?;
    std::fs::write(out.join("scaling.json"), serde_json::to_string_pretty(rows).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let path = out.join("scaling.md");
    std::fs::write(&path, md).map_err(|e| e.to_string())?;
    Ok(path)
}

/// Whether every case ended with one checksum at every thread count.
pub fn same_across_threads(rows: &[ScalingRow]) -> bool {
    rows.iter().all(|r| rows.iter().filter(|o| o.case == r.case).all(|o| o.checksum == r.checksum))
}

fn join(threads: &[usize]) -> String {
    threads.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ")
}

/// One panel per case: iteration time against threads, a line per scheduler.
fn plot_scaling(path: &Path, rows: &[ScalingRow]) -> Result<(), String> {
    let mut cases: Vec<&str> = rows.iter().map(|r| r.case.as_str()).collect();
    cases.dedup();
    let panels: Vec<Panel> = cases
        .iter()
        .map(|case| {
            let mine: Vec<&ScalingRow> = rows.iter().filter(|r| r.case == *case).collect();
            let schedulers: Vec<String> = mine[0].iter_ms.iter().map(|p| p.0.clone()).collect();
            Panel {
                title: format!("{case}: iteration time"),
                x_label: "threads".into(),
                y_label: "ms".into(),
                log_x: true,
                log_y: true,
                series: schedulers
                    .iter()
                    .enumerate()
                    .map(|(i, name)| Series {
                        label: name.clone(),
                        points: mine.iter().map(|r| (r.threads as f64, of(&r.iter_ms, name))).collect(),
                        color: panels::colour(i),
                        stroke: Stroke::LinePoints,
                    })
                    .collect(),
            }
        })
        .collect();
    panels::line_panels(path, 1200, 400, panels.len().max(1), &panels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scheduler_list_must_hold_pbs_and_the_three_it_is_compared_with() {
        assert_eq!(schedulers("eager,ws,static,pbs").unwrap(), ["eager", "ws", "static", "pbs"]);
        assert_eq!(schedulers("all").unwrap().len(), run::schedulers("all").unwrap().len());
        let e = schedulers("pbs,static,ws").unwrap_err();
        assert!(e.contains("eager is missing"), "{e}");
        assert!(schedulers("pbs,static,ws,eager,nope").unwrap_err().contains("unknown scheduler"));
    }

    #[test]
    fn weak_scaling_keeps_the_boxes_per_thread_up_to_the_largest_grid() {
        let weak = Sizes::Weak { boxes_per_thread: 4096 };
        assert_eq!(weak.grid(16, (32, 32), 2), [256, 256, 1]);
        assert_eq!(weak.grid(64, (32, 32), 2), [512, 512, 1]);
        assert_eq!(weak.grid(256, (32, 32), 2), [512, 512, 1], "capped: 1024 boxes per thread");
        assert_eq!(weak.capped(&[16, 64], 2), None);
        let note = weak.capped(&[16, 64, 128, 256], 2).unwrap();
        assert!(note.contains("at 128, 256 threads the grid is capped at 512×512 boxes"), "{note}");
        assert_eq!(Sizes::Strong { side: 512 }.capped(&[1024], 2), None);
        assert_eq!(Sizes::Report.grid(16, (32, 32), 2), [32, 32, 1]);
        assert_eq!(Sizes::Strong { side: 128 }.grid(4, (32, 32), 2), [128, 128, 1]);
        assert!(Sizes::Strong { side: 1024 }.checked(2).unwrap_err().contains("2 to 512"));
        assert!(Sizes::Weak { boxes_per_thread: 0 }.checked(2).is_err());
        // Cubes: about as many boxes, at most 64³ (= 512²).
        assert_eq!(weak.grid(16, (32, 32), 3), [40, 40, 40]);
        assert_eq!(weak.grid(64, (32, 32), 3), [64, 64, 64]);
        assert_eq!(weak.grid(128, (32, 32), 3), [64, 64, 64], "capped: 2048 boxes per thread");
        assert_eq!(weak.capped(&[16, 64], 3), None);
        let note = weak.capped(&[16, 128], 3).unwrap();
        assert!(note.contains("at 128 threads the grid is capped at 64×64×64 boxes"), "{note}");
        assert_eq!(Sizes::Report.grid(16, (32, 32), 3), [10, 10, 10]);
        assert_eq!(Sizes::Strong { side: 20 }.grid(4, (32, 32), 3), [20, 20, 20]);
        assert!(Sizes::Strong { side: 65 }.checked(3).unwrap_err().contains("2 to 64"));
        assert!(Sizes::Report.checked(4).unwrap_err().contains("--dims 4: the grids are squares (2) or cubes (3)"));
        assert_eq!(weak_grid(256, 16, 3), [16, 16, 16]);
        assert_eq!(weak_grid(256, 64, 3), [25, 25, 25]);
        assert_eq!(weak_grid(256, 256, 3), [40, 40, 40]);
        assert_eq!(weak_grid(256, 4096, 2), [512, 512, 1]);
        assert_eq!(weak_grid(1, 1, 3), [2, 2, 2]);
    }

    /// A small scaling run end to end: a row per case and thread count, with the grid it ran,
    /// every scheduler's time, pbs's ratios and one checksum per case; the written report says
    /// the checksums agree, and says so no more once one differs.
    #[test]
    fn a_scaling_run_gives_a_row_per_case_and_thread_count_and_writes_its_report() {
        let settings = ScalingSettings {
            threads: vec![1, 2],
            iters: 2,
            repeats: 1,
            pin: false,
            sizes: Sizes::Strong { side: 4 }.checked(2).unwrap(),
            dims: 2,
            schedulers: COMPARED.iter().map(|s| s.to_string()).collect(),
        };
        let mut rows = measure(&settings).unwrap();
        assert_eq!(rows.len(), 3 * 2);
        for r in &rows {
            assert_eq!((r.nx, r.ny, r.nz), (4, 4, 1));
            assert!(r.case.ends_with(" 4×4"), "{}", r.case);
            assert_eq!(r.iter_ms.len(), 4);
            assert!(COMPARED.iter().all(|x| of(&r.iter_ms, x) > 0.0));
            for x in ["static", "ws", "eager"] {
                let ratio = of(&r.pbs_over, x);
                assert!(ratio > 0.0 && ratio.is_finite() && of(&r.pbs_over_mean, x) > 0.0, "{x}: {ratio}");
            }
            assert!(r.efficiency > 0.0 && r.efficiency <= 1.0 + 1e-9, "{}", r.efficiency);
        }
        assert_eq!((rows[0].threads, rows[1].threads), (1, 2));
        assert_eq!(rows[0].case, rows[1].case);
        assert_ne!(rows[1].case, rows[2].case);
        assert!(of(&rows[0].iter_ms, "nope").is_nan());
        assert!(same_across_threads(&rows));
        let dir = std::env::temp_dir().join(format!("pbs-scaling-test-{}", std::process::id()));
        let md = std::fs::read_to_string(write(&dir, &settings, &rows, 2).unwrap()).unwrap();
        assert!(md.contains("Checksums (run 1) identical across thread counts") && md.contains("at 1, 2 threads"));
        assert!(md.contains("Machine: 2 cores; workers not pinned (`--no-pin`"), "{md}");
        assert!(md.contains(&format!("| {} | 2 | 4×4 |", rows[1].case)), "the table: {md}");
        assert!(dir.join("scaling.png").is_file() && dir.join("scaling.json").is_file());
        rows[1].checksum = "0".into();
        assert!(!same_across_threads(&rows));
        let md = std::fs::read_to_string(write(&dir, &settings, &rows, 2).unwrap()).unwrap();
        assert!(md.contains("**differ**"));
        let _ = std::fs::remove_dir_all(&dir);
        let weak = Sizes::Weak { boxes_per_thread: 64 };
        assert_eq!(weak.case("md", "gravity", [8, 8, 1]), "md gravity, 64 boxes/thread");
        assert_eq!(Sizes::Report.case("md", "gravity", [10, 10, 10]), "md gravity 10×10×10");
    }

    #[test]
    fn thread_counts_above_the_cores_are_refused_unless_asked_for() {
        assert!(check_threads(&[2], 2, false).is_ok());
        let e = check_threads(&[2, 4, 8, 16], 2, false).unwrap_err();
        assert!(e.contains("4 threads on a machine with 2 cores") && e.contains("--oversubscribe"), "{e}");
        assert!(check_threads(&[2, 4], 2, true).is_ok());
        assert!(check_threads(&[], 2, false).is_err());
        assert!(check_threads(&[0, 2], 2, true).unwrap_err().contains("at least 1"));
    }
}
