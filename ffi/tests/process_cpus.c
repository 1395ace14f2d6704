/*
 * Where an executor's workers may run when the process was given part of the machine: by
 * taskset, mpirun --bind-to, srun --cpu-bind, or OpenMP binding its initial thread
 * (OMP_PROC_BIND), which narrows the caller's mask to one place of what the process was
 * given. Creates a "static" executor with the default thread count and prints its threads and
 * every worker's CPUs (its affinity mask, read inside a task).
 *
 *   ./process_cpus PIN   (0, 1 or 2)
 *   -> threads=2 worker_0=0 worker_1=1
 *
 * Built with -fopenmp and -DWITH_OPENMP, it asks OpenMP for its thread count first, so that
 * the OpenMP runtime is loaded (and binds the caller where OMP_PROC_BIND says so).
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_ISSET */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef WITH_OPENMP
#include <omp.h>
#endif

#include "pbs.h"

#define MAX_WORKERS 256

static cpu_set_t masks[MAX_WORKERS];

static int record_mask(void *ctx, size_t k) {
    (void)ctx;
    (void)k;
    int w = pbs_current_worker();
    if (w < 0 || w >= MAX_WORKERS) return 1;
    return sched_getaffinity(0, sizeof masks[w], &masks[w]) != 0;
}

int main(int argc, char **argv) {
    int pin = argc > 1 ? atoi(argv[1]) : 1;
#ifdef WITH_OPENMP
    if (omp_get_max_threads() < 1) return 1;
#endif
    pbs_executor *e = pbs_executor_new("static", 16, 16, 1, 0, pin);
    if (!e) {
        fprintf(stderr, "process_cpus: %s\n", pbs_last_error());
        return 2;
    }
    size_t threads = pbs_executor_threads(e);
    if (threads > MAX_WORKERS) return 1;
    /* As many boxes as threads at least, so that every worker runs one under "static". */
    if (pbs_executor_run_phase(e, record_mask, NULL, NULL) != PBS_OK) {
        fprintf(stderr, "process_cpus: %s\n", pbs_last_error());
        return 1;
    }
    printf("threads=%zu", threads);
    for (size_t w = 0; w < threads; w++) {
        printf(" worker_%zu=", w);
        const char *sep = "";
        for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
            if (CPU_ISSET(cpu, &masks[w])) {
                printf("%s%d", sep, cpu);
                sep = ",";
            }
    }
    printf("\n");
    pbs_executor_free(e);
    return 0;
}
