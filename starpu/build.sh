#!/usr/bin/env bash
# Builds the StarPU side of pbs into target/starpu/: libpbs_starpu.so (the policy),
# libpbs_starpu_preload.so (STARPU_SCHED=pbs for unchanged programs), heat, heat3d, md and md3d (ffi/examples'
# heat codes and apps' md, 2D and 3D, as StarPU tasks), errors, steal and internals (the policy's tests/*.c), against Debian's StarPU 1.3 and the release libpbs_ffi.so.
# Usage: starpu/build.sh [--no-cargo]   (--no-cargo: libpbs_ffi.so is already built)
set -euo pipefail
cd "$(dirname "$0")/.."
# Built where this script and pbs-bench look for it, whatever CARGO_TARGET_DIR says elsewhere.
export CARGO_TARGET_DIR="$PWD/target"
if ! pkg-config --exists starpu-1.3; then
    echo "error: StarPU 1.3 not found (pkg-config starpu-1.3): apt-get install libstarpu-dev" >&2
    exit 1
fi
[ "${1:-}" = "--no-cargo" ] || cargo build --release -q -p pbs-ffi
out=target/starpu
lib=$PWD/target/release
mkdir -p "$out"
cc=${CC:-cc}
# Each file is written under a temporary name, then renamed: a program running from target/starpu
# (another test, a bench) never sees one half written.
tmp=".tmp.$$"
# What a failed or interrupted build wrote under the temporary names goes.
trap 'rm -f "$out"/*"$tmp"' EXIT
flags=(-std=c11 -O2 -g -Wall -Wextra -Werror -fPIC -Iffi/include -Istarpu/include $(pkg-config --cflags starpu-1.3))
starpu_libs=$(pkg-config --libs starpu-1.3)
"$cc" "${flags[@]}" -shared starpu/src/policy.c -o "$out/libpbs_starpu.so$tmp" \
    -Wl,-soname,libpbs_starpu.so -L"$lib" -lpbs_ffi $starpu_libs -lpthread -lm -Wl,-rpath,"$lib"
"$cc" "${flags[@]}" -shared starpu/src/preload.c -o "$out/libpbs_starpu_preload.so$tmp" \
    "$out/libpbs_starpu.so$tmp" $starpu_libs -ldl -Wl,-rpath,"$PWD/$out" -Wl,-rpath,"$lib"
# md3d: md.c with three dimensions, fixed when built (a particle's size and its loops).
for app in heat heat3d md md3d; do
    source=$app dims=2
    [ "$app" = md3d ] && source=md dims=3
    "$cc" "${flags[@]}" -DMD_DIMS=$dims starpu/examples/driver.c starpu/examples/$source.c -o "$out/$app$tmp" \
        "$out/libpbs_starpu.so$tmp" -L"$lib" -lpbs_ffi $starpu_libs -lm -Wl,-rpath,"$PWD/$out" -Wl,-rpath,"$lib"
done
for test in errors steal; do
    "$cc" "${flags[@]}" starpu/tests/$test.c -o "$out/$test$tmp" \
        "$out/libpbs_starpu.so$tmp" -L"$lib" -lpbs_ffi $starpu_libs -Wl,-rpath,"$PWD/$out" -Wl,-rpath,"$lib"
done
# The policy's static data structures, with policy.c compiled in (not linked to the library).
"$cc" "${flags[@]}" starpu/tests/internals.c -o "$out/internals$tmp" -L"$lib" -lpbs_ffi $starpu_libs -lpthread -lm \
    -Wl,-rpath,"$lib"
for f in libpbs_starpu.so libpbs_starpu_preload.so heat heat3d md md3d errors steal internals; do mv -f "$out/$f$tmp" "$out/$f"; done
