/* `xinfer serve` flags: vLLM's spellings, both value forms, the MODEL/--model rule, ignored
 * and refused flags. No model needed. */
#include <stdlib.h>

#include "server/serve_args.h"
#include "test.h"

static const char *fake_env_value;
static const char *fake_env(const char *name) {
    return !strcmp(name, "VLLM_API_KEY") ? fake_env_value : NULL;
}
static int no_dirs(const char *p) { (void)p; return 0; }
static int all_dirs(const char *p) { (void)p; return 1; }

#define ARGV(...) (char *[]){"serve", __VA_ARGS__, NULL}
#define ARGC(...) ((int)(sizeof((char *[]){"serve", __VA_ARGS__}) / sizeof(char *)))
#define PARSE(a, dirs, ...) xi_serve_args_parse(a, ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), fake_env, dirs, err, sizeof err)

static int has_notice(const xi_serve_args *a, const char *needle) {
    for (int i = 0; i < a->n_notices; i++)
        if (strstr(a->notices[i], needle)) return 1;
    return 0;
}

TEST(test_serve_args_accept_both_value_forms) {
    xi_serve_args a;
    char err[256] = "";
    fake_env_value = NULL;
    CHECKF(PARSE(&a, all_dirs, "/m", "--port=8123", "--host", "127.0.0.1", "--max-model-len=32k",
                 "--max-num-seqs", "7", "--kv-cache-memory-bytes=64M", "--block-size", "32",
                 "--seed=-3", "--gpu-memory-utilization", "0.5", "--max-queue-len=9",
                 "--threads", "2", "--dtype=half", "--kv-cache-dtype", "bfloat16",
                 "--no-enable-prefix-caching", "--no-enable-chunked-prefill",
                 "--max-num-batched-tokens", "4K") == 0, "%s", err);
    CHECK_EQ(a.port, 8123);
    CHECK_STR(a.host, "127.0.0.1");
    CHECK_EQ(a.engine.max_model_len, 32000);
    CHECK_EQ(a.engine.max_num_seqs, 7);
    CHECK_EQ(a.engine.kv_cache_memory_bytes, 64LL << 20);
    CHECK_EQ(a.engine.block_size, 32);
    CHECK_EQ((int64_t)a.engine.seed, -3);
    CHECK_NEAR(a.engine.gpu_memory_utilization, 0.5, 0);
    CHECK_EQ(a.engine.max_queue_len, 9);
    CHECK_EQ(a.engine.n_threads, 2);
    CHECK_STR(a.engine.dtype, "float16");
    CHECK_STR(a.engine.kv_cache_dtype, "bfloat16");
    CHECK_EQ(a.engine.enable_prefix_caching, 0);
    CHECK_EQ(a.engine.enable_chunked_prefill, 0);
    CHECK_EQ(a.engine.max_num_batched_tokens, 4096);
    CHECK_STR(a.model_path, "/m");
    CHECK_STR(a.engine.model_dir, "/m");
    CHECK_EQ(a.n_served_names, 1);
    CHECK_STR(a.served_names[0], "/m");
}

TEST(test_serve_args_defaults_match_vllm) {
    xi_serve_args a;
    char err[256] = "";
    fake_env_value = NULL;
    CHECK(PARSE(&a, all_dirs, "--model", "/x") == 0);
    CHECK_STR(a.host, "0.0.0.0");
    CHECK_EQ(a.port, 8000);
    CHECK_EQ(a.n_api_keys, 0);
    CHECK_EQ(a.max_body_bytes, 32LL << 20);
    CHECK_EQ(a.enable_log_requests, 0);
    CHECK_STR(a.model_path, "/x");
    CHECK_STR(a.served_names[0], "/x");
    CHECK_EQ(a.n_notices, 0);
}

/* The lm_head as stored unless asked; int8 or none only. */
TEST(test_serve_args_lm_head_quantization) {
    xi_serve_args a;
    char err[256] = "";
    fake_env_value = NULL;
    CHECK(PARSE(&a, all_dirs, "/m") == 0);
    CHECK(a.engine.lm_head_quantization == NULL);
    CHECK(PARSE(&a, all_dirs, "/m", "--lm-head-quantization", "int8") == 0);
    CHECK_STR(a.engine.lm_head_quantization, "int8");
    CHECK(PARSE(&a, all_dirs, "/m", "--lm-head-quantization=none") == 0);
    CHECK_STR(a.engine.lm_head_quantization, "none");
    CHECK(PARSE(&a, all_dirs, "/m", "--lm-head-quantization", "int4") == -1);
    CHECKF(strstr(err, "--lm-head-quantization") && strstr(err, "int4"), "%s", err);
}

