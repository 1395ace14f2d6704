//! The executor's settings: [`PbsOptions`], read from code or from the `PBS_*` environment
//! variables and checked before an executor or a mapper starts, and [`Overlap`], where a
//! rebalancing runs.

use pbs::{methods, Point};

use super::lending::Lending;
use super::stealing::Stealing;
use crate::box_timing::BoxTimer;
use crate::criteria::Criterion;
use crate::error::parameter;

/// Settings of the PBS executor.
pub struct PbsOptions {
    /// Balancing method (see `pbs::methods`).
    pub method: String,
    /// Balancer steps allowed per rebalancing (it starts warm, so a few suffice).
    pub steps_per_rebalance: usize,
    /// Tolerance the balancer aims for when it runs (`max_avg ≤ (1 + tol) × bound`).
    pub tol: f64,
    /// Imbalance of the measured loads under the current mapping above which a rebalancing
    /// the criterion asked for always runs. Below it (and above `tol`), it runs only if the
    /// time the imbalance wastes would pay for it within 100 iterations: timing noise on tiny
    /// tasks must not move boxes, but a few percent of a coarse task's time is worth fixing.
    pub trigger: f64,
    /// Whether a thread that has run its own boxes steals from the back of its neighbours'
    /// lists (see [`Stealing`]).
    pub steal: Stealing,
    /// Boxes an owner claims (and times) at a time: fewer atomic operations and clock reads
    /// than one by one, at the price of chunk-averaged box times.
    pub chunk: u32,
    /// Seed of the initial vCore positions (used when `positions` is `None`).
    pub seed: u64,
    /// Initial vCore positions (e.g. from the NUMA placement), one per thread, or an error.
    pub positions: Option<Vec<Point>>,
    /// The NUMA node of every thread, if known: idle threads then steal from their own node
    /// first, and a rebalancing that starts over from a bisection keeps each node's vCores on
    /// one region ([`pbs::VCores::with_groups`]). One entry per thread, or an error.
    pub numa: Option<Vec<usize>>,
    /// When to rebalance; `None` = the criterion `criterion_name` names.
    pub criterion: Option<Box<dyn Criterion>>,
    /// When to rebalance, by name (one of [`crate::criteria::NAMES`], as `PBS_CRITERION` gives
    /// it), its first rebalancing cost `C` the initial balancing's: used where `criterion` is
    /// `None`; `None` = `boulmier` (Boulmier's eq. 24).
    pub criterion_name: Option<String>,
    /// Where the balancer runs while the threads go on computing under the old mapping (its
    /// owners are taken on at an iteration boundary), or whether it stops the iteration: see
    /// [`Overlap`]. A pool of one thread always stops.
    pub overlap: Overlap,
    /// Whether a worker lends its core to the balancer thread while a rebalancing runs there
    /// (see [`Lending`]).
    pub lend: Lending,
    /// Iterations a rebalancing running in idle time may take before it is given up: the
    /// loads it balances are then that old.
    pub max_pending: usize,
    /// The same for a rebalancing on the balancer thread. It may take longer: it does not stop
    /// the workers (though where they hold every core, the one sharing its core is away for
    /// its time slices), and its owners are taken on only if they balance the freshest
    /// measured loads better than the owners in force.
    pub max_pending_on_thread: usize,
    /// Whether a rebalancing that runs while the threads compute (in idle time or on the
    /// balancer thread) and starts over from a bisection ([`pbs::rebalance`]) ends there: the
    /// bisection's cells are taken on at the next iteration boundary, and the check a few
    /// iterations later or the criterion calls the run that moves them on. Its steps would
    /// otherwise keep the threads on the far worse cells they replace for as long as the steps
    /// take, which with many threads is tens to hundreds of iterations (docs/design-notes.md,
    /// "Landing at once"). A rebalancing between iterations ([`Overlap::Stop`]) goes on.
    pub restart_lands_at_once: bool,
    /// Box timing: pbs times whole chunks (any non-zero stride turns it on). Box times, summed
    /// over an iteration's phases, are refreshed every `stride` iterations at most: once
    /// tasks are measured long enough that timing every iteration costs under
    /// 0.5 % of their time, the stride drops (to 1 for microsecond tasks), so the
    /// balancer follows a drifting load with fresh measurements. Affinity is derived from
    /// steals and migrations, so `timer.affinity` is ignored.
    pub timer: BoxTimer,
}

