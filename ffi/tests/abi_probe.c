/* Prints the layout of pbs.h's structs and enum as C sees it, and takes the address of every
   function the header declares, so that linking fails if the library lacks one. The test in
   c_programs.rs compares the layout with the Rust side's. */
#include <stddef.h>
#include <stdio.h>

#include "pbs.h"

#define FIELD(t, f) printf(#t "." #f " %zu %zu\n", offsetof(t, f), sizeof(((t *)0)->f))

int main(void) {
    void (*functions[])(void) = {
        (void (*)(void))pbs_last_error,
        (void (*)(void))pbs_last_error_status,
        (void (*)(void))pbs_partitioner_new,
        (void (*)(void))pbs_partitioner_balance,
        (void (*)(void))pbs_partitioner_free,
        (void (*)(void))pbs_executor_new,
        (void (*)(void))pbs_executor_new_with,
        (void (*)(void))pbs_executor_threads,
        (void (*)(void))pbs_executor_run_phase,
        (void (*)(void))pbs_executor_run_phase_ranges,
        (void (*)(void))pbs_executor_end_iteration,
        (void (*)(void))pbs_executor_on_each_thread,
        (void (*)(void))pbs_executor_owners,
        (void (*)(void))pbs_executor_reduce_sum,
        (void (*)(void))pbs_executor_hint_loads,
        (void (*)(void))pbs_executor_hint_motion,
        (void (*)(void))pbs_executor_hint_iterations_left,
        (void (*)(void))pbs_mapper_new,
        (void (*)(void))pbs_mapper_owners,
        (void (*)(void))pbs_mapper_victims,
        (void (*)(void))pbs_mapper_end_iteration,
        (void (*)(void))pbs_mapper_hint_iterations_left,
        (void (*)(void))pbs_mapper_free,
        (void (*)(void))pbs_tiling_grid,
        (void (*)(void))pbs_tiling_cells,
        (void (*)(void))pbs_tiling_grid_3d,
        (void (*)(void))pbs_tiling_cells_3d,
        (void (*)(void))pbs_current_worker,
        (void (*)(void))pbs_executor_free,
        (void (*)(void))pbs_version,
    };
    printf("functions %zu\n", sizeof functions / sizeof functions[0]);
    printf("version %s %s\n", pbs_version(), PBS_VERSION_STRING);
    printf("pbs_status %zu %d %d %d %d %d %d %d %d\n", sizeof(pbs_status), PBS_OK, PBS_INVALID_ARGUMENT,
           PBS_NULL_POINTER, PBS_UNSUPPORTED, PBS_INTERNAL_ERROR, PBS_TASK_FAILED, PBS_BUSY,
           PBS_OUT_OF_RESOURCES);
    printf("pbs_pin %d %d %d\n", PBS_PIN_OFF, PBS_PIN_WORKERS, PBS_PIN_WORKERS_AND_CALLER);
    printf("pbs_outcome %zu\n", sizeof(pbs_outcome));
    FIELD(pbs_outcome, steps);
    FIELD(pbs_outcome, converged);
    FIELD(pbs_outcome, max_avg);
    FIELD(pbs_outcome, lower_bound);
    FIELD(pbs_outcome, dol_max);
    FIELD(pbs_outcome, dol_min);
    FIELD(pbs_outcome, edge_cut);
    FIELD(pbs_outcome, migrations);
    FIELD(pbs_outcome, elapsed_ms);
    printf("pbs_phase_stats %zu\n", sizeof(pbs_phase_stats));
    FIELD(pbs_phase_stats, wall_ms);
    FIELD(pbs_phase_stats, efficiency);
    FIELD(pbs_phase_stats, affinity);
    printf("pbs_iteration_end %zu\n", sizeof(pbs_iteration_end));
    FIELD(pbs_iteration_end, rebalanced);
    FIELD(pbs_iteration_end, rebalance_ms);
    FIELD(pbs_iteration_end, migrations);
    FIELD(pbs_iteration_end, max_avg);
    return 0;
}
