//! Stealing: when threads that ran dry take boxes from others ([`Stealing`]), and how. A
//! thread's list carries one atomic word, the owner's `front` and the thieves' `back`: the
//! owner claims chunks from the front, thieves take pairs from the back, so the owner keeps
//! the part of its cell it is working through and a box is claimed exactly once.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::{Backoff, CachePadded};
use pbs::VCores;

use super::affinity::Previous;
use crate::box_timing::{Local, Tracker};
use crate::clock;
use crate::executor::Task;

/// When threads that ran dry steal boxes.
///
/// Stealing absorbs what no mapping can: a thread slowed for part of a phase (an interrupt,
/// a neighbour on the host, a late wake-up). The balancer still fixes the lasting imbalance:
/// the criterion and its checks see *owner* loads (a thread's time, minus what it spent on
/// stolen boxes, plus what others spent on its boxes), so stealing never hides an imbalance
/// the mapping has.
///
/// `Auto` by default. Per phase, the slowest of `T` threads runs later the more threads
/// there are, whatever the mapping, and stealing takes that tail away for a few points of
/// affinity (docs/design-notes.md, "Stealing").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stealing {
    /// Owners only.
    Never,
    /// Every phase.
    Always,
    /// In every iteration after one whose threads' share of a phase (over all its phases)
    /// was measured to take at least 20 µs: on microsecond phases stealing reacts to
    /// scheduling noise rather than imbalance, and the end-of-phase search costs more than it
    /// saves (`examples/overhead.rs`).
    Auto,
}

/// Per-thread phase time from which [`Stealing::Auto`] steals, seconds: the busy time of an
/// iteration over its threads and phases, for every phase of the next iteration.
pub const STEAL_MIN_PHASE: f64 = 20e-6;

/// For every thread, the others in the order it tries them as victims: with `numa` (the node
/// of every thread), those on its own node first (a box stolen across nodes runs away from
/// its data's memory); then, within each, the threads whose vCore shares a boundary with its
/// own first (their boxes are next to its boxes, so their data is partly in its cache
/// already), then the rest. Threads without a vCore (more threads than boxes) count as
/// neighbours of everybody.
pub(crate) fn victim_order(vcores: &VCores, threads: usize, boxes: usize, numa: Option<&[usize]>) -> Vec<Vec<u32>> {
    let a = vcores.assignment();
    let mut adj = vec![vec![false; threads]; threads];
    for (t, row) in adj.iter_mut().enumerate().skip(vcores.len()) {
        row.iter_mut().enumerate().for_each(|(j, x)| *x = j != t);
    }
    for k in 0..boxes {
        let (o, s) = (a.owner[k] as usize, a.second[k]);
        // The second-nearest vCore of a box near its cell's boundary owns the other side.
        if s != pbs::assign::NONE && a.gap[k] < 4.0 {
            adj[o][s as usize] = true;
            adj[s as usize][o] = true;
        }
    }
    (0..threads)
        .map(|t| {
            let mut n: Vec<u32> = (0..threads).filter(|&j| adj[t][j]).map(|j| j as u32).collect();
            n.extend((0..threads).filter(|&j| j != t && !adj[t][j]).map(|j| j as u32));
            if let Some(node) = numa.filter(|m| m.len() == threads) {
                n.sort_by_key(|&j| node[j as usize] != node[t]); // stable: keeps the order above
            }
            n
        })
        .collect()
}

pub(super) fn pack(front: u32, back: u32) -> u64 {
    u64::from(front) | (u64::from(back) << 32)
}

pub(super) fn unpack(v: u64) -> (u32, u32) {
    (v as u32, (v >> 32) as u32)
}

/// A list's claim word: `front` in the low 32 bits (the owner's side), `back` in the high ones
/// (the thieves'). A trait so that the loom model (`tests/loom_claims.rs`) runs the same two
/// functions on loom's atomic.
pub(super) trait ClaimWord {
    fn load(&self, order: Ordering) -> u64;
    fn compare_exchange_weak(&self, current: u64, new: u64, success: Ordering, failure: Ordering) -> Result<u64, u64>;
}

impl ClaimWord for AtomicU64 {
    fn load(&self, order: Ordering) -> u64 {
        AtomicU64::load(self, order)
    }
    fn compare_exchange_weak(&self, current: u64, new: u64, success: Ordering, failure: Ordering) -> Result<u64, u64> {
        AtomicU64::compare_exchange_weak(self, current, new, success, failure)
    }
}

