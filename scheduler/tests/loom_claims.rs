//! Model check of a list's claim word (`src/executors/pbs/stealing.rs`): the owner takes boxes
//! from the front of its list, thieves from the back, each with a compare-and-swap on one
//! word; loom runs every interleaving of an owner and one or two thieves (up to its
//! preemption bound) and fails if a box is taken twice or never. Every box of a pbs phase runs
//! once because of this protocol (the `Executor` contract, which `for_each_box_mut`'s `&mut`
//! rests on).
//!
//! Built only with `RUSTFLAGS="--cfg pbs_loom"`; `scripts/test.sh` runs it beside the pool's
//! model.
#![cfg(pbs_loom)]

use loom::sync::atomic::AtomicU64;
use loom::sync::Arc;
use loom::thread;

use pbs_scheduler::executors::loom_claims::{claim_back, claim_front, pack};

/// An owner claiming up to `chunk` boxes at a time and `thieves` thieves taking two at a time
/// share a list of `len` boxes: each box is taken exactly once, the owner's claims never
/// exceed `chunk`, the thieves' two.
fn exactly_once(len: u32, chunk: u32, thieves: usize, preemptions: usize) {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(preemptions);
    model.check(move || {
        let word = Arc::new(AtomicU64::new(pack(0, len)));
        let handles: Vec<_> = (0..thieves)
            .map(|_| {
                let word = Arc::clone(&word);
                thread::spawn(move || std::iter::from_fn(|| claim_back(&word, 2)).collect::<Vec<_>>())
            })
            .collect();
        let mine: Vec<_> = std::iter::from_fn(|| claim_front(&word, chunk)).collect();
        let stolen: Vec<_> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
        let mut seen = vec![0u32; len as usize];
        for r in mine.iter().chain(&stolen) {
            for k in r.clone() {
                seen[k as usize] += 1;
            }
        }
        assert!(seen.iter().all(|&c| c == 1), "len {len}: owner {mine:?}, thieves {stolen:?}");
        assert!(mine.iter().all(|r| !r.is_empty() && r.len() <= chunk as usize), "{mine:?}");
        assert!(stolen.iter().all(|r| !r.is_empty() && r.len() <= 2), "{stolen:?}");
    });
}

#[test]
fn an_owner_and_a_thief_take_every_box_once() {
    exactly_once(7, 4, 1, 3);
}

#[test]
fn an_owner_and_two_thieves_take_every_box_once() {
    exactly_once(6, 4, 2, 2);
}
