/* The compute pool: every thread runs each job exactly once, sleeping workers wake up, and
 * more threads than cores still hand jobs off quickly. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/base.h"
#include "base/pool.h"
#include "test.h"

typedef struct {
    atomic_int runs[8];
    atomic_int bad_nth;
    int expect_nth;
} count_ctx;

static void count_task(void *ctx, int ith, int nth) {
    count_ctx *c = ctx;
    if (nth != c->expect_nth) atomic_fetch_add(&c->bad_nth, 1);
    atomic_fetch_add(&c->runs[ith], 1);
}

static void sleep_ms(int ms) {
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

TEST(test_pool_wakes_workers_sleeping_after_idle) {
    for (int threads = 2; threads <= 4; threads++) {
        xi_pool *p = xi_pool_new(threads);
        CHECK(p);
        CHECK_EQ(xi_pool_size(p), threads);
        count_ctx c = {.expect_nth = threads};
        for (int round = 0; round < 4; round++) {
            sleep_ms(20); /* long past the polling phase: workers are asleep on the futex */
            xi_pool_run(p, count_task, &c);
            for (int i = 0; i < threads; i++) CHECK_EQ(atomic_load(&c.runs[i]), round + 1);
        }
        CHECK_EQ(atomic_load(&c.bad_nth), 0);
        xi_pool_free(p); /* with workers asleep: must not hang */
    }
}

/* 3 threads on this 2-core machine (or under qemu): waiting threads must cede the core to
 * the one holding the work. A spin-only pool takes about a scheduler tick per job here. */
TEST(test_pool_three_threads_on_two_cores_run_tiny_jobs_quickly) {
    const int jobs = 3000;
    xi_pool *p = xi_pool_new(3);
    CHECK(p);
    count_ctx c = {.expect_nth = 3};
    const double t0 = xi_now();
    for (int j = 0; j < jobs; j++) xi_pool_run(p, count_task, &c);
    const double dt = xi_now() - t0;
    xi_pool_free(p);
    for (int i = 0; i < 3; i++) CHECK_EQ(atomic_load(&c.runs[i]), jobs);
    CHECKF(dt < 3.0, "%d tiny jobs took %.2f s (%.0f us each)", jobs, dt, dt / jobs * 1e6);
}

/* A sysfs fixture: file `rel` under root holding `text`, directories made on the way. */
static void put_file(const char *root, const char *rel, const char *text) {
    char path[512], dir[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *s = path + strlen(root) + 1; (s = strchr(s, '/')); s++) {
        snprintf(dir, sizeof dir, "%.*s", (int)(s - path), path);
        mkdir(dir, 0755);
    }
    FILE *f = fopen(path, "w");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* Two NUMA nodes of 4 CPUs, SMT pairs (n, n+2) on node 0 and (n, n+1) on node 1: the default
 * pool takes the physical cores of the first allowed CPU's node, one thread per core. */
TEST(test_pool_default_cpus_are_physical_cores_of_one_node) {
    char root[300];
    snprintf(root, sizeof root, "%s/sysfs", xi_test_tmpdir());
    mkdir(root, 0755);
    put_file(root, "devices/system/node/node0/cpulist", "0-3\n");
    put_file(root, "devices/system/node/node1/cpulist", "4-7\n");
    const char *sib[8] = {"0,2", "1,3", "0,2", "1,3", "4-5", "4-5", "6-7", "6-7"};
    for (int c = 0; c < 8; c++) {
        char rel[100];
        snprintf(rel, sizeof rel, "devices/system/cpu/cpu%d/topology/thread_siblings_list", c);
        put_file(root, rel, sib[c]);
    }
    cpu_set_t allowed, out;
    CPU_ZERO(&allowed);
    for (int c = 0; c < 8; c++) CPU_SET(c, &allowed);
    CHECK_EQ(xi_pool_default_cpus(root, &allowed, &out), 2);
    CHECK(CPU_ISSET(0, &out) && CPU_ISSET(1, &out));
    /* A cpuset starting on node 1 without CPU 4: 5's sibling is not allowed, so 5 counts. */
    CPU_ZERO(&allowed);
    for (int c = 5; c < 8; c++) CPU_SET(c, &allowed);
    CHECK_EQ(xi_pool_default_cpus(root, &allowed, &out), 2);
    CHECK(CPU_ISSET(5, &out) && CPU_ISSET(6, &out) && !CPU_ISSET(7, &out));
    /* No sysfs at all: every allowed CPU. */
    char none[320];
    snprintf(none, sizeof none, "%s/missing", root);
    CHECK_EQ(xi_pool_default_cpus(none, &allowed, &out), 3);
    CPU_ZERO(&allowed);
    CHECK_EQ(xi_pool_default_cpus(root, &allowed, &out), 0);
}
