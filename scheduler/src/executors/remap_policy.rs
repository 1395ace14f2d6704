//! When a remapper remaps: the [`Remapping`](super::Remapping) executor's rules, with no clock,
//! pool or remapper in them, so that the many-core model (`pbs-bench model --remappers`)
//! replays the seed papers' balancers by the rules the executor runs them by.
//!
//! An iteration's thread loads go to [`RemapPolicy::observe`]: the criterion (Boulmier's eq. 24
//! by default) sees them, and so does the check of the last remapping (`executors/check.rs`).
//! The first measured iteration always remaps, and so does a failed check; a remapping the
//! criterion asks for runs only when the measured box loads put the current mapping over the
//! trigger ([`RemapPolicy::decide`]). What a remapping cost, and whether its owners were taken
//! (the caller takes them when they are better balanced), goes to [`RemapPolicy::remapped`].
//!
//! pbs's own rules ([`RebalancePolicy`](super::RebalancePolicy)) add to these a wait for an
//! imbalance to be one thread's, the payback of an imbalance under the trigger, and the floor
//! at where the last run ended: a remapper has no tolerance of its own to weigh them against.

use super::check::Asking;
use super::Observation;
use crate::criteria::{Criterion, Sample};

/// The state behind a remapper's decisions to remap (see the module doc).
///
/// ```
/// use pbs_scheduler::criteria::{Boulmier, Sample};
/// use pbs_scheduler::executors::RemapPolicy;
/// // Trigger 5 %, 1 ms for a remapping until one is measured.
/// let mut policy = RemapPolicy::new(Box::new(Boulmier::new(1e-3)), 0.05, 1e-3);
/// // The first measured iteration always asks, and remaps whatever the box loads say.
/// let seen = policy.observe(Sample { max: 1.01e-3, mean: 1e-3, min: 0.99e-3 }, 1);
/// assert!(seen.asked && policy.decide(seen, 1.01));
/// policy.remapped(seen, true, 0.2e-3, 1);
/// assert_eq!(policy.last_cost(), 0.2e-3);
/// ```
pub struct RemapPolicy {
    criterion: Box<dyn Criterion>,
    /// `max_avg` at or under which a remapping the criterion asked for is skipped.
    trigger: f64,
    /// Seconds the last remapping took (the criterion's `C`).
    last_cost: f64,
    /// The first measured iteration and the check of the last remapping whose owners were
    /// taken.
    asking: Asking,
}

impl RemapPolicy {
    /// The rules with `criterion`, the `trigger`, and `first_cost` seconds as the cost of the
    /// last remapping until one is measured.
    pub fn new(criterion: Box<dyn Criterion>, trigger: f64, first_cost: f64) -> RemapPolicy {
        RemapPolicy { criterion, trigger, last_cost: first_cost, asking: Asking::default() }
    }

    /// Sees one iteration's thread loads as the criterion sees them (`sample`, seconds: for
    /// per-phase loads, the sums over phases of each phase's largest, mean and smallest);
    /// `samples` box-time samples completed so far, which the check waits on.
    pub fn observe(&mut self, sample: Sample, samples: u64) -> Observation {
        let max_avg = if sample.mean > 0.0 { sample.max / sample.mean } else { 1.0 };
        self.asking.observe(self.criterion.as_mut(), max_avg, sample, samples, self.trigger, self.last_cost)
    }

    /// Whether to remap, for an iteration that `seen` (asked), with the current mapping at
    /// `now` (what the remapper minimises, on the measured box loads): always after the first
    /// measured iteration or a failed check, otherwise over the trigger. If not, the criterion
    /// counts again from the last remapping's cost.
    pub fn decide(&mut self, seen: Observation, now: f64) -> bool {
        if seen.checked || now > 1.0 + self.trigger {
            return true;
        }
        self.criterion.rebalanced(self.last_cost);
        false
    }

    /// A remapping decided for an iteration that `seen` ran for `cost` seconds; `taken` whether
    /// its owners were taken (then it is checked a few iterations on), `samples` the box-time
    /// samples completed (the check waits for a newer one).
    pub fn remapped(&mut self, seen: Observation, taken: bool, cost: f64, samples: u64) {
        if taken {
            self.asking.check.arm(samples, seen.correcting);
        }
        self.last_cost = cost;
        self.criterion.rebalanced(cost);
    }

    /// An iteration that `seen` ended where no remapping can start (the run's last, by the
    /// application's hint): the first measurement's or a failed check's question is asked again
    /// next iteration, for a run that goes on after all (the criterion was not reset).
    pub fn hold(&mut self, seen: Observation) {
        self.asking.hold(seen);
    }

    /// The mapping came from loads given in advance: nothing to check, and the first measured
    /// iteration need not remap.
    pub fn given_loads(&mut self) {
        self.asking.given_loads();
    }

    /// Seconds the last remapping took.
    pub fn last_cost(&self) -> f64 {
        self.last_cost
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::criteria::Never;

    fn even(mean: f64) -> Sample {
        Sample { max: mean, mean, min: mean }
    }

    fn skewed(ratio: f64) -> Sample {
        Sample { max: ratio, mean: 1.0, min: 2.0 - ratio }
    }

    /// Asked by nothing but the first iteration and the checks: what remaps is what the rules
    /// say, not the criterion.
    #[test]
    fn the_first_iteration_and_a_failed_check_remap_whatever_the_trigger_says() {
        let mut p = RemapPolicy::new(Box::new(Never), 0.05, 1.0);
        let first = p.observe(even(1.0), 1);
        assert!(first.asked && first.checked && !first.correcting);
        assert!(p.decide(first, 1.0), "the first measured iteration remaps even a balanced mapping");
        p.remapped(first, true, 1.0, 1);
        // The check waits for a fresh sample and three iterations; each over twice the trigger
        // and its excess paying for a remapping of 1 s within 100 iterations.
        let seen = p.observe(skewed(1.2), 1);
        assert!(!seen.asked, "no fresh sample yet");
        assert!(!p.observe(skewed(1.2), 2).asked);
        let failed = p.observe(skewed(1.2), 3);
        assert!(failed.asked && failed.checked && failed.correcting, "{failed:?}");
        assert!(p.decide(failed, 1.01), "a failed check remaps even under the trigger");
        // A remapping not taken is not checked, and the criterion alone decides from then on.
        p.remapped(failed, false, 1.0, 3);
        for samples in 4..10 {
            assert!(!p.observe(skewed(1.2), samples).asked);
        }
    }

    /// Asked by the criterion, it remaps only over the trigger; under it, the criterion counts
    /// again from the last remapping's cost.
    #[test]
    fn the_criterion_asks_and_the_trigger_decides() {
        let mut p = RemapPolicy::new(Box::new(crate::criteria::Always), 0.05, 1.0);
        p.given_loads();
        let seen = p.observe(skewed(1.04), 1);
        assert!(seen.asked && !seen.checked);
        assert!(!p.decide(seen, 1.04), "under the trigger");
        assert!(p.decide(seen, 1.06), "over it");
        p.remapped(seen, true, 0.5, 1);
        assert_eq!(p.last_cost(), 0.5);
        // At the trigger exactly is not over it (0.5: exact in binary).
        let mut p = RemapPolicy::new(Box::new(crate::criteria::Always), 0.5, 1.0);
        p.given_loads();
        let seen = p.observe(skewed(1.5), 1);
        assert!(seen.asked && !seen.checked);
        assert!(!p.decide(seen, 1.5));
        // Threads that did nothing are balanced, not 0/0.
        let idle = p.observe(even(0.0), 2);
        assert_eq!(idle.max_avg, 1.0);
    }
}
