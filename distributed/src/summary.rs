//! The run's figures: each rank's gathered on rank 0, and the global ones derived from them.

use mpi::collective::SystemOperation;
use mpi::traits::*;
use pbs::metrics::median;
use pbs::Grid;
use pbs_scheduler::report::RunReport;

use crate::run::{Settings, Tally};

/// One rank's figures.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RankFigures {
    /// The rank.
    pub rank: usize,
    /// Its host.
    pub host: String,
    /// Boxes it owned at the end.
    pub boxes: usize,
    /// Boxes its executor spanned at the end: its boxes' bounding box grown by the halo
    /// (`window.rs`).
    pub window_boxes: usize,
    /// Median time of its compute phase per iteration, ms.
    pub compute_ms_median: f64,
    /// `max_avg` of its threads' busy times over the run.
    pub imbalance_threads: f64,
    /// Bytes of boxes it sent to their new owner, whole run.
    pub migrated_bytes_sent: u64,
    /// Bytes of boxes it sent to ranks that read them, whole run.
    pub halo_bytes_sent: u64,
}

/// The run's figures, on rank 0.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Summary {
    /// The app.
    pub app: String,
    /// Its scenario.
    pub scenario: String,
    /// Its seed.
    pub seed: u64,
    /// Boxes along x.
    pub nx: usize,
    /// Boxes along y.
    pub ny: usize,
    /// Boxes along z (1 on a 2D grid).
    pub nz: usize,
    /// Iterations.
    pub iters: usize,
    /// Ranks.
    pub ranks: usize,
    /// Threads per rank.
    pub threads: usize,
    /// The balance across ranks.
    pub balance: String,
    /// When to rebalance across ranks.
    pub criterion: String,
    /// The executor inside each rank.
    pub executor: String,
    /// Whether some host ran more threads (ranks × threads) than it has cores, or some rank more
    /// threads than the CPUs its launcher bound it to: times are then the OS's sharing, not
    /// speeds.
    pub oversubscribed: bool,
    /// The ranks bound (`mpirun --bind-to`, `srun --cpu-bind`) to fewer CPUs than they run
    /// threads, which then share them whatever cores the host has.
    pub ranks_short_of_cpus: Vec<usize>,
    /// The ranks whose threads were pinned, each to a core of the rank's CPUs (`--pin`).
    pub pinned_ranks: Vec<usize>,
    /// Hash of the final state, as `pbs-bench run --json` prints it.
    pub checksum: String,
    /// Median of `max / mean` of the ranks' measured loads over the iterations after the last
    /// rebalancing (all iterations when there was none).
    pub imbalance_ranks: f64,
    /// Median of the same over the iterations after the first rebalancing.
    pub imbalance_ranks_after_first: Option<f64>,
    /// `max / mean` of the ranks' loads, every iteration.
    pub imbalance_ranks_series: Vec<f64>,
    /// Median over ranks of each rank's thread imbalance.
    pub imbalance_threads_median: f64,
    /// Median wall time of an iteration (compute, loads, decision, exchange), ms.
    pub iter_ms_median: f64,
    /// Median time of the exchange of boxes, ms.
    pub exchange_ms_median: f64,
    /// Rebalancings across ranks.
    pub rebalancings: usize,
    /// Iterations after which they happened.
    pub rebalancing_iterations: Vec<usize>,
    /// Boxes that changed rank, whole run.
    pub migrated_boxes: u64,
    /// Bytes of those boxes, whole run.
    pub migrated_bytes: u64,
    /// `migrated_bytes / rebalancings` (0 without rebalancing).
    pub migrated_bytes_per_rebalancing: f64,
    /// Bytes migrated by each rebalancing (they sum to `migrated_bytes`).
    pub rebalancing_bytes: Vec<u64>,
    /// `pbs` and `diffusion`: the bytes a k-way RCB recomputed from scratch on the same loads
    /// would have migrated at each of the same rebalancings, from its partition at the one
    /// before.
    pub rcb_shadow_bytes: Vec<u64>,
    /// `pbs` and `diffusion`: `Σ rcb_shadow_bytes / migrated_bytes`.
    pub rcb_shadow_over_migrated: Option<f64>,
    /// At each rebalancing, a lower bound on the bytes any balancer would have moved from the
    /// same owners, on the same loads, to bring the ranks to `max / mean` ≤ 1.05
    /// (`ranks::migration_bound`).
    pub migration_bound_bytes: Vec<u64>,
    /// `Σ migration_bound_bytes / migrated_bytes`: the least share of the bytes moved that any
    /// balancer reaching 1.05 had to move (`None` without migration).
    pub bound_over_migrated: Option<f64>,
    /// Bytes sent to ranks that read a box (halo), per iteration.
    pub halo_bytes_per_iter: f64,
    /// Every rank's figures.
    pub per_rank: Vec<RankFigures>,
}

