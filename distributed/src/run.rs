//! One run on every rank: the iteration loop across ranks.
//!
//! Rank 0 partitions the boxes on the app's estimate of their work; every rank builds the
//! boxes it computes or reads alone, from the seed, and gets from their owners the state of
//! those it only reads. Then, each iteration:
//! 1. computes the boxes it owns on its threads (the executor maps them, `pbs` by default);
//! 2. tells rank 0 its boxes' summed times on their cores (`MPI_Gather`, two numbers a rank);
//!    only when rank 0's criterion asks do the ranks share every box's recent times and packed
//!    size (`MPI_Allreduce`, a sum of vectors each rank fills only at its own boxes), so that
//!    a rank can map the boxes it receives to its threads at once;
//! 3. receives rank 0's decision (`ranks.rs`) (`MPI_Bcast`: whether the owners changed, and the new ones);
//! 4. exchanges boxes ([`crate::exchange`]): to new owners and to the ranks that read them.
//!
//! At the end every rank sends its boxes to rank 0, which computes the checksum of the whole
//! state: the value `pbs-bench run` prints for the same app, scenario, grid, seed and
//! iterations.

use std::time::Instant;

use mpi::collective::SystemOperation;
use mpi::traits::*;
use pbs::Grid;
use pbs_apps::distributed::{Distributed, CHECKSUM_START};
use pbs_scheduler::pinning::Pinning;
use pbs_scheduler::report::Recorder;
use pbs_scheduler::runtime::Runtime;
use pbs_scheduler::topology::Topology;
use pbs_scheduler::{BoxTimer, Executor};

use crate::exchange;
use crate::ranks::{self, Decision, LoadHistory, RankBalancer, Step};
use crate::summary::{self, Summary};
use crate::text;
use crate::timed::Timed;
use crate::window::{self, Window};

/// What to run (the command line of `pbs-mpi run`).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// `md` or `stencil`.
    pub app: String,
    /// The app's scenario.
    pub scenario: String,
    /// Threads per rank.
    pub threads: usize,
    /// Iterations.
    pub iters: usize,
    /// Boxes along x.
    pub nx: usize,
    /// Boxes along y.
    pub ny: usize,
    /// Boxes along z (1: a 2D grid; more: the stencil in 3D).
    pub nz: usize,
    /// The app's seed.
    pub seed: u64,
    /// How boxes go to ranks: `pbs`, `rcb` or `static`.
    pub balance: String,
    /// When to rebalance across ranks (one of `pbs_scheduler::criteria::NAMES`).
    pub criterion: String,
    /// The executor inside each rank (one of `pbs_scheduler::runtime::EXECUTORS`).
    pub executor: String,
    /// A fault to inject, for the tests of failure: `(rank, iteration, "panic" | "exit")`.
    pub fail: Option<(usize, usize, String)>,
    /// Whether each rank pins its threads to cores of the CPUs it was given.
    pub pin: RankPinning,
}

/// Whether a rank pins its threads, each to a core of the CPUs the rank was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum RankPinning {
    /// Pin where the ranks of a node were given CPUs of their own (`mpirun --bind-to core`,
    /// `--map-by slot:PE=T`, `srun --cpu-bind`, or one rank on the node), as OpenMP's
    /// `OMP_PROC_BIND` pins inside a bound rank; not where ranks share CPUs (`--bind-to none`,
    /// one cpuset for the whole job), whose threads would be pinned to the same cores.
    #[default]
    Auto,
    /// Pin in every rank.
    On,
    /// Never pin: the OS places the threads within the rank's CPUs.
    Off,
}

impl RankPinning {
    /// Whether this rank pins, the ranks of its node sharing no CPU or not.
    pub fn pins(self, node_ranks_disjoint: bool) -> bool {
        match self {
            RankPinning::Auto => node_ranks_disjoint,
            RankPinning::On => true,
            RankPinning::Off => false,
        }
    }
}

