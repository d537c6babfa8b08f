/* bench_kernels: matmul speed as fractions of this machine's limits, measured in the same run.
 *
 * Each repetition measures, for 1 and 2 threads: the read bandwidth over 1 GiB and the FMA
 * peak (machine_limits.h), then GEMV (1 row) per weight format for
 * Qwen2.5-0.5B-sized matrices as GB/s of weight bytes / bandwidth (each call on the next of
 * copies spanning twice the L3, so the weights come from DRAM as in a decode step), and GEMM (16 rows, as in a
 * decode step of 16 sequences, and 512 rows, as in prefill) as GFLOP/s / FMA peak; last, the pool's round-trip latency for an empty job. Cases
 * alternate within a repetition so drift on a shared machine hits them all alike; the
 * table gives the median ratio and the min..max spread.
 *
 * Weights use the layout the loader gives the variant (xi_ops.weight_block); --layout both
 * adds the row-major layout next to a blocked one, --gemv drops the GEMM shapes. INT8 and
 * AWQ run in both kernel precisions (acts i8: 8-bit activations and integer dot products,
 * in the dot layout; f32: the exact path) unless --precision names one.
 *
 * --gq times instead the integer matmul of GGML block-format weights (GGUF's Q4_K, Q6_K, Q8_0,
 * Q4_0) at the same shapes for 1, 16 and 64 rows: the scalar oracle against the variant's
 * int8 table (on the stored rows; the variant on a copy in the layout the loader gives it,
 * packed for avx2), as GB/s of weight bytes, the speedup and the fraction of read bandwidth.
 *
 * --attn times instead one thread's attention for a prefill chunk behind a cached prefix: 128
 * query tokens of a Qwen2.5-0.5B layer (14 heads, 2 KV heads, head dim 64, BF16 KV in 16-token
 * blocks) over contexts of 513..640 keys, as GFLOP/s / one core's FMA peak, for the
 * variant's attention, the per-key loop it reproduces (x86) and the scalar reference.
 *
 * usage: bench_kernels [--reps N] [--quick] [--gemv] [--gq] [--attn] [--layout ops|row|both]
 *                      [--kernels NAME] [--threads LIST e.g. 1,2] [--precision int8|exact|both] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#endif

#include "base/base.h"
#include "base/pool.h"
#include "kernels/kernels.h"
#include "kernels/qtypes.h"
#include "machine_limits.h"

/* ---- cases ---- */

typedef struct {
    const char *label;
    xi_dtype dt;
    int64_t n_out, n_in;
    int rows;          /* 1: GEMV, else GEMM */
    int block;         /* xi_weight_block's block, 0: row-major */
    const xi_ops *ops; /* the variant in the case's precision */
    int n_copies;      /* rotate copies so GEMV weights come from DRAM, not the L3 */
    xi_weight *w;      /* n_copies of them */
    void *(*bufs)[3];
    size_t bytes;      /* weight bytes one call reads */
} bench_case;

static uint32_t rng = 2463534242u;
static float frand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return (float)(rng >> 8) / 8388608.0f - 1.0f;
}

/* Bytes a GEMV case's copies span: twice the L3 (64 MiB at least), so a call reads its
 * weights from DRAM as a model's decode step does, whatever this CPU's cache. */
enum { GEMV_MAX_COPIES = 1024 };
static size_t gemv_span(void) {
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    return XI_MAX((size_t)64 << 20, l3 > 0 ? (size_t)l3 * 2 : 0);
}

