#!/usr/bin/env bash
# Miri and ThreadSanitizer on the scheduler's and the C interface's tests (nightly toolchain,
# installed through rustup when missing), then a long fuzzing run. Longer than the test suite,
# so not part of it: see docs/soundness.md for how long each part takes on the 2-core VM.
#
# Miri interprets the pure-Rust tests: the pool, the claims, the executors, the C statuses.
# It cannot run what calls C (hwloc, perf_event_open, thread pinning, the C programs), so
# the scheduler is built without hwloc (sysfs fallback) and those tests are filtered out.
# ThreadSanitizer runs every test of both crates, the C interface's included.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
need_rust
need_c_compiler
need_packages "${BUILD_PACKAGES[@]}"
rustup toolchain install nightly --profile minimal --component miri --component rust-src
start=$(date +%s)

echo "== Miri: pool, executors, claims, bookkeeping (pbs-scheduler without hwloc)"
MIRIFLAGS="-Zmiri-disable-isolation" cargo +nightly miri test -p pbs-scheduler --no-default-features --lib -- \
    pool:: background:: executor::tests box_timing::tests executors::pbs::stealing executors::pbs::rebalancing \
    executors::pbs::overlap
echo "== Miri: the C interface's statuses and messages"
MIRIFLAGS="-Zmiri-disable-isolation" cargo +nightly miri test -p pbs-ffi --lib -- status::

echo "== ThreadSanitizer: pbs-scheduler's tests, and pbs-ffi's from Rust"
target=$(rustc -vV | sed -n 's/^host: //p')
# allocator_may_return_null: the tests ask for grids too large for memory and expect an error.
# The C programs of ffi/tests/c_programs.rs are left out: Debian's gcc ThreadSanitizer runtime
# does not match the one rustc instruments for; every C entry point runs from Rust here.
export TSAN_OPTIONS="allocator_may_return_null=1 suppressions=$PWD/scripts/tsan.supp" RUST_BACKTRACE=0
tsan() {
    RUSTFLAGS="-Zsanitizer=thread" RUSTDOCFLAGS="-Zsanitizer=thread" CARGO_TARGET_DIR=target/tsan \
        cargo +nightly test -Zbuild-std --target "$target" --no-fail-fast "$@"
}
tsan -p pbs-scheduler --lib --tests
tsan -p pbs-ffi --lib --test fuzz_arguments

echo "== fuzzing: the CSV reader and the C interface's arguments (proptest, release)"
PROPTEST_CASES="${FUZZ_CASES:-20000}" cargo test --release -p pbs --test fuzz_csv
PROPTEST_CASES="${FUZZ_CASES:-20000}" cargo test --release -p pbs-ffi --test fuzz_arguments

echo "sanitizers clean in $(( ($(date +%s) - start) / 60 )) min"
