/* genmodel: write a Hugging Face model folder with real shapes and deterministic random weights.
 *
 *   genmodel --preset qwen2.5-0.5b|qwen2.5-1.5b|qwen2.5-3b|qwen2.5-7b|llama-3.1-8b|qwen3-0.6b|
 *                     qwen3-8b|qwen3-30b-a3b|tiny|tiny-moe|tiny-llama
 *            [--dtype f32|f16|bf16] [--awq [--group-size 128]] [--layers N] [--seed S]
 *            [--tokenizer DIR] [--max-shard-mb MB] OUT_DIR
 *   genmodel --preset NAME --gguf f32|f16|bf16|q8_0 [--layers N] [--seed S] [--tokenizer DIR] OUT.gguf
 *
 * Benchmarks and memory plans need models of real size that nobody has to download. Every
 * value is a pure function of (seed, tensor name, element index), so the same float weights
 * come out whatever the dtype, and an --awq folder is the round-to-nearest quantization of the
 * f32 folder made with the same seed. Tensors are streamed to disk; at most one linear layer
 * is held in memory (for AWQ, whose packed layout is the transpose of the float one).
 *
 * --gguf writes the same model as one GGUF file for llama.cpp and xinfer: what llama.cpp's
 * converter makes of the folder of that dtype (f32 for q8_0): llama.cpp's tensor names and
 * hparams keys, 1-D tensors F32 (rounded through the folder's dtype), Llama's q/k rows
 * interleaved per head, Llama 3's RoPE scaling as rope_freqs, the tokenizer as tokenizer.ggml.*
 * padded to the embedding rows. Q8_0 is xinfer's own quantization (as llama-quantize's). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "base/pool.h"
#include "model/arch.h"
#include "model/gguf.h"
#include "model/safetensors.h"
#include "tensor/dtype.h"
#include "tokenizer/tokenizer_gguf.h"

/* ---------------------------------------------------------------- presets */

typedef struct preset {
    const char *name;
    const char *arch;       /* architectures[0] */
    int qwen;               /* Qwen tokenizer and generation defaults: 2 (Qwen2.5), 3 (Qwen3) */
    int hidden, inter, layers, heads, kv_heads, head_dim, vocab, tied;
    double rope_theta;
    int max_pos;
    double rms_eps;
    int bias, qk_norm;      /* q/k/v bias (Qwen2), per-head q/k RMSNorm (Qwen3) */
    int experts, top_k, moe_inter; /* Qwen3-MoE: every layer a mixture (0: dense) */
    const char *tokenizer;  /* the default tokenizer folder in the shared data (NULL: none); Qwen3's
                               is Qwen2.5's plus <think>, </think> and the tool-response tokens */
    int bos, eos[3];        /* Llama's token ids (eos[k] 0: none); Qwen's follow from qwen */
    struct { double factor, low, high; int orig; } llama3; /* rope_scaling llama3 (factor 0: none) */
} preset;

/* Shapes from the public config.json files (see shared/reference/model-configs.md). */
static const preset presets[] = {
    {"qwen2.5-0.5b", "Qwen2ForCausalLM", 2, 896, 4864, 24, 14, 2, 64, 151936, 1, 1e6, 32768, 1e-6, 1, 0, 0, 0, 0,
     "tokenizers/qwen2.5", 0, {0}, {0, 0, 0, 0}},
    {"qwen2.5-1.5b", "Qwen2ForCausalLM", 2, 1536, 8960, 28, 12, 2, 128, 151936, 1, 1e6, 32768, 1e-6, 1, 0, 0, 0, 0,
     "tokenizers/qwen2.5", 0, {0}, {0, 0, 0, 0}},
    {"qwen2.5-3b", "Qwen2ForCausalLM", 2, 2048, 11008, 36, 16, 2, 128, 151936, 1, 1e6, 32768, 1e-6, 1, 0, 0, 0, 0,
     "tokenizers/qwen2.5", 0, {0}, {0, 0, 0, 0}},
    {"qwen2.5-7b", "Qwen2ForCausalLM", 2, 3584, 18944, 28, 28, 4, 128, 152064, 0, 1e6, 32768, 1e-6, 1, 0, 0, 0, 0,
     "tokenizers/qwen2.5", 0, {0}, {0, 0, 0, 0}},
    {"llama-3.1-8b", "LlamaForCausalLM", 0, 4096, 14336, 32, 32, 8, 128, 128256, 0, 5e5, 131072, 1e-5, 0, 0, 0, 0, 0,
     NULL, 128000, {128001, 128008, 128009}, {8.0, 1.0, 4.0, 8192}},
    {"qwen3-0.6b", "Qwen3ForCausalLM", 3, 1024, 3072, 28, 16, 8, 128, 151936, 1, 1e6, 40960, 1e-6, 0, 1, 0, 0, 0,
     "models/qwen3-tiny-random", 0, {0}, {0, 0, 0, 0}},
    {"qwen3-8b", "Qwen3ForCausalLM", 3, 4096, 12288, 36, 32, 8, 128, 151936, 0, 1e6, 40960, 1e-6, 0, 1, 0, 0, 0,
     "models/qwen3-tiny-random", 0, {0}, {0, 0, 0, 0}},
    {"qwen3-30b-a3b", "Qwen3MoeForCausalLM", 3, 2048, 6144, 48, 32, 4, 128, 151936, 0, 1e6, 40960, 1e-6, 0, 1, 128, 8, 768,
     "models/qwen3-tiny-random", 0, {0}, {0, 0, 0, 0}},
    /* Small enough for unit tests; the real vocabulary so the Qwen tokenizer fits. */
    {"tiny", "Qwen2ForCausalLM", 2, 64, 128, 2, 4, 2, 16, 151936, 1, 1e6, 4096, 1e-6, 1, 0, 0, 0, 0,
     "tokenizers/qwen2.5", 0, {0}, {0, 0, 0, 0}},
    {"tiny-moe", "Qwen3MoeForCausalLM", 3, 64, 128, 2, 4, 2, 32, 151936, 1, 1e6, 4096, 1e-6, 0, 1, 8, 2, 32,
     "models/qwen3-tiny-random", 0, {0}, {0, 0, 0, 0}},
    /* Llama 3 small enough for unit tests, with stories260K's 512-token vocabulary; a short
     * original context so that llama3 scaling moves most of its 8 rotary frequencies. */
    {"tiny-llama", "LlamaForCausalLM", 0, 64, 128, 2, 4, 2, 16, 512, 0, 1e4, 512, 1e-5, 0, 0, 0, 0, 0,
     "gguf/llama256-random-hf", 1, {2}, {8.0, 1.0, 4.0, 64}},
};

