//! A cheap clock for per-box timing. On x86-64 the time-stamp counter (constant-rate on every
//! CPU of the last decade) costs a few nanoseconds against ~25 for `Instant::now`; it is
//! converted to nanoseconds with a rate calibrated once against `Instant`. Elsewhere, and under
//! Miri (which has no RDTSC), the clock is `Instant`.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Current tick count.
#[inline]
pub fn ticks() -> u64 {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        // SAFETY: RDTSC has no preconditions on x86-64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(any(not(target_arch = "x86_64"), miri))]
    {
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Nanoseconds per tick (1 where ticks are nanoseconds).
pub fn ns_per_tick() -> f64 {
    static RATE: OnceLock<f64> = OnceLock::new();
    *RATE.get_or_init(|| {
        if !cfg!(all(target_arch = "x86_64", not(miri))) {
            return 1.0;
        }
        let (t0, i0) = (ticks(), Instant::now());
        while i0.elapsed() < Duration::from_millis(20) {
            std::hint::spin_loop();
        }
        let (t1, elapsed) = (ticks(), i0.elapsed());
        elapsed.as_nanos() as f64 / (t1 - t0).max(1) as f64
    })
}

/// Seconds per tick.
pub fn ticks_to_seconds() -> f64 {
    ns_per_tick() * 1e-9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_convert_to_wall_time() {
        let rate = ns_per_tick();
        assert!(rate > 0.0 && rate.is_finite());
        let (t0, i0) = (ticks(), Instant::now());
        std::thread::sleep(Duration::from_millis(30));
        let measured = (ticks() - t0) as f64 * rate;
        let real = i0.elapsed().as_nanos() as f64;
        assert!((measured - real).abs() < 0.2 * real, "{measured} ns by ticks vs {real} ns");
    }
}
