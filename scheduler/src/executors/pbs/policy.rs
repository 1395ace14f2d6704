//! When pbs rebalances: the executor's rules, with no clock, pool or balancer in them, so
//! that the mapper (`mapper.rs`: the StarPU policy, `pbs-mpi`'s ranks) and the many-core model
//! (`pbs-bench model`) decide by the rules the executor runs by.
//!
//! An iteration's owner loads go to [`RebalancePolicy::observe`]: the criterion (Boulmier's
//! eq. 24, guarded, by default) sees them, and so do the check of the last rebalancing
//! (`executors/check.rs`) and the thread medians that tell the mapping's imbalance from the
//! machine's. If anything asked, [`RebalancePolicy::decide`] weighs the measured box loads
//! (read only where [`RebalancePolicy::reads_box_loads`] says they may be worth reading, and
//! weighed by [`RebalancePolicy::standing`] against the loads the owners in force were balanced
//! on); a rebalancing that ran is reported with [`RebalancePolicy::took_on`], one given up with
//! [`RebalancePolicy::gave_up`].

use pbs::{Problem, VCores};

use super::thread_wide::thread_wide;
use crate::criteria::{Criterion, Sample};
use crate::executors::check::{Asking, RecentLoads, PAYBACK_ITERATIONS, RECENT_ITERATIONS};

/// Iterations in a row whose threads must all measure an imbalance over the tolerance before
/// one under the trigger is fixed, or one over it that is thread-wide (`thread_wide.rs`). An
/// imbalance in the boxes' loads stays until it is fixed; one thread slowed by something else
/// on its core (another process, an interrupt storm) comes and goes: on a uniform load on the
/// shared 2-core VM, stretches of 1.02–1.04 lasted 5–15 iterations, stretches of one thread's
/// boxes 8–16 % slower 4–15 and now and then 50, and fixing each moved boxes that had to move
/// back when it ended.
pub(crate) const PERSISTENT_ITERATIONS: usize = 16;

/// What an iteration's owner loads ask for, before any box load is read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observation {
    /// The threads' `max_avg` in that iteration.
    pub max_avg: f64,
    /// The criterion asked, or it is the first measured iteration, or a check failed.
    pub asked: bool,
    /// The first measured iteration or a failed check: they are evidence enough, and the
    /// balancer need not wait for the imbalance to show in one thread's median.
    pub checked: bool,
    /// A failed check asked: a rebalancing now corrects the last one.
    pub correcting: bool,
}

/// Where the current mapping stands on the measured box loads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Standing {
    /// The owners' `max_avg` on those loads.
    pub max_avg: f64,
    /// The loads' lower bound on `max_avg` (`Problem::lower_bound`).
    pub bound: f64,
    /// The loads' mean per vCore, seconds.
    pub mean: f64,
    /// The loads changed since the owners in force were balanced by one factor on one owner's
    /// boxes (`thread_wide.rs`): a thread slower or faster throughout, which comes and goes
    /// with what else runs on its core. Such an imbalance waits over the trigger too, as one
    /// under it does (16 iterations in a row over the tolerance). [`RebalancePolicy::standing`]
    /// weighs it only where it can decide something (over the trigger, before those 16
    /// iterations), and says no elsewhere.
    pub thread_wide: bool,
}

/// What the measured box loads say of a rebalancing that was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Rebalance,
    /// The imbalance is not (yet) one thread's: asked again next iteration, for up to this
    /// many iterations in a row.
    NotYet(usize),
    /// The balancer could not win (enough): the criterion starts counting again.
    NothingToWin,
    /// What the balancer would win does not repay it before the run ends: the question is put
    /// off, not answered (the criterion is not reset), for a run that goes on after all.
    RunEndsFirst,
}