impl Summary {
    /// The grid as `nx×ny`, or `nx×ny×nz` on more than one layer.
    pub fn dims(&self) -> String {
        pbs::Grid::new_3d(self.nx, self.ny, self.nz).map_or_else(|e| e.to_string(), |g| g.to_string())
    }
}

fn host() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for its whole length, which is what we pass.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The cores the OS has online on this node.
pub(crate) fn online_cores() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).unwrap_or(1).max(1)
}

/// The CPUs this rank may run on (its launcher's binding), which its threads share.
pub(crate) fn given_cpus() -> usize {
    pbs_scheduler::pinning::process_cpus().map_or_else(online_cores, |c| c.len())
}

/// Whether the ranks of `node` (the ranks sharing this one's node) were given CPUs no two of
/// them share, as a launcher's binding gives them, so that each may pin its threads inside its
/// own. Collective over `node`; false where some rank cannot read its CPUs or has one past the
/// 4,096 counted here.
pub(crate) fn node_ranks_disjoint(node: &impl Communicator) -> bool {
    const WORDS: usize = 64;
    let mut mask = [0u64; WORDS];
    let mut readable = 1u64;
    match pbs_scheduler::pinning::process_cpus() {
        Some(cpus) => {
            for c in cpus {
                match mask.get_mut(c / 64) {
                    Some(word) => *word |= 1 << (c % 64),
                    None => readable = 0,
                }
            }
        }
        None => readable = 0,
    }
    let count = u64::from(mask.iter().map(|w| w.count_ones()).sum::<u32>());
    let (mut union, mut total, mut all_readable) = ([0u64; WORDS], 0u64, 0u64);
    node.all_reduce_into(&mask[..], &mut union[..], SystemOperation::bitwise_or());
    node.all_reduce_into(&count, &mut total, SystemOperation::sum());
    node.all_reduce_into(&readable, &mut all_readable, SystemOperation::min());
    all_readable == 1 && total == u64::from(union.iter().map(|w| w.count_ones()).sum::<u32>())
}

/// Fixed-size figures of one rank, as gathered (f64s, then the host name's bytes).
const FIGURES: usize = 11;
const HOST_BYTES: usize = 64;

