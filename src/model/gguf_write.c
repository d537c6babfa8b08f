/* model/gguf_write: the GGUF v3 writer behind the tests (and tools that make GGUF models).
 * Metadata is serialised into a buffer as it is added; tensors are remembered (data borrowed)
 * and laid out at write time, each at a multiple of the alignment in the data section. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model/gguf.h"
#include "tensor/dtype.h"

typedef struct w_tensor {
    char *name;
    int type, n_dims;
    int64_t ne[XI_GGUF_MAX_DIMS];
    const void *data;
    void *owned;       /* data converted by the writer, or NULL (borrowed) */
    size_t nbytes;
} w_tensor;

struct xi_gguf_writer {
    uint32_t align;
    xi_buf kv;        /* serialised key-values */
    uint64_t n_kv;
    w_tensor *tensors; /* [n_tensors] owned */
    int n_tensors;
    int failed;       /* an add ran out of memory or was invalid: write refuses */
};

static const int wsize[XI_GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

xi_gguf_writer *xi_gguf_writer_new(uint32_t alignment) {
    xi_gguf_writer *w = xi_calloc(1, sizeof *w);
    if (!w) return NULL;
    w->align = alignment ? alignment : 32;
    if (w->align != 32) xi_gguf_write_u32(w, "general.alignment", w->align);
    return w;
}

void xi_gguf_writer_free(xi_gguf_writer *w) {
    if (!w) return;
    xi_buf_free(&w->kv);
    for (int i = 0; i < w->n_tensors; i++) {
        free(w->tensors[i].name);
        free(w->tensors[i].owned);
    }
    free(w->tensors);
    free(w);
}

static int put(xi_gguf_writer *w, const void *p, size_t n) {
    if (xi_buf_append(&w->kv, p, n)) return w->failed = -1;
    return 0;
}

/* Little-endian on every host xinfer targets (x86-64, aarch64): values go out as stored. */
static int put_u32(xi_gguf_writer *w, uint32_t v) { return put(w, &v, 4); }
static int put_u64(xi_gguf_writer *w, uint64_t v) { return put(w, &v, 8); }

static int put_str(xi_gguf_writer *w, const char *s, size_t len) {
    return put_u64(w, len) || put(w, s, len) ? -1 : 0;
}

static int put_key(xi_gguf_writer *w, const char *key, xi_gguf_vtype t) {
    w->n_kv++;
    return put_str(w, key, strlen(key)) || put_u32(w, (uint32_t)t) ? -1 : 0;
}

int xi_gguf_write_scalar(xi_gguf_writer *w, const char *key, xi_gguf_vtype type, const void *val) {
    if ((unsigned)type >= XI_GGUF_VTYPE_COUNT || !wsize[type]) return w->failed = -1;
    return put_key(w, key, type) || put(w, val, (size_t)wsize[type]) ? -1 : 0;
}

int xi_gguf_write_str(xi_gguf_writer *w, const char *key, const char *s) {
    return put_key(w, key, XI_GGUF_STR) || put_str(w, s, strlen(s)) ? -1 : 0;
}

int xi_gguf_write_u32(xi_gguf_writer *w, const char *key, uint32_t v) {
    return xi_gguf_write_scalar(w, key, XI_GGUF_U32, &v);
}

int xi_gguf_write_f32(xi_gguf_writer *w, const char *key, float v) {
    return xi_gguf_write_scalar(w, key, XI_GGUF_F32, &v);
}

int xi_gguf_write_arr(xi_gguf_writer *w, const char *key, xi_gguf_vtype elem, uint64_t n,
                      const void *vals) {
    if ((unsigned)elem >= XI_GGUF_VTYPE_COUNT || !wsize[elem]) return w->failed = -1;
    return put_key(w, key, XI_GGUF_ARR) || put_u32(w, (uint32_t)elem) || put_u64(w, n) ||
                   put(w, vals, (size_t)n * (size_t)wsize[elem])
               ? -1
               : 0;
}

int xi_gguf_write_arr_str(xi_gguf_writer *w, const char *key, uint64_t n,
                          const char *const *strs, const uint32_t *lens) {
    if (put_key(w, key, XI_GGUF_ARR) || put_u32(w, XI_GGUF_STR) || put_u64(w, n)) return -1;
    for (uint64_t i = 0; i < n; i++)
        if (put_str(w, strs[i], lens ? lens[i] : strlen(strs[i]))) return -1;
    return 0;
}

int xi_gguf_write_tensor(xi_gguf_writer *w, const char *name, int type, int n_dims,
                         const int64_t *ne, const void *data) {
    const xi_qtype *qt = xi_qtype_get(type);
    if (!qt || n_dims < 1 || n_dims > XI_GGUF_MAX_DIMS) return w->failed = -1;
    w_tensor *a = realloc(w->tensors, (size_t)(w->n_tensors + 1) * sizeof *a);
    if (!a) return w->failed = -1;
    w->tensors = a;
    w_tensor *t = &a[w->n_tensors];
    memset(t, 0, sizeof *t);
    if (!(t->name = xi_strdup(name))) return w->failed = -1;
    t->type = type;
    t->n_dims = n_dims;
    int64_t rows = 1;
    for (int d = 0; d < n_dims; d++) {
        t->ne[d] = ne[d];
        if (d) rows *= ne[d];
    }
    size_t row = xi_qtype_row_bytes(qt, ne[0]);
    if (!row && ne[0]) {
        free(t->name);
        return w->failed = -1;
    }
    t->nbytes = row * (size_t)rows;
    t->data = data;
    w->n_tensors++;
    return 0;
}

int xi_gguf_write_tensor_f32(xi_gguf_writer *w, const char *name, int type, int n_dims,
                             const int64_t *ne, const float *x) {
    const xi_qtype *qt = xi_qtype_get(type);
    if (!qt || (type != XI_GGML_F32 && type != XI_GGML_F16 && type != XI_GGML_BF16 &&
                type != XI_GGML_Q8_0))
        return w->failed = -1;
    int64_t rows = 1;
    for (int d = 1; d < n_dims && d < XI_GGUF_MAX_DIMS; d++) rows *= ne[d];
    size_t rb = xi_qtype_row_bytes(qt, ne[0]);
    void *buf = malloc(rb * (size_t)rows + 1);
    if (!buf || (!rb && ne[0])) {
        free(buf);
        return w->failed = -1;
    }
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *dst = (uint8_t *)buf + (size_t)r * rb;
        const float *src = x + r * ne[0];
        /* Q8_0: f16 amax / 127 and the rounded values, as llama-quantize writes them. */
        if (type == XI_GGML_Q8_0) xi_qtype_quantize_q8_0_weights(src, dst, ne[0]);
        else xi_from_f32(dst, type == XI_GGML_F32 ? XI_F32 : type == XI_GGML_F16 ? XI_F16 : XI_BF16,
                         src, (size_t)ne[0]);
    }
    if (xi_gguf_write_tensor(w, name, type, n_dims, ne, buf)) {
        free(buf);
        return -1;
    }
    w->tensors[w->n_tensors - 1].owned = buf;
    return 0;
}

