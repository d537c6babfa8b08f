/* server/completion: /v1/chat/completions and /v1/completions.
 *
 * A job is one HTTP request: one engine request per prompt, n samples each, one "choice" per
 * sample. The engine's output callback runs on the engine thread and must never wait: it copies
 * the event into the job's queue under the job mutex. No HTTP thread waits either: a job with
 * nothing to send suspends its connection, and the callback resumes it (streaming: on every
 * event; otherwise once every sample has finished). The HTTP thread then turns queued events
 * into the JSON body or SSE chunks at whatever pace the client reads, so a slow reader costs
 * memory (bounded by max_tokens), never engine time. libmicrohttpd does not watch suspended
 * sockets, so the server's watchdog (xi_job_watch) checks their clients. A job is reference
 * counted: one reference per unfinished sample (dropped by the engine's final event), one for
 * the handler/connection and one for a streaming response. */
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/embeddings.h"
#include "server/server_internal.h"
#include "server/cors.h"
#include "server/reasoning.h"
#include "server/responses.h"
#include "server/structured.h"
#include "server/tool_parse.h"

typedef struct lp_copy {
    int32_t token;
    float logprob;
    int rank;
    int n_top;
    xi_top_logprob *top;             /* [n_top] owned */
} lp_copy;

typedef struct job_event {
    struct job_event *next;
    int choice;
    char *text;                      /* [text_len] owned */
    size_t text_len;
    int n_ids;
    lp_copy *lps;                    /* [n_ids] owned, or NULL */
    int32_t *new_ids;                /* [n_new] the tokens themselves (return_token_ids), owned */
    int n_new;
    lp_copy *plps;                   /* [n_plps] prompt logprobs, owned, or NULL */
    int n_plps;
    xi_finish_reason finish;
    char *stop_reason;               /* owned or NULL */
    int32_t stop_token;
    int generated, prompt_tokens, cached;
} job_event;

typedef struct job_sub {
    xi_job *job;
    int prompt_idx;
    int64_t id;                      /* engine request id, -1 until submitted */
    int n_prompt;                    /* prompt tokens as submitted */
    int32_t *ids;                    /* [n_prompt] owned */
    char *echo_text;                 /* prompt text for echo, owned */
    int unfinished;                  /* samples still running (job mutex) */
    int max_gen;                     /* most tokens a finished sample generated (job mutex) */
    int cached;                      /* prompt tokens served from the prefix cache */
    lp_copy *plps;                   /* [n_plps] first prompt logprobs seen, owned */
    int n_plps;
} job_sub;

typedef struct job_choice {
    /* connection thread */
    char *text;                      /* [text_len] accumulated output (non-streaming) */
    size_t text_len, text_cap;
    json_t *lp;                      /* logprobs being built, or NULL */
    size_t text_offset;              /* completions logprobs: bytes of text so far */
    int32_t prev_token;              /* the token before the next logprobs entry */
    int started;                     /* echo and first chunk written */
    size_t sent;                     /* streaming, no tool parser: bytes of the content part sent */
    xi_reasoning_stream rs;          /* streaming: the reasoning parser's state */
    xi_tool_stream ts;               /* streaming: the tool parser's state (over the content part) */
    json_t *token_ids;               /* return_token_ids: the output's ids so far, or NULL */
    size_t ids_sent;                 /* streaming: of token_ids, those already in a chunk */
    xi_finish_reason finish;
    char *stop_reason;
    int32_t stop_token;
    int generated;
    /* engine thread */
    double last_time;                /* monotonic time of the previous event, for ITL */
} job_choice;

struct xi_job {
    xi_server *s;
    xi_engine *eng;
    xi_job *prev, *next;             /* server's list of live jobs (s->mu) */
    pthread_mutex_t mu;
    int refs;                        /* mu */
    int n_unfinished;                /* mu: samples whose final event has not arrived */
    job_event *head, *tail;          /* mu: events not yet consumed */
    xi_oai_request req;
    job_sub *subs;                   /* [n_subs] */
    int n_subs;
    job_choice *choices;             /* [n_choices] = n_subs * req.n */
    int n_choices;
    char id[40];
    long created;
    struct MHD_Connection *conn;
    char *out;                       /* [out_len] SSE bytes not yet handed to MHD, owned */
    size_t out_len, out_cap, out_off;
    int ended;                       /* the last SSE bytes are in out */
    int suspended;                   /* mu: the connection is suspended, waiting for events */
    int gone;                        /* mu: the client went away while suspended */
    int http11;                      /* the client speaks HTTP/1.1 (may get a 100 probe) */
    int probed;                      /* mu: the 100 probe was sent */
    int deferred;                    /* the first wait of a plain answer did not suspend */
    int tools;                       /* parse tool calls out of each choice's text */
    const char *reasoning;           /* the reasoning parser for this job's choices, or NULL */
    xi_resp *resp;                   /* /v1/responses: its answer's state, owned; or NULL */
};

