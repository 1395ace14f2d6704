//! A signal that arrives while METIS runs does what the program asked for it, as at any other
//! time, and a METIS call leaves the program's signal actions as it found them.
//!
//! METIS (GKlib) traps SIGTERM and SIGABRT process-wide during each call and unwinds to the
//! calling thread's jump buffer. Before `src/metis_signals.c` took over that trapping, a SIGTERM
//! from outside was swallowed when it reached the thread inside METIS (the call failed and the
//! program went on), crashed the program (SIGSEGV) when it reached another thread, and ended it
//! where the program had a handler of its own or ignored SIGTERM; after any call the program's
//! handlers came back through `signal()`, one-shot, without `SA_RESTART` and without
//! `SA_SIGINFO` (a three-argument handler then read a siginfo that was not there); and a thread
//! that blocked SIGABRT left METIS's own out-of-memory signal pending instead of unwinding.
//!
//! Each case runs in a child process, this test binary run again with `PBS_METIS_SIGNAL_CHILD`
//! set; the binary has its own `main` (no test harness), so that METIS can be called from the
//! main thread, which the kernel prefers for a signal sent to the process.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

use libc::{c_int, c_void};
use pbs::Grid;
use pbs_peers::Error;

const CHILD: &str = "PBS_METIS_SIGNAL_CHILD";

/// METIS calls on a 200 × 200 grid until `stop` says so (at most 20 s), "started" on standard
/// output once the first has returned; exits 3 if one fails.
fn metis_calls(stop: impl Fn() -> bool) {
    let grid = Grid::new(200, 200).unwrap();
    let loads: Vec<f64> = (0..grid.len()).map(|k| 1.0 + (k % 7) as f64).collect();
    let mut metis = pbs_peers::by_name("metis-kway").unwrap();
    let start = Instant::now();
    let mut first = true;
    while !stop() && start.elapsed() < Duration::from_secs(20) {
        if let Err(e) = metis.partition(&grid, &loads, 16) {
            eprintln!("{e}");
            std::process::exit(3);
        }
        if std::mem::take(&mut first) {
            println!("started");
        }
    }
}

/// One METIS call that must succeed (exit 3 if not).
fn one_small_call() {
    let mut metis = pbs_peers::by_name("metis-kway").unwrap();
    if let Err(e) = metis.partition(&Grid::new(20, 20).unwrap(), &[1.0; 400], 4) {
        fail(3, &e.to_string());
    }
}

/// SIGTERMs the handler below has seen, and the last one's sender.
static HANDLED: AtomicUsize = AtomicUsize::new(0);
static SENDER: AtomicI32 = AtomicI32::new(0);

/// A three-argument (`SA_SIGINFO`) handler, which reads who sent the signal.
extern "C" fn on_sigterm(_signal: c_int, info: *mut libc::siginfo_t, _context: *mut c_void) {
    // SAFETY: the kernel passes an `SA_SIGINFO` handler a valid siginfo for the signal; only
    // when its action had lost `SA_SIGINFO` would `info` be whatever the register held.
    SENDER.store(unsafe { (*info).si_pid() }, SeqCst);
    HANDLED.fetch_add(1, SeqCst);
}

/// The action for `signal`, as `sigaction` reports it.
fn action_of(signal: c_int) -> libc::sigaction {
    // SAFETY: an all-zero sigaction is a valid value to be overwritten; sigaction writes the
    // current action into it and reads nothing else.
    unsafe {
        let mut now: libc::sigaction = std::mem::zeroed();
        assert_eq!(libc::sigaction(signal, std::ptr::null(), &mut now), 0);
        now
    }
}

/// What this test compares of an action: the handler, the flags a program chooses, and
/// whether SIGUSR1 is in the mask.
fn summary(a: &libc::sigaction) -> (usize, c_int, bool) {
    let chosen = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_RESETHAND | libc::SA_NODEFER;
    // SAFETY: `a.sa_mask` is an initialized signal set.
    (a.sa_sigaction, a.sa_flags & chosen, unsafe { libc::sigismember(&a.sa_mask, libc::SIGUSR1) } == 1)
}

