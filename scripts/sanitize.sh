#!/usr/bin/env bash
# Miri and ThreadSanitizer on the scheduler's and the C interface's tests (nightly toolchain,
# installed through rustup when missing), ThreadSanitizer, AddressSanitizer and UBSan on the
# StarPU policy and its programs (gcc) and on the Fortran module's programs (gfortran), the
# oldest Rust each manifest names, valgrind's memcheck on the C examples through the library
# (which sees the Rust side's reads and writes of C's arrays too), then a long fuzzing run.
# Longer than the test suite, so not part of it: see docs/soundness.md for how long each part
# takes on the 2-core VM.
#
# Miri interprets the pure-Rust tests: the pool, the claims, the executors, the C statuses.
# It cannot run what calls C (hwloc, perf_event_open, thread pinning, the C programs), so
# the scheduler is built without hwloc (sysfs fallback) and those tests are filtered out.
# ThreadSanitizer runs every test of both crates, the C interface's included, and pbs-mpi's
# unit tests (its timing wrapper and window).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
need_rust
need_c_compiler
need_packages "${BUILD_PACKAGES[@]}"
rustup toolchain install nightly --profile minimal --component miri --component rust-src
start=$(date +%s)

section "Miri: pool, executors, claims, bookkeeping (pbs-scheduler without hwloc)"
MIRIFLAGS="-Zmiri-disable-isolation" cargo +nightly miri test -p pbs-scheduler --no-default-features --lib -- \
    pool:: background:: executor::tests box_timing::tests executors::pbs::stealing executors::pbs::rebalancing \
    executors::pbs::overlap executors::pbs::lending executors::pbs::affinity
section "Miri: the C interface's statuses and messages, its tilings, settings and motion arrays (raw arrays from C)"
MIRIFLAGS="-Zmiri-disable-isolation" cargo +nightly miri test -p pbs-ffi --lib -- status:: tiling:: \
    executor::tests::the_settings_array executor::tests::the_motion_arrays

section "ThreadSanitizer: pbs-scheduler's tests, and pbs-ffi's from Rust"
target=$(rustc -vV | sed -n 's/^host: //p')
# allocator_may_return_null: the tests ask for grids too large for memory and expect an error.
# die_after_fork=0: tests/fork.rs starts executors in a child forked from a process with threads,
# which ThreadSanitizer refuses by default (it supports it, with less precision in the child).
# The C programs of ffi/tests/c_programs.rs are left out: Debian's gcc ThreadSanitizer runtime
# does not match the one rustc instruments for; every C entry point runs from Rust here.
export TSAN_OPTIONS="allocator_may_return_null=1 die_after_fork=0 suppressions=$PWD/scripts/tsan.supp" RUST_BACKTRACE=0
tsan() {
    RUSTFLAGS="-Zsanitizer=thread" RUSTDOCFLAGS="-Zsanitizer=thread" CARGO_TARGET_DIR=target/tsan \
        cargo +nightly test -Zbuild-std --target "$target" --no-fail-fast "$@"
}
tsan -p pbs-scheduler --lib --tests
tsan -p pbs-ffi --lib --test fuzz_arguments
# pbs-mpi's own unsafe code: the timing wrapper's and the window's Executor implementations over
# the pool, and the CPU-clock call (its MPI runs are separate processes, which the test suite runs).
need_packages "${MPI_PACKAGES[@]}"
tsan -p pbs-mpi --lib

