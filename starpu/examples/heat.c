/*
 * The heat code of ffi/examples/heat.c as StarPU tasks: Jacobi heat diffusion on NX x NY boxes of
 * S x S cells, insulated walls, a hot square in one corner, each box doing extra work in
 * proportion to its temperature (so the load follows the heat). One task per box per iteration;
 * each box has two data handles (the field before and after the sweep), the task writes its
 * box's new tile and reads the old tiles of its box and its face neighbours; StarPU derives the
 * dependencies. The same operands in the same order as ffi/examples/heat.c: the same checksum.
 *
 *   starpu/build.sh
 *   target/starpu/heat [--sched pbs|eager|ws|lws|dmda|prio|...] [--workers 2] [--iters 200]
 *                      [--nx 32] [--ny 32] [--side 16] [--hot 100] [--load corner|uniform]
 *                      [--barrier 0|1] [--window W] [--empty 0|1] [--trace FILE]
 *
 * Tasks are submitted as StarPU programs do, ahead of their execution (all of them, or at most
 * W iterations' worth with --window W), so iterations overlap where their dependencies allow;
 * an iteration's time is the time between the completions of its last task and the previous
 * iteration's. --barrier 1
 * waits for every task after each iteration instead (submission then alternates with
 * execution). --empty 1 makes the task return at once (the policies' overhead per task; the
 * checksum is then that of the starting field).
 *
 * --sched pbs selects pbs_starpu_policy (conf.sched_policy); any other name is passed to StarPU
 * (conf.sched_policy_name). --trace writes "worker box" for every task in the order tasks
 * started, for `pbs-bench starpu` to derive affinity and modelled cache misses. Prints one line
 * of key=value pairs: the median and mean iteration time, the mean efficiency (sum of task
 * times / workers / wall), the policy's figures under pbs, and the checksum.
 */
#define _GNU_SOURCE /* StarPU's headers use pthread rwlocks and barriers */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <starpu.h>

#include "pbs_starpu.h"

static size_t NX = 32, NY = 32, S = 16;
static double *sink;                /* the extra work's results, so that it is really done */
static double busy[STARPU_NMAXWORKERS]; /* task time per worker in the iteration (ms) */
static _Atomic int failed_box = -1; /* a box whose heat is not finite */
static _Atomic size_t seq;          /* tasks started so far: the trace's order */
static _Atomic size_t *completed;   /* per iteration: tasks done */
static double *finished;            /* per iteration: when its last task ended (ms) */
static int empty;                   /* --empty: tasks return at once */
static uint16_t *trace_worker;      /* per task started: worker */
static uint32_t *trace_box;         /* per task started: box */

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Which buffer of a task holds each face neighbour's old tile (left, right, below, above); -1
   at a wall. Buffer 0 is the box's new tile, buffer 1 its old tile. */
struct box_arg {
    size_t k;
    long it;
    int face[4];
};

/* Cell (x, y) of the domain in the old field, walls mirrored, from the task's tiles. */
static double at(void *buffers[], const struct box_arg *a, long x, long y) {
    long w = (long)(NX * S), h = (long)(NY * S);
    if (x < 0) x = 0;
    if (y < 0) y = 0;
    if (x >= w) x = w - 1;
    if (y >= h) y = h - 1;
    size_t bx = (size_t)x / S, by = (size_t)y / S, kx = a->k % NX, ky = a->k / NX;
    int buffer = 1;
    if (bx + 1 == kx) buffer = a->face[0];
    else if (bx == kx + 1) buffer = a->face[1];
    else if (by + 1 == ky) buffer = a->face[2];
    else if (by == ky + 1) buffer = a->face[3];
    const double *tile = (const double *)STARPU_VECTOR_GET_PTR(buffers[buffer]);
    return tile[((size_t)y % S) * S + (size_t)x % S];
}

