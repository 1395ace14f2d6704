//! Machine topology: packages, NUMA nodes, cores, hardware threads. Binding threads to them
//! is [`crate::pinning`]'s.
//!
//! Sources, in order: hwloc (cargo feature `hwloc`, on by default), Linux sysfs, and as a last
//! resort one node with `available_parallelism` cores. Tests build machines they do not have
//! from hwloc's *synthetic* descriptions (`"pack:2 numa:1 core:4 pu:1"`), parsed by hwloc when
//! present and by [`Topology::synthetic`]'s own parser otherwise, so NUMA logic is tested
//! everywhere.
//!
//! One worker per core by default; `PBS_NUM_THREADS` overrides it, as `RAYON_NUM_THREADS`
//! does for rayon. Workers are numbered so that consecutive ids share a NUMA node.

/// One core.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Core {
    /// Package (socket) index, 0-based.
    pub package: usize,
    /// NUMA node index, 0-based.
    pub numa: usize,
    /// OS ids of its hardware threads (PUs), as `sched_setaffinity` numbers CPUs.
    pub pus: Vec<usize>,
}

/// A machine: its cores, ordered by NUMA node, then package, then position.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Topology {
    /// Number of packages of the machine.
    pub packages: usize,
    /// Number of NUMA nodes of the machine (a process given part of it may have cores on some
    /// only: [`Topology::within`]).
    pub numa_nodes: usize,
    /// The cores.
    pub cores: Vec<Core>,
    /// Where this description came from (`hwloc`, `sysfs`, `synthetic: ...`, `fallback`).
    pub source: String,
}

/// Environment variable that sets the number of worker threads.
pub const THREADS_ENV: &str = "PBS_NUM_THREADS";

impl Topology {
    /// The part of this machine the process may run on: the cores with a hardware thread among
    /// [`crate::pinning::process_cpus`] (what `taskset`, `mpirun --bind-to`, `srun --cpu-bind`
    /// or a batch system's cpuset gave the process), each with only those; the whole machine
    /// where the process may run anywhere or the OS does not say. Default thread counts and
    /// pinning follow it, so that workers stay inside the process's binding, as OpenMP's and
    /// TBB's do (StarPU's with `STARPU_WORKERS_GETBIND`).
    pub fn detect() -> Topology {
        let machine = Topology::machine();
        match crate::pinning::process_cpus() {
            Some(cpus) => machine.within(&cpus).unwrap_or(machine),
            None => machine,
        }
    }

    /// The whole machine this runs on, whatever the process may run on. Discovered once per
    /// process, as the process's CPUs are read once: hwloc reads sysfs files by the CPU, and
    /// every executor, from C too, starts from this (docs/soundness.md).
    pub fn machine() -> Topology {
        static MACHINE: std::sync::OnceLock<Topology> = std::sync::OnceLock::new();
        MACHINE.get_or_init(Topology::discover).clone()
    }

    /// [`Topology::machine`], from the sources in order.
    fn discover() -> Topology {
        #[cfg(feature = "hwloc")]
        if let Ok(t) = hwloc::detect() {
            return t;
        }
        sysfs().unwrap_or_else(|_| {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            let cores = (0..n).map(|i| Core { package: 0, numa: 0, pus: vec![i] }).collect();
            Topology { packages: 1, numa_nodes: 1, cores, source: "fallback".into() }
        })
    }

    /// The cores with a hardware thread among `cpus`, each keeping only those; `None` if no core
    /// is left. NUMA nodes and packages keep the machine's numbers and counts (memory binding
    /// names nodes by them, [`crate::first_touch`]), some of them now with no core. The same
    /// topology when every hardware thread is in `cpus`.
    pub fn within(&self, cpus: &[usize]) -> Option<Topology> {
        let cores: Vec<Core> = self
            .cores
            .iter()
            .filter_map(|c| {
                let pus: Vec<usize> = c.pus.iter().copied().filter(|p| cpus.contains(p)).collect();
                (!pus.is_empty()).then(|| Core { pus, ..c.clone() })
            })
            .collect();
        if cores.is_empty() {
            return None;
        }
        if cores == self.cores {
            return Some(self.clone());
        }
        let pus: Vec<usize> = cores.iter().flat_map(|c| c.pus.iter().copied()).collect();
        let source = format!("{} (the process's CPUs: {})", self.source, cpu_list(&pus));
        Some(Topology { packages: self.packages, numa_nodes: self.numa_nodes, cores, source })
    }

