/* server/serve_args: `xinfer serve` flags. Names, spellings and defaults follow `vllm serve`
 * so that scripts move over unchanged; flags xinfer does not implement are either accepted
 * with a notice (when ignoring them cannot change what a client sees) or rejected by name. */
#include "server/serve_args.h"
#include "server/config_file.h"
#include "server/cors.h"
#include "server/fingerprint.h"
#include "server/reasoning.h"
#include "server/tool_parse.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static void notice(xi_serve_args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void notice(xi_serve_args *a, const char *fmt, ...) {
    if (a->n_notices >= XI_SERVE_MAX_NOTICES) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->notices[a->n_notices++], sizeof a->notices[0], fmt, ap);
    va_end(ap);
}

/* ---- value parsers: the whole string must be consumed ------------------------------------ */

/* Integers with an optional size suffix as vLLM reads them: k/m/g are powers of 1000,
 * K/M/G powers of 1024 ("64M" = 64 MiB, "32k" = 32000). */
static int parse_i64(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out,
                     char *err, size_t errlen) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || errno) return fail(err, errlen, "%s: expected an integer, got '%s'", flag, s);
    int64_t mul = 1;
    if (*end) {
        switch (*end) {
        case 'k': mul = 1000; break;
        case 'm': mul = 1000000; break;
        case 'g': mul = 1000000000; break;
        case 'K': mul = 1024; break;
        case 'M': mul = 1024 * 1024; break;
        case 'G': mul = 1024LL * 1024 * 1024; break;
        default: return fail(err, errlen, "%s: expected an integer, got '%s'", flag, s);
        }
        if (end[1]) return fail(err, errlen, "%s: expected an integer, got '%s'", flag, s);
    }
    if (v > INT64_MAX / mul || v < INT64_MIN / mul)
        return fail(err, errlen, "%s: '%s' is out of range", flag, s);
    v *= mul;
    if (v < lo || v > hi)
        return fail(err, errlen, "%s: %lld is out of range [%lld, %lld]", flag, v, (long long)lo,
                    (long long)hi);
    *out = v;
    return 0;
}

static int parse_int(const char *flag, const char *s, int lo, int hi, int *out, char *err,
                     size_t errlen) {
    int64_t v;
    if (parse_i64(flag, s, lo, hi, &v, err, errlen)) return -1;
    *out = (int)v;
    return 0;
}

static int parse_double(const char *flag, const char *s, double lo, double hi, double *out,
                        char *err, size_t errlen) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !(v >= lo && v <= hi))
        return fail(err, errlen, "%s: expected a number in [%g, %g], got '%s'", flag, lo, hi, s);
    *out = v;
    return 0;
}

static int one_of(const char *flag, const char *s, const char *const *allowed, char *err,
                  size_t errlen) {
    for (int i = 0; allowed[i]; i++)
        if (!strcmp(s, allowed[i])) return 0;
    char list[256] = "";
    for (int i = 0; allowed[i]; i++) {
        strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
        strncat(list, allowed[i], sizeof list - strlen(list) - 1);
    }
    return fail(err, errlen, "%s: '%s' is not one of %s", flag, s, list);
}

/* ---- the flag table ---------------------------------------------------------------------- */

typedef enum {
    F_MODEL, F_SERVED, F_HOST, F_PORT, F_API_KEY, F_DTYPE, F_QUANT, F_LM_HEAD_QUANT, F_MAX_MODEL_LEN,
    F_MAX_NUM_SEQS, F_MAX_BATCHED, F_KV_DTYPE, F_PREFIX, F_NO_PREFIX, F_CHUNKED, F_NO_CHUNKED,
    F_BLOCK_SIZE, F_KV_BYTES, F_GPU_UTIL, F_SEED, F_GEN_CONFIG, F_CHAT_TEMPLATE, F_TP, F_PP,
    F_THREADS, F_MAX_QUEUE, F_UDS, F_DISABLE_LOG_REQ, F_ENABLE_LOG_REQ, F_DISABLE_LOG_STATS,
    F_DOWNLOAD_DIR, F_TRUST_REMOTE, F_LOAD_FORMAT, F_KERNELS, F_KERNEL_PRECISION, F_MAX_BODY, F_SHUTDOWN, F_HELP,
    F_AUTO_TOOL, F_TOOL_PARSER, F_REASONING, F_OVERRIDE_GEN, F_RUNNER, F_TASK, F_CONFIG, F_KEEP_ALIVE, F_READ_TIMEOUT,
    F_LIMIT_CONC, F_MAX_SEQS_REQ, F_PARSE_BYTES, F_ONLY,
    F_NO_WEBUI, F_CORS_ORIGINS, F_CORS_METHODS, F_CORS_HEADERS, F_CORS_CREDENTIALS, F_REQUEST_ID,
    F_SSL_KEY, F_SSL_CERT, F_SSL_CA, F_SSL_REQS,
    F_FORCE_USAGE, F_LOAD_TRACKING, F_HIDDEN_METRICS, F_TOKENIZER_INFO, F_FINGERPRINT, F_FINGERPRINT_VALUE,
    F_IGNORED, F_REFUSED,
} flag_id;

