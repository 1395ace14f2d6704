//! A fixed team of worker threads that runs one *phase* at a time: the caller broadcasts a job,
//! every worker (the caller itself is worker 0, as the master thread is in OpenMP) runs it with
//! its worker id, and the call returns when all have finished — the barrier between phases.
//!
//! Between phases workers spin briefly (phases of a grid code follow each other within
//! microseconds), then sleep on a condition variable, so an idle pool costs nothing
//! ([`WaitPolicy`]; `PBS_WAIT_POLICY=passive` sleeps at once, for a process whose other
//! runtime, OpenMP or TBB, needs the cores between pbs's phases; [`Pool::set_passive`] makes
//! one worker do so, for a thread it lends its core to). A panic in
//! a job is caught on the worker, the other workers finish the phase, and the first panic is
//! re-raised in the caller; the pool stays usable.
//!
//! # The protocol
//!
//! - A phase is `epoch += 1`. The caller publishes a pointer to the job in `job` (a slot on its
//!   own stack), sets `running` to the number of spawned workers, then bumps `epoch` (SeqCst,
//!   which releases the writes before it); a worker that sees the bump (SeqCst, which
//!   acquires them) reads the job, runs it, and decrements `running`. The caller waits for
//!   `running == 0` before it clears `job` and returns, so the job and its slot, whose
//!   lifetimes `run` erases, outlive every use. The slot also carries the caller's
//!   floating-point modes, which a worker takes before the job (`fp_env.rs`). No lock is
//!   taken to read the job: at 16 threads every worker taking one mutex at the start of every
//!   phase was a suspect for the phase's cost there (docs/results.md, "Sixteen threads").
//! - Sleeping never loses a wake-up: a waiter checks its condition with `sleep` locked and waits
//!   on the condition variable, which releases the lock atomically; a waker changes the state
//!   *before* it takes `sleep` to notify, so it either sees no waiter yet (who will then see the
//!   new state) or notifies one that is waiting. Waits are untimed. A waiter counts itself in
//!   `sleepers` while it holds `sleep`, and the waker, holding `sleep` too, notifies only when
//!   that count is not zero: when every thread is still spinning (phases in quick succession)
//!   a phase costs no futex system call.
//! - One phase at a time: `in_use` is taken for the whole of `run`. A second caller (another
//!   thread, or a job calling `run` on its own pool) is refused with a panic instead of sharing
//!   the job slot and the counter, which would skip workers or hang.
//!
//! `scripts/test.sh` model-checks this protocol with [loom](https://docs.rs/loom) (every
//! interleaving of 2–3 threads over a few phases and the shutdown): `tests/loom_pool.rs`, built
//! with `--cfg pbs_loom`, where this module takes its atomics, locks and threads from loom.

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};

#[cfg(pbs_loom)]
use loom::{
    sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering},
    sync::{Arc, Condvar, Mutex},
    thread::{Builder, JoinHandle},
};
#[cfg(not(pbs_loom))]
use std::{
    sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering},
    sync::{Arc, Condvar, Mutex},
    thread::{Builder, JoinHandle},
};

use crossbeam_utils::CachePadded;

use crate::error::Error;
use crate::fork::{Birth, FORKED};
use crate::pinning::CallerPin;
use crate::thread_budget::Reservation;

/// A job as the workers see it: called once per worker with the worker id.
type Job<'a> = dyn Fn(usize) + Sync + 'a;

/// What a worker runs first (pinning goes there).
pub type StartHook = std::sync::Arc<dyn Fn(usize) + Send + Sync>;

/// The most threads the pools of a process take together: 16 per core of a 256-core node.
/// Past a few thousand threads Linux runs out of memory maps (vm.max_map_count, 65530 by
/// default; a thread takes several), and the standard library then aborts the process inside
/// the new thread, where no error can be returned: 10 000 threads in one pool did so on the
/// 2-core VM, and 13,364 over five pools (see [`crate::thread_budget`]).
pub const MAX_THREADS: usize = 4096;

