//! Binding threads to CPUs: the workers' start hook, the calling thread's pinning during
//! phases, and what each worker actually obtained.
//!
//! The calling thread is worker 0 of a pool, as OpenMP's master thread is. Pinned for good, it
//! would hand its one-CPU mask to every thread it creates afterwards (on Linux a new thread
//! inherits its creator's mask), so an OpenMP team, a rayon pool or the user's own threads
//! started after the executor would all crowd onto that one CPU. Under [`Pinning::Workers`],
//! the default, the caller runs its phases on worker 0's core but keeps its own mask between
//! them ([`CallerPin`]): pinned for a phase it starts elsewhere (two `sched_setaffinity` calls),
//! which moves it there, where it then stays. [`Pinning::WorkersAndCaller`] keeps the caller
//! pinned between phases, as `OMP_PROC_BIND=true` does.

use std::sync::{Arc, Mutex};

use crate::topology::Topology;

/// Which threads are bound to CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pinning {
    /// No thread is bound: the OS places them.
    Off,
    /// Worker `t` is bound to the CPUs of its core for its whole life; the calling thread
    /// (worker 0) runs its phases on worker 0's core but keeps its own mask between them, so
    /// threads it creates between phases are free ([`CallerPin`]).
    #[default]
    Workers,
    /// As [`Pinning::Workers`], and the calling thread stays bound between phases and after
    /// the executor is gone: no cost per phase, but threads it creates later inherit its CPU.
    WorkersAndCaller,
}

impl Pinning {
    /// `pin` as the C interface takes it: 0 off, 1 [`Pinning::Workers`], 2
    /// [`Pinning::WorkersAndCaller`].
    pub fn from_c(pin: i32) -> Option<Pinning> {
        match pin {
            0 => Some(Pinning::Off),
            1 => Some(Pinning::Workers),
            2 => Some(Pinning::WorkersAndCaller),
            _ => None,
        }
    }
}

/// What one worker obtained: the OS CPUs it is bound to, or why it is not (`None`: the worker
/// has not started yet).
pub type Binding = Option<Result<Vec<usize>, String>>;

/// The binding each worker actually obtained.
#[derive(Debug, Clone, Default)]
pub struct Bindings(Arc<Mutex<Vec<Binding>>>);

impl Bindings {
    /// What each worker reported, by worker id.
    pub fn report(&self) -> Vec<Binding> {
        self.0.lock().unwrap().clone()
    }
}

/// A start hook for pools (ours or rayon's) that pins worker `t` to the PUs of
/// `topology.core_of_worker(t)` and records the binding obtained.
pub fn pinning(topology: &Topology, threads: usize) -> (Arc<dyn Fn(usize) + Send + Sync>, Bindings) {
    let bindings = Bindings(Arc::new(Mutex::new(vec![None; threads])));
    let cpus: Vec<Vec<usize>> = (0..threads).map(|t| topology.core_of_worker(t).pus.clone()).collect();
    let b = bindings.clone();
    let hook = Arc::new(move |t: usize| {
        let r = pin_this_thread(&cpus[t % cpus.len()]);
        if let Some(slot) = b.0.lock().unwrap().get_mut(t) {
            *slot = Some(r);
        }
    });
    (hook, bindings)
}

/// Pins the calling thread to `cpus`; returns the CPUs it is actually allowed on afterwards.
pub fn pin_this_thread(cpus: &[usize]) -> Result<Vec<usize>, String> {
    let mask = os::mask_of(cpus)?;
    os::set(&mask)?;
    let got = os::current().ok_or_else(|| format!("sched_getaffinity: {}", std::io::Error::last_os_error()))?;
    Ok(os::cpus(&got))
}

/// The OS mask of `cpus` (an error names a CPU this OS cannot address); for the balancer
/// thread's lent core, which the loom build does not have.
#[cfg(all(target_os = "linux", not(pbs_loom)))]
pub(crate) fn mask_of(cpus: &[usize]) -> Result<libc::cpu_set_t, String> {
    os::mask_of(cpus)
}

/// The CPUs the calling thread may run on (`None` where the OS does not say).
pub fn cpus_of_this_thread() -> Option<Vec<usize>> {
    os::current().map(|m| os::cpus(&m))
}

