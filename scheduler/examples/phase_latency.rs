//! Cost of one empty phase (broadcast + barrier) of the worker pool:
//! `cargo run --release -p pbs-scheduler --example phase_latency -- [threads]`.
//! Every executor but `ws` pays this once per phase; it bounds how short a phase can usefully be.
use std::sync::Arc;
use std::time::Instant;

use pbs_scheduler::pool::Pool;

fn main() {
    let threads: usize = std::env::args().nth(1).map_or(2, |s| s.parse().expect("a thread count"));
    let pool = Pool::new(threads, Arc::new(|_| {})).unwrap();
    for round in 0..3 {
        let mut times: Vec<f64> = (0..20_000)
            .map(|_| {
                let t = Instant::now();
                pool.run(&|id| {
                    std::hint::black_box(id);
                });
                t.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        times.sort_by(f64::total_cmp);
        let q = |f: f64| times[((times.len() - 1) as f64 * f) as usize];
        println!(
            "round {round}: empty phase on {threads} threads: median {:.2} µs, p10 {:.2}, p90 {:.2}, p99 {:.2}",
            q(0.5),
            q(0.1),
            q(0.9),
            q(0.99)
        );
    }
}
