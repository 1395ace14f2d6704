//! Fuzzing the C interface's arguments with proptest: sizes, vCore, thread and worker counts, method
//! and scheduler names of arbitrary bytes, loads of any bit pattern (NaN, infinities,
//! negatives, subnormals, 1e308), wrong lengths, tilings of any size, iterations of the mapper
//! a task runtime drives. Every call returns a status from pbs.h, never
//! PBS_INTERNAL_ERROR (a caught panic), and a refusal always comes with a message.
//! `PROPTEST_CASES` sets the effort.

use std::ffi::{c_char, c_int, c_void, CString};

use pbs_ffi::partitioner::{pbs_partitioner_balance, pbs_partitioner_free, pbs_partitioner_new, Outcome};
use pbs_ffi::status::{last_error, Status};
use proptest::prelude::*;

fn name(bytes: &[u8], known: &[&str], pick: usize) -> CString {
    if pick < known.len() {
        return CString::new(known[pick]).unwrap();
    }
    let cut: Vec<u8> = bytes.iter().copied().filter(|&b| b != 0).collect();
    CString::new(cut).unwrap()
}

fn refused_with_a_message(s: Status) -> Result<(), TestCaseError> {
    prop_assert!(s != Status::InternalError, "a panic inside pbs: {:?}", last_error());
    if s != Status::Ok {
        prop_assert!(last_error().is_some_and(|m| !m.is_empty()));
    }
    Ok(())
}

