//! Progress bars for long runs: drawn on a terminal, silent otherwise (pipes, CI, `--json`
//! consumers read stdout, the bar goes to stderr).

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `len` units with a message, hidden when stderr is not a terminal.
pub fn bar(len: u64, message: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template("{msg:28} [{bar:40}] {pos}/{len} {elapsed_precise} eta {eta}")
            .expect("static template")
            .progress_chars("=> "),
    );
    pb.set_message(message.to_string());
    pb
}

/// A bar's length as the product of counts (runs × iterations × …), saturating at `u64::MAX`
/// so that absurd counts on the command line give a full-width bar, not an overflow.
pub fn units(counts: &[usize]) -> u64 {
    counts.iter().fold(1u64, |n, &c| n.saturating_mul(c as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_multiply_and_saturate() {
        assert_eq!(units(&[]), 1);
        assert_eq!(units(&[2, 3, 7]), 42);
        assert_eq!(units(&[usize::MAX, usize::MAX, 0]), 0);
        assert_eq!(units(&[2, usize::MAX, 3]), u64::MAX);
    }

    /// Off a terminal (CI, pipes, a test's captured stderr) the bar is hidden and has no
    /// length; on one it counts to `len`.
    #[test]
    fn a_bar_draws_on_a_terminal_only() {
        let b = bar(10, "steps");
        let want = if std::io::stderr().is_terminal() { Some(10) } else { None };
        assert_eq!(b.length(), want);
    }
}
