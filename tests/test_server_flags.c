/* Serve flags that change what clients get (--enable-force-include-usage,
 * --enable-server-load-tracking and GET /load, --show-hidden-metrics-for-version), and the
 * prompt-token metrics agreeing after n > 1 as in vLLM (each of the n samples counts its
 * prompt, in vllm:prompt_tokens_total and in vllm:request_prompt_tokens alike). Through a
 * real server on the random-weight Qwen2 model. */
#include <stdlib.h>
#include <unistd.h>
#include <jansson.h>

#include "server/fingerprint.h"
#include "server_util.h"
#include "test.h"

/* the value of a metric line "name{...} value" (the first one whose name and labels start
 * with key), or -1 */
static double metric(const char *text, const char *key) {
    const char *p = text;
    while ((p = strstr(p, key))) {
        if (p == text || p[-1] == '\n') {
            const char *sp = strchr(p, ' ');
            return sp ? atof(sp + 1) : -1;
        }
        p++;
    }
    return -1;
}

TEST(test_serve_flags_usage_load_and_hidden_metrics) {
    server s = {0};
    CHECK(ts_start_cfg(&s, "models/qwen2-tiny-random", (xi_server_config){.force_include_usage = 1,
                                                                          .server_load_tracking = 1,
                                                                          .show_hidden_metrics = 1}) == 0);
    char *out;
    /* a stream that did not ask for usage still ends with it */
    CHECK_EQ(ts_post(&s, "/v1/completions", "{\"prompt\": \"Hi\", \"max_tokens\": 3, \"stream\": true}", &out), 200);
    CHECKF(strstr(out, "\"usage\":{\"prompt_tokens\"") && strstr(out, "\"completion_tokens\":3"), "%s", out);
    free(out);
    /* the finished stream leaves the count once its connection is done (soon, not at once) */
    int idle = 0;
    for (int tries = 0; tries < 50 && !idle; tries++) {
        CHECK_EQ(ts_get(&s, "/load", &out), 200);
        idle = !strcmp(out, "{\"server_load\":0}");
        CHECKF(idle || !strcmp(out, "{\"server_load\":1}"), "%s", out);
        free(out);
        if (!idle) usleep(100 * 1000);
    }
    CHECK(idle);
    /* n = 3: three samples, each counting its prompt */
    CHECK_EQ(ts_post(&s, "/v1/completions", "{\"prompt\": \"Once upon a time\", \"max_tokens\": 4, \"n\": 3}", &out), 200);
    free(out);
    CHECK_EQ(ts_get(&s, "/metrics", &out), 200);
    const double total = metric(out, "vllm:prompt_tokens_total{"), sum = metric(out, "vllm:request_prompt_tokens_sum{");
    CHECKF(total > 0 && total == sum, "prompt_tokens_total %g, request_prompt_tokens_sum %g", total, sum);
    CHECK(metric(out, "vllm:request_prompt_tokens_count{") == 4); /* 1 + 3 samples */
    CHECK(metric(out, "vllm:request_params_n_sum{") == 4);       /* n of the two requests */
    CHECK(metric(out, "vllm:request_params_max_tokens_sum{") == 7);
    CHECK(metric(out, "vllm:request_max_num_generation_tokens_sum{") == 7);
    CHECK(metric(out, "vllm:gpu_cache_usage_perc{") >= 0);
    /* every engine step is one observation of its scheduled tokens: the prompts' and one per
     * generated token at least */
    const double steps = metric(out, "vllm:iteration_tokens_total_count{");
    CHECKF(steps >= 4 && metric(out, "vllm:iteration_tokens_total_bucket{le=\"+Inf\"") == steps &&
           metric(out, "vllm:iteration_tokens_total_sum{") >= metric(out, "vllm:generation_tokens_total{"), "steps %g", steps);
    CHECKF(metric(out, "vllm:cache_config_info{block_size=\"16\"") == 1, "%.2000s", out);
    free(out);
    ts_stop(&s);
}

