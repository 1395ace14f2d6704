//! `run`'s executors and the process's thread limit (`pbs_scheduler::thread_budget`): a test
//! binary of its own, since it takes most of the limit.

use pbs_bench::run::{run, RunSetup, TURN_ITERS};
use pbs_scheduler::{pool::MAX_THREADS, thread_budget};

/// The timed pass's executors are gone before the modelled pass starts its own, one at a
/// time: two schedulers of 1,500 threads each fit the limit (3,000), three at once would not
/// (4,500), and the run gives them all back.
#[test]
fn the_modelled_pass_starts_after_the_timed_pass_gave_its_threads_back() {
    let threads = 1500;
    assert!(2 * threads <= MAX_THREADS && 3 * threads > MAX_THREADS);
    let setup = RunSetup {
        app: "md".into(),
        scenario: "gravity".into(),
        schedulers: vec!["static".into(), "eager".into()],
        threads,
        iters: 1,
        nx: 4,
        ny: 4,
        nz: 1,
        cache_bytes: 1 << 20,
        pin: false,
        seed: 1,
        turn_iters: TURN_ITERS,
    };
    let rows = run(&setup, || {}).expect("two pools at a time, never three");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].checksum, rows[1].checksum);
    assert_eq!(thread_budget::held(), 0);
}
