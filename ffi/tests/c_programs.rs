//! The C side of the interface, compiled and run: the examples of `ffi/examples/` against
//! `pbs.h` and the library this build made, with the C compiler Rust links with (`cc`, or
//! `$CC`). Their outputs are checked against the Rust crates' results.

use std::collections::BTreeSet;
use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use pbs::refine::RefineSettings;
use pbs::{methods, rebalance, Grid, Problem, StopRule};
use pbs_ffi::{IterationEnd, Outcome, PhaseStats, Status};

const MANIFEST: &str = env!("CARGO_MANIFEST_DIR");

/// Where cargo put `libpbs_ffi.so` for this build: beside this test's executable.
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap().to_path_buf();
    assert!(deps.join("libpbs_ffi.so").exists(), "no libpbs_ffi.so in {}", deps.display());
    deps
}

/// Compiles `source` (warnings are errors) against pbs.h and libpbs_ffi.so.
fn compile(source: &Path, name: &str) -> PathBuf {
    compile_with(source, name, &[])
}

/// [`compile`] with more compiler flags (`-fopenmp`), after the source (libraries, `-ltbb`).
fn compile_with(source: &Path, name: &str, flags: &[&str]) -> PathBuf {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    compile_by(&cc, "-std=c11", source, name, flags)
}

/// `source` compiled by `compiler` in `standard`, warnings are errors, against pbs.h and
/// libpbs_ffi.so.
fn compile_by(compiler: &str, standard: &str, source: &Path, name: &str, flags: &[&str]) -> PathBuf {
    let mut c = Command::new(compiler);
    c.args([standard, "-O2", "-Wall", "-Wextra", "-Werror", "-pedantic"])
        .arg(format!("-I{MANIFEST}/include"))
        .arg(source)
        .args(flags);
    linked(c, name, &source.display().to_string())
}

/// Runs the compiler command `c` (sources and flags given) with libpbs_ffi.so linked in
/// (`-lm` too) and found at run time through the rpath, into `name` under the test's
/// folder; panics with the compiler's messages about `what` if it fails.
fn linked(mut c: Command, name: &str, what: &str) -> PathBuf {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let lib = library_dir();
    let compiler = c.get_program().to_string_lossy().into_owned();
    let result = c
        .arg("-L")
        .arg(&lib)
        .args(["-lpbs_ffi", "-lm"])
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the compiler {compiler:?} ({e}): install it (scripts/test.sh does)"));
    assert!(
        result.status.success(),
        "{what} did not compile with {compiler}:\n{}",
        String::from_utf8_lossy(&result.stderr)
    );
    out
}

/// `program` to run against this build's library: cargo's LD_LIBRARY_PATH, which outranks the
/// rpath, may name a `target/debug/libpbs_ffi.so` left by an older build.
fn command(program: &Path) -> Command {
    let mut c = Command::new(program);
    c.env("LD_LIBRARY_PATH", library_dir());
    c
}

fn run(program: &Path, args: &[&str]) -> Output {
    command(program).args(args).output().unwrap()
}

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "exit {:?}: {}", o.status.code(), String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// The value of `key=` in a line of `key=value` pairs.
fn field<'a>(line: &'a str, key: &str) -> &'a str {
    let start = line.find(&format!("{key}=")).unwrap_or_else(|| panic!("no {key} in {line:?}")) + key.len() + 1;
    line[start..].split(' ').next().unwrap()
}

/// The layout of pbs.h's enum and structs as the Rust side has it, in the lines
/// `tests/abi_probe.c` prints (and `tests/fortran_api.f90`, for the Fortran module's types):
/// `pbs_status SIZE VALUE...`, `pbs_pin OFF WORKERS WORKERS_AND_CALLER` (the values
/// `Pinning::from_c` reads), `STRUCT SIZE`, `STRUCT.FIELD OFFSET SIZE`.
fn rust_layout() -> Vec<String> {
    use pbs_scheduler::pinning::Pinning;
    let pin = |p: Pinning| (0..8).find(|&c| Pinning::from_c(c) == Some(p)).expect("a C value for each pinning");
    let mut want = vec![
        format!(
            "pbs_status {} {} {} {} {} {} {} {} {}",
            size_of::<Status>(),
            Status::Ok as i32,
            Status::InvalidArgument as i32,
            Status::NullPointer as i32,
            Status::Unsupported as i32,
            Status::InternalError as i32,
            Status::TaskFailed as i32,
            Status::Busy as i32,
            Status::OutOfResources as i32
        ),
        format!("pbs_pin {} {} {}", pin(Pinning::Off), pin(Pinning::Workers), pin(Pinning::WorkersAndCaller)),
        format!("pbs_outcome {}", size_of::<Outcome>()),
    ];
    macro_rules! fields {
        ($c:literal, $t:ty, $($f:ident),*) => {
            $(want.push(format!("{}.{} {} {}", $c, stringify!($f), offset_of!($t, $f), {
                let v = <$t>::default();
                std::mem::size_of_val(&v.$f)
            }));)*
        };
    }
    fields!(
        "pbs_outcome",
        Outcome,
        steps,
        converged,
        max_avg,
        lower_bound,
        dol_max,
        dol_min,
        edge_cut,
        migrations,
        elapsed_ms
    );
    want.push(format!("pbs_phase_stats {}", size_of::<PhaseStats>()));
    fields!("pbs_phase_stats", PhaseStats, wall_ms, efficiency, affinity);
    want.push(format!("pbs_iteration_end {}", size_of::<IterationEnd>()));
    fields!("pbs_iteration_end", IterationEnd, rebalanced, rebalance_ms, migrations, max_avg);
    want
}