/// The state behind pbs's decisions to rebalance (see the module doc).
///
/// ```
/// use pbs_scheduler::criteria::Boulmier;
/// use pbs_scheduler::executors::{RebalancePolicy, Standing};
/// // Tolerance 2 %, trigger 5 %, 1 ms for a rebalancing until one is measured.
/// let mut policy = RebalancePolicy::new(Box::new(Boulmier::new(1e-3)), 0.02, 0.05, 1e-3);
/// // The first measured iteration always asks, and is its own evidence.
/// let seen = policy.observe(&[1.2e-3, 0.8e-3], 1);
/// assert!(seen.asked && policy.reads_box_loads(seen));
/// // On the box loads the mapping stands 20 % over the mean: rebalance, and say what it cost.
/// let standing = Standing { max_avg: 1.2, bound: 1.0, mean: 1e-3, thread_wide: false };
/// assert!(policy.decide(seen, Some(standing)));
/// // Balanced on those box loads (two boxes here), it ended within the tolerance.
/// policy.balanced_on(&[1.2e-3, 0.8e-3]);
/// policy.took_on(1.0, true, seen.correcting, 0.2e-3, 1);
/// assert_eq!(policy.last_cost(), 0.2e-3);
/// ```
pub struct RebalancePolicy {
    criterion: Box<dyn Criterion>,
    /// The balancer's tolerance and the executor's trigger (`PbsOptions`).
    tol: f64,
    trigger: f64,
    /// Seconds the last real rebalancing cost (the criterion's `C`).
    last_cost: f64,
    /// `max_avg / lower bound` where the last real rebalancing ended: what the balancer could
    /// reach on those loads when it fell short of its tolerance (1 when it converged).
    reached: f64,
    /// The first measured iteration and the check of the last real rebalancing.
    asking: Asking,
    /// Iterations in a row, under the current mapping, whose threads measured an imbalance
    /// over the tolerance (see [`PERSISTENT_ITERATIONS`]).
    over_tolerance: usize,
    /// Iterations in a row the criterion asked and the imbalance was not yet one thread's.
    waiting: usize,
    /// Each thread's load over the mean in the last iterations under the current mapping.
    recent: RecentLoads,
    /// Whether an imbalance must have been one thread's before it is fixed (see
    /// [`RebalancePolicy::without_waiting`]).
    waits: bool,
    /// The box loads the owners in force were balanced on (`None`: uniform loads, every
    /// mapping's start).
    reference: Option<Vec<f64>>,
    /// The iterations the run has left after the one being decided on, where it is known.
    left: Option<u64>,
}

impl RebalancePolicy {
    /// The rules with `criterion`, the balancer's tolerance `tol`, the `trigger`, and
    /// `first_cost` seconds as the cost of the last rebalancing until one is measured.
    pub fn new(criterion: Box<dyn Criterion>, tol: f64, trigger: f64, first_cost: f64) -> RebalancePolicy {
        RebalancePolicy {
            criterion,
            tol,
            trigger,
            last_cost: first_cost,
            reached: 1.0,
            asking: Asking::default(),
            over_tolerance: 0,
            waiting: 0,
            recent: RecentLoads::default(),
            waits: true,
            reference: None,
            left: None,
        }
    }

    /// These rules without the wait for an imbalance to be one thread's: every imbalance
    /// over the trigger is fixed at once, and one under it as soon as it pays. The executor's
    /// rules until 2026-11-23, which the first 16-core measurements ran by; the many-core
    /// model replays those measurements with them.
    pub fn without_waiting(self) -> RebalancePolicy {
        RebalancePolicy { waits: false, ..self }
    }

    /// Sees one iteration's owner loads (seconds per thread; `samples`: box-time samples
    /// completed so far, which the check waits on). Every iteration goes through here, also
    /// while a rebalancing is under way, whose answer the caller then ignores.
    pub fn observe(&mut self, loads: &[f64], samples: u64) -> Observation {
        let mean = loads.iter().sum::<f64>() / loads.len() as f64;
        let sample = Sample {
            max: loads.iter().copied().fold(0.0, f64::max),
            mean,
            min: loads.iter().copied().fold(f64::INFINITY, f64::min),
        };
        let max_avg = pbs::metrics::max_avg(loads);
        self.over_tolerance = if max_avg > 1.0 + self.tol { self.over_tolerance + 1 } else { 0 };
        self.recent.push(loads);
        self.asking.observe(self.criterion.as_mut(), max_avg, sample, samples, self.trigger, self.last_cost)
    }

    /// Whether the box loads are worth reading for an iteration that `seen`: it asked, and
    /// either it is its own evidence or an imbalance over the tolerance has lasted on one
    /// thread (the cheap test, before any box load is read).
    pub fn reads_box_loads(&self, seen: Observation) -> bool {
        seen.asked && (seen.checked || !self.waits || self.recent.persists_over(1.0 + self.tol))
    }

    /// Where the owners of `vcores`, charged with the box loads of `problem`
    /// (`VCores::recharge`), stand on those loads.
    pub fn standing(&self, vcores: &VCores, problem: &Problem) -> Standing {
        self.standing_of(vcores.owners(), vcores.charges(), problem)
    }

    /// [`RebalancePolicy::standing`] of owners kept apart from any vCores (`Mapper`'s refined
    /// owners): `owners` one per box of `problem`, `charges` their sums of its box loads.
    pub fn standing_of(&self, owners: &[u32], charges: &[f64], problem: &Problem) -> Standing {
        let (max_avg, bound) = (pbs::metrics::max_avg(charges), problem.lower_bound());
        // On the critical path: the test reads a sample of the boxes, so it runs only where
        // its answer can change the verdict.
        let weighed =
            self.waits && max_avg > (1.0 + self.trigger) * bound && self.over_tolerance < PERSISTENT_ITERATIONS;
        let thread_wide = weighed && thread_wide(owners, problem.loads(), self.reference.as_deref(), charges.len());
        Standing { max_avg, bound, mean: problem.mean(), thread_wide }
    }

