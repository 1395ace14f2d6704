//! `pbs-bench run`: a grid app under each scheduler, one row per scheduler, fields as
//! docs/design.md's contract: iteration time median, efficiency, `max_avg` of thread loads,
//! affinity, migrations, modelled misses, hardware counters (or why not) and the checksum.

use std::collections::BTreeMap;
use std::sync::Mutex;

use pbs_scheduler::cache_model::CacheModel;
use pbs_scheduler::counters::{start_on_this_thread, stop_on_this_thread};
use pbs_scheduler::pinning::Pinning;
use pbs_scheduler::report::Recorder;
use pbs_scheduler::runtime::{Runtime, EXECUTORS};
use pbs_scheduler::topology::{per_core_cache_bytes, Topology};
use pbs_scheduler::BoxTimer;

use crate::table::Table;
use pbs_apps::GridApp;
use pbs_plot::panels::{colour, Panel, Series, Stroke, MARKER};

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSetup {
    /// `md`, `md-split` or `stencil`.
    pub app: String,
    /// md and md-split: uniform, contraction, expansion, gravity; stencil: drift, rough.
    pub scenario: String,
    /// Schedulers, in order.
    pub schedulers: Vec<String>,
    /// Worker threads.
    pub threads: usize,
    /// Iterations.
    pub iters: usize,
    /// Boxes along x.
    pub nx: usize,
    /// Boxes along y.
    pub ny: usize,
    /// Layers of boxes along z: more than one runs md and the stencil in 3D.
    pub nz: usize,
    /// Per-thread capacity of the modelled cache, bytes.
    pub cache_bytes: u64,
    /// Pin workers to cores.
    pub pin: bool,
    /// Seed of the app: the stencil's Perlin cost map, md's initial velocities.
    pub seed: u64,
    /// Iterations a scheduler runs before the next takes its turn; 0 = each runs all its
    /// iterations before the next starts (see [`run`]).
    pub turn_iters: usize,
}

impl RunSetup {
    /// The modelled cache size: the machine's per-core cache, else 1 MiB.
    pub fn machine_cache_bytes() -> u64 {
        per_core_cache_bytes().unwrap_or(1 << 20)
    }

    /// A fresh app as set up.
    pub fn make_app(&self) -> Result<Box<dyn GridApp>, String> {
        pbs_apps::build_3d(&self.app, &self.scenario, self.nx, self.ny, self.nz, self.seed)
    }
}

/// One row, docs/design.md field names.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RunRow {
    /// one of `pbs_scheduler::runtime::EXECUTORS`
    pub scheduler: String,
    /// md, md-split or stencil
    pub app: String,
    /// scenario name
    pub scenario: String,
    /// boxes along x (`report` runs one app and scenario at two sizes)
    pub nx: usize,
    /// boxes along y
    pub ny: usize,
    /// layers of boxes along z (1 on a 2D grid)
    pub nz: usize,
    /// seed of the app
    pub seed: u64,
    /// worker threads
    pub threads: usize,
    /// CPUs this process may run on (its binding, or the machine's): more threads than these
    /// share them, and the times then include the OS's sharing
    pub cpus: usize,
    /// iterations
    pub iters: usize,
    /// median iteration wall time, ms
    pub iter_ms_median: f64,
    /// mean iteration wall time (the run's wall time over its iterations), ms
    pub iter_ms_mean: f64,
    /// (Σ box times / threads) / wall time
    pub efficiency: f64,
    /// where the rest of the wall time went, by cause; with `efficiency` the shares sum to 1
    /// (`pbs_scheduler::report::IdleShares`)
    pub idle_shares: pbs_scheduler::report::IdleShares,
    /// max_avg of per-thread busy time
    pub max_avg: f64,
    /// per phase of an iteration: Σ max thread busy / Σ mean thread busy (see
    /// `pbs_scheduler::report::RunReport::phase_max_avg`)
    pub phase_max_avg: Vec<f64>,
    /// fraction of box executions on the thread of their previous execution
    pub affinity: Option<f64>,
    /// boxes changing owner per iteration
    pub migrations_per_iter: f64,
    /// rebalancings performed (pbs)
    pub rebalances: usize,
    /// share of the wall time spent between iterations deciding on, starting, taking on or
    /// performing rebalancings (pbs; 0 for the others)
    pub rebalance_share: f64,
    /// share of the wall time rebalancing added to the critical path: `rebalance_share` plus
    /// balancing that ran past the last busy thread of a phase (pbs; 0 for the others)
    pub rebalance_critical_fraction: f64,
    /// balancer time run in the threads' idle time, milliseconds, whole run (not task time)
    pub balancing_in_slack_ms: f64,
    /// balancer time run on the balancer thread beside the workers, milliseconds, whole run
    /// (off the critical path, on a core: its cost is in the iteration times)
    pub balancing_in_background_ms: f64,
    /// rebalancings given up because they would have ended too late
    pub rebalances_abandoned: usize,
    /// rebalancings taken on that started over from a bisection, far from balance
    pub rebalances_restarted: usize,
    /// Boulmier's effort of each interval between rebalancings, ms per iteration (see
    /// `pbs_scheduler::report::RunReport::effort_ms`)
    pub effort_ms: Vec<f64>,
    /// median of `effort_ms`
    pub effort_ms_median: f64,
    /// misses of the modelled per-thread cache, 64-byte lines, whole run
    pub modelled_misses: u64,
    /// accesses to the modelled cache, 64-byte lines, whole run
    pub modelled_accesses: u64,
    /// hardware counters summed over threads (null where unavailable)
    pub hw_counters: Option<BTreeMap<String, u64>>,
    /// why hardware counters are unavailable (null where they are)
    pub hw_unavailable_reason: Option<String>,
    /// workers whose binding to their core's CPUs succeeded, the calling thread (worker 0, on
    /// its core for each phase) included: `threads` when pinned, 0 with `--no-pin`, fewer where
    /// the system refused a binding
    pub pinned_workers: usize,
    /// software counters summed over threads, when those were measured instead
    pub sw_counters: Option<BTreeMap<String, u64>>,
    /// hash of the final state: identical for every scheduler and thread count
    pub checksum: String,
    /// wall time of every iteration, ms (for plots)
    #[serde(skip)]
    pub iteration_ms: Vec<f64>,
    /// what happened at the end of every iteration (for the timeline)
    #[serde(skip)]
    pub iteration_ends: Vec<pbs_scheduler::IterationEnd>,
    /// busy time per thread over the run, ms (for plots)
    #[serde(skip)]
    pub busy_ms: Vec<f64>,
    /// (iteration, owner of every box, work of every box) at a few iterations, where the
    /// scheduler plans owners (for pictures)
    #[serde(skip)]
    pub snapshots: Vec<(usize, Vec<u32>, Vec<f64>)>,
}

