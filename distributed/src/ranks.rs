//! Which rank owns which box: the decision rank 0 makes after every iteration. It sees each
//! rank's sum of its boxes' loads ([`RankBalancer::observe`]), and asks for the loads of every
//! box only when a rebalancing may follow ([`RankBalancer::balance_on`]): gathering a number
//! per box from every rank after every iteration cost more than the decision. Each rank keeps
//! its boxes' recent loads ([`LoadHistory`]). No MPI here, so it is tested like any balancer;
//! [`RankBalancer::end_iteration`] is the same protocol in one process.
//!
//! - `pbs`: the pbs balancer with one vCore per rank, warm-started, through
//!   [`pbs_scheduler::mapper::Mapper`]: the executor's decisions (Boulmier's eq. 24 with `C`
//!   the balancer's time plus the migration's, the first measured iteration rebalancing, the
//!   check, the 5 % trigger, a persistent imbalance).
//! - `rcb`: k-way recursive coordinate bisection recomputed from scratch
//!   ([`pbs::bisection::kway_rcb`], Zoltan's and Boulmier's reference), when the same
//!   criterion asks for it (and after the first measured iteration, as `pbs`); each new part
//!   takes the rank of the current part it overlaps most, as Zoltan's `REMAP` renumbers them.
//! - `diffusion`: from the current owners, boxes cross the existing borders as a diffusion
//!   flow asks, densest per byte first ([`pbs::diffusion::diffuse`]; Hu and Blake, the
//!   adaptive repartitioners of ParMETIS and Jostle), when the same criterion asks; it starts
//!   from RCB's partition.
//! - `static`: contiguous blocks of row-major box ids, horizontal slabs; never changes.
//!
//! One vCore per rank rather than one per NUMA node of each rank: the threads inside a rank
//! already get the pbs executor's NUMA-aware cells, and a rank's boxes form one region, which
//! keeps its halo (and so its messages) smallest.

use std::time::Instant;

use pbs::bisection::kway_rcb;
use pbs::diffusion::diffuse;
use pbs::refine::CRAWL_STEPS;
use pbs::{metrics, Grid};
use pbs_scheduler::criteria::{self, Criterion, Sample};
use pbs_scheduler::executors::{PbsOptions, RemapInputs, Remapper, StaticBlocks};
use pbs_scheduler::mapper::{Mapper, Observed};

/// The balancers across ranks, by name.
pub const BALANCES: [&str; 5] = ["pbs", "pbs-cells", "rcb", "diffusion", "static"];

/// What [`RankBalancer::observe`] decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Decided without the box loads: the owners stay.
    Decided(Decision),
    /// A rebalancing may follow: pass every box's loads to [`RankBalancer::balance_on`].
    NeedsBoxLoads,
}

/// What a rank balancer decided after an iteration.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// `max / mean` of the ranks' loads in the iteration that ended (under the old owners).
    pub imbalance: f64,
    /// Whether the owners changed.
    pub rebalanced: bool,
    /// Boxes whose rank changed.
    pub migrations: usize,
    /// Seconds spent deciding (and balancing).
    pub seconds: f64,
    /// `pbs`, `pbs-cells` and `diffusion`, when they rebalanced: the boxes a k-way RCB
    /// recomputed from scratch on the same loads would have moved, from its own partition at
    /// the last rebalancing (the baseline of migrated bytes, at the same moments, in the same
    /// run).
    pub rcb_would_move: Option<Vec<usize>>,
    /// When it rebalanced: the box loads it balanced on (each box's median over the last
    /// [`SMOOTHING`] iterations), for [`migration_bound`].
    pub balanced_on: Option<Vec<f64>>,
}

impl Decision {
    /// No change of owners, decided since `start`.
    fn unchanged(imbalance: f64, start: Instant) -> Decision {
        Decision {
            imbalance,
            rebalanced: false,
            migrations: 0,
            seconds: start.elapsed().as_secs_f64(),
            rcb_would_move: None,
            balanced_on: None,
        }
    }
}

enum Kind {
    /// The mapper.
    Pbs(Box<Mapper>),
    /// RCB from scratch (`diffusion: false`) or diffusion from the owners, when `criterion`
    /// asks, and after the first measured iteration.
    Recut {
        diffusion: bool,
        criterion: Box<dyn Criterion>,
        measured: bool,
    },
    Static,
}

/// The owners of the boxes over ranks, and how they change.
pub struct RankBalancer {
    grid: Grid,
    ranks: usize,
    owners: Vec<u32>,
    kind: Kind,
    /// `pbs`, `diffusion`: the partition a from-scratch RCB would have at their rebalancings.
    shadow: Option<Vec<u32>>,
    /// Iterations seen.
    seen: usize,
    /// When `observe` asked for the box loads: its start and the iteration's imbalance.
    pending: Option<(Instant, f64)>,
}

/// Iterations whose loads the balancers do not see: the first one's times are those of page
/// faults and first allocations (md gravity, 4 ranks: a mapping balanced on them measured
/// 1.14 from the next iteration on).
pub const WARMUP: usize = 1;

/// Iterations whose box loads are smoothed (each box's median) before they reach the
/// balancers: a box's CPU time is a few microseconds, and one iteration's measurement of it is
/// noisy.
pub const SMOOTHING: usize = 3;

/// The loads of a rank's boxes over the last [`SMOOTHING`] iterations after the warm-up, oldest
/// first: what each box's median, the load the balancers see, is taken over. Each rank writes
/// only its own boxes' entries; before the owners change, the ranks sum their shares
/// ([`LoadHistory::share`], [`LoadHistory::set_from_sum`]), so that a box's new owner holds its
/// whole history.
#[derive(Debug, Clone)]
pub struct LoadHistory {
    boxes: usize,
    recent: Vec<Vec<f64>>,
    seen: usize,
}

impl LoadHistory {
    /// An empty history of `boxes` boxes.
    pub fn new(boxes: usize) -> LoadHistory {
        LoadHistory { boxes, recent: Vec::new(), seen: 0 }
    }

