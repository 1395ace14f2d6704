//! `pbs-bench peers`: pbs against the partitioners a user would pick instead (`pbs-peers`), on
//! the same load maps in one process. Per map and part count every method runs in turn,
//! `repeats` times round-robin, each round starting with the next method (times are medians);
//! per sequence step every method takes its turn on the same map, each step starting with the
//! next. See docs/peers.md for what the figures found.

use std::path::PathBuf;
use std::time::Instant;

use pbs::loadmap::PerlinMap;
use pbs::{metrics, Grid};
use pbs_peers::{quality, Partitioner};

use crate::shapes;
use crate::table::Table;

/// Where the load maps come from.
#[derive(Debug, Clone, PartialEq)]
pub enum Maps {
    /// The shapes of `pbs-bench maps` and Perlin maps sized per part count.
    Standard,
    /// Only the Perlin maps.
    Perlin,
    /// High-contrast 80×40 maps (rings, a disc, a gradient, a hot box, an md-like density),
    /// `seeds` of each: small parts on dense maps, where iterative methods struggle.
    Dense,
    /// Every `*.csv` load map of a folder.
    Dir(PathBuf),
}

/// What `peers` runs.
#[derive(Debug, Clone)]
pub struct PeersSettings {
    /// The maps.
    pub maps: Maps,
    /// Part counts; a map is run at a count only where it has ≥ [`MIN_BOXES_PER_PART`] boxes per part.
    pub parts: Vec<usize>,
    /// Boxes per part of the Perlin maps (each part count gets a square grid of about this many).
    pub boxes_per_part: Vec<usize>,
    /// Perlin seeds per size.
    pub seeds: usize,
    /// Steps of the drifting and re-drawn Perlin sequences, or with [`Maps::Dir`] of each map
    /// rolled by one column a step (0: none).
    pub sequence: usize,
    /// Methods by `pbs_peers` name.
    pub methods: Vec<String>,
    /// Timed runs per map and method, round-robin.
    pub repeats: usize,
    /// pbs's convergence tolerance (`max_avg ≤ (1 + tol) × bound`); `None`:
    /// `StopRule::for_problem`.
    pub pbs_tol: Option<f64>,
    /// The generated maps' dimensions: 2 (squares) or 3 (cubes of 3D Perlin noise; the
    /// shapes and dense maps are 2D, so with 3 they do not run; CSV maps bring their own).
    pub dims: usize,
    /// How far the drifting sequence's map moves a step along x, in boxes (half as far along
    /// y). Half a box is 1/36 of a part's side on 150² boxes and 72 parts but 1/12 on 26³:
    /// smaller steps in 3D compare like with like.
    pub drift: f64,
    /// The side of the drifting and re-drawn sequences' square or cube, in boxes; `None`:
    /// [`sequence_side`]. The warm steps' cost in 3D changes with it more than with the part
    /// count (docs/peers.md, "Warm steps by cube side").
    pub sequence_side: Option<usize>,
}

/// Fewest boxes per part a map is run at.
pub const MIN_BOXES_PER_PART: usize = 20;

impl Default for PeersSettings {
    fn default() -> Self {
        PeersSettings {
            maps: Maps::Standard,
            parts: vec![10, 16, 72, 256],
            boxes_per_part: vec![500, 100, 20],
            seeds: 2,
            sequence: 20,
            methods: pbs_peers::NAMES.iter().map(|s| s.to_string()).collect(),
            repeats: 3,
            pbs_tol: None,
            dims: 2,
            drift: DRIFT,
            sequence_side: None,
        }
    }
}

/// The drifting sequence's step along x, in boxes, unless asked otherwise.
pub const DRIFT: f64 = 0.5;

/// The longest drift a step: past a grid's side the sequence is a new map every step, which
/// `redraw` already is.
pub const MAX_DRIFT: f64 = 1000.0;

/// One method on one map at one part count.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PeerRow {
    /// map name
    pub map: String,
    /// `NXxNY`, or `NXxNYxNZ`
    pub grid: String,
    /// parts asked for
    pub parts: usize,
    /// method name
    pub method: String,
    /// why it did not run (e.g. coupe's RCB at a count that is not a power of two)
    pub skipped: Option<String>,
    /// the measures (absent when skipped)
    #[serde(flatten)]
    pub quality: Option<quality::Quality>,
    /// `max_avg / lower_bound`
    pub to_bound: Option<f64>,
    /// edge cut over the smallest edge cut of the methods that ran on this map
    pub cut_to_best: Option<f64>,
    /// the same for the cut between loaded boxes (`loaded_edge_cut`)
    pub loaded_cut_to_best: Option<f64>,
    /// balancer steps, for iterative methods
    pub steps: Option<usize>,
    /// median time of a partition, in ms
    pub time_ms: Option<f64>,
    /// what the method itself reported over the row's calls (METIS's printed diagnostics)
    pub note: Option<String>,
}

/// One method over one sequence of maps.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SequenceRow {
    /// `drift` (the map translated by half a box per step), `redraw` (a new map per step) or
    /// `roll` (a map of `--maps DIR` rolled by one column per step)
    pub sequence: String,
    /// the map: `perlin-s7` for `drift` and `redraw`, the file's name for `roll`
    pub map: String,
    /// `NXxNY`, or `NXxNYxNZ`
    pub grid: String,
    /// parts
    pub parts: usize,
    /// method name
    pub method: String,
    /// whether the method started each step from its previous result
    pub warm: bool,
    /// why it did not run, or the step at which it failed
    pub skipped: Option<String>,
    /// the measures over the steps (absent when skipped: a method that failed at some step
    /// has none, rather than those of the steps before)
    #[serde(flatten)]
    pub measures: Option<SequenceMeasures>,
    /// what the method itself reported over the sequence's calls (METIS's printed diagnostics)
    pub note: Option<String>,
}

/// What a [`SequenceRow`] measured over the steps of a sequence.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct SequenceMeasures {
    /// boxes whose part changed per step (ids of from-scratch methods matched by overlap), mean
    pub migrations_per_step: f64,
    /// median over steps of `max_avg / lower_bound`
    pub to_bound_median: f64,
    /// worst step's `max_avg / lower_bound`
    pub to_bound_max: f64,
    /// median edge cut over steps
    pub cut_median: f64,
    /// median over steps of the cut between loaded boxes (`loaded_edge_cut`)
    pub loaded_cut_median: f64,
    /// steps that left a part in more than one 4-connected piece
    pub split_steps: usize,
    /// median time of a step, in ms
    pub time_ms: f64,
    /// mean time of a step, in ms: a warm method that often has nothing to do has a median
    /// of its quick steps, the mean counts its rebalancings too
    pub time_ms_mean: f64,
}

/// A named load map.
#[derive(Debug, Clone)]
pub struct Map {
    /// e.g. `dense-rings-s1`
    pub name: String,
    /// its grid
    pub grid: Grid,
    /// one load per box
    pub loads: Vec<f64>,
}

/// The most boxes a generated Perlin map may have (1024 × 1024): the peers table runs every
/// method on every map, METIS and the pair-potential methods included, which on larger grids
/// take minutes each.
pub const MAX_BOXES: usize = 1 << 20;

/// Boxes the generated maps of one part count may hold at once (512 MiB of loads).
pub const MAX_HELD_BOXES: usize = 1 << 26;

/// The settings' error, if they ask for generated maps larger than [`MAX_BOXES`], or for so
/// many seeds that the maps of one part count would hold more than [`MAX_HELD_BOXES`] boxes
/// (`--seeds 1000000` ran the machine out of memory before a word was printed).
pub fn check_sizes(settings: &PeersSettings) -> Result<(), String> {
    let held = |per_seed: usize| {
        let boxes = settings.seeds.saturating_mul(per_seed);
        (boxes > MAX_HELD_BOXES).then(|| {
            format!(
                "--seeds {} asks for maps of {boxes} boxes at once; at most {MAX_HELD_BOXES} ({} seeds here)",
                settings.seeds,
                MAX_HELD_BOXES / per_seed.max(1)
            )
        })
    };
    crate::scaling::check_dims(settings.dims)?;
    match settings.maps {
        Maps::Dense if settings.dims == 3 => {
            return Err(
                "--dims 3 with --dense: the dense maps are 2D (a folder of CSV maps brings its own dimensions)".into()
            )
        }
        Maps::Dir(_) if settings.sequence_side.is_some() => {
            return Err("--sequence-side sizes the Perlin sequences; with --maps the sequences roll those maps".into())
        }
        Maps::Dir(_) => return Ok(()),
        Maps::Dense => {
            check_sequence_side(settings)?;
            return held(DENSE_SHAPES * 80 * 40).map_or(Ok(()), Err);
        }
        Maps::Standard | Maps::Perlin => check_sequence_side(settings)?,
    }
    for &parts in &settings.parts {
        let mut per_seed = 0usize;
        for &bpp in &settings.boxes_per_part {
            let side = side_for(parts, bpp, settings.dims);
            let boxes = side.saturating_pow(settings.dims as u32);
            if boxes > MAX_BOXES {
                let map = vec![side.to_string(); settings.dims].join("×");
                return Err(format!(
                    "--parts {parts} with --boxes-per-part {bpp} asks for a {map} map; generated maps go up to {MAX_BOXES} boxes"
                ));
            }
            per_seed += boxes;
        }
        if let Some(e) = held(per_seed) {
            return Err(e);
        }
    }
    Ok(())
}

