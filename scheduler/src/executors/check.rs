//! Whether a rebalancing did what it promised: the check that `pbs` and the remappers run a
//! few iterations after each rebalancing, and the bounded corrections it may ask for.

use super::Observation;
use crate::criteria::{Criterion, Sample};

/// Rebalancings in a row that may correct a rebalancing that missed its target.
///
/// A rebalancing is only as good as the box times it used. If those were off (a thread
/// interrupted in the one measured iteration, the warm-started balancer stopped short), the
/// new mapping is imbalanced from its first iteration on, and Boulmier's eq. 24, which counts
/// only the imbalance that *grows* after a rebalancing, would keep it for good. So each
/// rebalancing is checked once box times have been measured again under it and
/// [`CHECK_ITERATIONS`] iterations have run: if the median of their thread `max_avg` is above
/// twice the trigger, it rebalances again, on the new times. The median, because on
/// sub-millisecond iterations one interrupt makes a single iteration look imbalanced; twice
/// the trigger, because a good mapping of short iterations still measures a few percent of
/// noise (docs/design-notes.md, "Checking a rebalancing"). Bounded, because threads of
/// different speeds can keep the measured imbalance up whatever the mapping.
pub(crate) const MAX_CORRECTIONS: u32 = 3;

/// Iterations within which a rebalancing must pay for itself. A correction runs only if the
/// threads' excess time (max − mean) over this many iterations would exceed the last
/// rebalancing's cost: tiny tasks measure large *relative* imbalances that are only noise,
/// and correcting them costs more than the noise wastes.
/// And an imbalance under the trigger is still fixed when the time it wastes over this many
/// iterations exceeds that cost (see `pbs/policy.rs`, `RebalancePolicy::verdict`).
pub const PAYBACK_ITERATIONS: f64 = 100.0;

/// Iterations whose median imbalance checks a rebalancing (see [`MAX_CORRECTIONS`]).
const CHECK_ITERATIONS: usize = 3;

/// The check of the last rebalancing, and the corrections in a row so far.
#[derive(Debug, Clone, Default)]
pub(crate) struct Check {
    /// Box-time samples completed when the last rebalancing was taken on, and the thread
    /// `max_avg` and excess (max − mean, seconds) of each iteration since, until checked.
    pending: Option<(u64, Vec<(f64, f64)>)>,
    /// Rebalancings in a row that were corrections of the one before.
    corrections: u32,
}

impl Check {
    /// A rebalancing was taken on with `samples` box-time samples completed; `correcting`
    /// when it was itself a correction.
    pub fn arm(&mut self, samples: u64, correcting: bool) {
        self.corrections = if correcting { self.corrections + 1 } else { 0 };
        self.pending = Some((samples, Vec::with_capacity(CHECK_ITERATIONS)));
    }

    /// Nothing to check (the mapping came from loads given in advance).
    pub fn disarm(&mut self) {
        self.pending = None;
    }

    /// Sees one iteration (its thread `max_avg`, its thread loads `sample`, the samples
    /// completed so far); true when the check it completes fails and a correction, paying for
    /// itself within [`PAYBACK_ITERATIONS`] at a cost of `last_cost` seconds, is allowed.
    pub fn fails(&mut self, max_avg: f64, sample: &Sample, samples: u64, trigger: f64, last_cost: f64) -> bool {
        let Some((armed_at, since)) = &mut self.pending else { return false };
        since.push((max_avg, sample.max - sample.mean));
        if samples <= *armed_at || since.len() < CHECK_ITERATIONS {
            return false;
        }
        let ratio = pbs::metrics::median(&since.iter().map(|s| s.0).collect::<Vec<_>>());
        let excess = pbs::metrics::median(&since.iter().map(|s| s.1).collect::<Vec<_>>());
        self.pending = None;
        ratio > 1.0 + 2.0 * trigger && excess * PAYBACK_ITERATIONS >= last_cost && self.corrections < MAX_CORRECTIONS
    }
}

/// What asks for a rebalancing before any box load is read, in `pbs`'s rules and the
/// remappers' alike: the criterion, the first measured iteration (the first mapping assumed
/// uniform loads, and Boulmier's eq. 24 ignores an imbalance that does not grow, so one present
/// from the start would never be corrected), and a failed check of the last rebalancing.
#[derive(Debug, Clone, Default)]
pub(crate) struct Asking {
    /// Whether an iteration has been measured yet.
    pub measured: bool,
    /// The check of the last rebalancing taken on.
    pub check: Check,
}

