//! Box data placed by first touch: every box's storage is allocated and written first by the
//! thread that will run it, so Linux places its pages on that thread's NUMA node (the default
//! "local" policy). With hwloc, [`BoxData::bind_to_owner_nodes`] also binds every box that
//! fills whole pages to its owner's node (boxes smaller than a page share pages, which no
//! binding can split; they keep first touch).
//!
//! When ownership moves, nothing moves by itself: a moved box stays where it was first touched
//! (or bound) — correct, only remote. [`BoxData::migrate`] reallocates the moved boxes on their
//! new owners (first touch there), after which they can be bound again. (hwlocality refuses the
//! `MIGRATE` flag for area binding, so binding does not move pages already touched.)

use std::sync::Mutex;

use crate::executor::Executor;

/// One heap allocation per box, made on its owner's thread.
#[derive(Debug)]
pub struct BoxData<T> {
    boxes: Vec<Box<T>>,
}

/// What [`BoxData::bind_to_owner_nodes`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Binding {
    /// Boxes bound to their owner's node.
    pub bound: usize,
    /// Boxes smaller than a page, left to first touch.
    pub too_small: usize,
    /// Boxes whose binding the system refused.
    pub failed: usize,
    /// The first refusal, in the system's words.
    pub first_error: Option<String>,
}

#[cfg(feature = "hwloc")]
fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// The thread each box should live on: the owners `exec` plans for its next phase, or static
/// blocks for executors that decide who runs a box only during the phase (`ws`, `eager`).
pub fn placement_owners(exec: &dyn Executor) -> Vec<u32> {
    exec.planned_owners().unwrap_or_else(|| placement_owners_of_blocks(exec.boxes(), exec.threads()))
}

/// The owner of every box under static blocks of `boxes` over `threads`.
pub(crate) fn placement_owners_of_blocks(boxes: usize, threads: usize) -> Vec<u32> {
    (0..threads).flat_map(|w| crate::executors::StaticBlocks::block(boxes, threads, w).map(move |_| w as u32)).collect()
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
        self.remake(exec, &moved, new);
        moved.len()
    }

    /// Reallocates the boxes `ks` on their owner, keeping their contents.
    fn remake(&mut self, exec: &dyn Executor, ks: &[usize], owners: &[u32])
    where
        T: Clone + Sync,
    {
        let boxes = &self.boxes;
        let made = make_on_owners(exec, ks, |k| owners[k] as usize, |k| (*boxes[k]).clone());
        for (k, b) in made {
            self.boxes[k] = b;
        }
    }

    /// Binds the memory of every box of at least one page to the NUMA node of its owner
    /// (`numa_of_worker[owners[k]]`): the policy for its pages (those already touched by the
    /// owner are on its node by first touch). Needs the `hwloc` feature. An error when there is
    /// not one owner per box or no worker's node is given.
    #[cfg(feature = "hwloc")]
    pub fn bind_to_owner_nodes(&self, owners: &[u32], numa_of_worker: &[usize]) -> Result<Binding, String> {
        use hwlocality::memory::binding::{MemoryBindingFlags, MemoryBindingPolicy};
        use hwlocality::object::types::ObjectType;
        if owners.len() != self.boxes.len() || numa_of_worker.is_empty() {
            return Err(format!(
                "binding {} boxes to their owners' nodes with {} owners and the nodes of {} workers",
                self.boxes.len(),
                owners.len(),
                numa_of_worker.len()
            ));
        }
        let topo = hwlocality::Topology::new().map_err(|e| e.to_string())?;
        let nodes: Vec<_> = topo
            .objects_with_type(ObjectType::NUMANode)
            .filter_map(|n| n.nodeset().map(|s| s.clone_target()))
            .collect();
        if nodes.is_empty() {
            return Err("hwloc reports no NUMA node".into());
        }
        let mut report = Binding::default();
        if std::mem::size_of::<T>() < page_size() {
            report.too_small = self.boxes.len();
            return Ok(report);
        }
        for (k, b) in self.boxes.iter().enumerate() {
            let node = &nodes[numa_of_worker[owners[k] as usize % numa_of_worker.len()] % nodes.len()];
            match topo.bind_memory_area(&**b, node, MemoryBindingPolicy::Bind, MemoryBindingFlags::empty()) {
                Ok(()) => report.bound += 1,
                Err(e) => {
                    report.failed += 1;
                    report.first_error.get_or_insert_with(|| format!("box {k}: {e}"));
                }
            }
        }
        Ok(report)
    }

    /// Boxes allocated by the calling thread, one allocation per box, as [`BoxData::migrate`]
    /// expects: for data made before the executor exists. Place them on their owners with
    /// [`BoxData::place`] once the executor does.
    pub fn from_vec(data: Vec<T>) -> BoxData<T> {
        BoxData { boxes: data.into_iter().map(Box::new).collect() }
    }

    /// Reallocates every box on its owner (`owners[k]`), keeping its contents: the first
    /// touch of data made elsewhere.
    pub fn place(&mut self, exec: &dyn Executor, owners: &[u32])
    where
        T: Clone + Sync,
    {
        assert_eq!(owners.len(), self.boxes.len(), "one owner per box");
        let all: Vec<usize> = (0..owners.len()).collect();
        self.remake(exec, &all, owners);
    }
}

/// No box: a placeholder to swap with (`std::mem::take`).
impl<T> Default for BoxData<T> {
    fn default() -> Self {
        BoxData { boxes: Vec::new() }
    }
}