typedef struct opts {
    const preset *p;
    int layers;
    xi_dtype dtype;
    int awq, group;
    uint64_t seed;
    const char *tokenizer; /* NULL: the preset's default */
    uint64_t max_shard;    /* bytes */
    int gguf;              /* --gguf: a ggml type id; -1 for a folder */
    const char *out;
} opts;

/* ---------------------------------------------------------------- deterministic values */

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Fill out[0..n) with mean + std * z for elements [start, start + n) of the tensor whose
 * stream is `key`. splitmix64 is a counter-based generator, so element i is simply draw number i
 * and any range can be made on its own (AWQ generates row by row). z is the Irwin-Hall sum of
 * four 16-bit uniforms rescaled to unit variance: normal enough for weights, one draw per value. */
static void gen_values(uint64_t key, uint64_t start, size_t n, float mean, float std, float *out) {
    const float k = 1.7320508f / 65536.0f; /* sqrt(12 / 4) per unit of the 16-bit sum */
    uint64_t s = key + start * 0x9e3779b97f4a7c15ull;
    for (size_t j = 0; j < n; j++) {
        uint64_t r = splitmix64(&s);
        float sum = (float)((r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48));
        out[j] = mean + std * (sum - 2.0f * 65535.0f) * k;
    }
}

static uint64_t tensor_key(uint64_t seed, const char *name) {
    uint64_t s = seed ^ xi_hash64(name, strlen(name));
    return splitmix64(&s);
}

/* ---------------------------------------------------------------- tensor plan */

enum { U_MAT, U_NORM, U_BIAS, U_AWQ };

/* One generated weight: a float tensor of [rows, cols] (cols 0 for vectors), written as one
 * safetensors entry, or as AWQ's qweight/qzeros/scales triple. */
typedef struct unit {
    char name[112];   /* full float name, e.g. model.layers.0.mlp.up_proj.weight */
    int kind;
    int64_t rows, cols;
    int shard;
} unit;

typedef struct plan {
    unit *u;          /* [n] owned */
    int n, cap;
} plan;

static void plan_add(plan *pl, int kind, int64_t rows, int64_t cols, const char *name) {
    if (pl->n == pl->cap) {
        int cap = pl->cap ? pl->cap * 2 : 64;
        unit *u = realloc(pl->u, (size_t)cap * sizeof *u);
        if (!u) return; /* caught by plan_build's count check */
        pl->u = u;
        pl->cap = cap;
    }
    unit *u = &pl->u[pl->n++];
    memset(u, 0, sizeof *u);
    snprintf(u->name, sizeof u->name, "%s", name);
    u->kind = kind;
    u->rows = rows;
    u->cols = cols;
}

static void plan_layer(plan *pl, int kind, int64_t rows, int64_t cols, int layer, const char *what) {
    char name[112];
    snprintf(name, sizeof name, "model.layers.%d.%s", layer, what);
    plan_add(pl, kind, rows, cols, name);
}

static int plan_build(plan *pl, const opts *o) {
    const preset *p = o->p;
    int64_t h = p->hidden, q = (int64_t)p->heads * p->head_dim, kv = (int64_t)p->kv_heads * p->head_dim;
    int lin = o->awq ? U_AWQ : U_MAT, expect = 2 + !p->tied;
    char what[64];
    plan_add(pl, U_MAT, p->vocab, h, "model.embed_tokens.weight");
    for (int l = 0; l < o->layers; l++) {
        plan_layer(pl, U_NORM, h, 0, l, "input_layernorm.weight");
        plan_layer(pl, lin, q, h, l, "self_attn.q_proj.weight");
        plan_layer(pl, lin, kv, h, l, "self_attn.k_proj.weight");
        plan_layer(pl, lin, kv, h, l, "self_attn.v_proj.weight");
        if (p->bias) {
            plan_layer(pl, U_BIAS, q, 0, l, "self_attn.q_proj.bias");
            plan_layer(pl, U_BIAS, kv, 0, l, "self_attn.k_proj.bias");
            plan_layer(pl, U_BIAS, kv, 0, l, "self_attn.v_proj.bias");
        }
        if (p->qk_norm) {
            plan_layer(pl, U_NORM, p->head_dim, 0, l, "self_attn.q_norm.weight");
            plan_layer(pl, U_NORM, p->head_dim, 0, l, "self_attn.k_norm.weight");
        }
        plan_layer(pl, lin, h, q, l, "self_attn.o_proj.weight");
        plan_layer(pl, U_NORM, h, 0, l, "post_attention_layernorm.weight");
        if (p->experts) {
            /* AutoAWQ quantizes the experts and keeps the router in 16 bits */
            plan_layer(pl, U_MAT, p->experts, h, l, "mlp.gate.weight");
            for (int e = 0; e < p->experts; e++) {
                snprintf(what, sizeof what, "mlp.experts.%d.gate_proj.weight", e);
                plan_layer(pl, lin, p->moe_inter, h, l, what);
                snprintf(what, sizeof what, "mlp.experts.%d.up_proj.weight", e);
                plan_layer(pl, lin, p->moe_inter, h, l, what);
                snprintf(what, sizeof what, "mlp.experts.%d.down_proj.weight", e);
                plan_layer(pl, lin, h, p->moe_inter, l, what);
            }
        } else {
            plan_layer(pl, lin, p->inter, h, l, "mlp.gate_proj.weight");
            plan_layer(pl, lin, p->inter, h, l, "mlp.up_proj.weight");
            plan_layer(pl, lin, h, p->inter, l, "mlp.down_proj.weight");
        }
        expect += 6 + 3 * p->bias + 2 * p->qk_norm + (p->experts ? 1 + 3 * p->experts : 3);
    }
    plan_add(pl, U_NORM, h, 0, "model.norm.weight");
    if (!p->tied) plan_add(pl, U_MAT, p->vocab, h, "lm_head.weight");
    return pl->n == expect ? 0 : -1;
}

/* The safetensors entries of a unit; returns how many (1 or 3). Names point into `names`. */
static int unit_specs(const unit *u, const opts *o, xi_st_spec *sp, char names[3][128]) {
    if (u->kind != U_AWQ) {
        sp[0] = (xi_st_spec){u->name, o->dtype, u->cols ? 2 : 1, {u->rows, u->cols}};
        return 1;
    }
    /* AutoAWQ GEMM: x [.., in] times W^T, so the packed tensors are indexed [in, out]. */
    size_t base = strlen(u->name) - strlen(".weight");
    const char *suffix[3] = {"qweight", "qzeros", "scales"};
    for (int i = 0; i < 3; i++) snprintf(names[i], 128, "%.*s.%s", (int)base, u->name, suffix[i]);
    int64_t in = u->cols, out = u->rows, groups = in / o->group;
    sp[0] = (xi_st_spec){names[0], XI_I32, 2, {in, out / 8}};
    sp[1] = (xi_st_spec){names[1], XI_I32, 2, {groups, out / 8}};
    sp[2] = (xi_st_spec){names[2], XI_F16, 2, {groups, out}};
    return 3;
}

