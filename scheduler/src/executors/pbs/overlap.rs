//! Rebalancing off the critical path: the balancer runs in the threads' idle time.
//!
//! When a rebalancing is due, the executor does not stop the iteration for it. It hands the
//! balancer a copy of the vCores and the measured box loads (a [`Pending`] rebalancing), and
//! the threads go on computing under the old mapping. In every phase, the first thread to
//! run out of its own boxes takes the balancer and runs it one unit (start, a step, finish)
//! at a time for as long as another thread still runs boxes: the time it would have waited at
//! the barrier. Between iterations the executor adopts the new owners once the run has ended,
//! so a phase never sees its owners change, and every box still runs exactly once.
//!
//! What stays on the critical path, and is reported as such: a unit that outlasts the last
//! busy thread (the *overrun*; at most one step), and the work between iterations (deciding,
//! adopting the owners; the run's first unit copies the vCores it moves, its last unit builds
//! the threads' lists for its mapping, and the problem hands its loads over uncopied). A rebalancing that has not
//! ended within `max_pending` iterations balances loads that old, and is abandoned. One whose
//! overruns in an iteration cost more than the balancer thread would have for the same
//! balancer time goes on on that thread (`rebalancing.rs`): idle time measured in a disturbed
//! iteration can promise room that the next iterations do not have.
//!
//! Memory orderings: `working` counts the threads still running boxes; a thread records its
//! finish time in `last_done` (`fetch_max`) before it decrements `working` (`AcqRel`), so the
//! balancing thread that reads `working == 0` (`Acquire`) also sees every finish time. The
//! pending run itself sits behind a mutex that only the holder of `token` takes during a
//! phase, and the caller takes between phases (the pool's barrier orders the two).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_utils::CachePadded;
use pbs::{Balancer, Outcome, Problem, Run, StopRule, VCores};

use super::{ListShape, ThreadLists};
use crate::clock;

/// The vCores a run moves. The executor's are shared with the run until its first unit copies
/// them into memory of the run's own (what the executor kept from the last run), so that the
/// copy, 24 bytes per box, is made off the critical path: on the 2-core VM it took 0.2 ms at
/// 256 × 256 boxes, 1.0–1.3 ms where no memory was kept.
pub(super) enum RunVCores {
    /// Not copied yet: the executor's vCores (which it leaves alone while the run is out), and
    /// the memory to copy them into.
    Shared { from: Arc<VCores>, into: Option<VCores> },
    /// The run's own.
    Own(VCores),
}

impl RunVCores {
    /// The vCores as they stand: the run's, or the executor's before the first unit.
    pub fn get(&self) -> &VCores {
        match self {
            RunVCores::Shared { from, .. } => from,
            RunVCores::Own(v) => v,
        }
    }

    /// The run's own copy, made now if it was not yet (the executor's are then let go).
    fn own(&mut self) -> &mut VCores {
        if let RunVCores::Shared { from, into } = self {
            let copy = match into.take() {
                Some(mut spare) => {
                    spare.clone_from(from);
                    spare
                }
                None => VCores::clone(from),
            };
            *self = RunVCores::Own(copy);
        }
        let RunVCores::Own(v) = self else { unreachable!("copied above") };
        v
    }

    /// What the executor keeps for the next run's copy: this run's, or the memory it was to
    /// be copied into.
    pub fn into_spare(self) -> Option<VCores> {
        match self {
            RunVCores::Shared { into, .. } => into,
            RunVCores::Own(v) => Some(v),
        }
    }
}

/// A rebalancing under way in the threads' idle time.
pub(super) struct Pending {
    pub balancer: Box<dyn Balancer + Send>,
    /// The box loads it balances.
    pub problem: Problem<'static>,
    /// The vCores the balancer moves; adopted when the run has ended.
    pub vcores: RunVCores,
    stop: StopRule,
    /// Whether a start over from a bisection ends the run ([`super::PbsOptions::restart_lands_at_once`]).
    restart_lands: bool,
    run: Option<Run>,
    /// How the run ended, once it has.
    pub outcome: Option<Outcome>,
    /// The balancer panicked (a bug): the rebalancing is dropped, the executor goes on.
    pub failed: bool,
    /// Iterations ended since it started.
    pub age: usize,
    /// Whether it corrects the rebalancing before it (see `MAX_CORRECTIONS`).
    pub correcting: bool,
    /// Critical-path time it has cost so far (its start, overruns).
    pub critical: Duration,
    /// What the new mapping's [`ThreadLists`] are built from, where the unit that ends the
    /// run builds them (off the critical path); `None`: the executor builds them.
    lists_for: Option<ListShape>,
    /// Built by the unit that ended the run, for its vCores.
    pub lists: Option<ThreadLists>,
}