#[cfg(pbs_loom)]
impl ClaimWord for loom::sync::atomic::AtomicU64 {
    fn load(&self, order: Ordering) -> u64 {
        loom::sync::atomic::AtomicU64::load(self, order)
    }
    fn compare_exchange_weak(&self, current: u64, new: u64, success: Ordering, failure: Ordering) -> Result<u64, u64> {
        loom::sync::atomic::AtomicU64::compare_exchange_weak(self, current, new, success, failure)
    }
}

/// An owner claims at most this share of what is left of its list, so that its last claims
/// are small: thieves can take what it has not claimed, and the others wait at the barrier
/// for its last claim only (a whole chunk was up to 16 md boxes, about 10 µs).
const OWNER_SHARE_OF_REST: u32 = 4;

/// Owner side: takes up to `chunk` boxes from the front of a list, and no more than a
/// quarter of what is left (rounded up).
pub(super) fn claim_front(c: &impl ClaimWord, chunk: u32) -> Option<std::ops::Range<u32>> {
    let mut v = c.load(Ordering::Acquire);
    loop {
        let (front, back) = unpack(v);
        if front >= back {
            return None;
        }
        let next = front + chunk.min((back - front).div_ceil(OWNER_SHARE_OF_REST)).max(1);
        match c.compare_exchange_weak(v, pack(next, back), Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Some(front..next),
            Err(now) => v = now,
        }
    }
}

/// What a thief found in a list.
pub(super) enum Steal {
    /// These boxes are now the thief's.
    Took(std::ops::Range<u32>),
    /// The owner has not started yet (one waking up late is not worth scattering its cell):
    /// look again later.
    NotYet,
    /// Nothing left: the owner has claimed every box.
    Nothing,
}

/// Thief side: takes up to `chunk` boxes from the back of a list with boxes its owner has not
/// claimed, if the owner has started (or `unstarted_too`). Thieves leave the owner nothing
/// but the chunk it is running: leaving it its next chunk as well made the others wait for
/// it at the end of each phase, twice as long (docs/design-notes.md, "Stealing").
pub(super) fn claim_back(c: &impl ClaimWord, chunk: u32, unstarted_too: bool) -> Steal {
    let mut v = c.load(Ordering::Acquire);
    loop {
        let (front, back) = unpack(v);
        if back <= front {
            return Steal::Nothing;
        }
        if front == 0 && !unstarted_too {
            return Steal::NotYet;
        }
        let start = back.saturating_sub(chunk).max(front);
        match c.compare_exchange_weak(v, pack(front, start), Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Steal::Took(start..back),
            Err(now) => v = now,
        }
    }
}

/// One thread's list's claim word and the stolen time of a phase, in one padded record: the
/// executor reads and resets it (through `&mut`) after each stealing phase, one cache line a
/// thread to fetch (docs/results.md, "a fifth lease"), and a thief that just took boxes
/// through the word adds its time to the line it holds.
#[derive(Debug, Default)]
pub(super) struct ThreadSteals {
    /// The list's claim word ([`pack`]): `pack(0, len)` between phases.
    pub claim: AtomicU64,
    /// Clock ticks it spent on other lists' boxes.
    pub foreign: AtomicU64,
    /// Clock ticks thieves spent on its boxes (its *lost* time: stolen time counts for the
    /// owner).
    pub lost: AtomicU64,
}

/// Every thread's list of boxes with its claim word and record of steals, and where each box
/// ran before (for the affinity figure).
pub(super) struct Lists<'a> {
    pub lists: &'a [Vec<u32>],
    pub steals: &'a [CachePadded<ThreadSteals>],
    pub previous: Previous<'a>,
    /// A thread that runs none of its boxes (it lends its core: `lending.rs`): its list is
    /// taken to the last box, at once.
    pub lender: Option<usize>,
}

/// How long a thief waits, at most, for victims with boxes to spare that have not started,
/// before it takes their boxes too.
///
/// A victim that starts a little late (a late wake-up) is worth waiting for: stealing its
/// boxes before it starts would scatter its cell. But one that is not running at all (more
/// threads than free cores, another process on its core) may not start for a whole time
/// slice, and a thief spinning for it holds the very core it needs (docs/soundness.md).
const LATE_VICTIM_WAIT: std::time::Duration = std::time::Duration::from_micros(20);

