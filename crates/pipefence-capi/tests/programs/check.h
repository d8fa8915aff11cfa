/* Checks for the test programs: print where and what, exit 1. */
#ifndef PIPEFENCE_TEST_CHECK_H
#define PIPEFENCE_TEST_CHECK_H
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);  \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

#define CHECK_HR(expr, expected)                                                      \
    do {                                                                              \
        long check_hr_ = (long)(expr);                                                \
        if (check_hr_ != (long)(expected)) {                                          \
            fprintf(stderr, "%s:%d: %s returned 0x%08lX, expected 0x%08lX (%s)\n",    \
                    __FILE__, __LINE__, #expr, (unsigned long)check_hr_ & 0xFFFFFFFFul, \
                    (unsigned long)(expected) & 0xFFFFFFFFul, #expected);             \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

#endif
