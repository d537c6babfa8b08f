/* bench/machine_limits: this machine's read bandwidth and fp32 FMA peak, which the benchmarks
 * measure in the same run as what they compare with them (header-only, one copy per bench).
 *
 * Read bandwidth: each pool thread walks its part of a buffer far larger than any cache in
 * chunks of 8 streams 64 KiB apart, one prefetch 512 bytes ahead per stream and 64 bytes.
 * That is the fastest pattern found on a Zen 1 core (GB/s per core): one sequential stream
 * 13-15, eight streams an eighth of the buffer apart 16, eight streams 14-256 KiB apart
 * 19-23 (nearby streams share DRAM pages); a GEMV over blocked weights reads like the last.
 * A slower probe would make kernels look faster than the limit.
 *
 * FMA peak: twelve independent chains of full-width fp32 FMAs in registers per thread. */
#ifndef XI_BENCH_LIMITS_H
#define XI_BENCH_LIMITS_H

#include <stddef.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#endif

#include "base/base.h"
#include "base/pool.h"

#define LIMITS_STREAMS 8
#define LIMITS_STRIDE (16 * 1024) /* floats between streams: 64 KiB */
#define LIMITS_PF 512             /* bytes ahead */

/* Sum of n floats read in the pattern above (n a multiple of STREAMS x STRIDE). */
#if defined(__x86_64__)
__attribute__((target("avx2"))) static float limits_read_avx2(const float *p, size_t n) {
    __m256 a[LIMITS_STREAMS];
    for (int s = 0; s < LIMITS_STREAMS; s++) a[s] = _mm256_setzero_ps();
    for (size_t c = 0; c + LIMITS_STREAMS * LIMITS_STRIDE <= n; c += LIMITS_STREAMS * LIMITS_STRIDE)
        for (size_t i = 0; i < LIMITS_STRIDE; i += 16) {
#pragma GCC unroll 8
            for (int s = 0; s < LIMITS_STREAMS; s++) {
                const float *q = p + c + (size_t)s * LIMITS_STRIDE + i;
                if (i * 4 + LIMITS_PF < LIMITS_STRIDE * 4)
                    _mm_prefetch((const char *)q + LIMITS_PF, _MM_HINT_T0);
                a[s] = _mm256_add_ps(a[s], _mm256_add_ps(_mm256_loadu_ps(q), _mm256_loadu_ps(q + 8)));
            }
        }
    for (int s = 1; s < LIMITS_STREAMS; s++) a[0] = _mm256_add_ps(a[0], a[s]);
    float t[8];
    _mm256_storeu_ps(t, a[0]);
    return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}
#endif

static float limits_read(const float *p, size_t n) {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) return limits_read_avx2(p, n);
#endif
#if defined(__aarch64__)
    float32x4_t a[LIMITS_STREAMS];
    for (int s = 0; s < LIMITS_STREAMS; s++) a[s] = vdupq_n_f32(0);
    for (size_t c = 0; c + LIMITS_STREAMS * LIMITS_STRIDE <= n; c += LIMITS_STREAMS * LIMITS_STRIDE)
        for (size_t i = 0; i < LIMITS_STRIDE; i += 16)
            for (int s = 0; s < LIMITS_STREAMS; s++) {
                const float *q = p + c + (size_t)s * LIMITS_STRIDE + i;
                if (i * 4 + LIMITS_PF < LIMITS_STRIDE * 4) __builtin_prefetch((const char *)q + LIMITS_PF);
                a[s] = vaddq_f32(a[s], vaddq_f32(vaddq_f32(vld1q_f32(q), vld1q_f32(q + 4)),
                                                 vaddq_f32(vld1q_f32(q + 8), vld1q_f32(q + 12))));
            }
    for (int s = 1; s < LIMITS_STREAMS; s++) a[0] = vaddq_f32(a[0], a[s]);
    return vaddvq_f32(a[0]);
#else
    float a[8] = {0};
    for (size_t i = 0; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) a[k] += p[i + k];
    return a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
#endif
}

typedef struct {
    const float *buf;
    size_t n;
    float sums[64];
} limits_read_job;

