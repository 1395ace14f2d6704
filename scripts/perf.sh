#!/usr/bin/env bash
# The performance suite: what measures wall time, and so can fail on a loaded machine for
# reasons that are not bugs. Apart from scripts/test.sh; CI runs its first three parts after
# the tests and reports them separately (.ci/run). Exit status: 0 when every part run met its
# target.
#   scripts/perf.sh [PART...]   (default: every part, in this order)
#   - balancing: the balancing tests on real box times (scheduler/tests/balancing.rs, --ignored);
#   - shared_cores: more threads than cores, and busy processes beside (pbs ≤ 1.2× static);
#   - soak: 10^5 md iterations under every executor, same checksum, flat memory;
#   - soak3d: the same in 3D (10^4 iterations on 10x10x10 boxes, about 3 minutes here);
#   - openmp: heat.c against OpenMP's schedules, and beside an OpenMP loop
#     (scripts/openmp_compare.sh; heat.f90 against them too, for the record);
#   - tbb: pbs beside oneTBB's loops (ffi/tests/tbb_beside.cpp compare).
set -uo pipefail
cd "$(dirname "$0")/.."
all=(balancing shared_cores soak soak3d openmp tbb)
parts=("$@")
[ $# -gt 0 ] || parts=("${all[@]}")
for part in "${parts[@]}"; do
    [[ " ${all[*]} " == *" $part "* ]] || { echo "scripts/perf.sh: no part \"$part\" (parts: ${all[*]})" >&2; exit 2; }
done
runs() { [[ " ${parts[*]} " == *" $1 "* ]]; }

source scripts/common.sh
need_rust
need_c_compiler
need_packages "${BUILD_PACKAGES[@]}"

failed=()
if runs balancing || runs shared_cores || runs soak || runs soak3d; then
    # One build for the three, features resolved over the workspace (a `-p` per program would
    # build the shared dependencies once per package). The soak is pbs-apps's example, not
    # pbs-bench's, so that this build leaves out the peers, the plots and the CLI (192 against
    # 258 s on 2 cores).
    section "the release build"
    cargo build --release --workspace --example shared_cores --example soak
fi
if runs balancing; then
    section "wall-clock balancing tests"
    cargo test --release --workspace --test balancing -- --ignored --test-threads 1 || failed+=(balancing)
fi
if runs shared_cores; then
    section "shared cores (pbs within 1.2x static)"
    target/release/examples/shared_cores "${SHARED_ROUNDS:-7}" 20 || failed+=(shared_cores)
fi
if runs soak; then
    section "soak"
    target/release/examples/soak "${SOAK_ITERATIONS:-100000}" 2 || failed+=(soak)
fi
if runs soak3d; then
    section "soak in 3D"
    target/release/examples/soak "${SOAK3D_ITERATIONS:-10000}" 2 3 || failed+=(soak3d)
fi
if runs openmp; then
    section "heat.c against OpenMP"
    scripts/openmp_compare.sh "${OPENMP_ROUNDS:-15}" || failed+=(openmp_compare)
fi
if runs tbb; then
    section "beside oneTBB's loops (pbs.hpp; the mix under PBS_WAIT_POLICY=passive within 1.1x pure pbs)"
    need_packages "${CXX_PACKAGES[@]}"
    cargo build --release -q -p pbs-ffi
    g++ -std=c++17 -O2 -Iffi/include ffi/tests/tbb_beside.cpp -Ltarget/release -lpbs_ffi -ltbb \
        -Wl,-rpath,"$PWD/target/release" -o target/release/tbb-beside
    target/release/tbb-beside compare "${TBB_ROUNDS:-15}" || failed+=(tbb_beside)
fi
if [ ${#failed[@]} -gt 0 ]; then
    echo "performance suite: missed its target in: ${failed[*]}"
    exit 1
fi
echo "performance suite: every target met (${parts[*]})"
