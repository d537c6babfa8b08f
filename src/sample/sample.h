/* sample: per-request token sampling on one fp32 logits row [vocab]. Engine thread only.
 *
 * Order of operations (vLLM v1's Sampler):
 *   1. copy the row into scratch (the caller's row stays the raw model logits, which the
 *      logprobs below need);
 *   2. EOS / stop ids → −inf while fewer than min_tokens were generated, and logit_bias
 *      (additive): vLLM v1's non-argmax-invariant processors, which run first;
 *   3. repetition penalty over prompt + output tokens (logit > 0 → /p, else ×p), then
 *      frequency (−f × count) and presence (−p if count > 0) over output tokens only;
 *   4. temperature < 1e-5 → greedy argmax (lowest id wins a tie), done;
 *   5. divide by temperature; min-p keeps p_i ≥ min_p · p_max (relative to the whole
 *      distribution, as vLLM v1 applies min-p before top-k/top-p); top-k keeps the k largest
 *      values (every token tied with the k-th is kept, as vLLM's mask does); top-p keeps the
 *      smallest prefix in descending order whose renormalised mass is ≥ top_p;
 *   6. draw from the softmax of what is left with the request's own PRNG.
 *
 * Logprobs follow vLLM's default logprobs_mode "raw_logprobs": log_softmax of the raw model
 * logits, before penalties, bias and temperature. So sampled-token and prompt logprobs come
 * from the same function on the untouched row.
 *
 * Memory: the penalty state is sparse (one entry per distinct prompt/output token), so 64
 * requests over a 152K vocabulary cost what their token lists cost. Per-call work uses a
 * caller-owned scratch sized by vocab; xi_sampler_sample allocates nothing. Top-k and top-p
 * find their boundary with a one-pass histogram over the values and order only the tokens
 * above it, so a 152K row is never fully sorted unless the distribution is nearly flat.
 * Measured on the 2-core dev box: ~0.8 ms per 152K-row draw at temperature 1 (the one expf
 * pass dominates), greedy a fraction of that. Samplers and scratches are independent, so rows
 * of different requests may be sampled in parallel with one scratch per thread. */
#ifndef XI_SAMPLE_H
#define XI_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "xinfer.h"

/* ---- PRNG: xoshiro256** seeded through splitmix64 -------------------------------------- */

typedef struct xi_rng {
    uint64_t s[4];
} xi_rng;

void xi_rng_seed(xi_rng *r, uint64_t seed);
uint64_t xi_rng_next(xi_rng *r);
/* Uniform double in [0, 1) with 53 random bits. */
double xi_rng_uniform(xi_rng *r);

/* ---- parameters ------------------------------------------------------------------------ */

#define XI_SAMPLE_GREEDY_EPS 1e-5f /* temperatures below this are greedy (vLLM's _SAMPLING_EPS) */
#define XI_SAMPLE_MAX_TOP_LOGPROBS 20

typedef struct xi_sampling {
    float temperature;          /* 0 (or < 1e-5) = greedy; 1 = unchanged */
    float top_p;                /* (0, 1]; 1 = off */
    int top_k;                  /* <= 0 = off */
    float min_p;                /* [0, 1]; 0 = off */
    float repetition_penalty;   /* > 0; 1 = off */
    float presence_penalty;     /* 0 = off */
    float frequency_penalty;    /* 0 = off */
    const xi_logit_bias *bias;  /* [n_bias], copied by xi_sampler_new */
    int n_bias;
    const int32_t *allowed;     /* [n_allowed] the only tokens that may be drawn (0: any), copied */
    int n_allowed;
    int min_tokens;             /* stop ids are masked until this many tokens were accepted */
    const int32_t *stop_ids;    /* [n_stop_ids] EOS and stop token ids, copied */
    int n_stop_ids;
    uint64_t seed;              /* the request's seed; the engine draws one from its own
                                   xi_rng for requests that gave none */
} xi_sampling;

/* Neutral parameters: temperature 1, top_p 1, top_k off, min_p 0, penalties off, seed 0. */
void xi_sampling_default(xi_sampling *s);

/* ---- per-step scratch (one per engine, reused for every row) --------------------------- */

typedef struct xi_sample_cand {
    float v;                    /* unnormalised probability exp(logit / T - max) */
    int32_t id;
} xi_sample_cand;

typedef struct xi_sample_scratch {
    int vocab;
    float *row;                 /* [vocab] penalised copy of the logits, owned */
    xi_sample_cand *cand;       /* [vocab] surviving candidates, owned */
    float *tmp;                 /* [vocab] quickselect workspace, owned */
    uint32_t *hist;             /* [4096] value histogram for top-k, owned */
    double *mass;               /* [4096] mass histogram for top-p, owned */
} xi_sample_scratch;

int xi_sample_scratch_init(xi_sample_scratch *sc, int vocab, char *err, size_t errlen);
void xi_sample_scratch_free(xi_sample_scratch *sc);

/* ---- per-request sampler --------------------------------------------------------------- */

typedef struct xi_sampler xi_sampler;

/* Validates the parameters (err names the bad one) and records the prompt's distinct tokens
 * for the repetition penalty. prompt may be NULL when n_prompt is 0. */
xi_sampler *xi_sampler_new(const xi_sampling *s, const int32_t *prompt, int n_prompt,
                           int vocab, char *err, size_t errlen);
void xi_sampler_free(xi_sampler *s);

/* Pick the next token from logits [vocab] (not modified). Returns the token id, or -1 when
 * every token is masked (all −inf / NaN). Does not record the token: call accept. */
int32_t xi_sampler_sample(xi_sampler *s, const float *logits, xi_sample_scratch *sc);
/* The same draw over only the tokens with allow[i] != 0 (the others are −inf before step 2);
 * allow NULL is xi_sampler_sample. Guided output (response_format) builds the mask. */
int32_t xi_sampler_sample_masked(xi_sampler *s, const float *logits, const uint8_t *allow,
                                 xi_sample_scratch *sc);
/* Record a generated token (penalty counts, min_tokens progress). Returns -1 only when
 * memory runs out growing the count table. */
int xi_sampler_accept(xi_sampler *s, int32_t token);
/* Tokens accepted so far. */
int xi_sampler_n_generated(const xi_sampler *s);
/* Output count of one token (0 when never generated). */
int xi_sampler_count(const xi_sampler *s, int32_t token);

/* Apply steps 2-3 above to row [vocab] in place: the processed logits the sampler draws
 * from, before temperature. Exposed for tests and for a future processed-logprobs mode. */
void xi_sampler_apply_penalties(const xi_sampler *s, float *row, int vocab);

/* ---- logprobs -------------------------------------------------------------------------- */

/* log_softmax(logits)[token] into out->logprob, its 1-based rank (the number of tokens whose
 * logit is ≥ the token's, as vLLM counts) into out->rank, and the n_top (≤ 20) best tokens,
 * best first, ties by lowest id, into top [n_top] (out->top points at it). Serves sampled
 * tokens and prompt tokens alike (for a prompt row pass the next prompt token). Returns -1
 * for a token out of range or n_top out of [0, 20]. */
int xi_sample_logprobs(const float *logits, int vocab, int32_t token, int n_top,
                       xi_token_logprob *out, xi_top_logprob *top);

#endif
