/* The test runner: fork per test, collect results, print "N passed, N failed" (and ", N
 * skipped" when a test could not run here: a skip is never a pass). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

typedef struct {
    const char *name;
    const char *file;
    xi_test_fn fn;
} test_entry;

static test_entry *tests;
static int n_tests, cap_tests;
static int fails_in_test, skipped_test;
#define SKIP_STATUS 77
static char tmpdir[256];

void xi_test_register(const char *name, const char *file, xi_test_fn fn) {
    if (n_tests == cap_tests) {
        cap_tests = cap_tests ? cap_tests * 2 : 64;
        tests = realloc(tests, (size_t)cap_tests * sizeof *tests);
        if (!tests) abort();
    }
    tests[n_tests++] = (test_entry){name, file, fn};
}

void xi_test_fail(const char *file, int line, const char *fmt, ...) {
    fails_in_test++;
    fprintf(stderr, "    %s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int xi_test_failed(void) { return fails_in_test; }

void xi_test_skip(const char *fmt, ...) {
    skipped_test = 1;
    fputs("    skipped: ", stderr);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

char *xi_test_data(const char *rel) {
    const char *root = getenv("XINFER_TEST_DATA");
    if (!root || !*root) root = "../shared/data";
    size_t n = strlen(root) + strlen(rel) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", root, rel);
    return p;
}

const char *xi_test_bin(void) {
    const char *b = getenv("XINFER_BIN");
    return b && *b ? b : "build/xinfer";
}

const char *xi_test_tmpdir(void) {
    if (!tmpdir[0]) {
        snprintf(tmpdir, sizeof tmpdir, "/tmp/xinfer-test-XXXXXX");
        if (!mkdtemp(tmpdir)) abort();
    }
    return tmpdir;
}

int xi_test_run(const char *cmd, char **out) {
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += n;
        if (cap - len < 2048) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    int st = pclose(p);
    if (buf) buf[len] = 0;
    if (out) *out = buf;
    else free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int matches(const char *name, int argc, char **argv) {
    if (argc <= 1) return 1;
    for (int i = 1; i < argc; i++)
        if (strstr(name, argv[i])) return 1;
    return 0;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int passed = 0, failed = 0, skipped = 0;
    int nofork = getenv("XINFER_TEST_NOFORK") != NULL;
    for (int i = 0; i < n_tests; i++) {
        test_entry *t = &tests[i];
        if (!matches(t->name, argc, argv)) continue;
        double t0 = now();
        int ok, skip = 0;
        fflush(stdout);
        fflush(stderr);
        if (nofork) {
            fails_in_test = skipped_test = 0;
            t->fn();
            ok = fails_in_test == 0;
            skip = ok && skipped_test;
        } else {
            pid_t pid = fork();
            if (pid == 0) {
                fails_in_test = skipped_test = 0;
                tmpdir[0] = 0;
                t->fn();
                if (tmpdir[0]) {
                    char cmd[300];
                    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
                    if (system(cmd)) {}
                }
                fflush(stdout);
                fflush(stderr);
                _exit(fails_in_test ? 1 : skipped_test ? SKIP_STATUS : 0);
            }
            int st = 0;
            waitpid(pid, &st, 0);
            skip = WIFEXITED(st) && WEXITSTATUS(st) == SKIP_STATUS;
            ok = WIFEXITED(st) && (WEXITSTATUS(st) == 0 || skip);
            if (WIFSIGNALED(st)) fprintf(stderr, "    killed by signal %d\n", WTERMSIG(st));
        }
        double dt = now() - t0;
        printf("%s %-58s %8.3fs  (%s)\n", skip ? "SKIP" : ok ? "PASS" : "FAIL", t->name, dt,
               t->file);
        fflush(stdout);
        if (skip) skipped++;
        else if (ok) passed++;
        else failed++;
    }
    if (skipped) printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    else printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
