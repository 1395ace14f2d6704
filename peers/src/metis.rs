//! `metis-kway` and `metis-recursive`: METIS 5 (Karypis & Kumar, SIAM J. Sci. Comput. 1998)
//! on the grid's face-neighbour graph (4 neighbours in 2D, 6 in 3D), loads as vertex weights. Linked against the system
//! library (Debian's `libmetis-dev`) through the two entry points used here; the build script
//! reads the widths of `idx_t` and `real_t` from the installed `metis.h`.
//!
//! METIS's error handling (GKlib) traps SIGTERM and SIGABRT for the length of each call, to
//! unwind from its own errors. `src/metis_signals.c` does that trapping in its place, so that
//! only METIS's own errors unwind the call (they come back as an error status, on a thread that
//! blocks those signals too), a signal from outside goes where the program's action says (its
//! handler, nothing if ignored, else the default action: SIGTERM ends the process, from
//! whichever thread it reaches), and each call leaves the program's signal actions exactly as it
//! found them (tests/metis_signals.rs).

use pbs::Grid;

use crate::{Error, Partitioner, Result};

/// Which METIS driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetisScheme {
    /// `METIS_PartGraphKway` with contiguous parts (`METIS_OPTION_CONTIG`) and METIS's default
    /// imbalance tolerance (1.03).
    Kway,
    /// `METIS_PartGraphRecursive`, METIS's default tolerance (1.001 per bisection).
    Recursive,
}

/// A METIS partitioner with a fixed seed, so that runs repeat.
#[derive(Debug, Clone)]
pub struct Metis {
    /// Which driver.
    pub scheme: MetisScheme,
    /// METIS's random seed.
    pub seed: i32,
    /// The calls made, and for each diagnostic METIS printed ("Cannot bisect a graph with 0
    /// vertices!"), the calls that printed it: see [`Partitioner::note`].
    said: Said,
}

/// METIS's printed diagnostics over a partitioner's calls.
#[derive(Debug, Clone, Default)]
struct Said {
    calls: usize,
    lines: std::collections::BTreeMap<String, usize>,
}

impl Metis {
    /// The given driver with seed 1.
    pub fn new(scheme: MetisScheme) -> Metis {
        Metis { scheme, seed: 1, said: Said::default() }
    }
}

/// Vertex weights are integers to METIS: loads are scaled so that they sum to this, which
/// keeps every sum METIS forms well inside a 32-bit `idx_t`.
const WEIGHT_TOTAL: f64 = 1e8;

impl Partitioner for Metis {
    fn name(&self) -> &str {
        match self.scheme {
            MetisScheme::Kway => "metis-kway",
            MetisScheme::Recursive => "metis-recursive",
        }
    }

    fn partition(&mut self, grid: &Grid, loads: &[f64], parts: usize) -> Result<Vec<u32>> {
        let problem = pbs::Problem::new(*grid, loads, parts)?;
        // Rescaled at extreme scales (see `pbs::Problem`), so that their total is finite.
        let loads = problem.loads();
        if !ffi::AVAILABLE {
            return Err(Error::MetisUnavailable { method: self.name().to_string() });
        }
        if parts == 1 {
            return Ok(vec![0; grid.len()]);
        }
        check_graph_size(self.name(), grid)?;
        // The face-neighbour graph in compressed rows.
        let mut xadj = Vec::with_capacity(grid.len() + 1);
        let mut adjncy = Vec::with_capacity(if grid.nz() == 1 { 4 } else { 6 } * grid.len());
        xadj.push(0);
        for k in 0..grid.len() {
            grid.for_each_neighbour(k, |n| adjncy.push(n as ffi::Idx));
            xadj.push(adjncy.len() as ffi::Idx);
        }
        let total: f64 = loads.iter().sum();
        let weights: Vec<ffi::Idx> = if total > 0.0 {
            loads.iter().map(|q| (q * (WEIGHT_TOTAL / total)).round() as ffi::Idx).collect()
        } else {
            vec![1; loads.len()]
        };
        let (part, said) = ffi::partition(self.scheme, xadj, adjncy, weights, parts, self.seed)
            .map_err(|(status, meaning)| Error::Metis { method: self.name().to_string(), status, meaning })?;
        self.said.calls += 1;
        for line in said.into_iter().collect::<std::collections::BTreeSet<_>>() {
            *self.said.lines.entry(line).or_default() += 1;
        }
        Ok(part.into_iter().map(|p| p as u32).collect())
    }

