/*
 * A grid code in C on the pbs runtime: Jacobi heat diffusion on NX x NY boxes of S x S cells,
 * insulated walls, a hot square in one corner. Each box also does extra work in proportion to
 * its temperature, so the load spreads with the heat and the "pbs" scheduler has something to
 * follow. Box data are allocated and first-touched by the worker that will run the box.
 *
 *   cargo build --release -p pbs-ffi
 *   cc -std=c11 -O2 [-fopenmp] -Iffi/include ffi/examples/heat.c -Ltarget/release -lpbs_ffi \
 *      -Wl,-rpath,$PWD/target/release -o heat
 *   ./heat [scheduler=pbs] [threads=0: all cores] [iterations=200] [nx=32] [ny=32] [side=16]
 *          [hot=100: the hot square's temperature; nan shows how a failing task is reported]
 *          [pin=0|1|2] [load=corner|uniform] [diag=none|pbs|omp]
 *
 * scheduler: pbs, ws, eager or static (pbs.h); built with -fopenmp also omp-static,
 * omp-dynamic or omp-guided, with an optional chunk (omp-dynamic:4): the same task over the
 * boxes in an OpenMP loop, for comparison. load=uniform starts the whole domain at `hot`, so
 * every box costs the same for ever. diag adds a second loop per iteration (each box's hottest
 * cell, summed in box order into the checksum) run as a pbs phase or, with -fopenmp, as an
 * OpenMP loop between pbs's phases: a program that mixes both runtimes.
 *
 * Prints the time per iteration, the mean phase efficiency (sum of task times / threads / wall),
 * the rebalancings (in all, and from iteration 10 on, beside the iterations from 10 on whose
 * threads measured over 5 % apart), and a checksum of the final field: the same under every
 * scheduler and thread count, since each task reads the previous field and writes its own box.
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "arguments.h"
#include "pbs.h"

typedef struct {
    size_t nx, ny, s;      /* boxes along x and y, cells per box side */
    double **old, **new;   /* one tile of s*s cells per box, in both buffers */
    double *sink;          /* the extra work's results, so that it is really done */
    double *hottest;       /* diag: each box's hottest cell */
    const uint32_t *owner; /* who first-touches each box (NULL: the main thread did) */
    double hot;            /* starting temperature of the hot square */
    int uniform;           /* the whole domain starts at `hot` */
    atomic_int no_memory;  /* set by a thread whose tiles could not be allocated */
} field;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Cell (x, y) of the whole domain in the previous field; walls mirror (insulated). */
static double at(const field *f, long x, long y) {
    long w = (long)(f->nx * f->s), h = (long)(f->ny * f->s);
    if (x < 0) x = 0;
    if (y < 0) y = 0;
    if (x >= w) x = w - 1;
    if (y >= h) y = h - 1;
    size_t bx = (size_t)x / f->s, by = (size_t)y / f->s;
    return f->old[by * f->nx + bx][((size_t)y % f->s) * f->s + (size_t)x % f->s];
}

/* The task: one Jacobi sweep over box k, reading the old field, writing box k only. Returns 0,
   or 1 if the box's heat is not a finite number (the phase then fails, naming the box). */
static int jacobi_box(void *ctx, size_t k) {
    field *f = ctx;
    size_t s = f->s, bx = k % f->nx, by = k / f->nx;
    const double *o = f->old[k];
    double *n = f->new[k], heat = 0.0;
    for (size_t y = 0; y < s; y++)
        for (size_t x = 0; x < s; x++) {
            long gx = (long)(bx * s + x), gy = (long)(by * s + y);
            double v;
            if (x > 0 && y > 0 && x + 1 < s && y + 1 < s) /* interior: own tile only */
                v = 0.25 * (o[y * s + x - 1] + o[y * s + x + 1] + o[(y - 1) * s + x] + o[(y + 1) * s + x]);
            else /* rim: same operands in the same order, some from the neighbours */
                v = 0.25 * (at(f, gx - 1, gy) + at(f, gx + 1, gy) + at(f, gx, gy - 1) + at(f, gx, gy + 1));
            n[y * s + x] = v;
            heat += v;
        }
    /* Extra work in proportion to the box's mean temperature (a hot box is an expensive one).
       None for a temperature that is not finite (hot=nan): converting it to long would be
       undefined behaviour; main keeps hot within 1e6, and no cell gets hotter than that. */
    double z = 0.5;
    long units = isfinite(heat) ? (long)(20.0 * heat / (double)(s * s)) : 0;
    for (long u = 0; u < units; u++) z = 3.9 * z * (1.0 - z);
    f->sink[k] = z;
    return isfinite(heat) ? 0 : 1;
}

