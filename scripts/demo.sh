#!/usr/bin/env bash
# The main demo: balances the paper's four static cases and a Perlin map with our method and
# the paper's side by side, runs warm-started rough and smooth transitions, sets pbs beside the
# partitioners users would pick instead, runs the grid apps (MD, stencil) under every
# scheduler, a C and a Fortran code through the C interface and the heat code inside StarPU
# under pbs and StarPU's own policies, then writes short versions of the apps report and the
# paper report (markdown + PNG plots) to out/demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
need_rust
need_c_compiler
need_packages "${BUILD_PACKAGES[@]}" "${WINDOW_PACKAGES[@]}" "${STARPU_PACKAGES[@]}" "${MPI_PACKAGES[@]}" gfortran

cargo build --release -p pbs-bench -p pbs-visual -p pbs-ffi -p pbs-mpi
cargo build --release -p pbs-mpi --example rank_replay
bench=target/release/pbs-bench

echo
echo "== The paper's static cases and a Perlin map, 50x50 boxes, 10 vCores: ours (pbs) vs the paper's eq. 7"
$bench converge --case all --method power-cells,paper-eq7 --max-steps 2000
echo
echo "== 200 rough transitions (a new Perlin map each time), warm-started"
$bench transitions --kind rough --trials 200
echo
echo "== 200 smooth transitions (the map translated by half a box), warm-started"
$bench transitions --kind smooth --trials 200 --compare-scratch
echo
echo "== Against the partitioners users would pick instead (RCB, Hilbert, coupe, METIS), Perlin maps and"
echo "   drifting/re-drawn sequences at 16 and 72 parts (the full table: $bench peers; docs/peers.md)"
mkdir -p out/demo
$bench peers --perlin --parts 16,72 --boxes-per-part 100 --seeds 1 --sequence 10 --png out/demo/peers.png | sed -n '/^method /,$p'
echo
echo "== The runtime: per-phase overhead of every executor on empty tasks (10^4 boxes, 2 threads)"
cargo run --release -q -p pbs-scheduler --example overhead
echo
echo "== The grid apps on the scheduler: every executor side by side, taking turns (one worker per core)"
echo "   Lennard-Jones MD with cell lists, particles falling and piling up (gravity):"
$bench run --app md --scenario gravity --scheduler all --iters 200
echo "   Jacobi heat diffusion with an extra per-box cost from a drifting Perlin map:"
$bench run --app stencil --scenario drift --scheduler all --iters 100
echo "   The same in 3D: a 7-point stencil on 12 x 12 x 8 boxes of 8^3 cells, a 3D cost map:"
$bench run --app stencil --scenario drift --nx 12 --ny 12 --nz 8 --scheduler pbs,ws,eager,static,rcb --iters 60
echo "   MD in 3D: 16 x 16 x 16 boxes, 27 around each, particles falling along -z:"
$bench run --app md --scenario gravity --nx 16 --ny 16 --nz 16 --scheduler pbs,ws,eager,static,rcb --iters 100
echo
echo "== From C (ffi/include/pbs.h): a heat-diffusion code in C on each scheduler, then the balancer alone"
"${CC:-cc}" -std=c11 -O2 -Iffi/include ffi/examples/heat.c -Ltarget/release -lpbs_ffi -Wl,-rpath,"$PWD/target/release" -o target/release/heat-c
"${CC:-cc}" -std=c11 -O2 -Iffi/include ffi/examples/balance.c -Ltarget/release -lpbs_ffi -lm -Wl,-rpath,"$PWD/target/release" -o target/release/balance-c
for s in pbs ws eager static; do target/release/heat-c "$s"; done
"${CC:-cc}" -std=c11 -O2 -Iffi/include ffi/examples/heat3d.c -Ltarget/release -lpbs_ffi -Wl,-rpath,"$PWD/target/release" -o target/release/heat3d-c
for s in pbs ws static; do target/release/heat3d-c "$s"; done   # 96^3 cells in 3D tiles (pbs_tiling_*_3d)
target/release/balance-c
echo "   The heat code in Fortran (ffi/include/pbs.f90, module pbs), its sweep a pbs phase or a plain loop:"
gfortran -O2 -Jtarget/release ffi/include/pbs.f90 ffi/examples/heat.f90 -Ltarget/release -lpbs_ffi \
    -Wl,-rpath,"$PWD/target/release" -o target/release/heat-f90