static int case_init(bench_case *c) {
    const int64_t n = c->n_out * c->n_in;
    const int gs = 128;
    size_t bytes;
    switch (c->dt) {
    case XI_Q8: bytes = (size_t)n + (size_t)c->n_out * 4; break;
    case XI_Q4_AWQ: bytes = (size_t)n / 2 + (size_t)(n / gs) * 5; break;
    default: bytes = (size_t)n * xi_dtype_size(c->dt); break;
    }
    c->bytes = bytes;
    c->n_copies = c->rows == 1 ? (int)XI_MIN(GEMV_MAX_COPIES, (int64_t)(gemv_span() / bytes) + 1) : 1;
    c->w = calloc((size_t)c->n_copies, sizeof *c->w);
    c->bufs = calloc((size_t)c->n_copies, sizeof *c->bufs);
    if (!c->w || !c->bufs) return -1;
    for (int i = 0; i < c->n_copies; i++) {
        xi_weight *w = &c->w[i];
        *w = (xi_weight){.dtype = c->dt, .n_out = c->n_out, .n_in = c->n_in};
        const size_t eb = c->dt == XI_Q4_AWQ ? (size_t)n / 2
                          : c->dt == XI_Q8  ? (size_t)n
                                            : (size_t)n * xi_dtype_size(c->dt);
        void *d = xi_alloc_big(eb);
        if (!d) return -1;
        c->bufs[i][0] = d;
        if (c->dt == XI_F32 || c->dt == XI_F16 || c->dt == XI_BF16) {
            float tmp[4096];
            for (int64_t k = 0; k < n; k += 4096) {
                const int64_t m = XI_MIN((int64_t)4096, n - k);
                for (int64_t j = 0; j < m; j++) tmp[j] = frand();
                xi_from_f32((char *)d + (size_t)k * xi_dtype_size(c->dt), c->dt, tmp, (size_t)m);
            }
        } else {
            for (size_t k = 0; k < eb; k++) ((uint8_t *)d)[k] = (uint8_t)(frand() * 127.0f);
        }
        w->data = d;
        const int64_t ns = c->dt == XI_Q4_AWQ ? n / gs : c->n_out;
        float *s = malloc((size_t)ns * 4);
        if (!s) return -1;
        for (int64_t k = 0; k < ns; k++) s[k] = 0.01f;
        c->bufs[i][1] = s;
        w->scale = c->dt == XI_Q8 || c->dt == XI_Q4_AWQ ? s : NULL;
        if (c->dt == XI_Q4_AWQ) {
            uint8_t *z = malloc((size_t)ns);
            if (!z) return -1;
            memset(z, 8, (size_t)ns);
            c->bufs[i][2] = z;
            w->zero = z;
            w->group_size = gs;
        }
        if (xi_weight_block(w, c->block, NULL, 0)) return -1;
    }
    return 0;
}

static void case_free(bench_case *c) {
    const int64_t n = c->n_out * c->n_in;
    const size_t eb = c->dt == XI_Q4_AWQ ? (size_t)n / 2
                      : c->dt == XI_Q8  ? (size_t)n
                                        : (size_t)n * xi_dtype_size(c->dt);
    for (int i = 0; i < c->n_copies; i++) {
        xi_free_big(c->bufs[i][0], eb);
        free(c->bufs[i][1]);
        free(c->bufs[i][2]);
    }
    free(c->w);
    free(c->bufs);
}

static void nop_task(void *ctx, int ith, int nth) {
    (void)ctx;
    (void)ith;
    (void)nth;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static const char *blocked_name(xi_dtype t, int block) {
    if (block == XI_BLOCK_DOT) return t == XI_Q8 ? "int8/dot" : "awq/dot";
    switch (t) {
    case XI_F32: return "f32/b8";
    case XI_F16: return "f16/b8";
    case XI_BF16: return "bf16/b8";
    case XI_Q4_AWQ: return "awq/b16";
    default: return "int8/b8";
    }
}

static void summarize(double *v, int n, double *med, double *lo, double *hi) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    *med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    *lo = v[0];
    *hi = v[n - 1];
}

/* ---- --gq: GGML block-format weights, the scalar oracle against a variant's matmul_gq ---- */

/* Random blocks (every code byte random) with sane f16 scales at the type's offsets; for Q8_0
 * the rows are quantized random floats, as llama-quantize writes them. Speed does not depend
 * on the values: no kernel branches on them. */
