//! `stencil`: Jacobi heat diffusion on a grid of boxes, each a tile of cells: in 2D a 5-point
//! stencil on `side × side` tiles, on a 3D grid (more than one layer of boxes) a 7-point
//! stencil on `side × side × side` tiles. Each box carries an extra cost read from a Perlin map
//! (3D noise on a 3D grid) that drifts a fraction of a box per iteration (the paper's live
//! Perlin stress test) or jumps to a new map every `rough_every` iterations. The extra cost is
//! real floating-point work whose result is folded into the box, so it cannot be optimised
//! away, and it is deterministic.

use pbs::loadmap::PerlinMap;
use pbs::Grid;
use pbs_scheduler::cache_model::{CacheModel, Footprint};
use pbs_scheduler::first_touch::{placement_owners, BoxData};
use pbs_scheduler::report::Recorder;
use pbs_scheduler::{for_each_box_mut, Executor};

use super::distributed::{check_mask, Distributed, Faces, Pack, WHOLE};
use super::{fnv_from, GridApp, FNV_START};

/// The stencil app.
pub struct Stencil {
    grid: Grid,
    /// Cells along each side of a tile (a square in 2D, a cube on a 3D grid).
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
    /// Extra work units per box at load 1 ([`Stencil::with_work_scale`]).
    work_scale: f64,
    cost: Vec<f64>,
    iteration: usize,
    /// The boxes this process computes (`None`: all; see [`Distributed`]).
    local: Option<Vec<bool>>,
}

impl Stencil {
    /// Extra work units per box at load 1 unless [`Stencil::with_work_scale`] says otherwise
    /// (one unit ≈ 1.5 ns; 40000 makes the Perlin cost dominate the Jacobi sweep of a 16×16
    /// tile, as the stress test intends).
    pub const DEFAULT_WORK_SCALE: f64 = 40000.0;

    /// The largest [`Stencil::with_work_scale`]: a box at load 1 then takes about 1.5 s of
    /// extra work an iteration; beyond, an iteration is a wait nobody meant (at 1e300, longer
    /// than the universe has been).
    pub const MAX_WORK_SCALE: f64 = 1e9;

    /// `nx × ny` boxes of `side × side` cells; the cost map drifts `drift` boxes per iteration,
    /// or is drawn anew every `rough_every` iterations.
    ///
    /// An error names the first argument no stencil can be built with: an empty grid, tiles of
    /// no cell or more than memory holds, a drift that is not finite, `rough_every` of 0.
    pub fn new(
        nx: usize,
        ny: usize,
        side: usize,
        drift: f64,
        rough_every: Option<usize>,
        seed: u32,
    ) -> Result<Stencil, String> {
        let grid = Grid::new(nx, ny).map_err(|e| e.to_string())?;
        Stencil::on_grid(grid, side, drift, rough_every, seed, None)
    }

