/*
 * pbs as a StarPU 1.3 scheduling policy (pbs_starpu.h): owner computes through the boxes of the
 * tasks' data handles, stealing from neighbouring workers, rebalancing by the pbs mapper.
 *
 * Locks, and what each protects:
 *  - each worker's queue: StarPU's sched mutex of that worker (starpu_worker_lock), as StarPU's
 *    own "ws" policy does. pop_task is called with the caller's mutex held; a thief only
 *    try-locks a victim, so two thieves never wait on each other. Its count of tasks is an
 *    atomic written under that mutex, which a thief about to wait reads without it.
 *  - whether a worker waits for a push (it found nothing to steal): an atomic flag per worker,
 *    raised by the worker, cleared by a push that gives it something to run or steal; the
 *    flag and the counts are sequentially consistent, so no push is missed (wait_for_a_push).
 *  - the handle -> box table: table_lock (a read-write lock: lookups on every push,
 *    insertions at declaration and, without one, at submission). Once a grid is declared the
 *    table never changes until deinit_sched, and `declared`, stored last with release, lets
 *    readers skip the lock. A task's box travels from push to post-execution in sched_data.
 *  - box loads of the iteration under way, and whether an undeclared grid is complete:
 *    load_lock, held for a few additions per task.
 *  - the mapper: map_lock, held by the one thread that ends an iteration (a worker, or the
 *    submitting thread as it completes an undeclared grid) while it runs the mapper; the others
 *    go on (while it is held, the next task's hook ends the iteration).
 *  - the mapping in use (owners, victims): published whole through an atomic pointer, never
 *    changed once published, so readers take no lock. A reader outside map_lock names the
 *    mapping it reads in its thread's hazard slot first (hold_mapping); one replaced is freed by
 *    a later publication once no slot names it (free_released), the rest at deinit_sched. Its
 *    box loads (the order of each queue) are atomics: written by the worker that ends an
 *    iteration, read by any pop; a stale value only orders two tasks differently.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <starpu.h>
#include <starpu_scheduler.h>

#include "pbs.h"
#include "pbs_starpu.h"

#define NO_BOX SIZE_MAX

/* Iterations whose times of a box give its load, as their median: a task kept off its core
   (the submitting thread, another process) measures many times its time in one iteration. */
#define LOAD_SAMPLES 3

/* The mapping in use: who owns each box, whom each worker steals from (worker positions). */
struct mapping {
    size_t boxes;
    unsigned workers;
    uint32_t *owner;   /* boxes entries */
    uint32_t *victims; /* workers * (workers - 1) entries: row p for worker position p */
    _Atomic uint64_t *load; /* boxes entries: each box's last load, a double's bits (0: none) */
    struct mapping *retired; /* the mappings this one replaced that are not yet freed, newest first */
};

/* A worker's tasks by the last load of their box, heaviest on top, ties in push order: a binary
   heap (push and pop O(log n)); its last entry, a leaf, is what a thief takes. */
struct heap_entry {
    struct starpu_task *task;
    double load;
    uint64_t seq;
};
struct heap {
    struct heap_entry *at;
    size_t len, capacity;
    uint64_t pushed;
};

/* The handle -> box table: open addressing, linear probing, a power-of-two capacity. */
struct slot {
    const void *handle;
    size_t box;
};

static struct {
    /* handle -> box */
    pthread_rwlock_t table_lock;
    struct slot *slots;
    size_t capacity, used;
    _Atomic int declared; /* 1 once pbs_starpu_declare_grid(_3d) ran */
    size_t nx, ny, nz;    /* the declared grid */
    size_t boxes;         /* declared: nx * ny * nz; else handles numbered so far */

    /* the workers of the context, by position 0..workers-1 */
    int active;
    unsigned ctx;
    unsigned workers;
    int id[STARPU_NMAXWORKERS];       /* StarPU worker id of each position */
    int position[STARPU_NMAXWORKERS]; /* position of each StarPU worker id, -1 if none */
    struct starpu_task_list queue[STARPU_NMAXWORKERS]; /* by StarPU worker id: in push order */
    struct heap heap[STARPU_NMAXWORKERS];              /* by StarPU worker id: heaviest box first */
    /* Tasks in each queue: written under the worker's mutex, read without it by a thief
       deciding whether to wait (see `waiting`). */
    _Atomic size_t queued[STARPU_NMAXWORKERS];
    /* By StarPU worker id: 1 while a worker found nothing to run or steal and waits for a push
       to clear it, as eager's waiters do. A waiting worker's polls return at once, without
       try-locking every victim, and a push wakes only the waiting thieves: on empty tasks that
       took 6-8 % off pbs's time per task (docs/starpu.md). */
    _Atomic int waiting[STARPU_NMAXWORKERS];
    double started_us[STARPU_NMAXWORKERS];             /* by StarPU worker id */

    /* the mapping and the mapper */
    struct mapping *_Atomic mapping;
    pthread_mutex_t map_lock;
    pbs_mapper *mapper;
    size_t map_nx, map_ny, map_nz; /* the mapper's grid: declared, or the handles numbered x 1 x 1 */
    size_t run_length;     /* iterations in the run (pbs_starpu_hint_iterations), 0: unknown */

    /* box loads of the iteration under way */
    pthread_mutex_t load_lock;
    double *sum;
    double *load; /* the last LOAD_SAMPLES iterations' time of each box (NAN: none yet) */
    uint32_t *runs;
    size_t load_capacity, done;
    size_t measured; /* iterations whose loads were measured (the mapper sees them from LOAD_SAMPLES on) */
    /* Whether an undeclared grid's boxes are all numbered: a task of a box numbered before was
       submitted (the program's second iteration began). Until then a submitter slower than the
       workers may leave `boxes` short of the grid, and no count of tasks ends an iteration.
       Set under load_lock; read without it by submit_hook. */
    _Atomic int grid_complete;

    struct pbs_starpu_stats stats; /* iterations, rebalancings, migrations, mapper_ms: map_lock */
    _Atomic size_t stolen, unboxed, next;
    _Atomic int warned;
    int steal; /* PBS_STEAL: 0 = never, 1 = always (the default), 2 = auto */
    double idle_since[STARPU_NMAXWORKERS]; /* by StarPU worker id: when its queue ran dry, 0 if busy */
    _Atomic double patience_us;            /* auto: how long a worker waits before it steals */
    int heaviest_first; /* PBS_STARPU_ORDER: 1 = heaviest (the default), 0 = fifo */
} S = {
    .table_lock = PTHREAD_RWLOCK_INITIALIZER,
    .map_lock = PTHREAD_MUTEX_INITIALIZER,
    .load_lock = PTHREAD_MUTEX_INITIALIZER,
};

