//! `pbs-bench starpu`: pbs as a StarPU scheduling policy against StarPU's own policies, side by
//! side in one run, on our apps as StarPU tasks (the heat code, `starpu/examples/heat.c`, its 3D
//! form `heat3d.c` on a grid declared in 3D, or md, `starpu/examples/md.c`, built for 2D as `md`
//! and for 3D as `md3d`) and on programs of Debian's `starpu-examples`, run unchanged (pbs through
//! `libpbs_starpu_preload.so`).
//!
//! Each round runs every policy once, in an order rotated from round to round; a warm-up round
//! comes first (it also lets `dmda` calibrate its performance model). Time figures are medians
//! over rounds, and ratios to `eager` are medians of the ratios within each round. Affinity and
//! modelled misses come from the trace the app writes: which worker started which box, in
//! order, replayed through the per-worker LRU model of `pbs_scheduler::cache_model` (the same
//! model `pbs-bench run` uses) with the footprint the app prints.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pbs::metrics::median;
use pbs::Grid;
use pbs_plot::progress;
use pbs_scheduler::cache_model::{CacheModel, Footprint};
use serde::Serialize;

use crate::table::Table;

/// StarPU's policies compared by default, pbs first.
pub const POLICIES: [&str; 6] = ["pbs", "eager", "ws", "lws", "dmda", "prio"];

/// The checksum of a program whose results differ between runs under the same policy.
const VARIES: &str = "varies";

/// Longest a program may run before it is stopped (and reported as failed, never waited on).
const PROGRAM_TIMEOUT: Duration = Duration::from_secs(600);

/// What `pbs-bench starpu` runs (its command-line options).
#[derive(Debug, Clone, clap::Args)]
pub struct StarpuSettings {
    /// Our app as StarPU tasks: heat (a hot corner), heat3d (3D, a ball of extra work, the grid
    /// declared in 3D), md (particles, Verlet boxes in tiles) or md3d (md in 3D, tiles of --tile³
    /// Verlet boxes)
    #[arg(long, default_value = "heat", value_parser = ["heat", "heat3d", "md", "md3d"])]
    pub app: String,
    /// StarPU CPU workers
    #[arg(long = "threads", value_name = "N", default_value_t = 2)]
    pub workers: usize,
    /// Iterations per run of the app
    #[arg(long, default_value_t = 100)]
    pub iters: usize,
    /// Measured rounds, each running every policy once (after one warm-up round)
    #[arg(long, default_value_t = 5)]
    pub repeats: usize,
    /// Boxes along x: one task each per iteration (md: tiles of --tile Verlet boxes a side)
    #[arg(long, default_value_t = 16)]
    pub nx: usize,
    /// Boxes along y
    #[arg(long, default_value_t = 16)]
    pub ny: usize,
    /// heat3d and md3d: layers of boxes along z (heat and md are 2D)
    #[arg(long, default_value_t = 1)]
    pub nz: usize,
    /// heat, heat3d: cells per box side [default: 64; heat3d: 16, a cube of 4,096 cells as heat's
    /// 64 × 64]
    #[arg(long)]
    pub side: Option<usize>,
    /// heat: temperature of the hot corner, its boxes' extra work
    #[arg(long, default_value_t = 2000.0, allow_negative_numbers = true)]
    pub hot: f64,
    /// heat: corner (a hot corner: imbalanced) or uniform
    #[arg(long, default_value = "corner", value_parser = ["corner", "uniform"])]
    pub load: String,
    /// md, md3d: Verlet boxes per tile side (a Verlet box alone is a few µs of work, less than a
    /// StarPU task costs) [default: 8; md3d: 4, the same 64 boxes a tile]
    #[arg(long)]
    pub tile: Option<usize>,
    /// md: uniform, contraction, expansion or gravity
    #[arg(long, default_value = "gravity", value_parser = ["uniform", "contraction", "expansion", "gravity"])]
    pub scenario: String,
    /// md: seed of the particles' placement
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Wait for every task after each iteration instead of submitting ahead
    #[arg(long)]
    pub barrier: bool,
    /// Tasks that return at once: the policies' overhead per task
    #[arg(long)]
    pub empty: bool,
    /// Policies, comma-separated (must include eager)
    #[arg(long, value_delimiter = ',', default_value = "pbs,eager,ws,lws,dmda,prio")]
    pub policies: Vec<String>,
    /// Skip StarPU's example programs
    #[arg(long = "no-examples", action = clap::ArgAction::SetFalse)]
    pub examples: bool,
    /// Modelled cache per worker, bytes
    #[arg(long, default_value_t = 1 << 20)]
    pub cache_bytes: u64,
}

impl StarpuSettings {
    /// Cells per box side: `--side`, else 64 for heat and 16 for heat3d.
    pub fn side(&self) -> usize {
        self.side.unwrap_or(if self.app == "heat3d" { 16 } else { 64 })
    }

    /// Verlet boxes per tile side: `--tile`, else 8 for md and 4 for md3d (64 boxes a tile
    /// either way: 8³ would make each task eight times md's).
    pub fn tile(&self) -> usize {
        self.tile.unwrap_or(if self.app == "md3d" { 4 } else { 8 })
    }
}

/// One row: a program under a policy.
#[derive(Debug, Clone, Serialize)]
pub struct StarpuRow {
    /// `heat`, `heat3d`, `md` or `md3d` (ours), or the name of StarPU's example.
    pub program: String,
    /// The StarPU policy.
    pub scheduler: String,
    /// Median iteration time, ms (our apps only): of the times between one iteration's last
    /// task and the next's, the median of a run, then the median over rounds.
    pub iter_ms_median: Option<f64>,
    /// Mean iteration time, ms (our apps only): a run's time from submission to its last
    /// iteration's last task over its iterations, the median over rounds. In a dataflow run
    /// iterations overlap, and an order of tasks that makes them end in bursts shortens the
    /// median interval without shortening the run; the mean is the run's throughput.
    pub iter_ms_mean: Option<f64>,
    /// Median over rounds of this policy's median iteration time (our apps) or wall time (an
    /// example) over eager's in the same round.
    pub ratio_to_eager: Option<f64>,
    /// Median over rounds of this policy's mean iteration time over eager's in the same round
    /// (our apps only).
    pub mean_ratio_to_eager: Option<f64>,
    /// Median over rounds of this policy's mean iteration time over the least of the other
    /// policies' in the same round (our apps only; None with one policy). The other side is
    /// whichever ran fastest in each round, so the ratio leans against the policy it is for.
    pub mean_ratio_to_best_other: Option<f64>,
    /// Task time / (workers × wall), median over rounds (our apps only).
    pub efficiency: Option<f64>,
    /// Share of box executions on the worker that ran the box's previous one (our apps only).
    pub affinity: Option<f64>,
    /// Modelled cache misses, 64-byte lines, median over rounds (our apps only).
    pub modelled_misses: Option<u64>,
    /// Median over rounds of this policy's modelled misses over eager's in the same round (our
    /// apps only; None where eager missed nothing).
    pub misses_to_eager: Option<f64>,
    /// Boxes whose owner changed, pbs only (the other policies have no owners).
    pub migrations: Option<usize>,
    /// Rebalancings, pbs only.
    pub rebalancings: Option<usize>,
    /// Our apps: the program's checksum of the final state; an example: an FNV-1a hash of the
    /// lines of its output that carry results (None when it prints none).
    pub checksum: Option<String>,
    /// Whether `checksum` equals eager's (None when there is nothing to compare).
    pub output_matches_eager: Option<bool>,
    /// Median wall time of the whole program, ms.
    pub wall_ms_median: f64,
    /// What a reader should know about the row.
    pub note: String,
}

/// One of StarPU's example programs: its path under the examples folder, its arguments, and
/// which lines of its output carry results (the others give times or worker ids).
struct Example {
    name: &'static str,
    path: &'static str,
    args: &'static [&'static str],
    result_line: fn(&str) -> bool,
    /// Why its printed results change from run to run under any policy, eager's own runs
    /// included (docs/starpu.md), where they do: a difference from eager's then says nothing of
    /// the policy.
    varies: Option<&'static str>,
}

