/* Structured outputs through the whole server on random-weight models (the real Qwen2.5
 * tokenizer, 151,936 tokens): whatever the model would say, the answer must satisfy the
 * schema / regex / choice / grammar it was held to, complete, streamed or not. Every schema
 * here bounds its strings and arrays and max_tokens leaves room, so a random model has to
 * finish. Answers are checked by a small JSON Schema validator below and by PCRE2. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <stdlib.h>

#include "server_util.h"
#include "test.h"
#include "test_engine_util.h"

/* ---- a small validator for the keywords these tests use ---- */

static int full_match(const char *pattern, const char *s) {
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                                   PCRE2_ANCHORED | PCRE2_ENDANCHORED | PCRE2_UTF, &ec, &eo, NULL);
    if (!re) return 0;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int rc = pcre2_match(re, (PCRE2_SPTR)s, strlen(s), 0, 0, md, NULL);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return rc >= 0;
}

static size_t utf8_len(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

static int valid(json_t *root, json_t *s, json_t *v, char *why, size_t cap);

static int fail(char *why, size_t cap, const char *what, json_t *v) {
    char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    snprintf(why, cap, "%s: %s", what, t ? t : "?");
    free(t);
    return 0;
}

static int type_ok(const char *t, json_t *v) {
    if (!strcmp(t, "object")) return json_is_object(v);
    if (!strcmp(t, "array")) return json_is_array(v);
    if (!strcmp(t, "string")) return json_is_string(v);
    if (!strcmp(t, "integer")) return json_is_integer(v);
    if (!strcmp(t, "number")) return json_is_number(v);
    if (!strcmp(t, "boolean")) return json_is_boolean(v);
    return !strcmp(t, "null") && json_is_null(v);
}

static int valid(json_t *root, json_t *s, json_t *v, char *why, size_t cap) {
    json_t *k;
    if ((k = json_object_get(s, "$ref"))) {
        const char *ref = json_string_value(k);
        return valid(root, json_object_get(json_object_get(root, "$defs"), strrchr(ref, '/') + 1), v, why, cap);
    }
    if ((k = json_object_get(s, "const")) && !json_equal(k, v)) return fail(why, cap, "not the const", v);
    if ((k = json_object_get(s, "enum"))) {
        size_t i;
        json_t *e;
        int any = 0;
        json_array_foreach(k, i, e) any |= json_equal(e, v);
        if (!any) return fail(why, cap, "not in the enum", v);
    }
    json_t *alts = json_object_get(s, "anyOf") ? json_object_get(s, "anyOf") : json_object_get(s, "oneOf");
    if (alts) {
        size_t i;
        json_t *a;
        int any = 0;
        json_array_foreach(alts, i, a) any |= valid(root, a, v, why, cap);
        if (!any) return fail(why, cap, "no alternative matches", v);
    }
    if ((k = json_object_get(s, "type"))) {
        int ok = 0;
        if (json_is_string(k)) ok = type_ok(json_string_value(k), v);
        size_t i;
        json_t *t;
        json_array_foreach(k, i, t) ok |= type_ok(json_string_value(t), v);
        if (!ok) return fail(why, cap, "wrong type", v);
    }
    if (json_is_string(v)) {
        const size_t n = utf8_len(json_string_value(v));
        if ((k = json_object_get(s, "minLength")) && n < (size_t)json_integer_value(k)) return fail(why, cap, "too short", v);
        if ((k = json_object_get(s, "maxLength")) && n > (size_t)json_integer_value(k)) return fail(why, cap, "too long", v);
        if ((k = json_object_get(s, "pattern")) && !full_match(json_string_value(k), json_string_value(v)))
            return fail(why, cap, "pattern", v);
    }
    if (json_is_number(v)) {
        const double x = json_number_value(v);
        if ((k = json_object_get(s, "minimum")) && x < json_number_value(k)) return fail(why, cap, "below minimum", v);
        if ((k = json_object_get(s, "maximum")) && x > json_number_value(k)) return fail(why, cap, "above maximum", v);
    }
    if (json_is_array(v)) {
        const size_t n = json_array_size(v);
        if ((k = json_object_get(s, "minItems")) && n < (size_t)json_integer_value(k)) return fail(why, cap, "too few items", v);
        if ((k = json_object_get(s, "maxItems")) && n > (size_t)json_integer_value(k)) return fail(why, cap, "too many items", v);
        size_t i;
        json_t *item;
        if ((k = json_object_get(s, "items")))
            json_array_foreach(v, i, item) if (!valid(root, k, item, why, cap)) return 0;
    }
    if (json_is_object(v)) {
        json_t *props = json_object_get(s, "properties"), *addl = json_object_get(s, "additionalProperties");
        size_t i;
        json_t *r;
        json_array_foreach(json_object_get(s, "required"), i, r)
            if (!json_object_get(v, json_string_value(r))) return fail(why, cap, "a required property is missing", v);
        const char *key;
        json_t *val;
        json_object_foreach(v, key, val) {
            json_t *ps = json_object_get(props, key);
            if (ps) {
                if (!valid(root, ps, val, why, cap)) return 0;
            } else if (json_is_false(addl) || (props && !addl)) {
                return fail(why, cap, "an extra property", v);
            } else if (json_is_object(addl) && !valid(root, addl, val, why, cap)) {
                return 0;
            }
        }
    }
    return 1;
}

/* The answer of one choice: the message's content (chat) or text, joined over the chunks when
 * streamed; finish_reason and tool_calls (as JSON text) too. */
typedef struct answer {
    char text[16384];
    char finish[32];
    json_t *calls;
} answer;

static void take_choice(json_t *ch, int stream, answer *a) {
    json_t *m = json_object_get(ch, stream ? "delta" : "message");
    json_t *t = m ? json_object_get(m, "content") : json_object_get(ch, "text");
    if (json_is_string(t)) strncat(a->text, json_string_value(t), sizeof a->text - strlen(a->text) - 1);
    json_t *f = json_object_get(ch, "finish_reason");
    if (json_is_string(f)) snprintf(a->finish, sizeof a->finish, "%s", json_string_value(f));
    json_t *calls = json_object_get(m, "tool_calls");
    if (calls && !a->calls) a->calls = json_incref(calls);
}

static int ask(const server *s, int chat, const char *fields, int stream, answer *a, char *why, size_t cap) {
    char req[16384];
    memset(a, 0, sizeof *a);
    snprintf(req, sizeof req, "{%s, %s, \"stream\": %s, \"temperature\": 1.0, \"seed\": 7}",
             chat ? "\"messages\": [{\"role\": \"user\", \"content\": \"Describe someone.\"}]" : "\"prompt\": \"Q:\"",
             fields, stream ? "true" : "false");
    char *out;
    const long st = ts_post(s, chat ? "/v1/chat/completions" : "/v1/completions", req, &out);
    int ok = st == 200;
    if (!ok) snprintf(why, cap, "HTTP %ld: %.300s", st, out);
    else if (!stream) {
        json_t *j = json_loads(out, 0, NULL);
        take_choice(json_array_get(json_object_get(j, "choices"), 0), 0, a);
        json_decref(j);
    } else {
        for (const char *d = strstr(out, "data: {"); d; d = strstr(d + 1, "data: {")) {
            json_t *j = json_loads(d + 6, JSON_DISABLE_EOF_CHECK, NULL);
            take_choice(json_array_get(json_object_get(j, "choices"), 0), 1, a);
            json_decref(j);
        }
        if (!strstr(out, "data: [DONE]")) ok = 0, snprintf(why, cap, "no [DONE]: %.300s", out);
    }
    free(out);
    return ok;
}

/* the answer parses and satisfies the schema, streamed and not, in chat and completions */
static int schema_holds(const server *s, const char *field_fmt, const char *schema, char *why, size_t cap) {
    char fields[8192];
    snprintf(fields, sizeof fields, field_fmt, schema);
    json_t *sch = json_loads(schema, 0, NULL);
    int ok = sch != NULL;
    for (int k = 0; ok && k < 4; k++) {
        answer a;
        if (!ask(s, k < 2, fields, k & 1, &a, why, cap)) ok = 0;
        else {
            json_t *v = json_loads(a.text, JSON_DECODE_ANY, NULL);
            if (!v) ok = 0, snprintf(why, cap, "%s%s, finish %s: not JSON: %.900s", k < 2 ? "chat" : "completion",
                                     k & 1 ? " streamed" : "", a.finish, a.text);
            else if (!valid(sch, sch, v, why, cap)) ok = 0;
            else if (strcmp(a.finish, "stop")) ok = 0, snprintf(why, cap, "finish %s: %.900s", a.finish, a.text);
            json_decref(v);
        }
        json_decref(a.calls);
    }
    json_decref(sch);
    return ok;
}

#define PERSON "{\"type\": \"object\", \"properties\": {" \
    "\"name\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": 8}," \
    "\"age\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 120}," \
    "\"score\": {\"type\": \"number\", \"minimum\": 0, \"maximum\": 5}," \
    "\"role\": {\"enum\": [\"admin\", \"user\", 3, null]}," \
    "\"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\", \"maxLength\": 4}, \"minItems\": 1, \"maxItems\": 2}," \
    "\"ok\": {\"type\": \"boolean\"}, \"kind\": {\"const\": \"p\"}," \
    "\"code\": {\"type\": \"string\", \"pattern\": \"[A-Z]{2}-[0-9]{2}\"}," \
    "\"home\": {\"type\": \"object\", \"properties\": {\"zip\": {\"type\": \"integer\", \"minimum\": 10, \"maximum\": 99}}, \"required\": [\"zip\"], \"additionalProperties\": false}," \
    "\"alt\": {\"anyOf\": [{\"type\": \"null\"}, {\"type\": \"string\", \"maxLength\": 3}]}," \
    "\"nick\": {\"type\": \"string\", \"maxLength\": 4}}," \
    "\"required\": [\"name\", \"age\", \"score\", \"role\", \"tags\", \"ok\", \"kind\", \"code\", \"home\", \"alt\"]," \
    "\"additionalProperties\": false}"

