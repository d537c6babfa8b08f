/* xinfer plan: every number checked against a hand calculation written out here. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model/gguf.h"
#include "ops/plan.h"
#include "test.h"

#define GIB 1073741824LL
#define MIB 1048576LL

static const xi_plan_device *dev(const char *key) { return xi_plan_device_find(key, NULL, 0); }

/* Qwen2.5-7B by hand: hidden 3584, inter 18944, 28 layers, 28 heads, 4 KV heads × 128,
 * vocab 152064, untied, q/k/v bias. */
static const int64_t Q7_LINEAR = 28LL * (3584LL * 3584       /* q */
                                         + 2 * 512LL * 3584  /* k, v */
                                         + 3584LL * 3584     /* o */
                                         + 3 * 18944LL * 3584); /* gate, up, down */
static const int64_t Q7_EMBED = 2LL * 152064 * 3584;         /* embed_tokens + lm_head */
static const int64_t Q7_OTHER = 28LL * (2 * 3584 + 3584 + 2 * 512) + 3584; /* norms, bias */

TEST(test_plan_qwen7b_fp16_weights_kv_and_concurrency_on_910b3) {
    CHECK_EQ(Q7_LINEAR, 6525288448LL);
    CHECK_EQ(Q7_LINEAR + Q7_EMBED + Q7_OTHER, 7615616512LL); /* the published 7.61B */
    xi_plan_model m;
    CHECK(xi_plan_model_catalog("Qwen/Qwen2.5-7B-Instruct", &m, NULL, 0) == 0);
    xi_plan_params p;
    xi_plan_params_default(&p);
    xi_plan r;
    CHECK(xi_plan_compute(&m, dev("910b3"), &p, &r, NULL, 0) == 0);
    CHECK_EQ(r.w.params, 7615616512LL);
    CHECK_EQ(r.w.bytes_linear, 2 * Q7_LINEAR);
    CHECK_EQ(r.w.bytes_embed, 2 * Q7_EMBED);
    CHECK_EQ(r.w.bytes, 15231233024LL);
    CHECK_EQ(r.kv_per_token, 57344); /* 2 × 28 × 4 × 128 × 2 */
    CHECK_EQ(r.block_size, 128);     /* vllm-ascend's block on an NPU */
    CHECK_EQ(r.kv_per_seq_full, 256LL * 128 * 57344);
    CHECK_EQ(r.kv_per_seq_typical, 2048LL * 57344);
    int64_t usable = (int64_t)(65536 * MIB * 0.9);
    CHECK_EQ(r.usable_bytes, usable);
    int64_t budget = usable - 15231233024LL - 3 * GIB / 2;
    CHECK_EQ(r.kv_budget, budget); /* 45,005,683,302 B */
    CHECK_EQ(r.max_seqs_full, 23);  /* 45.0e9 / 1.879e9 */
    CHECK_EQ(r.max_seqs_typical, 383);
    CHECK_EQ(r.min_tp, 1);
    /* batch 1 reads the weights and 2048 tokens of KV: 15,348,673,536 B per token */
    CHECK_NEAR(r.tok1_lo, 1200e9 / 15348673536.0, 1e-6);
    CHECK_NEAR(r.tok1_hi, 1600e9 / 15348673536.0, 1e-6);
    CHECK_EQ(r.batch, 256); /* 383 fit, max-num-seqs caps */
}

TEST(test_plan_qwen7b_on_310p_pro_holds_one_full_context) {
    xi_plan_model m;
    CHECK(xi_plan_model_catalog("qwen2.5-7b", &m, NULL, 0) == 0);
    xi_plan_params p;
    xi_plan_params_default(&p);
    xi_plan r;
    CHECK(xi_plan_compute(&m, dev("310p-pro"), &p, &r, NULL, 0) == 0);
    int64_t budget = (int64_t)(21527 * MIB * 0.9) - 15231233024LL - 3 * GIB / 2;
    CHECK_EQ(r.kv_budget, budget); /* 3,473,580,236 B */
    CHECK_EQ(r.max_seqs_full, 1);
    CHECK_EQ(r.max_seqs_typical, 29);
    CHECK_NEAR(r.tok1_lo, 204e9 / 15348673536.0, 1e-6); /* 13.3 tok/s: reference says <= ~14 */
    CHECK_EQ(r.batch, 29);
    CHECK_NEAR(r.tokn_lo, 204e9 * 29 / (15231233024.0 + 29 * 117440512.0), 1e-6);
    double flops = 2.0 * (Q7_LINEAR + 152064.0 * 3584) + 4.0 * 28 * 28 * 128 * 2048;
    CHECK_NEAR(r.compute_lo, 70e12 / flops, 1e-6);
    CHECK(r.n_notes >= 1 && strstr(r.notes[0], "no BF16")); /* 310P runs bf16 as fp16 */
}