    /// Sees an iteration: `loads[i]` is box `boxes[i]`'s (each below the box count); the other
    /// boxes' entries are not this rank's to know. The [`WARMUP`] iterations are left out.
    pub fn push(&mut self, boxes: &[usize], loads: &[f64]) {
        self.seen += 1;
        if self.seen <= WARMUP {
            return;
        }
        let mut latest = if self.recent.len() == SMOOTHING { self.recent.remove(0) } else { vec![0.0; self.boxes] };
        for (&k, &l) in boxes.iter().zip(loads) {
            latest[k] = l;
        }
        self.recent.push(latest);
    }

    /// Box `k`'s median over the recent iterations (0 before any). The loads are finite, so
    /// `min` and `max` order them as a sort would.
    fn median(&self, k: usize) -> f64 {
        match &self.recent[..] {
            [] => 0.0,
            [a] => a[k],
            [a, b] => a[k].max(b[k]),
            [a, b, c] => a[k].min(b[k]).max(a[k].max(b[k]).min(c[k])),
            _ => unreachable!("at most SMOOTHING = 3 iterations are kept"),
        }
    }

    /// Every box's median.
    pub fn smoothed(&self) -> Vec<f64> {
        (0..self.boxes).map(|k| self.median(k)).collect()
    }

    /// The sum of the medians of `boxes`, in their order.
    pub fn smoothed_sum(&self, boxes: impl IntoIterator<Item = usize>) -> f64 {
        boxes.into_iter().fold(0.0, |sum, k| sum + self.median(k))
    }

    /// Every box's latest load (0 before any).
    pub fn latest(&self) -> Vec<f64> {
        self.recent.last().cloned().unwrap_or_else(|| vec![0.0; self.boxes])
    }

    /// The loads of the boxes that `mine` marks (one flag per box), iteration after iteration,
    /// zeros elsewhere: summed over the ranks, every box's history.
    pub fn share(&self, mine: &[bool]) -> Vec<f64> {
        self.recent.iter().flat_map(|l| l.iter().zip(mine).map(|(&x, &m)| if m { x } else { 0.0 })).collect()
    }

    /// Takes the sum of every rank's [`LoadHistory::share`]. An error if its length is not
    /// this history's.
    pub fn set_from_sum(&mut self, sum: &[f64]) -> Result<(), String> {
        if sum.len() != self.recent.len() * self.boxes {
            return Err(format!(
                "a history of {} values for {} iterations of {} boxes",
                sum.len(),
                self.recent.len(),
                self.boxes
            ));
        }
        for (l, s) in self.recent.iter_mut().zip(sum.chunks(self.boxes.max(1))) {
            l.copy_from_slice(s);
        }
        Ok(())
    }
}

impl RankBalancer {
    /// `balance` (one of [`BALANCES`]) over `ranks` ranks of `grid`, each rank owning at least
    /// one box to start with, rebalancing when `criterion` (one of
    /// [`pbs_scheduler::criteria::NAMES`]; `boulmier` is eq. 24 with its guard for loads that
    /// change once) asks. `pbs` and `rcb` start from a partition of `estimate` (the app's own
    /// estimate of each box's work), uniform loads without it. An error names a bad name or
    /// size.
    pub fn new(
        balance: &str,
        grid: Grid,
        ranks: usize,
        criterion: &str,
        estimate: Option<&[f64]>,
    ) -> Result<RankBalancer, String> {
        // Its first cost: the first measured iteration rebalances anyway, and sets the real one.
        let named = RankBalancer::check(balance, grid, ranks, criterion)?;
        let uniform = vec![1.0; grid.len()];
        let start = estimate.unwrap_or(&uniform);
        let slabs =
            || (0..ranks).flat_map(|r| StaticBlocks::block(grid.len(), ranks, r).map(move |_| r as u32)).collect();
        let (kind, owners) = match balance {
            "pbs" | "pbs-cells" => {
                // Up to `CRAWL_STEPS` balancer steps per rebalancing, as a refined one takes
                // (the executor's 20 stop short when a load moved far): past them the cells
                // crawl. With 200, at 64 ranks, a rebalancing cost 35–62 ms for the same balance
                // (docs/mpi.md, "Cells that crawl across ranks"). The criterion by name, with the mapper's own first cost (its hint's, where
                // there is one), as the executor does. Nothing steals across ranks: `pbs`
                // takes the cells' owners to the tolerance box by box (docs/mpi.md, "Refined
                // owners across ranks" and "Refined owners by default"); `pbs-cells` keeps
                // the cells' owners, as the executor does.
                let criterion_name = Some(criterion.to_string());
                let options = PbsOptions { steps_per_rebalance: CRAWL_STEPS, criterion_name, ..PbsOptions::default() };
                let mut mapper = Mapper::new(grid, ranks, options).map_err(|e| e.to_string())?;
                if balance == "pbs" {
                    mapper = mapper.with_refined_owners();
                }
                if estimate.is_some() {
                    mapper.hint_loads(start).map_err(|e| e.to_string())?;
                }
                let owners = mapper.owners().to_vec();
                (Kind::Pbs(Box::new(mapper)), owners)
            }
            "rcb" | "diffusion" => {
                let owners = kway_rcb(&grid, start, ranks).map_err(|e| e.to_string())?;
                (Kind::Recut { diffusion: balance == "diffusion", criterion: named, measured: false }, owners)
            }
            _ => (Kind::Static, slabs()),
        };
        let shadow = matches!(balance, "pbs" | "pbs-cells" | "diffusion")
            .then(|| kway_rcb(&grid, start, ranks).map_err(|e| e.to_string()))
            .transpose()?;
        Ok(RankBalancer { grid, ranks, owners, kind, shadow, seen: 0, pending: None })
    }

    /// The errors [`RankBalancer::new`] would return for these names and sizes, found
    /// without balancing anything; the criterion called `criterion` on success.
    pub fn check(balance: &str, grid: Grid, ranks: usize, criterion: &str) -> Result<Box<dyn Criterion>, String> {
        if !BALANCES.contains(&balance) {
            return Err(format!("unknown balance {balance:?}; expected {}", BALANCES.join(", ")));
        }
        if ranks == 0 || ranks > grid.len() {
            return Err(format!("{ranks} ranks for {} boxes: between 1 and one rank per box", grid.len()));
        }
        criteria::by_name(criterion, 0.0)
    }