/// Thief side of a phase, once thread `t` has run its own list: takes pairs of boxes from the
/// back of the lists in `victims` (its neighbours first), starting over from the first after
/// every theft, until no list has a box left. While the only victims with
/// boxes to spare have not started, it spins, then yields its core, for at most
/// [`LATE_VICTIM_WAIT`] (counted from its last theft); from then on, for the rest of the
/// phase, it steals from unstarted victims as from the others, from the back of their lists.
/// Counts its runs' affinity, and returns the ticks it spent on them.
pub(super) fn steal_from(
    victims: &[u32],
    at: &Lists,
    t: usize,
    tracker: &Tracker,
    local: &mut Local,
    task: Task<'_>,
) -> u64 {
    let mut spent_abroad = 0;
    let backoff = Backoff::new();
    let mut waiting_since: Option<std::time::Instant> = None;
    let mut late = false;
    loop {
        let mut waiting = false;
        let mut took = false;
        for &v in victims {
            let late = late || at.lender == Some(v as usize);
            let (list, record) = (&at.lists[v as usize], &at.steals[v as usize]);
            match claim_back(&record.claim, 2, late) {
                Steal::Took(r) => {
                    let ks = &list[r.start as usize..r.end as usize];
                    at.previous.thief_ran(list, r, v as usize, t, local);
                    let t0 = clock::ticks();
                    tracker.run_chunk(ks, t, local, task);
                    let dt = clock::ticks().wrapping_sub(t0);
                    spent_abroad += dt;
                    record.lost.fetch_add(dt, Ordering::Relaxed);
                    took = true;
                    break; // neighbours first: start over from the nearest
                }
                Steal::NotYet => waiting = true,
                Steal::Nothing => {}
            }
        }
        if !took && !waiting {
            return spent_abroad;
        }
        if took {
            waiting_since = None;
            backoff.reset();
        } else {
            let since = *waiting_since.get_or_insert_with(std::time::Instant::now);
            if since.elapsed() >= LATE_VICTIM_WAIT {
                late = true;
                continue;
            }
            // Spins a few rounds, then yields: a victim waiting for this core gets it.
            backoff.snooze();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Victims: touching cells first; with NUMA nodes, the own node's threads before the
    /// others, each group keeping that order; every other thread exactly once.
    #[test]
    fn victims_on_the_own_node_come_first_then_neighbours() {
        use pbs::{Grid, Problem};
        let grid = Grid::new(16, 4).unwrap();
        let loads = vec![1.0; grid.len()];
        let problem = Problem::new(grid, &loads, 4).unwrap();
        // Four vertical strips, left to right 0 | 2 | 1 | 3 (not in index order, so that
        // neighbours first is not the index order), each vCore 0.3 right of its strip's middle
        // (so that no box lies at exactly the gap that makes it a boundary box).
        let positions = [0, 2, 1, 3].map(|strip| [2.3 + 4.0 * f64::from(strip), 2.0, 0.5]).to_vec();
        let vcores = VCores::new(&problem, positions, vec![0.0; 4]).unwrap();
        let flat = victim_order(&vcores, 4, grid.len(), None);
        assert_eq!(flat, vec![vec![2, 1, 3], vec![2, 3, 0], vec![0, 1, 3], vec![1, 0, 2]], "neighbours first");
        // Threads 0 and 3 on node 0, 1 and 2 on node 1.
        let numa = [0, 1, 1, 0];
        let order = victim_order(&vcores, 4, grid.len(), Some(&numa));
        assert_eq!(order[1], vec![2, 3, 0], "its node's thread 2, then the neighbour 3 on node 0");
        assert_eq!(order[0], vec![3, 2, 1], "its node's thread 3 first, though not touching");
        for (t, o) in order.iter().enumerate() {
            let mut sorted = o.clone();
            sorted.sort();
            assert_eq!(sorted, (0..4u32).filter(|&j| j as usize != t).collect::<Vec<_>>());
        }
        assert_eq!(victim_order(&vcores, 4, grid.len(), Some(&[0, 1])), flat, "a map of the wrong length is ignored");
    }

    /// A thief takes a lender's list at once, and waits for a victim that has not started only
    /// for a while: one that never starts (off its core for a time slice) loses its whole list,
    /// from the back in pairs, and the phase ends.
    #[test]
    fn a_thief_takes_a_lenders_list_at_once_and_a_late_victims_after_a_wait() {
        use super::super::affinity::LastRuns;
        use crate::box_timing::BoxTimer;
        // Thread 0 the thief with nothing of its own, 1 a victim that never starts, 2 a lender.
        let lists = vec![vec![], vec![0, 1, 2, 3, 4], vec![5, 6, 7]];
        let steals: Vec<CachePadded<ThreadSteals>> = lists
            .iter()
            .map(|l| {
                let s = ThreadSteals::default();
                s.claim.store(pack(0, l.len() as u32), Ordering::Relaxed);
                CachePadded::new(s)
            })
            .collect();
        let last = LastRuns::new(8, 3);
        let at = Lists { lists: &lists, steals: &steals, previous: last.previous(), lender: Some(2) };
        let tracker = Tracker::new(8, 3, BoxTimer::OFF).unwrap();
        let ran = std::sync::Mutex::new(Vec::new());
        let mut local = Local::default();
        // The unstarted victim comes first in the order, yet the lender's boxes go first.
        steal_from(&[1, 2], &at, 0, &tracker, &mut local, Task::Each(&|k| ran.lock().unwrap().push(k)));
        assert_eq!(ran.into_inner().unwrap(), [6, 7, 5, 3, 4, 1, 2, 0]);
        for s in &steals[1..] {
            assert_eq!(unpack(s.claim.load(Ordering::Relaxed)), (0, 0), "the owners claimed nothing");
        }
    }

    /// An owner claiming from the front and a thief from the back, concurrently, share a list
    /// between them: every box is claimed exactly once.
    #[test]
    fn owner_and_thief_claim_every_box_exactly_once() {
        for (len, chunk) in [(1000u32, 4u32), (1000, 1), (7, 128), (64, 3), (0, 4)] {
            let word = AtomicU64::new(pack(0, len));
            let (mine, stolen) = std::thread::scope(|s| {
                let thief = s.spawn(|| {
                    let mut got = Vec::new();
                    loop {
                        match claim_back(&word, 2, false) {
                            Steal::Took(r) => got.push(r),
                            Steal::NotYet => std::hint::spin_loop(), // the owner has not started
                            Steal::Nothing => return got,
                        }
                    }
                });
                let mut got = Vec::new();
                while let Some(r) = claim_front(&word, chunk) {
                    got.push(r);
                }
                (got, thief.join().unwrap())
            });
            let mut seen = vec![0u32; len as usize];
            for r in mine.iter().chain(&stolen) {
                for k in r.clone() {
                    seen[k as usize] += 1;
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "len {len}: claims {mine:?} / {stolen:?}");
            assert!(mine.iter().all(|r| r.len() <= chunk as usize));
            assert!(stolen.iter().all(|r| r.len() <= 2));
        }
    }

    /// The ends of a list, one claim at a time: `(front, back)` before and what is taken.
    #[test]
    fn claims_take_from_their_own_end_and_never_cross() {
        let took = |s: Steal| match s {
            Steal::Took(r) => Some(r),
            _ => None,
        };
        let word = AtomicU64::new(pack(0, 10));
        assert!(matches!(claim_back(&word, 2, false), Steal::NotYet), "the owner has not started");
        assert_eq!(took(claim_back(&AtomicU64::new(pack(0, 10)), 2, true)), Some(8..10), "a late owner");
        assert_eq!(claim_front(&word, 3), Some(0..3));
        assert_eq!(took(claim_back(&word, 2, false)), Some(8..10));
        assert_eq!(unpack(word.load(Ordering::Relaxed)), (3, 8));
        // The owner's next chunk is not kept for it: thieves take up to its front.
        assert_eq!(took(claim_back(&word, 2, false)), Some(6..8));
        assert_eq!(took(claim_back(&word, 2, false)), Some(4..6));
        assert_eq!(took(claim_back(&word, 2, false)), Some(3..4), "the last box before the owner's front");
        assert!(matches!(claim_back(&word, 2, false), Steal::Nothing), "every box claimed");
        // One box left between the ends: a thief takes that box, not one the owner has.
        let word = AtomicU64::new(pack(5, 6));
        assert_eq!(took(claim_back(&word, 2, false)), Some(5..6));
        assert_eq!(claim_front(&word, 4), None);
        let word = AtomicU64::new(pack(8, 10));
        assert_eq!(claim_front(&word, 4), Some(8..9), "a quarter of what is left, rounded up");
        assert_eq!(claim_front(&word, 4), Some(9..10), "never past the thieves' end");
        assert_eq!(claim_front(&word, 4), None);
        // Whole chunks while a quarter of the rest is more; then smaller claims to the end.
        let word = AtomicU64::new(pack(0, 100));
        let claims: Vec<u32> = std::iter::from_fn(|| claim_front(&word, 16)).map(|r| r.len() as u32).collect();
        assert_eq!(claims, [16, 16, 16, 13, 10, 8, 6, 4, 3, 2, 2, 1, 1, 1, 1]);
    }
}
