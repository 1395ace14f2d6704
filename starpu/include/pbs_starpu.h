/*
 * pbs_starpu.h: pbs as a StarPU 1.3 scheduling policy.
 *
 * The policy maps every task to a box of a grid through its data handles and queues it on the
 * worker that owns the box (owner computes); a worker whose queue is empty steals from the back
 * of the queues of the workers whose boxes border its own first. Box loads are the tasks'
 * durations as StarPU measures them (the profiling information when the application turned
 * profiling on, else the policy's pre- and post-execution hooks on StarPU's clock); after
 * every iteration (as many box tasks run as there are boxes) the pbs mapper (pbs.h,
 * pbs_mapper_*) decides, with the pbs executor's criterion, whether to rebalance.
 *
 * Selecting it is one line:
 *
 *     struct starpu_conf conf;
 *     starpu_conf_init(&conf);
 *     conf.sched_policy = &pbs_starpu_policy;
 *     starpu_init(&conf);
 *
 * or, for a program nobody changes, STARPU_SCHED=pbs with libpbs_starpu_preload.so in
 * LD_PRELOAD. Link: -lpbs_starpu (built by starpu/build.sh), with StarPU's own flags
 * (pkg-config starpu-1.3). The pbs settings PBS_METHOD, PBS_TOL, PBS_TRIGGER and PBS_STEPS
 * apply as for pbs_executor_new; PBS_STEAL is never (owners only), always (the default: an
 * idle worker steals at once, from a queue of two tasks or more) or auto (after two mean task
 * times idle). PBS_STARPU_ORDER is heaviest (the default: a worker runs the ready task whose
 * box was the heaviest at the last iteration's end first) or fifo (in push order).
 * PBS_STARPU_VERBOSE=1 prints the policy's figures at shutdown. One scheduling
 * context per process uses the policy, and it uses each task's sched_data field (which StarPU
 * leaves to the scheduler). Details and measurements: docs/starpu.md.
 *
 * Boxes: declare them once, after registering the handles (pbs_starpu_declare_grid, or
 * pbs_starpu_declare_grid_3d). A task's box is that of its first written handle (else its first
 * handle) that is declared. A program
 * that declares nothing gets a 1D grid: handles numbered in the order tasks first write them at
 * submission, except that a handle a task writes whole (STARPU_W) joins the box of the task's
 * first read-only handle where that has one (a double buffer's two halves are one box). That
 * grid is complete, and its iterations counted, from the first task of a box numbered before
 * (the second iteration's first); a program in which none comes is told at shutdown that it had
 * nothing to balance, its tasks having gone to the workers in turn. A task without a box (no
 * handle, or none declared while a grid is) still runs: it goes to the workers' queues in turn,
 * and the first one in a declared grid is reported on stderr once.
 */
#ifndef PBS_STARPU_H
#define PBS_STARPU_H

#include <stddef.h>
#include <starpu.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The policy, named "pbs". */
extern struct starpu_sched_policy pbs_starpu_policy;

/* Declares a grid of nx * ny boxes: handles[c * nx * ny + k] belongs to box k (box k is
   column k % nx, row k / nx), for each of the count / (nx * ny) sets of handles c (a code with
   two buffers per box gives both). Returns 0, or -EINVAL with the reason on stderr: a zero size,
   more than 2^32 - 1 boxes, a count that is not a multiple of nx * ny, a NULL handle, a handle
   given for two boxes (it keeps the first), or a grid already declared (the first stays). */
int pbs_starpu_declare_grid(size_t nx, size_t ny, const starpu_data_handle_t *handles, size_t count);

/* The same for a 3D grid of nx * ny * nz boxes: handles[c * nx * ny * nz + k] belongs to box
   k = (l * ny + j) * nx + i, at column i, row j and layer l (pbs.h's numbering); the workers'
   blocks are then compact in 3D. pbs_starpu_declare_grid(nx, ny, ...) is nz = 1. */
int pbs_starpu_declare_grid_3d(size_t nx, size_t ny, size_t nz, const starpu_data_handle_t *handles,
                               size_t count);

/* The run has `total` iterations (one task per box each; 0: unknown, the default unless the
   environment sets PBS_STARPU_ITERATIONS), from starpu_init to starpu_shutdown: the mapper
   starts no rebalancing after the last one, nor one near it that the iterations left would not
   repay (pbs_mapper_hint_iterations_left). Call it after starpu_init; returns 0. */
int pbs_starpu_hint_iterations(size_t total);

/* What the policy did since starpu_init. */
struct pbs_starpu_stats {
    size_t iterations;   /* iterations the mapper saw (as many box tasks run as there are boxes;
                            from the third on, when every box's load is a median of three) */
    size_t rebalancings; /* iterations after which the mapper rebalanced */
    size_t migrations;   /* boxes whose owner changed, summed over rebalancings */
    size_t stolen;       /* tasks run by a worker other than their box's owner */
    size_t unboxed;      /* tasks that had no box */
    double mapper_ms;    /* time spent in the mapper (on the critical path of one worker) */
};

/* Fills *stats (0, or -EINVAL if stats is NULL). */
int pbs_starpu_get_stats(struct pbs_starpu_stats *stats);

#ifdef __cplusplus
}
#endif

#endif /* PBS_STARPU_H */
