/* loadgen: load generation against any OpenAI-compatible server (xinfer, vLLM, llama.cpp).
 * A sweep of levels, each num_requests streaming requests: closed loop (keep C requests in
 * flight, a finished one replaced at once) or open loop (requests arrive at a request rate, in
 * a seeded Poisson or gamma process, with at most C in flight), measuring per request TTFT,
 * TPOT, inter-token latencies and end-to-end latency; per level, percentiles, throughputs and
 * errors by kind.
 *
 * Stages, one file each:
 *   prompt.c  the workload from a seed: prompts (random common words, ~1 token each) and
 *             arrival times
 *   sse.c     Server-Sent Events framing: bytes in, `data:` payloads out
 *   client.c  libcurl streaming client and the sweep loop
 *   stats.c   percentiles and per-level aggregation
 *   report.c  JSON, CSV and the text table; svg.c the chart
 * Nothing here exits or prints on its own: errors are values, progress is a callback. */
#ifndef XI_LOADGEN_H
#define XI_LOADGEN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/base.h"

/* ---- prompts ----------------------------------------------------------------------------- */

/* Prompts are words drawn from a fixed list of common English words that are one token each,
 * with a leading space, in the Qwen2.5 and Llama-2 vocabularies, so a prompt of N words is
 * about N tokens. The same (seed, stream, index) gives the same prompt everywhere. */
size_t xi_loadgen_word_count(void);

/* Append n_words random words to out, drawn from the generator seeded with
 * (seed, stream, index). Returns 0, or -1 when out of memory. */
int xi_loadgen_words(xi_buf *out, uint64_t seed, uint64_t stream, uint64_t index, int n_words);

/* The prompt of request `index` in sweep level `level`: the shared prefix (prefix_words words,
 * identical in every request of every level: it is what a prefix cache can reuse) followed by
 * prompt_words words unique to (seed, level, index). Returns a heap string, or NULL. */
char *xi_loadgen_prompt(uint64_t seed, int level, int index, int prefix_words, int prompt_words);

/* Length of request `index`'s unique part when lengths are drawn uniformly from [lo, hi]. */
int xi_loadgen_prompt_len(uint64_t seed, int level, int index, int lo, int hi);

/* Arrival offsets t[n] in seconds from the start of a level, t[0] = 0: gaps drawn from a gamma
 * distribution of shape `burstiness` and mean 1 / rate, as vLLM's `bench serve` does
 * (burstiness 1: a Poisson process; smaller: burstier; larger: more even). A rate of INFINITY
 * gives all zeros: every request is due at once. The same (seed, level) gives the same times. */
void xi_loadgen_arrivals(uint64_t seed, int level, int n, double rate, double burstiness,
                         double *t);

/* ---- SSE framing ------------------------------------------------------------------------- */

/* Splits a byte stream, fed in chunks cut anywhere, into SSE events and hands each event's data
 * (its `data:` lines joined with '\n') to on_data. Lines end in "\r\n", "\n" or "\r"; comment
 * lines (":...") and other fields (event:, id:, retry:) are skipped; an event ends at a blank
 * line. Only the wire framing is done here: HTTP is libcurl's, the payload JSON jansson's. */
typedef int (*xi_sse_data_fn)(void *ud, const char *data, size_t len);
typedef struct xi_sse {
    xi_buf line;          /* the current, unterminated line; owned */
    xi_buf data;          /* data lines of the current event, '\n'-joined; owned */
    int has_data;         /* the current event has at least one data line */
    int after_cr;         /* the last byte was '\r': a following '\n' belongs to it */
    xi_sse_data_fn on_data;
    void *ud;
} xi_sse;

void xi_sse_init(xi_sse *s, xi_sse_data_fn on_data, void *ud);
/* A line or an event's data longer than this is not a completion chunk: the stream is refused
 * rather than buffered without bound. */
#define XI_SSE_MAX_EVENT (8u << 20)
/* Feed bytes. Returns 0, or the first nonzero value on_data returned (feeding stops there),
 * -1 when out of memory, or -2 when a line or an event exceeds XI_SSE_MAX_EVENT. */
