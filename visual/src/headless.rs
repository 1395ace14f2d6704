//! The simulator without a display: run a number of steps, then write the scene as a PNG (the
//! map beside the paper's Fig. 5/6 charts) and, optionally, an animated GIF of the map.

use std::path::{Path, PathBuf};

use pbs_plot::panels::{line_panels_rgb, Panel, Series, Stroke, PALETTE};

use crate::raster::{render_map, Picture, Style};
use crate::runner::Simulation;
use crate::scene::Scene;

/// Width of the chart column beside the map, in pixels.
const CHARTS_WIDTH: usize = 560;

/// The map of `scene` with its charts to the right: max_avg, DOL extremes and migrations
/// against steps. The map's top-left pixel is the picture's.
pub fn compose(scene: &Scene, style: &Style) -> Result<Picture, String> {
    let map = render_map(scene, style);
    let height = map.height.max(600);
    let mut pic = Picture::new(map.width + CHARTS_WIDTH, height, [255, 255, 255]);
    pic.blit(&map, 0, 0);
    let mut rgb = vec![0u8; CHARTS_WIDTH * height * 3];
    line_panels_rgb(&mut rgb, CHARTS_WIDTH as u32, height as u32, 1, &charts(scene))?;
    let charts =
        Picture { width: CHARTS_WIDTH, height, rgba: rgb.chunks(3).flat_map(|c| [c[0], c[1], c[2], 255]).collect() };
    pic.blit(&charts, map.width, 0);
    Ok(pic)
}

fn charts(scene: &Scene) -> Vec<Panel> {
    let h = &scene.history;
    let line = |label: &str, colour: usize, y: &dyn Fn(&pbs::StepRecord) -> f64| Series {
        label: label.into(),
        points: h.iter().map(|r| (r.step as f64, y(r))).collect(),
        color: PALETTE[colour],
        stroke: Stroke::Solid,
    };
    let x_label = match scene.kind {
        crate::scene::SceneKind::Balancer => "step",
        crate::scene::SceneKind::App => "iteration",
    };
    let panel = |title: &str, y_label: &str, series| Panel {
        title: title.into(),
        x_label: x_label.into(),
        y_label: y_label.into(),
        log_x: false,
        log_y: false,
        series,
    };
    vec![
        panel("max_avg (Fig. 5)", "max Q / mean", vec![line("max_avg", 0, &|r| r.max_avg)]),
        panel(
            "degree of load (Fig. 6)",
            "(Q - m) / m",
            vec![line("dol_max", 3, &|r| r.dol_max), line("dol_min", 2, &|r| r.dol_min)],
        ),
        panel("migrations", "boxes", vec![line("migrations", 4, &|r| r.migrations as f64)]),
    ]
}

/// Where a headless run writes.
#[derive(Debug, Clone, Default)]
pub struct Outputs {
    /// Final picture.
    pub png: Option<PathBuf>,
    /// Animated map, one frame every `gif_every` steps.
    pub gif: Option<PathBuf>,
    /// Steps between GIF frames (≥ 1).
    pub gif_every: usize,
}

/// Runs up to `steps` ticks (fewer if the simulation converges with nothing driving it) and
/// writes the outputs. Returns the final scene.
pub fn run(
    sim: &mut dyn Simulation,
    steps: usize,
    style: &Style,
    outputs: &Outputs,
    mut progress: impl FnMut(usize),
) -> Result<Scene, String> {
    let mut gif = match &outputs.gif {
        Some(path) => Some(GifWriter::create(path, &sim.scene(), style)?),
        None => None,
    };
    let every = outputs.gif_every.max(1);
    for t in 1..=steps {
        let changed = sim.tick()?;
        progress(t);
        if let Some(g) = gif.as_mut() {
            if t % every == 0 || !changed {
                g.frame(&sim.scene())?;
            }
        }
        if !changed {
            break;
        }
    }
    let scene = sim.scene();
    if let Some(path) = &outputs.png {
        compose(&scene, style)?.write_png(path)?;
    }
    Ok(scene)
}

struct GifWriter {
    encoder: gif::Encoder<std::io::BufWriter<std::fs::File>>,
    style: Style,
    path: PathBuf,
}