const EXAMPLES: [Example; 7] = [
    Example {
        name: "stencil",
        path: "stencil/stencil",
        args: &["-nbz", "8", "-sizex", "32", "-sizey", "32", "-sizez", "64", "-niter", "16"],
        result_line: |_| false,
        varies: None,
    },
    Example {
        name: "heat (FEM, CG)",
        path: "heat",
        args: &["-nthick", "10", "-ntheta", "34", "-size", "256", "-cg"],
        result_line: |l| l.contains("delta_new") || l.contains("DOT ="),
        varies: None,
    },
    Example {
        name: "cg",
        path: "cg",
        args: &[],
        result_line: |l| l.starts_with("Delta") || l.starts_with("iter"),
        varies: None,
    },
    Example {
        name: "lu (double)",
        path: "lu_example_double",
        args: &["-check", "-size", "256"],
        result_line: |l| l.contains("error") || l.contains("A-LU"),
        varies: Some("its check's errors vary from run to run under eager too"),
    },
    Example {
        name: "dot_product",
        path: "dot_product",
        args: &[],
        result_line: |l| l.starts_with("Reference"),
        varies: Some("sums in the order its tasks ran"),
    },
    Example {
        name: "spmv",
        path: "spmv",
        args: &[],
        result_line: |l| l.split('\t').count() == 2 && l.split('\t').all(|x| x.trim().parse::<f64>().is_ok()),
        varies: None,
    },
    Example { name: "vector_scal", path: "vector_scal", args: &[], result_line: |l| l.starts_with('['), varies: None },
];

/// The repository root (the bench crate's parent).
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("bench/ has a parent").to_path_buf()
}

/// Builds the policy, the preload library and our apps' programs (`starpu/build.sh`); the
/// folder they are in.
pub fn build() -> Result<PathBuf, String> {
    let root = repo_root();
    let out = Command::new(root.join("starpu/build.sh"))
        .current_dir(&root)
        .output()
        .map_err(|e| format!("cannot run starpu/build.sh: {e}"))?;
    if !out.status.success() {
        return Err(format!("starpu/build.sh failed:\n{}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(root.join("target/starpu"))
}

/// LD_LIBRARY_PATH for the programs: the libraries this build made first (a path the caller
/// set, cargo's for one, may name an older libpbs_ffi.so, and outranks the programs' rpath).
pub fn library_path() -> String {
    library_path_before(&repo_root(), std::env::var("LD_LIBRARY_PATH").ok())
}

/// `root`'s target/starpu and target/release, then `caller`'s path where it names any.
fn library_path_before(root: &Path, caller: Option<String>) -> String {
    let ours = format!("{}:{}", root.join("target/starpu").display(), root.join("target/release").display());
    match caller {
        Some(p) if !p.is_empty() => format!("{ours}:{p}"),
        _ => ours,
    }
}

/// Where Debian's starpu-examples are.
pub fn examples_dir() -> Result<PathBuf, String> {
    let out = Command::new("pkg-config")
        .args(["--variable=libdir", "starpu-1.3"])
        .output()
        .map_err(|e| format!("cannot run pkg-config: {e}"))?;
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("starpu/examples");
    if dir.join("cg").exists() {
        Ok(dir)
    } else {
        Err(format!("StarPU's example programs are not in {}: apt-get install starpu-examples", dir.display()))
    }
}

/// What one program run printed, and its wall time.
struct Ran {
    stdout: String,
    stderr: String,
    wall_ms: f64,
}

/// Runs `cmd` with its output in files of `scratch` (no pipe to fill), stopped after
/// `timeout` ([`PROGRAM_TIMEOUT`] in `measure`); an error names the program, its status and the
/// end of its stderr.
fn run_program(mut cmd: Command, what: &str, scratch: &Path, timeout: Duration) -> Result<Ran, String> {
    let (out_path, err_path) = (scratch.join("stdout"), scratch.join("stderr"));
    let file = |p: &Path| std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()));
    cmd.stdout(Stdio::from(file(&out_path)?)).stderr(Stdio::from(file(&err_path)?));
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|e| format!("cannot start {what}: {e}"))?;
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
            break s;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{what} ran past {} s and was stopped", timeout.as_secs_f64()));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let wall_ms = start.elapsed().as_secs_f64() * 1e3;
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let (stdout, stderr) = (read(&out_path), read(&err_path));
    if !status.success() {
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        return Err(format!("{what} failed ({status}): {}", tail.into_iter().rev().collect::<Vec<_>>().join(" | ")));
    }
    Ok(Ran { stdout, stderr, wall_ms })
}

/// A command with StarPU's environment for `policy`: its own STARPU_HOME (performance models),
/// no variable of the caller's that would pick another policy or worker count, and, for pbs on
/// a program of StarPU's, the preload library.
pub fn starpu_command(program: &Path, policy: &str, workers: usize, scratch: &Path, preload: Option<&Path>) -> Command {
    let mut cmd = Command::new(program);
    cmd.env("LD_LIBRARY_PATH", library_path())
        .env("STARPU_HOME", scratch.join("starpu-home"))
        .env("STARPU_SILENT", "1")
        .env("STARPU_NCPU", workers.to_string())
        .env("STARPU_NCUDA", "0")
        .env("STARPU_NOPENCL", "0")
        .env("PBS_STARPU_VERBOSE", "1")
        .env_remove("STARPU_SCHED")
        .env_remove("LD_PRELOAD");
    if let Some(lib) = preload {
        cmd.env("STARPU_SCHED", policy);
        if policy == "pbs" {
            cmd.env("LD_PRELOAD", lib);
        }
    }
    cmd
}

/// The value of `key=` in a line of `key=value` pairs.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace().find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
}

/// One run of an app's program.
struct AppRun {
    iter_ms_median: f64,
    iter_ms_mean: f64,
    efficiency: f64,
    checksum: String,
    rebalancings: usize,
    migrations: usize,
    affinity: f64,
    misses: u64,
    wall_ms: f64,
}

fn app_run(dir: &Path, policy: &str, s: &StarpuSettings, scratch: &Path) -> Result<AppRun, String> {
    let trace = scratch.join("trace");
    // A program that wrote no trace must not be read with the run before's.
    if trace.exists() {
        std::fs::remove_file(&trace).map_err(|e| format!("{}: {e}", trace.display()))?;
    }
    let cmd = app_command(dir, policy, s, scratch, &trace);
    let ran = run_program(cmd, &format!("{} under {policy}", s.app), scratch, PROGRAM_TIMEOUT)?;
    let trace =
        std::fs::read_to_string(&trace).map_err(|e| format!("{} under {policy}: {}: {e}", s.app, trace.display()))?;
    read_app_run(s, &ran.stdout, &trace, ran.wall_ms)
}

/// The command that runs our app (`s.app`, built in `dir`) under `policy` with `s`'s sizes,
/// writing the order its tasks started to `trace`.
fn app_command(dir: &Path, policy: &str, s: &StarpuSettings, scratch: &Path, trace: &Path) -> Command {
    let mut cmd = starpu_command(&dir.join(&s.app), policy, s.workers, scratch, None);
    let number = |x: usize| x.to_string();
    cmd.args(["--sched", policy, "--workers", &number(s.workers), "--iters", &number(s.iters)])
        .args(["--nx", &number(s.nx), "--ny", &number(s.ny), "--nz", &number(s.nz)])
        .args(["--barrier", if s.barrier { "1" } else { "0" }, "--empty", if s.empty { "1" } else { "0" }])
        .arg("--trace")
        .arg(trace);
    match s.app.as_str() {
        "md" | "md3d" => {
            cmd.args(["--tile", &number(s.tile()), "--scenario", &s.scenario, "--seed", &s.seed.to_string()])
        }
        "heat3d" => cmd.args(["--side", &number(s.side())]),
        _ => cmd.args(["--side", &number(s.side()), "--hot", &s.hot.to_string(), "--load", &s.load]),
    };
    cmd
}

