/*
 * pbs.h: the C interface to pbs, pair-potential scheduling for iterative grid codes.
 *
 * Three ways in, all on plain data:
 *
 *  1. The balancer alone (pbs_partitioner_*): you give the measured load of every box, it
 *     returns the owner of every box (a vCore id in 0..vcores-1). Run your own threads (OpenMP,
 *     MPI ranks, ...) over the owners; call it again with new loads and it warm-starts from
 *     where it ended.
 *
 *  2. The runtime (pbs_executor_*): a pinned worker pool runs a C task once per box and
 *     phase, under the PBS executor or one of its baselines ("pbs", "ws", "eager", "static",
 *     and the seed papers' "rcb", "norcb", "packsteal", "vector-rcb", "vector-greedy",
 *     "norm-greedy", "diffusion").
 *     "pbs" times the boxes itself and rebalances between iterations when it pays.
 *
 *  3. The runtime's decisions without its threads (pbs_mapper_*), for a task runtime that
 *     runs the tasks itself: the StarPU scheduling policy of starpu/ is built on it.
 *
 * Boxes: a grid of nx * ny * nz boxes (nz = 1 for 2D); box k = (l * ny + j) * nx + i.
 * Errors: functions return PBS_OK or another pbs_status (constructors return NULL), and
 * pbs_last_error() gives the message, naming the bad input. Nothing here aborts or hangs on
 * bad input. Handles are not thread-safe: use each from one thread at a time.
 *
 * Link: installed by scripts/install.sh, `pkg-config --cflags --libs pbs` (libpbs.so; with
 * --static, libpbs.a and the system libraries it needs); in the build tree, -lpbs_ffi
 * (libpbs_ffi.so from `cargo build --release -p pbs-ffi`). Examples: ffi/examples/.
 */
#ifndef PBS_H
#define PBS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header (semantic versioning; while the major version is 0 a minor
   release may change the interface, and the installed library's SONAME names both). */
#define PBS_VERSION_MAJOR 0
#define PBS_VERSION_MINOR 1
#define PBS_VERSION_PATCH 0
#define PBS_VERSION_STRING "0.1.0"

/* The version of the library linked at run time, as "MAJOR.MINOR.PATCH": for a program to
   print beside its results, or to compare with PBS_VERSION_STRING. A static string. */
const char *pbs_version(void);

/* What a call did. */
typedef enum pbs_status {
    PBS_OK = 0,
    /* A bad argument (empty grid, NaN or negative load, zero vCores, more vCores than boxes,
       unknown method or scheduler, wrong length...): pbs_last_error() names it. */
    PBS_INVALID_ARGUMENT = 1,
    /* A required pointer was NULL. */
    PBS_NULL_POINTER = 2,
    /* The call does not apply (e.g. planned owners of a dynamic scheduler), or this process was
       forked after the executor started its threads, which stay in the parent: a child
       creates its own executor. */
    PBS_UNSUPPORTED = 3,
    /* An internal error stopped the call (a bug in pbs); the handle stays usable. */
    PBS_INTERNAL_ERROR = 4,
    /* A task returned non-zero. Every other box of the phase still ran; the message names the
       lowest failing box and its code; the executor stays usable. */
    PBS_TASK_FAILED = 5,
    /* The executor was already in a call: a task called its own executor, or two threads
       used it at once. Nothing was done; the call in progress goes on unharmed. */
    PBS_BUSY = 6,
    /* The system refused a resource: a worker thread (its thread limit; or more than 4096
       worker threads in all the executors of the process) or the memory for a grid this
       large. Nothing was leaked; the threads already started were stopped. */
    PBS_OUT_OF_RESOURCES = 7
} pbs_status;

/* The message of the last failed call on this thread (UTF-8), or NULL if none failed. Valid
   until the next failing call on this thread. */
const char *pbs_last_error(void);

/* The status of the last failed call on this thread (PBS_OK if none failed): why a
   constructor returned NULL. */