static uint8_t *gq_weight(const xi_qtype *t, int64_t n_out, int64_t n_in, size_t *bytes) {
    const size_t rb = xi_qtype_row_bytes(t, n_in);
    *bytes = rb * (size_t)n_out;
    uint8_t *d = xi_alloc_big(*bytes);
    if (!d) return NULL;
    if (t->id == XI_GGML_Q8_0) {
        float *row = malloc((size_t)n_in * 4);
        if (!row) return NULL;
        for (int64_t n = 0; n < n_out; n++) {
            for (int64_t k = 0; k < n_in; k++) row[k] = frand();
            xi_qtype_quantize_q8_0_weights(row, d + (size_t)n * rb, n_in);
        }
        free(row);
        return d;
    }
    for (size_t i = 0; i < *bytes; i++) d[i] = (uint8_t)(frand() * 127.0f);
    const int off = t->id == XI_GGML_Q6_K ? 208 : 0; /* f16 d (Q4_0, Q4_K), then dmin (Q4_K) */
    const uint16_t h = xi_f32_to_f16(0.004f);
    for (size_t b = 0; b < *bytes; b += (size_t)t->block_bytes) {
        memcpy(d + b + off, &h, 2);
        if (t->id == XI_GGML_Q4_K) memcpy(d + b + 2, &h, 2);
    }
    return d;
}

static double thread_cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* 896 inputs are 3.5 K blocks: K-quant files store such matrices in another type, so the
 * K types here take the next whole number of blocks (1024). */
static int64_t gq_n_in(const xi_qtype *t, int64_t n_in) { return (n_in + t->block - 1) / t->block * t->block; }

/* Weight GB/s of the oracle and the variant for Q4_K / Q6_K / Q8_0 / Q4_0 at Qwen2.5-0.5B's
 * MLP shapes, 1, 16 and 64 rows; the two alternate in every repetition, medians reported. */
