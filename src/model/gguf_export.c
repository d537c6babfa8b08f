/* model/gguf_export: a GGUF model of arch llama or qwen2 as a Hugging Face folder
 * (config.json + model.safetensors, weights dequantized to F32 / BF16 / F16), which the
 * safetensors loader serves as it is. This is the dequantizing path until the loader binds
 * GGUF tensors itself; it also checks the name and layout mapping a GGUF loader needs:
 *
 *   token_embd / output_norm / output          model.embed_tokens / model.norm / lm_head
 *   blk.N.attn_norm, ffn_norm                  input_layernorm, post_attention_layernorm
 *   blk.N.attn_{q,k,v,output}[.bias]           self_attn.{q,k,v,o}_proj
 *   blk.N.ffn_{gate,up,down}                   mlp.{gate,up,down}_proj
 *
 * ggml's ne = [in, out] is safetensors' [out, in]. convert_hf_to_gguf permutes the rows of
 * Llama's attn_q / attn_k per head from rotate-half order (i, j) to interleaved (j, i), i the
 * half and j < head_dim / 2; this undoes it. Qwen2 files are stored unpermuted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model/gguf.h"
#include "model/gguf_export.h"
#include "model/safetensors.h"
#include "tensor/dtype.h"

typedef struct hp {
    const char *arch;
    int64_t hidden, inter, layers, heads, kv_heads, head_dim, ctx, vocab;
    double eps, theta;
    int tied, qwen;
} hp;

static int get_i(const xi_gguf *g, const char *arch, const char *key, int64_t def, int64_t *out,
                 char *err, size_t errlen) {
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    if (xi_gguf_get_i64(g, k, out) == 0 && *out > 0 && *out < (1ll << 31)) return 0;
    if (def < 0 || xi_gguf_find_kv(g, k))
        return xi_errf(err, errlen, "key %s: missing or not a positive integer", k);
    *out = def;
    return 0;
}

static int read_hparams(const xi_gguf *g, hp *h, char *err, size_t errlen) {
    memset(h, 0, sizeof *h);
    h->arch = xi_gguf_get_str(g, "general.architecture");
    if (!h->arch) return xi_errf(err, errlen, "no general.architecture");
    h->qwen = !strcmp(h->arch, "qwen2");
    if (!h->qwen && strcmp(h->arch, "llama"))
        return xi_errf(err, errlen, "architecture '%s' is not supported here (llama, qwen2 are)",
                       h->arch);
    if (get_i(g, h->arch, "embedding_length", -1, &h->hidden, err, errlen) ||
        get_i(g, h->arch, "feed_forward_length", -1, &h->inter, err, errlen) ||
        get_i(g, h->arch, "block_count", -1, &h->layers, err, errlen) ||
        get_i(g, h->arch, "attention.head_count", -1, &h->heads, err, errlen) ||
        get_i(g, h->arch, "attention.head_count_kv", h->heads, &h->kv_heads, err, errlen) ||
        get_i(g, h->arch, "attention.key_length", h->hidden / h->heads, &h->head_dim, err,
              errlen) ||
        get_i(g, h->arch, "context_length", 2048, &h->ctx, err, errlen))
        return -1;
    char k[128];
    snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", h->arch);
    if (xi_gguf_get_f64(g, k, &h->eps)) h->eps = 1e-6;
    snprintf(k, sizeof k, "%s.rope.freq_base", h->arch);
    if (xi_gguf_get_f64(g, k, &h->theta)) h->theta = 10000.0;
    snprintf(k, sizeof k, "%s.rope.scaling.type", h->arch);
    const char *scaling = xi_gguf_get_str(g, k);
    if (scaling && strcmp(scaling, "none"))
        return xi_errf(err, errlen, "key %s: RoPE scaling '%s' is not supported here", k, scaling);
    /* Llama 3's factors, one per frequency: config.json has no field for them (its rope_scaling
     * holds the parameters they were computed from, which the file does not keep). */
    if (xi_gguf_find_tensor(g, "rope_freqs.weight"))
        return xi_errf(err, errlen, "tensor rope_freqs.weight: per-frequency RoPE factors have no "
                                    "config.json form (xinfer serves the GGUF file itself)");
    const xi_gguf_tensor *emb = xi_gguf_find_tensor(g, "token_embd.weight");
    if (!emb || emb->n_dims != 2 || emb->ne[0] != h->hidden)
        return xi_errf(err, errlen, "tensor token_embd.weight: missing or not [%lld, vocab]",
                       (long long)h->hidden);
    h->vocab = emb->ne[1];
    h->tied = !xi_gguf_find_tensor(g, "output.weight");
    if (h->heads % h->kv_heads)
        return xi_errf(err, errlen, "%lld heads are not a multiple of %lld KV heads",
                       (long long)h->heads, (long long)h->kv_heads);
    return 0;
}

