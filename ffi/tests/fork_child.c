/* A C program that forks after creating an executor (a pre-fork server, Python's
 * multiprocessing, a code spawning helpers): in the child, the executor's calls return
 * PBS_UNSUPPORTED with a message instead of waiting for ever for workers that stayed in the
 * parent, pbs_executor_free returns, and a new executor runs; the parent goes on as before.
 *
 *   ./fork_child SCHEDULER      prints "ok" and exits 0, or names what failed and exits 1
 */
#define _POSIX_C_SOURCE 200809L /* fork, waitpid */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pbs.h"

static int count_box(void *ctx, size_t k) {
    (void)k;
    __atomic_fetch_add((size_t *)ctx, 1, __ATOMIC_RELAXED);
    return 0;
}

/* A phase of `e` that counts its boxes; the phase's status in *status. */
static size_t boxes_run(pbs_executor *e, pbs_status *status) {
    size_t n = 0;
    *status = pbs_executor_run_phase(e, count_box, &n, NULL);
    return n;
}

static int fail(const char *where, const char *what) {
    fprintf(stderr, "%s: %s\n", where, what);
    return 1;
}

/* The child's part: 0 when every check holds. */
static int child(pbs_executor *inherited, const char *scheduler) {
    pbs_status status;
    boxes_run(inherited, &status);
    if (status != PBS_UNSUPPORTED)
        return fail("child", "a phase of the inherited executor was not PBS_UNSUPPORTED");
    if (!strstr(pbs_last_error(), "forked"))
        return fail("child", "the message does not say the process was forked");
    if (pbs_executor_end_iteration(inherited, NULL) != PBS_UNSUPPORTED)
        return fail("child", "end_iteration of the inherited executor was not PBS_UNSUPPORTED");
    pbs_executor_free(inherited);
    pbs_executor *fresh = pbs_executor_new(scheduler, 12, 10, 1, 2, PBS_PIN_OFF);
    if (!fresh) return fail("child", pbs_last_error());
    size_t n = boxes_run(fresh, &status);
    if (status != PBS_OK || n != 120)
        return fail("child", "a new executor did not run every box once");
    pbs_executor_free(fresh);
    return 0;
}

int main(int argc, char **argv) {
    const char *scheduler = argc > 1 ? argv[1] : "pbs";
    pbs_executor *e = pbs_executor_new(scheduler, 12, 10, 1, 2, PBS_PIN_OFF);
    if (!e) return fail("parent", pbs_last_error());
    pbs_status status;
    if (boxes_run(e, &status) != 120 || status != PBS_OK)
        return fail("parent", "the phase before the fork");
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return fail("parent", "fork failed");
    if (pid == 0) _exit(child(e, scheduler));
    int child_status;
    if (waitpid(pid, &child_status, 0) != pid) return fail("parent", "waitpid failed");
    if (!WIFEXITED(child_status) || WEXITSTATUS(child_status) != 0)
        return fail("parent", "the child failed");
    if (boxes_run(e, &status) != 120 || status != PBS_OK)
        return fail("parent", "the phase after the fork");
    pbs_executor_free(e);
    printf("ok\n");
    return 0;
}
