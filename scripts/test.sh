#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit + property + integration + doc tests, the
# simulator's window under Xvfb, the tests that need counters or memory binding where this
# machine has them, and the loom models of the pool, the balancer thread and the claim word.
# Wall-clock tests are scripts/perf.sh's; Miri and ThreadSanitizer are scripts/sanitize.sh's.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
need_rust
need_c_compiler
need_packages "${TEST_PACKAGES[@]}"
need_components

section "cargo fmt --check"
cargo fmt --all -- --check
section "cargo clippy -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
section "cargo doc -D warnings (broken or private links in the API docs)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
section "the scheduler builds without hwloc (sysfs fallback)"
cargo check -p pbs-scheduler --no-default-features
section "cargo test"
cargo test --workspace

# Tests that need what a machine may lack are #[ignore]d with their reason, so that plain
# `cargo test` reports them skipped; here they run wherever this machine has what they need.
# Each selects its test with `--workspace` and a target or name filter, not `-p`: a `-p` run
# resolves features for that package alone and rebuilds the shared dependencies (2.5 minutes
# for the window test on 2 cores).
section "the window under Xvfb"
cargo test --workspace --test window -- --ignored
section "memory binding to the owner's NUMA node"
cargo test --workspace --lib first_touch -- --ignored
section "perf counters"
if [ "$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo 4)" -le 2 ]; then
    cargo test --workspace --lib counters -- --ignored --skip hardware_counters
else
    echo "skipped: perf_event_paranoid > 2, no perf_event_open for this user"
fi
if [ -e /sys/bus/event_source/devices/cpu/type ]; then
    cargo test --workspace --lib counters::tests::hardware_counters -- --ignored
else
    echo "skipped: no hardware PMU exposed (/sys/bus/event_source/devices/cpu is absent)"
fi

section "the C++ header under g++ and clang++, and beside oneTBB; the Fortran module under gfortran and Flang"
cargo test --workspace --test c_programs the_cpp_header -- --ignored
cargo test --workspace --test c_programs tbb_loops_beside_pbs_phases -- --ignored
cargo test --workspace --test c_programs -- --ignored fortran heat_f90

section "the C library installed in a temporary prefix: pkg-config, CMake, static link"
prefix=$(mktemp -d)
scripts/install.sh "$prefix" >/dev/null 2>&1 || scripts/install.sh "$prefix"
readelf -d "$prefix/lib/libpbs.so" | grep >/dev/null 'SONAME.*libpbs\.so\.0\.' || { echo "no SONAME"; exit 1; }
# A relative prefix is the caller's, made absolute in pbs.pc.
(cd "$prefix" && "$OLDPWD/scripts/install.sh" relative >/dev/null 2>&1)
grep -qx "prefix=$prefix/relative" "$prefix/relative/lib/pkgconfig/pbs.pc" || { echo "a relative prefix went astray"; exit 1; }
# DESTDIR stages the files; pbs.pc names the final prefix.
DESTDIR="$prefix/stage" scripts/install.sh /opt/pbs-staged >/dev/null 2>&1
[ -x "$prefix/stage/opt/pbs-staged/lib/libpbs.so.$(sed -n 's/^version = "\(.*\)"/\1/p' ffi/Cargo.toml | head -1)" ] &&
    grep -qx "prefix=/opt/pbs-staged" "$prefix/stage/opt/pbs-staged/lib/pkgconfig/pbs.pc" || { echo "DESTDIR was not staged"; exit 1; }
# The notices: every crate whose code the static library holds (the first component of its
# symbols' paths) is one of pbs's, one of the standard library's (the sysroot's rlibs) or listed
# in THIRD-PARTY.md.
doc="$prefix/share/doc/pbs"
for f in LICENSE-MIT LICENSE-APACHE THIRD-PARTY.md; do [ -s "$doc/$f" ] || { echo "$doc/$f missing"; exit 1; }; done
std_crates=" $(find "$(rustc --print target-libdir)" -name 'lib*.rlib' -printf '%f\n' | sed -E 's/^lib(.*)-[0-9a-f]+\.rlib$/\1/' | tr '\n' ' ')"
held=$(nm "$prefix/lib/libpbs.a" 2>/dev/null | grep -o '_ZN[0-9]*[a-z][a-z0-9_]*' |
    sed -E 's/^_ZN([0-9]+)(.*)/\1 \2/' | awk 'length($2) >= $1 {print substr($2, 1, $1)}' | sort -u)