    /// A machine described in hwloc's synthetic syntax: levels `type:count` from the top,
    /// types `pack`/`package`/`socket`, `numa`/`node`, caches (`l1`..`l3`, ignored), `core`,
    /// `pu`. `"pack:2 numa:1 core:4 pu:1"` is two sockets of one NUMA node and four cores each.
    pub fn synthetic(description: &str) -> Result<Topology, String> {
        #[cfg(feature = "hwloc")]
        {
            hwloc::synthetic(description)
        }
        #[cfg(not(feature = "hwloc"))]
        {
            parse_synthetic(description)
        }
    }

    /// Worker threads to use: `PBS_NUM_THREADS` if set (an error names a bad value), else one
    /// per core.
    pub fn default_threads(&self) -> Result<usize, String> {
        threads_from(std::env::var(THREADS_ENV).ok().as_deref(), self.cores.len())
    }

    /// Core of worker `t` among `threads` (round-robin over cores when oversubscribed).
    ///
    /// # Panics
    /// If the topology has no core.
    pub fn core_of_worker(&self, t: usize) -> &Core {
        &self.cores[t % self.cores.len()]
    }

    /// NUMA node of every worker.
    ///
    /// # Panics
    /// If the topology has no core.
    pub fn numa_of_workers(&self, threads: usize) -> Vec<usize> {
        (0..threads).map(|t| self.core_of_worker(t).numa).collect()
    }
}

/// Worker threads from the value of `PBS_NUM_THREADS` if set, else one per core.
fn threads_from(var: Option<&str>, cores: usize) -> Result<usize, String> {
    match var {
        Some(v) => match v.trim().parse::<usize>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => Err(format!("{THREADS_ENV}={v:?}: expected a whole number ≥ 1")),
        },
        None => Ok(cores.max(1)),
    }
}

/// Size in bytes of the per-core data cache the modelled cache should use: the level-2 cache
/// of CPU 0 as sysfs reports it (or level 1 if there is no level 2); `None` if unknown.
pub fn per_core_cache_bytes() -> Option<u64> {
    let base = "/sys/devices/system/cpu/cpu0/cache";
    let caches = std::fs::read_dir(base).ok()?.flatten().filter_map(|e| {
        let dir = e.path();
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok().map(|s| s.trim().to_string());
        Some((read("level")?, read("type")?, read("size")?))
    });
    data_cache_bytes(caches)
}

/// [`per_core_cache_bytes`] from sysfs's `(level, type, size)` of each cache.
fn data_cache_bytes(caches: impl Iterator<Item = (String, String, String)>) -> Option<u64> {
    let mut best: Option<(u32, u64)> = None;
    for (level, kind, size) in caches {
        if kind == "Instruction" {
            continue;
        }
        let level: u32 = level.parse().ok()?;
        let bytes = if let Some(k) = size.strip_suffix('K') {
            k.parse::<u64>().ok()? * 1024
        } else if let Some(m) = size.strip_suffix('M') {
            m.parse::<u64>().ok()? * 1024 * 1024
        } else {
            size.parse().ok()?
        };
        if level <= 2 && best.is_none_or(|(l, _)| level > l) {
            best = Some((level, bytes));
        }
    }
    best.map(|b| b.1)
}

