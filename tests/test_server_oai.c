/* OpenAI request validation, error bodies, metrics text and the API-key check: no model. */
#include <jansson.h>
#include <stdlib.h>

#include "server/metrics.h"
#include "server/oai.h"
#include "server/server_internal.h"
#include "test.h"

static int parse(xi_oai_request *r, int chat, const char *body, xi_oai_error *e) {
    int rc = xi_oai_parse(r, chat, body, strlen(body), e);
    return rc;
}

/* body must be rejected with status 400 and the named parameter */
static int rejects(int chat, const char *body, const char *param) {
    xi_oai_request r;
    xi_oai_error e = {0};
    int rc = parse(&r, chat, body, &e);
    xi_oai_request_free(&r);
    if (rc != -1 || e.status != 400 || strcmp(e.param, param)) {
        fprintf(stderr, "    body %s: rc %d status %d param '%s' (want '%s'): %s\n", body, rc,
                e.status, e.param, param, e.message);
        return 0;
    }
    return 1;
}

#define MSGS "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"

TEST(test_serve_oai_chat_request_maps_every_sampling_field) {
    xi_oai_request r;
    xi_oai_error e;
    const char *body = "{\"model\":\"m\"," MSGS ",\"temperature\":0.5,\"top_p\":0.9,\"top_k\":40,"
                       "\"min_p\":0.05,\"presence_penalty\":0.5,\"frequency_penalty\":-0.5,"
                       "\"repetition_penalty\":1.1,\"seed\":7,\"n\":3,\"max_completion_tokens\":12,"
                       "\"stop\":[\"a\",\"bb\"],\"stop_token_ids\":[5,6],\"logprobs\":true,"
                       "\"top_logprobs\":2,\"logit_bias\":{\"17\":-100,\"3\":2.5},"
                       "\"ignore_eos\":true,\"min_tokens\":2,\"skip_special_tokens\":false,"
                       "\"include_stop_str_in_output\":true,\"stream\":true,"
                       "\"stream_options\":{\"include_usage\":true},\"cache_salt\":\"s\","
                       "\"user\":\"ignored\",\"unknown_field\":1}";
    CHECKF(parse(&r, 1, body, &e) == 0, "%s", e.message);
    CHECK_STR(r.model, "m");
    CHECK_NEAR(r.params.temperature, 0.5, 1e-7);
    CHECK_NEAR(r.params.top_p, 0.9, 1e-7);
    CHECK_EQ(r.params.top_k, 40);
    CHECK_NEAR(r.params.min_p, 0.05, 1e-7);
    CHECK_NEAR(r.params.presence_penalty, 0.5, 1e-7);
    CHECK_NEAR(r.params.frequency_penalty, -0.5, 1e-7);
    CHECK_NEAR(r.params.repetition_penalty, 1.1, 1e-6);
    CHECK_EQ(r.params.seed, 7);
    CHECK_EQ(r.params.n, 3);
    CHECK_EQ(r.params.max_tokens, 12);
    CHECK_EQ(r.params.n_stop, 2);
    CHECK_STR(r.params.stop[1], "bb");
    CHECK_EQ(r.params.n_stop_token_ids, 2);
    CHECK_EQ(r.params.stop_token_ids[1], 6);
    CHECK_EQ(r.params.logprobs, 2);
    CHECK_EQ(r.params.n_logit_bias, 2);
    CHECK_EQ(r.params.ignore_eos, 1);
    CHECK_EQ(r.params.min_tokens, 2);
    CHECK_EQ(r.params.skip_special_tokens, 0);
    CHECK_EQ(r.params.include_stop_str_in_output, 1);
    CHECK_STR(r.params.cache_salt, "s");
    CHECK_EQ(r.stream, 1);
    CHECK_EQ(r.include_usage, 1);
    CHECK_EQ(r.add_generation_prompt, 1);
    CHECK_EQ(r.add_special_tokens, 0);
    CHECK_STR(r.messages_json, "[{\"role\":\"user\",\"content\":\"hi\"}]");
    xi_oai_request_free(&r);
}

