//! Per-box costs recorded from a real run of a grid app: the input of the replay model.
//!
//! The app runs on one thread, each box timed on its own (two clock reads, ~20 ns, around
//! every task), so a cost is the box's own work without contention from other threads. It
//! runs twice from the same seed (the apps are deterministic) and each box keeps the smaller
//! of its two times: noise (a preempted thread, a page fault) only ever adds time. A
//! trace file is one line of JSON (what was recorded) followed by the costs: for every phase
//! of every iteration, one little-endian `u32` per box, in nanoseconds.

use std::io::{BufRead, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use pbs_scheduler::executors::StaticBlocks;
use pbs_scheduler::report::Recorder;
use pbs_scheduler::{clock, Executor, IterationEnd, PhaseStats};

/// What a trace file says about itself.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Header {
    /// `pbs-trace 1`.
    pub format: String,
    /// `md` or `stencil`.
    pub app: String,
    /// The app's scenario.
    pub scenario: String,
    /// Boxes along x.
    pub nx: usize,
    /// Boxes along y.
    pub ny: usize,
    /// Layers of boxes along z (1 in traces written before 3D grids, which lack the field).
    #[serde(default = "one_layer")]
    pub nz: usize,
    /// Seed of the app.
    pub seed: u64,
    /// Phases of each iteration.
    pub phases: Vec<usize>,
}

/// Costs of every box in every phase of every iteration of a run, in seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// What was recorded.
    pub header: Header,
    /// `costs[iteration][phase][box]`.
    pub costs: Vec<Vec<Vec<f64>>>,
}

/// The first field of every trace file.
pub(crate) const FORMAT: &str = "pbs-trace 1";

fn one_layer() -> usize {
    1
}

/// An executor on one thread that times every box on its own.
struct Recording {
    inner: StaticBlocks,
    ticks: Vec<AtomicU64>,
    phases: Vec<Vec<f64>>,
    iterations: Vec<Vec<Vec<f64>>>,
}

// SAFETY: forwards `run_phase` to a `StaticBlocks` over the same `n` boxes it reports from
// `boxes()` (one tick slot per box, fixed for its life), which keeps the contract; the
// wrapper only times each call of the task. `run_phase_ranges` is the trait's default, one
// box per range through `run_phase`.
unsafe impl Executor for Recording {
    fn name(&self) -> &'static str {
        "recording"
    }
    fn threads(&self) -> usize {
        1
    }
    fn boxes(&self) -> usize {
        self.ticks.len()
    }
    fn run_phase(&mut self, task: &(dyn Fn(usize) + Sync)) -> PhaseStats {
        let ticks = &self.ticks;
        let stats = self.inner.run_phase(&|k| {
            let t0 = clock::ticks();
            task(k);
            ticks[k].store(clock::ticks().wrapping_sub(t0), Ordering::Relaxed);
        });
        let s = clock::ticks_to_seconds();
        self.phases.push(self.ticks.iter().map(|t| t.load(Ordering::Relaxed) as f64 * s).collect());
        stats
    }
    fn end_iteration(&mut self) -> IterationEnd {
        self.iterations.push(std::mem::take(&mut self.phases));
        IterationEnd::default()
    }
    fn on_each_thread(&self, f: &(dyn Fn(usize) + Sync)) {
        self.inner.on_each_thread(f)
    }
}

impl Trace {
    /// Runs `app` in `scenario` on `nx × ny` boxes for `iterations` iterations on one thread
    /// and records every box's cost.
    pub fn record(
        app: &str,
        scenario: &str,
        nx: usize,
        ny: usize,
        iterations: usize,
        seed: u64,
    ) -> Result<Trace, String> {
        Trace::record_3d(app, scenario, [nx, ny, 1], iterations, seed)
    }

    /// An error where a trace of `iterations` iterations of `dims` boxes would not fit in the
    /// memory: two passes' costs, 8 bytes a box and phase (md-split has two phases). 10⁸
    /// iterations of 256 × 256 boxes grew by 2 MB a second until the memory would run out
    /// (hours later, on the 24 GiB VM); now they are refused first.
    pub fn check_recordable(dims: [usize; 3], iterations: usize) -> Result<(), String> {
        let boxes = pbs::Grid::new_3d(dims[0], dims[1], dims[2]).map_err(|e| e.to_string())?.len();
        pbs_apps::fits_in_memory(
            "a trace's costs (32 bytes a box and iteration)",
            (boxes, "boxes"),
            iterations.saturating_mul(32),
        )
        .map_err(|e| format!("{e}; use a smaller grid or fewer iterations"))
    }

