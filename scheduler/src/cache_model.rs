//! The modelled cache: a per-thread LRU over box footprints, counting misses where hardware
//! counters are not available (and beside them where they are).
//!
//! Running box `k` touches its own data (`box_bytes`) and a halo of each face neighbour
//! (`halo_bytes`). A neighbour's halo hits if the thread holds that neighbour's whole box or
//! its halo. Misses are counted in 64-byte lines. A run also writes part of its box
//! (`written_bytes`), and the other threads' copies lose that much, as a coherent cache
//! invalidates written lines, and all of their copy of the box's halo (read from what was last
//! written): the stencil keeps two buffers per box and writes one per run, so a run elsewhere
//! leaves half of a thread's copy valid and a second one none.
//!
//! The writes reach the other threads' copies at the phase's end ([`CacheModel::end_phase`]):
//! in a phase every task reads what the phase before wrote (the apps' two buffers), so a
//! neighbour's write during the phase does not spoil a halo read in it; the next phase's reads
//! find it stale. Each box runs once a phase, so the misses depend only on each thread's
//! sequence of boxes, not on how the threads' runs interleave: for `static` they are exactly
//! reproducible, as for any executor that gives each thread the same boxes in the same order
//! (pbs's, only where its stealing and rebalancings, which follow measured times, came out
//! the same). A replay with no phases (StarPU's dataflow in
//! `pbs-bench starpu`) ends a "phase" after every run.
//!
//! A write visits only the threads that hold a copy, found in a directory of holders (one bit
//! per thread and item), as a coherence directory does: visiting every thread's cache took
//! `threads - 1` contended locks per box, the likely reason why md runs of 128×128 boxes at
//! 16 threads on 16 cores outlasted a minute (docs/results.md, "a fifth lease").

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crossbeam_utils::CachePadded;
use pbs::Grid;

use crate::error::Error;
use crate::executor::current_worker;

const LINE: u64 = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Item {
    Box(u32),
    Halo(u32),
}

/// One thread's LRU.
#[derive(Debug, Default)]
struct Lru {
    /// The thread whose cache this is (its bit in [`Holders`]).
    thread: usize,
    clock: u64,
    /// Per cached item: its last use and its valid bytes.
    stamp: HashMap<Item, (u64, u64)>,
    /// Items by last use.
    order: BTreeMap<u64, Item>,
    used: u64,
    accesses: u64,
    misses: u64,
    /// Boxes this thread ran (and wrote) in the phase under way.
    written: Vec<u32>,
}

impl Lru {
    /// Reads `bytes` of `item`: the lines not cached miss (none if `hit_also`, an item and its
    /// full size, is cached whole), then the item is cached whole and the least recently used
    /// items are evicted down to `capacity`.
    fn touch(&mut self, item: Item, bytes: u64, capacity: u64, hit_also: Option<(Item, u64)>, holders: &Holders) {
        self.clock += 1;
        let lines = bytes.div_ceil(LINE);
        self.accesses += lines;
        let whole_elsewhere = hit_also.is_some_and(|(h, size)| self.stamp.get(&h).is_some_and(|&(_, v)| v >= size));
        let valid = match self.stamp.insert(item, (self.clock, bytes)) {
            Some((old, valid)) => {
                self.order.remove(&old).expect("stamped items are ordered");
                valid
            }
            None => {
                holders.set(item, self.thread);
                0
            }
        };
        self.order.insert(self.clock, item);
        // An item is always touched with the same size, and invalidation only lowers it.
        self.used += bytes - valid;
        if !whole_elsewhere {
            self.misses += lines - valid.div_ceil(LINE);
        }
        while self.used > capacity {
            let (&oldest, &victim) = self.order.iter().next().expect("used > 0 means items");
            self.order.remove(&oldest);
            let (_, size) = self.stamp.remove(&victim).expect("ordered items are stamped");
            self.used -= size;
            holders.clear(victim, self.thread);
        }
    }

    /// Drops `bytes` of `item`'s valid bytes (all of them if it holds fewer).
    fn invalidate(&mut self, item: Item, bytes: u64, holders: &Holders) {
        let Some(entry) = self.stamp.get_mut(&item) else { return };
        let dropped = bytes.min(entry.1);
        entry.1 -= dropped;
        self.used -= dropped;
        if entry.1 == 0 {
            let (stamp, _) = self.stamp.remove(&item).expect("just found");
            self.order.remove(&stamp);
            holders.clear(item, self.thread);
        }
    }
}