static int bench_gq(const xi_ops *fast, int reps, const int *thread_list, int n_tl) {
    const xi_ops *ref = xi_ops_precision(xi_ops_ref(), "int8", NULL, 0);
    const int ids[] = {XI_GGML_Q4_K, XI_GGML_Q6_K, XI_GGML_Q8_0, XI_GGML_Q4_0};
    const int64_t shapes[][2] = {{4864, 896}, {896, 4864}};
    const int rows_list[] = {1, 16, 64};
    enum { NT = 4, NS = 2, NR = 3, MAX_COPIES = 32 };
    xi_weight w[NT][NS][MAX_COPIES], wf[NT][NS][MAX_COPIES]; /* wf: the variant's layout */
    size_t bytes[NT][NS];
    int copies[NT][NS]; /* 1-row weights rotate through 64 MiB or more: from DRAM, not L3 */
    for (int t = 0; t < NT; t++)
        for (int s = 0; s < NS; s++)
            for (int c = 0; c < (c ? copies[t][s] : 1); c++) {
                const xi_qtype *qt = xi_qtype_get(ids[t]);
                void *d = gq_weight(qt, shapes[s][0], gq_n_in(qt, shapes[s][1]), &bytes[t][s]);
                if (!d) {
                    fprintf(stderr, "out of memory\n");
                    return 1;
                }
                if (!c) copies[t][s] = (int)XI_MIN((size_t)MAX_COPIES, gemv_span() / bytes[t][s] + 1);
                w[t][s][c] = (xi_weight){.dtype = XI_GGML, .n_out = shapes[s][0], .n_in = gq_n_in(qt, shapes[s][1]),
                                         .data = d, .qtype = qt};
                /* the variant reads a copy in the layout the loader gives it (gq_pack.h) */
                wf[t][s][c] = w[t][s][c];
                uint8_t *df = xi_alloc_big(bytes[t][s]);
                char err[256];
                if (!df) return 1;
                memcpy(df, d, bytes[t][s]);
                wf[t][s][c].data = df;
                if (xi_weight_block(&wf[t][s][c], xi_weight_block_for(fast, &wf[t][s][c]), err, sizeof err)) {
                    fprintf(stderr, "%s\n", err);
                    return 1;
                }
            }
    const size_t bw_bytes = 1u << 30;
    float *bwbuf = xi_alloc_big(bw_bytes), *x = malloc((size_t)64 * 4864 * 4), *y = malloc((size_t)64 * 4864 * 4);
    if (!bwbuf || !x || !y) return 1;
    for (size_t i = 0; i < bw_bytes / 4; i += 1024) bwbuf[i] = 1.0f;
    for (int i = 0; i < 64 * 4864; i++) x[i] = frand();
    const size_t nv = (size_t)n_tl * NT * NS * NR * reps;
    /* ref and fast by wall time; fast by this thread's CPU time (with 1 thread all the work is
     * on it): on a machine shared with other busy processes, the time it was not running
     * drops out */
    double *gbs[3] = {calloc(nv, sizeof(double)), calloc(nv, sizeof(double)), calloc(nv, sizeof(double))};
    double *bw = calloc((size_t)n_tl * reps, sizeof(double)), *tmp = calloc((size_t)reps, sizeof(double));
    printf("matmul_gq: ref (scalar oracle, stored rows) vs %s (the loader's layout: Q4_K, Q6_K, Q4_0 packed on avx2), %d repetitions\n", fast->name, reps);
    for (int r = 0; r < reps; r++)
        for (int ti = 0; ti < n_tl; ti++) {
            xi_pool *p = xi_pool_new(thread_list[ti]);
            limits_read_bandwidth(p, bwbuf, bw_bytes / 4);
            bw[ti * reps + r] = limits_read_bandwidth(p, bwbuf, bw_bytes / 4) / 1e9;
            for (int t = 0; t < NT; t++)
                for (int s = 0; s < NS; s++)
                    for (int ri = 0; ri < NR; ri++)
                        for (int v = 0; v < 2; v++) {
                            const int rows = rows_list[ri];
                            const int nc = copies[t][s], calls = v == 0 ? 1 : rows == 1 ? nc : 4;
                            const xi_ops *o = v ? fast : ref;
                            xi_weight(*ws)[MAX_COPIES] = v ? wf[t] : w[t];
                            xi_matmul(p, o, y, x, rows, &ws[s][0], NULL); /* warm-up */
                            const double t0 = xi_now(), c0 = thread_cpu();
                            for (int k = 0; k < calls; k++)
                                xi_matmul(p, o, y, x, rows, &ws[s][(k + 1) % nc], NULL);
                            const double dt = (xi_now() - t0) / calls, dc = (thread_cpu() - c0) / calls;
                            const size_t at = (((size_t)ti * NT + t) * NS * NR + (size_t)s * NR + ri) * reps + r;
                            gbs[v][at] = (double)bytes[t][s] / dt / 1e9;
                            if (v) gbs[2][at] = (double)bytes[t][s] / dc / 1e9;
                        }
            xi_pool_free(p);
            fprintf(stderr, ".");
        }
    fprintf(stderr, "\n");
    for (int ti = 0; ti < n_tl; ti++) {
        double bm, lo, hi;
        summarize(bw + ti * reps, reps, &bm, &lo, &hi);
        printf("\nthreads %d: read bandwidth %.1f GB/s (%.1f..%.1f); GB/s of weights per call\n",
               thread_list[ti], bm, lo, hi);
        printf("  %-6s %-10s %4s  %8s  %8s  %7s  %-22s  %10s  %s\n", "type", "shape", "rows", "ref",
               fast->name, "speedup", "fast / bandwidth", "fast GOP/s", thread_list[ti] == 1 ? "fast by CPU time" : "");
        for (int t = 0; t < NT; t++)
            for (int s = 0; s < NS; s++)
                for (int ri = 0; ri < NR; ri++) {
                    const size_t at = (((size_t)ti * NT + t) * NS * NR + (size_t)s * NR + ri) * reps;
                    double rm, fm, sm, cm;
                    for (int k = 0; k < reps; k++) tmp[k] = gbs[1][at + k] / gbs[0][at + k];
                    summarize(tmp, reps, &sm, &lo, &hi);
                    summarize(gbs[0] + at, reps, &rm, &lo, &hi);
                    summarize(gbs[2] + at, reps, &cm, &lo, &hi);
                    summarize(gbs[1] + at, reps, &fm, &lo, &hi);
                    char shape[32];
                    snprintf(shape, sizeof shape, "%lldx%lld", (long long)shapes[s][0],
                             (long long)gq_n_in(xi_qtype_get(ids[t]), shapes[s][1]));
                    const double ops_per_byte = 2.0 * rows_list[ri] * (double)w[t][s][0].n_out *
                                                (double)w[t][s][0].n_in / (double)bytes[t][s];
                    printf("  %-6s %-10s %4d  %8.2f  %8.2f  %6.1fx  %.2f (%.2f..%.2f)      %10.1f",
                           xi_qtype_get(ids[t])->name, shape, rows_list[ri], rm, fm, sm, fm / bm, lo / bm,
                           hi / bm, fm * ops_per_byte);
                    if (thread_list[ti] == 1) printf("  %.2f GB/s, %.2f of bandwidth", cm, cm / bm);
                    printf("\n");
                }
    }
    for (int t = 0; t < NT; t++)
        for (int s = 0; s < NS; s++)
            for (int c = 0; c < copies[t][s]; c++) {
                xi_free_big((void *)w[t][s][c].data, bytes[t][s]);
                xi_free_big((void *)wf[t][s][c].data, bytes[t][s]);
            }
    xi_free_big(bwbuf, bw_bytes);
    free(x);
    free(y);
    free(gbs[0]);
    free(gbs[1]);
    free(gbs[2]);
    free(bw);
    free(tmp);
    return 0;
}