/// Parses the synthetic syntax without hwloc (see [`Topology::synthetic`]).
pub fn parse_synthetic(description: &str) -> Result<Topology, String> {
    let mut levels = Vec::new();
    for token in description.split_whitespace() {
        let (kind, count) = token.split_once(':').ok_or_else(|| format!("{token:?}: expected type:count"))?;
        let count: usize = count.parse().map_err(|_| format!("{token:?}: {count:?} is not a count"))?;
        if count == 0 {
            return Err(format!("{token:?}: a level needs at least one object"));
        }
        let kind = match kind.to_ascii_lowercase().as_str() {
            "pack" | "package" | "socket" => "pack",
            "numa" | "node" | "numanode" => "numa",
            "l1" | "l2" | "l3" | "l1d" | "l2d" | "l3d" | "l1cache" | "l2cache" | "l3cache" | "group" | "die" => {
                continue
            }
            "core" => "core",
            "pu" => "pu",
            other => return Err(format!("unknown level type {other:?}")),
        };
        levels.push((kind, count));
    }
    if !levels.iter().any(|l| l.0 == "core") {
        return Err("a synthetic topology needs a core level".into());
    }
    let (mut packages, mut numa_nodes, mut cores) = (1usize, 1usize, Vec::new());
    // Walk the levels as nested loops: every combination of indices is one PU.
    let total: usize = levels.iter().map(|l| l.1).product();
    let mut seen_core = usize::MAX;
    for flat in 0..total {
        let mut rest = flat;
        let mut idx = vec![0; levels.len()];
        for (d, l) in levels.iter().enumerate().rev() {
            idx[d] = rest % l.1;
            rest /= l.1;
        }
        let upto = |k: &str| {
            let mut v = 0;
            for (d, l) in levels.iter().enumerate() {
                if l.0 == k || (k == "numa" && l.0 == "pack") {
                    v = v * l.1 + idx[d];
                }
                if l.0 == k {
                    break;
                }
            }
            v
        };
        let core_id = {
            let mut v = 0;
            for (d, l) in levels.iter().enumerate() {
                if l.0 == "pu" {
                    break;
                }
                v = v * l.1 + idx[d];
            }
            v
        };
        let package = if levels.iter().any(|l| l.0 == "pack") { upto("pack") } else { 0 };
        // As hwloc does: without a numa level the whole machine is one node.
        let numa = if levels.iter().any(|l| l.0 == "numa") { upto("numa") } else { 0 };
        packages = packages.max(package + 1);
        numa_nodes = numa_nodes.max(numa + 1);
        if core_id != seen_core {
            cores.push(Core { package, numa, pus: Vec::new() });
            seen_core = core_id;
        }
        cores.last_mut().expect("pushed").pus.push(flat);
    }
    cores.sort_by_key(|c| (c.numa, c.package));
    Ok(Topology { packages, numa_nodes, cores, source: format!("synthetic: {description}") })
}

/// Linux sysfs: packages and cores from `cpu*/topology`, NUMA nodes from `node*/cpulist`.
fn sysfs() -> Result<Topology, String> {
    let read = |p: String| std::fs::read_to_string(&p).map_err(|e| format!("{p}: {e}"));
    let online = read("/sys/devices/system/cpu/online".into())?;
    let cpus = parse_cpulist(online.trim())?;
    let mut node_of = std::collections::HashMap::new();
    if let Ok(dir) = std::fs::read_dir("/sys/devices/system/node") {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if let Some(n) = name.strip_prefix("node").and_then(|n| n.parse::<usize>().ok()) {
                if let Ok(list) = read(format!("/sys/devices/system/node/{name}/cpulist")) {
                    for c in parse_cpulist(list.trim())? {
                        node_of.insert(c, n);
                    }
                }
            }
        }
    }
    let mut by_core: std::collections::BTreeMap<(usize, usize, usize), Vec<usize>> = Default::default();
    for c in cpus {
        let pkg =
            read(format!("/sys/devices/system/cpu/cpu{c}/topology/physical_package_id"))?.trim().parse().unwrap_or(0);
        let core = read(format!("/sys/devices/system/cpu/cpu{c}/topology/core_id"))?.trim().parse().unwrap_or(c);
        let numa = node_of.get(&c).copied().unwrap_or(0);
        by_core.entry((numa, pkg, core)).or_default().push(c);
    }
    let nodes: std::collections::BTreeSet<usize> = by_core.keys().map(|k| k.0).collect();
    let pkgs: std::collections::BTreeSet<usize> = by_core.keys().map(|k| k.1).collect();
    let rank = |set: &std::collections::BTreeSet<usize>, v| set.iter().position(|&x| x == v).unwrap_or(0);
    let cores = by_core
        .into_iter()
        .map(|((n, p, _), pus)| Core { package: rank(&pkgs, p), numa: rank(&nodes, n), pus })
        .collect();
    Ok(Topology { packages: pkgs.len(), numa_nodes: nodes.len().max(1), cores, source: "sysfs".into() })
}

