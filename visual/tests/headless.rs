//! The headless renderer draws what the state says: checked on the written PNG, at the size
//! of the frame-rate target (150×150 boxes, 72 vCores).

use std::path::PathBuf;
use std::process::Command;

use pbs::Grid;
use pbs_visual::headless::{self, Outputs};
use pbs_visual::model::{Model, Settings};
use pbs_visual::raster::{owner_colour, to_pixel, MapLayout, Picture, Style};

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pbs-visual-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_png_shows_every_vcore_in_its_colour_where_the_state_puts_it() {
    let dir = temp("png");
    let png = dir.join("scene.png");
    let mut model = Model::new(Settings { drift: true, ..Settings::default() }).unwrap();
    let style = Style::fit(&Grid::new(150, 150).unwrap(), 600);
    let outputs = Outputs { png: Some(png.clone()), gif: None, gif_every: 1 };
    let scene = headless::run(&mut model, 25, &style, &outputs, |_| {}).unwrap();
    let pic = Picture::read_png(&png).unwrap();
    std::fs::remove_dir_all(&dir).ok();

    // Map (150 boxes × 4 px) and the chart column beside it.
    assert_eq!(style.px, 4);
    assert_eq!((pic.width, pic.height), (600 + 560, 600));
    assert_eq!(scene.markers.len(), 72);
    assert_eq!(scene.history.len(), 26, "25 steps and the start");

    // Markers far enough apart not to cover each other's centre (the check below needs it).
    let r_boxes = (style.marker_radius() + 1.5) / style.px as f64;
    for (i, a) in scene.markers.iter().enumerate() {
        for b in &scene.markers[i + 1..] {
            assert!((a[0] - b[0]).hypot(a[1] - b[1]) > r_boxes, "markers {a:?} and {b:?} overlap");
        }
    }
    let mut colours = std::collections::HashSet::new();
    for y in 0..pic.height {
        for x in 0..600 {
            colours.insert(pic.get(x, y));
        }
    }
    for (i, m) in scene.markers.iter().enumerate() {
        let c = owner_colour(i as u32);
        assert!(colours.contains(&c), "vCore {i}'s colour {c:?} is missing");
        let [x, y] = to_pixel([m[0], m[1]], 150, style.px);
        // The marker's centre and the pixels a radius/2 around it have the vCore's colour.
        let r = style.marker_radius() / 2.0;
        for (dx, dy) in [(0.0, 0.0), (r, 0.0), (-r, 0.0), (0.0, r), (0.0, -r)] {
            let (px, py) = ((x + dx) as usize, (y + dy) as usize);
            assert_eq!(pic.get(px, py), c, "vCore {i} at {m:?}: pixel ({px}, {py})");
        }
    }
    // The charts column is drawn (not blank).
    let chart_colours: std::collections::HashSet<_> =
        (0..pic.height).flat_map(|y| (600..pic.width).map(move |x| (x, y))).map(|(x, y)| pic.get(x, y)).collect();
    assert!(chart_colours.len() > 10, "charts look blank: {} colours", chart_colours.len());
}

/// A 3D grid is drawn layer by layer: every vCore shows in its colour on the layer that holds
/// it, at its place in that layer, and nowhere else.
#[test]
fn the_png_of_a_cube_shows_each_vcore_on_its_layer() {
    let dir = temp("cube");
    let png = dir.join("cube.png");
    let mut model = Model::new(Settings { nx: 20, ny: 16, nz: 4, vcores: 12, ..Settings::default() }).unwrap();
    let style = Style::fit(&Grid::new_3d(20, 16, 4).unwrap(), 600);
    let outputs = Outputs { png: Some(png.clone()), gif: None, gif_every: 1 };
    let scene = headless::run(&mut model, 30, &style, &outputs, |_| {}).unwrap();
    let pic = Picture::read_png(&png).unwrap();
    std::fs::remove_dir_all(&dir).ok();

    // Two layers a row, two rows, a box of white between: 41 × 33 boxes at 14 px.
    let layout = MapLayout::new(&scene.grid, style.px);
    assert_eq!((style.px, layout.size()), (14, (41 * 14, 33 * 14)));
    assert_eq!((pic.width, pic.height), (41 * 14 + 560, 600));
    assert_eq!(layout.layers(), [0, 1, 2, 3]);
    // The white gap between the first two layers.
    assert_eq!(pic.get(20 * 14 + 7, 100), [255, 255, 255]);
    let r = style.marker_radius() / 2.0;
    for (i, m) in scene.markers.iter().enumerate() {
        let [x, y] = layout.to_pixel(*m).expect("every layer is drawn");
        let layer = m[2].floor() as usize;
        assert!(
            x >= ((layer % 2) * 21 * 14) as f64 && x <= ((layer % 2) * 21 * 14 + 20 * 14) as f64,
            "vCore {i} at {m:?}"
        );
        let c = owner_colour(i as u32);
        for (dx, dy) in [(0.0, 0.0), (r, 0.0), (-r, 0.0), (0.0, r), (0.0, -r)] {
            let (px, py) = ((x + dx) as usize, (y + dy) as usize);
            assert_eq!(pic.get(px, py), c, "vCore {i} at {m:?}: pixel ({px}, {py})");
        }
    }
}

