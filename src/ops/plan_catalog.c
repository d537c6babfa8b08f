/* ops/plan_catalog: the models and devices `xinfer plan` knows by name, and config.json
 * reading for a model folder. Model shapes: reference model-configs.md. Device numbers:
 * reference ascend.md §0–§1; where sources disagree the device carries a range. */
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/base.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/gguf_model.h"
#include "ops/plan.h"
#include "ops/rootfs.h"

/* ---- models ---------------------------------------------------------------------------- */

typedef struct {
    const char *key, *name;
    int hidden, intermediate, layers, heads, kv_heads, head_dim, vocab, tied, bias, max_pos;
    int qk_norm, experts, experts_per_tok, moe_intermediate; /* Qwen3; MoE: every layer */
} model_row;

static const model_row models[] = {
    {"qwen2.5-0.5b", "Qwen2.5-0.5B", 896, 4864, 24, 14, 2, 64, 151936, 1, 1, 32768, 0, 0, 0, 0},
    {"qwen2.5-1.5b", "Qwen2.5-1.5B", 1536, 8960, 28, 12, 2, 128, 151936, 1, 1, 32768, 0, 0, 0, 0},
    {"qwen2.5-3b", "Qwen2.5-3B", 2048, 11008, 36, 16, 2, 128, 151936, 1, 1, 32768, 0, 0, 0, 0},
    {"qwen2.5-7b", "Qwen2.5-7B", 3584, 18944, 28, 28, 4, 128, 152064, 0, 1, 32768, 0, 0, 0, 0},
    {"qwen2.5-14b", "Qwen2.5-14B", 5120, 13824, 48, 40, 8, 128, 152064, 0, 1, 32768, 0, 0, 0, 0},
    {"qwen2.5-32b", "Qwen2.5-32B", 5120, 27648, 64, 40, 8, 128, 152064, 0, 1, 32768, 0, 0, 0, 0},
    {"qwen2.5-72b", "Qwen2.5-72B", 8192, 29568, 80, 64, 8, 128, 152064, 0, 1, 32768, 0, 0, 0, 0},
    {"llama-3.1-8b", "Llama-3.1-8B", 4096, 14336, 32, 32, 8, 128, 128256, 0, 0, 131072, 0, 0, 0, 0},
    {"llama-3.1-70b", "Llama-3.1-70B", 8192, 28672, 80, 64, 8, 128, 128256, 0, 0, 131072, 0, 0, 0, 0},
    {"qwen3-0.6b", "Qwen3-0.6B", 1024, 3072, 28, 16, 8, 128, 151936, 1, 0, 40960, 1, 0, 0, 0},
    {"qwen3-1.7b", "Qwen3-1.7B", 2048, 6144, 28, 16, 8, 128, 151936, 1, 0, 40960, 1, 0, 0, 0},
    {"qwen3-4b", "Qwen3-4B", 2560, 9728, 36, 32, 8, 128, 151936, 1, 0, 40960, 1, 0, 0, 0},
    {"qwen3-8b", "Qwen3-8B", 4096, 12288, 36, 32, 8, 128, 151936, 0, 0, 40960, 1, 0, 0, 0},
    {"qwen3-14b", "Qwen3-14B", 5120, 17408, 40, 40, 8, 128, 151936, 0, 0, 40960, 1, 0, 0, 0},
    {"qwen3-32b", "Qwen3-32B", 5120, 25600, 64, 64, 8, 128, 151936, 0, 0, 40960, 1, 0, 0, 0},
    {"qwen3-30b-a3b", "Qwen3-30B-A3B", 2048, 6144, 48, 32, 4, 128, 151936, 0, 0, 40960, 1, 128, 8, 768},
    {"qwen3-235b-a22b", "Qwen3-235B-A22B", 4096, 12288, 94, 64, 4, 128, 151936, 0, 0, 40960, 1, 128, 8, 1536},
};

int xi_plan_model_count(void) { return (int)XI_ARRAY_LEN(models); }
const char *xi_plan_model_name(int i) { return models[i].name; }

static int strip_suffix_ci(char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    if (a > b && !strcasecmp(s + a - b, suffix)) {
        s[a - b] = 0;
        return 1;
    }
    return 0;
}

