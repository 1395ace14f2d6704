//! The colours of every picture: one colour per owner (thread or vCore), and a heat scale for
//! loads. The simulator and the reports share them, so a thread has the same colour in both.

/// Colour of owner `i`: golden-angle hues with three saturations and two values, so that
/// hundreds of owners stay distinct and neighbouring ids look different.
pub fn owner_colour(i: u32) -> [u8; 3] {
    let h = (f64::from(i) * 0.618_033_988_75).fract();
    let s = [0.75, 0.5, 0.95][i as usize % 3];
    let v = [1.0, 0.82][(i as usize / 3) % 2];
    let (r, g, b) = hsv(h, s, v);
    [(r * 255.0).round() as u8, (g * 255.0).round() as u8, (b * 255.0).round() as u8]
}

fn hsv(h: f64, s: f64, v: f64) -> (f64, f64, f64) {
    let i = (h * 6.0).floor();
    let f = h * 6.0 - i;
    let (p, q, t) = (v * (1.0 - s), v * (1.0 - f * s), v * (1.0 - (1.0 - f) * s));
    match i as i32 % 6 {
        0 => (v, t, p),
        1 => (q, v, p),
        2 => (p, v, t),
        3 => (p, q, v),
        4 => (t, p, v),
        _ => (v, p, q),
    }
}

/// Heat colour of a load fraction in `[0, 1]`: black, purple, orange, pale yellow.
pub fn heat_colour(t: f64) -> [u8; 3] {
    const STOPS: [[f64; 3]; 5] =
        [[0.0, 0.0, 4.0], [87.0, 16.0, 110.0], [188.0, 55.0, 84.0], [249.0, 142.0, 9.0], [252.0, 255.0, 164.0]];
    let t = if t.is_finite() { t.clamp(0.0, 1.0) } else { 0.0 } * (STOPS.len() - 1) as f64;
    let i = (t.floor() as usize).min(STOPS.len() - 2);
    let f = t - i as f64;
    let mix = |d: usize| (STOPS[i][d] + f * (STOPS[i + 1][d] - STOPS[i][d])).round() as u8;
    [mix(0), mix(1), mix(2)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbouring_owners_differ_and_heat_runs_dark_to_light() {
        for i in 0..256u32 {
            let (a, b) = (owner_colour(i), owner_colour(i + 1));
            let d: i32 = a.iter().zip(&b).map(|(x, y)| (i32::from(*x) - i32::from(*y)).abs()).sum();
            assert!(d > 40, "owners {i} and {} look alike: {a:?} {b:?}", i + 1);
        }
        let lum = |c: [u8; 3]| c.iter().map(|&v| u32::from(v)).sum::<u32>();
        assert!(lum(heat_colour(0.0)) < lum(heat_colour(0.5)) && lum(heat_colour(0.5)) < lum(heat_colour(1.0)));
        assert_eq!(heat_colour(f64::NAN), heat_colour(0.0));
    }

    /// HSV to RGB through chroma, the textbook way round: `c = v·s`, the second channel
    /// `c·(1 − |6h mod 2 − 1|)`, all lifted by `v − c`.
    fn reference_hsv(h: f64, s: f64, v: f64) -> (f64, f64, f64) {
        let c = v * s;
        let x = c * (1.0 - ((h * 6.0) % 2.0 - 1.0).abs());
        let (r, g, b) = match (h * 6.0) as u32 {
            0 => (c, x, 0.0),
            1 => (x, c, 0.0),
            2 => (0.0, c, x),
            3 => (0.0, x, c),
            4 => (x, 0.0, c),
            _ => (c, 0.0, x),
        };
        let m = v - c;
        (r + m, g + m, b + m)
    }

    #[test]
    fn hsv_matches_the_chroma_formula_in_every_sector() {
        for hi in 0..240 {
            let h = f64::from(hi) / 240.0 + 1e-4;
            for (s, v) in [(1.0, 1.0), (0.75, 1.0), (0.5, 0.82), (0.95, 0.6), (0.0, 0.4)] {
                let (a, b) = (hsv(h, s, v), reference_hsv(h, s, v));
                let close = [(a.0, b.0), (a.1, b.1), (a.2, b.2)].iter().all(|(x, y)| (x - y).abs() < 1e-12);
                assert!(close, "h {h} s {s} v {v}: {a:?} against {b:?}");
            }
        }
        assert_eq!(hsv(0.0, 1.0, 1.0), (1.0, 0.0, 0.0));
        assert_eq!(hsv(0.5, 1.0, 1.0), (0.0, 1.0, 1.0));
    }

    /// Owner `i`'s hue is `i` times the golden ratio's fraction, its saturation 0.75, 0.5 or
    /// 0.95 by `i mod 3`, its value 1 or 0.82 by `⌊i / 3⌋ mod 2`, each channel rounded.
    #[test]
    fn owner_colours_follow_the_golden_angle_with_three_saturations_and_two_values() {
        assert_eq!(owner_colour(0), [255, 64, 64]);
        let byte = |x: f64| (x * 255.0).round() as u8;
        for i in (0..600).chain([u32::MAX - 1, u32::MAX]) {
            let h = (f64::from(i) * 0.618_033_988_75).fract();
            let s = [0.75, 0.5, 0.95][(i % 3) as usize];
            let v = if (i / 3) % 2 == 0 { 1.0 } else { 0.82 };
            let (r, g, b) = reference_hsv(h, s, v);
            let want = [byte(r), byte(g), byte(b)];
            let got = owner_colour(i);
            assert!(got.iter().zip(want).all(|(x, y)| x.abs_diff(y) <= 1), "owner {i}: {got:?} against {want:?}");
            let brightest = *got.iter().max().unwrap();
            assert_eq!(brightest, byte(v), "owner {i}: the brightest channel is the value");
        }
    }

    /// The heat scale passes through its five stops at 0, ¼, ½, ¾ and 1, mixes linearly
    /// between them, and takes anything below 0, above 1 or not finite to an end.
    #[test]
    fn heat_runs_through_its_stops_and_mixes_between_them() {
        let stops = [[0, 0, 4], [87, 16, 110], [188, 55, 84], [249, 142, 9], [252, 255, 164]];
        for (k, stop) in stops.iter().enumerate() {
            assert_eq!(heat_colour(k as f64 / 4.0), *stop, "stop {k}");
        }
        for k in 0..4 {
            let (a, b) = (stops[k], stops[k + 1]);
            let quarter = |d: usize| (f64::from(a[d]) + 0.25 * (f64::from(b[d]) - f64::from(a[d]))).round() as u8;
            assert_eq!(
                heat_colour((k as f64 + 0.25) / 4.0),
                [quarter(0), quarter(1), quarter(2)],
                "between {k} and {}",
                k + 1
            );
        }
        assert_eq!(heat_colour(-3.0), stops[0]);
        assert_eq!(heat_colour(7.0), stops[4]);
        assert_eq!(heat_colour(f64::INFINITY), stops[0]);
    }
}
