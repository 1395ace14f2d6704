//! A validated balancing problem: a grid, one load per box, and a number of vCores.

use crate::assign::Workers;
use crate::error::{Error, Result};
use crate::grid::Grid;
use crate::metrics;
use std::borrow::Cow;

/// Grid + loads + vCore count, checked once so that nothing downstream meets a NaN.
///
/// Only ratios of loads matter to the balancer, but its sums and squares overflow (or
/// underflow) at extreme scales: loads whose largest is beyond 2^±[`SCALE_LIMIT`] are
/// scaled by a power of two to bring it into `[1, 2)`. The scaling is exact, so loads scaled
/// by any power of two balance to the same owners; [`Problem::loads`], [`Problem::total`] and
/// the charges computed from them are then in the scaled unit ([`Problem::scale`]).
///
/// ```
/// use pbs::{Grid, Problem};
/// let grid = Grid::new(4, 2).unwrap();
/// let loads = [1.0, 0.0, 2.0, 1.0, 0.5, 0.5, 0.0, 3.0];
/// let p = Problem::new(grid, &loads, 2).unwrap();
/// assert_eq!(p.total(), 8.0);
/// assert_eq!(p.mean(), 4.0);
/// assert!(Problem::new(grid, &[f64::NAN; 8], 2).is_err());
/// ```
#[derive(Clone)]
pub struct Problem<'a> {
    grid: Grid,
    loads: std::borrow::Cow<'a, [f64]>,
    scale: f64,
    vcores: usize,
    total: f64,
    max_load: f64,
    workers: Option<&'a dyn Workers>,
}

impl std::fmt::Debug for Problem<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Problem")
            .field("grid", &self.grid)
            .field("loads", &self.loads)
            .field("vcores", &self.vcores)
            .field("total", &self.total)
            .field("max_load", &self.max_load)
            .field("workers", &self.workers.map(|w| w.count()))
            .finish()
    }
}

impl<'a> Problem<'a> {
    /// Validates `loads` against `grid` (one finite, non-negative load per box) and the vCore
    /// count (at least one, at most one per box).
    pub fn new(grid: Grid, loads: &'a [f64], vcores: usize) -> Result<Self> {
        Problem::checked(grid, std::borrow::Cow::Borrowed(loads), vcores)
    }

