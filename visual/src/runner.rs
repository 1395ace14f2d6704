//! Runs a simulation on its own thread so that the window never waits for the balancer: the
//! window sends [`Command`]s and reads the latest [`Scene`]; the thread steps while playing and
//! publishes a scene after every change.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pbs::Point;

use crate::scene::Scene;

/// Something that advances step by step and can be drawn.
pub trait Simulation: Send + 'static {
    /// Advances by one tick while playing. Returns whether anything changed (false: converged
    /// and nothing drives it, so the runner waits for a command instead of spinning).
    fn tick(&mut self) -> Result<bool, String>;
    /// Applies a user's command.
    fn apply(&mut self, command: Command) -> Result<(), String>;
    /// The current state, as plain data.
    fn scene(&self) -> Scene;
}

/// What the user can ask for. A simulation refuses, with a reason, what it cannot do.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// One balancer step, even if converged.
    Step,
    /// A rough transition: a new Perlin map.
    Rough,
    /// Smooth drift of the Perlin map on or off, and its speed in boxes per step.
    Drift {
        /// drift on or off
        on: bool,
        /// boxes per step
        speed: f64,
    },
    /// Switch to the method of this name.
    Method(String),
    /// Fraction of each step's displacement that is applied.
    StepFraction(f64),
    /// A new vCore at this point (box units; on a 2D grid its z is taken as 0.5).
    AddVCore(Point),
    /// Move vCore `i` to this point (as for [`Command::AddVCore`]).
    MoveVCore(usize, Point),
    /// Add `amount` to the load of every box whose centre lies within `radius` boxes of `at`
    /// (negative erases; on a 2D grid a disc, whatever `at`'s z).
    Paint {
        /// centre, box units
        at: Point,
        /// radius, boxes
        radius: f64,
        /// load added per box
        amount: f64,
    },
    /// Remove all painted load.
    ClearPaint,
}

enum Message {
    Play(bool),
    Rate(f64),
    Replace(Box<dyn Simulation>),
    Do(Command),
    Quit,
}

/// The latest scene and a counter that changes whenever it does.
#[derive(Default)]
struct Published {
    scene: Option<Arc<Scene>>,
    generation: u64,
}

/// Handle on the simulation thread.
pub struct Runner {
    to_thread: Sender<Message>,
    published: Arc<Mutex<Published>>,
    thread: Option<JoinHandle<()>>,
}

impl Runner {
    /// Starts the thread; `on_publish` is called after every new scene (the window passes its
    /// repaint request).
    pub fn spawn(simulation: Box<dyn Simulation>, on_publish: impl Fn() + Send + 'static) -> Runner {
        let (to_thread, from_ui) = mpsc::channel();
        let published = Arc::new(Mutex::new(Published::default()));
        let shared = Arc::clone(&published);
        let thread = std::thread::Builder::new()
            .name("pbs-visual-sim".into())
            .spawn(move || run(simulation, &from_ui, &shared, &on_publish))
            .expect("spawning the simulation thread");
        Runner { to_thread, published, thread: Some(thread) }
    }

    /// Play or pause.
    pub fn play(&self, on: bool) {
        let _ = self.to_thread.send(Message::Play(on));
    }

    /// At most this many ticks per second while playing (0 = as fast as it goes).
    pub fn rate(&self, per_second: f64) {
        let _ = self.to_thread.send(Message::Rate(per_second));
    }

    /// Sends a command; its error, if any, shows in the next scene's status.
    pub fn command(&self, command: Command) {
        let _ = self.to_thread.send(Message::Do(command));
    }

    /// Replaces the simulation (a restart with new settings).
    pub fn replace(&self, simulation: Box<dyn Simulation>) {
        let _ = self.to_thread.send(Message::Replace(simulation));
    }

