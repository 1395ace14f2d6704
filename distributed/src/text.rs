//! The tables `pbs-mpi` prints: one run's, and several balances' side by side.

use std::fmt::Write as _;

use crate::summary::Summary;

/// Rank 0's line on stderr during a long run (every [`PROGRESS_EVERY`] seconds from the first
/// such interval), as the other binaries' progress bars, which a rank under `mpirun` cannot draw:
/// `pbs-mpi: md with pbs: iteration 1200 of 5000 (24 %), 10 s, about 32 s left`.
pub fn progress_line(app: &str, balance: &str, done: usize, iters: usize, elapsed_s: f64) -> String {
    let share = done as f64 / iters.max(1) as f64;
    let left = if done == 0 { f64::INFINITY } else { elapsed_s * (iters - done.min(iters)) as f64 / done as f64 };
    let left = if left.is_finite() { format!("about {left:.0} s left") } else { "time left unknown".into() };
    format!(
        "pbs-mpi: {app} with {balance}: iteration {done} of {iters} ({:.0} %), {elapsed_s:.0} s, {left}",
        100.0 * share
    )
}

/// Seconds between two of rank 0's progress lines.
pub const PROGRESS_EVERY: f64 = 10.0;

/// One run's table: the settings, a row per rank, the global figures and the checksum.
pub fn run_table(s: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} {} on {} boxes, {} ranks × {} threads, balance {} across ranks ({}), {} inside, {} iterations{}",
        s.app,
        s.scenario,
        s.dims(),
        s.ranks,
        s.threads,
        s.balance,
        s.criterion,
        s.executor,
        s.iters,
        if s.oversubscribed { " (OVERSUBSCRIBED: more threads than cores; times are the OS's sharing)" } else { "" }
    );
    if !s.pinned_ranks.is_empty() {
        let _ = writeln!(out, "threads pinned to cores of their rank's CPUs in ranks {:?}", s.pinned_ranks);
    }
    if !s.ranks_short_of_cpus.is_empty() {
        let _ = writeln!(
            out,
            "note: ranks {:?} were bound to fewer CPUs than their {} threads, which share them: run mpirun with \
             --bind-to none, or --map-by slot:PE={} to give each rank that many cores",
            s.ranks_short_of_cpus, s.threads, s.threads
        );
    }
    let _ = writeln!(
        out,
        "{:>4}  {:<16} {:>6} {:>7} {:>11} {:>11} {:>9} {:>14} {:>14}",
        "rank", "host", "boxes", "window", "compute ms", "thr max/avg", "thr rebal", "migrated B", "halo B"
    );
    for r in &s.per_rank {
        let _ = writeln!(
            out,
            "{:>4}  {:<16} {:>6} {:>7} {:>11.3} {:>11.3} {:>9} {:>14} {:>14}",
            r.rank,
            r.host,
            r.boxes,
            r.window_boxes,
            r.compute_ms_median,
            r.imbalance_threads,
            r.thread_rebalancings,
            r.migrated_bytes_sent,
            r.halo_bytes_sent
        );
    }
    let imbalance = match s.imbalance_ranks_after_first {
        Some(first) => format!("{:.3} after the last rebalancing, {first:.3} after the first", s.imbalance_ranks),
        None if s.rebalancings > 0 => format!("{:.3} at the end", s.imbalance_ranks),
        None => format!("{:.3}, never rebalanced", s.imbalance_ranks),
    };
    let _ = writeln!(
        out,
        "iteration {:.3} ms (exchange {:.3} ms) · ranks max/avg {imbalance} · {} rebalancings · {} boxes, {} bytes migrated ({:.0} per rebalancing) · halo {:.0} bytes per iteration",
        s.iter_ms_median,
        s.exchange_ms_median,
        s.rebalancings,
        s.migrated_boxes,
        s.migrated_bytes,
        s.migrated_bytes_per_rebalancing,
        s.halo_bytes_per_iter
    );
    if let Some(ratio) = s.rcb_shadow_over_migrated {
        let _ = writeln!(
            out,
            "bytes per rebalancing: {} {:?}; a from-scratch RCB at the same moments {:?} ({ratio:.2} × {}'s in all)",
            s.balance, s.rebalancing_bytes, s.rcb_shadow_bytes, s.balance
        );
    }
    if let Some(share) = s.bound_over_migrated {
        let _ = writeln!(
            out,
            "the least any balancer reaching max/avg 1.05 had to move at each: {:?} bytes ({share:.2} of those moved)",
            s.migration_bound_bytes
        );
    }
    let _ = writeln!(out, "checksum {}", s.checksum);
    out
}

