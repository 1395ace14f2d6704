//! `pbs-mpi run`: md or the stencil across MPI ranks (see the crate documentation).

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use mpi::environment::Threading;
use mpi::traits::*;
use pbs_mpi::run::{run, Settings};
use pbs_mpi::summary::Summary;

#[derive(Parser)]
#[command(name = "pbs-mpi", about = "pbs across MPI ranks, threads inside each (start it with mpirun)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run an app across the ranks; rank 0 prints per-rank and global figures.
    Run {
        /// md or stencil
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
        /// Boxes across ranks: pbs (one vCore per rank), rcb (recomputed from scratch) or static
        /// (horizontal slabs)
        #[arg(long, default_value = "pbs")]
        balance: String,
        /// The executor inside each rank (pbs, ws, eager, static, ...)
        #[arg(long, default_value = "pbs")]
        executor: String,
        /// Boxes along x
        #[arg(long, default_value_t = 32)]
        nx: usize,
        /// Boxes along y
        #[arg(long, default_value_t = 32)]
        ny: usize,
        /// Seed of the app (as pbs-bench run's)
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Print one JSON object (rank 0) instead of a table
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

fn print_table(s: &Summary) {
    println!(
        "{} {} on {}×{} boxes, {} ranks × {} threads, balance {} across ranks, {} inside, {} iterations{}",
        s.app,
        s.scenario,
        s.nx,
        s.ny,
        s.ranks,
        s.threads,
        s.balance,
        s.executor,
        s.iters,
        if s.oversubscribed { " (OVERSUBSCRIBED: more threads than cores; times are the OS's sharing)" } else { "" }
    );
    println!(
        "{:>4}  {:<16} {:>6} {:>11} {:>11} {:>14} {:>14}",
        "rank", "host", "boxes", "compute ms", "thr max/avg", "migrated B", "halo B"
    );
    for r in &s.per_rank {
        println!(
            "{:>4}  {:<16} {:>6} {:>11.3} {:>11.3} {:>14} {:>14}",
            r.rank, r.host, r.boxes, r.compute_ms_median, r.imbalance_threads, r.migrated_bytes_sent, r.halo_bytes_sent
        );
    }
    let after_first = s.imbalance_ranks_after_first.map_or("-".to_string(), |v| format!("{v:.3}"));
    println!(
        "iteration {:.3} ms (exchange {:.3} ms) · ranks max/avg {:.3} after the last rebalancing, {after_first} after the first · {} rebalancings · {} boxes, {} bytes migrated ({:.0} per rebalancing) · halo {:.0} bytes per iteration",
        s.iter_ms_median,
        s.exchange_ms_median,
        s.imbalance_ranks,
        s.rebalancings,
        s.migrated_boxes,
        s.migrated_bytes,
        s.migrated_bytes_per_rebalancing,
        s.halo_bytes_per_iter
    );
    if let Some(ratio) = s.rcb_bytes_over_pbs {
        println!(
            "bytes per rebalancing: pbs {:?}; a from-scratch RCB at the same moments {:?} ({ratio:.2} × pbs's in all)",
            s.rebalancing_bytes, s.rcb_shadow_bytes
        );
    }
    println!("checksum {}", s.checksum);
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
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            if me == 0 {
                let _ = e.print();
            }
            return ExitCode::from(2);
        }
    };
    let Command::Run { app, scenario, threads, iters, balance, executor, nx, ny, seed, json } = cli.command;
    let fail = match injected_fault() {
        Ok(f) => f,
        Err(e) => {
            if me == 0 {
                eprintln!("error: {e}");
            }
            return ExitCode::from(2);
        }
    };
    let scenario = scenario.unwrap_or_else(|| pbs_apps::default_scenario(&app).to_string());
    let settings = Settings { app, scenario, threads, iters, nx, ny, seed, balance, executor, fail };
    let grid = match settings.check(world.size() as usize) {
        Ok(grid) => grid,
        Err(e) => {
            if me == 0 {
                eprintln!("error: {e}");
            }
            return ExitCode::from(2);
        }
    };
    // From here on, an error or a panic on one rank ends the job: the others may be waiting
    // for it in a collective.
    let outcome = std::panic::catch_unwind(|| run(&world, &settings, grid));
    let summary = match outcome {
        Ok(Ok(summary)) => summary,
        Ok(Err(e)) => {
            eprintln!("pbs-mpi rank {me}: error: {e}; aborting the job");
            world.abort(1);
        }
        Err(_) => {
            // The panic's message was printed by the panic hook, with its place.
            eprintln!("pbs-mpi rank {me}: panicked; aborting the job");
            world.abort(70);
        }
    };
    if let Some(s) = summary {
        if json {
            match serde_json::to_string(&s) {
                Ok(text) => println!("{text}"),
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::FAILURE;
                }
            }
        } else {
            print_table(&s);
        }
    }
    ExitCode::SUCCESS
}