impl Pending {
    pub fn new(
        balancer: Box<dyn Balancer + Send>,
        problem: Problem<'static>,
        vcores: RunVCores,
        stop: StopRule,
        restart_lands: bool,
        correcting: bool,
        lists_for: Option<ListShape>,
    ) -> Pending {
        Pending {
            balancer,
            problem,
            vcores,
            stop,
            restart_lands,
            run: None,
            outcome: None,
            failed: false,
            age: 0,
            correcting,
            critical: Duration::ZERO,
            lists_for,
            lists: None,
        }
    }

    /// The balancer, the problem and the memory kept for the run's copy back, from a run that
    /// could not go out.
    pub fn into_parts(self) -> (Box<dyn Balancer + Send>, Problem<'static>, Option<VCores>) {
        (self.balancer, self.problem, self.vcores.into_spare())
    }

    /// Whether there is nothing left to run.
    pub fn is_done(&self) -> bool {
        self.outcome.is_some() || self.failed
    }

    /// Runs one unit of the balancing (its start, one step, or its end); false when there
    /// was none left.
    pub fn advance(&mut self) -> bool {
        if self.is_done() {
            return false;
        }
        let Pending { balancer, problem, vcores, stop, restart_lands, run, outcome, lists_for, lists, .. } = self;
        let unit = catch_unwind(AssertUnwindSafe(|| {
            let vcores = vcores.own();
            match run {
                None => {
                    let (r, _) = Run::start_rebalancing(balancer.as_mut(), problem, vcores, *stop);
                    if r.restarted() && *restart_lands {
                        // The start over is a mapping already: taken on as it is.
                        *outcome = Some(r.finish(balancer.as_mut(), problem, vcores));
                    } else {
                        *run = Some(r);
                    }
                }
                Some(r) => {
                    if r.step(balancer.as_mut(), problem, vcores).is_none() {
                        let r = run.take().expect("matched Some");
                        *outcome = Some(r.finish(balancer.as_mut(), problem, vcores));
                    }
                }
            }
            if outcome.is_some() {
                *lists = lists_for.as_ref().map(|shape| shape.lists(vcores));
            }
        }));
        self.failed = unit.is_err();
        true
    }
}

/// On the balancer thread (`crate::background`), a pending rebalancing runs unit by unit too.
impl crate::background::Job for Pending {
    fn advance(&mut self) -> bool {
        Pending::advance(self)
    }
}

/// What the threads share during a phase to balance in their idle time.
pub(super) struct Slack {
    /// The rebalancing under way, if any.
    pub pending: Mutex<Option<Pending>>,
    /// Whether a pending rebalancing has work left (set between phases).
    pub active: bool,
    /// Taken by the thread that balances in this phase.
    token: AtomicBool,
    /// Threads still running boxes in this phase.
    working: CachePadded<AtomicUsize>,
    /// Latest time (clock ticks) a thread finished its boxes in this phase.
    last_done: CachePadded<AtomicU64>,
    /// Per thread, clock ticks spent balancing in this phase.
    spent: Vec<CachePadded<AtomicU64>>,
    /// Clock ticks of balancing past the last busy thread in this phase.
    overrun: AtomicU64,
}

impl Slack {
    pub fn new(threads: usize) -> Slack {
        Slack {
            pending: Mutex::new(None),
            active: false,
            token: AtomicBool::new(false),
            working: CachePadded::new(AtomicUsize::new(0)),
            last_done: CachePadded::new(AtomicU64::new(0)),
            spent: (0..threads).map(|_| CachePadded::new(AtomicU64::new(0))).collect(),
            overrun: AtomicU64::new(0),
        }
    }

    /// Before a phase of `threads` threads.
    pub fn begin_phase(&mut self, threads: usize) {
        let pending = self.pending.get_mut().unwrap_or_else(|e| e.into_inner());
        self.active = pending.as_ref().is_some_and(|p| !p.is_done());
        *self.token.get_mut() = false;
        *self.working.get_mut() = threads;
        *self.last_done.get_mut() = 0;
    }

