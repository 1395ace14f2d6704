/* The README's C example, compiled and run by c_programs.rs (readme_c_is_the_readme_s_example),
 * which also checks that every line of the README's ```c block is a line of this file. The
 * example's lines sit between the declarations they assume and a check that each of its
 * phases returned PBS_OK. */
#include <stdio.h>

#include "pbs.h"
static int jacobi_box(void *ctx, size_t k) { /* read the old field, write box k */ return 0; }

struct field { int swaps; };
static void swap_fields(struct field *f) { f->swaps++; }

int main(void) {
    size_t nx = 12, ny = 8;
    int iters = 5;
    struct field field = {0};

    pbs_executor *e = pbs_executor_new("pbs", nx, ny, 1, 0, PBS_PIN_WORKERS); /* all cores */
    if (!e) { fprintf(stderr, "%s\n", pbs_last_error()); return 1; }
    for (int it = 0; it < iters; it++) {
        if (pbs_executor_run_phase(e, jacobi_box, &field, NULL) != PBS_OK) {
            fprintf(stderr, "%s\n", pbs_last_error()); break;       /* names the failing box */
        }
        swap_fields(&field);
        pbs_executor_end_iteration(e, NULL);
    }
    pbs_executor_free(e);

    printf("phases=%d\n", field.swaps);
    return field.swaps == iters ? 0 : 1;
}