/* ---- --attn: attention over a long cached context ---- */

static int bench_attn(const xi_ops *fast, int reps) {
    enum { NH = 14, NKV = 2, HD = 64, BS = 16, PREFIX = 512, NEW = 128, CTX = PREFIX + NEW };
    const int n_blocks = CTX / BS;
    xi_kv_view kv = {.dtype = XI_BF16, .block_size = BS, .n_kv_heads = NKV, .head_dim = HD,
                     .head_stride = BS * HD, .block_stride = BS * HD * NKV};
    const size_t kv_elems = (size_t)kv.block_stride * n_blocks;
    uint16_t *k = malloc(kv_elems * 2), *v = malloc(kv_elems * 2);
    float *q = malloc((size_t)NEW * NH * HD * 4), *out = malloc((size_t)NEW * NH * HD * 4);
    float *scratch = malloc(XI_ATTN_SCRATCH(BS, HD) * sizeof(float));
    int32_t table[CTX / BS];
    for (int i = 0; i < n_blocks; i++) table[i] = (i * 7) % n_blocks; /* scattered blocks */
    for (size_t i = 0; i < kv_elems; i++) {
        k[i] = xi_f32_to_bf16(frand());
        v[i] = xi_f32_to_bf16(frand());
    }
    for (int i = 0; i < NEW * NH * HD; i++) q[i] = frand();
    kv.k = k;
    kv.v = v;
    typedef void attn_fn(float *, const float *, const xi_kv_view *, const int32_t *, int, int, int,
                         int, float, float *);
    struct { const char *name; attn_fn *fn; double gf[64]; } cases[3] = {
        {fast->name, fast->attn, {0}}, {"ref", xi_ops_ref()->attn, {0}}, {NULL, NULL, {0}}};
    int n_cases = 2;
#if defined(__x86_64__)
    if (fast->attn == xi_avx2_attn) {
        cases[n_cases].name = "avx2 per-key loop";
        cases[n_cases++].fn = xi_avx2_attn_keys;
    }
#endif
    double flops = 0;
    for (int t = 0; t < NEW; t++) flops += 4.0 * NH * HD * (PREFIX + t + 1);
    double peak[64];
    if (reps > 64) reps = 64;
    xi_pool *pool = xi_pool_new(1);
    for (int r = 0; r < reps; r++) {
        peak[r] = limits_fma_peak(pool, 20000000L);
        for (int c = 0; c < n_cases; c++) {
            const double t0 = xi_now();
            for (int t = 0; t < NEW; t++)
                cases[c].fn(out + (size_t)t * NH * HD, q + (size_t)t * NH * HD, &kv, table,
                            PREFIX + t + 1, NH, 0, NH, 0.125f, scratch);
            cases[c].gf[r] = flops / (xi_now() - t0) / peak[r];
        }
    }
    printf("attention, %d new tokens over a cached %d-token prefix (14 heads / 2 KV heads, head dim 64, "
           "BF16 KV), 1 thread, %d reps: GFLOP/s / FMA peak, median (min..max)\n", NEW, PREFIX, reps);
    double base_med = 0;
    for (int c = 0; c < n_cases; c++) {
        double med, lo, hi;
        summarize(cases[c].gf, reps, &med, &lo, &hi);
        if (c == 0) base_med = med;
        printf("  %-18s %.3f (%.3f..%.3f)%s", cases[c].name, med, lo, hi, c ? "" : "\n");
        if (c) printf("   %s: %.2fx faster\n", fast->name, base_med / med);
    }
    xi_pool_free(pool);
    free(scratch);
    free(k);
    free(v);
    free(q);
    free(out);
    return 0;
}

