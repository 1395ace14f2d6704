/*
 * The pbs policy on bad declarations and undeclared tasks: each is reported on stderr and every
 * task still runs once. Prints "tasks run N of M" and the policy's count of tasks without a box,
 * for starpu.rs in bench/tests to check; exits non-zero if a declaration that must fail did not.
 * With stealing off (PBS_STEAL=never, which starpu.rs sets), whether a task that reads one box
 * and writes another runs on the written box's owner ("box rule: A of B"); then, in a second
 * StarPU session that declares nothing, how many tasks had no box ("undeclared: without a box
 * N of M": only those with no handle; a task that only reads has its first handle's box).
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

static _Atomic int ran_on;

static void where(void *buffers[], void *arg) {
    (void)buffers;
    (void)arg;
    atomic_store(&ran_on, starpu_worker_get_id());
}

static struct starpu_codelet write_box = {.cpu_funcs = {where}, .nbuffers = 1, .modes = {STARPU_W}, .name = "write"};
static struct starpu_codelet read_then_write = {
    .cpu_funcs = {where}, .nbuffers = 2, .modes = {STARPU_R, STARPU_W}, .name = "read_then_write"};
static struct starpu_codelet read_box = {.cpu_funcs = {count}, .nbuffers = 1, .modes = {STARPU_R}, .name = "read"};

/* The worker that ran a task of `cl` on handles a (and b), waited for. */
static int run_on(struct starpu_codelet *cl, starpu_data_handle_t a, starpu_data_handle_t b) {
    int status = b ? starpu_task_insert(cl, STARPU_R, a, STARPU_W, b, 0) : starpu_task_insert(cl, STARPU_W, a, 0);
    if (status) return -1;
    starpu_task_wait_for_all();
    return atomic_load(&ran_on);
}

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
    /* No boxes: nx * ny = 0 divided the count. */
    failures += pbs_starpu_declare_grid(0, 4, h, 16) != -EINVAL;
    failures += pbs_starpu_declare_grid(4, 0, h, 16) != -EINVAL;
    /* A grid whose nx * ny wraps to 0 (it divided the count by zero), or passes 2^32 - 1 boxes. */
    failures += pbs_starpu_declare_grid((size_t)1 << 32, (size_t)1 << 32, h, N) != -EINVAL;
    failures += pbs_starpu_declare_grid((size_t)1 << 31, 2, h, N) != -EINVAL;
    /* In 3D: no layers, a count that is not a multiple of the boxes, more than 2^32 - 1 boxes
       (nx * ny fits, times nz it does not), and a product that wraps to 0 (2^31 x 2^33). */
    failures += pbs_starpu_declare_grid_3d(4, 4, 0, h, 16) != -EINVAL;
    failures += pbs_starpu_declare_grid_3d(2, 2, 2, h, 12) != -EINVAL;
    failures += pbs_starpu_declare_grid_3d((size_t)1 << 16, (size_t)1 << 15, 2, h, N) != -EINVAL;
    failures += pbs_starpu_declare_grid_3d((size_t)1 << 16, (size_t)1 << 15, (size_t)1 << 33, h, N) != -EINVAL;
    /* The same handle for two boxes (h[0] again in place of h[5]): declared, h[0] stays box 0. */
    starpu_data_handle_t twice[N];
    for (int i = 0; i < N; i++) twice[i] = h[i];
    twice[5] = h[0];
    failures += pbs_starpu_declare_grid(4, 4, twice, N) != -EINVAL;
    /* A second grid: refused, the first stays. */
    failures += pbs_starpu_declare_grid(2, 2, h, 4) != -EINVAL;
    failures += pbs_starpu_declare_grid_3d(2, 2, 2, h, 8) != -EINVAL;
    struct pbs_starpu_stats stats;
    failures += pbs_starpu_get_stats(NULL) != -EINVAL;

    /* A task's box is its first written declared handle, wherever it lists its reads: a task
       reading box a and writing box b runs where b's tasks run, not a's. Checked on the first
       mapping: the mapper sees no load before its third iteration of 16 box tasks, and this
       runs 24. */
    int owner[N] = {0}, agree = 0, pairs = 0;
    for (int b = 1; b < N; b++)
        if (b != 5 && (owner[b] = run_on(&write_box, h[b], NULL)) < 0) return 1; /* h[5] is not declared */
    for (int a = 1; a < N && pairs < 10; a++)
        for (int b = 1; b < N && pairs < 10; b++) {
            if (a == 5 || b == 5 || owner[a] == owner[b]) continue;
            int ran_where = run_on(&read_then_write, h[a], h[b]);
            if (ran_where < 0) return 1;
            pairs++;
            agree += ran_where == owner[b];
        }
    printf("box rule: %d of %d\n", agree, pairs);

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
    printf("tasks run %d of %d; without a box %zu\n", (int)ran, submitted, stats.unboxed);

    for (int i = 0; i <= N; i++) starpu_data_unregister(h[i]);
    starpu_shutdown();

    /* A second session, which declares nothing: the policy numbers the handles itself. Tasks
       that only read have their handle's box; tasks with no handle have none. */
    if (starpu_init(&conf)) return 77;
    for (int i = 0; i <= N; i++) starpu_variable_data_register(&h[i], STARPU_MAIN_RAM, (uintptr_t)&cell[i], sizeof cell[i]);
    int bare_tasks = 0, tasks = 0;
    /* Five iterations over 9 of the handles (the mapper's grid: 9 boxes, measured from the
       third), then three over all 17: the grid grew, and the policy's iterations go on over a
       new mapper. */
    for (int it = 0; it < 5; it++)
        for (int i = 0; i < 9; i++, tasks++)
            if (starpu_task_insert(&touch, STARPU_RW, h[i], 0)) return 1;
    starpu_task_wait_for_all();
    pbs_starpu_get_stats(&stats);
    size_t before_growth = stats.iterations;
    for (int it = 0; it < 3; it++) {
        for (int i = 0; i <= N; i++, tasks++)
            if (starpu_task_insert(i % 2 ? &read_box : &touch, i % 2 ? STARPU_R : STARPU_RW, h[i], 0)) return 1;
        if (starpu_task_insert(&bare, 0)) return 1;
        tasks++, bare_tasks++;
    }
    starpu_task_wait_for_all();
    pbs_starpu_get_stats(&stats);
    for (int i = 0; i <= N; i++) starpu_data_unregister(h[i]);
    starpu_shutdown();
    printf("undeclared: without a box %zu of %d (%d with no handle); iterations %zu, then %zu\n", stats.unboxed, tasks,
           bare_tasks, before_growth, stats.iterations);
    return failures ? 1 : 0;
}
