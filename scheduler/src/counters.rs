//! Per-thread event counters (Linux `perf_event_open`, through the `perf-event` crate).
//!
//! Counters are opened *on* each worker thread (pid 0, any CPU), so they count that thread
//! wherever it runs. The hardware set is L1D and last-level-cache read misses, cycles and
//! instructions. Where the PMU does not offer them — virtual machines often do not, and these
//! development machines do not — the software set (task clock, page faults, context switches,
//! CPU migrations) is opened instead and [`ThreadCounters::unavailable_reason`] says why, in
//! the words of the kernel's error. Nothing is silently zero.

use std::cell::RefCell;

use perf_event::events::{Cache, CacheOp, CacheResult, Event, Hardware, Software, WhichCache};
use perf_event::{Builder, Counter};

/// Named event values of one thread over a measured interval.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Reading {
    /// `true` if these are the hardware events.
    pub hardware: bool,
    /// `(event name, count)`.
    pub values: Vec<(String, u64)>,
}

impl Reading {
    /// The count of `name`, if measured.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.values.iter().find(|v| v.0 == name).map(|v| v.1)
    }
}

fn hardware_events() -> Vec<(&'static str, Event)> {
    let miss = |which| Event::from(Cache { which, operation: CacheOp::READ, result: CacheResult::MISS });
    vec![
        ("l1d_read_misses", miss(WhichCache::L1D)),
        ("llc_read_misses", miss(WhichCache::LL)),
        ("cycles", Event::from(Hardware::CPU_CYCLES)),
        ("instructions", Event::from(Hardware::INSTRUCTIONS)),
    ]
}

fn software_events() -> Vec<(&'static str, Event)> {
    vec![
        ("task_clock_ns", Event::from(Software::TASK_CLOCK)),
        ("page_faults", Event::from(Software::PAGE_FAULTS)),
        ("context_switches", Event::from(Software::CONTEXT_SWITCHES)),
        ("cpu_migrations", Event::from(Software::CPU_MIGRATIONS)),
    ]
}

/// The counters of the calling thread.
pub struct ThreadCounters {
    counters: Vec<(&'static str, Counter)>,
    hardware: bool,
    reason: Option<String>,
}

impl ThreadCounters {
    /// Opens the hardware set on the calling thread, else the software set. Errors only if
    /// not even software events can be opened (e.g. `perf_event_paranoid` = 3 or seccomp).
    pub fn open() -> Result<ThreadCounters, String> {
        match open_all(&hardware_events()) {
            Ok(counters) => Ok(ThreadCounters { counters, hardware: true, reason: None }),
            Err((name, e)) => {
                let reason = format!("hardware event {name} unavailable on this machine: {e}");
                let counters = open_all(&software_events())
                    .map_err(|(n, e2)| format!("{reason}; software event {n} unavailable too: {e2}"))?;
                Ok(ThreadCounters { counters, hardware: false, reason: Some(reason) })
            }
        }
    }

    /// Whether these are hardware counters.
    pub fn hardware(&self) -> bool {
        self.hardware
    }

    /// Why the hardware set could not be opened (`None` if it was).
    pub fn unavailable_reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    /// Zeroes and starts every counter.
    pub fn start(&mut self) {
        for (_, c) in &mut self.counters {
            let _ = c.reset();
            let _ = c.enable();
        }
    }

    /// Reads every counter without stopping it.
    pub fn peek(&mut self) -> Vec<u64> {
        self.counters.iter_mut().map(|(_, c)| c.read().unwrap_or(0)).collect()
    }

    /// Names of the events, in reading order.
    pub fn names(&self) -> Vec<&'static str> {
        self.counters.iter().map(|c| c.0).collect()
    }

    /// Stops every counter and reads it.
    pub fn stop(&mut self) -> Reading {
        let mut values = Vec::new();
        for (name, c) in &mut self.counters {
            let _ = c.disable();
            values.push((name.to_string(), c.read().unwrap_or(0)));
        }
        Reading { hardware: self.hardware, values }
    }
}

