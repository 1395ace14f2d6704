//! The `pbs-bench` command line. See `pbs-bench --help` and docs/design.md's command-line contract.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use pbs::StopRule;
use pbs_bench::{converge, lifetime, matrix, paper, peers, run, scaling, shapes, transitions};
use pbs_plot::progress;

#[derive(Parser)]
#[command(
    name = "pbs-bench",
    version,
    about = "Measure the pbs balancer: convergence, transitions, the paper's tables"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// How much `report` and `scaling` run.
#[derive(Args)]
struct MatrixRuns {
    /// Iterations per run
    #[arg(long, default_value_t = 200)]
    iters: usize,
    /// Runs per case (and thread count, for `scaling`); medians are over these
    #[arg(long, default_value_t = 5)]
    repeats: usize,
    /// Do not pin workers to cores
    #[arg(long)]
    no_pin: bool,
}

impl MatrixRuns {
    fn checked(&self) -> Result<&Self, String> {
        if self.iters == 0 || self.repeats == 0 {
            return Err("--iters and --repeats must be at least 1".into());
        }
        Ok(self)
    }
}

/// Options shared by `converge` and `transitions`.
#[derive(Args)]
struct Setting {
    /// Grid width (a CSV load map brings its own)
    #[arg(long, default_value_t = 50)]
    nx: usize,
    /// Grid height (a CSV load map brings its own)
    #[arg(long, default_value_t = 50)]
    ny: usize,
    /// Number of vCores
    #[arg(long, default_value_t = 10)]
    vcores: usize,
    /// Method: power-cells (the default), power-cells-pair, paper-eq7, paper-eq7-attract, paper-eq6, paper-eq4, paper-eq1 (converge also takes a comma-separated list or `all`)
    #[arg(long, default_value = pbs::methods::DEFAULT)]
    method: String,
    /// Give up after this many steps (per transition for `transitions`)
    #[arg(long, default_value_t = 5000)]
    max_steps: usize,
    /// Converged when max_avg ≤ (1 + tol) × lower bound
    #[arg(long, default_value_t = 0.05, allow_negative_numbers = true)]
    tol: f64,
    /// Seed of the vCore positions and of the random / Perlin maps
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print JSON instead of a table
    #[arg(long)]
    json: bool,
}

impl Setting {
    fn options(&self) -> Result<StopRule, String> {
        if !(self.tol.is_finite() && self.tol >= 0.0) {
            return Err(format!("--tol must be finite and ≥ 0, got {}", self.tol));
        }
        Ok(StopRule { max_steps: self.max_steps, tol: self.tol })
    }
}

