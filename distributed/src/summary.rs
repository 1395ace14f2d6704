//! The run's figures: each rank's gathered on rank 0, and the global ones derived from them.

use mpi::collective::SystemOperation;
use mpi::traits::*;
use pbs::metrics::median;
use pbs::Grid;
use pbs_scheduler::report::RunReport;

use crate::run::{Settings, Tally};

/// One rank's figures.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
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
    /// Rebalancings of its threads' mapping by the executor inside (none for static blocks or
    /// one thread).
    pub thread_rebalancings: usize,
    /// Bytes of boxes it sent to their new owner, whole run.
    pub migrated_bytes_sent: u64,
    /// Bytes of boxes it sent to ranks that read them, whole run.
    pub halo_bytes_sent: u64,
}

/// The run's figures, on rank 0.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
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
    /// `pbs`, `pbs-cells` and `diffusion`: the bytes a k-way RCB recomputed from scratch on
    /// the same loads would have migrated at each of the same rebalancings, from its partition
    /// at the one before.
    pub rcb_shadow_bytes: Vec<u64>,
    /// `pbs`, `pbs-cells` and `diffusion`: `Σ rcb_shadow_bytes / migrated_bytes`.
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

/// Whether a thread of this rank may lose its core to another thread while it runs a box:
/// the node runs more threads (`node_threads`, all its ranks') than it has cores online, or
/// the rank more threads than the CPUs its launcher gave it. A box's wall time then counts
/// others' turns, and the rank reads the CPU clock instead.
pub(crate) fn shares_cores(node_threads: u64, online_cores: usize, threads: usize, given_cpus: usize) -> bool {
    node_threads > online_cores as u64 || threads > given_cpus
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

/// One rank's own figures, as rank 0 gathers them (numbers as f64s, then the host's name).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Gathered {
    boxes: f64,
    compute_ms_median: f64,
    imbalance_threads: f64,
    thread_rebalancings: f64,
    migrated_bytes: f64,
    halo_bytes: f64,
    migrated_boxes: f64,
    online_cores: f64,
    threads: f64,
    window_boxes: f64,
    given_cpus: f64,
    pinned: f64,
}

/// Numbers in a [`Gathered`].
const FIGURES: usize = 12;
/// Bytes of a host's name gathered (longer names are cut).
const HOST_BYTES: usize = 64;

impl Gathered {
    fn to_array(self) -> [f64; FIGURES] {
        [
            self.boxes,
            self.compute_ms_median,
            self.imbalance_threads,
            self.thread_rebalancings,
            self.migrated_bytes,
            self.halo_bytes,
            self.migrated_boxes,
            self.online_cores,
            self.threads,
            self.window_boxes,
            self.given_cpus,
            self.pinned,
        ]
    }

    fn from_slice(f: &[f64]) -> Gathered {
        let [boxes, compute_ms_median, imbalance_threads, thread_rebalancings, migrated_bytes, halo_bytes, migrated_boxes, online_cores, threads, window_boxes, given_cpus, pinned] =
            <[f64; FIGURES]>::try_from(f).expect("FIGURES numbers per rank");
        Gathered {
            boxes,
            compute_ms_median,
            imbalance_threads,
            thread_rebalancings,
            migrated_bytes,
            halo_bytes,
            migrated_boxes,
            online_cores,
            threads,
            window_boxes,
            given_cpus,
            pinned,
        }
    }
}

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
    let figures = Gathered {
        boxes: boxes as f64,
        compute_ms_median: median(&tally.compute_ms),
        imbalance_threads: report.max_avg,
        thread_rebalancings: report.rebalances as f64,
        migrated_bytes: tally.migrated_bytes as f64,
        halo_bytes: tally.halo_bytes as f64,
        migrated_boxes: tally.migrated_boxes as f64,
        online_cores: online_cores() as f64,
        threads: settings.threads as f64,
        window_boxes: window_boxes as f64,
        given_cpus: given_cpus() as f64,
        pinned: f64::from(u8::from(tally.pinned)),
    }
    .to_array();
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
    let gathered: Vec<(Gathered, String)> = all
        .chunks_exact(FIGURES)
        .zip(names.chunks_exact(HOST_BYTES))
        .map(|(f, n)| {
            let n = &n[..n.iter().position(|&b| b == 0).unwrap_or(HOST_BYTES)];
            (Gathered::from_slice(f), String::from_utf8_lossy(n).into_owned())
        })
        .collect();
    Some(summarise(settings, grid, tally, &gathered, checksum))
}