    /// [`Problem::new`] on loads it keeps: no copy, now or in [`Problem::into_owned`] (an
    /// executor hands the problem to its balancer thread).
    pub fn from_vec(grid: Grid, loads: Vec<f64>, vcores: usize) -> Result<Problem<'static>> {
        Problem::checked(grid, std::borrow::Cow::Owned(loads), vcores)
    }

    fn checked(grid: Grid, loads: std::borrow::Cow<'a, [f64]>, vcores: usize) -> Result<Self> {
        validate_count(&grid, &loads)?;
        // Eight lanes, as in `metrics::ordered_sum`: no compare waits on the one before.
        let mut lanes = [0.0f64; 8];
        let mut good = true;
        let mut take = |lane: &mut f64, q: f64| {
            good &= is_load(q);
            *lane = if q > *lane { q } else { *lane };
        };
        let mut chunks = loads.chunks_exact(8);
        for c in &mut chunks {
            lanes.iter_mut().zip(c).for_each(|(lane, &q)| take(lane, q));
        }
        lanes.iter_mut().zip(chunks.remainder()).for_each(|(lane, &q)| take(lane, q));
        if !good {
            // Which one, named: the slow path, taken once.
            validate_loads(&grid, &loads)?;
        }
        let max_load = lanes.into_iter().fold(0.0, f64::max);
        let total = metrics::ordered_sum(&loads);
        if vcores == 0 {
            return Err(Error::NoVCores);
        }
        if vcores > grid.len() {
            return Err(Error::TooManyVCores { vcores, boxes: grid.len() });
        }
        let scale = scale_for(max_load);
        if scale == 1.0 {
            return Ok(Problem { grid, loads, scale: 1.0, vcores, total, max_load, workers: None });
        }
        let scaled: Vec<f64> = loads.iter().map(|q| q * scale).collect();
        let total = metrics::ordered_sum(&scaled);
        Ok(Problem {
            grid,
            loads: std::borrow::Cow::Owned(scaled),
            scale,
            vcores,
            total,
            max_load: max_load * scale,
            workers: None,
        })
    }

    /// The same problem, with threads its assignments may share (see
    /// [`crate::assign::assign_on`]): a balancer's result does not change, only how fast it
    /// comes.
    pub fn with_workers(self, workers: &'a dyn Workers) -> Self {
        Problem { workers: Some(workers), ..self }
    }

    /// The same problem owning its loads (and without workers), to keep beyond the loads'
    /// borrow: an executor balancing in its threads' idle time holds one across iterations.
    pub fn into_owned(self) -> Problem<'static> {
        Problem { loads: std::borrow::Cow::Owned(self.loads.into_owned()), workers: None, ..self }
    }

    /// The threads assignments may share, if any.
    pub fn workers(&self) -> Option<&'a dyn Workers> {
        self.workers
    }

    /// The grid.
    pub fn grid(&self) -> &Grid {
        &self.grid
    }
    /// One load per box (scaled by [`Problem::scale`]).
    pub fn loads(&self) -> &[f64] {
        &self.loads
    }
    /// The power of two the loads given were multiplied by (1 unless their largest was
    /// beyond 2^±[`SCALE_LIMIT`]).
    pub fn scale(&self) -> f64 {
        self.scale
    }
    /// Number of vCores.
    pub fn vcores(&self) -> usize {
        self.vcores
    }
    /// Sum of all loads.
    pub fn total(&self) -> f64 {
        self.total
    }
    /// Mean charge per vCore, `m = total / N`.
    pub fn mean(&self) -> f64 {
        self.total / self.vcores as f64
    }
    /// Heaviest single box.
    pub fn max_load(&self) -> f64 {
        self.max_load
    }
    /// Lower bound of `max_avg` for this grid: `max(1, max_k q_k / m)`.
    pub fn lower_bound(&self) -> f64 {
        metrics::lower_bound_from(self.max_load, self.mean())
    }
}

/// Loads whose largest lies beyond `2^±SCALE_LIMIT` are rescaled (see [`Problem`]): far
/// from where sums of 2³² loads or squared charges overflow or lose precision to subnormals.
pub const SCALE_LIMIT: i32 = 100;

/// The power of two [`Problem::new`] multiplies loads by when their largest is `max_load`: 1
/// within `2^±SCALE_LIMIT`, else the one that brings it into `[1, 2)`.
fn scale_for(max_load: f64) -> f64 {
    let exponent = if max_load > 0.0 { floor_log2(max_load) } else { 0 };
    if exponent.abs() <= SCALE_LIMIT {
        return 1.0;
    }
    // Clamped: 2^1074 (for a largest load among the subnormals) is not a float.
    power_of_two((-exponent).clamp(-1000, 1000))
}

/// `floor(log2(x))` for a positive `x`, read from its bits. `log2` and `powi` would do, but
/// Rust leaves their precision unspecified (Miri varies it from call to call), and the scale
/// must be the same power of two wherever the same loads come in.
fn floor_log2(x: f64) -> i32 {
    let bits = x.to_bits();
    match ((bits >> 52) & 0x7ff) as i32 {
        // Subnormal: `bits · 2^-1074`, whose highest set bit is `63 - leading_zeros`.
        0 => -1011 - bits.leading_zeros() as i32,
        biased => biased - 1023,
    }
}

/// `2^k` for `-1022 ≤ k ≤ 1023` (a normal float), from its bits.
fn power_of_two(k: i32) -> f64 {
    debug_assert!((-1022..=1023).contains(&k));
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// `loads` rescaled as [`Problem::new`] rescales them, so that their sums stay finite and
/// their ratios exact; borrowed where no scaling is needed. For the functions that sum loads
/// they have checked (finite, ≥ 0) without building a [`Problem`].
pub(crate) fn rescaled_loads(loads: &[f64]) -> Cow<'_, [f64]> {
    let scale = scale_for(loads.iter().copied().fold(0.0, f64::max));
    if scale == 1.0 {
        Cow::Borrowed(loads)
    } else {
        Cow::Owned(loads.iter().map(|q| q * scale).collect())
    }
}

