//! Rebalancing on a thread of its own, for balancer steps longer than a phase's idle time.
//!
//! `overlap.rs` runs the balancer in the threads' idle time one unit (a step) at a time, and a
//! unit cannot be cut: once a step outlasts a phase's idle time, every phase waits for it. On
//! many threads this is the rule, not the exception (a step over a 128×128 grid and 64 vCores
//! is about a millisecond, an md iteration a quarter of that). So the executor hands such a
//! rebalancing to one more thread, the *balancer thread*, and the workers go on under the old
//! mapping; it takes the new owners on at the first iteration boundary after the run has ended,
//! as with idle time, so a phase never sees its owners change and every box still runs once.
//!
//! What it costs: the balancer thread has no core of its own. It takes the idle cores when
//! there are some (a worker yields, then sleeps, between phases) and otherwise shares one with
//! a worker, whose boxes its neighbours then steal. That cost shows in the iterations' times,
//! not as stopped time; the executor reports the thread's balancing time beside the
//! critical-path time (`balancing_in_background`).
//!
//! The protocol: one run at a time goes out (`start`), and the executor takes it back at an
//! iteration boundary when it is there (`try_take`), or gives it up (`cancel`: the thread
//! stops after the unit it is running and sends the run back unfinished). The channel orders
//! everything the thread wrote before sending with the executor's reads after receiving. The
//! thread is spawned at the first run (it inherits the creating thread's CPU mask, outside a
//! phase the caller's own) and ends when the executor drops: `Drop` cancels, closes the
//! channel and joins, which waits for one unit at most.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::overlap::Pending;

/// A run sent back by the balancer thread, with the time it spent on it.
pub(super) struct Returned {
    pub pending: Pending,
    pub spent: Duration,
}

/// The balancer thread and the channels to it (see the module documentation).
#[derive(Default)]
pub(super) struct Background {
    thread: Option<Thread>,
    /// A run is out: sent and not yet taken back.
    out: bool,
}

struct Thread {
    to: Option<Sender<Pending>>,
    from: Receiver<Returned>,
    cancel: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Background {
    /// Whether a run is out.
    pub fn is_out(&self) -> bool {
        self.out
    }

    /// Sends `pending` to the balancer thread, spawning it at first use. Gives the run back
    /// when there is no thread to run it (it could not be spawned, or one run is already out).
    pub fn start(&mut self, pending: Pending) -> Result<(), Box<Pending>> {
        if self.out {
            return Err(Box::new(pending));
        }
        if self.thread.is_none() {
            match spawn() {
                Some(t) => self.thread = Some(t),
                None => return Err(Box::new(pending)),
            }
        }
        let thread = self.thread.as_mut().expect("spawned above");
        // The thread is idle (no run is out), so nobody reads the flag until the send.
        thread.cancel.store(false, Ordering::Relaxed);
        match thread.to.as_ref().expect("open until drop").send(pending) {
            Ok(()) => {
                self.out = true;
                Ok(())
            }
            // The thread has gone (it cannot panic: `Pending::advance` catches the balancer's
            // panics): forget it, so the next run spawns another.
            Err(e) => {
                self.thread = None;
                Err(Box::new(e.0))
            }
        }
    }

    /// The run, if it has come back.
    pub fn try_take(&mut self) -> Option<Returned> {
        let thread = self.thread.as_mut()?;
        match thread.from.try_recv() {
            Ok(r) => {
                self.out = false;
                Some(r)
            }
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => {
                // Lost with its thread; the caller finds its balancer missing and rebuilds.
                self.thread = None;
                self.out = false;
                None
            }
        }
    }

    /// Asks the thread to stop the run after its current unit and send it back.
    pub fn cancel(&self) {
        if let Some(t) = &self.thread {
            t.cancel.store(true, Ordering::Relaxed);
        }
    }

    /// Cancels the run that is out and waits for it (one balancer unit at most).
    pub fn take_back(&mut self) -> Option<Returned> {
        if !self.out {
            return None;
        }
        self.cancel();
        let thread = self.thread.as_mut()?;
        let r = thread.from.recv().ok();
        self.out = false;
        r
    }
}

fn spawn() -> Option<Thread> {
    let (to, inbox) = channel::<Pending>();
    let (outbox, from) = channel::<Returned>();
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = cancel.clone();
    let handle = std::thread::Builder::new()
        .name("pbs-balancer".into())
        .spawn(move || {
            for mut pending in inbox {
                let start = Instant::now();
                while !flag.load(Ordering::Relaxed) && pending.advance() {}
                if outbox.send(Returned { pending, spent: start.elapsed() }).is_err() {
                    break;
                }
            }
        })
        .ok()?;
    Some(Thread { to: Some(to), from, cancel, handle: Some(handle) })
}

impl Drop for Thread {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
        self.to = None; // closes the channel: the thread's loop ends after its run
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pbs::{methods, Balancer, Grid, Problem, StopRule, VCores};

    fn pending_with(balancer: Box<dyn Balancer + Send>, steps: usize) -> Pending {
        let grid = Grid::new(40, 40).unwrap();
        let loads: Vec<f64> = (0..grid.len()).map(|k| if k < 300 { 6.0 } else { 1.0 }).collect();
        let problem = Problem::new(grid, &loads, 6).unwrap().into_owned();
        let vcores = VCores::random(&problem, 5);
        Pending::new(balancer, problem, vcores, StopRule { max_steps: steps, tol: 0.0 }, false)
    }

    fn pending(steps: usize) -> Pending {
        pending_with(methods::by_name("power-cells").unwrap(), steps)
    }

    /// Takes a millisecond per step and never converges nor gets stuck.
    struct Slow;
    impl Balancer for Slow {
        fn name(&self) -> &str {
            "slow"
        }
        fn step(&mut self, _: &Problem, _: &mut VCores) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A run goes out, comes back ended, gives what the same run unit by unit gives; one run
    /// at a time.
    #[test]
    fn a_run_comes_back_ended_and_equal_to_running_it_here() {
        let mut b = Background::default();
        assert!(b.try_take().is_none() && !b.is_out());
        assert!(b.start(pending(15)).is_ok());
        assert!(b.is_out());
        assert!(b.start(pending(15)).is_err(), "one run at a time");
        let back = loop {
            if let Some(r) = b.try_take() {
                break r;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        assert!(!b.is_out() && back.pending.is_done() && back.spent > Duration::ZERO);
        let mut here = pending(15);
        while here.advance() {}
        assert_eq!(back.pending.vcores.owners(), here.vcores.owners());
        assert_eq!(back.pending.outcome.as_ref().map(|o| o.steps), here.outcome.as_ref().map(|o| o.steps));
        // The thread serves the next run.
        assert!(b.start(pending(3)).is_ok());
    }

    /// A cancelled run comes back unfinished, and dropping the executor's side joins the
    /// thread even with a run out.
    #[test]
    fn a_cancelled_run_comes_back_and_drop_does_not_hang() {
        let mut b = Background::default();
        assert!(b.take_back().is_none(), "nothing out");
        assert!(b.start(pending_with(Box::new(Slow), 100_000)).is_ok());
        std::thread::sleep(Duration::from_millis(5));
        let back = b.take_back().expect("comes back");
        assert!(!back.pending.is_done(), "a hundred thousand steps of 1 ms do not end in 5 ms");
        assert!(!b.is_out());
        assert!(b.start(pending_with(Box::new(Slow), 100_000)).is_ok());
        let t = Instant::now();
        drop(b);
        assert!(t.elapsed() < Duration::from_secs(5), "drop waits for one unit, not the run");
    }
}