typedef struct {
    const char *name, *alias;
    flag_id id;
    int takes_value;
    const char *help;               /* NULL: listed among the ignored/refused flags; F_ONLY:
                                       the values ('|'-separated) that are what xinfer does
                                       anyway, any other value being refused */
} flag_def;

static const flag_def flags[] = {
    {"--model", NULL, F_MODEL, 1, "PATH      model folder or ORG/NAME (see MODEL above)"},
    {"--served-model-name", NULL, F_SERVED, 1, "NAME...   names clients use (default: MODEL as given)"},
    {"--host", NULL, F_HOST, 1, "HOST      address to listen on (0.0.0.0)"},
    {"--port", NULL, F_PORT, 1, "PORT      TCP port (8000; 0 picks a free one)"},
    {"--uds", NULL, F_UDS, 1, "PATH      listen on a Unix domain socket instead of host:port"},
    {"--api-key", NULL, F_API_KEY, 1, "KEY       require `Authorization: Bearer KEY` (repeatable; env VLLM_API_KEY, XINFER_API_KEY)"},
    {"--dtype", NULL, F_DTYPE, 1, "TYPE      auto|float16|half|bfloat16|float32|float (auto)"},
    {"--quantization", "-q", F_QUANT, 1, "METHOD    auto (from the checkpoint)|awq|int8|none"},
    {"--lm-head-quantization", NULL, F_LM_HEAD_QUANT, 1, "METHOD  none (16-bit as stored)|int8 (per row, at load)"},
    {"--load-format", NULL, F_LOAD_FORMAT, 1, "FORMAT    auto (copy weights into memory)|mmap|safetensors"},
    {"--max-model-len", NULL, F_MAX_MODEL_LEN, 1, "N         context length (max_position_embeddings)"},
    {"--max-num-seqs", NULL, F_MAX_NUM_SEQS, 1, "N         running requests at most (256)"},
    {"--max-num-batched-tokens", NULL, F_MAX_BATCHED, 1, "N         tokens per engine step (2048)"},
    {"--max-queue-len", NULL, F_MAX_QUEUE, 1, "N         waiting requests at most; more get 503 (unlimited)"},
    {"--kv-cache-dtype", NULL, F_KV_DTYPE, 1, "TYPE      auto|float16|bfloat16|float32 (fp8 is accepted and ignored)"},
    {"--kv-cache-memory-bytes", NULL, F_KV_BYTES, 1, "BYTES     KV cache size, e.g. 4G or 64M (VLLM_CPU_KVCACHE_SPACE GiB, else 4 GiB)"},
    {"--gpu-memory-utilization", NULL, F_GPU_UTIL, 1, "FRAC      KV cache from this fraction of free memory"},
    {"--block-size", NULL, F_BLOCK_SIZE, 1, "N         tokens per KV block (16)"},
    {"--enable-prefix-caching", NULL, F_PREFIX, 0, "          reuse KV blocks of shared prefixes (default)"},
    {"--no-enable-prefix-caching", NULL, F_NO_PREFIX, 0, "          disable prefix caching"},
    {"--enable-chunked-prefill", NULL, F_CHUNKED, 0, "          split long prompts across steps (default)"},
    {"--no-enable-chunked-prefill", NULL, F_NO_CHUNKED, 0, "          disable chunked prefill"},
    {"--seed", NULL, F_SEED, 1, "N         seed for requests without one (0)"},
    {"--generation-config", NULL, F_GEN_CONFIG, 1, "SRC       auto (generation_config.json)|vllm (none)|DIR"},
    {"--override-generation-config", NULL, F_OVERRIDE_GEN, 1, "JSON      request defaults over the generation config, e.g. '{\"temperature\": 0.7}'"},
    {"--chat-template", NULL, F_CHAT_TEMPLATE, 1, "FILE      Jinja chat template instead of tokenizer_config.json's"},
    {"--tensor-parallel-size", "-tp", F_TP, 1, "N         MPI ranks sharing the model (1); > 1 starts mpirun itself, or runs under `mpirun -np N`"},
    {"--pipeline-parallel-size", "-pp", F_PP, 1, "N         must be 1"},
    {"--threads", NULL, F_THREADS, 1, "N         compute threads (default: the physical cores of one NUMA node)"},
    {"--kernels", NULL, F_KERNELS, 1, "NAME      force a kernel variant (ref, avx2, ...)"},
    {"--kernel-precision", NULL, F_KERNEL_PRECISION, 1, "P         int8 (default: quantized weights with 8-bit activations, BF16 with bf16 on AVX-512 BF16) | exact (fp32 activations)"},
    {"--disable-log-requests", NULL, F_DISABLE_LOG_REQ, 0, "          do not log each request (default)"},
    {"--enable-log-requests", NULL, F_ENABLE_LOG_REQ, 0, "          log each request"},
    {"--disable-log-stats", NULL, F_DISABLE_LOG_STATS, 0, "          no periodic throughput lines"},
    {"--download-dir", NULL, F_DOWNLOAD_DIR, 1, "DIR       where hub models are stored"},
    {"--trust-remote-code", NULL, F_TRUST_REMOTE, 0, "          accepted; no remote code is ever run"},
    {"--max-request-body-bytes", NULL, F_MAX_BODY, 1, "BYTES     larger bodies get 413 (32M)"},
    {"--shutdown-timeout", NULL, F_SHUTDOWN, 1, "SECONDS   grace period for in-flight requests on SIGTERM (10)"},
    {"--timeout-keep-alive", NULL, F_KEEP_ALIVE, 1, "SECONDS   idle connections are closed after this (5; env VLLM_HTTP_TIMEOUT_KEEP_ALIVE)"},
    {"--timeout-request-read", NULL, F_READ_TIMEOUT, 1, "SECONDS   time to send a whole request once its first line arrived (30)"},
    {"--limit-concurrency", NULL, F_LIMIT_CONC, 1, "N         open connections; past it idle ones are closed, else 503 (from ulimit -n)"},
    {"--max-seqs-per-request", NULL, F_MAX_SEQS_REQ, 1, "N         prompts x n of one request; more is a 400 (1024)"},
    {"--max-parse-bytes-in-flight", NULL, F_PARSE_BYTES, 1, "BYTES     request bodies being parsed at once, weighted by their JSON; more get 503 (1G)"},
    {"--enable-auto-tool-choice", NULL, F_AUTO_TOOL, 0, "          parse tool calls out of chat outputs (needs --tool-call-parser)"},
    {"--tool-call-parser", NULL, F_TOOL_PARSER, 1, "NAME      the models' tool-call format: hermes (Qwen2.5, Qwen3), llama3_json (Llama 3.x)"},
    {"--reasoning-parser", NULL, F_REASONING, 1, "NAME      split <think> reasoning from chat answers: deepseek_r1, qwen3"},
    {"--runner", NULL, F_RUNNER, 1, "KIND      auto (pooling for a sentence-transformers last-token folder)|generate|pooling (/v1/embeddings)"},
    {"--task", NULL, F_TASK, 1, "TASK      older spelling of --runner: auto|generate|embed (= pooling)"},
    {"--no-webui", NULL, F_NO_WEBUI, 0, "          no chat page (/) or dashboard (/dashboard)"},
    {"--allowed-origins", NULL, F_CORS_ORIGINS, 1, "JSON      CORS origins allowed, e.g. '[\"https://a.example\"]' ([\"*\"])"},
    {"--allowed-methods", NULL, F_CORS_METHODS, 1, "JSON      CORS methods allowed ([\"*\"])"},
    {"--allowed-headers", NULL, F_CORS_HEADERS, 1, "JSON      CORS request headers allowed ([\"*\"])"},
    {"--allow-credentials", NULL, F_CORS_CREDENTIALS, 0, "          CORS answers allow credentials"},
    {"--ssl-certfile", NULL, F_SSL_CERT, 1, "FILE      serve HTTPS with this PEM certificate (chain)"},
    {"--ssl-keyfile", NULL, F_SSL_KEY, 1, "FILE      its PEM private key, unencrypted (default: in --ssl-certfile)"},
    {"--ssl-ca-certs", NULL, F_SSL_CA, 1, "FILE      PEM CAs that sign client certificates"},
    {"--ssl-cert-reqs", NULL, F_SSL_REQS, 1, "N         client certificates: 0 none (default), 1 optional, 2 required"},
    {"--enable-request-id-headers", NULL, F_REQUEST_ID, 0, "          answer with X-Request-Id (the client's, or a new one)"},
    {"--enable-force-include-usage", NULL, F_FORCE_USAGE, 0, "          every stream ends with a usage chunk, asked for or not"},
    {"--enable-server-load-tracking", NULL, F_LOAD_TRACKING, 0, "          GET /load counts the requests being answered"},
    {"--show-hidden-metrics-for-version", NULL, F_HIDDEN_METRICS, 1, "X.Y       /metrics also shows the deprecated metrics (vllm:gpu_cache_usage_perc, ...)"},
    {"--enable-tokenizer-info-endpoint", NULL, F_TOKENIZER_INFO, 0, "          GET /tokenizer_info: the tokenizer's configuration"},
    {"--fingerprint-mode", NULL, F_FINGERPRINT, 1, "MODE      system_fingerprint: full (xinfer-VERSION-HASH8)|hash|custom|none"},
    {"--fingerprint-value", NULL, F_FINGERPRINT_VALUE, 1, "TEXT      the system_fingerprint of --fingerprint-mode custom"},
    {"--config", NULL, F_CONFIG, 1, "FILE      YAML file of these flags, keys without the -- (`max-model-len: 8192`); the command line overrides it"},
    {"--help", "-h", F_HELP, 0, "          this text"},
    /* vLLM flags that tune things xinfer does not have: accepted, changing nothing. */
    {"--enforce-eager", NULL, F_IGNORED, 0, NULL},
    {"--swap-space", NULL, F_IGNORED, 1, NULL},
    {"--enable-reasoning", NULL, F_IGNORED, 0, NULL}, /* older vLLM: implied by --reasoning-parser */
    {"--disable-custom-all-reduce", NULL, F_IGNORED, 0, NULL},
    {"--distributed-executor-backend", NULL, F_IGNORED, 1, NULL},
    {"--disable-frontend-multiprocessing", NULL, F_IGNORED, 0, NULL},
    {"--disable-fastapi-docs", NULL, F_IGNORED, 0, NULL},
    {"--disable-uvicorn-access-log", NULL, F_IGNORED, 0, NULL},
    {"--uvicorn-log-level", NULL, F_IGNORED, 1, NULL},
    {"--max-log-len", NULL, F_IGNORED, 1, NULL},
    {"--max-seq-len-to-capture", NULL, F_IGNORED, 1, NULL},
    {"--compilation-config", "-O", F_IGNORED, 1, NULL},
    {"--num-scheduler-steps", NULL, F_IGNORED, 1, NULL},
    {"--use-v2-block-manager", NULL, F_IGNORED, 0, NULL},
    {"--enable-prompt-tokens-details", NULL, F_IGNORED, 0, NULL},
    {"--device", NULL, F_IGNORED, 1, NULL},
    {"--tokenizer-mode", NULL, F_IGNORED, 1, NULL},
    {"--cpu-offload-gb", NULL, F_IGNORED, 1, NULL},
    {"--max-logprobs", NULL, F_IGNORED, 1, NULL},
    {"--response-role", NULL, F_IGNORED, 1, NULL},
    {"--root-path", NULL, F_IGNORED, 1, NULL},
    {"--disable-sliding-window", NULL, F_IGNORED, 0, NULL},
    {"--guided-decoding-backend", NULL, F_IGNORED, 1, NULL}, /* structured outputs are a 400 */
    {"--limit-mm-per-prompt", NULL, F_IGNORED, 1, NULL},      /* text-only models */
    {"--max-num-partial-prefills", NULL, F_IGNORED, 1, NULL},
    {"--max-long-partial-prefills", NULL, F_IGNORED, 1, NULL},
    {"--long-prefill-token-threshold", NULL, F_IGNORED, 1, NULL},
    /* Accepted with the value that describes what xinfer does; another value is refused. */
    {"--scheduling-policy", NULL, F_ONLY, 1, "fcfs"},
    {"--preemption-mode", NULL, F_ONLY, 1, "recompute"},
    {"--config-format", NULL, F_ONLY, 1, "auto|hf"},
    {"--chat-template-content-format", NULL, F_ONLY, 1, "auto|string"},
    /* Ignoring these would silently change what clients get (plaintext instead of TLS,
     * certificates not reloaded, another tokenizer or revision, adapters not applied): refused
     * by name. */
    {"--enable-ssl-refresh", NULL, F_REFUSED, 0, NULL},
    {"--tokenizer", NULL, F_REFUSED, 1, NULL},
    {"--revision", NULL, F_REFUSED, 1, NULL},
    {"--enable-lora", NULL, F_REFUSED, 0, NULL},
    {"--lora-modules", NULL, F_REFUSED, 1, NULL},
    {"--speculative-config", NULL, F_REFUSED, 1, NULL},
    {"--hf-overrides", NULL, F_REFUSED, 1, NULL},
    {"--rope-scaling", NULL, F_REFUSED, 1, NULL},
    {"--rope-theta", NULL, F_REFUSED, 1, NULL},
    {"--return-tokens-as-token-ids", NULL, F_REFUSED, 0, NULL},
    {"--middleware", NULL, F_REFUSED, 1, NULL},
};

