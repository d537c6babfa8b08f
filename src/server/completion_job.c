/* server/completion_job: a completion job's life cycle, the engine's output callback (on the
 * engine thread: copy the event, never wait) and the prompts it submits (see completion_job.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/base.h"
#include "server/completion_job.h"
#include "server/cors.h"

/* ---- job life cycle ----------------------------------------------------------------------- */

static void lp_free(lp_copy *l, int n) {
    for (int i = 0; l && i < n; i++) free(l[i].top);
    free(l);
}

void xi_job_event_free(job_event *ev) {
    free(ev->text);
    free(ev->new_ids);
    lp_free(ev->lps, ev->n_ids);
    lp_free(ev->plps, ev->n_plps);
    free(ev->stop_reason);
    free(ev);
}

xi_job *xi_job_new(xi_server *s, struct MHD_Connection *c, int api, int http11) {
    xi_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_mutex_init(&j->mu, NULL);
    j->s = s;
    j->eng = atomic_load(&s->engine);
    j->conn = c;
    j->http11 = http11;
    j->refs = 1; /* the handler's; handed to the connection when streaming */
    j->created = (long)time(NULL);
    const char *prefix = api == XI_API_RESPONSES ? "resp" : api != XI_API_COMPLETIONS ? "chatcmpl" : "cmpl";
    if (xi_http_client_request_id()) snprintf(j->id, sizeof j->id, "%s-%s", prefix, xi_http_client_request_id());
    else xi_srv_new_id(s, prefix, j->id);
    pthread_mutex_lock(&s->mu);
    j->next = s->jobs;
    if (s->jobs) s->jobs->prev = j;
    s->jobs = j;
    s->n_jobs++;
    pthread_mutex_unlock(&s->mu);
    return j;
}

