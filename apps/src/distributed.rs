//! What an app needs to run across processes (`pbs-mpi`): each process computes the boxes it
//! owns, keeps a copy of the boxes its tasks read (the *halo*), and ships a box's data to
//! another process as bytes when that process owns it next or reads it.
//!
//! A process holds the data of its own boxes and its halo alone ([`build_holding`]; the other
//! boxes are empty slots): a task reads exactly the data it reads in shared memory, in the
//! same order, so every box's new state has the same bits as in a shared-memory run, and
//! gathering every box back into one process gives the shared-memory checksum.
//!
//! ```
//! use pbs_apps::distributed::{self, Pack};
//! use pbs_scheduler::{executors::StaticBlocks, report::Recorder};
//!
//! // Two "processes" of one stencil in one program: the left and right halves.
//! let build = || distributed::build("stencil", "drift", 8, 4, 1);
//! let (mut left, mut right) = (build()?, build()?);
//! let grid = left.grid();
//! let owner = |k: usize| usize::from(grid.coords(k)[0] >= 4);
//! left.compute_only(Some((0..grid.len()).map(|k| owner(k) == 0).collect()))?;
//! right.compute_only(Some((0..grid.len()).map(|k| owner(k) == 1).collect()))?;
//! let mut exec = StaticBlocks::new(grid.len(), 1)?;
//! let mut rec = Recorder::new("static", 1);
//! let mut bytes = Vec::new();
//! for _ in 0..3 {
//!     left.iterate(&mut exec, &mut rec, None);
//!     right.iterate(&mut exec, &mut rec, None);
//!     // The halo (depth 1 here): each side's boxes next to the cut, to the other side.
//!     for k in 0..grid.len() {
//!         let [i, _, _] = grid.coords(k);
//!         let (from, to) = if owner(k) == 0 { (&left, &mut right) } else { (&right, &mut left) };
//!         if i == 3 || i == 4 {
//!             bytes.clear();
//!             from.pack_box(k, &mut bytes);
//!             to.unpack_box(k, &bytes)?;
//!         }
//!     }
//! }
//! // Gather: the right half's boxes into the left, then the whole state's checksum.
//! for k in (0..grid.len()).filter(|&k| owner(k) == 1) {
//!     bytes.clear();
//!     right.pack_box(k, &mut bytes);
//!     left.unpack_box(k, &bytes)?;
//! }
//! let mut whole = build()?;
//! for _ in 0..3 {
//!     whole.iterate(&mut exec, &mut rec, None);
//! }
//! assert_eq!(left.checksum(), whole.checksum());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::GridApp;

/// The state [`Distributed::checksum_from`] starts from.
pub const CHECKSUM_START: u64 = crate::FNV_START;

/// A box's data that can travel between processes as bytes, bit for bit.
pub trait Pack: Sized {
    /// Appends the data to `out`.
    fn pack(&self, out: &mut Vec<u8>);
    /// The data `pack` wrote, or an error naming what is wrong with `bytes`.
    fn unpack(bytes: &[u8]) -> Result<Self, String>;
}

/// A tile of cells: its length, then its values.
impl Pack for Vec<f64> {
    fn pack(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.len() as u64).to_le_bytes());
        self.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    }
    fn unpack(bytes: &[u8]) -> Result<Self, String> {
        let mut r = Reader::new(bytes);
        let n = r.len(8)?;
        let values = (0..n).map(|_| r.f64()).collect::<Result<Vec<f64>, String>>()?;
        r.end()?;
        Ok(values)
    }
}

/// Reads what a [`Pack`] implementation wrote, every short or long buffer an error.
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, at: 0 }
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let end = self.at + N;
        let chunk = self
            .bytes
            .get(self.at..end)
            .ok_or_else(|| format!("box data cut short: {} bytes where {end} are needed", self.bytes.len()))?;
        self.at = end;
        Ok(chunk.try_into().expect("N bytes"))
    }

    /// A little-endian u64.
    pub fn u64(&mut self) -> Result<u64, String> {
        self.take::<8>().map(u64::from_le_bytes)
    }

    /// A little-endian u32.
    pub fn u32(&mut self) -> Result<u32, String> {
        self.take::<4>().map(u32::from_le_bytes)
    }

    /// A little-endian f64.
    pub fn f64(&mut self) -> Result<f64, String> {
        self.take::<8>().map(f64::from_le_bytes)
    }

    /// A count of items of `item_bytes` each, refused when the rest of the buffer cannot hold
    /// them (so that a corrupt count allocates nothing).
    pub fn len(&mut self, item_bytes: usize) -> Result<usize, String> {
        let n = self.u64()?;
        let left = (self.bytes.len() - self.at) as u64;
        if n.checked_mul(item_bytes as u64).is_none_or(|b| b > left) {
            return Err(format!("box data claims {n} items of {item_bytes} bytes with {left} bytes left"));
        }
        Ok(n as usize)
    }

    /// The next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], String> {
        let left = self.bytes.len() - self.at;
        if n > left {
            return Err(format!("box data claims {n} bytes with {left} left"));
        }
        self.at += n;
        Ok(&self.bytes[self.at - n..self.at])
    }

    /// Whether every byte was read.
    pub fn is_empty(&self) -> bool {
        self.at == self.bytes.len()
    }

    /// Succeeds when every byte was read.
    pub fn end(&self) -> Result<(), String> {
        match self.bytes.len() - self.at {
            0 => Ok(()),
            extra => Err(format!("box data has {extra} bytes more than its items")),
        }
    }
}