/// Runs of several balances side by side (`compare`): a row per balance, each figure's
/// median over its runs with its range, and whether every run's checksum is the first's.
pub fn comparison_table(runs: &[Summary], balances: &[String]) -> String {
    let mut out = String::new();
    let first = &runs[0];
    let _ = writeln!(
        out,
        "{} {} on {} boxes, {} ranks × {} threads, {} inside, {} iterations, {} rounds{}",
        first.app,
        first.scenario,
        first.dims(),
        first.ranks,
        first.threads,
        first.executor,
        first.iters,
        runs.len() / balances.len(),
        if first.oversubscribed { " (OVERSUBSCRIBED: times are the OS's sharing, not speeds)" } else { "" }
    );
    let _ = writeln!(
        out,
        "{:<10} {:>24} {:>14} {:>26} {:>18} {:>18} {:>22} {:>24} {:>9}",
        "balance",
        "ranks max/avg (last)",
        "rebalancings",
        "bytes per rebalancing",
        "RCB bytes / these",
        "least / these",
        "halo bytes per iter",
        "iteration ms",
        "checksum"
    );
    let cell = |xs: Vec<f64>, digits: usize| {
        let (lo, hi) = xs.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &x| (l.min(x), h.max(x)));
        format!("{:.*} [{:.*}–{:.*}]", digits, pbs::metrics::median(&xs), digits, lo, digits, hi)
    };
    for b in balances {
        let mine: Vec<&Summary> = runs.iter().filter(|s| &s.balance == b).collect();
        let ratios = |f: fn(&Summary) -> Option<f64>| {
            let xs: Vec<f64> = mine.iter().filter_map(|s| f(s)).collect();
            if xs.is_empty() {
                "-".into()
            } else {
                cell(xs, 2)
            }
        };
        let _ = writeln!(
            out,
            "{:<10} {:>24} {:>14} {:>26} {:>18} {:>18} {:>22} {:>24} {:>9}",
            b,
            cell(mine.iter().map(|s| s.imbalance_ranks).collect(), 3),
            cell(mine.iter().map(|s| s.rebalancings as f64).collect(), 0),
            cell(mine.iter().map(|s| s.migrated_bytes_per_rebalancing).collect(), 0),
            ratios(|s| s.rcb_shadow_over_migrated),
            ratios(|s| s.bound_over_migrated),
            cell(mine.iter().map(|s| s.halo_bytes_per_iter).collect(), 0),
            cell(mine.iter().map(|s| s.iter_ms_median).collect(), 3),
            if mine.iter().all(|s| s.checksum == first.checksum) { "same" } else { "DIFFERS" }
        );
    }
    let _ = writeln!(out, "checksum {} (every run's state gathered on rank 0)", first.checksum);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::RankFigures;

    #[test]
    fn a_progress_line_says_where_the_run_is_and_what_is_left() {
        assert_eq!(
            progress_line("md", "pbs", 1200, 5000, 10.2),
            "pbs-mpi: md with pbs: iteration 1200 of 5000 (24 %), 10 s, about 32 s left"
        );
        assert_eq!(
            progress_line("stencil", "rcb", 0, 7, 12.0),
            "pbs-mpi: stencil with rcb: iteration 0 of 7 (0 %), 12 s, time left unknown"
        );
        assert!(progress_line("md", "static", 7, 7, 30.0).ends_with("(100 %), 30 s, about 0 s left"));
    }

    fn summary() -> Summary {
        let rank = |rank: usize, host: &str| RankFigures {
            rank,
            host: host.into(),
            boxes: 16 + rank,
            window_boxes: 24,
            compute_ms_median: 0.25,
            imbalance_threads: 1.125,
            thread_rebalancings: 3,
            migrated_bytes_sent: 4096,
            halo_bytes_sent: 512,
        };
        Summary {
            app: "md".into(),
            scenario: "gravity".into(),
            nx: 8,
            ny: 4,
            nz: 1,
            iters: 10,
            ranks: 2,
            threads: 2,
            balance: "pbs".into(),
            criterion: "boulmier".into(),
            executor: "static".into(),
            oversubscribed: true,
            ranks_short_of_cpus: vec![0],
            pinned_ranks: vec![1],
            checksum: "00000000000000ab".into(),
            imbalance_ranks: 1.02,
            imbalance_ranks_after_first: Some(1.04),
            rebalancings: 2,
            migrated_boxes: 5,
            migrated_bytes: 8192,
            migrated_bytes_per_rebalancing: 4096.0,
            rebalancing_bytes: vec![5000, 3192],
            rcb_shadow_bytes: vec![6000, 6288],
            rcb_shadow_over_migrated: Some(1.5),
            migration_bound_bytes: vec![1000, 1048],
            bound_over_migrated: Some(0.25),
            iter_ms_median: 1.5,
            exchange_ms_median: 0.125,
            halo_bytes_per_iter: 1024.0,
            per_rank: vec![rank(0, "alpha"), rank(1, "beta")],
            ..Summary::default()
        }
    }

    /// Every line of a run's table, from figures chosen so that each field shows.
    #[test]
    fn a_runs_table_says_each_figure() {
        let text = run_table(&summary());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "md gravity on 8×4 boxes, 2 ranks × 2 threads, balance pbs across ranks (boulmier), static inside, 10 \
             iterations (OVERSUBSCRIBED: more threads than cores; times are the OS's sharing)"
        );
        assert_eq!(lines[1], "threads pinned to cores of their rank's CPUs in ranks [1]");
        assert!(lines[2].starts_with("note: ranks [0] were bound to fewer CPUs than their 2 threads"), "{}", lines[2]);
        assert!(lines[2].ends_with("--map-by slot:PE=2 to give each rank that many cores"), "{}", lines[2]);
        assert!(lines[3].starts_with("rank  host") && lines[3].ends_with("halo B"), "{}", lines[3]);
        for (line, (rank, host, boxes)) in lines[4..6].iter().zip([(0, "alpha", 16), (1, "beta", 17)]) {
            let cells: Vec<&str> = line.split_whitespace().collect();
            let want = [&rank.to_string(), host, &boxes.to_string(), "24", "0.250", "1.125", "3", "4096", "512"];
            assert_eq!(cells, want, "{line}");
        }
        assert_eq!(
            lines[6],
            "iteration 1.500 ms (exchange 0.125 ms) · ranks max/avg 1.020 after the last rebalancing, 1.040 after the \
             first · 2 rebalancings · 5 boxes, 8192 bytes migrated (4096 per rebalancing) · halo 1024 bytes per iteration"
        );
        assert_eq!(
            lines[7],
            "bytes per rebalancing: pbs [5000, 3192]; a from-scratch RCB at the same moments [6000, 6288] (1.50 × pbs's \
             in all)"
        );
        assert_eq!(
            lines[8],
            "the least any balancer reaching max/avg 1.05 had to move at each: [1000, 1048] bytes (0.25 of those moved)"
        );
        assert_eq!(lines[9], "checksum 00000000000000ab");
        assert_eq!(lines.len(), 10);
    }

    /// The lines that depend on the run: no rebalancing, a rebalancing with no iteration after
    /// it, nobody pinned or short of CPUs, no shadow or bound, not oversubscribed.
    #[test]
    fn a_runs_table_leaves_out_what_did_not_happen() {
        let quiet = Summary {
            oversubscribed: false,
            pinned_ranks: vec![],
            ranks_short_of_cpus: vec![],
            imbalance_ranks_after_first: None,
            rcb_shadow_over_migrated: None,
            bound_over_migrated: None,
            ..summary()
        };
        let text = run_table(&quiet);
        assert!(text.lines().next().unwrap().ends_with("10 iterations"), "{text}");
        for gone in ["OVERSUBSCRIBED", "pinned", "note:", "from-scratch RCB", "the least any balancer"] {
            assert!(!text.contains(gone), "{gone}: {text}");
        }
        assert!(text.contains("ranks max/avg 1.020 at the end · 2 rebalancings"), "{text}");
        let never = run_table(&Summary { rebalancings: 0, ..quiet });
        assert!(never.contains("ranks max/avg 1.020, never rebalanced · 0 rebalancings"), "{never}");
    }

    /// A row per balance with each figure's median and range over its runs, ratios only where
    /// the balance has them, and the checksum column telling a run that ended elsewhere.
    #[test]
    fn a_comparison_has_a_row_per_balance_of_medians_and_ranges() {
        let run = |balance: &str, imbalance: f64, iter_ms: f64, checksum: &str| Summary {
            balance: balance.into(),
            imbalance_ranks: imbalance,
            iter_ms_median: iter_ms,
            checksum: checksum.into(),
            rcb_shadow_over_migrated: (balance == "pbs").then_some(imbalance),
            ..summary()
        };
        let balances = ["static".to_string(), "pbs".to_string()];
        let runs = [
            run("static", 1.4, 2.0, "c"),
            run("pbs", 1.0, 1.0, "c"),
            run("static", 1.6, 4.0, "c"),
            run("pbs", 1.1, 3.0, "c"),
            run("static", 1.5, 3.0, "c"),
            run("pbs", 1.2, 2.0, "d"),
        ];
        let text = comparison_table(&runs, &balances);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].ends_with(
                "static inside, 10 iterations, 3 rounds (OVERSUBSCRIBED: times are the OS's sharing, not speeds)"
            ),
            "{}",
            lines[0]
        );
        assert!(lines[1].starts_with("balance") && lines[1].ends_with("checksum"), "{}", lines[1]);
        let cells = |line: &str| line.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        let want = |b: &str, imb: &str, shadow: &str, ms: &str, same: &str| -> Vec<String> {
            let bound = "0.25 [0.25–0.25]";
            let fields = [b, imb, "2 [2–2]", "4096 [4096–4096]", shadow, bound, "1024 [1024–1024]", ms, same];
            fields.iter().flat_map(|f| f.split(' ')).map(str::to_string).collect()
        };
        assert_eq!(cells(lines[2]), want("static", "1.500 [1.400–1.600]", "-", "3.000 [2.000–4.000]", "same"));
        assert_eq!(
            cells(lines[3]),
            want("pbs", "1.100 [1.000–1.200]", "1.10 [1.00–1.20]", "2.000 [1.000–3.000]", "DIFFERS")
        );
        assert_eq!(lines[4], "checksum c (every run's state gathered on rank 0)");
        assert_eq!(lines.len(), 5);
    }
}
