/*
 * The md app of apps/src/md.rs as StarPU tasks: 2D Lennard-Jones molecular dynamics with cell
 * lists on Verlet boxes of side the cutoff, velocity Verlet in one step per Verlet box per
 * iteration. Box k's step computes the forces on the particles now in k from its 3x3
 * neighbourhood, ends the step and starts the next, and files each particle as staying in k or
 * leaving for a neighbour; the particles in a box are its staying ones followed by those that
 * left its neighbours for it, so a step reads the leavers of the 5x5 boxes around it.
 *
 * A Verlet box holds two or three particles, a few microseconds of work: far less than what
 * StarPU spends on a task. So the StarPU grid's boxes are tiles of T x T Verlet boxes (--tile,
 * default 4): --nx and --ny count tiles, the domain has (nx T) x (ny T) Verlet boxes, and one
 * task steps a tile's Verlet boxes. Each tile has two data handles (its Verlet boxes' particles
 * before an even and an odd iteration), registered with StarPU's variable interface; a task
 * writes its tile's new handle and reads the old handles of the tiles within two Verlet boxes
 * of it (3 x 3 tiles, 5 x 5 with --tile 1). The same operations in the same order as the Rust
 * app: the checksum is that of `pbs-bench run --app md --json` with the same scenario, seed and
 * iteration count on (nx T) x (ny T) boxes.
 *
 *   starpu/build.sh
 *   target/starpu/md [the options of driver.h] [--tile 4] [--seed 1]
 *                    [--scenario uniform|contraction|expansion|gravity]
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
#define CUTOFF 2.5
#define DT 0.004
#define R_MIN 0.8              /* pair distances are floored here (a soft core) */
#define MAX_STEP (0.2 * CUTOFF) /* largest displacement per step: particles never skip a box */

enum scenario { UNIFORM, CONTRACTION, EXPANSION, GRAVITY };
static const char *const SCENARIOS[] = {"uniform", "contraction", "expansion", "gravity"};
static enum scenario scenario = GRAVITY;
static uint64_t seed = 1;
static size_t T = 4;  /* Verlet boxes per tile side */
static size_t VX, VY; /* Verlet boxes along x and y: NX T, NY T */
static double width, height, centre_x, centre_y;

/* As apps/src/md.rs's: 56 bytes. */
struct particle {
    uint32_t id, bin; /* bin: the box its position lies in */
    double x, y, vx, vy, fx, fy;
};

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
   boxes row-major): a tile's data is one piece of memory, for its StarPU handle. */
static struct bin *bins[2];
static size_t particles;      /* placed at the start */
static _Atomic int out_of_memory;
/* Per worker (the last row: the main thread's, for the first step), the arrivals in each box of
   a task's 3x3 neighbourhood (slot 3 (dj + 1) + di + 1): reused, so that a step allocates
   nothing once they have grown. */
static struct list arrived[STARPU_NMAXWORKERS + 1][9];

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

/* The box a position lies in; Rust's saturating casts for what a wall reflects to (>= 0). */
static size_t index_along(double pos, size_t n) {
    double q = pos / CUTOFF;
    if (!(q > 0)) return 0;
    return q < (double)n ? (size_t)q : n - 1;
}

static size_t box_of(double x, double y) { return index_along(y, VY) * VX + index_along(x, VX); }

/* Where Verlet box (a, b) sits in bins[]. */
static size_t stored_at(size_t a, size_t b) { return ((b / T) * NX + a / T) * T * T + (b % T) * T + a % T; }

static void external(const struct particle *p, double *fx, double *fy) {
    *fx = *fy = 0.0;
    if (scenario == CONTRACTION) {
        double dx = p->x - centre_x, dy = p->y - centre_y;
        double d = hypot(dx, dy);
        if (d < 1e-9) d = 1e-9;
        *fx = -0.6 * dx / d;
        *fy = -0.6 * dy / d;
    } else if (scenario == GRAVITY) {
        *fy = -0.6;
    }
}

