//! A background thread that runs one long job at a time beside the workers: the pbs
//! executor's balancer thread.
//!
//! `executors/pbs/overlap.rs` runs the balancer in the threads' idle time one unit (a step) at
//! a time, and a unit cannot be cut: once a step outlasts a phase's idle time, every phase
//! waits for it. On many threads this is the rule, not the exception (a step over a 128×128
//! grid and 64 vCores is about a millisecond, an md iteration a quarter of that). So the
//! executor hands such a rebalancing to one more thread and the workers go on under the old
//! mapping; it takes the new owners on at the first iteration boundary after the run has
//! come back, so a phase never sees its owners change and every box still runs once.
//!
//! What it costs: the thread has no core of its own. It takes the cores left idle at the end
//! of phases and between them (a worker yields, then sleeps) and otherwise shares one with a
//! worker, whose boxes its neighbours then steal. That cost shows in the iterations' times,
//! not as stopped time; the executor reports the thread's time beside the critical-path time
//! (`balancing_in_background`). Where the workers hold every CPU, the worker it shares a core
//! with is away for its time slice and the phases wait for that worker: on 16 cores at 16
//! threads, md's iterations grew by about the thread's time. The executor then counts that
//! time in the rebalancing's cost for its criterion.
//!
//! # The protocol
//!
//! - One job at a time goes out ([`Background::start`]) over a channel; the thread advances it
//!   unit by unit ([`Job::advance`]) until it has none left or `cancel` is set, and sends it
//!   back over a second channel. The owner takes it back at a point of its choosing without
//!   waiting ([`Background::try_take`]), or cancels and waits for it, one unit at most
//!   ([`Background::take_back`]). Each channel orders everything written before a send with
//!   the reads after the matching receive, so the job needs no lock.
//! - `cancel` is `Relaxed`: it only ends a run early, and is reset before a send while the
//!   thread is idle (no job is out), so a stale `true` cannot cut the next run.
//! - Asked to ([`Background::on_lent_core`]), the thread is bound to the CPUs of a worker that
//!   lends it its core (`executors/pbs/lending.rs`) and runs under Linux's `SCHED_IDLE`
//!   policy: it gets that core only when the worker does not want it, and the worker, woken,
//!   takes it back at once rather than after the thread's time slice. Otherwise it runs under
//!   `SCHED_BATCH`, under which a woken thread does not preempt the running one: under the
//!   default policy sending a job at an iteration's end took 10–230 µs on md at 2 threads,
//!   most likely the woken thread running on the sender's core while the next phase waited
//!   for the sender to start it.
//! - The thread is spawned by [`Background::spawn`] or at the first job (it inherits the
//!   spawning thread's CPU mask: for the executor, the caller's own as it builds the
//!   executor) and ends when its [`Background`] drops:
//!   `Drop` sets `cancel`, sends a quit message and joins, which waits for one unit at most.
//!   (A quit message rather than a closed channel, so that loom, whose channels do not model
//!   hanging up, checks the drop too.)
//!
//! `scripts/test.sh` model-checks this protocol with loom (`tests/loom_background.rs`, built
//! with `--cfg pbs_loom`, where this module takes its atomics, channels and threads from loom).

#[cfg(pbs_loom)]
use loom::{
    sync::atomic::{AtomicBool, Ordering},
    sync::mpsc::{channel, Receiver, Sender},
    sync::Arc,
    thread::{Builder, JoinHandle},
};
#[cfg(not(pbs_loom))]
use std::{
    sync::atomic::{AtomicBool, Ordering},
    sync::mpsc::{channel, Receiver, Sender},
    sync::Arc,
    thread::{Builder, JoinHandle},
};

use std::sync::mpsc::TryRecvError;
use std::time::{Duration, Instant};

use crate::fork::Birth;

/// A job the background thread advances a unit at a time.
pub trait Job: Send + 'static {
    /// Runs one unit; false when there was none left (the job is done).
    fn advance(&mut self) -> bool;
}

