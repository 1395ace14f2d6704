//! Every executor on a machine it does not have to itself: more threads than cores, and a
//! competing busy process. Production nodes are shared (other jobs, OS noise, hyper-threads),
//! and a scheduler whose threads wait for each other by spinning can collapse there.
//!
//! `cargo run --release -p pbs-scheduler --example shared_cores -- [rounds] [iterations]`
//!
//! Scenarios (C = this machine's cores): C threads alone; C threads beside one busy process
//! per core; 4·C and 32·C threads. Each scenario builds every executor once (unpinned, default
//! settings: pbs steals with `Auto`), then runs `rounds` rounds in which the executors take
//! turns running `iterations` iterations of a 64×64-box phase (about 1.2 µs per box, 3.7 µs
//! in a band of rows, so that balancing and stealing have work to do). Printed: the median
//! milliseconds per iteration, and the median over rounds of each executor's ratio to
//! `static` in the same round. The run fails (exit 1) if pbs is over 1.2× static anywhere.
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use pbs::Grid;
use pbs_scheduler::executors::{EagerFifo, Pbs, PbsOptions, StaticBlocks, WorkStealing};
use pbs_scheduler::Executor;

mod common;

const LIMIT: f64 = 1.2;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// About `units` × 0.04 µs of arithmetic (on the 2-core VM) that the optimiser cannot remove.
fn work(units: u32) -> f64 {
    let mut x = 1.0f64;
    for i in 0..units * 10 {
        x = std::hint::black_box(x * 1.000_000_1 + f64::from(i & 7) * 1e-9);
    }
    x
}

/// A box's cost in `work` units: 30, and 90 in a band of rows (a third of the grid).
fn cost(grid: &Grid, k: usize) -> u32 {
    let [_, y, _] = grid.coords(k);
    if (16..37).contains(&y) {
        90
    } else {
        30
    }
}

/// Busy processes, one per core, killed when dropped.
struct Competitors(Vec<Child>);

impl Competitors {
    fn start(n: usize) -> Competitors {
        let me = std::env::current_exe().expect("the path of this example");
        Competitors((0..n).map(|_| Command::new(&me).arg("--burn").spawn().expect("start a busy process")).collect())
    }
}

impl Drop for Competitors {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn main() {
    const EXAMPLE: &str = "shared_cores";
    let args = common::arguments(EXAMPLE, 2);
    if args.first().map(String::as_str) == Some("--burn") {
        // A competing process: spin until killed (bounded, in case the parent died).
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(600) {
            std::hint::black_box(work(1000));
        }
        return;
    }
    let rounds = common::count(EXAMPLE, &args, 0, "rounds", 7, 1);
    let iterations = common::count(EXAMPLE, &args, 1, "iterations", 20, 1);
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let grid = Grid::new(64, 64).unwrap();
    let costs: Vec<u32> = (0..grid.len()).map(|k| cost(&grid, k)).collect();
    let scenarios = [
        (format!("{cores} threads, machine to itself"), cores, 0),
        (format!("{cores} threads, {cores} busy processes beside"), cores, cores),
        (format!("{} threads", 4 * cores), 4 * cores, 0),
        (format!("{} threads", 32 * cores), 32 * cores, 0),
    ];
    println!(
        "{} boxes, {rounds} rounds of {iterations} iterations per executor, taking turns; {cores} cores",
        grid.len()
    );
    println!();
    println!(
        "| scenario | pbs ms/it | static ms/it | ws ms/it | eager ms/it | pbs/static | ws/static | eager/static |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut worst = 0.0f64;
    for (label, threads, busy) in scenarios {
        let mut execs: Vec<Box<dyn Executor>> = vec![
            Box::new(Pbs::new(grid, threads, PbsOptions::default()).unwrap()),
            Box::new(StaticBlocks::new(grid.len(), threads).unwrap()),
            Box::new(WorkStealing::new(grid.len(), threads).unwrap()),
            Box::new(EagerFifo::new(grid.len(), threads).unwrap()),
        ];
        let _competitors = Competitors::start(busy);
        let mut times = vec![Vec::new(); execs.len()];
        let mut ratios = vec![Vec::new(); execs.len()];
        let mut checksums = vec![0.0f64; execs.len()];
        for round in 0..=rounds {
            let mut this_round = vec![0.0; execs.len()];
            for (e, exec) in execs.iter_mut().enumerate() {
                let out: Vec<std::sync::atomic::AtomicU64> =
                    (0..grid.len()).map(|_| std::sync::atomic::AtomicU64::new(0)).collect();
                let start = Instant::now();
                for _ in 0..iterations {
                    exec.run_phase(&|k| {
                        let v = work(costs[k]);
                        out[k].store(v.to_bits(), std::sync::atomic::Ordering::Relaxed);
                    });
                    exec.end_iteration();
                }
                this_round[e] = start.elapsed().as_secs_f64() * 1e3 / iterations as f64;
                checksums[e] = out.iter().map(|a| f64::from_bits(a.load(std::sync::atomic::Ordering::Relaxed))).sum();
            }
            if round == 0 {
                continue; // warm-up: first touch, pbs's first rebalancing
            }
            for e in 0..execs.len() {
                times[e].push(this_round[e]);
                ratios[e].push(this_round[e] / this_round[1]);
            }
        }
        assert!(checksums.iter().all(|&c| c == checksums[0]), "every executor computes the same: {checksums:?}");
        let t: Vec<f64> = times.iter_mut().map(|v| median(v)).collect();
        let r: Vec<f64> = ratios.iter_mut().map(|v| median(v)).collect();
        worst = worst.max(r[0]);
        println!(
            "| {label} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            t[0], t[1], t[2], t[3], r[0], r[2], r[3]
        );
    }
    println!();
    if worst > LIMIT {
        println!("FAIL: pbs took {worst:.2}× static's time in a scenario (limit {LIMIT}×)");
        std::process::exit(1);
    }
    println!("pbs within {LIMIT}× static in every scenario (worst {worst:.2}×)");
}
