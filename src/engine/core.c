#include "engine/core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

const int xi_iteration_token_bounds[XI_N_ITERATION_TOKEN_BOUNDS] = {1, 8, 16, 32, 64, 128, 256, 512, 1024,
                                                                    2048, 4096, 8192, 16384};

/* ---- groups ---------------------------------------------------------------------------- */

static void *dup_array(const void *src, size_t n, size_t size) {
    if (!n) return NULL;
    void *d = malloc(n * size);
    if (d) memcpy(d, src, n * size);
    return d;
}

xi_group *xi_group_new(const xi_request_params *p, const int32_t *prompt, int n_prompt) {
    xi_group *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->n_prompt = n_prompt;
    g->n = p->n;
    g->prompt = dup_array(prompt, (size_t)n_prompt, sizeof *prompt);
    g->bias = dup_array(p->logit_bias, (size_t)p->n_logit_bias, sizeof *p->logit_bias);
    g->stop_ids = dup_array(p->stop_token_ids, (size_t)p->n_stop_token_ids, sizeof(int32_t));
    g->n_stop_ids = p->n_stop_token_ids;
    g->allowed = dup_array(p->allowed_token_ids, (size_t)p->n_allowed_token_ids, sizeof(int32_t));
    int ok = g->prompt && (!p->n_logit_bias || g->bias) && (!p->n_stop_token_ids || g->stop_ids) &&
             (!p->n_allowed_token_ids || g->allowed);
    xi_sampling_default(&g->sampling);
    g->sampling.temperature = p->temperature;
    g->sampling.top_p = p->top_p;
    g->sampling.top_k = p->top_k > 0 ? p->top_k : 0;
    g->sampling.min_p = p->min_p;
    g->sampling.repetition_penalty = p->repetition_penalty;
    g->sampling.presence_penalty = p->presence_penalty;
    g->sampling.frequency_penalty = p->frequency_penalty;
    g->sampling.bias = g->bias;
    g->sampling.n_bias = p->n_logit_bias;
    g->sampling.allowed = g->allowed;
    g->sampling.n_allowed = p->n_allowed_token_ids > 0 ? p->n_allowed_token_ids : 0;
    g->sampling.min_tokens = p->min_tokens;
    g->seed = p->seed;
    g->eos_token_id = -1;
    g->max_tokens = p->max_tokens;
    g->min_tokens = p->min_tokens;
    g->ignore_eos = p->ignore_eos;
    g->include_stop_str = p->include_stop_str_in_output;
    g->logprobs = p->logprobs;
    g->prompt_logprobs = p->prompt_logprobs;
    g->skip_special = p->skip_special_tokens;
    g->return_logits_hash = p->return_logits_hash;
    g->pooling = p->pooling;
    g->normalize = p->normalize;
    g->dimensions = p->dimensions;
    g->guide_json = p->json_object || p->guide == XI_GUIDE_JSON_OBJECT || p->guide == XI_GUIDE_JSON_SCHEMA;
    g->client = p->client;
    if (p->cache_salt && *p->cache_salt) ok = ok && (g->cache_salt = xi_strdup(p->cache_salt));
    g->guide_kind = p->guide ? (int)p->guide : p->json_object ? XI_GUIDE_JSON_OBJECT : 0;
    if (g->guide_kind) ok = ok && (g->guide_src = xi_strdup(p->guide_src ? p->guide_src : ""));
    if (p->n_stop > 0) {
        g->stop = calloc((size_t)p->n_stop, sizeof *g->stop);
        ok = ok && g->stop;
        for (int i = 0; ok && i < p->n_stop; i++) {
            ok = (g->stop[i] = xi_strdup(p->stop[i])) != NULL;
            g->n_stop = i + 1;
        }
    }
    if (ok && p->prompt_logprobs >= 0) {
        int k = p->prompt_logprobs;
        g->plp = calloc((size_t)n_prompt, sizeof *g->plp);
        g->plp_top = calloc((size_t)n_prompt * (size_t)(k ? k : 1), sizeof *g->plp_top);
        ok = g->plp && g->plp_top;
        if (ok) {
            g->plp[0].token = prompt[0];
            g->plp[0].logprob = NAN;
        }
    }
    if (!ok) {
        xi_group_free(g);
        return NULL;
    }
    return g;
}