static void say(const char *message) {
    fprintf(stderr, "pbs (StarPU policy): %s\n", message);
}

/* ---- the handle -> box table (callers hold table_lock, or read a declared one) ------------ */

static size_t slot_of(const void *handle, size_t capacity) {
    uint64_t h = (uint64_t)(uintptr_t)handle * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 17) & (capacity - 1);
}

static size_t table_find(const void *handle) {
    if (!S.capacity) return NO_BOX;
    for (size_t i = slot_of(handle, S.capacity);; i = (i + 1) & (S.capacity - 1)) {
        if (S.slots[i].handle == handle) return S.slots[i].box;
        if (!S.slots[i].handle) return NO_BOX;
    }
}

/* Inserts handle -> box (the handle is absent); 0, or -ENOMEM. */
static int table_insert(const void *handle, size_t box) {
    if (2 * (S.used + 1) > S.capacity) {
        size_t capacity = S.capacity ? 2 * S.capacity : 1024;
        struct slot *slots = calloc(capacity, sizeof *slots);
        if (!slots) return -ENOMEM;
        for (size_t i = 0; i < S.capacity; i++)
            if (S.slots[i].handle) {
                size_t j = slot_of(S.slots[i].handle, capacity);
                while (slots[j].handle) j = (j + 1) & (capacity - 1);
                slots[j] = S.slots[i];
            }
        free(S.slots);
        S.slots = slots;
        S.capacity = capacity;
    }
    size_t j = slot_of(handle, S.capacity);
    while (S.slots[j].handle) j = (j + 1) & (S.capacity - 1);
    S.slots[j] = (struct slot){handle, box};
    S.used++;
    return 0;
}

static void table_clear(void) {
    free(S.slots);
    S.slots = NULL;
    S.capacity = S.used = 0;
}

/* The handle that gives a task its box: its first written handle, else its first handle. */
static starpu_data_handle_t box_handle(const struct starpu_task *task) {
    if (!task->cl) return NULL;
    unsigned n = STARPU_TASK_GET_NBUFFERS(task);
    for (unsigned i = 0; i < n; i++)
        if (STARPU_TASK_GET_MODE(task, i) & STARPU_W) return STARPU_TASK_GET_HANDLE(task, i);
    return n ? STARPU_TASK_GET_HANDLE(task, 0) : NULL;
}

/* The task's box, or NO_BOX. In a declared grid, the first written (else first) declared
   handle's; otherwise the number of its box handle. */
static size_t box_of(const struct starpu_task *task) {
    if (!task->cl) return NO_BOX;
    size_t box = NO_BOX;
    /* A declared table never changes until deinit_sched: read it without the lock. */
    int frozen = atomic_load_explicit(&S.declared, memory_order_acquire);
    if (!frozen) pthread_rwlock_rdlock(&S.table_lock);
    if (S.declared) {
        unsigned n = STARPU_TASK_GET_NBUFFERS(task);
        for (int pass = 0; pass < 2 && box == NO_BOX; pass++)
            for (unsigned i = 0; i < n && box == NO_BOX; i++)
                if (pass == 1 || (STARPU_TASK_GET_MODE(task, i) & STARPU_W))
                    box = table_find(STARPU_TASK_GET_HANDLE(task, i));
    } else {
        starpu_data_handle_t h = box_handle(task);
        if (h) box = table_find(h);
    }
    if (!frozen) pthread_rwlock_unlock(&S.table_lock);
    return box;
}

/* pbs_starpu_declare_grid (2D: messages in its terms) and pbs_starpu_declare_grid_3d. */
static int declare_grid(int three_d, size_t nx, size_t ny, size_t nz, const starpu_data_handle_t *handles,
                        size_t count) {
    char message[320], call[160], sizes[160];
    const char *product = three_d ? "nx * ny * nz" : "nx * ny";
    if (three_d)
        snprintf(call, sizeof call, "pbs_starpu_declare_grid_3d(%zu, %zu, %zu, %s, %zu)", nx, ny, nz,
                 handles ? "handles" : "NULL", count);
    else
        snprintf(call, sizeof call, "pbs_starpu_declare_grid(%zu, %zu, %s, %zu)", nx, ny, handles ? "handles" : "NULL",
                 count);
    /* The sizes' product checked before it is used: a product that wraps to 0 divided the count
       by zero (SIGFPE), and pbs's grids hold at most 2^32 - 1 boxes (32-bit box ids). */
    if (!nx || !ny || !nz || nx > UINT32_MAX / ny || nx * ny > UINT32_MAX / nz || !handles || !count ||
        count % (nx * ny * nz)) {
        snprintf(message, sizeof message,
                 "%s: the sizes must be > 0, %s at most 2^32 - 1 boxes and the count a multiple of %s; nothing "
                 "declared",
                 call, product, product);
        say(message);
        return -EINVAL;
    }
    pthread_rwlock_wrlock(&S.table_lock);
    if (S.declared) {
        if (S.nz == 1 && nz == 1)
            snprintf(sizes, sizeof sizes, "%zu x %zu boxes): this one (%zu x %zu", S.nx, S.ny, nx, ny);
        else
            snprintf(sizes, sizeof sizes, "%zu x %zu x %zu boxes): this one (%zu x %zu x %zu", S.nx, S.ny, S.nz, nx,
                     ny, nz);
        pthread_rwlock_unlock(&S.table_lock);
        snprintf(message, sizeof message, "a grid is already declared (%s) is ignored", sizes);
        say(message);
        return -EINVAL;
    }
    /* Handles numbered before the declaration (tasks submitted before it) are forgotten. */
    table_clear();
    int status = 0;
    for (size_t i = 0; i < count; i++) {
        size_t box = i % (nx * ny * nz), had;
        if (!handles[i]) {
            snprintf(message, sizeof message, "handle %zu (box %zu) is NULL: not declared", i, box);
            say(message);
            status = -EINVAL;
        } else if ((had = table_find(handles[i])) != NO_BOX) {
            snprintf(message, sizeof message,
                     "handles[%zu] (for box %zu) is already box %zu's handle: it stays box %zu's", i, box, had, had);
            say(message);
            status = -EINVAL;
        } else if (table_insert(handles[i], box)) {
            say("out of memory for the handle table: the rest of the grid is not declared");
            status = -ENOMEM;
            break;
        }
    }
    S.nx = nx;
    S.ny = ny;
    S.nz = nz;
    S.boxes = nx * ny * nz;
    /* Last, with release: a reader that sees it set sees the whole table (box_of). */
    atomic_store_explicit(&S.declared, 1, memory_order_release);
    pthread_rwlock_unlock(&S.table_lock);
    return status;
}