need_packages "${STARPU_PACKAGES[@]}"
cargo build --release -q -p pbs-ffi
lib=$PWD/target/release
# starpu_programs DIR FLAG...: the StarPU policy and its programs (heat, heat3d, md and md3d as StarPU tasks,
# its error cases, a thief woken by a push) built into DIR with the sanitizer's FLAGs.
starpu_programs() {
    local dir=$1 program sources
    shift
    local flags=(-std=c11 -O1 -g "$@" -fno-omit-frame-pointer -Wall -Wextra -Werror -fPIC -Iffi/include
        -Istarpu/include $(pkg-config --cflags starpu-1.3))
    local starpu_libs
    starpu_libs=$(pkg-config --libs starpu-1.3)
    mkdir -p "$dir/home"
    "${CC:-cc}" "${flags[@]}" -shared starpu/src/policy.c -o "$dir/libpbs_starpu.so" -L"$lib" -lpbs_ffi $starpu_libs \
        -lpthread -lm -Wl,-rpath,"$lib"
    for program in examples/heat examples/heat3d examples/md tests/errors tests/steal; do
        sources=("starpu/$program.c")
        [[ "$program" = tests/* ]] || sources+=(starpu/examples/driver.c)
        "${CC:-cc}" "${flags[@]}" "${sources[@]}" -o "$dir/$(basename $program)" "$dir/libpbs_starpu.so" -L"$lib" \
            -lpbs_ffi $starpu_libs -lm -Wl,-rpath,"$PWD/$dir" -Wl,-rpath,"$lib"
    done
    "${CC:-cc}" "${flags[@]}" -DMD_DIMS=3 starpu/examples/md.c starpu/examples/driver.c -o "$dir/md3d" \
        "$dir/libpbs_starpu.so" -L"$lib" -lpbs_ffi $starpu_libs -lm -Wl,-rpath,"$PWD/$dir" -Wl,-rpath,"$lib"
    "${CC:-cc}" "${flags[@]}" starpu/tests/internals.c -o "$dir/internals" -L"$lib" -lpbs_ffi $starpu_libs -lpthread \
        -lm -Wl,-rpath,"$lib"
}
# starpu_runs DIR: every policy and setting of the programs in DIR, each through `checked`, which
# the sanitizer's section defines (any report ends the program with an error status).
starpu_runs() {
    local dir=$1 policy barrier
    export STARPU_SILENT=1 STARPU_HOME="$PWD/$dir/home" STARPU_NCPU=2
    for policy in pbs eager ws; do
        for barrier in 0 1; do
            checked "$dir/heat" --sched "$policy" --iters 30 --nx 8 --ny 8 --side 8 --hot 3000 --barrier "$barrier"
            checked "$dir/md" --sched "$policy" --iters 30 --nx 5 --ny 4 --tile 1 --scenario contraction --barrier "$barrier"
            checked "$dir/md" --sched "$policy" --iters 30 --nx 3 --ny 3 --tile 3 --barrier "$barrier"
            checked "$dir/md3d" --sched "$policy" --iters 12 --nx 4 --ny 3 --nz 3 --tile 1 --scenario contraction \
                --barrier "$barrier"
            checked "$dir/md3d" --sched "$policy" --iters 12 --nx 3 --ny 3 --nz 3 --tile 3 --barrier "$barrier"
            checked "$dir/heat3d" --sched "$policy" --iters 12 --nx 4 --ny 3 --nz 3 --side 5 --barrier "$barrier"
        done
    done
    PBS_STEAL=always STARPU_NCPU=4 checked "$dir/heat" --workers 4 --iters 50 --nx 9 --ny 7 --side 5
    # No grid declared: the policy numbers the boxes itself, a double buffer's halves one box.
    checked "$dir/heat" --iters 30 --nx 8 --ny 8 --side 8 --hot 3000 --declare 0
    # ... submitted slower than the workers run it: the first iteration may end on the
    # submitting thread, when it completes the grid (grid_completed).
    for barrier in 0 1; do
        checked "$dir/heat" --iters 10 --nx 8 --ny 8 --side 8 --hot 3000 --declare 0 --submit-us 200 --barrier "$barrier"
    done
    # Each worker's queue in push order instead of by box load (the heap's other path).
    PBS_STARPU_ORDER=fifo checked "$dir/heat" --iters 30 --nx 8 --ny 8 --side 8 --hot 3000
    PBS_STEAL=never checked "$dir/errors" 2> /dev/null
    checked "$dir/internals"
    # A thief waiting for a push and woken by one (starpu/tests/steal.c), with stealing at once
    # and after a wait.
    checked "$dir/steal"
    PBS_STEAL=auto checked "$dir/steal"
}

section "ThreadSanitizer: the StarPU policy's locks and queues under StarPU's workers (gcc's runtime)"
# StarPU and the Rust library are not instrumented: what is checked is the policy's own memory
# (per-worker queues, box loads, the mapper's owners) against StarPU's worker threads, whose
# pthread locks and condition variables TSan intercepts.
starpu_programs target/tsan-starpu -fsanitize=thread
checked() { TSAN_OPTIONS="halt_on_error=1 exitcode=66" "$@" > /dev/null; }
starpu_runs target/tsan-starpu

section "AddressSanitizer and UBSan: the StarPU policy, heat, heat3d, md and md3d as StarPU tasks, its error cases"
asan=target/asan-starpu
starpu_programs "$asan" -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=undefined,float-cast-overflow
checked() { ASAN_OPTIONS=detect_leaks=0 "$@" > /dev/null; }
starpu_runs "$asan"
# StarPU leaks about 1 KB at start-up under every policy (from a module it loads and unloads):
# the leaks under pbs must be eager's.
leaked() {
    # (a leak makes the status 23: only the summary is read)
    { ASAN_OPTIONS=detect_leaks=1 "$@" 2>&1 > /dev/null || true; } |
        sed -n 's/^SUMMARY: AddressSanitizer: \([0-9]*\) byte.*/\1/p'
}
for run in heat md "md3d --nz 3 --tile 2"; do
    read -r -a args <<< "$run"
    app=${args[0]}
    eager=$(leaked "$asan/$app" --sched eager --iters 20 --nx 4 --ny 4 "${args[@]:1}")
    pbs=$(leaked "$asan/$app" --sched pbs --iters 20 --nx 4 --ny 4 "${args[@]:1}")
    if [ "${pbs:-0}" != "${eager:-0}" ]; then
        echo "error: $run leaks ${pbs:-0} bytes under pbs, ${eager:-0} under eager" >&2
        exit 1
    fi
done

section "AddressSanitizer and UBSan: the Fortran module's checks and heat.f90 (gfortran's runtime)"
# The Fortran side is instrumented (the module's string and array handling, the tasks' writes),
# the Rust library is not; the programs' own leak check runs.
need_packages gfortran
fortran=target/asan-fortran
mkdir -p "$fortran"
for program in tests/fortran_api examples/heat; do
    gfortran -std=f2018 -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -J"$fortran" ffi/include/pbs.f90 \
        "ffi/$program.f90" -L"$lib" -lpbs_ffi -Wl,-rpath,"$lib" -o "$fortran/$(basename $program)"
done
ASAN_OPTIONS=detect_leaks=1 "$fortran/fortran_api" | tail -1 | grep -q '^all checks passed'
for scheduler in pbs ws eager static rcb serial; do ASAN_OPTIONS=detect_leaks=1 "$fortran/heat" "$scheduler" 2 40 > /dev/null; done

section "the oldest Rust each manifest names (rust-version), libraries and binaries; every target with 1.88"
# Each crate's rust-version, from its manifest or the workspace's; the crates that name one
# version are checked together with that toolchain (minimal profile, installed when missing).
workspace_rust=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
declare -A crates_for
for dir in $(sed -n 's/^members = \[\(.*\)\]/\1/p' Cargo.toml | tr -d '",'); do
    name=$(sed -n 's/^name = "\(.*\)"/\1/p' "$dir/Cargo.toml" | head -1)
    version=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' "$dir/Cargo.toml")
    crates_for[${version:-$workspace_rust}]+=" -p $name"
done
tests_rust=1.88 # the tests' proptest 1.12 (the workspace's Cargo.toml)
for version in $(printf '%s\n' "${!crates_for[@]}" $tests_rust | sort -uV); do
    rustup toolchain install "$version" --profile minimal
    if [ -n "${crates_for[$version]:-}" ]; then
        echo "Rust $version:${crates_for[$version]}"
        # shellcheck disable=SC2086 # one -p per crate
        CARGO_TARGET_DIR="$CARGO_TARGET_DIR/msrv" cargo "+$version" check ${crates_for[$version]}
    fi
done
CARGO_TARGET_DIR="$CARGO_TARGET_DIR/msrv" cargo "+$tests_rust" check --workspace --exclude pbs-visual --all-targets

section "valgrind (memcheck): the C examples and the C++ header's checks through libpbs, every scheduler, failures"
need_packages valgrind g++
cargo build --release -p pbs-ffi
vg=$(mktemp -d)
for program in examples/heat examples/heat3d examples/tiles examples/balance tests/readme; do
    cc -std=c11 -O1 -g -Iffi/include "ffi/$program.c" -Ltarget/release -lpbs_ffi -lm \
        -Wl,-rpath,"$PWD/target/release" -o "$vg/$(basename $program)"
done
c++ -std=c++17 -O1 -g -Iffi/include ffi/tests/cpp_api.cpp -Ltarget/release -lpbs_ffi -lm \
    -Wl,-rpath,"$PWD/target/release" -o "$vg/cpp_api"
# memcheck STATUS PROGRAM ARGS...: PROGRAM must exit with STATUS, and valgrind find no invalid
# read or write, no use of an uninitialised value and no block lost at exit (definitely or
# indirectly; what stays reachable, the library's process-wide state, is not an error).
memcheck() {
    local want=$1 status=0
    shift
    valgrind -q --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect \
        --errors-for-leak-kinds=definite,indirect "$@" > "$vg/out" 2> "$vg/err" || status=$?
    if [ "$status" != "$want" ]; then
        echo "valgrind: $* exited with $status, not $want (99: memcheck's errors):"
        cat "$vg/err"
        exit 1
    fi
}
for scheduler in pbs ws eager static rcb norcb packsteal vector-rcb vector-greedy norm-greedy diffusion; do
    for threads in 1 3; do memcheck 0 "$vg/heat" "$scheduler" "$threads" 12 6 5 8; done
    case $scheduler in norcb | vector-rcb) ;; *) memcheck 0 "$vg/heat3d" "$scheduler" 2 4 24 20 16 8 8 8 ;; esac
    memcheck 0 "$vg/tiles" "$scheduler" 2 6 100 60 32 7 1
