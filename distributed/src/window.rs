//! The executor inside a rank, over the part of the grid the rank works on: the bounding box
//! of its own boxes grown by the app's halo (its *window*), not the whole grid.
//!
//! Over the whole grid, a rank's executor handed out every other rank's box in every phase (a
//! task that does nothing, or empties md's lists, plus the executor's bookkeeping of the box)
//! and balanced its threads over every box: with many ranks, nearly half of what a rank did
//! (md on 256 × 256 boxes, one rank of 64: 0.56 × the time per iteration in its window;
//! `examples/window_cost.rs`, docs/mpi.md).
//!
//! What the app is promised: every box of the window runs once per phase, as before; a box
//! outside never runs. That is right for an app whose tasks of a box beyond the halo of the
//! rank's own boxes do nothing and whose data there is dropped
//! ([`pbs_apps::distributed::Distributed::compute_only`] releases it); `run` calls
//! [`Window::follow`] and then `compute_only` whenever the owners change.

use pbs::Grid;
use pbs_scheduler::{Executor, IterationEnd, PhaseStats};
use std::ops::Range;

/// Builds the inner executor over a window's grid.
pub type Make = Box<dyn FnMut(Grid) -> Result<Box<dyn Executor + Send>, String> + Send>;

/// An executor over the window of a grid; see the module documentation.
pub struct Window {
    grid: Grid,
    /// The window's first box along each axis, and the window as a grid of its own.
    lo: [usize; 3],
    inner_grid: Grid,
    inner: Box<dyn Executor + Send>,
    make: Make,
}

/// The boxes of `grid` within `halo` boxes (along every axis) of a box `mine` marks, as their
/// bounding box: the first box along each axis and the sizes. `None` when none is marked.
pub fn bounds(grid: &Grid, mine: &[bool], halo: usize) -> Option<([usize; 3], [usize; 3])> {
    let dims = grid.dims();
    let (mut lo, mut hi) = (dims, [0; 3]);
    for k in (0..grid.len()).filter(|&k| mine[k]) {
        let c = grid.coords(k);
        for a in 0..3 {
            lo[a] = lo[a].min(c[a]);
            hi[a] = hi[a].max(c[a] + 1);
        }
    }
    if hi[0] == 0 {
        return None;
    }
    let lo = std::array::from_fn(|a| lo[a].saturating_sub(halo));
    let size = std::array::from_fn(|a| (hi[a] + halo).min(dims[a]) - lo[a]);
    Some((lo, size))
}

impl Window {
    /// The window of the boxes `mine` marks (one flag per box of `grid`), grown by `halo`,
    /// with its executor from `make`. A rank with no box gets a window of one box (box 0):
    /// an executor needs one.
    pub fn new(grid: Grid, mine: &[bool], halo: usize, mut make: Make) -> Result<Window, String> {
        let (lo, inner_grid) = Self::window_of(&grid, mine, halo)?;
        let inner = make(inner_grid)?;
        Ok(Window { grid, lo, inner_grid, inner, make })
    }

    fn window_of(grid: &Grid, mine: &[bool], halo: usize) -> Result<([usize; 3], Grid), String> {
        if mine.len() != grid.len() {
            return Err(format!("{} flags for {} boxes", mine.len(), grid.len()));
        }
        let (lo, size) = bounds(grid, mine, halo).unwrap_or(([0; 3], [1; 3]));
        Ok((lo, Grid::new_3d(size[0], size[1], size[2]).map_err(|e| e.to_string())?))
    }

    /// Moves the window to the boxes `mine` now marks: a new inner executor when the window
    /// changed (returns `true`; the new one has learnt nothing yet: hint it), else nothing.
    pub fn follow(&mut self, mine: &[bool], halo: usize) -> Result<bool, String> {
        let (lo, inner_grid) = Self::window_of(&self.grid, mine, halo)?;
        if (lo, inner_grid) == (self.lo, self.inner_grid) {
            return Ok(false);
        }
        self.inner = (self.make)(inner_grid)?;
        (self.lo, self.inner_grid) = (lo, inner_grid);
        Ok(true)
    }

    /// The boxes in the window.
    pub fn window_boxes(&self) -> usize {
        self.inner_grid.len()
    }

    /// The grid's box at the window's box `j`.
    fn global(lo: [usize; 3], inner: &Grid, grid: &Grid, j: usize) -> usize {
        let c = inner.coords(j);
        grid.index(lo[0] + c[0], lo[1] + c[1], lo[2] + c[2])
    }

    /// `values` (one per box of the grid) of the window's boxes, in the window's order.
    fn of_window<T: Copy>(&self, values: &[T]) -> Vec<T> {
        (0..self.inner_grid.len()).map(|j| values[Self::global(self.lo, &self.inner_grid, &self.grid, j)]).collect()
    }

