//! pbs's mapping decisions for a runtime that runs the tasks itself: `pbs_mapper_*`. Box loads
//! of an iteration in; whether to rebalance, every box's owner and every worker's victims out
//! (`pbs_scheduler::mapper::Mapper`). The StarPU policy of `starpu/` is built on it.

use pbs::Grid;
use pbs_scheduler::executors::PbsOptions;
use pbs_scheduler::mapper::Mapper;

use crate::executor::IterationEnd;
use crate::status::{guard, invalid, null, status, Status};

/// A [`Mapper`] (`pbs_mapper` in `pbs.h`).
pub struct MapperHandle(Mapper);

/// A mapper of `workers` workers over `nx × ny × nz` boxes, with the `pbs` executor's settings
/// from the environment (`PBS_METHOD`, `PBS_TOL`, `PBS_TRIGGER`, `PBS_STEPS`); NULL on error.
#[no_mangle]
pub extern "C" fn pbs_mapper_new(nx: usize, ny: usize, nz: usize, workers: usize, seed: u64) -> *mut MapperHandle {
    guard(
        |_| std::ptr::null_mut(),
        || {
            let grid = Grid::new_3d(nx, ny, nz)?;
            let options = PbsOptions { seed, ..PbsOptions::default() }.with_env()?;
            Ok(Box::into_raw(Box::new(MapperHandle(Mapper::new(grid, workers, options)?))))
        },
    )
}

/// Writes the owner of every box into `owners` (`n` = the number of boxes).
///
/// # Safety
/// `m` comes from [`pbs_mapper_new`] and is not used by another thread meanwhile; `owners`
/// holds `n` elements.
#[no_mangle]
pub unsafe extern "C" fn pbs_mapper_owners(m: *const MapperHandle, owners: *mut u32, n: usize) -> Status {
    status(|| {
        // SAFETY: the caller's contract.
        let m = unsafe { m.as_ref() }.ok_or_else(|| null("the mapper"))?;
        if owners.is_null() {
            return Err(null("owners"));
        }
        let have = m.0.owners();
        if n != have.len() {
            return Err(invalid(format!("{n} owners asked for a grid of {} boxes", have.len())));
        }
        // SAFETY: `owners` holds `n` = have.len() elements (caller's contract, checked length).
        unsafe { std::slice::from_raw_parts_mut(owners, n) }.copy_from_slice(have);
        Ok(())
    })
}

/// Writes the workers other than `worker` into `victims` (`n` = workers − 1), in the order
/// `worker` should steal from them: those whose boxes border its own first.
///
/// # Safety
/// As [`pbs_mapper_owners`], `victims` holding `n` elements.
#[no_mangle]
pub unsafe extern "C" fn pbs_mapper_victims(
    m: *const MapperHandle,
    worker: usize,
    victims: *mut u32,
    n: usize,
) -> Status {
    status(|| {
        // SAFETY: the caller's contract.
        let m = unsafe { m.as_ref() }.ok_or_else(|| null("the mapper"))?;
        let workers = m.0.workers();
        if worker >= workers {
            return Err(invalid(format!("worker {worker} of {workers}")));
        }
        if n != workers - 1 {
            return Err(invalid(format!("{n} victims asked for; worker {worker} has {}", workers - 1)));
        }
        if n == 0 {
            return Ok(());
        }
        if victims.is_null() {
            return Err(null("victims"));
        }
        let order = &m.0.victim_order()[worker];
        // SAFETY: `victims` holds `n` = workers − 1 = order.len() elements (caller's contract).
        unsafe { std::slice::from_raw_parts_mut(victims, n) }.copy_from_slice(order);
        Ok(())
    })
}