TEST(test_serve_args_name_then_model_path_serves_path_under_name) {
    xi_serve_args a;
    char err[256] = "";
    fake_env_value = NULL;
    CHECK(PARSE(&a, no_dirs, "Qwen2.5-7B-Instruct", "--model", "/models/q") == 0);
    CHECK_STR(a.model_path, "/models/q");
    CHECK_STR(a.served_names[0], "Qwen2.5-7B-Instruct");
    CHECK_EQ(a.n_notices, 1);
    CHECK(has_notice(&a, "not a folder"));
    /* when MODEL is a folder, vLLM's rule: the positional wins */
    CHECK(PARSE(&a, all_dirs, "/models/a", "--model", "/models/b") == 0);
    CHECK_STR(a.model_path, "/models/a");
    CHECK_STR(a.served_names[0], "/models/a");
    CHECK(has_notice(&a, "positional MODEL wins"));
}

TEST(test_serve_args_served_names_take_several_values) {
    xi_serve_args a;
    char err[256] = "";
    fake_env_value = NULL;
    CHECK(PARSE(&a, all_dirs, "/m", "--served-model-name", "a", "b", "--port", "1") == 0);
    CHECK_EQ(a.n_served_names, 2);
    CHECK_STR(a.served_names[0], "a");
    CHECK_STR(a.served_names[1], "b");
    CHECK_EQ(a.port, 1);
}

TEST(test_serve_args_api_keys_from_flags_and_env) {
    xi_serve_args a;
    char err[256] = "";
    fake_env_value = "envkey";
    CHECK(PARSE(&a, all_dirs, "/m", "--api-key", "k1", "--api-key=k2") == 0);
    CHECK_EQ(a.n_api_keys, 3);
    CHECK_STR(a.api_keys[0], "k1");
    CHECK_STR(a.api_keys[1], "k2");
    CHECK_STR(a.api_keys[2], "envkey");
    fake_env_value = NULL;
}

TEST(test_serve_args_unknown_flag_is_named) {
    xi_serve_args a;
    char err[256] = "";
    fake_env_value = NULL;
    CHECK(PARSE(&a, all_dirs, "/m", "--frobnicate=3") == -1);
    CHECKF(strstr(err, "--frobnicate") != NULL, "%s", err);
    CHECK(PARSE(&a, all_dirs, "/m", "--port") == -1);
    CHECKF(strstr(err, "--port") && strstr(err, "value"), "%s", err);
    CHECK(PARSE(&a, all_dirs, "/m", "--port", "80x") == -1);
    CHECKF(strstr(err, "--port") && strstr(err, "80x"), "%s", err);
    CHECK(PARSE(&a, all_dirs, "/m", "--dtype", "int3") == -1);
    CHECKF(strstr(err, "--dtype") && strstr(err, "int3"), "%s", err);
    CHECK(PARSE(&a, all_dirs, "/m", "--enforce-eager=1") == -1);
    CHECKF(strstr(err, "--enforce-eager"), "%s", err);
    CHECK(PARSE(&a, all_dirs, "--port", "1") == -1);
    CHECKF(strstr(err, "no model"), "%s", err);
}

TEST(test_serve_args_tensor_parallel_size_is_read_pipeline_is_an_error) {
    xi_serve_args a;
    char err[256] = "";
    fake_env_value = NULL;
    CHECK(PARSE(&a, all_dirs, "/m", "-tp", "1") == 0);
    CHECK_EQ(a.engine.tensor_parallel_size, 1);
    CHECK(PARSE(&a, all_dirs, "/m", "--tensor-parallel-size=2") == 0);
    CHECK_EQ(a.engine.tensor_parallel_size, 2);
    CHECK(PARSE(&a, all_dirs, "/m", "-tp", "0") == -1);
    CHECKF(strstr(err, "-tp"), "%s", err);
    CHECK(PARSE(&a, all_dirs, "/m", "-pp", "2") == -1);
    CHECKF(strstr(err, "not implemented"), "%s", err);
}

