/* model/loader: bind every expected tensor of a Llama / Qwen2 checkpoint by name, check its
 * dtype and shape, and place it in the engine's memory.
 *
 * Default: weights are copied into anonymous, 2 MiB aligned, MADV_HUGEPAGE memory (measured:
 * page-cache-backed mmap pages made decode up to 2x slower). load_format "mmap" keeps
 * zero-copy pointers into the file mapping where no conversion is needed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model/model_internal.h"

int xi_model_own(xi_model *m, void *p, size_t bytes, int big) {
    if (m->n_owned == m->cap_owned) {
        int cap = m->cap_owned ? m->cap_owned * 2 : 64;
        xi_owned *o = realloc(m->owned, (size_t)cap * sizeof *o);
        if (!o) return -1;
        m->owned = o;
        m->cap_owned = cap;
    }
    m->owned[m->n_owned++] = (xi_owned){p, bytes, big};
    return 0;
}

static void *own_big(xi_model *m, size_t bytes) {
    void *p = xi_alloc_big(bytes);
    if (p && xi_model_own(m, p, bytes, 1)) {
        xi_free_big(p, bytes);
        return NULL;
    }
    return p;
}

static int dtype_from_name(const char *s, xi_dtype *out) {
    if (!s || !*s || !strcmp(s, "auto")) return 1;
    if (!strcmp(s, "float32") || !strcmp(s, "float")) *out = XI_F32;
    else if (!strcmp(s, "bfloat16")) *out = XI_BF16;
    else if (!strcmp(s, "float16") || !strcmp(s, "half")) *out = XI_F16;
    else return -1;
    return 0;
}

static void shape_str(char *buf, size_t n, int nd, const int64_t *shape) {
    int o = snprintf(buf, n, "[");
    for (int i = 0; i < nd && o < (int)n; i++)
        o += snprintf(buf + o, n - (size_t)o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (o < (int)n) snprintf(buf + o, n - (size_t)o, "]");
}

/* Find a tensor and check its shape (and that it is a float type when float_only). */
static const xi_st_tensor *bind(xi_model *m, const char *name, int nd, const int64_t *shape,
                                int float_only, char *err, size_t errlen) {
    const xi_st_tensor *t = xi_st_find(m->st, name);
    char want[96], got[96];
    shape_str(want, sizeof want, nd, shape);
    if (!t) {
        xi_errf(err, errlen, "%s: missing tensor (expected %s)", name, want);
        return NULL;
    }
    int ok = t->n_dims == nd;
    for (int i = 0; ok && i < nd; i++) ok = t->shape[i] == shape[i];
    if (float_only && t->dtype != XI_F32 && t->dtype != XI_F16 && t->dtype != XI_BF16) {
        shape_str(got, sizeof got, t->n_dims, t->shape);
        xi_errf(err, errlen, "%s: tensor %s: dtype %s is not supported (expected f32, f16 or bf16)",
                t->file, name, xi_dtype_name(t->dtype));
        return NULL;
    }
    if (!ok) {
        shape_str(got, sizeof got, t->n_dims, t->shape);
        xi_errf(err, errlen, "%s: tensor %s: expected shape %s, found %s %s", t->file, name, want,
                got, xi_dtype_name(t->dtype));
        return NULL;
    }
    return t;
}