    /// Whether to rebalance now, for an iteration that `seen` (asked), with the mapping's
    /// `standing` on the box loads if they were read. Not yet: the criterion is not reset and
    /// asks again next iteration, for as long as an imbalance of the mapping takes to show in
    /// one thread's median, or a thread-wide one takes to last 16 iterations (reset at once,
    /// Boulmier's eq. 24 would never ask again for an imbalance that then stays constant);
    /// reset after that wait: it was noise. Nothing to win: reset with the last real
    /// rebalancing's cost.
    pub fn decide(&mut self, seen: Observation, standing: Option<Standing>) -> bool {
        let verdict = standing.map_or(Verdict::NotYet(RECENT_ITERATIONS), |s| self.verdict(s, seen.checked));
        self.waiting = match verdict {
            Verdict::NotYet(wait) if self.waiting + 1 < wait => self.waiting + 1,
            _ => 0,
        };
        match verdict {
            Verdict::Rebalance => true,
            Verdict::NotYet(_) if self.waiting > 0 => false,
            Verdict::RunEndsFirst => {
                self.asking.hold(seen);
                false
            }
            _ => {
                self.criterion.rebalanced(self.last_cost);
                false
            }
        }
    }

    /// Whether the balancer should run with the mapping at `s`. Not when the mapping is within
    /// the balancer's own tolerance: it could not do better. Always when it is outside the
    /// trigger. In between, when the time the heaviest thread wastes over
    /// [`PAYBACK_ITERATIONS`] iterations exceeds the last rebalancing's cost: a few percent of
    /// a coarse task's time is worth fixing, the same share of empty tasks still waits for the
    /// trigger. Unless `checked`, the threads must have measured it too, for long enough: over
    /// the trigger, one thread's median over the last [`RECENT_ITERATIONS`], and when it is
    /// thread-wide [`PERSISTENT_ITERATIONS`] in a row over the tolerance as well; under it,
    /// [`PERSISTENT_ITERATIONS`] in a row over the tolerance, and one thread's median over it.
    /// Near the run's end, where it is known, a rebalancing that the iterations left would not
    /// repay is put off ([`RebalancePolicy::run_ends_in`]).
    fn verdict(&self, s: Standing, checked: bool) -> Verdict {
        match self.verdict_in_a_run_going_on(s, checked) {
            Verdict::Rebalance if self.left.is_some_and(|left| self.win(s) * (left as f64) < self.last_cost) => {
                Verdict::RunEndsFirst
            }
            verdict => verdict,
        }
    }

    /// What a rebalancing can win per iteration (seconds) on the heaviest thread: down to the
    /// tolerance, or to where the last one ended if it fell short (a balancer that stopped at
    /// 3.5 % gains nothing on a 3.5 % imbalance, and would otherwise be run again and again).
    fn win(&self, s: Standing) -> f64 {
        (s.max_avg - (1.0 + self.tol).max(self.reached) * s.bound) * s.mean
    }

    /// [`RebalancePolicy::verdict`] with no end of the run in sight.
    fn verdict_in_a_run_going_on(&self, s: Standing, checked: bool) -> Verdict {
        let checked = checked || !self.waits;
        if s.max_avg <= (1.0 + self.tol) * s.bound {
            return Verdict::NothingToWin;
        }
        let win = self.win(s);
        if s.max_avg > (1.0 + self.trigger) * s.bound {
            // A thread-wide imbalance (a core shared for a while) waits as one under the
            // trigger does: on the VM, most such stretches ended within 16 iterations.
            return match (checked || self.recent.persists_over(1.0 + self.trigger), s.thread_wide) {
                (true, false) => Verdict::Rebalance,
                (true, true) if checked || self.over_tolerance >= PERSISTENT_ITERATIONS => Verdict::Rebalance,
                (_, true) => Verdict::NotYet(PERSISTENT_ITERATIONS),
                (false, false) => Verdict::NotYet(RECENT_ITERATIONS),
            };
        }
        // With many threads the slowest of the moment is always a few percent over: the run
        // must also be one thread's, as the median says.
        if !checked && (self.over_tolerance < PERSISTENT_ITERATIONS || !self.recent.persists_over(1.0 + self.tol)) {
            return Verdict::NotYet(RECENT_ITERATIONS);
        }
        if win * PAYBACK_ITERATIONS >= self.last_cost {
            Verdict::Rebalance
        } else {
            Verdict::NothingToWin
        }
    }