impl Settings {
    /// The errors every rank finds alike (bad sizes, names), before anything runs.
    pub fn check(&self, ranks: usize) -> Result<Grid, String> {
        if self.threads == 0 {
            return Err("--threads 0: a rank needs at least one thread".into());
        }
        let max = pbs_scheduler::pool::MAX_THREADS;
        if self.threads > max {
            return Err(pbs_scheduler::Error::TooManyThreads { threads: self.threads, held: 0, max }.to_string());
        }
        if self.iters == 0 {
            return Err("--iters 0: nothing to run".into());
        }
        // From above: as if every rank ran on this node.
        let bytes = RECORD_BYTES_PER_ITERATION.saturating_mul(ranks);
        pbs_apps::fits_in_memory("every iteration's records", (self.iters, "iterations"), bytes)
            .map_err(|e| format!("{e}; run fewer iterations"))?;
        let grid = Grid::new_3d(self.nx, self.ny, self.nz).map_err(|e| e.to_string())?;
        if ranks > grid.len() {
            return Err(format!("{ranks} ranks for {} boxes ({grid}): at most one rank per box", grid.len()));
        }
        if !pbs_scheduler::runtime::EXECUTORS.contains(&self.executor.as_str()) {
            return Err(format!(
                "unknown executor {:?}; expected one of {}",
                self.executor,
                pbs_scheduler::runtime::EXECUTORS.join(", ")
            ));
        }
        pbs_apps::distributed::build(&self.app, &self.scenario, 1, 1, self.seed)?;
        pbs_apps::distributed::check_every_share(&self.app, grid)?;
        RankBalancer::check(&self.balance, grid, ranks, &self.criterion)?;
        Ok(grid)
    }
}

/// Bytes a rank keeps for every iteration, at most: the [`Tally`]'s four figures an iteration and
/// the executor's [`Recorder`] records, in vectors that grow by doubling (twice their bytes).
/// `pbs-mpi run --iters 4294967297` ran on, filling the memory; now it is refused first.
const RECORD_BYTES_PER_ITERATION: usize = 2 * (4 * 8 + pbs_scheduler::report::RECORDER_BYTES_PER_ITERATION);

/// What a rank counts during the run (rank 0 also the decisions).
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub compute_ms: Vec<f64>,
    pub iter_ms: Vec<f64>,
    pub exchange_ms: Vec<f64>,
    /// Rank 0: the ranks' `max / mean` each iteration.
    pub imbalance: Vec<f64>,
    /// Rank 0: iterations after which the owners changed, the bytes each move took, and
    /// (`pbs`) those of a from-scratch RCB at the same moments.
    pub rebalancing_iterations: Vec<usize>,
    pub rebalancing_bytes: Vec<u64>,
    pub rcb_shadow_bytes: Vec<u64>,
    /// Rank 0: at each rebalancing, [`ranks::migration_bound`] from the owners before it.
    pub bound_bytes: Vec<f64>,
    /// Sent by this rank: boxes and bytes to new owners, bytes to readers.
    pub migrated_boxes: u64,
    pub migrated_bytes: u64,
    pub halo_bytes: u64,
    /// Whether this rank pinned its threads ([`RankPinning`]).
    pub pinned: bool,
}

/// Rank 0's decision after an iteration, known to every rank.
struct Decided {
    /// The owners for the next iteration (`None`: unchanged).
    next: Option<Vec<u32>>,
    /// Rank 0's decision.
    decision: Option<Decision>,
    /// Every box's packed size in bytes, when the box loads were gathered.
    sizes: Option<Vec<f64>>,
}

