//! A grid app (`md` or `stencil` from `pbs-apps`) running on the `pbs` executor, watched
//! live: each tick is one real iteration on the worker threads; the scene shows the work each
//! box did, which thread owns it, each thread's busy time and the thread-load `max_avg`.

use pbs::{metrics, StepRecord};
use pbs_apps::GridApp;
use pbs_scheduler::pinning::Pinning;
use pbs_scheduler::report::Recorder;
use pbs_scheduler::runtime::Runtime;
use pbs_scheduler::topology::Topology;
use pbs_scheduler::{BoxTimer, Executor};

use crate::runner::{Command, Simulation};
use crate::scene::{History, Scene, SceneKind};

/// An app on the `pbs` executor.
pub struct LiveApp {
    app: Box<dyn GridApp>,
    exec: Box<dyn Executor + Send>,
    busy_last: Vec<f64>,
    /// The last iteration's wall time, milliseconds.
    iter_ms_last: f64,
    rebalances: usize,
    owners: Vec<u32>,
    history: History,
    status: String,
}

impl LiveApp {
    /// `app` (`md` or `stencil`) in `scenario` (empty: the app's default) on `nx × ny × nz`
    /// boxes (`nz` = 1: in 2D) and `threads` unpinned workers (the window's own thread shares
    /// the machine).
    pub fn new(app: &str, scenario: &str, [nx, ny, nz]: [usize; 3], threads: usize) -> Result<LiveApp, String> {
        if threads == 0 {
            return Err("--threads must be at least 1".into());
        }
        let scenario = if scenario.is_empty() { pbs_apps::default_scenario(app) } else { scenario };
        let grid_app = pbs_apps::build_3d(app, scenario, nx, ny, nz, 1)?;
        let runtime = Runtime { topology: Topology::detect(), threads, pin: Pinning::Off, timer: BoxTimer::default() };
        let (exec, _bindings) = runtime.executor("pbs", grid_app.grid()).map_err(|e| e.to_string())?;
        let owners = exec.planned_owners().unwrap_or_else(|| vec![0; grid_app.grid().len()]);
        Ok(LiveApp {
            app: grid_app,
            exec,
            busy_last: vec![0.0; threads],
            iter_ms_last: 0.0,
            rebalances: 0,
            owners,
            history: History::default(),
            status: format!("{app} {scenario} on {threads} pbs threads: press play"),
        })
    }

    fn iterate(&mut self) {
        // A recorder per iteration: one kept for the session grew by an iteration's record each
        // tick, and its report, read every tick, sorted them all (80 µs a tick at the start of
        // md on 16 × 16 boxes, over a millisecond 60,000 ticks in).
        let mut rec = Recorder::new("pbs", self.exec.threads());
        self.app.iterate(self.exec.as_mut(), &mut rec, None);
        let report = rec.report();
        self.busy_last = report.busy_ms;
        self.rebalances += report.rebalances;
        self.iter_ms_last = rec.iteration_ms().last().copied().unwrap_or(0.0);
        let owners = self.exec.planned_owners().unwrap_or_else(|| self.owners.clone());
        let migrations = metrics::migrations(&self.owners, &owners);
        self.owners = owners;
        let (dol_max, dol_min) = metrics::dol_extremes(&self.busy_last);
        let step = self.history.steps();
        let max_avg = metrics::max_avg(&self.busy_last);
        self.history.push(StepRecord { step, max_avg, dol_max, dol_min, migrations });
        self.status = format!(
            "{} iteration {step} · {:.2} ms · thread max_avg {max_avg:.3} · {} rebalances",
            self.app.name(),
            self.iter_ms_last,
            self.rebalances
        );
    }
}

impl Simulation for LiveApp {
    fn tick(&mut self) -> Result<bool, String> {
        self.iterate();
        Ok(true)
    }

    fn apply(&mut self, command: Command) -> Result<(), String> {
        match command {
            Command::Step => {
                self.iterate();
                Ok(())
            }
            other => Err(format!("{other:?} applies to the balancer view, not to a running app")),
        }
    }

