//! How densely the owner-computes executors (`pbs`, the remappers) time their boxes. Timing
//! feeds the balancer, but a clock pair and a store
//! per box cost real time on microsecond tasks: the stride (iterations between timed ones)
//! and the piece (boxes timed together) are the smallest that keep timing under
//! [`TIMING_SHARE`] of the work, from the task time measured so far and the costs of timing
//! measured on this machine at start-up ([`crate::clock::costs`]).

use crate::box_timing::Tracker;
use crate::clock;

/// Largest share of the task time that box timing may cost (see [`super::PbsOptions::timer`]).
const TIMING_SHARE: f64 = 0.005;

/// Sets `tracker`'s stride (at most `max_stride`; 0 = timing off, left alone) and piece (at
/// most `chunk`) for tasks whose threads were busy `thread_busy` seconds running `boxes_run`
/// boxes in the iteration that ended; returns the piece, or `None` with timing off.
pub(super) fn adapt(
    tracker: &mut Tracker,
    thread_busy: &[f64],
    boxes_run: usize,
    chunk: u32,
    max_stride: u32,
) -> Option<usize> {
    if max_stride == 0 {
        return None;
    }
    let mean_box = thread_busy.iter().sum::<f64>() / boxes_run.max(1) as f64;
    let (stride, piece) = stride_and_piece(mean_box, chunk, max_stride, clock::costs());
    tracker.set_stride(stride);
    tracker.set_piece(piece);
    Some(piece)
}

/// The stride and piece for boxes of `mean_box` seconds where timing costs `costs`.
fn stride_and_piece(mean_box: f64, chunk: u32, max_stride: u32, costs: clock::Costs) -> (u32, usize) {
    let piece = timing_piece(mean_box, chunk, costs.clock_pair);
    // A timed box costs its store plus its share of its piece's clock pair.
    let per_box = costs.timed_box + costs.clock_pair / piece as f64;
    (timing_stride(mean_box, max_stride, per_box), piece)
}

/// The timing stride for tasks of `mean_box_seconds` (a power of two ≤ `max`): the smallest
/// that keeps `cost_per_box` (what timing one box in a timed iteration costs) under
/// [`TIMING_SHARE`] of the work.
fn timing_stride(mean_box_seconds: f64, max: u32, cost_per_box: f64) -> u32 {
    if mean_box_seconds.is_nan() || mean_box_seconds <= 0.0 {
        return max;
    }
    let wanted = (cost_per_box / (TIMING_SHARE * mean_box_seconds)).ceil().min(f64::from(max));
    (wanted.max(1.0) as u32).next_power_of_two().min(max)
}

/// Boxes timed together in a sampled iteration for tasks of `mean_box_seconds` (a power of two
/// ≤ `chunk`): the fewest that keep one clock pair (`pair_cost` seconds) under
/// [`TIMING_SHARE`] of their time. Sub-microsecond boxes get pieces of a few tens, so a run of
/// whole grid rows across a density gradient is not credited with one mean; empty tasks keep
/// whole chunks.
fn timing_piece(mean_box_seconds: f64, chunk: u32, pair_cost: f64) -> usize {
    let chunk = chunk.max(1) as usize;
    if mean_box_seconds.is_nan() || mean_box_seconds <= 0.0 {
        return chunk;
    }
    let wanted = (pair_cost / (TIMING_SHARE * mean_box_seconds)).ceil().min(chunk as f64);
    (wanted.max(1.0) as usize).next_power_of_two().min(chunk)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With a box costing 2 ns to time and a clock pair 25 ns.
    #[test]
    fn timing_is_frequent_for_coarse_tasks_and_sparse_for_tiny_ones() {
        let stride = |mean, max| timing_stride(mean, max, 2e-9);
        assert_eq!(stride(1e-9, 8), 8, "empty tasks: every 8th iteration");
        assert_eq!(stride(5e-6, 8), 1, "5 µs tasks: every iteration");
        assert_eq!(stride(5e-7, 8), 1);
        assert_eq!(stride(2e-7, 8), 2);
        assert_eq!(stride(1e-7, 8), 4);
        assert_eq!(stride(1e-7, 2), 2, "never sparser than asked");
        assert_eq!(stride(f64::NAN, 8), 8);
        assert_eq!(stride(0.0, 4), 4);
        assert_eq!(stride(-1e-6, 4), 4, "no time measured is no time");
        let piece = |mean, chunk| timing_piece(mean, chunk, 25e-9);
        assert_eq!(piece(1e-9, 128), 128, "empty tasks: whole chunks");
        assert_eq!(piece(3.5e-7, 128), 16, "md's boxes");
        assert_eq!(piece(1e-5, 128), 1, "coarse tasks: box by box");
        assert_eq!(piece(f64::NAN, 64), 64);
        assert_eq!(piece(-1e-6, 64), 64);
        assert_eq!(piece(1e-9, 0), 1, "never a zero piece");
        assert_eq!(timing_piece(3.5e-7, 128, 50e-9), 32, "a slower clock, coarser pieces");
    }

    /// A timed box costs its store and its share of the piece's clock pair: 0.1 µs boxes in
    /// pieces of 64 (50 wanted), 2 + 25 / 64 ns a box, so every 5th iteration, rounded to 8.
    #[test]
    fn a_box_pays_its_store_and_its_share_of_the_clock_pair() {
        let costs = clock::Costs { clock_pair: 25e-9, timed_box: 2e-9 };
        assert_eq!(stride_and_piece(1e-7, 128, 64, costs), (8, 64));
        assert_eq!(stride_and_piece(1e-7, 16, 64, costs), (8, 16), "2 + 25 / 16 ns: every 8th");
        assert_eq!(stride_and_piece(1e-7, 1, 64, costs), (64, 1), "27 ns a box: every 54th, rounded to 64");
        assert_eq!(stride_and_piece(1e-5, 128, 64, costs), (1, 1));
    }
}