/// Gathers every rank's figures on rank 0 and returns the summary there (`None` elsewhere).
pub(crate) fn gather(
    world: &impl Communicator,
    settings: &Settings,
    grid: Grid,
    tally: &Tally,
    (boxes, window_boxes): (usize, usize),
    report: &RunReport,
    checksum: u64,
) -> Option<Summary> {
    let figures: [f64; FIGURES] = [
        boxes as f64,
        median(&tally.compute_ms),
        report.max_avg,
        tally.migrated_bytes as f64,
        tally.halo_bytes as f64,
        tally.migrated_boxes as f64,
        online_cores() as f64,
        settings.threads as f64,
        window_boxes as f64,
        given_cpus() as f64,
        f64::from(u8::from(tally.pinned)),
    ];
    let mut name = [0u8; HOST_BYTES];
    let h = host();
    let len = h.len().min(HOST_BYTES);
    name[..len].copy_from_slice(&h.as_bytes()[..len]);
    let root = world.process_at_rank(0);
    let ranks = world.size() as usize;
    if world.rank() != 0 {
        root.gather_into(&figures[..]);
        root.gather_into(&name[..]);
        return None;
    }
    let mut all = vec![0.0; FIGURES * ranks];
    root.gather_into_root(&figures[..], &mut all[..]);
    let mut names = vec![0u8; HOST_BYTES * ranks];
    root.gather_into_root(&name[..], &mut names[..]);
    let per_rank: Vec<RankFigures> = (0..ranks)
        .map(|r| {
            let f = &all[r * FIGURES..(r + 1) * FIGURES];
            let n = &names[r * HOST_BYTES..(r + 1) * HOST_BYTES];
            RankFigures {
                rank: r,
                host: String::from_utf8_lossy(&n[..n.iter().position(|&b| b == 0).unwrap_or(HOST_BYTES)]).into_owned(),
                boxes: f[0] as usize,
                window_boxes: f[8] as usize,
                compute_ms_median: f[1],
                imbalance_threads: f[2],
                migrated_bytes_sent: f[3] as u64,
                halo_bytes_sent: f[4] as u64,
            }
        })
        .collect();
    // Oversubscribed: some host runs more threads than it has cores.
    let mut hosts: Vec<(&str, f64, f64)> = Vec::new();
    for (r, p) in per_rank.iter().enumerate() {
        let (cores, threads) = (all[r * FIGURES + 6], all[r * FIGURES + 7]);
        match hosts.iter_mut().find(|h| h.0 == p.host) {
            Some(h) => h.2 += threads,
            None => hosts.push((&p.host, cores, threads)),
        }
    }
    let ranks_short_of_cpus: Vec<usize> = (0..ranks).filter(|&r| all[r * FIGURES + 7] > all[r * FIGURES + 9]).collect();
    let pinned_ranks: Vec<usize> = (0..ranks).filter(|&r| all[r * FIGURES + 10] > 0.0).collect();
    let oversubscribed = hosts.iter().any(|(_, cores, threads)| threads > cores) || !ranks_short_of_cpus.is_empty();
    let migrated_bytes: u64 = per_rank.iter().map(|p| p.migrated_bytes_sent).sum();
    let migrated_boxes: u64 = (0..ranks).map(|r| all[r * FIGURES + 5] as u64).sum();
    let halo: u64 = per_rank.iter().map(|p| p.halo_bytes_sent).sum();
    let series = &tally.imbalance;
    let rebalancings = tally.rebalancing_iterations.len();
    let after = |it: usize| (it + 1 < series.len()).then(|| median(&series[it + 1..]));
    let imbalance_ranks = match tally.rebalancing_iterations.last() {
        Some(&last) => after(last).unwrap_or(series[series.len() - 1]),
        None => median(series),
    };
    let shadowed = matches!(settings.balance.as_str(), "pbs" | "diffusion");
    Some(Summary {
        app: settings.app.clone(),
        scenario: settings.scenario.clone(),
        seed: settings.seed,
        nx: grid.nx(),
        ny: grid.ny(),
        nz: grid.nz(),
        iters: settings.iters,
        ranks,
        threads: settings.threads,
        balance: settings.balance.clone(),
        criterion: settings.criterion.clone(),
        executor: settings.executor.clone(),
        oversubscribed,
        ranks_short_of_cpus,
        pinned_ranks,
        checksum: format!("{checksum:016x}"),
        imbalance_ranks,
        imbalance_ranks_after_first: tally.rebalancing_iterations.first().and_then(|&f| after(f)),
        imbalance_ranks_series: series.clone(),
        imbalance_threads_median: median(&per_rank.iter().map(|p| p.imbalance_threads).collect::<Vec<_>>()),
        iter_ms_median: median(&tally.iter_ms),
        exchange_ms_median: median(&tally.exchange_ms),
        rebalancings,
        rebalancing_iterations: tally.rebalancing_iterations.clone(),
        migrated_boxes,
        migrated_bytes,
        migrated_bytes_per_rebalancing: if rebalancings > 0 {
            migrated_bytes as f64 / rebalancings as f64
        } else {
            0.0
        },
        halo_bytes_per_iter: halo as f64 / settings.iters as f64,
        rebalancing_bytes: tally.rebalancing_bytes.clone(),
        rcb_shadow_bytes: tally.rcb_shadow_bytes.clone(),
        rcb_shadow_over_migrated: (shadowed && migrated_bytes > 0)
            .then(|| tally.rcb_shadow_bytes.iter().sum::<u64>() as f64 / migrated_bytes as f64),
        migration_bound_bytes: tally.bound_bytes.iter().map(|&b| b.round() as u64).collect(),
        bound_over_migrated: (migrated_bytes > 0)
            .then(|| tally.bound_bytes.iter().sum::<f64>() / migrated_bytes as f64),
        per_rank,
    })
}
