//! `pbs`: the pbs balancer as a partitioner, so that it stands in the same table as its peers.
//! A cold start ([`pbs::refine::first_partition`], which the C partitioner's first call shares)
//! places the vCores at the centroids of a k-way RCB (or at random), balances the power cells
//! and refines their owners box by box ([`pbs::refine`]); where a box that carries
//! load outweighs the cells' tolerance ([`StopRule::resolvable_by_cells`]), it refines the
//! RCB's parts without the cells, as `pbs-rcb-start` does, and after cells that crawled and
//! whose refinement stops above its target it keeps the refined RCB's parts where they balance
//! better ([`pbs::refine::refine_first_partition`]); later calls on the same
//! grid and part count are rebalancings, as the executor's: they warm-start from the vCores
//! where the previous call left them, or start over when those are far from balance
//! ([`pbs::rebalance`]), and return the cells' owners with any part in pieces mended
//! ([`pbs::refine::mend`]); where the cells cannot resolve the warm tolerance either, they stop
//! where they can ([`StopRule::coarsened_for_cells`]) and the refinement's balance and border
//! passes finish. `pbs-rcb-start` skips the power cells on
//! a cold start: the RCB's parts, refined, are the partition (2–3 × RCB's time rather than
//! 10–30 ×, a shorter cut), at the price of a first warm start that moves the boxes where
//! those parts and the cells differ (docs/peers.md, "Refined box by box").

use pbs::{balance, methods, rebalance, Grid, StopRule, VCores};

use crate::{Partitioner, Result};

/// pbs's balancer by method name, run to its stop rule.
pub struct Pbs {
    /// A name from `pbs::methods::NAMES`.
    pub method: String,
    /// When a run stops; `None`: on a cold start [`StopRule::before_refinement`] (0.01 from 250
    /// boxes that carry load per part, else 0.1), or [`StopRule::for_problem`] without the refinement (0.05
    /// below 250), [`StopRule::default`] on a warm one.
    pub stop: Option<StopRule>,
    /// Seed of the cold start's vCore positions.
    pub seed: u64,
    /// Where a cold start places the vCores.
    pub cold_start: ColdStart,
    /// Whether a cold start's owners are refined box by box at the end
    /// ([`pbs::refine::refine_first_partition`]) and a warm start's parts in pieces mended,
    /// its owners refined where the cells end above the tolerance, its boxes without load left
    /// with their last part where that lengthens no cut ([`pbs::refine::rebalance_mended`]);
    /// warm starts otherwise keep the power cells' owners, which move fewer boxes.
    pub refine: bool,
    /// Whether a warm start (with `refine`) moves from the last call's owners only as far as
    /// the tolerance needs towards its rebalancing's ([`pbs::refine::follow_within_tolerance`]:
    /// fewer boxes moved, for a slightly longer cut and time; docs/peers.md, "Following a
    /// rebalancing only as far as needed").
    pub follow: bool,
    /// What the next call warm-starts from.
    state: Option<Warm>,
    steps: Option<usize>,
}

/// The last call's grid, vCores and owners, and whether the vCores' cells are in one piece
/// each (known once a warm start has mended them).
struct Warm {
    grid: Grid,
    vcores: VCores,
    cells_whole: bool,
    owners: Vec<u32>,
}

/// Where a cold start places the vCores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ColdStart {
    /// At the centroids of a k-way RCB's parts ([`VCores::from_bisection`]): compact, nearly
    /// balanced cells for the power-cell weights to finish. Where the refinement follows and
    /// the cells cannot resolve their tolerance (fewer boxes that carry load per part than
    /// `1 / tol`: [`StopRule::resolvable_by_cells`]), as [`ColdStart::RefinedBisection`].
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
            follow: false,
            state: None,
            steps: None,
        }
    }
}