TEST(test_plan_awq_counts_scales_zeros_and_16bit_embeddings_apart) {
    xi_plan_model m;
    CHECK(xi_plan_model_catalog("Qwen2.5-7B-Instruct-AWQ", &m, NULL, 0) == 0);
    CHECK_EQ(m.quant, XI_PQ_AWQ);
    xi_plan_params p;
    xi_plan_params_default(&p);
    xi_plan r;
    CHECK(xi_plan_compute(&m, dev("910b3"), &p, &r, NULL, 0) == 0);
    /* per layer, groups of 128 inputs × outputs × (fp16 scale 2 B + 4-bit zero 0.5 B) */
    int64_t meta = 28LL * (28 * 3584 + 2 * 28 * 512 + 28 * 3584 + 2 * 28 * 18944 + 148 * 3584) * 5 / 2;
    CHECK_EQ(meta, 127447040);
    CHECK_EQ(r.w.bytes_linear_meta, meta);
    CHECK_EQ(r.w.bytes_linear, Q7_LINEAR / 2 + meta);
    CHECK_EQ(r.w.bytes_embed, 2 * Q7_EMBED); /* embeddings and lm_head stay 16-bit */
    CHECK_EQ(r.w.bytes, 5570747392LL);       /* the published AWQ checkpoint is 5.58 GB */

    /* int8: one byte per weight + an f32 scale per output channel */
    p.quant = XI_PQ_INT8;
    CHECK(xi_plan_compute(&m, dev("910b3"), &p, &r, NULL, 0) == 0);
    int64_t scales = 28LL * (3584 + 512 + 512 + 3584 + 3 * 18944 - 18944 + 3584) * 4;
    CHECK_EQ(scales, 28LL * 49664 * 4);
    CHECK_EQ(r.w.bytes, Q7_LINEAR + scales + 2 * Q7_EMBED + 2 * Q7_OTHER);
}

TEST(test_plan_llama70b_needs_tp4_in_fp16_on_64gb) {
    xi_plan_model m;
    CHECK(xi_plan_model_catalog("meta-llama/Meta-Llama-3.1-70B-Instruct", &m, NULL, 0) == 0);
    xi_plan_params p;
    xi_plan_params_default(&p);
    p.max_model_len = 32768;
    xi_plan r;
    CHECK(xi_plan_compute(&m, dev("910b3"), &p, &r, NULL, 0) == 0);
    int64_t linear = 80LL * (2 * 8192LL * 8192 + 2 * 8192LL * 1024 + 3 * 8192LL * 28672);
    int64_t embed = 2LL * 128256 * 8192, other = 80LL * 2 * 8192 + 8192;
    CHECK_EQ(linear + embed + other, 70553706496LL);
    CHECK_EQ(r.w.params, 70553706496LL);
    CHECK_EQ(r.min_tp, 4);
    CHECK_EQ(r.tp, 4);
    CHECK_EQ(r.weights_per_device, (2 * (linear + embed)) / 4 + 2 * other);
    CHECK_EQ(r.kv_per_token, 327680);          /* 2 × 80 × 8 × 128 × 2 */
    CHECK_EQ(r.kv_per_token_device, 81920);    /* 2 of the 8 KV heads per device */
    int64_t budget = (int64_t)(65536 * MIB * 0.9) - r.weights_per_device - 3 * GIB / 2;
    CHECK_EQ(r.max_seqs_full, budget / (32768LL * 81920)); /* = 9 */
    CHECK_EQ(r.max_seqs_full, 9);
    p.tp = 2;
    CHECK(xi_plan_compute(&m, dev("910b3"), &p, &r, NULL, 0) == 0);
    CHECK(!r.fits);
    CHECK(r.kv_budget < 0);
}