/// A grid app whose boxes can live in several processes.
pub trait Distributed: GridApp {
    /// How far a box's task reads, in boxes along each axis (diagonals included): the boxes
    /// within this distance of a process's own form its halo.
    fn halo(&self) -> usize;
    /// From the next iteration on, runs only the boxes marked `true` (`None`: all). The
    /// others' tasks do nothing: their data is what [`Distributed::unpack_box`] put there
    /// (md empties them at each iteration, so a box nobody refreshed holds no particle). The
    /// boxes beyond the halo of the marked ones are dropped at once, so that an executor may
    /// leave their tasks out (`pbs-mpi` runs a rank's window only).
    fn compute_only(&mut self, local: Option<Vec<bool>>) -> Result<(), String>;
    /// Appends box `k`'s data to `out`.
    fn pack_box(&self, k: usize, out: &mut Vec<u8>);
    /// The number of bytes [`Distributed::pack_box`] would append for box `k` now, without
    /// packing it (what moving the box costs, for balancers that weigh it).
    fn packed_len(&self, k: usize) -> usize;
    /// Replaces box `k`'s data with what [`Distributed::pack_box`] wrote in another process.
    fn unpack_box(&mut self, k: usize, bytes: &[u8]) -> Result<(), String>;
    /// What `process`, which owns boxes within the halo of box `k` under `owners` but not `k`
    /// itself, reads of box `k`, as a part code for [`Distributed::pack_part`]: `Some(0)` for
    /// the whole box (the default), `None` when its tasks read nothing of it. The stencil's
    /// tasks read one edge of each face neighbour (the code is the [`Faces`] towards the
    /// process's boxes); md's read only the leave list of a box two away. A function of the
    /// owners alone, not of the box's data: a rank lists its sends when the owners change and
    /// keeps them while they stay.
    fn reader_part(&self, owners: &[u32], k: usize, process: u32) -> Option<u64> {
        let _ = (owners, k, process);
        Some(WHOLE)
    }
    /// Appends the part `part` (a code from [`Distributed::reader_part`]) of box `k` to `out`.
    fn pack_part(&self, k: usize, part: u64, out: &mut Vec<u8>) -> Result<(), String> {
        match part {
            WHOLE => {
                self.pack_box(k, out);
                Ok(())
            }
            other => Err(format!("part {other:#x} of box {k}: this app sends whole boxes only")),
        }
    }
    /// [`GridApp::checksum`] of the boxes `boxes`, continued from `hash`: chained over
    /// consecutive ranges from [`CHECKSUM_START`] and box 0 to the last box, it is the whole
    /// state's checksum. Reads the boxes of the range and those within [`Distributed::halo`]
    /// of them; a process can so hash the state a band at a time.
    fn checksum_from(&self, boxes: std::ops::Range<usize>, hash: u64) -> u64;
    /// Drops box `k`'s data: the process no longer computes or reads it.
    fn release(&mut self, k: usize);
    /// Replaces the part `part` of box `k` with what [`Distributed::pack_part`] wrote.
    fn unpack_part(&mut self, k: usize, part: u64, bytes: &[u8]) -> Result<(), String> {
        match part {
            WHOLE => self.unpack_box(k, bytes),
            other => Err(format!("part {other:#x} of box {k}: this app sends whole boxes only")),
        }
    }
}

/// The part code of a whole box (see [`Distributed::reader_part`]).
pub const WHOLE: u64 = 0;

/// What box `k`, computed by its last owner, sends to `process` (not that owner) after an
/// iteration, under the next mapping `owners`: the whole box to its new owner; to a process
/// owning a box within the app's halo, the part its tasks read
/// ([`Distributed::reader_part`]); `None` to any other.
pub fn part_for(app: &dyn Distributed, owners: &[u32], k: usize, process: u32) -> Option<u64> {
    if readers(&app.grid(), owners, k, app.halo()).contains(&process) {
        part_for_reader(app, owners, k, process)
    } else {
        None
    }
}

/// [`part_for`] for a `process` known to be among box `k`'s [`readers`] (as the exchange,
/// which lists them, knows).
pub fn part_for_reader(app: &dyn Distributed, owners: &[u32], k: usize, process: u32) -> Option<u64> {
    if owners[k] == process {
        Some(WHOLE)
    } else {
        app.reader_part(owners, k, process)
    }
}

/// A set of faces of a box, each named by the neighbour across it: bit `2a` the neighbour one
/// box lower along axis `a` (x, y, z), bit `2a + 1` the one higher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Faces(u8);

