/* The compute pool: every thread runs each job exactly once, sleeping workers wake up, and
 * more threads than cores still hand jobs off quickly. */
#include <stdatomic.h>
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