    /// [`Trace::record`] on `dims[0] × dims[1] × dims[2]` boxes (the stencil in 3D with more
    /// than one layer, see `pbs_apps::build_3d`).
    pub fn record_3d(
        app: &str,
        scenario: &str,
        dims: [usize; 3],
        iterations: usize,
        seed: u64,
    ) -> Result<Trace, String> {
        let [nx, ny, nz] = dims;
        if iterations == 0 {
            return Err("a trace needs at least one iteration".into());
        }
        Trace::check_recordable(dims, iterations)?;
        let pass = || -> Result<Vec<Vec<Vec<f64>>>, String> {
            let mut grid_app = pbs_apps::build_3d(app, scenario, nx, ny, nz, seed)?;
            let n = grid_app.grid().len();
            let inner = StaticBlocks::new(n, 1).map_err(|e| e.to_string())?;
            let mut exec = Recording {
                inner,
                ticks: (0..n).map(|_| AtomicU64::new(0)).collect(),
                phases: Vec::new(),
                iterations: Vec::new(),
            };
            let mut rec = Recorder::new("recording", 1);
            for _ in 0..iterations {
                grid_app.iterate(&mut exec, &mut rec, None);
            }
            Ok(exec.iterations)
        };
        let mut costs = pass()?;
        for (a, b) in costs.iter_mut().flatten().flatten().zip(pass()?.iter().flatten().flatten()) {
            *a = a.min(*b);
        }
        let header = Header {
            format: FORMAT.into(),
            app: app.into(),
            scenario: scenario.into(),
            nx,
            ny,
            nz,
            seed,
            phases: costs.iter().map(Vec::len).collect(),
        };
        Ok(Trace { header, costs })
    }