TEST(test_structured_json_schema_answers_satisfy_the_schema) {
    server s = {0};
    CHECK(ts_start(&s, "models/qwen2-tiny-random", NULL) == 0);
    char why[1024] = "";
    const char *rf = "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"p\", \"strict\": true, \"schema\": %s}}, \"max_tokens\": 400";
    CHECKF(schema_holds(&s, rf, PERSON, why, sizeof why), "response_format: %s", why);
    /* $ref/$defs with a recursive list, oneOf, and the older field name */
    const char *list = "{\"$defs\": {\"node\": {\"type\": \"object\", \"properties\": {\"v\": {\"type\": \"integer\", \"minimum\": -9, \"maximum\": 9},"
                       "\"next\": {\"oneOf\": [{\"type\": \"null\"}, {\"$ref\": \"#/$defs/node\"}]}}, \"required\": [\"v\", \"next\"]}},"
                       "\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/node\"}, \"maxItems\": 2}";
    CHECKF(schema_holds(&s, "\"guided_json\": %s, \"max_tokens\": 300, \"logit_bias\": {\"2398\": 5}", list, why, sizeof why),
           "guided_json: %s", why);
    CHECKF(schema_holds(&s, "\"structured_outputs\": {\"json\": %s}, \"max_tokens\": 400", PERSON, why, sizeof why),
           "structured_outputs.json: %s", why);
    ts_stop(&s);
}

