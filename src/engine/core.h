/* engine/core: the engine step. Owns the KV manager and the scheduler; borrows the model, its
 * KV store and the tokenizer. One step: schedule -> build the flat batch -> forward ->
 * sample -> update -> detokenize, match stop strings, emit outputs.
 *
 * A submitted request is a group of n sequences (parallel samples) sharing one prompt; the
 * samples find each other's prompt blocks through the prefix cache. Groups are built by the
 * submitting thread (xi_group_new) and handed to the engine thread, which alone calls every
 * other function here. Per-step arrays are sized at init from max_num_batched_tokens and
 * max_num_seqs; a decode step allocates nothing (prompt-logprob steps may grow the logits
 * buffer). */
#ifndef XI_CORE_H
#define XI_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/guide.h"
#include "engine/scheduler.h"
#include "model/model.h"
#include "sample/sample.h"
#include "tokenizer/tokenizer.h"
#include "xinfer.h"

typedef struct xi_core_params {
    int n_kv_blocks;        /* blocks in the KV store, the null block included */
    int block_size;
    int max_num_seqs;
    int max_num_batched_tokens;
    int max_model_len;
    int enable_prefix_caching;
    int enable_chunked_prefill;
    uint64_t seed;          /* engine RNG: seeds for requests that give none */
} xi_core_params;

typedef struct xi_group xi_group;

/* One sample of a group: the scheduler's request plus sampling and text state. */
typedef struct xi_seq {
    xi_request req;         /* req.user points back here */
    xi_group *grp;
    int index;
    xi_sampler *sampler;    /* owned */
    xi_detok detok;
    xi_buf text;            /* every detokenized byte so far (stop strings search it) */
    size_t text_sent;       /* bytes of text already emitted */
    int done;               /* its final output was emitted */
    const char *stop_reason; /* borrowed from grp->stop */
    const float *embedding; /* pooling: the vector its final event carries, else NULL */
    int n_embedding;
    xi_grammar_state gs;    /* the output so far, for a guided group */
    double t_first_sched, t_first_token, t_last_token;
} xi_seq;

/* A submitted request: everything copied out of xi_request_params at submit. */
struct xi_group {
    int64_t id;
    int64_t client;         /* fairness: xi_request_params.client, else id */
    xi_output_fn fn;
    void *user;
    int32_t *prompt;        /* [n_prompt] owned */
    int n_prompt;
    int n;                  /* samples */
    int n_done;
    xi_seq *seqs;           /* [n] owned, built by xi_core_add */
    xi_sampling sampling;   /* bias and stop ids point into the arrays below */
    xi_logit_bias *bias;    /* [n_bias] owned */
    int32_t *allowed;       /* [sampling.n_allowed] owned (allowed_token_ids) */
    int32_t *stop_ids;      /* [n_stop_ids] stop token ids + extra EOS ids, owned */
    int n_stop_ids;
    int64_t seed;           /* < 0: drawn from the engine RNG */
    int32_t eos_token_id;
    int max_tokens, min_tokens, ignore_eos;
    char **stop;            /* [n_stop] owned strings */
    int n_stop;
    int include_stop_str;
    int logprobs, prompt_logprobs, skip_special, return_logits_hash;
    int pooling, normalize; /* prefill only; the last row's hidden state is the output */
    int dimensions;         /* pooling: values kept (0: all) */
    xi_grammar *grammar;    /* structured output (engine/guide); NULL: none. Owned until the
                               engine shares it (grammar_ref set: the cache's counter) */
    int *grammar_ref;
    int guide_kind;
    char *guide_src;        /* owned: the key of the shared grammar cache */
    int guide_json;         /* the grammar is JSON: whitespace may pad a complete text */
    int32_t *end_ids;       /* [n_end]: EOS then the stop ids, the tokens that end it */
    int n_end;
    char *cache_salt;       /* owned or NULL */
    double arrival_wall, arrival;
    /* prompt logprobs, filled by sample 0 as its prefill runs */
    xi_token_logprob *plp;  /* [n_prompt] owned */
    xi_top_logprob *plp_top; /* [n_prompt * prompt_logprobs] owned */
    int plp_sent;
    int aborted;
    struct xi_group *next;  /* list links: the API's pending queue, then the core's live list */
};