static int write_config(const xi_gguf *g, const hp *h, const char *dir, xi_dtype dtype,
                        char *err, size_t errlen) {
    int64_t bos = -1, eos = -1;
    xi_gguf_get_i64(g, "tokenizer.ggml.bos_token_id", &bos);
    xi_gguf_get_i64(g, "tokenizer.ggml.eos_token_id", &eos);
    char *path = xi_path_join(dir, "config.json");
    FILE *f = path ? fopen(path, "w") : NULL;
    if (!f) {
        xi_errf(err, errlen, "%s: cannot create", path ? path : dir);
        free(path);
        return -1;
    }
    fprintf(f,
            "{\"architectures\": [\"%s\"], \"model_type\": \"%s\", \"hidden_size\": %lld,\n"
            " \"intermediate_size\": %lld, \"num_hidden_layers\": %lld,\n"
            " \"num_attention_heads\": %lld, \"num_key_value_heads\": %lld, \"head_dim\": %lld,\n"
            " \"max_position_embeddings\": %lld, \"rms_norm_eps\": %.17g, \"rope_theta\": %.17g,\n"
            " \"vocab_size\": %lld, \"tie_word_embeddings\": %s, \"hidden_act\": \"silu\",\n"
            " \"torch_dtype\": \"%s\"",
            h->qwen ? "Qwen2ForCausalLM" : "LlamaForCausalLM", h->qwen ? "qwen2" : "llama",
            (long long)h->hidden, (long long)h->inter, (long long)h->layers, (long long)h->heads,
            (long long)h->kv_heads, (long long)h->head_dim, (long long)h->ctx, h->eps, h->theta,
            (long long)h->vocab, h->tied ? "true" : "false",
            dtype == XI_BF16 ? "bfloat16" : dtype == XI_F16 ? "float16" : "float32");
    if (bos >= 0) fprintf(f, ", \"bos_token_id\": %lld", (long long)bos);
    if (eos >= 0) fprintf(f, ", \"eos_token_id\": %lld", (long long)eos);
    fprintf(f, "}\n");
    int bad = fclose(f) != 0;
    if (bad) xi_errf(err, errlen, "%s: write failed", path);
    free(path);
    return bad ? -1 : 0;
}

/* One exported tensor: its GGUF source, HF name and the row permutation to undo. */
typedef struct unit {
    const xi_gguf_tensor *src;
    char name[96];
    int64_t perm_heads; /* > 0: undo Llama's q/k interleave with this many heads */
} unit;

static const struct {
    const char *gguf, *hf;
    int perm; /* 1: q heads, 2: kv heads */
} layer_map[] = {
    {"attn_norm.weight", "input_layernorm.weight", 0},
    {"attn_q.weight", "self_attn.q_proj.weight", 1},
    {"attn_q.bias", "self_attn.q_proj.bias", 1},
    {"attn_k.weight", "self_attn.k_proj.weight", 2},
    {"attn_k.bias", "self_attn.k_proj.bias", 2},
    {"attn_v.weight", "self_attn.v_proj.weight", 0},
    {"attn_v.bias", "self_attn.v_proj.bias", 0},
    {"attn_output.weight", "self_attn.o_proj.weight", 0},
    {"ffn_norm.weight", "post_attention_layernorm.weight", 0},
    {"ffn_gate.weight", "mlp.gate_proj.weight", 0},
    {"ffn_up.weight", "mlp.up_proj.weight", 0},
    {"ffn_down.weight", "mlp.down_proj.weight", 0},
};

static int plan_units(const xi_gguf *g, const hp *h, unit **out, int *n_out, char *err,
                      size_t errlen) {
    int cap = 3 + (int)h->layers * (int)XI_ARRAY_LEN(layer_map), n = 0;
    unit *u = xi_calloc((size_t)cap, sizeof *u);
    if (!u) return xi_errf(err, errlen, "out of memory");
    static const char *const top[3][2] = {{"token_embd.weight", "model.embed_tokens.weight"},
                                          {"output_norm.weight", "model.norm.weight"},
                                          {"output.weight", "lm_head.weight"}};
    for (int i = 0; i < 3; i++) {
        u[n].src = xi_gguf_find_tensor(g, top[i][0]);
        if (!u[n].src && i < 2) {
            free(u);
            return xi_errf(err, errlen, "tensor %s: missing", top[i][0]);
        }
        if (u[n].src) snprintf(u[n++].name, sizeof u->name, "%s", top[i][1]);
    }
    for (int64_t l = 0; l < h->layers; l++)
        for (size_t k = 0; k < XI_ARRAY_LEN(layer_map); k++) {
            char gname[96];
            snprintf(gname, sizeof gname, "blk.%lld.%s", (long long)l, layer_map[k].gguf);
            const xi_gguf_tensor *t = xi_gguf_find_tensor(g, gname);
            if (!t) continue; /* the loader names what a model lacks */
            u[n].src = t;
            snprintf(u[n].name, sizeof u->name, "model.layers.%lld.%s", (long long)l,
                     layer_map[k].hf);
            if (!h->qwen && layer_map[k].perm)
                u[n].perm_heads = layer_map[k].perm == 1 ? h->heads : h->kv_heads;
            n++;
        }
    for (int i = 0; i < n; i++) {
        const xi_gguf_tensor *t = u[i].src;
        if (!xi_qtype_supported(t->type) || t->n_dims > 2) {
            int rc = xi_errf(err, errlen, "tensor %s: %s%s is not supported", t->name,
                             t->n_dims > 2 ? "a 3-D or 4-D tensor of " : "type ", t->type->name);
            free(u);
            return rc;
        }
        int64_t rows = t->n_dims == 2 ? t->ne[1] : t->ne[0];
        if (u[i].perm_heads && rows % (2 * u[i].perm_heads)) {
            int rc = xi_errf(err, errlen, "tensor %s: %lld rows do not split into %lld heads",
                             t->name, (long long)rows, (long long)u[i].perm_heads);
            free(u);
            return rc;
        }
    }
    *out = u;
    *n_out = n;
    return 0;
}

