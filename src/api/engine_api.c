/* api/engine_api: implements include/xinfer.h. Owns the model, tokenizer, KV store and the
 * engine core; the only code that crosses threads. Submitters build a request group on their
 * own thread and queue it (with aborts) under a mutex; the engine thread (or the caller of
 * xi_engine_step) drains the queue at the start of each step and is the only thread that
 * touches the core. Stats are a snapshot copied under the mutex after each step. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/engine_tp.h"
#include "base/base.h"
#include "engine/core.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_gguf.h"
#include "xinfer.h"

struct xi_engine {
    xi_engine_params p;       /* string fields point at owned copies below */
    char *model_dir, *generation_config;
    xi_engine_info info;
    char kv_dtype_name[16], quant_name[16];
    xi_model *model;
    xi_tokenizer *tok;
    xi_chat_template *chat;   /* parsed tokenizer_config.json chat_template, or NULL */
    char chat_err[256];       /* why chat is NULL: none in the model, or its parse error */
    xi_kv_store *kv;
    xi_comm *comm;            /* -tp > 1: the MPI communicator; freed after the model */
    int fatal;                /* a rank is gone (on_fatal was called) */
    xi_core core;
    int core_ok;
    /* request defaults (generation_config.json unless "vllm"; < 0 / < -1 when absent) */
    float def_temperature, def_top_p, def_min_p, def_repetition_penalty;
    int def_top_k;
    int32_t eos[XI_MAX_EOS];
    int n_eos;

    pthread_mutex_t mu;       /* guards everything below */
    pthread_cond_t cv;        /* engine thread sleeps here when idle */
    xi_group *pend_head, *pend_tail;
    int n_pending;
    /* posted ids [cap_aborts], and the buffer drain swapped out [cap_work]: the engine thread
     * reads that one outside the mutex, so only drain (under it) may touch either's pointer */
    int64_t *aborts, *aborts_work;
    int n_aborts, cap_aborts, cap_work;
    int64_t next_id;
    xi_engine_stats stats;
    int started, stopping;
    pthread_t thread;
};

/* ---- defaults and names ---------------------------------------------------------------- */

void xi_engine_params_default(xi_engine_params *p) {
    memset(p, 0, sizeof *p);
    p->dtype = "auto";
    p->kv_cache_dtype = "auto";
    p->load_format = "auto";
    p->block_size = 16;
    p->max_num_seqs = 256;
    p->max_num_batched_tokens = 2048;
    p->enable_prefix_caching = 1;
    p->enable_chunked_prefill = 1;
    p->generation_config = "auto";
    p->override_temperature = p->override_top_p = p->override_min_p = -1;
    p->override_repetition_penalty = -1;
    p->override_top_k = -2;
}

void xi_request_params_default(xi_request_params *p) {
    memset(p, 0, sizeof *p);
    p->add_special_tokens = 1;
    p->n = 1;
    p->temperature = -1;
    p->top_p = -1;
    p->top_k = -2;
    p->min_p = -1;
    p->repetition_penalty = 0;
    p->seed = -1;
    p->max_tokens = -1;
    p->logprobs = -1;
    p->prompt_logprobs = -1;
    p->normalize = 1;
    p->skip_special_tokens = 1;
}

const char *xi_finish_reason_name(xi_finish_reason r) {
    switch (r) {
    case XI_FINISH_STOP: return "stop";
    case XI_FINISH_LENGTH: return "length";
    case XI_FINISH_ABORT: return "abort";
    case XI_FINISH_ERROR: return "error";
    default: return NULL;
    }
}

const char *xi_kernels_default_name(void) {
    const xi_ops *o = xi_ops_select(NULL, NULL, 0);
    return o ? o->name : "ref";
}

/* ---- open / close ---------------------------------------------------------------------- */

static int parse_kv_dtype(const char *s, xi_dtype model_dtype, xi_dtype *out) {
    if (!s || !*s || !strcmp(s, "auto")) *out = model_dtype;
    else if (!strcmp(s, "float32") || !strcmp(s, "fp32")) *out = XI_F32;
    else if (!strcmp(s, "bfloat16") || !strcmp(s, "bf16")) *out = XI_BF16;
    else if (!strcmp(s, "float16") || !strcmp(s, "half") || !strcmp(s, "fp16")) *out = XI_F16;
    else return -1;
    return 0;
}