    /// [`Stencil::new`] on any grid, holding only the tiles of the boxes `holds` marks (`None`:
    /// all), for a process that computes some of them (`pbs-mpi`; the others are empty until
    /// they arrive). A grid of more than one layer of boxes makes a 3D stencil, with cubic
    /// tiles and a 3D cost map.
    pub fn on_grid(
        grid: Grid,
        side: usize,
        drift: f64,
        rough_every: Option<usize>,
        seed: u32,
        holds: Option<&[bool]>,
    ) -> Result<Stencil, String> {
        let dims = tile_dims(&grid);
        let cells = match side.checked_pow(dims) {
            Some(0) => return Err("a stencil tile needs at least one cell along each side, got 0".into()),
            Some(cells) => cells,
            None => return Err(format!("tiles of {side} cells a side: {side}^{dims} cells overflow")),
        };
        if !drift.is_finite() {
            return Err(format!("the cost map's drift must be a finite number of boxes an iteration, got {drift}"));
        }
        if rough_every == Some(0) {
            return Err("a new cost map every 0 iterations: expected at least 1".into());
        }
        if let Some(h) = holds.filter(|h| h.len() != grid.len()) {
            return Err(format!("{} boxes marked held on a grid of {} boxes", h.len(), grid.len()));
        }
        let held = holds.map_or(grid.len(), |h| h.iter().filter(|&&x| x).count());
        crate::memory::check_state("stencil tiles", grid.len(), held, Stencil::state_bytes(cells))?;
        let tiles: Vec<Vec<f64>> = (0..grid.len())
            .map(|k| {
                if holds.is_some_and(|h| !h[k]) {
                    return Vec::new();
                }
                let [i, j, _] = grid.coords(k);
                // A hot square in one corner of the domain (a column through its layers), cold
                // elsewhere.
                let hot = i < grid.nx() / 4 && j < grid.ny() / 4;
                vec![if hot { 100.0 } else { 0.0 }; cells]
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
            work_scale: Stencil::DEFAULT_WORK_SCALE,
            cost: Vec::new(),
            iteration: 0,
            local: None,
        };
        s.cost = s.costs();
        Ok(s)
    }

    /// The same stencil with `scale` extra work units per box at load 1 (one unit ≈ 1.5 ns;
    /// 0 leaves the Jacobi sweep alone); refused unless finite and within
    /// 0..=[`Stencil::MAX_WORK_SCALE`].
    pub fn with_work_scale(mut self, scale: f64) -> Result<Stencil, String> {
        if !(0.0..=Stencil::MAX_WORK_SCALE).contains(&scale) {
            return Err(format!(
                "a work scale of {scale:?} units a box: expected a finite number from 0 to {:e}",
                Stencil::MAX_WORK_SCALE
            ));
        }
        self.work_scale = scale;
        Ok(self)
    }

    /// Whether the tiles are cubes (a grid of more than one layer).
    fn is_3d(&self) -> bool {
        self.grid.nz() > 1
    }

    /// Cells of a tile.
    fn cells(&self) -> usize {
        self.side.pow(tile_dims(&self.grid))
    }

    /// The cost map's loads on the grid: 2D noise on one layer, 3D noise on several.
    fn costs(&self) -> Vec<f64> {
        if self.is_3d() {
            self.map.loads_3d(&self.grid)
        } else {
            self.map.loads(&self.grid)
        }
    }

    /// The scenario `drift` (the cost map drifts a quarter box per iteration) or `rough` (a
    /// new map every 10 iterations) on `grid`, holding only the tiles `holds` marks (`None`:
    /// all; see [`Stencil::on_grid`]). Tiles of 16 × 16 cells, or of 8 × 8 × 8 on a grid of
    /// more than one layer (twice the cells; a face of 64 where a 2D tile's edge has 16).
    pub fn by_scenario(scenario: &str, grid: Grid, seed: u64, holds: Option<&[bool]>) -> Result<Stencil, String> {
        let rough_every = match scenario {
            "drift" => None,
            "rough" => Some(10),
            s => return Err(format!("unknown stencil scenario {s:?}; expected drift or rough")),
        };
        Stencil::on_grid(grid, Stencil::tile_side(&grid), 0.25, rough_every, PerlinMap::noise_seed(seed), holds)
    }

    /// Cells along each side of the scenarios' tiles: 16 on one layer, 8 on several.
    fn tile_side(grid: &Grid) -> usize {
        if grid.nz() > 1 {
            8
        } else {
            16
        }
    }

    /// Bytes per box of a stencil of `cells` cells a tile, from above: the
    /// cost and two tile pointers for every box; for a box held, six tiles (each a `Vec` header
    /// and the allocator's overhead besides the cells): two live, and while they are placed on
    /// their owners' threads a copy of one and the freed memory the threads' allocator arenas
    /// keep (`pbs-bench run` on 512 × 512 boxes peaked at 3.0 GB, 5.6 tiles' worth a box with
    /// the executor's state).
    pub(crate) fn state_bytes(cells: usize) -> crate::memory::StateBytes {
        let tile =
            cells.saturating_mul(std::mem::size_of::<f64>()).saturating_add(std::mem::size_of::<Vec<f64>>() + 16);
        crate::memory::StateBytes { fixed: 3 * std::mem::size_of::<usize>(), held: tile.saturating_mul(6) }
    }

    /// [`Stencil::state_bytes`] of the scenarios' stencil on `grid`.
    pub(crate) fn scenario_state_bytes(grid: &Grid) -> crate::memory::StateBytes {
        Stencil::state_bytes(Stencil::tile_side(grid).pow(tile_dims(grid)))
    }

    /// Box `k`'s tile in both buffers, zeros where it held none.
    fn hold(&mut self, k: usize) {
        let cells = self.cells();
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
        if gi < 0 || gj < 0 || gi >= self.grid.nx() as isize || gj >= self.grid.ny() as isize {
            return self.tiles[k][(y.clamp(0, s - 1) * s + x.clamp(0, s - 1)) as usize];
        }
        let n = self.grid.index(gi as usize, gj as usize, 0);
        self.tiles[n][(ly * s + lx) as usize]
    }

    /// [`Stencil::value`] on cubic tiles: cell `p` relative to tile `k`, possibly in a face
    /// neighbour's tile, insulated (mirrored) outside the domain.
    fn value_3d(&self, k: usize, p: [isize; 3]) -> f64 {
        let s = self.side as isize;
        let dims = self.grid.dims();
        let mut tile = self.grid.coords(k).map(|c| c as isize);
        let mut local = p;
        for axis in 0..3 {
            if local[axis] < 0 {
                tile[axis] -= 1;
                local[axis] += s;
            } else if local[axis] >= s {
                tile[axis] += 1;
                local[axis] -= s;
            }
        }
        let cell = |c: [isize; 3]| ((c[2] * s + c[1]) * s + c[0]) as usize;
        if (0..3).any(|a| tile[a] < 0 || tile[a] >= dims[a] as isize) {
            return self.tiles[k][cell(p.map(|v| v.clamp(0, s - 1)))];
        }
        let n = self.grid.index(tile[0] as usize, tile[1] as usize, tile[2] as usize);
        self.tiles[n][cell(local)]
    }

    /// One 5-point Jacobi sweep of box `k`'s square tile into `out`.
    fn sweep_2d(&self, k: usize, out: &mut [f64]) {
        let s = self.side as isize;
        let own = &self.tiles[k];
        for y in 0..s {
            for x in 0..s {
                let c = (y * s + x) as usize;
                // Interior cells read their own tile; the rim reads the neighbours' edges.
                // Same operands in the same order either way, so the same bits.
                let v = if x > 0 && y > 0 && x < s - 1 && y < s - 1 {
                    let w = s as usize;
                    0.25 * (own[c - 1] + own[c + 1] + own[c - w] + own[c + w])
                } else {
                    0.25 * (self.value(k, x - 1, y)
                        + self.value(k, x + 1, y)
                        + self.value(k, x, y - 1)
                        + self.value(k, x, y + 1))
                };
                out[c] = v;
            }
        }
    }

    /// One 7-point Jacobi sweep of box `k`'s cubic tile into `out`.
    fn sweep_3d(&self, k: usize, out: &mut [f64]) {
        const SIXTH: f64 = 1.0 / 6.0;
        let s = self.side as isize;
        let (row, layer) = (self.side, self.side * self.side);
        let own = &self.tiles[k];
        let inner = |v: isize| v > 0 && v < s - 1;
        for z in 0..s {
            for y in 0..s {
                for x in 0..s {
                    let c = ((z * s + y) * s + x) as usize;
                    // As in 2D: the same operands in the same order on both paths.
                    let v = if inner(x) && inner(y) && inner(z) {
                        SIXTH
                            * (own[c - 1] + own[c + 1] + own[c - row] + own[c + row] + own[c - layer] + own[c + layer])
                    } else {
                        SIXTH
                            * (self.value_3d(k, [x - 1, y, z])
                                + self.value_3d(k, [x + 1, y, z])
                                + self.value_3d(k, [x, y - 1, z])
                                + self.value_3d(k, [x, y + 1, z])
                                + self.value_3d(k, [x, y, z - 1])
                                + self.value_3d(k, [x, y, z + 1]))
                    };
                    out[c] = v;
                }
            }
        }
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

/// The dimensions of a tile on `grid`: cubes on a grid of more than one layer, squares on one.
fn tile_dims(grid: &Grid) -> u32 {
    if grid.nz() > 1 {
        3
    } else {
        2
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
    fn footprint(&self) -> Footprint {
        // A box is its tile in both buffers (read old, write new); a neighbour's face (an edge
        // row of a square tile, a side of a cube).
        let tile = self.cells() as u64 * std::mem::size_of::<f64>() as u64;
        Footprint { box_bytes: 2 * tile, halo_bytes: tile / self.side as u64, written_bytes: tile }
    }
    fn iterate(&mut self, exec: &mut dyn Executor, rec: &mut Recorder, cache: Option<&CacheModel>) {
        self.follow_owners(exec);
        let mut next = std::mem::take(&mut self.next);
        let this = &*self;
        let stats = for_each_box_mut(exec, &mut next, |k, out| {
            if this.local.as_ref().is_some_and(|l| !l[k]) {
                return;
            }
            if let Some(c) = cache {
                c.run_box(k);
            }
            if this.is_3d() {
                this.sweep_3d(k, out);
            } else {
                this.sweep_2d(k, out);
            }
            let units = (this.cost[k] * this.work_scale) as usize;
            // Fold the work into the tile at a negligible weight so that it is real and
            // deterministic (the same for every executor).
            out[0] += 1e-12 * busy(units, out[0]);
        });
        rec.phase(&stats);
        if let Some(c) = cache {
            c.end_phase();
        }
        self.next = std::mem::replace(&mut self.tiles, next);
        self.iteration += 1;
        self.map = match self.rough_every {
            Some(r) if self.iteration % r == 0 => self.map.rough(),
            _ => self.map.smooth(self.drift),
        };
        self.cost = self.costs();
        rec.iteration(&exec.end_iteration());
    }
    fn checksum(&self) -> u64 {
        self.checksum_from(0..self.grid.len(), FNV_START)
    }
    fn box_work(&self) -> Vec<f64> {
        self.cost.iter().map(|c| c * self.work_scale + self.cells() as f64).collect()
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
        if tile.len() != self.cells() {
            return Err(format!("a tile of {} cells for box {k}; tiles have {}", tile.len(), self.cells()));
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
        // A cell reads its face neighbours: a tile's rim reads one face of each face
        // neighbour's tile (an edge row or column in 2D), and nothing of the diagonal ones.
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
        let face = self.cells() / self.side;
        if bytes.len() != count * face * 8 {
            return Err(format!("{} bytes for {count} faces of box {k}; a face has {face} cells", bytes.len()));
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
    /// The faces a part code names (see [`Faces`]), refused unless they are faces of this
    /// stencil's tiles (no face along z on a 2D grid).
    fn faces(&self, k: usize, part: u64) -> Result<Faces, String> {
        let faces = Faces::from_bits(part).map_err(|e| format!("box {k}: {e}"))?;
        match faces.iter().find(|&(axis, _)| axis > 1 && !self.is_3d()) {
            Some((axis, _)) => Err(format!("a face along axis {axis} for box {k}; the stencil's tiles are 2D")),
            None => Ok(faces),
        }
    }

    /// The cells of a tile on a face (`(axis, side)`, see [`Faces`]), in the tile's order:
    /// those the face neighbour's rim reads.
    fn face_cells(&self, (axis, side): (usize, usize)) -> impl Iterator<Item = usize> {
        let s = self.side;
        let edge = if side == 0 { 0 } else { s - 1 };
        // The cell's coordinate along `axis`: x varies fastest, then y, then z.
        let stride = s.pow(axis as u32);
        (0..self.cells()).filter(move |c| (c / stride) % s == edge)
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
            (Stencil::new(12, 12, 4, 0.25, None, 5).unwrap(), Stencil::new(12, 12, 4, 0.25, None, 5).unwrap());
        for it in 0..6 {
            let exec: &mut dyn Executor = if it < 3 { &mut two } else { &mut three };
            moving.iterate(exec, &mut rec, None);
            assert_eq!(moving.placed_for, Some(placement_owners(exec)), "iteration {it}");
            staying.iterate(&mut two, &mut rec, None);
        }
        assert_ne!(moving.placed_for, staying.placed_for, "the tiles moved");
        assert_eq!(moving.checksum(), staying.checksum());
    }

    /// The stencil on tiles computes what a 5-point (in 2D) or 7-point (in 3D) Jacobi sweep
    /// over the whole block of cells computes, its boundary insulated (a cell outside the domain
    /// reads as the cell itself), and conserves the heat.
    #[test]
    fn the_stencil_is_a_jacobi_sweep_over_all_cells_in_2d_and_3d() {
        jacobi_over_all_cells(Grid::new_3d(3, 2, 2).unwrap(), 4);
        jacobi_over_all_cells(Grid::new(3, 4).unwrap(), 5);
        jacobi_over_all_cells(Grid::new(1, 2).unwrap(), 3);
    }

    /// See [`the_stencil_is_a_jacobi_sweep_over_all_cells_in_2d_and_3d`].
    fn jacobi_over_all_cells(grid: Grid, side: usize) {
        let [nx, ny, nz] = grid.dims();
        let mut app = Stencil::on_grid(grid, side, 0.25, None, 3, None).unwrap().with_work_scale(0.0).unwrap();
        let (dims, axes) = ([nx * side, ny * side, if nz > 1 { nz * side } else { 1 }], if nz > 1 { 3 } else { 2 });
        let index = |p: [usize; 3]| (p[2] * dims[1] + p[1]) * dims[0] + p[0];
        // Box (i, j, l)'s cell (x, y, z) is the block's cell (i·side + x, …).
        let to_block = |app: &Stencil| {
            let mut block = vec![0.0; dims.iter().product()];
            for k in 0..grid.len() {
                let b = grid.coords(k);
                for (c, v) in app.tiles[k].iter().enumerate() {
                    let local = [c % side, (c / side) % side, c / (side * side)];
                    block[index([0, 1, 2].map(|a| b[a] * side + local[a]))] = *v;
                }
            }
            block
        };
        // Heat spread over the cells so that every sweep changes every cell.
        let mut block: Vec<f64> = (0..dims.iter().product()).map(|n: usize| (n % 7) as f64).collect();
        for k in 0..grid.len() {
            let b = grid.coords(k);
            for c in 0..app.cells() {
                let local = [c % side, (c / side) % side, c / (side * side)];
                app.tiles[k][c] = block[index([0, 1, 2].map(|a| b[a] * side + local[a]))];
            }
        }
        let total: f64 = block.iter().sum();
        let mut exec = StaticBlocks::new(grid.len(), 2).unwrap();
        let mut rec = Recorder::new("static", 2);
        for _ in 0..3 {
            app.iterate(&mut exec, &mut rec, None);
            let old = block.clone();
            for (n, v) in block.iter_mut().enumerate() {
                let p = [n % dims[0], (n / dims[0]) % dims[1], n / (dims[0] * dims[1])];
                let mut sum = 0.0;
                for axis in 0..axes {
                    for step in [-1isize, 1] {
                        let mut q = p;
                        let moved = p[axis] as isize + step;
                        q[axis] = if moved < 0 || moved >= dims[axis] as isize { p[axis] } else { moved as usize };
                        sum += old[index(q)];
                    }
                }
                *v = sum / (2 * axes) as f64;
            }
        }
        let tiled = to_block(&app);
        let worst = tiled.iter().zip(&block).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        // The busy work folds under 1e-12 into one cell of each tile per iteration.
        assert!(worst < 1e-9, "{grid:?}: tiled and whole-block sweeps differ by {worst}");
        let after: f64 = tiled.iter().sum();
        assert!((after - total).abs() < 1e-9 * total, "heat {total} became {after}");
    }

    /// Across processes a 3D tile sends its faces, a 2D one refuses a face along z.
    #[test]
    fn a_3d_tile_s_faces_travel_and_arrive_where_they_were() {
        let grid = Grid::new_3d(3, 3, 3).unwrap();
        let mut source = Stencil::on_grid(grid, 4, 0.25, None, 1, None).unwrap();
        for (c, v) in source.tiles[13].iter_mut().enumerate() {
            *v = c as f64;
        }
        let mut target = Stencil::on_grid(grid, 4, 0.25, None, 1, None).unwrap();
        for bits in [0b1u64, 0b10, 0b100, 0b1000, 0b1_0000, 0b10_0000, 0b11_1111] {
            let mut bytes = Vec::new();
            source.pack_part(13, bits, &mut bytes).unwrap();
            let faces = Faces::from_bits(bits).unwrap().iter().count();
            assert_eq!(bytes.len(), faces * 16 * 8, "faces {bits:#b}: 16 cells of 8 bytes each");
            target.unpack_part(13, bits, &bytes).unwrap();
        }
        // Every cell on a face arrived with its value; the inner 2×2×2 cells kept their 0 (no
        // box of this grid starts hot).
        let on_a_face = |c: usize| [c % 4, (c / 4) % 4, c / 16].iter().any(|&v| v == 0 || v == 3);
        for c in 0..64 {
            let expected = if on_a_face(c) { c as f64 } else { 0.0 };
            assert_eq!(target.tiles[13][c], expected, "cell {c}");
        }
        let flat = Stencil::new(3, 3, 4, 0.25, None, 1).unwrap();
        assert!(flat.pack_part(4, 0b1_0000, &mut Vec::new()).unwrap_err().contains("tiles are 2D"));
    }

    /// Arguments no stencil can run with are errors naming them. Before, tiles of no cell
    /// panicked in every task, `rough_every` 0 divided by zero, a NaN drift panicked in the
    /// noise map at the first iteration, a work scale of 1e300 ran a box's busy loop
    /// `usize::MAX` times, and a side whose square wrapped built tiles of the wrong size.
    #[test]
    fn arguments_no_stencil_runs_with_are_errors_naming_them() {
        let refused = |r: Result<Stencil, String>| r.err().expect("refused");
        assert!(refused(Stencil::new(0, 4, 4, 0.25, None, 1)).contains("empty"));
        assert!(refused(Stencil::new(4, 4, 0, 0.25, None, 1)).contains("got 0"));
        assert!(refused(Stencil::new(4, 4, 1 << 33, 0.25, None, 1)).contains("overflow"));
        assert!(refused(Stencil::new(1, 1, 1 << 20, 0.25, None, 1)).contains("out of memory"));
        assert!(refused(Stencil::new(4, 4, 4, f64::NAN, None, 1)).contains("drift"));
        assert!(refused(Stencil::new(4, 4, 4, 0.25, Some(0), 1)).contains("every 0 iterations"));
        let grid = Grid::new(4, 4).unwrap();
        assert!(refused(Stencil::on_grid(grid, 4, 0.25, None, 1, Some(&[true; 3]))).contains("3 boxes marked"));
        let stencil = || Stencil::new(4, 4, 4, 0.25, None, 1).unwrap();
        for scale in [f64::NAN, -1.0, f64::INFINITY, 1e300] {
            assert!(refused(stencil().with_work_scale(scale)).contains("work scale"), "{scale}");
        }
        assert_eq!(stencil().with_work_scale(Stencil::MAX_WORK_SCALE).unwrap().work_scale, 1e9);
        // A drift far past the map's wrap runs (the map wraps around).
        let mut far = Stencil::new(4, 4, 4, 1e300, None, 1).unwrap();
        far.iterate(&mut StaticBlocks::new(16, 1).unwrap(), &mut Recorder::new("static", 1), None);
    }

    /// A stencil starts with a hot square of 100 over the first quarter of the boxes along x
    /// and y (a column through the layers in 3D), 0 elsewhere, and its extra cost is the Perlin
    /// map of a few large, sharp features its documentation names (frequency 1.5, 3 octaves,
    /// contrast 4) drawn from its seed; the scenarios' tiles are 16 × 16 cells, 8 × 8 × 8 on
    /// several layers.
    #[test]
    fn a_stencil_starts_hot_in_one_corner_under_its_cost_map() {
        for grid in [Grid::new(9, 8).unwrap(), Grid::new_3d(8, 4, 3).unwrap()] {
            let app = Stencil::on_grid(grid, 3, 0.25, None, 7, None).unwrap();
            let mut hot = 0;
            for k in 0..grid.len() {
                let [i, j, _] = grid.coords(k);
                let value = if i < grid.nx() / 4 && j < grid.ny() / 4 { 100.0 } else { 0.0 };
                hot += usize::from(value > 0.0);
                assert!(app.tiles[k].iter().all(|&v| v == value), "{grid:?} box {k}");
                assert_eq!(app.tiles[k].len(), app.cells());
            }
            assert_eq!(hot, (grid.nx() / 4) * (grid.ny() / 4) * grid.nz());
            let map = PerlinMap { seed: 7, frequency: 1.5, octaves: 3, contrast: 4.0, ..Default::default() };
            let costs = if grid.nz() > 1 { map.loads_3d(&grid) } else { map.loads(&grid) };
            assert_eq!(app.cost, costs, "{grid:?}");
            // The scenarios' tiles: 16 × 16 cells on one layer, 8 × 8 × 8 on several.
            let scenario = Stencil::by_scenario("drift", grid, 7, None).unwrap();
            assert_eq!((scenario.side, scenario.cells()), if grid.nz() > 1 { (8, 512) } else { (16, 256) });
            // A run's seed reaches the map whole: one that differs above bit 31 draws another.
            assert_eq!(Stencil::by_scenario("drift", grid, 7 << 32, None).unwrap().map, map);
            assert_ne!(Stencil::by_scenario("drift", grid, 1 << 32, None).unwrap().map.seed, 0);
        }
    }

    /// An iteration sweeps every tile, then folds the box's extra work into its first cell:
    /// `1e-12 ×` the logistic map `x ← 3.9 x (1 − x)` run `cost × work_scale` times from
    /// `0.25 + 0.5 × frac(|cell|)`; the cost map then drifts `drift` boxes (half as much along
    /// y), or, every `rough_every` iterations, is drawn anew. A box's work is its extra work
    /// plus a unit per cell; its footprint two tiles, a face of its tile, one tile written.
    #[test]
    fn an_iteration_folds_the_extra_work_in_and_moves_the_cost_map() {
        let logistic = |units: usize, seed: f64| {
            let mut x = 0.25 + 0.5 * seed.abs().fract();
            for _ in 0..units {
                x = 3.9 * x * (1.0 - x);
            }
            x
        };
        let grid = Grid::new(4, 4).unwrap();
        let mut app = Stencil::on_grid(grid, 3, 0.25, Some(3), 5, None).unwrap().with_work_scale(50.0).unwrap();
        assert_eq!(app.name(), "stencil");
        let tile = 9 * 8;
        assert_eq!(app.footprint(), Footprint { box_bytes: 2 * tile, halo_bytes: tile / 3, written_bytes: tile });
        let mut exec = StaticBlocks::new(grid.len(), 2).unwrap();
        let mut rec = Recorder::new("static", 2);
        let mut map = app.map;
        let mut folded = 0;
        for iteration in 1..=7 {
            assert_eq!(app.box_work(), app.cost.iter().map(|c| c * 50.0 + 9.0).collect::<Vec<_>>());
            let mut expected: Vec<Vec<f64>> = (0..grid.len()).map(|_| vec![0.0; 9]).collect();
            for (k, out) in expected.iter_mut().enumerate() {
                app.sweep_2d(k, out);
                let units = (app.cost[k] * 50.0) as usize;
                folded += usize::from(units > 0);
                out[0] += 1e-12 * logistic(units, out[0]);
            }
            app.iterate(&mut exec, &mut rec, None);
            for (k, out) in expected.iter().enumerate() {
                assert_eq!(&app.tiles[k][..], &out[..], "iteration {iteration}, box {k}");
            }
            map = if iteration % 3 == 0 { map.rough() } else { map.smooth(0.25) };
            assert_eq!(app.cost, map.loads(&grid), "iteration {iteration}");
        }
        assert!(folded > 50, "{folded} boxes with extra work");
        let cube = Stencil::on_grid(Grid::new_3d(2, 2, 2).unwrap(), 2, 0.25, None, 5, None).unwrap();
        assert_eq!(cube.footprint(), Footprint { box_bytes: 128, halo_bytes: 32, written_bytes: 64 });
    }
}
