# Shared by the scripts: checks the toolchain, installs what is missing, times sections.
# Sourced, not run.

# The scripts find what cargo builds under the repository's target/ (target/release/pbs-bench,
# target/dist/, target/starpu/), so they build there whatever CARGO_TARGET_DIR says elsewhere.
CARGO_TARGET_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/target"
export CARGO_TARGET_DIR

need_rust() {
    if ! command -v cargo >/dev/null 2>&1; then
        echo "error: cargo not found. Install the Rust toolchain (https://rustup.rs), then run this again." >&2
        exit 1
    fi
    local have
    have=$(rustc --version | awk '{print $2}')
    # pbs-visual (eframe/egui 0.37) needs 1.95; the other crates less (the workspace's Cargo.toml).
    if ! printf '%s\n%s\n' "1.95.0" "$have" | sort -V -C; then
        echo "error: rustc $have is too old; pbs needs 1.95 or newer (rustup update)." >&2
        exit 1
    fi
}

# The C compiler Rust links with also builds the C examples of ffi/ (demo and tests).
need_c_compiler() {
    command -v "${CC:-cc}" >/dev/null 2>&1 || need_packages gcc libc6-dev
}

# Components the test command needs; rustup's default profile has them, a minimal one does not.
need_components() {
    for c in rustfmt clippy; do
        if ! cargo "${c/rustfmt/fmt}" --version >/dev/null 2>&1; then
            if command -v rustup >/dev/null 2>&1; then
                echo "installing the $c component" >&2
                rustup component add "$c"
            else
                echo "error: cargo $c is missing and rustup is not available to install it." >&2
                exit 1
            fi
        fi
    done
}

# Debian packages the build needs: hwloc (topology, a default feature of pbs-scheduler) and
# what its -sys crate needs to find it; METIS for the peer partitioners of pbs-peers (which
# builds without it, its METIS methods then saying so).
BUILD_PACKAGES=(libhwloc-dev libudev-dev pkg-config libmetis-dev)
# What the simulator's window needs at run time (winit and glow load these with dlopen), and a
# virtual display with software OpenGL for the window test.
WINDOW_PACKAGES=(libx11-6 libx11-xcb1 libxcursor1 libxrandr2 libxi6 libxkbcommon-x11-0 libgl1 libegl1 libgl1-mesa-dri)
XVFB_PACKAGES=(xvfb xauth)
# The install test builds a C program with CMake against the installed library.
CMAKE_PACKAGES=(cmake)
# The StarPU policy of starpu/ builds against Debian's StarPU 1.3 and is compared on StarPU's own
# example programs, some of which are MPI programs that start an MPI singleton (orted).
STARPU_PACKAGES=(libstarpu-dev starpu-examples openmpi-bin)
# pbs-mpi builds on rsmpi (bindgen over Open MPI's headers, hence libclang) and its tests run
# mpirun.
MPI_PACKAGES=(libopenmpi-dev libclang-dev openmpi-bin)
# pbs.hpp is tested under both C++ compilers of Debian, and beside oneTBB's loops; pbs.f90
# under both Fortran compilers (gfortran, LLVM's Flang).
CXX_PACKAGES=(g++ clang libtbb-dev gfortran flang-19)
# All that the workspace's tests use (scripts/test.sh, scripts/coverage.sh).
TEST_PACKAGES=("${BUILD_PACKAGES[@]}" "${WINDOW_PACKAGES[@]}" "${XVFB_PACKAGES[@]}" "${CMAKE_PACKAGES[@]}"
    "${CXX_PACKAGES[@]}" "${STARPU_PACKAGES[@]}" "${MPI_PACKAGES[@]}")

# Installs the given Debian packages when missing (as root, or through sudo).
need_packages() {
    local missing=()
    for p in "$@"; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "installing ${missing[*]}" >&2
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then sudo=sudo; else
            echo "error: need ${missing[*]} (apt-get install ${missing[*]}) and am not root" >&2
            exit 1
        fi
    fi
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
}

# section TITLE: prints "== TITLE"; when the script exits, how many seconds each section took,
# so that a run over CI's 30 minutes on 2 cores shows where its time went. The first call sets
# the EXIT trap.
section() {
    if [ -n "${section_title:-}" ]; then section_close; else
        section_times=()
        trap section_times EXIT
    fi
    section_title=$1 section_start=$SECONDS
    echo "== $1"
}
section_close() {
    section_times+=("$(printf '%5d s  %.90s' $((SECONDS - section_start)) "$section_title")")
}
section_times() {
    section_close
    echo "seconds per section of $(basename "$0") ($SECONDS s in all):"
    printf '%s\n' "${section_times[@]}"
}
