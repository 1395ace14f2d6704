//! The machine the model replays a trace on: what each effect costs, and where each constant
//! comes from (fitted to a measurement, or assumed and said so).

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
    /// One box taken from eager's shared FIFO (the contended queue).
    pub eager_pop: f64,
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
    /// Serial work between iterations, per box, to decide a rebalancing and send it out
    /// (reading the box loads, building the problem, copying loads and vCores for the run).
    /// Measured on the 16-core machine: 55–70 µs over 4,096 boxes (docs/results.md, "Sixteen
    /// threads, a third lease").
    pub start_box: f64,
    /// Serial work between iterations, per box, to take on a run back from the balancer
    /// thread (reading the fresh box loads, checking the new owners on them). Measured there:
    /// about 30 µs over 4,096 boxes once the thread builds the lists.
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
            eager_pop: 0.2e-6,
            moved: 0.5e-6,
            remote: 1.0e-6,
            migrate: 0.2e-6,
            balancer_box: 7.19e-9,
            start_box: 15e-9,
            take_on_box: 7.5e-9,
            lists_box: 20e-9,
            slice: 3e-3,
        }
    }

    /// What a phase's barrier costs at `threads` threads.
    pub fn barrier_at(&self, threads: usize) -> f64 {
        self.barrier + self.barrier_log2 * (threads.max(1) as f64).log2()
    }
}
