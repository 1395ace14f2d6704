//! Buch's greedy strategies for vector loads (*Vector load balancing*, 2023, §3.2): each box
//! has a load per phase, and boxes go one by one, heaviest first, to a part. Neither looks at
//! where a box lies: the parts come out scattered over the grid, the price of placing each
//! box where its phases fit best. The compact alternative is
//! [`crate::bisection::kway_vector_rcb`].
//!
//! - [`vector_greedy`]: a box goes to the part least loaded in the box's *dominant* phase (its
//!   largest load relative to that phase's mean box load);
//! - [`norm_greedy`]: a box goes to the part whose load vector, with the box added and each
//!   phase relative to its mean part load, has the smallest Euclidean norm (the placement
//!   rule of Buch's `rk-d`, without its recursive splitting).
//!
//! Boxes are taken by decreasing largest relative load, ties by index; parts by index on ties:
//! deterministic. Each placement scans the parts (`O(boxes × parts × phases)`; Buch keeps one
//! heap per phase).
//!
//! ```
//! // Two phases in opposite corners: the greedy strategies balance both.
//! let a: Vec<f64> = (0..16).map(|k| if k < 8 { 2.0 } else { 0.1 }).collect();
//! let b: Vec<f64> = (0..16).map(|k| if k < 8 { 0.1 } else { 2.0 }).collect();
//! let owners = pbs::greedy::norm_greedy(&[a.clone(), b.clone()], 2)?;
//! for loads in [&a, &b] {
//!     assert_eq!(pbs::metrics::max_avg(&pbs::metrics::charges(&owners, loads, 2)), 1.0);
//! }
//! # Ok::<(), pbs::Error>(())
//! ```

use crate::error::{Error, Result};

/// Vector greedy: one part id in `0..parts` per box, for box loads `phase_loads[p][k]`.
pub fn vector_greedy(phase_loads: &[Vec<f64>], parts: usize) -> Result<Vec<u32>> {
    place(phase_loads, parts, |part_loads, box_loads, scale| {
        // The box's dominant phase, then the part least loaded in it.
        let phase = (0..box_loads.len())
            .max_by(|&a, &b| (box_loads[a] * scale[a]).total_cmp(&(box_loads[b] * scale[b])).then(b.cmp(&a)))
            .expect("at least one phase");
        (0..part_loads.len())
            .min_by(|&a, &b| part_loads[a][phase].total_cmp(&part_loads[b][phase]).then(a.cmp(&b)))
            .expect("at least one part")
    })
}

/// Norm greedy: one part id in `0..parts` per box, for box loads `phase_loads[p][k]`.
pub fn norm_greedy(phase_loads: &[Vec<f64>], parts: usize) -> Result<Vec<u32>> {
    place(phase_loads, parts, |part_loads, box_loads, scale| {
        let norm = |q: &[f64]| -> f64 {
            // Squares as products: `powi`'s precision is left unspecified by Rust.
            q.iter()
                .zip(box_loads)
                .zip(scale)
                .map(|((l, b), s)| {
                    let x = (l + b) * s;
                    x * x
                })
                .sum::<f64>()
        };
        (0..part_loads.len())
            .min_by(|&a, &b| norm(&part_loads[a]).total_cmp(&norm(&part_loads[b])).then(a.cmp(&b)))
            .expect("at least one part")
    })
}

