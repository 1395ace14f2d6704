//! The vCores (positions and weights) and the cells they own: the state a balancer moves and
//! warm-starts from.

use crate::assign::{assign_on, Assignment};
use crate::error::{Error, Result};
use crate::grid::{Grid, Point};
use crate::metrics;
use crate::problem::Problem;
use crate::rng::SplitMix64;

/// vCores with their current assignment of boxes and their charges.
///
/// Invariant: after construction and after every balancer step, `owners()` is the assignment
/// of the current positions and weights, and `charges()` the charges of the loads it was
/// last given.
#[derive(Debug)]
pub struct VCores {
    grid: Grid,
    positions: Vec<Point>,
    weights: Vec<f64>,
    assignment: Assignment,
    charges: Vec<f64>,
    /// The group of every vCore ([`VCores::with_groups`]); empty when none was given.
    groups: Vec<u32>,
}

/// `clone_from` keeps the per-box arrays' memory (see [`Assignment`]'s).
impl Clone for VCores {
    fn clone(&self) -> VCores {
        let VCores { grid, positions, weights, assignment, charges, groups } = self;
        VCores {
            grid: *grid,
            positions: positions.clone(),
            weights: weights.clone(),
            assignment: assignment.clone(),
            charges: charges.clone(),
            groups: groups.clone(),
        }
    }

    // Every field named, so that a new one cannot be forgotten here.
    fn clone_from(&mut self, source: &VCores) {
        let VCores { grid, positions, weights, assignment, charges, groups } = self;
        *grid = source.grid;
        positions.clone_from(&source.positions);
        weights.clone_from(&source.weights);
        assignment.clone_from(&source.assignment);
        charges.clone_from(&source.charges);
        groups.clone_from(&source.groups);
    }
}

impl VCores {
    /// vCores at the given positions (clamped into the domain) with the given weights
    /// (all zero gives plain Voronoi cells), assigned against `problem`'s loads.
    pub fn new(problem: &Problem, positions: Vec<Point>, weights: Vec<f64>) -> Result<VCores> {
        if positions.len() != weights.len() {
            return Err(Error::VCoreCount { positions: positions.len(), weights: weights.len() });
        }
        if positions.len() != problem.vcores() {
            return Err(Error::Parameter {
                name: "positions",
                value: positions.len().to_string(),
                reason: "must give exactly one position per vCore of the problem",
            });
        }
        check_finite(&positions, &weights)?;
        let grid = *problem.grid();
        let positions = positions.into_iter().map(|p| grid.clamp(p)).collect();
        let mut vcores = VCores {
            grid,
            positions,
            weights,
            assignment: Assignment::default(),
            charges: Vec::new(),
            groups: Vec::new(),
        };
        vcores.reassign(problem);
        Ok(vcores)
    }

    /// `problem.vcores()` vCores at uniformly random positions drawn from `seed`, zero weights
    /// (the paper's starting point).
    pub fn random(problem: &Problem, seed: u64) -> VCores {
        let grid = problem.grid();
        let e = grid.extent();
        let mut rng = SplitMix64::new(seed);
        let positions = (0..problem.vcores())
            .map(|_| [rng.next_f64() * e[0], rng.next_f64() * e[1], rng.next_f64() * e[2]])
            .collect();
        VCores::new(problem, positions, vec![0.0; problem.vcores()]).expect("random positions are finite")
    }

    /// vCores at the centroids of the parts of `owners` (one part id below
    /// `problem.vcores()` per box), weights zero; a part with no box puts its vCore at the
    /// domain's centre.
    pub fn at_centroids(problem: &Problem, owners: &[u32]) -> Result<VCores> {
        let (positions, _) = centroids(problem, owners)?;
        VCores::new(problem, positions, vec![0.0; problem.vcores()])
    }

    /// vCores at the centroids of a k-way recursive coordinate bisection of `problem`'s loads
    /// ([`crate::bisection::kway_rcb`]), weights zero: compact, nearly balanced cells for a
    /// method to finish, usually in fewer steps and with a lower edge cut than from random
    /// positions (docs/peers.md).
    pub fn from_bisection(problem: &Problem) -> VCores {
        let owners = crate::bisection::kway_rcb(problem.grid(), problem.loads(), problem.vcores())
            .expect("a valid problem is a valid bisection");
        VCores::at_centroids(problem, &owners).expect("one valid part id per box")
    }