int xi_sse_feed(xi_sse *s, const char *bytes, size_t n);
/* End of stream: an event without its blank line is dispatched only if complete=1 (the spec
 * discards it; servers that end with "data: [DONE]\n" and no blank line exist). */
int xi_sse_finish(xi_sse *s, int complete);
void xi_sse_free(xi_sse *s);

/* ---- statistics -------------------------------------------------------------------------- */

/* The p-th percentile (0..100) of v[n] with linear interpolation between closest ranks
 * (numpy's default, as vLLM's benchmark reports). Sorts v in place. NaN when n == 0. */
double xi_loadgen_percentile(double *v, size_t n, double p);

typedef struct xi_loadgen_dist {
    size_t n;
    double mean, min, max, p50, p90, p99;  /* milliseconds; NaN when n == 0 */
} xi_loadgen_dist;

/* Summarise v[n] seconds as milliseconds. Sorts v in place. */
void xi_loadgen_dist_of(double *v, size_t n, xi_loadgen_dist *d);

/* ---- requests and levels ----------------------------------------------------------------- */

typedef enum xi_loadgen_err {
    XI_LG_OK = 0,
    XI_LG_ERR_CONNECT,   /* refused, unreachable, DNS: no HTTP answer at all */
    XI_LG_ERR_TIMEOUT,   /* no complete answer within --timeout */
    XI_LG_ERR_HTTP_4XX,
    XI_LG_ERR_HTTP_5XX,
    XI_LG_ERR_STREAM,    /* cut or malformed SSE stream, error event, no content */
    XI_LG_ERR_OTHER,
    XI_LG_ERR_COUNT
} xi_loadgen_err;

/* "connect", "timeout", "http_4xx", ... as used in the JSON and CSV. */
const char *xi_loadgen_err_name(xi_loadgen_err e);

/* One finished request. Times are seconds on the xi_now() clock. */
typedef struct xi_loadgen_result {
    xi_loadgen_err err;
    char *err_msg;          /* heap, NULL when ok */
    double start;
    double ttft;            /* start to first content chunk */
    double e2e;             /* start to end of stream */
    int prompt_words;       /* what was asked for (shared prefix included) */
    int prompt_tokens;      /* usage.prompt_tokens, -1 when the server sent no usage */
    int output_tokens;      /* usage.completion_tokens, else the number of content chunks */
    int usage_reported;     /* output_tokens came from usage */
    int chunks;             /* content chunks received */
    double *itl;            /* [chunks - 1] gaps between content chunks, seconds; owned */
} xi_loadgen_result;

typedef enum xi_loadgen_endpoint { XI_LG_COMPLETIONS, XI_LG_CHAT } xi_loadgen_endpoint;

typedef struct xi_loadgen_config {
    const char *url;          /* base URL: http://host:port, .../v1 or the full endpoint URL */
    const char *model;
    const char *api_key;      /* NULL: no Authorization header */
    xi_loadgen_endpoint endpoint;
    const int *concurrency;   /* [n_levels] borrowed: requests in flight, or the cap on them */
    const double *request_rate; /* [n_levels] borrowed, requests/s; INFINITY or a NULL array:
                                 * closed loop */
    double burstiness;        /* gamma shape of the gaps between arrivals; 1: Poisson */
    int n_levels;
    int num_requests;         /* per level */
    int prompt_len_min, prompt_len_max;  /* words of the unique part; equal for a fixed length */
    int output_len;           /* max_tokens */
    int shared_prefix_len;    /* words shared by every prompt */
    uint64_t seed;
    double timeout_s;         /* per request, whole transfer */
    int stream_usage;         /* send stream_options.include_usage */
    int ignore_eos;           /* send ignore_eos (vLLM; other servers ignore unknown fields) */
} xi_loadgen_config;

