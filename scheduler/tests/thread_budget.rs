//! The process's limit on worker threads holds across pools (`src/thread_budget.rs`): a test
//! binary of its own, since every other test of the crate starts pools and this one takes most
//! of the limit.
#![cfg(not(pbs_loom))]

use std::sync::Arc;

use pbs_scheduler::executors::WorkStealing;
use pbs_scheduler::pool::{Pool, WaitPolicy, MAX_THREADS};
use pbs_scheduler::{thread_budget, Error};

fn pool(threads: usize) -> Result<Pool, Error> {
    let p = Pool::new(threads, Arc::new(|_| {}))?;
    // Thousands of workers spinning on 2 cores would slow the test: they sleep at once.
    p.set_wait_policy(WaitPolicy::Passive);
    Ok(p)
}

#[test]
fn pools_together_take_at_most_the_limit_and_give_their_threads_back() {
    let big = MAX_THREADS - 100;
    let first = pool(big).expect("one pool under the limit");
    assert_eq!(thread_budget::held(), big);

    // Past the limit together: refused before any thread starts, naming what the others hold.
    let e = pool(101).err().expect("the pools would hold MAX_THREADS + 1");
    assert!(matches!(e, Error::TooManyThreads { threads: 101, held, max: MAX_THREADS } if held == big), "{e:?}");
    assert!(e.to_string().contains(&format!("the other pools of this process hold {big}")), "{e}");
    let e = WorkStealing::new(64, 101).err().expect("rayon's threads count too");
    assert!(matches!(e, Error::TooManyThreads { threads: 101, .. }), "{e:?}");
    assert_eq!(thread_budget::held(), big, "a refused pool holds nothing");

    // Up to the limit exactly, and the pools still run their phases.
    let second = pool(100).expect("exactly MAX_THREADS in all");
    assert_eq!(thread_budget::held(), MAX_THREADS);
    let ran = std::sync::atomic::AtomicUsize::new(0);
    second.run(&|_| {
        ran.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    });
    assert_eq!(ran.into_inner(), 100);

    // Dropped pools give their threads back.
    drop(first);
    assert_eq!(thread_budget::held(), 100);
    let third = pool(101).expect("room again once the first pool is gone");
    drop((second, third));
    assert_eq!(thread_budget::held(), 0);
}