/* --override-generation-config: a JSON object of request defaults, as vLLM takes it. */
static int parse_overrides(xi_engine_params *e, const char *v, char *err, size_t errlen) {
    json_error_t je;
    json_t *o = json_loads(v, 0, &je);
    if (!json_is_object(o)) {
        json_decref(o);
        return fail(err, errlen, "--override-generation-config: a JSON object, e.g. '{\"temperature\": 0.7}'");
    }
    const char *key;
    json_t *val;
    int rc = 0;
    json_object_foreach(o, key, val) {
        const double x = json_number_value(val);
        const int num = json_is_number(val);
        if (!strcmp(key, "temperature") && num && x >= 0) e->override_temperature = (float)x;
        else if (!strcmp(key, "top_p") && num && x > 0 && x <= 1) e->override_top_p = (float)x;
        else if (!strcmp(key, "min_p") && num && x >= 0 && x <= 1) e->override_min_p = (float)x;
        else if (!strcmp(key, "repetition_penalty") && num && x > 0) e->override_repetition_penalty = (float)x;
        else if (!strcmp(key, "top_k") && json_is_integer(val) && json_integer_value(val) >= -1 &&
                 json_integer_value(val) <= 1 << 30)
            e->override_top_k = (int)json_integer_value(val);
        else {
            rc = fail(err, errlen, "--override-generation-config: %s: %s", key,
                      !strcmp(key, "temperature") || !strcmp(key, "top_p") || !strcmp(key, "min_p") ||
                              !strcmp(key, "repetition_penalty") || !strcmp(key, "top_k")
                          ? "value out of range"
                          : "not supported (temperature, top_p, top_k, min_p, repetition_penalty)");
            break;
        }
    }
    json_decref(o);
    return rc;
}

