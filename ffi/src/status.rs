//! Status codes, the per-thread error message, and the guard that keeps panics on the Rust
//! side of the boundary (unwinding into C is undefined behaviour; Rust would abort instead).

use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What a call did (`pbs_status` in `pbs.h`; the values are the ABI).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Success.
    Ok = 0,
    /// A bad argument; the message names it.
    InvalidArgument = 1,
    /// A required pointer was NULL.
    NullPointer = 2,
    /// The call does not apply to this handle.
    Unsupported = 3,
    /// A panic inside pbs (a bug); the handle stays usable.
    InternalError = 4,
    /// A task returned non-zero; every other box of the phase still ran.
    TaskFailed = 5,
    /// The executor was already in a call (a task calling its own executor, or two threads
    /// at once); nothing was done, and the call in progress goes on.
    Busy = 6,
    /// The system refused a resource: a worker thread, or memory for a grid this large.
    OutOfResources = 7,
}

/// A failed call: its status and message.
#[derive(Debug)]
pub(crate) struct Failure(pub Status, pub String);

impl From<pbs::Error> for Failure {
    fn from(e: pbs::Error) -> Self {
        let status = match e {
            pbs::Error::OutOfMemory { .. } => Status::OutOfResources,
            _ => Status::InvalidArgument,
        };
        Failure(status, e.to_string())
    }
}

impl From<pbs_scheduler::Error> for Failure {
    fn from(e: pbs_scheduler::Error) -> Self {
        use pbs_scheduler::Error as E;
        match e {
            E::Balancer(e) => e.into(),
            E::Spawn { .. } | E::RayonPool { .. } | E::TooManyThreads { .. } => {
                Failure(Status::OutOfResources, e.to_string())
            }
            _ => invalid(e.to_string()),
        }
    }
}

pub(crate) fn invalid(message: impl Into<String>) -> Failure {
    Failure(Status::InvalidArgument, message.into())
}

pub(crate) fn null(what: &str) -> Failure {
    Failure(Status::NullPointer, format!("{what} is NULL"))
}

thread_local! {
    static LAST_ERROR: RefCell<Option<(Status, CString)>> = const { RefCell::new(None) };
}

fn set_last_error(status: Status, message: &str) {
    // An interior NUL cannot be represented in a C string: cut the message there.
    let message = message.split('\0').next().unwrap_or_default();
    let c = CString::new(message).expect("no interior NUL after the cut");
    LAST_ERROR.with(|e| *e.borrow_mut() = Some((status, c)));
}

/// The message of the last failed call on this thread, or NULL if none failed. The pointer
/// stays valid until the next failing call on this thread.
#[no_mangle]
pub extern "C" fn pbs_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ref().map_or(std::ptr::null(), |(_, c)| c.as_ptr()))
}

/// The status of the last failed call on this thread (`PBS_OK` if none failed): what a
/// constructor that returned NULL would have returned.
#[no_mangle]
pub extern "C" fn pbs_last_error_status() -> Status {
    LAST_ERROR.with(|e| e.borrow().as_ref().map_or(Status::Ok, |(s, _)| *s))
}

/// The last error message on this thread, for Rust tests.
pub fn last_error() -> Option<String> {
    let p = pbs_last_error();
    // SAFETY: a non-null pointer from pbs_last_error points at a live CString of this thread.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// Runs `f` and turns its result into what C sees: the value on success, else `on_failure`
/// with the message recorded. A panic inside `f` becomes `InternalError`.
pub(crate) fn guard<T>(on_failure: impl FnOnce(Status) -> T, f: impl FnOnce() -> Result<T, Failure>) -> T {
    let failure = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => return v,
        Ok(Err(failure)) => failure,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            Failure(Status::InternalError, format!("internal error in pbs: {what}"))
        }
    };
    set_last_error(failure.0, &failure.1);
    on_failure(failure.0)
}

/// [`guard`] for calls that return a status.
pub(crate) fn status(f: impl FnOnce() -> Result<(), Failure>) -> Status {
    guard(|s| s, || f().map(|()| Status::Ok))
}

/// A C string argument as UTF-8; `None` for NULL.
///
/// # Safety
/// `s` is NULL or a NUL-terminated string that outlives the call.
pub(crate) unsafe fn text<'a>(s: *const c_char, what: &str) -> Result<Option<&'a str>, Failure> {
    if s.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller passes a NUL-terminated string (pbs.h).
    let c = unsafe { CStr::from_ptr(s) };
    c.to_str().map(Some).map_err(|_| invalid(format!("{what} is not valid UTF-8: {:?}", c.to_string_lossy())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_leave_their_message_and_successes_keep_the_last_one() {
        let s = status(|| Err(invalid("zero vCores")));
        assert_eq!(s, Status::InvalidArgument);
        assert_eq!(last_error().as_deref(), Some("zero vCores"));
        assert_eq!(status(|| Ok(())), Status::Ok);
        assert_eq!(last_error().as_deref(), Some("zero vCores"));
    }

    #[test]
    fn a_panic_becomes_an_internal_error_with_its_message() {
        let s = status(|| panic!("assignment out of range"));
        assert_eq!(s, Status::InternalError);
        assert_eq!(last_error().as_deref(), Some("internal error in pbs: assignment out of range"));
        let n = format!("box {}", 7);
        let s = status(|| std::panic::panic_any(n));
        assert_eq!(s, Status::InternalError);
        assert_eq!(last_error().as_deref(), Some("internal error in pbs: box 7"));
    }

    /// A caller may retry smaller where resources ran out, not where an argument was wrong:
    /// the two are told apart, through the runtime's error as well as the balancer's.
    #[test]
    fn resources_that_ran_out_are_told_from_bad_arguments() {
        use pbs_scheduler::Error as E;
        let oom = || pbs::Error::OutOfMemory { what: "owners", count: 1 << 40, bytes: 1 << 42 };
        let spawn = E::Spawn { index: 3, threads: 8, source: std::io::Error::other("EAGAIN") };
        let many = E::TooManyThreads { threads: 5000, held: 0, max: 4096 };
        let rayon = E::RayonPool { threads: 8, reason: "refused".into() };
        for e in [E::Balancer(oom()), spawn, many, rayon] {
            let message = e.to_string();
            let f = Failure::from(e);
            assert_eq!((f.0, &f.1), (Status::OutOfResources, &message));
        }
        assert_eq!(Failure::from(oom()).0, Status::OutOfResources);
        let zero = pbs::Error::Parameter { name: "tol", value: "-1".into(), reason: "negative" };
        for e in [E::NoThreads, E::Balancer(zero)] {
            assert_eq!(Failure::from(e).0, Status::InvalidArgument);
        }
    }

    #[test]
    fn a_message_with_a_nul_is_cut_there() {
        status(|| Err(invalid("bad\0tail")));
        assert_eq!(last_error().as_deref(), Some("bad"));
    }

    #[test]
    fn text_rejects_invalid_utf8_and_passes_null_through() {
        let bad = [0xffu8, 0xfe, 0];
        // SAFETY: NUL-terminated buffers that outlive the calls.
        let e = unsafe { text(bad.as_ptr().cast(), "scheduler") }.unwrap_err();
        assert!(e.1.starts_with("scheduler is not valid UTF-8"), "{}", e.1);
        // SAFETY: NULL or a NUL-terminated literal.
        assert_eq!(unsafe { text(std::ptr::null(), "method") }.unwrap(), None);
        // SAFETY: NULL or a NUL-terminated literal.
        assert_eq!(unsafe { text(c"pbs".as_ptr(), "method") }.unwrap(), Some("pbs"));
    }
}
