//! Soak: many md iterations under every executor, one after the other. Each must end with the
//! same checksum (owner computes: the result does not depend on who ran a box), and the
//! process's resident memory must stay flat once the run has warmed up (no leak per phase,
//! per rebalancing or per steal).
//!
//! `cargo run --release -p pbs-apps --example soak -- [iterations] [threads] [dims]`
//! (default 100000 iterations, at least 10000; 2 threads; the gravity scenario on 32×32 boxes,
//! or with `dims` 3 on 10×10×10: md in 3D, the balancer's and executors' 3D paths).
//! Exits 1 if a checksum differs or memory grows by more than 4 MiB after the first tenth of a
//! run (so the longer the run, the smaller a leak per iteration it finds; it prints the size).
use std::time::Instant;

use pbs_apps::md::{Md, Scenario};
use pbs_apps::GridApp;
use pbs_scheduler::pinning::Pinning;
use pbs_scheduler::report::Recorder;
use pbs_scheduler::runtime::{Runtime, EXECUTORS};
use pbs_scheduler::topology::Topology;
use pbs_scheduler::BoxTimer;

const GROWTH_LIMIT: u64 = 4 << 20;

/// Resident memory of this process, bytes (`VmRSS` of /proc/self/status).
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status (Linux)");
    let kib = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next());
    kib.and_then(|k| k.parse::<u64>().ok()).expect("a VmRSS line") << 10
}

/// Fewest iterations: memory is sampled every 1000 after the first tenth.
const MIN_ITERATIONS: usize = 10_000;

/// The argument at `index`, or `default` where absent; a message naming it where it is not a
/// whole number of at least `min`.
fn arg(args: &[String], index: usize, name: &str, default: usize, min: usize) -> Result<usize, String> {
    let Some(s) = args.get(index) else { return Ok(default) };
    match s.parse::<usize>() {
        Ok(v) if v >= min => Ok(v),
        _ => Err(format!("{name} {s:?}: expected a whole number of at least {min}")),
    }
}

/// `soak | head` ends quietly: writing to a closed pipe ends the process (SIGPIPE's default),
/// where Rust's ignored SIGPIPE would make `println!` panic.
fn end_quietly_on_closed_pipe() {
    // SAFETY: `signal` with `SIG_DFL`, a valid action for SIGPIPE, only sets the process's
    // disposition of that signal; it touches no memory of ours.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() {
    end_quietly_on_closed_pipe();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parsed = arg(&args, 0, "iterations", 100_000, MIN_ITERATIONS).and_then(|i| {
        let dims = arg(&args, 2, "dims", 2, 2)?;
        if dims > 3 {
            return Err(format!("dims {dims}: expected 2 or 3"));
        }
        Ok((i, arg(&args, 1, "threads", 2, 1)?, dims))
    });
    let parsed = parsed.and_then(|p| if args.len() > 3 { Err("at most 3 arguments".into()) } else { Ok(p) });
    let (iterations, threads, dims) = parsed.unwrap_or_else(|e| {
        eprintln!(
            "soak: {e}\nusage: soak [iterations (default 100000)] [threads (default 2)] [dims: 2 (default) or 3]"
        );
        std::process::exit(2)
    });
    let runtime = Runtime { topology: Topology::detect(), threads, pin: Pinning::Off, timer: BoxTimer::default() };
    let size = if dims == 3 { "10×10×10" } else { "32×32" };
    println!("md gravity {size}, {iterations} iterations, {threads} threads, each executor in turn");
    // What the limit can see: a leak of at least this many bytes per iteration.
    let measured = iterations / 1000 * 1000 - iterations / 10; // to the last sample
    println!(
        "a leak of {} bytes or more per iteration would fail the memory check",
        (GROWTH_LIMIT as usize).div_ceil(measured)
    );
    println!();
    println!(
        "| executor | seconds | rebalancings | RSS after 1/10 (MiB) | RSS max after (MiB) | growth (KiB) | checksum |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut checksums = Vec::new();
    let mut failed = false;
    for name in EXECUTORS {
        let mut app: Box<dyn GridApp> = if dims == 3 {
            Box::new(Md::new_3d(Scenario::Gravity, 10, 10, 10, 1))
        } else {
            Box::new(Md::new(Scenario::Gravity, 32, 32, 1))
        };
        let (mut exec, _) = runtime.executor(name, app.grid()).unwrap_or_else(|e| {
            eprintln!("soak: the {name} executor: {e}");
            std::process::exit(2)
        });
        let bar = pbs_plot::progress::bar(iterations as u64, name);
        let start = Instant::now();
        let (mut settled, mut peak, mut rebalancings) = (0u64, 0u64, 0usize);
        let mut rec = Recorder::new(name, threads);
        for it in 0..iterations {
            app.iterate(exec.as_mut(), &mut rec, None);
            if (it + 1) % 1000 == 0 {
                // The recorder keeps every iteration's figures: start a new one, so that only
                // the runtime's own memory is measured.
                rebalancings += rec.report().rebalances;
                rec = Recorder::new(name, threads);
                bar.inc(1000);
            }
            if it + 1 == iterations / 10 {
                settled = rss();
            } else if it + 1 > iterations / 10 && (it + 1) % 1000 == 0 {
                peak = peak.max(rss());
            }
        }
        bar.finish_and_clear();
        let growth = peak.saturating_sub(settled);
        failed |= growth > GROWTH_LIMIT;
        let sum = app.checksum();
        checksums.push(sum);
        println!(
            "| {name} | {:.1} | {rebalancings} | {:.1} | {:.1} | {} | {sum:016x} |",
            start.elapsed().as_secs_f64(),
            settled as f64 / (1 << 20) as f64,
            peak as f64 / (1 << 20) as f64,
            growth >> 10
        );
    }
    println!();
    if checksums.iter().any(|&c| c != checksums[0]) {
        println!("FAIL: the executors disagree on the result");
        std::process::exit(1);
    }
    if failed {
        println!("FAIL: resident memory grew by more than {} MiB after the first tenth", GROWTH_LIMIT >> 20);
        std::process::exit(1);
    }
    println!("same checksum under every executor; memory flat (growth under {} MiB)", GROWTH_LIMIT >> 20);
}