/// The functions the library exports (`#[no_mangle]` in `src/`).
fn exported_functions() -> BTreeSet<String> {
    let mut exported = BTreeSet::new();
    for file in ["status.rs", "partitioner.rs", "executor.rs", "mapper.rs", "tiling.rs", "version.rs"] {
        let src = std::fs::read_to_string(Path::new(MANIFEST).join("src").join(file)).unwrap();
        let mut lines = src.lines();
        while let Some(l) = lines.next() {
            if l.trim() == "#[no_mangle]" {
                let sig = lines.next().unwrap();
                let name = sig.split("fn ").nth(1).unwrap().split('(').next().unwrap();
                exported.insert(name.to_string());
            }
        }
    }
    exported
}

#[test]
fn the_header_matches_the_library_layout_and_symbols() {
    let probe = compile(&Path::new(MANIFEST).join("tests/abi_probe.c"), "abi_probe");
    let text = stdout(&run(&probe, &[]));
    for w in &rust_layout() {
        assert!(text.lines().any(|l| l == w), "C and Rust disagree: want {w:?} in\n{text}");
    }

    // Every function the Rust side exports is declared in the header, and the other way round
    // (the probe above links against each declared one).
    let header = std::fs::read_to_string(Path::new(MANIFEST).join("include/pbs.h")).unwrap();
    let declared: BTreeSet<String> = header
        .lines()
        .filter(|l| !l.trim_start().starts_with('/') && !l.trim_start().starts_with('*'))
        .flat_map(|l| {
            l.split('(')
                .rev()
                .skip(1)
                .map(|before| before.rsplit(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap())
        })
        .filter(|name| name.starts_with("pbs_"))
        .map(str::to_string)
        .collect();
    let exported = exported_functions();
    assert_eq!(declared, exported);
    assert!(text.contains(&format!("functions {}", exported.len())), "the probe must take every function: {text}");
    let version = env!("CARGO_PKG_VERSION");
    assert!(text.contains(&format!("\nversion {version} {version}\n")), "the library and header are {version}: {text}");
}

fn hot_spot(grid: &Grid, cx: f64, cy: f64) -> Vec<f64> {
    (0..grid.len())
        .map(|k| {
            let c = grid.centre(k);
            let (dx, dy) = (c[0] - cx, c[1] - cy);
            1.0 + 50.0 / (1.0 + (dx * dx + dy * dy) / 30.0)
        })
        .collect()
}

fn fnv_of_owners(owners: &[u32]) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in owners.iter().flat_map(|o| o.to_le_bytes()) {
        h = (h ^ b as u64).wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")
}

#[test]
fn balance_c_gets_the_owners_of_the_rust_balancer() {
    let program = compile(&Path::new(MANIFEST).join("examples/balance.c"), "balance");
    let text = stdout(&run(&program, &[]));
    let lines: Vec<&str> = text.lines().collect();
    let grid = Grid::new(40, 30).unwrap();
    let mut method = methods::by_name("power-cells").unwrap();
    let first_loads = hot_spot(&grid, 30.0, 8.0);
    let first = Problem::new(grid, &first_loads, 6).unwrap();
    // The first call is a first partition (`pbs::refine::first_partition`: the cells from an
    // RCB's centroids, refined box by box), the second a rebalancing (`pbs::rebalance`) whose
    // owners are the cells', as the library makes them.
    let stop = StopRule { max_steps: 5000, ..StopRule::before_refinement(&first) };
    let start = pbs::refine::first_partition(method.as_mut(), &first, stop, RefineSettings::default().tol).unwrap();
    let (mut vcores, mut previous) = (start.vcores, start.owners.clone());
    for (call, (line, (cx, cy))) in lines.iter().zip([(30.0, 8.0), (12.0, 20.0)]).enumerate() {
        let loads = hot_spot(&grid, cx, cy);
        let problem = Problem::new(grid, &loads, 6).unwrap();
        let (owners, steps, migrations) = if call == 0 {
            (start.owners.clone(), start.steps, 0)
        } else {
            let out = rebalance(method.as_mut(), &problem, &mut vcores, StopRule { max_steps: 5000, tol: 0.05 });
            let owners = vcores.owners().to_vec();
            let moved = pbs::metrics::migrations(&previous, &owners);
            (owners, out.steps, moved)
        };
        assert_eq!(field(line, "owners"), fnv_of_owners(&owners), "{line}");
        assert_eq!(field(line, "steps"), steps.to_string(), "{line}");
        assert_eq!(field(line, "migrations"), migrations.to_string(), "{line}");
        assert_eq!(field(line, "converged"), "1", "{line}");
        previous = owners;
    }
    assert!(
        lines[1].starts_with("warm:") && field(lines[1], "steps") != "0",
        "the warm call had nothing to do: {text}"
    );
    assert!(lines[2].starts_with("nan: status=1 message=invalid load NaN at box 43 (x=3, y=1"), "{text}");
}

#[test]
fn heat_c_gives_one_checksum_under_every_scheduler_and_thread_count() {
    let program = compile(&Path::new(MANIFEST).join("examples/heat.c"), "heat");
    // 12 × 10 boxes of 6 × 6 cells: a hot square of 3 × 2 boxes at 100.
    let initial_heat = 3.0 * 2.0 * 36.0 * 100.0;
    let mut seen = BTreeSet::new();
    for scheduler in ["pbs", "ws", "eager", "static"] {
        for threads in ["1", "2", "3"] {
            let text = stdout(&run(&program, &[scheduler, threads, "40", "12", "10", "6"]));
            let line = text.trim();
            assert_eq!(field(line, "scheduler"), scheduler);
            assert_eq!(field(line, "threads"), threads);
            let heat: f64 = field(line, "total_heat").parse().unwrap();
            assert!((heat - initial_heat).abs() < 1e-9 * initial_heat, "insulated walls lost heat: {line}");
            seen.insert(field(line, "checksum").to_string());
        }
    }
    // Every PBS_OVERLAP setting, from an unchanged C program: the same field.
    for overlap in ["on", "idle", "thread", "off"] {
        let o =
            command(&program).args(["pbs", "2", "40", "12", "10", "6"]).env("PBS_OVERLAP", overlap).output().unwrap();
        seen.insert(field(stdout(&o).trim(), "checksum").to_string());
    }
    assert_eq!(seen.len(), 1, "checksums differ between schedulers, thread counts or overlap settings: {seen:?}");
    let bad = command(&program).args(["pbs", "2", "40", "12", "10", "6"]).env("PBS_OVERLAP", "maybe").output().unwrap();
    let said = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && said.contains("PBS_OVERLAP"), "a bad PBS_OVERLAP is named: {said}");
    // The field did change from its start (a task that did nothing would also agree).
    let still = stdout(&run(&program, &["static", "1", "0", "12", "10", "6"]));
    assert_ne!(field(still.trim(), "checksum"), seen.first().unwrap());
}