int xi_group_set_eos(xi_group *g, const int32_t *eos, int n_eos) {
    if (n_eos <= 0) return 0;
    g->eos_token_id = eos[0];
    if (g->ignore_eos || n_eos == 1) return 0;
    int32_t *ids = realloc(g->stop_ids, (size_t)(g->n_stop_ids + n_eos - 1) * sizeof *ids);
    if (!ids) return -1;
    g->stop_ids = ids;
    for (int i = 1; i < n_eos; i++) ids[g->n_stop_ids++] = eos[i];
    return 0;
}

void xi_group_free(xi_group *g) {
    if (!g) return;
    if (g->seqs) {
        for (int i = 0; i < g->n; i++) {
            xi_seq *s = &g->seqs[i];
            xi_sampler_free(s->sampler);
            xi_detok_free(&s->detok);
            xi_buf_free(&s->text);
            xi_request_free(&s->req);
            xi_grammar_state_free(&s->gs);
        }
        free(g->seqs);
    }
    free(g->prompt);
    free(g->bias);
    free(g->allowed);
    free(g->stop_ids);
    free(g->end_ids);
    for (int i = 0; i < g->n_stop; i++) free(g->stop[i]);
    free(g->stop);
    free(g->cache_salt);
    free(g->plp);
    free(g->plp_top);
    if (g->grammar_ref) (*g->grammar_ref)--;
    else xi_grammar_free(g->grammar);
    free(g->guide_src);
    free(g);
}

/* ---- init / free ----------------------------------------------------------------------- */

static int grow_rows(xi_core *c, int rows) {
    if (rows <= c->cap_rows) return 0;
    int32_t *r = realloc(c->rows, (size_t)rows * sizeof *r);
    if (r) c->rows = r;
    int32_t *pp = realloc(c->row_prompt_pos, (size_t)rows * sizeof *pp);
    if (pp) c->row_prompt_pos = pp;
    xi_seq **rs = realloc(c->row_seq, (size_t)rows * sizeof *rs);
    if (rs) c->row_seq = rs;
    float *l = realloc(c->logits, (size_t)rows * (size_t)c->vocab * sizeof *l);
    if (l) c->logits = l;
    if (!r || !pp || !rs || !l) return -1;
    c->cap_rows = rows;
    return 0;
}

int xi_core_init(xi_core *c, const xi_core_params *p, xi_model *model, xi_kv_store *kv,
                 const xi_tokenizer *tok, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    c->p = *p;
    c->model = model;
    c->kv = kv;
    c->tok = tok;
    c->vocab = xi_model_config(model)->vocab_size;
    xi_rng_seed(&c->rng, p->seed);
    if (xi_kv_manager_init(&c->km, p->n_kv_blocks, p->block_size, p->enable_prefix_caching,
                           p->max_model_len, err, errlen))
        return -1;
    xi_sched_params sp = {p->max_num_seqs, p->max_num_batched_tokens, p->max_model_len,
                          p->enable_chunked_prefill};
    if (xi_sched_init(&c->sched, &sp, &c->km, err, errlen)) goto fail;
    if (xi_sample_scratch_init(&c->scratch, c->vocab, err, errlen)) goto fail;
    size_t T = (size_t)p->max_num_batched_tokens, S = (size_t)p->max_num_seqs;
    c->tokens = xi_calloc(T, sizeof *c->tokens);
    c->positions = xi_calloc(T, sizeof *c->positions);
    c->slots = xi_calloc(T, sizeof *c->slots);
    c->bseqs = xi_calloc(S, sizeof *c->bseqs);
    c->sample_row = xi_calloc(S, sizeof *c->sample_row);
    c->sampled = xi_calloc(S, sizeof *c->sampled);
    c->lp = xi_calloc(S, sizeof *c->lp);
    c->lp_top = xi_calloc(S * XI_SAMPLE_MAX_TOP_LOGPROBS, sizeof *c->lp_top);
    c->lhash = xi_calloc(S, sizeof *c->lhash);
    c->hidden_size = xi_model_config(model)->hidden_size;
    c->pool_row = xi_calloc(S, sizeof *c->pool_row);
    c->hid_rows = xi_calloc(S, sizeof *c->hid_rows);
    c->hidden = xi_calloc(S * (size_t)c->hidden_size, sizeof *c->hidden);
    if (!c->tokens || !c->positions || !c->slots || !c->bseqs || !c->sample_row ||
        !c->sampled || !c->lp || !c->lp_top || !c->lhash || !c->pool_row || !c->hid_rows ||
        !c->hidden || grow_rows(c, (int)S)) {
        xi_errf(err, errlen, "max_num_seqs: out of memory for per-step buffers");
        goto fail;
    }
    if (xi_model_reserve(model, p->max_num_batched_tokens, p->max_num_seqs, err, errlen)) goto fail;
    return 0;
fail:
    xi_core_free(c);
    return -1;
}

