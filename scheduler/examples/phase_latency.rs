//! Cost of one empty phase (broadcast + barrier) of the worker pool, as the runtime builds it
//! under each pinning: `cargo run --release -p pbs-scheduler --example phase_latency --
//! [threads]`. Every executor but `ws` pays this once per phase; it bounds how short a phase
//! can usefully be. Under `Pinning::Workers` (the default) the calling thread is pinned for
//! each phase and given its own mask back after it, two system calls per phase that the other
//! pinnings do not make.
use std::time::Instant;

use pbs_scheduler::pinning::Pinning;
use pbs_scheduler::runtime::Runtime;

mod common;
use common::OrFail;

fn main() {
    const EXAMPLE: &str = "phase_latency";
    let threads = common::count(EXAMPLE, &common::arguments(EXAMPLE, 1), 0, "threads", 2, 1);
    let pinnings =
        [("off", Pinning::Off), ("workers", Pinning::Workers), ("workers and caller", Pinning::WorkersAndCaller)];
    // The pinnings take turns, three rounds each, so that a slow spell of a shared machine
    // hits them alike; each from a fresh thread with the process's mask (pinning the caller
    // for good would confine the pools created after it).
    for round in 0..3 {
        for (name, pin) in pinnings {
            let mut times: Vec<f64> = std::thread::spawn(move || {
                let runtime = Runtime { threads, pin, ..Runtime::detect().or_fail(EXAMPLE, "the topology") };
                let (pool, _bindings) = runtime.pool().or_fail(EXAMPLE, "a pool");
                (0..20_000)
                    .map(|_| {
                        let t = Instant::now();
                        pool.run(&|id| {
                            std::hint::black_box(id);
                        });
                        t.elapsed().as_secs_f64() * 1e6
                    })
                    .collect()
            })
            .join()
            .expect("the measuring thread");
            times.sort_by(f64::total_cmp);
            let q = |f: f64| times[((times.len() - 1) as f64 * f) as usize];
            println!(
                "round {round}: pinning {name:>18}: empty phase on {threads} threads: median {:.2} µs, p10 {:.2}, p90 {:.2}, p99 {:.2}",
                q(0.5),
                q(0.1),
                q(0.9),
                q(0.99)
            );
        }
    }
}
