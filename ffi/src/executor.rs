//! The runtime from C: `pbs_executor_*`. A pinned pool runs a C task once per box and phase
//! under any of the executors, built by name as [`pbs_scheduler::runtime::Runtime`] does.

use std::cell::UnsafeCell;
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use pbs::Grid;
use pbs_scheduler::coexistence::{confined_caller_warning, openmp_spin_warning};
use pbs_scheduler::executors::PbsOptions;
use pbs_scheduler::fork::{Birth, FORKED};
use pbs_scheduler::pinning::Pinning;
use pbs_scheduler::runtime::Runtime;
use pbs_scheduler::topology::Topology;
use pbs_scheduler::{current_worker, BoxTimer, Executor};

use crate::status::{guard, invalid, null, status, text, Failure, Status};

/// An executor (`pbs_executor` in `pbs.h`).
///
/// C may call back into the handle from a task (pbs.h forbids it, but a C compiler cannot) or
/// from two threads at once. Every call that uses the executor takes `busy` first and gets
/// [`Status::Busy`] if it is held, so at most one `&mut` to the executor exists at a time;
/// what does not change after creation (threads, grid) is read without it.
pub struct ExecutorHandle {
    /// The process the executor's threads run in: a child forked since gets
    /// [`Status::Unsupported`] from every call (see [`pbs_scheduler::fork`]).
    born: Birth,
    busy: AtomicBool,
    exec: UnsafeCell<Box<dyn Executor + Send>>,
    threads: usize,
    grid: Grid,
}

impl ExecutorHandle {
    /// Exclusive use of the executor for the call `call`, until the guard drops.
    fn enter(&self, call: &str) -> Result<Entered<'_>, Failure> {
        if !self.born.is_here() {
            return Err(Failure(Status::Unsupported, format!("{call}: {FORKED}")));
        }
        if self.busy.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            return Err(Failure(
                Status::Busy,
                format!(
                    "{call}: the executor is already in a call (a task of its own phase calling it, or \
                     another thread); nothing was done"
                ),
            ));
        }
        Ok(Entered(self))
    }
}

/// Holds [`ExecutorHandle::busy`].
struct Entered<'a>(&'a ExecutorHandle);

impl Entered<'_> {
    fn exec(&mut self) -> &mut (dyn Executor + Send) {
        // SAFETY: `busy` is held by this guard alone (taken in `enter`, released on drop), and
        // every access to `exec` goes through such a guard, so this `&mut` is unique; the
        // borrow of `self` keeps it within the guard's life.
        unsafe { &mut **self.0.exec.get() }
    }
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        self.0.busy.store(false, Ordering::Release);
    }
}

/// What one phase did (`pbs_phase_stats` in `pbs.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PhaseStats {
    /// Wall time of the phase, barrier included.
    pub wall_ms: f64,
    /// `(sum of task times / threads) / wall time`.
    pub efficiency: f64,
    /// Share of boxes run on the same thread as in the previous phase; −1 if none compared.
    pub affinity: f64,
}

/// What happened between two iterations (`pbs_iteration_end` in `pbs.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct IterationEnd {
    /// 1 when the balancer ran.
    pub rebalanced: i32,
    /// Its time.
    pub rebalance_ms: f64,
    /// Boxes whose owner changed.
    pub migrations: usize,
    /// `max_avg` of the thread loads of the iteration that ended.
    pub max_avg: f64,
}

impl From<&pbs_scheduler::executor::IterationEnd> for IterationEnd {
    fn from(r: &pbs_scheduler::executor::IterationEnd) -> IterationEnd {
        IterationEnd {
            rebalanced: r.rebalanced as i32,
            rebalance_ms: r.rebalance_time.as_secs_f64() * 1e3,
            migrations: r.migrations,
            max_avg: r.max_avg,
        }
    }
}

/// A C function and its context, called from every worker: the C side promises (pbs.h) that
/// the function may run concurrently with the same context.
struct Callback<F> {
    f: F,
    ctx: *mut c_void,
}
// SAFETY: pbs.h documents that tasks run concurrently from the workers with the same `ctx`;
// the C caller provides that synchronisation (owner computes: each task writes its own box).
unsafe impl<F: Sync> Sync for Callback<F> {}

impl<R> Callback<unsafe extern "C" fn(*mut c_void, usize) -> R> {
    /// Calls the C function on `arg` (a box or a worker id).
    fn call(&self, arg: usize) -> R {
        // SAFETY: a C function of pbs.h's contract with the context it was given with.
        unsafe { (self.f)(self.ctx, arg) }
    }
}

impl Callback<unsafe extern "C" fn(*mut c_void, usize, usize) -> c_int> {
    /// Calls the C range task on the boxes `ks`.
    fn call_range(&self, ks: std::ops::Range<usize>) -> c_int {
        // SAFETY: a C function of pbs.h's contract with the context it was given with.
        unsafe { (self.f)(self.ctx, ks.start, ks.end) }
    }
}

/// The failures of one phase's tasks: how many, and the lowest failing box with its code
/// (packed `box << 32 | code`, so that `fetch_min` keeps the lowest box whatever the order
/// the workers fail in: the message does not depend on the scheduler).
struct Failures {
    count: AtomicUsize,
    lowest: AtomicU64,
}

impl Failures {
    fn new() -> Failures {
        Failures { count: AtomicUsize::new(0), lowest: AtomicU64::new(u64::MAX) }
    }

    fn record(&self, k: usize, code: c_int) {
        self.count.fetch_add(1, Ordering::Relaxed);
        // Boxes fit in 32 bits (Grid refuses more).
        self.lowest.fetch_min((k as u64) << 32 | code as u32 as u64, Ordering::Relaxed);
    }

    /// The phase's failure, if a task failed: tasks of one box each, or of `ranges` of boxes
    /// (recorded by their first box).
    fn into_failure(self, grid: &Grid, ranges: bool) -> Option<Failure> {
        let n = self.count.into_inner();
        let packed = self.lowest.into_inner();
        (n > 0).then(|| {
            let (k, code) = ((packed >> 32) as usize, packed as u32 as c_int);
            let [x, y, z] = grid.coords(k);
            let (unit, units) = if ranges { ("range", "ranges") } else { ("box", "boxes") };
            let others = match n - 1 {
                0 => String::new(),
                1 => format!(" (1 other {unit} failed too)"),
                m => format!(" ({m} other {units} failed too)"),
            };
            let at = if ranges { "on the range starting at box" } else { "at box" };
            Failure(
                Status::TaskFailed,
                format!(
                    "the task failed {at} {k} (x={x}, y={y}, z={z}) with code {code}{others}; every other {unit} ran"
                ),
            )
        })
    }
}

/// Prints [`openmp_spin_warning`] to stderr, once per process: a C program's author learns
/// there why an OpenMP loop beside pbs makes both slow.
fn warn_once_if_openmp_spins() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Some(advice) = openmp_spin_warning() {
            eprintln!("{advice}");
        }
    });
}

/// An executor `scheduler` over `nx × ny × nz` boxes with `threads` workers (0: the default),
/// pinned as `pin` says ([`Pinning::from_c`]: 0 off, 1 workers, 2 workers and caller); NULL
/// on error.
///
/// # Safety
/// `scheduler` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn pbs_executor_new(
    scheduler: *const c_char,
    nx: usize,
    ny: usize,
    nz: usize,
    threads: usize,
    pin: c_int,
) -> *mut ExecutorHandle {
    // SAFETY: forwarded from the caller; no settings.
    unsafe { pbs_executor_new_with(scheduler, nx, ny, nz, threads, pin, std::ptr::null()) }
}

