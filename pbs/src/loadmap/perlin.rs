//! Perlin / fBm load maps (the paper used libnoise) and their transitions: *rough* = a new
//! map (new seed), *smooth* = the same map translated by a fraction of a box.

use noise::{Fbm, MultiFractal, NoiseFn, Perlin};

use crate::error::{Error, Result};
use crate::grid::Grid;

/// Parameters of a fractal-Brownian-motion Perlin map. Load of box `k` is
/// `clamp((fbm(p) + 1)/2, 0, 1)^contrast` where `p = (c_k + offset) · frequency / max(nx, ny)`,
/// so `frequency` counts features across the longer side and non-square grids stay isotropic.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PerlinMap {
    /// Noise seed: a new seed is a rough transition.
    pub seed: u32,
    /// Features across the longer side of the grid.
    pub frequency: f64,
    /// fBm octaves (1 = plain Perlin).
    pub octaves: usize,
    /// Translation in boxes: a small change is a smooth transition.
    pub offset: [f64; 2],
    /// Exponent applied to the normalised noise; > 1 sharpens hot spots.
    pub contrast: f64,
}

impl Default for PerlinMap {
    fn default() -> Self {
        PerlinMap { seed: 0, frequency: 3.0, octaves: 4, offset: [0.0, 0.0], contrast: 2.0 }
    }
}

impl PerlinMap {
    /// Largest translation, in boxes, that maps take as it is. The noise crate fails near
    /// 2⁶³ (its lattice indices overflow) and loses all precision long before; translations
    /// beyond this wrap around (a jump in the map, after 10¹² boxes of drift).
    pub const MAX_OFFSET: f64 = 1e12;

    /// Largest noise coordinate (in magnitude) sampled as it is; larger ones wrap around.
    /// fBm doubles the point at each of up to 16 octaves, and the noise crate's lattice
    /// indices overflow near 2⁶³ (a panic inside it, seen with a frequency of 1e300): 2⁴⁶
    /// keeps the last octave under 2⁶¹, far beyond the coordinates of any map of a sane size
    /// (under 10¹³).
    const MAX_COORDINATE: f64 = (1u64 << 46) as f64;

    /// An error naming the first field that no map can be drawn with: a frequency or an
    /// offset that is not finite, or a contrast that is not a finite number ≥ 0 (a negative
    /// one makes the coldest boxes infinitely loaded). [`PerlinMap::loads`] panics on these.
    pub fn check(&self) -> Result<()> {
        let bad = |name: &'static str, value: f64, reason: &'static str| {
            Err(Error::Parameter { name, value: value.to_string(), reason })
        };
        if !self.frequency.is_finite() {
            return bad("frequency", self.frequency, "features across the grid must be a finite number");
        }
        if let Some(&o) = self.offset.iter().find(|o| !o.is_finite()) {
            return bad("offset", o, "a translation must be a finite number of boxes");
        }
        if !(self.contrast.is_finite() && self.contrast >= 0.0) {
            return bad("contrast", self.contrast, "expected a finite exponent ≥ 0");
        }
        Ok(())
    }

    /// Default parameters with the given seed.
    pub fn with_seed(seed: u32) -> Self {
        PerlinMap { seed, ..Default::default() }
    }

    /// The noise seed for a run's 64-bit seed: its two halves XORed. Seeds below 2³² keep
    /// their own maps, and seeds that differ only above bit 31 (which a cast `as u32`
    /// dropped) draw different ones; a 32-bit noise seed cannot tell every pair apart.
    pub fn noise_seed(seed: u64) -> u32 {
        (seed ^ (seed >> 32)) as u32
    }

    /// Loads on `grid` (every layer of a 3D grid gets the same 2D map).
    ///
    /// # Panics
    /// With the message of [`PerlinMap::check`]'s error, where it has one.
    pub fn loads(&self, grid: &Grid) -> Vec<f64> {
        self.sampled(grid, grid.nx().max(grid.ny()), |fbm, p| fbm.get([p[0], p[1]]))
    }

    /// Loads on `grid` from 3D noise, so that the layers of a 3D grid differ as its rows do;
    /// `frequency` then counts features across the longest of the three sides, and the
    /// translation still moves the map along x and y.
    ///
    /// # Panics
    /// As [`PerlinMap::loads`].
    pub fn loads_3d(&self, grid: &Grid) -> Vec<f64> {
        self.sampled(grid, grid.nx().max(grid.ny()).max(grid.nz()), |fbm, p| fbm.get(p))
    }