/* ---- outputs --------------------------------------------------------------------------- */

static xi_finish_reason public_reason(xi_req_finish f) {
    switch (f) {
    case XI_REQ_FINISHED_STOP: return XI_FINISH_STOP;
    case XI_REQ_FINISHED_LENGTH: return XI_FINISH_LENGTH;
    case XI_REQ_FINISHED_ABORT: return XI_FINISH_ABORT;
    case XI_REQ_FINISHED_ERROR: return XI_FINISH_ERROR;
    default: return XI_FINISH_NONE;
    }
}

/* Deliver one event for s: new_ids (0 or 1 here), the text s->text[text_sent, text_end). */
static void emit(xi_seq *s, const int32_t *new_ids, int n_new,
                 const xi_token_logprob *lp, uint64_t lhash, size_t text_end,
                 xi_finish_reason fr) {
    xi_group *g = s->grp;
    const xi_request *r = &s->req;
    if (text_end < s->text_sent) text_end = s->text_sent;
    xi_output o = {0};
    o.request_id = g->id;
    o.index = s->index;
    o.new_ids = new_ids;
    o.n_new = n_new;
    o.text = s->text.data ? s->text.data + s->text_sent : "";
    o.text_len = text_end - s->text_sent;
    o.logprobs = g->logprobs >= 0 && n_new ? lp : NULL;
    if (g->plp && s->index == 0 && !g->plp_sent && n_new) {
        o.prompt_logprobs = g->plp;
        o.n_prompt_logprobs = g->n_prompt;
        g->plp_sent = 1;
    }
    o.finish_reason = fr;
    o.stop_reason = s->stop_reason;
    o.stop_token = r->stop_token;
    o.prompt_tokens = g->n_prompt;
    o.cached_prompt_tokens = XI_MAX(r->num_cached_prompt, 0);
    o.generated_tokens = xi_request_num_outputs(r);
    o.arrival_time = g->arrival_wall;
    if (s->t_first_sched > 0) o.queue_time = s->t_first_sched - g->arrival;
    if (s->t_first_token > 0) {
        o.first_token_time = s->t_first_token - g->arrival;
        o.prefill_time = s->t_first_token - s->t_first_sched;
        o.decode_time = s->t_last_token - s->t_first_token;
    }
    o.logits_hash = lhash;
    if (s->embedding && fr != XI_FINISH_NONE) {
        o.embedding = s->embedding;
        o.n_embedding = s->n_embedding;
    }
    s->text_sent = text_end;
    if (fr != XI_FINISH_NONE) {
        s->done = 1;
        g->n_done++;
    }
    if (g->fn) g->fn(g->user, &o);
}

/* Bytes at the end of the text that could begin a stop string: withheld until resolved. */
static size_t stop_withheld(const xi_seq *s) {
    const xi_group *g = s->grp;
    size_t best = 0, len = s->text.len;
    for (int i = 0; i < g->n_stop; i++) {
        size_t sl = strlen(g->stop[i]);
        for (size_t k = XI_MIN(sl - (sl > 0), len); k > best; k--) {
            if (!memcmp(s->text.data + len - k, g->stop[i], k)) {
                best = k;
                break;
            }
        }
    }
    return best;
}

/* vLLM's check_stop_strings: search each stop string (in the order given) in the text that
 * the newest token could have completed; on a match cut the text there (after the string
 * with include_stop_str_in_output). Returns 1 on a match. */