/// Iterations a scheduler runs before the next one takes its turn, by default (see [`run`]).
pub const TURN_ITERS: usize = 25;

/// Pause before each turn (see [`Lane::run_turn`]); not part of any timed iteration.
const SETTLE: std::time::Duration = std::time::Duration::from_millis(3);

/// One scheduler's run in progress.
struct Lane {
    scheduler: String,
    app: Box<dyn GridApp>,
    rec: Recorder,
    snapshots: Vec<(usize, Vec<u32>, Vec<f64>)>,
    hw: BTreeMap<String, u64>,
    sw: BTreeMap<String, u64>,
    reason: Option<String>,
    /// complete once the executor is built: every worker has started and reported
    bindings: pbs_scheduler::pinning::Bindings,
}

impl Lane {
    /// Iterations `range` of this scheduler's run, with its counters running.
    fn run_turn(
        &mut self,
        exec: &mut dyn pbs_scheduler::Executor,
        range: std::ops::Range<usize>,
        iters: usize,
        progress: &mut impl FnMut(),
    ) {
        // The previous turn's workers spin for a while before they sleep (ours 200 µs, rayon's
        // longer); started at once, this turn would share the cores with them. The driving
        // thread waits busy, not asleep: on this VM a core left idle for 3 ms ran its next two
        // or three iterations 10–25 % slower, which pbs read as imbalance (md: pbs efficiency
        // 0.90 with sleeping pauses, 0.95 with busy ones, 0.94–0.95 with no turns at all).
        let pause = std::time::Instant::now();
        while pause.elapsed() < SETTLE {
            std::hint::spin_loop();
        }
        exec.on_each_thread(&|_| start_on_this_thread());
        for it in range {
            // Timed pass: no cache model in the tasks, whose bookkeeping would be timed too.
            self.app.iterate(exec, &mut self.rec, None);
            if it == 0 || it == iters / 2 || it + 1 == iters {
                if let Some(owners) = exec.planned_owners() {
                    self.snapshots.push((it, owners, self.app.box_work()));
                }
            }
            progress();
        }
        // Counters are per thread, and the calling thread is worker 0 of every pool: read them
        // at the end of each turn so that each scheduler's sums hold its own turns only.
        let readings = Mutex::new(Vec::new());
        exec.on_each_thread(&|_| readings.lock().unwrap().push(stop_on_this_thread()));
        for r in readings.into_inner().unwrap() {
            match r {
                Ok((reading, why)) => {
                    let target = if reading.hardware { &mut self.hw } else { &mut self.sw };
                    for (name, v) in reading.values {
                        *target.entry(name).or_insert(0) += v;
                    }
                    if why.is_some() {
                        self.reason = why;
                    }
                }
                Err(e) => self.reason = Some(e),
            }
        }
    }
}