impl Faces {
    /// The faces of box `k` across which `owners` gives a neighbour to `process`.
    pub fn towards(grid: &pbs::Grid, owners: &[u32], k: usize, process: u32) -> Faces {
        let c = grid.coords(k);
        let mut bits = 0;
        grid.for_each_neighbour(k, |n| {
            if owners[n] == process {
                let d = grid.coords(n);
                let axis = (0..3).find(|&a| d[a] != c[a]).expect("a face neighbour differs along one axis");
                bits |= 1 << (2 * axis + usize::from(d[axis] > c[axis]));
            }
        });
        Faces(bits)
    }

    /// The set from its bits, refused when a bit names no face.
    pub fn from_bits(bits: u64) -> Result<Faces, String> {
        u8::try_from(bits)
            .ok()
            .filter(|b| *b < 64)
            .map(Faces)
            .ok_or_else(|| format!("face bits {bits:#x} name no face"))
    }

    /// The bits (see [`Faces`]).
    pub fn bits(self) -> u64 {
        u64::from(self.0)
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Each face in the set as `(axis, side)`, side 0 towards lower coordinates, in bit order.
    pub fn iter(self) -> impl Iterator<Item = (usize, usize)> {
        (0..6).filter(move |b| self.0 & (1 << b) != 0).map(|b| (b / 2, b % 2))
    }
}

/// [`crate::build`] for the apps that run across processes: `md` and `stencil`.
pub fn build(app: &str, scenario: &str, nx: usize, ny: usize, seed: u64) -> Result<Box<dyn Distributed>, String> {
    build_holding(app, scenario, pbs::Grid::new(nx, ny).map_err(|e| e.to_string())?, seed, None)
}

/// [`build`] holding the data of the boxes `holds` marks alone (`None`: all), for a process
/// that computes some of them: it marks its own and those its tasks read, and receives from
/// their owners the state of those it does not compute before its first iteration (md's
/// initial step leaves them empty). Its memory is then that of its share of the grid. On a
/// grid of more than one layer md and the stencil are 3D ([`crate::build_3d`]).
pub fn build_holding(
    app: &str,
    scenario: &str,
    grid: pbs::Grid,
    seed: u64,
    holds: Option<&[bool]>,
) -> Result<Box<dyn Distributed>, String> {
    if let Some(h) = holds.filter(|h| h.len() != grid.len()) {
        return Err(format!("{} flags for {} boxes", h.len(), grid.len()));
    }
    if app == "md" || app == "md-split" {
        crate::md_fits(&grid, holds.map_or(grid.len(), |h| h.iter().filter(|&&x| x).count()))?;
    }
    let split = app == "md-split";
    match (app, scenario) {
        ("md" | "md-split", s) => Ok(crate::md::on_grid(crate::md::Scenario::from_name(s)?, grid, seed, holds, split)),
        ("stencil", s) => crate::stencil::Stencil::by_scenario(s, grid, seed, holds).map(|s| Box::new(s) as _),
        (a, _) => Err(format!("{a:?} does not run across processes; md, md-split and stencil do")),
    }
}

/// Whether a process can hold the part of `app`'s state that every process holds whatever its
/// share (per-box headers over the whole grid): the same answer on every process of a node, so
/// that one of them can say so for all before any starts. An unknown app is an error too.
pub fn check_every_share(app: &str, grid: pbs::Grid) -> Result<(), String> {
    let (what, per_box) = match app {
        "md" | "md-split" => return crate::md_fits(&grid, 0),
        "stencil" => ("stencil tiles", crate::stencil::Stencil::scenario_state_bytes(&grid)),
        a => return Err(format!("{a:?} does not run across processes; md, md-split and stencil do")),
    };
    crate::memory::check_state(what, grid.len(), 0, per_box)
}

/// Every box's work at the start, as [`GridApp::box_work`] estimates it, without building the
/// state: what the processes are first balanced on, before each builds its share. md counts
/// its particles as placed (before the initial step that `box_work` sees); the stencil's is
/// its cost map.
pub fn initial_work(app: &str, scenario: &str, grid: pbs::Grid, seed: u64) -> Result<Vec<f64>, String> {
    // Before md's count per box or the stencil's mask of a flag per box.
    check_every_share(app, grid)?;
    match app {
        "md" | "md-split" => {
            let s = crate::md::Scenario::from_name(scenario)?;
            Ok(if grid.nz() > 1 {
                crate::md::Md::<3>::initial_work(s, grid, seed)
            } else {
                crate::md::Md::<2>::initial_work(s, grid, seed)
            })
        }
        _ => Ok(build_holding(app, scenario, grid, seed, Some(&vec![false; grid.len()]))?.box_work()),
    }
}

/// Per box: whether a box within `halo` of it along every axis (diagonals included, itself
/// too) is `marked`. With the boxes of other processes marked, the boxes that can have a
/// reader; with a process's own, those it computes or reads. One pass of a sliding window per
/// axis, where looking around each box costs `(2 halo + 1)^d` reads.
pub fn within(grid: &pbs::Grid, halo: usize, marked: impl Fn(usize) -> bool) -> Vec<bool> {
    let mut counts: Vec<u32> = (0..grid.len()).map(|k| u32::from(marked(k))).collect();
    let dims = grid.dims();
    for axis in (0..3).filter(|&a| dims[a] > 1) {
        counts = window_sums(grid, &counts, axis, halo);
    }
    counts.into_iter().map(|c| c > 0).collect()
}

/// Per box, the sum of `counts` over the boxes within `halo` of it along `axis` (itself too):
/// a sliding window along every line of boxes parallel to the axis.
fn window_sums(grid: &pbs::Grid, counts: &[u32], axis: usize, halo: usize) -> Vec<u32> {
    let dims = grid.dims();
    let stride = [1, dims[0], dims[0] * dims[1]];
    let (n, step) = (dims[axis], stride[axis]);
    let [a, b] = match axis {
        0 => [1, 2],
        1 => [0, 2],
        _ => [0, 1],
    };
    let mut out = vec![0; counts.len()];
    for v in 0..dims[b] {
        for u in 0..dims[a] {
            let base = u * stride[a] + v * stride[b];
            let at = |t: usize| counts[base + t * step];
            let mut sum: u32 = (0..=halo.min(n - 1)).map(at).sum();
            for t in 0..n {
                out[base + t * step] = sum;
                if t + halo + 1 < n {
                    sum += at(t + halo + 1);
                }
                if t >= halo {
                    sum -= at(t - halo);
                }
            }
        }
    }
    out
}

/// The processes that need box `k` under `owners`: those owning a box within `halo` boxes of
/// it along every axis (diagonals included, `owners[k]` itself too), in increasing order.
/// After every iteration, box `k`'s last owner sends it to each of them but itself.
pub fn readers(grid: &pbs::Grid, owners: &[u32], k: usize, halo: usize) -> Vec<u32> {
    let c = grid.coords(k);
    let dims = grid.dims();
    let span = |a: usize| c[a].saturating_sub(halo)..(c[a] + halo + 1).min(dims[a]);
    let mut out = Vec::new();
    for l in span(2) {
        for j in span(1) {
            for i in span(0) {
                let o = owners[grid.index(i, j, l)];
                if !out.contains(&o) {
                    out.push(o);
                }
            }
        }
    }
    out.sort_unstable();
    out
}

/// Checks a mask of boxes to compute against the grid's size.
pub(crate) fn check_mask(local: &Option<Vec<bool>>, boxes: usize) -> Result<(), String> {
    match local {
        Some(m) if m.len() != boxes => Err(format!("{} flags for {boxes} boxes", m.len())),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pbs_scheduler::executors::StaticBlocks;
    use pbs_scheduler::report::Recorder;
    use pbs_scheduler::{Executor, PhaseStats};

    /// Runs only the boxes `runs` marks, as `pbs-mpi`'s executor over a rank's window does
    /// (its window holds at least the boxes within the halo of the rank's own).
    struct Only {
        inner: StaticBlocks,
        runs: Vec<bool>,
    }

    // SAFETY: `task` runs only from the inner executor's calls, for a subset of the boxes it
    // hands out: each box at most once, in range, none after it returns (the boxes left out
    // break "exactly once", a promise about results that this test's apps are built to waive,
    // not one the unique `&mut` of `for_each_box_mut` rests on).
    unsafe impl Executor for Only {
        fn name(&self) -> &'static str {
            "only"
        }
        fn threads(&self) -> usize {
            self.inner.threads()
        }
        fn boxes(&self) -> usize {
            self.inner.boxes()
        }
        fn run_phase(&mut self, task: &(dyn Fn(usize) + Sync)) -> PhaseStats {
            let runs = &self.runs;
            self.inner.run_phase(&|k| {
                if runs[k] {
                    task(k)
                }
            })
        }
        fn on_each_thread(&self, f: &(dyn Fn(usize) + Sync)) {
            self.inner.on_each_thread(f)
        }
    }

    /// An app that keeps the trait's defaults for parts (the stencil, every other method
    /// passed through), as an app written outside this crate may.
    struct WholeBoxes(Box<dyn Distributed>);

    impl GridApp for WholeBoxes {
        fn name(&self) -> &'static str {
            self.0.name()
        }
        fn grid(&self) -> pbs::Grid {
            self.0.grid()
        }
        fn footprint(&self) -> pbs_scheduler::cache_model::Footprint {
            self.0.footprint()
        }
        fn iterate(
            &mut self,
            exec: &mut dyn Executor,
            rec: &mut Recorder,
            cache: Option<&pbs_scheduler::cache_model::CacheModel>,
        ) {
            self.0.iterate(exec, rec, cache)
        }
        fn checksum(&self) -> u64 {
            self.0.checksum()
        }
        fn box_work(&self) -> Vec<f64> {
            self.0.box_work()
        }
    }