    /// New vCores at the centroids of a k-way recursive coordinate bisection of `problem`'s
    /// loads (weights zero, as [`VCores::from_bisection`]), each part taking the id of the cell
    /// of these vCores it overlaps most ([`metrics::match_labels`]), so that as few boxes as
    /// possible change owner and each vCore stays where its thread's data is. A start over for
    /// cells far from balance, which a balancer would take more steps to move back
    /// ([`crate::rebalance`]).
    ///
    /// With [groups](VCores::with_groups) of equal size (the vCores of each NUMA node), a
    /// second labelling keeps each group on one region: the bisection numbers its parts depth
    /// first, so each run of a group's size of consecutive ids is a compact region (a subtree
    /// of the bisection when the counts are powers of two); each run goes to the group whose
    /// old cells it overlaps most, and each of its parts to the vCore of that group whose old
    /// cell it overlaps most. It is taken when the first labelling leaves a group's region in
    /// pieces and it leaves fewer. The cells are the same either way; only who gets which
    /// changes.
    pub fn restarted_from_bisection(&self, problem: &Problem) -> VCores {
        let ids = self.bisection_ids(problem);
        let mut fresh = VCores::sized_to_parts(problem, &ids);
        fresh.groups = self.groups.clone();
        fresh
    }

    /// [`VCores::restarted_from_bisection`], and the same parts under the same ids as power
    /// cells with weights zero (as [`VCores::from_bisection`]): cells as large as their
    /// neighbours', better balanced than the sized ones on some maps.
    pub(crate) fn restarts_from_bisection(&self, problem: &Problem) -> [VCores; 2] {
        let ids = self.bisection_ids(problem);
        let mut sized = VCores::sized_to_parts(problem, &ids);
        let mut plain = VCores::at_centroids(problem, &ids).expect("one id below the vCore count per box");
        sized.groups = self.groups.clone();
        plain.groups = self.groups.clone();
        [sized, plain]
    }

    /// A k-way recursive coordinate bisection of `problem`'s loads, each part under the id of
    /// the cell of these vCores it overlaps most (and, with equal groups, each group's parts
    /// on one region where that leaves fewer groups in pieces).
    fn bisection_ids(&self, problem: &Problem) -> Vec<u32> {
        self.check(problem);
        let n = self.len();
        let parts = crate::bisection::kway_rcb(problem.grid(), problem.loads(), n)
            .expect("a valid problem is a valid bisection");
        let mut ids =
            metrics::match_labels(self.owners(), &parts, n).expect("both give one id below the vCore count per box");
        if let Some(members) = self.equal_groups() {
            let mut group_of = vec![0u32; n];
            for (g, vs) in members.iter().enumerate() {
                vs.iter().for_each(|&v| group_of[v as usize] = g as u32);
            }
            let split = |ids: &[u32]| {
                let regions: Vec<u32> = ids.iter().map(|&v| group_of[v as usize]).collect();
                metrics::disconnected_parts(problem.grid(), &regions, members.len())
            };
            let split_now = split(&ids);
            if split_now > 0 {
                let grouped = self.grouped_ids(&parts, &members, &group_of);
                if split(&grouped) < split_now {
                    ids = grouped;
                }
            }
        }
        ids
    }

    /// vCores at the centroids of the parts of `owners`, each weighted as the squared radius of
    /// a ball of its part's size, so that the power cells come out about the parts' sizes
    /// (tangent balls' power cells meet where the balls touch). With weights zero a small part
    /// among large ones gets a cell as large as theirs: a restart on md's contracting load
    /// stood at 1.6–1.8 × the bound that way, 1.3–1.5 × with these weights (docs/design-notes.md,
    /// "Starting over").
    pub(crate) fn sized_to_parts(problem: &Problem, owners: &[u32]) -> VCores {
        let (positions, boxes) = centroids(problem, owners).expect("one valid part id per box");
        let dims = problem.grid().dims().iter().filter(|&&d| d > 1).count().max(1);
        // The volume of a ball of radius r is c r^d.
        let c = [2.0, std::f64::consts::PI, 4.0 / 3.0 * std::f64::consts::PI][dims - 1];
        // r² = (v / c)^(2 / d); in 2D the quotient itself, not taken through `powf`, whose
        // precision Rust leaves unspecified.
        let weights = boxes.iter().map(|&v| if dims == 2 { v / c } else { (v / c).powf(2.0 / dims as f64) }).collect();
        VCores::new(problem, positions, weights).expect("centroids and ball sizes are finite")
    }