/// The OpenMP baselines of heat.c, and pbs beside an OpenMP loop: the same field and diagnostic.
#[test]
fn heat_c_under_openmp_schedules_and_mixed_with_an_openmp_loop_gives_the_same_checksum() {
    let program = compile_with(&Path::new(MANIFEST).join("examples/heat.c"), "heat_openmp", &["-fopenmp"]);
    let sizes = ["40", "12", "10", "6"];
    let checksum = |scheduler: &str, threads: &str, extra: &[&str]| {
        let mut args = vec![scheduler, threads];
        args.extend(sizes);
        args.extend(extra);
        // Passive: OpenMP's idle threads must not spin on the cores of the tests beside.
        let o = command(&program).args(&args).env("OMP_WAIT_POLICY", "passive").output().unwrap();
        let line = stdout(&o);
        assert_eq!(field(line.trim(), "scheduler"), scheduler);
        field(line.trim(), "checksum").to_string()
    };
    let mut plain = BTreeSet::new();
    for scheduler in ["static", "omp-static", "omp-dynamic:2", "omp-guided"] {
        for threads in ["1", "3"] {
            plain.insert(checksum(scheduler, threads, &[]));
        }
    }
    assert_eq!(plain.len(), 1, "OpenMP schedules and pbs's disagree: {plain:?}");
    let mut mixed = BTreeSet::new();
    for pin in ["pin=0", "pin=1", "pin=2"] {
        for diag in ["diag=pbs", "diag=omp"] {
            mixed.insert(checksum("pbs", "2", &[pin, diag]));
        }
    }
    mixed.insert(checksum("omp-guided", "2", &["diag=pbs"]));
    assert_eq!(mixed.len(), 1, "the diagnostic's sum differs between runtimes: {mixed:?}");
    assert_ne!(mixed, plain, "the diagnostic goes into the checksum");
    let o = run(&program, &["omp-sometimes", "2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown OpenMP schedule omp-sometimes"));
}