/// The CPUs this process may run on, as it was when pbs first asked: the calling thread's mask
/// then, widened by the CPUs of OpenMP's places where an OpenMP runtime in the process has
/// places (`OMP_PROC_BIND` binds the initial thread to the first of them, narrowing its mask
/// to a part of what the process was given; the places cover that). Kept from the first call,
/// so that pbs's own pinning of its caller (`Pinning::WorkersAndCaller`) does not narrow what a
/// later executor sees. `None` where the OS does not say.
pub fn process_cpus() -> Option<Vec<usize>> {
    static FIRST: std::sync::OnceLock<Option<Vec<usize>>> = std::sync::OnceLock::new();
    FIRST
        .get_or_init(|| {
            let mut cpus = cpus_of_this_thread()?;
            cpus.extend(crate::coexistence::openmp_place_cpus());
            cpus.sort_unstable();
            cpus.dedup();
            Some(cpus)
        })
        .clone()
}

/// The calling thread's mask as it is now, put back when this is dropped.
pub struct SavedMask(Option<os::Mask>);

impl SavedMask {
    /// Saves the calling thread's mask (nothing to restore where it cannot be read).
    pub fn of_this_thread() -> SavedMask {
        SavedMask(os::current())
    }
}

impl Drop for SavedMask {
    fn drop(&mut self) {
        if let Some(m) = &self.0 {
            // The mask was this thread's own a moment ago, so the OS accepts it back.
            let _ = os::set(m);
        }
    }
}

/// Worker 0's CPUs, for the calling thread while it runs a phase ([`Pinning::Workers`]).
pub struct CallerPin(os::Mask);

impl CallerPin {
    /// Pins to `cpus` (an error names a CPU this OS cannot address).
    pub fn new(cpus: &[usize]) -> Result<CallerPin, String> {
        os::mask_of(cpus).map(CallerPin)
    }

    /// Pins the calling thread until the returned guard is dropped, which puts its own mask
    /// back; `None`, and no system call, when it already runs on one of worker 0's CPUs (and
    /// none beyond one read when it already has worker 0's mask). A thread the OS refuses to
    /// pin runs the phase unpinned (its binding report says why).
    pub fn enter(&self) -> Option<SavedMask> {
        // A caller already on one of worker 0's CPUs runs the phase where it is, unpinned: the
        // OS does not move the one running thread of a CPU to a busy one, and this saves the
        // two `sched_setaffinity` calls of every phase (docs/design-notes.md, "The caller's
        // pinning"). The first phase, and one after the OS moved the caller, pin as before,
        // which brings it back.
        if os::on_one_of(&self.0) {
            return None;
        }
        let own = os::current()?;
        if os::same(&own, &self.0) || os::set(&self.0).is_err() {
            return None;
        }
        Some(SavedMask(Some(own)))
    }
}

#[cfg(target_os = "linux")]
mod os {
    pub type Mask = libc::cpu_set_t;

    pub fn mask_of(cpus: &[usize]) -> Result<Mask, String> {
        // SAFETY: cpu_set_t is plain data (all zeros is the empty set), and CPU_SET indexes
        // within its fixed size, which the check above each call guarantees.
        unsafe {
            let mut set: Mask = std::mem::zeroed();
            for &c in cpus {
                if c >= libc::CPU_SETSIZE as usize {
                    return Err(format!("CPU {c} beyond CPU_SETSIZE"));
                }
                libc::CPU_SET(c, &mut set);
            }
            Ok(set)
        }
    }

    /// Whether the calling thread runs on a CPU of `mask` now (`sched_getcpu`: no system
    /// call where the C library reads it from the vDSO or rseq).
    pub fn on_one_of(mask: &Mask) -> bool {
        // SAFETY: sched_getcpu has no preconditions; CPU_ISSET indexes below CPU_SETSIZE.
        unsafe {
            let cpu = libc::sched_getcpu();
            cpu >= 0 && (cpu as usize) < libc::CPU_SETSIZE as usize && libc::CPU_ISSET(cpu as usize, mask)
        }
    }

    pub fn current() -> Option<Mask> {
        // SAFETY: the kernel writes at most size_of::<cpu_set_t>() bytes into `got`, which is
        // plain data and valid when zeroed.
        unsafe {
            let mut got: Mask = std::mem::zeroed();
            (libc::sched_getaffinity(0, std::mem::size_of::<Mask>(), &mut got) == 0).then_some(got)
        }
    }

    pub fn set(mask: &Mask) -> Result<(), String> {
        // SAFETY: the kernel reads size_of::<cpu_set_t>() bytes from a valid cpu_set_t.
        if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<Mask>(), mask) } != 0 {
            return Err(format!("sched_setaffinity({:?}): {}", cpus(mask), std::io::Error::last_os_error()));
        }
        Ok(())
    }

    pub fn cpus(mask: &Mask) -> Vec<usize> {
        // SAFETY: CPU_ISSET indexes below CPU_SETSIZE, within the set.
        (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, mask) }).collect()
    }

    pub fn same(a: &Mask, b: &Mask) -> bool {
        // SAFETY: both are valid cpu_set_t; CPU_EQUAL compares their bytes.
        unsafe { libc::CPU_EQUAL(a, b) }
    }
}

