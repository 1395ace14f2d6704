//! `pbs-mpi run`: md or the stencil across MPI ranks (see the crate documentation).

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use mpi::environment::Threading;
use mpi::traits::*;
use pbs_mpi::run::{run, RankPinning, Settings};
use pbs_mpi::summary::Summary;
use pbs_mpi::text;

#[derive(Parser)]
#[command(name = "pbs-mpi", version, about = "pbs across MPI ranks, threads inside each (start it with mpirun)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// What every run takes.
#[derive(Args)]
struct RunArgs {
    /// md, md-split (md as rebin and force phases) or stencil
    #[arg(long)]
    app: String,
    /// md: uniform, contraction, expansion, gravity (default); stencil: drift (default), rough
    #[arg(long)]
    scenario: Option<String>,
    /// Threads per rank
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Iterations
    #[arg(long, default_value_t = 100)]
    iters: usize,
    /// When to rebalance across ranks: boulmier (eq. 24, and the imbalance added since the last
    /// rebalancing reaching its cost), boulmier-eq24 (eq. 24 alone), menon, procassini:RHO,
    /// marquez:XI, periodic:T, always, never
    #[arg(long, default_value = "boulmier")]
    criterion: String,
    /// The executor inside each rank (pbs, ws, eager, static, ...)
    #[arg(long, default_value = "pbs")]
    executor: String,
    /// Boxes along x
    #[arg(long, default_value_t = 32)]
    nx: usize,
    /// Boxes along y
    #[arg(long, default_value_t = 32)]
    ny: usize,
    /// Boxes along z: more than one runs md and the stencil in 3D
    #[arg(long, default_value_t = 1)]
    nz: usize,
    /// Seed of the app (as pbs-bench run's)
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Pin each rank's threads to cores of its CPUs: auto (where the launcher bound the rank to
    /// part of the node), on, off
    #[arg(long, value_enum, default_value_t = RankPinning::Auto)]
    pin: RankPinning,
}

#[derive(Subcommand)]
enum Command {
    /// Run an app across the ranks; rank 0 prints per-rank and global figures.
    Run {
        #[command(flatten)]
        args: RunArgs,
        /// Boxes across ranks: pbs (one vCore per rank, its cells' owners refined box by box to
        /// the tolerance), pbs-cells (the cells' owners alone), rcb (recomputed from scratch),
        /// diffusion (boxes cross the existing borders) or static (horizontal slabs)
        #[arg(long, default_value = "pbs")]
        balance: String,
        /// Print one JSON object (rank 0) instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Several balances side by side in one job, taking turns, repeated; one row each (medians
    /// over the repeats, ranges in brackets).
    Compare {
        #[command(flatten)]
        args: RunArgs,
        /// Balances, comma-separated
        #[arg(long, value_delimiter = ',', default_value = "pbs,rcb,diffusion,static")]
        balance: Vec<String>,
        /// Rounds: each runs every balance once
        #[arg(long, default_value_t = 3)]
        repeats: usize,
        /// Print a JSON array of every run's summary instead of the table
        #[arg(long)]
        json: bool,
    },
}

/// `PBS_MPI_FAIL=rank:iteration[:exit]`.
fn injected_fault() -> Result<Option<(usize, usize, String)>, String> {
    let Ok(spec) = std::env::var("PBS_MPI_FAIL") else { return Ok(None) };
    let parts: Vec<&str> = spec.split(':').collect();
    let bad = || format!("PBS_MPI_FAIL={spec:?}: expected rank:iteration or rank:iteration:exit");
    match parts[..] {
        [r, i] | [r, i, "exit"] => {
            let how = if parts.len() == 3 { "exit" } else { "panic" };
            Ok(Some((r.parse().map_err(|_| bad())?, i.parse().map_err(|_| bad())?, how.into())))
        }
        _ => Err(bad()),
    }
}

/// Parses the environment and checks the settings alike on every rank; rank 0 prints the error.
fn prepare(world: &impl Communicator, args: RunArgs, balance: &str) -> Result<(Settings, pbs::Grid), String> {
    let fail = injected_fault()?;
    let RunArgs { app, scenario, threads, iters, criterion, executor, nx, ny, nz, seed, pin } = args;
    let scenario = scenario.unwrap_or_else(|| pbs_apps::default_scenario(&app).to_string());
    let balance = balance.to_string();
    let settings =
        Settings { app, scenario, threads, iters, nx, ny, nz, seed, balance, criterion, executor, fail, pin };
    let grid = settings.check(world.size() as usize)?;
    Ok((settings, grid))
}

/// Runs `settings`, ending the whole job when this rank fails.
fn run_or_abort(world: &impl Communicator, settings: &Settings, grid: pbs::Grid) -> Option<Summary> {
    // An error or a panic on one rank ends the job: the others may be waiting for it in a
    // collective.
    // AssertUnwindSafe: after a panic nothing is used again, the job is aborted.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(world, settings, grid))) {
        Ok(Ok(summary)) => summary,
        Ok(Err(e)) => {
            eprintln!("pbs-mpi rank {}: error: {e}; aborting the job", world.rank());
            world.abort(1);
        }
        Err(_) => {
            // The panic's message was printed by the panic hook, with its place.
            eprintln!("pbs-mpi rank {}: panicked; aborting the job", world.rank());
            world.abort(70);
        }
    }
}

