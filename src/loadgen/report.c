/* loadgen/report: the sweep as JSON (everything, for scripts), CSV (one row per level, for
 * spreadsheets) and a text table (for people). Statistics that have no samples (a level where
 * every request failed) are null in JSON, empty in CSV and "-" in the table, never 0: a zero
 * latency would read as a very fast server. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loadgen/loadgen.h"

static const char *const dist_names[4] = {"ttft", "tpot", "itl", "e2e"};

static const xi_loadgen_dist *dist_at(const xi_loadgen_level *l, int i) {
    const xi_loadgen_dist *d[4] = {&l->ttft, &l->tpot, &l->itl, &l->e2e};
    return d[i];
}

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* A request rate: a number, or "inf" for a closed loop (JSON has no infinity). */
static json_t *rate_json(double r) { return isfinite(r) ? json_real(r) : json_string("inf"); }

static int any_open_loop(const xi_loadgen_level *lv, int n) {
    for (int i = 0; i < n; i++)
        if (isfinite(lv[i].request_rate)) return 1;
    return 0;
}

static json_t *dist_json(const xi_loadgen_dist *d) {
    json_t *j = json_object();
    json_object_set_new(j, "count", json_integer((json_int_t)d->n));
    json_object_set_new(j, "mean", num(d->mean));
    json_object_set_new(j, "min", num(d->min));
    json_object_set_new(j, "p50", num(d->p50));
    json_object_set_new(j, "p90", num(d->p90));
    json_object_set_new(j, "p99", num(d->p99));
    json_object_set_new(j, "max", num(d->max));
    return j;
}

char *xi_loadgen_json(const xi_loadgen_config *c, const xi_loadgen_level *lv, int n) {
    json_t *root = json_object();
    json_t *cfg = json_object();
    json_object_set_new(cfg, "url", json_string(c->url ? c->url : ""));
    json_object_set_new(cfg, "model", json_string(c->model ? c->model : ""));
    json_object_set_new(cfg, "endpoint", json_string(c->endpoint == XI_LG_CHAT ? "chat" : "completions"));
    json_object_set_new(cfg, "api_key_set", json_boolean(c->api_key && *c->api_key));
    json_t *conc = json_array();
    for (int i = 0; i < c->n_levels; i++) json_array_append_new(conc, json_integer(c->concurrency[i]));
    json_object_set_new(cfg, "concurrency", conc);
    json_t *rates = json_array();
    for (int i = 0; i < c->n_levels; i++)
        json_array_append_new(rates, rate_json(c->request_rate ? c->request_rate[i] : INFINITY));
    json_object_set_new(cfg, "request_rate", rates);
    json_object_set_new(cfg, "burstiness", json_real(c->burstiness));
    json_object_set_new(cfg, "num_requests", json_integer(c->num_requests));
    json_object_set_new(cfg, "prompt_len_min", json_integer(c->prompt_len_min));
    json_object_set_new(cfg, "prompt_len_max", json_integer(c->prompt_len_max));
    json_object_set_new(cfg, "output_len", json_integer(c->output_len));
    json_object_set_new(cfg, "shared_prefix_len", json_integer(c->shared_prefix_len));
    /* A string: seeds are 64-bit and JSON readers often hold integers as doubles. */
    char seed[24];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)c->seed);
    json_object_set_new(cfg, "seed", json_string(seed));
    json_object_set_new(cfg, "timeout_s", json_real(c->timeout_s));
    json_object_set_new(cfg, "stream_usage", json_boolean(c->stream_usage));
    json_object_set_new(cfg, "ignore_eos", json_boolean(c->ignore_eos));
    json_object_set_new(cfg, "latency_unit", json_string("ms"));
    json_object_set_new(root, "config", cfg);

    json_t *levels = json_array();
    for (int i = 0; i < n; i++) {
        const xi_loadgen_level *l = &lv[i];
        json_t *j = json_object();
        json_object_set_new(j, "concurrency", json_integer(l->concurrency));
        json_object_set_new(j, "request_rate", rate_json(l->request_rate));
        json_object_set_new(j, "num_requests", json_integer(l->num_requests));
        json_object_set_new(j, "completed", json_integer(l->completed));
        json_t *errs = json_object();
        json_object_set_new(errs, "total", json_integer(l->n_errors));
        for (int k = 1; k < XI_LG_ERR_COUNT; k++)
            json_object_set_new(errs, xi_loadgen_err_name((xi_loadgen_err)k), json_integer(l->errors[k]));
        json_object_set_new(j, "errors", errs);
        json_object_set_new(j, "first_error", l->first_error ? json_string(l->first_error) : json_null());
        json_object_set_new(j, "duration_s", json_real(l->duration_s));
        json_object_set_new(j, "input_tokens", json_integer(l->input_tokens));
        json_object_set_new(j, "output_tokens", json_integer(l->output_tokens));
        json_object_set_new(j, "usage_reported", json_integer(l->usage_reported));
        json_object_set_new(j, "request_throughput", json_real(l->request_throughput));
        json_object_set_new(j, "output_throughput", json_real(l->output_throughput));
        json_object_set_new(j, "total_token_throughput", json_real(l->total_token_throughput));
        for (int k = 0; k < 4; k++) {
            char key[16];
            snprintf(key, sizeof key, "%s_ms", dist_names[k]);
            json_object_set_new(j, key, dist_json(dist_at(l, k)));
        }
        json_array_append_new(levels, j);
    }
    json_object_set_new(root, "levels", levels);
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
    json_decref(root);
    return s;
}

