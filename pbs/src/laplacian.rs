//! The cell graph's weighted Laplacian — the Hessian of the power-cell balance problem — and
//! a conjugate-gradient solver for it.
//!
//! Raising vCore `j`'s weight by `dw` moves the boundary between cells `i` and `j` by
//! `dw / (2 d_ij)` (with `d_ij` the distance between the vCores), so `i` loses
//! `dw · ρ_ij / (2 d_ij)`, where `ρ_ij` is the load per unit length along that boundary. The
//! Jacobian of the charges is therefore `J = L` with `L_ij = −ρ_ij/(2 d_ij)` and
//! `L_ii = −Σ_j L_ij`: a graph Laplacian. On a grid, the boxes whose gap to their second-best
//! vCore is below `2 d_ij` form the one-box-thick layer on each side of the boundary, so
//! `ρ_ij ≈ (load of both layers) / 2`.

use crate::assign::{Assignment, NONE};
use crate::forces::MIN_DISTANCE;
use crate::grid::{dist2, Point};

/// Sparse symmetric Laplacian of the cell graph plus a diagonal regularisation.
#[derive(Debug, Clone, Default)]
pub struct CellLaplacian {
    /// For each vCore, `(neighbour, coupling)` with coupling `ρ/(2d) > 0`.
    pub edges: Vec<Vec<(u32, f64)>>,
    /// Row sums of the couplings (`L_ii`).
    pub degree: Vec<f64>,
    /// Scratch of [`CellLaplacian::build`]: pairs of vCores met, by a hash of the pair.
    pairs: Vec<Pair>,
}

/// A pair of vCores (`lo << 32 | hi`), their distance, and each one's place in the other's
/// neighbour list once listed.
#[derive(Debug, Clone, Copy)]
struct Pair {
    key: u64,
    d: f64,
    slots: Option<(usize, usize)>,
}

/// Entries of the pair table: a power of two, well above the pairs of a diagram (about three
/// per vCore) at a few hundred vCores; a pair that finds its entry taken is measured again.
/// The tests use a small table, so that pairs often do.
const PAIR_TABLE: usize = if cfg!(test) { 8 } else { 1024 };

impl CellLaplacian {
    /// Estimates the Laplacian from an assignment; boxes with `skip[k]` set do not count.
    pub fn build(&mut self, positions: &[Point], loads: &[f64], a: &Assignment, skip: &[bool]) {
        let n = positions.len();
        self.edges.resize_with(n, Vec::new);
        self.edges.truncate(n);
        for e in &mut self.edges {
            e.clear();
        }
        // Neighbouring boxes mostly share the pair of vCores they lie between (either side
        // of the boundary: the coupling is symmetric), and a row of boxes meets the same few
        // pairs again and again. Keep each pair's distance and where it sits in both
        // neighbour lists (a small table by pair), rather than take a square root and search
        // two lists per box; a neighbour is listed at its first box in the boundary layers.
        self.pairs.clear();
        self.pairs.resize(PAIR_TABLE, Pair { key: u64::MAX, d: 0.0, slots: None });
        let (mut pair, mut at) = (u64::MAX, 0);
        for (k, &q) in loads.iter().enumerate() {
            let (o, s) = (a.owner[k], a.second[k]);
            let (lo, hi) = (o.min(s), o.max(s));
            let key = (u64::from(lo) << 32) | u64::from(hi);
            if key != pair {
                pair = key;
                at = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - PAIR_TABLE.trailing_zeros())) as usize;
                if self.pairs[at].key != key {
                    let d = if s == NONE {
                        f64::INFINITY
                    } else {
                        dist2(&positions[lo as usize], &positions[hi as usize]).sqrt().max(MIN_DISTANCE)
                    };
                    self.pairs[at] = Pair { key, d, slots: None };
                }
            }
            let d = self.pairs[at].d;
            if (a.gap[k] < 2.0 * d) & (q != 0.0) & !skip[k] {
                let (lo, hi) = (lo as usize, hi as usize);
                let edges = &mut self.edges;
                let (i, j) = *self.pairs[at]
                    .slots
                    .get_or_insert_with(|| (slot(&mut edges[lo], hi as u32), slot(&mut edges[hi], lo as u32)));
                let c = q / (4.0 * d);
                self.edges[lo][i].1 += c;
                self.edges[hi][j].1 += c;
            }
        }
        self.degree.clear();
        self.degree.extend(self.edges.iter().map(|e| e.iter().map(|x| x.1).sum::<f64>()));
    }

    /// `y = (L + diag(reg)) x`.
    fn apply(&self, reg: &[f64], x: &[f64], y: &mut [f64]) {
        for i in 0..x.len() {
            let mut v = (self.degree[i] + reg[i]) * x[i];
            for &(j, c) in &self.edges[i] {
                v -= c * x[j as usize];
            }
            y[i] = v;
        }
    }

    /// Solves `(L + diag(reg)) x = b` by Jacobi-preconditioned conjugate gradients, to a
    /// relative residual of `rtol` or `max_iter` iterations. `reg` must be positive wherever
    /// the degree is zero.
    pub fn solve(&self, reg: &[f64], b: &[f64], rtol: f64, max_iter: usize) -> Vec<f64> {
        let n = b.len();
        let inv: Vec<f64> = (0..n).map(|i| 1.0 / (self.degree[i] + reg[i])).collect();
        let mut x = vec![0.0; n];
        let mut r = b.to_vec();
        let mut z: Vec<f64> = r.iter().zip(&inv).map(|(r, m)| r * m).collect();
        let mut p = z.clone();
        let mut ap = vec![0.0; n];
        let mut rz: f64 = r.iter().zip(&z).map(|(a, b)| a * b).sum();
        let target = rtol * b.iter().map(|v| v * v).sum::<f64>().sqrt();
        for _ in 0..max_iter {
            if r.iter().map(|v| v * v).sum::<f64>().sqrt() <= target {
                break;
            }
            self.apply(reg, &p, &mut ap);
            let pap: f64 = p.iter().zip(&ap).map(|(a, b)| a * b).sum();
            // Zero or NaN curvature: the direction is exhausted.
            if pap.is_nan() || pap <= 0.0 {
                break;
            }
            let alpha = rz / pap;
            for i in 0..n {
                x[i] += alpha * p[i];
                r[i] -= alpha * ap[i];
                z[i] = r[i] * inv[i];
            }
            let rz_new: f64 = r.iter().zip(&z).map(|(a, b)| a * b).sum();
            let beta = rz_new / rz;
            rz = rz_new;
            for i in 0..n {
                p[i] = z[i] + beta * p[i];
            }
        }
        x
    }
}

