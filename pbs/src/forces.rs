//! The force laws of the paper, in one place.
//!
//! Pair force on vCore `i` from `j`, with `r = x_i − x_j` and `d = |r|`:
//!
//! | law | force | paper |
//! |---|---|---|
//! | [`ForceLaw::Coulomb`] | `Q_i Q_j r/d³` | eq. 1 |
//! | [`ForceLaw::InverseCharge`] | `(1/Q_i + 1/Q_j) r/d³` | eq. 4 |
//! | [`ForceLaw::Balance`] | `λ r/d³`, `λ = 1 − (Q_i+Q_j)/(2m)` | eq. 6 |
//! | [`ForceLaw::BalanceShortRange`] | `λ r/d³ + r/d⁵` | eq. 7 |
//!
//! A positive coefficient pushes `i` away from `j` (docs/design.md: the paper's eq. 2 prints a minus
//! sign that contradicts its prose; the prose is right). Distances are floored at
//! [`MIN_DISTANCE`] and coincident vCores are separated along a fixed direction that depends
//! only on the pair's indices, so no configuration yields NaN or infinity and the result is
//! deterministic.
//!
//! [`add_neighbour_springs`] is the pair potential of the `power-cells-pair` method: each pair
//! of vCores whose cells touch is a spring whose rest length is the sum of the two cells'
//! radii (the radius of a disc of the cell's box count), so that the vCores settle like
//! packed discs of their cells' sizes; a domain wall that a cell touches acts as a mirrored
//! neighbour. The balance itself is left to the power weights.
//!
//! [`add_task_attraction`] is the paper's §5.2 complement: vCores are also pulled towards heavy
//! boxes. Summing over every box would cost O(vCores × boxes) again, so each vCore feels only
//! the boxes of its own cell: the pull is `Σ_{k∈cell(i)} (q_k/m)(c_k − x_i)`, i.e. towards the
//! load centroid of its cell, scaled by its relative charge.

use crate::grid::{Grid, Point};

/// Distances below this (in boxes) are treated as this, so forces stay finite.
pub const MIN_DISTANCE: f64 = 1e-3;

/// Which pair force drives the vCores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ForceLaw {
    /// eq. 1: Coulomb, `Q_i Q_j r/d³` (repulsive for positive charges).
    Coulomb,
    /// eq. 4: `(1/Q_i + 1/Q_j) r/d³`, repulsive only, weaker for loaded vCores.
    InverseCharge,
    /// eq. 6: `λ r/d³` with `λ = 1 − (Q_i+Q_j)/(2m)`, zero at perfect balance.
    Balance,
    /// eq. 7: eq. 6 plus the short-range repulsion `r/d⁵` that prevents dipoles.
    BalanceShortRange,
}

/// Unit direction and floored distance from `j` to `i`.
#[inline]
fn direction(xi: &Point, xj: &Point, i: usize, j: usize) -> (Point, f64) {
    let r = [xi[0] - xj[0], xi[1] - xj[1], xi[2] - xj[2]];
    let d = (r[0] * r[0] + r[1] * r[1] + r[2] * r[2]).sqrt();
    if d > 0.0 {
        return ([r[0] / d, r[1] / d, r[2] / d], d.max(MIN_DISTANCE));
    }
    // Coincident: a pair-specific angle in the x–y plane, antisymmetric in (i, j).
    let (a, b, sign) = if i < j { (i, j, 1.0) } else { (j, i, -1.0) };
    let theta = (a as f64 * 0.618_033_988_75 + b as f64 * 0.414_213_562_37) * std::f64::consts::TAU;
    ([sign * theta.cos(), sign * theta.sin(), 0.0], MIN_DISTANCE)
}

/// Adds the pair forces of `law` to `out` (one entry per vCore).
///
/// `charges` are the vCores' charges and `mean` their mean. Zero charges are floored at a
/// tiny fraction of the mean for eq. 4, so an empty cell gives a large, finite repulsion.
pub fn add_pair_forces(law: ForceLaw, positions: &[Point], charges: &[f64], mean: f64, out: &mut [Point]) {
    let n = positions.len();
    let q_floor = (mean * 1e-9).max(f64::MIN_POSITIVE);
    for i in 0..n {
        for j in (i + 1)..n {
            let (u, d) = direction(&positions[i], &positions[j], i, j);
            let (qi, qj) = (charges[i], charges[j]);
            let lambda = || if mean > 0.0 { 1.0 - (qi + qj) / (2.0 * mean) } else { 0.0 };
            let coef = match law {
                ForceLaw::Coulomb => qi * qj / (d * d),
                ForceLaw::InverseCharge => (1.0 / qi.max(q_floor) + 1.0 / qj.max(q_floor)) / (d * d),
                ForceLaw::Balance => lambda() / (d * d),
                ForceLaw::BalanceShortRange => lambda() / (d * d) + 1.0 / (d * d * d * d),
            };
            for a in 0..3 {
                out[i][a] += coef * u[a];
                out[j][a] -= coef * u[a];
            }
        }
    }
}