#[derive(Subcommand)]
enum Command {
    /// Balance a load map from random vCores; one row per (map, method).
    Converge {
        /// uniform, line, disc, random, perlin or all
        #[arg(long, conflicts_with = "load_map")]
        case: Option<String>,
        /// A CSV load map: ny lines of nx comma-separated loads (a 3D map: nz such blocks, a blank
        /// line between them)
        #[arg(long)]
        load_map: Option<PathBuf>,
        #[command(flatten)]
        setting: Setting,
    },
    /// Rough or smooth Perlin transitions, warm-started; one summary object.
    Transitions {
        /// rough (new map) or smooth (translated map)
        #[arg(long)]
        kind: String,
        /// Number of transitions
        #[arg(long, default_value_t = 100)]
        trials: usize,
        /// Translation per smooth transition, in boxes
        #[arg(long, default_value_t = 0.5, allow_negative_numbers = true)]
        drift: f64,
        /// Also balance each map from scratch and report how many boxes that would move
        #[arg(long)]
        compare_scratch: bool,
        #[command(flatten)]
        setting: Setting,
    },
    /// Run a grid app under each scheduler; one row per scheduler (docs/design.md contract).
    Run {
        /// md, md-split (md as rebin and force phases) or stencil
        #[arg(long)]
        app: String,
        /// pbs, ws, eager, static, rcb, norcb, packsteal, vector-rcb, vector-greedy, norm-greedy,
        /// diffusion, a comma-separated list, or all
        #[arg(long, default_value = "all")]
        scheduler: String,
        /// Worker threads (default: PBS_NUM_THREADS, else one per core)
        #[arg(long)]
        threads: Option<usize>,
        /// Iterations
        #[arg(long, default_value_t = 100)]
        iters: usize,
        /// md: uniform, contraction, expansion, gravity (default); stencil: drift (default), rough
        #[arg(long)]
        scenario: Option<String>,
        /// Runs, with seeds --seed, --seed + 1, …: the table gives medians over runs and each
        /// scheduler's time over the first's (median of the ratios within each run); the JSON
        /// array holds every run's rows
        #[arg(long, default_value_t = 1)]
        repeats: usize,
        /// Boxes along x
        #[arg(long, default_value_t = 32)]
        nx: usize,
        /// Boxes along y
        #[arg(long, default_value_t = 32)]
        ny: usize,
        /// Layers of boxes along z: more than one runs md in 3D (27 boxes around each, gravity
        /// along −z) and the stencil in 3D (a 7-point stencil on 8×8×8-cell tiles, a 3D cost map)
        #[arg(long, default_value_t = 1)]
        nz: usize,
        /// Per-thread capacity of the modelled cache in KiB (default: this machine's per-core cache)
        #[arg(long)]
        cache_kib: Option<u64>,
        /// Do not pin workers to cores
        #[arg(long)]
        no_pin: bool,
        /// Seed of the app (the stencil's Perlin map, md's initial velocities)
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Iterations each scheduler runs before the next takes its turn (they alternate so
        /// that a drift in machine speed hits all alike); 0 = one scheduler after the other
        #[arg(long, default_value_t = run::TURN_ITERS)]
        turn_iters: usize,
        /// Print a JSON array instead of a table
        #[arg(long)]
        json: bool,
        /// Also record the app's per-box costs on one thread (same app, scenario, grid, seed
        /// and iterations) into this trace file, for `pbs-bench model --trace`
        #[arg(long)]
        trace: Option<PathBuf>,
        /// Also write every iteration's time and what happened at its end (rebalancing under
        /// way, taken on, given up; balancer time) as CSV into this file
        #[arg(long)]
        timeline: Option<PathBuf>,
        /// Also draw the first seed's timeline into this PNG: every scheduler's iteration
        /// times, where it rebalanced, and the balancer's time by where it ran
        #[arg(long)]
        png: Option<PathBuf>,
    },
    /// Replay recorded box costs on 16-256 modelled threads and 1-8 NUMA nodes: every scheduler
    /// side by side, with the real balancer making pbs's mappings.
    Model {
        /// md, md-split (md as rebin and force phases) or stencil
        #[arg(long, default_value = "md")]
        app: String,
        /// The app's scenario (default: gravity for md, drift for the stencil)
        #[arg(long)]
        scenario: Option<String>,
        /// Modelled thread counts, comma-separated
        #[arg(long, value_delimiter = ',', default_value = "16,64,256")]
        threads: Vec<usize>,
        /// NUMA node counts, comma-separated (threads spread evenly, consecutive ones on one node)
        #[arg(long, value_delimiter = ',', default_value = "1,4,8")]
        numa_nodes: Vec<usize>,
        /// A trace from `pbs-bench run --trace` to replay at every thread count; without it one
        /// is recorded per thread count with --boxes-per-thread boxes per thread (weak scaling)
        #[arg(long)]
        trace: Option<PathBuf>,
        /// Boxes per thread of the recorded traces
        #[arg(long, default_value_t = 256)]
        boxes_per_thread: usize,
        /// Dimensions of the recorded traces' grids: 2 (squares) or 3 (cubes: md and the
        /// stencil in 3D, at most 64×64×64)
        #[arg(long, default_value_t = 2)]
        dims: usize,
        /// Iterations replayed (the recorded ones played forwards, then backwards, and so on)
        #[arg(long, default_value_t = 200)]
        iters: usize,
        /// Iterations recorded, when no --trace is given
        #[arg(long, default_value_t = 20)]
        record_iters: usize,
        /// Where pbs's balancer runs: lend (in idle time while a step fits there, else on a
        /// balancer thread, the last worker lending the thread its core where that pays: the
        /// executor's default, PBS_LEND=auto), overlap (the same, no core lent: PBS_LEND=never),
        /// idle (in idle time, else stop), thread (always on the balancer thread) or stop
        #[arg(long, default_value = "lend")]
        rebalancing: String,
        /// Also replay the remappers (rcb, packsteal, vector-rcb, vector-greedy, norm-greedy,
        /// diffusion; not norcb, whose particle motion a trace does not hold)
        #[arg(long)]
        remappers: bool,
        /// A balancer unit's cost, nanoseconds per box and `1 + log2 vCores` (default: the
        /// fitted 7.19, from the 16-core rebalancings the model was fitted to; each row's
        /// `balancer_real_over_law` says how the code here compares): to see what a cheaper or
        /// dearer balancer would project
        #[arg(long, allow_negative_numbers = true)]
        balancer_ns_per_box: Option<f64>,
        /// pbs's own serial work in a phase, microseconds per thread (default: the fitted 0.9,
        /// measured on the fifth 16-core lease before the executor's pass after a phase
        /// shrank; docs/model.md): to see what a cheaper or dearer executor would project
        #[arg(long, allow_negative_numbers = true)]
        executor_us_per_thread: Option<f64>,
        /// pbs's work between iterations besides rebalancing, microseconds per thread (default:
        /// the fitted 0.13 on top of 2 µs, from 2-16 threads at 256 boxes a thread, which cannot
        /// tell threads from boxes; docs/model.md): to see what the projection beyond 16
        /// threads owes to that slope
        #[arg(long, allow_negative_numbers = true)]
        iteration_us_per_thread: Option<f64>,
        /// Print the calibration check (every measurement the model was fitted to or checked
        /// against, beside the model) instead of projecting
        #[arg(long)]
        calibration: bool,
        /// Fit the machine constants to the measurements again and print them
        #[arg(long)]
        fit: bool,
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
        /// Also draw the projection into this PNG: efficiency, iteration time, critical-path
        /// balancing and remote runs against threads, a column per NUMA node count; with
        /// --calibration, the model's figures against the measured ones
        #[arg(long)]
        png: Option<PathBuf>,
    },
    /// Run the standard matrix (apps × scenarios × schedulers): markdown report with PNG plots.
    Report {
        /// Output folder (created)
        #[arg(long, default_value = "out/report")]
        out: PathBuf,
        /// Worker threads (default: PBS_NUM_THREADS, else one per core)
        #[arg(long)]
        threads: Option<usize>,
        #[command(flatten)]
        runs: MatrixRuns,
        /// The grids' dimensions: 2 (squares) or 3 (cubes: md and the stencil in 3D, 32×32
        /// becoming 10×10×10 and the cache case a cube; the owner maps show a cube layer by layer)
        #[arg(long, default_value_t = 2)]
        dims: usize,
    },
    /// The side-by-side table of `report` at several thread counts: markdown, JSON, PNG.
    Scaling {
        /// Output folder (created)
        #[arg(long, default_value = "out/scaling")]
        out: PathBuf,
        /// Thread counts, comma-separated
        #[arg(long, value_delimiter = ',', default_value = "2,4,8,16")]
        threads: Vec<usize>,
        #[command(flatten)]
        runs: MatrixRuns,
        /// Run thread counts above this machine's cores anyway (their timings mean little)
        #[arg(long)]
        oversubscribe: bool,
        /// Weak scaling: this many boxes per thread (grids grow with the threads, up to 512×512,
        /// or 64×64×64 with --dims 3)
        #[arg(long, conflicts_with = "strong")]
        weak: Option<usize>,
        /// Strong scaling: this grid side at every thread count (up to 512; 64 with --dims 3)
        #[arg(long)]
        strong: Option<usize>,
        /// The grids' dimensions: 2 (squares) or 3 (cubes: md and the stencil in 3D; the report's
        /// 32×32 becomes 10×10×10)
        #[arg(long, default_value_t = 2)]
        dims: usize,
        /// Schedulers to run, comma-separated, pbs, static, ws and eager among them (fewer
        /// schedulers, a shorter run), or all
        #[arg(long, default_value = "all")]
        schedulers: String,
    },
    /// Reproduce the paper's Tables 1-3 and Fig. 5, ours beside theirs: markdown + PNG plots.
    Paper {
        /// Output folder (created)
        #[arg(long, default_value = "out/paper")]
        out: PathBuf,
        /// Transitions per Table 1 row (the paper ran 1000)
        #[arg(long, default_value_t = 1000)]
        trials: usize,
        /// Transitions per Table 2/3 row
        #[arg(long, default_value_t = 100)]
        large_trials: usize,
        /// Transitions per row for the paper's method, which is far slower
        #[arg(long, default_value_t = 30)]
        paper_trials: usize,
        /// Step limit for the paper's method
        #[arg(long, default_value_t = 3000)]
        paper_max_steps: usize,
        /// A few trials of everything, for CI and a first look (sets the counts above itself)
        #[arg(long, conflicts_with_all = ["trials", "large_trials", "paper_trials", "paper_max_steps"])]
        quick: bool,
    },
    /// pbs against the partitioners users would pick instead (RCB, Hilbert, coupe, METIS) on
    /// the same maps: balance, edge cut, connectivity, migrations on sequences, time.
    Peers {
        /// Only Perlin maps (default: the shapes of `maps` and Perlin maps)
        #[arg(long, conflicts_with_all = ["maps", "dense"])]
        perlin: bool,
        /// Only the dense 80×40 family (rings, disc, gradient, hot box, md-like density), --seeds of each
        #[arg(long, conflicts_with = "maps")]
        dense: bool,
        /// Every .csv load map of this folder instead (2D, or 3D with a blank line between layers)
        #[arg(long)]
        maps: Option<PathBuf>,
        /// Part counts, comma-separated (a map runs where it has ≥ 20 boxes per part)
        #[arg(long, value_delimiter = ',', default_value = "10,16,72,256")]
        parts: Vec<usize>,
        /// Boxes per part of the Perlin maps, comma-separated
        #[arg(long, value_delimiter = ',', default_value = "500,100,20")]
        boxes_per_part: Vec<usize>,
        /// Perlin seeds per size
        #[arg(long, default_value_t = 2)]
        seeds: usize,
        /// Steps of the drifting and re-drawn Perlin sequences, or with --maps of each map rolled
        /// by one column a step (0: none)
        #[arg(long, default_value_t = 20)]
        sequence: usize,
        /// Methods, comma-separated, or all
        #[arg(long, default_value = "all")]
        methods: String,
        /// Timed runs per map and method, round-robin; times are medians
        #[arg(long, default_value_t = 3)]
        repeats: usize,
        /// pbs's tolerance for its power cells: converged when max_avg ≤ (1 + tol) × lower bound
        /// (default on a cold start: 0.01 from 250 boxes per part, else 0.1 where the owners are
        /// then refined, counting only boxes that carry load, and 0.05 where not (pbs-cells);
        /// warm starts 0.05)
        #[arg(long, allow_negative_numbers = true)]
        pbs_tol: Option<f64>,
        /// Print one JSON object {"partitions": [...], "sequences": [...]} instead of tables
        #[arg(long)]
        json: bool,
        /// Also draw every method's partition of the first map into this PNG, a panel per method
        /// (a cube as the block of its layers)
        #[arg(long)]
        png: Option<PathBuf>,
        /// The generated maps' dimensions: 2 (squares) or 3 (cubes of 3D Perlin noise; the
        /// shapes and the dense maps are 2D and do not run then; CSV maps bring their own)
        #[arg(long, default_value_t = 2)]
        dims: usize,
        /// How far the drifting sequence's map moves a step, in boxes along x (half as far along
        /// y); a part's side is fewer boxes in 3D, where a sixth of a box moves it about as much
        /// as half a box on squares
        #[arg(long, default_value_t = peers::DRIFT, allow_negative_numbers = true)]
        drift: f64,
        /// The sequences' square or cube side, in boxes (default: 256 boxes a part, 150² at 72
        /// parts on squares)
        #[arg(long)]
        sequence_side: Option<usize>,
    },
    /// How long each balancer's partition of md lasts at many parts (NoRCB's claim), from md's
    /// pair counts per box: remaps, lifetime, migrations, efficiency.
    Lifetime {
        /// md scenario: uniform, contraction, expansion, gravity
        #[arg(long, default_value = "contraction")]
        scenario: String,
        /// Boxes along x
        #[arg(long, default_value_t = 96)]
        nx: usize,
        /// Boxes along y
        #[arg(long, default_value_t = 96)]
        ny: usize,
        /// Layers of boxes (more than 1: md in 3D)
        #[arg(long, default_value_t = 1)]
        nz: usize,
        /// Part counts, comma-separated
        #[arg(long, value_delimiter = ',', default_value = "2,16,64")]
        parts: Vec<usize>,
        /// md iterations
        #[arg(long, default_value_t = 1000)]
        iters: usize,
        /// Remap a partition once its max_avg exceeds 1 + this
        #[arg(long, default_value_t = 0.1, allow_negative_numbers = true)]
        threshold: f64,
        /// Balancers, comma-separated (pbs, rcb, norcb, packsteal), or all; peers:NAME adds a
        /// partitioner of `peers` (peers:pbs, the balancer with its refinement; peers:metis-kway…)
        #[arg(long, default_value = "all")]
        balancers: String,
        /// Seed of md
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Print a JSON array instead of a table
        #[arg(long)]
        json: bool,
    },
    /// pbs as a StarPU scheduling policy against StarPU's own, on the heat code or md as StarPU
    /// tasks and on StarPU's example programs; one row per program and policy (needs libstarpu-dev,
    /// starpu-examples; builds starpu/).
    Starpu {
        #[command(flatten)]
        settings: pbs_bench::starpu::StarpuSettings,
        /// Print a JSON array instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Write the load maps of shapes the paper never named as CSV files.
    Maps {
        /// Output folder (created)
        #[arg(long, default_value = "out/maps")]
        out: PathBuf,
        /// Also the larger maps of sparse load, 500² and 1000² boxes (2.7 MB of CSV)
        #[arg(long)]
        large: bool,
    },
}

/// Fails before a run, not after it, when `path` cannot be written (its folder missing, a
/// folder in its place, no permission): a long run's results are not computed to be lost.
fn writable(path: &std::path::Path) -> Result<(), String> {
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    if !existed {
        std::fs::remove_file(path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

fn methods_list(spec: &str) -> Result<Vec<String>, String> {
    let names: Vec<String> = if spec == "all" {
        pbs::methods::NAMES.iter().map(|s| s.to_string()).collect()
    } else {
        spec.split(',').map(|s| s.trim().to_string()).collect()
    };
    for n in &names {
        pbs::methods::by_name(n).map_err(|e| e.to_string())?;
    }
    Ok(names)
}

/// The most steps `peers --sequence` takes.
const MAX_SEQUENCE: usize = 1_000_000;

fn main() -> ExitCode {
    pbs_bench::end_quietly_on_closed_pipe();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pbs-bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Converge { case, load_map, setting } => {
            let options = setting.options()?;
            let sources = match (case, load_map) {
                (_, Some(path)) => vec![converge::Source::Csv(path)],
                (Some(c), None) => converge::Source::from_case_name(&c)?,
                (None, None) => return Err("give --case NAME or --load-map FILE.csv".into()),
            };
            let methods = methods_list(&setting.method)?;
            let bar = progress::bar((sources.len() * methods.len()) as u64, "converge");
            let (nx, ny, vcores, seed) = (setting.nx, setting.ny, setting.vcores, setting.seed);
            let rows = converge::converge(&sources, &methods, nx, ny, vcores, options, seed, || bar.inc(1))
                .map_err(|e| e.to_string())?;
            bar.finish_and_clear();
            if setting.json {
                println!("{}", serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?);
            } else {
                print!("{}", converge::table(&rows).text());
            }
        }
        Command::Transitions { kind, trials, drift, compare_scratch, setting } => {
            let options = setting.options()?;
            if !drift.is_finite() {
                return Err(format!("--drift must be finite, got {drift}"));
            }
            if trials == 0 {
                return Err("--trials must be at least 1: zero transitions measure nothing".into());
            }
            if drift.abs() * trials as f64 > pbs::loadmap::PerlinMap::MAX_OFFSET {
                return Err(format!(
                    "--drift {drift} × --trials {trials} translates the map beyond {:e} boxes, where the noise has no precision left",
                    pbs::loadmap::PerlinMap::MAX_OFFSET
                ));
            }
            let setup = transitions::Setup {
                kind: transitions::Kind::from_name(&kind)?,
                method: methods_list(&setting.method)?.remove(0),
                nx: setting.nx,
                ny: setting.ny,
                vcores: setting.vcores,
                trials,
                seed: setting.seed,
                drift,
                compare_scratch,
                options,
            };
            let bar = progress::bar(trials as u64, &format!("{kind} transitions"));
            let report = transitions::run(&setup, || bar.inc(1)).map_err(|e| e.to_string())?;
            bar.finish_and_clear();
            if setting.json {
                println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
            } else {
                print!("{}", transitions::table(std::slice::from_ref(&report)).text());
            }
        }
        Command::Run {
            app,
            scheduler,
            threads,
            iters,
            scenario,
            repeats,
            nx,
            ny,
            nz,
            cache_kib,
            no_pin,
            seed,
            turn_iters,
            json,
            trace,
            timeline,
            png,
        } => {
            if repeats == 0 {
                return Err("--repeats must be at least 1".into());
            }
            trace.iter().chain(&timeline).chain(&png).try_for_each(|p| writable(p))?;
            if trace.is_some() {
                // Before the run, whose iterations the trace records again afterwards.
                pbs_bench::model::trace::Trace::check_recordable([nx, ny, nz], iters)?;
            }
            let threads = match threads {
                Some(t) => t,
                None => pbs_scheduler::topology::Topology::detect().default_threads()?,
            };
            let setup = run::RunSetup {
                scenario: scenario.unwrap_or_else(|| pbs_apps::default_scenario(&app).to_string()),
                app,
                schedulers: run::schedulers(&scheduler)?,
                threads,
                iters,
                nx,
                ny,
                nz,
                cache_bytes: match cache_kib {
                    None => run::RunSetup::machine_cache_bytes(),
                    Some(0) => {
                        return Err("--cache-kib must be at least 1: a cache of 0 KiB misses on every access, \
                                    and the schedulers' modelled misses would all be equal"
                            .into())
                    }
                    Some(k) => {
                        k.checked_mul(1024).ok_or_else(|| format!("--cache-kib {k} is more bytes than 64 bits hold"))?
                    }
                },
                pin: !no_pin,
                seed,
                turn_iters,
            };
            setup.make_app()?; // refuse a bad app or scenario before anything runs

            // The runs before the last beside it, and at the end every run's rows and their
            // copy for the JSON or the table.
            run::check_records(iters, setup.schedulers.len(), repeats.saturating_sub(1).saturating_mul(2))?;
            let units = progress::units(&[2, setup.schedulers.len(), iters, repeats]);
            let bar = progress::bar(units, &format!("{} {}", setup.app, setup.scenario));
            let runs: Vec<Vec<run::RunRow>> = (0..repeats as u64)
                .map(|r| run::run(&run::RunSetup { seed: seed + r, ..setup.clone() }, || bar.inc(1)))
                .collect::<Result<_, _>>()?;
            bar.finish_and_clear();
            let rows: Vec<run::RunRow> = runs.iter().flatten().cloned().collect();
            // The results first: the trace and the timeline are written after them.
            if json {
                println!("{}", serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?);
            } else {
                let table = if repeats == 1 { run::table(&rows) } else { run::median_table(&runs) };
                print!("{}", table.text());
                if let Some(why) = rows.iter().find_map(|r| r.hw_unavailable_reason.as_deref()) {
                    println!(
                        "hardware counters: {why}; modelled misses are from a per-thread LRU of {} KiB",
                        setup.cache_bytes / 1024
                    );
                }
                if let Some(r) = rows.first().filter(|r| r.threads > r.cpus) {
                    println!(
                        "note: OVERSUBSCRIBED: {} threads on the {} CPUs this process may run on: times include the \
                         OS's sharing of them",
                        r.threads, r.cpus
                    );
                }
            }
            if let Some(path) = trace {
                let t =
                    pbs_bench::model::trace::Trace::record_3d(&setup.app, &setup.scenario, [nx, ny, nz], iters, seed)?;
                t.write(&path)?;
                eprintln!("trace of {iters} iterations of {nx}×{ny}×{nz} boxes written to {}", path.display());
            }
            if let Some(path) = timeline {
                std::fs::write(&path, run::timeline_csv(&rows))
                    .map_err(|e| format!("cannot write the timeline to {}: {e}", path.display()))?;
                for r in &rows {
                    if let Some((share, iterations)) = run::tail_while_under_way(&r.iteration_ms, &r.iteration_ends) {
                        eprintln!(
                            "{} (seed {}): {:.0} % of the time above the median iteration was in the {:.0} % of \
                             iterations run with a rebalancing under way",
                            r.scheduler,
                            r.seed,
                            100.0 * share,
                            100.0 * iterations
                        );
                    }
                }
            }
            if let Some(path) = png {
                pbs_plot::panels::line_panels(&path, 1200, 900, 1, &run::timeline_panels(&rows))?;
                eprintln!("timeline of seed {seed} drawn into {}", path.display());
            }
            // Last, so that the figures of a failing run are there to read.
            run::check_checksums(&format!("{} {}", setup.app, setup.scenario), &runs)?;
        }
        Command::Model {
            app,
            scenario,
            threads,
            numa_nodes,
            trace,
            boxes_per_thread,
            dims,
            iters,
            record_iters,
            rebalancing,
            remappers,
            balancer_ns_per_box,
            executor_us_per_thread,
            iteration_us_per_thread,
            calibration,
            fit,
            json,
            png,
        } => {
            use pbs_bench::model::{self, calibration as cal};
            if fit && png.is_some() {
                return Err("--png draws a projection or the calibration; --fit prints the constants".into());
            }
            png.iter().try_for_each(|p| writable(p))?;
            if calibration || fit {
                let traces = cal::Traces::kept()?;
                if fit {
                    let bar = progress::bar(0, "fitting the model");
                    let fitted = cal::fit(&traces, |done, of| {
                        bar.set_length(of as u64);
                        bar.set_position(done as u64);
                    })?;
                    bar.finish_and_clear();
                    let (md, stencil) = model::FITTED_SPEEDS;
                    let in_code = cal::fit_error(&traces, &model::fitted_machine("md"), (md, stencil))?;
                    println!(
                        "{:#?}\nspeeds: md {:.4}, stencil {:.4}\nsum of squared relative errors on the fitted rows: \
                         {:.4} (the constants in the code: {in_code:.4})",
                        fitted.machine, fitted.md_speed, fitted.stencil_speed, fitted.error
                    );
                    return Ok(());
                }
                let rows = cal::check(&traces, &model::fitted_machine("md"), &|app| model::fitted_machine(app).speed)?;
                if let Some(png) = &png {
                    model::calibration_plot(png, &rows)?;
                    eprintln!("calibration drawn into {}", png.display());
                }
                if json {
                    println!("{}", serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?);
                } else {
                    print!("{}", model::calibration_table(&rows).text());
                }
                return Ok(());
            }
            let rebalancing = model::replay::Rebalancing::by_name(&rebalancing).ok_or_else(|| {
                format!("--rebalancing {rebalancing:?}: expected overlap, idle, thread, lend or stop")
            })?;
            pbs_apps::build(&app, scenario.as_deref().unwrap_or(pbs_apps::default_scenario(&app)), 4, 4, 1)?;
            let settings = model::ModelSettings {
                scenario: scenario.unwrap_or_else(|| pbs_apps::default_scenario(&app).to_string()),
                app,
                threads,
                numa_nodes,
                trace,
                boxes_per_thread,
                dims,
                iters,
                record_iters,
                rebalancing,
                remappers,
                balancer_box: balancer_ns_per_box.map(|ns| ns * 1e-9),
                executor_thread: executor_us_per_thread.map(|us| us * 1e-6),
                iteration_thread: iteration_us_per_thread.map(|us| us * 1e-6),
            };
            // The notes first: they say what the run about to start leaves out.
            for note in model::check(&settings)? {
                eprintln!("note: {note}");
            }
            let bar = progress::bar(0, "model");
            let rows = model::project(&settings, |m| bar.set_message(m))?;
            bar.finish_and_clear();
            if let Some(path) = &png {
                model::plot(path, &rows)?;
                eprintln!("projection drawn into {}", path.display());
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?);
            } else {
                print!("{}", model::table(&rows).text());
                let ratios: Vec<String> = rows
                    .iter()
                    .filter_map(|r| {
                        let m = &r.modelled;
                        let nodes = if m.numa_nodes == 1 { "node" } else { "nodes" };
                        r.balancer_real_over_law
                            .map(|x| format!("{} threads on {} {nodes} {x:.2}", m.threads, m.numa_nodes))
                    })
                    .collect();
                if !ratios.is_empty() {
                    println!(
                        "pbs's balancer while planning, its real time a unit here over the model's price: {}",
                        ratios.join(", ")
                    );
                }
            }
        }
        Command::Report { out, threads, runs, dims } => {
            scaling::check_dims(dims)?;
            let threads = match threads {
                Some(t) => t,
                None => pbs_scheduler::topology::Topology::detect().default_threads()?,
            };
            if threads == 0 {
                return Err("--threads must be at least 1".into());
            }
            let runs = runs.checked()?;
            let settings =
                matrix::MatrixSettings { threads, iters: runs.iters, repeats: runs.repeats, pin: !runs.no_pin, dims };
            let path = matrix::write(&out, &settings)?;
            println!("report written to {}", path.display());
        }
        Command::Scaling { out, threads, runs, oversubscribe, weak, strong, dims, schedulers } => {
            let cores = pbs_scheduler::topology::Topology::detect().cores.len().max(1);
            scaling::check_threads(&threads, cores, oversubscribe)?;
            let schedulers = scaling::schedulers(&schedulers)?;
            let runs = runs.checked()?;
            let sizes = match (weak, strong) {
                (Some(boxes_per_thread), _) => scaling::Sizes::Weak { boxes_per_thread },
                (None, Some(side)) => scaling::Sizes::Strong { side },
                (None, None) => scaling::Sizes::Report,
            }
            .checked(dims)?;
            if let Some(note) = sizes.capped(&threads, dims) {
                eprintln!("{note}");
            }
            let settings = scaling::ScalingSettings {
                threads,
                iters: runs.iters,
                repeats: runs.repeats,
                pin: !runs.no_pin,
                sizes,
                dims,
                schedulers,
            };
            scaling::check_records(&settings)?;
            // The folder before the runs, which take minutes.
            std::fs::create_dir_all(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
            writable(&out.join("scaling.md"))?;
            let rows = scaling::measure(&settings)?;
            print!("{}", scaling::table(&rows).text());
            let path = scaling::write(&out, &settings, &rows, cores)?;
            println!("report written to {}", path.display());
        }
        Command::Paper { out, trials, large_trials, paper_trials, paper_max_steps, quick } => {
            let settings = if quick {
                paper::Settings::quick()
            } else {
                paper::Settings { trials, large_trials, paper_trials, paper_max_steps }
            };
            let path = paper::write_report(&out, &settings).map_err(|e| e.to_string())?;
            println!("report written to {}", path.display());
        }
        Command::Lifetime { scenario, nx, ny, nz, parts, iters, threshold, balancers, seed, json } => {
            let balancers = if balancers == "all" {
                lifetime::BALANCERS.iter().map(|b| b.to_string()).collect()
            } else {
                balancers.split(',').map(|b| b.trim().to_string()).collect()
            };
            let settings =
                lifetime::LifetimeSettings { scenario, nx, ny, nz, parts, iters, threshold, balancers, seed };
            let bar = progress::bar(iters as u64, "lifetime");
            let rows = lifetime::measure(&settings, || bar.inc(1))?;
            bar.finish_and_clear();
            if json {
                println!("{}", serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?);
            } else {
                print!("{}", lifetime::table(&rows).text());
            }
        }
        Command::Starpu { mut settings, json } => {
            settings.policies.iter_mut().for_each(|p| *p = p.trim().to_string());
            let bar = progress::bar(pbs_bench::starpu::runs(&settings), "starpu");
            let rows = pbs_bench::starpu::measure(&settings, || bar.inc(1))?;
            bar.finish_and_clear();
            if json {
                println!("{}", serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?);
            } else {
                print!("{}", pbs_bench::starpu::table(&rows).text());
                if let Some(note) = pbs_bench::starpu::submission_note(&settings) {
                    println!("\n{note}");
                }
            }
            pbs_bench::starpu::check_outputs(&rows)?;
        }
        Command::Peers {
            perlin,
            dense,
            maps,
            parts,
            boxes_per_part,
            seeds,
            sequence,
            methods,
            repeats,
            pbs_tol,
            json,
            png,
            dims,
            drift,
            sequence_side,
        } => {
            if let Some(t) = pbs_tol.filter(|t| !(t.is_finite() && *t >= 0.0)) {
                return Err(format!("--pbs-tol must be finite and ≥ 0, got {t}"));
            }
            if !(drift.is_finite() && drift > 0.0 && drift <= peers::MAX_DRIFT) {
                return Err(format!(
                    "--drift must be a number of boxes above 0 and at most {}, got {drift}",
                    peers::MAX_DRIFT
                ));
            }
            png.iter().try_for_each(|p| writable(p))?;
            if parts.contains(&0) || boxes_per_part.contains(&0) {
                return Err("--parts and --boxes-per-part must be at least 1".into());
            }
            if repeats == 0 || seeds == 0 {
                return Err("--repeats and --seeds must be at least 1".into());
            }
            // Every step's figures are kept for the medians (32 bytes a method and step): 10⁹
            // steps would fill the memory after hours instead of being refused now.
            if sequence > MAX_SEQUENCE {
                return Err(format!("--sequence {sequence}: at most {MAX_SEQUENCE} steps"));
            }
            let methods: Vec<String> = if methods == "all" {
                pbs_peers::NAMES.iter().map(|s| s.to_string()).collect()
            } else {
                methods.split(',').map(|s| s.trim().to_string()).collect()
            };
            for m in &methods {
                pbs_peers::by_name(m).map_err(|e| e.to_string())?;
            }
            let settings = peers::PeersSettings {
                maps: match (perlin, dense, maps) {
                    (_, _, Some(dir)) => peers::Maps::Dir(dir),
                    (true, _, None) => peers::Maps::Perlin,
                    (_, true, None) => peers::Maps::Dense,
                    (false, false, None) => peers::Maps::Standard,
                },
                parts,
                boxes_per_part,
                seeds,
                sequence,
                methods,
                repeats,
                pbs_tol,
                dims,
                drift,
                sequence_side,
            };
            peers::check_sizes(&settings)?;
            // coupe 0.1's multi-jagged panics on some maps: the coupe partitioners catch it and
            // its row says it was skipped and why, so the hook prints nothing for it. Any other
            // panic is a bug of ours and keeps the standard report.
            let standard = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                if !info.location().is_some_and(|l| pbs_peers::raised_in_coupe(l.file())) {
                    standard(info)
                }
            }));
            let bar = progress::bar(0, "peers");
            let rows = peers::partitions(&settings, |m| bar.set_message(m.to_string()))?;
            let seq = peers::sequences(&settings, |m| bar.set_message(m.to_string()))?;
            bar.finish_and_clear();
            if let Some(path) = &png {
                let (map, parts) = peers::draw_first_case(&settings, path)?;
                eprintln!("the partitions of {map} into {parts} parts drawn in {}", path.display());
            }
            if json {
                let v = serde_json::json!({ "partitions": rows, "sequences": seq });
                println!("{}", serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?);
            } else {
                print!("{}", peers::partition_table(&rows).text());
                println!();
                print!("{}", peers::summary_table(&rows).text());
                if !seq.is_empty() {
                    println!();
                    print!("{}", peers::sequence_table(&seq).text());
                }
            }
        }
        Command::Maps { out, large } => {
            std::fs::create_dir_all(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
            let extra = if large { shapes::large() } else { Vec::new() };
            for s in shapes::all().into_iter().chain(extra) {
                let path = out.join(format!("{}.csv", s.name));
                std::fs::write(&path, pbs::loadmap::to_csv(&s.grid, &s.loads))
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                println!("{}  ({}x{}: {})", path.display(), s.grid.nx(), s.grid.ny(), s.description);
            }
        }
    }
    Ok(())
}
