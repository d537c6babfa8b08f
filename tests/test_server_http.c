/* The HTTP layer through real sockets with curl, before any model is loaded: routing, auth,
 * body limits and the loading state. The model-backed endpoints are covered by tests/e2e. */
#include <stdlib.h>
#include <time.h>

#include <jansson.h>

#include "server/server.h"
#include "test.h"

static xi_server *start(int *port, const char *const *keys, int n_keys, const char *tool_parser,
                        const char *reasoning_parser) {
    static const char *const names[] = {"tiny"};
    char err[256];
    int fd = xi_server_listen("127.0.0.1", 0, NULL, port, err, sizeof err);
    if (fd < 0) {
        fprintf(stderr, "    listen: %s\n", err);
        return NULL;
    }
    xi_server_config cfg = {.served_names = names, .n_served_names = 1, .model_path = "/none",
                            .api_keys = keys, .n_api_keys = n_keys, .max_body_bytes = 1 << 20,
                            .tool_parser = tool_parser, .reasoning_parser = reasoning_parser};
    return xi_server_start(&cfg, fd, err, sizeof err);
}

/* "<status> <body>" of one curl call */
/* noinline: GCC 12 otherwise mistakes the returned buffer for the local that held it */
__attribute__((noinline)) static char *http(int port, const char *opts, const char *path) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "curl -s -m 10 -w ' %%{http_code}' -H 'Content-Type: application/json' %s http://127.0.0.1:%d%s",
             opts, port, path);
    char *out = NULL;
    xi_test_run(cmd, &out);
    return out;
}

static int ends_with_status(const char *out, const char *status) {
    size_t n = strlen(out), k = strlen(status);
    return n > k && !strcmp(out + n - k, status) && out[n - k - 1] == ' ';
}

TEST(test_serve_http_loading_state_and_routes) {
    int port;
    xi_server *s = start(&port, NULL, 0, NULL, NULL);
    CHECK(s);
    char *o = http(port, "", "/health");
    CHECKF(ends_with_status(o, "503"), "%s", o);
    o = http(port, "", "/version");
    CHECKF(ends_with_status(o, "200") && strstr(o, "\"version\""), "%s", o);
    o = http(port, "", "/v1/models");
    CHECKF(ends_with_status(o, "503") && strstr(o, "loading"), "%s", o);
    o = http(port, "-X POST -d '{}'", "/v1/chat/completions");
    CHECKF(ends_with_status(o, "503") && strstr(o, "\"error\""), "%s", o);
    o = http(port, "", "/nope");
    CHECKF(ends_with_status(o, "404") && strstr(o, "\"error\"") && strstr(o, "\"message\""), "%s", o);
    o = http(port, "-X DELETE", "/v1/models");
    CHECKF(ends_with_status(o, "405"), "%s", o);
    xi_server_free(s);
}

TEST(test_serve_http_api_key_guards_v1_and_tokenize_only) {
    static const char *const keys[] = {"sekrit"};
    int port;
    xi_server *s = start(&port, keys, 1, NULL, NULL);
    CHECK(s);
    char *o = http(port, "", "/v1/models");
    CHECKF(ends_with_status(o, "401") && strstr(o, "invalid_api_key"), "%s", o);
    o = http(port, "-H 'Authorization: Bearer wrong'", "/v1/models");
    CHECKF(ends_with_status(o, "401"), "%s", o);
    o = http(port, "-X POST -d '{}'", "/tokenize");
    CHECKF(ends_with_status(o, "401"), "%s", o);
    o = http(port, "-X POST -d '{}'", "/detokenize");
    CHECKF(ends_with_status(o, "401"), "%s", o);
    o = http(port, "-X POST -d '{}'", "/v1/completions");
    CHECKF(ends_with_status(o, "401"), "%s", o);
    /* the right key passes auth (and meets the loading state) */
    o = http(port, "-H 'Authorization: Bearer sekrit'", "/v1/models");
    CHECKF(ends_with_status(o, "503"), "%s", o);
    /* scrapers and probes need no key, as in vLLM */
    o = http(port, "", "/version");
    CHECKF(ends_with_status(o, "200"), "%s", o);
    o = http(port, "", "/health");
    CHECKF(ends_with_status(o, "503"), "%s", o);
    o = http(port, "", "/metrics");
    CHECKF(!ends_with_status(o, "401"), "%s", o);
    xi_server_free(s);
}