/// Sets `handler` (or `SIG_IGN`, `SIG_DFL`) for SIGTERM with `flags`, SIGUSR1 in its mask.
fn set_sigterm(handler: usize, flags: c_int) {
    // SAFETY: the action is fully initialized (zeroed, then the handler, flags and mask set)
    // and `handler` is a disposition constant or `on_sigterm`, whose signature matches
    // `SA_SIGINFO`.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = handler;
        act.sa_flags = flags;
        libc::sigemptyset(&mut act.sa_mask);
        libc::sigaddset(&mut act.sa_mask, libc::SIGUSR1);
        assert_eq!(libc::sigaction(libc::SIGTERM, &act, std::ptr::null_mut()), 0);
    }
}

fn fail(code: i32, what: &str) -> ! {
    eprintln!("{what}");
    std::process::exit(code);
}

fn child(mode: &str) -> ! {
    match mode {
        // Default action: METIS calls until the signal ends the process.
        "main" => metis_calls(|| false),
        "spawned" => std::thread::spawn(|| metis_calls(|| false)).join().unwrap(),
        // The program's own handler: it sees the parent's SIGTERM during the calls, keeps its
        // flags and mask through them, and sees a second SIGTERM too (it is not one-shot).
        "handler" => {
            set_sigterm(on_sigterm as *const () as usize, libc::SA_SIGINFO | libc::SA_RESTART);
            let before = summary(&action_of(libc::SIGTERM));
            metis_calls(|| HANDLED.load(SeqCst) > 0);
            if HANDLED.load(SeqCst) == 0 {
                fail(6, "no SIGTERM reached the handler");
            }
            // SAFETY: getppid and getpid read no memory.
            let (parent, me) = unsafe { (libc::getppid(), libc::getpid()) };
            if SENDER.load(SeqCst) != parent {
                fail(7, &format!("the handler read sender {} (the parent is {parent})", SENDER.load(SeqCst)));
            }
            let after = summary(&action_of(libc::SIGTERM));
            if after != before {
                fail(8, &format!("SIGTERM's action was {before:?}, is {after:?} after METIS"));
            }
            one_small_call();
            // SAFETY: kill reads no memory; the signal goes to this process, whose handler is set.
            assert_eq!(unsafe { libc::kill(me, libc::SIGTERM) }, 0);
            let start = Instant::now();
            while HANDLED.load(SeqCst) < 2 && start.elapsed() < Duration::from_secs(120) {
                std::thread::sleep(Duration::from_millis(1));
            }
            if HANDLED.load(SeqCst) != 2 || SENDER.load(SeqCst) != me {
                fail(9, "the second SIGTERM did not reach the handler");
            }
        }
        // SIGTERM ignored: the calls run their 3 s through the parent's signals.
        "ignored" => {
            set_sigterm(libc::SIG_IGN, 0);
            let start = Instant::now();
            metis_calls(|| start.elapsed() > Duration::from_secs(3));
            if action_of(libc::SIGTERM).sa_sigaction != libc::SIG_IGN {
                fail(8, "SIGTERM is no longer ignored after METIS");
            }
        }
        // METIS's own out-of-memory on a thread that blocks SIGABRT and SIGTERM (as a program
        // that takes its signals with sigwait does): the call fails with METIS's status, and
        // no signal is left pending or unblocked.
        "oom-blocked" => {
            // SAFETY: sets are initialized by sigemptyset before use; pthread_sigmask and
            // setrlimit read only the values passed.
            unsafe {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, libc::SIGABRT);
                libc::sigaddset(&mut set, libc::SIGTERM);
                assert_eq!(libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()), 0);
            }
            let grid = Grid::new(1000, 1000).unwrap();
            let loads = vec![1.0; grid.len()];
            let mut metis = pbs_peers::by_name("metis-kway").unwrap();
            // Room for this side's graph (about 36 MB) and not for METIS's work on it.
            let limit = address_space() + (64 << 20);
            set_address_limit(limit);
            let result = metis.partition(&grid, &loads, 64);
            set_address_limit(libc::RLIM_INFINITY);
            match result {
                Err(Error::Metis { status: -3, .. }) => {}
                Ok(_) => fail(10, "METIS ran to the end under an address-space limit"),
                Err(e) => fail(10, &format!("METIS under an address-space limit: {e}")),
            }
            // SAFETY: both sets are written by the calls before they are read.
            let (pending, mask) = unsafe {
                let (mut pending, mut mask): (libc::sigset_t, libc::sigset_t) = std::mem::zeroed();
                libc::sigpending(&mut pending);
                libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut mask);
                (pending, mask)
            };
            for (signal, name) in [(libc::SIGABRT, "SIGABRT"), (libc::SIGTERM, "SIGTERM")] {
                // SAFETY: both sets are initialized.
                let (is_pending, blocked) =
                    unsafe { (libc::sigismember(&pending, signal) == 1, libc::sigismember(&mask, signal) == 1) };
                if is_pending || !blocked {
                    fail(11, &format!("{name}: pending {is_pending}, blocked {blocked} after METIS's error"));
                }
            }
            one_small_call();
        }
        other => panic!("unknown mode {other}"),
    }
    std::process::exit(0);
}

