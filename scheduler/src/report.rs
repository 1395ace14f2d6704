//! Run reports: what a grid code run looked like under an executor, serialisable with serde.
//!
//! Feed every [`PhaseStats`] and [`IterationEnd`] to a [`Recorder`]; [`Recorder::report`]
//! sums them into per-thread busy and idle time, the `max_avg` of thread loads, efficiency
//! (`(Σ busy / threads) / wall`, docs/design.md), affinity, migrations and iteration-time medians.

use std::time::Duration;

use crate::counters::Reading;
use crate::executor::{IdleParts, IterationEnd, PhaseStats};

/// Summary of a run.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct RunReport {
    /// Executor name.
    pub executor: String,
    /// Worker threads.
    pub threads: usize,
    /// Iterations recorded.
    pub iterations: usize,
    /// Median wall time of an iteration, milliseconds.
    pub iter_ms_median: f64,
    /// Mean wall time of an iteration (the run's wall time over its iterations),
    /// milliseconds: what a user waits for. Far above the median when a few iterations run
    /// long (a worker sharing its core, a rebalancing on the critical path).
    pub iter_ms_mean: f64,
    /// Busy (task) time per thread, milliseconds.
    pub busy_ms: Vec<f64>,
    /// Idle time per thread (wall − busy), milliseconds.
    pub idle_ms: Vec<f64>,
    /// `max_avg` of the per-thread busy times over the run.
    pub max_avg: f64,
    /// `(Σ busy / threads) / Σ wall`.
    pub efficiency: f64,
    /// Where the rest of the wall time went: with `efficiency`, these shares sum to 1.
    pub idle_shares: IdleShares,
    /// For each phase of an iteration (in order): Σ over iterations of that phase's largest
    /// thread busy time, over the same sum of its mean. Each phase ends with a barrier, so an
    /// iteration costs at least the sum of its phases' maxima: a mapping whose totals are
    /// balanced (`max_avg` ≈ 1) still idles threads when phases that scale differently with
    /// the load are imbalanced in opposite directions, and this shows it.
    pub phase_max_avg: Vec<f64>,
    /// Fraction of box executions on the thread of that box's previous execution (`None` when
    /// the executor did not record it).
    pub affinity: Option<f64>,
    /// Boxes that changed owner, per iteration.
    pub migrations_per_iter: f64,
    /// Rebalancings performed.
    pub rebalances: usize,
    /// Time spent between iterations deciding on, starting, taking on or (when it runs
    /// there) performing rebalancings, milliseconds (part of the wall time, not of any
    /// thread's busy time).
    pub rebalance_ms: f64,
    /// What rebalancing added to the wall time, milliseconds: `rebalance_ms` plus balancing
    /// that ran past the last busy thread of a phase.
    pub rebalance_critical_ms: f64,
    /// Balancer time run in the threads' idle time, milliseconds (not task time).
    pub balancing_in_slack_ms: f64,
    /// Balancer time run on the balancer thread beside the workers, milliseconds: not on the
    /// critical path, but on a core (its cost shows in the iteration times).
    pub balancing_in_background_ms: f64,
    /// Rebalancings given up (they would have ended too late).
    pub rebalances_abandoned: usize,
    /// Rebalancings taken on that started over from a bisection, far from balance.
    pub rebalances_restarted: usize,
    /// Boulmier et al.'s *effort* of each interval between rebalancings, milliseconds per
    /// iteration: `(C + Σ iteration times) / length`, `C` the time the rebalancing that opened
    /// the interval held the iterations up (0 for the first), the iterations those of the
    /// interval (their phases, plus any decision taken between them that did not rebalance).
    /// A balancer that corrects well, cheaply and for long has a low effort; one interval for
    /// an executor that never rebalances.
    pub effort_ms: Vec<f64>,
    /// Per-thread counter readings, if measured.
    pub counters: Option<Vec<Reading>>,
    /// Why hardware counters are missing, if they are.
    pub hw_unavailable_reason: Option<String>,
}

