//! PackStealLB (Freitas, Pilla, Santana, Castro and Cohen, JPDC 2021): a periodic remapper
//! that moves *packs* of tasks from overloaded threads to underloaded ones by work stealing.
//!
//! With `ω*` the mean thread load, `ε = ξ ω*` and the pack load `ω^Γ = δ ε` (the paper's
//! `ξ = 0.05`, `δ = 0.4`, so `ω^Γ = 0.02 ω*`):
//! - a **victim** (load ≥ `ω* + ε`) cuts its surplus into packs of about `ω^Γ` (at most
//!   `ω^Γ + γ`, `γ = ξ ω^Γ`), opening a new pack while its remaining load is over `ω* + ε`;
//! - a **thief** (load < `ω* − ω^Γ`) asks for `⌊(ω* − load) / ω^Γ⌋` packs, one steal
//!   message at a time: to one of the `top_k` most loaded threads, drawn at random, and,
//!   where that thread has no pack left, forwarded again, to any thread at random once the
//!   message has made `random_after` hops;
//! - a victim answers a steal with its first pack, whose boxes change owner.
//!
//! Three departures, for a grid code in shared memory. Packs are **spatially contiguous**:
//! a pack grows breadth-first from the victim's box farthest from its load centroid, through
//! the victim's boxes not packed yet that carry load, so a victim sheds its rim in compact
//! pieces (the paper fills packs in arbitrary task order, and its tasks all weigh something: a
//! box that weighs nothing balances nothing, and packs grown through such boxes swept whole
//! empty regions, 1,161 boxes in 11 packs on md's contraction at 16³ boxes and 64 parts, for
//! the balance a pack of loaded boxes gives; docs/balancers.md). Every thread knows every load from the start (the
//! paper's agents learn them from the messages' hints; here the loads are in one array). And
//! a thief refuses a pack that would take it over `ω* + ε`: a box may outweigh a pack here,
//! where the paper's tasks are all lighter than `ε`.
//! The protocol runs sequentially, its random draws from a seed: the result is deterministic.
//!
//! ```
//! use pbs::pack_steal::{pack_steal, PackSteal};
//! let grid = pbs::Grid::new(8, 8)?;
//! // Thread 0 owns the left half, whose boxes are three times heavier.
//! let loads: Vec<f64> = (0..64).map(|k| if k % 8 < 4 { 3.0 } else { 1.0 }).collect();
//! let mut owners: Vec<u32> = (0..64).map(|k| u32::from(k % 8 >= 4)).collect();
//! let moved = pack_steal(&grid, &loads, &mut owners, 2, &PackSteal::default(), 7)?;
//! assert!(moved.packs > 0);
//! let charges = pbs::metrics::charges(&owners, &loads, 2);
//! assert!(pbs::metrics::max_avg(&charges) < 1.06); // from 1.5
//! # Ok::<(), pbs::Error>(())
//! ```

use std::collections::VecDeque;

use crate::error::{Error, Result};
use crate::grid::Grid;
use crate::rng::SplitMix64;

/// Settings of [`pack_steal`] (defaults: the paper's).
#[derive(Debug, Clone, PartialEq)]
pub struct PackSteal {
    /// `ξ`: a thread is overloaded from `(1 + ξ) ω*` on.
    pub xi: f64,
    /// `δ`: a pack's load is `δ ξ ω*`.
    pub delta: f64,
    /// Steals go to one of this many most loaded threads, drawn at random.
    pub top_k: usize,
    /// Hops after which a steal message goes to any thread at random (`None`: a quarter of
    /// the threads, at least 1).
    pub random_after: Option<usize>,
}

impl Default for PackSteal {
    fn default() -> Self {
        PackSteal { xi: 0.05, delta: 0.4, top_k: 4, random_after: None }
    }
}

/// What one call of [`pack_steal`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackMoves {
    /// Packs that changed owner.
    pub packs: usize,
    /// Boxes that changed owner.
    pub boxes: usize,
    /// Steal messages sent, forwards included.
    pub messages: usize,
}

