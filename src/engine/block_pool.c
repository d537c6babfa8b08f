#include "engine/block_pool.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"

/* ---- free queue ------------------------------------------------------------------------ */

static void queue_push_tail(xi_block_pool *bp, int32_t id) {
    int32_t s = bp->n_blocks, last = bp->prev[s];
    bp->prev[id] = last;
    bp->next[id] = s;
    bp->next[last] = id;
    bp->prev[s] = id;
    bp->n_free++;
}

static void queue_remove(xi_block_pool *bp, int32_t id) {
    bp->next[bp->prev[id]] = bp->next[id];
    bp->prev[bp->next[id]] = bp->prev[id];
    bp->prev[id] = bp->next[id] = -1;
    bp->n_free--;
}

/* ---- hash map -------------------------------------------------------------------------- */

static uint32_t bucket_of(const xi_block_pool *bp, const xi_block_hash *h) {
    return (uint32_t)(h->lo ^ (h->hi >> 7)) & (bp->n_buckets - 1);
}

static void map_insert(xi_block_pool *bp, int32_t id) {
    /* Append at the chain's end: a lookup returns the earliest cached duplicate, which is the
     * one most likely shared already. */
    int32_t *link = &bp->bucket[bucket_of(bp, &bp->hash[id])];
    while (*link >= 0) link = &bp->hash_next[*link];
    *link = id;
    bp->hash_next[id] = -1;
    bp->has_hash[id] = 1;
    bp->n_cached++;
}

static void map_remove(xi_block_pool *bp, int32_t id) {
    int32_t *link = &bp->bucket[bucket_of(bp, &bp->hash[id])];
    while (*link != id) link = &bp->hash_next[*link];
    *link = bp->hash_next[id];
    bp->hash_next[id] = -1;
    bp->has_hash[id] = 0;
    bp->n_cached--;
}

/* ---- pool ------------------------------------------------------------------------------ */

int xi_block_pool_init(xi_block_pool *bp, int n_blocks, int enable_caching, char *err,
                       size_t errlen) {
    memset(bp, 0, sizeof *bp);
    if (n_blocks < 2)
        return xi_errf(err, errlen, "num_kv_blocks: %d blocks, need at least 2 (block 0 is null)",
                       n_blocks);
    bp->n_blocks = n_blocks;
    bp->enable_caching = enable_caching;
    bp->n_buckets = 16;
    while (bp->n_buckets < 2u * (uint32_t)n_blocks) bp->n_buckets <<= 1;
    bp->ref_cnt = xi_calloc((size_t)n_blocks, sizeof *bp->ref_cnt);
    bp->prev = xi_calloc((size_t)n_blocks + 1, sizeof *bp->prev);
    bp->next = xi_calloc((size_t)n_blocks + 1, sizeof *bp->next);
    bp->hash = xi_calloc((size_t)n_blocks, sizeof *bp->hash);
    bp->has_hash = xi_calloc((size_t)n_blocks, 1);
    bp->hash_next = xi_calloc((size_t)n_blocks, sizeof *bp->hash_next);
    bp->bucket = xi_calloc(bp->n_buckets, sizeof *bp->bucket);
    if (!bp->ref_cnt || !bp->prev || !bp->next || !bp->hash || !bp->has_hash ||
        !bp->hash_next || !bp->bucket) {
        xi_block_pool_free(bp);
        return xi_errf(err, errlen, "num_kv_blocks: out of memory for %d blocks", n_blocks);
    }
    memset(bp->bucket, 0xff, bp->n_buckets * sizeof *bp->bucket);
    memset(bp->hash_next, 0xff, (size_t)n_blocks * sizeof *bp->hash_next);
    int32_t s = n_blocks;
    bp->prev[s] = bp->next[s] = s;
    bp->prev[0] = bp->next[0] = -1;
    for (int32_t i = 1; i < n_blocks; i++) queue_push_tail(bp, i);
    return 0;
}

void xi_block_pool_free(xi_block_pool *bp) {
    free(bp->ref_cnt);
    free(bp->prev);
    free(bp->next);
    free(bp->hash);
    free(bp->has_hash);
    free(bp->hash_next);
    free(bp->bucket);
    memset(bp, 0, sizeof *bp);
}

double xi_block_pool_usage(const xi_block_pool *bp) {
    int usable = bp->n_blocks - 1;
    return usable > 0 ? 1.0 - (double)bp->n_free / usable : 0.0;
}

int xi_block_pool_get_new(xi_block_pool *bp, int n, int32_t *out) {
    if (n > bp->n_free) return -1;
    int32_t s = bp->n_blocks;
    for (int i = 0; i < n; i++) {
        int32_t id = bp->next[s];
        queue_remove(bp, id);
        if (bp->has_hash[id]) {
            map_remove(bp, id);
            bp->n_evictions++;
        }
        bp->ref_cnt[id] = 1;
        out[i] = id;
    }
    return 0;
}

int32_t xi_block_pool_lookup(const xi_block_pool *bp, const xi_block_hash *h) {
    if (!bp->enable_caching) return -1;
    for (int32_t id = bp->bucket[bucket_of(bp, h)]; id >= 0; id = bp->hash_next[id])
        if (xi_block_hash_eq(&bp->hash[id], h)) return id;
    return -1;
}

void xi_block_pool_touch(xi_block_pool *bp, const int32_t *ids, int n) {
    for (int i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id == 0) continue;
        if (bp->ref_cnt[id] == 0) queue_remove(bp, id);
        bp->ref_cnt[id]++;
    }
}

void xi_block_pool_release(xi_block_pool *bp, const int32_t *ids, int n) {
    for (int i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id == 0) continue;
        if (--bp->ref_cnt[id] == 0) queue_push_tail(bp, id);
    }
}

void xi_block_pool_cache(xi_block_pool *bp, int32_t id, const xi_block_hash *h) {
    if (!bp->enable_caching || id == 0 || bp->has_hash[id]) return;
    bp->hash[id] = *h;
    map_insert(bp, id);
}

int xi_block_pool_reset_prefix_cache(xi_block_pool *bp) {
    if (bp->n_free != bp->n_blocks - 1) return -1;
    for (int32_t id = 1; id < bp->n_blocks; id++)
        if (bp->has_hash[id]) map_remove(bp, id);
    return 0;
}

int xi_block_pool_free_order(const xi_block_pool *bp, int32_t *out, int max) {
    int n = 0;
    for (int32_t id = bp->next[bp->n_blocks]; id != bp->n_blocks && n < max; id = bp->next[id])
        out[n++] = id;
    return n;
}
