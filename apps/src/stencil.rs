//! `stencil`: 2D Jacobi heat diffusion on a `tiles × tiles` grid of boxes, each a `side × side`
//! tile of cells, with an extra per-box cost read from a Perlin map that drifts a fraction of a
//! box per iteration (the paper's live Perlin stress test) or jumps to a new map every
//! `rough_every` iterations. The extra cost is real floating-point work whose result is folded
//! into the box, so it cannot be optimised away, and it is deterministic.

use pbs::loadmap::PerlinMap;
use pbs::Grid;
use pbs_scheduler::cache_model::CacheModel;
use pbs_scheduler::first_touch::{placement_owners, BoxData};
use pbs_scheduler::report::Recorder;
use pbs_scheduler::{for_each_box_mut, Executor};

use super::distributed::{check_mask, Distributed, Faces, Pack, WHOLE};
use super::{fnv_from, GridApp, FNV_START};

/// The stencil app.
pub struct Stencil {
    grid: Grid,
    side: usize,
    /// The tiles, each allocated by the thread that runs its box (first touch), and the
    /// buffer the next iteration writes.
    tiles: BoxData<Vec<f64>>,
    next: BoxData<Vec<f64>>,
    /// The owners the tiles were last placed for (`None` before the first iteration).
    placed_for: Option<Vec<u32>>,
    map: PerlinMap,
    drift: f64,
    rough_every: Option<usize>,
    /// Extra work units per box at load 1 (one unit ≈ 1.5 ns; 40000 makes the Perlin cost
    /// dominate the Jacobi sweep of a 16×16 tile, as the stress test intends).
    pub work_scale: f64,
    cost: Vec<f64>,
    iteration: usize,
    /// The boxes this process computes (`None`: all; see [`Distributed`]).
    local: Option<Vec<bool>>,
}

impl Stencil {
    /// `nx × ny` boxes of `side × side` cells; the cost map drifts `drift` boxes per iteration.
    pub fn new(nx: usize, ny: usize, side: usize, drift: f64, rough_every: Option<usize>, seed: u32) -> Stencil {
        Stencil::holding(nx, ny, side, drift, rough_every, seed, None)
    }

    /// [`Stencil::new`] holding only the tiles of the boxes `holds` marks (`None`: all), for
    /// a process that computes some of them (`pbs-mpi`); the others are empty until they
    /// arrive.
    pub fn holding(
        nx: usize,
        ny: usize,
        side: usize,
        drift: f64,
        rough_every: Option<usize>,
        seed: u32,
        holds: Option<&[bool]>,
    ) -> Stencil {
        let grid = Grid::new(nx, ny).expect("non-empty grid");
        let tiles: Vec<Vec<f64>> = (0..grid.len())
            .map(|k| {
                if holds.is_some_and(|h| !h[k]) {
                    return Vec::new();
                }
                let [i, j, _] = grid.coords(k);
                // A hot square in one corner of the domain, cold elsewhere.
                let hot = i < nx / 4 && j < ny / 4;
                vec![if hot { 100.0 } else { 0.0 }; side * side]
            })
            .collect();
        // Few large features with sharp peaks: hot regions that a fixed split cannot share.
        let map = PerlinMap { seed, frequency: 1.5, octaves: 3, contrast: 4.0, ..Default::default() };
        let mut s = Stencil {
            grid,
            side,
            next: BoxData::from_vec(tiles.clone()),
            tiles: BoxData::from_vec(tiles),
            placed_for: None,
            map,
            drift,
            rough_every,
            work_scale: 40000.0,
            cost: Vec::new(),
            iteration: 0,
            local: None,
        };
        s.cost = s.map.loads(&s.grid);
        s
    }

    /// The scenario `drift` (the cost map drifts a quarter box per iteration) or `rough` (a
    /// new map every 10 iterations) on `nx × ny` tiles of 16 × 16 cells.
    pub fn by_scenario(scenario: &str, nx: usize, ny: usize, seed: u64) -> Result<Stencil, String> {
        Stencil::by_scenario_holding(scenario, nx, ny, seed, None)
    }

    /// [`Stencil::by_scenario`] holding only the tiles `holds` marks (see [`Stencil::holding`]).
    pub fn by_scenario_holding(
        scenario: &str,
        nx: usize,
        ny: usize,
        seed: u64,
        holds: Option<&[bool]>,
    ) -> Result<Stencil, String> {
        match scenario {
            "drift" => Ok(Stencil::holding(nx, ny, 16, 0.25, None, seed as u32, holds)),
            "rough" => Ok(Stencil::holding(nx, ny, 16, 0.25, Some(10), seed as u32, holds)),
            s => Err(format!("unknown stencil scenario {s:?}; expected drift or rough")),
        }
    }

    /// Box `k`'s tile in both buffers, zeros where it held none.
    fn hold(&mut self, k: usize) {
        let cells = self.side * self.side;
        for buffer in [&mut self.tiles, &mut self.next] {
            if buffer[k].len() != cells {
                *buffer[k] = vec![0.0; cells];
            }
        }
    }

