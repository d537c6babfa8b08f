/* server/serve_args: the `xinfer serve` command line, spelled as vLLM spells it.
 * Pure functions of argv and the environment (no engine, no sockets), so tests call them
 * directly. Any thread; the caller owns the struct. */
#ifndef XI_SERVE_ARGS_H
#define XI_SERVE_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "xinfer.h"

#define XI_SERVE_MAX_NAMES 16
#define XI_SERVE_MAX_KEYS 16
#define XI_SERVE_MAX_NOTICES 32
#define XI_SERVE_MAX_ARGS 512

typedef struct xi_serve_args {
    xi_engine_params engine;        /* strings point into argv or are static */
    const char *model_path;         /* the folder the engine opens, or a hub name ORG/NAME */
    const char *download_dir;       /* --download-dir: the hub cache for ORG/NAME models */
    const char *served_names[XI_SERVE_MAX_NAMES]; /* [n_served_names]; [0] answers in bodies */
    int n_served_names;
    const char *host;               /* "0.0.0.0" */
    int port;                       /* 8000; 0 picks a free port */
    const char *uds;                /* Unix socket path instead of host:port, or NULL */
    const char *api_keys[XI_SERVE_MAX_KEYS]; /* [n_api_keys] from flags and the environment */
    int n_api_keys;
    const char *chat_template;      /* --chat-template FILE or NULL */
    int enable_auto_tool_choice;    /* --enable-auto-tool-choice */
    const char *tool_call_parser;   /* --tool-call-parser NAME (a supported one) or NULL */
    const char *reasoning_parser;   /* --reasoning-parser NAME (a supported one) or NULL */
    const char *runner;             /* --runner (--task): "auto", "generate" or "pooling" */
    int enable_log_requests;
    int disable_log_stats;
    int no_webui;                   /* --no-webui: no chat page or dashboard */
    const char *allowed_origins;    /* CORS lists (JSON, checked) or NULL: ["*"] */
    const char *allowed_methods, *allowed_headers;
    int allow_credentials;          /* --allow-credentials */
    int request_id_headers;         /* --enable-request-id-headers */
    const char *ssl_certfile;       /* HTTPS: --ssl-certfile (NULL: plain HTTP), --ssl-keyfile, */
    const char *ssl_keyfile, *ssl_ca_certs; /* --ssl-ca-certs (files, read by the server) */
    int ssl_cert_reqs;              /* --ssl-cert-reqs: 0 none, 1 optional, 2 required */
    int force_include_usage;        /* --enable-force-include-usage */
    int server_load_tracking;       /* --enable-server-load-tracking (GET /load) */
    const char *show_hidden_metrics; /* --show-hidden-metrics-for-version X.Y, or NULL */
    int tokenizer_info;             /* --enable-tokenizer-info-endpoint */
    const char *fingerprint_mode;   /* --fingerprint-mode (checked) or NULL: full */
    const char *fingerprint_value;  /* --fingerprint-value, for custom */
    int64_t max_body_bytes;         /* request bodies above this get 413 (32 MiB) */
    double shutdown_timeout;        /* seconds in-flight requests may finish after SIGTERM */
    double timeout_keep_alive;      /* idle connection timeout (5 s) */
    double timeout_request_read;    /* request line to end of body (30 s) */
    int limit_concurrency;          /* open connections (0: from RLIMIT_NOFILE) */
    int max_seqs_per_request;       /* prompts x n (1024) */
    int64_t max_parse_bytes;        /* weighted bodies being parsed at once (1 GiB) */
    int help;                       /* --help was given: print xi_serve_args_help and exit 0 */
    /* One line each: flags accepted for vLLM compatibility that change nothing here, and how
     * the positional MODEL and --model were resolved. The caller prints them. */
    char notices[XI_SERVE_MAX_NOTICES][160];
    int n_notices;
    /* --config FILE: the file's flags as tokens, then argv[1..], parsed in that order so that
     * the command line overrides the file; strings above may point into cfg_text. */
    char *cfg_argv[XI_SERVE_MAX_ARGS];
    char cfg_text[16384];
} xi_serve_args;

/* Parse argv (argv[0] is "serve"). env_get reads the environment (getenv, or a fake in
 * tests). dir_exists tells whether a path is a folder (for the MODEL/--model rule).
 * Returns 0, or -1 with err naming the flag that was wrong. */
int xi_serve_args_parse(xi_serve_args *a, int argc, char **argv,
                        const char *(*env_get)(const char *name),
                        int (*dir_exists)(const char *path), char *err, size_t errlen);

/* The --help text: every flag, one line each. Static string. */
const char *xi_serve_args_help(void);

#endif
