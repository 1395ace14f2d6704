//! The one error type of the crate: every bad input gets a variant that names the problem.

use thiserror::Error;

/// What went wrong. Messages name the offending value and where it is.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum Error {
    /// A grid with a zero dimension has no boxes to balance.
    #[error("empty grid: dimensions {nx}×{ny}×{nz} hold no box")]
    EmptyGrid {
        /// boxes along x
        nx: usize,
        /// boxes along y
        ny: usize,
        /// boxes along z
        nz: usize,
    },
    /// The load slice does not have one entry per box.
    #[error("wrong number of loads: the grid has {expected} boxes but {got} loads were given")]
    LoadCount {
        /// number of boxes in the grid
        expected: usize,
        /// number of loads given
        got: usize,
    },
    /// A load is NaN, infinite or negative.
    #[error("invalid load {value} at box {index} (x={x}, y={y}, z={z}): loads must be finite and ≥ 0")]
    InvalidLoad {
        /// linear box index
        index: usize,
        /// box column
        x: usize,
        /// box row
        y: usize,
        /// box layer
        z: usize,
        /// the offending value
        value: f64,
    },
    /// Zero vCores cannot own anything.
    #[error("zero vCores: at least one vCore is needed")]
    NoVCores,
    /// More vCores than boxes: some vCore would necessarily own nothing.
    #[error("{vcores} vCores for {boxes} boxes: there must be at most one vCore per box")]
    TooManyVCores {
        /// requested vCores
        vcores: usize,
        /// boxes in the grid
        boxes: usize,
    },
    /// A vCore position or weight is not a finite number.
    #[error("vCore {index} has a non-finite {what}: {value}")]
    InvalidVCore {
        /// vCore index
        index: usize,
        /// "position" or "weight"
        what: &'static str,
        /// the offending value
        value: f64,
    },
    /// The positions and weights of the vCores disagree in number.
    #[error("{positions} vCore positions but {weights} weights")]
    VCoreCount {
        /// number of positions
        positions: usize,
        /// number of weights
        weights: usize,
    },
    /// A load-map CSV could not be parsed.
    #[error("load map CSV, line {line}, column {column}: {reason}")]
    Csv {
        /// 1-based line number
        line: usize,
        /// 1-based column (field) number
        column: usize,
        /// what is wrong there
        reason: String,
    },
    /// A load-map file could not be read (missing, unreadable, too large, not text) or parsed
    /// (the reason is then the parser's [`Error::Csv`] message).
    #[error("cannot read load map {path}: {reason}")]
    LoadMapFile {
        /// the file
        path: String,
        /// what the system said, or why it was refused
        reason: String,
    },
    /// An unknown balancing method name.
    #[error("unknown method {name:?}; known methods: {known}")]
    UnknownMethod {
        /// the name asked for
        name: String,
        /// comma-separated list of known names
        known: String,
    },
    /// The system refused the memory for per-box arrays of a grid this large.
    #[error("out of memory: {what} for {count} boxes needs {bytes} bytes, which the system refused")]
    OutOfMemory {
        /// what was being allocated
        what: &'static str,
        /// its number of entries
        count: usize,
        /// bytes asked for
        bytes: usize,
    },
    /// A configuration value is out of range.
    #[error("invalid parameter {name} = {value}: {reason}")]
    Parameter {
        /// parameter name
        name: &'static str,
        /// its value, printed
        value: String,
        /// why it is rejected
        reason: &'static str,
    },
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Bytes per box the balancer's state takes at most (cells, assignments and their trial copies,
/// the loads): what [`check_memory`] is asked for before a balancer is built for a grid.
pub const BALANCER_BYTES_PER_BOX: usize = 128;

/// Whether the system would give `count × bytes_each` bytes now: reserved and released at
/// once (never touched, so it costs no memory), or [`Error::OutOfMemory`] naming `what`.
/// Builders of per-box state call it first, so that a grid too large for the machine is an
/// error rather than an abort at whichever allocation comes first. (Under Linux's overcommit,
/// memory granted here can still run out when touched; that the system decides.)
pub fn check_memory(what: &'static str, count: usize, bytes_each: usize) -> Result<()> {
    let bytes = count.checked_mul(bytes_each).ok_or(Error::OutOfMemory { what, count, bytes: usize::MAX })?;
    Vec::<u8>::new().try_reserve_exact(bytes).map_err(|_| Error::OutOfMemory { what, count, bytes })
}
