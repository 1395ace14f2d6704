#!/usr/bin/env bash
# Installs pbs's C interface as a C library under PREFIX:
#   PREFIX/include/pbs.h, pbs.hpp (C++), pbs.f90 (the Fortran module's source)
#   PREFIX/lib/libpbs.so.X.Y.Z (SONAME libpbs.so.0.Y while the version is 0.Y.Z), libpbs.so.0.Y
#     and libpbs.so links, and the static libpbs.a
#   PREFIX/lib/pkgconfig/pbs.pc                       (pkg-config --cflags --libs pbs)
#   PREFIX/lib/cmake/pbs/pbsConfig.cmake and version  (find_package(pbs): pbs::pbs, pbs::pbs_static,
#     pbs_FORTRAN_SOURCE)
#   PREFIX/share/doc/pbs/LICENSE-MIT, LICENSE-APACHE, and THIRD-PARTY.md with
#     COPYRIGHT-library.html: the licences of the crates and of Rust's standard library that the
#     libraries contain (scripts/notices.sh)
#   where StarPU 1.3 is found: PREFIX/lib/libpbs_starpu.so (SONAME libpbs_starpu.so.0.Y), the
#     preload library libpbs_starpu_preload.so, PREFIX/include/pbs_starpu.h, pbs-starpu.pc
# Built with the `dist` profile: optimised, without debug info, stripped.
#
#   scripts/install.sh /usr/local          (or any prefix; prints the installed files' sizes)
#   DESTDIR=/tmp/stage scripts/install.sh /usr    (files under /tmp/stage/usr, for /usr)
set -euo pipefail
# A relative PREFIX is the caller's, not the repository's, and pbs.pc needs it absolute.
prefix=$(realpath -m -- "${1:?usage: scripts/install.sh PREFIX}")
# DESTDIR stages the files under DESTDIR/PREFIX, as packagers do (make's convention): pbs.pc
# still names PREFIX, and the CMake package finds its files from where it lies.
root=$prefix
if [ -n "${DESTDIR:-}" ]; then root="$(realpath -m -- "$DESTDIR")$prefix"; fi
cd "$(dirname "$0")/.."
source scripts/common.sh
need_rust
need_packages "${BUILD_PACKAGES[@]}"

version=$(sed -n 's/^version = "\(.*\)"/\1/p' ffi/Cargo.toml | head -1)
IFS=. read -r major minor _patch <<<"$version"
# Semantic versioning: below 1.0 a minor release may break the ABI, so it is in the SONAME.
if [ "$major" = 0 ]; then abi="0.$minor"; else abi="$major"; fi
soname="libpbs.so.$abi"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
# The SONAME goes on this link only; the static library's system dependencies are printed by
# rustc and go into pbs.pc and the CMake package.
cargo rustc --profile dist -p pbs-ffi --lib -- -C "link-arg=-Wl,-soname,$soname" --print native-static-libs 2>&1 | tee "$log" >&2
native=$(sed -n 's/.*native-static-libs: //p' "$log" | tail -1)

out=target/dist
install -d "$root/include" "$root/lib/pkgconfig" "$root/lib/cmake/pbs"
install -m 644 ffi/include/pbs.h ffi/include/pbs.hpp ffi/include/pbs.f90 "$root/include/"
install -m 755 "$out/libpbs_ffi.so" "$root/lib/libpbs.so.$version"
ln -sf "libpbs.so.$version" "$root/lib/$soname"
ln -sf "$soname" "$root/lib/libpbs.so"
install -m 644 "$out/libpbs_ffi.a" "$root/lib/libpbs.a"
# The `dist` profile strips the shared library; the archive keeps its objects' debug sections.
if command -v strip >/dev/null; then strip --strip-debug "$root/lib/libpbs.a"; fi

install -d "$root/share/doc/pbs"
install -m 644 LICENSE-MIT LICENSE-APACHE "$root/share/doc/pbs/"
scripts/notices.sh "$root/share/doc/pbs"

cat >"$root/lib/pkgconfig/pbs.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: pbs
Description: Load balancing and scheduling of grid tasks that keeps locality (C interface)
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -lpbs
Libs.private: $native
PC