fn open_all(events: &[(&'static str, Event)]) -> Result<Vec<(&'static str, Counter)>, (&'static str, std::io::Error)> {
    events
        .iter()
        .map(|(name, ev)| Builder::new().kind(ev.clone()).build().map(|c| (*name, c)).map_err(|e| (*name, e)))
        .collect()
}

thread_local! {
    static MINE: RefCell<Option<Result<ThreadCounters, String>>> = const { RefCell::new(None) };
}

/// Opens (once) and starts the counters of the calling thread. Call on every worker through
/// [`crate::Executor::on_each_thread`].
pub fn start_on_this_thread() {
    MINE.with(|m| {
        let mut m = m.borrow_mut();
        let c = m.get_or_insert_with(ThreadCounters::open);
        if let Ok(c) = c {
            c.start();
        }
    });
}

/// Stops and reads the counters of the calling thread: the reading, or why there is none.
pub fn stop_on_this_thread() -> Result<(Reading, Option<String>), String> {
    MINE.with(|m| match m.borrow_mut().as_mut() {
        Some(Ok(c)) => Ok((c.stop(), c.unavailable_reason().map(str::to_string))),
        Some(Err(e)) => Err(e.clone()),
        None => Err("counters were not started on this thread".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_is_looked_up_by_name() {
        let r = Reading { hardware: false, values: vec![("page_faults".into(), 7), ("cycles".into(), 9)] };
        assert_eq!((r.get("page_faults"), r.get("cycles"), r.get("instructions")), (Some(7), Some(9), None));
    }

    /// Touches 8 MiB, which faults its pages in and takes time and instructions.
    /// Writes 8 MiB of fresh memory, returned so that a caller holding it makes the next
    /// call fault on new pages (freed, glibc's raised mmap threshold may hand them back).
    fn touch_8_mib() -> Vec<u64> {
        let mut v = vec![0u64; 1 << 20];
        for (i, x) in v.iter_mut().enumerate() {
            *x = i as u64 * 3;
        }
        std::hint::black_box(v)
    }

    /// Opens the counters and touches 8 MiB under them.
    fn count_some_work() -> (ThreadCounters, Reading) {
        let mut c = ThreadCounters::open().expect("perf counters open");
        c.start();
        let _touched = touch_8_mib();
        let r = c.stop();
        (c, r)
    }

    /// Where the hardware events exist, they count.
    #[test]
    #[ignore = "needs a hardware PMU (this VM exposes none): scripts/test.sh runs it where /sys/bus/event_source/devices/cpu exists"]
    fn hardware_counters_count_instructions_and_cycles() {
        let (c, r) = count_some_work();
        assert!(c.hardware(), "hardware counters did not open: {:?}", c.unavailable_reason());
        assert!(r.get("instructions").unwrap() > 1_000_000, "{r:?}");
        assert!(r.get("cycles").unwrap() > 0, "{r:?}");
    }

    /// Without hardware events, the software ones count and the reason is reported.
    #[test]
    #[ignore = "needs perf_event_open (perf_event_paranoid <= 2): scripts/test.sh runs it where it is allowed"]
    fn software_counters_count_and_say_why_the_hardware_ones_do_not() {
        let (c, r) = count_some_work();
        if c.hardware() {
            assert!(c.unavailable_reason().is_none());
            return; // the hardware test covers this machine
        }
        let why = c.unavailable_reason().unwrap();
        assert!(why.contains("unavailable"), "{why}");
        assert!(r.get("task_clock_ns").unwrap() > 100_000, "{r:?}");
        assert!(r.get("page_faults").unwrap() > 100, "8 MiB touched must fault pages in: {r:?}");
    }

    /// The set a thread opened, in the order its names give, read while it runs and when it
    /// stops; the per-thread pair `start_on_this_thread`/`stop_on_this_thread` zeroes it at
    /// each start and says when it was never started.
    #[test]
    #[ignore = "needs perf_event_open (perf_event_paranoid <= 2): scripts/test.sh runs it where it is allowed"]
    fn a_threads_counters_are_named_in_order_and_zeroed_at_each_start() {
        std::thread::spawn(|| {
            let mut c = ThreadCounters::open().expect("perf counters open");
            let set = if c.hardware() { hardware_events() } else { software_events() };
            let names: Vec<&str> = set.iter().map(|e| e.0).collect();
            assert_eq!(c.names(), names);
            assert_eq!(c.hardware(), c.unavailable_reason().is_none());
            c.start();
            let _held = touch_8_mib();
            let running = c.peek();
            assert_eq!(running.len(), names.len());
            let busiest = if c.hardware() { "instructions" } else { "page_faults" };
            let at = names.iter().position(|&n| n == busiest).unwrap();
            assert!(running[at] > 100, "{names:?}: {running:?}");

            assert_eq!(stop_on_this_thread().unwrap_err(), "counters were not started on this thread");
            start_on_this_thread();
            let _held_too = touch_8_mib();
            let (first, reason) = stop_on_this_thread().expect("started");
            assert_eq!(first.values.iter().map(|v| v.0.as_str()).collect::<Vec<_>>(), names);
            assert_eq!((first.hardware, reason.is_none()), (c.hardware(), c.hardware()));
            start_on_this_thread();
            let (idle, _) = stop_on_this_thread().expect("started");
            let count = |r: &Reading| r.get(busiest).unwrap();
            assert!(count(&first) > 100 && count(&idle) < count(&first) / 2, "{first:?} then {idle:?}");
        })
        .join()
        .unwrap();
    }
}