static uint64_t unit_bytes(const unit *u, const opts *o) {
    xi_st_spec sp[3];
    char names[3][128];
    int n = unit_specs(u, o, sp, names);
    uint64_t b = 0;
    for (int i = 0; i < n; i++) b += xi_st_spec_nbytes(&sp[i]);
    return b;
}

/* ---------------------------------------------------------------- writing tensors */

#define CHUNK (1 << 20) /* elements generated per write */

typedef struct scratch {
    float *f;          /* [CHUNK] generated values */
    void *conv;        /* [CHUNK * 4] bytes in the target dtype */
    xi_pool *pool;     /* generation is compute-bound once the page cache absorbs the writes */
} scratch;

typedef struct plain_job {
    uint64_t key, at;  /* tensor stream, first element of this chunk */
    size_t n;
    float mean, std;
    xi_dtype dtype;
    float *f;
    uint8_t *conv;
} plain_job;

static void plain_worker(void *ctx, int ith, int nth) {
    plain_job *j = ctx;
    long b, e;
    xi_split_range((long)j->n, ith, nth, 256, &b, &e);
    if (b >= e) return;
    gen_values(j->key, j->at + (uint64_t)b, (size_t)(e - b), j->mean, j->std, j->f + b);
    xi_from_f32(j->conv + (size_t)b * xi_dtype_size(j->dtype), j->dtype, j->f + b, (size_t)(e - b));
}

/* Norm weights around 1, biases around 0, matrices N(0, 0.02). */
static void unit_dist(const unit *u, float *mean, float *std) {
    *mean = u->kind == U_NORM ? 1.0f : 0.0f;
    *std = u->kind == U_MAT || u->kind == U_AWQ ? 0.02f : 0.01f;
}

static int write_plain(FILE *f, const unit *u, const opts *o, scratch *sc) {
    uint64_t n = (uint64_t)u->rows * (uint64_t)(u->cols ? u->cols : 1);
    plain_job j = {.key = tensor_key(o->seed, u->name), .dtype = o->dtype, .f = sc->f, .conv = sc->conv};
    unit_dist(u, &j.mean, &j.std);
    size_t es = xi_dtype_size(o->dtype);
    for (j.at = 0; j.at < n; j.at += CHUNK) {
        j.n = (size_t)XI_MIN((uint64_t)CHUNK, n - j.at);
        xi_pool_run(sc->pool, plain_worker, &j);
        if (fwrite(sc->conv, es, j.n, f) != j.n) return -1;
    }
    return 0;
}

/* Round-to-nearest 4-bit quantization with a zero point per group of `group` inputs, packed the
 * way AutoAWQ's GEMM layer stores it: nibble j of a 32-bit word holds output column
 * 8 * word + awq_order[j]. The fp16-rounded scale is the one used to quantize, as AutoAWQ does. */
static const int awq_order[8] = {0, 2, 4, 6, 1, 3, 5, 7};

typedef struct awq_job {
    uint64_t key;
    int64_t out, in, G;
    uint8_t *q;        /* [out, in] 4-bit values */
    uint8_t *zero;     /* [in / G, out] */
    uint16_t *scale;   /* [in / G, out] fp16 */
    int failed;
} awq_job;

/* Round half to even for |x| < 2^22 without a libm call (baseline x86-64 has no roundps), so
 * the loop below vectorizes; same result as nearbyintf in the default rounding mode. */
static inline float round_even(float x) {
    const float magic = 12582912.0f; /* 1.5 * 2^23 */
    return (x + magic) - magic;
}

/* fminf/fmaxf are libm calls here (NaN rules); the inputs are finite, so plain compares do. */
static inline float min_f(float a, float b) { return a < b ? a : b; }
static inline float max_f(float a, float b) { return a > b ? a : b; }

static void awq_worker(void *ctx, int ith, int nth) {
    awq_job *j = ctx;
    long b, e;
    xi_split_range((long)j->out, ith, nth, 1, &b, &e);
    if (b >= e) return;
    float *w = malloc((size_t)j->in * sizeof *w); /* [in] one float row */
    if (!w) {
        j->failed = 1;
        return;
    }
    int64_t in = j->in, out = j->out, G = j->G;
    for (int64_t r = b; r < e; r++) {
        gen_values(j->key, (uint64_t)(r * in), (size_t)in, 0.0f, 0.02f, w);
        for (int64_t g = 0; g < in / G; g++) {
            const float *x = w + g * G;
            float lo = x[0], hi = x[0];
            for (int64_t k = 1; k < G; k++) lo = min_f(lo, x[k]), hi = max_f(hi, x[k]);
            uint16_t sh = xi_f32_to_f16(max_f(hi - lo, 1e-5f) / 15.0f);
            float s = xi_f16_to_f32(sh);
            float z = min_f(max_f(-round_even(lo / s), 0.0f), 15.0f);
            j->scale[g * out + r] = sh;
            j->zero[g * out + r] = (uint8_t)z;
            uint8_t *qr = j->q + r * in + g * G;
            for (int64_t k = 0; k < G; k++) qr[k] = (uint8_t)min_f(max_f(round_even(x[k] / s) + z, 0.0f), 15.0f);
        }
    }
    free(w);
}

/* Pack src [out, rows] 4-bit values into [rows, out / 8] words and write them. Transposing
 * in tiles of 64 source columns keeps the reads on whole cache lines. */
#define PACK_TILE 64
static int write_packed(FILE *f, const uint8_t *src, int64_t out, int64_t rows, uint32_t *buf) {
    int64_t words = out / 8;
    for (int64_t i0 = 0; i0 < rows; i0 += PACK_TILE) {
        int64_t m = XI_MIN((int64_t)PACK_TILE, rows - i0);
        memset(buf, 0, (size_t)(m * words) * sizeof *buf);
        for (int64_t c = 0; c < words; c++)
            for (int j = 0; j < 8; j++) {
                const uint8_t *s = src + (8 * c + awq_order[j]) * rows + i0;
                for (int64_t ii = 0; ii < m; ii++) buf[ii * words + c] |= (uint32_t)s[ii] << (4 * j);
            }
        if (fwrite(buf, 4, (size_t)(m * words), f) != (size_t)(m * words)) return -1;
    }
    return 0;
}

