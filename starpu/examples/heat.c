/*
 * The heat code of ffi/examples/heat.c as StarPU tasks: Jacobi heat diffusion on NX x NY boxes of
 * S x S cells, insulated walls, a hot square in one corner, each box doing extra work in
 * proportion to its temperature (so the load follows the heat). One task per box per iteration;
 * each box has two data handles (the field before and after the sweep), the task writes its
 * box's new tile and reads the old tiles of its box and its face neighbours; StarPU derives the
 * dependencies. The same operands in the same order as ffi/examples/heat.c: the same checksum.
 *
 *   starpu/build.sh
 *   target/starpu/heat [the options of driver.h] [--side 16] [--hot 100] [--load corner|uniform]
 *
 * The result line adds total_heat, the sum of the final field.
 */
#define _GNU_SOURCE /* StarPU's headers use pthread rwlocks and barriers */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <starpu.h>

#include "driver.h"

#define NX pbs_example_nx
#define NY pbs_example_ny
static size_t S = 16;
static double hot = 100.0;
static int uniform;                 /* --load uniform: every box hot */
static double *tile[2];             /* the field before an even and an odd iteration */
static double *sink;                /* the extra work's results, so that it is really done */
static _Atomic int failed_box = -1; /* a box whose heat is not finite */

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
    const struct box_arg *a = cl_arg;
    double t0 = pbs_example_task_begin(a->k, a->it);
    if (t0 < 0) return;
    size_t k = a->k, bx = k % NX, by = k / NX;
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
    /* None for a temperature that is not finite: converting it to long would be undefined
       behaviour; --hot is kept within 1e6, and no cell gets hotter than that. */
    long units = isfinite(heat) ? (long)(20.0 * heat / (double)(S * S)) : 0;
    for (long u = 0; u < units; u++) z = 3.9 * z * (1.0 - z);
    sink[k] = z;
    if (!isfinite(heat)) {
        int none = -1;
        atomic_compare_exchange_strong(&failed_box, &none, (int)k);
    }
    pbs_example_task_end(a->it, t0);
}

static struct starpu_perfmodel model = {.type = STARPU_HISTORY_BASED, .symbol = "pbs_starpu_heat"};

static struct starpu_codelet sweep = {
    .cpu_funcs = {jacobi_box},
    .cpu_funcs_name = {"jacobi_box"},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &model,
    .name = "heat_sweep",
};

static int option(const char *key, const char *value) {
    char *end = NULL;
    if (!strcmp(key, "--load")) {
        uniform = !strcmp(value, "uniform");
        if (!uniform && strcmp(value, "corner")) {
            fprintf(stderr, "heat: --load is corner or uniform, not %s\n", value);
            return -1;
        }
        return 1;
    }
    if (!strcmp(key, "--hot")) {
        hot = strtod(value, &end);
        if (!*end && !(isnan(hot) || (hot >= 0 && hot <= 1e6))) {
            fprintf(stderr, "heat: --hot must be from 0 to 1e6 (or nan), not %s\n", value);
            return -1;
        }
    } else if (!strcmp(key, "--side")) {
        long x = strtol(value, &end, 10);
        if (x < 3) {
            fprintf(stderr, "heat: --side must be at least 3 cells\n");
            return -1;
        }
        S = (size_t)x;
    } else return 0;
    if (*end) {
        fprintf(stderr, "heat: %s %s is not a number\n", key, value);
        return -1;
    }
    return 1;
}