/// A run of our app from what it printed (its line `app: key=value …`) and the trace it wrote.
fn read_app_run(s: &StarpuSettings, stdout: &str, trace: &str, wall_ms: f64) -> Result<AppRun, String> {
    let app = s.app.as_str();
    let prefix = format!("{app}:");
    let line = stdout.lines().find(|l| l.starts_with(&prefix)).ok_or(format!("{app} printed no result line"))?;
    let get = |key: &str| field(line, key).ok_or_else(|| format!("no {key} in {app}'s line {line:?}"));
    fn parsed<T: std::str::FromStr>(value: &str, key: &str, line: &str) -> Result<T, String> {
        value.parse().map_err(|_| format!("bad {key} in {line:?}"))
    }
    let num = |key: &str| -> Result<f64, String> { parsed(get(key)?, key, line) };
    let count = |key: &str| -> Result<u64, String> { parsed(get(key)?, key, line) };
    let footprint = Footprint {
        box_bytes: count("box_bytes")?,
        halo_bytes: count("halo_bytes")?,
        written_bytes: count("written_bytes")?,
    };
    let (affinity, misses) = replay(trace, s, footprint)?;
    Ok(AppRun {
        iter_ms_median: num("iter_ms_median")?,
        iter_ms_mean: num("iter_ms_mean")?,
        efficiency: num("efficiency")?,
        checksum: get("checksum")?.to_string(),
        rebalancings: count("rebalancings")? as usize,
        migrations: count("migrations")? as usize,
        affinity,
        misses,
        wall_ms,
    })
}

/// Affinity and modelled misses from a trace of "worker box" lines in the order tasks started,
/// each task touching `footprint`.
fn replay(trace: &str, s: &StarpuSettings, footprint: Footprint) -> Result<(f64, u64), String> {
    let grid = Grid::new_3d(s.nx, s.ny, s.nz).map_err(|e| e.to_string())?;
    let cache = CacheModel::new(grid, s.workers, s.cache_bytes, footprint).map_err(|e| e.to_string())?;
    let mut last = vec![u32::MAX; grid.len()];
    let (mut same, mut again) = (0u64, 0u64);
    for line in trace.lines() {
        let mut it = line.split_whitespace().map(str::parse::<usize>);
        let (Some(Ok(worker)), Some(Ok(k))) = (it.next(), it.next()) else {
            return Err(format!("a bad trace line {line:?}"));
        };
        if k >= grid.len() {
            return Err(format!("box {k} in the trace, of {}", grid.len()));
        }
        let w = (worker % s.workers) as u32;
        if last[k] != u32::MAX {
            again += 1;
            same += u64::from(last[k] == w);
        }
        last[k] = w;
        // A dataflow run has no phases: each run's writes reach the other workers at once.
        cache.run_box_on(w as usize, k);
        cache.end_phase();
    }
    let affinity = if again > 0 { same as f64 / again as f64 } else { 1.0 };
    Ok((affinity, cache.take().misses))
}

