#!/usr/bin/env bash
# Line coverage of every crate's code by the workspace's tests (`cargo test --workspace`, as
# scripts/test.sh runs it; not the #[ignore]d tests, the doctests or the C programs' calls, which
# cargo-llvm-cov does not count), an HTML report in out/coverage/, and a floor per crate: a
# crate whose share of lines run falls under its floor fails the script. The floors sit a point
# or so under the figures of 2026-12-08 (docs/soundness.md, "Line coverage"), so that code
# landing without tests is seen. About 20 minutes on the 2-core VM; not part of the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
need_rust
need_c_compiler
need_packages "${TEST_PACKAGES[@]}"
if ! rustup component list --installed 2>/dev/null | grep -q '^llvm-tools'; then
    rustup component add llvm-tools-preview
fi
if ! cargo llvm-cov --version >/dev/null 2>&1; then
    cargo install cargo-llvm-cov --version 0.9.1 --locked
fi

section "cargo llvm-cov: the workspace's tests, instrumented"
cargo llvm-cov clean --workspace
cargo llvm-cov --workspace --no-fail-fast --no-report
mkdir -p out/coverage
cargo llvm-cov report --html --output-dir out/coverage >/dev/null
cargo llvm-cov report --summary-only >out/coverage/summary.txt
echo "HTML report: out/coverage/html/index.html"

section "lines run, by crate, against the floors"
# Floors in tenths of a percent.
declare -A floor=([pbs]=990 [apps]=975 [distributed]=970 [peers]=970 [plot]=970 [visual]=955 [scheduler]=950 [ffi]=950 [bench]=945)
failed=0
while read -r crate lines missed; do
    tenths=$(((lines - missed) * 1000 / lines))
    want=${floor[$crate]:-0}
    verdict=ok
    if ((tenths < want)); then
        verdict="UNDER THE FLOOR"
        failed=1
    fi
    printf '%-12s %6d lines %4d.%d %%  floor %d.%d %%  %s\n' "$crate" "$lines" $((tenths / 10)) $((tenths % 10)) \
        $((want / 10)) $((want % 10)) "$verdict"
done < <(awk '$1 ~ /^[a-z]+\/src\// { split($1, p, "/"); lines[p[1]] += $8; missed[p[1]] += $9 }
    END { for (c in lines) print c, lines[c], missed[c] }' out/coverage/summary.txt | sort)
for crate in "${!floor[@]}"; do
    grep -q "^$crate/src/" out/coverage/summary.txt || { echo "no line of $crate was measured"; failed=1; }
done
exit $failed
