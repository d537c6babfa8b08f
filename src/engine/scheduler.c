#include "engine/scheduler.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"

int xi_sched_init(xi_scheduler *s, const xi_sched_params *p, xi_kv_manager *kv, char *err,
                  size_t errlen) {
    memset(s, 0, sizeof *s);
    if (p->max_num_seqs < 1) return xi_errf(err, errlen, "max_num_seqs: %d, must be >= 1", p->max_num_seqs);
    if (p->max_num_batched_tokens < 1)
        return xi_errf(err, errlen, "max_num_batched_tokens: %d, must be >= 1",
                       p->max_num_batched_tokens);
    if (p->max_model_len < 2)
        return xi_errf(err, errlen, "max_model_len: %d, must be >= 2", p->max_model_len);
    s->p = *p;
    s->kv = kv;
    size_t ns = (size_t)p->max_num_seqs;
    int max_blocks = (p->max_model_len + kv->block_size - 1) / kv->block_size + 1;
    s->running = xi_calloc(ns, sizeof *s->running);
    s->hit_blocks = xi_calloc((size_t)max_blocks, sizeof *s->hit_blocks);
    s->out.reqs = xi_calloc(ns, sizeof *s->out.reqs);
    s->out.start = xi_calloc(ns, sizeof *s->out.start);
    s->out.n_tokens = xi_calloc(ns, sizeof *s->out.n_tokens);
    s->out.sample = xi_calloc(ns, 1);
    if (!s->running || !s->hit_blocks || !s->out.reqs || !s->out.start || !s->out.n_tokens ||
        !s->out.sample) {
        xi_sched_free(s);
        return xi_errf(err, errlen, "max_num_seqs: out of memory for %d sequences", p->max_num_seqs);
    }
    return 0;
}

void xi_sched_free(xi_scheduler *s) {
    free(s->running);
    free(s->hit_blocks);
    free(s->out.reqs);
    free(s->out.start);
    free(s->out.n_tokens);
    free(s->out.sample);
    memset(s, 0, sizeof *s);
}

/* ---- waiting queue --------------------------------------------------------------------- */

static void wait_push_back(xi_scheduler *s, xi_request *r) {
    r->next = NULL;
    r->prev = s->wait_tail;
    if (s->wait_tail) s->wait_tail->next = r;
    else s->wait_head = r;
    s->wait_tail = r;
    s->n_waiting++;
}

static void wait_push_front(xi_scheduler *s, xi_request *r) {
    r->prev = NULL;
    r->next = s->wait_head;
    if (s->wait_head) s->wait_head->prev = r;
    else s->wait_tail = r;
    s->wait_head = r;
    s->n_waiting++;
}

static void wait_unlink(xi_scheduler *s, xi_request *r) {
    if (r->prev) r->prev->next = r->next;
    else s->wait_head = r->next;
    if (r->next) r->next->prev = r->prev;
    else s->wait_tail = r->prev;
    r->prev = r->next = NULL;
    s->n_waiting--;
}

void xi_sched_add(xi_scheduler *s, xi_request *r) {
    r->status = XI_REQ_WAITING;
    wait_push_back(s, r);
}

/* ---- schedule -------------------------------------------------------------------------- */

static void plan_add(xi_scheduler *s, xi_request *r, int n_tokens) {
    xi_sched_out *o = &s->out;
    o->reqs[o->n] = r;
    o->start[o->n] = r->num_computed;
    o->n_tokens[o->n] = n_tokens;
    o->n++;
    o->total_tokens += n_tokens;
}

/* running[i] gives its blocks back and waits again at the front. */
static void preempt_at(xi_scheduler *s, int i) {
    xi_request *victim = s->running[i];
    memmove(s->running + i, s->running + i + 1, (size_t)(s->n_running - i - 1) * sizeof *s->running);
    s->n_running--;
    xi_kv_manager_free_request(s->kv, victim);
    victim->status = XI_REQ_PREEMPTED;
    victim->num_computed = 0;
    victim->n_preemptions++;
    s->num_preemptions++;
    s->out.n_preempted++;
    wait_push_front(s, victim);
}

/* ---- fairness ---------------------------------------------------------------------------
 * A client (one HTTP request: up to --max-seqs-per-request sequences) may hold at most half of
 * max_num_seqs while another client waits. Admission takes the first waiting request whose
 * client is under that share (FCFS among those; plain FCFS when there is none), and when every
 * slot is taken, the newest running sequence of a client over its share makes room for it.
 * Both read only the queues, so a run stays deterministic; requests without a client (0) are
 * each their own and see plain FCFS. */

enum { FAIR_SCAN = 4096 }; /* waiting requests looked at per decision */

static int fair_share(const xi_scheduler *s) { return XI_MAX(1, s->p.max_num_seqs / 2); }

static int running_of(const xi_scheduler *s, int64_t client) {
    int n = 0;
    for (int i = 0; i < s->n_running; i++) n += s->running[i]->client == client;
    return n;
}

