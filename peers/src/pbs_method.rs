//! `pbs`: the pbs balancer as a partitioner, so that it stands in the same table as its peers.
//! A cold start places the vCores at the centroids of a k-way RCB (or at random), balances the
//! power cells and refines their owners box by box ([`pbs::refine`]); later calls on the same
//! grid and part count are rebalancings, as the executor's: they warm-start from the vCores
//! where the previous call left them, or start over when those are far from balance
//! ([`pbs::rebalance`]), and return the cells' owners with any part in pieces mended
//! ([`pbs::refine::mend`]). `pbs-rcb-start` skips the power cells on
//! a cold start: the RCB's parts, refined, are the partition (2–3 × RCB's time rather than
//! 10–30 ×, a shorter cut), at the price of a first warm start that moves the boxes where
//! those parts and the cells differ (docs/peers.md, "Refined box by box").

use pbs::{balance, methods, rebalance, Grid, StopRule, VCores};

use crate::{check_input, Partitioner, Result};

/// pbs's balancer by method name, run to its stop rule.
pub struct Pbs {
    /// A name from `pbs::methods::NAMES`.
    pub method: String,
    /// When a run stops; `None`: on a cold start [`StopRule::before_refinement`] (0.01 from 250
    /// boxes per part, else 0.1), or [`StopRule::for_problem`] without the refinement (0.05
    /// below 250), [`StopRule::default`] on a warm one.
    pub stop: Option<StopRule>,
    /// Seed of the cold start's vCore positions.
    pub seed: u64,
    /// Where a cold start places the vCores.
    pub cold_start: ColdStart,
    /// Whether a cold start's owners are refined box by box at the end ([`pbs::refine`]) and
    /// a warm start's parts in pieces mended ([`pbs::refine::mend`]); warm starts otherwise
    /// keep the power cells' owners, which move fewer boxes.
    pub refine: bool,
    state: Option<(Grid, VCores)>,
    steps: Option<usize>,
}

/// Where a cold start places the vCores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ColdStart {
    /// At the centroids of a k-way RCB's parts ([`VCores::from_bisection`]): compact, nearly
    /// balanced cells for the power-cell weights to finish.
    #[default]
    Bisection,
    /// At random, from `seed` (as the executor does).
    Random,
    /// No power cells: the k-way RCB's parts refined box by box ([`pbs::refine`]) are the
    /// partition, and the vCores start at their centroids for the warm starts after (the
    /// first of which moves the boxes where those parts and the cells differ).
    RefinedBisection,
}

impl Default for Pbs {
    fn default() -> Self {
        Pbs {
            method: methods::DEFAULT.to_string(),
            stop: None,
            seed: 1,
            cold_start: ColdStart::Bisection,
            refine: true,
            state: None,
            steps: None,
        }
    }
}

impl Pbs {
    /// The pbs rows of the peers table by name (`pbs`, `pbs-cells`, `pbs-rcb-start`,
    /// `pbs-random-start`, `pbs-pair`), stopped by `stop` (`None`: as [`Pbs::stop`] says);
    /// `None` for any other name.
    pub fn variant(name: &str, stop: Option<StopRule>) -> Option<Pbs> {
        let mut p = Pbs::with_stop(stop);
        match name {
            "pbs" => {}
            "pbs-pair" => p.method = "power-cells-pair".into(),
            "pbs-random-start" => p.cold_start = ColdStart::Random,
            "pbs-cells" => p.refine = false,
            "pbs-rcb-start" => p.cold_start = ColdStart::RefinedBisection,
            _ => return None,
        }
        Some(p)
    }

    /// The default method stopped by `stop` (e.g. a tighter tolerance than pbs's default).
    pub fn with_stop(stop: Option<StopRule>) -> Pbs {
        Pbs { stop, ..Pbs::default() }
    }
}

impl Partitioner for Pbs {
    fn name(&self) -> &str {
        if !self.refine {
            "pbs-cells"
        } else if self.cold_start == ColdStart::RefinedBisection {
            "pbs-rcb-start"
        } else if self.cold_start == ColdStart::Random {
            "pbs-random-start"
        } else if self.method == methods::DEFAULT {
            "pbs"
        } else if self.method == "power-cells-pair" {
            "pbs-pair"
        } else {
            &self.method
        }
    }

    fn partition(&mut self, grid: &Grid, loads: &[f64], parts: usize) -> Result<Vec<u32>> {
        let problem = check_input(self.name(), grid, loads, parts)?;
        let mut method = methods::by_name(&self.method)?;
        let (mut vcores, warm) = match self.state.take() {
            Some((g, v)) if g == *grid && v.len() == parts => (v, true),
            _ => match self.cold_start {
                ColdStart::Random => (VCores::random(&problem, self.seed), false),
                ColdStart::Bisection => (VCores::from_bisection(&problem), false),
                ColdStart::RefinedBisection => {
                    let mut owners = pbs::bisection::kway_rcb(grid, loads, parts)?;
                    pbs::refine::refine(&problem, &mut owners, pbs::refine::RefineSettings::default())?;
                    self.state = Some((*grid, VCores::at_centroids(&problem, &owners)?));
                    self.steps = Some(0);
                    return Ok(owners);
                }
            },
        };
        // The tight tolerance pays on a cold start only; a warm one keeps the default (see
        // `StopRule::for_problem`). Where the refinement follows, small parts stop early.
        let stop = self.stop.unwrap_or_else(|| match (warm, self.refine) {
            (true, _) => StopRule::default(),
            (false, true) => StopRule::before_refinement(&problem),
            (false, false) => StopRule::for_problem(&problem),
        });
        // A warm start is a rebalancing: far from balance (a re-drawn map) it starts over.
        let outcome = if warm {
            rebalance(method.as_mut(), &problem, &mut vcores, stop)
        } else {
            balance(method.as_mut(), &problem, &mut vcores, stop, |_| {})
        };
        self.steps = Some(outcome.steps);
        let mut owners = vcores.owners().to_vec();
        if self.refine && !warm {
            pbs::refine::refine(&problem, &mut owners, pbs::refine::RefineSettings::default())?;
        } else if self.refine {
            // The cells can fall apart between boxes: a warm start's parts are mended too.
            pbs::refine::mend(&problem, &mut owners)?;
        }
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
