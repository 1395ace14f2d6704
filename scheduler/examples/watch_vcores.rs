//! The balancer's vCores, from an executor built by name: where each thread's cell lies,
//! what it carries, and how the cells move when the load does.
//!
//! A hot spot in one corner of a 48×48 grid; `pbs` measures the box times, rebalances, and
//! the printout shows the vCores crowding towards the hot corner (small, heavy cells there).
//!
//! `cargo run --release -p pbs-scheduler --example watch_vcores -- [threads]`

use pbs::Grid;
use pbs_scheduler::runtime::Runtime;

mod common;

fn main() -> Result<(), common::Failure> {
    let mut runtime = Runtime::detect()?;
    let args = common::arguments("watch_vcores", 1);
    runtime.threads = common::count("watch_vcores", &args, 0, "threads", runtime.threads, 1);
    let grid = Grid::new(48, 48)?;
    let (mut exec, _bindings) = runtime.executor("pbs", grid)?;
    let hot = |k: usize| {
        let c = grid.centre(k);
        1.0 + 30.0 * (-((c[0] - 8.0).powi(2) + (c[1] - 8.0).powi(2)) / 60.0).exp()
    };
    let show = |exec: &dyn pbs_scheduler::Executor, when: &str| {
        let v = exec.vcores().expect("the pbs executor has vCores");
        let mut boxes = vec![0usize; v.len()];
        v.owners().iter().for_each(|&o| boxes[o as usize] += 1);
        println!("{when}: vCore  position        boxes");
        for (i, p) in v.positions().iter().enumerate() {
            println!("        {i:>5}  ({:>5.1}, {:>5.1})  {:>5}", p[0], p[1], boxes[i]);
        }
    };
    show(exec.as_ref(), "start");
    let mut rebalances = 0;
    for _ in 0..60 {
        exec.run_phase(&|k| {
            // Busy work proportional to the box's load: about a microsecond per unit.
            let mut x = 0.5f64;
            for _ in 0..(hot(k) * 300.0) as usize {
                x = 3.9 * x * (1.0 - x);
            }
            std::hint::black_box(x);
        });
        rebalances += usize::from(exec.end_iteration().rebalanced);
    }
    show(exec.as_ref(), &format!("after 60 iterations and {rebalances} rebalancings"));
    Ok(())
}
