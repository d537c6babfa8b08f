/* model/gguf_model: a GGUF file as the loader's config and tensor source (see the header).
 *
 * Metadata to config.json (arch = general.architecture):
 *   <arch>.embedding_length, feed_forward_length, block_count   hidden_size, intermediate_size,
 *                                                                num_hidden_layers
 *   <arch>.attention.head_count[_kv], key_length                 num_attention_heads,
 *                                                                num_key_value_heads, head_dim
 *   <arch>.context_length, rope.freq_base,                       max_position_embeddings,
 *   attention.layer_norm_rms_epsilon                             rope_theta, rms_norm_eps
 *   <arch>.rope.scaling.{type,factor,original_context_length}    rope_scaling (linear, yarn)
 *   tensor rope_freqs.weight [head_dim / 2] f32                  (xi_config.rope_freq_factors:
 *                                                                Llama 3's rope_scaling)
 *   token_embd ne[1], output.weight absent                       vocab_size, tie_word_embeddings
 *   tokenizer.ggml.{bos,eos,eot}_token_id                        bos_token_id, eos_token_id
 * and whatever the family's gguf_config hook adds. */
#include "model/gguf_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

int xi_gguf_config_int(json_t *cfg, const xi_gguf *g, const char *arch, const char *key,
                       const char *hf_key, int required, char *err, size_t errlen) {
    char k[160];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    int64_t v;
    if (xi_gguf_get_i64(g, k, &v) == 0 && v > 0 && v < (1ll << 31)) {
        json_object_set_new(cfg, hf_key, json_integer(v));
        return 0;
    }
    if (!required && !xi_gguf_find_kv(g, k)) return 0;
    return xi_errf(err, errlen, "key %s: missing or not a positive integer", k);
}

static void config_num(json_t *cfg, const xi_gguf *g, const char *arch, const char *key,
                       const char *hf_key) {
    char k[160];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    double v;
    if (!xi_gguf_get_f64(g, k, &v)) json_object_set_new(cfg, hf_key, json_real(v));
}

static int rope_scaling(json_t *cfg, const xi_gguf *g, const char *arch, char *err,
                        size_t errlen) {
    char k[160];
    snprintf(k, sizeof k, "%s.rope.scaling.type", arch);
    const char *type = xi_gguf_get_str(g, k);
    if (!type || !strcmp(type, "none")) return 0;
    if (strcmp(type, "linear") && strcmp(type, "yarn"))
        return xi_errf(err, errlen, "key %s: RoPE scaling '%s' is not supported (linear, yarn are)",
                       k, type);
    json_t *rs = json_pack("{s:s}", "rope_type", type);
    config_num(rs, g, arch, "rope.scaling.factor", "factor");
    if (xi_gguf_config_int(rs, g, arch, "rope.scaling.original_context_length",
                           "original_max_position_embeddings", 0, err, errlen)) {
        json_decref(rs);
        return -1;
    }
    json_object_set_new(cfg, "rope_scaling", rs);
    return 0;
}

/* rope_freqs.weight, when present: head_dim/2 F32 divisors of the rotary frequencies, which
 * llama.cpp's converter writes for Llama 3's rope_scaling (then left out of the metadata). */
static int rope_freq_factors(xi_config *c, const xi_gguf *g, char *err, size_t errlen) {
    const xi_gguf_tensor *t = xi_gguf_find_tensor(g, "rope_freqs.weight");
    if (!t) return 0;
    const int half = c->head_dim / 2;
    int64_t n = 1;
    for (int d = 0; d < t->n_dims; d++) n *= t->ne[d];
    if (t->type->id != XI_GGML_F32 || n != half)
        return xi_errf(err, errlen, "tensor rope_freqs.weight: expected %d f32 values (head_dim / "
                                    "2), found %lld of type %s", half, (long long)n, t->type->name);
    float *f = xi_calloc((size_t)half, sizeof *f);
    if (!f) return xi_errf(err, errlen, "out of memory");
    memcpy(f, t->data, (size_t)half * sizeof *f); /* the file's alignment need not be a float's */
    for (int i = 0; i < half; i++)
        if (!(isfinite(f[i]) && f[i] > 0)) {
            int rc = xi_errf(err, errlen, "tensor rope_freqs.weight: value %d is %g (factors must be "
                                          "finite and > 0)", i, (double)f[i]);
            free(f);
            return rc;
        }
    c->rope_freq_factors = f;
    return 0;
}

