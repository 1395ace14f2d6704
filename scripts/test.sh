#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit + property + integration + doc tests, and the
# simulator's window under Xvfb.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
need_rust
need_c_compiler
need_packages "${BUILD_PACKAGES[@]}" "${WINDOW_PACKAGES[@]}" "${XVFB_PACKAGES[@]}"
need_components

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
echo "== the scheduler builds without hwloc (sysfs fallback)"
cargo check -p pbs-scheduler --no-default-features
echo "== cargo test"
cargo test --workspace