TEST(test_structured_regex_choice_grammar_and_json_object) {
    server s = {0};
    CHECK(ts_start(&s, "models/qwen2-tiny-random", NULL) == 0);
    char why[1024] = "";
    for (int k = 0; k < 4; k++) {
        const int chat = k < 2, stream = k & 1;
        answer a;
        static const char *const regex[] = {"\"guided_regex\": \"[a-c]{2,5}-(yes|no)\\\\d{1,3}\"",
                                            "\"structured_outputs\": {\"regex\": \"[a-c]{2,5}-(yes|no)\\\\d{1,3}\"}"};
        CHECKF(ask(&s, chat, regex[k & 1], stream, &a, why, sizeof why), "%s", why);
        CHECKF(full_match("[a-c]{2,5}-(yes|no)\\d{1,3}", a.text) && !strcmp(a.finish, "stop"), "regex: '%s' (%s)", a.text, a.finish);
        static const char *const choice[] = {"\"guided_choice\": [\"red\", \"green\", \"grün\"]",
                                             "\"structured_outputs\": {\"choice\": [\"red\", \"green\", \"grün\"]}"};
        CHECKF(ask(&s, chat, choice[k & 1], stream, &a, why, sizeof why), "%s", why);
        CHECKF((!strcmp(a.text, "red") || !strcmp(a.text, "green") || !strcmp(a.text, "grün")) && !strcmp(a.finish, "stop"),
               "choice: '%s'", a.text);
        static const char *const gbnf[] = {
            "\"guided_grammar\": \"root ::= item (\\\", \\\" item){0,2}\\nitem ::= [a-z]{1,3} | [0-9]{1,2}\\n\"",
            "\"structured_outputs\": {\"grammar\": \"root ::= item (\\\", \\\" item){0,2}\\nitem ::= [a-z]{1,3} | [0-9]{1,2}\\n\"}"};
        CHECKF(ask(&s, chat, gbnf[k & 1], stream, &a, why, sizeof why), "%s", why);
        CHECKF(full_match("([a-z]{1,3}|[0-9]{1,2})(, ([a-z]{1,3}|[0-9]{1,2})){0,2}", a.text) && !strcmp(a.finish, "stop"),
               "grammar: '%s'", a.text);
        /* json_object, with a bias that pushes towards closing it */
        CHECKF(ask(&s, chat, "\"response_format\": {\"type\": \"json_object\"}, \"max_tokens\": 300, \"logit_bias\": {\"92\": 12, \"1\": 6}",
                   stream, &a, why, sizeof why), "%s", why);
        json_t *v = json_loads(a.text, 0, NULL);
        CHECKF(json_is_object(v), "json_object: '%s' (%s)", a.text, a.finish);
        json_decref(v);
    }
    ts_stop(&s);
}

