/*
 * Tile shapes on a row-major grid: a Jacobi sweep over one W x H array of cells (as most C
 * codes keep their fields), cut into boxes of tile_x x tile_y cells with pbs_tiling_grid and
 * pbs_tiling_cells; the last tile of a row or column is smaller when the size does not divide.
 * docs/tiles.md compares the shapes.
 *
 *   cc -std=c11 -O2 -Iffi/include ffi/examples/tiles.c -Ltarget/release -lpbs_ffi \
 *      -Wl,-rpath,$PWD/target/release -o tiles
 *   ./tiles [scheduler=pbs] [threads=0] [iterations=100] [W=1024] [H=1024] [tile_x=W] [tile_y=16]
 *           [ranges=0: 1 runs the sweep as a range task, one call per run of boxes]
 *
 * Prints the time per iteration and per cell, and a checksum of the final field: the same for
 * every tile shape, scheduler and thread count.
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arguments.h"
#include "pbs.h"

typedef struct {
    size_t w, h;
    const double *old;
    double *new;
    size_t (*range)[4]; /* per box: x0, x1, y0, y1 */
} grid;

/* One box: every cell of its tile from its four neighbours; fixed walls at the border. */
static int sweep_box(void *ctx, size_t k) {
    grid *g = ctx;
    size_t x0 = g->range[k][0], x1 = g->range[k][1], y0 = g->range[k][2], y1 = g->range[k][3];
    for (size_t y = y0; y < y1; y++) {
        const double *up = g->old + (y ? y - 1 : y) * g->w, *row = g->old + y * g->w,
                     *down = g->old + (y + 1 < g->h ? y + 1 : y) * g->w;
        double *out = g->new + y * g->w;
        for (size_t x = x0; x < x1; x++) {
            double left = row[x ? x - 1 : x], right = row[x + 1 < g->w ? x + 1 : x];
            out[x] = 0.25 * (left + right + up[x] + down[x]);
        }
    }
    return 0;
}

/* The same sweep as a range task: boxes begin..end-1. */
static int sweep_range(void *ctx, size_t begin, size_t end) {
    for (size_t k = begin; k < end; k++) sweep_box(ctx, k);
    return 0;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static const char usage[] =
    "usage: tiles [scheduler=pbs] [threads=0] [iterations=100] [W=1024] [H=1024] [tile_x=W] [tile_y=16]\n"
    "             [ranges=0: 1 runs the sweep as a range task, one call per run of boxes]\n"
    "A Jacobi sweep over a W x H row-major array cut into tiles; prints the time per iteration\n"
    "and per cell, and a checksum of the final field.\n";

int main(int argc, char **argv) {
    if (arg_help(argc, argv, usage)) return 0;
    const char *scheduler = argc > 1 ? argv[1] : "pbs";
    /* threads, iterations, W, H, tile_x, tile_y, ranges; tile_x's default is W. */
    const char *names[7] = {"threads", "iterations", "W", "H", "tile_x", "tile_y", "ranges"};
    unsigned long long n[7] = {0, 100, 1024, 1024, 0, 16, 0}, max[7] = {SIZE_MAX, LONG_MAX, SIZE_MAX, SIZE_MAX, SIZE_MAX, SIZE_MAX, 1};
    if (!arg_at_most("tiles", argc, argv, 8)) return 2;
    for (int i = 0; i + 2 < argc; i++)
        if (arg_count("tiles", names[i], argv[i + 2], max[i], &n[i])) return 2;
    if (argc <= 6) n[4] = n[2];
    size_t threads = (size_t)n[0], w = (size_t)n[2], h = (size_t)n[3], tx = (size_t)n[4], ty = (size_t)n[5];
    long iterations = (long)n[1];
    int ranges = n[6] != 0;
    size_t nx, ny;
    if (pbs_tiling_grid(w, h, tx, ty, &nx, &ny) != PBS_OK) {
        fprintf(stderr, "tiles: %s\n", pbs_last_error());
        return 2;
    }
    pbs_executor *e = pbs_executor_new(scheduler, nx, ny, 1, threads, PBS_PIN_WORKERS);
    if (!e) {
        fprintf(stderr, "tiles: %s\n", pbs_last_error());
        return 2;
    }
    /* The cells counted before they are allocated: a product past SIZE_MAX wrapped, and the
       sweep wrote past a small allocation (a segmentation fault). */
    if (w > SIZE_MAX / sizeof(double) / h) {
        fprintf(stderr, "tiles: %zu x %zu cells: more than this machine can count\n", w, h);
        return 2;
    }
    double *a = malloc(w * h * sizeof *a), *b = malloc(w * h * sizeof *b);
    size_t(*range)[4] = malloc(nx * ny * sizeof *range);
    if (!a || !b || !range) {
        fprintf(stderr, "tiles: out of memory for %zu x %zu cells\n", w, h);
        return 1;
    }
    for (size_t k = 0; k < nx * ny; k++)
        pbs_tiling_cells(w, h, tx, ty, k, &range[k][0], &range[k][1], &range[k][2], &range[k][3]);
    /* A hot corner on a background of 1: no value decays into the slow subnormal range. */
    for (size_t c = 0; c < w * h; c++) a[c] = b[c] = (c % w < w / 8 && c / w < h / 8) ? 100.0 : 1.0;

    grid g = {w, h, a, b, range};
    pbs_executor_hint_iterations_left(e, (uint64_t)iterations); /* none at the last one's end */
    double start = now_ms();
    for (long it = 0; it < iterations; it++) {
        pbs_status st = ranges ? pbs_executor_run_phase_ranges(e, sweep_range, &g, NULL)
                               : pbs_executor_run_phase(e, sweep_box, &g, NULL);
        if (st != PBS_OK) {
            fprintf(stderr, "tiles: %s\n", pbs_last_error());
            return 1;
        }
        double *t = (double *)g.old;
        g.old = g.new;
        g.new = t;
        pbs_executor_end_iteration(e, NULL);
    }
    double ms = now_ms() - start;

    uint64_t hash = 0xcbf29ce484222325ull, bits;
    for (size_t c = 0; c < w * h; c++) {
        memcpy(&bits, &g.old[c], sizeof bits);
        hash = (hash ^ bits) * 0x100000001b3ull;
    }
    printf("tiles: scheduler=%s threads=%zu cells=%zux%zu tile=%zux%zu boxes=%zux%zu ms_per_iteration=%.4f "
           "ns_per_cell=%.3f checksum=%016llx\n",
           scheduler, pbs_executor_threads(e), w, h, tx, ty, nx, ny, iterations ? ms / (double)iterations : 0.0,
           iterations ? ms * 1e6 / (double)iterations / (double)(w * h) : 0.0, (unsigned long long)hash);
    pbs_executor_free(e);
    free(a);
    free(b);
    free(range);
    return 0;
}
