/* engine/scheduler: vLLM v1's scheduling policy on token counts and block ids.
 *
 * Each step has a token budget (max_num_batched_tokens). Running requests go first, in
 * admission order: a decode gets 1 token, an unfinished prefill its next chunk. When the pool
 * cannot hold a running request's tokens, the newest running request is preempted (blocks
 * freed, progress reset, put at the front of the waiting queue) until it fits or the request
 * itself was the one preempted. Then, if nothing was preempted this step, waiting requests are
 * admitted FCFS after a prefix-cache lookup while budget, blocks and max_num_seqs allow.
 * A request's num_computed advances when it is scheduled; update() appends the sampled tokens.
 * Engine thread only; no allocation after init. */
#ifndef XI_SCHEDULER_H
#define XI_SCHEDULER_H

#include <stddef.h>
#include <stdint.h>

#include "engine/kv_manager.h"
#include "engine/request.h"

typedef struct xi_sched_params {
    int max_num_seqs;
    int max_num_batched_tokens;
    int max_model_len;
    int enable_chunked_prefill;
} xi_sched_params;

/* One step's plan, valid until the next schedule(). Entries are in batch order. */
typedef struct xi_sched_out {
    int n;                  /* scheduled sequences */
    int total_tokens;
    int n_preempted;        /* preemptions during this schedule() */
    xi_request **reqs;      /* [max_num_seqs] owned array, borrowed requests */
    int32_t *start;         /* [max_num_seqs] position of the first scheduled token */
    int32_t *n_tokens;      /* [max_num_seqs] tokens scheduled */
    uint8_t *sample;        /* [max_num_seqs] 1: the last scheduled token completes the known
                               tokens, so its logits give the next token */
} xi_sched_out;

typedef struct xi_scheduler {
    xi_sched_params p;
    xi_kv_manager *kv;      /* borrowed */
    xi_request **running;   /* [max_num_seqs] owned array, admission order */
    int n_running;
    xi_request *wait_head, *wait_tail; /* intrusive FCFS queue through request prev/next */
    int n_waiting;
    int32_t *hit_blocks;    /* [cdiv(max_model_len, block_size)] prefix-lookup scratch */
    xi_sched_out out;
    int64_t num_preemptions;
} xi_scheduler;

int xi_sched_init(xi_scheduler *s, const xi_sched_params *p, xi_kv_manager *kv, char *err,
                  size_t errlen);
void xi_sched_free(xi_scheduler *s);

/* Queue a request (status WAITING) at the back. */
void xi_sched_add(xi_scheduler *s, xi_request *r);
/* Plan one step into s->out. Returns the number of scheduled sequences. */
int xi_sched_schedule(xi_scheduler *s);
/* Apply this step's sampled tokens: sampled[i] belongs to out.reqs[i] and is used only where
 * out.sample[i]. Appends, checks stop conditions and finishes (frees) stopped requests;
 * callers find them by status == XI_REQ_FINISHED. */
void xi_sched_update(xi_scheduler *s, const int32_t *sampled);
/* Finish r wherever it is (running or waiting): free its blocks, status FINISHED. */
void xi_sched_finish(xi_scheduler *s, xi_request *r, xi_req_finish why);

static inline int xi_sched_has_unfinished(const xi_scheduler *s) {
    return s->n_running + s->n_waiting > 0;
}

#endif