TEST(test_plan_kv_heads_replicate_past_tp_and_invalid_tp_rejected) {
    xi_plan_model m;
    CHECK(xi_plan_model_catalog("Qwen2.5-3B", &m, NULL, 0) == 0); /* 16 heads, 2 KV heads */
    xi_plan_params p;
    xi_plan_params_default(&p);
    p.tp = 4;
    xi_plan r;
    CHECK(xi_plan_compute(&m, dev("910b4"), &p, &r, NULL, 0) == 0);
    CHECK_EQ(r.kv_per_token, 2LL * 36 * 2 * 128 * 2);
    CHECK_EQ(r.kv_per_token_device, 2LL * 36 * 1 * 128 * 2);
    CHECK(xi_plan_model_catalog("Qwen2.5-7B", &m, NULL, 0) == 0);
    CHECK(!xi_plan_tp_valid(&m, XI_PQ_NONE, 8)); /* 28 heads */
    CHECK(xi_plan_tp_valid(&m, XI_PQ_NONE, 4));
    char err[256] = "";
    p.tp = 8;
    CHECK(xi_plan_compute(&m, dev("910b3"), &p, &r, err, sizeof err) < 0);
    CHECK(strstr(err, "--tensor-parallel-size 8") != NULL);
    CHECK(xi_plan_model_catalog("Qwen2.5-72B", &m, NULL, 0) == 0);
    CHECK(!xi_plan_tp_valid(&m, XI_PQ_AWQ, 2)); /* 29568 / 2 = 14784 is not whole 128-groups */
    CHECK(xi_plan_tp_valid(&m, XI_PQ_NONE, 2));
}

TEST(test_plan_custom_device_fp32_kv_and_cpu_blocks) {
    xi_plan_model m;
    CHECK(xi_plan_model_catalog("qwen2.5-0.5b", &m, NULL, 0) == 0);
    xi_plan_device d = *dev("custom");
    d.mem_bytes = 4 * GIB;
    xi_plan_params p;
    xi_plan_params_default(&p);
    p.kv_dtype = XI_KV_F32;
    p.max_model_len = 4000;
    p.typical_context = 1000;
    xi_plan r;
    CHECK(xi_plan_compute(&m, &d, &p, &r, NULL, 0) == 0);
    /* tied: 24 × (896·896·2 + 896·128·2 + 3·896·4864) + 151936·896 + norms/bias */
    int64_t params = 24LL * (2 * 896 * 896 + 2 * 896 * 128 + 3 * 896 * 4864) + 151936LL * 896 +
                     24LL * (2 * 896 + 896 + 2 * 128) + 896;
    CHECK_EQ(params, 494032768);
    CHECK_EQ(r.w.bytes, 2 * params);
    CHECK_EQ(r.kv_per_token, 2 * 24 * 2 * 64 * 4);
    CHECK_EQ(r.block_size, 16);
    CHECK_EQ(r.kv_per_seq_full, 4000LL * 24576);    /* 250 blocks exactly */
    CHECK_EQ(r.kv_per_seq_typical, 1008LL * 24576); /* 63 blocks: 1000 rounded up */
    int64_t budget = (int64_t)(4 * GIB * 0.9) - 2 * params - GIB;
    CHECK_EQ(r.kv_budget, budget);
    CHECK_EQ(r.max_seqs_full, 18);
    CHECK_EQ(r.max_seqs_typical, 72);
    CHECK(r.tok1_lo == 0); /* no bandwidth given: no estimate */
    d.mem_bytes = 0;
    char err[200];
    CHECK(xi_plan_compute(&m, &d, &p, &r, err, sizeof err) < 0);
    CHECK(strstr(err, "--memory-gb") != NULL);
}

