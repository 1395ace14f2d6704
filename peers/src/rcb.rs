//! `rcb`: k-way recursive coordinate bisection (Berger & Bokhari, IEEE Trans. Computers 1987)
//! for any part count: `pbs::bisection::kway_rcb`, which pbs also uses as its cold start.

use pbs::Grid;

use crate::{Partitioner, Result};

/// k-way RCB. It has no settings: it cuts where the running load is nearest to the share.
///
/// ```
/// use pbs_peers::{KwayRcb, Partitioner};
/// let grid = pbs::Grid::new(9, 3)?;
/// let parts = KwayRcb.partition(&grid, &vec![1.0; 27], 3)?;
/// assert_eq!(&parts[..9], &[0, 0, 0, 1, 1, 1, 2, 2, 2]); // three 3×3 blocks
/// # Ok::<(), pbs_peers::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct KwayRcb;

impl Partitioner for KwayRcb {
    fn name(&self) -> &str {
        "rcb"
    }

    fn partition(&mut self, grid: &Grid, loads: &[f64], parts: usize) -> Result<Vec<u32>> {
        // `kway_rcb` checks the grid, loads and part count itself.
        Ok(pbs::bisection::kway_rcb(grid, loads, parts)?)
    }
}
