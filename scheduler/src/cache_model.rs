//! The modelled cache: a per-thread LRU over box footprints, counting misses deterministically
//! where hardware counters are not available (and beside them where they are).
//!
//! Running box `k` touches its own data (`box_bytes`) and a halo of each face neighbour
//! (`halo_bytes`). A neighbour's halo hits if the thread holds that neighbour's whole box or
//! its halo. Misses are counted in 64-byte lines. For `pbs` and `static`, whose per-thread
//! box order is fixed, the figure is exactly reproducible; for dynamic executors it depends on
//! the run, as real misses do.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use crossbeam_utils::CachePadded;
use pbs::Grid;

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
    clock: u64,
    stamp: HashMap<Item, u64>,
    order: BTreeMap<u64, (Item, u64)>,
    used: u64,
    accesses: u64,
    misses: u64,
}

impl Lru {
    fn touch(&mut self, item: Item, bytes: u64, capacity: u64, hit_also: Option<Item>) {
        self.clock += 1;
        let lines = bytes.div_ceil(LINE);
        self.accesses += lines;
        let present = self.stamp.contains_key(&item) || hit_also.is_some_and(|h| self.stamp.contains_key(&h));
        if let Some(old) = self.stamp.insert(item, self.clock) {
            let v = self.order.remove(&old).expect("stamped items are ordered");
            self.order.insert(self.clock, v);
        } else {
            self.order.insert(self.clock, (item, bytes));
            self.used += bytes;
        }
        if !present {
            self.misses += lines;
        }
        while self.used > capacity {
            let (&oldest, &(victim, size)) = self.order.iter().next().expect("used > 0 means items");
            self.order.remove(&oldest);
            self.stamp.remove(&victim);
            self.used -= size;
        }
    }
}

/// Per-thread modelled caches for a grid.
pub struct CacheModel {
    grid: Grid,
    capacity: u64,
    box_bytes: u64,
    halo_bytes: u64,
    threads: Vec<CachePadded<Mutex<Lru>>>,
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
    /// A cache of `capacity` bytes per thread; each box holds `box_bytes` and its tasks read
    /// `halo_bytes` of every face neighbour.
    pub fn new(grid: Grid, threads: usize, capacity: u64, box_bytes: u64, halo_bytes: u64) -> CacheModel {
        CacheModel {
            grid,
            capacity,
            box_bytes,
            halo_bytes,
            threads: (0..threads).map(|_| CachePadded::new(Mutex::new(Lru::default()))).collect(),
        }
    }

    /// Records that the calling worker ran box `k` (call from inside the task).
    pub fn run_box(&self, k: usize) {
        let t = current_worker().unwrap_or(0) % self.threads.len();
        self.run_box_on(t, k);
    }

    /// Records that thread `t` ran box `k`.
    pub fn run_box_on(&self, t: usize, k: usize) {
        let mut lru = self.threads[t].lock().unwrap();
        lru.touch(Item::Box(k as u32), self.box_bytes, self.capacity, None);
        let (halo_bytes, capacity) = (self.halo_bytes, self.capacity);
        self.grid.for_each_neighbour(k, |n| {
            lru.touch(Item::Halo(n as u32), halo_bytes, capacity, Some(Item::Box(n as u32)));
        });
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

    #[test]
    fn a_box_that_fits_hits_the_second_time_and_capacity_evicts() {
        let g = Grid::new(4, 1).unwrap();
        let m = CacheModel::new(g, 1, 2048, 512, 64);
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

    #[test]
    fn owner_computes_misses_less_than_scattering() {
        // 64 boxes of 1 KiB on 2 threads with 40 KiB each: blocks fit, a scatter does not reuse.
        let g = Grid::new(8, 8).unwrap();
        let run = |assign: &dyn Fn(usize, usize) -> usize| {
            let m = CacheModel::new(g, 2, 40 * 1024, 1024, 128);
            for phase in 0..5 {
                for k in 0..64 {
                    m.run_box_on(assign(k, phase), k);
                }
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
}