/// Adds the neighbour-spring displacement of every vCore to `out` (see the module docs): for
/// each neighbour `j` of `i`, `(s_ij − d_ij)/2` along the unit vector from `j` to `i`, with
/// `s_ij = r_i + r_j`; for each wall its cell touches, `r_i − h` away from the wall at distance
/// `h`; all divided by the number of terms, so that a vCore whose springs all agree moves the
/// whole way. Returns the number of neighbour pairs.
pub fn add_neighbour_springs(
    grid: &Grid,
    owner: &[u32],
    positions: &[Point],
    counts: &[usize],
    out: &mut [Point],
) -> usize {
    let n = positions.len();
    let flat = grid.nz() == 1;
    let radius = |c: usize| {
        if flat {
            (c as f64 / std::f64::consts::PI).sqrt()
        } else {
            (3.0 * c as f64 / (4.0 * std::f64::consts::PI)).cbrt()
        }
    };
    let mut pairs = Vec::new();
    grid.for_each_neighbour_pair(|a, b| {
        let (i, j) = (owner[a].min(owner[b]), owner[a].max(owner[b]));
        if i != j {
            pairs.push((i, j));
        }
    });
    pairs.sort_unstable();
    pairs.dedup();
    let mut terms = vec![0usize; n];
    let mut sum = vec![[0.0; 3]; n];
    for &(i, j) in &pairs {
        let (i, j) = (i as usize, j as usize);
        let (u, d) = direction(&positions[i], &positions[j], i, j);
        let push = 0.5 * (radius(counts[i]) + radius(counts[j]) - d);
        for a in 0..3 {
            sum[i][a] += push * u[a];
            sum[j][a] -= push * u[a];
        }
        terms[i] += 1;
        terms[j] += 1;
    }
    // Walls: which cells touch the low and high side of each axis.
    let dims = grid.dims();
    let mut touches = vec![[[false; 2]; 3]; n];
    for (k, &o) in owner.iter().enumerate() {
        let c = grid.coords(k);
        for a in 0..3 {
            if dims[a] > 1 {
                touches[o as usize][a][0] |= c[a] == 0;
                touches[o as usize][a][1] |= c[a] + 1 == dims[a];
            }
        }
    }
    for i in 0..n {
        let r = radius(counts[i]);
        for a in 0..3 {
            if touches[i][a][0] {
                sum[i][a] += r - positions[i][a];
                terms[i] += 1;
            }
            if touches[i][a][1] {
                sum[i][a] -= r - (dims[a] as f64 - positions[i][a]);
                terms[i] += 1;
            }
        }
        if terms[i] > 0 {
            for a in 0..3 {
                out[i][a] += sum[i][a] / terms[i] as f64;
            }
        }
    }
    pairs.len()
}

