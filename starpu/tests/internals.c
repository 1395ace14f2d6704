/*
 * The policy's own data structures, reached by including policy.c (they are static): each
 * worker's queue heap under pushes, the owner's pops from the top and a thief's takes from the
 * leaves; the handle -> box table across its growth; the median of a box's load samples and
 * the loads made of task times; an undeclared grid's completion, its first mapping and first
 * iteration; a 3D grid's declaration and first mapping; an iteration's end deferred while the mapper runs; which handle a task's box
 * handle is written from; a published mapping's owners, victim rows and carried loads; workers
 * joining the context; a thief's take from a victim's queue; the wake-ups a push asks for, a
 * thief's wait, `auto`'s patience and a thief's pop; the settings' values. Handles are only
 * compared, and the queues' tasks are never submitted: the one StarPU session, of `eager`, is
 * there for its workers' descriptions, which a take reads, and to run the pop as worker 0 (one
 * task submitted to it). Prints "internals: ok", or each failure on stderr and exits 1.
 */
/* The wake-ups a push asks for, recorded instead of made (PBS_STARPU_WAKE in policy.c). */
static int woken[16];
static unsigned n_woken;
static int record_wake(int worker) {
    if (n_woken < 16) woken[n_woken] = worker;
    n_woken++;
    return 1;
}
#define PBS_STARPU_WAKE record_wake
/* A publication between a reader's load of the mapping and its naming it, when asked. */
static int publish_before_naming;
static void publish_now(void);
#define PBS_STARPU_BEFORE_NAMING() (publish_before_naming ? (void)(publish_before_naming = 0, publish_now()) : (void)0)
#include "../src/policy.c"

static void publish_now(void) {
    pthread_mutex_lock(&S.map_lock);
    publish();
    pthread_mutex_unlock(&S.map_lock);
}

static int failures;

#define CHECK(cond, ...)                                                                                     \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            fprintf(stderr, "internals: " __VA_ARGS__);                                                      \
            fputc('\n', stderr);                                                                             \
            failures++;                                                                                      \
        }                                                                                                    \
    } while (0)

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Whether no entry runs before its parent. */
static int heap_ordered(const struct heap *h) {
    for (size_t i = 1; i < h->len; i++)
        if (before(&h->at[i], &h->at[(i - 1) / 2])) return 0;
    return 1;
}

/* The entry that must come out first: the heaviest, the earliest pushed among equals. */
static size_t first_of(const struct heap *h) {
    size_t best = 0;
    for (size_t i = 1; i < h->len; i++)
        if (before(&h->at[i], &h->at[best])) best = i;
    return best;
}

static void the_heap(void) {
    struct heap h = {0};
    size_t pushed = 0, taken = 0;
    for (int op = 0; op < 20000 && !failures; op++) {
        uint64_t r = next();
        if (h.len == 0 || r % 8 < 4) {
            /* Loads from a few values, so that ties (kept in push order) are common. */
            double load = (double)(next() % 7);
            CHECK(heap_push(&h, (struct starpu_task *)(uintptr_t)(++pushed * 16), load) == 0, "push %zu failed", pushed);
        } else if (r % 8 < 6) {
            struct heap_entry want = h.at[first_of(&h)];
            struct starpu_task *t = heap_take(&h, 0);
            CHECK(t == want.task, "the owner's pop gave task %p, not %p (load %g, push %llu)", (void *)t,
                  (void *)want.task, want.load, (unsigned long long)want.seq);
            taken++;
        } else {
            /* A thief: the last entries first, as take_back does, or any. */
            size_t i = r % 8 == 6 ? h.len - 1 - (size_t)(next() % (h.len < 4 ? h.len : 4)) : (size_t)(next() % h.len);
            struct starpu_task *want = h.at[i].task;
            CHECK(heap_take(&h, i) == want, "a thief's take of entry %zu gave another task", i);
            taken++;
        }
        CHECK(heap_ordered(&h), "after operation %d the heap is out of order", op);
        CHECK(h.len == pushed - taken, "after operation %d the heap holds %zu tasks, not %zu", op, h.len,
              pushed - taken);
    }
    /* Emptied from the top: loads never increase, equal loads in push order. */
    struct heap_entry last = {NULL, INFINITY, 0};
    while (h.len && !failures) {
        struct heap_entry e = h.at[0];
        heap_take(&h, 0);
        CHECK(e.load < last.load || (e.load == last.load && e.seq > last.seq),
              "load %g (push %llu) came out after load %g (push %llu)", e.load, (unsigned long long)e.seq, last.load,
              (unsigned long long)last.seq);
        last = e;
    }
    free(h.at);
}

