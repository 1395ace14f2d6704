/*
 * A 3D heat code on pbs: a 7-point Jacobi sweep over one W x H x D array of cells (x fastest),
 * cut into boxes of tile_x x tile_y x tile_z cells with pbs_tiling_grid_3d and
 * pbs_tiling_cells_3d; the last box along an axis is smaller when the size does not divide.
 * Cells in a ball near one corner carry extra work (a chemistry step, say), so the load is
 * uneven and pbs has something to balance.
 *
 *   cc -std=c11 -O2 -Iffi/include ffi/examples/heat3d.c -Ltarget/release -lpbs_ffi \
 *      -Wl,-rpath,$PWD/target/release -o heat3d
 *   ./heat3d [scheduler=pbs] [threads=0] [iterations=50] [W=96] [H=96] [D=96]
 *            [tile_x=W] [tile_y=8] [tile_z=8]
 *
 * Prints the time per iteration, the last iteration's max_avg (pbs) and a checksum of the final
 * field: the same for every tile shape, scheduler and thread count.
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
    size_t n[3];        /* cells along x, y, z */
    const double *old;
    double *new;
    size_t (*lo)[3], (*hi)[3]; /* per box: its cells lo <= c < hi */
} field;

/* Extra work for the cells of the ball: a few rounds of a logistic map, folded in at a weight
   too small to change the field's first digits, so that it is real and deterministic. */
static double extra(double v, size_t x, size_t y, size_t z, const size_t n[3]) {
    double dx = (double)x - n[0] / 4.0, dy = (double)y - n[1] / 4.0, dz = (double)z - n[2] / 4.0;
    double r = n[0] / 4.0;
    if (dx * dx + dy * dy + dz * dz > r * r) return 0.0;
    double s = 0.25 + 0.5 * (v / (1.0 + v));
    for (int i = 0; i < 200; i++) s = 3.9 * s * (1.0 - s);
    return 1e-12 * s;
}

/* One box: every cell from its six neighbours, insulated walls (a cell outside reads as the
   cell itself). */