static int setup(size_t nx, size_t ny, starpu_data_handle_t *handle) {
    if (pbs_example_nz != 1) {
        fprintf(stderr, "heat: a 2D code: --nz must be 1 (heat3d is the 3D heat code)\n");
        return -1;
    }
    size_t boxes = nx * ny;
    if (S > UINT32_MAX / S || boxes > SIZE_MAX / sizeof(double) / (S * S)) {
        fprintf(stderr, "heat: %zu boxes of %zu x %zu cells: too many cells to count\n", boxes, S, S);
        return -1;
    }
    sink = calloc(boxes, sizeof *sink);
    tile[0] = malloc(boxes * S * S * sizeof(double));
    tile[1] = malloc(boxes * S * S * sizeof(double));
    if (!sink || !tile[0] || !tile[1]) {
        fprintf(stderr, "heat: out of memory for %zu boxes of %zu cells\n", boxes, S * S);
        return -1;
    }
    for (size_t k = 0; k < boxes; k++) {
        int hot_box = uniform || (k % nx < nx / 4 && k / nx < ny / 4);
        for (int b = 0; b < 2; b++) {
            double *t = tile[b] + k * S * S;
            for (size_t c = 0; c < S * S; c++) t[c] = hot_box ? hot : 0.0;
            starpu_vector_data_register(&handle[b * boxes + k], STARPU_MAIN_RAM, (uintptr_t)t, S * S,
                                        sizeof(double));
        }
    }
    return 0;
}

static int submit(size_t k, long it, starpu_data_handle_t *from, starpu_data_handle_t *to) {
    size_t kx = k % NX, ky = k / NX;
    long neighbour[4] = {kx > 0 ? (long)k - 1 : -1, kx + 1 < NX ? (long)k + 1 : -1, ky > 0 ? (long)(k - NX) : -1,
                         ky + 1 < NY ? (long)(k + NX) : -1};
    struct starpu_data_descr descr[6];
    int n = 0;
    descr[n++] = (struct starpu_data_descr){to[k], STARPU_W};
    descr[n++] = (struct starpu_data_descr){from[k], STARPU_R};
    struct box_arg *arg = malloc(sizeof *arg); /* StarPU frees it with the task */
    if (!arg) return -ENOMEM;
    arg->k = k;
    arg->it = it;
    for (int d = 0; d < 4; d++) {
        arg->face[d] = neighbour[d] < 0 ? -1 : n;
        if (neighbour[d] >= 0) descr[n++] = (struct starpu_data_descr){from[neighbour[d]], STARPU_R};
    }
    return starpu_task_insert(&sweep, STARPU_DATA_MODE_ARRAY, descr, n, STARPU_CL_ARGS, arg, sizeof *arg, 0);
}

static int check(long iterations) {
    (void)iterations;
    if (failed_box >= 0) {
        fprintf(stderr, "heat: box %d's heat is not a finite number\n", (int)failed_box);
        return -1;
    }
    return 0;
}

/* FNV-1a over the final field's 64-bit words, then a zero word: ffi/examples/heat.c's. */
static uint64_t checksum(long iterations) {
    const double *field = tile[iterations % 2];
    uint64_t h = 0xcbf29ce484222325ull, bits;
    for (size_t c = 0; c < NX * NY * S * S; c++) {
        memcpy(&bits, &field[c], sizeof bits);
        h = (h ^ bits) * 0x100000001b3ull;
    }
    double diag_sum = 0.0;
    memcpy(&bits, &diag_sum, sizeof bits);
    return (h ^ bits) * 0x100000001b3ull;
}

static void print_fields(FILE *out, long iterations) {
    const double *field = tile[iterations % 2];
    double total = 0.0;
    for (size_t c = 0; c < NX * NY * S * S; c++) total += field[c];
    fprintf(out, " total_heat=%.9e", total);
}

/* A task writes its new tile and reads its old one, and a row or column of each neighbour's. */
static uint64_t box_bytes(void) { return 2 * S * S * sizeof(double); }
static uint64_t halo_bytes(void) { return S * sizeof(double); }
/* The new tile, one of the box's two. */
static uint64_t written_bytes(void) { return S * S * sizeof(double); }

static void cleanup(void) { free(sink), free(tile[0]), free(tile[1]); }

PBS_EXAMPLE_MAIN("heat", "[--side S] [--hot T] [--load corner|uniform]")