/// The wall time of a run that no thread spent on tasks, by cause, as fractions of the wall
/// time (docs/design.md, "Idle time").
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct IdleShares {
    /// Within the phases ([`PhaseStats::idle_parts`]).
    #[serde(flatten)]
    pub in_phases: IdleParts,
    /// Between iterations: the executor's work there (`rebalance_ms`).
    pub between_iterations: f64,
}

impl IdleShares {
    /// The shares of a run of `wall` seconds whose phases idled `in_phases` (seconds) and
    /// whose executor spent `between_iterations` seconds between iterations (all zero for a
    /// run that took no time).
    pub fn of_run(in_phases: &IdleParts, between_iterations: f64, wall: f64) -> IdleShares {
        let share = if wall > 0.0 { 1.0 / wall } else { 0.0 };
        let mut shares = IdleShares { between_iterations: between_iterations * share, ..IdleShares::default() };
        shares.in_phases.add(in_phases, share);
        shares
    }
}

/// Bytes a [`Recorder`] keeps for every iteration: its time and its [`IterationEnd`]. A
/// program that records a run of many iterations asks the memory for them first.
pub const RECORDER_BYTES_PER_ITERATION: usize = std::mem::size_of::<f64>() + std::mem::size_of::<IterationEnd>();

/// Accumulates phases and iteration ends.
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    executor: String,
    busy: Vec<Duration>,
    wall: Duration,
    iter_wall: Duration,
    iter_times: Vec<f64>,
    same: usize,
    compared: usize,
    migrations: usize,
    rebalance_time: Duration,
    rebalance_critical: Duration,
    balancing_in_slack: Duration,
    balancing_in_background: Duration,
    rebalances: usize,
    abandoned: usize,
    restarted: usize,
    /// Phases seen in the current iteration.
    phase_in_iteration: usize,
    /// Per phase of an iteration: (Σ max busy, Σ mean busy), seconds.
    phase_busy: Vec<(f64, f64)>,
    /// The phases' idle parts summed, seconds.
    idle: IdleParts,
    /// The interval since the last rebalancing: its `C`, the sum of its iteration times
    /// (seconds) and its length; and the efforts of the intervals closed (see
    /// [`RunReport::effort_ms`]).
    interval: (f64, f64, usize),
    efforts: Vec<f64>,
    /// What happened at the end of every iteration so far.
    ends: Vec<IterationEnd>,
}

impl Recorder {
    /// A recorder for `threads` workers of `executor`.
    pub fn new(executor: &str, threads: usize) -> Recorder {
        Recorder { executor: executor.into(), busy: vec![Duration::ZERO; threads], ..Default::default() }
    }

    /// Adds one phase.
    pub fn phase(&mut self, s: &PhaseStats) {
        for (acc, b) in self.busy.iter_mut().zip(&s.busy) {
            *acc += *b;
        }
        self.wall += s.wall;
        self.iter_wall += s.wall;
        self.same += s.same_thread;
        self.compared += s.compared;
        self.idle.add(&s.idle_parts(), 1.0);
        if !s.busy.is_empty() {
            let secs = s.busy.iter().map(Duration::as_secs_f64);
            let (max, sum) = secs.fold((0.0, 0.0), |(m, t): (f64, f64), b| (m.max(b), t + b));
            if self.phase_busy.len() <= self.phase_in_iteration {
                self.phase_busy.push((0.0, 0.0));
            }
            let acc = &mut self.phase_busy[self.phase_in_iteration];
            acc.0 += max;
            acc.1 += sum / s.busy.len() as f64;
        }
        self.phase_in_iteration += 1;
    }

    /// Closes an iteration (its wall time is the sum of its phases plus the rebalancing).
    pub fn iteration(&mut self, end: &IterationEnd) {
        // A rebalancing's time opens the next interval (its `C`); other decisions belong to
        // the iteration they ended.
        let phases = self.iter_wall.as_secs_f64();
        let between = end.rebalance_time.as_secs_f64();
        self.interval.1 += phases + if end.rebalanced { 0.0 } else { between };
        self.interval.2 += 1;
        if end.rebalanced {
            self.efforts.push(effort_ms(self.interval));
            self.interval = (between, 0.0, 0);
        }
        self.iter_wall += end.rebalance_time;
        self.wall += end.rebalance_time;
        self.iter_times.push(std::mem::take(&mut self.iter_wall).as_secs_f64() * 1e3);
        self.migrations += end.migrations;
        self.rebalances += usize::from(end.rebalanced);
        self.rebalance_time += end.rebalance_time;
        self.rebalance_critical += end.rebalance_critical;
        self.balancing_in_slack += end.balancing_in_slack;
        self.balancing_in_background += end.balancing_in_background;
        self.abandoned += usize::from(end.rebalance_abandoned);
        self.restarted += usize::from(end.rebalanced && end.rebalance_restarted);
        self.phase_in_iteration = 0;
        self.ends.push(end.clone());
    }