/// CPU ids in the kernel's list syntax (`0-3,8,10-11`).
fn cpu_list(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        parts.push(if j > i { format!("{}-{}", sorted[i], sorted[j]) } else { sorted[i].to_string() });
        i = j + 1;
    }
    parts.join(",")
}

/// Parses a kernel CPU list such as `0-3,8,10-11`.
pub fn parse_cpulist(s: &str) -> Result<Vec<usize>, String> {
    let mut v = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        let bad = || format!("bad CPU list {s:?}");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                v.extend(a..=b);
            }
            None => v.push(part.parse().map_err(|_| bad())?),
        }
    }
    Ok(v)
}

#[cfg(feature = "hwloc")]
mod hwloc {
    use super::{Core, Topology};
    use hwlocality::object::types::ObjectType;
    use hwlocality::Topology as Hw;

    pub fn detect() -> Result<Topology, String> {
        let t = Hw::new().map_err(|e| e.to_string())?;
        convert(&t, "hwloc".into())
    }

    pub fn synthetic(desc: &str) -> Result<Topology, String> {
        let t = Hw::builder()
            .from_synthetic(desc)
            .map_err(|e| format!("synthetic topology {desc:?}: {e}"))?
            .build()
            .map_err(|e| e.to_string())?;
        convert(&t, format!("synthetic: {desc}"))
    }

