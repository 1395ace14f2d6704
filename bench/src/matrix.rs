//! `pbs-bench report`: the standard matrix — apps × scenarios × schedulers — run `repeats`
//! times; a markdown report with medians and ratios from the same runs, a cache-miss table in
//! the spirit of the paper's Table 4, and PNG plots (iteration time over iterations, per-thread
//! busy time, pbs's owner maps at three iterations).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::plot::{self, OwnerMap, Panel, Series, PALETTE};
use crate::progress;
use crate::run::{self, RunRow, RunSetup};
use crate::table::Table;
use crate::Stats;

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
}

/// The cases: (app, scenario, nx, ny). The stencil's 14×14 boxes of 2 × 16×16 doubles are
/// ~784 KiB in all: a thread's share fits a 512 KiB per-core cache, the whole does not.
pub const CASES: [(&str, &str, usize, usize); 4] = [
    ("md", "gravity", 32, 32),
    ("md", "contraction", 32, 32),
    ("stencil", "drift", 32, 32),
    ("stencil", "drift", 14, 14),
];

/// Runs the matrix and writes `report.md`, `results.json` and the PNGs into `out`.
pub fn write(out: &Path, s: &MatrixSettings) -> Result<PathBuf, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let bar = progress::bar((CASES.len() * s.repeats * 2 * 4 * s.iters) as u64, "report");
    let mut md = String::new();
    let cache_bytes = RunSetup::machine_cache_bytes();
    let _ = writeln!(md, "# Schedulers side by side on the grid apps\n");
    let _ = writeln!(
        md,
        "`pbs-bench report`: {} threads, {} iterations per run, {} runs per case, run r with seed r (the stencil's Perlin \
         map, md's initial velocities); medians over runs; `pbs / this` is the median of the ratios within each run. Modelled cache: a per-thread LRU of {} KiB (this machine's per-core cache). Hardware counters: {}.\n",
        s.threads,
        s.iters,
        s.repeats,
        cache_bytes / 1024,
        hw_line()
    );
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 16 {
        let _ = writeln!(
            md,
            "No machine with more cores was available for this report: the 2/4/8/16-thread table is not measured.\n"
        );
    }
    let mut all: Vec<Vec<RunRow>> = Vec::new();
    let mut panels = Vec::new();
    for (ci, &(app, scenario, nx, ny)) in CASES.iter().enumerate() {
        bar.set_message(format!("{app} {scenario} {nx}x{ny}"));
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
            cache_bytes,
            pin: s.pin,
            seed: r as u64 + 1,
        };
        let runs: Vec<Vec<RunRow>> =
            (0..s.repeats).map(|r| run::run(&setup(r), || bar.inc(1))).collect::<Result<_, _>>()?;
        let last = runs.last().expect("repeats ≥ 1").clone();
        let med = |sched: &str, f: &dyn Fn(&RunRow) -> f64| {
            Stats::of(
                &runs.iter().map(|r| f(r.iter().find(|x| x.scheduler == sched).expect("ran"))).collect::<Vec<_>>(),
            )
            .median
        };
        let _ = writeln!(md, "## {app} · {scenario} · {nx}×{ny} boxes\n");
        let mut t = Table::new(&[
            "scheduler",
            "iter ms (median)",
            "pbs / this",
            "efficiency",
            "max_avg",
            "affinity",
            "migrations / iter",
            "modelled misses",
            "checksum",
        ]);
        // pbs / this: the median over runs of the ratio within each run (same seed, same
        // machine state), not a ratio of medians.
        let ratio = |run: &[RunRow], sched: &str| {
            let ms = |name: &str| run.iter().find(|x| x.scheduler == name).expect("ran").iter_ms_median;
            ms("pbs") / ms(sched)
        };
        for row in &last {
            let ms = med(&row.scheduler, &|r| r.iter_ms_median);
            let ratios: Vec<f64> = runs.iter().map(|run| ratio(run, &row.scheduler)).collect();
            t.row(vec![
                row.scheduler.clone(),
                format!("{ms:.3}"),
                format!("{:.2}", Stats::of(&ratios).median),
                format!("{:.3}", med(&row.scheduler, &|r| r.efficiency)),
                format!("{:.3}", med(&row.scheduler, &|r| r.max_avg)),
                row.affinity
                    .map_or("-".into(), |_| format!("{:.3}", med(&row.scheduler, &|r| r.affinity.unwrap_or(0.0)))),
                format!("{:.1}", med(&row.scheduler, &|r| r.migrations_per_iter)),
                format!("{:.0}", med(&row.scheduler, &|r| r.modelled_misses as f64)),
                row.checksum.clone(),
            ]);
        }
        if app == "stencil" && nx == 14 {
            let _ = writeln!(
                md,
                "### Cache misses (in the spirit of the paper's Table 4)\n\nThis problem's per-thread share fits a {} KiB cache, the whole does not. \
                 {}\n",
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
        let same = runs.iter().all(|run| run.iter().all(|r| r.checksum == run[0].checksum));
        let _ = writeln!(
            md,
            "{}\nChecksums {} between schedulers in every run.\n",
            t.markdown(),
            if same { "identical" } else { "**differ**" }
        );
        let mut per_run = Table::new(&["run (seed)", "static max_avg", "pbs / static", "pbs / ws", "pbs / eager"]);
        for (r, run) in runs.iter().enumerate() {
            let static_imbalance = run.iter().find(|x| x.scheduler == "static").expect("ran").max_avg;
            per_run.row(vec![
                format!("{}", r + 1),
                format!("{static_imbalance:.3}"),
                format!("{:.2}", ratio(run, "static")),
                format!("{:.2}", ratio(run, "ws")),
                format!("{:.2}", ratio(run, "eager")),
            ]);
        }
        let _ = writeln!(md, "Per run:\n\n{}", per_run.markdown());
        panels.push(Panel {
            title: format!("{app} {scenario} {nx}x{ny}: iteration time"),
            x_label: "iteration".into(),
            y_label: "ms".into(),
            log_x: false,
            log_y: false,
            series: last
                .iter()
                .enumerate()
                .map(|(i, r)| Series {
                    label: r.scheduler.clone(),
                    points: r.iteration_ms.iter().enumerate().map(|(k, &v)| (k as f64, v)).collect(),
                    color: PALETTE[i],
                    dashed: false,
                })
                .collect(),
        });
        if ci == 0 {
            owner_maps(out, &last, nx, ny)?;
            busy_plot(out, &last)?;
        }
        all.push(last);
    }
    bar.finish_and_clear();
    plot::line_panels(&out.join("iteration_time.png"), 1200, 900, 2, &panels)?;
    let _ = writeln!(
        md,
        "![iteration time](iteration_time.png)\n\n![busy time per thread](busy.png)\n\n![pbs owner maps](owners.png)\n\n\
         Owner maps of pbs on md gravity at the first, middle and last iteration; darker = more work.\n"
    );
    let flat: Vec<&RunRow> = all.iter().flatten().collect();
    std::fs::write(out.join("results.json"), serde_json::to_string_pretty(&flat).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let path = out.join("report.md");
    std::fs::write(&path, md).map_err(|e| e.to_string())?;
    Ok(path)
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

fn busy_plot(out: &Path, rows: &[RunRow]) -> Result<(), String> {
    let panel = Panel {
        title: "busy time per thread (md gravity, whole run)".into(),
        x_label: "thread".into(),
        y_label: "ms".into(),
        log_x: false,
        log_y: false,
        series: rows
            .iter()
            .enumerate()
            .map(|(i, r)| Series {
                label: r.scheduler.clone(),
                points: r.busy_ms.iter().enumerate().map(|(t, &v)| (t as f64, v)).collect(),
                color: PALETTE[i],
                dashed: false,
            })
            .collect(),
    };
    plot::line_panels(&out.join("busy.png"), 800, 500, 1, &[panel])
}

fn owner_maps(out: &Path, rows: &[RunRow], nx: usize, ny: usize) -> Result<(), String> {
    let grid = pbs::Grid::new(nx, ny).map_err(|e| e.to_string())?;
    let pbs = rows.iter().find(|r| r.scheduler == "pbs").expect("pbs ran");
    let positions: Vec<pbs::Point> = Vec::new();
    let maps: Vec<OwnerMap> = pbs
        .snapshots
        .iter()
        .map(|(it, owners, work)| OwnerMap {
            title: format!("iteration {it}"),
            grid,
            loads: work,
            owners,
            positions: &positions,
        })
        .collect();
    plot::owner_maps(&out.join("owners.png"), maps.len().max(1), 320, &maps)
}
