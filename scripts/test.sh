#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit + property + integration + doc tests.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
need_rust
need_components

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo test"
cargo test --workspace