static void the_table(void) {
    /* 5,000 handles: the table grows from 1,024 slots to 16,384, rehashing each time. Scattered
       addresses, odd multiples of 8 inserted and even ones looked up absent: handles in
       arithmetic progression spread over the slots without a collision, which leaves the probing
       untried. */
    enum { HANDLES = 5000 };
    static uintptr_t handle[HANDLES];
    for (size_t i = 0; i < HANDLES; i++) {
        handle[i] = (uintptr_t)(next() >> 20) * 16 + 8;
        for (size_t j = 0; j < i; j++) /* a repeat would be found at its first box */
            if (handle[j] == handle[i]) handle[i] += 16 * (i + 1), j = (size_t)-1;
        CHECK(table_insert((const void *)handle[i], 3 * i) == 0, "insert %zu failed", i);
    }
    CHECK(S.used == HANDLES && S.capacity == 16384, "%zu used of %zu slots", S.used, S.capacity);
    for (size_t i = 0; i < HANDLES && !failures; i++) {
        CHECK(table_find((const void *)handle[i]) == 3 * i, "handle %zu lost its box", i);
        CHECK(table_find((const void *)(handle[i] + 8)) == NO_BOX, "an absent handle found a box");
    }
    table_clear();
    CHECK(table_find((const void *)handle[0]) == NO_BOX && S.capacity == 0, "the cleared table");
}