    impl Distributed for WholeBoxes {
        fn halo(&self) -> usize {
            self.0.halo()
        }
        fn compute_only(&mut self, local: Option<Vec<bool>>) -> Result<(), String> {
            self.0.compute_only(local)
        }
        fn pack_box(&self, k: usize, out: &mut Vec<u8>) {
            self.0.pack_box(k, out)
        }
        fn packed_len(&self, k: usize) -> usize {
            self.0.packed_len(k)
        }
        fn unpack_box(&mut self, k: usize, bytes: &[u8]) -> Result<(), String> {
            self.0.unpack_box(k, bytes)
        }
        fn checksum_from(&self, boxes: std::ops::Range<usize>, hash: u64) -> u64 {
            self.0.checksum_from(boxes, hash)
        }
        fn release(&mut self, k: usize) {
            self.0.release(k)
        }
    }

    /// The trait's defaults send whole boxes: every reader reads the whole box, the whole
    /// part is the packed box and unpacks as the box does, and any other part code is refused
    /// by name, packing or unpacking.
    #[test]
    fn the_defaults_send_whole_boxes_and_refuse_other_parts() {
        let stencil = || WholeBoxes(build("stencil", "drift", 4, 3, 1).unwrap());
        let (mut from, mut to) = (stencil(), stencil());
        let mut exec = StaticBlocks::new(12, 2).unwrap();
        from.iterate(&mut exec, &mut Recorder::default(), None);
        assert_ne!(from.checksum(), to.checksum());
        let owners = [0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1];
        assert_eq!(from.reader_part(&owners, 1, 1), Some(WHOLE));
        for k in 0..12 {
            let (mut part, mut whole) = (Vec::new(), Vec::new());
            from.pack_part(k, WHOLE, &mut part).unwrap();
            from.pack_box(k, &mut whole);
            assert_eq!(part, whole, "box {k}");
            to.unpack_part(k, WHOLE, &part).unwrap();
        }
        assert_eq!(to.checksum(), from.checksum(), "every box sent whole");
        let mut bytes = Vec::new();
        let e = from.pack_part(5, 3, &mut bytes).unwrap_err();
        assert_eq!(e, "part 0x3 of box 5: this app sends whole boxes only");
        from.pack_box(5, &mut bytes);
        assert_eq!(to.unpack_part(5, 3, &bytes).unwrap_err(), e);
    }

