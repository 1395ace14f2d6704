//! What is drawn: a plain-data snapshot of a simulation, handed from the thread that computes
//! it to whoever draws it (the window, the headless renderer, a test).

use pbs::{Grid, Point, StepRecord};

/// Records of the history a scene carries: enough for the charts, bounded so that a long
/// session does not copy an ever longer history into every frame.
pub const HISTORY: usize = 2000;

/// A simulation's step records: every step is counted, the last [`HISTORY`] at least are kept,
/// and older ones are dropped a batch at a time, so that a session holds at most twice that
/// many however long it runs (the whole history grew by a record a step, for ever).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    kept: Vec<StepRecord>,
    steps: usize,
}

impl History {
    /// Adds the record of the next step: `record`'s `step` becomes that step's number.
    pub fn push(&mut self, record: StepRecord) {
        self.kept.push(StepRecord { step: self.steps, ..record });
        self.steps += 1;
        if self.kept.len() >= 2 * HISTORY {
            self.kept.drain(..self.kept.len() - HISTORY);
        }
    }

    /// Steps recorded since the start.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// The records kept, oldest first: the last [`HISTORY`] or more.
    pub fn records(&self) -> &[StepRecord] {
        &self.kept
    }

    /// The last [`HISTORY`] records, for a scene.
    pub fn recent(&self) -> Vec<StepRecord> {
        self.kept[self.kept.len().saturating_sub(HISTORY)..].to_vec()
    }
}

/// The box of `grid` under a point given in box units, if it lies in the domain (on a 2D grid
/// whatever the point's `z`).
pub fn box_at(grid: &Grid, p: Point) -> Option<usize> {
    let e = grid.extent();
    let z = if grid.nz() == 1 { 0.5 } else { p[2] };
    if !(p[0] >= 0.0 && p[1] >= 0.0 && z >= 0.0 && p[0] < e[0] && p[1] < e[1] && z < e[2]) {
        return None;
    }
    Some(grid.index(p[0] as usize, p[1] as usize, z as usize))
}

/// Which kind of simulation a scene comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SceneKind {
    /// The balancer alone on a load map: the markers are vCores.
    Balancer,
    /// A grid app running on the `pbs` executor: the markers are the centroids of the threads'
    /// regions, the loads are the work each box did in the last iteration.
    App,
}

/// One frame's worth of state.
#[derive(Debug, Clone)]
pub struct Scene {
    /// Where the scene comes from.
    pub kind: SceneKind,
    /// The grid of boxes.
    pub grid: Grid,
    /// Load of every box.
    pub loads: Vec<f64>,
    /// Owner (vCore or thread) of every box.
    pub owners: Vec<u32>,
    /// One marker per owner, in box units: vCore positions, or thread-region centroids (on a
    /// 2D grid at z = 0.5, the middle of its one layer).
    pub markers: Vec<Point>,
    /// Displacement of each marker in the last step along x and y, in box units (empty for
    /// apps).
    pub arrows: Vec<[f64; 2]>,
    /// One record per step (balancer) or iteration (app): max_avg, DOL extremes, migrations;
    /// the last [`HISTORY`] of them.
    pub history: Vec<StepRecord>,
    /// Load per owner: vCore charges or thread busy times.
    pub bars: Vec<f64>,
    /// What `bars` are, for the chart's title.
    pub bars_label: &'static str,
    /// A line for the status bar: where the run stands, or the last error.
    pub status: String,
}

impl Scene {
    /// The box under a point given in box units, if it lies in the domain.
    pub fn box_at(&self, p: Point) -> Option<usize> {
        box_at(&self.grid, p)
    }

