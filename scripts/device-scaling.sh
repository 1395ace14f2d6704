#!/bin/bash
# The thread-scaling check for a lent many-core machine (issue 17; docs/results.md, "Sixteen
# threads, 2026-11-26"). That machine has no Rust toolchain and no network, so the binaries are
# built here and carried:
#   here:   scripts/device-scaling.sh prepare      release build, stripped into .devbin/ (git
#                                                  ignores it) with the libraries it links
#   there:  bash scripts/device-scaling.sh run     through the device tool, carry [".devbin"];
#                                                  everything lands in $OUT (about 4 minutes on
#                                                  16 cores: give it a 420 s timeout)
# What it measures: an empty phase of the pool per thread count, the balancer alone and on the
# pool, where the balancer runs at all cores (PBS_OVERLAP on, idle, off; mean and median
# iterations), and weak scaling (256 boxes per thread) of pbs, static, ws and eager.
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
prepare)
    cargo build --release -p pbs-bench
    cargo build --release -p pbs-scheduler --example phase_latency --example parallel_balancer
    exclude=$(git rev-parse --git-path info/exclude)
    mkdir -p .devbin "$(dirname "$exclude")"
    grep -qx '/.devbin/' "$exclude" 2>/dev/null || echo '/.devbin/' >>"$exclude"
    for b in target/release/pbs-bench target/release/examples/phase_latency target/release/examples/parallel_balancer; do
        strip -o ".devbin/$(basename "$b")" "$b"
    done
    # The shared libraries beyond the C runtime (hwloc, METIS, udev): the machine may lack them.
    ldd target/release/pbs-bench | awk '/=> \// {print $3}' |
        grep -v -e '/libc\.so' -e '/libm\.so' -e '/libgcc_s\.so' -e '/ld-linux' |
        while read -r lib; do cp -L "$lib" .devbin/; done
    du -sh .devbin
    ;;
run)
    [ -x .devbin/pbs-bench ] || { echo "no .devbin/pbs-bench: run '$0 prepare' here and carry .devbin" >&2; exit 1; }
    export LD_LIBRARY_PATH=$PWD/.devbin
    out=${OUT:-out/device}
    mkdir -p "$out"
    B=.devbin/pbs-bench
    cores=$(nproc)
    threads=$(printf '%s\n' 2 4 8 "$cores" | awk -v c="$cores" '$1 <= c' | sort -nu | paste -sd, -)
    side=$(awk -v c="$cores" 'BEGIN { s = sqrt(256 * c); print (s == int(s)) ? s : int(s) + 1 }')
    {
        date
        echo "cores: $cores; thread counts: $threads; weak grid at $cores threads: ${side}x${side}"
        lscpu | grep -E 'Model name|NUMA node\(s\)|L2 cache|L3 cache' || true
        for t in ${threads//,/ }; do timeout 20 .devbin/phase_latency "$t" | tail -1; done
        timeout 60 .devbin/parallel_balancer 2 "$cores" "$cores:$((cores * 4))"
        for scenario in gravity contraction; do
            for overlap in on idle off; do
                echo "== md $scenario ${side}x${side}, $cores threads, PBS_OVERLAP=$overlap"
                PBS_OVERLAP=$overlap timeout 90 "$B" run --app md --scenario "$scenario" --threads "$cores" \
                    --nx "$side" --ny "$side" --iters 200 --repeats 3 --scheduler pbs,ws,static
            done
        done
        timeout 300 "$B" scaling --threads "$threads" --weak 256 --repeats 3 --schedulers pbs,static,ws,eager \
            --out "$out/weak"
        date
    } 2>&1 | tee "$out/log.txt"
    ;;
*)
    echo "usage: $0 prepare|run (see the comment at the top)" >&2
    exit 2
    ;;
esac