void xi_loadgen_config_default(xi_loadgen_config *c);
/* Check ranges; names the bad field. */
int xi_loadgen_config_check(const xi_loadgen_config *c, char *err, size_t errlen);

/* The URL requests go to: url + "/v1/completions" or "/v1/chat/completions", unless url already
 * ends in "/v1" (then only the tail is added) or names the endpoint itself. Heap string. */
char *xi_loadgen_endpoint_url(const char *url, xi_loadgen_endpoint e);

/* The JSON body of one request (heap string): model, prompt or messages, max_tokens,
 * temperature 0, stream true, and the optional fields the config asks for. */
char *xi_loadgen_request_body(const xi_loadgen_config *c, const char *prompt);

/* One concurrency level, aggregated. */
typedef struct xi_loadgen_level {
    int concurrency;
    double request_rate;                /* INFINITY: closed loop */
    int num_requests;
    int completed;                      /* successful requests */
    int errors[XI_LG_ERR_COUNT];        /* by kind; errors[XI_LG_OK] unused */
    int n_errors;
    char *first_error;                  /* heap: "kind: message" of the first failure, or NULL */
    double duration_s;                  /* first start to last finish */
    long long input_tokens;             /* sum of usage.prompt_tokens (reported ones) */
    long long output_tokens;            /* sum over successful requests */
    int usage_reported;                 /* successful requests whose token counts came from usage */
    double request_throughput;          /* completed / duration, req/s */
    double output_throughput;           /* output_tokens / duration, tok/s */
    double total_token_throughput;      /* (input + output) / duration, tok/s */
    xi_loadgen_dist ttft, tpot, itl, e2e;  /* milliseconds, successful requests only */
} xi_loadgen_level;

/* Aggregate res[n] (the requests of one level, in any order) into lv. Returns 0 or -1 (OOM). */
int xi_loadgen_level_of(xi_loadgen_result *res, int n, int concurrency, xi_loadgen_level *lv);
void xi_loadgen_level_free(xi_loadgen_level *lv);
void xi_loadgen_result_free(xi_loadgen_result *r);

/* Progress, called from the sweep's thread after each finished request and once when a level
 * starts (done == 0). */
typedef void (*xi_loadgen_progress_fn)(void *ud, int level_idx, int concurrency, int done,
                                       int total, int errors);

/* Run level `level_idx` of the sweep: num_requests requests, `concurrency` in flight. Every
 * request's outcome (success or error) goes to res[num_requests], which the caller frees with
 * xi_loadgen_result_free. A dead server or bad answers are results, not failures: returns -1
 * only when the client itself cannot run (out of memory, libcurl setup). */
int xi_loadgen_run_level(const xi_loadgen_config *c, int level_idx, xi_loadgen_result *res,
                         xi_loadgen_progress_fn progress, void *ud, char *err, size_t errlen);

/* The whole sweep: lv[c->n_levels], each aggregated and freed with xi_loadgen_level_free. */
int xi_loadgen_run(const xi_loadgen_config *c, xi_loadgen_level *lv,
                   xi_loadgen_progress_fn progress, void *ud, char *err, size_t errlen);

/* GET <base>/v1/models and return the first model id (heap), for runs without --model. */
char *xi_loadgen_first_model(const char *url, const char *api_key, double timeout_s, char *err,
                             size_t errlen);

/* ---- reports ----------------------------------------------------------------------------- */

/* The config and every level with every statistic, as a JSON text (heap). */
char *xi_loadgen_json(const xi_loadgen_config *c, const xi_loadgen_level *lv, int n);
/* A header line and one row per level. */
int xi_loadgen_write_csv(FILE *f, const xi_loadgen_level *lv, int n);
/* The human summary: one row per level. */
void xi_loadgen_write_table(FILE *f, const xi_loadgen_level *lv, int n);
/* A self-contained SVG (heap): output throughput, and TTFT p50/p99, against concurrency, in two
 * panels sharing the x axis. `title` may be NULL. */
char *xi_loadgen_svg(const xi_loadgen_level *lv, int n, const char *title);

#endif