TEST(test_serve_args_vllm_only_flags_accepted_with_notice) {
    xi_serve_args a;
    char err[256] = "";
    fake_env_value = NULL;
    CHECKF(PARSE(&a, all_dirs, "/m", "--enforce-eager", "--swap-space", "4",
                 "--enable-auto-tool-choice", "--tool-call-parser=hermes", "--kv-cache-dtype",
                 "fp8", "--trust-remote-code", "--disable-log-requests", "--disable-log-stats") == 0,
           "%s", err);
    CHECK_EQ(a.n_notices, 3);
    CHECK(has_notice(&a, "--enforce-eager"));
    CHECK(has_notice(&a, "--swap-space 4"));
    CHECK(!has_notice(&a, "--tool-call-parser")); /* a real flag now */
    CHECK(has_notice(&a, "fp8"));
    CHECK_STR(a.engine.kv_cache_dtype, "auto");
    CHECK_EQ(a.disable_log_stats, 1);
    /* refused: ignoring them would change what clients get */
    CHECK(PARSE(&a, all_dirs, "/m", "--ssl-certfile", "c.pem", "--enable-ssl-refresh") == -1);
    CHECKF(strstr(err, "--enable-ssl-refresh"), "%s", err);
}

/* vLLM's TLS flags: the files are the server's to read (test_server_tls); here what goes with
 * what, and --ssl-cert-reqs as Python's ssl numbers it. */
TEST(test_serve_args_ssl_flags_as_vllm_spells_them) {
    xi_serve_args a;
    char err[256] = "";
    fake_env_value = NULL;
    CHECKF(PARSE(&a, all_dirs, "/m", "--ssl-certfile", "c.pem", "--ssl-keyfile=k.pem", "--ssl-ca-certs", "ca.pem",
                 "--ssl-cert-reqs", "2") == 0, "%s", err);
    CHECK_STR(a.ssl_certfile, "c.pem");
    CHECK_STR(a.ssl_keyfile, "k.pem");
    CHECK_STR(a.ssl_ca_certs, "ca.pem");
    CHECK_EQ(a.ssl_cert_reqs, 2);
    CHECK(PARSE(&a, all_dirs, "/m") == 0);
    CHECK(!a.ssl_certfile && !a.ssl_keyfile && !a.ssl_ca_certs && a.ssl_cert_reqs == 0);
    CHECK(PARSE(&a, all_dirs, "/m", "--ssl-certfile", "c.pem", "--ssl-cert-reqs", "3") == -1);
    CHECKF(strstr(err, "--ssl-cert-reqs"), "%s", err);
    CHECK(PARSE(&a, all_dirs, "/m", "--ssl-keyfile", "k.pem") == -1);
    CHECKF(strstr(err, "--ssl-keyfile needs --ssl-certfile"), "%s", err);
    CHECK(PARSE(&a, all_dirs, "/m", "--ssl-ca-certs", "ca.pem") == -1);
    CHECKF(strstr(err, "--ssl-ca-certs needs --ssl-certfile"), "%s", err);
    CHECK(PARSE(&a, all_dirs, "/m", "--ssl-certfile", "c.pem", "--ssl-cert-reqs", "1") == -1);
    CHECKF(strstr(err, "needs --ssl-ca-certs"), "%s", err);
}

TEST(test_serve_args_tool_call_flags_as_vllm_checks_them) {
    xi_serve_args a;
    char err[256] = "";
    fake_env_value = NULL;
    CHECKF(PARSE(&a, all_dirs, "/m", "--enable-auto-tool-choice", "--tool-call-parser", "hermes") == 0,
           "%s", err);
    CHECK_EQ(a.enable_auto_tool_choice, 1);
    CHECK_STR(a.tool_call_parser, "hermes");
    CHECK(PARSE(&a, all_dirs, "/m") == 0);
    CHECK_EQ(a.enable_auto_tool_choice, 0);
    CHECK(a.tool_call_parser == NULL);
    CHECK(PARSE(&a, all_dirs, "/m", "--enable-auto-tool-choice") == -1);
    CHECKF(strstr(err, "--tool-call-parser") && strstr(err, "hermes"), "%s", err);
    CHECK(PARSE(&a, all_dirs, "/m", "--enable-auto-tool-choice", "--tool-call-parser=mistral") == -1);
    CHECKF(strstr(err, "mistral") && strstr(err, "supported: hermes"), "%s", err);
}