    fn note(&self) -> Option<String> {
        let Said { calls, lines } = &self.said;
        let each = lines.iter().map(|(line, n)| format!("\"{line}\" ({n} of {calls} calls)"));
        (!lines.is_empty()).then(|| format!("METIS printed {}", each.collect::<Vec<_>>().join(", ")))
    }
}

/// METIS's diagnostics among what was printed to standard output during a call: its lines that
/// start with `***` (after blanks), without those stars; the other lines, anyone else's, are
/// returned apart so that they can go where they were written.
#[cfg_attr(not(pbs_metis), allow(dead_code))]
fn diagnostics(printed: &str) -> (Vec<String>, String) {
    let (mut said, mut others) = (Vec::new(), String::new());
    for line in printed.split_inclusive('\n') {
        match line.trim_start().strip_prefix("***") {
            Some(diagnostic) => said.push(diagnostic.trim().to_string()),
            None => others.push_str(line),
        }
    }
    (said, others)
}

/// An error where the face-neighbour graph of `grid` has more adjacency entries (twice its
/// edges) than `idx_t` holds. The offsets would wrap; `partition`'s own check of the graph
/// then panics ("malformed graph") before METIS sees it, but only after gigabytes of arrays.
fn check_graph_size(method: &str, grid: &Grid) -> Result<()> {
    let dims = grid.dims().map(|d| d as u128);
    // Along each axis, one edge per box but those of the last layer across it.
    let edges: u128 = (0..3).map(|a| dims.iter().product::<u128>() / dims[a] * (dims[a] - 1)).sum();
    if 2 * edges > ffi::Idx::MAX as u128 {
        return Err(Error::TooLarge {
            method: method.to_string(),
            boxes: grid.len(),
            reason: "its neighbour lists would overflow METIS's idx_t (a METIS built with 64-bit indices takes it)",
        });
    }
    Ok(())
}

#[cfg(pbs_metis)]
mod ffi {
    use super::MetisScheme;
    use std::os::raw::c_int;

    pub const AVAILABLE: bool = true;

