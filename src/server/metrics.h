/* server/metrics: /metrics in Prometheus text format under vLLM's metric names and labels,
 * so dashboards built for `vllm serve` work unchanged. Gauges and counters come from
 * xi_engine_get_stats; the latency and size histograms are kept here from the timings of each
 * finished request. Thread-safe: observe and render may run on any thread. */
#ifndef XI_SERVER_METRICS_H
#define XI_SERVER_METRICS_H

#include "xinfer.h"

typedef struct xi_metrics xi_metrics;

/* What one finished sample contributes (seconds and token counts). */
typedef struct xi_metrics_sample {
    xi_finish_reason finish;
    double ttft, e2e, queue, prefill, decode;  /* < 0: not reached (e.g. aborted in queue) */
    int prompt_tokens, generation_tokens;
    int prefilled;                  /* its prompt was computed: only then it counts in
                                       request_prompt_tokens, as in prompt_tokens_total */
} xi_metrics_sample;

/* max_model_len bounds the token-count histograms' buckets (1, 2, 5, 10, 20, 50, ...). */
xi_metrics *xi_metrics_new(const char *model_name, int max_model_len);
void xi_metrics_free(xi_metrics *m);
void xi_metrics_observe(xi_metrics *m, const xi_metrics_sample *s);
void xi_metrics_observe_itl(xi_metrics *m, double seconds);
/* One request (one prompt) as submitted: its n and max_tokens (request_params_*). */
void xi_metrics_observe_params(xi_metrics *m, int n, int max_tokens);
/* One request's samples all finished: the most tokens one of them generated (the hidden
 * request_max_num_generation_tokens). */
void xi_metrics_observe_max_gen(xi_metrics *m, int tokens);
/* vllm:cache_config_info's labels; show_hidden: also the deprecated metrics vLLM's
 * --show-hidden-metrics-for-version brings back (its Grafana dashboard still reads them). */
void xi_metrics_configure(xi_metrics *m, const xi_engine_info *info, int show_hidden);
/* The whole exposition text, malloc'ed. */
char *xi_metrics_render(xi_metrics *m, const xi_engine_stats *s);

#endif