TEST(test_plan_folder_config_matches_catalogue_and_reads_awq) {
    xi_plan_model folder, cat;
    char err[600] = "";
    char *dir = xi_test_data("tokenizers/qwen2.5"); /* official Qwen2.5-0.5B-Instruct config.json */
    CHECKF(xi_plan_model_load(dir, &folder, err, sizeof err) == 0, "%s", err);
    CHECK(xi_plan_model_catalog("Qwen2.5-0.5B", &cat, NULL, 0) == 0);
    xi_plan_params p;
    xi_plan_params_default(&p);
    xi_plan a, b;
    CHECK(xi_plan_compute(&folder, dev("910b4"), &p, &a, NULL, 0) == 0);
    CHECK(xi_plan_compute(&cat, dev("910b4"), &p, &b, NULL, 0) == 0);
    /* this config.json says float32: same parameters, twice the bytes, fp32 KV under "auto" */
    CHECK_STR(folder.dtype, "float32");
    CHECK_EQ(a.w.params, b.w.params);
    CHECK_EQ(a.w.bytes, 2 * b.w.bytes);
    CHECK_EQ(a.kv_per_token, 2 * b.kv_per_token);
    CHECK_EQ(folder.tied, 1);

    const char *tmp = xi_test_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/Qwen2.5-7B-Instruct-AWQ", tmp);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", path);
    CHECK(system(cmd) == 0);
    snprintf(path + strlen(path), sizeof path - strlen(path), "/config.json");
    FILE *f = fopen(path, "w");
    CHECK(f);
    fputs("{\"architectures\": [\"Qwen2ForCausalLM\"], \"hidden_size\": 3584, \"intermediate_size\": 18944,"
          " \"num_hidden_layers\": 28, \"num_attention_heads\": 28, \"num_key_value_heads\": 4,"
          " \"vocab_size\": 152064, \"max_position_embeddings\": 32768, \"tie_word_embeddings\": false,"
          " \"torch_dtype\": \"float16\", \"quantization_config\": {\"bits\": 4, \"group_size\": 128,"
          " \"quant_method\": \"awq\", \"version\": \"gemm\", \"zero_point\": true}}", f);
    fclose(f);
    *strrchr(path, '/') = 0;
    CHECKF(xi_plan_model_load(path, &folder, err, sizeof err) == 0, "%s", err);
    CHECK_STR(folder.name, "Qwen2.5-7B-Instruct-AWQ");
    CHECK_EQ(folder.quant, XI_PQ_AWQ);
    CHECK_EQ(folder.quant_group, 128);
    CHECK(xi_plan_compute(&folder, dev("910b3"), &p, &a, NULL, 0) == 0);
    CHECK_EQ(a.w.bytes, 5570747392LL);
    /* the same folder planned on a 310P: fits, but 310P has no 4-bit matmul */
    CHECK(xi_plan_compute(&folder, dev("310p-pro"), &p, &a, NULL, 0) == 0);
    int warned = 0;
    for (int i = 0; i < a.n_notes; i++) warned |= strstr(a.notes[i], "no 4-bit weight matmul") != NULL;
    CHECK(warned);

    snprintf(cmd, sizeof cmd, "printf '{\"hidden_size\": 8}' > %s/config.json", path);
    CHECK(system(cmd) == 0);
    CHECK(xi_plan_model_load(path, &folder, err, sizeof err) < 0);
    CHECK(strstr(err, "intermediate_size") != NULL);
}

/* ---- the CLI ----------------------------------------------------------------------------- */

static json_t *plan_json(const char *args, int *rc) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s plan --json %s", xi_test_bin(), args);
    *rc = xi_test_run(cmd, &out);
    json_t *j = out ? json_loads(out, 0, NULL) : NULL;
    free(out);
    return j;
}