/* Dequantize u's tensor into HF row order as F32, [rows][cols] (a vector: one row of ne[0],
 * or ne[0] rows of one value when its rows are permuted). */
static float *dequant_unit(const unit *u, int64_t *rows_out, int64_t *cols_out) {
    const xi_gguf_tensor *t = u->src;
    int64_t cols = t->ne[0], rows = t->n_dims == 2 ? t->ne[1] : 1;
    float *x = malloc((size_t)(rows * cols) * sizeof *x);
    float *y = u->perm_heads ? malloc((size_t)(rows * cols) * sizeof *y) : NULL;
    if (!x || (u->perm_heads && !y)) {
        free(x);
        free(y);
        return NULL;
    }
    size_t rb = xi_qtype_row_bytes(t->type, cols);
    for (int64_t r = 0; r < rows; r++)
        xi_qtype_dequant_row(t->type, (const uint8_t *)t->data + (size_t)r * rb, x + r * cols, cols);
    if (u->perm_heads) {
        /* A 1-D bias permutes its values like the rows of its matrix. */
        int64_t n_rows = t->n_dims == 2 ? rows : cols, width = t->n_dims == 2 ? cols : 1;
        int64_t hd = n_rows / u->perm_heads, half = hd / 2;
        for (int64_t hh = 0; hh < u->perm_heads; hh++)
            for (int64_t i = 0; i < 2; i++)
                for (int64_t j = 0; j < half; j++)
                    memcpy(y + (hh * hd + i * half + j) * width, x + (hh * hd + 2 * j + i) * width,
                           (size_t)width * sizeof *x);
        free(x);
        x = y;
    }
    *rows_out = rows;
    *cols_out = cols;
    return x;
}

int xi_gguf_export_hf(const char *gguf_path, const char *out_dir, xi_dtype dtype, char *err,
                      size_t errlen) {
    if (dtype != XI_F32 && dtype != XI_BF16 && dtype != XI_F16)
        return xi_errf(err, errlen, "export dtype must be f32, bf16 or f16");
    xi_gguf *g = xi_gguf_open(gguf_path, err, errlen);
    if (!g) return -1;
    hp h;
    unit *u = NULL;
    int n = 0, rc = -1;
    xi_st_spec *specs = NULL;
    FILE *f = NULL;
    char *st = NULL;
    if (read_hparams(g, &h, err, errlen) || plan_units(g, &h, &u, &n, err, errlen) ||
        write_config(g, &h, out_dir, dtype, err, errlen))
        goto out;
    specs = xi_calloc((size_t)n, sizeof *specs);
    st = xi_path_join(out_dir, "model.safetensors");
    f = st ? fopen(st, "wb") : NULL;
    if (!specs || !f) {
        xi_errf(err, errlen, "%s: cannot create", st ? st : out_dir);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        const xi_gguf_tensor *t = u[i].src;
        /* Norms stay F32, as the loader keeps them. */
        xi_dtype d = t->n_dims == 1 ? XI_F32 : dtype;
        specs[i] = (xi_st_spec){u[i].name, d, t->n_dims, {0}};
        if (t->n_dims == 2) specs[i].shape[0] = t->ne[1], specs[i].shape[1] = t->ne[0];
        else specs[i].shape[0] = t->ne[0];
    }
    if (xi_st_write_header(f, specs, n, NULL, 0, err, errlen) < 0) goto out;
    for (int i = 0; i < n; i++) {
        int64_t rows, cols;
        float *x = dequant_unit(&u[i], &rows, &cols);
        if (!x) {
            xi_errf(err, errlen, "tensor %s: out of memory", u[i].src->name);
            goto out;
        }
        size_t cnt = (size_t)(rows * cols), es = xi_dtype_size(specs[i].dtype);
        void *buf = specs[i].dtype == XI_F32 ? (void *)x : malloc(cnt * es);
        if (buf && buf != x) xi_from_f32(buf, specs[i].dtype, x, cnt);
        int bad = !buf || fwrite(buf, es, cnt, f) != cnt;
        if (buf != x) free(buf);
        free(x);
        if (bad) {
            xi_errf(err, errlen, "%s: write failed", st);
            goto out;
        }
    }
    rc = 0;
out:
    if (f && fclose(f) && !rc) rc = xi_errf(err, errlen, "%s: write failed", st);
    if (rc) xi_err_prefix(err, errlen, "%s", gguf_path);
    free(st);
    free(specs);
    free(u);
    xi_gguf_close(g);
    return rc;
}
