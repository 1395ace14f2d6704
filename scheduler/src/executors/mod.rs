//! The executors, one file each: [`Pbs`] (owner computes from the balancer's mapping),
//! [`WorkStealing`] (rayon), [`EagerFifo`] (one shared FIFO, StarPU's default) and
//! [`StaticBlocks`] (equal contiguous blocks, OpenMP `schedule(static)`).

mod eager;
mod pbs;
mod static_blocks;
mod work_stealing;

pub use eager::EagerFifo;
pub use pbs::{Pbs, PbsOptions, Stealing};
pub use static_blocks::StaticBlocks;
pub use work_stealing::WorkStealing;
