//! Cutting an ordered sequence of boxes where its running load is nearest to a target: the one
//! step that RCB (at each bisection) and the curve prefix split (at each part boundary) share.

/// Running sums of `weights` with a leading zero (`n + 1` values, non-decreasing). If the
/// weights sum to zero, every box counts 1 instead, so that an empty region is still split
/// into parts of equal box counts rather than all into one.
pub(crate) fn prefix_sums(weights: impl Iterator<Item = f64> + Clone) -> Vec<f64> {
    let unit = weights.clone().sum::<f64>() <= 0.0;
    let mut sums = Vec::with_capacity(weights.size_hint().0 + 1);
    let mut s = 0.0;
    sums.push(s);
    for w in weights {
        s += if unit { 1.0 } else { w };
        sums.push(s);
    }
    sums
}

/// The position `b` in `lo..=hi` whose running sum `prefix[b]` is nearest to `target` (the
/// lower one on a tie). `lo ≤ hi < prefix.len()`.
pub(crate) fn nearest_cut(prefix: &[f64], target: f64, lo: usize, hi: usize) -> usize {
    debug_assert!(lo <= hi && hi < prefix.len());
    let above = lo + prefix[lo..=hi].partition_point(|&s| s < target);
    if above > hi {
        return hi;
    }
    if above > lo && target - prefix[above - 1] <= prefix[above] - target {
        above - 1
    } else {
        above
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_land_nearest_to_the_target_within_bounds() {
        let p = prefix_sums([1.0, 1.0, 5.0, 1.0].into_iter());
        assert_eq!(p, vec![0.0, 1.0, 2.0, 7.0, 8.0]);
        assert_eq!(nearest_cut(&p, 4.0, 0, 4), 2); // 2 is 2 away, 7 is 3 away
        assert_eq!(nearest_cut(&p, 5.0, 0, 4), 3);
        assert_eq!(nearest_cut(&p, 4.0, 3, 4), 3); // bounded from below
        assert_eq!(nearest_cut(&p, 100.0, 0, 2), 2); // bounded from above
        assert_eq!(nearest_cut(&p, 1.5, 0, 4), 1); // a tie goes low
        assert_eq!(prefix_sums([0.0, 0.0].into_iter()), vec![0.0, 1.0, 2.0]);
    }
}