/// FNV-1a of the lines that carry results, or None when there are none.
fn result_hash(stdout: &str, keep: fn(&str) -> bool) -> Option<String> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut any = false;
    for line in stdout.lines().filter(|l| keep(l)) {
        any = true;
        for b in line.trim_end().bytes().chain(*b"\n") {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    any.then(|| format!("{h:016x}"))
}

/// Runs everything; `progress` is called after every program run.
pub fn measure(s: &StarpuSettings, mut progress: impl FnMut()) -> Result<Vec<StarpuRow>, String> {
    check(s)?;
    let dir = build()?;
    let scratch = std::env::temp_dir().join(format!("pbs-bench-starpu-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let result = measure_in(s, &dir, &scratch, &mut progress);
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// Settings that would run nothing, or compare with nothing, named before StarPU is built.
fn check(s: &StarpuSettings) -> Result<(), String> {
    if s.workers == 0
        || s.repeats == 0
        || s.iters == 0
        || s.nx == 0
        || s.ny == 0
        || s.nz == 0
        || s.side() < 3
        || s.tile() == 0
    {
        return Err("threads, iters, repeats, nx, ny, nz and tile must be ≥ 1 and side ≥ 3".into());
    }
    if s.nz > 1 && (s.app == "heat" || s.app == "md") {
        return Err(format!("--nz {}: {} is a 2D code; heat3d and md3d take layers", s.nz, s.app));
    }
    if !(0.0..=1e6).contains(&s.hot) {
        return Err(format!("--hot must be from 0 to 1e6, got {:?}", s.hot));
    }
    if !s.policies.iter().any(|p| p == "eager") {
        return Err("the policies must include eager: every ratio and output is compared with it".into());
    }
    Ok(())
}

/// `run(p)` for each of `policies` policies once a round, in an order rotated from round to
/// round (round r starts with policy r mod `policies`), `warm_up` rounds first whose runs are
/// dropped: `runs[p]`, the measured rounds in order.
fn rounds<R>(
    policies: usize,
    warm_up: usize,
    repeats: usize,
    mut run: impl FnMut(usize) -> Result<R, String>,
) -> Result<Vec<Vec<R>>, String> {
    let mut runs: Vec<Vec<R>> = (0..policies).map(|_| Vec::new()).collect();
    for round in 0..warm_up.saturating_add(repeats) {
        for i in 0..policies {
            let p = (i + round) % policies;
            let r = run(p)?;
            if round >= warm_up {
                runs[p].push(r);
            }
        }
    }
    Ok(runs)
}

fn measure_in(
    s: &StarpuSettings,
    dir: &Path,
    scratch: &Path,
    progress: &mut impl FnMut(),
) -> Result<Vec<StarpuRow>, String> {
    // One warm-up round: it also lets dmda calibrate its performance model.
    let runs = rounds(s.policies.len(), 1, s.repeats, |p| {
        let run = app_run(dir, &s.policies[p], s, scratch);
        progress();
        run
    })?;
    let mut rows = app_rows(s, &runs);
    if s.examples {
        rows.extend(examples(s, dir, scratch, progress)?);
    }
    Ok(rows)
}

/// Our app's rows from its measured runs: `runs[p][round]` is policy `s.policies[p]`'s run of
/// that round. Times and misses are medians over rounds; ratios, medians of the ratios within
/// each round; a checksum that differs between rounds reads [`VARIES`] and matches nothing.
fn app_rows(s: &StarpuSettings, runs: &[Vec<AppRun>]) -> Vec<StarpuRow> {
    let eager = s.policies.iter().position(|p| p == "eager").expect("checked");
    let n = s.policies.len();
    let mut rows = Vec::new();
    for (p, policy) in s.policies.iter().enumerate() {
        let r = &runs[p];
        let med = |f: fn(&AppRun) -> f64| median(&r.iter().map(f).collect::<Vec<_>>());
        let to_eager =
            |f: fn(&AppRun) -> f64| median(&r.iter().zip(&runs[eager]).map(|(a, b)| f(a) / f(b)).collect::<Vec<_>>());
        let miss_ratios: Vec<f64> = r
            .iter()
            .zip(&runs[eager])
            .filter(|(_, b)| b.misses > 0)
            .map(|(a, b)| a.misses as f64 / b.misses as f64)
            .collect();
        let to_best_other: Vec<f64> = (0..r.len())
            .filter_map(|k| {
                let best = (0..n).filter(|&q| q != p).map(|q| runs[q][k].iter_ms_mean).reduce(f64::min)?;
                Some(r[k].iter_ms_mean / best)
            })
            .collect();
        let checksums: Vec<&str> = r.iter().map(|x| x.checksum.as_str()).collect();
        let stable = checksums.iter().all(|c| *c == checksums[0]);
        let pbs = policy == "pbs";
        rows.push(StarpuRow {
            program: s.app.clone(),
            scheduler: policy.clone(),
            iter_ms_median: Some(med(|x| x.iter_ms_median)),
            iter_ms_mean: Some(med(|x| x.iter_ms_mean)),
            ratio_to_eager: Some(to_eager(|x| x.iter_ms_median)),
            mean_ratio_to_eager: Some(to_eager(|x| x.iter_ms_mean)),
            mean_ratio_to_best_other: (!to_best_other.is_empty()).then(|| median(&to_best_other)),
            efficiency: Some(med(|x| x.efficiency)),
            affinity: Some(med(|x| x.affinity)),
            modelled_misses: Some(med(|x| x.misses as f64) as u64),
            misses_to_eager: (!miss_ratios.is_empty()).then(|| median(&miss_ratios)),
            migrations: pbs.then(|| med(|x| x.migrations as f64) as usize),
            rebalancings: pbs.then(|| med(|x| x.rebalancings as f64) as usize),
            checksum: Some(if stable { checksums[0].to_string() } else { VARIES.into() }),
            output_matches_eager: Some(stable && checksums[0] == runs[eager][0].checksum),
            wall_ms_median: med(|x| x.wall_ms),
            note: if s.empty { "empty tasks".into() } else { String::new() },
        });
    }
    rows
}

/// StarPU's programs, unchanged, under every policy (pbs through the preload library), in
/// rounds as our apps.
fn examples(
    s: &StarpuSettings,
    dir: &Path,
    scratch: &Path,
    progress: &mut impl FnMut(),
) -> Result<Vec<StarpuRow>, String> {
    let root = examples_dir()?;
    let preload = dir.join("libpbs_starpu_preload.so");
    let mut rows = Vec::new();
    for ex in &EXAMPLES {
        // Per run: its wall time, its results' hash, and whether a pbs run reported the policy.
        let runs = rounds(s.policies.len(), 0, s.repeats, |p| {
            let policy = &s.policies[p];
            let mut cmd = starpu_command(&root.join(ex.path), policy, s.workers, scratch, Some(&preload));
            cmd.args(ex.args);
            let ran = run_program(cmd, &format!("StarPU's {} under {policy}", ex.name), scratch, PROGRAM_TIMEOUT)?;
            progress();
            // StarPU's examples print their results on stdout or stderr.
            let hash = result_hash(&format!("{}\n{}", ran.stdout, ran.stderr), ex.result_line);
            Ok((ran.wall_ms, hash, policy != "pbs" || ran.stderr.contains("pbs (StarPU policy):")))
        })?;
        let wall: Vec<Vec<f64>> = runs.iter().map(|r| r.iter().map(|x| x.0).collect()).collect();
        let hash: Vec<Option<String>> = runs
            .iter()
            .map(|r| r.iter().enumerate().fold(None, |kept, (round, x)| round_hash(round, &kept, x.1.clone())))
            .collect();
        let used_pbs = runs.iter().flatten().all(|x| x.2);
        rows.extend(example_rows(s, ex, &wall, &hash, used_pbs));
    }
    Ok(rows)
}

/// A program's results' hash after `round` (from 0): this round's, or [`VARIES`] where it
/// differs from the rounds' before.
fn round_hash(round: usize, kept: &Option<String>, now: Option<String>) -> Option<String> {
    if round > 0 && now != *kept {
        Some(VARIES.into())
    } else {
        now
    }
}

/// An example's rows: `wall[p][round]` and `hash[p]` (its results' hash, [`VARIES`] where its
/// rounds differed) of policy `s.policies[p]`; `used_pbs`, whether every pbs run reported the
/// policy. Wall-time ratios are medians of the ratios within each round.
fn example_rows(
    s: &StarpuSettings,
    ex: &Example,
    wall: &[Vec<f64>],
    hash: &[Option<String>],
    used_pbs: bool,
) -> Vec<StarpuRow> {
    let eager = s.policies.iter().position(|p| p == "eager").expect("checked");
    let mut rows = Vec::new();
    for (p, policy) in s.policies.iter().enumerate() {
        let (matches, mut note) = compare_with_eager(&hash[eager], &hash[p], ex.varies);
        if policy == "pbs" && !used_pbs {
            note.push_str("the pbs policy did not report: the preload was not used; ");
        }
        rows.push(StarpuRow {
            program: ex.name.into(),
            scheduler: policy.clone(),
            iter_ms_median: None,
            iter_ms_mean: None,
            ratio_to_eager: Some(median(&wall[p].iter().zip(&wall[eager]).map(|(a, b)| a / b).collect::<Vec<_>>())),
            mean_ratio_to_eager: None,
            mean_ratio_to_best_other: None,
            efficiency: None,
            affinity: None,
            modelled_misses: None,
            misses_to_eager: None,
            migrations: None,
            rebalancings: None,
            checksum: hash[p].clone(),
            output_matches_eager: matches,
            wall_ms_median: median(&wall[p]),
            note: note.trim_end_matches("; ").to_string(),
        });
    }
    rows
}

/// Whether a program's results under a policy (`mine`: the hash of the lines that carry them,
/// [`VARIES`] where they differed between its runs, `None` where it printed none) match
/// eager's, and the note that says why they are not compared: `None` where either varied
/// between its runs, or where the program's results vary under any policy (`varies`, why) and
/// they differ.
fn compare_with_eager(
    eager: &Option<String>,
    mine: &Option<String>,
    varies_anyway: Option<&str>,
) -> (Option<bool>, String) {
    let varies = |h: &Option<String>| h.as_deref() == Some(VARIES);
    let mut note = String::new();
    if eager.is_none() {
        note.push_str("prints no computed values; ");
    }
    let matches = match (eager, mine) {
        (Some(e), Some(m)) if !varies(eager) && !varies(mine) => Some(e == m),
        _ => None,
    };
    // A result that varies under eager too may differ from eager's one run.
    let matches = match varies_anyway {
        Some(why) if matches == Some(false) => {
            note.push_str(&format!("{why}: differs from eager's in the last digits; "));
            None
        }
        _ => matches,
    };
    // Floating-point reductions in execution order: not comparable.
    if varies(mine) {
        note.push_str("its results vary from run to run under this policy; ");
    } else if varies(eager) {
        note.push_str("its results vary from run to run under eager; ");
    }
    (matches, note)
}

/// An error naming every row whose results differ from eager's (`= eager` reads `NO`), with
/// both checksums. Our apps are deterministic and the examples compared are those whose results
/// do not depend on the order of their tasks, so a difference is a task lost, repeated or run
/// on stale data: `pbs-bench starpu` prints its table, then fails with it.
pub fn check_outputs(rows: &[StarpuRow]) -> Result<(), String> {
    let checksum = |r: &StarpuRow| r.checksum.clone().unwrap_or_else(|| "-".into());
    let differ: Vec<String> = rows
        .iter()
        .filter(|r| r.output_matches_eager == Some(false))
        .map(|r| {
            if r.checksum.as_deref() == Some(VARIES) {
                return format!("{} under {} ended differently from round to round", r.program, r.scheduler);
            }
            let eager = rows.iter().find(|e| e.program == r.program && e.scheduler == "eager");
            format!(
                "{} under {} ended with {}, under eager with {}",
                r.program,
                r.scheduler,
                checksum(r),
                eager.map_or("-".into(), checksum)
            )
        })
        .collect();
    if differ.is_empty() {
        Ok(())
    } else {
        Err(format!("results differ from eager's: {} (a task lost, repeated or run on stale data)", differ.join("; ")))
    }
}

/// Program runs `measure` makes (for a progress bar; saturating at `u64::MAX`).
pub fn runs(s: &StarpuSettings) -> u64 {
    let ours = progress::units(&[s.policies.len(), s.repeats.saturating_add(1)]);
    let examples = if s.examples { progress::units(&[EXAMPLES.len(), s.policies.len(), s.repeats]) } else { 0 };
    ours.saturating_add(examples)
}

/// A line for under the table of a run whose tasks were submitted ahead: there an iteration's
/// time is the gap between the ends of two iterations, which spreads where workers run ahead
/// (docs/starpu.md, "The median against the mean on contraction"); `None` with `--barrier`,
/// where each iteration is timed alone.
pub fn submission_note(s: &StarpuSettings) -> Option<&'static str> {
    (!s.barrier).then_some(
        "Tasks submitted ahead: `iter ms` is the median gap between the ends of consecutive iterations, which \
         also measures how evenly they end (the gaps spread where workers run ahead on their own boxes); \
         `mean ms`, the run's length over its iterations, is its throughput. --barrier times each iteration \
         alone.",
    )
}

/// The rows as a table.
pub fn table(rows: &[StarpuRow]) -> Table {
    let mut t = Table::new(&[
        "program",
        "policy",
        "iter ms",
        "vs eager",
        "mean ms",
        "vs eager",
        "vs best other",
        "efficiency",
        "affinity",
        "modelled misses",
        "misses vs eager",
        "migrations",
        "rebalancings",
        "wall ms",
        "checksum",
        "= eager",
        "note",
    ]);
    let opt = |x: Option<f64>, digits: usize| x.map_or("-".to_string(), |v| format!("{v:.digits$}"));
    for r in rows {
        t.row(vec![
            r.program.clone(),
            r.scheduler.clone(),
            opt(r.iter_ms_median, 3),
            opt(r.ratio_to_eager, 3),
            opt(r.iter_ms_mean, 3),
            opt(r.mean_ratio_to_eager, 3),
            opt(r.mean_ratio_to_best_other, 3),
            opt(r.efficiency, 3),
            opt(r.affinity, 3),
            r.modelled_misses.map_or("-".into(), |m| m.to_string()),
            opt(r.misses_to_eager, 3),
            r.migrations.map_or("-".into(), |m| m.to_string()),
            r.rebalancings.map_or("-".into(), |m| m.to_string()),
            format!("{:.1}", r.wall_ms_median),
            r.checksum.clone().unwrap_or_else(|| "-".into()),
            r.output_matches_eager.map_or("-".into(), |m| if m { "yes".into() } else { "NO".into() }),
            r.note.clone(),
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> StarpuSettings {
        StarpuSettings {
            app: "heat".into(),
            workers: 2,
            iters: 2,
            repeats: 1,
            nx: 2,
            ny: 2,
            side: Some(4),
            nz: 1,
            hot: 1.0,
            load: "corner".into(),
            tile: Some(1),
            scenario: "gravity".into(),
            seed: 1,
            barrier: false,
            empty: false,
            policies: vec!["eager".into()],
            examples: false,
            cache_bytes: 1 << 20,
        }
    }

    #[test]
    fn a_trace_gives_affinity_and_misses_and_bad_lines_are_named() {
        let s = settings();
        // Boxes 0..3 on workers 0,0,1,1, then again with box 3 moved to worker 0.
        let f = Footprint { box_bytes: 256, halo_bytes: 32, written_bytes: 128 };
        let (affinity, misses) = replay("0 0\n0 1\n1 2\n1 3\n0 0\n0 1\n1 2\n0 3\n", &s, f).unwrap();
        assert_eq!(affinity, 0.75);
        assert!(misses > 0);
        assert_eq!(replay("0 0\n1 1\n", &s, f).unwrap().0, 1.0, "no box ran twice: nothing to lose");
        assert!(replay("0 9\n", &s, f).unwrap_err().contains("box 9"));
        assert!(replay("zero 1\n", &s, f).unwrap_err().contains("bad trace line"));
    }

    #[test]
    fn result_lines_are_hashed_and_the_others_ignored() {
        let keep: fn(&str) -> bool = |l| l.starts_with("Delta");
        let a = result_hash("Delta 1\ntook 3 ms\n", keep);
        assert_eq!(a, result_hash("Delta 1\ntook 4 ms\n", keep));
        assert_ne!(a, result_hash("Delta 2\ntook 3 ms\n", keep));
        assert_eq!(result_hash("took 3 ms\n", keep), None);
        // FNV-1a of the kept lines, each ended by a newline (trailing blanks dropped).
        assert_eq!(result_hash("Delta 1  \ntook 3 ms\n", keep).as_deref(), Some("72773d5ecfcedf04"));
    }

    /// A program that sums in the order its tasks ran is not called a mismatch for differing
    /// from eager in the last digits; a program that does not sum so is, and one whose results
    /// varied between runs is not compared.
    #[test]
    fn a_difference_is_a_mismatch_only_where_the_order_of_tasks_cannot_explain_it() {
        let (a, b) = (Some("aaaa".to_string()), Some("bbbb".to_string()));
        let varied = Some(VARIES.to_string());
        let sums = Some("sums in the order its tasks ran");
        assert_eq!(compare_with_eager(&a, &a, None), (Some(true), String::new()));
        assert_eq!(compare_with_eager(&a, &b, None), (Some(false), String::new()));
        assert_eq!(compare_with_eager(&a, &a, sums), (Some(true), String::new()));
        let (m, note) = compare_with_eager(&a, &b, sums);
        assert_eq!(m, None);
        assert_eq!(note, "sums in the order its tasks ran: differs from eager's in the last digits; ");
        let (m, note) = compare_with_eager(&a, &varied, None);
        assert!(m.is_none() && note.contains("vary from run to run under this policy"), "{note}");
        let (m, note) = compare_with_eager(&varied, &a, sums);
        assert!(m.is_none() && note.contains("under eager") && !note.contains("sums"), "{note}");
        let (m, note) = compare_with_eager(&None, &None, None);
        assert!(m.is_none() && note.contains("prints no computed values"), "{note}");
    }

    /// A run of our app with these figures (migrations and rebalancings from the time).
    fn app_run(iter_ms: f64, mean_ms: f64, misses: u64, checksum: &str) -> AppRun {
        AppRun {
            iter_ms_median: iter_ms,
            iter_ms_mean: mean_ms,
            efficiency: 1.0 / mean_ms,
            checksum: checksum.into(),
            rebalancings: iter_ms as usize,
            migrations: 10 * iter_ms as usize,
            affinity: 0.1 * iter_ms,
            misses,
            wall_ms: 100.0 * mean_ms,
        }
    }

    /// Each cell of our app's rows from runs of known figures over three rounds, where the
    /// median of the ratios within rounds differs from the ratio of the medians.
    #[test]
    fn our_apps_rows_are_medians_over_rounds_and_ratios_within_rounds() {
        let s = StarpuSettings { policies: vec!["pbs".into(), "eager".into(), "ws".into()], ..settings() };
        let runs = vec![
            // pbs: iteration medians 1, 3, 8; means 2, 6, 5
            vec![app_run(1.0, 2.0, 30, "c"), app_run(3.0, 6.0, 0, "c"), app_run(8.0, 5.0, 90, "c")],
            // eager: 2, 2, 2; means 1, 3, 10; misses 10, 0 (a round left out of the ratio), 30
            vec![app_run(2.0, 1.0, 10, "c"), app_run(2.0, 3.0, 0, "c"), app_run(2.0, 10.0, 30, "c")],
            // ws: its rounds end in different states
            vec![app_run(4.0, 4.0, 20, "c"), app_run(4.0, 2.0, 20, "d"), app_run(4.0, 4.0, 20, "c")],
        ];
        let rows = app_rows(&s, &runs);
        assert_eq!(rows.len(), 3);
        let [pbs, eager, ws] = [&rows[0], &rows[1], &rows[2]];
        assert_eq!((pbs.program.as_str(), pbs.scheduler.as_str(), ws.scheduler.as_str()), ("heat", "pbs", "ws"));
        assert_eq!(pbs.iter_ms_median, Some(3.0));
        assert_eq!(pbs.iter_ms_mean, Some(5.0));
        // Ratios within rounds: 0.5, 1.5, 4 (the ratio of the medians would be 1.5 too: the
        // means' ratios 2, 2, 0.5 tell them apart).
        assert_eq!(pbs.ratio_to_eager, Some(1.5));
        assert_eq!(pbs.mean_ratio_to_eager, Some(2.0));
        assert_eq!(eager.ratio_to_eager, Some(1.0));
        // The best other in each round: pbs against 1, 2, 4 (eager, ws, ws) → 2, 3, 1.25; eager
        // against 2, 2, 4 → 0.5, 1.5, 2.5; ws against 1, 3, 5 → 4, 0.667, 0.8.
        assert_eq!(pbs.mean_ratio_to_best_other, Some(2.0));
        assert_eq!(eager.mean_ratio_to_best_other, Some(1.5));
        assert_eq!(ws.mean_ratio_to_best_other, Some(0.8));
        assert_eq!(pbs.efficiency, Some(0.2));
        assert_eq!(pbs.affinity, Some(0.1 * 3.0));
        assert_eq!(pbs.modelled_misses, Some(30));
        assert_eq!(pbs.misses_to_eager, Some(3.0), "3 and 3: the round where eager missed nothing left out");
        assert!((ws.misses_to_eager.unwrap() - (2.0 + 20.0 / 30.0) / 2.0).abs() < 1e-12, "{ws:?}");
        assert_eq!((pbs.migrations, pbs.rebalancings), (Some(30), Some(3)));
        assert_eq!((eager.migrations, ws.rebalancings), (None, None), "only pbs has owners");
        assert_eq!(pbs.wall_ms_median, 500.0);
        assert_eq!((pbs.checksum.as_deref(), pbs.output_matches_eager), (Some("c"), Some(true)));
        assert_eq!((ws.checksum.as_deref(), ws.output_matches_eager), (Some(VARIES), Some(false)));
        assert_eq!(pbs.note, "");
        // Empty tasks are noted; one policy alone has no other to be compared with, and a run
        // where eager missed nothing has no misses ratio.
        let s = StarpuSettings { empty: true, ..settings() };
        let rows = app_rows(&s, &[vec![app_run(1.0, 1.0, 0, "c")]]);
        assert_eq!(rows[0].note, "empty tasks");
        assert_eq!((rows[0].mean_ratio_to_best_other, rows[0].misses_to_eager), (None, None));
        assert_eq!((rows[0].output_matches_eager, rows[0].ratio_to_eager), (Some(true), Some(1.0)));
        // A stable checksum that is not eager's.
        let s = StarpuSettings { policies: vec!["eager".into(), "pbs".into()], ..settings() };
        let rows = app_rows(&s, &[vec![app_run(1.0, 1.0, 0, "c")], vec![app_run(1.0, 1.0, 0, "e")]]);
        assert_eq!(rows[1].output_matches_eager, Some(false));
    }

    /// An example's rows: wall ratios within rounds, its results' hash against eager's, and a
    /// pbs run that did not use the policy noted.
    #[test]
    fn an_examples_rows_compare_its_results_and_walls_with_eagers() {
        let s = StarpuSettings { policies: vec!["eager".into(), "pbs".into(), "ws".into()], ..settings() };
        let ex = &EXAMPLES[1];
        let wall = vec![vec![10.0, 20.0, 40.0], vec![30.0, 10.0, 60.0], vec![10.0, 10.0, 10.0]];
        let hash = vec![Some("h".to_string()), Some("h".to_string()), Some("x".to_string())];
        let rows = example_rows(&s, ex, &wall, &hash, true);
        let [eager, pbs, ws] = [&rows[0], &rows[1], &rows[2]];
        assert_eq!((pbs.program.as_str(), pbs.scheduler.as_str()), (ex.name, "pbs"));
        // pbs / eager: 3, 0.5, 1.5; its own walls' median 30.
        assert_eq!((pbs.ratio_to_eager, pbs.wall_ms_median), (Some(1.5), 30.0));
        assert_eq!((ws.ratio_to_eager, eager.ratio_to_eager), (Some(0.5), Some(1.0)));
        assert_eq!((pbs.output_matches_eager, ws.output_matches_eager), (Some(true), Some(false)));
        assert_eq!((ws.checksum.as_deref(), pbs.note.as_str()), (Some("x"), ""));
        assert!(pbs.iter_ms_median.is_none() && pbs.efficiency.is_none() && pbs.affinity.is_none());
        assert!(pbs.modelled_misses.is_none() && pbs.migrations.is_none() && pbs.mean_ratio_to_best_other.is_none());
        let rows = example_rows(&s, ex, &wall, &hash, false);
        assert_eq!(rows[1].note, "the pbs policy did not report: the preload was not used");
        assert_eq!(rows[2].note, "", "only pbs's row says so");
        // The hash kept over rounds: the first round's, then VARIES from the first that differs.
        let (h, g) = (Some("h".to_string()), Some("g".to_string()));
        assert_eq!(round_hash(0, &None, h.clone()), h);
        assert_eq!(round_hash(1, &h, h.clone()), h);
        assert_eq!(round_hash(1, &h, g.clone()).as_deref(), Some(VARIES));
        assert_eq!(round_hash(2, &Some(VARIES.into()), h.clone()).as_deref(), Some(VARIES));
        assert_eq!(round_hash(1, &None, None), None);
    }

    /// The command fails after its table where a row reads `NO`, naming the program, the policy
    /// and both checksums; a row not compared (`-`) passes.
    #[test]
    fn results_that_differ_from_eagers_are_an_error_naming_them() {
        let s = StarpuSettings { policies: vec!["eager".into(), "pbs".into()], ..settings() };
        let same = app_rows(&s, &[vec![app_run(1.0, 1.0, 0, "c")], vec![app_run(1.0, 1.0, 0, "c")]]);
        assert_eq!(check_outputs(&same), Ok(()));
        let hash = vec![Some("h".to_string()), None];
        let not_compared = example_rows(&s, &EXAMPLES[0], &[vec![1.0], vec![1.0]], &hash, true);
        assert_eq!(not_compared[1].output_matches_eager, None);
        assert_eq!(check_outputs(&not_compared), Ok(()));
        let differ = app_rows(&s, &[vec![app_run(1.0, 1.0, 0, "c")], vec![app_run(1.0, 1.0, 0, "e")]]);
        let e = check_outputs(&[same, differ].concat()).unwrap_err();
        assert_eq!(
            e,
            "results differ from eager's: heat under pbs ended with e, under eager with c (a task lost, repeated or \
             run on stale data)"
        );
        let varies = app_rows(
            &s,
            &[
                vec![app_run(1.0, 1.0, 0, "c"), app_run(1.0, 1.0, 0, "c")],
                vec![app_run(1.0, 1.0, 0, "c"), app_run(1.0, 1.0, 0, "d")],
            ],
        );
        let e = check_outputs(&varies).unwrap_err();
        assert!(e.contains("heat under pbs ended differently from round to round"), "{e}");
    }

    /// A mismatch names eager's checksum of the same program, not another program's.
    #[test]
    fn a_mismatch_is_told_against_eagers_run_of_the_same_program() {
        let s = StarpuSettings { policies: vec!["eager".into(), "pbs".into()], ..settings() };
        let heat = app_rows(&s, &[vec![app_run(1.0, 1.0, 0, "h")], vec![app_run(1.0, 1.0, 0, "h")]]);
        let hash = vec![Some("e".to_string()), Some("p".to_string())];
        let example = example_rows(&s, &EXAMPLES[2], &[vec![1.0], vec![1.0]], &hash, true);
        let e = check_outputs(&[heat, example].concat()).unwrap_err();
        assert!(e.contains("cg under pbs ended with p, under eager with e"), "{e}");
        assert!(!e.contains("heat"), "{e}");
    }

    /// The table's cells: three decimals for ratios and times, `-` where a field does not apply,
    /// `yes`/`NO`/`-` for the comparison with eager.
    #[test]
    fn the_table_shows_each_field_or_a_dash() {
        let s = StarpuSettings { policies: vec!["eager".into(), "pbs".into()], ..settings() };
        let mut rows = app_rows(&s, &[vec![app_run(2.0, 4.0, 10, "c")], vec![app_run(1.0, 3.0, 5, "d")]]);
        let hash = vec![Some("e".to_string()), None];
        rows.extend(example_rows(&s, &EXAMPLES[2], &[vec![10.0], vec![12.5]], &hash, true));
        let t = table(&rows);
        assert_eq!(t.header.len(), 17);
        assert_eq!(
            t.rows[1],
            [
                "heat", "pbs", "1.000", "0.500", "3.000", "0.750", "0.750", "0.333", "0.100", "5", "0.500", "10", "1",
                "300.0", "d", "NO", ""
            ]
        );
        assert_eq!(t.rows[0][11..16], ["-", "-", "400.0", "c", "yes"]);
        assert_eq!(
            t.rows[3],
            ["cg", "pbs", "-", "1.250", "-", "-", "-", "-", "-", "-", "-", "-", "-", "12.5", "-", "-", ""]
        );
    }

    /// The progress bar's length: a warm-up round and the measured ones for our app, the
    /// measured ones for each example.
    #[test]
    fn the_progress_bar_counts_every_program_run() {
        let s = StarpuSettings { policies: vec!["eager".into(), "pbs".into(), "ws".into()], repeats: 4, ..settings() };
        assert_eq!(runs(&s), 3 * 5);
        assert_eq!(runs(&StarpuSettings { examples: true, ..s.clone() }), 3 * 5 + 7 * 3 * 4);
        assert_eq!(runs(&StarpuSettings { examples: true, repeats: usize::MAX, ..s }), u64::MAX);
    }

    /// Each example's result lines, on the output it printed under eager here (2026-12-05): the
    /// values it computed, never its times.
    #[test]
    fn each_examples_result_lines_are_its_values() {
        let printed: [(&str, &str, &[&str]); 7] = [
            ("stencil", "Iteration 3 on worker 1\nTotal time 12.3 ms\n", &[]),
            (
                "heat (FEM, CG)",
                "func 3 : DOT = 14423123968.000000\nnrow = 256\ni : 0 (MAX 100000)\n\tdelta_new 14.0 (7.5)\ntook 3 ms\n",
                &["func 3 : DOT = 14423123968.000000", "\tdelta_new 14.0 (7.5)"],
            ),
            (
                "cg",
                "*** INITIAL ***\nDelta 0: 4.096000e+03\niter 0 DELTA 1.45e+03 - 1.4e-04\nTotal timing : 0.01 seconds\n\
                 Seconds per iteration : 2.03e-03\n",
                &["Delta 0: 4.096000e+03", "iter 0 DELTA 1.45e+03 - 1.4e-04"],
            ),
            (
                "lu (double)",
                "Checking result\nAvg error : 8.2e-17\nMax error : 0.0e+00\n||A-LU|| / (||A||*N) : 2.6e-20\n\
                 # size\tms\tGFlop/s\n256\t3\t3.6\n",
                &["Avg error : 8.2e-17", "Max error : 0.0e+00", "||A-LU|| / (||A||*N) : 2.6e-20"],
            ),
            ("dot_product", "Reference : 3.27e+04 vs. 3.27e+04 (Delta -4.7e-10)\n", &["Reference : 3.27e+04 vs. 3.27e+04 (Delta -4.7e-10)"]),
            (
                "spmv",
                "Computation took (in ms)\n0.00\t1.00\n1.00\t7.00\n24.52\n# a\tb\n",
                &["0.00\t1.00", "1.00\t7.00"],
            ),
            (
                "vector_scal",
                "[BEFORE] 1-th element    : 2.00\n[AFTER] 1-th element     : 6.28 (should be 6.28)\nin 3 ms\n",
                &["[BEFORE] 1-th element    : 2.00", "[AFTER] 1-th element     : 6.28 (should be 6.28)"],
            ),
        ];
        for (ex, (name, output, want)) in EXAMPLES.iter().zip(printed) {
            assert_eq!(ex.name, name);
            let kept: Vec<&str> = output.lines().filter(|l| (ex.result_line)(l)).collect();
            assert_eq!(kept, want, "{name}");
            assert_eq!(ex.varies.is_some(), name == "dot_product" || name == "lu (double)", "{name}");
        }
    }

    /// A program's output comes back whole; one that fails is named with its status and the end
    /// of its stderr; one that runs past its time is stopped, not waited on.
    #[test]
    fn a_program_is_run_timed_and_stopped_at_its_limit() {
        let scratch = std::env::temp_dir().join(format!("pbs-bench-run-program-{}", std::process::id()));
        std::fs::create_dir_all(&scratch).unwrap();
        let sh = |script: &str| {
            let mut c = Command::new("sh");
            c.args(["-c", script]);
            c
        };
        let start = Instant::now();
        let ran =
            run_program(sh("echo out; echo err >&2; sleep 0.2"), "echo", &scratch, Duration::from_secs(60)).unwrap();
        let call_ms = start.elapsed().as_secs_f64() * 1e3;
        assert_eq!((ran.stdout.as_str(), ran.stderr.as_str()), ("out\n", "err\n"));
        assert!(ran.wall_ms >= 200.0 && ran.wall_ms <= call_ms, "{} ms of a {call_ms} ms call", ran.wall_ms);
        let e = run_program(sh("echo a >&2; echo b >&2; exit 3"), "the failing one", &scratch, Duration::from_secs(60))
            .err()
            .unwrap();
        assert!(e.starts_with("the failing one failed (exit status: 3): a | b"), "{e}");
        let start = Instant::now();
        let e = run_program(sh("sleep 30"), "the slow one", &scratch, Duration::from_millis(300)).err().unwrap();
        assert_eq!(e, "the slow one ran past 0.3 s and was stopped");
        assert!(start.elapsed() < Duration::from_secs(20), "stopped, not waited on");
        let e = run_program(Command::new("/nonexistent/program"), "nothing", &scratch, Duration::from_secs(1))
            .err()
            .unwrap();
        assert!(e.starts_with("cannot start nothing:"), "{e}");
        let _ = std::fs::remove_dir_all(&scratch);
    }

    #[test]
    fn the_programs_find_this_builds_libraries_first() {
        let root = Path::new("/r");
        assert_eq!(library_path_before(root, None), "/r/target/starpu:/r/target/release");
        assert_eq!(library_path_before(root, Some(String::new())), "/r/target/starpu:/r/target/release");
        assert_eq!(library_path_before(root, Some("/old".into())), "/r/target/starpu:/r/target/release:/old");
        assert!(library_path().starts_with(&format!("{}:", repo_root().join("target/starpu").display())));
        assert_eq!(repo_root().join("bench"), Path::new(env!("CARGO_MANIFEST_DIR")));
    }

    /// The environment of a StarPU program: ours named no policy (it names its own), an
    /// example's names it, and only pbs's preloads the library.
    #[test]
    fn a_programs_environment_picks_its_policy_and_nothing_of_the_callers() {
        let env = |cmd: &Command, key: &str| {
            cmd.get_envs().find(|(k, _)| *k == key).map(|(_, v)| v.map(|v| v.to_string_lossy().to_string()))
        };
        let scratch = Path::new("/s");
        let preload = Path::new("/lib/preload.so");
        let ours = starpu_command(Path::new("/p/heat"), "pbs", 3, scratch, None);
        assert_eq!(ours.get_program(), "/p/heat");
        assert_eq!(env(&ours, "STARPU_NCPU"), Some(Some("3".into())));
        assert_eq!(env(&ours, "STARPU_HOME"), Some(Some("/s/starpu-home".into())));
        assert_eq!(env(&ours, "STARPU_SCHED"), Some(None), "removed");
        assert_eq!(env(&ours, "LD_PRELOAD"), Some(None), "removed");
        assert_eq!(env(&ours, "LD_LIBRARY_PATH"), Some(Some(library_path())));
        let pbs = starpu_command(Path::new("/p/cg"), "pbs", 2, scratch, Some(preload));
        assert_eq!(env(&pbs, "STARPU_SCHED"), Some(Some("pbs".into())));
        assert_eq!(env(&pbs, "LD_PRELOAD"), Some(Some("/lib/preload.so".into())));
        let eager = starpu_command(Path::new("/p/cg"), "eager", 2, scratch, Some(preload));
        assert_eq!(env(&eager, "STARPU_SCHED"), Some(Some("eager".into())));
        assert_eq!(env(&eager, "LD_PRELOAD"), Some(None));
    }

    /// Our app's command line: the sizes of the settings, and each app's own options.
    #[test]
    fn our_apps_command_line_carries_the_settings() {
        let args = |s: &StarpuSettings| {
            let cmd = app_command(Path::new("/d"), "lws", s, Path::new("/s"), Path::new("/s/trace"));
            assert_eq!(cmd.get_program(), Path::new("/d").join(&s.app).as_os_str());
            cmd.get_args().map(|a| a.to_string_lossy().to_string()).collect::<Vec<_>>().join(" ")
        };
        let heat = StarpuSettings { workers: 3, iters: 7, nx: 5, ny: 4, side: Some(9), hot: 12.5, ..settings() };
        assert_eq!(
            args(&heat),
            "--sched lws --workers 3 --iters 7 --nx 5 --ny 4 --nz 1 --barrier 0 --empty 0 --trace /s/trace --side 9 --hot \
             12.5 --load corner"
        );
        // heat3d: its layers, its side's own default (16: 64 is heat's), no hot corner.
        let cube = StarpuSettings { app: "heat3d".into(), nz: 3, side: None, ..settings() };
        assert_eq!(
            args(&cube),
            "--sched lws --workers 2 --iters 2 --nx 2 --ny 2 --nz 3 --barrier 0 --empty 0 --trace /s/trace --side 16"
        );
        assert_eq!(StarpuSettings { side: None, ..settings() }.side(), 64);
        let ahead = submission_note(&settings()).unwrap();
        assert!(ahead.contains("--barrier") && ahead.contains("mean ms"), "{ahead}");
        assert_eq!(submission_note(&StarpuSettings { barrier: true, ..settings() }), None);
        let tile = |app: &str| StarpuSettings { app: app.into(), tile: None, ..settings() }.tile();
        assert_eq!((tile("md"), tile("md3d")), (8, 4));
        let md = StarpuSettings {
            app: "md".into(),
            tile: Some(3),
            scenario: "contraction".into(),
            seed: 9,
            barrier: true,
            empty: true,
            ..settings()
        };
        assert_eq!(
            args(&md),
            "--sched lws --workers 2 --iters 2 --nx 2 --ny 2 --nz 1 --barrier 1 --empty 1 --trace /s/trace --tile 3 \
             --scenario contraction --seed 9"
        );
        let md3d = StarpuSettings { app: "md3d".into(), nz: 2, ..md };
        assert_eq!(
            args(&md3d),
            "--sched lws --workers 2 --iters 2 --nx 2 --ny 2 --nz 2 --barrier 1 --empty 1 --trace /s/trace --tile 3 \
             --scenario contraction --seed 9"
        );
    }

    /// A run read from the app's line and its trace; a line missing, a key missing or a value
    /// that is not a number of its kind is named.
    #[test]
    fn a_run_is_read_from_the_apps_line_and_trace() {
        let s = settings();
        let line = "heat: sched=pbs workers=2 iterations=2 boxes=2x2 iter_ms_median=1.50000 iter_ms_mean=2.25000 \
                    efficiency=0.8125 rebalancings=3 migrations=7 stolen=1 checksum=00ab box_bytes=256 halo_bytes=32 \
                    written_bytes=128 wall_ms=9.000";
        let stdout = format!("starting\n{line}\nT=1.0\n");
        let trace = "0 0\n0 1\n1 2\n1 3\n0 0\n0 1\n1 2\n0 3\n";
        let run = read_app_run(&s, &stdout, trace, 42.0).unwrap();
        assert_eq!((run.iter_ms_median, run.iter_ms_mean, run.efficiency), (1.5, 2.25, 0.8125));
        assert_eq!((run.rebalancings, run.migrations, run.checksum.as_str(), run.wall_ms), (3, 7, "00ab", 42.0));
        let f = Footprint { box_bytes: 256, halo_bytes: 32, written_bytes: 128 };
        assert_eq!((run.affinity, run.misses), replay(trace, &s, f).unwrap());
        let e = read_app_run(&s, "md: checksum=1\n", trace, 1.0).err().unwrap();
        assert_eq!(e, "heat printed no result line");
        let e = read_app_run(&s, &line.replace(" checksum=00ab", ""), trace, 1.0).err().unwrap();
        assert!(e.starts_with("no checksum in heat's line"), "{e}");
        for bad in ["rebalancings=-3", "rebalancings=2.5", "halo_bytes=x"] {
            let key = bad.split('=').next().unwrap();
            let good = line.split_whitespace().find(|kv| kv.starts_with(&format!("{key}="))).unwrap();
            let e = read_app_run(&s, &line.replace(good, bad), trace, 1.0).err().unwrap();
            assert!(e.starts_with(&format!("bad {key} in")), "{bad}: {e}");
        }
        let e = read_app_run(&s, &line.replace("efficiency=0.8125", "efficiency=fast"), trace, 1.0).err().unwrap();
        assert!(e.starts_with("bad efficiency"), "{e}");
        // A key is matched whole: `box_bytes=` is not found in `xbox_bytes=`.
        assert_eq!(field("a: xbox_bytes=1 box_bytes=2", "box_bytes"), Some("2"));
        assert_eq!(field("a: box_bytes=", "box_bytes"), Some(""));
        assert_eq!(field("a: box_bytesx=3", "box_bytes"), None);
    }

    /// Every policy runs once a round, the order rotated round by round; the warm-up rounds'
    /// runs are dropped; the first error ends the rounds.
    #[test]
    fn policies_take_turns_and_the_warm_up_is_dropped() {
        let mut order = Vec::new();
        let mut call = 0;
        let runs = rounds(3, 1, 2, |p| {
            order.push(p);
            call += 1;
            Ok(call)
        })
        .unwrap();
        assert_eq!(order, [0, 1, 2, 1, 2, 0, 2, 0, 1]);
        assert_eq!(runs, [vec![6, 8], vec![4, 9], vec![5, 7]]);
        let runs = rounds(2, 0, 2, Ok).unwrap();
        assert_eq!(runs, [vec![0, 0], vec![1, 1]]);
        let mut calls = 0;
        let e = rounds(2, 1, 3, |p| {
            calls += 1;
            if p == 1 {
                Err("policy 1 failed".to_string())
            } else {
                Ok(())
            }
        });
        assert_eq!((e.unwrap_err().as_str(), calls), ("policy 1 failed", 2));
    }

    #[test]
    fn settings_without_eager_or_with_zero_sizes_are_refused() {
        let mut s = settings();
        s.policies = vec!["pbs".into()];
        assert!(measure(&s, || {}).unwrap_err().contains("eager"));
        // Sizes that would run nothing, before StarPU is built (`--iters 0` printed NaN
        // efficiencies).
        for bad in [
            StarpuSettings { workers: 0, ..settings() },
            StarpuSettings { iters: 0, ..settings() },
            StarpuSettings { side: Some(2), ..settings() },
        ] {
            let e = measure(&bad, || {}).unwrap_err();
            assert!(e.contains("threads, iters, repeats, nx, ny, nz and tile must be ≥ 1"), "{e}");
        }
        for bad in [
            StarpuSettings { repeats: 0, ..settings() },
            StarpuSettings { nx: 0, ..settings() },
            StarpuSettings { ny: 0, ..settings() },
            StarpuSettings { tile: Some(0), ..settings() },
            StarpuSettings { nz: 0, ..settings() },
        ] {
            assert!(check(&bad).unwrap_err().contains("must be ≥ 1"), "{bad:?}");
        }
        // Layers for a 2D code: refused by name (heat and md would stop on their own, later).
        for app in ["heat", "md"] {
            let e = check(&StarpuSettings { app: app.into(), nz: 2, ..settings() }).unwrap_err();
            assert_eq!(e, format!("--nz 2: {app} is a 2D code; heat3d and md3d take layers"));
        }
        for app in ["heat3d", "md3d"] {
            assert_eq!(check(&StarpuSettings { app: app.into(), nz: 2, ..settings() }), Ok(()), "{app}");
        }
        assert_eq!(check(&StarpuSettings { side: Some(3), hot: 0.0, ..settings() }), Ok(()));
        assert_eq!(check(&StarpuSettings { hot: 1e6, ..settings() }), Ok(()));
        for hot in [-5.0, f64::NAN, f64::INFINITY, 1e300] {
            let e = measure(&StarpuSettings { hot, ..settings() }, || {}).unwrap_err();
            assert!(e.contains("--hot must be from 0 to 1e6"), "{e}");
        }
    }
}