/* Adds the Lennard-Jones forces of QS on P (within the cutoff, soft core) in order. The sums
   run in locals: through FX and FY, which may alias a particle's doubles as far as the compiler
   knows, every addition went to memory. */
static void pair_forces(const struct particle *p, const struct list *qs, double *fx_sum, double *fy_sum) {
    double fx = *fx_sum, fy = *fy_sum;
    for (size_t i = 0; i < qs->n; i++) {
        const struct particle *q = &qs->p[i];
        if (q->id == p->id) continue;
        double dx = p->x - q->x, dy = p->y - q->y;
        double r2 = dx * dx + dy * dy;
        if (r2 >= CUTOFF * CUTOFF) continue;
        if (r2 < R_MIN * R_MIN) r2 = R_MIN * R_MIN;
        double inv6 = 1.0 / (r2 * r2 * r2);
        double f = 24.0 * inv6 * (2.0 * inv6 - 1.0) / r2;
        fx += f * dx;
        fy += f * dy;
    }
    *fx_sum = fx, *fy_sum = fy;
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

static void kick_drift(struct particle *p) {
    p->vx += 0.5 * DT * p->fx;
    p->vy += 0.5 * DT * p->fy;
    double speed2 = p->vx * p->vx + p->vy * p->vy;
    if (speed2 * DT * DT > MAX_STEP * MAX_STEP) {
        double s = MAX_STEP / (sqrt(speed2) * DT);
        p->vx *= s;
        p->vy *= s;
    }
    p->x += DT * p->vx;
    p->y += DT * p->vy;
    reflect(&p->x, &p->vx, width);
    reflect(&p->y, &p->vy, height);
}

/* The boxes around box k whose particles its step reads: columns a0..a1 and rows b0..b1 (ends
   excluded) of the 5x5 window, clipped at the walls. */
struct window {
    size_t i, j, a0, a1, b0, b1;
};

static struct window window_of(size_t k) {
    struct window w = {.i = k % VX, .j = k / VX};
    w.a0 = w.i >= 2 ? w.i - 2 : 0, w.a1 = w.i + 3 < VX ? w.i + 3 : VX;
    w.b0 = w.j >= 2 ? w.j - 2 : 0, w.b1 = w.j + 3 < VY ? w.j + 3 : VY;
    return w;
}

/* One step of box K into OUT, reading the window's boxes AROUND (row-major over the window):
   forces on its particles, with FINISH the half-kick that ends the step, then the half-kick
   and drift that start the next, each particle filed as staying or leaving. The order of
   every sum is apps/src/md.rs's (Md::step_box). */
static void step_box(size_t k, struct bin *const *around, struct bin *out, int finish, struct list *arr) {
    struct window w = window_of(k);
    size_t wa = w.a1 - w.a0;
#define AT(a, b) around[((b) - w.b0) * wa + ((a) - w.a0)]
    /* The arrivals of the 3x3 neighbourhood, in one pass over the window's leavers in index
       order: each slot gets its box's arrivals by source box, then list order. */
    for (int s = 0; s < 9; s++) arr[s].n = 0;
    for (size_t b = w.b0; b < w.b1; b++)
        for (size_t a = w.a0; a < w.a1; a++) {
            const struct list *leave = &AT(a, b)->leave;
            for (size_t m = 0; m < leave->n; m++) {
                const struct particle *p = &leave->p[m];
                long di = (long)(p->bin % VX) - (long)w.i, dj = (long)(p->bin / VX) - (long)w.j;
                if (labs(di) <= 1 && labs(dj) <= 1) push(&arr[3 * (dj + 1) + di + 1], p);
            }
        }
    /* The 3x3 neighbourhood in a fixed order: its boxes and their slots. */
    const struct bin *hood[9];
    int slot[9], count = 0;
    for (long dj = -1; dj <= 1; dj++)
        for (long di = -1; di <= 1; di++) {
            long a = (long)w.i + di, b = (long)w.j + dj;
            if (a < 0 || b < 0 || a >= (long)VX || b >= (long)VY) continue;
            hood[count] = AT((size_t)a, (size_t)b);
            slot[count++] = (int)(3 * (dj + 1) + di + 1);
        }
    out->stay.n = out->leave.n = 0;
    const struct list *own[2] = {&AT(w.i, w.j)->stay, &arr[4]};
#undef AT
    for (int o = 0; o < 2; o++)
        for (size_t m = 0; m < own[o]->n; m++) {
            struct particle p = own[o]->p[m];
            double fx, fy;
            external(&p, &fx, &fy);
            for (int h = 0; h < count; h++) {
                pair_forces(&p, &hood[h]->stay, &fx, &fy);
                pair_forces(&p, &arr[slot[h]], &fx, &fy);
            }
            p.fx = fx;
            p.fy = fy;
            if (finish) {
                p.vx += 0.5 * DT * fx;
                p.vy += 0.5 * DT * fy;
            }
            kick_drift(&p);
            p.bin = (uint32_t)box_of(p.x, p.y);
            push(p.bin == k ? &out->stay : &out->leave, &p);
        }
}

/* The tiles whose old particles the task of TILE reads: those within two Verlet boxes of it,
   columns x0..x1 and rows y0..y1 of the tile grid (ends excluded). */
struct tiles {
    size_t x0, x1, y0, y1;
};

static struct tiles tiles_read_by(size_t tile) {
    size_t reach = (2 + T - 1) / T, tx = tile % NX, ty = tile / NX;
    return (struct tiles){tx >= reach ? tx - reach : 0, tx + reach + 1 < NX ? tx + reach + 1 : NX,
                          ty >= reach ? ty - reach : 0, ty + reach + 1 < NY ? ty + reach + 1 : NY};
}

/* Tile k's task: buffer 0 its new particles, then the old ones of tiles_read_by(k), row-major. */
struct tile_arg {
    size_t k;
    long it;
};

static void md_tile(void *buffers[], void *cl_arg) {
    const struct tile_arg *arg = cl_arg;
    double t0 = pbs_example_task_begin(arg->k, arg->it);
    if (t0 < 0) return;
    struct tiles r = tiles_read_by(arg->k);
    struct bin *out = (struct bin *)STARPU_VARIABLE_GET_PTR(buffers[0]);
    int me = starpu_worker_get_id();
    struct list *arr = arrived[me >= 0 ? me : STARPU_NMAXWORKERS];
    size_t tx = arg->k % NX, ty = arg->k / NX;
    /* Verlet column x of the task's reach (x0 = its first) is in buffer column tile_col[x - x0]
       at offset col_at[x - x0]; rows alike. */
    size_t x0 = tx * T >= 2 ? tx * T - 2 : 0, y0 = ty * T >= 2 ? ty * T - 2 : 0;
    size_t tile_col[1028], col_at[1028], tile_row[1028], row_at[1028];
    for (size_t x = x0; x < VX && x < (tx + 1) * T + 2; x++) tile_col[x - x0] = x / T - r.x0, col_at[x - x0] = x % T;
    for (size_t y = y0; y < VY && y < (ty + 1) * T + 2; y++)
        tile_row[y - y0] = (y / T - r.y0) * (r.x1 - r.x0), row_at[y - y0] = (y % T) * T;
    for (size_t b = ty * T; b < (ty + 1) * T; b++)
        for (size_t a = tx * T; a < (tx + 1) * T; a++) {
            struct window w = window_of(b * VX + a);
            struct bin *around[25];
            size_t n = 0;
            for (size_t y = w.b0; y < w.b1; y++)
                for (size_t x = w.a0; x < w.a1; x++) {
                    void *tile = (void *)STARPU_VARIABLE_GET_PTR(buffers[1 + tile_row[y - y0] + tile_col[x - x0]]);
                    around[n++] = (struct bin *)tile + row_at[y - y0] + col_at[x - x0];
                }
            step_box(b * VX + a, around, out + (b % T) * T + a % T, 1, arr);
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

/* Jittered lattices, as Md::new's: no two particles start closer than the soft core. */
static int place(struct bin *start, uint64_t *rng) {
    double spacing = scenario == UNIFORM ? 1.6 : scenario == CONTRACTION ? 1.2 : scenario == EXPANSION ? 1.1 : 1.3;
    double radius = 0.3 * (width < height ? width : height);
    for (double y = 0.5 * spacing; y < height; y += spacing)
        for (double x = 0.5 * spacing; x < width; x += spacing) {
            double jx = 0.1 * spacing * (rng_f64(rng) - 0.5), jy = 0.1 * spacing * (rng_f64(rng) - 0.5);
            double px = x + jx, py = y + jy, dx = px - centre_x, dy = py - centre_y;
            int keep = scenario == UNIFORM       ? 1
                       : scenario == CONTRACTION ? dx * dx + dy * dy < radius * radius
                       : scenario == EXPANSION   ? hypot(dx, dy) < 0.5 * radius
                                                 : py > 0.35 * height;
            if (!keep) continue;
            if (particles > UINT32_MAX) {
                fprintf(stderr, "md: more than 2^32 particles\n");
                return -1;
            }
            struct particle p = {.id = (uint32_t)particles, .x = px, .y = py};
            if (scenario == EXPANSION) p.vx = 0.3 * dx, p.vy = 0.3 * dy;
            p.bin = (uint32_t)box_of(px, py);
            if (push(&start[stored_at(p.bin % VX, p.bin / VX)].stay, &p)) return -1;
            particles++;
        }
    return 0;
}

static int setup(size_t nx, size_t ny, starpu_data_handle_t *handle) {
    if (pbs_example_nz != 1) {
        fprintf(stderr, "md: a 2D code: --nz must be 1\n");
        return -1;
    }
    size_t tiles = nx * ny;
    if (nx > (size_t)UINT32_MAX / T || ny > (size_t)UINT32_MAX / T || nx * T * ny * T > UINT32_MAX) {
        fprintf(stderr, "md: %zux%zu tiles of %zux%zu Verlet boxes: more boxes than a particle's 32-bit box number holds\n",
                nx, ny, T, T);
        return -1;
    }
    VX = nx * T, VY = ny * T;
    size_t boxes = VX * VY;
    width = (double)VX * CUTOFF, height = (double)VY * CUTOFF;
    centre_x = (scenario == CONTRACTION ? 0.3 : 0.5) * width;
    centre_y = (scenario == CONTRACTION ? 0.3 : 0.5) * height;
    bins[0] = calloc(boxes, sizeof(struct bin));
    bins[1] = calloc(boxes, sizeof(struct bin));
    if (!bins[0] || !bins[1]) {
        fprintf(stderr, "md: out of memory for %zu boxes\n", boxes);
        return -1;
    }
    /* The placement (in bins[1]), then the initial forces and the first half-kick and drift
       (into bins[0]): the state every iteration starts from. */
    uint64_t rng = seed;
    if (place(bins[1], &rng)) return -1;
    struct bin *around[25];
    for (size_t k = 0; k < boxes; k++) {
        struct window w = window_of(k);
        size_t n = 0;
        for (size_t b = w.b0; b < w.b1; b++)
            for (size_t a = w.a0; a < w.a1; a++) around[n++] = &bins[1][stored_at(a, b)];
        step_box(k, around, &bins[0][stored_at(k % VX, k / VX)], 0, arrived[STARPU_NMAXWORKERS]);
    }
    if (out_of_memory) {
        fprintf(stderr, "md: out of memory for %zu particles\n", particles);
        return -1;
    }
    for (int b = 0; b < 2; b++)
        for (size_t t = 0; t < tiles; t++)
            starpu_variable_data_register(&handle[(size_t)b * tiles + t], STARPU_MAIN_RAM,
                                          (uintptr_t)&bins[b][t * T * T], T * T * sizeof(struct bin));
    return 0;
}

static int submit(size_t k, long it, starpu_data_handle_t *from, starpu_data_handle_t *to) {
    struct tiles r = tiles_read_by(k);
    struct starpu_data_descr descr[26];
    int n = 0;
    /* Read and written: the task reuses the lists its boxes held two iterations ago. */
    descr[n++] = (struct starpu_data_descr){to[k], STARPU_RW};
    for (size_t y = r.y0; y < r.y1; y++)
        for (size_t x = r.x0; x < r.x1; x++) descr[n++] = (struct starpu_data_descr){from[y * NX + x], STARPU_R};
    struct tile_arg *arg = malloc(sizeof *arg); /* StarPU frees it with the task */
    if (!arg) return -ENOMEM;
    *arg = (struct tile_arg){k, it};
    return starpu_task_insert(&step, STARPU_DATA_MODE_ARRAY, descr, n, STARPU_CL_ARGS, arg, sizeof *arg, 0);
}

/* The particles of box k now, in the order every task reads them: those that stayed, then
   those that arrived from each neighbour in turn. CALL gets each. */
static void members(const struct bin *state, size_t k, void (*call)(const struct particle *, void *), void *ctx) {
    size_t i = k % VX, j = k / VX;
    const struct list *stay = &state[stored_at(i, j)].stay;
    for (size_t m = 0; m < stay->n; m++) call(&stay->p[m], ctx);
    for (long dj = -1; dj <= 1; dj++)
        for (long di = -1; di <= 1; di++) {
            long a = (long)i + di, b = (long)j + dj;
            if (a < 0 || b < 0 || a >= (long)VX || b >= (long)VY) continue;
            const struct list *leave = &state[stored_at((size_t)a, (size_t)b)].leave;
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
    t->misfiled += p->bin != t->box || box_of(p->x, p->y) != t->box;
    uint64_t bits[4];
    memcpy(&bits[0], &p->x, 8), memcpy(&bits[1], &p->y, 8), memcpy(&bits[2], &p->vx, 8), memcpy(&bits[3], &p->vy, 8);
    hash_word(&t->hash, p->id);
    for (int i = 0; i < 4; i++) hash_word(&t->hash, bits[i]);
}

/* FNV-1a over the little-endian bytes of each particle's id, x, y, vx and vy, box by box in
   member order: Md::checksum's. */
static struct tally tally_state(long iterations) {
    struct tally t = {.hash = 0xcbf29ce484222325ull};
    for (t.box = 0; t.box < VX * VY; t.box++) members(bins[iterations % 2], t.box, tally, &t);
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
    fprintf(out, " scenario=%s seed=%llu verlet=%zux%zu particles=%zu", SCENARIOS[scenario],
            (unsigned long long)seed, VX, VY, particles);
}

/* A task reads and writes its tile's particles, and reads two rows or columns of Verlet boxes
   of each face neighbour's (the whole tile with --tile 1). */
static uint64_t per_box(void) { return (particles / (VX * VY) + 1) * sizeof(struct particle); }
static uint64_t box_bytes(void) { return T * T * per_box(); }
static uint64_t halo_bytes(void) { return (T < 2 ? T * T : 2 * T) * per_box(); }
/* The tile's new handle: the footprint is the old one, which the tile's previous task wrote. */
static uint64_t written_bytes(void) { return box_bytes(); }

static void cleanup(void) {
    for (int b = 0; b < 2; b++) {
        for (size_t k = 0; k < VX * VY; k++) free(bins[b][k].stay.p), free(bins[b][k].leave.p);
        free(bins[b]);
    }
    for (int w = 0; w <= STARPU_NMAXWORKERS; w++)
        for (int s = 0; s < 9; s++) free(arrived[w][s].p);
}

PBS_EXAMPLE_MAIN("md", "[--tile T] [--scenario uniform|contraction|expansion|gravity] [--seed N]")