/// The panic message of a second, concurrent or nested, [`Pool::run`].
pub const BUSY: &str = "pbs: this pool is already running a phase: Pool::run was called again from \
one of its own jobs or from another thread, and a pool runs one phase at a time";

struct Shared {
    /// Incremented to start a phase (and once more to shut down).
    epoch: CachePadded<AtomicU64>,
    /// Workers (other than the caller) still running the current phase.
    running: CachePadded<AtomicUsize>,
    /// The current job's slot on the caller's stack (null between phases). Written by the
    /// caller before `epoch` is bumped and read by workers after they observe the bump;
    /// cleared only after `running` drops to zero.
    job: AtomicPtr<JobRef>,
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    shutdown: AtomicBool,
    /// Held by the one `run` in progress.
    in_use: AtomicBool,
    sleep: Mutex<()>,
    /// Threads waiting on `wake` or `done`; changed and read only with `sleep` held.
    sleepers: AtomicUsize,
    wake: Condvar,
    done: Condvar,
    /// How long a waiting thread spins before it sleeps, in nanoseconds ([`WaitPolicy`]).
    spin_ns: AtomicU64,
    /// Per worker: sleep at once when waiting, whatever the policy ([`Pool::set_passive`]).
    passive: Box<[AtomicBool]>,
}

/// What an idle worker does between phases (and the caller while it waits for the others).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitPolicy {
    /// Sleeps at once: no CPU taken from other runtimes, a wake-up's latency on every phase.
    Passive,
    /// Spins (yielding) for this long, then sleeps: phases that follow each other closely
    /// start without a wake-up, and an idle pool soon costs nothing.
    SpinThenSleep(std::time::Duration),
    /// Spins (yielding) until the next phase: the least latency, a CPU per worker always busy.
    Active,
}

impl WaitPolicy {
    /// The spin before sleeping by default.
    pub const DEFAULT: WaitPolicy = WaitPolicy::SpinThenSleep(std::time::Duration::from_micros(200));
    /// The environment variable naming a policy.
    pub const ENV: &'static str = "PBS_WAIT_POLICY";

    /// `PBS_WAIT_POLICY`: `passive`, `active`, or unset for [`WaitPolicy::DEFAULT`]; an error
    /// names another value.
    pub fn from_env() -> Result<WaitPolicy, Error> {
        Self::parse(std::env::var(Self::ENV).ok().as_deref())
    }

    /// [`WaitPolicy::from_env`] on a given value (`None`: unset).
    pub fn parse(value: Option<&str>) -> Result<WaitPolicy, Error> {
        match value.map(|v| v.trim().to_ascii_lowercase()) {
            None => Ok(Self::DEFAULT),
            Some(v) if v == "passive" => Ok(WaitPolicy::Passive),
            Some(v) if v == "active" => Ok(WaitPolicy::Active),
            Some(_) => Err(Error::Environment {
                name: Self::ENV,
                value: value.unwrap_or_default().to_string(),
                reason: "expected passive or active (unset: spin 200 µs, then sleep)",
            }),
        }
    }

    fn spin_ns(self) -> u64 {
        match self {
            WaitPolicy::Passive => 0,
            WaitPolicy::SpinThenSleep(d) => u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
            WaitPolicy::Active => u64::MAX,
        }
    }
}

/// A lifetime-erased pointer to the caller's job, valid while the caller waits in `run`, and
/// the caller's floating-point modes, which each worker takes before running it (see
/// `crate::fp_env`).
#[derive(Clone, Copy)]
struct JobRef {
    job: *const Job<'static>,
    fp_modes: u64,
}

/// A team of `threads` workers (the caller plus `threads - 1` spawned threads).
pub struct Pool {
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<()>>,
    threads: usize,
    /// The process's room for this pool's threads, given back after `drop` joined them.
    _room: Reservation,
    /// Where the caller runs its phases, if it keeps its own mask between them
    /// ([`Pool::pin_caller_in_phases`]).
    caller: Option<CallerPin>,
    /// The process the workers run in (see [`crate::fork`]).
    born: Birth,
}