/// Moves packs of boxes from overloaded to underloaded threads in `owners` (one thread id in
/// `0..threads` per box), for box loads `loads`; random draws from `seed`. An error names a
/// wrong length, a bad load, an owner out of range or a bad setting.
pub fn pack_steal(
    grid: &Grid,
    loads: &[f64],
    owners: &mut [u32],
    threads: usize,
    settings: &PackSteal,
    seed: u64,
) -> Result<PackMoves> {
    // Rescaled at extreme scales (see `Problem`), so that the threads' sums stay finite.
    let problem = crate::Problem::new(*grid, loads, 1)?;
    let loads = problem.loads();
    let bad = |name: &'static str, value: String, reason: &'static str| Error::Parameter { name, value, reason };
    crate::problem::validate_owners(grid, owners, threads, crate::problem::Unit::Thread)?;
    if !(settings.xi > 0.0 && settings.xi < 1.0) {
        return Err(bad("xi", settings.xi.to_string(), "expected a fraction of the mean load in (0, 1)"));
    }
    if !(settings.delta > 0.0 && settings.delta <= 1.0) {
        return Err(bad("delta", settings.delta.to_string(), "expected a fraction of ξ in (0, 1]"));
    }
    if settings.top_k == 0 {
        return Err(bad("top_k", "0".into(), "steals need at least one candidate victim"));
    }
    let mut thread_load = vec![0.0; threads];
    for (k, &o) in owners.iter().enumerate() {
        thread_load[o as usize] += loads[k];
    }
    let mean = thread_load.iter().sum::<f64>() / threads as f64;
    let (epsilon, pack) = (settings.xi * mean, settings.delta * settings.xi * mean);
    let mut moves = PackMoves::default();
    if pack <= 0.0 || threads == 1 {
        return Ok(moves);
    }
    // Each victim's packs, first to be handed out first.
    let mut packs: Vec<VecDeque<Vec<u32>>> = vec![VecDeque::new(); threads];
    let mut packer = Packer { grid, stamp: vec![0; grid.len()], now: 0 };
    for t in 0..threads {
        if thread_load[t] >= mean + epsilon {
            let mine: Vec<u32> = (0..grid.len() as u32).filter(|&k| owners[k as usize] as usize == t).collect();
            packs[t] = packer.packs(&mine, loads, thread_load[t], mean, epsilon, pack * (1.0 + settings.xi));
        }
    }
    let mut steals: Vec<usize> =
        thread_load.iter().map(|&l| if l < mean - pack { ((mean - l) / pack).floor() as usize } else { 0 }).collect();
    let random_after = settings.random_after.unwrap_or((threads / 4).max(1));
    // A message that made this many hops without finding a pack is given up.
    let give_up = random_after + 2 * threads;
    let mut rng = SplitMix64::new(seed);
    // Thieves take turns, one steal each, until none has any left or no pack is left.
    while steals.iter().any(|&s| s > 0) && packs.iter().any(|p| !p.is_empty()) {
        for thief in 0..threads {
            if steals[thief] == 0 {
                continue;
            }
            steals[thief] -= 1;
            let mut hops = 0;
            loop {
                moves.messages += 1;
                let target = if hops >= random_after {
                    (thief + 1 + rng.below(threads - 1)) % threads
                } else {
                    most_loaded(&thread_load, thief, settings.top_k, &mut rng)
                };
                if let Some(p) = packs[target].pop_front() {
                    let load: f64 = p.iter().map(|&k| loads[k as usize]).sum();
                    if thread_load[thief] + load > mean + epsilon {
                        // Refused: the victim keeps it for a thief it fits.
                        packs[target].push_front(p);
                        break;
                    }
                    for &k in &p {
                        owners[k as usize] = thief as u32;
                    }
                    thread_load[target] -= load;
                    thread_load[thief] += load;
                    moves.packs += 1;
                    moves.boxes += p.len();
                    break;
                }
                hops += 1;
                if hops > give_up {
                    break;
                }
            }
        }
    }
    Ok(moves)
}

/// One of the `k` most loaded threads other than `thief` (ties by id), drawn at random.
fn most_loaded(thread_load: &[f64], thief: usize, k: usize, rng: &mut SplitMix64) -> usize {
    let mut others: Vec<usize> = (0..thread_load.len()).filter(|&t| t != thief).collect();
    others.sort_by(|&a, &b| thread_load[b].total_cmp(&thread_load[a]).then(a.cmp(&b)));
    others[rng.below(k.min(others.len()))]
}

/// Builds a victim's packs by flood fills through its boxes, with a stamp per box so that
/// nothing is cleared between victims.
struct Packer<'g> {
    grid: &'g Grid,
    stamp: Vec<u32>,
    now: u32,
}