/// The Perlin sequences' grid, where `--sequence-side` sets it: at most [`MAX_BOXES`] boxes and
/// at least [`MIN_BOXES_PER_PART`] a part at every part count.
fn check_sequence_side(settings: &PeersSettings) -> Result<(), String> {
    let Some(side) = settings.sequence_side.filter(|_| settings.sequence > 0) else { return Ok(()) };
    let boxes = side.saturating_pow(settings.dims as u32);
    let map = vec![side.to_string(); settings.dims].join("×");
    if boxes > MAX_BOXES {
        return Err(format!("--sequence-side {side} asks for a {map} map; generated maps go up to {MAX_BOXES} boxes"));
    }
    match settings.parts.iter().find(|&&parts| boxes < parts.saturating_mul(MIN_BOXES_PER_PART)) {
        Some(parts) => Err(format!(
            "--sequence-side {side}: a {map} map has {boxes} boxes, under {MIN_BOXES_PER_PART} a part at {parts} parts"
        )),
        None => Ok(()),
    }
}

/// The side of the square (`dims` 2) or cube (3) map nearest `parts × boxes_per_part` boxes,
/// one more where the nearest would hold fewer than [`MIN_BOXES_PER_PART`] boxes per part (10
/// parts at 20: 15² boxes, not 14², which [`maps`] would drop).
fn side_for(parts: usize, boxes_per_part: usize, dims: usize) -> usize {
    let side = (parts.saturating_mul(boxes_per_part) as f64).powf(1.0 / dims as f64).round() as usize;
    if side.saturating_pow(dims as u32) < parts.saturating_mul(MIN_BOXES_PER_PART) {
        side + 1
    } else {
        side
    }
}

/// The square (`dims` 2) or cube (3) of `side` boxes a side.
fn generated_grid(side: usize, dims: usize) -> Result<Grid, String> {
    if dims == 3 { Grid::new_3d(side, side, side) } else { Grid::new(side, side) }.map_err(|e| e.to_string())
}

/// `map`'s loads on a generated grid of `dims` dimensions (3D noise on a cube).
fn generated_loads(map: &PerlinMap, grid: &Grid, dims: usize) -> Vec<f64> {
    if dims == 3 {
        map.loads_3d(grid)
    } else {
        map.loads(grid)
    }
}

fn maps(settings: &PeersSettings, parts: usize) -> Result<Vec<Map>, String> {
    let mut out = Vec::new();
    match &settings.maps {
        Maps::Dir(dir) => {
            let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
                .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "csv"))
                .collect();
            files.sort();
            if files.is_empty() {
                return Err(format!("{} holds no .csv load map", dir.display()));
            }
            for f in files {
                let (grid, loads) = pbs::loadmap::read_csv(&f).map_err(|e| e.to_string())?;
                let name = f.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
                out.push(Map { name, grid, loads });
            }
        }
        Maps::Dense => out.extend(dense_maps(settings.seeds)),
        Maps::Standard | Maps::Perlin => {
            if settings.maps == Maps::Standard && settings.dims == 2 {
                out.extend(shapes::all().into_iter().map(|s| Map {
                    name: s.name.into(),
                    grid: s.grid,
                    loads: s.loads,
                }));
            }
            for &bpp in &settings.boxes_per_part {
                let grid = generated_grid(side_for(parts, bpp, settings.dims), settings.dims)?;
                for seed in 0..settings.seeds as u32 {
                    let loads = generated_loads(&PerlinMap::with_seed(seed + 1), &grid, settings.dims);
                    out.push(Map { name: format!("perlin-{bpp}bpp-s{}", seed + 1), grid, loads });
                }
            }
        }
    }
    out.retain(|m| m.grid.len() >= parts * MIN_BOXES_PER_PART);
    Ok(out)
}

/// Maps of the dense family per seed.
const DENSE_SHAPES: usize = 5;

/// The dense family (see [`Maps::Dense`]): five shapes on 80×40, each placed by its seed.
pub fn dense_maps(seeds: usize) -> Vec<Map> {
    let grid = Grid::new(80, 40).expect("non-empty");
    let mut out = Vec::new();
    for seed in 0..seeds as u64 {
        let mut rng = pbs::rng::SplitMix64::new(1000 + seed);
        let (cx, cy) = (20.0 + 40.0 * rng.next_f64(), 10.0 + 20.0 * rng.next_f64());
        let noise: Vec<f64> = (0..grid.len()).map(|_| rng.next_f64()).collect();
        let shape = |name: &str, f: &dyn Fn(f64, f64, usize) -> f64| Map {
            name: format!("dense-{name}-s{}", seed + 1),
            grid,
            loads: (0..grid.len())
                .map(|k| {
                    let c = grid.centre(k);
                    f(c[0], c[1], k)
                })
                .collect(),
        };
        let r = |x: f64, y: f64| ((x - cx).powi(2) + (y - cy).powi(2)).sqrt();
        out.push(shape("rings", &|x, y, _| {
            if (r(x, y) * std::f64::consts::TAU / 10.0).cos() > 0.3 {
                1.0
            } else {
                0.02
            }
        }));
        out.push(shape("disc", &|x, y, _| if r(x, y) < 12.0 { 50.0 } else { 1.0 }));
        out.push(shape("gradient", &|x, _, _| (6.0 * (x + cx - 20.0).rem_euclid(80.0) / 80.0).exp()));
        out.push(shape("hot-box", &|x, y, _| if (x - cx).abs() < 1.5 && (y - cy).abs() < 1.5 { 300.0 } else { 1.0 }));
        // Particles settled under gravity: dense at the bottom, a free surface, noise.
        out.push(shape("md-density", &|_, y, k| {
            let surface = 28.0 + 4.0 * (cx / 10.0).sin();
            if y < surface {
                (1.0 + 0.4 * noise[k]) * (1.0 + 2.0 * (-y / 6.0).exp())
            } else {
                0.05 * noise[k]
            }
        }));
    }
    out
}

/// `NXxNY`, or `NXxNYxNZ` on more than one layer.
fn grid_name(g: &Grid) -> String {
    if g.nz() > 1 {
        format!("{}x{}x{}", g.nx(), g.ny(), g.nz())
    } else {
        format!("{}x{}", g.nx(), g.ny())
    }
}

/// Runs every method on every map at every part count; calls `tick` once per (map, parts).
pub fn partitions(settings: &PeersSettings, mut tick: impl FnMut(&str)) -> Result<Vec<PeerRow>, String> {
    let mut rows = Vec::new();
    for &parts in &settings.parts {
        for map in maps(settings, parts)? {
            tick(&format!("{} / {parts} parts", map.name));
            let mut methods = make(settings)?;
            let mut times = vec![Vec::new(); methods.len()];
            let mut results: Vec<Result<Vec<u32>, String>> = vec![Err(String::new()); methods.len()];
            let n = methods.len();
            for rep in 0..settings.repeats.max(1) {
                // Each round starts with the next method (see `sequences`).
                for turn in 0..n {
                    let i = (turn + rep) % n;
                    let m = &mut methods[i];
                    m.reset();
                    let t = Instant::now();
                    let r = m.partition(&map.grid, &map.loads, parts);
                    times[i].push(t.elapsed().as_secs_f64() * 1e3);
                    results[i] = r.map_err(|e| e.to_string());
                }
            }
            let first = rows.len();
            for (i, m) in methods.iter().enumerate() {
                let mut row = PeerRow {
                    map: map.name.clone(),
                    grid: grid_name(&map.grid),
                    parts,
                    method: m.name().to_string(),
                    skipped: None,
                    quality: None,
                    to_bound: None,
                    cut_to_best: None,
                    loaded_cut_to_best: None,
                    steps: m.last_steps(),
                    time_ms: None,
                    note: m.note(),
                };
                match &results[i] {
                    Ok(owners) => {
                        let q = quality::measure(&map.grid, &map.loads, owners, parts);
                        row.to_bound = Some(q.max_avg / q.lower_bound);
                        row.quality = Some(q);
                        row.time_ms = Some(metrics::median(&times[i]));
                    }
                    Err(e) => row.skipped = Some(e.clone()),
                }
                rows.push(row);
            }
            let cut_best = to_best(&rows[first..], |q| q.edge_cut);
            let loaded_best = to_best(&rows[first..], |q| q.loaded_edge_cut);
            for (r, (c, l)) in rows[first..].iter_mut().zip(cut_best.into_iter().zip(loaded_best)) {
                (r.cut_to_best, r.loaded_cut_to_best) = (c, l);
            }
        }
    }
    if rows.is_empty() {
        return Err(format!(
            "no map has at least {MIN_BOXES_PER_PART} boxes per part at {:?} parts: give fewer parts or larger maps",
            settings.parts
        ));
    }
    Ok(rows)
}

/// Each row's cut (as `cut` reads it) over the smallest of the rows that ran; a cut equal to the
/// smallest is 1 × it, a cut of 0 included.
fn to_best(rows: &[PeerRow], cut: impl Fn(&quality::Quality) -> usize) -> Vec<Option<f64>> {
    let best = rows.iter().filter_map(|r| r.quality.as_ref().map(&cut)).min().unwrap_or(0);
    rows.iter()
        .map(|r| r.quality.as_ref().map(&cut).map(|c| if c == best { 1.0 } else { c as f64 / best.max(1) as f64 }))
        .collect()
}

fn make(settings: &PeersSettings) -> Result<Vec<Box<dyn Partitioner>>, String> {
    let pbs_stop = settings.pbs_tol.map(|tol| pbs::StopRule { tol, ..Default::default() });
    let make = |n: &String| -> Result<Box<dyn Partitioner>, String> {
        if let Some(p) = pbs_peers::Pbs::variant(n, pbs_stop) {
            return Ok(Box::new(p));
        }
        pbs_peers::by_name(n).map_err(|e| e.to_string())
    };
    settings.methods.iter().map(make).collect()
}

