//! The balancer alone: `pbs_partitioner_*`. Loads of every box in, owner of every box out;
//! each call warm-starts from the vCores where the previous one ended, as the executor does.

use std::ffi::c_char;
use std::time::Instant;

use pbs::{methods, Balancer, Grid, Problem, StopRule, VCores};

use crate::status::{guard, invalid, null, status, text, Failure, Status};

/// A balancer of a fixed number of vCores over a fixed grid (`pbs_partitioner` in `pbs.h`).
pub struct Partitioner {
    grid: Grid,
    vcores: usize,
    /// The paper's methods' first balancing starts from random positions drawn from it.
    seed: u64,
    method: Box<dyn Balancer + Send>,
    /// `None` until the first balancing.
    state: Option<VCores>,
    /// The owners the last call wrote (the first call's are refined, so they may differ from
    /// the vCores' cells): what the next call counts its migrations from. Empty before the
    /// first call.
    written: Vec<u32>,
    /// Whether the vCores' cells were in one piece each at the end of the last call.
    cells_whole: bool,
}

/// How a balancing ended (`pbs_outcome` in `pbs.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Outcome {
    /// Balancer steps taken.
    pub steps: usize,
    /// 1 when `max_avg ≤ (1 + tol) × lower_bound`.
    pub converged: i32,
    /// `max_i Q_i / m`.
    pub max_avg: f64,
    /// `max(1, max_k q_k / m)`.
    pub lower_bound: f64,
    /// Largest `(Q_i − m)/m`.
    pub dol_max: f64,
    /// Smallest `(Q_i − m)/m`.
    pub dol_min: f64,
    /// Neighbouring box pairs with different owners.
    pub edge_cut: usize,
    /// Boxes whose owner changed in this call.
    pub migrations: usize,
    /// Wall time of the call.
    pub elapsed_ms: f64,
}

impl Partitioner {
    /// The checks and state of [`pbs_partitioner_new`], `method` already read (`None`: the
    /// default).
    fn new(nx: usize, ny: usize, nz: usize, vcores: usize, method: Option<&str>, seed: u64) -> Result<Self, Failure> {
        let grid = Grid::new_3d(nx, ny, nz)?;
        pbs::check_memory("balancer state", grid.len(), pbs::BALANCER_BYTES_PER_BOX)?;
        // The vCore count is checked against the grid now rather than at the first call.
        Problem::new(grid, &vec![0.0; grid.len()], vcores)?;
        let method = methods::by_name(method.unwrap_or(methods::DEFAULT))?;
        Ok(Partitioner { grid, vcores, seed, method, state: None, written: Vec::new(), cells_whole: false })
    }

