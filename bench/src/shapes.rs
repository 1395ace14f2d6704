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
            f64::from((x as usize).is_multiple_of(7))
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
        let large = super::large();
        assert_eq!(large.iter().map(|s| [s.grid.nx(), s.grid.ny()]).collect::<Vec<_>>(), [[500, 500], [1000, 1000]]);
        for (s, fraction) in large.iter().zip([0.03, 0.02]) {
            let loaded = s.loads.iter().filter(|&&q| q > 0.0).count() as f64 / s.loads.len() as f64;
            assert!((loaded / fraction - 1.0).abs() < 0.05, "{}: {loaded}", s.name);
            assert!(s.loads.iter().all(|&q| q == 0.0 || (0.5..1.5).contains(&q)), "{}", s.name);
        }
        assert_eq!(super::large(), super::large(), "the same maps every time");
    }

    /// Each shape is what its description says: the claims are checked on its boxes.
    #[test]
    fn each_shape_is_what_its_description_says() {
        let all = super::all();
        let get = |name: &str| all.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("{name}"));
        let at = |s: &super::Shape, i: usize, j: usize| s.loads[s.grid.index(i, j, 0)];
        let total = |s: &super::Shape| s.loads.iter().sum::<f64>();
        let dims = |s: &super::Shape| [s.grid.nx(), s.grid.ny()];

        // Rings around (22, 35), 12 boxes apart, zero between them.
        let rings = get("rings");
        assert_eq!(dims(rings), [60, 60]);
        assert!(rings.loads.iter().all(|&q| q == 0.0 || (0.3..=1.0).contains(&q)));
        assert_eq!(at(rings, 22, 35), (0.5f64.sqrt() * std::f64::consts::TAU / 12.0).cos(), "the centre, 1/√2 from it");
        assert_eq!(at(rings, 28, 35), 0.0, "half a period out");
        assert!(at(rings, 34, 35) > 0.95, "a period out");
        // Exponential from left to right, the same down each column.
        let gradient = get("gradient");
        assert_eq!(dims(gradient), [64, 48]);
        let across = at(gradient, 63, 0) / at(gradient, 0, 0);
        assert!((across - (6.0f64 * 63.0 / 64.0).exp()).abs() < 1e-9 && (300.0..450.0).contains(&across), "{across}");
        assert!((1..64).all(|i| at(gradient, i, 0) > at(gradient, i - 1, 0)));
        assert!((0..64).all(|i| (0..48).all(|j| at(gradient, i, j) == at(gradient, i, 0))));
        // Five spots on a faint background, the highest at (70, 8).
        let spots = get("hot-spots-80x40");
        assert_eq!(dims(spots), [80, 40]);
        assert!(spots.loads.iter().all(|&q| q >= 0.01));
        let top = (0..spots.loads.len()).max_by(|&a, &b| spots.loads[a].total_cmp(&spots.loads[b])).unwrap();
        let [i, j, _] = spots.grid.coords(top);
        assert!((69..=70).contains(&i) && (7..=8).contains(&j), "a box at the corner (70, 8)");
        assert!(at(spots, 70, 8) > 7.0 && at(spots, 10, 10) > 4.8 && at(spots, 0, 39) < 0.02);
        assert!(at(spots, 75, 8) < 0.05 && at(spots, 70, 1) < 0.05, "a spot falls off in every direction");
        // All load in the top-right corner (boxes from 38 on along both axes).
        let corner = get("near-empty");
        let loaded: Vec<[usize; 3]> =
            (0..corner.loads.len()).filter(|&k| corner.loads[k] > 0.0).map(|k| corner.grid.coords(k)).collect();
        assert_eq!(loaded.len(), 22 * 22);
        assert!(loaded.iter().all(|c| c[0] >= 38 && c[1] >= 38));
        assert!((loaded.len() as f64 / 3600.0 - 0.15).abs() < 0.02, "about 15% of the area");
        // Stripes of load 1 in columns 0, 7, 14, …
        let stripes = get("stripes");
        assert_eq!(dims(stripes), [70, 30]);
        assert!((0..70).all(|i| (0..30).all(|j| at(stripes, i, j) == f64::from(i % 7 == 0))));
        // One box holds half of the total.
        let half = get("half-in-one-box");
        assert_eq!(at(half, 13, 31), total(half) / 2.0);
        assert_eq!(half.loads.iter().filter(|&&q| q != 1.0).count(), 1);
        // Three boxes each holding 15% (within the background of the boxes they replaced).
        let giants = get("three-giants");
        for (i, j) in [(5, 5), (6, 5), (30, 20)] {
            let share = at(giants, i, j) / total(giants);
            assert!((share - 0.15).abs() < 0.001, "({i}, {j}): {share}");
        }
        assert!(giants.loads.iter().filter(|&&q| q < 1.0).count() == 1597);
        // 1% of the boxes loaded.
        let sparse = get("sparse");
        assert_eq!(dims(sparse), [100, 100]);
        let loaded = sparse.loads.iter().filter(|&&q| q > 0.0).count();
        assert!((70..130).contains(&loaded), "{loaded}");
        let perlin = get("sharp-perlin-90x45");
        assert_eq!(dims(perlin), [90, 45]);
        assert_eq!(all.len(), 9);
    }

    #[test]
    fn shapes_are_valid_load_maps() {
        for s in super::all().iter().chain(&super::large()) {
            pbs::problem::validate_loads(&s.grid, &s.loads).unwrap();
            assert!(s.loads.iter().sum::<f64>() > 0.0, "{}", s.name);
        }
    }
}