TEST(test_serve_http_body_over_limit_is_413) {
    int port;
    xi_server *s = start(&port, NULL, 0, NULL, NULL);
    CHECK(s);
    /* 2 MiB of JSON against a 1 MiB limit, with and without a Content-Length */
    const char *dir = xi_test_tmpdir();
    char path[512], args[1200];
    snprintf(path, sizeof path, "%s/big.json", dir);
    FILE *f = fopen(path, "w");
    CHECK(f);
    fputs("{\"prompt\": \"", f);
    for (int i = 0; i < 2 << 20; i++) fputc('a', f);
    fputs("\"}", f);
    fclose(f);
    snprintf(args, sizeof args, "-X POST -H 'Content-Type: application/json' --data-binary @%s", path);
    char *o = http(port, args, "/v1/completions");
    CHECKF(ends_with_status(o, "413"), "%.200s", o);
    snprintf(args, sizeof args, "-X POST -H 'Transfer-Encoding: chunked' --data-binary @%s", path);
    o = http(port, args, "/v1/completions");
    /* a chunked body has no Content-Length: it is counted as it arrives, then refused */
    CHECKF(ends_with_status(o, "413"), "%.200s", o);
    xi_server_free(s);
}

/* A started engine on a test model (4 MiB of KV cache, one thread), or NULL with err set.
 * test_server_limits.c uses it too. */
xi_engine *open_engine(const char *model, char *err, size_t errlen);
xi_engine *open_engine(const char *model, char *err, size_t errlen) {
    xi_engine_params p;
    xi_engine_params_default(&p);
    p.model_dir = xi_test_data(model);
    p.kv_cache_memory_bytes = 4 << 20;
    p.n_threads = 1;
    xi_engine *eng = xi_engine_open(&p, err, errlen);
    if (eng && xi_engine_start(eng, err, errlen)) {
        xi_engine_close(eng);
        return NULL;
    }
    return eng;
}

/* The whole path in one process (so the C ASan run covers it): engine + server, completions
 * streamed and not, a client that hangs up mid-stream, then a clean shutdown. */