/// An OpenMP team created after a pinned executor: free under PBS_PIN_WORKERS, on worker 0's
/// core under PBS_PIN_WORKERS_AND_CALLER (as documented); OpenMP's default spinning is named.
#[test]
fn openmp_threads_created_after_a_pinned_executor_keep_the_process_cpus() {
    let program = compile_with(&Path::new(MANIFEST).join("tests/openmp_mask.c"), "openmp_mask", &["-fopenmp"]);
    for pin in ["0", "1", "2"] {
        let o = command(&program).arg(pin).env("OMP_WAIT_POLICY", "passive").output().unwrap();
        let line = stdout(&o);
        let cpus = |key: &str| field(line.trim(), key).parse::<i64>().unwrap();
        let process = cpus("process_cpus");
        if process < 2 {
            eprintln!("skipped: this process may run on {process} CPU, nothing to confine");
            return;
        }
        let expect = if pin == "2" { 1 } else { process };
        for key in ["caller_cpus", "omp_thread_0_cpus", "omp_thread_1_cpus"] {
            assert_eq!(cpus(key), expect, "pin={pin}, {key}: {line}");
        }
        assert!(o.stderr.is_empty(), "no note when a wait policy is set: {}", String::from_utf8_lossy(&o.stderr));
    }
    let o = command(&program).arg("1").env_remove("OMP_WAIT_POLICY").output().unwrap();
    let note = String::from_utf8_lossy(&o.stderr);
    assert!(note.contains("Set OMP_WAIT_POLICY=passive"), "no note on OpenMP's default spinning: {note}");
}

/// A C program that forks after creating an executor: in the child the executor's calls are
/// `PBS_UNSUPPORTED` (they waited for ever before), freeing it returns, a new one runs; the
/// parent's goes on. Every scheduler of `pbs_executor_new`.
#[test]
fn a_forked_child_gets_an_error_from_the_parents_executor_and_can_make_its_own() {
    let program = compile(&Path::new(MANIFEST).join("tests/fork_child.c"), "fork_child");
    for scheduler in pbs_scheduler::runtime::EXECUTORS {
        let mut child = command(&program).arg(scheduler).spawn().unwrap();
        let start = std::time::Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > std::time::Duration::from_secs(60) {
                child.kill().unwrap();
                panic!("{scheduler}: the program hung");
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        assert!(status.success(), "{scheduler}: {status}");
    }
}

/// `process_cpus`'s line as (threads, each worker's CPUs).
fn workers_cpus(line: &str) -> (usize, Vec<Vec<usize>>) {
    let threads: usize = field(line, "threads").parse().unwrap();
    let cpus = (0..threads)
        .map(|w| field(line, &format!("worker_{w}")).split(',').map(|c| c.parse().unwrap()).collect())
        .collect();
    (threads, cpus)
}

/// A process given part of the machine (taskset here, as mpirun --bind-to or srun --cpu-bind
/// would) keeps pbs's workers inside it: one worker per core it was given, pinned there. Before,
/// the workers took every core of the machine, outside the binding. OpenMP binding the caller
/// to one place (`OMP_PROC_BIND`) does not narrow what the process was given.
#[test]
fn workers_stay_on_the_cpus_the_process_was_given() {
    let given = pbs_scheduler::pinning::cpus_of_this_thread().unwrap_or_default();
    let cores = pbs_scheduler::topology::Topology::detect().cores.len();
    if given.len() < 2 || cores < 2 || Command::new("taskset").arg("-V").output().is_err() {
        eprintln!("skipped: this process may run on {} CPU(s) of {cores} cores, or taskset is missing", given.len());
        return;
    }
    let plain = compile(&Path::new(MANIFEST).join("tests/process_cpus.c"), "process_cpus");
    let openmp = compile_with(
        &Path::new(MANIFEST).join("tests/process_cpus.c"),
        "process_cpus_omp",
        &["-fopenmp", "-DWITH_OPENMP"],
    );
    let last = given.last().unwrap().to_string();
    let run_in = |program: &Path, taskset: Option<&str>, pin: &str, omp: bool| {
        let mut c = match taskset {
            Some(cpus) => {
                let mut c = command(Path::new("taskset"));
                c.args(["-c", cpus]).arg(program);
                c
            }
            None => command(program),
        };
        c.arg(pin).env_remove("PBS_NUM_THREADS");
        if omp {
            c.env("OMP_PROC_BIND", "true").env("OMP_WAIT_POLICY", "passive");
        }
        workers_cpus(stdout(&c.output().unwrap()).trim())
    };
    // The whole process: one pinned worker per core, each on its own.
    for (program, omp) in [(&plain, false), (&openmp, true)] {
        let (threads, cpus) = run_in(program, None, "1", omp);
        assert_eq!(threads, cores, "omp={omp}: {cpus:?}");
        assert!(cpus.iter().flatten().all(|c| given.contains(c)), "omp={omp}: {cpus:?} outside {given:?}");
        let mut firsts: Vec<usize> = cpus.iter().map(|c| c[0]).collect();
        firsts.sort_unstable();
        firsts.dedup();
        assert_eq!(firsts.len(), threads, "omp={omp}: each worker on a core of its own: {cpus:?}");
    }
    // One CPU given: one worker, on it, pinned or not, with OpenMP binding the caller or not.
    for (program, omp) in [(&plain, false), (&openmp, true)] {
        for pin in ["0", "1", "2"] {
            let (threads, cpus) = run_in(program, Some(&last), pin, omp);
            assert_eq!(
                (threads, &cpus),
                (1, &vec![vec![given[given.len() - 1]]]),
                "taskset -c {last}, pin={pin}, omp={omp}"
            );
        }
    }
}

/// A task with 3 MiB of local arrays runs on every scheduler's workers, which get the stack a C
/// thread gets (it crashed them all with Rust's 2 MiB); `PBS_STACKSIZE` sets it, and a value it
/// cannot read is an error that names it.
#[test]
fn tasks_get_the_stack_a_c_thread_gets() {
    let program = compile(&Path::new(MANIFEST).join("tests/stack_task.c"), "stack_task");
    let ulimit = Command::new("sh").args(["-c", "ulimit -s"]).output().unwrap();
    let kib = String::from_utf8_lossy(&ulimit.stdout).trim().to_string();
    // A C thread gets `ulimit -s` (glibc: 2 MiB when it is unlimited).
    if !kib.parse::<u64>().is_ok_and(|k| k >= 4096) {
        eprintln!("skipped: ulimit -s is {kib} (KiB): a C thread's stack is then under the task's 3 MiB");
        return;
    }
    for scheduler in pbs_scheduler::runtime::EXECUTORS {
        let o =
            command(&program).arg(scheduler).env_remove("PBS_STACKSIZE").env_remove("OMP_STACKSIZE").output().unwrap();
        assert_eq!(stdout(&o).trim(), "ok", "{scheduler}");
    }
    let o = command(&program).arg("pbs").env("PBS_STACKSIZE", "16M").output().unwrap();
    assert_eq!(stdout(&o).trim(), "ok");
    let o = command(&program).arg("pbs").env("PBS_STACKSIZE", "lots").output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success() && text.contains("PBS_STACKSIZE=\"lots\""), "{text}");
}