    /// A reader hands out little-endian numbers and runs of bytes in order, is empty exactly
    /// when every byte was read, and names a buffer cut short, a count the rest cannot hold and
    /// bytes left over.
    #[test]
    fn a_reader_reads_in_order_and_names_what_does_not_fit() {
        let mut bytes = 7u64.to_le_bytes().to_vec();
        bytes.extend(9u32.to_le_bytes());
        bytes.extend(2.5f64.to_le_bytes());
        bytes.extend([1, 2, 3]);
        let mut r = Reader::new(&bytes);
        assert!(!r.is_empty());
        assert_eq!((r.u64(), r.u32(), r.f64()), (Ok(7), Ok(9), Ok(2.5)));
        assert_eq!(r.bytes(4).unwrap_err(), "box data claims 4 bytes with 3 left");
        assert_eq!(r.bytes(2), Ok(&[1u8, 2][..]));
        assert!(!r.is_empty());
        assert_eq!(r.end().unwrap_err(), "box data has 1 bytes more than its items");
        assert_eq!(r.u32().unwrap_err(), "box data cut short: 23 bytes where 26 are needed");
        assert_eq!(r.bytes(1), Ok(&[3u8][..]));
        assert!(r.is_empty());
        assert_eq!((r.end(), r.bytes(0)), (Ok(()), Ok(&[][..])));
        let mut counted = 3u64.to_le_bytes().to_vec();
        counted.extend([0; 16]);
        assert_eq!(Reader::new(&counted).len(5), Ok(3));
        let e = Reader::new(&counted).len(6).unwrap_err();
        assert_eq!(e, "box data claims 3 items of 6 bytes with 16 bytes left");
        assert!(Reader::new(&u64::MAX.to_le_bytes()).len(2).is_err(), "a count whose bytes overflow");
    }

    #[test]
    fn a_tile_travels_bit_for_bit_and_bad_bytes_are_named() {
        let tile = vec![1.5, -0.0, f64::MIN_POSITIVE, 1e300];
        let mut bytes = Vec::new();
        tile.pack(&mut bytes);
        let back = Vec::<f64>::unpack(&bytes).unwrap();
        assert!(back.iter().zip(&tile).all(|(a, b)| a.to_bits() == b.to_bits()));
        assert!(Vec::<f64>::unpack(&bytes[..bytes.len() - 1]).unwrap_err().contains("claims 4 items"));
        bytes.push(0);
        assert!(Vec::<f64>::unpack(&bytes).unwrap_err().contains("1 bytes more"));
        let huge = u64::MAX.to_le_bytes();
        assert!(Vec::<f64>::unpack(&huge).unwrap_err().contains("claims"));
        assert!(Vec::<f64>::unpack(&[1, 2]).unwrap_err().contains("cut short"));
    }