/// [`pbs_executor_new`] with pbs's settings given as `"NAME=value"` strings, the names of the
/// environment variables (`PBS_TOL=0.01`, `PBS_CRITERION=menon`, …:
/// [`PbsOptions::SETTINGS`]), taking precedence over the environment; `settings` is NULL (none)
/// or ends with a NULL entry. An unknown name, a name given twice, an entry without `=` or a
/// value the setting does not take is an error that names it.
///
/// # Safety
/// `scheduler` is NULL or a NUL-terminated string; `settings` is NULL or an array of
/// NUL-terminated strings that ends with a NULL pointer.
#[no_mangle]
pub unsafe extern "C" fn pbs_executor_new_with(
    scheduler: *const c_char,
    nx: usize,
    ny: usize,
    nz: usize,
    threads: usize,
    pin: c_int,
    settings: *const *const c_char,
) -> *mut ExecutorHandle {
    guard(
        |_| std::ptr::null_mut(),
        || {
            // SAFETY: forwarded from the caller.
            let name = unsafe { text(scheduler, "scheduler") }?.ok_or_else(|| null("scheduler"))?;
            // SAFETY: forwarded from the caller.
            let settings = unsafe { parse_settings(settings) }?;
            Ok(Box::into_raw(Box::new(ExecutorHandle::new(name, &settings, [nx, ny, nz], threads, pin)?)))
        },
    )
}

impl ExecutorHandle {
    /// The checks and start of [`pbs_executor_new_with`], its strings already read.
    fn new(
        name: &str,
        settings: &[(String, String)],
        [nx, ny, nz]: [usize; 3],
        threads: usize,
        pin: c_int,
    ) -> Result<Self, Failure> {
        let grid = Grid::new_3d(nx, ny, nz)?;
        let topology = Topology::detect();
        let threads = match threads {
            0 => topology.default_threads().map_err(invalid)?,
            t => t,
        };
        let pin = Pinning::from_c(pin).ok_or_else(|| {
            invalid(format!(
                "pin = {pin}: expected 0 (PBS_PIN_OFF), 1 (PBS_PIN_WORKERS) or 2 (PBS_PIN_WORKERS_AND_CALLER)"
            ))
        })?;
        let process_cpus = topology.cores.iter().map(|c| c.pus.len()).sum();
        let runtime = Runtime { topology, threads, pin, timer: BoxTimer::default() };
        warn_once_if_openmp_spins();
        if pin == Pinning::Off {
            if let Some(advice) = confined_caller_warning(threads, process_cpus) {
                eprintln!("{advice}");
            }
        }
        let given = |n: &str| settings.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        let (exec, _bindings) = runtime.executor_with_settings(name, grid, &given)?;
        let threads = exec.threads();
        Ok(ExecutorHandle {
            born: Birth::now(),
            busy: AtomicBool::new(false),
            exec: UnsafeCell::new(exec),
            threads,
            grid,
        })
    }
}

/// The `"NAME=value"` entries of a NULL-terminated array (none for NULL), each name one of
/// [`PbsOptions::SETTINGS`] and given once.
///
/// # Safety
/// `settings` is NULL or an array of NUL-terminated strings that ends with a NULL pointer.
unsafe fn parse_settings(settings: *const *const c_char) -> Result<Vec<(String, String)>, Failure> {
    let mut out: Vec<(String, String)> = Vec::new();
    if settings.is_null() {
        return Ok(out);
    }
    for i in 0.. {
        // SAFETY: the array ends with a NULL entry (the caller's contract), and no entry past it
        // is read: the loop stops there.
        let entry = unsafe { *settings.add(i) };
        let what = format!("settings[{i}]");
        // SAFETY: a non-NULL entry is a NUL-terminated string (the caller's contract).
        let Some(entry) = (unsafe { text(entry, &what) })? else { break };
        add_setting(&mut out, &what, entry)?;
    }
    Ok(out)
}

/// Adds `entry`, the setting `what`, to `out`: `NAME=value`, the name one of
/// [`PbsOptions::SETTINGS`] and not in `out` already.
fn add_setting(out: &mut Vec<(String, String)>, what: &str, entry: &str) -> Result<(), Failure> {
    let (name, value) = entry
        .split_once('=')
        .ok_or_else(|| invalid(format!("{what} = {entry:?}: expected NAME=value, as in PBS_TOL=0.01")))?;
    let name = name.trim();
    if !PbsOptions::SETTINGS.contains(&name) {
        return Err(invalid(format!(
            "{what} = {entry:?}: unknown setting {name:?}; expected one of {}",
            PbsOptions::SETTINGS.join(", ")
        )));
    }
    if out.iter().any(|(n, _)| n == name) {
        return Err(invalid(format!("{what} = {entry:?}: {name} given twice")));
    }
    out.push((name.to_string(), value.to_string()));
    Ok(())
}

/// Worker threads of `e` (0 for NULL).
///
/// # Safety
/// `e` is NULL or comes from [`pbs_executor_new`].
#[no_mangle]
pub unsafe extern "C" fn pbs_executor_threads(e: *const ExecutorHandle) -> usize {
    // SAFETY: the caller's contract.
    unsafe { e.as_ref() }.map_or(0, |e| e.threads)
}

impl PhaseStats {
    /// The C view of a phase's statistics.
    fn of(s: &pbs_scheduler::PhaseStats) -> PhaseStats {
        PhaseStats {
            wall_ms: s.wall.as_secs_f64() * 1e3,
            efficiency: s.efficiency().unwrap_or(1.0),
            affinity: s.affinity().unwrap_or(-1.0),
        }
    }
}

/// Runs `task(ctx, k)` once for every box `k`; `stats` may be NULL. `TaskFailed` when a task
/// returned non-zero.
///
/// # Safety
/// `e` comes from [`pbs_executor_new`] and is not used by another thread meanwhile; `task`
/// may run concurrently with `ctx` (pbs.h); `stats` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pbs_executor_run_phase(
    e: *mut ExecutorHandle,
    task: Option<unsafe extern "C" fn(*mut c_void, usize) -> c_int>,
    ctx: *mut c_void,
    stats: *mut PhaseStats,
) -> Status {
    status(|| {
        let task = Callback { f: task.ok_or_else(|| null("task"))?, ctx };
        // SAFETY: the caller's contract.
        unsafe {
            phase_with_failures(e, "pbs_executor_run_phase", stats, false, |exec, failures| {
                exec.run_phase(&|k| match task.call(k) {
                    0 => {}
                    code => failures.record(k, code),
                })
            })
        }
    })
}

/// The body of the run-phase entry points: runs `run`, a phase whose tasks record their
/// failures, on `e`; fills `stats`; the failures (of boxes, or of `ranges`) become the result.
///
/// # Safety
/// As [`pbs_executor_run_phase`].
unsafe fn phase_with_failures(
    e: *mut ExecutorHandle,
    call: &str,
    stats: *mut PhaseStats,
    ranges: bool,
    run: impl FnOnce(&mut (dyn Executor + Send), &Failures) -> pbs_scheduler::PhaseStats,
) -> Result<(), Failure> {
    // SAFETY: the caller's contract.
    let e = unsafe { e.as_ref() }.ok_or_else(|| null("the executor"))?;
    let mut entered = e.enter(call)?;
    let failures = Failures::new();
    let s = run(entered.exec(), &failures);
    // SAFETY: NULL or writable (caller's contract).
    if let Some(out) = unsafe { stats.as_mut() } {
        *out = PhaseStats::of(&s);
    }
    failures.into_failure(&e.grid, ranges).map_or(Ok(()), Err)
}

