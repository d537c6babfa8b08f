/* server: the HTTP front of `xinfer serve` (libmicrohttpd, a few epoll threads).
 * Routes: POST /v1/chat/completions, /v1/completions, /v1/responses (responses.c),
 * /v1/embeddings (embeddings.c), /invocations; GET /v1/models/{id}, /ping (cors.c: CORS, X-Request-Id);
 * /tokenize, /detokenize; GET /v1/models, /health, /version, /metrics; the web UI's GET /,
 * /dashboard, /webui/NAME (webui.h). The owner (cmd_serve) creates the listening socket, starts
 * the server, opens the engine and hands it over with xi_server_set_engine; until then every
 * route but /health, /version and the web UI answers 503. All functions belong to the owning
 * thread. */
#ifndef XI_SERVER_H
#define XI_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "xinfer.h"

typedef struct xi_server xi_server;

typedef struct xi_server_config {
    const char *const *served_names; /* [n_served_names]; [0] is written into bodies */
    int n_served_names;
    const char *model_path;          /* shown as "root" in /v1/models */
    const char *const *api_keys;     /* [n_api_keys]; none: no auth */
    int n_api_keys;
    int64_t max_body_bytes;          /* larger bodies get 413 */
    int log_requests;
    const char *tool_parser;         /* parse tool calls out of chat outputs ("hermes"), or NULL */
    const char *reasoning_parser;    /* split reasoning out of chat outputs, or NULL */
    int pooling;                     /* a pooling model: /v1/embeddings, no completions */
    int no_webui;                    /* no chat page, dashboard or /webui/ (--no-webui) */
    /* What a client may cost (0: the default). */
    int limit_concurrency;           /* open connections before eviction / 503 (from RLIMIT_NOFILE) */
    double timeout_keep_alive;       /* seconds a connection may idle before a request (5) */
    double timeout_request_read;     /* seconds from a request line to the end of its body (30) */
    int max_seqs_per_request;        /* prompts x n of one request; more is a 400 (1024) */
    int64_t max_parse_bytes;         /* bodies being parsed, weighted by their JSON, at once (1 GiB) */
    const char *allowed_origins;     /* CORS (server/cors.h): JSON lists, NULL meaning ["*"] */
    const char *allowed_methods, *allowed_headers;
    int allow_credentials;
    int request_id_headers;          /* X-Request-Id on every answer (--enable-request-id-headers) */
    int force_include_usage;         /* streams end with usage unasked (--enable-force-include-usage) */
    int server_load_tracking;        /* GET /load counts requests in flight (else 0) */
    int show_hidden_metrics;         /* --show-hidden-metrics-for-version: deprecated metrics too */
    int tokenizer_info;              /* GET /tokenizer_info (--enable-tokenizer-info-endpoint) */
    const char *model_dir;           /* the folder loaded (xi_server_set_model_dir), or NULL */
    const char *fingerprint_mode;    /* server/fingerprint: full (NULL), hash, custom, none */
    const char *fingerprint_value;   /* custom's value */
    /* HTTPS (server/tls.h) when ssl_certfile is set; the files are read by xi_server_start. */
    const char *ssl_certfile, *ssl_keyfile, *ssl_ca_certs;
    int ssl_cert_reqs;               /* client certificates: 0 none, 1 optional, 2 required */
} xi_server_config;

/* A listening socket on host:port (port 0: a free one, written to *bound_port) or on the
 * Unix socket uds when uds is non-NULL. Returns the fd or -1 with err filled. */
int xi_server_listen(const char *host, int port, const char *uds, int *bound_port, char *err,
                     size_t errlen);

/* Serve on listen_fd (the server owns it from now on). The strings in cfg must outlive the
 * server. */
xi_server *xi_server_start(const xi_server_config *cfg, int listen_fd, char *err, size_t errlen);
/* The engine is loaded and started: requests are served from now on. */
int xi_server_set_engine(xi_server *s, xi_engine *e, char *err, size_t errlen);
/* Draining: new completions and /health get 503; requests in flight continue. */
void xi_server_quiesce(xi_server *s);
/* Completion requests whose answers are not finished. */
int xi_server_in_flight(xi_server *s);
/* Abort every unfinished request (each gets finish_reason "abort"). */
void xi_server_abort_all(xi_server *s);
/* Close every connection and join their threads; afterwards no server thread calls the
 * engine. Then the caller closes the engine (which finishes what is left) and frees. */
void xi_server_stop(xi_server *s);
void xi_server_free(xi_server *s);

/* Log one line to stderr in the project's format (any thread). */
void xi_srv_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
