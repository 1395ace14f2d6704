//! The window: controls on the left, the map in the middle (the same picture the headless mode
//! writes, see [`crate::raster`]), the paper's charts at the bottom. The simulation runs on
//! its own thread ([`crate::runner`]); this thread only draws and forwards the user's input.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::time::Instant;

use eframe::egui::{self, Color32, ColorImage, Pos2, Rect, Sense, TextureHandle, TextureOptions};
use egui_plot::{Bar, BarChart, Legend, Line, Plot, PlotPoints};
use pbs::loadmap::Case;

use crate::model::{LoadKind, Model, Settings};
use crate::raster::{owner_colour, render_map, Fill, MapLayout, Picture, Style};
use crate::runner::{Command, Runner, Simulation};
use crate::scene::{Scene, SceneKind};

/// Take a screenshot after some frames and close: for tests and for measuring frame times.
#[derive(Debug, Clone)]
pub struct Capture {
    /// Frames to draw before the screenshot.
    pub frames: usize,
    /// Where the screenshot goes (PNG).
    pub png: PathBuf,
    /// Where the frame statistics go (JSON), if anywhere.
    pub stats: Option<PathBuf>,
}

/// Frame-time statistics of a captured run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FrameStats {
    /// Frames measured (the first ten, while the window settles, are left out).
    pub frames: usize,
    /// Median time between two frames, ms.
    pub frame_ms_median: f64,
    /// 95th percentile of the time between two frames, ms.
    pub frame_ms_p95: f64,
    /// Median CPU time eframe spent on a frame (UI and rendering), ms.
    pub cpu_ms_median: f64,
    /// `1000 / frame_ms_median`.
    pub fps_median: f64,
    /// Balancer steps (or app iterations) published while the frames were measured.
    pub sim_steps: usize,
    /// Window size in pixels, as captured.
    pub screenshot: [usize; 2],
    /// Markers (vCores or threads) in the last scene.
    pub markers: usize,
}

/// Which view the window runs.
pub enum Start {
    /// The balancer on a load map, with these settings.
    Balancer(Settings),
    /// A running app (already built).
    App(Box<dyn Simulation>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    VCores,
    Paint,
}

struct Screenshot {
    capture: Capture,
    requested: bool,
    inbox: Option<Receiver<Arc<ColorImage>>>,
}

/// The eframe application.
pub struct Viewer {
    runner: Runner,
    kind: SceneKind,
    draft: Settings,
    csv_path: String,
    playing: bool,
    rate: f64,
    style: Style,
    tool: Tool,
    paint_amount: f64,
    paint_radius: f64,
    scene: Option<Arc<Scene>>,
    generation: u64,
    texture: Option<TextureHandle>,
    drag: Option<usize>,
    last_frame: Option<Instant>,
    intervals: VecDeque<f64>,
    cpu: VecDeque<f64>,
    frames: usize,
    steps_at_start: Option<usize>,
    /// Why the last restart failed (the run before it goes on).
    error: Option<String>,
    /// Why the latest scene is not drawn (a grid wider than the display's textures); the next
    /// scene drawn clears it, whichever run it comes from.
    map_error: Option<String>,
    screenshot: Option<Screenshot>,
    all_intervals: Vec<f64>,
    all_cpu: Vec<f64>,
}

impl Viewer {
    /// A viewer on `start`; plays at once if `play`.
    pub fn new(ctx: &egui::Context, start: Start, play: bool, capture: Option<Capture>) -> Result<Viewer, String> {
        let repaint = ctx.clone();
        let (sim, kind, draft): (Box<dyn Simulation>, _, _) = match start {
            Start::Balancer(s) => (Box::new(Model::new(s.clone())?), SceneKind::Balancer, s),
            Start::App(sim) => (sim, SceneKind::App, Settings::default()),
        };
        Ok(Viewer::on(sim, kind, draft, move || repaint.request_repaint(), play, capture))
    }

    /// A viewer on a simulation already built, its settings in `draft`; `on_publish` is called
    /// after every new scene.
    fn on(
        sim: Box<dyn Simulation>,
        kind: SceneKind,
        draft: Settings,
        on_publish: impl Fn() + Send + 'static,
        play: bool,
        capture: Option<Capture>,
    ) -> Viewer {
        // Pixels per box from the grid shown (a CSV map's or an app's), as the headless mode does.
        let grid = sim.scene().grid;
        let style = Style::fit(&grid, 720);
        let runner = Runner::spawn(sim, on_publish);
        runner.play(play);
        let csv_path = match &draft.load {
            LoadKind::Csv(p) => p.display().to_string(),
            _ => String::new(),
        };
        Viewer {
            runner,
            kind,
            draft,
            csv_path,
            playing: play,
            rate: 30.0,
            style,
            tool: Tool::VCores,
            paint_amount: 0.5,
            paint_radius: 4.0,
            scene: None,
            generation: 0,
            texture: None,
            drag: None,
            last_frame: None,
            intervals: VecDeque::new(),
            cpu: VecDeque::new(),
            frames: 0,
            steps_at_start: None,
            error: None,
            map_error: None,
            screenshot: capture.map(|capture| Screenshot { capture, requested: false, inbox: None }),
            all_intervals: Vec::new(),
            all_cpu: Vec::new(),
        }
    }

    /// Box fill and, if given, pixels per box of the map (at least 1: 0 is taken as 1).
    pub fn set_fill(&mut self, fill: Fill, px: Option<usize>) {
        self.style.fill = fill;
        if let Some(px) = px {
            self.style.px = px.max(1);
        }
    }

    /// At most `per_second` steps per second while playing (0: no limit).
    pub fn set_rate(&mut self, per_second: f64) {
        self.rate = per_second;
        self.runner.rate(per_second);
    }

    fn restart(&mut self) {
        let mut s = self.draft.clone();
        if matches!(s.load, LoadKind::Csv(_)) {
            s.load = LoadKind::Csv(PathBuf::from(self.csv_path.trim()));
        }
        match Model::new(s) {
            Ok(m) => {
                self.style.px = Style::fit(&m.scene().grid, 720).px;
                self.runner.replace(Box::new(m));
                self.error = None;
            }
            Err(e) => self.error = Some(e),
        }
    }

    fn poll_scene(&mut self, ctx: &egui::Context) {
        let Some((scene, generation)) = self.runner.latest() else { return };
        if generation == self.generation && self.texture.is_some() {
            return;
        }
        self.generation = generation;
        self.draw(ctx, &scene);
        self.scene = Some(scene);
    }