static void jacobi_box(void *buffers[], void *cl_arg) {
    double t0 = now_ms();
    const struct box_arg *a = cl_arg;
    int me = starpu_worker_get_id();
    size_t order = atomic_fetch_add(&seq, 1);
    if (trace_worker) trace_worker[order] = (uint16_t)me, trace_box[order] = (uint32_t)a->k;
    size_t k = a->k, bx = k % NX, by = k / NX;
    if (empty) {
        if (atomic_fetch_add(&completed[a->it], 1) + 1 == NX * NY) finished[a->it] = now_ms();
        return;
    }
    double *n = (double *)STARPU_VECTOR_GET_PTR(buffers[0]);
    const double *o = (const double *)STARPU_VECTOR_GET_PTR(buffers[1]);
    double heat = 0.0;
    for (size_t y = 0; y < S; y++)
        for (size_t x = 0; x < S; x++) {
            long gx = (long)(bx * S + x), gy = (long)(by * S + y);
            double v;
            if (x > 0 && y > 0 && x + 1 < S && y + 1 < S)
                v = 0.25 * (o[y * S + x - 1] + o[y * S + x + 1] + o[(y - 1) * S + x] + o[(y + 1) * S + x]);
            else
                v = 0.25 * (at(buffers, a, gx - 1, gy) + at(buffers, a, gx + 1, gy) + at(buffers, a, gx, gy - 1) +
                            at(buffers, a, gx, gy + 1));
            n[y * S + x] = v;
            heat += v;
        }
    double z = 0.5;
    long units = (long)(20.0 * heat / (double)(S * S));
    for (long u = 0; u < units; u++) z = 3.9 * z * (1.0 - z);
    sink[k] = z;
    if (!isfinite(heat)) {
        int none = -1;
        atomic_compare_exchange_strong(&failed_box, &none, (int)k);
    }
    double t1 = now_ms();
    if (me >= 0) busy[me] += t1 - t0;
    if (atomic_fetch_add(&completed[a->it], 1) + 1 == NX * NY) finished[a->it] = t1;
}

static struct starpu_perfmodel model = {.type = STARPU_HISTORY_BASED, .symbol = "pbs_starpu_heat"};

static struct starpu_codelet sweep = {
    .cpu_funcs = {jacobi_box},
    .cpu_funcs_name = {"jacobi_box"},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &model,
    .name = "heat_sweep",
};

static int by_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int usage(const char *message) {
    fprintf(stderr,
            "heat: %s\nusage: heat [--sched NAME] [--workers N] [--iters K] [--nx N] [--ny N] [--side S] "
            "[--hot T] [--load corner|uniform] [--barrier 0|1] [--window W] [--empty 0|1] [--trace FILE]\n",
            message);
    return 2;
}