    #[cfg(pbs_metis_idx64)]
    pub type Idx = i64;
    #[cfg(not(pbs_metis_idx64))]
    pub type Idx = i32;
    /// A part id per vertex and the diagnostics METIS printed, or its status and meaning.
    pub type Parted = Result<(Vec<Idx>, Vec<String>), (i32, &'static str)>;
    #[cfg(pbs_metis_real64)]
    type Real = f64;
    #[cfg(not(pbs_metis_real64))]
    type Real = f32;

    const NOPTIONS: usize = 40;
    const OPTION_SEED: usize = 8;
    const OPTION_CONTIG: usize = 11;
    const OPTION_NUMBERING: usize = 17;
    const OK: c_int = 1;
    /// One METIS call at a time (below), and the file that takes its printed output, made at
    /// the first call and emptied at each.
    pub(super) static LOCK: std::sync::Mutex<Option<std::fs::File>> = std::sync::Mutex::new(None);

    extern "C" {
        fn METIS_SetDefaultOptions(options: *mut Idx) -> c_int;
        /// In `src/metis_signals.c`, whose definitions of `gk_errexit`, `gk_sigtrap` and
        /// `gk_siguntrap` take the place of GKlib's, so that a signal during a METIS call does
        /// what the program's action for it says, and the call leaves those actions as they were.
        fn pbs_metis_signals_linked() -> c_int;
    }

    /// Declares METIS's graph partitioning drivers and `PartGraph`, the type of a pointer to
    /// either: they share one signature, written once.
    macro_rules! part_graph_drivers {
        ($params:tt; $($name:ident),*) => {
            type PartGraph = unsafe extern "C" fn $params -> c_int;
            extern "C" {
                $(fn $name $params -> c_int;)*
            }
        };
    }
    part_graph_drivers!(
        (
            nvtxs: *mut Idx,
            ncon: *mut Idx,
            xadj: *mut Idx,
            adjncy: *mut Idx,
            vwgt: *mut Idx,
            vsize: *mut Idx,
            adjwgt: *mut Idx,
            nparts: *mut Idx,
            tpwgts: *mut Real,
            ubvec: *mut Real,
            options: *mut Idx,
            edgecut: *mut Idx,
            part: *mut Idx
        );
        METIS_PartGraphKway,
        METIS_PartGraphRecursive
    );

    /// While alive, file descriptor 1 writes to the end of `file` (or, where there is none or
    /// its end cannot be found, to standard error); [`Capture::finish`] puts it back and returns
    /// what was written meanwhile.
    pub(super) struct Capture<'a> {
        saved: c_int,
        /// The file, and where its end was when the capture began.
        file: Option<(&'a mut std::fs::File, u64)>,
    }

    /// What descriptor 1 took during a capture. `direct` was written before the C library's
    /// buffered output was flushed at the capture's end: other threads' writes (Rust's
    /// `print!` writes straight to the descriptor, and libtest prints its progress so). `flushed`
    /// is that flush on: METIS's `printf` output, which, fully buffered while descriptor 1 is
    /// a file, arrives in one write and so starts a line even where another thread's write
    /// left one unfinished (read as one text, such a line would not be taken for METIS's).
    #[derive(Debug, Default, PartialEq)]
    pub(super) struct Printed {
        pub(super) direct: String,
        pub(super) flushed: String,
    }

    /// Past this size the capture file is emptied before the next call (METIS prints a line or
    /// two on a call that leaves parts empty; the file is read back only from where a call began).
    pub(super) const CAPTURE_KEPT_BYTES: u64 = 1 << 20;

    impl<'a> Capture<'a> {
        pub(super) fn new(file: Option<&'a mut std::fs::File>) -> Capture<'a> {
            use std::io::{Seek as _, SeekFrom, Write as _};
            use std::os::fd::AsRawFd as _;
            let _ = std::io::stdout().flush();
            let file = file.and_then(|f| {
                if f.stream_position().is_ok_and(|end| end > CAPTURE_KEPT_BYTES) {
                    let _ = f.set_len(0);
                }
                let end = f.seek(SeekFrom::End(0)).ok()?;
                Some((f, end))
            });
            let target = file.as_ref().map_or(2, |(f, _)| f.as_raw_fd());
            // SAFETY: dup and dup2 only create and replace descriptors of this process; a
            // failed dup (-1) is remembered and leaves descriptor 1 untouched.
            let saved = unsafe { libc::dup(1) };
            if saved >= 0 {
                // SAFETY: as above; `target` is 2 or the open descriptor of `file`, which
                // this value borrows for as long as it holds descriptor 1.
                unsafe { libc::dup2(target, 1) };
            }
            Capture { saved, file }
        }

        /// Descriptor 1 back, and what was written to it meanwhile (nothing where it went to
        /// standard error, or where the file cannot be read back), split where the C library's
        /// buffered output was flushed. Descriptor 1 shared the file's offset, so that offset
        /// is where each part ended.
        pub(super) fn finish(mut self) -> Printed {
            use std::io::{Read as _, Seek as _, SeekFrom};
            let flush_at = self.file.as_mut().and_then(|(f, _)| f.stream_position().ok());
            self.restore();
            let Some((file, start)) = self.file.take() else { return Printed::default() };
            let mut bytes = Vec::new();
            if file.seek(SeekFrom::Start(start)).is_ok() {
                let _ = file.read_to_end(&mut bytes);
            }
            let direct = flush_at.map_or(0, |at| at.saturating_sub(start) as usize).min(bytes.len());
            let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
            Printed { direct: text(&bytes[..direct]), flushed: text(&bytes[direct..]) }
        }

        fn restore(&mut self) {
            if self.saved >= 0 {
                // SAFETY: METIS's printf buffer goes out first; then `saved`, a descriptor
                // this value owns, is put back on 1 and closed.
                unsafe {
                    libc::fflush(std::ptr::null_mut());
                    libc::dup2(self.saved, 1);
                    libc::close(self.saved);
                }
                self.saved = -1;
            }
        }
    }

    impl Drop for Capture<'_> {
        fn drop(&mut self) {
            self.restore();
        }
    }

    /// A new file in the temporary folder, its name removed at once: gone with its last
    /// descriptor. An error where it cannot be made or its name cannot be removed.
    pub(super) fn unnamed_file() -> std::io::Result<std::fs::File> {
        let path = std::env::temp_dir().join(format!("pbs-metis-{}", std::process::id()));
        let file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path)?;
        std::fs::remove_file(&path)?;
        Ok(file)
    }