static const char *dtype_long_name(xi_dtype t) {
    switch (t) {
    case XI_F32: return "float32";
    case XI_F16: return "float16";
    case XI_BF16: return "bfloat16";
    default: return xi_dtype_name(t);
    }
}

/* MemAvailable of /proc/meminfo in bytes, or -1. */
static int64_t mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    char line[256];
    long long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
    fclose(f);
    return kb < 0 ? -1 : (int64_t)kb * 1024;
}

/* KV bytes: explicit, else the fraction of memory left after the weights, else
 * VLLM_CPU_KVCACHE_SPACE GiB, else 4 GiB (vLLM's CPU backend default). */
static int64_t kv_budget(const xi_engine_params *p, int64_t avail_before_load, int64_t weights,
                         char *err, size_t errlen) {
    if (p->kv_cache_memory_bytes > 0) return p->kv_cache_memory_bytes;
    if (p->gpu_memory_utilization > 0) {
        if (p->gpu_memory_utilization > 1)
            return xi_errf(err, errlen, "gpu_memory_utilization: %g, must be in (0, 1]",
                           p->gpu_memory_utilization);
        if (avail_before_load < 0)
            return xi_errf(err, errlen, "gpu_memory_utilization: cannot read MemAvailable");
        int64_t b = (int64_t)(p->gpu_memory_utilization * (double)avail_before_load) - weights;
        if (b <= 0)
            return xi_errf(err, errlen,
                           "gpu_memory_utilization: %g of %lld available bytes leaves nothing "
                           "after %lld bytes of weights",
                           p->gpu_memory_utilization, (long long)avail_before_load,
                           (long long)weights);
        return b;
    }
    const char *env = getenv("VLLM_CPU_KVCACHE_SPACE");
    if (env && *env) {
        char *end;
        double gib = strtod(env, &end);
        if (*end || !(gib > 0))
            return xi_errf(err, errlen, "VLLM_CPU_KVCACHE_SPACE: \"%s\" is not a positive number of GiB", env);
        return (int64_t)(gib * (double)(1ll << 30));
    }
    return 4ll << 30;
}

static int check_params(const xi_engine_params *p, char *err, size_t errlen) {
    if (!p->model_dir || !*p->model_dir) return xi_errf(err, errlen, "model_dir: missing");
    if (p->block_size < 1 || p->block_size > 1024)
        return xi_errf(err, errlen, "block_size: %d, must be in [1, 1024]", p->block_size);
    if (p->max_num_seqs < 1) return xi_errf(err, errlen, "max_num_seqs: %d, must be >= 1", p->max_num_seqs);
    if (p->max_num_batched_tokens < 1)
        return xi_errf(err, errlen, "max_num_batched_tokens: %d, must be >= 1", p->max_num_batched_tokens);
    if (p->max_model_len < 0) return xi_errf(err, errlen, "max_model_len: %d, must be >= 0", p->max_model_len);
    if (p->max_queue_len < 0) return xi_errf(err, errlen, "max_queue_len: %d, must be >= 0", p->max_queue_len);
    if (p->kv_cache_memory_bytes < 0)
        return xi_errf(err, errlen, "kv_cache_memory_bytes: %lld, must be >= 0", (long long)p->kv_cache_memory_bytes);
    return 0;
}

/* The overrides of --override-generation-config, over whatever load_defaults read. */
static void apply_overrides(xi_engine *e) {
    const xi_engine_params *p = &e->p;
    if (p->override_temperature >= 0) e->def_temperature = p->override_temperature;
    if (p->override_top_p >= 0) e->def_top_p = p->override_top_p;
    if (p->override_min_p >= 0) e->def_min_p = p->override_min_p;
    if (p->override_repetition_penalty >= 0) e->def_repetition_penalty = p->override_repetition_penalty;
    if (p->override_top_k >= -1) e->def_top_k = p->override_top_k;
}

/* Request defaults from generation_config.json ("auto"), none ("vllm"), or another folder,
 * then the overrides. */