pbs_status pbs_last_error_status(void);

/* ---------------------------------------------------------------------------------------- */
/* 1. The balancer: loads in, owners out.                                                   */
/* ---------------------------------------------------------------------------------------- */

/* The balancer's tolerance by default: max_avg <= (1 + tol) * lower bound. */
#define PBS_DEFAULT_TOL 0.05

typedef struct pbs_partitioner pbs_partitioner;

/* How a balancing ended (see docs/design.md for the definitions). */
typedef struct pbs_outcome {
    size_t steps;       /* balancer steps taken */
    int converged;      /* 1 when max_avg <= (1 + tol) * lower_bound */
    double max_avg;     /* max_i Q_i / mean */
    double lower_bound; /* max(1, max_k q_k / mean): what no mapping can beat */
    double dol_max;     /* largest (Q_i - mean) / mean */
    double dol_min;     /* smallest (Q_i - mean) / mean */
    size_t edge_cut;    /* neighbouring box pairs with different owners */
    size_t migrations;  /* boxes whose owner changed in this call */
    double elapsed_ms;  /* wall time of the call */
} pbs_outcome;

/* A balancer of `vcores` vCores over nx * ny * nz boxes. `method` is a method name
   ("power-cells", the default; "power-cells-pair", its vCores moved by a pair potential; or
   the paper's "paper-eq7", "paper-eq7-attract", "paper-eq6", "paper-eq4", "paper-eq1"); NULL
   means "power-cells". The paper's methods start their first balancing from vCores at random
   positions drawn from `seed`; the others from the centroids of a recursive bisection of the
   loads (`seed` unused). NULL on error (pbs_last_error()). */
pbs_partitioner *pbs_partitioner_new(size_t nx, size_t ny, size_t nz, size_t vcores,
                                     const char *method, uint64_t seed);

/* Balances `loads` (n_loads == nx * ny * nz values, finite and >= 0; box times from the last
   iteration, say) and writes the owner of every box into `owners` (n_loads entries).
   `outcome` (may be NULL) describes the owners written; its `migrations` counts them against
   the previous call's (0 on the first call). `max_steps` bounds the vCores' steps of a call.

   The first call. The vCores start from the centroids of a recursive bisection of the loads
   and run to the tolerance the refinement wants after them, t = 0.01 where 250 boxes or more
   that carry load (a load above 0) fall to a vCore, else 0.1 (as `pbs` in pbs-bench peers,
   docs/peers.md); with the paper's methods they start at random positions drawn from `seed`
   and t = `tol`. Their owners are then refined (below) to within min(tol, 0.005) of the
   lower bound, and where the vCores crawled (more than 30 steps) and the refinement ends
   above that, the parts of a recursive bisection refined the same way are written instead
   where their largest load is lower. Where fewer boxes carry load than 1/t per vCore, vCores
   would only crawl towards t: the parts of a recursive bisection are refined instead, without
   the group re-cuts (0 steps). Other than with the paper's methods, where fewer than 250
   boxes that carry load fall to a vCore those refined parts come first and are written, with
   0 steps, where their largest load is within 1.01 times the lower bound; else the vCores run
   as above and the better balanced of the two is written. Loads that are all zero (a call
   before anything was timed) are split as if every box weighed 1: the boxes evenly.

   Later calls start from where the previous call ended, or, when that mapping is more than
   1.5 times the lower bound out of balance on these loads, over from a recursive bisection of
   them, each part keeping the id of the old part it overlaps most, and stop when converged
   within `tol` or after `max_steps` steps, at most 30, with the best mapping found (the
   passes below finish what the vCores leave). They write the cells' owners, which move fewer
   boxes from call to call than refined ones, a part in pieces mended as below; where fewer
   boxes carry load than 1/tol per vCore, the cells stop at a tolerance of two such boxes'
   share of a vCore's load, then single boundary boxes move as below until the largest load is
   within `tol`, and borders are shortened box by box. Where the owners
   still end above `tol`, the owners the previous call wrote are refined the same way on the
   new loads and written instead where they reach `tol` or balance better (the cells' owners
   then refined too); where neither reaches `tol`, the parts of a recursive bisection refined
   the same way, each keeping the id of the old part it overlaps most, are written instead
   where their largest load is lower by more than `tol` (a map far from the last one, where
   few boxes carry load), and the next call starts from their centroids.

   Every call: with "power-cells", a vCore left with no box gets one unless that would raise
   the largest load or split a part, and a call stuck over 1.2 times the lower bound starts
   over once from a bisection. A part still left with no box then gets one: a box it held in
   the previous call's owners where one may go, else one with no load, else the one that
   lengthens the cut least, from a part that keeps another box and stays in one piece. Last,
   in a later call, a face-connected group of boxes with no load that all left the same part
   for the same part goes back to that part, where it touches it, the cut does not grow and
   the part it leaves stays in one piece.

   The refinement: a part in pieces keeps its most loaded piece and hands the others to the
   parts around them; single boundary boxes go to a neighbouring part (no part split or
   emptied) until the largest load is within the target or no move lowers it; each part and
   the parts within two face steps of it are cut again as a recursive bisection cuts their
   union, where that shortens the cut between them, moving at most 10 boxes per face saved and
   keeping the largest load within 1.01 times the lower bound (or where it was), single boxes
   then moving again towards the target; neighbouring parts are cut apart again along straight
   lines (or, where boxes with no load allow, the shortest cut) where that shortens their
   border, and borders are shortened box by box, these two where that keeps the largest load. */