static int match_stop_string(xi_seq *s, size_t before) {
    xi_group *g = s->grp;
    for (int i = 0; i < g->n_stop; i++) {
        size_t sl = strlen(g->stop[i]);
        if (!sl || s->text.len < sl) continue;
        size_t from = before + 1 > sl ? before + 1 - sl : 0;
        const char *hit = memmem(s->text.data + from, s->text.len - from, g->stop[i], sl);
        if (!hit) continue;
        size_t pos = (size_t)(hit - s->text.data);
        s->text.len = g->include_stop_str ? pos + sl : pos;
        s->text.data[s->text.len] = 0;
        s->stop_reason = g->stop[i];
        return 1;
    }
    return 0;
}

/* A sequence received token tok this step (already appended by the scheduler). */
static void seq_on_token(xi_core *c, xi_seq *s, int32_t tok, const xi_token_logprob *lp,
                         uint64_t lhash) {
    xi_request *r = &s->req;
    int finished = r->status == XI_REQ_FINISHED;
    /* The EOS / stop id that ends a sequence is not part of its text (vLLM), unless asked. */
    int hide = finished && r->finish == XI_REQ_FINISHED_STOP && !s->grp->include_stop_str;
    size_t before = s->text.len;
    /* An id the model has but the tokenizer lacks (padded vocabularies) has no text, as in
     * Hugging Face decoding; the sequence goes on. */
    if (!hide && tok < xi_tokenizer_vocab_size(c->tok)) xi_detok_push(&s->detok, tok, &s->text);
    /* As vLLM's detokenizer: stop strings count only past min_tokens, and one completed by
     * the last token wins over a length finish of the same step. */
    if (s->grp->n_stop && xi_request_num_outputs(r) > s->grp->min_tokens &&
        match_stop_string(s, before)) {
        if (finished) {
            r->finish = XI_REQ_FINISHED_STOP;
            r->stop_token = -1;
        } else {
            xi_sched_finish(&c->sched, r, XI_REQ_FINISHED_STOP);
            finished = 1;
        }
    }
    size_t end = s->text.len;
    if (!finished) end -= stop_withheld(s);
    emit(s, &r->tokens[r->n_tokens - 1], 1, lp, lhash, end,
         finished ? public_reason(r->finish) : XI_FINISH_NONE);
}

/* Finish every unfinished sample of g with why, emitting a final event each. */
static void group_finish(xi_core *c, xi_group *g, xi_req_finish why) {
    for (int i = 0; i < g->n; i++) {
        xi_seq *s = &g->seqs[i];
        if (s->done) continue;
        xi_sched_finish(&c->sched, &s->req, why);
        emit(s, NULL, 0, NULL, 0, s->text_sent, public_reason(s->req.finish));
    }
}

/* Free every live group whose samples are all done. */
static void sweep_done(xi_core *c) {
    xi_group **link = &c->live;
    while (*link) {
        xi_group *g = *link;
        if (g->n_done == g->n) {
            *link = g->next;
            c->n_live--;
            xi_group_free(g);
        } else {
            link = &g->next;
        }
    }
}

void xi_core_free(xi_core *c) {
    for (xi_group *g = c->live; g; g = g->next) group_finish(c, g, XI_REQ_FINISHED_ABORT);
    sweep_done(c);
    xi_sched_free(&c->sched);
    xi_kv_manager_free(&c->km);
    xi_sample_scratch_free(&c->scratch);
    xi_guide_cache_free(&c->grammars);
    xi_guide_vocab_free(&c->guide);
    free(c->tokens);
    free(c->positions);
    free(c->slots);
    free(c->bseqs);
    free(c->sample_row);
    free(c->sampled);
    free(c->lp);
    free(c->lp_top);
    free(c->lhash);
    free(c->pool_row);
    free(c->hid_rows);
    free(c->hidden);
    free(c->rows);
    free(c->row_prompt_pos);
    free(c->row_seq);
    free(c->logits);
    memset(c, 0, sizeof *c);
}

/* ---- admission and abort --------------------------------------------------------------- */

static void fail_group(xi_group *g) {
    xi_output o = {0};
    o.request_id = g->id;
    o.text = "";
    o.stop_token = -1;
    o.finish_reason = XI_FINISH_ERROR;
    o.prompt_tokens = g->n_prompt;
    o.arrival_time = g->arrival_wall;
    for (int i = 0; i < g->n; i++) {
        o.index = i;
        if (g->fn) g->fn(g->user, &o);
    }
    xi_group_free(g);
}

