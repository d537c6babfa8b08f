/* server/completion: the HTTP side of /v1/chat/completions, /v1/completions and
 * /v1/responses: parse and check the request, submit its job, then answer: a stream through
 * libmicrohttpd's content reader, a plain answer once every sample has finished. A handler
 * never waits for the engine: with nothing to send, the connection is suspended until the
 * engine's callback or the watchdog resumes it (see completion_job.h). */
#include <stdlib.h>
#include <string.h>

#include "server/completion_job.h"
#include "server/cors.h"
#include "server/embeddings.h"

/* ---- waiting for the engine ------------------------------------------------------------------ */

/* Take the queued events (and whether the job has finished) under the lock. */
static job_event *take_events(xi_job *j, int *done) {
    job_event *list = j->head;
    j->head = j->tail = NULL;
    *done = j->n_unfinished == 0;
    return list;
}

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
    else if (!parked) xi_job_consume_events(j, list);
    return parked;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    xi_job *j = cls;
    for (;;) {
        if (j->out_off < j->out.len) {
            size_t n = max < j->out.len - j->out_off ? max : j->out.len - j->out_off;
            memcpy(buf, j->out.data + j->out_off, n);
            j->out_off += n;
            return (ssize_t)n;
        }
        j->out.len = j->out_off = 0;
        if (j->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        int done, gone;
        if (drain_or_park(j, &done, &gone)) return 0;
        if (gone && !done) {
            xi_job_abort(j);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (done) {
            xi_job_stream_end(j);
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
    return xi_job_answer(j);
}

static void stream_free(void *cls) { xi_job_release(cls); }

/* ---- the handler -------------------------------------------------------------------------- */

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
    xi_job *j = xi_job_new(s, c, api, http11);
    if (!j) return MHD_NO;
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
    /* a guided answer (structured output, a forced tool call) is held to its grammar from the
     * first token, so it has no thought to split off: all of it is content */
    j->reasoning = chat && !j->req.params.guide ? s->cfg.reasoning_parser : NULL;
    if (j->req.stream && s->cfg.force_include_usage) j->req.include_usage = 1;
    j->req.continuous_usage &= j->req.include_usage; /* vLLM: continuous stats need usage */
    if (xi_job_prepare(j, &e) || xi_job_submit(j, &e)) {
        xi_job_abort(j);
        goto fail;
    }
    if (j->req.ignored[0]) /* vLLM's warning, so that a client's misspelt field is seen */
        xi_srv_log("The following fields were present in request %s but ignored: %s", j->id, j->req.ignored);
    if (s->cfg.log_requests)
        xi_srv_log("Received request %s: %d prompt(s), prompt_tokens=%d, max_tokens=%d, n=%d, stream=%d",
                   j->id, j->n_subs, j->subs[0].n_prompt, j->req.max_tokens, j->req.n, j->req.stream);

    if (j->req.stream) {
        xi_job_stream_begin(j);
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_reader, j, stream_free);
        if (!r) {
            xi_job_abort(j);
            xi_job_release(j);
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
    xi_job_release(j);
    return ret;
}