    /// [`pbs_partitioner_balance`] once its pointers are slices: `owners` as long as `loads`.
    fn balance(
        &mut self,
        loads: &[f64],
        tol: f64,
        max_steps: usize,
        owners: &mut [u32],
        outcome: Option<&mut Outcome>,
    ) -> Result<(), Failure> {
        if !(tol.is_finite() && tol >= 0.0) {
            return Err(invalid(format!("tolerance {tol}: must be finite and ≥ 0 (PBS_DEFAULT_TOL is 0.05)")));
        }
        let start = Instant::now();
        let problem = Problem::new(self.grid, loads, self.vcores)?;
        let stop = StopRule { max_steps, tol };
        let refine_tol = tol.min(pbs::refine::RefineSettings::default().tol);
        // A later call is a rebalancing: far from balance it starts over (`pbs::rebalance`).
        // The first call's owners are refined box by box; later calls keep the cells' owners,
        // which move fewer boxes from one call to the next, with parts in pieces mended (and
        // finished by the refinement where a box that carries load outweighs `tol`; where the
        // cells end above `tol`, the owners written last, refined, may be taken instead, and
        // where those do not reach it either, a bisection refined; a part left with no box is
        // given one; boxes without load stay where they were written where that lengthens no
        // cut).
        let (steps, mut written) = match self.state.as_mut() {
            Some(state) => {
                let (method, whole, last) = (self.method.as_mut(), self.cells_whole, Some(&self.written[..]));
                let done = pbs::refine::rebalance_mended(method, &problem, state, stop, whole, last)?;
                self.cells_whole = done.cells_whole;
                (done.outcome.steps, done.owners)
            }
            // The paper's methods start as the paper did, from random vCores balanced to
            // `stop`, their owners refined as a first partition's; where a box that carries
            // load outweighs `tol`, the vCores would only crawl: a refined bisection instead.
            None if self.method.name().starts_with("paper-") => {
                if !stop.resolvable_by_cells(&problem) {
                    let (owners, vcores) = pbs::refine::refined_bisection(&problem, refine_tol)?;
                    self.state = Some(vcores);
                    (0, owners)
                } else {
                    let start = VCores::random(&problem, self.seed);
                    let first =
                        pbs::refine::first_partition_from(self.method.as_mut(), &problem, start, stop, refine_tol)?;
                    self.state = Some(first.vcores);
                    (first.steps, first.owners)
                }
            }
            // The power cells from a k-way RCB's centroids to the tolerance the refinement
            // wants before it, at most `max_steps`, then refined (`pbs` in pbs-peers alike);
            // where a box that carries load outweighs that tolerance, the RCB's parts refined,
            // and where parts are small, those first, kept where they end near the bound.
            None => {
                let cells = StopRule { max_steps, ..StopRule::before_refinement(&problem) };
                let first = pbs::refine::first_partition(self.method.as_mut(), &problem, cells, refine_tol)?;
                self.state = Some(first.vcores);
                (first.steps, first.owners)
            }
        };
        let elapsed = start.elapsed();
        owners.copy_from_slice(&written);
        if let Some(o) = outcome {
            let charges = pbs::metrics::charges(&written, problem.loads(), self.vcores);
            let max_avg = pbs::metrics::max_avg(&charges);
            let (dol_max, dol_min) = pbs::metrics::dol_extremes(&charges);
            // The first call has no owners before it to count against.
            let migrations =
                if self.written.is_empty() { 0 } else { pbs::metrics::migrations(&self.written, &written) };
            *o = Outcome {
                steps,
                converged: (max_avg <= (1.0 + tol) * problem.lower_bound()) as i32,
                max_avg,
                lower_bound: problem.lower_bound(),
                dol_max,
                dol_min,
                edge_cut: pbs::metrics::edge_cut(&self.grid, &written),
                migrations,
                elapsed_ms: elapsed.as_secs_f64() * 1e3,
            };
        }
        std::mem::swap(&mut self.written, &mut written);
        Ok(())
    }
}

/// A balancer of `vcores` vCores over `nx × ny × nz` boxes with method `method` (NULL: the
/// default); NULL on error, with the reason in `pbs_last_error`.
///
/// # Safety
/// `method` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn pbs_partitioner_new(
    nx: usize,
    ny: usize,
    nz: usize,
    vcores: usize,
    method: *const c_char,
    seed: u64,
) -> *mut Partitioner {
    guard(
        |_| std::ptr::null_mut(),
        || {
            // SAFETY: forwarded from the caller.
            let method = unsafe { text(method, "method") }?;
            Ok(Box::into_raw(Box::new(Partitioner::new(nx, ny, nz, vcores, method, seed)?)))
        },
    )
}

/// Balances `loads` and writes every box's owner into `owners`; `outcome` may be NULL.
///
/// # Safety
/// `p` comes from [`pbs_partitioner_new`] and is not used by another thread meanwhile;
/// `loads` and `owners` are two separate arrays of `n_loads` elements; `outcome` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn pbs_partitioner_balance(
    p: *mut Partitioner,
    loads: *const f64,
    n_loads: usize,
    tol: f64,
    max_steps: usize,
    owners: *mut u32,
    outcome: *mut Outcome,
) -> Status {
    status(|| {
        // SAFETY: the caller's contract above.
        let p = unsafe { p.as_mut() }.ok_or_else(|| null("the partitioner"))?;
        if loads.is_null() {
            return Err(null("loads"));
        }
        if owners.is_null() {
            return Err(null("owners"));
        }
        // SAFETY: `loads` and `owners` are separate arrays of `n_loads` values, so the shared
        // and the unique slice do not overlap; `outcome` is NULL or writable (the caller's
        // contract).
        let (loads, owners, outcome) = unsafe {
            (
                std::slice::from_raw_parts(loads, n_loads),
                std::slice::from_raw_parts_mut(owners, n_loads),
                outcome.as_mut(),
            )
        };
        p.balance(loads, tol, max_steps, owners, outcome)
    })
}

