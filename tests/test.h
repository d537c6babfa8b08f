/* A small in-tree test runner. Each TEST registers itself; build/xinfer_tests runs every
 * test in a child process (a crash fails that test only) and ends with "N passed, N failed".
 * Arguments filter tests by substring of their name. */
#ifndef XI_TEST_H
#define XI_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef void (*xi_test_fn)(void);
void xi_test_register(const char *name, const char *file, xi_test_fn fn);
void xi_test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Mark the current test as not run here (a missing feature or ISA), with why; use SKIP. */
void xi_test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define SKIP(...)                                                                    \
    do {                                                                             \
        xi_test_skip(__VA_ARGS__);                                                   \
        return;                                                                      \
    } while (0)
/* Number of failed checks in the current test. */
int xi_test_failed(void);
/* Shared data folder (XINFER_TEST_DATA, default ../shared/data) joined with rel. Static buffer
 * per call site is not needed: returns a heap string the test may leak. */
char *xi_test_data(const char *rel);
/* Path of the xinfer binary (XINFER_BIN, default build/xinfer). */
const char *xi_test_bin(void);
/* A fresh temporary directory for this test (removed by the runner afterwards). */
const char *xi_test_tmpdir(void);
/* Run a shell command, capture stdout (+stderr when merge) into *out (heap); return exit code. */
int xi_test_run(const char *cmd, char **out);

#define TEST(name)                                                                   \
    static void name(void);                                                          \
    __attribute__((constructor)) static void xi_register_##name(void) {              \
        xi_test_register(#name, __FILE__, name);                                     \
    }                                                                                \
    static void name(void)

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            xi_test_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);                    \
            return;                                                                  \
        }                                                                            \
    } while (0)

#define CHECKF(cond, ...)                                                            \
    do {                                                                             \
        if (!(cond)) {                                                               \
            xi_test_fail(__FILE__, __LINE__, __VA_ARGS__);                           \
            return;                                                                  \
        }                                                                            \
    } while (0)

#define CHECK_EQ(a, b)                                                               \
    do {                                                                             \
        long long xa_ = (long long)(a), xb_ = (long long)(b);                        \
        if (xa_ != xb_) {                                                            \
            xi_test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, xa_, xb_); \
            return;                                                                  \
        }                                                                            \
    } while (0)

#define CHECK_STR(a, b)                                                              \
    do {                                                                             \
        const char *xa_ = (a), *xb_ = (b);                                           \
        if (!xa_ || !xb_ || strcmp(xa_, xb_)) {                                      \
            xi_test_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b,   \
                         xa_ ? xa_ : "(null)", xb_ ? xb_ : "(null)");                \
            return;                                                                  \
        }                                                                            \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                        \
    do {                                                                             \
        double xa_ = (double)(a), xb_ = (double)(b);                                 \
        if (!(fabs(xa_ - xb_) <= (tol))) {                                           \
            xi_test_fail(__FILE__, __LINE__, "%s ~ %s: %.9g vs %.9g (tol %g)", #a, #b, \
                         xa_, xb_, (double)(tol));                                   \
            return;                                                                  \
        }                                                                            \
    } while (0)

#endif
