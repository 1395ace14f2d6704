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
    /// The first measurement's or a failed check's question (`Some(correcting)`), put off by
    /// an iteration that could not act on it (the run's last): asked again by the next one.
    held: Option<bool>,
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
        let held = self.held.take();
        let first = !self.measured || held == Some(false);
        self.measured = true;
        let correcting = self.check.fails(max_avg, &sample, samples, trigger, last_cost) || held == Some(true);
        let asked = criterion.observe(sample) || first || correcting;
        Observation { max_avg, asked, checked: first || correcting, correcting }
    }

    /// The mapping came from loads given in advance: nothing to check, and the first measured
    /// iteration need not ask.
    pub fn given_loads(&mut self) {
        self.check.disarm();
        self.measured = true;
        self.held = None;
    }

    /// An iteration that `seen` could not act on its question (the run's last, by the
    /// application's hint): where it was the first measurement's or a failed check's, the next
    /// iteration asks it again, so that a run that goes on after all answers it. (Boulmier's
    /// eq. 24 would never ask again for an imbalance present from the start.)
    pub fn hold(&mut self, seen: Observation) {
        if seen.checked {
            self.held = Some(seen.correcting);
        }
    }
}

/// Iterations under the current mapping over which a thread's median load must be over the
/// trigger before an imbalance over it is fixed. On the shared VM, another process on one core
/// made a uniform load measure 1.05–1.26 for one to three iterations in a row, one cluster every
/// 50–80 iterations, often in both box-time samples; an imbalance of the boxes stays on the same
/// thread for as long as it is not fixed.
pub(crate) const RECENT_ITERATIONS: usize = 7;
// A thread's median over them is its middle value.
const _: () = assert!(RECENT_ITERATIONS % 2 == 1);

/// The threads' loads over their mean in the last [`RECENT_ITERATIONS`] iterations under the
/// current mapping: whether an imbalance is the mapping's (it stays on one thread) or the
/// machine's (it comes and goes).
#[derive(Debug, Clone, Default)]
pub(crate) struct RecentLoads(pub(crate) std::collections::VecDeque<Vec<f64>>);

impl RecentLoads {
    /// Sees one iteration's thread loads.
    pub fn push(&mut self, loads: &[f64]) {
        let mean = loads.iter().sum::<f64>() / loads.len().max(1) as f64;
        // Once the window is full, the oldest row's memory takes the new one: no allocation
        // per iteration.
        let mut row = match self.0.len() {
            RECENT_ITERATIONS => self.0.pop_front().unwrap_or_default(),
            _ => Vec::with_capacity(loads.len()),
        };
        row.clear();
        row.extend(loads.iter().map(|l| if mean > 0.0 { l / mean } else { 1.0 }));
        self.0.push_back(row);
    }

    /// Forgets them (the mapping changed).
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// Whether the largest median, over the recent iterations, of a thread's load over the
    /// mean is above `level`, that median taken as 1 with fewer than [`RECENT_ITERATIONS`]
    /// iterations under the current mapping: what stays of an imbalance once a few slow
    /// iterations of one thread or another are set aside.
    pub fn persists_over(&self, level: f64) -> bool {
        if 1.0 > level {
            return true;
        }
        if self.0.len() < RECENT_ITERATIONS {
            return false;
        }
        let threads = self.0.iter().map(Vec::len).min().unwrap_or(0);
        // The median of an odd window is above `level` when more than half of its values are:
        // counted, not sorted, since this runs in every iteration the criterion asks in, over
        // every thread (a sorted copy for each took 65–74 µs at 256 threads, the count 4–6 µs:
        // `examples/policy_check.rs`).
        (0..threads).any(|t| self.0.iter().filter(|row| row[t] > level).count() > RECENT_ITERATIONS / 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The count says what the largest median, over the last [`RECENT_ITERATIONS`]
        /// iterations pushed, says: on windows filling up and sliding, of loads near their
        /// mean with ties, at levels around 1.
        #[test]
        fn a_count_over_the_window_says_what_the_largest_median_says(
            threads in 1usize..6,
            iterations in proptest::collection::vec(proptest::collection::vec(0u8..8, 6), 0..2 * RECENT_ITERATIONS),
            level in 0.96f64..1.05,
        ) {
            // Thread loads 0.97–1.04 × a base; their ratios to the mean tie often.
            let loads: Vec<Vec<f64>> = iterations
                .iter()
                .map(|row| row[..threads].iter().map(|&q| 0.97 + 0.01 * f64::from(q)).collect())
                .collect();
            let mut recent = RecentLoads::default();
            loads.iter().for_each(|l| recent.push(l));
            let window = &loads[loads.len().saturating_sub(RECENT_ITERATIONS)..];
            let ratio = |l: &[f64], t: usize| l[t] / (l.iter().sum::<f64>() / l.len() as f64);
            let largest_median = match window.len() {
                RECENT_ITERATIONS => (0..threads)
                    .map(|t| pbs::metrics::median(&window.iter().map(|l| ratio(l, t)).collect::<Vec<_>>()))
                    .fold(1.0, f64::max),
                _ => 1.0,
            };
            prop_assert_eq!(recent.persists_over(level), largest_median > level);
            // At levels equal to the ratios themselves: the ties.
            for l in window {
                for t in 0..threads {
                    prop_assert_eq!(recent.persists_over(ratio(l, t)), largest_median > ratio(l, t));
                }
            }
        }
    }

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

    /// The first measurement's and a failed check's questions, held by an iteration that could
    /// not act on them, are asked again by the next one, as they were, and only by it; a
    /// question of the criterion alone is not held (the criterion, not reset, asks again);
    /// loads given in advance answer it.
    #[test]
    fn a_held_question_is_asked_once_more_as_it_was() {
        let imbalanced = Sample { max: 1.5, mean: 1.0, min: 0.5 };
        let mut never = crate::criteria::Never;
        let mut a = Asking::default();
        let mut see = |a: &mut Asking, samples| a.observe(&mut never, 1.5, imbalanced, samples, 0.05, 0.0);
        let first = see(&mut a, 1);
        assert!(first.checked && !first.correcting);
        a.hold(first);
        assert_eq!(see(&mut a, 2), first, "the first measurement's question, once more");
        assert!(!see(&mut a, 3).asked, "and only once");
        a.check.arm(3, false);
        let seen: Vec<Observation> = (4..7).map(|s| see(&mut a, s)).collect();
        assert!(seen[2].correcting && seen[2].checked, "the check fails: {seen:?}");
        a.hold(seen[2]);
        assert_eq!(see(&mut a, 7), seen[2], "the correction's question, once more");
        assert!(!see(&mut a, 8).asked);
        a.hold(Observation { max_avg: 1.5, asked: true, checked: false, correcting: false });
        assert!(!see(&mut a, 9).asked, "the criterion's own question is not held");
        // Loads given in advance answer a held first question.
        let mut a = Asking::default();
        let first = see(&mut a, 1);
        a.hold(first);
        a.given_loads();
        assert!(!see(&mut a, 2).asked, "loads given since");
    }
}