TEST(test_serve_flags_off_by_default) {
    server s = {0};
    CHECK(ts_start_cfg(&s, "models/qwen2-tiny-random", (xi_server_config){0}) == 0);
    char *out;
    CHECK_EQ(ts_post(&s, "/v1/completions", "{\"prompt\": \"Hi\", \"max_tokens\": 2, \"stream\": true}", &out), 200);
    CHECKF(!strstr(out, "\"usage\""), "%s", out);
    free(out);
    CHECK_EQ(ts_get(&s, "/metrics", &out), 200);
    CHECK(!strstr(out, "gpu_cache_usage_perc") && !strstr(out, "time_per_output_token"));
    CHECK(strstr(out, "vllm:request_params_n_count{") != NULL);
    free(out);
    /* the default fingerprint names the build and hashes the model's identity */
    CHECK_EQ(ts_post(&s, "/v1/completions", "{\"prompt\": \"Hi\", \"max_tokens\": 1}", &out), 200);
    CHECKF(strstr(out, "\"system_fingerprint\":\"xinfer-"), "%s", out);
    free(out);
    ts_stop(&s);
}

/* Fields vLLM clients send: stream_options.continuous_usage_stats, completions logprobs 0,
 * a custom message role. */
TEST(test_serve_fields_continuous_usage_logprobs_zero_and_custom_roles) {
    server s = {0};
    CHECK(ts_start_cfg(&s, "models/qwen2-tiny-random", (xi_server_config){0}) == 0);
    char *out;
    CHECK_EQ(ts_post(&s, "/v1/completions", "{\"prompt\": \"Hi\", \"max_tokens\": 4, \"stream\": true, \"ignore_eos\": true, "
                     "\"stream_options\": {\"include_usage\": true, \"continuous_usage_stats\": true}}", &out), 200);
    int chunks = 0, last = -1, grows = 1;
    for (const char *d = strstr(out, "data: {"); d; d = strstr(d + 1, "data: {")) {
        json_t *o = json_loads(d + 6, JSON_DISABLE_EOF_CHECK, NULL);
        json_t *u = json_object_get(o, "usage");
        const int got = (int)json_integer_value(json_object_get(u, "completion_tokens"));
        grows &= json_is_object(u) && got >= last;
        last = got;
        chunks++;
        json_decref(o);
    }
    CHECKF(chunks >= 5 && grows && last == 4, "%d chunks, last %d: %s", chunks, last, out);
    free(out);
    /* logprobs 0: each position's top_logprobs holds the sampled token alone */
    CHECK_EQ(ts_post(&s, "/v1/completions", "{\"prompt\": \"Hi\", \"max_tokens\": 5, \"logprobs\": 0, \"ignore_eos\": true}", &out), 200);
    json_t *o = json_loads(out, 0, NULL);
    json_t *lp = json_object_get(json_array_get(json_object_get(o, "choices"), 0), "logprobs");
    json_t *tokens = json_object_get(lp, "tokens"), *top = json_object_get(lp, "top_logprobs");
    CHECKF(json_array_size(tokens) == 5 && json_array_size(top) == 5, "%s", out);
    for (size_t i = 0; i < json_array_size(top); i++) {
        json_t *d = json_array_get(top, i);
        json_t *v = json_object_get(d, json_string_value(json_array_get(tokens, i)));
        CHECKF(json_object_size(d) == 1 && v && json_real_value(v) == json_real_value(json_array_get(json_object_get(lp, "token_logprobs"), i)),
               "position %zu: %s", i, out);
    }
    json_decref(o);
    free(out);
    /* /tokenize return_token_strs: the vocabulary's own spellings (byte-level: Ġ for a space) */
    CHECK_EQ(ts_post(&s, "/tokenize", "{\"prompt\": \"Hello world\", \"return_token_strs\": true}", &out), 200);
    CHECKF(strstr(out, "\"token_strs\":[\"Hello\",\"\xc4\xa0" "world\"]") && strstr(out, "\"count\":2"), "%s", out);
    free(out);
    CHECK_EQ(ts_post(&s, "/tokenize", "{\"prompt\": \"Hello world\"}", &out), 200);
    CHECKF(strstr(out, "\"token_strs\":null"), "%s", out);
    free(out);
    /* a custom role reaches the chat template, which decides what to make of it (Qwen2's
     * renders the roles it knows and skips others) */
    CHECK_EQ(ts_post(&s, "/tokenize", "{\"messages\": [{\"role\": \"observer\", \"content\": \"noted\"}, "
                     "{\"role\": \"user\", \"content\": \"hi\"}]}", &out), 200);
    free(out);
    CHECK_EQ(ts_post(&s, "/v1/chat/completions", "{\"messages\": [{\"role\": \"observer\", \"content\": \"noted\"}, "
                     "{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 2}", &out), 200);
    free(out);
    ts_stop(&s);
}

/* return_token_ids: the prompt's ids and the output's, which decode to the answer's text,
 * the same streamed (spread over the chunks) as not */