static const flag_def *find_flag(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        if (strlen(flags[i].name) == len && !strncmp(flags[i].name, name, len)) return &flags[i];
        if (flags[i].alias && strlen(flags[i].alias) == len && !strncmp(flags[i].alias, name, len))
            return &flags[i];
    }
    return NULL;
}

const char *xi_serve_args_help(void) {
    static char text[16384];
    if (text[0]) return text;
    size_t n = 0;
    n += (size_t)snprintf(text + n, sizeof text - n,
        "usage: xinfer serve [MODEL] [--model PATH] [flags]\n\n"
        "OpenAI-compatible HTTP server; flags use `vllm serve`'s names, as --flag=value or --flag value.\n"
        "MODEL is a model folder, or a hub name ORG/NAME[@REV] pulled into the cache on first use\n"
        "(HF_ENDPOINT, HF_TOKEN; ModelScope with VLLM_USE_MODELSCOPE=1). With both MODEL and\n"
        "--model, when MODEL is not a folder, --model is the path and MODEL the served name.\n\n");
    for (size_t i = 0; i < sizeof flags / sizeof flags[0] && n < sizeof text; i++) {
        if (!flags[i].help || flags[i].id == F_ONLY) continue;
        char name[64];
        snprintf(name, sizeof name, "%s%s%s", flags[i].alias ? flags[i].alias : "",
                 flags[i].alias ? ", " : "", flags[i].name);
        n += (size_t)snprintf(text + n, sizeof text - n, "  %-30s %s\n", name, flags[i].help);
    }
    if (n < sizeof text) n += (size_t)snprintf(text + n, sizeof text - n, "\naccepted and ignored (vLLM compatibility):\n ");
    for (size_t i = 0, col = 1; i < sizeof flags / sizeof flags[0] && n < sizeof text; i++) {
        if (flags[i].id != F_IGNORED) continue;
        size_t w = strlen(flags[i].name) + 1;
        if (col + w > 96) {
            n += (size_t)snprintf(text + n, sizeof text - n, "\n ");
            col = 1;
        }
        if (n < sizeof text) n += (size_t)snprintf(text + n, sizeof text - n, " %s", flags[i].name);
        col += w;
    }
    if (n < sizeof text) n += (size_t)snprintf(text + n, sizeof text - n, "\naccepted with only the value xinfer follows:");
    for (size_t i = 0; i < sizeof flags / sizeof flags[0] && n < sizeof text; i++)
        if (flags[i].id == F_ONLY)
            n += (size_t)snprintf(text + n, sizeof text - n, " %s %s", flags[i].name, flags[i].help);
    if (n < sizeof text) n += (size_t)snprintf(text + n, sizeof text - n, "\nnot supported (an error):");
    for (size_t i = 0; i < sizeof flags / sizeof flags[0] && n < sizeof text; i++)
        if (flags[i].id == F_REFUSED) n += (size_t)snprintf(text + n, sizeof text - n, " %s", flags[i].name);
    if (n < sizeof text) n += (size_t)snprintf(text + n, sizeof text - n, "\n");
    return text;
}