impl Pool {
    /// Starts `threads - 1` worker threads, each with the stack of [`crate::stack`];
    /// `on_start(id)` runs first on each (pinning goes there). A `PBS_STACKSIZE` it cannot read
    /// is an error. If a thread cannot be started (the system's thread or memory limit), the
    /// ones already started are stopped and joined, and the error names which one failed. A
    /// pool that would take the process's pools past [`MAX_THREADS`] threads in all is refused
    /// before it starts any ([`Error::TooManyThreads`]).
    pub fn new(threads: usize, on_start: StartHook) -> Result<Pool, Error> {
        // The stack a task had on the thread a code ran it on before (see crate::stack).
        let stack = crate::stack::worker_stack_bytes()?;
        Self::start(threads, on_start, |id, body| {
            Builder::new().name(format!("pbs-worker-{id}")).stack_size(stack).spawn(body)
        })
    }

    /// [`Pool::new`] with the thread creation given (tests make it fail).
    fn start(
        threads: usize,
        on_start: StartHook,
        mut spawn: impl FnMut(usize, Box<dyn FnOnce() + Send>) -> std::io::Result<JoinHandle<()>>,
    ) -> Result<Pool, Error> {
        if threads == 0 {
            return Err(Error::NoThreads);
        }
        let room = Reservation::take(threads)?;
        let shared = Arc::new(Shared {
            epoch: CachePadded::new(AtomicU64::new(0)),
            running: CachePadded::new(AtomicUsize::new(0)),
            job: AtomicPtr::new(std::ptr::null_mut()),
            panic: Mutex::new(None),
            shutdown: AtomicBool::new(false),
            in_use: AtomicBool::new(false),
            sleep: Mutex::new(()),
            sleepers: AtomicUsize::new(0),
            wake: Condvar::new(),
            done: Condvar::new(),
            spin_ns: AtomicU64::new(WaitPolicy::DEFAULT.spin_ns()),
            passive: (0..threads).map(|_| AtomicBool::new(false)).collect(),
        });
        let born = Birth::now();
        let mut pool =
            Pool { shared, handles: Vec::with_capacity(threads - 1), threads, caller: None, _room: room, born };
        for id in 1..threads {
            let shared = Arc::clone(&pool.shared);
            let on_start = std::sync::Arc::clone(&on_start);
            let body = Box::new(move || {
                let _id = crate::executor::as_worker(id);
                on_start(id);
                worker_loop(&shared, id)
            });
            match spawn(id, body) {
                Ok(h) => pool.handles.push(h),
                // Dropping the partial pool stops and joins the workers already started.
                Err(source) => return Err(Error::Spawn { index: id, threads, source }),
            }
        }
        Ok(pool)
    }

    /// Number of workers, the caller included.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs each phase of the calling thread on `pin`'s CPUs: where it is when it is on one of
    /// them, else pinned for the phase, its own mask given back when the phase returns (see
    /// [`CallerPin::enter`]).
    pub fn pin_caller_in_phases(&mut self, pin: CallerPin) {
        self.caller = Some(pin);
    }

    /// How idle workers wait from now on.
    pub fn set_wait_policy(&self, policy: WaitPolicy) {
        self.shared.spin_ns.store(policy.spin_ns(), Ordering::Relaxed);
    }

    /// Whether worker `id` sleeps at once when it waits, from its next wait on, leaving its
    /// core to another thread (the pbs executor's balancer thread, while that worker lends
    /// it its core). Ignored for an `id` past the last worker.
    pub fn set_passive(&self, id: usize, passive: bool) {
        if let Some(p) = self.shared.passive.get(id) {
            p.store(passive, Ordering::Relaxed);
        }
    }