impl Packer<'_> {
    /// The packs of a victim owning `mine` (its load `load`): while what it keeps is over
    /// `mean + epsilon`, a pack grows breadth-first through boxes that carry load, from the
    /// unpacked one farthest from the victim's load centroid, until the next box would take it
    /// over `cap`; a box that would leave the victim under `mean` is not packed.
    fn packs(
        &mut self,
        mine: &[u32],
        loads: &[f64],
        load: f64,
        mean: f64,
        epsilon: f64,
        cap: f64,
    ) -> VecDeque<Vec<u32>> {
        let (member, packed) = (self.now + 1, self.now + 2);
        self.now += 2;
        mine.iter().for_each(|&k| self.stamp[k as usize] = member);
        let centre = centroid(self.grid, mine, loads);
        let distance = |k: u32| {
            let [i, j, l] = self.grid.coords(k as usize);
            let d = [i as f64 - centre[0], j as f64 - centre[1], l as f64 - centre[2]];
            d[0] * d[0] + d[1] * d[1] + d[2] * d[2]
        };
        // Seeds farthest first (ties by index): the rim before the core.
        // Boxes that weigh nothing are neither seeds nor packed: they stay with the victim.
        let mut seeds: Vec<u32> = mine.iter().copied().filter(|&k| loads[k as usize] > 0.0).collect();
        seeds.sort_by(|&a, &b| distance(b).total_cmp(&distance(a)).then(a.cmp(&b)));
        let mut seeds = seeds.into_iter();
        let (mut kept, mut packs) = (load, VecDeque::new());
        let mut queue = VecDeque::new();
        'packs: while kept > mean + epsilon {
            let Some(seed) = seeds.by_ref().find(|&k| self.stamp[k as usize] == member) else { break };
            let (mut pack, mut pack_load) = (Vec::new(), 0.0);
            queue.clear();
            queue.push_back(seed as usize);
            self.stamp[seed as usize] = packed;
            while let Some(k) = queue.pop_front() {
                let w = loads[k];
                if kept - w < mean || (!pack.is_empty() && pack_load + w > cap) {
                    // Not this box: it stays with the victim, to be packed later if it can.
                    self.stamp[k] = member;
                    if pack.is_empty() {
                        break 'packs;
                    }
                    continue;
                }
                pack.push(k as u32);
                pack_load += w;
                kept -= w;
                let (stamp, queue) = (&mut self.stamp, &mut queue);
                self.grid.for_each_neighbour(k, |n| {
                    if stamp[n] == member && loads[n] > 0.0 {
                        stamp[n] = packed;
                        queue.push_back(n);
                    }
                });
            }
            // Boxes queued but not reached go back to the victim's unpacked boxes.
            for &k in &queue {
                self.stamp[k] = member;
            }
            packs.push_back(pack);
        }
        packs
    }
}