    /// Processes simulated in one program: each holds only the boxes it computes or reads
    /// (and gets from their owners those it only reads before the first iteration), computes
    /// its own boxes, then every box goes to the processes that read it under the next mapping,
    /// which moves boxes between processes every few iterations; gathered, the state is the
    /// shared-memory run's, bit for bit. After each iteration a process holds data only in the
    /// boxes within its halo.
    /// With `only_near`, a process's executor runs only the boxes within its halo.
    fn gathered_checksum(
        app: &str,
        scenario: &str,
        grid: pbs::Grid,
        processes: usize,
        iters: usize,
        only_near: bool,
    ) -> (u64, u64) {
        let [nx, ny, nz] = grid.dims();
        let mut exec = StaticBlocks::new(grid.len(), 2).unwrap();
        let mut rec = Recorder::new("static", 2);
        let mut whole = build_holding(app, scenario, grid, 3, None).unwrap();
        let nothing = build_holding(app, scenario, grid, 3, Some(&vec![false; grid.len()])).unwrap();
        let halo = nothing.halo();
        // Vertical slabs whose cuts shift by one column every third iteration, the upper half
        // of the grid shifted by one process (and in 3D the upper layers by one more): boxes
        // meet across faces, edges and corners alike.
        let owners_at = |it: usize| -> Vec<u32> {
            (0..grid.len())
                .map(|k| {
                    let [i, j, l] = grid.coords(k);
                    let shift = usize::from(j >= ny / 2) + usize::from(nz > 1 && l >= nz / 2);
                    (((i + it / 3) * processes / nx + shift) % processes) as u32
                })
                .collect()
        };
        let near = |owners: &[u32], p: usize| -> Vec<bool> {
            (0..grid.len()).map(|k| readers(&grid, owners, k, halo).contains(&(p as u32))).collect()
        };
        let start = owners_at(0);
        let mut parts: Vec<_> =
            (0..processes).map(|p| build_holding(app, scenario, grid, 3, Some(&near(&start, p))).unwrap()).collect();
        // The packed size of a box that holds nothing: md's two counts and momentum, the
        // stencil's length of an empty tile.
        let empty = if app.starts_with("md") { 32 } else { 8 };
        let holds_within =
            |part: &dyn Distributed, mine: &[bool]| (0..grid.len()).all(|k| mine[k] || part.packed_len(k) == empty);
        for (p, part) in parts.iter().enumerate() {
            assert!(
                holds_within(part.as_ref(), &near(&start, p)),
                "{app}: process {p} was built with a box beyond its halo"
            );
        }
        let mut bytes = Vec::new();
        // Each box from its owner under `owners` to the processes that read it under `next`,
        // the part they read, as `pbs-mpi`'s exchange sends it.
        let mut exchange = |parts: &mut Vec<Box<dyn Distributed>>, owners: &[u32], next: &[u32]| {
            for (k, &from) in owners.iter().enumerate() {
                let from = from as usize;
                bytes.clear();
                parts[from].pack_box(k, &mut bytes);
                assert_eq!(parts[from].packed_len(k), bytes.len(), "{app} box {k}");
                for q in (0..processes).filter(|&q| q != from) {
                    if let Some(part) = part_for(parts[from].as_ref(), next, k, q as u32) {
                        bytes.clear();
                        parts[from].pack_part(k, part, &mut bytes).unwrap();
                        parts[q].unpack_part(k, part, &bytes).unwrap();
                    }
                }
            }
        };
        exchange(&mut parts, &start, &start);
        for it in 0..iters {
            let owners = owners_at(it);
            for (p, part) in parts.iter_mut().enumerate() {
                part.compute_only(Some(owners.iter().map(|&o| o as usize == p).collect())).unwrap();
                if only_near {
                    let runs = near(&owners, p);
                    part.iterate(&mut Only { inner: StaticBlocks::new(grid.len(), 2).unwrap(), runs }, &mut rec, None);
                } else {
                    part.iterate(&mut exec, &mut rec, None);
                }
                assert!(
                    holds_within(part.as_ref(), &near(&owners, p)),
                    "{app}: process {p} holds a box beyond its halo"
                );
            }
            whole.iterate(&mut exec, &mut rec, None);
            exchange(&mut parts, &owners, &owners_at(it + 1));
        }
        let owners = owners_at(iters);
        let (first, rest) = parts.split_at_mut(1);
        for k in (0..grid.len()).filter(|&k| owners[k] != 0) {
            bytes.clear();
            rest[owners[k] as usize - 1].pack_box(k, &mut bytes);
            first[0].unpack_box(k, &bytes).unwrap();
        }
        (first[0].checksum(), whole.checksum())
    }

    #[test]
    fn boxes_computed_in_several_processes_and_gathered_give_the_shared_memory_state() {
        let (flat, deep) = (pbs::Grid::new(12, 9).unwrap(), pbs::Grid::new_3d(6, 5, 4).unwrap());
        for (app, scenario, grid) in [
            ("md", "gravity", flat),
            ("md", "expansion", flat),
            ("md-split", "contraction", flat),
            ("stencil", "rough", flat),
            ("stencil", "drift", deep),
        ] {
            for processes in [1, 2, 3] {
                for only_near in [false, true] {
                    let (gathered, whole) = gathered_checksum(app, scenario, grid, processes, 60, only_near);
                    let dims = grid.dims();
                    assert_eq!(gathered, whole, "{app} {scenario} {dims:?} on {processes} processes, near {only_near}");
                }
            }
        }
    }