static double mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- job life cycle ----------------------------------------------------------------------- */

static void lp_free(lp_copy *l, int n) {
    for (int i = 0; l && i < n; i++) free(l[i].top);
    free(l);
}

static void event_free(job_event *ev) {
    free(ev->text);
    free(ev->new_ids);
    lp_free(ev->lps, ev->n_ids);
    lp_free(ev->plps, ev->n_plps);
    free(ev->stop_reason);
    free(ev);
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
        event_free(j->head);
        j->head = n;
    }
    for (int i = 0; i < j->n_subs; i++) {
        free(j->subs[i].ids);
        free(j->subs[i].echo_text);
        lp_free(j->subs[i].plps, j->subs[i].n_plps);
    }
    for (int i = 0; i < j->n_choices; i++) {
        free(j->choices[i].text);
        free(j->choices[i].stop_reason);
        json_decref(j->choices[i].lp);
        json_decref(j->choices[i].token_ids);
    }
    free(j->subs);
    free(j->choices);
    free(j->out);
    xi_resp_free(j->resp);
    xi_oai_request_free(&j->req);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

static void job_release(xi_job *j) {
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
    job_release(j);
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
        .e2e = o->arrival_time > 0 ? wall_now() - o->arrival_time : -1,
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
    double now = mono_now();
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

/* ---- connection thread: events → choices / SSE -------------------------------------------- */

static int out_append(xi_job *j, const char *data, size_t n) {
    return xi_srv_append(&j->out, &j->out_len, &j->out_cap, data, n);
}

static xi_resp_sink resp_sink(xi_job *j) {
    return (xi_resp_sink){&j->out, &j->out_len, &j->out_cap};
}

static void sse_send(xi_job *j, json_t *o) {
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!s) return;
    out_append(j, "data: ", 6);
    out_append(j, s, strlen(s));
    out_append(j, "\n\n", 2);
    free(s);
}

/* A token's text as it reads in context: decoded after the token before it, so that
 * SentencePiece's word-initial space survives (alone, "▁time" decodes to "time"). */
static char *token_text(xi_job *j, int32_t prev, int32_t id) {
    char err[128];
    if (prev >= 0) {
        int32_t pair[2] = {prev, id};
        char *both = xi_engine_detokenize(j->eng, pair, 2, 0, err, sizeof err);
        char *first = xi_engine_detokenize(j->eng, pair, 1, 0, err, sizeof err);
        if (both && first && !strncmp(both, first, strlen(first))) {
            char *t = strdup(both + strlen(first));
            free(both);
            free(first);
            if (t) return t;
        } else {
            free(both);
            free(first);
        }
    }
    char *t = xi_engine_detokenize(j->eng, &id, 1, 0, err, sizeof err);
    return t ? t : strdup("");
}

static json_t *bytes_of(const char *t) {
    json_t *a = json_array();
    for (const unsigned char *p = (const unsigned char *)t; *p; p++) json_array_append_new(a, json_integer(*p));
    return a;
}

static json_t *lp_value(float lp) {
    /* JSON has no -inf: clamp like vLLM's serializer does */
    return isfinite(lp) ? json_real(lp) : json_real(lp < 0 ? -9999.0 : 0.0);
}

/* Chat logprobs: [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}] */
static json_t *chat_lp_entries(xi_job *j, int32_t *prev, const lp_copy *l, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        char *t = token_text(j, *prev, l[i].token);
        json_t *top = json_array();
        for (int k = 0; k < l[i].n_top && k < j->req.logprobs; k++) {
            char *tt = token_text(j, *prev, l[i].top[k].token);
            json_array_append_new(top, json_pack("{s:o, s:o, s:o}", "token", xi_srv_json_text(tt, strlen(tt)),
                                                 "logprob", lp_value(l[i].top[k].logprob), "bytes", bytes_of(tt)));
            free(tt);
        }
        json_array_append_new(a, json_pack("{s:o, s:o, s:o, s:o}", "token", xi_srv_json_text(t, strlen(t)), "logprob",
                                           lp_value(l[i].logprob), "bytes", bytes_of(t),
                                           "top_logprobs", top));
        free(t);
        *prev = l[i].token;
    }
    return a;
}

