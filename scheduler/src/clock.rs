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
        // With one clock read beside each tick read, a time slice lost between the two (4 ms
        // on a busy machine) would put the rate up to 17 % off, each process (an MPI rank) by
        // its own; bracketed reads bound it: the rate is off by at most half the brackets'
        // width over the span. Returns that width and the rate.
        let measure = |span: Duration| {
            let (a, t0, b) = bracketed_ticks();
            while b.elapsed() < span {
                std::hint::spin_loop();
            }
            let (c, t1, d) = bracketed_ticks();
            let nanos = ((c - b) + (d - a)).as_nanos() as f64 / 2.0;
            let width = ((b - a) + (d - c)).as_secs_f64();
            (width / span.as_secs_f64(), nanos / t1.wrapping_sub(t0).max(1) as f64)
        };
        // Brackets under a thousandth of the span put the rate off by at most 0.05 %: 2 µs
        // over 2 ms where a clock read costs tens of nanoseconds and no time slice is lost,
        // else 20 µs over 20 ms (a clock read of microseconds: a virtualised clock); else the
        // tightest of five tries. Short where it can be: every program's first executor waits
        // for this (docs/soundness.md, "a program's first executor").
        let mut best = (f64::INFINITY, 1.0);
        for span_ms in [2, 2, 20, 20, 20] {
            let next = measure(Duration::from_millis(span_ms));
            if next.0 < best.0 {
                best = next;
            }
            if best.0 < 1e-3 {
                break;
            }
        }
        best.1
    })
}

/// A tick read between two clock reads: whatever the thread did between the reads (lost its
/// core, say), the tick was read within the two instants.
fn bracketed_ticks() -> (Instant, u64, Instant) {
    (Instant::now(), ticks(), Instant::now())
}

/// What timing costs on this machine, in seconds, measured once per process (about 0.1 ms
/// the first time): the executors size their timing to stay a small share of the work.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Costs {
    /// One clock pair: two [`ticks`] reads back to back.
    pub clock_pair: f64,
    /// Timing one box in a timed iteration: a relaxed store of its share of a piece's time,
    /// the bookkeeping [`crate::box_timing::Tracker`] does per timed box.
    pub timed_box: f64,
}

/// The costs of timing on this machine (see [`Costs`]). Each is the least of a few batches:
/// noise (a preempted thread) only ever adds time.
pub fn costs() -> Costs {
    static COSTS: OnceLock<Costs> = OnceLock::new();
    *COSTS.get_or_init(|| {
        use std::sync::atomic::{AtomicU64, Ordering};
        const PAIRS: usize = 1000;
        const BOXES: usize = 4096;
        let least = |f: &dyn Fn() -> Duration| (0..5).map(|_| f()).min().unwrap_or_default().as_secs_f64();
        let pairs = least(&|| {
            let start = Instant::now();
            for _ in 0..PAIRS {
                let t0 = ticks();
                std::hint::black_box(ticks().wrapping_sub(t0));
            }
            start.elapsed()
        });
        let slots: Vec<AtomicU64> = (0..BOXES).map(|_| AtomicU64::new(0)).collect();
        let stores = least(&|| {
            let start = Instant::now();
            for (k, slot) in slots.iter().enumerate() {
                slot.store(std::hint::black_box(k as u64), Ordering::Relaxed);
            }
            start.elapsed()
        });
        // Floors keep a broken clock from turning timing off or on for everything.
        Costs { clock_pair: (pairs / PAIRS as f64).max(1e-9), timed_box: (stores / BOXES as f64).max(0.2e-9) }
    })
}

/// Seconds per tick.
pub fn ticks_to_seconds() -> f64 {
    ns_per_tick() * 1e-9
}

/// Busy-waits `d` on the wall clock: a task of known length for tests.
#[cfg(test)]
pub(crate) fn busy_wait(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_costs_of_timing_are_measured_and_plausible() {
        let c = costs();
        // A clock read costs nanoseconds to a few microseconds (a virtualised clock) anywhere.
        assert!((1e-9..1e-5).contains(&c.clock_pair), "{c:?}");
        assert!((0.2e-9..1e-6).contains(&c.timed_box), "{c:?}");
        assert_eq!(costs(), c, "measured once");
    }

    #[test]
    fn ticks_convert_to_wall_time() {
        let rate = ns_per_tick();
        assert!(rate > 0.0 && rate.is_finite());
        // Bracketed reads: the thread losing its core between a tick read and a clock read
        // widens the interval instead of failing.
        let (a, t0, b) = bracketed_ticks();
        std::thread::sleep(Duration::from_millis(30));
        let (c, t1, d) = bracketed_ticks();
        let measured = (t1 - t0) as f64 * rate;
        let (least, most) = ((c - b).as_nanos() as f64, (d - a).as_nanos() as f64);
        assert!(measured > 0.8 * least && measured < 1.2 * most, "{measured} ns by ticks vs {least}–{most} ns");
    }
}
