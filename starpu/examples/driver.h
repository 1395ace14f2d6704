/*
 * What the example programs of starpu/examples (heat.c, md.c) share: their options, StarPU's
 * set-up with the policy named by --sched, the submission loop, the timing of iterations, the
 * trace of which worker ran which box, and the one result line. Each program gives the driver
 * a struct pbs_example: its own options, its data (two handles per box: the box before and
 * after an iteration), the task of one box in one iteration, and its checksum.
 *
 * Options every program takes:
 *   --sched pbs|eager|ws|lws|dmda|prio|...  --workers N  --iters K  --nx N  --ny N  --nz N
 *   --barrier 0|1  --window W  --empty 0|1  --hint-iterations 0|1  --declare 0|1  --submit-us U
 *   --trace FILE
 *
 * Tasks are submitted as StarPU programs do, ahead of their execution (all of them, or at most
 * W iterations' worth with --window W), so iterations overlap where their dependencies allow;
 * an iteration's time is the time between the completions of its last task and the previous
 * iteration's. --barrier 1 waits for every task after each iteration instead (submission then
 * alternates with execution). --empty 1 makes every task return at once (the policies' overhead
 * per task; the checksum is then that of the starting state). --hint-iterations 0 does not tell
 * pbs the run's length; --declare 0 does not declare the grid, so that pbs numbers the boxes
 * itself, as for a program nobody changed. --submit-us U pauses the submitting thread U µs before
 * each task, as a program that prepares each task's arguments does: the workers then run a first
 * iteration's tasks before the last ones are submitted.
 *
 * --sched pbs selects pbs_starpu_policy (conf.sched_policy); any other name is passed to StarPU
 * (conf.sched_policy_name), and a name StarPU does not know is refused. --trace writes
 * "worker box" for every task in the order tasks started, for `pbs-bench starpu` to derive
 * affinity and modelled cache misses. The result line holds key=value pairs: the median and
 * mean iteration time, the mean efficiency (sum of task times / workers / wall), the policy's
 * figures under pbs, the bytes a task writes and reads of each neighbour (for the cache model)
 * and the checksum.
 */
#ifndef PBS_STARPU_EXAMPLE_DRIVER_H
#define PBS_STARPU_EXAMPLE_DRIVER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <starpu.h>

/* One example program. */
struct pbs_example {
    /* The result line's first word and the name in messages. */
    const char *name;
    /* Its options beyond the driver's, for the usage line. */
    const char *usage;
    /* Takes an option of its own: 1 when KEY is one (VALUE read), 0 when it is not, -1 when
       VALUE is bad (message printed). */
    int (*option)(const char *key, const char *value);
    /* Checks the sizes and makes the data of NX x NY boxes (x pbs_example_nz layers):
       handle[b * boxes + k] is box k's before an even (b = 0) or odd (b = 1) iteration. 0, or
       -1 with a message printed (a 2D program given --nz above 1 among them). */
    int (*setup)(size_t nx, size_t ny, starpu_data_handle_t *handle);
    /* Submits box K's task of iteration IT, reading HANDLE[from] and writing HANDLE[to] (each
       an array of the boxes' handles). 0, or a negative errno. */
    int (*submit)(size_t k, long it, starpu_data_handle_t *from, starpu_data_handle_t *to);
    /* After the last iteration (handles unregistered): 0, or -1 with a message printed when
       the state is not sound (a non-finite value, a particle lost). */
    int (*check)(long iterations);
    /* The checksum of the state after ITERATIONS iterations. */
    uint64_t (*checksum)(long iterations);
    /* Extra key=value pairs of the result line (each with a leading space). */
    void (*print_fields)(FILE *out, long iterations);
    /* Bytes a box's task writes and reads of its own, reads of each face neighbour's, and writes
       of its own: the cache model's footprint. */
    uint64_t (*box_bytes)(void);
    uint64_t (*halo_bytes)(void);
    uint64_t (*written_bytes)(void);
    /* Frees what setup made. */
    void (*cleanup)(void);
};

/* The grid of boxes, set before setup: nx x ny, times nz layers (1 unless --nz; a 3D grid is
   declared with pbs_starpu_declare_grid_3d, box k = (l * ny + j) * nx + i). */
extern size_t pbs_example_nx, pbs_example_ny, pbs_example_nz;

/* Called first in a task: records its start in the trace and returns its start time (ms), or a
   negative value when --empty asks the task to return at once (pbs_example_task_end already
   called). */
double pbs_example_task_begin(size_t k, long it);

/* Called last in a task that began at T0: adds its time to the worker's and counts it in its
   iteration. */
void pbs_example_task_end(long it, double t0);

/* Runs the program: parses ARGV, sets StarPU up, submits the iterations, prints the result line.
   The exit status of main. */
int pbs_example_main(const struct pbs_example *app, int argc, char **argv);

/* The main of a program whose functions bear the names of struct pbs_example's fields. */
#define PBS_EXAMPLE_MAIN(NAME, USAGE)                                                                  \
    int main(int argc, char **argv) {                                                                  \
        static const struct pbs_example app = {                                                        \
            .name = NAME,                                                                              \
            .usage = USAGE,                                                                            \
            .option = option,                                                                          \
            .setup = setup,                                                                            \
            .submit = submit,                                                                          \
            .check = check,                                                                            \
            .checksum = checksum,                                                                      \
            .print_fields = print_fields,                                                              \
            .box_bytes = box_bytes,                                                                    \
            .halo_bytes = halo_bytes,                                                                  \
            .written_bytes = written_bytes,                                                            \
            .cleanup = cleanup,                                                                        \
        };                                                                                             \
        return pbs_example_main(&app, argc, argv);                                                     \
    }

#endif