TEST(test_plan_cli_json_matches_library_numbers) {
    int rc;
    json_t *j = plan_json("--model Qwen2.5-7B --device kunpeng920 --memory-gb 64 --quantization awq", &rc);
    CHECK(j);
    CHECK_EQ(rc, 0);
    CHECK_STR(json_string_value(json_object_get(j, "quantization")), "awq");
    json_t *w = json_object_get(j, "weights");
    CHECK_EQ(json_integer_value(json_object_get(w, "total_bytes")), 5570747392LL);
    CHECK_EQ(json_integer_value(json_object_get(w, "embed_lm_head_bytes")), 2 * Q7_EMBED);
    CHECK_EQ(json_integer_value(json_object_get(json_object_get(j, "kv_cache"), "bytes_per_token")), 57344);
    CHECK_EQ(json_integer_value(json_object_get(j, "block_size")), 16); /* xinfer's CPU block */
    json_t *bw = json_object_get(json_object_get(j, "device"), "bandwidth_gbs");
    CHECK_EQ(json_array_size(bw), 2); /* a range: one NUMA die to all dies interleaved */
    CHECK_NEAR(json_real_value(json_array_get(bw, 0)), 64, 1e-9);
    CHECK_NEAR(json_real_value(json_array_get(bw, 1)), 115, 1e-9);
    json_t *t1 = json_object_get(json_object_get(j, "decode"), "batch1_tok_s");
    CHECK_NEAR(json_real_value(json_array_get(t1, 0)), 64e9 / (5570747392.0 + 2048 * 57344.0), 1e-6);
    json_decref(j);
}

TEST(test_plan_cli_guidance_verdicts) {
    int rc;
    json_t *j = plan_json("--guidance", &rc);
    CHECK(j);
    CHECK_EQ(rc, 0);
    CHECK(json_array_size(j) >= 10);
    int seen = 0;
    size_t i;
    json_t *row;
    json_array_foreach(j, i, row) {
        const char *model = json_string_value(json_object_get(json_object_get(row, "model"), "name"));
        const char *q = json_string_value(json_object_get(row, "quantization"));
        const char *dkey = json_string_value(json_object_get(json_object_get(row, "device"), "key"));
        const char *v = json_string_value(json_object_get(row, "verdict"));
        int tp = (int)json_integer_value(json_object_get(row, "tensor_parallel_size"));
        if (!strcmp(model, "Qwen2.5-7B") && !strcmp(q, "none") && !strcmp(dkey, "310p-pro"))
            { CHECK_STR(v, "agrees"); seen |= 1; }
        if (!strcmp(model, "Qwen2.5-32B") && !strcmp(q, "none"))
            { CHECK_STR(v, "disagrees: does not fit"); seen |= 2; } /* 61 GiB of weights on 64 GB */
        if (!strcmp(model, "Qwen2.5-32B") && !strcmp(q, "awq")) { CHECK_STR(v, "agrees"); seen |= 4; }
        if (!strcmp(model, "Llama-3.1-70B") && !strcmp(q, "none") && tp == 2)
            { CHECK_STR(v, "disagrees: does not fit"); seen |= 8; }
        if (!strcmp(model, "Llama-3.1-70B") && !strcmp(q, "none") && tp == 4)
            { CHECK_STR(v, "agrees"); seen |= 16; }
    }
    CHECK_EQ(seen, 31);
    json_decref(j);
}

TEST(test_plan_cli_recommend_ranks_fitting_devices_first) {
    int rc;
    json_t *j = plan_json("--model Qwen2.5-72B --recommend --max-model-len 8192", &rc);
    CHECK(j);
    CHECK_EQ(rc, 0);
    json_t *rank = json_object_get(j, "ranking");
    CHECK(json_array_size(rank) >= 9);
    int was_ok = 1, prev_tp = 0;
    size_t i;
    json_t *row;
    json_array_foreach(rank, i, row) {
        int ok = json_is_true(json_object_get(row, "recommended"));
        int tp = (int)json_integer_value(json_object_get(row, "tensor_parallel_size"));
        CHECK(ok <= was_ok); /* recommended rows first */
        if (ok) {
            CHECK(tp >= prev_tp);
            prev_tp = tp;
        }
        was_ok = ok;
    }
    /* 145 GB of fp16 weights: 4 × 64 GB is the least that holds it */
    CHECK_EQ(json_integer_value(json_object_get(json_array_get(rank, 0), "tensor_parallel_size")), 4);
    json_decref(j);
}