#[test]
fn the_command_line_writes_a_png_and_an_animated_gif_and_refuses_bad_input() {
    let dir = temp("cli");
    let (png, gif) = (dir.join("m.png"), dir.join("m.gif"));
    let out = Command::new(env!("CARGO_BIN_EXE_pbs-visual"))
        .args(["--headless", "--grid", "60x40", "--vcores", "8", "--drift", "--steps", "12", "--gif-every", "3"])
        .args(["--fill", "heat", "--png"])
        .arg(&png)
        .arg("--gif")
        .arg(&gif)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let pic = Picture::read_png(&png).unwrap();
    assert_eq!((pic.width, pic.height), (12 * 60 + 560, 600));
    let bytes = std::fs::read(&gif).unwrap();
    assert_eq!(&bytes[..6], b"GIF89a");
    assert_eq!(u16::from_le_bytes([bytes[6], bytes[7]]), 720, "GIF width = the map's");
    // Frames: the start plus steps 3, 6, 9, 12; each starts with an image descriptor.
    let mut decoder = gif::DecodeOptions::new().read_info(std::io::Cursor::new(&bytes)).unwrap();
    let mut frames = 0;
    while decoder.read_next_frame().unwrap().is_some() {
        frames += 1;
    }
    assert_eq!(frames, 5);
    std::fs::remove_dir_all(&dir).ok();

    for (args, expect) in [
        (vec!["--headless", "--png", "/tmp/x.png", "--grid", "0x5"], "empty"),
        (vec!["--headless", "--png", "/tmp/x.png", "--grid", "5by5"], "--grid"),
        (vec!["--headless", "--png", "/tmp/x.png", "--grid", "5x5x5x5"], "NXxNYxNZ"),
        (vec!["--headless", "--png", "/tmp/x.png", "--grid", "5x5x0"], "--grid 5x5x0"),
        (vec!["--headless", "--png", "/tmp/x.png", "--grid", "9000x10x4"], "with its layers side by side"),
        (vec!["--headless", "--png", "/tmp/x.png", "--vcores", "0"], "vCore"),
        (vec!["--headless", "--png", "/tmp/x.png", "--load", "bogus"], "bogus"),
        (vec!["--headless", "--png", "/tmp/x.png", "--app", "fem"], "fem"),
        (vec!["--headless", "--png", "/tmp/x.png", "--fill", "rainbow"], "rainbow"),
        (vec!["--headless"], "--png"),
        (vec!["--headless", "--png", "/tmp/x.png", "--px", "0"], "--px"),
        (vec!["--headless", "--png", "/tmp/x.png", "--grid", "65535x65535"], "over 16384 boxes a side"),
        (vec!["--headless", "--png", "/tmp/x.png", "--grid", "65535x65535", "--app", "md"], "over 16384 boxes a side"),
        (vec!["--window", "0x600"], "--window"),
        // The window's picture is the headless one: the same limits, refused before it opens.
        (vec!["--grid", "20x10", "--vcores", "4", "--px", "100000"], "over 16384 pixels a side"),
        (vec!["--grid", "65535x65535"], "over 16384 boxes a side"),
        (vec!["--headless", "--png", "/tmp/x.png", "--window", "800by600"], "--window"),
        (vec!["--headless", "--png", "/tmp/x.png", "--rate", "-1"], "--rate"),
        (vec!["--rate", "NaN"], "--rate"),
        (vec!["--headless", "--png", "/tmp/x.png", "--drift-speed", "inf"], "--drift-speed"),
        (vec!["--headless", "--png", "/tmp/x.png", "--drift-speed", "1e19"], "at most 1e6"),
        (vec!["--headless", "--png", "/tmp/x.png", "--grid", "16385x1", "--vcores", "2"], "over 16384 boxes a side"),
        (vec!["--headless", "--png", "/tmp/x.png", "--gif-every", "0"], "--gif-every"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_pbs-visual")).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(expect), "{args:?}: {err}");
    }
}

/// A grid of exactly the largest side a picture takes is drawn, at a pixel a box.
#[test]
fn the_widest_grid_is_drawn() {
    let dir = temp("widest");
    let png = dir.join("widest.png");
    let out = Command::new(env!("CARGO_BIN_EXE_pbs-visual"))
        .args(["--headless", "--grid", "16384x1", "--vcores", "2", "--steps", "1", "--png"])
        .arg(&png)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(Picture::read_png(&png).unwrap().width >= 16384);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_live_app_view_renders_headless() {
    let dir = temp("app");
    let png = dir.join("md.png");
    let out = Command::new(env!("CARGO_BIN_EXE_pbs-visual"))
        .args(["--headless", "--app", "md", "--scenario", "gravity", "--grid", "24x24", "--threads", "2"])
        .args(["--steps", "5", "--png"])
        .arg(&png)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("md iteration 4"));
    let pic = Picture::read_png(&png).unwrap();
    assert_eq!((pic.width, pic.height), (720 + 560, 720));
    std::fs::remove_dir_all(&dir).ok();
}
