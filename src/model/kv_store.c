/* model/kv_store: the physical KV blocks. One allocation of
 * [n_blocks][n_layers][K|V][n_kv_heads][block_size][head_dim] elements: a block carries
 * every layer's K and V for its block_size tokens, so block ids are the only thing the
 * engine needs to know. */
#include <stdlib.h>

#include "base/base.h"
#include "model/model_internal.h"

struct xi_kv_store {
    void *base;     /* owned, xi_alloc_big */
    size_t bytes;
    int n_blocks, block_size, n_layers, n_kv_heads, head_dim;
    xi_dtype dtype;
};

int64_t xi_kv_block_bytes(const xi_config *c, int block_size, xi_dtype kv_dtype) {
    return (int64_t)c->n_layers * 2 * c->n_kv_heads * block_size * c->head_dim *
           (int64_t)xi_dtype_size(kv_dtype);
}

xi_kv_store *xi_kv_store_new(const xi_config *c, int n_blocks, int block_size, xi_dtype kv_dtype,
                             char *err, size_t errlen) {
    if (kv_dtype != XI_F32 && kv_dtype != XI_F16 && kv_dtype != XI_BF16) {
        xi_errf(err, errlen, "kv cache dtype %s is not supported", xi_dtype_name(kv_dtype));
        return NULL;
    }
    if (n_blocks < 2 || block_size < 1) {
        xi_errf(err, errlen, "KV cache too small: %d blocks of %d tokens", n_blocks, block_size);
        return NULL;
    }
    xi_kv_store *kv = calloc(1, sizeof *kv);
    if (!kv) return NULL;
    kv->bytes = (size_t)xi_kv_block_bytes(c, block_size, kv_dtype) * (size_t)n_blocks;
    kv->base = xi_alloc_big(kv->bytes);
    if (!kv->base) {
        xi_errf(err, errlen, "KV cache: cannot allocate %zu bytes", kv->bytes);
        free(kv);
        return NULL;
    }
    kv->n_blocks = n_blocks;
    kv->block_size = block_size;
    kv->n_layers = c->n_layers;
    kv->n_kv_heads = c->n_kv_heads;
    kv->head_dim = c->head_dim;
    kv->dtype = kv_dtype;
    return kv;
}

void xi_kv_store_free(xi_kv_store *kv) {
    if (!kv) return;
    xi_free_big(kv->base, kv->bytes);
    free(kv);
}

int xi_kv_store_blocks(const xi_kv_store *kv) { return kv->n_blocks; }
int xi_kv_store_block_size(const xi_kv_store *kv) { return kv->block_size; }
xi_dtype xi_kv_store_dtype(const xi_kv_store *kv) { return kv->dtype; }

xi_kv_view xi_kv_store_view(const xi_kv_store *kv, int layer) {
    const int64_t per_kv = (int64_t)kv->n_kv_heads * kv->block_size * kv->head_dim;
    const size_t es = xi_dtype_size(kv->dtype);
    xi_kv_view v = {
        .k = (char *)kv->base + (size_t)((int64_t)layer * 2 * per_kv) * es,
        .v = (char *)kv->base + (size_t)(((int64_t)layer * 2 + 1) * per_kv) * es,
        .dtype = kv->dtype,
        .block_size = kv->block_size,
        .n_kv_heads = kv->n_kv_heads,
        .head_dim = kv->head_dim,
        .block_stride = (int64_t)kv->n_layers * 2 * per_kv,
        .head_stride = (int64_t)kv->block_size * kv->head_dim,
    };
    return v;
}
