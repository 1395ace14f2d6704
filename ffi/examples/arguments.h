/*
 * The examples' command-line numbers, read whole or refused: strtoul alone reads "two" as 0
 * (all cores, or no iteration), "8x" as 8 and "-5" as a huge count, and the program then runs
 * something else than was asked without a word. Each function prints
 *   PROGRAM: NAME must be ..., got 'TEXT'
 * on stderr and returns -1 for such an argument, 0 with the value otherwise. The programs'
 * own checks (ranges, sizes) come after. `arg_help` prints a program's usage for -h or --help.
 */
#ifndef PBS_EXAMPLE_ARGUMENTS_H
#define PBS_EXAMPLE_ARGUMENTS_H

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* `text` as a whole number from 0 to `max` (decimal digits only). */
static inline int arg_count(const char *program, const char *name, const char *text, unsigned long long max,
                     unsigned long long *value) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = isdigit((unsigned char)text[0]) ? strtoull(text, &end, 10) : 0;
    if (!end || *end || errno == ERANGE || v > max) {
        fprintf(stderr, "%s: %s must be a whole number from 0 to %llu, got '%s'\n", program, name, max, text);
        return -1;
    }
    *value = v;
    return 0;
}

/* `text` as a real number (or nan, which some programs take to show a failure). */
static inline int arg_real(const char *program, const char *name, const char *text, double *value) {
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end || (errno == ERANGE && isinf(v))) {
        fprintf(stderr, "%s: %s must be a number, got '%s'\n", program, name, text);
        return -1;
    }
    *value = v;
    return 0;
}

/* Whether argv asks for help (-h or --help anywhere): then `usage` goes to stdout, and the
   program ends with status 0 before it reads anything else. */
static inline int arg_help(int argc, char **argv, const char *usage) {
    for (int a = 1; a < argc; a++)
        if (!strcmp(argv[a], "-h") || !strcmp(argv[a], "--help")) {
            fputs(usage, stdout);
            return 1;
        }
    return 0;
}

/* Whether argv holds at most `most` arguments after the program's name; the first extra one
   is named on stderr otherwise. */
static inline int arg_at_most(const char *program, int argc, char **argv, int most) {
    if (argc - 1 <= most) return 1;
    fprintf(stderr, "%s: unexpected argument %s\n", program, argv[most + 1]);
    return 0;
}

#endif