/// [`rescaled_loads`] for the loads of several phases: all by the same power of two (the
/// largest load's), so that the phases stay comparable.
pub(crate) fn rescaled_phases(phases: &[Vec<f64>]) -> Cow<'_, [Vec<f64>]> {
    let scale = scale_for(phases.iter().flatten().copied().fold(0.0, f64::max));
    if scale == 1.0 {
        Cow::Borrowed(phases)
    } else {
        Cow::Owned(phases.iter().map(|l| l.iter().map(|q| q * scale).collect()).collect())
    }
}

/// Checks that `loads` has one finite, non-negative entry per box of `grid`.
pub fn validate_loads(grid: &Grid, loads: &[f64]) -> Result<()> {
    validate_count(grid, loads)?;
    match loads.iter().enumerate().find(|(_, &q)| !is_load(q)) {
        Some((index, &value)) => Err(invalid_load(grid, index, value)),
        None => Ok(()),
    }
}

/// A load is finite and ≥ 0 (a NaN fails both of the range's compares).
fn is_load(q: f64) -> bool {
    (0.0..=f64::MAX).contains(&q)
}

fn validate_count(grid: &Grid, loads: &[f64]) -> Result<()> {
    if loads.len() != grid.len() {
        return Err(Error::LoadCount { expected: grid.len(), got: loads.len() });
    }
    Ok(())
}

fn invalid_load(grid: &Grid, index: usize, value: f64) -> Error {
    let [x, y, z] = grid.coords(index);
    Error::InvalidLoad { index, x, y, z, value }
}

/// Checks that `owners` maps every box of `grid` to one of `count` parts: `unit` names them
/// in the errors (`"thread"`, `"part"`; `count` is then called `threads`, `parts`).
pub(crate) fn validate_owners(grid: &Grid, owners: &[u32], count: usize, unit: Unit) -> Result<()> {
    let bad = |name: &'static str, value: String, reason: &'static str| Error::Parameter { name, value, reason };
    let (name, none, above) = match unit {
        Unit::Thread => ("threads", "at least one thread is needed", "an owner must be below the thread count"),
        Unit::Part => ("parts", "at least one part is needed", "an owner must be below the part count"),
    };
    if owners.len() != grid.len() {
        return Err(Error::LoadCount { expected: grid.len(), got: owners.len() });
    }
    if count == 0 {
        return Err(bad(name, "0".into(), none));
    }
    if let Some(k) = owners.iter().position(|&o| o as usize >= count) {
        let word = &name[..name.len() - 1];
        return Err(bad("owners", format!("box {k} owned by {word} {}", owners[k]), above));
    }
    Ok(())
}