/// Floating-point modes the program sets after the executor started (rounding upward here):
/// every worker rounds as the caller does, so a box's result does not depend on the thread that
/// runs it. Before, only the caller's boxes were rounded upward.
#[test]
fn workers_round_as_the_caller_rounds() {
    let program = compile_with(&Path::new(MANIFEST).join("tests/fp_modes.c"), "fp_modes", &["-frounding-math"]);
    for scheduler in pbs_scheduler::runtime::EXECUTORS {
        let o = run(&program, &[scheduler]);
        assert_eq!(stdout(&o).trim(), "ok", "{scheduler}");
    }
}

/// pbs.hpp under both C++ compilers of Debian, in C++11 and C++17: every check of the program
/// passes, and the checksums agree across schedulers, thread counts and compilers.
#[test]
#[ignore = "needs g++ and clang++ (scripts/test.sh installs them and runs this)"]
fn the_cpp_header_works_under_gxx_and_clangxx() {
    let mut checksums = BTreeSet::new();
    for compiler in ["g++", "clang++"] {
        for standard in ["-std=c++11", "-std=c++17"] {
            let name = format!("cpp_api_{}_{}", compiler.replace('+', "x"), &standard[5..]);
            let program = compile_by(compiler, standard, &Path::new(MANIFEST).join("tests/cpp_api.cpp"), &name, &[]);
            let text = stdout(&run(&program, &[]));
            assert!(text.ends_with("all checks passed\n"), "{compiler} {standard}:\n{text}");
            for line in text.lines().filter(|l| l.starts_with("checksum ")) {
                checksums.insert(field(line, "value").to_string());
            }
        }
    }
    assert_eq!(checksums.len(), 1, "checksums differ: {checksums:?}");
}

/// The two Fortran compilers of Debian the module is tested under: GNU's, and LLVM's Flang
/// (`flang-new-19` in Debian 12's `flang-19`; its driver is `flang` from LLVM 20 on).
fn fortran_compilers() -> [&'static str; 2] {
    let works = |c: &str| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success());
    let flang = ["flang-new-19", "flang-19", "flang-new", "flang"]
        .into_iter()
        .find(|c| works(c))
        .expect("no LLVM Flang (flang-new-19, flang-19, flang-new or flang): install flang-19 (scripts/test.sh does)");
    ["gfortran", flang]
}

/// The Fortran module `pbs.f90` and `sources` after it, compiled as Fortran 2018 by `compiler`
/// and `flags` (`-fopenmp`) against libpbs_ffi.so, its `.mod` files in a folder of the
/// program's own. gfortran's warnings are errors; Flang's are not, as it warns where the
/// standard allows (an OPTIONAL argument of a BIND(C) interface, C_F_POINTER to a derived type
/// that is not BIND(C): both Fortran 2018).
fn compile_fortran(compiler: &str, sources: &[&str], name: &str, flags: &[&str]) -> PathBuf {
    let modules = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-modules"));
    std::fs::create_dir_all(&modules).unwrap();
    let strict: &[&str] = if compiler == "gfortran" { &["-Wall", "-Wextra", "-Werror", "-pedantic"] } else { &[] };
    let mut c = Command::new(compiler);
    c.args(["-std=f2018", "-O2"])
        .args(strict)
        .args(flags)
        .arg(format!("-J{}", modules.display()))
        .arg(Path::new(MANIFEST).join("include/pbs.f90"))
        .args(sources.iter().map(|s| Path::new(MANIFEST).join(s)));
    linked(c, name, &format!("{sources:?}"))
}

