//! Every when-to-rebalance criterion against the optimal schedule (the O(γ²) dynamic
//! programme) on Boulmier's synthetic imbalance generators: γ = 600 iterations, μ = 1,
//! C = 100·μ. `cargo run --release -p pbs-scheduler --example criteria`
use pbs_scheduler::criteria::*;

fn main() {
    let (gamma, mu, cost) = (600, 1.0, 100.0);
    println!("{:<16} {:>22} {:>22} {:>22} {:>22}", "criterion", "constant ι", "sublinear ι", "linear ι", "sawtooth ι");
    let growths = [Growth::Constant, Growth::Sublinear, Growth::Linear, Growth::Sawtooth];
    let optimum: Vec<(f64, usize)> = growths
        .iter()
        .map(|g| {
            let (t, cuts) = optimal_total(gamma, mu, cost, g.imbalance(mu));
            (t, cuts.len())
        })
        .collect();
    let cell = |t: f64, n: usize, opt: f64| format!("{:.3}× opt, {:>3} LB", t / opt, n);
    let row: Vec<String> = optimum.iter().map(|&(t, n)| cell(t, n, t)).collect();
    println!("{:<16} {}", "optimal (DP)", row.iter().map(|s| format!("{s:>22}")).collect::<String>());
    type Maker = Box<dyn Fn() -> Box<dyn Criterion>>;
    let makers: Vec<(&str, Maker)> = vec![
        ("boulmier eq.24", Box::new(move || Box::new(Boulmier::new(cost)))),
        ("menon", Box::new(move || Box::new(Menon::new(cost)))),
        ("procassini 0.9", Box::new(move || Box::new(Procassini::new(0.9, cost)))),
        ("marquez 0.2", Box::new(|| Box::new(Marquez(0.2)))),
        ("periodic 25", Box::new(|| Box::new(Periodic::new(25)))),
        ("always", Box::new(|| Box::new(Always))),
        ("never", Box::new(|| Box::new(Never))),
    ];
    for (name, make) in makers {
        let row: Vec<String> = growths
            .iter()
            .zip(&optimum)
            .map(|(g, &(opt, _))| {
                let (t, cuts) = simulate(make().as_mut(), gamma, mu, cost, g.imbalance(mu));
                cell(t, cuts.len(), opt)
            })
            .collect();
        println!("{name:<16} {}", row.iter().map(|s| format!("{s:>22}")).collect::<String>());
    }
}
