//! A fixed team of worker threads that runs one *phase* at a time: the caller broadcasts a job,
//! every worker (the caller itself is worker 0, as the master thread is in OpenMP) runs it with
//! its worker id, and the call returns when all have finished — the barrier between phases.
//!
//! Between phases workers spin briefly (phases of a grid code follow each other within
//! microseconds), then yield, then sleep on a condition variable, so an idle pool costs
//! nothing. A panic in a job is caught on the worker, the other workers finish the phase, and
//! the first panic is re-raised in the caller; the pool stays usable.

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_utils::{Backoff, CachePadded};

/// A job as the workers see it: called once per worker with the worker id.
type Job<'a> = dyn Fn(usize) + Sync + 'a;

/// How long a worker spins for the next phase before it sleeps.
const SPIN_BEFORE_SLEEP: Duration = Duration::from_micros(200);

struct Shared {
    /// Incremented to start a phase (and once more to shut down).
    epoch: CachePadded<AtomicU64>,
    /// Workers (other than the caller) still running the current phase.
    running: CachePadded<AtomicUsize>,
    /// The current job. Written by the caller before `epoch` is bumped and read by workers
    /// after they observe the bump; cleared only after `running` drops to zero.
    job: Mutex<Option<JobRef>>,
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    shutdown: AtomicBool,
    sleep: Mutex<()>,
    wake: Condvar,
    done: Condvar,
}

/// A lifetime-erased pointer to the caller's job; valid while the caller waits in `run`.
#[derive(Clone, Copy)]
struct JobRef(*const Job<'static>);
// SAFETY: the pointee is `Sync` and outlives every use (see `Pool::run`).
unsafe impl Send for JobRef {}

/// A team of `threads` workers (the caller plus `threads - 1` spawned threads).
pub struct Pool {
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<()>>,
    threads: usize,
}

impl Pool {
    /// Starts `threads - 1` worker threads; `on_start(id)` runs first on each (pinning goes
    /// there), and on the caller for id 0 at the first phase.
    pub fn new(threads: usize, on_start: Arc<dyn Fn(usize) + Send + Sync>) -> Pool {
        assert!(threads >= 1, "a pool needs at least one thread");
        let shared = Arc::new(Shared {
            epoch: CachePadded::new(AtomicU64::new(0)),
            running: CachePadded::new(AtomicUsize::new(0)),
            job: Mutex::new(None),
            panic: Mutex::new(None),
            shutdown: AtomicBool::new(false),
            sleep: Mutex::new(()),
            wake: Condvar::new(),
            done: Condvar::new(),
        });
        let handles = (1..threads)
            .map(|id| {
                let shared = Arc::clone(&shared);
                let on_start = Arc::clone(&on_start);
                std::thread::Builder::new()
                    .name(format!("pbs-worker-{id}"))
                    .spawn(move || {
                        let _id = crate::executor::as_worker(id);
                        on_start(id);
                        worker_loop(&shared, id)
                    })
                    .expect("spawn a worker thread")
            })
            .collect();
        Pool { shared, handles, threads }
    }

    /// Number of workers, the caller included.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `job(id)` on every worker `id` in `0..threads` and returns when all are done. The
    /// caller runs `job(0)`. If any call panics, the first panic is re-raised here after the
    /// phase has finished everywhere.
    pub fn run(&self, job: &(dyn Fn(usize) + Sync)) {
        let s = &*self.shared;
        if self.threads > 1 {
            // SAFETY: the reference is erased to 'static only for the duration of this call:
            // we do not return before `running` is zero, i.e. before every worker is done with
            // it, and the slot is cleared before returning.
            let erased: *const Job<'static> = unsafe { std::mem::transmute(job as *const Job<'_>) };
            *s.job.lock().unwrap() = Some(JobRef(erased));
            s.running.store(self.threads - 1, Ordering::SeqCst);
            s.epoch.fetch_add(1, Ordering::SeqCst);
            let _g = s.sleep.lock().unwrap();
            s.wake.notify_all();
        }
        let mine = panic::catch_unwind(AssertUnwindSafe(|| {
            let _id = crate::executor::as_worker(0);
            job(0)
        }));
        if let Err(p) = mine {
            s.panic.lock().unwrap().get_or_insert(p);
        }
        if self.threads > 1 {
            wait_until(s, || s.running.load(Ordering::SeqCst) == 0, &s.done);
            *s.job.lock().unwrap() = None;
        }
        // Take the payload out before unwinding: unwinding while holding the guard would
        // poison the mutex and break the next phase.
        let caught = s.panic.lock().unwrap().take();
        if let Some(p) = caught {
            panic::resume_unwind(p);
        }
    }
}

/// Spins, then yields, then sleeps on `cv` until `ready()`.
fn wait_until(s: &Shared, ready: impl Fn() -> bool, cv: &Condvar) {
    let start = Instant::now();
    let backoff = Backoff::new();
    while !ready() {
        if start.elapsed() < SPIN_BEFORE_SLEEP {
            backoff.snooze();
        } else {
            let g = s.sleep.lock().unwrap();
            if !ready() {
                // Timed wait: a notification sent between the check and the wait is not lost
                // for long.
                let _ = cv.wait_timeout(g, Duration::from_millis(1)).unwrap();
            }
        }
    }
}

fn worker_loop(s: &Shared, id: usize) {
    let mut seen = 0u64;
    loop {
        wait_until(s, || s.epoch.load(Ordering::SeqCst) != seen, &s.wake);
        seen = s.epoch.load(Ordering::SeqCst);
        if s.shutdown.load(Ordering::SeqCst) {
            return;
        }
        let job = (*s.job.lock().unwrap()).expect("a phase has a job");
        // SAFETY: the caller keeps the job alive until `running` reaches zero (see `run`).
        let f = unsafe { &*job.0 };
        if let Err(p) = panic::catch_unwind(AssertUnwindSafe(|| f(id))) {
            s.panic.lock().unwrap().get_or_insert(p);
        }
        if s.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            let _g = s.sleep.lock().unwrap();
            s.done.notify_all();
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
        self.shared.shutdown.store(true, Ordering::SeqCst);
        self.shared.epoch.fetch_add(1, Ordering::SeqCst);
        {
            let _g = self.shared.sleep.lock().unwrap();
            self.shared.wake.notify_all();
        }
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn pool(n: usize) -> Pool {
        Pool::new(n, Arc::new(|_| {}))
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
