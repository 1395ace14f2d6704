//! One run on every rank: the iteration loop across ranks.
//!
//! Every rank builds the whole app from the seed (so each starts with every box's data), and
//! then, each iteration:
//! 1. computes the boxes it owns on its threads (the executor maps them, `pbs` by default);
//! 2. shares its boxes' CPU times with every rank (`MPI_Allreduce`, a sum of vectors each
//!    rank fills only at its own boxes), so that a rank can map the boxes it receives to its
//!    threads at once;
//! 3. receives rank 0's decision (`MPI_Bcast`: whether the owners changed, and the new ones);
//! 4. exchanges boxes ([`crate::exchange`]): to new owners and to the ranks that read them.
//!
//! At the end every rank sends its boxes to rank 0, which computes the checksum of the whole
//! state: the value `pbs-bench run` prints for the same app, scenario, grid, seed and
//! iterations.

use std::time::Instant;

use mpi::traits::*;
use pbs::Grid;
use pbs_scheduler::pinning::Pinning;
use pbs_scheduler::report::Recorder;
use pbs_scheduler::runtime::Runtime;
use pbs_scheduler::topology::Topology;
use pbs_scheduler::{BoxTimer, Executor};

use crate::exchange;
use crate::ranks::RankBalancer;

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
    /// The app's seed.
    pub seed: u64,
    /// How boxes go to ranks: `pbs`, `rcb` or `static`.
    pub balance: String,
    /// The executor inside each rank (one of `pbs_scheduler::runtime::EXECUTORS`).
    pub executor: String,
    /// A fault to inject, for the tests of failure: `(rank, iteration, "panic" | "exit")`.
    pub fail: Option<(usize, usize, String)>,
}

/// One rank's figures.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RankFigures {
    /// The rank.
    pub rank: usize,
    /// Its host.
    pub host: String,
    /// Boxes it owned at the end.
    pub boxes: usize,
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
    /// Boxes along x and y.
    pub nx: usize,
    /// Boxes along y.
    pub ny: usize,
    /// Iterations.
    pub iters: usize,
    /// Ranks.
    pub ranks: usize,
    /// Threads per rank.
    pub threads: usize,
    /// The balance across ranks.
    pub balance: String,
    /// The executor inside each rank.
    pub executor: String,
    /// Whether some host ran more threads (ranks × threads) than it has cores: times are then
    /// the OS's sharing, not speeds.
    pub oversubscribed: bool,
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
    /// Bytes sent to ranks that read a box (halo), per iteration.
    pub halo_bytes_per_iter: f64,
    /// Every rank's figures.
    pub per_rank: Vec<RankFigures>,
}

