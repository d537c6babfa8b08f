/* xinfer.h: the library's public contract. The server and the CLI include only this header.
 *
 * Threads: xi_engine_open / xi_engine_close belong to the owning thread. With
 * xi_engine_start() a background engine thread runs the steps; otherwise the owner drives
 * the engine with xi_engine_step(). xi_engine_submit, xi_engine_abort, xi_engine_stats, the
 * tokenizer and chat-template calls may be called from any thread at any time. Output
 * callbacks run on the engine thread (or the stepping thread) and must not block. */
#ifndef XINFER_H
#define XINFER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define XINFER_VERSION "0.1.0"

/* What this binary is, for `xinfer --version` and GET /version. Static strings. */
typedef struct xi_build_info {
    const char *version;            /* XINFER_VERSION */
    const char *commit;             /* git commit it was built from ("-dirty": with changes) */
    const char *date;               /* build date, UTC, ISO 8601 */
    const char *compiler;           /* e.g. "gcc 12.2.0" */
    const char *kernels;            /* kernel variants compiled in, e.g. "ref avx2" */
    const char *linkage;            /* "static libraries, glibc >= 2.28" or "shared libraries" */
} xi_build_info;
const xi_build_info *xi_build_info_get(void);

typedef struct xi_engine xi_engine;

/* ---- engine ---------------------------------------------------------------------------- */

typedef struct xi_engine_params {
    const char *model_dir;          /* Hugging Face model folder */
    const char *dtype;              /* "auto" (as stored), "float32", "bfloat16", "float16" */
    const char *kv_cache_dtype;     /* "auto" (= model dtype), "float32", "bfloat16", "float16" */
    const char *quantization;       /* NULL/"auto" (from the checkpoint), "awq", "int8", "none" */
    const char *lm_head_quantization; /* NULL/"none" (16-bit as stored) or "int8" (per row, at load) */
    const char *load_format;        /* "auto" (copy into own memory) or "mmap" (zero-copy) */
    int64_t kv_cache_memory_bytes;  /* 0: VLLM_CPU_KVCACHE_SPACE GiB, else 4 GiB */
    double gpu_memory_utilization;  /* > 0: that fraction of available memory minus weights */
    int block_size;                 /* tokens per KV block (16) */
    int max_num_seqs;               /* running requests at most (256) */
    int max_num_batched_tokens;     /* token budget per step (2048) */
    int max_model_len;              /* 0: max_position_embeddings from config.json */
    int enable_prefix_caching;      /* 1 */
    int enable_chunked_prefill;     /* 1 */
    int max_queue_len;              /* waiting requests at most; 0 = unlimited */
    int n_threads;                  /* compute threads; 0 = physical cores */
    int tensor_parallel_size;       /* 0/1: alone; N > 1: this process is rank 0 of N MPI ranks
                                       (mpirun -np N), the others run xi_engine_run_rank */
    uint64_t seed;                  /* engine seed for requests without one */
    const char *generation_config;  /* "auto" (generation_config.json defaults), "vllm" (none), or a folder */
    /* --override-generation-config: request defaults that win over generation_config's.
     * Negative (top_k: below -1) leaves that default alone; xi_engine_params_default sets so. */
    float override_temperature, override_top_p, override_min_p, override_repetition_penalty;
    int override_top_k;
    const char *kernels;            /* NULL/"auto", or force "ref", "avx2", ... */
    const char *kernel_precision;   /* NULL/"int8": quantized weights with 8-bit activations; "exact" */
    const char *chat_template;      /* NULL: tokenizer_config.json's; else Jinja source text
                                       (`--chat-template FILE`), copied by xi_engine_open */
    /* -tp > 1: called once on the engine thread when a rank is gone (msg names it); every
     * request then fails. The owner decides what to do (xinfer serve exits). */
    void (*on_fatal)(void *user, const char *msg);
    void *on_fatal_user;
    /* Called on the opening thread while weights load: fraction done in [0, 1]. */
    void (*load_progress)(void *user, double fraction);
    void *load_progress_user;
} xi_engine_params;

