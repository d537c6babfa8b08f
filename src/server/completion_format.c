/* server/completion_format: a completion job's engine events turned into OpenAI's answer on
 * the connection thread: each choice's text, logprobs, parsed tool calls and reasoning, as
 * SSE chunks while streaming or one JSON body at the end (see completion_job.h). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/completion_job.h"
#include "server/structured.h"

/* ---- connection thread: events → choices / SSE -------------------------------------------- */

static int out_append(xi_job *j, const char *data, size_t n) {
    return xi_buf_append(&j->out, data, n);
}

static xi_resp_sink resp_sink(xi_job *j) {
    return (xi_resp_sink){&j->out};
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
    xi_buf_append(&c->text, t, n);
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
        const char *t = c->text.data ? c->text.data : "";
        size_t cb = 0;
        if (j->reasoning) {
            const size_t from = xi_reasoning_stream_step(j->reasoning, &c->rs, t, c->text.len, final, &cb);
            rtext = t + from;
            rlen = c->rs.r_sent - from;
        }
        dtext = t + cb + (j->tools ? c->ts.sent : c->sent);
        if (j->tools) {
            /* cb stays put once content has begun, so the tool parser sees one growing text */
            calls = job_tool_stream(j, &c->ts, t + cb, c->text.len - cb, final, &dlen);
            add_call_ids(j, calls);
        } else {
            dlen = c->text.len - cb - c->sent;
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

void xi_job_consume_events(xi_job *j, job_event *list) {
    while (list) {
        job_event *n = list->next;
        consume(j, list);
        xi_job_event_free(list);
        list = n;
    }
}

/* ---- a stream's first and last bytes ----------------------------------------------------- */

void xi_job_stream_begin(xi_job *j) {
    if (j->resp) {
        xi_resp_begin(j->resp, j->id, j->created, j->s->cfg.served_names[0], resp_sink(j));
        return;
    }
    if (!j->req.chat) return;
    for (int i = 0; i < j->n_choices; i++)
        sse_send(j, chunk_new(j, json_pack("[{s:i, s:{s:s, s:s}, s:n, s:n}]", "index", i, "delta", "role",
                                           "assistant", "content", "", "logprobs", "finish_reason")));
    /* echo: each choice's first content is the last message's (vLLM) */
    for (int i = 0; j->req.chat_echo && i < j->n_choices; i++)
        sse_send(j, chunk_new(j, json_pack("[{s:i, s:{s:o}, s:n, s:n}]", "index", i, "delta", "content",
                                           xi_srv_json_text(j->req.chat_echo, strlen(j->req.chat_echo)),
                                           "logprobs", "finish_reason")));
}

void xi_job_stream_end(xi_job *j) {
    if (j->resp) {
        json_decref(resp_end(j, resp_sink(j)));
        return;
    }
    if (j->req.include_usage) {
        json_t *o = chunk_new(j, json_array());
        json_object_set_new(o, "usage", usage_json(j));
        sse_send(j, o);
    }
    out_append(j, "data: [DONE]\n\n", 14);
}

/* ---- the whole answer ---------------------------------------------------------------------- */

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

enum MHD_Result xi_job_answer(xi_job *j) {
    int worst = 0;
    json_t *choices = json_array();
    for (int i = 0; i < j->n_choices; i++) {
        job_choice *c = &j->choices[i];
        if (c->finish == XI_FINISH_ERROR || c->finish == XI_FINISH_NONE) worst = 1;
        /* the reasoning first, then the tool calls in what follows it */
        const char *all = c->text.data ? c->text.data : "";
        xi_reasoning_span sp = {0, 0, 0, 0};
        if (j->reasoning) xi_reasoning_scan(j->reasoning, all, c->text.len, 1, &sp);
        const char *ctext = all + sp.c_begin;
        size_t content_len = c->text.len - sp.c_begin;
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