fn median(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

impl Settings {
    /// The errors every rank finds alike (bad sizes, names), before anything runs.
    pub fn check(&self, ranks: usize) -> Result<Grid, String> {
        if self.threads == 0 {
            return Err("--threads 0: a rank needs at least one thread".into());
        }
        if self.iters == 0 {
            return Err("--iters 0: nothing to run".into());
        }
        let grid = Grid::new(self.nx, self.ny).map_err(|e| e.to_string())?;
        if ranks > grid.len() {
            return Err(format!(
                "{ranks} ranks for {} boxes ({}×{}): at most one rank per box",
                grid.len(),
                self.nx,
                self.ny
            ));
        }
        if !pbs_scheduler::runtime::EXECUTORS.contains(&self.executor.as_str()) {
            return Err(format!(
                "unknown executor {:?}; expected one of {}",
                self.executor,
                pbs_scheduler::runtime::EXECUTORS.join(", ")
            ));
        }
        pbs_apps::distributed::build(&self.app, &self.scenario, 1, 1, self.seed)?;
        RankBalancer::new(&self.balance, grid, ranks)?;
        Ok(grid)
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

fn online_cores() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).unwrap_or(1).max(1)
}

/// Runs `settings` on every rank of `world`; rank 0 gets the summary. An error is this rank's
/// own (the caller aborts the job with it).
pub fn run(world: &impl Communicator, settings: &Settings, grid: Grid) -> Result<Option<Summary>, String> {
    let (me, ranks) = (world.rank() as usize, world.size() as usize);
    let mut app = pbs_apps::distributed::build(&settings.app, &settings.scenario, grid.nx, grid.ny, settings.seed)?;
    // Ranks may share a node: none pins its threads, or all would pin to the same cores
    // (bind ranks with mpirun's own options instead).
    let runtime = Runtime {
        topology: Topology::detect(),
        threads: settings.threads,
        pin: Pinning::Off,
        timer: BoxTimer::default(),
    };
    let (exec, _) = runtime.executor(&settings.executor, grid).map_err(|e| e.to_string())?;
    let mut exec = crate::timed::Timed::new(exec);
    let mut rec = Recorder::new(&settings.executor, settings.threads);
    let mut balancer = if me == 0 { Some(RankBalancer::new(&settings.balance, grid, ranks)?) } else { None };
    // Every rank starts from the same owners: the balancer's, which rank 0 broadcasts.
    let mut owners = RankBalancer::new(&settings.balance, grid, ranks)?.owners().to_vec();
    world.process_at_rank(0).broadcast_into(&mut owners[..]);
    app.compute_only(Some(owners.iter().map(|&o| o as usize == me).collect()))?;

    let (mut compute_ms, mut iter_ms, mut exchange_ms, mut series) = (vec![], vec![], vec![], vec![]);
    let (mut rebalancing_iterations, mut migrated_boxes, mut migrated_bytes, mut halo_bytes) =
        (vec![], 0u64, 0u64, 0u64);
    for it in 0..settings.iters {
        if let Some((rank, at, how)) = &settings.fail {
            if *rank == me && *at == it {
                match how.as_str() {
                    "exit" => {
                        eprintln!("pbs-mpi rank {me}: exiting at iteration {it} (fault injected by PBS_MPI_FAIL)");
                        std::process::exit(3);
                    }
                    _ => panic!("fault injected by PBS_MPI_FAIL at iteration {it}"),
                }
            }
        }
        let start = Instant::now();
        app.iterate(&mut exec, &mut rec, None);
        compute_ms.push(start.elapsed().as_secs_f64() * 1e3);
        let mut loads = exec.take_loads();
        loads.iter_mut().zip(&owners).filter(|(_, &o)| o as usize != me).for_each(|(l, _)| *l = 0.0);
        // Rank 0 decides; the others learn the new owners (or that nothing changed).
        let mut changed = 0u8;
        let mut decision = None;
        let mut all = vec![0.0; grid.len()];
        world.all_reduce_into(&loads[..], &mut all[..], mpi::collective::SystemOperation::sum());
        if let Some(b) = balancer.as_mut() {
            let d = b.end_iteration(&all)?;
            series.push(d.imbalance);
            changed = u8::from(d.rebalanced);
            decision = Some(d);
        }
        world.process_at_rank(0).broadcast_into(&mut changed);
        let mut next = owners.clone();
        if changed == 1 {
            if let Some(b) = &balancer {
                next.copy_from_slice(b.owners());
            }
            world.process_at_rank(0).broadcast_into(&mut next[..]);
            rebalancing_iterations.push(it);
        }
        let exchange_start = Instant::now();
        let out = exchange::pack(app.as_ref(), &grid, &owners, &next, me as u32, ranks);
        let received = exchange::all_to_all(world, &out)?;
        exchange::unpack(app.as_mut(), grid.len(), &received)?;
        (migrated_boxes, migrated_bytes) =
            (migrated_boxes + out.migrated_boxes as u64, migrated_bytes + out.migrated_bytes as u64);
        halo_bytes += out.halo_bytes as u64;
        if changed == 1 {
            let local: Vec<bool> = next.iter().map(|&o| o as usize == me).collect();
            // The threads' mapping follows at once: this iteration's loads of the boxes now
            // here (those that arrived measured by their last rank, through rank 0's sum).
            let hint: Vec<f64> = all.iter().zip(&local).map(|(&x, &l)| if l { x } else { 0.0 }).collect();
            if hint.iter().sum::<f64>() > 0.0 {
                exec.hint_loads(&hint).map_err(|e| e.to_string())?;
            }
            app.compute_only(Some(local))?;
            owners = next;
        }
        let exchange_s = exchange_start.elapsed().as_secs_f64();
        exchange_ms.push(exchange_s * 1e3);
        if let (Some(b), Some(d)) = (balancer.as_mut(), &decision) {
            if d.rebalanced {
                b.add_to_last_cost(exchange_s, d)?;
            }
        }
        iter_ms.push(start.elapsed().as_secs_f64() * 1e3);
    }

    // The whole state on rank 0, for the checksum.
    let mine: Vec<usize> = (0..grid.len()).filter(|&k| owners[k] as usize == me).collect();
    let gathered = exchange::Outgoing {
        to: (0..ranks)
            .map(|r| {
                let mut buf = Vec::new();
                if r == 0 && me != 0 {
                    let mut bytes = Vec::new();
                    for &k in &mine {
                        bytes.clear();
                        app.pack_box(k, &mut bytes);
                        buf.extend_from_slice(&(k as u64).to_le_bytes());
                        buf.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
                        buf.extend_from_slice(&bytes);
                    }
                }
                buf
            })
            .collect(),
        ..Default::default()
    };
    let received = exchange::all_to_all(world, &gathered)?;
    exchange::unpack(app.as_mut(), grid.len(), &received)?;
    let report = rec.report();
    let figures = [
        mine.len() as f64,
        median(&compute_ms),
        report.max_avg,
        migrated_bytes as f64,
        halo_bytes as f64,
        migrated_boxes as f64,
        online_cores() as f64,
        settings.threads as f64,
    ];
    let mut name = [0u8; 64];
    let h = host();
    name[..h.len().min(64)].copy_from_slice(&h.as_bytes()[..h.len().min(64)]);
    if me != 0 {
        world.process_at_rank(0).gather_into(&figures[..]);
        world.process_at_rank(0).gather_into(&name[..]);
        return Ok(None);
    }
    let mut all = vec![0.0; figures.len() * ranks];
    world.process_at_rank(0).gather_into_root(&figures[..], &mut all[..]);
    let mut names = vec![0u8; 64 * ranks];
    world.process_at_rank(0).gather_into_root(&name[..], &mut names[..]);
    let per_rank: Vec<RankFigures> = (0..ranks)
        .map(|r| {
            let f = &all[r * figures.len()..(r + 1) * figures.len()];
            let n = &names[r * 64..(r + 1) * 64];
            let host = String::from_utf8_lossy(&n[..n.iter().position(|&b| b == 0).unwrap_or(64)]).into_owned();
            RankFigures {
                rank: r,
                host,
                boxes: f[0] as usize,
                compute_ms_median: f[1],
                imbalance_threads: f[2],
                migrated_bytes_sent: f[3] as u64,
                halo_bytes_sent: f[4] as u64,
            }
        })
        .collect();
    // Oversubscribed: some host runs more threads than it has cores.
    let mut hosts: Vec<(String, f64, f64)> = Vec::new();
    for (r, p) in per_rank.iter().enumerate() {
        let f = &all[r * figures.len()..(r + 1) * figures.len()];
        match hosts.iter_mut().find(|h| h.0 == p.host) {
            Some(h) => h.2 += f[7],
            None => hosts.push((p.host.clone(), f[6], f[7])),
        }
    }
    let oversubscribed = hosts.iter().any(|(_, cores, threads)| threads > cores);
    let total_migrated_bytes: u64 = per_rank.iter().map(|p| p.migrated_bytes_sent).sum();
    let total_migrated_boxes: u64 = (0..ranks).map(|r| all[r * figures.len() + 5] as u64).sum();
    let total_halo: u64 = per_rank.iter().map(|p| p.halo_bytes_sent).sum();
    let rebalancings = rebalancing_iterations.len();
    let after = |first: usize| series[first + 1..].to_vec();
    let imbalance_ranks = match rebalancing_iterations.last() {
        Some(&last) if last + 1 < series.len() => median(&after(last)),
        Some(_) => *series.last().expect("at least one iteration"),
        None => median(&series),
    };
    let imbalance_ranks_after_first =
        rebalancing_iterations.first().filter(|&&f| f + 1 < series.len()).map(|&f| median(&after(f)));
    Ok(Some(Summary {
        app: settings.app.clone(),
        scenario: settings.scenario.clone(),
        seed: settings.seed,
        nx: grid.nx,
        ny: grid.ny,
        iters: settings.iters,
        ranks,
        threads: settings.threads,
        balance: settings.balance.clone(),
        executor: settings.executor.clone(),
        oversubscribed,
        checksum: format!("{:016x}", app.checksum()),
        imbalance_ranks,
        imbalance_ranks_after_first,
        imbalance_ranks_series: series,
        imbalance_threads_median: median(&per_rank.iter().map(|p| p.imbalance_threads).collect::<Vec<_>>()),
        iter_ms_median: median(&iter_ms),
        exchange_ms_median: median(&exchange_ms),
        rebalancings,
        rebalancing_iterations,
        migrated_boxes: total_migrated_boxes,
        migrated_bytes: total_migrated_bytes,
        migrated_bytes_per_rebalancing: if rebalancings > 0 {
            total_migrated_bytes as f64 / rebalancings as f64
        } else {
            0.0
        },
        halo_bytes_per_iter: total_halo as f64 / settings.iters as f64,
        per_rank,
    }))
}