/// Places the boxes, heaviest first, on the part `choose(part loads, box loads, 1 / mean
/// per phase)` picks.
fn place(
    phase_loads: &[Vec<f64>],
    parts: usize,
    choose: impl Fn(&[Vec<f64>], &[f64], &[f64]) -> usize,
) -> Result<Vec<u32>> {
    let Some(first) = phase_loads.first() else {
        return Err(Error::Parameter {
            name: "phase_loads",
            value: "[]".into(),
            reason: "at least one phase is needed",
        });
    };
    let n = first.len();
    if n == 0 {
        return Err(Error::Parameter {
            name: "phase_loads",
            value: "no box".into(),
            reason: "at least one box is needed",
        });
    }
    if parts == 0 {
        return Err(Error::NoVCores);
    }
    if parts > n {
        return Err(Error::TooManyVCores { vcores: parts, boxes: n });
    }
    for loads in phase_loads {
        if loads.len() != n {
            return Err(Error::LoadCount { expected: n, got: loads.len() });
        }
        if let Some(k) = loads.iter().position(|l| !(l.is_finite() && *l >= 0.0)) {
            return Err(Error::Parameter {
                name: "phase_loads",
                value: format!("box {k}: {}", loads[k]),
                reason: "loads must be finite and ≥ 0",
            });
        }
    }
    // Rescaled as `pbs::Problem` rescales loads (all phases by one power of two), so that the
    // sums below stay finite.
    let phase_loads = &crate::problem::rescaled_phases(phase_loads)[..];
    let d = phase_loads.len();
    // Each phase relative to its mean per part (a phase that weighs nothing counts 1).
    let scale: Vec<f64> = phase_loads
        .iter()
        .map(|l| {
            let mean = l.iter().sum::<f64>() / parts as f64;
            if mean > 0.0 {
                1.0 / mean
            } else {
                1.0
            }
        })
        .collect();
    let relative = |k: usize| (0..d).map(|p| phase_loads[p][k] * scale[p]).fold(0.0, f64::max);
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| relative(b).total_cmp(&relative(a)).then(a.cmp(&b)));
    let mut part_loads = vec![vec![0.0; d]; parts];
    let mut owners = vec![0; n];
    let mut box_loads = vec![0.0; d];
    for k in order {
        box_loads.iter_mut().enumerate().for_each(|(p, b)| *b = phase_loads[p][k]);
        let part = choose(&part_loads, &box_loads, &scale);
        part_loads[part].iter_mut().zip(&box_loads).for_each(|(q, b)| *q += b);
        owners[k] = part as u32;
    }
    Ok(owners)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics;
    use proptest::prelude::*;

    #[test]
    fn bad_input_is_refused() {
        assert!(vector_greedy(&[], 2).is_err());
        assert!(norm_greedy(&[vec![]], 2).is_err());
        assert!(norm_greedy(&[vec![1.0; 4]], 0).is_err());
        assert!(norm_greedy(&[vec![1.0; 4]], 5).is_err());
        assert!(vector_greedy(&[vec![1.0; 4], vec![1.0; 3]], 2).is_err());
        let e = norm_greedy(&[vec![1.0, f64::NAN]], 1).unwrap_err();
        assert!(e.to_string().contains("box 1"), "{e}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn greedy_placements_are_balanced_in_every_phase_and_deterministic(
            n in 8usize..300, parts in 1usize..8, phases in 1usize..4, seed in 0u64..1000,
        ) {
            prop_assume!(parts <= n);
            let mut rng = crate::rng::SplitMix64::new(seed);
            let loads: Vec<Vec<f64>> = (0..phases).map(|_| (0..n).map(|_| rng.next_f64()).collect()).collect();
            for strategy in [vector_greedy, norm_greedy] {
                let owners = strategy(&loads, parts).unwrap();
                prop_assert_eq!(&owners, &strategy(&loads, parts).unwrap());
                prop_assert!(owners.iter().all(|&o| (o as usize) < parts));
                // Greedy on boxes of at most 1 against parts of n / parts on average: within a
                // few boxes of the mean in every phase.
                let mean = n as f64 * 0.5 / parts as f64;
                for l in &loads {
                    let q = metrics::charges(&owners, l, parts);
                    let max = q.iter().copied().fold(0.0, f64::max);
                    prop_assert!(max <= mean + phases as f64 * 2.0 + 0.3 * mean, "{:?}", q);
                }
            }
        }
    }

    /// Phases weighed against their own means: a phase of small loads (b: 4 on every fourth
    /// box, 0 elsewhere) beside one of large uniform ones (a: 1,000) is balanced too, where
    /// comparing raw loads would follow `a` alone and stack every heavy `b` box on one part.
    #[test]
    fn each_phase_counts_relative_to_its_own_mean() {
        let a = vec![1000.0; 64];
        let b: Vec<f64> = (0..64).map(|k| if k % 4 == 0 { 4.0 } else { 0.0 }).collect();
        let phases = [a, b];
        for strategy in [vector_greedy, norm_greedy] {
            let owners = strategy(&phases, 4).unwrap();
            for loads in &phases {
                assert_eq!(metrics::charges(&owners, loads, 4), vec![loads.iter().sum::<f64>() / 4.0; 4]);
            }
        }
        // A phase of zeros weighs nothing, and the other is still balanced.
        let owners = vector_greedy(&[vec![0.0; 8], vec![1.0; 8]], 2).unwrap();
        assert_eq!(metrics::charges(&owners, &[1.0; 8], 2), [4.0, 4.0]);
        // As many parts as boxes: one box each.
        let mut one_each = norm_greedy(&[vec![1.0, 2.0, 3.0]], 3).unwrap();
        one_each.sort_unstable();
        assert_eq!(one_each, [0, 1, 2]);
        for bad in [-1.0, f64::INFINITY] {
            assert!(vector_greedy(&[vec![1.0, bad]], 1).is_err(), "{bad}");
        }
    }

    /// Norm greedy by hand on 2 parts, phases a = [4, 0, 2, 0] and b = [3, 3, 3, 3] (means per
    /// part 3 and 6): box 0 (a: 4/3, the largest relative load) to part 0; then boxes 2, 1 and
    /// 3, each where the squared norm of the part's relative loads, the box added, is least:
    /// box 2 at 0.69 on part 1 against 5 on part 0, box 1 at 1.44 against 2.78, box 3 at 2.69
    /// against 2.78.
    #[test]
    fn norm_greedy_minimises_the_norm_of_relative_part_loads() {
        assert_eq!(norm_greedy(&[vec![4.0, 0.0, 2.0, 0.0], vec![3.0; 4]], 2).unwrap(), [0, 1, 1, 1]);
    }

    #[test]
    fn both_beat_a_scalar_greedy_on_phases_in_opposite_corners() {
        // Phase 0 heavy on even boxes, phase 1 on odd ones, their sums all equal: a scalar
        // greedy on the sum may pair them badly, the vector strategies do not.
        let a: Vec<f64> = (0..64).map(|k| if k % 2 == 0 { 3.0 } else { 1.0 }).collect();
        let b: Vec<f64> = (0..64).map(|k| if k % 2 == 0 { 1.0 } else { 3.0 }).collect();
        let sum: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        let scalar = vector_greedy(&[sum], 4).unwrap();
        let phases = [a, b];
        for strategy in [vector_greedy, norm_greedy] {
            let owners = strategy(&phases, 4).unwrap();
            assert!((metrics::vector_max_avg(&owners, &phases, 4) - 1.0).abs() < 1e-12, "every phase even");
        }
        assert!((metrics::vector_max_avg(&scalar, &phases, 4) - 1.5).abs() < 1e-12, "evens on parts 0 and 2");
    }
}