/// Which threads cache each item: bit `t % 64` of word `t / 64` of the item's words. A thread
/// sets and clears its own bits under its LRU's lock; a writer reads the others' without it.
/// A bit read stale costs a lock that finds nothing, or misses a copy made while the write
/// ran: a race between a read and a write, which a real cache resolves either way too. So
/// `Relaxed` is enough: the bits only say whose lock to take, and the LRUs sit behind locks.
#[derive(Debug)]
struct Holders {
    words_per_item: usize,
    bits: Vec<AtomicU64>,
}

impl Holders {
    fn new(boxes: usize, threads: usize) -> Holders {
        let words_per_item = threads.div_ceil(64);
        Holders { words_per_item, bits: (0..2 * boxes * words_per_item).map(|_| AtomicU64::new(0)).collect() }
    }

    /// The words of `item`'s bits.
    fn words(&self, item: Item) -> &[AtomicU64] {
        let index = match item {
            Item::Box(k) => 2 * k as usize,
            Item::Halo(k) => 2 * k as usize + 1,
        };
        &self.bits[index * self.words_per_item..(index + 1) * self.words_per_item]
    }

    fn set(&self, item: Item, t: usize) {
        self.words(item)[t / 64].fetch_or(1 << (t % 64), Ordering::Relaxed);
    }

    fn clear(&self, item: Item, t: usize) {
        self.words(item)[t / 64].fetch_and(!(1 << (t % 64)), Ordering::Relaxed);
    }

    /// The threads other than `t` that hold `item`.
    fn others(&self, item: Item, t: usize) -> impl Iterator<Item = usize> + '_ {
        self.words(item)
            .iter()
            .enumerate()
            .flat_map(|(w, word)| {
                let mut bits = word.load(Ordering::Relaxed);
                std::iter::from_fn(move || {
                    let b = bits.trailing_zeros();
                    (b < 64).then(|| {
                        bits &= bits - 1;
                        64 * w + b as usize
                    })
                })
            })
            .filter(move |&u| u != t)
    }
}

/// What a box's task touches, in bytes: the cache model's view of an app.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footprint {
    /// Of its own box, read or written.
    pub box_bytes: u64,
    /// Read of each face neighbour's box.
    pub halo_bytes: u64,
    /// Of its own box, written (at most `box_bytes`).
    pub written_bytes: u64,
}

/// Per-thread modelled caches for a grid.
pub struct CacheModel {
    grid: Grid,
    capacity: u64,
    footprint: Footprint,
    threads: Vec<CachePadded<Mutex<Lru>>>,
    holders: Holders,
}

/// Misses and accesses, in 64-byte lines, summed over threads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ModelledMisses {
    /// Lines accessed.
    pub accesses: u64,
    /// Lines missed.
    pub misses: u64,
}

impl CacheModel {
    /// A cache of `capacity` bytes per thread, for tasks that touch `footprint`;
    /// [`Error::NoThreads`] for 0 threads.
    pub fn new(grid: Grid, threads: usize, capacity: u64, footprint: Footprint) -> Result<CacheModel, Error> {
        if threads == 0 {
            return Err(Error::NoThreads);
        }
        let footprint = Footprint { written_bytes: footprint.written_bytes.min(footprint.box_bytes), ..footprint };
        Ok(CacheModel {
            grid,
            capacity,
            footprint,
            threads: (0..threads)
                .map(|thread| CachePadded::new(Mutex::new(Lru { thread, ..Lru::default() })))
                .collect(),
            holders: Holders::new(grid.len(), threads),
        })
    }

    /// Records that the calling worker ran box `k` (call from inside the task).
    pub fn run_box(&self, k: usize) {
        let t = current_worker().unwrap_or(0) % self.threads.len();
        self.run_box_on(t, k);
    }

