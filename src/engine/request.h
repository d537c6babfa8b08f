/* engine/request: one sequence as the scheduler and the KV manager see it: token ids, how many
 * are computed, its block table and the hashes of its full blocks, its stop conditions.
 * Nothing here knows about tensors, text or sampling; the engine hangs those off `user`.
 * All buffers are sized at admission for the longest the sequence may grow, so appending a
 * token in the decode loop never allocates. Engine thread only. */
#ifndef XI_REQUEST_H
#define XI_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "engine/block_hash.h"

typedef enum xi_req_status {
    XI_REQ_WAITING,
    XI_REQ_RUNNING,
    XI_REQ_PREEMPTED,  /* waiting again after preemption; recomputes from scratch */
    XI_REQ_FINISHED,
} xi_req_status;

/* Why a sequence stopped (mirrors xi_finish_reason of the public API). */
typedef enum xi_req_finish {
    XI_REQ_NOT_FINISHED = 0,
    XI_REQ_FINISHED_STOP,    /* EOS, stop token id or stop string */
    XI_REQ_FINISHED_LENGTH,  /* max_tokens or max_model_len */
    XI_REQ_FINISHED_ABORT,
    XI_REQ_FINISHED_ERROR,
} xi_req_finish;

typedef struct xi_request_limits {
    int max_tokens;          /* output tokens at most (>= 1) */
    int min_tokens;          /* EOS / stop ids ignored before this many outputs */
    int ignore_eos;
    int32_t eos_token_id;    /* -1: none */
    const int32_t *stop_ids; /* [n_stop_ids] copied at init */
    int n_stop_ids;
    int skip_prefix_cache;   /* never read cached blocks (prompt logprobs need every row) */
} xi_request_limits;

typedef struct xi_request {
    int64_t id;
    int64_t client;          /* fairness: requests of one client share it; 0: none */
    xi_req_status status;
    xi_req_finish finish;
    int32_t stop_token;      /* the stop token id that finished it, else -1 (also for EOS) */

    int32_t *tokens;         /* [cap_tokens] prompt then outputs, owned */
    int n_prompt;
    int n_tokens;            /* prompt + outputs so far */
    int cap_tokens;
    int num_computed;        /* tokens whose KV is (or is being, this step) written */
    int num_cached_prompt;   /* prefix-cache hit at first admission; -1 before */
    int n_preemptions;

    int block_size;
    int32_t *blocks;         /* [cap_blocks] block table, owned */
    int n_blocks;
    int cap_blocks;
    int n_cached_blocks;     /* leading blocks already registered in the pool's hash map */
    xi_block_hash *hashes;   /* [cap_blocks] hash of each full block of tokens, owned */
    int n_hashes;
    char *salt;              /* owned copy of cache_salt or NULL */
    size_t salt_len;

    xi_request_limits lim;
    int32_t *stop_ids;       /* [lim.n_stop_ids] owned */

    struct xi_request *prev, *next; /* waiting-queue links (scheduler) */
    void *user;              /* the engine's per-request state */
} xi_request;

/* Copy the prompt, size every buffer for at most max_len tokens (prompt + outputs) and hash
 * the prompt's full blocks. salt may be NULL. Returns 0 or -1 with err. */
int xi_request_init(xi_request *r, int64_t id, const int32_t *prompt, int n_prompt,
                    const xi_request_limits *lim, int max_len, int block_size, const char *salt,
                    char *err, size_t errlen);
void xi_request_free(xi_request *r);

static inline int xi_request_num_outputs(const xi_request *r) { return r->n_tokens - r->n_prompt; }

/* Append a generated token (hashing a block it completes). Returns -1 when full. */
int xi_request_append(xi_request *r, int32_t token);

/* vLLM's check_stop on the last appended token, given max_model_len: sets finish and
 * stop_token and returns 1 when the sequence is done. */
int xi_request_check_stop(xi_request *r, int max_model_len);

#endif