TEST(test_serve_http_model_roundtrip_and_hangup_leave_engine_idle) {
    char err[512] = "";
    xi_engine *eng = open_engine("models/stories260K", err, sizeof err);
    CHECKF(eng, "%s", err);
    int port;
    xi_server *s = start(&port, NULL, 0, NULL, NULL);
    CHECK(s);
    CHECKF(xi_server_set_engine(s, eng, err, sizeof err) == 0, "%s", err);

    char *o = http(port, "", "/health");
    CHECKF(ends_with_status(o, "200"), "%s", o);
    o = http(port, "-d '{\"model\":\"tiny\",\"prompt\":\"Once upon a time\",\"max_tokens\":8,\"temperature\":0}'", "/v1/completions");
    CHECKF(ends_with_status(o, "200") && strstr(o, "\"completion_tokens\":8"), "%s", o);
    /* stories260K has no chat template: a 400 that says so once and names the flag */
    o = http(port, "-d '{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}'", "/v1/chat/completions");
    CHECKF(ends_with_status(o, "400") && strstr(o, "\"message\":\"chat template: the model") &&
               strstr(o, "--chat-template") && !strstr(o, "chat template: chat template"),
           "%s", o);
    o = http(port, "-N -d '{\"prompt\":\"Once\",\"max_tokens\":4,\"stream\":true}'", "/v1/completions");
    CHECKF(ends_with_status(o, "200") && strstr(o, "data: [DONE]\n\n"), "%s", o);
    /* hang up after the first chunks of a long stream (head exits, curl dies on its next
     * write): the request is aborted and its blocks freed */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "curl -s -N -H 'Content-Type: application/json' -d '{\"prompt\":\"Once\",\"max_tokens\":480,\"ignore_eos\":true,"
             "\"stream\":true}' http://127.0.0.1:%d/v1/completions | head -c 300 >/dev/null", port);
    xi_test_run(cmd, NULL);
    xi_engine_stats st = {0};
    for (int i = 0; i < 200; i++) {
        xi_engine_get_stats(eng, &st);
        if (!st.num_running && !st.num_waiting && xi_server_in_flight(s) == 0) break;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    CHECK_EQ(st.num_running, 0);
    CHECK_EQ(st.num_waiting, 0);
    CHECK_NEAR(st.kv_cache_usage, 0, 0);
    CHECK_EQ(xi_server_in_flight(s), 0);
    o = http(port, "", "/metrics");
    CHECKF(strstr(o, "vllm:request_success_total{finished_reason=\"abort\",model_name=\"tiny\"} 1\n"), "%s", o);
    CHECKF(strstr(o, "vllm:request_success_total{finished_reason=\"length\",model_name=\"tiny\"} 2\n"), "%s", o);
    xi_server_stop(s);
    xi_engine_close(eng);
    xi_server_free(s);
}

/* The strings of one delta field over every chunk of an SSE body, joined into out. */
static const char *sse_join(const char *sse, const char *field, char *out, size_t cap) {
    out[0] = 0;
    for (const char *d = strstr(sse, "data: {"); d; d = strstr(d + 1, "data: {")) {
        json_t *ch = json_loads(d + 6, JSON_DISABLE_EOF_CHECK, NULL);
        json_t *v = json_object_get(json_object_get(json_array_get(json_object_get(ch, "choices"), 0), "delta"), field);
        if (json_is_string(v)) strncat(out, json_string_value(v), cap - strlen(out) - 1);
        else if (v) strncat(out, "<not a string>", cap - strlen(out) - 1);
        json_decref(ch);
    }
    return out;
}

/* Tool calling with a Qwen2 tokenizer and chat template: the request rules, and a chat with
 * tools whose answer holds no call comes back as plain content, the same streamed or not.
 * (The calls themselves are covered by test_server_tools.c: a random model writes none.) */
TEST(test_serve_http_tool_choice_and_content_with_the_hermes_parser) {
    char err[512] = "";
    xi_engine *eng = open_engine("models/qwen2-tiny-random", err, sizeof err);
    CHECKF(eng, "%s", err);
    int port, port2;
    xi_server *s = start(&port, NULL, 0, "hermes", NULL), *plain = start(&port2, NULL, 0, NULL, NULL);
    CHECK(s && plain);
    CHECKF(xi_server_set_engine(s, eng, err, sizeof err) == 0, "%s", err);
    CHECKF(xi_server_set_engine(plain, eng, err, sizeof err) == 0, "%s", err);

#define TOOL_BODY "{\"messages\":[{\"role\":\"user\",\"content\":\"weather?\"}],\"tools\":[{\"type\":" \
    "\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\"}}}]," \
    "\"tool_choice\":\"auto\",\"max_tokens\":6,\"temperature\":0,\"ignore_eos\":true"
    char *o = http(port2, "-d '" TOOL_BODY "}'", "/v1/chat/completions");
    CHECKF(ends_with_status(o, "400") && strstr(o, "--enable-auto-tool-choice"), "%s", o);
    o = http(port, "-d '" TOOL_BODY "}'", "/v1/chat/completions");
    CHECKF(ends_with_status(o, "200"), "%s", o);
    json_t *whole = json_loads(o, JSON_DISABLE_EOF_CHECK, NULL);
    json_t *msg = json_object_get(json_array_get(json_object_get(whole, "choices"), 0), "message");
    const char *content = json_string_value(json_object_get(msg, "content"));
    CHECKF(content && !json_object_get(msg, "tool_calls"), "%s", o);
    CHECKF(strstr(o, "\"finish_reason\":\"length\""), "%s", o);
    o = http(port, "-N -d '" TOOL_BODY ",\"stream\":true}'", "/v1/chat/completions");
    CHECKF(ends_with_status(o, "200") && strstr(o, "data: [DONE]"), "%s", o);
    char streamed[4096];
    CHECK(!sse_join(o, "tool_calls", streamed, sizeof streamed)[0]);
    sse_join(o, "content", streamed, sizeof streamed);
    CHECKF(content && !strcmp(streamed, content), "streamed '%s' vs '%s'", streamed, content ? content : "");
    json_decref(whole);
#undef TOOL_BODY
    xi_server_stop(s);
    xi_server_stop(plain);
    xi_engine_close(eng);
    xi_server_free(s);
    xi_server_free(plain);
}