static int write_awq(FILE *f, const unit *u, const opts *o, scratch *sc) {
    int64_t out = u->rows, in = u->cols, groups = in / o->group;
    awq_job j = {.key = tensor_key(o->seed, u->name), .out = out, .in = in, .G = o->group,
                 .q = malloc((size_t)(out * in)), .zero = malloc((size_t)(groups * out)),
                 .scale = malloc((size_t)(groups * out) * 2)};
    uint8_t *zt = malloc((size_t)(groups * out));                    /* [out, groups] */
    uint32_t *buf = malloc((size_t)(PACK_TILE * (out / 8)) * 4);     /* [PACK_TILE, out / 8] */
    int rc = -1;
    if (!j.q || !j.zero || !j.scale || !zt || !buf) goto done;
    xi_pool_run(sc->pool, awq_worker, &j);
    if (j.failed) goto done;
    for (int64_t g = 0; g < groups; g++)
        for (int64_t r = 0; r < out; r++) zt[r * groups + g] = j.zero[g * out + r];
    if (write_packed(f, j.q, out, in, buf) || write_packed(f, zt, out, groups, buf)) goto done;
    rc = fwrite(j.scale, 2, (size_t)(groups * out), f) == (size_t)(groups * out) ? 0 : -1;
done:
    free(j.q);
    free(j.zero);
    free(j.scale);
    free(zt);
    free(buf);
    return rc;
}

static char *shard_name(int i, int n) {
    char buf[64];
    if (n == 1) snprintf(buf, sizeof buf, "model.safetensors");
    else snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", i + 1, n);
    return xi_strdup(buf);
}

/* Write shard `s`: its header from every unit assigned to it, then the units' data in order. */
static int write_shard(const plan *pl, const opts *o, int s, int n_shards, scratch *sc, json_t *wmap) {
    char *file = shard_name(s, n_shards);
    char *path = xi_path_join(o->out, file);
    int n_specs = 0;
    xi_st_spec *specs = xi_calloc((size_t)pl->n * 3, sizeof *specs);
    char (*names)[3][128] = xi_calloc((size_t)pl->n, sizeof *names);
    FILE *f = path ? fopen(path, "wb") : NULL;
    int rc = -1;
    char err[256];
    if (!f || !specs || !names) {
        fprintf(stderr, "genmodel: %s: %s\n", path ? path : file, strerror(errno));
        goto done;
    }
    for (int i = 0; i < pl->n; i++) {
        if (pl->u[i].shard != s) continue;
        int k = unit_specs(&pl->u[i], o, specs + n_specs, names[i]);
        for (int j = 0; j < k; j++) json_object_set_new(wmap, specs[n_specs + j].name, json_string(file));
        n_specs += k;
    }
    const char *meta[] = {"format", "pt"};
    if (xi_st_write_header(f, specs, n_specs, meta, 1, err, sizeof err) < 0) {
        fprintf(stderr, "genmodel: %s: %s\n", path, err);
        goto done;
    }
    for (int i = 0; i < pl->n; i++) {
        const unit *u = &pl->u[i];
        if (u->shard != s) continue;
        if ((u->kind == U_AWQ ? write_awq(f, u, o, sc) : write_plain(f, u, o, sc))) {
            fprintf(stderr, "genmodel: %s: tensor %s: write failed: %s\n", path, u->name, strerror(errno));
            goto done;
        }
    }
    rc = 0;
done:
    if (f && fclose(f) && !rc) {
        fprintf(stderr, "genmodel: %s: %s\n", path, strerror(errno));
        rc = -1;
    }
    free(specs);
    free(names);
    free(path);
    free(file);
    return rc;
}

/* ---------------------------------------------------------------- GGUF */

/* One GGUF tensor: plan units first, first + stride, ... (count of them) stacked (a 3-D tensor
 * of experts), or the computed rope_freqs (first -1). Its rows are the units' rows, in Llama's interleaved q/k order
 * when perm_heads > 0. */
typedef struct gg_tensor {
    char name[112];
    int type, n_dims, perm_heads;
    int64_t ne[3];
    int first, count, stride;
    xi_dtype round; /* 1-D: values rounded through the folder's dtype, stored F32 */
} gg_tensor;

/* llama.cpp's general.file_type of a model whose matrices are of ggml type t. */
static uint32_t gg_file_type(int t) {
    return t == XI_GGML_F32 ? 0 : t == XI_GGML_F16 ? 1 : t == XI_GGML_Q8_0 ? 7 : 32;
}

/* Llama 3's frequency-dependent RoPE scaling as llama.cpp's rope_freqs factors (the preset's
 * rope_scaling that write_configs puts in config.json). */
static void llama3_rope_factors(const preset *p, float *out) {
    const double factor = p->llama3.factor, lo = p->llama3.low, hi = p->llama3.high,
                 old = p->llama3.orig, pi = 3.14159265358979323846;
    for (int i = 0; i < p->head_dim / 2; i++) {
        double freq = 1.0 / pow(p->rope_theta, 2.0 * i / p->head_dim), wavelen = 2 * pi / freq;
        if (wavelen < old / hi) out[i] = 1.0f;
        else if (wavelen > old / lo) out[i] = (float)factor;
        else {
            double smooth = (old / wavelen - lo) / (hi - lo);
            out[i] = (float)(1.0 / ((1 - smooth) / factor + smooth));
        }
    }
}

/* The GGUF name of a plan unit ("model.layers.3.mlp.up_proj.weight" -> "blk.3.ffn_up.weight")
 * through the family's naming table; its role and expert index. -1 when it has none. */
static int gg_name(const xi_arch_family *fam, const char *hf, char *out, size_t n, int *role,
                   int *expert) {
    const char *l = strstr(hf, "layers."), *e = strstr(hf, "experts."), *suffix = strrchr(hf, '.');
    int layer = l ? atoi(l + 7) : 0;
    *expert = e ? atoi(e + 8) : 0;
    for (int r = 0; r < XI_T_COUNT; r++) {
        char buf[128];
        if (xi_arch_tensor_name(fam, XI_NAMES_HF, (xi_tensor_role)r, layer, *expert, buf, sizeof buf) ||
            strlen(buf) != (size_t)(suffix - hf) || strncmp(buf, hf, strlen(buf)))
            continue;
        *role = r;
        if (xi_arch_tensor_name(fam, XI_NAMES_GGUF, (xi_tensor_role)r, layer, *expert, out, n)) return -1;
        size_t len = strlen(out);
        return snprintf(out + len, n - len, "%s", suffix) >= (int)(n - len) ? -1 : 0;
    }
    return -1;
}