/// Rank 0 decides from each rank's `sums` (its boxes' measured and smoothed loads:
/// `MPI_Gather`), and asks for every box's load history and size when a rebalancing may follow
/// (`MPI_Allreduce` of vectors each rank fills at its own boxes: every rank then holds the
/// history of the boxes it may receive); the decision reaches every rank (`MPI_Bcast`). After
/// the `last` iteration nothing is asked: no iteration would pay a migration back.
fn decide(
    world: &impl Communicator,
    last: bool,
    mut balancer: Option<&mut RankBalancer>,
    history: &mut LoadHistory,
    sums: [f64; 2],
    (owners, me): (&[u32], usize),
    app: &dyn Distributed,
) -> Result<Decided, String> {
    let root = world.process_at_rank(0);
    let ranks = world.size() as usize;
    let mut decided = Decided { next: None, decision: None, sizes: None };
    let mut asks = 0u8;
    if let Some(b) = balancer.as_deref_mut() {
        let mut all = vec![0.0; 2 * ranks];
        root.gather_into_root(&sums[..], &mut all[..]);
        let (measured, smoothed): (Vec<f64>, Vec<f64>) = all.chunks(2).map(|s| (s[0], s[1])).unzip();
        if last {
            decided.decision = Some(b.observe_last(&measured)?);
        } else {
            match b.observe(&measured, &smoothed)? {
                Step::Decided(d) => decided.decision = Some(d),
                Step::NeedsBoxLoads => asks = 1,
            }
        }
    } else {
        root.gather_into(&sums[..]);
    }
    root.broadcast_into(&mut asks);
    if asks == 0 {
        return Ok(decided);
    }
    let n = owners.len();
    let mine: Vec<bool> = owners.iter().map(|&o| o as usize == me).collect();
    let mut share = history.share(&mine);
    share.extend((0..n).map(|k| if mine[k] { app.packed_len(k) as f64 } else { 0.0 }));
    let mut sum = vec![0.0; share.len()];
    world.all_reduce_into(&share[..], &mut sum[..], SystemOperation::sum());
    let sizes = sum.split_off(sum.len() - n);
    history.set_from_sum(&sum)?;
    let mut changed = 0u8;
    let mut next = Vec::new();
    if let Some(b) = balancer {
        let d = b.balance_on(&history.smoothed(), &sizes)?;
        changed = u8::from(d.rebalanced);
        next = b.owners().to_vec();
        decided.decision = Some(d);
    }
    decided.sizes = Some(sizes);
    root.broadcast_into(&mut changed);
    if changed == 1 {
        next.resize(n, 0);
        root.broadcast_into(&mut next[..]);
        decided.next = Some(next);
    }
    Ok(decided)
}

/// At a rebalancing, on rank 0: the bytes of the boxes that change owner, the least bytes any
/// balancer reaching [`ranks::BOUND_IMBALANCE`] would have moved, and (`pbs`, `pbs-cells`, `diffusion`)
/// those a from-scratch RCB would have moved, from every box's packed size `sizes`.
fn count_rebalancing_bytes(
    sizes: &[f64],
    (owners, next): (&[u32], &[u32]),
    decision: &Decision,
    ranks: usize,
    tally: &mut Tally,
) {
    let moved = (0..owners.len()).filter(|&k| owners[k] != next[k]);
    tally.rebalancing_bytes.push(moved.map(|k| sizes[k] as u64).sum());
    if let Some(rcb) = &decision.rcb_would_move {
        tally.rcb_shadow_bytes.push(rcb.iter().map(|&k| sizes[k] as u64).sum());
    }
    if let Some(loads) = &decision.balanced_on {
        tally.bound_bytes.push(ranks::migration_bound(owners, loads, sizes, ranks, ranks::BOUND_IMBALANCE));
    }
}