    /// Runs `job(id)` on every worker `id` in `0..threads` and returns when all are done. The
    /// caller runs `job(0)`. If any call panics, the first panic is re-raised here after the
    /// phase has finished everywhere.
    ///
    /// # Panics
    /// With [`BUSY`] if a phase of this pool is already running: a job calling `run` on its own
    /// pool (the panic then reaches the outer caller, after its phase) or two threads calling
    /// it at once; with [`FORKED`] in a process forked since the workers started, where they
    /// do not exist.
    pub fn run(&self, job: &(dyn Fn(usize) + Sync)) {
        if !self.born.is_here() {
            panic!("{FORKED}");
        }
        let s = &*self.shared;
        if s.in_use.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            panic!("{BUSY}");
        }
        let _release = InUse(&s.in_use);
        // Dropped when this returns or unwinds, after the phase: the caller's own mask comes back.
        let _caller_mask = self.caller.as_ref().and_then(CallerPin::enter);
        // SAFETY: only the lifetime is erased, for the duration of this call: we do not return
        // (nor unwind: job(0) runs under catch_unwind below) before `running` is zero, i.e.
        // before every worker is done with it, and `job` is cleared then. `slot` lives as long.
        let erased = unsafe { std::mem::transmute::<*const Job<'_>, *const Job<'static>>(job) };
        let slot = JobRef { job: erased, fp_modes: crate::fp_env::current() };
        if self.threads > 1 {
            // Relaxed: the epoch's SeqCst bump below releases it to the workers.
            s.job.store(std::ptr::from_ref(&slot).cast_mut(), Ordering::Relaxed);
            s.running.store(self.threads - 1, Ordering::SeqCst);
            s.epoch.fetch_add(1, Ordering::SeqCst);
            notify(s, &s.wake);
        }
        let mine = panic::catch_unwind(AssertUnwindSafe(|| {
            let _id = crate::executor::as_worker(0);
            job(0)
        }));
        if let Err(p) = mine {
            s.panic.lock().unwrap().get_or_insert(p);
        }
        if self.threads > 1 {
            wait_until(s, 0, || s.running.load(Ordering::SeqCst) == 0, &s.done);
            s.job.store(std::ptr::null_mut(), Ordering::Relaxed);
        }
        // Take the payload out before unwinding: unwinding while holding the guard would
        // poison the mutex and break the next phase.
        let caught = s.panic.lock().unwrap().take();
        if let Some(p) = caught {
            panic::resume_unwind(p);
        }
    }
}

/// Releases [`Shared::in_use`] when `run` returns or unwinds.
struct InUse<'a>(&'a AtomicBool);

impl Drop for InUse<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Worker `id` spins for the pool's [`WaitPolicy`] (not under loom, nor when it is passive),
/// then sleeps on `cv` until `ready()`. No wake-up is lost: `ready` is checked with `sleep`
/// held, and wakers change the state before taking it.
fn wait_until(s: &Shared, id: usize, ready: impl Fn() -> bool, cv: &Condvar) {
    #[cfg(not(pbs_loom))]
    {
        // Relaxed: a stale value only makes one round of the spin go on, or sleep, when the
        // other was asked. Checked in every round: a worker asked to leave its core while it
        // spins stops before its next yield, which would hand the core over for a time slice.
        let passive = &s.passive[id];
        if spin_until(&ready, || passive.load(Ordering::Relaxed), s.spin_ns.load(Ordering::Relaxed)) {
            return;
        }
    }
    #[cfg(pbs_loom)]
    let _ = id;
    let mut g = s.sleep.lock().unwrap();
    s.sleepers.fetch_add(1, Ordering::Relaxed);
    while !ready() {
        g = cv.wait(g).unwrap();
    }
    s.sleepers.fetch_sub(1, Ordering::Relaxed);
}

/// Wakes the threads sleeping on `cv`, if any: call it after changing the state they wait on.
/// `sleepers` is only touched with `sleep` held, so Relaxed suffices: the lock orders it.
fn notify(s: &Shared, cv: &Condvar) {
    let _g = s.sleep.lock().unwrap();
    if s.sleepers.load(Ordering::Relaxed) > 0 {
        cv.notify_all();
    }
}

/// Spins, then yields, for at most `spin_ns`, and not once `stop()`; whether `ready()` came
/// true.
#[cfg(not(pbs_loom))]
fn spin_until(ready: &impl Fn() -> bool, stop: impl Fn() -> bool, spin_ns: u64) -> bool {
    if spin_ns == 0 {
        return ready();
    }
    let start = std::time::Instant::now();
    let backoff = crossbeam_utils::Backoff::new();
    loop {
        if ready() {
            return true;
        }
        if stop() || start.elapsed().as_nanos() >= u128::from(spin_ns) {
            return false;
        }
        backoff.snooze();
    }
}

