/* model/loader: bind every tensor the architecture's per-layer spec lists (model/arch.h), by
 * the family's names, check its dtype and shape, and place it in the engine's memory.
 *
 * Default: weights are copied into anonymous, 2 MiB aligned, MADV_HUGEPAGE memory (measured:
 * page-cache-backed mmap pages made decode up to 2x slower). load_format "mmap" keeps
 * zero-copy pointers into the file mapping where no conversion is needed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "kernels/wformat.h"
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

/* A tensor of the model's source (safetensors or GGUF) by name, or NULL. */
static const xi_st_tensor *lookup(xi_model *m, const char *name) {
    return m->gw ? xi_gguf_weights_find(m->gw, name) : xi_st_find(m->st, name);
}

/* Find a tensor and check its shape (and that it is a float type when float_only). */
static const xi_st_tensor *bind(xi_model *m, const char *name, int nd, const int64_t *shape,
                                int float_only, char *err, size_t errlen) {
    const xi_st_tensor *t = lookup(m, name);
    char want[96], got[96];
    shape_str(want, sizeof want, nd, shape);
    if (!t) {
        xi_errf(err, errlen, "%s: missing tensor (expected %s)", name, want);
        return NULL;
    }
    int ok = t->n_dims == nd;
    for (int i = 0; ok && i < nd; i++) ok = t->shape[i] == shape[i];
    if (float_only && t->dtype != XI_F32 && t->dtype != XI_F16 && t->dtype != XI_BF16 &&
        !(t->qtype && nd == 2)) {
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

/* A GGUF matrix in a ggml block format, kept as stored: rows [r0, r1) and columns [c0, c1)
 * of each row, whole blocks (shard.c refuses a -tp whose column slices would cut them;
 * zero-copy with whole rows and mmap). */
static int load_ggml(xi_model *m, xi_weight *w, const xi_st_tensor *t, const char *name,
                     int64_t cols, const xi_slice *sl, int zero_copy, char *err, size_t errlen) {
    const struct xi_qtype *qt = t->qtype;
    const int64_t R = sl->r1 - sl->r0, C = sl->c1 - sl->c0, B = qt->block;
    const size_t rb = xi_qtype_row_bytes(qt, cols);
    m->n_params += R * C;
    if (sl->c0 % B == 0 && C % B == 0) {
        const size_t cb = xi_qtype_row_bytes(qt, C), off = (size_t)(sl->c0 / B) * (size_t)qt->block_bytes;
        *w = (xi_weight){.dtype = t->dtype, .n_out = R, .n_in = C, .qtype = qt};
        m->weight_bytes += (int64_t)(cb * (size_t)R);
        if (zero_copy && C == cols) {
            w->data = (const char *)t->data + (size_t)sl->r0 * rb;
            return 0;
        }
        char *dst = own_big(m, cb * (size_t)R);
        if (!dst) return xi_errf(err, errlen, "%s: out of memory (%zu bytes)", name, cb * (size_t)R);
        for (int64_t r = 0; r < R; r++)
            memcpy(dst + (size_t)r * cb, (const char *)t->data + (size_t)(sl->r0 + r) * rb + off, cb);
        w->data = dst;
        return 0;
    }
    /* xi_shard_plan checked the alignment; this guards a caller that did not */
    return xi_errf(err, errlen, "%s: columns %lld..%lld cut its %s blocks of %lld", name,
                   (long long)sl->c0, (long long)sl->c1, qt->name, (long long)B);
}

/* A float matrix [rows, cols] as an xi_weight in the model's weight dtype; with a slice
 * (tensor parallelism), only rows [r0, r1) x columns [c0, c1) of it are read and kept. A GGUF
 * matrix in a ggml block format stays in it (load_ggml). */
static int load_matrix(xi_model *m, xi_weight *w, const char *name, int64_t rows, int64_t cols,
                       const xi_slice *sl, int zero_copy, char *err, size_t errlen) {
    int64_t shape[2] = {rows, cols};
    const xi_st_tensor *t = bind(m, name, 2, shape, 1, err, errlen);
    if (!t) return -1;
    const xi_slice full = {0, rows, 0, cols};
    if (!sl) sl = &full;
    if (t->qtype) return load_ggml(m, w, t, name, cols, sl, zero_copy, err, errlen);
    const int64_t R = sl->r1 - sl->r0, C = sl->c1 - sl->c0;
    xi_dtype want = m->wdtype;
    memset(w, 0, sizeof *w);
    w->dtype = want;
    w->n_out = R;
    w->n_in = C;
    m->n_params += R * C;
    size_t bytes = (size_t)(R * C) * xi_dtype_size(want);
    m->weight_bytes += (int64_t)bytes;
    const size_t es = xi_dtype_size(t->dtype), ed = xi_dtype_size(want);
    /* rows r0.. are contiguous in the file: zero-copy needs whole rows */
    if (t->dtype == want && zero_copy && C == cols) {
        w->data = (const char *)t->data + (size_t)(sl->r0 * cols) * es;
        return 0;
    }
    void *dst = own_big(m, bytes);
    if (!dst) return xi_errf(err, errlen, "%s: out of memory (%zu bytes)", name, bytes);
    if (t->dtype == want && C == cols) {
        memcpy(dst, (const char *)t->data + (size_t)(sl->r0 * cols) * es, bytes);
    } else {
        /* convert through f32 (or copy) row by row: only the slice's bytes are read */
        float *tmp = malloc((size_t)C * sizeof(float));
        if (!tmp) return xi_errf(err, errlen, "%s: out of memory", name);
        for (int64_t r = 0; r < R; r++) {
            const char *src = (const char *)t->data + (size_t)((sl->r0 + r) * cols + sl->c0) * es;
            char *d = (char *)dst + (size_t)(r * C) * ed;
            if (t->dtype == want) {
                memcpy(d, src, (size_t)C * es);
            } else {
                xi_to_f32(tmp, src, t->dtype, (size_t)C);
                xi_from_f32(d, want, tmp, (size_t)C);
            }
        }
        free(tmp);
    }
    w->data = dst;
    return 0;
}

/* Elements [b, e) of a vector of n (norm weight: all; bias: this rank's) as f32. */
static float *load_vector_part(xi_model *m, const char *name, int64_t n, int64_t b, int64_t e,
                               char *err, size_t errlen) {
    const xi_st_tensor *t = bind(m, name, 1, &n, 1, err, errlen);
    if (!t) return NULL;
    float *v = own_big(m, (size_t)(e - b) * sizeof(float));
    if (!v) {
        xi_errf(err, errlen, "%s: out of memory", name);
        return NULL;
    }
    xi_to_f32(v, (const char *)t->data + (size_t)b * xi_dtype_size(t->dtype), t->dtype, (size_t)(e - b));
    m->n_params += e - b;
    m->weight_bytes += (e - b) * (int64_t)xi_dtype_size(t->dtype);
    return v;
}

static float *load_vector(xi_model *m, const char *name, int64_t n, char *err, size_t errlen) {
    return load_vector_part(m, name, n, 0, n, err, errlen);
}

/* Is this module kept in 16 bits by the AWQ checkpoint? (HF: substring match.) */
static int awq_skipped(const xi_config *c, const char *module) {
    for (int i = 0; i < c->n_modules_to_not_convert; i++)
        if (strstr(module, c->modules_to_not_convert[i])) return 1;
    return 0;
}

static const xi_st_tensor *find_typed(xi_model *m, const char *module, const char *suffix,
                                      xi_dtype want, char *err, size_t errlen) {
    char name[300];
    snprintf(name, sizeof name, "%s.%s", module, suffix);
    const xi_st_tensor *t = lookup(m, name);
    if (!t) {
        xi_errf(err, errlen, "%s: missing tensor (AWQ checkpoint)", name);
        return NULL;
    }
    if (t->dtype != want || t->n_dims != 2) {
        xi_errf(err, errlen, "%s: tensor %s: expected a 2-D %s tensor, found %d-D %s", t->file, name,
                xi_dtype_name(want), t->n_dims, xi_dtype_name(t->dtype));
        return NULL;
    }
    return t;
}

int xi_awq_repack(const xi_model *m, xi_weight *w, const xi_awq_src *src, void **owned,
                  size_t *owned_bytes, char *err, size_t errlen) {
    if (xi_shard_pack_awq(w, src->qweight, src->qzeros, src->scales, src->n_in, src->n_out,
                          m->cfg.quant_group_size, &src->sl, owned, owned_bytes, err, errlen))
        return -1;
    if (xi_weight_block(w, xi_weight_block_for(m->ops, w), err, errlen)) {
        xi_free_big(*owned, *owned_bytes);
        w->data = NULL;
        return -1;
    }
    return 0;
}

/* AutoAWQ GEMM: qweight [in, out/8] i32, qzeros [in/group, out/8] i32, scales [in/group, out]
 * f16; repacked into the kernels' Q4 layout now, or, with lazy set (MoE experts under
 * --load-format mmap), described there for a repack on first use and left without data. */
static int load_awq(xi_model *m, xi_weight *w, xi_awq_src *lazy, const char *module, int64_t rows,
                    int64_t cols, const xi_slice *sl, char *err, size_t errlen) {
    const xi_st_tensor *qw = find_typed(m, module, "qweight", XI_I32, err, errlen);
    const xi_st_tensor *qz = qw ? find_typed(m, module, "qzeros", XI_I32, err, errlen) : NULL;
    const xi_st_tensor *sc = qz ? find_typed(m, module, "scales", XI_F16, err, errlen) : NULL;
    if (!sc) return -1;
    int64_t n_in, n_out;
    if (xi_awq_check_shapes(qw->shape, qz->shape, sc->shape, m->cfg.quant_group_size, &n_in,
                            &n_out, err, errlen))
        return xi_err_prefix(err, errlen, "%s: %s", qw->file, module);
    if (n_in != cols || n_out != rows)
        return xi_errf(err, errlen, "%s: %s: AWQ tensors give [%lld, %lld], expected [%lld, %lld]",
                       qw->file, module, (long long)n_out, (long long)n_in, (long long)rows,
                       (long long)cols);
    const xi_awq_src src = {qw->data, qz->data, sc->data, n_in, n_out,
                            sl ? *sl : (xi_slice){0, rows, 0, cols}};
    const int64_t part = (src.sl.r1 - src.sl.r0) * (src.sl.c1 - src.sl.c0);
    m->n_params += part;
    m->weight_bytes += (int64_t)(qw->nbytes + qz->nbytes + sc->nbytes) * part / (rows * cols);
    if (lazy) {
        *lazy = src;
        *w = (xi_weight){.dtype = m->qfmt->dtype, .n_out = src.sl.r1 - src.sl.r0,
                         .n_in = src.sl.c1 - src.sl.c0, .group_size = m->cfg.quant_group_size};
        return 0;
    }
    void *owned;
    size_t bytes;
    if (xi_awq_repack(m, w, &src, &owned, &bytes, err, errlen))
        return xi_err_prefix(err, errlen, "%s: %s", qw->file, module);
    if (xi_model_own(m, owned, bytes, 1)) {
        xi_free_big(owned, bytes);
        return xi_errf(err, errlen, "out of memory");
    }
    return 0;
}

/* The matrix name [rows, cols] (or its slice sl, NULL: all) quantized to int8 per output row
 * (the int8 row of kernels/wformat.h) in the kernels' layout; a GGUF matrix in a ggml block
 * format stays as stored. */
static int load_q8(xi_model *m, xi_weight *w, const char *name, int64_t rows, int64_t cols,
                   const xi_slice *sl, int zero_copy, char *err, size_t errlen) {
    int64_t shape[2] = {rows, cols};
    const xi_st_tensor *t = bind(m, name, 2, shape, 1, err, errlen);
    if (!t) return -1;
    const xi_slice full = {0, rows, 0, cols};
    if (t->qtype) /* a ggml block type, already quantized: kept as it is */
        return load_ggml(m, w, t, name, cols, sl ? sl : &full, zero_copy, err, errlen);
    void *owned;
    size_t bytes;
    if (xi_shard_quantize_q8(w, t->data, t->dtype, rows, cols, sl, &owned, &bytes, err, errlen))
        return xi_err_prefix(err, errlen, "%s: %s", t->file, name);
    if (xi_model_own(m, owned, bytes, 1)) {
        xi_free_big(owned, bytes);
        return xi_errf(err, errlen, "out of memory");
    }
    m->n_params += w->n_out * w->n_in;
    m->weight_bytes += w->n_out * w->n_in + w->n_out * 4;
    return xi_weight_block(w, xi_weight_block_for(m->ops, w), err, errlen);
}

/* The linear loaders of the quantized formats: 0 done, -1 error, 1 not this module's (an
 * AWQ checkpoint's modules_to_not_convert): loaded as a float matrix. */
typedef int (*linear_fn)(xi_model *m, xi_weight *w, const char *module, const char *name, int64_t rows,
                         int64_t cols, const xi_slice *sl, int zero_copy, char *err, size_t errlen);

static int linear_awq(xi_model *m, xi_weight *w, const char *module, const char *name, int64_t rows,
                      int64_t cols, const xi_slice *sl, int zero_copy, char *err, size_t errlen) {
    (void)name, (void)zero_copy;
    return awq_skipped(&m->cfg, module) ? 1 : load_awq(m, w, NULL, module, rows, cols, sl, err, errlen);
}

static int linear_q8(xi_model *m, xi_weight *w, const char *module, const char *name, int64_t rows,
                     int64_t cols, const xi_slice *sl, int zero_copy, char *err, size_t errlen) {
    (void)module;
    return load_q8(m, w, name, rows, cols, sl, zero_copy, err, errlen);
}

/* --quantization: the weight format (wformat row name) each name loads the linears in, and
 * how; whether that format is the checkpoint's own (AWQ: config.json must say so; the others
 * refuse an AWQ checkpoint). "none": as stored. */
typedef struct quant_mode {
    const char *name;
    const char *fmt;
    int awq_checkpoint;
    linear_fn load;
} quant_mode;
static const quant_mode QUANT_MODES[] = {
    {"none", NULL, 0, NULL},
    {"awq", "awq-int4", 1, linear_awq},
    {"int8", "int8", 0, linear_q8},
};

static const quant_mode *quant_mode_by_name(const char *name) {
    for (size_t i = 0; i < XI_ARRAY_LEN(QUANT_MODES); i++)
        if (!strcmp(QUANT_MODES[i].name, name)) return &QUANT_MODES[i];
    return NULL;
}

/* A linear layer's weight `module`.weight [rows, cols] (or its slice sl, NULL: all) in the
 * format of --quantization, or a float matrix in the model's weight dtype. */
static int load_linear(xi_model *m, xi_weight *w, const char *module, int64_t rows, int64_t cols,
                       const xi_slice *sl, int zero_copy, char *err, size_t errlen) {
    char name[300];
    snprintf(name, sizeof name, "%s.weight", module);
    const int r = m->qmode->load ? m->qmode->load(m, w, module, name, rows, cols, sl, zero_copy, err, errlen) : 1;
    if (r <= 0) return r;
    if (load_matrix(m, w, name, rows, cols, sl, zero_copy, err, errlen)) return -1;
    /* The kernels' blocked layout, repacked in place in our copy (an mmap stays as stored). */
    return zero_copy && w->n_in == cols ? 0 : xi_weight_block(w, xi_weight_block_for(m->ops, w), err, errlen);
}

/* Optional bias: required by the architecture (want) or present in the checkpoint. */
static int load_bias(xi_model *m, float **out, const char *module, int64_t n, const xi_slice *sl,
                     int want, char *err, size_t errlen) {
    char name[300];
    snprintf(name, sizeof name, "%s.bias", module);
    *out = NULL;
    if (!want && !lookup(m, name)) return 0;
    *out = load_vector_part(m, name, n, sl->r0, sl->r1, err, errlen);
    return *out ? 0 : -1;
}

/* The module name of role (layer l, expert e) in buf[256]: Hugging Face's, or GGUF's with
 * ".E" after a stacked expert tensor's name (model/gguf_model.h). */
static const char *tname(const xi_model *m, xi_tensor_role role, int l, int e, char *buf) {
    xi_naming naming = m->gw ? XI_NAMES_GGUF : XI_NAMES_HF;
    if (xi_arch_tensor_name(m->cfg.family, naming, role, l, e, buf, 256)) buf[0] = 0;
    else if (m->gw && (role == XI_T_EXP_GATE || role == XI_T_EXP_UP || role == XI_T_EXP_DOWN))
        snprintf(buf + strlen(buf), 256 - strlen(buf), ".%d", e);
    return buf;
}

static float *load_norm(xi_model *m, xi_tensor_role role, int l, int64_t n, char *err,
                        size_t errlen) {
    char mod[256], name[300];
    snprintf(name, sizeof name, "%s.weight", tname(m, role, l, 0, mod));
    return load_vector(m, name, n, err, errlen);
}

/* A MoE layer: the router in the model's float dtype (AWQ checkpoints keep it unquantized
 * and int8 leaves it alone: it is tiny and decides which experts run), and every expert's
 * SwiGLU as linears of any weight format. */
static int load_moe(xi_model *m, xi_layer *L, const xi_layer_spec *sp, int l, int zero_copy,
                    char *err, size_t errlen) {
    const int64_t h = m->cfg.hidden_size, ff = sp->ffn, E = sp->n_experts;
    const int64_t ffl = ff / m->shard.tp, f0 = m->shard.rank * ffl;
    /* tensor parallel: every rank runs every expert on its ffn/tp columns (see shard.c) */
    const xi_slice up = {f0, f0 + ffl, 0, h}, down = {0, h, f0, f0 + ffl};
    char mod[256], name[300];
    snprintf(name, sizeof name, "%s.weight", tname(m, XI_T_FFN_ROUTER, l, 0, mod));
    if (load_matrix(m, &L->router, name, E, h, NULL, zero_copy, err, errlen) ||
        (!zero_copy && xi_weight_block(&L->router, xi_weight_block_for(m->ops, &L->router), err, errlen)))
        return -1;
    xi_weight *w = calloc((size_t)(3 * E), sizeof *w);
    if (!w || xi_model_own(m, w, (size_t)(3 * E) * sizeof *w, 0)) {
        free(w);
        return xi_errf(err, errlen, "out of memory");
    }
    L->egate = w, L->eup = w + E, L->edown = w + 2 * E;
    /* --load-format mmap: AWQ experts stay in the file until a token is routed to them */
    const int lazy = zero_copy && m->cfg.quant_awq;
    if (lazy && (!(L->esrc = calloc((size_t)(3 * E), sizeof *L->esrc)) ||
                 xi_model_own(m, L->esrc, (size_t)(3 * E) * sizeof *L->esrc, 0))) {
        free(L->esrc);
        L->esrc = NULL;
        return xi_errf(err, errlen, "out of memory");
    }
    const xi_tensor_role role[3] = {XI_T_EXP_GATE, XI_T_EXP_UP, XI_T_EXP_DOWN};
    for (int e = 0; e < E; e++)
        for (int k = 0; k < 3; k++) {
            xi_weight *we = &w[k * E + e];
            const int64_t rows = k < 2 ? ff : h, cols = k < 2 ? h : ff;
            const xi_slice *sl = k < 2 ? &up : &down;
            tname(m, role[k], l, e, mod);
            if (lazy && !awq_skipped(&m->cfg, mod) ? load_awq(m, we, &L->esrc[3 * e + k], mod, rows, cols, sl, err, errlen)
                                                   : load_linear(m, we, mod, rows, cols, sl, zero_copy, err, errlen))
                return -1;
        }
    return 0;
}

/* Bind what layer l's spec lists: this rank's shard of it (shard.c says which rows and
 * columns; with -tp 1 the slices are whole). */
static int load_layer(xi_model *m, int l, int zero_copy, char *err, size_t errlen) {
    const xi_config *c = &m->cfg;
    const xi_shard *S = &m->shard;
    const xi_layer_spec *sp = &c->layer[l];
    xi_layer *L = &m->layers[l];
    const int64_t h = c->hidden_size, hd = c->head_dim, qd = (int64_t)c->n_heads * hd,
                  kvd = (int64_t)c->n_kv_heads * hd, ff = sp->ffn;
    const int64_t ffl = ff / S->tp, f0 = S->rank * ffl;
    const xi_slice q = {S->q_head0 * hd, (S->q_head0 + S->n_heads) * hd, 0, h},
                   kv = {S->kv_head0 * hd, (S->kv_head0 + S->n_kv_heads) * hd, 0, h},
                   o = {0, h, q.r0, q.r1}, up = {f0, f0 + ffl, 0, h}, down = {0, h, f0, f0 + ffl};
    const int bias = sp->qkv_bias == XI_BIAS_REQUIRED;
    char mod[256];
    if (load_linear(m, &L->wq, tname(m, XI_T_ATTN_Q, l, 0, mod), qd, h, &q, zero_copy, err, errlen) ||
        load_bias(m, &L->bq, mod, qd, &q, bias, err, errlen) ||
        load_linear(m, &L->wk, tname(m, XI_T_ATTN_K, l, 0, mod), kvd, h, &kv, zero_copy, err, errlen) ||
        load_bias(m, &L->bk, mod, kvd, &kv, bias, err, errlen) ||
        load_linear(m, &L->wv, tname(m, XI_T_ATTN_V, l, 0, mod), kvd, h, &kv, zero_copy, err, errlen) ||
        load_bias(m, &L->bv, mod, kvd, &kv, bias, err, errlen) ||
        load_linear(m, &L->wo, tname(m, XI_T_ATTN_O, l, 0, mod), h, qd, &o, zero_copy, err, errlen))
        return -1;
    if (sp->qk_norm && (!(L->q_norm = load_norm(m, XI_T_ATTN_Q_NORM, l, c->head_dim, err, errlen)) ||
                        !(L->k_norm = load_norm(m, XI_T_ATTN_K_NORM, l, c->head_dim, err, errlen))))
        return -1;
    switch (sp->mlp) {
    case XI_MLP_DENSE:
        if (load_linear(m, &L->wgate, tname(m, XI_T_FFN_GATE, l, 0, mod), ff, h, &up, zero_copy, err, errlen) ||
            load_linear(m, &L->wup, tname(m, XI_T_FFN_UP, l, 0, mod), ff, h, &up, zero_copy, err, errlen) ||
            load_linear(m, &L->wdown, tname(m, XI_T_FFN_DOWN, l, 0, mod), h, ff, &down, zero_copy, err, errlen))
            return -1;
        break;
    case XI_MLP_MOE:
        if (load_moe(m, L, sp, l, zero_copy, err, errlen)) return -1;
        break;
    }
    if (!(L->attn_norm = load_norm(m, XI_T_ATTN_NORM, l, h, err, errlen)) ||
        !(L->ffn_norm = load_norm(m, XI_T_FFN_NORM, l, h, err, errlen)))
        return -1;
    return 0;
}

static xi_model *load_model(const xi_model_params *p, char *err, size_t errlen) {
    xi_model *m = calloc(1, sizeof *m);
    if (!m) {
        xi_errf(err, errlen, "out of memory");
        return NULL;
    }
    int gguf = xi_gguf_is_file(p->dir);
    if (gguf && !(m->gguf = xi_gguf_open(p->dir, err, errlen))) {
        free(m);
        return NULL;
    }
    if (gguf ? xi_config_load_gguf(&m->cfg, m->gguf, p->dir, err, errlen)
             : xi_config_load(&m->cfg, p->dir, err, errlen)) {
        xi_gguf_close(m->gguf);
        free(m);
        return NULL;
    }
    const xi_config *c = &m->cfg;
    m->ops = xi_ops_precision(xi_ops_select(p->kernels, err, errlen), p->kernel_precision, err, errlen);
    if (!m->ops) goto fail;
    m->wdtype = c->torch_dtype;
    int r = dtype_from_name(p->dtype, &m->wdtype);
    if (r < 0) {
        xi_errf(err, errlen, "--dtype %s: expected auto, float32, bfloat16 or float16", p->dtype);
        goto fail;
    }
    /* quantization: "auto" follows the checkpoint; "awq" must match it; "int8" quantizes
     * float checkpoints at load; "none" refuses a quantized checkpoint. */
    const char *q = p->quantization && *p->quantization ? p->quantization : "auto";
    const quant_mode *qm = quant_mode_by_name(!strcmp(q, "auto") ? (c->quant_awq ? "awq" : "none") : q);
    if (!qm) {
        xi_errf(err, errlen, "--quantization %s: expected auto, awq, int8 or none", q);
        goto fail;
    }
    if (qm->awq_checkpoint != c->quant_awq) {
        if (qm->awq_checkpoint)
            xi_errf(err, errlen, "--quantization %s: %s/config.json has no AWQ quantization_config", q, p->dir);
        else
            xi_errf(err, errlen, "--quantization %s: %s is %s AWQ checkpoint", q, p->dir,
                    qm->fmt ? "already an" : "an");
        goto fail;
    }
    m->qmode = qm;
    m->qfmt = qm->fmt ? xi_wformat_by_name(qm->fmt) : NULL;
    m->quant = qm->name;
    const char *lq = p->lm_head_quantization && *p->lm_head_quantization ? p->lm_head_quantization : "none";
    if (strcmp(lq, "none") && strcmp(lq, "int8")) {
        xi_errf(err, errlen, "--lm-head-quantization %s: expected none or int8", lq);
        goto fail;
    }
    m->lm_head_q8 = !strcmp(lq, "int8");
    m->lm_head_quant = m->lm_head_q8 ? "int8" : "none";
    if (gguf && !strcmp(m->quant, "none"))
        for (int i = 0; i < xi_gguf_tensor_count(m->gguf); i++)
            if (xi_gguf_tensor_at(m->gguf, i)->type->unpack) m->quant = "gguf"; /* vLLM's name */
    if (xi_shard_plan(m, p->comm, err, errlen)) goto fail;
    int zero_copy = p->load_format && !strcmp(p->load_format, "mmap");
    if (gguf) m->gw = xi_gguf_weights_new(m->gguf, c, p->dir, !zero_copy, err, errlen);
    else m->st = xi_st_open_dir(p->dir, err, errlen);
    if (!m->st && !m->gw) goto fail;
    char mod[256], emb_name[300], name[300];
    snprintf(emb_name, sizeof emb_name, "%s.weight", tname(m, XI_T_TOKEN_EMBD, 0, 0, mod));
    const xi_st_tensor *emb = lookup(m, emb_name);
    if (r == 1 && emb && (emb->dtype == XI_F32 || emb->dtype == XI_F16 || emb->dtype == XI_BF16))
        m->wdtype = emb->dtype; /* auto: as stored (a dequantized GGUF: its config's dtype) */
    if (p->load_format && *p->load_format && strcmp(p->load_format, "mmap") &&
        strcmp(p->load_format, "auto") && strcmp(p->load_format, "safetensors")) {
        xi_errf(err, errlen, "--load-format %s: expected auto, safetensors or mmap", p->load_format);
        goto fail;
    }
    const int64_t before_embed = m->weight_bytes;
    if (load_matrix(m, &m->embed, emb_name, c->vocab_size, c->hidden_size, NULL,
                    zero_copy, err, errlen))
        goto fail;
    m->embed_bytes = m->weight_bytes - before_embed;
    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    if (!m->layers) goto oom;
    for (int l = 0; l < c->n_layers; l++) {
        if (load_layer(m, l, zero_copy, err, errlen)) goto fail;
        if (p->progress) p->progress(p->progress_user, (double)(l + 1) / (c->n_layers + 1));
    }
    if (!(m->final_norm = load_norm(m, XI_T_OUTPUT_NORM, 0, c->hidden_size, err, errlen)))
        goto fail;
    snprintf(name, sizeof name, "%s.weight", tname(m, XI_T_OUTPUT, 0, 0, mod));
    /* lm_head by vocabulary: this rank's rows, their logits gathered on rank 0 */
    const xi_slice vocab = {m->shard.vocab0, m->shard.vocab1, 0, c->hidden_size};
    if (m->lm_head_q8) {
        /* its own int8 copy of this rank's rows; a tied embedding stays 16-bit for the lookup
         * (its parameters are counted once) */
        const int64_t n_params = m->n_params;
        if (load_q8(m, &m->lm_head, c->tie_word_embeddings ? emb_name : name, c->vocab_size,
                    c->hidden_size, &vocab, zero_copy, err, errlen))
            goto fail;
        if (c->tie_word_embeddings && m->shard.tp == 1) m->n_params = n_params;
        const xi_wformat *lf = xi_wformat_of(&m->lm_head);
        if (lf != xi_wformat_by_name(m->lm_head_quant)) {
            m->lm_head_quant = "none";
            XI_INFO("--lm-head-quantization int8: %s is %s in the GGUF file; kept as stored",
                    c->tie_word_embeddings ? emb_name : name, lf->name);
        }
    } else if (m->shard.tp > 1) {
        if (load_matrix(m, &m->lm_head, c->tie_word_embeddings ? emb_name : name, c->vocab_size,
                        c->hidden_size, &vocab, zero_copy, err, errlen) ||
            (!zero_copy && xi_weight_block(&m->lm_head, xi_weight_block_for(m->ops, &m->lm_head),
                                           err, errlen)))
            goto fail;
    } else if (c->tie_word_embeddings) {
        if (!zero_copy && xi_weight_block(&m->embed, xi_weight_block_for(m->ops, &m->embed), err,
                                          errlen))
            goto fail;
        m->lm_head = m->embed;
    } else if (load_matrix(m, &m->lm_head, name, c->vocab_size, c->hidden_size, NULL,
                           zero_copy, err, errlen) ||
               (!zero_copy && xi_weight_block(&m->lm_head, xi_weight_block_for(m->ops, &m->lm_head),
                                              err, errlen))) {
        goto fail;
    }
    m->inv_freq = calloc((size_t)c->head_dim / 2, sizeof(double));
    if (!m->inv_freq) goto oom;
    xi_rope_frequencies(c, m->inv_freq, &m->rope_mscale);
    m->pool = xi_pool_new(p->n_threads);
    if (!m->pool) goto oom;
    xi_shard_localize(m); /* from here on cfg describes this rank's heads and ffn columns */
    if (p->progress) p->progress(p->progress_user, 1.0);
    if (!zero_copy) { /* every weight now lives in our memory */
        xi_st_close(m->st);
        xi_gguf_weights_free(m->gw);
        xi_gguf_close(m->gguf);
        m->st = NULL;
        m->gw = NULL;
        m->gguf = NULL;
    }
    return m;
oom:
    xi_errf(err, errlen, "out of memory");
fail:
    xi_model_free(m);
    return NULL;
}

xi_model *xi_model_load(const xi_model_params *p, char *err, size_t errlen) {
    xi_model *m = load_model(p, err, errlen);
    if (!p->comm || p->comm->size < 2) return m;
    /* The ranks meet once loaded: each learns whether every one of them has its shard. */
    float failed = m ? 0.0f : 1.0f;
    char cerr[256];
    if (p->comm->allreduce_sum(p->comm, &failed, 1, cerr, sizeof cerr)) {
        xi_errf(err, errlen, "%s", cerr);
        failed = 1;
    } else if (failed > 0 && m) {
        xi_errf(err, errlen, "tensor parallel: %g other rank(s) could not load their shard", failed);
    }
    if (failed > 0 && m) {
        xi_model_free(m);
        m = NULL;
    }
    if (m) m->tp_live = 1; /* the others now serve until told to stop */
    return m;
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
    free(m->attn_cost);
    xi_moe_free(&m->moe);
    xi_tp_free(m);
    if (m->st) xi_st_close(m->st);
    xi_gguf_weights_free(m->gw);
    xi_gguf_close(m->gguf);
    xi_config_free(&m->cfg);
    free(m);
}

const xi_config *xi_model_config(const xi_model *m) { return &m->cfg; }
const xi_ops *xi_model_ops(const xi_model *m) { return m->ops; }
xi_dtype xi_model_dtype(const xi_model *m) { return m->wdtype; }
int64_t xi_model_weight_bytes(const xi_model *m) { return m->weight_bytes; }
int64_t xi_model_step_bytes(const xi_model *m) {
    return m->weight_bytes - (m->lm_head.data == m->embed.data ? 0 : m->embed_bytes);
}
int64_t xi_model_n_params(const xi_model *m) { return m->n_params; }
int xi_model_n_threads(const xi_model *m) { return xi_pool_size(m->pool); }
const char *xi_model_quantization(const xi_model *m) { return m->quant; }
const char *xi_model_lm_head_quantization(const xi_model *m) { return m->lm_head_quant; }