/* A float matrix [rows, cols] as an xi_weight in the model's weight dtype. */
static int load_matrix(xi_model *m, xi_weight *w, const char *name, int64_t rows, int64_t cols,
                       int zero_copy, char *err, size_t errlen) {
    int64_t shape[2] = {rows, cols};
    const xi_st_tensor *t = bind(m, name, 2, shape, 1, err, errlen);
    if (!t) return -1;
    xi_dtype want = m->wdtype;
    memset(w, 0, sizeof *w);
    w->dtype = want;
    w->n_out = rows;
    w->n_in = cols;
    m->n_params += rows * cols;
    size_t n = (size_t)(rows * cols);
    size_t bytes = n * xi_dtype_size(want);
    m->weight_bytes += (int64_t)bytes;
    if (t->dtype == want && zero_copy) {
        w->data = t->data;
        return 0;
    }
    void *dst = own_big(m, bytes);
    if (!dst) return xi_errf(err, errlen, "%s: out of memory (%zu bytes)", name, bytes);
    if (t->dtype == want) {
        memcpy(dst, t->data, bytes);
    } else {
        /* convert through f32 in row chunks */
        float *tmp = malloc((size_t)cols * sizeof(float));
        if (!tmp) return xi_errf(err, errlen, "%s: out of memory", name);
        const size_t es = xi_dtype_size(t->dtype), ed = xi_dtype_size(want);
        for (int64_t r = 0; r < rows; r++) {
            xi_to_f32(tmp, (const char *)t->data + (size_t)(r * cols) * es, t->dtype, (size_t)cols);
            xi_from_f32((char *)dst + (size_t)(r * cols) * ed, want, tmp, (size_t)cols);
        }
        free(tmp);
    }
    w->data = dst;
    return 0;
}

/* A vector (norm weight, bias) as f32. */
static float *load_vector(xi_model *m, const char *name, int64_t n, char *err, size_t errlen) {
    const xi_st_tensor *t = bind(m, name, 1, &n, 1, err, errlen);
    if (!t) return NULL;
    float *v = own_big(m, (size_t)n * sizeof(float));
    if (!v) {
        xi_errf(err, errlen, "%s: out of memory", name);
        return NULL;
    }
    xi_to_f32(v, t->data, t->dtype, (size_t)n);
    m->n_params += n;
    m->weight_bytes += n * (int64_t)xi_dtype_size(t->dtype);
    return v;
}

static int load_layer(xi_model *m, int l, int zero_copy, char *err, size_t errlen) {
    const xi_config *c = &m->cfg;
    xi_layer *L = &m->layers[l];
    const int64_t h = c->hidden_size, qd = (int64_t)c->n_heads * c->head_dim,
                  kvd = (int64_t)c->n_kv_heads * c->head_dim, ff = c->intermediate_size;
    char name[256];
#define NAME(suffix) (snprintf(name, sizeof name, "model.layers.%d.%s", l, suffix), name)
    if (load_matrix(m, &L->wq, NAME("self_attn.q_proj.weight"), qd, h, zero_copy, err, errlen) ||
        load_matrix(m, &L->wk, NAME("self_attn.k_proj.weight"), kvd, h, zero_copy, err, errlen) ||
        load_matrix(m, &L->wv, NAME("self_attn.v_proj.weight"), kvd, h, zero_copy, err, errlen) ||
        load_matrix(m, &L->wo, NAME("self_attn.o_proj.weight"), h, qd, zero_copy, err, errlen) ||
        load_matrix(m, &L->wgate, NAME("mlp.gate_proj.weight"), ff, h, zero_copy, err, errlen) ||
        load_matrix(m, &L->wup, NAME("mlp.up_proj.weight"), ff, h, zero_copy, err, errlen) ||
        load_matrix(m, &L->wdown, NAME("mlp.down_proj.weight"), h, ff, zero_copy, err, errlen))
        return -1;
    if (!(L->attn_norm = load_vector(m, NAME("input_layernorm.weight"), h, err, errlen)) ||
        !(L->ffn_norm = load_vector(m, NAME("post_attention_layernorm.weight"), h, err, errlen)))
        return -1;
    if (c->attention_bias) {
        if (!(L->bq = load_vector(m, NAME("self_attn.q_proj.bias"), qd, err, errlen)) ||
            !(L->bk = load_vector(m, NAME("self_attn.k_proj.bias"), kvd, err, errlen)) ||
            !(L->bv = load_vector(m, NAME("self_attn.v_proj.bias"), kvd, err, errlen)))
            return -1;
    }
#undef NAME
    return 0;
}

