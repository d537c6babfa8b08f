/* Fuzz loadgen's SSE splitter and statistics. Input byte 0 picks:
 *   even: an SSE byte stream. Fed whole and fed in chunks cut at input-derived points (also
 *         between '\r' and '\n'), it must give the same events, each data joined the same way.
 *   odd:  doubles (8 bytes each, NaN and infinities included) for percentile and dist_of; for
 *         finite samples min <= p50 <= p90 <= p99 <= max and the mean lies in [min, max]. */
#include <math.h>

#include "fuzz_util.h"
#include "loadgen/loadgen.h"

/* Events as (8-byte length, bytes) records. */
static int record(void *ud, const char *data, size_t len) {
    xi_buf *b = ud;
    uint64_t n = len;
    if (data[len] != 0) fuzz_fail("event data is not NUL-terminated");
    if (xi_buf_append(b, &n, sizeof n) || xi_buf_append(b, data, len)) abort();
    return 0;
}

static void run_sse(const uint8_t *data, size_t size, int complete) {
    xi_buf whole = {0}, cut = {0};
    xi_sse s;
    xi_sse_init(&s, record, &whole);
    if (xi_sse_feed(&s, (const char *)data, size)) fuzz_fail("feed failed");
    if (xi_sse_finish(&s, complete)) fuzz_fail("finish failed");
    xi_sse_free(&s);

    xi_sse_init(&s, record, &cut);
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < size; i++) h = (h ^ data[i]) * 16777619u;
    size_t i = 0;
    while (i < size) {
        h = h * 1103515245u + 12345u;
        size_t k = (h >> 16) % 7; /* chunks of 0..6 bytes: every cut point gets hit */
        if (k > size - i) k = size - i;
        if (xi_sse_feed(&s, (const char *)data + i, k)) fuzz_fail("chunked feed failed");
        i += k;
    }
    if (xi_sse_finish(&s, complete)) fuzz_fail("chunked finish failed");
    xi_sse_free(&s);
    if (whole.len != cut.len || (whole.len && memcmp(whole.data, cut.data, whole.len)))
        fuzz_fail("chunked feeding changed the events (complete=%d)", complete);
    xi_buf_free(&whole);
    xi_buf_free(&cut);
}

static void run_stats(const uint8_t *data, size_t size) {
    size_t n = size / 8;
    double *v = malloc(sizeof *v * (n ? n : 1)), *w = malloc(sizeof *w * (n ? n : 1));
    memcpy(v, data, n * 8);
    memcpy(w, data, n * 8);
    int finite = 1;
    for (size_t i = 0; i < n; i++) finite &= isfinite(v[i]) && fabs(v[i]) < 1e300;
    double p = n ? fmod(fabs(v[0]), 101.0) : 50.0;
    if (!isfinite(p)) p = 50.0;
    double q = xi_loadgen_percentile(w, n, p);
    xi_loadgen_dist d;
    xi_loadgen_dist_of(v, n, &d);
    if (d.n != n) fuzz_fail("dist n %zu of %zu", d.n, n);
    if (n && finite) {
        if (!(d.min <= d.p50 && d.p50 <= d.p90 && d.p90 <= d.p99 && d.p99 <= d.max))
            fuzz_fail("percentiles out of order: %g %g %g %g %g", d.min, d.p50, d.p90, d.p99,
                      d.max);
        /* mean of values that may be near the double range: allow rounding */
        double slack = 1e-9 * fmax(fabs(d.min), fabs(d.max));
        if (d.mean < d.min - slack || d.mean > d.max + slack)
            fuzz_fail("mean %g outside [%g, %g]", d.mean, d.min, d.max);
        if (q < w[0] || q > w[n - 1]) fuzz_fail("percentile %g outside the samples", q);
    }
    free(v);
    free(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (data[0] & 1) {
        run_stats(data + 1, size - 1);
    } else {
        run_sse(data + 1, size - 1, 0);
        run_sse(data + 1, size - 1, 1);
    }
    return 0;
}