    /// An error naming a per-box argument whose length is not the grid's.
    fn check_len(&self, name: &'static str, len: usize) -> pbs_scheduler::Result<()> {
        if len == self.grid.len() {
            return Ok(());
        }
        let value = format!("{len} values for {} boxes", self.grid.len());
        Err(pbs::Error::Parameter { name, value, reason: "one value per box of the grid" }.into())
    }
}

// SAFETY: `task` is called only from the inner executor's calls of these closures, on
// `global(j)` for the window boxes `j` the inner executor hands out (as ranges: split where a
// range crosses a row of the window, each piece a range of the grid's boxes). `global` is
// one-to-one (distinct window coordinates are distinct grid coordinates) and in range (the
// window lies inside the grid), so the inner executor's promises (each box at most once, in
// range, no return while a task runs) carry over to the grid's boxes, and `boxes()` is the
// grid's for the window's whole life. The contract's "exactly once" holds for the window's
// boxes only: boxes outside never run. That is a promise about results, not about the unique
// `&mut` that `for_each_box_mut` builds (which rests on "at most once"), and the apps `run`
// gives it to drop the boxes outside first (see the module documentation).
unsafe impl Executor for Window {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn threads(&self) -> usize {
        self.inner.threads()
    }
    fn boxes(&self) -> usize {
        self.grid.len()
    }
    fn run_phase(&mut self, task: &(dyn Fn(usize) + Sync)) -> PhaseStats {
        let (lo, inner, grid) = (self.lo, self.inner_grid, self.grid);
        self.inner.run_phase(&|j| task(Self::global(lo, &inner, &grid, j)))
    }
    fn run_phase_ranges(&mut self, task: &(dyn Fn(Range<usize>) + Sync)) -> PhaseStats {
        let (lo, inner, grid) = (self.lo, self.inner_grid, self.grid);
        self.inner.run_phase_ranges(&|js: Range<usize>| {
            // A row of the window is a range of the grid's boxes.
            let mut j = js.start;
            while j < js.end {
                let row_end = (j / inner.nx() + 1) * inner.nx();
                let end = js.end.min(row_end);
                let k = Self::global(lo, &inner, &grid, j);
                task(k..k + (end - j));
                j = end;
            }
        })
    }
    fn end_iteration(&mut self) -> IterationEnd {
        self.inner.end_iteration()
    }
    fn on_each_thread(&self, f: &(dyn Fn(usize) + Sync)) {
        self.inner.on_each_thread(f)
    }
    /// The inner executor's owners inside the window; thread 0 outside (boxes that never run,
    /// whose data the rank has dropped).
    fn planned_owners(&self) -> Option<Vec<u32>> {
        let inside = self.inner.planned_owners()?;
        let mut owners = vec![0; self.grid.len()];
        for (j, o) in inside.into_iter().enumerate() {
            owners[Self::global(self.lo, &self.inner_grid, &self.grid, j)] = o;
        }
        Some(owners)
    }
    fn hint_loads(&mut self, loads: &[f64]) -> pbs_scheduler::Result<bool> {
        self.check_len("loads", loads.len())?;
        let inside = self.of_window(loads);
        self.inner.hint_loads(&inside)
    }
    /// Told again every iteration by the run, as the inner executor is new after every
    /// change of the window.
    fn hint_iterations_left(&mut self, iterations: u64) {
        self.inner.hint_iterations_left(iterations)
    }
    fn wants_motion(&self) -> bool {
        self.inner.wants_motion()
    }
    fn hint_motion(&mut self, momentum: &[[f64; 3]], particles: &[f64]) -> pbs_scheduler::Result<bool> {
        self.check_len("momentum", momentum.len())?;
        self.check_len("particles", particles.len())?;
        let (m, p) = (self.of_window(momentum), self.of_window(particles));
        self.inner.hint_motion(&m, &p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pbs_scheduler::executors::StaticBlocks;
    use pbs_scheduler::for_each_box_mut;
    use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

    fn static_blocks(threads: usize) -> Make {
        Box::new(move |g: Grid| Ok(Box::new(StaticBlocks::new(g.len(), threads).map_err(|e| e.to_string())?) as _))
    }

    /// How many times one phase of ranges ran each box of the grid.
    fn runs_as_ranges(w: &mut Window) -> Vec<u32> {
        let counts: Vec<AtomicU32> = (0..w.boxes()).map(|_| AtomicU32::new(0)).collect();
        w.run_phase_ranges(&|ks| {
            ks.for_each(|k| {
                counts[k].fetch_add(1, Ordering::Relaxed);
            })
        });
        counts.into_iter().map(AtomicU32::into_inner).collect()
    }

    /// A window, and the timing wrapper around it, answer as the executor inside does: its
    /// name, threads, planned owners (at the window's boxes), hints taken or not, motion
    /// wanted or not, and a call on each of its threads. Over static blocks, pbs and NoRCB the
    /// hints and the motion get both answers, so that neither a constant true nor a constant
    /// false passes.
    #[test]
    fn a_window_and_its_timing_answer_as_the_executor_inside() {
        let grid = Grid::new(10, 8).unwrap();
        let mine: Vec<bool> =
            (0..grid.len()).map(|k| (2..6).contains(&(k % 10)) && (1..4).contains(&(k / 10))).collect();
        let loads: Vec<f64> = (0..grid.len()).map(|k| 1.0 + (k % 7) as f64).collect();
        let momentum: Vec<[f64; 3]> = (0..grid.len()).map(|k| [k as f64 * 0.1, 1.0, 0.5]).collect();
        let particles = vec![4.0; grid.len()];
        let make = |name: &'static str| -> Make {
            Box::new(move |g: Grid| {
                let runtime = pbs_scheduler::runtime::Runtime {
                    topology: pbs_scheduler::topology::Topology::detect(),
                    threads: 3,
                    pin: pbs_scheduler::pinning::Pinning::Off,
                    timer: pbs_scheduler::BoxTimer::default(),
                };
                runtime.executor(name, g).map(|(e, _)| e).map_err(|e| e.to_string())
            })
        };
        let (mut hints, mut motions) = (Vec::new(), Vec::new());
        for name in ["static", "pbs", "norcb"] {
            let mut timed = crate::timed::Timed::new(Box::new(Window::new(grid, &mine, 1, make(name)).unwrap()));
            let mut twin = Window::new(grid, &mine, 1, make(name)).unwrap();
            assert_eq!((timed.name(), timed.inner().name(), twin.inner.name()), (name, name, name));
            assert_eq!((timed.threads(), timed.inner().threads()), (3, 3));
            let owners = timed.planned_owners();
            assert_eq!(owners, timed.inner().planned_owners(), "{name}");
            let inside = timed.inner().inner.planned_owners();
            assert_eq!(owners.map(|o| timed.inner().of_window(&o)), inside, "{name}");
            let hinted = timed.hint_loads(&loads).unwrap();
            assert_eq!(hinted, twin.inner.hint_loads(&twin.of_window(&loads)).unwrap(), "{name}");
            let wants = timed.wants_motion();
            assert_eq!((wants, timed.inner().wants_motion()), (twin.inner.wants_motion(), wants), "{name}");
            let moved = timed.hint_motion(&momentum, &particles).unwrap();
            let (m, p) = (twin.of_window(&momentum), twin.of_window(&particles));
            assert_eq!(moved, twin.inner.hint_motion(&m, &p).unwrap(), "{name}");
            let calls = AtomicUsize::new(0);
            timed.on_each_thread(&|_| {
                calls.fetch_add(1, Ordering::Relaxed);
            });
            assert_eq!(calls.into_inner(), 3, "{name}");
            hints.push(hinted);
            motions.push((wants, moved));
            if name == "norcb" {
                // Told its run ends here, the remapper does not remap after the first
                // measurement, which a twin not told does (both fresh: the hints above spared
                // that measurement its question).
                let mut timed = crate::timed::Timed::new(Box::new(Window::new(grid, &mine, 1, make(name)).unwrap()));
                let mut twin = Window::new(grid, &mine, 1, make(name)).unwrap();
                timed.hint_iterations_left(1);
                let heavy = |k: usize| {
                    if k % 10 < 4 {
                        crate::busy_wait(std::time::Duration::from_micros(20));
                    }
                };
                let ends: Vec<bool> = [&mut timed as &mut dyn Executor, &mut twin]
                    .into_iter()
                    .map(|e| {
                        e.run_phase(&heavy);
                        e.end_iteration().rebalanced
                    })
                    .collect();
                assert_eq!(ends, [false, true], "{name}");
            }
        }
        assert!(hints.contains(&true) && hints.contains(&false), "{hints:?}");
        assert!(motions.iter().any(|m| m.0) && motions.iter().any(|m| !m.0), "{motions:?}");
        assert!(motions.iter().any(|m| m.1) && motions.iter().any(|m| !m.1), "{motions:?}");
    }

    #[test]
    fn bounds_are_the_marked_boxes_grown_by_the_halo_within_the_grid() {
        let grid = Grid::new(10, 8).unwrap();
        let mut mine = vec![false; grid.len()];
        assert_eq!(bounds(&grid, &mine, 2), None);
        mine[grid.index(4, 3, 0)] = true;
        mine[grid.index(5, 5, 0)] = true;
        assert_eq!(bounds(&grid, &mine, 0), Some(([4, 3, 0], [2, 3, 1])));
        assert_eq!(bounds(&grid, &mine, 2), Some(([2, 1, 0], [6, 7, 1])));
        mine[grid.index(9, 0, 0)] = true;
        assert_eq!(bounds(&grid, &mine, 2), Some(([2, 0, 0], [8, 8, 1])), "clamped to the grid");
    }

    /// Every box of the window runs once per phase, per box and as ranges; none outside.
    #[test]
    fn the_window_runs_its_boxes_once_and_no_other() {
        let grid = Grid::new(12, 9).unwrap();
        let mine: Vec<bool> =
            (0..grid.len()).map(|k| (3..6).contains(&grid.coords(k)[0]) && grid.coords(k)[1] < 4).collect();
        let mut w = Window::new(grid, &mine, 1, static_blocks(3)).unwrap();
        assert_eq!(w.window_boxes(), 5 * 5);
        let inside = |k: usize| (2..7).contains(&grid.coords(k)[0]) && grid.coords(k)[1] < 5;
        for ranges in [false, true] {
            let mut runs = vec![0u32; grid.len()];
            if ranges {
                runs = runs_as_ranges(&mut w);
            } else {
                for_each_box_mut(&mut w, &mut runs, |_, r| *r += 1);
            }
            for (k, &r) in runs.iter().enumerate() {
                assert_eq!(r, u32::from(inside(k)), "box {k}, ranges {ranges}");
            }
        }
        // Box by box through `run_phase` itself (the apps run ranges), with the statistics of
        // the executor inside: one run per window box.
        let counts: Vec<AtomicU32> = (0..grid.len()).map(|_| AtomicU32::new(0)).collect();
        let stats = w.run_phase(&|k| {
            counts[k].fetch_add(1, Ordering::Relaxed);
        });
        for (k, c) in counts.iter().enumerate() {
            assert_eq!(c.load(Ordering::Relaxed), u32::from(inside(k)), "box {k}, run_phase");
        }
        assert_eq!((stats.boxes.len(), stats.boxes.iter().sum::<usize>()), (3, 5 * 5));
        let owners = w.planned_owners().unwrap();
        assert_eq!(owners.len(), grid.len());
        assert!(owners.iter().all(|&o| o < 3));
    }

    /// A grid of several layers: the window is a box of boxes in all three axes.
    #[test]
    fn a_window_in_three_dimensions_runs_its_boxes_once() {
        let grid = Grid::new_3d(6, 5, 4).unwrap();
        let mine: Vec<bool> = (0..grid.len()).map(|k| grid.coords(k) == [3, 2, 1]).collect();
        let mut w = Window::new(grid, &mine, 1, static_blocks(2)).unwrap();
        assert_eq!(w.window_boxes(), 3 * 3 * 3);
        for (k, runs) in runs_as_ranges(&mut w).into_iter().enumerate() {
            let inside = grid.coords(k).iter().zip([3, 2, 1]).all(|(&a, b)| a.abs_diff(b) <= 1);
            assert_eq!(runs, u32::from(inside), "box {k}");
        }
    }

    /// Following new owners rebuilds the inner executor only when the window moves; a rank
    /// with no box keeps a window of one box; wrong lengths are named.
    #[test]
    fn the_window_follows_the_owners_and_names_bad_lengths() {
        let grid = Grid::new(8, 8).unwrap();
        let built = std::sync::Arc::new(AtomicUsize::new(0));
        let count = built.clone();
        let make: Make = Box::new(move |g: Grid| {
            count.fetch_add(1, Ordering::Relaxed);
            Ok(Box::new(StaticBlocks::new(g.len(), 2).map_err(|e| e.to_string())?) as _)
        });
        let left: Vec<bool> = (0..64).map(|k| k % 8 < 4).collect();
        let mut w = Window::new(grid, &left, 1, make).unwrap();
        assert_eq!(w.window_boxes(), 5 * 8);
        assert!(!w.follow(&left, 1).unwrap());
        let right: Vec<bool> = left.iter().map(|l| !l).collect();
        assert!(w.follow(&right, 1).unwrap());
        assert!(w.follow(&[false; 64], 1).unwrap());
        assert_eq!(w.window_boxes(), 1);
        assert_eq!(built.load(Ordering::Relaxed), 3);
        assert!(w.follow(&[true; 3], 1).unwrap_err().contains("3 flags for 64 boxes"));
        assert!(w.hint_loads(&[1.0; 3]).unwrap_err().to_string().contains("3 values for 64 boxes"));
    }
}