/// Runs every scheduler of `setup` twice: a timed pass (times, counters, checksum) and a
/// modelled-cache pass (misses), calling `progress` after each iteration of either, so
/// `2 × schedulers × iters` times.
///
/// In the timed pass the schedulers take turns, `turn_iters` iterations each (default
/// [`TURN_ITERS`]), every one on its own copy of the app: on a shared machine whose speed
/// drifts over seconds, running them one after the other compares one scheduler's good second
/// with another's bad one (on this 2-core VM, md's pbs/static ratio ranged 0.53–1.13 over five
/// runs one after the other, 0.69–0.70 taking turns). Results do not depend on the turns (each
/// app only ever sees its own executor). The price: each turn starts with caches holding the
/// other apps' data and idle workers asleep, which costs the first iteration of a turn a little
/// and makes work stealing's first split of a turn land on other threads (ws affinity a few
/// points lower than with `turn_iters: 0`).
pub fn run(setup: &RunSetup, mut progress: impl FnMut()) -> Result<Vec<RunRow>, String> {
    if setup.threads == 0 {
        return Err("--threads must be at least 1".into());
    }
    if setup.iters == 0 {
        return Err("--iters must be at least 1".into());
    }
    check_records(setup.iters, setup.schedulers.len(), 0)?;
    // The schedulers take turns, so their executors live side by side: their threads count
    // together against the process's limit (see `pbs_scheduler::thread_budget`).
    let max = pbs_scheduler::pool::MAX_THREADS;
    let all = setup.threads.saturating_mul(setup.schedulers.len());
    if setup.schedulers.len() > 1 && all > max {
        return Err(format!(
            "--threads {} for {} schedulers side by side: {all} worker threads, and a process takes at most {max}; \
             run fewer threads or fewer schedulers",
            setup.threads,
            setup.schedulers.len()
        ));
    }
    let runtime = Runtime {
        topology: Topology::detect(),
        threads: setup.threads,
        pin: if setup.pin { Pinning::Workers } else { Pinning::Off },
        timer: BoxTimer::default(),
    };
    // The executors apart from the lanes: they go once the timed pass is over, before the
    // modelled pass starts one executor at a time.
    let (mut lanes, mut execs) = (Vec::new(), Vec::new());
    for scheduler in &setup.schedulers {
        let app = setup.make_app()?;
        let (mut exec, bindings) = runtime.executor(scheduler, app.grid()).map_err(|e| e.to_string())?;
        // No rebalancing at the last iteration's end, which no iteration would run on.
        exec.hint_iterations_left(setup.iters as u64);
        lanes.push(Lane {
            scheduler: scheduler.clone(),
            app,
            rec: Recorder::new(scheduler, setup.threads),
            snapshots: Vec::new(),
            hw: BTreeMap::new(),
            sw: BTreeMap::new(),
            reason: None,
            bindings,
        });
        execs.push(exec);
    }
    let turn = if setup.turn_iters == 0 { setup.iters } else { setup.turn_iters };
    for first in (0..setup.iters).step_by(turn) {
        for (lane, exec) in lanes.iter_mut().zip(&mut execs) {
            lane.run_turn(exec.as_mut(), first..(first + turn).min(setup.iters), setup.iters, &mut progress);
        }
    }
    drop(execs);
    let mut rows = Vec::new();
    for lane in lanes {
        let report = lane.rec.report();
        let wall_ms = lane.rec.iteration_ms().iter().sum::<f64>().max(f64::MIN_POSITIVE);
        let misses = modelled_misses(setup, &runtime, &lane.scheduler, &mut progress)?;
        rows.push(RunRow {
            scheduler: lane.scheduler.clone(),
            app: lane.app.name().into(),
            scenario: setup.scenario.clone(),
            nx: setup.nx,
            ny: setup.ny,
            nz: setup.nz,
            seed: setup.seed,
            threads: setup.threads,
            cpus: runtime.topology.cores.iter().map(|c| c.pus.len()).sum(),
            iters: setup.iters,
            iter_ms_median: report.iter_ms_median,
            iter_ms_mean: report.iter_ms_mean,
            efficiency: report.efficiency,
            idle_shares: report.idle_shares,
            max_avg: report.max_avg,
            phase_max_avg: report.phase_max_avg.clone(),
            affinity: report.affinity,
            migrations_per_iter: report.migrations_per_iter,
            rebalances: report.rebalances,
            rebalance_share: report.rebalance_ms / wall_ms,
            rebalance_critical_fraction: report.rebalance_critical_ms / wall_ms,
            balancing_in_slack_ms: report.balancing_in_slack_ms,
            balancing_in_background_ms: report.balancing_in_background_ms,
            rebalances_abandoned: report.rebalances_abandoned,
            rebalances_restarted: report.rebalances_restarted,
            effort_ms_median: pbs::metrics::median(&report.effort_ms),
            effort_ms: report.effort_ms.clone(),
            modelled_misses: misses.misses,
            modelled_accesses: misses.accesses,
            hw_counters: (!lane.hw.is_empty()).then_some(lane.hw),
            hw_unavailable_reason: lane.reason,
            pinned_workers: lane.bindings.report().iter().filter(|b| matches!(b, Some(Ok(_)))).count(),
            sw_counters: (!lane.sw.is_empty()).then_some(lane.sw),
            checksum: format!("{:016x}", lane.app.checksum()),
            iteration_ms: lane.rec.iteration_ms().to_vec(),
            iteration_ends: lane.rec.iteration_ends().to_vec(),
            busy_ms: report.busy_ms.clone(),
            snapshots: lane.snapshots,
        });
    }
    Ok(rows)
}

/// An error naming the sizes where the records of `iters` iterations of `schedulers` would not
/// fit in the memory: for every scheduler, its [`Recorder`]'s records of every iteration (twice their
/// bytes: vectors that grow by doubling), its row's copy, and one more copy for each of `kept`
/// rows that the caller keeps (or copies) beside them; and the modelled pass's recorder, one
/// scheduler at a time. `pbs-bench run --iters 10000000` of the 11 schedulers asks for 34 GB:
/// on 4 × 4 boxes the run grew by 2.2 KB an iteration (maximum resident 50 MB at 2 × 10⁴
/// iterations, 225 MB at 10⁵), 22 GB by its end, about four hours in on the 24 GiB VM, where
/// it would have been killed; now it is refused before it starts.
pub fn check_records(iters: usize, schedulers: usize, kept: usize) -> Result<(), String> {
    let copies = kept.saturating_add(3).saturating_mul(schedulers).saturating_add(2);
    let each = copies.saturating_mul(pbs_scheduler::report::RECORDER_BYTES_PER_ITERATION);
    pbs_apps::fits_in_memory("every iteration's records", (iters, "iterations"), each)
        .map_err(|e| format!("{e}; run fewer iterations, schedulers or repeats"))
}