    /// Wall time of every iteration so far, milliseconds.
    pub fn iteration_ms(&self) -> &[f64] {
        &self.iter_times
    }

    /// What happened at the end of every iteration so far (rebalancings, balancer time).
    pub fn iteration_ends(&self) -> &[IterationEnd] {
        &self.ends
    }

    /// The summary so far.
    pub fn report(&self) -> RunReport {
        let threads = self.busy.len();
        let busy_ms: Vec<f64> = self.busy.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        let wall_ms = self.wall.as_secs_f64() * 1e3;
        let median = pbs::metrics::median(&self.iter_times);
        let iterations = self.iter_times.len();
        RunReport {
            executor: self.executor.clone(),
            threads,
            iterations,
            iter_ms_median: median,
            iter_ms_mean: if iterations > 0 { self.iter_times.iter().sum::<f64>() / iterations as f64 } else { 0.0 },
            idle_ms: busy_ms.iter().map(|b| (wall_ms - b).max(0.0)).collect(),
            max_avg: pbs::metrics::max_avg(&busy_ms),
            efficiency: if wall_ms > 0.0 { busy_ms.iter().sum::<f64>() / threads as f64 / wall_ms } else { 0.0 },
            idle_shares: IdleShares::of_run(&self.idle, self.rebalance_time.as_secs_f64(), self.wall.as_secs_f64()),
            phase_max_avg: self
                .phase_busy
                .iter()
                .map(|&(max, mean)| if mean > 0.0 { max / mean } else { 1.0 })
                .collect(),
            affinity: (self.compared > 0).then(|| self.same as f64 / self.compared as f64),
            migrations_per_iter: if iterations > 0 { self.migrations as f64 / iterations as f64 } else { 0.0 },
            rebalances: self.rebalances,
            rebalance_ms: self.rebalance_time.as_secs_f64() * 1e3,
            rebalance_critical_ms: self.rebalance_critical.as_secs_f64() * 1e3,
            balancing_in_slack_ms: self.balancing_in_slack.as_secs_f64() * 1e3,
            balancing_in_background_ms: self.balancing_in_background.as_secs_f64() * 1e3,
            rebalances_abandoned: self.abandoned,
            rebalances_restarted: self.restarted,
            effort_ms: {
                let mut e = self.efforts.clone();
                if self.interval.2 > 0 {
                    e.push(effort_ms(self.interval));
                }
                e
            },
            busy_ms,
            counters: None,
            hw_unavailable_reason: None,
        }
    }
}