impl GifWriter {
    fn create(path: &Path, first: &Scene, style: &Style) -> Result<GifWriter, String> {
        let err = |e: &dyn std::fmt::Display| format!("writing {}: {e}", path.display());
        let map = render_map(first, style);
        if map.width > u16::MAX as usize || map.height > u16::MAX as usize {
            return Err(err(&"map too large for a GIF"));
        }
        let file = std::io::BufWriter::new(std::fs::File::create(path).map_err(|e| err(&e))?);
        let mut encoder = gif::Encoder::new(file, map.width as u16, map.height as u16, &[]).map_err(|e| err(&e))?;
        encoder.set_repeat(gif::Repeat::Infinite).map_err(|e| err(&e))?;
        let mut w = GifWriter { encoder, style: *style, path: path.to_path_buf() };
        w.write(map)?;
        Ok(w)
    }

    fn frame(&mut self, scene: &Scene) -> Result<(), String> {
        let map = render_map(scene, &self.style);
        self.write(map)
    }

    fn write(&mut self, mut map: Picture) -> Result<(), String> {
        // Speed 10 of NeuQuant: good colours at a few ms per frame.
        let mut frame = gif::Frame::from_rgba_speed(map.width as u16, map.height as u16, &mut map.rgba, 10);
        frame.delay = 8;
        self.encoder.write_frame(&frame).map_err(|e| format!("writing {}: {e}", self.path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raster::Fill;

    /// A run stops at the first tick that changes nothing, with that tick's frame; a GIF
    /// holds the start, every `gif_every`-th tick and the last; the PNG is the map with the
    /// charts beside it, at least 600 pixels high.
    #[test]
    fn a_run_stops_where_nothing_changes_with_its_last_frame() {
        let dir = std::env::temp_dir().join(format!("pbs-visual-headless-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let outputs = Outputs { png: Some(dir.join("m.png")), gif: Some(dir.join("m.gif")), gif_every: 3 };
        let style = Style { px: 20, fill: Fill::Owner, arrows: true };
        let mut sim = crate::runner::tests::counter(7, usize::MAX);
        let mut told = Vec::new();
        let scene = run(sim.as_mut(), 100, &style, &outputs, |t| told.push(t)).unwrap();
        assert_eq!(scene.status, "a 7");
        assert_eq!(told, (1..=7).collect::<Vec<_>>());
        let bytes = std::fs::read(dir.join("m.gif")).unwrap();
        let mut decoder = gif::DecodeOptions::new().read_info(std::io::Cursor::new(&bytes)).unwrap();
        let mut frames = 0;
        while decoder.read_next_frame().unwrap().is_some() {
            frames += 1;
        }
        assert_eq!(frames, 4, "the start, ticks 3 and 6, and tick 7 where it settled");
        let pic = crate::raster::Picture::read_png(&dir.join("m.png")).unwrap();
        assert_eq!((pic.width, pic.height), (20 + CHARTS_WIDTH, 600));
        // A failing tick ends the run with its error; nothing is written.
        let failing = Outputs { png: Some(dir.join("f.png")), gif: None, gif_every: 0 };
        let mut sim = crate::runner::tests::counter(usize::MAX, 3);
        assert_eq!(run(sim.as_mut(), 10, &style, &failing, |_| {}).unwrap_err(), "boom at 3");
        assert!(!dir.join("f.png").exists());
        std::fs::remove_dir_all(&dir).ok();
    }

    /// A GIF's sides are 16-bit: a map of 65,535 pixels a side is written, one more refused.
    #[test]
    fn a_gif_takes_maps_up_to_65535_pixels_a_side() {
        let path = std::env::temp_dir().join(format!("pbs-visual-wide-{}.gif", std::process::id()));
        let style = Style { px: 1, fill: Fill::Heat, arrows: false };
        let strip = crate::scene::tests::blank;
        for (nx, ny) in [(65535, 1), (1, 65535)] {
            assert!(GifWriter::create(&path, &strip(nx, ny), &style).is_ok(), "{nx}×{ny}");
        }
        for (nx, ny) in [(65536, 1), (1, 65536)] {
            let e = GifWriter::create(&path, &strip(nx, ny), &style).err().expect("refused");
            assert!(e.ends_with("map too large for a GIF"), "{nx}×{ny}: {e}");
        }
        std::fs::remove_file(&path).ok();
    }
}