void xi_core_add(xi_core *c, xi_group *g) {
    g->seqs = calloc((size_t)g->n, sizeof *g->seqs);
    if (!g->seqs) {
        fail_group(g);
        return;
    }
    /* the sampler masks EOS (unless ignored) and stop ids until min_tokens */
    int32_t mask_small[16];
    int n_mask = g->n_stop_ids + (g->eos_token_id >= 0 && !g->ignore_eos);
    int32_t *mask = n_mask <= 16 ? mask_small : malloc((size_t)n_mask * sizeof *mask);
    if (!mask) {
        fail_group(g);
        return;
    }
    int m = 0;
    if (g->eos_token_id >= 0 && !g->ignore_eos) mask[m++] = g->eos_token_id;
    for (int i = 0; i < g->n_stop_ids; i++) mask[m++] = g->stop_ids[i];
    if (g->grammar) { /* the guide's end tokens are the same list */
        char err[128];
        g->end_ids = dup_array(mask, (size_t)m, sizeof *mask);
        g->n_end = m;
        if ((m && !g->end_ids) ||
            (!c->guide.vocab && xi_guide_vocab_init(&c->guide, c->tok, c->vocab, err, sizeof err))) {
            if (mask != mask_small) free(mask);
            fail_group(g);
            return;
        }
        g->grammar = xi_guide_cache_share(&c->grammars, g->grammar, g->guide_kind, g->guide_src, &g->grammar_ref);
    }
    /* a pooling prompt may fill max_model_len; its one spare slot is never used */
    int max_len = g->pooling ? g->n_prompt + 1
                             : (int)XI_MIN((int64_t)g->n_prompt + g->max_tokens, (int64_t)c->p.max_model_len);
    int ok = 1;
    for (int i = 0; ok && i < g->n; i++) {
        xi_seq *s = &g->seqs[i];
        s->grp = g;
        s->index = i;
        xi_sampling sp = g->sampling;
        sp.stop_ids = mask;
        sp.n_stop_ids = m;
        sp.seed = g->seed >= 0 ? (uint64_t)g->seed + (uint64_t)i : xi_rng_next(&c->rng);
        if (!g->pooling) s->sampler = xi_sampler_new(&sp, g->prompt, g->n_prompt, c->vocab, NULL, 0);
        xi_request_limits lim = {
            .max_tokens = g->max_tokens,
            .min_tokens = g->min_tokens,
            .ignore_eos = g->ignore_eos,
            .eos_token_id = g->eos_token_id,
            .stop_ids = g->stop_ids,
            .n_stop_ids = g->n_stop_ids,
            /* every prompt row's logits are needed: no cached rows for sample 0 */
            .skip_prefix_cache = g->prompt_logprobs >= 0 && i == 0,
        };
        ok = (s->sampler || g->pooling) && xi_request_init(&s->req, g->id, g->prompt, g->n_prompt, &lim,
                                           max_len, c->p.block_size, g->cache_salt, NULL, 0) == 0;
        if (g->grammar && xi_grammar_state_init(g->grammar, &s->gs)) ok = 0;
        s->req.user = s;
        s->req.client = g->client ? g->client : g->id;
        xi_detok_init(&s->detok, c->tok, g->skip_special);
        xi_detok_prime(&s->detok, g->prompt, g->n_prompt);
        /* room for the usual text up front, so decode steps rarely grow it */
        size_t text_cap = (size_t)XI_MIN(g->max_tokens, 4096) * 8 + 16;
        s->text.data = malloc(text_cap);
        if (s->text.data) {
            s->text.cap = text_cap;
            s->text.data[0] = 0;
        }
        ok = ok && s->text.data;
    }
    if (mask != mask_small) free(mask);
    if (!ok) {
        fail_group(g);
        return;
    }
    g->next = c->live;
    c->live = g;
    c->n_live++;
    for (int i = 0; i < g->n; i++) xi_sched_add(&c->sched, &g->seqs[i].req);
}

void xi_core_abort(xi_core *c, int64_t id) {
    for (xi_group *g = c->live; g; g = g->next) {
        if (g->id != id) continue;
        g->aborted = 1;
        group_finish(c, g, XI_REQ_FINISHED_ABORT);
        break;
    }
    sweep_done(c);
}

/* ---- the step -------------------------------------------------------------------------- */