    /// A trace kept in the repository's `bench/traces/` (the ones the calibration uses).
    pub fn kept(name: &str) -> Result<Trace, String> {
        Trace::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("traces").join(name))
    }

    /// Boxes of the grid.
    pub fn boxes(&self) -> usize {
        self.header.nx * self.header.ny * self.header.nz
    }

    /// The grid of boxes the trace was recorded on.
    pub fn grid(&self) -> Result<pbs::Grid, String> {
        pbs::Grid::new_3d(self.header.nx, self.header.ny, self.header.nz).map_err(|e| e.to_string())
    }

    /// Writes the trace to `path`.
    pub fn write(&self, path: &Path) -> Result<(), String> {
        let err = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
        let mut out = std::io::BufWriter::new(std::fs::File::create(path).map_err(err)?);
        let header = serde_json::to_string(&self.header).map_err(|e| e.to_string())?;
        writeln!(out, "{header}").map_err(err)?;
        for phase in self.costs.iter().flatten() {
            for &c in phase {
                let ns = (c * 1e9).round().clamp(0.0, f64::from(u32::MAX)) as u32;
                out.write_all(&ns.to_le_bytes()).map_err(err)?;
            }
        }
        out.flush().map_err(err)
    }

    /// The longest header line read: a header counts each iteration's phases, a few bytes
    /// each, so this allows hundreds of thousands of iterations.
    const MAX_HEADER_BYTES: u64 = 1 << 20;

    /// Reads a trace written by [`Trace::write`]; an error says what is wrong with the file.
    pub fn read(path: &Path) -> Result<Trace, String> {
        let what = path.display();
        let file = std::fs::File::open(path).map_err(|e| format!("cannot read trace {what}: {e}"))?;
        let mut input = std::io::BufReader::new(file);
        let mut line = String::new();
        // Bounded, so that a file with no newline (`/dev/zero` given by mistake) is an error,
        // not a line that grows until memory runs out.
        (&mut input)
            .take(Self::MAX_HEADER_BYTES)
            .read_line(&mut line)
            .map_err(|e| format!("cannot read trace {what}: {e}"))?;
        if !line.ends_with('\n') {
            return Err(format!(
                "{what} is not a pbs trace (no JSON header line within {} bytes)",
                Self::MAX_HEADER_BYTES
            ));
        }
        let header: Header = serde_json::from_str(line.trim_end())
            .map_err(|e| format!("{what} is not a pbs trace (its first line is not the JSON header: {e})"))?;
        if header.format != FORMAT {
            return Err(format!("{what}: trace format {:?}, expected {FORMAT:?}", header.format));
        }
        // The app picks the machine's fitted speeds; an unknown one would take the stencil's.
        if !pbs_apps::APPS.contains(&header.app.as_str()) {
            return Err(format!("{what}: app {:?}, expected one of {}", header.app, pbs_apps::APPS.join(", ")));
        }
        let (nx, ny, nz) = (header.nx, header.ny, header.nz);
        let n = match nx.checked_mul(ny).and_then(|n| n.checked_mul(nz)) {
            Some(0) => return Err(format!("{what}: empty grid ({nx}×{ny}×{nz} boxes)")),
            Some(n) => n,
            None => return Err(format!("{what}: {nx}×{ny}×{nz} boxes is more than this machine can count")),
        };
        // Checked, so that a header naming more costs than memory holds is an error, not a
        // product that wraps round to the file's length.
        let phases = header.phases.iter().try_fold(0usize, |sum, &p| sum.checked_add(p));
        let expected = phases.and_then(|p| p.checked_mul(n)).and_then(|c| c.checked_mul(4));
        let (Some(phases), Some(expected)) = (phases, expected) else {
            return Err(format!("{what}: its header counts more phases × boxes than this machine can hold"));
        };
        let mut bytes = Vec::new();
        // One byte more than the header asks for is enough to tell a file too long.
        input
            .take(u64::try_from(expected).unwrap_or(u64::MAX).saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read trace {what}: {e}"))?;
        if phases == 0 {
            return Err(format!("{what}: its header counts no phase of any iteration"));
        }
        if let Some(i) = header.phases.iter().position(|&p| p == 0) {
            // A recording times every iteration; one without a phase would replay as no work.
            return Err(format!("{what}: its header counts no phase in iteration {i}"));
        }
        if bytes.len() != expected {
            // Read one byte past `expected` at most: a longer file is "more than", not its length.
            let found = if bytes.len() > expected { format!("more than {expected}") } else { bytes.len().to_string() };
            return Err(format!(
                "{what}: {found} bytes of costs, expected {expected} ({phases} phases of {n} boxes, 4 bytes each)"
            ));
        }
        let mut values = bytes.chunks_exact(4).map(|b| f64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])) * 1e-9);
        let costs =
            header.phases.iter().map(|&p| (0..p).map(|_| values.by_ref().take(n).collect()).collect()).collect();
        Ok(Trace { header, costs })
    }

    /// The recorded iteration a replay's iteration `i` uses: the recording played forwards,
    /// then backwards, and so on, so that a replay longer than the recording sees loads that
    /// drift on smoothly instead of jumping back to the start.
    pub fn recorded(&self, i: usize) -> usize {
        let len = self.costs.len();
        if len < 2 {
            return 0;
        }
        let r = i % (2 * len - 2);
        if r < len {
            r
        } else {
            2 * len - 2 - r
        }
    }

    /// Box loads of the replay's iteration `i` (the sum over its phases), as the executor
    /// measures them.
    pub fn loads(&self, i: usize) -> Vec<f64> {
        let mut loads = vec![0.0; self.boxes()];
        for phase in &self.costs[self.recorded(i)] {
            for (l, c) in loads.iter_mut().zip(phase) {
                *l += c;
            }
        }
        loads
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trace that would not fit in memory, or on no grid, is refused before anything is
    /// recorded, with the way out; a small one is recorded.
    #[test]
    fn traces_past_the_memory_or_on_no_grid_are_refused_first() {
        let err = Trace::check_recordable([256, 256, 1], 100_000_000).unwrap_err();
        assert!(err.contains("a trace's costs") && err.ends_with("; use a smaller grid or fewer iterations"), "{err}");
        assert_eq!(Trace::record("md", "gravity", 256, 256, 100_000_000, 1), Err(err));
        assert!(Trace::check_recordable([0, 4, 1], 1).is_err());
        assert_eq!(Trace::check_recordable([8, 8, 1], 4), Ok(()));
        assert!(Trace::record("md", "gravity", 4, 4, 0, 1).unwrap_err().contains("at least one iteration"));
    }

    /// A replay plays the recording forwards, then backwards without repeating either end; a
    /// recording of one iteration is that iteration throughout. A box's load sums its phases.
    #[test]
    fn a_replay_plays_the_recording_back_and_forth() {
        let of_len = |len: usize| {
            let header = Header {
                format: FORMAT.into(),
                app: "stencil".into(),
                scenario: "drift".into(),
                nx: 2,
                ny: 1,
                nz: 1,
                seed: 1,
                phases: vec![2; len],
            };
            let costs = (0..len).map(|i| vec![vec![i as f64, 1.0], vec![0.5, 2.0]]).collect();
            Trace { header, costs }
        };
        let played = |len: usize| (0..8).map(|i| of_len(len).recorded(i)).collect::<Vec<_>>();
        assert_eq!(played(1), [0; 8]);
        assert_eq!(played(2), [0, 1, 0, 1, 0, 1, 0, 1]);
        assert_eq!(played(3), [0, 1, 2, 1, 0, 1, 2, 1]);
        assert_eq!(of_len(3).loads(3), [1.5, 3.0], "iteration 1's phases summed");
    }

    /// The recording executor runs per-thread work once, on its one worker.
    #[test]
    fn the_recording_executor_runs_per_thread_work_on_its_one_worker() {
        let exec = Recording {
            inner: StaticBlocks::new(3, 1).unwrap(),
            ticks: (0..3).map(|_| AtomicU64::new(0)).collect(),
            phases: Vec::new(),
            iterations: Vec::new(),
        };
        let seen = std::sync::Mutex::new(Vec::new());
        exec.on_each_thread(&|w| seen.lock().unwrap().push(w));
        assert_eq!((seen.into_inner().unwrap(), exec.threads(), exec.boxes()), (vec![0], 1, 3));
    }

    #[test]
    fn a_recorded_trace_survives_the_file_and_bad_files_are_named() {
        let trace = Trace::record("md", "gravity", 6, 5, 3, 1).unwrap();
        assert_eq!(trace.costs.len(), 3);
        assert!(trace.costs.iter().flatten().all(|p| p.len() == 30));
        assert!(trace.loads(0).iter().sum::<f64>() > 0.0, "md does work");
        let dir = std::env::temp_dir().join(format!("pbs-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.trace");
        trace.write(&path).unwrap();
        let back = Trace::read(&path).unwrap();
        assert_eq!(back.header, trace.header);
        for (a, b) in back.costs.iter().flatten().flatten().zip(trace.costs.iter().flatten().flatten()) {
            assert!((a - b).abs() <= 0.6e-9, "{a} {b}");
        }
        // A 3D trace keeps its layers; the kept traces, written before the field, read as one.
        let deep = Trace::record_3d("stencil", "drift", [3, 2, 2], 2, 1).unwrap();
        deep.write(&path).unwrap();
        let back = Trace::read(&path).unwrap();
        assert_eq!((back.header.nz, back.boxes(), back.grid().unwrap().nz()), (2, 12, 2));
        assert_eq!(Trace::kept("md-gravity-32x32.trace").map(|t| t.header.nz), Ok(1));
        trace.write(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        assert!(Trace::read(&path).unwrap_err().contains("bytes of costs"));
        std::fs::write(&path, b"hello\n").unwrap();
        assert!(Trace::read(&path).unwrap_err().contains("not a pbs trace"));
        // Headers whose counts wrap round: 2^62 phases × (2^32 − 1) boxes × 4 bytes is 0 modulo
        // 2^64, the length of an empty body; the sum of the phases overflows too.
        let header = |nx: usize, ny: usize, phases: &str| {
            format!("{{\"format\":\"{FORMAT}\",\"app\":\"md\",\"scenario\":\"gravity\",\"nx\":{nx},\"ny\":{ny},\"seed\":1,\"phases\":[{phases}]}}\n")
        };
        for (nx, ny, phases, expected) in [
            (65_535, 65_537, "4611686018427387904", "more phases × boxes"),
            (64, 64, "18446744073709551615,1", "more phases × boxes"),
            (0, 64, "1", "empty grid"),
            (2, 2, "", "no phase"),
            (2, 2, "0,0", "no phase"),
            (2, 2, "1,0,1", "no phase in iteration 1"),
        ] {
            std::fs::write(&path, header(nx, ny, phases)).unwrap();
            let err = Trace::read(&path).unwrap_err();
            assert!(err.contains(expected), "{nx}×{ny}, phases {phases}: {err}");
        }
        // A body longer than its header says, and a header naming an app no one records.
        std::fs::write(&path, header(1, 1, "1") + "12345").unwrap();
        assert_eq!(
            Trace::read(&path).unwrap_err(),
            format!("{}: more than 4 bytes of costs, expected 4 (1 phases of 1 boxes, 4 bytes each)", path.display())
        );
        std::fs::write(&path, header(1, 1, "1") + "1234").unwrap();
        assert_eq!(Trace::read(&path).map(|t| t.costs.len()), Ok(1));
        std::fs::write(&path, header(1, 1, "1").replace("\"md\"", "\"lbm\"") + "1234").unwrap();
        assert!(Trace::read(&path).unwrap_err().ends_with("app \"lbm\", expected one of md, md-split, stencil"));
        // A file with no newline, as /dev/zero is, is read no further than a header may be long.
        std::fs::write(&path, vec![b'{'; Trace::MAX_HEADER_BYTES as usize + 10]).unwrap();
        assert!(Trace::read(&path).unwrap_err().contains("no JSON header line"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