    /// These vCores with a group for each (`groups[i]` for vCore `i`: the NUMA node of its
    /// thread, say), which a restart keeps on one region each
    /// ([`VCores::restarted_from_bisection`]). An error names a count that is not one per vCore.
    ///
    /// ```
    /// let grid = pbs::Grid::new(16, 16)?;
    /// let loads = vec![1.0; 256];
    /// let problem = pbs::Problem::new(grid, &loads, 4)?;
    /// let vcores = pbs::VCores::from_bisection(&problem).with_groups(&[0, 0, 1, 1])?;
    /// assert_eq!(vcores.groups(), Some(&[0, 0, 1, 1][..]));
    /// # Ok::<(), pbs::Error>(())
    /// ```
    pub fn with_groups(mut self, groups: &[usize]) -> Result<VCores> {
        if groups.len() != self.len() {
            return Err(Error::Parameter {
                name: "groups",
                value: format!("{} groups", groups.len()),
                reason: "must give exactly one group per vCore",
            });
        }
        self.groups = groups
            .iter()
            .map(|&g| {
                u32::try_from(g).map_err(|_| Error::Parameter {
                    name: "groups",
                    value: g.to_string(),
                    reason: "a group id must fit in 32 bits",
                })
            })
            .collect::<Result<_>>()?;
        Ok(self)
    }

    /// The group of every vCore, if [`VCores::with_groups`] gave them.
    pub fn groups(&self) -> Option<&[u32]> {
        (!self.groups.is_empty()).then_some(&self.groups[..])
    }

    /// The vCores of each group, in id order, when there are two groups or more and all have
    /// the same size (a group-aware restart needs runs of parts of one size).
    fn equal_groups(&self) -> Option<Vec<Vec<u32>>> {
        let mut labels = self.groups.clone();
        labels.sort_unstable();
        labels.dedup();
        if labels.len() < 2 {
            return None;
        }
        let mut members = vec![Vec::new(); labels.len()];
        for (v, g) in self.groups.iter().enumerate() {
            members[labels.binary_search(g).expect("every group is a label")].push(v as u32);
        }
        let size = members[0].len();
        members.iter().all(|m| m.len() == size).then_some(members)
    }

    /// The vCore of every box for the bisection's `parts` when `members` (the vCores of each
    /// group, all groups of one size; `group_of` each vCore's index among them) must each keep
    /// one run of consecutive part ids.
    fn grouped_ids(&self, parts: &[u32], members: &[Vec<u32>], group_of: &[u32]) -> Vec<u32> {
        let (groups, size) = (members.len(), members[0].len());
        let mut rank = vec![0u32; self.len()];
        for vs in members {
            vs.iter().enumerate().for_each(|(r, &v)| rank[v as usize] = r as u32);
        }
        let owners = self.owners();
        let old_group: Vec<u32> = owners.iter().map(|&o| group_of[o as usize]).collect();
        let run: Vec<u32> = parts.iter().map(|&p| p / size as u32).collect();
        let group_of_run = metrics::matched_ids(&old_group, &run, groups).expect("ids below the group count");
        // Per run, its boxes that its group owned: (the owner's rank in the group, the part's).
        let mut kept: Vec<(Vec<u32>, Vec<u32>)> = vec![Default::default(); groups];
        for k in 0..parts.len() {
            let r = run[k] as usize;
            if old_group[k] == group_of_run[r] {
                kept[r].0.push(rank[owners[k] as usize]);
                kept[r].1.push(parts[k] % size as u32);
            }
        }
        let mut vcore_of_part = vec![0u32; self.len()];
        for (r, (old, new)) in kept.iter().enumerate() {
            let ids = metrics::matched_ids(old, new, size).expect("ranks below the group size");
            let vs = &members[group_of_run[r] as usize];
            for (p, &id) in ids.iter().enumerate() {
                vcore_of_part[r * size + p] = vs[id as usize];
            }
        }
        parts.iter().map(|&p| vcore_of_part[p as usize]).collect()
    }