/* Completions logprobs: parallel arrays; prompt entries (echo) have a null first logprob. */
static void completion_lp_add(xi_job *j, json_t *lp, size_t *offset, int32_t *prev,
                              const lp_copy *l, int n, int prompt) {
    json_t *tokens = json_object_get(lp, "tokens"), *tlp = json_object_get(lp, "token_logprobs");
    json_t *top = json_object_get(lp, "top_logprobs"), *off = json_object_get(lp, "text_offset");
    for (int i = 0; i < n; i++) {
        char *t = token_text(j, *prev, l[i].token);
        json_array_append_new(tokens, xi_srv_json_text(t, strlen(t)));
        json_array_append_new(off, json_integer((json_int_t)*offset));
        *offset += strlen(t);
        int first = prompt && i == 0;
        json_array_append_new(tlp, first ? json_null() : lp_value(l[i].logprob));
        if (first) {
            json_array_append_new(top, json_null());
        } else {
            json_t *d = json_object();
            for (int k = 0; k < l[i].n_top && k < j->req.logprobs; k++) {
                char *tt = token_text(j, *prev, l[i].top[k].token);
                char *key = xi_srv_utf8_clean(tt, strlen(tt), NULL);
                if (key) json_object_set_new(d, key, lp_value(l[i].top[k].logprob));
                free(key);
                free(tt);
            }
            /* the sampled token is always among them, as in vLLM (logprobs 0: only it) */
            char *key = xi_srv_utf8_clean(t, strlen(t), NULL);
            if (key) json_object_set_new(d, key, lp_value(l[i].logprob));
            free(key);
            json_array_append_new(top, d);
        }
        free(t);
        *prev = l[i].token;
    }
}

static json_t *completion_lp_new(void) {
    return json_pack("{s:[], s:[], s:[], s:[]}", "text_offset", "token_logprobs", "tokens", "top_logprobs");
}

static json_t *usage_json(xi_job *j);

static json_t *chunk_new(xi_job *j, json_t *choices) {
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:o}", "id", j->id, "object",
                          j->req.chat ? "chat.completion.chunk" : "text_completion", "created",
                          (json_int_t)j->created, "model", j->s->cfg.served_names[0], "choices", choices);
    if (j->req.include_usage) json_object_set_new(o, "usage", j->req.continuous_usage ? usage_json(j) : json_null());
    json_object_set_new(o, "system_fingerprint", j->s->fingerprint[0] ? json_string(j->s->fingerprint) : json_null());
    return o;
}

static json_t *stop_reason_json(const job_choice *c) {
    if (c->stop_reason) return json_string(c->stop_reason);
    if (c->finish == XI_FINISH_STOP && c->stop_token >= 0) return json_integer(c->stop_token);
    return json_null();
}

static const char *finish_name(xi_finish_reason r) {
    switch (r) {
    case XI_FINISH_STOP: return "stop";
    case XI_FINISH_LENGTH: return "length";
    case XI_FINISH_ABORT: return "abort";
    default: return "error";
    }
}

static void text_append(job_choice *c, const char *t, size_t n) {
    xi_srv_append(&c->text, &c->text_len, &c->text_cap, t, n);
}

/* Tool calls get ids (and, streaming, their index) as OpenAI's do. */
static void add_call_ids(xi_job *j, json_t *calls) {
    size_t i;
    json_t *call;
    json_array_foreach(calls, i, call) {
        char id[40];
        xi_srv_new_id(j->s, "chatcmpl-tool", id);
        json_object_set_new(call, "id", json_string(id));
        if (j->req.stream) json_object_set_new(call, "index", json_integer((json_int_t)i));
    }
}

/* The tool calls in a choice's content: forced ones (tool_choice "required" or a named
 * function, server/structured) or the --tool-call-parser's. */
static json_t *job_tool_calls(xi_job *j, const char *text, size_t len, size_t *content_len) {
    if (j->req.tool_choice < XI_TOOL_CHOICE_REQUIRED)
        return xi_tool_calls_parse(j->s->cfg.tool_parser, text, len, content_len);
    json_t *calls = xi_structured_tool_calls(&j->req, text, len);
    if (calls) *content_len = 0;
    return calls;
}

/* Streaming: forced calls go out whole at the end (the text is held back until then). */
static json_t *job_tool_stream(xi_job *j, xi_tool_stream *st, const char *text, size_t len, int final, size_t *n) {
    if (j->req.tool_choice < XI_TOOL_CHOICE_REQUIRED)
        return xi_tool_stream_step(j->s->cfg.tool_parser, st, text, len, final, n);
    *n = 0;
    if (!final) return NULL;
    size_t content_len = len;
    json_t *calls = job_tool_calls(j, text, len, &content_len);
    if (!calls) {
        *n = len - st->sent;
        st->sent = len;
    }
    return calls;
}

/* finish_reason "tool_calls" for parsed and required calls; a named function keeps the
 * engine's reason, as in vLLM */
static int calls_finish(const xi_job *j, const json_t *calls) {
    return calls && j->req.tool_choice != XI_TOOL_CHOICE_NAMED;
}

/* vLLM's prompt_logprobs: null for the first token, then per token {"id": {logprob, rank,
 * decoded_token}} for the prompt's token and its top k. */
