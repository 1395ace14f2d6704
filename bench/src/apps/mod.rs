//! Grid mini-apps that drive the scheduler: real codes, owner computes, deterministic.
//!
//! Every app keeps its state per box, runs each iteration as phases in which a box's task
//! reads its neighbours' data from a previous phase and writes only its own, and sums in a
//! fixed order within a box. Hence [`GridApp::checksum`] is the same under every executor and
//! thread count (tested).

pub mod md;
pub mod stencil;

use pbs::Grid;
use pbs_scheduler::cache_model::CacheModel;
use pbs_scheduler::report::Recorder;
use pbs_scheduler::Executor;

/// A grid code.
pub trait GridApp: Send {
    /// `md` or `stencil`.
    fn name(&self) -> &'static str;
    /// Its grid of boxes.
    fn grid(&self) -> Grid;
    /// Bytes of one box's data and of the halo a task reads from each neighbour (for the
    /// modelled cache).
    fn footprint(&self) -> (u64, u64);
    /// One iteration on `exec`; every phase is recorded, and if a cache model is given every
    /// box execution is fed to it.
    fn iterate(&mut self, exec: &mut dyn Executor, rec: &mut Recorder, cache: Option<&CacheModel>);
    /// A hash of the whole state, bit for bit.
    fn checksum(&self) -> u64;
    /// Work per box in the last iteration, for pictures of the load (arbitrary units).
    fn box_work(&self) -> Vec<f64>;
}

/// FNV-1a over 64-bit words, in order.
pub(crate) fn fnv(words: impl Iterator<Item = u64>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for w in words {
        for b in w.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}