int main(int argc, char **argv) {
    const char *sched = "pbs", *load = "corner", *trace_path = NULL;
    long workers = 2, iterations = 200, barrier = 0, window = 0;
    double hot = 100.0;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return usage("an option without its value");
        i++;
        char *end = NULL;
        if (!strcmp(k, "--sched")) sched = v;
        else if (!strcmp(k, "--load")) load = v;
        else if (!strcmp(k, "--trace")) trace_path = v;
        else if (!strcmp(k, "--hot")) hot = strtod(v, &end);
        else {
            long x = strtol(v, &end, 10);
            if (!strcmp(k, "--workers")) workers = x;
            else if (!strcmp(k, "--iters")) iterations = x;
            else if (!strcmp(k, "--nx")) NX = (size_t)x;
            else if (!strcmp(k, "--ny")) NY = (size_t)x;
            else if (!strcmp(k, "--side")) S = (size_t)x;
            else if (!strcmp(k, "--barrier")) barrier = x;
            else if (!strcmp(k, "--window")) window = x;
            else if (!strcmp(k, "--empty")) empty = (int)x;
            else return usage("unknown option");
            if (x < 0) return usage("a negative size");
        }
        if (end && *end) return usage("a value that is not a number");
    }
    int uniform = !strcmp(load, "uniform");
    if (workers < 1 || iterations < 0 || NX < 1 || NY < 1 || S < 3 || (!uniform && strcmp(load, "corner")))
        return usage("workers >= 1, iterations >= 0, nx, ny >= 1, side >= 3, load corner or uniform");
    const char *env = getenv("STARPU_SCHED");
    if (env && strcmp(env, sched))
        return usage("STARPU_SCHED names another policy than --sched: unset it or make them agree");

    /* A name StarPU does not know would silently give its default policy: refuse it. */
    int known = !strcmp(sched, "pbs");
    for (struct starpu_sched_policy **p = starpu_sched_get_predefined_policies(); !known && *p; p++)
        known = (*p)->policy_name && !strcmp((*p)->policy_name, sched);
    if (!known) {
        fprintf(stderr, "heat: StarPU has no policy named %s; it has pbs (ours) and:", sched);
        for (struct starpu_sched_policy **p = starpu_sched_get_predefined_policies(); *p; p++)
            if ((*p)->policy_name) fprintf(stderr, " %s", (*p)->policy_name);
        fprintf(stderr, "\n");
        return 2;
    }

    struct starpu_conf conf;
    starpu_conf_init(&conf);
    conf.ncpus = (int)workers;
    conf.ncuda = conf.nopencl = 0;
    if (!strcmp(sched, "pbs")) conf.sched_policy = &pbs_starpu_policy;
    else conf.sched_policy_name = sched;
    int ret = starpu_init(&conf);
    if (ret) {
        fprintf(stderr, "heat: starpu_init failed (%s)\n", strerror(-ret));
        return 1;
    }

    size_t boxes = NX * NY, tasks = boxes * (size_t)iterations;
    double *tile[2];
    starpu_data_handle_t *handle = malloc(2 * boxes * sizeof *handle);
    sink = calloc(boxes, sizeof *sink);
    double *iter_ms = malloc(((size_t)iterations + 1) * sizeof *iter_ms);
    completed = calloc((size_t)iterations + 1, sizeof *completed);
    finished = calloc((size_t)iterations + 1, sizeof *finished);
    tile[0] = malloc(boxes * S * S * sizeof(double));
    tile[1] = malloc(boxes * S * S * sizeof(double));
    if (trace_path) {
        trace_worker = malloc((tasks + 1) * sizeof *trace_worker);
        trace_box = malloc((tasks + 1) * sizeof *trace_box);
    }
    if (!handle || !completed || !finished || !sink || !iter_ms || !tile[0] || !tile[1] ||
        (trace_path && (!trace_worker || !trace_box))) {
        fprintf(stderr, "heat: out of memory for %zu boxes of %zu cells\n", boxes, S * S);
        return 1;
    }
    for (size_t k = 0; k < boxes; k++) {
        int hot_box = uniform || (k % NX < NX / 4 && k / NX < NY / 4);
        for (int b = 0; b < 2; b++) {
            double *t = tile[b] + k * S * S;
            for (size_t c = 0; c < S * S; c++) t[c] = hot_box ? hot : 0.0;
            starpu_vector_data_register(&handle[b * boxes + k], STARPU_MAIN_RAM, (uintptr_t)t, S * S,
                                        sizeof(double));
        }
    }
    /* Which handle is which box: both buffers of box k are box k. */
    pbs_starpu_declare_grid(NX, NY, handle, 2 * boxes);

    double start = now_ms(), efficiency = 0.0;
    for (long it = 0; it < iterations; it++) {
        int from = (int)(it % 2), to = 1 - from;
        for (size_t k = 0; k < boxes; k++) {
            size_t kx = k % NX, ky = k / NX;
            long neighbour[4] = {kx > 0 ? (long)k - 1 : -1, kx + 1 < NX ? (long)k + 1 : -1,
                                 ky > 0 ? (long)(k - NX) : -1, ky + 1 < NY ? (long)(k + NX) : -1};
            struct starpu_data_descr descr[6];
            int n = 0;
            descr[n++] = (struct starpu_data_descr){handle[to * boxes + k], STARPU_W};
            descr[n++] = (struct starpu_data_descr){handle[from * boxes + k], STARPU_R};
            struct box_arg *arg = malloc(sizeof *arg); /* StarPU frees it with the task */
            if (!arg) {
                fprintf(stderr, "heat: out of memory for a task\n");
                return 1;
            }
            arg->k = k;
            arg->it = it;
            for (int d = 0; d < 4; d++) {
                arg->face[d] = neighbour[d] < 0 ? -1 : n;
                if (neighbour[d] >= 0)
                    descr[n++] = (struct starpu_data_descr){handle[from * boxes + (size_t)neighbour[d]], STARPU_R};
            }
            ret = starpu_task_insert(&sweep, STARPU_DATA_MODE_ARRAY, descr, n, STARPU_CL_ARGS, arg, sizeof *arg, 0);
            if (ret) {
                fprintf(stderr, "heat: task submission failed (%s)\n", strerror(-ret));
                return 1;
            }
        }
        if (barrier) {
            starpu_task_wait_for_all();
            double task_ms = 0.0;
            for (int w = 0; w < STARPU_NMAXWORKERS; w++) task_ms += busy[w], busy[w] = 0.0;
            double wall = finished[it] - (it ? finished[it - 1] : start);
            efficiency += wall > 0 ? task_ms / ((double)workers * wall) : 1.0;
        } else if (window && it >= window) {
            starpu_task_wait_for_n_submitted((unsigned)((size_t)window * boxes));
        }
    }
    starpu_task_wait_for_all();
    if (!barrier) { /* the whole run's: task time over the workers' time */
        double task_ms = 0.0;
        for (int w = 0; w < STARPU_NMAXWORKERS; w++) task_ms += busy[w];
        double wall = now_ms() - start;
        efficiency = wall > 0 ? task_ms / ((double)workers * wall) : 1.0;
    } else if (iterations) {
        efficiency /= (double)iterations;
    }
    for (long it = 0; it < iterations; it++) iter_ms[it] = finished[it] - (it ? finished[it - 1] : start);
    double ms = now_ms() - start;

    struct pbs_starpu_stats stats = {0};
    int is_pbs = !strcmp(sched, "pbs");
    if (is_pbs) pbs_starpu_get_stats(&stats);
    for (size_t i = 0; i < 2 * boxes; i++) starpu_data_unregister(handle[i]);
    starpu_shutdown();

    if (failed_box >= 0) {
        fprintf(stderr, "heat: box %d's heat is not a finite number\n", (int)failed_box);
        return 1;
    }
    int last = (int)(iterations % 2);
    uint64_t h = 0xcbf29ce484222325ull, bits;
    double total = 0.0, diag_sum = 0.0;
    for (size_t k = 0; k < boxes; k++)
        for (size_t c = 0; c < S * S; c++) {
            double v = tile[last][k * S * S + c];
            memcpy(&bits, &v, sizeof bits);
            h = (h ^ bits) * 0x100000001b3ull;
            total += v;
        }
    memcpy(&bits, &diag_sum, sizeof bits);
    h = (h ^ bits) * 0x100000001b3ull;

    double mean = 0.0, median = 0.0;
    if (iterations) {
        for (long it = 0; it < iterations; it++) mean += iter_ms[it];
        mean /= (double)iterations;
        qsort(iter_ms, (size_t)iterations, sizeof *iter_ms, by_double);
        median = iterations % 2 ? iter_ms[iterations / 2]
                                : 0.5 * (iter_ms[iterations / 2 - 1] + iter_ms[iterations / 2]);
    }
    if (trace_path) {
        FILE *t = fopen(trace_path, "w");
        if (!t) {
            fprintf(stderr, "heat: cannot write the trace %s (%s)\n", trace_path, strerror(errno));
            return 1;
        }
        for (size_t i = 0; i < tasks; i++) fprintf(t, "%u %u\n", (unsigned)trace_worker[i], (unsigned)trace_box[i]);
        fclose(t);
    }
    printf("heat: sched=%s workers=%ld iterations=%ld boxes=%zux%zu iter_ms_median=%.5f iter_ms_mean=%.5f "
           "efficiency=%.4f rebalancings=%zu migrations=%zu stolen=%zu checksum=%016llx total_heat=%.9e wall_ms=%.3f\n",
           sched, workers, iterations, NX, NY, median, mean, efficiency, stats.rebalancings, stats.migrations,
           stats.stolen, (unsigned long long)h, total, ms);
    free(handle), free(completed), free(finished), free(sink), free(iter_ms), free(tile[0]), free(tile[1]);
    free(trace_worker), free(trace_box);
    return 0;
}