static int load_defaults(xi_engine *e, const xi_config *cfg, char *err, size_t errlen) {
    const char *gc = e->p.generation_config;
    e->def_temperature = e->def_top_p = e->def_min_p = e->def_repetition_penalty = -1;
    e->def_top_k = -2;
    if (gc && !strcmp(gc, "vllm")) {
        apply_overrides(e);
        return 0;
    }
    xi_config other;
    const xi_config *src = cfg;
    if (gc && *gc && strcmp(gc, "auto")) {
        if (xi_config_load(&other, gc, err, errlen))
            return xi_err_prefix(err, errlen, "generation_config");
        src = &other;
    }
    e->def_temperature = src->gen_temperature;
    e->def_top_p = src->gen_top_p;
    e->def_min_p = src->gen_min_p;
    e->def_repetition_penalty = src->gen_repetition_penalty;
    e->def_top_k = src->gen_top_k;
    if (src == &other) xi_config_free(&other);
    apply_overrides(e);
    return 0;
}

xi_engine *xi_engine_open(const xi_engine_params *params, char *err, size_t errlen) {
    xi_engine_params defaults;
    if (!params) {
        xi_engine_params_default(&defaults);
        params = &defaults;
    }
    if (check_params(params, err, errlen)) return NULL;
    xi_engine *e = calloc(1, sizeof *e);
    if (!e) {
        xi_errf(err, errlen, "engine: out of memory");
        return NULL;
    }
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    e->p = *params;
    e->model_dir = xi_strdup(params->model_dir);
    e->generation_config = xi_strdup(params->generation_config ? params->generation_config : "auto");
    e->p.model_dir = e->model_dir;
    e->p.generation_config = e->generation_config;
    /* the other strings are read during open only */
    int64_t avail = mem_available();
    if (params->tensor_parallel_size > 1 &&
        !(e->comm = xi_engine_tp_comm(params->tensor_parallel_size, 0, err, errlen)))
        goto fail;
    xi_model_params mp = {.dir = params->model_dir, .dtype = params->dtype, .comm = e->comm,
                          .quantization = params->quantization, .load_format = params->load_format,
                          .lm_head_quantization = params->lm_head_quantization,
                          .kernels = params->kernels, .n_threads = params->n_threads,
                          .kernel_precision = params->kernel_precision,
                          .progress = params->load_progress,
                          .progress_user = params->load_progress_user};
    e->model = xi_model_load(&mp, err, errlen);
    if (!e->model) goto fail;
    e->tok = xi_tokenizer_load_model(params->model_dir, err, errlen);
    if (!e->tok) goto fail;
    /* A template that fails to parse only disables chat: completions still work. */
    const char *tmpl = params->chat_template ? params->chat_template : xi_tokenizer_chat_template(e->tok);
    if (!tmpl)
        snprintf(e->chat_err, sizeof e->chat_err, "chat template: the model's tokenizer_config.json has none; pass one with --chat-template");
    else if (!(e->chat = xi_chat_template_parse(tmpl, e->chat_err, sizeof e->chat_err)))
        XI_WARN("%s", e->chat_err);
    const xi_config *cfg = xi_model_config(e->model);
    if (load_defaults(e, cfg, err, errlen)) goto fail;
    for (int i = 0; i < cfg->n_eos && e->n_eos < XI_MAX_EOS; i++) e->eos[e->n_eos++] = cfg->eos_ids[i];
    if (!e->n_eos && xi_tokenizer_eos_id(e->tok) >= 0) e->eos[e->n_eos++] = xi_tokenizer_eos_id(e->tok);

    int max_len = params->max_model_len ? params->max_model_len : cfg->max_position_embeddings;
    if (max_len > cfg->max_position_embeddings) {
        xi_errf(err, errlen, "max_model_len: %d exceeds the model's max_position_embeddings %d",
                max_len, cfg->max_position_embeddings);
        goto fail;
    }
    if (max_len < 2) {
        xi_errf(err, errlen, "max_model_len: %d, must be >= 2", max_len);
        goto fail;
    }
    xi_dtype kvdt;
    if (parse_kv_dtype(params->kv_cache_dtype, xi_model_dtype(e->model), &kvdt)) {
        xi_errf(err, errlen, "kv_cache_dtype: \"%s\", expected auto, float32, bfloat16 or float16",
                params->kv_cache_dtype);
        goto fail;
    }
    int64_t budget = kv_budget(params, avail, xi_model_weight_bytes(e->model), err, errlen);
    if (budget < 0) goto fail;
    const int bs = params->block_size;
    int64_t block_bytes = xi_kv_block_bytes(cfg, bs, kvdt);
    int64_t n_blocks = budget / block_bytes;
    if (n_blocks > (1 << 30)) n_blocks = 1 << 30;
    int64_t need = (max_len + bs - 1) / bs + 1;
    if (n_blocks < need) {
        xi_errf(err, errlen,
                "kv_cache_memory_bytes: %lld bytes hold %lld blocks of %d tokens, fewer than "
                "one max_model_len (%d) sequence needs (%lld); raise it or lower max_model_len",
                (long long)budget, (long long)(n_blocks > 0 ? n_blocks - 1 : 0), bs, max_len,
                (long long)(need - 1));
        goto fail;
    }
    e->kv = xi_kv_store_new(cfg, (int)n_blocks, bs, kvdt, err, errlen);
    if (!e->kv) goto fail;
    xi_core_params cp = {.n_kv_blocks = (int)n_blocks, .block_size = bs,
                         .max_num_seqs = params->max_num_seqs,
                         .max_num_batched_tokens = params->max_num_batched_tokens,
                         .max_model_len = max_len,
                         .enable_prefix_caching = params->enable_prefix_caching,
                         .enable_chunked_prefill = params->enable_chunked_prefill,
                         .seed = params->seed};
    if (xi_core_init(&e->core, &cp, e->model, e->kv, e->tok, err, errlen)) goto fail;
    e->core_ok = 1;

    xi_engine_info *in = &e->info;
    in->architecture = cfg->architecture;
    in->dtype = dtype_long_name(xi_model_dtype(e->model));
    snprintf(e->kv_dtype_name, sizeof e->kv_dtype_name, "%s", dtype_long_name(kvdt));
    in->kv_cache_dtype = e->kv_dtype_name;
    const char *q = params->quantization;
    snprintf(e->quant_name, sizeof e->quant_name, "%s",
             q && !strcmp(q, "int8") ? "int8" : cfg->quant_awq ? "awq" : "none");
    in->quantization = e->quant_name;
    in->lm_head_quantization = xi_model_lm_head_quantization(e->model);
    in->kernels = xi_model_ops(e->model)->name;
    in->kernel_precision = xi_model_ops(e->model)->precision;
    in->vocab_size = cfg->vocab_size;
    in->hidden_size = cfg->hidden_size;
    in->max_model_len = max_len;
    in->block_size = bs;
    in->num_kv_blocks = (int)n_blocks - 1;
    in->kv_cache_bytes = n_blocks * block_bytes;
    in->weight_bytes = xi_model_weight_bytes(e->model);
    in->n_params = xi_model_n_params(e->model);
    in->max_num_seqs = params->max_num_seqs;
    in->max_num_batched_tokens = params->max_num_batched_tokens;
    in->enable_prefix_caching = params->enable_prefix_caching;
    in->enable_chunked_prefill = params->enable_chunked_prefill;
    in->n_threads = xi_model_n_threads(e->model);
    in->max_concurrency = (double)(n_blocks - 1) * bs / max_len;
    return e;
fail:
    xi_engine_close(e);
    return NULL;
}