fn print_json(value: &impl serde::Serialize) -> ExitCode {
    match serde_json::to_string(value) {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let Some((universe, _)) = mpi::initialize_with_threading(Threading::Funneled) else {
        eprintln!("error: MPI was already initialised");
        return ExitCode::FAILURE;
    };
    let world = universe.world();
    let me = world.rank();
    // Every rank parses the same arguments and finds the same errors: rank 0 alone says so,
    // and all leave together (no rank waits in a collective for one that left).
    // Exit status as docs/design.md says: 2 for what the parser refuses, 1 for a value it
    // accepted and pbs-mpi did not.
    let refuse = |e: String| {
        if me == 0 {
            eprintln!("error: {e}");
        }
        ExitCode::from(1)
    };
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            if me == 0 {
                let _ = e.print();
            }
            // 0 for --help and --version (clap's), 2 for a refused command line.
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    match cli.command {
        Command::Run { args, balance, json } => {
            let (settings, grid) = match prepare(&world, args, &balance) {
                Ok(x) => x,
                Err(e) => return refuse(e),
            };
            match run_or_abort(&world, &settings, grid) {
                Some(s) if json => print_json(&s),
                Some(s) => {
                    print!("{}", text::run_table(&s));
                    ExitCode::SUCCESS
                }
                None => ExitCode::SUCCESS,
            }
        }
        Command::Compare { args, balance, repeats, json } => {
            if repeats == 0 || balance.is_empty() {
                return refuse("--repeats 0 or no --balance: nothing to compare".into());
            }
            let (settings, grid) = match prepare(&world, args, &balance[0]) {
                Ok(x) => x,
                Err(e) => return refuse(e),
            };
            let mut all = Vec::new();
            for b in &balance {
                let one = Settings { balance: b.clone(), ..settings.clone() };
                if let Err(e) = one.check(world.size() as usize) {
                    return refuse(e);
                }
            }
            // Rounds of every balance in turn: a drift in the machine's speed hits all alike.
            for _ in 0..repeats {
                for b in &balance {
                    let one = Settings { balance: b.clone(), ..settings.clone() };
                    all.extend(run_or_abort(&world, &one, grid));
                }
            }
            match (me, json) {
                (0, true) => print_json(&all),
                (0, false) => {
                    print!("{}", text::comparison_table(&all, &balance));
                    ExitCode::SUCCESS
                }
                _ => ExitCode::SUCCESS,
            }
        }
    }
}
