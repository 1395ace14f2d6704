//! How densely pbs times its boxes. Timing feeds the balancer, but a clock pair and a store
//! per box cost real time on microsecond tasks: the stride (iterations between timed ones)
//! and the piece (boxes timed together) are the smallest that keep timing under
//! [`TIMING_SHARE`] of the work, from the task time measured so far.

/// Largest share of the task time that box timing may cost (see [`super::PbsOptions::timer`]).
const TIMING_SHARE: f64 = 0.005;

/// What timing one box in a timed iteration costs: a relaxed store of its share, plus its
/// part of a clock pair per run (measured with `examples/overhead.rs`: about 1.5 ns here).
const TIMING_COST_PER_BOX: f64 = 2e-9;

/// The timing stride for tasks of `mean_box_seconds` (a power of two ≤ `max`): the smallest
/// that keeps the timing cost under [`TIMING_SHARE`] of the work.
pub(super) fn timing_stride(mean_box_seconds: f64, max: u32) -> u32 {
    if mean_box_seconds.is_nan() || mean_box_seconds <= 0.0 {
        return max;
    }
    let wanted = (TIMING_COST_PER_BOX / (TIMING_SHARE * mean_box_seconds)).ceil().min(f64::from(max));
    (wanted.max(1.0) as u32).next_power_of_two().min(max)
}

/// What one extra clock pair costs (two time-stamp counter reads; 11.4 ns each measured on
/// this VM's EPYC).
const CLOCK_PAIR_COST: f64 = 25e-9;

/// Boxes timed together in a sampled iteration for tasks of `mean_box_seconds` (a power of two
/// ≤ `chunk`): the fewest that keep a clock pair under [`TIMING_SHARE`] of their time. md's
/// 0.35 µs boxes get pieces of 16, so a run of whole grid rows across a density gradient is
/// not credited with one mean; empty tasks keep whole chunks.
pub(super) fn timing_piece(mean_box_seconds: f64, chunk: u32) -> usize {
    let chunk = chunk.max(1) as usize;
    if mean_box_seconds.is_nan() || mean_box_seconds <= 0.0 {
        return chunk;
    }
    let wanted = (CLOCK_PAIR_COST / (TIMING_SHARE * mean_box_seconds)).ceil().min(chunk as f64);
    (wanted.max(1.0) as usize).next_power_of_two().min(chunk)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_is_frequent_for_coarse_tasks_and_sparse_for_tiny_ones() {
        assert_eq!(timing_stride(1e-9, 8), 8, "empty tasks: every 8th iteration");
        assert_eq!(timing_stride(5e-6, 8), 1, "5 µs tasks: every iteration");
        assert_eq!(timing_stride(5e-7, 8), 1);
        assert_eq!(timing_stride(2e-7, 8), 2);
        assert_eq!(timing_stride(1e-7, 8), 4);
        assert_eq!(timing_stride(1e-7, 2), 2, "never sparser than asked");
        assert_eq!(timing_stride(f64::NAN, 8), 8);
        assert_eq!(timing_stride(0.0, 4), 4);
        assert_eq!(timing_piece(1e-9, 128), 128, "empty tasks: whole chunks");
        assert_eq!(timing_piece(3.5e-7, 128), 16, "md's boxes");
        assert_eq!(timing_piece(1e-5, 128), 1, "coarse tasks: box by box");
        assert_eq!(timing_piece(f64::NAN, 64), 64);
        assert_eq!(timing_piece(1e-9, 0), 1, "never a zero piece");
    }
}