void xi_engine_get_info(const xi_engine *e, xi_engine_info *info) { *info = e->info; }

/* ---- the step -------------------------------------------------------------------------- */

/* Move posted submits and aborts into the core. Engine thread. */
static void drain(xi_engine *e) {
    pthread_mutex_lock(&e->mu);
    xi_group *g = e->pend_head;
    e->pend_head = e->pend_tail = NULL;
    e->n_pending = 0;
    int n_ab = e->n_aborts, cap = e->cap_aborts;
    int64_t *ab = e->aborts;
    e->aborts = e->aborts_work;
    e->cap_aborts = e->cap_work;
    e->aborts_work = ab;
    e->cap_work = cap;
    e->n_aborts = 0;
    pthread_mutex_unlock(&e->mu);
    /* callbacks may run below (errors, aborts): never under the mutex */
    while (g) {
        xi_group *next = g->next;
        g->next = NULL;
        xi_core_add(&e->core, g);
        g = next;
    }
    for (int i = 0; i < n_ab; i++) xi_core_abort(&e->core, ab[i]);
}

static void snapshot(xi_engine *e) {
    const xi_core *c = &e->core;
    pthread_mutex_lock(&e->mu);
    xi_engine_stats *s = &e->stats;
    s->num_running = c->sched.n_running;
    s->num_waiting = c->sched.n_waiting;
    s->kv_cache_usage = xi_block_pool_usage(&c->km.pool);
    s->prefix_cache_queries = c->km.queries;
    s->prefix_cache_hits = c->km.hits;
    s->num_preemptions = c->sched.num_preemptions;
    s->prompt_tokens_total = c->prompt_tokens_total;
    s->generation_tokens_total = c->generation_tokens_total;
    s->steps = c->steps;
    memcpy(s->iteration_tokens, c->iter_tokens, sizeof s->iteration_tokens);
    s->iteration_tokens_sum = c->iter_tokens_sum;
    pthread_mutex_unlock(&e->mu);
}