static json_t *config_json(const xi_gguf *g, const xi_arch_family **fam, char *err, size_t errlen) {
    const char *arch = xi_gguf_get_str(g, "general.architecture"), *hf = NULL;
    if (!arch) {
        xi_errf(err, errlen, "key general.architecture: missing");
        return NULL;
    }
    *fam = xi_arch_find_gguf(arch, &hf);
    if (!*fam) {
        xi_errf(err, errlen, "architecture '%s' is not supported (llama, qwen2, qwen3, qwen3moe are)",
                arch);
        return NULL;
    }
    const xi_gguf_tensor *emb = xi_gguf_find_tensor(g, "token_embd.weight");
    if (!emb || emb->n_dims != 2) {
        xi_errf(err, errlen, "tensor token_embd.weight: missing or not 2-D");
        return NULL;
    }
    /* The dtype of float matrices converted at load and of the KV cache (`auto`): a quantized
     * file's quantized tensors stay in their format and compute with f32 activations; its KV
     * cache is F16, as llama.cpp keeps it. */
    const char *ft = emb->type->id == XI_GGML_BF16                    ? "bfloat16"
                     : emb->type->id == XI_GGML_F16 || emb->type->unpack ? "float16"
                                                                       : "float32";
    json_t *cfg = json_pack("{s:[s], s:s, s:I, s:b, s:s}", "architectures", hf, "hidden_act",
                            "silu", "vocab_size", (json_int_t)emb->ne[1], "tie_word_embeddings",
                            !xi_gguf_find_tensor(g, "output.weight"), "torch_dtype", ft);
    static const char *const ints[][3] = {
        {"embedding_length", "hidden_size", "1"},
        {"feed_forward_length", "intermediate_size", "1"},
        {"block_count", "num_hidden_layers", "1"},
        {"attention.head_count", "num_attention_heads", "1"},
        {"attention.head_count_kv", "num_key_value_heads", "0"},
        {"attention.key_length", "head_dim", "0"},
        {"context_length", "max_position_embeddings", "0"},
    };
    for (size_t i = 0; i < XI_ARRAY_LEN(ints); i++)
        if (xi_gguf_config_int(cfg, g, arch, ints[i][0], ints[i][1], ints[i][2][0] == '1', err,
                               errlen))
            goto fail;
    json_object_set_new(cfg, "rms_norm_eps", json_real(1e-6));
    config_num(cfg, g, arch, "attention.layer_norm_rms_epsilon", "rms_norm_eps");
    config_num(cfg, g, arch, "rope.freq_base", "rope_theta");
    int64_t id;
    if (!xi_gguf_get_i64(g, "tokenizer.ggml.bos_token_id", &id))
        json_object_set_new(cfg, "bos_token_id", json_integer(id));
    json_t *eos = json_array();
    if (!xi_gguf_get_i64(g, "tokenizer.ggml.eos_token_id", &id)) json_array_append_new(eos, json_integer(id));
    if (!xi_gguf_get_i64(g, "tokenizer.ggml.eot_token_id", &id)) json_array_append_new(eos, json_integer(id));
    json_object_set_new(cfg, "eos_token_id", eos);
    if (rope_scaling(cfg, g, arch, err, errlen) ||
        ((*fam)->gguf_config && (*fam)->gguf_config(cfg, g, arch, err, errlen)))
        goto fail;
    return cfg;
fail:
    json_decref(cfg);
    return NULL;
}

