/* The driver every example program of starpu/examples shares: see driver.h. */
#define _GNU_SOURCE /* StarPU's headers use pthread rwlocks and barriers */
#include "driver.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pbs_starpu.h"

size_t pbs_example_nx = 32, pbs_example_ny = 32, pbs_example_nz = 1;

#define TEXT_OF(x) #x
#define TEXT(x) TEXT_OF(x) /* a macro's value as a string literal */

static double busy[STARPU_NMAXWORKERS]; /* task time per worker (ms) */
static _Atomic size_t seq;              /* tasks started so far: the trace's order */
static _Atomic size_t *completed;       /* per iteration: tasks done */
static double *finished;                /* per iteration: when its last task ended (ms) */
static int empty;                       /* --empty: tasks return at once */
static uint16_t *trace_worker;          /* per task started: worker */
static uint32_t *trace_box;             /* per task started: box */

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void count_done(long it, double t) {
    if (atomic_fetch_add(&completed[it], 1) + 1 == pbs_example_nx * pbs_example_ny * pbs_example_nz) finished[it] = t;
}

double pbs_example_task_begin(size_t k, long it) {
    double t0 = now_ms();
    size_t order = atomic_fetch_add(&seq, 1);
    if (trace_worker) trace_worker[order] = (uint16_t)starpu_worker_get_id(), trace_box[order] = (uint32_t)k;
    if (empty) {
        count_done(it, t0);
        return -1.0;
    }
    return t0;
}

void pbs_example_task_end(long it, double t0) {
    double t1 = now_ms();
    int me = starpu_worker_get_id();
    if (me >= 0) busy[me] += t1 - t0; /* a worker runs one task at a time: its own slot */
    count_done(it, t1);
}

static int by_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The options, on `out`. */
static void print_usage(FILE *out, const struct pbs_example *app) {
    fprintf(out,
            "usage: %s [--sched NAME] [--workers N] [--iters K] [--nx N] [--ny N] [--nz N] [--barrier 0|1] "
            "[--window W] [--empty 0|1] [--hint-iterations 0|1] [--declare 0|1] [--submit-us U] [--trace FILE] %s\n",
            app->name, app->usage);
}

static int usage(const struct pbs_example *app, const char *message) {
    fprintf(stderr, "%s: %s\n", app->name, message);
    print_usage(stderr, app);
    return 2;
}

/* A name StarPU does not know would silently give its default policy: refuse it. */
static int known_policy(const struct pbs_example *app, const char *sched) {
    int known = !strcmp(sched, "pbs");
    for (struct starpu_sched_policy **p = starpu_sched_get_predefined_policies(); !known && *p; p++)
        known = (*p)->policy_name && !strcmp((*p)->policy_name, sched);
    if (!known) {
        fprintf(stderr, "%s: StarPU has no policy named %s; it has pbs (ours) and:", app->name, sched);
        for (struct starpu_sched_policy **p = starpu_sched_get_predefined_policies(); *p; p++)
            if ((*p)->policy_name) fprintf(stderr, " %s", (*p)->policy_name);
        fprintf(stderr, "\n");
    }
    return known;
}