/* The GGUF tensors of the plan; -1 with the unit named on stderr. */
static int gg_plan(const plan *pl, const opts *o, gg_tensor **out, int *n_out) {
    const preset *p = o->p;
    const xi_arch_family *fam = xi_arch_find(p->arch);
    gg_tensor *t = xi_calloc((size_t)pl->n + 1, sizeof *t);
    int n = 0;
    if (!fam || !t) {
        free(t);
        fprintf(stderr, "genmodel: %s: no GGUF naming\n", p->arch);
        return -1;
    }
    for (int i = 0; i < pl->n; i++) {
        const unit *u = &pl->u[i];
        char name[112];
        int role, expert;
        if (gg_name(fam, u->name, name, sizeof name, &role, &expert)) {
            fprintf(stderr, "genmodel: %s: no GGUF name\n", u->name);
            free(t);
            return -1;
        }
        if (expert > 0) { /* experts 1.. stack onto expert 0's tensor, of the same name */
            gg_tensor *g = t + n - 1;
            while (g > t && strcmp(g->name, name)) g--;
            if (g->count == 1) g->stride = i - g->first;
            g->count++;
            g->ne[2]++;
            continue;
        }
        gg_tensor *g = &t[n++];
        snprintf(g->name, sizeof g->name, "%s", name);
        g->first = i;
        g->count = g->stride = 1;
        g->ne[0] = u->cols ? u->cols : u->rows;
        g->ne[1] = u->cols ? u->rows : 1;
        g->ne[2] = 1;
        g->n_dims = u->cols ? 2 : 1;
        if (role == XI_T_EXP_GATE || role == XI_T_EXP_UP || role == XI_T_EXP_DOWN) g->n_dims = 3;
        g->type = u->cols ? o->gguf : XI_GGML_F32;
        g->round = o->gguf == XI_GGML_F16 ? XI_F16 : o->gguf == XI_GGML_BF16 ? XI_BF16 : XI_F32;
        /* convert_hf_to_gguf interleaves Llama's q/k rows for ggml's RoPE; Qwen keeps them */
        if (!p->qwen && (role == XI_T_ATTN_Q || role == XI_T_ATTN_K))
            g->perm_heads = role == XI_T_ATTN_Q ? p->heads : p->kv_heads;
    }
    if (p->llama3.factor > 0) {
        gg_tensor *g = &t[n++];
        *g = (gg_tensor){.type = XI_GGML_F32, .n_dims = 1, .ne = {p->head_dim / 2, 1, 1}, .first = -1};
        snprintf(g->name, sizeof g->name, "rope_freqs.weight");
    }
    *out = t;
    *n_out = n;
    return 0;
}

typedef struct gg_job {
    const gg_tensor *t;
    const plan *pl;
    uint64_t seed;
    int64_t row0, n_rows, rows_per_unit; /* rows of this chunk; a unit's rows */
    size_t rb;                           /* bytes per stored row */
    float *f;
    uint8_t *conv;
} gg_job;

static void gg_worker(void *ctx, int ith, int nth) {
    gg_job *j = ctx;
    const gg_tensor *t = j->t;
    const int64_t cols = t->ne[0];
    long b, e;
    xi_split_range((long)j->n_rows, ith, nth, 1, &b, &e);
    for (long k = b; k < e; k++) {
        int64_t r = j->row0 + k, src = r % j->rows_per_unit;
        const unit *u = &j->pl->u[t->first + r / j->rows_per_unit * t->stride];
        if (t->perm_heads) { /* stored row (head, 2 * i + half) holds rotate-half row (head, half * hd / 2 + i) */
            int64_t hd = j->rows_per_unit / t->perm_heads, p = src % hd;
            src = src - p + (p % 2) * (hd / 2) + p / 2;
        }
        float mean, std, *x = j->f + k * cols;
        uint8_t *dst = j->conv + (size_t)k * j->rb;
        unit_dist(u, &mean, &std);
        gen_values(tensor_key(j->seed, u->name), (uint64_t)(src * cols), (size_t)cols, mean, std, x);
        if (t->type == XI_GGML_Q8_0) {
            xi_qtype_quantize_q8_0_weights(x, dst, cols);
        } else if (t->type != XI_GGML_F32) {
            xi_from_f32(dst, t->type == XI_GGML_F16 ? XI_F16 : XI_BF16, x, (size_t)cols);
        } else {
            if (t->round != XI_F32) { /* dst as scratch: the folder's 16-bit value, as f32 */
                xi_from_f32(dst, t->round, x, (size_t)cols);
                xi_to_f32(x, dst, t->round, (size_t)cols);
            }
            memcpy(dst, x, (size_t)cols * sizeof *x);
        }
    }
}

typedef struct gg_ctx {
    const plan *pl;
    const opts *o;
    const gg_tensor *t;
    scratch *sc;
} gg_ctx;

static int gg_fill(void *ctx, int i, FILE *f) {
    gg_ctx *c = ctx;
    const gg_tensor *t = &c->t[i];
    if (t->first < 0) {
        float fac[512];
        llama3_rope_factors(c->o->p, fac);
        return fwrite(fac, sizeof *fac, (size_t)t->ne[0], f) == (size_t)t->ne[0] ? 0 : -1;
    }
    gg_job j = {.t = t, .pl = c->pl, .seed = c->o->seed, .rows_per_unit = t->ne[1],
                .rb = xi_qtype_row_bytes(xi_qtype_get(t->type), t->ne[0]), .f = c->sc->f,
                .conv = c->sc->conv};
    const int64_t rows = t->ne[1] * t->ne[2], step = XI_MAX((int64_t)1, CHUNK / t->ne[0]);
    for (j.row0 = 0; j.row0 < rows; j.row0 += step) {
        j.n_rows = XI_MIN(step, rows - j.row0);
        xi_pool_run(c->sc->pool, gg_worker, &j);
        if (fwrite(j.conv, j.rb, (size_t)j.n_rows, f) != (size_t)j.n_rows) return -1;
    }
    return 0;
}