/// Frees a partitioner; NULL is allowed.
///
/// # Safety
/// `p` is NULL or comes from [`pbs_partitioner_new`] and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn pbs_partitioner_free(p: *mut Partitioner) {
    if !p.is_null() {
        // SAFETY: created by Box::into_raw in pbs_partitioner_new (caller's contract).
        drop(unsafe { Box::from_raw(p) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::last_error;
    use pbs::rebalance;

    fn hot_spot(grid: &Grid, cx: f64, cy: f64) -> Vec<f64> {
        (0..grid.len())
            .map(|k| {
                let c = grid.centre(k);
                let d2 = (c[0] - cx).powi(2) + (c[1] - cy).powi(2);
                1.0 + 50.0 / (1.0 + d2 / 30.0)
            })
            .collect()
    }

    /// One call of `pbs_partitioner_balance` at tolerance 0.05 and up to 5,000 steps, which
    /// must succeed: the owners written and the outcome.
    ///
    /// # Safety
    /// `p` is a live handle from [`pbs_partitioner_new`], not used by another thread meanwhile.
    unsafe fn balance_once(p: *mut Partitioner, loads: &[f64]) -> (Vec<u32>, Outcome) {
        // SAFETY: as the caller promises.
        unsafe { balance_steps(p, loads, 5000) }
    }

    /// [`balance_once`] with up to `max_steps` steps.
    ///
    /// # Safety
    /// As [`balance_once`].
    unsafe fn balance_steps(p: *mut Partitioner, loads: &[f64], max_steps: usize) -> (Vec<u32>, Outcome) {
        let mut owners = vec![u32::MAX; loads.len()];
        let mut out = Outcome::default();
        // SAFETY: `p` as the caller promises; `loads` and `owners` hold `loads.len()` values.
        let s = unsafe {
            pbs_partitioner_balance(p, loads.as_ptr(), loads.len(), 0.05, max_steps, owners.as_mut_ptr(), &mut out)
        };
        assert_eq!(s, Status::Ok, "{:?}", last_error());
        (owners, out)
    }

    /// On a drifting Perlin map (51² boxes, 10 parts, 100 calls) the cells fall apart on some
    /// calls; the owners written never do.
    #[test]
    fn later_calls_write_every_part_in_one_piece() {
        let grid = Grid::new(51, 51).unwrap();
        // SAFETY: NULL method (the default).
        let p = unsafe { pbs_partitioner_new(51, 51, 1, 10, std::ptr::null(), 3) };
        assert!(!p.is_null());
        let mut map = pbs::loadmap::PerlinMap::with_seed(7);
        let mut owners = vec![0u32; grid.len()];
        let mut cells_split = 0;
        for call in 0..100 {
            let loads = map.loads(&grid);
            // SAFETY: a live handle from its _new; buffers of the lengths passed; NULL outcome.
            let s = unsafe {
                pbs_partitioner_balance(
                    p,
                    loads.as_ptr(),
                    loads.len(),
                    0.05,
                    5000,
                    owners.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            };
            assert_eq!(s, Status::Ok, "{:?}", last_error());
            assert_eq!(pbs::metrics::disconnected_parts(&grid, &owners, 10), 0, "call {call}");
            // SAFETY: the handle is live and not used elsewhere meanwhile.
            let cells = unsafe { &*p }.state.as_ref().unwrap().owners();
            cells_split += usize::from(pbs::metrics::disconnected_parts(&grid, cells, 10) > 0);
            map = map.smooth(0.5);
        }
        assert!(cells_split > 0, "the cells never fell apart: pick a harder case for this test");
        // SAFETY: a handle from its _new, not used afterwards.
        unsafe { pbs_partitioner_free(p) };
    }

    /// Seven loaded boxes on 12 × 19 boxes over 30 parts (a case the property
    /// `the_partitioners_leave_no_part_empty_or_in_pieces` shrank to): the second call, on the
    /// map rolled by three columns, left a part with no box until such a part was given one.
    /// The cells must leave one empty in some call, or the case no longer tests that.
    #[test]
    fn no_call_leaves_a_part_without_a_box_where_few_boxes_carry_load() {
        let grid = Grid::new(12, 19).unwrap();
        let mut loads = vec![0.0; grid.len()];
        for (k, q) in [
            (61, 0.01),
            (68, 0.45084418271929133),
            (138, 0.7331543461215244),
            (155, 0.5450416496315242),
            (166, 0.05982115237123754),
            (220, 0.7679001176794178),
            (224, 0.8214760962432457),
        ] {
            loads[k] = q;
        }
        // SAFETY: NULL method (the default).
        let p = unsafe { pbs_partitioner_new(12, 19, 1, 30, std::ptr::null(), 1) };
        assert!(!p.is_null());
        let held_by = |owners: &[u32]| {
            let mut held = vec![false; 30];
            owners.iter().for_each(|&o| held[o as usize] = true);
            held
        };
        let mut cells_left_one = false;
        for call in 0..3 {
            // SAFETY: a live handle from its _new, used by this thread alone.
            let (owners, _) = unsafe { balance_once(p, &loads) };
            // SAFETY: the handle is live and not used elsewhere meanwhile.
            let cells = unsafe { &*p }.state.as_ref().unwrap().owners();
            cells_left_one |= held_by(cells).contains(&false);
            let held = held_by(&owners);
            assert!(
                held.iter().all(|&h| h),
                "call {call}: parts with no box {:?}",
                (0..30).filter(|&i| !held[i]).collect::<Vec<_>>()
            );
            assert_eq!(pbs::metrics::disconnected_parts(&grid, &owners, 30), 0, "call {call}");
            loads = (0..grid.len()).map(|k| loads[k - k % 12 + (k % 12 + 3) % 12]).collect();
        }
        assert!(cells_left_one, "the cells never left a part with no box: pick another case for this test");
        // SAFETY: a handle from its _new, not used afterwards.
        unsafe { pbs_partitioner_free(p) };
    }

    /// Where a box that carries load outweighs the tolerance (9 per vCore against 0.05), the
    /// first call refines a k-way RCB's parts without cells and the later ones stop the cells
    /// where they can resolve the load and refine: the owners of the Rust calls that do so.
    #[test]
    fn sparse_load_is_partitioned_as_the_rust_refinement_does() {
        let grid = Grid::new(60, 60).unwrap();
        let sparse = |shift: usize| -> Vec<f64> {
            (0..grid.len()).map(|k| if (k + shift) % 20 == 3 { 1.0 + (k % 7) as f64 } else { 0.0 }).collect()
        };
        // SAFETY: NULL method (the default).
        let p = unsafe { pbs_partitioner_new(60, 60, 1, 20, std::ptr::null(), 7) };
        assert!(!p.is_null());
        let mut method = methods::by_name("power-cells").unwrap();
        let (mut vcores, mut whole, mut last) = (None, false, Vec::new());
        for call in 0..3 {
            let loads = sparse(call);
            let problem = Problem::new(grid, &loads, 20).unwrap();
            let (want, steps) = match vcores.as_mut() {
                None => {
                    let (owners, v) = pbs::refine::refined_bisection(&problem, 0.005).unwrap();
                    vcores = Some(v);
                    (owners, 0)
                }
                Some(v) => {
                    let stop = StopRule::default();
                    let done =
                        pbs::refine::rebalance_mended(method.as_mut(), &problem, v, stop, whole, Some(&last)).unwrap();
                    whole = done.cells_whole;
                    (done.owners, done.outcome.steps)
                }
            };
            // SAFETY: a live handle from its _new, used by this thread alone.
            let (owners, out) = unsafe { balance_once(p, &loads) };
            assert_eq!(owners, want, "call {call}");
            assert_eq!(out.steps, steps);
            assert_eq!(out.lower_bound, problem.lower_bound());
            last = want;
        }
        // SAFETY: a handle from its _new, not used afterwards.
        unsafe { pbs_partitioner_free(p) };
    }

    /// The paper's methods too: where a box that carries load outweighs the tolerance, random
    /// vCores would only crawl, so the first call writes a refined bisection's parts, in no
    /// step, whatever the seed.
    #[test]
    fn a_paper_method_where_a_box_outweighs_the_tolerance_starts_from_a_refined_bisection() {
        let grid = Grid::new(60, 60).unwrap();
        let loads: Vec<f64> = (0..grid.len()).map(|k| if k % 20 == 3 { 1.0 + (k % 7) as f64 } else { 0.0 }).collect();
        let problem = Problem::new(grid, &loads, 20).unwrap();
        assert!(!StopRule { max_steps: 5000, tol: 0.05 }.resolvable_by_cells(&problem));
        let tol = 0.05f64.min(pbs::refine::RefineSettings::default().tol);
        let (want, _) = pbs::refine::refined_bisection(&problem, tol).unwrap();
        for seed in [1, 2] {
            // SAFETY: a NUL-terminated literal.
            let p = unsafe { pbs_partitioner_new(60, 60, 1, 20, c"paper-eq7".as_ptr(), seed) };
            assert!(!p.is_null());
            // SAFETY: a live handle from its _new, used by this thread alone.
            let (owners, out) = unsafe { balance_once(p, &loads) };
            assert_eq!((owners == want, out.steps), (true, 0), "seed {seed}");
            // SAFETY: a handle from its _new, not used afterwards.
            unsafe { pbs_partitioner_free(p) };
        }
    }

    /// The outcome describes the owners written: their `max_avg` against the lower bound, the
    /// charges' spread about the mean, and whether the tolerance was met. Three equal boxes
    /// over two vCores split 2 : 1 at best; a box of 10 beside two of 1 sets the bound at 10/6.
    #[test]
    fn the_outcome_describes_the_owners_written() {
        for (loads, tol, bound, max_avg, converged) in
            [([1.0, 1.0, 1.0], 0.0, 1.0, 4.0 / 3.0, 0), ([10.0, 1.0, 1.0], 0.05, 10.0 / 6.0, 10.0 / 6.0, 1)]
        {
            // SAFETY: NULL method (the default).
            let p = unsafe { pbs_partitioner_new(3, 1, 1, 2, std::ptr::null(), 1) };
            assert!(!p.is_null(), "{:?}", last_error());
            let (mut owners, mut out) = ([u32::MAX; 3], Outcome::default());
            // SAFETY: a live handle from its _new; buffers of the lengths passed.
            let s = unsafe { pbs_partitioner_balance(p, loads.as_ptr(), 3, tol, 100, owners.as_mut_ptr(), &mut out) };
            assert_eq!(s, Status::Ok, "{:?}", last_error());
            let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
            assert!(close(out.lower_bound, bound) && close(out.max_avg, max_avg), "{out:?}");
            let spread = max_avg - 1.0;
            assert!(close(out.dol_max, spread) && close(out.dol_min, -spread), "{out:?}");
            assert_eq!(out.converged, converged, "{out:?}");
            // SAFETY: a handle from its _new, not used afterwards.
            unsafe { pbs_partitioner_free(p) };
        }
    }

    /// The default method's first call (400 boxes a vCore: the cells run first) takes at most
    /// `max_steps` cell steps, a limit that binds (the call without it takes more), and reports
    /// its time in milliseconds: within the call's wall time seen from outside, and not a
    /// millionth of it (seconds over 1,000).
    #[test]
    fn a_first_call_keeps_to_its_step_limit_and_times_itself() {
        let grid = Grid::new(40, 40).unwrap();
        let loads = hot_spot(&grid, 12.0, 25.0);
        let mut steps = Vec::new();
        for max_steps in [2, 5000] {
            // SAFETY: NULL method (the default).
            let p = unsafe { pbs_partitioner_new(40, 40, 1, 4, std::ptr::null(), 1) };
            assert!(!p.is_null(), "{:?}", last_error());
            let called = Instant::now();
            // SAFETY: a live handle from its _new.
            let (_, out) = unsafe { balance_steps(p, &loads, max_steps) };
            let wall_ms = called.elapsed().as_secs_f64() * 1e3;
            assert!(out.elapsed_ms <= wall_ms && out.elapsed_ms >= 1e-5 * wall_ms, "{out:?}, {wall_ms} ms outside");
            steps.push(out.steps);
            // SAFETY: a handle from its _new, not used afterwards.
            unsafe { pbs_partitioner_free(p) };
        }
        assert!(steps[0] <= 2 && steps[1] > 2, "steps at limits 2 and 5,000: {steps:?}");
    }

    /// A first call whose vCores crawl (five Gaussian hot spots on a faint background, the
    /// `hot-spots-80x40` map of `pbs-bench maps`, 72 vCores) and whose refinement stops above
    /// its target writes a refined bisection's parts, as `pbs::refine::first_partition` decides.
    #[test]
    fn a_first_call_that_crawls_writes_the_better_balanced_refinement() {
        let grid = Grid::new(80, 40).unwrap();
        let gauss = |c: [f64; 3], cx: f64, cy: f64, s: f64| {
            (-((c[0] - cx).powi(2) + (c[1] - cy).powi(2)) / (2.0 * s * s)).exp()
        };
        let loads: Vec<f64> = (0..grid.len())
            .map(|k| {
                let c = grid.centre(k);
                0.01 + 5.0 * gauss(c, 10.0, 10.0, 3.0)
                    + 2.0 * gauss(c, 60.0, 30.0, 5.0)
                    + 8.0 * gauss(c, 70.0, 8.0, 1.5)
                    + 1.0 * gauss(c, 35.0, 25.0, 8.0)
                    + 3.0 * gauss(c, 20.0, 35.0, 2.0)
            })
            .collect();
        let problem = Problem::new(grid, &loads, 72).unwrap();
        let tol = pbs::refine::RefineSettings::default().tol;
        let stop = StopRule { max_steps: 5000, ..StopRule::before_refinement(&problem) };
        let mut method = methods::by_name("power-cells").unwrap();
        let want = pbs::refine::first_partition(method.as_mut(), &problem, stop, tol).unwrap();
        let (bisection, _) = pbs::refine::refined_bisection(&problem, tol).unwrap();
        assert!(
            want.steps > pbs::refine::CRAWL_STEPS && want.owners == bisection,
            "{} steps: the refined cells were kept; pick a map they crawl on",
            want.steps
        );
        // SAFETY: NULL method (the default).
        let p = unsafe { pbs_partitioner_new(80, 40, 1, 72, std::ptr::null(), 1) };
        assert!(!p.is_null());
        // SAFETY: a live handle from its _new, used by this thread alone.
        let (owners, out) = unsafe { balance_once(p, &loads) };
        assert_eq!(owners, want.owners);
        assert_eq!((out.steps, out.migrations), (want.steps, 0));
        // SAFETY: a handle from its _new, not used afterwards.
        unsafe { pbs_partitioner_free(p) };
    }

    #[test]
    fn owners_are_those_of_the_rust_balancer_call_after_call() {
        let grid = Grid::new(40, 30).unwrap();
        let (first, second) = (hot_spot(&grid, 30.0, 8.0), hot_spot(&grid, 12.0, 20.0));
        // SAFETY: the strings are NULL or NUL-terminated literals.
        let p = unsafe { pbs_partitioner_new(40, 30, 1, 6, std::ptr::null(), 7) };
        assert!(!p.is_null());
        // The same calls in Rust: the first one a first partition (the cells from an RCB's
        // centroids, refined), the second a rebalancing whose owners are the cells' (mended,
        // where a part fell in pieces).
        let mut method = methods::by_name("power-cells").unwrap();
        let problem = Problem::new(grid, &first, 6).unwrap();
        let stop = StopRule { max_steps: 5000, ..StopRule::before_refinement(&problem) };
        let start =
            pbs::refine::first_partition(method.as_mut(), &problem, stop, pbs::refine::RefineSettings::default().tol);
        let start = start.unwrap();
        let (mut vcores, mut previous) = (start.vcores, start.owners.clone());
        for (call, loads) in [&first, &second].into_iter().enumerate() {
            let problem = Problem::new(grid, loads, 6).unwrap();
            let (want, steps, migrations) = if call == 0 {
                (start.owners.clone(), start.steps, 0)
            } else {
                let run = rebalance(method.as_mut(), &problem, &mut vcores, StopRule { max_steps: 5000, tol: 0.05 });
                let mut want = vcores.owners().to_vec();
                pbs::refine::mend(&problem, &mut want).unwrap();
                let moved = pbs::metrics::migrations(&previous, &want);
                (want, run.steps, moved)
            };
            // SAFETY: a live handle from its _new (checked above), used by this thread alone.
            let (owners, out) = unsafe { balance_once(p, loads) };
            assert_eq!(owners, want);
            let max_avg = pbs::metrics::max_avg(&pbs::metrics::charges(&want, loads, 6));
            assert_eq!((out.steps, out.max_avg), (steps, max_avg));
            assert_eq!((out.edge_cut, out.migrations), (pbs::metrics::edge_cut(&grid, &want), migrations));
            assert!(out.converged == 1 && out.max_avg <= 1.05 * out.lower_bound);
            if call == 0 {
                assert!(out.max_avg <= 1.005 * out.lower_bound, "{}", out.max_avg);
            } else {
                assert!(migrations > 0 && steps > 0, "the second call had nothing to do");
            }
            previous = want;
        }
        // SAFETY: a handle from its _new (or NULL), not used afterwards.
        unsafe { pbs_partitioner_free(p) };
    }

    /// The first call starts the power cells from a bisection, whatever the seed; the paper's
    /// methods from random vCores drawn from it (20 steps: fewer than a crawl, after which a
    /// refined bisection could replace their owners).
    #[test]
    fn only_the_paper_methods_start_from_the_seed() {
        let grid = Grid::new(40, 30).unwrap();
        let loads = hot_spot(&grid, 30.0, 8.0);
        let first_owners = |method: &std::ffi::CStr, seed: u64| {
            // SAFETY: a NUL-terminated literal.
            let p = unsafe { pbs_partitioner_new(40, 30, 1, 6, method.as_ptr(), seed) };
            assert!(!p.is_null());
            // SAFETY: a live handle from its _new, used by this thread alone.
            let (owners, _) = unsafe { balance_steps(p, &loads, 20) };
            // SAFETY: a handle from its _new, not used afterwards.
            unsafe { pbs_partitioner_free(p) };
            owners
        };
        assert_eq!(first_owners(c"power-cells", 1), first_owners(c"power-cells", 2));
        assert_eq!(first_owners(c"power-cells-pair", 1), first_owners(c"power-cells-pair", 2));
        assert_ne!(first_owners(c"paper-eq7", 1), first_owners(c"paper-eq7", 2));
    }

    /// A later call far from balance (all the load in one quarter) starts over, and 20 steps
    /// balance it.
    #[test]
    fn a_later_call_far_from_balance_starts_over() {
        // SAFETY: the method is NULL (the default).
        let p = unsafe { pbs_partitioner_new(64, 64, 1, 16, std::ptr::null(), 3) };
        assert!(!p.is_null());
        let uniform = vec![1.0; 64 * 64];
        let quarter: Vec<f64> = (0..64 * 64).map(|k| if k % 64 < 32 && k / 64 < 32 { 10.0 } else { 0.1 }).collect();
        let mut owners = vec![0u32; 64 * 64];
        for (loads, steps) in [(&uniform, 200), (&quarter, 20)] {
            let mut out = Outcome::default();
            // SAFETY: a live handle; buffers of the lengths passed.
            let s = unsafe {
                pbs_partitioner_balance(p, loads.as_ptr(), 64 * 64, 0.05, steps, owners.as_mut_ptr(), &mut out)
            };
            assert_eq!(s, Status::Ok, "{:?}", last_error());
            assert!(out.converged == 1, "{out:?}");
        }
        // SAFETY: a handle from its _new, not used afterwards.
        unsafe { pbs_partitioner_free(p) };
    }

    #[test]
    fn bad_construction_returns_null_and_names_the_problem() {
        let cases: [(usize, usize, usize, usize, &std::ffi::CStr, &str); 5] = [
            (0, 4, 1, 2, c"power-cells", "empty grid"),
            (65535, 65535, 1, 2, c"power-cells", "out of memory: balancer state for 4294836225 boxes"),
            (4, 4, 1, 0, c"power-cells", "zero vCores"),
            (2, 2, 1, 5, c"power-cells", "5 vCores for 4 boxes"),
            (4, 4, 1, 2, c"metis", "metis"),
        ];
        for (nx, ny, nz, v, m, needle) in cases {
            // SAFETY: the strings are NULL or NUL-terminated literals.
            let p = unsafe { pbs_partitioner_new(nx, ny, nz, v, m.as_ptr(), 1) };
            assert!(p.is_null());
            let msg = last_error().unwrap();
            assert!(msg.contains(needle), "{msg:?} should name {needle:?}");
        }
    }

    #[test]
    fn bad_loads_and_pointers_return_their_status_and_write_nothing() {
        // SAFETY: the strings are NULL or NUL-terminated literals.
        let p = unsafe { pbs_partitioner_new(4, 4, 1, 2, std::ptr::null(), 1) };
        let mut owners = vec![u32::MAX; 16];
        let mut loads = vec![1.0; 16];
        // SAFETY: a live handle from its _new (or NULL, refused); buffers of the lengths passed.
        let call = |loads: &[f64], n: usize, tol: f64, owners: &mut [u32]| unsafe {
            pbs_partitioner_balance(p, loads.as_ptr(), n, tol, 100, owners.as_mut_ptr(), std::ptr::null_mut())
        };
        loads[5] = f64::NAN;
        assert_eq!(call(&loads, 16, 0.05, &mut owners), Status::InvalidArgument);
        assert!(last_error().unwrap().contains("invalid load NaN at box 5"));
        loads[5] = -1.0;
        assert_eq!(call(&loads, 16, 0.05, &mut owners), Status::InvalidArgument);
        loads[5] = f64::INFINITY;
        assert_eq!(call(&loads, 16, 0.05, &mut owners), Status::InvalidArgument);
        loads[5] = 1.0;
        assert_eq!(call(&loads, 15, 0.05, &mut owners), Status::InvalidArgument);
        assert!(last_error().unwrap().contains("16 boxes but 15 loads"));
        assert_eq!(call(&loads, 16, f64::NAN, &mut owners), Status::InvalidArgument);
        assert!(last_error().unwrap().starts_with("tolerance NaN"));
        for (tol, name) in [(f64::INFINITY, "tolerance inf"), (-0.01, "tolerance -0.01")] {
            assert_eq!(call(&loads, 16, tol, &mut owners), Status::InvalidArgument);
            assert!(last_error().unwrap().starts_with(name), "{:?}", last_error());
        }
        assert!(owners.iter().all(|&o| o == u32::MAX), "a failed call wrote owners");
        // SAFETY: a live handle from its _new (or NULL, refused); buffers of the lengths passed.
        let s = unsafe {
            pbs_partitioner_balance(p, std::ptr::null(), 16, 0.05, 10, owners.as_mut_ptr(), std::ptr::null_mut())
        };
        assert_eq!((s, last_error().unwrap()), (Status::NullPointer, "loads is NULL".into()));
        // SAFETY: a live handle from its _new (or NULL, refused); buffers of the lengths passed.
        let s = unsafe {
            pbs_partitioner_balance(p, loads.as_ptr(), 16, 0.05, 10, std::ptr::null_mut(), std::ptr::null_mut())
        };
        assert_eq!(s, Status::NullPointer);
        // SAFETY: a live handle from its _new (or NULL, refused); buffers of the lengths passed.
        let s = unsafe {
            pbs_partitioner_balance(
                std::ptr::null_mut(),
                loads.as_ptr(),
                16,
                0.05,
                10,
                owners.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!((s, last_error().unwrap()), (Status::NullPointer, "the partitioner is NULL".into()));
        // Still usable after the failures.
        assert_eq!(call(&loads, 16, 0.05, &mut owners), Status::Ok);
        assert_eq!(owners.iter().filter(|&&o| o == 0).count(), 8);
        // SAFETY: a handle from its _new (or NULL), not used afterwards.
        unsafe { pbs_partitioner_free(p) };
        // SAFETY: a handle from its _new (or NULL), not used afterwards.
        unsafe { pbs_partitioner_free(std::ptr::null_mut()) };
    }
}