static json_t *prompt_lp_json(xi_job *j, const job_sub *sub) {
    json_t *a = json_array();
    for (int i = 0; i < sub->n_plps; i++) {
        const lp_copy *l = &sub->plps[i];
        if (i == 0) {
            json_array_append_new(a, json_null());
            continue;
        }
        json_t *d = json_object();
        for (int k = -1; k < l->n_top && k < j->req.prompt_logprobs; k++) {
            const int32_t id = k < 0 ? l->token : l->top[k].token;
            char key[16], err[64], *t = xi_engine_detokenize(j->eng, &id, 1, 0, err, sizeof err);
            snprintf(key, sizeof key, "%d", id);
            if (k < 0 || !json_object_get(d, key))
                json_object_set_new(d, key, json_pack("{s:o, s:i, s:o}", "logprob", lp_value(k < 0 ? l->logprob : l->top[k].logprob),
                                                      "rank", k < 0 ? l->rank : k + 1, "decoded_token",
                                                      xi_srv_json_text(t ? t : "", t ? strlen(t) : 0)));
            free(t);
        }
        json_array_append_new(a, d);
    }
    return a;
}

static json_t *prompt_ids_json(const job_sub *sub) {
    json_t *a = json_array();
    for (int i = 0; i < sub->n_prompt; i++) json_array_append_new(a, json_integer(sub->ids[i]));
    return a;
}

/* Apply one event to its choice; when streaming, write its chunk. */
static void consume(xi_job *j, job_event *ev) {
    job_choice *c = &j->choices[ev->choice];
    job_sub *sub = &j->subs[ev->choice / j->req.n];
    if (ev->cached > sub->cached) sub->cached = ev->cached;
    if (ev->plps && !sub->plps) {
        sub->plps = ev->plps;
        sub->n_plps = ev->n_plps;
        ev->plps = NULL;
        ev->n_plps = 0;
    }
    if (ev->finish != XI_FINISH_NONE) {
        c->finish = ev->finish;
        c->stop_token = ev->stop_token;
        free(c->stop_reason);
        c->stop_reason = ev->stop_reason;
        ev->stop_reason = NULL;
    }
    if (ev->generated > c->generated) c->generated = ev->generated;
    if (j->req.return_token_ids) {
        if (!c->token_ids) c->token_ids = json_array();
        for (int i = 0; i < ev->n_new; i++) json_array_append_new(c->token_ids, json_integer(ev->new_ids[i]));
    }
    int want_lp = j->req.logprobs >= 0;

    /* echo: the prompt (and its logprobs) precede the first output of a completion */
    json_t *lp = NULL;
    char *prefix = NULL;
    if (!j->req.chat && want_lp) lp = j->req.stream ? completion_lp_new() : (c->lp ? c->lp : (c->lp = completion_lp_new()));
    if (j->req.chat && want_lp && !j->req.stream && !c->lp) c->lp = json_pack("{s:[]}", "content");
    if (!c->started) {
        c->started = 1;
        c->prev_token = sub->n_prompt > 0 ? sub->ids[sub->n_prompt - 1] : -1;
        if (j->req.echo && sub->echo_text) {
            prefix = sub->echo_text;
            if (lp && sub->plps) {
                int32_t none = -1;
                completion_lp_add(j, lp, &c->text_offset, &none, sub->plps, sub->n_plps, 1);
            }
        }
    }
    if (lp && ev->lps) completion_lp_add(j, lp, &c->text_offset, &c->prev_token, ev->lps, ev->n_ids, 0);

    if (!j->req.stream) {
        if (prefix) text_append(c, prefix, strlen(prefix));
        text_append(c, ev->text ? ev->text : "", ev->text_len);
        if (j->req.chat && c->lp && ev->lps) {
            json_t *entries = chat_lp_entries(j, &c->prev_token, ev->lps, ev->n_ids);
            json_array_extend(json_object_get(c->lp, "content"), entries);
            json_decref(entries);
        }
        return;
    }
    if (ev->finish == XI_FINISH_ERROR) {
        xi_oai_error e;
        xi_oai_fail(&e, 500, NULL, "the engine failed on this request");
        char *s = xi_oai_error_json(&e);
        if (s) {
            out_append(j, "data: ", 6);
            out_append(j, s, strlen(s));
            out_append(j, "\n\n", 2);
            free(s);
        }
        json_decref(lp);
        return;
    }
    /* parsed output: the reasoning goes out up to where a </think> may begin, the content
     * up to where a <tool_call> may begin; tool calls go out with the last chunk, once the
     * whole text is known */
    const char *dtext = ev->text, *rtext = NULL;
    size_t dlen = ev->text_len, rlen = 0;
    json_t *calls = NULL;
    if (j->tools || j->reasoning || j->resp) {
        const int final = ev->finish != XI_FINISH_NONE;
        text_append(c, ev->text ? ev->text : "", ev->text_len);
        const char *t = c->text ? c->text : "";
        size_t cb = 0;
        if (j->reasoning) {
            const size_t from = xi_reasoning_stream_step(j->reasoning, &c->rs, t, c->text_len, final, &cb);
            rtext = t + from;
            rlen = c->rs.r_sent - from;
        }
        dtext = t + cb + (j->tools ? c->ts.sent : c->sent);
        if (j->tools) {
            /* cb stays put once content has begun, so the tool parser sees one growing text */
            calls = job_tool_stream(j, &c->ts, t + cb, c->text_len - cb, final, &dlen);
            add_call_ids(j, calls);
        } else {
            dlen = c->text_len - cb - c->sent;
            c->sent += dlen;
        }
    }
    if (j->resp) {
        xi_resp_add(j->resp, rtext, rlen, dtext, dlen, calls, resp_sink(j));
        json_decref(calls);
        json_decref(lp);
        return;
    }
    int has_text = dlen > 0 || prefix;
    if (!has_text && !rlen && ev->finish == XI_FINISH_NONE && !ev->n_ids) {
        json_decref(lp);
        return;
    }
    json_t *ch;
    json_t *finish = calls_finish(j, calls) ? json_string("tool_calls")
                     : ev->finish != XI_FINISH_NONE ? json_string(finish_name(ev->finish)) : json_null();
    if (j->req.chat) {
        json_t *delta = json_object();
        if (rlen) json_object_set_new(delta, "reasoning_content", xi_srv_json_text(rtext, rlen));
        if (has_text) json_object_set_new(delta, "content", xi_srv_json_text(dtext, dlen));
        if (calls) json_object_set_new(delta, "tool_calls", calls);
        json_t *l = want_lp && ev->lps ? json_pack("{s:o}", "content", chat_lp_entries(j, &c->prev_token, ev->lps, ev->n_ids)) : json_null();
        ch = json_pack("{s:i, s:o, s:o, s:o}", "index", ev->choice, "delta", delta, "logprobs", l,
                       "finish_reason", finish);
    } else {
        size_t plen = prefix ? strlen(prefix) : 0;
        char *t = malloc(plen + ev->text_len + 1);
        if (t) {
            if (plen) memcpy(t, prefix, plen);
            if (ev->text_len) memcpy(t + plen, ev->text, ev->text_len);
        }
        ch = json_pack("{s:i, s:o, s:o, s:o}", "index", ev->choice, "text",
                       t ? xi_srv_json_text(t, plen + ev->text_len) : json_string(""), "logprobs",
                       lp ? lp : json_null(), "finish_reason", finish);
        lp = NULL;
        free(t);
    }
    if (ev->finish != XI_FINISH_NONE) json_object_set_new(ch, "stop_reason", stop_reason_json(c));
    if (c->token_ids) { /* the ids not sent yet: a chunk may have been held back */
        json_t *ids = json_array();
        if (!c->ids_sent) json_object_set_new(ch, "prompt_token_ids", prompt_ids_json(sub));
        for (; c->ids_sent < json_array_size(c->token_ids); c->ids_sent++)
            json_array_append(ids, json_array_get(c->token_ids, c->ids_sent));
        json_object_set_new(ch, "token_ids", ids);
    }
    json_decref(lp);
    sse_send(j, chunk_new(j, json_pack("[o]", ch)));
}

