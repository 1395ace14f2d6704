#!/usr/bin/env bash
# pbs against OpenMP's own schedules on ffi/examples/heat.c, as a C code's author would weigh
# them: the same task over the same boxes, in interleaved rounds (every variant once per round,
# in a rotating order), medians of the per-round ratios. Part of scripts/perf.sh.
#   scripts/openmp_compare.sh [ROUNDS=15] [THREADS=2] [ITERATIONS=300]
# Three cases, each with its target (exit status 1 when one is missed):
#   imbalanced (a hot corner): pbs <= 0.95x OpenMP static, <= 1.05x the best OpenMP schedule
#     (static, dynamic and guided, chunks 1-64), efficiency >= 0.97. Issue 19 asks <= 0.97x the
#     best, tuned as a user would: the best is chosen on one half of the rounds and pbs judged
#     against it on the other (two folds), since the fastest of eight on the very rounds it is
#     judged on is whichever ran luckiest there; the line says whether it was met by the figure
#     with the best chosen on all rounds, and by the held-out one where both halves chose the
#     same schedule (docs/results.md, "The OpenMP schedule a user would pick");
#   uniform: pbs <= 1.02x OpenMP static, and at most one rebalancing after iteration 10 in the
#     median round (issue 19 asks none: on this shared VM one core is sometimes 8-16 % slower
#     for 16 iterations or more, a real difference between the threads that pbs answers once it
#     has lasted that long; shorter stretches wait, docs/results.md "Thread-wide slowdowns wait");
#   mixed: pbs beside an OpenMP loop (diag=omp, OMP_WAIT_POLICY=passive) <= 1.1x the same
#     loop as a pbs phase (diag=pbs), unpinned and pinned; OpenMP's default wait policy, and
#     the cost of pinning the caller during phases only, are shown for the record.
# For the record, no target: the imbalanced case again on 16 x 16 boxes, where each thread's share
# of the fields fits its L2 (the size at which locality can pay against a tuned dynamic schedule);
# ffi/examples/heat.f90, the Fortran example, against the same OpenMP schedules (gfortran's
# !$omp parallel do).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
need_rust
need_c_compiler
need_packages gfortran
rounds=${1:-15} threads=${2:-2} iters=${3:-300}
for n in "$rounds" "$threads" "$iters"; do
    [[ "$n" =~ ^[1-9][0-9]{0,5}$ ]] || { echo "scripts/openmp_compare.sh: ROUNDS, THREADS and ITERATIONS are whole numbers from 1 to 999999, got '$n'" >&2; exit 2; }