static void the_median(void) {
    const double cases[][LOAD_SAMPLES + 1] = {
        {NAN, NAN, NAN, 0.0}, {NAN, NAN, 4.0, 4.0}, {3.0, NAN, 1.0, 2.0},
        {5.0, 1.0, 3.0, 3.0}, {1.0, 9.0, 2.0, 2.0}, {7.0, 7.0, 1.0, 7.0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        CHECK(median_of(cases[c]) == cases[c][LOAD_SAMPLES], "median of case %zu: %g, not %g", c,
              median_of(cases[c]), cases[c][LOAD_SAMPLES]);
}

/* Box loads: the mean of a box's task times in an iteration, the median of its last three; a
   box that did not run keeps its load; the arrays keep their sums as they grow; each load goes
   into the mapping in use. */
static void the_loads(void) {
    double loads[3];
    uint64_t bits[3] = {0, 0, 0};
    struct mapping m = {.boxes = 3, .workers = 1, .load = (_Atomic uint64_t *)bits};
    CHECK(loads_for(3) == 0, "loads for 3 boxes");
    record_time(0, 1.0), record_time(0, 3.0), record_time(2, 5.0);
    end_loads(3, &m, loads);
    CHECK(loads[0] == 2.0 && loads[1] == 0.0 && loads[2] == 5.0, "iteration 1: %g %g %g", loads[0], loads[1], loads[2]);
    double in_mapping;
    memcpy(&in_mapping, &bits[2], sizeof in_mapping);
    CHECK(in_mapping == 5.0, "box 2's load in the mapping: %g", in_mapping);
    /* Box 0 alone runs from now on; box 2 keeps its 5 through three iterations without a run. */
    const double box0[] = {4.0, 9.0, 0.5}, want0[] = {3.0, 4.0, 4.0};
    for (int it = 0; it < 3; it++) {
        record_time(0, box0[it]);
        S.done = 3; /* the iteration's box tasks, counted by the hook */
        end_loads(3, NULL, loads);
        CHECK(loads[0] == want0[it] && loads[2] == 5.0, "iteration %d: box 0 %g (not %g), box 2 %g", it + 2, loads[0],
              want0[it], loads[2]);
    }
    CHECK(S.done == 0 && S.runs[0] == 0 && S.sum[0] == 0.0, "the iteration's sums not cleared");
    /* A box past the arrays grows them (1,024 entries to 8,192), the sums under way kept. */
    record_time(1, 7.0);
    CHECK(loads_for(5000) == 0 && S.load_capacity == 8192, "growth to %zu", S.load_capacity);
    CHECK(S.sum[1] == 7.0 && S.runs[1] == 1 && S.sum[4999] == 0.0 && S.runs[4999] == 0 &&
              isnan(S.load[4999 * LOAD_SAMPLES]),
          "after growth: box 1 %g in %u runs", S.sum[1], S.runs[1]);
    CHECK(median_of(S.load) == 4.0, "box 0's samples after growth: %g", median_of(S.load));
    free(S.sum), free(S.load), free(S.runs);
    S.sum = S.load = NULL, S.runs = NULL, S.load_capacity = 0;
}

/* A task on fake handles (only compared) with the given modes. */
static starpu_data_handle_t written_from_of(int n, const enum starpu_data_access_mode *modes,
                                            starpu_data_handle_t box) {
    static struct starpu_codelet cl;
    struct starpu_task task;
    memset(&cl, 0, sizeof cl);
    starpu_task_init(&task);
    cl.nbuffers = n;
    for (int i = 0; i < n; i++) {
        cl.modes[i] = modes[i];
        task.handles[i] = (starpu_data_handle_t)(uintptr_t)(16 * (i + 1));
    }
    task.cl = &cl;
    return written_from(&task, box);
}

static void the_written_from(void) {
    starpu_data_handle_t h[] = {NULL, (starpu_data_handle_t)16, (starpu_data_handle_t)32, (starpu_data_handle_t)48};
    const enum starpu_data_access_mode w_r_r[] = {STARPU_W, STARPU_R, STARPU_R};
    const enum starpu_data_access_mode r_w[] = {STARPU_R, STARPU_W};
    const enum starpu_data_access_mode rw_r[] = {STARPU_RW, STARPU_R};
    const enum starpu_data_access_mode w_rw[] = {STARPU_W, STARPU_RW};
    const enum starpu_data_access_mode w[] = {STARPU_W};
    CHECK(written_from_of(3, w_r_r, h[1]) == h[2], "written whole, read first: the first read");
    CHECK(written_from_of(2, r_w, h[2]) == h[1], "read listed before the written handle: still the read");
    CHECK(written_from_of(2, rw_r, h[1]) == NULL, "read and written (RW): none");
    CHECK(written_from_of(2, w_rw, h[1]) == NULL, "nothing only read: none");
    CHECK(written_from_of(1, w, h[1]) == NULL, "nothing read: none");
}

static uint64_t bits_of(double x) {
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

/* The mapping a context of `workers` workers gets for the declared grid: a new mapper's first. */
static struct mapping *first_mapping(unsigned workers) {
    S.workers = workers;
    S.active = 1;
    S.ctx = 0;
    pthread_mutex_lock(&S.map_lock);
    new_mapper();
    pthread_mutex_unlock(&S.map_lock);
    return atomic_load(&S.mapping);
}

/* A 3D grid declared: its boxes numbered as pbs.h numbers them (both sets of handles), and the
   mapper's first mapping of 8 x 8 x 8 boxes on 8 workers compact in 3D: about 64 boxes each, at
   most 300 faces between workers (blocks of 4 x 4 x 4 have 192; the layers that a 2D or 1D
   reading of the same boxes makes, 448). */
static void the_grid_in_3d(void) {
    enum { N = 8, BOXES = N * N * N, W = 8 };
    static starpu_data_handle_t handles[2 * BOXES];
    for (size_t i = 0; i < 2 * BOXES; i++) handles[i] = (starpu_data_handle_t)(uintptr_t)(16 * (i + 1));
    CHECK(pbs_starpu_declare_grid_3d(N, N, N, handles, 2 * BOXES) == 0, "an 8 x 8 x 8 grid declared");
    CHECK(S.nx == N && S.ny == N && S.nz == N && S.boxes == BOXES, "the declared sizes: %zu x %zu x %zu, %zu boxes",
          S.nx, S.ny, S.nz, S.boxes);
    CHECK(table_find(handles[BOXES + 300]) == 300 && table_find(handles[BOXES - 1]) == BOXES - 1,
          "both sets' handles are their boxes'");
    struct mapping *m = first_mapping(W);
    CHECK(m && m->boxes == BOXES && S.map_nz == N, "a mapping of the 512 boxes in 3D");
    if (!m) return;
    size_t held[W] = {0}, cut = 0;
    for (size_t k = 0; k < BOXES; k++) {
        size_t i = k % N, j = k / N % N, l = k / (N * N);
        held[m->owner[k]]++;
        if (i + 1 < N) cut += m->owner[k] != m->owner[k + 1];
        if (j + 1 < N) cut += m->owner[k] != m->owner[k + N];
        if (l + 1 < N) cut += m->owner[k] != m->owner[k + N * N];
    }
    for (unsigned w = 0; w < W; w++)
        CHECK(held[w] >= 56 && held[w] <= 72, "worker %u holds %zu boxes of 512", w, held[w]);
    CHECK(cut <= 300, "%zu faces between workers (192 for 4 x 4 x 4 blocks, 448 for layers)", cut);
    /* As the policy's shutdown leaves it, for the tests after this one. */
    pthread_rwlock_wrlock(&S.table_lock);
    table_clear();
    S.declared = 0;
    S.boxes = S.nx = S.ny = S.nz = 0;
    pthread_rwlock_unlock(&S.table_lock);
}

/* A mapping as the mapper publishes it: each position's victims in the mapper's order (a
   thief's i-th try), the next positions in turn once the worker count changed; each task's
   worker; each box's last load carried over from the mapping it replaces, first boxes only
   where the grid grew. */
static void the_mapping(void) {
    enum { W = 4 };
    pthread_rwlock_wrlock(&S.table_lock);
    S.declared = 1;
    S.nx = S.ny = 8;
    S.nz = 1;
    S.boxes = 64;
    pthread_rwlock_unlock(&S.table_lock);
    struct mapping *m = first_mapping(W);
    CHECK(m && m->workers == W && m->boxes == 64, "a mapping of 64 boxes for %d workers", W);
    if (!m) return;

    int not_in_turn = 0;
    for (unsigned p = 0; p < W; p++) {
        uint32_t row[W - 1];
        CHECK(pbs_mapper_victims(S.mapper, p, row, W - 1) == PBS_OK, "the mapper's victims of %u", p);
        for (unsigned i = 0; i + 1 < W; i++) {
            CHECK(victim_position(m, p, i) == row[i], "position %u's victim %u: %u, the mapper says %u", p, i,
                  victim_position(m, p, i), row[i]);
            CHECK(row[i] != p, "position %u is its own victim", p);
            not_in_turn |= row[i] != (p + 1 + i) % W;
        }
    }
    /* Else the next check could not tell the mapper's order from the fallback. */
    CHECK(not_in_turn, "on 8 x 8 boxes and 4 workers some victims come out of turn");
    S.workers = 3;
    for (unsigned p = 0; p < 3; p++)
        for (unsigned i = 0; i < 2; i++)
            CHECK(victim_position(m, p, i) == (p + 1 + i) % 3, "3 workers on a 4-worker mapping: %u's victim %u", p, i);
    S.workers = W;
    /* A task's worker: its box's owner in the mapping; a box past it, or any box once the
       worker count changed, the workers in turn by box; a task without a box, the next worker. */
    int owners_not_in_turn = 0;
    for (size_t b = 0; b < 64; b++) {
        CHECK(owner_of(b) == m->owner[b], "box %zu runs on position %u, its owner is %u", b, owner_of(b), m->owner[b]);
        owners_not_in_turn |= m->owner[b] != b % W;
    }
    CHECK(owners_not_in_turn, "the mapping's owners are not the workers in turn");
    CHECK(owner_of(64) == 0 && owner_of(67) == 3, "boxes past the mapping: the workers in turn");
    unsigned next = owner_of(NO_BOX);
    CHECK(owner_of(NO_BOX) == (next + 1) % W && next < W, "tasks without a box: the next worker each");
    S.workers = 3;
    for (size_t b = 0; b < 64; b++) CHECK(owner_of(b) == b % 3, "box %zu with 3 workers on a 4-worker mapping", b);
    S.workers = W;

    for (size_t b = 0; b < 64; b++) atomic_store(&m->load[b], bits_of(0.5 + (double)b));
    pthread_rwlock_wrlock(&S.table_lock);
    S.ny = 9;
    S.boxes = 72;
    pthread_rwlock_unlock(&S.table_lock);
    /* This thread holds the first mapping, as a push or a pop reading it would. */
    CHECK(hold_mapping() == m, "the mapping held is the one published");
    pthread_mutex_lock(&S.map_lock);
    new_mapper();
    pthread_mutex_unlock(&S.map_lock);
    struct mapping *grown = atomic_load(&S.mapping);
    CHECK(grown && grown != m && grown->retired == m && grown->boxes == 72,
          "a mapping of 72 boxes replacing the first, which is kept while it is held");
    if (grown && grown != m)
        for (size_t b = 0; b < 72; b++)
            CHECK(atomic_load(&grown->load[b]) == (b < 64 ? bits_of(0.5 + (double)b) : 0), "box %zu's load carried over", b);
    /* Replaced mappings no thread holds are freed at the next publication, the held one kept;
       once let go, it goes too (AddressSanitizer, in scripts/sanitize.sh, sees a wrong free). */
    pthread_mutex_lock(&S.map_lock);
    publish();
    pthread_mutex_unlock(&S.map_lock);
    struct mapping *third = atomic_load(&S.mapping);
    CHECK(third != grown && third->retired == m && !m->retired, "the held mapping kept, the one after it freed");
    let_go_mapping();
    pthread_mutex_lock(&S.map_lock);
    publish();
    pthread_mutex_unlock(&S.map_lock);
    struct mapping *fourth = atomic_load(&S.mapping);
    CHECK(fourth != third && !fourth->retired, "let go, every replaced mapping is freed");
    CHECK(hold_mapping() == fourth, "a thread holds the mapping published last");
    let_go_mapping();
    /* Another thread publishes after a reader loaded the pointer and before it named the
       mapping, which nothing held and which is freed: the reader loads again and holds the new
       one (without that check it read freed memory, which AddressSanitizer reports). */
    publish_before_naming = 1;
    struct mapping *fifth = hold_mapping();
    CHECK(fifth != fourth && fifth == atomic_load(&S.mapping) && fifth->boxes == 72 && !fifth->retired,
          "a publication before the naming: the reader holds the new mapping");
    let_go_mapping();
    deinit_sched(0);
    CHECK(!atomic_load(&S.mapping) && !S.mapper, "deinit frees the mappings and the mapper");
}

/* An undeclared grid, numbered at submission. While no task of a box numbered before has been
   submitted, the boxes numbered so far may be only the first part of the grid (a submitter
   slower than the workers): no iteration ends, however many box tasks ran. The first such task
   publishes the first mapping, over all the boxes numbered, before its push; the first iteration
   ends then where its tasks all ran (a program that waits for each iteration), else at its last
   task. A handle written whole from a numbered one (the other half of a double buffer) is that
   box submitted again. */
static void the_grid_completed(void) {
    enum { BOXES = 6 };
    static struct starpu_codelet cl;
    memset(&cl, 0, sizeof cl);
    cl.nbuffers = 1;
    cl.modes[0] = STARPU_RW;
    struct starpu_task task;
    starpu_task_init(&task);
    task.cl = &cl;
    for (int waits = 1; waits >= 0; waits--) {
        S.workers = 2;
        S.active = 1;
        S.ctx = 0;
        for (size_t b = 0; b < BOXES; b++) {
            task.handles[0] = (starpu_data_handle_t)(uintptr_t)(16 * (b + 1));
            submit_hook(&task);
            if (waits) count_task(b, 1.0 + (double)b, b + 1); /* it runs before the next is submitted */
        }
        CHECK(S.boxes == BOXES && S.measured == 0 && !S.mapper && !atomic_load(&S.mapping),
              "waits %d: an iteration ended (%zu) or a mapping came before a box was submitted again", waits,
              S.measured);
        /* Box 0's handle again, or (a double buffer) a new handle written whole from it. */
        struct starpu_codelet step = cl;
        step.nbuffers = 2;
        step.modes[0] = STARPU_W;
        step.modes[1] = STARPU_R;
        struct starpu_task second = task;
        second.cl = waits ? &step : &cl;
        second.handles[0] = (starpu_data_handle_t)(uintptr_t)(waits ? 16 * (BOXES + 1) : 16);
        second.handles[1] = (starpu_data_handle_t)(uintptr_t)16;
        submit_hook(&second);
        struct mapping *m = atomic_load(&S.mapping);
        CHECK(m && m->boxes == BOXES && S.mapper && S.map_nx == BOXES && S.map_ny == 1 && S.map_nz == 1,
              "waits %d: no first mapping of the %d boxes at the second iteration's first submission", waits, BOXES);
        CHECK(S.measured == (size_t)waits, "waits %d: %zu iterations ended at the second one's first submission",
              waits, S.measured);
        if (!waits) {
            for (size_t b = 0; b < BOXES; b++) count_task(b, 1.0 + (double)b, BOXES);
            CHECK(S.measured == 1 && S.done == 0, "the first iteration's last task ended it: %zu, %zu", S.measured,
                  S.done);
        }
        CHECK(median_of(S.load + (BOXES - 1) * LOAD_SAMPLES) == BOXES, "waits %d: the last box's load %g", waits,
              median_of(S.load + (BOXES - 1) * LOAD_SAMPLES));
        deinit_sched(0);
        CHECK(!atomic_load(&S.grid_complete), "deinit forgets that the grid was complete");
    }
}

/* An iteration's end deferred while another thread holds map_lock (the mapper at work) comes
   at the next task's hook, and the tasks counted past the grid are the next iteration's: two
   iterations' worth of tasks end two iterations (the last one of a run ended, not lost). */
static void the_late_end(void) {
    pthread_rwlock_wrlock(&S.table_lock);
    S.declared = 1;
    S.nx = 3;
    S.ny = S.nz = 1;
    S.boxes = 3;
    pthread_rwlock_unlock(&S.table_lock);
    S.workers = 2;
    S.active = 1;
    S.ctx = 0;
    pthread_mutex_lock(&S.map_lock); /* as the worker that runs the mapper holds it */
    for (size_t b = 0; b < 3; b++) count_task(b, 1.0, 3);
    count_task(0, 1.0, 3); /* the next iteration's first */
    CHECK(S.measured == 0 && S.done == 4, "map_lock held: %zu iterations ended, %zu tasks counted", S.measured,
          S.done);
    pthread_mutex_unlock(&S.map_lock);
    count_task(1, 1.0, 3);
    CHECK(S.measured == 1 && S.done == 2, "the deferred end: %zu iterations ended, %zu tasks carried", S.measured,
          S.done);
    count_task(2, 1.0, 3);
    CHECK(S.measured == 2 && S.done == 0, "the second iteration's last task: %zu ended, %zu counted", S.measured,
          S.done);
    deinit_sched(0);
}

/* Workers joining the context: each StarPU worker once (ids out of range and repeats skipped),
   a joining worker's queue, count and waiting flag cleared, and the mapper for the workers
   before dropped, so that the next push makes one for all of them. */
static void the_workers_added(void) {
    for (int w = 0; w < STARPU_NMAXWORKERS; w++) S.position[w] = -1;
    S.workers = 0;
    int first[] = {3, 1, -1, STARPU_NMAXWORKERS, 3};
    add_workers(0, first, 5);
    CHECK(S.workers == 2 && S.id[0] == 3 && S.id[1] == 1, "workers 3 and 1 in that order, once: %u", S.workers);
    CHECK(S.position[3] == 0 && S.position[1] == 1 && S.position[0] == -1, "positions of workers 3, 1 and 0");
    pthread_rwlock_wrlock(&S.table_lock);
    S.declared = 1;
    S.nx = S.ny = 4;
    S.nz = 1;
    S.boxes = 16;
    pthread_rwlock_unlock(&S.table_lock);
    S.active = 1;
    S.ctx = 0;
    pthread_mutex_lock(&S.map_lock);
    new_mapper();
    pthread_mutex_unlock(&S.map_lock);
    CHECK(S.mapper != NULL, "a mapper for the first two workers");
    atomic_store(&S.queued[5], 7);
    atomic_store(&S.waiting[5], 1);
    S.heap[5].len = 3;
    int later[] = {1, 5};
    add_workers(0, later, 2);
    CHECK(S.workers == 3 && S.id[2] == 5 && S.position[5] == 2 && S.position[1] == 1, "worker 5 joins third, 1 stays");
    CHECK(atomic_load(&S.queued[5]) == 0 && atomic_load(&S.waiting[5]) == 0 && S.heap[5].len == 0,
          "a joining worker starts with nothing queued and not waiting");
    CHECK(S.mapper == NULL, "the mapper for two workers is dropped when a third joins");
    deinit_sched(0);
    S.workers = 0;
    for (int w = 0; w < STARPU_NMAXWORKERS; w++) S.position[w] = -1;
}

static void nothing(void *buffers[], void *arg) {
    (void)buffers;
    (void)arg;
}

static struct starpu_task *popped;

/* A task body that asks the policy for a task as its worker would (StarPU's worker id set). */
static void pop_here(void *buffers[], void *arg) {
    (void)buffers;
    (void)arg;
    popped = pop_task(0);
}

/* Spins for a millisecond of StarPU's clock (C11 has no sleep). */
static void pause_a_millisecond(void) {
    for (double t0 = starpu_timing_now(); starpu_timing_now() - t0 < 1000.0;) continue;
}

/* Runs pop_task on StarPU worker 0 and returns what it gave. */
static struct starpu_task *pop_on_worker_0(void) {
    static struct starpu_codelet cl = {.where = STARPU_CPU, .cpu_funcs = {pop_here}, .nbuffers = 0, .name = "pop"};
    struct starpu_task *t = starpu_task_create();
    t->cl = &cl;
    t->execute_on_a_specific_worker = 1;
    t->workerid = 0;
    t->synchronous = 1;
    popped = (struct starpu_task *)&popped; /* not a task: shows a body that did not run */
    CHECK(starpu_task_submit(t) == 0, "a task on worker 0");
    return popped;
}

/* A thief's take from a victim's queue (`take_back`), under a StarPU session of `eager`, whose
   workers say whether a worker can run a task: never a queue's only task; from a list, the
   last task pushed; from a heap, its last entry, a leaf, never its top (the owner's next). */
static void the_thiefs_take(void) {
    struct starpu_conf conf;
    starpu_conf_init(&conf);
    conf.sched_policy_name = "eager";
    conf.ncpus = 2;
    if (starpu_init(&conf)) {
        CHECK(0, "StarPU did not start: the thief's take is untested");
        return;
    }
    static struct starpu_codelet cl = {.where = STARPU_CPU, .cpu_funcs = {nothing}, .nbuffers = 0, .name = "nothing"};
    struct starpu_task tasks[4];
    for (int i = 0; i < 4; i++) {
        starpu_task_init(&tasks[i]);
        tasks[i].cl = &cl;
    }
    const int victim = 1, me = 0; /* StarPU worker ids */
    /* Queued as a push queues them, in push order (PBS_STARPU_ORDER=fifo), each counted. */
    const int heaviest_first = S.heaviest_first;
    S.heaviest_first = 0;
    starpu_task_list_init(&S.queue[victim]);
    atomic_store(&S.queued[victim], 0);
    CHECK(queue_on(victim, &tasks[0]) == 1, "the first task queued: not counted 1");
    CHECK(take_back(victim, me) == NULL, "a queue's only task stays with its owner");
    CHECK(queue_on(victim, &tasks[1]) == 2 && queue_on(victim, &tasks[2]) == 3, "tasks 2 and 3 queued: miscounted");
    S.heaviest_first = heaviest_first;
    CHECK(take_back(victim, me) == &tasks[2], "from a list, the thief takes the last task pushed");
    CHECK(atomic_load(&S.queued[victim]) == 2 && starpu_task_list_back(&S.queue[victim]) == &tasks[1],
          "the list keeps its first two tasks, counted");
    starpu_task_list_init(&S.queue[victim]);

    /* Pushed with loads 5, 1, 3, 4: the heap holds 5 4 3 1, its top task 0, its last entry task 1. */
    const double loads[] = {5, 1, 3, 4};
    for (int i = 0; i < 4; i++) CHECK(heap_push(&S.heap[victim], &tasks[i], loads[i]) == 0, "push %d", i);
    atomic_store(&S.queued[victim], 4);
    CHECK(S.heap[victim].at[0].task == &tasks[0] && S.heap[victim].at[3].task == &tasks[1], "the heap's order");
    CHECK(take_back(victim, me) == &tasks[1], "from a heap, the thief takes its last entry, not its top");
    CHECK(atomic_load(&S.queued[victim]) == 3 && S.heap[victim].len == 3 && S.heap[victim].at[0].task == &tasks[0],
          "the heap keeps its top for the owner, counted");
    free(S.heap[victim].at);
    S.heap[victim] = (struct heap){0};

    /* pop_task as worker 0 (a thief: its own queue empty), two tasks in worker 1's list:
       waiting for a push, it returns at once without stealing; stealing off, it steals
       nothing; `auto` within its patience, it waits; else it steals the last one, and then,
       one task left, waits for a push. */
    const int steal = S.steal;
    S.workers = 2;
    for (int p = 0; p < 2; p++) {
        S.id[p] = p;
        S.position[p] = p;
        atomic_store(&S.queued[p], 0);
        atomic_store(&S.waiting[p], 0);
        S.idle_since[p] = 0.0;
    }
    starpu_task_list_init(&S.queue[0]);
    starpu_task_list_init(&S.queue[victim]);
    starpu_task_list_push_back(&S.queue[victim], &tasks[0]);
    starpu_task_list_push_back(&S.queue[victim], &tasks[1]);
    atomic_store(&S.queued[victim], 2);
    S.steal = 1;
    /* Repeated, a millisecond apart: a thief that did try would find worker 1's lock free
       (worker 1 asleep) in one of them at least. */
    int kept = 1;
    for (int k = 0; k < 20; k++) {
        atomic_store(&S.waiting[me], 1);
        kept &= pop_on_worker_0() == NULL && atomic_load(&S.queued[victim]) == 2;
        pause_a_millisecond();
    }
    CHECK(kept, "a waiting thief returns without stealing");
    atomic_store(&S.waiting[me], 0);
    S.steal = 0;
    CHECK(pop_on_worker_0() == NULL && atomic_load(&S.queued[victim]) == 2, "with stealing off, a thief steals nothing");
    /* `auto` within its patience: the thief steals nothing, its dry spell started (and does
       not raise its waiting flag while a queue holds two tasks); `always` steals whatever the
       patience. */
    S.steal = 2;
    atomic_store(&S.patience_us, 1e12);
    CHECK(pop_on_worker_0() == NULL && atomic_load(&S.queued[victim]) == 2 && S.idle_since[me] > 0.0,
          "auto within its patience: the thief waits");
    S.steal = 1;
    /* Worker 1's lock may be held a moment (it tries for a task of its own when woken): the
       thief skips a victim it cannot lock at once, so it tries again, as a worker would. */
    struct starpu_task *stolen = NULL;
    for (int k = 0; k < 20 && !stolen; k++) {
        atomic_store(&S.waiting[me], 0);
        stolen = pop_on_worker_0();
        if (!stolen) pause_a_millisecond();
    }
    CHECK(stolen == &tasks[1] && atomic_load(&S.queued[victim]) == 1 && S.idle_since[me] == 0.0,
          "a thief steals the last task pushed, its dry spell over");
    atomic_store(&S.patience_us, 0.0);
    CHECK(pop_on_worker_0() == NULL && atomic_load(&S.waiting[me]) == 1 && atomic_load(&S.queued[victim]) == 1,
          "a queue's last task left to its owner, the thief waits for a push");
    atomic_store(&S.waiting[me], 0);
    atomic_store(&S.queued[victim], 0);
    starpu_task_list_init(&S.queue[victim]);
    S.steal = steal;
    S.workers = 0;
    for (int p = 0; p < 2; p++) S.position[p] = -1;
    for (int i = 0; i < 4; i++) starpu_task_clean(&tasks[i]);
    starpu_shutdown();
}

/* Which workers a push wakes and which waiting flags it clears (`wake_for_push`), and a thief
   that stole nothing going to wait unless another queue holds two tasks (`wait_for_a_push`).
   Four workers, StarPU ids 10 to 13. */
static void the_wake_ups(void) {
    const int steal = S.steal;
    S.workers = 4;
    for (int p = 0; p < 4; p++) {
        S.id[p] = 10 + p;
        atomic_store(&S.waiting[10 + p], 0);
        atomic_store(&S.queued[10 + p], 0);
    }
    S.steal = 1;
    atomic_store(&S.waiting[10], 1);
    atomic_store(&S.waiting[12], 1);
    n_woken = 0;
    wake_for_push(10, 1);
    CHECK(n_woken == 1 && woken[0] == 10, "a first task wakes its owner alone: %u woken", n_woken);
    CHECK(!atomic_load(&S.waiting[10]) && atomic_load(&S.waiting[12]),
          "the owner's flag cleared; a thief's kept while one task is nothing to steal");
    n_woken = 0;
    wake_for_push(10, 2);
    CHECK(n_woken == 1 && woken[0] == 12 && !atomic_load(&S.waiting[12]),
          "a second task wakes the waiting thief, once, and clears its flag: %u woken", n_woken);
    n_woken = 0;
    wake_for_push(10, 3);
    CHECK(n_woken == 0, "nobody waiting, nobody woken: %u", n_woken);
    S.steal = 0;
    atomic_store(&S.waiting[13], 1);
    wake_for_push(10, 4);
    CHECK(n_woken == 0 && atomic_load(&S.waiting[13]), "without stealing no thief is woken");
    S.steal = 1;
    atomic_store(&S.waiting[13], 0);

    atomic_store(&S.queued[11], 1);
    atomic_store(&S.queued[10], 5);
    wait_for_a_push(10);
    CHECK(atomic_load(&S.waiting[10]), "one task elsewhere, or its own queue's: the thief waits");
    atomic_store(&S.queued[12], 2);
    wait_for_a_push(10);
    CHECK(!atomic_load(&S.waiting[10]), "two tasks in another queue: the thief does not wait");
    for (int p = 0; p < 4; p++) {
        atomic_store(&S.waiting[10 + p], 0);
        atomic_store(&S.queued[10 + p], 0);
    }
    S.workers = 0;
    S.steal = steal;
}

/* `auto`'s patience (`still_patient`): a worker's dry spell starts at its first call, and it
   waits while the spell is shorter than the patience; after a task (`idle_since` 0) a new
   spell starts; without a patience measured it steals at once. */
static void the_patience(void) {
    const int me = 7;
    atomic_store(&S.patience_us, 50.0);
    S.idle_since[me] = 0.0;
    CHECK(still_patient(me, 100.0) && S.idle_since[me] == 100.0, "the first call starts the dry spell and waits");
    CHECK(still_patient(me, 149.0), "49 µs into a patience of 50: waits");
    CHECK(!still_patient(me, 150.0), "50 µs into a patience of 50: steals");
    CHECK(!still_patient(me, 400.0) && S.idle_since[me] == 100.0, "the spell runs on from its start");
    S.idle_since[me] = 0.0;
    CHECK(still_patient(me, 400.0) && S.idle_since[me] == 400.0, "after a task, a new dry spell");
    atomic_store(&S.patience_us, 0.0);
    S.idle_since[me] = 0.0;
    CHECK(!still_patient(me, 500.0), "no patience measured yet: steals at once");
    S.idle_since[me] = 0.0;
}

/* The settings read from the environment: each value its mode, and one it does not know the
   default (named on stderr). */
static void the_settings(void) {
    CHECK(steal_of(NULL) == 1 && steal_of("always") == 1 && steal_of("never") == 0 && steal_of("auto") == 2,
          "PBS_STEAL's values");
    CHECK(steal_of("sometimes") == 1, "an unknown PBS_STEAL: always");
    CHECK(heaviest_first_of(NULL) == 1 && heaviest_first_of("heaviest") == 1 && heaviest_first_of("fifo") == 0,
          "PBS_STARPU_ORDER's values");
    CHECK(heaviest_first_of("lightest") == 1, "an unknown PBS_STARPU_ORDER: heaviest");
}

/* A thread's hazard slot goes back at its exit: 200 threads one after the other, each reading
   the mapping once, take no more slots than one (the limit is 64), and freeing goes on. */
static void *read_once(void *unused) {
    (void)unused;
    hold_mapping();
    let_go_mapping();
    return NULL;
}
static void the_hazard_slots(void) {
    hold_mapping(); /* this thread's own slot first */
    let_go_mapping();
    unsigned before = hazard_threads;
    for (int i = 0; i < 200; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, read_once, NULL) == 0) pthread_join(t, NULL);
    }
    CHECK(hazard_threads <= before + 1 && !atomic_load(&hazard_overflow),
          "200 threads one after another took %u slots", hazard_threads - before);
    for (unsigned s = 0; s < HAZARD_SLOTS; s++) CHECK(!atomic_load(&hazard[s]), "slot %u still names a mapping", s);
}

int main(void) {
    the_hazard_slots();
    the_heap();
    the_table();
    the_median();
    the_loads();
    the_written_from();
    the_grid_in_3d();
    the_mapping();
    the_grid_completed();
    the_late_end();
    the_workers_added();
    the_thiefs_take();
    the_wake_ups();
    the_patience();
    the_settings();
    if (failures) return 1;
    printf("internals: ok\n");
    return 0;
}
