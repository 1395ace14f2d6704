/*
 * Threads created after a pinned executor: with PBS_PIN_WORKERS an OpenMP team started between
 * pbs's phases keeps the process's CPUs; with PBS_PIN_WORKERS_AND_CALLER it inherits worker 0's
 * core, as the header says. Prints, per OpenMP thread, how many CPUs it may run on.
 *
 *   ./openmp_mask PIN   (PIN = 0, 1 or 2)
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "pbs.h"

static int cpus_of_this_thread(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
    return CPU_COUNT(&set);
}

static int nothing(void *ctx, size_t k) {
    (void)ctx;
    (void)k;
    return 0;
}

int main(int argc, char **argv) {
    int pin = argc > 1 ? atoi(argv[1]) : 1;
    int before = cpus_of_this_thread();
    pbs_executor *e = pbs_executor_new("pbs", 8, 8, 1, 2, pin);
    if (!e) {
        fprintf(stderr, "openmp_mask: %s\n", pbs_last_error());
        return 2;
    }
    if (pbs_executor_run_phase(e, nothing, NULL, NULL) != PBS_OK) return 1;
    printf("process_cpus=%d caller_cpus=%d", before, cpus_of_this_thread());
    /* The first parallel region: libgomp creates its team now, from the calling thread. */
#pragma omp parallel num_threads(2)
    {
        int mine = cpus_of_this_thread();
#pragma omp critical
        printf(" omp_thread_%d_cpus=%d", omp_get_thread_num(), mine);
    }
    /* pbs goes on working after the OpenMP region. */
    if (pbs_executor_run_phase(e, nothing, NULL, NULL) != PBS_OK) return 1;
    printf("\n");
    pbs_executor_free(e);
    return 0;
}