static int write_trace(const struct pbs_example *app, const char *path, size_t tasks) {
    FILE *t = fopen(path, "w");
    if (!t) {
        fprintf(stderr, "%s: cannot write the trace %s (%s)\n", app->name, path, strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < tasks; i++) fprintf(t, "%u %u\n", (unsigned)trace_worker[i], (unsigned)trace_box[i]);
    return fclose(t) ? -1 : 0;
}

int pbs_example_main(const struct pbs_example *app, int argc, char **argv) {
    const char *sched = "pbs", *trace_path = NULL;
    long workers = 2, iterations = 200, barrier = 0, window = 0, hint = 1, declare = 1, submit_us = 0;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(k, "--help") || !strcmp(k, "-h")) {
            print_usage(stdout, app);
            return 0;
        }
        if (!v) return usage(app, "an option without its value");
        i++;
        int own = app->option(k, v);
        if (own < 0) return 2;
        if (own) continue;
        char *end = NULL;
        if (!strcmp(k, "--sched")) sched = v;
        else if (!strcmp(k, "--trace")) trace_path = v;
        else {
            errno = 0;
            long x = strtol(v, &end, 10);
            /* Past a long, strtol gives LONG_MAX: a pause of that many µs never ended. */
            if (errno == ERANGE) {
                char message[160];
                snprintf(message, sizeof message, "%s %.40s: a value out of range", k, v);
                return usage(app, message);
            }
            if (!strcmp(k, "--workers")) workers = x;
            else if (!strcmp(k, "--iters")) iterations = x;
            else if (!strcmp(k, "--nx")) pbs_example_nx = (size_t)x;
            else if (!strcmp(k, "--ny")) pbs_example_ny = (size_t)x;
            else if (!strcmp(k, "--nz")) pbs_example_nz = (size_t)x;
            else if (!strcmp(k, "--barrier")) barrier = x;
            else if (!strcmp(k, "--window")) window = x;
            else if (!strcmp(k, "--empty")) empty = (int)x;
            else if (!strcmp(k, "--hint-iterations")) hint = x;
            else if (!strcmp(k, "--declare")) declare = x;
            else if (!strcmp(k, "--submit-us")) submit_us = x;
            else return usage(app, "unknown option");
            if (x < 0) return usage(app, "a negative size");
            if (!strcmp(k, "--submit-us") && x > 1000000) return usage(app, "--submit-us at most 1000000 (a second a task)");
        }
        if (end && *end) return usage(app, "a value that is not a number");
    }
    size_t nx = pbs_example_nx, ny = pbs_example_ny, nz = pbs_example_nz;
    if (workers < 1 || workers > STARPU_NMAXWORKERS || iterations < 0 || nx < 1 || ny < 1 || nz < 1)
        return usage(app, "workers from 1 to " TEXT(STARPU_NMAXWORKERS) " (this StarPU's most), iterations >= 0, "
                          "nx, ny, nz >= 1");
    /* Sizes whose products (handles, tasks, trace entries) would wrap around. */
    if (nx > UINT32_MAX / ny || nx * ny > UINT32_MAX / nz ||
        (iterations && nx * ny * nz > SIZE_MAX / 16 / (size_t)iterations))
        return usage(app, "nx x ny x nz x iterations too large to count");
    const char *env = getenv("STARPU_SCHED");
    if (env && strcmp(env, sched))
        return usage(app, "STARPU_SCHED names another policy than --sched: unset it or make them agree");
    if (!known_policy(app, sched)) return 2;

    struct starpu_conf conf;
    starpu_conf_init(&conf);
    conf.ncpus = (int)workers;
    conf.ncuda = conf.nopencl = 0;
    if (!strcmp(sched, "pbs")) conf.sched_policy = &pbs_starpu_policy;
    else conf.sched_policy_name = sched;
    int ret = starpu_init(&conf);
    if (ret) {
        fprintf(stderr, "%s: starpu_init failed (%s)\n", app->name, strerror(-ret));
        return 1;
    }

    size_t boxes = nx * ny * nz, tasks = boxes * (size_t)iterations;
    starpu_data_handle_t *handle = malloc(2 * boxes * sizeof *handle);
    double *iter_ms = malloc(((size_t)iterations + 1) * sizeof *iter_ms);
    completed = calloc((size_t)iterations + 1, sizeof *completed);
    finished = calloc((size_t)iterations + 1, sizeof *finished);
    if (trace_path) {
        trace_worker = malloc((tasks + 1) * sizeof *trace_worker);
        trace_box = malloc((tasks + 1) * sizeof *trace_box);
    }
    if (!handle || !completed || !finished || !iter_ms || (trace_path && (!trace_worker || !trace_box))) {
        fprintf(stderr, "%s: out of memory for %zu boxes and %ld iterations\n", app->name, boxes, iterations);
        return 1;
    }
    if (app->setup(nx, ny, handle)) return 1;
    /* Which handle is which box: both handles of box k are box k. */
    if (declare && nz > 1) pbs_starpu_declare_grid_3d(nx, ny, nz, handle, 2 * boxes);
    else if (declare) pbs_starpu_declare_grid(nx, ny, handle, 2 * boxes);
    /* The run's length, so that pbs moves no box after the last iteration. */
    if (hint) pbs_starpu_hint_iterations((size_t)iterations);

    double start = now_ms(), efficiency = 0.0;
    for (long it = 0; it < iterations; it++) {
        starpu_data_handle_t *from = handle + (size_t)(it % 2) * boxes, *to = handle + (size_t)(1 - it % 2) * boxes;
        for (size_t k = 0; k < boxes; k++) {
            if (submit_us) {
                struct timespec pause = {submit_us / 1000000, submit_us % 1000000 * 1000};
                nanosleep(&pause, NULL);
            }
            ret = app->submit(k, it, from, to);
            if (ret) {
                fprintf(stderr, "%s: task submission failed (%s)\n", app->name, strerror(-ret));
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
    if (!strcmp(sched, "pbs")) pbs_starpu_get_stats(&stats);
    for (size_t i = 0; i < 2 * boxes; i++) starpu_data_unregister(handle[i]);
    starpu_shutdown();
    if (app->check(iterations)) return 1;

    double mean = 0.0, median = 0.0;
    if (iterations) {
        for (long it = 0; it < iterations; it++) mean += iter_ms[it];
        mean /= (double)iterations;
        qsort(iter_ms, (size_t)iterations, sizeof *iter_ms, by_double);
        median = iterations % 2 ? iter_ms[iterations / 2]
                                : 0.5 * (iter_ms[iterations / 2 - 1] + iter_ms[iterations / 2]);
    }
    if (trace_path && write_trace(app, trace_path, tasks)) return 1;
    char grid[80];
    if (nz > 1) snprintf(grid, sizeof grid, "%zux%zux%zu", nx, ny, nz);
    else snprintf(grid, sizeof grid, "%zux%zu", nx, ny);
    printf("%s: sched=%s workers=%ld iterations=%ld boxes=%s iter_ms_median=%.5f iter_ms_mean=%.5f "
           "efficiency=%.4f rebalancings=%zu migrations=%zu stolen=%zu checksum=%016llx box_bytes=%llu "
           "halo_bytes=%llu written_bytes=%llu wall_ms=%.3f",
           app->name, sched, workers, iterations, grid, median, mean, efficiency, stats.rebalancings,
           stats.migrations, stats.stolen, (unsigned long long)app->checksum(iterations),
           (unsigned long long)app->box_bytes(), (unsigned long long)app->halo_bytes(),
           (unsigned long long)app->written_bytes(), ms);
    app->print_fields(stdout, iterations);
    printf("\n");
    app->cleanup();
    free(handle), free(completed), free(finished), free(iter_ms), free(trace_worker), free(trace_box);
    return 0;
}
