//! Model check of the background thread's protocol (`src/background.rs`): loom runs every
//! interleaving of the owner and the balancer thread (up to its preemption bound) and fails on
//! a deadlock (a drop or a `take_back` that never returns), a lost or doubled job, or a stale
//! cancel that cuts the next job short.
//!
//! Built only with `RUSTFLAGS="--cfg pbs_loom"`, where the module takes its atomics, channels
//! and threads from loom: `scripts/test.sh` runs it as
//! `RUSTFLAGS="--cfg pbs_loom" cargo test -p pbs-scheduler --test loom_background`.
#![cfg(pbs_loom)]

use pbs_scheduler::background::{Background, Job};

/// Done after `units` units.
struct Count {
    done: usize,
    units: usize,
}

impl Job for Count {
    fn advance(&mut self) -> bool {
        if self.done == self.units {
            return false;
        }
        self.done += 1;
        true
    }
}

fn count(units: usize) -> Count {
    Count { done: 0, units }
}

fn model(check: impl Fn() + Sync + Send + 'static) {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(3);
    model.check(check);
}

/// Waits for the job by polling, as the executor does at each iteration boundary.
fn wait(b: &mut Background<Count>) -> Count {
    loop {
        if let Some(r) = b.try_take() {
            return r.job;
        }
        loom::thread::yield_now();
    }
}

/// A job comes back exactly once, done, whether taken by a poll or by a cancel.
#[test]
fn a_job_comes_back_once_by_poll_or_by_cancel() {
    model(|| {
        let mut b = Background::default();
        assert!(b.start(count(2)).is_ok());
        let job = match b.try_take() {
            Some(r) => r.job,
            None => b.take_back().expect("out, so it comes back").job,
        };
        assert!(job.done <= 2);
        assert!(!b.is_out() && b.try_take().is_none() && b.take_back().is_none());
    });
}

/// A cancel that came too late for one job does not cut the next one short.
#[test]
fn a_stale_cancel_does_not_cut_the_next_job() {
    model(|| {
        let mut b = Background::default();
        assert!(b.start(count(1)).is_ok());
        assert!(b.take_back().is_some());
        assert!(b.start(count(2)).is_ok());
        assert_eq!(wait(&mut b).done, 2);
    });
}

/// Dropping with a job out ends the thread (no deadlock, the job is dropped with it).
#[test]
fn a_drop_with_a_job_out_returns() {
    model(|| {
        let mut b = Background::default();
        assert!(b.start(count(3)).is_ok());
        drop(b);
    });
}