    /// The normalised, sharpened noise at every box centre, translated and scaled to
    /// `frequency` features across `longest` boxes.
    fn sampled(&self, grid: &Grid, longest: usize, noise: impl Fn(&Fbm<Perlin>, [f64; 3]) -> f64) -> Vec<f64> {
        if let Err(e) = self.check() {
            panic!("{e}");
        }
        let fbm = self.fbm();
        let scale = self.frequency / longest as f64;
        let [ox, oy] = self.offset.map(|o| o.rem_euclid(Self::MAX_OFFSET));
        (0..grid.len())
            .map(|k| {
                let c = grid.centre(k);
                let p = [(c[0] + ox) * scale, (c[1] + oy) * scale, c[2] * scale].map(|x| x % Self::MAX_COORDINATE);
                let v = ((noise(&fbm, p) + 1.0) * 0.5).clamp(0.0, 1.0);
                v.powf(self.contrast)
            })
            .collect()
    }

    /// The noise: octave `i` is Perlin noise of seed `seed + i`, wrapping past `u32::MAX`.
    /// The noise crate's own constructor adds without wrapping and so panicked, in a debug
    /// build, on the last seeds (`Fbm::new(u32::MAX)`).
    fn fbm(&self) -> Fbm<Perlin> {
        let octaves = self.octaves.clamp(1, 16);
        let sources = (0..octaves as u32).map(|i| Perlin::new(self.seed.wrapping_add(i))).collect();
        Fbm::<Perlin>::new(0).set_octaves(octaves).set_sources(sources)
    }

    /// The map after a rough transition: a fresh seed.
    pub fn rough(&self) -> PerlinMap {
        PerlinMap { seed: self.seed.wrapping_add(1), ..*self }
    }