/* -tp > 1: a collective failed, so no step can run again; tell the owner once. */
static void check_fatal(xi_engine *e, const char *err) {
    if (e->comm && !e->fatal && xi_model_tp_failed(e->model)) {
        e->fatal = 1;
        if (e->p.on_fatal) e->p.on_fatal(e->p.on_fatal_user, err);
    }
}

static int iterate(xi_engine *e) {
    char err[256];
    drain(e);
    int rc = xi_core_step(&e->core, err, sizeof err);
    if (rc < 0) xi_log(XI_LOG_ERROR, "engine step: %s", err);
    if (rc < 0) check_fatal(e, err);
    snapshot(e);
    if (rc < 0) return -1;
    /* requests submitted while the step ran are unfinished too */
    pthread_mutex_lock(&e->mu);
    int pending = e->n_pending;
    pthread_mutex_unlock(&e->mu);
    return e->core.n_live + pending;
}

int xi_engine_step(xi_engine *e) {
    if (e->started) return -1; /* the engine thread owns the core */
    return iterate(e);
}

static void *engine_main(void *arg) {
    xi_engine *e = arg;
    for (;;) {
        pthread_mutex_lock(&e->mu);
        int idle = 0;
        while (!e->stopping && !e->pend_head && !e->n_aborts && !xi_core_has_work(&e->core) && !idle) {
            if (!e->comm || e->fatal) {
                pthread_cond_wait(&e->cv, &e->mu);
            } else { /* -tp > 1: a heartbeat to the other ranks every idle second */
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_sec += 1;
                idle = pthread_cond_timedwait(&e->cv, &e->mu, &ts) != 0;
            }
        }
        int stop = e->stopping;
        pthread_mutex_unlock(&e->mu);
        if (stop) break;
        char err[256];
        if (!idle) iterate(e);
        else if (xi_model_tp_ping(e->model, err, sizeof err)) check_fatal(e, err);
    }
    return NULL;
}

int xi_engine_start(xi_engine *e, char *err, size_t errlen) {
    if (e->started) return xi_errf(err, errlen, "engine: already started");
    if (pthread_create(&e->thread, NULL, engine_main, e))
        return xi_errf(err, errlen, "engine: cannot create the engine thread");
    e->started = 1;
    return 0;
}

