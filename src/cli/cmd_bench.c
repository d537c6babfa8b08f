/* cli/bench: `xinfer bench` — load-test any OpenAI-compatible server with a concurrency sweep
 * (closed loop) or a request-rate sweep (open loop, as vLLM's `bench serve --request-rate`).
 *   xinfer bench --url http://127.0.0.1:8000 --concurrency 1,2,4,8,16 --out results.json
 *   xinfer bench --url http://127.0.0.1:8000 --request-rate 1,2,4,inf --max-concurrency 16
 * The work is loadgen's; this file reads flags, draws progress on stderr, prints the summary
 * table on stdout and writes the files. Exit 0 when every request succeeded, 2 when the sweep
 * ran but some requests failed (the reports say which and why), 1 on bad flags or files. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/base.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "loadgen/loadgen.h"

#define MAX_LEVELS 64

static void usage(FILE *f) {
    fprintf(f,
        "usage: xinfer bench --url URL [--model NAME] [options]\n\n"
        "Streams requests to an OpenAI-compatible server (xinfer, vLLM, llama.cpp, ...) at each\n"
        "concurrency level or request rate and reports TTFT, TPOT, inter-token and end-to-end\n"
        "latency (p50/p90/p99), request and output-token throughput, and errors by kind.\n\n"
        "  --url URL                 server base URL, .../v1, or the endpoint URL (http://127.0.0.1:8000)\n"
        "  --model NAME              model name to request (default: the first of GET /v1/models)\n"
        "  --api-key KEY             sent as `Authorization: Bearer KEY` (env OPENAI_API_KEY)\n"
        "  --endpoint chat|completions   /v1/chat/completions or /v1/completions (completions)\n"
        "  --concurrency LIST        requests in flight, one level per value (1,2,4,8,16); with\n"
        "                            --request-rate, the most in flight (default: 512)\n"
        "  --max-concurrency LIST    the same as --concurrency (vLLM's name)\n"
        "  --request-rate LIST       open loop: requests arrive at this many per second, in a\n"
        "                            seeded Poisson process; one level per value, 'inf' for all\n"
        "                            at once (default: closed loop at each --concurrency)\n"
        "  --burstiness B            gamma shape of the gaps between arrivals: 1 Poisson, < 1\n"
        "                            burstier, > 1 more even (1)\n"
        "  --num-requests N          requests per level (64)\n"
        "  --prompt-len N|MIN:MAX    words per prompt (about one token each), fixed or uniform (128)\n"
        "  --output-len N            max_tokens of every request, with ignore_eos (128)\n"
        "  --shared-prefix-len N     words of a prefix every prompt starts with, before the\n"
        "                            prompt-len words: shows prefix caching (0)\n"
        "  --seed S                  prompts and arrival times are a function of the seed (0)\n"
        "  --timeout S               seconds a request may take in all (300)\n"
        "  --no-usage                do not send stream_options.include_usage (servers that reject\n"
        "                            it); output tokens are then counted as content chunks\n"
        "  --no-ignore-eos           do not send ignore_eos\n"
        "  --out FILE                JSON: the config and every statistic of every level\n"
        "  --csv FILE                CSV: one row per level\n"
        "  --svg FILE                SVG chart: output throughput and TTFT p50/p99 against concurrency\n\n"
        "Exit status: 0 all requests succeeded, 2 some failed (see the table), 1 bad flags or files.\n");
}

typedef struct bench_args {
    xi_loadgen_config c;
    int levels[MAX_LEVELS];     /* per level: concurrency (closed loop) or its cap (open) */
    double rates[MAX_LEVELS];   /* per level: requests/s */
    int n_conc, n_rates;        /* values given; n_conc 0: the default list */
    int conc_list[MAX_LEVELS];
    double rate_list[MAX_LEVELS];
    const char *out, *csv, *svg;
} bench_args;

/* A comma-separated list into out[MAX_LEVELS]: integers 1..100000 (is_rate 0) or request rates
 * > 0, 'inf' allowed (is_rate 1). Returns the count, or -1. */