/// The summary from every rank's gathered figures and host (in rank order) and rank 0's tally.
fn summarise(
    settings: &Settings,
    grid: Grid,
    tally: &Tally,
    gathered: &[(Gathered, String)],
    checksum: u64,
) -> Summary {
    let ranks = gathered.len();
    let per_rank: Vec<RankFigures> = gathered
        .iter()
        .enumerate()
        .map(|(r, (f, host))| RankFigures {
            rank: r,
            host: host.clone(),
            boxes: f.boxes as usize,
            window_boxes: f.window_boxes as usize,
            compute_ms_median: f.compute_ms_median,
            imbalance_threads: f.imbalance_threads,
            thread_rebalancings: f.thread_rebalancings as usize,
            migrated_bytes_sent: f.migrated_bytes as u64,
            halo_bytes_sent: f.halo_bytes as u64,
        })
        .collect();
    // Oversubscribed: some host runs more threads than it has cores.
    let mut hosts: Vec<(&str, f64, f64)> = Vec::new();
    for (f, host) in gathered {
        match hosts.iter_mut().find(|h| h.0 == host) {
            Some(h) => h.2 += f.threads,
            None => hosts.push((host, f.online_cores, f.threads)),
        }
    }
    let ranks_short_of_cpus: Vec<usize> =
        (0..ranks).filter(|&r| gathered[r].0.threads > gathered[r].0.given_cpus).collect();
    let pinned_ranks: Vec<usize> = (0..ranks).filter(|&r| gathered[r].0.pinned > 0.0).collect();
    let oversubscribed = hosts.iter().any(|(_, cores, threads)| threads > cores) || !ranks_short_of_cpus.is_empty();
    let migrated_bytes: u64 = per_rank.iter().map(|p| p.migrated_bytes_sent).sum();
    let migrated_boxes: u64 = gathered.iter().map(|(f, _)| f.migrated_boxes as u64).sum();
    let halo: u64 = per_rank.iter().map(|p| p.halo_bytes_sent).sum();
    let series = &tally.imbalance;
    let rebalancings = tally.rebalancing_iterations.len();
    let after = |it: usize| (it + 1 < series.len()).then(|| median(&series[it + 1..]));
    let imbalance_ranks = match tally.rebalancing_iterations.last() {
        Some(&last) => after(last).unwrap_or(series[series.len() - 1]),
        None => median(series),
    };
    let shadowed = matches!(settings.balance.as_str(), "pbs" | "pbs-cells" | "diffusion");
    Summary {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::RankPinning;

    /// A rank reads the CPU clock from one thread over the node's cores online, or over the
    /// CPUs its launcher gave it, and only then.
    #[test]
    fn a_rank_shares_cores_past_the_nodes_or_its_own_cpus() {
        // node threads, cores online, this rank's threads, its CPUs.
        for (node, online, threads, given, shares) in [
            (4, 4, 2, 2, false),
            (5, 4, 2, 2, true),
            (4, 4, 3, 2, true),
            (3, 4, 3, 3, false),
            (3, 4, 3, 4, false),
            (1, 1, 1, 1, false),
            (2, 1, 2, 4, true),
        ] {
            assert_eq!(shares_cores(node, online, threads, given), shares, "{node} {online} {threads} {given}");
        }
    }

    fn settings(balance: &str) -> Settings {
        Settings {
            app: "md".into(),
            scenario: "gravity".into(),
            threads: 2,
            iters: 5,
            nx: 8,
            ny: 6,
            nz: 1,
            seed: 3,
            balance: balance.into(),
            criterion: "boulmier".into(),
            executor: "pbs".into(),
            fail: None,
            pin: RankPinning::Auto,
        }
    }

    /// A rank on `host` with `cores` online and `cpus` given, running 2 threads.
    fn rank(host: &str, cores: f64, cpus: f64, migrated: f64, pinned: bool) -> (Gathered, String) {
        let f = Gathered {
            boxes: 16.0,
            compute_ms_median: 1.0 + migrated / 1000.0,
            imbalance_threads: 1.0 + migrated / 10_000.0,
            thread_rebalancings: 3.0 + migrated / 50.0,
            migrated_bytes: migrated,
            halo_bytes: 2.0 * migrated,
            migrated_boxes: migrated / 100.0,
            online_cores: cores,
            threads: 2.0,
            window_boxes: 24.0,
            given_cpus: cpus,
            pinned: f64::from(u8::from(pinned)),
        };
        (f, host.to_string())
    }

    #[test]
    fn gathered_figures_go_through_the_array_unchanged() {
        let (f, _) = rank("a", 4.0, 3.0, 700.0, true);
        assert_eq!(Gathered::from_slice(&f.to_array()), f);
        // No two fields hold equal numbers above, so that a swap would show.
        let a = f.to_array();
        assert!(a.iter().enumerate().all(|(i, x)| !a[..i].contains(x)), "{a:?}");
    }

    /// The global figures from the ranks': sums, per-host oversubscription, ranks short of
    /// CPUs, pinned ranks, the ranks' imbalance after the last and the first rebalancing, the
    /// bytes per rebalancing and the shadow and bound ratios (`pbs`, `pbs-cells` and
    /// `diffusion` only).
    #[test]
    fn the_summary_adds_up_the_ranks_and_reads_the_series_after_the_rebalancings() {
        let tally = Tally {
            imbalance: vec![2.0, 1.5, 1.25, 1.0, 1.5],
            rebalancing_iterations: vec![0, 2],
            rebalancing_bytes: vec![600, 400],
            rcb_shadow_bytes: vec![900, 1100],
            bound_bytes: vec![300.4, 199.7],
            iter_ms: vec![3.0, 1.0, 2.0],
            exchange_ms: vec![0.5, 0.1, 0.2],
            ..Tally::default()
        };
        let ranks =
            [rank("a", 4.0, 4.0, 100.0, false), rank("a", 4.0, 4.0, 300.0, true), rank("b", 2.0, 2.0, 600.0, true)];
        let grid = Grid::new(8, 6).unwrap();
        let s = summarise(&settings("pbs"), grid, &tally, &ranks, 0xabc);
        assert_eq!((s.nx, s.ny, s.nz, s.ranks, s.threads, s.iters), (8, 6, 1, 3, 2, 5));
        assert_eq!(s.checksum, "0000000000000abc");
        assert!(!s.oversubscribed, "host a runs 4 threads on 4 cores, b 2 on 2");
        assert_eq!((s.ranks_short_of_cpus, s.pinned_ranks), (vec![], vec![1, 2]));
        assert_eq!((s.migrated_bytes, s.migrated_boxes), (1000, 10));
        assert_eq!(s.halo_bytes_per_iter, 2.0 * 1000.0 / 5.0);
        assert_eq!(s.imbalance_ranks, 1.25, "median of 1.0 and 1.5, after iteration 2");
        assert_eq!(s.imbalance_ranks_after_first, Some(1.375));
        assert_eq!((s.rebalancings, s.migrated_bytes_per_rebalancing), (2, 500.0));
        assert_eq!(s.rcb_shadow_over_migrated, Some(2.0));
        assert_eq!(s.migration_bound_bytes, vec![300, 200]);
        assert!((s.bound_over_migrated.unwrap() - 0.5001).abs() < 1e-12);
        assert_eq!((s.iter_ms_median, s.exchange_ms_median), (2.0, 0.2));
        assert_eq!(s.imbalance_threads_median, 1.0 + 300.0 / 10_000.0);
        assert_eq!(s.per_rank[2].host, "b");
        assert_eq!(
            (s.per_rank[1].migrated_bytes_sent, s.per_rank[1].halo_bytes_sent, s.per_rank[1].compute_ms_median),
            (300, 600, 1.0 + 300.0 / 1000.0)
        );
        assert_eq!((s.per_rank[0].boxes, s.per_rank[0].window_boxes), (16, 24));
        assert_eq!(s.per_rank.iter().map(|r| r.thread_rebalancings).collect::<Vec<_>>(), [5, 9, 15]);

        // rcb has no shadow of itself; without a rebalancing the whole series counts.
        let still = Tally { imbalance: tally.imbalance.clone(), ..Tally::default() };
        let s = summarise(&settings("rcb"), grid, &still, &ranks[..1], 0);
        assert_eq!((s.rcb_shadow_over_migrated, s.bound_over_migrated), (None, Some(0.0)));
        assert_eq!((s.imbalance_ranks, s.imbalance_ranks_after_first), (1.5, None));
        assert_eq!(s.migrated_bytes_per_rebalancing, 0.0);
    }

    /// Oversubscribed: some host runs more threads than it has cores (ranks on one host add
    /// up), or some rank more threads than the CPUs it was given.
    #[test]
    fn oversubscription_is_counted_per_host_and_per_rank() {
        let grid = Grid::new(8, 6).unwrap();
        let tally = Tally { imbalance: vec![1.0], ..Tally::default() };
        let over = |ranks: &[(Gathered, String)]| summarise(&settings("pbs"), grid, &tally, ranks, 0);
        let s = over(&[rank("a", 3.0, 2.0, 0.0, false), rank("a", 3.0, 2.0, 0.0, false)]);
        assert!(s.oversubscribed && s.ranks_short_of_cpus.is_empty(), "4 threads on a's 3 cores");
        let s = over(&[rank("a", 3.0, 2.0, 0.0, false), rank("b", 3.0, 2.0, 0.0, false)]);
        assert!(!s.oversubscribed, "2 threads on each host's 3 cores");
        let s = over(&[rank("a", 8.0, 2.0, 0.0, false), rank("a", 8.0, 1.0, 0.0, false)]);
        assert!(s.oversubscribed && s.ranks_short_of_cpus == [1], "rank 1: 2 threads on 1 CPU");
    }
}
