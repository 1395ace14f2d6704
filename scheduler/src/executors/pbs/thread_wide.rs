//! Whether the box loads changed since the owners in force were balanced by one factor on one
//! owner's boxes: a change of the machine (a thread slower or faster throughout), not of the
//! boxes.
//!
//! Something else running on a core (another process, the hypervisor) makes every box of that
//! thread slower by about one factor while it lasts, and every box faster by as much when it
//! ends, the other threads' boxes unchanged. A change of the boxes' own loads (heat spreading,
//! particles moving) makes some boxes of an owner heavier and others not, and with many small
//! owners it changes each owner's boxes almost alike but each owner by its own factor. On the
//! shared 2-core VM, heat.c's uniform load measured stretches of one thread 8–16 % slower
//! lasting from 4 to 50 iterations and more, its boxes' ratios within 1–5 % of that factor (the
//! median distance); each stretch that lasted 4 was answered by a rebalancing, and answered
//! back by another when it ended (docs/results.md, "Thread-wide slowdowns wait").
//!
//! The test, per owner: its factor, the sum of its boxes' loads now over their sum in the
//! reference, and its spread, the median distance of its boxes' own ratios from that factor
//! (relative to it). The change is thread-wide when one owner's factor lies further than
//! [`SPREAD_RATIO`] times the largest spread from all the others, and the others lie within
//! that of each other (with two owners: when their factors lie that far apart). A shift over a
//! share `a` of one owner's boxes, the other owners unchanged, puts the factors `a·d` apart
//! with a spread of `(1 − a)·d` when `a > ½` (`a·d` otherwise): shifts over more than two
//! thirds of an owner's boxes count as thread-wide, as a thread-wide change would. A few boxes
//! far off (a preempted chunk) move the factor and the spread alike, and make the test answer
//! no, the answer that changes nothing. So does a spread over [`NOISE_SPREAD`]: boxes that
//! moved that far from their owner's factor changed by themselves, however far apart the
//! factors (the stencil's `rough` scenario, a new cost map every 10 iterations, put them 2–3.5
//! × apart with spreads of 0.46–0.65).
//!
//! It reads every box up to [`SAMPLED_BOXES`] and a spread sample of that many beyond: it
//! runs on the critical path (where its answer can decide something, `RebalancePolicy::
//! standing`), and over all 262,144 boxes of a 512 × 512 grid it took 3 ms against the rest of
//! the standing's 0.2; on the sample 0.3 (`examples/policy_check.rs`). Where the ratios agree
//! within an owner, as a thread-wide change needs, a sample's ratio of sums is the owner's.

use pbs::rng::SplitMix64;

/// How many times the largest spread within an owner the owners' factors must lie apart for a
/// change to be thread-wide (see the module doc).
pub(crate) const SPREAD_RATIO: f64 = 2.0;

/// The largest spread a thread-wide change may have: twice the largest that timing noise gave
/// on a uniform load (0.055, heat.c on the VM's noisy days).
pub(crate) const NOISE_SPREAD: f64 = 0.1;

/// Boxes read at most (see the module doc): 64 an owner at 256 owners.
pub(crate) const SAMPLED_BOXES: usize = 16_384;

