/*
 * The 3D heat code of ffi/examples/heat3d.c as StarPU tasks: a 7-point Jacobi sweep over
 * (NX T) x (NY T) x (NZ T) cells in boxes of T x T x T cells (--side T), insulated walls, a hot
 * slab at the bottom, extra work in a ball near one corner (so the load is uneven). One task per
 * box per iteration; each box has two data handles, StarPU blocks of its cells within the field
 * before and after the sweep (one array each, x fastest); the task writes its box's new cells
 * and reads the old cells of its box and of its six face neighbours, and StarPU derives the
 * dependencies. The grid is declared in 3D (pbs_starpu_declare_grid_3d). The same operands in
 * the same order as ffi/examples/heat3d.c with tiles of T x T x T: the same checksum.
 *
 *   starpu/build.sh
 *   target/starpu/heat3d [the options of driver.h, --nz among them] [--side 8]
 *
 * The result line adds total_heat, the sum of the final field.
 */
#define _GNU_SOURCE /* StarPU's headers use pthread rwlocks and barriers */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <starpu.h>

#include "driver.h"

#define NX pbs_example_nx
#define NY pbs_example_ny
#define NZ pbs_example_nz
static size_t T = 8;   /* cells a box side */
static size_t n[3];    /* cells along x, y, z */
static double *field[2]; /* the field before an even and an odd iteration */

/* Which buffer of a task holds each face neighbour's old cells (-x, +x, -y, +y, -z, +z); -1 at
   a wall. Buffer 0 is the box's new cells, buffer 1 its old ones. */
struct box_arg {
    size_t k;
    long it;
    int face[6];
};

/* Extra work for the cells of the ball: ffi/examples/heat3d.c's, operand for operand. */
static double extra(double v, size_t x, size_t y, size_t z) {
    double dx = (double)x - n[0] / 4.0, dy = (double)y - n[1] / 4.0, dz = (double)z - n[2] / 4.0;
    double r = n[0] / 4.0;
    if (dx * dx + dy * dy + dz * dz > r * r) return 0.0;
    double s = 0.25 + 0.5 * (v / (1.0 + v));
    for (int i = 0; i < 200; i++) s = 3.9 * s * (1.0 - s);
    return 1e-12 * s;
}

/* Old cell (x, y, z) of the domain, a cell outside read as the cell (cx, cy, cz) itself (the
   insulated walls), through the buffer of the box that holds it: the task's own or a face
   neighbour's block, each laid out with the field's strides from its box's first cell. */
static double at(void *buffers[], const struct box_arg *a, long x, long y, long z, size_t cx, size_t cy, size_t cz) {
    if (x < 0 || y < 0 || z < 0 || x >= (long)n[0] || y >= (long)n[1] || z >= (long)n[2])
        x = (long)cx, y = (long)cy, z = (long)cz;
    size_t c[3] = {(size_t)x, (size_t)y, (size_t)z}, k[3] = {a->k % NX, a->k / NX % NY, a->k / (NX * NY)};
    int buffer = 1;
    for (int d = 0; d < 3; d++) {
        if (c[d] / T + 1 == k[d]) buffer = a->face[2 * d];
        else if (c[d] / T == k[d] + 1) buffer = a->face[2 * d + 1];
    }
    const double *p = (const double *)STARPU_BLOCK_GET_PTR(buffers[buffer]);
    size_t ldy = STARPU_BLOCK_GET_LDY(buffers[buffer]), ldz = STARPU_BLOCK_GET_LDZ(buffers[buffer]);
    return p[c[2] % T * ldz + c[1] % T * ldy + c[0] % T];
}

static void sweep_box(void *buffers[], void *cl_arg) {
    const struct box_arg *a = cl_arg;
    double t0 = pbs_example_task_begin(a->k, a->it);
    if (t0 < 0) return;
    size_t ox = a->k % NX * T, oy = a->k / NX % NY * T, oz = a->k / (NX * NY) * T;
    double *w = (double *)STARPU_BLOCK_GET_PTR(buffers[0]);
    const double *o = (const double *)STARPU_BLOCK_GET_PTR(buffers[1]);
    /* Both blocks are views of a field with the same strides. */
    size_t ldy = STARPU_BLOCK_GET_LDY(buffers[1]), ldz = STARPU_BLOCK_GET_LDZ(buffers[1]);
    for (size_t z = 0; z < T; z++)
        for (size_t y = 0; y < T; y++)
            for (size_t x = 0; x < T; x++) {
                size_t c = z * ldz + y * ldy + x, gx = ox + x, gy = oy + y, gz = oz + z;
                double sum;
                if (x > 0 && y > 0 && z > 0 && x + 1 < T && y + 1 < T && z + 1 < T)
                    sum = o[c - 1] + o[c + 1] + o[c - ldy] + o[c + ldy] + o[c - ldz] + o[c + ldz];
                else
                    sum = at(buffers, a, (long)gx - 1, (long)gy, (long)gz, gx, gy, gz) +
                          at(buffers, a, (long)gx + 1, (long)gy, (long)gz, gx, gy, gz) +
                          at(buffers, a, (long)gx, (long)gy - 1, (long)gz, gx, gy, gz) +
                          at(buffers, a, (long)gx, (long)gy + 1, (long)gz, gx, gy, gz) +
                          at(buffers, a, (long)gx, (long)gy, (long)gz - 1, gx, gy, gz) +
                          at(buffers, a, (long)gx, (long)gy, (long)gz + 1, gx, gy, gz);
                w[c] = sum / 6.0 + extra(o[c], gx, gy, gz);
            }
    pbs_example_task_end(a->it, t0);
}