static int parse_list(const char *s, int is_rate, int *ints, double *rates) {
    int n = 0;
    char *copy = xi_strdup(s), *save = NULL;
    int rc = copy ? 0 : -1;
    for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t && !rc; t = strtok_r(NULL, ",", &save)) {
        long long v;
        double d;
        if (n == MAX_LEVELS) rc = -1;
        else if (!is_rate) rc = xi_parse_int(t, 1, 100000, &v) ? -1 : (ints[n++] = (int)v, 0);
        else if (!strcasecmp(t, "inf") || !strcasecmp(t, "infinity")) rates[n++] = INFINITY;
        else rc = xi_parse_float(t, 1e-6, 1e9, &d) ? -1 : (rates[n++] = d, 0);
    }
    free(copy);
    return rc || n == 0 ? -1 : n;
}

/* Without --max-concurrency, an open loop still holds at most this many requests in flight:
 * each is a socket, and the usual limit of 1024 open files would otherwise turn a server that
 * falls behind into the client's own connect errors. */
#define OPEN_LOOP_MAX_INFLIGHT 512

/* The sweep's levels from the lists: one list may have many values, the other is repeated.
 * Without --request-rate, a closed loop at each concurrency (1,2,4,8,16 by default); with it,
 * an open loop at each rate, at most --concurrency in flight (default: 512). */
static int build_levels(bench_args *a) {
    static const int def_conc[] = {1, 2, 4, 8, 16};
    const int *conc = a->n_conc ? a->conc_list : def_conc;
    int n_conc = a->n_conc ? a->n_conc : (int)XI_ARRAY_LEN(def_conc);
    int unbounded = a->n_rates && !a->n_conc;
    if (unbounded) n_conc = 1;
    if (a->n_rates > 1 && n_conc > 1) {
        fprintf(stderr, "xinfer bench: sweep either --concurrency or --request-rate, not both "
                        "(one of them must have a single value)\n");
        return -1;
    }
    const int n = XI_MAX(n_conc, XI_MAX(a->n_rates, 1));
    for (int i = 0; i < n; i++) {
        a->levels[i] = unbounded ? XI_MIN(a->c.num_requests, OPEN_LOOP_MAX_INFLIGHT)
                                 : conc[n_conc > 1 ? i : 0];
        a->rates[i] = a->n_rates ? a->rate_list[a->n_rates > 1 ? i : 0] : INFINITY;
    }
    a->c.n_levels = n;
    a->c.concurrency = a->levels;
    a->c.request_rate = a->rates;
    return 0;
}

static int parse_prompt_len(const char *s, xi_loadgen_config *c) {
    const char *colon = strchr(s, ':');
    long long lo, hi;
    if (!colon) {
        if (xi_parse_int(s, 0, 1000000, &lo)) return -1;
        c->prompt_len_min = c->prompt_len_max = (int)lo;
        return 0;
    }
    char first[32];
    size_t n = (size_t)(colon - s);
    if (n == 0 || n >= sizeof first) return -1;
    memcpy(first, s, n);
    first[n] = 0;
    if (xi_parse_int(first, 0, 1000000, &lo) || xi_parse_int(colon + 1, 0, 1000000, &hi) || hi < lo)
        return -1;
    c->prompt_len_min = (int)lo;
    c->prompt_len_max = (int)hi;
    return 0;
}