int xi_config_load_gguf(xi_config *c, const xi_gguf *g, const char *path, char *err,
                        size_t errlen) {
    const xi_arch_family *fam;
    json_t *j = config_json(g, &fam, err, errlen);
    if (!j) {
        memset(c, 0, sizeof *c);
        return xi_err_prefix(err, errlen, "%s", path);
    }
    int rc = xi_config_parse(c, j, path, NULL, err, errlen);
    json_decref(j);
    if (!rc && (rc = rope_freq_factors(c, g, err, errlen))) {
        xi_config_free(c);
        xi_err_prefix(err, errlen, "%s", path);
    }
    return rc;
}

struct xi_gguf_weights {
    const xi_gguf *g;
    const char *path;
    int transient, permute; /* permute: Llama's interleaved q/k rows */
    int n_heads, n_kv_heads;
    xi_st_tensor last;      /* the latest answer */
    char name[160];
    void **bufs;            /* converted tensors */
    int n_bufs, cap_bufs;
};

xi_gguf_weights *xi_gguf_weights_new(const xi_gguf *g, const xi_config *c, const char *path,
                                     int transient, char *err, size_t errlen) {
    for (int i = 0; i < xi_gguf_tensor_count(g); i++) {
        const xi_gguf_tensor *t = xi_gguf_tensor_at(g, i);
        if (!xi_qtype_supported(t->type)) {
            xi_errf(err, errlen, "%s: tensor %s: type %s is not supported", path, t->name,
                    t->type->name);
            return NULL;
        }
    }
    xi_gguf_weights *w = xi_calloc(1, sizeof *w);
    if (!w) {
        xi_errf(err, errlen, "out of memory");
        return NULL;
    }
    *w = (xi_gguf_weights){.g = g, .path = path, .transient = transient,
                           .permute = !strcmp(xi_gguf_get_str(g, "general.architecture"), "llama"),
                           .n_heads = c->n_heads, .n_kv_heads = c->n_kv_heads};
    return w;
}

static void free_bufs(xi_gguf_weights *w) {
    for (int i = 0; i < w->n_bufs; i++) free(w->bufs[i]);
    w->n_bufs = 0;
}

void xi_gguf_weights_free(xi_gguf_weights *w) {
    if (!w) return;
    free_bufs(w);
    free(w->bufs);
    free(w);
}

static xi_dtype float_dtype(int ggml) {
    return ggml == XI_GGML_F32 ? XI_F32 : ggml == XI_GGML_F16 ? XI_F16 : XI_BF16;
}

/* How many heads attn_q / attn_k rows of a Llama file are interleaved over (0: none). */
static int perm_heads(const xi_gguf_weights *w, const char *name) {
    if (!w->permute) return 0;
    const char *dot = strrchr(name, '.');
    if (!dot || strncmp(name, "blk.", 4)) return 0;
    size_t base = (size_t)(dot - name);
    const char *role = memchr(name + 4, '.', base - 4);
    if (!role) return 0;
    role++;
    size_t n = (size_t)(dot - role);
    if (n == 6 && !strncmp(role, "attn_q", 6)) return w->n_heads;
    if (n == 6 && !strncmp(role, "attn_k", 6)) return w->n_kv_heads;
    return 0;
}

