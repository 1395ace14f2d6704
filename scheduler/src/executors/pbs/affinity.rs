//! The affinity figure (box runs on the thread of the box's run in the phase before), counted
//! by the threads as they run the boxes, not by the executor after the phase.
//!
//! Counted after each phase from the thieves' logs, it was a serial pass on the critical path
//! that grew with the threads (the logs' boxes, their memory, one record a thread), the larger
//! part of pbs's own work in a phase where it was timed, on the 2-core VM (docs/design-notes.md,
//! "Affinity counted by the threads").
//! Two facts let each thread count its own runs instead:
//!
//! - a list's claim word ends a stealing phase with the boxes its owner ran in front of one
//!   position, the *split*, and the boxes thieves took behind it (`stealing.rs`; in a phase
//!   without stealing the split is the list's length); a thief writes its id into the *mark*
//!   of each box it runs;
//! - a box runs once in a phase, so its mark is read and written by one thread a phase, and the
//!   pool's barrier orders one phase's writes before the next phase's reads: relaxed accesses
//!   suffice.
//!
//! So between phases, a box at position `p` of thread `v`'s list last ran on `v` if `p` is
//! before the list's split, else on the thread its mark names. An owner counts its runs from
//! its claims' positions and the split alone, without touching a mark; a thief reads and writes
//! the marks of the boxes it took. After the owners change (the positions no longer mean what
//! they did) the executor writes every box's last thread into the marks, and for one phase
//! every run compares with its mark ([`LastRuns::owners_change`]); after a phase a task
//! panicked in, the marks are forgotten and the next phase compares with nothing.

use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering};

// A mark of a box that has not run (or whose last run was forgotten): the tracker's.
use crate::box_timing::{Local, NEVER};

/// Where each box ran last, between phases.
pub(super) struct LastRuns {
    /// Per box: the thief that ran it, for a box at or behind its list's split; while `every`
    /// is set, the thread that ran it last, whatever its position. [`NEVER`] if none did.
    marks: Vec<AtomicU32>,
    /// Per list: its split in the last phase (its length after a phase without stealing).
    split: Vec<u32>,
    /// The marks name every box's last thread: before the first phase, after the owners
    /// changed, and after a phase a task panicked in.
    every: bool,
}

/// What the threads of a phase read of [`LastRuns`].
#[derive(Clone, Copy)]
pub(super) struct Previous<'a> {
    marks: &'a [AtomicU32],
    split: &'a [u32],
    every: bool,
}

impl LastRuns {
    /// No box has run yet.
    pub fn new(boxes: usize, threads: usize) -> LastRuns {
        LastRuns { marks: (0..boxes).map(|_| AtomicU32::new(NEVER)).collect(), split: vec![0; threads], every: true }
    }

    /// What a phase's threads compare their runs with.
    pub fn previous(&self) -> Previous<'_> {
        Previous { marks: &self.marks, split: &self.split, every: self.every }
    }

    /// After a phase that ended without a panic: list `t`'s boxes before `split` ran on `t`,
    /// the others on the thieves that marked them. Called for every list.
    pub fn set_split(&mut self, t: usize, split: u32) {
        self.split[t] = split;
    }

    /// After every list's [`LastRuns::set_split`].
    pub fn phase_ended(&mut self) {
        self.every = false;
    }

    /// The owners are about to change from those of `lists` (each thread's boxes, as the last
    /// phase ran them): writes every box's last thread into its mark.
    pub fn owners_change(&mut self, lists: &[Vec<u32>]) {
        if self.every {
            return; // the marks already say it
        }
        for (v, list) in lists.iter().enumerate() {
            for &k in &list[..(self.split[v] as usize).min(list.len())] {
                *self.marks[k as usize].get_mut() = v as u32;
            }
        }
        self.every = true;
    }

    /// After a phase a task panicked in (some boxes did not run): the next phase compares with
    /// nothing.
    pub fn forget(&mut self) {
        self.marks.iter_mut().for_each(|m| *m.get_mut() = NEVER);
        self.every = true;
    }
}

