/* The headers and small routes every client meets (server/cors, server.c's routing): CORS
 * as Starlette's middleware answers (preflight and simple requests), X-Request-Id echoed or
 * made up, GET /v1/models/{id}, SageMaker's /ping and /invocations. Through real sockets with
 * curl; the routes that need the engine use the random-weight Qwen2 model. */
#include <stdlib.h>

#include <jansson.h>

#include "server_util.h"
#include "test.h"

/* curl -i: the status line, headers and body of one call */
__attribute__((noinline)) static char *http(int port, const char *opts, const char *path) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "curl -s -i -m 20 %s%s http://127.0.0.1:%d%s", strstr(opts, "-d ") ? "-H 'Content-Type: application/json' " : "",
             opts, port, path);
    char *out = NULL;
    xi_test_run(cmd, &out);
    return out ? out : strdup("");
}

/* the value of header name in a curl -i answer ("" when absent), case-insensitive */
static const char *header(const char *out, const char *name, char *buf, size_t cap) {
    buf[0] = 0;
    const size_t n = strlen(name);
    for (const char *l = out; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        if (*l == '\r' || *l == '\n') break; /* end of the headers */
        if (!strncasecmp(l, name, n) && l[n] == ':') {
            const char *v = l + n + 1 + strspn(l + n + 1, " ");
            snprintf(buf, cap, "%.*s", (int)strcspn(v, "\r\n"), v);
            break;
        }
    }
    return buf;
}

static int status_is(const char *out, int status) {
    char want[16];
    snprintf(want, sizeof want, " %d", status);
    return !strncmp(out, "HTTP/1.1", 8) && !strncmp(out + 8, want, strlen(want));
}

TEST(test_cors_default_allows_any_origin_and_answers_preflights) {
    server s = {0};
    CHECK(ts_start_cfg(&s, "models/qwen2-tiny-random", (xi_server_config){0}) == 0);
    char h[256];
    char *o = http(s.port, "-H 'Origin: https://app.example'", "/v1/models");
    CHECKF(status_is(o, 200) && !strcmp(header(o, "Access-Control-Allow-Origin", h, sizeof h), "*"), "%s", o);
    CHECK(!strcmp(header(o, "X-Request-Id", h, sizeof h), "")); /* off by default */
    free(o);
    o = http(s.port, "", "/v1/models"); /* no Origin: no CORS headers */
    CHECKF(!strcmp(header(o, "Access-Control-Allow-Origin", h, sizeof h), ""), "%s", o);
    free(o);
    o = http(s.port, "-X OPTIONS -H 'Origin: https://app.example' -H 'Access-Control-Request-Method: POST' "
                     "-H 'Access-Control-Request-Headers: content-type, authorization'", "/v1/chat/completions");
    CHECKF(status_is(o, 200), "%s", o);
    CHECKF(strstr(header(o, "Access-Control-Allow-Methods", h, sizeof h), "POST"), "%s", o);
    CHECKF(!strcmp(header(o, "Access-Control-Allow-Headers", h, sizeof h), "content-type, authorization"), "%s", o);
    CHECK(!strcmp(header(o, "Access-Control-Max-Age", h, sizeof h), "600"));
    free(o);
    /* an OPTIONS that is no preflight meets the routes */
    o = http(s.port, "-X OPTIONS", "/v1/chat/completions");
    CHECKF(status_is(o, 405), "%s", o);
    free(o);
    ts_stop(&s);
}