for s in pbs static serial; do target/release/heat-f90 "$s"; done
echo
echo "== Inside StarPU: pbs as a StarPU scheduling policy against StarPU's own, on the heat code as StarPU"
echo "   tasks and on StarPU's example programs run unchanged (docs/starpu.md)"
$bench starpu --repeats 2
echo
echo "== Across MPI ranks: md gravity on 4 ranks, boxes to ranks by pbs, by RCB and as static slabs, the"
echo "   pbs executor inside each rank (docs/mpi.md; oversubscribed on a machine with fewer than 4 cores)"
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
mpirun --oversubscribe --bind-to none -np 4 target/release/pbs-mpi compare --app md --nx 64 --ny 64 --iters 200 --repeats 2
echo "   the stencil in 3D on 3 ranks (ranks meet across layers), then its checksum in shared memory"
mpirun --oversubscribe --bind-to none -np 3 target/release/pbs-mpi run --app stencil --nx 12 --ny 12 --nz 8 --iters 40
$bench run --app stencil --nx 12 --ny 12 --nz 8 --iters 40 --scheduler static --threads 1 --json |
    grep -o '"checksum": *"[0-9a-f]*"'
echo "   and 16 and 64 ranks replayed in one process on md's own work per box (no MPI): pbs and RCB"
echo "   over the iterations of an expansion of 16x16x16 boxes, where RCB leads at 64 ranks"
target/release/examples/rank_replay expansion 16x16x16 16,64 300 pbs,rcb boulmier out/demo/ranks_timeline.png
echo "open out/demo/ranks_timeline.png"
echo
echo "== Many cores, in the model (docs/model.md): md gravity recorded here, replayed at 16 and 64 threads"
echo "   on 1 and 4 NUMA nodes with the real balancer's decisions; then the model beside the 16-core measurements"
$bench model --app md --scenario gravity --threads 16,64 --numa-nodes 1,4 --png out/demo/model.png
$bench model --calibration --png out/demo/calibration.png > out/demo/calibration.txt
echo "open out/demo/model.png and out/demo/calibration.png (the table: out/demo/calibration.txt)"
echo
echo "== The standard matrix (apps x scenarios x schedulers), one run each (the full one: $bench report)"
$bench report --out out/demo/apps --repeats 1
echo "open out/demo/apps/report.md, iteration_time.png, busy.png and owners.png"
echo
echo "== The paper's tables, short version (the full one: $bench paper --out out/paper)"
$bench paper --quick --out out/demo
echo "open out/demo/report.md, out/demo/fig5.png and out/demo/cells.png"
echo
echo "== The simulator: 150x150 boxes, 72 vCores, a drifting Perlin map (pbs-visual --help for more)"
target/release/pbs-visual --headless --drift --steps 150 --png out/demo/simulator.png --gif out/demo/simulator.gif --gif-every 3 --px 2
echo "   and a drifting cube of 40x40x12 boxes, 48 vCores, drawn layer by layer: out/demo/simulator_3d.png"
target/release/pbs-visual --headless --grid 40x40x12 --vcores 48 --drift --steps 40 --png out/demo/simulator_3d.png
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
    echo "opening the simulator's window; close it to finish"
    target/release/pbs-visual --play --drift
else
    echo "no display: to open the window, run target/release/pbs-visual --play --drift on a desktop,"
    echo "or xvfb-run -a target/release/pbs-visual --play --drift --screenshot out/demo/window.png"
fi