/// [`pbs_executor_run_phase`] with a task over ranges of boxes: `task(ctx, begin, end)` runs
/// the boxes `begin..end` (each once in the phase, ranges as the scheduler groups them), so
/// that tiny boxes cost one call per range, not per box.
///
/// # Safety
/// As [`pbs_executor_run_phase`].
#[no_mangle]
pub unsafe extern "C" fn pbs_executor_run_phase_ranges(
    e: *mut ExecutorHandle,
    task: Option<unsafe extern "C" fn(*mut c_void, usize, usize) -> c_int>,
    ctx: *mut c_void,
    stats: *mut PhaseStats,
) -> Status {
    status(|| {
        let task = Callback { f: task.ok_or_else(|| null("task"))?, ctx };
        // SAFETY: the caller's contract.
        unsafe {
            phase_with_failures(e, "pbs_executor_run_phase_ranges", stats, true, |exec, failures| {
                exec.run_phase_ranges(&|ks| {
                    let first = ks.start;
                    match task.call_range(ks) {
                        0 => {}
                        code => failures.record(first, code),
                    }
                })
            })
        }
    })
}

/// A phase that computes `value(ctx, k)` once for every box and writes their sum, added in
/// box order, to `sum`: the same bits under every scheduler and thread count. `stats` may
/// be NULL.
///
/// # Safety
/// As [`pbs_executor_run_phase`]; `sum` is writable and `stats` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pbs_executor_reduce_sum(
    e: *mut ExecutorHandle,
    value: Option<unsafe extern "C" fn(*mut c_void, usize) -> f64>,
    ctx: *mut c_void,
    sum: *mut f64,
    stats: *mut PhaseStats,
) -> Status {
    status(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { e.as_ref() }.ok_or_else(|| null("the executor"))?;
        let value = Callback { f: value.ok_or_else(|| null("value"))?, ctx };
        // SAFETY: writable or NULL (caller's contract); NULL is refused.
        let sum = unsafe { sum.as_mut() }.ok_or_else(|| null("sum"))?;
        let mut entered = e.enter("pbs_executor_reduce_sum")?;
        let (total, s) = pbs_scheduler::reduce_boxes(entered.exec(), |k| value.call(k), 0.0, |a, b| a + b);
        *sum = total;
        // SAFETY: NULL or writable (caller's contract).
        if let Some(out) = unsafe { stats.as_mut() } {
            *out = PhaseStats::of(&s);
        }
        Ok(())
    })
}

/// Ends an iteration (pbs may rebalance); `end` may be NULL.
///
/// # Safety
/// As [`pbs_executor_run_phase`]; `end` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pbs_executor_end_iteration(e: *mut ExecutorHandle, end: *mut IterationEnd) -> Status {
    status(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { e.as_ref() }.ok_or_else(|| null("the executor"))?;
        let r = e.enter("pbs_executor_end_iteration")?.exec().end_iteration();
        // SAFETY: NULL or writable (caller's contract).
        if let Some(out) = unsafe { end.as_mut() } {
            *out = IterationEnd::from(&r);
        }
        Ok(())
    })
}

/// Run-length hint: the run ends after `iterations` more calls of
/// [`pbs_executor_end_iteration`] (0 forgets it); "pbs" and the remappers then start no
/// rebalancing at the last one's end, and "pbs" none before it that the iterations left
/// would not repay. The other schedulers ignore it.
///
/// # Safety
/// As [`pbs_executor_end_iteration`].
#[no_mangle]
pub unsafe extern "C" fn pbs_executor_hint_iterations_left(e: *mut ExecutorHandle, iterations: u64) -> Status {
    status(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { e.as_ref() }.ok_or_else(|| null("the executor"))?;
        e.enter("pbs_executor_hint_iterations_left")?.exec().hint_iterations_left(iterations);
        Ok(())
    })
}

/// Runs `f(ctx, worker)` once on every worker thread.
///
/// # Safety
/// As [`pbs_executor_run_phase`], for `f`.
#[no_mangle]
pub unsafe extern "C" fn pbs_executor_on_each_thread(
    e: *mut ExecutorHandle,
    f: Option<unsafe extern "C" fn(*mut c_void, usize)>,
    ctx: *mut c_void,
) -> Status {
    status(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { e.as_ref() }.ok_or_else(|| null("the executor"))?;
        let f = Callback { f: f.ok_or_else(|| null("f"))?, ctx };
        e.enter("pbs_executor_on_each_thread")?.exec().on_each_thread(&|w| f.call(w));
        Ok(())
    })
}

/// An error unless the array `what` holds one entry (`n`) per box.
fn one_per_box(what: &str, n: usize, boxes: usize) -> Result<(), Failure> {
    if n == boxes {
        Ok(())
    } else {
        Err(invalid(format!("{what} holds {n} entries but the grid has {boxes} boxes")))
    }
}

/// Cost hints: `loads` (`n` entries, one per box, finite and ≥ 0), known in advance, map the
/// boxes now under "pbs"; `Unsupported` for the schedulers that do not balance.
///
/// # Safety
/// `e` is NULL or comes from [`pbs_executor_new`]; `loads` holds `n` readable entries.
#[no_mangle]
pub unsafe extern "C" fn pbs_executor_hint_loads(e: *mut ExecutorHandle, loads: *const f64, n: usize) -> Status {
    status(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { e.as_ref() }.ok_or_else(|| null("the executor"))?;
        if loads.is_null() {
            return Err(null("loads"));
        }
        let mut entered = e.enter("pbs_executor_hint_loads")?;
        let exec = entered.exec();
        one_per_box("loads", n, exec.boxes())?;
        // SAFETY: `loads` holds `n` readable entries (caller's contract), n = the boxes.
        let loads = unsafe { std::slice::from_raw_parts(loads, n) };
        if exec.hint_loads(loads)? {
            Ok(())
        } else {
            Err(Failure(
                Status::Unsupported,
                format!("the {} scheduler does not balance: no use for hints", exec.name()),
            ))
        }
    })
}

/// Motion hints: per box, the sum of its particles' velocities (`momentum`, `3 n` doubles:
/// x, y, z of box 0, then of box 1...; z is not read on a 2D grid) and their number
/// (`particles`, `n` entries), for "norcb", which cuts along the flow at its next remapping;
/// `Unsupported` for the other schedulers, which have no use for them.
///
/// # Safety
/// `e` is NULL or comes from [`pbs_executor_new`]; `momentum` holds `3 n` readable doubles and
/// `particles` `n`.
#[no_mangle]
pub unsafe extern "C" fn pbs_executor_hint_motion(
    e: *mut ExecutorHandle,
    momentum: *const f64,
    particles: *const f64,
    n: usize,
) -> Status {
    status(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { e.as_ref() }.ok_or_else(|| null("the executor"))?;
        if momentum.is_null() {
            return Err(null("momentum"));
        }
        if particles.is_null() {
            return Err(null("particles"));
        }
        let mut entered = e.enter("pbs_executor_hint_motion")?;
        let exec = entered.exec();
        if !exec.wants_motion() {
            return Err(Failure(
                Status::Unsupported,
                format!("the {} scheduler does not cut along the flow: no use for motion hints", exec.name()),
            ));
        }
        one_per_box("particles", n, exec.boxes())?;
        // SAFETY: the caller's contract, n = the boxes; the arrays outlive the call.
        let (momentum, particles) = unsafe { motion_slices(momentum, particles, n) };
        exec.hint_motion(momentum, particles)?;
        Ok(())
    })
}

