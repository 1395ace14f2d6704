//! `pbs-visual`: the live simulator in a window, or headless into PNG/GIF files. See `--help`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use eframe::egui;
use pbs_visual::app::{Capture, Start, Viewer};
use pbs_visual::headless::{self, Outputs};
use pbs_visual::live::LiveApp;
use pbs_visual::model::{LoadKind, Model, Settings};
use pbs_visual::raster::{Fill, MapLayout, Style};
use pbs_visual::runner::Simulation;

#[derive(Parser)]
#[command(name = "pbs-visual", version, about = "The pbs simulator: load maps, vCores and their cells, live")]
struct Cli {
    /// Grid size, NXxNY, or NXxNYxNZ for a 3D grid drawn layer by layer (a CSV load brings its
    /// own)
    #[arg(long, default_value = "150x150")]
    grid: String,
    /// Number of vCores
    #[arg(long, default_value_t = 72)]
    vcores: usize,
    /// Method: power-cells (the default), paper-eq7, paper-eq7-attract, paper-eq6, paper-eq4, paper-eq1
    #[arg(long, default_value = pbs::methods::DEFAULT)]
    method: String,
    /// Load: uniform, line, disc, random, perlin, or a .csv file (a 3D one: a blank line between
    /// layers)
    #[arg(long, default_value = "perlin")]
    load: String,
    /// Seed of the start positions, the random case and the Perlin map
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Fraction of each step's displacement that is applied, in (0, 1]
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    step_fraction: f64,
    /// Let the Perlin map drift (a smooth transition before every step)
    #[arg(long)]
    drift: bool,
    /// Drift per step, in boxes
    #[arg(long, default_value_t = 0.3, allow_negative_numbers = true)]
    drift_speed: f64,
    /// Show a grid app running on the pbs executor instead: md or stencil
    #[arg(long)]
    app: Option<String>,
    /// Scenario of the app (md: uniform, contraction, expansion, gravity; stencil: drift, rough)
    #[arg(long, default_value = "")]
    scenario: String,
    /// Worker threads of the app
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Start playing at once (the window starts paused otherwise)
    #[arg(long)]
    play: bool,
    /// Window: at most this many steps per second while playing (0: as fast as it goes)
    #[arg(long, default_value_t = 30.0, allow_negative_numbers = true)]
    rate: f64,
    /// No window: run --steps steps and write --png (and --gif)
    #[arg(long)]
    headless: bool,
    /// Headless: steps (app: iterations) to run; stops early when converged and nothing drives the map
    #[arg(long, default_value_t = 100)]
    steps: usize,
    /// Headless: the final map and charts as a PNG
    #[arg(long)]
    png: Option<PathBuf>,
    /// Headless: an animated GIF of the map
    #[arg(long)]
    gif: Option<PathBuf>,
    /// Headless: steps between GIF frames
    #[arg(long, default_value_t = 1)]
    gif_every: usize,
    /// Box fill: owner (owner colours shaded by load) or heat (heat map, cells outlined)
    #[arg(long, default_value = "owner")]
    fill: String,
    /// Pixels per box (default: the longer side about 720 pixels)
    #[arg(long)]
    px: Option<usize>,
    /// Window size in logical pixels, WxH
    #[arg(long, default_value = "1024x768")]
    window: String,
    /// Window: after --frames frames, save a screenshot here, print the frame times and close
    #[arg(long)]
    screenshot: Option<PathBuf>,
    /// Window: frames to measure before the screenshot
    #[arg(long, default_value_t = 120)]
    frames: usize,
    /// Window: also write the frame times here (JSON)
    #[arg(long)]
    frame_stats: Option<PathBuf>,
}

fn parse_size(flag: &str, s: &str) -> Result<(usize, usize), String> {
    let bad = || format!("{flag} {s:?}: expected two numbers as AxB, for example 150x150");
    let (a, b) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    Ok((a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?))
}

