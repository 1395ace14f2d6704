//! What a busy balancer thread does to the phases of a pool that holds every CPU, and what
//! lending it a core (`executors/pbs/lending.rs`) changes:
//! `cargo run --release -p pbs-scheduler --example lent_core`.
//!
//! One worker per CPU, bound; every phase each worker spins 50 µs. Three setups, 3,000 phases
//! each, interleaved in rounds: no other thread; a thread computing beside them at normal
//! priority, placed by the OS (the balancer thread without lending); the same thread bound to
//! the last worker's CPU under `SCHED_IDLE` while that worker waits passively and runs nothing
//! (lent). Printed: phase time median, p99, the longest, and phases over 1 ms (a time slice
//! lost at a barrier).
use std::sync::Arc;
use std::time::{Duration, Instant};

use pbs_scheduler::background::{Background, Job};
use pbs_scheduler::pinning::{cpus_of_this_thread, pin_this_thread, CallerPin};
use pbs_scheduler::pool::Pool;

/// Computes in units of 1 ms until its deadline.
struct Busy(Instant);

impl Job for Busy {
    fn advance(&mut self) -> bool {
        let unit = Instant::now();
        while unit.elapsed() < Duration::from_millis(1) {
            std::hint::spin_loop();
        }
        Instant::now() < self.0
    }
}

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

fn main() {
    let cpus = cpus_of_this_thread().expect("this OS says which CPUs the process may use");
    let threads = cpus.len();
    if threads < 2 {
        println!("one CPU: nothing to lend");
        return;
    }
    let bound = cpus.clone();
    let bind = move |t: usize| {
        if let Err(e) = pin_this_thread(&[bound[t]]) {
            eprintln!("worker {t} runs unbound: {e}");
        }
    };
    let mut pool = Pool::new(threads, Arc::new(bind)).unwrap();
    pool.pin_caller_in_phases(CallerPin::new(&[cpus[0]]).unwrap());
    let lender = threads - 1;
    let mut normal: Background<Busy> = Background::default();
    let mut lent: Background<Busy> = Background::for_lent_core(vec![cpus[lender]]);
    assert!(normal.spawn() && lent.spawn());
    if !lent.on_lent_core() {
        println!("the thread could not be bound and put under SCHED_IDLE here: nothing to compare");
        return;
    }
    let setups = ["no other thread", "a thread at normal priority", "a lent core"];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); 3];
    for _round in 0..3 {
        for (s, acc) in times.iter_mut().enumerate() {
            let phases = 1000;
            let deadline = Instant::now() + Duration::from_secs(1);
            let is_lent = s == 2;
            match s {
                1 => assert!(normal.start(Busy(deadline)).is_ok()),
                2 => {
                    pool.set_passive(lender, true);
                    assert!(lent.start(Busy(deadline)).is_ok());
                }
                _ => {}
            }
            for _ in 0..phases {
                let t = Instant::now();
                pool.run(&|id| {
                    if !(is_lent && id == lender) {
                        spin(Duration::from_micros(50));
                    }
                });
                acc.push(t.elapsed().as_secs_f64() * 1e3);
            }
            pool.set_passive(lender, false);
            normal.take_back();
            lent.take_back();
        }
    }
    println!("{threads} workers bound one per CPU, phases of 50 µs per worker");
    for (name, t) in setups.iter().zip(&mut times) {
        t.sort_by(f64::total_cmp);
        let q = |f: f64| t[((t.len() - 1) as f64 * f) as usize];
        let slow = t.iter().filter(|&&x| x > 1.0).count();
        println!(
            "{name:28}  median {:.3} ms  p99 {:.3}  longest {:.3}  phases over 1 ms: {slow} of {}",
            q(0.5),
            q(0.99),
            q(1.0),
            t.len()
        );
    }
}