/* The tensor t (expert e of a 3-D one, e < 0 for a whole 1-D/2-D one) as w->last. */
static const xi_st_tensor *convert(xi_gguf_weights *w, const xi_gguf_tensor *t, int e,
                                   const char *name) {
    int64_t cols = t->ne[0], rows = t->n_dims >= 2 ? t->ne[1] : 1;
    size_t rb = xi_qtype_row_bytes(t->type, cols);
    const char *src = (const char *)t->data + (e >= 0 ? (size_t)e * (size_t)rows * rb : 0);
    int heads = perm_heads(w, name), is_float = !t->type->unpack;
    /* 2-D quantized tensors stay in their block format (dtype GGML): whole rows, so a Llama
     * q/k permutation moves rows as bytes. 1-D ones (never quantized in practice) become f32. */
    const int native = t->n_dims >= 2 && !is_float;
    w->last = (xi_st_tensor){.name = w->name, .file = w->path, .n_dims = t->n_dims == 1 ? 1 : 2};
    snprintf(w->name, sizeof w->name, "%s", name);
    if (t->n_dims == 1) w->last.shape[0] = cols;
    else w->last.shape[0] = rows, w->last.shape[1] = cols;
    if ((is_float || native) && !heads) { /* as stored */
        w->last.dtype = native ? XI_GGML : float_dtype(t->type->id);
        w->last.qtype = native ? t->type : NULL;
        w->last.data = src;
        w->last.nbytes = (size_t)rows * rb;
        return &w->last;
    }
    xi_dtype out = t->n_dims == 1 ? XI_F32 : is_float ? float_dtype(t->type->id) : XI_GGML;
    size_t es = xi_dtype_size(out), n = (size_t)(rows * cols), bytes = native ? (size_t)rows * rb : n * es;
    if (w->transient) free_bufs(w);
    if (w->n_bufs == w->cap_bufs) {
        int cap = w->cap_bufs ? 2 * w->cap_bufs : 16;
        void **b = realloc(w->bufs, (size_t)cap * sizeof *b);
        if (!b) return NULL;
        w->bufs = b;
        w->cap_bufs = cap;
    }
    char *dst = malloc(bytes);
    float *row = malloc((size_t)cols * sizeof *row);
    if (!dst || !row) {
        free(dst);
        free(row);
        return NULL;
    }
    w->bufs[w->n_bufs++] = dst;
    /* Llama's rows (a bias's values) per head: rotate-half (i, j) was stored at (j, i). */
    int64_t units = t->n_dims == 1 ? cols : rows;
    if (heads && units % (2 * heads)) heads = 0; /* not q/k-shaped: the loader names its shape */
    int64_t hd = heads ? units / heads : 0, half = hd / 2;
    if (t->n_dims == 1) {
        xi_qtype_dequant_row(t->type, src, row, cols);
        for (int64_t r = 0; r < cols; r++) {
            int64_t p = heads ? r % hd : 0, s = heads ? r - p + 2 * (p % half) + p / half : r;
            ((float *)dst)[r] = row[s];
        }
    } else {
        for (int64_t r = 0; r < rows; r++) {
            int64_t p = heads ? r % hd : 0, s = heads ? r - p + 2 * (p % half) + p / half : r;
            memcpy(dst + (size_t)r * rb, src + (size_t)s * rb, rb);
        }
    }
    free(row);
    w->last.dtype = out;
    w->last.qtype = native ? t->type : NULL;
    w->last.data = dst;
    w->last.nbytes = bytes;
    return &w->last;
}

const xi_st_tensor *xi_gguf_weights_find(xi_gguf_weights *w, const char *name) {
    const xi_gguf_tensor *t = xi_gguf_find_tensor(w->g, name);
    if (t) return t->n_dims <= 2 ? convert(w, t, -1, name) : NULL;
    /* "PREFIX.E.weight": expert E of the 3-D "PREFIX.weight" */
    const char *suffix = strrchr(name, '.');
    if (!suffix || suffix == name) return NULL;
    const char *p = suffix - 1;
    while (p > name && *p >= '0' && *p <= '9') p--;
    if (*p != '.' || p + 1 == suffix) return NULL;
    char whole[160];
    snprintf(whole, sizeof whole, "%.*s%s", (int)(p - name), name, suffix);
    int e = atoi(p + 1);
    t = xi_gguf_find_tensor(w->g, whole);
    if (!t || t->n_dims != 3 || e >= t->ne[2]) return NULL;
    return convert(w, t, e, name);
}