TEST(test_serve_oai_chat_text_parts_are_joined_for_the_template) {
    xi_oai_request r;
    xi_oai_error e;
    const char *body = "{\"messages\":[{\"role\":\"system\",\"content\":null},{\"role\":\"user\","
                       "\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]}],"
                       "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}";
    CHECKF(parse(&r, 1, body, &e) == 0, "%s", e.message);
    CHECK_STR(r.messages_json, "[{\"role\":\"system\",\"content\":null},{\"role\":\"user\",\"content\":\"a\\nb\"}]");
    CHECK(r.tools_json && strstr(r.tools_json, "\"name\":\"f\""));
    CHECK(r.model == NULL);
    CHECK_EQ(r.params.max_tokens, -1);
    CHECK(r.params.temperature < 0); /* unset: the generation_config default applies */
    xi_oai_request_free(&r);
}

TEST(test_serve_oai_completion_prompt_forms) {
    xi_oai_request r;
    xi_oai_error e;
    CHECK(parse(&r, 0, "{\"prompt\":\"once\"}", &e) == 0);
    CHECK_EQ(r.n_prompts, 1);
    CHECK_STR(r.prompts[0].text, "once");
    CHECK_EQ(r.add_special_tokens, 1);
    CHECK_EQ(r.params.max_tokens, 16); /* OpenAI's and vLLM's completions default */
    xi_oai_request_free(&r);
    CHECK(parse(&r, 0, "{\"prompt\":\"once\",\"max_tokens\":null}", &e) == 0);
    CHECK_EQ(r.params.max_tokens, -1); /* null: up to the context limit */
    xi_oai_request_free(&r);
    CHECK(parse(&r, 0, "{\"prompt\":[\"a\",\"b\",\"c\"]}", &e) == 0);
    CHECK_EQ(r.n_prompts, 3);
    CHECK_STR(r.prompts[2].text, "c");
    xi_oai_request_free(&r);
    CHECK(parse(&r, 0, "{\"prompt\":[1,2,3]}", &e) == 0);
    CHECK_EQ(r.n_prompts, 1);
    CHECK_EQ(r.prompts[0].n_ids, 3);
    CHECK_EQ(r.prompts[0].ids[2], 3);
    xi_oai_request_free(&r);
    CHECK(parse(&r, 0, "{\"prompt\":[[1,2],[3]],\"echo\":true,\"logprobs\":1,\"max_tokens\":0}", &e) == 0);
    CHECK_EQ(r.n_prompts, 2);
    CHECK_EQ(r.prompts[1].n_ids, 1);
    CHECK_EQ(r.echo, 1);
    CHECK_EQ(r.params.logprobs, 1);
    CHECK_EQ(r.params.prompt_logprobs, 1);
    CHECK_EQ(r.params.max_tokens, 0);
    xi_oai_request_free(&r);
}