pbs_status pbs_partitioner_balance(pbs_partitioner *p, const double *loads, size_t n_loads,
                                   double tol, size_t max_steps, uint32_t *owners,
                                   pbs_outcome *outcome);

/* Frees a partitioner (NULL is allowed). */
void pbs_partitioner_free(pbs_partitioner *p);

/* ---------------------------------------------------------------------------------------- */
/* 2. The runtime: a C task per box and phase on a worker pool.                             */
/* ---------------------------------------------------------------------------------------- */

typedef struct pbs_executor pbs_executor;

/* A task: runs box `box` of the current phase and returns 0, or non-zero on failure (a NaN,
   a failed allocation...): the phase then ends with PBS_TASK_FAILED. It is called
   concurrently from the workers with the same `ctx`: read anything from the previous phase,
   write only box `box`'s own data (owner computes), and results do not depend on the
   scheduler: every worker runs it with the caller's floating-point modes of the moment
   (rounding, flush-to-zero), set with fesetround or MXCSR after the executor or before. It
   must return (no longjmp or C++ exception out of it: that aborts the process), a signal
   handler must not longjmp out of a pbs call either (the workers would go on with a phase
   whose caller has left), and it must not call the executor that runs it: such a call
   returns PBS_BUSY (and pbs_executor_free frees nothing) while the phase goes on. */
typedef int (*pbs_task)(void *ctx, size_t box);

/* What one phase did. */
typedef struct pbs_phase_stats {
    double wall_ms;    /* wall time of the phase, barrier included */
    double efficiency; /* (sum of task times / threads) / wall time */
    double affinity;   /* share of boxes run on the same thread as last phase; -1 if none to compare */
} pbs_phase_stats;

/* What happened between two iterations. */
typedef struct pbs_iteration_end {
    int rebalanced;      /* 1 when the balancer ran */
    double rebalance_ms; /* its time */
    size_t migrations;   /* boxes whose owner changed */
    double max_avg;      /* max_avg of the thread loads of the iteration that ended */
} pbs_iteration_end;