    /// A rebalancing was taken on (its box loads told to [`RebalancePolicy::balanced_on`]): it
    /// ended at `reached` (`max_avg` over the bound, 1 if it converged), `moved` whether a box
    /// changed owner, `correcting` whether it was a correction, `cost` seconds what it added to
    /// the wall time as far as the caller knows, `samples` the box-time samples completed (the
    /// check waits for a newer one).
    pub fn took_on(&mut self, reached: f64, moved: bool, correcting: bool, cost: f64, samples: u64) {
        self.reached = reached;
        if moved {
            self.over_tolerance = 0;
            self.recent.clear();
        }
        self.asking.check.arm(samples, correcting);
        self.last_cost = cost;
        self.criterion.rebalanced(cost);
    }

    /// A mapping on loads given in advance took `cost` seconds: the criterion's `C` until a
    /// rebalancing is measured. Where it ended on those loads says nothing of the measured ones,
    /// and the first measured iteration still asks ([`crate::mapper::Mapper::hint_loads`]).
    pub fn estimated_cost(&mut self, cost: f64) {
        self.last_cost = cost;
        self.criterion.rebalanced(cost);
    }

    /// Adds `seconds` to the cost of the rebalancing just taken on, and tells the criterion:
    /// what a runtime spent on what the balancer does not see (moving the boxes' data).
    pub fn add_to_last_cost(&mut self, seconds: f64) {
        self.last_cost += seconds;
        self.criterion.rebalanced(self.last_cost);
    }

    /// The owners in force were balanced on the box loads `loads` (a rebalancing taken on, or
    /// loads given in advance): later loads are weighed against them ([`Standing::thread_wide`]).
    pub fn balanced_on(&mut self, loads: &[f64]) {
        let reference = self.reference.get_or_insert_with(Vec::new);
        reference.clear();
        reference.extend_from_slice(loads);
    }

    /// A rebalancing was given up (late, or no better than the mapping in force): the
    /// criterion counts again from the last real rebalancing's cost.
    pub fn gave_up(&mut self) {
        self.criterion.rebalanced(self.last_cost);
    }

    /// The mapping came from loads given in advance: nothing to check, and the first measured
    /// iteration need not rebalance.
    pub fn given_loads(&mut self) {
        self.asking.given_loads();
    }

    /// The run ends `iterations` after the one decided on next (`None`: it goes on, the
    /// default). A rebalancing then pays only if the heaviest thread's excess over what the
    /// balancer can reach, over those iterations, repays the last one's cost: near the end
    /// of a run none does, however large the imbalance. The iterations count from the
    /// decision; a run in idle time or on the balancer thread lands a little later, so the
    /// test is a lenient one there.
    pub fn run_ends_in(&mut self, iterations: Option<u64>) {
        self.left = iterations;
    }

    /// An iteration that `seen` ended where no rebalancing can start (the run's last, by the
    /// application's hint): its question is put off, not answered, so that a run that goes on
    /// after all asks it again (the first measurement's and a failed check's too).
    pub fn hold(&mut self, seen: Observation) {
        self.asking.hold(seen);
    }

    /// Seconds the last real rebalancing cost (the criterion's `C`).
    pub fn last_cost(&self) -> f64 {
        self.last_cost
    }

    /// The criterion's name.
    pub fn criterion_name(&self) -> String {
        self.criterion.name()
    }

    /// Sets the last rebalancing's cost, for tests that choose it.
    #[cfg(test)]
    pub(crate) fn set_last_cost(&mut self, cost: f64) {
        self.last_cost = cost;
    }