impl Asking {
    /// Sees one iteration: its thread `max_avg`, its thread loads as the criterion sees them
    /// (`sample`), the box-time samples completed so far; `trigger` and `last_cost` as
    /// [`Check::fails`] takes them.
    pub fn observe(
        &mut self,
        criterion: &mut dyn Criterion,
        max_avg: f64,
        sample: Sample,
        samples: u64,
        trigger: f64,
        last_cost: f64,
    ) -> Observation {
        let first = !self.measured;
        self.measured = true;
        let correcting = self.check.fails(max_avg, &sample, samples, trigger, last_cost);
        let asked = criterion.observe(sample) || first || correcting;
        Observation { max_avg, asked, checked: first || correcting, correcting }
    }

    /// The mapping came from loads given in advance: nothing to check, and the first measured
    /// iteration need not ask.
    pub fn given_loads(&mut self) {
        self.check.disarm();
        self.measured = true;
    }
}

/// Iterations under the current mapping over which a thread's median load must be over the
/// trigger before an imbalance over it is fixed. On the shared VM, another process on one core
/// made a uniform load measure 1.05–1.26 for one to three iterations in a row, one cluster every
/// 50–80 iterations, often in both box-time samples; an imbalance of the boxes stays on the same
/// thread for as long as it is not fixed.
pub(crate) const RECENT_ITERATIONS: usize = 7;

/// The threads' loads over their mean in the last [`RECENT_ITERATIONS`] iterations under the
/// current mapping: whether an imbalance is the mapping's (it stays on one thread) or the
/// machine's (it comes and goes).
#[derive(Debug, Clone, Default)]
pub(crate) struct RecentLoads(pub(crate) std::collections::VecDeque<Vec<f64>>);

impl RecentLoads {
    /// Sees one iteration's thread loads.
    pub fn push(&mut self, loads: &[f64]) {
        let mean = loads.iter().sum::<f64>() / loads.len().max(1) as f64;
        if self.0.len() == RECENT_ITERATIONS {
            self.0.pop_front();
        }
        self.0.push_back(loads.iter().map(|l| if mean > 0.0 { l / mean } else { 1.0 }).collect());
    }

    /// Forgets them (the mapping changed).
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// The largest median, over the recent iterations, of a thread's load over the mean (1
    /// with fewer than [`RECENT_ITERATIONS`] iterations under the current mapping): what stays
    /// of an imbalance once a few slow iterations of one thread or another are set aside.
    pub fn persistent_imbalance(&self) -> f64 {
        if self.0.len() < RECENT_ITERATIONS {
            return 1.0;
        }
        let threads = self.0.iter().map(Vec::len).min().unwrap_or(0);
        (0..threads)
            .map(|t| pbs::metrics::median(&self.0.iter().map(|it| it[t]).collect::<Vec<_>>()))
            .fold(1.0, f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_waits_for_fresh_samples_and_three_iterations_and_bounds_corrections() {
        let imbalanced = Sample { max: 1.5, mean: 1.0, min: 0.5 };
        let mut c = Check::default();
        assert!(!c.fails(1.5, &imbalanced, 9, 0.05, 0.0), "nothing armed");
        c.arm(4, false);
        assert!(!c.fails(1.5, &imbalanced, 4, 0.05, 0.0));
        assert!(!c.fails(1.5, &imbalanced, 4, 0.05, 0.0));
        assert!(!c.fails(1.5, &imbalanced, 4, 0.05, 0.0), "no fresh sample yet");
        assert!(c.fails(1.5, &imbalanced, 5, 0.05, 0.0));
        assert!(!c.fails(1.5, &imbalanced, 6, 0.05, 0.0), "checked once");
        // Within twice the trigger, or too costly to pay back: no correction.
        c.arm(6, false);
        (0..3).for_each(|_| assert!(!c.fails(1.09, &imbalanced, 7, 0.05, 0.0)));
        c.arm(7, false);
        (0..3).for_each(|_| assert!(!c.fails(1.5, &imbalanced, 8, 0.05, 1e3)));
        for n in 0..=MAX_CORRECTIONS {
            let n64 = u64::from(n);
            c.arm(10 + n64, n > 0);
            let verdicts: Vec<bool> = (0..3).map(|_| c.fails(1.5, &imbalanced, 11 + n64, 0.05, 0.0)).collect();
            assert_eq!(verdicts[2], n < MAX_CORRECTIONS, "correction {n}");
        }
    }
}