/* The diagnostic: box k's hottest cell of the current field. */
static int hottest_cell(void *ctx, size_t k) {
    field *f = ctx;
    double m = -INFINITY;
    for (size_t c = 0; c < f->s * f->s; c++) m = f->old[k][c] > m ? f->old[k][c] : m;
    f->hottest[k] = m;
    return 0;
}

/* Whether box k starts at the hot temperature (else at 0). */
static int starts_hot(const field *f, size_t k) {
    return f->uniform || (k % f->nx < f->nx / 4 && k / f->nx < f->ny / 4);
}

/* Allocates and fills box k's tiles: the first touch, which places its pages. */
static void touch_box(field *f, size_t k) {
    size_t bytes = f->s * f->s * sizeof(double);
    f->old[k] = malloc(bytes);
    f->new[k] = malloc(bytes);
    if (!f->old[k] || !f->new[k]) {
        atomic_store(&f->no_memory, 1); /* reported by main once every thread is done */
        return;
    }
    for (size_t c = 0; c < f->s * f->s; c++) f->old[k][c] = f->new[k][c] = starts_hot(f, k) ? f->hot : 0.0;
}

/* First touch by the workers: each one the boxes it will run (all of them if no owner is known). */
static void touch_own_boxes(void *ctx, size_t worker) {
    field *f = ctx;
    for (size_t k = 0; k < f->nx * f->ny; k++)
        if (!f->owner || f->owner[k] == worker) touch_box(f, k);
}

/* The OpenMP baseline: "omp-static", "omp-dynamic" or "omp-guided", optionally ":chunk". */
typedef struct {
    int on, kind;
    long chunk;
} omp_choice;

static int parse_omp(const char *name, omp_choice *c) {
    if (strncmp(name, "omp-", 4) != 0) return 0;
    const char *kind = name + 4, *colon = strchr(kind, ':');
    size_t len = colon ? (size_t)(colon - kind) : strlen(kind);
    c->on = 1;
    c->chunk = colon ? strtol(colon + 1, NULL, 10) : 0;
    c->kind = len == 6 && !strncmp(kind, "static", 6)    ? 1
              : len == 7 && !strncmp(kind, "dynamic", 7) ? 2
              : len == 6 && !strncmp(kind, "guided", 6)  ? 3
                                                         : 0;
    return 1;
}

#ifdef _OPENMP
/* One OpenMP loop of `task` over the boxes under the runtime schedule; the summed task time of
   every thread goes to *busy_ms (for the efficiency). Returns the lowest failing box + 1, or 0. */
static size_t omp_phase(int (*task)(void *, size_t), field *f, double *busy_ms) {
    size_t boxes = f->nx * f->ny, failed = 0;
    double busy = 0.0;
#pragma omp parallel reduction(+ : busy)
    {
        double t0 = now_ms();
#pragma omp for schedule(runtime) nowait
        for (size_t k = 0; k < boxes; k++)
            if (task(f, k) != 0) {
#pragma omp critical
                if (!failed || k + 1 < failed) failed = k + 1;
            }
        busy = now_ms() - t0;
    }
    *busy_ms = busy;
    return failed;
}
#endif

static const char usage[] =
    "usage: heat [scheduler=pbs] [threads=0: all cores] [iterations=200] [nx=32] [ny=32] [side=16]\n"
    "            [hot=100: the hot square's temperature; nan shows how a failing task is reported]\n"
    "            [pin=0|1|2] [load=corner|uniform] [diag=none|pbs|omp]\n"
    "scheduler: pbs, ws, eager or static; built with -fopenmp also omp-static, omp-dynamic or\n"
    "omp-guided, with an optional chunk (omp-dynamic:4). Jacobi heat diffusion on nx x ny boxes\n"
    "of side x side cells; prints the time per iteration, the phases' efficiency, the\n"
    "rebalancings and a checksum of the final field.\n";

