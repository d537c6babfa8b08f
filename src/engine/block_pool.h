/* engine/block_pool: the fixed set of KV blocks, their reference counts, the LRU free queue
 * and the hash -> block map of cached (full, hashed) blocks. Works on block ids only.
 *
 * As in vLLM v1: block 0 is the null block and is never handed out; every other block with
 * ref count 0 sits in the free queue, oldest-freed at the head. A fresh block is taken from the
 * head; if it still carries a hash (a cached block nobody uses) that hash is evicted then. A
 * prefix-cache hit on a free cached block "touches" it: ref++ and out of the queue.
 * Engine thread only. */
#ifndef XI_BLOCK_POOL_H
#define XI_BLOCK_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "engine/block_hash.h"

typedef struct xi_block_pool {
    int n_blocks;           /* including the null block 0 */
    int enable_caching;
    int n_free;             /* blocks in the free queue */
    int32_t *ref_cnt;       /* [n_blocks] owned */
    /* Intrusive doubly linked free queue over block ids; index n_blocks is the sentinel, so
     * remove-from-the-middle (a touch) is O(1). */
    int32_t *prev, *next;   /* [n_blocks + 1] owned; -1 when not queued */
    xi_block_hash *hash;    /* [n_blocks] owned; valid where has_hash */
    uint8_t *has_hash;      /* [n_blocks] owned */
    /* Hash map with separate chaining through hash_next; one entry per cached block, so two
     * blocks with the same hash (computed concurrently by two requests) both stay findable. */
    int32_t *bucket;        /* [n_buckets] owned, first block id of the chain or -1 */
    int32_t *hash_next;     /* [n_blocks] owned */
    uint32_t n_buckets;     /* power of two */
    int n_cached;           /* blocks with a hash */
    int64_t n_evictions;
} xi_block_pool;

/* n_blocks includes the null block, so n_blocks - 1 are usable (n_blocks >= 2). */
int xi_block_pool_init(xi_block_pool *bp, int n_blocks, int enable_caching, char *err,
                       size_t errlen);
void xi_block_pool_free(xi_block_pool *bp);

static inline int xi_block_pool_num_free(const xi_block_pool *bp) { return bp->n_free; }
/* Fraction of usable blocks held by requests (ref > 0). */
double xi_block_pool_usage(const xi_block_pool *bp);

/* Take n fresh blocks from the head of the free queue (evicting their hashes), ref = 1 each.
 * Returns 0, or -1 (nothing taken) when fewer than n are free. */
int xi_block_pool_get_new(xi_block_pool *bp, int n, int32_t *out);
/* The cached block with this hash, or -1. */
int32_t xi_block_pool_lookup(const xi_block_pool *bp, const xi_block_hash *h);
/* ref++ for each block, taking free ones out of the free queue (prefix-cache hit). */
void xi_block_pool_touch(xi_block_pool *bp, const int32_t *ids, int n);
/* ref-- for each block in the order given; blocks reaching 0 go to the queue tail in that
 * order. Callers pass a request's blocks tail first so its last blocks are evicted first. */
void xi_block_pool_release(xi_block_pool *bp, const int32_t *ids, int n);
/* Record that block id now holds the full block named h (no-op without caching). */
void xi_block_pool_cache(xi_block_pool *bp, int32_t id, const xi_block_hash *h);
/* Drop every hash of a free block (no block may be in use). Returns 0, or -1 if some are. */
int xi_block_pool_reset_prefix_cache(xi_block_pool *bp);
/* Free-queue order head to tail into out[n_free] (tests and debugging). Returns the count. */
int xi_block_pool_free_order(const xi_block_pool *bp, int32_t *out, int max);

#endif
