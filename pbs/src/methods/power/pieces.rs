//! Parts in pieces. A power cell is convex in the plane, but the boxes whose centres fall in a
//! thin cell need not touch, and such a part then runs as two or more separate blocks. After a
//! run, each piece but the main one of a part is handed to the neighbours by one weight shift,
//! kept only if fewer parts are in pieces, no part is left with no box, and no charge rises
//! above the largest one before.

use super::{hold_giants, PowerCells, NO_BOX};
use crate::assign::assign_on;
use crate::grid::{dist2, Grid};
use crate::metrics;
use crate::problem::Problem;
use crate::vcores::VCores;

/// Most weight shifts tried to mend one run's pieces (each is an assignment).
const MAX_TRIALS: usize = 24;

/// The pieces of the parts that are in pieces, smallest first: per piece, its part and boxes.
/// A part's main piece, which is not listed, is the one holding its giant box if it holds one,
/// else its largest. Also returns how many parts are in pieces.
fn pieces(grid: &Grid, owners: &[u32], giant_of: &[usize]) -> (usize, Vec<(usize, Vec<usize>)>) {
    let n = giant_of.len();
    let Some((component, pieces)) = metrics::pieces_if_split(grid, owners) else {
        return (0, Vec::new());
    };
    let mut count = vec![0usize; n];
    pieces.iter().for_each(|&(p, _)| count[p as usize] += 1);
    let broken = count.iter().filter(|&&c| c > 1).count();
    // The main piece of each part: its giant's, else its largest.
    let mut main = vec![u32::MAX; n];
    for (id, &(p, size)) in pieces.iter().enumerate() {
        let p = p as usize;
        if main[p] == u32::MAX || size > pieces[main[p] as usize].1 {
            main[p] = id as u32;
        }
    }
    for (p, &giant) in giant_of.iter().enumerate() {
        if giant != NO_BOX && owners[giant] as usize == p {
            main[p] = component[giant];
        }
    }
    let mut index = vec![usize::MAX; pieces.len()];
    let mut out: Vec<(usize, Vec<usize>)> = Vec::new();
    for (id, &(p, _)) in pieces.iter().enumerate() {
        if main[p as usize] != id as u32 {
            index[id] = out.len();
            out.push((p as usize, Vec::new()));
        }
    }
    for (k, &c) in component.iter().enumerate() {
        if index[c as usize] != usize::MAX {
            out[index[c as usize]].1.push(k);
        }
    }
    out.sort_by_key(|(p, boxes)| (boxes.len(), *p));
    (broken, out)
}