/// The modelled-cache pass: the same run again on a fresh app and executor, every box
/// execution fed to the per-thread LRU model; its times are not used.
fn modelled_misses(
    setup: &RunSetup,
    runtime: &Runtime,
    scheduler: &str,
    progress: &mut impl FnMut(),
) -> Result<pbs_scheduler::cache_model::ModelledMisses, String> {
    let mut app = setup.make_app()?;
    let (mut exec, _bindings) = runtime.executor(scheduler, app.grid()).map_err(|e| e.to_string())?;
    let cache =
        CacheModel::new(app.grid(), setup.threads, setup.cache_bytes, app.footprint()).map_err(|e| e.to_string())?;
    let mut rec = Recorder::new(scheduler, setup.threads);
    exec.hint_iterations_left(setup.iters as u64);
    for _ in 0..setup.iters {
        app.iterate(exec.as_mut(), &mut rec, Some(&cache));
        progress();
    }
    Ok(cache.take())
}

/// Schedulers for a `--scheduler` value (`all` = every executor).
pub fn schedulers(spec: &str) -> Result<Vec<String>, String> {
    let names: Vec<String> = if spec == "all" {
        EXECUTORS.iter().map(|s| s.to_string()).collect()
    } else {
        spec.split(',').map(|s| s.trim().to_string()).collect()
    };
    for n in &names {
        if !EXECUTORS.contains(&n.as_str()) {
            return Err(format!("unknown scheduler {n:?}; expected {} or all", EXECUTORS.join(", ")));
        }
    }
    Ok(names)
}

/// Every iteration of every row as CSV, one line each: its wall time and what happened at its
/// end (`under_way`: a rebalancing runs in idle time or on the balancer thread as the next
/// iteration starts; `in_idle_time`: in idle time; `idle_time_ms`: balancer time in the
/// iteration's idle time, of which `critical_ms` holds what ran past the phases' ends). Where a
/// mean iteration is far above the median, this shows which iterations run long.
pub fn timeline_csv(rows: &[RunRow]) -> String {
    let mut out = String::from(
        "scheduler,seed,iteration,ms,under_way,in_idle_time,rebalanced,abandoned,critical_ms,idle_time_ms,background_ms,migrations\n",
    );
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    for r in rows {
        for (i, (t, e)) in r.iteration_ms.iter().zip(&r.iteration_ends).enumerate() {
            out += &format!(
                "{},{},{i},{t:.4},{},{},{},{},{:.4},{:.4},{:.4},{}\n",
                r.scheduler,
                r.seed,
                u8::from(e.under_way),
                u8::from(e.under_way_in_idle_time),
                u8::from(e.rebalanced),
                u8::from(e.rebalance_abandoned),
                ms(e.rebalance_critical),
                ms(e.balancing_in_slack),
                ms(e.balancing_in_background),
                e.migrations
            );
        }
    }
    out
}

/// The timeline of one seed (the first of `rows`) as two charts: every scheduler's iteration
/// times, with a dot where it rebalanced; and, where a scheduler balanced, its balancer time per
/// iteration on the critical path, in the threads' idle time and on the balancer thread.
pub fn timeline_panels(rows: &[RunRow]) -> Vec<Panel> {
    let Some(first) = rows.first() else { return Vec::new() };
    let rows: Vec<&RunRow> = rows.iter().filter(|r| r.seed == first.seed).collect();
    let mut times = Vec::new();
    let mut balancer = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let line: Vec<(f64, f64)> = r.iteration_ms.iter().enumerate().map(|(k, &ms)| (k as f64, ms)).collect();
        let rebalanced: Vec<(f64, f64)> =
            r.iteration_ends.iter().zip(&line).filter(|(e, _)| e.rebalanced).map(|(_, &p)| p).collect();
        times.push(Series { label: r.scheduler.clone(), points: line, color: colour(i), stroke: Stroke::Solid });
        if !rebalanced.is_empty() {
            let label = format!("{}: rebalanced", r.scheduler);
            times.push(Series { label, points: rebalanced, color: MARKER, stroke: Stroke::Points });
        }
        type Time = fn(&pbs_scheduler::IterationEnd) -> std::time::Duration;
        let kinds: [(&str, Stroke, Time); 3] = [
            ("critical path", Stroke::Solid, |e| e.rebalance_critical),
            ("idle time", Stroke::Dashed, |e| e.balancing_in_slack),
            ("balancer thread", Stroke::Points, |e| e.balancing_in_background),
        ];
        for (what, stroke, of) in kinds {
            let mut points: Vec<(f64, f64)> =
                r.iteration_ends.iter().enumerate().map(|(k, e)| (k as f64, of(e).as_secs_f64() * 1e3)).collect();
            if stroke == Stroke::Points {
                points.retain(|p| p.1 > 0.0); // dots where the thread ran, not a row of zeros
            }
            if points.iter().any(|p| p.1 > 0.0) {
                balancer.push(Series { label: format!("{}: {what}", r.scheduler), points, color: colour(i), stroke });
            }
        }
    }
    let title = format!("{} {}, {} threads, seed {}", first.app, first.scenario, first.threads, first.seed);
    let panel = |title: String, series| Panel {
        title,
        x_label: "iteration".into(),
        y_label: "ms".into(),
        log_x: false,
        log_y: false,
        series,
    };
    let mut panels = vec![panel(format!("iteration time: {title}"), times)];
    if !balancer.is_empty() {
        panels.push(panel("balancer time per iteration, by where it ran".into(), balancer));
    }
    panels
}