int xi_plan_model_catalog(const char *name, xi_plan_model *m, char *err, size_t errlen) {
    char key[96];
    const char *slash = strrchr(name, '/');
    xi_copy_str(key, sizeof key, slash ? slash + 1 : name);
    for (char *p = key; *p; p++) *p = (char)tolower((unsigned char)*p);
    int awq = strip_suffix_ci(key, "-awq");
    strip_suffix_ci(key, "-instruct");
    const char *k = !strncmp(key, "meta-", 5) ? key + 5 : key; /* Meta-Llama-3.1-8B */
    for (size_t i = 0; i < XI_ARRAY_LEN(models); i++) {
        const model_row *r = &models[i];
        if (strcmp(k, r->key)) continue;
        memset(m, 0, sizeof *m);
        xi_copy_str(m->name, sizeof m->name, r->name);
        xi_copy_str(m->source, sizeof m->source, "catalogue");
        m->hidden = r->hidden, m->intermediate = r->intermediate, m->layers = r->layers;
        m->heads = r->heads, m->kv_heads = r->kv_heads, m->head_dim = r->head_dim;
        m->vocab = r->vocab, m->tied = r->tied, m->attention_bias = r->bias;
        m->max_position = r->max_pos;
        m->qk_norm = r->qk_norm, m->experts = r->experts, m->experts_per_tok = r->experts_per_tok;
        m->moe_intermediate = r->moe_intermediate, m->moe_layers = r->experts ? r->layers : 0;
        xi_copy_str(m->dtype, sizeof m->dtype, "bfloat16");
        m->dtype_bytes = 2;
        if (awq) {
            /* The published AWQ checkpoints: 4 bits, group 128, zero points. */
            m->quant = XI_PQ_AWQ;
            xi_copy_str(m->quant_method, sizeof m->quant_method, "awq");
            m->quant_bits = 4, m->quant_group = 128, m->quant_zero_point = 1;
            xi_copy_str(m->name + strlen(m->name), sizeof m->name - strlen(m->name), "-AWQ");
        }
        return 0;
    }
    xi_buf b = {0};
    for (size_t i = 0; i < XI_ARRAY_LEN(models); i++)
        xi_buf_printf(&b, "%s%s", i ? ", " : "", models[i].name);
    xi_errf(err, errlen, "model '%s': not a folder with config.json and not in the catalogue (%s)",
            name, b.data ? b.data : "");
    xi_buf_free(&b);
    return -1;
}

/* ---- config.json ----------------------------------------------------------------------- */

static int get_int(json_t *o, const char *key, int dflt, int *out, const char *path, char *err,
                   size_t errlen) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        if (dflt < 0) return xi_errf(err, errlen, "%s: missing \"%s\"", path, key);
        *out = dflt;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > (1 << 30))
        return xi_errf(err, errlen, "%s: \"%s\" must be a positive integer", path, key);
    *out = (int)json_integer_value(v);
    return 0;
}

static int load_quant(json_t *q, xi_plan_model *m, const char *path, char *err, size_t errlen) {
    const char *method = json_string_value(json_object_get(q, "quant_method"));
    if (!method) return xi_errf(err, errlen, "%s: quantization_config without quant_method", path);
    if (strcasecmp(method, "awq") && strcasecmp(method, "gptq"))
        return xi_errf(err, errlen, "%s: quantization_config.quant_method \"%s\" is not supported by "
                       "the planner (supported: awq, gptq)", path, method);
    xi_copy_str(m->quant_method, sizeof m->quant_method, method);
    for (char *p = m->quant_method; *p; p++) *p = (char)tolower((unsigned char)*p);
    m->quant = XI_PQ_AWQ; /* GPTQ stores the same 4-bit payload, scales and packed zeros */
    if (get_int(q, "bits", 4, &m->quant_bits, path, err, errlen) ||
        get_int(q, "group_size", 128, &m->quant_group, path, err, errlen))
        return -1;
    json_t *zp = json_object_get(q, "zero_point");
    m->quant_zero_point = zp ? json_is_true(zp) : 1;
    if (!strcmp(m->quant_method, "gptq")) m->quant_zero_point = 1; /* qzeros even when sym */
    if (m->quant_bits != 4 && m->quant_bits != 8)
        return xi_errf(err, errlen, "%s: quantization_config.bits %d is not supported (4 or 8)", path,
                       m->quant_bits);
    return 0;
}

/* Qwen3-MoE style experts: num_experts, num_experts_per_tok, moe_intermediate_size, and which
 * layers are sparse (decoder_sparse_step, mlp_only_layers). Absent: dense. */
