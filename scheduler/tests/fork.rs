//! A process forked after the executors started their threads (`src/fork.rs`): in the child,
//! every executor's phase is refused with `FORKED` instead of waiting for ever for workers that
//! stayed in the parent, ending an iteration and dropping it return, and an executor created in
//! the child runs; the parent's executors go on as before. Every executor of
//! `runtime::EXECUTORS`.
//!
//! A binary of its own with no test harness: at the fork, no thread but the pools' idle
//! workers runs (the harness's other test threads could hold a lock the child then needs).

use std::panic::{self, AssertUnwindSafe};
use std::time::{Duration, Instant};

use pbs::Grid;
use pbs_scheduler::executor::Executor;
use pbs_scheduler::fork::FORKED;
use pbs_scheduler::pinning::Pinning;
use pbs_scheduler::runtime::{Runtime, EXECUTORS};
use pbs_scheduler::topology::Topology;
use pbs_scheduler::BoxTimer;

fn runtime() -> Runtime {
    Runtime { topology: Topology::detect(), threads: 2, pin: Pinning::Off, timer: BoxTimer::default() }
}

/// A phase that counts its boxes.
fn boxes_run(exec: &mut (dyn Executor + Send)) -> usize {
    let count = std::sync::atomic::AtomicUsize::new(0);
    exec.run_phase(&|_| {
        count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    });
    count.into_inner()
}

/// In the child: each of the parent's executors refuses its phase and drops; a new one runs.
/// Returns the failures found.
fn in_child(parents: Vec<(&'static str, Box<dyn Executor + Send>)>, grid: Grid) -> Vec<String> {
    panic::set_hook(Box::new(|_| {}));
    let mut failures = Vec::new();
    for (name, mut exec) in parents {
        match panic::catch_unwind(AssertUnwindSafe(|| boxes_run(exec.as_mut()))) {
            Ok(n) => failures.push(format!("{name}: a phase ran {n} boxes in the child")),
            Err(p) => {
                let text = p.downcast_ref::<String>().cloned().unwrap_or_default();
                if !text.contains(FORKED) {
                    failures.push(format!("{name}: the phase panicked with {text:?}"));
                }
            }
        }
        // The end of an iteration may hand a rebalancing to a balancer thread that stayed in
        // the parent: it returns (or panics) all the same.
        let _ = panic::catch_unwind(AssertUnwindSafe(|| exec.end_iteration()));
        drop(exec);
        match runtime().executor(name, grid) {
            Ok((mut fresh, _)) => {
                let n = boxes_run(fresh.as_mut());
                if n != grid.len() {
                    failures.push(format!("{name}: a new executor in the child ran {n} boxes"));
                }
            }
            Err(e) => failures.push(format!("{name}: no new executor in the child: {e}")),
        }
    }
    failures
}

fn main() {
    let grid = Grid::new(12, 10).unwrap();
    let mut parents = Vec::new();
    for name in EXECUTORS {
        let (mut exec, _) = runtime().executor(name, grid).unwrap();
        assert_eq!(boxes_run(exec.as_mut()), grid.len(), "{name} before the fork");
        exec.end_iteration();
        parents.push((name, exec));
    }
    // SAFETY: at the fork the only other threads are the pools' idle workers (no harness), so
    // no lock the child takes is held by a thread that is not there; the child ends with
    // `_exit`, running none of the parent's exit handlers.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // Ownership moves into the child's work; the parent keeps its own copies.
        let failures = in_child(std::mem::take(&mut parents), grid);
        for f in &failures {
            eprintln!("fork: {f}");
        }
        // SAFETY: ends the child without the parent's atexit handlers or destructors.
        unsafe { libc::_exit(failures.len().min(100) as i32) };
    }
    let start = Instant::now();
    let mut status = 0;
    loop {
        // SAFETY: polls our own child; `status` is a valid place for its status.
        let done = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        assert!(done >= 0, "waitpid failed");
        if done == pid {
            break;
        }
        if start.elapsed() > Duration::from_secs(60) {
            // SAFETY: kill reads no memory; `pid` is our child, not yet waited on.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("the child hung");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the child failed: status {status}");
    for (name, exec) in &mut parents {
        assert_eq!(boxes_run(exec.as_mut()), grid.len(), "{name} in the parent after the fork");
    }
    println!("fork: in a forked child {} executors refused their phases and dropped; new ones ran", EXECUTORS.len());
}
