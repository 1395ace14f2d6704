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
}

impl CellLaplacian {
    /// Estimates the Laplacian from an assignment; boxes with `skip[k]` set do not count.
    pub fn build(&mut self, positions: &[Point], loads: &[f64], a: &Assignment, skip: &[bool]) {
        let n = positions.len();
        self.edges.resize_with(n, Vec::new);
        self.edges.truncate(n);
        for e in &mut self.edges {
            e.clear();
        }
        // Neighbouring boxes mostly share their (owner, second) pair: keep its distance
        // rather than take a square root per box.
        let (mut pair, mut d) = ((NONE, NONE), 0.0);
        for (k, &q) in loads.iter().enumerate() {
            let s = a.second[k];
            if q == 0.0 || s == NONE || skip[k] {
                continue;
            }
            let o = a.owner[k];
            if pair != (o, s) {
                pair = (o, s);
                d = dist2(&positions[o as usize], &positions[s as usize]).sqrt().max(MIN_DISTANCE);
            }
            if a.gap[k] < 2.0 * d {
                let c = q / (4.0 * d);
                add(&mut self.edges[o as usize], s, c);
                add(&mut self.edges[s as usize], o, c);
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

fn add(list: &mut Vec<(u32, f64)>, j: u32, c: f64) {
    match list.iter_mut().find(|e| e.0 == j) {
        Some(e) => e.1 += c,
        None => list.push((j, c)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solves_a_path_graph() {
        // 0 — 1 — 2 with unit couplings plus a small regularisation.
        let l = CellLaplacian {
            edges: vec![vec![(1, 1.0)], vec![(0, 1.0), (2, 1.0)], vec![(1, 1.0)]],
            degree: vec![1.0, 2.0, 1.0],
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
