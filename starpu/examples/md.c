/*
 * The md app of apps/src/md.rs as StarPU tasks: Lennard-Jones molecular dynamics with cell lists
 * on Verlet boxes of side the cutoff, in 2D (target/starpu/md) or, built with MD_DIMS=3, in 3D
 * (target/starpu/md3d, Md<3>'s physics), velocity Verlet in one step per Verlet box per
 * iteration. Box k's step computes the forces on the particles now in k from its 3x3 (3x3x3)
 * neighbourhood, ends the step and starts the next, and files each particle as staying in k or
 * leaving for a neighbour; the particles in a box are its staying ones followed by those that
 * left its neighbours for it, so a step reads the leavers of the 5x5 (5x5x5) boxes around it.
 *
 * A Verlet box holds a few particles, a few microseconds of work: far less than what StarPU
 * spends on a task. So the StarPU grid's boxes are tiles of T x T (x T in 3D) Verlet boxes
 * (--tile, default 4): --nx, --ny and --nz count tiles, the domain has (nx T) x (ny T) (x (nz T))
 * Verlet boxes, and one task steps a tile's Verlet boxes. Each tile has two data handles (its
 * Verlet boxes' particles before an even and an odd iteration), registered with StarPU's
 * variable interface; a task writes its tile's new handle and reads the old handles of the
 * tiles within two Verlet boxes of it (3 x 3 (x 3) tiles, 5 x 5 (x 5) with --tile 1). The same
 * operations in the same order as the Rust app: the checksum is that of `pbs-bench run --app md
 * --json` with the same scenario, seed and iteration count on (nx T) x (ny T) boxes (with
 * --nz nz T in 3D). The dimension count is fixed when the program is built, so that a particle
 * is the Rust app's 56 or 80 bytes and the loops over its axes unroll (one program for both,
 * the count read at run time, stepped 2D particles in 1.1-1.24 x the time).
 *
 *   starpu/build.sh
 *   target/starpu/md   [the options of driver.h] [--tile 4] [--seed 1]
 *                      [--scenario uniform|contraction|expansion|gravity]
 *   target/starpu/md3d [the same, --nz among them]
 *
 * The result line adds the Verlet grid and the number of particles (conserved: checked at the
 * end).
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

#define NX pbs_example_nx /* tiles */
#define NY pbs_example_ny
#define NZ pbs_example_nz
#define CUTOFF 2.5
#define DT 0.004
#define R_MIN 0.8              /* pair distances are floored here (a soft core) */
#define MAX_STEP (0.2 * CUTOFF) /* largest displacement per step: particles never skip a box */
#define HOOD 27                 /* slots of a neighbourhood, 3 x 3 x 3 (2D: the middle layer's) */
#define MIDDLE 13               /* a box's own slot */

enum scenario { UNIFORM, CONTRACTION, EXPANSION, GRAVITY };
static const char *const SCENARIOS[] = {"uniform", "contraction", "expansion", "gravity"};
static enum scenario scenario = GRAVITY;
static uint64_t seed = 1;
static size_t T = 4;       /* Verlet boxes per tile side */
static size_t TZ = 1;      /* ... along z: T in 3D, 1 in 2D */
#ifndef MD_DIMS
#define MD_DIMS 2
#endif
#define D MD_DIMS /* dimensions */
_Static_assert(D == 2 || D == 3, "md runs in 2 or 3 dimensions");
#define LAYERS (D == 3 ? 3 : 1) /* layers of a neighbourhood */
static size_t V[3];        /* Verlet boxes along x, y and z: NX T, NY T, NZ TZ */
static double extent[3], centre[3];

/* As apps/src/md.rs's: 56 bytes in 2D, 80 in 3D. */
struct particle {
    uint32_t id, bin; /* bin: the box its position lies in */
    double x[D], v[D], f[D];
};
_Static_assert(sizeof(struct particle) == 8 + 24 * D, "a particle is the Rust app's size");

struct list {
    struct particle *p;
    size_t n, cap;
};

/* One box's particles between steps: those still inside it, and those that drifted into a
   neighbour (`bin` says which), which picks them up next step. */
struct bin {
    struct list stay, leave;
};

/* Every Verlet box's particles before an even and an odd iteration, tile after tile (a tile's
   boxes in index order, x fastest): a tile's data is one piece of memory, for its StarPU
   handle. */