/* Returns 0, 1 for --help, -1 after printing an error. */
static int parse_args(int argc, char **argv, bench_args *a) {
    memset(a, 0, sizeof *a);
    xi_loadgen_config_default(&a->c);
    a->c.model = NULL;
    a->c.api_key = getenv("OPENAI_API_KEY");
    for (int i = 1; i < argc; i++) {
        const char *v = NULL, *flag = argv[i];
        long long n;
        double d;
        int got;
        if (!strcmp(flag, "-h") || !strcmp(flag, "--help")) return 1;
        if (!strcmp(flag, "--no-usage")) { a->c.stream_usage = 0; continue; }
        if (!strcmp(flag, "--no-ignore-eos")) { a->c.ignore_eos = 0; continue; }
#define VALUE(name) ((got = xi_arg_value(argc, argv, &i, name, &v)) != 0)
        if (VALUE("--url")) { if (got < 0) goto missing; a->c.url = v; }
        else if (VALUE("--base-url")) { if (got < 0) goto missing; a->c.url = v; }
        else if (VALUE("--model")) { if (got < 0) goto missing; a->c.model = v; }
        else if (VALUE("--api-key")) { if (got < 0) goto missing; a->c.api_key = v; }
        else if (VALUE("--endpoint")) {
            if (got < 0) goto missing;
            if (!strcmp(v, "chat") || strstr(v, "chat/completions")) a->c.endpoint = XI_LG_CHAT;
            else if (!strcmp(v, "completions") || !strcmp(v, "/v1/completions")) a->c.endpoint = XI_LG_COMPLETIONS;
            else goto bad;
        }
        else if (VALUE("--concurrency") || VALUE("--max-concurrency")) {
            if (got < 0) goto missing;
            if ((a->n_conc = parse_list(v, 0, a->conc_list, NULL)) < 0) goto bad;
        }
        else if (VALUE("--request-rate")) {
            if (got < 0) goto missing;
            if ((a->n_rates = parse_list(v, 1, NULL, a->rate_list)) < 0) goto bad;
        }
        else if (VALUE("--burstiness")) {
            if (got < 0) goto missing;
            if (xi_parse_float(v, 1e-3, 1e3, &d)) goto bad;
            a->c.burstiness = d;
        }
        else if (VALUE("--num-requests")) {
            if (got < 0) goto missing;
            if (xi_parse_int(v, 1, 10000000, &n)) goto bad;
            a->c.num_requests = (int)n;
        }
        else if (VALUE("--prompt-len")) { if (got < 0) goto missing; if (parse_prompt_len(v, &a->c)) goto bad; }
        else if (VALUE("--output-len")) {
            if (got < 0) goto missing;
            if (xi_parse_int(v, 1, 10000000, &n)) goto bad;
            a->c.output_len = (int)n;
        }
        else if (VALUE("--shared-prefix-len")) {
            if (got < 0) goto missing;
            if (xi_parse_int(v, 0, 1000000, &n)) goto bad;
            a->c.shared_prefix_len = (int)n;
        }
        else if (VALUE("--seed")) {
            if (got < 0) goto missing;
            if (xi_parse_int(v, 0, (long long)(~0ull >> 1), &n)) goto bad;
            a->c.seed = (uint64_t)n;
        }
        else if (VALUE("--timeout")) {
            if (got < 0) goto missing;
            if (xi_parse_float(v, 0.001, 1e6, &d)) goto bad;
            a->c.timeout_s = d;
        }
        else if (VALUE("--out")) { if (got < 0) goto missing; a->out = v; }
        else if (VALUE("--csv")) { if (got < 0) goto missing; a->csv = v; }
        else if (VALUE("--svg")) { if (got < 0) goto missing; a->svg = v; }
        else {
            fprintf(stderr, "xinfer bench: unknown flag '%s' (see --help)\n", flag);
            return -1;
        }
        continue;
    missing:
        fprintf(stderr, "xinfer bench: %s needs a value\n", flag);
        return -1;
    bad:
        fprintf(stderr, "xinfer bench: bad value '%s' for %s\n", v, flag);
        return -1;
#undef VALUE
    }
    return build_levels(a);
}

/* ---- progress -------------------------------------------------------------------------- */

typedef struct progress_state {
    int tty;
    double level_start;
    const double *rates;  /* [levels] */
} progress_state;

static void on_progress(void *ud, int level_idx, int conc, int done, int total, int errors) {
    progress_state *p = ud;
    char name[48];
    if (isfinite(p->rates[level_idx])) snprintf(name, sizeof name, "rate %g/s", p->rates[level_idx]);
    else snprintf(name, sizeof name, "concurrency %d", conc);
    if (done == 0) p->level_start = xi_now();
    double el = xi_now() - p->level_start;
    if (p->tty) {
        /* One line redrawn in place: \r and an erase-to-end so a shorter line leaves no tail. */
        enum { BAR = 30 };
        int fill = total ? (int)((long long)done * BAR / total) : BAR;
        char bar[BAR + 1];
        for (int i = 0; i < BAR; i++) bar[i] = i < fill ? '#' : '.';
        bar[BAR] = 0;
        fprintf(stderr, "\r%s [%s] %d/%d  errors %d  %.1fs\x1b[K", name, bar, done, total,
                errors, el);
        if (done == total) fputc('\n', stderr);
        fflush(stderr);
    } else if (done == 0) {
        fprintf(stderr, "bench: %s: %d requests\n", name, total);
    } else if (done == total) {
        fprintf(stderr, "bench: %s: done in %.1f s, %d error%s\n", name, el, errors,
                errors == 1 ? "" : "s");
    }
}