done
for pin in pin=1 pin=2 load=uniform; do memcheck 0 "$vg/heat" pbs 2 12 6 5 8 100 "$pin"; done
# The balancer's own thread, a lent core, sleeping workers: each started and stopped from C.
PBS_CRITERION=always PBS_OVERLAP=thread memcheck 0 "$vg/heat" pbs 2 30 16 16 4 1000
PBS_LEND=always memcheck 0 "$vg/heat" pbs 2 30 16 16 4 1000
PBS_WAIT_POLICY=passive memcheck 0 "$vg/heat" pbs 2 30 16 16 4 1000
PBS_STEAL=auto memcheck 0 "$vg/heat" pbs 2 30 16 16 4 1000
memcheck 1 "$vg/heat" pbs 2 4 4 4 8 nan # a failing task: its status, the executor freed after
PBS_TOL=-1 memcheck 2 "$vg/heat" pbs 2 4 4 4 8 # a bad setting: NULL and the reason
memcheck 0 "$vg/balance"
memcheck 0 "$vg/readme"
memcheck 0 "$vg/cpp_api" # pbs.hpp: exceptions kept across the workers and rethrown, moves, RAII
rm -rf "$vg"

section "fuzzing: the CSV reader and the C interface's arguments (proptest, release)"
PROPTEST_CASES="${FUZZ_CASES:-20000}" cargo test --release -p pbs --test fuzz_csv
PROPTEST_CASES="${FUZZ_CASES:-20000}" cargo test --release -p pbs-ffi --test fuzz_arguments

echo "sanitizers clean in $(( ($(date +%s) - start) / 60 )) min"