void xi_engine_close(xi_engine *e) {
    if (!e) return;
    if (e->started) {
        pthread_mutex_lock(&e->mu);
        e->stopping = 1;
        pthread_cond_signal(&e->cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->thread, NULL);
        e->started = 0;
    }
    if (e->core_ok) {
        drain(e);
        xi_core_free(&e->core); /* every unfinished request gets XI_FINISH_ABORT */
    }
    for (xi_group *g = e->pend_head, *next; g; g = next) {
        next = g->next;
        xi_group_free(g);
    }
    xi_kv_store_free(e->kv);
    xi_chat_template_free(e->chat);
    xi_tokenizer_free(e->tok);
    xi_model_free(e->model); /* tells the other ranks to stop */
    if (e->comm) e->comm->free(e->comm);
    free(e->aborts);
    free(e->aborts_work);
    free(e->model_dir);
    free(e->generation_config);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

/* ---- requests -------------------------------------------------------------------------- */

static int check_range_ids(const char *what, const int32_t *ids, int n, int vocab, char *err,
                           size_t errlen) {
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return xi_errf(err, errlen, "%s: token %d at index %d is out of range [0, %d)", what,
                           ids[i], i, vocab);
    return 0;
}

/* A pooling request generates nothing: one sample, no logprobs, and the prompt may fill
 * max_model_len (vLLM's embedding limit). */
static int check_pooling(const xi_engine *e, xi_request_params *q, int n_prompt, char *err,
                         size_t errlen) {
    if (q->n != 1) return xi_errf(err, errlen, "n: %d, a pooling request has one output", q->n);
    if (q->logprobs >= 0 || q->prompt_logprobs >= 0 || q->json_object)
        return xi_errf(err, errlen, "pooling: logprobs and response_format need generation");
    if (q->dimensions < 0 || q->dimensions > e->info.hidden_size)
        return xi_errf(err, errlen, "dimensions: %d, must be in [1, %d] (the hidden size)",
                       q->dimensions, e->info.hidden_size);
    if (n_prompt > e->info.max_model_len)
        return xi_errf(err, errlen, "prompt: %d tokens exceed max_model_len %d", n_prompt,
                       e->info.max_model_len);
    q->max_tokens = 1; /* room the request's buffers keep; nothing is ever appended */
    q->min_tokens = 0;
    return 0;
}

/* Apply defaults to q and check every field; err starts with the parameter's name. */
static int check_request(const xi_engine *e, xi_request_params *q, int n_prompt, char *err,
                         size_t errlen) {
    const int vocab = e->info.vocab_size, max_len = e->info.max_model_len;
    if (q->n < 1) return xi_errf(err, errlen, "n: %d, must be >= 1", q->n);
    if (q->temperature < 0) q->temperature = e->def_temperature >= 0 ? e->def_temperature : 1.0f;
    if (q->top_p < 0) q->top_p = e->def_top_p >= 0 ? e->def_top_p : 1.0f;
    if (q->top_k < -1) q->top_k = e->def_top_k >= -1 ? e->def_top_k : -1;
    if (q->min_p < 0) q->min_p = e->def_min_p >= 0 ? e->def_min_p : 0.0f;
    if (q->repetition_penalty <= 0)
        q->repetition_penalty = e->def_repetition_penalty > 0 ? e->def_repetition_penalty : 1.0f;
    if (!isfinite(q->temperature)) return xi_errf(err, errlen, "temperature: must be a finite number >= 0");
    if (!(q->top_p > 0 && q->top_p <= 1)) return xi_errf(err, errlen, "top_p: %g, must be in (0, 1]", q->top_p);
    if (!(q->min_p >= 0 && q->min_p <= 1)) return xi_errf(err, errlen, "min_p: %g, must be in [0, 1]", q->min_p);
    if (!isfinite(q->repetition_penalty))
        return xi_errf(err, errlen, "repetition_penalty: must be a finite number > 0");
    if (!(q->presence_penalty >= -2 && q->presence_penalty <= 2))
        return xi_errf(err, errlen, "presence_penalty: %g, must be in [-2, 2]", q->presence_penalty);
    if (!(q->frequency_penalty >= -2 && q->frequency_penalty <= 2))
        return xi_errf(err, errlen, "frequency_penalty: %g, must be in [-2, 2]", q->frequency_penalty);
    if (q->n_logit_bias < 0 || (q->n_logit_bias && !q->logit_bias))
        return xi_errf(err, errlen, "logit_bias: %d entries without an array", q->n_logit_bias);
    for (int i = 0; i < q->n_logit_bias; i++) {
        if (q->logit_bias[i].token < 0 || q->logit_bias[i].token >= vocab)
            return xi_errf(err, errlen, "logit_bias: token %d is out of range [0, %d)",
                           q->logit_bias[i].token, vocab);
        if (!isfinite(q->logit_bias[i].bias))
            return xi_errf(err, errlen, "logit_bias: token %d has a non-finite bias", q->logit_bias[i].token);
    }
    if (q->n_stop_token_ids < 0 || (q->n_stop_token_ids && !q->stop_token_ids))
        return xi_errf(err, errlen, "stop_token_ids: %d entries without an array", q->n_stop_token_ids);
    if (check_range_ids("stop_token_ids", q->stop_token_ids, q->n_stop_token_ids, vocab, err, errlen))
        return -1;
    if (q->n_stop < 0 || (q->n_stop && !q->stop))
        return xi_errf(err, errlen, "stop: %d entries without an array", q->n_stop);
    for (int i = 0; i < q->n_stop; i++)
        if (!q->stop[i] || !*q->stop[i]) return xi_errf(err, errlen, "stop: string %d is empty", i);
    if (q->logprobs < -1 || q->logprobs > XI_SAMPLE_MAX_TOP_LOGPROBS)
        return xi_errf(err, errlen, "logprobs: %d, must be in [0, %d] (or -1 for none)", q->logprobs,
                       XI_SAMPLE_MAX_TOP_LOGPROBS);
    if (q->prompt_logprobs < -1 || q->prompt_logprobs > XI_SAMPLE_MAX_TOP_LOGPROBS)
        return xi_errf(err, errlen, "prompt_logprobs: %d, must be in [0, %d] (or -1 for none)",
                       q->prompt_logprobs, XI_SAMPLE_MAX_TOP_LOGPROBS);
    if (!e->info.enable_chunked_prefill && n_prompt > e->info.max_num_batched_tokens)
        return xi_errf(err, errlen,
                       "prompt: %d tokens exceed max_num_batched_tokens %d (chunked prefill is off)",
                       n_prompt, e->info.max_num_batched_tokens);
    if (q->pooling) return check_pooling(e, q, n_prompt, err, errlen);
    if (n_prompt >= max_len)
        return xi_errf(err, errlen,
                       "prompt: %d tokens, but max_model_len is %d: no room to generate",
                       n_prompt, max_len);
    if (q->max_tokens == 0) return xi_errf(err, errlen, "max_tokens: 0, must be >= 1");
    if (q->max_tokens < 0) q->max_tokens = max_len - n_prompt;
    if ((int64_t)n_prompt + q->max_tokens > max_len)
        return xi_errf(err, errlen,
                       "max_tokens: %d prompt + %d max_tokens = %lld tokens exceeds max_model_len "
                       "%d by %lld",
                       n_prompt, q->max_tokens, (long long)n_prompt + q->max_tokens, max_len,
                       (long long)n_prompt + q->max_tokens - max_len);
    if (q->min_tokens < 0 || q->min_tokens > q->max_tokens)
        return xi_errf(err, errlen, "min_tokens: %d, must be in [0, max_tokens %d]", q->min_tokens,
                       q->max_tokens);
    return 0;
}

int64_t xi_engine_submit(xi_engine *e, const xi_request_params *p, xi_output_fn fn, void *user,
                         char *err, size_t errlen) {
    if (!p) return xi_errf(err, errlen, "params: missing");
    xi_request_params q = *p;
    int32_t *owned = NULL;
    const int32_t *ids = q.prompt_ids;
    int n_prompt = q.n_prompt_ids;
    if (ids) {
        if (n_prompt < 1) return xi_errf(err, errlen, "prompt_ids: empty");
        if (check_range_ids("prompt_ids", ids, n_prompt, e->info.vocab_size, err, errlen)) return -1;
    } else if (q.prompt) {
        n_prompt = xi_tokenizer_encode(e->tok, q.prompt, strlen(q.prompt), q.add_special_tokens, 1,
                                       &owned, err, errlen);
        if (n_prompt < 0) return xi_err_prefix(err, errlen, "prompt");
        if (n_prompt == 0) {
            free(owned);
            return xi_errf(err, errlen, "prompt: empty (no tokens)");
        }
        ids = owned;
    } else {
        return xi_errf(err, errlen, "prompt: missing (give prompt text or prompt_ids)");
    }
    xi_group *g = NULL;
    xi_grammar *grammar = NULL;
    if (check_request(e, &q, n_prompt, err, errlen)) goto fail;
    if (q.json_object && !q.guide) q.guide = XI_GUIDE_JSON_OBJECT;
    if (q.guide) { /* compiled here, on the caller's thread: a bad schema is the caller's error */
        const char *src = q.guide_src ? q.guide_src : "";
        grammar = xi_grammar_compile((xi_grammar_kind)q.guide, src, strlen(src), err, errlen);
        if (!grammar) {
            xi_err_prefix(err, errlen, "%s", q.guide_param ? q.guide_param : "structured_outputs");
            goto fail;
        }
    }
    g = xi_group_new(&q, ids, n_prompt);
    if (!g || xi_group_set_eos(g, e->eos, e->n_eos)) {
        xi_errf(err, errlen, "request: out of memory");
        goto fail;
    }
    g->grammar = grammar;
    grammar = NULL;
    free(owned);
    owned = NULL;
    g->fn = fn;
    g->user = user;
    g->arrival = xi_now();
    g->arrival_wall = xi_wall_time();
    pthread_mutex_lock(&e->mu);
    int queued = e->stats.num_waiting + e->n_pending;
    if (e->p.max_queue_len > 0 && queued >= e->p.max_queue_len) {
        pthread_mutex_unlock(&e->mu);
        xi_group_free(g);
        xi_errf(err, errlen, "queue: %d requests waiting, max_queue_len is %d", queued,
                e->p.max_queue_len);
        return -2;
    }
    int64_t id = e->next_id++;
    g->id = id;
    if (e->pend_tail) e->pend_tail->next = g;
    else e->pend_head = g;
    e->pend_tail = g;
    e->n_pending++;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return id;
fail:
    free(owned);
    xi_grammar_free(grammar);
    xi_group_free(g);
    return -1;
}

int xi_engine_abort(xi_engine *e, int64_t request_id) {
    pthread_mutex_lock(&e->mu);
    if (request_id < 0 || request_id >= e->next_id) {
        pthread_mutex_unlock(&e->mu);
        return -1;
    }
    if (e->n_aborts == e->cap_aborts) { /* only the posting buffer: the other may be in use */
        int cap = e->cap_aborts ? 2 * e->cap_aborts : 64;
        int64_t *a = realloc(e->aborts, (size_t)cap * sizeof *a);
        if (!a) {
            pthread_mutex_unlock(&e->mu);
            return -1;
        }
        e->aborts = a;
        e->cap_aborts = cap;
    }
    e->aborts[e->n_aborts++] = request_id;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return 0;
}

void xi_engine_get_stats(xi_engine *e, xi_engine_stats *s) {
    pthread_mutex_lock(&e->mu);
    *s = e->stats;
    s->num_waiting += e->n_pending;
    pthread_mutex_unlock(&e->mu);
}

/* ---- tokenizer and chat template ------------------------------------------------------- */

int xi_engine_tokenize(const xi_engine *e, const char *text, int add_special_tokens,
                       int32_t **ids, char *err, size_t errlen) {
    if (!text) return xi_errf(err, errlen, "text: missing");
    return xi_tokenizer_encode(e->tok, text, strlen(text), add_special_tokens, 1, ids, err, errlen);
}

int xi_engine_tokenize_limit(const xi_engine *e, const char *text, int add_special_tokens,
                             int max_ids, int32_t **ids, char *err, size_t errlen) {
    if (!text) return xi_errf(err, errlen, "text: missing");
    return xi_tokenizer_encode_limit(e->tok, text, strlen(text), add_special_tokens, 1, max_ids, ids,
                                     err, errlen);
}

const char *xi_engine_token_str(const xi_engine *e, int32_t id) { return xi_tokenizer_token(e->tok, id); }

char *xi_engine_detokenize(const xi_engine *e, const int32_t *ids, int n, int skip_special,
                           char *err, size_t errlen) {
    return xi_tokenizer_decode(e->tok, ids, n, skip_special, NULL, err, errlen);
}

char *xi_engine_apply_chat_template(const xi_engine *e, const char *messages_json,
                                    const char *tools_json, const char *kwargs_json,
                                    int add_generation_prompt, int continue_final_message,
                                    char *err, size_t errlen) {
    if (!e->chat) {
        xi_errf(err, errlen, "%s", e->chat_err);
        return NULL;
    }
    if (!messages_json) {
        xi_errf(err, errlen, "messages: missing");
        return NULL;
    }
    xi_chat_render_params rp = {
        .messages_json = messages_json,
        .tools_json = tools_json,
        .extra_json = kwargs_json,
        .add_generation_prompt = add_generation_prompt && !continue_final_message,
        .continue_final_message = continue_final_message,
        .bos_token = xi_tokenizer_bos_token(e->tok),
        .eos_token = xi_tokenizer_eos_token(e->tok),
    };
    return xi_chat_template_render_ex(e->chat, &rp, err, errlen);
}
