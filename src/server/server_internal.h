/* server/server_internal: state shared by the HTTP routing (server.c) and the completion
 * jobs (completion.c). Not part of the server's interface. */
#ifndef XI_SERVER_INTERNAL_H
#define XI_SERVER_INTERNAL_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>

#include "server/metrics.h"
#include "server/oai.h"
#include "server/server.h"

typedef struct xi_job xi_job;

struct xi_server {
    xi_server_config cfg;            /* strings borrowed from the owner */
    struct MHD_Daemon *daemon;
    int listen_fd;                   /* -1 after quiesce */
    _Atomic(xi_engine *) engine;     /* NULL while loading */
    xi_engine_info info;             /* valid once engine is set */
    xi_metrics *metrics;             /* created with the engine */
    atomic_int stopping;             /* shutting down: new completions get 503 */
    atomic_int closing;              /* connections are being closed: waits end now */
    long created;                    /* start time for /v1/models */
    pthread_mutex_t mu;              /* guards jobs, n_jobs, rng */
    xi_job *jobs;                    /* live completion jobs (intrusive list) */
    int n_jobs;                      /* + /v1/embeddings requests being answered */
    uint64_t rng;                    /* request id generator (xorshift) */
    char fingerprint[128];           /* system_fingerprint; "" answers null (set with the engine) */
};

/* A complete response with a heap body that MHD frees. */
enum MHD_Result xi_srv_respond(struct MHD_Connection *c, unsigned status, const char *ctype,
                               char *body);
enum MHD_Result xi_srv_respond_error(struct MHD_Connection *c, const xi_oai_error *e);
/* Append n bytes to a growable heap string: *data holds [*len] bytes + NUL in [*cap].
 * Returns -1 when out of memory (the string is unchanged). */
int xi_srv_append(char **data, size_t *len, size_t *cap, const void *src, size_t n);
/* s[n] as a JSON string with every invalid UTF-8 sequence replaced by U+FFFD
 * (xi_srv_utf8_clean, oai.h); never NULL unless out of memory. */
json_t *xi_srv_json_text(const char *s, size_t n);
/* "prefix-<24 hex>" request id into out[40]. */
void xi_srv_new_id(xi_server *s, const char *prefix, char out[40]);

/* The client of connection c has gone away (checked without blocking). */
int xi_srv_peer_closed(struct MHD_Connection *c);

/* Which API a completion job answers (server/responses rewrites its requests for chat). */
enum { XI_API_COMPLETIONS, XI_API_CHAT, XI_API_RESPONSES };

/* /v1/chat/completions, /v1/completions and /v1/responses (api: XI_API_*): parse, tokenize,
 * submit and answer. Sets *job when a job outlives this call (streaming); the caller passes
 * it to xi_job_release. */
enum MHD_Result xi_job_handle(xi_server *s, struct MHD_Connection *c, int api,
                              const char *body, size_t len, xi_job **job);
/* The connection holding job ended (ok: the response was sent completely). */
void xi_job_connection_done(xi_job *job, int ok);
/* Abort the job's engine requests that have not finished. */
void xi_job_abort(xi_job *job);

#endif