TEST(test_serve_args_reasoning_parser_is_checked) {
    xi_serve_args a;
    char err[256] = "";
    fake_env_value = NULL;
    CHECKF(PARSE(&a, all_dirs, "/m", "--reasoning-parser", "deepseek_r1", "--enable-reasoning") == 0, "%s", err);
    CHECK_STR(a.reasoning_parser, "deepseek_r1");
    CHECK(has_notice(&a, "--enable-reasoning"));
    CHECK(PARSE(&a, all_dirs, "/m", "--reasoning-parser=granite") == -1);
    CHECKF(strstr(err, "granite") && strstr(err, "deepseek_r1, qwen3"), "%s", err);
}

TEST(test_serve_args_value_checked_flags_and_generation_overrides) {
    xi_serve_args a;
    char err[256] = "";
    fake_env_value = NULL;
    CHECKF(PARSE(&a, all_dirs, "/m", "--scheduling-policy", "fcfs", "--preemption-mode=recompute",
                 "--config-format", "hf", "--chat-template-content-format", "string",
                 "--disable-sliding-window", "--override-generation-config",
                 "{\"temperature\": 0.5, \"top_k\": 20, \"top_p\": 0.9, \"min_p\": 0.05, "
                 "\"repetition_penalty\": 1.1}") == 0, "%s", err);
    CHECK_EQ(a.n_notices, 1); /* only the ignored one */
    CHECK(has_notice(&a, "--disable-sliding-window"));
    CHECK_NEAR(a.engine.override_temperature, 0.5, 1e-6);
    CHECK_EQ(a.engine.override_top_k, 20);
    CHECK_NEAR(a.engine.override_top_p, 0.9, 1e-6);
    CHECK_NEAR(a.engine.override_min_p, 0.05, 1e-6);
    CHECK_NEAR(a.engine.override_repetition_penalty, 1.1, 1e-6);
    CHECK(PARSE(&a, all_dirs, "/m") == 0);
    CHECK(a.engine.override_temperature < 0 && a.engine.override_top_k < -1); /* untouched */
    static char *bad[][2] = {
        {"--scheduling-policy", "priority"}, {"--preemption-mode", "swap"},
        {"--config-format", "mistral"}, {"--override-generation-config", "{\"top_p\": 2}"},
        {"--override-generation-config", "{\"max_new_tokens\": 5}"},
        {"--override-generation-config", "[1]"}, {"--rope-scaling", "{}"}, {"--hf-overrides", "{}"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECKF(PARSE(&a, all_dirs, "/m", bad[i][0], bad[i][1]) == -1, "%s %s accepted", bad[i][0], bad[i][1]);
        CHECKF(strstr(err, bad[i][0]), "%s", err);
    }
}

TEST(test_serve_args_help_lists_every_flag) {
    xi_serve_args a;
    char err[256] = "";
    CHECK(PARSE(&a, all_dirs, "--help") == 0);
    CHECK_EQ(a.help, 1);
    const char *h = xi_serve_args_help();
    static const char *const must[] = {
        "--model", "--served-model-name", "--host", "--port", "--api-key", "--dtype",
        "--quantization", "-q", "--lm-head-quantization", "--max-model-len", "--max-num-seqs", "--max-num-batched-tokens",
        "--kv-cache-dtype", "--enable-prefix-caching", "--no-enable-prefix-caching",
        "--enable-chunked-prefill", "--no-enable-chunked-prefill", "--block-size",
        "--kv-cache-memory-bytes", "--gpu-memory-utilization", "--seed", "--generation-config",
        "--chat-template", "--tensor-parallel-size", "-tp", "--threads", "--max-queue-len",
        "--uds", "--disable-log-requests", "--enable-log-requests", "--disable-log-stats",
        "--download-dir", "--trust-remote-code", "--enforce-eager", "--swap-space",
        "--enable-auto-tool-choice", "--tool-call-parser", "--reasoning-parser",
        "--override-generation-config", "--ssl-certfile", "--ssl-keyfile", "--ssl-ca-certs",
        "--ssl-cert-reqs"};
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
        CHECKF(strstr(h, must[i]) != NULL, "--help lacks %s", must[i]);
}

static const char *keep_alive_env(const char *name) {
    return !strcmp(name, "VLLM_HTTP_TIMEOUT_KEEP_ALIVE") ? "7.5" : NULL;
}

/* What a client may cost: uvicorn's and vLLM's names, their defaults, the environment
 * variable vLLM reads, and out-of-range values named. */
TEST(test_serve_args_connection_limits) {
    xi_serve_args a;
    char err[256] = "";
    fake_env_value = NULL;
    CHECK(PARSE(&a, all_dirs, "/m") == 0);
    CHECK_NEAR(a.timeout_keep_alive, 5, 0);
    CHECK_NEAR(a.timeout_request_read, 30, 0);
    CHECK_EQ(a.limit_concurrency, 0);
    CHECK_EQ(a.max_seqs_per_request, 1024);
    CHECK_EQ(a.max_parse_bytes, 1LL << 30);
    CHECKF(PARSE(&a, all_dirs, "/m", "--timeout-keep-alive", "2", "--timeout-request-read=4.5",
                 "--limit-concurrency", "300", "--max-seqs-per-request=64", "--max-parse-bytes-in-flight", "256M") == 0,
           "%s", err);
    CHECK_NEAR(a.timeout_keep_alive, 2, 0);
    CHECK_NEAR(a.timeout_request_read, 4.5, 0);
    CHECK_EQ(a.limit_concurrency, 300);
    CHECK_EQ(a.max_seqs_per_request, 64);
    CHECK_EQ(a.max_parse_bytes, 256LL << 20);
    char *argv[] = {"serve", "/m", NULL};
    CHECK(xi_serve_args_parse(&a, 2, argv, keep_alive_env, all_dirs, err, sizeof err) == 0);
    CHECK_NEAR(a.timeout_keep_alive, 7.5, 0);
    CHECK(PARSE(&a, all_dirs, "/m", "--limit-concurrency", "0") != 0);
    CHECKF(strstr(err, "--limit-concurrency") && strstr(err, "out of range"), "%s", err);
    CHECK(PARSE(&a, all_dirs, "/m", "--timeout-keep-alive", "soon") != 0);
    CHECKF(strstr(err, "--timeout-keep-alive"), "%s", err);
}

TEST(test_serve_args_cors_request_id_usage_load_and_metrics_flags_take_effect) {
    xi_serve_args a;
    char err[256] = "";
    fake_env_value = NULL;
    CHECKF(PARSE(&a, all_dirs, "/m", "--allowed-origins", "[\"https://a.example\"]", "--allowed-methods=[\"GET\"]",
                 "--allowed-headers", "[]", "--allow-credentials", "--enable-request-id-headers") == 0, "%s", err);
    CHECK_STR(a.allowed_origins, "[\"https://a.example\"]");
    CHECK_STR(a.allowed_methods, "[\"GET\"]");
    CHECK_STR(a.allowed_headers, "[]");
    CHECK(a.allow_credentials && a.request_id_headers);
    CHECK_EQ(a.n_notices, 0); /* none of them is ignored any more */
    CHECK(PARSE(&a, all_dirs, "/m") == 0);
    CHECK(!a.allowed_origins && !a.allow_credentials && !a.request_id_headers); /* ["*"], as vLLM */
    CHECKF(PARSE(&a, all_dirs, "/m", "--enable-force-include-usage", "--enable-server-load-tracking",
                 "--show-hidden-metrics-for-version", "0.10", "--enable-tokenizer-info-endpoint") == 0, "%s", err);
    CHECK(a.force_include_usage && a.server_load_tracking && a.tokenizer_info && a.n_notices == 0);
    CHECK_STR(a.show_hidden_metrics, "0.10");
    CHECKF(PARSE(&a, all_dirs, "/m", "--fingerprint-mode", "custom", "--fingerprint-value", "fp-1") == 0, "%s", err);
    CHECK_STR(a.fingerprint_mode, "custom");
    CHECK_STR(a.fingerprint_value, "fp-1");
    CHECK(PARSE(&a, all_dirs, "/m", "--fingerprint-mode", "custom") == -1 && strstr(err, "--fingerprint-value"));
    CHECK(PARSE(&a, all_dirs, "/m", "--fingerprint-mode", "sometimes") == -1 && strstr(err, "--fingerprint-mode"));
    CHECK(PARSE(&a, all_dirs, "/m", "--show-hidden-metrics-for-version", "latest") == -1);
    CHECKF(strstr(err, "MAJOR.MINOR"), "%s", err);
    static char *bad[][2] = {{"--allowed-origins", "*"}, {"--allowed-methods", "[1]"}, {"--allowed-headers", "{}"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECKF(PARSE(&a, all_dirs, "/m", bad[i][0], bad[i][1]) == -1, "%s %s accepted", bad[i][0], bad[i][1]);
        CHECKF(strstr(err, bad[i][0]) && strstr(err, "JSON list"), "%s", err);
    }
}
