//! Prints the cost of one assignment, fast vs brute force: `cargo run --release -p pbs-bench --example assign_cost`.
fn main() {
    pbs_bench::end_quietly_on_closed_pipe();
    for v in [10, 72, 1000] {
        for side in [50, 100, 150, 300] {
            let c = pbs_bench::assign_cost::measure(side, v, 30);
            println!(
                "{:>5} vcores {:>4}² boxes: fast {:>9.1} us  brute {:>10.1} us  x{:>6.1}  {:.1} ns/box",
                v, side, c.fast_us, c.brute_us, c.speedup, c.fast_ns_per_box
            );
        }
    }
}
