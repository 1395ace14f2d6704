/*
 * A worker with nothing of its own steals from a queue that fills while it waits: box 0 gets
 * every task (each reads box 0's handle only, so they may run at once), box 1 none. One task
 * first, and a pause in which the other worker finds nothing to steal and waits; then a burst.
 * Prints "stolen S of N" for starpu.rs in bench/tests: a worker left waiting through the burst
 * steals none of it. Then the mean push order of the burst's tasks each worker ran ("pushed
 * order: owner O, thief T"): the owner runs its queue from the front, a thief takes from the
 * back, so in push order (PBS_STARPU_ORDER=fifo) what is stolen was pushed late.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <time.h>

#include <starpu.h>

#include "pbs_starpu.h"

/* About `us` microseconds of work, on the clock the workers share. */
static void spin(double us) {
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    do clock_gettime(CLOCK_MONOTONIC, &now);
    while ((now.tv_sec - start.tv_sec) * 1e6 + (now.tv_nsec - start.tv_nsec) / 1e3 < us);
}

enum { BURST = 100 };
static int ran_by[BURST + 1]; /* the worker that ran each task, in push order */

static void work(void *buffers[], void *arg) {
    (void)buffers;
    int order;
    starpu_codelet_unpack_args(arg, &order);
    ran_by[order] = starpu_worker_get_id();
    spin(200);
}

static struct starpu_codelet reader = {.cpu_funcs = {work}, .nbuffers = 1, .modes = {STARPU_R}, .name = "reader"};

int main(void) {
    struct starpu_conf conf;
    starpu_conf_init(&conf);
    conf.sched_policy = &pbs_starpu_policy;
    conf.ncpus = 2;
    if (starpu_init(&conf)) return 77;
    double cell[2] = {0, 0};
    starpu_data_handle_t h[2];
    for (int i = 0; i < 2; i++) starpu_variable_data_register(&h[i], STARPU_MAIN_RAM, (uintptr_t)&cell[i], sizeof cell[i]);
    if (pbs_starpu_declare_grid(2, 1, h, 2)) return 1;
    int first = 0;
    if (starpu_task_insert(&reader, STARPU_R, h[0], STARPU_VALUE, &first, sizeof first, 0)) return 1;
    starpu_task_wait_for_all();
    spin(5000);
    for (int i = 1; i <= BURST; i++)
        if (starpu_task_insert(&reader, STARPU_R, h[0], STARPU_VALUE, &i, sizeof i, 0)) return 1;
    starpu_task_wait_for_all();
    struct pbs_starpu_stats stats;
    pbs_starpu_get_stats(&stats);
    for (int i = 0; i < 2; i++) starpu_data_unregister(h[i]);
    starpu_shutdown();
    printf("stolen %zu of %d\n", stats.stolen, BURST + 1);
    /* The first task ran alone on its owner (a queue of one is not stolen from). */
    double sum[2] = {0, 0};
    int n[2] = {0, 0};
    for (int i = 1; i <= BURST; i++) {
        int thief = ran_by[i] != ran_by[0];
        sum[thief] += i, n[thief]++;
    }
    printf("pushed order: owner %.1f, thief %.1f\n", n[0] ? sum[0] / n[0] : 0.0, n[1] ? sum[1] / n[1] : 0.0);
    return 0;
}