/// `--grid`: NXxNY, or NXxNYxNZ.
fn parse_grid(s: &str) -> Result<[usize; 3], String> {
    let bad =
        || format!("--grid {s:?}: expected two or three numbers as NXxNY or NXxNYxNZ, for example 150x150 or 40x40x20");
    let sides: Vec<usize> =
        s.split(['x', 'X']).map(|n| n.trim().parse().map_err(|_| bad())).collect::<Result<_, _>>()?;
    match sides[..] {
        [nx, ny] => Ok([nx, ny, 1]),
        [nx, ny, nz] => Ok([nx, ny, nz]),
        _ => Err(bad()),
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pbs-visual: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The longest side of a headless image: more than PNG viewers and memory take gladly.
const MAX_IMAGE_SIDE: usize = 16384;

fn run(cli: Cli) -> Result<(), String> {
    let [nx, ny, nz] = parse_grid(&cli.grid)?;
    if !(cli.drift_speed.is_finite() && cli.drift_speed.abs() <= 1e6) {
        return Err(format!("--drift-speed must be finite and at most 1e6 boxes per step, got {}", cli.drift_speed));
    }
    if cli.px == Some(0) {
        return Err("--px must be at least 1 pixel per box".into());
    }
    // The window's options are checked headless too, so that a bad one is never silently ignored.
    if !(cli.rate.is_finite() && cli.rate >= 0.0) {
        return Err(format!("--rate must be finite and ≥ 0, got {}", cli.rate));
    }
    let (w, h) = parse_size("--window", &cli.window)?;
    if w == 0 || h == 0 {
        return Err(format!("--window {}: each side must be at least 1 pixel", cli.window));
    }
    let settings = Settings {
        nx,
        ny,
        nz,
        vcores: cli.vcores,
        method: cli.method.clone(),
        step_fraction: cli.step_fraction,
        load: LoadKind::parse(&cli.load)?,
        seed: cli.seed,
        drift: cli.drift,
        drift_speed: cli.drift_speed,
    };
    let fill = match cli.fill.as_str() {
        "owner" => Fill::Owner,
        "heat" => Fill::Heat,
        other => return Err(format!("--fill {other:?}: expected owner or heat")),
    };
    // A grid wider than a picture can be is refused before it is built (a CSV map's grid is
    // checked below, once read).
    let grid_from_csv = matches!(settings.load, LoadKind::Csv(_)) && cli.app.is_none();
    if !grid_from_csv {
        let grid = pbs::Grid::new_3d(nx, ny, nz).map_err(|e| format!("--grid {}: {e}", cli.grid))?;
        let (w, h) = MapLayout::extent_in_boxes(&grid);
        if w.max(h) > MAX_IMAGE_SIDE {
            return Err(format!(
                "--grid {}: a map {w}×{h} boxes wide and high{}, over {MAX_IMAGE_SIDE} boxes a side, more than a \
                 picture of at least a pixel a box holds",
                cli.grid,
                if nz > 1 { " with its layers side by side" } else { "" }
            ));
        }
    }
    let app = match &cli.app {
        Some(name) => Some(LiveApp::new(name, &cli.scenario, [nx, ny, nz], cli.threads)?),
        None => None,
    };
    if cli.headless {
        if cli.png.is_none() && cli.gif.is_none() {
            return Err("--headless needs --png and/or --gif".into());
        }
        if cli.gif_every == 0 {
            return Err("--gif-every must be at least 1".into());
        }
    }
    // Bad settings are refused here, before a window opens.
    let mut sim: Box<dyn Simulation> = match app {
        Some(a) => Box::new(a),
        None => Box::new(Model::new(settings.clone())?),
    };
    let grid = sim.scene().grid;
    let mut style = Style::fit(&grid, 720);
    style.fill = fill;
    if let Some(px) = cli.px {
        style.px = px;
    }
    // The window draws the same picture as a texture (and shrinks it further where the display
    // takes less, see `app`).
    let (w_boxes, h_boxes) = MapLayout::extent_in_boxes(&grid);
    let side = w_boxes.max(h_boxes).checked_mul(style.px).filter(|&s| s <= MAX_IMAGE_SIDE);
    if side.is_none() {
        return Err(format!(
            "--px {}: the map of a {grid} grid ({w_boxes}×{h_boxes} boxes{}) at {} pixels a box is over \
             {MAX_IMAGE_SIDE} pixels a side; take fewer pixels per box",
            style.px,
            if grid.nz() > 1 { " with its layers side by side" } else { "" },
            style.px
        ));
    }
    if cli.headless {
        let bar = pbs_plot::progress::bar(cli.steps as u64, "steps");
        let outputs = Outputs { png: cli.png.clone(), gif: cli.gif.clone(), gif_every: cli.gif_every };
        let scene = headless::run(sim.as_mut(), cli.steps, &style, &outputs, |t| bar.set_position(t as u64))?;
        bar.finish_and_clear();
        println!("{}", scene.status);
        for p in [&cli.png, &cli.gif].into_iter().flatten() {
            println!("wrote {}", p.display());
        }
        return Ok(());
    }
    let start = match cli.app {
        Some(_) => Start::App(sim),
        None => Start::Balancer(settings),
    };
    let capture = cli.screenshot.clone().map(|png| Capture { png, frames: cli.frames, stats: cli.frame_stats.clone() });
    let mut options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default().with_inner_size([w as f32, h as f32]).with_title("pbs simulator"),
        ..Default::default()
    };
    if capture.is_some() {
        // Frames back to back, not paced by the display, so that their cost is what is measured.
        options.glow_options.vsync = false;
    }
    let (play, px, rate) = (cli.play, cli.px, cli.rate);
    eframe::run_native(
        "pbs-visual",
        options,
        Box::new(move |cc| {
            let mut viewer = Viewer::new(&cc.egui_ctx, start, play, capture)?;
            viewer.set_fill(fill, px);
            viewer.set_rate(rate);
            Ok(Box::new(viewer))
        }),
    )
    .map_err(|e| {
        format!(
            "could not open a window ({e}); is a display available? Without one, use --headless or run under xvfb-run"
        )
    })
}