    /// Records that thread `t` ran box `k`: it reads the box and its neighbours' halos, and
    /// writes `written_bytes` of the box, which the other threads' copies lose at the phase's
    /// end ([`CacheModel::end_phase`]).
    ///
    /// # Panics
    /// If `t` is not one of the model's threads or `k` not a box of its grid.
    pub fn run_box_on(&self, t: usize, k: usize) {
        let Footprint { box_bytes, halo_bytes, written_bytes } = self.footprint;
        let holders = &self.holders;
        let mut lru = self.threads[t].lock().unwrap();
        lru.touch(Item::Box(k as u32), box_bytes, self.capacity, None, holders);
        let capacity = self.capacity;
        self.grid.for_each_neighbour(k, |n| {
            lru.touch(Item::Halo(n as u32), halo_bytes, capacity, Some((Item::Box(n as u32), box_bytes)), holders);
        });
        if written_bytes > 0 {
            lru.written.push(k as u32);
        }
    }

    /// Ends a phase: what each run of it wrote leaves the other threads' copies. Call between
    /// phases, when no box runs (after every phase that recorded runs, and before [`take`]ing
    /// the totals of the last one).
    ///
    /// [`take`]: CacheModel::take
    pub fn end_phase(&self) {
        let Footprint { halo_bytes, written_bytes, .. } = self.footprint;
        for t in 0..self.threads.len() {
            let written = std::mem::take(&mut self.threads[t].lock().unwrap().written);
            for k in written {
                for (item, bytes) in [(Item::Box(k), written_bytes), (Item::Halo(k), halo_bytes)] {
                    for u in self.holders.others(item, t) {
                        self.threads[u].lock().unwrap().invalidate(item, bytes, &self.holders);
                    }
                }
            }
        }
    }