void xi_engine_params_default(xi_engine_params *p);

xi_engine *xi_engine_open(const xi_engine_params *p, char *err, size_t errlen);
/* Stops the engine thread if started; every unfinished request gets XI_FINISH_ABORT. */
void xi_engine_close(xi_engine *e);
/* Start the background engine thread. */
int xi_engine_start(xi_engine *e, char *err, size_t errlen);
/* Manual mode: run one scheduling step on the calling thread. Returns the number of
 * unfinished requests after the step, or -1 on an internal error. */
int xi_engine_step(xi_engine *e);

typedef struct xi_engine_info {
    const char *architecture;       /* "LlamaForCausalLM", ... */
    const char *dtype;              /* activations/weights as loaded: "float32", "bfloat16", ... */
    const char *kv_cache_dtype;
    const char *quantization;       /* "none", "awq", "int8" */
    const char *lm_head_quantization; /* "none" or "int8" */
    const char *kernels;            /* kernel variant in use */
    const char *kernel_precision;   /* "int8" or "exact" (the activations of quantized weights) */
    int vocab_size;
    int hidden_size;                /* length of a pooling request's vector */
    int max_model_len;
    int block_size;
    int num_kv_blocks;              /* usable blocks (the null block excluded) */
    int64_t kv_cache_bytes;
    int64_t weight_bytes;
    int64_t n_params;
    int max_num_seqs;
    int max_num_batched_tokens;
    int enable_prefix_caching;
    int enable_chunked_prefill;
    int n_threads;
    double max_concurrency;         /* full-length sequences the KV pool holds */
} xi_engine_info;

void xi_engine_get_info(const xi_engine *e, xi_engine_info *info);

/* Tensor parallelism over MPI. This process's rank among those mpirun started, or -1 when
 * mpirun did not start it. */
int xi_tp_rank(void);
/* A rank other than 0 of -tp N: load this rank's shard of p->model_dir and run the steps rank
 * 0's engine sends until that engine closes. 0, or -1 with err (a refused split, a rank that
 * died: named). */
int xi_engine_run_rank(const xi_engine_params *p, char *err, size_t errlen);

/* ---- requests -------------------------------------------------------------------------- */

typedef enum xi_finish_reason {
    XI_FINISH_NONE = 0, /* not finished */
    XI_FINISH_STOP,     /* EOS, a stop token id or a stop string */
    XI_FINISH_LENGTH,   /* max_tokens or max_model_len */
    XI_FINISH_ABORT,    /* aborted by the client or at shutdown */
    XI_FINISH_ERROR,
} xi_finish_reason;

const char *xi_finish_reason_name(xi_finish_reason r); /* "stop", "length", "abort", "error" */

typedef struct xi_logit_bias {
    int32_t token;
    float bias;
} xi_logit_bias;

/* What the output is held to (structured outputs); the values match sample/grammar.h. */
typedef enum xi_guide_kind {
    XI_GUIDE_NONE = 0,
    XI_GUIDE_JSON_OBJECT,           /* any JSON object */
    XI_GUIDE_JSON_SCHEMA,
    XI_GUIDE_REGEX,
    XI_GUIDE_CHOICE,
    XI_GUIDE_GRAMMAR,               /* GBNF (llama.cpp's grammar format) */
} xi_guide_kind;

