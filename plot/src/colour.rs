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
}
