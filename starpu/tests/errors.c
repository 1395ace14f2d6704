/*
 * The pbs policy on bad declarations and undeclared tasks: each is reported on stderr and every
 * task still runs once. Prints "tasks run N of M" and the policy's count of tasks without a box,
 * for starpu.rs in bench/tests to check; exits non-zero if a declaration that must fail did not.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <starpu.h>

#include "pbs_starpu.h"

static _Atomic int ran;

static void count(void *buffers[], void *arg) {
    (void)buffers;
    (void)arg;
    atomic_fetch_add(&ran, 1);
}

static struct starpu_codelet touch = {.cpu_funcs = {count}, .nbuffers = 1, .modes = {STARPU_RW}, .name = "touch"};
static struct starpu_codelet bare = {.cpu_funcs = {count}, .nbuffers = 0, .name = "bare"};

int main(void) {
    struct starpu_conf conf;
    starpu_conf_init(&conf);
    conf.sched_policy = &pbs_starpu_policy;
    conf.ncpus = 2;
    if (starpu_init(&conf)) return 77;
    enum { N = 16 };
    double cell[N + 1];
    starpu_data_handle_t h[N + 1];
    for (int i = 0; i <= N; i++) starpu_variable_data_register(&h[i], STARPU_MAIN_RAM, (uintptr_t)&cell[i], sizeof cell[i]);

    int failures = 0;
    /* A count that is not a multiple of the grid, a NULL handle array: refused. */
    failures += pbs_starpu_declare_grid(4, 4, h, 15) != -EINVAL;
    failures += pbs_starpu_declare_grid(4, 4, NULL, 16) != -EINVAL;
    /* A grid whose nx * ny wraps to 0 (it divided the count by zero), or passes 2^32 - 1 boxes. */
    failures += pbs_starpu_declare_grid((size_t)1 << 32, (size_t)1 << 32, h, N) != -EINVAL;
    failures += pbs_starpu_declare_grid((size_t)1 << 31, 2, h, N) != -EINVAL;
    /* The same handle for two boxes (h[0] again in place of h[5]): declared, h[0] stays box 0. */
    starpu_data_handle_t twice[N];
    for (int i = 0; i < N; i++) twice[i] = h[i];
    twice[5] = h[0];
    failures += pbs_starpu_declare_grid(4, 4, twice, N) != -EINVAL;
    /* A second grid: refused, the first stays. */
    failures += pbs_starpu_declare_grid(2, 2, h, 4) != -EINVAL;
    struct pbs_starpu_stats stats;
    failures += pbs_starpu_get_stats(NULL) != -EINVAL;

    int submitted = 0;
    for (int it = 0; it < 5; it++) {
        for (int i = 0; i <= N; i++) { /* h[5] and h[N] were never declared */
            if (starpu_task_insert(&touch, STARPU_RW, h[i], 0)) return 1;
            submitted++;
        }
        if (starpu_task_insert(&bare, 0)) return 1;
        submitted++;
    }
    starpu_task_wait_for_all();
    pbs_starpu_get_stats(&stats);
    for (int i = 0; i <= N; i++) starpu_data_unregister(h[i]);
    starpu_shutdown();
    printf("tasks run %d of %d; without a box %zu\n", (int)ran, submitted, stats.unboxed);
    return failures ? 1 : 0;
}