    /// A reader gets the part its tasks read: of a stencil tile the faces next to its boxes,
    /// of an md box the whole box next to its boxes and the leave list two away; the parts
    /// travel bit for bit and bad part data is named.
    #[test]
    fn a_reader_gets_the_part_its_tasks_read() {
        let grid = pbs::Grid::new(5, 3).unwrap();
        // Around the centre box 7 (2, 1): process 1 owns the box left of it and the lower
        // right corner, 2 the one above, 3 only boxes two columns away.
        #[rustfmt::skip]
        let owners = [3, 0, 0, 1, 3,
                      3, 1, 0, 0, 3,
                      3, 0, 2, 0, 3];
        let stencil = build("stencil", "drift", 5, 3, 1).unwrap();
        let md = build("md", "gravity", 5, 3, 1).unwrap();
        let centre = 7;
        let part = |app: &dyn Distributed, p| part_for(app, &owners, centre, p);
        assert_eq!(part(stencil.as_ref(), 0), Some(WHOLE), "the owner takes it whole");
        let left = Faces::towards(&grid, &owners, centre, 1);
        assert_eq!(left.iter().collect::<Vec<_>>(), vec![(0, 0)], "the corner is no face");
        assert_eq!(part(stencil.as_ref(), 1), Some(left.bits()));
        assert_eq!(part(stencil.as_ref(), 2), Some(1 << 3), "the face above");
        assert_eq!(part(stencil.as_ref(), 3), None, "two away: beyond the stencil's halo");
        assert_eq!(part(md.as_ref(), 1), Some(WHOLE));
        assert_eq!(part(md.as_ref(), 3), Some(crate::md::LEAVERS), "two away: md's leave list");
        assert_eq!(part(md.as_ref(), 4), None);
        // Box 8 (3, 1): process 2 owns (2, 2), across a corner only.
        assert_eq!(part_for(stencil.as_ref(), &owners, 8, 2), None, "a corner only: nothing");

        // Apps run a few iterations, so that the data differ; a part of each into a fresh one.
        let mut exec = StaticBlocks::new(grid.len(), 1).unwrap();
        let mut rec = Recorder::new("static", 1);
        for (app, process) in [("stencil", 1), ("md", 3)] {
            let scenario = if app == "md" { "gravity" } else { "drift" };
            let mut from = build(app, scenario, 5, 3, 1).unwrap();
            for _ in 0..3 {
                from.iterate(&mut exec, &mut rec, None);
            }
            let mut to = build(app, scenario, 5, 3, 1).unwrap();
            let code = part_for(from.as_ref(), &owners, centre, process).unwrap();
            let (mut bytes, mut whole, mut back) = (Vec::new(), Vec::new(), Vec::new());
            from.pack_part(centre, code, &mut bytes).unwrap();
            from.pack_box(centre, &mut whole);
            assert!(bytes.len() < whole.len(), "{app}: a part, not the box: {} bytes of {}", bytes.len(), whole.len());
            to.unpack_part(centre, code, &bytes).unwrap();
            to.pack_part(centre, code, &mut back).unwrap();
            assert_eq!(back, bytes, "{app}");
            assert!(to.unpack_part(centre, code, &bytes[1..]).is_err(), "{app}");
            assert!(to.unpack_part(centre, 1 << 40, &bytes).unwrap_err().contains("box 7"), "{app}");
            assert!(from.pack_part(centre, 1 << 40, &mut back).is_err(), "{app}");
        }
    }

    #[test]
    fn readers_are_the_owners_within_the_halo() {
        let grid = pbs::Grid::new(6, 1).unwrap();
        let owners = [2, 0, 1, 1, 0, 0];
        assert_eq!(readers(&grid, &owners, 1, 1), vec![0, 1, 2]);
        assert_eq!(readers(&grid, &owners, 2, 2), vec![0, 1, 2]);
        assert_eq!(readers(&grid, &owners, 5, 1), vec![0]);
        assert_eq!(readers(&grid, &owners, 0, 0), vec![2]);
    }

    #[test]
    fn only_md_md_split_and_the_stencil_run_across_processes() {
        assert!(build("md", "gravity", 4, 4, 1).is_ok());
        assert!(build("stencil", "rough", 4, 4, 1).is_ok());
        assert!(build("md-split", "gravity", 4, 4, 1).is_ok());
        assert!(build("heat", "gravity", 4, 4, 1).err().unwrap().contains("md, md-split and stencil"));
        assert!(build("stencil", "x", 4, 4, 1).err().unwrap().contains("drift or rough"));
        assert!(build("md", "gravity", 0, 4, 1).is_err());
        let grid = |nx, ny, nz| pbs::Grid::new_3d(nx, ny, nz).unwrap();
        assert!(build_holding("md", "gravity", grid(4, 4, 1), 1, Some(&[true; 3]))
            .err()
            .unwrap()
            .contains("3 flags for 16 boxes"));
        assert!(initial_work("stencil", "x", grid(4, 4, 1), 1).err().unwrap().contains("drift or rough"));
        for app in ["md", "md-split", "stencil"] {
            let deep = build_holding(app, crate::default_scenario(app), grid(4, 4, 2), 1, None).unwrap();
            assert_eq!(deep.grid(), grid(4, 4, 2), "{app} in 3D");
            assert!(check_every_share(app, grid(4, 4, 2)).is_ok());
        }
        // More boxes than md's 32-bit particle ids allow: refused by name, before any memory.
        let huge = grid(crate::md::MAX_BOXES / 2 + 1, 2, 1);
        for e in [
            build_holding("md", "gravity", huge, 1, None).err().unwrap(),
            initial_work("md-split", "gravity", huge, 1).err().unwrap(),
            check_every_share("md", huge).err().unwrap(),
        ] {
            assert!(e.contains("32-bit particle ids"), "{e}");
        }
    }