/* Does scheduled sequence s still owe prompt logprobs? */
static int wants_prompt_rows(const xi_seq *s) {
    return s->grp->plp && s->index == 0 && !s->grp->plp_sent;
}

/* Flatten the plan into the batch arrays and choose the logits rows. */
static int build_batch(xi_core *c, xi_batch *b) {
    const xi_sched_out *o = &c->sched.out;
    const int bs = c->p.block_size;
    int need = 0;
    for (int i = 0; i < o->n; i++) {
        const xi_seq *s = o->reqs[i]->user;
        need += o->sample[i];
        if (wants_prompt_rows(s))
            need += XI_MAX(XI_MIN(o->start[i] + o->n_tokens[i], s->grp->n_prompt - 1) - o->start[i], 0);
    }
    if (grow_rows(c, need)) return -1;
    double now = xi_now();
    int T = 0, R = 0, H = 0;
    for (int i = 0; i < o->n; i++) {
        xi_request *r = o->reqs[i];
        xi_seq *s = r->user;
        const int start = o->start[i], len = o->n_tokens[i];
        if (s->t_first_sched == 0) s->t_first_sched = now;
        c->bseqs[i] = (xi_batch_seq){T, len, r->blocks, r->n_blocks};
        for (int j = 0; j < len; j++) {
            int pos = start + j;
            c->tokens[T + j] = r->tokens[pos];
            c->positions[T + j] = pos;
            c->slots[T + j] = (int64_t)r->blocks[pos / bs] * bs + pos % bs;
        }
        if (wants_prompt_rows(s)) {
            int end = XI_MIN(start + len, s->grp->n_prompt - 1);
            for (int pos = start; pos < end; pos++) {
                c->rows[R] = T + pos - start;
                c->row_prompt_pos[R] = pos + 1;
                c->row_seq[R++] = s;
            }
        }
        c->sample_row[i] = c->pool_row[i] = -1;
        if (o->sample[i] && s->grp->pooling) {
            c->hid_rows[H] = T + len - 1;
            c->pool_row[i] = H++;
        } else if (o->sample[i]) {
            c->rows[R] = T + len - 1;
            c->row_prompt_pos[R] = -1;
            c->row_seq[R] = s;
            c->sample_row[i] = R++;
        }
        T += len;
    }
    *b = (xi_batch){.n_tokens = T, .tokens = c->tokens, .positions = c->positions,
                    .slots = c->slots, .n_seqs = o->n, .seqs = c->bseqs, .n_logits = R,
                    .logits_rows = c->rows, .n_hidden = H,
                    .hidden_rows = c->hid_rows, .hidden = c->hidden};
    return 0;
}

/* Logprobs of every prompt row computed this step. */
static void score_prompt_rows(xi_core *c, int n_rows) {
    for (int k = 0; k < n_rows; k++) {
        int pos = c->row_prompt_pos[k];
        if (pos < 0) continue;
        xi_group *g = c->row_seq[k]->grp;
        int ntop = g->prompt_logprobs;
        xi_sample_logprobs(c->logits + (size_t)k * c->vocab, c->vocab, g->prompt[pos], ntop,
                           &g->plp[pos], g->plp_top + (size_t)pos * (size_t)(ntop ? ntop : 1));
    }
}

/* v / max(|v|, 1e-12), as torch's F.normalize; the sum runs in one fixed order. */
static void l2_normalize(float *v, int n) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)v[i] * v[i];
    const double inv = 1.0 / fmax(sqrt(ss), 1e-12);
    for (int i = 0; i < n; i++) v[i] = (float)(v[i] * inv);
}

/* Pooling sequences whose prompt completed this step: the last row's final hidden state
 * (cut to its first `dimensions` values, then normalised when asked) is their one output,
 * and they finish before update() could append a token. Their blocks stay in the prefix
 * cache like any finished request's. */
static void finish_pooled(xi_core *c) {
    const xi_sched_out *o = &c->sched.out;
    const double now = xi_now();
    for (int i = 0; i < o->n; i++) {
        if (c->pool_row[i] < 0) continue;
        xi_seq *s = o->reqs[i]->user;
        float *v = c->hidden + (size_t)c->pool_row[i] * (size_t)c->hidden_size;
        const int n = s->grp->dimensions > 0 ? s->grp->dimensions : c->hidden_size;
        if (s->grp->normalize) l2_normalize(v, n);
        s->t_first_token = s->t_last_token = now;
        c->prompt_tokens_total += s->grp->n_prompt;
        xi_sched_finish(&c->sched, &s->req, XI_REQ_FINISHED_STOP);
        s->embedding = v;
        s->n_embedding = n;
        emit(s, NULL, 0, NULL, 0, 0, XI_FINISH_STOP);
        s->embedding = NULL;
    }
}