    /// Number of vCores.
    pub fn len(&self) -> usize {
        self.positions.len()
    }
    /// Always false: a problem has at least one vCore.
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }
    /// The grid these cells cover.
    pub fn grid(&self) -> &Grid {
        &self.grid
    }
    /// vCore positions, in box units.
    pub fn positions(&self) -> &[Point] {
        &self.positions
    }
    /// vCore weights (power-cell offsets, in box² units).
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }
    /// Owner vCore of every box.
    pub fn owners(&self) -> &[u32] {
        &self.assignment.owner
    }
    /// The full assignment (owner, second best, gaps).
    pub fn assignment(&self) -> &Assignment {
        &self.assignment
    }
    /// Charge of every vCore.
    pub fn charges(&self) -> &[f64] {
        &self.charges
    }
    /// `max_i Q_i / m`.
    pub fn max_avg(&self) -> f64 {
        metrics::max_avg(&self.charges)
    }

    /// Moves vCores and changes weights, then reassigns. Positions are clamped into the domain.
    ///
    /// # Errors
    /// [`Error::InvalidVCore`] when `f` leaves a position or a weight that is not a finite
    /// number (a power distance with one is no distance: the boxes would go to whichever vCore
    /// a comparison with NaN happens to favour, or to none); the vCores are then as they were
    /// before the call.
    ///
    /// # Panics
    /// If `problem` has another grid or vCore count than these vCores (as [`VCores::reassign`]).
    pub fn update(&mut self, problem: &Problem, f: impl FnOnce(&mut [Point], &mut [f64])) -> Result<()> {
        self.check(problem);
        // A copy of a few numbers per vCore, against a reassignment that visits every box.
        let before = (self.positions.clone(), self.weights.clone());
        f(&mut self.positions, &mut self.weights);
        if let Err(e) = check_finite(&self.positions, &self.weights) {
            (self.positions, self.weights) = before;
            return Err(e);
        }
        for p in &mut self.positions {
            *p = self.grid.clamp(*p);
        }
        self.reassign(problem);
        Ok(())
    }

    /// Puts the vCores at `positions` with `weights` (a state a balancer kept, finite as every
    /// state it had), then reassigns.
    pub(crate) fn place(&mut self, problem: &Problem, positions: &[Point], weights: &[f64]) {
        self.check(problem);
        for (p, q) in self.positions.iter_mut().zip(positions) {
            *p = self.grid.clamp(*q);
        }
        self.weights.copy_from_slice(weights);
        self.reassign(problem);
    }

    /// Replaces the assignment with one computed elsewhere for the current positions and
    /// weights (a balancer's trial), with its `charges` (from [`metrics::charges`] on its
    /// owners and `problem`'s loads: the trial had them to judge it).
    pub(crate) fn accept(
        &mut self,
        problem: &Problem,
        weights: &[f64],
        assignment: &mut Assignment,
        charges: Vec<f64>,
    ) {
        self.check(problem);
        debug_assert_eq!(charges, metrics::charges(&assignment.owner, problem.loads(), self.len()));
        self.weights.copy_from_slice(weights);
        std::mem::swap(&mut self.assignment, assignment);
        self.charges = charges;
    }

    /// Recomputes the assignment from positions and weights, then the charges.
    ///
    /// # Panics
    /// If `problem` has another grid or vCore count than these vCores: a program that pairs
    /// vCores with another problem's loads, which no input can cause.
    pub fn reassign(&mut self, problem: &Problem) {
        self.check(problem);
        assign_on(problem.workers(), &self.grid, &self.positions, &self.weights, &mut self.assignment);
        self.recharge(problem);
    }

    /// Recomputes the charges for new loads on the same grid. Owners depend only on positions
    /// and weights, so a change of loads needs no reassignment: this is the warm start.
    ///
    /// # Panics
    /// As [`VCores::reassign`].
    pub fn recharge(&mut self, problem: &Problem) {
        self.check(problem);
        self.charges = metrics::charges(&self.assignment.owner, problem.loads(), self.len());
    }

    fn check(&self, problem: &Problem) {
        assert_eq!(*problem.grid(), self.grid, "vcores and problem must share a grid");
        assert_eq!(problem.vcores(), self.len(), "vcores and problem must have as many vCores");
    }
}

/// An error naming the first vCore whose position or weight is not a finite number.
fn check_finite(positions: &[Point], weights: &[f64]) -> Result<()> {
    for (index, p) in positions.iter().enumerate() {
        if let Some(&value) = p.iter().find(|v| !v.is_finite()) {
            return Err(Error::InvalidVCore { index, what: "position", value });
        }
    }
    match weights.iter().enumerate().find(|(_, w)| !w.is_finite()) {
        Some((index, &value)) => Err(Error::InvalidVCore { index, what: "weight", value }),
        None => Ok(()),
    }
}