/// A job sent back by the thread, with the time the thread spent on it.
pub struct Returned<J> {
    /// The job, done or, if cancelled, not.
    pub job: J,
    /// Wall time the thread spent advancing it.
    pub spent: Duration,
}

/// The background thread and the channels to it (see the module documentation).
pub struct Background<J: Job> {
    thread: Option<Thread<J>>,
    /// A job is out: sent and not yet taken back.
    out: bool,
    /// The CPUs of a lent core, if the thread is to run there under `SCHED_IDLE`.
    lent_core: Option<Vec<usize>>,
}

impl<J: Job> Default for Background<J> {
    fn default() -> Self {
        Background { thread: None, out: false, lent_core: None }
    }
}

struct Thread<J> {
    /// The process it runs in (see [`crate::fork`]).
    born: Birth,
    to: Sender<Option<J>>,
    from: Receiver<Returned<J>>,
    cancel: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
    /// Whether it runs on the lent core under `SCHED_IDLE`.
    on_lent_core: bool,
}

impl<J: Job> Background<J> {
    /// A background whose thread is bound to `cpus` (a worker's, lent) and runs under
    /// `SCHED_IDLE` (see the module documentation), if the system lets it:
    /// [`Background::on_lent_core`] says whether it does.
    pub fn for_lent_core(cpus: Vec<usize>) -> Self {
        Background { thread: None, out: false, lent_core: Some(cpus) }
    }

    /// Whether the thread has been started, bound to the lent core and under `SCHED_IDLE`.
    pub fn on_lent_core(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| t.on_lent_core)
    }

    /// Whether its thread has been started, for tests.
    #[cfg(test)]
    pub(crate) fn has_thread(&self) -> bool {
        self.thread.is_some()
    }

    /// Whether a job is out.
    pub fn is_out(&self) -> bool {
        self.out
    }

    /// Forgets a thread this process does not have, being a child forked since it started (see
    /// [`crate::fork`]): a job out there is lost with it, as with a thread that has gone, and the
    /// next job spawns a thread here. Its channels and handle are not dropped: that could take
    /// a lock the thread held at the fork.
    fn forget_if_forked(&mut self) {
        if self.thread.as_ref().is_some_and(|t| !t.born.is_here()) {
            std::mem::forget(self.thread.take());
            self.out = false;
        }
    }

    /// Spawns the thread if there is none yet; whether there is one now.
    pub fn spawn(&mut self) -> bool {
        self.forget_if_forked();
        if self.thread.is_none() {
            self.thread = spawn(self.lent_core.as_deref());
        }
        self.thread.is_some()
    }

    /// Sends `job` to the thread, spawning it at first use. Gives the job back when there is
    /// no thread to run it (it could not be spawned, or one job is already out).
    pub fn start(&mut self, job: J) -> Result<(), Box<J>> {
        self.forget_if_forked();
        if self.out || !self.spawn() {
            return Err(Box::new(job));
        }
        let thread = self.thread.as_mut().expect("spawned above");
        // The thread is idle (no job is out): nobody reads the flag until the send.
        thread.cancel.store(false, Ordering::Relaxed);
        match thread.to.send(Some(job)) {
            Ok(()) => {
                self.out = true;
                Ok(())
            }
            // The thread has gone (a job that panicked in `advance`): forget it, so the next
            // job spawns another.
            Err(e) => {
                self.thread = None;
                Err(Box::new(e.0.expect("sent as Some")))
            }
        }
    }

    /// The job, if it has come back. `None` also when it was lost with its thread (a job
    /// that panicked in `advance`); [`Background::is_out`] then says false.
    pub fn try_take(&mut self) -> Option<Returned<J>> {
        self.forget_if_forked();
        let thread = self.thread.as_mut()?;
        match thread.from.try_recv() {
            Ok(r) => {
                self.out = false;
                Some(r)
            }
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => {
                self.thread = None;
                self.out = false;
                None
            }
        }
    }

    /// Asks the thread to stop the job after its current unit and send it back.
    pub fn cancel(&self) {
        if let Some(t) = &self.thread {
            t.cancel.store(true, Ordering::Relaxed);
        }
    }

    /// Cancels the job that is out and waits for it (one unit at most).
    pub fn take_back(&mut self) -> Option<Returned<J>> {
        self.forget_if_forked();
        if !self.out {
            return None;
        }
        self.cancel();
        self.out = false;
        let r = self.thread.as_mut()?.from.recv().ok();
        if r.is_none() {
            self.thread = None;
        }
        r
    }
}