    fn scene(&self) -> Scene {
        let grid = self.app.grid();
        let threads = self.exec.threads();
        // Markers at the centroid of each thread's boxes (the domain centre for a thread
        // that owns none).
        let mut sum = vec![([0.0; 3], 0usize); threads];
        for (k, &o) in self.owners.iter().enumerate() {
            let (s, n) = &mut sum[o as usize];
            let c = grid.centre(k);
            (0..3).for_each(|d| s[d] += c[d]);
            *n += 1;
        }
        let e = grid.extent();
        let markers =
            sum.iter().map(|(s, n)| if *n > 0 { s.map(|x| x / *n as f64) } else { e.map(|x| x / 2.0) }).collect();
        Scene {
            kind: SceneKind::App,
            grid,
            loads: self.app.box_work(),
            owners: self.owners.clone(),
            markers,
            arrows: Vec::new(),
            history: self.history.recent(),
            bars: self.busy_last.clone(),
            bars_label: "busy ms per thread (last iteration)",
            status: match crate::raster::layers_note(&grid) {
                Some(n) => format!("{} · {n}", self.status),
                None => self.status.clone(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_app_runs_live_and_its_scene_is_consistent() {
        let mut live = LiveApp::new("md", "gravity", [16, 16, 1], 2).unwrap();
        for _ in 0..3 {
            assert!(live.tick().unwrap());
        }
        let s = live.scene();
        assert_eq!(s.kind, SceneKind::App);
        assert_eq!(s.owners.len(), 256);
        assert!(s.owners.iter().all(|&o| o < 2));
        assert_eq!(s.markers.len(), 2);
        assert_eq!(s.bars.len(), 2);
        assert!(s.bars.iter().all(|b| *b > 0.0), "both threads worked: {:?}", s.bars);
        assert_eq!(s.history.len(), 3);
        assert!(s.loads.iter().sum::<f64>() > 0.0);
        // Each marker is the centroid of its thread's boxes; the records count iterations.
        for (t, m) in s.markers.iter().enumerate() {
            let mine: Vec<usize> = (0..256).filter(|&k| s.owners[k] == t as u32).collect();
            let mean = |d: usize| mine.iter().map(|&k| s.grid.centre(k)[d]).sum::<f64>() / mine.len() as f64;
            assert!(!mine.is_empty() && (m[0] - mean(0)).abs() < 1e-9 && (m[1] - mean(1)).abs() < 1e-9, "thread {t}");
        }
        assert_eq!(s.history.iter().map(|r| r.step).collect::<Vec<_>>(), [0, 1, 2]);
        let max_avg = metrics::max_avg(&s.bars);
        assert!((s.history[2].max_avg - max_avg).abs() < 1e-12 && max_avg >= 1.0);
        assert!(s.status.starts_with("md iteration 2 · "), "{}", s.status);
        live.apply(Command::Step).unwrap();
        assert_eq!(live.scene().history.len(), 4, "a step is one more iteration");
        assert!(live.apply(Command::Rough).unwrap_err().contains("balancer view"));
        // The bars are each thread's busy time in the last iteration alone, within its wall
        // time (summed over the iterations, they would pass it from the second on).
        let mut live = LiveApp::new("stencil", "drift", [8, 8, 1], 2).unwrap();
        for _ in 0..4 {
            live.tick().unwrap();
            let bars = live.scene().bars;
            assert!(bars.iter().all(|&b| b > 0.0 && b <= live.iter_ms_last), "{bars:?} in {} ms", live.iter_ms_last);
        }
        // A thread that owns no box is marked at the domain's centre.
        let mut idle = LiveApp::new("stencil", "drift", [2, 1, 1], 3).unwrap();
        idle.tick().unwrap();
        let s = idle.scene();
        let e = s.grid.extent();
        let unowned: Vec<usize> = (0..3).filter(|&t| !s.owners.contains(&(t as u32))).collect();
        assert!(!unowned.is_empty(), "3 threads on 2 boxes: {:?}", s.owners);
        for t in unowned {
            assert_eq!(s.markers[t], [e[0] / 2.0, e[1] / 2.0, 0.5], "thread {t}");
        }
        assert!(LiveApp::new("fem", "", [16, 16, 1], 2).err().unwrap().contains("fem"));
        assert!(LiveApp::new("md", "", [16, 16, 1], 0).is_err());
    }
}