    /// Thread `t` has run its own boxes: if a rebalancing has work left and no other thread
    /// balances, it leaves the boxes to the others and balances while any of them still runs
    /// boxes. Returns whether it did (it is then done with the phase's boxes).
    pub fn balance_while_others_work(&self, t: usize) -> bool {
        if !self.active || self.working.load(Ordering::Acquire) <= 1 || self.token.swap(true, Ordering::Acquire) {
            return false;
        }
        let start = self.finish(t);
        let mut slot = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let Some(pending) = slot.as_mut() else { return true };
        let mut end = start;
        while self.working.load(Ordering::Acquire) > 0 && pending.advance() {
            end = clock::ticks();
        }
        self.spent[t].fetch_add(end.wrapping_sub(start), Ordering::Relaxed);
        if self.working.load(Ordering::Acquire) == 0 {
            // Every other thread is done: what ran past the last of them held the barrier.
            let last = self.last_done.load(Ordering::Acquire);
            self.overrun.fetch_add(end.saturating_sub(last), Ordering::Relaxed);
        }
        true
    }

    /// Thread `t` has run all its boxes of the phase; returns the time (clock ticks).
    pub fn finish(&self, _t: usize) -> u64 {
        let now = clock::ticks();
        self.last_done.fetch_max(now, Ordering::AcqRel);
        self.working.fetch_sub(1, Ordering::AcqRel);
        now
    }

    /// After a phase: the balancing time of every thread, and the overrun, reset to zero.
    pub fn take_phase(&mut self) -> (Vec<Duration>, Duration) {
        let ns = clock::ns_per_tick();
        let to = |ticks: u64| Duration::from_nanos((ticks as f64 * ns) as u64);
        let spent = self.spent.iter_mut().map(|s| to(std::mem::take(s.get_mut()))).collect();
        (spent, to(std::mem::take(self.overrun.get_mut())))
    }
}

