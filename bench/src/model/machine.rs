//! The machine the model replays a trace on: what each effect costs, and where each constant
//! comes from (fitted to a measurement, or assumed and said so).

use pbs_scheduler::box_timing::load_shares;

/// Costs of the modelled machine, in seconds unless said otherwise.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Machine {
    /// Target seconds per recorded second: how much slower (> 1) or faster the modelled
    /// cores run the recorded work, and the balancer, than the machine that recorded them.
    pub speed: f64,
    /// Per phase: the barrier and the wake-up of the workers, `barrier + barrier_log2 ·
    /// log2(threads)`.
    pub barrier: f64,
    /// See `barrier`.
    pub barrier_log2: f64,
    /// Per thread and phase, a random slowdown (interrupts, a neighbour on the host): the
    /// thread's work takes `1 + e` times as long, `e` exponential with this mean.
    pub noise: f64,
    /// Per thread and phase, a random late start (the wake-up), exponential with this mean.
    pub wake: f64,
    /// One steal (pbs and work stealing): finding a victim and claiming its boxes.
    pub steal: f64,
    /// One box taken from eager's shared FIFO (the contended queue): the mean of an
    /// exponential time, `eager_pop + eager_pop_thread · threads` ([`Machine::eager_pop_at`]).
    pub eager_pop: f64,
    /// See `eager_pop`: every thread more at the one queue makes each take wait longer for
    /// its cache line.
    pub eager_pop_thread: f64,
    /// The threads that reach eager's queue within this time of the first are served in random
    /// order. Set from eager's affinity on the 16-core table (chance, `1 / threads`), not from
    /// its times (docs/model.md, "eager's queue").
    pub eager_window: f64,
    /// Extra time of a box that runs on another thread than its previous run: its data is
    /// in another core's cache.
    pub moved: f64,
    /// Extra time of a box whose data sits on another NUMA node than the thread that runs it.
    /// Assumed, not fitted (the machines measured had one node): twice `moved`.
    pub remote: f64,
    /// Moving one box's data to its new owner after a rebalancing (pbs; the moves of the
    /// threads run in parallel). Assumed, not fitted.
    pub migrate: f64,
    /// One balancer unit (a step) costs this, in recorded seconds, per box and per
    /// `1 + log2(vCores)` (the assignment's cost grows with the vCores it chooses among).
    pub balancer_box: f64,
    /// Work between iterations, per box, to read the measured box loads, shared by the pool in
    /// shares of at least [`PARALLEL_MIN_BOXES`](pbs_scheduler::box_timing::PARALLEL_MIN_BOXES) boxes as the executor shares it
    /// ([`Machine::loads_cost`]). Measured on the 16-core machine: 15–21 µs over 4,096 boxes,
    /// one share (docs/results.md, "Sixteen threads, a third lease").
    pub loads_box: f64,
    /// Serial work between iterations, per box, to decide a rebalancing and send it out, the
    /// box loads aside: the problem's check and the cells' charges on those loads. Measured
    /// there: 14–19 µs over 4,096 boxes (4.1 ns a box). (The copy of the vCores for the run,
    /// 14–17 µs there, is made by the run since 2026-11-27.) Since the check runs in eight
    /// lanes (2026-11-27, afternoon) the two take 0.9 ns a box on this VM where they took 2.3:
    /// the lease's figure scaled by that ratio, an estimate no many-core machine has measured.
    pub start_box: f64,
    /// What deciding and sending a run out costs besides its per-box work (the criterion, the
    /// check, handing the run to its thread): measured there as the rest of 55–70 µs, 12 µs.
    pub start_fixed: f64,
    /// Serial work between iterations, per box, to take on a run back from the balancer
    /// thread, the fresh box loads aside: checking the new owners on them. Measured there:
    /// 9–10 µs over 4,096 boxes once the thread builds the lists.
    pub take_on_box: f64,
    /// Serial work per box to rebuild the threads' lists and steal orders, where a
    /// rebalancing stops the iteration (a run off the critical path builds them there).
    /// Measured there: 74–92 µs over 4,096 boxes.
    pub lists_box: f64,
    /// The time slice the operating system gives the balancer thread on the core it shares
    /// with a worker, which is away that long. Assumed: Linux's default (EEVDF's base slice,
    /// 0.75 ms × (1 + log2 of the CPUs, at most 8)) at 8 CPUs or more; its effect, md's mean
    /// iteration growing by about the balancer thread's time at 16 threads on 16 cores, was
    /// measured (docs/results.md, "Sixteen threads, 2026-11-26").
    pub slice: f64,
    /// pbs's own serial work per phase and thread, before and after the threads' part. Fitted
    /// to the fifth lease's idle split, md (one phase an iteration) at 2–16 threads: 1.4–2.1 µs
    /// a phase at 2 threads, 12.7–15.4 at 16; the stencil's measured 2.7 and 19.5 (docs/model.md,
    /// "The executor's own work, measured at 16 threads"). That executor still counted the
    /// affinity from the steal logs after each phase; the one since (affinity counted by the
    /// threads) is not measured on many cores (`pbs-bench model --executor-us-per-thread`).
    pub executor_thread: f64,
    /// pbs's work between iterations besides rebalancing (the criterion, the busy times, the
    /// stealing decision), `iteration_fixed + iteration_thread · threads`, on the critical
    /// path. Fitted there: 1.4–2.0 µs at 2 threads, 3.3–4.1 at 16 beyond the model's
    /// rebalancing costs.
    pub iteration_fixed: f64,
    /// See `iteration_fixed`.
    pub iteration_thread: f64,
}