fn spawn<J: Job>(lent_core: Option<&[usize]>) -> Option<Thread<J>> {
    let (to, inbox) = channel::<Option<J>>();
    let (outbox, from) = channel::<Returned<J>>();
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = cancel.clone();
    let handle = Builder::new()
        .name("pbs-balancer".into())
        .spawn(move || {
            while let Ok(Some(mut job)) = inbox.recv() {
                let start = Instant::now();
                while !flag.load(Ordering::Relaxed) && job.advance() {}
                if outbox.send(Returned { job, spent: start.elapsed() }).is_err() {
                    break;
                }
            }
        })
        .ok()?;
    let on_lent_core = lent_core.is_some_and(|cpus| settle_on_lent_core(&handle, cpus));
    if !on_lent_core {
        batch_policy(&handle);
    }
    Some(Thread { born: Birth::now(), to, from, cancel, handle: Some(handle), on_lent_core })
}

/// Puts `thread` under Linux's `SCHED_BATCH`: woken by a job, it does not preempt the thread
/// that sent it (the executor's caller, which starts the next phase), and otherwise gets its
/// fair share of a core (see the module documentation). Not under Miri, which has no
/// scheduler policies.
#[cfg(all(target_os = "linux", not(pbs_loom), not(miri)))]
fn batch_policy(thread: &JoinHandle<()>) {
    use std::os::unix::thread::JoinHandleExt;
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: the handle names a thread that has not been joined (we hold its handle), so its
    // pthread_t is valid; `param` is a valid value that outlives the call. A failure leaves
    // the thread under the default policy.
    unsafe {
        libc::pthread_setschedparam(thread.as_pthread_t(), libc::SCHED_BATCH, &param);
    }
}

#[cfg(not(all(target_os = "linux", not(pbs_loom), not(miri))))]
fn batch_policy(_thread: &JoinHandle<()>) {}

/// Binds `thread` to `cpus` and puts it under `SCHED_IDLE`; whether both worked.
#[cfg(all(target_os = "linux", not(pbs_loom)))]
fn settle_on_lent_core(thread: &JoinHandle<()>, cpus: &[usize]) -> bool {
    use std::os::unix::thread::JoinHandleExt;
    let Ok(mask) = crate::pinning::mask_of(cpus) else { return false };
    let param = libc::sched_param { sched_priority: 0 };
    let t = thread.as_pthread_t();
    // SAFETY: the handle names a thread that has not been joined (we hold its handle), so its
    // pthread_t is valid; `mask` and `param` are valid values that outlive the calls, and the
    // size given is the mask's.
    unsafe {
        libc::pthread_setaffinity_np(t, std::mem::size_of_val(&mask), &mask) == 0
            && libc::pthread_setschedparam(t, libc::SCHED_IDLE, &param) == 0
    }
}

#[cfg(not(all(target_os = "linux", not(pbs_loom))))]
fn settle_on_lent_core(_thread: &JoinHandle<()>, _cpus: &[usize]) -> bool {
    false
}

impl<J: Job> Drop for Background<J> {
    fn drop(&mut self) {
        self.forget_if_forked();
    }
}

impl<J> Drop for Thread<J> {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
        // Fails only when the thread has gone already.
        let _ = self.to.send(None);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(all(test, not(pbs_loom)))]
mod tests {
    use super::*;
    use crate::test_wait::wait_for;
    use std::sync::atomic::AtomicUsize;