impl Default for PbsOptions {
    fn default() -> Self {
        PbsOptions {
            method: methods::DEFAULT.into(),
            steps_per_rebalance: 20,
            tol: 0.02,
            trigger: 0.05,
            steal: Stealing::Auto,
            chunk: 128,
            seed: 1,
            positions: None,
            numa: None,
            criterion: None,
            criterion_name: None,
            overlap: Overlap::default(),
            lend: Lending::default(),
            max_pending: 25,
            max_pending_on_thread: 1000,
            restart_lands_at_once: true,
            timer: BoxTimer::default(),
        }
    }
}

impl PbsOptions {
    /// The settings [`PbsOptions::with_settings`] reads, by the names of their environment
    /// variables.
    pub const SETTINGS: [&'static str; 8] =
        ["PBS_METHOD", "PBS_TOL", "PBS_TRIGGER", "PBS_STEPS", "PBS_STEAL", "PBS_OVERLAP", "PBS_LEND", "PBS_CRITERION"];

    /// These options with the settings of the environment applied, for codes nobody
    /// recompiles: `PBS_METHOD`, `PBS_TOL`, `PBS_TRIGGER`, `PBS_STEPS` (per rebalancing),
    /// `PBS_STEAL` (`never`, `always`, `auto`), `PBS_OVERLAP` (`on`, `idle`, `thread`,
    /// `off`: see [`Overlap`]), `PBS_LEND` (`never`, `auto`, `always`: see [`Lending`]) and
    /// `PBS_CRITERION` (a name of [`crate::criteria::NAMES`]: `menon`, `periodic:10`, …).
    /// An error names the variable and what it accepts.
    ///
    /// ```
    /// use pbs_scheduler::executors::{PbsOptions, Stealing};
    /// let env = |name: &str| (name == "PBS_STEAL").then(|| "never".to_string());
    /// let options = PbsOptions::default().with_settings(env).unwrap();
    /// assert_eq!(options.steal, Stealing::Never);
    /// let bad = |name: &str| (name == "PBS_TOL").then(|| "-1".to_string());
    /// let error = PbsOptions::default().with_settings(bad).err().unwrap();
    /// assert!(error.to_string().contains("PBS_TOL"));
    /// ```
    pub fn with_env(self) -> crate::Result<PbsOptions> {
        self.with_settings(|name| std::env::var(name).ok())
    }

    /// [`PbsOptions::with_env`] with the settings looked up by `get`.
    pub fn with_settings(mut self, get: impl Fn(&str) -> Option<String>) -> crate::Result<PbsOptions> {
        let bad = |name: &'static str, value: &str, reason: &'static str| parameter(name, value.to_string(), reason);
        let fraction = |name: &'static str| -> crate::Result<Option<f64>> {
            get(name)
                .map(|v| match v.trim().parse::<f64>() {
                    Ok(x) if x.is_finite() && x > 0.0 && x < 1.0 => Ok(x),
                    _ => Err(bad(name, &v, "expected a number between 0 and 1, exclusive (0.02 is 2 %)")),
                })
                .transpose()
        };
        if let Some(m) = get("PBS_METHOD") {
            methods::by_name(m.trim())?;
            self.method = m.trim().to_string();
        }
        if let Some(t) = fraction("PBS_TOL")? {
            self.tol = t;
        }
        if let Some(t) = fraction("PBS_TRIGGER")? {
            self.trigger = t;
        }
        if let Some(v) = get("PBS_STEPS") {
            self.steps_per_rebalance = match v.trim().parse::<usize>() {
                Ok(n) if n >= 1 => n,
                _ => return Err(bad("PBS_STEPS", &v, "expected a whole number of balancer steps, at least 1")),
            };
        }
        /// The choice `value` names, if any.
        fn one_of<T: Copy>(value: &str, choices: &[(&str, T)]) -> Option<T> {
            choices.iter().find(|c| c.0 == value.trim()).map(|c| c.1)
        }
        if let Some(v) = get("PBS_STEAL") {
            let choices = [("never", Stealing::Never), ("always", Stealing::Always), ("auto", Stealing::Auto)];
            self.steal = one_of(&v, &choices).ok_or_else(|| bad("PBS_STEAL", &v, "expected never, always or auto"))?;
        }
        if let Some(v) = get("PBS_OVERLAP") {
            let choices = [
                ("on", Overlap::IdleTimeOrThread),
                ("1", Overlap::IdleTimeOrThread),
                ("idle", Overlap::IdleTime),
                ("thread", Overlap::Thread),
                ("off", Overlap::Stop),
                ("0", Overlap::Stop),
            ];
            self.overlap =
                one_of(&v, &choices).ok_or_else(|| bad("PBS_OVERLAP", &v, "expected on, idle, thread or off"))?;
        }
        if let Some(v) = get("PBS_LEND") {
            let choices = [("never", Lending::Never), ("auto", Lending::Auto), ("always", Lending::Always)];
            self.lend = one_of(&v, &choices).ok_or_else(|| bad("PBS_LEND", &v, "expected never, auto or always"))?;
        }
        if let Some(v) = get("PBS_CRITERION") {
            crate::criteria::by_name(v.trim(), 0.0).map_err(|_| {
                bad(
                    "PBS_CRITERION",
                    &v,
                    "expected boulmier, boulmier-eq24, menon, procassini:RHO (0 < RHO <= 1), marquez:XI (XI > 0), periodic:T (T >= 1), always or never",
                )
            })?;
            self.criterion = None;
            self.criterion_name = Some(v.trim().to_string());
        }
        Ok(self)
    }

