/*
 * libpbs_starpu_preload.so: the pbs policy for StarPU programs nobody changes. StarPU 1.3 has no
 * variable that loads a policy from a library, so this library, put in LD_PRELOAD, stands in
 * for starpu_init and starpu_initialize: with STARPU_SCHED=pbs it passes StarPU a copy of the
 * program's configuration (or the default one) whose sched_policy is pbs_starpu_policy, which
 * StarPU prefers to any name; otherwise it passes the call on untouched.
 *
 *   STARPU_SCHED=pbs LD_PRELOAD=target/starpu/libpbs_starpu_preload.so ./a_starpu_program
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <starpu.h>

#include "pbs_starpu.h"

typedef int (*initialize_fn)(struct starpu_conf *, int *, char ***);

/* The next definition of starpu_initialize (StarPU's), or NULL with the reason on stderr. */
static initialize_fn next_initialize(void) {
    initialize_fn f = (initialize_fn)dlsym(RTLD_NEXT, "starpu_initialize");
    if (!f) fprintf(stderr, "pbs (StarPU preload): StarPU's starpu_initialize not found: %s\n", dlerror());
    return f;
}

int starpu_initialize(struct starpu_conf *user_conf, int *argc, char ***argv) {
    initialize_fn initialize = next_initialize();
    if (!initialize) return -ENODEV;
    const char *sched = getenv("STARPU_SCHED");
    if (!sched || strcmp(sched, "pbs") != 0) return initialize(user_conf, argc, argv);
    /* StarPU copies the configuration at initialisation, so a local copy is enough. */
    struct starpu_conf conf;
    if (user_conf) conf = *user_conf;
    else starpu_conf_init(&conf);
    conf.sched_policy = &pbs_starpu_policy;
    conf.sched_policy_name = NULL;
    /* StarPU would also look the name up among its own policies and warn that "pbs" is not
       one: the variable is hidden from it during the call (programs call this before starting
       threads of their own), then put back for the program. */
    unsetenv("STARPU_SCHED");
    int status = initialize(&conf, argc, argv);
    setenv("STARPU_SCHED", "pbs", 1);
    return status;
}

/* StarPU's starpu_init calls starpu_initialize inside its own library, past this one. */
int starpu_init(struct starpu_conf *conf) {
    return starpu_initialize(conf, NULL, NULL);
}
