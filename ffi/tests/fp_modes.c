/*
 * Floating-point modes set after the executor started its workers: the program rounds upward
 * (fesetround) once the executor exists, and every box's quotient must be rounded as the
 * caller rounds, whichever worker runs it. Prints "ok", or how many boxes were rounded
 * otherwise, and exits 0 or 1.
 *
 *   ./fp_modes SCHEDULER
 */
#include <fenv.h>
#include <stdio.h>
#include <string.h>

#include "pbs.h"

#define NX 16
#define NY 16

static double quotient[NX * NY];

static double third_of(size_t k) {
    volatile double x = (double)(k + 1);
    return x / 3.0;
}

static int divide(void *ctx, size_t k) {
    (void)ctx;
    quotient[k] = third_of(k);
    return 0;
}

int main(int argc, char **argv) {
    pbs_executor *e = pbs_executor_new(argc > 1 ? argv[1] : "pbs", NX, NY, 1, 2, PBS_PIN_WORKERS);
    if (!e) {
        printf("%s\n", pbs_last_error());
        return 1;
    }
    /* The workers exist, started in round-to-nearest; the caller now rounds upward. */
    if (fesetround(FE_UPWARD) != 0) {
        printf("fesetround failed\n");
        return 1;
    }
    int wrong = 0;
    for (int round = 0; round < 3; round++) {
        memset(quotient, 0, sizeof quotient);
        if (pbs_executor_run_phase(e, divide, NULL, NULL) != PBS_OK) {
            printf("%s\n", pbs_last_error());
            return 1;
        }
        for (size_t k = 0; k < NX * NY; k++)
            if (quotient[k] != third_of(k)) wrong++;
    }
    pbs_executor_free(e);
    fesetround(FE_TONEAREST);
    if (wrong) {
        printf("%d box results rounded otherwise than the caller rounds\n", wrong);
        return 1;
    }
    printf("ok\n");
    return 0;
}