static void usage_counts(const xi_job *j, int *prompt, int *cached, int *gen) {
    *prompt = *cached = *gen = 0;
    for (int i = 0; i < j->n_subs; i++) {
        *prompt += j->subs[i].n_prompt;
        *cached += j->subs[i].cached;
    }
    for (int i = 0; i < j->n_choices; i++) *gen += j->choices[i].generated;
}

/* The Responses API's end: its object, streamed (response.completed) or not. */
static json_t *resp_end(xi_job *j, xi_resp_sink out) {
    int prompt, cached, gen;
    usage_counts(j, &prompt, &cached, &gen);
    return xi_resp_end(j->resp, j->choices[0].finish == XI_FINISH_LENGTH, prompt, cached, gen, out);
}

static json_t *usage_json(xi_job *j) {
    int prompt, cached, gen;
    usage_counts(j, &prompt, &cached, &gen);
    return json_pack("{s:i, s:i, s:i, s:{s:i}}", "prompt_tokens", prompt, "completion_tokens", gen,
                     "total_tokens", prompt + gen, "prompt_tokens_details", "cached_tokens", cached);
}

/* Take the queued events (and whether the job has finished) under the lock. */
static job_event *take_events(xi_job *j, int *done) {
    job_event *list = j->head;
    j->head = j->tail = NULL;
    *done = j->n_unfinished == 0;
    return list;
}

static void consume_list(xi_job *j, job_event *list) {
    while (list) {
        job_event *n = list->next;
        consume(j, list);
        event_free(list);
        list = n;
    }
}

static enum MHD_Result answer_body(xi_job *j);

/* Take and consume what the engine has sent. Returns 1 when there was nothing: the connection
 * is then suspended until the engine or the watchdog resumes it (a resume that comes between
 * the unlock and the suspend cancels the suspend). */