/* general.*, the architecture's hparams and the tokenizer, as llama.cpp reads them. */
static int gg_metadata(xi_gguf_writer *w, const opts *o, const char *tok_dir) {
    const preset *p = o->p;
    const char *arch = p->experts ? "qwen3moe" : p->qwen == 3 ? "qwen3" : p->qwen ? "qwen2" : "llama";
    char k[96];
#define KEY(s) (snprintf(k, sizeof k, "%s.%s", arch, s), k)
    int bad = xi_gguf_write_str(w, "general.architecture", arch) ||
              xi_gguf_write_str(w, "general.name", p->name) ||
              xi_gguf_write_u32(w, "general.file_type", gg_file_type(o->gguf)) ||
              xi_gguf_write_u32(w, KEY("context_length"), (uint32_t)p->max_pos) ||
              xi_gguf_write_u32(w, KEY("embedding_length"), (uint32_t)p->hidden) ||
              xi_gguf_write_u32(w, KEY("block_count"), (uint32_t)o->layers) ||
              xi_gguf_write_u32(w, KEY("feed_forward_length"), (uint32_t)p->inter) ||
              xi_gguf_write_u32(w, KEY("attention.head_count"), (uint32_t)p->heads) ||
              xi_gguf_write_u32(w, KEY("attention.head_count_kv"), (uint32_t)p->kv_heads) ||
              xi_gguf_write_u32(w, KEY("attention.key_length"), (uint32_t)p->head_dim) ||
              xi_gguf_write_u32(w, KEY("attention.value_length"), (uint32_t)p->head_dim) ||
              xi_gguf_write_f32(w, KEY("rope.freq_base"), (float)p->rope_theta) ||
              xi_gguf_write_f32(w, KEY("attention.layer_norm_rms_epsilon"), (float)p->rms_eps);
    if (!p->qwen)
        bad = bad || xi_gguf_write_u32(w, KEY("rope.dimension_count"), (uint32_t)p->head_dim) ||
              xi_gguf_write_u32(w, KEY("vocab_size"), (uint32_t)p->vocab);
    if (p->experts)
        bad = bad || xi_gguf_write_u32(w, KEY("expert_count"), (uint32_t)p->experts) ||
              xi_gguf_write_u32(w, KEY("expert_used_count"), (uint32_t)p->top_k) ||
              xi_gguf_write_u32(w, KEY("expert_feed_forward_length"), (uint32_t)p->moe_inter);
#undef KEY
    if (bad) return -1;
    char err[512] = "";
    xi_tokenizer *t = xi_tokenizer_load(tok_dir, err, sizeof err);
    /* Qwen: BOS is <|endoftext|> (config.json), EOS <|im_end|>, padding <|endoftext|> */
    xi_tokenizer_gguf_opts to = {.pre = p->qwen ? "qwen2" : "llama-bpe", .n_vocab = p->vocab,
                                 .bos = p->qwen ? 151643 : p->bos, .eos = p->qwen ? 151645 : -1,
                                 .pad = p->qwen ? 151643 : -1};
    if (!t || xi_tokenizer_write_gguf(w, t, &to, err, sizeof err)) {
        fprintf(stderr, "genmodel: %s: %s\n", tok_dir, err);
        xi_tokenizer_free(t);
        return -1;
    }
    xi_tokenizer_free(t);
    return 0;
}

static int write_gguf(const plan *pl, const opts *o, const char *tok_dir, scratch *sc, uint64_t *bytes) {
    gg_tensor *t = NULL;
    int n = 0, rc = -1;
    xi_gguf_writer *w = xi_gguf_writer_new(0);
    if (!w || gg_plan(pl, o, &t, &n) || gg_metadata(w, o, tok_dir)) goto done;
    *bytes = 0;
    for (int i = 0; i < n; i++) {
        if (xi_gguf_write_tensor(w, t[i].name, t[i].type, t[i].n_dims, t[i].ne, NULL)) {
            fprintf(stderr, "genmodel: tensor %s: %lld columns are not whole %s blocks\n", t[i].name,
                    (long long)t[i].ne[0], xi_qtype_get(t[i].type)->name);
            goto done;
        }
        *bytes += xi_qtype_row_bytes(xi_qtype_get(t[i].type), t[i].ne[0]) * (uint64_t)(t[i].ne[1] * t[i].ne[2]);
    }
    gg_ctx c = {pl, o, t, sc};
    char err[512];
    rc = xi_gguf_writer_write_fill(w, o->out, gg_fill, &c, err, sizeof err);
    if (rc) fprintf(stderr, "genmodel: %s\n", err);
done:
    if (rc && !w) fprintf(stderr, "genmodel: out of memory\n");
    xi_gguf_writer_free(w);
    free(t);
    return rc;
}

/* ---------------------------------------------------------------- config files */

static const char *torch_dtype(xi_dtype t) {
    return t == XI_F32 ? "float32" : t == XI_F16 ? "float16" : "bfloat16";
}