/* Which threads pbs_executor_new pins (the `pin` argument). */
#define PBS_PIN_OFF 0 /* none: the OS places every thread */
/* Each worker on its core for good; the calling thread (worker 0, as OpenMP's master) runs
   its phases on worker 0's core but keeps its own CPU mask between them, so that threads it
   creates later (an OpenMP team, the user's) are not confined to one CPU. A phase it starts
   on another CPU pins it for that phase (two sched_setaffinity calls, about 5 us), which
   moves it to worker 0's core, where it stays; a phase it starts there costs no call. */
#define PBS_PIN_WORKERS 1
/* As PBS_PIN_WORKERS, and the calling thread stays on worker 0's core between phases and
   after pbs_executor_free, as with OMP_PROC_BIND=true: no cost per phase, but every thread
   it creates afterwards inherits that one core. */
#define PBS_PIN_WORKERS_AND_CALLER 2

/* An executor over nx * ny * nz boxes: `scheduler` is "pbs", "ws" (work stealing), "eager"
   (one FIFO queue), "static" (equal contiguous blocks, like OpenMP schedule(static)), or a
   remapper of the seed papers: "rcb", "norcb", "packsteal", "vector-rcb", "vector-greedy",
   "norm-greedy", "diffusion" (docs/balancers.md;
   "norcb" cuts as "rcb" until pbs_executor_hint_motion tells it how the particles move).
   `threads` = 0 takes PBS_NUM_THREADS, else one worker per core the process may run on (all
   of the machine unless taskset, mpirun --bind-to, srun --cpu-bind or a cpuset gave it part;
   OpenMP binding the caller to one place does not narrow it). `pin` is one of PBS_PIN_*:
   pinned workers stay on those cores; pinned, pbs starts its vCores one NUMA node per region
   of the domain. Idle workers spin
   200 us, then sleep; PBS_WAIT_POLICY=passive makes them sleep at once, active spin until the
   next phase (see docs/coexistence.md for OpenMP in the same process). Workers get the stack a
   new C thread gets (ulimit -s), or PBS_STACKSIZE (OMP_STACKSIZE's syntax; OMP_STACKSIZE
   itself where set), at least 2 MiB. The "pbs" scheduler's
   settings come from PBS_METHOD, PBS_TOL (its tolerance, 0.02), PBS_TRIGGER (0.05), PBS_STEPS,
   PBS_STEAL (never, always, auto), PBS_OVERLAP (on: the balancer in idle time, or on a thread
   of its own when a step outlasts that idle time; idle: idle time or stop; thread: always its
   own thread; off: stop the iteration), PBS_LEND (never, auto, always) and PBS_CRITERION
   (when to rebalance: boulmier, boulmier-eq24, menon, procassini:RHO, marquez:XI,
   periodic:T, always, never), or from code through pbs_executor_new_with. NULL on error: a
   bad argument or environment variable, or a thread or the memory the system refused
   (pbs_last_error() says which). */
pbs_executor *pbs_executor_new(const char *scheduler, size_t nx, size_t ny, size_t nz,
                               size_t threads, int pin);

/* pbs_executor_new with the "pbs" scheduler's settings given in code, as "NAME=value" strings
   by the names of their environment variables ({"PBS_TOL=0.01", "PBS_CRITERION=menon", NULL}),
   taking precedence over the environment. `settings` is NULL (none) or ends with a NULL
   entry. An unknown name, a name given twice, an entry without '=' or a value the setting
   does not take is an error that names it (checked for every scheduler; only "pbs" uses
   them). */
pbs_executor *pbs_executor_new_with(const char *scheduler, size_t nx, size_t ny, size_t nz,
                                    size_t threads, int pin, const char *const *settings);

/* Worker threads of the executor (0 if `e` is NULL). */
size_t pbs_executor_threads(const pbs_executor *e);

/* Runs task(ctx, k) exactly once for every box k, then returns (a barrier): PBS_OK, or
   PBS_TASK_FAILED if a task returned non-zero (every box still ran once). `stats` may be
   NULL; it is filled in either case. */
pbs_status pbs_executor_run_phase(pbs_executor *e, pbs_task task, void *ctx,
                                  pbs_phase_stats *stats);