static void job_free(xi_job *j) {
    xi_server *s = j->s;
    pthread_mutex_lock(&s->mu);
    if (j->prev) j->prev->next = j->next;
    else if (s->jobs == j) s->jobs = j->next;
    if (j->next) j->next->prev = j->prev;
    s->n_jobs--;
    pthread_mutex_unlock(&s->mu);
    while (j->head) {
        job_event *n = j->head->next;
        xi_job_event_free(j->head);
        j->head = n;
    }
    for (int i = 0; i < j->n_subs; i++) {
        free(j->subs[i].ids);
        free(j->subs[i].echo_text);
        lp_free(j->subs[i].plps, j->subs[i].n_plps);
    }
    for (int i = 0; i < j->n_choices; i++) {
        xi_buf_free(&j->choices[i].text);
        free(j->choices[i].stop_reason);
        json_decref(j->choices[i].lp);
        json_decref(j->choices[i].token_ids);
    }
    free(j->subs);
    free(j->choices);
    xi_buf_free(&j->out);
    xi_resp_free(j->resp);
    xi_oai_request_free(&j->req);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

void xi_job_release(xi_job *j) {
    pthread_mutex_lock(&j->mu);
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (!left) job_free(j);
}

void xi_job_abort(xi_job *j) {
    int64_t ids[64];
    int n = 0;
    pthread_mutex_lock(&j->mu);
    for (int i = 0; i < j->n_subs; i++)
        if (j->subs[i].id >= 0 && j->subs[i].unfinished > 0) {
            if (n == 64) {
                pthread_mutex_unlock(&j->mu);
                for (int k = 0; k < n; k++) xi_engine_abort(j->eng, ids[k]);
                n = 0;
                pthread_mutex_lock(&j->mu);
            }
            ids[n++] = j->subs[i].id;
        }
    pthread_mutex_unlock(&j->mu);
    for (int k = 0; k < n; k++) xi_engine_abort(j->eng, ids[k]);
}

void xi_job_connection_done(xi_job *j, int ok) {
    if (!ok) xi_job_abort(j);
    xi_job_release(j);
}

void xi_server_abort_all(xi_server *s) {
    /* Engine ids are never reused, so aborting an id that has just finished is harmless;
     * collecting them under the locks keeps every job alive while it is read. */
    for (;;) {
        int64_t ids[256];
        int n = 0, more = 0;
        pthread_mutex_lock(&s->mu);
        for (xi_job *j = s->jobs; j && !more; j = j->next) {
            pthread_mutex_lock(&j->mu);
            for (int i = 0; i < j->n_subs; i++) {
                if (j->subs[i].id < 0 || j->subs[i].unfinished <= 0) continue;
                if (n == 256) {
                    more = 1;
                    break;
                }
                ids[n++] = j->subs[i].id;
            }
            pthread_mutex_unlock(&j->mu);
        }
        xi_engine *eng = atomic_load(&s->engine);
        pthread_mutex_unlock(&s->mu);
        for (int k = 0; k < n && eng; k++) xi_engine_abort(eng, ids[k]);
        if (!more) return;
    }
}

/* ---- engine thread: copy the event, never wait -------------------------------------------- */

static lp_copy *lp_dup(const xi_token_logprob *src, int n) {
    lp_copy *d = calloc((size_t)n, sizeof *d);
    if (!d) return NULL;
    for (int i = 0; i < n; i++) {
        d[i].token = src[i].token;
        d[i].logprob = src[i].logprob;
        d[i].rank = src[i].rank;
        if (src[i].n_top > 0 && src[i].top) {
            d[i].top = malloc((size_t)src[i].n_top * sizeof *d[i].top);
            if (d[i].top) {
                memcpy(d[i].top, src[i].top, (size_t)src[i].n_top * sizeof *d[i].top);
                d[i].n_top = src[i].n_top;
            }
        }
    }
    return d;
}

static void observe_finish(xi_server *s, const xi_output *o) {
    if (!s->metrics) return;
    xi_metrics_sample m = {
        .finish = o->finish_reason,
        .ttft = o->generated_tokens > 0 ? o->first_token_time : -1,
        .e2e = o->arrival_time > 0 ? xi_wall_time() - o->arrival_time : -1,
        .queue = o->queue_time,
        .prefill = o->prefill_time,
        .decode = o->decode_time,
        .prompt_tokens = o->prompt_tokens,
        .generation_tokens = o->generated_tokens,
        .prefilled = o->generated_tokens > 0,
    };
    xi_metrics_observe(s->metrics, &m);
}

static void on_output(void *user, const xi_output *o) {
    job_sub *sub = user;
    xi_job *j = sub->job;
    int choice = sub->prompt_idx * j->req.n + (o->index >= 0 && o->index < j->req.n ? o->index : 0);
    job_event *ev = calloc(1, sizeof *ev);
    if (ev) {
        ev->choice = choice;
        ev->finish = o->finish_reason;
        ev->stop_token = o->stop_token;
        ev->generated = o->generated_tokens;
        ev->prompt_tokens = o->prompt_tokens;
        ev->cached = o->cached_prompt_tokens;
        if (o->text_len && (ev->text = malloc(o->text_len))) {
            memcpy(ev->text, o->text, o->text_len);
            ev->text_len = o->text_len;
        }
        if (o->n_new > 0 && o->logprobs && (ev->lps = lp_dup(o->logprobs, o->n_new)))
            ev->n_ids = o->n_new;
        if (o->n_prompt_logprobs > 0 && o->prompt_logprobs &&
            (ev->plps = lp_dup(o->prompt_logprobs, o->n_prompt_logprobs)))
            ev->n_plps = o->n_prompt_logprobs;
        if (o->stop_reason) ev->stop_reason = strdup(o->stop_reason);
        if (j->req.return_token_ids && o->n_new > 0 && (ev->new_ids = malloc((size_t)o->n_new * sizeof *ev->new_ids))) {
            memcpy(ev->new_ids, o->new_ids, (size_t)o->n_new * sizeof *ev->new_ids);
            ev->n_new = o->n_new;
        }
    }
    /* inter-token latency: the time since this sample's previous tokens, per new token */
    job_choice *c = &j->choices[choice];
    double now = xi_now();
    if (o->n_new > 0 && c->last_time > 0 && j->s->metrics)
        for (int i = 0; i < o->n_new; i++) xi_metrics_observe_itl(j->s->metrics, (now - c->last_time) / o->n_new);
    if (o->n_new > 0) c->last_time = now;
    if (o->finish_reason != XI_FINISH_NONE) observe_finish(j->s, o);

    pthread_mutex_lock(&j->mu);
    if (ev) {
        if (j->tail) j->tail->next = ev;
        else j->head = ev;
        j->tail = ev;
    }
    int left = j->refs;
    if (o->finish_reason != XI_FINISH_NONE) {
        if (o->generated_tokens > sub->max_gen) sub->max_gen = o->generated_tokens;
        if (sub->unfinished == 1 && j->s->metrics) xi_metrics_observe_max_gen(j->s->metrics, sub->max_gen);
        sub->unfinished--;
        j->n_unfinished--;
        left = --j->refs;
        if (!ev) j->choices[choice].finish = XI_FINISH_ERROR;
    }
    if (j->suspended && (j->req.stream || j->n_unfinished == 0)) {
        j->suspended = 0;
        MHD_resume_connection(j->conn);
    }
    pthread_mutex_unlock(&j->mu);
    if (!left) job_free(j);
}

/* ---- prompts and submission ---------------------------------------------------------------- */

/* Prompts → token ids with the max-model-len check. */
int xi_job_prepare(xi_job *j, xi_oai_error *e) {
    xi_oai_request *r = &j->req;
    char err[512] = "";
    char *rendered = NULL;
    if (r->chat) {
        rendered = xi_engine_apply_chat_template(j->eng, r->messages_json, r->tools_json, r->kwargs_json,
                                                 r->add_generation_prompt,
                                                 r->continue_final_message, err, sizeof err);
        /* the renders in progress filled the server's template budget: a retry may pass */
        if (!rendered) return xi_oai_fail(e, strstr(err, "retry later") ? 503 : 400, "messages", "%s", err);
    }
    int n_prompts = r->chat ? 1 : r->n_prompts;
    j->subs = calloc((size_t)n_prompts, sizeof *j->subs);
    j->choices = calloc((size_t)n_prompts * (size_t)r->n, sizeof *j->choices);
    if (!j->subs || !j->choices) {
        free(rendered);
        return xi_oai_fail(e, 500, NULL, "out of memory");
    }
    j->n_subs = n_prompts;
    j->n_choices = n_prompts * r->n;
    int max_len = j->s->info.max_model_len;
    for (int i = 0; i < n_prompts; i++) {
        job_sub *sub = &j->subs[i];
        sub->job = j;
        sub->prompt_idx = i;
        sub->id = -1;
        const char *text = r->chat ? rendered : r->prompts[i].text;
        if (text) {
            /* stops past max_model_len: a 30 MB prompt is refused as fast as a 1 MB one */
            sub->n_prompt = xi_engine_tokenize_limit(j->eng, text, r->add_special_tokens,
                                                     max_len > 0 ? max_len : INT_MAX - 1, &sub->ids, err, sizeof err);
            if (sub->n_prompt < 0) {
                free(rendered);
                sub->n_prompt = 0;
                return xi_oai_fail(e, 400, r->chat ? "messages" : "prompt", "%s", err);
            }
            if (max_len > 0 && sub->n_prompt > max_len) { /* tokenization stopped there */
                free(rendered);
                return xi_oai_fail(e, 400, r->chat ? "messages" : "prompt",
                                   "This model's maximum context length is %d tokens. However, your %s has more "
                                   "than %d tokens, over the limit.", max_len, r->chat ? "messages" : "prompt", max_len);
            }
            if (r->echo) sub->echo_text = strdup(text);
        } else {
            sub->n_prompt = r->prompts[i].n_ids;
            sub->ids = malloc((size_t)sub->n_prompt * sizeof *sub->ids);
            if (!sub->ids) {
                free(rendered);
                return xi_oai_fail(e, 500, NULL, "out of memory");
            }
            memcpy(sub->ids, r->prompts[i].ids, (size_t)sub->n_prompt * sizeof *sub->ids);
            if (r->echo) {
                sub->echo_text = xi_engine_detokenize(j->eng, sub->ids, sub->n_prompt, 0, err, sizeof err);
                if (!sub->echo_text) {
                    free(rendered);
                    return xi_oai_fail(e, 400, "prompt", "%s", err);
                }
            }
        }
        const char *what = r->chat ? "messages" : "prompt";
        if (sub->n_prompt == 0) {
            free(rendered);
            return xi_oai_fail(e, 400, what, "the prompt is empty (0 tokens)");
        }
        long total = (long)sub->n_prompt + (r->max_tokens > 0 ? r->max_tokens : 0);
        if (max_len > 0 && (total > max_len || sub->n_prompt >= max_len)) {
            free(rendered);
            if (r->max_tokens > 0)
                return xi_oai_fail(e, 400, r->chat ? "messages" : "prompt",
                                   "This model's maximum context length is %d tokens. However, you requested %ld tokens (%d in the %s, %d in the completion), %ld over the limit. Please reduce the length of the %s or completion.",
                                   max_len, total, sub->n_prompt, what, r->max_tokens, total - max_len, what);
            return xi_oai_fail(e, 400, what,
                               "This model's maximum context length is %d tokens. However, your %s has %d tokens, %d over the limit (at least one token must remain for the completion).",
                               max_len, what, sub->n_prompt, sub->n_prompt - max_len + 1);
        }
    }
    free(rendered);
    return 0;
}

int xi_job_submit(xi_job *j, xi_oai_error *e) {
    for (int i = 0; i < j->n_subs; i++) {
        job_sub *sub = &j->subs[i];
        xi_request_params p = j->req.params;
        p.prompt = NULL;
        p.prompt_ids = sub->ids;
        p.n_prompt_ids = sub->n_prompt;
        p.client = (int64_t)(uintptr_t)j; /* one client to the scheduler's fairness */
        /* the final events may arrive before submit returns: count them in first */
        pthread_mutex_lock(&j->mu);
        j->refs += j->req.n;
        j->n_unfinished += j->req.n;
        sub->unfinished = j->req.n;
        pthread_mutex_unlock(&j->mu);
        char err[512] = "";
        int64_t id = xi_engine_submit(j->eng, &p, on_output, sub, err, sizeof err);
        pthread_mutex_lock(&j->mu);
        if (id >= 0) {
            sub->id = id;
            if (j->s->metrics)
                xi_metrics_observe_params(j->s->metrics, j->req.n, j->req.max_tokens > 0 ? j->req.max_tokens
                                                                   : j->s->info.max_model_len - sub->n_prompt);
        } else {
            j->refs -= j->req.n;
            j->n_unfinished -= j->req.n;
            sub->unfinished = 0;
        }
        pthread_mutex_unlock(&j->mu);
        if (id == -2) return xi_oai_fail(e, 503, NULL, "the server is overloaded: the waiting queue is full (--max-queue-len); retry later");
        if (id < 0) {
            char param[64] = "";
            size_t k = strcspn(err, ": ");
            if (k < sizeof param && err[k] == ':') memcpy(param, err, k);
            if (!strcmp(param, "prompt_ids")) strcpy(param, j->req.chat ? "messages" : "prompt");
            return xi_oai_fail(e, 400, param[0] ? param : NULL, "%s", err[0] ? err : "invalid request");
        }
    }
    return 0;
}