static int load_moe(json_t *c, xi_plan_model *m, const char *path, char *err, size_t errlen) {
    json_t *ne = json_object_get(c, "num_experts");
    if (!ne || json_is_null(ne) || (json_is_integer(ne) && json_integer_value(ne) == 0)) return 0;
    int step = 1;
    if (get_int(c, "num_experts", -1, &m->experts, path, err, errlen) ||
        get_int(c, "num_experts_per_tok", -1, &m->experts_per_tok, path, err, errlen) ||
        get_int(c, "moe_intermediate_size", -1, &m->moe_intermediate, path, err, errlen) ||
        get_int(c, "decoder_sparse_step", 1, &step, path, err, errlen))
        return -1;
    if (m->experts_per_tok > m->experts)
        return xi_errf(err, errlen, "%s: num_experts_per_tok %d is more than num_experts %d", path,
                       m->experts_per_tok, m->experts);
    json_t *only = json_object_get(c, "mlp_only_layers");
    for (int l = 0; l < m->layers; l++) {
        int dense = (l + 1) % step != 0;
        size_t i;
        json_t *e;
        json_array_foreach(only, i, e) dense |= json_is_integer(e) && json_integer_value(e) == l;
        m->moe_layers += !dense;
    }
    return 0;
}

/* Each field may be up to 2^30, but the planner counts bytes in int64: a shape past 2^50
 * parameters (thousands of times any real model) would overflow it. Every int64 product the
 * planner forms is bounded by this count times a few bytes. */
static int shape_too_large(const xi_plan_model *m, const char *path, char *err, size_t errlen) {
    double qd = (double)m->heads * m->head_dim, kvd = (double)m->kv_heads * m->head_dim;
    double params = (2 * qd + 2 * kvd + 3.0 * m->intermediate +
                     (double)m->experts * (3.0 * m->moe_intermediate + 1)) * m->hidden * m->layers +
                    2.0 * m->vocab * m->hidden;
    if (params > 0x1p50)
        return xi_errf(err, errlen, "%s: %.3g parameters is not a real model shape", path, params);
    return 0;
}

/* A GGUF file: the shape from its metadata (the loader's config path), the bytes from its
 * tensors as stored, by role. */
static int load_gguf(const char *path, xi_plan_model *m, char *err, size_t errlen) {
    xi_gguf *g = xi_gguf_open(path, err, errlen);
    if (!g) return -1;
    xi_config c;
    if (xi_config_load_gguf(&c, g, path, err, errlen)) {
        xi_gguf_close(g);
        return -1;
    }
    *m = (xi_plan_model){.hidden = c.hidden_size, .intermediate = c.intermediate_size,
                         .layers = c.n_layers, .heads = c.n_heads, .kv_heads = c.n_kv_heads,
                         .head_dim = c.head_dim, .vocab = c.vocab_size, .tied = c.tie_word_embeddings,
                         .max_position = c.max_position_embeddings > 0 ? c.max_position_embeddings : 4096,
                         .quant = XI_PQ_GGUF};
    for (int l = 0; l < c.n_layers; l++) {
        const xi_layer_spec *sp = &c.layer[l];
        m->attention_bias |= sp->qkv_bias == XI_BIAS_REQUIRED;
        m->qk_norm |= sp->qk_norm;
        if (sp->mlp == XI_MLP_MOE) {
            m->moe_layers++;
            m->experts = sp->n_experts, m->experts_per_tok = sp->top_k, m->moe_intermediate = sp->ffn;
        }
    }
    /* the activations, KV cache and unquantized parts are f32 unless the file is 16-bit */
    xi_copy_str(m->dtype, sizeof m->dtype, c.torch_dtype == XI_BF16 ? "bfloat16"
                                           : c.torch_dtype == XI_F16 ? "float16" : "float32");
    m->dtype_bytes = c.torch_dtype == XI_F32 ? 4 : 2;
    int64_t by_type[XI_GGML_TYPE_MAX] = {0};
    for (int i = 0; i < xi_gguf_tensor_count(g); i++) {
        const xi_gguf_tensor *t = xi_gguf_tensor_at(g, i);
        const int64_t b = (int64_t)t->nbytes;
        if (!strcmp(t->name, "token_embd.weight") || !strcmp(t->name, "output.weight")) m->gguf_embed += b;
        else if (strstr(t->name, "_exps.")) m->gguf_experts += b;
        else if (t->n_dims >= 2 && !strstr(t->name, "ffn_gate_inp")) m->gguf_linear += b;
        else m->gguf_other += b;
        if (t->n_dims >= 2 && t->type->id < XI_GGML_TYPE_MAX) by_type[t->type->id] += b;
    }
    int best = 0;
    for (int i = 1; i < XI_GGML_TYPE_MAX; i++) if (by_type[i] > by_type[best]) best = i;
    xi_copy_str(m->gguf_type, sizeof m->gguf_type, xi_qtype_get(best) ? xi_qtype_get(best)->name : "?");
    const char *base = strrchr(path, '/');
    xi_copy_str(m->name, sizeof m->name, base ? base + 1 : path);
    xi_copy_str(m->source, sizeof m->source, "gguf");
    xi_config_free(&c);
    xi_gguf_close(g);
    return shape_too_large(m, path, err, errlen);
}

