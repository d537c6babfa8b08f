/* Helpers shared by the engine tests: an output collector and small-engine set-up. */
#ifndef XI_TEST_ENGINE_UTIL_H
#define XI_TEST_ENGINE_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "test.h"
#include "xinfer.h"

#define MAX_IDS 512
#define MAX_SAMPLES 4

typedef struct seq_out {
    int32_t ids[MAX_IDS];
    int n;
    char text[4096];
    size_t text_len;
    xi_finish_reason fr;
    int n_final;            /* events with a finish reason: must be exactly 1 */
    int cached;
    int stop_token;
    char stop_reason[64];   /* "" when none */
    float lp[MAX_IDS];
    int rank[MAX_IDS];
    int n_top[MAX_IDS];
    int top_ok;             /* every top list was sorted, best first, and held the k asked */
    int n_events;
    int n_plp;
    float plp[MAX_IDS];
} seq_out;

typedef struct req_out {
    seq_out s[MAX_SAMPLES];
} req_out;

static inline void on_output(void *user, const xi_output *o) {
    req_out *r = user;
    if (o->index < 0 || o->index >= MAX_SAMPLES) return;
    seq_out *s = &r->s[o->index];
    s->n_events++;
    for (int i = 0; i < o->n_new && s->n < MAX_IDS; i++) {
        if (o->logprobs) {
            const xi_token_logprob *lp = &o->logprobs[i];
            s->lp[s->n] = lp->logprob;
            s->rank[s->n] = lp->rank;
            s->n_top[s->n] = lp->n_top;
            for (int k = 1; k < lp->n_top; k++)
                if (lp->top[k].logprob > lp->top[k - 1].logprob) s->top_ok = -1;
        }
        s->ids[s->n++] = o->new_ids[i];
    }
    if (s->text_len + o->text_len < sizeof s->text) {
        memcpy(s->text + s->text_len, o->text, o->text_len);
        s->text_len += o->text_len;
        s->text[s->text_len] = 0;
    }
    if (o->prompt_logprobs) {
        s->n_plp = o->n_prompt_logprobs;
        for (int i = 0; i < o->n_prompt_logprobs && i < MAX_IDS; i++)
            s->plp[i] = o->prompt_logprobs[i].logprob;
    }
    if (o->finish_reason != XI_FINISH_NONE) {
        s->fr = o->finish_reason;
        s->n_final++;
        s->cached = o->cached_prompt_tokens;
        s->stop_token = o->stop_token;
        snprintf(s->stop_reason, sizeof s->stop_reason, "%s", o->stop_reason ? o->stop_reason : "");
    }
}

static inline xi_engine *open_engine(const char *model, int kv_blocks, int budget, int max_seqs,
                              int max_len, int caching) {
    xi_engine_params p;
    xi_engine_params_default(&p);
    p.model_dir = xi_test_data(model);
    p.n_threads = 1;
    p.max_model_len = max_len;
    p.max_num_batched_tokens = budget;
    p.max_num_seqs = max_seqs;
    p.enable_prefix_caching = caching;
    /* size the pool in blocks: the block bytes follow from config.json */
    xi_config cfg;
    char err[256];
    if (xi_config_load(&cfg, p.model_dir, err, sizeof err)) {
        fprintf(stderr, "config: %s\n", err);
        return NULL;
    }
    p.kv_cache_memory_bytes = xi_kv_block_bytes(&cfg, p.block_size, cfg.torch_dtype) * (kv_blocks + 1);
    xi_config_free(&cfg);
    xi_engine *e = xi_engine_open(&p, err, sizeof err);
    if (!e) fprintf(stderr, "open: %s\n", err);
    return e;
}

static inline int run_until_idle(xi_engine *e) {
    int steps = 0, rc;
    do {
        rc = xi_engine_step(e);
        steps++;
    } while (rc > 0 && steps < 100000);
    return rc < 0 ? -1 : steps;
}

#endif