impl Machine {
    /// The constants fitted to the 16-core measurements ([`super::calibration`]), with the
    /// speed of the app's recorded trace left to the caller.
    pub fn fitted(speed: f64) -> Machine {
        Machine {
            speed,
            barrier: 0.1e-6,
            barrier_log2: 0.0,
            noise: 0.03,
            wake: 0.5e-6,
            steal: 0.1e-6,
            eager_pop: 0.0,
            eager_pop_thread: 0.03e-6,
            eager_window: 1e-6,
            moved: 0.5e-6,
            remote: 1.0e-6,
            migrate: 0.2e-6,
            balancer_box: 7.19e-9,
            loads_box: 4.4e-9,
            start_box: 1.6e-9,
            start_fixed: 12e-6,
            take_on_box: 2.3e-9,
            lists_box: 20e-9,
            slice: 3e-3,
            executor_thread: 0.9e-6,
            iteration_fixed: 2.0e-6,
            iteration_thread: 0.13e-6,
        }
    }

    /// The machine as the leases before the fourth timed pbs: without its own work within
    /// and between phases, which their timings left out (docs/results.md, "a fourth lease").
    pub fn timed_in_part(&self) -> Machine {
        Machine { executor_thread: 0.0, iteration_fixed: 0.0, iteration_thread: 0.0, ..*self }
    }

    /// pbs's own serial work in a phase on `threads` threads.
    pub fn executor_at(&self, threads: usize) -> f64 {
        self.executor_thread * threads as f64
    }

    /// pbs's work between two iterations on `threads` threads, rebalancing aside.
    pub fn iteration_at(&self, threads: usize) -> f64 {
        self.iteration_fixed + self.iteration_thread * threads as f64
    }

    /// Seconds to read the box loads of `boxes` boxes on a pool of `threads`, shared as
    /// `Tracker::box_loads_on` shares them.
    pub fn loads_cost(&self, boxes: usize, threads: usize) -> f64 {
        self.loads_box * boxes.div_ceil(load_shares(boxes, threads)) as f64
    }

    /// Seconds on the critical path to decide a rebalancing of `boxes` boxes on `threads`
    /// threads and send it out.
    pub fn start_cost(&self, boxes: usize, threads: usize) -> f64 {
        self.start_fixed + self.start_box * boxes as f64 + self.loads_cost(boxes, threads)
    }

    /// Seconds on the critical path to take on a run back from the balancer thread.
    pub fn take_on_cost(&self, boxes: usize, threads: usize) -> f64 {
        self.take_on_box * boxes as f64 + self.loads_cost(boxes, threads)
    }

    /// The mean time of one take from eager's queue at `threads` threads.
    pub fn eager_pop_at(&self, threads: usize) -> f64 {
        self.eager_pop + self.eager_pop_thread * threads as f64
    }