    fn convert(t: &Hw, source: String) -> Result<Topology, String> {
        let numa_os: Vec<usize> = t.objects_with_type(ObjectType::NUMANode).filter_map(|n| n.os_index()).collect();
        let packages = t.objects_with_type(ObjectType::Package).count().max(1);
        let mut cores = Vec::new();
        for c in t.objects_with_type(ObjectType::Core) {
            let pus: Vec<usize> = c.cpuset().map(|s| s.iter_set().map(usize::from).collect()).unwrap_or_default();
            let package = c.first_ancestor_with_type(ObjectType::Package).map_or(0, |p| p.logical_index());
            let numa = c
                .nodeset()
                .and_then(|s| s.iter_set().next().map(usize::from))
                .and_then(|os| numa_os.iter().position(|&n| n == os))
                .unwrap_or(0);
            cores.push(Core { package, numa, pus });
        }
        if cores.is_empty() {
            return Err("hwloc found no core".into());
        }
        cores.sort_by_key(|c| (c.numa, c.package));
        Ok(Topology { packages, numa_nodes: numa_os.len().max(1), cores, source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thread_count_comes_from_the_variable_or_the_cores() {
        assert_eq!(threads_from(None, 6), Ok(6));
        assert_eq!(threads_from(None, 0), Ok(1), "a machine without cores still gets a thread");
        assert_eq!(threads_from(Some(" 3 "), 6), Ok(3));
        assert_eq!(threads_from(Some("1"), 6), Ok(1));
        for bad in ["0", "-2", "two", ""] {
            assert!(threads_from(Some(bad), 6).unwrap_err().contains(THREADS_ENV), "{bad:?}");
        }
    }

    #[test]
    fn the_default_thread_count_is_one_per_core_unless_the_variable_says() {
        let t = parse_synthetic("pack:2 numa:1 core:4 pu:1").unwrap();
        match std::env::var(THREADS_ENV) {
            Err(_) => assert_eq!(t.default_threads(), Ok(8)),
            Ok(v) => assert_eq!(t.default_threads(), threads_from(Some(&v), 8)),
        }
        // This machine's sysfs, where it lists caches, gives a data cache of some KiB at least.
        if std::path::Path::new("/sys/devices/system/cpu/cpu0/cache/index0/size").exists() {
            assert!(per_core_cache_bytes().is_some_and(|b| b >= 4096), "{:?}", per_core_cache_bytes());
        }
    }

    #[test]
    fn the_modelled_cache_is_the_data_cache_of_level_2_or_else_1() {
        let cache = |level: &str, kind: &str, size: &str| (level.to_string(), kind.to_string(), size.to_string());
        let cpu = || {
            vec![
                cache("1", "Data", "48K"),
                cache("1", "Instruction", "32K"),
                cache("2", "Unified", "2M"),
                cache("3", "Unified", "105M"),
            ]
        };
        assert_eq!(data_cache_bytes(cpu().into_iter()), Some(2 << 20));
        assert_eq!(data_cache_bytes(cpu().into_iter().rev()), Some(2 << 20), "in any order");
        let no_l2 = cpu().into_iter().filter(|c| c.0 != "2");
        assert_eq!(data_cache_bytes(no_l2), Some(48 << 10));
        assert_eq!(data_cache_bytes([cache("2", "Unified", "1048576")].into_iter()), Some(1 << 20), "plain bytes");
        assert_eq!(data_cache_bytes([cache("1", "Instruction", "32K")].into_iter()), None);
        assert_eq!(data_cache_bytes([cache("two", "Data", "32K")].into_iter()), None, "unreadable: unknown");
    }

    #[test]
    fn synthetic_two_sockets_of_four_cores() {
        for t in [
            parse_synthetic("pack:2 numa:1 core:4 pu:1").unwrap(),
            Topology::synthetic("pack:2 numa:1 core:4 pu:1").unwrap(),
        ] {
            assert_eq!((t.packages, t.numa_nodes, t.cores.len()), (2, 2, 8), "{t:?}");
            assert_eq!(t.numa_of_workers(8), vec![0, 0, 0, 0, 1, 1, 1, 1], "{}", t.source);
            assert!(t.cores.iter().all(|c| c.pus.len() == 1));
        }
        // Two nodes in each of two packages: nodes numbered across the packages.
        let nested = [
            parse_synthetic("pack:2 numa:2 core:2 pu:1").unwrap(),
            Topology::synthetic("pack:2 numa:2 core:2 pu:1").unwrap(),
        ];
        for t in nested {
            assert_eq!((t.packages, t.numa_nodes), (2, 4), "{}", t.source);
            assert_eq!(t.numa_of_workers(8), [0, 0, 1, 1, 2, 2, 3, 3], "{}", t.source);
            assert_eq!(t.cores.iter().map(|c| c.package).collect::<Vec<_>>(), [0, 0, 0, 0, 1, 1, 1, 1], "{}", t.source);
        }
        let smt = parse_synthetic("pack:1 numa:2 l3:1 core:3 pu:2").unwrap();
        assert_eq!((smt.numa_nodes, smt.cores.len()), (2, 6));
        assert_eq!(smt.cores[0].pus, vec![0, 1]);
        assert!(parse_synthetic("pack:2 pu:1").is_err());
        assert!(parse_synthetic("pack:two core:1").unwrap_err().contains("not a count"));
    }

    /// hwloc and our parser agree on the structure of the same description.
    #[cfg(feature = "hwloc")]
    #[test]
    fn hwloc_and_the_fallback_parser_agree() {
        for d in ["pack:2 numa:1 core:4 pu:1", "pack:1 numa:2 core:3 pu:2", "pack:4 core:2 pu:1"] {
            let (a, b) = (Topology::synthetic(d).unwrap(), parse_synthetic(d).unwrap());
            assert_eq!((a.packages, a.numa_nodes, a.cores.len()), (b.packages, b.numa_nodes, b.cores.len()), "{d}");
            let numa = |t: &Topology| t.cores.iter().map(|c| c.numa).collect::<Vec<_>>();
            assert_eq!(numa(&a), numa(&b), "{d}");
        }
    }

    /// The sysfs reader, the fallback where hwloc is not built in, sees this machine as hwloc
    /// does: each core's hardware threads, and where hwloc sees every online CPU (no cpuset
    /// hides part of the machine from it) the packages, NUMA nodes and each core's node too.
    #[cfg(all(feature = "hwloc", target_os = "linux"))]
    #[test]
    fn sysfs_and_hwloc_see_this_machine_alike() {
        let (fs, hw) = (sysfs().unwrap(), hwloc::detect().unwrap());
        assert_eq!(fs.source, "sysfs");
        let seen: Vec<usize> = hw.cores.iter().flat_map(|c| c.pus.iter().copied()).collect();
        let cores = |t: &Topology, numa: bool| {
            let mut c: Vec<(usize, Vec<usize>)> =
                t.cores.iter().map(|c| (if numa { c.numa } else { 0 }, c.pus.clone())).collect();
            c.sort();
            c
        };
        let within = fs.within(&seen).expect("hwloc's CPUs are online");
        let whole = within.cores == fs.cores;
        assert_eq!(cores(&within, whole), cores(&hw, whole), "{fs:?}\n{hw:?}");
        if whole {
            assert_eq!((fs.packages, fs.numa_nodes), (hw.packages, hw.numa_nodes), "{fs:?}\n{hw:?}");
        }
    }

    #[test]
    fn this_machine_is_detected() {
        let t = Topology::detect();
        assert!(!t.cores.is_empty(), "{t:?}");
        eprintln!(
            "detected via {}: {} packages, {} NUMA nodes, {} cores",
            t.source,
            t.packages,
            t.numa_nodes,
            t.cores.len()
        );
    }

    #[test]
    fn a_process_given_part_of_the_machine_sees_only_its_cores() {
        // Two packages of one NUMA node each, two cores of two hardware threads per package.
        let t = parse_synthetic("pack:2 numa:1 core:2 pu:2").unwrap();
        assert_eq!(t.cores[1].pus, vec![2, 3]);
        let across = t.within(&[3, 4, 5]).unwrap();
        assert_eq!(across.cores.iter().map(|c| c.pus.clone()).collect::<Vec<_>>(), vec![vec![3], vec![4, 5]]);
        assert_eq!(across.numa_of_workers(2), vec![0, 1]);
        assert!(across.source.ends_with("(the process's CPUs: 3-5)"), "{}", across.source);
        let second = t.within(&[4, 5, 6, 7]).unwrap();
        assert_eq!(second.cores.len(), 2);
        assert_eq!(second.numa_of_workers(2), vec![1, 1], "the machine's node numbers, as memory binding names them");
        assert_eq!((second.numa_nodes, second.packages), (2, 2), "the machine's counts");
        assert_eq!(t.within(&(0..8).collect::<Vec<_>>()).unwrap(), t, "all of it: the same topology");
        assert_eq!(t.within(&[99]), None);
    }

    #[test]
    fn cpu_lists_print_as_the_kernel_writes_them() {
        assert_eq!(cpu_list(&[11, 0, 1, 2, 3, 8, 10, 3]), "0-3,8,10-11");
        assert_eq!(cpu_list(&[5]), "5");
    }

    #[test]
    fn cpu_lists_parse() {
        assert_eq!(parse_cpulist("0-3,8,10-11").unwrap(), vec![0, 1, 2, 3, 8, 10, 11]);
        assert!(parse_cpulist("0-x").is_err());
    }
}