    /// Hashed a range of boxes at a time, the state gives its checksum; a released box
    /// holds nothing.
    #[test]
    fn checksums_chain_over_ranges_of_boxes() {
        let mut exec = StaticBlocks::new(7 * 5, 1).unwrap();
        let mut rec = Recorder::new("static", 1);
        for (app, scenario, empty) in [("md", "contraction", 32), ("stencil", "drift", 8)] {
            let mut a = build(app, scenario, 7, 5, 2).unwrap();
            for _ in 0..4 {
                a.iterate(&mut exec, &mut rec, None);
            }
            for step in [1, 4, 35] {
                let chained =
                    (0..35).step_by(step).fold(CHECKSUM_START, |h, k| a.checksum_from(k..(k + step).min(35), h));
                assert_eq!(chained, a.checksum(), "{app}, ranges of {step}");
            }
            assert_ne!(a.checksum_from(0..3, CHECKSUM_START), a.checksum_from(0..4, CHECKSUM_START));
            let full = (0..35).max_by_key(|&k| a.packed_len(k)).unwrap();
            assert!(a.packed_len(full) > empty);
            a.release(full);
            assert_eq!(a.packed_len(full), empty, "{app}");
        }
    }

    /// The first partition's estimate, found without the state: the stencil's is its cost
    /// map, as `box_work` gives it (md's is tested beside it).
    #[test]
    fn the_initial_work_needs_no_state() {
        let flat = pbs::Grid::new(9, 7).unwrap();
        let md = crate::md::Md::<2>::initial_work(crate::md::Scenario::Gravity, flat, 2);
        assert!(md.iter().any(|&w| w > 0.0));
        assert_eq!(initial_work("md", "gravity", flat, 2).unwrap(), md);
        assert_eq!(initial_work("md-split", "gravity", flat, 2).unwrap(), md);
        let cube = pbs::Grid::new_3d(5, 4, 3).unwrap();
        let md = crate::md::Md::<3>::initial_work(crate::md::Scenario::Gravity, cube, 2);
        assert_eq!(initial_work("md", "gravity", cube, 2).unwrap(), md);
        let stencil = build("stencil", "drift", 7, 5, 2).unwrap();
        let grid = pbs::Grid::new(7, 5).unwrap();
        assert_eq!(initial_work("stencil", "drift", grid, 2).unwrap(), stencil.box_work());
        let deep = pbs::Grid::new_3d(4, 3, 5).unwrap();
        let stencil = build_holding("stencil", "drift", deep, 2, None).unwrap();
        assert_eq!(initial_work("stencil", "drift", deep, 2).unwrap(), stencil.box_work());
    }

    /// The sliding windows of `within` and the loops of `readers` against looking at every
    /// pair of boxes, on flat and deep grids, thin ones included.
    #[test]
    fn within_and_readers_see_every_box_within_the_halo_along_every_axis() {
        let mut rng = pbs::rng::SplitMix64::new(5);
        for dims in [[7, 5, 1], [1, 1, 6], [4, 1, 3], [5, 4, 3], [3, 6, 7]] {
            let grid = pbs::Grid::new_3d(dims[0], dims[1], dims[2]).unwrap();
            let owners: Vec<u32> = (0..grid.len()).map(|_| (rng.next_f64() * 3.0) as u32).collect();
            for halo in 0..4 {
                let close = |a: usize, b: usize| {
                    let (ca, cb) = (grid.coords(a), grid.coords(b));
                    (0..3).all(|x| ca[x].abs_diff(cb[x]) <= halo)
                };
                let near = within(&grid, halo, |k| owners[k] == 1);
                for (k, &is_near) in near.iter().enumerate() {
                    let expect = (0..grid.len()).any(|n| owners[n] == 1 && close(k, n));
                    assert_eq!(is_near, expect, "{dims:?} halo {halo} box {k}");
                    let mut all: Vec<u32> = (0..grid.len()).filter(|&n| close(k, n)).map(|n| owners[n]).collect();
                    all.sort_unstable();
                    all.dedup();
                    assert_eq!(readers(&grid, &owners, k, halo), all, "{dims:?} halo {halo} box {k}");
                }
            }
        }
    }

    /// A mask of boxes to compute must have one flag per box, and face bits name six faces at
    /// most.
    #[test]
    fn a_mask_of_the_wrong_length_and_bits_that_name_no_face_are_refused() {
        for app in ["md", "md-split", "stencil"] {
            let mut a = build(app, crate::default_scenario(app), 6, 5, 1).unwrap();
            let e = a.compute_only(Some(vec![true; 29])).unwrap_err();
            assert_eq!(e, "29 flags for 30 boxes", "{app}");
            a.compute_only(Some(vec![true; 30])).unwrap();
        }
        assert_eq!(Faces::from_bits(63).map(Faces::bits), Ok(63));
        assert_eq!(Faces::from_bits(64).unwrap_err(), "face bits 0x40 name no face");
    }
}