TEST(test_cors_lists_and_credentials_limit_what_is_allowed) {
    server s = {0};
    xi_server_config cfg = {.allowed_origins = "[\"https://a.example\"]", .allowed_methods = "[\"GET\", \"POST\"]",
                            .allowed_headers = "[\"Authorization\"]", .allow_credentials = 1};
    static const char *const keys[] = {"k"};
    cfg.api_keys = keys;
    cfg.n_api_keys = 1;
    CHECK(ts_start_cfg(&s, "models/qwen2-tiny-random", cfg) == 0);
    char h[256];
    /* preflights need no key; the origin is echoed with credentials */
    char *o = http(s.port, "-X OPTIONS -H 'Origin: https://a.example' -H 'Access-Control-Request-Method: POST' "
                           "-H 'Access-Control-Request-Headers: authorization'", "/v1/completions");
    CHECKF(status_is(o, 200) && !strcmp(header(o, "Access-Control-Allow-Origin", h, sizeof h), "https://a.example"), "%s", o);
    CHECK(!strcmp(header(o, "Access-Control-Allow-Credentials", h, sizeof h), "true"));
    CHECK(!strcmp(header(o, "Access-Control-Allow-Methods", h, sizeof h), "GET, POST"));
    free(o);
    static const struct { const char *opts, *why; } bad[] = {
        {"-H 'Origin: https://b.example' -H 'Access-Control-Request-Method: POST'", "origin"},
        {"-H 'Origin: https://a.example' -H 'Access-Control-Request-Method: DELETE'", "method"},
        {"-H 'Origin: https://a.example' -H 'Access-Control-Request-Method: POST' -H 'Access-Control-Request-Headers: x-other'", "headers"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char opts[512], want[64];
        snprintf(opts, sizeof opts, "-X OPTIONS %s", bad[i].opts);
        snprintf(want, sizeof want, "Disallowed CORS %s", bad[i].why);
        o = http(s.port, opts, "/v1/completions");
        CHECKF(status_is(o, 400) && strstr(o, want), "%s: %s", bad[i].opts, o);
        free(o);
    }
    /* a simple request: even a 401 carries the origin (so the page can read the error) */
    o = http(s.port, "-H 'Origin: https://a.example'", "/v1/models");
    CHECKF(status_is(o, 401) && !strcmp(header(o, "Access-Control-Allow-Origin", h, sizeof h), "https://a.example"), "%s", o);
    CHECK(!strcmp(header(o, "Vary", h, sizeof h), "Origin"));
    free(o);
    o = http(s.port, "-H 'Origin: https://b.example' -H 'Authorization: Bearer k'", "/v1/models");
    CHECKF(status_is(o, 200) && !strcmp(header(o, "Access-Control-Allow-Origin", h, sizeof h), ""), "%s", o);
    free(o);
    ts_stop(&s);
}

TEST(test_request_id_headers_model_card_ping_and_invocations) {
    server s = {0};
    CHECK(ts_start_cfg(&s, "models/qwen2-tiny-random", (xi_server_config){.request_id_headers = 1}) == 0);
    char h[256];
    /* the client's id is echoed and names the completion */
    char *o = http(s.port, "-H 'X-Request-Id: abc-123' -d '{\"prompt\": \"Hi\", \"max_tokens\": 2}'", "/v1/completions");
    CHECKF(status_is(o, 200) && !strcmp(header(o, "X-Request-Id", h, sizeof h), "abc-123"), "%s", o);
    CHECKF(strstr(o, "\"id\":\"cmpl-abc-123\""), "%s", o);
    free(o);
    /* none (or an unusable one): a new id, different each time */
    char first[256];
    o = http(s.port, "-H 'X-Request-Id: bad id with spaces'", "/v1/models");
    header(o, "X-Request-Id", first, sizeof first);
    CHECKF(strlen(first) > 8 && strcmp(first, "bad id with spaces"), "%s", o);
    free(o);
    o = http(s.port, "", "/health");
    CHECKF(status_is(o, 200) && strlen(header(o, "X-Request-Id", h, sizeof h)) > 8 && strcmp(h, first), "%s", o);
    free(o);
    /* GET /v1/models/{id} */
    o = http(s.port, "", "/v1/models/tiny");
    CHECKF(status_is(o, 200) && strstr(o, "\"id\":\"tiny\"") && strstr(o, "\"object\":\"model\""), "%s", o);
    free(o);
    o = http(s.port, "", "/v1/models/other");
    CHECKF(status_is(o, 404) && strstr(o, "does not exist"), "%s", o);
    free(o);
    /* SageMaker: /ping as /health, /invocations by the body's fields */
    o = http(s.port, "", "/ping");
    CHECKF(status_is(o, 200), "%s", o);
    free(o);
    o = http(s.port, "-X POST", "/ping");
    CHECKF(status_is(o, 200), "%s", o);
    free(o);
    o = http(s.port, "-d '{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 2}'", "/invocations");
    CHECKF(status_is(o, 200) && strstr(o, "\"object\":\"chat.completion\""), "%s", o);
    free(o);
    o = http(s.port, "-d '{\"prompt\": \"Hi\", \"max_tokens\": 2}'", "/invocations");
    CHECKF(status_is(o, 200) && strstr(o, "\"object\":\"text_completion\""), "%s", o);
    free(o);
    o = http(s.port, "-d '{\"input\": \"Hi\"}'", "/invocations");
    CHECKF(status_is(o, 400) && strstr(o, "\"error\""), "%s", o);
    free(o);
    /* a JSON body needs its Content-Type, as vLLM requires (parameters after ';' aside) */
    o = http(s.port, "--data-binary '{\"prompt\": \"Hi\", \"max_tokens\": 1}' -H 'Content-Type: text/plain'", "/v1/completions");
    CHECKF(status_is(o, 400) && strstr(o, "Only 'application/json' is allowed"), "%s", o);
    free(o);
    o = http(s.port, "--data-binary '{\"prompt\": \"Hi\", \"max_tokens\": 1}' -H 'Content-Type: Application/JSON; charset=utf-8'", "/v1/completions");
    CHECKF(status_is(o, 200), "%s", o);
    free(o);
    ts_stop(&s);
}

TEST(test_tokenizer_info_only_with_its_flag) {
    server s = {0};
    CHECK(ts_start_cfg(&s, "models/qwen2-tiny-random", (xi_server_config){0}) == 0);
    char *o = http(s.port, "", "/tokenizer_info");
    CHECKF(status_is(o, 404), "%s", o);
    free(o);
    ts_stop(&s);
    char *dir = xi_test_data("models/qwen2-tiny-random");
    CHECK(ts_start_cfg(&s, "models/qwen2-tiny-random", (xi_server_config){.tokenizer_info = 1, .model_dir = dir}) == 0);
    o = http(s.port, "", "/tokenizer_info");
    const char *body = strstr(o, "\r\n\r\n");
    json_t *got = body ? json_loads(body + 4, 0, NULL) : NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    json_t *want = json_load_file(path, 0, NULL);
    /* the folder's tokenizer_config.json, as it is */
    CHECKF(status_is(o, 200) && want && json_is_string(json_object_get(got, "tokenizer_class")) &&
           json_equal(json_object_get(got, "tokenizer_class"), json_object_get(want, "tokenizer_class")) &&
           json_equal(json_object_get(got, "chat_template"), json_object_get(want, "chat_template")), "%.500s", o);
    json_decref(got);
    json_decref(want);
    free(o);
    ts_stop(&s);
}