int xi_plan_model_load(const char *dir, xi_plan_model *m, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    if (xi_gguf_is_file(dir)) return load_gguf(dir, m, err, errlen);
    char *path = xi_path_join(dir, "config.json");
    if (!path) return xi_errf(err, errlen, "out of memory");
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    int rc = -1;
    if (!root) {
        xi_errf(err, errlen, "%s: %s", path, xi_file_exists(path) ? je.text : "not found");
        goto out;
    }
    if (!json_is_object(root)) {
        xi_errf(err, errlen, "%s: expected a JSON object", path);
        goto out;
    }
    /* Multimodal configs nest the language model's shape. */
    json_t *c = json_object_get(root, "text_config");
    if (!json_is_object(c)) c = root;
    if (get_int(c, "hidden_size", -1, &m->hidden, path, err, errlen) ||
        get_int(c, "intermediate_size", -1, &m->intermediate, path, err, errlen) ||
        get_int(c, "num_hidden_layers", -1, &m->layers, path, err, errlen) ||
        get_int(c, "num_attention_heads", -1, &m->heads, path, err, errlen) ||
        get_int(c, "num_key_value_heads", m->heads, &m->kv_heads, path, err, errlen) ||
        get_int(c, "vocab_size", -1, &m->vocab, path, err, errlen) ||
        get_int(c, "max_position_embeddings", 4096, &m->max_position, path, err, errlen))
        goto out;
    if (get_int(c, "head_dim", m->hidden / m->heads, &m->head_dim, path, err, errlen)) goto out;
    /* The default head_dim is 0 when hidden_size < num_attention_heads, and the planner
     * divides by per-token KV bytes. */
    if (m->head_dim <= 0) {
        xi_errf(err, errlen, "%s: hidden_size %d is smaller than num_attention_heads %d and no "
                "head_dim is given", path, m->hidden, m->heads);
        goto out;
    }
    if (load_moe(c, m, path, err, errlen) || shape_too_large(m, path, err, errlen)) goto out;
    if (m->heads % m->kv_heads) {
        xi_errf(err, errlen, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d",
                path, m->heads, m->kv_heads);
        goto out;
    }
    m->tied = json_is_true(json_object_get(c, "tie_word_embeddings")) ||
              json_is_true(json_object_get(root, "tie_word_embeddings"));
    const char *arch = json_string_value(json_array_get(json_object_get(root, "architectures"), 0));
    m->attention_bias = json_is_true(json_object_get(c, "attention_bias")) ||
                        (arch && !strncmp(arch, "Qwen2", 5));
    m->qk_norm = arch && !strncmp(arch, "Qwen3", 5);
    const char *dt = json_string_value(json_object_get(c, "torch_dtype"));
    if (!dt) dt = json_string_value(json_object_get(c, "dtype"));
    xi_copy_str(m->dtype, sizeof m->dtype, dt ? dt : "bfloat16");
    m->dtype_bytes = !strcmp(m->dtype, "float32") ? 4 : 2;
    json_t *q = json_object_get(root, "quantization_config");
    if (json_is_object(q) && load_quant(q, m, path, err, errlen)) goto out;
    char name[512];
    xi_copy_str(name, sizeof name, dir);
    for (size_t n = strlen(name); n > 1 && name[n - 1] == '/';) name[--n] = 0; /* "models/x/" */
    const char *base = strrchr(name, '/');
    xi_copy_str(m->name, sizeof m->name, base ? base + 1 : name);
    xi_copy_str(m->source, sizeof m->source, "folder");
    rc = 0;
out:
    json_decref(root);
    free(path);
    return rc;
}