/// Adds the §5.2 task attraction (see the module docs), scaled by `strength / spacing³` with
/// `spacing = (boxes / vCores)^(1/dim)` so that it is commensurate with the `r/d³` pair terms.
pub fn add_task_attraction(
    grid: &Grid,
    loads: &[f64],
    owner: &[u32],
    positions: &[Point],
    mean: f64,
    strength: f64,
    out: &mut [Point],
) {
    if mean <= 0.0 || strength == 0.0 {
        return;
    }
    let dim = if grid.nz() == 1 { 2.0 } else { 3.0 };
    let spacing = (grid.len() as f64 / positions.len() as f64).powf(1.0 / dim);
    let scale = strength / (mean * spacing.powi(3));
    for (k, (&o, &q)) in owner.iter().zip(loads).enumerate() {
        if q == 0.0 {
            continue;
        }
        let c = grid.centre(k);
        let x = &positions[o as usize];
        for a in 0..3 {
            out[o as usize][a] += scale * q * (c[a] - x[a]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn underloaded_pairs_repel_and_overloaded_pairs_attract() {
        let x = vec![[1.0, 1.0, 0.5], [3.0, 1.0, 0.5]];
        let mut f = vec![[0.0; 3]; 2];
        add_pair_forces(ForceLaw::Balance, &x, &[0.5, 0.5], 1.0, &mut f);
        assert!(f[0][0] < 0.0 && f[1][0] > 0.0, "λ > 0 must push apart: {f:?}");
        let mut g = vec![[0.0; 3]; 2];
        add_pair_forces(ForceLaw::Balance, &x, &[1.5, 1.5], 1.0, &mut g);
        assert!(g[0][0] > 0.0 && g[1][0] < 0.0, "λ < 0 must pull together: {g:?}");
        // eq. 6 vanishes at perfect balance, eq. 7 keeps only its short-range repulsion.
        let mut h = vec![[0.0; 3]; 2];
        add_pair_forces(ForceLaw::Balance, &x, &[1.0, 1.0], 1.0, &mut h);
        assert_eq!(h, vec![[0.0; 3]; 2]);
        let mut s = vec![[0.0; 3]; 2];
        add_pair_forces(ForceLaw::BalanceShortRange, &x, &[1.0, 1.0], 1.0, &mut s);
        assert!((s[0][0] + 1.0 / 16.0).abs() < 1e-12);
    }

    fn forces(law: ForceLaw, x: &[Point], q: &[f64], mean: f64) -> Vec<Point> {
        let mut f = vec![[0.0; 3]; x.len()];
        add_pair_forces(law, x, q, mean, &mut f);
        f
    }

    fn close(a: &[Point], b: &[Point]) -> bool {
        a.iter().flatten().zip(b.iter().flatten()).all(|(x, y)| (x - y).abs() <= 1e-12 * y.abs().max(1.0))
    }

    /// Each law's coefficient as the paper prints it (module table), on vCores 3 apart with
    /// charges 2 and 3 and a mean charge of 4: Coulomb 6/9, eq. 4 (1/2 + 1/3)/9, eq. 6
    /// λ/9 with λ = 1 − 5/8, eq. 7 that plus 1/3⁴; the pair pushed apart by it, equal and
    /// opposite.
    #[test]
    fn each_law_has_its_paper_s_coefficient() {
        let x = [[0.0, 0.0, 0.0], [3.0, 0.0, 0.0]];
        for (law, coef) in [
            (ForceLaw::Coulomb, 6.0 / 9.0),
            (ForceLaw::InverseCharge, (0.5 + 1.0 / 3.0) / 9.0),
            (ForceLaw::Balance, 0.375 / 9.0),
            (ForceLaw::BalanceShortRange, 0.375 / 9.0 + 1.0 / 81.0),
        ] {
            let f = forces(law, &x, &[2.0, 3.0], 4.0);
            assert!(close(&f, &[[-coef, 0.0, 0.0], [coef, 0.0, 0.0]]), "{law:?}: {f:?}, expected ±{coef}");
        }
        // An empty vCore's charge is floored at 10⁻⁹ of the mean for eq. 4.
        let f = forces(ForceLaw::InverseCharge, &x, &[0.0, 3.0], 4.0);
        let coef = (1.0 / 4e-9 + 1.0 / 3.0) / 9.0;
        assert!(close(&f, &[[-coef, 0.0, 0.0], [coef, 0.0, 0.0]]), "{f:?}");
        // No load at all: λ is 0, not 1 − 5/0.
        assert_eq!(forces(ForceLaw::Balance, &x, &[2.0, 3.0], 0.0), vec![[0.0; 3]; 2]);
    }

    /// The direction is the unit vector from `j` to `i` in three dimensions, the distance its
    /// length floored at [`MIN_DISTANCE`], and coincident vCores are parted along the pair's own
    /// angle `2π (0.618… a + 0.414… b)` (a < b), each the other way.
    #[test]
    fn directions_are_unit_vectors_and_distances_floored() {
        // d = 7 along (2, 3, 6)/7; Coulomb with charges 7 and 7: coefficient 49/49.
        let f = forces(ForceLaw::Coulomb, &[[2.0, 3.0, 6.0], [0.0, 0.0, 0.0]], &[7.0, 7.0], 7.0);
        let u = [2.0 / 7.0, 3.0 / 7.0, 6.0 / 7.0];
        assert!(close(&f, &[u, u.map(|v| -v)]), "{f:?}");
        // The pair's angle is the same whichever vCore asks, the direction the other way.
        let p = [1.0, 1.0, 0.5];
        let (u, d) = direction(&p, &p, 0, 1);
        assert_eq!(d, MIN_DISTANCE);
        assert_eq!(direction(&p, &p, 1, 0), (u.map(|v| -v), MIN_DISTANCE));
        // 10⁻⁴ apart: the direction of the true offset, the distance 10⁻³.
        let f = forces(ForceLaw::Coulomb, &[[0.0; 3], [1e-4, 0.0, 0.0]], &[1.0, 1.0], 1.0);
        assert!(close(&f, &[[-1e6, 0.0, 0.0], [1e6, 0.0, 0.0]]), "{f:?}");
        // Three vCores in one place; only the pair (1, 2) is charged.
        let f = forces(ForceLaw::Coulomb, &[[2.0, 2.0, 0.5]; 3], &[0.0, 1.0, 1.0], 1.0);
        let theta = (0.618_033_988_75 + 2.0 * 0.414_213_562_37) * std::f64::consts::TAU;
        let (c, s) = (1e6 * theta.cos(), 1e6 * theta.sin());
        assert!(close(&f, &[[0.0; 3], [c, s, 0.0], [-c, -s, 0.0]]), "{f:?}");
        let f = forces(ForceLaw::Coulomb, &[[2.0, 2.0, 0.5]; 2], &[1.0, 1.0], 1.0);
        let theta = 0.414_213_562_37 * std::f64::consts::TAU;
        let (c, s) = (1e6 * theta.cos(), 1e6 * theta.sin());
        assert!(close(&f, &[[c, s, 0.0], [-c, -s, 0.0]]), "{f:?}");
    }

    #[test]
    fn coincident_and_empty_vcores_stay_finite() {
        let x = vec![[2.0, 2.0, 0.5]; 3];
        for law in [ForceLaw::Coulomb, ForceLaw::InverseCharge, ForceLaw::Balance, ForceLaw::BalanceShortRange] {
            let mut f = vec![[0.0; 3]; 3];
            add_pair_forces(law, &x, &[0.0, 0.0, 3.0], 1.0, &mut f);
            assert!(f.iter().flatten().all(|v| v.is_finite()), "{law:?}: {f:?}");
            // Newton's third law holds, so the net force is zero.
            let net: f64 = f.iter().map(|p| p[0] + p[1]).sum();
            assert!(net.abs() < 1e-6 * f.iter().flatten().map(|v| v.abs()).sum::<f64>().max(1.0));
        }
        let mut f = vec![[0.0; 3]; 2];
        add_pair_forces(ForceLaw::BalanceShortRange, &x[..2], &[1.0, 1.0], 1.0, &mut f);
        assert!(f[0][0] != 0.0 || f[0][1] != 0.0, "coincident vCores must be pushed apart");
    }

    #[test]
    fn springs_push_crowded_neighbours_apart_and_pull_distant_ones_together() {
        // Two cells of 8 boxes each (radius 1.6) side by side on a 4×4 grid.
        let g = Grid::new(4, 4).unwrap();
        let owner: Vec<u32> = (0..16).map(|k| u32::from(k % 4 >= 2)).collect();
        let counts = [8, 8];
        let mut near = vec![[0.0; 3]; 2];
        assert_eq!(add_neighbour_springs(&g, &owner, &[[1.8, 2.0, 0.5], [2.2, 2.0, 0.5]], &counts, &mut near), 1);
        assert!(near[0][0] < 0.0 && near[1][0] > 0.0, "too close: apart {near:?}");
        let mut far = vec![[0.0; 3]; 2];
        add_neighbour_springs(&g, &owner, &[[0.2, 2.0, 0.5], [3.8, 2.0, 0.5]], &counts, &mut far);
        assert!(far[0][0] > 0.0 && far[1][0] < 0.0, "too far and pressed to the walls: together {far:?}");
        // At the cells' centroids the spring and the walls cancel exactly.
        let mut rest = vec![[0.0; 3]; 2];
        add_neighbour_springs(&g, &owner, &[[1.0, 2.0, 0.5], [3.0, 2.0, 0.5]], &counts, &mut rest);
        assert!(rest.iter().flatten().all(|v| v.abs() < 1e-12), "{rest:?}");
    }

    /// The springs' displacement, term by term, on cells of unequal sizes: a cell of 4 boxes
    /// (column 0 of 4×4, or of 4×2×2) beside one of 12, their vCores at x = 0.5 and 2.5. Along
    /// x each has the spring `±(r₀ + r₁ − 2)/2` and one wall (`r₀ − 0.5`, `−(r₁ − 1.5)`);
    /// along y (and z) both walls, which cancel; the sum is divided by the terms: 4 in 2D, 6
    /// in 3D. The radius is a disc's, `√(c/π)`, in 2D and a ball's, `∛(3c/4π)`, in 3D. A vCore
    /// with no box and no neighbour moves nowhere.
    #[test]
    fn springs_and_walls_add_up_term_by_term() {
        use std::f64::consts::PI;
        for (grid, r0, r1, terms) in [
            (Grid::new(4, 4).unwrap(), (4.0 / PI).sqrt(), (12.0 / PI).sqrt(), 4.0),
            (Grid::new_3d(4, 2, 2).unwrap(), (3.0 / PI).cbrt(), (9.0 / PI).cbrt(), 6.0),
        ] {
            let owner: Vec<u32> = (0..grid.len()).map(|k| u32::from(grid.coords(k)[0] > 0)).collect();
            let [_, ny, nz] = grid.dims();
            let (y, z) = (ny as f64 / 2.0, nz as f64 / 2.0);
            let x = [[0.5, y, z], [2.5, y, z], [1.0, 1.0, 0.5]];
            let mut out = vec![[0.0; 3]; 3];
            assert_eq!(add_neighbour_springs(&grid, &owner, &x, &[4, 12, 0], &mut out), 1);
            let spring = 0.5 * (r0 + r1 - 2.0);
            let expected =
                [[(-spring + r0 - 0.5) / terms, 0.0, 0.0], [(spring - (r1 - 1.5)) / terms, 0.0, 0.0], [0.0; 3]];
            assert!(close(&out, &expected), "{:?}: {out:?}, expected {expected:?}", grid.dims());
        }
    }

    /// The attraction `strength · q_k/(m · spacing³) · (c_k − x_i)` over the boxes of `i`'s cell,
    /// `spacing = (boxes / vCores)^(1/dim)`: on 4×1 boxes and two vCores √2 in 2D, on 2×1×2
    /// and two vCores 2^(1/3) in 3D; nothing without load.
    #[test]
    fn attraction_has_its_scale() {
        let owner = [0, 0, 1, 1];
        let loads = [1.0, 0.0, 0.0, 4.0];
        let x = [[1.0, 0.5, 0.5], [2.5, 0.5, 0.5]];
        let mut f = vec![[0.0; 3]; 2];
        add_task_attraction(&Grid::new(4, 1).unwrap(), &loads, &owner, &x, 2.5, 2.0, &mut f);
        let scale = 2.0 / (2.5 * 2f64.sqrt().powi(3));
        assert!(close(&f, &[[-0.5 * scale, 0.0, 0.0], [4.0 * scale, 0.0, 0.0]]), "{f:?}");
        // 2×1×2 boxes: box 3 is at (1, 0, 1), its centre (1.5, 0.5, 1.5).
        let mut f = vec![[0.0; 3]; 2];
        add_task_attraction(&Grid::new_3d(2, 1, 2).unwrap(), &loads, &owner, &x, 2.5, 2.0, &mut f);
        let scale = 2.0 / (2.5 * 2.0);
        assert!(close(&f, &[[-0.5 * scale, 0.0, 0.0], [-4.0 * scale, 0.0, 4.0 * scale]]), "{f:?}");
        for (mean, strength) in [(0.0, 2.0), (2.5, 0.0)] {
            let mut f = vec![[0.0; 3]; 2];
            add_task_attraction(&Grid::new(4, 1).unwrap(), &loads, &owner, &x, mean, strength, &mut f);
            assert_eq!(f, vec![[0.0; 3]; 2], "mean {mean}, strength {strength}");
        }
    }

    #[test]
    fn attraction_points_to_the_load_in_the_cell() {
        let g = Grid::new(4, 1).unwrap();
        let mut f = vec![[0.0; 3]];
        add_task_attraction(&g, &[0.0, 0.0, 0.0, 4.0], &[0; 4], &[[0.5, 0.5, 0.5]], 4.0, 1.0, &mut f);
        assert!(f[0][0] > 0.0 && f[0][1] == 0.0);
    }
}
