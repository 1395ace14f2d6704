//! A tiny seeded generator (SplitMix64). The balancer must give the same answer for the same
//! seed on every machine and every version of its dependencies, so it carries its own.

/// SplitMix64: 64 bits of state, passes BigCrush, and is trivially reproducible.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)` with 53 bits of precision.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `0..n` (`n ≥ 1`), by the multiply-shift of the high 64 bits (Lemire's
    /// method without the rejection step: a bias of at most `n / 2⁶⁴`).
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n >= 1, "below(0) has no value to return");
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_range() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        for _ in 0..1000 {
            let x = a.next_f64();
            assert_eq!(x, b.next_f64());
            assert!((0.0..1.0).contains(&x));
            assert!(a.below(3) < 3 && b.below(3) < 3);
        }
        assert_ne!(SplitMix64::new(1).next_u64(), SplitMix64::new(2).next_u64());
    }

    /// The stream is Vigna's SplitMix64 (`splitmix64.c`): its first outputs from seed 0.
    #[test]
    fn the_stream_is_splitmix64s() {
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(r.next_u64(), 0x06C4_5D18_8009_454F);
    }

    /// `below(n)` spreads over every value of `0..n`: 10,000 draws of 10 values put 800 to
    /// 1,200 in each (a binomial's 6.7 standard deviations), and `below(1)` is 0.
    #[test]
    fn below_covers_its_range_evenly() {
        let mut r = SplitMix64::new(3);
        let mut counts = [0usize; 10];
        for _ in 0..10_000 {
            counts[r.below(10)] += 1;
        }
        assert!(counts.iter().all(|&c| (800..=1200).contains(&c)), "{counts:?}");
        assert!((0..100).all(|_| r.below(1) == 0));
        assert!((0..1000).map(|_| r.below(usize::MAX)).any(|x| x > usize::MAX / 2), "the high half is reached");
    }
}