static void limits_read_task(void *ctx, int ith, int nth) {
    limits_read_job *j = ctx;
    long b, e;
    xi_split_range((long)j->n, ith, nth, LIMITS_STREAMS * LIMITS_STRIDE, &b, &e);
    j->sums[ith % 64] = limits_read(j->buf + b, (size_t)(e - b));
}

/* Bytes per second over buf[n] on every pool thread (call once before to map the pages). */
static inline double limits_read_bandwidth(xi_pool *pool, const float *buf, size_t n) {
    limits_read_job j = {buf, n, {0}};
    const double t0 = xi_now();
    xi_pool_run(pool, limits_read_task, &j);
    const double dt = xi_now() - t0;
    volatile float sink = j.sums[0];
    (void)sink;
    return (double)n * sizeof(float) / dt;
}

/* ---- FMA peak ---- */

#define LIMITS_FMA12(F) F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11)
#define LIMITS_DECL(i) V a##i = SET1(seed + (float)i);
#define LIMITS_SUM(i) s = ADD(s, a##i);
/* The loop over V vectors (SET1, ADD, STEP defined per ISA), leaving the sum in s. */
#define LIMITS_FMA_LOOP                                                                     \
    const V m = SET1(0.999999f), c = SET1(seed * 1e-7f);                                    \
    LIMITS_FMA12(LIMITS_DECL)                                                               \
    for (long it = 0; it < iters; it++) {                                                   \
        LIMITS_FMA12(STEP)                                                                  \
    }                                                                                       \
    V s = SET1(0.0f);                                                                       \
    LIMITS_FMA12(LIMITS_SUM)
#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) static float limits_fma_avx2(float seed, long iters) {
#define V __m256
#define SET1 _mm256_set1_ps
#define ADD _mm256_add_ps
#define STEP(i) a##i = _mm256_fmadd_ps(a##i, m, c);
    LIMITS_FMA_LOOP
    float t[8];
    _mm256_storeu_ps(t, s);
    return t[0];
#undef V
#undef SET1
#undef ADD
#undef STEP
}
#endif

/* Returns the FLOPs one call performed. */
static double limits_fma(float seed, long iters, float *out) {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        *out = limits_fma_avx2(seed, iters);
        return 12.0 * 8 * 2 * (double)iters;
    }
#endif
#if defined(__aarch64__)
#define V float32x4_t
#define SET1 vdupq_n_f32
#define ADD vaddq_f32
#define STEP(i) a##i = vfmaq_f32(c, a##i, m);
    LIMITS_FMA_LOOP
    *out = vgetq_lane_f32(s, 0);
    return 12.0 * 4 * 2 * (double)iters;
#undef V
#undef SET1
#undef ADD
#undef STEP
#else
    float acc[96];
    for (int k = 0; k < 96; k++) acc[k] = seed + (float)k * 1e-3f;
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < 96; k++) acc[k] = acc[k] * 0.999999f + 1e-7f;
    float s = 0;
    for (int k = 0; k < 96; k++) s += acc[k];
    *out = s;
    return 96.0 * 2 * (double)iters;
#endif
}

typedef struct {
    long iters;
    double flops[64];
    float sink[64];
} limits_fma_job;

static void limits_fma_task(void *ctx, int ith, int nth) {
    limits_fma_job *j = ctx;
    (void)nth;
    j->flops[ith % 64] = limits_fma((float)ith + 1.0f, j->iters, &j->sink[ith % 64]);
}

/* FLOP/s of fp32 FMAs on every pool thread, iters loop trips each. */
static inline double limits_fma_peak(xi_pool *pool, long iters) {
    limits_fma_job j = {.iters = iters};
    const double t0 = xi_now();
    xi_pool_run(pool, limits_fma_task, &j);
    const double dt = xi_now() - t0;
    volatile float sink = j.sink[0];
    (void)sink;
    double flops = 0;
    for (int i = 0; i < xi_pool_size(pool) && i < 64; i++) flops += j.flops[i];
    return flops / dt;
}

#endif