impl PowerCells {
    /// Hands pieces of parts to their neighbours while that keeps the balance (see the module
    /// documentation); a part whose pieces cannot be mended that way stays as it is.
    pub(super) fn mend_pieces(&mut self, problem: &Problem, vcores: &mut VCores) {
        // A run that took no step has not looked for giants yet.
        self.capacities(problem, vcores);
        let grid = *problem.grid();
        let mut trials = 0;
        let mut current = pieces(&grid, vcores.owners(), &self.run.giant_of);
        'mend: while trials < MAX_TRIALS {
            let (broken, list) = std::mem::take(&mut current);
            if broken == 0 {
                return;
            }
            let largest = vcores.charges().iter().copied().fold(0.0, f64::max);
            let empty = crate::metrics::empty_parts(vcores.owners(), vcores.len()).len();
            for (part, boxes) in list {
                if boxes.iter().any(|&k| self.run.held[k]) {
                    continue;
                }
                // The shifts that hand the whole piece over: the part's weight down by the
                // largest gap to a box's second-best vCore, or one of those vCores' weight up
                // until it beats the part on every box of the piece.
                let (positions, weights) = (vcores.positions(), vcores.weights());
                let power = |i: usize, k: usize| dist2(&grid.centre(k), &positions[i]) - weights[i];
                let a = vcores.assignment();
                let mut seconds: Vec<usize> = boxes.iter().map(|&k| a.second[k] as usize).collect();
                seconds.sort_unstable();
                seconds.dedup();
                seconds.retain(|&s| s < vcores.len());
                let lower = boxes.iter().map(|&k| a.gap[k]).fold(0.0, f64::max);
                let mut shifts = Vec::new();
                if lower.is_finite() {
                    shifts.push((part, -lower));
                }
                for &s in &seconds {
                    shifts.push((s, boxes.iter().map(|&k| power(s, k) - power(part, k)).fold(0.0, f64::max)));
                }
                for (v, shift) in shifts {
                    if trials == MAX_TRIALS {
                        return;
                    }
                    trials += 1;
                    #[cfg(test)]
                    {
                        self.scratch.trials += 1;
                    }
                    let shift = shift + shift.signum() * 1e-9 * (1.0 + shift.abs());
                    self.scratch.trial_w.clear();
                    self.scratch.trial_w.extend_from_slice(vcores.weights());
                    self.scratch.trial_w[v] += shift;
                    hold_giants(&grid, &self.run.giant_of, vcores.positions(), &mut self.scratch.trial_w);
                    assign_on(
                        problem.workers(),
                        &grid,
                        vcores.positions(),
                        &self.scratch.trial_w,
                        &mut self.scratch.trial,
                    );
                    let q = metrics::charges(&self.scratch.trial.owner, problem.loads(), vcores.len());
                    // A shift can hand a part's main piece over with its other pieces: a part
                    // with no box is not mended.
                    if q.iter().copied().fold(0.0, f64::max) > largest
                        || crate::metrics::empty_parts(&self.scratch.trial.owner, vcores.len()).len() > empty
                    {
                        continue;
                    }
                    let after = pieces(&grid, &self.scratch.trial.owner, &self.run.giant_of);
                    if after.0 < broken {
                        let trial_w = std::mem::take(&mut self.scratch.trial_w);
                        vcores.accept(problem, &trial_w, &mut self.scratch.trial, q);
                        self.scratch.trial_w = trial_w;
                        current = after;
                        continue 'mend;
                    }
                }
            }
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assign::assign_brute;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// From random sites and weights over random loads (with a heavy box now and then),
        /// mending never raises the largest charge nor leaves more parts in pieces or empty,
        /// every box keeps an owner, and every giant stays with its holder.
        #[test]
        fn mending_keeps_the_balance_and_never_breaks_more_parts(
            nx in 4usize..40, ny in 4usize..40, parts in 2usize..30, seed in 0u64..1000,
        ) {
            let grid = Grid::new(nx, ny).unwrap();
            prop_assume!(parts * 4 <= grid.len());
            let mut rng = crate::rng::SplitMix64::new(seed);
            let mut loads: Vec<f64> = (0..grid.len()).map(|_| rng.next_f64()).collect();
            if seed % 3 == 0 {
                loads[seed as usize % grid.len()] = 3.0 * grid.len() as f64 / parts as f64;
            }
            let problem = Problem::new(grid, &loads, parts).unwrap();
            let positions: Vec<_> =
                (0..parts).map(|_| [rng.next_f64() * nx as f64, rng.next_f64() * ny as f64, 0.5]).collect();
            let weights: Vec<f64> = (0..parts).map(|_| rng.next_f64() * 6.0).collect();
            let mut vcores = VCores::new(&problem, positions, weights).unwrap();
            let mut method = PowerCells::default();
            method.capacities(&problem, &vcores);
            let (broken, _) = pieces(&grid, vcores.owners(), &method.run.giant_of);
            let largest = vcores.charges().iter().copied().fold(0.0, f64::max);
            let empty = crate::metrics::empty_parts(vcores.owners(), parts).len();
            method.mend_pieces(&problem, &mut vcores);
            let (after, _) = pieces(&grid, vcores.owners(), &method.run.giant_of);
            prop_assert!(after <= broken);
            prop_assert!(crate::metrics::empty_parts(vcores.owners(), parts).len() <= empty);
            prop_assert_eq!(after, metrics::disconnected_parts(&grid, vcores.owners(), parts));
            prop_assert!(vcores.charges().iter().copied().fold(0.0, f64::max) <= largest);
            prop_assert_eq!(vcores.owners().len(), grid.len());
            for (i, &k) in method.run.giant_of.iter().enumerate() {
                if k != NO_BOX {
                    prop_assert_eq!(vcores.owners()[k] as usize, i);
                }
            }
        }
    }