#define TOOLS "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": " \
    "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"maxLength\": 6}, " \
    "\"unit\": {\"enum\": [\"c\", \"f\"]}}, \"required\": [\"city\", \"unit\"], \"additionalProperties\": false}}}, " \
    "{\"type\": \"function\", \"function\": {\"name\": \"now\"}}]"

TEST(test_structured_tool_choice_required_and_named_give_valid_calls) {
    server s = {0};
    CHECK(ts_start(&s, "models/qwen2-tiny-random", NULL) == 0);
    char why[1024] = "";
    json_t *params = json_loads("{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"maxLength\": 6}, "
                                "\"unit\": {\"enum\": [\"c\", \"f\"]}}, \"required\": [\"city\", \"unit\"], \"additionalProperties\": false}", 0, NULL);
    for (int stream = 0; stream < 2; stream++) {
        answer a;
        CHECKF(ask(&s, 1, TOOLS ", \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}, \"max_tokens\": 200",
                   stream, &a, why, sizeof why), "%s", why);
        CHECKF(json_array_size(a.calls) == 1, "named: no call (%s): %s", a.finish, a.text);
        json_t *fn = json_object_get(json_array_get(a.calls, 0), "function");
        CHECK_STR(json_string_value(json_object_get(fn, "name")), "get_weather");
        json_t *args = json_loads(json_string_value(json_object_get(fn, "arguments")), 0, NULL);
        CHECKF(args && valid(params, params, args, why, sizeof why), "named: %s", why);
        CHECK_STR(a.finish, "stop");
        json_decref(args);
        json_decref(a.calls);
        CHECKF(ask(&s, 1, TOOLS ", \"tool_choice\": \"required\", \"max_tokens\": 300", stream, &a, why, sizeof why), "%s", why);
        CHECKF(json_array_size(a.calls) >= 1, "required: no call (%s): %s", a.finish, a.text);
        CHECK_STR(a.finish, "tool_calls");
        size_t i;
        json_t *call;
        json_array_foreach(a.calls, i, call) {
            fn = json_object_get(call, "function");
            const char *name = json_string_value(json_object_get(fn, "name"));
            args = json_loads(json_string_value(json_object_get(fn, "arguments")), 0, NULL);
            CHECKF(name && args && json_is_string(json_object_get(call, "id")), "required: call %zu", i);
            if (!strcmp(name, "get_weather")) CHECKF(valid(params, params, args, why, sizeof why), "required: %s", why);
            else CHECKF(!strcmp(name, "now") && json_object_size(args) == 0, "required: %s", name);
            json_decref(args);
        }
        json_decref(a.calls);
    }
    json_decref(params);
    ts_stop(&s);
}