    /// Runs METIS on a graph in compressed rows (`xadj.len() == weights.len() + 1`, `adjncy`
    /// holding `xadj[n]` vertex ids below `n`, symmetric), returning a part id per vertex and
    /// the diagnostics METIS printed, or METIS's status and its meaning. The arrays are taken
    /// by value: METIS's prototypes ask for mutable pointers even to what it only reads.
    pub fn partition(
        scheme: MetisScheme,
        mut xadj: Vec<Idx>,
        mut adjncy: Vec<Idx>,
        mut weights: Vec<Idx>,
        parts: usize,
        seed: i32,
    ) -> Parted {
        let n = weights.len();
        assert!(xadj.len() == n + 1 && xadj[n] as usize == adjncy.len(), "malformed graph");
        // SAFETY: a function of no argument that returns 1; the call keeps its file, and the
        // signal handling defined there, in every program that gets here.
        let linked = unsafe { pbs_metis_signals_linked() };
        debug_assert_eq!(linked, 1);
        let mut options = [0 as Idx; NOPTIONS];
        // SAFETY: `options` holds the METIS_NOPTIONS entries METIS_SetDefaultOptions writes.
        unsafe { METIS_SetDefaultOptions(options.as_mut_ptr()) };
        options[OPTION_SEED] = seed as Idx;
        options[OPTION_NUMBERING] = 0;
        let driver: PartGraph = match scheme {
            MetisScheme::Kway => {
                options[OPTION_CONTIG] = 1;
                METIS_PartGraphKway
            }
            MetisScheme::Recursive => METIS_PartGraphRecursive,
        };
        let (mut nvtxs, mut ncon, mut nparts, mut edgecut) = (n as Idx, 1 as Idx, parts as Idx, 0 as Idx);
        let mut part = vec![0 as Idx; n];
        let null = std::ptr::null_mut();
        // METIS draws its random numbers from the C library's process-wide `rand()` state,
        // reseeded per call: two calls at once would interleave their draws and neither would
        // repeat. One call at a time keeps each seeded run repeatable.
        let mut one_at_a_time = LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if one_at_a_time.is_none() {
            *one_at_a_time = unnamed_file().ok();
        }
        // METIS prints some diagnostics ("***Cannot bisect a graph with 0 vertices!") with
        // printf; they would land in the middle of a caller's output (JSON included), one per
        // call: they come back with the result, and anything else printed meanwhile is
        // printed again once the call is over.
        let capture = Capture::new(one_at_a_time.as_mut());
        // SAFETY: every non-null pointer is to a live, exclusively borrowed buffer of the
        // length METIS reads or writes for these arguments: one value for nvtxs, ncon, nparts
        // and edgecut; n + 1 for xadj; xadj[n] for adjncy (checked above); n for vwgt and
        // part; METIS_NOPTIONS for options. The null ones (vsize, adjwgt, tpwgts, ubvec) are
        // documented by METIS as "use the default". METIS keeps no pointer after it returns.
        let status = unsafe {
            driver(
                &mut nvtxs,
                &mut ncon,
                xadj.as_mut_ptr(),
                adjncy.as_mut_ptr(),
                weights.as_mut_ptr(),
                null,
                null,
                &mut nparts,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                options.as_mut_ptr(),
                &mut edgecut,
                part.as_mut_ptr(),
            )
        };
        let said = super::keep_diagnostics(&capture.finish());
        match status {
            OK => Ok((part, said)),
            _ => {
                // The call failed: what METIS said goes where it went before, beside the error.
                for line in &said {
                    eprintln!("METIS: {line}");
                }
                Err((status, super::failure(status)))
            }
        }
    }
}

