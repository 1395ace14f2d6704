//! Sharing the process with another parallel runtime (OpenMP, rayon, TBB).
//!
//! Every such runtime keeps its idle threads spinning for a while after a parallel region so
//! that the next one starts without a wake-up, and those spinning threads sit on the cores the
//! other runtime's workers need. pbs's workers spin 200 µs, yielding, then sleep
//! ([`crate::pool::WaitPolicy`]). OpenMP's by default spin far longer: libgomp about 300 000
//! pause loops (milliseconds), LLVM's and Intel's `KMP_BLOCKTIME` 200 ms. On 2 cores that made
//! pbs's phases 2–10× slower beside one OpenMP loop per iteration, and `OMP_WAIT_POLICY=passive`
//! removes it (`docs/coexistence.md` has the measurements). [`openmp_spin_warning`] says so when
//! it applies; the C interface prints it once.

/// Advice when an OpenMP runtime is loaded in this process with its default wait policy (none
/// of `OMP_WAIT_POLICY`, `GOMP_SPINCOUNT`, `KMP_BLOCKTIME` set); `None` otherwise.
pub fn openmp_spin_warning() -> Option<String> {
    const CHOICES: [&str; 3] = ["OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME"];
    if !openmp_loaded() || CHOICES.iter().any(|v| std::env::var_os(v).is_some()) {
        return None;
    }
    Some(
        "pbs: an OpenMP runtime shares this process with its default wait policy: its idle threads \
spin after every parallel region (libgomp: milliseconds; LLVM/Intel: 200 ms) on the cores pbs's workers \
need, which made pbs's phases 2-10x slower on 2 cores. Set OMP_WAIT_POLICY=passive (setting \
OMP_WAIT_POLICY, GOMP_SPINCOUNT or KMP_BLOCKTIME to any value silences this note); see docs/coexistence.md."
            .to_string(),
    )
}

/// Advice when `threads` unpinned workers would all inherit the calling thread's mask and it
/// allows fewer CPUs than the workers could use of the `process_cpus` the process may run on
/// ([`crate::pinning::process_cpus`]): OpenMP binds its initial thread to one CPU when
/// `OMP_PROC_BIND` is set, and a program may have confined the thread itself. `None` when the
/// mask leaves room (more workers than CPUs is the caller's choice).
pub fn confined_caller_warning(threads: usize, process_cpus: usize) -> Option<String> {
    let cpus = crate::pinning::cpus_of_this_thread()?;
    (cpus.len() < threads.min(process_cpus)).then(|| {
        format!(
            "pbs: {threads} unpinned workers will share the {} CPU(s) the calling thread may run on ({cpus:?}): threads inherit their creator's mask, and OMP_PROC_BIND or the program confined this one. Pin the workers (pin = PBS_PIN_WORKERS) or create the executor from a thread with a wider mask.",
            cpus.len()
        )
    })
}

/// The CPUs of OpenMP's places, where an OpenMP runtime is loaded in this process and has
/// places (`OMP_PLACES`, or `OMP_PROC_BIND`'s default ones: the initial thread's mask before
/// OpenMP bound that thread to the first place); none otherwise.
pub fn openmp_place_cpus() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    {
        type Count = unsafe extern "C" fn() -> libc::c_int;
        type PlaceCount = unsafe extern "C" fn(libc::c_int) -> libc::c_int;
        type PlaceIds = unsafe extern "C" fn(libc::c_int, *mut libc::c_int);
        let (count, place_count, place_ids) = (
            loaded_symbol(c"omp_get_num_places"),
            loaded_symbol(c"omp_get_place_num_procs"),
            loaded_symbol(c"omp_get_place_proc_ids"),
        );
        if count.is_null() || place_count.is_null() || place_ids.is_null() {
            return Vec::new();
        }
        // SAFETY: these are OpenMP 4.5's functions of these names (every runtime that exports
        // them: libgomp, libomp, libiomp5), with these C signatures.
        let (count, place_count, place_ids) = unsafe {
            (
                std::mem::transmute::<*mut libc::c_void, Count>(count),
                std::mem::transmute::<*mut libc::c_void, PlaceCount>(place_count),
                std::mem::transmute::<*mut libc::c_void, PlaceIds>(place_ids),
            )
        };
        let mut cpus = Vec::new();
        // SAFETY: the three only read OpenMP's place list (starting the runtime if it has not
        // started yet); each place's ids are written into a buffer of the length
        // `omp_get_place_num_procs` gave for that place.
        unsafe {
            for place in 0..count() {
                let n = usize::try_from(place_count(place)).unwrap_or(0);
                let mut ids = vec![0 as libc::c_int; n];
                if n > 0 {
                    place_ids(place, ids.as_mut_ptr());
                }
                cpus.extend(ids.into_iter().filter_map(|id| usize::try_from(id).ok()));
            }
        }
        cpus
    }
    #[cfg(not(target_os = "linux"))]
    {
        Vec::new()
    }
}

/// Whether the process has an OpenMP runtime loaded (libgomp, libomp, libiomp5 all export
/// `omp_get_max_threads`).
fn openmp_loaded() -> bool {
    #[cfg(target_os = "linux")]
    {
        !loaded_symbol(c"omp_get_max_threads").is_null()
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// The address of `name` in the objects loaded in this process, or null; only looked up.
#[cfg(target_os = "linux")]
fn loaded_symbol(name: &std::ffi::CStr) -> *mut libc::c_void {
    // SAFETY: dlsym with RTLD_DEFAULT only looks a NUL-terminated name up in the loaded
    // objects; what it returns is the caller's to check before any call.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_openmp_in_a_rust_test_no_warning() {
        assert!(!openmp_loaded());
        assert_eq!(openmp_spin_warning(), None);
    }

    #[test]
    fn a_caller_confined_to_one_cpu_is_named_for_two_unpinned_workers() {
        std::thread::spawn(|| {
            let cpu = crate::pinning::cpus_of_this_thread().unwrap()[0];
            crate::pinning::pin_this_thread(&[cpu]).unwrap();
            assert_eq!(confined_caller_warning(1, 2), None);
            assert_eq!(confined_caller_warning(2, 1), None, "one CPU is all the process has");
            let w = confined_caller_warning(2, 2).unwrap();
            assert!(w.contains(&format!("share the 1 CPU(s) the calling thread may run on ([{cpu}])")), "{w}");
        })
        .join()
        .unwrap();
    }
}
