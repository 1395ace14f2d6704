//! temporary
#![allow(missing_docs)]
pub struct Settings { pub trials: usize, pub large_trials: usize, pub paper_trials: usize, pub paper_max_steps: usize }
impl Settings { pub fn quick() -> Self { todo!() } }
pub fn write_report(_: &std::path::Path, _: &Settings) -> Result<std::path::PathBuf, String> { todo!() }
