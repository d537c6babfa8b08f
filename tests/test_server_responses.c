/* POST /v1/responses (server/responses): requests rewritten into chat requests, and the
 * answers through a real server on the random-weight Qwen2 model (real tokenizer and
 * template), which must say exactly what /v1/chat/completions says for the same request,
 * streamed as well-formed typed events or not. */
#include <jansson.h>
#include <stdlib.h>

#include "server/responses.h"
#include "server_util.h"
#include "test.h"

static json_t *rewrite(const char *body, xi_oai_error *e) {
    char *chat = NULL;
    xi_resp *r = xi_resp_parse(body, strlen(body), &chat, e);
    json_t *o = chat ? json_loads(chat, 0, NULL) : NULL;
    free(chat);
    xi_resp_free(r);
    return o;
}

static const char *str_at(json_t *o, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save, *k = strtok_r(buf, ".", &save); k && o; k = strtok_r(NULL, ".", &save))
        o = *k >= '0' && *k <= '9' ? json_array_get(o, (size_t)atoi(k)) : json_object_get(o, k);
    return json_string_value(o);
}

TEST(test_responses_request_becomes_the_chat_request) {
    xi_oai_error e;
    json_t *c = rewrite("{\"model\": \"tiny\", \"instructions\": \"Be brief.\", \"max_output_tokens\": 9,"
                        "\"temperature\": 0.5, \"input\": ["
                        "{\"role\": \"user\", \"content\": [{\"type\": \"input_text\", \"text\": \"a\"}, {\"type\": \"input_text\", \"text\": \"b\"}]},"
                        "{\"type\": \"reasoning\", \"id\": \"rs_1\", \"summary\": []},"
                        "{\"type\": \"function_call\", \"call_id\": \"c1\", \"name\": \"f\", \"arguments\": \"{}\"},"
                        "{\"type\": \"function_call\", \"call_id\": \"c2\", \"name\": \"g\", \"arguments\": \"{\\\"x\\\":1}\"},"
                        "{\"type\": \"function_call_output\", \"call_id\": \"c1\", \"output\": \"42\"},"
                        "{\"type\": \"message\", \"role\": \"assistant\", \"content\": [{\"type\": \"output_text\", \"text\": \"ok\"}]}],"
                        "\"tools\": [{\"type\": \"function\", \"name\": \"f\", \"parameters\": {\"type\": \"object\"}}],"
                        "\"tool_choice\": {\"type\": \"function\", \"name\": \"f\"},"
                        "\"text\": {\"format\": {\"type\": \"json_schema\", \"name\": \"s\", \"schema\": {\"type\": \"object\"}, \"strict\": true}},"
                        "\"store\": true, \"metadata\": {\"k\": \"v\"}}", &e);
    CHECKF(c != NULL, "%s", e.message);
    json_t *m = json_object_get(c, "messages");
    CHECK_EQ((int)json_array_size(m), 5);
    CHECK_STR(str_at(m, "0.role"), "system");
    CHECK_STR(str_at(m, "0.content"), "Be brief.");
    CHECK_STR(str_at(m, "1.content.1.text"), "b");
    /* consecutive calls are one assistant turn, then the tool's answer */
    CHECK_STR(str_at(m, "2.role"), "assistant");
    CHECK_EQ((int)json_array_size(json_object_get(json_array_get(m, 2), "tool_calls")), 2);
    CHECK_STR(str_at(m, "2.tool_calls.1.function.arguments"), "{\"x\":1}");
    CHECK_STR(str_at(m, "3.role"), "tool");
    CHECK_STR(str_at(m, "3.tool_call_id"), "c1");
    CHECK_STR(str_at(m, "4.content.0.text"), "ok");
    CHECK_EQ((int)json_integer_value(json_object_get(c, "max_tokens")), 9);
    CHECK(json_real_value(json_object_get(c, "temperature")) == 0.5);
    CHECK_STR(str_at(c, "tools.0.function.name"), "f");
    CHECK_STR(str_at(c, "tool_choice.function.name"), "f");
    CHECK_STR(str_at(c, "response_format.type"), "json_schema");
    CHECK_STR(str_at(c, "response_format.json_schema.schema.type"), "object");
    CHECK(json_object_get(c, "store") == NULL && json_object_get(c, "metadata") == NULL);
    json_decref(c);
    /* the chat endpoint's own parser takes the rewritten body */
    char *chat = NULL;
    const char *plain = "{\"input\": \"hi\", \"text\": {\"format\": {\"type\": \"text\"}}}";
    xi_resp *r = xi_resp_parse(plain, strlen(plain), &chat, &e);
    xi_oai_request req;
    CHECK(r && xi_oai_parse(&req, 1, chat, strlen(chat), &e) == 0);
    CHECKF(strstr(req.messages_json, "\"content\":\"hi\""), "%s", req.messages_json);
    CHECK(req.params.guide == XI_GUIDE_NONE);
    xi_oai_request_free(&req);
    free(chat);
    xi_resp_free(r);
}