static void csv_num(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, ",%.6g", v);
    else fputc(',', f);
}

/* RFC 4180: quote the field, double inner quotes. */
static void csv_str(FILE *f, const char *s) {
    fputs(",\"", f);
    for (; s && *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
    }
    fputc('"', f);
}

int xi_loadgen_write_csv(FILE *f, const xi_loadgen_level *lv, int n) {
    static const char *const stat_names[4] = {"mean", "p50", "p90", "p99"};
    fputs("concurrency,request_rate,num_requests,completed,errors,duration_s,request_throughput,"
          "output_throughput,total_token_throughput,input_tokens,output_tokens", f);
    for (int k = 0; k < 4; k++)
        for (int s = 0; s < 4; s++) fprintf(f, ",%s_ms_%s", dist_names[k], stat_names[s]);
    for (int k = 1; k < XI_LG_ERR_COUNT; k++) fprintf(f, ",errors_%s", xi_loadgen_err_name((xi_loadgen_err)k));
    fputs(",first_error\n", f);
    for (int i = 0; i < n; i++) {
        const xi_loadgen_level *l = &lv[i];
        fprintf(f, "%d", l->concurrency);
        if (isfinite(l->request_rate)) fprintf(f, ",%.6g", l->request_rate);
        else fputs(",inf", f);
        fprintf(f, ",%d,%d,%d", l->num_requests, l->completed, l->n_errors);
        csv_num(f, l->duration_s);
        csv_num(f, l->request_throughput);
        csv_num(f, l->output_throughput);
        csv_num(f, l->total_token_throughput);
        fprintf(f, ",%lld,%lld", l->input_tokens, l->output_tokens);
        for (int k = 0; k < 4; k++) {
            const xi_loadgen_dist *d = dist_at(l, k);
            csv_num(f, d->mean), csv_num(f, d->p50), csv_num(f, d->p90), csv_num(f, d->p99);
        }
        for (int k = 1; k < XI_LG_ERR_COUNT; k++) fprintf(f, ",%d", l->errors[k]);
        csv_str(f, l->first_error ? l->first_error : "");
        fputc('\n', f);
    }
    return ferror(f) ? -1 : 0;
}

/* A latency cell: "-" when there is no sample. */
static void cell(FILE *f, double v, int width) {
    if (isfinite(v)) fprintf(f, " %*.1f", width, v);
    else fprintf(f, " %*s", width, "-");
}

/* The level's name in messages: "concurrency 4", or "rate 2 (max 4 in flight)". */
static void level_name(char *out, size_t len, const xi_loadgen_level *l) {
    if (isfinite(l->request_rate))
        snprintf(out, len, "rate %g (max %d in flight)", l->request_rate, l->concurrency);
    else
        snprintf(out, len, "concurrency %d", l->concurrency);
}

void xi_loadgen_write_table(FILE *f, const xi_loadgen_level *lv, int n) {
    /* A rate column only when some level ran open loop: closed-loop tables stay as they were. */
    const int rates = any_open_loop(lv, n);
    if (rates) fprintf(f, "%7s ", "rate/s");
    fprintf(f, "%5s %9s %8s %10s  %17s  %15s  %15s  %17s\n", "conc", "ok/total", "req/s",
            "out tok/s", "TTFT p50/p99 ms", "TPOT p50/p99", "ITL p50/p99", "E2E p50/p99 ms");
    for (int i = 0; i < n; i++) {
        const xi_loadgen_level *l = &lv[i];
        char ok[24];
        snprintf(ok, sizeof ok, "%d/%d", l->completed, l->num_requests);
        if (rates && isfinite(l->request_rate)) fprintf(f, "%7.3g ", l->request_rate);
        else if (rates) fprintf(f, "%7s ", "inf");
        fprintf(f, "%5d %9s %8.2f %10.1f ", l->concurrency, ok, l->request_throughput,
                l->output_throughput);
        cell(f, l->ttft.p50, 8), cell(f, l->ttft.p99, 8);
        fputc(' ', f);
        cell(f, l->tpot.p50, 7), cell(f, l->tpot.p99, 7);
        fputc(' ', f);
        cell(f, l->itl.p50, 7), cell(f, l->itl.p99, 7);
        fputc(' ', f);
        cell(f, l->e2e.p50, 8), cell(f, l->e2e.p99, 8);
        fputc('\n', f);
    }
    for (int i = 0; i < n; i++) {
        const xi_loadgen_level *l = &lv[i];
        if (!l->n_errors) continue;
        char name[64];
        level_name(name, sizeof name, l);
        fprintf(f, "%s: %d error%s (", name, l->n_errors, l->n_errors == 1 ? "" : "s");
        const char *sep = "";
        for (int k = 1; k < XI_LG_ERR_COUNT; k++)
            if (l->errors[k]) {
                fprintf(f, "%s%s %d", sep, xi_loadgen_err_name((xi_loadgen_err)k), l->errors[k]);
                sep = ", ";
            }
        fprintf(f, "); first: %s\n", l->first_error ? l->first_error : "?");
    }
}