#[cfg(not(target_os = "linux"))]
mod os {
    pub type Mask = ();

    pub fn mask_of(cpus: &[usize]) -> Result<Mask, String> {
        Err(format!("pinning to {cpus:?} is implemented for Linux only"))
    }
    pub fn current() -> Option<Mask> {
        None
    }
    pub fn on_one_of(_: &Mask) -> bool {
        false
    }
    pub fn set(_: &Mask) -> Result<(), String> {
        Err("pinning is implemented for Linux only".into())
    }
    pub fn cpus(_: &Mask) -> Vec<usize> {
        Vec::new()
    }
    pub fn same(_: &Mask, _: &Mask) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask_now() -> Vec<usize> {
        cpus_of_this_thread().unwrap()
    }

    #[test]
    fn a_thread_can_be_pinned() {
        let cpu = Topology::detect().cores[0].pus[0];
        let got = std::thread::spawn(move || pin_this_thread(&[cpu])).join().unwrap();
        assert_eq!(got, Ok(vec![cpu]));
    }

    #[test]
    fn the_caller_is_pinned_inside_a_phase_only_and_its_threads_inherit_its_own_mask() {
        let cpus = Topology::detect().cores.iter().map(|c| c.pus[0]).collect::<Vec<_>>();
        let (cpu, other) = (cpus[0], *cpus.last().unwrap());
        std::thread::spawn(move || {
            if other != cpu {
                // On another CPU than worker 0's: pinned for the phase, its own mask after.
                pin_this_thread(&[other]).unwrap();
                let own = mask_now();
                let pin = CallerPin::new(&[cpu]).unwrap();
                {
                    let _inside = pin.enter().expect("pinned from another CPU");
                    assert_eq!(mask_now(), vec![cpu], "pinned inside");
                }
                assert_eq!(mask_now(), own, "its own mask back");
                let child = std::thread::spawn(mask_now).join().unwrap();
                assert_eq!(child, own, "a thread created between phases is not confined");
            }
            // Already on worker 0's CPU (here, its only one): nothing to do, nothing to restore.
            pin_this_thread(&[cpu]).unwrap();
            assert!(CallerPin::new(&[cpu]).unwrap().enter().is_none());
            assert_eq!(mask_now(), vec![cpu]);
        })
        .join()
        .unwrap();
    }

    /// A caller that runs on one of worker 0's CPUs, with a wider mask of its own, runs the
    /// phase there unpinned: no system call, and its mask stays its own.
    #[test]
    fn a_caller_already_on_worker_0_s_cpu_keeps_its_own_mask() {
        let cpus = Topology::detect().cores.iter().map(|c| c.pus[0]).collect::<Vec<_>>();
        if cpus.len() < 2 {
            return; // one CPU: no wider mask to keep
        }
        std::thread::spawn(move || {
            let own = mask_now();
            // Pinning to worker 0's CPU moves the thread there, and its own mask put back
            // leaves it there unless the OS moves it at once: try a few times.
            for _ in 0..100 {
                pin_this_thread(&[cpus[0]]).unwrap();
                pin_this_thread(&own).unwrap();
                let guard = CallerPin::new(&[cpus[0]]).unwrap().enter();
                let unpinned = guard.is_none() && mask_now() == own;
                drop(guard);
                if unpinned {
                    return;
                }
            }
            panic!("the caller was pinned in every one of 100 phases it started on worker 0's CPU");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn the_start_hook_pins_each_worker_to_its_core_and_reports_it() {
        let topology = Topology::detect();
        let threads = topology.cores.len().max(2);
        let (hook, bindings) = pinning(&topology, threads);
        assert_eq!(bindings.report(), vec![None; threads], "no worker started yet");
        for t in 0..threads {
            let hook = Arc::clone(&hook);
            let mask = std::thread::spawn(move || {
                hook(t);
                mask_now()
            })
            .join()
            .unwrap();
            let mut core = topology.core_of_worker(t).pus.clone();
            core.sort_unstable();
            assert_eq!(mask, core, "worker {t}");
            assert_eq!(bindings.report()[t], Some(Ok(core)), "worker {t}");
        }
    }

    #[test]
    fn pinning_names_from_c() {
        assert_eq!(Pinning::from_c(0), Some(Pinning::Off));
        assert_eq!(Pinning::from_c(1), Some(Pinning::Workers));
        assert_eq!(Pinning::from_c(2), Some(Pinning::WorkersAndCaller));
        assert_eq!(Pinning::from_c(3), None);
        assert!(CallerPin::new(&[1 << 20]).err().unwrap().contains("CPU_SETSIZE"));
    }
}