TEST(test_plan_cli_bad_input_is_one_error_line_and_exit_1) {
    const char *bad[] = {
        "--model Qwen9-1T --device 910b3",
        "--model Qwen2.5-7B --device h100",
        "--model Qwen2.5-7B --device 910b3 --quantization fp4",
        "--model Qwen2.5-7B --device 910b3 --gpu-memory-utilization 1.5",
        "--model Qwen2.5-7B --device 910b3 --tensor-parallel-size 3",
        "--model Qwen2.5-7B --device 910b3 --max-model-len 1000 --typical-context 2000",
        "--model Qwen2.5-7B --device kunpeng920",
        "--model Qwen2.5-7B --device 910b3 --kv-cache-dtype int3",
        "--model Qwen2.5-7B --device 910b3 --max-model-len -5",
        "--model Qwen2.5-7B --bogus",
        "--device 910b3",
        "--model Qwen2.5-7B --device",
    };
    for (size_t i = 0; i < XI_ARRAY_LEN(bad); i++) {
        char cmd[512], *out = NULL;
        snprintf(cmd, sizeof cmd, "%s plan %s 2>&1", xi_test_bin(), bad[i]);
        int rc = xi_test_run(cmd, &out);
        CHECKF(rc == 1, "xinfer plan %s: exit %d", bad[i], rc);
        CHECKF(out && !strncmp(out, "xinfer plan: ", 13), "xinfer plan %s: got %s", bad[i], out);
        free(out);
    }
}

/* Qwen3-30B-A3B by hand: hidden 2048, 48 layers, 32 heads / 4 KV heads x 128, 128 experts of
 * 768 (8 per token) in every layer, router [128, 2048], q/k norm [128], vocab 151936 untied. */
TEST(test_plan_qwen3_moe_counts_experts_and_decodes_from_active_params) {
    const int64_t attn = 2048LL * 4096 * 2 + 2 * 512LL * 2048, expert = 3LL * 2048 * 768;
    const int64_t other = 48LL * (2 * 2048 + 2 * 128 + 128 * 2048) + 2048;
    const int64_t total = 48 * (attn + 128 * expert) + 2LL * 151936 * 2048 + other;
    const int64_t active = total - 48LL * 120 * expert;
    CHECK_EQ(total, 30532122624LL);  /* the published 30.5B */
    CHECK_EQ(active, 3353032704LL);  /* and its 3.3B active */
    xi_plan_model m;
    CHECK(xi_plan_model_catalog("Qwen/Qwen3-30B-A3B", &m, NULL, 0) == 0);
    CHECK(m.experts == 128 && m.experts_per_tok == 8 && m.moe_layers == 48 && m.qk_norm);
    xi_plan_params p;
    xi_plan_params_default(&p);
    p.max_num_seqs = 16;
    xi_plan r;
    const xi_plan_device *d = xi_plan_device_find("custom", NULL, 0);
    xi_plan_device cpu = *d;
    cpu.mem_bytes = 128 * GIB, cpu.bw_lo = cpu.bw_hi = 100e9;
    CHECK(xi_plan_compute(&m, &cpu, &p, &r, NULL, 0) == 0);
    CHECK_EQ(r.w.params, total);
    CHECK_EQ(r.w.params_active, active);
    CHECK_EQ(r.w.bytes_expert, 2 * expert);
    CHECK_EQ(r.w.bytes_active, r.w.bytes - 48LL * 120 * 2 * expert);
    /* batch 1 reads the active weights and one typical context of KV */
    const double kv = 2.0 * 48 * 4 * 128 * 2 * 2048;
    CHECK_NEAR(r.tok1_lo, 100e9 / ((double)r.w.bytes_active + kv), 1e-6 * r.tok1_lo);
    /* 16 tokens touch 128 (1 - (120/128)^16) = 82.9 experts per layer, uniform routing */
    CHECK_EQ(r.batch, 16);
    const double touched = 128 * (1 - pow(120.0 / 128, 16));
    CHECK_NEAR((double)r.w.bytes_batch, (double)r.w.bytes - (128 - touched) * 48 * 2 * expert, 2.0);
    CHECK(r.w.bytes_active < r.w.bytes_batch && r.w.bytes_batch < r.w.bytes);
}

/* The shared tiny Qwen3-MoE folder: the planner's count equals inspect's tensor count and the
 * loaded model's, and both give the same active parameters. */
