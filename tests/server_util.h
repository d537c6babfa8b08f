/* Test helpers: a real engine on a model of the shared data behind a real server on a free
 * port, and HTTP POSTs to it through libcurl. */
#ifndef XI_TEST_SERVER_UTIL_H
#define XI_TEST_SERVER_UTIL_H

#include "server/server.h"

typedef struct server {
    xi_engine *eng;
    xi_server *srv;
    int port;
} server;

/* Serve models/<name> of the shared data (rel: "models/qwen2-tiny-random") as "tiny", on one
 * thread; reasoning_parser may be NULL. 0, or -1 with the reason printed. */
int ts_start(server *s, const char *rel, const char *reasoning_parser);
/* The same with cfg's flags (its names, path and body limit are filled in). */
int ts_start_cfg(server *s, const char *rel, xi_server_config cfg);
/* The same with engine parameters of the caller's (model_dir and all). */
int ts_start_params(server *s, const xi_engine_params *p, xi_server_config cfg);
/* models/<rel> with max_model_len (its default KV cache), cfg's flags. */
int ts_start_len(server *s, const char *rel, int max_model_len, xi_server_config cfg);
void ts_stop(server *s);
/* POST json to path: the HTTP status (0 when none came), the body in *out (heap, never NULL). */
long ts_post(const server *s, const char *path, const char *json, char **out);
/* GET path: the same. */
long ts_get(const server *s, const char *path, char **out);
/* A libcurl CURLOPT_WRITEFUNCTION collecting into a ts_body (CURLOPT_WRITEDATA): p is a
 * NUL-terminated heap string of n bytes once anything came, else NULL. */
typedef struct ts_body {
    char *p;
    size_t n;
} ts_body;
size_t ts_on_data(char *d, size_t size, size_t n, void *user);

#endif