    /// What a phase's barrier costs at `threads` threads.
    pub fn barrier_at(&self, threads: usize) -> f64 {
        self.barrier + self.barrier_log2 * (threads.max(1) as f64).log2()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pbs_scheduler::box_timing::PARALLEL_MIN_BOXES;

    /// pbs's own work, against the fifth lease's idle split (md gravity then contraction,
    /// 256 boxes per thread, one phase an iteration, µs): within a phase every figure within
    /// ±30 %; between iterations, beyond the model's rebalancing costs, noisier (−31 to +65 %),
    /// its sum over thread counts within ±10 %.
    #[test]
    fn pbs_own_work_follows_the_fifth_lease() {
        let m = Machine::fitted(1.0);
        let threads = [2, 4, 8, 16, 2, 4, 8, 16];
        let in_phase = [2.06, 3.12, 7.44, 12.68, 1.44, 3.66, 8.86, 15.38];
        let between = [1.93, 2.67, 4.43, 4.14, 1.37, 2.92, 3.17, 3.30];
        for (&t, &us) in threads.iter().zip(&in_phase) {
            let modelled = m.executor_at(t) * 1e6;
            assert!((modelled / us - 1.0).abs() <= 0.3, "{t} threads: {modelled} µs against {us}");
        }
        let modelled: f64 = threads.iter().map(|&t| m.iteration_at(t) * 1e6).sum();
        let measured: f64 = between.iter().sum();
        assert!((modelled / measured - 1.0).abs() <= 0.1, "{modelled} µs against {measured}");
    }

    /// Timed in part, pbs's own work within and between phases costs nothing at any thread
    /// count; every other constant is kept.
    #[test]
    fn timed_in_part_leaves_out_pbs_s_own_work_only() {
        let m = Machine::fitted(1.5);
        let part = m.timed_in_part();
        for threads in [1, 2, 16, 256] {
            assert_eq!((part.executor_at(threads), part.iteration_at(threads)), (0.0, 0.0), "{threads} threads");
            assert!(m.executor_at(threads) > 0.0 && m.iteration_at(threads) > 0.0);
        }
        let own_work_as_in =
            |x: &Machine| Machine { executor_thread: 1.0, iteration_fixed: 2.0, iteration_thread: 3.0, ..*x };
        assert_eq!(own_work_as_in(&part), own_work_as_in(&m));
    }

    /// The box loads are read in shares of at least `PARALLEL_MIN_BOXES` boxes, one per
    /// thread at most, as the executor reads them; the rest of the start is serial.
    #[test]
    fn reading_the_box_loads_is_shared_as_the_executor_shares_it() {
        let m =
            Machine { loads_box: 1.0, start_box: 0.5, start_fixed: 10.0, take_on_box: 0.25, ..Machine::fitted(1.0) };
        let big = 8 * PARALLEL_MIN_BOXES;
        assert_eq!(m.loads_cost(4096, 256), 4096.0, "one share under two shares' worth");
        assert_eq!(m.loads_cost(big, 1), big as f64, "one thread reads alone");
        assert_eq!(m.loads_cost(big, 2), (big / 2) as f64);
        assert_eq!(m.loads_cost(big, 256), PARALLEL_MIN_BOXES as f64, "shares of the least size");
        assert_eq!(m.start_cost(big, 256), 10.0 + 0.5 * big as f64 + PARALLEL_MIN_BOXES as f64);
        assert_eq!(m.take_on_cost(big, 256), 0.25 * big as f64 + PARALLEL_MIN_BOXES as f64);
    }

    /// A barrier grows with log2 of the threads (none counted below one thread), a take from
    /// eager's queue linearly with them.
    #[test]
    fn barriers_grow_with_log2_of_the_threads_and_queue_takes_linearly() {
        let m =
            Machine { barrier: 1.0, barrier_log2: 0.5, eager_pop: 2.0, eager_pop_thread: 0.25, ..Machine::fitted(1.0) };
        assert_eq!([m.barrier_at(0), m.barrier_at(1), m.barrier_at(8), m.barrier_at(64)], [1.0, 1.0, 2.5, 4.0]);
        assert_eq!([m.eager_pop_at(1), m.eager_pop_at(16)], [2.25, 6.0]);
    }
}