TEST(test_serve_fields_return_token_ids) {
    server s = {0};
    CHECK(ts_start_cfg(&s, "models/qwen2-tiny-random", (xi_server_config){0}) == 0);
    char *out;
    CHECK_EQ(ts_post(&s, "/v1/completions", "{\"prompt\": \"Once upon\", \"max_tokens\": 6, \"temperature\": 0, "
                     "\"return_token_ids\": true}", &out), 200);
    json_t *o = json_loads(out, 0, NULL);
    free(out);
    json_t *ch = json_array_get(json_object_get(o, "choices"), 0);
    json_t *ids = json_object_get(ch, "token_ids");
    CHECK_EQ((int)json_array_size(ids), (int)json_integer_value(json_object_get(json_object_get(o, "usage"), "completion_tokens")));
    CHECK_EQ((int)json_array_size(json_object_get(ch, "prompt_token_ids")),
             (int)json_integer_value(json_object_get(json_object_get(o, "usage"), "prompt_tokens")));
    char req[4096], *dumped = json_dumps(ids, 0);
    snprintf(req, sizeof req, "{\"tokens\": %s}", dumped);
    CHECK_EQ(ts_post(&s, "/detokenize", req, &out), 200);
    json_t *d = json_loads(out, 0, NULL);
    CHECKF(!strcmp(json_string_value(json_object_get(d, "prompt")), json_string_value(json_object_get(ch, "text"))), "%s", out);
    json_decref(d);
    free(out);
    /* streamed: the chunks' ids joined are the same ids, the prompt's in the first */
    CHECK_EQ(ts_post(&s, "/v1/completions", "{\"prompt\": \"Once upon\", \"max_tokens\": 6, \"temperature\": 0, "
                     "\"return_token_ids\": true, \"stream\": true}", &out), 200);
    json_t *joined = json_array();
    int with_prompt = 0;
    for (const char *p = strstr(out, "data: {"); p; p = strstr(p + 1, "data: {")) {
        json_t *c = json_loads(p + 6, JSON_DISABLE_EOF_CHECK, NULL);
        json_t *cc = json_array_get(json_object_get(c, "choices"), 0);
        json_array_extend(joined, json_object_get(cc, "token_ids"));
        with_prompt += json_object_get(cc, "prompt_token_ids") != NULL;
        json_decref(c);
    }
    char *got = json_dumps(joined, 0);
    CHECKF(!strcmp(got, dumped) && with_prompt == 1, "streamed %s, whole %s", got, dumped);
    free(got);
    free(dumped);
    json_decref(joined);
    free(out);
    json_decref(o);
    /* chat: prompt_token_ids at the top, as vLLM */
    CHECK_EQ(ts_post(&s, "/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 3, "
                     "\"return_token_ids\": true}", &out), 200);
    o = json_loads(out, 0, NULL);
    CHECKF(json_array_size(json_object_get(o, "prompt_token_ids")) > 0 &&
           json_array_size(json_object_get(json_array_get(json_object_get(o, "choices"), 0), "token_ids")) > 0, "%s", out);
    json_decref(o);
    free(out);
    ts_stop(&s);
}

TEST(test_serve_flags_fingerprint_modes) {
    static const struct { const char *mode, *value, *want; } cases[] = {
        {"none", NULL, "\"system_fingerprint\":null"}, {"custom", "fp-7", "\"system_fingerprint\":\"fp-7\""}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        server s = {0};
        CHECK(ts_start_cfg(&s, "models/qwen2-tiny-random", (xi_server_config){.fingerprint_mode = cases[i].mode,
                                                                              .fingerprint_value = cases[i].value}) == 0);
        char *out;
        CHECK_EQ(ts_post(&s, "/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 1}", &out), 200);
        CHECKF(strstr(out, cases[i].want), "%s: %s", cases[i].mode, out);
        free(out);
        ts_stop(&s);
    }
}

/* prompt_logprobs: null for the first prompt token, then each prompt token's own logprob and
 * rank with its top k, keyed by token id; the same as echo's scores of the prompt */