/// The boxes as a slice, box `k` at index `k` (one `Box<T>` each): what
/// [`crate::for_each_box_mut`] takes.
impl<T> std::ops::Deref for BoxData<T> {
    type Target = [Box<T>];
    fn deref(&self) -> &[Box<T>] {
        &self.boxes
    }
}

impl<T> std::ops::DerefMut for BoxData<T> {
    fn deref_mut(&mut self) -> &mut [Box<T>] {
        &mut self.boxes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::current_worker;
    use crate::executors::StaticBlocks;

    #[test]
    fn each_box_is_made_by_its_owner_and_moves_with_it() {
        let exec = StaticBlocks::new(100, 3).unwrap();
        let owners = exec.planned_owners().unwrap();
        let data = BoxData::first_touch(&exec, &owners, |k| (k, current_worker().unwrap()));
        for (k, &o) in owners.iter().enumerate() {
            assert_eq!(*data[k], (k, o as usize), "box {k} was made by its owner");
        }
        let mut data = data;
        let new: Vec<u32> = owners.iter().map(|&o| (o + 1) % 3).collect();
        assert_eq!(data.migrate(&exec, &owners, &new), 100);
        assert_eq!(data[5].0, 5, "contents survive the move");
        // The boxes are the caller's to change in place.
        *data[5] = (50, 0);
        data.iter_mut().for_each(|b| b.1 = 7);
        assert_eq!((data[5].0, data[5].1, data[99].1), (50, 7, 7));
    }

    #[test]
    fn data_lives_where_the_executor_plans_to_run_it_or_in_static_blocks() {
        use crate::executors::{EagerFifo, RemapOptions, Remapper, Remapping};
        // An executor that plans: its owners (RCB, halves of a row of 10, then a remapping
        // given loads heavy at the left end).
        let mut rcb = Remapping::new(pbs::Grid::new(10, 1).unwrap(), 2, RemapOptions::new(Remapper::Rcb)).unwrap();
        rcb.hint_loads(&[9.0, 9.0, 9.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]).unwrap();
        let planned = rcb.planned_owners().unwrap();
        assert_eq!(placement_owners(&rcb), planned);
        assert_ne!(planned, placement_owners_of_blocks(10, 2), "the test needs a plan other than blocks");
        // One that decides during the phase: blocks.
        let eager = EagerFifo::new(10, 3).unwrap();
        assert_eq!(placement_owners(&eager), [0, 0, 0, 1, 1, 1, 2, 2, 2, 2]);
    }

    /// Records the worker that made a copy.
    struct MadeBy(usize, Option<usize>);
    impl Clone for MadeBy {
        fn clone(&self) -> Self {
            MadeBy(self.0, current_worker())
        }
    }

    #[test]
    fn data_made_elsewhere_is_remade_on_its_owners() {
        let exec = StaticBlocks::new(10, 2).unwrap();
        let owners = exec.planned_owners().unwrap();
        let mut data = BoxData::from_vec((0..10).map(|k| MadeBy(k, None)).collect());
        assert!(data.iter().all(|b| b.1.is_none()), "made by the calling thread");
        data.place(&exec, &owners);
        for (k, b) in data.iter().enumerate() {
            assert_eq!((b.0, b.1), (k, Some(owners[k] as usize)), "box {k}");
        }
    }

    /// Page-sized boxes are bound to their owner's node (node 0 on a one-node machine); small
    /// boxes are reported as left to first touch.
    #[cfg(feature = "hwloc")]
    #[test]
    #[ignore = "needs memory binding (mbind), which containers may refuse: scripts/test.sh runs it"]
    fn page_sized_boxes_bind_to_their_owner_node() {
        let exec = StaticBlocks::new(8, 2).unwrap();
        let owners = exec.planned_owners().unwrap();
        let big = BoxData::first_touch(&exec, &owners, |k| [k as u8; 8192]);
        let r = big.bind_to_owner_nodes(&owners, &[0, 0]).unwrap();
        assert_eq!(r.bound, 8, "every page-sized box bound: {r:?}");
        // hwloc reads the binding back: every box is bound, to the only node here.
        let topo = hwlocality::Topology::new().unwrap();
        for k in 0..8 {
            let (set, policy) = topo
                .area_memory_binding::<_, hwlocality::memory::nodeset::NodeSet>(
                    &**big.boxes.get(k).unwrap(),
                    hwlocality::memory::binding::MemoryBindingFlags::empty(),
                )
                .unwrap();
            assert_eq!(policy, Some(hwlocality::memory::binding::MemoryBindingPolicy::Bind), "box {k}");
            assert!(set.weight() == Some(1), "box {k}: {set:?}");
        }
        let small = BoxData::first_touch(&exec, &owners, |k| k as u64);
        assert_eq!(small.bind_to_owner_nodes(&owners, &[0, 0]).unwrap().too_small, 8);
    }

    /// Binding with no worker's node (before: a division by zero at the first page-sized box)
    /// or a short owner list (an index past its end) is an error.
    #[cfg(feature = "hwloc")]
    #[test]
    fn binding_without_a_node_or_an_owner_per_box_is_an_error() {
        let exec = StaticBlocks::new(8, 2).unwrap();
        let owners = exec.planned_owners().unwrap();
        let big = BoxData::first_touch(&exec, &owners, |k| [k as u8; 8192]);
        assert!(big.bind_to_owner_nodes(&owners, &[]).unwrap_err().contains("the nodes of 0 workers"));
        assert!(big.bind_to_owner_nodes(&owners[..3], &[0]).unwrap_err().contains("with 3 owners"));
    }
}
