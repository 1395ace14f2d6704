/*
 * A grid code in C on the pbs runtime: Jacobi heat diffusion on NX x NY boxes of S x S cells,
 * insulated walls, a hot square in one corner. Each box also does extra work in proportion to
 * its temperature, so the load spreads with the heat and the "pbs" scheduler has something to
 * follow. Box data are allocated and first-touched by the worker that will run the box.
 *
 *   cargo build --release -p pbs-ffi
 *   cc -std=c11 -O2 -Iffi/include ffi/examples/heat.c -Ltarget/release -lpbs_ffi \
 *      -Wl,-rpath,$PWD/target/release -o heat
 *   ./heat [scheduler=pbs] [threads=0: all cores] [iterations=200] [nx=32] [ny=32] [side=16]
 *          [hot=100: the hot square's temperature; nan shows how a failing task is reported]
 *
 * Prints the time per iteration, the mean phase efficiency (sum of task times / threads / wall),
 * the rebalancings, and a checksum of the final field: the same
 * under every scheduler and thread count, since each task reads the previous field and writes
 * its own box, always in the same order.
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pbs.h"

typedef struct {
    size_t nx, ny, s;   /* boxes along x and y, cells per box side */
    double **old, **new; /* one tile of s*s cells per box, in both buffers */
    double *sink;        /* the extra work's results, so that it is really done */
    const uint32_t *owner; /* who first-touches each box (NULL: the main thread did) */
    double hot;            /* starting temperature of the hot square */
} field;

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
    /* Extra work in proportion to the box's mean temperature (a hot box is an expensive one). */
    double z = 0.5;
    long units = (long)(20.0 * heat / (double)(s * s));
    for (long u = 0; u < units; u++) z = 3.9 * z * (1.0 - z);
    f->sink[k] = z;
    return isfinite(heat) ? 0 : 1;
}

/* First touch: each worker allocates and fills the tiles of the boxes it will run. */
static void touch_own_boxes(void *ctx, size_t worker) {
    field *f = ctx;
    for (size_t k = 0; k < f->nx * f->ny; k++) {
        if (f->owner && f->owner[k] != worker) continue;
        size_t bytes = f->s * f->s * sizeof(double);
        f->old[k] = malloc(bytes);
        f->new[k] = malloc(bytes);
        if (!f->old[k] || !f->new[k]) abort();
        size_t bx = k % f->nx, by = k / f->nx;
        int hot = bx < f->nx / 4 && by < f->ny / 4;
        for (size_t c = 0; c < f->s * f->s; c++) f->old[k][c] = f->new[k][c] = hot ? f->hot : 0.0;
    }
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    const char *scheduler = argc > 1 ? argv[1] : "pbs";
    size_t threads = argc > 2 ? strtoul(argv[2], NULL, 10) : 0;
    long iterations = argc > 3 ? strtol(argv[3], NULL, 10) : 200;
    field f = {.nx = argc > 4 ? strtoul(argv[4], NULL, 10) : 32,
               .ny = argc > 5 ? strtoul(argv[5], NULL, 10) : 32,
               .s = argc > 6 ? strtoul(argv[6], NULL, 10) : 16,
               .hot = argc > 7 ? strtod(argv[7], NULL) : 100.0};
    if (iterations < 0 || f.s < 3) {
        fprintf(stderr, "heat: iterations must be >= 0 and side >= 3\n");
        return 2;
    }

    /* Unpinned (last argument 0) so that the tests can run several at once on a small
       machine; 1 pins each worker to its core, the calling thread included. */
    pbs_executor *e = pbs_executor_new(scheduler, f.nx, f.ny, 1, threads, 0);
    if (!e) {
        fprintf(stderr, "heat: %s\n", pbs_last_error());
        return 2;
    }
    size_t boxes = f.nx * f.ny;
    f.old = calloc(boxes, sizeof *f.old);
    f.new = calloc(boxes, sizeof *f.new);
    f.sink = calloc(boxes, sizeof *f.sink);
    uint32_t *owner = malloc(boxes * sizeof *owner);
    if (!f.old || !f.new || !f.sink || !owner) return 1;
    if (pbs_executor_owners(e, owner, boxes) == PBS_OK) {
        f.owner = owner; /* pbs and static know who runs what: the owners touch their boxes */
        pbs_executor_on_each_thread(e, touch_own_boxes, &f);
    } else {
        touch_own_boxes(&f, 0); /* ws and eager decide as they run: touch from here */
    }

    int rebalancings = 0;
    double efficiency = 0.0; /* summed over phases, then the mean */
    double start = now_ms();
    for (long it = 0; it < iterations; it++) {
        pbs_phase_stats phase;
        pbs_status st = pbs_executor_run_phase(e, jacobi_box, &f, &phase);
        if (st != PBS_OK) {
            fprintf(stderr, "heat: %s\n", pbs_last_error());
            return 1;
        }
        efficiency += phase.efficiency;
        double **t = f.old;
        f.old = f.new;
        f.new = t;
        pbs_iteration_end end;
        pbs_executor_end_iteration(e, &end);
        rebalancings += end.rebalanced;
    }
    double ms = now_ms() - start;

    /* Checksum: FNV-1a over the bits of every cell, box by box; and the total heat, which the
       insulated walls conserve. */
    uint64_t h = 0xcbf29ce484222325ull;
    double total = 0.0;
    for (size_t k = 0; k < boxes; k++)
        for (size_t c = 0; c < f.s * f.s; c++) {
            uint64_t bits;
            memcpy(&bits, &f.old[k][c], sizeof bits);
            h = (h ^ bits) * 0x100000001b3ull;
            total += f.old[k][c];
        }
    printf("heat: scheduler=%s threads=%zu iterations=%ld boxes=%zux%zu ms_per_iteration=%.4f "
           "efficiency=%.3f rebalancings=%d checksum=%016llx total_heat=%.9e\n",
           scheduler, pbs_executor_threads(e), iterations, f.nx, f.ny,
           iterations ? ms / (double)iterations : 0.0, iterations ? efficiency / (double)iterations : 1.0,
           rebalancings, (unsigned long long)h, total);

    pbs_executor_free(e);
    for (size_t k = 0; k < boxes; k++) {
        free(f.old[k]);
        free(f.new[k]);
    }
    free(f.old);
    free(f.new);
    free(f.sink);
    free(owner);
    return 0;
}