unsafe extern "C" fn noop(_: *mut c_void, _: usize) -> c_int {
    0
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_partitioner_takes_any_arguments(
        nx in 0usize..40, ny in 0usize..40, nz in 0usize..3, vcores in 0usize..50,
        method in prop::collection::vec(any::<u8>(), 0..12), pick in 0usize..8,
        bits in prop::collection::vec(any::<u64>(), 0..1700), extra in -3isize..3,
        tol_bits in any::<u64>(), plain_tol in any::<bool>(), max_steps in 0usize..60,
        scale in prop_oneof![Just(1.0), Just(1e-300), Just(1e300), Just(1e306)], corrupt in any::<bool>(),
    ) {
        let m = name(&method, &["power-cells", "paper-eq7", "paper-eq1"], pick);
        // SAFETY: a NUL-terminated method name.
        let p = unsafe { pbs_partitioner_new(nx, ny, nz, vcores, m.as_ptr() as *const c_char, 7) };
        if p.is_null() {
            prop_assert!(last_error().is_some_and(|e| !e.is_empty()));
            return Ok(());
        }
        let n = ((nx * ny * nz) as isize + extra).max(0) as usize;
        // Plausible loads at some scale, and in half the cases one of any bit pattern.
        let loads: Vec<f64> = (0..n)
            .map(|k| match bits.get(k) {
                Some(&b) if corrupt && k == n / 2 => f64::from_bits(b),
                Some(&b) => (b % 1000) as f64 * scale,
                None => scale,
            })
            .collect();
        let tol = if plain_tol { 0.05 } else { f64::from_bits(tol_bits) };
        let mut owners = vec![u32::MAX; n];
        let mut outcome = Outcome::default();
        // SAFETY: a live partitioner; `loads` and `owners` hold `n` entries.
        let s = unsafe {
            pbs_partitioner_balance(p, loads.as_ptr(), n, tol, max_steps, owners.as_mut_ptr(), &mut outcome)
        };
        refused_with_a_message(s)?;
        if s == Status::Ok {
            prop_assert!(owners.iter().all(|&o| (o as usize) < vcores));
            prop_assert!(outcome.max_avg.is_finite() && outcome.max_avg >= 1.0 - 1e-9, "{:?}", outcome);
        }
        // SAFETY: from pbs_partitioner_new, not used afterwards.
        unsafe { pbs_partitioner_free(p) };
    }

    #[test]
    fn executors_take_any_arguments(
        nx in 0usize..9, ny in 0usize..9, nz in 0usize..3, threads in 0usize..5,
        scheduler in prop::collection::vec(any::<u8>(), 0..8), pick in 0usize..6,
        settings in prop::collection::vec((0usize..10, prop::collection::vec(any::<u8>(), 0..10)), 0..4),
    ) {
        use pbs_ffi::executor::{pbs_executor_free, pbs_executor_new_with, pbs_executor_run_phase};
        use pbs_scheduler::executors::PbsOptions;
        let s = name(&scheduler, &["pbs", "ws", "eager", "static"], pick);
        // Settings by a known name with a value of any bytes, or entries of any bytes.
        let settings: Vec<CString> = settings
            .iter()
            .map(|(which, bytes)| {
                let text: Vec<u8> = bytes.iter().copied().filter(|&b| b != 0).collect();
                match PbsOptions::SETTINGS.get(*which) {
                    Some(name) => CString::new([name.as_bytes(), b"=", &text].concat()).unwrap(),
                    None => CString::new(text).unwrap(),
                }
            })
            .collect();
        let mut array: Vec<*const c_char> = settings.iter().map(|c| c.as_ptr()).collect();
        array.push(std::ptr::null());
        // SAFETY: a NUL-terminated scheduler name; NUL-terminated settings ending with NULL.
        let e = unsafe { pbs_executor_new_with(s.as_ptr(), nx, ny, nz, threads, 0, array.as_ptr()) };
        if e.is_null() {
            prop_assert!(last_error().is_some_and(|m| !m.is_empty()));
            return Ok(());
        }
        // SAFETY: a live executor; a task that touches nothing.
        let st = unsafe { pbs_executor_run_phase(e, Some(noop), std::ptr::null_mut(), std::ptr::null_mut()) };
        refused_with_a_message(st)?;
        prop_assert_eq!(st, Status::Ok);
        // SAFETY: from pbs_executor_new_with, not used afterwards.
        unsafe { pbs_executor_free(e) };
    }

    /// Tilings of any sizes, the largest a `size_t` holds included, in 2D and 3D: a status and
    /// a message, and where it succeeds, non-empty ranges inside the domain.
    #[test]
    fn tilings_take_any_sizes(
        sizes in prop::array::uniform6(prop_oneof![Just(0usize), Just(1), 1usize..50, Just(usize::MAX / 2 + 1),
            Just(usize::MAX)]),
        k in prop_oneof![0usize..70, Just(usize::MAX)],
    ) {
        use pbs_ffi::tiling::{pbs_tiling_cells, pbs_tiling_cells_3d, pbs_tiling_grid_3d};
        let (cells, tile) = ([sizes[0], sizes[1], sizes[2]], [sizes[3], sizes[4], sizes[5]]);
        let mut grid = [0usize; 3];
        // SAFETY: three readable sizes each, three writable.
        let st = unsafe { pbs_tiling_grid_3d(cells.as_ptr(), tile.as_ptr(), grid.as_mut_ptr()) };
        refused_with_a_message(st)?;
        let (mut lo, mut hi) = ([0usize; 3], [0usize; 3]);
        // SAFETY: as above.
        let st = unsafe { pbs_tiling_cells_3d(cells.as_ptr(), tile.as_ptr(), k, lo.as_mut_ptr(), hi.as_mut_ptr()) };
        refused_with_a_message(st)?;
        if st == Status::Ok {
            prop_assert!((0..3).all(|a| lo[a] < hi[a] && hi[a] <= cells[a]), "{:?} {:?} box {}: {:?}..{:?}", cells, tile, k, lo, hi);
        }
        let mut r = [0usize; 4];
        let [x0, x1, y0, y1] = &mut r;
        // SAFETY: four writable outputs.
        let st = unsafe { pbs_tiling_cells(cells[0], cells[1], tile[0], tile[1], k, x0, x1, y0, y1) };
        refused_with_a_message(st)?;
        if st == Status::Ok {
            prop_assert!(r[0] < r[1] && r[1] <= cells[0] && r[2] < r[3] && r[3] <= cells[1], "{:?}", r);
        }
    }

    /// The mapper a task runtime drives (the StarPU policy's): any sizes and worker counts,
    /// iterations of loads of any bit pattern or length, victims of any worker: a status and a
    /// message, owners always below the worker count, and victims every other worker once.
    #[test]
    fn the_mapper_takes_any_arguments(
        nx in 0usize..12, ny in 0usize..12, nz in 0usize..3, workers in 0usize..9, seed in any::<u64>(),
        iterations in prop::collection::vec((prop::collection::vec(any::<u64>(), 0..40), -2isize..2, any::<bool>(),
            prop_oneof![Just(1e-6), Just(1e-300), Just(1e300), Just(1.0)]), 0..12),
        asked in prop_oneof![0usize..10, Just(usize::MAX)],
    ) {
        use pbs_ffi::executor::IterationEnd;
        use pbs_ffi::mapper::{pbs_mapper_end_iteration, pbs_mapper_free, pbs_mapper_new, pbs_mapper_owners, pbs_mapper_victims};
        let m = pbs_mapper_new(nx, ny, nz, workers, seed);
        if m.is_null() {
            prop_assert!(last_error().is_some_and(|e| !e.is_empty()));
            return Ok(());
        }
        let boxes = nx * ny * nz;
        let check = |m| -> Result<(), TestCaseError> {
            let mut owners = vec![u32::MAX; boxes];
            // SAFETY: a live mapper; `owners` holds `boxes` elements.
            let st = unsafe { pbs_mapper_owners(m, owners.as_mut_ptr(), boxes) };
            prop_assert_eq!(st, Status::Ok, "{:?}", last_error());
            prop_assert!(owners.iter().all(|&o| (o as usize) < workers), "{:?}", owners);
            let mut victims = vec![u32::MAX; workers.saturating_sub(1)];
            // SAFETY: as above, `victims` holding its length.
            let st = unsafe { pbs_mapper_victims(m, asked, victims.as_mut_ptr(), victims.len()) };
            refused_with_a_message(st)?;
            if st == Status::Ok {
                let mut sorted = victims.clone();
                sorted.sort_unstable();
                let others: Vec<u32> = (0..workers as u32).filter(|&w| w as usize != asked).collect();
                prop_assert_eq!(sorted, others);
            }
            Ok(())
        };
        check(m)?;
        for (bits, extra, corrupt, scale) in &iterations {
            let n = (boxes as isize + extra).max(0) as usize;
            let loads: Vec<f64> = (0..n)
                .map(|k| match bits.get(k) {
                    Some(&b) if *corrupt && k == n / 2 => f64::from_bits(b),
                    Some(&b) => (b % 1000) as f64 * scale,
                    None => *scale,
                })
                .collect();
            let mut end = IterationEnd::default();
            // SAFETY: a live mapper; `loads` holds `n` readable elements; `end` is writable.
            let st = unsafe { pbs_mapper_end_iteration(m, loads.as_ptr(), n, &mut end) };
            refused_with_a_message(st)?;
            check(m)?;
        }
        // SAFETY: from pbs_mapper_new, not used afterwards.
        unsafe { pbs_mapper_free(m) };
    }
}