static int dump_json(json_t *j, const opts *o, const char *file) {
    char *path = xi_path_join(o->out, file);
    int rc = json_dump_file(j, path, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    if (rc) fprintf(stderr, "genmodel: %s: cannot write\n", path);
    free(path);
    json_decref(j);
    return rc ? -1 : 0;
}

/* A Llama preset's eos ids as a JSON list (new reference). */
static json_t *llama_eos(const preset *p) {
    json_t *a = json_array();
    for (int k = 0; k < 3 && p->eos[k]; k++) json_array_append_new(a, json_integer(p->eos[k]));
    return a;
}

static int write_configs(const opts *o) {
    const preset *p = o->p;
    json_t *eos = p->qwen ? json_integer(151645) : llama_eos(p);
    int bos = p->qwen ? 151643 : p->bos;
    json_t *c = json_pack(
        "{s:[s], s:s, s:b, s:f, s:i, s:o, s:s, s:i, s:i, s:f, s:i, s:i, s:i, s:i, s:i, s:f, s:f, "
        "s:b, s:s, s:b, s:i}",
        "architectures", p->arch, "model_type",
        p->experts ? "qwen3_moe" : p->qwen == 3 ? "qwen3" : p->qwen ? "qwen2" : "llama", "attention_bias",
        p->bias, "attention_dropout", 0.0, "bos_token_id", bos, "eos_token_id", eos, "hidden_act",
        "silu", "hidden_size", p->hidden, "intermediate_size", p->inter, "initializer_range", 0.02,
        "max_position_embeddings", p->max_pos, "num_attention_heads", p->heads, "num_hidden_layers",
        o->layers, "num_key_value_heads", p->kv_heads, "head_dim", p->head_dim, "rms_norm_eps",
        p->rms_eps, "rope_theta", p->rope_theta, "tie_word_embeddings", p->tied, "torch_dtype",
        torch_dtype(o->awq ? XI_F16 : o->dtype), "use_cache", 1, "vocab_size", p->vocab);
    if (!c) return -1;
    if (p->experts) {
        json_object_set_new(c, "num_experts", json_integer(p->experts));
        json_object_set_new(c, "num_experts_per_tok", json_integer(p->top_k));
        json_object_set_new(c, "moe_intermediate_size", json_integer(p->moe_inter));
        json_object_set_new(c, "norm_topk_prob", json_true());
        json_object_set_new(c, "decoder_sparse_step", json_integer(1));
        json_object_set_new(c, "mlp_only_layers", json_array());
    }
    if (p->qwen) {
        json_object_set_new(c, "max_window_layers", json_integer(o->layers));
        json_object_set_new(c, "sliding_window", json_integer(p->max_pos));
        json_object_set_new(c, "use_sliding_window", json_false());
        json_object_set_new(c, "rope_scaling", json_null());
    } else {
        json_object_set_new(c, "mlp_bias", json_false());
        json_object_set_new(c, "rope_scaling",
                            p->llama3.factor > 0
                                ? json_pack("{s:f, s:f, s:f, s:i, s:s}", "factor", p->llama3.factor,
                                            "low_freq_factor", p->llama3.low, "high_freq_factor",
                                            p->llama3.high, "original_max_position_embeddings",
                                            p->llama3.orig, "rope_type", "llama3")
                                : json_null());
    }
    if (o->awq)
        json_object_set_new(c, "quantization_config",
                            json_pack("{s:s, s:i, s:i, s:b, s:s, s:n}", "quant_method", "awq", "bits", 4,
                                      "group_size", o->group, "zero_point", 1, "version", "gemm",
                                      "modules_to_not_convert"));
    if (dump_json(c, o, "config.json")) return -1;
    json_t *g = p->qwen == 3 ? json_pack("{s:i, s:b, s:[i,i], s:i, s:f, s:i, s:f}", "bos_token_id", bos,
                                         "do_sample", 1, "eos_token_id", 151645, 151643, "pad_token_id",
                                         151643, "temperature", 0.6, "top_k", 20, "top_p", 0.95)
              : p->qwen ? json_pack("{s:i, s:b, s:[i,i], s:i, s:f, s:f, s:i, s:f}", "bos_token_id", bos,
                                    "do_sample", 1, "eos_token_id", 151645, 151643, "pad_token_id",
                                    151643, "repetition_penalty", 1.1, "temperature", 0.7, "top_k",
                                    20, "top_p", 0.8)
                        : json_pack("{s:i, s:b, s:o, s:f, s:f}", "bos_token_id", bos,
                                    "do_sample", 1, "eos_token_id", llama_eos(p),
                                    "temperature", 0.6, "top_p", 0.9);
    return g ? dump_json(g, o, "generation_config.json") : -1;
}

/* Tokenizer files travel with the weights so the folder is a complete model. */
static int copy_tokenizer(const opts *o, const char *dir) {
    static const char *files[] = {"tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt",
                                  "added_tokens.json", "special_tokens_map.json", "tokenizer.model",
                                  "LICENSE"};
    int copied = 0;
    for (size_t i = 0; i < XI_ARRAY_LEN(files); i++) {
        char *src = xi_path_join(dir, files[i]);
        char *dst = xi_path_join(o->out, files[i]);
        char err[256];
        size_t len = 0;
        char *data = src && xi_file_exists(src) ? xi_read_file(src, &len, err, sizeof err) : NULL;
        int bad = 0;
        if (data) {
            FILE *f = fopen(dst, "wb");
            bad = !f || fwrite(data, 1, len, f) != len;
            if (f && fclose(f)) bad = 1;
            if (bad) fprintf(stderr, "genmodel: %s: %s\n", dst, strerror(errno));
            copied++;
        }
        free(data);
        free(src);
        free(dst);
        if (bad) return -1;
    }
    if (!copied) {
        fprintf(stderr, "genmodel: %s: no tokenizer files found\n", dir);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- main */

static void usage(FILE *f) {
    fprintf(f, "usage: genmodel --preset NAME [--dtype f32|f16|bf16] [--awq] [--group-size G]\n"
               "                [--layers N] [--seed S] [--tokenizer DIR] [--max-shard-mb MB] OUT_DIR\n"
               "       genmodel --preset NAME --gguf f32|f16|bf16|q8_0 [--layers N] [--seed S]\n"
               "                [--tokenizer DIR] OUT.gguf\n"
               "presets:");
    for (size_t i = 0; i < XI_ARRAY_LEN(presets); i++) fprintf(f, " %s", presets[i].name);
    fprintf(f, "\ndefaults: --dtype bf16 (f16 with --awq), --group-size 128, --seed 0, all layers,\n"
               "          --max-shard-mb 2000, the shared data's tokenizer for the qwen and tiny presets\n");
}

/* The whole string must be a number in [lo, hi]; decimal or 0x hex. */
static int parse_u64(const char *flag, const char *v, uint64_t lo, uint64_t hi, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 0);
    if (errno || end == v || *end || v[0] == '-' || x < lo || x > hi) {
        fprintf(stderr, "genmodel: %s %s: expected a whole number in [%llu, %llu]\n", flag, v,
                (unsigned long long)lo, (unsigned long long)hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_args(opts *o, int argc, char **argv) {
    const char *dtype = NULL, *gguf = NULL;
    uint64_t num = 0;
    *o = (opts){.group = 128, .seed = 0, .max_shard = 2000ull * 1000 * 1000, .layers = -1, .gguf = -1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = !strcmp(a, "--preset") || !strcmp(a, "--dtype") || !strcmp(a, "--group-size") ||
                    !strcmp(a, "--layers") || !strcmp(a, "--seed") || !strcmp(a, "--tokenizer") ||
                    !strcmp(a, "--max-shard-mb") || !strcmp(a, "--gguf");
        if (takes && !v) {
            fprintf(stderr, "genmodel: %s needs a value\n", a);
            return -1;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(a, "--preset")) {
            for (size_t k = 0; k < XI_ARRAY_LEN(presets); k++)
                if (!strcmp(v, presets[k].name)) o->p = &presets[k];
            if (!o->p) {
                fprintf(stderr, "genmodel: unknown preset '%s'\n", v);
                return -1;
            }
        } else if (!strcmp(a, "--dtype")) {
            dtype = v;
        } else if (!strcmp(a, "--gguf")) {
            gguf = v;
        } else if (!strcmp(a, "--awq")) {
            o->awq = 1;
        } else if (!strcmp(a, "--group-size")) {
            if (parse_u64(a, v, 1, 1 << 20, &num)) return -1;
            o->group = (int)num;
        } else if (!strcmp(a, "--layers")) {
            if (parse_u64(a, v, 0, 1000, &num)) return -1;
            o->layers = (int)num;
        } else if (!strcmp(a, "--seed")) {
            if (parse_u64(a, v, 0, UINT64_MAX, &o->seed)) return -1;
        } else if (!strcmp(a, "--tokenizer")) {
            o->tokenizer = v;
        } else if (!strcmp(a, "--max-shard-mb")) {
            if (parse_u64(a, v, 1, 1000000, &num)) return -1;
            o->max_shard = num * 1000 * 1000;
        } else if (a[0] == '-' || o->out) {
            fprintf(stderr, "genmodel: unexpected argument '%s'\n", a);
            return -1;
        } else {
            o->out = a;
        }
        if (takes) i++;
    }
    if (!o->p || !o->out) {
        usage(stderr);
        return -1;
    }
    /* AutoAWQ checkpoints keep every unquantized tensor in float16. */
    o->dtype = o->awq ? XI_F16 : XI_BF16;
    if (dtype) {
        int t = !strcmp(dtype, "f32") ? XI_F32 : !strcmp(dtype, "f16") ? XI_F16 : !strcmp(dtype, "bf16") ? XI_BF16 : -1;
        if (t < 0 || (o->awq && t != XI_F16)) {
            fprintf(stderr, "genmodel: --dtype %s: expected f32, f16 or bf16 (AWQ: f16)\n", dtype);
            return -1;
        }
        o->dtype = (xi_dtype)t;
    }
    if (gguf) {
        const xi_qtype *q = xi_qtype_by_name(gguf);
        int t = q ? q->id : -1;
        if (t != XI_GGML_F32 && t != XI_GGML_F16 && t != XI_GGML_BF16 && t != XI_GGML_Q8_0) {
            fprintf(stderr, "genmodel: --gguf %s: expected f32, f16, bf16 or q8_0 (llama-quantize "
                            "makes the others)\n", gguf);
            return -1;
        }
        if (o->awq || dtype) {
            fprintf(stderr, "genmodel: --gguf TYPE sets the file's type: no --awq or --dtype\n");
            return -1;
        }
        o->gguf = t;
        /* the folder whose conversion the file is: its dtype rounds the 1-D tensors */
        o->dtype = t == XI_GGML_F16 ? XI_F16 : t == XI_GGML_BF16 ? XI_BF16 : XI_F32;
    }
    if (o->layers < 0) o->layers = o->p->layers;
    const preset *p = o->p;
    const int ffn = p->experts ? p->moe_inter : p->inter; /* the MLP's linears */
    if (o->awq && (o->group <= 0 || p->hidden % o->group || ffn % o->group ||
                   (p->heads * p->head_dim) % o->group || (p->heads * p->head_dim) % 8 || p->hidden % 8 || ffn % 8 ||
                   (p->kv_heads * p->head_dim) % 8)) {
        fprintf(stderr, "genmodel: --group-size %d must divide every input width (%d, %d) and outputs "
                        "must be multiples of 8\n", o->group, p->hidden, ffn);
        return -1;
    }
    return 0;
}

/* The shared data folder: $XINFER_TEST_DATA, else ../shared/data from the working directory
 * (the repository root), else from the binary (build/tools/genmodel). NULL when none exists. */
static char *default_tokenizer(const char *rel) {
    const char *env = getenv("XINFER_TEST_DATA");
    char exe[4096] = "";
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) snprintf(slash, sizeof exe - (size_t)(slash - exe), "/../../../shared/data");
    const char *bases[] = {env && *env ? env : NULL, "../shared/data", slash ? exe : NULL};
    for (size_t i = 0; i < XI_ARRAY_LEN(bases); i++) {
        if (!bases[i]) continue;
        char *dir = xi_path_join(bases[i], rel);
        if (dir && xi_dir_exists(dir)) return dir;
        free(dir);
    }
    return NULL;
}

static int mkdir_p(const char *dir) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *s = buf + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        if (mkdir(buf, 0755) && errno != EEXIST) return -1;
        *s = '/';
    }
    return mkdir(buf, 0755) && errno != EEXIST ? -1 : 0;
}

int main(int argc, char **argv) {
    opts o;
    int bad = parse_args(&o, argc, argv);
    if (bad) return bad < 0 ? 2 : 0;
    double t0 = xi_now();
    if (o.gguf < 0 && mkdir_p(o.out)) {
        fprintf(stderr, "genmodel: %s: %s\n", o.out, strerror(errno));
        return 1;
    }
    plan pl = {0};
    if (plan_build(&pl, &o)) {
        fprintf(stderr, "genmodel: out of memory\n");
        return 1;
    }
    /* Greedy shards in plan order: a unit never straddles two files. */
    uint64_t total = 0, in_shard = 0, params = 0;
    int n_shards = 1;
    for (int i = 0; i < pl.n; i++) {
        uint64_t b = unit_bytes(&pl.u[i], &o);
        if (in_shard > 0 && in_shard + b > o.max_shard) n_shards++, in_shard = 0;
        pl.u[i].shard = n_shards - 1;
        in_shard += b;
        total += b;
        params += (uint64_t)pl.u[i].rows * (uint64_t)(pl.u[i].cols ? pl.u[i].cols : 1);
    }
    const char *tok = o.tokenizer;
    char *dflt = o.p->tokenizer && !tok ? default_tokenizer(o.p->tokenizer) : NULL;
    if (dflt) tok = dflt;
    scratch sc = {malloc(CHUNK * sizeof(float)), malloc(CHUNK * 4), xi_pool_new(0)};
    json_t *wmap = json_object();
    int rc = sc.f && sc.conv && wmap ? 0 : -1;
    if (o.gguf >= 0) {
        n_shards = 1;
        if (!tok) fprintf(stderr, "genmodel: no tokenizer for %s: pass --tokenizer DIR\n", o.p->name);
        rc = rc || !tok ? -1 : write_gguf(&pl, &o, tok, &sc, &total);
    } else {
        for (int s = 0; s < n_shards && !rc; s++) rc = write_shard(&pl, &o, s, n_shards, &sc, wmap);
        if (!rc && n_shards > 1) {
            json_t *idx = json_pack("{s:{s:I}, s:O}", "metadata", "total_size", (json_int_t)total,
                                    "weight_map", wmap);
            rc = idx ? dump_json(idx, &o, "model.safetensors.index.json") : -1;
        }
        if (!rc) rc = write_configs(&o);
        if (!rc && tok) rc = copy_tokenizer(&o, tok);
        else if (!rc) fprintf(stderr, "genmodel: no tokenizer for %s: pass --tokenizer DIR\n", o.p->name);
    }
    if (!rc)
        printf("genmodel: %s %s%s, %d layers, %.3fB params, %.1f MiB in %d file%s, %.2f s -> %s\n",
               o.p->name, o.awq ? "awq-int4 + " : "",
               o.gguf >= 0 ? xi_qtype_get(o.gguf)->name : xi_dtype_name(o.dtype), o.layers, params / 1e9,
               total / 1048576.0, n_shards, n_shards > 1 ? "s" : "", xi_now() - t0, o.out);
    free(dflt);
    json_decref(wmap);
    free(sc.f);
    free(sc.conv);
    xi_pool_free(sc.pool);
    free(pl.u);
    return rc ? 1 : 0;
}