/* The first waiting request whose client holds less than its share, or NULL. */
static xi_request *fair_candidate(const xi_scheduler *s) {
    int64_t over[16];
    int n_over = 0, scanned = 0;
    for (xi_request *r = s->wait_head; r && scanned < FAIR_SCAN; r = r->next, scanned++) {
        if (!r->client) return r;
        int known = 0;
        for (int k = 0; k < n_over && !known; k++) known = over[k] == r->client;
        if (known) continue;
        if (running_of(s, r->client) < fair_share(s)) return r;
        if (n_over < 16) over[n_over++] = r->client;
    }
    return NULL;
}

/* Every slot taken while a client under its share waits: preempt the newest running sequence
 * of a client over its share (it waits again, at the front, behind the fair candidate). */
static void make_room(xi_scheduler *s) {
    if (s->n_running < s->p.max_num_seqs || !s->wait_head) return;
    const xi_request *cand = fair_candidate(s);
    if (!cand || !cand->client) return;
    for (int i = s->n_running - 1; i >= 0; i--) {
        const int64_t c = s->running[i]->client;
        if (c && c != cand->client && running_of(s, c) > fair_share(s)) {
            preempt_at(s, i);
            return;
        }
    }
}

int xi_sched_schedule(xi_scheduler *s) {
    xi_sched_out *o = &s->out;
    o->n = o->total_tokens = o->n_preempted = 0;
    int budget = s->p.max_num_batched_tokens;
    make_room(s);

    /* Running requests first, oldest first. */
    for (int i = 0; i < s->n_running && budget > 0;) {
        xi_request *r = s->running[i];
        int n_new = XI_MIN(r->n_tokens - r->num_computed, budget);
        if (n_new <= 0) {
            i++;
            continue;
        }
        int ok = 0;
        for (;;) {
            if (xi_kv_manager_allocate_slots(s->kv, r, n_new, 0, NULL, 0) == 0) {
                ok = 1;
                break;
            }
            /* Out of blocks: the newest running request (never one planned already, those
             * sit before i) gives its blocks back, possibly r itself. */
            int victim_is_r = s->running[s->n_running - 1] == r;
            preempt_at(s, s->n_running - 1);
            if (victim_is_r) break;
        }
        if (!ok) break;
        plan_add(s, r, n_new);
        budget -= n_new;
        i++;
    }

    /* Then waiting requests, FCFS, unless this step had to preempt. */
    while (!o->n_preempted && s->wait_head && budget > 0 && s->n_running < s->p.max_num_seqs) {
        xi_request *r = fair_candidate(s);
        if (!r) r = s->wait_head;
        int n_hit = xi_kv_manager_get_computed_blocks(s->kv, r, s->hit_blocks);
        int hit_tokens = n_hit * s->kv->block_size;
        int n_new = r->n_tokens - hit_tokens;
        /* Without chunked prefill the rest must fit this step's budget. A preempted request
         * that grew past the whole budget could never fit, so it alone is chunked. */
        if (!s->p.enable_chunked_prefill && n_new > budget &&
            n_new <= s->p.max_num_batched_tokens)
            break;
        n_new = XI_MIN(n_new, budget);
        if (xi_kv_manager_allocate_slots(s->kv, r, n_new, hit_tokens, s->hit_blocks, n_hit))
            break;
        xi_kv_manager_count_lookup(s->kv, r, n_hit);
        wait_unlink(s, r);
        r->status = XI_REQ_RUNNING;
        r->num_computed = hit_tokens;
        if (r->num_cached_prompt < 0) r->num_cached_prompt = XI_MIN(hit_tokens, r->n_prompt);
        s->running[s->n_running++] = r;
        plan_add(s, r, n_new);
        budget -= n_new;
    }

    for (int i = 0; i < o->n; i++) {
        xi_request *r = o->reqs[i];
        r->num_computed += o->n_tokens[i];
        o->sample[i] = r->num_computed >= r->n_tokens;
    }
    return o->n;
}

/* ---- update / finish ------------------------------------------------------------------- */

void xi_sched_finish(xi_scheduler *s, xi_request *r, xi_req_finish why) {
    if (r->status == XI_REQ_FINISHED) return;
    if (r->status == XI_REQ_RUNNING) {
        int i = 0;
        while (i < s->n_running && s->running[i] != r) i++;
        if (i < s->n_running) {
            memmove(s->running + i, s->running + i + 1,
                    (size_t)(s->n_running - i - 1) * sizeof *s->running);
            s->n_running--;
        }
    } else {
        wait_unlink(s, r);
    }
    xi_kv_manager_free_request(s->kv, r);
    r->status = XI_REQ_FINISHED;
    if (r->finish == XI_REQ_NOT_FINISHED) r->finish = why;
}

void xi_sched_update(xi_scheduler *s, const int32_t *sampled) {
    const xi_sched_out *o = &s->out;
    for (int i = 0; i < o->n; i++) {
        xi_request *r = o->reqs[i];
        if (!o->sample[i] || r->status != XI_REQ_RUNNING) continue;
        if (xi_request_append(r, sampled[i]) || xi_request_check_stop(r, s->p.max_model_len))
            xi_sched_finish(s, r, r->finish ? r->finish : XI_REQ_FINISHED_LENGTH);
    }
}