/* ---- outputs --------------------------------------------------------------------------- */

static int write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f)) {
        if (f) fclose(f);
        fprintf(stderr, "xinfer bench: cannot write %s\n", path);
        return -1;
    }
    return 0;
}

static int write_outputs(const bench_args *a, const xi_loadgen_level *lv) {
    int rc = 0, n = a->c.n_levels;
    if (a->out) {
        char *s = xi_loadgen_json(&a->c, lv, n);
        rc |= !s || write_text(a->out, s);
        free(s);
    }
    if (a->csv) {
        FILE *f = fopen(a->csv, "w");
        int bad = !f || xi_loadgen_write_csv(f, lv, n);
        if (f && fclose(f)) bad = 1;
        if (bad) fprintf(stderr, "xinfer bench: cannot write %s\n", a->csv);
        rc |= bad;
    }
    if (a->svg) {
        xi_buf title = {0};
        /* A model given as a folder is named by its last component. */
        const char *name = a->c.model, *slash = strrchr(name, '/');
        if ((name[0] == '/' || name[0] == '.') && slash && slash[1]) name = slash + 1;
        xi_buf_printf(&title, "xinfer bench: %s, prompt %d", name, a->c.prompt_len_min);
        if (a->c.prompt_len_max != a->c.prompt_len_min) xi_buf_printf(&title, "-%d", a->c.prompt_len_max);
        xi_buf_printf(&title, " words, output %d tokens", a->c.output_len);
        if (a->c.shared_prefix_len) xi_buf_printf(&title, ", shared prefix %d", a->c.shared_prefix_len);
        char *s = xi_loadgen_svg(lv, n, title.data);
        rc |= !s || write_text(a->svg, s);
        free(s);
        xi_buf_free(&title);
    }
    return rc ? -1 : 0;
}

int cmd_bench(int argc, char **argv) {
    bench_args a;
    int pr = parse_args(argc, argv, &a);
    if (pr > 0) {
        usage(stdout);
        return 0;
    }
    if (pr < 0) return 1;
    char err[512] = "";
    char *discovered = NULL;
    if (!a.c.model) {
        discovered = xi_loadgen_first_model(a.c.url, a.c.api_key, XI_MIN(a.c.timeout_s, 30.0), err,
                                            sizeof err);
        if (!discovered) {
            fprintf(stderr, "xinfer bench: no --model given and none found: %s\n", err);
            return 1;
        }
        a.c.model = discovered;
    }
    if (xi_loadgen_config_check(&a.c, err, sizeof err)) {
        fprintf(stderr, "xinfer bench: %s\n", err);
        free(discovered);
        return 1;
    }
    fprintf(stderr, "bench: %s model '%s', %d requests per level, prompt %d", a.c.url, a.c.model,
            a.c.num_requests, a.c.prompt_len_min);
    if (a.c.prompt_len_max != a.c.prompt_len_min) fprintf(stderr, "-%d", a.c.prompt_len_max);
    fprintf(stderr, " words (+%d shared), output %d tokens\n", a.c.shared_prefix_len, a.c.output_len);

    xi_loadgen_level lv[MAX_LEVELS];
    progress_state ps = {isatty(2), 0, a.rates};
    if (xi_loadgen_run(&a.c, lv, on_progress, &ps, err, sizeof err)) {
        fprintf(stderr, "xinfer bench: %s\n", err);
        free(discovered);
        return 1;
    }
    xi_loadgen_write_table(stdout, lv, a.c.n_levels);
    fflush(stdout);
    int rc = write_outputs(&a, lv) ? 1 : 0;
    int failed = 0;
    for (int i = 0; i < a.c.n_levels; i++) {
        failed += lv[i].n_errors;
        xi_loadgen_level_free(&lv[i]);
    }
    free(discovered);
    return rc ? 1 : failed ? 2 : 0;
}
