//! The balances across ranks replayed in one process on recorded box loads, without MPI and
//! without the timing noise of many ranks sharing a few cores (`examples/rank_replay.rs` feeds
//! it md's own work per box). Each [`Lane`] is one balance at one rank count: it charges every
//! iteration to the owners in force while it ran, then lets its [`RankBalancer`] decide, through
//! [`RankBalancer::end_iteration`], the path rank 0 of `pbs-mpi run` takes (no migration cost
//! is added: no data moves here).
//!
//! What a lane counts is what a criterion trades: the slowest rank's time summed over the
//! iterations, `Σ max`, and the balancer's own time; the efficiency `Σ mean / Σ max` alone would
//! reward every rebalancing, however dear.

use pbs::{metrics, Grid};

use crate::ranks::{LoadHistory, RankBalancer, BALANCES};

/// One balance at one rank count over a replayed run.
pub struct Lane {
    /// The lane's name as given: `BALANCE` or `BALANCE@CRITERION`.
    pub name: String,
    /// Ranks.
    pub ranks: usize,
    balancer: RankBalancer,
    history: LoadHistory,
    /// The ranks' `max / mean` in each iteration, under the owners it ran with.
    pub ran_with: Vec<f64>,
    /// The iterations after which the owners changed.
    pub rebalanced_after: Vec<usize>,
    /// Boxes moved by the rebalancings, summed.
    pub moved: usize,
    /// Seconds the balancer took deciding and balancing, summed.
    pub seconds: f64,
    sum_mean: f64,
    sum_max: f64,
}

impl Lane {
    /// The lane `name` (`BALANCE`, one of [`BALANCES`], or `BALANCE@CRITERION` to run it under
    /// another criterion than `criterion`) over `ranks` ranks of `grid`, starting from a
    /// partition of `estimate` as `pbs-mpi` does. An error names a bad name or size.
    pub fn new(name: &str, criterion: &str, grid: Grid, ranks: usize, estimate: &[f64]) -> Result<Lane, String> {
        let (balance, named) = name.split_once('@').unwrap_or((name, criterion));
        if !BALANCES.contains(&balance) {
            return Err(format!("unknown balance {name:?}; expected some of {}", BALANCES.join(", ")));
        }
        Ok(Lane {
            name: name.to_string(),
            ranks,
            balancer: RankBalancer::new(balance, grid, ranks, named, Some(estimate))?,
            history: LoadHistory::new(grid.len()),
            ran_with: Vec::new(),
            rebalanced_after: Vec::new(),
            moved: 0,
            seconds: 0.0,
            sum_mean: 0.0,
            sum_max: 0.0,
        })
    }

    /// One iteration whose boxes took `loads` (seconds) and pack to `bytes`: charged to the
    /// owners in force, then the balancer sees it and may change them for the next. An error
    /// names a wrong length or a value that is not finite and ≥ 0; the lane is left as it was.
    pub fn iteration(&mut self, loads: &[f64], bytes: &[f64]) -> Result<(), String> {
        let boxes = self.owners().len();
        if loads.len() != boxes || bytes.len() != boxes {
            return Err(format!("{} box loads and {} sizes for {boxes} boxes", loads.len(), bytes.len()));
        }
        if let Some(k) =
            (0..boxes).find(|&k| !(loads[k].is_finite() && loads[k] >= 0.0 && bytes[k].is_finite() && bytes[k] >= 0.0))
        {
            return Err(format!("box {k}: load {} and size {}, not finite and ≥ 0", loads[k], bytes[k]));
        }
        let sums = metrics::charges(self.balancer.owners(), loads, self.ranks);
        self.ran_with.push(metrics::max_avg(&sums));
        self.sum_mean += sums.iter().sum::<f64>() / self.ranks as f64;
        self.sum_max += sums.iter().copied().fold(0.0, f64::max);
        let d = self.balancer.end_iteration(&mut self.history, loads, bytes)?;
        if d.rebalanced {
            self.rebalanced_after.push(self.ran_with.len() - 1);
            self.moved += d.migrations;
        }
        self.seconds += d.seconds;
        Ok(())
    }

    /// Every box's rank now.
    pub fn owners(&self) -> &[u32] {
        self.balancer.owners()
    }

    /// `Σ mean / Σ max` over the iterations: the work-weighted efficiency (1 before any).
    pub fn efficiency(&self) -> f64 {
        if self.sum_max > 0.0 {
            self.sum_mean / self.sum_max
        } else {
            1.0
        }
    }