typedef struct xi_request_params {
    const char *prompt;             /* text, tokenized with add_special_tokens; or */
    const int32_t *prompt_ids;      /* ids used as given (when non-NULL) */
    int n_prompt_ids;
    int add_special_tokens;         /* BOS for text prompts (1) */
    int n;                          /* parallel samples sharing the prompt (1) */
    float temperature;              /* < 0: generation_config default (else 1.0); 0 = greedy */
    float top_p;                    /* < 0: default (1.0) */
    int top_k;                      /* < -1: default; -1 or 0 = off */
    float min_p;                    /* < 0: default (0) */
    float repetition_penalty;       /* <= 0: default (1.0) */
    float presence_penalty;
    float frequency_penalty;
    const xi_logit_bias *logit_bias;
    int n_logit_bias;
    const int32_t *allowed_token_ids; /* [n_allowed_token_ids]: only these may be drawn; 0: any */
    int n_allowed_token_ids;
    int64_t seed;                   /* < 0: none (engine RNG) */
    int max_tokens;                 /* < 0: until max_model_len */
    int min_tokens;
    int ignore_eos;
    const char *const *stop;        /* stop strings, matched on detokenized text */
    int n_stop;
    const int32_t *stop_token_ids;
    int n_stop_token_ids;
    int include_stop_str_in_output;
    int logprobs;                   /* -1: none; k >= 0: sampled token + top k alternatives */
    int prompt_logprobs;            /* -1: none; k >= 0: for every prompt token (echo) */
    int skip_special_tokens;        /* 1 */
    const char *cache_salt;         /* NULL or a salt separating prefix-cache namespaces */
    int json_object;                /* 1: the output is held to one JSON object (vLLM's
                                       response_format {"type": "json_object"}) */
    xi_guide_kind guide;            /* structured output (json_object above is XI_GUIDE_JSON_OBJECT) */
    const char *guide_src;          /* its source: a JSON Schema, a regex, a JSON array of
                                       choices, or GBNF text */
    const char *guide_param;        /* the request field named in guide errors (NULL:
                                       "structured_outputs") */
    int return_logits_hash;         /* 1: each output carries a hash of the logits row its
                                       last token was sampled from (xinfer generate's stats) */
    int pooling;                    /* 1: an embedding request: the prompt is prefilled only
                                       (prefix cache included), nothing is generated, and the
                                       one output carries the last prompt token's final hidden
                                       state (last-token pooling); n must be 1, the sampling
                                       fields are ignored, the prompt may fill max_model_len */
    int normalize;                  /* pooling: L2-normalise the vector (1) */
    int dimensions;                 /* pooling: keep the first this many values, before
                                       normalising (matryoshka); 0: all hidden_size */
    int64_t client;                 /* requests with the same non-zero value are one client to
                                       the scheduler's fairness (the server: one HTTP request);
                                       0: this request alone */
} xi_request_params;

void xi_request_params_default(xi_request_params *p);

typedef struct xi_top_logprob {
    int32_t token;
    float logprob;
} xi_top_logprob;

/* logprob information for one token (sampled or prompt) */
typedef struct xi_token_logprob {
    int32_t token;
    float logprob;
    int rank;                       /* 1-based rank of token among the vocabulary */
    int n_top;
    const xi_top_logprob *top;      /* [n_top], best first */
} xi_token_logprob;

/* One output event for one sample (index) of a request. Every pointer is valid only during
 * the callback. */
typedef struct xi_output {
    int64_t request_id;
    int index;                      /* which of the n samples */
    const int32_t *new_ids;         /* tokens generated since the previous event */
    int n_new;
    const char *text;               /* detokenized delta (stop strings withheld until resolved) */
    size_t text_len;
    const xi_token_logprob *logprobs;        /* [n_new] when requested, else NULL */
    const xi_token_logprob *prompt_logprobs; /* [n_prompt] in the first event when requested;
                                                entry 0 has no logprob (NAN) */
    int n_prompt_logprobs;
    xi_finish_reason finish_reason;
    const char *stop_reason;        /* matched stop string, or NULL */
    int32_t stop_token;             /* matched stop token id, or -1 */
    int prompt_tokens;
    int cached_prompt_tokens;       /* prompt tokens served from the prefix cache */
    int generated_tokens;           /* so far */
    double arrival_time;            /* xi wall-clock seconds */
    double queue_time;              /* seconds waiting before first scheduled */
    double first_token_time;        /* seconds from arrival to first token (0 until then) */
    double prefill_time, decode_time;
    uint64_t logits_hash;           /* XXH3-64 of the raw logits row (return_logits_hash) */
    const float *embedding;         /* pooling: [n_embedding] in the final event, else NULL */
    int n_embedding;
} xi_output;