/* Allocate a group with copies of prompt and params (fn, user, id filled by the caller).
 * The params must be validated and defaulted already; a guided request's grammar is
 * compiled by the caller and set afterwards (g->grammar). NULL on OOM. */
xi_group *xi_group_new(const xi_request_params *p, const int32_t *prompt, int n_prompt);
void xi_group_free(xi_group *g);
/* eos[0] becomes the request's EOS; the others stop like stop ids (unless ignore_eos), as
 * vLLM adds generation_config's extra EOS ids to stop_token_ids. Returns -1 on OOM. */
int xi_group_set_eos(xi_group *g, const int32_t *eos, int n_eos);

typedef struct xi_core {
    xi_core_params p;
    xi_model *model;        /* borrowed */
    xi_kv_store *kv;        /* borrowed */
    const xi_tokenizer *tok; /* borrowed */
    int vocab;
    xi_kv_manager km;
    xi_scheduler sched;
    xi_sample_scratch scratch;
    xi_guide_vocab guide;   /* token bytes and the mask, built by the first guided group */
    xi_guide_cache grammars; /* compiled grammars shared across requests */
    xi_rng rng;
    xi_group *live;         /* groups added and not yet done */
    int n_live;
    /* per-step batch, sized at init */
    int32_t *tokens;        /* [max_num_batched_tokens] */
    int32_t *positions;     /* [max_num_batched_tokens] */
    int64_t *slots;         /* [max_num_batched_tokens] */
    xi_batch_seq *bseqs;    /* [max_num_seqs] */
    int32_t *sample_row;    /* [max_num_seqs] logits row of scheduled seq i, or -1 */
    int32_t *sampled;       /* [max_num_seqs] */
    int32_t *rows;          /* [cap_rows] flat rows whose logits are wanted */
    int32_t *row_prompt_pos; /* [cap_rows] prompt position a prompt-logprob row scores, or -1 */
    xi_seq **row_seq;       /* [cap_rows] */
    float *logits;          /* [cap_rows, vocab] */
    int cap_rows;
    xi_token_logprob *lp;   /* [max_num_seqs] this step's sampled-token logprobs */
    xi_top_logprob *lp_top; /* [max_num_seqs * 20] */
    uint64_t *lhash;        /* [max_num_seqs] logits-row hashes */
    int hidden_size;
    int32_t *pool_row;      /* [max_num_seqs] hidden row of scheduled seq i (pooling), or -1 */
    int32_t *hid_rows;      /* [max_num_seqs] flat rows whose hidden states are wanted */
    float *hidden;          /* [max_num_seqs, hidden_size] */
    /* counters */
    int64_t prompt_tokens_total, generation_tokens_total, steps;
    int64_t iter_tokens[XI_N_ITERATION_TOKEN_BOUNDS + 1], iter_tokens_sum; /* see xi_engine_stats */
    /* seconds spent per stage over all steps: scheduler + block manager (schedule and
     * update), flattening the batch, the forward, sampling + logprobs, detokenize + outputs */
    double t_sched, t_batch, t_forward, t_sample, t_output;
} xi_core;

int xi_core_init(xi_core *c, const xi_core_params *p, xi_model *model, xi_kv_store *kv,
                 const xi_tokenizer *tok, char *err, size_t errlen);
/* Every live group gets XI_FINISH_ABORT, then everything is freed. */
void xi_core_free(xi_core *c);

/* Build the group's sequences and queue them; on failure the group gets XI_FINISH_ERROR and
 * is freed. */
void xi_core_add(xi_core *c, xi_group *g);
/* Abort a live group (no-op when unknown or done). */
void xi_core_abort(xi_core *c, int64_t id);
/* One step. Returns the number of live groups afterwards, or -1 when the forward failed
 * (the affected requests finish with XI_FINISH_ERROR). */
int xi_core_step(xi_core *c, char *err, size_t errlen);

static inline int xi_core_has_work(const xi_core *c) { return c->n_live > 0; }

#endif