    /// Every box's rank.
    pub fn owners(&self) -> &[u32] {
        &self.owners
    }

    /// Sees the iteration that ended through each rank's sum of its boxes' loads: `measured`,
    /// this iteration's, and `smoothed`, the sum of its boxes' medians over the recent
    /// iterations ([`LoadHistory::smoothed_sum`]). The imbalance reported is the measured one;
    /// `pbs` decides on the smoothed sums, `rcb` and `diffusion`'s criterion on the measured
    /// ones, as the box loads they then balance are smoothed. The time until
    /// [`RankBalancer::balance_on`] returns, the gathering of the box loads included, is the
    /// decision's. An error names a wrong length or a bad load.
    pub fn observe(&mut self, measured: &[f64], smoothed: &[f64]) -> Result<Step, String> {
        let start = Instant::now();
        let [max, mean] = self.checked_max_mean(measured, smoothed)?;
        self.pending = None;
        let imbalance = if mean > 0.0 { max / mean } else { 1.0 };
        let decided = |start: Instant| Step::Decided(Decision::unchanged(imbalance, start));
        self.seen += 1;
        if self.seen <= WARMUP {
            return Ok(decided(start));
        }
        let asks = match &mut self.kind {
            Kind::Pbs(mapper) => mapper.observe(smoothed).map_err(|e| e.to_string())? == Observed::NeedsBoxLoads,
            Kind::Recut { criterion, measured: seen_one, .. } => {
                let min = measured.iter().copied().fold(f64::INFINITY, f64::min);
                let asks = criterion.observe(Sample { max, mean, min });
                asks || !*seen_one
            }
            Kind::Static => false,
        };
        if !asks {
            return Ok(decided(start));
        }
        self.pending = Some((start, imbalance));
        Ok(Step::NeedsBoxLoads)
    }

    /// The run ends `iterations` after the one the next [`RankBalancer::observe`] sees
    /// (`None`: it goes on): `pbs` then rebalances only where the gain over those iterations
    /// repays the last rebalancing's cost, the moving of its boxes included
    /// ([`Mapper::hint_iterations_left`]). RCB and diffusion re-cut as their criterion says.
    pub fn run_ends_in(&mut self, iterations: Option<u64>) {
        if let Kind::Pbs(mapper) = &mut self.kind {
            // The mapper counts the ends to come, the next observed one included; 0: none known.
            mapper.hint_iterations_left(iterations.map_or(0, |n| n + 1));
        }
    }

    /// Sees the run's last iteration as [`RankBalancer::observe`] does, its imbalance
    /// included, but never rebalances: no iteration would compute on the new owners, so
    /// moving boxes there would only cost. A request of `observe` still pending is dropped.
    pub fn observe_last(&mut self, measured: &[f64]) -> Result<Decision, String> {
        let start = Instant::now();
        let [max, mean] = self.checked_max_mean(measured, measured)?;
        self.pending = None;
        Ok(Decision::unchanged(if mean > 0.0 { max / mean } else { 1.0 }, start))
    }

    /// The largest and the mean of `measured`, after checking both sums' lengths and values.
    fn checked_max_mean(&self, measured: &[f64], smoothed: &[f64]) -> Result<[f64; 2], String> {
        if measured.len() != self.ranks
            || smoothed.len() != self.ranks
            || measured.iter().chain(smoothed).any(|l| !(l.is_finite() && *l >= 0.0))
        {
            return Err(format!(
                "{} rank loads and {} smoothed for {} ranks, or a value that is not finite and ≥ 0",
                measured.len(),
                smoothed.len(),
                self.ranks,
            ));
        }
        let mean = measured.iter().sum::<f64>() / self.ranks as f64;
        Ok([measured.iter().copied().fold(0.0, f64::max), mean])
    }

    /// After [`RankBalancer::observe`] asked for them: every box's load (its median over the
    /// recent iterations, [`LoadHistory::smoothed`]) and every box's size in bytes (what
    /// moving it costs); may change the owners. An error names a wrong length, a bad value
    /// or a call that was not asked for.
    pub fn balance_on(&mut self, box_loads: &[f64], bytes: &[f64]) -> Result<Decision, String> {
        let n = self.grid.len();
        if box_loads.len() != n
            || bytes.len() != n
            || box_loads.iter().chain(bytes).any(|l| !(l.is_finite() && *l >= 0.0))
        {
            return Err(format!(
                "{} box loads and {} sizes for {n} boxes, or a value that is not finite and ≥ 0",
                box_loads.len(),
                bytes.len(),
            ));
        }
        let Some((start, imbalance)) = self.pending.take() else {
            return Err("box loads given without a request from observe".into());
        };
        let before = self.owners.clone();
        match &mut self.kind {
            Kind::Pbs(mapper) => {
                if mapper.balance_on(box_loads).map_err(|e| e.to_string())?.migrations > 0 {
                    self.owners.copy_from_slice(mapper.owners());
                }
            }
            Kind::Recut { diffusion, criterion, measured } => {
                *measured = true;
                self.owners = if *diffusion {
                    diffuse(&self.grid, &self.owners, box_loads, bytes, self.ranks, DIFFUSION_LIMIT)
                } else {
                    recut(&self.grid, &self.owners, box_loads, self.ranks)
                }
                .map_err(|e| e.to_string())?;
                criterion.rebalanced(start.elapsed().as_secs_f64());
            }
            Kind::Static => {}
        }
        let migrations = metrics::migrations(&before, &self.owners);
        // Before the shadow RCB: measuring the baseline is not part of the decision's cost.
        let seconds = start.elapsed().as_secs_f64();
        let mut rcb_would_move = None;
        if let (Some(shadow), true) = (&mut self.shadow, migrations > 0) {
            let rcb = recut(&self.grid, shadow, box_loads, self.ranks).map_err(|e| e.to_string())?;
            rcb_would_move = Some((0..rcb.len()).filter(|&k| rcb[k] != shadow[k]).collect());
            *shadow = rcb;
        }
        let balanced_on = (migrations > 0).then(|| box_loads.to_vec());
        Ok(Decision { imbalance, rebalanced: migrations > 0, migrations, seconds, rcb_would_move, balanced_on })
    }