TEST(test_serve_oai_bad_values_name_the_parameter) {
    CHECK(rejects(1, "{" MSGS ",\"temperature\":-0.1}", "temperature"));
    CHECK(rejects(1, "{" MSGS ",\"temperature\":\"hot\"}", "temperature"));
    CHECK(rejects(1, "{" MSGS ",\"top_p\":0}", "top_p"));
    CHECK(rejects(1, "{" MSGS ",\"top_p\":1.5}", "top_p"));
    CHECK(rejects(1, "{" MSGS ",\"top_k\":-2}", "top_k"));
    CHECK(rejects(1, "{" MSGS ",\"min_p\":2}", "min_p"));
    CHECK(rejects(1, "{" MSGS ",\"n\":0}", "n"));
    CHECK(rejects(1, "{" MSGS ",\"n\":1.5}", "n"));
    CHECK(rejects(1, "{" MSGS ",\"max_tokens\":-1}", "max_tokens"));
    CHECK(rejects(1, "{" MSGS ",\"max_completion_tokens\":0}", "max_completion_tokens"));
    CHECK(rejects(1, "{" MSGS ",\"presence_penalty\":3}", "presence_penalty"));
    CHECK(rejects(1, "{" MSGS ",\"frequency_penalty\":-3}", "frequency_penalty"));
    CHECK(rejects(1, "{" MSGS ",\"repetition_penalty\":0}", "repetition_penalty"));
    CHECK(rejects(1, "{" MSGS ",\"stop\":5}", "stop"));
    CHECK(rejects(1, "{" MSGS ",\"stop\":[\"\"]}", "stop"));
    CHECK(rejects(1, "{" MSGS ",\"stop_token_ids\":[-1]}", "stop_token_ids"));
    CHECK(rejects(1, "{" MSGS ",\"logit_bias\":{\"x\":1}}", "logit_bias"));
    CHECK(rejects(1, "{" MSGS ",\"logit_bias\":{\"1\":101}}", "logit_bias"));
    CHECK(rejects(1, "{" MSGS ",\"top_logprobs\":2}", "top_logprobs"));
    CHECK(rejects(1, "{" MSGS ",\"logprobs\":true,\"top_logprobs\":21}", "top_logprobs"));
    CHECK(rejects(1, "{" MSGS ",\"stream\":\"yes\"}", "stream"));
    CHECK(rejects(1, "{" MSGS ",\"stream_options\":{\"include_usage\":true}}", "stream_options"));
    CHECK(rejects(1, "{" MSGS ",\"response_format\":{\"type\":\"json_schema\"}}", "response_format"));
    CHECK(rejects(1, "{" MSGS ",\"response_format\":\"json_object\"}", "response_format"));
    /* numbers that a 32-bit float cannot hold are refused, never turned into inf or 0 */
    CHECK(rejects(1, "{" MSGS ",\"temperature\":1e39}", "temperature"));
    CHECK(rejects(1, "{" MSGS ",\"top_p\":1e-50}", "top_p"));
    CHECK(rejects(1, "{" MSGS ",\"repetition_penalty\":1e-50}", "repetition_penalty"));
    CHECK(rejects(1, "{" MSGS ",\"min_tokens\":5,\"max_tokens\":2}", "min_tokens"));
    CHECK(rejects(1, "{" MSGS ",\"seed\":1.5}", "seed"));
    CHECK(rejects(1, "{" MSGS ",\"model\":3}", "model"));
    CHECK(rejects(1, "{\"messages\":[]}", "messages"));
    CHECK(rejects(1, "{\"messages\":\"hi\"}", "messages"));
    CHECK(rejects(1, "{\"messages\":[{\"role\":\"\",\"content\":\"x\"}]}", "messages"));
    CHECK(rejects(1, "{\"messages\":[{\"role\":7,\"content\":\"x\"}]}", "messages"));
    /* fields this server does not know are named, so the request's log line shows them */
    xi_oai_request ir;
    xi_oai_error ie;
    const char *unknown = "{\"prompt\":\"x\",\"best_of\":2,\"user\":\"u\",\"max_token\":5,\"top_k\":3}";
    CHECK(xi_oai_parse(&ir, 0, unknown, strlen(unknown), &ie) == 0);
    CHECKF(strstr(ir.ignored, "best_of") && strstr(ir.ignored, "max_token") && !strstr(ir.ignored, "user") &&
           !strstr(ir.ignored, "top_k") && strlen(ir.ignored) == strlen("best_of, max_token"), "%s", ir.ignored);
    xi_oai_request_free(&ir);
    /* a custom role reaches the template as it is (vLLM's custom message roles) */
    xi_oai_request cr;
    xi_oai_error ce;
    const char *custom = "{\"messages\":[{\"role\":\"observer\",\"content\":\"x\"}]}";
    CHECK(xi_oai_parse(&cr, 1, custom, strlen(custom), &ce) == 0 && strstr(cr.messages_json, "\"role\":\"observer\""));
    xi_oai_request_free(&cr);
    CHECK(rejects(1, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", "messages"));
    CHECK(rejects(1, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", "messages"));
    CHECK(rejects(1, "{}", "messages"));
    CHECK(rejects(0, "{}", "prompt"));
    CHECK(rejects(0, "{\"prompt\":[]}", "prompt"));
    CHECK(rejects(0, "{\"prompt\":[1,\"a\"]}", "prompt"));
    CHECK(rejects(0, "{\"prompt\":[\"a\",[1]]}", "prompt"));
    CHECK(rejects(0, "{\"prompt\":[[]]}", "prompt"));
    CHECK(rejects(0, "{\"prompt\":\"x\",\"logprobs\":true}", "logprobs"));
    CHECK(rejects(0, "{\"prompt\":\"x\",\"max_tokens\":0}", "max_tokens"));
    CHECK(rejects(0, "{\"prompt\":\"x\",\"echo\":1}", "echo"));
    CHECK(rejects(0, "{\"prompt\":\"x\",\"suffix\":\"y\"}", "suffix"));
}

TEST(test_serve_oai_malformed_bodies_are_400_without_param) {
    static const char *const bodies[] = {"", "{", "[1,2]", "\"str\"", "{\"a\":1,}", "nul",
                                         "{\"prompt\":\"\\u0000\"}"};
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        xi_oai_request r;
        xi_oai_error e = {0};
        CHECKF(xi_oai_parse(&r, 0, bodies[i], strlen(bodies[i]), &e) == -1, "accepted %s", bodies[i]);
        CHECK_EQ(e.status, 400);
        CHECK_STR(e.param, "");
        xi_oai_request_free(&r);
    }
    /* deep nesting is refused by the parser, never a stack overflow */
    size_t depth = 100000;
    char *deep = malloc(2 * depth + 32);
    size_t n = (size_t)sprintf(deep, "{\"prompt\":");
    for (size_t i = 0; i < depth; i++) deep[n++] = '[';
    for (size_t i = 0; i < depth; i++) deep[n++] = ']';
    deep[n++] = '}';
    xi_oai_request r;
    xi_oai_error e = {0};
    CHECK(xi_oai_parse(&r, 0, deep, n, &e) == -1);
    CHECK_EQ(e.status, 400);
    xi_oai_request_free(&r);
    free(deep);
}

TEST(test_serve_oai_error_body_has_openai_shape) {
    xi_oai_error e;
    xi_oai_fail(&e, 400, "temperature", "'temperature' must be >= 0, got %g", -1.0);
    char *s = xi_oai_error_json(&e);
    json_error_t je;
    json_t *o = json_loads(s, 0, &je);
    CHECK(o);
    json_t *err = json_object_get(o, "error");
    CHECK(json_is_object(err));
    CHECK_STR(json_string_value(json_object_get(err, "message")), "'temperature' must be >= 0, got -1");
    CHECK_STR(json_string_value(json_object_get(err, "type")), "invalid_request_error");
    CHECK_STR(json_string_value(json_object_get(err, "param")), "temperature");
    CHECK(json_object_get(err, "code") != NULL);
    json_decref(o);
    free(s);
    xi_oai_fail(&e, 401, NULL, "no key");
    s = xi_oai_error_json(&e);
    o = json_loads(s, 0, &je);
    err = json_object_get(o, "error");
    CHECK(json_is_null(json_object_get(err, "param")));
    CHECK_STR(json_string_value(json_object_get(err, "code")), "invalid_api_key");
    json_decref(o);
    free(s);
}

TEST(test_serve_oai_tokenize_and_detokenize_bodies) {
    xi_oai_tokenize t;
    xi_oai_error e;
    const char *b = "{\"prompt\":\"hello\",\"add_special_tokens\":false}";
    CHECK(xi_oai_parse_tokenize(&t, b, strlen(b), &e) == 0);
    CHECK_STR(t.prompt, "hello");
    CHECK_EQ(t.add_special_tokens, 0);
    xi_oai_tokenize_free(&t);
    b = "{" MSGS "}";
    CHECK(xi_oai_parse_tokenize(&t, b, strlen(b), &e) == 0);
    CHECK(t.messages_json && !t.prompt);
    CHECK_EQ(t.add_special_tokens, 0);
    CHECK_EQ(t.add_generation_prompt, 1);
    xi_oai_tokenize_free(&t);
    b = "{\"prompt\":5}";
    CHECK(xi_oai_parse_tokenize(&t, b, strlen(b), &e) == -1);
    CHECK_STR(e.param, "prompt");
    xi_oai_tokenize_free(&t);
    int32_t *ids;
    char *model;
    b = "{\"tokens\":[4,5,6],\"model\":\"m\"}";
    CHECK_EQ(xi_oai_parse_detokenize(b, strlen(b), &ids, &model, &e), 3);
    CHECK_EQ(ids[2], 6);
    CHECK_STR(model, "m");
    free(ids);
    free(model);
    b = "{\"tokens\":[1,-5]}";
    CHECK_EQ(xi_oai_parse_detokenize(b, strlen(b), &ids, &model, &e), -1);
    CHECK_STR(e.param, "tokens");
    free(ids);
    free(model);
}

TEST(test_serve_oai_auth_accepts_only_exact_bearer_keys) {
    const char *keys[] = {"secret-1", "other"};
    CHECK(xi_oai_auth_ok("Bearer secret-1", keys, 2));
    CHECK(xi_oai_auth_ok("Bearer other", keys, 2));
    CHECK(!xi_oai_auth_ok("Bearer secret-", keys, 2));
    CHECK(!xi_oai_auth_ok("Bearer secret-12", keys, 2));
    CHECK(!xi_oai_auth_ok("Bearer ", keys, 2));
    CHECK(!xi_oai_auth_ok("secret-1", keys, 2));
    CHECK(!xi_oai_auth_ok("Basic secret-1", keys, 2));
    CHECK(!xi_oai_auth_ok(NULL, keys, 2));
    CHECK(!xi_oai_auth_ok("Bearer secret-1", keys, 0));
}

TEST(test_serve_metrics_render_uses_vllm_names_and_cumulative_buckets) {
    xi_metrics *m = xi_metrics_new("my\"model", 100);
    CHECK(m);
    xi_metrics_sample s = {XI_FINISH_STOP, 0.003, 0.4, 0.01, 0.02, 0.3, 7, 12, 1};
    xi_metrics_observe(m, &s);
    s.finish = XI_FINISH_LENGTH;
    s.ttft = 0.2;
    xi_metrics_observe(m, &s);
    xi_metrics_observe_itl(m, 0.02);
    xi_engine_stats st = {.num_running = 2, .num_waiting = 1, .kv_cache_usage = 0.25,
                          .prefix_cache_queries = 10, .prefix_cache_hits = 4,
                          .prompt_tokens_total = 14, .generation_tokens_total = 24};
    char *t = xi_metrics_render(m, &st);
    CHECK(t);
    static const char *const want[] = {
        "vllm:num_requests_running{model_name=\"my\\\"model\"} 2\n",
        "vllm:num_requests_waiting{model_name=\"my\\\"model\"} 1\n",
        "vllm:kv_cache_usage_perc{model_name=\"my\\\"model\"} 0.25\n",
        "vllm:prefix_cache_queries_total{model_name=\"my\\\"model\"} 10\n",
        "vllm:prefix_cache_hits_total{model_name=\"my\\\"model\"} 4\n",
        "vllm:num_preemptions_total{",
        "vllm:prompt_tokens_total{model_name=\"my\\\"model\"} 14\n",
        "vllm:generation_tokens_total{model_name=\"my\\\"model\"} 24\n",
        "vllm:request_success_total{finished_reason=\"stop\",model_name=\"my\\\"model\"} 1\n",
        "vllm:request_success_total{finished_reason=\"length\",model_name=\"my\\\"model\"} 1\n",
        "# TYPE vllm:time_to_first_token_seconds histogram\n",
        "vllm:time_to_first_token_seconds_bucket{le=\"0.001\",model_name=\"my\\\"model\"} 0\n",
        "vllm:time_to_first_token_seconds_bucket{le=\"0.005\",model_name=\"my\\\"model\"} 1\n",
        "vllm:time_to_first_token_seconds_bucket{le=\"0.25\",model_name=\"my\\\"model\"} 2\n",
        "vllm:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"my\\\"model\"} 2\n",
        "vllm:time_to_first_token_seconds_count{model_name=\"my\\\"model\"} 2\n",
        "vllm:inter_token_latency_seconds_count{model_name=\"my\\\"model\"} 1\n",
        "vllm:e2e_request_latency_seconds_bucket{le=\"0.5\",model_name=\"my\\\"model\"} 2\n",
        "vllm:request_queue_time_seconds_count{",
        "vllm:request_prefill_time_seconds_count{",
        "vllm:request_decode_time_seconds_count{",
        "vllm:request_inference_time_seconds_count{",
        "vllm:request_prompt_tokens_bucket{le=\"5\",model_name=\"my\\\"model\"} 0\n",
        "vllm:request_prompt_tokens_bucket{le=\"10\",model_name=\"my\\\"model\"} 2\n",
        "vllm:request_prompt_tokens_bucket{le=\"100\",model_name=\"my\\\"model\"} 2\n",
        "vllm:request_generation_tokens_sum{model_name=\"my\\\"model\"} 24\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECKF(strstr(t, want[i]) != NULL, "missing: %s", want[i]);
    /* token buckets stop at max_model_len */
    CHECK(strstr(t, "vllm:request_prompt_tokens_bucket{le=\"200\"") == NULL);
    free(t);
    xi_metrics_free(m);
}

TEST(test_serve_metrics_request_params_cache_info_and_hidden_ones) {
    xi_metrics *m = xi_metrics_new("m", 100);
    CHECK(m);
    xi_engine_stats st = {.kv_cache_usage = 0.5};
    char *t = xi_metrics_render(m, &st);
    CHECK(t && !strstr(t, "cache_config_info") && !strstr(t, "gpu_cache_usage_perc") &&
          !strstr(t, "time_per_output_token") && !strstr(t, "request_max_num_generation_tokens"));
    free(t);
    xi_engine_info info = {.block_size = 16, .kv_cache_dtype = "float32", .enable_prefix_caching = 1, .num_kv_blocks = 64,
                           .kv_cache_bytes = 1 << 20};
    xi_metrics_configure(m, &info, 1);
    xi_metrics_observe_params(m, 3, 40);
    xi_metrics_observe_params(m, 1, 7);
    xi_metrics_observe_max_gen(m, 9);
    xi_metrics_observe_itl(m, 0.02);
    /* a sample aborted before its prompt was computed counts in neither prompt metric */
    xi_metrics_sample s = {.finish = XI_FINISH_ABORT, .ttft = -1, .e2e = -1, .queue = -1, .prefill = -1, .decode = -1,
                           .prompt_tokens = 50};
    xi_metrics_observe(m, &s);
    st.iteration_tokens[0] = 3;  /* three 1-token steps */
    st.iteration_tokens[2] = 2;  /* two of 9..16 tokens */
    st.iteration_tokens[XI_N_ITERATION_TOKEN_BOUNDS] = 1;
    st.iteration_tokens_sum = 3 + 24 + 20000;
    t = xi_metrics_render(m, &st);
    static const char *const want[] = {
        "vllm:cache_config_info{block_size=\"16\",cache_dtype=\"float32\",enable_prefix_caching=\"True\",num_cpu_blocks=\"None\",num_gpu_blocks=\"64\"",
        "vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.5\n",
        "vllm:request_params_n_bucket{le=\"1\",model_name=\"m\"} 1\n",
        "vllm:request_params_n_bucket{le=\"5\",model_name=\"m\"} 2\n",
        "vllm:request_params_n_sum{model_name=\"m\"} 4\n",
        "vllm:request_params_max_tokens_sum{model_name=\"m\"} 47\n",
        "vllm:request_max_num_generation_tokens_sum{model_name=\"m\"} 9\n",
        "vllm:time_per_output_token_seconds_count{model_name=\"m\"} 1\n",
        "vllm:request_prompt_tokens_count{model_name=\"m\"} 0\n",
        "vllm:request_success_total{finished_reason=\"abort\",model_name=\"m\"} 1\n",
        "vllm:iteration_tokens_total_bucket{le=\"1\",model_name=\"m\"} 3\n",
        "vllm:iteration_tokens_total_bucket{le=\"8\",model_name=\"m\"} 3\n",
        "vllm:iteration_tokens_total_bucket{le=\"16\",model_name=\"m\"} 5\n",
        "vllm:iteration_tokens_total_bucket{le=\"16384\",model_name=\"m\"} 5\n",
        "vllm:iteration_tokens_total_bucket{le=\"+Inf\",model_name=\"m\"} 6\n",
        "vllm:iteration_tokens_total_sum{model_name=\"m\"} 20027\n",
        "vllm:iteration_tokens_total_count{model_name=\"m\"} 6\n",
    };
    for (size_t i = 0; t && i < sizeof want / sizeof want[0]; i++) CHECKF(strstr(t, want[i]) != NULL, "missing: %s", want[i]);
    free(t);
    xi_metrics_free(m);
}

TEST(test_serve_oai_every_field_with_every_json_type_never_crashes) {
    static const char *const fields[] = {
        "model", "prompt", "messages", "stream", "stream_options", "echo", "temperature", "top_p",
        "top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty", "seed",
        "n", "max_tokens", "max_completion_tokens", "min_tokens", "ignore_eos",
        "skip_special_tokens", "include_stop_str_in_output", "cache_salt", "stop",
        "stop_token_ids", "logit_bias", "response_format", "logprobs", "top_logprobs",
        "add_special_tokens", "tools", "add_generation_prompt", "continue_final_message"};
    static const char *const values[] = {
        "null", "true", "false", "0", "-1", "1", "2147483648", "-9223372036854775808",
        "1e308", "-1e308", "0.5", "\"\"", "\"x\"", "[]", "{}", "[1]", "[[1]]", "[\"a\"]",
        "[null]", "{\"type\":\"text\"}", "{\"include_usage\":1}", "[{\"role\":\"user\"}]",
        "[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]", "{\"1\":\"x\"}"};
    int accepted = 0, rejected = 0;
    for (int chat = 0; chat < 2; chat++)
        for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
            for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
                char body[512];
                snprintf(body, sizeof body, "{%s\"%s\":%s}",
                         chat ? "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]," : "\"prompt\":\"x\",",
                         fields[f], values[v]);
                xi_oai_request r;
                xi_oai_error e = {0};
                int rc = xi_oai_parse(&r, chat, body, strlen(body), &e);
                if (rc) {
                    CHECKF(e.status == 400 && e.message[0], "%s: status %d", body, e.status);
                    rejected++;
                } else {
                    accepted++;
                }
                xi_oai_request_free(&r);
            }
    CHECK(accepted > 100 && rejected > 100); /* both paths were exercised */
}

TEST(test_serve_oai_error_quoting_invalid_utf8_still_has_a_json_body) {
    /* A malformed body whose bytes are not UTF-8: the parser's message quotes them, and the
     * 400 must still be buildable (it used to come back NULL, answered as a 500). */
    const char body[] = "{\"stop\": [\"\\\xc8\x91\xdd\xd3 \"]}";
    xi_oai_request r;
    xi_oai_error e = {0};
    CHECK(xi_oai_parse(&r, 1, body, sizeof body - 1, &e) == -1);
    CHECK_EQ(e.status, 400);
    xi_oai_request_free(&r);
    /* and a message cut inside a character by its buffer, or a param with stray bytes */
    xi_oai_error f;
    xi_oai_fail(&f, 400, "x\xff", "unknown field '%s'", "\xe4\xbd");
    const xi_oai_error *errs[] = {&e, &f};
    for (int i = 0; i < 2; i++) {
        char *s = xi_oai_error_json(errs[i]);
        CHECKF(s, "error %d: no JSON", i);
        json_t *o = json_loads(s ? s : "", 0, NULL);
        json_t *err = json_object_get(o, "error");
        CHECK(json_string_value(json_object_get(err, "message")) != NULL);
        CHECK_STR(json_string_value(json_object_get(err, "type")), "invalid_request_error");
        json_decref(o);
        free(s);
    }
    char *s = xi_oai_error_json(&f);
    json_t *o = json_loads(s, 0, NULL);
    json_t *err = json_object_get(o, "error");
    /* each byte of the cut character becomes one U+FFFD */
    CHECK_STR(json_string_value(json_object_get(err, "message")),
              "unknown field '\xEF\xBF\xBD\xEF\xBF\xBD'");
    CHECK_STR(json_string_value(json_object_get(err, "param")), "x\xEF\xBF\xBD");
    json_decref(o);
    free(s);
}

TEST(test_serve_invalid_utf8_in_output_becomes_replacement_chars) {
    /* a lone continuation byte, a truncated 3-byte sequence, a surrogate, then valid text */
    const char in[] = "a\x80" "b\xe2\x82" "c\xed\xa0\x80" "\xc3\xa9";
    size_t len;
    char *out = xi_srv_utf8_clean(in, sizeof in - 1, &len);
    CHECK(out);
    CHECK_EQ(len, strlen(out));
    CHECK(strncmp(out, "a\xEF\xBF\xBD" "b", 5) == 0);
    CHECK(strstr(out, "c") && strstr(out, "\xc3\xa9"));
    json_t *v = xi_srv_json_text(in, sizeof in - 1);
    CHECK(json_is_string(v));
    CHECK_STR(json_string_value(v), out);
    json_decref(v);
    free(out);
    v = xi_srv_json_text("ok \xe4\xbd\xa0", 6); /* valid text passes unchanged */
    CHECK_STR(json_string_value(v), "ok \xe4\xbd\xa0");
    json_decref(v);
}