static int sweep_box(void *ctx, size_t k) {
    const field *f = ctx;
    const size_t nx = f->n[0], ny = f->n[1], nz = f->n[2], plane = nx * ny;
    for (size_t z = f->lo[k][2]; z < f->hi[k][2]; z++)
        for (size_t y = f->lo[k][1]; y < f->hi[k][1]; y++)
            for (size_t x = f->lo[k][0]; x < f->hi[k][0]; x++) {
                size_t c = z * plane + y * nx + x;
                const double *o = f->old;
                double sum = o[x ? c - 1 : c] + o[x + 1 < nx ? c + 1 : c] + o[y ? c - nx : c] +
                             o[y + 1 < ny ? c + nx : c] + o[z ? c - plane : c] + o[z + 1 < nz ? c + plane : c];
                f->new[c] = sum / 6.0 + extra(o[c], x, y, z, f->n);
            }
    return 0;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static const char usage[] =
    "usage: heat3d [scheduler=pbs] [threads=0] [iterations=50] [W=96] [H=96] [D=96]\n"
    "              [tile_x=W] [tile_y=8] [tile_z=8]\n"
    "A 7-point Jacobi sweep over W x H x D cells cut into tiles; prints the time per iteration,\n"
    "the last iteration's max_avg (pbs) and a checksum of the final field.\n";

int main(int argc, char **argv) {
    if (arg_help(argc, argv, usage)) return 0;
    const char *scheduler = argc > 1 ? argv[1] : "pbs";
    /* threads, iterations, W, H, D, tile_x, tile_y, tile_z; tile_x's default is W. */
    const char *names[8] = {"threads", "iterations", "W", "H", "D", "tile_x", "tile_y", "tile_z"};
    unsigned long long v[8] = {0, 50, 96, 96, 96, 0, 8, 8};
    if (!arg_at_most("heat3d", argc, argv, 9)) return 2;
    for (int i = 0; i + 2 < argc; i++)
        if (arg_count("heat3d", names[i], argv[i + 2], i == 1 ? LONG_MAX : SIZE_MAX, &v[i])) return 2;
    if (argc <= 7) v[5] = v[2];
    size_t threads = (size_t)v[0];
    long iterations = (long)v[1];
    size_t n[3] = {(size_t)v[2], (size_t)v[3], (size_t)v[4]};
    size_t tile[3] = {(size_t)v[5], (size_t)v[6], (size_t)v[7]}, grid[3];
    if (pbs_tiling_grid_3d(n, tile, grid) != PBS_OK) {
        fprintf(stderr, "heat3d: %s\n", pbs_last_error());
        return 2;
    }
    pbs_executor *e = pbs_executor_new(scheduler, grid[0], grid[1], grid[2], threads, PBS_PIN_WORKERS);
    if (!e) {
        fprintf(stderr, "heat3d: %s\n", pbs_last_error());
        return 2;
    }
    /* The cells counted before they are allocated: a product past SIZE_MAX wrapped, and the
       sweep wrote past a small allocation (a segmentation fault). */
    if (n[0] > SIZE_MAX / sizeof(double) / n[1] || n[0] * n[1] > SIZE_MAX / sizeof(double) / n[2]) {
        fprintf(stderr, "heat3d: %zu x %zu x %zu cells: more than this machine can count\n", n[0], n[1], n[2]);
        return 2;
    }
    size_t cells = n[0] * n[1] * n[2], boxes = grid[0] * grid[1] * grid[2];
    double *a = malloc(cells * sizeof *a), *b = malloc(cells * sizeof *b);
    size_t(*lo)[3] = malloc(boxes * sizeof *lo), (*hi)[3] = malloc(boxes * sizeof *hi);
    if (!a || !b || !lo || !hi) {
        fprintf(stderr, "heat3d: out of memory for %zu x %zu x %zu cells\n", n[0], n[1], n[2]);
        return 1;
    }
    for (size_t k = 0; k < boxes; k++) pbs_tiling_cells_3d(n, tile, k, lo[k], hi[k]);
    /* A hot slab at the bottom on a background of 1 (no value decays towards subnormals). */
    for (size_t c = 0; c < cells; c++) a[c] = b[c] = c / (n[0] * n[1]) < n[2] / 8 ? 100.0 : 1.0;

    field f = {{n[0], n[1], n[2]}, a, b, lo, hi};
    pbs_iteration_end end = {0};
    pbs_executor_hint_iterations_left(e, (uint64_t)iterations); /* none at the last one's end */
    double start = now_ms();
    for (long it = 0; it < iterations; it++) {
        if (pbs_executor_run_phase(e, sweep_box, &f, NULL) != PBS_OK) {
            fprintf(stderr, "heat3d: %s\n", pbs_last_error());
            return 1;
        }
        double *t = (double *)f.old;
        f.old = f.new;
        f.new = t;
        pbs_executor_end_iteration(e, &end);
    }
    double ms = now_ms() - start;

    uint64_t hash = 0xcbf29ce484222325ull, bits;
    for (size_t c = 0; c < cells; c++) {
        memcpy(&bits, &f.old[c], sizeof bits);
        hash = (hash ^ bits) * 0x100000001b3ull;
    }
    /* max_avg is measured by the schedulers that balance (pbs); the others leave it 0. */
    char balance[32] = "-";
    if (end.max_avg > 0) snprintf(balance, sizeof balance, "%.3f", end.max_avg);
    printf("heat3d: scheduler=%s threads=%zu cells=%zux%zux%zu tile=%zux%zux%zu boxes=%zux%zux%zu "
           "ms_per_iteration=%.3f max_avg=%s checksum=%016llx\n",
           scheduler, pbs_executor_threads(e), n[0], n[1], n[2], tile[0], tile[1], tile[2], grid[0], grid[1],
           grid[2], iterations ? ms / (double)iterations : 0.0, balance, (unsigned long long)hash);
    pbs_executor_free(e);
    free(a);
    free(b);
    free(lo);
    free(hi);
    return 0;
}