    /// The map after a smooth transition: translated by `drift` boxes along x and `drift/2`
    /// along y.
    pub fn smooth(&self, drift: f64) -> PerlinMap {
        PerlinMap { offset: [self.offset[0] + drift, self.offset[1] + 0.5 * drift], ..*self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every seed draws a map, the last ones too (the noise crate's constructor overflowed on
    /// them); below them, the map is the noise crate's own fBm of that seed.
    #[test]
    fn every_seed_draws_its_map() {
        let g = Grid::new(7, 5).unwrap();
        for seed in [0, 7, u32::MAX - 16] {
            let m = PerlinMap { seed, octaves: 5, ..PerlinMap::default() };
            let theirs = Fbm::<Perlin>::new(seed).set_octaves(5);
            let scale = m.frequency / 7.0;
            let want: Vec<f64> = (0..g.len())
                .map(|k| {
                    let c = g.centre(k);
                    (((theirs.get([c[0] * scale, c[1] * scale]) + 1.0) * 0.5).clamp(0.0, 1.0)).powf(m.contrast)
                })
                .collect();
            assert_eq!(m.loads(&g), want, "seed {seed}");
        }
        let last = PerlinMap::with_seed(u32::MAX).loads(&g);
        assert!(last.iter().all(|q| (0.0..=1.0).contains(q)));
        assert_ne!(last, PerlinMap::with_seed(u32::MAX - 1).loads(&g));
        assert_eq!(PerlinMap { octaves: 40, ..PerlinMap::with_seed(u32::MAX) }.loads(&g).len(), g.len());
    }

    /// A field no map can be drawn with is named by `check`, and `loads` panics with that
    /// message instead of inside the noise crate; a huge but finite frequency wraps around
    /// (it overflowed the noise crate's lattice indices).
    #[test]
    fn a_run_seed_keeps_its_low_maps_and_its_high_bits_count() {
        for s in [0u64, 1, 7, u32::MAX as u64] {
            assert_eq!(PerlinMap::noise_seed(s), s as u32);
        }
        assert_eq!(PerlinMap::noise_seed(1 << 32), 1);
        assert_eq!(PerlinMap::noise_seed((5 << 32) | 3), 6);
        assert_eq!(PerlinMap::noise_seed(u64::MAX), 0);
        let g = Grid::new(9, 7).unwrap();
        let map = |s: u64| PerlinMap::with_seed(PerlinMap::noise_seed(s)).loads(&g);
        assert_ne!(map(1 << 32), map(0), "a seed that differs above bit 31 draws another map");
    }

    #[test]
    fn fields_no_map_can_be_drawn_with_are_named() {
        let g = Grid::new(6, 5).unwrap();
        let ok = PerlinMap::default();
        assert!(ok.check().is_ok());
        for (m, name) in [
            (PerlinMap { frequency: f64::NAN, ..ok }, "frequency"),
            (PerlinMap { offset: [0.0, f64::INFINITY], ..ok }, "offset"),
            (PerlinMap { contrast: -1.0, ..ok }, "contrast"),
        ] {
            let e = m.check().unwrap_err().to_string();
            assert!(e.contains(name), "{e}");
            let panicked = std::panic::catch_unwind(|| m.loads(&g)).unwrap_err();
            assert_eq!(panicked.downcast_ref::<String>(), Some(&e));
        }
        for frequency in [1e300, -1e300, f64::MAX] {
            let loads = PerlinMap { frequency, ..ok }.loads_3d(&Grid::new_3d(3, 3, 2).unwrap());
            assert!(loads.iter().all(|q| (0.0..=1.0).contains(q)), "{frequency}: {loads:?}");
        }
    }

    #[test]
    fn maps_are_valid_reproducible_and_transitions_differ_as_named() {
        let g = Grid::new(50, 50).unwrap();
        let m = PerlinMap::with_seed(3);
        let a = m.loads(&g);
        assert!(a.iter().all(|q| q.is_finite() && *q >= 0.0 && *q <= 1.0));
        assert_eq!(a, m.loads(&g));
        let spread = a.iter().copied().fold(0.0, f64::max) - a.iter().copied().fold(1.0, f64::min);
        assert!(spread > 0.3, "a Perlin map must not be flat: spread {spread}");
        let diff = |b: &[f64]| a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum::<f64>() / a.len() as f64;
        let smooth = diff(&m.smooth(0.5).loads(&g));
        let rough = diff(&m.rough().loads(&g));
        assert!(smooth > 0.0 && smooth * 4.0 < rough, "smooth {smooth} vs rough {rough}");
    }

    #[test]
    fn a_3d_map_varies_along_z_and_a_2d_map_does_not() {
        let g = Grid::new_3d(12, 12, 12).unwrap();
        let m = PerlinMap::with_seed(4);
        let layer = |loads: &[f64], z: usize| loads[z * 144..(z + 1) * 144].to_vec();
        let flat = m.loads(&g);
        assert!((1..12).all(|z| layer(&flat, z) == layer(&flat, 0)), "loads: every layer the same map");
        let volume = m.loads_3d(&g);
        assert!(volume.iter().all(|q| q.is_finite() && (0.0..=1.0).contains(q)));
        assert_eq!(volume, m.loads_3d(&g));
        let differ = (1..12).filter(|&z| layer(&volume, z) != layer(&volume, 0)).count();
        assert_eq!(differ, 11, "loads_3d: every layer differs from the first");
        assert_ne!(m.smooth(0.5).loads_3d(&g), volume, "the translation moves a 3D map too");
    }

    #[test]
    fn each_load_is_the_sharpened_noise_at_the_translated_and_scaled_centre() {
        // The formula of the type's documentation, against the noise crate directly (a
        // translation within one period, which is taken as it is).
        let m = PerlinMap { offset: [2.25, 1.5], contrast: 1.7, octaves: 3, ..PerlinMap::with_seed(9) };
        let fbm = Fbm::<Perlin>::new(9).set_octaves(3);
        let load = |noise: f64| ((noise + 1.0) * 0.5).clamp(0.0, 1.0).powf(1.7);
        let flat = Grid::new(12, 5).unwrap();
        let scale = m.frequency / 12.0;
        for (k, &q) in m.loads(&flat).iter().enumerate() {
            let c = flat.centre(k);
            assert_eq!(q, load(fbm.get([(c[0] + 2.25) * scale, (c[1] + 1.5) * scale])), "box {k}");
        }
        let volume = Grid::new_3d(4, 3, 6).unwrap();
        let scale = m.frequency / 6.0;
        for (k, &q) in m.loads_3d(&volume).iter().enumerate() {
            let c = volume.centre(k);
            assert_eq!(q, load(fbm.get([(c[0] + 2.25) * scale, (c[1] + 1.5) * scale, c[2] * scale])), "box {k}");
        }
    }

    #[test]
    fn transitions_change_what_they_name_only() {
        let m = PerlinMap { frequency: 3.0, octaves: 2, offset: [1.0, 2.0], contrast: 0.5, seed: 5 };
        assert_eq!(PerlinMap::with_seed(5), PerlinMap { seed: 5, ..PerlinMap::default() });
        assert_eq!(m.rough(), PerlinMap { seed: 6, ..m });
        assert_eq!(PerlinMap { seed: u32::MAX, ..m }.rough().seed, 0);
        assert_eq!(m.smooth(0.5), PerlinMap { offset: [1.5, 2.25], ..m });
    }

    #[test]
    fn any_finite_translation_gives_a_valid_map() {
        let g = Grid::new(8, 8).unwrap();
        for o in [1e11, -1e12, 1e19, -1e300, f64::MAX] {
            let m = PerlinMap { offset: [o, 0.5 * o], ..PerlinMap::with_seed(2) };
            assert!(m.loads(&g).iter().all(|q| q.is_finite() && (0.0..=1.0).contains(q)), "offset {o:e}");
        }
    }
}