/// Where a run's long iterations are: of its time above the median iteration, the share in
/// the iterations that ran while a rebalancing was under way (flagged at the end of the
/// iteration before), and the share of iterations those are. `None` when no iteration ran
/// with one under way or none ran long.
pub fn tail_while_under_way(ms: &[f64], ends: &[pbs_scheduler::IterationEnd]) -> Option<(f64, f64)> {
    let median = pbs::metrics::median(ms);
    let over = |i: usize| (ms[i] - median).max(0.0);
    let total: f64 = (0..ms.len()).map(over).sum();
    let under_way: Vec<usize> = (1..ms.len().min(ends.len() + 1)).filter(|&i| ends[i - 1].under_way).collect();
    if under_way.is_empty() || total <= 0.0 {
        return None;
    }
    let share = under_way.iter().map(|&i| over(i)).sum::<f64>() / total;
    Some((share, under_way.len() as f64 / ms.len() as f64))
}

/// Per-phase `max_avg` values as `1.03/1.09/1.06`.
pub fn phases(values: &[f64]) -> String {
    values.iter().map(|v| format!("{v:.2}")).collect::<Vec<_>>().join("/")
}

/// Rebalancings and the share of the wall time they held up as `12 (3.1 %)`.
pub fn rebalances(count: usize, share: f64) -> String {
    format!("{count} ({:.1} %)", 100.0 * share)
}

/// The idle shares in percent of the wall time, in the order of the column's title
/// ([`IDLE_TITLE`]).
pub fn idle(shares: &pbs_scheduler::report::IdleShares) -> String {
    let p = &shares.in_phases;
    [p.late_start, p.between_tasks, p.waiting, p.barrier, p.executor, shares.between_iterations]
        .iter()
        .map(|v| format!("{:.1}", 100.0 * v))
        .collect::<Vec<_>>()
        .join("/")
}

/// Each idle share's median over `rows`.
pub fn median_idle<'a>(rows: impl Iterator<Item = &'a RunRow>) -> pbs_scheduler::report::IdleShares {
    let shares: Vec<_> = rows.map(|r| r.idle_shares).collect();
    let med = |f: &dyn Fn(&pbs_scheduler::report::IdleShares) -> f64| {
        pbs::metrics::median(&shares.iter().map(f).collect::<Vec<_>>())
    };
    let mut m = pbs_scheduler::report::IdleShares::default();
    let p = &mut m.in_phases;
    p.late_start = med(&|x| x.in_phases.late_start);
    p.between_tasks = med(&|x| x.in_phases.between_tasks);
    p.waiting = med(&|x| x.in_phases.waiting);
    p.barrier = med(&|x| x.in_phases.barrier);
    p.executor = med(&|x| x.in_phases.executor);
    m.between_iterations = med(&|x| x.between_iterations);
    m
}

/// The idle shares' column title.
pub const IDLE_TITLE: &str = "idle %: start/between tasks/waiting/barrier/executor/between iterations";

/// The readable table.
pub fn table(rows: &[RunRow]) -> Table {
    let mut t = Table::new(&[
        "scheduler",
        "app",
        "scenario",
        "threads",
        "iters",
        "iter ms",
        "mean ms",
        "efficiency",
        IDLE_TITLE,
        "max_avg",
        "per phase",
        "affinity",
        "migr/iter",
        "rebalances (critical % wall)",
        "effort ms",
        "modelled misses",
        "checksum",
    ]);
    for r in rows {
        t.row(vec![
            r.scheduler.clone(),
            r.app.clone(),
            r.scenario.clone(),
            r.threads.to_string(),
            r.iters.to_string(),
            format!("{:.3}", r.iter_ms_median),
            format!("{:.3}", r.iter_ms_mean),
            format!("{:.3}", r.efficiency),
            idle(&r.idle_shares),
            format!("{:.3}", r.max_avg),
            phases(&r.phase_max_avg),
            r.affinity.map_or("-".into(), |a| format!("{a:.3}")),
            format!("{:.1}", r.migrations_per_iter),
            rebalances(r.rebalances, r.rebalance_critical_fraction),
            format!("{:.3}", r.effort_ms_median),
            r.modelled_misses.to_string(),
            r.checksum.clone(),
        ]);
    }
    t
}