/// The centroid of each part of `owners` (one part id below `problem.vcores()` per box; the
/// domain's centre for a part with no box) and its number of boxes.
fn centroids(problem: &Problem, owners: &[u32]) -> Result<(Vec<Point>, Vec<f64>)> {
    let n = problem.vcores();
    if owners.len() != problem.grid().len() || owners.iter().any(|&p| p as usize >= n) {
        return Err(Error::Parameter {
            name: "owners",
            value: format!("{} part ids", owners.len()),
            reason: "must give one part id below the vCore count per box",
        });
    }
    let mut sum = vec![[0.0f64; 4]; n];
    for (k, &p) in owners.iter().enumerate() {
        let c = problem.grid().centre(k);
        let s = &mut sum[p as usize];
        (0..3).for_each(|a| s[a] += c[a]);
        s[3] += 1.0;
    }
    let middle = problem.grid().extent().map(|e| e / 2.0);
    let positions =
        sum.iter().map(|s| if s[3] > 0.0 { [s[0] / s[3], s[1] / s[3], s[2] / s[3]] } else { middle }).collect();
    Ok((positions, sum.iter().map(|s| s[3]).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_non_finite_vcores() {
        let g = Grid::new(4, 4).unwrap();
        let loads = [1.0; 16];
        let p = Problem::new(g, &loads, 2).unwrap();
        let e = VCores::new(&p, vec![[f64::NAN, 1.0, 0.5], [1.0, 1.0, 0.5]], vec![0.0; 2]).unwrap_err();
        assert!(matches!(e, Error::InvalidVCore { index: 0, what: "position", value } if value.is_nan()));
        let e = VCores::new(&p, vec![[1.0; 3]; 2], vec![0.0, f64::INFINITY]).unwrap_err();
        assert!(matches!(e, Error::InvalidVCore { index: 1, what: "weight", .. }));
        assert!(matches!(VCores::new(&p, vec![[1.0; 3]; 2], vec![0.0]), Err(Error::VCoreCount { .. })));
        let e = VCores::new(&p, vec![[1.0; 3]; 3], vec![0.0; 3]).unwrap_err();
        assert!(matches!(e, Error::Parameter { name: "positions", ref value, .. } if value == "3"), "{e}");
    }

    /// Groups are one per vCore, each id within 32 bits; an error names the count or the id.
    #[test]
    fn groups_are_one_per_vcore_and_fit_in_32_bits() {
        let p = Problem::new(Grid::new(4, 4).unwrap(), &[1.0; 16], 2).unwrap();
        let e = VCores::from_bisection(&p).with_groups(&[0]).unwrap_err();
        assert!(matches!(e, Error::Parameter { name: "groups", ref value, .. } if value == "1 groups"), "{e}");
        let big = u32::MAX as usize + 1;
        let e = VCores::from_bisection(&p).with_groups(&[0, big]).unwrap_err();
        assert!(matches!(e, Error::Parameter { name: "groups", ref value, .. } if *value == big.to_string()), "{e}");
        let v = VCores::from_bisection(&p).with_groups(&[u32::MAX as usize, 0]).unwrap();
        assert_eq!(v.groups(), Some(&[u32::MAX, 0][..]));
    }

    /// A move to a position or weight that is not finite is refused and changes nothing: with
    /// every weight at −∞ it used to leave boxes owned by no vCore and panicked counting the
    /// charges; with one NaN weight it gave that vCore's boxes away in silence.
    #[test]
    fn an_update_to_non_finite_values_is_refused_and_changes_nothing() {
        let g = Grid::new(8, 8).unwrap();
        let loads = [1.0; 64];
        let p = Problem::new(g, &loads, 4).unwrap();
        let mut v = VCores::random(&p, 1);
        let before = v.clone();
        let e = v.update(&p, |_, w| w.iter_mut().for_each(|w| *w = f64::NEG_INFINITY)).unwrap_err();
        assert!(matches!(e, Error::InvalidVCore { index: 0, what: "weight", value } if value == f64::NEG_INFINITY));
        let e = v.update(&p, |x, w| (x[1][0], w[0]) = (5.0, f64::NAN)).unwrap_err();
        assert!(e.to_string().contains("vCore 0 has a non-finite weight: NaN"), "{e}");
        let e = v.update(&p, |x, _| x[2][1] = f64::INFINITY).unwrap_err();
        assert!(matches!(e, Error::InvalidVCore { index: 2, what: "position", .. }));
        assert_eq!((v.positions(), v.weights(), v.owners()), (before.positions(), before.weights(), before.owners()));
        // A finite move is taken, clamped into the domain.
        v.update(&p, |x, w| (x[3], w[3]) = ([-5.0, 100.0, 0.5], 2.0)).unwrap();
        assert_eq!((v.positions()[3], v.weights()[3]), (g.clamp([-5.0, 100.0, 0.5]), 2.0));
        assert!(v.positions()[3][0] < 0.01 && v.positions()[3][1] > 7.99);
    }

    /// A copy made into another vCores of the same grid equals a fresh clone and keeps the
    /// memory it had.
    #[test]
    fn a_copy_into_other_vcores_keeps_their_memory() {
        let g = Grid::new(12, 10).unwrap();
        let loads: Vec<f64> = (0..g.len()).map(|k| 1.0 + (k % 7) as f64).collect();
        let p = Problem::new(g, &loads, 5).unwrap();
        let (a, mut b) = (VCores::random(&p, 1), VCores::random(&p, 2));
        assert_ne!(a.owners(), b.owners());
        let before = (b.owners().as_ptr(), b.assignment().gap.as_ptr());
        b.clone_from(&a);
        assert_eq!(
            (b.owners(), b.positions(), b.weights(), b.charges()),
            (a.owners(), a.positions(), a.weights(), a.charges())
        );
        assert_eq!(b.assignment(), a.clone().assignment());
        assert_eq!(before, (b.owners().as_ptr(), b.assignment().gap.as_ptr()), "the same memory");
    }

    #[test]
    fn random_cells_are_reproducible_and_cover_the_grid() {
        let g = Grid::new(10, 10).unwrap();
        let loads = [1.0; 100];
        let p = Problem::new(g, &loads, 5).unwrap();
        let a = VCores::random(&p, 3);
        let b = VCores::random(&p, 3);
        assert_eq!(a.positions(), b.positions());
        assert_eq!(a.owners(), b.owners());
        // Every box has an owner among the 5 vCores, every vCore owns a box, and the charges
        // are the owners' loads.
        assert_eq!(a.owners().len(), 100);
        assert!(a.owners().iter().all(|&o| o < 5), "{:?}", a.owners());
        let mut counts = [0.0; 5];
        a.owners().iter().for_each(|&o| counts[o as usize] += 1.0);
        assert!(counts.iter().all(|&c| c > 0.0), "every vCore owns a box: {counts:?}");
        assert_eq!(a.charges(), counts);
        assert!(a.positions().iter().all(|p| (0.0..=10.0).contains(&p[0]) && (0.0..=10.0).contains(&p[1])));
    }

    #[test]
    fn centroid_starts_sit_in_their_parts_and_bad_owners_are_refused() {
        let g = Grid::new(8, 4).unwrap();
        let loads = vec![1.0; 32];
        let p = Problem::new(g, &loads, 2).unwrap();
        let v = VCores::at_centroids(&p, &(0..32).map(|k| u32::from(k % 8 >= 4)).collect::<Vec<_>>()).unwrap();
        assert_eq!(v.positions()[0][..2], [2.0, 2.0]);
        assert_eq!(v.positions()[1][..2], [6.0, 2.0]);
        let empty = VCores::at_centroids(&p, &[0; 32]).unwrap();
        assert_eq!(empty.positions()[1], [4.0, 2.0, 0.5], "a part with no box: the domain's centre");
        assert!(VCores::at_centroids(&p, &[0; 31]).is_err());
        assert!(VCores::at_centroids(&p, &[2; 32]).is_err());
        // The bisection start of a uniform map is already balanced: two 4×4 halves.
        let b = VCores::from_bisection(&p);
        assert_eq!(b.max_avg(), 1.0);
    }

    /// Two nodes whose cells alternate along a row (A B A B): the plain restart keeps every
    /// box on its vCore, so each node keeps two separate regions; with the nodes as groups,
    /// each node gets one half of the row.
    #[test]
    fn a_restart_with_groups_gives_each_group_one_region() {
        let g = Grid::new(8, 1).unwrap();
        let p = Problem::new(g, &[1.0; 8], 4).unwrap();
        // Columns 0-1: vCore 0, 2-3: vCore 2, 4-5: vCore 1, 6-7: vCore 3; node 0 = {0, 1}.
        let v = VCores::at_centroids(&p, &[0, 0, 2, 2, 1, 1, 3, 3]).unwrap();
        let plain = v.restarted_from_bisection(&p);
        assert_eq!(plain.owners(), [0, 0, 2, 2, 1, 1, 3, 3]);
        assert_eq!(plain.groups(), None);
        let grouped = v.with_groups(&[0, 0, 1, 1]).unwrap().restarted_from_bisection(&p);
        let nodes: Vec<u32> = grouped.owners().iter().map(|&o| grouped.groups().unwrap()[o as usize]).collect();
        assert_eq!(nodes, [0, 0, 0, 0, 1, 1, 1, 1]);
        // Within each node, the vCore whose columns stay in its node's half keeps them (0 and
        // 3), the other takes the rest; the same cells as the plain restart.
        assert_eq!(grouped.owners(), [0, 0, 1, 1, 2, 2, 3, 3]);
        assert_eq!(grouped.max_avg(), plain.max_avg());
    }

    #[test]
    fn groups_must_be_one_per_vcore_and_unequal_groups_restart_as_without() {
        let g = Grid::new(8, 1).unwrap();
        let p = Problem::new(g, &[1.0; 8], 4).unwrap();
        let v = VCores::at_centroids(&p, &[0, 0, 2, 2, 1, 1, 3, 3]).unwrap();
        let e = v.clone().with_groups(&[0, 1]).unwrap_err();
        assert!(matches!(e, Error::Parameter { name: "groups", .. }), "{e}");
        // Three and one: no runs of one size, so the plain matching (and the groups kept).
        let uneven = v.clone().with_groups(&[0, 0, 0, 1]).unwrap().restarted_from_bisection(&p);
        assert_eq!(uneven.owners(), v.restarted_from_bisection(&p).owners());
        assert_eq!(uneven.groups(), Some(&[0, 0, 0, 1][..]));
    }

    /// Random positions are drawn over the whole domain along every axis.
    #[test]
    fn random_positions_spread_over_every_axis() {
        let g = Grid::new_3d(8, 6, 4).unwrap();
        let p = Problem::new(g, &[1.0; 192], 64).unwrap();
        let v = VCores::random(&p, 1);
        for (a, e) in g.extent().into_iter().enumerate() {
            let (low, high) = v.positions().iter().fold((f64::MAX, 0.0f64), |(l, h), x| (l.min(x[a]), h.max(x[a])));
            assert!(low < e / 4.0 && high > 3.0 * e / 4.0 && high < e, "axis {a}: {low}..{high} of {e}");
        }
    }

    /// Cells sized to parts: each vCore at its part's centroid, weighted as the squared radius
    /// of a ball of its part's box count in the grid's dimension.
    #[test]
    fn sized_cells_weigh_each_vcore_as_a_ball_of_its_parts_size() {
        use std::f64::consts::PI;
        let close = |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-12 * y.abs());
        // 1D: a segment of 12 boxes and one of 4; the "ball" of length v has r = v / 2.
        let g = Grid::new(16, 1).unwrap();
        let p = Problem::new(g, &[1.0; 16], 2).unwrap();
        let v = VCores::sized_to_parts(&p, &(0..16).map(|k| u32::from(k >= 12)).collect::<Vec<_>>());
        assert!(close(v.weights(), &[36.0, 4.0]), "{:?}", v.weights());
        assert_eq!((v.positions()[0][0], v.positions()[1][0]), (6.0, 14.0));
        // 2D: 12 columns and 4 of 16 rows; πr² = v.
        let g = Grid::new(16, 16).unwrap();
        let p = Problem::new(g, &[1.0; 256], 2).unwrap();
        let v = VCores::sized_to_parts(&p, &(0..256).map(|k| u32::from(k % 16 >= 12)).collect::<Vec<_>>());
        assert!(close(v.weights(), &[192.0 / PI, 64.0 / PI]), "{:?}", v.weights());
        assert_eq!(v.positions()[..2].iter().map(|x| [x[0], x[1]]).collect::<Vec<_>>(), [[6.0, 8.0], [14.0, 8.0]]);
        // 3D: halves of 32 boxes; 4/3 πr³ = v.
        let g = Grid::new_3d(4, 4, 4).unwrap();
        let p = Problem::new(g, &[1.0; 64], 2).unwrap();
        let v = VCores::sized_to_parts(&p, &(0..64).map(|k| u32::from(k % 4 >= 2)).collect::<Vec<_>>());
        assert_eq!(v.positions()[..2], [[1.0, 2.0, 2.0], [3.0, 2.0, 2.0]]);
        let r2 = (32.0 / (4.0 / 3.0 * PI)).powf(2.0 / 3.0);
        assert!(close(v.weights(), &[r2, r2]), "{:?}", v.weights());
    }

    /// The accessors say what the state holds: the assignment's owners, the charges' max_avg.
    #[test]
    fn the_accessors_read_the_state() {
        let g = Grid::new(8, 8).unwrap();
        let loads: Vec<f64> = (0..64).map(|k| 1.0 + (k % 8) as f64).collect();
        let p = Problem::new(g, &loads, 4).unwrap();
        let v = VCores::random(&p, 7);
        assert!(!v.is_empty());
        assert_eq!((v.len(), v.grid()), (4, &g));
        assert_eq!(v.assignment().owner, v.owners());
        let mut fresh = Assignment::default();
        crate::assign::assign(&g, v.positions(), v.weights(), &mut fresh);
        assert_eq!(v.assignment(), &fresh);
        assert_eq!(v.max_avg(), metrics::max_avg(v.charges()));
        assert!(v.max_avg() > 1.0, "random cells of an uneven map are not balanced");
    }

    /// A kept state put back is that state assigned anew; a trial accepted is taken whole.
    #[test]
    fn a_placed_state_is_reassigned_and_an_accepted_trial_taken_whole() {
        let g = Grid::new(10, 6).unwrap();
        let loads: Vec<f64> = (0..60).map(|k| 1.0 + (k % 5) as f64).collect();
        let p = Problem::new(g, &loads, 3).unwrap();
        let (mut v, other) = (VCores::random(&p, 1), VCores::random(&p, 2));
        let mut moved = other.positions().to_vec();
        moved[0][0] = 50.0; // clamped, as in a fresh start
        v.place(&p, &moved, &[0.0, 1.5, 0.0]);
        let fresh = VCores::new(&p, moved, vec![0.0, 1.5, 0.0]).unwrap();
        assert_eq!((v.positions(), v.weights(), v.owners()), (fresh.positions(), fresh.weights(), fresh.owners()));
        assert_eq!(v.charges(), fresh.charges());
        let mut v = VCores::random(&p, 1);
        let mut trial = other.assignment().clone();
        v.accept(&p, other.weights(), &mut trial, other.charges().to_vec());
        assert_eq!((v.owners(), v.charges(), v.weights()), (other.owners(), other.charges(), other.weights()));
        assert_eq!(v.assignment(), other.assignment());
    }

    #[test]
    #[should_panic(expected = "vcores and problem must share a grid")]
    fn vcores_refuse_another_grids_problem() {
        let p = Problem::new(Grid::new(4, 4).unwrap(), &[1.0; 16], 2).unwrap();
        let mut v = VCores::random(&p, 1);
        v.recharge(&Problem::new(Grid::new(8, 2).unwrap(), &[1.0; 16], 2).unwrap());
    }

    #[test]
    #[should_panic(expected = "vcores and problem must have as many vCores")]
    fn vcores_refuse_a_problem_with_another_vcore_count() {
        let p = Problem::new(Grid::new(4, 4).unwrap(), &[1.0; 16], 2).unwrap();
        let mut v = VCores::random(&p, 1);
        v.reassign(&Problem::new(Grid::new(4, 4).unwrap(), &[1.0; 16], 3).unwrap());
    }

    /// Two groups of four whose cells are mixed along a row: each group gets one half, and
    /// within it each vCore whose old columns lie in that half keeps them (the one whose
    /// columns are in the other half takes what is left).
    #[test]
    fn a_grouped_restart_keeps_each_vcores_columns_within_its_groups_half() {
        let g = Grid::new(16, 1).unwrap();
        let p = Problem::new(g, &[1.0; 16], 8).unwrap();
        let pairs = |ids: [u32; 8]| -> Vec<u32> { (0..16).map(|k| ids[k / 2]).collect() };
        for (old, new) in
            [([0, 1, 4, 2, 5, 3, 6, 7], [0, 1, 3, 2, 5, 4, 6, 7]), ([2, 0, 4, 1, 3, 5, 7, 6], [2, 0, 3, 1, 4, 5, 7, 6])]
        {
            let v = VCores::at_centroids(&p, &pairs(old)).unwrap().with_groups(&[0, 0, 0, 0, 1, 1, 1, 1]).unwrap();
            assert_eq!(v.restarted_from_bisection(&p).owners(), pairs(new), "from {old:?}");
        }
    }
}