    /// Counts its units; `sleep` per unit; done after `units`.
    struct Count {
        done: usize,
        units: usize,
        sleep: Duration,
    }
    impl Job for Count {
        fn advance(&mut self) -> bool {
            if self.done == self.units {
                return false;
            }
            std::thread::sleep(self.sleep);
            self.done += 1;
            true
        }
    }
    fn count(units: usize, sleep_ms: u64) -> Count {
        Count { done: 0, units, sleep: Duration::from_millis(sleep_ms) }
    }

    /// A job goes out, comes back done; one job at a time; the thread serves the next.
    #[test]
    fn a_job_comes_back_done_and_one_goes_out_at_a_time() {
        let mut b = Background::default();
        assert!(b.try_take().is_none() && !b.is_out() && b.take_back().is_none());
        assert!(b.start(count(15, 0)).is_ok());
        assert!(b.is_out());
        assert!(b.start(count(15, 0)).is_err(), "one job at a time");
        let back = wait_for("the job back", || b.try_take());
        assert!(!b.is_out());
        assert_eq!(back.job.done, 15);
        assert!(b.start(count(3, 0)).is_ok(), "the thread serves the next job");
        assert_eq!(b.take_back().map(|r| r.job.done <= 3), Some(true));
    }

    /// A cancelled job comes back unfinished, and a drop with a job out returns within a unit.
    #[test]
    fn a_cancelled_job_comes_back_and_drop_does_not_hang() {
        let mut b = Background::default();
        assert!(b.start(count(100_000, 1)).is_ok());
        std::thread::sleep(Duration::from_millis(5));
        let back = b.take_back().expect("comes back");
        assert!(back.job.done < 100_000 && back.spent > Duration::ZERO);
        assert!(!b.is_out());
        assert!(b.start(count(100_000, 1)).is_ok());
        let t = Instant::now();
        drop(b);
        assert!(t.elapsed() < Duration::from_secs(5), "drop waits for one unit, not the job");
    }

    /// Off a lent core the thread runs under `SCHED_BATCH`, so that a job sent to it does not
    /// take the sender's core at once.
    #[cfg(all(target_os = "linux", not(miri)))]
    #[test]
    fn the_thread_runs_under_the_batch_policy() {
        struct Policy(Option<i32>);
        impl Job for Policy {
            fn advance(&mut self) -> bool {
                // SAFETY: sched_getscheduler(0) only reads the calling thread's policy.
                self.0 = Some(unsafe { libc::sched_getscheduler(0) });
                false
            }
        }
        let mut b = Background::default();
        assert!(b.start(Policy(None)).is_ok());
        let back = wait_for("the job back", || b.try_take());
        assert_eq!(back.job.0, Some(libc::SCHED_BATCH));
    }

    /// Runs until cancelled, counting its units where the test sees them.
    struct Endless(Arc<AtomicUsize>);
    impl Job for Endless {
        fn advance(&mut self) -> bool {
            std::thread::sleep(Duration::from_millis(1));
            self.0.fetch_add(1, Ordering::Relaxed);
            true
        }
    }