    /// The balancing settings' own error, if one is out of its range: a finite `tol` above
    /// 0, a finite `trigger` of 0 or more (as [`super::RemapOptions`]'s), at least one step
    /// per rebalancing. A NaN tolerance used to be taken, and balanced to whatever the
    /// comparisons with it happened to allow.
    pub(crate) fn check_balancing(&self) -> crate::Result<()> {
        let bad = |name, value, reason| Err(parameter(name, value, reason));
        if !(self.tol.is_finite() && self.tol > 0.0) {
            return bad("tol", self.tol.to_string(), "expected a finite fraction > 0 (0.02 is 2 %)");
        }
        if !(self.trigger.is_finite() && self.trigger >= 0.0) {
            return bad("trigger", self.trigger.to_string(), "expected a finite fraction ≥ 0 (0.05 is 5 %)");
        }
        if self.steps_per_rebalance == 0 {
            return bad("steps_per_rebalance", "0".into(), "a rebalancing needs at least one balancer step");
        }
        Ok(())
    }

    /// [`PbsOptions::check_balancing`], and the settings of an executor over `threads`
    /// threads: a chunk of at least one box, and one position and one NUMA node per thread
    /// where they are given (a NUMA list of another length used to be ignored in silence).
    /// The timing stride is the tracker's to check.
    pub(super) fn check(&self, threads: usize) -> crate::Result<()> {
        self.check_balancing()?;
        let bad = |name, value, reason| Err(parameter(name, value, reason));
        if self.chunk == 0 {
            return bad("chunk", "0".into(), "a chunk must hold at least one box");
        }
        let per_thread = |name: &'static str, len: Option<usize>| match len {
            Some(len) if len != threads => {
                bad(name, format!("{len} entries for {threads} threads"), "expected one entry per thread")
            }
            _ => Ok(()),
        };
        per_thread("positions", self.positions.as_ref().map(Vec::len))?;
        per_thread("numa", self.numa.as_ref().map(Vec::len))
    }

    /// The criterion these options ask for (`criterion`, else `criterion_name`, else
    /// Boulmier's eq. 24), taken out, with `initial_cost` seconds as its first rebalancing cost.
    pub(crate) fn take_criterion(&mut self, initial_cost: f64) -> crate::Result<Box<dyn Criterion>> {
        if let Some(c) = self.criterion.take() {
            return Ok(c);
        }
        let name = self.criterion_name.as_deref().unwrap_or("boulmier");
        crate::criteria::by_name(name, initial_cost).map_err(|reason| {
            parameter("criterion", format!("{name:?} ({reason})"), "expected a name of pbs_scheduler::criteria::NAMES")
        })
    }
}

/// Where a rebalancing runs (see `overlap.rs` and [`crate::background`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overlap {
    /// Between iterations, every thread waiting (the assignments of each step run on all of
    /// them).
    Stop,
    /// In the threads' idle time, a step at a time, while a step fits in a phase's idle time;
    /// otherwise as [`Overlap::Stop`].
    IdleTime,
    /// In the threads' idle time while a step fits there; otherwise on a balancer thread of
    /// its own while the workers go on (the default).
    #[default]
    IdleTimeOrThread,
    /// Always on the balancer thread.
    Thread,
}