    #[test]
    fn pieces_lists_every_piece_but_the_main_one() {
        let grid = Grid::new(5, 1).unwrap();
        // Part 0 in three pieces (sizes 1, 2, 1), part 1 in two.
        let owners = [0, 1, 0, 0, 1];
        let (broken, list) = pieces(&grid, &owners, &[NO_BOX, NO_BOX]);
        assert_eq!(broken, 2);
        assert_eq!(list, vec![(0, vec![0]), (1, vec![4])]);
        // With box 0 a giant of part 0, its piece is the main one.
        let (_, list) = pieces(&grid, &owners, &[0, NO_BOX]);
        assert_eq!(list, vec![(1, vec![4]), (0, vec![2, 3])]);
        assert_eq!(pieces(&grid, &[0, 0, 1, 1, 2], &[NO_BOX; 3]), (0, Vec::new()));
    }

    /// A cell that is a thin strip along the diagonal of a 16×16 map owns the diagonal's boxes
    /// alone: 16 pieces touching at their corners, each at the same power gap from the cells
    /// on either side, so that every shift hands the whole strip over and empties the part.
    /// Of the 30 shifts listed (two per stray piece), mending tries 24 and keeps none.
    #[test]
    fn mending_stops_after_twenty_four_shifts() {
        let n = 16usize;
        let grid = Grid::new(n, n).unwrap();
        let loads = vec![1.0; grid.len()];
        let problem = Problem::new(grid, &loads, 3).unwrap();
        let half = n as f64 / 2.0;
        // On the diagonal the strip beats both sides by `n² / 2 + w`; one box off it, it loses
        // by `n − n² / 2 − w`: the weight halfway between.
        let positions = vec![[half, half, 0.5], [0.0, n as f64, 0.5], [n as f64, 0.0, 0.5]];
        let mut v = VCores::new(&problem, positions, vec![half - half * n as f64, 0.0, 0.0]).unwrap();
        let diagonal: Vec<usize> = (0..n).map(|i| i * n + i).collect();
        assert_eq!((0..grid.len()).filter(|&k| v.owners()[k] == 0).collect::<Vec<_>>(), diagonal);
        let mut method = PowerCells::default();
        method.capacities(&problem, &v);
        let (broken, list) = pieces(&grid, v.owners(), &method.run.giant_of);
        assert_eq!((broken, list.len()), (1, n - 1));
        let before = v.clone();
        method.mend_pieces(&problem, &mut v);
        assert_eq!(method.scratch.trials, MAX_TRIALS);
        assert_eq!((v.owners(), v.weights()), (before.owners(), before.weights()));
    }

