/* server/server_internal: state shared by the HTTP routing (server.c) and the completion
 * jobs (completion.c, completion_job.c, completion_format.c). Not part of the server's interface. */
#ifndef XI_SERVER_INTERNAL_H
#define XI_SERVER_INTERNAL_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>

#include "server/metrics.h"
#include "server/oai.h"
#include "server/server.h"
#include "server/tls.h"

typedef struct xi_job xi_job;
typedef struct xi_conn xi_conn;

/* What a connection is doing, for its deadline (conn_guard.c). */
typedef enum { XI_CONN_IDLE, XI_CONN_READING, XI_CONN_BUSY } xi_conn_phase;

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
    struct emb_job *embs;            /* live /v1/embeddings jobs (embeddings.c, intrusive list) */
    int n_jobs;                      /* + /v1/embeddings jobs */
    uint64_t rng;                    /* request id generator (xorshift) */
    pthread_mutex_t conn_mu;         /* guards conns, n_conns */
    xi_conn *conns_head, *conns_tail; /* every open socket, oldest first */
    int n_conns;
    pthread_t watchdog;              /* deadlines and suspended jobs (conn_guard.c) */
    atomic_int watchdog_stop;
    _Atomic int64_t parse_bytes;     /* bytes charged by requests being parsed (xi_srv_charge) */
    xi_tls tls;                      /* HTTPS: the PEMs libmicrohttpd serves (cert_pem NULL: plain HTTP) */
    char fingerprint[128];           /* system_fingerprint; "" answers null (set with the engine) */
};

/* A complete response with a heap body that MHD frees. */
enum MHD_Result xi_srv_respond(struct MHD_Connection *c, unsigned status, const char *ctype,
                               char *body);
enum MHD_Result xi_srv_respond_error(struct MHD_Connection *c, const xi_oai_error *e);
/* An OpenAI error with Retry-After: 1, for 429/503 a client should retry. */
enum MHD_Result xi_srv_respond_busy(struct MHD_Connection *c, unsigned status, const char *msg);
/* s[n] as a JSON string with every invalid UTF-8 sequence replaced by U+FFFD
 * (xi_srv_utf8_clean, oai.h); never NULL unless out of memory. */
json_t *xi_srv_json_text(const char *s, size_t n);
/* "prefix-<24 hex>" request id into out[40]. */
void xi_srv_new_id(xi_server *s, const char *prefix, char out[40]);

/* The client of connection c has gone away (checked without blocking). An error on the socket
 * always means gone; EOF means gone when eof_gone and probed is NULL. With probed (HTTP/1.1,
 * no response bytes sent yet) the first EOF sends a probe that a gone client resets. Under
 * TLS nothing is probed: EOF, or FIN behind unread bytes, means gone when eof_gone. */
int xi_srv_peer_closed(struct MHD_Connection *c, int eof_gone, int *probed);

/* ---- conn_guard.c ---- */
double xi_srv_mono(void);
/* MHD_OPTION_NOTIFY_CONNECTION: tracks every socket, evicts past --limit-concurrency. */
void xi_guard_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                     enum MHD_ConnectionNotificationCode code);
/* The connection enters a phase; returns 1 when it came in over the concurrency limit. */
int xi_guard_phase(xi_server *s, struct MHD_Connection *c, xi_conn_phase phase);
/* --limit-concurrency when not given: from RLIMIT_NOFILE; the reserve above it. */
int xi_guard_default_limit(void);
int xi_guard_reserve(int limit);
int xi_guard_open_connections(xi_server *s);
int xi_guard_start(xi_server *s);
/* Max nesting of a JSON text, its element count (about: values and keys) in *elements. */
int xi_srv_json_shape(const char *p, size_t len, int64_t *elements);
/* Charge bytes to the server-wide parse budget: 0, or -1 (nothing charged) when over it. */
int xi_srv_charge(xi_server *s, int64_t bytes);
void xi_srv_uncharge(xi_server *s, int64_t bytes);
enum {
    XI_JSON_ELEMENT_COST = 512,      /* bytes one JSON element costs parsed and rendered (measured: 2.3 KB per chat message of 5) */
    XI_JSON_MAX_DEPTH = 128,         /* nesting past this is a 400 */
};
void xi_guard_stop(xi_server *s);

/* Which API a completion job answers (server/responses rewrites its requests for chat). */
enum { XI_API_COMPLETIONS, XI_API_CHAT, XI_API_RESPONSES };

/* /v1/chat/completions, /v1/completions and /v1/responses (api: XI_API_*): parse, tokenize,
 * submit and answer. Sets *job when a job outlives this call (its answer is not complete yet); the connection
 * passes it to xi_job_resume when resumed and to xi_job_connection_done when the request ends. */
enum MHD_Result xi_job_handle(xi_server *s, struct MHD_Connection *c, int api, int http11,
                              const char *body, size_t len, xi_job **job);
/* The connection holding job ended (ok: the response was sent completely). */
void xi_job_connection_done(xi_job *job, int ok);
/* Abort the job's engine requests that have not finished. */
void xi_job_abort(xi_job *job);
/* The connection of a job waiting for its answer was resumed: queue the answer when it is
 * complete, else suspend again. */
enum MHD_Result xi_job_resume(xi_job *job);
/* Watchdog: resume suspended jobs whose client is gone, or all of them once closing. */
void xi_job_watch(xi_server *s);

#endif