fn worker_loop(s: &Shared, id: usize) {
    let mut seen = 0u64;
    loop {
        wait_until(s, id, || s.epoch.load(Ordering::SeqCst) != seen, &s.wake);
        seen = s.epoch.load(Ordering::SeqCst);
        if s.shutdown.load(Ordering::SeqCst) {
            return;
        }
        // Relaxed: the SeqCst load of `epoch` that saw this phase acquired the caller's store.
        let slot = s.job.load(Ordering::Relaxed);
        assert!(!slot.is_null(), "a phase has a job");
        // SAFETY: `slot` points at the caller's `JobRef`, which the caller keeps alive and
        // unchanged until `running` reaches zero (see `run`); this worker has not decremented
        // it yet, and the job it names lives as long.
        let (f, fp_modes) = unsafe { (&*(*slot).job, (*slot).fp_modes) };
        crate::fp_env::adopt(fp_modes);
        if let Err(p) = panic::catch_unwind(AssertUnwindSafe(|| f(id))) {
            s.panic.lock().unwrap().get_or_insert(p);
        }
        if s.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            notify(s, &s.done);
        }
    }
}

/// A rebalancing's assignments run on the pool's threads, which would otherwise wait for it.
impl pbs::assign::Workers for Pool {
    fn count(&self) -> usize {
        self.threads
    }
    fn run(&self, parts: usize, job: &(dyn Fn(usize) + Sync)) {
        Pool::run(self, &|t| {
            if t < parts {
                job(t)
            }
        })
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if !self.born.is_here() {
            // A forked child: the workers are not here to stop, and waking them would take a
            // lock one of them may have held at the fork. Their handles are not detached either.
            std::mem::forget(std::mem::take(&mut self.handles));
            return;
        }
        self.shared.shutdown.store(true, Ordering::SeqCst);
        self.shared.epoch.fetch_add(1, Ordering::SeqCst);
        notify(&self.shared, &self.shared.wake);
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

// Under loom the pool is checked by tests/loom_pool.rs; these run real threads.
#[cfg(all(test, not(pbs_loom)))]
mod tests {
    use super::*;
    use std::time::Duration;

    fn pool(n: usize) -> Pool {
        Pool::new(n, Arc::new(|_| {})).unwrap()
    }

    fn panic_text(p: Box<dyn Any + Send>) -> String {
        p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap()
    }

    #[test]
    fn a_job_calling_run_on_its_own_pool_is_refused_and_the_pool_goes_on() {
        for n in 1..=3 {
            let p = pool(n);
            for nester in 0..n {
                let ran = AtomicUsize::new(0);
                let r = panic::catch_unwind(AssertUnwindSafe(|| {
                    p.run(&|id| {
                        if id == nester {
                            p.run(&|_| {});
                        }
                        ran.fetch_add(1, Ordering::Relaxed);
                    })
                }));
                assert_eq!(panic_text(r.unwrap_err()), BUSY, "{n} threads, nested on worker {nester}");
                assert_eq!(ran.load(Ordering::Relaxed), n - 1, "every other worker finished its job");
                let count = AtomicUsize::new(0);
                p.run(&|_| {
                    count.fetch_add(1, Ordering::Relaxed);
                });
                assert_eq!(count.load(Ordering::Relaxed), n);
            }
        }
    }

    #[test]
    fn a_second_thread_calling_run_during_a_phase_is_refused() {
        let p = pool(2);
        let (entered, leave) = (AtomicBool::new(false), AtomicBool::new(false));
        std::thread::scope(|s| {
            s.spawn(|| {
                p.run(&|id| {
                    if id == 0 {
                        entered.store(true, Ordering::SeqCst);
                        while !leave.load(Ordering::SeqCst) {
                            std::thread::yield_now();
                        }
                    }
                })
            });
            while !entered.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            let r = panic::catch_unwind(AssertUnwindSafe(|| p.run(&|_| {})));
            leave.store(true, Ordering::SeqCst);
            assert_eq!(panic_text(r.unwrap_err()), BUSY);
        });
        let count = AtomicUsize::new(0);
        p.run(&|_| {
            count.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(count.load(Ordering::Relaxed), 2, "the first caller's phase released the pool");
    }

    #[test]
    fn a_thread_that_cannot_start_is_an_error_and_the_started_ones_are_joined() {
        let alive = Arc::new(AtomicUsize::new(0));
        let started = Arc::new(AtomicUsize::new(0));
        let hook: StartHook = {
            let started = Arc::clone(&started);
            Arc::new(move |_| {
                started.fetch_add(1, Ordering::SeqCst);
            })
        };
        let r = Pool::start(6, hook, |id, body| {
            if id == 4 {
                return Err(std::io::Error::from_raw_os_error(libc::EAGAIN));
            }
            let alive = Arc::clone(&alive);
            alive.fetch_add(1, Ordering::SeqCst);
            std::thread::Builder::new().spawn(move || {
                body();
                alive.fetch_sub(1, Ordering::SeqCst);
            })
        });
        let e = r.err().expect("thread 4 failed to start");
        assert!(e.to_string().starts_with("could not start worker thread 4 of 6"), "{e}");
        assert_eq!(alive.load(Ordering::SeqCst), 0, "threads 1-3 were stopped and joined");
        assert_eq!(started.load(Ordering::SeqCst), 3);
        assert!(matches!(Pool::new(0, Arc::new(|_| {})), Err(Error::NoThreads)));
    }

    #[test]
    fn every_worker_runs_each_phase_once() {
        for n in 1..=4 {
            let p = pool(n);
            for _ in 0..100 {
                let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                p.run(&|id| {
                    hits[id].fetch_add(1, Ordering::Relaxed);
                });
                assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
            }
        }
    }

    #[test]
    fn a_panic_reaches_the_caller_and_the_pool_stays_usable() {
        let p = pool(3);
        for victim in 0..3 {
            let r = panic::catch_unwind(AssertUnwindSafe(|| {
                p.run(&|id| {
                    if id == victim {
                        panic!("box exploded on worker {id}");
                    }
                })
            }));
            let msg = r.unwrap_err();
            let text = msg.downcast_ref::<String>().unwrap();
            assert_eq!(text, &format!("box exploded on worker {victim}"));
            let count = AtomicUsize::new(0);
            p.run(&|_| {
                count.fetch_add(1, Ordering::Relaxed);
            });
            assert_eq!(count.load(Ordering::Relaxed), 3);
        }
    }

    #[test]
    fn every_wait_policy_runs_every_phase_and_a_bad_one_is_named() {
        for policy in [WaitPolicy::Passive, WaitPolicy::DEFAULT, WaitPolicy::Active] {
            let p = pool(3);
            p.set_wait_policy(policy);
            for _ in 0..50 {
                let count = AtomicUsize::new(0);
                p.run(&|_| {
                    count.fetch_add(1, Ordering::Relaxed);
                });
                assert_eq!(count.load(Ordering::Relaxed), 3, "{policy:?}");
            }
        }
        assert_eq!(WaitPolicy::parse(Some(" Passive ")).unwrap(), WaitPolicy::Passive);
        assert_eq!(WaitPolicy::parse(Some("ACTIVE")).unwrap(), WaitPolicy::Active);
        assert_eq!(WaitPolicy::parse(None).unwrap(), WaitPolicy::DEFAULT);
        let e = WaitPolicy::parse(Some("sometimes")).unwrap_err().to_string();
        assert_eq!(e, "PBS_WAIT_POLICY=\"sometimes\": expected passive or active (unset: spin 200 µs, then sleep)");
    }

    /// A wait spins until its condition holds, until it is told to stop, or until its time is
    /// up; with no time at all it only looks once.
    #[test]
    #[cfg_attr(miri, ignore = "spins on the wall clock")]
    fn a_spin_ends_when_ready_when_stopped_or_when_its_time_is_up() {
        let calls = AtomicUsize::new(0);
        let third_look = || calls.fetch_add(1, Ordering::Relaxed) >= 2;
        assert!(spin_until(&third_look, || false, u64::MAX), "ready on the third look");
        assert!(spin_until(&|| true, || false, 0) && !spin_until(&|| false, || false, 0));
        let t = std::time::Instant::now();
        assert!(!spin_until(&|| false, || false, 2_000_000));
        assert!(t.elapsed() >= Duration::from_millis(2), "spun its 2 ms: {:?}", t.elapsed());
        assert!(!spin_until(&|| false, || true, u64::MAX), "stopped");
    }

    /// The pool runs a rebalancing's assignment parts, one per worker at most.
    #[test]
    fn the_pool_runs_assignment_parts_once_each() {
        use pbs::assign::Workers;
        let p = pool(3);
        assert_eq!(Workers::count(&p), 3);
        let runs: Vec<AtomicUsize> = (0..3).map(|_| AtomicUsize::new(0)).collect();
        Workers::run(&p, 2, &|part| {
            runs[part].fetch_add(1, Ordering::Relaxed);
        });
        let runs: Vec<usize> = runs.iter().map(|r| r.load(Ordering::Relaxed)).collect();
        assert_eq!(runs, [1, 1, 0]);
    }

    /// What each policy makes a waiting worker spin, set for the whole pool or made passive
    /// for one worker (an id past the last is ignored).
    #[test]
    fn wait_policies_are_spins_and_one_worker_can_be_made_passive() {
        let spins = [WaitPolicy::Passive, WaitPolicy::DEFAULT, WaitPolicy::Active].map(WaitPolicy::spin_ns);
        assert_eq!(spins, [0, 200_000, u64::MAX]);
        let p = pool(3);
        for policy in [WaitPolicy::Active, WaitPolicy::Passive] {
            p.set_wait_policy(policy);
            assert_eq!(p.shared.spin_ns.load(Ordering::Relaxed), policy.spin_ns());
        }
        p.set_passive(2, true);
        p.set_passive(3, true);
        let passive: Vec<bool> = p.shared.passive.iter().map(|w| w.load(Ordering::Relaxed)).collect();
        assert_eq!(passive, [false, false, true]);
        p.set_passive(2, false);
        assert!(!p.shared.passive[2].load(Ordering::Relaxed));
    }

    /// A caller pinned for the phases runs its part of a phase on worker 0's CPU and gets its
    /// own mask back after. (A caller already on that CPU runs where it is: each of up to ten
    /// phases pins to a CPU the caller was not on a moment before.)
    #[cfg(all(target_os = "linux", not(miri)))]
    #[test]
    fn the_caller_runs_its_part_of_a_phase_on_worker_0s_cpu() {
        let cpus = crate::pinning::process_cpus().expect("the process's CPUs");
        let own = crate::pinning::cpus_of_this_thread();
        if cpus.len() < 2 {
            eprintln!("skipped: the process may use one CPU, so pinning the caller changes nothing");
            return;
        }
        let mut p = pool(2);
        let pinned = (0..10).any(|_| {
            // A CPU other than the one the caller is on now.
            // SAFETY: sched_getcpu has no preconditions; it returns the calling thread's CPU.
            let here = unsafe { libc::sched_getcpu() };
            let other = *cpus.iter().find(|&&c| c as i32 != here).expect("two CPUs");
            p.pin_caller_in_phases(CallerPin::new(&[other]).unwrap());
            let seen = std::sync::Mutex::new(None);
            p.run(&|t| {
                if t == 0 {
                    *seen.lock().unwrap() = crate::pinning::cpus_of_this_thread();
                }
            });
            seen.into_inner().unwrap() == Some(vec![other])
        });
        assert!(pinned, "the caller ran no phase pinned to worker 0's CPU");
        assert_eq!(crate::pinning::cpus_of_this_thread(), own, "its own mask back");
    }

    #[test]
    fn idle_workers_sleep_and_wake_up() {
        let p = pool(2);
        std::thread::sleep(Duration::from_millis(20)); // past the spin, workers sleep
        let count = AtomicUsize::new(0);
        p.run(&|_| {
            count.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(count.load(Ordering::Relaxed), 2);
    }
}
