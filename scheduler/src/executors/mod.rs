//! The executors, one file each: [`Pbs`] (owner computes from the balancer's mapping),
//! [`WorkStealing`] (rayon), [`EagerFifo`] (one shared FIFO, StarPU's default) and
//! [`StaticBlocks`] (equal contiguous blocks, OpenMP `schedule(static)`), and [`Remapping`]
//! (owner computes from the seed papers' other balancers: RCB, NoRCB, PackStealLB, vector
//! RCB, vector and norm greedy).

pub(crate) mod check;
mod eager;
mod owner_lists;
mod pbs;
mod remap_policy;
mod remapping;
mod static_blocks;
mod timing;
mod work_stealing;

pub use check::PAYBACK_ITERATIONS;
pub use eager::EagerFifo;
#[cfg(pbs_loom)]
pub use pbs::loom_claims;
pub(crate) use pbs::victim_order;
#[cfg(test)]
pub(crate) use pbs::PERSISTENT_ITERATIONS;
pub use pbs::{
    balancer_units, Lending, Observation, Overlap, Pbs, PbsOptions, RebalancePolicy, Standing, Stealing, RESTART_UNITS,
    STEAL_MIN_PHASE,
};
pub use remap_policy::RemapPolicy;
pub use remapping::{RemapInputs, RemapOptions, Remapper, Remapping};
pub use static_blocks::StaticBlocks;
pub use work_stealing::WorkStealing;