/* A range task: runs boxes begin..end-1 (each once in the phase) and returns 0, or non-zero on
   failure, under the rules of pbs_task. The ranges are the scheduler's (contiguous runs of
   one worker's boxes), so they differ from one scheduler to another. */
typedef int (*pbs_range_task)(void *ctx, size_t begin, size_t end);

/* pbs_executor_run_phase with a range task: one call per run of boxes instead of per box,
   for boxes so small that a call each costs (empty cells, a few particles). A failure names
   the lowest failing range by its first box. */
pbs_status pbs_executor_run_phase_ranges(pbs_executor *e, pbs_range_task task, void *ctx,
                                         pbs_phase_stats *stats);

/* A phase that computes value(ctx, k) once for every box k and writes the sum of the values,
   added in box order, to *sum: the same bits under every scheduler and thread count (a
   reduction per thread would not be). `stats` may be NULL. */
pbs_status pbs_executor_reduce_sum(pbs_executor *e, double (*value)(void *ctx, size_t k), void *ctx,
                                   double *sum, pbs_phase_stats *stats);

/* Ends an iteration: "pbs" turns the measured box times into loads and rebalances if its
   criterion says it pays; the other schedulers have nothing to do. `end` may be NULL. */
pbs_status pbs_executor_end_iteration(pbs_executor *e, pbs_iteration_end *end);

/* Run-length hint: the run ends after `iterations` more calls of pbs_executor_end_iteration
   (0 forgets it). "pbs" and the remappers then start no rebalancing at the last one's end,
   where no iteration would run on it, and "pbs" none before it that the iterations left
   would not repay; the other schedulers ignore it. Call it before the loop, and again if
   the count changes. */
pbs_status pbs_executor_hint_iterations_left(pbs_executor *e, uint64_t iterations);

/* Runs f(ctx, worker) once on every worker thread, outside any phase: to allocate and
   first-touch each worker's data on its own NUMA node, say. */
pbs_status pbs_executor_on_each_thread(pbs_executor *e, void (*f)(void *ctx, size_t worker),
                                       void *ctx);

/* Cost hints: loads known in advance (n == number of boxes, finite and >= 0: an obstacle
   map, a density) map the boxes now under "pbs" and the remappers, instead of a uniform
   first guess;
   PBS_UNSUPPORTED for the schedulers that do not balance. Call it between phases. */
pbs_status pbs_executor_hint_loads(pbs_executor *e, const double *loads, size_t n);

/* Motion hints, between iterations: per box the sum of its particles' velocities (momentum:
   3 * n doubles, x, y, z of box 0 then of box 1...; z not read on a 2D grid) and their
   number (particles: n doubles, finite and >= 0). "norcb" keeps the last ones and cuts along
   the mean velocity of each part at its next remapping; the other schedulers answer
   PBS_UNSUPPORTED, read nothing, and may be told nothing more. */
pbs_status pbs_executor_hint_motion(pbs_executor *e, const double *momentum, const double *particles,
                                    size_t n);

/* The worker that will run each box in the next phase (n == number of boxes), for
   schedulers that decide it in advance ("pbs": the balancer's owners; "static"; the
   remappers): where to
   first-touch box data. PBS_UNSUPPORTED for "ws" and "eager". */
pbs_status pbs_executor_owners(const pbs_executor *e, uint32_t *owners, size_t n);

/* The id of the worker running the caller inside a task (0..threads-1), or -1 outside. */
int pbs_current_worker(void);

/* Stops the workers and frees the executor (NULL is allowed). From inside one of its own
   tasks it frees nothing and sets pbs_last_error(). In a process forked after the executor
   started its threads it frees nothing either (they are in the parent; the memory goes with
   the process). */
void pbs_executor_free(pbs_executor *e);

/* ---------------------------------------------------------------------------------------- */
/* 3. The runtime's decisions without its threads: for a runtime that runs the tasks itself.  */
/* ---------------------------------------------------------------------------------------- */