static const char *const dtypes[] = {"auto", "float16", "half", "bfloat16", "float32", "float", NULL};
static const char *const kv_dtypes[] = {"auto", "float16", "bfloat16", "float32", "fp8",
                                        "fp8_e4m3", "fp8_e5m2", NULL};
static const char *const quants[] = {"auto", "awq", "awq_marlin", "int8", "none", NULL};
static const char *const lm_head_quants[] = {"none", "int8", NULL};
static const char *const load_formats[] = {"auto", "mmap", "safetensors", NULL};
static const char *const runners[] = {"auto", "generate", "pooling", NULL};
static const char *const tasks[] = {"auto", "generate", "embed", "embedding", NULL};

static const char *canonical_dtype(const char *s) {
    if (!strcmp(s, "half")) return "float16";
    if (!strcmp(s, "float")) return "float32";
    return s;
}

/* Apply one flag with its value (NULL for booleans). */
static int apply(xi_serve_args *a, const flag_def *f, const char *flag, const char *v,
                 const char **model_flag, char *err, size_t errlen) {
    xi_engine_params *e = &a->engine;
    int64_t i64;
    switch (f->id) {
    case F_MODEL: *model_flag = v; return 0;
    case F_SERVED:
        if (a->n_served_names >= XI_SERVE_MAX_NAMES) return fail(err, errlen, "%s: too many names", flag);
        a->served_names[a->n_served_names++] = v;
        return 0;
    case F_HOST: a->host = v; return 0;
    case F_PORT: return parse_int(flag, v, 0, 65535, &a->port, err, errlen);
    case F_UDS: a->uds = v; return 0;
    case F_API_KEY:
        if (!*v) return fail(err, errlen, "%s: empty key", flag);
        if (a->n_api_keys >= XI_SERVE_MAX_KEYS) return fail(err, errlen, "%s: too many keys", flag);
        a->api_keys[a->n_api_keys++] = v;
        return 0;
    case F_DTYPE:
        if (one_of(flag, v, dtypes, err, errlen)) return -1;
        e->dtype = canonical_dtype(v);
        return 0;
    case F_KV_DTYPE:
        if (one_of(flag, v, kv_dtypes, err, errlen)) return -1;
        if (!strncmp(v, "fp8", 3)) {
            notice(a, "--kv-cache-dtype %s is ignored: fp8 KV cache is not implemented, using auto", v);
            e->kv_cache_dtype = "auto";
        } else {
            e->kv_cache_dtype = v;
        }
        return 0;
    case F_QUANT:
        if (one_of(flag, v, quants, err, errlen)) return -1;
        if (!strcmp(v, "awq_marlin")) {
            notice(a, "--quantization awq_marlin runs as awq (the same checkpoint format)");
            v = "awq";
        }
        e->quantization = v;
        return 0;
    case F_LM_HEAD_QUANT:
        if (one_of(flag, v, lm_head_quants, err, errlen)) return -1;
        e->lm_head_quantization = v;
        return 0;
    case F_LOAD_FORMAT:
        if (one_of(flag, v, load_formats, err, errlen)) return -1;
        e->load_format = !strcmp(v, "safetensors") ? "auto" : v;
        return 0;
    case F_MAX_MODEL_LEN: return parse_int(flag, v, 1, 1 << 30, &e->max_model_len, err, errlen);
    case F_MAX_NUM_SEQS: return parse_int(flag, v, 1, 1 << 20, &e->max_num_seqs, err, errlen);
    case F_MAX_BATCHED: return parse_int(flag, v, 1, 1 << 30, &e->max_num_batched_tokens, err, errlen);
    case F_MAX_QUEUE: return parse_int(flag, v, 0, 1 << 30, &e->max_queue_len, err, errlen);
    case F_BLOCK_SIZE: return parse_int(flag, v, 1, 1024, &e->block_size, err, errlen);
    case F_KV_BYTES:
        return parse_i64(flag, v, 1, INT64_MAX, &e->kv_cache_memory_bytes, err, errlen);
    case F_GPU_UTIL:
        return parse_double(flag, v, 0.0, 1.0, &e->gpu_memory_utilization, err, errlen);
    case F_PREFIX: e->enable_prefix_caching = 1; return 0;
    case F_NO_PREFIX: e->enable_prefix_caching = 0; return 0;
    case F_CHUNKED: e->enable_chunked_prefill = 1; return 0;
    case F_NO_CHUNKED: e->enable_chunked_prefill = 0; return 0;
    case F_SEED:
        if (parse_i64(flag, v, INT64_MIN, INT64_MAX, &i64, err, errlen)) return -1;
        e->seed = (uint64_t)i64;
        return 0;
    case F_GEN_CONFIG: e->generation_config = v; return 0;
    case F_CHAT_TEMPLATE: a->chat_template = v; return 0;
    case F_TP: return parse_int(flag, v, 1, 64, &e->tensor_parallel_size, err, errlen);
    case F_PP: {
        int n;
        if (parse_int(flag, v, 1, 1 << 16, &n, err, errlen)) return -1;
        if (n != 1)
            return fail(err, errlen, "%s %d: %s parallelism is not implemented yet; use 1", flag, n,
                        f->id == F_TP ? "tensor" : "pipeline");
        return 0;
    }
    case F_THREADS: return parse_int(flag, v, 0, 4096, &e->n_threads, err, errlen);
    case F_KERNELS: e->kernels = v; return 0;
    case F_KERNEL_PRECISION: e->kernel_precision = v; return 0;
    case F_DISABLE_LOG_REQ: a->enable_log_requests = 0; return 0;
    case F_ENABLE_LOG_REQ: a->enable_log_requests = 1; return 0;
    case F_DISABLE_LOG_STATS: a->disable_log_stats = 1; return 0;
    case F_DOWNLOAD_DIR: a->download_dir = v; return 0; /* the hub cache for ORG/NAME */
    case F_TRUST_REMOTE: return 0; /* nothing remote is ever executed */
    case F_MAX_BODY: return parse_i64(flag, v, 1024, INT64_MAX, &a->max_body_bytes, err, errlen);
    case F_SHUTDOWN: return parse_double(flag, v, 0, 86400, &a->shutdown_timeout, err, errlen);
    case F_KEEP_ALIVE: return parse_double(flag, v, 0.1, 86400, &a->timeout_keep_alive, err, errlen);
    case F_READ_TIMEOUT: return parse_double(flag, v, 0.1, 86400, &a->timeout_request_read, err, errlen);
    case F_LIMIT_CONC: return parse_int(flag, v, 1, 1 << 20, &a->limit_concurrency, err, errlen);
    case F_MAX_SEQS_REQ: return parse_int(flag, v, 1, 1 << 20, &a->max_seqs_per_request, err, errlen);
    case F_PARSE_BYTES: return parse_i64(flag, v, 1 << 20, INT64_MAX, &a->max_parse_bytes, err, errlen);
    case F_HELP: a->help = 1; return 0;
    case F_NO_WEBUI: a->no_webui = 1; return 0;
    case F_CORS_ORIGINS: a->allowed_origins = v; return xi_cors_check_list(flag, v, err, errlen);
    case F_CORS_METHODS: a->allowed_methods = v; return xi_cors_check_list(flag, v, err, errlen);
    case F_CORS_HEADERS: a->allowed_headers = v; return xi_cors_check_list(flag, v, err, errlen);
    case F_CORS_CREDENTIALS: a->allow_credentials = 1; return 0;
    case F_REQUEST_ID: a->request_id_headers = 1; return 0;
    case F_SSL_CERT: a->ssl_certfile = v; return 0;
    case F_SSL_KEY: a->ssl_keyfile = v; return 0;
    case F_SSL_CA: a->ssl_ca_certs = v; return 0;
    case F_SSL_REQS: return parse_int(flag, v, 0, 2, &a->ssl_cert_reqs, err, errlen);
    case F_FORCE_USAGE: a->force_include_usage = 1; return 0;
    case F_LOAD_TRACKING: a->server_load_tracking = 1; return 0;
    case F_TOKENIZER_INFO: a->tokenizer_info = 1; return 0;
    case F_FINGERPRINT:
        if (!xi_fingerprint_mode_ok(v)) return fail(err, errlen, "%s %s: full, hash, custom or none", flag, v);
        a->fingerprint_mode = v;
        return 0;
    case F_FINGERPRINT_VALUE: a->fingerprint_value = v; return 0;
    case F_HIDDEN_METRICS: {
        unsigned major, minor;
        char end;
        if (sscanf(v, "%u.%u%c", &major, &minor, &end) != 2)
            return fail(err, errlen, "%s %s: a version MAJOR.MINOR, e.g. 0.10", flag, v);
        a->show_hidden_metrics = v;
        return 0;
    }
    case F_AUTO_TOOL: a->enable_auto_tool_choice = 1; return 0;
    case F_REASONING:
        if (!xi_reasoning_parser_supported(v))
            return fail(err, errlen, "--reasoning-parser %s: not supported (supported: %s)", v,
                        xi_reasoning_parser_names());
        a->reasoning_parser = v;
        return 0;
    case F_TOOL_PARSER:
        if (!xi_tool_parser_supported(v))
            return fail(err, errlen, "--tool-call-parser %s: not supported (supported: %s)", v,
                        xi_tool_parser_names());
        a->tool_call_parser = v;
        return 0;
    case F_IGNORED:
        notice(a, "%s%s%s is accepted for vLLM compatibility and ignored", f->name, v ? " " : "",
               v ? v : "");
        return 0;
    case F_REFUSED: return fail(err, errlen, "%s is not supported by xinfer", f->name);
    case F_ONLY: {
        const size_t n = strlen(v);
        for (const char *o = f->help; *o;) {
            const char *bar = strchr(o, '|');
            const size_t k = bar ? (size_t)(bar - o) : strlen(o);
            if (k == n && !strncmp(o, v, n)) return 0;
            o += k + (bar ? 1 : 0);
        }
        return fail(err, errlen, "%s %s is not supported by xinfer (it does %s)", f->name, v, f->help);
    }
    case F_OVERRIDE_GEN: return parse_overrides(e, v, err, errlen);
    case F_RUNNER:
        if (one_of(flag, v, runners, err, errlen)) return -1;
        a->runner = v;
        return 0;
    case F_TASK:
        if (one_of(flag, v, tasks, err, errlen)) return -1;
        a->runner = !strncmp(v, "embed", 5) ? "pooling" : v;
        return 0;
    case F_CONFIG: return 0; /* read before the flags, see merge_config */
    }
    return fail(err, errlen, "%s: unhandled flag", flag);
}

