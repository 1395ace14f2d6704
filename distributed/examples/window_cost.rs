//! What one rank's iteration costs with its executor over the whole grid against over its
//! window (`window.rs`), without MPI: md (or the stencil) on SIDE × SIDE boxes split into P
//! parts by a k-way RCB of the initial work; the "rank" is part 0, holding the boxes it computes
//! or reads, computing its own on one thread, with no exchange (so that both variants compute
//! the same iterations on the same data: the checksums are compared). Each variant runs in a
//! process of its own (two ranks' worth of state in one process made each slower by the other
//! by up to 30 %), the two taking turns, ROUNDS rounds of ITERS iterations; medians.
//!
//! `cargo run --release -p pbs-mpi --example window_cost -- [APP] [SIDE] [PARTS,...] [ITERS] [ROUNDS]`
//! (defaults: md 256 1,2,4,16,64 20 7).
use pbs::Grid;
use pbs_apps::distributed::{build_holding, initial_work, within};
use pbs_mpi::timed::Timed;
use pbs_mpi::window::{Make, Window};
use pbs_scheduler::pinning::Pinning;
use pbs_scheduler::report::Recorder;
use pbs_scheduler::runtime::Runtime;
use pbs_scheduler::topology::Topology;
use pbs_scheduler::{BoxTimer, Executor};
use std::time::Instant;

/// The environment variable that makes a child process run one variant.
const VARIANT: &str = "PBS_WINDOW_COST_VARIANT";

fn fail(e: String) -> ! {
    eprintln!("window_cost: {e}");
    std::process::exit(2);
}

/// Runs part 0 of `parts` with the executor over the whole grid or the window; prints
/// `ms_per_iteration window_boxes own_boxes checksum`.
fn child(app: &str, side: usize, parts: usize, iters: usize, window: bool) {
    let scenario = pbs_apps::default_scenario(app);
    let grid = Grid::new(side, side).unwrap_or_else(|e| fail(e.to_string()));
    let work = initial_work(app, scenario, grid, 1).unwrap_or_else(|e| fail(e));
    let owners = pbs::bisection::kway_rcb(&grid, &work, parts).unwrap_or_else(|e| fail(e.to_string()));
    let mine: Vec<bool> = owners.iter().map(|&o| o == 0).collect();
    let probe = build_holding(app, scenario, grid, 1, Some(&vec![false; grid.len()])).unwrap_or_else(|e| fail(e));
    let holds = within(&grid, probe.halo(), |k| mine[k]);
    let mut state = build_holding(app, scenario, grid, 1, Some(&holds)).unwrap_or_else(|e| fail(e));
    state.compute_only(Some(mine.clone())).unwrap_or_else(|e| fail(e));
    let runtime = Runtime { topology: Topology::detect(), threads: 1, pin: Pinning::Off, timer: BoxTimer::default() };
    let make: Make = Box::new(move |g: Grid| runtime.executor("pbs", g).map(|(e, _)| e).map_err(|e| e.to_string()));
    let all = vec![true; grid.len()];
    let inner = Window::new(grid, if window { &mine } else { &all }, state.halo(), make).unwrap_or_else(|e| fail(e));
    let window_boxes = inner.window_boxes();
    let mut exec = Timed::new(Box::new(inner));
    // As `run` on a node with a core for every thread: the CPU clock is not read.
    exec.preempted(std::env::var("PRE").is_ok());
    let hint: Vec<f64> = work.iter().zip(&mine).map(|(&w, &m)| if m { w } else { 0.0 }).collect();
    exec.hint_loads(&hint).unwrap_or_else(|e| fail(e.to_string()));
    let mut rec = Recorder::new("pbs", 1);
    state.iterate(&mut exec, &mut rec, None); // first touch
    let t = Instant::now();
    for _ in 0..iters {
        state.iterate(&mut exec, &mut rec, None);
    }
    let ms = t.elapsed().as_secs_f64() * 1e3 / iters as f64;
    let own = mine.iter().filter(|&&m| m).count();
    println!("{ms} {window_boxes} {own} {:016x}", state.checksum());
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.to_string());
    let count = |i: usize, default: &str| -> usize {
        arg(i, default)
            .parse()
            .ok()
            .filter(|&n| n > 0)
            .unwrap_or_else(|| fail(format!("argument {} must be a count ≥ 1", i + 1)))
    };
    let app = arg(0, "md");
    let side = count(1, "256");
    let (iters, rounds) = (count(3, "20"), count(4, "7"));
    if let Ok(v) = std::env::var(VARIANT) {
        return child(&app, side, count(2, "1"), iters, v == "window");
    }
    let parts: Vec<usize> = arg(2, "1,2,4,16,64")
        .split(',')
        .map(|p| p.parse().ok().filter(|&n| n > 0).unwrap_or_else(|| fail(format!("part count {p:?}"))))
        .collect();
    let exe = std::env::current_exe().unwrap_or_else(|e| fail(e.to_string()));
    let scenario = pbs_apps::default_scenario(&app);
    println!("{app} {scenario}, {side}×{side} boxes, 1 thread, part 0 of a k-way RCB; ms per iteration, medians of {rounds} rounds of {iters}, each variant in its own process, taking turns");
    println!(
        "{:>6} {:>10} {:>12} {:>12} {:>12} {:>8}",
        "parts", "own boxes", "window boxes", "whole grid", "window", "ratio"
    );
    for p in parts {
        let run = |window: bool| -> (f64, String, String, String) {
            let out = std::process::Command::new(&exe)
                .args([&app, &side.to_string(), &p.to_string(), &iters.to_string(), "1"])
                .env(VARIANT, if window { "window" } else { "whole" })
                .output()
                .unwrap_or_else(|e| fail(e.to_string()));
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            let f: Vec<String> = text.split_whitespace().map(String::from).collect();
            if !out.status.success() || f.len() != 4 {
                fail(format!("child failed: {text}{}", String::from_utf8_lossy(&out.stderr)));
            }
            (f[0].parse().unwrap_or_else(|_| fail(text.clone())), f[1].clone(), f[2].clone(), f[3].clone())
        };
        let (mut whole, mut window) = (Vec::new(), Vec::new());
        let mut seen = (String::new(), String::new(), String::new());
        for r in 0..rounds {
            for w in if r % 2 == 0 { [false, true] } else { [true, false] } {
                let (ms, window_boxes, own, checksum) = run(w);
                if w {
                    window.push(ms);
                    seen.0 = window_boxes;
                } else {
                    whole.push(ms);
                }
                if !seen.2.is_empty() && seen.2 != checksum {
                    fail(format!("checksums differ: {} and {checksum}", seen.2));
                }
                (seen.1, seen.2) = (own, checksum);
            }
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (a, b) = (median(&mut whole), median(&mut window));
        println!("{p:>6} {:>10} {:>12} {a:>12.3} {b:>12.3} {:>8.2}", seen.1, seen.0, b / a);
    }
}