/// The readable table of several runs of the same schedulers (seeds in turn): medians over
/// runs, and each scheduler's iteration time over the first scheduler's as the median of the
/// ratios within each run.
pub fn median_table(runs: &[Vec<RunRow>]) -> Table {
    let first = &runs[0];
    let mut t = Table::new(&[
        "scheduler",
        "app",
        "scenario",
        "threads",
        "runs",
        "iter ms",
        &format!("/ {}", first[0].scheduler),
        "mean ms",
        "efficiency",
        IDLE_TITLE,
        "max_avg",
        "per phase",
        "affinity",
        "migr/iter",
        "rebalances (critical % wall)",
        "effort ms",
        "checksums",
    ]);
    for (i, r) in first.iter().enumerate() {
        let med =
            |f: &dyn Fn(&RunRow) -> f64| pbs::metrics::median(&runs.iter().map(|run| f(&run[i])).collect::<Vec<_>>());
        let per_phase: Vec<f64> =
            (0..r.phase_max_avg.len()).map(|p| med(&|x| x.phase_max_avg.get(p).copied().unwrap_or(1.0))).collect();
        t.row(vec![
            r.scheduler.clone(),
            r.app.clone(),
            r.scenario.clone(),
            r.threads.to_string(),
            runs.len().to_string(),
            format!("{:.3}", med(&|x| x.iter_ms_median)),
            format!(
                "{:.2}",
                pbs::metrics::median(
                    &runs.iter().map(|run| run[i].iter_ms_median / run[0].iter_ms_median).collect::<Vec<_>>()
                )
            ),
            format!("{:.3}", med(&|x| x.iter_ms_mean)),
            format!("{:.3}", med(&|x| x.efficiency)),
            idle(&median_idle(runs.iter().map(|run| &run[i]))),
            format!("{:.3}", med(&|x| x.max_avg)),
            phases(&per_phase),
            r.affinity.map_or("-".into(), |_| format!("{:.3}", med(&|x| x.affinity.unwrap_or(0.0)))),
            format!("{:.1}", med(&|x| x.migrations_per_iter)),
            rebalances(med(&|x| x.rebalances as f64) as usize, med(&|x| x.rebalance_critical_fraction)),
            format!("{:.3}", med(&|x| x.effort_ms_median)),
            if runs.iter().all(|run| checksum_mismatch(run).is_none()) {
                "same in each run".into()
            } else {
                "DIFFER".into()
            },
        ]);
    }
    t
}

/// Where the schedulers of one run ended in different states, as `"ws ended with checksum …,
/// pbs with …"` (the first row that differs from the run's first). The apps are deterministic,
/// so a mismatch is a scheduler that lost or repeated a box's task, never noise: `run` and
/// `report` show their figures and then fail with it, `scaling` fails at once.
pub fn checksum_mismatch(run: &[RunRow]) -> Option<String> {
    let first = run.first()?;
    run.iter().find(|x| x.checksum != first.checksum).map(|bad| {
        format!("{} ended with checksum {}, {} with {}", bad.scheduler, bad.checksum, first.scheduler, first.checksum)
    })
}

/// How the workers of runs were bound, for a report's header, from each run's `(threads,
/// pinned_workers)`: the fact, not the setting (a binding the system refused shows).
pub fn pinning_note(runs: impl IntoIterator<Item = (usize, usize)>) -> String {
    let (mut all, mut none, mut fewest, mut any) = (true, true, f64::INFINITY, false);
    for (threads, pinned) in runs {
        any = true;
        all &= pinned == threads;
        none &= pinned == 0;
        fewest = fewest.min(pinned as f64 / threads.max(1) as f64);
    }
    match (all, none) {
        _ if !any => "no runs".into(),
        (true, _) => "every worker pinned to its core".into(),
        (_, true) => "workers not pinned (`--no-pin`, or every binding refused)".into(),
        _ => format!("some bindings refused: as few as {:.0} % of a run's workers pinned", 100.0 * fewest),
    }
}

/// The first mismatch of [`checksum_mismatch`] over `runs`, named by run and seed, as an error.
pub fn check_checksums(what: &str, runs: &[Vec<RunRow>]) -> Result<(), String> {
    for (r, run) in runs.iter().enumerate() {
        if let Some(m) = checksum_mismatch(run) {
            return Err(format!(
                "{what}, run {} (seed {}): {m}; every scheduler must reach the same state, so one of them lost or \
                 repeated a box's task",
                r + 1,
                run[0].seed
            ));
        }
    }
    Ok(())
}