/// Where `j` sits in `list`, appended with a zero coupling if absent.
fn slot(list: &mut Vec<(u32, f64)>, j: u32) -> usize {
    list.iter().position(|e| e.0 == j).unwrap_or_else(|| {
        list.push((j, 0.0));
        list.len() - 1
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The build box by box, as it was first written: every box in the boundary layers adds
    /// its share to both neighbour lists at once.
    fn build_box_by_box(positions: &[Point], loads: &[f64], a: &Assignment, skip: &[bool]) -> CellLaplacian {
        let mut edges = vec![Vec::new(); positions.len()];
        for (k, &q) in loads.iter().enumerate() {
            let (o, s) = (a.owner[k], a.second[k]);
            if q == 0.0 || s == NONE || skip[k] {
                continue;
            }
            let d = dist2(&positions[o as usize], &positions[s as usize]).sqrt().max(MIN_DISTANCE);
            if a.gap[k] < 2.0 * d {
                for (list, j) in [(o, s), (s, o)] {
                    let list: &mut Vec<(u32, f64)> = &mut edges[list as usize];
                    match list.iter_mut().find(|e| e.0 == j) {
                        Some(e) => e.1 += q / (4.0 * d),
                        None => list.push((j, q / (4.0 * d))),
                    }
                }
            }
        }
        let degree = edges.iter().map(|e: &Vec<(u32, f64)>| e.iter().map(|x| x.1).sum()).collect();
        CellLaplacian { edges, degree, ..Default::default() }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Runs of boxes sharing a pair give the same couplings, bit for bit and in the same
        /// order, as adding box by box.
        #[test]
        fn runs_give_the_box_by_box_couplings(
            nx in 1usize..40, ny in 1usize..40, sites in 1usize..12, seed in 0u64..1000,
        ) {
            let grid = crate::Grid::new(nx, ny).unwrap();
            let mut rng = crate::rng::SplitMix64::new(seed);
            let mut unit = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            let positions: Vec<Point> = (0..sites).map(|_| [unit() * nx as f64, unit() * ny as f64, 0.5]).collect();
            let weights: Vec<f64> = (0..sites).map(|_| unit() * 20.0).collect();
            let loads: Vec<f64> = (0..grid.len()).map(|_| if unit() < 0.2 { 0.0 } else { unit() }).collect();
            let skip: Vec<bool> = (0..grid.len()).map(|_| unit() < 0.1).collect();
            let mut a = Assignment::default();
            crate::assign::assign(&grid, &positions, &weights, &mut a);
            let mut l = CellLaplacian::default();
            l.build(&positions, &loads, &a, &skip);
            let want = build_box_by_box(&positions, &loads, &a, &skip);
            prop_assert_eq!(&l.edges, &want.edges);
            prop_assert_eq!(&l.degree, &want.degree);
        }
    }

    #[test]
    fn solves_a_path_graph() {
        // 0 — 1 — 2 with unit couplings plus a small regularisation.
        let l = CellLaplacian {
            edges: vec![vec![(1, 1.0)], vec![(0, 1.0), (2, 1.0)], vec![(1, 1.0)]],
            degree: vec![1.0, 2.0, 1.0],
            ..Default::default()
        };
        let reg = [1e-9; 3];
        let b = [1.0, 0.0, -1.0];
        let x = l.solve(&reg, &b, 1e-12, 100);
        let mut y = [0.0; 3];
        l.apply(&reg, &x, &mut y);
        for i in 0..3 {
            assert!((y[i] - b[i]).abs() < 1e-6, "{x:?} -> {y:?}");
        }
        assert!((x[0] - x[2] - 2.0).abs() < 1e-6);
    }

    /// Boxes 0 — 1 coupled (unit coupling, unit regularisation), boxes 2 and 3 alone with
    /// diagonals 11 and 1001; `b` excites the pair's (1, 1) mode only.
    fn pair_and_two_alone() -> (CellLaplacian, [f64; 4], [f64; 4]) {
        let l = CellLaplacian {
            edges: vec![vec![(1, 1.0)], vec![(0, 1.0)], vec![], vec![]],
            degree: vec![1.0, 1.0, 0.0, 0.0],
            ..Default::default()
        };
        (l, [1.0, 1.0, 11.0, 1001.0], [1.0, 1.0, 1.0, 1.0])
    }

    #[test]
    fn the_jacobi_preconditioner_solves_in_as_many_steps_as_it_leaves_distinct_eigenvalues() {
        // Scaled by the inverse diagonal, the excited modes have two eigenvalues (1/2 for the
        // pair, 1 for the boxes alone), so two steps are exact; unpreconditioned, the
        // eigenvalues 1, 11 and 1001 need three.
        let (l, reg, b) = pair_and_two_alone();
        let x = l.solve(&reg, &b, 0.0, 2);
        for (got, want) in x.iter().zip([1.0, 1.0, 1.0 / 11.0, 1.0 / 1001.0]) {
            assert!((got - want).abs() < 1e-12 * want, "{x:?}");
        }
        // One step is not enough, so the second step's preconditioning is tested too.
        let x = l.solve(&reg, &b, 0.0, 1);
        assert!((x[0] - 1.0).abs() > 1e-3, "{x:?}");
    }

    #[test]
    fn a_right_hand_side_within_the_tolerance_is_answered_with_zero() {
        // ‖b‖ = 5: a relative tolerance of 1 accepts x = 0 at once; just under 1 it does not.
        let (l, reg, _) = pair_and_two_alone();
        let b = [3.0, -4.0, 0.0, 0.0];
        assert_eq!(l.solve(&reg, &b, 1.0, 10), vec![0.0; 4]);
        assert!(l.solve(&reg, &b, 0.99, 10).iter().any(|&v| v != 0.0));
    }

    #[test]
    fn a_direction_without_curvature_ends_the_solve() {
        // Without regularisation the pair's (1, 1) mode is in the null space: the first
        // direction has zero curvature, and the solve stops at x = 0 rather than divide by it.
        let l =
            CellLaplacian { edges: vec![vec![(1, 1.0)], vec![(0, 1.0)]], degree: vec![1.0, 1.0], ..Default::default() };
        assert_eq!(l.solve(&[0.0; 2], &[1.0, 1.0], 1e-12, 10), vec![0.0; 2]);
    }

    #[test]
    fn couplings_come_from_boundary_layers() {
        // Two vCores 4 boxes apart on a 1-row grid; boxes 1 and 2 straddle the boundary.
        let pos = [[1.0, 0.5, 0.5], [5.0, 0.5, 0.5]];
        let a = Assignment {
            owner: vec![0, 0, 1, 1],
            score: vec![0.0; 4],
            second: vec![1, 1, 0, 0],
            gap: vec![16.0, 4.0, 4.0, 16.0],
        };
        let mut l = CellLaplacian::default();
        l.build(&pos, &[1.0, 2.0, 3.0, 1.0], &a, &[false; 4]);
        // gap < 2d = 8 for boxes 1 and 2 only: (2 + 3) / (4 · 4)
        assert_eq!(l.edges[0], vec![(1, 5.0 / 16.0)]);
        assert_eq!(l.degree, vec![5.0 / 16.0, 5.0 / 16.0]);
    }
}