int pbs_starpu_declare_grid(size_t nx, size_t ny, const starpu_data_handle_t *handles, size_t count) {
    return declare_grid(0, nx, ny, 1, handles, count);
}

int pbs_starpu_declare_grid_3d(size_t nx, size_t ny, size_t nz, const starpu_data_handle_t *handles,
                               size_t count) {
    return declare_grid(1, nx, ny, nz, handles, count);
}

/* The handle whose box a task's box handle `h` joins when it is first seen: where the task writes
   `h` whole (STARPU_W, not RW), its first read-only handle, from which it computes `h` (the other
   half of a double buffer: a box's state before the step); else NULL. */
static starpu_data_handle_t written_from(const struct starpu_task *task, starpu_data_handle_t h) {
    unsigned n = STARPU_TASK_GET_NBUFFERS(task);
    int whole = 0;
    for (unsigned i = 0; i < n; i++)
        if (STARPU_TASK_GET_HANDLE(task, i) == h) whole = (STARPU_TASK_GET_MODE(task, i) & STARPU_RW) == STARPU_W;
    for (unsigned i = 0; whole && i < n; i++)
        if ((STARPU_TASK_GET_MODE(task, i) & STARPU_RW) == STARPU_R) return STARPU_TASK_GET_HANDLE(task, i);
    return NULL;
}

static void grid_completed(void);

/* Without a declared grid: numbers the box handle of a task at its submission, or gives it the
   box of the handle it is written from (written_from) where that one has a box already. Without
   that, a double-buffered program's two sets of handles were two sets of boxes, and a balanced
   split of the 1D grid gave each set, so each whole iteration, to one worker (docs/starpu.md). */
static void submit_hook(struct starpu_task *task) {
    starpu_data_handle_t h = box_handle(task);
    if (!h || atomic_load_explicit(&S.declared, memory_order_acquire)) return;
    pthread_rwlock_rdlock(&S.table_lock);
    int seen = table_find(h) != NO_BOX;
    pthread_rwlock_unlock(&S.table_lock);
    if (!seen) {
        starpu_data_handle_t from = written_from(task, h);
        pthread_rwlock_wrlock(&S.table_lock);
        if (S.declared) {
            pthread_rwlock_unlock(&S.table_lock);
            return;
        }
        seen = table_find(h) != NO_BOX;
        size_t box = from && !seen ? table_find(from) : NO_BOX;
        if (box != NO_BOX) seen = table_insert(h, box) == 0;
        else if (!seen && table_insert(h, S.boxes) == 0) S.boxes++;
        pthread_rwlock_unlock(&S.table_lock);
    }
    if (seen && !atomic_load_explicit(&S.grid_complete, memory_order_relaxed)) grid_completed();
}

/* ---- the mapping ---------------------------------------------------------------------------- */

static void fail(const char *what) {
    char message[512];
    snprintf(message, sizeof message, "%s: %s; the current mapping stays", what,
             pbs_last_error() ? pbs_last_error() : "out of memory");
    say(message);
}

/* Hazard slots. A thread reading the mapping outside map_lock stores the pointer in its slot,
   then checks that it is still the one published (hold_mapping), and clears the slot when done
   (let_go_mapping). A publication, after storing the new pointer, frees each replaced mapping
   that no slot names. Slot stores, pointer stores and both sides' loads are sequentially
   consistent: a reader whose check saw the old pointer stored its slot before the publisher
   stored the new one, so the publisher's scan sees the slot. A thread gets a slot at its first
   read and gives it back when it exits (StarPU's workers are new threads at each starpu_init);
   with more than HAZARD_SLOTS threads holding one at once, nothing replaced is freed before
   deinit_sched (as before 2026-12-06: 12 bytes a box per rebalancing, docs/starpu.md). */
#define HAZARD_SLOTS 64
static struct mapping *_Atomic hazard[HAZARD_SLOTS];
static atomic_int hazard_overflow;
static _Thread_local int hazard_slot = -1; /* -1: none yet; -2: none left */
/* Slots never handed out start at hazard_threads; those given back are listed. */
static pthread_mutex_t hazard_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned hazard_threads, hazard_free_len;
static int hazard_free[HAZARD_SLOTS];
static pthread_key_t hazard_key;
static pthread_once_t hazard_once = PTHREAD_ONCE_INIT;
static int hazard_key_made;

/* At a thread's exit: its slot, cleared, goes back to the list. */
static void give_back_slot(void *value) {
    int s = (int)(intptr_t)value - 1;
    atomic_store(&hazard[s], NULL);
    pthread_mutex_lock(&hazard_lock);
    hazard_free[hazard_free_len++] = s;
    pthread_mutex_unlock(&hazard_lock);
}

static void make_hazard_key(void) {
    hazard_key_made = pthread_key_create(&hazard_key, give_back_slot) == 0;
}

/* This thread's slot: one given back, else a new one; -2 where none is left. */
static int take_slot(void) {
    pthread_once(&hazard_once, make_hazard_key);
    pthread_mutex_lock(&hazard_lock);
    int s = hazard_free_len ? hazard_free[--hazard_free_len] : hazard_threads < HAZARD_SLOTS ? (int)hazard_threads++ : -2;
    pthread_mutex_unlock(&hazard_lock);
    /* A slot that would not come back at the thread's exit is kept by it, as the first ones
       were before slots came back. */
    if (s >= 0 && hazard_key_made) pthread_setspecific(hazard_key, (void *)(intptr_t)(s + 1));
    if (s == -2) atomic_store(&hazard_overflow, 1);
    return s;
}

