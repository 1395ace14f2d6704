//! `pbs`: the pbs balancer as a partitioner, so that it stands in the same table as its peers.
//! A cold start places the vCores at random (seeded); later calls on the same grid and part
//! count warm-start from the vCores where the previous call left them, as the executor does.

use pbs::{balance, methods, Grid, Problem, StopRule, VCores};

use crate::{check_input, Partitioner, Result};

/// pbs's balancer by method name, run to its stop rule.
pub struct Pbs {
    /// A name from `pbs::methods::NAMES`.
    pub method: String,
    /// When a run stops.
    pub stop: StopRule,
    /// Seed of the cold start's vCore positions.
    pub seed: u64,
    state: Option<(Grid, VCores)>,
    steps: Option<usize>,
}

impl Default for Pbs {
    fn default() -> Self {
        Pbs { method: methods::DEFAULT.to_string(), stop: StopRule::default(), seed: 1, state: None, steps: None }
    }
}

impl Pbs {
    /// The method of that name (from `pbs::methods::NAMES`) at the default stop rule.
    pub fn with_method(method: &str) -> Pbs {
        Pbs { method: method.to_string(), ..Pbs::default() }
    }

    /// The default method stopped by `stop` (e.g. a tighter tolerance than pbs's default).
    pub fn with_stop(stop: StopRule) -> Pbs {
        Pbs { stop, ..Pbs::default() }
    }
}

impl Partitioner for Pbs {
    fn name(&self) -> &str {
        if self.method == methods::DEFAULT {
            "pbs"
        } else if self.method == "power-cells-pair" {
            "pbs-pair"
        } else {
            &self.method
        }
    }

    fn partition(&mut self, grid: &Grid, loads: &[f64], parts: usize) -> Result<Vec<u32>> {
        check_input(self.name(), grid, loads, parts)?;
        let problem = Problem::new(*grid, loads, parts)?;
        let mut method = methods::by_name(&self.method)?;
        let mut vcores = match self.state.take() {
            Some((g, v)) if g == *grid && v.len() == parts => v,
            _ => VCores::random(&problem, self.seed),
        };
        let outcome = balance(method.as_mut(), &problem, &mut vcores, self.stop, |_| {});
        self.steps = Some(outcome.steps);
        let owners = vcores.owners().to_vec();
        self.state = Some((*grid, vcores));
        Ok(owners)
    }

    fn warm_starts(&self) -> bool {
        true
    }

    fn reset(&mut self) {
        self.state = None;
    }

    fn last_steps(&self) -> Option<usize> {
        self.steps
    }
}