/// The grid side of the sequences at `parts` parts: in 2D the 64×64 at 16 parts and
/// 150×150 at 72, else (and in 3D) 256 boxes per part.
pub fn sequence_side(parts: usize, dims: usize) -> usize {
    if parts == 72 && dims == 2 {
        150
    } else {
        side_for(parts, 256, dims)
    }
}

/// The Perlin seed of the drifting and re-drawn sequences.
const SEQUENCE_SEED: u32 = 7;

/// Runs the sequences at every part count; `tick` per step: the drifting and re-drawn Perlin
/// maps, or with [`Maps::Dir`] each of its maps rolled by one column a step (a load that
/// travels across a periodic grid), where it has at least [`MIN_BOXES_PER_PART`] boxes a part.
pub fn sequences(settings: &PeersSettings, mut tick: impl FnMut(&str)) -> Result<Vec<SequenceRow>, String> {
    let mut rows = Vec::new();
    if settings.sequence == 0 {
        return Ok(rows);
    }
    for &parts in &settings.parts {
        if let Maps::Dir(_) = settings.maps {
            for map in maps(settings, parts)? {
                let at = |step: usize| rolled(&map.grid, &map.loads, step);
                let of =
                    Sequence { kind: "roll", map_name: &map.name, grid: map.grid, parts, steps: settings.sequence };
                rows.extend(sequence(make(settings)?, of, at, &mut tick)?);
            }
            continue;
        }
        let side = settings.sequence_side.unwrap_or_else(|| sequence_side(parts, settings.dims));
        let grid = generated_grid(side, settings.dims)?;
        for kind in ["drift", "redraw"] {
            let mut map = PerlinMap::with_seed(SEQUENCE_SEED);
            let drawn = |step: usize| -> Vec<f64> {
                if step > 0 {
                    map = if kind == "drift" { map.smooth(settings.drift) } else { map.rough() };
                }
                generated_loads(&map, &grid, settings.dims)
            };
            let name = format!("perlin-s{SEQUENCE_SEED}");
            let of = Sequence { kind, map_name: &name, grid, parts, steps: settings.sequence };
            rows.extend(sequence(make(settings)?, of, drawn, &mut tick)?);
        }
    }
    Ok(rows)
}

/// `loads` (one per box of `grid`) rolled by `step` columns: the load of column `x` moves to
/// column `x + step`, the last columns' coming round to the first (z and y unchanged).
fn rolled(grid: &Grid, loads: &[f64], step: usize) -> Vec<f64> {
    let nx = grid.nx();
    (0..grid.len()).map(|k| loads[k - k % nx + (k % nx + nx - step % nx) % nx]).collect()
}

/// Which sequence [`sequence`] runs: its kind, map and grid, the part count and the steps after
/// the cold start.
struct Sequence<'a> {
    kind: &'a str,
    map_name: &'a str,
    grid: Grid,
    parts: usize,
    steps: usize,
}

/// One sequence: the maps `loads_at(0)` (the cold start), then `loads_at(1..=steps)`, each
/// of `methods` taking its turn on each; one row per method.
fn sequence(
    mut methods: Vec<Box<dyn Partitioner>>,
    Sequence { kind, map_name, grid, parts, steps }: Sequence,
    mut loads_at: impl FnMut(usize) -> Vec<f64>,
    tick: &mut impl FnMut(&str),
) -> Result<Vec<SequenceRow>, String> {
    let n = methods.len();
    let (mut moved, mut bound, mut cut, mut time) =
        (vec![Vec::new(); n], vec![Vec::new(); n], vec![Vec::new(); n], vec![Vec::new(); n]);
    let mut loaded_cut = vec![Vec::new(); n];
    let mut split = vec![0; n];
    let mut previous: Vec<Option<Vec<u32>>> = vec![None; n];
    let mut skipped: Vec<Option<String>> = vec![None; n];
    let name = grid_name(&grid);
    // Step 0 is the cold start; steps 1..=steps are measured.
    for step in 0..=steps {
        tick(&format!("{kind} {map_name} {name} / {parts} parts, step {step}"));
        let loads = loads_at(step);
        // The methods take turns at going first: on a fixed order the first after a new
        // map measured 3–5 % slower (2026-11-30: pbs's warm steps at 150² / 72 parts,
        // 0.743 first against 0.708 second).
        for turn in 0..n {
            let i = (turn + step) % n;
            let m = &mut methods[i];
            if skipped[i].is_some() {
                continue;
            }
            let t = Instant::now();
            let owners = match m.partition(&grid, &loads, parts) {
                Ok(o) => o,
                Err(e) => {
                    skipped[i] = Some(if step == 0 { e.to_string() } else { format!("failed at step {step}: {e}") });
                    continue;
                }
            };
            let elapsed = t.elapsed().as_secs_f64() * 1e3;
            let owners = match (&previous[i], m.warm_starts()) {
                (Some(p), false) => {
                    metrics::match_labels(p, &owners, parts).map_err(|e| format!("{}: {e}", m.name()))?
                }
                _ => owners,
            };
            if let Some(p) = &previous[i] {
                let q = quality::measure(&grid, &loads, &owners, parts);
                moved[i].push(metrics::migrations(p, &owners) as f64);
                bound[i].push(q.max_avg / q.lower_bound);
                cut[i].push(q.edge_cut as f64);
                loaded_cut[i].push(q.loaded_edge_cut as f64);
                split[i] += usize::from(q.disconnected_parts > 0);
                time[i].push(elapsed);
            }
            previous[i] = Some(owners);
        }
    }
    let mean = |v: &[f64]| if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 };
    Ok(methods
        .iter()
        .enumerate()
        .map(|(i, m)| SequenceRow {
            sequence: kind.to_string(),
            map: map_name.to_string(),
            grid: grid_name(&grid),
            parts,
            method: m.name().to_string(),
            warm: m.warm_starts(),
            note: m.note(),
            skipped: skipped[i].clone(),
            measures: skipped[i].is_none().then(|| SequenceMeasures {
                migrations_per_step: mean(&moved[i]),
                to_bound_median: metrics::median(&bound[i]),
                to_bound_max: bound[i].iter().copied().fold(0.0, f64::max),
                cut_median: metrics::median(&cut[i]),
                loaded_cut_median: metrics::median(&loaded_cut[i]),
                split_steps: split[i],
                time_ms: metrics::median(&time[i]),
                time_ms_mean: mean(&time[i]),
            }),
        })
        .collect())
}

/// Draws every method's partition of the first map the settings run (at the first part count
/// that map runs at) into one PNG, a panel per method: boxes coloured by part, darker where
/// the load is higher, the title giving `max_avg / bound` and the edge cut.
/// Returns the map's name and part count.
pub fn draw_first_case(settings: &PeersSettings, path: &std::path::Path) -> Result<(String, usize), String> {
    let (parts, map) = settings
        .parts
        .iter()
        .find_map(|&p| maps(settings, p).ok()?.into_iter().next().map(|m| (p, m)))
        .ok_or("no map to draw")?;
    let mut drawn = Vec::new();
    for m in make(settings)?.iter_mut() {
        if let Ok(owners) = m.partition(&map.grid, &map.loads, parts) {
            let q = quality::measure(&map.grid, &map.loads, &owners, parts);
            let title = format!(
                "{}: {:.3}× bound, cut {}{}",
                m.name(),
                q.max_avg / q.lower_bound,
                q.edge_cut,
                if q.disconnected_parts > 0 { format!(", {} split", q.disconnected_parts) } else { String::new() }
            );
            drawn.push((title, owners));
        }
    }
    let panels: Vec<pbs_plot::panels::OwnerMap<'_>> = drawn
        .iter()
        .map(|(title, owners)| pbs_plot::panels::OwnerMap {
            title: title.clone(),
            grid: map.grid,
            loads: &map.loads,
            owners,
            positions: &[],
        })
        .collect();
    pbs_plot::panels::owner_maps(path, 3, 360, &panels).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok((map.name, parts))
}

/// The `note` cell of a row that did not run: why, then what the method reported.
fn skipped_note(why: &Option<String>, note: &Option<String>) -> String {
    let why = format!("skipped: {}", why.as_deref().unwrap_or(""));
    match note {
        Some(note) => format!("{why}; {note}"),
        None => why,
    }
}

/// The per-map table.
pub fn partition_table(rows: &[PeerRow]) -> Table {
    let mut t = Table::new(&[
        "map",
        "grid",
        "parts",
        "method",
        "max_avg",
        "/bound",
        "cut",
        "/best",
        "loaded cut",
        "/best",
        "disconn.",
        "empty",
        "steps",
        "ms",
        "note",
    ]);
    for r in rows {
        let mut cells = vec![r.map.clone(), r.grid.clone(), r.parts.to_string(), r.method.clone()];
        match (&r.quality, &r.skipped) {
            (Some(q), _) => cells.extend([
                format!("{:.4}", q.max_avg),
                format!("{:.4}", r.to_bound.unwrap_or(0.0)),
                q.edge_cut.to_string(),
                format!("{:.3}", r.cut_to_best.unwrap_or(0.0)),
                q.loaded_edge_cut.to_string(),
                format!("{:.3}", r.loaded_cut_to_best.unwrap_or(0.0)),
                q.disconnected_parts.to_string(),
                q.empty_parts.to_string(),
                r.steps.map_or("-".into(), |s| s.to_string()),
                format!("{:.2}", r.time_ms.unwrap_or(0.0)),
                r.note.clone().unwrap_or_default(),
            ]),
            (None, why) => {
                cells.extend(std::iter::repeat_n("-".to_string(), 10));
                cells.push(skipped_note(why, &r.note));
            }
        }
        t.row(cells);
    }
    t
}