    /// [`RankBalancer::observe`] and, when asked, [`RankBalancer::balance_on`] in one process,
    /// from every box's `measured` loads (seconds, every rank's boxes) and sizes `bytes`;
    /// `history` sees the loads first. What `pbs-mpi` does across ranks.
    pub fn end_iteration(
        &mut self,
        history: &mut LoadHistory,
        measured: &[f64],
        bytes: &[f64],
    ) -> Result<Decision, String> {
        if measured.len() != self.grid.len() {
            return Err(format!("{} box loads for {} boxes", measured.len(), self.grid.len()));
        }
        let all: Vec<usize> = (0..measured.len()).collect();
        history.push(&all, measured);
        let sums = |loads: &[f64]| metrics::charges(&self.owners, loads, self.ranks);
        let smoothed = history.smoothed();
        match self.observe(&sums(measured), &sums(&smoothed))? {
            Step::Decided(d) => Ok(d),
            Step::NeedsBoxLoads => self.balance_on(&smoothed, bytes),
        }
    }

    /// Adds the seconds spent moving the boxes of the last rebalancing to the cost the
    /// criterion weighs (all but `static`).
    pub fn add_to_last_cost(&mut self, seconds: f64, decided: &Decision) -> Result<(), String> {
        match &mut self.kind {
            Kind::Pbs(mapper) => mapper.add_to_last_cost(seconds).map(|_| ()).map_err(|e| e.to_string()),
            Kind::Recut { criterion, .. } if decided.rebalanced => {
                criterion.rebalanced(decided.seconds + seconds);
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// The `max / mean` under which `diffusion` stops moving boxes (its flows aim at the mean).
pub const DIFFUSION_LIMIT: f64 = 1.02;

/// A k-way RCB of `loads` from scratch, its parts numbered after the parts of `owners` they
/// overlap most, as the remapping executors' RCB remaps threads ([`Remapper::remap`]): a
/// region that stays keeps its rank, where RCB's own numbering could move it whole to another.
fn recut(grid: &Grid, owners: &[u32], loads: &[f64], ranks: usize) -> pbs::Result<Vec<u32>> {
    let x = RemapInputs { owners, box_loads: loads, phase_loads: None, motion: None, seed: 0 };
    Remapper::Rcb.remap(grid, ranks, &x)
}

/// The `max / mean` of the ranks' loads that [`migration_bound`] asks a rebalancing to reach:
/// the target of a rebalancing across ranks (docs/mpi.md).
pub const BOUND_IMBALANCE: f64 = 1.05;

/// A lower bound on the bytes that any new owners must move away from `owners` for no rank's
/// load (the sum of its boxes' `loads`) to exceed `limit × mean`, a box of rank `r` weighing
/// `bytes[k]` when it moves. Each rank above the limit must shed at least its excess; the
/// fewest bytes that can carry it are those of its boxes of most load per byte, the last one
/// counted in part (a fractional knapsack). Shapes, whole boxes and the receivers' own limits
/// can only raise the real need, so no balancer reaching the limit moves less.
pub fn migration_bound(owners: &[u32], loads: &[f64], bytes: &[f64], ranks: usize, limit: f64) -> f64 {
    let charges = metrics::charges(owners, loads, ranks);
    let cap = limit * charges.iter().sum::<f64>() / ranks as f64;
    let mut bound = 0.0;
    for (r, &charge) in charges.iter().enumerate() {
        let mut excess = charge - cap;
        if excess <= 0.0 {
            continue;
        }
        let mut mine: Vec<usize> = (0..owners.len()).filter(|&k| owners[k] as usize == r && loads[k] > 0.0).collect();
        // Most load per byte first. Sorted on the quotient itself: comparing cross products
        // instead is not a total order once they round (a sort then panics).
        mine.sort_by(|&a, &b| (bytes[a] / loads[a]).total_cmp(&(bytes[b] / loads[b])));
        for k in mine {
            let part = (excess / loads[k]).min(1.0);
            bound += part * bytes[k];
            excess -= part * loads[k];
            if excess <= 0.0 {
                break;
            }
        }
    }
    bound
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each box's load reaches the balancers as its median over the last `SMOOTHING`
    /// iterations after the warm-up (fewer at the start), ties and repeats included.
    #[test]
    fn smoothed_loads_are_each_box_median_of_the_recent_iterations() {
        let n = 24;
        let all: Vec<usize> = (0..n).collect();
        let mut h = LoadHistory::new(n);
        h.push(&all, &vec![1e9; n]);
        assert_eq!(h.smoothed(), vec![0.0; n], "the warm-up is left out");
        let mut rng = pbs::rng::SplitMix64::new(9);
        let mut history: Vec<Vec<f64>> = Vec::new();
        for _ in 0..7 {
            // Few distinct values, so that ties occur.
            let latest: Vec<f64> = (0..n).map(|_| (rng.next_f64() * 4.0).floor()).collect();
            history.push(latest.clone());
            h.push(&all, &latest);
            let recent = &history[history.len().saturating_sub(SMOOTHING)..];
            let want: Vec<f64> = (0..n)
                .map(|k| {
                    let mut v: Vec<f64> = recent.iter().map(|l| l[k]).collect();
                    v.sort_by(f64::total_cmp);
                    v[v.len() / 2]
                })
                .collect();
            assert_eq!(h.smoothed(), want);
            assert_eq!(h.smoothed_sum([3, 5]), want[3] + want[5]);
        }
    }

    /// Ranks that each write only their own boxes, and sum their shares when the owners
    /// change, hold the history one process holding every box would.
    #[test]
    fn summed_shares_give_every_rank_the_whole_history() {
        let n = 10;
        let mut rng = pbs::rng::SplitMix64::new(4);
        let mut owners: Vec<u32> = (0..n).map(|k| u32::from(k >= 5)).collect();
        let (mut whole, mut ranks) = (LoadHistory::new(n), [LoadHistory::new(n), LoadHistory::new(n)]);
        for it in 0..12 {
            let loads: Vec<f64> = (0..n).map(|_| rng.next_f64()).collect();
            whole.push(&(0..n).collect::<Vec<_>>(), &loads);
            for (r, h) in ranks.iter_mut().enumerate() {
                let mine: Vec<usize> = (0..n).filter(|&k| owners[k] as usize == r).collect();
                let theirs: Vec<f64> = mine.iter().map(|&k| loads[k]).collect();
                h.push(&mine, &theirs);
                let sum = h.smoothed_sum(mine.iter().copied());
                assert_eq!(sum, whole.smoothed_sum(mine), "iteration {it}, rank {r}");
            }
            if it % 3 == 2 {
                // A rebalancing: the shares summed, then boxes change owner.
                let shares: Vec<Vec<f64>> = (0..2)
                    .map(|r| ranks[r].share(&owners.iter().map(|&o| o as usize == r).collect::<Vec<_>>()))
                    .collect();
                let sum: Vec<f64> = shares[0].iter().zip(&shares[1]).map(|(a, b)| a + b).collect();
                for h in &mut ranks {
                    h.set_from_sum(&sum).unwrap();
                    assert_eq!(h.smoothed(), whole.smoothed(), "iteration {it}");
                    assert_eq!(h.latest(), whole.latest());
                }
                owners.iter_mut().for_each(|o| *o = u32::from(rng.next_f64() < 0.5));
            }
        }
        assert!(ranks[0].set_from_sum(&[1.0; 3]).unwrap_err().contains("3 values for 3 iterations of 10 boxes"));
    }

    /// A heavy corner that drifts along the diagonal, step by step. Boxes of 10-90 ms: the
    /// criteria weigh the imbalance against a rebalancing's wall time, which a loaded machine
    /// stretches; with microsecond boxes a slow run waited for the imbalance to pay and ended
    /// the drift behind it (CI, 2026-11-25: pbs at 1.38).
    fn drifting(grid: Grid, step: usize) -> Vec<f64> {
        (0..grid.len())
            .map(|k| {
                let [i, j, _] = grid.coords(k);
                let (ci, cj) = (4 + step / 4, 4 + step / 4);
                let d2 = (i as f64 - ci as f64).powi(2) + (j as f64 - cj as f64).powi(2);
                1e-2 * (1.0 + 8.0 * (-d2 / 20.0).exp())
            })
            .collect()
    }

    fn imbalance(owners: &[u32], loads: &[f64], ranks: usize) -> f64 {
        metrics::max_avg(&metrics::charges(owners, loads, ranks))
    }

    #[test]
    fn the_balances_follow_a_drifting_load_and_static_does_not() {
        let grid = Grid::new(32, 32).unwrap();
        let mut last = Vec::new();
        for name in BALANCES {
            let mut b = RankBalancer::new(name, grid, 4, "boulmier", None).unwrap();
            let mut history = LoadHistory::new(grid.len());
            let (mut moved, mut lag) = (0, 0.0);
            for step in 0..60 {
                moved +=
                    b.end_iteration(&mut history, &drifting(grid, step), &vec![100.0; grid.len()]).unwrap().migrations;
                // The imbalance the next iteration runs with.
                lag += imbalance(b.owners(), &drifting(grid, step + 1), 4) / 60.0;
            }
            last.push((name, lag, imbalance(b.owners(), &drifting(grid, 60), 4), moved));
        }
        // In the order of `BALANCES`: pbs, pbs-cells, rcb, diffusion, static.
        let lag: Vec<f64> = last.iter().map(|l| l.1).collect();
        let moved: Vec<usize> = last.iter().map(|l| l.3).collect();
        let (fixed, fixed_end) = (lag[4], last[4].2);
        // All lag the drift (smoothed loads, a criterion that waits for the imbalance to pay
        // for the move) but stay far under the fixed slabs over the drift as a whole: at any one
        // step the lag depends on where the last rebalancing fell against the corner's jumps,
        // every fourth step.
        assert!(lag[..4].iter().all(|&l| l < 0.8 * fixed), "{last:?}");
        assert!(fixed_end > 1.3 && moved[4] == 0, "{last:?}");
        assert!(moved[0] > 0 && moved[1] > 0 && moved[3] > 0, "{last:?}");
    }

    /// Where each rank holds few boxes (16 of a cube of 8³ over 32 ranks, Perlin loads), the
    /// cells stop short of the tolerance and nothing across ranks takes what they leave:
    /// `pbs` (refined owners) ends its first rebalancing within it, `pbs-cells` above, on the
    /// same loads and from the same estimate.
    #[test]
    fn refined_ranks_end_nearer_the_mean_where_each_holds_few_boxes() {
        let grid = Grid::new_3d(8, 8, 8).unwrap();
        // Seconds large enough that any imbalance pays for the balancer's time (the payback rule).
        let loads: Vec<f64> = pbs::loadmap::PerlinMap::with_seed(2).loads_3d(&grid).iter().map(|l| 0.1 * l).collect();
        let bytes = vec![64.0; grid.len()];
        let ones = vec![1.0; grid.len()];
        let ended = ["pbs-cells", "pbs"].map(|name| {
            let mut b = RankBalancer::new(name, grid, 32, "always", Some(&ones)).unwrap();
            let mut history = LoadHistory::new(grid.len());
            let rebalanced = (0..=WARMUP)
                .map(|_| b.end_iteration(&mut history, &loads, &bytes).unwrap())
                .any(|d| d.rebalanced && d.migrations > 0);
            assert!(rebalanced, "{name}: the first measured iteration rebalances the uniform estimate");
            imbalance(b.owners(), &loads, 32)
        });
        assert!(ended[0] > 1.03 && ended[1] < 1.025, "pbs-cells, pbs: {ended:?}");
    }

    /// Where each rank holds few boxes of a concentrated load the cells crawl: `pbs-cells`
    /// stops a rebalancing where [`CRAWL_STEPS`] steps stop, as a mapper told so does from the
    /// same start, and not where 200 would (the steps the rank balancer took until 2026-12-07;
    /// `pbs`'s refined owners stop their cells there too, `rebalance_mended`).
    #[test]
    fn a_rank_rebalancing_stops_where_the_cells_crawl() {
        let grid = Grid::new(24, 24).unwrap();
        let ranks = 36;
        // md's expansion in miniature: the load piled in a disc at the centre.
        let loads: Vec<f64> = (0..grid.len())
            .map(|k| {
                let (x, y) = ((k % 24) as f64 - 11.5, (k / 24) as f64 - 11.5);
                0.1 * (1.0 + 40.0 * (-(x * x + y * y) / 18.0).exp())
            })
            .collect();
        let bytes = vec![64.0; grid.len()];
        let ranked = {
            let mut b = RankBalancer::new("pbs-cells", grid, ranks, "always", None).unwrap();
            let mut history = LoadHistory::new(grid.len());
            let decided: Vec<Decision> =
                (0..=WARMUP).map(|_| b.end_iteration(&mut history, &loads, &bytes).unwrap()).collect();
            assert!(decided.iter().any(|d| d.rebalanced && d.migrations > 0));
            b.owners().to_vec()
        };
        let mapped = [CRAWL_STEPS, 200].map(|steps| {
            let criterion_name = Some("always".to_string());
            let options = PbsOptions { steps_per_rebalance: steps, criterion_name, ..PbsOptions::default() };
            let mut m = Mapper::new(grid, ranks, options).unwrap();
            for _ in 0..=WARMUP {
                let sums = metrics::charges(m.owners(), &loads, ranks);
                if m.observe(&sums).unwrap() == Observed::NeedsBoxLoads {
                    m.balance_on(&loads).unwrap();
                }
            }
            m.owners().to_vec()
        });
        assert_eq!(ranked, mapped[0], "the rank balancer's owners are those of {CRAWL_STEPS} steps");
        assert_ne!(mapped[0], mapped[1], "the case needs cells that run past {CRAWL_STEPS} steps");
    }

    /// On balanced ranks the box loads are asked for once, at the first measured iteration;
    /// `static` never asks; a call out of turn or of the wrong size is named.
    #[test]
    fn box_loads_are_asked_for_only_when_a_rebalancing_may_follow() {
        let grid = Grid::new(16, 16).unwrap();
        let (box_loads, bytes) = (vec![1e-2; grid.len()], vec![8.0; grid.len()]);
        for name in BALANCES {
            let mut b = RankBalancer::new(name, grid, 4, "boulmier", None).unwrap();
            assert!(b.balance_on(&box_loads, &bytes).unwrap_err().contains("without a request"));
            let sums = metrics::charges(b.owners(), &box_loads, 4);
            let mut asked = Vec::new();
            for it in 0..50 {
                match b.observe(&sums, &sums).unwrap() {
                    Step::Decided(d) => assert!(!d.rebalanced && d.imbalance < 1.05, "{name}: {d:?}"),
                    Step::NeedsBoxLoads => {
                        asked.push(it);
                        assert_eq!(b.balance_on(&box_loads, &bytes).unwrap().migrations, 0, "{name}");
                    }
                }
            }
            let want: &[usize] = if name == "static" { &[] } else { &[WARMUP] };
            assert_eq!(asked, want, "{name}");
            assert!(b.observe(&[1.0; 3], &[1.0; 3]).unwrap_err().contains("3 rank loads"));
            assert!(b.observe(&[1.0, 1.0, f64::NAN, 1.0], &sums).is_err());
        }
    }

    /// The last iteration is seen for its imbalance only: where `observe` would ask for the
    /// box loads (here at the first measured iteration), `observe_last` reports the ranks'
    /// `max / mean`, changes no owner, and leaves nothing pending.
    #[test]
    fn the_last_iteration_is_measured_but_never_rebalanced() {
        let grid = Grid::new(16, 16).unwrap();
        let (box_loads, bytes) = (vec![1e-2; grid.len()], vec![8.0; grid.len()]);
        for name in BALANCES {
            let (mut asked, mut last) = (
                RankBalancer::new(name, grid, 4, "always", None).unwrap(),
                RankBalancer::new(name, grid, 4, "always", None).unwrap(),
            );
            let uneven = [4.0, 1.0, 1.0, 2.0];
            for _ in 0..WARMUP {
                asked.observe(&uneven, &uneven).unwrap();
                last.observe(&uneven, &uneven).unwrap();
            }
            let d = last.observe_last(&uneven).unwrap();
            assert_eq!((d.imbalance, d.rebalanced, d.migrations), (2.0, false, 0), "{name}");
            assert!(d.rcb_would_move.is_none() && d.balanced_on.is_none());
            assert!(last.balance_on(&box_loads, &bytes).unwrap_err().contains("without a request"), "{name}");
            let step = asked.observe(&uneven, &uneven).unwrap();
            assert_eq!(matches!(step, Step::NeedsBoxLoads), name != "static", "{name}: observe would ask");
            assert!(last.observe_last(&[1.0; 3]).unwrap_err().contains("3 rank loads"));
        }
    }

    /// Told no iteration follows the one it sees, pbs's ranks start no rebalancing (none
    /// could repay its cost), where ranks not told, or told one follows, do; RCB re-cuts either
    /// way, its criterion knowing no run length.
    #[test]
    fn pbs_ranks_rebalance_only_where_the_iterations_left_repay_it() {
        let grid = Grid::new(16, 16).unwrap();
        let box_loads: Vec<f64> = (0..grid.len()).map(|k| if k % 16 < 4 { 4e-2 } else { 1e-2 }).collect();
        let bytes = vec![8.0; grid.len()];
        for (name, left, rebalances) in
            [("pbs", Some(0), false), ("pbs", Some(1), true), ("pbs", None, true), ("rcb", Some(0), true)]
        {
            let mut b = RankBalancer::new(name, grid, 4, "always", None).unwrap();
            let uneven = [4.0, 1.0, 1.0, 2.0];
            for _ in 0..WARMUP {
                b.observe(&uneven, &uneven).unwrap();
            }
            b.run_ends_in(left);
            assert!(matches!(b.observe(&uneven, &uneven).unwrap(), Step::NeedsBoxLoads), "{name}");
            let d = b.balance_on(&box_loads, &bytes).unwrap();
            assert_eq!((d.rebalanced, d.migrations > 0), (rebalances, rebalances), "{name}, {left:?}");
        }
    }

    /// The latest loads are the last iteration after the warm-up, at the boxes it measured:
    /// zeros before any, the warm-up's left out.
    #[test]
    fn the_latest_loads_are_the_last_iteration_s() {
        let mut h = LoadHistory::new(4);
        assert_eq!(h.latest(), vec![0.0; 4]);
        for _ in 0..WARMUP {
            h.push(&[0, 1, 2, 3], &[9.0; 4]);
        }
        assert_eq!(h.latest(), vec![0.0; 4], "the warm-up is not measured");
        h.push(&[0, 1, 2, 3], &[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(h.latest(), [1.0, 2.0, 3.0, 4.0]);
        h.push(&[1, 3], &[5.0, 6.0]);
        assert_eq!(h.latest()[1], 5.0);
        assert_eq!(h.latest()[3], 6.0);
    }

    /// The seconds a rebalancing's migration took count in its cost, which eq. 24 weighs
    /// against the imbalance that builds up after it: with 1,000 s added, a rank whose excess
    /// grows by 10 µs an iteration is not rebalanced again within 200 iterations; with nothing
    /// added it soon is; and seconds given for a decision that moved nothing are not
    /// taken (`rcb`, `diffusion`; pbs's mapper keeps its own record of its last rebalancing).
    #[test]
    fn the_migration_s_seconds_delay_the_next_rebalancing() {
        let grid = Grid::new(16, 16).unwrap();
        let box_loads: Vec<f64> = (0..grid.len()).map(|k| if k % 16 < 8 { 4e-5 } else { 1e-5 }).collect();
        let bytes = vec![8.0; grid.len()];
        let uneven = [1.5e-3, 1e-3, 1e-3, 1e-3];
        // Iterations until the next ask after the first rebalancing, `extra` seconds added to it
        // (to a decision that moved nothing where `moved` is false).
        let next_ask = |name: &str, extra: f64, moved: bool| -> Option<usize> {
            let mut b = RankBalancer::new(name, grid, 4, "boulmier", None).unwrap();
            let mut first = None;
            while first.is_none() {
                if let Step::NeedsBoxLoads = b.observe(&uneven, &uneven).unwrap() {
                    first = Some(b.balance_on(&box_loads, &bytes).unwrap());
                }
            }
            let mut d = first.unwrap();
            assert!(d.rebalanced, "{name}");
            if !moved {
                d.rebalanced = false;
            }
            b.add_to_last_cost(extra, &d).unwrap();
            (1..=200).find(|&t| {
                let growing = [1e-3 + t as f64 * 1e-5, 1e-3, 1e-3, 1e-3];
                matches!(b.observe(&growing, &growing).unwrap(), Step::NeedsBoxLoads)
            })
        };
        for name in ["pbs", "rcb", "diffusion"] {
            assert!(next_ask(name, 0.0, true).is_some(), "{name}");
            assert_eq!(next_ask(name, 1000.0, true), None, "{name}");
            if name != "pbs" {
                assert!(next_ask(name, 1000.0, false).is_some(), "{name}");
            }
        }
    }

    /// RCB recomputed from scratch gives each region the rank that holds most of it: the
    /// same regions held by ranks in another order stay where they are.
    #[test]
    fn a_recut_keeps_each_region_on_its_rank() {
        let grid = Grid::new(12, 10).unwrap();
        let loads: Vec<f64> = (0..grid.len()).map(|k| 1.0 + (k % 5) as f64).collect();
        let rcb = kway_rcb(&grid, &loads, 4).unwrap();
        let held: Vec<u32> = rcb.iter().map(|&r| 3 - r).collect();
        assert_eq!(recut(&grid, &held, &loads, 4).unwrap(), held);
        let heavier: Vec<f64> = loads.iter().enumerate().map(|(k, q)| if k < 30 { 3.0 * q } else { *q }).collect();
        let fresh = kway_rcb(&grid, &heavier, 4).unwrap();
        let moved = metrics::migrations(&held, &recut(&grid, &held, &heavier, 4).unwrap());
        assert!(moved < metrics::migrations(&held, &fresh), "{moved}");
    }

    /// A rebalancing's decision describes it: `rebalanced` where boxes moved, their count,
    /// the loads it balanced on, and (`pbs`, `pbs-cells`, `diffusion`) the boxes a from-scratch RCB would
    /// have moved from its own last partition (here the uniform one it started from), its
    /// parts numbered after those of that partition they overlap most; one
    /// that moves nothing has none of them. The
    /// imbalance reported is the measured sums' `max / mean` (1 where nothing was measured);
    /// loads and sizes of the wrong length or value are refused whichever of the two is wrong.
    #[test]
    fn a_rebalancing_reports_what_it_moved_and_on_what() {
        let grid = Grid::new(16, 16).unwrap();
        // The left half four times as heavy as the right.
        let box_loads: Vec<f64> = (0..grid.len()).map(|k| if k % 16 < 8 { 4e-3 } else { 1e-3 }).collect();
        let bytes = vec![8.0; grid.len()];
        for name in BALANCES {
            let mut b = RankBalancer::new(name, grid, 4, "always", None).unwrap();
            let before = b.owners().to_vec();
            let zero = b.observe(&[0.0; 4], &[0.0; 4]).unwrap();
            assert!(matches!(zero, Step::Decided(Decision { imbalance: 1.0, .. })), "{name}: {zero:?}");
            assert_eq!(
                RankBalancer::new(name, grid, 4, "always", None).unwrap().observe_last(&[0.0; 4]).unwrap().imbalance,
                1.0
            );
            for _ in 0..WARMUP.saturating_sub(1) {
                b.observe(&[1.0; 4], &[1.0; 4]).unwrap();
            }
            let sums = metrics::charges(&before, &box_loads, 4);
            let (max, mean) = (sums.iter().copied().fold(0.0, f64::max), sums.iter().sum::<f64>() / 4.0);
            match b.observe(&sums, &sums).unwrap() {
                Step::NeedsBoxLoads => {}
                Step::Decided(d) => {
                    assert_eq!(name, "static", "{name} did not ask");
                    assert_eq!(d.imbalance, max / mean);
                    continue;
                }
            }
            let d = b.balance_on(&box_loads, &bytes).unwrap();
            assert!(max > mean && d.imbalance == max / mean, "{name}: {} for {sums:?}", d.imbalance);
            let moved = metrics::migrations(&before, b.owners());
            assert!(moved > 0, "{name}: nothing moved on a 4:1 map");
            assert_eq!((d.rebalanced, d.migrations), (true, moved), "{name}");
            assert_eq!(d.balanced_on.as_deref(), Some(&box_loads[..]), "{name}");
            let rcb_moves = |shadow: &[u32]| {
                let rcb = metrics::match_labels(shadow, &kway_rcb(&grid, &box_loads, 4).unwrap(), 4).unwrap();
                (0..grid.len()).filter(|&k| rcb[k] != shadow[k]).collect::<Vec<usize>>()
            };
            let uniform = kway_rcb(&grid, &vec![1.0; grid.len()], 4).unwrap();
            let shadowed = matches!(name, "pbs" | "pbs-cells" | "diffusion");
            assert_eq!(d.rcb_would_move, shadowed.then(|| rcb_moves(&uniform)), "{name}");
            assert!(!shadowed || !rcb_moves(&uniform).is_empty(), "the test needs RCB to move");
            // RCB and diffusion asked again on the same loads: a decision that moves nothing
            // says so (pbs's mapper, on balanced sums, does not ask).
            if name.starts_with("pbs") {
                continue;
            }
            let sums = metrics::charges(b.owners(), &box_loads, 4);
            assert!(matches!(b.observe(&sums, &sums).unwrap(), Step::NeedsBoxLoads), "{name}");
            let again = b.balance_on(&box_loads, &bytes).unwrap();
            assert_eq!((again.rebalanced, again.migrations), (false, 0), "{name}");
            assert!(again.balanced_on.is_none() && again.rcb_would_move.is_none(), "{name}");
        }
        let mut b = RankBalancer::new("rcb", grid, 4, "always", None).unwrap();
        for (measured, smoothed) in [([1.0; 4], vec![1.0; 3]), ([1.0, -1.0, 1.0, 1.0], vec![1.0; 4])] {
            assert!(b.observe(&measured, &smoothed).is_err(), "{measured:?} {smoothed:?}");
        }
        assert!(b.observe(&[1.0; 4], &[1.0, 1.0, -1.0, 1.0]).is_err());
        while !matches!(b.observe(&[4.0, 1.0, 1.0, 1.0], &[1.0; 4]).unwrap(), Step::NeedsBoxLoads) {}
        let short = vec![1.0; grid.len() - 1];
        let negative: Vec<f64> = (0..grid.len()).map(|k| if k == 3 { -1.0 } else { 1.0 }).collect();
        for (loads, sizes) in [(&box_loads, &short), (&box_loads, &negative), (&negative, &bytes)] {
            assert!(b.balance_on(loads, sizes).unwrap_err().contains("not finite and ≥ 0"));
        }
    }

    #[test]
    fn the_migration_bound_sheds_each_excess_with_the_densest_boxes() {
        // Rank 0: loads 4 + 2 + 2 = 8, rank 1: 2; mean 5, limit 1.2 → cap 6, excess 2.
        let owners = [0, 0, 0, 1];
        let loads = [4.0, 2.0, 2.0, 2.0];
        // Box 0 carries 4 for 100 bytes (0.04 per byte), box 1 2 for 10 (0.2), box 2 2 for 40.
        let bytes = [100.0, 10.0, 40.0, 7.0];
        assert_eq!(migration_bound(&owners, &loads, &bytes, 2, 1.2), 10.0);
        // Excess 3 at limit 1.0: box 1 whole (2 for 10), then half of box 2 (1 for 20).
        assert_eq!(migration_bound(&owners, &loads, &bytes, 2, 1.0), 30.0);
        // Load per byte, not load times bytes: box 0 (4 for 40) before box 1 (1 for 20), so a
        // quarter of box 0 sheds the excess of 1: 10 bytes.
        assert_eq!(migration_bound(&[0, 0, 1], &[4.0, 1.0, 3.0], &[40.0, 20.0, 5.0], 2, 1.0), 10.0);
        // Balanced enough: nothing needs to move.
        assert_eq!(migration_bound(&owners, &loads, &bytes, 2, 1.6), 0.0);
        // Every new partition under the limit moves at least the bound.
        let loads = [3.0, 1.0, 2.0, 2.0, 1.0, 3.0];
        let bytes = [5.0, 9.0, 2.0, 7.0, 3.0, 8.0];
        let owners = [0, 0, 0, 0, 1, 2];
        let bound = migration_bound(&owners, &loads, &bytes, 3, 1.1);
        let mut best = f64::INFINITY;
        for code in 0..3usize.pow(6) {
            let next: Vec<u32> = (0..6).map(|k| (code / 3usize.pow(k as u32) % 3) as u32).collect();
            if metrics::max_avg(&metrics::charges(&next, &loads, 3)) <= 1.1 {
                let moved: f64 = (0..6).filter(|&k| next[k] != owners[k]).map(|k| bytes[k]).sum();
                best = best.min(moved);
            }
        }
        assert!(bound > 0.0 && bound <= best, "bound {bound}, best {best}");
    }

    #[test]
    fn every_rank_owns_boxes_and_bad_sizes_are_named() {
        let grid = Grid::new(5, 3).unwrap();
        for name in BALANCES {
            for ranks in [1, 4, 15] {
                let b = RankBalancer::new(name, grid, ranks, "boulmier", None).unwrap();
                let mut counts = vec![0; ranks];
                b.owners().iter().for_each(|&o| counts[o as usize] += 1);
                assert!(counts.iter().all(|&c| c > 0), "{name} on {ranks} ranks: {counts:?}");
            }
            assert!(RankBalancer::new(name, grid, 16, "boulmier", None)
                .err()
                .unwrap()
                .contains("16 ranks for 15 boxes"));
            assert!(RankBalancer::new(name, grid, 0, "boulmier", None).is_err());
        }
        assert!(RankBalancer::new("metis", grid, 2, "boulmier", None)
            .err()
            .unwrap()
            .contains("pbs, pbs-cells, rcb, diffusion, static"));
        let mut b = RankBalancer::new("pbs", grid, 2, "boulmier", None).unwrap();
        let e = b.end_iteration(&mut LoadHistory::new(15), &[1.0; 14], &[1.0; 15]).unwrap_err();
        assert_eq!(e, "14 box loads for 15 boxes");
    }
}