    /// The marker nearest to `p` within `radius` boxes, if any (on a 2D grid across the map
    /// alone: depth within its one layer does not count).
    pub fn marker_near(&self, p: Point, radius: f64) -> Option<usize> {
        let axes = if self.grid.nz() == 1 { 2 } else { 3 };
        let d2 = |m: &Point| (0..axes).map(|d| (m[d] - p[d]).powi(2)).sum::<f64>();
        self.markers
            .iter()
            .enumerate()
            .filter(|(_, m)| d2(m) <= radius * radius)
            .min_by(|a, b| d2(a.1).total_cmp(&d2(b.1)))
            .map(|(i, _)| i)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A balancer scene of `nx × ny` boxes, all owner 0 and unloaded, with nothing else: the
    /// tests of other modules fill in what they draw.
    pub(crate) fn blank(nx: usize, ny: usize) -> Scene {
        Scene {
            kind: SceneKind::Balancer,
            grid: Grid::new(nx, ny).unwrap(),
            loads: vec![0.0; nx * ny],
            owners: vec![0; nx * ny],
            markers: vec![],
            arrows: vec![],
            history: vec![],
            bars: vec![],
            bars_label: "",
            status: String::new(),
        }
    }

    fn scene() -> Scene {
        let grid = Grid::new(4, 2).unwrap();
        Scene {
            kind: SceneKind::Balancer,
            grid,
            loads: vec![1.0; 8],
            owners: vec![0, 0, 1, 1, 0, 0, 1, 1],
            markers: vec![[1.0, 1.0, 0.5], [3.0, 1.0, 0.5]],
            arrows: vec![],
            history: vec![],
            bars: vec![4.0, 4.0],
            bars_label: "charge",
            status: String::new(),
        }
    }

    #[test]
    fn boxes_and_markers_are_found_by_position() {
        let s = scene();
        assert_eq!(s.box_at([0.5, 0.5, 0.5]), Some(0));
        assert_eq!(s.box_at([3.9, 1.9, 0.5]), Some(7));
        assert_eq!(s.box_at([4.0, 0.5, 0.5]), None);
        assert_eq!(s.box_at([-0.1, 0.5, 0.5]), None);
        assert_eq!(s.box_at([f64::NAN, 0.5, 0.5]), None);
        assert_eq!(s.box_at([0.5, 2.0, 0.5]), None, "the top edge is outside");
        assert_eq!(s.marker_near([2.6, 1.2, 0.5], 1.0), Some(1));
        assert_eq!(s.marker_near([2.0, 1.0, 0.5], 0.5), None);
        // At exactly the radius, a marker counts; of two within it, the nearer wins.
        assert_eq!(s.marker_near([1.0, 1.5, 0.5], 0.5), Some(0));
        assert_eq!(s.marker_near([1.9, 1.0, 0.5], 5.0), Some(0));
        assert_eq!(s.marker_near([2.1, 1.0, 0.5], 5.0), Some(1));
        // Distance counts both axes: 0.9 across and 3 up is farther than 1.1 across.
        assert_eq!(s.marker_near([1.9, 4.0, 0.5], 3.0), None);
        assert_eq!(s.marker_near([1.9, 3.5, 0.5], 5.0), Some(0));
        // On a 2D grid a point's z does not matter to the box under it; on a 3D grid it picks
        // the layer, and depth counts in the distance to a marker.
        assert_eq!(s.box_at([0.5, 0.5, 7.0]), Some(0));
        assert_eq!(s.marker_near([1.0, 1.0, 0.0], 0.1), Some(0), "depth within a 2D grid's layer");
        let cube = Scene { grid: Grid::new_3d(4, 2, 3).unwrap(), ..s.clone() };
        assert_eq!(cube.box_at([3.9, 1.9, 2.5]), Some(23));
        assert_eq!((cube.box_at([0.5, 0.5, 3.0]), cube.box_at([0.5, 0.5, -0.1])), (None, None));
        assert_eq!((cube.marker_near([1.0, 1.0, 1.4], 1.0), cube.marker_near([1.0, 1.0, 1.6], 1.0)), (Some(0), None));
    }

    #[test]
    fn a_history_counts_every_step_and_keeps_the_last_ones_only() {
        let record = |migrations| StepRecord { step: 99, max_avg: 1.0, dol_max: 0.0, dol_min: 0.0, migrations };
        let mut h = History::default();
        for m in 0..5 {
            h.push(record(m));
        }
        assert_eq!(
            h.recent().iter().map(|r| (r.step, r.migrations)).collect::<Vec<_>>(),
            [0, 1, 2, 3, 4].map(|s| (s, s))
        );
        for m in 5..HISTORY + 7 {
            h.push(record(m));
        }
        let kept = h.recent();
        assert_eq!((kept.len(), kept[0].step, kept[HISTORY - 1].step), (HISTORY, 7, HISTORY + 6));
        assert_eq!((h.steps(), h.records().len()), (HISTORY + 7, HISTORY + 7));
        // At twice the bound the oldest go, down to the bound; the count goes on.
        for m in HISTORY + 7..10 * HISTORY + 3 {
            h.push(record(m));
            assert!(h.records().len() < 2 * HISTORY && h.records().len() >= HISTORY.min(h.steps()));
        }
        assert_eq!(h.steps(), 10 * HISTORY + 3);
        let last = h.records().last().unwrap();
        assert_eq!((last.step, last.migrations), (10 * HISTORY + 2, 10 * HISTORY + 2));
        assert!(h.records().windows(2).all(|w| w[1].step == w[0].step + 1), "consecutive steps");
        assert_eq!(h.recent().len(), HISTORY);
    }
}