TEST(test_responses_bad_requests_are_400s_naming_the_field) {
    static const struct { const char *body, *param; } bad[] = {
        {"{}", "input"},
        {"{\"input\": []}", "input"},
        {"{\"input\": 3}", "input"},
        {"{\"input\": [{\"type\": \"web_search_call\"}]}", "input"},
        {"{\"input\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_image\", \"image_url\": \"x\"}]}]}", "input"},
        {"{\"input\": [{\"type\": \"function_call\", \"name\": \"f\"}]}", "input"},
        {"{\"input\": \"hi\", \"instructions\": 5}", "instructions"},
        {"{\"input\": \"hi\", \"max_output_tokens\": 0}", "max_output_tokens"},
        {"{\"input\": \"hi\", \"tools\": [{\"type\": \"web_search\"}]}", "tools"},
        {"{\"input\": \"hi\", \"text\": {\"format\": {\"type\": \"xml\"}}}", "text.format"},
        {"{\"input\": \"hi\", \"previous_response_id\": \"resp_1\"}", "previous_response_id"},
        {"{\"input\": \"hi\", \"background\": true}", "background"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        xi_oai_error e = {0};
        json_t *c = rewrite(bad[i].body, &e);
        CHECKF(!c && e.status == 400 && !strcmp(e.param, bad[i].param), "%s: %s (param %s)", bad[i].body,
               c ? "accepted" : e.message, e.param);
        json_decref(c);
    }
    xi_oai_error e = {0};
    CHECK(!rewrite("{\"input\": ", &e) && e.status == 400);
}

/* ---- through the server ---- */

static json_t *post_json(const server *s, const char *path, const char *body) {
    char *out;
    const long st = ts_post(s, path, body, &out);
    json_t *o = st == 200 ? json_loads(out, 0, NULL) : NULL;
    if (!o) fprintf(stderr, "    %s: HTTP %ld %.300s\n", path, st, out);
    free(out);
    return o;
}

/* The events of a streamed response: sequence numbers 0, 1, ... in order, created first,
 * completed last, and the concatenated deltas. Returns the completed response or NULL. */
static json_t *post_stream(const server *s, const char *body, char *deltas, size_t cap, char *why, size_t wcap) {
    char *out;
    const long st = ts_post(s, "/v1/responses", body, &out);
    json_t *done = NULL;
    int seq = 0, ok = st == 200;
    if (!ok) snprintf(why, wcap, "HTTP %ld: %.300s", st, out);
    deltas[0] = 0;
    for (const char *ev = strstr(out, "event: "); ok && ev; ev = strstr(ev + 1, "\nevent: ")) {
        ev += *ev == '\n';
        const char *data = strstr(ev, "\ndata: ");
        json_t *o = data ? json_loads(data + 7, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
        const char *type = json_string_value(json_object_get(o, "type"));
        const size_t tl = strcspn(ev + 7, "\n");
        if (!type || strlen(type) != tl || strncmp(ev + 7, type, tl) ||
            json_integer_value(json_object_get(o, "sequence_number")) != seq ||
            (seq == 0) != !strcmp(type, "response.created") || done) {
            snprintf(why, wcap, "event %d out of order or malformed: %.200s", seq, ev);
            ok = 0;
        } else if (!strcmp(type, "response.output_text.delta")) {
            strncat(deltas, json_string_value(json_object_get(o, "delta")), cap - strlen(deltas) - 1);
        } else if (!strcmp(type, "response.completed")) {
            done = json_incref(json_object_get(o, "response"));
        }
        json_decref(o);
        seq++;
    }
    if (ok && !done) snprintf(why, wcap, "no response.completed in %.300s", out);
    if (!ok) json_decref(done), done = NULL;
    free(out);
    return done;
}

static json_t *item_of_type(json_t *resp, const char *type, int nth) {
    size_t i;
    json_t *it;
    json_array_foreach(json_object_get(resp, "output"), i, it) {
        if (!strcmp(json_string_value(json_object_get(it, "type")), type) && nth-- == 0) return it;
    }
    return NULL;
}

static int usage_of(json_t *o, const char *k) { return (int)json_integer_value(json_object_get(json_object_get(o, "usage"), k)); }

TEST(test_responses_answer_is_the_chat_answer_streamed_or_not) {
    server s = {0};
    CHECK(ts_start(&s, "models/qwen2-tiny-random", NULL) == 0);
    for (int k = 0; k < 2; k++) {
        const int tokens = k ? 40 : 12; /* 40: the random model may stop on its own first */
        char chat_body[512], resp_body[512];
        snprintf(chat_body, sizeof chat_body, "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": "
                 "\"user\", \"content\": \"Tell a story.\"}], \"max_tokens\": %d, \"temperature\": 0}", tokens);
        snprintf(resp_body, sizeof resp_body, "{\"model\": \"tiny\", \"instructions\": \"Be brief.\", \"input\": \"Tell a story.\", "
                 "\"max_output_tokens\": %d, \"temperature\": 0%%s}", tokens);
        char body[600];
        json_t *chat = post_json(&s, "/v1/chat/completions", chat_body);
        snprintf(body, sizeof body, resp_body, "");
        json_t *resp = post_json(&s, "/v1/responses", body);
        CHECK(chat && resp);
        const char *want = str_at(chat, "choices.0.message.content");
        json_t *msg = item_of_type(resp, "message", 0);
        CHECKF(want && msg && !strcmp(str_at(msg, "content.0.text"), want), "chat '%s', responses %s", want,
               json_dumps(resp, 0));
        CHECK_STR(str_at(resp, "object"), "response");
        CHECK(!strncmp(str_at(resp, "id"), "resp_", 5));
        CHECK_STR(str_at(msg, "role"), "assistant");
        CHECK_STR(str_at(resp, "instructions"), "Be brief.");
        CHECK(json_is_false(json_object_get(resp, "store")));
        CHECK_EQ(usage_of(resp, "input_tokens"), usage_of(chat, "prompt_tokens"));
        CHECK_EQ(usage_of(resp, "output_tokens"), usage_of(chat, "completion_tokens"));
        CHECK_EQ(usage_of(resp, "total_tokens"), usage_of(chat, "total_tokens"));
        const int cut = !strcmp(str_at(chat, "choices.0.finish_reason"), "length");
        CHECK_STR(str_at(resp, "status"), cut ? "incomplete" : "completed");
        if (cut) CHECK_STR(str_at(resp, "incomplete_details.reason"), "max_output_tokens");

        char deltas[8192], why[512] = "";
        snprintf(body, sizeof body, resp_body, ", \"stream\": true");
        json_t *done = post_stream(&s, body, deltas, sizeof deltas, why, sizeof why);
        CHECKF(done != NULL, "%s", why);
        CHECKF(!strcmp(deltas, want), "streamed '%s', chat '%s'", deltas, want);
        CHECK_STR(str_at(item_of_type(done, "message", 0), "content.0.text"), want);
        CHECK_STR(str_at(done, "status"), str_at(resp, "status"));
        CHECK_EQ(usage_of(done, "output_tokens"), usage_of(resp, "output_tokens"));
        json_decref(done);
        json_decref(chat);
        json_decref(resp);
    }
    ts_stop(&s);
}

TEST(test_responses_text_format_and_forced_function_calls) {
    server s = {0};
    CHECK(ts_start(&s, "models/qwen2-tiny-random", NULL) == 0);
    /* text.format json_schema holds the message to the schema */
    json_t *resp = post_json(&s, "/v1/responses", "{\"input\": \"A city?\", \"max_output_tokens\": 60, \"temperature\": 1, \"seed\": 3,"
                             "\"text\": {\"format\": {\"type\": \"json_schema\", \"name\": \"c\", \"strict\": true, \"schema\": "
                             "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"maxLength\": 6}}, "
                             "\"required\": [\"city\"], \"additionalProperties\": false}}}}");
    CHECK(resp != NULL);
    const char *text = str_at(item_of_type(resp, "message", 0), "content.0.text");
    json_t *v = text ? json_loads(text, 0, NULL) : NULL;
    CHECKF(json_is_string(json_object_get(v, "city")) && json_object_size(v) == 1, "%s", text);
    json_decref(v);
    json_decref(resp);
    /* a named function and "required": function_call items whose arguments follow the
     * parameters (the budgets of test_structured's forced calls). Under "required" the random
     * model may go on adding parallel calls until max_output_tokens; with this seed it closes
     * the list in time on every kernel variant (ref, avx2, avx512, avx512bf16 checked) */
    const char *tools = "\"tools\": [{\"type\": \"function\", \"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", "
                        "\"properties\": {\"city\": {\"type\": \"string\", \"maxLength\": 6}}, \"required\": [\"city\"], "
                        "\"additionalProperties\": false}}], \"temperature\": 1.0, \"seed\": 13";
    for (int k = 0; k < 3; k++) {
        const int stream = k == 1;
        char body[1024], deltas[4096], why[512] = "";
        snprintf(body, sizeof body, "{\"input\": \"Weather?\", %s, \"tool_choice\": %s, \"stream\": %s}", tools,
                 k < 2 ? "{\"type\": \"function\", \"name\": \"get_weather\"}, \"max_output_tokens\": 200"
                       : "\"required\", \"max_output_tokens\": 300",
                 stream ? "true" : "false");
        resp = stream ? post_stream(&s, body, deltas, sizeof deltas, why, sizeof why) : post_json(&s, "/v1/responses", body);
        CHECKF(resp != NULL, "%s", why);
        json_t *call = item_of_type(resp, "function_call", 0);
        CHECKF(call && !strcmp(str_at(call, "name"), "get_weather"), "%d: no call", k);
        const char *args = str_at(call, "arguments");
        json_t *a = args ? json_loads(args, 0, NULL) : NULL;
        CHECKF(json_is_string(json_object_get(a, "city")) && json_object_size(a) == 1, "arguments %s", args);
        CHECK(str_at(call, "call_id") && str_at(call, "id") && strcmp(str_at(call, "call_id"), str_at(call, "id")));
        CHECK(item_of_type(resp, "message", 0) == NULL);
        json_decref(a);
        json_decref(resp);
    }
    ts_stop(&s);
}

TEST(test_responses_reasoning_item_is_the_chat_reasoning) {
    server s = {0};
    CHECK(ts_start(&s, "models/qwen2-tiny-random", "deepseek_r1") == 0);
    /* random weights write no </think>: under deepseek_r1 the whole answer is reasoning */
    json_t *chat = post_json(&s, "/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"Think.\"}], "
                             "\"max_tokens\": 10, \"temperature\": 0}");
    json_t *resp = post_json(&s, "/v1/responses", "{\"input\": \"Think.\", \"max_output_tokens\": 10, \"temperature\": 0}");
    CHECK(chat && resp);
    const char *want = str_at(chat, "choices.0.message.reasoning_content");
    json_t *rs = item_of_type(resp, "reasoning", 0);
    CHECKF(want && rs && !strcmp(str_at(rs, "content.0.text"), want), "chat '%s', responses %s", want, json_dumps(resp, 0));
    CHECK_STR(str_at(rs, "content.0.type"), "reasoning_text");
    CHECK(!strncmp(str_at(rs, "id"), "rs_", 3));
    CHECK(item_of_type(resp, "message", 0) == NULL);
    char deltas[4096], why[512] = "";
    json_t *done = post_stream(&s, "{\"input\": \"Think.\", \"max_output_tokens\": 10, \"temperature\": 0, \"stream\": true}",
                               deltas, sizeof deltas, why, sizeof why);
    CHECKF(done != NULL, "%s", why);
    CHECK_STR(str_at(item_of_type(done, "reasoning", 0), "content.0.text"), want);
    json_decref(done);
    json_decref(chat);
    json_decref(resp);
    ts_stop(&s);
}