/// Whether the box loads `now` differ from `reference` (the loads the owners in force were
/// balanced on; `None`: uniform loads) by one factor on one owner's boxes (see the module
/// doc). `owners` maps each box to one of `owner_count` owners. No when fewer than two owners
/// have loads, or when the lengths disagree.
pub(crate) fn thread_wide(owners: &[u32], now: &[f64], reference: Option<&[f64]>, owner_count: usize) -> bool {
    if owners.len() != now.len() || reference.is_some_and(|r| r.len() != now.len()) {
        return false;
    }
    let reference_of = |i: usize| reference.map_or(1.0, |r| r[i]);
    // Runs of 8 consecutive boxes (single boxes cost a cache line of each array apiece), one
    // at a random place in each of as many equal stretches of the boxes: evenly spaced runs
    // met the same columns row after row and missed whole owners of a 512 × 512 grid. The
    // places are drawn from a fixed seed, so the answer is the same for the same loads.
    const RUN: usize = 8;
    let n = now.len();
    let (runs, stretch) =
        if n <= SAMPLED_BOXES { (n.div_ceil(RUN), RUN) } else { (SAMPLED_BOXES / RUN, n / (SAMPLED_BOXES / RUN)) };
    let sample = || {
        let mut places = SplitMix64::new(0x7468_7265_6164);
        (0..runs)
            .flat_map(move |r| {
                let start = r * stretch + if stretch > RUN { places.below(stretch - RUN + 1) } else { 0 };
                start..(start + RUN).min(n)
            })
            .map(|i| (i, owners[i], now[i]))
    };
    let mut sums = vec![(0.0, 0.0); owner_count];
    for (i, o, load) in sample() {
        let Some(sum) = sums.get_mut(o as usize) else { return false };
        sum.0 += load;
        sum.1 += reference_of(i);
    }
    let factors: Vec<Option<f64>> =
        sums.iter().map(|&(now, then)| (now > 0.0 && then > 0.0).then(|| now / then)).collect();
    let mut deviations: Vec<Vec<f64>> = vec![Vec::new(); owner_count];
    for (i, o, load) in sample() {
        let (Some(factor), then) = (factors[o as usize], reference_of(i)) else { continue };
        // A box free then and busy now is a shift of the boxes, as far from any factor as can be.
        let ratio = match (then > 0.0, load > 0.0) {
            (true, _) => load / then,
            (false, true) => f64::INFINITY,
            (false, false) => continue,
        };
        deviations[o as usize].push((ratio - factor).abs() / factor);
    }
    let mut spread = 0.0f64;
    for d in deviations.iter_mut().filter(|d| !d.is_empty()) {
        let middle = d.len() / 2;
        let (_, median, _) = d.select_nth_unstable_by(middle, f64::total_cmp);
        spread = spread.max(*median);
    }
    let mut sorted: Vec<f64> = factors.into_iter().flatten().collect();
    let last = sorted.len().saturating_sub(1);
    if last == 0 || spread > NOISE_SPREAD {
        return false;
    }
    sorted.sort_unstable_by(f64::total_cmp);
    let apart = |high: f64, low: f64| high / low - 1.0 > SPREAD_RATIO * spread;
    // The slowest owner apart from the others, or the fastest (a slowdown in the reference
    // that has ended), the others together.
    (apart(sorted[last], sorted[last - 1]) && !apart(sorted[last - 1], sorted[0]))
        || (apart(sorted[1], sorted[0]) && !apart(sorted[last], sorted[1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `f` times 1 ± `noise` (uniform), drawn afresh at each call from `seed`'s sequence.
    fn jitter(seed: u64, noise: f64) -> impl FnMut(f64) -> f64 {
        let mut rng = SplitMix64::new(seed);
        move |f| f * (1.0 + noise * (2.0 * rng.next_f64() - 1.0))
    }

    /// 64 boxes, the first 32 owned by 0, the rest by 1; loads 1 ± `noise` (uniform), then
    /// `change` applied box by box.
    fn loads(noise: f64, seed: u64, change: impl Fn(usize) -> f64) -> (Vec<u32>, Vec<f64>) {
        let mut noisy = jitter(seed, noise);
        let owners = (0..64).map(|i| (i / 32) as u32).collect();
        let loads = (0..64).map(|i| noisy(change(i))).collect();
        (owners, loads)
    }

    #[test]
    fn one_thread_slower_throughout_is_thread_wide_and_a_shift_in_its_boxes_is_not() {
        let (owners, reference) = loads(0.02, 1, |_| 1.0);
        // Thread 0 10 % slower on every box, each measured with its own 2 % noise.
        let (_, slow) = loads(0.02, 2, |i| if i < 32 { 1.1 } else { 1.0 });
        assert!(thread_wide(&owners, &slow, Some(&reference), 2));
        // ...and the same when it ends, against a reference measured during it.
        let (_, even) = loads(0.02, 3, |_| 1.0);
        assert!(thread_wide(&owners, &even, Some(&slow), 2));
        // A third of thread 0's boxes 30 % heavier: the same 10 %, not thread-wide.
        let (_, shifted) = loads(0.02, 4, |i| if i < 11 { 1.3 } else { 1.0 });
        assert!(!thread_wide(&owners, &shifted, Some(&reference), 2));
        // Half of them 20 % heavier: still not; seven eighths of them: counted thread-wide.
        let (_, half) = loads(0.02, 5, |i| if i < 16 { 1.2 } else { 1.0 });
        assert!(!thread_wide(&owners, &half, Some(&reference), 2));
        let (_, most) = loads(0.02, 6, |i| if i < 28 { 1.12 } else { 1.0 });
        assert!(thread_wide(&owners, &most, Some(&reference), 2));
        // A new cost map over thread 0's boxes, three times dearer on the whole but box by box
        // anywhere from 1.5 to 4.5 times: the boxes' own change.
        let (_, remapped) = loads(0.02, 11, |i| if i < 32 { 1.5 + 3.0 * ((i * 7) % 32) as f64 / 31.0 } else { 1.0 });
        assert!(!thread_wide(&owners, &remapped, Some(&reference), 2));
        // No change at all: the factors lie within the noise.
        let (_, same) = loads(0.02, 7, |_| 1.0);
        assert!(!thread_wide(&owners, &same, Some(&reference), 2));
    }

    #[test]
    fn uniform_reference_outliers_and_free_boxes() {
        let (owners, _) = loads(0.0, 1, |_| 1.0);
        // Balanced on the uniform guess, then thread 1 slower throughout.
        let (_, slow) = loads(0.02, 8, |i| if i >= 32 { 1.1 } else { 1.0 });
        assert!(thread_wide(&owners, &slow, None, 2));
        // Two boxes of thread 0 preempted (5 × as long): its factor moves, its boxes' ratios
        // do not follow, and the test answers no.
        let (_, preempted) = loads(0.02, 9, |i| if i < 2 { 5.0 } else { 1.0 });
        assert!(!thread_wide(&owners, &preempted, None, 2));
        // Boxes free in the reference that now cost are a shift: half of thread 0's here (a
        // few would not decide; the spread is a median, see the test below).
        let mut reference = vec![1.0; 64];
        reference[..16].fill(0.0);
        let mut now = reference.clone();
        now[..16].fill(0.5);
        assert!(!thread_wide(&owners, &now, Some(&reference), 2));
        // Free then and free now: they say nothing, and the rest of thread 0 decides.
        let mut now = reference.clone();
        now[16..32].iter_mut().for_each(|l| *l = 1.2);
        assert!(thread_wide(&owners, &now, Some(&reference), 2));
    }

    /// Eight owners of 32 boxes each: one slower throughout is the machine's; a drift that
    /// makes each owner dearer by its own factor (4 % more from one owner to the next, each
    /// owner's boxes alike) is the boxes', and so are two owners slowed by different factors.
    #[test]
    fn with_many_owners_only_one_owner_apart_from_the_rest_is_thread_wide() {
        let owners: Vec<u32> = (0..256).map(|i| (i / 32) as u32).collect();
        let mut noisy = jitter(12, 0.02);
        let one_slow: Vec<f64> = owners.iter().map(|&o| noisy(if o == 5 { 1.12 } else { 1.0 })).collect();
        assert!(thread_wide(&owners, &one_slow, None, 8));
        let one_fast: Vec<f64> = owners.iter().map(|&o| noisy(if o == 2 { 0.88 } else { 1.0 })).collect();
        assert!(thread_wide(&owners, &one_fast, None, 8));
        let drift: Vec<f64> = owners.iter().map(|&o| noisy(1.0 + 0.04 * o as f64)).collect();
        assert!(!thread_wide(&owners, &drift, None, 8));
        let two: Vec<f64> =
            owners.iter().map(|&o| noisy([1.0, 1.12, 1.0, 1.0, 1.0, 1.25, 1.0, 1.0][o as usize])).collect();
        assert!(!thread_wide(&owners, &two, None, 8));
    }

    proptest::proptest! {
        /// The answer depends on ratios only: loads in other units (a power of two, so that
        /// the scaling is exact) or owners numbered otherwise give the same answer. The loads:
        /// a reference, and now the same times 1 ± 2 % per box, one owner's times `slow`
        /// (thread-wide from about 1.02 on).
        #[test]
        fn units_and_owner_numbers_change_nothing(
            boxes in proptest::collection::vec((0u32..4, 0.5f64..1.5, -0.02f64..0.02), 8..64),
            slow in 1.0f64..1.3,
            shift in -8i32..8,
            rotate in 0u32..4,
        ) {
            let owners: Vec<u32> = boxes.iter().map(|b| b.0).collect();
            let reference: Vec<f64> = boxes.iter().map(|b| b.1).collect();
            let now: Vec<f64> = boxes.iter().map(|&(o, r, e)| r * (1.0 + e) * if o == 0 { slow } else { 1.0 }).collect();
            let answer = thread_wide(&owners, &now, Some(&reference), 4);
            let scale = 2f64.powi(shift);
            let scaled: Vec<f64> = now.iter().map(|l| l * scale).collect();
            proptest::prop_assert_eq!(thread_wide(&owners, &scaled, Some(&reference), 4), answer);
            let rescaled: Vec<f64> = reference.iter().map(|l| l / scale).collect();
            proptest::prop_assert_eq!(thread_wide(&owners, &now, Some(&rescaled), 4), answer);
            let renumbered: Vec<u32> = owners.iter().map(|o| (o + rotate) % 4).collect();
            proptest::prop_assert_eq!(thread_wide(&renumbered, &now, Some(&reference), 4), answer);
        }
    }

    /// 512 × 512 boxes in 256 blocks of 32 × 32, read through the sample: the last block's
    /// boxes 10 % slower is thread-wide, a drift over the blocks is not.
    #[test]
    fn the_sample_meets_every_owner_of_a_large_grid() {
        let owners: Vec<u32> = (0..512 * 512).map(|k| ((k / 512 / 32) * 16 + (k % 512) / 32) as u32).collect();
        let mut noisy = jitter(13, 0.02);
        for slow_owner in [0, 17, 255] {
            let slow: Vec<f64> = owners.iter().map(|&o| noisy(if o == slow_owner { 1.1 } else { 1.0 })).collect();
            assert!(thread_wide(&owners, &slow, None, 256), "owner {slow_owner}");
        }
        let drift: Vec<f64> = owners.iter().map(|&o| noisy(1.0 + 0.001 * o as f64)).collect();
        assert!(!thread_wide(&owners, &drift, None, 256));
    }

    /// Boxes free then and busy now count as a shift where they are most of an owner's boxes
    /// (the median distance is theirs); an owner with no load then, or none now, has no factor
    /// and takes no part.
    #[test]
    fn boxes_free_then_decide_where_they_are_most_and_owners_without_load_take_no_part() {
        let owners: Vec<u32> = (0..96).map(|i| (i / 32) as u32).collect();
        // Owner 0: 17 boxes free then and a little busy now, 15 boxes 20 % slower; owner 1
        // unchanged; owner 2 never loaded.
        let reference: Vec<f64> = (0..96).map(|i| if (17..64).contains(&i) { 1.0 } else { 0.0 }).collect();
        let now: Vec<f64> = (0..96)
            .map(|i| match i {
                0..17 => 0.01,
                17..32 => 1.2,
                32..64 => 1.0,
                _ => 0.0,
            })
            .collect();
        assert!(!thread_wide(&owners, &now, Some(&reference), 3), "most of owner 0's boxes came up from nothing");
        // The same with 15 of them free then: owner 0's other boxes decide, one factor.
        let reference: Vec<f64> =
            reference.iter().enumerate().map(|(i, &l)| if i == 15 || i == 16 { 1.0 } else { l }).collect();
        let now: Vec<f64> = now.iter().enumerate().map(|(i, &l)| if i == 15 || i == 16 { 1.2 } else { l }).collect();
        assert!(thread_wide(&owners, &now, Some(&reference), 3), "owner 0 apart, owner 2 out of it");
        // An owner loaded then and idle now has no factor either: the others, unchanged, decide.
        let reference = vec![1.0; 96];
        let now: Vec<f64> = (0..96).map(|i| if i < 64 { 1.0 } else { 0.0 }).collect();
        assert!(!thread_wide(&owners, &now, Some(&reference), 3), "owner 2 idle now");
    }

    #[test]
    fn no_answer_without_two_owners_with_loads_or_with_lengths_that_disagree() {
        let (owners, now) = loads(0.02, 10, |i| if i < 32 { 1.1 } else { 1.0 });
        assert!(!thread_wide(&owners, &now, Some(&[1.0; 3]), 2), "reference of another grid");
        assert!(!thread_wide(&owners[..3], &now, None, 2), "owners of another grid");
        assert!(!thread_wide(&owners, &now, None, 1), "an owner out of range");
        let idle: Vec<f64> = (0..64).map(|i| if i < 32 { 1.0 } else { 0.0 }).collect();
        assert!(!thread_wide(&owners, &idle, None, 2), "one owner with loads");
    }
}
