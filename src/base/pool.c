/* pool: persistent workers, generation-counted jobs, spin-then-futex waits.
 *
 * Hand-off: the caller publishes fn/ctx, sets `pending`, bumps `generation` and wakes
 * sleepers; workers spin on `generation` for a short while (a decode step issues jobs
 * microseconds apart, so a spinning worker starts at once), then sleep on it with a futex.
 * Completion mirrors it: the last worker to finish wakes the caller if it went to sleep.
 * Sleep/wake races are closed Dekker-style with sequentially consistent atomics: the
 * sleeper announces itself, then re-reads the word; the waker changes the word, then reads
 * the announcement.
 *
 * Polling has two phases: a short pause-spin (the common case: the next job arrives within
 * a few microseconds), then sched_yield polls, so that on a shared machine, with more
 * threads than CPUs, or under an emulator, a waiting thread hands its core to the thread
 * that holds the work instead of burning it. More threads than CPUs skip the first phase. */
#include "base/pool.h"

#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct xi_pool {
    int n;                  /* threads including the caller */
    long spin_pause;        /* polls with a pause instruction, then */
    long spin_yield;        /* polls with sched_yield, then the futex */
    pthread_t *threads;     /* [n-1] workers */
    _Atomic uint32_t generation; /* futex word, bumped once per job */
    _Atomic uint32_t pending;    /* futex word, workers still running the current job */
    atomic_int sleepers;         /* workers sleeping (or about to) on generation */
    atomic_int caller_sleeping;
    atomic_int stop;
    xi_pool_fn fn;
    void *ctx;
};

typedef struct {
    xi_pool *p;
    int ith;
    int cpu; /* CPU to pin to, -1 for none */
} worker_arg;

#define SPIN_PAUSE_POLLS 200 /* about a microsecond */
#define SPIN_YIELD_POLLS 1000 /* up to about a millisecond, ceding the core to any taker */

static void futex_wait(_Atomic uint32_t *addr, uint32_t val) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *addr, int n) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/* The i-th poll of a wait: pause-spin first, then yield the core. */
static inline void poll_relax(const xi_pool *p, long i) {
    if (i >= p->spin_pause) {
        sched_yield();
        return;
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* Wait until generation differs from seen (or stop); returns the new generation. */
static uint32_t wait_generation(xi_pool *p, uint32_t seen) {
    uint32_t g;
    for (long i = 0; i < p->spin_pause + p->spin_yield; i++) {
        g = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (g != seen || atomic_load_explicit(&p->stop, memory_order_relaxed)) return g;
        poll_relax(p, i);
    }
    for (;;) {
        atomic_fetch_add(&p->sleepers, 1);
        g = atomic_load(&p->generation);
        if (g == seen && !atomic_load(&p->stop)) futex_wait(&p->generation, seen);
        atomic_fetch_sub(&p->sleepers, 1);
        g = atomic_load(&p->generation);
        if (g != seen || atomic_load(&p->stop)) return g;
    }
}

static void *worker_main(void *arg) {
    worker_arg wa = *(worker_arg *)arg;
    free(arg);
    xi_pool *p = wa.p;
    if (wa.cpu >= 0) {
        /* Best effort: a failure (restricted cpuset, emulator) only costs locality. */
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(wa.cpu, &set);
        (void)sched_setaffinity(0, sizeof set, &set);
    }
    uint32_t seen = 0;
    for (;;) {
        seen = wait_generation(p, seen);
        if (atomic_load(&p->stop)) return NULL;
        p->fn(p->ctx, wa.ith, p->n);
        if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->caller_sleeping))
            futex_wake(&p->pending, 1);
    }
}

/* The i-th CPU this process may run on, or -1. */
static int nth_allowed_cpu(const cpu_set_t *set, int i) {
    for (int c = 0, k = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, set) && k++ == i) return c;
    return -1;
}

/* A sysfs CPU list ("0-3,8,10-11") into *set; -1 when the file cannot be read or parsed. */
static int read_cpulist(const char *path, cpu_set_t *set) {
    CPU_ZERO(set);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char buf[4096];
    const int ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!ok) return -1;
    for (char *s = buf; *s && *s != '\n';) {
        char *end;
        long a = strtol(s, &end, 10), b = a;
        if (end == s || a < 0) return -1;
        if (*end == '-') {
            s = end + 1;
            b = strtol(s, &end, 10);
            if (end == s || b < a) return -1;
        }
        for (long c = a; c <= b && c < CPU_SETSIZE; c++) CPU_SET((int)c, set);
        s = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end != '\n' && *end) return -1;
    }
    return 0;
}