done
[ $# -le 3 ] || { echo "scripts/openmp_compare.sh: at most 3 arguments (ROUNDS THREADS ITERATIONS)" >&2; exit 2; }

cargo build --release -q -p pbs-ffi
heat=target/release/heat-openmp
"${CC:-cc}" -std=c11 -O2 -fopenmp -Iffi/include ffi/examples/heat.c -Ltarget/release -lpbs_ffi -lm \
    -Wl,-rpath,"$PWD/target/release" -o "$heat"
heat_f90=target/release/heat-f90-openmp
gfortran -O2 -fopenmp -Jtarget/release ffi/include/pbs.f90 ffi/examples/heat.f90 -Ltarget/release -lpbs_ffi \
    -Wl,-rpath,"$PWD/target/release" -o "$heat_f90"
# OpenMP's threads pinned as pbs's are; only where pbs is absent, as OMP_PROC_BIND also binds
# the initial thread, which unpinned pbs workers would inherit.
bind="OMP_PROC_BIND=close OMP_PLACES=cores"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# rounds LABEL VARIANT... : runs each "ENV...|ARGS" variant of $heat once per round, rotating the order;
# records "round variant ms efficiency late_rebalancings late_imbalanced" in $work/LABEL.
rounds() {
    local label=$1
    shift
    local variants=("$@") n=$# r i v line
    : >"$work/$label"
    for ((r = 0; r < rounds; r++)); do
        for ((i = 0; i < n; i++)); do
            v=$(((i + r) % n))
            # shellcheck disable=SC2086 # a variant is words: environment, then arguments
            line=$(env ${variants[v]%%|*} "$heat" ${variants[v]#*|} 2>/dev/null)
            echo "$r $v $(field ms_per_iteration "$line") $(field efficiency "$line") $(field rebalancings_after_10 "$line")" \
                "$(field imbalanced_after_10 "$line")" \
                >>"$work/$label"
        done
        printf '\r  %s: round %d/%d' "$label" $((r + 1)) "$rounds" >&2
    done
    echo >&2
}
field() { sed -n "s/.*[ :]$1=\([^ ]*\).*/\1/p" <<<"$2"; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# The median over rounds of variant A's time / variant B's time.
ratio() { awk -v a="$2" -v b="$3" '$2 == a { t[$1] = $3 } $2 == b { u[$1] = $3 } END { for (r in t) print t[r] / u[r] }' "$work/$1" | median; }
# best_on LABEL VARIANTS PARITY: the variant (1..VARIANTS-1) with the lowest median time over the
# rounds of that parity.
best_on() {
    local v
    for ((v = 1; v < $2; v++)); do
        echo "$(awk -v v=$v -v p="$3" '$2 == v && $1 % 2 == p { print $3 }' "$work/$1" | median) $v"
    done | sort -g | head -1 | cut -d' ' -f2
}
# held_out LABEL VARIANTS: the median over rounds of variant 0's time over the best's, the best
# chosen on the rounds of the other parity; prints "ratio best-on-odd best-on-even".
held_out() {
    local odd even
    odd=$(best_on "$1" "$2" 1) even=$(best_on "$1" "$2" 0)
    echo "$(awk -v odd="$odd" -v even="$even" '$2 == 0 { t[$1] = $3 } { ms[$1 " " $2] = $3 }
        END { for (r in t) print t[r] / ms[r " " (r % 2 == 0 ? odd : even)] }' "$work/$1" | median) $odd $even"
}
column_of() { awk -v v="$2" -v c="$3" '$2 == v { print $c }' "$work/$1" | median; }
missed=()
check() { # check NAME VALUE OP LIMIT
    if awk -v x="$2" -v l="$4" "BEGIN { exit !(x $3 l) }"; then echo "  ok: $1 = $2 ($3 $4)"; else
        echo "  MISSED: $1 = $2 (target $3 $4)"
        missed+=("$1")
    fi
}

omp=(omp-static omp-static:4 omp-dynamic:1 omp-dynamic:4 omp-dynamic:16 omp-dynamic:64 omp-guided omp-guided:4)
# against_schedules LABEL PBS_ARGS [SIZE]: pbs (variant 0, $heat with PBS_ARGS) and every OpenMP
# schedule of `omp` (variants 1..), in rounds, on boxes of SIZE ("NX NY SIDE"; heat's default when
# empty); prints each schedule's time and pbs over it, pbs's time and efficiency, and pbs over the
# best schedule chosen on the other half of the rounds. Sets `best` (the fastest schedule over all
# rounds), `held`, `odd` and `even` (held_out's).
against_schedules() {
    local label=$1 v s ms best_ms= size=${3:-}
    local variants=("|$2")
    for s in "${omp[@]}"; do variants+=("$bind|$s $threads $iters $size"); done
    rounds "$label" "${variants[@]}"
    best=1
    for ((v = 1; v < ${#variants[@]}; v++)); do
        ms=$(column_of "$label" $v 3)
        printf '  %-16s %8.4f ms/iteration  pbs/this %.3f\n' "${omp[v - 1]}" "$ms" "$(ratio "$label" 0 $v)"
        if [ -z "$best_ms" ] || awk -v a="$ms" -v b="$best_ms" 'BEGIN { exit !(a < b) }'; then best=$v best_ms=$ms; fi
    done
    printf '  %-16s %8.4f ms/iteration  efficiency %s\n' pbs "$(column_of "$label" 0 3)" "$(column_of "$label" 0 4)"
    read -r held odd even <<<"$(held_out "$label" ${#variants[@]})"
    printf '  pbs / best OpenMP chosen on the other half of the rounds (%s on odd rounds, %s on even) = %s\n' \
        "${omp[odd - 1]}" "${omp[even - 1]}" "$held"
}

args="pbs $threads $iters"
echo "== heat.c, $threads threads, $iters iterations, $rounds interleaved rounds, medians"
echo "-- imbalanced: a hot corner"
against_schedules corner "$args pin=1"
check "pbs / OpenMP static" "$(ratio corner 0 1)" "<=" 0.95
check "pbs / best OpenMP (${omp[best - 1]})" "$(ratio corner 0 $best)" "<=" 1.05
check "pbs efficiency" "$(column_of corner 0 4)" ">=" 0.97
verdict() { if awk -v x="$1" 'BEGIN { exit !(x <= 0.97) }'; then echo met; else echo "not met"; fi; }
# issue19 LABEL: the line on issue 19's target, from against_schedules' figures for LABEL.
issue19() {
    if [ "$odd" = "$even" ]; then
        echo "  issue 19's 0.97x the best OpenMP schedule: $(verdict "$held") with the best chosen on the other rounds," \
            "$(verdict "$(ratio "$1" 0 $best)") with it chosen on the same rounds"
    else
        # Halves that pick different schedules say the choice is noise here: no verdict from them.
        echo "  issue 19's 0.97x the best OpenMP schedule: $(verdict "$(ratio "$1" 0 $best)") with it chosen on the" \
            "same rounds; the halves chose different schedules, so the other figure gives no verdict"
    fi
}
issue19 corner
# The hot corner's extra work is arithmetic: a tuned dynamic schedule loses only cache misses, which
# count where a thread's share of the fields fits its L2 (1 MiB a core on the 2-core VM; heat's
# default grid holds 4 MiB of fields) and its cache then keeps it from one iteration to the next.
echo "-- for the record: the hot corner on 16 x 16 boxes of 16 x 16 cells (1 MiB of fields, half a"
echo "   MiB a thread at 2 threads; L2 here: $(getconf LEVEL2_CACHE_SIZE 2>/dev/null || echo unknown) bytes a core); no target"
against_schedules corner_small "$args 16 16 16 pin=1" "16 16 16"
issue19 corner_small

echo "-- uniform load"
rounds uniform "|$args pin=1 load=uniform" "$bind|omp-static $threads $iters load=uniform"
printf '  pbs %.4f ms/iteration, OpenMP static %.4f\n' "$(column_of uniform 0 3)" "$(column_of uniform 1 3)"
check "pbs / OpenMP static" "$(ratio uniform 0 1)" "<=" 1.02
check "pbs rebalancings after iteration 10 (median of rounds)" "$(column_of uniform 0 5)" "<=" 1
printf '  for the record, iterations after 10 whose threads measured over 5 %% apart on this uniform load: %s of %s (median of rounds)\n' \
    "$(column_of uniform 0 6)" "$((iters - 10))"

echo "-- mixed: an OpenMP loop between pbs's phases"
p=OMP_WAIT_POLICY=passive
rounds mixed "$p|$args pin=0 diag=pbs" "$p|$args pin=0 diag=omp" "$p|$args pin=1 diag=pbs" \
    "$p|$args pin=1 diag=omp" "|$args pin=0 diag=omp" "|$args pin=1 diag=omp" "$p|$args pin=2 diag=pbs"
check "mixed / pure pbs, unpinned" "$(ratio mixed 1 0)" "<=" 1.1
check "mixed / pure pbs, pinned" "$(ratio mixed 3 2)" "<=" 1.1
printf '  for the record, OpenMP default wait policy: unpinned %.2fx, pinned %.2fx the pure-pbs time\n' \
    "$(ratio mixed 4 0)" "$(ratio mixed 5 2)"
printf '  for the record, pure pbs with the caller pinned during phases only / for good: %.3f\n' "$(ratio mixed 2 6)"

echo "-- for the record: ffi/examples/heat.f90, the same comparison in Fortran (the field in one array"
echo "   of two time levels, the OpenMP loop a !\$omp parallel do); no target"
heat=$heat_f90
against_schedules fortran "pbs $threads $iters"

if [ ${#missed[@]} -gt 0 ]; then
    echo "openmp_compare: missed ${missed[*]}"
    exit 1
fi
echo "openmp_compare: every target met"