TEST(test_structured_bad_requests_are_400s_naming_the_field) {
    server s = {0};
    CHECK(ts_start(&s, "models/qwen2-tiny-random", NULL) == 0);
    static const char *const bad[][3] = {
        {"\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", \"schema\": {\"type\": \"string\", \"not\": {}}}}",
         "response_format", "unsupported keyword 'not'"},
        {"\"guided_json\": {\"type\": \"integer\", \"multipleOf\": 2}", "guided_json", "'multipleOf'"},
        {"\"guided_regex\": \"(a\"", "guided_regex", "missing ')'"},
        {"\"guided_regex\": \"(a)\\\\1\"", "guided_regex", "backreferences"},
        {"\"guided_grammar\": \"root ::= undefined\"", "guided_grammar", "'undefined' is used but not defined"},
        {"\"guided_choice\": []", "guided_choice", "non-empty array"},
        {"\"guided_regex\": \"a\", \"guided_choice\": [\"a\"]", "guided_choice", "only one kind"},
        {"\"structured_outputs\": {\"regex\": \"a\", \"choice\": [\"a\"]}", "structured_outputs", "only one kind"},
        {"\"structured_outputs\": {\"structural_tag\": \"x\"}", "structured_outputs", "structural_tag"},
        {"\"response_format\": {\"type\": \"xml\"}", "response_format", "not supported"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char req[2048], *out;
        snprintf(req, sizeof req, "{\"prompt\": \"x\", %s}", bad[i][0]);
        const long st = ts_post(&s, "/v1/completions", req, &out);
        json_t *j = json_loads(out, 0, NULL), *e = json_object_get(j, "error");
        const char *param = json_string_value(json_object_get(e, "param"));
        const char *msg = json_string_value(json_object_get(e, "message"));
        CHECKF(st == 400 && param && !strcmp(param, bad[i][1]) && msg && strstr(msg, bad[i][2]), "%s: %ld %s", bad[i][0], st, out);
        json_decref(j);
        free(out);
    }
    /* and the server still answers */
    char *out;
    CHECK_EQ(ts_post(&s, "/v1/completions", "{\"prompt\": \"x\", \"max_tokens\": 2}", &out), 200);
    free(out);
    ts_stop(&s);
}

/* The mask depends on the sequence's own text only: a guided answer is the same whether its
 * grammar was compiled fresh (cold cache) or shared with earlier requests (warm), and alone or
 * batched with other guided and unguided requests. */
TEST(test_structured_answers_do_not_depend_on_cache_or_batch) {
    xi_engine *e = open_engine("models/qwen2-tiny-random", 256, 2048, 8, 1024, 1);
    CHECK(e);
    static const xi_guide_kind kinds[] = {XI_GUIDE_JSON_SCHEMA, XI_GUIDE_REGEX, XI_GUIDE_NONE, XI_GUIDE_JSON_SCHEMA};
    static const char *const srcs[] = {PERSON, "[a-z]{1,6}( [a-z]{1,6}){0,4}", NULL, PERSON};
    static req_out outs[2][4];
    memset(outs, 0, sizeof outs);
    char err[512];
    for (int round = 0; round < 2; round++) {
        /* round 0: each request alone; round 1: all four at once */
        for (int i = 0; i < 4; i++) {
            xi_request_params rp;
            xi_request_params_default(&rp);
            rp.prompt = i == 2 ? "Once upon a time" : "Q:";
            rp.max_tokens = 400;
            rp.temperature = 1.0f;
            rp.seed = 100 + i;
            rp.guide = kinds[i];
            rp.guide_src = srcs[i];
            CHECKF(xi_engine_submit(e, &rp, on_output, &outs[round][i], err, sizeof err) >= 0, "%s", err);
            if (!round) CHECK(run_until_idle(e) >= 0);
        }
        CHECK(run_until_idle(e) >= 0);
    }
    for (int i = 0; i < 4; i++) {
        const seq_out *a = &outs[0][i].s[0], *b = &outs[1][i].s[0];
        CHECKF(a->n == b->n && !memcmp(a->ids, b->ids, (size_t)a->n * sizeof *a->ids), "request %d: '%s' vs '%s'", i, a->text, b->text);
        CHECK_EQ(a->n_final, 1);
    }
    /* requests 0 and 3 share a schema but not a seed: both valid, both complete */
    for (int i = 0; i < 4; i += 3) {
        json_t *sch = json_loads(PERSON, 0, NULL), *v = json_loads(outs[1][i].s[0].text, 0, NULL);
        char why[512] = "";
        CHECKF(v && valid(sch, sch, v, why, sizeof why), "request %d: %s %s", i, why, outs[1][i].s[0].text);
        json_decref(sch);
        json_decref(v);
    }
    CHECKF(full_match("[a-z]{1,6}( [a-z]{1,6}){0,4}", outs[1][1].s[0].text), "%s", outs[1][1].s[0].text);
    xi_engine_close(e);
}

/* SentencePiece with byte fallback (stories260K, 512 pieces): the same byte-level grammar
 * holds pieces with their '▁' spaces and single-byte tokens alike. */
TEST(test_structured_sentencepiece_pieces_follow_regex_and_schema) {
    xi_engine *e = open_engine("models/stories260K", 64, 512, 4, 512, 1);
    CHECK(e);
    static const char *const re = "(Once|Lily|Tom)( [a-z]{1,8}){2,6}\\.";
    const char *schema = "{\"type\":\"object\",\"properties\":{\"who\":{\"enum\":[\"Lily\",\"Tom\"]},"
                         "\"age\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":9}},\"required\":[\"who\",\"age\"]}";
    char err[512];
    for (int seed = 0; seed < 3; seed++) {
        static req_out out[2];
        memset(out, 0, sizeof out);
        xi_request_params rp;
        xi_request_params_default(&rp);
        rp.prompt = "Once upon a time";
        rp.max_tokens = 200;
        rp.temperature = 1.0f;
        rp.seed = seed;
        rp.guide = XI_GUIDE_REGEX;
        rp.guide_src = re;
        CHECKF(xi_engine_submit(e, &rp, on_output, &out[0], err, sizeof err) >= 0, "%s", err);
        rp.guide = XI_GUIDE_JSON_SCHEMA;
        rp.guide_src = schema;
        CHECKF(xi_engine_submit(e, &rp, on_output, &out[1], err, sizeof err) >= 0, "%s", err);
        CHECK(run_until_idle(e) >= 0);
        CHECKF(full_match(re, out[0].s[0].text) && out[0].s[0].fr == XI_FINISH_STOP, "regex: '%s'", out[0].s[0].text);
        json_t *sch = json_loads(schema, 0, NULL), *v = json_loads(out[1].s[0].text, 0, NULL);
        char why[512] = "";
        CHECKF(v && valid(sch, sch, v, why, sizeof why) && out[1].s[0].fr == XI_FINISH_STOP, "schema: %s '%s'", why,
               out[1].s[0].text);
        json_decref(sch);
        json_decref(v);
    }
    xi_engine_close(e);
}