    /// Dropping the background stops its job within a unit and joins the thread: nothing of
    /// either is left running.
    #[test]
    fn dropping_the_background_stops_the_job_and_joins_its_thread() {
        let units = Arc::new(AtomicUsize::new(0));
        let mut b = Background::default();
        assert!(b.start(Endless(Arc::clone(&units))).is_ok());
        wait_for("a unit run", || (units.load(Ordering::Relaxed) > 0).then_some(()));
        let cancel = Arc::clone(&b.thread.as_ref().unwrap().cancel);
        drop(b);
        let at_drop = units.load(Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(units.load(Ordering::Relaxed), at_drop, "the job stopped with the drop");
        assert_eq!((Arc::strong_count(&cancel), Arc::strong_count(&units)), (1, 1), "thread and job gone");
    }

    /// A thread started in another process (this one being a child forked since, as
    /// `crate::fork` tells) is forgotten, never joined nor sent to: the job out there is lost
    /// and said so, the next job gets a thread here, and a drop leaves the forgotten alone.
    #[test]
    #[cfg_attr(miri, ignore = "leaks the forgotten threads on purpose, which Miri reports as leaks")]
    fn a_thread_from_before_a_fork_is_forgotten_not_joined() {
        let units = Arc::new(AtomicUsize::new(0));
        let mut b = Background::default();
        assert!(b.start(Endless(Arc::clone(&units))).is_ok());
        let first = Arc::clone(&b.thread.as_ref().unwrap().cancel);
        b.thread.as_mut().unwrap().born = crate::fork::Birth::elsewhere();
        assert!(b.try_take().is_none() && !b.is_out(), "the job out is lost with its thread");
        assert!(b.start(Endless(Arc::clone(&units))).is_ok(), "a new thread");
        let second = Arc::clone(&b.thread.as_ref().unwrap().cancel);
        assert!(!Arc::ptr_eq(&first, &second));
        b.thread.as_mut().unwrap().born = crate::fork::Birth::elsewhere();
        drop(b);
        // Each forgotten thread still holds its flag: neither was joined. (Their jobs are then
        // told to stop; the threads wait on channels nobody closes.)
        assert!(Arc::strong_count(&first) > 1 && Arc::strong_count(&second) > 1);
        first.store(true, Ordering::Relaxed);
        second.store(true, Ordering::Relaxed);
    }

    /// On a lent core the thread is bound to its CPUs and runs under `SCHED_IDLE`; where the
    /// binding fails (a CPU the process may not use), it says it is not on the lent core.
    #[cfg(all(target_os = "linux", not(miri)))]
    #[test]
    fn on_a_lent_core_the_thread_is_bound_there_under_the_idle_policy() {
        struct Placement(Option<(i32, Option<Vec<usize>>)>);
        impl Job for Placement {
            fn advance(&mut self) -> bool {
                // SAFETY: sched_getscheduler(0) only reads the calling thread's policy.
                let policy = unsafe { libc::sched_getscheduler(0) };
                self.0 = Some((policy, crate::pinning::cpus_of_this_thread()));
                false
            }
        }
        let cpus = crate::pinning::process_cpus().expect("the process's CPUs");
        let mut b = Background::for_lent_core(vec![cpus[0]]);
        assert!(b.spawn() && b.on_lent_core());
        assert!(b.start(Placement(None)).is_ok());
        // Under SCHED_IDLE it runs when CPU 0 has nothing else to: soon, on a test machine.
        let back = wait_for("the job back", || b.try_take());
        assert_eq!(back.job.0, Some((libc::SCHED_IDLE, Some(vec![cpus[0]]))));
        let absent = (0..1024).find(|c| !cpus.contains(c)).expect("a CPU number the process may not use");
        let mut c = Background::<Placement>::for_lent_core(vec![absent]);
        assert!(c.spawn() && !c.on_lent_core(), "CPU {absent}: not bound, so not on the lent core");
    }

    /// A job that panics takes its thread with it: the job is lost, said so, and the next
    /// job gets a new thread.
    #[test]
    fn a_job_lost_with_its_thread_is_reported_and_the_next_gets_a_new_thread() {
        struct Boom;
        impl Job for Boom {
            fn advance(&mut self) -> bool {
                panic!("a unit failed");
            }
        }
        enum Either {
            Boom(Boom),
            Count(Count),
        }
        impl Job for Either {
            fn advance(&mut self) -> bool {
                match self {
                    Either::Boom(b) => b.advance(),
                    Either::Count(c) => c.advance(),
                }
            }
        }
        let mut b = Background::default();
        assert!(b.start(Either::Boom(Boom)).is_ok());
        // The thread prints the panic's backtrace before it ends: slow on a loaded machine.
        wait_for("the loss seen", || (b.try_take().is_none() && !b.is_out()).then_some(()));
        assert!(b.start(Either::Count(count(2, 0))).is_ok(), "a new thread");
        let r = b.take_back().expect("comes back");
        assert!(matches!(r.job, Either::Count(_)));
    }
}