/// What METIS's status `status` (other than `METIS_OK`) means.
#[cfg_attr(not(pbs_metis), allow(dead_code))]
fn failure(status: i32) -> &'static str {
    match status {
        -2 => "erroneous inputs or options",
        -3 => "out of memory",
        _ => "an unspecified error",
    }
}

/// METIS's diagnostics in what was printed during a call ([`diagnostics`], each part of it
/// apart, so that METIS's lines are read from where its buffer came out); the rest, anyone
/// else's, written to standard output again.
#[cfg(pbs_metis)]
fn keep_diagnostics(printed: &ffi::Printed) -> Vec<String> {
    use std::io::Write as _;
    let (mut said, mut others) = diagnostics(&printed.direct);
    let (flushed, after) = diagnostics(&printed.flushed);
    said.extend(flushed);
    others.push_str(&after);
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(others.as_bytes()).and_then(|()| out.flush());
    said
}

#[cfg(all(test, pbs_metis))]
mod capture_tests {
    use super::ffi::{Capture, Printed, CAPTURE_KEPT_BYTES, LOCK};
    use std::io::{Seek as _, SeekFrom};

    fn print(text: &str) {
        // SAFETY: writes `text.len()` bytes of a live string to descriptor 1.
        unsafe { libc::write(1, text.as_ptr().cast(), text.len()) };
    }

