//! The refinement around the power cells, as the partitioners call it: a cold start without
//! cells where they cannot resolve the load, and a rebalancing whose owners are mended, and
//! finished where the cells could not resolve the tolerance. The `pbs` row of `pbs-bench
//! peers` and the C interface's `pbs_partitioner_balance` share these.

use super::{mend_rebalanced, refine, RefineSettings};
use crate::{rebalance, Balancer, Outcome, Problem, StopRule, VCores};

/// A cold start without power cells: the parts of a k-way RCB ([`crate::bisection::kway_rcb`])
/// refined to `tol` ([`refine`] without its group pass), and vCores at their centroids, weights
/// zero ([`VCores::at_centroids`]), for the rebalancings after; the first of those moves the
/// boxes where the refined parts and the cells differ. Where a box that carries load outweighs
/// a tolerance ([`StopRule::resolvable_by_cells`]) this is what a cold start does instead of
/// running cells that would crawl to their stall limit (docs/peers.md, "Cells skipped where a
/// box outweighs the tolerance").
///
/// ```
/// use pbs::{metrics, refine, Grid, Problem};
/// let grid = Grid::new(40, 40)?;
/// let loads: Vec<f64> = (0..grid.len()).map(|k| if k % 30 == 0 { 1.0 } else { 0.0 }).collect();
/// let problem = Problem::new(grid, &loads, 8)?;
/// let (owners, vcores) = refine::refined_bisection(&problem, 0.005)?;
/// assert_eq!(vcores.len(), 8);
/// assert_eq!(metrics::disconnected_parts(&grid, &owners, 8), 0);
/// # Ok::<(), pbs::Error>(())
/// ```
///
/// # Errors
/// As [`refine`], for a tolerance that is negative or not finite.
pub fn refined_bisection(problem: &Problem, tol: f64) -> crate::Result<(Vec<u32>, VCores)> {
    let mut owners = crate::bisection::kway_rcb(problem.grid(), problem.loads(), problem.vcores())?;
    // Its parts are an RCB's already: groups re-cut as an RCB cuts them gain nothing for the
    // price of an RCB each (docs/peers.md, "Groups of parts cut again").
    let settings = RefineSettings { tol, group_sweeps: 0, ..Default::default() };
    refine(problem, &mut owners, settings)?;
    let vcores = VCores::at_centroids(problem, &owners)?;
    Ok((owners, vcores))
}

/// What [`rebalance_mended`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct Rebalanced {
    /// The cells' run ([`crate::rebalance`]).
    pub outcome: Outcome,
    /// The owners to use: the cells', mended, and finished where the cells stopped early.
    pub owners: Vec<u32>,
    /// Whether the cells were in one piece each: the next call's `cells_whole`.
    pub cells_whole: bool,
}

/// A rebalancing of `vcores` to `stop` ([`crate::rebalance`]) whose cells' owners are mended
/// ([`mend_rebalanced`], told by `cells_whole` whether the cells it starts from were in one
/// piece each). Where a box that carries load outweighs `stop`'s tolerance
/// ([`StopRule::resolvable_by_cells`]), the cells stop where they can resolve the load
/// ([`StopRule::coarsened_for_cells`]) and the refinement's balance and border passes take the
/// owners to the tolerance ([`refine`] without its group and pair passes, whose shorter cut
/// moved more boxes a step than it saved): on `pbs-bench maps --large`'s 500² map at 1,000
/// parts, rolled a column a step, 5.2 s a rebalancing and 1.17 × the bound became 0.41 s and
/// 1.05 × (docs/peers.md, "Warm cells stopped where they can resolve the load").
///
/// ```
/// use pbs::{methods, refine, Grid, Problem, StopRule, VCores};
/// let grid = Grid::new(60, 60)?;
/// // One box in twenty carries load: 9 per vCore at 20 vCores, too few for 0.05.
/// let loads: Vec<f64> = (0..grid.len()).map(|k| if k % 20 == 3 { 1.0 + (k % 7) as f64 } else { 0.0 }).collect();
/// let problem = Problem::new(grid, &loads, 20)?;
/// let (_, mut vcores) = refine::refined_bisection(&problem, 0.005)?;
/// let mut method = methods::by_name("power-cells")?;
/// let done = refine::rebalance_mended(method.as_mut(), &problem, &mut vcores, StopRule::default(), false)?;
/// assert_eq!(done.owners.len(), grid.len());
/// # Ok::<(), pbs::Error>(())
/// ```
///
/// # Errors
/// As [`refine`], for a tolerance that is negative or not finite.
///
/// # Panics
/// If `vcores` belong to another grid or vCore count than `problem` (as [`crate::rebalance`]).
pub fn rebalance_mended(
    method: &mut dyn Balancer,
    problem: &Problem,
    vcores: &mut VCores,
    stop: StopRule,
    cells_whole: bool,
) -> crate::Result<Rebalanced> {
    let finish = !stop.resolvable_by_cells(problem);
    let cells_stop = if finish { stop.coarsened_for_cells(problem) } else { stop };
    let outcome = rebalance(method, problem, vcores, cells_stop);
    let mut owners = vcores.owners().to_vec();
    let cells_whole = mend_rebalanced(problem, &mut owners, &outcome, cells_whole)?;
    if finish {
        let settings = RefineSettings { tol: stop.tol, group_sweeps: 0, pair_sweeps: 0, ..Default::default() };
        refine(problem, &mut owners, settings)?;
    }
    Ok(Rebalanced { outcome, owners, cells_whole })
}