int xi_core_step(xi_core *c, char *err, size_t errlen) {
    xi_scheduler *sc = &c->sched;
    const xi_sched_out *o = &sc->out;
    double t0 = xi_now();
    int n = xi_sched_schedule(sc);
    double t1 = xi_now();
    c->t_sched += t1 - t0;
    if (n == 0) {
        sweep_done(c);
        return c->n_live;
    }
    c->steps++;
    int bucket = 0;
    while (bucket < XI_N_ITERATION_TOKEN_BOUNDS && o->total_tokens > xi_iteration_token_bounds[bucket]) bucket++;
    c->iter_tokens[bucket]++;
    c->iter_tokens_sum += o->total_tokens;
    xi_batch b;
    int rc = build_batch(c, &b);
    double t2 = xi_now();
    c->t_batch += t2 - t1;
    if (rc) xi_errf(err, errlen, "logits: out of memory for prompt logprobs rows");
    else rc = xi_model_forward(c->model, c->kv, &b, c->logits, err, errlen);
    double t3 = xi_now();
    c->t_forward += t3 - t2;
    if (rc) {
        for (int i = 0; i < o->n; i++) group_finish(c, ((xi_seq *)o->reqs[i]->user)->grp, XI_REQ_FINISHED_ERROR);
        sweep_done(c);
        return -1;
    }
    score_prompt_rows(c, b.n_logits);
    finish_pooled(c);
    for (int i = 0; i < o->n; i++) {
        if (c->sample_row[i] < 0) continue;
        xi_seq *s = o->reqs[i]->user;
        const float *row = c->logits + (size_t)c->sample_row[i] * c->vocab;
        const uint8_t *allow = NULL;
        if (s->grp->grammar) {
            const int more = xi_sampler_n_generated(s->sampler) < s->grp->min_tokens;
            xi_guide_mask(&c->guide, s->grp->grammar, &s->gs, s->grp->end_ids, s->grp->n_end, more,
                          s->grp->guide_json);
            allow = c->guide.allow;
        }
        int32_t tok = xi_sampler_sample_masked(s->sampler, row, allow, &c->scratch);
        c->sampled[i] = tok;
        if (tok < 0) {
            xi_sched_finish(sc, &s->req, XI_REQ_FINISHED_ERROR);
            continue;
        }
        if (s->grp->logprobs >= 0)
            xi_sample_logprobs(row, c->vocab, tok, s->grp->logprobs, &c->lp[i],
                               c->lp_top + (size_t)i * XI_SAMPLE_MAX_TOP_LOGPROBS);
        c->lhash[i] = s->grp->return_logits_hash ? xi_hash64(row, (size_t)c->vocab * sizeof *row) : 0;
    }
    double t4 = xi_now();
    c->t_sample += t4 - t3;
    xi_sched_update(sc, c->sampled);
    double now = xi_now();
    c->t_sched += now - t4;
    for (int i = 0; i < o->n; i++) {
        if (c->sample_row[i] < 0) continue;
        xi_seq *s = o->reqs[i]->user;
        if (c->sampled[i] < 0) {
            emit(s, NULL, 0, NULL, 0, s->text_sent, XI_FINISH_ERROR);
            continue;
        }
        xi_sampler_accept(s->sampler, c->sampled[i]);
        if (s->grp->grammar) xi_guide_advance(&c->guide, s->grp->grammar, &s->gs, c->sampled[i]);
        if (s->t_first_token == 0) {
            s->t_first_token = now;
            c->prompt_tokens_total += s->grp->n_prompt; /* per sample, as vLLM's n child requests */
        }
        s->t_last_token = now;
        c->generation_tokens_total++;
        seq_on_token(c, s, c->sampled[i], &c->lp[i], c->lhash[i]);
    }
    sweep_done(c);
    c->t_output += xi_now() - now;
    return c->n_live;
}