    /// A capture returns what descriptor 1 took during it and nothing from before; past its
    /// limit the file is emptied first. Under METIS's lock, as every capture is. Descriptor 1
    /// is the process's: beside other tests, libtest's own lines for them landed in the
    /// captures now and then ("test metis::metis_s_failures_are_named ... ok"), so the checks
    /// run in a child of this test binary that runs this test alone.
    #[test]
    fn a_capture_returns_what_was_written_during_it() {
        const ALONE: &str = "PBS_METIS_CAPTURE_TEST_ALONE";
        if std::env::var_os(ALONE).is_none() {
            let name = "metis::capture_tests::a_capture_returns_what_was_written_during_it";
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", name, "--test-threads=1", "--quiet"])
                .env(ALONE, "1")
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success() && said.contains("1 passed"), "{said}");
            return;
        }
        let _one_at_a_time = LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut file = super::ffi::unnamed_file().unwrap();
        let direct = |text: &str| Printed { direct: text.to_string(), flushed: String::new() };
        let c = Capture::new(Some(&mut file));
        print("first\n");
        assert_eq!(c.finish(), direct("first\n"));
        assert_eq!(Capture::new(Some(&mut file)).finish(), Printed::default());
        let c = Capture::new(Some(&mut file));
        print("second\n");
        assert_eq!(c.finish(), direct("second\n"));
        assert_eq!(file.metadata().unwrap().len(), 13, "the file keeps what it took");
        file.set_len(CAPTURE_KEPT_BYTES + 1).unwrap();
        file.seek(SeekFrom::End(0)).unwrap();
        let c = Capture::new(Some(&mut file));
        print("third\n");
        assert_eq!(c.finish(), direct("third\n"));
        assert_eq!(file.metadata().unwrap().len(), 6, "emptied past its limit");
        // Without a file, descriptor 1 goes to standard error and nothing comes back.
        assert_eq!(Capture::new(None).finish(), Printed::default());
        // The C library's buffered output (METIS's printf) comes out at the end, apart from
        // an unfinished line another thread wrote meanwhile; its line is METIS's.
        let c = Capture::new(Some(&mut file));
        print("...");
        // SAFETY: a format with no conversion, a NUL-terminated literal.
        unsafe { libc::printf(c"\t***Cannot bisect!\n".as_ptr()) };
        print("..");
        let printed = c.finish();
        assert_eq!(printed, Printed { direct: ".....".into(), flushed: "\t***Cannot bisect!\n".into() });
        // What is not METIS's, printed during a call, is printed again after it.
        let c = Capture::new(Some(&mut file));
        assert_eq!(super::keep_diagnostics(&printed), ["Cannot bisect!"]);
        let row = Printed { direct: "another thread's row\n".into(), flushed: "***Too many parts!\n".into() };
        assert_eq!(super::keep_diagnostics(&row), ["Too many parts!"]);
        assert_eq!(c.finish(), direct(".....another thread's row\n"));
        // A capture dropped unfinished (a panic between its start and its finish) puts
        // descriptor 1 back: what is written after it goes to this process's standard output.
        let taken = file.metadata().unwrap().len();
        drop(Capture::new(Some(&mut file)));
        print("after the dropped capture\n");
        assert_eq!(file.metadata().unwrap().len(), taken, "written after the drop, yet in the file");
    }
}

/// METIS's failures by status, named.
#[cfg(test)]
#[test]
fn metis_s_failures_are_named() {
    assert_eq!(failure(-2), "erroneous inputs or options");
    assert_eq!(failure(-3), "out of memory");
    assert_eq!(failure(-4), "an unspecified error");
}

#[cfg(not(pbs_metis))]
mod ffi {
    use super::MetisScheme;

    pub const AVAILABLE: bool = false;
    pub type Idx = i32;
    pub type Parted = Result<(Vec<Idx>, Vec<String>), (i32, &'static str)>;

    pub fn partition(_: MetisScheme, _: Vec<Idx>, _: Vec<Idx>, _: Vec<Idx>, _: usize, _: i32) -> Parted {
        unreachable!("callers check AVAILABLE first")
    }
}

/// The graph's size is checked before any array is built: a grid's dimensions cost nothing.
#[cfg(test)]
#[test]
fn a_graph_too_large_for_idx_t_is_refused() {
    let fits = |nx, ny| check_graph_size("metis-kway", &Grid::new(nx, ny).unwrap());
    assert!(fits(2000, 2000).is_ok());
    if std::mem::size_of::<ffi::Idx>() == 4 {
        // 2 × (23,171 × 23,170 × 2) entries: just past 2³¹ − 1.
        let e = fits(23_171, 23_171).unwrap_err().to_string();
        assert!(e.contains("cannot index the graph of 536895241 boxes"), "{e}");
        assert!(fits(16_384, 16_384).is_ok());
        // In 3D, 2 × Σ_axis boxes × (side − 1) / side entries: 2,147,463,160 on 710 × 710 × 711
        // boxes, just under 2³¹ − 1; 711³ boxes are past it.
        let fits3 = |x, y, z| check_graph_size("metis-kway", &Grid::new_3d(x, y, z).unwrap());
        assert!(fits3(710, 710, 711).is_ok());
        let e = fits3(711, 711, 711).unwrap_err().to_string();
        assert!(e.contains("cannot index the graph of 359425431 boxes"), "{e}");
    }
}

/// METIS's lines (blanks, then `***`) are told from anyone else's, which keep their ends.
#[cfg(test)]
#[test]
fn metis_s_diagnostics_are_told_from_other_output() {
    let printed = "\t***Cannot bisect a graph with 0 vertices!\nrow 1\n***You are trying to partition a graph into too many parts!\n\t*** \nlast";
    let (said, others) = diagnostics(printed);
    assert_eq!(
        said,
        ["Cannot bisect a graph with 0 vertices!", "You are trying to partition a graph into too many parts!", ""]
    );
    assert_eq!(others, "row 1\nlast");
    assert_eq!(diagnostics(""), (vec![], String::new()));
}

#[cfg(all(test, pbs_metis))]
mod tests {
    use super::*;
    use crate::quality;