/// Tells the executor inside the rank the loads of its own boxes (the others' are 0), so that
/// its threads share those boxes at once (`pbs`; the others ignore hints), and times only them.
fn hint_local(exec: &mut Timed<Window>, loads: &[f64], local: &[bool]) -> Result<(), String> {
    exec.time_only(Some(local.to_vec()))?;
    let hint: Vec<f64> = loads.iter().zip(local).map(|(&x, &l)| if l { x } else { 0.0 }).collect();
    if hint.iter().sum::<f64>() > 0.0 {
        exec.hint_loads(&hint).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn inject(fail: &Option<(usize, usize, String)>, me: usize, it: usize) {
    if let Some((rank, at, how)) = fail {
        if (*rank, *at) == (me, it) {
            if how == "exit" {
                eprintln!("pbs-mpi rank {me}: exiting at iteration {it} (fault injected by PBS_MPI_FAIL)");
                std::process::exit(3);
            }
            panic!("fault injected by PBS_MPI_FAIL at iteration {it}");
        }
    }
}

/// The start: rank 0 partitions the boxes on the app's own estimate of each box's work, found
/// without building the state, and the owners reach every rank; each rank then builds only the
/// boxes it computes or reads (it gets the state of those it only reads from their owners in
/// a first exchange).
fn start(world: &impl Communicator, settings: &Settings, grid: Grid) -> Result<Start, String> {
    let (me, ranks) = (world.rank() as u32, world.size() as usize);
    let (app, scenario, seed) = (&settings.app, &settings.scenario, settings.seed);
    let estimate = pbs_apps::distributed::initial_work(app, scenario, grid, seed)?;
    let balancer = if me == 0 {
        Some(RankBalancer::new(&settings.balance, grid, ranks, &settings.criterion, Some(&estimate))?)
    } else {
        None
    };
    let mut owners = balancer.as_ref().map_or_else(|| vec![0; grid.len()], |b| b.owners().to_vec());
    world.process_at_rank(0).broadcast_into(&mut owners[..]);
    // The app's halo, from an instance that holds nothing.
    let nothing = vec![false; grid.len()];
    let halo = pbs_apps::distributed::build_holding(app, scenario, grid, seed, Some(&nothing))?.halo();
    let holds = pbs_apps::distributed::within(&grid, halo, |k| owners[k] == me);
    let app = pbs_apps::distributed::build_holding(app, scenario, grid, seed, Some(&holds))?;
    Ok(Start { app, balancer, owners, estimate })
}

/// What [`start`] leaves a rank with.
struct Start {
    /// The app, holding the boxes the rank computes or reads.
    app: Box<dyn Distributed>,
    /// Rank 0's balancer (`None` elsewhere).
    balancer: Option<RankBalancer>,
    /// Every box's rank.
    owners: Vec<u32>,
    /// The app's estimate of each box's work, the first partition's loads.
    estimate: Vec<f64>,
}

/// Runs `settings` on every rank of `world`; rank 0 gets the summary. An error is this rank's
/// own (the caller aborts the job with it).
pub fn run(world: &impl Communicator, settings: &Settings, grid: Grid) -> Result<Option<Summary>, String> {
    let (me, ranks) = (world.rank() as usize, world.size() as usize);
    let node = world.split_shared(0);
    // The topology is the node within the rank's CPUs, so pinned threads stay inside them.
    let pinned = settings.pin.pins(summary::node_ranks_disjoint(&node));
    let runtime = Runtime {
        topology: Topology::detect(),
        threads: settings.threads,
        pin: if pinned { Pinning::Workers } else { Pinning::Off },
        timer: BoxTimer::default(),
    };
    let name = settings.executor.clone();
    let make: window::Make =
        Box::new(move |g: Grid| runtime.executor(&name, g).map(|(exec, _)| exec).map_err(|e| e.to_string()));
    // The CPU clock where a box's wall time may count another thread's turn on its core.
    let mut node_threads = 0u64;
    node.all_reduce_into(&(settings.threads as u64), &mut node_threads, SystemOperation::sum());
    let mut rec = Recorder::new(&settings.executor, settings.threads);
    let Start { mut app, mut balancer, mut owners, estimate } = start(world, settings, grid)?;
    let local: Vec<bool> = owners.iter().map(|&o| o as usize == me).collect();
    let mut exec = Timed::new(Box::new(Window::new(grid, &local, app.halo(), make)?));
    exec.preempted(summary::shares_cores(
        node_threads,
        summary::online_cores(),
        settings.threads,
        summary::given_cpus(),
    ));
    hint_local(&mut exec, &estimate, &local)?;
    app.compute_only(Some(local))?;
    let mut steady = exchange::Plan::new(app.as_ref(), &grid, &owners, &owners, me as u32);
    let initial = exchange::all_to_all(world, &exchange::pack(app.as_ref(), &steady, ranks)?)?;
    exchange::unpack(app.as_mut(), grid.len(), &initial)?;
    let own = |owners: &[u32]| -> Vec<usize> { (0..owners.len()).filter(|&k| owners[k] as usize == me).collect() };
    let mut mine = own(&owners);
    let mut history = LoadHistory::new(grid.len());
    let mut tally = Tally { pinned, ..Tally::default() };
    let (began, mut told) = (Instant::now(), 0.0);
    for it in 0..settings.iters {
        inject(&settings.fail, me, it);
        let start = Instant::now();
        // Again every iteration: the window's executor is new after every change of the window.
        exec.hint_iterations_left((settings.iters - it) as u64);
        app.iterate(&mut exec, &mut rec, None);
        tally.compute_ms.push(start.elapsed().as_secs_f64() * 1e3);
        // This rank's boxes' times on their cores, and their sums (in box order, as
        // `metrics::charges` adds them).
        let loads = exec.take_loads_of(&mine);
        history.push(&mine, &loads);
        let sums = [loads.iter().fold(0.0, |a, &l| a + l), history.smoothed_sum(mine.iter().copied())];
        let last = it + 1 == settings.iters;
        if let Some(b) = balancer.as_mut() {
            b.run_ends_in(Some((settings.iters - it - 1) as u64));
        }
        let decided = decide(world, last, balancer.as_mut(), &mut history, sums, (&owners, me), app.as_ref())?;
        let (next, decision) = (decided.next, decided.decision);
        if let Some(d) = &decision {
            tally.imbalance.push(d.imbalance);
        }
        if let Some(next) = &next {
            tally.rebalancing_iterations.push(it);
            if let (Some(d), Some(sizes)) = (&decision, &decided.sizes) {
                count_rebalancing_bytes(sizes, (&owners, next), d, ranks, &mut tally);
            }
        }
        let exchange_start = Instant::now();
        let out = match &next {
            Some(next) => exchange::pack(
                app.as_ref(),
                &exchange::Plan::new(app.as_ref(), &grid, &owners, next, me as u32),
                ranks,
            )?,
            None => exchange::pack(app.as_ref(), &steady, ranks)?,
        };
        exchange::unpack(app.as_mut(), grid.len(), &exchange::all_to_all(world, &out)?)?;
        tally.migrated_boxes += out.migrated_boxes as u64;
        tally.migrated_bytes += out.migrated_bytes as u64;
        tally.halo_bytes += out.halo_bytes as u64;
        if let Some(next) = next {
            let local: Vec<bool> = next.iter().map(|&o| o as usize == me).collect();
            // The executor moves to the new region, and the threads' mapping follows at once,
            // on this iteration's loads of the boxes now here (those that arrived, as their
            // last rank measured them).
            exec.inner_mut().follow(&local, app.halo())?;
            hint_local(&mut exec, &history.latest(), &local)?;
            app.compute_only(Some(local))?;
            mine = own(&next);
            steady = exchange::Plan::new(app.as_ref(), &grid, &next, &next, me as u32);
            owners = next;
        }
        let exchange_s = exchange_start.elapsed().as_secs_f64();
        tally.exchange_ms.push(exchange_s * 1e3);
        if let (Some(b), Some(d)) = (balancer.as_mut(), &decision) {
            if d.rebalanced {
                b.add_to_last_cost(exchange_s, d)?;
            }
        }
        tally.iter_ms.push(start.elapsed().as_secs_f64() * 1e3);
        // Rank 0 alone reads the clock for it: the others print nothing.
        if me == 0 && !last {
            let elapsed = began.elapsed().as_secs_f64();
            if elapsed >= told + text::PROGRESS_EVERY {
                told = elapsed;
                eprintln!("{}", text::progress_line(&settings.app, &settings.balance, it + 1, settings.iters, elapsed));
            }
        }
    }
    let checksum = gather_checksum(world, app.as_mut(), &grid, &owners)?;
    let boxes = owners.iter().filter(|&&o| o as usize == me).count();
    let window_boxes = exec.inner().window_boxes();
    Ok(summary::gather(world, settings, grid, &tally, (boxes, window_boxes), &rec.report(), checksum))
}

/// The checksum of the whole final state, on rank 0 (0 elsewhere): the value of
/// `GridApp::checksum` on the state gathered in one process, hashed a band of rows (on a 3D
/// grid, of layers) at a time. For each band every rank sends rank 0 its boxes of the band and
/// of the rows (layers) within the halo around it, and rank 0 drops them once hashed, so that
/// it holds a band of other ranks' boxes at a time, not the grid.
fn gather_checksum(
    world: &impl Communicator,
    app: &mut dyn Distributed,
    grid: &Grid,
    owners: &[u32],
) -> Result<u64, String> {
    let (me, ranks) = (world.rank() as u32, world.size() as usize);
    // A row of boxes in 2D, a layer in 3D: the boxes of consecutive indices along the slowest
    // axis, `plane` of them each.
    let (plane, planes) = if grid.nz() > 1 { (grid.nx() * grid.ny(), grid.nz()) } else { (grid.nx(), grid.ny()) };
    let halo = app.halo();
    let rows = planes.div_ceil(ranks);
    let mut hash = CHECKSUM_START;
    let mut bytes = Vec::new();
    for first in (0..planes).step_by(rows) {
        let end = (first + rows).min(planes);
        let around = first.saturating_sub(halo) * plane..(end + halo).min(planes) * plane;
        let mut to_root = exchange::Outgoing { to: vec![Vec::new(); ranks], ..Default::default() };
        if me != 0 {
            for k in around.clone().filter(|&k| owners[k] == me) {
                exchange::push_record(&mut to_root.to[0], app, k, &mut bytes);
            }
        }
        let received = exchange::all_to_all(world, &to_root)?;
        if me == 0 {
            exchange::unpack(app, grid.len(), &received)?;
            hash = app.checksum_from(first * plane..end * plane, hash);
            around.filter(|&k| owners[k] != 0).for_each(|k| app.release(k));
        }
    }
    Ok(if me == 0 { hash } else { 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings {
            app: "stencil".into(),
            scenario: "drift".into(),
            threads: 2,
            iters: 5,
            nx: 4,
            ny: 3,
            nz: 1,
            seed: 3,
            balance: "pbs".into(),
            criterion: "boulmier".into(),
            executor: "pbs".into(),
            fail: None,
            pin: RankPinning::Auto,
        }
    }

    /// Each size and name is checked at its limit, before anything runs, with the grid of a
    /// good run returned: threads 1 to the pool's limit, at least one iteration, no more ranks
    /// than boxes, a known executor, one that cuts 3D grids on more than one layer, every
    /// iteration's records within the memory. (The mpirun tests see the same messages come from
    /// rank 0 alone.)
    #[test]
    fn sizes_and_names_are_checked_at_their_limits() {
        let max = pbs_scheduler::pool::MAX_THREADS;
        let ok = |s: Settings, ranks| s.check(ranks).map(|g| g.len());
        assert_eq!(ok(settings(), 12), Ok(12), "one rank per box");
        assert_eq!(ok(Settings { threads: 1, iters: 1, ..settings() }, 1), Ok(12));
        assert_eq!(ok(Settings { threads: max, ..settings() }, 2), Ok(12));
        assert_eq!(ok(Settings { nz: 2, executor: "rcb".into(), ..settings() }, 2), Ok(24));
        let err = |s: Settings, ranks| s.check(ranks).unwrap_err();
        assert!(err(settings(), 13).starts_with("13 ranks for 12 boxes"), "{}", err(settings(), 13));
        assert!(err(Settings { threads: 0, ..settings() }, 2).starts_with("--threads 0"));
        assert!(err(Settings { threads: max + 1, ..settings() }, 2).contains("at most 4096"));
        assert!(err(Settings { iters: 0, ..settings() }, 2).starts_with("--iters 0"));
        let long = err(Settings { iters: 1 << 40, ..settings() }, 2);
        assert!(
            long.starts_with("out of memory: every iteration's records for 1099511627776 iterations")
                && long.ends_with("; run fewer iterations"),
            "{long}"
        );
        assert!(ok(Settings { iters: 1_000_000, ..settings() }, 2).is_ok(), "a million iterations fit");
        assert!(err(Settings { executor: "fifo".into(), ..settings() }, 2).starts_with("unknown executor \"fifo\""));
        assert!(ok(Settings { nz: 2, executor: "norcb".into(), ..settings() }, 2).is_ok(), "norcb cuts 3D grids");
        assert!(err(Settings { balance: "metis".into(), ..settings() }, 2).contains("pbs, pbs-cells, rcb"));
        assert!(err(Settings { app: "heat".into(), ..settings() }, 2).contains("stencil"));
    }

    /// At a rebalancing the tally gets the bytes of the boxes that changed rank, those a
    /// from-scratch RCB would have moved where the decision says which, and the bound where it
    /// gives the loads balanced on; nothing else.
    #[test]
    fn a_rebalancing_counts_the_bytes_moved_rcbs_and_the_bound() {
        let sizes = [100.0, 20.0, 3.0, 4000.0];
        let (owners, next) = ([0u32, 0, 1, 1], [0u32, 1, 0, 1]);
        let mut decision = Decision {
            imbalance: 1.5,
            rebalanced: true,
            migrations: 2,
            seconds: 0.0,
            rcb_would_move: None,
            balanced_on: None,
        };
        let mut tally = Tally::default();
        count_rebalancing_bytes(&sizes, (&owners, &next), &decision, 2, &mut tally);
        assert_eq!(tally.rebalancing_bytes, [23]);
        assert!(tally.rcb_shadow_bytes.is_empty() && tally.bound_bytes.is_empty());
        let loads = vec![3.0, 1.0, 1.0, 1.0];
        decision.rcb_would_move = Some(vec![0, 3]);
        decision.balanced_on = Some(loads.clone());
        count_rebalancing_bytes(&sizes, (&owners, &next), &decision, 2, &mut tally);
        assert_eq!((tally.rebalancing_bytes, tally.rcb_shadow_bytes), (vec![23, 23], vec![4100]));
        let bound = ranks::migration_bound(&owners, &loads, &sizes, 2, ranks::BOUND_IMBALANCE);
        assert!(bound > 0.0);
        assert_eq!(tally.bound_bytes, [bound]);
    }

    /// A rank hints the executor inside it with its own boxes' loads only, and only where they
    /// weigh anything: pbs's threads then share a heavy corner at once; loads all outside the
    /// rank change nothing; flags of the wrong length are refused.
    #[test]
    fn a_rank_hints_its_own_boxes_loads() {
        let grid = Grid::new(8, 8).unwrap();
        let mine: Vec<bool> = (0..grid.len()).map(|k| k % 8 < 4).collect();
        let window = || {
            let make: window::Make = Box::new(|g: Grid| {
                let runtime =
                    Runtime { topology: Topology::detect(), threads: 2, pin: Pinning::Off, timer: BoxTimer::default() };
                runtime.executor("pbs", g).map(|(e, _)| e).map_err(|e| e.to_string())
            });
            Timed::new(Box::new(Window::new(grid, &mine, 0, make).unwrap()))
        };
        let inside: Vec<f64> = (0..grid.len()).map(|k| if mine[k] && k / 8 < 2 { 50.0 } else { 1.0 }).collect();
        let outside: Vec<f64> = (0..grid.len()).map(|k| if mine[k] { 0.0 } else { 50.0 }).collect();
        let mut exec = window();
        let before = exec.planned_owners();
        hint_local(&mut exec, &inside, &mine).unwrap();
        assert_ne!(exec.planned_owners(), before, "the heavy corner is shared");
        let mut exec = window();
        hint_local(&mut exec, &outside, &mine).unwrap();
        assert_eq!(exec.planned_owners(), before, "nothing of this rank's weighs anything");
        // Nor is it taken for an estimate: the first measurement still asks, and rebalances.
        exec.run_phase(&|k| {
            if inside[k] > 1.0 {
                crate::busy_wait(std::time::Duration::from_micros(20));
            }
        });
        let end = exec.end_iteration();
        assert!(end.rebalanced || end.under_way, "{end:?}");
        assert!(hint_local(&mut window(), &inside, &mine[1..]).unwrap_err().contains("63 flags for 64 boxes"));
    }

    /// `auto` pins where the node's ranks were given CPUs of their own; `on` and `off` as said.
    #[test]
    fn auto_pins_only_ranks_with_cpus_of_their_own() {
        let pins = |p: RankPinning| [p.pins(true), p.pins(false)];
        assert_eq!(pins(RankPinning::Auto), [true, false]);
        assert_eq!(pins(RankPinning::On), [true, true]);
        assert_eq!(pins(RankPinning::Off), [false, false]);
    }
}