/* What a --config key takes: the flag's kind, by the table. */
static xi_cfg_kind config_kind(const char *flag) {
    const flag_def *f = find_flag(flag, strlen(flag));
    if (!f || f->id == F_HELP || f->id == F_CONFIG || strncmp(flag, "--", 2)) return XI_CFG_UNKNOWN;
    if (!f->takes_value) return XI_CFG_BOOL;
    return f->id == F_SERVED ? XI_CFG_LIST : f->id == F_API_KEY ? XI_CFG_REPEAT : XI_CFG_VALUE;
}

/* --config FILE: a->cfg_argv becomes argv[0], the file's tokens, argv[1..]. Returns the
 * index of the first command-line token in it (1 without --config), or -1. */
static int merge_config(xi_serve_args *a, int *argc, char ***argv, char *err, size_t errlen) {
    const char *file = NULL;
    for (int i = 1; i < *argc; i++) {
        const char *f = !strncmp((*argv)[i], "--config=", 9) ? (*argv)[i] + 9
                        : !strcmp((*argv)[i], "--config") && i + 1 < *argc ? (*argv)[i + 1] : NULL;
        if (f && file) return fail(err, errlen, "--config: given twice");
        if (f) file = f;
    }
    if (!file) return 1;
    int n = xi_config_file_tokens(file, config_kind, a->cfg_argv + 1, XI_SERVE_MAX_ARGS - 1,
                                  a->cfg_text, sizeof a->cfg_text, err, errlen);
    if (n < 0) return -1;
    if (n + *argc > XI_SERVE_MAX_ARGS) return fail(err, errlen, "--config %s: too many flags", file);
    a->cfg_argv[0] = (*argv)[0];
    for (int i = 1; i < *argc; i++) a->cfg_argv[n + i] = (*argv)[i];
    *argc += n;
    *argv = a->cfg_argv;
    return n + 1;
}