    /// What `mend_pieces` documents, the slow way, from `v` with `p`'s giants: while a part is
    /// in pieces, its pieces but the main one (the giant's, else the largest, the first of
    /// equals), smallest first, pieces holding a giant left out; per piece the shifts that
    /// hand it whole over (the part's weight down by the largest gap of its boxes, then each
    /// second-best vCore's up by the most the part beats it by on them, each by a hair more);
    /// the first trial (holders projected onto their giants, assigned box by box) that raises
    /// no charge above the largest, empties no part and leaves fewer parts in pieces is kept; at
    /// most 24 trials in all. The state it ends in.
    fn mend_by_hand(p: &PowerCells, problem: &Problem, v: &VCores) -> VCores {
        let (grid, loads, n) = (*problem.grid(), problem.loads(), v.len());
        let (mut now, mut trials) = (v.clone(), 0);
        let mut trial = crate::assign::Assignment::default();
        'mend: loop {
            let broken = metrics::disconnected_parts(&grid, now.owners(), n);
            if broken == 0 {
                break;
            }
            let (a, q) = (now.assignment(), now.charges());
            let largest = q.iter().copied().fold(0.0, f64::max);
            let empty = metrics::empty_parts(now.owners(), n).len();
            let (label, sizes) = metrics::connected_pieces(&grid, now.owners());
            let mut main = vec![None; n];
            for (id, &(part, size)) in sizes.iter().enumerate() {
                let part = part as usize;
                let giant = p.run.giant_of[part];
                if giant != NO_BOX && a.owner[giant] as usize == part {
                    main[part] = Some(label[giant] as usize);
                } else if main[part].is_none_or(|m: usize| size > sizes[m].1) {
                    main[part] = Some(id);
                }
            }
            let mut list: Vec<(usize, usize, Vec<usize>)> = (0..sizes.len())
                .filter(|&id| main[sizes[id].0 as usize] != Some(id))
                .map(|id| {
                    (sizes[id].1, sizes[id].0 as usize, (0..grid.len()).filter(|&k| label[k] as usize == id).collect())
                })
                .collect();
            list.sort_by_key(|x| (x.0, x.1));
            for (_, part, boxes) in list {
                if boxes.iter().any(|&k| p.run.held[k]) {
                    continue;
                }
                let power = |i: usize, k: usize| dist2(&grid.centre(k), &now.positions()[i]) - now.weights()[i];
                let mut shifts = Vec::new();
                let lower = boxes.iter().map(|&k| a.gap[k]).fold(0.0, f64::max);
                if lower < f64::INFINITY {
                    shifts.push((part, -lower));
                }
                let seconds: std::collections::BTreeSet<usize> = boxes.iter().map(|&k| a.second[k] as usize).collect();
                for s in seconds.into_iter().filter(|&s| s < n) {
                    shifts.push((s, boxes.iter().map(|&k| power(s, k) - power(part, k)).fold(0.0, f64::max)));
                }
                for (i, shift) in shifts {
                    if trials == 24 {
                        break 'mend;
                    }
                    trials += 1;
                    let mut w = now.weights().to_vec();
                    w[i] += shift + shift.signum() * 1e-9 * (1.0 + shift.abs());
                    hold_giants(&grid, &p.run.giant_of, now.positions(), &mut w);
                    assign_brute(&grid, now.positions(), &w, &mut trial);
                    let charges = metrics::charges(&trial.owner, loads, n);
                    if charges.iter().all(|&c| c <= largest)
                        && metrics::empty_parts(&trial.owner, n).len() <= empty
                        && metrics::disconnected_parts(&grid, &trial.owner, n) < broken
                    {
                        now = VCores::new(problem, now.positions().to_vec(), w).unwrap();
                        continue 'mend;
                    }
                }
            }
            break;
        }
        now
    }

    /// Mending ends where its documentation says, trial for trial, on 2,000 random states,
    /// most of them small (whole loads, so that sizes and charges tie; a heavy box in some, so
    /// that giants are held); about one in five starts with parts in pieces.
    #[test]
    fn pieces_are_mended_by_the_first_shift_within_the_rules() {
        let mut rng = crate::rng::SplitMix64::new(11);
        // States in pieces, mended whole, in part, by raising a neighbour, with giants.
        let mut seen = [0; 5];
        for case in 0..2000 {
            // Every tenth state larger, with more parts and more pieces.
            let grid = if case % 10 == 0 {
                Grid::new(16 + rng.below(24), 16 + rng.below(24)).unwrap()
            } else {
                Grid::new(4 + rng.below(9), 3 + rng.below(6)).unwrap()
            };
            let mut loads: Vec<f64> = (0..grid.len()).map(|_| rng.below(4) as f64).collect();
            if case % 3 == 0 {
                loads[rng.below(grid.len())] = 15.0 + rng.below(20) as f64;
            }
            let n = if case % 10 == 0 { 20 + rng.below(60) } else { (2 + rng.below(20)).min(grid.len() / 2) };
            let problem = Problem::new(grid, &loads, n).unwrap();
            let [nx, ny, _] = grid.dims();
            let positions: Vec<_> =
                (0..n).map(|_| [rng.next_f64() * nx as f64, rng.next_f64() * ny as f64, 0.5]).collect();
            let weights: Vec<f64> = (0..n).map(|_| 2.0 * rng.next_f64()).collect();
            let mut v = VCores::new(&problem, positions, weights).unwrap();
            let before = metrics::disconnected_parts(&grid, v.owners(), n);
            if before == 0 {
                continue;
            }
            let mut method = PowerCells::default();
            method.capacities(&problem, &v);
            let expected = mend_by_hand(&method, &problem, &v);
            let weights = v.weights().to_vec();
            method.mend_pieces(&problem, &mut v);
            assert_eq!(v.weights(), expected.weights(), "case {case}");
            assert_eq!(v.owners(), expected.owners(), "case {case}");
            let after = metrics::disconnected_parts(&grid, v.owners(), n);
            let raised = (0..n).any(|i| v.weights()[i] > weights[i] && method.run.giant_of[i] == NO_BOX);
            let cases = [true, after == 0, after > 0 && after < before, raised, method.run.held.contains(&true)];
            for (count, yes) in seen.iter_mut().zip(cases) {
                *count += usize::from(yes);
            }
        }
        assert!(seen.iter().all(|&x| x > 0), "{seen:?}");
    }
}