int main(int argc, char **argv) {
    int reps = 10, quick = 0, gemv_only = 0, gq = 0, attn = 0;
    const char *layout = "ops";
    const char *kname = NULL, *precision = "both";
    int thread_list[4] = {1, 2}, n_tl = 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--gemv")) gemv_only = 1;
        else if (!strcmp(argv[i], "--gq")) gq = 1;
        else if (!strcmp(argv[i], "--attn")) attn = 1;
        else if (!strcmp(argv[i], "--layout") && i + 1 < argc) layout = argv[++i];
        else if (!strcmp(argv[i], "--kernels") && i + 1 < argc) kname = argv[++i];
        else if (!strcmp(argv[i], "--precision") && i + 1 < argc) precision = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            n_tl = 0;
            for (char *s = argv[++i]; *s && n_tl < 4; s++) {
                thread_list[n_tl++] = (int)strtol(s, &s, 10);
                if (!*s) break;
            }
        } else {
            fprintf(stderr, "usage: %s [--reps N] [--quick] [--gemv] [--gq] [--attn] [--layout ops|row|both] "
                            "[--kernels NAME] [--threads 1,2] [--precision int8|exact|both]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    char err[256];
    const xi_ops *ops = xi_ops_select(kname, err, sizeof err), *precs[2] = {NULL, NULL};
    if (ops) {
        const int both_p = !strcmp(precision, "both");
        precs[0] = xi_ops_precision(ops, both_p ? "exact" : precision, err, sizeof err);
        precs[1] = both_p ? xi_ops_precision(ops, "int8", err, sizeof err) : NULL;
        ops = precs[0];
    }
    if (!ops) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }

    if (attn) return bench_attn(ops, reps);
    if (gq) return bench_gq(precs[1] ? precs[1] : ops, reps, thread_list, n_tl);

    const xi_dtype dts[] = {XI_F32, XI_F16, XI_BF16, XI_Q8, XI_Q4_AWQ};
    const struct { const char *label; int64_t n_out, n_in; int rows; } shapes[] = {
        {"gemv 896x896 (q, o)", 896, 896, 1},
        {"gemv 4864x896 (up)", 4864, 896, 1},
        {"gemv 896x4864 (down)", 896, 4864, 1},
        {"gemv 151936x896 (lm_head)", 151936, 896, 1},
        {"gemm 16 rows 4864x896", 4864, 896, 16},   /* a decode step of 16 sequences */
        {"gemm 512 rows 4864x896", 4864, 896, 512},
        {"gemm 512 rows 896x4864", 896, 4864, 512},
    };
    const int both = !strcmp(layout, "both");
    int n_cases = 0;
    bench_case *cases = calloc(XI_ARRAY_LEN(shapes) * XI_ARRAY_LEN(dts) * 4, sizeof *cases);
    for (int s = 0; s < (int)XI_ARRAY_LEN(shapes); s++) {
        if ((quick || gemv_only) && shapes[s].rows > 1) continue;
        if (quick && shapes[s].n_out > 100000) continue;
        for (size_t d = 0; d < XI_ARRAY_LEN(dts); d++) {
            /* ops: what the loader does; both: the variant's block whatever the row length */
            const xi_weight shape = {.dtype = dts[d], .n_out = shapes[s].n_out, .n_in = shapes[s].n_in,
                                     .group_size = dts[d] == XI_Q4_AWQ ? 128 : 0};
            const int quant = dts[d] == XI_Q8 || dts[d] == XI_Q4_AWQ;
            for (int pi = 0; pi < (quant && precs[1] ? 2 : 1); pi++) {
            const xi_ops *po = precs[pi];
            const int blk = !strcmp(layout, "row") ? 0
                            : both                 ? (dts[d] == XI_Q4_AWQ ? po->q4_block : po->weight_block)
                                                   : xi_weight_block_for(po, &shape);
            for (int b = 0; b < 1 + (both && blk); b++) {
                bench_case *c = &cases[n_cases++];
                *c = (bench_case){.label = shapes[s].label, .dt = dts[d], .n_out = shapes[s].n_out,
                                  .n_in = shapes[s].n_in, .rows = shapes[s].rows,
                                  .block = b ? 0 : blk, .ops = po};
                if (case_init(c)) {
                    fprintf(stderr, "out of memory building %s\n", shapes[s].label);
                    return 1;
                }
            }
            }
        }
    }
    const size_t bw_bytes = quick ? (256u << 20) : (1u << 30);
    float *bwbuf = xi_alloc_big(bw_bytes);
    for (size_t i = 0; i < bw_bytes / 4; i += 1024) bwbuf[i] = 1.0f;
    float *x = malloc(512 * 4864 * 4), *y = malloc((size_t)512 * 151936 * 4 / 64 * 64);
    float *ybig = malloc((size_t)151936 * 4);
    for (int i = 0; i < 512 * 4864; i++) x[i] = frand();

    /* results[t][case][rep] = ratio; bw[t][rep], peak[t][rep] */
    double *ratio = calloc((size_t)(n_tl * n_cases * reps), sizeof(double));
    double *abs_v = calloc((size_t)(n_tl * n_cases * reps), sizeof(double));
    double *bw = calloc((size_t)(n_tl * reps), sizeof(double));
    double *peak = calloc((size_t)(n_tl * reps), sizeof(double));
    xi_pool *pools[4];
    for (int t = 0; t < n_tl; t++) pools[t] = xi_pool_new(thread_list[t]);

    printf("kernels: %s, %d repetitions, threads:", ops->name, reps);
    for (int t = 0; t < n_tl; t++) printf(" %d", thread_list[t]);
    printf("\n");
    for (int r = 0; r < reps; r++)
        for (int t = 0; t < n_tl; t++) {
            xi_pool *p = pools[t];
            limits_read_bandwidth(p, bwbuf, bw_bytes / 4); /* warm the pages and TLB */
            const double bw_gbs = limits_read_bandwidth(p, bwbuf, bw_bytes / 4) / 1e9;
            const double pk = limits_fma_peak(p, 20000000L) / 1e9;
            bw[t * reps + r] = bw_gbs;
            peak[t * reps + r] = pk;
            double t0;
            for (int c = 0; c < n_cases; c++) {
                bench_case *bc = &cases[c];
                const int calls = bc->rows == 1 ? XI_MAX(bc->n_copies, 4) : bc->rows < 64 ? 8 : 1;
                float *out = bc->n_out > 100000 ? ybig : y;
                xi_matmul(p, bc->ops, out, x, bc->rows, &bc->w[0], NULL); /* warm-up */
                t0 = xi_now();
                for (int k = 0; k < calls; k++)
                    xi_matmul(p, bc->ops, out, x, bc->rows, &bc->w[k % bc->n_copies], NULL);
                const double dt = (xi_now() - t0) / calls;
                const size_t idx = (size_t)((t * n_cases + c) * reps + r);
                if (bc->rows == 1) {
                    abs_v[idx] = (double)bc->bytes / dt / 1e9;
                    ratio[idx] = abs_v[idx] / bw_gbs;
                } else {
                    abs_v[idx] = 2.0 * bc->rows * bc->n_out * bc->n_in / dt / 1e9;
                    ratio[idx] = abs_v[idx] / pk;
                }
            }
            fprintf(stderr, ".");
        }
    fprintf(stderr, "\n");
    for (int t = 0; t < n_tl; t++) {
        double m, lo, hi;
        summarize(bw + t * reps, reps, &m, &lo, &hi);
        printf("\nthreads %d: read bandwidth %.1f GB/s (%.1f..%.1f)", thread_list[t], m, lo, hi);
        summarize(peak + t * reps, reps, &m, &lo, &hi);
        printf(", FMA peak %.1f GFLOP/s (%.1f..%.1f)\n", m, lo, hi);
        printf("  %-28s %-9s %-4s %10s  %-22s\n", "case", "weights", "acts", "abs", "ratio median (min..max)");
        for (int c = 0; c < n_cases; c++) {
            double am, al, ah;
            summarize(abs_v + (size_t)(t * n_cases + c) * reps, reps, &am, &al, &ah);
            summarize(ratio + (size_t)(t * n_cases + c) * reps, reps, &m, &lo, &hi);
            printf("  %-28s %-9s %-4s %6.1f %s  %.2f (%.2f..%.2f) of %s\n", cases[c].label,
                   cases[c].w[0].block ? blocked_name(cases[c].dt, cases[c].w[0].block) : xi_dtype_name(cases[c].dt),
                   cases[c].ops->matmul_q && (cases[c].dt == XI_Q8 || cases[c].dt == XI_Q4_AWQ) ? "i8" : "f32",
                   am, cases[c].rows == 1 ? "GB/s  " : "GFLOP/s", m,
                   lo, hi, cases[c].rows == 1 ? "bandwidth" : "FMA peak");
        }
    }
    /* Hand-off latency of an empty job, back to back and after the workers went to sleep:
     * the fixed cost every threaded op pays. */
    printf("\npool round trip of an empty job, median (p90) over 1000:\n");
    for (int threads = 2; threads <= 3; threads++) {
        xi_pool *p = xi_pool_new(threads);
        for (int idle = 0; idle < 2; idle++) {
            double v[1000];
            for (int i = 0; i < 1000; i++) {
                if (idle) {
                    const double t1 = xi_now();
                    while (xi_now() - t1 < 2e-3) {}
                }
                const double t0 = xi_now();
                xi_pool_run(p, nop_task, NULL);
                v[i] = xi_now() - t0;
            }
            qsort(v, 1000, sizeof *v, cmp_d);
            printf("  threads %d, %-22s %7.2f us (%.2f)\n", threads,
                   idle ? "after 2 ms idle:" : "back to back:", v[500] * 1e6, v[900] * 1e6);
        }
        xi_pool_free(p);
    }
    for (int t = 0; t < n_tl; t++) xi_pool_free(pools[t]);
    for (int c = 0; c < n_cases; c++) case_free(&cases[c]);
    xi_free_big(bwbuf, bw_bytes);
    free(cases);
    free(x);
    free(y);
    free(ybig);
    free(ratio);
    free(abs_v);
    free(bw);
    free(peak);
    return 0;
}