/* Between a reader's load of the pointer and its slot's store, where another thread may publish:
   the policy's tests (starpu/tests/internals.c) publish there. */
#ifndef PBS_STARPU_BEFORE_NAMING
#define PBS_STARPU_BEFORE_NAMING() ((void)0)
#endif

static struct mapping *hold_mapping(void) {
    if (hazard_slot == -1) hazard_slot = take_slot();
    if (hazard_slot < 0) return atomic_load(&S.mapping);
    struct mapping *m;
    do {
        m = atomic_load(&S.mapping);
        PBS_STARPU_BEFORE_NAMING();
        atomic_store(&hazard[hazard_slot], m);
    } while (m != atomic_load(&S.mapping));
    return m;
}

static void let_go_mapping(void) {
    if (hazard_slot >= 0) atomic_store_explicit(&hazard[hazard_slot], NULL, memory_order_release);
}

static void free_mapping(struct mapping *m) {
    free(m->owner), free(m->victims), free((void *)m->load), free(m);
}

/* Frees the mappings `m` replaced that no slot names (caller holds map_lock, after publishing
   `m`). */
static void free_released(struct mapping *m) {
    if (atomic_load(&hazard_overflow)) return;
    struct mapping **link = &m->retired;
    while (*link) {
        struct mapping *r = *link;
        int named = 0;
        for (unsigned s = 0; s < HAZARD_SLOTS && !named; s++) named = atomic_load(&hazard[s]) == r;
        if (named) {
            link = &r->retired;
        } else {
            *link = r->retired;
            free_mapping(r);
        }
    }
}

/* A new mapping from the mapper (caller holds map_lock); published, the old one retired. */
static void publish(void) {
    struct mapping *m = calloc(1, sizeof *m);
    size_t boxes = S.map_nx * S.map_ny * S.map_nz, w = S.workers;
    if (m) {
        m->owner = malloc(boxes * sizeof *m->owner);
        m->victims = malloc((w * (w - 1) + 1) * sizeof *m->victims);
        m->load = calloc(boxes ? boxes : 1, sizeof *m->load);
    }
    if (!m || !m->owner || !m->victims || !m->load) {
        if (m) free(m->owner), free(m->victims), free((void *)m->load);
        free(m);
        say("out of memory for a new mapping: the current one stays");
        return;
    }
    m->boxes = boxes;
    m->workers = S.workers;
    if (pbs_mapper_owners(S.mapper, m->owner, boxes) != PBS_OK) {
        fail("the mapper's owners");
        free(m->owner), free(m->victims), free((void *)m->load), free(m);
        return;
    }
    for (unsigned p = 0; p < w; p++)
        if (pbs_mapper_victims(S.mapper, p, m->victims + (size_t)p * (w - 1), w - 1) != PBS_OK) {
            fail("the mapper's victims");
            free(m->owner), free(m->victims), free((void *)m->load), free(m);
            return;
        }
    m->retired = atomic_load_explicit(&S.mapping, memory_order_relaxed);
    /* The loads go on from the mapping this one replaces (the same boxes, or the first ones). */
    if (m->retired)
        for (size_t b = 0; b < boxes && b < m->retired->boxes; b++)
            atomic_store_explicit(&m->load[b], atomic_load_explicit(&m->retired->load[b], memory_order_relaxed),
                                  memory_order_relaxed);
    atomic_store(&S.mapping, m);
    free_released(m);
}

/* A mapper over the current grid (caller holds map_lock): declared, or the handles so far. */
static void new_mapper(void) {
    pthread_rwlock_rdlock(&S.table_lock);
    size_t nx = S.declared ? S.nx : S.boxes, ny = S.declared ? S.ny : 1, nz = S.declared ? S.nz : 1;
    pthread_rwlock_unlock(&S.table_lock);
    if (!nx || !S.workers) return;
    pbs_mapper *m = pbs_mapper_new(nx, ny, nz, S.workers, 1);
    if (!m) {
        fail("a mapper for the grid");
        return;
    }
    pbs_mapper_free(S.mapper);
    S.mapper = m;
    S.map_nx = nx;
    S.map_ny = ny;
    S.map_nz = nz;
    publish();
}

/* The position of the worker that runs a task of box `box` (a box beyond the mapping: the
   workers in turn). */
static unsigned owner_of(size_t box) {
    if (box != NO_BOX) {
        struct mapping *m = hold_mapping();
        unsigned owner = m && box < m->boxes && m->workers == S.workers ? m->owner[box] : (unsigned)(box % S.workers);
        let_go_mapping();
        return owner;
    }
    return (unsigned)(atomic_fetch_add_explicit(&S.next, 1, memory_order_relaxed) % S.workers);
}

/* Ends iteration `round` (1, 2, ...) on the loads measured: the mapper decides (caller holds
   map_lock). */
static void end_iteration(const double *loads, size_t boxes, size_t round) {
    double t0 = starpu_timing_now();
    if (!S.mapper || boxes != S.map_nx * S.map_ny * S.map_nz) new_mapper();
    /* Iterations left, this one included: none at the last (0 forgets a hint the run outlived). */
    if (S.mapper && S.run_length)
        pbs_mapper_hint_iterations_left(S.mapper, S.run_length >= round ? S.run_length - round + 1 : 0);
    double total = 0.0;
    for (size_t b = 0; b < boxes; b++) total += loads[b];
    atomic_store_explicit(&S.patience_us, boxes ? 2e6 * total / (double)boxes : 0.0, memory_order_relaxed);
    if (S.mapper && boxes == S.map_nx * S.map_ny * S.map_nz) {
        pbs_iteration_end end;
        if (pbs_mapper_end_iteration(S.mapper, loads, boxes, &end) != PBS_OK) {
            fail("the mapper refused the loads");
        } else {
            S.stats.iterations++;
            if (end.rebalanced) {
                S.stats.rebalancings++;
                S.stats.migrations += end.migrations;
                if (end.migrations) publish();
            }
        }
    }
    S.stats.mapper_ms += (starpu_timing_now() - t0) / 1e3;
}

/* ---- the policy ----------------------------------------------------------------------------- */

/* PBS_STARPU_ORDER's value (NULL: unset): 1 = heaviest (the default, and for a value named as
   unknown), 0 = fifo. */