/// Issue 18's balance targets for one row: within `within` × the lower bound (1.05 and
/// 1.01), or, where connected parts may not reach it, within 0.005 of the best `max_avg /
/// bound` that a peer reached on the same map and part count with every part in one piece
/// and none empty. Peers are the methods a user would pick instead: pbs's own rows (`pbs*`) do
/// not count.
fn balanced_or_near_best_connected(rows: &[PeerRow], r: &PeerRow, within: f64) -> bool {
    let Some(mine) = r.to_bound else { return false };
    let best = peers_of(rows, r)
        .filter(|o| o.quality.is_some_and(|q| q.disconnected_parts == 0 && q.empty_parts == 0))
        .filter_map(|o| o.to_bound)
        .fold(f64::INFINITY, f64::min);
    mine <= within || (best.is_finite() && mine <= best + 0.005)
}

/// Whether a row's cut (as `cut` reads it: the edge cut, or the loaded one) is within `within`
/// × the smallest such cut of the peers that balanced within 1.05 × the bound with every part
/// in one piece and none empty; `None` where no peer did (the cut target against partitions a
/// user could take as they are).
fn cut_within_balanced_peers(
    rows: &[PeerRow],
    r: &PeerRow,
    within: f64,
    cut: impl Fn(&quality::Quality) -> usize,
) -> Option<bool> {
    let mine = cut(r.quality.as_ref()?) as f64;
    let best = peers_of(rows, r)
        .filter(|o| o.to_bound.is_some_and(|b| b <= 1.05))
        .filter_map(|o| o.quality.filter(|q| q.disconnected_parts == 0 && q.empty_parts == 0))
        .map(|q| cut(&q) as f64)
        .reduce(f64::min)?;
    Some(mine <= within * best)
}

/// The rows of the peers (not pbs's own rows, `pbs*`) on `r`'s map and part count.
fn peers_of<'a>(rows: &'a [PeerRow], r: &'a PeerRow) -> impl Iterator<Item = &'a PeerRow> {
    rows.iter()
        .filter(move |o| !o.method.starts_with("pbs") && o.method != r.method && o.map == r.map && o.parts == r.parts)
}

/// One line per method over all maps: how often it reached 1.01 and 1.05 × the bound (or came
/// near the best connected partition of a peer), its cut against the best of any method and
/// against the best of the peers that balanced, its disconnected parts and its time against
/// `rcb`.
pub fn summary_table(rows: &[PeerRow]) -> Table {
    let mut t = Table::new(&[
        "method",
        "runs",
        "≤1.01×bound",
        "≤1.05×bound",
        "≤1.05 or best peer+0.005",
        "≤1.01 or best peer+0.005",
        "cut/best median",
        "cut/best max",
        "≤1.05×best cut",
        "≤1.05×best balanced peer's cut",
        "loaded cut/best median",
        "≤1.05×best loaded cut",
        "≤1.05×best balanced peer's loaded cut",
        "disconnected parts",
        "time/rcb median",
    ]);
    let mut names: Vec<&str> = Vec::new();
    rows.iter().for_each(|r| {
        if !names.contains(&r.method.as_str()) {
            names.push(&r.method)
        }
    });
    for name in names {
        let mine: Vec<&PeerRow> = rows.iter().filter(|r| r.method == name && r.quality.is_some()).collect();
        if mine.is_empty() {
            continue;
        }
        let n = mine.len();
        let count = |f: &dyn Fn(&PeerRow) -> bool| mine.iter().filter(|r| f(r)).count();
        let cuts: Vec<f64> = mine.iter().filter_map(|r| r.cut_to_best).collect();
        let loaded_cuts: Vec<f64> = mine.iter().filter_map(|r| r.loaded_cut_to_best).collect();
        let against_balanced = |cut: &dyn Fn(&quality::Quality) -> usize| {
            let against: Vec<bool> =
                mine.iter().filter_map(|r| cut_within_balanced_peers(rows, r, 1.05, cut)).collect();
            format!("{}/{}", against.iter().filter(|&&ok| ok).count(), against.len())
        };
        let time_to_rcb: Vec<f64> = mine
            .iter()
            .filter_map(|r| {
                let rcb = rows.iter().find(|o| o.method == "rcb" && o.map == r.map && o.parts == r.parts)?;
                Some(r.time_ms? / rcb.time_ms?.max(1e-6))
            })
            .collect();
        t.row(vec![
            name.to_string(),
            n.to_string(),
            format!("{}/{n}", count(&|r| r.to_bound.unwrap_or(f64::MAX) <= 1.01)),
            format!("{}/{n}", count(&|r| r.to_bound.unwrap_or(f64::MAX) <= 1.05)),
            format!("{}/{n}", count(&|r| balanced_or_near_best_connected(rows, r, 1.05))),
            format!("{}/{n}", count(&|r| balanced_or_near_best_connected(rows, r, 1.01))),
            format!("{:.3}", metrics::median(&cuts)),
            format!("{:.3}", cuts.iter().copied().fold(0.0, f64::max)),
            format!("{}/{n}", count(&|r| r.cut_to_best.unwrap_or(f64::MAX) <= 1.05)),
            against_balanced(&|q| q.edge_cut),
            format!("{:.3}", metrics::median(&loaded_cuts)),
            format!("{}/{n}", count(&|r| r.loaded_cut_to_best.unwrap_or(f64::MAX) <= 1.05)),
            against_balanced(&|q| q.loaded_edge_cut),
            mine.iter().map(|r| r.quality.map_or(0, |q| q.disconnected_parts)).sum::<usize>().to_string(),
            if time_to_rcb.is_empty() { "-".into() } else { format!("{:.2}", metrics::median(&time_to_rcb)) },
        ]);
    }
    t
}