/// The motion hints C lays out (`3 n` doubles, x, y, z of each box in turn, and `n` counts)
/// as the slices [`Executor::hint_motion`] takes.
///
/// # Safety
/// `momentum` holds `3 n` readable doubles and `particles` `n`, both alive and unchanged for
/// `'a`.
unsafe fn motion_slices<'a>(momentum: *const f64, particles: *const f64, n: usize) -> (&'a [[f64; 3]], &'a [f64]) {
    // SAFETY: `momentum` holds 3 n readable doubles for 'a (the contract); a `[f64; 3]` is three
    // doubles with a double's alignment and no padding, so n of them are those 3 n doubles.
    let momentum = unsafe { std::slice::from_raw_parts(momentum.cast::<[f64; 3]>(), n) };
    // SAFETY: `particles` holds n readable doubles for 'a (the contract).
    let particles = unsafe { std::slice::from_raw_parts(particles, n) };
    (momentum, particles)
}

/// Writes the worker that will run each box in the next phase into `owners` (`n` entries).
///
/// # Safety
/// `e` is NULL or comes from [`pbs_executor_new`]; `owners` holds `n` writable entries.
#[no_mangle]
pub unsafe extern "C" fn pbs_executor_owners(e: *const ExecutorHandle, owners: *mut u32, n: usize) -> Status {
    status(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { e.as_ref() }.ok_or_else(|| null("the executor"))?;
        if owners.is_null() {
            return Err(null("owners"));
        }
        let mut entered = e.enter("pbs_executor_owners")?;
        let exec = entered.exec();
        let planned = exec.planned_owners().ok_or_else(|| {
            Failure(
                Status::Unsupported,
                format!("the {} scheduler decides who runs a box only as the phase runs", exec.name()),
            )
        })?;
        one_per_box("owners", n, planned.len())?;
        // SAFETY: `owners` holds `n` entries (caller's contract), checked equal to the boxes.
        unsafe { std::slice::from_raw_parts_mut(owners, n) }.copy_from_slice(&planned);
        Ok(())
    })
}

/// The worker running the caller inside a phase, or −1 outside.
#[no_mangle]
pub extern "C" fn pbs_current_worker() -> c_int {
    current_worker().map_or(-1, |w| w as c_int)
}