static int pad(FILE *f, uint64_t *at, uint32_t align) {
    static const char zeros[64];
    while (*at % align) {
        size_t n = (size_t)XI_MIN(align - *at % align, sizeof zeros);
        if (fwrite(zeros, 1, n, f) != n) return -1;
        *at += n;
    }
    return 0;
}

int xi_gguf_writer_write(xi_gguf_writer *w, const char *path, char *err, size_t errlen) {
    return xi_gguf_writer_write_fill(w, path, NULL, NULL, err, errlen);
}

int xi_gguf_writer_write_fill(xi_gguf_writer *w, const char *path, xi_gguf_fill_fn fill,
                              void *ctx, char *err, size_t errlen) {
    if (w->failed) return xi_errf(err, errlen, "%s: a metadata value or tensor was invalid", path);
    for (int i = 0; i < w->n_tensors; i++)
        if (!w->tensors[i].data && w->tensors[i].nbytes && !fill)
            return xi_errf(err, errlen, "%s: tensor %s: no data", path, w->tensors[i].name);
    FILE *f = fopen(path, "wb");
    if (!f) return xi_errf(err, errlen, "%s: cannot create", path);
    xi_buf h = {0};
    uint32_t version = 3;
    uint64_t nt = (uint64_t)w->n_tensors;
    int bad = xi_buf_append(&h, "GGUF", 4) || xi_buf_append(&h, &version, 4) ||
              xi_buf_append(&h, &nt, 8) || xi_buf_append(&h, &w->n_kv, 8) ||
              xi_buf_append(&h, w->kv.data ? w->kv.data : "", w->kv.len);
    uint64_t off = 0;
    for (int i = 0; i < w->n_tensors && !bad; i++) {
        const w_tensor *t = &w->tensors[i];
        uint64_t nl = strlen(t->name), nd = (uint64_t)t->n_dims;
        uint32_t nd32 = (uint32_t)nd, type = (uint32_t)t->type;
        bad |= xi_buf_append(&h, &nl, 8) || xi_buf_append(&h, t->name, nl) ||
               xi_buf_append(&h, &nd32, 4);
        for (int d = 0; d < t->n_dims; d++) bad |= xi_buf_append(&h, &t->ne[d], 8);
        bad |= xi_buf_append(&h, &type, 4) || xi_buf_append(&h, &off, 8);
        off = (off + t->nbytes + w->align - 1) / w->align * w->align;
    }
    uint64_t at = h.len;
    bad = bad || fwrite(h.data, 1, h.len, f) != h.len || pad(f, &at, w->align);
    xi_buf_free(&h);
    int short_fill = -1;
    for (int i = 0; i < w->n_tensors && !bad; i++) {
        const w_tensor *t = &w->tensors[i];
        if (t->data || !t->nbytes) {
            bad = (t->nbytes && fwrite(t->data, 1, t->nbytes, f) != t->nbytes);
        } else {
            bad = fill(ctx, i, f) != 0;
            /* the callback wrote exactly the tensor's bytes, or the offsets above are wrong */
            off_t end = ftello(f);
            if (!bad && (end < 0 || (uint64_t)end != at + t->nbytes)) bad = 1, short_fill = i;
        }
        at += t->nbytes;
        /* The last tensor is padded too, as ggml does: sizes stay multiples of the alignment. */
        bad = bad || pad(f, &at, w->align);
    }
    if (fclose(f) || bad) {
        if (short_fill >= 0)
            return xi_errf(err, errlen, "%s: tensor %s: the fill callback wrote the wrong size",
                           path, w->tensors[short_fill].name);
        return xi_errf(err, errlen, "%s: write failed", path);
    }
    return 0;
}