    /// Draws `scene` into the map's texture, at fewer pixels per box where the display's
    /// largest texture needs it (egui panics on a larger one); a grid with more boxes a side
    /// than that texture has pixels is not drawn, and the error says why.
    fn draw(&mut self, ctx: &egui::Context, scene: &Scene) {
        let (w, h) = MapLayout::extent_in_boxes(&scene.grid);
        let side = w.max(h);
        let max = ctx.input(|i| i.max_texture_side);
        if side > max {
            self.map_error = Some(format!(
                "a map of {side} boxes a side cannot be shown: this display's textures are at most {max} pixels a side"
            ));
            self.texture = None;
            return;
        }
        self.map_error = None;
        self.style.px = self.style.px.min(max / side);
        let pic = render_map(scene, &self.style);
        let image = ColorImage::from_rgba_unmultiplied([pic.width, pic.height], &pic.rgba);
        match &mut self.texture {
            Some(t) => t.set(image, TextureOptions::NEAREST),
            None => self.texture = Some(ctx.load_texture("map", image, TextureOptions::NEAREST)),
        }
    }

    fn redraw(&mut self, ctx: &egui::Context) {
        if let Some(scene) = self.scene.clone() {
            self.draw(ctx, &scene);
        }
    }

    fn controls(&mut self, ui: &mut egui::Ui) {
        ui.heading(if self.kind == SceneKind::Balancer { "pbs simulator" } else { "pbs live app" });
        ui.horizontal(|ui| {
            if ui.button(if self.playing { "pause" } else { "play" }).clicked() {
                self.playing = !self.playing;
                self.runner.play(self.playing);
            }
            if ui.button("step").clicked() {
                self.runner.command(Command::Step);
            }
        });
        if ui.add(egui::Slider::new(&mut self.rate, 0.0..=240.0).text("max steps/s (0: no limit)")).changed() {
            self.runner.rate(self.rate);
        }
        if self.kind == SceneKind::Balancer {
            self.balancer_controls(ui);
        }
        ui.separator();
        ui.label("view");
        let mut changed = false;
        ui.horizontal(|ui| {
            changed |= ui.radio_value(&mut self.style.fill, Fill::Owner, "owner colours").changed();
            changed |= ui.radio_value(&mut self.style.fill, Fill::Heat, "heat map").changed();
        });
        changed |= ui.checkbox(&mut self.style.arrows, "displacement arrows").changed();
        if changed {
            self.redraw(ui.ctx());
        }
        ui.separator();
        if let Some(s) = &self.scene {
            ui.label(&s.status);
        }
        for e in [&self.error, &self.map_error].into_iter().flatten() {
            ui.colored_label(Color32::RED, e);
        }
        let med = pbs::metrics::median(&self.intervals.iter().copied().collect::<Vec<_>>());
        let cpu = pbs::metrics::median(&self.cpu.iter().copied().collect::<Vec<_>>());
        ui.label(format!("frame {med:.1} ms ({:.0} fps), cpu {cpu:.1} ms", 1000.0 / med.max(1e-3)));
    }

    fn balancer_controls(&mut self, ui: &mut egui::Ui) {
        let perlin = self.draft.load == LoadKind::Perlin;
        ui.horizontal(|ui| {
            if ui.add_enabled(perlin, egui::Button::new("rough transition")).clicked() {
                self.runner.command(Command::Rough);
            }
        });
        let mut drift = false;
        ui.add_enabled_ui(perlin, |ui| {
            drift |= ui.checkbox(&mut self.draft.drift, "smooth drift").changed();
            drift |= ui.add(egui::Slider::new(&mut self.draft.drift_speed, 0.0..=2.0).text("boxes/step")).changed();
        });
        if drift {
            self.runner.command(Command::Drift { on: self.draft.drift, speed: self.draft.drift_speed });
        }
        egui::ComboBox::from_label("method").selected_text(self.draft.method.clone()).show_ui(ui, |ui| {
            for name in pbs::methods::NAMES {
                if ui.selectable_value(&mut self.draft.method, (*name).to_string(), *name).changed() {
                    self.runner.command(Command::Method((*name).to_string()));
                }
            }
        });
        if ui.add(egui::Slider::new(&mut self.draft.step_fraction, 0.05..=1.0).text("step fraction")).changed() {
            self.runner.command(Command::StepFraction(self.draft.step_fraction));
        }
        ui.separator();
        ui.label("mouse");
        ui.horizontal(|ui| {
            ui.radio_value(&mut self.tool, Tool::VCores, "add / drag vCores");
            ui.radio_value(&mut self.tool, Tool::Paint, "paint load");
        });
        if self.tool == Tool::Paint {
            ui.add(
                egui::Slider::new(&mut self.paint_amount, 0.05..=5.0)
                    .text("load per dab: a click, a drag's each move (shift erases)"),
            );
            ui.add(egui::Slider::new(&mut self.paint_radius, 1.0..=20.0).text("brush radius"));
            if ui.button("clear paint").clicked() {
                self.runner.command(Command::ClearPaint);
            }
        }
        ui.separator();
        ui.label("new run");
        egui::Grid::new("settings").num_columns(2).show(ui, |ui| {
            ui.label("grid");
            // Each field is named for screen readers (and the tests, which find widgets by name).
            ui.horizontal(|ui| {
                ui.add(egui::DragValue::new(&mut self.draft.nx).range(1..=2000)).accessible_name("boxes across");
                ui.label("×");
                ui.add(egui::DragValue::new(&mut self.draft.ny).range(1..=2000)).accessible_name("boxes up");
                ui.label("×");
                ui.add(egui::DragValue::new(&mut self.draft.nz).range(1..=200)).accessible_name("layers");
            });
            ui.end_row();
            let label = ui.label("vCores");
            ui.add(egui::DragValue::new(&mut self.draft.vcores).range(1..=10000)).labelled_by(label.id);
            ui.end_row();
            let label = ui.label("load");
            egui::ComboBox::from_id_salt("load")
                .selected_text(load_label(&self.draft.load))
                .show_ui(ui, |ui| {
                    for c in Case::ALL {
                        ui.selectable_value(&mut self.draft.load, LoadKind::Case(c), c.name());
                    }
                    ui.selectable_value(&mut self.draft.load, LoadKind::Perlin, "perlin");
                    ui.selectable_value(&mut self.draft.load, LoadKind::Csv(PathBuf::new()), "CSV file");
                })
                .response
                .labelled_by(label.id);
            ui.end_row();
            if matches!(self.draft.load, LoadKind::Csv(_)) {
                let label = ui.label("CSV path");
                ui.text_edit_singleline(&mut self.csv_path).labelled_by(label.id);
                ui.end_row();
            }
            let label = ui.label("seed");
            ui.add(egui::DragValue::new(&mut self.draft.seed)).labelled_by(label.id);
            ui.end_row();
        });
        if ui.button("restart with these settings").clicked() {
            self.restart();
        }
    }