static int drain_or_park(xi_job *j, int *done, int *gone) {
    pthread_mutex_lock(&j->mu);
    job_event *list = take_events(j, done);
    *gone = j->gone || atomic_load(&j->s->closing);
    const int parked = !*done && !list && !*gone;
    /* A plain answer's first wait returns without suspending: libmicrohttpd then marks the
     * connection as reading nothing and calls again at once, and suspended from that state a
     * resume does not read the socket, so a client that half-closed meets no EOF there. */
    const int suspend = parked && (j->req.stream || j->deferred);
    if (parked && !j->req.stream) j->deferred = 1;
    if (suspend) j->suspended = 1;
    pthread_mutex_unlock(&j->mu);
    if (suspend) MHD_suspend_connection(j->conn);
    else if (!parked) consume_list(j, list);
    return parked;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    xi_job *j = cls;
    for (;;) {
        if (j->out_off < j->out_len) {
            size_t n = max < j->out_len - j->out_off ? max : j->out_len - j->out_off;
            memcpy(buf, j->out + j->out_off, n);
            j->out_off += n;
            return (ssize_t)n;
        }
        j->out_len = j->out_off = 0;
        if (j->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        int done, gone;
        if (drain_or_park(j, &done, &gone)) return 0;
        if (gone && !done) {
            xi_job_abort(j);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (done && j->resp) {
            json_decref(resp_end(j, resp_sink(j)));
        } else if (done) {
            if (j->req.include_usage) {
                json_t *o = chunk_new(j, json_array());
                json_object_set_new(o, "usage", usage_json(j));
                sse_send(j, o);
            }
            out_append(j, "data: [DONE]\n\n", 14);
        }
        if (done) {
            j->ended = 1;
            if (j->s->cfg.log_requests) xi_srv_log("Finished request %s", j->id);
        }
    }
}

void xi_job_watch(xi_server *s) {
    const int closing = atomic_load(&s->closing);
    pthread_mutex_lock(&s->mu);
    for (xi_job *j = s->jobs; j; j = j->next) {
        pthread_mutex_lock(&j->mu);
        /* a stream's EOF may be a half-close: its next chunk tells; a plain answer has sent
         * nothing yet, so HTTP/1.1 clients get the probe */
        if (j->suspended &&
            (closing || xi_srv_peer_closed(j->conn, !j->req.stream, !j->req.stream && j->http11 ? &j->probed : NULL))) {
            j->gone = 1;
            j->suspended = 0;
            MHD_resume_connection(j->conn);
        }
        pthread_mutex_unlock(&j->mu);
    }
    pthread_mutex_unlock(&s->mu);
    xi_embeddings_watch(s, closing);
}

enum MHD_Result xi_job_resume(xi_job *j) {
    for (;;) {
        int done, gone;
        if (drain_or_park(j, &done, &gone)) return MHD_YES;
        if (done) break;
        if (gone) {
            xi_job_abort(j);
            return MHD_NO;
        }
    }
    if (j->s->cfg.log_requests) xi_srv_log("Finished request %s", j->id);
    if (j->resp) {
        const xi_resp_sink none = {0};
        xi_resp_begin(j->resp, j->id, j->created, j->s->cfg.served_names[0], none);
    }
    return answer_body(j);
}

static void stream_free(void *cls) { job_release(cls); }

/* ---- the handler -------------------------------------------------------------------------- */

/* A chat answer's content after echo's prefix. */
static json_t *echoed(const char *prefix, const char *text, size_t len) {
    const size_t plen = strlen(prefix);
    char *t = malloc(plen + len + 1);
    if (!t) return NULL;
    memcpy(t, prefix, plen);
    if (len) memcpy(t + plen, text, len);
    json_t *v = xi_srv_json_text(t, plen + len);
    free(t);
    return v;
}

static enum MHD_Result answer_body(xi_job *j) {
    int worst = 0;
    json_t *choices = json_array();
    for (int i = 0; i < j->n_choices; i++) {
        job_choice *c = &j->choices[i];
        if (c->finish == XI_FINISH_ERROR || c->finish == XI_FINISH_NONE) worst = 1;
        /* the reasoning first, then the tool calls in what follows it */
        const char *all = c->text ? c->text : "";
        xi_reasoning_span sp = {0, 0, 0, 0};
        if (j->reasoning) xi_reasoning_scan(j->reasoning, all, c->text_len, 1, &sp);
        const char *ctext = all + sp.c_begin;
        size_t content_len = c->text_len - sp.c_begin;
        json_t *calls = j->tools && c->finish != XI_FINISH_ERROR
                            ? job_tool_calls(j, ctext, content_len, &content_len) : NULL;
        add_call_ids(j, calls);
        /* empty content next to tool calls or reasoning is null, as in OpenAI's and vLLM's answers */
        json_t *text = (calls || sp.has_reasoning) && !content_len ? json_null()
                                                                   : xi_srv_json_text(ctext, content_len);
        if (j->req.chat_echo) { /* echo: the last message's content, then the answer's */
            json_decref(text);
            text = echoed(j->req.chat_echo, ctext, content_len);
        }
        json_t *lp = c->lp ? json_incref(c->lp) : json_null();
        const char *finish = calls_finish(j, calls) ? "tool_calls" : finish_name(c->finish);
        json_t *ch = j->req.chat
            ? json_pack("{s:i, s:{s:s, s:o}, s:o, s:s}", "index", i, "message", "role", "assistant",
                        "content", text, "logprobs", lp, "finish_reason", finish)
            : json_pack("{s:i, s:o, s:o, s:s}", "index", i, "text", text, "logprobs", lp,
                        "finish_reason", finish);
        if (calls) json_object_set_new(json_object_get(ch, "message"), "tool_calls", calls);
        if (j->reasoning && j->req.chat)
            json_object_set_new(json_object_get(ch, "message"), "reasoning_content",
                                sp.has_reasoning ? xi_srv_json_text(all + sp.r_begin, sp.r_end - sp.r_begin)
                                                 : json_null());
        json_object_set_new(ch, "stop_reason", stop_reason_json(c));
        if (j->req.prompt_logprobs >= 0 && !j->req.chat)
            json_object_set_new(ch, "prompt_logprobs", prompt_lp_json(j, &j->subs[i / j->req.n]));
        if (j->req.return_token_ids) {
            json_object_set_new(ch, "token_ids", c->token_ids ? json_incref(c->token_ids) : json_array());
            if (!j->req.chat) json_object_set_new(ch, "prompt_token_ids", prompt_ids_json(&j->subs[i / j->req.n]));
        }
        json_array_append_new(choices, ch);
        if (j->resp && !worst) { /* one choice: the Responses API has no n */
            const xi_resp_sink none = {0};
            xi_resp_add(j->resp, all + sp.r_begin, sp.r_end - sp.r_begin, ctext, content_len, calls, none);
        }
    }
    if (worst) {
        json_decref(choices);
        xi_oai_error e;
        xi_oai_fail(&e, 500, NULL, "the engine failed on this request");
        return xi_srv_respond_error(j->conn, &e);
    }
    if (j->resp) {
        json_decref(choices);
        const xi_resp_sink none = {0};
        json_t *o = resp_end(j, none);
        char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        return xi_srv_respond(j->conn, MHD_HTTP_OK, "application/json", s);
    }
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:o, s:o}", "id", j->id, "object",
                          j->req.chat ? "chat.completion" : "text_completion", "created",
                          (json_int_t)j->created, "model", j->s->cfg.served_names[0], "choices",
                          choices, "usage", usage_json(j));
    if (j->req.return_token_ids && j->req.chat) json_object_set_new(o, "prompt_token_ids", prompt_ids_json(&j->subs[0]));
    json_object_set_new(o, "system_fingerprint", j->s->fingerprint[0] ? json_string(j->s->fingerprint) : json_null());
    if (j->req.prompt_logprobs >= 0 && j->req.chat) json_object_set_new(o, "prompt_logprobs", prompt_lp_json(j, &j->subs[0]));
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return xi_srv_respond(j->conn, MHD_HTTP_OK, "application/json", s);
}

