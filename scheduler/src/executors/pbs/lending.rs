//! Lending a core: where the workers hold every CPU, one worker gives its core to the
//! balancer thread for as long as a rebalancing runs there.
//!
//! The balancer thread has no core of its own when there are as many workers as CPUs. Left to
//! the OS, it lands on a worker's core, and every time that worker yields in a wait between
//! phases the thread takes the core for a time slice (milliseconds, against md phases of
//! 0.2 ms) while the next phase waits for the worker at its barrier: on 16 cores at 16
//! threads, md's iterations with a rebalancing out ran 1–6 ms against a median of 0.2, and
//! their excess was about the thread's whole time (docs/results.md, "Sixteen threads
//! again"). Even under `SCHED_IDLE` it did so. Lending turns that into a known price:
//! - the *lender* (the last worker) runs none of its boxes while the run is out; the others
//!   steal them from the back of its list, its neighbours first, as they steal from a late
//!   thread (every box still runs exactly once: the claim word of `stealing.rs`), and the
//!   lender's owner load is what they spent on its boxes, so the balancer sees no change;
//! - it waits passively ([`crate::pool::Pool::set_passive`]), so its core is idle;
//! - the balancer thread is bound to the lender's CPUs and runs under `SCHED_IDLE`
//!   ([`crate::background`]), so it runs there and nowhere else, and when the lender is woken
//!   for the next phase it takes its core back at once, marks the phase done, and sleeps
//!   again, instead of waiting out the thread's time slice.
//!
//! The price is one worker's share of the iterations that run meanwhile ([`Lending::pays`]
//! weighs it against the stall it avoids), about the thread's time over the number of threads,
//! which is what the criterion's cost `C` counts for such a run. Nobody lends without stealing
//! ([`Stealing::Never`]), outside Linux, or where the lender is not bound to CPUs of its own
//! (the thread could not follow it).

use std::sync::Mutex;

use super::Stealing;
use crate::pool::Pool;

/// Whether a worker lends its core to the balancer thread while a rebalancing runs there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Lending {
    /// Never: the balancer thread shares a core as the OS decides.
    Never,
    /// When the workers hold every CPU the process may use and the run is expected to take
    /// longer than the share of the iterations it spans that the others then take on
    /// ([`Lending::pays`]: never on 2 threads). The default: on 16 cores at 16 threads it ran
    /// md at 0.64–0.71 × static on mean iterations against 0.78–0.84 × without lending
    /// (docs/results.md, "Sixteen threads, a third lease").
    #[default]
    Auto,
    /// As [`Lending::Auto`], with cores to spare too (tests use it).
    Always,
}

impl Lending {
    /// Whether lending a core pays for a run expected to take `run` seconds, in iterations of
    /// `iteration` seconds on `threads` threads. Not lending, a worker is away for about the
    /// run's time (on 16 cores at 16 threads, the iterations with a run out grew by the
    /// thread's time); lending, the other `threads - 1` run the lender's boxes in every
    /// iteration the run is out, at least one: `iteration / (threads - 1)` more each. On 2
    /// threads that never pays.
    pub fn pays(run: f64, iteration: f64, threads: usize) -> bool {
        if threads < 2 || iteration <= 0.0 {
            return false;
        }
        let iterations_out = (run / iteration).ceil().max(1.0);
        iterations_out * iteration / ((threads - 1) as f64) < run
    }
}

/// The CPUs worker `w` of `pool` is bound to, if it is bound to fewer than the process may
/// use: the balancer thread is bound to them while the worker lends them.
pub(super) fn bound_cpus(pool: &Pool, w: usize) -> Option<Vec<usize>> {
    let got = Mutex::new(None);
    pool.run(&|t| {
        if t == w {
            *got.lock().unwrap() = crate::pinning::cpus_of_this_thread();
        }
    });
    let cpus = got.into_inner().unwrap()?;
    let all = std::thread::available_parallelism().map_or(usize::MAX, |n| n.get());
    (!cpus.is_empty() && cpus.len() < all).then_some(cpus)
}

/// The worker that lends its core, if one does, and whether it does now.
pub(super) struct Lender {
    pub worker: Option<usize>,
    lent: bool,
}

impl Lender {
    /// In a pool of `threads`, the last worker, which owns no box at all when there are more
    /// threads than boxes; none when lending is not asked for or not possible, nor for
    /// [`Lending::Auto`] on 2 threads, where it never pays (the balancer thread then stays
    /// unbound, at normal priority, as with [`Lending::Never`]).
    /// `no_core_spare`: the workers hold every CPU the process may use.
    pub fn new(lending: Lending, threads: usize, no_core_spare: bool, steal: Stealing) -> Lender {
        let wanted = match lending {
            Lending::Never => false,
            Lending::Auto => no_core_spare && threads > 2,
            Lending::Always => true,
        };
        let able = threads > 1 && steal != Stealing::Never && cfg!(target_os = "linux");
        Lender { worker: (wanted && able).then(|| threads - 1), lent: false }
    }