/// Ends an iteration whose measured box loads (seconds, `n` = the number of boxes, finite and
/// ≥ 0) are `loads`: rebalances when the criterion says it pays. `end` may be NULL.
///
/// # Safety
/// As [`pbs_mapper_owners`] (but `m` mutable), `loads` holding `n` values, `end` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn pbs_mapper_end_iteration(
    m: *mut MapperHandle,
    loads: *const f64,
    n: usize,
    end: *mut IterationEnd,
) -> Status {
    status(|| {
        // SAFETY: the caller's contract.
        let m = unsafe { m.as_mut() }.ok_or_else(|| null("the mapper"))?;
        if loads.is_null() {
            return Err(null("loads"));
        }
        // SAFETY: `loads` holds `n` values (caller's contract); the mapper checks `n`.
        let loads = unsafe { std::slice::from_raw_parts(loads, n) };
        let r = m.0.end_iteration(loads)?;
        // SAFETY: NULL or writable (caller's contract).
        if let Some(out) = unsafe { end.as_mut() } {
            *out = IterationEnd::from(&r);
        }
        Ok(())
    })
}

/// The run ends after `iterations` more [`pbs_mapper_end_iteration`] calls, the next one
/// included (0 forgets the hint, as does a run that goes on past it): the mapper starts no
/// rebalancing at the last one's end, nor one before it that the iterations left would not
/// repay ([`Mapper::hint_iterations_left`]).
///
/// # Safety
/// As [`pbs_mapper_end_iteration`].
#[no_mangle]
pub unsafe extern "C" fn pbs_mapper_hint_iterations_left(m: *mut MapperHandle, iterations: u64) -> Status {
    status(|| {
        // SAFETY: the caller's contract.
        let m = unsafe { m.as_mut() }.ok_or_else(|| null("the mapper"))?;
        m.0.hint_iterations_left(iterations);
        Ok(())
    })
}