/* The "pbs" executor's mapping decisions (balancer, criterion, first-measurement rule, check,
   trigger, persistence and payback rules; docs/design.md) for a task runtime that runs the tasks on its own workers, as the
   StarPU policy of starpu/ does: after each iteration, give the measured box loads; the
   mapper rebalances when it pays and says who owns each box and whom each worker should steal
   from. The balancer runs inside pbs_mapper_end_iteration, on the calling thread. */
typedef struct pbs_mapper pbs_mapper;

/* A mapper of `workers` workers over nx * ny * nz boxes; starts from a balanced mapping of
   uniform loads (vCores drawn from `seed`). Reads PBS_METHOD, PBS_TOL, PBS_TRIGGER and
   PBS_STEPS as pbs_executor_new does. NULL on error (pbs_last_error()). */
pbs_mapper *pbs_mapper_new(size_t nx, size_t ny, size_t nz, size_t workers, uint64_t seed);

/* The owner (0..workers-1) of every box: n == number of boxes. */
pbs_status pbs_mapper_owners(const pbs_mapper *m, uint32_t *owners, size_t n);

/* The workers other than `worker`, in the order it should steal from them (those whose boxes
   border its own first): n == workers - 1. */
pbs_status pbs_mapper_victims(const pbs_mapper *m, size_t worker, uint32_t *victims, size_t n);

/* Ends an iteration whose measured box loads (seconds; n == number of boxes, finite, >= 0)
   are `loads`; rebalances when the criterion says it pays. `end` may be NULL. On error
   nothing changes. */
pbs_status pbs_mapper_end_iteration(pbs_mapper *m, const double *loads, size_t n, pbs_iteration_end *end);

/* The run ends after `iterations` more pbs_mapper_end_iteration calls, the next one included
   (0 forgets the hint, as does a run that goes on past it): the mapper starts no rebalancing
   at the last one's end, nor one before it that the iterations left would not repay. */
pbs_status pbs_mapper_hint_iterations_left(pbs_mapper *m, uint64_t iterations);

/* Frees a mapper (NULL is allowed). */
void pbs_mapper_free(pbs_mapper *m);

/* ---- Cells to boxes ---------------------------------------------------------------------
   A domain of cells_x * cells_y cells cut into tiles of tile_x * tile_y cells, one tile per
   box; the last tile of a row or column is smaller when the tile size does not divide the
   domain. On row-major data, wide tiles (tile_x = cells_x: whole rows) read memory in long
   runs (15-50 % faster than 16x16 tiles in docs/tiles.md); square tiles keep the halo small.
   Errors name a zero size or a box out of range. */

/* The grid of boxes to create the executor or partitioner with: *nx by *ny. */
pbs_status pbs_tiling_grid(size_t cells_x, size_t cells_y, size_t tile_x, size_t tile_y,
                           size_t *nx, size_t *ny);

/* The cells of box k's tile: columns x0 <= x < x1, rows y0 <= y < y1. */
pbs_status pbs_tiling_cells(size_t cells_x, size_t cells_y, size_t tile_x, size_t tile_y,
                            size_t k, size_t *x0, size_t *x1, size_t *y0, size_t *y1);

/* The same in 3D: cells[0] * cells[1] * cells[2] cells in tiles of tile[0] * tile[1] * tile[2]
   (x, y, z). The grid of boxes, grid[0] * grid[1] * grid[2], for pbs_executor_new's nx, ny, nz. */
pbs_status pbs_tiling_grid_3d(const size_t cells[3], const size_t tile[3], size_t grid[3]);

/* The cells of box k's tile in 3D: lo[a] <= c < hi[a] along each axis a. */
pbs_status pbs_tiling_cells_3d(const size_t cells[3], const size_t tile[3], size_t k, size_t lo[3],
                               size_t hi[3]);

#ifdef __cplusplus
}
#endif

#endif /* PBS_H */