static struct starpu_perfmodel model = {.type = STARPU_HISTORY_BASED, .symbol = "pbs_starpu_heat3d"};

static struct starpu_codelet sweep = {
    .cpu_funcs = {sweep_box},
    .cpu_funcs_name = {"sweep_box"},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &model,
    .name = "heat3d_sweep",
};

static int option(const char *key, const char *value) {
    if (strcmp(key, "--side")) return 0;
    char *end = NULL;
    errno = 0;
    long x = strtol(value, &end, 10);
    if (*end || errno == ERANGE || x < 1 || x > 1024) {
        fprintf(stderr, "heat3d: --side must be a whole number of cells from 1 to 1024, not %s\n", value);
        return -1;
    }
    T = (size_t)x;
    return 1;
}

static int setup(size_t nx, size_t ny, starpu_data_handle_t *handle) {
    size_t nz = NZ, boxes = nx * ny * nz;
    /* StarPU's blocks take 32-bit strides: a layer of cells must fit one. */
    if (nx > UINT32_MAX / T || ny > UINT32_MAX / T || nx * T > UINT32_MAX / (ny * T) ||
        nz > SIZE_MAX / sizeof(double) / T / (nx * T * ny * T)) {
        fprintf(stderr, "heat3d: %zu x %zu x %zu boxes of %zu^3 cells: too many cells to count\n", nx, ny, nz, T);
        return -1;
    }
    n[0] = nx * T, n[1] = ny * T, n[2] = nz * T;
    size_t cells = n[0] * n[1] * n[2], layer = n[0] * n[1];
    field[0] = malloc(cells * sizeof(double));
    field[1] = malloc(cells * sizeof(double));
    if (!field[0] || !field[1]) {
        fprintf(stderr, "heat3d: out of memory for %zu x %zu x %zu cells\n", n[0], n[1], n[2]);
        return -1;
    }
    /* A hot slab at the bottom on a background of 1: ffi/examples/heat3d.c's start. */
    for (size_t c = 0; c < cells; c++) field[0][c] = field[1][c] = c / layer < n[2] / 8 ? 100.0 : 1.0;
    for (size_t k = 0; k < boxes; k++) {
        size_t first = k / (nx * ny) * T * layer + k / nx % ny * T * n[0] + k % nx * T;
        for (int b = 0; b < 2; b++)
            starpu_block_data_register(&handle[b * boxes + k], STARPU_MAIN_RAM, (uintptr_t)(field[b] + first),
                                       (uint32_t)n[0], (uint32_t)layer, (uint32_t)T, (uint32_t)T, (uint32_t)T,
                                       sizeof(double));
    }
    return 0;
}

static int submit(size_t k, long it, starpu_data_handle_t *from, starpu_data_handle_t *to) {
    size_t kx = k % NX, ky = k / NX % NY, kz = k / (NX * NY);
    long neighbour[6] = {kx > 0 ? (long)k - 1 : -1,
                         kx + 1 < NX ? (long)k + 1 : -1,
                         ky > 0 ? (long)(k - NX) : -1,
                         ky + 1 < NY ? (long)(k + NX) : -1,
                         kz > 0 ? (long)(k - NX * NY) : -1,
                         kz + 1 < NZ ? (long)(k + NX * NY) : -1};
    struct starpu_data_descr descr[8];
    int count = 0;
    descr[count++] = (struct starpu_data_descr){to[k], STARPU_W};
    descr[count++] = (struct starpu_data_descr){from[k], STARPU_R};
    struct box_arg *arg = malloc(sizeof *arg); /* StarPU frees it with the task */
    if (!arg) return -ENOMEM;
    arg->k = k;
    arg->it = it;
    for (int d = 0; d < 6; d++) {
        arg->face[d] = neighbour[d] < 0 ? -1 : count;
        if (neighbour[d] >= 0) descr[count++] = (struct starpu_data_descr){from[neighbour[d]], STARPU_R};
    }
    return starpu_task_insert(&sweep, STARPU_DATA_MODE_ARRAY, descr, count, STARPU_CL_ARGS, arg, sizeof *arg, 0);
}

/* Every cell of the final field a finite number. */
static int check(long iterations) {
    const double *f = field[iterations % 2];
    for (size_t c = 0; c < n[0] * n[1] * n[2]; c++)
        if (!isfinite(f[c])) {
            fprintf(stderr, "heat3d: cell %zu's heat is not a finite number\n", c);
            return -1;
        }
    return 0;
}

/* FNV-1a over the final field's 64-bit words: ffi/examples/heat3d.c's. */
static uint64_t checksum(long iterations) {
    const double *f = field[iterations % 2];
    uint64_t h = 0xcbf29ce484222325ull, bits;
    for (size_t c = 0; c < n[0] * n[1] * n[2]; c++) {
        memcpy(&bits, &f[c], sizeof bits);
        h = (h ^ bits) * 0x100000001b3ull;
    }
    return h;
}

static void print_fields(FILE *out, long iterations) {
    const double *f = field[iterations % 2];
    double total = 0.0;
    for (size_t c = 0; c < n[0] * n[1] * n[2]; c++) total += f[c];
    fprintf(out, " total_heat=%.9e", total);
}

/* A task writes its new cells and reads its old ones, and a face of each neighbour's. */
static uint64_t box_bytes(void) { return 2 * T * T * T * sizeof(double); }
static uint64_t halo_bytes(void) { return T * T * sizeof(double); }
static uint64_t written_bytes(void) { return T * T * T * sizeof(double); }

static void cleanup(void) { free(field[0]), free(field[1]); }

PBS_EXAMPLE_MAIN("heat3d", "[--side T]")