    fn charts(&self, ui: &mut egui::Ui) {
        let Some(scene) = &self.scene else { return };
        let h = &scene.history;
        let series = |f: &dyn Fn(&pbs::StepRecord) -> f64| -> PlotPoints<'static> {
            h.iter().map(|r| [r.step as f64, f(r)]).collect()
        };
        let height = ui.available_height().max(80.0);
        // Four columns of equal width, each chart filling its own, axes included.
        ui.columns_const(|[c0, c1, c2, c3]| {
            let plot = |id: &str| Plot::new(id.to_string()).height(height).legend(Legend::default());
            let named = |shown: egui_plot::PlotResponse<()>, name: &str| {
                shown.response.accessible_name(format!("{name} chart"));
            };
            let shown = plot("max_avg").include_y(1.0).show(c0, |p| {
                p.line(Line::new("max_avg", series(&|r| r.max_avg)).color(Color32::from_rgb(31, 119, 180)));
            });
            named(shown, "max_avg");
            let shown = plot("dol").include_y(0.0).show(c1, |p| {
                p.line(Line::new("dol_max", series(&|r| r.dol_max)).color(Color32::from_rgb(214, 39, 40)));
                p.line(Line::new("dol_min", series(&|r| r.dol_min)).color(Color32::from_rgb(44, 160, 44)));
            });
            named(shown, "DOL");
            let shown = plot("migrations").include_y(0.0).show(c2, |p| {
                p.line(
                    Line::new("migrations", series(&|r| r.migrations as f64)).color(Color32::from_rgb(148, 103, 189)),
                );
            });
            named(shown, "migrations");
            let shown = plot("bars").include_y(0.0).show(c3, |p| {
                let bars = scene
                    .bars
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        let c = owner_colour(i as u32);
                        Bar::new(i as f64, *v).width(0.8).fill(Color32::from_rgb(c[0], c[1], c[2]))
                    })
                    .collect();
                p.bar_chart(BarChart::new(scene.bars_label, bars));
            });
            named(shown, scene.bars_label);
        });
    }

    fn map(&mut self, ui: &mut egui::Ui) {
        let (Some(tex), Some(scene)) = (&self.texture, self.scene.clone()) else {
            let refused = self.error.is_some() || self.map_error.is_some();
            ui.label(if refused { "no map (see the error)" } else { "waiting for the first scene…" });
            return;
        };
        let [w, h] = tex.size();
        let avail = ui.available_size();
        let scale = (avail.x / w as f32).min(avail.y / h as f32).max(0.05);
        let size = egui::vec2(w as f32 * scale, h as f32 * scale);
        let (rect, response) = ui.allocate_exact_size(size, Sense::click_and_drag());
        let response = response.accessible_name("load map");
        let uv = Rect::from_min_max(Pos2::ZERO, Pos2::new(1.0, 1.0));
        ui.painter().image(tex.id(), rect, uv, Color32::WHITE);
        if self.kind != SceneKind::Balancer {
            return;
        }
        let Some(pointer) = response.interact_pointer_pos() else {
            self.drag = None;
            return;
        };
        let layout = MapLayout::new(&scene.grid, self.style.px);
        let in_boxes = |at: Pos2| {
            let q = (at - rect.min) / scale;
            layout.to_domain([f64::from(q.x), f64::from(q.y)])
        };
        // Off the map, or between a 3D grid's layers, the pointer adds, moves and paints nothing.
        let p = in_boxes(pointer);
        match self.tool {
            Tool::VCores => {
                let grab = 1.5 * self.style.marker_radius() / self.style.px as f64;
                if response.drag_started() {
                    // The vCore under the press, not under the pointer: a fast drag is already
                    // away from it when it is recognised as a drag.
                    let origin = ui.input(|i| i.pointer.press_origin()).unwrap_or(pointer);
                    self.drag = in_boxes(origin).and_then(|o| scene.marker_near(o, grab));
                }
                match (self.drag, p) {
                    (Some(i), Some(p)) if response.dragged() && response.drag_delta() != egui::Vec2::ZERO => {
                        self.runner.command(Command::MoveVCore(i, p));
                    }
                    (None, Some(p)) if response.clicked() && scene.marker_near(p, grab).is_none() => {
                        self.runner.command(Command::AddVCore(p));
                    }
                    _ => {}
                }
                if response.drag_stopped() {
                    self.drag = None;
                }
            }
            Tool::Paint => {
                // A dab per click and per frame a drag moved in: held still, a brush adds
                // nothing more (it added at every frame, as many as the frame rate).
                let moved = response.dragged() && response.drag_delta() != egui::Vec2::ZERO;
                if let Some(p) = p.filter(|_| moved || response.clicked()) {
                    let sign = if ui.input(|i| i.modifiers.shift) { -1.0 } else { 1.0 };
                    self.runner.command(Command::Paint {
                        at: p,
                        radius: self.paint_radius,
                        amount: sign * self.paint_amount,
                    });
                }
            }
        }
    }

    /// One frame: controls, charts and map; `cpu_seconds` is what eframe says the last frame cost.
    fn show(&mut self, ui: &mut egui::Ui, cpu_seconds: Option<f32>) {
        self.measure(cpu_seconds);
        let ctx = ui.ctx().clone();
        self.poll_scene(&ctx);
        egui::Panel::left("controls").default_size(300.0).show(ui, |ui| {
            egui::ScrollArea::vertical().show(ui, |ui| self.controls(ui));
        });
        egui::Panel::bottom("charts").default_size(230.0).resizable(true).show(ui, |ui| self.charts(ui));
        egui::CentralPanel::default_margins().show(ui, |ui| self.map(ui));
        self.screenshot(&ctx);
    }

    /// Records the time since the last frame and `cpu_seconds`, what eframe says the last one cost.
    fn measure(&mut self, cpu_seconds: Option<f32>) {
        let now = Instant::now();
        if let Some(last) = self.last_frame {
            let dt = (now - last).as_secs_f64() * 1e3;
            push_capped(&mut self.intervals, dt);
            if self.steps_at_start.is_some() {
                self.all_intervals.push(dt);
            }
        }
        if let Some(cpu) = cpu_seconds {
            let ms = f64::from(cpu) * 1e3;
            push_capped(&mut self.cpu, ms);
            if self.steps_at_start.is_some() {
                self.all_cpu.push(ms);
            }
        }
        self.last_frame = Some(now);
        self.frames += 1;
    }

    fn screenshot(&mut self, ctx: &egui::Context) {
        let Some(shot) = &mut self.screenshot else { return };
        // Frames are drawn back to back while a capture runs, so that their time is measured.
        ctx.request_repaint();
        if self.frames == 10 {
            // The first frames, while the window settles, are not measured.
            self.steps_at_start = Some(self.scene.as_ref().map_or(0, |s| last_step(s)));
        }
        if !shot.requested && self.frames >= shot.capture.frames + 10 {
            let (tx, rx) = mpsc::channel();
            ctx.request_screenshot(move |image| {
                let _ = tx.send(image);
            });
            shot.requested = true;
            shot.inbox = Some(rx);
        }
        let Some(image) = shot.inbox.as_ref().and_then(|rx| rx.try_recv().ok()) else { return };
        let [w, h] = image.size;
        let rgba: Vec<u8> = image.pixels.iter().flat_map(|c| c.to_array()).collect();
        let pic = Picture { width: w, height: h, rgba };
        let med = pbs::metrics::median(&self.all_intervals);
        let stats = FrameStats {
            frames: self.all_intervals.len(),
            frame_ms_median: med,
            frame_ms_p95: percentile(&self.all_intervals, 0.95),
            cpu_ms_median: pbs::metrics::median(&self.all_cpu),
            fps_median: 1000.0 / med.max(1e-6),
            // A restart during the capture starts the steps over: none counted then, not a wrap.
            sim_steps: self.scene.as_ref().map_or(0, |s| last_step(s)).saturating_sub(self.steps_at_start.unwrap_or(0)),
            screenshot: [w, h],
            markers: self.scene.as_ref().map_or(0, |s| s.markers.len()),
        };
        let result = pic.write_png(&shot.capture.png).and_then(|()| {
            let json = serde_json::to_string_pretty(&stats).expect("plain data");
            println!("{json}");
            match &shot.capture.stats {
                Some(p) => std::fs::write(p, json).map_err(|e| format!("writing {}: {e}", p.display())),
                None => Ok(()),
            }
        });
        if let Err(e) = result {
            eprintln!("pbs-visual: {e}");
            std::process::exit(1);
        }
        ctx.send_viewport_cmd(egui::ViewportCommand::Close);
    }
}