/// What the parts of a partition are, for [`validate_owners`]'s messages.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Unit {
    Thread,
    Part,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The balancers that sum loads without a `Problem` (diffusion, PackStealLB, the vector
    /// greedy placements) give at 2^1020 (where the sums pass `f64::MAX`) and at 2^-900 what
    /// they give at scale 1. Before, their charges and means went infinite or NaN: the greedy
    /// placements saw every box as weightless.
    #[test]
    fn balancers_summing_raw_loads_give_at_extreme_scales_what_scale_one_gives() {
        let grid = Grid::new(48, 32).unwrap();
        let loads = crate::loadmap::PerlinMap::with_seed(5).loads(&grid);
        let other: Vec<f64> = loads.iter().rev().copied().collect();
        let start = crate::bisection::kway_rcb(&grid, &vec![1.0; grid.len()], 6).unwrap();
        let bytes = vec![1.0; grid.len()];
        let run = |loads: &[f64], other: &[f64]| {
            let mut stolen = start.clone();
            let moves = crate::pack_steal::pack_steal(&grid, loads, &mut stolen, 6, &Default::default(), 3).unwrap();
            let phases = [loads.to_vec(), other.to_vec()];
            (
                crate::diffusion::diffuse(&grid, &start, loads, &bytes, 6, 1.02).unwrap(),
                (stolen, moves),
                crate::greedy::vector_greedy(&phases, 6).unwrap(),
                crate::greedy::norm_greedy(&phases, 6).unwrap(),
            )
        };
        let one = run(&loads, &other);
        assert!(one.1 .1.boxes > 0 && crate::metrics::migrations(&start, &one.0) > 0, "nothing moved");
        for e in [1020, -900] {
            let scale = |l: &[f64]| -> Vec<f64> { l.iter().map(|q| q * 2f64.powi(e)).collect() };
            let (a, b) = (scale(&loads), scale(&other));
            assert!(e < 0 || a.iter().sum::<f64>().is_infinite(), "the test needs a sum past f64::MAX");
            assert!(run(&a, &b) == one, "loads × 2^{e}");
        }
    }

    #[test]
    fn the_scale_is_read_from_the_bits_exactly() {
        for k in -1074..=1023 {
            let x = 2f64.powi(k.max(-1022)) * if k < -1022 { 2f64.powi(k + 1022) } else { 1.0 };
            assert_eq!(floor_log2(x), k, "2^{k}");
            if k > -1074 {
                assert_eq!(floor_log2(x.next_down()), k - 1, "just below 2^{k}");
            }
            if (-1022..=1023).contains(&k) {
                assert_eq!(power_of_two(k), x);
            }
        }
        assert_eq!(floor_log2(f64::MAX), 1023);
        assert_eq!(floor_log2(3.0), 1);
        assert_eq!(floor_log2(0.75), -1);
        // The scale: none within 2^±100, else the largest load brought into [1, 2).
        assert_eq!(scale_for(2f64.powi(100) * 1.5), 1.0);
        assert_eq!(scale_for(2f64.powi(101).next_down()), 1.0);
        assert_eq!(scale_for(2f64.powi(101)), 2f64.powi(-101));
        assert_eq!(scale_for(f64::from_bits(1)), 2f64.powi(1000));
        // No load at all: nothing to scale.
        assert_eq!(scale_for(0.0), 1.0);
    }

    #[test]
    fn a_problem_prints_its_sizes_and_workers() {
        let g = Grid::new(2, 1).unwrap();
        let printed = format!("{:?}", Problem::new(g, &[1.0, 3.0], 2).unwrap());
        for part in ["Problem", "loads: [1.0, 3.0]", "vcores: 2", "total: 4.0", "max_load: 3.0", "workers: None"] {
            assert!(printed.contains(part), "{part} not in {printed}");
        }
    }

    #[test]
    fn bad_inputs_are_named() {
        let g = Grid::new(2, 2).unwrap();
        let e = Problem::new(g, &[1.0, -1.0, 0.0, 0.0], 1).unwrap_err();
        assert_eq!(e, Error::InvalidLoad { index: 1, x: 1, y: 0, z: 0, value: -1.0 });
        assert!(e.to_string().contains("x=1, y=0"));
        assert!(matches!(
            Problem::new(g, &[1.0, f64::INFINITY, 0.0, 0.0], 1),
            Err(Error::InvalidLoad { index: 1, .. })
        ));
        assert_eq!(Problem::new(g, &[1.0; 3], 1).unwrap_err(), Error::LoadCount { expected: 4, got: 3 });
        assert_eq!(Problem::new(g, &[1.0; 4], 0).unwrap_err(), Error::NoVCores);
        assert_eq!(Problem::new(g, &[1.0; 4], 5).unwrap_err(), Error::TooManyVCores { vcores: 5, boxes: 4 });
        // As many vCores as boxes is a problem (one box each).
        assert_eq!(Problem::new(g, &[1.0; 4], 4).unwrap().vcores(), 4);
    }

    /// The check runs in lanes of eight: a bad load anywhere, in a lane or the remainder, is
    /// named, the first of two, and the largest load is the largest.
    #[test]
    fn every_bad_load_is_found_and_the_first_named() {
        let g = Grid::new(19, 1).unwrap();
        let good: Vec<f64> = (0..19).map(|k| f64::from(k % 5)).collect();
        assert_eq!(Problem::new(g, &good, 2).unwrap().max_load(), 4.0);
        for k in 0..19 {
            for bad in [f64::NAN, -1.0, -0.5e-300, f64::INFINITY, f64::NEG_INFINITY] {
                let mut loads = good.clone();
                loads[k] = bad;
                let e = Problem::new(g, &loads, 2).unwrap_err();
                assert!(matches!(e, Error::InvalidLoad { index, .. } if index == k), "{bad} at {k}: {e:?}");
                if k + 5 < 19 {
                    loads[k + 5] = -2.0;
                    assert!(matches!(Problem::new(g, &loads, 2), Err(Error::InvalidLoad { index, .. }) if index == k));
                }
            }
            let mut loads = good.clone();
            loads[k] = 9.0;
            assert_eq!(Problem::new(g, &loads, 2).unwrap().max_load(), 9.0, "largest at {k}");
        }
        // -0.0 is a load of zero.
        assert!(Problem::new(g, &[-0.0; 19], 2).is_ok());
    }

    /// From a vector it keeps, the same problem as from a slice, and the same errors.
    #[test]
    fn a_problem_on_its_own_loads_is_the_problem_on_borrowed_ones() {
        let g = Grid::new(3, 2).unwrap();
        let loads = vec![0.5, 2.0, 0.0, 1.5, 3.0, 1.0];
        for l in [loads.clone(), loads.iter().map(|q| q * 1e200).collect()] {
            let (a, b) = (Problem::new(g, &l, 2).unwrap(), Problem::from_vec(g, l.clone(), 2).unwrap());
            assert_eq!(
                (a.loads(), a.total(), a.max_load(), a.scale()),
                (b.loads(), b.total(), b.max_load(), b.scale())
            );
            assert_eq!(a.total(), metrics::ordered_sum(a.loads()), "the sum of the loads kept, in index order");
            // The loads kept are the loads given times the scale, a power of two: exactly.
            assert_eq!(a.scale(), if l[4] > 1e100 { 2f64.powi(-665) } else { 1.0 });
            assert_eq!(a.loads().iter().map(|q| q / a.scale()).collect::<Vec<_>>(), l);
        }
        let owned = Problem::from_vec(g, loads.clone(), 2).unwrap();
        assert_eq!(owned.loads().as_ptr(), owned.into_owned().loads().as_ptr(), "kept, not copied");
        let mut bad = loads;
        bad[4] = f64::NAN;
        assert!(matches!(Problem::from_vec(g, bad, 2), Err(Error::InvalidLoad { index: 4, x: 1, y: 1, .. })));
        assert_eq!(Problem::from_vec(g, vec![1.0; 6], 7).unwrap_err(), Error::TooManyVCores { vcores: 7, boxes: 6 });
    }

    #[test]
    fn extreme_scales_balance_like_scale_one() {
        use crate::{balance, methods, StopRule, VCores};
        let g = Grid::new(24, 16).unwrap();
        let base: Vec<f64> = (0..g.len()).map(|k| 1.0 + ((k * 7919) % 13) as f64).collect();
        let run = |scale: f64| {
            let loads: Vec<f64> = base.iter().map(|q| q * scale).collect();
            let p = Problem::new(g, &loads, 6).unwrap();
            assert!(p.total().is_finite() && p.total() > 0.0, "scale {scale:e}: total {}", p.total());
            let mut vcores = VCores::random(&p, 3);
            let mut m = methods::by_name(methods::DEFAULT).unwrap();
            let out = balance(m.as_mut(), &p, &mut vcores, StopRule::default(), |_| {});
            (vcores.owners().to_vec(), out.max_avg, out.converged)
        };
        let one = run(1.0);
        assert!(one.2 && one.1 > 0.99, "{:?}", (one.1, one.2));
        // Powers of two are exact: the very same owners.
        for e in [-996, -300, 300, 996] {
            assert_eq!(run(2f64.powi(e)), one, "scale 2^{e}");
        }
        // Sums of loads near the largest float no longer overflow.
        for scale in [1e-300, 1e300, 1e306 / 14.0] {
            let (_, max_avg, converged) = run(scale);
            assert!(converged && (max_avg - one.1).abs() < 0.02, "scale {scale:e}: max_avg {max_avg}");
        }
    }

    #[test]
    fn lower_bound_sees_a_dominant_box() {
        let g = Grid::new(4, 1).unwrap();
        let p = Problem::new(g, &[6.0, 1.0, 1.0, 0.0], 2).unwrap();
        assert_eq!(p.lower_bound(), 1.5);
        let zero = [0.0; 4];
        assert_eq!(Problem::new(g, &zero, 2).unwrap().lower_bound(), 1.0);
    }
}