    /// The run's modelled time in seconds: the slowest rank's time summed over the iterations,
    /// plus the balancer's.
    pub fn modelled_seconds(&self) -> f64 {
        self.sum_max + self.seconds
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pbs_scheduler::executors::StaticBlocks;

    /// A load that moves a column a step along x: a disc over uniform ground.
    fn moving(grid: Grid, step: usize) -> Vec<f64> {
        (0..grid.len())
            .map(|k| {
                let [i, j, _] = grid.coords(k);
                let (ci, cj) = ((2 + step) % grid.nx(), grid.ny() / 2);
                let d2 = (i as f64 - ci as f64).powi(2) + (j as f64 - cj as f64).powi(2);
                1e-3 * (1.0 + 20.0 * (-d2 / 6.0).exp())
            })
            .collect()
    }

    /// `static` never moves: each iteration is charged to the slabs, and the sums are those of
    /// the charges computed by hand; the efficiency is their ratio.
    #[test]
    fn a_static_lane_sums_the_slabs_charges() {
        let grid = Grid::new(12, 8).unwrap();
        let bytes = vec![8.0; grid.len()];
        let mut lane = Lane::new("static", "boulmier", grid, 4, &vec![1.0; grid.len()]).unwrap();
        assert_eq!(lane.efficiency(), 1.0, "no iteration yet");
        // An iteration that weighs nothing leaves it at 1, not 0 / 0.
        lane.iteration(&vec![0.0; grid.len()], &bytes).unwrap();
        assert_eq!((lane.efficiency(), lane.ran_with[0]), (1.0, 1.0));
        let mut lane = Lane::new("static", "boulmier", grid, 4, &vec![1.0; grid.len()]).unwrap();
        let slabs: Vec<u32> =
            (0..4u32).flat_map(|r| StaticBlocks::block(grid.len(), 4, r as usize).map(move |_| r)).collect();
        let (mut sum_max, mut sum_mean) = (0.0, 0.0);
        for step in 0..15 {
            let loads = moving(grid, step);
            lane.iteration(&loads, &bytes).unwrap();
            let sums = metrics::charges(&slabs, &loads, 4);
            sum_max += sums.iter().copied().fold(0.0, f64::max);
            sum_mean += sums.iter().sum::<f64>() / 4.0;
            assert_eq!(*lane.ran_with.last().unwrap(), metrics::max_avg(&sums), "step {step}");
        }
        assert_eq!(lane.owners(), &slabs[..]);
        assert!(lane.rebalanced_after.is_empty() && lane.moved == 0);
        assert!((lane.efficiency() - sum_mean / sum_max).abs() < 1e-12);
        assert!((lane.modelled_seconds() - sum_max - lane.seconds).abs() < 1e-15);
        assert!(lane.modelled_seconds() >= sum_max);
    }

    /// An iteration is charged to the owners it ran with, before the balancer changes them;
    /// each rebalancing is recorded after the iteration that asked for it, with the boxes it
    /// moved, and the balancer's time is summed.
    #[test]
    fn an_iteration_is_charged_before_the_owners_change() {
        let grid = Grid::new(16, 12).unwrap();
        let bytes = vec![8.0; grid.len()];
        for name in ["pbs", "rcb@always"] {
            let start = moving(grid, 0);
            let mut lane = Lane::new(name, "always", grid, 4, &start).unwrap();
            let mut moved = 0;
            for step in 0..20 {
                let loads = moving(grid, 2 * step);
                let before = lane.owners().to_vec();
                lane.iteration(&loads, &bytes).unwrap();
                let ran = metrics::max_avg(&metrics::charges(&before, &loads, 4));
                assert_eq!(*lane.ran_with.last().unwrap(), ran, "{name}, step {step}");
                if lane.rebalanced_after.last() == Some(&step) {
                    moved += metrics::migrations(&before, lane.owners());
                } else {
                    assert_eq!(lane.owners(), &before[..], "{name}, step {step}: no rebalancing, no change");
                }
            }
            assert!(lane.rebalanced_after.len() >= 2, "{name}: the moving disc was followed");
            assert_eq!(lane.moved, moved, "{name}");
            assert!(lane.seconds > 0.0 && lane.efficiency() > 0.0 && lane.efficiency() <= 1.0);
        }
    }

    /// `BALANCE@CRITERION` runs under that criterion; a bad balance or criterion is named.
    #[test]
    fn lanes_are_named_balance_at_criterion() {
        let grid = Grid::new(8, 8).unwrap();
        let ones = vec![1.0; grid.len()];
        assert_eq!(Lane::new("rcb@never", "boulmier", grid, 4, &ones).unwrap().name, "rcb@never");
        let e = Lane::new("metis", "boulmier", grid, 4, &ones).err().unwrap();
        assert!(e.starts_with("unknown balance \"metis\"") && e.contains("pbs, pbs-cells"), "{e}");
        let e = Lane::new("pbs@nope", "boulmier", grid, 4, &ones).err().unwrap();
        assert!(e.contains("\"nope\""), "{e}");
        assert!(Lane::new("pbs", "boulmier", grid, 65, &ones).is_err(), "more ranks than boxes");
        // Bad loads are named, and the lane stays as it was.
        let mut lane = Lane::new("pbs", "boulmier", grid, 4, &ones).unwrap();
        let e = lane.iteration(&ones[1..], &ones).unwrap_err();
        assert_eq!(e, "63 box loads and 64 sizes for 64 boxes");
        let mut bad = ones.clone();
        bad[5] = f64::NAN;
        assert_eq!(lane.iteration(&bad, &ones).unwrap_err(), "box 5: load NaN and size 1, not finite and ≥ 0");
        assert!(lane.iteration(&ones, &bad).unwrap_err().starts_with("box 5: load 1 and size NaN"));
        bad[5] = -1.0;
        assert!(lane.iteration(&bad, &ones).unwrap_err().contains("load -1"));
        assert!(lane.ran_with.is_empty() && lane.efficiency() == 1.0);
        // Under `never` RCB re-cuts only at the first measured iteration (as `pbs-mpi` does
        // whatever the criterion), under `always` whenever the moving load asks.
        let counts = ["rcb@never", "rcb@always"].map(|name| {
            let mut lane = Lane::new(name, "boulmier", grid, 4, &ones).unwrap();
            for step in 0..12 {
                lane.iteration(&moving(grid, step), &vec![8.0; grid.len()]).unwrap();
            }
            lane.rebalanced_after.len()
        });
        assert!(counts[0] == 1 && counts[1] > 2, "{counts:?}");
    }
}
