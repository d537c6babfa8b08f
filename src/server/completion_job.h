/* server/completion_job: the state of a /v1/chat/completions, /v1/completions or
 * /v1/responses request, shared by its three parts: completion_job.c (the job's life cycle,
 * the engine's output callback, prompts and submission), completion_format.c (engine events
 * turned into choices, SSE chunks and the final body) and completion.c (the HTTP handler:
 * suspending, resuming and streaming the connection). Not part of the server's interface.
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
#ifndef XI_SERVER_COMPLETION_JOB_H
#define XI_SERVER_COMPLETION_JOB_H

#include "server/reasoning.h"
#include "server/responses.h"
#include "server/server_internal.h"
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
    xi_buf text;                     /* accumulated output (non-streaming) */
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
    xi_buf out;                      /* SSE bytes, handed to MHD from out_off on, owned */
    size_t out_off;
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

/* ---- completion_job.c ---- */
/* A job for connection c, listed in the server's jobs, holding the handler's reference;
 * NULL when out of memory. api: XI_API_*. */
xi_job *xi_job_new(xi_server *s, struct MHD_Connection *c, int api, int http11);
/* Drop one reference; the last frees the job. */
void xi_job_release(xi_job *j);
void xi_job_event_free(job_event *ev);
/* Render and tokenize the prompts (subs and choices are made), with the max-model-len checks. */
int xi_job_prepare(xi_job *j, xi_oai_error *e);
/* One engine request per prompt, the job's output callback on each. */
int xi_job_submit(xi_job *j, xi_oai_error *e);

/* ---- completion_format.c (connection thread) ---- */
/* Apply queued events to their choices (streaming: write their chunks to j->out); frees them. */
void xi_job_consume_events(xi_job *j, job_event *list);
/* A stream's first bytes (the role chunks and chat echo, or the Responses API's opening
 * events) and its last (usage, [DONE], or response.completed). */
void xi_job_stream_begin(xi_job *j);
void xi_job_stream_end(xi_job *j);
/* The whole answer of a finished, unstreamed job, queued on its connection. */
enum MHD_Result xi_job_answer(xi_job *j);

#endif