int xi_pool_default_cpus(const char *sysfs, const cpu_set_t *allowed, cpu_set_t *out) {
    char path[512];
    cpu_set_t cand, tmp;
    CPU_ZERO(out);
    int first = -1;
    for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
        if (CPU_ISSET(c, allowed)) first = c;
    if (first < 0) return 0;
    CPU_OR(&cand, allowed, allowed);
    for (int node = 0; node < 1024; node++) { /* nodes may be sparse: node0, node2, ... */
        snprintf(path, sizeof path, "%s/devices/system/node/node%d/cpulist", sysfs, node);
        if (read_cpulist(path, &tmp) == 0 && CPU_ISSET(first, &tmp)) {
            CPU_AND(&cand, allowed, &tmp);
            break;
        }
    }
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &cand)) continue;
        snprintf(path, sizeof path, "%s/devices/system/cpu/cpu%d/topology/thread_siblings_list",
                 sysfs, c);
        int lowest = 1;
        if (read_cpulist(path, &tmp) == 0)
            for (int s = 0; s < c && lowest; s++)
                if (CPU_ISSET(s, &tmp) && CPU_ISSET(s, &cand)) lowest = 0;
        if (lowest) CPU_SET(c, out);
    }
    return CPU_COUNT(out);
}

xi_pool *xi_pool_new(int n_threads) {
    cpu_set_t allowed, cpus;
    int n_allowed = 0;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) n_allowed = CPU_COUNT(&allowed);
    if (n_allowed <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n_allowed = c > 0 ? (int)c : 1;
        CPU_ZERO(&allowed);
    }
    /* Workers are pinned to the n-th CPU of `cpus`: the default pool's physical cores, or
     * every allowed CPU for an explicit thread count. */
    CPU_OR(&cpus, &allowed, &allowed);
    if (n_threads <= 0) {
        const int n = CPU_COUNT(&allowed) ? xi_pool_default_cpus("/sys", &allowed, &cpus) : 0;
        n_threads = n > 0 ? n : n_allowed;
    }
    xi_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    const int oversubscribed = n_threads > n_allowed;
    /* XINFER_POOL_PIN=0: on a machine shared with other busy processes a pinned worker
     * cannot move to an idle CPU and waits out the other process's time slice. */
    const char *pin_env = getenv("XINFER_POOL_PIN");
    const int pin = !oversubscribed && !(pin_env && !strcmp(pin_env, "0"));
    p->spin_pause = oversubscribed ? 0 : SPIN_PAUSE_POLLS;
    p->spin_yield = SPIN_YIELD_POLLS;
    p->threads = calloc((size_t)n_threads, sizeof(pthread_t));
    if (!p->threads) {
        free(p);
        return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) {
            p->n = i;
            break;
        }
        wa->p = p;
        wa->ith = i;
        /* Workers take CPUs 1.. of the allowed set; the caller (the engine thread) stays
         * unpinned because threads it creates later would inherit its mask. */
        wa->cpu = !pin || !CPU_COUNT(&cpus) ? -1 : nth_allowed_cpu(&cpus, i);
        if (pthread_create(&p->threads[i - 1], NULL, worker_main, wa)) {
            free(wa);
            p->n = i;
            break;
        }
    }
    return p;
}

void xi_pool_free(xi_pool *p) {
    if (!p) return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->generation, 1);
    futex_wake(&p->generation, INT_MAX);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i - 1], NULL);
    free(p->threads);
    free(p);
}

int xi_pool_size(const xi_pool *p) { return p ? p->n : 1; }

void xi_pool_run(xi_pool *p, xi_pool_fn fn, void *ctx) {
    if (!p || p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store(&p->pending, (uint32_t)(p->n - 1));
    atomic_fetch_add(&p->generation, 1);
    if (atomic_load(&p->sleepers) > 0) futex_wake(&p->generation, INT_MAX);
    fn(ctx, 0, p->n);
    for (long i = 0; i < p->spin_pause + p->spin_yield; i++) {
        if (atomic_load_explicit(&p->pending, memory_order_acquire) == 0) return;
        poll_relax(p, i);
    }
    atomic_store(&p->caller_sleeping, 1);
    uint32_t v;
    while ((v = atomic_load(&p->pending)) != 0) futex_wait(&p->pending, v);
    atomic_store(&p->caller_sleeping, 0);
}

void xi_split_range(long n, int ith, int nth, long align, long *b, long *e) {
    if (align < 1) align = 1;
    long units = (n + align - 1) / align;
    long per = units / nth, rem = units % nth;
    long ub = ith * per + (ith < rem ? ith : rem);
    long ue = ub + per + (ith < rem ? 1 : 0);
    *b = ub * align < n ? ub * align : n;
    *e = ue * align < n ? ue * align : n;
}
