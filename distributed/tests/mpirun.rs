//! pbs-mpi under `mpirun`: the shared-memory checksum on 1–4 ranks × 1–2 threads, and failures
//! that end the job with their message (never a hang). Oversubscribed on small machines, which
//! is fine for correctness.

use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use pbs_scheduler::executors::StaticBlocks;
use pbs_scheduler::report::Recorder;

/// `mpirun -np ranks pbs-mpi run args…`, killed after two minutes.
fn mpirun(ranks: usize, args: &[&str], env: &[(&str, &str)]) -> (Output, Duration) {
    mpirun_command(ranks, "run", args, env)
}

fn mpirun_command(ranks: usize, command: &str, args: &[&str], env: &[(&str, &str)]) -> (Output, Duration) {
    mpirun_bound("none", ranks, command, args, env)
}

/// [`mpirun_command`] with each rank bound as `--bind-to bind` says, and its Open MPI session
/// directory under a base of its own: the tests run in parallel, and two `mpirun` creating and
/// removing the shared `/tmp/ompi.HOST.UID` at once failed one of them ("A call to mkdir was
/// unable to create the desired directory ... File exists", a clean CI run on 2026-12-02).
fn mpirun_bound(bind: &str, ranks: usize, command: &str, args: &[&str], env: &[(&str, &str)]) -> (Output, Duration) {
    static LAUNCHES: AtomicUsize = AtomicUsize::new(0);
    // Short, under the system's temporary directory: Open MPI puts its sockets there.
    let base = std::env::temp_dir().join(format!(
        "pbs-ompi-{}-{}",
        std::process::id(),
        LAUNCHES.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&base).expect("a session directory base for mpirun");
    let mut cmd = Command::new("mpirun");
    cmd.env("OMPI_MCA_orte_tmpdir_base", &base);
    cmd.args(["--oversubscribe", "--bind-to", bind, "-np", &ranks.to_string()]);
    for (k, _) in env {
        cmd.args(["-x", k]);
    }
    cmd.args(["timeout", "120", env!("CARGO_BIN_EXE_pbs-mpi"), command]).args(args);
    // Open MPI refuses root without these (CI containers run as root).
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1").env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    cmd.envs(env.iter().copied());
    let start = Instant::now();
    let out = cmd.output().expect("mpirun runs (Open MPI: apt install openmpi-bin libopenmpi-dev)");
    let took = start.elapsed();
    let _ = std::fs::remove_dir_all(&base);
    (out, took)
}

fn shared_memory_checksum(app: &str, scenario: &str, iters: usize) -> String {
    shared_memory_checksum_on(app, scenario, iters, [32, 32, 1])
}

fn shared_memory_checksum_on(app: &str, scenario: &str, iters: usize, [nx, ny, nz]: [usize; 3]) -> String {
    let mut app = pbs_apps::build_3d(app, scenario, nx, ny, nz, 1).unwrap();
    let mut exec = StaticBlocks::new(app.grid().len(), 1).unwrap();
    let mut rec = Recorder::new("static", 1);
    for _ in 0..iters {
        app.iterate(&mut exec, &mut rec, None);
    }
    format!("{:016x}", app.checksum())
}

#[test]
fn every_rank_and_thread_count_gives_the_shared_memory_checksum() {
    let flat = [32, 32, 1];
    for (app, scenario, balance, dims, executor) in [
        ("md", "gravity", "pbs", flat, "pbs"),
        ("stencil", "drift", "pbs", flat, "pbs"),
        ("md", "contraction", "rcb", flat, "pbs"),
        ("md", "expansion", "diffusion", flat, "pbs"),
        ("md-split", "contraction", "pbs", flat, "pbs"),
        // The stencil in 3D: ranks meet across faces, edges and corners of layers.
        ("stencil", "drift", "pbs", [12, 10, 6], "pbs"),
        ("stencil", "rough", "diffusion", [9, 7, 5], "pbs"),
        // md in 3D: particles and leave lists cross faces, edges and corners of layers.
        ("md", "contraction", "pbs", [7, 6, 5], "pbs"),
        ("md-split", "gravity", "rcb", [6, 5, 5], "pbs"),
        // NoRCB inside each rank, on its window's motion hints in 3D.
        ("md", "gravity", "rcb", [6, 6, 4], "norcb"),
    ] {
        let expected = shared_memory_checksum_on(app, scenario, 30, dims);
        let all = (dims[0] * dims[1] * dims[2]) as u64;
        let [nx, ny, nz] = dims.map(|d| d.to_string());
        for ranks in 1..=4 {
            for threads in ["1", "2"] {
                let args = [
                    "--app",
                    app,
                    "--scenario",
                    scenario,
                    "--threads",
                    threads,
                    "--iters",
                    "30",
                    "--balance",
                    balance,
                    "--nx",
                    &nx,
                    "--ny",
                    &ny,
                    "--nz",
                    &nz,
                    "--executor",
                    executor,
                    "--json",
                ];
                let (out, _) = mpirun(ranks, &args, &[]);
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert!(out.status.success(), "{app} under {executor} on {ranks} ranks × {threads}: {stderr}");
                let v: serde_json::Value =
                    serde_json::from_slice(&out.stdout).expect("one JSON object, from rank 0 alone");
                let case = format!("{app} {scenario} {dims:?} under {executor} on {ranks} ranks × {threads}");
                assert_eq!(v["checksum"], expected.as_str(), "{case}");
                assert_eq!(v["executor"], executor, "{case}");
                assert_eq!(v["nz"], dims[2]);
                assert_eq!(v["ranks"], ranks);
                assert_eq!(v["threads"], threads.parse::<usize>().unwrap());
                assert_eq!(v["per_rank"].as_array().unwrap().len(), ranks);
                let boxes: u64 = v["per_rank"].as_array().unwrap().iter().map(|r| r["boxes"].as_u64().unwrap()).sum();
                assert_eq!(boxes, all, "every box owned once at the end");
                // Each rank's executor spans its window: its boxes and their halo, within the grid.
                let windows: Vec<u64> =
                    v["per_rank"].as_array().unwrap().iter().map(|r| r["window_boxes"].as_u64().unwrap()).collect();
                for (r, w) in v["per_rank"].as_array().unwrap().iter().zip(&windows) {
                    assert!(r["boxes"].as_u64().unwrap() <= *w && *w <= all, "{r}");
                }
                // (A window is a bounding box: on these small 3D grids an oblique cut between
                // two ranks can leave both windows the whole grid.)
                if ranks > 1 && dims[2] == 1 {
                    assert!(windows.iter().sum::<u64>() < ranks as u64 * all, "every window is the grid: {windows:?}");
                }
                if ranks > 1 {
                    assert!(v["halo_bytes_per_iter"].as_f64().unwrap() > 0.0);
                }
                // Bytes sent to new owners in the exchanges = the packed sizes of the boxes
                // whose owner changed, counted on rank 0 at each rebalancing.
                let per: u64 = v["rebalancing_bytes"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap()).sum();
                assert_eq!(per, v["migrated_bytes"].as_u64().unwrap(), "{app} on {ranks} ranks × {threads}");
                for per_rebalancing in ["rebalancing_bytes", "migration_bound_bytes"] {
                    assert_eq!(
                        v[per_rebalancing].as_array().unwrap().len(),
                        v["rebalancings"].as_u64().unwrap() as usize,
                        "{per_rebalancing}"
                    );
                }
            }
        }
    }
}

/// The figures a run prints hold together. md's gravity on 2 ranks in static slabs: the
/// ranks' measured loads differ (one slab holds more of the fallen particles: 1.26–1.89 × the
/// mean an iteration, median 1.30–1.35, on this 2-core VM), every iteration's ratio is a
/// max / mean (at least 1); a rank's compute phase and rank 0's exchange are parts of its
/// iteration, so their medians are at most the iteration's (and, in milliseconds, not
/// vanishingly small), and the iterations fit in the job's wall time; static moves nothing and
/// sends halos. The loads are wall times on cores the ranks share with the other tests'
/// ranks: a rank that loses its core for the run measures as slow as the loaded one (one CI
/// run read 1.07, and 1 of 8 runs alone 1.015), so the loads must differ in one of three runs;
/// every other figure holds in each.
#[test]
fn a_runs_figures_hold_together() {
    let iters = 20;
    let n = iters.to_string();
    let args =
        ["--app", "md", "--scenario", "gravity", "--threads", "1", "--iters", &n, "--balance", "static", "--json"];
    let mut imbalances = Vec::new();
    for _ in 0..3 {
        let (out, took) = mpirun(2, &args, &[]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let f = |key: &str| v[key].as_f64().unwrap_or_else(|| panic!("{key} in {v}"));
        let series: Vec<f64> =
            v["imbalance_ranks_series"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        assert_eq!(series.len(), iters);
        assert!(series.iter().all(|&x| x.is_finite() && x >= 1.0), "{series:?}");
        let (iter_ms, exchange_ms) = (f("iter_ms_median"), f("exchange_ms_median"));
        let compute_ms: Vec<f64> =
            v["per_rank"].as_array().unwrap().iter().map(|r| r["compute_ms_median"].as_f64().unwrap()).collect();
        assert!(compute_ms.iter().all(|&c| c > 0.0) && compute_ms[0] <= iter_ms, "{compute_ms:?} against {iter_ms} ms");
        // A rank's 512 boxes of md take more than a microsecond (0.1–0.3 ms measured), an
        // exchange through MPI more than 0.1 µs. (Not a share of the iteration: with another job
        // on the cores, a rank that waits in MPI lost its core for 16 ms at times.)
        assert!(compute_ms.iter().all(|&c| c > 1e-3), "{compute_ms:?}");
        assert!(1e-4 < exchange_ms && exchange_ms <= iter_ms, "{exchange_ms} ms against {iter_ms} ms");
        assert!(iter_ms * iters as f64 <= took.as_secs_f64() * 1e3, "{iter_ms} ms × {iters} in {took:?}");
        assert_eq!(
            (v["migrated_bytes"].as_u64(), v["migrated_boxes"].as_u64(), v["rebalancings"].as_u64()),
            (Some(0), Some(0), Some(0))
        );
        assert!(f("halo_bytes_per_iter") > 0.0, "{v}");
        let imbalance = f("imbalance_ranks");
        imbalances.push(imbalance);
        // A margin under the 1.30–1.35 measured.
        if imbalance > 1.1 {
            return;
        }
    }
    panic!("the slabs' loads read alike in three runs: imbalance across ranks {imbalances:?}");
}

/// Each rank reports how often its executor rebalanced its threads (`thread_rebalancings`):
/// with pbs inside asked after every iteration (`PBS_CRITERION=always`) on the stencil whose
/// cost map is drawn anew every 10 iterations (`rough`), every rank at least once in 60
/// iterations (2–7 a rank in 12 runs, 2026-12-07); static blocks and a single thread never. On
/// the drifting map a rank's threads could stay within the tolerance for the whole run (a rank
/// with none in 1 of 16 runs), which failed this test now and then.
#[test]
fn each_rank_reports_its_threads_rebalancings() {
    let per_rank = |executor: &str, threads: &str| -> Vec<u64> {
        let args = [
            "--app",
            "stencil",
            "--scenario",
            "rough",
            "--threads",
            threads,
            "--iters",
            "60",
            "--executor",
            executor,
            "--json",
        ];
        let (out, _) = mpirun(2, &args, &[("PBS_CRITERION", "always")]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["per_rank"].as_array().unwrap().iter().map(|r| r["thread_rebalancings"].as_u64().unwrap()).collect()
    };
    let pbs = per_rank("pbs", "2");
    assert!(pbs.len() == 2 && pbs.iter().all(|&n| n >= 1), "{pbs:?}");
    assert_eq!(per_rank("static", "2"), [0, 0]);
    assert_eq!(per_rank("pbs", "1"), [0, 0]);
}

#[test]
fn compare_runs_every_balance_in_one_job_with_one_checksum() {
    let args = ["--app", "stencil", "--iters", "12", "--repeats", "2", "--balance", "static,pbs", "--json"];
    let (out, _) = mpirun_command(3, "compare", &args, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let runs: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let balances: Vec<&str> = runs.iter().map(|r| r["balance"].as_str().unwrap()).collect();
    assert_eq!(balances, ["static", "pbs", "static", "pbs"], "rounds of every balance in turn");
    let expected = shared_memory_checksum("stencil", "drift", 12);
    assert!(runs.iter().all(|r| r["checksum"] == expected.as_str()));
}

/// Without `--json`, rank 0 prints the tables (`pbs_mpi::text`, whose lines its unit tests
/// read): a row per rank and the shared-memory checksum; for `compare`, a row per balance.
#[test]
fn without_json_rank_0_prints_the_tables() {
    let expected = shared_memory_checksum("stencil", "drift", 6);
    let (out, _) = mpirun(2, &["--app", "stencil", "--iters", "6"], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.starts_with("stencil drift on 32×32 boxes, 2 ranks × 1 threads, balance pbs"), "{text}");
    assert_eq!(text.lines().filter(|l| l.starts_with("rank ")).count(), 1, "one header: {text}");
    assert!(text.ends_with(&format!("checksum {expected}\n")), "{text}");
    let args = ["--app", "stencil", "--iters", "6", "--repeats", "1", "--balance", "static,rcb"];
    let (out, _) = mpirun_command(2, "compare", &args, &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("static ") || l.starts_with("rcb ")).collect();
    assert!(rows.len() == 2 && rows.iter().all(|r| r.ends_with(" same")), "{text}");
    assert!(text.ends_with(&format!("checksum {expected} (every run's state gathered on rank 0)\n")), "{text}");
}

/// A criterion that asks after every iteration rebalances during the run, but not after its
/// last iteration, whose new owners no iteration would use (before: RCB moved boxes there).
/// Its moves are counted.
#[test]
fn nothing_is_rebalanced_after_the_last_iteration() {
    let iters = 8u64;
    let n = iters.to_string();
    let args = ["--app", "md", "--iters", &n, "--balance", "rcb", "--criterion", "always", "--json"];
    let (out, _) = mpirun(2, &args, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let at: Vec<u64> = v["rebalancing_iterations"].as_array().unwrap().iter().map(|i| i.as_u64().unwrap()).collect();
    assert!(!at.is_empty() && at.iter().all(|&i| i + 1 < iters), "{at:?}");
    // Each rebalancing moved boxes (one that moves none is not counted), each at most once.
    let boxes = v["migrated_boxes"].as_u64().unwrap();
    assert!(at.len() as u64 <= boxes && boxes <= at.len() as u64 * 32 * 32, "{boxes} boxes in {at:?}");
    assert_eq!(v["imbalance_ranks_series"].as_array().unwrap().len(), iters as usize, "the last one measured");
}

#[test]
fn a_rank_that_panics_or_exits_ends_the_job_with_its_message() {
    for (how, said) in [("1:3", "fault injected by PBS_MPI_FAIL"), ("2:5:exit", "exiting at iteration 5")] {
        let (out, took) = mpirun(3, &["--app", "md", "--iters", "50"], &[("PBS_MPI_FAIL", how)]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{how}: {stderr}");
        assert!(stderr.contains(said), "{how}: {stderr}");
        assert!(took < Duration::from_secs(100), "{how}: the job ended by itself, not by the timeout ({took:?})");
    }
}

#[test]
fn bad_sizes_are_one_clear_error_from_rank_0() {
    for (ranks, args, said) in [
        (3, vec!["--app", "md", "--nx", "1", "--ny", "2"], "3 ranks for 2 boxes"),
        (2, vec!["--app", "md", "--threads", "0"], "--threads 0"),
        (2, vec!["--app", "md", "--threads", "100000"], "100000 threads: a pool takes at most 4096"),
        (2, vec!["--app", "heat"], "md, md-split and stencil"),
        (2, vec!["--app", "md", "--balance", "metis"], "pbs, pbs-cells, rcb, diffusion, static"),
        (2, vec!["--app", "md", "--criterion", "sometimes"], "unknown criterion"),
        // 31 GB of md's per-box headers (and 258 GB of particles): more than any machine this
        // runs on.
        (2, vec!["--app", "md", "--nx", "12000", "--ny", "12000"], "out of memory: md particles for 144000000 boxes"),
        (
            2,
            vec!["--app", "md", "--nx", "65535", "--ny", "65535"],
            "more than the 159072862 its 32-bit particle ids allow",
        ),
    ] {
        let (out, _) = mpirun(ranks, &args, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(stderr.matches(said).count(), 1, "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// What the parser refuses ends every rank with status 2 and one message, from rank 0 (three
/// ranks, so that a message from every rank but one would show); `compare` with no rounds or
/// an unknown balance is a value refused with status 1, before anything runs.
#[test]
fn a_refused_command_line_is_one_message_from_rank_0() {
    let (out, _) = mpirun(3, &["--app", "md", "--threads", "two"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.matches("invalid value 'two' for '--threads").count(), 1, "{stderr}");
    let (out, _) = mpirun_command(3, "compare", &["--app", "md", "--repeats", "0"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.matches("--repeats 0 or no --balance: nothing to compare").count(), 1, "{stderr}");
    // Every balance is checked before the first run starts: none runs, no job is aborted.
    let (out, _) = mpirun_command(3, "compare", &["--app", "md", "--balance", "static,metis"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.matches("pbs, pbs-cells, rcb, diffusion, static").count(), 1, "{stderr}");
    assert!(!stderr.contains("aborting") && out.stdout.is_empty(), "{stderr}");
    // --version and --help: printed once, and the job ends well (it exited 2, which mpirun
    // reported as a failed job).
    for (flag, printed) in [
        ("--version", concat!("pbs-mpi ", env!("CARGO_PKG_VERSION"))),
        ("--help", "pbs across MPI ranks, threads inside each"),
    ] {
        let (out, _) = mpirun_command(3, flag, &[], &[]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{flag}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(stdout.matches(printed).count(), 1, "{flag}: {stdout}");
    }
    // `run --help` names every balance and every criterion (it had lost `boulmier-eq24` when
    // that criterion was added).
    let (out, _) = mpirun_command(1, "run", &["--help"], &[]);
    let help = String::from_utf8_lossy(&out.stdout).split_whitespace().collect::<Vec<_>>().join(" ");
    let named = |name: &str| [" ", ",", ")"].iter().any(|after| help.contains(&format!("{name}{after}")));
    for name in pbs_mpi::ranks::BALANCES.iter().chain(&pbs_scheduler::criteria::NAMES) {
        // A criterion with a value (`procassini:RHO`) is named with it.
        assert!(named(name), "{name}: {help}");
    }
}

/// A rank that mpirun binds to one core while it runs two threads is named (its threads share
/// that core whatever cores the host has), and counts as oversubscribed; unbound, it is not.
#[test]
fn a_rank_bound_to_fewer_cpus_than_its_threads_is_named() {
    if pbs_scheduler::pinning::process_cpus().is_none_or(|c| c.len() < 2) {
        eprintln!("skipped: this process may run on fewer than 2 CPUs");
        return;
    }
    let args = ["--app", "md", "--threads", "2", "--iters", "5", "--json"];
    for (bind, short) in [("core", vec![0u64]), ("none", vec![])] {
        let (out, _) = mpirun_bound(bind, 1, "run", &args, &[]);
        assert!(out.status.success(), "--bind-to {bind}: {}", String::from_utf8_lossy(&out.stderr));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let named: Vec<u64> =
            json["ranks_short_of_cpus"].as_array().unwrap().iter().map(|r| r.as_u64().unwrap()).collect();
        assert_eq!(named, short, "--bind-to {bind}");
        if bind == "core" {
            assert_eq!(json["oversubscribed"], serde_json::Value::Bool(true));
        }
    }
}

/// Ranks that the launcher gave CPUs of their own (bound to a core each, or one rank on the
/// node) pin their threads there by default, as `OMP_PROC_BIND` does inside a bound rank; ranks
/// sharing CPUs do not, unless asked; the state is the same either way.
#[test]
fn ranks_bound_by_the_launcher_pin_their_threads_there() {
    if pbs_scheduler::pinning::process_cpus().is_none_or(|c| c.len() < 2) {
        eprintln!("skipped: this process may run on fewer than 2 CPUs");
        return;
    }
    let mut checksums = Vec::new();
    for (bind, ranks, pin, pinned) in [
        ("core", 2, "auto", vec![0u64, 1]),
        ("none", 2, "auto", vec![]),
        ("none", 1, "auto", vec![0]),
        ("core", 2, "off", vec![]),
        ("none", 2, "on", vec![0, 1]),
    ] {
        let args = ["--app", "md", "--threads", "2", "--iters", "20", "--pin", pin, "--json"];
        let (out, _) = mpirun_bound(bind, ranks, "run", &args, &[]);
        let case = format!("-np {ranks} --bind-to {bind} --pin {pin}");
        assert!(out.status.success(), "{case}: {}", String::from_utf8_lossy(&out.stderr));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let listed: Vec<u64> = json["pinned_ranks"].as_array().unwrap().iter().map(|r| r.as_u64().unwrap()).collect();
        assert_eq!(listed, pinned, "{case}");
        checksums.push(json["checksum"].as_str().unwrap().to_string());
    }
    assert!(checksums.windows(2).all(|w| w[0] == w[1]), "{checksums:?}");
    assert_eq!(checksums[0], shared_memory_checksum("md", "gravity", 20));
}
