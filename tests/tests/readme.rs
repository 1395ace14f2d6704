//! The README's examples, compiled and run: each Rust one is copied below between the variables
//! it assumes, the C one in `ffi/tests/readme.c`; the last two tests check that every line of
//! the README's ```` ```rust ```` and ```` ```c ```` blocks is a line of those files, so that
//! neither can change without the other.

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

/// Checks that every line of the README's ```` ```lang ```` blocks is a line of `source` (`name`),
/// and that there are at least `least` of them.
fn readme_blocks_are_in(lang: &str, source: &str, name: &str, least: usize) {
    let here: std::collections::HashSet<String> = source.lines().map(normalised).collect();
    let (mut inside, mut lines) = (false, 0);
    for line in include_str!("../../README.md").lines() {
        if let Some(tag) = line.strip_prefix("```") {
            inside = tag == lang;
            continue;
        }
        let line = normalised(line);
        if inside && !line.is_empty() {
            assert!(here.contains(&line), "README line not in {name}: {line}");
            lines += 1;
        }
    }
    assert!(lines >= least, "the README's {lang} examples: {lines} lines");
}

#[test]
fn the_readme_s_rust_lines_are_the_ones_compiled_here() {
    readme_blocks_are_in("rust", include_str!("readme.rs"), "tests/tests/readme.rs", 14);
}

/// `ffi/tests/readme.c` is compiled and run by pbs-ffi's `readme_c_runs_the_readme_s_example`.
#[test]
fn the_readme_s_c_lines_are_those_of_ffi_tests_readme_c() {
    readme_blocks_are_in("c", include_str!("../../ffi/tests/readme.c"), "ffi/tests/readme.c", 12);
}
