/* cli/cmd_serve: `xinfer serve`, the drop-in for `vllm serve`. Parses the flags, listens
 * first (so /health answers 503 while the weights load), opens and starts the engine, then
 * waits for SIGINT/SIGTERM and shuts down gracefully: stop accepting, let requests in flight
 * finish within --shutdown-timeout, abort the rest, exit 0. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "hub/hub.h"
#include "server/embeddings.h"
#include "server/serve_args.h"
#include "server/tokenizer_info.h"
#include "server/server.h"

static const char *env_get(const char *name) { return getenv(name); }

static int is_dir(const char *path) {
    struct stat st;
    return !stat(path, &st) && S_ISDIR(st.st_mode);
}

/* Weight loading progress as a bar on stderr, only when it is a terminal (logs stay clean). */
static void load_progress(void *user, double fraction) {
    (void)user;
    const int width = 40, done = (int)(fraction * width + 0.5);
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < done ? '#' : '.';
    bar[width] = 0;
    fprintf(stderr, "\rLoading weights [%s] %3.0f%%%s", bar, fraction * 100, fraction >= 1.0 ? "\n" : "");
    fflush(stderr);
}

static void log_startup(const xi_serve_args *a, const xi_engine_info *in) {
    xi_srv_log("model %s (%s), served as '%s'", a->model_path, in->architecture ? in->architecture : "?",
               a->served_names[0]);
    xi_srv_log("dtype %s, kernels %s (%s precision), %d threads", in->dtype ? in->dtype : "?",
               in->kernels ? in->kernels : "?", in->kernel_precision ? in->kernel_precision : "?", in->n_threads);
    xi_srv_log("quantization %s, lm_head %s", in->quantization ? in->quantization : "none",
               in->lm_head_quantization && !strcmp(in->lm_head_quantization, "int8") ? "int8" : "as stored");
    xi_srv_log("KV cache: %d blocks (%d tokens), %.1f MiB, dtype %s", in->num_kv_blocks,
               in->num_kv_blocks * in->block_size, (double)in->kv_cache_bytes / (1 << 20),
               in->kv_cache_dtype ? in->kv_cache_dtype : "?");
    xi_srv_log("Maximum concurrency for %d tokens per request: %.2fx", in->max_model_len, in->max_concurrency);
    xi_srv_log("PagedAttention enabled (block size %d)", in->block_size);
    xi_srv_log(in->enable_prefix_caching ? "Prefix caching enabled" : "Prefix caching disabled");
    if (in->enable_chunked_prefill)
        xi_srv_log("Chunked prefill enabled (max_num_batched_tokens=%d)", in->max_num_batched_tokens);
    else
        xi_srv_log("Chunked prefill disabled (max_num_batched_tokens=%d)", in->max_num_batched_tokens);
}

/* vLLM's periodic line: throughput since the previous one, queue and KV usage. */
static void log_stats(xi_engine *e, xi_engine_stats *prev, double *prev_t) {
    xi_engine_stats s;
    xi_engine_get_stats(e, &s);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double now = (double)ts.tv_sec + ts.tv_nsec * 1e-9, dt = now - *prev_t;
    int busy = s.num_running || s.num_waiting || s.steps != prev->steps;
    if (busy && dt > 0) {
        double hit = s.prefix_cache_queries ? 100.0 * (double)s.prefix_cache_hits / (double)s.prefix_cache_queries : 0;
        xi_srv_log("Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, "
                   "Running: %d reqs, Waiting: %d reqs, KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%",
                   (double)(s.prompt_tokens_total - prev->prompt_tokens_total) / dt,
                   (double)(s.generation_tokens_total - prev->generation_tokens_total) / dt,
                   s.num_running, s.num_waiting, 100 * s.kv_cache_usage, hit);
    }
    *prev = s;
    *prev_t = now;
}