fn load_label(l: &LoadKind) -> String {
    match l {
        LoadKind::Csv(_) => "CSV file".into(),
        other => other.name(),
    }
}

fn last_step(s: &Scene) -> usize {
    s.history.last().map_or(0, |r| r.step)
}

fn push_capped(q: &mut VecDeque<f64>, v: f64) {
    q.push_back(v);
    if q.len() > 120 {
        q.pop_front();
    }
}

fn percentile(xs: &[f64], p: f64) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

impl eframe::App for Viewer {
    fn ui(&mut self, ui: &mut egui::Ui, frame: &mut eframe::Frame) {
        self.show(ui, frame.info().cpu_usage);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    use std::time::Duration;

    use egui::{Modifiers, Role, TextureId};
    use egui_kittest::kittest::{NodeT, Queryable};
    use egui_kittest::{Harness, TestRenderer};

    use super::*;
    use pbs::Point;

    #[test]
    fn percentiles() {
        assert_eq!(percentile(&[], 0.95), 0.0);
        assert_eq!(percentile(&[5.0, 1.0, 3.0], 0.5), 3.0);
        assert_eq!(percentile(&(1..=100).map(f64::from).collect::<Vec<_>>(), 0.95), 95.0);
    }

    #[test]
    fn the_frame_window_keeps_the_last_120_intervals() {
        let mut q = VecDeque::new();
        for v in 0..120 {
            push_capped(&mut q, f64::from(v));
        }
        assert_eq!((q.len(), q[0]), (120, 0.0));
        push_capped(&mut q, 120.0);
        assert_eq!((q.len(), q[0], q[119]), (120, 1.0, 120.0));
    }

    /// A model that counts its ticks and keeps the commands it was sent, so that a test sees
    /// what the window asked of the simulation thread.
    struct Recorder {
        model: Model,
        commands: Arc<Mutex<Vec<Command>>>,
        ticks: Arc<AtomicUsize>,
    }

    impl Simulation for Recorder {
        fn tick(&mut self) -> Result<bool, String> {
            self.ticks.fetch_add(1, Ordering::SeqCst);
            self.model.tick()
        }
        fn apply(&mut self, command: Command) -> Result<(), String> {
            self.commands.lock().unwrap().push(command.clone());
            self.model.apply(command)
        }
        fn scene(&self) -> Scene {
            self.model.scene()
        }
    }

    /// The textures the window uploads, kept for the test (the harness draws nothing).
    #[derive(Clone, Default)]
    struct Uploads(Arc<Mutex<Vec<Upload>>>);

    /// A texture and the picture set in it.
    type Upload = (TextureId, Arc<ColorImage>);

    impl TestRenderer for Uploads {
        fn handle_delta(&mut self, delta: &mut egui::TexturesDelta) {
            for (id, deltas) in delta.set.drain() {
                for d in deltas {
                    let egui::ImageData::Color(image) = d.image;
                    self.0.lock().unwrap().push((id, image));
                }
            }
            // Textures freed: nothing to free here.
            delta.clear();
        }
    }

    /// The window on a [`Recorder`], driven headless through its AccessKit tree.
    struct Window {
        h: Harness<'static, Viewer>,
        commands: Arc<Mutex<Vec<Command>>>,
        ticks: Arc<AtomicUsize>,
        uploads: Uploads,
    }

    /// 20 × 10 boxes, 4 vCores: small enough that a step takes no time.
    fn small() -> Settings {
        Settings { nx: 20, ny: 10, vcores: 4, seed: 3, ..Settings::default() }
    }

    fn window(kind: SceneKind, settings: Settings, play: bool) -> Window {
        window_with_draft(kind, settings.clone(), settings, play)
    }

    /// A window on a model of `settings` whose "new run" controls start from `draft`.
    fn window_with_draft(kind: SceneKind, settings: Settings, draft: Settings, play: bool) -> Window {
        let (commands, ticks, uploads) = (Arc::default(), Arc::default(), Uploads::default());
        let model = Model::new(settings).unwrap();
        let sim = Recorder { model, commands: Arc::clone(&commands), ticks: Arc::clone(&ticks) };
        let viewer = Viewer::on(Box::new(sim), kind, draft, || {}, play, None);
        let h = Harness::builder()
            .with_size([1280.0, 1000.0])
            .renderer(uploads.clone())
            .build_ui_state(|ui, v: &mut Viewer| v.show(ui, None), viewer);
        let mut w = Window { h, commands, ticks, uploads };
        w.until("the first scene", |v| v.scene.is_some());
        w
    }

    impl Window {
        /// Draws frames until `done` holds (the simulation answers from its own thread).
        fn until(&mut self, what: &str, done: impl Fn(&Viewer) -> bool) {
            let start = Instant::now();
            loop {
                self.h.step();
                if done(self.h.state()) {
                    return;
                }
                assert!(start.elapsed() < Duration::from_secs(20), "{what}: not within 20 s");
                std::thread::sleep(Duration::from_millis(2));
            }
        }

        /// Draws frames until `n` commands have arrived; returns them all.
        fn commands(&mut self, n: usize) -> Vec<Command> {
            let log = Arc::clone(&self.commands);
            self.until(&format!("{n} commands"), move |_| log.lock().unwrap().len() >= n);
            self.commands.lock().unwrap().clone()
        }

        fn ticks(&self) -> usize {
            self.ticks.load(Ordering::SeqCst)
        }

        fn scene(&self) -> Arc<Scene> {
            Arc::clone(self.h.state().scene.as_ref().unwrap())
        }

        /// Clicks the widget of this label and draws the frames that take the click.
        fn click(&mut self, label: &str) {
            self.h.get_by_label(label).click();
            // The frames of the pointer's events, then one drawn after the click.
            self.h.step();
            self.h.step();
        }

        /// Where a point in box units shows on screen.
        fn on_screen(&self, p: Point) -> Pos2 {
            let rect = self.h.get_by_label("load map").rect();
            let (scene, px) = (self.scene(), self.h.state().style.px);
            let layout = MapLayout::new(&scene.grid, px);
            let q = layout.to_pixel(p).expect("a layer drawn");
            let scale = f64::from(rect.width()) / layout.size().0 as f64;
            rect.min + egui::vec2((q[0] * scale) as f32, (q[1] * scale) as f32)
        }

        /// A press and release at `p` (box units) on the map.
        fn click_map(&mut self, p: Point) {
            let at = self.on_screen(p);
            self.h.hover_at(at);
            self.h.drag_at(at);
            self.h.drop_at(at);
            self.h.step();
        }

        /// Types `path` into the new run's CSV field (the CSV load chosen) and restarts.
        fn restart_on_csv(&mut self, path: &str) {
            self.h.get_by_label("CSV path").set_text_value_accesskit(path);
            self.h.step();
            self.click("restart with these settings");
        }

        /// The last picture of the map uploaded as a texture.
        fn map_texture(&self) -> Arc<ColorImage> {
            let id = self.h.state().texture.as_ref().expect("a map texture").id();
            let uploads = self.uploads.0.lock().unwrap();
            Arc::clone(&uploads.iter().rev().find(|(i, _)| *i == id).expect("the map uploaded").1)
        }
    }

    /// A fresh folder for a test's files, under the system's temporary folder.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("pbs-visual-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Whether two points are within 0.05 boxes of each other across the map (x and y).
    fn near(a: Point, b: Point) -> bool {
        (a[0] - b[0]).abs() < 0.05 && (a[1] - b[1]).abs() < 0.05
    }

    /// A point of the grid's box centres that no marker is near enough to grab.
    fn empty_spot(scene: &Scene, grab: f64) -> Point {
        let (nx, ny) = (scene.grid.nx(), scene.grid.ny());
        (0..nx * ny)
            .map(|k| [(k % nx) as f64 + 0.5, (k / nx) as f64 + 0.5, 0.5])
            .find(|&p| scene.marker_near(p, grab + 0.5).is_none())
            .expect("an empty spot on the map")
    }

    /// Paused at the start, nothing ticks; "step" sends one step; "play" ticks until "pause"
    /// (a drifting map always has work, so the ticks stop only because of the pause).
    #[test]
    fn play_pause_and_step_drive_the_simulation_thread() {
        let mut w = window(SceneKind::Balancer, Settings { drift: true, ..small() }, false);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(w.ticks(), 0, "paused at the start");
        w.click("step");
        assert_eq!(w.commands(1), [Command::Step]);
        w.until("step 1 shown", |v| v.scene.as_ref().unwrap().status.contains(" · step 1 · "));
        assert!(w.h.query_by_label("pause").is_none());
        w.click("play");
        let ticks = Arc::clone(&w.ticks);
        w.until("ticks while playing", move |_| ticks.load(Ordering::SeqCst) > 2);
        assert!(w.h.state().playing);
        w.click("pause");
        assert!(!w.h.state().playing);
        // The pause reaches the thread between two ticks.
        std::thread::sleep(Duration::from_millis(100));
        let paused = w.ticks();
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(w.ticks(), paused, "no tick after the pause");
        assert!(w.h.query_by_label("play").is_some());
        assert_eq!(w.commands(1), [Command::Step], "play and pause are not commands");
    }

    /// At 5 steps a second, set on the slider or by `--rate` (`set_rate`), no more ticks than
    /// one plus 5 a second (the default 30 would give six times as many).
    #[test]
    fn the_rate_bounds_the_steps_a_second() {
        for slider in [true, false] {
            let mut w = window(SceneKind::Balancer, Settings { drift: true, ..small() }, false);
            if slider {
                w.h.get_by_role_and_label(Role::Slider, "max steps/s (0: no limit)").set_value_accesskit(5.0);
            } else {
                w.h.state_mut().set_rate(5.0);
            }
            w.h.step();
            assert_eq!(w.h.state().rate, 5.0);
            let start = Instant::now();
            w.click("play");
            std::thread::sleep(Duration::from_millis(600));
            let (ticks, bound) = (w.ticks(), 1 + (start.elapsed().as_secs_f64() * 5.0) as usize);
            assert!(ticks >= 1 && ticks <= bound, "slider {slider}: {ticks} ticks, at most {bound}");
        }
    }

    /// `--fill` and `--px` (`set_fill`) set the first picture; 0 pixels a box is taken as 1.
    #[test]
    fn the_fill_and_pixels_asked_draw_the_first_picture() {
        let mut w = window(SceneKind::Balancer, small(), false);
        w.h.state_mut().set_fill(Fill::Heat, Some(10));
        w.h.state_mut().texture = None;
        w.h.step();
        assert_eq!((w.h.state().style.fill, w.h.state().style.px), (Fill::Heat, 10));
        assert_eq!(w.map_texture().size, [200, 100]);
        w.h.state_mut().set_fill(Fill::Owner, None);
        assert_eq!((w.h.state().style.fill, w.h.state().style.px), (Fill::Owner, 10), "no --px: as it was");
        w.h.state_mut().set_fill(Fill::Owner, Some(0));
        assert_eq!(w.h.state().style.px, 1);
    }

    /// Each balancer control sends its command, with the value set.
    #[test]
    fn the_balancer_controls_send_their_commands() {
        let mut w = window(SceneKind::Balancer, small(), false);
        w.click("rough transition");
        w.click("smooth drift");
        w.h.get_by_role_and_label(Role::Slider, "boxes/step").set_value_accesskit(1.5);
        w.h.get_by_role_and_label(Role::Slider, "step fraction").set_value_accesskit(0.5);
        w.h.step();
        w.click("method");
        w.click("paper-eq4");
        w.click("paint load");
        w.click("clear paint");
        let sent = w.commands(6);
        assert_eq!(
            sent,
            [
                Command::Rough,
                Command::Drift { on: true, speed: 0.3 },
                Command::Drift { on: true, speed: 1.5 },
                Command::StepFraction(0.5),
                Command::Method("paper-eq4".into()),
                Command::ClearPaint,
            ]
        );
        w.until("the new method in the status", |v| v.scene.as_ref().unwrap().status.starts_with("paper-eq4 · "));
    }

    /// On a map that is not Perlin noise, the transitions are greyed out and send nothing.
    #[test]
    fn transitions_need_the_perlin_map() {
        let mut w = window(SceneKind::Balancer, Settings { load: LoadKind::Case(Case::Uniform), ..small() }, false);
        for (role, label) in
            [(Role::Button, "rough transition"), (Role::CheckBox, "smooth drift"), (Role::Slider, "boxes/step")]
        {
            assert!(w.h.get_by_role_and_label(role, label).accesskit_node().is_disabled(), "{label} enabled");
        }
        w.click("rough transition");
        w.click("smooth drift");
        w.click("step");
        assert_eq!(w.commands(1), [Command::Step], "only the step was sent");
    }

    /// On a 3D grid the map is the block of its layers: a click adds a vCore on the layer under
    /// the pointer, at its depth's middle; the paint tool paints there; a click in the white
    /// between layers does nothing.
    #[test]
    fn on_a_cube_the_map_acts_on_the_layer_under_the_pointer() {
        let cube = Settings { nx: 12, ny: 8, nz: 3, load: LoadKind::Case(Case::Uniform), ..small() };
        let mut w = window(SceneKind::Balancer, cube, false);
        let scene = w.scene();
        let grab = 1.5 * w.h.state().style.marker_radius() / w.h.state().style.px as f64;
        let spot = (0..96)
            .map(|k| [(k % 12) as f64 + 0.5, (k / 12) as f64 + 0.5, 2.5])
            .find(|&p| scene.marker_near(p, grab + 0.5).is_none())
            .expect("an empty spot on layer 2");
        w.click_map(spot);
        let sent = w.commands(1);
        assert!(matches!(sent[..], [Command::AddVCore(p)] if near(p, spot) && p[2] == 2.5), "{sent:?}");
        // Between layers 0 and 1 (the column of white right of layer 0): nothing.
        let rect = w.h.get_by_label("load map").rect();
        let gap = rect.min + egui::vec2(rect.width() * 12.5 / 25.0, rect.height() * 0.25);
        w.h.hover_at(gap);
        w.h.drag_at(gap);
        w.h.drop_at(gap);
        w.h.step();
        std::thread::sleep(Duration::from_millis(50));
        w.h.step();
        assert_eq!(w.commands(1).len(), 1, "a click between layers sends nothing");
        w.click("paint load");
        let at = [3.5, 2.5, 2.5];
        w.click_map(at);
        let sent = w.commands(2);
        assert!(matches!(sent[1], Command::Paint { at: p, .. } if near(p, at) && p[2] == 2.5), "{sent:?}");
    }

    /// A click on the map away from the vCores adds one there; a click on a vCore adds none;
    /// a drag moves the vCore grabbed; with the paint tool a click paints, shift erases, and a
    /// drag paints once per frame it moved in.
    #[test]
    fn the_map_adds_and_drags_vcores_and_paints_load() {
        let mut w = window(SceneKind::Balancer, Settings { load: LoadKind::Case(Case::Uniform), ..small() }, false);
        let scene = w.scene();
        let grab = 1.5 * w.h.state().style.marker_radius() / w.h.state().style.px as f64;
        let spot = empty_spot(&scene, grab);
        w.click_map(spot);
        let sent = w.commands(1);
        assert!(matches!(sent[..], [Command::AddVCore(p)] if near(p, spot)), "{sent:?}");
        w.until("a fifth vCore", |v| v.scene.as_ref().unwrap().markers.len() == 5);
        assert!(near(w.scene().markers[4], spot));

        // 1.2 boxes off vCore 1, within the grab radius (1.8 boxes here) of it and of no other.
        let scene = w.scene();
        let m = scene.markers[1];
        let off = [m[0] + if m[0] < 10.0 { 1.2 } else { -1.2 }, m[1], m[2]];
        assert_eq!((scene.marker_near(off, grab), scene.marker_near(off, 1.1)), (Some(1), None));
        w.click_map(off);
        std::thread::sleep(Duration::from_millis(50));
        w.h.step();
        assert_eq!(w.commands(1).len(), 1, "a click within a vCore's grab adds none");

        // Pressed off the vCore, moved, held still a frame, moved again, released: a move
        // for each frame the pointer moved, none while it stood.
        let to = [m[0] + if m[0] < 10.0 { 6.0 } else { -6.0 }, m[1] + if m[1] < 5.0 { 3.0 } else { -3.0 }, m[2]];
        let half = [(off[0] + to[0]) / 2.0, off[1], m[2]];
        let (from, mid, end) = (w.on_screen(off), w.on_screen(half), w.on_screen(to));
        w.h.hover_at(from);
        w.h.drag_at(from);
        w.h.step();
        w.h.hover_at(mid);
        w.h.step();
        w.h.step();
        w.h.hover_at(end);
        w.h.step();
        w.h.drop_at(end);
        w.h.step();
        let sent = w.commands(3);
        let moved = |c: &Command, p: Point| matches!(*c, Command::MoveVCore(1, q) if near(q, p));
        assert!(sent.len() == 3 && moved(&sent[1], half) && moved(&sent[2], to), "{sent:?}");
        w.until("vCore 1 where it was dropped", move |v| near(v.scene.as_ref().unwrap().markers[1], to));
        let moves = w.commands(3).len();

        w.click("paint load");
        let spot = [3.5, 2.5, 0.5];
        w.click_map(spot);
        let sent = w.commands(moves + 1);
        let painted = |amount: f64| move |c: &Command| matches!(*c, Command::Paint { at, radius, amount: a } if near(at, spot) && radius == 4.0 && a == amount);
        assert!(painted(0.5)(&sent[moves]), "{:?}", sent[moves]);
        let k = scene.grid.index(3, 2, 0);
        w.until("paint in the loads", move |v| v.scene.as_ref().unwrap().loads[k] == 1.5);
        w.h.event(egui::Event::ModifiersChanged(Modifiers::SHIFT));
        w.click_map(spot);
        w.h.event(egui::Event::ModifiersChanged(Modifiers::NONE));
        w.h.step();
        let sent = w.commands(moves + 2);
        assert!(painted(-0.5)(&sent[moves + 1]), "shift erases: {:?}", sent[moves + 1]);
        w.until("paint erased", move |v| v.scene.as_ref().unwrap().loads[k] == 1.0);

        // A paint drag: a dab where the pointer moved, none while it stood.
        let (from, to) = (w.on_screen([8.5, 2.5, 0.5]), w.on_screen(spot));
        w.h.hover_at(from);
        w.h.drag_at(from);
        w.h.step();
        w.h.hover_at(to);
        w.h.step();
        for _ in 0..3 {
            w.h.step();
        }
        w.h.drop_at(to);
        w.h.step();
        std::thread::sleep(Duration::from_millis(50));
        w.h.step();
        let sent = w.commands(moves + 3);
        assert!(sent.len() == moves + 3 && painted(0.5)(&sent[moves + 2]), "{:?}", &sent[moves + 2..]);
    }

    /// A running app's map takes no clicks, and the balancer's controls are not there; its
    /// pixels per box fit the app's grid, not the default settings' (150 × 150 boxes: 4).
    #[test]
    fn an_apps_map_takes_no_input() {
        let mut w = window_with_draft(SceneKind::App, small(), Settings::default(), false);
        assert_eq!(w.h.state().style.px, 36, "720 pixels across 20 boxes");
        assert!(w.h.query_by_label("pbs live app").is_some());
        assert!(w.h.query_by_label("method").is_none() && w.h.query_by_label("restart with these settings").is_none());
        let spot = empty_spot(&w.scene(), 3.0);
        w.click_map(spot);
        w.click("step");
        assert_eq!(w.commands(1), [Command::Step]);
    }

    /// The map is drawn at the pixels per box that fit the grid, and redrawn when the view
    /// changes: each upload is the picture the headless mode draws of the same scene.
    #[test]
    fn the_map_shows_the_scene_as_the_view_says() {
        let mut w = window(SceneKind::Balancer, small(), false);
        let picture = |w: &Window| {
            let pic = render_map(&w.scene(), &w.h.state().style);
            ColorImage::from_rgba_unmultiplied([pic.width, pic.height], &pic.rgba)
        };
        assert_eq!(w.h.state().style.px, 36, "720 pixels across 20 boxes");
        assert_eq!(*w.map_texture(), picture(&w));
        w.click("heat map");
        assert_eq!(w.h.state().style.fill, Fill::Heat);
        assert_eq!(*w.map_texture(), picture(&w));
        w.click("owner colours");
        assert_eq!(w.h.state().style.fill, Fill::Owner);
        assert_eq!(*w.map_texture(), picture(&w));
        w.click("heat map");
        w.click("displacement arrows");
        assert!(!w.h.state().style.arrows);
        w.click("step");
        w.until("step 1 drawn", |v| v.scene.as_ref().unwrap().history.len() == 2);
        assert_eq!(*w.map_texture(), picture(&w), "the arrows left out");
    }

    /// A new run takes the settings edited: a grid of another size (the map's pixels per box
    /// follow), a CSV file that cannot be read (its error shown, the run kept), one that can.
    #[test]
    fn a_new_run_takes_the_settings_edited_and_shows_its_errors() {
        let mut w = window(SceneKind::Balancer, small(), false);
        w.h.get_by_label("boxes across").set_value_accesskit(30.0);
        w.h.step();
        w.click("restart with these settings");
        w.until("a grid of 30 × 10", |v| v.scene.as_ref().unwrap().grid.nx() == 30);
        assert_eq!(w.h.state().style.px, 24, "720 pixels across 30 boxes");
        assert_eq!(w.map_texture().size, [720, 240]);

        let dir = scratch("app");
        let (missing, good) = (dir.join("missing.csv"), dir.join("map.csv"));
        std::fs::write(&good, "1,2,3,4,5,6\n6,5,4,3,2,1\n1,1,1,1,1,1\n").unwrap();
        w.click("load");
        w.click("CSV file");
        w.restart_on_csv(&missing.display().to_string());
        let error = w.h.state().error.clone().expect("an error for a missing file");
        assert!(error.contains("missing.csv"), "{error}");
        assert!(w.h.query_by_label(&error).is_some(), "the error is shown");
        assert_eq!(w.scene().grid.nx(), 30, "the run goes on");

        w.restart_on_csv(&format!(" {} ", good.display()));
        assert!(w.h.state().error.is_none());
        w.until("the CSV map", |v| v.scene.as_ref().unwrap().loads.len() == 18);
        assert_eq!(w.h.state().style.px, 120, "720 pixels across 6 boxes");
        std::fs::remove_dir_all(&dir).ok();
    }

    /// The map fills the space beside the controls and above the charts in one direction,
    /// for a wide and a tall grid, at the grid's proportions; the four charts share their
    /// row in equal columns, each with its legend.
    #[test]
    fn the_map_and_the_charts_fill_their_panels() {
        for (nx, ny) in [(20, 10), (10, 20)] {
            let mut w = window(SceneKind::Balancer, Settings { nx, ny, ..small() }, false);
            w.click("step");
            let splitters: Vec<Rect> = w.h.get_all_by_role(Role::Splitter).map(|n| n.rect()).collect();
            let left = splitters.iter().find(|r| r.height() > r.width()).expect("the controls' edge").center().x;
            let top = splitters.iter().find(|r| r.width() > r.height()).expect("the charts' edge").center().y;
            let map = w.h.get_by_label("load map").rect();
            let within = map.min.x >= left && map.max.x <= 1280.0 && map.max.y <= top;
            assert!(within, "{nx}×{ny}: the map {map:?} is not beside x {left} and above y {top}");
            let filled = map.width() >= 1280.0 - left - 30.0 || map.height() >= top - 30.0;
            assert!(filled, "{nx}×{ny}: the map {map:?} fills neither way");
            assert!((map.width() / map.height() - nx as f32 / ny as f32).abs() < 0.01, "{map:?}");

            let charts: Vec<Rect> = ["max_avg", "DOL", "migrations", "charge per vCore"]
                .iter()
                .map(|name| w.h.get_by_label(&format!("{name} chart")).rect())
                .collect();
            // Equal columns: the frames end equally far apart (their y axes differ in width).
            let column = charts[1].max.x - charts[0].max.x;
            for pair in charts.windows(2) {
                let side_by_side = pair[1].min.x >= pair[0].max.x;
                assert!(side_by_side && (pair[1].max.x - pair[0].max.x - column).abs() < 1.0, "{charts:?}");
            }
            assert!(charts.iter().all(|c| c.min.y >= top && c.min.x >= left), "{charts:?}");
            let right = charts[3].max.x;
            assert!((1240.0..=1280.0).contains(&right), "the charts end at {right} of 1280");
            for legend in ["max_avg", "dol_max", "dol_min", "migrations", "charge per vCore"] {
                assert!(w.h.query_by_role_and_label(Role::CheckBox, legend).is_some(), "no legend {legend}");
            }
        }
    }

    /// A run started on a CSV map shows its path in the "new run" field, ready to edit.
    #[test]
    fn a_csv_runs_path_is_in_the_new_run_field() {
        let dir = scratch("path");
        let map = dir.join("map.csv");
        std::fs::write(&map, "1,2,3\n3,2,1\n").unwrap();
        let w = window(SceneKind::Balancer, Settings { load: LoadKind::Csv(map.clone()), ..small() }, false);
        assert_eq!(w.h.get_by_label("CSV path").value(), Some(map.display().to_string()));
        std::fs::remove_dir_all(&dir).ok();
    }

    /// The map's texture is never larger than the display takes (here egui's default, 2048
    /// pixels a side): pixels per box asked beyond it are lowered, and a grid with more boxes
    /// a side than it has pixels shows an error, not a panic, until a run that fits.
    #[test]
    fn the_map_fits_the_displays_largest_texture() {
        let mut w = window(SceneKind::Balancer, small(), false);
        assert_eq!(w.h.ctx.input(|i| i.max_texture_side), 2048);
        w.h.state_mut().set_fill(Fill::Owner, Some(1000));
        w.click("heat map");
        assert_eq!(w.h.state().style.px, 102, "2048 / 20 boxes");
        assert_eq!(w.map_texture().size, [2040, 1020]);

        let dir = scratch("wide");
        let (widest, wide) = (dir.join("widest.csv"), dir.join("wide.csv"));
        std::fs::write(&widest, format!("{}1\n", "1,".repeat(2047))).unwrap();
        std::fs::write(&wide, format!("{}1\n", "1,".repeat(2048))).unwrap();
        w.click("load");
        w.click("CSV file");
        w.restart_on_csv(&widest.display().to_string());
        w.until("the widest map drawn", |v| v.scene.as_ref().unwrap().loads.len() == 2048);
        assert_eq!((w.map_texture().size, w.h.state().map_error.clone()), ([2048, 1], None), "a pixel a box");
        w.restart_on_csv(&wide.display().to_string());
        w.until("the wide map refused", |v| v.map_error.is_some());
        let error = w.h.state().map_error.clone().unwrap();
        assert!(error.contains("2049 boxes a side") && error.contains("2048 pixels"), "{error}");
        assert!(w.h.state().texture.is_none() && w.h.query_by_label("no map (see the error)").is_some());
        assert!(w.h.query_by_label(&error).is_some(), "the error is shown");
        let wide_scene = w.h.state().scene.clone().unwrap();

        w.click("load");
        w.click("uniform");
        w.click("restart with these settings");
        // The wide run's last scene may be drawn (and refused) once more before the new run's
        // first arrives (here on purpose): the map drawn then clears its error.
        let ctx = w.h.ctx.clone();
        w.h.state_mut().draw(&ctx, &wide_scene);
        assert!(w.h.state().map_error.is_some());
        w.until("a map again", |v| v.texture.is_some());
        assert_eq!((&w.h.state().error, &w.h.state().map_error), (&None, &None));
        assert!(w.h.query_by_label(&error).is_none(), "the error is gone");
        std::fs::remove_dir_all(&dir).ok();
    }

    /// A capture: frame figures kept from the eleventh frame on (intervals in milliseconds),
    /// the screenshot asked for once, after the frames asked and the ten settling ones, then
    /// the picture and the figures written: medians, 95th percentile, frames per second, the
    /// steps taken since the tenth frame, the markers and the size.
    #[test]
    fn a_capture_measures_its_frames_and_writes_the_screenshot_and_figures() {
        let mut w = window(SceneKind::Balancer, small(), false);
        for n in 2..4 {
            w.click("step");
            w.until("a step", move |v| v.scene.as_ref().unwrap().history.len() == n);
        }
        let dir = scratch("capture");
        let (png, stats) = (dir.join("shot.png"), dir.join("frames.json"));
        let mut v = w.h.into_state();
        v.screenshot = Some(Screenshot {
            capture: Capture { frames: 5, png: png.clone(), stats: Some(stats.clone()) },
            requested: false,
            inbox: None,
        });
        (v.frames, v.last_frame) = (0, None);
        v.intervals.clear();
        v.cpu.clear();
        let ctx = egui::Context::default();
        let requested = |v: &Viewer| v.screenshot.as_ref().unwrap().requested;
        for frame in 1..=15 {
            if frame == 2 {
                std::thread::sleep(Duration::from_millis(20));
            }
            v.measure(Some(0.002));
            v.screenshot(&ctx);
            assert_eq!(requested(&v), frame == 15, "frame {frame}");
            if frame == 10 {
                assert_eq!(v.steps_at_start, Some(2), "the steps taken before the tenth frame");
            }
        }
        assert!((15.0..900.0).contains(&v.intervals[0]), "a 20 ms sleep measured as {} ms", v.intervals[0]);
        assert_eq!((v.frames, v.intervals.len(), v.cpu.len()), (15, 14, 15));
        assert_eq!((v.all_intervals.len(), v.all_cpu.len()), (5, 5), "frames 11 to 15");
        assert!(v.all_cpu.iter().all(|&ms| (ms - 2.0).abs() < 1e-6));
        v.screenshot(&ctx);
        assert!(requested(&v) && !png.exists(), "asked once, nothing written before the picture comes");

        // The picture arrives; the figures are set to known values first.
        v.all_intervals = vec![4.0, 1.0, 3.0, 2.0, 100.0];
        v.all_cpu = vec![1.0, 3.0, 2.0];
        let mut scene = Scene::clone(v.scene.as_ref().unwrap());
        scene.history.last_mut().unwrap().step = 9;
        v.scene = Some(Arc::new(scene));
        let (tx, rx) = mpsc::channel();
        tx.send(Arc::new(ColorImage::new([4, 3], vec![Color32::RED; 12]))).unwrap();
        v.screenshot.as_mut().unwrap().inbox = Some(rx);
        v.screenshot(&ctx);
        let figures: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
        let want = serde_json::json!({
            "frames": 5, "frame_ms_median": 3.0, "frame_ms_p95": 100.0, "cpu_ms_median": 2.0,
            "fps_median": 1000.0 / 3.0, "sim_steps": 7, "screenshot": [4, 3], "markers": 4,
        });
        assert_eq!(figures, want);
        let pic = Picture::read_png(&png).unwrap();
        assert_eq!((pic.width, pic.height, pic.get(3, 2)), (4, 3, [255, 0, 0]));
        std::fs::remove_dir_all(&dir).ok();
    }

    /// The load menu shows the load's name, "CSV file" for a file.
    #[test]
    fn the_load_menu_shows_the_loads_name() {
        assert_eq!(load_label(&LoadKind::Case(Case::Disc)), "disc");
        assert_eq!(load_label(&LoadKind::Perlin), "perlin");
        assert_eq!(load_label(&LoadKind::Csv(PathBuf::from("a.csv"))), "CSV file");
    }
}