    fn value(&self, k: usize, x: isize, y: isize) -> f64 {
        // Cell (x, y) relative to tile k, possibly in a neighbouring tile; outside the domain
        // the boundary is insulated (mirror).
        let s = self.side as isize;
        let [i, j, _] = self.grid.coords(k);
        let (mut gi, mut gj) = (i as isize, j as isize);
        let (mut lx, mut ly) = (x, y);
        if lx < 0 {
            gi -= 1;
            lx += s;
        } else if lx >= s {
            gi += 1;
            lx -= s;
        }
        if ly < 0 {
            gj -= 1;
            ly += s;
        } else if ly >= s {
            gj += 1;
            ly -= s;
        }
        if gi < 0 || gj < 0 || gi >= self.grid.nx as isize || gj >= self.grid.ny as isize {
            return self.tiles[k][(y.clamp(0, s - 1) * s + x.clamp(0, s - 1)) as usize];
        }
        let n = self.grid.index(gi as usize, gj as usize, 0);
        self.tiles[n][(ly * s + lx) as usize]
    }
}

impl Stencil {
    /// Keeps every tile on the thread that runs its box: placed there before the first
    /// iteration, moved there when a rebalancing gives its box to another thread.
    fn follow_owners(&mut self, exec: &dyn Executor) {
        let owners = placement_owners(exec);
        match &self.placed_for {
            Some(old) if *old == owners => return,
            Some(old) => {
                self.tiles.migrate(exec, old, &owners);
                self.next.migrate(exec, old, &owners);
            }
            None => {
                self.tiles.place(exec, &owners);
                self.next.place(exec, &owners);
            }
        }
        self.placed_for = Some(owners);
    }
}

/// Deterministic busy work: `units` rounds of a logistic map, returned so it is used.
fn busy(units: usize, seed: f64) -> f64 {
    let mut x = 0.25 + 0.5 * (seed.abs().fract());
    for _ in 0..units {
        x = 3.9 * x * (1.0 - x);
    }
    x
}

impl GridApp for Stencil {
    fn name(&self) -> &'static str {
        "stencil"
    }
    fn grid(&self) -> Grid {
        self.grid
    }
    fn footprint(&self) -> (u64, u64) {
        // A box is its tile in both buffers (read old, write new); a neighbour's edge row.
        let cell = std::mem::size_of::<f64>() as u64;
        (2 * (self.side * self.side) as u64 * cell, self.side as u64 * cell)
    }
    fn iterate(&mut self, exec: &mut dyn Executor, rec: &mut Recorder, cache: Option<&CacheModel>) {
        self.follow_owners(exec);
        let s = self.side as isize;
        let mut next = std::mem::take(&mut self.next);
        let this = &*self;
        let stats = for_each_box_mut(exec, &mut next, |k, out| {
            if this.local.as_ref().is_some_and(|l| !l[k]) {
                return;
            }
            if let Some(c) = cache {
                c.run_box(k);
            }
            let own = &this.tiles[k];
            for y in 0..s {
                for x in 0..s {
                    let c = (y * s + x) as usize;
                    // Interior cells read their own tile; the rim reads the neighbours' edges.
                    // Same operands in the same order either way, so the same bits.
                    let v = if x > 0 && y > 0 && x < s - 1 && y < s - 1 {
                        let w = s as usize;
                        0.25 * (own[c - 1] + own[c + 1] + own[c - w] + own[c + w])
                    } else {
                        0.25 * (this.value(k, x - 1, y)
                            + this.value(k, x + 1, y)
                            + this.value(k, x, y - 1)
                            + this.value(k, x, y + 1))
                    };
                    out[c] = v;
                }
            }
            let units = (this.cost[k] * this.work_scale) as usize;
            // Fold the work into the tile at a negligible weight so that it is real and
            // deterministic (the same for every executor).
            out[0] += 1e-12 * busy(units, out[0]);
        });
        rec.phase(&stats);
        self.next = std::mem::replace(&mut self.tiles, next);
        self.iteration += 1;
        self.map = match self.rough_every {
            Some(r) if self.iteration % r == 0 => self.map.rough(),
            _ => self.map.smooth(self.drift),
        };
        self.cost = self.map.loads(&self.grid);
        rec.iteration(&exec.end_iteration());
    }
    fn checksum(&self) -> u64 {
        self.checksum_from(0..self.grid.len(), FNV_START)
    }
    fn box_work(&self) -> Vec<f64> {
        self.cost.iter().map(|c| c * self.work_scale + (self.side * self.side) as f64).collect()
    }
}