/* --chat-template: a file, or (as vLLM allows) the template itself in one line. */
static char *read_template(const char *arg, char *err, size_t errlen) {
    FILE *f = fopen(arg, "rb");
    if (!f) {
        if (strstr(arg, "{%") || strstr(arg, "{{")) return strdup(arg);
        snprintf(err, errlen, "--chat-template %s: cannot read the file", arg);
        return NULL;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    char buf[65536];
    size_t n;
    while (m && (n = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, n, m);
    int bad = ferror(f);
    fclose(f);
    if (!m || fclose(m) || bad) {
        free(text);
        snprintf(err, errlen, "--chat-template %s: read error", arg);
        return NULL;
    }
    return text;
}

static double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* -tp > 1: a rank is gone; its requests have failed (5xx). Exit through the signal path. */
static volatile int tp_fatal;
static void on_fatal(void *user, const char *msg) {
    (void)user;
    xi_srv_log("%s: shutting down", msg);
    tp_fatal = 1;
    kill(getpid(), SIGTERM);
}

int cmd_serve(int argc, char **argv) {
    xi_serve_args a;
    char err[1024] = "";
    if (xi_serve_args_parse(&a, argc, argv, env_get, is_dir, err, sizeof err)) {
        fprintf(stderr, "xinfer serve: %s\n", err);
        return 2;
    }
    if (a.help) {
        fputs(xi_serve_args_help(), stdout);
        return 0;
    }
    for (int i = 0; i < a.n_notices; i++) fprintf(stderr, "WARN  xinfer serve: %s\n", a.notices[i]);
    if (a.engine.tensor_parallel_size > 1 && xi_tp_rank() < 0)
        return xi_cli_tp_spawn("serve", argc, argv, a.engine.tensor_parallel_size);
    if (a.engine.tensor_parallel_size > 1 && xi_tp_rank() > 0) {
        a.engine.model_dir = a.model_path;
        return xi_cli_tp_other_rank("serve", &a.engine, a.download_dir);
    }
    char *chat_template = NULL;
    if (a.chat_template && !(chat_template = read_template(a.chat_template, err, sizeof err))) {
        fprintf(stderr, "xinfer serve: %s\n", err);
        return 2;
    }
    a.engine.chat_template = chat_template;

    /* Signals are taken synchronously by this thread; every thread started from here on
     * inherits the mask, so none of them is interrupted. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    int port = a.port;
    int fd = xi_server_listen(a.host, a.port, a.uds, &port, err, sizeof err);
    if (fd < 0) {
        fprintf(stderr, "xinfer serve: %s\n", err);
        free(chat_template);
        return 1;
    }
    xi_server_config cfg = {
        .served_names = a.served_names,
        .n_served_names = a.n_served_names,
        .model_path = a.model_path,
        .api_keys = a.api_keys,
        .n_api_keys = a.n_api_keys,
        .max_body_bytes = a.max_body_bytes,
        .log_requests = a.enable_log_requests,
        .tool_parser = a.enable_auto_tool_choice ? a.tool_call_parser : NULL,
        .reasoning_parser = a.reasoning_parser,
        .no_webui = a.no_webui,
        .limit_concurrency = a.limit_concurrency,
        .timeout_keep_alive = a.timeout_keep_alive,
        .timeout_request_read = a.timeout_request_read,
        .max_seqs_per_request = a.max_seqs_per_request,
        .max_parse_bytes = a.max_parse_bytes,
        .allowed_origins = a.allowed_origins,
        .allowed_methods = a.allowed_methods,
        .allowed_headers = a.allowed_headers,
        .allow_credentials = a.allow_credentials,
        .request_id_headers = a.request_id_headers,
        .force_include_usage = a.force_include_usage,
        .server_load_tracking = a.server_load_tracking,
        .show_hidden_metrics = a.show_hidden_metrics != NULL,
        .tokenizer_info = a.tokenizer_info,
        .fingerprint_mode = a.fingerprint_mode,
        .fingerprint_value = a.fingerprint_value,
        .ssl_certfile = a.ssl_certfile,
        .ssl_keyfile = a.ssl_keyfile,
        .ssl_ca_certs = a.ssl_ca_certs,
        .ssl_cert_reqs = a.ssl_cert_reqs,
    };
    xi_server *srv = xi_server_start(&cfg, fd, err, sizeof err);
    if (!srv) {
        fprintf(stderr, "xinfer serve: %s\n", err);
        free(chat_template);
        return 1;
    }
    /* A local folder wins; ORG/NAME[@REV] is pulled into the hub cache on first use. This
     * happens while /health already answers 503 (loading). */
    xi_hub_options ho;
    xi_hub_options_default(&ho);
    ho.cache_dir = a.download_dir;
    char *model_dir = xi_hub_resolve(a.model_path, &ho, err, sizeof err);
    if (!model_dir) {
        fprintf(stderr, "xinfer serve: %s\n", err);
        xi_server_free(srv);
        free(chat_template);
        return 1;
    }
    a.engine.model_dir = model_dir;
    xi_server_set_model_dir(srv, model_dir);
    const int pooling = xi_pooling_resolve(a.runner, model_dir, err, sizeof err);
    if (pooling < 0) {
        fprintf(stderr, "xinfer serve: %s\n", err);
        xi_server_free(srv);
        free(chat_template);
        free(model_dir);
        return 1;
    }
    xi_server_set_pooling(srv, pooling);
    if (pooling) xi_srv_log("runner: pooling (last-token; /v1/embeddings, no completions)");
    a.engine.on_fatal = on_fatal;
    if (isatty(STDERR_FILENO)) a.engine.load_progress = load_progress;
    xi_srv_log("loading %s", model_dir);
    xi_engine *eng = xi_engine_open(&a.engine, err, sizeof err);
    free(chat_template); /* the engine parsed its own copy */
    a.engine.chat_template = NULL;
    if (!eng || xi_engine_start(eng, err, sizeof err)) {
        fprintf(stderr, "xinfer serve: %s\n", err);
        xi_server_free(srv);
        if (eng) xi_engine_close(eng);
        free(model_dir);
        return 1;
    }
    xi_engine_info info;
    xi_engine_get_info(eng, &info);
    log_startup(&a, &info);
    if (xi_server_set_engine(srv, eng, err, sizeof err)) {
        fprintf(stderr, "xinfer serve: %s\n", err);
        xi_server_free(srv);
        xi_engine_close(eng);
        free(model_dir);
        return 1;
    }
    const char *scheme = a.ssl_certfile ? "https" : "http";
    if (a.uds) xi_srv_log("Starting server on unix:%s (%s)", a.uds, scheme);
    else xi_srv_log("Starting server on %s://%s:%d", scheme, a.host, port);
    if (a.ssl_cert_reqs)
        xi_srv_log("TLS: client certificates %s, checked against %s",
                   a.ssl_cert_reqs == 2 ? "required" : "optional", a.ssl_ca_certs);
    if (a.n_api_keys) xi_srv_log("API key required on /v1/*, /tokenize, /detokenize");
    xi_srv_log("Application startup complete.");

    xi_engine_stats prev = {0};
    double prev_t = mono();
    struct timespec tick = {10, 0};
    int sig;
    while ((sig = sigtimedwait(&set, NULL, &tick)) < 0)
        if (!a.disable_log_stats) log_stats(eng, &prev, &prev_t);

    xi_srv_log("Shutting down (signal %d): new requests and /health get 503; %d request(s) in flight get %.0f s",
               sig, xi_server_in_flight(srv), a.shutdown_timeout);
    xi_server_quiesce(srv);
    double deadline = mono() + a.shutdown_timeout;
    struct timespec poll = {0, 50 * 1000000L};
    while (xi_server_in_flight(srv) > 0 && mono() < deadline)
        if (sigtimedwait(&set, NULL, &poll) >= 0) break; /* a second signal: stop waiting */
    if (xi_server_in_flight(srv) > 0) {
        xi_srv_log("aborting %d request(s)", xi_server_in_flight(srv));
        xi_server_abort_all(srv);
        double until = mono() + 2.0;
        while (xi_server_in_flight(srv) > 0 && mono() < until) nanosleep(&poll, NULL);
    }
    xi_server_stop(srv);
    xi_engine_close(eng);
    xi_server_free(srv);
    free(model_dir);
    xi_srv_log("Server stopped.");
    return tp_fatal ? 1 : 0;
}