int xi_serve_args_parse(xi_serve_args *a, int argc, char **argv,
                        const char *(*env_get)(const char *name),
                        int (*dir_exists)(const char *path), char *err, size_t errlen) {
    memset(a, 0, sizeof *a);
    xi_engine_params_default(&a->engine);
    a->host = "0.0.0.0";
    a->port = 8000;
    a->runner = "auto";
    a->max_body_bytes = 32LL << 20;
    a->shutdown_timeout = 10.0;
    a->timeout_keep_alive = 5.0;
    a->timeout_request_read = 30.0;
    a->max_seqs_per_request = 1024;
    a->max_parse_bytes = 1LL << 30;
    const char *ka = env_get("VLLM_HTTP_TIMEOUT_KEEP_ALIVE");
    if (ka && *ka && parse_double("VLLM_HTTP_TIMEOUT_KEEP_ALIVE", ka, 0.1, 86400, &a->timeout_keep_alive, err, errlen))
        return -1;
    const char *positional = NULL, *model_flag = NULL;
    const int cli = merge_config(a, &argc, &argv, err, errlen);
    if (cli < 0) return -1;
    int served_from_file = 0, keys_from_file = 0, model_from_file = 0;

    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (arg[0] != '-' || !arg[1]) {
            if (positional) return fail(err, errlen, "unexpected argument '%s' (MODEL is already '%s')", arg, positional);
            positional = arg;
            continue;
        }
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        const flag_def *f = find_flag(arg, len);
        if (!f) return fail(err, errlen, "unknown flag '%.*s' (see `xinfer serve --help`)", (int)len, arg);
        char flag[64];
        snprintf(flag, sizeof flag, "%.*s", (int)len, arg);
        if (!f->takes_value) {
            if (eq) return fail(err, errlen, "%s takes no value", flag);
            if (apply(a, f, flag, NULL, &model_flag, err, errlen)) return -1;
            continue;
        }
        const char *v;
        if (eq) v = eq + 1;
        else if (i + 1 < argc) v = argv[++i];
        else return fail(err, errlen, "%s needs a value", flag);
        /* A list flag on the command line replaces the config file's list. */
        const int from_file = i < cli;
        if (f->id == F_SERVED && served_from_file && !from_file) a->n_served_names = served_from_file = 0;
        if (f->id == F_API_KEY && keys_from_file && !from_file) a->n_api_keys = keys_from_file = 0;
        served_from_file |= f->id == F_SERVED && from_file;
        keys_from_file |= f->id == F_API_KEY && from_file;
        if (f->id == F_MODEL) model_from_file = from_file;
        if (apply(a, f, flag, v, &model_flag, err, errlen)) return -1;
        /* nargs="+": further names until the next flag (or the end of the config's tokens) */
        while (f->id == F_SERVED && !eq && i + 1 < (from_file ? cli : argc) && argv[i + 1][0] != '-')
            if (apply(a, f, flag, argv[++i], &model_flag, err, errlen)) return -1;
    }
    if (a->help) return 0;
    if (positional && model_from_file) model_flag = NULL; /* MODEL on the command line wins */
    if (a->enable_auto_tool_choice && !a->tool_call_parser)
        return fail(err, errlen, "--enable-auto-tool-choice needs --tool-call-parser (supported: %s)",
                    xi_tool_parser_names());
    if (!a->ssl_certfile && (a->ssl_keyfile || a->ssl_ca_certs || a->ssl_cert_reqs))
        return fail(err, errlen, "%s needs --ssl-certfile",
                    a->ssl_keyfile ? "--ssl-keyfile" : a->ssl_ca_certs ? "--ssl-ca-certs" : "--ssl-cert-reqs");
    if (a->ssl_cert_reqs && !a->ssl_ca_certs)
        return fail(err, errlen, "--ssl-cert-reqs %d needs --ssl-ca-certs (the CAs that sign client certificates)",
                    a->ssl_cert_reqs);
    if (a->fingerprint_mode && !strcmp(a->fingerprint_mode, "custom") && !a->fingerprint_value)
        return fail(err, errlen, "--fingerprint-mode custom needs --fingerprint-value");

    /* MODEL and --model: `vllm serve NAME --model PATH` means "serve PATH as NAME". */
    const char *served = NULL;
    if (positional && model_flag) {
        if (!dir_exists(positional) && strcmp(positional, model_flag)) {
            a->model_path = model_flag;
            served = positional;
            notice(a, "MODEL '%s' is not a folder: serving --model %s under the name '%s'",
                   positional, model_flag, positional);
        } else {
            a->model_path = served = positional;
            if (strcmp(positional, model_flag))
                notice(a, "both MODEL '%s' and --model '%s' given: the positional MODEL wins",
                       positional, model_flag);
        }
    } else if (positional || model_flag) {
        a->model_path = served = positional ? positional : model_flag;
    } else {
        return fail(err, errlen, "no model: give MODEL or --model PATH (see `xinfer serve --help`)");
    }
    if (!a->n_served_names) a->served_names[a->n_served_names++] = served;

    for (int k = 0; k < 2; k++) {
        const char *v = env_get(k ? "XINFER_API_KEY" : "VLLM_API_KEY");
        if (v && *v && a->n_api_keys < XI_SERVE_MAX_KEYS) a->api_keys[a->n_api_keys++] = v;
    }
    a->engine.model_dir = a->model_path;
    return 0;
}
