//! Load maps: the paper's four static cases, Perlin/fBm noise maps with rough and smooth
//! transitions, and CSV files of measured loads.

mod csv;
mod perlin;

pub use csv::{parse_csv, read_csv, to_csv, MAX_CSV_BYTES};
pub use perlin::PerlinMap;

use crate::grid::Grid;
use crate::rng::SplitMix64;

/// The paper's four static test cases (its Fig. 4). Parameters scale with the grid:
///
/// | case | load |
/// |---|---|
/// | `Uniform` | 1 on every box |
/// | `Line` | 1 on boxes whose centre lies within 1 box of the diagonal from `(0,0)` to `(nx,ny)`, 0 elsewhere |
/// | `Disc` | 1 inside the disc of radius `min(nx,ny)/4` centred in the domain, 0 elsewhere |
/// | `Random` | independent uniform values in `[0,1)` drawn from the seed |
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Case {
    /// Uniform load.
    Uniform,
    /// Load on a diagonal line.
    Line,
    /// Load in a centred disc.
    Disc,
    /// Random load per box.
    Random,
}

impl Case {
    /// All four, in the paper's order.
    pub const ALL: [Case; 4] = [Case::Uniform, Case::Line, Case::Disc, Case::Random];

    /// Lower-case name (`uniform`, `line`, `disc`, `random`).
    pub fn name(self) -> &'static str {
        match self {
            Case::Uniform => "uniform",
            Case::Line => "line",
            Case::Disc => "disc",
            Case::Random => "random",
        }
    }

    /// The case called `name`, if any.
    pub fn from_name(name: &str) -> Option<Case> {
        Case::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// Loads of a static case on `grid` (`seed` matters for [`Case::Random`] only). On a 3D grid
/// the same 2D pattern is repeated on every layer.
pub fn static_case(case: Case, grid: &Grid, seed: u64) -> Vec<f64> {
    let (nx, ny) = (grid.nx() as f64, grid.ny() as f64);
    let mut rng = SplitMix64::new(seed);
    (0..grid.len())
        .map(|k| {
            let c = grid.centre(k);
            match case {
                Case::Uniform => 1.0,
                Case::Line => {
                    // distance from c to the line through (0,0) and (nx,ny)
                    let d = (ny * c[0] - nx * c[1]).abs() / (nx * nx + ny * ny).sqrt();
                    f64::from(d <= 1.0)
                }
                Case::Disc => {
                    let r = nx.min(ny) / 4.0;
                    let (dx, dy) = (c[0] - nx / 2.0, c[1] - ny / 2.0);
                    f64::from(dx * dx + dy * dy <= r * r)
                }
                Case::Random => rng.next_f64(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_cases_have_the_documented_shape() {
        let g = Grid::new(50, 50).unwrap();
        let line = static_case(Case::Line, &g, 0);
        let on_line = line.iter().filter(|&&q| q > 0.0).count();
        assert!((100..200).contains(&on_line), "{on_line} boxes on the line");
        assert_eq!(line[g.index(10, 10, 0)], 1.0);
        assert_eq!(line[g.index(40, 10, 0)], 0.0);
        let disc = static_case(Case::Disc, &g, 0);
        let area = disc.iter().sum::<f64>();
        assert!((area - std::f64::consts::PI * 12.5 * 12.5).abs() < 30.0, "{area}");
        assert_eq!(static_case(Case::Random, &g, 5), static_case(Case::Random, &g, 5));
        assert_ne!(static_case(Case::Random, &g, 5), static_case(Case::Random, &g, 6));
        assert!(static_case(Case::Uniform, &g, 0).iter().all(|&q| q == 1.0));
        for c in Case::ALL {
            assert_eq!(Case::from_name(c.name()), Some(c));
        }
    }

    #[test]
    fn the_line_holds_the_boxes_within_one_box_of_the_diagonal() {
        // The distance from a centre to the diagonal, as the length of what is left of it
        // after its projection on the diagonal's unit vector.
        for (nx, ny) in [(50, 20), (7, 30), (64, 9), (13, 13)] {
            let g = Grid::new(nx, ny).unwrap();
            let line = static_case(Case::Line, &g, 0);
            let len = (nx as f64).hypot(ny as f64);
            let u = [nx as f64 / len, ny as f64 / len];
            for (k, &q) in line.iter().enumerate() {
                let c = g.centre(k);
                let along = c[0] * u[0] + c[1] * u[1];
                let d = (c[0] - along * u[0]).hypot(c[1] - along * u[1]);
                if (d - 1.0).abs() > 1e-9 {
                    assert_eq!(q, f64::from(d < 1.0), "{nx} × {ny}, box {k} at distance {d}");
                }
            }
        }
    }
}
