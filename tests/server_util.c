/* Test helpers: a served model and HTTP POSTs (see server_util.h). */
#include "server_util.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

int ts_start(server *s, const char *rel, const char *reasoning_parser) {
    return ts_start_cfg(s, rel, (xi_server_config){.reasoning_parser = reasoning_parser});
}

int ts_start_cfg(server *s, const char *rel, xi_server_config cfg) {
    xi_engine_params p;
    xi_engine_params_default(&p);
    p.model_dir = xi_test_data(rel);
    p.kv_cache_memory_bytes = 16 << 20;
    p.n_threads = 1;
    return ts_start_params(s, &p, cfg);
}

int ts_start_len(server *s, const char *rel, int max_model_len, xi_server_config cfg) {
    xi_engine_params p;
    xi_engine_params_default(&p);
    char *dir = xi_test_data(rel);
    p.model_dir = dir;
    p.max_model_len = max_model_len;
    p.n_threads = 1;
    const int rc = ts_start_params(s, &p, cfg); /* the engine keeps its own copy of the path */
    free(dir);
    return rc;
}

int ts_start_params(server *s, const xi_engine_params *p, xi_server_config cfg) {
    static const char *const names[] = {"tiny"};
    char err[512];
    s->eng = xi_engine_open(p, err, sizeof err);
    if (!s->eng || xi_engine_start(s->eng, err, sizeof err)) return fprintf(stderr, "    %s\n", err), -1;
    const int fd = xi_server_listen("127.0.0.1", 0, NULL, &s->port, err, sizeof err);
    cfg.served_names = names;
    cfg.n_served_names = 1;
    cfg.model_path = "/none";
    if (!cfg.max_body_bytes) cfg.max_body_bytes = 1 << 20;
    s->srv = fd < 0 ? NULL : xi_server_start(&cfg, fd, err, sizeof err);
    if (!s->srv || xi_server_set_engine(s->srv, s->eng, err, sizeof err)) return fprintf(stderr, "    %s\n", err), -1;
    return 0;
}

void ts_stop(server *s) {
    if (s->srv) xi_server_stop(s->srv);
    if (s->eng) xi_engine_close(s->eng);
    if (s->srv) xi_server_free(s->srv);
}

size_t ts_on_data(char *d, size_t size, size_t n, void *user) {
    ts_body *b = user;
    char *q = realloc(b->p, b->n + size * n + 1);
    if (!q) return 0;
    memcpy(q + b->n, d, size * n);
    b->p = q;
    b->n += size * n;
    b->p[b->n] = 0;
    return size * n;
}

long ts_get(const server *s, const char *path, char **out) { return ts_post(s, path, NULL, out); }

long ts_post(const server *s, const char *path, const char *json, char **out) {
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", s->port, path);
    CURL *c = curl_easy_init();
    ts_body b = {0};
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (json) curl_easy_setopt(c, CURLOPT_POSTFIELDS, json);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, ts_on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    *out = b.p ? b.p : strdup("");
    return status;
}