static int heaviest_first_of(const char *order) {
    if (!order || !strcmp(order, "heaviest")) return 1;
    if (!strcmp(order, "fifo")) return 0;
    char message[160];
    snprintf(message, sizeof message,
             "PBS_STARPU_ORDER=%.40s: expected heaviest or fifo; the heaviest box's task runs first", order);
    say(message);
    return 1;
}

/* PBS_STEAL's value (NULL: unset): 0 = never, 1 = always (the default, and for a value named
   as unknown), 2 = auto. At once by default: with the heaviest box first, waiting before
   stealing (auto) made the heat code's and md's runs up to 13 % longer in 12 of 13 pairs of
   runs (docs/starpu.md, "Heaviest box first"). */
static int steal_of(const char *steal) {
    if (!steal || !strcmp(steal, "always")) return 1;
    if (!strcmp(steal, "never")) return 0;
    if (!strcmp(steal, "auto")) return 2;
    char message[160];
    snprintf(message, sizeof message, "PBS_STEAL=%.40s: expected never, always or auto; stealing stays always",
             steal);
    say(message);
    return 1;
}

static void init_sched(unsigned ctx) {
    if (S.active) {
        say("a second scheduling context asked for the pbs policy: its tasks share the first one's "
            "workers and mapping");
        return;
    }
    S.active = 1;
    S.ctx = ctx;
    S.workers = 0;
    for (int i = 0; i < STARPU_NMAXWORKERS; i++) S.position[i] = -1;
    memset(&S.stats, 0, sizeof S.stats);
    S.stolen = S.unboxed = S.next = 0;
    S.warned = 0;
    S.done = 0;
    S.measured = 0;
    atomic_store(&S.patience_us, 0.0);
    for (int i = 0; i < STARPU_NMAXWORKERS; i++) S.idle_since[i] = 0.0;
    S.heaviest_first = heaviest_first_of(getenv("PBS_STARPU_ORDER"));
    S.steal = steal_of(getenv("PBS_STEAL"));
    /* The run's length for programs nobody changes (the preload's), as pbs_starpu_hint_iterations
       gives it; a call to that function after starpu_init overrides it. */
    const char *length = getenv("PBS_STARPU_ITERATIONS");
    S.run_length = 0;
    if (length && *length) {
        char *end = NULL;
        errno = 0;
        unsigned long long n = strtoull(length, &end, 10);
        if (errno || *end || strchr(length, '-') || n == 0 || n > SIZE_MAX) {
            char message[200];
            snprintf(message, sizeof message,
                     "PBS_STARPU_ITERATIONS=%.40s: expected the run's iterations, a whole number from 1; "
                     "the run's length stays unknown",
                     length);
            say(message);
        } else {
            S.run_length = (size_t)n;
        }
    }
}

static void add_workers(unsigned ctx, int *ids, unsigned n) {
    (void)ctx;
    pthread_mutex_lock(&S.map_lock);
    for (unsigned i = 0; i < n; i++) {
        int w = ids[i];
        if (w < 0 || w >= STARPU_NMAXWORKERS || S.position[w] >= 0) continue;
        starpu_task_list_init(&S.queue[w]);
        S.heap[w].len = 0;
        atomic_store(&S.queued[w], 0);
        atomic_store(&S.waiting[w], 0);
        S.position[w] = (int)S.workers;
        S.id[S.workers++] = w;
    }
    /* A mapping for other workers no longer applies: a new mapper at the next push. */
    pbs_mapper_free(S.mapper);
    S.mapper = NULL;
    pthread_mutex_unlock(&S.map_lock);
}

static void remove_workers(unsigned ctx, int *ids, unsigned n) {
    /* Called at shutdown. A worker removed while running keeps its queue, which the others
       steal from (every position stays a victim). */
    (void)ctx;
    (void)ids;
    (void)n;
}

static void deinit_sched(unsigned ctx) {
    if (!S.active || ctx != S.ctx) return;
    if (getenv("PBS_STARPU_VERBOSE"))
        fprintf(stderr,
                "pbs (StarPU policy): %zu iterations, %zu rebalancings, %zu migrations, %zu stolen, %zu "
                "without a box, %.3f ms in the mapper\n",
                S.stats.iterations, S.stats.rebalancings, S.stats.migrations, S.stolen, S.unboxed,
                S.stats.mapper_ms);
    /* Said, not only counted: such a program's tasks went to the workers in turn throughout. */
    if (!S.declared && !S.grid_complete && S.boxes > S.workers) {
        char message[320];
        snprintf(message, sizeof message,
                 "no task wrote a handle that a task had written before (%zu handles, each once): no "
                 "iteration to measure and balance, and the tasks went to the workers in turn; a program "
                 "that steps over the same data can declare its grid (pbs_starpu_declare_grid)",
                 S.boxes);
        say(message);
    }
    pthread_mutex_lock(&S.map_lock);
    pbs_mapper_free(S.mapper);
    S.mapper = NULL;
    S.run_length = 0;
    struct mapping *m = atomic_exchange(&S.mapping, NULL);
    while (m) {
        struct mapping *next = m->retired;
        free_mapping(m);
        m = next;
    }
    pthread_mutex_unlock(&S.map_lock);
    for (int w = 0; w < STARPU_NMAXWORKERS; w++) {
        free(S.heap[w].at);
        S.heap[w] = (struct heap){0};
    }
    pthread_mutex_lock(&S.load_lock);
    free(S.sum), free(S.load), free(S.runs);
    S.sum = S.load = NULL;
    S.runs = NULL;
    S.load_capacity = S.done = S.measured = 0;
    S.grid_complete = 0;
    pthread_mutex_unlock(&S.load_lock);
    pthread_rwlock_wrlock(&S.table_lock);
    table_clear();
    S.declared = 0;
    S.boxes = S.nx = S.ny = S.nz = 0;
    pthread_rwlock_unlock(&S.table_lock);
    S.active = 0;
}

/* The last measured load of the box of a queued task (0 if none yet). */
static double load_of(const struct mapping *m, const struct starpu_task *task) {
    size_t box = task->sched_data ? (size_t)(uintptr_t)task->sched_data - 1 : NO_BOX;
    if (!m || box >= m->boxes) return 0.0;
    uint64_t bits = atomic_load_explicit(&m->load[box], memory_order_relaxed);
    double load;
    memcpy(&load, &bits, sizeof load);
    return load;
}

