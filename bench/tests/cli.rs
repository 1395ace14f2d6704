//! The `pbs-bench` command line against docs/design.md's contract, and its errors on bad input.

use std::path::PathBuf;
use std::process::{Command, Output};

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pbs-bench")).args(args).output().expect("runs")
}

fn json(args: &[&str]) -> serde_json::Value {
    let out = bench(args);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("valid JSON on stdout")
}

fn keys(v: &serde_json::Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().expect("object").keys().cloned().collect();
    k.sort();
    k
}

fn sorted(names: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pbs-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Width and height from a PNG's header, which must be a PNG's.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[1..4], b"PNG", "not a PNG");
    let at = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap());
    (at(16), at(20))
}

fn stdout_of(args: &[&str]) -> String {
    let out = bench(args);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr_of(args: &[&str]) -> String {
    let out = bench(args);
    assert!(!out.status.success(), "{args:?} should fail");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn converge_all_prints_the_contract_fields_and_converges() {
    let rows = json(&["converge", "--case", "all", "--json"]);
    let rows = rows.as_array().unwrap();
    let cases: Vec<&str> = rows.iter().map(|r| r["case"].as_str().unwrap()).collect();
    assert_eq!(cases, ["uniform", "line", "disc", "random", "perlin"]);
    for r in rows {
        assert_eq!(
            keys(r),
            sorted(&[
                "case",
                "method",
                "nx",
                "ny",
                "nz",
                "vcores",
                "steps",
                "converged",
                "max_avg",
                "lower_bound",
                "dol_max",
                "dol_min",
                "edge_cut",
                "loaded_edge_cut",
                "elapsed_ms"
            ])
        );
        assert_eq!(r["method"], "power-cells");
        assert_eq!(
            (r["nx"].as_u64(), r["ny"].as_u64(), r["nz"].as_u64(), r["vcores"].as_u64()),
            (Some(50), Some(50), Some(1), Some(10))
        );
        assert_eq!(r["converged"], true, "{r}");
        assert!(r["max_avg"].as_f64().unwrap() <= 1.05 * r["lower_bound"].as_f64().unwrap());
    }
}

#[test]
fn converge_is_deterministic_for_a_seed() {
    let strip = |mut v: serde_json::Value| {
        for r in v.as_array_mut().unwrap() {
            r.as_object_mut().unwrap().remove("elapsed_ms");
        }
        v
    };
    let args = [
        "converge",
        "--case",
        "random",
        "--seed",
        "9",
        "--method",
        "power-cells,paper-eq7",
        "--max-steps",
        "300",
        "--json",
    ];
    assert_eq!(strip(json(&args)), strip(json(&args)));
}

#[test]
fn converge_reads_a_csv_load_map_with_its_own_grid() {
    let dir = temp_dir("csv");
    let path = dir.join("map.csv");
    let text: String = (0..40)
        .map(|j| (0..80).map(|i| format!("{}", ((i * j) % 7) as f64 * 0.5)).collect::<Vec<_>>().join(",") + "\n")
        .collect();
    std::fs::write(&path, &text).unwrap();
    let rows = json(&["converge", "--load-map", path.to_str().unwrap(), "--vcores", "8", "--json"]);
    let r = &rows[0];
    assert_eq!((r["nx"].as_u64(), r["ny"].as_u64(), r["nz"].as_u64()), (Some(80), Some(40), Some(1)));
    assert_eq!(r["converged"], true);
    // Four such blocks, a blank line between them: a map of four layers.
    std::fs::write(&path, [text.as_str(); 4].join("\n")).unwrap();
    let rows = json(&["converge", "--load-map", path.to_str().unwrap(), "--vcores", "8", "--json"]);
    assert_eq!((rows[0]["nx"].as_u64(), rows[0]["ny"].as_u64(), rows[0]["nz"].as_u64()), (Some(80), Some(40), Some(4)));
    assert_eq!(rows[0]["converged"], true);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn transitions_print_the_contract_object() {
    let r = json(&["transitions", "--kind", "smooth", "--trials", "30", "--json"]);
    for k in
        ["kind", "method", "nx", "ny", "vcores", "trials", "converged_fraction", "steps", "ms", "max_avg", "migrations"]
    {
        assert!(r.get(k).is_some(), "missing {k} in {r}");
    }
    assert_eq!(keys(&r["steps"]), sorted(&["avg", "min", "max"]));
    assert_eq!(keys(&r["ms"]), sorted(&["avg", "min", "max"]));
    assert_eq!(keys(&r["max_avg"]), sorted(&["avg", "max"]));
    assert_eq!(keys(&r["migrations"]), sorted(&["avg", "max"]));
    assert_eq!(r["kind"], "smooth");
    assert_eq!(r["trials"], 30);
    assert_eq!(r["converged_fraction"], 1.0);
    assert!(r["steps"]["avg"].as_f64().unwrap() <= 3.0, "{r}");
}

#[test]
fn readable_tables_by_default() {
    let out = bench(&["converge", "--case", "uniform"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("case"), "{text}");
    assert!(text.contains("uniform") && text.contains("yes"), "{text}");
}

#[test]
fn runs_with_more_threads_than_cpus_are_labelled_oversubscribed() {
    let small =
        ["run", "--app", "stencil", "--scheduler", "static", "--iters", "2", "--nx", "4", "--ny", "4", "--no-pin"];
    let cpus = json(&[&small[..], &["--threads", "1", "--json"]].concat())[0]["cpus"].as_u64().unwrap();
    for (threads, labelled) in [(cpus, false), (cpus + 1, true)] {
        let n = threads.to_string();
        let text = stdout_of(&[&small[..], &["--threads", n.as_str()]].concat());
        assert_eq!(text.contains("OVERSUBSCRIBED"), labelled, "{threads} threads on {cpus} CPUs: {text}");
    }
}

#[test]
fn bad_input_gets_a_clear_error_and_a_failing_exit() {
    assert!(stderr_of(&["converge", "--case", "uniform", "--vcores", "0"]).contains("zero vCores"));
    assert!(stderr_of(&["converge", "--case", "uniform", "--nx", "2", "--ny", "2", "--vcores", "5"])
        .contains("5 vCores for 4 boxes"));
    assert!(stderr_of(&["converge", "--case", "uniform", "--nx", "0"]).contains("empty grid"));
    assert!(stderr_of(&["converge", "--case", "square"]).contains("unknown case"));
    assert!(stderr_of(&["converge", "--case", "uniform", "--method", "metis"]).contains("unknown method"));
    for tol in ["NaN", "inf", "-0.5"] {
        let err = stderr_of(&["converge", "--case", "uniform", "--tol", tol]);
        assert!(err.contains("--tol must be finite and ≥ 0"), "--tol {tol}: {err}");
    }
    assert!(stderr_of(&["converge"]).contains("--case"));
    assert!(stderr_of(&["transitions", "--kind", "gentle"]).contains("rough or smooth"));
    // The drift's bound is on |drift| × trials, the map's whole travel: exactly at it runs.
    for (drift, trials) in [("1e19", "1"), ("-6e11", "2")] {
        let err = stderr_of(&["transitions", "--kind", "smooth", "--drift", drift, "--trials", trials]);
        assert!(err.contains("translates the map beyond 1e12 boxes"), "--drift {drift} × {trials}: {err}");
    }
    let at_bound = json(&["transitions", "--kind", "smooth", "--drift", "5e11", "--trials", "2", "--json"]);
    assert_eq!(at_bound["trials"], 2, "{at_bound}");
    assert!(stderr_of(&["transitions", "--kind", "smooth", "--drift", "inf"]).contains("--drift must be finite"));
    assert!(stderr_of(&["transitions", "--kind", "smooth", "--trials", "0"]).contains("--trials must be at least 1"));
    // `--quick` sets the trial counts itself: one given beside it is refused, not dropped.
    let quick = temp_dir("quick");
    let both = stderr_of(&["paper", "--quick", "--trials", "5", "--out", quick.to_str().unwrap()]);
    assert!(both.contains("cannot be used with") && both.contains("--trials <TRIALS>"), "{both}");
    std::fs::remove_dir_all(quick).ok();
    // A grid too large for the machine: refused before its map is drawn (it aborted drawing it).
    let huge = ["--nx", "65535", "--ny", "65535"];
    for cmd in [&["converge", "--case", "perlin"][..], &["transitions", "--kind", "rough", "--trials", "1"]] {
        let err = stderr_of(&[cmd, &huge[..]].concat());
        assert!(err.starts_with("pbs-bench: error: out of memory: balancer state for 4294836225 boxes"), "{err}");
    }
    let dir = temp_dir("bad");
    for (name, text, expect) in [
        ("ragged.csv", "1,2,3\n4,5\n", "line 2"),
        ("layers.csv", "1,2\n3,4\n\n5,6\n", "layer 2 (from this line) has 1 row where layer 1 has 2"),
        ("nan.csv", "1,2\n3,NaN\n", "line 2, column 2"),
        ("negative.csv", "1,-2\n", "finite and ≥ 0"),
        ("word.csv", "1,two\n", "\"two\" is not a number"),
        ("empty.csv", "\n\n", "empty grid"),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        let err = stderr_of(&["converge", "--load-map", p.to_str().unwrap()]);
        assert!(err.contains(expect) && err.contains(name), "{name}: {err}");
    }
    let missing = stderr_of(&["converge", "--load-map", "/nonexistent/map.csv"]);
    assert!(missing.contains("cannot read"), "{missing}");
    std::fs::remove_dir_all(dir).ok();
}

/// coupe 0.1's multi-jagged panics on `half-in-one-box`: the row says it was skipped and why,
/// and standard error carries no panic message (it had carried two lines a call, a registry
/// path among them, blamed on "a peer method" whatever panicked).
#[test]
fn a_panic_inside_coupe_is_told_in_its_row_only() {
    let all = temp_dir("coupe-maps");
    assert!(bench(&["maps", "--out", all.to_str().unwrap()]).status.success());
    let one = temp_dir("coupe-one");
    std::fs::copy(all.join("half-in-one-box.csv"), one.join("half-in-one-box.csv")).unwrap();
    let args = ["peers", "--maps", one.to_str().unwrap(), "--parts", "10", "--methods", "coupe-multi-jagged,rcb"];
    let out = bench(&[&args[..], &["--sequence", "0", "--repeats", "1"]].concat());
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    let row = stdout.lines().find(|l| l.contains("coupe-multi-jagged")).expect("a row for coupe's method");
    assert!(row.contains("skipped: coupe-multi-jagged: coupe failed: coupe panicked:"), "{row}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    for d in [all, one] {
        std::fs::remove_dir_all(d).ok();
    }
}

#[test]
fn paper_quick_writes_a_report_with_plots() {
    let dir = temp_dir("paper");
    let out = bench(&["paper", "--quick", "--out", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    for section in ["Fig. 5", "Tables 1–3", "Smooth transitions", "Cell assignment cost", "shapes nobody named"] {
        assert!(report.contains(section), "missing {section}");
    }
    for png in ["fig5.png", "cells.png", "assign_cost.png"] {
        let bytes = std::fs::read(dir.join(png)).unwrap();
        assert_eq!(&bytes[1..4], b"PNG", "{png}");
    }
    let results: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    // `--quick`: 8 trials for Table 1, 2 per Table 2/3 row, 2 for the paper's method, which stops at 200 steps.
    let counts = ["trials", "large_trials", "paper_trials", "paper_max_steps"].map(|k| results[k].as_u64().unwrap());
    assert_eq!(counts, [8, 2, 2, 200]);
    let methods = ["power-cells", "paper-eq7"];
    let static_cases: Vec<(&str, &str)> = results["static_cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["case"].as_str().unwrap(), r["method"].as_str().unwrap()))
        .collect();
    let expected: Vec<(&str, &str)> =
        ["uniform", "line", "disc", "random"].iter().flat_map(|&c| methods.map(|m| (c, m))).collect();
    assert_eq!(static_cases, expected, "Fig. 5: each static case under both methods");
    // Tables 1–3: 7 settings × rough/smooth × 2 methods, each with its trials; the paper's
    // method within its step limit.
    let rows = results["transitions"].as_array().unwrap();
    assert_eq!(rows.len(), 28);
    let settings = [(10, 50), (13, 50), (13, 100), (13, 150), (72, 50), (72, 100), (72, 150)];
    let mut rows = rows.iter();
    for (vcores, side) in settings {
        for kind in ["rough", "smooth"] {
            for method in methods {
                let r = rows.next().unwrap();
                let trials = match (method, vcores) {
                    ("power-cells", 10) => 8,
                    _ => 2,
                };
                let seen = (&r["vcores"], &r["nx"], &r["ny"], &r["kind"], &r["method"], &r["trials"]);
                assert_eq!(
                    seen,
                    (&vcores.into(), &side.into(), &side.into(), &kind.into(), &method.into(), &trials.into())
                );
                if method == "paper-eq7" {
                    assert!(r["steps"]["max"].as_f64().unwrap() <= 200.0, "{r}");
                }
            }
        }
    }
    // The warm starts against balancing from scratch: what `transitions` prints for them.
    let direct =
        json(&["transitions", "--kind", "smooth", "--trials", "8", "--seed", "2", "--compare-scratch", "--json"]);
    for k in ["nx", "vcores", "trials", "converged_fraction", "steps", "migrations", "max_avg", "scratch_migrations"] {
        assert_eq!(results["smooth_migrations"][k], direct[k], "{k}");
    }
    let costs: Vec<(u64, u64)> = results["assign_cost"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["vcores"].as_u64().unwrap(), c["side"].as_u64().unwrap()))
        .collect();
    let sides = [50, 100, 150, 300];
    assert_eq!(costs, [72, 1000].iter().flat_map(|&v| sides.map(|s| (v, s))).collect::<Vec<_>>());
    let shapes = results["shapes"].as_array().unwrap();
    assert!(!shapes.is_empty() && shapes.len().is_multiple_of(2));
    for pair in shapes.chunks(2) {
        assert_eq!(pair[0]["case"], pair[1]["case"]);
        assert_eq!([&pair[0]["method"], &pair[1]["method"]], methods);
    }
    // The machine it ran on, by name.
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    if let Some(model) = cpuinfo.lines().find_map(|l| l.strip_prefix("model name")) {
        let model = model.split(':').nth(1).unwrap().trim();
        assert!(report.contains(&format!("Machine: {model}, ")), "the CPU model {model:?} is not named");
    }
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn lifetime_prints_one_row_per_balancer_and_part_count() {
    let rows = json(&[
        "lifetime",
        "--scenario",
        "gravity",
        "--nx",
        "16",
        "--ny",
        "16",
        "--parts",
        "2,4",
        "--iters",
        "20",
        "--json",
    ]);
    let rows = rows.as_array().unwrap();
    let seen: Vec<(u64, &str)> =
        rows.iter().map(|r| (r["parts"].as_u64().unwrap(), r["balancer"].as_str().unwrap())).collect();
    let balancers = ["pbs", "rcb", "norcb", "packsteal"];
    let expected: Vec<(u64, &str)> = [2, 4].iter().flat_map(|&p| balancers.iter().map(move |&b| (p, b))).collect();
    assert_eq!(seen, expected);
    for r in rows {
        for k in [
            "scenario",
            "remaps",
            "lifetime_iters",
            "migrations_per_iter",
            "efficiency",
            "max_avg_after_remap",
            "remap_ms",
        ] {
            assert!(r.get(k).is_some(), "missing {k} in {r}");
        }
        assert!(r["remaps"].as_u64().unwrap() >= 1, "{r}");
    }
    assert!(stderr_of(&["lifetime", "--balancers", "zoltan", "--iters", "1"]).contains("unknown balancer"));
    assert!(stderr_of(&["lifetime", "--parts", "0", "--iters", "1"]).contains("--parts"));
    // A partitioner of `peers` as a lane, by its name there.
    let rows = json(&[
        "lifetime",
        "--nx",
        "12",
        "--ny",
        "12",
        "--parts",
        "4",
        "--iters",
        "5",
        "--balancers",
        "rcb,peers:pbs",
        "--json",
    ]);
    let names: Vec<&str> = rows.as_array().unwrap().iter().map(|r| r["balancer"].as_str().unwrap()).collect();
    assert_eq!(names, ["rcb", "peers:pbs"]);
    let e = stderr_of(&["lifetime", "--balancers", "peers:zoltan", "--iters", "1"]);
    assert!(e.contains("unknown balancer") && e.contains("peers:NAME"), "{e}");
}

/// A row's idle shares (docs/design.md, "Idle time"), each present and not negative, sum
/// with its efficiency to 1.
fn idle_shares_add_up(r: &serde_json::Value) {
    let idle = &r["idle_shares"];
    let parts = ["late_start", "between_tasks", "waiting", "barrier", "executor", "between_iterations"];
    let shares: Vec<f64> =
        parts.iter().map(|k| idle[k].as_f64().unwrap_or_else(|| panic!("{k} missing in {r}"))).collect();
    assert!(shares.iter().all(|&v| v >= 0.0), "{r}");
    let sum = r["efficiency"].as_f64().unwrap() + shares.iter().sum::<f64>();
    assert!((sum - 1.0).abs() < 0.02, "efficiency and idle shares sum to {sum}: {r}");
}

#[test]
fn run_repeats_with_successive_seeds_and_summarises_the_medians() {
    let args = |extra: &[&'static str]| {
        let mut a =
            vec!["run", "--app", "md-split", "--scenario", "contraction", "--scheduler", "pbs,vector-rcb,norcb"];
        a.extend(["--threads", "2", "--iters", "4", "--nx", "8", "--ny", "8", "--no-pin", "--repeats", "2"]);
        a.extend(extra);
        a
    };
    let rows = json(&args(&["--json"]));
    let rows = rows.as_array().unwrap();
    let seen: Vec<(&str, u64)> =
        rows.iter().map(|r| (r["scheduler"].as_str().unwrap(), r["seed"].as_u64().unwrap())).collect();
    assert_eq!(seen, [("pbs", 1), ("vector-rcb", 1), ("norcb", 1), ("pbs", 2), ("vector-rcb", 2), ("norcb", 2)]);
    for r in rows {
        assert_eq!(r["app"], "md-split");
        assert_eq!(r["phase_max_avg"].as_array().unwrap().len(), 2, "rebin and force: {r}");
        idle_shares_add_up(r);
        let first_of_its_run = &rows[if r["seed"] == 1 { 0 } else { 3 }];
        assert_eq!(r["checksum"], first_of_its_run["checksum"], "{r}");
    }
    assert_ne!(rows[0]["checksum"], rows[3]["checksum"], "two seeds, two runs");
    let dir = temp_dir("timeline");
    let csv = dir.join("timeline.csv");
    let path: &'static str = Box::leak(csv.to_str().unwrap().to_string().into_boxed_str());
    let png = dir.join("timeline.png");
    let png_path: &'static str = Box::leak(png.to_str().unwrap().to_string().into_boxed_str());
    let table = stdout_of(&args(&["--timeline", path, "--png", png_path]));
    assert_eq!(png_size(&std::fs::read(&png).unwrap()), (1200, 900));
    assert!(table.contains("/ pbs") && table.contains("same in each run"), "{table}");
    // One line per scheduler, seed and iteration, in that order.
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(
            "scheduler,seed,iteration,ms,under_way,in_idle_time,rebalanced,abandoned,critical_ms,idle_time_ms,\
             background_ms,migrations"
        )
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 3 * 2 * 4, "{text}");
    for (i, r) in rows.iter().enumerate() {
        let (seed, scheduler) = (i / 12 + 1, ["pbs", "vector-rcb", "norcb"][i / 4 % 3]);
        assert_eq!((r[0], r[1], r[2]), (scheduler, seed.to_string().as_str(), (i % 4).to_string().as_str()), "{text}");
        assert!(r[3].parse::<f64>().unwrap() > 0.0 && ["0", "1"].contains(&r[4]) && r.len() == 12, "{text}");
        // In idle time is a kind of under way.
        assert!(r[5] == "0" || r[4] == "1", "{text}");
    }
    assert!(stderr_of(&["run", "--app", "md", "--repeats", "0"]).contains("--repeats"));
    assert!(stderr_of(&["run", "--app", "md", "--cache-kib", "0"]).contains("--cache-kib must be at least 1"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_prints_the_contract_fields_and_equal_checksums() {
    let rows = json(&[
        "run",
        "--app",
        "md",
        "--scenario",
        "contraction",
        "--threads",
        "2",
        "--iters",
        "5",
        "--nx",
        "10",
        "--ny",
        "10",
        "--no-pin",
        "--json",
    ]);
    let rows = rows.as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["scheduler"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "pbs",
            "ws",
            "eager",
            "static",
            "rcb",
            "norcb",
            "packsteal",
            "vector-rcb",
            "vector-greedy",
            "norm-greedy",
            "diffusion"
        ]
    );
    for r in rows {
        for k in [
            "scheduler",
            "app",
            "scenario",
            "threads",
            "iters",
            "iter_ms_median",
            "iter_ms_mean",
            "efficiency",
            "max_avg",
            "affinity",
            "migrations_per_iter",
            "effort_ms",
            "effort_ms_median",
            "modelled_misses",
            "hw_counters",
            "hw_unavailable_reason",
            "pinned_workers",
            "checksum",
        ] {
            assert!(r.get(k).is_some(), "missing {k} in {r}");
        }
        assert_eq!(r["checksum"], rows[0]["checksum"], "checksums differ: {r}");
        // Counters are either hardware numbers or null with a reason — never both missing.
        assert!(r["hw_counters"].is_object() || r["hw_unavailable_reason"].is_string(), "{r}");
        assert!(r["modelled_misses"].as_u64().unwrap() > 0);
        assert_eq!(r["pinned_workers"], 0, "--no-pin: {r}");
        // One effort per interval between rebalancings, and one for the interval still open
        // unless the last iteration rebalanced.
        let (efforts, rebalances) = (r["effort_ms"].as_array().unwrap().len(), r["rebalances"].as_u64().unwrap());
        assert!(efforts as u64 == rebalances || efforts as u64 == rebalances + 1, "{r}");
        assert!(r["effort_ms_median"].as_f64().unwrap() > 0.0, "{r}");
        // md runs one phase an iteration; a phase's max over mean is at least 1.
        let phases = r["phase_max_avg"].as_array().unwrap();
        assert_eq!(phases.len(), 1, "{r}");
        assert!(phases.iter().all(|p| p.as_f64().unwrap() >= 1.0 - 1e-12), "{r}");
    }
    let stencil = json(&[
        "run",
        "--app",
        "stencil",
        "--scheduler",
        "pbs,static",
        "--threads",
        "3",
        "--iters",
        "4",
        "--nx",
        "9",
        "--ny",
        "7",
        "--json",
    ]);
    let s = stencil.as_array().unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(s[0]["checksum"], s[1]["checksum"]);
    // Pinned by default: every worker, the caller included, on its core (3 workers on this
    // machine's cores in turn).
    assert!(s.iter().all(|r| r["pinned_workers"] == 3), "{stencil}");
}

#[test]
fn run_refuses_bad_input_clearly() {
    assert!(stderr_of(&["run", "--app", "fluid"]).contains("unknown app"));
    assert!(stderr_of(&["run", "--app", "md", "--scenario", "rotation"]).contains("unknown md scenario"));
    assert!(stderr_of(&["run", "--app", "stencil", "--scenario", "gravity"]).contains("unknown stencil scenario"));
    assert!(stderr_of(&["run", "--app", "md", "--scheduler", "openmp"]).contains("unknown scheduler"));
    assert!(stderr_of(&["run", "--app", "md", "--threads", "0"]).contains("--threads"));
    assert!(stderr_of(&["run", "--app", "md", "--iters", "0"]).contains("--iters"));
    // A trace that could not be held is refused before the run, not after it; a model of 10⁹
    // iterations before its plan fills the memory.
    let trace = std::env::temp_dir().join(format!("pbs-cli-{}.trace", std::process::id()));
    let big = ["run", "--app", "md", "--nx", "256", "--ny", "256", "--iters", "100000000", "--trace"];
    let e = stderr_of(&[&big[..], &[trace.to_str().unwrap()]].concat());
    assert!(e.contains("out of memory: a trace's costs"), "{e}");
    assert!(!trace.exists(), "nothing written");
    let e = stderr_of(&["model", "--app", "md", "--record-iters", "100000000", "--threads", "256"]);
    assert!(e.contains("out of memory: a trace's costs") && e.contains("or fewer iterations"), "{e}");
    let e = stderr_of(&["model", "--app", "md", "--iters", "1000000000"]);
    assert!(e.contains("at most 1000000 iterations"), "{e}");
    // Every iteration's records of 10¹¹ iterations: refused at once, where the run used to go
    // on until the memory ran out (2.2 KB an iteration of the 11 schedulers on 4 × 4 boxes).
    for command in [&["run", "--app", "md"][..], &["report"], &["scaling", "--threads", "1", "--oversubscribe"]] {
        let e = stderr_of(&[command, &["--iters", "100000000000"]].concat());
        assert!(
            e.contains("out of memory: every iteration's records for 100000000000 iterations")
                && e.ends_with("run fewer iterations, schedulers or repeats\n"),
            "{command:?}: {e}"
        );
    }
    assert!(stderr_of(&["run", "--app", "stencil", "--nx", "0"]).contains("empty grid"));
    assert!(stderr_of(&["run", "--app", "stencil", "--nz", "0"]).contains("empty grid"));
    for (app, side, boxes) in [("stencil", "65535", "4294836225 boxes"), ("md", "12000", "144000000 boxes")] {
        let err = stderr_of(&["run", "--app", app, "--nx", side, "--ny", side]);
        assert!(err.starts_with("pbs-bench: error: out of memory: ") && err.contains(boxes), "{err}");
    }
    let err = stderr_of(&["run", "--app", "md", "--nx", "65535", "--ny", "65535"]);
    assert!(err.contains("4294836225 boxes, more than the 159072862 its 32-bit particle ids allow"), "{err}");
}

/// `--nz` runs md and the stencil in 3D under every executor, with one checksum per app.
#[test]
fn run_in_3d_runs_every_executor_and_keeps_one_checksum() {
    for app in ["stencil", "md"] {
        let small = ["run", "--app", app, "--nx", "4", "--ny", "3", "--threads", "2", "--iters", "4", "--json"];
        let rows = json(&[&small[..], &["--nz", "3"]].concat());
        let rows = rows.as_array().unwrap();
        let names: Vec<&str> = rows.iter().map(|r| r["scheduler"].as_str().unwrap()).collect();
        assert_eq!(names, pbs_scheduler::runtime::EXECUTORS, "{app}");
        assert!(rows.iter().all(|r| r["checksum"] == rows[0]["checksum"]), "{app}: one checksum under every executor");
        let grid = |r: &serde_json::Value| (r["nx"].as_u64(), r["ny"].as_u64(), r["nz"].as_u64());
        assert!(rows.iter().all(|r| grid(r) == (Some(4), Some(3), Some(3))), "each row names its grid: {}", rows[0]);
        let flat = json(&small);
        assert_ne!(flat[0]["checksum"], rows[0]["checksum"], "{app}: --nz 3 runs another app than one layer");
        assert_eq!(grid(&flat[0]), (Some(4), Some(3), Some(1)));
    }
}

/// An output that cannot be written is refused before the run, whose results would be lost.
#[test]
fn unwritable_outputs_are_refused_before_the_run() {
    let small_run = ["run", "--app", "md", "--iters", "2", "--nx", "8", "--ny", "8", "--scheduler", "static"];
    let with = |extra: &[&'static str]| [&small_run[..], extra].concat();
    for args in [
        with(&["--trace", "/nonexistent/t.trace"]),
        with(&["--timeline", "/nonexistent/t.csv"]),
        with(&["--png", "/nonexistent/t.png"]),
        vec!["model", "--threads", "16", "--numa-nodes", "1", "--boxes-per-thread", "4", "--iters", "2"]
            .into_iter()
            .chain(["--record-iters", "2", "--png", "/nonexistent/m.png"])
            .collect(),
        vec!["peers", "--perlin", "--parts", "4", "--boxes-per-part", "20", "--seeds", "1", "--sequence", "0"]
            .into_iter()
            .chain(["--methods", "rcb", "--repeats", "1", "--png", "/nonexistent/p.png"])
            .collect(),
        vec!["scaling", "--threads", "1", "--iters", "2", "--repeats", "1", "--out", "/proc/pbs-nope"],
    ] {
        let out = bench(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("cannot "), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?} ran first: {}", String::from_utf8_lossy(&out.stdout));
    }
}

#[test]
fn report_writes_tables_plots_and_identical_checksums() {
    let dir = temp_dir("report");
    let out = bench(&[
        "report",
        "--out",
        dir.to_str().unwrap(),
        "--iters",
        "3",
        "--repeats",
        "1",
        "--threads",
        "2",
        "--no-pin",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    for section in ["md · gravity", "md · contraction", "stencil · drift · 32×32", "Cache misses", "modelled"] {
        assert!(md.contains(section), "missing {section}");
    }
    assert_eq!(md.matches("Checksums identical").count(), 4, "{md}");
    assert!(!md.contains("differ"));
    assert!(md.contains("Threads: workers not pinned (`--no-pin`"), "{md}");
    // Run r has seed r (the first seed is 1), as the page says.
    let rows: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    assert!(rows.as_array().unwrap().iter().all(|r| r["seed"] == 1), "{rows}");
    for png in ["iteration_time.png", "busy.png", "owners.png"] {
        assert_eq!(&std::fs::read(dir.join(png)).unwrap()[1..4], b"PNG", "{png}");
    }
    std::fs::remove_dir_all(&dir).ok();
    // In 3D: cubes of about the squares' boxes, the same checksums between schedulers.
    let args = ["report", "--out", dir.to_str().unwrap(), "--iters", "3", "--repeats", "1", "--threads", "2"];
    let out = bench(&[&args[..], &["--no-pin", "--dims", "3"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    for section in
        ["md · gravity · 10×10×10", "md · contraction · 10×10×10", "stencil · drift · 10×10×10", "Cache misses"]
    {
        assert!(md.contains(section), "missing {section}");
    }
    assert_eq!(md.matches("Checksums identical").count(), 4, "{md}");
    assert!(md.contains("(each cube layer by layer, z = 0 at the top left)"), "{md}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn scaling_tables_every_thread_count_with_one_checksum_per_case() {
    let dir = temp_dir("scaling");
    let args = [
        "scaling",
        "--out",
        dir.to_str().unwrap(),
        "--threads",
        "1,2",
        "--iters",
        "4",
        "--repeats",
        "1",
        "--schedulers",
        "ws,pbs,eager,static",
    ];
    // The command's written rows: 3 cases × 2 thread counts.
    let rows_of = |args: &[&str]| -> (std::process::Output, Vec<serde_json::Value>) {
        let out = bench(args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let rows: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("scaling.json")).unwrap()).unwrap();
        let rows = rows.as_array().expect("array").clone();
        assert_eq!(rows.len(), 6, "3 cases × 2 thread counts");
        (out, rows)
    };
    let (out, rows) = rows_of(&args);
    for case in ["md gravity 32×32", "md contraction 32×32", "stencil drift 32×32"] {
        let mine: Vec<&serde_json::Value> = rows.iter().filter(|r| r["case"] == case).collect();
        let threads: Vec<u64> = mine.iter().map(|r| r["threads"].as_u64().unwrap()).collect();
        assert_eq!(threads, vec![1, 2], "{case}");
        assert_eq!(mine[0]["checksum"], mine[1]["checksum"], "{case}: the state must not depend on the thread count");
        // One thread: every box runs where it ran before.
        assert!(mine[0]["affinity"].as_array().unwrap().iter().all(|a| a[1].as_f64() == Some(1.0)), "{case}");
        for r in &mine {
            let ran: Vec<&str> = r["iter_ms"].as_array().unwrap().iter().map(|p| p[0].as_str().unwrap()).collect();
            assert_eq!(ran, ["ws", "pbs", "eager", "static"], "{case}: the schedulers asked for, in that order");
            let means = r["pbs_over_mean"].as_array().unwrap();
            assert_eq!(means.len(), 3, "{case}");
            assert!(means.iter().all(|p| p[1].as_f64().is_some_and(|x| x > 0.0 && x.is_finite())), "{case}: {means:?}");
        }
    }
    let md = std::fs::read_to_string(dir.join("scaling.md")).unwrap();
    assert!(md.contains("Checksums (run 1) identical across thread counts"), "{md}");
    assert!(md.contains("; every worker pinned to its core."), "pinned by default: {md}");
    assert_eq!(&std::fs::read(dir.join("scaling.png")).unwrap()[1..4], b"PNG");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("pbs / static") && text.contains("stencil drift"), "{text}");
    // --dims 3: the cases on cubes (the report's 32×32 as 10×10×10), one checksum per case.
    let (_, rows) = rows_of(&[&args[..], &["--dims", "3"]].concat());
    for case in ["md gravity 10×10×10", "md contraction 10×10×10", "stencil drift 10×10×10"] {
        let mine: Vec<&serde_json::Value> = rows.iter().filter(|r| r["case"] == case).collect();
        assert_eq!(mine.len(), 2, "{case}");
        assert!(mine.iter().all(|r| r["nz"] == 10 && r["checksum"] == mine[0]["checksum"]), "{case}");
    }
    assert!(stderr_of(&[&args[..], &["--dims", "3", "--strong", "65"]].concat()).contains("the side must be 2 to 64"));
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn scaling_refuses_more_threads_than_cores_unless_asked() {
    let cores = std::thread::available_parallelism().unwrap().get();
    let too_many = (cores * 2).to_string();
    let err = stderr_of(&["scaling", "--threads", &too_many, "--iters", "1", "--repeats", "1"]);
    assert!(err.contains(&format!("{too_many} threads on a machine with")) && err.contains("--oversubscribe"), "{err}");
    assert!(stderr_of(&["scaling", "--threads", "0"]).contains("at least 1"));
    assert!(stderr_of(&["scaling", "--threads", "1", "--repeats", "0"]).contains("--iters and --repeats"));
    assert!(stderr_of(&["scaling", "--threads", "1", "--schedulers", "pbs,ws"]).contains("static is missing"));
    assert!(stderr_of(&["report", "--iters", "0"]).contains("--iters and --repeats"));
    assert!(stderr_of(&["report", "--threads", "0"]).contains("--threads must be at least 1"));
    assert!(stderr_of(&["report", "--dims", "4"]).contains("--dims 4: the grids are squares (2) or cubes (3)"));
}

/// `pbs-bench model`'s contract (issue 17): one object per scheduler × threads × NUMA nodes
/// with the named fields; a trace from `run --trace` replays; the calibration prints the
/// measurements beside the model.
#[test]
fn model_prints_its_contract_fields_from_a_recorded_or_given_trace() {
    let rows = json(&[
        "model",
        "--app",
        "md",
        "--threads",
        "4,8",
        "--numa-nodes",
        "1,2",
        "--boxes-per-thread",
        "32",
        "--iters",
        "6",
        "--record-iters",
        "3",
        "--json",
    ]);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2 * 2 * 4, "threads × nodes × schedulers");
    for r in rows {
        for k in [
            "app",
            "scenario",
            "scheduler",
            "threads",
            "numa_nodes",
            "efficiency",
            "iter_ms",
            "rebalance_critical_fraction",
            "remote_fraction",
            "affinity",
        ] {
            assert!(r.get(k).is_some(), "{k} missing in {r}");
        }
        assert!((0.0..=1.0).contains(&r["affinity"].as_f64().unwrap()), "{r}");
        assert_eq!(r["scenario"], "gravity");
        // pbs's row says how its balancer's real time compares with the model's price.
        let ratio = &r["balancer_real_over_law"];
        assert_eq!(r["scheduler"] == "pbs", ratio.as_f64().is_some_and(|x| x > 0.0), "{r}");
        idle_shares_add_up(r);
    }
    // --dims 3 records cubes: md in 3D at 4 and 8 threads × 32 boxes (5³ and 6³ boxes).
    let cubes = json(&[
        "model",
        "--app",
        "md",
        "--dims",
        "3",
        "--threads",
        "4,8",
        "--numa-nodes",
        "1",
        "--boxes-per-thread",
        "32",
        "--iters",
        "4",
        "--record-iters",
        "2",
        "--json",
    ]);
    let grids: std::collections::BTreeSet<_> = cubes
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["threads"].as_u64().unwrap(), [&r["nx"], &r["ny"], &r["nz"]].map(|d| d.as_u64().unwrap())))
        .collect();
    assert_eq!(grids.into_iter().collect::<Vec<_>>(), [(4, [5, 5, 5]), (8, [6, 6, 6])]);
    assert!(stderr_of(&["model", "--dims", "4"]).contains("--dims 4: the grids are squares (2) or cubes (3)"));
    let dir = temp_dir("model");
    let trace = dir.join("md.trace");
    let trace_arg = trace.to_str().unwrap();
    let out = bench(&[
        "run",
        "--app",
        "stencil",
        "--scheduler",
        "static",
        "--threads",
        "1",
        "--iters",
        "3",
        "--nx",
        "8",
        "--ny",
        "8",
        "--trace",
        trace_arg,
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let png = dir.join("model.png");
    let rows = json(&[
        "model",
        "--trace",
        trace_arg,
        "--threads",
        "2,4",
        "--numa-nodes",
        "1,2",
        "--iters",
        "5",
        "--png",
        png.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(rows.as_array().unwrap().len(), 2 * 2 * 4);
    assert_eq!((rows[0]["app"].as_str(), rows[0]["nx"].as_u64()), (Some("stencil"), Some(8)));
    assert_eq!(rows[0]["nz"].as_u64(), Some(1));
    // The cost knobs reach the replay in their units: a balancer at 0.5 ms a box never pays
    // back on 64 boxes where a free one rebalances; a millisecond a thread at each iteration's
    // end or in each phase adds 4 ms to pbs's iteration at 4 threads.
    let pbs_row = |extra: &[&str]| {
        let args = ["model", "--trace", trace_arg, "--threads", "4", "--numa-nodes", "1", "--iters", "5", "--json"];
        let rows = json(&[&args[..], extra].concat());
        rows.as_array().unwrap().iter().find(|r| r["scheduler"] == "pbs").unwrap().clone()
    };
    let (free, dear) = (pbs_row(&["--balancer-ns-per-box", "0"]), pbs_row(&["--balancer-ns-per-box", "500000"]));
    assert!(free["rebalances"].as_u64().unwrap() > 0 && dear["rebalances"] == 0, "{free}\n{dear}");
    let base = pbs_row(&[])["iter_ms"].as_f64().unwrap();
    for knob in ["--iteration-us-per-thread", "--executor-us-per-thread"] {
        let added = pbs_row(&[knob, "1000"])["iter_ms"].as_f64().unwrap() - base;
        assert!((3.9..4.1).contains(&added), "{knob} 1000 added {added} ms");
    }
    let table = stdout_of(&["model", "--trace", trace_arg, "--threads", "4", "--numa-nodes", "1,2", "--iters", "5"]);
    let line = table.lines().find(|l| l.starts_with("pbs's balancer while planning")).unwrap_or_default();
    assert!(line.contains("4 threads on 1 node ") && line.contains("4 threads on 2 nodes "), "{table}");
    // A trace of the stencil in 3D replays on its 3D grid.
    let deep = dir.join("stencil3d.trace");
    let deep_arg = deep.to_str().unwrap();
    let run_3d = ["run", "--app", "stencil", "--scheduler", "static", "--threads", "1", "--iters", "3"];
    let out = bench(&[&run_3d[..], &["--nx", "6", "--ny", "5", "--nz", "4", "--trace", deep_arg]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let deep_rows =
        json(&["model", "--trace", deep_arg, "--threads", "4", "--numa-nodes", "1,2", "--iters", "5", "--json"]);
    let deep_rows = deep_rows.as_array().unwrap();
    assert_eq!(deep_rows.len(), 2 * 4);
    assert!(deep_rows.iter().all(|r| r["nz"].as_u64() == Some(4) && r["efficiency"].as_f64().unwrap() > 0.0));
    // With the remappers, every one of them on a 3D trace.
    let model_3d = ["model", "--trace", deep_arg, "--threads", "4", "--numa-nodes", "1", "--iters", "5"];
    let with_remappers = json(&[&model_3d[..], &["--remappers", "--json"]].concat());
    let names: Vec<&str> =
        with_remappers.as_array().unwrap().iter().map(|r| r["scheduler"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["pbs", "static", "eager", "ws", "rcb", "packsteal", "vector-rcb", "vector-greedy", "norm-greedy", "diffusion"]
    );
    let drawn = std::fs::read(&png).expect("--png writes the picture");
    // Two columns (NUMA node counts) of 480 pixels, four rows of figures of 300.
    assert_eq!(png_size(&drawn), (960, 1200));
    assert!(stderr_of(&["model", "--fit", "--png", png.to_str().unwrap()]).contains("--fit prints the constants"));
    std::fs::remove_file(&png).unwrap();
    let cal = json(&["model", "--calibration", "--json", "--png", png.to_str().unwrap()]);
    let drawn = std::fs::read(&png).expect("--calibration --png draws the check");
    // Three panels (ratios, efficiency, affinity) of 480 × 480 pixels.
    assert_eq!(png_size(&drawn), (1440, 480));
    let cal = cal.as_array().unwrap();
    assert_eq!(cal.len(), 96 + 45, "24 measurements × 4 figures, and 15 × 3 affinities");
    for r in cal {
        for k in [
            "source",
            "app",
            "threads",
            "scheduler",
            "fitted",
            "measured_efficiency",
            "modelled_efficiency",
            "measured_affinity",
            "modelled_affinity",
        ] {
            assert!(r.get(k).is_some(), "{k} missing in {r}");
        }
    }
    assert_eq!(cal.iter().filter(|r| r["measured_affinity"].is_f64()).count(), 45);
    assert!(cal.iter().any(|r| r["fitted"] == false), "a measurement the fit did not use");
    assert!(stderr_of(&["model", "--rebalancing", "sometimes"]).contains("overlap, idle, thread, lend or stop"));
    assert!(stderr_of(&["model", "--trace", "/nonexistent.trace"]).contains("cannot read trace"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn peers_prints_every_method_on_the_same_maps_including_metis() {
    let dir = temp_dir("peers");
    let map = dir.join("blob.csv");
    let grid = pbs::Grid::new(40, 30).unwrap();
    let loads: Vec<f64> = (0..grid.len()).map(|k| 1.0 + (k % 11) as f64).collect();
    std::fs::write(&map, pbs::loadmap::to_csv(&grid, &loads)).unwrap();
    let args = ["peers", "--maps", dir.to_str().unwrap(), "--parts", "8,12", "--sequence", "2", "--repeats", "1"];
    let v = json(&[&args[..], &["--json"]].concat());
    let rows = v["partitions"].as_array().unwrap();
    assert_eq!(rows.len(), 2 * pbs_peers::NAMES.len());
    for r in rows {
        let skipped = r["skipped"].as_str();
        // METIS is installed by scripts/test.sh: a build without it must not pass unnoticed.
        if r["method"] == "coupe-rcb" && r["parts"] == 12 {
            assert!(skipped.unwrap().contains("power of two"));
            continue;
        }
        assert!(skipped.is_none(), "{r}");
        for key in [
            "max_avg",
            "lower_bound",
            "edge_cut",
            "loaded_edge_cut",
            "disconnected_parts",
            "empty_parts",
            "to_bound",
            "cut_to_best",
            "loaded_cut_to_best",
            "time_ms",
        ] {
            assert!(r[key].is_number(), "{key} in {r}");
        }
    }
    let seq = v["sequences"].as_array().unwrap();
    // With --maps, the maps rolled a column a step: the one map at two part counts.
    assert_eq!(seq.len(), 2 * pbs_peers::NAMES.len());
    assert!(seq.iter().all(|r| r["sequence"] == "roll" && r["map"] == "blob"), "{seq:?}");
    assert!(seq.iter().filter(|r| r["method"] == "pbs").all(|r| r["warm"] == true));
    let measures = [
        "migrations_per_step",
        "to_bound_median",
        "to_bound_max",
        "cut_median",
        "loaded_cut_median",
        "split_steps",
        "time_ms",
        "time_ms_mean",
    ];
    for r in seq {
        let ran = r["skipped"].is_null();
        // A method that did not run shows no figures, rather than zeros that read as the best.
        assert_eq!(ran, !(r["method"] == "coupe-rcb" && r["parts"] == 12), "{r}");
        for key in measures {
            assert_eq!(r[key].is_number(), ran, "{key} in {r}");
        }
    }
    let png = dir.join("parts.png");
    let out = bench(&[&args[..], &["--png", png.to_str().unwrap()]].concat());
    assert!(out.status.success() && std::fs::read(&png).unwrap().starts_with(b"\x89PNG"));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("≤1.01×bound") && text.contains("moved/step"), "{text}");
    let e = stderr_of(&["peers", "--methods", "zoltan"]);
    assert!(e.contains("unknown partitioner") && e.contains("metis-kway"), "{e}");
    // Cubes: every method on a Perlin cube but coupe's Hilbert curve, which says it is 2D only;
    // the first layer drawn.
    let cube = [
        "peers",
        "--dims",
        "3",
        "--parts",
        "8",
        "--boxes-per-part",
        "40",
        "--seeds",
        "1",
        "--sequence",
        "1",
        "--repeats",
        "1",
    ];
    let v = json(&[&cube[..], &["--json"]].concat());
    let rows = v["partitions"].as_array().unwrap();
    assert_eq!(rows.len(), pbs_peers::NAMES.len());
    for r in rows {
        assert_eq!(r["grid"], "7x7x7");
        assert_eq!(r["skipped"].is_null(), r["method"] != "coupe-hilbert", "{r}");
    }
    assert!(v["sequences"].as_array().unwrap().iter().all(|r| r["grid"] == "13x13x13"));
    let out = bench(&[&cube[..], &["--png", png.to_str().unwrap()]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stderr_of(&["peers", "--dims", "3", "--dense"]).contains("--dims 3 with --dense: the dense maps are 2D"));
    // Each bad value alone, beside a small run that ends at once should the value get through.
    let small =
        [("--parts", "4"), ("--boxes-per-part", "20"), ("--seeds", "1"), ("--sequence", "0"), ("--repeats", "1")];
    let with = |flag: &'static str, value: &'static str| {
        let mut args = vec!["peers", "--perlin", "--methods", "rcb,pbs", flag, value];
        args.extend(small.iter().filter(|p| p.0 != flag).flat_map(|&(f, v)| [f, v]));
        args
    };
    for (flag, value, said) in [
        ("--parts", "0", "--parts and --boxes-per-part must be at least 1"),
        ("--boxes-per-part", "0", "--parts and --boxes-per-part must be at least 1"),
        ("--repeats", "0", "--repeats and --seeds must be at least 1"),
        ("--seeds", "0", "--repeats and --seeds must be at least 1"),
        ("--pbs-tol", "-1", "--pbs-tol must be finite and ≥ 0"),
        ("--pbs-tol", "inf", "--pbs-tol must be finite and ≥ 0"),
        ("--pbs-tol", "NaN", "--pbs-tol must be finite and ≥ 0"),
        ("--drift", "0", "--drift must be a number of boxes above 0 and at most 1000"),
        ("--drift", "-0.5", "--drift must be a number of boxes above 0 and at most 1000"),
        ("--drift", "inf", "--drift must be a number of boxes above 0 and at most 1000"),
        ("--drift", "1e9", "--drift must be a number of boxes above 0 and at most 1000"),
    ] {
        let e = stderr_of(&with(flag, value));
        assert!(e.contains(said), "{flag} {value}: {e}");
    }
    assert!(json(&[&with("--pbs-tol", "0.5")[..], &["--json"]].concat())["partitions"].is_array());
    let e = stderr_of(&["peers", "--sequence", "1000000000"]);
    assert!(e.contains("--sequence 1000000000: at most 1000000 steps"), "{e}");
    for (side, said) in [("8", "a 8×8 map has 64 boxes, under 20 a part at 4 parts"), ("0", "has 0 boxes")] {
        let e = stderr_of(&["peers", "--perlin", "--parts", "4", "--sequence", "1", "--sequence-side", side]);
        assert!(e.contains(&format!("--sequence-side {side}: ")) && e.contains(said), "{e}");
    }
    let e = stderr_of(&["peers", "--maps", dir.to_str().unwrap(), "--parts", "100"]);
    assert!(e.contains("no map has at least 20 boxes per part"), "{e}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// Output piped into a reader that has gone (`| head` after its lines): the program ends
/// quietly, by SIGPIPE as C tools do. Before, the next print panicked ("failed printing to stdout:
/// Broken pipe") with its message on standard error.
#[test]
fn a_closed_output_pipe_ends_the_program_quietly() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_pbs-bench"))
        .args(["converge", "--case", "all", "--method", "all", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The read end is closed before the run prints anything (it balances for a second first).
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.status.success() || out.status.signal() == Some(13), "{:?}: {stderr}", out.status);
}