static struct bin *bins[2];
static size_t particles;      /* placed at the start */
static _Atomic int out_of_memory;
/* Per worker (the last row: the main thread's, for the first step), the arrivals in each box of
   a task's neighbourhood (slot 9 (dl + 1) + 3 (dj + 1) + di + 1): reused, so that a step
   allocates nothing once they have grown. A step gets its row as a pointer to the row, so that
   UBSan's bounds check sees a slot outside it (inside the array, AddressSanitizer does not). */
static struct list arrived[STARPU_NMAXWORKERS + 1][HOOD];

static int push(struct list *l, const struct particle *p) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        struct particle *grown = realloc(l->p, cap * sizeof *grown);
        if (!grown) {
            atomic_store(&out_of_memory, 1);
            return -1;
        }
        l->p = grown, l->cap = cap;
    }
    l->p[l->n++] = *p;
    return 0;
}

/* SplitMix64, as pbs::rng's. */
static uint64_t rng_next(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double rng_f64(uint64_t *state) { return (double)(rng_next(state) >> 11) * (1.0 / (double)(1ull << 53)); }

/* The squared length of the first D coordinates, summed from the first (md.rs's `squared`). */
static double squared(const double *v) {
    double sum = v[0] * v[0];
    for (int d = 1; d < D; d++) sum += v[d] * v[d];
    return sum;
}

/* The length: hypot in 2D, on which the 2D placements and forces depend (md.rs's `length`). */
static double length(const double *v) { return D == 2 ? hypot(v[0], v[1]) : sqrt(squared(v)); }

/* The box a position lies in along an axis of N boxes; Rust's saturating casts for what a wall
   reflects to (>= 0). */
static size_t index_along(double pos, size_t n) {
    double q = pos / CUTOFF;
    if (!(q > 0)) return 0;
    return q < (double)n ? (size_t)q : n - 1;
}

static size_t box_of(const double *x) {
#if D == 3
    size_t c = index_along(x[2], V[2]);
#else
    size_t c = 0;
#endif
    return (c * V[1] + index_along(x[1], V[1])) * V[0] + index_along(x[0], V[0]);
}

static void coords(size_t k, size_t c[3]) { c[0] = k % V[0], c[1] = k / V[0] % V[1], c[2] = k / (V[0] * V[1]); }

/* Where Verlet box (a, b, c) sits in bins[]. */
static size_t stored_at(size_t a, size_t b, size_t c) {
    size_t tile = ((c / TZ) * NY + b / T) * NX + a / T;
    return tile * T * T * TZ + ((c % TZ) * T + b % T) * T + a % T;
}

static void external(const struct particle *p, double *f) {
    for (int d = 0; d < D; d++) f[d] = 0.0;
    if (scenario == CONTRACTION) {
        double dx[D];
        for (int d = 0; d < D; d++) dx[d] = p->x[d] - centre[d];
        double len = length(dx);
        if (len < 1e-9) len = 1e-9;
        for (int d = 0; d < D; d++) f[d] = -0.6 * dx[d] / len;
    } else if (scenario == GRAVITY) {
        f[D - 1] = -0.6;
    }
}

/* Adds the Lennard-Jones forces of QS on P (within the cutoff, soft core) in order. The sums
   run in locals: through FX_SUM, FY_SUM and FZ_SUM (unused in 2D), which may alias a particle's
   doubles as far as the compiler knows, every addition went to memory. */
static void pair_forces(const struct particle *p, const struct list *qs, double *fx_sum, double *fy_sum,
                        double *fz_sum) {
    /* The axes written out and summed through a pointer each: as loops over an array, GCC
       packed them into vector registers, and the shuffles that sum r2 cost about 5 % of a 2D
       step's time. */
    double fx = *fx_sum, fy = *fy_sum;
#if D == 3
    double fz = *fz_sum;
#else
    (void)fz_sum;
#endif
    for (size_t i = 0; i < qs->n; i++) {
        const struct particle *q = &qs->p[i];
        if (q->id == p->id) continue;
        double dx = p->x[0] - q->x[0], dy = p->x[1] - q->x[1];
        double r2 = dx * dx + dy * dy;
#if D == 3
        double dz = p->x[2] - q->x[2];
        r2 += dz * dz;
#endif
        if (r2 >= CUTOFF * CUTOFF) continue;
        if (r2 < R_MIN * R_MIN) r2 = R_MIN * R_MIN;
        double inv6 = 1.0 / (r2 * r2 * r2);
        double s = 24.0 * inv6 * (2.0 * inv6 - 1.0) / r2;
        fx += s * dx;
        fy += s * dy;
#if D == 3
        fz += s * dz;
#endif
    }
    *fx_sum = fx, *fy_sum = fy;
#if D == 3
    *fz_sum = fz;
#endif
}

/* A reflecting wall at 0 and at LIMIT along one axis. */
static void reflect(double *pos, double *vel, double limit) {
    if (*pos < 0.0) {
        *pos = -*pos;
        *vel = -*vel;
    } else if (*pos >= limit) {
        *pos = 2.0 * limit - *pos - 1e-9;
        *vel = -*vel;
    }
}

static void half_kick(double *v, const double *f) {
    for (int d = 0; d < D; d++) v[d] += 0.5 * DT * f[d];
}

static void kick_drift(struct particle *p) {
    half_kick(p->v, p->f);
    double speed2 = squared(p->v);
    if (speed2 * DT * DT > MAX_STEP * MAX_STEP) {
        double s = MAX_STEP / (sqrt(speed2) * DT);
        for (int d = 0; d < D; d++) p->v[d] *= s;
    }
    for (int d = 0; d < D; d++) {
        p->x[d] += DT * p->v[d];
        reflect(&p->x[d], &p->v[d], extent[d]);
    }
}

/* The boxes around box (a, b, c) whose particles its step reads: lo[d]..hi[d] (hi excluded)
   along each axis of the 5x5(x5) window, clipped at the walls; c the box's own coordinates. */
struct window {
    size_t c[3], lo[3], hi[3];
};

static struct window window_at(size_t a, size_t b, size_t c) {
    struct window w = {.c = {a, b, c}};
    for (int d = 0; d < 3; d++) {
        w.lo[d] = w.c[d] >= 2 ? w.c[d] - 2 : 0;
        w.hi[d] = w.c[d] + 3 < V[d] ? w.c[d] + 3 : V[d];
    }
    return w;
}

/* One step of box K, whose window is WP, into OUT, reading the window's boxes AROUND (in index
   order over the window): forces on its particles, with FINISH the half-kick that ends the
   step, then the half-kick and drift that start the next, each particle filed as staying or
   leaving. The order of every sum is apps/src/md.rs's (Md::step_box). */
static void step_box(size_t k, const struct window *wp, struct bin *const *around, struct bin *out, int finish,
                     struct list (*arr)[HOOD]) {
    const struct window w = *wp;
    size_t wa = w.hi[0] - w.lo[0], wb = w.hi[1] - w.lo[1];
#define AT(a, b, c) around[(((c) - w.lo[2]) * wb + ((b) - w.lo[1])) * wa + ((a) - w.lo[0])]
    /* The arrivals of the neighbourhood, in one pass over the window's leavers in index order:
       each slot gets its box's arrivals by source box, then list order. */
    for (int s = MIDDLE - LAYERS * 9 / 2; s <= MIDDLE + LAYERS * 9 / 2; s++) (*arr)[s].n = 0;
    for (size_t c = w.lo[2]; c < w.hi[2]; c++)
        for (size_t b = w.lo[1]; b < w.hi[1]; b++)
            for (size_t a = w.lo[0]; a < w.hi[0]; a++) {
                const struct list *leave = &AT(a, b, c)->leave;
                for (size_t m = 0; m < leave->n; m++) {
                    const struct particle *p = &leave->p[m];
                    size_t to[3];
                    coords(p->bin, to);
                    long di = (long)to[0] - (long)w.c[0], dj = (long)to[1] - (long)w.c[1],
                         dl = (long)to[2] - (long)w.c[2];
                    if (labs(di) <= 1 && labs(dj) <= 1 && labs(dl) <= 1)
                        push(&(*arr)[9 * (dl + 1) + 3 * (dj + 1) + di + 1], p);
                }
            }
    /* The neighbourhood in a fixed order (z slowest, x fastest): its boxes and their slots. */
    const struct bin *hood[HOOD];
    int slot[HOOD], count = 0;
    for (long dl = -(LAYERS / 2); dl <= LAYERS / 2; dl++)
        for (long dj = -1; dj <= 1; dj++)
            for (long di = -1; di <= 1; di++) {
                long a = (long)w.c[0] + di, b = (long)w.c[1] + dj, c = (long)w.c[2] + dl;
                if (a < 0 || b < 0 || c < 0 || a >= (long)V[0] || b >= (long)V[1] || c >= (long)V[2]) continue;
                hood[count] = AT((size_t)a, (size_t)b, (size_t)c);
                slot[count++] = (int)(9 * (dl + 1) + 3 * (dj + 1) + di + 1);
            }
    out->stay.n = out->leave.n = 0;
    const struct list *own[2] = {&AT(w.c[0], w.c[1], w.c[2])->stay, &(*arr)[MIDDLE]};
#undef AT
    for (int o = 0; o < 2; o++)
        for (size_t m = 0; m < own[o]->n; m++) {
            struct particle p = own[o]->p[m];
            double f[D];
            external(&p, f);
            for (int h = 0; h < count; h++) {
                pair_forces(&p, &hood[h]->stay, &f[0], &f[1], &f[D - 1]);
                pair_forces(&p, &(*arr)[slot[h]], &f[0], &f[1], &f[D - 1]);
            }
            memcpy(p.f, f, sizeof f);
            if (finish) half_kick(p.v, f);
            kick_drift(&p);
            p.bin = (uint32_t)box_of(p.x);
            push(p.bin == k ? &out->stay : &out->leave, &p);
        }
}

/* The tiles whose old particles the task of a tile reads: those within two Verlet boxes of it,
   lo[d]..hi[d] (hi excluded) of the tile grid along each axis. */
struct tiles {
    size_t lo[3], hi[3];
};

static struct tiles tiles_read_by(size_t tile) {
    size_t n[3] = {NX, NY, NZ}, t[3] = {tile % NX, tile / NX % NY, tile / (NX * NY)};
    size_t side[3] = {T, T, TZ};
    struct tiles r;
    for (int d = 0; d < 3; d++) {
        size_t reach = (2 + side[d] - 1) / side[d];
        r.lo[d] = t[d] >= reach ? t[d] - reach : 0;
        r.hi[d] = t[d] + reach + 1 < n[d] ? t[d] + reach + 1 : n[d];
    }
    return r;
}

/* Tile k's task: buffer 0 its new particles, then the old ones of tiles_read_by(k), in index
   order. */
struct tile_arg {
    size_t k;
    long it;
};

/* Most Verlet boxes a task's reach spans along one axis: a tile's side and two on each side. */
#define REACH_MAX (1024 + 4)

static void md_tile(void *buffers[], void *cl_arg) {
    const struct tile_arg *arg = cl_arg;
    double t0 = pbs_example_task_begin(arg->k, arg->it);
    if (t0 < 0) return;
    struct tiles r = tiles_read_by(arg->k);
    struct bin *out = (struct bin *)STARPU_VARIABLE_GET_PTR(buffers[0]);
    int me = starpu_worker_get_id();
    struct list(*arr)[HOOD] = &arrived[me >= 0 ? me : STARPU_NMAXWORKERS];
    size_t t[3] = {arg->k % NX, arg->k / NX % NY, arg->k / (NX * NY)}, side[3] = {T, T, TZ};
    /* Along axis d, Verlet coordinate x of the task's reach (from[d] its first) is in the
       buffers' slab tile[d][x - from[d]] at offset at[d][x - from[d]] within a tile. */
    size_t tile[3][REACH_MAX], at[3][REACH_MAX];
    size_t from[3], upto[3];
    size_t stride_tile[3] = {1, r.hi[0] - r.lo[0], (r.hi[0] - r.lo[0]) * (r.hi[1] - r.lo[1])};
    size_t stride_box[3] = {1, T, T * T};
    for (int d = 0; d < 3; d++) {
        from[d] = t[d] * side[d] >= 2 ? t[d] * side[d] - 2 : 0;
        upto[d] = (t[d] + 1) * side[d] + 2 < V[d] ? (t[d] + 1) * side[d] + 2 : V[d];
        for (size_t x = from[d]; x < upto[d]; x++) {
            tile[d][x - from[d]] = (x / side[d] - r.lo[d]) * stride_tile[d];
            at[d][x - from[d]] = x % side[d] * stride_box[d];
        }
    }
    struct bin *around[125];
    for (size_t c = t[2] * TZ; c < (t[2] + 1) * TZ; c++)
        for (size_t b = t[1] * T; b < (t[1] + 1) * T; b++)
            for (size_t a = t[0] * T; a < (t[0] + 1) * T; a++) {
                size_t k = (c * V[1] + b) * V[0] + a;
                struct window w = window_at(a, b, c);
                size_t n = 0;
                for (size_t z = w.lo[2]; z < w.hi[2]; z++)
                    for (size_t y = w.lo[1]; y < w.hi[1]; y++)
                        for (size_t x = w.lo[0]; x < w.hi[0]; x++) {
                            size_t i[3] = {x - from[0], y - from[1], z - from[2]};
                            void *buf = (void *)STARPU_VARIABLE_GET_PTR(
                                buffers[1 + tile[0][i[0]] + tile[1][i[1]] + tile[2][i[2]]]);
                            around[n++] = (struct bin *)buf + at[0][i[0]] + at[1][i[1]] + at[2][i[2]];
                        }
                step_box(k, &w, around, out + ((c % TZ) * T + b % T) * T + a % T, 1, arr);
            }
    pbs_example_task_end(arg->it, t0);
}

static struct starpu_perfmodel model = {.type = STARPU_HISTORY_BASED, .symbol = "pbs_starpu_md"};

static struct starpu_codelet step = {
    .cpu_funcs = {md_tile},
    .cpu_funcs_name = {"md_tile"},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &model,
    .name = "md_step",
};

static int option(const char *key, const char *value) {
    if (!strcmp(key, "--scenario")) {
        for (int s = 0; s < 4; s++)
            if (!strcmp(value, SCENARIOS[s])) {
                scenario = (enum scenario)s;
                return 1;
            }
        fprintf(stderr, "md: unknown scenario %s; expected uniform, contraction, expansion or gravity\n", value);
        return -1;
    }
    if (!strcmp(key, "--tile")) {
        char *end = NULL;
        long t = strtol(value, &end, 10);
        if (*end || t < 1 || t > 1024) {
            fprintf(stderr, "md: --tile %s: Verlet boxes per tile side, 1 to 1024\n", value);
            return -1;
        }
        T = (size_t)t;
        return 1;
    }
    if (!strcmp(key, "--seed")) {
        char *end = NULL;
        errno = 0;
        seed = strtoull(value, &end, 10);
        if (*end || errno || value[0] == '-') {
            fprintf(stderr, "md: --seed %s is not a number from 0 to 2^64 - 1\n", value);
            return -1;
        }
        return 1;
    }
    return 0;
}

/* Jittered lattices, as Md::new's (md.rs's initial_particles): no two particles start closer
   than the soft core. The lattice's first axis runs fastest, each point's jitter is drawn axis
   by axis, and each coordinate advances by adding the spacing (which fixes the points'
   rounding). */
static int place(struct bin *start, uint64_t *rng) {
    double spacing = scenario == UNIFORM ? 1.6 : scenario == CONTRACTION ? 1.2 : scenario == EXPANSION ? 1.1 : 1.3;
    double radius = INFINITY;
    for (int d = 0; d < D; d++) radius = extent[d] < radius ? extent[d] : radius;
    radius *= 0.3;
    double point[D];
    for (int d = 0; d < D; d++) point[d] = 0.5 * spacing;
    for (;;) {
        double x[D], dx[D];
        for (int d = 0; d < D; d++) x[d] = point[d] + 0.1 * spacing * (rng_f64(rng) - 0.5);
        for (int d = 0; d < D; d++) dx[d] = x[d] - centre[d];
        int keep = scenario == UNIFORM       ? 1
                   : scenario == CONTRACTION ? squared(dx) < radius * radius
                   : scenario == EXPANSION   ? length(dx) < 0.5 * radius
                                             : x[D - 1] > 0.35 * extent[D - 1];
        if (keep) {
            if (particles > UINT32_MAX) {
                fprintf(stderr, "md: more than 2^32 particles\n");
                return -1;
            }
            struct particle p = {.id = (uint32_t)particles};
            memcpy(p.x, x, sizeof x);
            if (scenario == EXPANSION)
                for (int d = 0; d < D; d++) p.v[d] = 0.3 * dx[d];
            p.bin = (uint32_t)box_of(p.x);
            size_t c[3];
            coords(p.bin, c);
            if (push(&start[stored_at(c[0], c[1], c[2])].stay, &p)) return -1;
            particles++;
        }
        int axis = 0;
        for (;;) {
            point[axis] += spacing;
            if (point[axis] < extent[axis]) break;
            if (axis + 1 == D) return 0;
            point[axis] = 0.5 * spacing;
            axis++;
        }
    }
}

static size_t verlet_boxes(void) { return V[0] * V[1] * V[2]; }

static int setup(size_t nx, size_t ny, starpu_data_handle_t *handle) {
    if (D == 2 && NZ != 1) {
        fprintf(stderr, "md: a 2D code: --nz must be 1 (md3d is the 3D md)\n");
        return -1;
    }
    TZ = D == 3 ? T : 1;
    size_t tiles = nx * ny * NZ, n[3] = {nx, ny, NZ}, side[3] = {T, T, TZ};
    double boxes = 1.0;
    for (int d = 0; d < 3; d++) boxes *= (double)n[d] * (double)side[d];
    /* Every Verlet box must have a 32-bit number. */
    if (boxes > (double)UINT32_MAX) {
        fprintf(stderr,
                "md: %zux%zux%zu tiles of %zu Verlet boxes a side: more boxes than a particle's 32-bit box number holds\n",
                nx, ny, NZ, T);
        return -1;
    }
    for (int d = 0; d < 3; d++) V[d] = n[d] * side[d];
    for (int d = 0; d < D; d++) {
        extent[d] = (double)V[d] * CUTOFF;
        centre[d] = (scenario == CONTRACTION ? 0.3 : 0.5) * extent[d];
    }
    bins[0] = calloc(verlet_boxes(), sizeof(struct bin));
    bins[1] = calloc(verlet_boxes(), sizeof(struct bin));
    if (!bins[0] || !bins[1]) {
        fprintf(stderr, "md: out of memory for %zu boxes\n", verlet_boxes());
        return -1;
    }
    /* The placement (in bins[1]), then the initial forces and the first half-kick and drift
       (into bins[0]): the state every iteration starts from. */
    uint64_t rng = seed;
    if (place(bins[1], &rng)) return -1;
    struct bin *around[125];
    for (size_t k = 0; k < verlet_boxes(); k++) {
        size_t at[3];
        coords(k, at);
        struct window w = window_at(at[0], at[1], at[2]);
        size_t count = 0;
        for (size_t c = w.lo[2]; c < w.hi[2]; c++)
            for (size_t b = w.lo[1]; b < w.hi[1]; b++)
                for (size_t a = w.lo[0]; a < w.hi[0]; a++) around[count++] = &bins[1][stored_at(a, b, c)];
        step_box(k, &w, around, &bins[0][stored_at(w.c[0], w.c[1], w.c[2])], 0, &arrived[STARPU_NMAXWORKERS]);
    }
    if (out_of_memory) {
        fprintf(stderr, "md: out of memory for %zu particles\n", particles);
        return -1;
    }
    size_t per_tile = T * T * TZ;
    for (int b = 0; b < 2; b++)
        for (size_t t = 0; t < tiles; t++)
            starpu_variable_data_register(&handle[(size_t)b * tiles + t], STARPU_MAIN_RAM,
                                          (uintptr_t)&bins[b][t * per_tile], per_tile * sizeof(struct bin));
    return 0;
}

static int submit(size_t k, long it, starpu_data_handle_t *from, starpu_data_handle_t *to) {
    struct tiles r = tiles_read_by(k);
    struct starpu_data_descr descr[1 + 125];
    int n = 0;
    /* Read and written: the task reuses the lists its boxes held two iterations ago. */
    descr[n++] = (struct starpu_data_descr){to[k], STARPU_RW};
    for (size_t z = r.lo[2]; z < r.hi[2]; z++)
        for (size_t y = r.lo[1]; y < r.hi[1]; y++)
            for (size_t x = r.lo[0]; x < r.hi[0]; x++)
                descr[n++] = (struct starpu_data_descr){from[(z * NY + y) * NX + x], STARPU_R};
    struct tile_arg *arg = malloc(sizeof *arg); /* StarPU frees it with the task */
    if (!arg) return -ENOMEM;
    *arg = (struct tile_arg){k, it};
    return starpu_task_insert(&step, STARPU_DATA_MODE_ARRAY, descr, n, STARPU_CL_ARGS, arg, sizeof *arg, 0);
}

/* The particles of box k now, in the order every task reads them: those that stayed, then
   those that arrived from each neighbour in turn. CALL gets each. */
static void members(const struct bin *state, size_t k, void (*call)(const struct particle *, void *), void *ctx) {
    size_t c[3];
    coords(k, c);
    const struct list *stay = &state[stored_at(c[0], c[1], c[2])].stay;
    for (size_t m = 0; m < stay->n; m++) call(&stay->p[m], ctx);
    for (long dl = -(LAYERS / 2); dl <= LAYERS / 2; dl++)
        for (long dj = -1; dj <= 1; dj++)
            for (long di = -1; di <= 1; di++) {
                long a = (long)c[0] + di, b = (long)c[1] + dj, l = (long)c[2] + dl;
                if (a < 0 || b < 0 || l < 0 || a >= (long)V[0] || b >= (long)V[1] || l >= (long)V[2]) continue;
                const struct list *leave = &state[stored_at((size_t)a, (size_t)b, (size_t)l)].leave;
                for (size_t m = 0; m < leave->n; m++)
                    if (leave->p[m].bin == k) call(&leave->p[m], ctx);
            }
}

struct tally {
    size_t count, misfiled;
    uint64_t hash;
    size_t box;
};

static void hash_word(uint64_t *h, uint64_t w) {
    for (int b = 0; b < 8; b++) *h = (*h ^ ((w >> (8 * b)) & 0xff)) * 0x100000001b3ull;
}

static void tally(const struct particle *p, void *ctx) {
    struct tally *t = ctx;
    t->count++;
    t->misfiled += p->bin != t->box || box_of(p->x) != t->box;
    hash_word(&t->hash, p->id);
    for (int part = 0; part < 2; part++)
        for (int d = 0; d < D; d++) {
            uint64_t bits;
            memcpy(&bits, part == 0 ? &p->x[d] : &p->v[d], 8);
            hash_word(&t->hash, bits);
        }
}

/* FNV-1a over the little-endian bytes of each particle's id, position and velocity, box by box
   in member order: Md::checksum's. */
static struct tally tally_state(long iterations) {
    struct tally t = {.hash = 0xcbf29ce484222325ull};
    for (t.box = 0; t.box < verlet_boxes(); t.box++) members(bins[iterations % 2], t.box, tally, &t);
    return t;
}

static int check(long iterations) {
    if (out_of_memory) {
        fprintf(stderr, "md: out of memory while stepping: particles were dropped\n");
        return -1;
    }
    struct tally t = tally_state(iterations);
    if (t.count != particles || t.misfiled) {
        fprintf(stderr, "md: %zu particles at the end of %zu, %zu filed in a box their position is not in\n", t.count,
                particles, t.misfiled);
        return -1;
    }
    return 0;
}

static uint64_t checksum(long iterations) { return tally_state(iterations).hash; }

static void print_fields(FILE *out, long iterations) {
    (void)iterations;
    fprintf(out, " scenario=%s seed=%llu verlet=%zux%zu", SCENARIOS[scenario], (unsigned long long)seed, V[0], V[1]);
    if (D == 3) fprintf(out, "x%zu", V[2]);
    fprintf(out, " particles=%zu", particles);
}

/* A task reads and writes its tile's particles, and reads two layers of Verlet boxes of each
   face neighbour's (the whole tile with --tile 1). */
static uint64_t per_box(void) { return (particles / verlet_boxes() + 1) * sizeof(struct particle); }
static uint64_t box_bytes(void) { return T * T * TZ * per_box(); }
static uint64_t halo_bytes(void) { return (T < 2 ? T * T * TZ : 2 * T * TZ) * per_box(); }
/* The tile's new handle: the footprint is the old one, which the tile's previous task wrote. */
static uint64_t written_bytes(void) { return box_bytes(); }

static void cleanup(void) {
    for (int b = 0; b < 2; b++) {
        for (size_t k = 0; k < verlet_boxes(); k++) free(bins[b][k].stay.p), free(bins[b][k].leave.p);
        free(bins[b]);
    }
    for (int w = 0; w <= STARPU_NMAXWORKERS; w++)
        for (int s = 0; s < HOOD; s++) free(arrived[w][s].p);
}

PBS_EXAMPLE_MAIN(D == 2 ? "md" : "md3d", "[--tile T] [--scenario uniform|contraction|expansion|gravity] [--seed N]")
