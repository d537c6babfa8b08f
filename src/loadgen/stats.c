/* loadgen/stats: percentiles and the per-level aggregation. Latencies are collected in seconds
 * and reported in milliseconds, the unit vLLM's benchmark uses, so numbers compare directly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loadgen/loadgen.h"

static const char *const err_names[XI_LG_ERR_COUNT] = {
    "ok", "connect", "timeout", "http_4xx", "http_5xx", "stream", "other",
};

const char *xi_loadgen_err_name(xi_loadgen_err e) {
    return (unsigned)e < XI_LG_ERR_COUNT ? err_names[e] : "other";
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double xi_loadgen_percentile(double *v, size_t n, double p) {
    if (n == 0) return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    if (p <= 0) return v[0];
    if (p >= 100) return v[n - 1];
    double rank = p / 100.0 * (double)(n - 1);
    size_t lo = (size_t)rank;
    double frac = rank - (double)lo;
    if (lo + 1 >= n) return v[n - 1];
    return v[lo] + (v[lo + 1] - v[lo]) * frac;
}

void xi_loadgen_dist_of(double *v, size_t n, xi_loadgen_dist *d) {
    memset(d, 0, sizeof *d);
    d->n = n;
    if (n == 0) {
        d->mean = d->min = d->max = d->p50 = d->p90 = d->p99 = NAN;
        return;
    }
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += v[i];
    /* One sort serves every percentile: the later calls find v already ordered. */
    d->p50 = xi_loadgen_percentile(v, n, 50) * 1e3;
    d->p90 = xi_loadgen_percentile(v, n, 90) * 1e3;
    d->p99 = xi_loadgen_percentile(v, n, 99) * 1e3;
    d->min = v[0] * 1e3;
    d->max = v[n - 1] * 1e3;
    d->mean = sum / (double)n * 1e3;
}

void xi_loadgen_result_free(xi_loadgen_result *r) {
    free(r->err_msg);
    free(r->itl);
    memset(r, 0, sizeof *r);
}

void xi_loadgen_level_free(xi_loadgen_level *lv) {
    free(lv->first_error);
    memset(lv, 0, sizeof *lv);
}

int xi_loadgen_level_of(xi_loadgen_result *res, int n, int concurrency, xi_loadgen_level *lv) {
    memset(lv, 0, sizeof *lv);
    lv->concurrency = concurrency;
    lv->request_rate = INFINITY; /* the sweep sets an open loop's rate */
    lv->num_requests = n;
    size_t n_itl = 0;
    for (int i = 0; i < n; i++)
        if (res[i].err == XI_LG_OK && res[i].chunks > 1) n_itl += (size_t)res[i].chunks - 1;
    /* ttft, tpot, e2e: [n] each; itl: [n_itl]; all scratch, freed here. */
    size_t cap = n > 0 ? (size_t)n : 1;
    double *ttft = malloc(sizeof(double) * cap);
    double *tpot = malloc(sizeof(double) * cap);
    double *e2e = malloc(sizeof(double) * cap);
    double *itl = malloc(sizeof(double) * (n_itl ? n_itl : 1));
    if (!ttft || !tpot || !e2e || !itl) {
        free(ttft), free(tpot), free(e2e), free(itl);
        return -1;
    }
    size_t nt = 0, np = 0, ni = 0;
    double first = INFINITY, last = -INFINITY;
    for (int i = 0; i < n; i++) {
        const xi_loadgen_result *r = &res[i];
        if (r->start < first) first = r->start;
        if (r->start + r->e2e > last) last = r->start + r->e2e;
        if (r->err != XI_LG_OK) {
            lv->n_errors++;
            lv->errors[(unsigned)r->err < XI_LG_ERR_COUNT ? r->err : XI_LG_ERR_OTHER]++;
            continue;
        }
        lv->completed++;
        lv->output_tokens += r->output_tokens;
        if (r->usage_reported) lv->usage_reported++;
        if (r->prompt_tokens > 0) lv->input_tokens += r->prompt_tokens;
        ttft[nt++] = r->ttft;
        e2e[nt - 1] = r->e2e;
        /* TPOT excludes the first token, which carries the prefill. */
        if (r->output_tokens > 1) tpot[np++] = (r->e2e - r->ttft) / (r->output_tokens - 1);
        for (int k = 0; k + 1 < r->chunks; k++) itl[ni++] = r->itl[k];
    }
    /* "First" is by start time, so the message does not depend on completion order. */
    int first_bad = -1;
    for (int i = 0; i < n; i++)
        if (res[i].err != XI_LG_OK && (first_bad < 0 || res[i].start < res[first_bad].start))
            first_bad = i;
    if (first_bad >= 0) {
        xi_buf b = {0};
        xi_buf_printf(&b, "%s: %s", xi_loadgen_err_name(res[first_bad].err),
                      res[first_bad].err_msg ? res[first_bad].err_msg : "(no message)");
        lv->first_error = b.data;
    }
    lv->duration_s = n > 0 && last > first ? last - first : 0;
    xi_loadgen_dist_of(ttft, nt, &lv->ttft);
    xi_loadgen_dist_of(tpot, np, &lv->tpot);
    xi_loadgen_dist_of(itl, ni, &lv->itl);
    xi_loadgen_dist_of(e2e, nt, &lv->e2e);
    if (lv->duration_s > 0) {
        lv->request_throughput = lv->completed / lv->duration_s;
        lv->output_throughput = (double)lv->output_tokens / lv->duration_s;
        lv->total_token_throughput = (double)(lv->input_tokens + lv->output_tokens) / lv->duration_s;
    }
    free(ttft), free(tpot), free(e2e), free(itl);
    return 0;
}