impl Distributed for Stencil {
    fn halo(&self) -> usize {
        1
    }
    fn compute_only(&mut self, local: Option<Vec<bool>>) -> Result<(), String> {
        check_mask(&local, self.grid.len())?;
        if let Some(l) = &local {
            // The tiles its tasks read (its own and their face neighbours') stay; the others
            // are freed, so that a process holds its share of the grid, not the grid.
            for k in 0..self.grid.len() {
                let mut read = l[k];
                self.grid.for_each_neighbour(k, |n| read |= l[n]);
                if !read {
                    self.release(k);
                }
            }
        }
        self.local = local;
        Ok(())
    }
    fn pack_box(&self, k: usize, out: &mut Vec<u8>) {
        self.tiles[k].pack(out);
    }
    fn packed_len(&self, k: usize) -> usize {
        // The length, then the values.
        8 + 8 * self.tiles[k].len()
    }
    fn unpack_box(&mut self, k: usize, bytes: &[u8]) -> Result<(), String> {
        let tile = Vec::<f64>::unpack(bytes)?;
        if tile.len() != self.side * self.side {
            return Err(format!("a tile of {} cells for box {k}; tiles have {}", tile.len(), self.side * self.side));
        }
        // Copied into the tile in place: its pages stay where first touch put them.
        self.hold(k);
        self.tiles[k].copy_from_slice(&tile);
        Ok(())
    }
    fn checksum_from(&self, boxes: std::ops::Range<usize>, hash: u64) -> u64 {
        fnv_from(hash, self.tiles[boxes].iter().flat_map(|t| t.iter()).map(|v| v.to_bits()))
    }
    fn release(&mut self, k: usize) {
        *self.tiles[k] = Vec::new();
        *self.next[k] = Vec::new();
    }
    fn reader_part(&self, owners: &[u32], k: usize, process: u32) -> Option<u64> {
        // A cell reads its four face neighbours: a tile's rim reads one edge row or column of
        // each face neighbour, and nothing of the diagonal ones.
        let faces = Faces::towards(&self.grid, owners, k, process);
        (!faces.is_empty()).then_some(faces.bits())
    }
    fn pack_part(&self, k: usize, part: u64, out: &mut Vec<u8>) -> Result<(), String> {
        if part == WHOLE {
            self.pack_box(k, out);
            return Ok(());
        }
        let tile = &self.tiles[k];
        for face in self.faces(k, part)?.iter() {
            for c in self.face_cells(face) {
                out.extend_from_slice(&tile[c].to_le_bytes());
            }
        }
        Ok(())
    }
    fn unpack_part(&mut self, k: usize, part: u64, bytes: &[u8]) -> Result<(), String> {
        if part == WHOLE {
            return self.unpack_box(k, bytes);
        }
        let faces = self.faces(k, part)?;
        let count = faces.iter().count();
        if bytes.len() != count * self.side * 8 {
            return Err(format!("{} bytes for {count} faces of box {k}; a face has {} cells", bytes.len(), self.side));
        }
        let mut values = bytes.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")));
        self.hold(k);
        for face in faces.iter() {
            for c in self.face_cells(face) {
                self.tiles[k][c] = values.next().expect("counted above");
            }
        }
        Ok(())
    }
}

impl Stencil {
    /// The faces a part code names (see [`Faces`]), refused unless they are faces of a 2D tile.
    fn faces(&self, k: usize, part: u64) -> Result<Faces, String> {
        let faces = Faces::from_bits(part).map_err(|e| format!("box {k}: {e}"))?;
        match faces.iter().find(|&(axis, _)| axis > 1) {
            Some((axis, _)) => Err(format!("a face along axis {axis} for box {k}; the stencil's tiles are 2D")),
            None => Ok(faces),
        }
    }

    /// The cells of a tile on a face (`(axis, side)`, see [`Faces`]), in row-major order: those
    /// the face neighbour's rim reads.
    fn face_cells(&self, (axis, side): (usize, usize)) -> impl Iterator<Item = usize> {
        let s = self.side;
        let edge = if side == 0 { 0 } else { s - 1 };
        (0..s).map(move |t| if axis == 0 { t * s + edge } else { edge * s + t })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pbs_scheduler::executors::StaticBlocks;

    /// Tiles follow the owners when the mapping changes (here from 2 to 3 static blocks), and
    /// moving them changes no value.
    #[test]
    fn tiles_follow_their_owners_and_moving_them_changes_nothing() {
        let (mut two, mut three) = (StaticBlocks::new(144, 2).unwrap(), StaticBlocks::new(144, 3).unwrap());
        let mut rec = Recorder::new("static", 3);
        let (mut moving, mut staying) =
            (Stencil::new(12, 12, 4, 0.25, None, 5), Stencil::new(12, 12, 4, 0.25, None, 5));
        for it in 0..6 {
            let exec: &mut dyn Executor = if it < 3 { &mut two } else { &mut three };
            moving.iterate(exec, &mut rec, None);
            assert_eq!(moving.placed_for, Some(placement_owners(exec)), "iteration {it}");
            staying.iterate(&mut two, &mut rec, None);
        }
        assert_ne!(moving.placed_for, staying.placed_for, "the tiles moved");
        assert_eq!(moving.checksum(), staying.checksum());
    }
}
