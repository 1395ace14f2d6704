//! The README's Rust examples, compiled and run: each is copied below between the variables it
//! assumes, and `the_readme_s_rust_lines_are_the_ones_compiled_here` checks that every line of
//! the README's ```` ```rust ```` blocks is a line of this file, so that neither can change
//! without the other.

use pbs::loadmap::PerlinMap;
use pbs::metrics;

type Result = std::result::Result<(), Box<dyn std::error::Error>>;

/// "From Rust", the executor: a Jacobi-like step over a 24×16 grid, under pbs.
#[test]
fn the_readme_s_executor_loop_runs_and_computes_each_box_once() -> Result {
    let grid = pbs::Grid::new(24, 16)?;
    let iterations = 6;
    let mut current: Vec<f64> = (0..grid.len()).map(|k| k as f64).collect();
    let mut next = vec![0.0; grid.len()];
    let step = |u: &[f64], k: usize| 0.5 * u[k] + 1.0;
    let expected = {
        let mut u = current.clone();
        for _ in 0..iterations {
            u = (0..u.len()).map(|k| step(&u, k)).collect();
        }
        u
    };

    use pbs_scheduler::{for_each_box_mut, runtime::Runtime};

    let rt = Runtime::detect()?; // topology, pinned workers
    let (mut exec, _) = rt.executor("pbs", grid)?; // or "ws", "static", "norcb", …
    for _ in 0..iterations {
        for_each_box_mut(exec.as_mut(), &mut next, |k, out| *out = step(&current, k));
        std::mem::swap(&mut current, &mut next);
        exec.end_iteration(); // pbs: measured loads → maybe rebalance
    }

    assert_eq!(current, expected);
    assert_eq!(exec.name(), "pbs");
    Ok(())
}

/// "From Rust", the balancer alone: a Perlin map of 40×40 boxes over 8 vCores, and the
/// comment's claim that the refined owners are within 0.5 % of the lower bound.
#[test]
fn the_readme_s_balancer_example_ends_within_half_a_percent_of_the_bound() -> Result {
    let grid = pbs::Grid::new(40, 40)?;
    let loads = PerlinMap::with_seed(3).loads(&grid);

    use pbs::{balance, methods, Problem, StopRule, VCores};
    let problem = Problem::new(grid, &loads, 8)?; // bad loads: named errors
    let mut vcores = VCores::from_bisection(&problem);
    let mut method = methods::by_name("power-cells")?; // the default; or "paper-eq7", …
    balance(method.as_mut(), &problem, &mut vcores, StopRule::for_problem(&problem), |_| {});
    let mut owners = vcores.owners().to_vec();
    pbs::refine::refine(&problem, &mut owners, Default::default())?; // within 0.5 % of the bound

    let max_avg = metrics::max_avg(&metrics::charges(&owners, &loads, 8));
    assert!(max_avg <= 1.005 * problem.lower_bound(), "{max_avg} against {}", problem.lower_bound());
    assert_eq!(metrics::disconnected_parts(&grid, &owners, 8), 0);
    // The comment "bad loads: named errors".
    let e = Problem::new(grid, &[f64::NAN; 1600], 8).unwrap_err().to_string();
    assert!(e.contains("NaN") && e.contains("box 0"), "{e}");
    Ok(())
}

/// Lines compared with runs of white space made one space, so that aligned comments match.
fn normalised(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn the_readme_s_rust_lines_are_the_ones_compiled_here() {
    let readme = include_str!("../../README.md");
    let here: std::collections::HashSet<String> = include_str!("readme.rs").lines().map(normalised).collect();
    let (mut in_rust, mut lines) = (false, 0);
    for line in readme.lines() {
        if line.starts_with("```") {
            in_rust = line == "```rust";
            continue;
        }
        let line = normalised(line);
        if in_rust && !line.is_empty() {
            assert!(here.contains(&line), "README line not compiled in tests/tests/readme.rs: {line}");
            lines += 1;
        }
    }
    assert!(lines >= 14, "the README's two Rust examples: {lines} lines");
}