typedef void (*xi_output_fn)(void *user, const xi_output *out);

/* Validate and queue a request; fn receives its output events (the last has finish_reason
 * != NONE, one per sample). Returns the request id (>= 0), or -1 with err filled for a bad
 * request (err then starts with the offending parameter's name) or a full queue (-2). */
int64_t xi_engine_submit(xi_engine *e, const xi_request_params *p, xi_output_fn fn, void *user,
                         char *err, size_t errlen);
/* Abort a request; its blocks are freed at the next step and fn gets XI_FINISH_ABORT. */
int xi_engine_abort(xi_engine *e, int64_t request_id);

/* ---- statistics ------------------------------------------------------------------------ */

/* vLLM's buckets of vllm:iteration_tokens_total */
#define XI_N_ITERATION_TOKEN_BOUNDS 13
extern const int xi_iteration_token_bounds[XI_N_ITERATION_TOKEN_BOUNDS];

typedef struct xi_engine_stats {
    int num_running;
    int num_waiting;
    double kv_cache_usage;          /* 0..1: blocks in use by requests / usable blocks */
    int64_t prefix_cache_queries;   /* tokens looked up */
    int64_t prefix_cache_hits;      /* tokens found */
    int64_t num_preemptions;
    int64_t prompt_tokens_total;
    int64_t generation_tokens_total;
    int64_t steps;
    /* tokens per step (vllm:iteration_tokens_total): [i] counts the steps of at most
     * xi_iteration_token_bounds[i] tokens and more than the bound before (not cumulative);
     * the last entry, the steps above every bound */
    int64_t iteration_tokens[XI_N_ITERATION_TOKEN_BOUNDS + 1];
    int64_t iteration_tokens_sum;
} xi_engine_stats;

void xi_engine_get_stats(xi_engine *e, xi_engine_stats *s);

/* ---- tokenizer and chat template (any thread) ------------------------------------------ */

/* ids: malloc'ed array the caller frees. Returns the count or -1 (err: e.g. invalid UTF-8). */
int xi_engine_tokenize(const xi_engine *e, const char *text, int add_special_tokens,
                       int32_t **ids, char *err, size_t errlen);
/* The same, stopping early once more than max_ids ids are known: a count above max_ids only
 * says "more than max_ids" (a prompt that cannot fit costs no more than one that just does). */
int xi_engine_tokenize_limit(const xi_engine *e, const char *text, int add_special_tokens,
                             int max_ids, int32_t **ids, char *err, size_t errlen);
/* The vocabulary's own spelling of a token ("Ġthe", "▁the", "<|im_end|>"), NULL when out of
 * range; valid while the engine is open. */
const char *xi_engine_token_str(const xi_engine *e, int32_t id);
/* Returns a malloc'ed string or NULL (an id out of range). */
char *xi_engine_detokenize(const xi_engine *e, const int32_t *ids, int n, int skip_special,
                           char *err, size_t errlen);
/* Render the model's chat template. messages_json / tools_json are JSON arrays as in the
 * OpenAI API (tools_json may be NULL); kwargs_json, a JSON object of extra template variables
 * (vLLM's chat_template_kwargs, e.g. {"enable_thinking": false}) or NULL. messages, tools and
 * add_generation_prompt are the template's own whatever kwargs_json says. Returns the prompt
 * text (malloc'ed) or NULL. */
char *xi_engine_apply_chat_template(const xi_engine *e, const char *messages_json,
                                    const char *tools_json, const char *kwargs_json,
                                    int add_generation_prompt, int continue_final_message,
                                    char *err, size_t errlen);

/* ---- kernels and hardware -------------------------------------------------------------- */

/* Name of the kernel variant this CPU gets by default ("avx2", "neon", "ref", ...). */
const char *xi_kernels_default_name(void);

#ifdef __cplusplus
}
#endif
#endif