TEST(test_serve_fields_prompt_logprobs) {
    server s = {0};
    CHECK(ts_start_cfg(&s, "models/qwen2-tiny-random", (xi_server_config){0}) == 0);
    char *out;
    CHECK_EQ(ts_post(&s, "/v1/completions", "{\"prompt\": \"Once upon a time\", \"max_tokens\": 1, \"prompt_logprobs\": 2, "
                     "\"echo\": true, \"logprobs\": 0, \"return_token_ids\": true}", &out), 200);
    json_t *o = json_loads(out, 0, NULL);
    json_t *ch = json_array_get(json_object_get(o, "choices"), 0);
    json_t *plp = json_object_get(ch, "prompt_logprobs"), *ids = json_object_get(ch, "prompt_token_ids");
    json_t *echo_lp = json_object_get(json_object_get(ch, "logprobs"), "token_logprobs");
    CHECKF(json_array_size(plp) == json_array_size(ids) && json_array_size(plp) >= 3 && json_is_null(json_array_get(plp, 0)), "%s", out);
    for (size_t i = 1; i < json_array_size(plp); i++) {
        json_t *d = json_array_get(plp, i);
        char key[16];
        snprintf(key, sizeof key, "%lld", (long long)json_integer_value(json_array_get(ids, i)));
        json_t *own = json_object_get(d, key);
        CHECKF(own && json_object_size(d) >= 2 && json_object_size(d) <= 3, "position %zu: %s", i, out);
        CHECK(json_integer_value(json_object_get(own, "rank")) >= 1 && json_is_string(json_object_get(own, "decoded_token")));
        CHECK(json_real_value(json_object_get(own, "logprob")) == json_real_value(json_array_get(echo_lp, i)));
    }
    json_decref(o);
    free(out);
    CHECK_EQ(ts_post(&s, "/v1/completions", "{\"prompt\": \"x\", \"prompt_logprobs\": 1, \"stream\": true}", &out), 400);
    free(out);
    ts_stop(&s);
}

/* allowed_token_ids: every drawn token is one of them (at temperature 1, where a random
 * model would otherwise wander over the whole vocabulary); an id outside it is a 400 */
TEST(test_serve_fields_allowed_token_ids) {
    server s = {0};
    CHECK(ts_start_cfg(&s, "models/qwen2-tiny-random", (xi_server_config){0}) == 0);
    char *out;
    CHECK_EQ(ts_post(&s, "/v1/completions", "{\"prompt\": \"Pick:\", \"max_tokens\": 12, \"temperature\": 1, \"seed\": 1, "
                     "\"ignore_eos\": true, \"allowed_token_ids\": [64, 65, 66, 65], \"return_token_ids\": true}", &out), 200);
    json_t *o = json_loads(out, 0, NULL);
    json_t *ids = json_object_get(json_array_get(json_object_get(o, "choices"), 0), "token_ids");
    CHECKF(json_array_size(ids) == 12, "%s", out);
    int kinds[3] = {0};
    for (size_t i = 0; i < json_array_size(ids); i++) {
        const json_int_t id = json_integer_value(json_array_get(ids, i));
        CHECKF(id >= 64 && id <= 66, "token %lld: %s", (long long)id, out);
        if (id >= 64 && id <= 66) kinds[id - 64] = 1;
    }
    CHECKF(kinds[0] + kinds[1] + kinds[2] >= 2, "%s", out); /* drawn among them, not one forced */
    json_decref(o);
    free(out);
    CHECK_EQ(ts_post(&s, "/v1/completions", "{\"prompt\": \"x\", \"allowed_token_ids\": [999999999]}", &out), 400);
    CHECKF(strstr(out, "allowed_token_ids"), "%s", out);
    free(out);
    CHECK_EQ(ts_post(&s, "/v1/completions", "{\"prompt\": \"x\", \"allowed_token_ids\": []}", &out), 400);
    free(out);
    ts_stop(&s);
}

/* The fingerprint names what changes outputs: an int8 lm_head gives another one; "none" the
 * same one as before the option existed. */
TEST(test_fingerprint_follows_the_lm_head_format) {
    xi_engine_info info = {.architecture = "Qwen2ForCausalLM", .dtype = "bfloat16", .quantization = "awq",
                           .kv_cache_dtype = "auto", .kernels = "avx2", .max_model_len = 4096, .n_params = 494};
    char none_[64], unset[64], int8_[64];
    xi_fingerprint_build(NULL, NULL, "/m", &info, unset, sizeof unset);
    info.lm_head_quantization = "none";
    xi_fingerprint_build(NULL, NULL, "/m", &info, none_, sizeof none_);
    info.lm_head_quantization = "int8";
    xi_fingerprint_build(NULL, NULL, "/m", &info, int8_, sizeof int8_);
    CHECK(!strncmp(unset, "xinfer-", 7) && !strcmp(unset, none_));
    CHECKF(strcmp(none_, int8_), "%s vs %s", none_, int8_);
}