    /// The worker lending its core now.
    pub fn now(&self) -> Option<usize> {
        self.worker.filter(|_| self.lent)
    }

    /// A run has gone out to the balancer thread (`out`) or come back: the worker lends it its
    /// core, or takes it back. Only a thread bound there under `SCHED_IDLE` (`thread_there`)
    /// is lent one: at normal priority it would keep the lender off its core for a time slice,
    /// and every phase would wait for the lender. Returns whether the core was lent until now.
    pub fn lend(&mut self, out: bool, pool: &Pool, thread_there: bool) -> bool {
        let was = self.lent;
        self.lent = out && thread_there && self.worker.is_some();
        if let Some(w) = self.worker {
            pool.set_passive(w, self.lent);
        }
        was
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    #[cfg(target_os = "linux")]
    fn the_last_worker_lends_when_asked_and_able() {
        let worker = |l: Lending, threads, no_core_spare, steal| Lender::new(l, threads, no_core_spare, steal).worker;
        assert_eq!(worker(Lending::Auto, 16, true, Stealing::Auto), Some(15));
        assert_eq!(worker(Lending::Auto, 16, false, Stealing::Auto), None, "a core to spare");
        assert_eq!(worker(Lending::Auto, 2, true, Stealing::Auto), None, "never pays on 2 threads");
        assert!(!Lending::pays(1.0, 1e-4, 2) && !Lending::pays(1e-5, 1e-4, 2));
        assert_eq!(worker(Lending::Auto, 3, true, Stealing::Auto), Some(2));
        assert_eq!(worker(Lending::Always, 4, false, Stealing::Always), Some(3));
        assert_eq!(worker(Lending::Always, 1, true, Stealing::Auto), None, "nobody to run its boxes");
        assert_eq!(worker(Lending::Always, 4, true, Stealing::Never), None, "its boxes are stolen");
        assert_eq!(worker(Lending::Never, 4, true, Stealing::Auto), None);
    }

    #[test]
    fn lending_pays_for_a_run_longer_than_a_workers_share_of_the_iterations_it_spans() {
        // 16 threads, 0.2 ms iterations: a 2 ms run stalls a worker 2 ms; lent, it costs 10
        // iterations × 0.2 / 15 ms.
        assert!(Lending::pays(2e-3, 0.2e-3, 16));
        assert!(Lending::pays(0.1e-3, 0.2e-3, 16), "one iteration out: 0.013 ms against 0.1");
        assert!(!Lending::pays(0.01e-3, 0.2e-3, 16), "a run shorter than a worker's share of one iteration");
        for run in [0.1e-3, 1e-3, 10e-3] {
            assert!(!Lending::pays(run, 0.7e-3, 2), "2 threads: the other one does twice the work");
        }
        assert!(!Lending::pays(1e-3, 0.0, 16) && !Lending::pays(1e-3, 0.2e-3, 1));
        assert!(!Lending::pays(1e-3, -0.2e-3, 16), "no iteration measured");
    }

    /// The balancer thread follows a lender's binding only where the lender is bound to fewer
    /// CPUs than the process may use.
    #[test]
    #[cfg(target_os = "linux")]
    fn a_workers_cpus_are_read_only_where_it_is_bound() {
        let cpus = crate::pinning::process_cpus().expect("the process's CPUs");
        if cpus.len() < 2 {
            eprintln!("skipped: the process may use one CPU, so no worker can be bound to fewer");
            return;
        }
        let second = cpus[1];
        // Worker 1 is bound to the process's second CPU; worker 0, the caller, is not bound.
        let pin = Arc::new(move |t: usize| {
            if t == 1 {
                crate::pinning::pin_this_thread(&[second]).expect("pin worker 1");
            }
        });
        let pool = Pool::new(2, pin).unwrap();
        assert_eq!(bound_cpus(&pool, 1), Some(vec![second]));
        assert_eq!(bound_cpus(&pool, 0), None, "the caller may use every CPU");
        let free = Pool::new(2, Arc::new(|_| {})).unwrap();
        assert_eq!(bound_cpus(&free, 1), None);
    }

    /// Lent only when the caller says the thread is there (bound to the core under
    /// `SCHED_IDLE`), and taken back when the run comes back.
    #[test]
    #[cfg(target_os = "linux")]
    fn lent_only_with_the_thread_there_and_taken_back_with_the_run() {
        let pool = Pool::new(3, std::sync::Arc::new(|_| {})).unwrap();
        let mut l = Lender::new(Lending::Always, 3, false, Stealing::Auto);
        assert!(!l.lend(true, &pool, false) && l.now().is_none(), "normal priority: not lent");
        assert!(!l.lend(true, &pool, true) && l.now() == Some(2));
        assert!(l.lend(false, &pool, false) && l.now().is_none());
    }
}