/// Marks a thread done with its boxes when its part of the phase ends, even by a panic, so
/// that a balancing thread never waits for a thread that has unwound.
pub(super) struct Finish<'a> {
    pub slack: &'a Slack,
    pub t: usize,
    pub done: bool,
}

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.slack.finish(self.t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pbs::{methods, Grid};

    /// The grids' side and the runs' steps at most: under Miri, which interprets the balancer's
    /// steps thousands of times slower than they run (a test of two runs of 20 steps on 24×24
    /// boxes took 150–170 s, 2026-12-01), a quarter of the boxes and a quarter of the steps;
    /// the units and their bookkeeping are the same.
    const SIDE: usize = if cfg!(miri) { 12 } else { 24 };
    const STEPS: usize = if cfg!(miri) { 5 } else { 20 };

    fn pending(n: usize) -> Pending {
        let grid = Grid::new(SIDE, SIDE).unwrap();
        let heavy = if cfg!(miri) { 25 } else { 100 };
        let loads: Vec<f64> = (0..grid.len()).map(|k| if k < heavy { 5.0 } else { 1.0 }).collect();
        let problem = Problem::new(grid, &loads, n).unwrap().into_owned();
        let vcores = VCores::random(&problem, 3);
        let stop = StopRule { max_steps: STEPS, tol: 0.02 };
        Pending::new(
            methods::by_name("power-cells").unwrap(),
            problem,
            RunVCores::Own(vcores),
            stop,
            false,
            false,
            None,
        )
    }

    /// Advanced unit by unit, a pending rebalancing ends where `balance` ends.
    #[test]
    fn unit_by_unit_gives_what_balance_gives() {
        let mut p = pending(4);
        let mut units = 0;
        while p.advance() {
            units += 1;
        }
        let outcome = p.outcome.clone().unwrap();
        assert_eq!(units, outcome.steps + 2, "start, the steps, the finish");
        let mut q = pending(4);
        let direct = pbs::rebalance(q.balancer.as_mut(), &q.problem, q.vcores.own(), q.stop);
        assert_eq!((outcome.steps, outcome.max_avg), (direct.steps, direct.max_avg));
        assert_eq!(p.vcores.get().owners(), q.vcores.get().owners());
        assert!(!p.advance(), "nothing left");
    }

    /// A run given the executor's vCores shared copies them at its first unit and lets the
    /// executor's go, with the same result as a run on a copy made beforehand; the copy goes
    /// into the memory it was given, which a run never advanced gives back.
    #[test]
    fn the_first_unit_copies_the_shared_vcores_into_the_memory_kept() {
        let mut own = pending(4);
        let shared = Arc::new(own.vcores.get().clone());
        let problem = own.problem.clone();
        let spare = || Some(VCores::random(&problem, 9));
        let mut p = pending(4);
        p.vcores = RunVCores::Shared { from: Arc::clone(&shared), into: spare() };
        assert_eq!(Arc::strong_count(&shared), 2);
        assert_eq!(p.vcores.get().owners(), shared.owners(), "before its first unit, the executor's");
        assert!(p.advance());
        assert_eq!(Arc::strong_count(&shared), 1, "let go at the first unit");
        while p.advance() {}
        while own.advance() {}
        assert_eq!(p.vcores.get().owners(), own.vcores.get().owners());
        assert_eq!(p.outcome.unwrap().max_avg, own.outcome.unwrap().max_avg);
        let into = spare().unwrap();
        let memory = into.owners().as_ptr();
        let mut copy = RunVCores::Shared { from: Arc::clone(&shared), into: Some(into) };
        assert_eq!(copy.own().owners().as_ptr(), memory, "copied into the memory kept");
        assert_eq!(copy.get().owners(), shared.owners());
        let into = spare().unwrap();
        let memory = into.owners().as_ptr();
        let never = RunVCores::Shared { from: shared, into: Some(into) };
        assert_eq!(never.into_spare().map(|v| v.owners().as_ptr()), Some(memory));
    }

    /// A run asked for the lists of its mapping builds them in its last unit, for the vCores
    /// it ends with; one not asked builds none.
    #[test]
    fn the_last_unit_builds_the_lists_of_the_new_mapping_when_asked() {
        let shape = ListShape { threads: 4, chunk: 8, numa: Some(vec![0, 0, 1, 1]) };
        let mut p = pending(4);
        p.lists_for = Some(shape.clone());
        let before = shape.lists(p.vcores.get());
        while p.lists.is_none() {
            assert!(p.advance(), "ended without its lists");
        }
        assert!(p.is_done(), "the lists come with the last unit");
        let built = p.lists.take().unwrap();
        assert_eq!(built, shape.lists(p.vcores.get()));
        assert_ne!(built, before, "the run moved boxes: other lists");
        let mut q = pending(4);
        while q.advance() {}
        assert!(q.lists.is_none());
    }

    /// Cells far from balance: a pending rebalancing that starts over ends there when asked
    /// to (in the unit that starts it), and goes on to its steps otherwise.
    #[test]
    fn a_start_over_lands_at_once_when_asked() {
        let side = if cfg!(miri) { 16 } else { 32 };
        let grid = Grid::new(side, side).unwrap();
        let ones = vec![1.0; grid.len()];
        let uniform = Problem::new(grid, &ones, 8).unwrap();
        let mut vcores = VCores::from_bisection(&uniform);
        let mut method = methods::by_name("power-cells").unwrap();
        pbs::balance(method.as_mut(), &uniform, &mut vcores, StopRule { max_steps: 200, tol: 0.02 }, |_| {});
        // All the load in the lower left quarter.
        let quarter = |k: usize| k % side < side / 2 && k / side < side / 2;
        let loads: Vec<f64> = (0..grid.len()).map(|k| if quarter(k) { 10.0 } else { 0.1 }).collect();
        let problem = Problem::new(grid, &loads, 8).unwrap().into_owned();
        let stop = StopRule { max_steps: STEPS, tol: 0.02 };
        for lands in [true, false] {
            let balancer = methods::by_name("power-cells").unwrap();
            let mut p =
                Pending::new(balancer, problem.clone(), RunVCores::Own(vcores.clone()), stop, lands, false, None);
            let mut units = 0;
            while p.advance() {
                units += 1;
            }
            let outcome = p.outcome.clone().unwrap();
            assert!(outcome.restarted, "far from balance: {outcome:?}");
            if lands {
                assert_eq!((units, outcome.steps), (1, 0), "the start over, ended at once");
                let fresh = vcores.restarted_from_bisection(&problem);
                assert_eq!(p.vcores.get().owners(), fresh.owners(), "the bisection's cells as they are");
            } else {
                assert!(outcome.steps > 0 && units == outcome.steps + 2, "{units} units, {outcome:?}");
            }
        }
    }

    /// Run on the balancer thread, a pending rebalancing ends where it ends here.
    #[test]
    fn on_the_balancer_thread_it_gives_what_it_gives_here() {
        let mut b = crate::background::Background::default();
        assert!(b.start(pending(4)).is_ok());
        let back = crate::test_wait::wait_for("the run back", || b.try_take()).job;
        let mut here = pending(4);
        while here.advance() {}
        assert!(back.is_done());
        assert_eq!(back.vcores.get().owners(), here.vcores.get().owners());
        assert_eq!(back.outcome.map(|o| o.steps), here.outcome.map(|o| o.steps));
    }

    /// One thread finishes, balances while the other works, and stops when it is done; the
    /// second thread cannot take the token; a panicking thread still counts as done.
    #[test]
    fn the_first_idle_thread_balances_until_the_others_are_done() {
        let mut slack = Slack::new(2);
        *slack.pending.get_mut().unwrap() = Some(pending(4));
        slack.begin_phase(2);
        assert!(slack.active);
        std::thread::scope(|s| {
            let worker = s.spawn(|| {
                let _finish = Finish { slack: &slack, t: 1, done: false };
                std::thread::sleep(Duration::from_millis(20));
            });
            assert!(slack.balance_while_others_work(0), "thread 0 balances");
            worker.join().unwrap();
        });
        let (spent, overrun) = slack.take_phase();
        assert!(spent[0] > Duration::ZERO && spent[1] == Duration::ZERO, "{spent:?}");
        assert!(overrun <= spent[0], "{overrun:?} of {spent:?}");
        let p = slack.pending.get_mut().unwrap().as_ref().unwrap();
        assert!(p.run.is_some() || p.outcome.is_some(), "it started");
        // The next phase: the token is free again, a lone thread never balances.
        slack.begin_phase(1);
        assert!(!slack.balance_while_others_work(0));
    }

    /// A balancer whose first step waits until the test says the other threads are done, then
    /// runs a millisecond past them.
    struct PastTheOthers {
        inner: Box<dyn Balancer + Send>,
        started: Arc<AtomicBool>,
        others_done: Arc<AtomicBool>,
    }

    impl Balancer for PastTheOthers {
        fn name(&self) -> &str {
            "past-the-others"
        }
        fn step(&mut self, problem: &Problem, vcores: &mut VCores) {
            self.started.store(true, Ordering::Release);
            while !self.others_done.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_micros(100));
            }
            std::thread::sleep(Duration::from_millis(1));
            self.inner.step(problem, vcores);
        }
    }

    /// The idle thread stops after the unit during which the others finished, and that unit's
    /// time past the last of them is the overrun; its balancing time is within the phase's
    /// wall time. The other thread finishes by dropping its `Finish` guard.
    #[test]
    #[cfg_attr(miri, ignore = "compares clock-tick durations with the wall clock")]
    fn balancing_stops_after_the_unit_that_outlasts_the_others_and_counts_the_overrun() {
        let (started, others_done) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let mut p = pending(4);
        p.balancer =
            Box::new(PastTheOthers { inner: p.balancer, started: started.clone(), others_done: others_done.clone() });
        let mut slack = Slack::new(2);
        *slack.pending.get_mut().unwrap() = Some(p);
        slack.begin_phase(2);
        let wall = std::time::Instant::now();
        std::thread::scope(|s| {
            let slack = &slack;
            s.spawn(|| {
                let finish = Finish { slack, t: 1, done: false };
                while !started.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_micros(100));
                }
                drop(finish);
                others_done.store(true, Ordering::Release);
            });
            assert!(slack.balance_while_others_work(0));
        });
        let wall = wall.elapsed();
        let (spent, overrun) = slack.take_phase();
        assert!(overrun >= Duration::from_micros(900) && overrun <= spent[0], "{overrun:?} of {spent:?}");
        assert!(spent[0] <= wall, "{spent:?} in {wall:?}");
        let p = slack.pending.get_mut().unwrap().as_ref().unwrap();
        assert!(!p.is_done(), "stopped after its first step, with the others");
    }

    /// A thread does not balance when no run has work left, nor when another holds the token,
    /// and then still counts as running boxes; a `Finish` marked done does not count twice.
    #[test]
    fn nobody_balances_without_work_or_the_token() {
        let mut slack = Slack::new(3);
        slack.begin_phase(3);
        assert!(!slack.active);
        assert!(!slack.balance_while_others_work(0), "nothing pending");
        *slack.pending.get_mut().unwrap() = Some(pending(4));
        slack.begin_phase(3);
        assert!(slack.active);
        slack.token.store(true, Ordering::Relaxed);
        assert!(!slack.balance_while_others_work(0), "another thread balances");
        assert_eq!(slack.working.load(Ordering::Relaxed), 3);
        drop(Finish { slack: &slack, t: 0, done: true });
        assert_eq!(slack.working.load(Ordering::Relaxed), 3, "done already");
        drop(Finish { slack: &slack, t: 0, done: false });
        assert_eq!(slack.working.load(Ordering::Relaxed), 2);
    }
}