    /// Totals since the last call, and resets them (the cache contents stay).
    pub fn take(&self) -> ModelledMisses {
        let mut m = ModelledMisses::default();
        for t in &self.threads {
            let mut lru = t.lock().unwrap();
            m.accesses += std::mem::take(&mut lru.accesses);
            m.misses += std::mem::take(&mut lru.misses);
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The directory names exactly the threads whose LRU holds each item, through
        /// touches, evictions and invalidations, with more threads than one word has bits
        /// (three of 70 run, so that their caches fill and evict): a write then reaches every
        /// copy it would by visiting every thread.
        #[test]
        fn the_directory_names_exactly_the_holders(runs in prop::collection::vec((0usize..3, 0usize..12), 1..200)) {
            let g = Grid::new(4, 3).unwrap();
            let m = CacheModel::new(g, 70, 3000, Footprint { box_bytes: 512, halo_bytes: 64, written_bytes: 256 }).unwrap();
            for (n, (i, k)) in runs.into_iter().enumerate() {
                m.run_box_on([0, 1, 69][i], k);
                if n % 5 == 4 {
                    m.end_phase();
                }
            }
            m.end_phase();
            for k in 0..12u32 {
                for item in [Item::Box(k), Item::Halo(k)] {
                    let held: Vec<usize> =
                        (0..70).filter(|&u| m.threads[u].lock().unwrap().stamp.contains_key(&item)).collect();
                    let named: Vec<usize> = m.holders.others(item, usize::MAX).collect();
                    prop_assert_eq!(held, named, "{:?}", item);
                }
            }
        }
    }

    #[test]
    fn an_lru_full_to_the_byte_evicts_nothing_and_an_invalidation_drops_only_its_bytes() {
        let holders = Holders::new(4, 1);
        let mut lru = Lru::default();
        // Two boxes of 4 lines in a cache of 8: full to the byte, nothing evicted.
        lru.touch(Item::Box(0), 256, 512, None, &holders);
        lru.touch(Item::Box(1), 256, 512, None, &holders);
        lru.touch(Item::Box(0), 256, 512, None, &holders);
        assert_eq!((lru.used, lru.accesses, lru.misses), (512, 12, 8));
        // A write elsewhere takes one line of box 1: that line alone misses when read again.
        lru.invalidate(Item::Box(1), 64, &holders);
        assert_eq!(lru.used, 448);
        lru.touch(Item::Box(1), 256, 512, None, &holders);
        assert_eq!((lru.used, lru.misses), (512, 9));
        assert!(lru.stamp.contains_key(&Item::Box(0)), "nothing evicted");
        // Dropping more than it holds drops the item.
        lru.invalidate(Item::Box(0), 1000, &holders);
        assert_eq!(lru.used, 256);
        assert!(!lru.stamp.contains_key(&Item::Box(0)) && holders.others(Item::Box(0), usize::MAX).next().is_none());
    }

    #[test]
    fn a_box_run_inside_a_phase_is_recorded_on_the_worker_that_ran_it() {
        use crate::executor::Executor;
        let g = Grid::new(8, 1).unwrap();
        let m = CacheModel::new(g, 2, 1 << 20, Footprint { box_bytes: 512, halo_bytes: 64, written_bytes: 0 }).unwrap();
        let mut exec = crate::executors::StaticBlocks::new(8, 2).unwrap();
        exec.run_phase(&|k| m.run_box(k));
        // Static blocks: boxes 0–3 on worker 0, 4–7 on worker 1.
        for (t, block) in [(0, 0..4u32), (1, 4..8)] {
            let lru = m.threads[t].lock().unwrap();
            let mut boxes: Vec<u32> =
                lru.stamp.keys().filter_map(|i| if let Item::Box(k) = i { Some(*k) } else { None }).collect();
            boxes.sort_unstable();
            assert_eq!(boxes, block.collect::<Vec<_>>(), "worker {t}");
        }
        // Off the pool, the caller counts as worker 0.
        m.run_box(7);
        assert!(m.threads[0].lock().unwrap().stamp.contains_key(&Item::Box(7)));
    }

    #[test]
    fn a_box_that_fits_hits_the_second_time_and_capacity_evicts() {
        let g = Grid::new(4, 1).unwrap();
        let m = CacheModel::new(g, 1, 2048, Footprint { box_bytes: 512, halo_bytes: 64, written_bytes: 256 }).unwrap();
        m.run_box_on(0, 0); // box 0 (8 lines) + halo of 1 (1 line): 9 misses
        assert_eq!(m.take(), ModelledMisses { accesses: 9, misses: 9 });
        m.run_box_on(0, 0); // everything is still there
        assert_eq!(m.take(), ModelledMisses { accesses: 9, misses: 0 });
        m.run_box_on(0, 1); // box 1 misses; halo of 0 hits (box 0 cached); halo of 2 misses
        assert_eq!(m.take().misses, 8 + 1);
        m.run_box_on(0, 2);
        m.run_box_on(0, 3); // now over 2 KiB: box 0, the oldest, is gone
        m.take();
        m.run_box_on(0, 0);
        assert_eq!(m.take().misses, 8, "box 0 was evicted and misses; box 1, a neighbour, is cached so its halo hits");
    }

    /// A run writing half its box (one of two buffers): another thread's copy keeps half its
    /// lines after one run elsewhere and none after two, and its copy of the box's halo none.
    #[test]
    fn a_run_elsewhere_leaves_half_the_box_and_none_of_its_halo() {
        let g = Grid::new(2, 1).unwrap();
        // 16 lines a box, 2 a halo.
        let model =
            CacheModel::new(g, 2, 1 << 20, Footprint { box_bytes: 1024, halo_bytes: 128, written_bytes: 512 }).unwrap();
        // Each run a phase of its own: its writes reach the other thread before the next run.
        struct PerRun<'a>(&'a CacheModel);
        impl PerRun<'_> {
            fn run_box_on(&self, t: usize, k: usize) {
                self.0.run_box_on(t, k);
                self.0.end_phase();
            }
            fn take(&self) -> ModelledMisses {
                self.0.take()
            }
        }
        let m = PerRun(&model);
        m.run_box_on(0, 0);
        m.run_box_on(0, 1);
        assert_eq!(m.take().misses, 16 + 2 + 16, "box 0 and the halo of 1, then box 1 (the halo of 0 is cached)");
        m.run_box_on(1, 0); // thread 1 misses box 0 and the halo of 1; thread 0 loses half of box 0
        assert_eq!(m.take().misses, 16 + 2);
        m.run_box_on(0, 0);
        assert_eq!(m.take().misses, 8, "half of box 0 is stale; the halo of box 1 is still valid");
        m.run_box_on(1, 1); // thread 0 loses half of box 1 and its halo of 1
        m.run_box_on(1, 1); // and the other half
        m.take();
        m.run_box_on(0, 0);
        assert_eq!(m.take().misses, 2, "the halo of 1 is stale and box 1, no longer whole, does not stand in for it");
        m.run_box_on(0, 1);
        assert_eq!(m.take().misses, 16, "nothing of box 1 is left; box 0's whole copy gives its halo");
    }

    #[test]
    fn owner_computes_misses_less_than_scattering() {
        // 64 boxes of 1 KiB on 2 threads with 40 KiB each: blocks fit, a scatter does not reuse.
        let g = Grid::new(8, 8).unwrap();
        let run = |assign: &dyn Fn(usize, usize) -> usize| {
            let m =
                CacheModel::new(g, 2, 40 * 1024, Footprint { box_bytes: 1024, halo_bytes: 128, written_bytes: 512 })
                    .unwrap();
            for phase in 0..5 {
                for k in 0..64 {
                    m.run_box_on(assign(k, phase), k);
                }
                m.end_phase();
                if phase == 0 {
                    m.take(); // cold start
                }
            }
            m.take().misses
        };
        let blocks = run(&|k, _| k / 32);
        let scattered = run(&|k, p| (k + p) % 2);
        assert!(blocks * 5 < scattered, "blocks {blocks} vs scattered {scattered}");
    }

    /// A neighbour's write in the same phase leaves a halo read in it valid (the phase reads
    /// what the one before wrote); the next phase finds it stale.
    #[test]
    fn a_write_reaches_the_other_threads_at_the_phase_end() {
        let g = Grid::new(2, 1).unwrap();
        let m =
            CacheModel::new(g, 2, 1 << 20, Footprint { box_bytes: 1024, halo_bytes: 128, written_bytes: 512 }).unwrap();
        m.run_box_on(0, 0); // box 0 and the halo of 1: 16 + 2 lines
        m.end_phase();
        assert_eq!(m.take().misses, 16 + 2);
        m.run_box_on(1, 1); // box 1 and the halo of 0; it writes box 1
        m.run_box_on(0, 0); // thread 0's halo of 1 is still what this phase reads: a hit
        assert_eq!(m.take().misses, 16 + 2, "thread 1's box and halo only");
        m.end_phase();
        m.run_box_on(0, 0);
        m.run_box_on(1, 1);
        m.end_phase();
        assert_eq!(m.take().misses, 2 + 2, "each halo, written in the phase before; each box whole on its thread");
    }

    proptest! {
        /// The misses depend on each thread's sequence of boxes per phase, not on how the
        /// threads' runs interleave: the same phases recorded in two interleavings count the
        /// same, access for access.
        #[test]
        fn the_misses_do_not_depend_on_the_interleaving(
            phases in prop::collection::vec((prop::collection::vec(0usize..3, 20), any::<u64>()), 1..6),
        ) {
            let g = Grid::new(5, 4).unwrap();
            let footprint = Footprint { box_bytes: 1024, halo_bytes: 128, written_bytes: 512 };
            let (a, b) = (CacheModel::new(g, 3, 6 * 1024, footprint).unwrap(), CacheModel::new(g, 3, 6 * 1024, footprint).unwrap());
            for (owner, seed) in &phases {
                // Box k runs on thread owner[k]; model `a` records the threads one after the
                // other, `b` in an order mixed by `seed` that keeps each thread's own order.
                for t in 0..3 {
                    for k in (0..20).filter(|&k| owner[k] == t) {
                        a.run_box_on(t, k);
                    }
                }
                let mut rng = pbs::rng::SplitMix64::new(*seed);
                let mut left: Vec<Vec<usize>> = (0..3).map(|t| (0..20).filter(|&k| owner[k] == t).collect()).collect();
                while left.iter().any(|l| !l.is_empty()) {
                    let t = (rng.next_u64() % 3) as usize;
                    if let Some(&k) = left[t].first() {
                        left[t].remove(0);
                        b.run_box_on(t, k);
                    }
                }
                a.end_phase();
                b.end_phase();
                prop_assert_eq!(a.take(), b.take());
            }
        }
    }

    /// A model of no thread is an error (before: a division by zero at the first box run).
    #[test]
    fn a_model_of_no_thread_is_an_error() {
        let footprint = Footprint { box_bytes: 512, halo_bytes: 64, written_bytes: 256 };
        assert!(matches!(CacheModel::new(Grid::new(4, 4).unwrap(), 0, 4096, footprint), Err(Error::NoThreads)));
    }
}
