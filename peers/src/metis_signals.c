/* METIS's error handling (GKlib), made safe for a program that has threads or signal handlers
 * of its own.
 *
 * METIS unwinds from its own errors by a signal: gk_errexit prints the message and raises
 * SIGABRT (out of memory) or SIGTERM (other errors), and the handler that every METIS call
 * installs for the length of the call (gk_sigtrap, undone by gk_siguntrap) longjmps to the
 * calling thread's jmp_buf, from which the call returns an error status. GKlib's own versions
 * of these functions install the handler process-wide with signal() and restore the previous
 * one the same way, which
 *   - swallowed a SIGTERM from outside on the thread inside METIS (the call failed, the
 *     program went on), and made any other thread jump through its unset buffer (SIGSEGV);
 *   - ignored what the program had set for SIGTERM during the call (its handler, SIG_IGN);
 *   - gave the program its handlers back through signal(): one-shot, without SA_RESTART, and
 *     without SA_SIGINFO, so that a three-argument handler then read a siginfo that was not
 *     there;
 *   - left the signal pending on a thread that blocks it (a program taking its signals with
 *     sigwait): METIS went on past its own failed allocation and crashed.
 *
 * The definitions below take the place of GKlib's gk_errexit, gk_sigtrap and gk_siguntrap
 * (libmetis calls all three through its PLT, and the executable's symbols come first); GKlib's
 * handler, gk_sigthrow, is then installed by nothing. The first METIS call under way in the
 * process saves the program's actions for SIGABRT and SIGTERM with sigaction and installs
 * on_signal; the last one to end restores them exactly (unless the program set others
 * meanwhile). A signal METIS raised itself unwinds its call; any other goes where the
 * program's saved action says: its handler, with the same arguments, mask and flags; nothing,
 * if ignored; the default action otherwise (SIGTERM ends the process, from whichever thread it
 * reaches).
 *
 * Calls from Rust are one at a time (src/metis.rs holds a lock around each); the counting below
 * also keeps the program's actions right if C code in the same process calls METIS at once.
 */
#define _XOPEN_SOURCE 700 /* sigaction, its SA_ flags, pthread_sigmask under any -std */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* GKlib's per-thread stack of jmp_bufs: the innermost active METIS call's is
   gk_jbufs[gk_cur_jbufs], and gk_cur_jbufs is -1 on a thread outside METIS. GKlib holds
   MAX_JBUFS = 128 of them. */
extern __thread int gk_cur_jbufs;
extern __thread jmp_buf gk_jbufs[];
#define MAX_JBUFS 128

/* The signals METIS raises: SIGABRT (its SIGMEM) and SIGTERM (its SIGERR). */
static const int trapped[2] = {SIGABRT, SIGTERM};
static int slot(int signum) { return signum == SIGABRT ? 0 : 1; }

/* METIS calls under way in the process, and the program's actions they replaced: saved under
   `lock` by the first call before it installs on_signal, and read (or, for a one-shot handler
   that has run, set to the default) by on_signal only while it is installed, that is before
   the last call removes it and the next first call can save them again. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int calls;
static struct sigaction program[2];

/* The signal this thread's gk_errexit is raising (0: none), and this thread's signal mask
   before gk_errexit unblocked that signal; volatile sig_atomic_t, as a variable a handler reads
   must be (without it the store before raise() was dropped). */
static __thread volatile sig_atomic_t raising;
static __thread sigset_t mask_before_error;

/* The program's action for `signum`, carried out from inside on_signal. */
static void forward(int signum, siginfo_t *info, void *context) {
    struct sigaction *saved = &program[slot(signum)];
    struct sigaction now = *saved;
    if (now.sa_flags & SA_RESETHAND) {
        /* A one-shot handler: the program's action becomes the default once it has run. */
        saved->sa_handler = SIG_DFL;
        saved->sa_flags &= ~(SA_SIGINFO | SA_RESETHAND);
    }
    if (now.sa_flags & SA_SIGINFO) {
        now.sa_sigaction(signum, info, context);
    } else if (now.sa_handler == SIG_IGN) {
        return;
    } else if (now.sa_handler == SIG_DFL) {
        /* Delivered again with the default action once this handler returns (the signal is
           blocked until then): SIGTERM and SIGABRT end the process. */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigaction(signum, &dfl, NULL);
        raise(signum);
    } else {
        now.sa_handler(signum);
    }
}

static void on_signal(int signum, siginfo_t *info, void *context) {
    if (raising == signum && gk_cur_jbufs >= 0) {
        /* METIS's own: unwind its call. longjmp keeps the handler's mask (the signal blocked):
           put back the thread's mask from before gk_errexit. */
        raising = 0;
        pthread_sigmask(SIG_SETMASK, &mask_before_error, NULL);
        longjmp(gk_jbufs[gk_cur_jbufs], signum);
    }
    forward(signum, info, context);
}

/* As GKlib's: the message on standard error, then the signal (its default leaves
   gk_exit_on_error set, so it always raises). The signal is unblocked on this thread for the
   raise, so that it is delivered at once and unwinds the call. */
void gk_errexit(int signum, char *format, ...) {
    va_list args;
    va_start(args, format);
    vfprintf(stderr, format, args);
    va_end(args);
    size_t length = strlen(format);
    if (length == 0 || format[length - 1] != '\n') fputc('\n', stderr);
    fflush(stderr);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, signum);
    pthread_sigmask(SIG_UNBLOCK, &only, &mask_before_error);
    raising = signum;
    raise(signum);
    /* Reached only outside any METIS call (no trap): the program's action ran and returned. */
    raising = 0;
    pthread_sigmask(SIG_SETMASK, &mask_before_error, NULL);
}

int gk_sigtrap(void) {
    if (gk_cur_jbufs + 1 >= MAX_JBUFS) return 0;
    gk_cur_jbufs++;
    pthread_mutex_lock(&lock);
    if (calls++ == 0) {
        for (int i = 0; i < 2; i++) {
            struct sigaction current, ours;
            sigaction(trapped[i], NULL, &current);
            memset(&ours, 0, sizeof ours);
            ours.sa_sigaction = on_signal;
            /* The program's mask and flags, so that its handler runs as it asked. */
            ours.sa_mask = current.sa_mask;
            ours.sa_flags =
                SA_SIGINFO | (current.sa_flags & (SA_RESTART | SA_NODEFER | SA_ONSTACK));
            program[i] = current;
            sigaction(trapped[i], &ours, NULL);
        }
    }
    pthread_mutex_unlock(&lock);
    return 1;
}

int gk_siguntrap(void) {
    if (gk_cur_jbufs == -1) return 0;
    gk_cur_jbufs--;
    pthread_mutex_lock(&lock);
    if (calls > 0 && --calls == 0) {
        for (int i = 0; i < 2; i++) {
            struct sigaction current;
            sigaction(trapped[i], NULL, &current);
            /* Unless the program set another action meanwhile, which stays. */
            if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_signal)
                sigaction(trapped[i], &program[i], NULL);
        }
    }
    pthread_mutex_unlock(&lock);
    return 1;
}

/* Called by the Rust side so that the linker keeps this file (and the definitions above) in
   every program that can call METIS. */
int pbs_metis_signals_linked(void) { return 1; }