cat >"$root/lib/cmake/pbs/pbsConfig.cmake" <<CMAKE
# find_package(pbs) for pbs $version: pbs::pbs (shared) and pbs::pbs_static; pbs_FORTRAN_SOURCE,
# the Fortran module's source, to compile with a Fortran program.
get_filename_component(_pbs_prefix "\${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(pbs_FORTRAN_SOURCE "\${_pbs_prefix}/include/pbs.f90")
if(NOT TARGET pbs::pbs)
  add_library(pbs::pbs SHARED IMPORTED)
  set_target_properties(pbs::pbs PROPERTIES
    IMPORTED_LOCATION "\${_pbs_prefix}/lib/libpbs.so.$version"
    IMPORTED_SONAME "$soname"
    INTERFACE_INCLUDE_DIRECTORIES "\${_pbs_prefix}/include")
  add_library(pbs::pbs_static STATIC IMPORTED)
  set_target_properties(pbs::pbs_static PROPERTIES
    IMPORTED_LOCATION "\${_pbs_prefix}/lib/libpbs.a"
    INTERFACE_INCLUDE_DIRECTORIES "\${_pbs_prefix}/include"
    INTERFACE_LINK_LIBRARIES "$native")
endif()
unset(_pbs_prefix)
CMAKE

cat >"$root/lib/cmake/pbs/pbsConfigVersion.cmake" <<CMAKE
# Compatible when the ABI matches: the same major version (and minor while the major is 0).
set(PACKAGE_VERSION "$version")
set(PACKAGE_VERSION_COMPATIBLE FALSE)
if(PACKAGE_FIND_VERSION_MAJOR EQUAL $major AND ($major GREATER 0 OR PACKAGE_FIND_VERSION_MINOR EQUAL $minor)
   AND NOT PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
endif()
if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
  set(PACKAGE_VERSION_EXACT TRUE)
endif()
CMAKE

# The StarPU policy (docs/starpu.md) where StarPU 1.3 is installed: libpbs_starpu.so
# (conf.sched_policy = &pbs_starpu_policy), libpbs_starpu_preload.so (STARPU_SCHED=pbs for
# programs nobody changes), pbs_starpu.h, and pbs-starpu.pc (pkg-config --cflags --libs
# pbs-starpu), linked to the libpbs.so installed above.
if pkg-config --exists starpu-1.3; then
    starpu_flags=(-std=c11 -O2 -fPIC "-I$root/include" -Istarpu/include $(pkg-config --cflags starpu-1.3))
    starpu_libs=$(pkg-config --libs starpu-1.3)
    "${CC:-cc}" "${starpu_flags[@]}" -shared starpu/src/policy.c -o "$root/lib/libpbs_starpu.so.$version" \
        -Wl,-soname,"libpbs_starpu.so.$abi" -L"$root/lib" -lpbs $starpu_libs -lpthread -lm -Wl,-rpath,"$prefix/lib"
    ln -sf "libpbs_starpu.so.$version" "$root/lib/libpbs_starpu.so.$abi"
    ln -sf "libpbs_starpu.so.$abi" "$root/lib/libpbs_starpu.so"
    "${CC:-cc}" "${starpu_flags[@]}" -shared starpu/src/preload.c -o "$root/lib/libpbs_starpu_preload.so" \
        "$root/lib/libpbs_starpu.so.$version" $starpu_libs -ldl -Wl,-rpath,"$prefix/lib"
    install -m 644 starpu/include/pbs_starpu.h "$root/include/"
    cat >"$root/lib/pkgconfig/pbs-starpu.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: pbs-starpu
Description: pbs as a StarPU 1.3 scheduling policy (pbs_starpu_policy)
Version: $version
Requires: pbs starpu-1.3
Cflags: -I\${includedir}
Libs: -L\${libdir} -lpbs_starpu
PC
    echo "installed the StarPU policy: libpbs_starpu.so, libpbs_starpu_preload.so, pbs_starpu.h, pbs-starpu.pc"
else
    echo "StarPU 1.3 not found (pkg-config starpu-1.3): the StarPU policy is not installed (apt-get install libstarpu-dev)"
fi

echo "installed pbs $version under $root (SONAME $soname; static link needs: $native)"
ls -l "$root/lib/libpbs.so.$version" "$root/lib/libpbs.a" | awk '{printf "  %s: %.1f MB\n", $NF, $5 / 1e6}'
