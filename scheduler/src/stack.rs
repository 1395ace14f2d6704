//! The stack of the threads that run tasks: the pool's workers and `ws`'s rayon threads.
//!
//! A task may run on any worker, so each needs the stack the task would have on the thread a
//! code ran it on before: Rust gives a spawned thread 2 MiB, where a C program's threads, and
//! libgomp's OpenMP workers, get the system's default for new threads (8 MiB on Linux under the
//! usual `ulimit -s`). A C task with 3 MiB of local arrays ran under OpenMP and crashed every
//! pbs scheduler (a segmentation fault) until the workers took the same default.
//!
//! [`ENV`] (`PBS_STACKSIZE`) sets it in OpenMP's `OMP_STACKSIZE` syntax (a size with a `B`,
//! `K`, `M` or `G` suffix, kilobytes without); else `OMP_STACKSIZE` itself where it is set
//! and valid, so that a code moving from OpenMP keeps its setting; else the system's default,
//! and never less than Rust's 2 MiB. Stacks are reserved address space: a page is only
//! committed when a task first touches it.

use crate::error::Error;

/// The environment variable that sets the workers' stack size.
pub const ENV: &str = "PBS_STACKSIZE";

/// Rust's own default for a spawned thread, the least a worker gets.
const RUST_DEFAULT: usize = 2 << 20;

/// The stack size, in bytes, of every thread that runs tasks (see the module documentation).
/// An error names a `PBS_STACKSIZE` it cannot read.
pub fn worker_stack_bytes() -> Result<usize, Error> {
    stack_bytes(std::env::var(ENV).ok(), std::env::var("OMP_STACKSIZE").ok().as_deref(), system_default)
}

/// [`worker_stack_bytes`] for the values of `PBS_STACKSIZE` and `OMP_STACKSIZE` given, and
/// the system's default as `system` finds it (asked only when neither decides).
fn stack_bytes(pbs: Option<String>, omp: Option<&str>, system: fn() -> Option<usize>) -> Result<usize, Error> {
    if let Some(value) = pbs {
        return parse(&value).map(|b| b.max(RUST_DEFAULT)).ok_or(Error::Environment {
            name: ENV,
            value,
            reason: "expected a size as OMP_STACKSIZE takes one: a number with B, K, M or G (K when none), \
                     at most what 64 bits hold",
        });
    }
    if let Some(bytes) = omp.and_then(parse) {
        return Ok(bytes.max(RUST_DEFAULT));
    }
    Ok(system().unwrap_or(RUST_DEFAULT).max(RUST_DEFAULT))
}

/// A size in `OMP_STACKSIZE`'s syntax: digits, optional blanks, an optional `B`, `K`, `M` or
/// `G` (either case; kilobytes without one). `None` for anything else, or past `usize`.
fn parse(value: &str) -> Option<usize> {
    let v = value.trim();
    let digits = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    if digits == 0 {
        return None;
    }
    let number: usize = v[..digits].parse().ok()?;
    let unit: usize = match v[digits..].trim().to_ascii_uppercase().as_str() {
        "B" => 1,
        "" | "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => return None,
    };
    number.checked_mul(unit)
}

/// The stack a new POSIX thread gets by default (glibc: `ulimit -s` when the program started).
#[cfg(all(unix, not(miri)))]
fn system_default() -> Option<usize> {
    // SAFETY: `attr` is initialized by pthread_attr_init before it is read, and destroyed
    // once; `size` is a valid place for the size.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_attr_init(&mut attr) != 0 {
            return None;
        }
        let mut size: libc::size_t = 0;
        let ok = libc::pthread_attr_getstacksize(&attr, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        (ok && size > 0).then_some(size)
    }
}

#[cfg(not(all(unix, not(miri))))]
fn system_default() -> Option<usize> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_openmp_reads_them() {
        assert_eq!(parse("4096"), Some(4096 << 10), "kilobytes by default");
        assert_eq!(parse(" 16 M "), Some(16 << 20));
        assert_eq!(parse("16m"), Some(16 << 20));
        assert_eq!(parse("1G"), Some(1 << 30));
        assert_eq!(parse("512b"), Some(512));
        assert_eq!(parse("8K"), Some(8 << 10));
        for bad in ["", "M", "-1M", "1.5M", "16 MB", "1T", "99999999999999999999", "18446744073709551615G"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    /// `PBS_STACKSIZE` first (an error if unreadable), then a valid `OMP_STACKSIZE`, then the
    /// system's default; never under Rust's 2 MiB.
    #[test]
    fn the_stack_comes_from_pbs_then_openmp_then_the_system_and_is_at_least_rust_s() {
        let system = || Some(8 << 20);
        let none = || None;
        let mib = |m: usize| m << 20;
        assert_eq!(RUST_DEFAULT, mib(2));
        assert_eq!(stack_bytes(Some("16M".into()), Some("4M"), system).unwrap(), mib(16));
        assert_eq!(stack_bytes(Some("64K".into()), Some("4M"), system).unwrap(), mib(2), "at least 2 MiB");
        let e = stack_bytes(Some("lots".into()), Some("4M"), system).unwrap_err().to_string();
        assert!(e.contains("PBS_STACKSIZE") && e.contains("lots"), "{e}");
        assert_eq!(stack_bytes(None, Some("4M"), system).unwrap(), mib(4));
        assert_eq!(stack_bytes(None, Some("1K"), system).unwrap(), mib(2));
        assert_eq!(stack_bytes(None, Some("lots"), system).unwrap(), mib(8), "an invalid OMP_STACKSIZE is passed over");
        assert_eq!(stack_bytes(None, None, system).unwrap(), mib(8));
        assert_eq!(stack_bytes(None, None, || Some(1 << 16)).unwrap(), mib(2));
        assert_eq!(stack_bytes(None, None, none).unwrap(), mib(2));
    }

    #[cfg(all(unix, not(miri)))]
    #[test]
    fn the_system_default_is_what_a_c_thread_gets() {
        let bytes = system_default().expect("glibc says");
        assert!(bytes >= 1 << 16, "{bytes}");
        // With no setting (the test environment sets none), the workers get it, or 2 MiB.
        if std::env::var_os(ENV).is_none() && std::env::var_os("OMP_STACKSIZE").is_none() {
            assert_eq!(worker_stack_bytes().unwrap(), bytes.max(RUST_DEFAULT));
        }
    }
}
