//! Box data placed by first touch: every box's storage is allocated and written first by the
//! thread that will run it, so Linux places its pages on that thread's NUMA node (the default
//! "local" policy). When ownership moves, [`BoxData::migrate`] reallocates the moved boxes on
//! their new owners; until it is called, moved boxes stay where they were first touched —
//! correct, only remote. Explicit binding (hwloc membind) is not done: boxes smaller than a
//! page share pages, which no binding can split.

use std::sync::Mutex;

use crate::executor::Executor;

/// One heap allocation per box, made on its owner's thread.
pub struct BoxData<T> {
    boxes: Vec<Box<T>>,
}

/// Boxes made on one thread: `(box, allocation)`.
type Made<T> = Vec<(usize, Box<T>)>;

/// Runs `make(k)` for every `k` of `ks` on worker `owner(k)`, so each allocation is first
/// touched by the thread that will use it.
fn make_on_owners<T: Send>(
    exec: &dyn Executor,
    ks: &[usize],
    owner: impl Fn(usize) -> usize + Sync,
    make: impl Fn(usize) -> T + Sync,
) -> Made<T> {
    let threads = exec.threads();
    let made: Vec<Mutex<Made<T>>> = (0..threads).map(|_| Mutex::new(Vec::new())).collect();
    exec.on_each_thread(&|t| {
        let mine: Made<T> = ks.iter().filter(|&&k| owner(k) % threads == t).map(|&k| (k, Box::new(make(k)))).collect();
        *made[t].lock().unwrap() = mine;
    });
    made.into_iter().flat_map(|m| m.into_inner().unwrap()).collect()
}

impl<T: Send> BoxData<T> {
    /// Allocates box `k` as `init(k)` on the worker `owners[k]` (executors that decide
    /// ownership per phase use static blocks here).
    pub fn first_touch(exec: &dyn Executor, owners: &[u32], init: impl Fn(usize) -> T + Sync) -> BoxData<T> {
        assert_eq!(owners.len(), exec.boxes(), "one owner per box");
        let all: Vec<usize> = (0..owners.len()).collect();
        let mut slots: Vec<Option<Box<T>>> = (0..owners.len()).map(|_| None).collect();
        for (k, b) in make_on_owners(exec, &all, |k| owners[k] as usize, init) {
            slots[k] = Some(b);
        }
        BoxData { boxes: slots.into_iter().map(|b| b.expect("every box has an owner thread")).collect() }
    }

    /// Reallocates, on their new owner, the boxes whose owner changed; returns how many.
    pub fn migrate(&mut self, exec: &dyn Executor, old: &[u32], new: &[u32]) -> usize
    where
        T: Clone + Sync,
    {
        let moved: Vec<usize> = (0..new.len()).filter(|&k| old[k] != new[k]).collect();
        let boxes = &self.boxes;
        let made = make_on_owners(exec, &moved, |k| new[k] as usize, |k| (*boxes[k]).clone());
        for (k, b) in made {
            self.boxes[k] = b;
        }
        moved.len()
    }

    /// The data of box `k`.
    pub fn get(&self, k: usize) -> &T {
        &self.boxes[k]
    }

    /// Mutable data of box `k`.
    pub fn get_mut(&mut self, k: usize) -> &mut T {
        &mut self.boxes[k]
    }

    /// Number of boxes.
    pub fn len(&self) -> usize {
        self.boxes.len()
    }

    /// Whether there is no box.
    pub fn is_empty(&self) -> bool {
        self.boxes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::current_worker;
    use crate::executors::StaticBlocks;

    #[test]
    fn each_box_is_made_by_its_owner_and_moves_with_it() {
        let exec = StaticBlocks::new(100, 3);
        let owners = exec.planned_owners().unwrap();
        let data = BoxData::first_touch(&exec, &owners, |k| (k, current_worker().unwrap()));
        for (k, &o) in owners.iter().enumerate() {
            assert_eq!(*data.get(k), (k, o as usize), "box {k} was made by its owner");
        }
        let mut data = data;
        let new: Vec<u32> = owners.iter().map(|&o| (o + 1) % 3).collect();
        assert_eq!(data.migrate(&exec, &owners, &new), 100);
        assert_eq!(data.get(5).0, 5, "contents survive the move");
    }
}