/// `(C + Σ iteration times) / length` of an interval, milliseconds.
fn effort_ms((cost, sum, len): (f64, f64, usize)) -> f64 {
    1e3 * (cost + sum) / len.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_phases_into_a_report() {
        let mut r = Recorder::new("static", 2);
        let ms = Duration::from_millis;
        for _ in 0..3 {
            r.phase(&PhaseStats {
                wall: ms(10),
                boxes: vec![5, 5],
                busy: vec![ms(9), ms(6)],
                same_thread: 10,
                compared: 10,
                pool_wall: ms(10),
                started: vec![ms(0), ms(0)],
                ended: vec![ms(9), ms(6)],
            });
            r.iteration(&IterationEnd::default());
        }
        let rep = r.report();
        assert_eq!(rep.iterations, 3);
        assert!((rep.iter_ms_median - 10.0).abs() < 1e-9);
        assert!((rep.efficiency - 0.75).abs() < 1e-9, "{rep:?}"); // (27+18)/2 / 30
        assert!((rep.max_avg - 1.2).abs() < 1e-9); // 27 / 22.5
        assert_eq!(rep.affinity, Some(1.0));
        assert!((rep.idle_ms[1] - 12.0).abs() < 1e-9);
        assert!(serde_json::to_string(&rep).unwrap().contains("\"efficiency\":0.75"));
        assert_eq!(rep.phase_max_avg.len(), 1);
        assert!((rep.phase_max_avg[0] - 1.2).abs() < 1e-9);
        // Thread 1 waits 3 ms of every 10 for thread 0, and both wait 1 ms at the barrier.
        let idle = rep.idle_shares;
        assert!(
            (idle.in_phases.waiting - 0.15).abs() < 1e-9 && (idle.in_phases.barrier - 0.1).abs() < 1e-9,
            "{idle:?}"
        );
        assert!((rep.efficiency + idle.in_phases.total() + idle.between_iterations - 1.0).abs() < 1e-9, "{idle:?}");
        assert!(serde_json::to_string(&rep).unwrap().contains("\"between_iterations\":0.0"));
    }

    #[test]
    fn the_mean_iteration_counts_the_long_ones_that_the_median_hides() {
        let mut r = Recorder::new("pbs", 2);
        let ms = Duration::from_millis;
        for (wall, rebalance) in [(10, 0), (10, 0), (10, 30)] {
            r.phase(&PhaseStats { wall: ms(wall), boxes: vec![1, 1], busy: vec![ms(5); 2], ..Default::default() });
            r.iteration(&IterationEnd { rebalance_time: ms(rebalance), ..Default::default() });
        }
        let rep = r.report();
        assert!((rep.iter_ms_median - 10.0).abs() < 1e-9, "{rep:?}");
        assert!((rep.iter_ms_mean - 20.0).abs() < 1e-9, "{rep:?}"); // (10 + 10 + 40) / 3
        assert_eq!(Recorder::new("pbs", 2).report().iter_ms_mean, 0.0, "no iteration, no division by zero");
    }

    #[test]
    fn the_effort_of_each_interval_charges_the_rebalancing_that_opened_it() {
        let mut r = Recorder::new("norcb", 2);
        let ms = Duration::from_millis;
        let phase = |wall| PhaseStats { wall: ms(wall), boxes: vec![1, 1], busy: vec![ms(1); 2], ..Default::default() };
        // Interval 1: 4 + 6 (the decision of the second iteration, which did not rebalance,
        // counts in it), closed by a rebalancing of 9 ms at the end of iteration 2.
        r.phase(&phase(4));
        r.iteration(&IterationEnd { rebalance_time: ms(2), ..Default::default() });
        r.phase(&phase(4));
        r.iteration(&IterationEnd { rebalanced: true, rebalance_time: ms(9), ..Default::default() });
        // Interval 2: C = 9, then iterations of 3 ms, 3 of them, still open at the end.
        for _ in 0..3 {
            r.phase(&phase(3));
            r.iteration(&IterationEnd::default());
        }
        let rep = r.report();
        assert_eq!(rep.effort_ms.len(), 2);
        assert!((rep.effort_ms[0] - 5.0).abs() < 1e-9, "{:?}", rep.effort_ms); // (0 + 4 + 2 + 4) / 2
        assert!((rep.effort_ms[1] - 6.0).abs() < 1e-9, "{:?}", rep.effort_ms); // (9 + 9) / 3

        // Every millisecond of the run is in exactly one interval.
        let total: f64 = rep.effort_ms[0] * 2.0 + rep.effort_ms[1] * 3.0;
        assert!((total - r.iteration_ms().iter().sum::<f64>()).abs() < 1e-9);
        assert!(Recorder::new("static", 1).report().effort_ms.is_empty());
    }

    /// Each figure of the iteration ends is summed into its own field of the report; the
    /// rebalancing time is the share of the wall time spent between iterations.
    #[test]
    fn every_iteration_end_is_summed_into_its_own_field() {
        let mut r = Recorder::new("pbs", 2);
        let ms = Duration::from_millis;
        let end = |k: u64| IterationEnd {
            rebalanced: k == 1,
            rebalance_time: ms(2 * k),
            rebalance_critical: ms(3 * k),
            balancing_in_slack: ms(5 * k),
            balancing_in_background: ms(7 * k),
            rebalance_abandoned: k == 2,
            migrations: 11 * k as usize,
            ..Default::default()
        };
        let ends: Vec<IterationEnd> = (1..=3).map(end).collect();
        for e in &ends {
            r.phase(&PhaseStats { wall: ms(6), boxes: vec![1, 1], busy: vec![ms(3); 2], ..Default::default() });
            r.iteration(e);
        }
        assert_eq!(r.iteration_ends(), &ends[..]);
        let rep = r.report();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(rep.rebalance_ms, 12.0), "{rep:?}"); // 2 + 4 + 6
        assert!(close(rep.rebalance_critical_ms, 18.0), "{rep:?}");
        assert!(close(rep.balancing_in_slack_ms, 30.0), "{rep:?}");
        assert!(close(rep.balancing_in_background_ms, 42.0), "{rep:?}");
        assert_eq!((rep.rebalances, rep.rebalances_abandoned, rep.rebalances_restarted), (1, 1, 0));
        assert!(close(rep.migrations_per_iter, 22.0), "{rep:?}"); // (11 + 22 + 33) / 3
                                                                  // 18 ms of phases and 12 between iterations.
        assert!(close(rep.idle_shares.between_iterations, 12.0 / 30.0), "{:?}", rep.idle_shares);
        assert!(close(rep.efficiency, 9.0 / 30.0), "{rep:?}");
        assert_eq!(rep.affinity, None, "no phase compared a box with its previous thread");
        assert!(close(rep.idle_ms[0], 21.0), "{rep:?}"); // 30 − 9

        // A run that took no time: zeros (and the max_avg of equal loads), not NaN.
        let none = Recorder::new("pbs", 2).report();
        assert_eq!((none.efficiency, none.migrations_per_iter, none.max_avg), (0.0, 0.0, 1.0), "{none:?}");
        let mut idle = Recorder::new("pbs", 2);
        idle.phase(&PhaseStats { wall: ms(1), boxes: vec![0, 0], busy: vec![ms(0); 2], ..Default::default() });
        assert_eq!(idle.report().phase_max_avg, [1.0], "a phase in which no thread worked is not imbalanced");
        assert_eq!(IdleShares::of_run(&IdleParts::default(), 0.0, 0.0), IdleShares::default());
        let shares = IdleShares::of_run(&IdleParts { waiting: 1.0, ..IdleParts::default() }, 0.5, 2.0);
        assert_eq!((shares.in_phases.waiting, shares.between_iterations), (0.5, 0.25));
    }

    #[test]
    fn restarts_count_among_the_rebalancings_taken_on() {
        let mut r = Recorder::new("pbs", 1);
        let restarted = IterationEnd { rebalanced: true, rebalance_restarted: true, ..Default::default() };
        let moved_back = IterationEnd { rebalanced: true, ..Default::default() };
        for end in [&restarted, &moved_back, &IterationEnd::default(), &restarted] {
            r.iteration(end);
        }
        let rep = r.report();
        assert_eq!((rep.rebalances, rep.rebalances_restarted), (3, 2));
    }

    #[test]
    fn balanced_totals_can_hide_phases_imbalanced_in_opposite_directions() {
        let mut r = Recorder::new("pbs", 2);
        let ms = Duration::from_millis;
        let phase = |busy: Vec<Duration>| PhaseStats { wall: ms(6), boxes: vec![1, 1], busy, ..Default::default() };
        for _ in 0..4 {
            r.phase(&phase(vec![ms(6), ms(4)])); // thread 0 heavier in phase 0
            r.phase(&phase(vec![ms(4), ms(6)])); // thread 1 heavier in phase 1
            r.iteration(&IterationEnd::default());
        }
        let rep = r.report();
        assert!((rep.max_avg - 1.0).abs() < 1e-9, "totals are balanced");
        assert_eq!(rep.phase_max_avg.len(), 2);
        for m in &rep.phase_max_avg {
            assert!((m - 1.2).abs() < 1e-9, "{:?}", rep.phase_max_avg); // 6 / 5
        }
        assert!((rep.efficiency - 10.0 / 12.0).abs() < 1e-9);
    }
}
