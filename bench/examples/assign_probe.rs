//! The cost of one assignment at any size: `cargo run --release -p pbs-bench --example
//! assign_probe -- SIDE VCORES [TIMINGS]` runs `assign_cost::measure` on a SIDE×SIDE grid
//! (TIMINGS, 400 by default, each on the next of 16 random diagrams so that the branch
//! predictor cannot learn one: docs/design-notes.md, "Branches in the assignment") and prints
//! the medians, fast and brute force.
fn main() {
    pbs_bench::end_quietly_on_closed_pipe();
    let counts = pbs_bench::example_counts("assign_probe SIDE VCORES [TIMINGS]", &[None, None, Some(400)]);
    let (side, vcores, timings) = (counts[0], counts[1], counts[2]);
    if let Err(e) = pbs::Grid::new(side, side) {
        pbs_bench::example_failed("assign_probe", &e);
    }
    if vcores > side.saturating_mul(side) {
        eprintln!("assign_probe: {vcores} vCores for {side}x{side} boxes: at most one per box");
        std::process::exit(2);
    }
    let c = pbs_bench::assign_cost::measure(side, vcores, timings);
    println!(
        "{side}x{side} boxes, {vcores} vCores: fast {:.1} us ({:.1} ns per box), brute force {:.1} us",
        c.fast_us, c.fast_ns_per_box, c.brute_us
    );
}