int main(int argc, char **argv) {
    if (arg_help(argc, argv, usage)) return 0;
    const char *positional[7] = {"pbs", "0", "200", "32", "32", "16", "100"};
    int npos = 0, pin = 0;
    const char *load = "corner", *diag = "none";
    unsigned long long n[6]; /* threads, iterations, nx, ny, side, pin */
    for (int a = 1; a < argc; a++) {
        if (!strncmp(argv[a], "pin=", 4)) {
            if (arg_count("heat", "pin", argv[a] + 4, 2, &n[5])) return 2;
            pin = (int)n[5];
        } else if (!strncmp(argv[a], "load=", 5)) load = argv[a] + 5;
        else if (!strncmp(argv[a], "diag=", 5)) diag = argv[a] + 5;
        else if (npos < 7) positional[npos++] = argv[a];
        else {
            fprintf(stderr, "heat: unexpected argument %s\n", argv[a]);
            return 2;
        }
    }
    const char *scheduler = positional[0];
    const char *names[5] = {"threads", "iterations", "nx", "ny", "side"};
    double hot;
    for (int i = 0; i < 5; i++)
        if (arg_count("heat", names[i], positional[i + 1], i == 1 ? LONG_MAX : SIZE_MAX, &n[i])) return 2;
    if (arg_real("heat", "hot", positional[6], &hot)) return 2;
    size_t threads = (size_t)n[0];
    long iterations = (long)n[1];
    field f = {.nx = (size_t)n[2], .ny = (size_t)n[3], .s = (size_t)n[4], .hot = hot, .uniform = !strcmp(load, "uniform")};
    int diag_pbs = !strcmp(diag, "pbs"), diag_omp = !strcmp(diag, "omp");
    /* As pbs's grids: at most 2^32 - 1 boxes (checked here too, for the OpenMP schedules, which
       build no executor: their products wrapped); tiles of at most 65536^2 cells. */
    int sizes_ok = f.nx && f.ny && f.nx <= UINT32_MAX / f.ny && f.s <= 65536;
    if (f.s < 3 || !sizes_ok || (!f.uniform && strcmp(load, "corner")) ||
        (!diag_pbs && !diag_omp && strcmp(diag, "none")) || !(isnan(f.hot) || (f.hot >= 0 && f.hot <= 1e6))) {
        fprintf(stderr, "heat: nx and ny >= 1 with nx * ny <= 2^32 - 1, side from 3 to "
                        "65536, hot from 0 to 1e6 (or nan), load corner or uniform, diag none, pbs or omp\n");
        return 2;
    }
    omp_choice omp = {0, 0, 0};
    if (parse_omp(scheduler, &omp) && omp.kind == 0) {
        fprintf(stderr, "heat: unknown OpenMP schedule %s: expected omp-static, omp-dynamic or omp-guided\n",
                scheduler);
        return 2;
    }
#ifndef _OPENMP
    if (omp.on || diag_omp) {
        fprintf(stderr, "heat: %s needs a build with -fopenmp\n", omp.on ? scheduler : "diag=omp");
        return 2;
    }
#else
    if (omp.on) {
        if (threads) omp_set_num_threads((int)threads);
        omp_set_schedule(omp.kind == 1 ? omp_sched_static : omp.kind == 2 ? omp_sched_dynamic : omp_sched_guided,
                         (int)omp.chunk);
    }
#endif

    /* pbs's executor runs the sweeps (and the pbs diagnostic), or only the pbs diagnostic under
       an OpenMP schedule. pin 0 lets the tests run several at once on a small machine; 1 pins
       the workers (the calling thread during phases only); 2 keeps the caller pinned too. */
    pbs_executor *e = NULL;
    if (!omp.on || diag_pbs) {
        e = pbs_executor_new(omp.on ? "static" : scheduler, f.nx, f.ny, 1, threads, pin);
        if (!e) {
            fprintf(stderr, "heat: %s\n", pbs_last_error());
            return 2;
        }
    }
    size_t boxes = f.nx * f.ny;
    f.old = calloc(boxes, sizeof *f.old);
    f.new = calloc(boxes, sizeof *f.new);
    f.sink = calloc(boxes, sizeof *f.sink);
    f.hottest = calloc(boxes, sizeof *f.hottest);
    uint32_t *owner = malloc(boxes * sizeof *owner);
    if (!f.old || !f.new || !f.sink || !f.hottest || !owner) return 1;
    if (omp.on) {
#ifdef _OPENMP
#pragma omp parallel for schedule(runtime)
        for (size_t k = 0; k < boxes; k++) touch_box(&f, k); /* as the loop will run them */
#endif
    } else if (pbs_executor_owners(e, owner, boxes) == PBS_OK) {
        /* The first mapping from what the code knows of its costs: a sweep of s*s cells, plus
           the extra work of the starting temperature (PBS_UNSUPPORTED and ignored for static). */
        double *hint = malloc(boxes * sizeof *hint);
        if (!hint) return 1;
        for (size_t k = 0; k < boxes; k++) {
            double t = starts_hot(&f, k) && isfinite(f.hot) ? f.hot : 0.0;
            hint[k] = (double)(f.s * f.s) + 20.0 * t;
        }
        pbs_executor_hint_loads(e, hint, boxes);
        free(hint);
        pbs_executor_owners(e, owner, boxes);
        f.owner = owner; /* pbs and static know who runs what: the owners touch their boxes */
        pbs_executor_on_each_thread(e, touch_own_boxes, &f);
    } else {
        touch_own_boxes(&f, 0); /* ws and eager decide as they run: touch from here */
    }
    if (atomic_load(&f.no_memory)) {
        fprintf(stderr, "heat: out of memory for %zu boxes of %zu x %zu cells\n", boxes, f.s, f.s);
        return 1;
    }

    int rebalancings = 0, late_rebalancings = 0, late_imbalanced = 0, status = 0;
    double efficiency = 0.0, diag_sum = 0.0; /* efficiency summed over sweeps, then the mean */
    /* No rebalancing at the last iteration's end, which no iteration would run on. */
    if (!omp.on) pbs_executor_hint_iterations_left(e, (uint64_t)iterations);
    double start = now_ms();
    for (long it = 0; it < iterations; it++) {
        pbs_status st = PBS_OK;
        if (omp.on) {
#ifdef _OPENMP
            double busy, phase_start = now_ms();
            size_t failed = omp_phase(jacobi_box, &f, &busy);
            double wall = now_ms() - phase_start;
            efficiency += wall > 0 ? busy / (double)omp_get_max_threads() / wall : 1.0;
            if (failed) {
                fprintf(stderr, "heat: the task failed at box %zu\n", failed - 1);
                status = 1;
                break;
            }
#endif
        } else {
            pbs_phase_stats phase;
            st = pbs_executor_run_phase(e, jacobi_box, &f, &phase);
            efficiency += phase.efficiency;
        }
        if (st != PBS_OK) { /* every other box of the phase ran; the executor is still usable */
            fprintf(stderr, "heat: %s\n", pbs_last_error());
            status = 1;
            break;
        }
        double **t = f.old;
        f.old = f.new;
        f.new = t;
        if (diag_pbs) {
            pbs_executor_run_phase(e, hottest_cell, &f, NULL);
        } else if (diag_omp) {
#ifdef _OPENMP
#pragma omp parallel for
            for (size_t k = 0; k < boxes; k++) hottest_cell(&f, k);
#endif
        }
        if (diag_pbs || diag_omp)
            for (size_t k = 0; k < boxes; k++) diag_sum += f.hottest[k];
        if (!omp.on) {
            pbs_iteration_end end;
            pbs_executor_end_iteration(e, &end);
            rebalancings += end.rebalanced;
            late_rebalancings += end.rebalanced && it >= 10;
            /* Iterations whose threads measured over 5 % apart: on a uniform load, the machine. */
            late_imbalanced += end.max_avg > 1.05 && it >= 10;
        }
    }
    double ms = now_ms() - start;
    if (status) goto done;

    /* Checksum: FNV-1a over the bits of every cell, box by box, then of the diagnostic's sum;
       and the total heat, which the insulated walls conserve. */
    uint64_t h = 0xcbf29ce484222325ull, bits;
    double total = 0.0;
    for (size_t k = 0; k < boxes; k++)
        for (size_t c = 0; c < f.s * f.s; c++) {
            memcpy(&bits, &f.old[k][c], sizeof bits);
            h = (h ^ bits) * 0x100000001b3ull;
            total += f.old[k][c];
        }
    memcpy(&bits, &diag_sum, sizeof bits);
    h = (h ^ bits) * 0x100000001b3ull;
    size_t nthreads = e && !omp.on ? pbs_executor_threads(e) : 0;
#ifdef _OPENMP
    if (omp.on) nthreads = (size_t)omp_get_max_threads();
#endif
    printf("heat: scheduler=%s threads=%zu iterations=%ld boxes=%zux%zu ms_per_iteration=%.4f "
           "efficiency=%.3f rebalancings=%d rebalancings_after_10=%d imbalanced_after_10=%d checksum=%016llx "
           "total_heat=%.9e\n",
           scheduler, nthreads, iterations, f.nx, f.ny, iterations ? ms / (double)iterations : 0.0,
           iterations ? efficiency / (double)iterations : 1.0, rebalancings, late_rebalancings, late_imbalanced,
           (unsigned long long)h, total);

done:
    pbs_executor_free(e);
    for (size_t k = 0; k < boxes; k++) {
        free(f.old[k]);
        free(f.new[k]);
    }
    free(f.old);
    free(f.new);
    free(f.sink);
    free(f.hottest);
    free(owner);
    return status;
}
