//! A SIGTERM that arrives while METIS runs ends the process, as it does at any other time.
//!
//! METIS (GKlib) traps SIGTERM and SIGABRT process-wide during each call and unwinds to the
//! calling thread's jump buffer: before `src/metis_signals.c` replaced its handler, the signal
//! was swallowed when it reached the thread inside METIS (the call failed and the program went
//! on) and crashed the program (SIGSEGV) when it reached another thread. Each case runs in a
//! child process, this test binary run again with `PBS_METIS_SIGNAL_CHILD` set; the binary has
//! its own `main` (no test harness), so that METIS can be called from the main thread, which
//! the kernel prefers for a signal sent to the process.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pbs::Grid;
use pbs_peers::Error;

const CHILD: &str = "PBS_METIS_SIGNAL_CHILD";

/// METIS calls for up to 20 s, from the main thread or from a spawned one, "started" on
/// standard output once the first has returned; exits 0 if they all run out the time, 3 if one
/// fails.
fn child(on_main_thread: bool) -> ! {
    let calls = || {
        let grid = Grid::new(200, 200).unwrap();
        let loads: Vec<f64> = (0..grid.len()).map(|k| 1.0 + (k % 7) as f64).collect();
        let mut metis = pbs_peers::by_name("metis-kway").unwrap();
        let start = Instant::now();
        let mut first = true;
        while start.elapsed() < Duration::from_secs(20) {
            if let Err(e) = metis.partition(&grid, &loads, 16) {
                eprintln!("{e}");
                std::process::exit(3);
            }
            if std::mem::take(&mut first) {
                println!("started");
            }
        }
    };
    if on_main_thread {
        calls();
    } else {
        std::thread::spawn(calls).join().unwrap();
    }
    std::process::exit(0);
}

fn metis_available() -> bool {
    let grid = Grid::new(2, 2).unwrap();
    let mut metis = pbs_peers::by_name("metis-kway").unwrap();
    !matches!(metis.partition(&grid, &[1.0; 4], 2), Err(Error::MetisUnavailable { .. }))
}

fn main() {
    if let Ok(mode) = std::env::var(CHILD) {
        child(mode == "main");
    }
    if !metis_available() {
        println!("metis_signals: METIS not found at build time, nothing to test");
        return;
    }
    for mode in ["main", "spawned"] {
        let mut child =
            Command::new(std::env::current_exe().unwrap()).env(CHILD, mode).stdout(Stdio::piped()).spawn().unwrap();
        // Once the first call has returned, signal while the next ones run.
        let mut out = child.stdout.take().unwrap();
        let mut seen = Vec::new();
        let mut byte = [0u8; 1];
        while !String::from_utf8_lossy(&seen).contains("started") && out.read(&mut byte).unwrap_or(0) == 1 {
            seen.push(byte[0]);
        }
        std::thread::sleep(Duration::from_millis(200));
        let pid = libc::pid_t::try_from(child.id()).unwrap();
        // SAFETY: kill reads no memory; `pid` is our child's, not yet waited on, so not reused.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGTERM), "METIS called from the {mode} thread: {status}");
        println!("metis_signals: a SIGTERM during METIS on the {mode} thread ended the process");
    }
}