/* ---- devices --------------------------------------------------------------------------- */

#define MIB (1024.0 * 1024.0)
#define GBS 1e9

static const xi_plan_device devices[] = {
    {"310p-pro", "Atlas 300I Pro (Ascend 310P3, 24 GB)", 0, (int64_t)(21527 * MIB), 1, 8,
     204 * GBS, 204 * GBS, 70, 70, 0, 0,
     "21527 MB visible (HAMi); 204 GB/s and 70 TFLOPS fp16 are unverified (card data of the Duo)"},
    {"300i-duo", "Atlas 300I Duo (2 x Ascend 310P3, 2 x 48 GB)", 0, (int64_t)(43693 * MIB), 2, 8,
     204 * GBS, 204 * GBS, 70, 70, 0, 0,
     "per chip: 43693-44280 MB visible (smaller used), 408 GB/s per card = 204 per chip; "
     "140 TFLOPS fp16 per card is unverified"},
    {"910b1", "Ascend 910B1 (Atlas 800T A2, 64 GB)", 0, (int64_t)(65536 * MIB), 1, 8,
     1600 * GBS, 1800 * GBS, 400, 400, 1, 1, "HBM bandwidth: no datasheet, sources give 1.6-1.8 TB/s"},
    {"910b2", "Ascend 910B2 (Atlas 800T A2, 64 GB)", 0, (int64_t)(65536 * MIB), 1, 8,
     1500 * GBS, 1800 * GBS, 354, 376, 1, 1, "sources disagree: 1.5-1.8 TB/s, 354-376 TFLOPS"},
    {"910b3", "Ascend 910B3 (Atlas 800T A2, 64 GB)", 0, (int64_t)(65536 * MIB), 1, 8,
     1200 * GBS, 1600 * GBS, 295, 313, 1, 1, "sources disagree: 1.2-1.6 TB/s, 295-313 TFLOPS"},
    {"910b4", "Ascend 910B4 (32 GB)", 0, (int64_t)(32768 * MIB), 1, 8, 800 * GBS, 1200 * GBS, 270, 280,
     1, 1, "sources disagree: 0.8-1.2 TB/s, 270-280 TFLOPS"},
    {"910b4-64", "Ascend 910B4-1 (64 GB)", 0, (int64_t)(65536 * MIB), 1, 8, 800 * GBS, 1200 * GBS, 270,
     280, 1, 1, "64 GB variant of the 910B4; bandwidth assumed as the 32 GB part"},
    {"800i-a2", "Atlas 800I A2 (8 x Ascend 910B4, 32 GB each)", 0, (int64_t)(32768 * MIB), 8, 8,
     800 * GBS, 1200 * GBS, 270, 280, 1, 1, "MindStudio spec map: Atlas800I-A2-32G-280T"},
    {"800i-a2-64g", "Atlas 800I A2 (8 x Ascend 910B4-1, 64 GB each)", 0, (int64_t)(65536 * MIB), 8, 8,
     800 * GBS, 1200 * GBS, 270, 280, 1, 1, "MindStudio spec map: Atlas800I-A2-64G-280T"},
    {"kunpeng920", "Kunpeng 920 CPU (host DDR4, --memory-gb)", 1, 0, 1, 1, 64 * GBS, 115 * GBS, 0, 0, 0,
     1, "measured STREAM: ~64 GB/s on one NUMA die, ~110-115 GB/s interleaved; 187.7 GB/s "
     "theoretical per socket"},
    {"custom", "custom device (--memory-gb, --bandwidth-gbs)", 1, 0, 1, 1, 0, 0, 0, 0, 1, 1,
     "memory and bandwidth as given"},
};

int xi_plan_device_count(void) { return (int)XI_ARRAY_LEN(devices); }
const xi_plan_device *xi_plan_device_at(int i) { return &devices[i]; }

const xi_plan_device *xi_plan_device_find(const char *key, char *err, size_t errlen) {
    for (size_t i = 0; i < XI_ARRAY_LEN(devices); i++)
        if (!strcasecmp(key, devices[i].key)) return &devices[i];
    xi_buf b = {0};
    for (size_t i = 0; i < XI_ARRAY_LEN(devices); i++)
        xi_buf_printf(&b, "%s%s", i ? ", " : "", devices[i].key);
    xi_errf(err, errlen, "--device %s: unknown device (known: %s)", key, b.data ? b.data : "");
    xi_buf_free(&b);
    return NULL;
}