/* Reasoning parsers on a model that writes no think tags: deepseek_r1 (the template opened
 * <think> in the prompt) reads the whole answer as reasoning, qwen3 as content; streamed,
 * the deltas join to the same parts. */
TEST(test_serve_http_reasoning_parsers_split_answers) {
    char err[512] = "";
    xi_engine *eng = open_engine("models/qwen2-tiny-random", err, sizeof err);
    CHECKF(eng, "%s", err);
    int port, port2;
    xi_server *r1 = start(&port, NULL, 0, NULL, "deepseek_r1"), *q3 = start(&port2, NULL, 0, NULL, "qwen3");
    CHECK(r1 && q3);
    CHECKF(xi_server_set_engine(r1, eng, err, sizeof err) == 0, "%s", err);
    CHECKF(xi_server_set_engine(q3, eng, err, sizeof err) == 0, "%s", err);
#define BODY "{\"messages\":[{\"role\":\"user\",\"content\":\"2+2?\"}],\"max_tokens\":6,\"temperature\":0," \
    "\"ignore_eos\":true"
    for (int k = 0; k < 2; k++) {
        const int p = k ? port2 : port;
        char *o = http(p, "-d '" BODY "}'", "/v1/chat/completions");
        CHECKF(ends_with_status(o, "200"), "%s", o);
        json_t *whole = json_loads(o, JSON_DISABLE_EOF_CHECK, NULL);
        json_t *msg = json_object_get(json_array_get(json_object_get(whole, "choices"), 0), "message");
        json_t *reasoning = json_object_get(msg, "reasoning_content"), *content = json_object_get(msg, "content");
        /* deepseek_r1: all reasoning, content null; qwen3: reasoning null, all content */
        json_t *text = k ? content : reasoning, *none = k ? reasoning : content;
        CHECKF(json_is_string(text) && json_string_length(text) > 0 && json_is_null(none), "%s", o);
        o = http(p, "-N -d '" BODY ",\"stream\":true}'", "/v1/chat/completions");
        CHECKF(ends_with_status(o, "200") && strstr(o, "data: [DONE]"), "%s", o);
        char got[4096], other[4096];
        sse_join(o, k ? "content" : "reasoning_content", got, sizeof got);
        sse_join(o, k ? "reasoning_content" : "content", other, sizeof other);
        CHECKF(!strcmp(got, json_string_value(text)) && !other[0], "streamed '%s' / '%s' vs '%s'", got,
               other, json_string_value(text));
        json_decref(whole);
    }
#undef BODY
    xi_server_stop(r1);
    xi_server_stop(q3);
    xi_engine_close(eng);
    xi_server_free(r1);
    xi_server_free(q3);
}
