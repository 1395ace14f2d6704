/*
 * A task with 3 MiB of local arrays, as C codes ported from OpenMP have (OpenMP's workers, like
 * any C thread, get the system's default stack: 8 MiB under the usual `ulimit -s`). Every box's
 * task fills and checks its array on whichever worker runs it.
 *
 *   ./stack_task SCHEDULER   prints "ok", or the error, and exits 0 or 1
 */
#include <stdio.h>
#include <string.h>

#include "pbs.h"

#define LOCAL_BYTES (3u << 20)

static int fill_locally(void *ctx, size_t k) {
    (void)ctx;
    volatile unsigned char local[LOCAL_BYTES];
    memset((unsigned char *)local, (int)(k & 0xff), LOCAL_BYTES);
    return local[LOCAL_BYTES - 1 - k % 1024] != (unsigned char)(k & 0xff);
}

int main(int argc, char **argv) {
    pbs_executor *e = pbs_executor_new(argc > 1 ? argv[1] : "pbs", 4, 4, 1, 2, PBS_PIN_WORKERS);
    if (!e) {
        printf("%s\n", pbs_last_error());
        return 1;
    }
    pbs_status s = pbs_executor_run_phase(e, fill_locally, NULL, NULL);
    pbs_executor_free(e);
    if (s != PBS_OK) {
        printf("%s\n", pbs_last_error());
        return 1;
    }
    printf("ok\n");
    return 0;
}