/// Load-weighted centroid of `boxes` (the plain one if they weigh nothing).
fn centroid(grid: &Grid, boxes: &[u32], loads: &[f64]) -> [f64; 3] {
    let total: f64 = boxes.iter().map(|&k| loads[k as usize]).sum();
    let mut c = [0.0; 3];
    for &k in boxes {
        let w = if total > 0.0 { loads[k as usize] / total } else { 1.0 / boxes.len() as f64 };
        let [i, j, l] = grid.coords(k as usize);
        c[0] += w * i as f64;
        c[1] += w * j as f64;
        c[2] += w * l as f64;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics;
    use proptest::prelude::*;

    #[test]
    fn bad_input_is_refused() {
        let grid = Grid::new(4, 4).unwrap();
        let loads = vec![1.0; 16];
        let run =
            |owners: &mut [u32], threads, settings: &PackSteal| pack_steal(&grid, &loads, owners, threads, settings, 1);
        let ok = PackSteal::default();
        assert!(run(&mut [0; 15], 2, &ok).is_err());
        assert!(run(&mut [0; 16], 0, &ok).is_err());
        let e = run(&mut [2; 16], 2, &ok).unwrap_err();
        assert!(e.to_string().contains("box 0 owned by thread 2"), "{e}");
        assert!(run(&mut [0; 16], 2, &PackSteal { xi: 0.0, ..ok.clone() }).is_err());
        assert!(run(&mut [0; 16], 2, &PackSteal { delta: 1.5, ..ok.clone() }).is_err());
        assert!(run(&mut [0; 16], 2, &PackSteal { top_k: 0, ..ok.clone() }).is_err());
        let mut nan = loads.clone();
        nan[5] = f64::NAN;
        assert!(pack_steal(&grid, &nan, &mut [0; 16], 2, &ok, 1).is_err());
    }

    /// 40 × 40 unit boxes, thread 0 owning 1,000 and thread 1 600: ω* = 800, ε = 40 and
    /// packs of ω^Γ = 16 boxes. The victim packs its surplus while it keeps over 840 (ten
    /// packs); the thief wants ⌊200 / 16⌋ = 12 and takes all ten, one message each.
    #[test]
    fn packs_weigh_delta_xi_of_the_mean_and_the_surplus_over_epsilon_is_shed() {
        let grid = Grid::new(40, 40).unwrap();
        let mut owners: Vec<u32> = (0..1600).map(|k| u32::from(k >= 1000)).collect();
        let moves = pack_steal(&grid, &[1.0; 1600], &mut owners, 2, &PackSteal::default(), 5).unwrap();
        assert_eq!(moves, PackMoves { packs: 10, boxes: 160, messages: 10 });
        assert_eq!(metrics::charges(&owners, &[1.0; 1600], 2), [840.0, 760.0]);
        // Three threads (ω* = 800 again): a thief exactly ω^Γ under the mean asks for nothing
        // (it would end over it); one 24 under asks for one pack, taking turns with one 176
        // under, which asks for 11 and gets the other nine.
        let grid = Grid::new(40, 60).unwrap();
        for (second, charges) in [(784, [840.0, 784.0, 776.0]), (776, [840.0, 792.0, 768.0])] {
            let mut owners: Vec<u32> =
                (0..2400).map(|k| u32::from(k >= 1000) + u32::from(k >= 1000 + second)).collect();
            let moves = pack_steal(&grid, &[1.0; 2400], &mut owners, 3, &PackSteal::default(), 5).unwrap();
            assert_eq!((moves.packs, moves.boxes), (10, 160), "{second}");
            assert_eq!(metrics::charges(&owners, &[1.0; 2400], 3), charges, "{second}");
        }
        // The bounds of the settings are exclusive where the paper's formulas need them.
        for (xi, delta) in [(1.0, 0.4), (0.05, 0.0)] {
            let bad = PackSteal { xi, delta, ..PackSteal::default() };
            assert!(pack_steal(&grid, &[1.0; 2400], &mut [0; 2400], 2, &bad, 5).is_err(), "xi {xi}, delta {delta}");
        }
    }

    /// Boxes that weigh nothing stay with their victim: thread 0 owns rows 0–24 of 40 × 40 boxes,
    /// its first five rows (farthest from its load, where packs start) weighing nothing. Its 800
    /// against thread 1's 600 (ω* = 700, ε = 35, packs of 14): five packs of 14 loaded boxes
    /// go, where packs grown through the empty rows took them along.
    #[test]
    fn boxes_that_weigh_nothing_are_not_packed() {
        let grid = Grid::new(40, 40).unwrap();
        let loads: Vec<f64> = (0..1600).map(|k| if k < 200 { 0.0 } else { 1.0 }).collect();
        let before: Vec<u32> = (0..1600).map(|k| u32::from(k >= 1000)).collect();
        let mut owners = before.clone();
        let moves = pack_steal(&grid, &loads, &mut owners, 2, &PackSteal::default(), 5).unwrap();
        assert_eq!((moves.packs, moves.boxes), (5, 70));
        assert_eq!(metrics::charges(&owners, &loads, 2), [730.0, 670.0]);
        assert!((0..1600).all(|k| owners[k] == before[k] || loads[k] > 0.0));
    }

    /// With one candidate victim (`top_k` 1) every steal message finds its pack at once; the
    /// victim need not be thread 0.
    #[test]
    fn with_one_candidate_each_steal_is_one_message_to_the_most_loaded() {
        let grid = Grid::new(40, 60).unwrap();
        // Threads 0, 1, 2 own 616, 784 and 1,000 boxes.
        let mut owners: Vec<u32> = (0..2400).map(|k| u32::from(k >= 616) + u32::from(k >= 1400)).collect();
        let settings = PackSteal { top_k: 1, ..PackSteal::default() };
        let moves = pack_steal(&grid, &[1.0; 2400], &mut owners, 3, &settings, 5).unwrap();
        assert_eq!(moves, PackMoves { packs: 10, boxes: 160, messages: 10 });
        assert_eq!(metrics::charges(&owners, &[1.0; 2400], 3), [776.0, 784.0, 840.0]);
    }

    /// A victim sheds its rim farthest from its centroid first: thread 0 owns the upper
    /// 20 × 10 boxes at 1.2 (ω* = 220, packs of three boxes), and its three packs grow from
    /// three of its four corners, equally far from the centre, taken by index.
    #[test]
    fn the_packs_grow_from_the_corners_farthest_from_the_centroid() {
        let grid = Grid::new(20, 20).unwrap();
        let loads: Vec<f64> = (0..400).map(|k| if k < 200 { 1.2 } else { 1.0 }).collect();
        let mut owners: Vec<u32> = (0..400).map(|k| u32::from(k >= 200)).collect();
        let moves = pack_steal(&grid, &loads, &mut owners, 2, &PackSteal::default(), 5).unwrap();
        assert_eq!(moves, PackMoves { packs: 3, boxes: 9, messages: 3 });
        // Each pack a corner and its two neighbours: boxes 0, 19 and 180 (not 199).
        let moved: Vec<usize> = (0..200).filter(|&k| owners[k] == 1).collect();
        assert_eq!(moved, [0, 1, 18, 19, 20, 39, 160, 180, 181]);
    }

    /// Two victims side by side each shed their own surplus, in packs of their own boxes
    /// only: 40 × 60 unit boxes, threads 0 and 1 owning 1,000 each (adjacent along a row),
    /// thread 2 the last 400.
    #[test]
    fn adjacent_victims_pack_only_their_own_boxes() {
        let grid = Grid::new(40, 60).unwrap();
        let before: Vec<u32> = (0..2400).map(|k| u32::from(k >= 1000) + u32::from(k >= 2000)).collect();
        let mut owners = before.clone();
        let moves = pack_steal(&grid, &[1.0; 2400], &mut owners, 3, &PackSteal::default(), 5).unwrap();
        assert_eq!((moves.packs, moves.boxes), (20, 320));
        assert_eq!(metrics::charges(&owners, &[1.0; 2400], 3), [840.0, 840.0, 720.0]);
        assert!(owners.iter().zip(&before).all(|(&now, &then)| now == then || now == 2), "only the thief gains");
    }

    /// A thief refuses a pack that would take it over ω* + ε: the victim's boxes each weigh
    /// 100 (ω* = 150, ε = 7.5), and each thief (at 70 and 80) would end at 170 or 180 with
    /// one. Nothing moves, and every steal is spent asking.
    #[test]
    fn a_pack_that_would_overload_its_thief_is_refused() {
        let grid = Grid::new(5, 1).unwrap();
        let loads = [100.0, 100.0, 100.0, 70.0, 80.0];
        let mut owners = [0, 0, 0, 1, 2];
        let moves = pack_steal(&grid, &loads, &mut owners, 3, &PackSteal::default(), 5).unwrap();
        assert_eq!((moves.packs, owners), (0, [0, 0, 0, 1, 2]));
        // ⌊(150 − 70) / 3⌋ + ⌊(150 − 80) / 3⌋ steals, each at least one message.
        assert!(moves.messages >= 26 + 23, "{moves:?}");
    }

    /// Along a strip the farthest box is an end: the light end, away from the heavy half that
    /// pulls the centroid. A victim of 20 boxes in a line (10 at 2, 10 at 1; ω* = 25, packs
    /// of one box) sheds four from its light end, along x on a 2D grid and along z on a 3D one.
    #[test]
    fn along_a_strip_the_light_end_goes_first() {
        // 2D: the victim is row 0 of 20 × 2, heavy on the left.
        let grid = Grid::new(20, 2).unwrap();
        let loads: Vec<f64> = (0..40).map(|k| if k < 10 { 2.0 } else { 1.0 }).collect();
        let mut owners: Vec<u32> = (0..40).map(|k| u32::from(k >= 20)).collect();
        pack_steal(&grid, &loads, &mut owners, 2, &PackSteal::default(), 5).unwrap();
        assert_eq!((0..20).filter(|&k| owners[k] == 1).collect::<Vec<_>>(), [16, 17, 18, 19]);
        // 3D: 1 × 2 × 20, the victim the boxes of j = 0 (k = 2 l), heavy from l = 10 up.
        let grid = Grid::new_3d(1, 2, 20).unwrap();
        let loads: Vec<f64> = (0..40).map(|k| if k % 2 == 1 || k < 20 { 1.0 } else { 2.0 }).collect();
        let mut owners: Vec<u32> = (0..40).map(|k| (k % 2) as u32).collect();
        pack_steal(&grid, &loads, &mut owners, 2, &PackSteal::default(), 5).unwrap();
        assert_eq!((0..40).filter(|&k| k % 2 == 0 && owners[k] == 1).collect::<Vec<_>>(), [0, 2, 4, 6]);
    }

    #[test]
    fn the_centroid_is_load_weighted_and_plain_without_load() {
        let grid = Grid::new_3d(4, 4, 2).unwrap();
        // Boxes (0, 0, 0), (3, 0, 0) and (3, 3, 1), weighing 1, 3 and 4.
        let boxes = [0, 3, 31];
        assert_eq!(grid.coords(31), [3, 3, 1]);
        let mut loads = vec![0.0; 32];
        (loads[0], loads[3], loads[31]) = (1.0, 3.0, 4.0);
        assert_eq!(centroid(&grid, &boxes, &loads), [21.0 / 8.0, 1.5, 0.5]);
        let plain = centroid(&grid, &boxes, &[0.0; 32]);
        assert!(
            (plain[0] - 2.0).abs() < 1e-12 && (plain[1] - 1.0).abs() < 1e-12 && (plain[2] - 1.0 / 3.0).abs() < 1e-12
        );
    }

    #[test]
    fn a_balanced_mapping_is_left_alone() {
        let grid = Grid::new(8, 8).unwrap();
        let mut owners: Vec<u32> = (0..64).map(|k| (k / 16) as u32).collect();
        let before = owners.clone();
        let moves = pack_steal(&grid, &[1.0; 64], &mut owners, 4, &PackSteal::default(), 3).unwrap();
        assert_eq!((moves, owners), (PackMoves::default(), before));
    }

    #[test]
    fn one_overloaded_thread_feeds_the_others_with_contiguous_packs_from_its_rim() {
        // Thread 0 owns the left quarter, eight times heavier; threads 1–3 the rest.
        let grid = Grid::new(16, 16).unwrap();
        let loads: Vec<f64> = (0..256).map(|k| if k % 16 < 4 { 8.0 } else { 1.0 }).collect();
        let mut owners: Vec<u32> = (0..256).map(|k| (k % 16 / 4) as u32).collect();
        let before = owners.clone();
        let moves = pack_steal(&grid, &loads, &mut owners, 4, &PackSteal::default(), 11).unwrap();
        let charges = metrics::charges(&owners, &loads, 4);
        let (mean, max) = (charges.iter().sum::<f64>() / 4.0, charges.iter().copied().fold(0.0, f64::max));
        // Done when no thread is over (1 + ξ) ω* by more than a box's load.
        assert!(max <= 1.05 * mean + 8.0, "{charges:?}");
        assert!(metrics::max_avg(&charges) < 1.1, "{charges:?} from 2.9");
        // Only thread 0 gave boxes away, and each pack is one piece of at most ω^Γ (1 + ξ).
        let mut pieces: std::collections::BTreeMap<(u32, u32), Vec<usize>> = Default::default();
        for k in 0..256 {
            if owners[k] != before[k] {
                assert_eq!(before[k], 0);
                pieces.entry((before[k], owners[k])).or_default().push(k);
            }
        }
        assert_eq!(moves.boxes, pieces.values().map(Vec::len).sum::<usize>());
        // 8-load boxes, packs of 0.02 ω* = 8.3: one box each, far from the thread's centroid.
        assert!(moves.packs >= 3);
        let moved_columns: Vec<usize> = pieces.values().flatten().map(|&k| k % 16).collect();
        let near_rim = moved_columns.iter().filter(|&&i| i == 0 || i == 3).count();
        assert!(near_rim * 2 >= moved_columns.len(), "{moved_columns:?}");
    }

    #[test]
    fn packs_are_connected_and_never_exceed_their_cap() {
        let grid = Grid::new(12, 12).unwrap();
        let loads: Vec<f64> = (0..144).map(|k| 0.1 + (k % 7) as f64 * 0.05).collect();
        let mine: Vec<u32> = (0..144).collect();
        let total: f64 = loads.iter().sum();
        let mut packer = Packer { grid: &grid, stamp: vec![0; 144], now: 0 };
        let (mean, epsilon, cap) = (total / 4.0, 0.05 * total / 4.0, 2.0);
        let packs = packer.packs(&mine, &loads, total, mean, epsilon, cap);
        let mut seen = std::collections::HashSet::new();
        let mut kept = total;
        for p in &packs {
            let load: f64 = p.iter().map(|&k| loads[k as usize]).sum();
            assert!(!p.is_empty() && load <= cap + 1e-12, "{load}");
            // The pack is part 0, every other box a part of its own (always in one piece).
            let mut owners: Vec<u32> = (1..=144).collect();
            p.iter().for_each(|&k| owners[k as usize] = 0);
            assert_eq!(metrics::disconnected_parts(&grid, &owners, 145), 0, "pack {p:?} in pieces");
            assert!(p.iter().all(|k| seen.insert(*k)), "a box in two packs");
            kept -= load;
        }
        assert!(kept >= mean && kept <= mean + epsilon + cap, "kept {kept}, mean {mean}");
    }

    #[test]
    fn a_victims_packs_hold_its_own_boxes_only_after_another_victims_stamps() {
        // The left half is a victim with nothing to give (its boxes stay stamped as its
        // members); the right half then gives half its load, from seeds on the shared border.
        let grid = Grid::new(12, 12).unwrap();
        let loads = vec![1.0; 144];
        let (left, right): (Vec<u32>, Vec<u32>) = (0..144).partition(|k| k % 12 < 6);
        let mut packer = Packer { grid: &grid, stamp: vec![0; 144], now: 0 };
        assert!(packer.packs(&left, &loads, 72.0, 72.0, 1.0, 8.0).is_empty());
        let packs = packer.packs(&right, &loads, 72.0, 36.0, 1.0, 8.0);
        let packed: Vec<u32> = packs.into_iter().flatten().collect();
        assert!(packed.len() >= 30, "{packed:?}");
        assert!(packed.iter().all(|k| k % 12 >= 6), "a box of the left half packed: {packed:?}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn stealing_moves_boxes_from_overloaded_threads_and_is_deterministic(
            nx in 2usize..24, ny in 2usize..24, threads in 2usize..9, seed in 0u64..500,
        ) {
            let grid = Grid::new(nx, ny).unwrap();
            let mut rng = SplitMix64::new(seed);
            let loads: Vec<f64> = (0..grid.len()).map(|_| rng.next_f64() * rng.next_f64()).collect();
            let start: Vec<u32> = (0..grid.len()).map(|k| (k * threads / grid.len()) as u32).collect();
            let mut owners = start.clone();
            let moves = pack_steal(&grid, &loads, &mut owners, threads, &PackSteal::default(), seed).unwrap();
            let mut again = start.clone();
            pack_steal(&grid, &loads, &mut again, threads, &PackSteal::default(), seed).unwrap();
            prop_assert_eq!(&owners, &again);
            let before = metrics::charges(&start, &loads, threads);
            let after = metrics::charges(&owners, &loads, threads);
            let mean = before.iter().sum::<f64>() / threads as f64;
            let changed = (0..grid.len()).filter(|&k| owners[k] != start[k]).count();
            prop_assert_eq!(changed, moves.boxes);
            for k in 0..grid.len() {
                if owners[k] != start[k] {
                    // Givers were victims; takers were thieves.
                    prop_assert!(before[start[k] as usize] >= 1.05 * mean - 1e-9);
                    prop_assert!(before[owners[k] as usize] < mean);
                }
            }
            // No victim is left under the mean, and the heaviest thread got no heavier.
            let givers = (0..threads).filter(|&t| (0..grid.len()).any(|k| start[k] as usize == t && owners[k] != start[k]));
            for t in givers {
                prop_assert!(after[t] >= mean - 1e-9, "thread {} left at {} < {}", t, after[t], mean);
            }
            let max = |c: &[f64]| c.iter().copied().fold(0.0, f64::max);
            prop_assert!(max(&after) <= max(&before) + 1e-9);
            for t in 0..threads {
                if after[t] > before[t] {
                    prop_assert!(after[t] <= 1.05 * mean + 1e-9, "thief {} took {} > (1 + ξ) ω*", t, after[t]);
                }
            }
        }
    }
}