xi_model *xi_model_load(const xi_model_params *p, char *err, size_t errlen) {
    xi_model *m = calloc(1, sizeof *m);
    if (!m) {
        xi_errf(err, errlen, "out of memory");
        return NULL;
    }
    if (xi_config_load(&m->cfg, p->dir, err, errlen)) {
        free(m);
        return NULL;
    }
    const xi_config *c = &m->cfg;
    m->ops = xi_ops_select(p->kernels, err, errlen);
    if (!m->ops) goto fail;
    m->wdtype = c->torch_dtype;
    int r = dtype_from_name(p->dtype, &m->wdtype);
    if (r < 0) {
        xi_errf(err, errlen, "--dtype %s: expected auto, float32, bfloat16 or float16", p->dtype);
        goto fail;
    }
    m->quant = "none";
    if (p->quantization && *p->quantization && strcmp(p->quantization, "auto") &&
        strcmp(p->quantization, "none")) {
        xi_errf(err, errlen, "--quantization %s: not supported by this build", p->quantization);
        goto fail;
    }
    if (c->quant_awq) {
        xi_errf(err, errlen, "%s: AWQ checkpoints are not supported by this build yet", p->dir);
        goto fail;
    }
    m->st = xi_st_open_dir(p->dir, err, errlen);
    if (!m->st) goto fail;
    const xi_st_tensor *emb = xi_st_find(m->st, "model.embed_tokens.weight");
    if (r == 1 && emb && (emb->dtype == XI_F32 || emb->dtype == XI_F16 || emb->dtype == XI_BF16))
        m->wdtype = emb->dtype; /* auto: as stored */
    int zero_copy = p->load_format && !strcmp(p->load_format, "mmap");
    if (p->load_format && *p->load_format && strcmp(p->load_format, "mmap") &&
        strcmp(p->load_format, "auto") && strcmp(p->load_format, "safetensors")) {
        xi_errf(err, errlen, "--load-format %s: expected auto, safetensors or mmap", p->load_format);
        goto fail;
    }
    if (load_matrix(m, &m->embed, "model.embed_tokens.weight", c->vocab_size, c->hidden_size,
                    zero_copy, err, errlen))
        goto fail;
    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    if (!m->layers) goto oom;
    for (int l = 0; l < c->n_layers; l++)
        if (load_layer(m, l, zero_copy, err, errlen)) goto fail;
    if (!(m->final_norm = load_vector(m, "model.norm.weight", c->hidden_size, err, errlen)))
        goto fail;
    if (c->tie_word_embeddings) {
        m->lm_head = m->embed;
    } else if (load_matrix(m, &m->lm_head, "lm_head.weight", c->vocab_size, c->hidden_size,
                           zero_copy, err, errlen)) {
        goto fail;
    }
    m->inv_freq = calloc((size_t)c->head_dim / 2, sizeof(double));
    if (!m->inv_freq) goto oom;
    xi_rope_frequencies(c, m->inv_freq, &m->rope_mscale);
    m->pool = xi_pool_new(p->n_threads);
    if (!m->pool) goto oom;
    if (!zero_copy) {
        xi_st_close(m->st); /* every weight now lives in our memory */
        m->st = NULL;
    }
    return m;
oom:
    xi_errf(err, errlen, "out of memory");
fail:
    xi_model_free(m);
    return NULL;
}

void xi_model_free(xi_model *m) {
    if (!m) return;
    xi_pool_free(m->pool);
    for (int i = m->n_owned - 1; i >= 0; i--) {
        if (m->owned[i].big) xi_free_big(m->owned[i].p, m->owned[i].bytes);
        else free(m->owned[i].p);
    }
    free(m->owned);
    free(m->layers);
    free(m->inv_freq);
    free(m->x);
    free(m->xn);
    free(m->q);
    free(m->k);
    free(m->v);
    free(m->att);
    free(m->gate);
    free(m->up);
    free(m->cs);
    free(m->hlast);
    free(m->attn_scratch);
    if (m->st) xi_st_close(m->st);
    xi_config_free(&m->cfg);
    free(m);
}

const xi_config *xi_model_config(const xi_model *m) { return &m->cfg; }
const xi_ops *xi_model_ops(const xi_model *m) { return m->ops; }
xi_dtype xi_model_dtype(const xi_model *m) { return m->wdtype; }
int64_t xi_model_weight_bytes(const xi_model *m) { return m->weight_bytes; }
int64_t xi_model_n_params(const xi_model *m) { return m->n_params; }
int xi_model_n_threads(const xi_model *m) { return xi_pool_size(m->pool); }