/// md gravity on `side`×`side` boxes, seed 1, unpinned, a 1 MiB modelled cache (the
/// harness's tests).
#[cfg(test)]
pub(crate) fn md_gravity(schedulers: Vec<String>, threads: usize, iters: usize, side: usize) -> RunSetup {
    RunSetup {
        app: "md".into(),
        scenario: "gravity".into(),
        schedulers,
        threads,
        iters,
        nx: side,
        ny: side,
        nz: 1,
        cache_bytes: 1 << 20,
        pin: false,
        seed: 1,
        turn_iters: TURN_ITERS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Per scheduler three copies of an iteration's records (the recorder's, at twice their
    /// bytes, and its row's) and one per row kept beside them; two more for the modelled pass.
    #[test]
    fn the_records_are_counted_per_scheduler_and_row_kept() {
        let each = pbs_scheduler::report::RECORDER_BYTES_PER_ITERATION;
        let needs = |iters: usize, schedulers, kept| {
            let e = check_records(iters, schedulers, kept).unwrap_err();
            e.split("needs ").nth(1).unwrap().split(' ').next().unwrap().parse::<usize>().unwrap()
        };
        assert_eq!(needs(1 << 40, 11, 0), (1 << 40) * (3 * 11 + 2) * each);
        assert_eq!(needs(1 << 40, 2, 4), (1 << 40) * (7 * 2 + 2) * each);
        check_records(1000, 11, 10).unwrap();
    }

    /// A run whose schedulers ended in different states is an error naming the run, its seed,
    /// the first scheduler that differs and both checksums; agreeing runs pass.
    #[test]
    fn a_checksum_mismatch_names_the_run_the_seed_and_the_schedulers() {
        let run = run(&md_gravity(vec!["pbs".into(), "static".into(), "ws".into()], 1, 1, 4), || {}).unwrap();
        assert_eq!(checksum_mismatch(&run), None);
        assert_eq!(checksum_mismatch(&[]), None);
        let mut bad = run.clone();
        bad[2].checksum = "00ff".into();
        bad.iter_mut().for_each(|r| r.seed = 7);
        let expected = format!("ws ended with checksum 00ff, pbs with {}", run[0].checksum);
        assert_eq!(checksum_mismatch(&bad), Some(expected.clone()));
        assert_eq!(check_checksums("md gravity", &[run.clone(), run.clone()]), Ok(()));
        let err = check_checksums("md gravity", &[run.clone(), bad]).unwrap_err();
        assert!(err.starts_with(&format!("md gravity, run 2 (seed 7): {expected}; ")), "{err}");
        assert!(err.contains("lost or repeated"), "{err}");
    }

    /// The timeline chart draws each scheduler's iterations of the first seed, a dot where it
    /// rebalanced, and the balancer's time only where there was some.
    #[test]
    fn the_timeline_chart_shows_the_first_seed_and_where_it_rebalanced() {
        let setup = md_gravity(vec!["pbs".into(), "static".into()], 2, 6, 8);
        let mut rows = run(&setup, || {}).unwrap();
        rows.extend(run(&RunSetup { seed: 2, ..setup }, || {}).unwrap());
        for r in &mut rows {
            r.iteration_ends = vec![pbs_scheduler::IterationEnd::default(); 6];
        }
        let quiet = timeline_panels(&rows);
        assert_eq!(quiet.len(), 1, "no balancer time, no second chart");
        let names: Vec<&str> = quiet[0].series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(names, ["pbs", "static"], "the first seed only");
        assert!(quiet[0].series.iter().all(|s| s.points.len() == 6));
        assert_eq!(quiet[0].series[0].points[3], (3.0, rows[0].iteration_ms[3]));
        rows[0].iteration_ends[3].rebalanced = true;
        rows[0].iteration_ends[3].rebalance_critical = std::time::Duration::from_micros(250);
        rows[0].iteration_ends[4].balancing_in_slack = std::time::Duration::from_micros(100);
        let busy = timeline_panels(&rows);
        let dots = busy[0].series.iter().find(|s| s.label == "pbs: rebalanced").unwrap();
        assert_eq!(dots.points, [(3.0, rows[0].iteration_ms[3])]);
        let labels: Vec<&str> = busy[1].series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["pbs: critical path", "pbs: idle time"], "nothing on the thread, nothing from static");
        assert_eq!(busy[1].series[0].points[3], (3.0, 0.25));
        assert_eq!(busy[1].series[1].points[4], (4.0, 0.1));
        assert_ne!(busy[0].series[0].color, busy[0].series[2].color, "a colour per scheduler");
        rows[0].iteration_ends[5].balancing_in_background = std::time::Duration::from_micros(300);
        let thread = timeline_panels(&rows).remove(1).series.remove(2);
        assert_eq!((thread.label.as_str(), thread.points), ("pbs: balancer thread", vec![(5.0, 0.3)]), "dots only");
        let csv = timeline_csv(&rows[..1]);
        assert!(csv.lines().nth(4).unwrap().ends_with(",0.2500,0.0000,0.0000,0"), "{csv}");
        assert!(csv.lines().nth(6).unwrap().ends_with(",0.0000,0.0000,0.3000,0"), "{csv}");
        assert!(timeline_panels(&[]).is_empty());
    }

    /// Every executor is told the run's length: after one iteration, where the remappers' first
    /// measurement asks (before the hint they moved 92–512 of md's 32×32 boxes there), no
    /// scheduler rebalanced or moved a box; over two, remappers did.
    #[test]
    fn no_scheduler_rebalances_after_the_last_iteration() {
        let remappers = schedulers("rcb,norcb,packsteal,diffusion").unwrap();
        let moved = |iters| {
            let rows = run(&md_gravity(schedulers("all").unwrap(), 2, iters, 8), || {}).unwrap();
            let quiet = rows.iter().all(|r| r.rebalances == 0 && r.migrations_per_iter == 0.0);
            // A remapping is taken only where it balances better: most, not all, of the four.
            let remapped = rows.iter().filter(|r| remappers.contains(&r.scheduler) && r.rebalances == 1).count();
            (quiet, remapped)
        };
        assert_eq!(moved(1), (true, 0));
        let (quiet, remapped) = moved(2);
        assert!(!quiet && remapped >= 1, "{remapped}");
    }

    /// The executors of a run live side by side, so their threads count together: refused
    /// before any starts (eleven pools of 3,000 aborted the process inside the standard
    /// library), and a single scheduler is left to its pool's own check.
    #[test]
    fn schedulers_side_by_side_past_the_process_thread_limit_are_refused_before_any_starts() {
        let setup = md_gravity(schedulers("all").unwrap(), 3000, 1, 4);
        let e = run(&setup, || {}).expect_err("11 × 3000 threads");
        assert!(e.starts_with("--threads 3000 for 11 schedulers side by side: 33000 worker threads"), "{e}");
        let one = RunSetup { schedulers: vec!["static".into()], threads: 5000, ..setup };
        let e = run(&one, || {}).expect_err("5000 threads in one pool");
        assert!(e.contains("a pool takes at most 4096"), "{e}");
    }

    /// A run's row holds what the run did: pbs's owners at the first, middle and last
    /// iterations, a modelled-cache pass that accessed and missed, counters summed over the
    /// threads' turns, and one line a scheduler and iteration in the timeline's CSV.
    #[test]
    fn a_rows_snapshots_misses_counters_and_timeline_are_the_runs() {
        let rows = run(&md_gravity(vec!["pbs".into(), "static".into()], 2, 7, 8), || {}).unwrap();
        let at: Vec<usize> = rows[0].snapshots.iter().map(|s| s.0).collect();
        assert_eq!(at, [0, 3, 6], "first, iters / 2, last");
        assert!(rows[0].snapshots.iter().all(|s| s.1.len() == 64 && s.2.len() == 64));
        for r in &rows {
            assert!(r.modelled_accesses > 0 && r.modelled_misses > 0, "{}: {r:?}", r.scheduler);
            assert!(r.modelled_misses <= r.modelled_accesses);
            // Counters are read at the end of each turn and summed: some count must be above 0,
            // unless the machine refuses software events too, which the reason then says.
            match r.hw_counters.as_ref().or(r.sw_counters.as_ref()) {
                Some(counts) => assert!(counts.values().any(|&v| v > 0), "{}: {counts:?}", r.scheduler),
                None => {
                    assert!(r.hw_unavailable_reason.as_ref().is_some_and(|w| w.contains("unavailable too")), "{r:?}")
                }
            }
            assert!((0.0..=1.0).contains(&r.rebalance_share) && r.rebalance_share <= r.rebalance_critical_fraction);
            // Shares of the wall time: the iteration ends' times over the iterations' sum.
            let wall: f64 = r.iteration_ms.iter().sum();
            let ms = |f: fn(&pbs_scheduler::IterationEnd) -> std::time::Duration| {
                r.iteration_ends.iter().map(|e| f(e).as_secs_f64() * 1e3).sum::<f64>()
            };
            let critical = ms(|e| e.rebalance_critical);
            assert!((r.rebalance_critical_fraction - critical / wall).abs() < 1e-9, "{critical} of {wall} ms");
            assert!((r.rebalance_share - ms(|e| e.rebalance_time) / wall).abs() < 1e-9);
        }
        let csv = timeline_csv(&rows);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 1 + 2 * 7);
        assert!(lines[0].starts_with("scheduler,seed,iteration,ms,"));
        let third: Vec<&str> = lines[3].split(',').collect();
        assert_eq!((third[0], third[1], third[2]), ("pbs", "1", "2"));
        assert_eq!(third[3], format!("{:.4}", rows[0].iteration_ms[2]));
        assert_eq!(lines[8].split(',').next(), Some("static"));
        let one = RunSetup::machine_cache_bytes();
        assert!((4 << 10..=1 << 30).contains(&one), "a per-core cache of {one} bytes");
        let table = table(&rows).text();
        assert!(table.contains("pbs") && table.contains("static") && table.contains(&rows[0].checksum), "{table}");
        let medians = median_table(&[rows.clone(), rows.clone()]).text();
        assert!(medians.contains("/ pbs") && medians.contains("same in each run"), "{medians}");
        assert_eq!(median_idle(rows.iter().take(1)), rows[0].idle_shares);
    }

    /// The note reads what the runs' workers obtained: all bound, none, or the run with the
    /// smallest share bound.
    #[test]
    fn the_pinning_note_says_how_many_workers_were_bound() {
        assert_eq!(pinning_note([(2, 2), (4, 4)]), "every worker pinned to its core");
        assert_eq!(pinning_note([]), "no runs");
        assert!(pinning_note([(2, 0), (1, 0)]).starts_with("workers not pinned"));
        assert_eq!(
            pinning_note([(4, 4), (4, 1), (2, 1)]),
            "some bindings refused: as few as 25 % of a run's workers pinned"
        );
        assert_eq!(pinning_note([(4, 0), (2, 2)]), "some bindings refused: as few as 0 % of a run's workers pinned");
    }

    /// The table's cells: phases, rebalancings and idle shares as their titles say.
    #[test]
    fn the_tables_cells_read_as_their_titles_say() {
        assert_eq!(phases(&[1.031, 1.094]), "1.03/1.09");
        assert_eq!(rebalances(12, 0.031), "12 (3.1 %)");
        let mut s = pbs_scheduler::report::IdleShares::default();
        s.in_phases.late_start = 0.01;
        s.in_phases.barrier = 0.125;
        s.between_iterations = 0.5;
        assert_eq!(idle(&s), "1.0/0.0/0.0/12.5/0.0/50.0");
    }

    /// Of 3 ms above the median (1 ms), 2 are in the one iteration run with a rebalancing
    /// under way, one in ten.
    #[test]
    fn the_long_iterations_are_found_where_a_rebalancing_was_under_way() {
        let mut ms = vec![1.0; 10];
        ms[4] = 3.0;
        ms[8] = 2.0;
        let mut ends = vec![pbs_scheduler::IterationEnd::default(); 10];
        ends[3].under_way = true;
        assert_eq!(tail_while_under_way(&ms, &ends), Some((2.0 / 3.0, 0.1)));
        ends[3].under_way = false;
        assert_eq!(tail_while_under_way(&ms, &ends), None, "none under way");
        ends[0].under_way = true;
        assert_eq!(tail_while_under_way(&[1.0; 10], &ends), None, "none long");
        // The last iteration counts too, flagged at the end of the one before, even where the
        // run's last end is not recorded.
        let mut ends = vec![pbs_scheduler::IterationEnd::default(); 9];
        ends[8].under_way = true;
        let mut ms = vec![1.0; 10];
        ms[9] = 2.0;
        assert_eq!(tail_while_under_way(&ms, &ends), Some((1.0, 0.1)));
    }
}