/// The bytes of address space this process holds now.
fn address_space() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib = status.lines().find_map(|l| l.strip_prefix("VmSize:")).unwrap();
    kib.trim().trim_end_matches("kB").trim().parse::<u64>().unwrap() << 10
}

fn set_address_limit(bytes: u64) {
    let limit = libc::rlimit { rlim_cur: bytes, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: setrlimit reads the one struct passed.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) }, 0);
}

fn metis_available() -> bool {
    let grid = Grid::new(2, 2).unwrap();
    let mut metis = pbs_peers::by_name("metis-kway").unwrap();
    !matches!(metis.partition(&grid, &[1.0; 4], 2), Err(Error::MetisUnavailable { .. }))
}

/// Starts this binary in `mode` and waits until its first METIS call has returned.
fn start(mode: &str) -> Child {
    let mut child =
        Command::new(std::env::current_exe().unwrap()).env(CHILD, mode).stdout(Stdio::piped()).spawn().unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !String::from_utf8_lossy(&seen).contains("started") && out.read(&mut byte).unwrap_or(0) == 1 {
        seen.push(byte[0]);
    }
    child
}

fn sigterm(child: &Child) {
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill reads no memory; `pid` is our child's, not yet waited on, so not reused.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
}

fn main() {
    if let Ok(mode) = std::env::var(CHILD) {
        child(&mode);
    }
    if !metis_available() {
        println!("metis_signals: METIS not found at build time, nothing to test");
        return;
    }
    for mode in ["main", "spawned"] {
        let mut child = start(mode);
        std::thread::sleep(Duration::from_millis(200));
        sigterm(&child);
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGTERM), "METIS called from the {mode} thread: {status}");
        println!("metis_signals: a SIGTERM during METIS on the {mode} thread ended the process");
    }
    let mut child = start("handler");
    std::thread::sleep(Duration::from_millis(200));
    sigterm(&child);
    let status = child.wait().unwrap();
    assert!(status.success(), "a program's own SIGTERM handler around METIS calls: {status}");
    println!("metis_signals: the program's SA_SIGINFO handler took SIGTERM during METIS calls, and kept its flags");
    let mut child = start("ignored");
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(300));
        sigterm(&child);
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "a program that ignores SIGTERM, signalled during METIS calls: {status}");
    println!("metis_signals: an ignored SIGTERM stayed ignored during METIS calls");
    // METIS prints its out-of-memory report on standard error: shown only if the case fails.
    let out = Command::new(std::env::current_exe().unwrap()).env(CHILD, "oom-blocked").output().unwrap();
    let report = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "METIS's out-of-memory on a thread blocking SIGABRT: {}\n{report}", out.status);
    println!("metis_signals: METIS's out-of-memory unwound on a thread that blocks SIGABRT, and left nothing pending");
}
