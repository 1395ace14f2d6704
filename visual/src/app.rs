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
use crate::raster::{owner_colour, render_map, to_domain, Fill, Picture, Style};
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
    error: Option<String>,
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
        let runner = Runner::spawn(sim, move || repaint.request_repaint());
        runner.play(play);
        let csv_path = match &draft.load {
            LoadKind::Csv(p) => p.display().to_string(),
            _ => String::new(),
        };
        let style = Style::fit(draft.nx, draft.ny, 720);
        Ok(Viewer {
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
            screenshot: capture.map(|capture| Screenshot { capture, requested: false, inbox: None }),
            all_intervals: Vec::new(),
            all_cpu: Vec::new(),
        })
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
                self.style.px = Style::fit(m.scene().grid.nx(), m.scene().grid.ny(), 720).px;
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
        let pic = render_map(&scene, &self.style);
        self.upload(ctx, &pic);
        self.scene = Some(scene);
    }

    fn upload(&mut self, ctx: &egui::Context, pic: &Picture) {
        let image = ColorImage::from_rgba_unmultiplied([pic.width, pic.height], &pic.rgba);
        match &mut self.texture {
            Some(t) => t.set(image, TextureOptions::NEAREST),
            None => self.texture = Some(ctx.load_texture("map", image, TextureOptions::NEAREST)),
        }
    }

    fn redraw(&mut self, ctx: &egui::Context) {
        if let Some(scene) = self.scene.clone() {
            let pic = render_map(&scene, &self.style);
            self.upload(ctx, &pic);
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
        if let Some(e) = &self.error {
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
            ui.add(egui::Slider::new(&mut self.paint_amount, 0.05..=5.0).text("load per stroke (shift erases)"));
            ui.add(egui::Slider::new(&mut self.paint_radius, 1.0..=20.0).text("brush radius"));
            if ui.button("clear paint").clicked() {
                self.runner.command(Command::ClearPaint);
            }
        }
        ui.separator();
        ui.label("new run");
        egui::Grid::new("settings").num_columns(2).show(ui, |ui| {
            ui.label("grid");
            ui.horizontal(|ui| {
                ui.add(egui::DragValue::new(&mut self.draft.nx).range(1..=2000));
                ui.label("×");
                ui.add(egui::DragValue::new(&mut self.draft.ny).range(1..=2000));
            });
            ui.end_row();
            ui.label("vCores");
            ui.add(egui::DragValue::new(&mut self.draft.vcores).range(1..=10000));
            ui.end_row();
            ui.label("load");
            egui::ComboBox::from_id_salt("load").selected_text(load_label(&self.draft.load)).show_ui(ui, |ui| {
                for c in Case::ALL {
                    ui.selectable_value(&mut self.draft.load, LoadKind::Case(c), c.name());
                }
                ui.selectable_value(&mut self.draft.load, LoadKind::Perlin, "perlin");
                ui.selectable_value(&mut self.draft.load, LoadKind::Csv(PathBuf::new()), "CSV file");
            });
            ui.end_row();
            if matches!(self.draft.load, LoadKind::Csv(_)) {
                ui.label("CSV path");
                ui.text_edit_singleline(&mut self.csv_path);
                ui.end_row();
            }
            ui.label("seed");
            ui.add(egui::DragValue::new(&mut self.draft.seed));
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
        let width = (ui.available_width() / 4.0 - 8.0).max(80.0);
        let height = ui.available_height().max(80.0);
        ui.horizontal(|ui| {
            let plot = |id: &str| Plot::new(id.to_string()).width(width).height(height).legend(Legend::default());
            plot("max_avg").include_y(1.0).show(ui, |p| {
                p.line(Line::new("max_avg", series(&|r| r.max_avg)).color(Color32::from_rgb(31, 119, 180)));
            });
            plot("dol").include_y(0.0).show(ui, |p| {
                p.line(Line::new("dol_max", series(&|r| r.dol_max)).color(Color32::from_rgb(214, 39, 40)));
                p.line(Line::new("dol_min", series(&|r| r.dol_min)).color(Color32::from_rgb(44, 160, 44)));
            });
            plot("migrations").include_y(0.0).show(ui, |p| {
                p.line(
                    Line::new("migrations", series(&|r| r.migrations as f64)).color(Color32::from_rgb(148, 103, 189)),
                );
            });
            plot("bars").include_y(0.0).show(ui, |p| {
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
        });
    }

    fn map(&mut self, ui: &mut egui::Ui) {
        let (Some(tex), Some(scene)) = (&self.texture, self.scene.clone()) else {
            ui.label("waiting for the first scene…");
            return;
        };
        let [w, h] = tex.size();
        let avail = ui.available_size();
        let scale = (avail.x / w as f32).min(avail.y / h as f32).max(0.05);
        let size = egui::vec2(w as f32 * scale, h as f32 * scale);
        let (rect, response) = ui.allocate_exact_size(size, Sense::click_and_drag());
        let uv = Rect::from_min_max(Pos2::ZERO, Pos2::new(1.0, 1.0));
        ui.painter().image(tex.id(), rect, uv, Color32::WHITE);
        if self.kind != SceneKind::Balancer {
            return;
        }
        let Some(pointer) = response.interact_pointer_pos() else {
            self.drag = None;
            return;
        };
        let q = (pointer - rect.min) / scale;
        let p = to_domain([f64::from(q.x), f64::from(q.y)], scene.grid.ny(), self.style.px);
        match self.tool {
            Tool::VCores => {
                let grab = 1.5 * self.style.marker_radius() / self.style.px as f64;
                if response.drag_started() {
                    self.drag = scene.marker_near(p, grab);
                }
                if let Some(i) = self.drag {
                    if response.dragged() && response.drag_delta() != egui::Vec2::ZERO {
                        self.runner.command(Command::MoveVCore(i, p));
                    }
                } else if response.clicked() && scene.marker_near(p, grab).is_none() {
                    self.runner.command(Command::AddVCore(p));
                }
                if response.drag_stopped() {
                    self.drag = None;
                }
            }
            Tool::Paint => {
                if response.dragged() || response.clicked() {
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

    fn measure(&mut self, frame: &eframe::Frame) {
        let now = Instant::now();
        if let Some(last) = self.last_frame {
            let dt = (now - last).as_secs_f64() * 1e3;
            push_capped(&mut self.intervals, dt);
            if self.steps_at_start.is_some() {
                self.all_intervals.push(dt);
            }
        }
        if let Some(cpu) = frame.info().cpu_usage {
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
        self.measure(frame);
        let ctx = ui.ctx().clone();
        self.poll_scene(&ctx);
        egui::Panel::left("controls").default_size(300.0).show(ui, |ui| {
            egui::ScrollArea::vertical().show(ui, |ui| self.controls(ui));
        });
        egui::Panel::bottom("charts").default_size(230.0).resizable(true).show(ui, |ui| self.charts(ui));
        egui::CentralPanel::default_margins().show(ui, |ui| self.map(ui));
        self.screenshot(&ctx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