/// Stops the workers and frees `e`; NULL is allowed. Called while `e` is in a call (from one
/// of its own tasks), it frees nothing and records the error for [`crate::pbs_last_error`].
/// In a process forked since `e` started its threads it frees nothing either: the threads
/// are not there to stop (the memory goes with the process).
///
/// # Safety
/// `e` is NULL or comes from [`pbs_executor_new`] and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn pbs_executor_free(e: *mut ExecutorHandle) {
    status(|| {
        // SAFETY: the caller's contract.
        let Some(handle) = (unsafe { e.as_ref() }) else { return Ok(()) };
        if !handle.born.is_here() {
            return Ok(());
        }
        // Freeing the executor from inside its own phase would pull it from under the call.
        std::mem::forget(handle.enter("pbs_executor_free")?);
        // SAFETY: created by Box::into_raw in pbs_executor_new (caller's contract), and no
        // call is using it: `busy` was free and is now held for good.
        drop(unsafe { Box::from_raw(e) });
        Ok(())
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::last_error;
    use std::sync::atomic::AtomicU32;
    use std::time::Duration;

    /// The C views give times in milliseconds, an affinity not measured as −1 and a phase
    /// that took no time as fully efficient, as `pbs.h` documents them.
    #[test]
    fn the_c_views_of_phases_and_iteration_ends_are_in_milliseconds() {
        let end = pbs_scheduler::executor::IterationEnd {
            rebalanced: true,
            rebalance_time: Duration::from_micros(2_500),
            migrations: 7,
            max_avg: 1.25,
            ..Default::default()
        };
        let c = IterationEnd::from(&end);
        assert_eq!((c.rebalanced, c.migrations, c.max_avg), (1, 7, 1.25));
        assert!((c.rebalance_ms - 2.5).abs() < 1e-12, "{c:?}");
        let phase = pbs_scheduler::PhaseStats {
            wall: Duration::from_micros(1_500),
            busy: vec![Duration::from_micros(1_500), Duration::from_micros(750)],
            ..Default::default()
        };
        let c = PhaseStats::of(&phase);
        assert!((c.wall_ms - 1.5).abs() < 1e-12 && (c.efficiency - 0.75).abs() < 1e-12, "{c:?}");
        assert_eq!(c.affinity, -1.0, "no pair of phases compared");
        assert_eq!(PhaseStats::of(&pbs_scheduler::PhaseStats::default()).efficiency, 1.0);
    }

    /// Every executor, by the name `pbs_executor_new` takes.
    fn schedulers() -> Vec<std::ffi::CString> {
        pbs_scheduler::runtime::EXECUTORS.iter().map(|n| std::ffi::CString::new(*n).unwrap()).collect()
    }

    /// Counts executions per box and checks the worker id seen inside the task.
    struct Counts {
        runs: Vec<AtomicU32>,
        threads: usize,
        bad_worker: AtomicU32,
    }

    impl Counts {
        fn new(boxes: usize, threads: usize) -> Counts {
            Counts { runs: (0..boxes).map(|_| AtomicU32::new(0)).collect(), threads, bad_worker: AtomicU32::new(0) }
        }
    }

    unsafe extern "C" fn count(ctx: *mut c_void, k: usize) -> c_int {
        // SAFETY: ctx is a &Counts in these tests.
        let c = unsafe { &*(ctx as *const Counts) };
        c.runs[k].fetch_add(1, Ordering::Relaxed);
        let w = pbs_current_worker();
        if w < 0 || w as usize >= c.threads {
            c.bad_worker.fetch_add(1, Ordering::Relaxed);
        }
        0
    }

    /// Counts too, and fails on boxes 40, 41 and 90 in odd phases (codes 7, 8 and 9).
    unsafe extern "C" fn count_and_fail(ctx: *mut c_void, k: usize) -> c_int {
        // SAFETY: as `count`.
        let c = unsafe { &*(ctx as *const Counts) };
        let phase = c.runs[k].fetch_add(1, Ordering::Relaxed) + 1;
        match (phase % 2, k) {
            (1, 40) => 7,
            (1, 41) => 8,
            (1, 90) => 9,
            _ => 0,
        }
    }

    #[test]
    fn a_failing_task_fails_its_phase_by_name_and_the_executor_goes_on() {
        for name in schedulers() {
            // SAFETY: the strings are NULL or NUL-terminated literals.
            let e = unsafe { pbs_executor_new(name.as_ptr(), 10, 10, 1, 3, 0) };
            let c = Counts::new(100, 3);
            let ctx = &c as *const Counts as *mut c_void;
            for phase in 1..=4u32 {
                let mut stats = PhaseStats::default();
                // SAFETY: a live handle from its _new (or NULL, refused); pointers valid for the call.
                let s = unsafe { pbs_executor_run_phase(e, Some(count_and_fail), ctx, &mut stats) };
                assert!(c.runs.iter().all(|r| r.load(Ordering::Relaxed) == phase), "{name:?}: a box was skipped");
                assert!(stats.wall_ms > 0.0, "stats are filled in a failed phase too");
                if phase % 2 == 1 {
                    assert_eq!(s, Status::TaskFailed, "{name:?}");
                    assert_eq!(
                        last_error().unwrap(),
                        "the task failed at box 40 (x=0, y=4, z=0) with code 7 (2 other boxes failed too); every other box ran"
                    );
                } else {
                    assert_eq!(s, Status::Ok, "{name:?}: the executor is usable after a failed phase");
                }
                // SAFETY: a live handle from its _new (or NULL, refused); pointers valid for the call.
                assert_eq!(unsafe { pbs_executor_end_iteration(e, std::ptr::null_mut()) }, Status::Ok);
            }
            // SAFETY: a handle from its _new (or NULL), not used afterwards.
            unsafe { pbs_executor_free(e) };
        }
    }

    /// A phase's failure names the lowest failing box (or range) and counts the others, in
    /// the singular for one; no failure, no message.
    #[test]
    fn a_phase_s_failure_names_its_lowest_box_and_counts_the_others() {
        let grid = Grid::new(10, 10).unwrap();
        let failed = |records: &[(usize, c_int)], ranges: bool| {
            let f = Failures::new();
            records.iter().for_each(|&(k, code)| f.record(k, code));
            f.into_failure(&grid, ranges).map(|Failure(s, m)| (s, m))
        };
        assert_eq!(failed(&[], false), None);
        let one = failed(&[(42, 3)], false).unwrap();
        assert_eq!(
            one,
            (Status::TaskFailed, "the task failed at box 42 (x=2, y=4, z=0) with code 3; every other box ran".into())
        );
        let two = failed(&[(57, 1), (12, -4)], false).unwrap().1;
        assert_eq!(
            two,
            "the task failed at box 12 (x=2, y=1, z=0) with code -4 (1 other box failed too); every other box ran"
        );
        let ranges = failed(&[(30, 2), (60, 5)], true).unwrap().1;
        assert_eq!(
            ranges,
            "the task failed on the range starting at box 30 (x=0, y=3, z=0) with code 2 (1 other range failed too); every other range ran"
        );
    }

    /// A pin value C has no constant for is refused by name, with the three it takes.
    #[test]
    fn an_unknown_pin_value_is_refused_by_name() {
        // SAFETY: a NUL-terminated literal.
        let e = unsafe { pbs_executor_new(c"static".as_ptr(), 4, 4, 1, 2, 7) };
        assert!(e.is_null());
        let message = last_error().unwrap();
        assert!(message.starts_with("pin = 7: expected 0 (PBS_PIN_OFF), 1"), "{message}");
        assert_eq!(crate::status::pbs_last_error_status(), Status::InvalidArgument);
    }

    #[test]
    fn every_scheduler_runs_every_box_once_per_phase() {
        for name in schedulers() {
            // 126 boxes: 9 × 7 × 2.
            for threads in 1..=3 {
                // SAFETY: the strings are NULL or NUL-terminated literals.
                let e = unsafe { pbs_executor_new(name.as_ptr(), 9, 7, 2, threads, 0) };
                assert!(!e.is_null(), "{:?}", last_error());
                // SAFETY: a live handle from its _new (or NULL, refused); pointers valid for the call.
                assert_eq!(unsafe { pbs_executor_threads(e) }, threads);
                let c = Counts::new(126, threads);
                for phase in 1..=3 {
                    let mut stats = PhaseStats::default();
                    // SAFETY: a live handle from its _new (or NULL, refused); buffers of the lengths passed.
                    let s = unsafe {
                        pbs_executor_run_phase(e, Some(count), &c as *const Counts as *mut c_void, &mut stats)
                    };
                    assert_eq!(s, Status::Ok);
                    assert!(c.runs.iter().all(|r| r.load(Ordering::Relaxed) == phase), "{name:?} {threads}");
                    assert!(stats.wall_ms > 0.0 && stats.efficiency >= 0.0);
                    assert!(phase == 1 || (0.0..=1.0).contains(&stats.affinity), "{stats:?}");
                    let mut end = IterationEnd::default();
                    // SAFETY: a live handle from its _new (or NULL, refused); pointers valid for the call.
                    assert_eq!(unsafe { pbs_executor_end_iteration(e, &mut end) }, Status::Ok);
                }
                assert_eq!(c.bad_worker.load(Ordering::Relaxed), 0, "pbs_current_worker out of range");
                assert_eq!(pbs_current_worker(), -1);
                // SAFETY: a handle from its _new (or NULL), not used afterwards.
                unsafe { pbs_executor_free(e) };
            }
        }
    }

    /// A range task: counts each box of its range, and fails (code 5) on a range holding box 40
    /// in odd phases.
    unsafe extern "C" fn count_range(ctx: *mut c_void, begin: usize, end: usize) -> c_int {
        let mut failed = 0;
        for k in begin..end {
            // SAFETY: as `count_and_fail`.
            if unsafe { count_and_fail(ctx, k) } != 0 && k == 40 {
                failed = 5;
            }
        }
        failed
    }

    #[test]
    fn range_tasks_run_every_box_once_and_name_a_failing_range() {
        for name in schedulers() {
            // SAFETY: the strings are NULL or NUL-terminated literals.
            let e = unsafe { pbs_executor_new(name.as_ptr(), 10, 10, 1, 3, 0) };
            let c = Counts::new(100, 3);
            let ctx = &c as *const Counts as *mut c_void;
            for phase in 1..=4u32 {
                // SAFETY: a live handle from its _new; pointers valid for the call.
                let s = unsafe { pbs_executor_run_phase_ranges(e, Some(count_range), ctx, std::ptr::null_mut()) };
                assert!(
                    c.runs.iter().all(|r| r.load(Ordering::Relaxed) == phase),
                    "{name:?}: a box skipped or run twice"
                );
                if phase % 2 == 1 {
                    assert_eq!(s, Status::TaskFailed, "{name:?}");
                    let m = last_error().unwrap();
                    assert!(
                        m.starts_with("the task failed on the range starting at box ") && m.contains("with code 5"),
                        "{m}"
                    );
                    assert!(m.ends_with("every other range ran"), "{m}");
                } else {
                    assert_eq!(s, Status::Ok, "{name:?}");
                }
                // SAFETY: a live handle from its _new.
                assert_eq!(unsafe { pbs_executor_end_iteration(e, std::ptr::null_mut()) }, Status::Ok);
            }
            // SAFETY: a NULL task is refused by name.
            let s = unsafe { pbs_executor_run_phase_ranges(e, None, ctx, std::ptr::null_mut()) };
            assert_eq!((s, last_error().unwrap()), (Status::NullPointer, "task is NULL".to_string()));
            // SAFETY: a handle from its _new, not used afterwards.
            unsafe { pbs_executor_free(e) };
        }
    }

    unsafe extern "C" fn mark_worker(ctx: *mut c_void, w: usize) {
        // SAFETY: ctx is a [AtomicU32] of one entry per worker in this test.
        let seen = unsafe { &*(ctx as *const [AtomicU32; 3]) };
        seen[w].fetch_add(1, Ordering::Relaxed);
    }

    #[test]
    fn owners_for_planned_schedulers_and_a_clear_refusal_for_dynamic_ones() {
        // SAFETY: the strings are NULL or NUL-terminated literals.
        let e = unsafe { pbs_executor_new(c"static".as_ptr(), 4, 4, 1, 2, 0) };
        let mut owners = vec![u32::MAX; 16];
        // SAFETY: a live handle from its _new (or NULL, refused); pointers valid for the call.
        assert_eq!(unsafe { pbs_executor_owners(e, owners.as_mut_ptr(), 16) }, Status::Ok);
        assert_eq!(owners, [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1]);
        // SAFETY: a live handle from its _new (or NULL, refused); pointers valid for the call.
        assert_eq!(unsafe { pbs_executor_owners(e, owners.as_mut_ptr(), 15) }, Status::InvalidArgument);
        assert!(last_error().unwrap().contains("15 entries but the grid has 16 boxes"));
        let seen = [AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)];
        // SAFETY: a live handle from its _new (or NULL, refused); pointers valid for the call.
        let s = unsafe { pbs_executor_on_each_thread(e, Some(mark_worker), &seen as *const _ as *mut c_void) };
        assert_eq!(s, Status::Ok);
        assert_eq!(seen.iter().map(|s| s.load(Ordering::Relaxed)).collect::<Vec<_>>(), [1, 1, 0]);
        // SAFETY: a handle from its _new (or NULL), not used afterwards.
        unsafe { pbs_executor_free(e) };

        // SAFETY: the strings are NULL or NUL-terminated literals.
        let e = unsafe { pbs_executor_new(c"pbs".as_ptr(), 4, 4, 1, 2, 0) };
        // SAFETY: a live handle from its _new (or NULL, refused); pointers valid for the call.
        assert_eq!(unsafe { pbs_executor_owners(e, owners.as_mut_ptr(), 16) }, Status::Ok);
        assert_eq!(owners.iter().filter(|&&o| o == 0).count(), 8, "uniform start: an even split");
        // SAFETY: a handle from its _new (or NULL), not used afterwards.
        unsafe { pbs_executor_free(e) };

        // SAFETY: the strings are NULL or NUL-terminated literals.
        let e = unsafe { pbs_executor_new(c"eager".as_ptr(), 4, 4, 1, 2, 0) };
        // SAFETY: a live handle from its _new (or NULL, refused); pointers valid for the call.
        assert_eq!(unsafe { pbs_executor_owners(e, owners.as_mut_ptr(), 16) }, Status::Unsupported);
        assert!(last_error().unwrap().contains("eager scheduler decides who runs a box only as the phase runs"));
        // SAFETY: a handle from its _new (or NULL), not used afterwards.
        unsafe { pbs_executor_free(e) };
    }

    /// A task that calls its own executor: run_phase, end_iteration, owners, free.
    struct Nested {
        exec: *mut ExecutorHandle,
        runs: Vec<AtomicU32>,
        statuses: Vec<AtomicU32>,
    }
    // SAFETY: the other fields are atomics; the raw pointer is only passed back to the C
    // functions, each of which takes the handle's `busy` flag by compare-exchange before it
    // touches the executor: the phase holds it, so a task's call returns `Busy` untouched.
    unsafe impl Sync for Nested {}

    unsafe extern "C" fn call_back_in(ctx: *mut c_void, k: usize) -> c_int {
        // SAFETY: ctx is a &Nested in this test.
        let n = unsafe { &*(ctx as *const Nested) };
        n.runs[k].fetch_add(1, Ordering::Relaxed);
        let s = match k % 4 {
            // SAFETY: the executor of this phase, alive for all of it.
            0 => unsafe { pbs_executor_run_phase(n.exec, Some(count), ctx, std::ptr::null_mut()) },
            // SAFETY: as above.
            1 => unsafe { pbs_executor_end_iteration(n.exec, std::ptr::null_mut()) },
            2 => {
                let mut owners = vec![0u32; n.runs.len()];
                // SAFETY: as above; `owners` holds one entry per box.
                unsafe { pbs_executor_owners(n.exec, owners.as_mut_ptr(), owners.len()) }
            }
            _ => {
                // SAFETY: as above: refused, so the executor stays alive.
                unsafe { pbs_executor_free(n.exec) };
                Status::Busy
            }
        };
        if k % 4 != 3 && last_error().is_some_and(|m| !m.contains("the executor is already in a call")) {
            return 99;
        }
        n.statuses[k].store(s as u32, Ordering::Relaxed);
        0
    }

    #[test]
    fn a_task_calling_its_own_executor_is_refused_as_busy_and_the_phase_goes_on() {
        for name in schedulers() {
            for threads in [1, 3] {
                // SAFETY: the strings are NULL or NUL-terminated literals.
                let e = unsafe { pbs_executor_new(name.as_ptr(), 6, 5, 1, threads, 0) };
                let n = Nested {
                    exec: e,
                    runs: (0..30).map(|_| AtomicU32::new(0)).collect(),
                    statuses: (0..30).map(|_| AtomicU32::new(u32::MAX)).collect(),
                };
                let ctx = &n as *const Nested as *mut c_void;
                for phase in 1..=2 {
                    // SAFETY: a live handle from its _new (or NULL, refused); pointers valid for the call.
                    let s = unsafe { pbs_executor_run_phase(e, Some(call_back_in), ctx, std::ptr::null_mut()) };
                    assert_eq!(s, Status::Ok, "{name:?} {threads}: {:?}", last_error());
                    assert!(n.runs.iter().all(|r| r.load(Ordering::Relaxed) == phase), "{name:?} {threads}");
                    assert!(
                        n.statuses.iter().all(|s| s.load(Ordering::Relaxed) == Status::Busy as u32),
                        "{name:?} {threads}: every nested call was refused as busy"
                    );
                    // SAFETY: a live handle from its _new (or NULL, refused); pointers valid for the call.
                    assert_eq!(unsafe { pbs_executor_end_iteration(e, std::ptr::null_mut()) }, Status::Ok);
                }
                // SAFETY: a handle from its _new (or NULL), not used afterwards.
                unsafe { pbs_executor_free(e) };
            }
        }
    }

    #[test]
    fn a_grid_too_large_for_memory_is_refused_as_out_of_resources() {
        for name in schedulers() {
            // SAFETY: the strings are NULL or NUL-terminated literals.
            let e = unsafe { pbs_executor_new(name.as_ptr(), 65535, 65535, 1, 2, 0) };
            assert!(e.is_null(), "{name:?}");
            assert!(last_error().unwrap().starts_with("out of memory: "), "{name:?}: {:?}", last_error());
        }
    }

    /// Past the threads a process takes (`pbs_scheduler::thread_budget`), every scheduler
    /// refuses before it starts a thread. (The limit across executors is tested in
    /// `scheduler/tests/thread_budget.rs`, a process of its own: here other tests hold pools.)
    #[test]
    fn more_threads_than_a_process_takes_are_refused_by_every_scheduler() {
        for name in schedulers() {
            // SAFETY: the strings are NULL or NUL-terminated literals.
            let e = unsafe { pbs_executor_new(name.as_ptr(), 8, 8, 1, 5000, 0) };
            assert!(e.is_null(), "{name:?}");
            let why = last_error().unwrap();
            assert!(why.starts_with("5000 threads: a pool takes at most 4096"), "{name:?}: {why}");
        }
    }

    #[test]
    fn bad_arguments_are_refused_by_name() {
        // SAFETY: the strings are NULL or NUL-terminated literals.
        let e = unsafe { pbs_executor_new(c"omp".as_ptr(), 4, 4, 1, 2, 0) };
        assert!(e.is_null());
        assert!(last_error().unwrap().contains("unknown executor \"omp\"; expected one of pbs, ws, eager, static"));
        // SAFETY: the strings are NULL or NUL-terminated literals.
        assert!(unsafe { pbs_executor_new(std::ptr::null(), 4, 4, 1, 2, 0) }.is_null());
        assert_eq!(last_error().unwrap(), "scheduler is NULL");
        // SAFETY: the strings are NULL or NUL-terminated literals.
        assert!(unsafe { pbs_executor_new(c"pbs".as_ptr(), 4, 0, 1, 2, 0) }.is_null());
        assert!(last_error().unwrap().contains("empty grid"));
        // SAFETY: a live handle from its _new (or NULL, refused); buffers of the lengths passed.
        let s = unsafe {
            pbs_executor_run_phase(std::ptr::null_mut(), Some(count), std::ptr::null_mut(), std::ptr::null_mut())
        };
        assert_eq!((s, last_error().unwrap()), (Status::NullPointer, "the executor is NULL".into()));
        // SAFETY: the strings are NULL or NUL-terminated literals.
        let e = unsafe { pbs_executor_new(c"pbs".as_ptr(), 4, 4, 1, 2, 0) };
        // SAFETY: a live handle from its _new (or NULL, refused); pointers valid for the call.
        let s = unsafe { pbs_executor_run_phase(e, None, std::ptr::null_mut(), std::ptr::null_mut()) };
        assert_eq!((s, last_error().unwrap()), (Status::NullPointer, "task is NULL".into()));
        // SAFETY: a live handle from its _new (or NULL, refused); pointers valid for the call.
        assert_eq!(unsafe { pbs_executor_threads(std::ptr::null()) }, 0);
        // SAFETY: a handle from its _new (or NULL), not used afterwards.
        unsafe { pbs_executor_free(e) };
        // SAFETY: a handle from its _new (or NULL), not used afterwards.
        unsafe { pbs_executor_free(std::ptr::null_mut()) };
    }

    unsafe extern "C" fn tenth(_ctx: *mut c_void, k: usize) -> f64 {
        0.1 * k as f64
    }

    /// The C reduction gives, bit for bit, the serial sum in box order under every scheduler
    /// and thread count; NULLs are refused.
    #[test]
    fn the_c_reduction_sums_in_box_order() {
        let serial = (0..63).map(|k| 0.1 * k as f64).fold(0.0, |a, b| a + b);
        for name in schedulers() {
            for threads in 1..=3 {
                // SAFETY: valid name and sizes.
                let e = unsafe { pbs_executor_new(name.as_ptr(), 9, 7, 1, threads, 0) };
                let mut sum = f64::NAN;
                // SAFETY: a live handle, a C function of the right type, a writable sum.
                let s = unsafe {
                    pbs_executor_reduce_sum(e, Some(tenth), std::ptr::null_mut(), &mut sum, std::ptr::null_mut())
                };
                assert_eq!(s, Status::Ok);
                assert_eq!(sum.to_bits(), serial.to_bits(), "{name:?} on {threads} threads");
                let mut stats = PhaseStats { wall_ms: -1.0, efficiency: -1.0, affinity: -2.0 };
                // SAFETY: as above, and a writable `stats`.
                let s = unsafe { pbs_executor_reduce_sum(e, Some(tenth), std::ptr::null_mut(), &mut sum, &mut stats) };
                assert_eq!(s, Status::Ok);
                assert!(stats.wall_ms > 0.0 && (0.0..=1.0).contains(&stats.efficiency), "{name:?}: {stats:?}");
                // SAFETY: as above, NULL arguments are refused with a status.
                let s =
                    unsafe { pbs_executor_reduce_sum(e, None, std::ptr::null_mut(), &mut sum, std::ptr::null_mut()) };
                assert_eq!(s, Status::NullPointer);
                // SAFETY: as above.
                let s = unsafe {
                    pbs_executor_reduce_sum(
                        e,
                        Some(tenth),
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    )
                };
                assert_eq!(s, Status::NullPointer);
                // SAFETY: from pbs_executor_new, not used afterwards.
                unsafe { pbs_executor_free(e) };
            }
        }
    }

    #[test]
    fn hints_from_c_apply_to_pbs_and_are_refused_clearly_elsewhere() {
        let hints: Vec<f64> = (0..30).map(|k| if k < 6 { 9.0 } else { 1.0 }).collect();
        // SAFETY: valid names and sizes; the handles are freed below.
        let (pbs, st) = unsafe {
            (pbs_executor_new(c"pbs".as_ptr(), 6, 5, 1, 2, 0), pbs_executor_new(c"static".as_ptr(), 6, 5, 1, 2, 0))
        };
        // SAFETY: live handles; `hints` holds the lengths passed.
        unsafe {
            assert_eq!(pbs_executor_hint_loads(pbs, hints.as_ptr(), 30), Status::Ok);
            assert_eq!(pbs_executor_hint_loads(pbs, hints.as_ptr(), 29), Status::InvalidArgument);
            assert!(crate::status::last_error().unwrap().contains("29 entries"));
            assert_eq!(pbs_executor_hint_loads(pbs, std::ptr::null(), 30), Status::NullPointer);
            assert_eq!(pbs_executor_hint_loads(st, hints.as_ptr(), 30), Status::Unsupported);
            pbs_executor_free(pbs);
            pbs_executor_free(st);
        }
    }

    /// C's flat motion arrays read box by box (run under Miri by scripts/sanitize.sh).
    #[test]
    fn the_motion_arrays_are_read_as_c_lays_them_out() {
        let flat: Vec<f64> = (0..12).map(f64::from).collect();
        let counts = [5.0, 6.0, 7.0, 8.0];
        // SAFETY: 12 and 4 doubles, alive for the test.
        let (momentum, particles) = unsafe { motion_slices(flat.as_ptr(), counts.as_ptr(), 4) };
        assert_eq!(momentum, &[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0], [9.0, 10.0, 11.0]]);
        assert_eq!(particles, &counts);
    }

    /// Motion from C reaches "norcb": flowing along z on 4 × 4 × 8 boxes, where its RCB start
    /// cuts across z, each line of boxes along z ends in one part; the others refuse it.
    #[test]
    fn motion_hints_from_c_turn_norcb_along_the_flow() {
        let momentum: Vec<f64> = (0..128).flat_map(|_| [0.0, 0.0, 1.0]).collect();
        let particles = vec![1.0; 128];
        let mut owners = vec![0u32; 128];
        // SAFETY: valid names and sizes; the handles are freed below; the buffers hold the
        // lengths passed.
        unsafe {
            let norcb = pbs_executor_new(c"norcb".as_ptr(), 4, 4, 8, 2, 0);
            let pbs = pbs_executor_new(c"pbs".as_ptr(), 4, 4, 8, 2, 0);
            assert_eq!(pbs_executor_owners(norcb, owners.as_mut_ptr(), 128), Status::Ok);
            assert!(owners[..16].iter().all(|&o| o != owners[127]), "RCB first: {owners:?}");
            assert_eq!(pbs_executor_hint_motion(norcb, momentum.as_ptr(), particles.as_ptr(), 128), Status::Ok);
            assert_eq!(pbs_executor_hint_loads(norcb, particles.as_ptr(), 128), Status::Ok);
            assert_eq!(pbs_executor_owners(norcb, owners.as_mut_ptr(), 128), Status::Ok);
            assert!((0..16).all(|k| (1..8).all(|l| owners[k + 16 * l] == owners[k])), "{owners:?}");
            assert_eq!(
                pbs_executor_hint_motion(norcb, momentum.as_ptr(), particles.as_ptr(), 127),
                Status::InvalidArgument
            );
            assert_eq!(pbs_executor_hint_motion(norcb, momentum.as_ptr(), std::ptr::null(), 128), Status::NullPointer);
            assert!(crate::status::last_error().unwrap().contains("particles"));
            assert_eq!(pbs_executor_hint_motion(norcb, std::ptr::null(), particles.as_ptr(), 128), Status::NullPointer);
            assert!(crate::status::last_error().unwrap().contains("momentum"));
            assert_eq!(pbs_executor_owners(norcb, std::ptr::null_mut(), 128), Status::NullPointer);
            assert!(crate::status::last_error().unwrap().contains("owners"));
            let mut nan = momentum.clone();
            nan[3 * 5 + 2] = f64::NAN;
            assert_eq!(pbs_executor_hint_motion(norcb, nan.as_ptr(), particles.as_ptr(), 128), Status::InvalidArgument);
            assert!(crate::status::last_error().unwrap().contains("box 5"));
            assert_eq!(pbs_executor_hint_motion(pbs, momentum.as_ptr(), particles.as_ptr(), 128), Status::Unsupported);
            assert!(crate::status::last_error().unwrap().contains("no use for motion hints"));
            pbs_executor_free(norcb);
            pbs_executor_free(pbs);
        }
    }

    /// The settings array as C gives it: read up to its NULL entry, each entry split at its
    /// first `=`; refused entries named by index (run under Miri by scripts/sanitize.sh).
    #[test]
    fn the_settings_array_is_read_to_its_null_entry() {
        let read = |entries: &[&std::ffi::CStr]| {
            let mut c: Vec<*const c_char> = entries.iter().map(|s| s.as_ptr()).collect();
            c.push(std::ptr::null());
            // SAFETY: NUL-terminated literals, the array ends with NULL.
            unsafe { parse_settings(c.as_ptr()) }.map_err(|f| f.1)
        };
        // SAFETY: NULL is no settings.
        assert_eq!(unsafe { parse_settings(std::ptr::null()) }.unwrap(), vec![]);
        assert_eq!(read(&[]).unwrap(), vec![]);
        let got = read(&[c"PBS_TOL=0.01", c" PBS_CRITERION =periodic:3=x"]).unwrap();
        assert_eq!(
            got,
            vec![("PBS_TOL".to_string(), "0.01".to_string()), ("PBS_CRITERION".into(), "periodic:3=x".into())]
        );
        assert!(read(&[c"PBS_TOL=0.01", c"PBS_NUM_THREADS=4"]).unwrap_err().contains("settings[1]"));
        assert!(read(&[c"PBS_TOL"]).unwrap_err().contains("NAME=value"));
        // An entry that is not UTF-8.
        let latin = std::ffi::CString::new(vec![b'P', 0xe9]).unwrap();
        assert!(read(&[latin.as_c_str()]).unwrap_err().contains("UTF-8"));
    }

    /// Settings given in code: accepted by name for every scheduler, refused by name when
    /// unknown, repeated, malformed or out of range.
    #[test]
    fn settings_in_code_are_checked_and_named() {
        let new = |scheduler: &std::ffi::CStr, settings: &[&std::ffi::CStr]| {
            let mut c: Vec<*const c_char> = settings.iter().map(|s| s.as_ptr()).collect();
            c.push(std::ptr::null());
            // SAFETY: NUL-terminated literals, the array ends with NULL.
            let e = unsafe { pbs_executor_new_with(scheduler.as_ptr(), 4, 4, 1, 2, 0, c.as_ptr()) };
            let message = last_error();
            // SAFETY: a handle from its _new (or NULL), not used afterwards.
            unsafe { pbs_executor_free(e) };
            (!e.is_null(), message)
        };
        for scheduler in [c"pbs", c"static"] {
            assert!(new(scheduler, &[]).0);
            assert!(new(scheduler, &[c"PBS_TOL=0.01", c"PBS_CRITERION=periodic:5", c"PBS_STEAL=never"]).0);
            for (bad, words) in [
                (&[c"PBS_TOLL=0.01"][..], &["PBS_TOLL", "unknown setting", "PBS_CRITERION"][..]),
                (&[c"PBS_TOL"], &["settings[0]", "NAME=value"]),
                (&[c"PBS_TOL=2"], &["PBS_TOL", "2"]),
                (&[c"PBS_STEPS=3", c"PBS_STEPS=4"], &["settings[1]", "PBS_STEPS given twice"]),
                (&[c"PBS_CRITERION=sometimes"], &["PBS_CRITERION", "sometimes", "periodic:T"]),
            ] {
                let (made, message) = new(scheduler, bad);
                let message = message.unwrap_or_default();
                assert!(!made && words.iter().all(|w| message.contains(w)), "{bad:?}: {message}");
            }
        }
        // SAFETY: NULL settings are none.
        let e = unsafe { pbs_executor_new_with(c"pbs".as_ptr(), 4, 4, 1, 2, 0, std::ptr::null()) };
        assert!(!e.is_null());
        // SAFETY: a handle from its _new, not used afterwards.
        unsafe { pbs_executor_free(e) };
    }

    /// Box `k` spins 10 µs, and from iteration 30 on those that worker 0 owned at first 40 µs
    /// (after the first measured iteration and the check of a rebalancing it may have made).
    struct Jump {
        iteration: AtomicU32,
        heavy: Vec<bool>,
    }

    unsafe extern "C" fn first_owner_jumps(ctx: *mut c_void, k: usize) -> c_int {
        // SAFETY: ctx is a &Jump in this test.
        let jump = unsafe { &*(ctx as *const Jump) };
        let us = if jump.iteration.load(Ordering::Relaxed) >= 30 && jump.heavy[k] { 40 } else { 10 };
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_micros(us) {
            std::hint::spin_loop();
        }
        0
    }

    /// A criterion given in code decides: `never` leaves a jump in the load after the first
    /// rebalancings alone, `always` follows it, but not where every iteration is hinted to be
    /// the run's last. A NULL executor is refused.
    #[test]
    fn a_criterion_given_in_code_decides_the_rebalancings() {
        let late = |criterion: &std::ffi::CStr, last_each_time: bool| {
            let settings = [criterion.as_ptr(), std::ptr::null()];
            // SAFETY: NUL-terminated literals, the array ends with NULL.
            let e = unsafe { pbs_executor_new_with(c"pbs".as_ptr(), 8, 8, 1, 2, 0, settings.as_ptr()) };
            assert!(!e.is_null(), "{:?}", last_error());
            let mut owners = vec![0u32; 64];
            // SAFETY: a live handle; `owners` holds one entry per box.
            assert_eq!(unsafe { pbs_executor_owners(e, owners.as_mut_ptr(), 64) }, Status::Ok);
            let jump = Jump { iteration: AtomicU32::new(0), heavy: owners.iter().map(|&o| o == 0).collect() };
            let mut late = 0;
            for it in 0..60 {
                jump.iteration.store(it, Ordering::Relaxed);
                let ctx = &jump as *const Jump as *mut c_void;
                // SAFETY: a live handle; the task reads ctx as the Jump above.
                let status = unsafe { pbs_executor_run_phase(e, Some(first_owner_jumps), ctx, std::ptr::null_mut()) };
                assert_eq!(status, Status::Ok);
                if last_each_time {
                    // SAFETY: a live handle.
                    assert_eq!(unsafe { pbs_executor_hint_iterations_left(e, 1) }, Status::Ok);
                }
                let mut end = IterationEnd::default();
                // SAFETY: a live handle; `end` is writable.
                assert_eq!(unsafe { pbs_executor_end_iteration(e, &mut end) }, Status::Ok);
                late += usize::from(it >= 30 && end.rebalanced != 0);
            }
            // SAFETY: a handle from its _new, not used afterwards.
            unsafe { pbs_executor_free(e) };
            late
        };
        assert_eq!(late(c"PBS_CRITERION=never", false), 0, "never asked after the jump");
        assert!(late(c"PBS_CRITERION=always", false) >= 1, "asked every iteration, it follows the jump");
        assert_eq!(late(c"PBS_CRITERION=always", true), 0, "no rebalancing at a run's last iteration");
        // SAFETY: NULL is refused before any use.
        assert_eq!(unsafe { pbs_executor_hint_iterations_left(std::ptr::null_mut(), 3) }, Status::NullPointer);
    }
}
