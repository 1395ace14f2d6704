/* METIS's error handling (GKlib), made safe for a multithreaded program.
 *
 * For the length of every METIS call, GKlib traps SIGTERM and SIGABRT process-wide
 * (gk_sigtrap) with a handler, gk_sigthrow, that longjmps to the jmp_buf of the thread it runs
 * on: METIS's own errors (gk_errexit) raise these signals to unwind the call. A SIGTERM sent
 * from outside meanwhile was swallowed when it reached the thread inside METIS (the call
 * failed, the process went on), and made a thread outside METIS jump through its unset buffer
 * (a segmentation fault).
 *
 * These two definitions take the place of GKlib's (libmetis calls both through its PLT and GOT,
 * and the executable's symbols come first): gk_errexit marks the signal it raises as METIS's
 * own, and gk_sigthrow unwinds only for that signal, on the thread inside METIS that raised
 * it. Any other is delivered again with its default action once the handler returns, as if
 * METIS had not been running: SIGTERM ends the process.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* GKlib's per-thread stack of jmp_bufs: the innermost active METIS call's is
   gk_jbufs[gk_cur_jbufs], and gk_cur_jbufs is -1 on a thread outside METIS. */
extern __thread int gk_cur_jbufs;
extern __thread jmp_buf gk_jbufs[];

/* The signal this thread's gk_errexit is raising (0: none); volatile sig_atomic_t, as a
   variable a signal handler reads must be (without it the store before raise() was dropped). */
static __thread volatile sig_atomic_t raising;

/* As GKlib's: the message on standard error, then the signal (its default leaves
   gk_exit_on_error set, so it always raises). */
void gk_errexit(int signum, char *format, ...) {
    va_list args;
    va_start(args, format);
    vfprintf(stderr, format, args);
    va_end(args);
    size_t length = strlen(format);
    if (length == 0 || format[length - 1] != '\n') fputc('\n', stderr);
    fflush(stderr);
    raising = signum;
    raise(signum);
    raising = 0;
}

void gk_sigthrow(int signum) {
    if (raising == signum && gk_cur_jbufs >= 0) {
        raising = 0;
        /* The handler runs with the signal blocked, and longjmp keeps that mask: unblocked
           first, so that a later SIGTERM still reaches this thread. */
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, signum);
        pthread_sigmask(SIG_UNBLOCK, &set, NULL);
        longjmp(gk_jbufs[gk_cur_jbufs], signum);
    }
    /* Not METIS's own: delivered again, with the default action, when this handler returns. */
    signal(signum, SIG_DFL);
    raise(signum);
}

/* Called by the Rust side so that the linker keeps this file (and the two definitions above)
   in every program that can call METIS. */
int pbs_metis_signals_linked(void) { return 1; }