impl Previous<'_> {
    /// Thread `t` ran the positions `at` of its own list `list`.
    #[inline]
    pub fn owner_ran(&self, list: &[u32], at: Range<u32>, t: usize, local: &mut Local) {
        if self.every {
            let (mut same, mut compared) = (0, 0);
            for &k in &list[at.start as usize..at.end as usize] {
                let last = self.marks[k as usize].load(Ordering::Relaxed);
                compared += u64::from(last != NEVER);
                same += u64::from(last == t as u32);
            }
            local.count_affinity(same, compared);
        } else {
            // Before the split its owner ran them; behind it, a thief.
            let same = at.end.min(self.split[t]).saturating_sub(at.start);
            local.count_affinity(u64::from(same), u64::from(at.end - at.start));
        }
    }

    /// Thread `t` ran the positions `at` of thread `v`'s list `list`, as a thief.
    #[inline]
    pub fn thief_ran(&self, list: &[u32], at: Range<u32>, v: usize, t: usize, local: &mut Local) {
        let (mut same, mut compared) = (0, 0);
        for p in at {
            let mark = &self.marks[list[p as usize] as usize];
            let last = if !self.every && p < self.split[v] { v as u32 } else { mark.load(Ordering::Relaxed) };
            compared += u64::from(last != NEVER);
            same += u64::from(last == t as u32);
            mark.store(t as u32, Ordering::Relaxed);
        }
        local.count_affinity(same, compared);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One phase as the executor runs it: each list's owner runs the positions before `split`,
    /// thieves (`thief` of each position behind it, never the owner) the others. Returns
    /// (same, compared) as the threads count them, and each box's thread.
    fn run_phase(
        runs: &mut LastRuns,
        lists: &[Vec<u32>],
        splits: &[u32],
        thief: &dyn Fn(usize, u32) -> usize,
        boxes: usize,
    ) -> ((u64, u64), Vec<u32>) {
        let mut local = Local::default();
        let mut ran = vec![NEVER; boxes];
        let previous = runs.previous();
        for (v, list) in lists.iter().enumerate() {
            // Owners claim in pieces of up to three positions, thieves take one at a time.
            let s = splits[v].min(list.len() as u32);
            for start in (0..s).step_by(3) {
                previous.owner_ran(list, start..(start + 3).min(s), v, &mut local);
            }
            for p in (s..list.len() as u32).rev() {
                let t = thief(v, p);
                previous.thief_ran(list, p..p + 1, v, t, &mut local);
                ran[list[p as usize] as usize] = t as u32;
            }
            for &k in &list[..s as usize] {
                ran[k as usize] = v as u32;
            }
        }
        for (v, list) in lists.iter().enumerate() {
            runs.set_split(v, splits[v].min(list.len() as u32));
        }
        runs.phase_ended();
        (local.affinity_counts(), ran)
    }

    /// The lists of `owners` (one thread below `threads` per box).
    fn lists_of(owners: &[u32], threads: usize) -> Vec<Vec<u32>> {
        let mut lists = vec![Vec::new(); threads];
        for (k, &o) in owners.iter().enumerate() {
            lists[o as usize].push(k as u32);
        }
        lists
    }

    proptest! {
        // Under Miri, there to check the marks' atomics rather than the counting, 256 cases took
        // 331 s (2026-12-01): eight.
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 8 } else { 256 }))]

        /// Over phases with steals and owner changes, the threads' counts equal a comparison of
        /// every box's thread with its thread in the phase before.
        #[test]
        fn the_threads_count_what_a_comparison_of_every_box_counts(
            threads in 2usize..5,
            boxes in 1usize..40,
            phases in proptest::collection::vec(
                (proptest::collection::vec(0u32..6, 5), any::<u64>(), proptest::bool::weighted(0.3)),
                1..8,
            ),
        ) {
            let mut owners: Vec<u32> = (0..boxes).map(|k| (k % threads) as u32).collect();
            let mut lists = lists_of(&owners, threads);
            let mut runs = LastRuns::new(boxes, threads);
            let mut before: Option<Vec<u32>> = None;
            for (stolen, seed, change) in phases {
                if change {
                    runs.owners_change(&lists);
                    owners = (0..boxes).map(|k| ((k as u64 ^ seed) % threads as u64) as u32).collect();
                    lists = lists_of(&owners, threads);
                }
                let splits: Vec<u32> =
                    lists.iter().enumerate().map(|(v, l)| (l.len() as u32).saturating_sub(stolen[v % 5])).collect();
                let thief = |v: usize, p: u32| {
                    let t = ((seed >> (p % 32)) as usize + v + 1) % threads;
                    if t == v { (v + 1) % threads } else { t }
                };
                let ((same, compared), ran) = run_phase(&mut runs, &lists, &splits, &thief, boxes);
                let (want_same, want_compared) = match &before {
                    None => (0, 0),
                    Some(b) => (b.iter().zip(&ran).filter(|(x, y)| x == y).count() as u64, boxes as u64),
                };
                prop_assert_eq!((same, compared), (want_same, want_compared));
                before = Some(ran);
            }
        }
    }

    /// A forgotten phase (a task panicked) leaves nothing to compare with.
    #[test]
    fn after_a_forgotten_phase_nothing_is_compared() {
        let lists = vec![vec![0, 1, 2], vec![3, 4]];
        let mut runs = LastRuns::new(5, 2);
        let ((_, compared), _) = run_phase(&mut runs, &lists, &[3, 1], &|v, _| 1 - v, 5);
        assert_eq!(compared, 0, "the first phase has nothing before it");
        let ((same, compared), _) = run_phase(&mut runs, &lists, &[2, 2], &|v, _| 1 - v, 5);
        assert_eq!((same, compared), (3, 5), "box 2 went to thread 1, box 4 came back to it");
        runs.forget();
        let ((_, compared), _) = run_phase(&mut runs, &lists, &[3, 2], &|v, _| 1 - v, 5);
        assert_eq!(compared, 0);
    }
}