    /// The latest scene and its generation, if one was published yet.
    pub fn latest(&self) -> Option<(Arc<Scene>, u64)> {
        let p = self.published.lock().unwrap_or_else(|e| e.into_inner());
        p.scene.as_ref().map(|s| (Arc::clone(s), p.generation))
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        let _ = self.to_thread.send(Message::Quit);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(mut sim: Box<dyn Simulation>, inbox: &Receiver<Message>, out: &Mutex<Published>, on_publish: &dyn Fn()) {
    let publish = |sim: &dyn Simulation, error: Option<String>| {
        let mut scene = sim.scene();
        if let Some(e) = error {
            scene.status = format!("error: {e}");
        }
        let mut p = out.lock().unwrap_or_else(|e| e.into_inner());
        p.scene = Some(Arc::new(scene));
        p.generation += 1;
        drop(p);
        on_publish();
    };
    publish(sim.as_ref(), None);
    let (mut playing, mut rate) = (false, 30.0_f64);
    let mut next_tick = Instant::now();
    loop {
        // Paused or idle: block on the inbox. Playing: wait at most until the next tick is due.
        let message = if playing {
            let wait = next_tick.saturating_duration_since(Instant::now());
            match inbox.recv_timeout(wait) {
                Ok(m) => Some(m),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        } else {
            match inbox.recv() {
                Ok(m) => Some(m),
                Err(_) => return,
            }
        };
        match message {
            Some(Message::Quit) => return,
            Some(Message::Play(on)) => {
                playing = on;
                next_tick = Instant::now();
            }
            Some(Message::Rate(r)) => rate = r.max(0.0),
            Some(Message::Replace(s)) => {
                sim = s;
                publish(sim.as_ref(), None);
            }
            Some(Message::Do(c)) => {
                let r = sim.apply(c);
                publish(sim.as_ref(), r.err());
            }
            None => {
                let period = if rate > 0.0 { Duration::from_secs_f64(1.0 / rate) } else { Duration::ZERO };
                next_tick = Instant::now() + period;
                match sim.tick() {
                    Ok(true) => publish(sim.as_ref(), None),
                    Ok(false) => {
                        // Converged and nothing drives it: show that, then wait for the user.
                        publish(sim.as_ref(), None);
                        playing = false;
                    }
                    Err(e) => {
                        publish(sim.as_ref(), Some(e));
                        playing = false;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::{Model, Settings};

    fn wait_for(r: &Runner, what: impl Fn(&Scene) -> bool) -> Arc<Scene> {
        let start = Instant::now();
        loop {
            if let Some((s, _)) = r.latest() {
                if what(&s) {
                    return s;
                }
            }
            assert!(start.elapsed() < Duration::from_secs(60), "the simulation thread did not get there");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Counts its ticks: changes until `settles`, fails at `fails`; a command is refused
    /// when it is a step, taken otherwise.
    pub(crate) struct Counter {
        ticks: usize,
        settles: usize,
        fails: usize,
        name: &'static str,
    }

    impl Simulation for Counter {
        fn tick(&mut self) -> Result<bool, String> {
            if self.ticks + 1 == self.fails {
                return Err(format!("boom at {}", self.fails));
            }
            self.ticks += 1;
            Ok(self.ticks < self.settles)
        }

        fn apply(&mut self, command: Command) -> Result<(), String> {
            match command {
                Command::Step => Err("no steps here".into()),
                _ => Ok(()),
            }
        }

        fn scene(&self) -> Scene {
            Scene { status: format!("{} {}", self.name, self.ticks), ..crate::scene::tests::blank(1, 1) }
        }
    }

    pub(crate) fn counter(settles: usize, fails: usize) -> Box<Counter> {
        Box::new(Counter { ticks: 0, settles, fails, name: "a" })
    }

    /// Paused, nothing ticks; playing, it ticks until nothing changes and then waits, with
    /// no scene published while it waits; a tick's error shows and pauses; a command's
    /// refusal shows; a replacement is published at once.
    #[test]
    fn the_thread_ticks_only_while_playing_and_stops_where_nothing_changes() {
        let r = Runner::spawn(counter(40, usize::MAX), || {});
        let (first, generation) = (wait_for(&r, |_| true), r.latest().unwrap().1);
        assert_eq!((first.status.as_str(), generation), ("a 0", 1));
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(r.latest().unwrap().1, 1, "paused: no tick");
        r.rate(0.0);
        r.play(true);
        wait_for(&r, |s| s.status == "a 40");
        let settled = r.latest().unwrap().1;
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(r.latest().unwrap().1, settled, "settled: no more ticks or scenes");
        assert_eq!(settled, 41, "one scene per tick after the first");
        r.command(Command::Step);
        wait_for(&r, |s| s.status == "error: no steps here");
        r.replace(Box::new(Counter { ticks: 0, settles: usize::MAX, fails: 5, name: "b" }));
        wait_for(&r, |s| s.status == "b 0");
        r.play(true);
        wait_for(&r, |s| s.status == "error: boom at 5");
        let stopped = r.latest().unwrap().1;
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(r.latest().unwrap().1, stopped, "an error pauses");
    }

    /// At a rate of `n` ticks a second, no more than one tick plus `n` per second elapsed
    /// (at 5 a second, fewer than the default 30 would give); at 1000 a second, a tick every
    /// millisecond or so, so that 20 come well within ten seconds.
    #[test]
    fn a_rate_bounds_the_ticks_per_second() {
        let r = Runner::spawn(counter(usize::MAX, usize::MAX), || {});
        wait_for(&r, |_| true);
        r.rate(5.0);
        let start = Instant::now();
        r.play(true);
        std::thread::sleep(Duration::from_millis(300));
        let ticks = r.latest().unwrap().1 - 1;
        let bound = 1 + (start.elapsed().as_secs_f64() * 5.0) as u64;
        assert!(ticks >= 1 && ticks <= bound, "{ticks} ticks, at most {bound}");
        r.play(false);
        let paused = r.latest().unwrap().1;
        r.rate(1000.0);
        r.play(true);
        let start = Instant::now();
        while r.latest().unwrap().1 < paused + 20 {
            assert!(start.elapsed() < Duration::from_secs(10), "at 1000 ticks a second, not 20 in ten seconds");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Dropping the runner waits for its thread: a tick under way ends, and what the thread
    /// held (here the `on_publish` closure) is released before `drop` returns.
    #[test]
    fn dropping_the_runner_ends_its_thread() {
        struct Slow(Arc<std::sync::atomic::AtomicBool>);
        impl Simulation for Slow {
            fn tick(&mut self) -> Result<bool, String> {
                self.0.store(true, std::sync::atomic::Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(100));
                Ok(true)
            }
            fn apply(&mut self, _: Command) -> Result<(), String> {
                Ok(())
            }
            fn scene(&self) -> Scene {
                crate::scene::tests::blank(1, 1)
            }
        }
        let ticking = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let held = Arc::new(());
        let in_thread = Arc::clone(&held);
        let r = Runner::spawn(Box::new(Slow(Arc::clone(&ticking))), move || {
            let _ = &in_thread;
        });
        r.rate(0.0);
        r.play(true);
        while !ticking.load(std::sync::atomic::Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(r);
        assert_eq!(Arc::strong_count(&held), 1, "the thread still holds its closure after drop");
    }

    #[test]
    fn plays_to_convergence_off_the_calling_thread_and_reports_errors() {
        let m = Model::new(Settings { nx: 40, ny: 30, vcores: 6, ..Settings::default() }).unwrap();
        let r = Runner::spawn(Box::new(m), || {});
        r.rate(0.0);
        r.play(true);
        let s = wait_for(&r, |s| s.status.contains("converged"));
        assert!(s.history.len() > 1);
        r.command(Command::Method("no-such-method".into()));
        let s = wait_for(&r, |s| s.status.starts_with("error"));
        assert!(s.status.contains("no-such-method"), "{}", s.status);
        r.command(Command::AddVCore([5.0, 5.0, 0.5]));
        wait_for(&r, |s| s.markers.len() == 7);
    }
}
