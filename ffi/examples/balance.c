/*
 * The balancer from C: measured loads in, the owner of every box out, call after call.
 *
 *   cargo build --release -p pbs-ffi
 *   cc -std=c11 -O2 -Iffi/include ffi/examples/balance.c -Ltarget/release -lpbs_ffi \
 *      -Wl,-rpath,$PWD/target/release -o balance && ./balance
 *
 * Prints one line per balancing: steps, whether it converged, max_avg against the lower bound,
 * boxes that changed owner, and a checksum of the owners (the Rust test compares it with the
 * Rust balancer's). Then shows what a bad load gives: an error that names the box.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "arguments.h"
#include "pbs.h"

enum { NX = 40, NY = 30, VCORES = 6 };

/* FNV-1a over the owners' little-endian bytes. */
static uint64_t owners_checksum(const uint32_t *owners, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t k = 0; k < n; k++)
        for (int b = 0; b < 4; b++) {
            h ^= (owners[k] >> (8 * b)) & 0xff;
            h *= 0x100000001b3ull;
        }
    return h;
}

static int report(const char *what, pbs_status s, const pbs_outcome *o, const uint32_t *owners) {
    if (s != PBS_OK) {
        fprintf(stderr, "%s: error %d: %s\n", what, (int)s, pbs_last_error());
        return 1;
    }
    printf("%s: steps=%zu converged=%d max_avg=%.6f lower_bound=%.6f migrations=%zu edge_cut=%zu "
           "owners=%016llx\n",
           what, o->steps, o->converged, o->max_avg, o->lower_bound, o->migrations, o->edge_cut,
           (unsigned long long)owners_checksum(owners, NX * NY));
    return 0;
}

/* Loads 1 + 50 / (1 + d²/30) around (cx, cy), d in boxes from each box's centre. */
static void hot_spot(double *loads, double cx, double cy) {
    for (size_t j = 0; j < NY; j++)
        for (size_t i = 0; i < NX; i++) {
            double dx = (double)i + 0.5 - cx, dy = (double)j + 0.5 - cy;
            loads[j * NX + i] = 1.0 + 50.0 / (1.0 + (dx * dx + dy * dy) / 30.0);
        }
}

static const char usage[] =
    "usage: balance\n"
    "The balancer from C on a 40 x 30 grid and 6 vCores: one line per balancing (steps,\n"
    "convergence, max_avg against the lower bound, boxes moved, owners' checksum), then the\n"
    "error a bad load gives.\n";

int main(int argc, char **argv) {
    if (arg_help(argc, argv, usage)) return 0;
    if (!arg_at_most("balance", argc, argv, 0)) return 2;
    double loads[NX * NY];
    uint32_t owners[NX * NY];
    pbs_outcome out;

    /* A hot spot on a light background: in a real code, last iteration's box times. */
    hot_spot(loads, 30.0, 8.0);

    pbs_partitioner *p = pbs_partitioner_new(NX, NY, 1, VCORES, NULL, 7);
    if (!p) {
        fprintf(stderr, "pbs_partitioner_new: %s\n", pbs_last_error());
        return 1;
    }
    pbs_status s = pbs_partitioner_balance(p, loads, NX * NY, PBS_DEFAULT_TOL, 5000, owners, &out);
    if (report("first", s, &out, owners)) return 1;

    /* The spot moves: the next call starts from where the last one ended. */
    hot_spot(loads, 12.0, 20.0);
    s = pbs_partitioner_balance(p, loads, NX * NY, PBS_DEFAULT_TOL, 5000, owners, &out);
    if (report("warm", s, &out, owners)) return 1;

    /* A bad load is refused with the box named; the partitioner stays usable. */
    loads[NX + 3] = NAN;
    s = pbs_partitioner_balance(p, loads, NX * NY, PBS_DEFAULT_TOL, 5000, owners, &out);
    printf("nan: status=%d message=%s\n", (int)s, pbs_last_error());

    pbs_partitioner_free(p);
    return s == PBS_INVALID_ARGUMENT ? 0 : 1;
}