impl Pbs {
    /// The pbs rows of the peers table by name (`pbs`, `pbs-follow`, `pbs-cells`,
    /// `pbs-rcb-start`, `pbs-random-start`, `pbs-pair`), stopped by `stop` (`None`: as
    /// [`Pbs::stop`] says); `None` for any other name.
    pub fn variant(name: &str, stop: Option<StopRule>) -> Option<Pbs> {
        let mut p = Pbs::with_stop(stop);
        match name {
            "pbs" => {}
            "pbs-follow" => p.follow = true,
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
        } else if self.follow {
            "pbs-follow"
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
        let problem = pbs::Problem::new(*grid, loads, parts)?;
        let mut method = methods::by_name(&self.method)?;
        let state = self.state.take().filter(|w| w.grid == *grid && w.vcores.len() == parts);
        let warm = state.is_some();
        // The tight tolerance pays on a cold start only; a warm one keeps the default (see
        // `StopRule::for_problem`). Where the refinement follows, small parts stop early.
        let stop = self.stop.unwrap_or_else(|| match (warm, self.refine) {
            (true, _) => StopRule::default(),
            (false, true) => StopRule::before_refinement(&problem),
            (false, false) => StopRule::for_problem(&problem),
        });
        let tol = pbs::refine::RefineSettings::default().tol;
        let (mut vcores, whole, previous) = match state {
            Some(w) => (w.vcores, w.cells_whole, Some(w.owners)),
            None => match self.cold_start {
                ColdStart::Random if !self.refine => (VCores::random(&problem, self.seed), false, None),
                ColdStart::Bisection if !self.refine => (VCores::from_bisection(&problem), false, None),
                // The cells from the RCB's centroids (or random vCores), refined; from the RCB's
                // centroids, where a box that carries load outweighs the tolerance, the RCB's
                // parts refined without cells.
                ColdStart::Random | ColdStart::Bisection => {
                    let first = if self.cold_start == ColdStart::Random {
                        let start = VCores::random(&problem, self.seed);
                        pbs::refine::first_partition_from(method.as_mut(), &problem, start, stop, tol)?
                    } else {
                        pbs::refine::first_partition(method.as_mut(), &problem, stop, tol)?
                    };
                    let owners = first.owners.clone();
                    self.state =
                        Some(Warm { grid: *grid, vcores: first.vcores, cells_whole: false, owners: first.owners });
                    self.steps = Some(first.steps);
                    return Ok(owners);
                }
                ColdStart::RefinedBisection => {
                    let (owners, vcores) = pbs::refine::refined_bisection(&problem, tol)?;
                    self.state = Some(Warm { grid: *grid, vcores, cells_whole: false, owners: owners.clone() });
                    self.steps = Some(0);
                    return Ok(owners);
                }
            },
        };
        let (owners, now_whole) = match (warm, self.refine) {
            // A warm start is a rebalancing: far from balance (a re-drawn map) it starts over.
            // Its owners are the cells', mended; where a box that carries load outweighs the
            // tolerance, its cells stop where they can resolve the load and the refinement
            // finishes; where the cells end above the tolerance, the last owners refined may
            // be taken instead; boxes without load stay where they were where that lengthens
            // no cut (`pbs::refine::rebalance_mended`). `pbs-follow` then moves from the last
            // owners only as far as the tolerance needs.
            (true, true) => {
                let done = pbs::refine::rebalance_mended(
                    method.as_mut(),
                    &problem,
                    &mut vcores,
                    stop,
                    whole,
                    previous.as_deref(),
                )?;
                self.steps = Some(done.outcome.steps);
                let mut owners = done.owners;
                if let Some(previous) = previous.as_deref().filter(|_| self.follow) {
                    pbs::refine::follow_within_tolerance(&problem, &mut owners, previous, stop.tol)?;
                }
                (owners, done.cells_whole)
            }
            (true, false) => {
                self.steps = Some(rebalance(method.as_mut(), &problem, &mut vcores, stop).steps);
                (vcores.owners().to_vec(), false)
            }
            // A cold start without the refinement (`pbs-cells`): the cells' owners.
            (false, _) => {
                self.steps = Some(balance(method.as_mut(), &problem, &mut vcores, stop, |_| {}).steps);
                (vcores.owners().to_vec(), false)
            }
        };
        self.state = Some(Warm { grid: *grid, vcores, cells_whole: now_whole, owners: owners.clone() });
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

#[cfg(test)]
mod tests {
    use super::*;
    use pbs::loadmap::PerlinMap;
    use pbs::metrics::disconnected_parts;

    /// Where the boxes that carry load are fewer than ten per part (the cells' tolerance of 0.1
    /// before the refinement), a cold start skips the cells and refines the RCB's parts, as
    /// `pbs-rcb-start` does, whatever they give; with more of them, under 250 a part, it keeps
    /// those parts where they end within 1.01 × the bound (here at it); from 250 a part it runs
    /// the cells first.
    #[test]
    fn a_cold_start_skips_the_cells_where_a_loaded_box_outweighs_their_tolerance() {
        let grid = Grid::new(60, 60).unwrap();
        // One box in twenty carries load: 180 of them, 9 per part at 20 parts, 12 at 15.
        let sparse: Vec<f64> = (0..grid.len()).map(|k| if k % 20 == 7 { 1.0 + (k % 3) as f64 } else { 0.0 }).collect();
        // Every box: 257 per part at 14 parts.
        let dense: Vec<f64> = (0..grid.len()).map(|k| 1.0 + (k % 7) as f64).collect();
        for (loads, parts, skipped) in [(&sparse, 20, true), (&sparse, 15, true), (&dense, 14, false)] {
            let mut pbs = Pbs::default();
            let owners = pbs.partition(&grid, loads, parts).unwrap();
            let rcb_start = Pbs::variant("pbs-rcb-start", None).unwrap().partition(&grid, loads, parts).unwrap();
            assert_eq!(owners == rcb_start, skipped, "{parts} parts");
            assert_eq!(pbs.last_steps() == Some(0), skipped, "{parts} parts");
            assert_eq!(disconnected_parts(&grid, &owners, parts), 0);
        }
    }

    /// Each name's cold start is what its documentation says: `pbs-cells` the power cells'
    /// owners from the RCB's centroids, `pbs-random-start` the cells from random vCores refined
    /// box by box (without the refinement: those cells' owners), each run to the stop rule
    /// given (here three steps, as a tolerance of 0 is never met), or to its own default
    /// without one.
    #[test]
    fn each_variant_cold_starts_as_its_name_says() {
        let grid = Grid::new(48, 40).unwrap();
        let loads = PerlinMap::with_seed(6).loads(&grid);
        let parts = 6;
        let problem = pbs::Problem::new(grid, &loads, parts).unwrap();
        let tol = pbs::refine::RefineSettings::default().tol;
        let method = || methods::by_name(methods::DEFAULT).unwrap();
        let three = StopRule { max_steps: 3, tol: 0.0 };
        for stop in [None, Some(three)] {
            let cells_stop = stop.unwrap_or_else(|| StopRule::for_problem(&problem));
            let mut cells = VCores::from_bisection(&problem);
            let steps = balance(method().as_mut(), &problem, &mut cells, cells_stop, |_| {}).steps;
            let mut pbs_cells = Pbs::variant("pbs-cells", stop).unwrap();
            assert_eq!(pbs_cells.partition(&grid, &loads, parts).unwrap(), cells.owners(), "{stop:?}");
            assert_eq!(pbs_cells.last_steps(), Some(steps));

            let refined_stop = stop.unwrap_or_else(|| StopRule::before_refinement(&problem));
            let start = VCores::random(&problem, 1);
            let first =
                pbs::refine::first_partition_from(method().as_mut(), &problem, start, refined_stop, tol).unwrap();
            let mut random = Pbs::variant("pbs-random-start", stop).unwrap();
            assert_eq!(random.partition(&grid, &loads, parts).unwrap(), first.owners, "{stop:?}");
            assert_eq!(random.last_steps(), Some(first.steps));
            assert_ne!(first.owners, cells.owners(), "the test needs the refinement to change owners");

            // Random vCores without the refinement: their cells' owners.
            let mut random_cells = VCores::random(&problem, 1);
            balance(method().as_mut(), &problem, &mut random_cells, cells_stop, |_| {});
            let mut unrefined = Pbs { cold_start: ColdStart::Random, refine: false, ..Pbs::with_stop(stop) };
            assert_eq!(unrefined.partition(&grid, &loads, parts).unwrap(), random_cells.owners(), "{stop:?}");
        }
    }

    /// A call on another grid, or with another part count, is a cold start: the same parts as
    /// a fresh instance's.
    #[test]
    fn a_new_grid_or_part_count_is_a_cold_start() {
        let (grid, other) = (Grid::new(40, 30).unwrap(), Grid::new(30, 40).unwrap());
        let loads = PerlinMap::with_seed(3).loads(&grid);
        let mut pbs = Pbs::default();
        pbs.partition(&grid, &loads, 8).unwrap();
        for (g, parts) in [(grid, 6), (other, 6), (grid, 6)] {
            let fresh = Pbs::default().partition(&g, &loads, parts).unwrap();
            assert_eq!(pbs.partition(&g, &loads, parts).unwrap(), fresh, "{g:?}, {parts} parts");
        }
    }

    /// Where a box that carries load outweighs the warm tolerance, a warm start's cells stop
    /// at two such boxes' share and the refinement brings the parts to the tolerance. Here
    /// (8.6 loaded boxes a part) the cells run to 0.05 took 22–103 steps a warm start and left
    /// the parts at a median of 1.077 × the bound (1.046–1.114).
    #[test]
    fn warm_starts_on_sparse_load_end_near_the_tolerance_in_few_cell_steps() {
        let (grid, parts) = (Grid::new(60, 60).unwrap(), 20);
        let mut rng = pbs::rng::SplitMix64::new(5);
        let base: Vec<f64> =
            (0..grid.len()).map(|_| if rng.next_f64() < 0.05 { 0.5 + rng.next_f64() } else { 0.0 }).collect();
        let mut pbs = Pbs::default();
        pbs.partition(&grid, &base, parts).unwrap();
        let mut to_bound = Vec::new();
        for step in 1..=30 {
            // The map rolled `step` columns.
            let loads: Vec<f64> = (0..grid.len()).map(|k| base[k / 60 * 60 + (k % 60 + 60 - step) % 60]).collect();
            let owners = pbs.partition(&grid, &loads, parts).unwrap();
            let problem = pbs::Problem::new(grid, &loads, parts).unwrap();
            to_bound
                .push(pbs::metrics::max_avg(&pbs::metrics::charges(&owners, &loads, parts)) / problem.lower_bound());
            assert!(pbs.last_steps().unwrap() <= 10, "step {step}: {:?} cell steps", pbs.last_steps());
            assert_eq!(disconnected_parts(&grid, &owners, parts), 0);
        }
        assert!(pbs::metrics::median(&to_bound) <= 1.05, "{to_bound:?}");
        assert!(to_bound.iter().all(|&r| r <= 1.06), "{to_bound:?}");
    }

    /// No box carries load: neither cells nor refinement has a charge to balance, and cold and
    /// warm starts still return one valid part id per box (the warm cells' tolerance widens
    /// to infinity, two boxes' share of nothing).
    #[test]
    fn a_map_without_load_is_partitioned_cold_and_warm() {
        let (grid, parts) = (Grid::new(30, 20).unwrap(), 6);
        let loads = vec![0.0; grid.len()];
        let mut pbs = Pbs::default();
        for _ in 0..2 {
            let owners = pbs.partition(&grid, &loads, parts).unwrap();
            assert_eq!(owners.len(), grid.len());
            assert!(owners.iter().all(|&p| (p as usize) < parts));
        }
    }

    /// Each map of a drifting sequence given twice: the second call moves no box and skips the
    /// mend only where the cells were found whole, so both calls return the same parts, each
    /// in one piece, also after steps whose cells fell apart.
    #[test]
    fn a_warm_start_that_moves_nothing_returns_the_mended_parts_again() {
        let (grid, parts) = (Grid::new(60, 60).unwrap(), 30);
        let mut map = PerlinMap::with_seed(2);
        let mut pbs = Pbs::default();
        pbs.partition(&grid, &map.loads(&grid), parts).unwrap();
        let mut split_cells = 0;
        for _ in 0..40 {
            map = map.smooth(0.5);
            let loads = map.loads(&grid);
            let first = pbs.partition(&grid, &loads, parts).unwrap();
            let cells = pbs.state.as_ref().map(|s| s.vcores.owners().to_vec()).unwrap();
            split_cells += usize::from(disconnected_parts(&grid, &cells, parts) > 0);
            let again = pbs.partition(&grid, &loads, parts).unwrap();
            assert_eq!(pbs.last_steps(), Some(0));
            assert_eq!(first, again);
            assert_eq!(disconnected_parts(&grid, &again, parts), 0);
        }
        assert!(split_cells > 0, "no step's cells fell apart: the test shows nothing");
    }
}