/* Prompts → token ids with the max-model-len check. */
static int prepare_prompts(xi_job *j, xi_oai_error *e) {
    xi_oai_request *r = &j->req;
    char err[512] = "";
    char *rendered = NULL;
    if (r->chat) {
        rendered = xi_engine_apply_chat_template(j->eng, r->messages_json, r->tools_json,
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

static int submit_all(xi_job *j, xi_oai_error *e) {
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

static int model_served(xi_server *s, const char *name) {
    if (!name) return 1;
    for (int i = 0; i < s->cfg.n_served_names; i++)
        if (!strcmp(name, s->cfg.served_names[i])) return 1;
    return 0;
}

enum MHD_Result xi_job_handle(xi_server *s, struct MHD_Connection *c, int api, int http11,
                              const char *body, size_t len, xi_job **out) {
    *out = NULL;
    const int chat = api != XI_API_COMPLETIONS;
    xi_oai_error e;
    xi_job *j = calloc(1, sizeof *j);
    if (!j) return MHD_NO;
    pthread_mutex_init(&j->mu, NULL);
    j->s = s;
    j->eng = atomic_load(&s->engine);
    j->conn = c;
    j->http11 = http11;
    j->refs = 1; /* this handler; handed to the connection when streaming */
    j->created = (long)time(NULL);
    const char *prefix = api == XI_API_RESPONSES ? "resp" : chat ? "chatcmpl" : "cmpl";
    if (xi_http_client_request_id()) snprintf(j->id, sizeof j->id, "%s-%s", prefix, xi_http_client_request_id());
    else xi_srv_new_id(s, prefix, j->id);
    pthread_mutex_lock(&s->mu);
    j->next = s->jobs;
    if (s->jobs) s->jobs->prev = j;
    s->jobs = j;
    s->n_jobs++;
    pthread_mutex_unlock(&s->mu);

    enum MHD_Result ret;
    char *chat_body = NULL; /* a Responses request rewritten for the chat endpoint */
    if (api == XI_API_RESPONSES && !(j->resp = xi_resp_parse(body, len, &chat_body, &e))) goto fail;
    int bad = xi_oai_parse(&j->req, chat, chat_body ? chat_body : body, chat_body ? strlen(chat_body) : len, &e);
    free(chat_body);
    if (bad) goto fail;
    if (!model_served(s, j->req.model)) {
        xi_oai_fail(&e, 404, "model", "The model `%s` does not exist.", j->req.model);
        goto fail;
    }
    for (int i = 0; i < j->req.params.n_allowed_token_ids; i++)
        if (j->req.params.allowed_token_ids[i] >= s->info.vocab_size) {
            xi_oai_fail(&e, 400, "allowed_token_ids", "token id %d is outside the vocabulary (%d tokens)",
                        j->req.params.allowed_token_ids[i], s->info.vocab_size);
            goto fail;
        }
    if (j->req.tool_choice == XI_TOOL_CHOICE_AUTO && !s->cfg.tool_parser) {
        xi_oai_fail(&e, 400, "tool_choice", "\"auto\" tool choice requires --enable-auto-tool-choice and "
                    "--tool-call-parser to be set");
        goto fail;
    }
    const long seqs = (long)(chat ? 1 : j->req.n_prompts) * j->req.n;
    if (seqs > s->cfg.max_seqs_per_request) {
        xi_oai_fail(&e, 400, j->req.n > 1 ? "n" : "prompt",
                    "this request asks for %ld sequences (%d prompt(s) x n=%d); the limit is %d "
                    "(--max-seqs-per-request)", seqs, chat ? 1 : j->req.n_prompts, j->req.n,
                    s->cfg.max_seqs_per_request);
        goto fail;
    }
    j->tools = chat && j->req.tools_json && j->req.tool_choice != XI_TOOL_CHOICE_NONE &&
               (s->cfg.tool_parser || j->req.tool_choice >= XI_TOOL_CHOICE_REQUIRED);
    j->reasoning = chat ? s->cfg.reasoning_parser : NULL;
    if (j->req.stream && s->cfg.force_include_usage) j->req.include_usage = 1;
    j->req.continuous_usage &= j->req.include_usage; /* vLLM: continuous stats need usage */
    if (prepare_prompts(j, &e) || submit_all(j, &e)) {
        xi_job_abort(j);
        goto fail;
    }
    if (j->req.ignored[0]) /* vLLM's warning, so that a client's misspelt field is seen */
        xi_srv_log("The following fields were present in request %s but ignored: %s", j->id, j->req.ignored);
    if (s->cfg.log_requests)
        xi_srv_log("Received request %s: %d prompt(s), prompt_tokens=%d, max_tokens=%d, n=%d, stream=%d",
                   j->id, j->n_subs, j->subs[0].n_prompt, j->req.max_tokens, j->req.n, j->req.stream);

    if (j->req.stream) {
        if (j->resp) xi_resp_begin(j->resp, j->id, j->created, j->s->cfg.served_names[0], resp_sink(j));
        else if (chat) {
            for (int i = 0; i < j->n_choices; i++)
                sse_send(j, chunk_new(j, json_pack("[{s:i, s:{s:s, s:s}, s:n, s:n}]", "index", i, "delta",
                                                   "role", "assistant", "content", "", "logprobs",
                                                   "finish_reason")));
            /* echo: each choice's first content is the last message's (vLLM) */
            for (int i = 0; j->req.chat_echo && i < j->n_choices; i++)
                sse_send(j, chunk_new(j, json_pack("[{s:i, s:{s:o}, s:n, s:n}]", "index", i, "delta", "content",
                                                   xi_srv_json_text(j->req.chat_echo, strlen(j->req.chat_echo)),
                                                   "logprobs", "finish_reason")));
        }
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_reader, j, stream_free);
        if (!r) {
            xi_job_abort(j);
            job_release(j);
            return MHD_NO;
        }
        pthread_mutex_lock(&j->mu);
        j->refs++; /* the response's */
        pthread_mutex_unlock(&j->mu);
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream; charset=utf-8");
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        xi_http_decorate(r);
        ret = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        *out = j; /* the handler's reference becomes the connection's */
        return ret;
    }

    *out = j; /* the connection's reference from now on */
    return xi_job_resume(j);
fail:
    ret = xi_srv_respond_error(c, &e);
    job_release(j);
    return ret;
}