/// Frees a mapper; NULL is allowed.
///
/// # Safety
/// `m` is NULL or comes from [`pbs_mapper_new`] and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn pbs_mapper_free(m: *mut MapperHandle) {
    if !m.is_null() {
        // SAFETY: created by Box::into_raw in pbs_mapper_new (caller's contract).
        drop(unsafe { Box::from_raw(m) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::last_error;

    /// A mapper from C starts where the Rust `Mapper` of its seed starts, and the seed
    /// matters (the first balancing starts from random vCores).
    #[test]
    fn a_mapper_from_c_starts_as_the_rust_mapper_of_its_seed() {
        let mut starts = Vec::new();
        for seed in [1, 2, 3] {
            let m = pbs_mapper_new(16, 16, 1, 5, seed);
            assert!(!m.is_null());
            let mut owners = vec![9u32; 256];
            // SAFETY: a live handle, then freed; a buffer of the stated length.
            unsafe {
                assert_eq!(pbs_mapper_owners(m, owners.as_mut_ptr(), 256), Status::Ok);
                pbs_mapper_free(m);
            }
            let options = PbsOptions { seed, ..PbsOptions::default() }.with_env().unwrap();
            let rust = Mapper::new(Grid::new(16, 16).unwrap(), 5, options).unwrap();
            assert_eq!(owners, rust.owners(), "seed {seed}");
            starts.push(owners);
        }
        assert!(starts[0] != starts[1] || starts[1] != starts[2], "the seed changed nothing: pick another grid");
    }

    #[test]
    fn a_mapper_from_c_rebalances_a_heavy_corner_and_refuses_bad_calls() {
        let m = pbs_mapper_new(16, 16, 1, 3, 7);
        assert!(!m.is_null());
        let mut loads = vec![1.0; 256];
        (0..256).filter(|k| k % 16 < 4 && k / 16 < 4).for_each(|k| loads[k] = 8.0);
        let mut end = IterationEnd::default();
        // SAFETY: a live handle; buffers of the stated lengths.
        unsafe {
            assert_eq!(pbs_mapper_end_iteration(m, loads.as_ptr(), 256, &mut end), Status::Ok);
            assert!(end.rebalanced == 1 && end.migrations > 0 && end.max_avg > 1.3, "{end:?}");
            let mut owners = vec![9u32; 256];
            assert_eq!(pbs_mapper_owners(m, owners.as_mut_ptr(), 256), Status::Ok);
            assert!(owners.iter().all(|&o| o < 3));
            let mut victims = [9u32; 2];
            assert_eq!(pbs_mapper_victims(m, 1, victims.as_mut_ptr(), 2), Status::Ok);
            victims.sort_unstable();
            assert_eq!(victims, [0, 2]);
            assert_eq!(pbs_mapper_victims(m, 3, victims.as_mut_ptr(), 2), Status::InvalidArgument);
            assert_eq!(pbs_mapper_owners(m, owners.as_mut_ptr(), 255), Status::InvalidArgument);
            assert_eq!(pbs_mapper_end_iteration(m, loads.as_ptr(), 10, &mut end), Status::InvalidArgument);
            assert_eq!(
                pbs_mapper_end_iteration(std::ptr::null_mut(), loads.as_ptr(), 256, &mut end),
                Status::NullPointer
            );
            pbs_mapper_free(m);
        }
        assert!(pbs_mapper_new(0, 4, 1, 2, 1).is_null());
        assert!(pbs_mapper_new(4, 4, 1, 0, 1).is_null());
    }

    /// Each refusal of a bad pointer or count names it: NULL owners, victims and loads; a
    /// victim count other than the workers less one; a single worker has no victims to write
    /// (zero asked, none written, even through NULL).
    #[test]
    fn each_refusal_names_its_argument() {
        let m = pbs_mapper_new(4, 4, 1, 3, 7);
        let one = pbs_mapper_new(4, 4, 1, 1, 7);
        assert!(!m.is_null() && !one.is_null());
        let said = |what: &str| {
            let e = last_error().unwrap_or_default();
            assert!(e.contains(what), "{e:?} does not name {what:?}");
        };
        let mut buffer = [9u32; 16];
        // SAFETY: live handles, buffers at least as long as stated, NULLs where tested.
        unsafe {
            assert_eq!(pbs_mapper_owners(m, std::ptr::null_mut(), 16), Status::NullPointer);
            said("owners");
            assert_eq!(pbs_mapper_victims(m, 0, buffer.as_mut_ptr(), 3), Status::InvalidArgument);
            said("3 victims asked for; worker 0 has 2");
            assert_eq!(pbs_mapper_victims(m, 0, std::ptr::null_mut(), 2), Status::NullPointer);
            said("victims");
            assert_eq!(pbs_mapper_end_iteration(m, std::ptr::null(), 16, std::ptr::null_mut()), Status::NullPointer);
            said("loads");
            assert_eq!(pbs_mapper_victims(one, 0, std::ptr::null_mut(), 0), Status::Ok);
            assert_eq!(pbs_mapper_victims(one, 0, buffer.as_mut_ptr(), 0), Status::Ok);
            assert_eq!(buffer, [9; 16], "nothing written");
            pbs_mapper_free(m);
            pbs_mapper_free(one);
        }
    }

    /// Told through C that its first measurement ends the run, the mapper leaves the heavy
    /// corner as it is; the run going on past the hint, the next iteration balances it.
    #[test]
    fn a_mapper_told_the_run_ends_starts_no_rebalancing_at_its_last_iteration() {
        let m = pbs_mapper_new(16, 16, 1, 3, 7);
        let mut loads = vec![1.0; 256];
        (0..256).filter(|k| k % 16 < 4 && k / 16 < 4).for_each(|k| loads[k] = 8.0);
        let mut end = IterationEnd::default();
        // SAFETY: a live handle, then freed; a buffer of the stated length.
        unsafe {
            assert_eq!(pbs_mapper_hint_iterations_left(m, 1), Status::Ok);
            assert_eq!(pbs_mapper_end_iteration(m, loads.as_ptr(), 256, &mut end), Status::Ok);
            assert!(end.rebalanced == 0 && end.migrations == 0 && end.max_avg > 1.3, "{end:?}");
            assert_eq!(pbs_mapper_end_iteration(m, loads.as_ptr(), 256, &mut end), Status::Ok);
            assert!(end.rebalanced == 1 && end.migrations > 0, "{end:?}");
            assert_eq!(pbs_mapper_hint_iterations_left(std::ptr::null_mut(), 1), Status::NullPointer);
            pbs_mapper_free(m);
        }
    }
}
