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
        // its own; bracketed reads bound it (see `bracketed_rate`).
        let measure = |span_ms: u64| {
            let span = Duration::from_millis(span_ms);
            let first = bracketed_ticks();
            while first.2.elapsed() < span {
                std::hint::spin_loop();
            }
            bracketed_rate(first, bracketed_ticks(), span)
        };
        // Short where it can be: every program's first executor waits for this
        // (docs/soundness.md, "a program's first executor").
        tightest_rate([2, 2, 20, 20, 20].into_iter().map(measure))
    })
}

/// The rate (nanoseconds per tick) that two bracketed tick reads `span` apart give, and the
/// brackets' width over the span: the rate is off by at most half that width over the span.
fn bracketed_rate(
    (a, t0, b): (Instant, u64, Instant),
    (c, t1, d): (Instant, u64, Instant),
    span: Duration,
) -> (f64, f64) {
    let nanos = ((c - b) + (d - a)).as_nanos() as f64 / 2.0;
    let width = ((b - a) + (d - c)).as_secs_f64();
    (width / span.as_secs_f64(), nanos / t1.wrapping_sub(t0).max(1) as f64)
}

/// The rate of the first of `tries` (relative width, rate) whose brackets are under a
/// thousandth of their span, which puts it off by at most 0.05 % (2 µs over 2 ms where a clock
/// read costs tens of nanoseconds and no time slice is lost, else 20 µs over 20 ms: a clock
/// read of microseconds, a virtualised clock); else the tightest's; 1 if there is none. Tries
/// after the first tight one are not taken.
fn tightest_rate(tries: impl IntoIterator<Item = (f64, f64)>) -> f64 {
    let mut best = (f64::INFINITY, 1.0);
    for next in tries {
        if next.0 < best.0 {
            best = next;
        }
        if best.0 < 1e-3 {
            break;
        }
    }
    best.1
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

    /// Two bracketed reads 2 ms apart: the elapsed time is the mean of the inner and outer
    /// spans, the width the two brackets together.
    #[test]
    fn bracketed_reads_give_the_rate_and_how_far_off_it_can_be() {
        let base = Instant::now();
        let at = |ns| base + Duration::from_nanos(ns);
        let first = (at(0), 10_000, at(100));
        let second = (at(2_000_000), 4_010_000, at(2_000_300));
        let (width, rate) = bracketed_rate(first, second, Duration::from_millis(2));
        assert!((width - 400e-9 / 2e-3).abs() < 1e-12, "{width}");
        // (1,999,900 + 2,000,300) / 2 ns over 4,000,000 ticks.
        assert!((rate - 2_000_100.0 / 4_000_000.0).abs() < 1e-12, "{rate}");
        // A counter that did not move: no division by zero.
        assert_eq!(
            bracketed_rate(first, (at(2_000_000), 10_000, at(2_000_300)), Duration::from_millis(2)).1,
            2_000_100.0
        );
    }

    #[test]
    fn the_first_tight_measurement_is_taken_else_the_tightest() {
        let taken = std::cell::Cell::new(0);
        let tries = |list: Vec<(f64, f64)>| {
            taken.set(0);
            list.into_iter().inspect(|_| taken.set(taken.get() + 1))
        };
        assert_eq!(tightest_rate(tries(vec![(5e-3, 1.5), (0.9e-3, 2.5), (0.1e-3, 3.5)])), 2.5);
        assert_eq!(taken.get(), 2, "no try after the first tight one");
        assert_eq!(tightest_rate(tries(vec![(5e-3, 1.5), (2e-3, 2.5), (3e-3, 3.5)])), 2.5);
        assert_eq!(taken.get(), 3);
        // Exactly a thousandth is not tight.
        assert_eq!(tightest_rate(tries(vec![(1e-3, 1.5), (0.5e-3, 2.5)])), 2.5);
        assert_eq!(tightest_rate([(f64::INFINITY, 7.0)]), 1.0, "no finite width: the fallback");
        assert_eq!(tightest_rate([]), 1.0);
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