/* ---- each worker's queue: a heap by box load, and a list ------------------------------------ */

/* Whether entry a runs before entry b: the heavier box, else the earlier push. */
static int before(const struct heap_entry *a, const struct heap_entry *b) {
    return a->load > b->load || (a->load == b->load && a->seq < b->seq);
}

static void swap_entries(struct heap_entry *a, struct heap_entry *b) {
    struct heap_entry t = *a;
    *a = *b;
    *b = t;
}

static void sift_up(struct heap *h, size_t i) {
    while (i > 0 && before(&h->at[i], &h->at[(i - 1) / 2])) {
        swap_entries(&h->at[i], &h->at[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
}

static void sift_down(struct heap *h, size_t i) {
    for (;;) {
        size_t first = i, l = 2 * i + 1, r = l + 1;
        if (l < h->len && before(&h->at[l], &h->at[first])) first = l;
        if (r < h->len && before(&h->at[r], &h->at[first])) first = r;
        if (first == i) return;
        swap_entries(&h->at[i], &h->at[first]);
        i = first;
    }
}

/* Adds a task; 0, or -ENOMEM (the heap unchanged). */
static int heap_push(struct heap *h, struct starpu_task *task, double load) {
    if (h->len == h->capacity) {
        size_t capacity = h->capacity ? 2 * h->capacity : 64;
        struct heap_entry *at = realloc(h->at, capacity * sizeof *at);
        if (!at) return -ENOMEM;
        h->at = at;
        h->capacity = capacity;
    }
    h->at[h->len] = (struct heap_entry){task, load, h->pushed++};
    sift_up(h, h->len++);
    return 0;
}

/* Takes entry i out. */
static struct starpu_task *heap_take(struct heap *h, size_t i) {
    struct starpu_task *task = h->at[i].task;
    h->at[i] = h->at[--h->len];
    if (i < h->len) {
        sift_up(h, i);
        sift_down(h, i);
    }
    return task;
}

/* A ready task goes to worker `worker`'s queue (caller holds its mutex): by its box's last
   load with PBS_STARPU_ORDER=heaviest (the default), else, or when the heap cannot grow, at
   the back of the list. In a dataflow program the heavy boxes are the critical path: each
   iteration's heavy tasks wait on the last one's, and running them first lets the next ones
   become ready while the light ones fill the gaps (the heat code's hot corner: 0.80-0.99 x
   eager's mean iteration time instead of 0.99-1.06, docs/starpu.md). */
static void enqueue(int worker, struct starpu_task *task) {
    if (S.heaviest_first) {
        double load = load_of(hold_mapping(), task);
        let_go_mapping();
        if (!heap_push(&S.heap[worker], task, load)) return;
    }
    starpu_task_list_push_back(&S.queue[worker], task);
}

/* Queues a ready task on `worker` (caller holds its mutex) and counts it; the tasks now queued
   there. Sequentially consistent, as the waiting flags: of this increment and a thief's flag,
   each side sees the other's (see wait_for_a_push). */
static size_t queue_on(int worker, struct starpu_task *task) {
    enqueue(worker, task);
    return atomic_fetch_add(&S.queued[worker], 1) + 1;
}

/* StarPU's wake-up of a worker; the policy's tests (starpu/tests/internals.c) define it as a
   recorder before including this file. */
#ifndef PBS_STARPU_WAKE
#define PBS_STARPU_WAKE starpu_wake_worker_relax_light
#endif

/* After a push left `queued` tasks in `worker`'s queue: the owner, when its queue was empty
   (with a task queued before, it is awake: a push woke it then and it has not popped since, or
   it is running one); the waiting others too, once the queue holds something to steal (two
   tasks). Each flag is read before it is written: most pushes find it down, and a read does
   not take the flag's cache line away from its worker as a write does. */
static void wake_for_push(int worker, size_t queued) {
    if (atomic_load(&S.waiting[worker])) atomic_store(&S.waiting[worker], 0);
    if (queued == 1) PBS_STARPU_WAKE(worker);
    if (queued >= 2 && S.steal)
        for (unsigned p = 0; p < S.workers; p++) {
            int w = S.id[p];
            if (w != worker && atomic_load(&S.waiting[w]) && atomic_exchange(&S.waiting[w], 0)) PBS_STARPU_WAKE(w);
        }
}

static int push_task(struct starpu_task *task) {
    size_t box = box_of(task);
    /* For post_exec_hook: the field is the scheduler's (starpu_task.h). */
    task->sched_data = (void *)(uintptr_t)(box == NO_BOX ? 0 : box + 1);
    if (box == NO_BOX) {
        atomic_fetch_add_explicit(&S.unboxed, 1, memory_order_relaxed);
        if (S.declared && task->cl && !atomic_exchange(&S.warned, 1)) {
            char message[256];
            snprintf(message, sizeof message,
                     "a task of codelet '%s' has none of its handles in the declared grid: it runs anyway, "
                     "as will any other such task (the workers' queues in turn)",
                     task->cl->name ? task->cl->name : "(unnamed)");
            say(message);
        }
    } else if (S.declared && !atomic_load_explicit(&S.mapping, memory_order_acquire)) {
        pthread_mutex_lock(&S.map_lock);
        if (!S.mapper) new_mapper();
        pthread_mutex_unlock(&S.map_lock);
    }
    int worker = S.id[owner_of(box)];
    /* A worker that cannot run it (a CPU-only task, a GPU worker): the first that can. */
    if (!starpu_worker_can_execute_task_first_impl(worker, task, NULL))
        for (unsigned p = 0; p < S.workers; p++)
            if (starpu_worker_can_execute_task_first_impl(S.id[p], task, NULL)) {
                worker = S.id[p];
                break;
            }
    starpu_worker_lock(worker);
    size_t queued = queue_on(worker, task);
    starpu_push_task_end(task);
    starpu_worker_unlock(worker);
    wake_for_push(worker, queued);
    return 0;
}

/* The last task of `victim`'s queue that worker `me` can run, taken out; the caller holds the
   victim's mutex. The back of its list, then the last entries of its heap (leaves, pushed
   lately): the owner works from the front and the top. Only from a queue of two tasks or more:
   a queue that tasks reach one by one, as fast as its owner runs them (a program that submits
   as it goes), is not behind, and taking its one task would only move the box. */
static struct starpu_task *take_back(int victim, int me) {
    if (atomic_load_explicit(&S.queued[victim], memory_order_relaxed) < 2) return NULL;
    struct starpu_task_list *q = &S.queue[victim];
    for (struct starpu_task *t = starpu_task_list_back(q); t; t = t->prev)
        if (starpu_worker_can_execute_task_first_impl(me, t, NULL)) {
            starpu_task_list_erase(q, t);
            atomic_fetch_sub_explicit(&S.queued[victim], 1, memory_order_relaxed);
            return t;
        }
    struct heap *h = &S.heap[victim];
    for (size_t i = h->len; i-- > 0;)
        if (starpu_worker_can_execute_task_first_impl(me, h->at[i].task, NULL)) {
            atomic_fetch_sub_explicit(&S.queued[victim], 1, memory_order_relaxed);
            return heap_take(h, i);
        }
    return NULL;
}

/* The position of thief position `p`'s `i`-th victim: the mapping's order (neighbouring vCores
   first), or the next positions in turn where the mapping was made for another worker count. */
static unsigned victim_position(const struct mapping *m, unsigned p, unsigned i) {
    if (m && m->workers == S.workers) return m->victims[(size_t)p * (S.workers - 1) + i];
    return (p + 1 + i) % S.workers;
}

/* A thief that stole nothing waits for a push (the fast return of pop_task), unless a victim
   holds two tasks or more now. The flag is raised before the queues are read again (both
   sequentially consistent), so a push that made one stealable meanwhile either sees the flag
   and clears it, or is seen here and the next poll looks again. */
static void wait_for_a_push(int me) {
    atomic_store(&S.waiting[me], 1);
    for (unsigned q = 0; q < S.workers; q++)
        if (S.id[q] != me && atomic_load(&S.queued[S.id[q]]) >= 2) {
            atomic_store(&S.waiting[me], 0);
            return;
        }
}

/* `auto`: whether worker `me`, its queue dry and nothing stolen, waits at time `now` (µs)
   rather than steal. A queue that runs dry for less than two mean task times is waiting on its
   neighbours' boxes (dependencies), not behind; stealing then only moves boxes. The dry spell
   starts at the first call after the worker last ran a task (`idle_since` 0). */
static int still_patient(int me, double now) {
    if (S.idle_since[me] == 0.0) S.idle_since[me] = now;
    return now - S.idle_since[me] < atomic_load_explicit(&S.patience_us, memory_order_relaxed);
}

/* Called with the caller's own mutex held (StarPU's contract). */
static struct starpu_task *pop_task(unsigned ctx) {
    (void)ctx;
    int me = starpu_worker_get_id_check();
    if (atomic_load_explicit(&S.queued[me], memory_order_relaxed)) {
        atomic_fetch_sub_explicit(&S.queued[me], 1, memory_order_relaxed);
        S.idle_since[me] = 0.0;
        return S.heap[me].len ? heap_take(&S.heap[me], 0) : starpu_task_list_pop_front(&S.queue[me]);
    }
    int p = S.position[me];
    if (!S.steal || atomic_load_explicit(&S.waiting[me], memory_order_relaxed)) return NULL;
    if (S.steal == 2 && still_patient(me, starpu_timing_now())) {
        wait_for_a_push(me);
        return NULL;
    }
    struct mapping *m = hold_mapping();
    for (unsigned i = 0; p >= 0 && i + 1 < S.workers; i++) {
        int victim = S.id[victim_position(m, (unsigned)p, i)];
        if (starpu_worker_trylock(victim)) continue; /* busy scheduling: not now */
        struct starpu_task *t = take_back(victim, me);
        starpu_worker_unlock(victim);
        if (t) {
            let_go_mapping();
            atomic_fetch_add_explicit(&S.stolen, 1, memory_order_relaxed);
            S.idle_since[me] = 0.0;
            return t;
        }
    }
    let_go_mapping();
    wait_for_a_push(me);
    return NULL;
}

static void pre_exec_hook(struct starpu_task *task, unsigned ctx) {
    (void)task;
    (void)ctx;
    int me = starpu_worker_get_id();
    if (me >= 0 && me < STARPU_NMAXWORKERS) S.started_us[me] = starpu_timing_now();
}

/* Grows the load arrays to `boxes` (caller holds load_lock); 0, or -ENOMEM. */
static int loads_for(size_t boxes) {
    if (boxes <= S.load_capacity) return 0;
    size_t capacity = S.load_capacity ? S.load_capacity : 1024;
    while (capacity < boxes) capacity *= 2;
    double *sum = realloc(S.sum, capacity * sizeof *sum);
    if (sum) S.sum = sum;
    double *load = realloc(S.load, capacity * LOAD_SAMPLES * sizeof *load);
    if (load) S.load = load;
    uint32_t *runs = realloc(S.runs, capacity * sizeof *runs);
    if (runs) S.runs = runs;
    if (!sum || !load || !runs) return -ENOMEM;
    for (size_t b = S.load_capacity; b < capacity; b++) {
        S.sum[b] = 0.0;
        S.runs[b] = 0;
        for (int i = 0; i < LOAD_SAMPLES; i++) S.load[b * LOAD_SAMPLES + i] = NAN;
    }
    S.load_capacity = capacity;
    return 0;
}

/* The median of a box's samples that are not NAN (0 if none). */
static double median_of(const double *last) {
    double v[LOAD_SAMPLES];
    int n = 0;
    for (int i = 0; i < LOAD_SAMPLES; i++)
        if (!isnan(last[i])) {
            int j = n++;
            for (; j > 0 && v[j - 1] > last[i]; j--) v[j] = v[j - 1]; /* insertion sort */
            v[j] = last[i];
        }
    if (!n) return 0.0;
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Adds a task's time to its box's for the iteration under way (caller holds load_lock, and
   loads_for covers the box). */
static void record_time(size_t box, double seconds) {
    S.sum[box] += seconds;
    S.runs[box]++;
}

/* Ends an iteration's worth of box tasks (caller holds load_lock and map_lock): a box's time in
   it is the mean of its tasks', its load the median of its last LOAD_SAMPLES times (a box that
   did not run keeps its last). Each load goes to `loads` where not NULL and into the mapping in
   use, for the queues' order (enqueue): map_lock is held, so no other mapping is published
   meanwhile, and the next one copies them. */
static void end_loads(size_t boxes, struct mapping *m, double *loads) {
    for (size_t b = 0; b < boxes; b++) {
        double *last = S.load + b * LOAD_SAMPLES;
        if (S.runs[b]) {
            memmove(last, last + 1, (LOAD_SAMPLES - 1) * sizeof *last);
            last[LOAD_SAMPLES - 1] = S.sum[b] / S.runs[b];
        }
        S.sum[b] = 0.0;
        S.runs[b] = 0;
        double load = median_of(last);
        if (loads) loads[b] = load;
        if (m && b < m->boxes) {
            uint64_t bits;
            memcpy(&bits, &load, sizeof bits);
            atomic_store_explicit(&m->load[b], bits, memory_order_relaxed);
        }
    }
    /* Tasks counted past the grid (their hooks ran while another thread held map_lock) are the
       next iteration's: dropped, every later end came that many tasks late, and the run's last
       iteration never ended. Their times stay in this one's loads. */
    S.done = S.done > boxes ? S.done - boxes : 0;
}

/* Ends the iteration under way once as many box tasks ran as the grid has boxes, and the grid
   is known (caller holds load_lock, which this releases). */
static void end_if_done(size_t boxes) {
    int known = S.grid_complete || atomic_load_explicit(&S.declared, memory_order_acquire);
    if (!known || S.done < boxes || loads_for(boxes) || pthread_mutex_trylock(&S.map_lock)) {
        pthread_mutex_unlock(&S.load_lock);
        return;
    }
    double *loads = malloc(boxes * sizeof *loads);
    end_loads(boxes, atomic_load_explicit(&S.mapping, memory_order_acquire), loads);
    /* The mapper's first measurement rebalances whatever it shows: it waits until every box's
       load is a median, not one time a preemption may have inflated or hidden an imbalance in. */
    size_t round = ++S.measured;
    int ready = round >= LOAD_SAMPLES;
    pthread_mutex_unlock(&S.load_lock);
    if (loads && ready) end_iteration(loads, boxes, round);
    /* A mapper that workers joining freed (add_workers): a new one on the grid now, rather than
       the workers in turn until the mapper's next measurement. */
    else if (!S.mapper) new_mapper();
    pthread_mutex_unlock(&S.map_lock);
    free(loads);
}

/* A task of a box numbered before was submitted: the undeclared grid is complete. Its first
   mapping is published now, before that task is pushed (else it and the rest of the second
   iteration went to the workers in turn), and the first iteration ends here if its last task's
   hook ran already (a program that waits for each iteration). A second call (two submitting
   threads) finds the mapper made and the iteration not yet done. Every box numbered so far had
   one task before this, so where they all ran, count_task grew the load arrays to the grid
   (end_if_done's loads_for is then only a guard). */
static void grid_completed(void) {
    pthread_mutex_lock(&S.load_lock);
    atomic_store(&S.grid_complete, 1);
    pthread_mutex_unlock(&S.load_lock);
    pthread_mutex_lock(&S.map_lock);
    if (!S.mapper) new_mapper();
    pthread_mutex_unlock(&S.map_lock);
    pthread_rwlock_rdlock(&S.table_lock);
    size_t boxes = S.boxes;
    pthread_rwlock_unlock(&S.table_lock);
    pthread_mutex_lock(&S.load_lock);
    end_if_done(boxes);
}

/* A task of box `box` ran for `seconds` in a grid of `boxes`: its time is added to its box's,
   and the iteration ends where it was the last of it. */
static void count_task(size_t box, double seconds, size_t boxes) {
    pthread_mutex_lock(&S.load_lock);
    if (loads_for(boxes > box ? boxes : box + 1)) {
        pthread_mutex_unlock(&S.load_lock);
        return;
    }
    record_time(box, seconds);
    S.done++;
    end_if_done(boxes);
}

static void post_exec_hook(struct starpu_task *task, unsigned ctx) {
    (void)ctx;
    size_t box = task->sched_data ? (size_t)(uintptr_t)task->sched_data - 1 : NO_BOX;
    task->sched_data = NULL;
    int me = starpu_worker_get_id();
    if (box == NO_BOX || me < 0 || me >= STARPU_NMAXWORKERS) return;
    /* StarPU's profiling times when the application turned profiling on, else the hooks'. */
    double us = starpu_timing_now() - S.started_us[me];
    struct starpu_profiling_task_info *info = task->profiling_info;
    if (info && starpu_profiling_status_get() && info->end_time.tv_sec) {
        double profiled = starpu_timing_timespec_delay_us(&info->start_time, &info->end_time);
        if (profiled > 0) us = profiled;
    }
    size_t boxes;
    if (atomic_load_explicit(&S.declared, memory_order_acquire)) {
        boxes = S.boxes; /* fixed once declared */
    } else {
        pthread_rwlock_rdlock(&S.table_lock);
        boxes = S.boxes;
        pthread_rwlock_unlock(&S.table_lock);
    }
    count_task(box, us * 1e-6, boxes);
}

int pbs_starpu_hint_iterations(size_t total) {
    pthread_mutex_lock(&S.map_lock);
    S.run_length = total;
    pthread_mutex_unlock(&S.map_lock);
    return 0;
}

int pbs_starpu_get_stats(struct pbs_starpu_stats *stats) {
    if (!stats) return -EINVAL;
    pthread_mutex_lock(&S.map_lock);
    *stats = S.stats;
    pthread_mutex_unlock(&S.map_lock);
    stats->stolen = atomic_load(&S.stolen);
    stats->unboxed = atomic_load(&S.unboxed);
    return 0;
}

struct starpu_sched_policy pbs_starpu_policy = {
    .init_sched = init_sched,
    .deinit_sched = deinit_sched,
    .add_workers = add_workers,
    .remove_workers = remove_workers,
    .push_task = push_task,
    .pop_task = pop_task,
    .submit_hook = submit_hook,
    .pre_exec_hook = pre_exec_hook,
    .post_exec_hook = post_exec_hook,
    .policy_name = "pbs",
    .policy_description = "pair-potential scheduling: owner computes over a grid of boxes, stealing "
                          "from neighbours (pbs)",
    .worker_type = STARPU_WORKER_LIST,
};
