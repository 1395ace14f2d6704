//! What an app's state asks of the machine, checked before it is built: a grid too large for
//! the memory is an error naming the sizes, not an abort at whichever allocation fails first
//! or a process the kernel kills once the pages are touched.

/// Bytes an app's per-box state takes, estimated from above: `fixed` for every box of the grid
/// (headers, loads) and `held` more for each box whose data this process holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StateBytes {
    pub fixed: usize,
    pub held: usize,
}

/// Whether the state of `what` for `boxes` boxes, `held` of them holding data, fits: the
/// system must grant the reservation ([`pbs::check_memory`]) and, where Linux says how much
/// memory is available, the state must fit in it (RAM and swap a new process could still
/// take: an overcommitted reservation is granted, and the process is killed when it touches
/// the pages).
pub(crate) fn check_state(what: &'static str, boxes: usize, held: usize, per_box: StateBytes) -> Result<(), String> {
    let total = per_box.fixed.saturating_mul(boxes).saturating_add(per_box.held.saturating_mul(held));
    pbs::check_memory(what, boxes, total.div_ceil(boxes.max(1))).map_err(|e| e.to_string())?;
    within_available(what, (boxes, "boxes"), total, available_bytes()).map_err(|e| format!("{e}; use a smaller grid"))
}

/// Whether `count` items (`unit`: "boxes", "iterations") of `bytes_each` bytes fit, as the
/// apps ask it of their own state: the system must grant the reservation (as
/// [`pbs::check_memory`] asks it) and, where Linux says, the memory available (`MemAvailable +
/// SwapFree`) must hold it; an error names `what` and the sizes. For what a program keeps
/// besides an app's state: a trace of recorded box costs, every iteration's records.
pub fn fits_in_memory(what: &'static str, (count, unit): (usize, &str), bytes_each: usize) -> Result<(), String> {
    pbs::check_memory(what, count, bytes_each).map_err(|e| match e {
        pbs::Error::OutOfMemory { bytes, .. } => {
            format!("out of memory: {what} for {count} {unit} needs {bytes} bytes, which the system refused")
        }
        other => other.to_string(),
    })?;
    within_available(what, (count, unit), count.saturating_mul(bytes_each), available_bytes())
}

/// The second half of [`check_state`] and [`fits_in_memory`]: `total` bytes against the
/// `available` ones, where known.
fn within_available(
    what: &str,
    (count, unit): (usize, &str),
    total: usize,
    available: Option<usize>,
) -> Result<(), String> {
    match available {
        Some(available) if total > available => Err(format!(
            "out of memory: {what} for {count} {unit} needs about {total} bytes, more than the {available} \
             bytes this machine has available (MemAvailable + SwapFree in /proc/meminfo)"
        )),
        _ => Ok(()),
    }
}

/// `MemAvailable + SwapFree` from `/proc/meminfo`, in bytes; `None` where the file or a field
/// is missing (not Linux, an old kernel).
fn available_bytes() -> Option<usize> {
    parse_meminfo(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

/// [`available_bytes`] from the text of `/proc/meminfo` (`Name:   value kB` lines).
fn parse_meminfo(text: &str) -> Option<usize> {
    let field = |name: &str| -> Option<usize> {
        let line = text.lines().find(|l| l.split(':').next() == Some(name))?;
        let kib: usize = line.split(':').nth(1)?.split_whitespace().next()?.parse().ok()?;
        kib.checked_mul(1024)
    };
    Some(field("MemAvailable")?.saturating_add(field("SwapFree")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn available_memory_is_read_from_meminfo_and_missing_fields_give_none() {
        let text = "MemTotal:       24000000 kB\nMemAvailable:   2000 kB\nSwapTotal: 0 kB\nSwapFree:       48 kB\n";
        assert_eq!(parse_meminfo(text), Some(2048 * 1024));
        assert_eq!(parse_meminfo("MemTotal: 5 kB\nSwapFree: 1 kB\n"), None);
        assert_eq!(parse_meminfo("MemAvailable: lots kB\nSwapFree: 1 kB\n"), None);
    }

    /// A state the reservation grants but the available memory cannot hold (an overcommitted
    /// machine) is refused, naming both sizes; an unknown availability refuses nothing.
    #[test]
    fn a_state_beyond_the_available_memory_is_refused() {
        let e = within_available("md particles", (10, "boxes"), 5000, Some(4096)).unwrap_err();
        assert_eq!(
            e,
            "out of memory: md particles for 10 boxes needs about 5000 bytes, more than the 4096 bytes this \
             machine has available (MemAvailable + SwapFree in /proc/meminfo)"
        );
        within_available("md particles", (10, "boxes"), 4096, Some(4096)).unwrap();
        within_available("md particles", (10, "boxes"), usize::MAX, None).unwrap();
    }

    #[test]
    fn a_state_larger_than_the_machine_is_refused_with_its_size() {
        let per_box = StateBytes { fixed: 100, held: 1 << 20 };
        check_state("tiny state", 4, 4, per_box).unwrap();
        // 2^32 − 1 boxes of a MiB each: 4 PiB, more than any machine this runs on.
        let e = check_state("huge state", u32::MAX as usize, u32::MAX as usize, per_box).unwrap_err();
        assert!(e.starts_with("out of memory: huge state for 4294967295 boxes"), "{e}");
        // Only the boxes held count for their data.
        check_state("mostly elsewhere", 1 << 20, 1, per_box).unwrap();
    }

    /// A program's own data (a trace) is checked as the apps' state is.
    #[test]
    fn a_program_s_own_data_past_the_machine_is_refused_and_a_little_fits() {
        fits_in_memory("box costs", (1000, "boxes"), 8).unwrap();
        let e = fits_in_memory("box costs", (1 << 40, "boxes"), 1 << 20).unwrap_err();
        assert_eq!(e, "out of memory: box costs for 1099511627776 boxes needs 1152921504606846976 bytes, which the system refused");
        let e = fits_in_memory("records", (1 << 40, "iterations"), 1 << 20).unwrap_err();
        assert!(e.starts_with("out of memory: records for 1099511627776 iterations needs"), "{e}");
        let e = within_available("records", (4, "iterations"), 5000, Some(4096)).unwrap_err();
        assert!(e.starts_with("out of memory: records for 4 iterations needs about 5000 bytes"), "{e}");
    }

    /// On Linux the availability is known, so the second check is made.
    #[cfg(target_os = "linux")]
    #[test]
    fn linux_says_how_much_memory_is_available() {
        let available = available_bytes().expect("/proc/meminfo has MemAvailable and SwapFree");
        assert!(available > 1 << 20, "{available} bytes");
    }
}
