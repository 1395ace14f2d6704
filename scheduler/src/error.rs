//! The runtime's error type: what can go wrong building an executor, each named.

/// Why an executor, a pool or a runtime could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The balancer refused its input (grid, vCores, method, loads) or ran out of memory.
    #[error(transparent)]
    Balancer(#[from] pbs::Error),
    /// A team of zero threads cannot run anything.
    #[error("zero threads: a pool needs at least one worker")]
    NoThreads,
    /// More worker threads than a pool takes, or than the process's pools take together.
    #[error("{}", too_many_threads(*threads, *held, *max))]
    TooManyThreads {
        /// Threads asked for.
        threads: usize,
        /// Threads the process's other pools hold ([`crate::thread_budget`]).
        held: usize,
        /// The most the pools of a process take together ([`crate::pool::MAX_THREADS`]).
        max: usize,
    },
    /// The operating system refused a worker thread (its thread or memory limit); the workers
    /// already started were stopped and joined.
    #[error("could not start worker thread {index} of {threads}: {source}")]
    Spawn {
        /// The worker that could not start (1-based: the caller is worker 0).
        index: usize,
        /// Workers asked for.
        threads: usize,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// Rayon could not start its pool (the work-stealing executor).
    #[error("could not start a rayon pool of {threads} threads: {reason}")]
    RayonPool {
        /// Threads asked for.
        threads: usize,
        /// What rayon said.
        reason: String,
    },
    /// No executor has this name.
    #[error("unknown executor {name:?}; expected one of {}", crate::runtime::EXECUTORS.join(", "))]
    UnknownExecutor {
        /// The name asked for.
        name: String,
    },
    /// The machine's description or `PBS_NUM_THREADS` could not be used.
    #[error("{0}")]
    Topology(String),
    /// An environment variable of the runtime has a value it does not take.
    #[error("{name}={value:?}: {reason}")]
    Environment {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What it takes instead.
        reason: &'static str,
    },
}

/// The error of a setting out of its range, as the balancer names its own
/// (`pbs::Error::Parameter`): shared by the executors' option checks.
pub(crate) fn parameter(name: &'static str, value: String, reason: &'static str) -> Error {
    Error::Balancer(pbs::Error::Parameter { name, value, reason })
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, Error>;

fn too_many_threads(threads: usize, held: usize, max: usize) -> String {
    let why = "each thread costs the system several memory maps, and past a few thousand Linux's \
vm.max_map_count aborts the process when a thread starts";
    if threads > max {
        format!("{threads} threads: a pool takes at most {max} ({why})")
    } else {
        format!("{threads} threads: the other pools of this process hold {held}, and all pools together take at most {max} ({why})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Past a pool's own limit the message says so; at or under it, the threads the process's
    /// other pools hold made the difference, and the message names them.
    #[test]
    fn too_many_threads_names_the_limit_that_was_passed() {
        let text = |threads, held| Error::TooManyThreads { threads, held, max: 4096 }.to_string();
        assert!(text(5000, 0).starts_with("5000 threads: a pool takes at most 4096 ("), "{}", text(5000, 0));
        for threads in [4096, 100] {
            let t = text(threads, 4000);
            let other = format!("{threads} threads: the other pools of this process hold 4000, and all pools together");
            assert!(t.starts_with(&other) && t.contains("take at most 4096 ("), "{t}");
        }
        assert!(text(1, 4096).contains("vm.max_map_count"));
    }
}