/// The sequences table.
pub fn sequence_table(rows: &[SequenceRow]) -> Table {
    let mut t = Table::new(&[
        "sequence",
        "map",
        "grid",
        "parts",
        "method",
        "warm",
        "moved/step",
        "/bound med",
        "/bound max",
        "cut",
        "loaded cut",
        "steps split",
        "ms/step",
        "mean ms",
        "note",
    ]);
    for r in rows {
        let mut cells = vec![r.sequence.clone(), r.map.clone(), r.grid.clone(), r.parts.to_string(), r.method.clone()];
        match (&r.measures, &r.skipped) {
            (Some(m), _) => cells.extend([
                if r.warm { "yes" } else { "no" }.to_string(),
                format!("{:.1}", m.migrations_per_step),
                format!("{:.4}", m.to_bound_median),
                format!("{:.4}", m.to_bound_max),
                format!("{:.0}", m.cut_median),
                format!("{:.0}", m.loaded_cut_median),
                m.split_steps.to_string(),
                format!("{:.2}", m.time_ms),
                format!("{:.2}", m.time_ms_mean),
                r.note.clone().unwrap_or_default(),
            ]),
            (None, why) => {
                cells.extend(std::iter::repeat_n("-".to_string(), 9));
                cells.push(skipped_note(why, &r.note));
            }
        }
        t.row(cells);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> PeersSettings {
        PeersSettings {
            maps: Maps::Perlin,
            parts: vec![4, 16],
            boxes_per_part: vec![40],
            seeds: 1,
            sequence: 3,
            methods: vec!["pbs".into(), "rcb".into(), "coupe-rcb".into(), "hilbert".into()],
            repeats: 2,
            pbs_tol: None,
            dims: 2,
            drift: DRIFT,
            sequence_side: None,
        }
    }

    /// Generated maps past `MAX_BOXES`, or seeds past `MAX_HELD_BOXES` at once, are refused
    /// before anything runs, overflow included; maps from a folder are not generated.
    #[test]
    fn oversized_generated_maps_are_refused() {
        assert!(check_sizes(&small()).is_ok());
        let big = PeersSettings { parts: vec![4, 100_000], ..small() };
        assert!(check_sizes(&big).unwrap_err().contains("--parts 100000"));
        let absurd = PeersSettings { parts: vec![usize::MAX], boxes_per_part: vec![usize::MAX], ..small() };
        assert!(check_sizes(&absurd).is_err());
        assert!(check_sizes(&PeersSettings { maps: Maps::Dense, ..big }).is_ok());
        // Seeds enough to run out of memory: named, for generated and dense maps alike.
        let many = PeersSettings { seeds: 1_000_000, ..small() };
        assert!(check_sizes(&many).unwrap_err().contains("--seeds 1000000"));
        let dense = PeersSettings { maps: Maps::Dense, ..many };
        assert!(check_sizes(&dense).unwrap_err().contains("--seeds 1000000"));
        assert!(check_sizes(&PeersSettings { maps: Maps::Dense, seeds: 6, ..small() }).is_ok());
        assert!(check_sizes(&PeersSettings { seeds: usize::MAX, ..small() }).is_err());
        assert_eq!(dense_maps(2).len(), 2 * DENSE_SHAPES);
    }

    /// Every Perlin size asked for runs at every part count, the smallest included.
    #[test]
    fn every_asked_perlin_size_has_its_map() {
        let settings = PeersSettings { boxes_per_part: vec![500, 100, 20], ..small() };
        for parts in [10, 16, 72, 256] {
            let maps = maps(&settings, parts).unwrap();
            assert_eq!(maps.len(), 3, "{parts} parts: {:?}", maps.iter().map(|m| &m.name).collect::<Vec<_>>());
        }
        assert_eq!(side_for(10, 20, 2), 15);
        assert_eq!(side_for(16, 500, 2), 89, "the nearest square where it holds enough");
        // Cubes: 1,600 boxes are nearest 12³; 600 nearest 8³, too few for 30 parts of 20.
        assert_eq!(side_for(16, 100, 3), 12);
        assert_eq!(side_for(30, 20, 3), 9);
    }

    /// `dims` 3 runs every method on Perlin cubes (coupe's Hilbert curve, 2D only, skipped
    /// with its reason), the sequences too; the 2D-only map families are refused.
    #[test]
    fn cubes_run_every_method_and_the_sequences() {
        let methods = ["pbs", "rcb", "hilbert", "coupe-hilbert", "coupe-multi-jagged", "diffusion"];
        let s = PeersSettings {
            dims: 3,
            parts: vec![8],
            methods: methods.iter().map(|m| m.to_string()).collect(),
            ..small()
        };
        let got = maps(&s, 8).unwrap();
        assert_eq!(got.len(), 1);
        // 8 × 40 boxes: nearest 7³.
        assert_eq!((got[0].grid.dims(), &got[0].loads), ([7, 7, 7], &PerlinMap::with_seed(1).loads_3d(&got[0].grid)));
        let rows = partitions(&s, |_| {}).unwrap();
        assert_eq!(rows.len(), methods.len());
        for r in &rows {
            assert_eq!(r.grid, "7x7x7");
            if r.method == "coupe-hilbert" {
                assert!(r.skipped.as_deref().is_some_and(|e| e.contains("2D grids only")), "{r:?}");
            } else {
                assert!(r.to_bound.is_some_and(|b| b < 1.2), "{r:?}");
            }
        }
        let seq = sequences(&s, |_| {}).unwrap();
        // Two sequences (drift, redraw) of every method on 8 × 256 boxes: 13³.
        assert_eq!(seq.len(), 2 * methods.len());
        assert!(seq.iter().all(|r| r.grid == "13x13x13"), "{}", seq[0].grid);
        let drift: Vec<&SequenceRow> = seq.iter().filter(|r| r.sequence == "drift" && r.measures.is_some()).collect();
        assert_eq!(drift.len(), methods.len() - 1);
        assert!(drift.iter().any(|r| r.measures.unwrap().migrations_per_step > 0.0));
        let e = check_sizes(&PeersSettings { maps: Maps::Dense, ..s.clone() }).unwrap_err();
        assert!(e.contains("--dims 3 with --dense: the dense maps are 2D"), "{e}");
        assert!(check_sizes(&PeersSettings { maps: Maps::Dir(std::env::temp_dir()), ..s.clone() }).is_ok());
        let e = check_sizes(&PeersSettings { dims: 4, ..s.clone() }).unwrap_err();
        assert!(e.contains("--dims 4"), "{e}");
        // Generated maps go up to 2^20 boxes: 100³ fits, 103³ does not.
        let most = PeersSettings { parts: vec![1000], boxes_per_part: vec![1000], ..s };
        assert!(check_sizes(&most).is_ok());
        let big = PeersSettings { boxes_per_part: vec![1100], ..most };
        assert!(check_sizes(&big).unwrap_err().contains("a 103×103×103 map"), "{:?}", check_sizes(&big));
    }

    #[test]
    fn every_method_has_a_row_per_map_and_the_best_cut_is_one() {
        let rows = partitions(&small(), |_| {}).unwrap();
        assert_eq!(rows.len(), 2 * 4);
        for chunk in rows.chunks(4) {
            let best = chunk.iter().filter_map(|r| r.cut_to_best).fold(f64::MAX, f64::min);
            assert_eq!(best, 1.0);
            assert!(chunk.iter().all(|r| r.quality.is_some()), "4 and 16 are powers of two: all run");
        }
        let text = summary_table(&rows).text();
        assert!(text.contains("rcb") && text.contains("pbs"), "{text}");
    }

    /// A measured row of map "m" at 2 parts with these figures.
    fn peer_row(method: &str, to_bound: f64, edge_cut: usize, disconnected_parts: usize) -> PeerRow {
        PeerRow {
            map: "m".into(),
            grid: "4x4".into(),
            parts: 2,
            method: method.into(),
            skipped: None,
            quality: Some(quality::Quality {
                max_avg: to_bound,
                lower_bound: 1.0,
                edge_cut,
                loaded_edge_cut: edge_cut,
                disconnected_parts,
                empty_parts: 0,
            }),
            to_bound: Some(to_bound),
            cut_to_best: Some(1.0),
            loaded_cut_to_best: Some(1.0),
            steps: None,
            time_ms: Some(1.0),
            note: None,
        }
    }

    /// A row counts as balanced within 1.05 × the bound, or within 0.005 of the best row of
    /// another method on the same case whose parts are all connected and non-empty.
    #[test]
    fn balance_is_judged_against_the_best_connected_partition_of_another_method() {
        let row =
            |method: &str, to_bound: f64, disconnected_parts: usize| peer_row(method, to_bound, 4, disconnected_parts);
        let rows = [row("pbs", 1.09, 0), row("rcb", 1.087, 0), row("metis", 1.0, 3)];
        assert!(
            balanced_or_near_best_connected(&rows, &rows[0], 1.05),
            "within 0.005 of rcb; metis's parts are in pieces"
        );
        let rows = [row("pbs", 1.10, 0), row("rcb", 1.087, 0)];
        assert!(!balanced_or_near_best_connected(&rows, &rows[0], 1.05));
        let rows = [row("pbs", 1.04, 0), row("rcb", 1.0, 0)];
        assert!(balanced_or_near_best_connected(&rows, &rows[0], 1.05), "within 1.05 × the bound");
        assert!(!balanced_or_near_best_connected(&rows, &rows[0], 1.01), "not within 1.01, nor near rcb");
        let alone = [row("pbs", 1.2, 0)];
        assert!(!balanced_or_near_best_connected(&alone, &alone[0], 1.05), "no other method: the bound alone");
        let own = [row("pbs", 1.09, 0), row("pbs-cells", 1.087, 0), row("pbs-rcb-start", 1.087, 0)];
        assert!(!balanced_or_near_best_connected(&own, &own[0], 1.05), "pbs's own rows are not peers");
    }

    #[test]
    fn the_cut_is_judged_against_the_peers_that_balanced() {
        let row = peer_row;
        // coupe's cut is shorter but 1.2 × the bound; metis's is in pieces: rcb's counts.
        let rows =
            [row("pbs", 1.0, 104, 0), row("rcb", 1.03, 100, 0), row("coupe", 1.2, 50, 0), row("metis", 1.0, 60, 2)];
        let cut = |q: &quality::Quality| q.edge_cut;
        assert_eq!(cut_within_balanced_peers(&rows, &rows[0], 1.05, cut), Some(true));
        assert_eq!(cut_within_balanced_peers(&rows, &rows[0], 1.03, cut), Some(false));
        let none = [row("pbs", 1.0, 104, 0), row("coupe", 1.2, 50, 0), row("pbs-cells", 1.0, 10, 0)];
        assert_eq!(
            cut_within_balanced_peers(&none, &none[0], 1.05, cut),
            None,
            "no balanced peer; pbs's rows are not peers"
        );
    }

    /// The drifting sequence moves its map by the settings' drift a step: a tenth of a box
    /// moves fewer boxes a step than half a box, and RCB recomputed from scratch follows it.
    #[test]
    fn a_smaller_drift_moves_fewer_boxes_a_step() {
        let s = PeersSettings { parts: vec![4], methods: vec!["rcb".into()], sequence: 6, ..small() };
        let moved = |drift: f64| {
            let rows = sequences(&PeersSettings { drift, ..s.clone() }, |_| {}).unwrap();
            rows.iter().find(|r| r.sequence == "drift").unwrap().measures.unwrap().migrations_per_step
        };
        let (slow, fast) = (moved(0.1), moved(DRIFT));
        assert!(slow < fast, "{slow} boxes a step at 0.1, {fast} at {DRIFT}");
    }

    /// `--sequence-side` sizes the sequences' grid, in 2D and 3D, and is refused where it
    /// would leave under 20 boxes a part, pass the largest generated map, or has no Perlin
    /// sequence to size.
    #[test]
    fn the_sequence_side_sizes_the_sequences_grid() {
        let s = PeersSettings { parts: vec![4], methods: vec!["rcb".into()], sequence: 2, ..small() };
        for (dims, side, name) in [(2, 11, "11x11"), (3, 7, "7x7x7")] {
            let sized = PeersSettings { dims, sequence_side: Some(side), ..s.clone() };
            assert!(check_sizes(&sized).is_ok());
            let rows = sequences(&sized, |_| {}).unwrap();
            assert_eq!(rows.len(), 2);
            assert!(rows.iter().all(|r| r.grid == name && r.measures.is_some()), "{rows:?}");
        }
        let few = check_sizes(&PeersSettings { sequence_side: Some(8), ..s.clone() }).unwrap_err();
        assert!(few.contains("--sequence-side 8") && few.contains("64 boxes"), "{few}");
        let one = PeersSettings { sequence_side: Some(9), ..s.clone() };
        assert!(check_sizes(&one).is_ok(), "81 boxes hold 20 a part at 4 parts");
        let exactly = PeersSettings { parts: vec![5], sequence_side: Some(10), ..s.clone() };
        assert!(check_sizes(&exactly).is_ok(), "100 boxes are 20 a part at 5 parts");
        assert!(check_sizes(&PeersSettings { sequence_side: Some(1024), ..s.clone() }).is_ok(), "1024² is the largest");
        assert!(check_sizes(&PeersSettings { sequence_side: Some(1025), ..s.clone() }).is_err());
        let huge = check_sizes(&PeersSettings { sequence_side: Some(usize::MAX), ..s.clone() }).unwrap_err();
        assert!(huge.contains("go up to"), "{huge}");
        let dir = check_sizes(&PeersSettings { maps: Maps::Dir("x".into()), sequence_side: Some(9), ..s.clone() });
        assert!(dir.unwrap_err().contains("--maps"));
        assert!(check_sizes(&PeersSettings { maps: Maps::Dir("x".into()), ..s.clone() }).is_ok());
        let dense = check_sizes(&PeersSettings { maps: Maps::Dense, sequence_side: Some(8), ..s.clone() });
        assert!(dense.unwrap_err().contains("under 20 a part"));
        // Unsized, the sequences take 256 boxes a part, and 150² at 72 parts on squares.
        assert_eq!((sequence_side(16, 2), sequence_side(72, 2), sequence_side(72, 3)), (64, 150, 26));
        // Without sequences there is nothing to size.
        assert!(check_sizes(&PeersSettings { sequence: 0, sequence_side: Some(2), ..s }).is_ok());
    }

    #[test]
    fn sequences_count_real_moves_not_renamings() {
        let mut s = small();
        s.parts = vec![6];
        let rows = sequences(&s, |_| {}).unwrap();
        assert_eq!(rows.len(), 2 * 4);
        let coupe = rows.iter().find(|r| r.method == "coupe-rcb").unwrap();
        assert!(coupe.skipped.as_deref().unwrap().contains("power of two"));
        assert!(coupe.measures.is_none(), "a method that did not run has no figures: {coupe:?}");
        for r in rows.iter().filter(|r| r.skipped.is_none()) {
            let m = r.measures.unwrap();
            // A from-scratch split of a map drifting by half a box moves far fewer boxes than
            // the grid holds once ids are matched.
            if r.sequence == "drift" {
                assert!(m.migrations_per_step < 0.5 * 39.0 * 39.0, "{r:?}");
            }
            assert!(m.to_bound_median >= 1.0 && m.to_bound_max >= m.to_bound_median);
        }
    }

    /// A method that fails at a later step is reported with that step and no figures, not
    /// with the figures of the steps before; the methods beside it are measured as usual.
    #[test]
    fn a_method_that_fails_midway_has_no_figures() {
        /// k-way RCB until its third call, then an error.
        struct FailsThird(usize);
        impl Partitioner for FailsThird {
            fn name(&self) -> &str {
                "fails-third"
            }
            fn partition(&mut self, grid: &Grid, loads: &[f64], parts: usize) -> pbs_peers::Result<Vec<u32>> {
                self.0 += 1;
                if self.0 == 3 {
                    return Err(pbs_peers::Error::Coupe { method: "fails-third".into(), message: "gave up".into() });
                }
                Ok(pbs::bisection::kway_rcb(grid, loads, parts).unwrap())
            }
        }
        let grid = Grid::new(20, 20).unwrap();
        let methods: Vec<Box<dyn Partitioner>> = vec![Box::new(FailsThird(0)), Box::new(pbs_peers::Pbs::default())];
        let of = Sequence { kind: "drift", map_name: "ramp", grid, parts: 4, steps: 5 };
        let ramp = |step: usize| (0..grid.len()).map(|k| 1.0 + ((k + step) % 20) as f64).collect::<Vec<f64>>();
        let rows = sequence(methods, of, ramp, &mut |_| {}).unwrap();
        assert_eq!(rows[0].skipped.as_deref(), Some("failed at step 2: fails-third: coupe failed: gave up"));
        assert!(rows[0].measures.is_none(), "{:?}", rows[0]);
        assert!(rows[1].skipped.is_none() && rows[1].measures.is_some(), "{:?}", rows[1]);
    }

    /// Over 100 drifting steps at 51² / 10 parts the power cells left a part in pieces on two
    /// steps (2026-11-30); `pbs` mends its warm starts' parts, `pbs-cells` shows them.
    #[test]
    fn warm_starts_of_pbs_leave_no_part_in_pieces() {
        let s = PeersSettings {
            parts: vec![10],
            sequence: 100,
            methods: vec!["pbs".into(), "pbs-cells".into()],
            ..small()
        };
        let rows = sequences(&s, |_| {}).unwrap();
        let drift = |m: &str| rows.iter().find(|r| r.sequence == "drift" && r.method == m).unwrap().measures.unwrap();
        assert!(drift("pbs-cells").split_steps > 0, "the cells stayed whole: pick a harder case for this test");
        assert!(rows.iter().filter(|r| r.method == "pbs").all(|r| r.measures.unwrap().split_steps == 0), "{rows:?}");
        // Mending moves few boxes; the first warm step also hands the refined cold partition's
        // differences (its pairs cut straight) back to the cells: 29.05 against 27.61 boxes a
        // step on 2026-11-30, 1.0 and under before the pair pass.
        assert!((drift("pbs").migrations_per_step - drift("pbs-cells").migrations_per_step).abs() < 2.0);
    }

    #[test]
    fn rolling_moves_each_column_by_the_step_and_comes_round() {
        let grid = Grid::new(4, 2).unwrap();
        let loads = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        assert_eq!(rolled(&grid, &loads, 1), [4.0, 1.0, 2.0, 3.0, 8.0, 5.0, 6.0, 7.0]);
        assert_eq!(rolled(&grid, &loads, 6), rolled(&grid, &loads, 2));
        assert_eq!(rolled(&grid, &loads, 4), loads);
    }

    /// With a folder of maps the sequences are each map rolled a column a step, named by file.
    #[test]
    fn a_folder_of_maps_gives_one_rolled_sequence_per_map() {
        let dir = std::env::temp_dir().join(format!("pbs-peers-roll-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let grid = Grid::new(12, 10).unwrap();
        let loads: Vec<f64> = (0..grid.len()).map(|k| if k % 12 < 3 { 5.0 } else { 1.0 }).collect();
        std::fs::write(dir.join("band.csv"), pbs::loadmap::to_csv(&grid, &loads)).unwrap();
        let s = PeersSettings {
            maps: Maps::Dir(dir.clone()),
            parts: vec![4],
            methods: vec!["rcb".into(), "pbs".into()],
            sequence: 12,
            ..small()
        };
        let mut seen = Vec::new();
        let rows = sequences(&s, |m| seen.push(m.to_string())).unwrap();
        assert_eq!(rows.len(), 2);
        for r in &rows {
            assert_eq!((r.sequence.as_str(), r.map.as_str(), r.grid.as_str()), ("roll", "band", "12x10"));
            assert!(r.measures.unwrap().migrations_per_step > 0.0, "a rolled band moves every method's parts: {r:?}");
        }
        assert!(seen.iter().any(|m| m == "roll band 12x10 / 4 parts, step 12"), "{seen:?}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A folder's 3D map (layers separated by blank lines) runs as a cube: partitions in one
    /// piece on it, and its rolled sequence; coupe's Hilbert curve, 2D only, says so.
    #[test]
    fn a_folder_of_maps_takes_cubes() {
        let dir = std::env::temp_dir().join(format!("pbs-peers-cube-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let grid = Grid::new_3d(8, 6, 5).unwrap();
        let loads: Vec<f64> = (0..grid.len()).map(|k| 1.0 + grid.coords(k)[2] as f64).collect();
        std::fs::write(dir.join("cube.csv"), pbs::loadmap::to_csv(&grid, &loads)).unwrap();
        let s = PeersSettings {
            maps: Maps::Dir(dir.clone()),
            parts: vec![6],
            methods: vec!["rcb".into(), "pbs".into(), "coupe-hilbert".into()],
            sequence: 4,
            ..small()
        };
        check_sizes(&s).unwrap();
        let rows = partitions(&s, |_| {}).unwrap();
        assert_eq!(rows.len(), 3);
        for r in &rows {
            assert_eq!((r.map.as_str(), r.grid.as_str()), ("cube", "8x6x5"));
            match r.method.as_str() {
                "coupe-hilbert" => assert!(r.quality.is_none() && r.skipped.as_ref().unwrap().contains("2D"), "{r:?}"),
                _ => assert!(r.quality.unwrap().disconnected_parts == 0 && r.to_bound.unwrap() < 1.1, "{r:?}"),
            }
        }
        let seq = sequences(&s, |_| {}).unwrap();
        assert!(seq.iter().all(|r| (r.sequence.as_str(), r.grid.as_str()) == ("roll", "8x6x5")), "{seq:?}");
        assert!(seq.iter().filter(|r| r.method != "coupe-hilbert").all(|r| r.measures.is_some()), "{seq:?}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// Each seed's five shapes on 80×40, as `dense_maps` draws them around a centre (cx, cy)
    /// in [20, 60) × [10, 30): a disc of radius 12 at 50 and a 3×3 hot box at 300 there;
    /// rings of 1 over 0.02, 10 boxes apart, on about acos(0.3)/π of the boxes; a gradient
    /// along x alone from 1 to nearly e⁶, starting over at x = 20 − cx (mod 80); dense
    /// particles under a free surface at y = 28 + 4 sin(cx / 10), a thin remainder above it.
    #[test]
    fn the_dense_maps_have_the_shapes_they_are_named_for() {
        let maps = dense_maps(3);
        let extremes = |v: &[f64]| v.iter().fold((f64::MAX, 0.0f64), |(a, b), &q| (a.min(q), b.max(q)));
        let mut centres = Vec::new();
        for (seed, five) in maps.chunks(DENSE_SHAPES).enumerate() {
            let names: Vec<&str> = five.iter().map(|m| m.name.as_str()).collect();
            let s = seed + 1;
            assert_eq!(
                names,
                [
                    format!("dense-rings-s{s}"),
                    format!("dense-disc-s{s}"),
                    format!("dense-gradient-s{s}"),
                    format!("dense-hot-box-s{s}"),
                    format!("dense-md-density-s{s}")
                ]
            );
            let grid = five[0].grid;
            assert_eq!((grid.nx(), grid.ny()), (80, 40));
            let at = |m: &Map, value: f64| -> Vec<[f64; 3]> {
                (0..grid.len()).filter(|&k| m.loads[k] == value).map(|k| grid.centre(k)).collect()
            };
            let centroid = |c: &[[f64; 3]]| {
                let n = c.len() as f64;
                (c.iter().map(|p| p[0]).sum::<f64>() / n, c.iter().map(|p| p[1]).sum::<f64>() / n)
            };
            let (rings, disc, gradient, hot, md) = (&five[0], &five[1], &five[2], &five[3], &five[4]);
            let in_disc = at(disc, 50.0);
            assert!((in_disc.len() as f64 - std::f64::consts::PI * 144.0).abs() < 20.0, "{}", in_disc.len());
            assert_eq!(in_disc.len() + at(disc, 1.0).len(), grid.len());
            let (cx, cy) = centroid(&in_disc);
            assert!((20.0..60.0).contains(&cx) && (10.0..30.0).contains(&cy), "({cx}, {cy})");
            let in_hot = at(hot, 300.0);
            assert_eq!(in_hot.len() + at(hot, 1.0).len(), grid.len());
            assert_eq!(in_hot.len(), 9);
            let (hx, hy) = centroid(&in_hot);
            assert!((hx - cx).abs() < 1.0 && (hy - cy).abs() < 1.0, "({hx}, {hy}) against ({cx}, {cy})");
            centres.push((hx, hy));
            // Where each shape sits follows the centre, (hx, hy) within half a box of it.
            let row_at = |y: f64| ((y.floor() as usize).min(39)) * 80;
            let through = &rings.loads[row_at(hy)..row_at(hy) + 80];
            let turns = through.windows(2).filter(|w| w[0] != w[1]).count();
            assert!((10..=22).contains(&turns), "rings 10 boxes apart: {turns} turns along a row");
            let lowest = (0..80).min_by(|&a, &b| gradient.loads[a].total_cmp(&gradient.loads[b])).unwrap() as f64 + 0.5;
            let restart = (100.0 - hx).rem_euclid(80.0);
            let off = (lowest - restart).rem_euclid(80.0).min((restart - lowest).rem_euclid(80.0));
            assert!(off <= 1.5, "the gradient starts over at x {lowest}, not near {restart}");
            let surface = 28.0 + 4.0 * (hx / 10.0).sin();
            let first_thin = (0..40).find(|&j| md.loads[j * 80] < 0.5).unwrap() as f64 + 0.5;
            assert!((first_thin - surface).abs() <= 1.2, "the surface at {first_thin}, not near {surface}");

            let lit = at(rings, 1.0).len() as f64 / grid.len() as f64;
            assert_eq!(at(rings, 1.0).len() + at(rings, 0.02).len(), grid.len());
            assert!((lit - 0.3f64.acos() / std::f64::consts::PI).abs() < 0.05, "{lit}");

            let row = &gradient.loads[..80];
            assert!(gradient.loads.chunks(80).all(|r| r == row), "the gradient depends on x alone");
            let (lo, hi) = extremes(row);
            assert!((1.0..1.1).contains(&lo) && hi > 6f64.exp() * 0.9 && hi <= 6f64.exp(), "{lo} {hi}");

            for k in 0..grid.len() {
                let y = grid.centre(k)[1];
                if y < 24.0 {
                    assert!(md.loads[k] >= 1.0, "below any surface at y {y}: {}", md.loads[k]);
                } else if y > 32.0 {
                    assert!(md.loads[k] <= 0.05, "above any surface at y {y}: {}", md.loads[k]);
                }
            }
            // Below the surface, rows denser towards the bottom as 1 + 2 e^(−y/6), times a
            // noise of 1 to 1.4 (mean 1.2).
            for j in 0..20 {
                let y = j as f64 + 0.5;
                let r = &md.loads[80 * j..80 * (j + 1)];
                let profile = 1.0 + 2.0 * (-y / 6.0).exp();
                let mean = r.iter().sum::<f64>() / 80.0 / profile;
                assert!((mean - 1.2).abs() < 0.06, "row {j}: {mean} × the profile");
                let (lo, hi) = extremes(r);
                assert!(lo >= profile && hi <= 1.4 * profile && hi / lo > 1.2, "row {j}: {lo}..{hi}");
            }
        }
        assert!(centres.windows(2).all(|w| w[0] != w[1]), "each seed its own centre: {centres:?}");
    }

    /// The limits are inclusive: a map of exactly `MAX_BOXES` boxes, and maps of one part
    /// count holding exactly `MAX_HELD_BOXES`, run; the maps of every asked size count.
    #[test]
    fn the_size_limits_are_reached_not_passed() {
        // 1024 parts × 1024 boxes a part: a 1024 × 1024 map, MAX_BOXES exactly.
        let at_max = PeersSettings { parts: vec![1024], boxes_per_part: vec![1024], seeds: 1, ..small() };
        assert!(check_sizes(&at_max).is_ok());
        let past = PeersSettings { boxes_per_part: vec![1026], ..at_max.clone() };
        assert!(check_sizes(&past).unwrap_err().contains("1025×1025"));
        // 64 seeds of MAX_BOXES: MAX_HELD_BOXES exactly; a second size of map passes it.
        assert!(check_sizes(&PeersSettings { seeds: 64, ..at_max.clone() }).is_ok());
        let two_sizes = PeersSettings { seeds: 64, boxes_per_part: vec![1024, 20], ..at_max };
        assert!(check_sizes(&two_sizes).unwrap_err().contains("--seeds 64"));
        // Five dense maps of 80 × 40 a seed: 4,194 seeds fit, 4,195 do not.
        assert!(check_sizes(&PeersSettings { maps: Maps::Dense, seeds: 4194, ..small() }).is_ok());
        assert!(check_sizes(&PeersSettings { maps: Maps::Dense, seeds: 4195, ..small() }).is_err());
        // Where the nearest square holds exactly 20 boxes a part, it is the side.
        assert_eq!(side_for(20, 20, 2), 20);
    }

    /// Generated Perlin maps are named by size and seed (from 1) and drawn from that seed;
    /// maps with fewer than `MIN_BOXES_PER_PART` boxes a part are left out.
    #[test]
    fn maps_are_named_by_seed_and_kept_where_they_have_enough_boxes_a_part() {
        let settings = PeersSettings { seeds: 2, boxes_per_part: vec![40], ..small() };
        let got = maps(&settings, 4).unwrap();
        let names: Vec<&str> = got.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["perlin-40bpp-s1", "perlin-40bpp-s2"]);
        for (m, seed) in got.iter().zip(1..) {
            assert_eq!(m.loads, PerlinMap::with_seed(seed).loads(&m.grid), "{}", m.name);
        }
        let dir = std::env::temp_dir().join(format!("pbs-peers-sizes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, nx) in [("wide", 20), ("narrow", 19)] {
            let grid = Grid::new(nx, 4).unwrap();
            std::fs::write(dir.join(format!("{name}.csv")), pbs::loadmap::to_csv(&grid, &vec![1.0; grid.len()]))
                .unwrap();
        }
        // 4 parts need 80 boxes: 20 × 4 has them, 19 × 4 not.
        let from_dir = maps(&PeersSettings { maps: Maps::Dir(dir.clone()), ..small() }, 4).unwrap();
        assert_eq!(from_dir.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(), ["wide"]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// Each row's ratios are its own measures': `max_avg / lower_bound`, and the edge cut over
    /// the smallest of the methods on the same map (1 for that one).
    #[test]
    fn the_ratios_of_a_row_are_of_its_own_measures() {
        let rows = partitions(&PeersSettings { parts: vec![16], ..small() }, |_| {}).unwrap();
        let best = rows.iter().filter_map(|r| r.quality.map(|q| q.edge_cut)).min().unwrap();
        let loaded_best = rows.iter().filter_map(|r| r.quality.map(|q| q.loaded_edge_cut)).min().unwrap();
        assert!(rows.iter().filter_map(|r| r.quality).any(|q| q.edge_cut > best), "the test needs cuts that differ");
        for r in &rows {
            let q = r.quality.unwrap();
            assert_eq!(r.to_bound, Some(q.max_avg / q.lower_bound), "{r:?}");
            assert_eq!(r.cut_to_best, Some(q.edge_cut as f64 / best as f64), "{r:?}");
            assert_eq!(r.loaded_cut_to_best, Some(q.loaded_edge_cut as f64 / loaded_best as f64), "{r:?}");
        }
        // A box of 1,000 among 399 of 1: the bound is 1000 / 349.75 at 4 parts.
        let dir = std::env::temp_dir().join(format!("pbs-peers-bound-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let grid = Grid::new(20, 20).unwrap();
        let loads: Vec<f64> = (0..grid.len()).map(|k| if k == 210 { 1000.0 } else { 1.0 }).collect();
        std::fs::write(dir.join("hot.csv"), pbs::loadmap::to_csv(&grid, &loads)).unwrap();
        let s = PeersSettings { maps: Maps::Dir(dir.clone()), parts: vec![4], ..small() };
        for r in partitions(&s, |_| {}).unwrap() {
            let q = r.quality.unwrap();
            assert!((q.lower_bound - 1000.0 / 349.75).abs() < 1e-12, "{q:?}");
            assert_eq!(r.to_bound, Some(q.max_avg / q.lower_bound), "{r:?}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// On a map with empty boxes the loaded cut, faces between two loaded boxes only, is
    /// shorter than the edge cut where a border runs through empty space, and its ratio is
    /// over the smallest loaded cut: here a disc of load in an empty square, whose parts meet
    /// along borders that run on through the empty boxes to the map's edge.
    #[test]
    fn the_loaded_cut_leaves_out_faces_beside_empty_boxes() {
        let dir = std::env::temp_dir().join(format!("pbs-peers-loaded-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let grid = Grid::new(24, 24).unwrap();
        let loads: Vec<f64> = (0..grid.len())
            .map(|k| {
                let (x, y) = ((k % 24) as f64 - 11.5, (k / 24) as f64 - 11.5);
                if x * x + y * y < 64.0 {
                    1.0
                } else {
                    0.0
                }
            })
            .collect();
        std::fs::write(dir.join("disc.csv"), pbs::loadmap::to_csv(&grid, &loads)).unwrap();
        let s = PeersSettings { maps: Maps::Dir(dir.clone()), parts: vec![4], ..small() };
        let rows = partitions(&s, |_| {}).unwrap();
        std::fs::remove_dir_all(dir).unwrap();
        let loaded_best = rows.iter().filter_map(|r| r.quality.map(|q| q.loaded_edge_cut)).min().unwrap();
        for r in &rows {
            let q = r.quality.unwrap();
            assert!(q.loaded_edge_cut < q.edge_cut, "{r:?}");
            assert!(q.loaded_edge_cut > 0, "{r:?}");
            assert_eq!(r.loaded_cut_to_best, Some(q.loaded_edge_cut as f64 / loaded_best as f64), "{r:?}");
        }
        let text = partition_table(&rows).text();
        assert!(text.contains("loaded cut"), "{text}");
    }

    /// `--pbs-tol` reaches every pbs row as its stop rule's tolerance (the rest of the rule
    /// pbs's default), and no other method. (`pbs`'s parts come out the same here at either
    /// tolerance, after its refinement; `pbs-cells`' do not.)
    #[test]
    fn the_pbs_tolerance_is_the_pbs_rows_stop_rule() {
        let grid = Grid::new(40, 40).unwrap();
        let loads = PerlinMap::with_seed(5).loads(&grid);
        let methods = vec!["pbs".to_string(), "pbs-cells".into(), "rcb".into()];
        let loose = PeersSettings { pbs_tol: Some(0.3), methods: methods.clone(), ..small() };
        let stop = pbs::StopRule { tol: 0.3, ..Default::default() };
        for (mut m, name) in make(&loose).unwrap().into_iter().zip(&methods) {
            let got = m.partition(&grid, &loads, 8).unwrap();
            let by_hand = match pbs_peers::Pbs::variant(name, Some(stop)) {
                Some(mut p) => p.partition(&grid, &loads, 8).unwrap(),
                None => pbs_peers::by_name(name).unwrap().partition(&grid, &loads, 8).unwrap(),
            };
            assert!(got == by_hand, "{name}");
            if name == "pbs-cells" {
                let default = pbs_peers::by_name(name).unwrap().partition(&grid, &loads, 8).unwrap();
                assert!(got != default, "{name}: the test needs a tolerance that changes the parts");
            }
        }
    }

    /// A method that recomputes from scratch may give the same parts other ids from step to
    /// step: its ids are matched to the previous step's before moves are counted, so that a
    /// renaming is no move. Here a k-way RCB whose ids turn by one a call moves exactly as many
    /// boxes as the RCB beside it.
    #[test]
    fn moves_of_a_method_that_renames_its_parts_are_counted_after_matching() {
        struct Renaming(u32);
        impl Partitioner for Renaming {
            fn name(&self) -> &str {
                "renaming"
            }
            fn partition(&mut self, grid: &Grid, loads: &[f64], parts: usize) -> pbs_peers::Result<Vec<u32>> {
                self.0 += 1;
                let owners = pbs::bisection::kway_rcb(grid, loads, parts)?;
                Ok(owners.into_iter().map(|p| (p + self.0) % parts as u32).collect())
            }
        }
        let grid = Grid::new(30, 30).unwrap();
        let methods: Vec<Box<dyn Partitioner>> = vec![Box::new(Renaming(0)), Box::new(pbs_peers::KwayRcb)];
        let of = Sequence { kind: "drift", map_name: "perlin", grid, parts: 6, steps: 6 };
        let mut map = PerlinMap::with_seed(3);
        let drift = |step: usize| {
            if step > 0 {
                map = map.smooth(0.5);
            }
            map.loads(&grid)
        };
        let rows = sequence(methods, of, drift, &mut |_| {}).unwrap();
        let (renaming, rcb) = (rows[0].measures.unwrap(), rows[1].measures.unwrap());
        assert!(rcb.migrations_per_step > 0.0 && rcb.migrations_per_step < 0.2 * 900.0, "{rcb:?}");
        assert_eq!(renaming.migrations_per_step, rcb.migrations_per_step);
        assert!(!rows[0].warm && !rows[1].warm);
        let t = sequence_table(&rows);
        let methods: Vec<&str> = t.rows.iter().map(|r| r[4].as_str()).collect();
        assert_eq!(methods, ["renaming", "rcb"]);
    }

    /// The summary has a line per method that ran somewhere, in order of first appearance;
    /// its time column is the median of its time over `rcb`'s on the same map and part count
    /// (maps without an `rcb` row left out); the per-map table has a line per row, a skipped
    /// one saying why.
    #[test]
    fn the_tables_have_a_line_per_method_and_row() {
        let at = |map: &str, parts: usize, method: &str, time_ms: f64| PeerRow {
            map: map.into(),
            parts,
            time_ms: Some(time_ms),
            ..peer_row(method, 1.0, 10, 0)
        };
        let skipped = PeerRow { quality: None, skipped: Some("too few parts".into()), ..at("m", 2, "coupe-rcb", 1.0) };
        let rows = [
            at("m", 2, "pbs", 2.0),
            at("m", 2, "rcb", 1.0),
            at("n", 2, "pbs", 6.0),
            at("n", 2, "rcb", 2.0),
            at("m", 4, "pbs", 9.0),
            at("n", 4, "rcb", 1.0),
            skipped.clone(),
        ];
        let t = summary_table(&rows);
        let column = t.header.iter().position(|h| h == "time/rcb median").unwrap();
        let lines: Vec<(&str, &str, &str)> =
            t.rows.iter().map(|r| (r[0].as_str(), r[1].as_str(), r[column].as_str())).collect();
        // pbs: 2 / 1 and 6 / 2 (no rcb row at m, 4 parts); rcb against itself.
        assert_eq!(lines, [("pbs", "3", "2.50"), ("rcb", "3", "1.00")]);
        let t = partition_table(&rows);
        assert_eq!(t.rows.len(), rows.len());
        let last = t.rows.last().unwrap();
        assert_eq!(last.last().unwrap(), "skipped: too few parts");
        assert_eq!(last.len(), t.header.len(), "the reason under `note`: {last:?}");
        assert!(last[4..last.len() - 1].iter().all(|c| c == "-"), "{last:?}");
        // A sequence that did not run says why under its `note` too.
        let seq = SequenceRow {
            sequence: "drift".into(),
            map: "m".into(),
            grid: "4x4".into(),
            parts: 2,
            method: "coupe-rcb".into(),
            warm: false,
            skipped: Some("too few parts".into()),
            measures: None,
            note: None,
        };
        let t = sequence_table(std::slice::from_ref(&seq));
        let last = t.rows.last().unwrap();
        assert_eq!(last.len(), t.header.len(), "{last:?}");
        assert_eq!(last.last().unwrap(), "skipped: too few parts");
        // What a method reported goes under `note` as well, after the reason where it did not run.
        let said = Some("METIS printed \"x\" (1 of 1 calls)".to_string());
        let t = partition_table(&[
            PeerRow { note: said.clone(), ..rows[0].clone() },
            PeerRow { note: said.clone(), ..skipped },
        ]);
        assert_eq!(t.rows[0].last().unwrap(), "METIS printed \"x\" (1 of 1 calls)");
        assert_eq!(t.rows[1].last().unwrap(), "skipped: too few parts; METIS printed \"x\" (1 of 1 calls)");
        let t = sequence_table(&[SequenceRow { note: said, ..seq }]);
        assert_eq!(t.rows[0].last().unwrap(), "skipped: too few parts; METIS printed \"x\" (1 of 1 calls)");
    }

    /// The drawing is of the first map the settings run, at the first part count it runs at
    /// (here 16 parts: at 40, its 400 boxes give fewer than `MIN_BOXES_PER_PART` a part).
    #[test]
    fn the_drawn_case_is_the_first_map_at_its_first_part_count() {
        let dir = std::env::temp_dir().join(format!("pbs-peers-draw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let grid = Grid::new(20, 20).unwrap();
        let loads: Vec<f64> = (0..grid.len()).map(|k| 1.0 + (k % 7) as f64).collect();
        std::fs::write(dir.join("a.csv"), pbs::loadmap::to_csv(&grid, &loads)).unwrap();
        let s = PeersSettings { maps: Maps::Dir(dir.clone()), parts: vec![40, 16, 4], ..small() };
        let png = dir.join("drawn.png");
        assert_eq!(draw_first_case(&s, &png).unwrap(), ("a".to_string(), 16));
        let bytes = std::fs::read(&png).unwrap();
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 1000, "{} bytes", bytes.len());
        let none = PeersSettings { parts: vec![40], ..s };
        assert_eq!(draw_first_case(&none, &png).unwrap_err(), "no map to draw");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_folder_without_maps_is_an_error() {
        let dir = std::env::temp_dir().join(format!("pbs-peers-empty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let s = PeersSettings { maps: Maps::Dir(dir.clone()), ..small() };
        assert!(partitions(&s, |_| {}).unwrap_err().contains("no .csv"));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
