/* server/metrics: histograms with vLLM's bucket bounds, rendered next to the engine's
 * counters. Rendering goes through open_memstream so the text has no size limit. */
#include "server/metrics.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* vLLM's buckets (vllm/v1/metrics/loggers.py) */
static const double ttft_bounds[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                     0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0,
                                     640.0, 2560.0};
static const double itl_bounds[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
                                    0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
static const double latency_bounds[] = {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0,
                                        20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
                                        960.0, 1920.0, 7680.0};
#define MAX_BOUNDS 40

typedef struct histogram {
    const char *name, *help;
    double bounds[MAX_BOUNDS];
    int n_bounds;
    uint64_t counts[MAX_BOUNDS + 1]; /* [n_bounds + 1], not cumulative; last is +Inf */
    double sum;
    uint64_t count;
} histogram;

static const double n_bounds[] = {1, 2, 5, 10, 20};

/* H_TPOT and H_MAX_GEN are hidden (deprecated) unless show_hidden */
enum { H_TTFT, H_ITL, H_E2E, H_QUEUE, H_PREFILL, H_DECODE, H_INFERENCE, H_PROMPT, H_GEN, H_PARAMS_N,
       H_PARAMS_MAX, H_TPOT, H_MAX_GEN, H_COUNT };
enum { R_STOP, R_LENGTH, R_ABORT, R_COUNT };

struct xi_metrics {
    pthread_mutex_t mu;
    char *label;                    /* model_name="..." with the name escaped, owned */
    histogram h[H_COUNT];
    uint64_t success[R_COUNT];
    char cache_info[512];            /* cache_config_info's labels, "" before configure */
    int show_hidden;
};

static void hist_init(histogram *h, const char *name, const char *help, const double *b, int n) {
    h->name = name;
    h->help = help;
    h->n_bounds = n < MAX_BOUNDS ? n : MAX_BOUNDS;
    memcpy(h->bounds, b, (size_t)h->n_bounds * sizeof *b);
}

static void hist_observe(histogram *h, double v) {
    int i = 0;
    while (i < h->n_bounds && v > h->bounds[i]) i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
}

xi_metrics *xi_metrics_new(const char *model_name, int max_model_len) {
    xi_metrics *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    pthread_mutex_init(&m->mu, NULL);
    size_t len = strlen(model_name);
    m->label = malloc(2 * len + 16);
    if (!m->label) {
        xi_metrics_free(m);
        return NULL;
    }
    char *w = m->label + sprintf(m->label, "model_name=\"");
    for (size_t i = 0; i < len; i++) {
        char c = model_name[i];
        if (c == '\\' || c == '"' || c == '\n') *w++ = '\\';
        *w++ = c == '\n' ? 'n' : c;
    }
    strcpy(w, "\"");

    /* token counts: 1, 2, 5, 10, 20, 50, ... up to max_model_len, as vLLM builds them */
    double tok[MAX_BOUNDS];
    int nt = 0;
    for (double mant = 1; nt < MAX_BOUNDS; mant *= 10) {
        static const double steps[] = {1, 2, 5};
        int stop = 0;
        for (int s = 0; s < 3 && nt < MAX_BOUNDS; s++) {
            if (steps[s] * mant > (max_model_len > 0 ? max_model_len : 1)) {
                stop = 1;
                break;
            }
            tok[nt++] = steps[s] * mant;
        }
        if (stop) break;
    }
    hist_init(&m->h[H_TTFT], "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttft_bounds, (int)(sizeof ttft_bounds / sizeof *ttft_bounds));
    hist_init(&m->h[H_ITL], "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itl_bounds, (int)(sizeof itl_bounds / sizeof *itl_bounds));
    int nl = (int)(sizeof latency_bounds / sizeof *latency_bounds);
    hist_init(&m->h[H_E2E], "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", latency_bounds, nl);
    hist_init(&m->h[H_QUEUE], "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", latency_bounds, nl);
    hist_init(&m->h[H_PREFILL], "vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", latency_bounds, nl);
    hist_init(&m->h[H_DECODE], "vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", latency_bounds, nl);
    hist_init(&m->h[H_INFERENCE], "vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", latency_bounds, nl);
    hist_init(&m->h[H_PROMPT], "vllm:request_prompt_tokens", "Number of prefill tokens processed.", tok, nt);
    hist_init(&m->h[H_GEN], "vllm:request_generation_tokens", "Number of generation tokens processed.", tok, nt);
    hist_init(&m->h[H_PARAMS_N], "vllm:request_params_n", "Histogram of the n request parameter.", n_bounds, (int)(sizeof n_bounds / sizeof *n_bounds));
    hist_init(&m->h[H_PARAMS_MAX], "vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", tok, nt);
    hist_init(&m->h[H_TPOT], "vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds. DEPRECATED: use vllm:inter_token_latency_seconds.", itl_bounds, (int)(sizeof itl_bounds / sizeof *itl_bounds));
    hist_init(&m->h[H_MAX_GEN], "vllm:request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens.", tok, nt);
    return m;
}

void xi_metrics_free(xi_metrics *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m->label);
    free(m);
}

void xi_metrics_observe(xi_metrics *m, const xi_metrics_sample *s) {
    pthread_mutex_lock(&m->mu);
    m->success[s->finish == XI_FINISH_STOP ? R_STOP : s->finish == XI_FINISH_LENGTH ? R_LENGTH : R_ABORT]++;
    if (s->ttft >= 0) hist_observe(&m->h[H_TTFT], s->ttft);
    if (s->e2e >= 0) hist_observe(&m->h[H_E2E], s->e2e);
    if (s->queue >= 0) hist_observe(&m->h[H_QUEUE], s->queue);
    if (s->prefill >= 0) hist_observe(&m->h[H_PREFILL], s->prefill);
    if (s->decode >= 0) hist_observe(&m->h[H_DECODE], s->decode);
    if (s->prefill >= 0 && s->decode >= 0) hist_observe(&m->h[H_INFERENCE], s->prefill + s->decode);
    if (s->prefilled) hist_observe(&m->h[H_PROMPT], s->prompt_tokens);
    hist_observe(&m->h[H_GEN], s->generation_tokens);
    pthread_mutex_unlock(&m->mu);
}

void xi_metrics_observe_itl(xi_metrics *m, double seconds) {
    pthread_mutex_lock(&m->mu);
    hist_observe(&m->h[H_ITL], seconds);
    hist_observe(&m->h[H_TPOT], seconds);
    pthread_mutex_unlock(&m->mu);
}

void xi_metrics_observe_params(xi_metrics *m, int n, int max_tokens) {
    pthread_mutex_lock(&m->mu);
    hist_observe(&m->h[H_PARAMS_N], n);
    hist_observe(&m->h[H_PARAMS_MAX], max_tokens);
    pthread_mutex_unlock(&m->mu);
}

void xi_metrics_observe_max_gen(xi_metrics *m, int tokens) {
    pthread_mutex_lock(&m->mu);
    hist_observe(&m->h[H_MAX_GEN], tokens);
    pthread_mutex_unlock(&m->mu);
}

void xi_metrics_configure(xi_metrics *m, const xi_engine_info *info, int show_hidden) {
    pthread_mutex_lock(&m->mu);
    snprintf(m->cache_info, sizeof m->cache_info,
             /* vLLM's CPU backend counts its KV blocks (in host memory) as num_gpu_blocks */
             "block_size=\"%d\",cache_dtype=\"%s\",enable_prefix_caching=\"%s\",num_cpu_blocks=\"None\","
             "num_gpu_blocks=\"%d\",kv_cache_memory_bytes=\"%lld\"", info->block_size,
             info->kv_cache_dtype ? info->kv_cache_dtype : "auto", info->enable_prefix_caching ? "True" : "False",
             info->num_kv_blocks, (long long)info->kv_cache_bytes);
    m->show_hidden = show_hidden;
    pthread_mutex_unlock(&m->mu);
}

static void head(FILE *f, const char *name, const char *type, const char *help) {
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void gauge(FILE *f, const char *label, const char *name, const char *type,
                  const char *help, double v) {
    head(f, name, type, help);
    fprintf(f, "%s{%s} %.17g\n", name, label, v);
}

char *xi_metrics_render(xi_metrics *m, const xi_engine_stats *s) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return NULL;
    const char *L = m->label;
    gauge(f, L, "vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", s->num_running);
    gauge(f, L, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", s->num_waiting);
    gauge(f, L, "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", s->kv_cache_usage);
    gauge(f, L, "vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of number of queried tokens.", (double)s->prefix_cache_queries);
    gauge(f, L, "vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.", (double)s->prefix_cache_hits);
    gauge(f, L, "vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine.", (double)s->num_preemptions);
    gauge(f, L, "vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", (double)s->prompt_tokens_total);
    gauge(f, L, "vllm:generation_tokens_total", "counter", "Number of generation tokens processed.", (double)s->generation_tokens_total);

    pthread_mutex_lock(&m->mu);
    if (m->cache_info[0]) {
        head(f, "vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig.");
        fprintf(f, "vllm:cache_config_info{%s,%s} 1\n", m->cache_info, L);
    }
    if (m->show_hidden)
        gauge(f, L, "vllm:gpu_cache_usage_perc", "gauge", "GPU KV-cache usage. 1 means 100 percent usage. DEPRECATED: use vllm:kv_cache_usage_perc.", s->kv_cache_usage);
    head(f, "vllm:request_success_total", "counter", "Count of successfully processed requests.");
    static const char *const reasons[R_COUNT] = {"stop", "length", "abort"};
    for (int r = 0; r < R_COUNT; r++)
        fprintf(f, "vllm:request_success_total{finished_reason=\"%s\",%s} %llu\n", reasons[r], L,
                (unsigned long long)m->success[r]);
    for (int i = 0; i < H_COUNT; i++) {
        const histogram *h = &m->h[i];
        if ((i == H_TPOT || i == H_MAX_GEN) && !m->show_hidden) continue;
        head(f, h->name, "histogram", h->help);
        uint64_t cum = 0;
        for (int b = 0; b <= h->n_bounds; b++) {
            cum += h->counts[b];
            if (b < h->n_bounds)
                fprintf(f, "%s_bucket{le=\"%.15g\",%s} %llu\n", h->name, h->bounds[b], L, (unsigned long long)cum);
            else
                fprintf(f, "%s_bucket{le=\"+Inf\",%s} %llu\n", h->name, L, (unsigned long long)cum);
        }
        fprintf(f, "%s_sum{%s} %.17g\n%s_count{%s} %llu\n", h->name, L, h->sum, h->name, L,
                (unsigned long long)h->count);
    }
    pthread_mutex_unlock(&m->mu);
    /* counted by the engine, one observation per step */
    head(f, "vllm:iteration_tokens_total", "histogram", "Histogram of number of tokens per engine_step.");
    int64_t cum = 0;
    for (int b = 0; b <= XI_N_ITERATION_TOKEN_BOUNDS; b++) {
        cum += s->iteration_tokens[b];
        if (b < XI_N_ITERATION_TOKEN_BOUNDS)
            fprintf(f, "vllm:iteration_tokens_total_bucket{le=\"%d\",%s} %lld\n", xi_iteration_token_bounds[b], L, (long long)cum);
        else
            fprintf(f, "vllm:iteration_tokens_total_bucket{le=\"+Inf\",%s} %lld\n", L, (long long)cum);
    }
    fprintf(f, "vllm:iteration_tokens_total_sum{%s} %lld\nvllm:iteration_tokens_total_count{%s} %lld\n", L,
            (long long)s->iteration_tokens_sum, L, (long long)cum);
    if (fclose(f)) {
        free(text);
        return NULL;
    }
    return text;
}