[[ " $(tr '\n' ' ' <<<"$held")" == *" pbs_ffi "* ]] || { echo "no symbol of pbs_ffi read from libpbs.a"; exit 1; }
for crate in $held; do
    case "$crate" in pbs | pbs_*) continue ;; esac
    [[ "$std_crates" == *" $crate "* ]] && continue
    grep -q "^| ${crate//_/[-_]} |" "$doc/THIRD-PARTY.md" || { echo "libpbs.a holds crate $crate, which THIRD-PARTY.md does not list"; exit 1; }
done
cc -std=c11 -O2 ffi/examples/balance.c $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs pbs) -lm \
    -Wl,-rpath,"$prefix/lib" -o "$prefix/balance-pkg-config"
c++ -std=c++17 -O2 -Wall -Wextra -Werror -pedantic ffi/tests/cpp_api.cpp \
    $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs pbs) -Wl,-rpath,"$prefix/lib" -o "$prefix/cpp-pkg-config"
"$prefix/cpp-pkg-config" | tail -1 | grep >/dev/null '^all checks passed' || { echo "pbs.hpp against the installed copy failed"; exit 1; }
gfortran -O2 -J"$prefix" "$prefix/include/pbs.f90" ffi/tests/fortran_api.f90 \
    $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --libs pbs) -Wl,-rpath,"$prefix/lib" -o "$prefix/fortran-pkg-config"
"$prefix/fortran-pkg-config" | tail -1 | grep >/dev/null '^all checks passed' || { echo "pbs.f90 against the installed copy failed"; exit 1; }
cmake -S ffi/examples/cmake -B "$prefix/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_RPATH="$prefix/lib" >/dev/null
cmake --build "$prefix/build" >/dev/null
for program in "$prefix/balance-pkg-config" "$prefix/build/balance" "$prefix/build/balance_static"; do
    "$program" | grep '^warm: .*converged=1' >/dev/null || { echo "$program did not balance"; exit 1; }
done
cmake -S ffi/examples/cmake-fortran -B "$prefix/build-fortran" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_BUILD_RPATH="$prefix/lib" >/dev/null
cmake --build "$prefix/build-fortran" >/dev/null
"$prefix/build-fortran/heat_f90" pbs 2 20 | grep '^scheduler=pbs threads=2 ' >/dev/null || { echo "heat.f90 through CMake failed"; exit 1; }
# The StarPU policy installed beside it: a program built through pkg-config's pbs-starpu (our heat
# code as StarPU tasks), and the preload library under one of StarPU's own programs.
cc -std=c11 -O2 -Wall -Wextra -Werror starpu/examples/driver.c starpu/examples/heat.c \
    $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs pbs-starpu) -lm -Wl,-rpath,"$prefix/lib" \
    -o "$prefix/starpu-heat"
export STARPU_HOME="$prefix/starpu-home" STARPU_SILENT=1
PBS_STARPU_VERBOSE=1 "$prefix/starpu-heat" --sched pbs --workers 2 --iters 20 --nx 8 --ny 8 2>&1 |
    grep >/dev/null 'pbs (StarPU policy): [1-9][0-9]* iterations' || { echo "the installed StarPU policy did not run heat"; exit 1; }
cg=$(dpkg -L starpu-examples | grep '/examples/cg$')
PBS_STARPU_VERBOSE=1 STARPU_SCHED=pbs LD_PRELOAD="$prefix/lib/libpbs_starpu_preload.so" "$cg" 2>&1 |
    grep >/dev/null 'pbs (StarPU policy): [1-9][0-9]* iterations' || { echo "the installed preload library did not run cg"; exit 1; }
unset STARPU_HOME STARPU_SILENT
ls -lL "$prefix/lib/libpbs.so" "$prefix/lib/libpbs.a" | awk '{printf "  %s: %.1f MB\n", $NF, $5 / 1e6}'
rm -rf "$prefix"

section "the StarPU policy against StarPU 1.3: our heat code and md, StarPU's programs, bad declarations"
cargo test --workspace --test starpu -- --ignored

section "the pool's, the balancer thread's and the claim word's protocols, model-checked (loom)"
# The test profile, not release: the cfg rebuilds every dependency, which that profile leaves
# unoptimised (1.9 against 2.6 minutes on 2 cores; the models then run in 6 s, not 2).
RUSTFLAGS="--cfg pbs_loom" CARGO_TARGET_DIR=target/loom cargo test -p pbs-scheduler --test loom_pool \
    --test loom_background --test loom_claims