    /// Where the last rebalancing taken on ended (`max_avg` over the bound) and the
    /// iterations in a row over the tolerance since, for tests that read them.
    #[cfg(test)]
    pub(crate) fn reached_and_over_tolerance(&self) -> (f64, usize) {
        (self.reached, self.over_tolerance)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::criteria::Never;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    fn policy() -> RebalancePolicy {
        RebalancePolicy::new(Box::new(Never), 0.02, 0.05, 300e-6)
    }

    /// Two threads of 32 boxes of `box_time` seconds, thread 0 at `max_avg` = 1 + `excess`.
    fn standing(box_time: f64, excess: f64) -> Standing {
        Standing { max_avg: 1.0 + excess, bound: 1.0, mean: 32.0 * box_time, thread_wide: false }
    }

    /// The threads' loads over the mean in the last iterations: thread 0 at `heavy` in the
    /// iterations `slow`, even otherwise.
    fn recent(heavy: f64, slow: &[usize]) -> RecentLoads {
        RecentLoads(
            (0..RECENT_ITERATIONS)
                .map(|i| if slow.contains(&i) { vec![heavy, 2.0 - heavy] } else { vec![1.0, 1.0] })
                .collect(),
        )
    }

    #[test]
    fn a_small_imbalance_is_fixed_when_it_costs_more_than_a_rebalancing() {
        let mut p = policy();
        let worth = |p: &RebalancePolicy, box_time: f64, excess: f64| {
            p.verdict(standing(box_time, excess), false) == Verdict::Rebalance
        };
        let always: Vec<usize> = (0..RECENT_ITERATIONS).collect();
        // An imbalance under the trigger that has not lasted is left alone...
        p.recent = recent(1.035, &always);
        p.over_tolerance = PERSISTENT_ITERATIONS - 1;
        assert!(!worth(&p, 100e-6, 0.035), "3.5 % for 15 iterations");
        // ...nor one that has, but on a different thread each time (the median is even)...
        p.over_tolerance = PERSISTENT_ITERATIONS;
        p.recent = RecentLoads(
            (0..RECENT_ITERATIONS)
                .map(|i| match i % 2 {
                    _ if i == RECENT_ITERATIONS - 1 => vec![1.0, 1.0],
                    0 => vec![1.035, 0.965],
                    _ => vec![0.965, 1.035],
                })
                .collect(),
        );
        assert!(!worth(&p, 100e-6, 0.035), "3.5 % on one thread, then the other");
        // ...and fixed once one thread has carried it, when it pays.
        p.recent = recent(1.035, &always);
        // 32 boxes of 100 µs per thread (the stencil's scale): 3.5 % wastes 48 µs an iteration.
        assert!(worth(&p, 100e-6, 0.035), "3.5 % on 3.2 ms per thread");
        assert!(!worth(&p, 100e-6, 0.01), "within the balancer's tolerance");
        // 32 boxes of 0.1 µs: 3.5 % wastes 48 ns an iteration, 0.3 ms takes 6000 iterations.
        assert!(!worth(&p, 0.1e-6, 0.035), "3.5 % on 3.2 µs per thread");
        // Above the trigger, when the threads measured it in most of the last iterations.
        p.recent = recent(1.09, &[1, 3, 4]);
        assert!(!worth(&p, 0.1e-6, 0.08), "three slow iterations in seven");
        p.recent = recent(1.09, &[1, 3, 4, 6]);
        assert!(worth(&p, 0.1e-6, 0.08), "above the trigger, in four of seven");
        // After a rebalancing that stopped short at 3.5 %, only what lies beyond is won.
        p.recent = recent(1.045, &always);
        p.reached = 1.035;
        assert!(!worth(&p, 100e-6, 0.035), "nothing to win on 3.5 %");
        assert!(worth(&p, 100e-6, 0.045), "one point over 3.2 ms per thread, 3.2 ms in 100 iterations");
    }

    /// Over the trigger and one thread's, a thread-wide imbalance waits for
    /// [`PERSISTENT_ITERATIONS`] in a row over the tolerance, asked about all along; the first
    /// measurement or a failed check does not wait.
    #[test]
    fn a_thread_wide_imbalance_waits_as_one_under_the_trigger() {
        let mut p = RebalancePolicy::new(Box::new(crate::criteria::Always), 0.02, 0.05, 0.0);
        p.asking.measured = true;
        let wide = Standing { thread_wide: true, ..standing(1e-6, 0.1) };
        for i in 1..PERSISTENT_ITERATIONS {
            let seen = p.observe(&[1.1, 0.9], 0);
            let read = p.reads_box_loads(seen);
            assert!(!p.decide(seen, read.then_some(wide)), "iteration {i}");
        }
        assert_eq!(p.waiting, PERSISTENT_ITERATIONS - 1, "asked all along, the criterion never reset");
        let seen = p.observe(&[1.1, 0.9], 0);
        assert!(p.reads_box_loads(seen) && p.decide(seen, Some(wide)));
        // The same loads in the boxes' own shift: fixed once the median shows it.
        let mut p = RebalancePolicy::new(Box::new(crate::criteria::Always), 0.02, 0.05, 0.0);
        p.asking.measured = true;
        let fixed = (1..=PERSISTENT_ITERATIONS).find(|_| {
            let seen = p.observe(&[1.1, 0.9], 0);
            let read = p.reads_box_loads(seen);
            p.decide(seen, read.then_some(standing(1e-6, 0.1)))
        });
        assert_eq!(fixed, Some(RECENT_ITERATIONS));
        // The first measured iteration is its own evidence, thread-wide or not.
        let mut p = policy();
        let first = p.observe(&[1.1, 0.9], 0);
        assert!(p.decide(first, Some(wide)));
    }

    /// The tolerance and the trigger are read against the loads' lower bound, not against
    /// 1 (one heavy box can hold the bound at 1.5): within the tolerance there is nothing to
    /// win, measured or not; between the two a rebalancing must pay; over the trigger it is
    /// made whatever it costs.
    #[test]
    fn the_tolerance_and_the_trigger_are_read_against_the_bound() {
        let mut p = policy();
        let at = |max_avg: f64, bound: f64| Standing { max_avg, bound, mean: 1e-3, thread_wide: false };
        assert_eq!(p.verdict(at(1.01, 1.0), false), Verdict::NothingToWin, "within the tolerance, not checked");
        assert_eq!(p.verdict(at(1.52, 1.5), false), Verdict::NothingToWin, "within the tolerance of the bound");
        // Under the trigger, what is won over 100 iterations is the excess over the tolerance
        // times the mean: 1.55 over 1.5 × 1.02 wins 0.02 × 1 ms × 100 = 2 ms.
        p.set_last_cost(10e-3);
        assert_eq!(p.verdict(at(1.55, 1.5), true), Verdict::NothingToWin, "under the trigger, 10 ms to win back");
        assert_eq!(p.verdict(at(1.6, 1.5), true), Verdict::Rebalance, "over the trigger");
        p.set_last_cost(2e-3);
        assert_eq!(p.verdict(at(1.03, 1.0), true), Verdict::NothingToWin, "1 ms won for 2");
        assert_eq!(p.verdict(at(1.045, 1.0), true), Verdict::Rebalance, "2.5 ms won for 2");
    }

    /// A rebalancing given up resets the criterion as one made would (from the last real
    /// one's cost); loads given in advance spare the first measured iteration its question.
    #[test]
    fn a_rebalancing_given_up_resets_the_criterion_and_loads_given_spare_the_first_question() {
        let resets = Arc::new(AtomicUsize::new(0));
        let mut p = RebalancePolicy::new(Box::new(CountingResets(resets.clone())), 0.02, 0.05, 0.0);
        p.gave_up();
        assert_eq!(resets.load(Ordering::Relaxed), 1);
        let first = policy().observe(&[1.2, 0.8], 0);
        assert!(first.asked && first.checked, "{first:?}");
        let mut given = policy();
        given.given_loads();
        let first = given.observe(&[1.2, 0.8], 0);
        assert!(!first.asked && !first.checked, "{first:?}");
    }

    /// A rebalancing whose threads still measure over twice the trigger in the median of the
    /// three iterations after it (on newer box times) asks for a correction on its own, with a
    /// criterion that never asks; loads given in advance leave nothing to check.
    #[test]
    fn a_failed_check_asks_on_its_own_and_loads_given_leave_nothing_to_check() {
        let run = |given: bool| {
            let mut p = policy();
            let first = p.observe(&[1.0, 1.0], 0);
            assert!(first.asked && first.checked);
            p.took_on(1.0, true, false, 1e-6, 1);
            if given {
                p.given_loads();
            }
            (2..5).map(|samples| p.observe(&[1.3, 0.7], samples)).collect::<Vec<Observation>>()
        };
        let checked = run(false);
        assert!(checked[..2].iter().all(|s| !s.asked), "{checked:?}");
        assert!(checked[2].asked && checked[2].checked && checked[2].correcting, "{checked:?}");
        let given = run(true);
        assert!(given.iter().all(|s| !s.asked), "{given:?}");
    }

    /// The thread medians start over with a mapping that moved boxes: an imbalance one
    /// thread carried under the old mapping says nothing of the new one.
    #[test]
    fn the_thread_medians_start_over_when_boxes_moved() {
        for moved in [false, true] {
            let mut p = RebalancePolicy::new(Box::new(crate::criteria::Always), 0.02, 0.05, 0.0);
            p.asking.measured = true;
            for _ in 0..RECENT_ITERATIONS {
                p.observe(&[1.2, 0.8], 0);
            }
            p.took_on(1.0, moved, false, 1e-6, 0);
            let seen = p.observe(&[1.2, 0.8], 0);
            assert_eq!(p.reads_box_loads(seen), !moved, "moved: {moved}");
        }
    }

    /// A criterion that always asks and counts its resets.
    struct CountingResets(Arc<AtomicUsize>);
    impl Criterion for CountingResets {
        fn name(&self) -> String {
            "counting".into()
        }
        fn observe(&mut self, _: Sample) -> bool {
            true
        }
        fn rebalanced(&mut self, _: f64) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// An imbalance over the trigger that moves from thread to thread never becomes one
    /// thread's: asked about for [`RECENT_ITERATIONS`] iterations, the criterion is reset at
    /// the last of them (it was noise), not before and not never.
    #[test]
    fn a_wait_that_never_finds_one_threads_imbalance_resets_the_criterion_when_it_ends() {
        let resets = Arc::new(AtomicUsize::new(0));
        let mut p = RebalancePolicy::new(Box::new(CountingResets(resets.clone())), 0.02, 0.05, 0.0);
        p.asking.measured = true;
        let count = || resets.load(Ordering::Relaxed);
        for round in 0..2 {
            for i in 1..=RECENT_ITERATIONS {
                // 20 % over the mean on thread 0, then 1, then 2: no thread's median is over.
                let mut loads = vec![0.9; 3];
                loads[i % 3] = 1.2;
                let seen = p.observe(&loads, 0);
                assert!(seen.asked && !p.reads_box_loads(seen), "round {round}, iteration {i}");
                assert!(!p.decide(seen, None), "round {round}, iteration {i}");
                let waited = if i < RECENT_ITERATIONS { i } else { 0 };
                assert_eq!(p.waiting, waited, "round {round}, iteration {i}");
                assert_eq!(count(), round + usize::from(i == RECENT_ITERATIONS), "round {round}, iteration {i}");
            }
        }
    }

    /// [`Standing::thread_wide`] is weighed only where it can decide the verdict (over the
    /// trigger, waiting, before [`PERSISTENT_ITERATIONS`] in a row over the tolerance) and says
    /// no elsewhere: the test reads box loads on the critical path.
    #[test]
    fn the_standing_weighs_a_thread_wide_change_only_where_it_can_decide() {
        let grid = pbs::Grid::new(16, 16).unwrap();
        // Where `vcores` stand for `p` on the loads `before`, `owner`'s boxes `factor` times
        // slower throughout, the other owner's as they were.
        let standing_on = |p: &RebalancePolicy, vcores: &VCores, before: &[f64], owner: u32, factor: f64| {
            let loads: Vec<f64> =
                before.iter().zip(vcores.owners()).map(|(&l, &o)| if o == owner { factor * l } else { l }).collect();
            let problem = Problem::new(grid, &loads, 2).unwrap();
            let mut now = vcores.clone();
            now.recharge(&problem);
            p.standing(&now, &problem)
        };
        let even = vec![1.0; grid.len()];
        let vcores = VCores::from_bisection(&Problem::new(grid, &even, 2).unwrap());
        let standing_at = |p: &RebalancePolicy, factor: f64| standing_on(p, &vcores, &even, 0, factor);
        let mut p = policy();
        p.balanced_on(&even);
        let over = standing_at(&p, 1.2);
        assert!(over.max_avg > 1.05 * over.bound && over.thread_wide, "over the trigger: {over:?}");
        let under = standing_at(&p, 1.06);
        assert!(under.max_avg > 1.02 * under.bound && under.max_avg < 1.05 * under.bound, "{under:?}");
        assert!(!under.thread_wide, "under the trigger it waits anyway: {under:?}");
        p.over_tolerance = PERSISTENT_ITERATIONS - 1;
        assert!(standing_at(&p, 1.2).thread_wide, "one iteration before the wait ends");
        p.over_tolerance = PERSISTENT_ITERATIONS;
        assert!(!standing_at(&p, 1.2).thread_wide, "the wait is over");
        let mut p = policy().without_waiting();
        p.balanced_on(&even);
        assert!(!standing_at(&p, 1.2).thread_wide, "rules that never wait");
        // Weighed against the loads the owners were balanced on, not against even ones: boxes
        // of 1 to 4 seconds, owner 0's 20 % slower throughout.
        let uneven: Vec<f64> = (0..grid.len()).map(|k| 1.0 + (k % 4) as f64).collect();
        let mut p = policy();
        let s = standing_on(&p, &vcores, &uneven, 0, 1.2);
        assert!(!s.thread_wide, "against even loads the boxes differ by 4 ×");
        p.balanced_on(&uneven);
        assert!(standing_on(&p, &vcores, &uneven, 0, 1.2).thread_wide, "against the loads balanced on");
        // The trigger is read against the bound: one box of 10,000 beside 255 of 1 holds it at
        // 1.95, and that box's owner 4 % slower stands within 2.6 % of it, under the trigger.
        let mut giant = vec![1.0; grid.len()];
        giant[0] = 10_000.0;
        let vcores = VCores::from_bisection(&Problem::new(grid, &giant, 2).unwrap());
        let mut p = policy();
        p.balanced_on(&giant);
        let s = standing_on(&p, &vcores, &giant, vcores.owners()[0], 1.04);
        assert!(s.bound > 1.9 && s.max_avg < 1.05 * s.bound && !s.thread_wide, "{s:?}");
    }

    /// Near a run's end a rebalancing pays only if what it wins per iteration, over the
    /// iterations left, repays the last one's cost: over the trigger and at the first
    /// measurement too, whose question is then held for a run that goes on after all. Where
    /// the last run ended short of the tolerance, only the excess over where it ended counts.
    #[test]
    fn near_the_end_of_a_run_a_rebalancing_must_repay_its_cost_in_the_iterations_left() {
        // (1.2 − 1.02) × 32 µs = 5.76 µs won per iteration against 300 µs: 53 repay it, 52 not.
        for (left, pays) in [(None, true), (Some(53), true), (Some(52), false), (Some(0), false)] {
            let mut p = policy();
            p.run_ends_in(left);
            let first = p.observe(&[1.2, 0.8], 0);
            assert_eq!(p.decide(first, Some(standing(1e-6, 0.2))), pays, "{left:?}");
            if !pays {
                // Put off, not answered: the run going on after all asks it again.
                p.run_ends_in(None);
                let again = p.observe(&[1.2, 0.8], 0);
                assert!(again.checked && p.decide(again, Some(standing(1e-6, 0.2))), "{left:?}: {again:?}");
            }
        }
        // The last run ended at 1.1 (300 µs): (1.2 − 1.1) × 32 µs = 3.2 µs a time, 94 repay it.
        for (left, pays) in [(Some(94), true), (Some(93), false)] {
            let mut p = RebalancePolicy::new(Box::new(crate::criteria::Always), 0.02, 0.05, 300e-6).without_waiting();
            p.asking.measured = true;
            p.took_on(1.1, true, false, 300e-6, 1);
            p.run_ends_in(left);
            let seen = p.observe(&[1.2, 0.8], 0);
            assert_eq!(p.decide(seen, Some(standing(1e-6, 0.2))), pays, "{left:?}");
        }
        // Repaid exactly (no tolerance: 1 × 0.25 s won a time, 4 iterations, 1 s) is repaid.
        let mut p = RebalancePolicy::new(Box::new(Never), 0.0, 0.05, 1.0);
        p.run_ends_in(Some(4));
        let first = p.observe(&[2.0, 0.0], 0);
        assert!(p.decide(first, Some(Standing { max_avg: 2.0, bound: 1.0, mean: 0.25, thread_wide: false })));
    }

    /// The first measured iteration asks and is its own evidence; an imbalance over the
    /// trigger that is not yet one thread's is asked about again for as long as a median
    /// takes, the criterion reset only then; the box loads are read only once it has lasted.
    #[test]
    fn an_imbalance_is_waited_for_until_it_is_one_threads() {
        let mut p = policy();
        let first = p.observe(&[1.2, 0.8], 0);
        assert_eq!(first, Observation { max_avg: 1.2, asked: true, checked: true, correcting: false });
        assert!(p.reads_box_loads(first), "the first measurement reads the box loads at once");
        assert!(p.decide(first, Some(standing(1e-6, 0.2))));
        p.took_on(1.0, true, false, 1e-3, 1);
        // With a criterion that never asks, nothing is asked, whatever the loads.
        let quiet = p.observe(&[1.5, 0.5], 2);
        assert!(!quiet.asked && !p.reads_box_loads(quiet));
        // A criterion that always asks: not yet one thread's (fewer than RECENT_ITERATIONS
        // iterations under the mapping), so not read, and asked again.
        let mut p = RebalancePolicy::new(Box::new(crate::criteria::Always), 0.02, 0.05, 0.0);
        p.asking.measured = true;
        for i in 0..RECENT_ITERATIONS - 1 {
            let seen = p.observe(&[1.2, 0.8], 0);
            assert!(seen.asked && !seen.checked && !p.reads_box_loads(seen), "iteration {i}");
            assert!(!p.decide(seen, None));
            assert_eq!(p.waiting, i + 1);
        }
        // Now the median says it is thread 0's: read, and rebalanced.
        let seen = p.observe(&[1.2, 0.8], 0);
        assert!(p.reads_box_loads(seen));
        assert!(p.decide(seen, Some(standing(1e-6, 0.2))));
        assert_eq!(p.waiting, 0);
        // Without the wait (the rules of the first 16-core measurements): read and fixed at
        // once, and under the trigger as soon as it pays.
        let mut p = RebalancePolicy::new(Box::new(crate::criteria::Always), 0.02, 0.05, 0.0).without_waiting();
        p.asking.measured = true;
        let seen = p.observe(&[1.2, 0.8], 0);
        assert!(p.reads_box_loads(seen) && p.decide(seen, Some(standing(1e-6, 0.2))));
        let seen = p.observe(&[1.035, 0.965], 0);
        assert!(p.decide(seen, Some(standing(100e-6, 0.035))));
    }
}