/// pbs.f90 under gfortran and LLVM Flang: it binds every function the library exports; every
/// check of the program passes (every call, its errors, a task's context pointer); the status
/// values and the shared types' layout are the Rust side's; and the box-order sum has the same
/// bits under every scheduler, thread count and compiler.
#[test]
#[ignore = "needs gfortran and flang-19 (scripts/test.sh installs them and runs this)"]
fn the_fortran_module_works_under_gfortran_and_flang() {
    let module = std::fs::read_to_string(Path::new(MANIFEST).join("include/pbs.f90")).unwrap();
    let bound: BTreeSet<String> = module
        .split("name=\"")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap().to_string())
        .filter(|name| name.starts_with("pbs_"))
        .collect();
    assert_eq!(bound, exported_functions(), "pbs.f90 binds other functions than the library exports");
    let mut checksums = BTreeSet::new();
    for compiler in fortran_compilers() {
        let program = compile_fortran(compiler, &["tests/fortran_api.f90"], &format!("fortran_api_{compiler}"), &[]);
        let text = stdout(&run(&program, &[]));
        assert!(text.ends_with("all checks passed\n"), "{compiler}:\n{text}");
        for w in &rust_layout() {
            assert!(text.lines().any(|l| l == w), "{compiler}'s Fortran and Rust disagree: want {w:?} in\n{text}");
        }
        for line in text.lines().filter(|l| l.starts_with("checksum ")) {
            checksums.insert(field(line, "value").to_string());
        }
    }
    assert_eq!(checksums.len(), 1, "checksums differ: {checksums:?}");
}

