//! Load maps of shapes the paper never named, to check that the balancer is general rather
//! than tuned to its four cases. `pbs-bench maps --out DIR` writes them as CSV files.

use pbs::loadmap::PerlinMap;
use pbs::rng::SplitMix64;
use pbs::Grid;

/// A named load map.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    /// file-friendly name
    pub name: &'static str,
    /// what it looks like
    pub description: &'static str,
    /// its grid
    pub grid: Grid,
    /// one load per box
    pub loads: Vec<f64>,
}

fn make(name: &'static str, description: &'static str, nx: usize, ny: usize, f: impl Fn(f64, f64) -> f64) -> Shape {
    let grid = Grid::new(nx, ny).expect("non-empty");
    let loads = (0..grid.len()).map(|k| {
        let c = grid.centre(k);
        f(c[0], c[1])
    });
    Shape { name, description, grid, loads: loads.collect() }
}

/// Every shape, deterministic.
pub fn all() -> Vec<Shape> {
    let gauss =
        |x: f64, y: f64, cx: f64, cy: f64, s: f64| (-((x - cx).powi(2) + (y - cy).powi(2)) / (2.0 * s * s)).exp();
    let mut v = vec![
        make("rings", "concentric rings around an off-centre point, zero between them", 60, 60, |x, y| {
            let r = ((x - 22.0).powi(2) + (y - 35.0).powi(2)).sqrt();
            let v = (r * std::f64::consts::TAU / 12.0).cos();
            if v > 0.3 {
                v
            } else {
                0.0
            }
        }),
        make("gradient", "load growing exponentially from left to right (×400 across)", 64, 48, |x, _| {
            (6.0 * x / 64.0).exp()
        }),
        make(
            "hot-spots-80x40",
            "five Gaussian hot spots of different heights on a faint background, non-square",
            80,
            40,
            |x, y| {
                0.01 + 5.0 * gauss(x, y, 10.0, 10.0, 3.0)
                    + 2.0 * gauss(x, y, 60.0, 30.0, 5.0)
                    + 8.0 * gauss(x, y, 70.0, 8.0, 1.5)
                    + 1.0 * gauss(x, y, 35.0, 25.0, 8.0)
                    + 3.0 * gauss(x, y, 20.0, 35.0, 2.0)
            },
        ),
        make(
            "near-empty",
            "all load in the top-right corner (15% of the area), the rest exactly zero",
            60,
            60,
            |x, y| {
                if x > 38.0 && y > 38.0 {
                    1.0 + 0.5 * ((x * 0.7).sin() * (y * 0.3).cos())
                } else {
                    0.0
                }
            },
        ),
        make("stripes", "vertical stripes of load 1 every 7 boxes, zero between", 70, 30, |x, _| {
            f64::from((x as usize) % 7 == 0)
        }),
    ];
    // A single box holding half of the total load: the bound is far above 1.
    let mut half =
        make("half-in-one-box", "uniform load, except one box that holds half of the total", 50, 50, |_, _| 1.0);
    let k = half.grid.index(13, 31, 0);
    half.loads[k] = half.loads.iter().sum::<f64>() - 1.0;
    v.push(half);
    // Three boxes each heavier than the mean share, on a random background.
    let mut giants =
        make("three-giants", "random background plus three boxes each holding 15% of the load", 40, 40, |_, _| 0.0);
    let mut rng = SplitMix64::new(11);
    for q in &mut giants.loads {
        *q = rng.next_f64();
    }
    let background: f64 = giants.loads.iter().sum();
    for (i, j) in [(5, 5), (6, 5), (30, 20)] {
        let k = giants.grid.index(i, j, 0);
        giants.loads[k] = background * 0.15 / 0.55;
    }
    v.push(giants);
    v.push(sparse("sparse", "1% of boxes loaded at random, the rest zero", 100, 0.01, 5));
    let g = Grid::new(90, 45).expect("non-empty");
    let map = PerlinMap { seed: 77, frequency: 7.0, octaves: 6, contrast: 4.0, ..Default::default() };
    v.push(Shape {
        name: "sharp-perlin-90x45",
        description: "high-frequency, high-contrast fBm",
        grid: g,
        loads: map.loads(&g),
    });
    v
}

/// A `side`² map whose boxes each carry a load in 0.5–1.5 with probability `fraction`, the
/// others none.
fn sparse(name: &'static str, description: &'static str, side: usize, fraction: f64, seed: u64) -> Shape {
    let mut map = make(name, description, side, side, |_, _| 0.0);
    let mut rng = SplitMix64::new(seed);
    for q in &mut map.loads {
        if rng.next_f64() < fraction {
            *q = 0.5 + rng.next_f64();
        }
    }
    map
}

/// Larger maps of sparse load, where a cold start's time is the refinement's and the cells'
/// (docs/peers.md, "Boxes that carry load, and flows by phases"): `pbs-bench maps --large`
/// writes them beside the others (2.7 MB).
pub fn large() -> Vec<Shape> {
    vec![
        sparse("sparse-500", "3% of boxes loaded at random, the rest zero", 500, 0.03, 3),
        sparse("sparse-1000", "2% of boxes loaded at random, the rest zero", 1000, 0.02, 3),
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn large_sparse_maps_load_the_fraction_they_say() {
        for (s, fraction) in super::large().iter().zip([0.03, 0.02]) {
            let loaded = s.loads.iter().filter(|&&q| q > 0.0).count() as f64 / s.loads.len() as f64;
            assert!((loaded / fraction - 1.0).abs() < 0.05, "{}: {loaded}", s.name);
            assert!(s.loads.iter().all(|&q| q == 0.0 || (0.5..1.5).contains(&q)), "{}", s.name);
        }
        assert_eq!(super::large(), super::large(), "the same maps every time");
    }

    #[test]
    fn shapes_are_valid_load_maps() {
        for s in super::all().iter().chain(&super::large()) {
            pbs::problem::validate_loads(&s.grid, &s.loads).unwrap();
            assert!(s.loads.iter().sum::<f64>() > 0.0, "{}", s.name);
        }
    }
}