    #[test]
    fn kway_parts_are_contiguous_and_runs_repeat() {
        let grid = Grid::new(80, 40).unwrap();
        let loads = pbs::loadmap::PerlinMap::with_seed(2).loads(&grid);
        let mut m = Metis::new(MetisScheme::Kway);
        let a = m.partition(&grid, &loads, 72).unwrap();
        assert!(a == m.partition(&grid, &loads, 72).unwrap(), "a seeded METIS run repeats");
        let q = quality::measure(&grid, &loads, &a, 72);
        assert_eq!((q.disconnected_parts, q.empty_parts), (0, 0), "{q:?}");
        assert!(q.max_avg < 1.10, "{q:?}");
    }

    /// One part is every box in it, under both schemes (answered without a call into METIS).
    #[test]
    fn one_part_is_the_whole_grid() {
        let grid = Grid::new(7, 5).unwrap();
        for scheme in [MetisScheme::Kway, MetisScheme::Recursive] {
            assert_eq!(Metis::new(scheme).partition(&grid, &[1.0; 35], 1).unwrap(), vec![0; 35], "{scheme:?}");
        }
    }

    /// Where one box holds half the load, recursive bisection leaves parts empty and METIS
    /// prints why: counted per call in the partitioner's note (that the printing is taken off
    /// standard output is `capture_tests`' to check).
    #[test]
    fn what_metis_prints_comes_back_in_the_note() {
        let grid = Grid::new(20, 20).unwrap();
        let mut loads = vec![1.0; grid.len()];
        loads[210] = 400.0;
        let mut m = Metis::new(MetisScheme::Recursive);
        assert_eq!(m.note(), None);
        for _ in 0..2 {
            m.partition(&grid, &loads, 10).unwrap();
        }
        let note = m.note().expect("METIS printed nothing");
        assert!(note.starts_with("METIS printed \""), "{note}");
        assert!(note.contains("Cannot bisect a graph with 0 vertices!\" (2 of 2 calls)"), "{note}");
        // A map METIS splits without a word adds a call and nothing else.
        m.partition(&grid, &vec![1.0; grid.len()], 10).unwrap();
        assert!(m.note().unwrap().contains("(2 of 3 calls)"));
        let mut quiet = Metis::new(MetisScheme::Kway);
        quiet.partition(&grid, &vec![1.0; grid.len()], 10).unwrap();
        assert_eq!(quiet.note(), None);
    }

    #[test]
    fn kway_parts_of_a_3d_grid_are_contiguous() {
        let grid = Grid::new_3d(16, 12, 10).unwrap();
        let loads = pbs::loadmap::PerlinMap::with_seed(2).loads_3d(&grid);
        let owners = Metis::new(MetisScheme::Kway).partition(&grid, &loads, 24).unwrap();
        let q = quality::measure(&grid, &loads, &owners, 24);
        assert_eq!((q.disconnected_parts, q.empty_parts), (0, 0), "{q:?}");
        assert!(q.max_avg < 1.10, "{q:?}");
    }
}