TEST(test_plan_and_inspect_agree_on_qwen3moe_folder) {
    char *dir = xi_test_data("models/qwen3moe-tiny-random");
    xi_plan_model m;
    char err[256] = "";
    CHECKF(xi_plan_model_load(dir, &m, err, sizeof err) == 0, "%s", err);
    CHECK(m.experts == 8 && m.experts_per_tok == 2 && m.moe_intermediate == 32 && m.moe_layers == 2);
    xi_plan_params p;
    xi_plan_params_default(&p);
    xi_plan r;
    CHECK(xi_plan_compute(&m, dev("910b3"), &p, &r, err, sizeof err) == 0);
    const int64_t expert = 3 * 64 * 32;
    CHECK_EQ(r.w.params, 151936LL * 64 + 2 * (128 * 64 * 2 + 64 * 64 * 2 + 8 * expert + 8 * 64 + 2 * 64 + 2 * 32) + 64);
    CHECK_EQ(r.w.params_active, r.w.params - 2 * 6 * expert);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s inspect '%s' --json", xi_test_bin(), dir);
    char *out = NULL;
    CHECK_EQ(xi_test_run(cmd, &out), 0);
    json_t *j = out ? json_loads(out, 0, NULL) : NULL;
    free(out);
    CHECK(j);
    json_t *moe = json_object_get(j, "moe");
    CHECK_EQ(json_integer_value(json_object_get(j, "parameters")), r.w.params);
    CHECK_EQ(json_integer_value(json_object_get(moe, "active_parameters")), r.w.params_active);
    CHECK_EQ(json_integer_value(json_object_get(moe, "num_experts_per_tok")), 2);
    json_decref(j);
    free(dir);
}

/* A GGUF file plans from its metadata and its tensors' stored bytes: the same shape as the
 * safetensors folder of the same weights, the bytes of every tensor counted once (Q4_K_M
 * mixes Q4_K and Q6_K), and a GGUF file cannot be planned as another quantization. */
TEST(test_plan_gguf_counts_stored_bytes_and_the_folder_shape) {
    char *path = xi_test_data("gguf/llama256-random-q4_k_m.gguf"), *dir = xi_test_data("gguf/llama256-random-hf");
    xi_plan_model g, f;
    char err[256] = "";
    CHECKF(xi_plan_model_load(path, &g, err, sizeof err) == 0, "%s", err);
    CHECKF(xi_plan_model_load(dir, &f, err, sizeof err) == 0, "%s", err);
    CHECK(g.quant == XI_PQ_GGUF && !strcmp(g.gguf_type, "q4_K"));
    CHECK(g.hidden == f.hidden && g.intermediate == f.intermediate && g.layers == f.layers &&
          g.heads == f.heads && g.kv_heads == f.kv_heads && g.head_dim == f.head_dim &&
          g.vocab == f.vocab && g.tied == f.tied);
    xi_plan_params p;
    xi_plan_params_default(&p);
    xi_plan rg, rf;
    const xi_plan_device *cpu = dev("custom");
    xi_plan_device d = *cpu;
    d.mem_bytes = 16 * GIB;
    CHECKF(xi_plan_compute(&g, &d, &p, &rg, err, sizeof err) == 0, "%s", err);
    CHECKF(xi_plan_compute(&f, &d, &p, &rf, err, sizeof err) == 0, "%s", err);
    CHECK_EQ(rg.w.params, rf.w.params);
    /* every tensor's bytes, from the file's own table */
    xi_gguf *gg = xi_gguf_open(path, err, sizeof err);
    CHECK(gg);
    int64_t total = 0;
    for (int i = 0; i < xi_gguf_tensor_count(gg); i++) total += (int64_t)xi_gguf_tensor_at(gg, i)->nbytes;
    xi_gguf_close(gg);
    CHECK_EQ(rg.w.bytes, total);
    /* Q4_K and Q6_K's 4.5-6.5 bits (and the F32 norms) against the folder's 16-bit dtype */
    CHECKF(rg.w.bytes * 5 / 2 < rf.w.bytes, "%lld vs %lld", (long long)rg.w.bytes, (long long)rf.w.bytes);
    p.quant = XI_PQ_INT8;
    CHECK(xi_plan_compute(&g, &d, &p, &rg, err, sizeof err) < 0);
    CHECKF(strstr(err, "GGUF"), "%s", err);
    free(path);
    free(dir);
}