/// heat.f90, the Fortran example: the field after 60 iterations has the same bits under every
/// scheduler and thread count, and built with OpenMP under its schedules, as under the serial
/// loop, whichever compiler built it; an unknown scheduler is named, and an OpenMP one without
/// OpenMP.
#[test]
#[ignore = "needs gfortran and flang-19 (scripts/test.sh installs them and runs this)"]
fn heat_f90_gives_the_serial_checksum_under_every_scheduler() {
    let program = compile_fortran("gfortran", &["examples/heat.f90"], "heat_f90", &[]);
    let serial = stdout(&run(&program, &["serial", "1", "60"]));
    let want = field(&serial, "checksum").to_string();
    for scheduler in ["pbs", "ws", "eager", "static", "rcb", "diffusion"] {
        for threads in ["1", "2", "3"] {
            let line = stdout(&run(&program, &[scheduler, threads, "60"]));
            assert_eq!(field(&line, "checksum"), want, "{scheduler} on {threads} threads: {line}");
            assert_eq!(field(&line, "threads"), threads);
        }
    }
    let flang = fortran_compilers()[1];
    let by_flang = compile_fortran(flang, &["examples/heat.f90"], "heat_f90_flang", &[]);
    for scheduler in ["serial", "pbs", "static"] {
        let line = stdout(&run(&by_flang, &[scheduler, "2", "60"]));
        assert_eq!(field(&line, "checksum"), want, "{scheduler}, built by {flang}: {line}");
    }
    let o = run(&program, &["no-such-scheduler", "2", "5"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown executor \"no-such-scheduler\""));
    let o = run(&program, &["omp-static", "2", "5"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("omp-static needs a build with -fopenmp"));
    for (args, says) in [(["pbs", "two", "5"], "threads must be"), (["pbs", "2", "8x"], "iterations must be")] {
        let o = run(&program, &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains(says), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
    for args in [&["--help"][..], &["pbs", "two", "-h"]] {
        let o = run(&program, args);
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(out.starts_with("usage: heat-f") && out.lines().count() == 4, "{args:?}: {out}");
    }

    let openmp = compile_fortran("gfortran", &["examples/heat.f90"], "heat_f90_openmp", &["-fopenmp"]);
    for scheduler in ["omp-static", "omp-dynamic:4", "omp-guided", "pbs"] {
        let o = command(&openmp).env("OMP_WAIT_POLICY", "passive").args([scheduler, "2", "60"]).output().unwrap();
        let line = stdout(&o);
        assert_eq!(field(&line, "checksum"), want, "{scheduler} built with OpenMP: {line}");
    }
}

/// oneTBB beside pbs, through pbs.hpp: the same checksum with a loop in TBB or as a pbs phase,
/// pinned or not, and after a pinned executor TBB, started from the thread that drives pbs,
/// still counts every CPU of the process and its threads may run on all of them.
/// `tbb_beside compare` (scripts/perf.sh) times the mix.
#[test]
#[ignore = "needs g++ and oneTBB (libtbb-dev; scripts/test.sh installs them and runs this)"]
fn tbb_loops_beside_pbs_phases_keep_the_checksum_and_the_process_cpus() {
    let source = Path::new(MANIFEST).join("tests/tbb_beside.cpp");
    let program = compile_by("g++", "-std=c++17", &source, "tbb_beside", &["-ltbb"]);
    let text = stdout(&run(&program, &["check"]));
    assert!(text.ends_with("all checks passed\n"), "{text}");
}

/// tiles.c: the same field whatever the tile shape (ragged edges included), scheduler, thread
/// count and kind of task (per box or per range), and a changed one.
#[test]
fn tiles_c_gives_one_checksum_for_every_tile_shape() {
    let program = compile(&Path::new(MANIFEST).join("examples/tiles.c"), "tiles");
    let mut seen = BTreeSet::new();
    for (tx, ty) in [("50", "4"), ("8", "8"), ("7", "5"), ("16", "30"), ("1", "1")] {
        for (scheduler, threads, ranges) in
            [("pbs", "2", "0"), ("static", "1", "0"), ("ws", "3", "0"), ("pbs", "2", "1")]
        {
            let text = stdout(&run(&program, &[scheduler, threads, "20", "50", "30", tx, ty, ranges]));
            assert_eq!(field(text.trim(), "tile"), format!("{tx}x{ty}"));
            seen.insert(field(text.trim(), "checksum").to_string());
        }
    }
    assert_eq!(seen.len(), 1, "tile shapes disagree: {seen:?}");
    let still = stdout(&run(&program, &["static", "1", "0", "50", "30", "8", "8"]));
    assert_ne!(field(still.trim(), "checksum"), seen.first().unwrap());
    let o = run(&program, &["pbs", "2", "1", "50", "30", "0", "8"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("tile"), "{}", String::from_utf8_lossy(&o.stderr));
}

/// heat3d.c: one checksum for every 3D tile shape (ragged along each axis included),
/// scheduler and thread count; a zero tile size refused by name.
#[test]
fn heat3d_c_gives_one_checksum_for_every_tile_shape() {
    let program = compile(&Path::new(MANIFEST).join("examples/heat3d.c"), "heat3d");
    let mut seen = BTreeSet::new();
    for tile in [["20", "6", "6"], ["7", "5", "9"], ["1", "13", "2"], ["20", "13", "11"]] {
        for (scheduler, threads) in [("pbs", "2"), ("static", "1"), ("ws", "3"), ("eager", "2")] {
            let args = [&[scheduler, threads, "6", "20", "13", "11"][..], &tile[..]].concat();
            let text = stdout(&run(&program, &args));
            assert_eq!(field(text.trim(), "tile"), tile.join("x"));
            seen.insert(field(text.trim(), "checksum").to_string());
        }
    }
    assert_eq!(seen.len(), 1, "tile shapes disagree: {seen:?}");
    let longer = stdout(&run(&program, &["static", "1", "7", "20", "13", "11", "20", "6", "6"]));
    assert_ne!(field(longer.trim(), "checksum"), seen.first().unwrap());
    let o = run(&program, &["pbs", "2", "1", "20", "13", "11", "4", "4", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("tile[2]"), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The failure demo (`hot=nan`) reports the first failing box, and computes nothing undefined on
/// the way: UBSan's float-cast check stops the program at a NaN converted to `long` (which
/// the task's extra work did until 2026-11-29). A temperature out of range is refused.
#[test]
fn heat_c_reports_a_failing_task_by_box() {
    let flags = ["-fsanitize=float-cast-overflow", "-fno-sanitize-recover=all"];
    let program = compile_with(&Path::new(MANIFEST).join("examples/heat.c"), "heat_nan", &flags);
    for scheduler in ["pbs", "ws", "eager", "static"] {
        let o = run(&program, &[scheduler, "2", "5", "12", "10", "6", "nan"]);
        assert_eq!(o.status.code(), Some(1), "{scheduler}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("runtime error"), "{scheduler}: {err}");
        assert!(err.starts_with("heat: the task failed at box 0 (x=0, y=0, z=0) with code 1 ("), "{scheduler}: {err}");
    }
    for hot in ["1e300", "-1", "inf"] {
        let o = run(&program, &["pbs", "2", "5", "12", "10", "6", hot]);
        assert_eq!(o.status.code(), Some(2), "{hot}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("hot from 0 to 1e6 (or nan)"), "{hot}");
    }
}

/// Sizes the C examples cannot hold are refused with a message, not an abort or a crash:
/// heat.c's side of 100,000 cells (80 GB a tile) aborted on its first allocation, and an OpenMP
/// schedule, which builds no executor, would have run a grid whose `nx * ny` wrapped.
#[test]
fn the_c_examples_refuse_sizes_they_cannot_hold() {
    let program = compile_with(&Path::new(MANIFEST).join("examples/heat.c"), "heat_sizes", &["-fopenmp"]);
    for args in [
        ["static", "2", "3", "4", "4", "100000", "1"],
        ["omp-static", "2", "3", "9223372036854775809", "2", "3", "1"],
        ["pbs", "2", "3", "0", "4", "3", "1"],
    ] {
        let o = run(&program, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("nx * ny <= 2^32 - 1, side from 3 to 65536"), "{args:?}: {err}");
    }
    // tiles.c and heat3d.c: cells whose count wraps past SIZE_MAX bytes (a segmentation fault:
    // the sweep wrote past a small allocation), and cells memory will not hold (a silent exit 1).
    let tiles = compile(&Path::new(MANIFEST).join("examples/tiles.c"), "tiles_sizes");
    let heat3d = compile(&Path::new(MANIFEST).join("examples/heat3d.c"), "heat3d_sizes");
    let huge = "3037000500";
    let cases: [(&Path, Vec<&str>, i32, &str); 4] = [
        (&tiles, vec!["static", "2", "3", huge, huge, huge, huge], 2, "cells: more than this machine can count"),
        (&tiles, vec!["static", "2", "3", "1000000", "1000000", "1000000", "1000000"], 1, "out of memory for"),
        (
            &heat3d,
            vec!["static", "2", "3", "2097152", "2097152", "2097152", "2097152", "2097152", "2097152"],
            2,
            "count",
        ),
        (&heat3d, vec!["static", "2", "3", "100000", "100000", "10", "100000", "100000", "10"], 1, "out of memory for"),
    ];
    for (program, args, code, message) in cases {
        let o = run(program, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{program:?} {args:?}: {err}");
        assert!(err.contains(message), "{program:?} {args:?}: {err}");
    }
}

/// A number the C examples cannot read whole is refused by name (`ffi/examples/arguments.h`):
/// strtoul read "two" threads as 0 (every core), "ten" iterations as none and "8x" as 8, and
/// the program ran something else than it was asked, without a word.
#[test]
fn the_c_examples_refuse_arguments_that_are_not_numbers() {
    let heat = compile(&Path::new(MANIFEST).join("examples/heat.c"), "heat_arguments");
    let tiles = compile(&Path::new(MANIFEST).join("examples/tiles.c"), "tiles_arguments");
    let heat3d = compile(&Path::new(MANIFEST).join("examples/heat3d.c"), "heat3d_arguments");
    let cases: [(&Path, &[&str], &str); 9] = [
        (&heat, &["pbs", "two"], "heat: threads must be a whole number from 0 to"),
        (&heat, &["pbs", "2", "ten"], "heat: iterations must be a whole number from 0 to"),
        (&heat, &["pbs", "2", "-5"], "heat: iterations must be a whole number"),
        (&heat, &["pbs", "2", "5", "8x"], "heat: nx must be a whole number"),
        (&heat, &["pbs", "2", "5", "4", "4", "8", "warm"], "heat: hot must be a number, got 'warm'"),
        (&heat, &["pbs", "2", "5", "4", "4", "8", "100", "pin=3"], "heat: pin must be a whole number from 0 to 2"),
        (&tiles, &["pbs", "2", "abc"], "tiles: iterations must be a whole number"),
        (&tiles, &["pbs", "2", "5", "100", "100", "7", "1", "2"], "tiles: ranges must be a whole number from 0 to 1"),
        (&heat3d, &["pbs", "2", "3", "-5"], "heat3d: W must be a whole number"),
    ];
    for (program, args, says) in cases {
        let o = run(program, args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}: ran");
    }
    let o = run(&heat3d, &["pbs", "2", "1", "8", "8", "8", "8", "8", "8", "extra"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unexpected argument extra"));
}

/// `-h` or `--help`, anywhere on the line: each C example prints its usage on stdout and ends
/// with status 0 before it reads the rest or runs; `balance` takes no other argument.
#[test]
fn the_c_examples_print_their_usage_on_help() {
    for name in ["heat", "heat3d", "tiles", "balance"] {
        let program = compile(&Path::new(MANIFEST).join(format!("examples/{name}.c")), &format!("{name}_help"));
        for args in [&["--help"][..], &["-h"], &["pbs", "two", "--help"]] {
            let o = run(&program, args);
            let out = String::from_utf8_lossy(&o.stdout);
            assert_eq!(o.status.code(), Some(0), "{name} {args:?}: {}", String::from_utf8_lossy(&o.stderr));
            assert!(out.starts_with(&format!("usage: {name}")) && o.stderr.is_empty(), "{name} {args:?}: {out}");
        }
    }
    let balance = compile(&Path::new(MANIFEST).join("examples/balance.c"), "balance_extra");
    let o = run(&balance, &["8"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("balance: unexpected argument 8"));
}

#[test]
fn heat_c_reports_a_bad_scheduler_by_name() {
    let program = compile(&Path::new(MANIFEST).join("examples/heat.c"), "heat_bad");
    let o = run(&program, &["omp", "2"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("unknown executor \"omp\"; expected one of pbs, ws, eager, static"), "{err}");
}

/// The README's C example compiles and runs its phases, each returning `PBS_OK`
/// (`tests/readme.c`; pbs-tests' `the_readme_s_c_lines_are_those_of_ffi_tests_readme_c` checks
/// that it holds the README's lines). The example's task leaves its arguments unused: that
/// warning alone is allowed.
#[test]
fn readme_c_runs_the_readme_s_example() {
    let program = compile_with(&Path::new(MANIFEST).join("tests/readme.c"), "readme", &["-Wno-unused-parameter"]);
    assert_eq!(stdout(&run(&program, &[])).trim(), "phases=5");
}
